// Every conformance check as a test: Quick/<check> for the quick tier, Full/<check> for the rest.
// The same checks run from `lowbit conform`; a failure prints the check's first mismatches.
#include <gtest/gtest.h>

#include "checks.hpp"

namespace {

using lowbit::checks::Check;
using lowbit::checks::Tier;

std::vector<const Check*> of_tier(Tier t) {
  std::vector<const Check*> v;
  for (const Check& c : lowbit::checks::all_checks())
    if (c.tier == t) v.push_back(&c);
  return v;
}

std::string test_name(const testing::TestParamInfo<const Check*>& info) {
  std::string s = info.param->name;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

class ConformanceCheck : public testing::TestWithParam<const Check*> {};

TEST_P(ConformanceCheck, NoMismatch) {
  const Check& check = *GetParam();
  const lowbit::checks::Outcome o = check.run({});
  if (o.skipped) GTEST_SKIP() << o.note;
  EXPECT_GT(o.cases, 0u) << check.name << " ran no case";
  std::string examples;
  for (const std::string& e : o.examples) examples += "\n  " + e;
  EXPECT_EQ(o.mismatches, 0u) << check.name << ": " << o.mismatches << " of " << o.cases
                              << " cases disagree; first ones:" << examples;
}

INSTANTIATE_TEST_SUITE_P(Quick, ConformanceCheck, testing::ValuesIn(of_tier(Tier::quick)), test_name);
INSTANTIATE_TEST_SUITE_P(Full, ConformanceCheck, testing::ValuesIn(of_tier(Tier::full)), test_name);

}  // namespace
