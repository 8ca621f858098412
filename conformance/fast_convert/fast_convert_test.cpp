// Quick tier: the 32-bit element conversion (lowbit/fast_convert.hpp) equals lowbit::convert (code,
// flags, ternary) for every pair of fast_support.hpp's proof_pairs(): on every bf16 and f16 input, and
// on every f32 boundary pattern of the target, plus 2^24 seeded f32 samples spread over the pairs; with the rows and
// policies as compile-time constants as the device kernels compile them; and on random formats and policies wherever
// fast::applies() holds.  The full tier takes every f32 input (the digest sweep, conformance/digests/).
#include <gtest/gtest.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "fast_support.hpp"
#include "lowbit/registry.hpp"

namespace lowbit::fast_test {
namespace {

struct Splitmix {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
};

std::string pair_name(const Pair& p) {
  return std::string(p.to->name) + " under " + whole_policy_text(p.policy) + " (" + p.why + ")";
}

TEST(FastConvert, ProofPairsAreTheOnesTheQuantizersAndProfilesUse) {
  const auto pairs = proof_pairs();
  bool mx_rceil = false, cuda_e4m3 = false, e2m1_quantizer = false, ue4m3_default = false;
  for (const Pair& p : pairs) {
    // Every pair must be one the fast path takes from each source (else the proof would prove nothing).
    for (const Format* from : k_sources) EXPECT_TRUE(fast::applies(*from, *p.to, p.policy)) << pair_name(p);
    mx_rceil |= p.to == &formats::e8m0 && p.policy.rounding == Rounding::rup &&
                p.policy.quirks.unsigned_negative == UnsignedNegative::magnitude;
    cuda_e4m3 |= p.to == &formats::e4m3 && p.why.find("cuda") != std::string::npos;
    e2m1_quantizer |= p.to == &formats::e2m1 && p.why.find("quantizer") != std::string::npos;
    ue4m3_default |= p.to == &formats::ue4m3 && p.why.find("builtin") != std::string::npos;
  }
  EXPECT_TRUE(mx_rceil && cuda_e4m3 && e2m1_quantizer && ue4m3_default);
  EXPECT_GE(pairs.size(), 40u);
  std::printf("%zu element/policy pairs\n", pairs.size());
}

// The predicate: what the 32-bit path refuses.
TEST(FastConvert, AppliesOnlyWhereThe32BitArithmeticHolds) {
  const Policy rne{};
  Policy sr;
  sr.rounding = Rounding::sr_a;
  sr.sr_bits = 8;
  EXPECT_TRUE(fast::applies(formats::f32, formats::e4m3, rne));
  EXPECT_TRUE(fast::applies(formats::bf16, formats::f16, rne));
  EXPECT_FALSE(fast::applies(formats::f32, formats::e4m3, sr));     // stochastic: convert() keeps it
  EXPECT_FALSE(fast::applies(formats::f64, formats::e4m3, rne));    // 64-bit source
  EXPECT_FALSE(fast::applies(formats::e4m3, formats::e5m2, rne));   // not an IEEE source
  EXPECT_FALSE(fast::applies(formats::f32, formats::int8, rne));    // fixed point, two's complement
  EXPECT_FALSE(fast::applies(formats::f32, formats::int8sm, rne));  // fixed point
  EXPECT_FALSE(fast::applies(formats::f32, formats::tf32, rne));    // stored shifted
  EXPECT_FALSE(fast::applies(formats::f32, formats::f64, rne));     // 52 mantissa bits
}

TEST(FastConvert, EveryBf16AndF16Input) {
  const auto pairs = proof_pairs();
  std::vector<std::uint32_t> all16(1u << 16);
  for (std::uint32_t i = 0; i < all16.size(); ++i) all16[i] = i;
  for (const Pair& p : pairs)
    for (const Format* from : {&formats::bf16, &formats::f16})
      EXPECT_EQ(compare(*from, all16, *p.to, p.policy), 0u) << from->name << " -> " << pair_name(p);
}

TEST(FastConvert, F32BoundaryPatternsAndSamples) {
  const auto pairs = proof_pairs();
  std::atomic<std::uint64_t> bad{0}, compared{0};
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, pairs.size(), 1), [&](const tbb::blocked_range<std::size_t>& r) {
    for (std::size_t i = r.begin(); i != r.end(); ++i) {
      const Pair& p = pairs[i];
      std::vector<std::uint32_t> in = boundary_inputs(formats::f32, *p.to);
      Splitmix g{0xFA57C0DEull + i};
      const std::size_t boundaries = in.size();
      // 2^24 samples in all, spread evenly over the pairs.
      const std::size_t samples = ((std::size_t{1} << 24) + pairs.size() - 1) / pairs.size();
      for (std::size_t k = 0; k < samples; ++k) in.push_back(static_cast<std::uint32_t>(g.next() >> 32));
      compared += in.size();
      const std::uint64_t b = compare(formats::f32, in, *p.to, p.policy);
      if (b)
        ADD_FAILURE() << b << " mismatches for f32 -> " << pair_name(p) << " (" << boundaries << " boundary inputs)";
      bad += b;
    }
  });
  EXPECT_EQ(bad.load(), 0u);
  std::printf("%llu f32 inputs compared\n", static_cast<unsigned long long>(compared.load()));
}

// The boundary list reaches what it claims: e4m3's overflow threshold 464 (0x43E80000) +-2 ulps, its
// largest value 448, half its smallest subnormal 2^-10, and both NaN kinds.
TEST(FastConvert, BoundaryInputsHoldTheThresholds) {
  const auto v = boundary_inputs(formats::f32, formats::e4m3);
  auto has = [&](std::uint32_t c) { return std::find(v.begin(), v.end(), c) != v.end(); };
  for (std::uint32_t c : {0x43E80000u, 0x43E7FFFEu, 0x43E80002u, 0xC3E80001u, 0x43E00000u, 0x3A800000u, 0x3A7FFFFFu,
                          0x7FC00000u, 0x7F800001u, 0xFF800000u, 0x80000000u})
    EXPECT_TRUE(has(c)) << hex(c);
}

// The kernels pass constexpr rows and policies (device/src/quantize.cu): the same function with every
// format and policy test folded.  The element formats and policies of the compiled kernels, on the f32
// boundary patterns and 2^20 samples each.
inline constexpr Policy k_quantizer = scale::Options{}.element_policy;
inline constexpr Policy k_cuda{.rounding = Rounding::rne,
                               .overflow = Overflow::satfinite,
                               .quirks = {.nan_to_no_nan = NanToNoNan::plus_max,
                                          .nan_style = NanStyle::positive_all_ones,
                                          .unsigned_negative = UnsignedNegative::magnitude,
                                          .zero_into_no_zero = ZeroIntoNoZero::smallest}};

template <const Format& To, const Policy& P>
std::uint64_t compare_constant() {
  static_assert(fast::applies(formats::f32, To, P));
  std::vector<std::uint32_t> in = boundary_inputs(formats::f32, To);
  Splitmix g{0xC0257A47ull};
  for (int k = 0; k < (1 << 20); ++k) in.push_back(static_cast<std::uint32_t>(g.next() >> 32));
  std::uint64_t bad = 0;
  for (std::uint32_t c : in) {
    constexpr Format f32 = formats::f32;
    constexpr Format to = To;
    constexpr Policy p = P;
    if (!(fast::convert(f32, c, to, p) == convert(f32, c, to, p))) ++bad;
  }
  return bad;
}

TEST(FastConvert, ConstantRowsAndPoliciesAsTheKernelsCompileThem) {
  EXPECT_EQ((compare_constant<formats::e4m3, k_quantizer>()), 0u);
  EXPECT_EQ((compare_constant<formats::e4m3, k_cuda>()), 0u);
  EXPECT_EQ((compare_constant<formats::e5m2, k_quantizer>()), 0u);
  EXPECT_EQ((compare_constant<formats::e5m2, k_cuda>()), 0u);
  EXPECT_EQ((compare_constant<formats::e2m1, k_quantizer>()), 0u);
  EXPECT_EQ((compare_constant<formats::e2m1, k_cuda>()), 0u);
  // The cuda policy is what the profile resolves (the device's k_cuda_policy is checked the same way by
  // device/tests/quantize_host_test.cpp).
  PolicyRequest req;
  req.rounding = Rounding::rne;
  req.overflow = Overflow::satfinite;
  std::string error;
  EXPECT_EQ(whole_policy_text(resolve(find_profile("cuda"), formats::e4m3, req, error)->policy), whole_policy_text(k_cuda));
  // A constant result: the fast path is a constant expression as well.
  static_assert(fast::convert(formats::f32, 0x43E00000u, formats::e4m3, k_quantizer).code == 0x7E);
  static_assert(fast::convert(formats::f32, 0x7F800000u, formats::e4m3, k_quantizer).code == 0x7E);
  static_assert(fast::convert(formats::f32, 0x3F400000u, formats::e2m1, k_quantizer).code ==
                0x2);  // 0.75 -> 1 (tie to even)
}

// Random formats (every built-in row and parametric ones) and random deterministic policies with random
// quirks, wherever fast::applies() holds: random inputs and each target's boundary patterns.
TEST(FastConvert, RandomFormatsAndPolicies) {
  std::vector<const Format*> targets;
  for (const Format& f : formats::builtin) targets.push_back(&f);
  for (const char* n : {"e3m3", "e4m2", "e5m3", "e2m2", "e6m1", "e3m2-fnuz", "e4m4b5", "e5m1u", "e1m6", "binary8p3se",
                        "binary8p5sf", "binary6p3uf", "binary4p2se", "binary8p1uf", "e8m7", "e5m10"}) {
    const Format* f = find_format(n);
    ASSERT_NE(f, nullptr) << n;
    targets.push_back(f);
  }
  Splitmix g{0x7A2D0000ull};
  std::uint64_t cases = 0, bad = 0;
  for (int round = 0; round < 600; ++round) {
    const Format& to = *targets[g.next() % targets.size()];
    const Format& from = *k_sources[g.next() % 3];
    Policy p;
    p.rounding = nth<Rounding>(g.next() % 6);  // the deterministic modes come first in the table
    p.overflow = nth<Overflow>(g.next());
    p.subnormals = nth<Subnormals>(g.next());
    p.tininess = nth<Tininess>(g.next());
    p.quirks.nan_to_no_nan = nth<NanToNoNan>(g.next());
    p.quirks.nan_style = nth<NanStyle>(g.next());
    p.quirks.unsigned_negative = nth<UnsignedNegative>(g.next());
    p.quirks.zero_into_no_zero = nth<ZeroIntoNoZero>(g.next());
    const std::uint64_t q = g.next();
    p.quirks.numpy_half_nan = q & 1;
    p.quirks.identity_copies = q & 2;
    p.quirks.nozero_lowest_binade_rounds_up = q & 4;
    p.quirks.infinity_ignores_saturation = q & 8;
    if (!fast::applies(from, to, p)) continue;
    std::vector<std::uint32_t> in = boundary_inputs(from, to);
    const std::uint32_t mask = static_cast<std::uint32_t>(bits::ones(from.code_bits()));
    for (int k = 0; k < 4096; ++k) in.push_back(static_cast<std::uint32_t>(g.next()) & mask);
    cases += in.size();
    bad += compare(from, in, to, p);
  }
  EXPECT_EQ(bad, 0u);
  EXPECT_GT(cases, 1000000u);
}

}  // namespace
}  // namespace lowbit::fast_test
