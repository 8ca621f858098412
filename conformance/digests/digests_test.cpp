// Quick tier: the committed f32 conversion digests (device/digests/f32_conversions.txt, which the device
// test compares the GPU's conversions with) are the ones the host computes.  The file lists exactly the
// pairs of digest_pairs.hpp with their whole policies, and a slice of its chunks recomputed here (zeros and
// subnormals, NaN and infinity, ordinary values, both signs, spread over the pairs) equals it.  The full
// tier recomputes every chunk (lowbit_conversion_digests --check).
#include <gtest/gtest.h>
#include <tbb/parallel_for.h>

#include <fstream>
#include <sstream>
#include <string>

#include "digest_pairs.hpp"

namespace lowbit::digest_test {
namespace {

digest::File committed() {
  std::ifstream in(LOWBIT_DIGEST_FILE, std::ios::binary);
  EXPECT_TRUE(in) << "cannot read " << LOWBIT_DIGEST_FILE;
  std::stringstream text;
  text << in.rdbuf();
  std::string error;
  const auto f = digest::parse_file(text.str(), error);
  EXPECT_TRUE(f) << LOWBIT_DIGEST_FILE << ": " << error;
  return f ? *f : digest::File{};
}

TEST(ConversionDigests, FileListsEveryPairWithItsPolicy) {
  const digest::File f = committed();
  const auto pairs = digest_pairs();
  ASSERT_EQ(f.pairs.size(), pairs.size()) << "regenerate: lowbit_conversion_digests --write " << LOWBIT_DIGEST_FILE;
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    EXPECT_EQ(f.pairs[i].target, pairs[i].target->name) << "pair " << i;
    EXPECT_EQ(f.pairs[i].policy, whole_policy_text(pairs[i].policy)) << "pair " << i;
    EXPECT_EQ(f.pairs[i].labels, pairs[i].labels) << "pair " << i;
    EXPECT_EQ(f.pairs[i].fast, pairs[i].fast) << "pair " << i;
    const auto back = parse_whole_policy_text(f.pairs[i].policy);
    ASSERT_TRUE(back) << f.pairs[i].policy;
    EXPECT_EQ(whole_policy_text(*back), f.pairs[i].policy);
  }
  // Every built-in format appears, under every profile that converts into it.
  for (const Format& fmt : formats::builtin) {
    bool seen = false;
    for (const auto& p : f.pairs) seen |= p.target == fmt.name;
    EXPECT_TRUE(seen || &fmt == &formats::int8) << fmt.name;  // int8 is int8sm under microxcaling only
  }
}

// The full tier's proof of the 32-bit path on every f32 input is the digest sweep's (there is no second
// sweep): every element/policy pair of that proof must be one of the swept pairs, with the 32-bit path on.
TEST(ConversionDigests, EveryPairOfTheFastPathsProofIsSweptThroughIt) {
  const auto pairs = digest_pairs();
  for (const fast_test::Pair& p : fast_test::proof_pairs()) {
    const DigestPair* hit = nullptr;
    for (const DigestPair& d : pairs)
      if (same_format(*d.target, *p.to) && same_policy_value(d.policy, p.policy)) hit = &d;
    ASSERT_NE(hit, nullptr) << p.to->name << " under " << whole_policy_text(p.policy) << " (" << p.why << ")";
    EXPECT_TRUE(hit->fast) << p.to->name << " under " << whole_policy_text(p.policy) << " (" << p.why << ")";
  }
}

TEST(ConversionDigests, ASliceRecomputedOnTheHostEqualsTheFile) {
  const digest::File f = committed();
  const auto pairs = digest_pairs();
  ASSERT_EQ(f.pairs.size(), pairs.size());
  // (pair, chunk): chunk 0x00 holds +0 and the positive subnormals, 0x7F the largest values, +Inf and the
  // positive NaNs, 0x80 and 0xFF their negatives, 0x3F values near 1, 0xC3 values near -256.
  const int chunks[] = {0x00, 0x7F, 0x80, 0xFF, 0x3F, 0xC3, 0x7F, 0x00};
  std::vector<std::pair<std::size_t, int>> slice;
  for (int i = 0; i < 8; ++i) slice.push_back({(static_cast<std::size_t>(i) * 37 + 5) % pairs.size(), chunks[i]});
  std::vector<ChunkResult> got(slice.size());
  tbb::parallel_for(std::size_t{0}, slice.size(),
                    [&](std::size_t i) { got[i] = chunk_digest(pairs[slice[i].first], slice[i].second); });
  for (std::size_t i = 0; i < slice.size(); ++i) {
    const auto& [p, c] = slice[i];
    EXPECT_EQ(digest::hex16(got[i].digest), digest::hex16(f.pairs[p].digests[static_cast<std::size_t>(c)]))
        << "f32 -> " << pairs[p].target->name << " under " << whole_policy_text(pairs[p].policy) << ", chunk " << c;
    EXPECT_EQ(got[i].fast_mismatches, 0u) << pairs[p].target->name << " first 0x" << std::hex << got[i].first_mismatch;
    EXPECT_EQ(got[i].batch_mismatches, 0u)
        << pairs[p].target->name << " first 0x" << std::hex << got[i].first_batch_mismatch;
  }
}

// The batch conversion is swept against lowbit::convert on every f32 input by the digest sweep for the
// pairs its vector kernel takes, and batch.Full sweeps the rest of its cases: most of the digest pairs
// reach the vector kernel, among them the plain rne cases of e4m3, e5m2 and e2m1.
TEST(ConversionDigests, TheBatchKernelIsSweptOnMostPairs) {
  const auto pairs = digest_pairs();
  std::size_t batch = 0;
  for (const DigestPair& d : pairs) batch += batch_supported(formats::f32, *d.target, d.policy);
  EXPECT_GE(batch * 2, pairs.size());
  for (const Format* f : {&formats::e4m3, &formats::e5m2, &formats::e2m1})
    for (Overflow o : {Overflow::satfinite, Overflow::nosat}) {
      const Policy p{.rounding = Rounding::rne, .overflow = o};
      bool hit = false;
      for (const DigestPair& d : pairs) hit |= same_format(*d.target, *f) && same_policy_value(d.policy, p);
      EXPECT_TRUE(hit && batch_supported(formats::f32, *f, p)) << f->name << " " << name(o);
    }
}

// The digest moves with each part of a result: the code, each flag, the ternary value and the index.
TEST(ConversionDigests, TermSeesCodeFlagsTernaryAndIndex) {
  const Result r{0x7E, flag::inexact, -1};
  const std::uint64_t t = digest::term(5, r);
  EXPECT_NE(t, digest::term(5, Result{0x7F, flag::inexact, -1}));
  EXPECT_NE(t, digest::term(5, Result{0x7E, flag::inexact | flag::overflow, -1}));
  EXPECT_NE(t, digest::term(5, Result{0x7E, flag::inexact, 1}));
  EXPECT_NE(t, digest::term(6, r));
  // A wrong code in one element changes a chunk's digest.
  const DigestPair p{&formats::e4m3, Policy{}, "", true};
  std::uint64_t sum = 0, planted = 0;
  for (std::uint32_t i = 0; i < 4096; ++i) {
    Result x = convert(formats::f32, 0x3F800000u + i, formats::e4m3, Policy{});
    sum += digest::term(i, x);
    if (i == 1000) x.code ^= 1;
    planted += digest::term(i, x);
  }
  EXPECT_NE(sum, planted);
  (void)p;
}

// The second loop of a block (block_terms, block_mismatches) sees what the per-input loop would: the sum of the
// terms one by one, and a batch answer that differs in its code, its flags or its ternary value, counted and
// located, in one-byte and two-byte codes.
TEST(ConversionDigests, TheBlockLoopsSumEveryTermAndFindEveryDifference) {
  for (const Format* to : {&formats::e4m3, &formats::bf16}) {
    const Policy p{.rounding = Rounding::rne, .overflow = Overflow::satfinite};
    ASSERT_TRUE(batch_supported(formats::f32, *to, p)) << to->name;
    const std::uint64_t first = 0x3F000000u;
    BatchBlock blk;
    blk.run(*to, p, first);
    detail::Wanted w;
    std::uint64_t one_by_one = 0;
    for (std::uint64_t k = 0; k < BatchBlock::size; ++k) {
      const Result r = convert(formats::f32, static_cast<std::uint32_t>(first + k), *to, p);
      w.code[k] = r.code;
      w.flags[k] = r.flags;
      w.ternary[k] = r.ternary;
      one_by_one += digest::term(first + k, r);
    }
    EXPECT_EQ(detail::block_terms(first, w), one_by_one) << to->name;
    auto mismatches = [&](std::uint64_t* at) {
      return blk.wide ? detail::block_mismatches(blk.codes.data(), blk.codes_only.data(), blk, w, at)
                      : detail::block_mismatches(reinterpret_cast<const std::uint8_t*>(blk.codes.data()),
                                                 reinterpret_cast<const std::uint8_t*>(blk.codes_only.data()), blk, w, at);
    };
    std::uint64_t at = 12345;
    EXPECT_EQ(mismatches(&at), 0u) << to->name;
    EXPECT_EQ(at, 12345u) << to->name;  // untouched where nothing differs
    w.ternary[40000] = static_cast<std::int8_t>(-w.ternary[40000] + 1);
    w.flags[9000] ^= flag::inexact;
    w.code[7000] ^= 1;
    EXPECT_EQ(mismatches(&at), 3u) << to->name;
    EXPECT_EQ(at, 7000u) << to->name;
    w.code[7000] ^= 1;
    w.flags[9000] ^= flag::inexact;
    EXPECT_EQ(mismatches(&at), 1u) << to->name;
    EXPECT_EQ(at, 40000u) << to->name;
  }
}

TEST(ConversionDigests, MalformedFilesAreRefusedNamingTheLine) {
  std::string error;
  EXPECT_FALSE(digest::parse_file("version 1\nchunk_bits 20\n", error));
  EXPECT_NE(error.find("line 2"), std::string::npos) << error;
  EXPECT_FALSE(digest::parse_file("version 1\nchunk_bits 24\npair e4m3 | x | y | fast\n0123\n", error));
  EXPECT_NE(error.find("line 4"), std::string::npos) << error;
  EXPECT_FALSE(digest::parse_file("version 1\nchunk_bits 24\npair e4m3 | x | y | fast\n", error));
  EXPECT_NE(error.find("0 digests"), std::string::npos) << error;
  EXPECT_FALSE(digest::parse_file("version 2\nchunk_bits 24\n", error));
  EXPECT_FALSE(digest::parse_file("version x\nchunk_bits 24\n", error));
  EXPECT_NE(error.find("line 1"), std::string::npos) << error;
  EXPECT_FALSE(parse_whole_policy_text("rne satfinite keep"));
  EXPECT_FALSE(parse_whole_policy_text(whole_policy_text(Policy{}) + " extra"));
}

}  // namespace
}  // namespace lowbit::digest_test
