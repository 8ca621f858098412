// Scaling schemes: peer cases of docs/semantics.md §3-§6 with expected codes worked out by hand (or by numpy's
// float32 arithmetic where an fp32 division is involved, noted beside the value), and properties.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "lowbit/format.hpp"
#include "lowbit/scale.hpp"
#include "../gemm/random_codes.hpp"

namespace {

namespace S = lowbit::scale;
namespace F = lowbit::formats;
using Codes = std::vector<std::uint8_t>;    // Quantized::codes
using Scales = std::vector<std::uint64_t>;  // Quantized::scales

S::Tensor row(std::vector<float> v) {
  const int n = static_cast<int>(v.size());
  return {1, n, std::move(v)};
}

// microsoft/microxcaling's own case: [485, 475, 400, -485, -475, -450, 2^-6, -2^-6] in MX-E4M3 has the
// scale 2^0 (floor(log2 485) = 8 = e4m3's emax) and, under its "nearest" (half away from zero),
// [448, 448, 416, -448, -448, -448, 2^-6, -2^-6]; 400 is a tie between 384 and 416, which rne breaks to 384.
// e4m3 codes: 448 = 0x7E, 416 = 0x7D, 384 = 0x7C, 2^-6 = 0x08; the sign bit is 0x80.
TEST(Mx, MicroxcalingBlockNearestVersusEven) {
  S::Options o;
  o.scheme = S::Scheme::mx;
  o.block = 8;
  o.element_policy.rounding = lowbit::Rounding::rna;
  const auto x = row({485, 475, 400, -485, -475, -450, 0x1p-6f, -0x1p-6f});
  auto q = S::quantize(x, o);
  EXPECT_EQ(q.scales, Scales{0x7F});
  EXPECT_EQ(q.codes, (Codes{0x7E, 0x7E, 0x7D, 0xFE, 0xFE, 0xFE, 0x08, 0x88}));
  o.element_policy.rounding = lowbit::Rounding::rne;
  q = S::quantize(x, o);
  EXPECT_EQ(q.codes, (Codes{0x7E, 0x7E, 0x7C, 0xFE, 0xFE, 0xFE, 0x08, 0x88}));
}

// amax = 500 in MXFP8-E4M3: floor gives the scale 2^0 (0x7F) and clips 500 to 448; rceil gives
// cvt.rp(500 * fp32(1/448)) = cvt.rp(1.1160715) = 2^1 (0x80) and 500 / 2 = 250 rounds to 256 (0x78).
TEST(Mx, FloorClipsRceilDoesNot) {
  S::Options o;
  o.scheme = S::Scheme::mx;
  const auto x = row({500, 1});
  auto q = S::quantize(x, o);
  EXPECT_EQ(q.scales, Scales{0x7F});
  EXPECT_EQ(q.codes[0], 0x7Eu);
  o.mx_rule = S::MxRule::rceil;
  q = S::quantize(x, o);
  EXPECT_EQ(q.scales, Scales{0x80});
  EXPECT_EQ(q.codes[0], 0x78u);
  EXPECT_EQ(q.codes[1], 0x30u);  // 1 / 2 = 0.5 = 0x30
}

// Shared-scale boundaries per rule for e4m3 (emax 8): amax 256 = 2^8 gives 2^0 under floor and ceil;
// 257 gives 2^0 (floor), 2^1 (ceil: a mantissa bit is set); torchao EVEN first adds 2^-4 to amax's
// significand (half an ulp at e4m3's 3 mantissa bits) and keeps the exponent: 496 = 1.9375 * 2^8 carries
// into 2^9, so 2^1, while 495 stays 2^0; amax 0 gives 2^-127 (code 0).
TEST(Mx, ScaleBoundariesPerRule) {
  EXPECT_EQ(S::mx_scale(256, F::e4m3, S::MxRule::floor), 127u);
  EXPECT_EQ(S::mx_scale(256, F::e4m3, S::MxRule::ceil), 127u);
  EXPECT_EQ(S::mx_scale(257, F::e4m3, S::MxRule::floor), 127u);
  EXPECT_EQ(S::mx_scale(257, F::e4m3, S::MxRule::ceil), 128u);
  EXPECT_EQ(S::mx_scale(496, F::e4m3, S::MxRule::even), 128u);
  EXPECT_EQ(S::mx_scale(495, F::e4m3, S::MxRule::even), 127u);
  EXPECT_EQ(S::mx_scale(0, F::e4m3, S::MxRule::floor), 0u);
  EXPECT_EQ(S::mx_scale(0, F::e4m3, S::MxRule::rceil), 0u);
  // e2m1 (emax 2): amax 6 gives 2^0 under floor; rceil: fp32(1/6) = 11184811 * 2^-26, times 6 is
  // 1 + 2^-25, which rounds to 1.0 in fp32, so 2^0 as well; amax 7 gives 7/6 rounded up to 2^1.
  EXPECT_EQ(S::mx_scale(6, F::e2m1, S::MxRule::floor), 127u);
  EXPECT_EQ(S::mx_scale(6, F::e2m1, S::MxRule::rceil), 127u);
  EXPECT_EQ(S::mx_scale(7, F::e2m1, S::MxRule::rceil), 128u);
  // Non-finite amax: NaN gives 0xFF under every rule; Inf gives 0xFF under floor (torchao) and 0xFE under
  // rceil (cvt.rp.satfinite turns Inf into the largest code, as TE does).
  EXPECT_EQ(S::mx_scale(NAN, F::e4m3, S::MxRule::floor), 0xFFu);
  EXPECT_EQ(S::mx_scale(INFINITY, F::e4m3, S::MxRule::floor), 0xFFu);
  EXPECT_EQ(S::mx_scale(INFINITY, F::e4m3, S::MxRule::rceil), 0xFEu);
}

// The quantizer computes a row's MX scales in vectorised loops (and rceil directly from the quotient's
// exponent where that quotient is a normal number, through the batch conversion otherwise); every scale must
// still be the scalar rule's (mx_scale: for rceil and rne the scalar conversion into e8m0).  Block amaxes at
// every f32 exponent with four significands each, zeros and subnormals among them, eight blocks a row (so
// that some rows hold only normal quotients and some do not), for every element and rule.
// The rceil and rne rules convert the quotient d = fp32(amax * fp32(1 / elem_max)); the amaxes also include,
// for every exponent, ones whose quotient has the significand bits 0, 1, 2, half, all but one and all (found by
// searching the amaxes next to d / fp32(1 / elem_max)), where rounding up or to nearest changes.
TEST(Mx, RowScalesEqualTheScalarRuleAtEveryExponent) {
  std::vector<float> base;
  for (std::uint32_t e = 0; e < 255; ++e)
    for (const std::uint32_t m : {0u, 1u, 0x400000u, 0x7FFFFFu}) base.push_back(std::bit_cast<float>(e << 23 | m));
  for (const lowbit::Format* el : {&F::e4m3, &F::e5m2, &F::e3m2, &F::e2m3, &F::e2m1}) {
    std::vector<float> amaxes = base;
    const float inv = 1.0f / static_cast<float>(lowbit::max_value(*el));
    int hits = 0, tries = 0;
    for (std::uint32_t e = 1; e < 255; ++e)
      for (const std::uint32_t m : {0u, 1u, 2u, 0x400000u, 0x7FFFFEu, 0x7FFFFFu}) {
        const auto d = std::bit_cast<float>(e << 23 | m);
        const float a0 = d / inv;
        if (!std::isfinite(a0)) continue;
        ++tries;
        float a = a0;
        for (int k = 0; k < 8; ++k) a = std::nextafter(a, 0.0f);
        for (int k = 0; k < 17; ++k, a = std::nextafter(a, INFINITY))
          if (std::isfinite(a) && a * inv == d) {
            amaxes.push_back(a);
            ++hits;
            break;
          }
      }
    EXPECT_GT(hits, tries / 2) << el->name;  // the search finds most of them (about 3 in 4)
    constexpr int kBlocks = 8;
    const int rows = static_cast<int>((amaxes.size() + kBlocks - 1) / kBlocks);
    amaxes.resize(static_cast<std::size_t>(rows) * kBlocks, 1.0f);
    S::Tensor x{rows, kBlocks * 32, std::vector<float>(static_cast<std::size_t>(rows) * kBlocks * 32, 0.0f)};
    for (std::size_t b = 0; b < amaxes.size(); ++b) {
      x.data[b * 32] = -amaxes[b];         // the amax, negative
      x.data[b * 32 + 5] = amaxes[b] / 3;  // and a smaller value
    }
    for (const S::MxRule rule : {S::MxRule::floor, S::MxRule::ceil, S::MxRule::even, S::MxRule::rceil, S::MxRule::rne}) {
      S::Options o;
      o.scheme = S::Scheme::mx;
      o.element = el;
      o.mx_rule = rule;
      const auto q = S::quantize(x, o);
      ASSERT_EQ(q.scales.size(), amaxes.size());
      for (std::size_t b = 0; b < amaxes.size(); ++b)
        ASSERT_EQ(q.scales[b], S::mx_scale(amaxes[b], *el, rule))
            << el->name << " rule " << static_cast<int>(rule) << " amax 0x" << std::hex
            << std::bit_cast<std::uint32_t>(amaxes[b]);
    }
  }
}

// NaN inside a block: scale-nan makes the scale 0xFF and the elements NaN (e4m3 0x7F); propagate takes
// the scale from the finite elements (amax 1: 2^-8, code 0x77) and converts the NaN on its own.
TEST(Mx, NonFiniteInBlock) {
  S::Options o;
  o.scheme = S::Scheme::mx;
  const auto x = row({1, NAN});
  auto q = S::quantize(x, o);
  EXPECT_EQ(q.scales, Scales{0xFF});
  EXPECT_EQ(q.codes, (Codes{0x7F, 0x7F}));
  o.nonfinite = S::NonFinite::propagate;
  q = S::quantize(x, o);
  EXPECT_EQ(q.scales, Scales{0x77});              // floor(log2 1) - 8 = -8: code 127 - 8
  EXPECT_EQ(q.codes, (Codes{0x78, 0x7F}));      // 1 / 2^-8 = 256 = 0x78; NaN keeps its own code
}

// TE per-tensor current scaling of [1, -2, 0.5] into e4m3: amax 2, scale = 448 / 2 = 224, elements 224
// (0x76), -448 (0xFE), 112 (0x6E); the decode scale is fp32(1 / 224) = 0x3B924925 (numpy float32).
// With force_pow_2 the scale keeps its exponent only: 128; elements 128 (0x70), -256 (0xF8), 64 (0x68);
// decode scale 2^-7 = 0x3C000000.
// torchao 0.18's to_mx (Variant::torchao; mx_tensor.py), e4m3 elements (emax 8), blocks of 32:
//   * an Inf block: the amax's exponent field 255 reads as 2^128, so FLOOR gives 2^(128 - 8) = code 247
//     (0xF7); each element x / 2^120: Inf clamps to 448 (0x7E), -Inf to 0xFE, 1 becomes 2^-120 (0x00), 2^112
//     becomes 2^-8 = 2 * 2^-9, the subnormal 0x02;
//   * a NaN block: code 0xFF, the divisor +Inf; NaN stays NaN (0x7F), 1 and -2 become +0 and -0 (0x00, 0x80),
//     Inf / Inf is x86's default NaN, negative (0xFF);
//   * a block of amax 1.5 * 2^-120: floor gives -128, clamped to -127, code 0, whose divisor torchao clamps
//     to 2^-126: 96 = 1.5 * 2^6 (0x6C); the OCP rule divides by 2^-127: 192 (0x74).
TEST(Mx, TorchaoToMx) {
  std::vector<float> v(96, 0.0f);
  v[0] = INFINITY;
  v[1] = 1.0f;
  v[2] = 0x1p112f;
  v[3] = -INFINITY;
  v[32] = NAN;
  v[33] = 1.0f;
  v[34] = -2.0f;
  v[35] = INFINITY;
  v[64] = 0x1.8p-120f;
  S::Options o;
  o.scheme = S::Scheme::mx;
  o.variant = S::Variant::torchao;
  o.element_policy.overflow = lowbit::Overflow::satfinite;
  auto q = S::quantize(row(v), o);
  EXPECT_EQ(q.scales, (Scales{0xF7, 0xFF, 0x00}));
  EXPECT_EQ((std::vector<unsigned>{q.codes[0], q.codes[1], q.codes[2], q.codes[3]}),
            (std::vector<unsigned>{0x7E, 0x00, 0x02, 0xFE}));
  EXPECT_EQ((std::vector<unsigned>{q.codes[32], q.codes[33], q.codes[34], q.codes[35], q.codes[36]}),
            (std::vector<unsigned>{0x7F, 0x00, 0x80, 0xFF, 0x00}));
  EXPECT_EQ(q.codes[64], 0x6Cu);
  o.variant = S::Variant::standard;
  q = S::quantize(row(v), o);
  EXPECT_EQ(q.scales, (Scales{0xFF, 0xFF, 0x00}));  // scale-nan for both non-finite blocks
  EXPECT_EQ(q.codes[64], 0x74u);
}

// torchao's RCEIL CPU fallback (_to_mx_rceil): descale = fp32(amax / 448); exponent
// clamp(ceil(f32 log2(descale)), -127, 127) + 127.  amax 458752.0625 (7 * 2^16 + 2^-4) gives descale
// 1024.00012207 = 2^10 * (1 + 2^-23), whose log2, 10 + 1.7e-7, rounds to the f32 10.0 (its ulp there is
// 2^-20): code 137 (0x89), and the elements x * 2^-10: amax to 448.00006 -> 448 (0x7E).  cvt.rp (the hardware
// rule, --variant standard) rounds the descale up to 2^11: 138 (0x8A), the amax 224.00003 -> 224 (0x76).
// amax 448 * 2^-128 = 1.75 * 2^-120 gives descale 2^-128, exponent -128 clamped to -127: code 0, whose
// multiplier torchao makes 1.0, so the element stays 1.75 * 2^-120 (0x00); the hardware rule also gives
// code 0 but multiplies by 2^127: 224 (0x76).
TEST(Mx, TorchaoRceilFallback) {
  std::vector<float> v(64, 0.0f);
  v[0] = 458752.0625f;
  v[32] = 0x1.cp-120f;
  S::Options o;
  o.scheme = S::Scheme::mx;
  o.mx_rule = S::MxRule::rceil;
  o.variant = S::Variant::torchao;
  o.element_policy.overflow = lowbit::Overflow::satfinite;
  auto q = S::quantize(row(v), o);
  EXPECT_EQ(q.scales, (Scales{0x89, 0x00}));
  EXPECT_EQ(q.codes[0], 0x7Eu);
  EXPECT_EQ(q.codes[32], 0x00u);
  o.variant = S::Variant::standard;
  q = S::quantize(row(v), o);
  EXPECT_EQ(q.scales, (Scales{0x8A, 0x00}));
  EXPECT_EQ(q.codes[0], 0x76u);
  EXPECT_EQ(q.codes[32], 0x76u);
}

TEST(Tensor, TeScaleFromAmax) {
  S::Options o;
  o.scheme = S::Scheme::tensor;
  auto q = S::quantize(row({1, -2, 0.5f}), o);
  EXPECT_EQ(q.codes, (Codes{0x76, 0xFE, 0x6E}));
  EXPECT_EQ(q.scales, Scales{0x3B924925u});
  o.scale_format = S::ScaleFormat::pow2;
  q = S::quantize(row({1, -2, 0.5f}), o);
  EXPECT_EQ(q.codes, (Codes{0x70, 0xF8, 0x68}));
  EXPECT_EQ(q.scales, Scales{0x3C000000u});
  // amax 0 and amax Inf both give the scale 1.
  EXPECT_EQ(S::scale_from_amax(0, 448, 0, S::ScaleFormat::f32, 3.4e38f), 1.0f);
  EXPECT_EQ(S::scale_from_amax(INFINITY, 448, 0, S::ScaleFormat::f32, 3.4e38f), 1.0f);
  EXPECT_EQ(S::scale_from_amax(NAN, 448, 0, S::ScaleFormat::f32, 3.4e38f), 1.0f);
  // An amax so small that 448 / amax overflows takes value_for_inf.
  EXPECT_EQ(S::scale_from_amax(0x1p-149f, 448, 0, S::ScaleFormat::f32, 1234.0f), 1234.0f);
}

// TE delayed scaling with a history of 4, algorithm max: the first step quantizes with the initial
// scale 1 (1 -> 0x38, -2 -> 0xC0, 0.5 -> 0x30), records amax 2, sets the scale to 448 / 2 = 224, and rolls
// [2, 0, 0, 0] into [0, 0, 0, 2].  The second step uses 224: 0x76, 0xFE, 0x6E.
TEST(Delayed, HistoryRollsAndScaleUpdates) {
  S::Options o;
  o.scheme = S::Scheme::delayed;
  S::DelayedState st;
  st.history.assign(4, 0.0f);
  auto q = S::quantize(row({1, -2, 0.5f}), o, nullptr, &st);
  EXPECT_EQ(q.codes, (Codes{0x38, 0xC0, 0x30}));
  EXPECT_EQ(st.scale, 224.0f);
  EXPECT_EQ(st.history, (std::vector<float>{0, 0, 0, 2}));
  q = S::quantize(row({1, -2, 0.5f}), o, nullptr, &st);
  EXPECT_EQ(q.codes, (Codes{0x76, 0xFE, 0x6E}));
  // A zero tensor leaves the scale as it is (amax must be finite and > 0): max over [0, 0, 2, 2] is 2.
  st.max_algorithm = false;  // most_recent reads slot 0 only, which now holds 0
  S::quantize(row({0, 0, 0}), o, nullptr, &st);
  EXPECT_EQ(st.scale, 224.0f);
}

// NVFP4 (TE two-level): an all-ones 1x16 tensor has S_enc = 2688, block scale 448 (0x7E: 1 * (2688 *
// fp32(1/6)) = 448 exactly in fp32), elements 6 (0x7), S_dec = fp32(1/2688) = 0x39C30C31 (numpy).  An
// all-zero tensor has S_enc = 1, block scale 0x00, elements 0, S_dec = 1.0.
TEST(Nvfp4, AllOnesAndAllZeros) {
  S::Options o;
  o.scheme = S::Scheme::nvfp4;
  auto q = S::quantize(row(std::vector<float>(16, 1.0f)), o);
  EXPECT_EQ(q.scales, Scales{0x7E});
  EXPECT_EQ(q.codes, Codes(16, 0x7));
  ASSERT_TRUE(q.tensor_scale.has_value());
  EXPECT_EQ(*q.tensor_scale, 0x39C30C31u);
  q = S::quantize(row(std::vector<float>(16, 0.0f)), o);
  EXPECT_EQ(q.scales, Scales{0x00});
  EXPECT_EQ(q.codes, Codes(16, 0x0));
  EXPECT_EQ(*q.tensor_scale, 0x3F800000u);
}

// A zero block beside a non-zero one: the zero block's scale is 0; under the kernel rule its multiplier
// is FLT_MAX (a non-zero element there would saturate to ±6); torchao's single level clamps the zero
// block's scale to 2^-6 (e4m3 0x08).
TEST(Nvfp4, ZeroBlockScale) {
  std::vector<float> v(32, 0.0f);
  for (int i = 16; i < 32; ++i) v[i] = 3.0f;
  S::Options o;
  o.scheme = S::Scheme::nvfp4;
  auto q = S::quantize(row(v), o);
  EXPECT_EQ(q.scales[0], 0x00u);
  o.scheme = S::Scheme::nvfp4_1level;
  q = S::quantize(row(v), o);
  EXPECT_EQ(q.scales[0], 0x08u);
  // 3 / 6 = 0.5 = e4m3 0x30; elements 3 / 0.5 = 6 = 0x7.
  EXPECT_EQ(q.scales[1], 0x30u);
  EXPECT_EQ(q.codes[16], 0x7u);
}

// NVFP4 "4over6" (docs/semantics.md §4; TE quantize_4over6_kernel.cuh).  Every block below has amax 6 and so
// does the tensor: S_enc = 1536 / 6 = 256, S_dec = 2^-8 (0x3B800000), base = fp32(6 / 6) * 256 = 256.  The
// map-to-6 scale is e4m3(256) = 0x78 with multiplier 1 / (256 * 2^-8) = 1; the map-to-4 scale is
// e4m3(384) = 0x7C with multiplier fp32(1 / 1.5) = 11184811 * 2^-24.  A candidate's dequantized value in
// the error is e2m1 value * scale * 6 / 1536: the e2m1 value itself under map-to-6, 1.5 times it under
// map-to-4.  Under map-to-4, 6 -> 4.0000001 -> 4 (6.0 back), 4.5 -> 3.0000000 -> 3 (4.5 back),
// 3 -> 2.0000001 -> 2 (3.0 back), 1 -> 0.6666667 -> 0.5 (0.75 back, error 0.25); under map-to-6, 4.5 -> 4
// (error 0.5) and 6, 3, 1 are exact.
//   block 0 [6, -4.5, 0...]:   errors (map-4, map-6) = (0, 0.5): map-to-4, codes 6 -> 0x6, -4.5 -> 0xD.
//   block 1 [6, 3, 1, 0...]:   (0.25, 0): map-to-6, codes 0x7, 0x5, 0x2.
//   block 2 [6, 4.5, 1, 1, 0...]: absolute (0.5, 0.5), a tie: map-to-6, codes 0x7, 0x6, 0x2, 0x2; squared
//   (0.125, 0.25): map-to-4, codes 0x6, 0x5, 0x1, 0x1.
std::vector<unsigned> as_unsigned(const S::Quantized& q) { return {q.codes.begin(), q.codes.end()}; }

// torchao 0.18's single level multiplies by the reciprocal (nvfp4_tensor.py nvfp4_quantize): block amax
// 90/512 gives the scale fp32(90/512 / 6) = 15/512 = 1.875 * 2^-6 exactly (e4m3 0x0F), and fp32(1 / scale) =
// fp32(512/15) lies above 512/15, so 0.03662109375 (= 1.25 * 15/512) times it is 1.2500001: e2m1 1.5 (0x3).
// Dividing gave 1.25 exactly, a tie that went to even, 1.0 (0x2).  90/512 times it is 6.0000005: 6 (0x7).
TEST(Nvfp4, OneLevelMultipliesByTheReciprocal) {
  std::vector<float> v(16, 0.0f);
  v[0] = 90.0f / 512.0f;
  v[1] = 0.03662109375f;
  S::Options o;
  o.scheme = S::Scheme::nvfp4_1level;
  const auto q = S::quantize(row(v), o);
  EXPECT_EQ(q.scales, Scales{0x0F});
  EXPECT_EQ(q.codes[0], 0x7u);
  EXPECT_EQ(q.codes[1], 0x3u);
  EXPECT_EQ(q.codes[2], 0x0u);
}

// torchao 0.18's two levels (Variant::torchao; nvfp4_tensor.py per_tensor_amax_to_scale, nvfp4_quantize), the
// fp32 steps as numpy's float32 computes them: amax 5 gives S_dec = fp32(5 / 2688) = 0x3AF3CF3D (TE's
// fp32(1 / fp32(2688 / 5)) is 0x3AF3CF3E); block 0's scale fp32(fp32(5 / 6) / S_dec) = 448 (e4m3 0x7E); the
// multiplier fp32(fp32(1 / S_dec) / 448) = 1.1999999; 5, 2.5, 1.25, -0.625 become 5.9999995, 2.9999998,
// 1.4999999, -0.74999994: e2m1 6 (0x7), 3 (0x5), 1.5 (0x3) and -0.5 (0x9, just under the tie at 0.75).  Block
// 1 is all zeros: its scale clamps to 2^-6 (0x08) and its codes are 0.
TEST(Nvfp4, TorchaoTwoLevel) {
  std::vector<float> v(32, 0.0f);
  v[0] = 5.0f;
  v[1] = 2.5f;
  v[2] = 1.25f;
  v[3] = -0.625f;
  S::Options o;
  o.scheme = S::Scheme::nvfp4;
  o.variant = S::Variant::torchao;
  const auto q = S::quantize(row(v), o);
  ASSERT_TRUE(q.tensor_scale.has_value());
  EXPECT_EQ(*q.tensor_scale, 0x3AF3CF3Du);
  EXPECT_EQ(q.scales, (Scales{0x7E, 0x08}));
  EXPECT_EQ(as_unsigned(q), (std::vector<unsigned>{0x7, 0x5, 0x3, 0x9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                                   0,   0,   0,   0,   0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}));
  // The same tensor under TE's kernel: the other tensor scale.
  o.variant = S::Variant::standard;
  EXPECT_EQ(*S::quantize(row(v), o).tensor_scale, 0x3AF3CF3Eu);
}


TEST(Nvfp4, FourOverSixPicksPerBlock) {
  std::vector<float> v(48, 0.0f);
  v[0] = 6, v[1] = -4.5f;
  v[16] = 6, v[17] = 3, v[18] = 1;
  v[32] = 6, v[33] = 4.5f, v[34] = 1, v[35] = 1;
  S::Options o;
  o.scheme = S::Scheme::nvfp4;
  o.variant = S::Variant::four_over_six;
  auto q = S::quantize(row(v), o);
  ASSERT_EQ(q.scales.size(), 3u);
  EXPECT_EQ(q.scales[0], 0x7Cu);
  EXPECT_EQ(q.scales[1], 0x78u);
  EXPECT_EQ(q.scales[2], 0x78u);
  ASSERT_TRUE(q.tensor_scale.has_value());
  EXPECT_EQ(*q.tensor_scale, 0x3B800000u);
  std::vector<unsigned> want(48, 0);
  want[0] = 0x6, want[1] = 0xD;
  want[16] = 0x7, want[17] = 0x5, want[18] = 0x2;
  want[32] = 0x7, want[33] = 0x6, want[34] = 0x2, want[35] = 0x2;
  EXPECT_EQ(as_unsigned(q), want);
  // The dequantized values: block 0 is exact under map-to-4 (0x6 * 384 * 2^-8 = 6, 0xD = -3 * 1.5 = -4.5).
  const auto d = S::dequantize(q);
  EXPECT_EQ(d[0], 6.0);
  EXPECT_EQ(d[1], -4.5);
  EXPECT_EQ(d[33], 4.0);

  o.variant = S::Variant::four_over_six_mse;
  q = S::quantize(row(v), o);
  EXPECT_EQ(q.scales[0], 0x7Cu);
  EXPECT_EQ(q.scales[1], 0x78u);
  EXPECT_EQ(q.scales[2], 0x7Cu);
  want[32] = 0x6, want[33] = 0x5, want[34] = 0x1, want[35] = 0x1;
  EXPECT_EQ(as_unsigned(q), want);
}

// 4over6 on a 16x16 block: the sixteen row errors are summed into one per block.  Row 0 [6, 4.5, 0...]
// and row 1 [1, 0...]: map-to-4 (0 + 0.25) beats map-to-6 (0.5 + 0); with row 1 [1, 1, 0...] the sums
// tie at 0.5 and map-to-6 stays.
TEST(Nvfp4, FourOverSix2dSumsRows) {
  std::vector<float> v(256, 0.0f);
  v[0] = 6, v[1] = 4.5f, v[16] = 1;
  S::Options o;
  o.scheme = S::Scheme::nvfp4_2d;
  o.variant = S::Variant::four_over_six;
  S::Tensor x{16, 16, v};
  auto q = S::quantize(x, o);
  ASSERT_EQ(q.scales.size(), 1u);
  EXPECT_EQ(q.scales[0], 0x7Cu);
  EXPECT_EQ(q.codes[0], 0x6u);
  EXPECT_EQ(q.codes[1], 0x5u);
  EXPECT_EQ(q.codes[16], 0x1u);
  x.data[17] = 1;
  q = S::quantize(x, o);
  EXPECT_EQ(q.scales[0], 0x78u);
  EXPECT_EQ(q.codes[0], 0x7u);
  EXPECT_EQ(q.codes[1], 0x6u);
  EXPECT_EQ(q.codes[16], 0x2u);
  EXPECT_EQ(q.codes[17], 0x2u);
}

TEST(Nvfp4, FourOverSixOptions) {
  S::Options o;
  o.variant = S::Variant::four_over_six;
  o.scheme = S::Scheme::nvfp4_1level;
  EXPECT_NE(S::normalize(o), "");
  o = {};
  o.variant = S::Variant::four_over_six;
  o.scheme = S::Scheme::nvfp4;
  o.hadamard = S::Hadamard::exact;
  EXPECT_NE(S::normalize(o), "");
  o.hadamard = S::Hadamard::none;
  EXPECT_EQ(S::normalize(o), "");
}

// DeepGEMM's ue8m0 block scales: amax 448 gives sf = 448 / 448 = 1 = 2^0 (code 127); amax 449 rounds up to
// 2^1 (code 128); four codes per 32-bit word, the first in the low byte.
TEST(Block, Ue8m0Packed) {
  std::vector<float> v(4 * 128, 0.0f);
  v[0] = 448;
  v[128] = 449;
  v[256] = 896;
  v[384] = 0.5f;  // sf = 0.5 / 448 -> 2^-9 rounded up from 2^-9.807: code 127 - 9 = 118
  S::Options o;
  o.scheme = S::Scheme::block;
  o.scale_format = S::ScaleFormat::ue8m0_packed;
  const auto q = S::quantize(row(v), o);
  EXPECT_EQ(q.scales, (Scales{127, 128, 128, 118}));
  EXPECT_EQ(q.packed_scales, (std::vector<std::uint32_t>{0x7680807Fu}));
}

// ---- properties ----------------------------------------------------------------------------------

std::uint64_t next(std::uint64_t& s) { return lowbit::testing::splitmix(s); }
float random_value(std::uint64_t& s) {
  // Finite f32 values spread over many binades.
  const auto e = static_cast<int>(next(s) % 40) - 20;
  const float m = 1.0f + static_cast<float>(next(s) >> 41) * 0x1p-23f;
  return ((next(s) & 1) ? -1.0f : 1.0f) * std::ldexp(m, e);
}

// Multiplying an MX block by 2^k (within range) moves only its scale.
TEST(MxProperties, PowerOfTwoScalingMovesOnlyTheScale) {
  std::uint64_t s = 1;
  for (const lowbit::Format* el : {&F::e4m3, &F::e5m2, &F::e2m3, &F::e3m2, &F::e2m1, &F::int8}) {
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<float> v(32);
      for (float& x : v) x = random_value(s);
      const int k = static_cast<int>(next(s) % 21) - 10;
      std::vector<float> w(v);
      for (float& x : w) x = std::ldexp(x, k);
      S::Options o;
      o.scheme = S::Scheme::mx;
      o.element = el;
      const auto a = S::quantize(row(v), o), b = S::quantize(row(w), o);
      EXPECT_EQ(a.codes, b.codes) << el->name;
      EXPECT_EQ(static_cast<int>(b.scales[0]) - static_cast<int>(a.scales[0]), k) << el->name;
    }
  }
}

// Permuting a block permutes its codes and keeps its scale.
TEST(MxProperties, PermutationPermutesCodes) {
  std::uint64_t s = 2;
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> v(32);
    for (float& x : v) x = random_value(s);
    std::vector<int> perm(32);
    for (int i = 0; i < 32; ++i) perm[i] = i;
    for (int i = 31; i > 0; --i) std::swap(perm[i], perm[next(s) % (i + 1)]);
    std::vector<float> w(32);
    for (int i = 0; i < 32; ++i) w[i] = v[perm[i]];
    S::Options o;
    o.scheme = S::Scheme::mx;
    const auto a = S::quantize(row(v), o), b = S::quantize(row(w), o);
    EXPECT_EQ(a.scales, b.scales);
    for (int i = 0; i < 32; ++i) EXPECT_EQ(b.codes[i], a.codes[perm[i]]);
  }
}

// Quantize, dequantize, quantize again: the same codes and scales.
TEST(Properties, QuantizeDequantizeIsIdempotent) {
  std::uint64_t s = 3;
  // (MX only: an MX dequantized value code * 2^e is exact in f32, while NVFP4's code * scale * S_dec
  // needs up to 30 significant bits and would be rounded on the way back.)
  for (S::Scheme scheme : {S::Scheme::mx}) {
    for (int trial = 0; trial < 100; ++trial) {
      std::vector<float> v(64);
      for (float& x : v) x = random_value(s);
      S::Options o;
      o.scheme = scheme;
      const auto a = S::quantize(row(v), o);
      const auto d = S::dequantize(a);
      std::vector<float> w(d.begin(), d.end());
      const auto b = S::quantize(row(w), o);
      EXPECT_EQ(a.codes, b.codes) << lowbit::name(scheme);
      EXPECT_EQ(a.scales, b.scales) << lowbit::name(scheme);
    }
  }
}

// Unsaturated elements dequantize within half a scaled ulp of the input (rne), checked for the per-tensor
// scheme with power-of-two scales (so that x * scale is exact in fp32 and the bound is the element's).
TEST(Properties, WithinHalfScaledUlp) {
  std::uint64_t s = 4;
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<float> v(64);
    for (float& x : v) x = std::ldexp(random_value(s), -10);
    S::Options o;
    o.scheme = S::Scheme::tensor;
    o.scale_format = S::ScaleFormat::pow2;
    const auto q = S::quantize(row(v), o);
    const auto d = S::dequantize(q);
    const double inv = std::bit_cast<float>(static_cast<std::uint32_t>(q.scales[0]));
    for (std::size_t i = 0; i < v.size(); ++i) {
      const double scaled = static_cast<double>(v[i]) / inv;  // exact: inv is a power of two
      const int e = std::max(static_cast<int>(std::floor(std::log2(std::fabs(scaled)))), -6);
      const double half_ulp = std::ldexp(0.5, e - 3) * inv;
      if (std::fabs(scaled) <= 448) {
        EXPECT_LE(std::fabs(d[i] - v[i]), half_ulp) << v[i];
      }
    }
  }
}

}  // namespace
