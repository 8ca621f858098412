// Hand-derived cases that tell the tensor-core models apart (docs/semantics.md §5; the probes of Fasi et al.,
// PeerJ CS 2021, and MMA-Sim, arXiv 2511.10909).  Every expected bit pattern below is worked out in the
// comment beside it from the model's definition: align the products (and C) to the largest exponent,
// truncate each to F fraction bits, sum exactly, round the sum to the output.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "lowbit/gemm.hpp"

namespace {

using lowbit::Format;
using lowbit::gemm::Matrix;
namespace F = lowbit::formats;

// e4m3 codes used below (OCP OFP8 v1.0 table): 1.0 = 0x38, 448 = 0x7E, -448 = 0xFE, 2^-6 = 0x08 (min
// normal), 2^-7 = 0x04 (subnormal 4 * 2^-9), 2^-8 = 0x02 (subnormal), 0 = 0x00.
constexpr std::uint64_t one = 0x38, e448 = 0x7E, m448 = 0xFE, p2m6 = 0x08, p2m7 = 0x04, p2m8 = 0x02, zero = 0x00;

Matrix row(const Format& f, std::vector<std::uint64_t> v) {
  const int n = static_cast<int>(v.size());
  return {&f, 1, n, std::move(v)};
}
Matrix col(const Format& f, std::vector<std::uint64_t> v) {
  const int n = static_cast<int>(v.size());
  return {&f, n, 1, std::move(v)};
}
std::uint64_t run(const char* model, const Matrix& a, const Matrix& b, const Matrix* c = nullptr) {
  const auto* m = lowbit::gemm::find_model(model);
  EXPECT_NE(m, nullptr) << model;
  return lowbit::gemm::run_model(*m, a, b, c)[0];
}
std::uint64_t exact_of(const Matrix& a, const Matrix& b, const Matrix* c = nullptr) {
  return lowbit::gemm::exact(a, b, c)[0];
}

// 1 + 31 products of 2^-6 * 2^-8 = 2^-14.  In hopper-fp8 (F = 13) every small term is aligned to the
// exponent 0 of 1*1 and truncated: 2^-14 is below the last kept bit 2^-13, so it vanishes and D = 1.0
// (0x3F800000).  With F = 25 (blackwell-f8f6f4) each small term survives, as in the exact sum
// 1 + 31 * 2^-14: f32 fraction field 31 * 2^9 = 0x3E00, so 0x3F803E00.
TEST(TensorCoreModels, TruncatedSmallTermsVanishAtF13) {
  std::vector<std::uint64_t> a(32, p2m6), b(32, p2m8);
  a[0] = one;
  b[0] = one;
  EXPECT_EQ(run("hopper-fp8", row(F::e4m3, a), col(F::e4m3, b)), 0x3F800000u);
  EXPECT_EQ(run("blackwell-f8f6f4", row(F::e4m3, a), col(F::e4m3, b)), 0x3F803E00u);
  EXPECT_EQ(exact_of(row(F::e4m3, a), col(F::e4m3, b)), 0x3F803E00u);
}

// 1 + 1 + 2^-6 * 2^-7.  The small product is 2^-13: exactly the last kept bit at F = 13, so it is kept and
// the sum is 2 + 2^-13.  That sum lies in the binade [2, 4), where 13 fraction bits reach only 2^-12:
// hopper-fp8's e8m13 output rounds it toward zero to 2.0 (0x40000000).  An f32 output keeps it:
// 2 + 2^-13 = 2 * (1 + 2^-14), fraction field 2^9 = 0x200, so 0x40000200 (blackwell-f8f6f4 and exact).
TEST(TensorCoreModels, E8M13OutputRoundsTowardZero) {
  const auto a = row(F::e4m3, {one, one, p2m6});
  const auto b = col(F::e4m3, {one, one, p2m7});
  EXPECT_EQ(run("hopper-fp8", a, b), 0x40000000u);
  EXPECT_EQ(run("blackwell-f8f6f4", a, b), 0x40000200u);
  EXPECT_EQ(exact_of(a, b), 0x40000200u);
}

// Group width: sixteen products of 2^-14 first, then 1*1.  ada-fp8 works in groups of 16: the first
// group sums the small terms among themselves (all at exponent -12, nothing truncated) to 2^-10, which
// enters the second group as C; there 2^-10 is 8 units of 2^-13 and survives: D = 1 + 2^-10, fraction
// field 2^13 = 0x2000, so 0x3F802000.  hopper-fp8 aligns all 32 products to exponent 0 at once and each
// 2^-14 vanishes: D = 1.0.
TEST(TensorCoreModels, GroupWidthSixteenVersusThirtyTwo) {
  std::vector<std::uint64_t> a(32, zero), b(32, zero);
  for (int k = 0; k < 16; ++k) {
    a[k] = p2m6;
    b[k] = p2m8;
  }
  a[16] = one;
  b[16] = one;
  EXPECT_EQ(run("ada-fp8", row(F::e4m3, a), col(F::e4m3, b)), 0x3F802000u);
  EXPECT_EQ(run("hopper-fp8", row(F::e4m3, a), col(F::e4m3, b)), 0x3F800000u);
  EXPECT_EQ(exact_of(row(F::e4m3, a), col(F::e4m3, b)), 0x3F802000u);
}

// Cancellation: 448 - 448 + 2^-6.  Aligned to the exponent 8 of 448 with F = 13 the grid is 2^-5, and
// 2^-6 truncates to zero: hopper-fp8 gives +0 (an exact zero result is +0).  With F = 25 the grid is
// 2^-17 and the exact answer 2^-6 = 0x3C800000 survives.
TEST(TensorCoreModels, CancellationLosesSmallTerm) {
  const auto a = row(F::e4m3, {e448, m448, p2m6});
  const auto b = col(F::e4m3, {one, one, one});
  EXPECT_EQ(run("hopper-fp8", a, b), 0x00000000u);
  EXPECT_EQ(run("blackwell-f8f6f4", a, b), 0x3C800000u);
  EXPECT_EQ(exact_of(a, b), 0x3C800000u);
}

// Truncation, not rounding, and no sticky bit: with C = 1.0 and the f16 products -2^-24 * 1 repeated,
// hopper-f16 (F = 25) aligns everything to exponent 0; each product -2^-24 (f16 0x8001 is -2^-24) is
// exactly representable at F = 25 (the grid is 2^-25), so the sum 1 - k*2^-24 is exact and the f32 output
// is rounded toward zero.  For one product: 1 - 2^-24 is representable in f32 (0x3F7FFFFF).
TEST(TensorCoreModels, SubnormalProductsAreKept) {
  const Matrix c{&F::f32, 1, 1, {0x3F800000u}};
  const auto a = row(F::f16, {0x8001});
  const auto b = col(F::f16, {0x3C00});
  EXPECT_EQ(run("hopper-f16", a, b, &c), 0x3F7FFFFFu);
  EXPECT_EQ(exact_of(a, b, &c), 0x3F7FFFFFu);
  // Volta keeps F = 23: the grid 2^-23 cannot hold -2^-24, which truncates (toward zero) to 0: D = 1.0.
  EXPECT_EQ(run("volta-f16", a, b, &c), 0x3F800000u);
}

// Round toward zero at the output: 1 + 3 * 2^-24 in hopper-f16 (F = 25 keeps every term) is exact in the
// fixed-point sum but needs 24 fraction bits; f32 keeps 23, so RZ gives 1 + 2^-23 (0x3F800001) where the
// exact reference (rne) gives 1 + 2^-22 (0x3F800002: 3 * 2^-24 = 1.5 ulps, a tie broken to even).
TEST(TensorCoreModels, OutputRoundsTowardZero) {
  const Matrix c{&F::f32, 1, 1, {0x3F800000u}};
  const auto a = row(F::f16, {0x0003});  // 3 * 2^-24, an f16 subnormal
  const auto b = col(F::f16, {0x3C00});
  EXPECT_EQ(run("hopper-f16", a, b, &c), 0x3F800001u);
  EXPECT_EQ(exact_of(a, b, &c), 0x3F800002u);
}

// The split into halves: ampere-f16 aligns groups of 8, hopper-f16 groups of 16.  Eight products of
// 2^-14 * 2^-12 (f16 0x0400 is 2^-14, 0x0C00 is 2^-12) = 2^-26 each, then 1 * 1.  In ampere-f16 the
// first group of 8 sums them exactly to 2^-23 (C enters as +0); the second group aligns 2^-23 with 1.0
// at F = 24: kept, D = 1 + 2^-23 = 0x3F800001.  hopper-f16 aligns all nine to exponent 0 with F = 25:
// each 2^-26 is below 2^-25 and vanishes, D = 1.0.
TEST(TensorCoreModels, SplitIntoHalves) {
  std::vector<std::uint64_t> a(16, 0), b(16, 0);
  for (int k = 0; k < 8; ++k) {
    a[k] = 0x0400;
    b[k] = 0x0C00;
  }
  a[8] = 0x3C00;
  b[8] = 0x3C00;
  EXPECT_EQ(run("ampere-f16", row(F::f16, a), col(F::f16, b)), 0x3F800001u);
  EXPECT_EQ(run("hopper-f16", row(F::f16, a), col(F::f16, b)), 0x3F800000u);
  EXPECT_EQ(exact_of(row(F::f16, a), col(F::f16, b)), 0x3F800001u);
}

// TF32 inputs lose their low 13 bits: 1 + 2^-15 (f32 0x3F800100) truncates to 1.0 in tf32 (10 fraction
// bits); 1 * (1 + 2^-15) = 1.0 in ampere-tf32 and hopper-tf32, while the exact f32 product keeps it.
TEST(TensorCoreModels, Tf32TruncatesInputs) {
  const auto a = row(F::f32, {0x3F800100u});
  const auto b = col(F::f32, {0x3F800000u});
  EXPECT_EQ(run("ampere-tf32", a, b), 0x3F800000u);
  EXPECT_EQ(run("hopper-tf32", a, b), 0x3F800000u);
  EXPECT_EQ(exact_of(a, b), 0x3F800100u);
}

// Specials: Inf * 0 and Inf - Inf give the canonical NaN 0x7FFFFFFF; a lone Inf gives that infinity.
// e5m2: Inf = 0x7C, -Inf = 0xFC, 1.0 = 0x3C, 0 = 0x00.
TEST(TensorCoreModels, NonFiniteSums) {
  EXPECT_EQ(run("hopper-fp8", row(F::e5m2, {0x7C}), col(F::e5m2, {0x00})), 0x7FFFFFFFu);
  EXPECT_EQ(run("hopper-fp8", row(F::e5m2, {0x7C, 0xFC}), col(F::e5m2, {0x3C, 0x3C})), 0x7FFFFFFFu);
  EXPECT_EQ(run("hopper-fp8", row(F::e5m2, {0x7C, 0x3C}), col(F::e5m2, {0x3C, 0x3C})), 0x7F800000u);
  EXPECT_EQ(run("hopper-f16-f16acc", row(F::f16, {0x7C00}), col(F::f16, {0x0000})), 0x7FFFu);
  EXPECT_EQ(exact_of(row(F::e5m2, {0x7C}), col(F::e5m2, {0x00})), 0x7FFFFFFFu);
}

// An f16 accumulator rounds to nearest even: 1 + 3 * 2^-12, where f16's fraction bits reach 2^-10, is
// 1 + 0.75 ulp and rounds up to 1 + 2^-10 (0x3C01).  The f32 output holds it exactly: fraction field
// 3 * 2^-12 * 2^23 = 0x1800, so 0x3F801800.
TEST(TensorCoreModels, F16AccumulatorRoundsToNearest) {
  const auto a = row(F::f16, {0x3C00, 0x0C00});  // 1, 2^-12
  const auto b = col(F::f16, {0x3C00, 0x4200});  // 1, 3
  EXPECT_EQ(run("hopper-f16-f16acc", a, b), 0x3C01u);
  EXPECT_EQ(run("hopper-f16", a, b), 0x3F801800u);
}

// K that is not a multiple of the group is padded with zeros: K = 33 in hopper-fp8 is two steps, the
// second holding one product; 1 * 1 in the last position alone gives 1.0 after an all-zero first step.
TEST(TensorCoreModels, PaddedK) {
  std::vector<std::uint64_t> a(33, zero), b(33, zero);
  a[32] = one;
  b[32] = one;
  EXPECT_EQ(run("hopper-fp8", row(F::e4m3, a), col(F::e4m3, b)), 0x3F800000u);
}

// Promotion every 128 elements: block one holds 1 * 1, block two holds 128 products of 2^-14.  Without
// promotion, hopper-fp8's second-block steps see C = 1.0 and truncate each 2^-14 to zero: D = 1.0.
// With promotion each block starts from zero: block two sums to 128 * 2^-14 = 2^-7 exactly, and the f32
// FMA 1 * 2^-7 + 1.0 = 1 + 2^-7 (fraction 2^16 = 0x10000): 0x3F810000.
TEST(TensorCoreModels, PromotionEvery128) {
  std::vector<std::uint64_t> a(256, zero), b(256, zero);
  a[0] = one;
  b[0] = one;
  for (int k = 128; k < 256; ++k) {
    a[k] = p2m6;
    b[k] = p2m8;
  }
  const auto* hopper = lowbit::gemm::find_model("hopper-fp8");
  ASSERT_NE(hopper, nullptr);
  EXPECT_EQ(run("hopper-fp8", row(F::e4m3, a), col(F::e4m3, b)), 0x3F800000u);
  EXPECT_EQ(lowbit::gemm::run_promoted(*hopper, 128, row(F::e4m3, a), col(F::e4m3, b), nullptr)[0], 0x3F810000u);
  EXPECT_EQ(exact_of(row(F::e4m3, a), col(F::e4m3, b)), 0x3F810000u);
}

// The f32 arithmetic around the tensor core (promotion, block scaling, epilogue) gives the GPU's canonical
// NaN 0x7FFFFFFF (PTX ISA §9.7.3: single-precision NaN results are not x86's default NaN 0xFFC00000).
// e5m2 Inf = 0x7C, -Inf = 0xFC, 1.0 = 0x3C: block one's partial sum is +Inf, block two's -Inf, and the
// promotion fma(1, -Inf, +Inf) is Inf - Inf.  The epilogue 0 * Inf (alpha = +Inf, 0x7F800000) is the
// other invalid operation; quantize_output turns that NaN into e4m3's NaN 0x7F.
TEST(TensorCoreModels, PromotionInfMinusInfIsTheGpuNaN) {
  std::vector<std::uint64_t> a(256, 0x00), b(256, 0x00);
  a[0] = 0x7C;
  b[0] = 0x3C;
  a[128] = 0xFC;
  b[128] = 0x3C;
  const auto* hopper = lowbit::gemm::find_model("hopper-fp8");
  ASSERT_NE(hopper, nullptr);
  const Matrix ra = row(F::e5m2, a), cb = col(F::e5m2, b);
  EXPECT_EQ(lowbit::gemm::run_promoted(*hopper, 128, ra, cb, nullptr)[0], 0x7FFFFFFFu);
  const Matrix sa{&F::f32, 1, 2, {0x3F800000u, 0x3F800000u}};
  const Matrix sb{&F::f32, 2, 1, {0x3F800000u, 0x3F800000u}};
  EXPECT_EQ(lowbit::gemm::run_block_scaled(*hopper, ra, cb, sa, sb, nullptr)[0], 0x7FFFFFFFu);
  // Without promotion the tensor core sees +Inf and -Inf in one sum: its own canonical NaN.
  EXPECT_EQ(run("hopper-fp8", ra, cb), 0x7FFFFFFFu);
  const std::vector<std::uint64_t> acc{0x00000000u, 0x3F800000u};
  const auto d = lowbit::gemm::apply_epilogue(acc, nullptr, 0x7F800000u, 0, 0x3F800000u, 0x3F800000u);
  EXPECT_EQ(d[0], 0x7FFFFFFFu);
  EXPECT_EQ(d[1], 0x7F800000u);
  EXPECT_EQ(lowbit::gemm::quantize_output({0x7F800000u, 0x3F800000u}, 0x00000000u, F::e4m3)[0], 0x7Fu);
}

// Block-scaled fp4 (blackwell-mxf4nvf4): four groups of 16 e2m1 products, each group's exact sum times
// its two ue4m3 scales, aligned by the scales' exponent sum with F = 35.  One product 6 * 6 = 36 with
// scales 1.0 (ue4m3 0x38) gives 36 (0x42100000).  The same with the A scale 448 (0x7E) gives 16128
// (0x467C0000).
TEST(TensorCoreModels, BlockScaledFp4) {
  std::vector<std::uint64_t> a(64, 0), b(64, 0);
  a[0] = 0x7;  // e2m1 6
  b[0] = 0x7;
  const Matrix sa{&F::ue4m3, 1, 4, {0x38, 0x38, 0x38, 0x38}};
  const Matrix sb{&F::ue4m3, 4, 1, {0x38, 0x38, 0x38, 0x38}};
  const auto* m = lowbit::gemm::find_model("blackwell-mxf4nvf4");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(lowbit::gemm::run_model(*m, row(F::e2m1, a), col(F::e2m1, b), nullptr, &sa, &sb)[0], 0x42100000u);
  const Matrix sa2{&F::ue4m3, 1, 4, {0x7E, 0x38, 0x38, 0x38}};
  EXPECT_EQ(lowbit::gemm::run_model(*m, row(F::e2m1, a), col(F::e2m1, b), nullptr, &sa2, &sb)[0], 0x467C0000u);
  // The exact block-scaled reference agrees on these exact cases.
  EXPECT_EQ(lowbit::gemm::exact_block_scaled(row(F::e2m1, a), col(F::e2m1, b), sa2, sb, 16, 1, nullptr, F::f32, {})[0],
            0x467C0000u);
  // A NaN scale (ue4m3 0x7F) makes the result the canonical NaN.
  const Matrix sa3{&F::ue4m3, 1, 4, {0x7F, 0x38, 0x38, 0x38}};
  EXPECT_EQ(lowbit::gemm::run_model(*m, row(F::e2m1, a), col(F::e2m1, b), nullptr, &sa3, &sb)[0], 0x7FFFFFFFu);
  EXPECT_EQ(lowbit::gemm::exact_block_scaled(row(F::e2m1, a), col(F::e2m1, b), sa3, sb, 16, 1, nullptr, F::f32, {})[0],
            0x7FFFFFFFu);
}

// Where scaled fp4 products span more than F = 35 bits, the model truncates and the exact reference does
// not.  Group 0 holds 6 * 6 with both scales 448 (36 * 448^2 = 7225344; scale exponents 8 + 8 = 16); group 1
// holds 0.5 * 0.5 with both scales ue4m3 0x01 = 2^-9, a subnormal that MMA-Sim aligns by e4m3's smallest
// exponent -6 (significand 1/8): value 0.25 * 2^-18 = 2^-20, alignment exponent -12.  C = -7225344 (exponent
// 22) sets the alignment: 2^-20 lies 42 bits below 2^22, past F = 35, and truncates to zero, while the big
// term cancels C exactly: the model gives +0.  The exact sum is 2^-20 (0x35800000).
TEST(TensorCoreModels, BlockScaledFp4TruncatesPastF35) {
  std::vector<std::uint64_t> a(64, 0), b(64, 0);
  a[0] = 0x7;  // 6
  b[0] = 0x7;
  a[16] = 0x1;  // 0.5
  b[16] = 0x1;
  const Matrix sa{&F::ue4m3, 1, 4, {0x7E, 0x01, 0x38, 0x38}};
  const Matrix sb{&F::ue4m3, 4, 1, {0x7E, 0x01, 0x38, 0x38}};
  const Matrix c{&F::f32, 1, 1, {0xCADC8000u}};
  const auto* m = lowbit::gemm::find_model("blackwell-mxf4nvf4");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(lowbit::gemm::run_model(*m, row(F::e2m1, a), col(F::e2m1, b), &c, &sa, &sb)[0], 0x00000000u);
  EXPECT_EQ(lowbit::gemm::exact_block_scaled(row(F::e2m1, a), col(F::e2m1, b), sa, sb, 16, 1, &c, F::f32, {})[0],
            0x35800000u);
}

}  // namespace

// The sign of a zero (MMA-Sim: +0 for every zero result).  bf16 -2^-75 (0x9A00) * 2^-75 (0x1A00) = -2^-150:
// C = +0 takes exponent -126, so the product is kept exactly on the grid 2^-151 (F = 25) and the sum is
// -2^-150, nonzero; f32 has nothing below 2^-149, so rounding toward zero gives zero, and the model gives
// +0 (0x00000000), not -0.  Likewise in ampere-bf16 (F = 24, grid 2^-150) and ampere-tf32 (f32 -2^-75 is
// 0x9A000000, a tf32 value).  Blackwell mxf8f6f4 with both ue8m0 scales 2^-127 (0x00): e4m3 -1 * 1 * 2^-254
// truncates to zero: +0.  An exact zero sum (here -1 + 1) was +0 before and stays so.
TEST(TensorCoreModels, TinyNegativeSumIsPositiveZero) {
  for (const char* m : {"hopper-bf16", "ampere-bf16"})
    EXPECT_EQ(run(m, row(F::bf16, {0x9A00}), col(F::bf16, {0x1A00})), 0x00000000u) << m;
  EXPECT_EQ(run("hopper-tf32", row(F::f32, {0x9A000000}), col(F::f32, {0x1A000000})), 0x00000000u);
  EXPECT_EQ(run("ampere-tf32", row(F::f32, {0x9A000000}), col(F::f32, {0x1A000000})), 0x00000000u);
  // The same magnitude positive: +0 as before (the sum truncates toward zero).
  EXPECT_EQ(run("hopper-bf16", row(F::bf16, {0x1A00}), col(F::bf16, {0x1A00})), 0x00000000u);
  // -2^-149 itself is representable: -min subnormal (0x80000001), the sign kept.
  EXPECT_EQ(run("hopper-bf16", row(F::bf16, {0x9A00}), col(F::bf16, {0x1A80})), 0x80000001u);
  std::vector<std::uint64_t> a(32, 0), b(32, 0);
  a[0] = 0xB8;  // e4m3 -1
  b[0] = 0x38;  // 1
  const Matrix s0{&F::e8m0, 1, 1, {0x00}}, s1{&F::e8m0, 1, 1, {0x00}};
  const auto* mx = lowbit::gemm::find_model("blackwell-mxf8f6f4");
  ASSERT_NE(mx, nullptr);
  EXPECT_EQ(lowbit::gemm::run_model(*mx, row(F::e4m3, a), col(F::e4m3, b), nullptr, &s0, &s1)[0], 0x00000000u);
  EXPECT_EQ(run("hopper-bf16", row(F::bf16, {0xBF80, 0x3F80}), col(F::bf16, {0x3F80, 0x3F80})), 0x00000000u);
}
