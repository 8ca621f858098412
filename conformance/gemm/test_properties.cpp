// Properties of the tensor-core models, checked on random operands.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "lowbit/gemm.hpp"
#include "random_codes.hpp"

namespace {

using lowbit::gemm::Matrix;
using lowbit::gemm::TensorCoreModel;
namespace F = lowbit::formats;

using lowbit::testing::finite_codes;

// With F large enough to hold every term exactly (e4m3 products span 2^-18 .. 2^17.6: F = 40 suffices),
// one step of a model is the exact sum rounded toward zero to f32.
TEST(ModelProperties, LargeFEqualsExactThenRoundTowardZero) {
  const TensorCoreModel wide{"wide", 32, 40, lowbit::gemm::Output::f32_rz, false, lowbit::gemm::BlockScale::none, 0, "test"};
  lowbit::gemm::ExactOptions rz;
  rz.policy.rounding = lowbit::Rounding::rtz;
  std::uint64_t s = 3;
  for (int trial = 0; trial < 300; ++trial) {
    const Matrix a{&F::e4m3, 1, 32, finite_codes(F::e4m3, 32, s)}, b{&F::e4m3, 32, 1, finite_codes(F::e4m3, 32, s)};
    EXPECT_EQ(lowbit::gemm::run_model(wide, a, b, nullptr)[0], lowbit::gemm::exact(a, b, nullptr, rz)[0]);
  }
}

// Truncation toward zero and RZ output are sign-symmetric: negating A negates D (a zero stays +0).
TEST(ModelProperties, SignSymmetric) {
  std::uint64_t s = 5;
  for (const char* name : {"hopper-fp8", "ada-fp8", "blackwell-f8f6f4"}) {
    const auto* m = lowbit::gemm::find_model(name);
    ASSERT_NE(m, nullptr);
    for (int trial = 0; trial < 100; ++trial) {
      auto ca = finite_codes(F::e5m2, 64, s);
      const Matrix a{&F::e5m2, 1, 64, ca}, b{&F::e5m2, 64, 1, finite_codes(F::e5m2, 64, s)};
      for (auto& c : ca) c ^= 0x80;
      const Matrix na{&F::e5m2, 1, 64, ca};
      const auto d = lowbit::gemm::run_model(*m, a, b, nullptr)[0];
      const auto nd = lowbit::gemm::run_model(*m, na, b, nullptr)[0];
      if (d == 0) EXPECT_EQ(nd, 0u);
      else EXPECT_EQ(nd, d ^ 0x80000000u) << name;
    }
  }
}

// Promotion never makes the aggregate error worse: over random e4m3 problems with K = 1024, the
// norm-wise error of hopper-fp8 promoted every 128 is at most that of hopper-fp8 alone.
TEST(ModelProperties, PromotionDoesNotIncreaseError) {
  const auto* hopper = lowbit::gemm::find_model("hopper-fp8");
  ASSERT_NE(hopper, nullptr);
  std::uint64_t s = 9;
  for (int trial = 0; trial < 5; ++trial) {
    const int k = 1024;
    const Matrix a{&F::e4m3, 4, k, finite_codes(F::e4m3, 4 * k, s)}, b{&F::e4m3, k, 4, finite_codes(F::e4m3, 4 * k, s)};
    const auto ref = lowbit::gemm::exact(a, b, nullptr);
    const auto plain = lowbit::gemm::run_model(*hopper, a, b, nullptr);
    const auto prom = lowbit::gemm::run_promoted(*hopper, 128, a, b, nullptr);
    double ep = 0, eq = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
      const double r = std::bit_cast<float>(static_cast<std::uint32_t>(ref[i]));
      ep += std::pow(std::bit_cast<float>(static_cast<std::uint32_t>(plain[i])) - r, 2);
      eq += std::pow(std::bit_cast<float>(static_cast<std::uint32_t>(prom[i])) - r, 2);
    }
    EXPECT_LE(eq, ep) << "trial " << trial;
  }
}

}  // namespace
