// Quick tier: the batch (SIMD) conversion equals the scalar path element for element.
//  - every bf16 and f16 input x every built-in target of at most 16 bits x every deterministic policy;
//  - the profile quirks, on special-rich inputs;
//  - random f32 inputs of every class, deterministic and stochastic (random bits per element);
//  - parametric and P3109 targets;
//  - every Highway target compiled in that this CPU runs (not only the one the dispatcher picks);
//  - lengths that leave a tail, unaligned buffers, and each subset of the optional outputs.
#include <gtest/gtest.h>
#include <hwy/highway.h>
#include <hwy/targets.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "batch_support.hpp"
#include "lowbit/registry.hpp"
#include "lowbit/scale_rules.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace lowbit::batch_test {
namespace {

std::vector<std::uint32_t> all16() {
  std::vector<std::uint32_t> v(1u << 16);
  for (std::uint32_t i = 0; i < v.size(); ++i) v[i] = i;
  return v;
}

// f32 inputs of every class, weighted towards the target's range: uniform bit patterns, values whose
// exponent lies near the target's binades (with mantissas that make ties, near-ties and all-ones),
// zeros, infinities, NaNs with payloads and signaling NaNs, f32 subnormals.
std::vector<std::uint32_t> random_f32(const Format& to, std::size_t n, std::uint32_t seed) {
  std::mt19937 g(seed);
  std::vector<std::uint32_t> v;
  v.reserve(n);
  const int lo = std::max(0, to.emin() + 127 - 28);
  const int hi = std::min(255, to.emax() + 127 + 3);
  const std::uint32_t specials[] = {0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000,
                                    0x7F800001, 0xFFBFFFFF, 0x7FFFFFFF, 0x7FA5A5A5, 0x00000001, 0x807FFFFF,
                                    0x00400000, 0x7F7FFFFF, 0xFF7FFFFF, 0x3F800000};
  for (std::uint32_t s : specials) v.push_back(s);
  while (v.size() < n) {
    const std::uint32_t u = g();
    switch (g() % 6) {
      case 0: v.push_back(u); break;
      case 1: v.push_back(u & 0x807FFFFF); break;  // f32 subnormals and zeros
      default: {
        const std::uint32_t e = static_cast<std::uint32_t>(lo + static_cast<int>(g() % static_cast<unsigned>(hi - lo + 1)));
        std::uint32_t mant = g() & 0x7FFFFF;
        const int drop = 23 - to.mantissa_bits;
        const std::uint32_t k = g() % 5;
        if (k == 0 && drop > 0) mant = (mant & ~((1u << drop) - 1)) | (1u << (drop - 1));  // a tie
        if (k == 1 && drop > 0) mant |= (1u << drop) - 1;                                   // just below the next
        if (k == 2) mant = 0x7FFFFF;
        v.push_back((u & 0x80000000u) | (e << 23) | mant);
      }
    }
  }
  return v;
}

std::vector<std::uint32_t> random_bits(std::size_t n, int sr_bits, std::uint32_t seed) {
  std::mt19937 g(seed);
  std::vector<std::uint32_t> r(n);
  for (auto& x : r) x = sr_bits >= 32 ? g() : g() & ((1u << sr_bits) - 1);
  return r;
}

std::string test_name(std::string s) {
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

// ---- exhaustive 16-bit sources x built-in targets x deterministic policies -------------------------

struct Pair {
  const Format* from;
  const Format* to;
};

std::vector<Pair> source_target_pairs() {
  std::vector<Pair> v;
  for (const Format* from : {&formats::bf16, &formats::f16})
    for (const Format* to : small_builtin_targets()) v.push_back({from, to});
  return v;
}

class Exhaustive16 : public ::testing::TestWithParam<Pair> {};

TEST_P(Exhaustive16, EveryInputEveryDeterministicPolicy) {
  const Pair pr = GetParam();
  ASSERT_TRUE(batch_supported(*pr.from, *pr.to));
  const auto inputs = all16();
  for (const Policy& p : deterministic_policies()) {
    ASSERT_EQ(compare(*pr.from, inputs, *pr.to, p), 0u) << describe(p);
  }
}

INSTANTIATE_TEST_SUITE_P(Quick, Exhaustive16, ::testing::ValuesIn(source_target_pairs()),
                         [](const auto& info) {
                           return test_name(std::string(info.param.from->name) + "_to_" + info.param.to->name);
                         });

// ---- quirks -----------------------------------------------------------------------------------------

TEST(BatchQuirks, EveryQuirkCombination) {
  std::vector<const Format*> targets = small_builtin_targets();
  for (const char* n : {"binary8p3se", "binary8p3ue", "binary6p2uf"}) targets.push_back(find_format(n));
  for (const Format* to : targets) {
    const auto inputs = random_f32(*to, 1024, 7);
    for (const Quirks& q : all_quirks())
      for (Rounding r : {Rounding::rne, Rounding::rtz, Rounding::rup})
        for (Overflow o : {Overflow::satfinite, Overflow::satpropagate, Overflow::nosat})
          for (Subnormals s : {Subnormals::keep, Subnormals::daz}) {
            const Policy p{.rounding = r, .overflow = o, .subnormals = s, .quirks = q};
            ASSERT_EQ(compare(formats::f32, inputs, *to, p), 0u) << to->name << ' ' << describe(p);
          }
  }
}

// The quirks that are flags rather than choices, on the inputs they concern.
TEST(BatchQuirks, NumpyHalfNanIdentityCopiesLowestBinade) {
  Quirks numpy{.numpy_half_nan = true};
  Quirks identity{.identity_copies = true};
  Quirks lowest{.nozero_lowest_binade_rounds_up = true};
  const auto all = all16();
  for (Rounding r : {Rounding::rne, Rounding::rna, Rounding::rtz, Rounding::rup, Rounding::rdn, Rounding::rto})
    for (Overflow o : {Overflow::satfinite, Overflow::nosat})
      for (Subnormals s : {Subnormals::keep, Subnormals::ftz_daz}) {
        for (NanStyle style : lowbit::all<NanStyle>()) {
          numpy.nan_style = style;
          const Policy p{.rounding = r, .overflow = o, .subnormals = s, .quirks = numpy};
          ASSERT_EQ(compare(formats::f32, random_f32(formats::f16, 4096, 21), formats::f16, p), 0u) << describe(p);
          ASSERT_EQ(compare(formats::bf16, all, formats::f16, p), 0u) << describe(p);
        }
        const Policy pi{.rounding = r, .overflow = o, .subnormals = s, .quirks = identity};
        ASSERT_EQ(compare(formats::bf16, all, formats::bf16, pi), 0u) << describe(pi);
        ASSERT_EQ(compare(formats::f16, all, formats::f16, pi), 0u) << describe(pi);
        ASSERT_EQ(compare(formats::bf16, all, formats::f16, pi), 0u) << describe(pi);
        for (UnsignedNegative u : {UnsignedNegative::nan, UnsignedNegative::magnitude}) {
          lowest.unsigned_negative = u;
          const Policy pl{.rounding = r, .overflow = o, .subnormals = s, .quirks = lowest};
          ASSERT_EQ(compare(formats::f32, random_f32(formats::e8m0, 4096, 23), formats::e8m0, pl), 0u) << describe(pl);
          ASSERT_EQ(compare(formats::bf16, all, formats::e8m0, pl), 0u) << describe(pl);
          ASSERT_EQ(compare(formats::f16, all, formats::e4m3, pl), 0u) << describe(pl);
        }
      }
}

// The styles for NaNs of narrow sources (Quirks::narrow_nan_style, narrow_nan_below, nan_decode): every NaN
// code of bf16 and f16 and random f32 inputs (NaN payloads of both signs) into every small target.
TEST(BatchQuirks, NanStylesBySourceWidth) {
  // The quirks act on NaNs only: every NaN code of bf16 and f16, with zeros and infinities beside them.
  auto nans = [](const Format& f) {
    std::vector<std::uint32_t> v = {0x0000, 0x8000, 0x7C00, 0xFC00, 0x7F80, 0xFF80, 0x3C00};
    for (std::uint32_t c = 0; c < (1u << 16); ++c)
      if (f.is_nan_code(c)) v.push_back(c);
    return v;
  };
  const auto bf16_nans = nans(formats::bf16), f16_nans = nans(formats::f16);
  for (const Format* to : small_builtin_targets()) {
    const auto f32_inputs = random_f32(*to, 512, 29);
    for (const Quirks& q : nan_source_quirks()) {
      const Policy p{.quirks = q};
      ASSERT_EQ(compare(formats::f32, f32_inputs, *to, p), 0u) << to->name << ' ' << describe(p);
      ASSERT_EQ(compare(formats::bf16, bf16_nans, *to, p), 0u) << to->name << ' ' << describe(p);
      ASSERT_EQ(compare(formats::f16, f16_nans, *to, p), 0u) << to->name << ' ' << describe(p);
    }
  }
}

// Every profile's resolved policy for each of its targets (per-target NaN styles included), from f32, bf16
// and f16.
TEST(BatchQuirks, EveryProfileTarget) {
  const auto all = all16();
  for (const Profile& prof : profiles())
    for (const TargetRule& rule : prof.targets) {
      if (rule.target->storage_bits() > 16) continue;
      std::string error;
      PolicyRequest req;
      if (!rule.default_rounding)
        req.rounding = nth<Rounding>(static_cast<std::size_t>(std::countr_zero(rule.roundings)));
      const auto r = resolve(&prof, *rule.target, req, error);
      ASSERT_TRUE(r) << prof.name << ' ' << rule.target->name << ": " << error;
      const Policy& p = r->policy;
      for (const Format* from : {&formats::bf16, &formats::f16})
        ASSERT_EQ(compare(*from, all, *r->target, p), 0u)
            << prof.name << ' ' << from->name << " -> " << r->target->name;
      ASSERT_EQ(compare(formats::f32, random_f32(*r->target, 4096, 31), *r->target, p), 0u)
          << prof.name << " f32 -> " << r->target->name;
    }
}

// ---- random f32 --------------------------------------------------------------------------------------

class RandomF32 : public ::testing::TestWithParam<const Format*> {};

TEST_P(RandomF32, DeterministicPolicies) {
  const Format& to = *GetParam();
  const auto inputs = random_f32(to, 1 << 14, 11);
  for (const Policy& p : deterministic_policies()) ASSERT_EQ(compare(formats::f32, inputs, to, p), 0u);
}

TEST_P(RandomF32, StochasticPolicies) {
  const Format& to = *GetParam();
  const auto inputs = random_f32(to, 4096, 13);
  std::uint32_t seed = 1;
  for (Rounding r : {Rounding::sr_a, Rounding::sr_b, Rounding::sr_c})
    for (int bits : {1, 2, 3, 5, 8, 12, 13, 16, 22, 23, 24, 25, 31, 32})
      for (Overflow o : {Overflow::satfinite, Overflow::satpropagate, Overflow::nosat})
        for (Subnormals s : {Subnormals::keep, Subnormals::ftz, Subnormals::daz})
          for (Tininess t : {Tininess::after, Tininess::before}) {
            const Policy p{.rounding = r, .overflow = o, .subnormals = s, .tininess = t, .sr_bits = bits};
            const auto rb = random_bits(inputs.size(), bits, ++seed);
            ASSERT_EQ(compare(formats::f32, inputs, to, p, &rb), 0u);
          }
}

std::vector<const Format*> random_targets() {
  std::vector<const Format*> v = small_builtin_targets();
  for (const char* n : {"binary8p3se", "binary8p1se", "binary8p7sf", "binary8p4ue", "binary6p3ue", "binary4p2sf",
                        "binary16p11se", "binary12p5uf", "e11m4", "e5m10b20-fn", "e1m6u", "e7m0-fn"})
    v.push_back(find_format(n));
  return v;
}

INSTANTIATE_TEST_SUITE_P(Quick, RandomF32, ::testing::ValuesIn(random_targets()),
                         [](const auto& info) { return test_name(info.param->name); });

// ---- parametric and P3109 targets, every 16-bit input ----------------------------------------------

class Parametric : public ::testing::TestWithParam<const char*> {};

TEST_P(Parametric, Exhaustive16) {
  const Format* to = find_format(GetParam());
  ASSERT_NE(to, nullptr) << GetParam();
  const auto inputs = all16();
  std::vector<Policy> policies;
  for (Rounding r : {Rounding::rne, Rounding::rna, Rounding::rtz, Rounding::rup, Rounding::rdn, Rounding::rto})
    for (Overflow o : {Overflow::satfinite, Overflow::satpropagate, Overflow::nosat})
      policies.push_back(Policy{.rounding = r, .overflow = o});
  for (Subnormals s : {Subnormals::ftz, Subnormals::daz, Subnormals::ftz_daz})
    for (Tininess t : {Tininess::after, Tininess::before})
      policies.push_back(Policy{.subnormals = s, .tininess = t});
  for (const Format* from : {&formats::bf16, &formats::f16}) {
    ASSERT_TRUE(batch_supported(*from, *to)) << to->name;
    for (const Policy& p : policies) ASSERT_EQ(compare(*from, inputs, *to, p), 0u);
    for (Rounding r : {Rounding::sr_a, Rounding::sr_b, Rounding::sr_c}) {
      const Policy p{.rounding = r, .sr_bits = 9};
      const auto rb = random_bits(inputs.size(), 9, 99);
      ASSERT_EQ(compare(*from, inputs, *to, p, &rb), 0u);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Quick, Parametric,
                         ::testing::Values("binary8p3se", "binary8p4sf", "binary8p1se", "binary8p1uf", "binary8p5ue",
                                           "binary6p3ue", "binary4p2sf", "binary3p1uf", "binary16p11se",
                                           "binary16p8sf", "binary12p5ue", "e11m4", "e6m9", "e8m7u", "e1m6u",
                                           "e5m10b20-fn", "e4m3b3-fnuz", "e3m3-finite", "e2m2u-fn", "e7m0-fn"),
                         [](const auto& info) { return test_name(info.param); });

// ---- every Highway target this CPU runs -------------------------------------------------------------

TEST(BatchTargets, EverySupportedTargetAgrees) {
  const auto inputs = all16();
  const auto rb = random_bits(inputs.size(), 8, 5);
  const std::vector<const Format*> targets = {&formats::e4m3, &formats::e2m1, &formats::e8m0, &formats::int8,
                                              &formats::bf16, &formats::ue4m3, find_format("binary8p3se")};
  const std::vector<Policy> policies = {
      Policy{},
      Policy{.rounding = Rounding::rtz, .overflow = Overflow::satfinite, .subnormals = Subnormals::ftz_daz},
      Policy{.rounding = Rounding::rup, .overflow = Overflow::satpropagate, .tininess = Tininess::before},
      Policy{.rounding = Rounding::sr_b, .sr_bits = 8},
      Policy{.rounding = Rounding::sr_c, .overflow = Overflow::satfinite, .subnormals = Subnormals::ftz, .sr_bits = 8},
  };
  int tested = 0;
  for (const std::int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    EXPECT_STREQ(batch_target_name(), hwy::TargetName(target));
    for (const Format* from : {&formats::f16, &formats::bf16})
      for (const Format* to : targets)
        for (const Policy& p : policies)
          EXPECT_EQ(compare(*from, inputs, *to, p, is_stochastic(p.rounding) ? &rb : nullptr), 0u)
              << to->name << ' ' << describe(p);
    ++tested;
  }
  hwy::SetSupportedTargetsForTest(0);
  EXPECT_GE(tested, 1);
}

// ---- the rne shortcut (codes only, f32 into the common targets) -----------------------------------------

// Every target the shortcut takes, under rne with each overflow mode and every profile's NaN style, on every
// Highway target this CPU runs, codes only (the shortcut's variant) and with flags (the general kernel).
TEST(BatchRne, EveryTargetEveryHighwayTarget) {
  std::vector<const Format*> targets = small_builtin_targets();
  for (const char* n : {"binary8p3se", "binary8p4sf", "binary16p11se", "e4m3b3-fnuz", "e5m10b20-fn"})
    targets.push_back(find_format(n));
  int tested = 0;
  for (const std::int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    for (const Format* to : targets) {
      const auto inputs = random_f32(*to, 1 << 13, 31);
      for (Overflow o : {Overflow::satfinite, Overflow::nosat, Overflow::satpropagate})
        for (NanStyle style : {NanStyle::preserve, NanStyle::positive_all_ones, NanStyle::quiet_signed}) {
          const Policy p{.rounding = Rounding::rne, .overflow = o, .quirks = Quirks{.nan_style = style}};
          EXPECT_EQ(compare(formats::f32, inputs, *to, p), 0u) << to->name << ' ' << describe(p);
        }
    }
    ++tested;
  }
  hwy::SetSupportedTargetsForTest(0);
  EXPECT_GE(tested, 1);
}

// Outputs of 4 MiB and more are written with non-temporal stores from the first aligned vector on (the elements
// before it through the scalar path): every misalignment of the output, both code widths.
TEST(BatchRne, LargeOutputsAtEveryAlignment) {
  const std::size_t n = (std::size_t{1} << 22) + 37;
  std::mt19937 g(41);
  std::vector<std::uint32_t> in(n);
  for (auto& x : in) x = g();
  for (const Format* to : {&formats::e4m3, &formats::e2m1, &formats::bf16, &formats::f16}) {
    const Policy p{.rounding = Rounding::rne, .overflow = Overflow::satfinite};
    const std::size_t bytes = batch_code_bytes(*to);
    std::vector<unsigned char> want(n * bytes);
    convert_batch_scalar(formats::f32, in.data(), n, *to, p, want.data(), nullptr, nullptr, nullptr);
    for (std::size_t offset : {0u, 1u, 2u, 5u, 16u, 33u, 62u}) {
      std::vector<unsigned char> out(n * bytes + 128, 0xA5);
      unsigned char* at = out.data() + offset;
      convert_batch(formats::f32, in.data(), n, *to, p, at, nullptr, nullptr, nullptr);
      EXPECT_TRUE(std::equal(want.begin(), want.end(), at)) << to->name << " at offset " << offset;
      EXPECT_TRUE(
          std::all_of(out.begin(), out.begin() + static_cast<long>(offset), [](unsigned char b) { return b == 0xA5; }));
      EXPECT_TRUE(std::all_of(at + n * bytes, out.data() + out.size(), [](unsigned char b) { return b == 0xA5; }));
    }
  }
}

#if defined(__x86_64__) || defined(__i386__)
// The shortcut's subnormal step rounds in the floating-point unit, so it is taken only in the default
// environment: under flush-to-zero, denormals-are-zero or another rounding mode the results stay the scalar
// path's.
TEST(BatchRne, FloatingPointEnvironmentDoesNotLeak) {
  const auto inputs = random_f32(formats::e4m3, 1 << 13, 43);
  const unsigned saved = _mm_getcsr();
  for (unsigned bits : {0x8000u, 0x0040u, 0x2000u, 0x6000u, 0x8040u}) {  // FZ, DAZ, round down, toward zero
    _mm_setcsr((saved & ~0xE040u) | bits);
    const std::size_t bad = compare(formats::f32, inputs, formats::e4m3, Policy{.overflow = Overflow::satfinite});
    _mm_setcsr(saved);
    EXPECT_EQ(bad, 0u) << "MXCSR bits " << std::hex << bits;
  }
}
#endif

// ---- lengths, alignment, optional outputs ----------------------------------------------------------

TEST(BatchShapes, TailsOffsetsAndOutputSubsets) {
  const auto pool = random_f32(formats::e4m3, 300, 3);
  for (const Format* to : {&formats::e4m3, &formats::f16}) {
    const Policy p{.rounding = Rounding::rna, .subnormals = Subnormals::ftz};
    for (std::size_t n = 0; n <= 70; ++n)
      for (std::size_t offset : {0u, 1u, 3u}) {
        const std::vector<std::uint32_t> inputs(pool.begin() + static_cast<long>(offset),
                                                pool.begin() + static_cast<long>(offset + n));
        ASSERT_EQ(compare(formats::f32, inputs, *to, p, nullptr,
                          {Outputs::all, Outputs::codes_only, Outputs::flags_only, Outputs::ternary_only}),
                  0u)
            << "n=" << n;
      }
  }
  // Unaligned input and output pointers.
  std::vector<unsigned char> in(4 * 257 + 1), out(257 + 1), out2(257);
  std::vector<std::uint8_t> fl(258), fl2(257);
  std::mt19937 g(1);
  for (auto& b : in) b = static_cast<unsigned char>(g());
  const Policy p{};
  convert_batch(formats::f32, in.data() + 1, 257, formats::e5m2, p, out.data() + 1, fl.data() + 1, nullptr, nullptr);
  convert_batch_scalar(formats::f32, in.data() + 1, 257, formats::e5m2, p, out2.data(), fl2.data(), nullptr, nullptr);
  EXPECT_TRUE(std::equal(out2.begin(), out2.end(), out.begin() + 1));
  EXPECT_TRUE(std::equal(fl2.begin(), fl2.end(), fl.begin() + 1));
}

TEST(BatchShapes, SupportPredicate) {
  EXPECT_TRUE(batch_supported(formats::f32, formats::e4m3));
  EXPECT_TRUE(batch_supported(formats::bf16, formats::f16));
  EXPECT_TRUE(batch_supported(*find_format("e8m7"), formats::e2m1));  // bf16's fields under another name
  EXPECT_FALSE(batch_supported(formats::e4m3, formats::e2m1));        // source not f32/bf16/f16
  EXPECT_FALSE(batch_supported(formats::f32, formats::tf32));         // target wider than 16 bits
  EXPECT_FALSE(batch_supported(formats::f32, formats::f32));
  EXPECT_FALSE(batch_supported(formats::f32, formats::e4m3, Policy{.rounding = Rounding::sr_a, .sr_bits = 0}));
  EXPECT_EQ(batch_code_bytes(formats::e2m1), 1u);
  EXPECT_EQ(batch_code_bytes(formats::bf16), 2u);
}

// Unsupported pairs take the scalar loop and still give the scalar results.
TEST(BatchShapes, FallbackForUnsupportedPairs) {
  std::vector<std::uint32_t> inputs(256);
  for (std::uint32_t i = 0; i < 256; ++i) inputs[i] = i;
  EXPECT_EQ(compare(formats::e5m2, inputs, formats::e2m1, Policy{}), 0u);
  const auto f32s = random_f32(formats::tf32, 512, 2);
  std::vector<std::uint32_t> out(f32s.size());
  convert_batch(formats::f32, f32s.data(), f32s.size(), formats::tf32, Policy{}, out.data(), nullptr, nullptr, nullptr);
  for (std::size_t i = 0; i < f32s.size(); ++i) ASSERT_EQ(out[i], convert(formats::f32, f32s[i], formats::tf32, Policy{}).code);
}

// ---- ScaledBatch: the scaling schemes' multiply-then-convert step ------------------------------------

// The product the contract names, bit by bit: a NaN multiplier is itself; a NaN input with any other
// multiplier is the input quieted; everything else is the IEEE fp32 product (round to nearest even,
// subnormals kept: the default floating-point environment).
std::uint32_t scaled_product(std::uint32_t x, float m) {
  if (std::isnan(m)) return std::bit_cast<std::uint32_t>(m);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return x | 0x00400000u;
  return std::bit_cast<std::uint32_t>(std::bit_cast<float>(x) * m);
}

std::uint64_t code_at(const std::vector<unsigned char>& out, std::size_t bytes, std::size_t i) {
  std::uint64_t v = 0;
  for (std::size_t b = 0; b < bytes; ++b) v |= std::uint64_t{out[i * bytes + b]} << (8 * b);
  return v;
}

// Multipliers as the schemes make them (powers of two including the f32 subnormal 2^-127, TE-style scales,
// 0, FLT_MAX) and the odd ones (NaN with a payload, infinity, negative, random bit patterns).
std::vector<float> random_multipliers(std::size_t n, std::uint32_t seed) {
  std::mt19937 g(seed);
  const float fixed[] = {1.0f, 0.0f, 0x1p-127f, 0x1p-126f, 0x1p100f, 3.4028235e38f, 448.0f / 3.7f,
                         std::bit_cast<float>(0x7FC00000u), std::bit_cast<float>(0xFFA5A5A5u),
                         std::bit_cast<float>(0x7F800000u), -2.0f, 1.0f / 6.0f};
  std::vector<float> m(n);
  for (auto& v : m) {
    const std::uint32_t k = g() % 16;
    if (k < 12) v = fixed[k];
    else if (k < 14) v = std::ldexp(1.0f, static_cast<int>(g() % 250) - 125);
    else v = std::bit_cast<float>(static_cast<std::uint32_t>(g()));
  }
  return m;
}

TEST(ScaledBatch, EqualsConvertOfTheProduct) {
  const std::vector<const Format*> targets = {&formats::e4m3, &formats::e2m1,  &formats::e5m2, &formats::e8m0,
                                              &formats::int8, &formats::bf16,  &formats::ue4m3,
                                              &formats::tf32 /* not a vector pair: the scalar loop */};
  const std::vector<Policy> policies = {
      Policy{.rounding = Rounding::rne, .overflow = Overflow::satfinite},
      Policy{},
      Policy{.rounding = Rounding::rup, .overflow = Overflow::satfinite},
      Policy{.rounding = Rounding::rtz, .overflow = Overflow::satpropagate, .subnormals = Subnormals::ftz_daz},
      Policy{.rounding = Rounding::sr_c, .overflow = Overflow::satfinite, .sr_bits = 8},
  };
  int tested = 0;
  for (const std::int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    for (const Format* to : targets)
      for (const Policy& p : policies) {
        const ScaledBatch sb(*to, p);
        const std::size_t bytes = batch_code_bytes(*to);
        for (const std::size_t block : {std::size_t{1}, std::size_t{16}, std::size_t{32}, std::size_t{128}, std::size_t{7},
                                        std::size_t{100}, std::size_t{5000}})
          for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{15}, std::size_t{17}, std::size_t{200},
                                      std::size_t{1000}}) {
            // One element of offset: the input and multiplier pointers are not vector-aligned.
            const auto bits = random_f32(*to, n + 1, static_cast<std::uint32_t>(n * 31 + block));
            std::vector<float> in(n + 1);
            for (std::size_t i = 0; i <= n; ++i) in[i] = std::bit_cast<float>(bits[i]);
            const auto mult = random_multipliers(n / block + 2, static_cast<std::uint32_t>(n + block));
            const auto rb = random_bits(n + 1, 8, static_cast<std::uint32_t>(n));
            std::vector<unsigned char> out(n * bytes + 1, 0xEE);
            // The read-ahead hint (any address: a prefetch never faults) must not change a code.
            const float* ahead = (n + block) % 2 == 0 ? nullptr : in.data() + n / 2;
            sb.run(in.data() + 1, n, mult.data() + 1, block, out.data(), rb.data() + 1, ahead);
            for (std::size_t i = 0; i < n; ++i) {
              const float m = mult[1 + (block == 1 ? i : i / block)];
              const std::uint32_t y = scaled_product(bits[i + 1], m);
              const Result want = convert(formats::f32, y, *to, p, is_stochastic(p.rounding) ? rb[i + 1] : 0);
              ASSERT_EQ(code_at(out, bytes, i), want.code)
                  << to->name << ' ' << describe(p) << " block " << block << " n " << n << " i " << i << " x 0x" << std::hex
                  << bits[i + 1] << " m 0x" << std::bit_cast<std::uint32_t>(m) << " product 0x" << y;
            }
            ASSERT_EQ(out[n * bytes], 0xEE) << "wrote past the end";
          }
      }
    ++tested;
  }
  hwy::SetSupportedTargetsForTest(0);
  EXPECT_GE(tested, 1);
}

// ---- ScaledBatch::run_blocks: a row of blocks scaled and converted in one pass ------------------------

// A row of values as the schemes see them, a few binades either side of `scale`, both signs, with zeros here and
// there; `kind` plants one special: 1 a NaN, 2 an infinity, 3 an f32 subnormal, 4 an all-zero first block, 5 an
// all-zero row, 6 values near the top of f32, 7 values near the bottom of the normal range.
std::vector<float> block_row(std::size_t n, std::size_t block, int kind, std::mt19937& g) {
  std::vector<float> v(n);
  const int centre = kind == 6 ? 120 : kind == 7 ? -115 : static_cast<int>(g() % 21) - 10;
  for (float& x : v) {
    const float m = 1.0f + static_cast<float>(g() >> 9) * 0x1p-23f;
    x = g() % 17 == 0 ? 0.0f : (g() & 1 ? -1.0f : 1.0f) * std::ldexp(m, centre + static_cast<int>(g() % 9) - 4);
  }
  const std::size_t at = g() % n;
  if (kind == 1) v[at] = std::bit_cast<float>(g() & 1 ? 0x7FC00000u : 0xFF800001u);
  if (kind == 2) v[at] = g() & 1 ? INFINITY : -INFINITY;
  if (kind == 3) v[at] = std::bit_cast<float>(0x00000100u);
  if (kind == 4) std::fill(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(block), -0.0f);
  if (kind == 5) std::fill(v.begin(), v.end(), 0.0f);
  return v;
}

// The scale code and the element multiplier of a block whose amax is a, by the scalar rules (scale_rules.hpp).
std::pair<std::uint64_t, float> rule_scale(const BlockRule& rule, const Format& el, float a) {
  namespace R = scale::rules;
  const auto elem_max = static_cast<float>(max_value(el));
  switch (rule.kind) {
    case BlockRuleKind::mx_floor:
    case BlockRuleKind::mx_ceil:
    case BlockRuleKind::mx_even:
    case BlockRuleKind::mx_rceil: {
      const scale::MxRule r = rule.kind == BlockRuleKind::mx_floor  ? scale::MxRule::floor
                              : rule.kind == BlockRuleKind::mx_ceil ? scale::MxRule::ceil
                              : rule.kind == BlockRuleKind::mx_even ? scale::MxRule::even
                                                                    : scale::MxRule::rceil;
      const std::uint64_t code = R::mx_scale(a, el.emax(), elem_max, el.mantissa_bits, r);
      return {code, R::mx_multiplier(code)};
    }
    case BlockRuleKind::nvfp4: {
      const Result sc = convert(formats::f32, std::bit_cast<std::uint32_t>(R::nvfp4_block_dec(a, rule.enc_sixth)),
                                formats::e4m3, Policy{.rounding = Rounding::rne, .overflow = Overflow::satfinite});
      return {sc.code, rule.multipliers[sc.code]};
    }
    case BlockRuleKind::current: {
      const float s = R::scale_from_amax(a, elem_max, rule.eps,
                                         rule.pow2 ? scale::ScaleFormat::pow2 : scale::ScaleFormat::f32, 3.4028235e38f);
      return {std::bit_cast<std::uint32_t>(1.0f / s), s};
    }
  }
  return {};
}

// Rows of every kind through run_blocks under each rule, element, block and shape, cached and streamed, under every
// Highway target: a row it does is exactly each block's scale code by the scalar rule and each element's
// convert() of fp32(x * multiplier), and under the OCP rules holds no element of their exact route; it does every
// ordinary row whose products are finite (so that a pass that left every row to the caller would fail here); it
// leaves every row with a NaN or an infinity, for mx_rceil every row with a zero block, and every row where a
// block's amax times its multiplier is not finite; it writes nothing past the rows' codes and scales.
TEST(ScaledBatch, RunBlocksEqualsTheRulesAndTheConversion) {
  const std::vector<const Format*> elements = {&formats::e4m3, &formats::e5m2, &formats::e2m1,
                                               &formats::e2m3, &formats::e3m2, &formats::e4m3fnuz};
  std::vector<BlockRule> rules;
  for (BlockRuleKind k :
       {BlockRuleKind::mx_floor, BlockRuleKind::mx_ceil, BlockRuleKind::mx_even, BlockRuleKind::mx_rceil})
    rules.push_back(BlockRule{.kind = k});
  for (float eps : {0.0f, 1e-3f, 100.0f})
    for (bool pow2 : {false, true})
      rules.push_back(BlockRule{.kind = BlockRuleKind::current, .eps = eps, .pow2 = pow2});
  // NVFP4's step-6 multipliers under a few tensor amaxes (S_enc = 2688 / amax): ordinary, one that saturates the
  // e4m3 block scales of the larger rows, and one that leaves the smaller rows' scales subnormal or zero (where
  // the multiplier is large and some products overflow).
  std::vector<std::array<float, 256>> tables;
  std::vector<float> sixths;
  for (float global : {50.0f, 1e-3f, 1e30f}) {
    const float s_enc = scale::rules::nvfp4_s_enc(global, 448.0f, 6.0f), s_dec = 1.0f / s_enc;
    std::array<float, 256> t{};
    for (std::size_t sc = 0; sc < t.size(); ++sc)
      t[sc] = scale::rules::nvfp4_multiplier(sc, s_enc, s_dec, scale::Multiplier::reciprocal, scale::ZeroScale::kernel);
    tables.push_back(t);
    sixths.push_back(s_enc * scale::rules::nvfp4_sixth());
  }
  for (std::size_t i = 0; i < tables.size(); ++i)
    rules.push_back(BlockRule{.kind = BlockRuleKind::nvfp4, .enc_sixth = sixths[i], .multipliers = tables[i].data()});
  const Policy rne{.rounding = Rounding::rne, .overflow = Overflow::satfinite};
  const std::vector<std::pair<std::size_t, std::size_t>> shapes = {{1, 16}, {9, 32}, {8, 96}, {16, 512}, {9, 2048}};
  int tested = 0;
  std::size_t done_rows = 0;
  for (const std::int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    std::mt19937 g(static_cast<std::uint32_t>(target));
    for (const Format* el : elements)
      for (BlockRule rule : rules) {
        rule.emax = el->emax();
        rule.mantissa_bits = el->mantissa_bits;
        rule.elem_max = static_cast<float>(max_value(*el));
        for (const CodeStores stores : {CodeStores::cached, CodeStores::streaming}) {
          const ScaledBatch sb(*el, rne, stores);
          for (auto [rows, n] : shapes)
            for (const std::size_t block : {std::size_t{16}, std::size_t{32}, std::size_t{48}, std::size_t{128}, n}) {
              if (n % block != 0) continue;
              const std::size_t nb = n / block;
              std::vector<float> x;
              std::vector<int> kinds;
              for (std::size_t r = 0; r < rows; ++r) {
                kinds.push_back(static_cast<int>(r % 8));
                const auto row = block_row(n, block, kinds.back(), g);
                x.insert(x.end(), row.begin(), row.end());
              }
              // Codes at a 64-byte boundary (streamed stores need 16), then sentinels.
              std::vector<std::uint8_t> storage(rows * n + 128, 0xEE);
              std::uint8_t* out = storage.data() + (64 - reinterpret_cast<std::uintptr_t>(storage.data()) % 64);
              std::vector<std::uint64_t> scales(rows * nb + 1, 0xEEEEu);
              std::vector<std::uint8_t> ok(rows, 7);
              const std::size_t done =
                  sb.run_blocks(x.data(), rows, n, block, rule, out, scales.data(), ok.data(), x.data() + x.size());
              sb.flush();
              const std::string what = el->name + std::string(" rule ") + std::to_string(static_cast<int>(rule.kind)) +
                                       " eps " + std::to_string(rule.eps) + (rule.pow2 ? " pow2" : "") + " block " +
                                       std::to_string(block) + " " + std::to_string(rows) + "x" + std::to_string(n);
              ASSERT_EQ(done, static_cast<std::size_t>(std::count(ok.begin(), ok.end(), 1))) << what;
              ASSERT_EQ(out[rows * n], 0xEE) << what << ": wrote past the codes";
              ASSERT_EQ(scales[rows * nb], 0xEEEEu) << what << ": wrote past the scales";
              if (!sb.takes_blocks(n, block)) {
                ASSERT_EQ(done, 0u) << what;
                continue;
              }
              for (std::size_t r = 0; r < rows; ++r) {
                const int kind = kinds[r];
                ASSERT_TRUE(ok[r] == 0 || ok[r] == 1) << what << " row " << r;
                // Whether every block's amax times its multiplier is finite (the pass converts finite products only).
                bool finite_products = true;
                for (std::size_t b = 0; b < nb; ++b) {
                  float a = 0.0f;
                  for (std::size_t i = 0; i < block; ++i) a = std::max(a, std::fabs(x[r * n + b * block + i]));
                  finite_products = finite_products && a * rule_scale(rule, *el, a).second <= 3.4028235e38f;
                }
                if (kind == 0 && finite_products) {
                  ASSERT_EQ(ok[r], 1) << what << ": an ordinary row left to the caller, row " << r;
                }
                if (!finite_products) { ASSERT_EQ(ok[r], 0) << what << ": a row of infinite products done, row " << r; }
                if (kind == 1 || kind == 2) { ASSERT_EQ(ok[r], 0) << what << ": a non-finite row done, row " << r; }
                if ((kind == 4 || kind == 5) && rule.kind == BlockRuleKind::mx_rceil) {
                  ASSERT_EQ(ok[r], 0) << what << ": an rceil zero block done, row " << r;
                }
                if (ok[r] == 0) continue;
                for (std::size_t b = 0; b < nb; ++b) {
                  float a = 0.0f;
                  for (std::size_t i = 0; i < block; ++i) a = std::max(a, std::fabs(x[r * n + b * block + i]));
                  const auto [code, mult] = rule_scale(rule, *el, a);
                  ASSERT_EQ(scales[r * nb + b], code) << what << " row " << r << " block " << b << " amax " << a;
                  for (std::size_t i = b * block; i < (b + 1) * block; ++i) {
                    const float y = x[r * n + i] * mult;
                    if (rule.kind == BlockRuleKind::mx_floor || rule.kind == BlockRuleKind::mx_ceil ||
                        rule.kind == BlockRuleKind::mx_even) {
                      ASSERT_FALSE(scale::rules::mx_needs_exact(x[r * n + i], y))
                          << what << ": a row with an element of the exact route done, row " << r << " column " << i;
                    }
                    const Result want = convert(formats::f32, std::bit_cast<std::uint32_t>(y), *el, rne);
                    ASSERT_EQ(out[r * n + i], want.code)
                        << what << " row " << r << " column " << i << " x " << x[r * n + i] << " multiplier " << mult;
                  }
                }
                ++done_rows;
              }
            }
        }
      }
    ++tested;
  }
  hwy::SetSupportedTargetsForTest(0);
  EXPECT_GE(tested, 1);
  EXPECT_GT(done_rows, 1000u);
}

// Pairs, policies and shapes the one pass does not take: no row is done, and takes_blocks says so.
TEST(ScaledBatch, RunBlocksLeavesWhatItDoesNotTake) {
  const Policy rne{.rounding = Rounding::rne, .overflow = Overflow::satfinite};
  const BlockRule floor{.kind = BlockRuleKind::mx_floor, .emax = 8, .mantissa_bits = 3, .elem_max = 448.0f};
  struct Case {
    const Format* el;
    Policy p;
    std::size_t n, block;
  };
  const std::vector<Case> cases = {
      {&formats::e4m3, rne, 100, 10},  // blocks of no whole vector
      {&formats::e4m3, rne, 96, 64},   // no whole number of blocks
      {&formats::e4m3, Policy{.rounding = Rounding::rtz, .overflow = Overflow::satfinite}, 64, 32},  // not rne
      {&formats::bf16, rne, 64, 32},                                                                 // two-byte codes
      {&formats::int8, rne, 64, 32},  // not the rne kernel's target
  };
  for (const std::int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    for (const Case& c : cases) {
      const ScaledBatch sb(*c.el, c.p);
      EXPECT_FALSE(sb.takes_blocks(c.n, c.block)) << c.el->name << ' ' << c.n << ' ' << c.block;
      std::vector<float> x(2 * c.n, 1.5f);
      std::vector<std::uint8_t> out(2 * c.n * 2);
      std::vector<std::uint64_t> scales(2 * c.n);
      std::vector<std::uint8_t> ok(2, 9);
      EXPECT_EQ(
          sb.run_blocks(x.data(), 2, c.n, c.block, floor, out.data(), scales.data(), ok.data(), x.data() + x.size()),
          0u);
      EXPECT_EQ(ok, (std::vector<std::uint8_t>{0, 0}));
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

// ---- block_abs_max_bits: the block schemes' amax pass ------------------------------------------------

// Values for the maxima: zeros of both signs, subnormals, normals of every size, infinities, NaNs of both
// signs with payloads, and patterns that differ only in the sign bit.
std::vector<float> random_block_values(std::size_t n, std::uint32_t seed) {
  std::mt19937 g(seed);
  const std::uint32_t fixed[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x807FFFFFu, 0x7F7FFFFFu, 0xFF7FFFFFu,
                                 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00001u, 0x7F800001u, 0x3F800000u};
  std::vector<float> v(n);
  for (auto& x : v) {
    // Mostly finite (so that most blocks have a finite maximum to find), some specials, some raw patterns.
    const std::uint32_t k = g() % 96;
    const std::uint32_t b = k < 12 ? fixed[k] : k < 88 ? (g() & 0x807FFFFFu) | ((g() % 255) << 23) : g();
    x = std::bit_cast<float>(b);
  }
  return v;
}

TEST(BlockAbsMax, EqualsTheScalarMaxima) {
  int tested = 0;
  for (const std::int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    for (const std::size_t block : {1, 4, 7, 8, 16, 32, 48, 64, 100, 128, 512, 5000})
      for (const std::size_t n : {0, 1, 15, 16, 17, 31, 32, 33, 200, 511, 512, 513, 1000, 4100}) {
        const auto seed = static_cast<std::uint32_t>(n * 131 + block);
        // One element of offset: the input is not vector-aligned.
        const std::vector<float> v = random_block_values(n + 1, seed);
        const std::size_t blocks = (n + block - 1) / block;
        std::mt19937 g(seed);
        std::vector<std::uint32_t> start(blocks + 1);  // maxima merged into: some already large
        for (auto& t : start) t = g() % 3 == 0 ? g() & 0x7FFFFFFFu : 0u;
        std::vector<std::uint32_t> want = start;
        std::uint32_t want_min = g() % 2 == 0 ? 0xFFFFFFFFu : 0x3F000000u;
        const std::uint32_t start_min = want_min;
        for (std::size_t i = 0; i < n; ++i) {
          const std::uint32_t a = std::bit_cast<std::uint32_t>(v[i + 1]) & 0x7FFFFFFFu;
          want[i / block] = std::max(want[i / block], a);
          if (a != 0) want_min = std::min(want_min, a - 1);
        }
        for (const bool with_min : {false, true}) {
          std::vector<std::uint32_t> top = start;
          std::uint32_t min_m1 = start_min;
          block_abs_max_bits(v.data() + 1, n, block, top.data(), with_min ? &min_m1 : nullptr);
          ASSERT_EQ(top, want) << "block " << block << " n " << n;  // the entry past the last block untouched
          ASSERT_EQ(min_m1, with_min ? want_min : start_min) << "block " << block << " n " << n;
        }
      }
    ++tested;
  }
  hwy::SetSupportedTargetsForTest(0);
  EXPECT_GE(tested, 1);
}

}  // namespace
}  // namespace lowbit::batch_test
