// Shards of golden suites (conformance/checks/shard.hpp): `lowbit vectors generate --shard` writes part of
// a suite, `lowbit gate --shard` runs part of each suite through a subject, and `lowbit merge` joins the
// parts into the suite folder, or the gate report and JUnit, that the unsharded command writes.
//
// A suite's units are what a subject runs one at a time: a conversion suite's files (in path order), a
// tensor suite's cases (in manifest order, each with all its files).  Shard I/N of a suite holds the
// units of shard_range(units, I/N).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "shard.hpp"
#include "lowbit/vectors.hpp"

namespace lowbit::vectors {

// `--shard I/N`, or cli::InputError naming --shard.
checks::Shard shard_option(const std::string& text);

// How many units a suite (or a golden suite) splits into.
std::uint64_t unit_count(const Suite& s);
std::uint64_t unit_count(const Golden& g);

// The suite or golden suite holding only the units of `r` (the manifest's "cases" cut to match).
Suite suite_part(const Suite& s, checks::Range r);
Golden golden_part(const Golden& g, checks::Range r);

// `lowbit vectors generate --shard`: a new folder `dir` (absent or empty) holding shard.json, its checksum
// and files/<path> for each file of the part.  cli::InputError when `dir` is unusable.
void write_suite_shard(const Suite& whole, checks::Shard shard, const std::string& dir, const ShapeRequest& shapes);

// The suite of a verified, complete set of `vectors generate` shards, every file read back and checked
// against its SHA-256 and size; nullopt with `problems` naming the shard and file otherwise.
std::optional<Suite> merge_suite_shards(const std::vector<checks::LoadedShard>& shards,
                                        std::vector<std::string>& problems);

// `lowbit gate --shard`: what a shard writes.  `plugin` holds the subject's path, name and SHA-256.
struct GateShard {
  std::vector<std::string> suites;
  std::uint64_t seed = 0;
  std::uint64_t max_report = 0;
  nlohmann::ordered_json plugin;
  std::vector<checks::SpacePart> space;  // per suite: its units and the range run
  std::vector<SuiteReport> reports;      // per suite: the units of that range
  Requirements req;                      // --require and --min-cases, applied to the merged report
  ShapeRequest shapes;                   // --shape and --layout as given: shards of other shapes are foreign
};
// --shape and --layout as a shard's options record them: null when not given, the text otherwise ("" for
// the default shapes).
nlohmann::ordered_json shapes_json(const ShapeRequest& shapes);
nlohmann::ordered_json gate_shard_doc(checks::Shard shard, const GateShard& g);
// The subject's identity as a gate shard records it.
nlohmann::ordered_json plugin_identity(const std::string& path, const std::string& name);

// The gate of a verified, complete set of gate shards: every suite's units in order, the printed
// report's settings, the subject.  nullopt with `problems` naming the shard otherwise.
struct MergedGate {
  std::vector<SuiteReport> reports;
  std::uint64_t max_report = 0;
  std::string plugin_path, plugin_name;
  Requirements req;
};
std::optional<MergedGate> merge_gate_shards(const std::vector<checks::LoadedShard>& shards,
                                            std::vector<std::string>& problems);

}  // namespace lowbit::vectors
