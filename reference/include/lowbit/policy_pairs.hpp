// The policies the profiles resolve by default for a target, each once, and a one-line spelling of a
// whole policy.  Used where a test or a generated file must name "every format under each profile's
// default policy" (conformance/fast_convert, the device conversion digests).  Host only.
#pragma once
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "lowbit/format.hpp"
#include "lowbit/names.hpp"
#include "lowbit/policy.hpp"
#include "lowbit/profile.hpp"

namespace lowbit {

// Every field of a policy, quirks included, in one line: two policies have the same text exactly when
// they are the same value (the quirk enums by name, narrow_nan_below as a number, the bools as 0/1 in
// declaration order).  Not lowbit/text.hpp's policy_text, the short form that messages print (rounding,
// overflow, subnormals, tininess): a name of its own, so that neither definition can stand in for the other.
inline std::string whole_policy_text(const Policy& p) {
  const Quirks& q = p.quirks;
  std::ostringstream s;
  s << name(p.rounding) << ' ' << name(p.overflow) << ' ' << name(p.subnormals) << ' ' << name(p.tininess)
    << " sr_bits=" << p.sr_bits << " nan_to_no_nan=" << name(q.nan_to_no_nan) << " nan_style=" << name(q.nan_style)
    << " narrow_nan_style=" << name(q.narrow_nan_style) << " narrow_nan_below=" << int(q.narrow_nan_below)
    << " nan_decode=" << name(q.nan_decode)
    << " unsigned_negative=" << name(q.unsigned_negative) << " zero_into_no_zero=" << name(q.zero_into_no_zero)
    << " flags=" << int(q.numpy_half_nan) << int(q.identity_copies) << int(q.nozero_lowest_binade_rounds_up)
    << int(q.infinity_ignores_saturation);
  return s.str();
}

// The inverse of whole_policy_text: nullopt for a text it did not write.
inline std::optional<Policy> parse_whole_policy_text(const std::string& text) {
  std::istringstream in(text);
  std::string w[13];
  for (std::string& x : w)
    if (!(in >> x)) return std::nullopt;
  std::string more;
  if (in >> more) return std::nullopt;
  auto value = [](const std::string& word, const char* key) -> std::optional<std::string> {
    const std::string k = std::string(key) + "=";
    if (word.rfind(k, 0) != 0) return std::nullopt;
    return word.substr(k.size());
  };
  auto small_number = [](const std::optional<std::string>& v) {
    return v && !v->empty() && v->size() <= 3 && v->find_first_not_of("0123456789") == std::string::npos;
  };
  Policy p;
  const auto r = parse<Rounding>(w[0]);
  const auto o = parse<Overflow>(w[1]);
  const auto s = parse<Subnormals>(w[2]);
  const auto t = parse<Tininess>(w[3]);
  const auto sr = value(w[4], "sr_bits");
  const auto nn = value(w[5], "nan_to_no_nan");
  const auto ns = value(w[6], "nan_style");
  const auto nw = value(w[7], "narrow_nan_style");
  const auto nb = value(w[8], "narrow_nan_below");
  const auto nd = value(w[9], "nan_decode");
  const auto un = value(w[10], "unsigned_negative");
  const auto zn = value(w[11], "zero_into_no_zero");
  const auto fl = value(w[12], "flags");
  if (!r || !o || !s || !t || !small_number(sr) || !nn || !ns || !nw || !small_number(nb) || !nd || !un || !zn || !fl ||
      fl->size() != 4 || fl->find_first_not_of("01") != std::string::npos || std::stoi(*nb) > 255)
    return std::nullopt;
  const auto q1 = parse<NanToNoNan>(*nn);
  const auto q2 = parse<NanStyle>(*ns);
  const auto q3 = parse<UnsignedNegative>(*un);
  const auto q4 = parse<ZeroIntoNoZero>(*zn);
  const auto q5 = parse<NanStyle>(*nw);
  const auto q6 = parse<NanDecode>(*nd);
  if (!q1 || !q2 || !q3 || !q4 || !q5 || !q6) return std::nullopt;
  p.rounding = *r, p.overflow = *o, p.subnormals = *s, p.tininess = *t, p.sr_bits = std::stoi(*sr);
  p.quirks.nan_to_no_nan = *q1, p.quirks.nan_style = *q2, p.quirks.unsigned_negative = *q3;
  p.quirks.zero_into_no_zero = *q4, p.quirks.narrow_nan_style = *q5, p.quirks.nan_decode = *q6;
  p.quirks.narrow_nan_below = static_cast<std::uint8_t>(std::stoi(*nb));
  p.quirks.numpy_half_nan = (*fl)[0] == '1';
  p.quirks.identity_copies = (*fl)[1] == '1';
  p.quirks.nozero_lowest_binade_rounds_up = (*fl)[2] == '1';
  p.quirks.infinity_ignores_saturation = (*fl)[3] == '1';
  if (whole_policy_text(p) != text) return std::nullopt;
  return p;
}

inline bool same_policy_value(const Policy& a, const Policy& b) { return whole_policy_text(a) == whole_policy_text(b); }

// A target under one policy, with the profiles that resolve it ("ocp", "cuda/rtz" for a rounding the
// profile makes the user name, "builtin" for lowbit's own default: rne, nosat).
struct DefaultPolicy {
  const Format* target;  // the target the profile converts into (int8 may become int8sm)
  Policy policy;
  std::string labels;  // comma-separated
};

// Each profile's default policy for `target` (profiles without a rule for it are left out; a rule
// without a default rounding contributes one policy per rounding it allows), then the built-in
// default, each distinct (target, policy) once, in profile-table order.
inline std::vector<DefaultPolicy> default_policies(const Format& target) {
  std::vector<DefaultPolicy> out;
  auto add = [&](const Resolved& r, const std::string& label) {
    for (DefaultPolicy& d : out)
      if (same_format(*d.target, *r.target) && same_policy_value(d.policy, r.policy)) {
        d.labels += "," + label;
        return;
      }
    out.push_back({r.target, r.policy, label});
  };
  for (const Profile& prof : profiles()) {
    std::string error;
    if (const auto r = resolve(&prof, target, {}, error)) {
      add(*r, prof.name);
      continue;
    }
    // No default rounding (cuda's e8m0): every rounding the profile allows.
    for (Rounding rounding : all<Rounding>()) {
      PolicyRequest req;
      req.rounding = rounding;
      if (is_stochastic(rounding)) continue;
      if (const auto r = resolve(&prof, target, req, error)) add(*r, std::string(prof.name) + "/" + name(rounding));
    }
  }
  std::string error;
  if (const auto r = resolve(nullptr, target, {}, error)) add(*r, "builtin");
  return out;
}

}  // namespace lowbit
