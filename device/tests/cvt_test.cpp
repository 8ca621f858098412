// Device tier: every conversion instruction the GPU has, over every code of its source format (all
// 2^32 f32 patterns for the f32 forms), against the reference's fast path compiled for the device
// under the policy `lowbit convert --profile cuda` resolves for the same target, rounding and
// saturation.  Expected: 0 mismatches; every mismatch found is printed with its operands.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "lowbit/device/cvt.hpp"
#include "lowbit/format.hpp"
#include "lowbit/profile.hpp"
#include "lowbit/registry.hpp"
#include "support.hpp"

namespace lowbit::device {
namespace {

class HardwareCvt : public ::testing::TestWithParam<HwCvtInfo> {};

TEST_P(HardwareCvt, EqualsReferenceOnEveryInput) {
  const HwCvtInfo& cvt = GetParam();
  LOWBIT_REQUIRE_GPU(cvt.min_capability);
  if (cvt.needs_blackwell && testing::gpu().info.major < 10)
    GTEST_SKIP() << cvt.ptx << " exists only on sm_100a / sm_120a; this GPU is " << testing::gpu().info.name;

  const Format* to = find_format(cvt.to);
  ASSERT_NE(to, nullptr) << cvt.to;
  PolicyRequest req;
  req.rounding = parse<Rounding>(cvt.rounding);
  if (cvt.overflow) req.overflow = parse<Overflow>(cvt.overflow);
  std::string error;
  const auto resolved = resolve(find_profile("cuda"), *to, req, error);
  ASSERT_TRUE(resolved) << "--profile cuda does not resolve " << cvt.ptx << ": " << error;

  const SweepResult r = sweep(cvt, *resolved->target, resolved->policy, 0, 0, 20);
  RecordProperty("instruction", cvt.ptx);
  RecordProperty("inputs", std::to_string(r.inputs));
  RecordProperty("comparisons", std::to_string(r.comparisons));
  RecordProperty("mismatches", std::to_string(r.mismatches));
  RecordProperty("sweep_ms", std::to_string(r.milliseconds));
  std::printf("[cvt] %-32s %12llu comparisons  %10llu mismatches  %9.1f ms\n", cvt.ptx,
              static_cast<unsigned long long>(r.comparisons), static_cast<unsigned long long>(r.mismatches),
              r.milliseconds);
  const Format* from = find_format(cvt.from);
  for (const SweepMismatch& m : r.first) {
    std::printf("  %s 0x%0*X (lane %u): hardware 0x%0*X, reference 0x%0*X\n", cvt.from, from->hex_digits(), m.input,
                m.lane, to->hex_digits(), m.hardware, to->hex_digits(), m.reference);
  }
  EXPECT_EQ(r.mismatches, 0u) << cvt.ptx << " differs from the reference on " << r.mismatches << " of "
                              << r.comparisons << " inputs";
}

std::string test_name(const ::testing::TestParamInfo<HwCvtInfo>& info) {
  std::string s = info.param.name;
  for (char& c : s)
    if (c == '.') c = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(Device, HardwareCvt,
                         ::testing::ValuesIn(hardware_conversions().begin(), hardware_conversions().end()), test_name);

}  // namespace
}  // namespace lowbit::device
