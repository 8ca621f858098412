// Profiles: named policy bundles, each reproducing one real implementation (docs/semantics.md §3), kept as
// data the way SoftFloat keeps platform quirks in their own folder.
#pragma once
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "lowbit/format.hpp"
#include "lowbit/names.hpp"
#include "lowbit/policy.hpp"

namespace lowbit {

// A set of rounding modes / overflow modes as a bit mask (bit i = enum value i).
using ModeMask = unsigned;
constexpr ModeMask bit(Rounding r) { return 1u << static_cast<unsigned>(r); }
constexpr ModeMask bit(Overflow o) { return 1u << static_cast<unsigned>(o); }
inline constexpr ModeMask all_roundings = [] {
  ModeMask m = 0;
  for (Rounding r : all<Rounding>()) m |= bit(r);
  return m;
}();
inline constexpr ModeMask deterministic_roundings = [] {
  ModeMask m = 0;
  for (Rounding r : all<Rounding>())
    if (!is_stochastic(r)) m |= bit(r);
  return m;
}();
inline constexpr ModeMask all_overflows = [] {
  ModeMask m = 0;
  for (Overflow o : all<Overflow>()) m |= bit(o);
  return m;
}();

// What one implementation offers for one target format.
struct TargetRule {
  const Format* target;
  ModeMask roundings;                        // allowed rounding modes
  std::optional<Rounding> default_rounding;  // nullopt: the mode must be named (CUDA's e8m0)
  ModeMask overflows;                        // allowed overflow modes
  Overflow default_overflow;
  const char* note;  // where the rule comes from
  // NaN styles of this target where they differ from the profile's quirks (Quirks::nan_style and
  // narrow_nan_style): PyTorch and XLA treat NaN differently per target.
  std::optional<NanStyle> nan_style = std::nullopt;
  std::optional<NanStyle> narrow_nan_style = std::nullopt;
  std::optional<std::uint8_t> narrow_nan_below = std::nullopt;
};

struct Profile {
  const char* name;
  const char* description;
  const char* version;  // the implementation's version whose behaviour the profile reproduces
  Quirks quirks = {};
  ModeMask subnormal_modes = 0;       // allowed Subnormals values (bit i = enum value i)
  bool tininess_choice = false;       // whether --tininess before is meaningful for it
  bool int8_sign_magnitude = false;   // int8 elements are sign-magnitude (microxcaling)
  // Targets the implementation has.  When `any_target` is true, targets without a rule use
  // `fallback`; otherwise they are an error.
  std::span<const TargetRule> targets = {};
  bool any_target = false;
  TargetRule fallback = {};
};

std::span<const Profile> profiles();
// Every profile row as the JSON array `lowbit profiles --json` prints (name, description, version, quirks,
// targets with their modes and notes), indented by two.
std::string profiles_json();
const Profile* find_profile(std::string_view name);

// What the user asked for; unset fields take the profile's (or the built-in) defaults.
struct PolicyRequest {
  std::optional<Rounding> rounding;
  std::optional<Overflow> overflow;
  std::optional<Subnormals> subnormals;
  std::optional<Tininess> tininess;
  int sr_bits = 0;
};

// Resolve a request against a profile (nullptr: built-in defaults rne / nosat / keep) for a target.
// The target may be replaced (int8 under microxcaling).  On a combination the implementation does not
// have, returns nullopt, sets `error` to why, and `argument` (when given) to the request's field at fault:
// "to" (the target), "rounding", "overflow", "subnormals" or "tininess".  Front ends word the field their way
// (the command line as --rounding, the Python package as its keyword).
struct Resolved {
  Policy policy;
  const Format* target;
};
std::optional<Resolved> resolve(const Profile* profile, const Format& target, const PolicyRequest& request,
                                std::string& error, std::string* argument = nullptr);

// Names of the enum values, as the command line spells them: lowbit::name(v) and lowbit::parse<E>(s)
// (names.hpp) over the tables in policy.hpp.

}  // namespace lowbit
