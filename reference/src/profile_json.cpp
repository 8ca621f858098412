// `lowbit profiles --json` and the Python package's lowbit.profiles(): every profile row as JSON, one text.
#include <nlohmann/json.hpp>

#include "lowbit/names.hpp"
#include "lowbit/profile.hpp"

namespace lowbit {

namespace {

using json = nlohmann::json;

std::vector<std::string> mode_names(ModeMask m, bool rounding) {
  std::vector<std::string> out;
  if (rounding) {
    for (Rounding r : all<Rounding>())
      if (m & bit(r)) out.push_back(name(r));
  } else {
    for (Overflow o : all<Overflow>())
      if (m & bit(o)) out.push_back(name(o));
  }
  return out;
}

json rule_json(const TargetRule& r) {
  json j;
  j["format"] = r.target ? json(r.target->name) : json(nullptr);
  j["roundings"] = mode_names(r.roundings, true);
  j["default_rounding"] = r.default_rounding ? json(name(*r.default_rounding)) : json(nullptr);
  j["overflows"] = mode_names(r.overflows, false);
  j["default_overflow"] = name(r.default_overflow);
  j["note"] = r.note;
  j["nan_style"] = r.nan_style ? json(name(*r.nan_style)) : json(nullptr);
  j["narrow_nan_style"] = r.narrow_nan_style ? json(name(*r.narrow_nan_style)) : json(nullptr);
  j["narrow_nan_below"] = r.narrow_nan_below ? json(*r.narrow_nan_below) : json(nullptr);
  return j;
}

json profile_json(const Profile& p) {
  json j;
  j["name"] = p.name;
  j["description"] = p.description;
  j["version"] = p.version;
  const Quirks& q = p.quirks;
  j["quirks"] = {{"nan_to_no_nan", name(q.nan_to_no_nan)},
                 {"nan_style", name(q.nan_style)},
                 {"narrow_nan_style", name(q.narrow_nan_style)},
                 {"narrow_nan_below", q.narrow_nan_below},
                 {"nan_decode", name(q.nan_decode)},
                 {"unsigned_negative", name(q.unsigned_negative)},
                 {"zero_into_no_zero", name(q.zero_into_no_zero)},
                 {"numpy_half_nan", q.numpy_half_nan},
                 {"identity_copies", q.identity_copies},
                 {"nozero_lowest_binade_rounds_up", q.nozero_lowest_binade_rounds_up},
                 {"infinity_ignores_saturation", q.infinity_ignores_saturation}};
  j["int8_sign_magnitude"] = p.int8_sign_magnitude;
  j["targets"] = json::array();
  for (const TargetRule& r : p.targets) j["targets"].push_back(rule_json(r));
  j["other_targets"] = p.any_target ? rule_json(p.fallback) : json(nullptr);
  return j;
}

}  // namespace

std::string profiles_json() {
  json out = json::array();
  for (const Profile& p : profiles()) out.push_back(profile_json(p));
  return out.dump(2);
}

}  // namespace lowbit
