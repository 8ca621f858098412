// Full tier: every one of the 2^32 f32 inputs through the 32-bit element conversion
// (lowbit/fast_convert.hpp) against lowbit::convert (code, flags, ternary), for every element/policy pair
// of fast_support.hpp's proof_pairs().  Blocks of 2^16 inputs run in parallel with oneTBB; one test per
// pair, so that a mismatch names its pair.
#include <gtest/gtest.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "fast_support.hpp"

namespace lowbit::fast_test {
namespace {

class EveryF32 : public ::testing::TestWithParam<Pair> {};

TEST_P(EveryF32, EqualsConvert) {
  const Pair& pair = GetParam();
  const Format& to = *pair.to;
  const Policy p = pair.policy;
  constexpr std::uint64_t block = 1u << 16;
  constexpr std::uint64_t blocks = (std::uint64_t{1} << 32) / block;
  std::atomic<std::uint64_t> bad{0};
  std::mutex first_mutex;
  std::string first;
  tbb::parallel_for(tbb::blocked_range<std::uint64_t>(0, blocks), [&](const tbb::blocked_range<std::uint64_t>& r) {
    for (std::uint64_t b = r.begin(); b != r.end(); ++b)
      for (std::uint64_t i = 0; i < block; ++i) {
        const auto c = static_cast<std::uint32_t>(b * block + i);
        const Result want = convert(formats::f32, c, to, p);
        const Result got = fast::convert(formats::f32, c, to, p);
        if (got == want) continue;
        if (bad.fetch_add(1) == 0) {
          std::lock_guard<std::mutex> lock(first_mutex);
          first = "input " + hex(c) + ": convert " + hex(want.code) + " flags " + std::to_string(want.flags) +
                  " ternary " + std::to_string(want.ternary) + ", fast::convert " + hex(got.code) + " flags " +
                  std::to_string(got.flags) + " ternary " + std::to_string(got.ternary);
        }
      }
  });
  EXPECT_EQ(bad.load(), 0u) << "f32 -> " << to.name << " under " << policy_text(p) << " (" << pair.why
                            << "); first mismatch: " << first;
}

INSTANTIATE_TEST_SUITE_P(Full, EveryF32, ::testing::ValuesIn(proof_pairs()), [](const auto& info) {
  return std::string(info.param.to->name) + "_" + std::to_string(info.index);
});

}  // namespace
}  // namespace lowbit::fast_test
