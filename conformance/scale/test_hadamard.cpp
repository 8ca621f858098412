// The random Hadamard transform's two arithmetics (scale.hpp Hadamard): Transformer Engine's te-bf16 (bf16
// inputs, one bf16 tensor-core MMA of K = 16 from +0 under the hopper-bf16 model, each result rounded to bf16)
// and the exact sum rounded once to f32.  Expected values are derived by hand in the comments: y_j =
// (1/4) Σ_i s_i (-1)^popcount(i & j) x_i, s = TE's sign vector [1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1,
// -1, -1] (transformer_engine/pytorch/tensor/nvfp4_tensor.py, get_wgrad_sign_vector).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "lowbit/scale.hpp"

namespace {

namespace S = lowbit::scale;

S::Tensor group(std::vector<float> v) {
  const int n = static_cast<int>(v.size());
  return {1, n, std::move(v)};
}
std::vector<std::uint32_t> bits_of(const S::Tensor& t) {
  std::vector<std::uint32_t> b;
  for (float f : t.data) b.push_back(std::bit_cast<std::uint32_t>(f));
  return b;
}
float from_bits(std::uint32_t b) { return std::bit_cast<float>(b); }
constexpr std::uint32_t quarter = 0x3E800000u, minus_quarter = 0xBE800000u;

// x = e_0: y_j = s_0 H[0][j] / 4 = +0.25 for every j (row 0 of H is all +1, s_0 = +1).
// x = e_3: s_3 = -1 and (-1)^popcount(3 & j) repeats +, -, -, + over j mod 4, so y repeats -, +, +, - (times 0.25).
TEST(HadamardTeBf16, BasisVectorsGiveRowsOfTheSignedMatrix) {
  std::vector<float> e0(16, 0.0f), e3(16, 0.0f);
  e0[0] = 1.0f;
  e3[3] = 1.0f;
  const std::vector<std::uint32_t> want0(16, quarter);
  std::vector<std::uint32_t> want3;
  for (int j = 0; j < 16; ++j) want3.push_back((j % 4 == 0 || j % 4 == 3) ? minus_quarter : quarter);
  for (S::Hadamard h : {S::Hadamard::te_bf16, S::Hadamard::exact}) {
    EXPECT_EQ(bits_of(S::hadamard_transform(group(e0), h)), want0) << lowbit::name(h);
    EXPECT_EQ(bits_of(S::hadamard_transform(group(e3), h)), want3) << lowbit::name(h);
  }
}

// x = sixteen ones: y_j = (1/4) Σ_i s_i (-1)^popcount(i & j), the Walsh-Hadamard transform of s.  y_0 = (6 - 10) / 4
// = -1 (s has six +1, ten -1); the others by the same count: [-1, 0, 1, 0, 1, 0, -1, 0, 1, 2, 1, 0, 1, 0, 1, -2].
// Every partial sum is a multiple of 0.25 below 4: nothing rounds, and an exactly cancelling sum is +0 (IEEE
// 754 §6.3: an exact zero sum of opposite signs is +0 in every rounding direction but toward negative).
TEST(HadamardTeBf16, AllOnesIsTheTransformOfTheSigns) {
  const std::vector<float> want_values = {-1, 0, 1, 0, 1, 0, -1, 0, 1, 2, 1, 0, 1, 0, 1, -2};
  std::vector<std::uint32_t> want;
  for (float v : want_values) want.push_back(std::bit_cast<std::uint32_t>(v));
  for (S::Hadamard h : {S::Hadamard::te_bf16, S::Hadamard::exact})
    EXPECT_EQ(bits_of(S::hadamard_transform(group(std::vector<float>(16, 1.0f)), h)), want) << lowbit::name(h);
}

// x_0 = 1, x_1 = 2^-8 (both bf16 values): y_j = (1 + 2^-8) / 4 for even j (H[1][j] = +1), (1 - 2^-8) / 4 for odd j.
// 1 + 2^-8 is the midpoint of bf16's 1 and 1 + 2^-7: TE's rounding to bf16 keeps the even 1, so y = 0.25
// (0x3E800000); the exact variant keeps 0.25 + 2^-10 = 0x3E808000 in f32.  1 - 2^-8 = 0.99609375 is a bf16 value:
// both give 0.2490234375 = 0x3E7F0000.  This is the kind of element where TE and the exact variant differ.
TEST(HadamardTeBf16, RoundsEachOutputToBf16) {
  std::vector<float> x(16, 0.0f);
  x[0] = 1.0f;
  x[1] = std::ldexp(1.0f, -8);
  std::vector<std::uint32_t> te, exact;
  for (int j = 0; j < 16; ++j) {
    te.push_back(j % 2 == 0 ? 0x3E800000u : 0x3E7F0000u);
    exact.push_back(j % 2 == 0 ? 0x3E808000u : 0x3E7F0000u);
  }
  EXPECT_EQ(bits_of(S::hadamard_rows_te_bf16(group(x))), te);
  EXPECT_EQ(bits_of(S::hadamard_rows(group(x))), exact);
}

// The MMA, not a correctly rounded sum: x_0 = 1, x_1 = 2^-8, x_2 = 2^-40 give the terms 0.25, ±2^-10 and ±2^-42.
// For j in {0, 4, 8, 12} all three are positive: the exact sum 0.25 + 2^-10 + 2^-42 lies just above the bf16
// midpoint 0.25 + 2^-10, so one correct rounding to bf16 gives 0.25 + 2^-9 (0x3E81).  The hopper-bf16 model keeps
// 25 fraction bits below the largest term's exponent (2^-2), down to 2^-27: 2^-42 is dropped, the sum is the
// midpoint itself, and the rounding to bf16 ties to the even 0.25 (0x3E80).  For j in {2, 6, 10, 14} the third
// term is negative (H[2][j] = -1), the sum below the midpoint: 0.25 either way.  Odd j: 0.25 - 2^-10 (a bf16
// value, 0x3E7F), the ±2^-42 dropped by the model and by the rounding alike.
TEST(HadamardTeBf16, FollowsTheTensorCoreModelNotACorrectRounding) {
  std::vector<float> x(16, 0.0f);
  x[0] = 1.0f;
  x[1] = std::ldexp(1.0f, -8);
  x[2] = std::ldexp(1.0f, -40);
  std::vector<std::uint32_t> want;
  for (int j = 0; j < 16; ++j) want.push_back(j % 2 == 0 ? 0x3E800000u : 0x3E7F0000u);
  EXPECT_EQ(bits_of(S::hadamard_rows_te_bf16(group(x))), want);
  // The exact variant keeps 0.25 + 2^-10 (+ 2^-42, below f32's half ulp 2^-26 at 0.25) for even j.
  EXPECT_EQ(std::bit_cast<std::uint32_t>(S::hadamard_rows(group(x)).data[0]), 0x3E808000u);
}

// x_0 = +Inf, x_1 = -Inf: even j adds Inf and -Inf (NaN: the model's canonical 0x7FFFFFFF, which
// cvt.rn.bf16x2.f32 makes the bf16 NaN 0x7FFF), odd j adds Inf and +Inf (+Inf).
TEST(HadamardTeBf16, InfinitiesAndNaN) {
  std::vector<float> x(16, 0.0f);
  x[0] = std::numeric_limits<float>::infinity();
  x[1] = -std::numeric_limits<float>::infinity();
  std::vector<std::uint32_t> want;
  for (int j = 0; j < 16; ++j) want.push_back(j % 2 == 0 ? 0x7FFF0000u : 0x7F800000u);
  EXPECT_EQ(bits_of(S::hadamard_rows_te_bf16(group(x))), want);
}

// TE transforms bf16 tensors only: an f32 value that is not a bf16 value is refused, naming the element.
TEST(HadamardTeBf16, RefusesValuesThatAreNotBf16) {
  std::vector<float> x(16, 0.0f);
  x[5] = from_bits(0x3F800001u);
  try {
    (void)S::hadamard_rows_te_bf16(group(x));
    FAIL() << "accepted a value that is not a bf16 value";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("element 5 (row 0, column 5)"), std::string::npos) << e.what();
  }
}

// A row's last partial group (here 4 of 20 columns) is left as it is by both.
TEST(HadamardTeBf16, PartialGroupUntouched) {
  std::vector<float> x(20, 1.0f);
  x[17] = 3.0f;
  for (S::Hadamard h : {S::Hadamard::te_bf16, S::Hadamard::exact}) {
    const S::Tensor y = S::hadamard_transform(group(x), h);
    EXPECT_EQ(y.data[16], 1.0f);
    EXPECT_EQ(y.data[17], 3.0f);
  }
}

// Where no rounding intervenes the two arithmetics agree bit for bit: each row holds small integers in [-8, 8]
// times one power of two 2^e, so every output is an integer below 2^7 times 2^(e-2) (a bf16 and f32 value, and
// every partial sum of the MMA exact within its 25 kept bits).  The NVFP4 quantization of the transformed
// tensors (tensor scale from the amax after the transform) is then equal too.
TEST(HadamardTeBf16, EqualsTheExactSumWhereNothingRounds) {
  std::mt19937 gen(21);
  std::uniform_int_distribution<int> value(-8, 8), exponent(-20, 20);
  S::Tensor x{48, 64, std::vector<float>(48 * 64)};
  for (int r = 0; r < x.rows; ++r) {
    const int e = exponent(gen);
    for (int c = 0; c < x.cols; ++c)
      x.data[static_cast<std::size_t>(r) * x.cols + c] = std::ldexp(static_cast<float>(value(gen)), e);
  }
  EXPECT_EQ(bits_of(S::hadamard_rows_te_bf16(x)), bits_of(S::hadamard_rows(x)));
  S::Options te, exact;
  te.scheme = exact.scheme = S::Scheme::nvfp4;
  te.hadamard = S::Hadamard::te_bf16;
  exact.hadamard = S::Hadamard::exact;
  ASSERT_EQ(S::normalize(te), "");
  ASSERT_EQ(S::normalize(exact), "");
  const S::Quantized a = S::quantize(x, te), b = S::quantize(x, exact);
  EXPECT_EQ(a.codes, b.codes);
  EXPECT_EQ(a.scales, b.scales);
  EXPECT_EQ(a.tensor_scale, b.tensor_scale);
  // The reference quantizer runs the same transform.
  const S::Quantized c = S::quantize_reference(x, te);
  EXPECT_EQ(a.codes, c.codes);
  EXPECT_EQ(a.scales, c.scales);
}

}  // namespace
