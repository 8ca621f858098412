// hopper-fp8-mma-sync: FP8 mma.sync on Hopper, which the GPU runs as an exact conversion to f16 and two
// f16 tensor-core steps (lowbit/gemm.hpp, Datapath::f16_pairs).  Three kinds of evidence:
//  - dot products an NVIDIA H200 computed (reports/device/2026-11-30-nvidia-h200.log, printed by the device
//    tier as mismatches of the fused models): the model gives the GPU's bits, the fused models do not;
//  - hand-derived cases for each part of the definition (which k go into which half, which half is summed
//    first, the last add of C rounded to nearest even, the GPU's NaN);
//  - the operand formats it takes, against the conversion of every code.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "lowbit/convert.hpp"
#include "lowbit/gemm.hpp"
#include "lowbit/registry.hpp"

namespace {

using lowbit::Format;
using lowbit::gemm::Matrix;
using lowbit::gemm::TensorCoreModel;
namespace F = lowbit::formats;

const TensorCoreModel& mma_sync() {
  const TensorCoreModel* m = lowbit::gemm::find_model("hopper-fp8-mma-sync");
  if (!m) throw std::logic_error("no model hopper-fp8-mma-sync");
  return *m;
}

std::uint32_t run(const TensorCoreModel& model, const Format& fa, std::vector<std::uint64_t> a, const Format& fb,
                  std::vector<std::uint64_t> b, std::uint32_t c) {
  const int k = static_cast<int>(a.size());
  const Matrix ma{&fa, 1, k, std::move(a)}, mb{&fb, k, 1, std::move(b)}, mc{&F::f32, 1, 1, {c}};
  return static_cast<std::uint32_t>(lowbit::gemm::run_model(model, ma, mb, &mc)[0]);
}

// ---- the H200's own results -----------------------------------------------------------------------------

struct HardwareCase {
  const Format* a_format;
  const Format* b_format;
  const char* a;  // 32 codes, k = 0..31, as the log prints them
  const char* b;
  std::uint32_t c, d;  // C and the H200's D (mma.sync.aligned.m16n8k32.row.col.f32.<a>.<b>.f32)
};

// Every distinct dot product the log prints for FP8 mma.sync (five per operand kind, "uniform" regime).
const HardwareCase kH200[] = {
    {&F::e4m3, &F::e4m3, "9d 5d d1 88 fc 31 fc b8 55 7e 24 d7 23 18 f8 0b fe 2c 92 5e 02 28 77 41 5f 28 50 02 6e 5d dc d1",
     "77 c7 4b c9 03 7c 55 5a b4 5e 2b da 19 f2 bb 39 7b 2f e1 55 53 20 e4 1f c0 99 f4 ac 94 2e 44 e0", 0x80000000u,
     0xc81e384bu},
    {&F::e4m3, &F::e4m3, "9d 5d d1 88 fc 31 fc b8 55 7e 24 d7 23 18 f8 0b fe 2c 92 5e 02 28 77 41 5f 28 50 02 6e 5d dc d1",
     "13 74 cf 9f 62 b0 a9 22 64 4d dd 70 e5 59 f5 4b 15 1d 42 c2 d9 7d 29 b2 99 26 c6 fa f5 25 65 83", 0x3afb415eu,
     0x469d8b79u},
    {&F::e4m3, &F::e4m3, "9d 5d d1 88 fc 31 fc b8 55 7e 24 d7 23 18 f8 0b fe 2c 92 5e 02 28 77 41 5f 28 50 02 6e 5d dc d1",
     "e8 36 e4 7a 9d 45 0d e8 cd 51 21 8b bf 5f 89 31 0d c9 cc d2 f1 35 66 6a 88 b2 81 e6 27 f1 7d 18", 0xbe955327u,
     0x458104b9u},
    {&F::e4m3, &F::e4m3, "9d 5d d1 88 fc 31 fc b8 55 7e 24 d7 23 18 f8 0b fe 2c 92 5e 02 28 77 41 5f 28 50 02 6e 5d dc d1",
     "8b 16 a3 02 1d 8c d0 d2 4c 82 7c cc 90 8e 93 ea 8f 51 58 9a 95 45 aa 66 6c 6b ec 51 73 47 a2 14", 0xbcc8d6e9u,
     0x46c5b3a3u},
    {&F::e4m3, &F::e4m3, "9d 5d d1 88 fc 31 fc b8 55 7e 24 d7 23 18 f8 0b fe 2c 92 5e 02 28 77 41 5f 28 50 02 6e 5d dc d1",
     "66 4e b5 00 72 7e 95 bf 2f 37 b9 55 4f 27 0e 24 7a f6 51 7c de 95 8e f9 ea 7b 43 03 73 8f 67 f5", 0x43bd4be1u,
     0xc82bc040u},
    {&F::e5m2, &F::e5m2, "25 ae 1c ec 25 f5 f4 5e 1a 0c 6f 44 36 f3 b9 04 1c 70 e8 92 4e d5 e6 cb 79 d0 c2 d1 53 bc 49 a8",
     "22 cb ee d8 80 47 a6 98 5b 1b 77 8b 7a 28 e4 5f 26 16 9d 24 78 04 11 51 d8 64 d0 fb 74 a2 a5 68", 0x80000000u,
     0x4d432983u},
    {&F::e5m2, &F::e5m2, "25 ae 1c ec 25 f5 f4 5e 1a 0c 6f 44 36 f3 b9 04 1c 70 e8 92 4e d5 e6 cb 79 d0 c2 d1 53 bc 49 a8",
     "18 01 71 55 f2 db 11 a1 42 53 26 b8 e3 4f 5f 1e 54 3f b2 07 d7 70 23 97 10 bb 81 0c d4 51 f7 34", 0xb94ded29u,
     0x4a32796eu},
    {&F::e5m2, &F::e5m2, "25 ae 1c ec 25 f5 f4 5e 1a 0c 6f 44 36 f3 b9 04 1c 70 e8 92 4e d5 e6 cb 79 d0 c2 d1 53 bc 49 a8",
     "2e d6 23 0b 16 e7 12 c8 e5 0a dd ad 4b 8a 2f 88 60 54 32 dd 48 e6 87 c7 ef 2b 5f 55 71 d1 c3 b8", 0x440c16d6u,
     0xcd7607bdu},
    {&F::e5m2, &F::e5m2, "25 ae 1c ec 25 f5 f4 5e 1a 0c 6f 44 36 f3 b9 04 1c 70 e8 92 4e d5 e6 cb 79 d0 c2 d1 53 bc 49 a8",
     "c4 94 85 2d 8d f5 d6 b9 cd 6a 3b f1 af 06 72 f6 1b a3 34 0a 08 6e 50 8a 37 6d e8 50 ad b5 a7 f9", 0x35c9dde8u,
     0x4dc8679eu},
    {&F::e5m2, &F::e5m2, "25 ae 1c ec 25 f5 f4 5e 1a 0c 6f 44 36 f3 b9 04 1c 70 e8 92 4e d5 e6 cb 79 d0 c2 d1 53 bc 49 a8",
     "ac 22 30 ee a8 e5 6b f5 b3 19 56 11 51 78 f3 b7 e6 1b a5 07 df bd ad 61 2e eb 62 35 a6 b2 ab a8", 0x31cbf65eu,
     0xcde6df17u},
    {&F::e4m3, &F::e5m2, "1d df 72 b0 95 1c 27 61 4d e3 22 78 e5 4b 4c 01 b4 33 8a c3 cd 9a cc b3 05 93 bf 39 c1 9f 70 9a",
     "c7 66 c1 5f 92 5d 6d aa d8 d8 0c bc 22 27 8c 55 a0 b1 cd 85 97 61 a3 c4 0d 86 e9 81 12 75 96 a3", 0xc2fa67f5u,
     0xc71730f6u},
    {&F::e4m3, &F::e5m2, "1d df 72 b0 95 1c 27 61 4d e3 22 78 e5 4b 4c 01 b4 33 8a c3 cd 9a cc b3 05 93 bf 39 c1 9f 70 9a",
     "be b9 83 57 38 43 6a 19 1e 49 8e c3 9d 1e 73 89 53 d3 eb 02 d6 23 23 4c c4 4f e3 e8 78 df 3c a1", 0x443d6988u,
     0x46441a88u},
    {&F::e4m3, &F::e5m2, "1d df 72 b0 95 1c 27 61 4d e3 22 78 e5 4b 4c 01 b4 33 8a c3 cd 9a cc b3 05 93 bf 39 c1 9f 70 9a",
     "a4 1c 3e 4d 47 0b 39 c2 b4 8a 11 1f 96 52 62 3c da 4e 68 a2 c4 38 86 29 22 21 60 b7 20 20 9d 29", 0xbf54b466u,
     0x4582930au},
    {&F::e4m3, &F::e5m2, "1d df 72 b0 95 1c 27 61 4d e3 22 78 e5 4b 4c 01 b4 33 8a c3 cd 9a cc b3 05 93 bf 39 c1 9f 70 9a",
     "1e d5 ed ef 25 63 93 3e 37 4d 82 e1 f3 5e 0f ac 4d 3c 44 ce 5e 4a 44 f9 29 f3 aa 48 f9 8f 80 2d", 0x80000000u,
     0xc7da3bb8u},
    {&F::e4m3, &F::e5m2, "1d df 72 b0 95 1c 27 61 4d e3 22 78 e5 4b 4c 01 b4 33 8a c3 cd 9a cc b3 05 93 bf 39 c1 9f 70 9a",
     "94 53 92 52 5b 72 f7 46 c6 d4 31 e5 be 02 18 a9 38 df 4d 2c af d0 14 1d 24 57 48 c3 a2 ba a0 b5", 0x36751de3u,
     0xc8a237d9u},
    {&F::e5m2, &F::e4m3, "71 f9 ce 96 f3 35 e6 d1 e4 46 89 e6 4d d4 6c 6f 90 bc be 5d df 17 34 30 dd ab 75 bf ed 2f 86 d3",
     "77 61 31 a5 32 08 c1 59 40 c0 af 7b f2 ab 16 d3 72 4a 30 5b 9b 2d e1 90 4c 33 34 62 1a 78 52 b2", 0x3747a82eu,
     0x48b5d1a4u},
    {&F::e5m2, &F::e4m3, "71 f9 ce 96 f3 35 e6 d1 e4 46 89 e6 4d d4 6c 6f 90 bc be 5d df 17 34 30 dd ab 75 bf ed 2f 86 d3",
     "0b 37 92 9b b9 7a d6 88 88 29 8e fa 69 96 da 1f dc c4 b3 8d 82 57 b4 f9 bd a3 5d ee cc e7 ce ba", 0x40c2a231u,
     0x496e229cu},
    {&F::e5m2, &F::e4m3, "71 f9 ce 96 f3 35 e6 d1 e4 46 89 e6 4d d4 6c 6f 90 bc be 5d df 17 34 30 dd ab 75 bf ed 2f 86 d3",
     "77 11 96 3f b0 e6 9b 14 32 7b 3a e1 72 f4 b3 82 ea 83 ca 15 eb e4 1b 9c c8 1c e9 e4 58 2e 1d 09", 0x353f8981u,
     0x4978560cu},
    {&F::e5m2, &F::e4m3, "71 f9 ce 96 f3 35 e6 d1 e4 46 89 e6 4d d4 6c 6f 90 bc be 5d df 17 34 30 dd ab 75 bf ed 2f 86 d3",
     "1d ba 04 cf 1e cc 10 b3 d4 51 58 7b 8e 8b e0 be bb 25 4d ed fd 16 e6 9e 3f 8c 81 20 7a b5 9f 91", 0x80000000u,
     0xca009e17u},
    {&F::e5m2, &F::e4m3, "71 f9 ce 96 f3 35 e6 d1 e4 46 89 e6 4d d4 6c 6f 90 bc be 5d df 17 34 30 dd ab 75 bf ed 2f 86 d3",
     "45 34 ce de 01 8a d0 aa ca 9b 22 22 8a 15 1c 40 27 5c 8b 73 b4 8c 51 1c f6 e9 dd f5 e3 ed 88 d3", 0xc31fb73bu,
     0xc80c1d21u},
};

std::vector<std::uint64_t> parse(const char* s) {
  std::vector<std::uint64_t> v;
  unsigned x = 0;
  int used = 0;
  while (std::sscanf(s, "%x%n", &x, &used) == 1) {
    v.push_back(x);
    s += used;
  }
  return v;
}

TEST(HopperFp8MmaSync, GivesTheH200sBits) {
  ASSERT_EQ(std::size(kH200), 20u);
  for (const HardwareCase& h : kH200) {
    const auto a = parse(h.a), b = parse(h.b);
    ASSERT_EQ(a.size(), 32u);
    ASSERT_EQ(b.size(), 32u);
    EXPECT_EQ(run(mma_sync(), *h.a_format, a, *h.b_format, b, h.c), h.d) << h.a << " / " << h.b;
    EXPECT_EQ(lowbit::gemm::model_step(mma_sync(), *h.a_format, a, *h.b_format, b, h.c), h.d);
    // The fused FP8 models (wgmma's hopper-fp8, Ada's ada-fp8) miss every one of these.
    for (const char* other : {"hopper-fp8", "ada-fp8"})
      EXPECT_NE(run(*lowbit::gemm::find_model(other), *h.a_format, a, *h.b_format, b, h.c), h.d) << other;
  }
}

// ---- the definition, part by part ---------------------------------------------------------------------
// e4m3: 448 = 0x7E, -448 = 0xFE, 1.0 = 0x38, 2^-9 = 0x01 (the smallest subnormal; a normal f16 value).
// A big pair 448 * 1 - 448 * 1 at k = 0, 1 (both in the first half) and a tiny product 2^-9 * 2^-9 = 2^-18 at
// k = p.  In the half with the pair the largest exponent is 8 and F = 25 keeps bits down to 2^-17, so the
// tiny product truncates to zero there; in the other half it is alone and exact, and the pair's exact +0
// leaves it be.  So D = 2^-18 (0x36800000) exactly when p is in the second half (p mod 4 = 2 or 3), else +0.
// The fused models see one sum with the pair and lose it at every p.
TEST(HopperFp8MmaSync, SecondHalfIsKEqualTwoOrThreeModFour) {
  for (int p = 2; p < 32; ++p) {
    std::vector<std::uint64_t> a(32, 0x00), b(32, 0x00);
    a[0] = 0x7E;
    a[1] = 0xFE;
    b[0] = b[1] = 0x38;
    a[static_cast<std::size_t>(p)] = b[static_cast<std::size_t>(p)] = 0x01;
    const std::uint32_t want = p % 4 >= 2 ? 0x36800000u : 0u;
    EXPECT_EQ(run(mma_sync(), F::e4m3, a, F::e4m3, b, 0), want) << "tiny product at k = " << p;
    EXPECT_EQ(run(*lowbit::gemm::find_model("hopper-fp8"), F::e4m3, a, F::e4m3, b, 0), 0u) << p;
  }
}

// The first half is summed first and its result enters the second half as C.  The pair at k = 2, 3 (second
// half) and the tiny product at k = 0 (first half): the first half gives 2^-18, which the second half then
// aligns to 448's exponent and truncates: D = +0.  The same pair at k = 0, 1 and the tiny at k = 2: 2^-18.
TEST(HopperFp8MmaSync, FirstHalfFeedsTheSecond) {
  std::vector<std::uint64_t> a(32, 0x00), b(32, 0x00);
  a[2] = 0x7E;
  a[3] = 0xFE;
  b[2] = b[3] = 0x38;
  a[0] = b[0] = 0x01;
  EXPECT_EQ(run(mma_sync(), F::e4m3, a, F::e4m3, b, 0), 0u);
  // A second instruction (K = 64) starts from this one's D.
  std::vector<std::uint64_t> a2 = a, b2 = b;
  a2.resize(64, 0x00);
  b2.resize(64, 0x00);
  a2[34] = b2[34] = 0x01;  // k = 32 + 2: second half of the second instruction, alone: 2^-18
  EXPECT_EQ(run(mma_sync(), F::e4m3, a2, F::e4m3, b2, 0), 0x36800000u);
}

// C is added last, by one f32 add rounded to nearest even.  e5m2: 2^-16 = 0x01, 2^-8 = 0x1C, 1.5 * 2^-8 = 0x1E,
// 2^-9 = 0x18.  With C = 1.0 (ulp 2^-23): the product 1.5 * 2^-24 (0.75 ulp) rounds up to 0x3F800001;
// 2^-25 (0.25 ulp) rounds down to 1.0; the tie 2^-24 goes to the even 1.0, and from C = 1 + 2^-23 to the
// even 1 + 2^-22 (0x3F800002).  Rounding toward zero would give 0x3F800000 / 0x3F800001 for all of them; a
// fused sum with C (hopper-fp8, F = 13) drops every such product.
TEST(HopperFp8MmaSync, CIsAddedLastToNearestEven) {
  auto one_product = [](std::uint64_t x, std::uint64_t y, std::uint32_t c) {
    std::vector<std::uint64_t> a(32, 0x00), b(32, 0x00);
    a[5] = x;
    b[5] = y;
    return run(mma_sync(), F::e5m2, a, F::e5m2, b, c);
  };
  EXPECT_EQ(one_product(0x01, 0x1E, 0x3F800000u), 0x3F800001u);
  EXPECT_EQ(one_product(0x01, 0x18, 0x3F800000u), 0x3F800000u);
  EXPECT_EQ(one_product(0x01, 0x1C, 0x3F800000u), 0x3F800000u);
  EXPECT_EQ(one_product(0x01, 0x1C, 0x3F800001u), 0x3F800002u);
  EXPECT_EQ(one_product(0x81, 0x1C, 0x3F800001u), 0x3F800000u);  // -2^-24: the tie from above, to even
}

// NaN results are the GPU's canonical NaN 0x7FFFFFFF: a NaN C with a payload, and Inf - Inf between the
// tensor core's -Inf (e5m2 -Inf = 0xFC times 1.0 = 0x3C) and C = +Inf, which x86 would make 0xFFC00000.
// Infinities pass through: -Inf products and a finite C give -Inf.
TEST(HopperFp8MmaSync, NaNIsTheGpuNaN) {
  std::vector<std::uint64_t> a(32, 0x00), b(32, 0x00);
  a[3] = 0x3C;
  b[3] = 0x3C;
  EXPECT_EQ(run(mma_sync(), F::e5m2, a, F::e5m2, b, 0xFFC00001u), 0x7FFFFFFFu);
  a[3] = 0xFC;
  EXPECT_EQ(run(mma_sync(), F::e5m2, a, F::e5m2, b, 0x7F800000u), 0x7FFFFFFFu);
  EXPECT_EQ(run(mma_sync(), F::e5m2, a, F::e5m2, b, 0x3F800000u), 0xFF800000u);
  EXPECT_EQ(lowbit::gemm::model_step(mma_sync(), F::e5m2, a, F::e5m2, b, 0x7F800000u), 0x7FFFFFFFu);
}

// ---- the operands it takes ----------------------------------------------------------------------------
// Exactly the formats whose every code converts to f16 without rounding or overflow; the others are refused
// with a message naming the model and the format.
// The model takes its instruction's e4m3 and e5m2, and the formats one of those holds (conformance/gemm/
// test_procedures.cpp checks that rule against the conversion of every code); the datapath itself refuses, in
// model_step and run_model, any format whose values f16 does not all hold, naming the model and the format.
TEST(HopperFp8MmaSync, TakesTheFp8FormatsAndWhatTheyHold) {
  EXPECT_TRUE(lowbit::gemm::takes_operands(mma_sync(), F::e4m3));
  EXPECT_TRUE(lowbit::gemm::takes_operands(mma_sync(), F::e5m2));
  EXPECT_TRUE(lowbit::gemm::takes_operands(mma_sync(), F::e2m1));   // every e2m1 value is an e4m3 value
  EXPECT_TRUE(lowbit::gemm::takes_operands(mma_sync(), F::e3m2));   // and every e3m2 value
  EXPECT_FALSE(lowbit::gemm::takes_operands(mma_sync(), F::f16));   // not an operand of the FP8 instruction
  EXPECT_FALSE(lowbit::gemm::takes_operands(mma_sync(), F::bf16));
  for (const Format& f : F::builtin) {
    bool in_f16 = f.storage_bits() <= 16;
    for (std::uint64_t code = 0; in_f16 && code < (std::uint64_t{1} << f.storage_bits()); ++code) {
      if (!f.valid_code(code)) continue;
      const lowbit::Result r = lowbit::convert(f, code, F::f16, lowbit::Policy{});
      in_f16 = (r.flags & (lowbit::flag::inexact | lowbit::flag::overflow)) == 0;
    }
    if (in_f16) continue;
    const Matrix a{&f, 1, 1, {0}}, b{&F::e4m3, 1, 1, {0}};
    try {
      lowbit::gemm::run_model(mma_sync(), a, b, nullptr);
      ADD_FAILURE() << f.name << " accepted";
    } catch (const std::invalid_argument& e) {
      // Wider significands are refused for every model, before the model's own check.
      if (f.mantissa_bits <= 23) {
        EXPECT_NE(std::string(e.what()).find("hopper-fp8-mma-sync"), std::string::npos) << e.what();
      }
      EXPECT_NE(std::string(e.what()).find(f.name), std::string::npos) << e.what();
    }
  }
  // The fused FP8 model takes e4m3 and e5m2 only (wgmma has no conversion in front of it).
  const TensorCoreModel& wgmma = *lowbit::gemm::find_model("hopper-fp8");
  EXPECT_TRUE(lowbit::gemm::takes_operands(wgmma, F::e5m2));
  EXPECT_FALSE(lowbit::gemm::takes_operands(wgmma, F::e2m1));
  EXPECT_FALSE(lowbit::gemm::takes_operands(wgmma, F::bf16));
  EXPECT_FALSE(lowbit::gemm::takes_operands(wgmma, F::f32));
}

// Parametric formats (e<E>m<M>b<bias>, every special encoding): the datapath's predicate may refuse a format
// f16 could hold, but never takes one with a value f16 lacks.
TEST(HopperFp8MmaSync, TakesNoParametricFormatWithValuesF16Lacks) {
  int taken = 0;
  for (int e = 1; e <= 6; ++e)
    for (int m = 0; e + m <= 12; ++m)
      for (int bias : {-3, 0, 1, 7, 15, 20, 30})
        for (const char* specials : {"-ieee", "-fn", "-fnuz", "-finite"}) {
          const std::string name = "e" + std::to_string(e) + "m" + std::to_string(m) + "b" + std::to_string(bias) + specials;
          const Format* f = lowbit::find_format(name);
          if (!f || !lowbit::gemm::holds_every_value(F::f16, *f)) continue;
          ++taken;
          for (std::uint64_t code = 0; code < (std::uint64_t{1} << f->storage_bits()); ++code) {
            if (!f->valid_code(code)) continue;
            const lowbit::Result r = lowbit::convert(*f, code, F::f16, lowbit::Policy{});
            ASSERT_EQ(r.flags & (lowbit::flag::inexact | lowbit::flag::overflow), 0) << name << " code " << code;
          }
        }
  EXPECT_GT(taken, 100);  // the sweep reaches the formats the model takes, not only refusals
}

// One step takes at most the instruction's 32 elements of A and as many of B.
TEST(HopperFp8MmaSync, OneStepTakesAtMost32Elements) {
  const std::vector<std::uint64_t> a33(33, 0x38), b33(33, 0x38), b32(32, 0x38);
  EXPECT_THROW(lowbit::gemm::model_step(mma_sync(), F::e4m3, a33, F::e4m3, b33, 0), std::invalid_argument);
  EXPECT_THROW(lowbit::gemm::model_step(mma_sync(), F::e4m3, b32, F::e4m3, a33, 0), std::invalid_argument);
  // Shorter spans are padded with zeros: 3 products of 1 * 1 from C = +0 give 3.0.
  const std::vector<std::uint64_t> a3(3, 0x38);
  EXPECT_EQ(lowbit::gemm::model_step(mma_sync(), F::e4m3, a3, F::e4m3, a3, 0), 0x40400000u);
}

}  // namespace
