// Golden vectors (vectors/SPEC.md): the generator behind `lowbit vectors`, the comparison behind
// `lowbit check` and `lowbit gate`.  A suite is a folder: files (scalar text or .npy), manifest.json
// naming each file's role and SHA-256, and manifest.json.sha256 protecting the manifest.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "lowbit/names.hpp"

namespace lowbit::vectors {

// Bumped when the files a generator writes change for a given seed (a new case, another order).
inline constexpr int generator_version = 2;
// Bumped when the file formats of vectors/SPEC.md change.  2: NVFP4's block scales are labelled ue4m3 (the
// positive E4M3 codes cuBLASLt and the GEMM suites call UE4M3), no longer e4m3.
inline constexpr int schema_version = 2;
inline constexpr std::uint64_t default_seed = 1;

struct File {
  std::string path;     // relative to the suite folder, '/'-separated
  std::string role;     // "input" or "expected" (a scalar file is "expected": its lines carry their inputs)
  std::string bytes;    // the file's content
  nlohmann::json meta;  // further manifest fields of this file (an object)
};

struct Suite {
  std::string name;
  nlohmann::json manifest;  // every field but "files"
  std::vector<File> files;  // sorted by path
};

struct SuiteInfo {
  std::string name;
  std::string description;
  bool committed;  // part of the golden sets under vectors/golden
};

// Every suite, in `lowbit vectors list` order.
std::vector<SuiteInfo> suites();
// Generate a suite in memory.  std::invalid_argument for an unknown name.
Suite generate(const std::string& name, std::uint64_t seed);

// ---- suites at chosen shapes and layouts (vectors/SPEC.md section 3, "On-demand shapes") ------------

// How a GEMM operand is stored: `n` row-major as the product reads it (A [M, K], B [K, N]), `t` transposed
// (A [K, M], B [N, K]); a kernel whose operands are both contiguous along K runs `nt`.
enum class Storage : std::uint8_t { n, t };
inline constexpr Named<Storage> storage_names[] = {
    {Storage::n, "n", "row-major as the product reads it: A [M, K], B [K, N]"},
    {Storage::t, "t", "transposed: A [K, M], B [N, K] (contiguous along K)"},
};
constexpr const auto& names_of(Storage) { return storage_names; }

struct Layout {
  Storage a = Storage::n;
  Storage b = Storage::n;
};

struct GemmShape {
  int m = 0, n = 0, k = 0;
};
struct TensorShape {
  int rows = 0, cols = 0;
};

// Limits of an on-demand suite: every dimension in [1, max_dimension], every operand, scale or result array
// at most max_elements elements, at most max_shapes shapes.
inline constexpr long long max_dimension = 1 << 20;
inline constexpr long long max_elements = 1ll << 24;  // 4096 x 4096
inline constexpr std::size_t max_shapes = 64;

// `--shape` and `--layout` as given: nullopt when the option is absent; an empty shape text asks for the
// defaults (GEMMs: M and N in {64, 129, 256}, K in {128, 4112}; schemes: 128x128 and 257x4096).
struct ShapeRequest {
  std::optional<std::string> shape;
  std::optional<std::string> layout;
  bool given() const { return shape.has_value() || layout.has_value(); }
};

// Strict parsers of the option texts: the whole text, decimal digits only, every limit above checked
// without overflow.  Throw ArgumentError ("shape" / "layout") naming what is wrong.
std::vector<GemmShape> parse_gemm_shapes(const std::string& text);
std::vector<TensorShape> parse_tensor_shapes(const std::string& text);
Layout parse_layout(const std::string& text);

// A suite at the requested shapes and layout (on demand, never committed); without a request it is
// generate(name, seed).  GEMM suites take MxNxK shapes and a layout, scheme suites RxC shapes, contract
// suites MxNxK layer shapes (X [M, K], W [N, K], dY [M, N]); anything else is an ArgumentError naming the
// option.
Suite generate(const std::string& name, std::uint64_t seed, const ShapeRequest& request);
// The manifest text (with "files") and the checksum line of vectors/SPEC.md.
std::string manifest_text(const Suite& s);
std::string checksum_line(const std::string& manifest);

// ---- checking ----------------------------------------------------------------------------------

// Reads a file of a suite by relative path; nullopt with `error` set when it is missing or unreadable.
using Reader = std::function<std::optional<std::string>(const std::string& path, std::string& error)>;

// A verified golden suite: its manifest checked against its checksum and every file against the manifest.
struct Golden {
  std::string name;  // the suite's name (from the manifest)
  std::string where;  // for messages: the folder
  nlohmann::json manifest;
  std::map<std::string, std::string> files;  // path -> bytes, every file the manifest lists
};

// Load and verify a golden suite: on damage returns nullopt and appends messages naming the file.
std::optional<Golden> load_golden(const Reader& read, const std::string& where, std::vector<std::string>& damage);
// A golden suite generated in memory (the gate's source); always intact.
Golden golden_from(const Suite& s);

struct Mismatch {
  std::string text;  // one line: the file, case index, input, expected and actual codes and values
};

// The outcome of one test unit (a scalar file, or one case of a tensor suite).  A unit is skipped (the
// subject declined it or it was not selected), in error (it could not be compared: results missing,
// truncated or malformed, the subject failed or crashed), or compared: then its cases all count, and
// `mismatches` of them differ.
struct Unit {
  std::string name;              // file path, or "case-007 <recipe>"
  std::uint64_t cases = 0;       // the golden cases of the unit (compared only when neither skipped nor in error)
  std::uint64_t mismatches = 0;  // mismatching cases (0 unless compared)
  bool skipped = false;
  std::string skip_reason;
  std::string error;                 // why the unit could not be compared; empty when it was compared or skipped
  std::vector<std::string> details;  // the first mismatches, formatted
  bool compared() const { return !skipped && error.empty(); }
};

struct SuiteReport {
  std::string name;
  std::vector<Unit> units;
  std::uint64_t cases() const;       // cases compared (of compared units)
  std::uint64_t mismatches() const;  // mismatching cases of compared units
  std::uint64_t errors() const;      // units in error
  std::uint64_t skipped() const;     // units skipped
  std::uint64_t compared() const;    // units compared
};

// Compare the subject's results against a golden suite.  `skip` names units (paths or case names) the
// subject did not run, with the reason.  At most `max_details` mismatch lines are kept per unit.  The
// reader's error message becomes the unit's error as it is.
SuiteReport compare(const Golden& g, const Reader& results, const std::map<std::string, std::string>& skip,
                    std::size_t max_details);

// What a passing run needs beyond "no mismatch and no error" (always: at least one case compared).
struct Requirements {
  std::vector<std::string> require;  // globs of suite names: each matching suite compares a case
  std::uint64_t min_cases = 1;       // cases compared over all suites
};
// Globs of `req.require` that match none of `names` (an argument error for the caller).
std::vector<std::string> unmatched_requirements(const Requirements& req, const std::vector<std::string>& names);
// Why the run fails, one line per reason; empty when it passes.
std::vector<std::string> verdict(const std::vector<SuiteReport>& reports, const Requirements& req);

// Print the per-suite summary, then the errors, the skip reasons and the mismatch lines (each listing
// bounded by `max_report` lines) and the verdict to stdout.
void print_reports(const std::vector<SuiteReport>& reports, std::size_t max_report, const Requirements& req = {});
// The JUnit XML of the reports: one <testsuite> per suite, one <testcase> per unit; a mismatching unit
// is a <failure>, a unit in error an <error>.
std::string junit_xml(const std::vector<SuiteReport>& reports, const std::string& name);
// The JSON report of vectors/SPEC.md ("The JSON report"): `command` is "check" or "gate", `subject` the
// subject's name (empty: none), every listing bounded by `max_report` entries per suite.
nlohmann::ordered_json report_json(const std::vector<SuiteReport>& reports, const std::string& command,
                                   const std::string& subject, std::size_t max_report, const Requirements& req);

// Reading and writing folders.
// `what` starts each message ("results file " for a subject's results).
Reader folder_reader(const std::string& dir, const std::string& what = "");
// Write a suite into `dir` (created; an existing non-empty folder is an error): every file is written
// under a temporary folder beside it, which is renamed into place at the end.
void write_suite(const Suite& s, const std::string& dir);

}  // namespace lowbit::vectors
