#include "lowbit/gate.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <span>

#include "gate_plugin.hpp"
#include "lowbit/error.hpp"
#include "lowbit/io.hpp"
#include "lowbit/registry.hpp"
#include "lowbit/text.hpp"

namespace lowbit::gate {

namespace {

namespace V = lowbit::vectors;
namespace fs = std::filesystem;
using json = nlohmann::json;

std::string error_of(const Subject& p) { return p.last_error ? p.last_error() : "(no message)"; }

// A status no plugin returns: an exception that left an entry point in process.
constexpr int thrown_status = -0x7477;

// Why a call that neither succeeded nor declined has no result.
std::string call_error(const Subject& p, const std::string& entry, int rc) {
  if (rc == LOWBIT_PLUGIN_ERROR) return "the plugin's " + entry + " failed: " + error_of(p);
  if (rc == thrown_status) return "the plugin's " + entry + " threw a C++ exception";
  return "the plugin's " + entry + " returned " + std::to_string(rc) +
         ", not a status of plugin.h (0 ok, 1 unsupported, 2 error)";
}

std::size_t code_bytes(const Format& f) {
  const int b = f.storage_bits();
  return b <= 8 ? 1 : b <= 16 ? 2 : b <= 32 ? 4 : 8;
}

struct GateRun {
  std::map<std::string, std::string> results;  // path -> bytes
  std::map<std::string, std::string> errors;   // path -> why there is no result
  std::map<std::string, std::string> skip;     // unit -> reason
};

void gate_convert(const Subject& p, const V::Golden& g, GateRun& run) {
  for (const json& e : g.manifest.at("files")) {
    const std::string path = e.at("path");
    if (!p.convert) {
      run.skip[path] = "the plugin has no convert entry point (NULL in its table)";
      continue;
    }
    const std::string from_name = e.at("from"), to_name = e.at("to");
    const Format* from = find_format(from_name);
    const Format* to = find_format(to_name);
    // The golden lines (verified): inputs in order.
    std::vector<std::uint64_t> inputs;
    const std::string& text = g.files.at(path);
    std::size_t pos = 0;
    while (pos < text.size()) {
      const std::size_t end = text.find('\n', pos);
      const std::string line = text.substr(pos, end - pos);
      pos = end == std::string::npos ? text.size() : end + 1;
      if (line.empty() || line[0] == '#') continue;
      inputs.push_back(std::stoull(line.substr(0, line.find(' ')), nullptr, 16));
    }
    const std::size_t wi = code_bytes(*from), wo = code_bytes(*to);
    std::vector<std::uint8_t> in(inputs.size() * wi), out(inputs.size() * wo);
    for (std::size_t i = 0; i < inputs.size(); ++i)
      for (std::size_t b = 0; b < wi; ++b) in[i * wi + b] = static_cast<std::uint8_t>(inputs[i] >> (8 * b));
    std::vector<std::uint8_t> flags(inputs.size());
    int flags_written = 0;
    const std::string profile = g.manifest.value("profile", "");
    const std::string rounding = e.at("rounding"), overflow = e.at("overflow"), subnormals = e.at("subnormals"),
                      tininess = e.at("tininess");
    const lowbit_policy pol{profile.c_str(), rounding.c_str(), overflow.c_str(), subnormals.c_str(), tininess.c_str()};
    const int rc = p.convert(from_name.c_str(), to_name.c_str(), &pol, in.data(), inputs.size(), out.data(),
                             flags.data(), &flags_written);
    if (rc == LOWBIT_PLUGIN_UNSUPPORTED) {
      run.skip[path] = "the plugin declined " + from_name + " -> " + to_name + " (" + profile + " " + rounding + " " +
                       overflow + " " + subnormals + " " + tininess + ")";
      continue;
    }
    if (rc != LOWBIT_PLUGIN_OK) {
      run.errors[path] = call_error(p, "convert", rc);
      continue;
    }
    std::string body;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      std::uint64_t code = 0;
      for (std::size_t b = 0; b < wo; ++b) code |= std::uint64_t{out[i * wo + b]} << (8 * b);
      // Appends, not `" " + std::string&&`: GCC 12 reports a false -Wrestrict on that form here.
      body.append(hex(inputs[i], from->hex_digits()), 2).append(1, ' ').append(hex(code, to->hex_digits()), 2);
      if (flags_written) body.append(1, ' ').append(hex(flags[i], 2), 2);
      body += '\n';
    }
    run.results[path] = body;
  }
}

// The plugin entry a tensor suite's cases call.
enum class Entry : std::uint8_t { quantize, gemm, contract };

void gate_tensors(const Subject& p, const V::Golden& g, GateRun& run, Entry which) {
  const auto& entry = which == Entry::gemm ? p.gemm : which == Entry::contract ? p.contract : p.quantize;
  const std::string entry_name = which == Entry::gemm ? "gemm" : which == Entry::contract ? "contract" : "quantize";
  for (const json& c : g.manifest.value("cases", json::array())) {
    const long long index = c.value("index", 0LL);
    char id[32];
    std::snprintf(id, sizeof id, "case-%03lld", index);
    if (!entry) {
      run.skip[id] = "the plugin has no " + entry_name + " entry point (NULL in its table" +
                     (which == Entry::contract ? ", or a table of ABI version 1's first size)" : ")");
      continue;
    }
    struct Held {
      io::NpyArray npy;
      std::string name, format, dtype, path;
    };
    std::vector<Held> ins, outs;
    for (const json& e : g.manifest.at("files")) {
      if (e.value("case", -1LL) != index) continue;
      const std::string path = e.at("path");
      const std::string& bytes = g.files.at(path);
      Held h{
          io::parse_npy(
              std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()), path),
          e.value("name", ""), e.value("format", ""), e.value("dtype", ""), path};
      if (e.at("role") == "input") {
        ins.push_back(std::move(h));
      } else {
        std::fill(h.npy.bytes.begin(), h.npy.bytes.end(), 0);
        outs.push_back(std::move(h));
      }
    }
    auto arrays = [](std::vector<Held>& v) {
      std::vector<lowbit_array> a;
      for (Held& h : v)
        a.push_back({h.name.c_str(), h.format.c_str(), h.dtype.c_str(), io::dtype_bits(h.npy.dtype) / 8,
                     static_cast<std::uint32_t>(h.npy.shape.size()), h.npy.shape.data(), h.npy.elements(),
                     h.npy.bytes.data()});
      return a;
    };
    std::vector<lowbit_array> in_arrays = arrays(ins), out_arrays = arrays(outs);
    // A contract case's request is plugin.h's: the suite's contract document, the pass and the seed.
    json request = c.at("recipe");
    if (which == Entry::contract) request["contract"] = g.manifest.value("document", json::object());
    const std::string recipe = request.dump();
    const int rc = entry(recipe.c_str(), in_arrays.data(), static_cast<std::uint32_t>(in_arrays.size()),
                         out_arrays.data(), static_cast<std::uint32_t>(out_arrays.size()));
    if (rc == LOWBIT_PLUGIN_UNSUPPORTED) {
      run.skip[id] =
          "the plugin's " + entry_name + " declined recipe " +
          (which == Entry::contract ? c.at("recipe").dump() + " of " + g.manifest.value("contract", "?") : recipe);
      continue;
    }
    const std::string failure = rc == LOWBIT_PLUGIN_OK ? "" : call_error(p, entry_name, rc);
    for (std::size_t i = 0; i < outs.size(); ++i) {
      Held& h = outs[i];
      if (rc != LOWBIT_PLUGIN_OK) {
        run.errors[h.path] = failure;
        continue;
      }
      // A contract's stage left unwritten (count 0) is not supplied (plugin.h).
      if (which == Entry::contract && out_arrays[i].count == 0) continue;
      const std::vector<std::uint8_t> bytes = io::encode_npy(h.npy.dtype, h.npy.shape, h.npy.bytes);
      run.results[h.path] = std::string(bytes.begin(), bytes.end());
    }
  }
}

}  // namespace

namespace {

// ---- the plugin's table --------------------------------------------------------------------------------

// Why a table returned by lowbit_plugin_entry cannot be used (plugin.h's versioning rule), or "".  A
// function pointer must lie in a loaded library (dladdr): a table shorter than it claims, or one built
// from garbage, is refused before anything is called through it.
std::string table_problem(const lowbit_plugin* table) {
  if (!table) return "cannot serve plugin ABI version " + std::to_string(LOWBIT_PLUGIN_ABI_VERSION);
  if (table->abi_version != LOWBIT_PLUGIN_ABI_VERSION)
    return "speaks plugin ABI version " + std::to_string(table->abi_version) + ", this lowbit " +
           std::to_string(LOWBIT_PLUGIN_ABI_VERSION);
  if (table->struct_size < LOWBIT_PLUGIN_TABLE_SIZE_V1)
    return "returns a table of struct_size " + std::to_string(table->struct_size) + " bytes; ABI version " +
           std::to_string(LOWBIT_PLUGIN_ABI_VERSION) + " needs " + std::to_string(LOWBIT_PLUGIN_TABLE_SIZE_V1) +
           " at least";
  const std::pair<const char*, const void*> entries[] = {
      {"convert", reinterpret_cast<const void*>(table->convert)},
      {"quantize", reinterpret_cast<const void*>(table->quantize)},
      {"gemm", reinterpret_cast<const void*>(table->gemm)},
      {"last_error", reinterpret_cast<const void*>(table->last_error)},
      {"contract", reinterpret_cast<const void*>(detail::contract_entry(*table))}};
  for (const auto& entry : entries) {
    Dl_info info;
    if (entry.second && dladdr(entry.second, &info) == 0) {
      char where[32];
      std::snprintf(where, sizeof where, "%p", entry.second);
      return std::string("returns a table whose ") + entry.first + " pointer " + where + " lies in no loaded library";
    }
  }
  return "";
}

}  // namespace

namespace detail {

Opened open_plugin(const std::string& where, const std::string& path) {
  Opened o;
  o.handle = dlopen(where.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!o.handle) {
    const char* e = dlerror();
    o.refused = "cannot load '" + path + "': " + (e ? e : "(no message)");
    return o;
  }
  void* sym = dlsym(o.handle, LOWBIT_PLUGIN_ENTRY_SYMBOL);
  if (!sym) {
    o.refused = "'" + path + "' does not export " LOWBIT_PLUGIN_ENTRY_SYMBOL;
    return o;
  }
  lowbit_plugin_entry_fn entry;
  static_assert(sizeof entry == sizeof sym);
  std::memcpy(&entry, &sym, sizeof entry);
  o.table = entry(LOWBIT_PLUGIN_ABI_VERSION);
  if (const std::string why = table_problem(o.table); !why.empty()) o.refused = "'" + path + "' " + why;
  return o;
}

}  // namespace detail

namespace {

using detail::open_plugin;
using detail::Opened;

Subject in_process_subject(const std::string& where, const std::string& path) {
  const Opened opened = open_plugin(where, path);
  if (!opened.refused.empty()) {
    if (opened.handle) dlclose(opened.handle);
    throw ArgumentError("plugin", opened.refused);
  }
  // The handle closes when the last copy of the subject's entry points goes.
  const std::shared_ptr<void> library(opened.handle, [](void* h) { dlclose(h); });
  const lowbit_plugin* table = opened.table;
  Subject s;
  s.name = table->name ? table->name : "(unnamed)";
  if (table->convert)
    s.convert = [library, f = table->convert](const char* from, const char* to, const lowbit_policy* policy,
                                              const void* in, std::uint64_t n, void* out, std::uint8_t* flags,
                                              int* flags_written) {
      try {
        return f(from, to, policy, in, n, out, flags, flags_written);
      } catch (...) { return thrown_status; }
    };
  auto tensor_entry = [&](auto f) -> decltype(s.quantize) {
    if (!f) return {};
    return [library, f](const char* recipe, const lowbit_array* in, std::uint32_t n_in, lowbit_array* out,
                        std::uint32_t n_out) {
      try {
        return f(recipe, in, n_in, out, n_out);
      } catch (...) { return thrown_status; }
    };
  };
  s.quantize = tensor_entry(table->quantize);
  s.gemm = tensor_entry(table->gemm);
  s.contract = tensor_entry(detail::contract_entry(*table));
  s.last_error = [library, f = table->last_error]() -> std::string {
    const char* e = f ? f() : nullptr;
    return e ? e : "(no message)";
  };
  return s;
}

}  // namespace

Subject load_plugin(const std::string& path, const LoadOptions& options) {
  // dlopen searches the library path for a bare name; a path with a slash is taken as it is.
  const std::string where = path.find('/') == std::string::npos ? "./" + path : path;
  std::error_code ec;
  if (!fs::is_regular_file(where, ec)) throw ArgumentError("plugin", "'" + path + "' is not a file");
  if (options.isolation == Isolation::in_process) return in_process_subject(where, path);
  return detail::worker_subject(where, path, options);
}

V::SuiteReport run_suite(const Subject& subject, const V::Golden& g, std::size_t max_details) {
  GateRun run;
  const std::string kind = g.manifest.value("kind", "");
  if (kind == "convert") gate_convert(subject, g, run);
  else
    gate_tensors(subject, g, run,
                 kind == "gemm"       ? Entry::gemm
                 : kind == "contract" ? Entry::contract
                                      : Entry::quantize);
  const V::Reader reader = [&run](const std::string& path, std::string& error) -> std::optional<std::string> {
    if (const auto it = run.results.find(path); it != run.results.end()) return it->second;
    const auto e = run.errors.find(path);
    error = e != run.errors.end() ? e->second : path + ": no result";
    return std::nullopt;
  };
  return V::compare(g, reader, run.skip, max_details);
}

}  // namespace lowbit::gate
