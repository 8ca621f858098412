// Full tier: every one of the 2^32 f32 inputs through the batch conversion into e4m3, e5m2, e2m1 and
// bf16 under rne with satfinite and with nosat, compared with the scalar path (code, flags, ternary), and
// the codes alone (the batch kernel's codes-only variant, its rne shortcut for these pairs) too.
// Blocks of 2^16 inputs run in parallel with oneTBB.
//
// The digest sweep (conformance/digests/, digests.EveryChunkOfEveryPair) already converts every f32 input
// of its pairs through lowbit::convert and holds the batch conversion against it wherever the vector
// kernel takes the pair, in the same way.  A case among those pairs would only repeat 2^32 reference
// conversions, so this sweep runs the cases that are not (today bf16 under rne + satfinite, which no
// profile uses by default).
#include <gtest/gtest.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "../digests/digest_pairs.hpp"
#include "batch_support.hpp"

namespace lowbit::batch_test {
namespace {

struct Case {
  const Format* to;
  Overflow overflow;
};

class AllF32 : public ::testing::TestWithParam<Case> {};

TEST_P(AllF32, EveryInput) {
  const Format& to = *GetParam().to;
  const Policy p{.rounding = Rounding::rne, .overflow = GetParam().overflow};
  constexpr std::uint64_t block = digest_test::BatchBlock::size;
  constexpr std::uint64_t blocks = (std::uint64_t{1} << 32) / block;
  std::atomic<std::uint64_t> bad{0};
  std::mutex first_mutex;
  std::string first;
  tbb::parallel_for(tbb::blocked_range<std::uint64_t>(0, blocks), [&](const tbb::blocked_range<std::uint64_t>& r) {
    digest_test::BatchBlock blk;
    for (std::uint64_t b = r.begin(); b != r.end(); ++b) {
      blk.run(to, p, b * block);
      for (std::uint64_t i = 0; i < block; ++i) {
        const Result want = convert(formats::f32, blk.in[i], to, p);
        if (blk.matches(i, want)) continue;
        if (bad.fetch_add(1) == 0) {
          std::lock_guard<std::mutex> lock(first_mutex);
          first = "input " + hex(blk.in[i]) + ": expected " + hex(want.code) + " flags " + std::to_string(want.flags) +
                  " ternary " + std::to_string(want.ternary) + ", got " + hex(blk.code(i)) + " flags " +
                  std::to_string(blk.flags[i]) + " ternary " + std::to_string(blk.ternary[i]) +
                  " (codes only: " + hex(blk.code_only(i)) + ")";
        }
      }
    }
  });
  EXPECT_EQ(bad.load(), 0u) << to.name << " under " << describe(p) << "; first mismatch: " << first;
}

// The cases, less those the digest sweep holds the batch conversion against on every input.
std::vector<Case> cases_outside_the_digest_sweep() {
  const Case all[] = {{&formats::e4m3, Overflow::satfinite}, {&formats::e4m3, Overflow::nosat},
                      {&formats::e5m2, Overflow::satfinite}, {&formats::e5m2, Overflow::nosat},
                      {&formats::e2m1, Overflow::satfinite}, {&formats::e2m1, Overflow::nosat},
                      {&formats::bf16, Overflow::satfinite}, {&formats::bf16, Overflow::nosat}};
  const auto swept = digest_test::digest_pairs();
  std::vector<Case> out;
  for (const Case& c : all) {
    const Policy p{.rounding = Rounding::rne, .overflow = c.overflow};
    bool covered = false;
    for (const auto& d : swept)
      covered |= same_format(*d.target, *c.to) && same_policy_value(d.policy, p) &&
                 batch_supported(formats::f32, *c.to, p);
    if (!covered) out.push_back(c);
  }
  return out;
}

// Empty only if the digest sweep came to cover every case.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(AllF32);
INSTANTIATE_TEST_SUITE_P(Full, AllF32, ::testing::ValuesIn(cases_outside_the_digest_sweep()),
                         [](const auto& info) {
                           return std::string(info.param.to->name) + "_rne_" + name(info.param.overflow);
                         });

}  // namespace
}  // namespace lowbit::batch_test
