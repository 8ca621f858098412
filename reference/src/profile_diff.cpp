#include "lowbit/profile_diff.hpp"

#include <algorithm>
#include <optional>
#include <string_view>

#include "lowbit/exact.hpp"
#include "lowbit/registry.hpp"

namespace lowbit {

const std::vector<DiffProbe>& profile_diff_probes() {
  using C = InputClass;
  // docs/semantics.md §3 and the peer profiles (profile.cpp) name each of these; one input per kind of
  // disagreement, grouped by target format.
  static const std::vector<DiffProbe> probes = {
      {C::nan, "e4m3", "-nan", "NaN sign: kept (0xff) or canonical positive NaN (0x7f)"},
      {C::nan, "e4m3", "e4m3fnuz:0x80", "the fnuz NaN (the -0 code): negative (ml_dtypes) or positive (torch, XLA)"},
      {C::overflow, "e4m3", "480", "finite overflow: NaN without saturation (torch before 2.13), 448 with it"},
      {C::subnormal, "e4m3", "0.0009765625", "the subnormal tie 2^-10: to even (0) or away (2^-9, microxcaling)"},
      {C::nan, "e5m2", "f32:0xffc00000",
       "NaN: quiet of its sign (0xfe), every mantissa bit set (0xff, torch), or +0x7f"},
      {C::nan, "e5m2", "f16:0xfe00", "NaN from f16: XLA's EmitF16ToF8e5m2 gives 0x7f whatever the sign"},
      {C::inf, "e5m2", "inf", "infinity into a format with Inf: kept (nosat) or clamped to max (satfinite)"},
      {C::overflow, "e5m2", "61440", "the e5m2 tie above max: Inf without saturation (torch), 57344 with it"},
      {C::overflow, "e4m3fnuz", "448", "overflow in a fnuz format: NaN (0x80)"},
      {C::nan, "bf16", "f32:0x7f810000", "NaN: payload kept (0x7fc1), quiet (0x7fc0), CUDA's 0x7fff, torch's 0xffff"},
      {C::nan, "f16", "f32:0x7f810000", "NaN: quiet with payload (0x7e08), numpy's 0x7c08, CUDA's 0x7fff"},
      {C::nan, "f16", "bf16:0xff81", "NaN from bf16: payload kept (0xfe08) or dropped (0xfe00, torch's scalar path)"},
      {C::nan, "f16", "e4m3:0xff", "the e4m3 NaN widened: torch carries its mantissa as payload (0xff80)"},
      {C::nan, "e2m1", "nan", "NaN into a format without NaN: +max, the flipped-sign zero code, -0, or undefined"},
      {C::nan, "e2m1", "-nan", "negative NaN into e2m1: ml_dtypes' +0 (flipped sign), XLA's -0 (0x8)"},
      {C::tie, "e2m1", "5", "a tie: to even (4) or away from zero (6, microxcaling's nearest)"},
      {C::encoding, "int8", "-2", "int8 elements: two's complement (0x80 is -2) or sign-magnitude (clamps to -127/64)"},
      {C::tie, "e8m0", "0.75", "e8m0 tie between 2^-1 and 2^0: up, toward zero (floor) or to the even exponent"},
      {C::tie, "e8m0", "1.5", "e8m0 tie between 2^0 and 2^1: up (torch, ml_dtypes), floor, or even"},
      {C::zero, "e8m0", "0", "zero into e8m0 (no zero; an all-zero block's scale): 2^-127 or NaN"},
      {C::negative, "e8m0", "-1", "a negative value into e8m0: the sign ignored, or NaN"},
      {C::inf, "e8m0", "inf", "infinity into e8m0: 2^127 (0xfe) or NaN (0xff)"},
      {C::overflow, "e8m0", "3e38", "just above 2^127 into e8m0: 2^127 or NaN"},
      {C::subnormal, "e8m0", "1e-40", "below 2^-127 into e8m0: the smallest value"},
      {C::subnormal, "e8m0", "f32:0x00400001",
       "just above 2^-127: rounds up to 2^-126 (torch, ml_dtypes) or to 2^-127"},
  };
  return probes;
}

namespace {

// The probe's input as an exact value: "FORMAT:0xCODE" or a text literal.
std::optional<exact::Value> probe_value(std::string_view input) {
  const std::size_t colon = input.find(':');
  if (colon == std::string_view::npos) return exact::parse(input);
  const Format* f = find_format(std::string(input.substr(0, colon)));
  const std::string_view hex = input.substr(colon + 1);
  if (!f || hex.size() < 3 || hex.substr(0, 2) != "0x") return std::nullopt;
  std::uint64_t code = 0;
  for (char ch : hex.substr(2)) {
    const int d = ch >= '0' && ch <= '9' ? ch - '0' : (ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1);
    if (d < 0 || code >> 60) return std::nullopt;
    code = code * 16 + static_cast<std::uint64_t>(d);
  }
  if (!f->valid_code(code)) return std::nullopt;
  return exact::from_code(*f, code, false);
}

bool same_result(const DiffCell& a, const DiffCell& b) {
  if (a.unsupported || b.unsupported) return a.unsupported == b.unsupported;
  return a.target == b.target && a.result.code == b.result.code;
}

}  // namespace

std::vector<DiffGroup> DiffRow::groups() const {
  std::vector<DiffGroup> out;
  for (const DiffCell& c : cells) {
    if (!c.available) continue;
    auto g = std::find_if(out.begin(), out.end(), [&](const DiffGroup& x) { return same_result(*x.example, c); });
    if (g == out.end()) out.push_back({&c, {c.profile}});
    else g->profiles.push_back(c.profile);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const DiffGroup& a, const DiffGroup& b) { return a.profiles.size() > b.profiles.size(); });
  return out;
}

DiffRow evaluate_probe(const DiffProbe& probe) {
  DiffRow row;
  row.probe = &probe;
  const Format* target = find_format(probe.target);
  const std::optional<exact::Value> x = probe_value(probe.input);
  for (const Profile& prof : profiles()) {
    DiffCell cell;
    cell.profile = &prof;
    if (!target || !x) {
      cell.why = "the probe does not parse";
      row.cells.push_back(std::move(cell));
      continue;
    }
    std::string error;
    const std::optional<Resolved> r = resolve(&prof, *target, PolicyRequest{}, error);
    if (!r) {
      cell.why = error;
      row.cells.push_back(std::move(cell));
      continue;
    }
    cell.available = true;
    cell.target = r->target;
    cell.policy = r->policy;
    cell.result = exact::round(*r->target, *x, r->policy);
    cell.unsupported = (cell.result.flags & flag::unsupported) != 0;
    if (!cell.unsupported) cell.value = exact::code_text(*r->target, cell.result.code);
    row.cells.push_back(std::move(cell));
  }
  return row;
}

std::vector<DiffRow> profile_differences() {
  std::vector<DiffRow> out;
  for (const DiffProbe& p : profile_diff_probes()) {
    DiffRow row = evaluate_probe(p);
    if (row.groups().size() > 1) out.push_back(std::move(row));
  }
  return out;
}

}  // namespace lowbit
