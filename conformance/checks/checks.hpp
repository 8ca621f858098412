// The conformance checks, as a library: run from ctest (conformance/tests) and from `lowbit conform`.
//
// Each check compares one thing against its truth: the fast path against the exact path (exhaustive,
// midpoint and stochastic sweeps), the library against facts written down in docs/semantics.md (peer test
// cases, the CUDA table), or the library against the CUDA toolkit's own host conversions.  A check
// returns how many cases it ran, how many disagreed, and a description of the first few that did
// (format, policy, input, expected and actual codes with their decoded values).
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

struct Outcome {
  std::uint64_t cases = 0;
  std::uint64_t mismatches = 0;
  std::vector<std::string> examples;  // the first few mismatches, described
  bool skipped = false;               // the check could not run here (the note says why)
  std::string note;
};

// Called now and then during a long sweep with the work done so far and the total (same units).
// Calls come from one thread at a time, but not always the same thread.
using Progress = std::function<void(std::uint64_t done, std::uint64_t total)>;

struct Check {
  std::string name;
  Tier tier;
  std::string description;
  std::function<Outcome(const Progress&)> run;
};

// Every check, quick ones first.
const std::vector<Check>& all_checks();
// The checks a tier runs: quick runs the quick checks; full runs everything.
std::vector<const Check*> checks_for(Tier tier);
const Check* find_check(std::string_view name);

// How many mismatch descriptions an outcome keeps.
inline constexpr std::size_t kept_examples = 5;

}  // namespace lowbit::checks
