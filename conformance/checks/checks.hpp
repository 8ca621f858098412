// The conformance checks, as a library: run from ctest (conformance/tests) and from `lowbit conform`.
//
// Each check compares one thing against its truth: the fast path against the exact path (exhaustive,
// midpoint and stochastic sweeps), the library against facts written down in docs/semantics.md (peer test
// cases, the CUDA table), or the library against the CUDA toolkit's own host conversions.  A check
// returns how many cases it ran, how many disagreed, and a description of the first few that did
// (format, policy, input, expected and actual codes with their decoded values).
//
// Every check enumerates its inputs as one ordered list [0, inputs()) (the codes, points or table rows it
// walks) and runs any range of that list, so that a run can be split into shards (shard.hpp) whose union is
// the whole list, each input once.  The cases and mismatches of a range depend on that range alone, and the
// mismatches kept are the first ones by input position, not by the order threads found them: a run's
// outcome is the same on any machine, and the shards' outcomes add up to the whole run's.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lowbit::checks {

// quick: every CI run (the whole tier stays under 10 minutes on 2 cores); full: exhaustive, by hand.
enum class Tier : std::uint8_t { quick, full };
const char* name(Tier t);
std::optional<Tier> parse_tier(std::string_view s);

// Where a mismatch was found: the position of its input in the check's list, then the position of the
// comparison among that input's comparisons.  Mismatches are kept in this order.
struct Position {
  std::uint64_t input = 0;
  std::uint32_t step = 0;
  auto operator<=>(const Position&) const = default;
};

struct Example {
  Position at;
  std::string text;
};

// The half-open range [begin, end) of a check's inputs.
struct Range {
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  std::uint64_t size() const { return end - begin; }
  bool operator==(const Range&) const = default;
};

struct Outcome {
  std::uint64_t cases = 0;
  std::uint64_t mismatches = 0;
  std::vector<Example> examples;      // the first few mismatches by position, described
  bool skipped = false;               // the check could not run here (the note says why)
  std::string note;                   // about the whole check: the same for every range
};

// Called now and then during a long sweep with the work done so far and the total (same units).
// Calls come from one thread at a time, but not always the same thread.
using Progress = std::function<void(std::uint64_t done, std::uint64_t total)>;

struct Check {
  std::string name;
  Tier tier;
  std::string description;
  std::string unit;                                    // what one input is ("code", "f32 input", ...)
  std::function<std::uint64_t()> inputs;               // how many inputs the check enumerates
  std::function<Outcome(Range, const Progress&)> run;  // the inputs of a range of that list; progress in inputs
};

// Every input of a check.
Outcome run_all(const Check& c, const Progress& progress = {});

// Every check, quick ones first.
const std::vector<Check>& all_checks();
// The checks a tier runs: quick runs the quick checks; full runs everything.
std::vector<const Check*> checks_for(Tier tier);
const Check* find_check(std::string_view name);

// How many mismatch descriptions an outcome keeps.
inline constexpr std::size_t kept_examples = 5;

}  // namespace lowbit::checks
