// The file readers: .npy and safetensors (lowbit/io.hpp) and golden-vector suites (lowbit/vectors.hpp:
// manifest, checksum line, scalar text files, .npy tensors, and a subject's results).
// A reader either returns a valid result or reports the file as malformed; it never crashes, hangs,
// allocates what the file only claims, or lets another exception escape.
//
// The first byte picks the reader:
//   0  parse_npy; a valid array is re-encoded and read back identically
//   1  parse_safetensors; likewise
//   2  a golden suite as the bytes say (checksums included): load_golden, then compare
//   3  a golden suite whose checksums the harness makes right first, so that the manifest's contents,
//      the golden files and the results reach the comparison
// Suites (2, 3) are sections: the manifest, then "\n@@@@ PATH\n" and each file's bytes; PATH
// "results/..." is a file of the subject's results, "manifest.json.sha256" the checksum line.
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>

#include "fuzz_support.hpp"
#include "lowbit/io.hpp"
#include "lowbit/sha256.hpp"
#include "lowbit/vectors.hpp"

using namespace lowbit;
namespace V = lowbit::vectors;

namespace {

void check_tensor(const io::Tensor& t, const char* what) {
  try {
    t.check_consistent();
  } catch (const std::invalid_argument& e) {
    fuzz::fail(std::string(what) + ": a parsed tensor is inconsistent: " + e.what());
  }
}

void npy(std::span<const std::uint8_t> bytes) {
  io::NpyArray a;
  try {
    a = io::parse_npy(bytes, "fuzz.npy");
  } catch (const io::FileError& e) {
    if (std::string(e.what()).rfind("fuzz.npy: ", 0) != 0) fuzz::fail(std::string("npy message: ") + e.what());
    return;
  }
  check_tensor(a, "npy");
  const std::vector<std::uint8_t> again = io::encode_npy(a.dtype, a.shape, a.bytes);
  const io::NpyArray b = io::parse_npy(again, "again.npy");
  if (b.dtype != a.dtype || b.shape != a.shape || b.bytes != a.bytes) fuzz::fail("npy: re-encoded array differs");
}

void safetensors(std::span<const std::uint8_t> bytes) {
  io::Safetensors s;
  try {
    s = io::parse_safetensors(bytes, "fuzz.safetensors");
  } catch (const io::FileError& e) {
    if (std::string(e.what()).rfind("fuzz.safetensors: ", 0) != 0)
      fuzz::fail(std::string("safetensors message: ") + e.what());
    return;
  }
  for (const auto& [name, t] : s.tensors) check_tensor(t, "safetensors");
  std::vector<std::uint8_t> again;
  try {
    again = io::encode_safetensors(s.tensors, s.metadata);
  } catch (const std::invalid_argument&) {
    return;  // a tensor named "__metadata__" cannot be written back
  }
  const io::Safetensors b = io::parse_safetensors(again, "again.safetensors");
  if (b.metadata != s.metadata || b.tensors.size() != s.tensors.size()) fuzz::fail("safetensors: re-encoded file differs");
  for (const auto& [name, t] : s.tensors) {
    const io::Tensor& u = b.tensors.at(name);
    if (u.dtype != t.dtype || u.shape != t.shape || u.bytes != t.bytes) fuzz::fail("safetensors: tensor " + name + " differs");
  }
}

void check_suite(std::map<std::string, std::string>& files,
                 const std::function<V::Reader(const std::string&)>& reader);

void suite(std::string_view text, bool fix_checksums) {
  std::map<std::string, std::string> files;
  const std::string_view marker = "\n@@@@ ";
  std::size_t pos = text.find(marker);
  files["manifest.json"] = std::string(text.substr(0, pos));
  while (pos != std::string_view::npos) {
    const std::size_t name_start = pos + marker.size();
    const std::size_t nl = text.find('\n', name_start);
    if (nl == std::string_view::npos) break;
    const std::string name(text.substr(name_start, nl - name_start));
    pos = text.find(marker, nl + 1);
    files[name] = std::string(text.substr(nl + 1, pos == std::string_view::npos ? std::string_view::npos : pos - nl - 1));
  }
  if (fix_checksums) {
    try {
      nlohmann::json m = nlohmann::json::parse(files["manifest.json"]);
      if (m.is_object() && m.contains("files") && m["files"].is_array())
        for (nlohmann::json& e : m["files"])
          if (e.is_object() && e.contains("path") && e["path"].is_string())
            e["sha256"] = Sha256::of(files[e["path"].get<std::string>()]);
      files["manifest.json"] = m.dump(2) + "\n";
    } catch (const nlohmann::json::exception&) {
    }
    files["manifest.json.sha256"] = V::checksum_line(files["manifest.json"]);
  }
  const std::function<V::Reader(const std::string&)> reader = [&](const std::string& prefix) -> V::Reader {
    return [&files, prefix](const std::string& path, std::string& error) -> std::optional<std::string> {
      const auto it = files.find(prefix + path);
      if (it == files.end()) {
        error = "missing";
        return std::nullopt;
      }
      return it->second;
    };
  };
  check_suite(files, reader);
}

void check_suite(std::map<std::string, std::string>& files,
                 const std::function<V::Reader(const std::string&)>& reader) {
  (void)files;
  std::vector<std::string> damage;
  const std::optional<V::Golden> g = V::load_golden(reader(""), "suite", damage);
  if (!g) {
    if (damage.empty()) fuzz::fail("load_golden: rejected without naming the damage");
    return;
  }
  if (!damage.empty()) fuzz::fail("load_golden: accepted a suite it calls damaged");
  std::map<std::string, std::string> skip;
  // `lowbit check` reports a JSON exception from compare (a checksum-consistent manifest whose content it
  // cannot use) as "golden set damaged", exit 2 (`lowbit check`, tools/lowbit/vectors_cmd.cpp); the same here.
  try {
    const V::SuiteReport rep = V::compare(*g, reader("results/"), skip, 3);
    (void)rep.cases();
    (void)rep.mismatches();
    const std::string xml = V::junit_xml({rep}, "fuzz");
    (void)xml;
  } catch (const nlohmann::json::exception&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::span<const std::uint8_t> rest(data + 1, size - 1);
  switch (data[0] % 4) {
    case 0: npy(rest); break;
    case 1: safetensors(rest); break;
    case 2: suite(std::string_view(reinterpret_cast<const char*>(rest.data()), rest.size()), false); break;
    case 3: suite(std::string_view(reinterpret_cast<const char*>(rest.data()), rest.size()), true); break;
  }
  return 0;
}
