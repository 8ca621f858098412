// The deterministic generators of `lowbit report` (lowbit/rng.hpp): accurate enough, and the
// same bits everywhere.  The known answers below were computed with g++ 12 (-O0 and -O3) and clang++ 14
// (-O2), all with -ffp-contract=off, and agree; a compiler or library that changes one bit fails here
// rather than silently changing the committed report.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>

#include "lowbit/rng.hpp"

namespace {

namespace R = lowbit::rng;

std::uint64_t bits(double x) { return std::bit_cast<std::uint64_t>(x); }

TEST(ReportRandom, LogAndExp2AreAccurate) {
  std::uint64_t s = 5;
  for (int i = 0; i < 200000; ++i) {
    const double x = std::ldexp(R::uniform_open(s) + 0.5, static_cast<int>(R::splitmix(s) % 200) - 100);
    const double want = std::log(x);
    if (std::fabs(want) > 1e-3) { ASSERT_NEAR(R::det_log(x), want, 1e-15 * std::fabs(want)) << x; }
    const double t = (R::uniform_open(s) - 0.5) * 100;
    ASSERT_NEAR(R::det_exp2(t), std::exp2(t), 1e-15 * std::exp2(t)) << t;
    const double near1 = 1 + (R::uniform_open(s) - 0.5) * 1e-3;
    ASSERT_NEAR(R::det_log(near1), std::log(near1), 1e-15 * std::fabs(std::log(near1))) << near1;
  }
  EXPECT_EQ(R::det_log(1.0), 0.0);
  EXPECT_EQ(R::det_exp2(0.0), 1.0);
  EXPECT_EQ(R::det_exp2(-3.0), 0.125);
}

TEST(ReportRandom, KnownAnswers) {
  std::uint64_t s = 1;
  EXPECT_EQ(bits(R::normal(s)), 0x3fdb7c251a5470d2u);
  EXPECT_EQ(bits(R::normal(s)), 0x3fdd368fe72bb620u);
  EXPECT_EQ(bits(R::normal(s)), 0xbfd4eaec1cb1121fu);
  s = 2;
  EXPECT_EQ(bits(R::laplace(s)), 0x3fc239893f9558fau);
  s = 3;
  EXPECT_EQ(bits(R::student_t3(s)), 0xbfed856b062febc2u);
  s = 4;
  EXPECT_EQ(bits(R::log_uniform(s, -24, 8)), 0x40378a247a813b44u);
  // A digest of 400000 samples of every kind.
  s = 7;
  std::uint64_t h = 0;
  for (int i = 0; i < 100000; ++i) {
    h = h * 0x100000001B3ull ^ bits(R::normal(s));
    h = h * 0x100000001B3ull ^ bits(R::laplace(s));
    h = h * 0x100000001B3ull ^ bits(R::student_t3(s));
    h = h * 0x100000001B3ull ^ bits(R::log_uniform(s, -24, 8));
  }
  EXPECT_EQ(h, 0x18b42dae8f5c019du);
}

// The samples have the distributions they claim: moments over 200000 draws (standard errors about 0.002
// for the means and 0.003 to 0.01 for the variances).
TEST(ReportRandom, Moments) {
  const int n = 200000;
  std::uint64_t s = 11;
  double m1 = 0, m2 = 0, l1 = 0, l2 = 0, labs = 0;
  int t_big = 0, lu_below = 0;
  for (int i = 0; i < n; ++i) {
    const double z = R::normal(s), l = R::laplace(s), t = R::student_t3(s), u = R::log_uniform(s, -24, 8);
    m1 += z;
    m2 += z * z;
    l1 += l;
    l2 += l * l;
    labs += std::fabs(l);
    if (std::fabs(t) > 3.182446305284263) ++t_big;       // the two-sided 5% point of t with 3 degrees of freedom
    if (std::fabs(u) < std::ldexp(1.0, -8)) ++lu_below;  // 16 of the 32 binades
  }
  EXPECT_NEAR(m1 / n, 0.0, 0.01);
  EXPECT_NEAR(m2 / n, 1.0, 0.02);
  EXPECT_NEAR(l1 / n, 0.0, 0.01);
  EXPECT_NEAR(l2 / n, 1.0, 0.05);
  EXPECT_NEAR(labs / n, 0.70710678, 0.01);  // E|X| = b for Laplace(b), b = 1/sqrt(2)
  EXPECT_NEAR(static_cast<double>(t_big) / n, 0.05, 0.003);
  EXPECT_NEAR(static_cast<double>(lu_below) / n, 0.5, 0.005);
}

}  // namespace
