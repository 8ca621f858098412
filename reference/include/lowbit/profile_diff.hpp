// Where the profiles disagree (docs/semantics.md §3, "Where profiles disagree"): a list of probes, each one
// input into one target that shows one kind of disagreement, evaluated under every profile's defaults.
// `lowbit profiles --diff` prints the result; the probes are data so that a new disagreement is one row.
#pragma once
#include <string>
#include <vector>

#include "lowbit/format.hpp"
#include "lowbit/policy.hpp"
#include "lowbit/profile.hpp"

namespace lowbit {

struct DiffProbe {
  const char* target;  // a format name as find_format reads it
  const char* input;   // a text literal as exact::parse reads it
  const char* shows;   // the kind of disagreement, in one phrase
};

// One probe under one profile.
struct DiffCell {
  const Profile* profile = nullptr;
  bool available = false;     // false: the profile has no such conversion (no target rule, no default)
  std::string why;            // when not available: the reason (resolve's message)
  const Format* target = nullptr;  // the resolved target (int8 becomes int8sm under microxcaling)
  Policy policy{};
  Result result{};
  bool unsupported = false;   // the implementation has no defined result (LLVM's assertion)
  std::string value;          // the result's exact value as text (empty when unsupported)
};

struct DiffRow {
  const DiffProbe* probe = nullptr;
  std::vector<DiffCell> cells;  // one per profile, in profiles() order
};

// Every probe, whether or not the profiles disagree on it.
const std::vector<DiffProbe>& profile_diff_probes();

// Evaluate one probe under every profile (each profile's default policy for the target).
DiffRow evaluate_probe(const DiffProbe& probe);

// The probes on which at least two profiles that have the conversion give different results
// (a different target code, or a result in a different target format).
std::vector<DiffRow> profile_differences();

}  // namespace lowbit
