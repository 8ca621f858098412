// Quick tier, no GPU needed: the device side's host logic (error reporting, the GPU gate, the
// conversion table and sweep partitioning).
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "lowbit/device/check.hpp"
#include "lowbit/conversion_digest.hpp"
#include "lowbit/device/cvt.hpp"
#include "lowbit/policy_pairs.hpp"
#include "lowbit/profile.hpp"
#include "lowbit/registry.hpp"

std::string lowbit_f32_digests_text();

namespace lowbit::device {
namespace {

// The digest file compiled into the device conversion test (device/convert.cmake) parses, and each of its
// pairs names a format and a policy that this build knows (the device test resolves them the same way).
TEST(ConversionDigests, TheEmbeddedFileParsesAndNamesKnownPairs) {
  std::string error;
  const auto f = digest::parse_file(lowbit_f32_digests_text(), error);
  ASSERT_TRUE(f) << error;
  EXPECT_GE(f->pairs.size(), 60u);
  for (const auto& p : f->pairs) {
    EXPECT_NE(find_format(p.target), nullptr) << p.target;
    EXPECT_TRUE(parse_whole_policy_text(p.policy)) << p.policy;
  }
}

TEST(CudaCheck, NamesTheCallTheSiteAndTheError) {
  try {
    LOWBIT_CUDA_CHECK(cudaErrorInvalidValue);
    FAIL() << "no exception";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("host_test.cpp:"), std::string::npos) << m;
    EXPECT_NE(m.find("cudaErrorInvalidValue"), std::string::npos) << m;
    EXPECT_NE(m.find("failed"), std::string::npos) << m;
  }
  EXPECT_NO_THROW(LOWBIT_CUDA_CHECK(cudaSuccess));
}

TEST(GpuGate, OldGpuIsRefusedWithNameAndCapability) {
  GpuInfo g;
  g.name = "NVIDIA Tesla T4";
  g.major = 7;
  g.minor = 5;
  try {
    require_capability(g, 89, "the FP8 mma.sync probe");
    FAIL() << "no exception";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "NVIDIA Tesla T4 (sm_75) cannot run the FP8 mma.sync probe: it needs sm_89 or newer");
  }
  g.major = 9;
  g.minor = 0;
  EXPECT_NO_THROW(require_capability(g, 89, "x"));
}

TEST(GpuGate, ProbeEitherFindsAGpuOrSaysWhyNot) {
  const GpuProbe p = probe_gpu();
  if (p.present) {
    EXPECT_TRUE(p.why.empty());
    EXPECT_FALSE(p.info.name.empty());
    EXPECT_GE(p.info.capability(), 10);
  } else {
    EXPECT_FALSE(p.why.empty());
  }
}

TEST(SweepChunks, CoverTheRangeExactlyOnce) {
  const auto c = sweep_chunks(std::uint64_t{1} << 32, std::uint64_t{1} << 30);
  ASSERT_EQ(c.size(), 4u);
  for (std::size_t i = 0; i < c.size(); ++i) {
    EXPECT_EQ(c[i].begin, i << 30);
    EXPECT_EQ(c[i].count, std::uint64_t{1} << 30);
  }
  const auto d = sweep_chunks(10, 4);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[2].begin, 8u);
  EXPECT_EQ(d[2].count, 2u);
  EXPECT_TRUE(sweep_chunks(0, 4).empty());
  EXPECT_THROW(sweep_chunks(5, 0), std::invalid_argument);
}

// Every instruction in the table names formats the registry knows and a policy that the cuda profile
// resolves: otherwise its device test could not even start.
TEST(HardwareConversions, EveryEntryResolvesUnderTheCudaProfile) {
  std::set<std::string> names;
  for (const HwCvtInfo& c : hardware_conversions()) {
    EXPECT_TRUE(names.insert(c.name).second) << "duplicate " << c.name;
    EXPECT_EQ(find_hardware_conversion(c.name), &c);
    ASSERT_NE(find_format(c.from), nullptr) << c.from;
    const Format* to = find_format(c.to);
    ASSERT_NE(to, nullptr) << c.to;
    PolicyRequest req;
    req.rounding = parse<Rounding>(c.rounding);
    ASSERT_TRUE(req.rounding) << c.rounding;
    if (c.overflow) req.overflow = parse<Overflow>(c.overflow);
    std::string error;
    EXPECT_TRUE(resolve(find_profile("cuda"), *to, req, error)) << c.ptx << ": " << error;
    EXPECT_TRUE(c.lanes == 1 || c.lanes == 2);
    EXPECT_EQ(c.needs_blackwell, c.min_capability >= 100) << c.ptx;
  }
  EXPECT_EQ(find_hardware_conversion("no-such-form"), nullptr);
}

TEST(Sweep, RefusesARangeOutsideTheSourceFormat) {
  const HwCvtInfo* c = find_hardware_conversion("f16x2.e4m3x2");
  ASSERT_NE(c, nullptr);
  // 256 source codes: [200, +100) runs past the end.  Checked before any GPU is touched.
  EXPECT_THROW(sweep(*c, formats::f16, Policy{}, 200, 100), std::invalid_argument);
}

}  // namespace
}  // namespace lowbit::device
