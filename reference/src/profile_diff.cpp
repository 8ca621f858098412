#include "lowbit/profile_diff.hpp"

#include "lowbit/exact.hpp"
#include "lowbit/registry.hpp"

namespace lowbit {

const std::vector<DiffProbe>& profile_diff_probes() {
  // docs/semantics.md §3 names each of these; one input per kind of disagreement.
  static const std::vector<DiffProbe> probes = {
      {"e4m3", "480", "finite overflow: NaN without saturation, 448 with it"},
      {"e5m2", "inf", "infinity into a format with Inf: kept (nosat) or clamped to max (satfinite)"},
      {"e4m3", "-nan", "NaN sign: kept (0xff) or canonical positive NaN (0x7f)"},
      {"f16", "nan", "NaN into an IEEE format: quiet NaN 0x7e00 or CUDA's canonical 0x7fff"},
      {"e2m1", "nan", "NaN into a format without NaN: +max, the flipped-sign zero code, or undefined"},
      {"e2m1", "5", "a tie: to even (4) or away from zero (6, microxcaling's nearest)"},
      {"int8", "-2", "int8 elements: two's complement (0x80 is -2) or sign-magnitude (clamps to -127/64)"},
      {"e8m0", "0.75", "e8m0 tie between 2^-1 and 2^0: up, toward zero (floor) or to the even exponent"},
      {"e8m0", "0", "zero into e8m0 (no zero): 2^-127 or NaN"},
      {"e8m0", "-1", "a negative value into e8m0: the sign ignored, or NaN"},
      {"e8m0", "inf", "infinity into e8m0: 2^127 (0xfe) or NaN (0xff)"},
      {"e8m0", "3e38", "just above 2^127 into e8m0: 2^127 or NaN"},
      {"e8m0", "1e-40", "below 2^-127 into e8m0: the smallest value"},
      {"e4m3fnuz", "448", "overflow in a fnuz format: NaN (0x80)"},
  };
  return probes;
}

DiffRow evaluate_probe(const DiffProbe& probe) {
  DiffRow row;
  row.probe = &probe;
  const Format* target = find_format(probe.target);
  const std::optional<exact::Value> x = exact::parse(probe.input);
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
    const DiffCell* first = nullptr;
    bool differ = false;
    for (const DiffCell& c : row.cells) {
      if (!c.available) continue;
      if (!first) {
        first = &c;
        continue;
      }
      if (c.unsupported != first->unsupported || c.target != first->target ||
          (!c.unsupported && c.result.code != first->result.code))
        differ = true;
    }
    if (differ) out.push_back(std::move(row));
  }
  return out;
}

}  // namespace lowbit
