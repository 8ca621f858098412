// Where the profiles disagree (docs/semantics.md §3, "Where profiles disagree"): the divergence matrix.  A list of
// probes, each one input of one input class into one target, evaluated under every profile's defaults; the
// profiles that give the same result form one group.  `lowbit profiles --diff` prints the groups (which
// implementations agree, with the example), the accuracy report shows the same rows; the probes are data, so
// that a new disagreement is one row.
#pragma once
#include <string>
#include <vector>

#include "lowbit/format.hpp"
#include "lowbit/names.hpp"
#include "lowbit/policy.hpp"
#include "lowbit/profile.hpp"

namespace lowbit {

// The kind of input a probe stands for: the rows of the matrix are grouped by format and class.
enum class InputClass : std::uint8_t { nan, inf, overflow, tie, subnormal, zero, negative, encoding };
inline constexpr Named<InputClass> input_class_names[] = {
    {InputClass::nan, "NaN", "NaN inputs: sign, payload, the code chosen"},
    {InputClass::inf, "Inf", "infinite inputs: kept, clamped or NaN"},
    {InputClass::overflow, "overflow", "finite inputs beyond the largest value"},
    {InputClass::tie, "tie", "a value halfway between two codes"},
    {InputClass::subnormal, "subnormal", "results and inputs at the bottom of the range"},
    {InputClass::zero, "zero", "zero into a format without zero (the scale of an all-zero block)"},
    {InputClass::negative, "negative", "a negative value into an unsigned format"},
    {InputClass::encoding, "encoding", "how a format encodes its values (int8)"},
};
constexpr const auto& names_of(InputClass) { return input_class_names; }

struct DiffProbe {
  InputClass cls;
  const char* target;  // a format name as find_format reads it
  // A text literal as exact::parse reads it, or "FORMAT:0xCODE", a code of a source format (where the
  // profiles treat a NaN by where it came from).
  const char* input;
  const char* shows;  // the kind of disagreement, in one phrase
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

// The profiles that give one result for a probe (same target format and code, or all undefined).
struct DiffGroup {
  const DiffCell* example = nullptr;  // the first cell of the group
  std::vector<const Profile*> profiles;
};

struct DiffRow {
  const DiffProbe* probe = nullptr;
  std::vector<DiffCell> cells;  // one per profile, in profiles() order
  // The cells grouped by result, largest group first (ties: the order of their first profile); profiles
  // without the conversion are in no group.
  std::vector<DiffGroup> groups() const;
};

// Every probe, whether or not the profiles disagree on it, ordered by target then class.
const std::vector<DiffProbe>& profile_diff_probes();

// Evaluate one probe under every profile (each profile's default policy for the target).
DiffRow evaluate_probe(const DiffProbe& probe);

// The probes on which at least two profiles that have the conversion give different results.
std::vector<DiffRow> profile_differences();

}  // namespace lowbit
