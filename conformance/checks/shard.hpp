// Shards: one run split into N parts that separate machines run (Slurm array tasks, Kubernetes Indexed
// Job pods, the GPUs of a fleet), each writing a self-describing result folder that `lowbit merge`
// verifies and joins into the report the unsharded run writes.
//
// The split is a property of what is enumerated, not of the command line: every space (a check's inputs,
// a suite's files or cases, a fleet's tasks) is an ordered list [0, n), and shard I of N takes the
// contiguous range [floor((I-1)n/N), floor(In/N)).  For any n and N those N ranges tile [0, n) in order,
// each item once, and the shards' sizes differ by at most one.
//
// A result folder holds shard.json and shard.json.sha256 (the SHA-256 line of vectors/SPEC.md's manifest
// checksum: "<hex>  shard.json").  shard.json begins with the fields shard_header() writes:
//   schema "lowbit-shard/1", kind, shard {index, count}, lowbit_version, build_id, options,
//   space [{name, inputs, begin, end}]
// then whatever the kind adds ("results" and the run's timings).  A merge accepts a set of results only
// when they agree on schema, kind, version, build and options, name the same count and the same spaces,
// carry the ranges the split gives, and hold every index 1..N exactly once.
#pragma once
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "checks.hpp"
#include "lowbit/output.hpp"

namespace lowbit::checks {

using ordered_json = nlohmann::ordered_json;

// Shard `index` of `count`, 1-based, as `--shard I/N` writes it.
struct Shard {
  std::uint32_t index = 1;
  std::uint32_t count = 1;
  bool operator==(const Shard&) const = default;
};

// A bound on N, so that no count read from a file makes a merge walk billions of indices.
inline constexpr std::uint32_t max_shard_count = 100000;

// "I/N": decimal digits only, 1 <= I <= N <= max_shard_count.  nullopt, with `error` saying what is
// wrong (without the option's name, which the caller adds), for anything else.
std::optional<Shard> parse_shard(std::string_view text, std::string& error);
std::string shard_text(Shard s);

// The part of [0, total) that shard s runs.
Range shard_range(std::uint64_t total, Shard s);

// ---- result folders --------------------------------------------------------------------------------

inline constexpr const char* shard_schema = "lowbit-shard/1";
inline constexpr const char* shard_file = "shard.json";
inline constexpr const char* shard_checksum_file = "shard.json.sha256";

// The build a result came from: the SHA-256 of the running executable (/proc/self/exe), so that two
// results agree only when the same program wrote them.
const std::string& build_id();

// One space of a shard: `inputs` items of which the shard ran `range`.
struct SpacePart {
  std::string name;
  std::uint64_t inputs = 0;
  Range range;
};

// The fields every result begins with (see the top of this file).
ordered_json shard_header(std::string_view kind, Shard s, std::string_view version, std::string_view build,
                          const ordered_json& options, const std::vector<SpacePart>& space);

// Writes dir/shard.json, then dir/shard.json.sha256, each through a temporary file renamed into place
// (a folder cut off mid-write has no checksum, and reads as damaged).  std::runtime_error on failure.
void write_shard(const std::filesystem::path& dir, const ordered_json& doc);
// The same two files into a folder being built (vectors generate --shard).
void write_shard(io::FolderOutput& out, const ordered_json& doc);

// A result folder read back, its checksum and header checked.
struct LoadedShard {
  std::string where;  // the folder, as given
  ordered_json doc;
  Shard shard;
  std::vector<SpacePart> space;
};

// Why a folder could not be used: unreadable (exit 2: no such folder, no shard.json, a file that cannot
// be read) or damaged (exit 1: the checksum differs or is missing, not JSON, a field missing or of the
// wrong type, a range other than the split's, another schema).  `text` names the folder or file.
enum class LoadFailure : std::uint8_t { unreadable, damaged };
struct LoadError {
  LoadFailure failure = LoadFailure::damaged;
  std::string text;
};

std::variant<LoadedShard, LoadError> load_shard(const std::filesystem::path& dir);

// The problems that keep `shards` from being one complete run, each naming a folder or a shard: another
// kind, version (or not `merging_version`, the merging lowbit's), build, options, count or space than
// the first folder's; an index held twice; an index held by none.  Empty when the set is complete.
std::vector<std::string> verify_cover(const std::vector<LoadedShard>& shards, std::string_view merging_version);

// ---- reading fields of a result ---------------------------------------------------------------------

// A field missing or of the wrong type; `what` is its path ("results[2].cases is missing").
struct Malformed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The field `key` of object `o`, whose path is `path` (for messages).  Throw Malformed.
const ordered_json& field(const ordered_json& o, std::string_view key, const std::string& path);
std::uint64_t uint_field(const ordered_json& o, std::string_view key, const std::string& path);
double number_field(const ordered_json& o, std::string_view key, const std::string& path);
bool bool_field(const ordered_json& o, std::string_view key, const std::string& path);
std::string string_field(const ordered_json& o, std::string_view key, const std::string& path);
const ordered_json& array_field(const ordered_json& o, std::string_view key, const std::string& path);
const ordered_json& object_field(const ordered_json& o, std::string_view key, const std::string& path);

// ---- `lowbit conform` shards ----------------------------------------------------------------------------

// One check of a run (or of a shard of one): what it is, the range it ran, what it found.
struct CheckRun {
  std::string name;
  Tier tier = Tier::quick;
  std::string description;
  std::string unit;
  std::uint64_t inputs = 0;  // the size of its whole input list
  Range range;
  Outcome outcome;
  double seconds = 0;
};

// What a report says about the run as a whole.
struct RunInfo {
  std::string version;
  std::string tier;
  std::string started;  // UTC, ISO 8601
  double seconds = 0;
  unsigned threads = 0;
};

// The result of a conform shard: the header (options: tier and the checks in order) and, per check, its
// counts, skip, note, seconds and first mismatches with their positions.
ordered_json conform_shard_doc(Shard s, const RunInfo& info, const std::vector<std::string>& checks,
                               const std::vector<CheckRun>& runs, std::string_view build);

// The checks of a verified, complete set of conform shards, joined: cases and mismatches added, the first
// kept_examples mismatches by position, each check's seconds the sum of its shards' (work, not wall
// time).  The run: the earliest start, the sum of the shards' seconds, the shards' hardware threads where
// they agree, else the fewest.  nullopt, with `problems` naming a shard, when the shards disagree on what
// a check is (its tier, description, unit, skip or note) or a result is malformed.
struct MergedRun {
  RunInfo info;
  std::vector<CheckRun> runs;
};
std::optional<MergedRun> merge_conform(const std::vector<LoadedShard>& shards, std::vector<std::string>& problems);

// The first kept_examples of several outcomes' examples, by position.
std::vector<Example> first_examples(const std::vector<const Outcome*>& parts);

}  // namespace lowbit::checks
