// Every conformance check as a test: Quick/<check> for the quick tier, Full/<check> for the rest.
// The same checks run from `lowbit conform`; a failure prints the check's first mismatches.
#include <gtest/gtest.h>

#include <cctype>

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

std::string test_name(const std::string& check_name) {
  std::string s = check_name;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

class ConformanceCheck : public testing::Test {
 public:
  explicit ConformanceCheck(const Check* check) : check_(check) {}
  void TestBody() override {
    const lowbit::checks::Outcome o = lowbit::checks::run_all(*check_);
    if (o.skipped) GTEST_SKIP() << o.note;
    EXPECT_GT(o.cases, 0u) << check_->name << " ran no case";
    std::string examples;
    for (const lowbit::checks::Example& e : o.examples) examples += "\n  " + e.text;
    EXPECT_EQ(o.mismatches, 0u) << check_->name << ": " << o.mismatches << " of " << o.cases
                                << " cases disagree; first ones:" << examples;
  }

 private:
  const Check* check_;
};

// Registered at start-up, one test per check: suite Quick or Full, named after the check.
const bool registered = [] {
  for (Tier t : {Tier::quick, Tier::full})
    for (const Check* c : of_tier(t))
      testing::RegisterTest(t == Tier::quick ? "Quick" : "Full", test_name(c->name).c_str(), nullptr, nullptr,
                            __FILE__, __LINE__, [c]() -> testing::Test* { return new ConformanceCheck(c); });
  return true;
}();

}  // namespace
