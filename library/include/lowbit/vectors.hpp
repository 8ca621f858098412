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

namespace lowbit::vectors {

// Bumped when the files a generator writes change for a given seed (a new case, another order).
inline constexpr int generator_version = 1;
// Bumped when the file formats of vectors/SPEC.md change.
inline constexpr int schema_version = 1;
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

// The outcome of one test unit (a scalar file, or one case of a tensor suite).
struct Unit {
  std::string name;  // file path, or "case-007"
  std::uint64_t cases = 0;
  std::uint64_t mismatches = 0;
  bool skipped = false;
  std::string skip_reason;
  std::string problem;  // a results file missing or unreadable, an input that differs, ...
  std::vector<std::string> details;  // the first mismatches, formatted
};

struct SuiteReport {
  std::string name;
  std::vector<Unit> units;
  std::uint64_t cases() const;
  std::uint64_t mismatches() const;  // mismatching cases plus units with a problem
  std::uint64_t skipped() const;
};

// Compare the subject's results against a golden suite.  `skip` names units (paths or case names) the
// subject did not run, with the reason.  At most `max_details` mismatch lines are kept per unit.
SuiteReport compare(const Golden& g, const Reader& results, const std::map<std::string, std::string>& skip,
                    std::size_t max_details);

// Print the per-suite summary and the first `max_report` mismatches (over all suites) to stdout.
void print_reports(const std::vector<SuiteReport>& reports, std::size_t max_report);
// The JUnit XML of the reports: one <testsuite> per suite, one <testcase> per unit.
std::string junit_xml(const std::vector<SuiteReport>& reports, const std::string& name);

// Reading and writing folders.
Reader folder_reader(const std::string& dir);
// Write a suite into `dir` (created; an existing non-empty folder is an error): every file is written
// under a temporary folder beside it, which is renamed into place at the end.
void write_suite(const Suite& s, const std::string& dir);

}  // namespace lowbit::vectors
