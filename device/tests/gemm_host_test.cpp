// Quick tier: the FP8 GEMM wrappers' host-side logic (argument checks and their messages, padding and
// scale layouts), no GPU needed.
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "lowbit/device/cublaslt.hpp"
#include "lowbit/device/gemm.hpp"

namespace {

namespace g = lowbit::device::gemm;
namespace lt = lowbit::device::cublaslt;

// Addresses that are never dereferenced: validate() looks at their values only.
const void* at(std::uintptr_t p) { return reinterpret_cast<const void*>(p); }
void* mut(std::uintptr_t p) { return reinterpret_cast<void*>(p); }

g::Fp8Gemm good(g::Mode mode) {
  g::Fp8Gemm a;
  a.mode = mode;
  a.m = 256;
  a.n = 128;
  a.k = 512;
  a.a = at(0x10000);
  a.b = at(0x20000);
  a.d = mut(0x30000);
  if (mode == g::Mode::blockwise) {
    a.sfa = static_cast<const float*>(at(0x40000));
    a.sfb = static_cast<const float*>(at(0x50000));
  }
  return a;
}

::testing::AssertionResult rejects(const g::Fp8Gemm& a, const std::string& fragment) {
  const std::string e = g::validate(a);
  if (e.empty()) return ::testing::AssertionFailure() << "accepted, expected a message with '" << fragment << "'";
  if (e.find(fragment) == std::string::npos)
    return ::testing::AssertionFailure() << "message '" << e << "' lacks '" << fragment << "'";
  try {
    g::check(a);
    return ::testing::AssertionFailure() << "check() did not throw";
  } catch (const std::invalid_argument& x) {
    if (std::string(x.what()) != e) return ::testing::AssertionFailure() << "check() threw '" << x.what() << "'";
  }
  return ::testing::AssertionSuccess();
}

const g::Mode kModes[] = {g::Mode::fast_accum, g::Mode::promoted, g::Mode::blockwise, g::Mode::promoted_blockwise};

TEST(GemmArgs, AcceptsTileMultiples) {
  for (auto mode : kModes) {
    EXPECT_EQ(g::validate(good(mode)), "") << g::name(mode);
    EXPECT_NO_THROW(g::check(good(mode)));
  }
  // Per-tensor modes take any K that is a multiple of 16 (the last tile is zero-filled).
  auto a = good(g::Mode::fast_accum);
  a.k = 32;
  EXPECT_EQ(g::validate(a), "");
  a.k = 16;
  EXPECT_EQ(g::validate(a), "");
}

TEST(GemmArgs, RejectsShapesNamingTheArgumentAndThePaddedShape) {
  auto a = good(g::Mode::fast_accum);
  a.m = 100;
  EXPECT_TRUE(rejects(a, "m = 100 is not a multiple of the 128-row CTA tile; pad A and D with rows to m = 128"));
  a = good(g::Mode::promoted);
  a.n = 200;
  EXPECT_TRUE(rejects(a, "n = 200 is not a multiple of the 128-column CTA tile; pad B and D with columns to n = 256"));
  a = good(g::Mode::promoted);
  a.k = 40;
  EXPECT_TRUE(rejects(a, "k = 40 is not a multiple of 16"));
  EXPECT_TRUE(rejects(a, "to k = 48"));
  a = good(g::Mode::blockwise);
  a.k = 200;
  EXPECT_TRUE(rejects(
      a, "k = 200 is not a multiple of 128 (one scale per 128 elements of K); pad A and B with zeros to k = 256"));
  a = good(g::Mode::blockwise);
  a.k = 32;
  EXPECT_TRUE(rejects(a, "k = 32 is not a multiple of 128"));
  // Promotion through the blockwise mainloop has its K granularity too (its unit scales are per 128 of K).
  a = good(g::Mode::promoted_blockwise);
  a.k = 200;
  EXPECT_TRUE(rejects(a, "lowbit::device::gemm (promoted_blockwise): k = 200 is not a multiple of 128"));
  EXPECT_TRUE(rejects(a, "to k = 256"));
  a = good(g::Mode::fast_accum);
  a.m = 0;
  EXPECT_TRUE(rejects(a, "m = 0 must be positive"));
  a = good(g::Mode::fast_accum);
  a.n = -128;
  EXPECT_TRUE(rejects(a, "n = -128 must be positive"));
  a = good(g::Mode::fast_accum);
  a.k = 0;
  EXPECT_TRUE(rejects(a, "k = 0 must be positive"));
  // The mode is named in every message.
  EXPECT_TRUE(rejects(a, "lowbit::device::gemm (fast_accum): "));
}

TEST(GemmArgs, RejectsNullAndMisalignedPointers) {
  auto a = good(g::Mode::fast_accum);
  a.a = nullptr;
  EXPECT_TRUE(rejects(a, "a is null"));
  a = good(g::Mode::fast_accum);
  a.b = at(0x20008);
  EXPECT_TRUE(rejects(a, "b = 0x20008 is not 16-byte aligned"));
  a = good(g::Mode::promoted);
  a.d = mut(0x30004);
  EXPECT_TRUE(rejects(a, "d = 0x30004 is not 16-byte aligned"));
  a = good(g::Mode::blockwise);
  a.sfa = nullptr;
  EXPECT_TRUE(rejects(a, "sfa is null (blockwise mode needs A's 1x128 scales)"));
  a = good(g::Mode::blockwise);
  a.sfb = static_cast<const float*>(at(0x50004));
  EXPECT_TRUE(rejects(a, "sfb = 0x50004 is not 16-byte aligned"));
  a = good(g::Mode::fast_accum);
  a.sfa = static_cast<const float*>(at(0x40000));
  EXPECT_TRUE(rejects(a, "only blockwise mode takes block scales"));
  a = good(g::Mode::promoted_blockwise);
  a.sfb = static_cast<const float*>(at(0x50000));
  EXPECT_TRUE(rejects(a, "only blockwise mode takes block scales (promoted_blockwise brings its own unit scales)"));
  a = good(g::Mode::fast_accum);
  a.workspace_bytes = 1024;
  EXPECT_TRUE(rejects(a, "workspace_bytes is set but workspace is null"));
  a.workspace = mut(0x60001);
  EXPECT_TRUE(rejects(a, "workspace = 0x60001 is not 16-byte aligned"));
}

TEST(GemmArgs, BuiltCombinations) {
  auto a = good(g::Mode::fast_accum);
  a.b_type = g::Fp8::e5m2;
  EXPECT_EQ(g::validate(a), "");
  a.d_type = g::Out::bf16;
  EXPECT_TRUE(rejects(a, "b_type = e5m2 is built with d_type = f32 only, not bf16"));
  a = good(g::Mode::blockwise);
  a.d_type = g::Out::bf16;
  EXPECT_EQ(g::validate(a), "");
  a.b_type = g::Fp8::e5m2;
  EXPECT_TRUE(rejects(a, "b_type = e5m2 is not built for blockwise mode"));
  a = good(g::Mode::promoted_blockwise);
  a.b_type = g::Fp8::e5m2;
  EXPECT_TRUE(rejects(a, "b_type = e5m2 is not built for promoted_blockwise mode (e4m3 only)"));
  a.b_type = g::Fp8::e4m3;
  for (auto d : {g::Out::f32, g::Out::bf16}) {
    a.d_type = d;
    EXPECT_EQ(g::validate(a), "") << g::name(d);
  }
}

// Launch configurations: cluster_m 2 only where built (every mode but fast_accum, e4m3 x e4m3 -> bf16) and
// for m a multiple of 256; swizzle a power of two up to 8.
TEST(GemmArgs, LaunchConfigurations) {
  for (auto mode : {g::Mode::promoted, g::Mode::blockwise, g::Mode::promoted_blockwise}) {
    auto a = good(mode);
    a.d_type = g::Out::bf16;
    a.cluster_m = 2;
    a.swizzle = 8;
    EXPECT_EQ(g::validate(a), "") << g::name(mode);
    a.m = 384;
    EXPECT_TRUE(rejects(a, "m = 384 is not a multiple of 256"));
    EXPECT_TRUE(rejects(a, "pad A and D with rows to m = 512"));
    a.m = 256;
    a.d_type = g::Out::f32;
    EXPECT_TRUE(rejects(a, "cluster_m = 2 is built for e4m3 x e4m3 -> bf16 only, not e4m3 x e4m3 -> f32"));
  }
  auto f = good(g::Mode::fast_accum);
  f.d_type = g::Out::bf16;
  f.cluster_m = 2;
  EXPECT_TRUE(rejects(f, "cluster_m = 2 is not built for fast_accum mode"));
  f.cluster_m = 3;
  EXPECT_TRUE(rejects(f, "cluster_m = 3 is not 1 or 2"));
  f.cluster_m = 1;
  for (int s : {1, 2, 4, 8}) {
    f.swizzle = s;
    EXPECT_EQ(g::validate(f), "") << s;
  }
  for (int s : {0, 3, 16}) {
    f.swizzle = s;
    EXPECT_TRUE(rejects(f, "swizzle = " + std::to_string(s) + " is not 1, 2, 4 or 8"));
  }
}

TEST(GemmArgs, PaddedShape) {
  EXPECT_EQ(g::padded_shape(g::Mode::fast_accum, 100, 200, 40), (g::Shape{128, 256, 48}));
  EXPECT_EQ(g::padded_shape(g::Mode::blockwise, 100, 200, 40), (g::Shape{128, 256, 128}));
  EXPECT_EQ(g::padded_shape(g::Mode::promoted, 128, 256, 4096), (g::Shape{128, 256, 4096}));
  EXPECT_EQ(g::padded_shape(g::Mode::promoted, 0, 1, 1), (g::Shape{128, 128, 16}));
  EXPECT_EQ(g::padded_shape(g::Mode::promoted_blockwise, 100, 200, 40), (g::Shape{128, 256, 128}));
  // Every padded shape is accepted.
  for (auto mode : kModes)
    for (int m : {1, 127, 129, 300})
      for (int k : {1, 17, 129, 1000}) {
        auto a = good(mode);
        const auto p = g::padded_shape(mode, m, 77, k);
        a.m = p.m;
        a.n = p.n;
        a.k = p.k;
        EXPECT_EQ(g::validate(a), "") << g::name(mode) << " " << m << " " << k;
      }
}

TEST(GemmArgs, PromotionIntervalIs128) {
  // CUTLASS counts k-blocks (one wgmma of K = 32 each); 4 per 128-deep tile, promoted every 4.
  EXPECT_EQ(g::kPromotionMmas * g::kInstructionK, 128);
  EXPECT_EQ(g::kPromotionInterval, 128);
  EXPECT_EQ(g::kTileK / g::kInstructionK, g::kPromotionMmas);
}

TEST(GemmArgs, ScaleLayouts) {
  // A: (K/128) x M, M fastest.  B: (N/128) x (K/128), K fastest.
  EXPECT_EQ(g::sfa_count(256, 512), 256u * 4u);
  EXPECT_EQ(g::sfb_count(384, 512), 3u * 4u);
  EXPECT_EQ(g::sfa_index(256, 0, 0), 0u);
  EXPECT_EQ(g::sfa_index(256, 5, 0), 5u);
  EXPECT_EQ(g::sfa_index(256, 5, 2), 2u * 256u + 5u);
  EXPECT_EQ(g::sfb_index(512, 3, 0), 3u);
  EXPECT_EQ(g::sfb_index(512, 3, 2), 2u * 4u + 3u);
  // Both index maps are bijections onto [0, count).
  const int m = 256, n = 384, k = 512;
  std::vector<int> seen_a(g::sfa_count(m, k)), seen_b(g::sfb_count(n, k));
  for (int i = 0; i < m; ++i)
    for (int kb = 0; kb < k / 128; ++kb) ++seen_a.at(g::sfa_index(m, i, kb));
  for (int kb = 0; kb < k / 128; ++kb)
    for (int nb = 0; nb < n / 128; ++nb) ++seen_b.at(g::sfb_index(k, kb, nb));
  for (int c : seen_a) EXPECT_EQ(c, 1);
  for (int c : seen_b) EXPECT_EQ(c, 1);
}

TEST(GemmArgs, Names) {
  EXPECT_STREQ(g::name(g::Mode::fast_accum), "fast_accum");
  EXPECT_STREQ(g::name(g::Mode::promoted), "promoted");
  EXPECT_STREQ(g::name(g::Mode::blockwise), "blockwise");
  EXPECT_STREQ(g::name(g::Mode::promoted_blockwise), "promoted_blockwise");
  EXPECT_STREQ(g::name(g::Fp8::e5m2), "e5m2");
  EXPECT_STREQ(g::name(g::Out::bf16), "bf16");
}

// ---- cuBLASLt wrapper ----

lt::Fp8Gemm lt_good() {
  lt::Fp8Gemm a;
  a.m = 256;
  a.n = 128;
  a.k = 64;
  a.a = at(0x10000);
  a.b = at(0x20000);
  a.d = mut(0x30000);
  return a;
}

::testing::AssertionResult lt_rejects(const lt::Fp8Gemm& a, const std::string& fragment) {
  const std::string e = lt::validate(a);
  if (e.empty()) return ::testing::AssertionFailure() << "accepted, expected '" << fragment << "'";
  if (e.find(fragment) == std::string::npos)
    return ::testing::AssertionFailure() << "message '" << e << "' lacks '" << fragment << "'";
  return ::testing::AssertionSuccess();
}

TEST(CublasLtArgs, Accepts) {
  EXPECT_EQ(lt::validate(lt_good()), "");
  auto a = lt_good();
  a.b_type = lt::Type::e5m2;
  a.d_type = lt::Type::bf16;
  EXPECT_EQ(lt::validate(a), "");
  a = lt_good();
  a.d_type = lt::Type::e4m3;
  a.c = at(0x70000);
  a.scale_d = static_cast<const float*>(at(0x80000));
  a.amax_d = static_cast<float*>(mut(0x80010));
  a.fast_accum = true;
  EXPECT_EQ(lt::validate(a), "");
}

TEST(CublasLtArgs, Rejects) {
  auto a = lt_good();
  a.m = 100;
  EXPECT_TRUE(lt_rejects(a, "m = 100 is not a multiple of 16 (cuBLASLt FP8 rule)"));
  a = lt_good();
  a.k = 8;
  EXPECT_TRUE(lt_rejects(a, "k = 8 is not a multiple of 16"));
  a = lt_good();
  a.n = 0;
  EXPECT_TRUE(lt_rejects(a, "must be positive"));
  a = lt_good();
  a.a_type = lt::Type::e5m2;
  a.b_type = lt::Type::e5m2;
  EXPECT_TRUE(lt_rejects(a, "no e5m2 x e5m2 FP8 GEMM"));
  a = lt_good();
  a.a_type = lt::Type::bf16;
  EXPECT_TRUE(lt_rejects(a, "a_type = bf16 is not an FP8 type"));
  a = lt_good();
  a.a = at(0x10001);
  EXPECT_TRUE(lt_rejects(a, "a = 0x10001 is not 16-byte aligned"));
  a = lt_good();
  a.d = nullptr;
  EXPECT_TRUE(lt_rejects(a, "d is null"));
  a = lt_good();
  a.beta = 1.0f;
  EXPECT_TRUE(lt_rejects(a, "beta != 0 needs c"));
  a = lt_good();
  a.d_type = lt::Type::e4m3;
  EXPECT_TRUE(lt_rejects(a, "d_type = e4m3 needs c"));
  a = lt_good();
  a.amax_d = static_cast<float*>(mut(0x80000));
  EXPECT_TRUE(lt_rejects(a, "scale_d / amax_d are taken with an e4m3 D only, not d_type = f32"));
  a = lt_good();
  a.d_type = lt::Type::e5m2;
  EXPECT_TRUE(lt_rejects(a, "d_type = e5m2 is not supported"));
}

TEST(CublasLtArgs, StatusMessagesNameTheCall) {
  try {
    LOWBIT_CUBLAS_CHECK(CUBLAS_STATUS_INVALID_VALUE);
    FAIL() << "no throw";
  } catch (const lowbit::device::Error& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("gemm_host_test.cpp:"), std::string::npos) << w;
    EXPECT_NE(w.find("CUBLAS_STATUS_INVALID_VALUE failed: CUBLAS_STATUS_INVALID_VALUE"), std::string::npos) << w;
  }
}

}  // namespace
