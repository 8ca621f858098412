// The exact GEMM reference, the f32 accumulation orders, and the DeepSeek-V3 observation (§3.3.2) as a
// test: FP8 tensor-core accumulation without promotion loses accuracy as K grows.
#include <gtest/gtest.h>
#include <gmpxx.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "lowbit/convert.hpp"
#include "lowbit/exact.hpp"
#include "lowbit/gemm.hpp"
#include "random_codes.hpp"
#include "lowbit/rng.hpp"

namespace {

using lowbit::gemm::Matrix;
namespace F = lowbit::formats;

using lowbit::testing::splitmix;

// Independent check of the exact reference: the same dot product summed with GMP rationals and rounded
// by the exact path.
std::uint64_t rational_dot(const lowbit::Format& f, const std::vector<std::uint64_t>& a,
                           const std::vector<std::uint64_t>& b) {
  mpq_class sum = 0;
  for (std::size_t k = 0; k < a.size(); ++k) {
    const auto x = lowbit::exact::from_code(f, a[k]);
    const auto y = lowbit::exact::from_code(f, b[k]);
    if (x.cls != lowbit::ValueClass::finite || y.cls != lowbit::ValueClass::finite) continue;
    mpq_class p = x.magnitude * y.magnitude;
    sum += (x.negative != y.negative) ? mpq_class(-p) : p;
  }
  lowbit::exact::Value v;
  if (sum != 0) {
    v.cls = lowbit::ValueClass::finite;
    v.negative = sum < 0;
    v.magnitude = abs(sum);
  }
  return lowbit::exact::round(F::f32, v, {}).code;
}

TEST(ExactGemm, EqualsRationalSumForEveryOperandFormat) {
  std::uint64_t seed = 7;
  for (const lowbit::Format* f : {&F::e4m3, &F::e5m2, &F::e2m1, &F::e3m2, &F::bf16, &F::f16, &F::f32}) {
    for (int trial = 0; trial < 40; ++trial) {
      const int k = 1 + static_cast<int>(splitmix(seed) % 70);
      auto a = lowbit::testing::finite_codes(*f, k, seed), b = lowbit::testing::finite_codes(*f, k, seed);
      const Matrix ma{f, 1, k, a}, mb{f, k, 1, b};
      EXPECT_EQ(lowbit::gemm::exact(ma, mb, nullptr)[0], rational_dot(*f, a, b)) << f->name << " k=" << k;
    }
  }
}

// The exact route keeps the operands' doubles of one call for the next on the same thread (src/gemm.cpp,
// OperandStorage): products of growing and shrinking shapes one after another, then all of them at once from
// oneTBB tasks, every element equal to its rational sum.  Whether a thread waiting inside one product starts
// another (the storage's busy case) is the scheduler's choice: this test does not force it.
TEST(ExactGemm, ProductsAfterAndBesideOneAnother) {
  struct Case {
    const lowbit::Format* f;
    int m, k, n;
    std::vector<std::uint64_t> a, b, want;
  };
  std::uint64_t seed = 41;
  std::vector<Case> cases;
  for (const lowbit::Format* f : {&F::e4m3, &F::e5m2, &F::e2m1})
    for (auto [m, k, n] : {std::array{6, 40, 5}, std::array{33, 17, 9}, std::array{2, 70, 3}, std::array{48, 64, 40}}) {
      Case c{f, m, k, n, lowbit::testing::finite_codes(*f, m * k, seed), {}, {}};
      c.b = lowbit::testing::finite_codes(*f, k * n, seed);
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
          std::vector<std::uint64_t> row(c.a.begin() + i * k, c.a.begin() + (i + 1) * k), column;
          for (int q = 0; q < k; ++q) column.push_back(c.b[static_cast<std::size_t>(q * n + j)]);
          c.want.push_back(rational_dot(*f, row, column));
        }
      cases.push_back(std::move(c));
    }
  auto product = [](const Case& c) {
    return lowbit::gemm::exact({c.f, c.m, c.k, c.a}, {c.f, c.k, c.n, c.b}, nullptr);
  };
  for (int round = 0; round < 2; ++round)
    for (const Case& c : cases) EXPECT_EQ(product(c), c.want) << c.f->name << " " << c.m << "x" << c.k << "x" << c.n;
  std::vector<std::vector<std::uint64_t>> got(cases.size() * 4);
  tbb::parallel_for(std::size_t{0}, got.size(), [&](std::size_t t) { got[t] = product(cases[t % cases.size()]); });
  for (std::size_t t = 0; t < got.size(); ++t) EXPECT_EQ(got[t], cases[t % cases.size()].want) << "task " << t;
}

// Sums wider than a double: 2^15 * 2^15 + 2^6 * 1 + 2^-16 * 2^-16 = 2^30 + 2^6 + 2^-32 spans 63 bits.  2^30 + 2^6
// is the midpoint between the f32 neighbours 2^30 and 2^30 + 2^7, so the correctly rounded result is the upper
// one (0x4E800001) only because of the last term; a route that dropped it, or rounded to 53 bits first, would
// tie to even and give 0x4E800000.  The same with every sign flipped, and with the tiny term cancelling instead
// (2^30 + 2^6 - 2^-32 rounds down).  e5m2 on both sides: the integer route's three band products.
TEST(ExactGemm, RoundsOnceAcrossTheWholeSum) {
  const std::uint64_t big = 0x78, mid = 0x54, one = 0x3C, tiny = 0x01;  // e5m2: 2^15, 2^6, 1, 2^-16
  for (int sign = 0; sign < 2; ++sign)
    for (int cancel = 0; cancel < 2; ++cancel) {
      const std::uint64_t s = sign ? 0x80 : 0;
      const std::vector<std::uint64_t> a = {big | s, mid | s, tiny | (cancel ? s ^ 0x80 : s)}, b = {big, one, tiny};
      const std::uint64_t want = (sign ? 0xCE800000u : 0x4E800000u) + (cancel ? 0 : 1);
      EXPECT_EQ(lowbit::gemm::exact({&F::e5m2, 1, 3, a}, {&F::e5m2, 3, 1, b}, nullptr)[0], want)
          << "sign " << sign << " cancel " << cancel;
      EXPECT_EQ(rational_dot(F::e5m2, a, b), want);
    }
}

// An exact sum has no order: permuting K never changes the result (e5m2 spans 2^-16 .. 57344, so a
// rounding accumulator would notice).
TEST(ExactGemm, IndependentOfOrder) {
  std::uint64_t seed = 11;
  for (int trial = 0; trial < 50; ++trial) {
    const int k = 64;
    auto a = lowbit::testing::finite_codes(F::e5m2, k, seed), b = lowbit::testing::finite_codes(F::e5m2, k, seed);
    const auto d0 = lowbit::gemm::exact({&F::e5m2, 1, k, a}, {&F::e5m2, k, 1, b}, nullptr)[0];
    std::vector<int> idx(k);
    std::iota(idx.begin(), idx.end(), 0);
    std::reverse(idx.begin(), idx.end());
    std::rotate(idx.begin(), idx.begin() + trial % k, idx.end());
    std::vector<std::uint64_t> pa(k), pb(k);
    for (int i = 0; i < k; ++i) {
      pa[i] = a[idx[i]];
      pb[i] = b[idx[i]];
    }
    EXPECT_EQ(lowbit::gemm::exact({&F::e5m2, 1, k, pa}, {&F::e5m2, k, 1, pb}, nullptr)[0], d0);
  }
}

// alpha * AB + beta * C rounded once: 0.1f * (1 * 3) + 0.5 * 1 = 0.8000000119..., whose correctly rounded
// f32 is 0x3F4CCCCD.  (0.1f = 0x3DCCCCCD = 13421773 * 2^-27; times 3 = 40265319 * 2^-27; plus 0.5 =
// 107374183 * 2^-27, which needs 27 bits: dropping 3 bits of 0b111 rounds up: 13421773 * 2^-24 = 0x3F4CCCCD.)
TEST(ExactGemm, AlphaBetaRoundedOnce) {
  const Matrix a{&F::f32, 1, 1, {0x3F800000u}}, b{&F::f32, 1, 1, {0x40400000u}}, c{&F::f32, 1, 1, {0x3F800000u}};
  lowbit::gemm::ExactOptions o;
  o.alpha = 0x3DCCCCCDu;
  o.beta = 0x3F000000u;
  EXPECT_EQ(lowbit::gemm::exact(a, b, &c, o)[0], 0x3F4CCCCDu);
}

// Accumulation orders on [1, 2^24, -2^24] * [1, 1, 1]: sequential f32 loses the 1 (1 + 2^24 rounds to
// 2^24 under rne, a tie to even), then -2^24 gives 0; pairwise sums 1 + (2^24 - 2^24) = 1 with the split
// [1 | 2^24, -2^24]; the exact answer is 1.
TEST(AccumulationOrders, SequentialVersusPairwise) {
  const Matrix a{&F::f32, 1, 3, {0x3F800000u, 0x4B800000u, 0xCB800000u}};
  const Matrix b{&F::f32, 3, 1, {0x3F800000u, 0x3F800000u, 0x3F800000u}};
  lowbit::gemm::OrderOptions o;
  o.order = lowbit::gemm::Order::sequential;
  EXPECT_EQ(lowbit::gemm::accumulate(a, b, nullptr, o)[0], 0x00000000u);
  o.order = lowbit::gemm::Order::pairwise;
  EXPECT_EQ(lowbit::gemm::accumulate(a, b, nullptr, o)[0], 0x3F800000u);
  EXPECT_EQ(lowbit::gemm::exact(a, b, nullptr)[0], 0x3F800000u);
}

// FMA versus separate rounding: acc = -(1 + 2^-11), then (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24.  Without FMA
// the product rounds (a tie at 2^-24, to even) to 1 + 2^-11 and the sum is 0; fmaf keeps the product
// exact and gives 2^-24 (0x33800000).
TEST(AccumulationOrders, FusedMultiplyAdd) {
  const Matrix a{&F::f32, 1, 2, {0xBF801000u, 0x3F800800u}};
  const Matrix b{&F::f32, 2, 1, {0x3F800000u, 0x3F800800u}};
  lowbit::gemm::OrderOptions o;
  o.order = lowbit::gemm::Order::sequential;
  EXPECT_EQ(lowbit::gemm::accumulate(a, b, nullptr, o)[0], 0x00000000u);
  o.order = lowbit::gemm::Order::sequential_fma;
  EXPECT_EQ(lowbit::gemm::accumulate(a, b, nullptr, o)[0], 0x33800000u);
}

// ---- the DeepSeek-V3 experiment ---------------------------------------------------------------------
// M = N = 64, seed 1, N(0,1) inputs (lowbit::rng::normal: the polar method over splitmix64 with a
// deterministic logarithm, as `lowbit report` draws them; the same inputs on every platform), quantized to e4m3 per tensor: scale =
// fp32(448 / amax), code = e4m3(rne, satfinite)(fp32(x * scale)).  The error is measured on the codes'
// products (the scales multiply D and D_exact alike).
struct Errors {
  double norm;
  double max_rel;
};

std::vector<std::uint64_t> quantized_normal(int n, std::uint64_t& seed) {
  std::vector<float> x(static_cast<std::size_t>(n));
  for (float& v : x) v = static_cast<float>(lowbit::rng::normal(seed));
  float amax = 0;
  for (float v : x) amax = std::max(amax, std::fabs(v));
  const float scale = 448.0f / amax;
  lowbit::Policy p;
  p.overflow = lowbit::Overflow::satfinite;
  std::vector<std::uint64_t> codes(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    codes[i] = lowbit::convert(F::f32, std::bit_cast<std::uint32_t>(x[i] * scale), F::e4m3, p).code;
  return codes;
}

Errors errors(const std::vector<std::uint64_t>& d, const std::vector<std::uint64_t>& ref) {
  double num = 0, den = 0, rms = 0;
  for (std::size_t i = 0; i < d.size(); ++i) {
    const double r = std::bit_cast<float>(static_cast<std::uint32_t>(ref[i]));
    rms += r * r;
  }
  rms = std::sqrt(rms / static_cast<double>(d.size()));
  double max_rel = 0;
  for (std::size_t i = 0; i < d.size(); ++i) {
    const double r = std::bit_cast<float>(static_cast<std::uint32_t>(ref[i]));
    const double v = std::bit_cast<float>(static_cast<std::uint32_t>(d[i]));
    num += (v - r) * (v - r);
    den += r * r;
    if (std::fabs(r) >= 0.1 * rms) max_rel = std::max(max_rel, std::fabs(v - r) / std::fabs(r));
  }
  return {std::sqrt(num / den), max_rel};
}

TEST(DeepSeekExperiment, PromotionKeepsFp8AccumulationAccurate) {
  const auto* hopper = lowbit::gemm::find_model("hopper-fp8");
  ASSERT_NE(hopper, nullptr);
  double prev = 0;
  for (int k : {4096, 16384}) {
    std::uint64_t seed = 1;
    const Matrix a{&F::e4m3, 64, k, quantized_normal(64 * k, seed)};
    const Matrix b{&F::e4m3, k, 64, quantized_normal(k * 64, seed)};
    const auto ref = lowbit::gemm::exact(a, b, nullptr);
    const Errors plain = errors(lowbit::gemm::run_model(*hopper, a, b, nullptr), ref);
    const Errors promoted = errors(lowbit::gemm::run_promoted(*hopper, 128, a, b, nullptr), ref);
    RecordProperty(std::string("k").append(std::to_string(k)).append("_hopper_fp8_norm"), std::to_string(plain.norm));
    RecordProperty(std::string("k").append(std::to_string(k)).append("_promote128_norm"), std::to_string(promoted.norm));
    // The thresholds: at least 5x (K = 4096) and 10x (K = 16384) smaller with promotion.
    EXPECT_GT(plain.norm, (k == 4096 ? 5.0 : 10.0) * promoted.norm) << "k=" << k;
    // Without promotion the largest element-wise error is of the order of a percent (DeepSeek-V3: nearly
    // 2% at K = 4096); with it, far below.
    EXPECT_GT(plain.max_rel, 1e-3) << "k=" << k;
    EXPECT_LT(promoted.max_rel, plain.max_rel / 5) << "k=" << k;
    // Error grows with K without promotion.
    EXPECT_GT(plain.norm, prev);
    prev = plain.norm;
    std::printf("K=%d hopper-fp8 norm %.3g max %.3g | promote128 norm %.3g max %.3g\n", k, plain.norm, plain.max_rel,
                promoted.norm, promoted.max_rel);
  }
}

}  // namespace
