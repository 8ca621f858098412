// Verifying golden suites and comparing a subject's results against them (vectors/SPEC.md "Checking").
#include <fcntl.h>
#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "lowbit/exact.hpp"
#include "lowbit/io.hpp"
#include "lowbit/registry.hpp"
#include "lowbit/sha256.hpp"
#include "lowbit/text.hpp"
#include "lowbit/value.hpp"
#include "lowbit/vectors.hpp"

namespace lowbit::vectors {

namespace {

using json = nlohmann::json;

// The most bytes of one message line taken from a suite (a problem, a mismatch line) that are printed, and
// of a suite or unit name (the committed suites' longest is 55 bytes).
constexpr std::size_t echo_line_bytes = 1024;
constexpr std::size_t echo_name_bytes = 256;

// A relative path of a manifest: '/'-separated names, none empty, "." or "..", no backslash.
bool safe_path(const std::string& p) {
  if (p.empty() || p[0] == '/' || p.find('\\') != std::string::npos) return false;
  std::size_t start = 0;
  while (start <= p.size()) {
    const std::size_t end = std::min(p.find('/', start), p.size());
    const std::string part = p.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return true;
}

std::optional<std::uint64_t> parse_hex_text(std::string_view s) {
  bool wide = false;
  const std::optional<std::uint64_t> v = parse_hex(s, HexPrefix::optional, &wide);
  if (wide) return std::nullopt;
  return v;
}

struct ScalarLine {
  std::uint64_t input = 0, result = 0, flags = 0;
  bool has_flags = false;
  std::size_t line = 0;  // 1-based line number in its file
};

// Lines of a scalar file: '#' lines are comments; each other line is `input result [flags]` in hex.
// Returns the first problem ("line 7: ...") or an empty string.
std::string parse_scalar(const std::string& text, std::vector<ScalarLine>& out) {
  std::size_t pos = 0, number = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty() && line[0] == '#') continue;
    std::istringstream is(line);
    std::vector<std::string> f;
    for (std::string w; is >> w;) f.push_back(w);
    if (f.size() < 2 || f.size() > 3)
      return "line " + std::to_string(number) + ": expected `input result [flags]` in hex, got '" + line + "'";
    ScalarLine s;
    s.line = number;
    const auto a = parse_hex_text(f[0]), b = parse_hex_text(f[1]);
    if (!a || !b) return "line " + std::to_string(number) + ": not hex: '" + line + "'";
    s.input = *a;
    s.result = *b;
    if (f.size() == 3) {
      const auto c = parse_hex_text(f[2]);
      if (!c || *c > 0xff) return "line " + std::to_string(number) + ": flags are not a hex mask: '" + line + "'";
      s.flags = *c;
      s.has_flags = true;
    }
    out.push_back(s);
  }
  return "";
}

// A code and its value (the short form s*2^e for long decimals), of a format named in a manifest.
std::string code_and_value(const std::string& format, std::uint64_t code) {
  const Format* f = find_format(format);
  if (!f) return hex(code, 1) + " (?)";
  if (!f->valid_code(code)) return hex(code, f->hex_digits()) + " (?)";
  return lowbit::code_and_value(*f, code);
}

void mismatch(Unit& u, std::size_t max_details, const std::string& text) {
  ++u.mismatches;
  if (u.details.size() < max_details) u.details.push_back(text);
}

void compare_scalar(const std::string& suite, const json& entry, const std::string& golden_text,
                    const std::optional<std::string>& results, const std::string& results_error, Unit& u,
                    std::size_t max_details) {
  std::vector<ScalarLine> want;
  parse_scalar(golden_text, want);  // verified by its checksum: it parses
  u.cases = want.size();
  if (!results) {
    u.error = results_error;
    return;
  }
  std::vector<ScalarLine> got;
  if (const std::string e = parse_scalar(*results, got); !e.empty()) {
    u.error = "results file " + u.name + ": " + e;
    return;
  }
  // A results file with another number of cases (truncated, or padded) cannot be compared line by line:
  // an error of the unit, not a run of mismatches.
  if (got.size() != want.size()) {
    u.error = "results file " + u.name + " has " + std::to_string(got.size()) + " cases, the golden file " +
              std::to_string(want.size());
    return;
  }
  const std::string from = entry.value("from", ""), to = entry.value("to", "");
  for (std::size_t i = 0; i < want.size(); ++i) {
    const ScalarLine& w = want[i];
    const ScalarLine& g = got[i];
    const std::string where = suite + " " + u.name + " case " + std::to_string(i) + " (results line " +
                              std::to_string(g.line) + "): input " + code_and_value(from, w.input);
    if (g.input != w.input) {
      u.error = "results line " + std::to_string(g.line) + " has input " + code_and_value(from, g.input) +
                ", golden case " + std::to_string(i) + " " + code_and_value(from, w.input) +
                ": the results' inputs differ from the golden inputs (the subject ran on other data)";
      u.mismatches = 0;
      u.details.clear();
      return;
    }
    const bool flags_differ = g.has_flags && g.flags != w.flags;
    if (g.result != w.result || flags_differ)
      mismatch(u, max_details,
               where + ": expected " + code_and_value(to, w.result) + " flags " + hex(w.flags, 2) + ", actual " +
                   code_and_value(to, g.result) + (g.has_flags ? " flags " + hex(g.flags, 2) : ""));
  }
}

struct Npy {
  io::NpyArray a;
  std::size_t width() const { return io::dtype_bits(a.dtype) / 8; }
  std::uint64_t at(std::size_t i) const {
    std::uint64_t v = 0;
    const std::size_t w = width();
    for (std::size_t b = 0; b < w; ++b) v |= std::uint64_t{a.bytes[i * w + b]} << (8 * b);
    return v;
  }
};

std::optional<Npy> parse_npy_text(const std::string& bytes, const std::string& name, std::string& error) {
  try {
    // ml_dtypes arrays read as their codes: the manifest names the format each file holds.
    return Npy{
        io::parse_npy(std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()),
                      name, io::NpyRead{.untyped_codes = true})};
  } catch (const std::exception& e) {
    error = e.what();
    return std::nullopt;
  }
}

std::string index_text(const std::vector<std::uint64_t>& shape, std::size_t i) {
  std::vector<std::uint64_t> idx(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] ? i % shape[d] : 0;
    i = shape[d] ? i / shape[d] : 0;
  }
  std::string s = "[";
  for (std::size_t d = 0; d < idx.size(); ++d) s += (d ? ", " : "") + std::to_string(idx[d]);
  return s + "]";
}

// An expected file marked "optional": true (an intermediate stage of a contract suite) counts only when the
// subject gives it.
bool optional_file(const json& e) {
  const auto it = e.find("optional");
  return it != e.end() && it->is_boolean() && it->get<bool>();
}

void compare_case(const std::string& suite, const json& files, std::uint64_t index, const std::string& id,
                  const Golden& g, const Reader& results, Unit& u, std::size_t max_details) {
  std::optional<Npy> x;  // the case's "x" input, to show beside element mismatches
  for (const json& e : files) {
    if (e.value("case", -1) != static_cast<long long>(index) || e.value("role", "") != "input") continue;
    const std::string path = e.at("path");
    std::string err;
    if (e.value("name", "") == "x") x = parse_npy_text(g.files.at(path), path, err);
    std::string rerr;
    const std::optional<std::string> r = results(path, rerr);
    if (r && *r != g.files.at(path)) {
      std::string perr;
      const std::optional<Npy> gi = parse_npy_text(g.files.at(path), path, perr);
      const std::optional<Npy> ri = parse_npy_text(*r, path, perr);
      if (!ri || !gi || ri->a.bytes != gi->a.bytes || ri->a.shape != gi->a.shape)
        u.error = "input " + path + " differs from the golden input (the subject ran on other data)";
    }
  }
  for (const json& e : files) {
    if (e.value("case", -1) != static_cast<long long>(index) || e.value("role", "") != "expected") continue;
    const std::string path = e.at("path");
    const std::string format = e.value("format", "");
    std::string err;
    const std::optional<Npy> want = parse_npy_text(g.files.at(path), path, err);
    if (!want) {
      u.error = "golden file " + path + " unreadable: " + err;
      continue;
    }
    std::string rerr;
    const std::optional<std::string> r = results(path, rerr);
    if (!r && optional_file(e)) continue;  // not supplied: not compared, not counted
    u.cases += want->a.elements();
    if (!r) {
      if (u.error.empty()) u.error = rerr;
      continue;
    }
    std::string perr;
    const std::optional<Npy> got = parse_npy_text(*r, path, perr);
    if (!got) {
      if (u.error.empty()) u.error = "results file unreadable: " + perr;
      continue;
    }
    // A kernel's result saved from an ml_dtypes array (float8_e4m3fn as '<V1', bfloat16 as '<V2') reads as the
    // u8 / u16 codes the golden file holds.
    if (got->a.dtype != want->a.dtype || got->a.shape != want->a.shape) {
      if (u.error.empty())
        u.error = "results file " + path + " holds " + got->a.descr + " " + shape_text(got->a.shape) + ", expected " +
                  want->a.descr + " " + shape_text(want->a.shape);
      continue;
    }
    const std::size_t n = want->a.elements();
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint64_t w = want->at(i), a = got->at(i);
      if (w == a) continue;
      std::string text = suite + " " + id + " " + path + index_text(want->a.shape, i) + ":";
      if (x && e.value("name", "") == "codes" && x->a.elements() == n)
        text += " input " + code_and_value("f32", x->at(i));
      text += " expected " + code_and_value(format, w) + ", actual " + code_and_value(format, a);
      mismatch(u, max_details, text);
    }
  }
  // A unit in error is not compared: its mismatches (if any file of it compared) do not count.
  if (!u.error.empty()) {
    u.mismatches = 0;
    u.details.clear();
  }
}

// What makes a checksum-consistent manifest a suite that can be compared: a known kind, files, roles the
// checker knows, and for a tensor suite cases with distinct indices, each with an expected file.  A suite
// failing these would compare nothing, or leave a case out, and still "pass".
template <class Fail>
void check_structure(const json& manifest, const Fail& fail) {
  const std::string kind = manifest.value("kind", "");
  if (kind != "convert" && kind != "scheme" && kind != "gemm" && kind != "contract") {
    fail("manifest.json", "unknown kind '" + kind + "' (convert, scheme, gemm or contract)");
    return;
  }
  const json& files = manifest.at("files");
  if (files.empty()) fail("manifest.json", "\"files\" is empty: the suite compares nothing");
  std::set<std::string> paths;
  for (const json& e : files) {
    if (!e.is_object() || !e.contains("role")) continue;
    const std::string path = e.value("path", ""), role = e.at("role");
    if (!paths.insert(path).second) fail("manifest.json", "file '" + path + "' is listed twice");
    if (role != "input" && role != "expected")
      fail("manifest.json", "file '" + path + "' has unknown role '" + role + "' (input or expected)");
    else if (kind == "convert" && role != "expected")
      fail("manifest.json",
           "file '" + path + "' of a convert suite has role '" + role + "' (scalar files are expected)");
  }
  if (kind == "convert") return;
  const json cases = manifest.value("cases", json::array());
  if (cases.empty()) fail("manifest.json", "\"cases\" is empty or missing: the suite compares nothing");
  std::set<long long> indices, with_expected;
  for (const json& c : cases) {
    const long long index = c.value("index", -1LL);
    if (index < 0) fail("manifest.json", "a case lacks a non-negative \"index\"");
    else if (!indices.insert(index).second)
      fail("manifest.json",
           "case index " + std::to_string(index) + " is listed twice (one case would never be compared)");
  }
  for (const json& e : files) {
    if (!e.is_object()) continue;
    const json* c = e.contains("case") ? &e.at("case") : nullptr;
    const std::string path = e.value("path", "");
    if (!c || !c->is_number_integer() || !indices.count(c->get<long long>())) {
      fail("manifest.json", "file '" + path + "' belongs to no listed case");
      continue;
    }
    // An optional expected file (a contract's intermediate stage) is compared only where the subject gives
    // it: a case needs one that is not optional, or a subject could pass it by giving nothing.
    if (e.value("role", "") == "expected" && !optional_file(e)) with_expected.insert(c->get<long long>());
  }
  for (const long long i : indices)
    if (!with_expected.count(i))
      fail("manifest.json", "case " + std::to_string(i) + " has no expected file that a subject must give");
}

}  // namespace

std::uint64_t SuiteReport::cases() const {
  std::uint64_t n = 0;
  for (const Unit& u : units) n += u.compared() ? u.cases : 0;
  return n;
}
std::uint64_t SuiteReport::mismatches() const {
  std::uint64_t n = 0;
  for (const Unit& u : units) n += u.compared() ? u.mismatches : 0;
  return n;
}
std::uint64_t SuiteReport::errors() const {
  std::uint64_t n = 0;
  for (const Unit& u : units) n += !u.skipped && !u.error.empty() ? 1 : 0;
  return n;
}
std::uint64_t SuiteReport::skipped() const {
  std::uint64_t n = 0;
  for (const Unit& u : units) n += u.skipped ? 1 : 0;
  return n;
}
std::uint64_t SuiteReport::compared() const {
  std::uint64_t n = 0;
  for (const Unit& u : units) n += u.compared() ? 1 : 0;
  return n;
}

std::optional<Golden> load_golden(const Reader& read, const std::string& where, std::vector<std::string>& damage) {
  const std::size_t before = damage.size();
  auto fail = [&](const std::string& file, const std::string& why) {
    damage.push_back(where + "/" + file + ": " + why);
  };
  std::string err, sum_err;
  const std::optional<std::string> manifest = read("manifest.json", err);
  const std::optional<std::string> sum = read("manifest.json.sha256", sum_err);
  // The reader's message names the file and why (missing, unreadable, leading outside the folder).
  if (!manifest) {
    damage.push_back(err.empty() ? where + "/manifest.json: missing or unreadable" : err);
    return std::nullopt;
  }
  if (!sum) {
    damage.push_back(sum_err.empty() ? where + "/manifest.json.sha256: missing or unreadable" : sum_err);
    return std::nullopt;
  }
  if (*sum != checksum_line(*manifest)) {
    if (sum->size() < 64) fail("manifest.json.sha256", "not a SHA-256 line");
    else fail("manifest.json", "its SHA-256 differs from manifest.json.sha256 (the manifest or its checksum changed)");
    return std::nullopt;
  }
  Golden g;
  g.where = where;
  try {
    g.manifest = json::parse(*manifest);
  } catch (const json::exception& e) {
    fail("manifest.json", "not JSON: " + echo_text(e.what(), echo_line_bytes));
    return std::nullopt;
  }
  // Types first: a checksum-consistent manifest may still hold a field of the wrong JSON type (a hand-edited
  // set whose checksum was recomputed); that is a damaged set (exit 2), never an exception.
  if (g.manifest.is_object()) {
    const char* wrong = nullptr;
    if (g.manifest.contains("schema") && !g.manifest.at("schema").is_number_integer()) wrong = "schema";
    else if (g.manifest.contains("kind") && !g.manifest.at("kind").is_string()) wrong = "kind";
    else if (g.manifest.contains("cases") && !g.manifest.at("cases").is_array()) wrong = "cases";
    if (!wrong && g.manifest.contains("cases")) {
      for (const json& c : g.manifest.at("cases")) {
        if (!c.is_object()) wrong = "cases[]";
        else if (c.contains("index") && !c.at("index").is_number_integer()) wrong = "cases[].index";
        else if (c.contains("name") && !c.at("name").is_string()) wrong = "cases[].name";
        if (wrong) break;
      }
    }
    if (!wrong && g.manifest.contains("files") && g.manifest.at("files").is_array()) {
      for (const json& e : g.manifest.at("files")) {
        if (!e.is_object()) continue;  // reported below
        for (const char* k : {"path", "role", "sha256"})
          if (e.contains(k) && !e.at(k).is_string()) wrong = k;
        if (wrong) break;
      }
    }
    if (wrong) {
      fail("manifest.json", std::string("field \"") + wrong + "\" has the wrong JSON type");
      return std::nullopt;
    }
  }
  if (g.manifest.is_object() && g.manifest.value("schema", 0) >= 1 && g.manifest.value("schema", 0) < schema_version) {
    fail("manifest.json", "\"schema\": " + std::to_string(g.manifest.value("schema", 0)) +
                              " is an earlier file format (schema 1 labelled NVFP4's block scales e4m3); this lowbit "
                              "reads schema " +
                              std::to_string(schema_version) + ": regenerate the suite with `lowbit vectors generate`");
    return std::nullopt;
  }
  if (!g.manifest.is_object() || g.manifest.value("schema", 0) != schema_version || !g.manifest.contains("files") ||
      !g.manifest.at("files").is_array() || !g.manifest.contains("suite") || !g.manifest.at("suite").is_string()) {
    fail("manifest.json",
         "not a schema " + std::to_string(schema_version) + " manifest (\"schema\", \"suite\", \"files\")");
    return std::nullopt;
  }
  g.name = g.manifest.at("suite");
  for (const json& e : g.manifest.at("files")) {
    if (!e.is_object() || !e.contains("path") || !e.at("path").is_string() || !e.contains("sha256") ||
        !e.contains("role")) {
      fail("manifest.json", "a \"files\" entry lacks path, role or sha256");
      continue;
    }
    const std::string path = e.at("path");
    if (!safe_path(path)) {
      fail("manifest.json", "file path '" + echo_text(path) + "' leaves the suite folder");
      continue;
    }
    std::string ferr;
    const std::optional<std::string> bytes = read(path, ferr);
    if (!bytes) {
      // ferr names the file and why: missing, unreadable, not a regular file, or leading outside the folder.
      damage.push_back((ferr.empty() ? where + "/" + path + ": missing or unreadable" : ferr) +
                       " (listed in manifest.json)");
      continue;
    }
    if (Sha256::of(*bytes) != e.at("sha256").get<std::string>()) {
      fail(path, "its SHA-256 differs from manifest.json (the file changed)");
      continue;
    }
    g.files[path] = *bytes;
  }
  if (damage.size() == before) check_structure(g.manifest, fail);
  if (damage.size() != before) return std::nullopt;
  return g;
}

Golden golden_from(const Suite& s) {
  Golden g;
  g.name = s.name;
  g.where = s.name;
  g.manifest = json::parse(manifest_text(s));
  for (const File& f : s.files) g.files[f.path] = f.bytes;
  return g;
}

SuiteReport compare(const Golden& g, const Reader& results, const std::map<std::string, std::string>& skip,
                    std::size_t max_details) {
  SuiteReport rep;
  rep.name = g.name;
  const json& files = g.manifest.at("files");
  const std::string kind = g.manifest.value("kind", "");
  if (kind == "convert") {
    for (const json& e : files) {
      Unit u;
      u.name = e.at("path");
      if (const auto it = skip.find(u.name); it != skip.end()) {
        u.skipped = true;
        u.skip_reason = it->second;
        rep.units.push_back(u);
        continue;
      }
      std::string err;
      const std::optional<std::string> r = results(u.name, err);
      compare_scalar(g.name, e, g.files.at(u.name), r, err, u, max_details);
      rep.units.push_back(u);
    }
    return rep;
  }
  const json cases = g.manifest.value("cases", json::array());
  for (const json& c : cases) {
    const std::uint64_t index = c.value("index", 0);
    char id[32];
    std::snprintf(id, sizeof id, "case-%03llu", static_cast<unsigned long long>(index));
    Unit u;
    u.name = std::string(id) + " " + c.value("name", "");
    if (const auto it = skip.find(id); it != skip.end()) {
      u.skipped = true;
      u.skip_reason = it->second;
      rep.units.push_back(u);
      continue;
    }
    compare_case(g.name, files, index, u.name, g, results, u, max_details);
    rep.units.push_back(u);
  }
  return rep;
}

namespace {

std::string plural(std::uint64_t n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

bool glob_match(const std::string& pattern, const std::string& name) {
  return fnmatch(pattern.c_str(), name.c_str(), 0) == 0;
}

struct Totals {
  std::uint64_t units = 0, compared = 0, skipped = 0, errors = 0, cases = 0, mismatches = 0;
  explicit Totals(const std::vector<SuiteReport>& reports) {
    for (const SuiteReport& r : reports) {
      units += r.units.size();
      compared += r.compared();
      skipped += r.skipped();
      errors += r.errors();
      cases += r.cases();
      mismatches += r.mismatches();
    }
  }
};

std::string suite_status(const SuiteReport& r) {
  return r.mismatches() || r.errors() ? "FAILED" : r.cases() == 0 ? "nothing compared" : "ok";
}

// A listing of at most `max` lines, then how many were left out.
struct Listing {
  std::size_t max, shown = 0, total = 0;
  void line(const std::string& text) {
    ++total;
    if (shown < max) {
      // Names, paths and problems come from the suite's files: escaped and bounded (text.hpp echo_text), so
      // that a suite name holding a newline or an ANSI sequence cannot forge a line of this report.
      std::cout << "  " << echo_text(text, echo_line_bytes) << "\n";
      ++shown;
    }
  }
  void close(const std::string& what) const {
    if (total > shown)
      std::cout << "  (" << shown << " of " << total << " " << what << " shown; --max-report N shows more)\n";
  }
};

}  // namespace

std::vector<std::string> unmatched_requirements(const Requirements& req, const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (const std::string& pattern : req.require)
    if (std::none_of(names.begin(), names.end(), [&](const std::string& n) { return glob_match(pattern, n); }))
      out.push_back(pattern);
  return out;
}

std::vector<std::string> verdict(const std::vector<SuiteReport>& reports, const Requirements& req) {
  std::vector<std::string> why;
  const Totals t(reports);
  if (t.errors) why.push_back(plural(t.errors, "unit", "units") + " in error");
  if (t.mismatches) why.push_back(plural(t.mismatches, "mismatching case", "mismatching cases"));
  if (t.cases == 0)
    why.push_back("nothing was compared: every unit of " + plural(reports.size(), "suite", "suites") +
                  " was skipped or in error");
  else if (t.cases < req.min_cases)
    why.push_back(plural(t.cases, "case", "cases") + " compared, fewer than --min-cases " +
                  std::to_string(req.min_cases));
  for (const std::string& pattern : req.require)
    for (const SuiteReport& r : reports)
      if (glob_match(pattern, r.name) && r.cases() == 0)
        why.push_back("required suite " + r.name + " (--require " + pattern +
                      ") compared nothing: " + plural(r.skipped(), "unit", "units") + " skipped, " +
                      plural(r.errors(), "unit", "units") + " in error");
  return why;
}

void print_reports(const std::vector<SuiteReport>& reports, std::size_t max_report, const Requirements& req) {
  for (const SuiteReport& r : reports) {
    std::cout << echo_text(r.name, echo_name_bytes) << ": " << plural(r.cases(), "case", "cases") << " compared in "
              << r.compared() << " of " << plural(r.units.size(), "unit", "units") << ", " << r.mismatches()
              << " mismatching, " << r.skipped() << " skipped, " << r.errors() << " in error  " << suite_status(r)
              << "\n";
  }
  Listing errors{max_report}, skips{max_report}, lines{max_report};
  for (const SuiteReport& r : reports)
    for (const Unit& u : r.units)
      if (!u.skipped && !u.error.empty()) {
        if (errors.total == 0) std::cout << "errors:\n";
        errors.line(r.name + " " + u.name + ": " + u.error);
      }
  errors.close("errors");
  // Skips by suite and reason (which recipe or conversion the subject declined, what --only left out),
  // with the first units of each.
  for (const SuiteReport& r : reports) {
    std::vector<std::pair<std::string, std::vector<const Unit*>>> groups;
    for (const Unit& u : r.units) {
      if (!u.skipped) continue;
      auto g = std::find_if(groups.begin(), groups.end(), [&](const auto& e) { return e.first == u.skip_reason; });
      if (g == groups.end()) g = groups.insert(groups.end(), {u.skip_reason, {}});
      g->second.push_back(&u);
    }
    for (const auto& g : groups) {
      if (skips.total == 0) std::cout << "skipped:\n";
      std::string names;
      for (std::size_t i = 0; i < g.second.size() && i < 3; ++i) names += (i ? ", " : "") + g.second[i]->name;
      if (g.second.size() > 3) names += ", ...";
      skips.line(r.name + ": " + g.first + " (" + plural(g.second.size(), "unit", "units") + ": " + names + ")");
    }
  }
  skips.close("skip reasons");
  for (const SuiteReport& r : reports)
    for (const Unit& u : r.units) {
      if (!u.compared()) continue;
      for (std::size_t i = 0; i < u.mismatches; ++i) {
        if (lines.total == 0) std::cout << "mismatches:\n";
        if (i < u.details.size()) lines.line(u.details[i]);
        else ++lines.total;  // a mismatch whose line was not kept
      }
    }
  lines.close("mismatch lines");
  const Totals t(reports);
  const std::vector<std::string> why = verdict(reports, req);
  std::cout << (why.empty() ? "all match: " : "FAILED: ") << plural(reports.size(), "suite", "suites") << ", "
            << plural(t.cases, "case", "cases") << " compared in " << t.compared << " of "
            << plural(t.units, "unit", "units") << ", " << t.mismatches << " mismatching, " << t.skipped << " skipped, "
            << t.errors << " in error\n";
  for (const std::string& w : why) std::cout << "  why: " << w << "\n";
}

std::string junit_xml(const std::vector<SuiteReport>& reports, const std::string& name) {
  const Totals all(reports);
  const std::uint64_t failures = [&] {
    std::uint64_t n = 0;
    for (const SuiteReport& r : reports)
      for (const Unit& u : r.units) n += u.compared() && u.mismatches ? 1 : 0;
    return n;
  }();
  std::string x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x += "<testsuites name=\"" + xml_escape(name) + "\" tests=\"" + std::to_string(all.units) + "\" failures=\"" +
       std::to_string(failures) + "\" errors=\"" + std::to_string(all.errors) + "\" skipped=\"" +
       std::to_string(all.skipped) + "\">\n";
  for (const SuiteReport& r : reports) {
    std::uint64_t f = 0;
    for (const Unit& u : r.units) f += u.compared() && u.mismatches ? 1 : 0;
    x += "  <testsuite name=\"" + xml_escape(r.name) + "\" tests=\"" + std::to_string(r.units.size()) +
         "\" failures=\"" + std::to_string(f) + "\" errors=\"" + std::to_string(r.errors()) + "\" skipped=\"" +
         std::to_string(r.skipped()) + "\">\n";
    for (const Unit& u : r.units) {
      x += "    <testcase classname=\"" + xml_escape(r.name) + "\" name=\"" + xml_escape(u.name) + "\"";
      if (u.skipped) {
        x += ">\n      <skipped message=\"" + xml_escape(u.skip_reason) + "\"/>\n    </testcase>\n";
      } else if (!u.error.empty()) {
        x += ">\n      <error message=\"" + xml_escape(u.error) + "\" type=\"error\"/>\n    </testcase>\n";
      } else if (u.mismatches) {
        const std::string msg = std::to_string(u.mismatches) + " of " + std::to_string(u.cases) + " cases differ";
        std::string body;
        for (const std::string& d : u.details) body += d + "\n";
        x += ">\n      <failure message=\"" + xml_escape(msg) + "\" type=\"mismatch\">" + xml_escape(body) +
             "</failure>\n    </testcase>\n";
      } else {
        x += "/>\n";
      }
    }
    x += "  </testsuite>\n";
  }
  x += "</testsuites>\n";
  return x;
}

nlohmann::ordered_json report_json(const std::vector<SuiteReport>& reports, const std::string& command,
                                   const std::string& subject, std::size_t max_report, const Requirements& req) {
  using ojson = nlohmann::ordered_json;
  auto counts = [](ojson& j, std::uint64_t units, std::uint64_t compared, std::uint64_t skipped, std::uint64_t errors,
                   std::uint64_t cases, std::uint64_t mismatches) {
    j["units"] = units;
    j["units_compared"] = compared;
    j["units_skipped"] = skipped;
    j["units_in_error"] = errors;
    j["cases_compared"] = cases;
    j["mismatching_cases"] = mismatches;
  };
  const std::vector<std::string> why = verdict(reports, req);
  ojson out;
  out["schema"] = 1;
  out["command"] = command;
  out["subject"] = subject.empty() ? ojson() : ojson(subject);
  out["passed"] = why.empty();
  out["failures"] = why;
  out["max_report"] = max_report;
  const Totals t(reports);
  ojson totals = ojson::object();
  totals["suites"] = reports.size();
  counts(totals, t.units, t.compared, t.skipped, t.errors, t.cases, t.mismatches);
  out["totals"] = totals;
  ojson suites = ojson::array();
  for (const SuiteReport& r : reports) {
    ojson s;
    s["suite"] = r.name;
    s["status"] = suite_status(r);
    counts(s, r.units.size(), r.compared(), r.skipped(), r.errors(), r.cases(), r.mismatches());
    ojson errors = ojson::array(), skipped = ojson::array(), first = ojson::array();
    for (const Unit& u : r.units) {
      if (u.skipped && skipped.size() < max_report) skipped.push_back({{"unit", u.name}, {"reason", u.skip_reason}});
      if (!u.skipped && !u.error.empty() && errors.size() < max_report)
        errors.push_back({{"unit", u.name}, {"error", u.error}});
      if (u.compared())
        for (const std::string& d : u.details)
          if (first.size() < max_report) first.push_back({{"unit", u.name}, {"text", d}});
    }
    s["errors"] = errors;
    s["skipped"] = skipped;
    s["first_mismatches"] = first;
    suites.push_back(s);
  }
  out["suites"] = suites;
  return out;
}

namespace {

// True when `p` is `root` or lies under it, both canonical (no ".", "..", or symbolic link left in them).
bool is_under(const std::filesystem::path& p, const std::filesystem::path& root) {
  auto r = root.begin();
  auto q = p.begin();
  for (; r != root.end(); ++r, ++q)
    if (q == p.end() || *q != *r) return false;
  return true;
}

}  // namespace

// vectors/SPEC.md: the paths of a suite never leave its folder.  A manifest's path is checked by safe_path
// (no "..", no absolute path); here every path is resolved (std::filesystem::canonical, symbolic links
// included) and refused when the file it reaches lies outside the folder, so that a link planted inside a
// suite cannot make the checker read (and a damaged-set message echo) a file elsewhere.  The file reached
// is then opened without following a final link and without blocking (a FIFO is refused, not waited on).
Reader folder_reader(const std::string& dir, const std::string& what) {
  return [dir, what](const std::string& path, std::string& error) -> std::optional<std::string> {
    namespace fs = std::filesystem;
    const fs::path p = fs::path(dir) / path;
    if (!safe_path(path)) {
      error = what + p.string() + ": the path leaves the folder (an absolute path, \"..\" or an empty name)";
      return std::nullopt;
    }
    std::error_code ec;
    const fs::path root = fs::canonical(dir, ec);
    if (ec) {
      error = what + p.string() + ": missing (" + dir + " cannot be resolved: " + ec.message() + ")";
      return std::nullopt;
    }
    const fs::path real = fs::canonical(p, ec);
    if (ec) {
      error = what + p.string() + ": missing";
      return std::nullopt;
    }
    if (!is_under(real, root)) {
      error = what + p.string() + ": leads outside the folder " + dir + " through a symbolic link (to " +
              real.string() + "); paths never leave the folder";
      return std::nullopt;
    }
    const int fd = ::open(real.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st {};
    if (fd < 0 || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      error = what + p.string() + (fd < 0 ? ": unreadable" : ": not a regular file");
      if (fd >= 0) ::close(fd);
      return std::nullopt;
    }
    if (static_cast<std::uint64_t>(st.st_size) > io::max_input_bytes()) {
      ::close(fd);
      error = what + p.string() + ": " + std::to_string(st.st_size) + " bytes, over the limit of " +
              std::to_string(io::max_input_bytes()) + " bytes per input";
      return std::nullopt;
    }
    std::string bytes;
    bytes.reserve(static_cast<std::size_t>(st.st_size));
    char buf[1 << 16];
    for (;;) {
      const ssize_t got = ::read(fd, buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) {
        ::close(fd);
        error = what + p.string() + ": unreadable";
        return std::nullopt;
      }
      if (got == 0) break;
      bytes.append(buf, static_cast<std::size_t>(got));
    }
    ::close(fd);
    return bytes;
  };
}

}  // namespace lowbit::vectors
