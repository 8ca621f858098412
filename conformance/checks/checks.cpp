#include "checks.hpp"

#include <algorithm>

#include "support.hpp"

namespace lowbit::checks {

#ifndef LOWBIT_CHECKS_CUDA_HOST
// Without the toolkit's headers the differential reports itself as skipped, so that a report says
// what it did not check.
std::vector<Check> cuda_host_checks() {
  auto skipped = [](Range, const Progress&) {
    Outcome o;
    o.skipped = true;
    o.note = "the CUDA toolkit's headers (cuda_fp4.h) were not found when lowbit was configured";
    return o;
  };
  // Nothing is enumerated: every shard's range is empty, and every shard reports the skip.
  auto none = [] { return std::uint64_t{0}; };
  return {{"cuda-host", Tier::quick, "the CUDA toolkit's host conversions vs lowbit --profile cuda", "f32 input", none,
           skipped},
          {"cuda-host-all-f32", Tier::full, "the same on all 2^32 f32 inputs", "f32 input", none, skipped}};
}
#endif

const std::vector<Check>& all_checks() {
  static const std::vector<Check> checks = [] {
    std::vector<Check> v;
    for (auto family : {semantics_checks, sweep_checks, cuda_host_checks})
      for (Check& c : family()) v.push_back(std::move(c));
    std::stable_partition(v.begin(), v.end(), [](const Check& c) { return c.tier == Tier::quick; });
    return v;
  }();
  return checks;
}

std::vector<const Check*> checks_for(Tier tier) {
  std::vector<const Check*> v;
  for (const Check& c : all_checks())
    if (tier == Tier::full || c.tier == Tier::quick) v.push_back(&c);
  return v;
}

Outcome run_all(const Check& c, const Progress& progress) { return c.run({0, c.inputs()}, progress); }

const Check* find_check(std::string_view name) {
  for (const Check& c : all_checks())
    if (c.name == name) return &c;
  return nullptr;
}

}  // namespace lowbit::checks
