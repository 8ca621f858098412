// Quick tier: the host-side logic of the tensor-core probes (lowbit/device/mma.hpp) without a GPU.
// Fragment maps against entries worked out by hand from the PTX ISA's fragment formulas, the wgmma
// shared-memory layout and descriptor fields, and the argument checks with their messages.
#include <gtest/gtest.h>

#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "lowbit/device/check.hpp"
#include "lowbit/device/mma.hpp"

namespace mma = lowbit::device::mma;
using mma::Coord;
using mma::Operand;
using mma::Slot;

namespace {

constexpr Operand all_ops[] = {Operand::a_k16, Operand::b_k16, Operand::a_k32, Operand::b_k32, Operand::cd};

// Every (lane, i) names a distinct in-range entry, every entry is named once, and slot() inverts coord().
TEST(MmaFragments, MapsAreBijections) {
  for (Operand op : all_ops) {
    const mma::Extent e = mma::extent(op);
    ASSERT_EQ(e.rows * e.cols, 32 * e.per_thread);
    std::set<std::pair<int, int>> seen;
    for (int lane = 0; lane < 32; ++lane)
      for (int i = 0; i < e.per_thread; ++i) {
        const Coord c = mma::coord(op, lane, i);
        ASSERT_GE(c.row, 0);
        ASSERT_LT(c.row, e.rows);
        ASSERT_GE(c.col, 0);
        ASSERT_LT(c.col, e.cols);
        EXPECT_TRUE(seen.insert({c.row, c.col}).second) << "op " << int(op) << " lane " << lane << " i " << i;
        EXPECT_EQ(mma::slot(op, c.row, c.col), (Slot{lane, i})) << "op " << int(op);
      }
    EXPECT_EQ(seen.size(), static_cast<std::size_t>(e.rows * e.cols));
  }
}

// Hand-derived entries (groupID = lane / 4, tig = lane % 4), PTX ISA fragment figures for m16n8k16
// (.f16/.bf16) and m16n8k32 (.e4m3/.e5m2):
TEST(MmaFragments, HandPickedEntries) {
  // m16n8k16 A: lane 0 holds a0,a1 = (0,0),(0,1); a2,a3 = (8,0),(8,1); a4,a5 = (0,8),(0,9); a6,a7 = (8,8),(8,9).
  EXPECT_EQ(mma::coord(Operand::a_k16, 0, 0), (Coord{0, 0}));
  EXPECT_EQ(mma::coord(Operand::a_k16, 0, 1), (Coord{0, 1}));
  EXPECT_EQ(mma::coord(Operand::a_k16, 0, 2), (Coord{8, 0}));
  EXPECT_EQ(mma::coord(Operand::a_k16, 0, 5), (Coord{0, 9}));
  EXPECT_EQ(mma::coord(Operand::a_k16, 0, 7), (Coord{8, 9}));
  // lane 31: groupID 7, tig 3: a0 = (7, 6), a3 = (15, 7), a6 = (15, 14), a7 = (15, 15).
  EXPECT_EQ(mma::coord(Operand::a_k16, 31, 0), (Coord{7, 6}));
  EXPECT_EQ(mma::coord(Operand::a_k16, 31, 3), (Coord{15, 7}));
  EXPECT_EQ(mma::coord(Operand::a_k16, 31, 6), (Coord{15, 14}));
  EXPECT_EQ(mma::coord(Operand::a_k16, 31, 7), (Coord{15, 15}));
  // m16n8k16 B: lane 5 (groupID 1, tig 1): b0 = (2, 1), b1 = (3, 1), b2 = (10, 1), b3 = (11, 1).
  EXPECT_EQ(mma::coord(Operand::b_k16, 5, 0), (Coord{2, 1}));
  EXPECT_EQ(mma::coord(Operand::b_k16, 5, 1), (Coord{3, 1}));
  EXPECT_EQ(mma::coord(Operand::b_k16, 5, 2), (Coord{10, 1}));
  EXPECT_EQ(mma::coord(Operand::b_k16, 5, 3), (Coord{11, 1}));
  // m16n8k32 A: lane 6 (groupID 1, tig 2): a0..a3 = (1, 8..11), a4 = (9, 8), a8 = (1, 24), a15 = (9, 27).
  EXPECT_EQ(mma::coord(Operand::a_k32, 6, 0), (Coord{1, 8}));
  EXPECT_EQ(mma::coord(Operand::a_k32, 6, 3), (Coord{1, 11}));
  EXPECT_EQ(mma::coord(Operand::a_k32, 6, 4), (Coord{9, 8}));
  EXPECT_EQ(mma::coord(Operand::a_k32, 6, 8), (Coord{1, 24}));
  EXPECT_EQ(mma::coord(Operand::a_k32, 6, 15), (Coord{9, 27}));
  // m16n8k32 B: lane 30 (groupID 7, tig 2): b0 = (8, 7), b3 = (11, 7), b4 = (24, 7), b7 = (27, 7).
  EXPECT_EQ(mma::coord(Operand::b_k32, 30, 0), (Coord{8, 7}));
  EXPECT_EQ(mma::coord(Operand::b_k32, 30, 3), (Coord{11, 7}));
  EXPECT_EQ(mma::coord(Operand::b_k32, 30, 4), (Coord{24, 7}));
  EXPECT_EQ(mma::coord(Operand::b_k32, 30, 7), (Coord{27, 7}));
  // C/D: lane 9 (groupID 2, tig 1): c0 = (2, 2), c1 = (2, 3), c2 = (10, 2), c3 = (10, 3).
  EXPECT_EQ(mma::coord(Operand::cd, 9, 0), (Coord{2, 2}));
  EXPECT_EQ(mma::coord(Operand::cd, 9, 1), (Coord{2, 3}));
  EXPECT_EQ(mma::coord(Operand::cd, 9, 2), (Coord{10, 2}));
  EXPECT_EQ(mma::coord(Operand::cd, 9, 3), (Coord{10, 3}));
}

TEST(WgmmaLayout, AccumulatorRows) {
  // Thread 0 of warp 2 (thread 64): rows 32 and 40, columns 0 and 1.
  EXPECT_EQ(mma::wgmma_d_coord(64, 0), (Coord{32, 0}));
  EXPECT_EQ(mma::wgmma_d_coord(64, 1), (Coord{32, 1}));
  EXPECT_EQ(mma::wgmma_d_coord(64, 2), (Coord{40, 0}));
  // Thread 127 (warp 3, lane 31): rows 55 and 63, columns 6 and 7.
  EXPECT_EQ(mma::wgmma_d_coord(127, 1), (Coord{55, 7}));
  EXPECT_EQ(mma::wgmma_d_coord(127, 2), (Coord{63, 6}));
  std::set<std::pair<int, int>> seen;
  for (int t = 0; t < 128; ++t)
    for (int i = 0; i < 4; ++i) {
      const Coord c = mma::wgmma_d_coord(t, i);
      EXPECT_TRUE(c.row >= 0 && c.row < 64 && c.col >= 0 && c.col < 8);
      seen.insert({c.row, c.col});
    }
  EXPECT_EQ(seen.size(), 512u);
}

TEST(WgmmaLayout, SharedMemoryOffsets) {
  using mma::kLayoutLbo;
  using mma::kLayoutSbo;
  // Core matrix (0, 0): row r's 16 bytes at 16 r.
  EXPECT_EQ(mma::smem_offset(0, 0, kLayoutLbo, kLayoutSbo), 0);
  EXPECT_EQ(mma::smem_offset(3, 5, kLayoutLbo, kLayoutSbo), 53);
  // The next 16 bytes of K: the next core matrix, 128 bytes on.
  EXPECT_EQ(mma::smem_offset(0, 16, kLayoutLbo, kLayoutSbo), 128);
  EXPECT_EQ(mma::smem_offset(7, 31, kLayoutLbo, kLayoutSbo), 128 + 7 * 16 + 15);
  // Row 8: the next row group, 256 bytes on.
  EXPECT_EQ(mma::smem_offset(8, 0, kLayoutLbo, kLayoutSbo), 256);
  EXPECT_EQ(mma::smem_offset(63, 31, kLayoutLbo, kLayoutSbo), mma::kWgmmaABytes - 1);
  // A 64 x 32-byte operand fills its 2048 bytes exactly once; an 8-row B its 256 bytes.
  std::set<int> seen;
  for (int r = 0; r < 64; ++r)
    for (int k = 0; k < 32; ++k) seen.insert(mma::smem_offset(r, k, kLayoutLbo, kLayoutSbo));
  EXPECT_EQ(seen.size(), 2048u);
  EXPECT_EQ(*seen.rbegin(), 2047);
  EXPECT_EQ(mma::smem_offset(7, 31, kLayoutLbo, kLayoutSbo), mma::kWgmmaBBytes - 1);
}

TEST(WgmmaLayout, DescriptorFields) {
  // Start address 0x1230 -> 0x123 in bits 0-13; LBO 128 -> 8 in bits 16-29; SBO 256 -> 16 in bits 32-45;
  // base offset and swizzle mode zero.
  const std::uint64_t d = mma::make_descriptor(0x1230u, 128, 256);
  EXPECT_EQ(d & 0x3FFFu, 0x123u);
  EXPECT_EQ((d >> 16) & 0x3FFFu, 8u);
  EXPECT_EQ((d >> 32) & 0x3FFFu, 16u);
  EXPECT_EQ(d >> 46, 0u);
  EXPECT_EQ(d, 0x0000001000080123ull);
  // Addresses are taken modulo 2^18 (14 bits of 16-byte units).
  EXPECT_EQ(mma::make_descriptor(0x40010u, 0, 0), 1u);
}

template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no exception";
}

TEST(MmaProbe, ShapesAndKinds) {
  EXPECT_EQ(mma::mma_sync_shape(mma::Kind::e4m3_e5m2).k, 32);
  EXPECT_EQ(mma::mma_sync_shape(mma::Kind::bf16).k, 16);
  EXPECT_EQ(mma::wgmma_shape(mma::Kind::e5m2_e5m2).m, 64);
  EXPECT_THROW(mma::wgmma_shape(mma::Kind::f16_f16acc), std::invalid_argument);
  EXPECT_STREQ(mma::kind_name(mma::Kind::f16_f16acc), "f16.f16acc");
  EXPECT_TRUE(mma::is_fp8(mma::Kind::e5m2_e4m3));
  EXPECT_FALSE(mma::is_fp8(mma::Kind::f16));
}

TEST(MmaProbe, ArgumentChecks) {
  const mma::Shape s{16, 8, 32};
  EXPECT_NO_THROW(mma::check_probe(s, 2, 3, 2 * 16 * 96, 2 * 96 * 8, 2 * 128));
  EXPECT_EQ(message_of([&] { mma::check_probe(s, 0, 1, 0, 0, 0); }), "probe: tiles must be positive, got 0");
  EXPECT_EQ(message_of([&] { mma::check_probe(s, 1, 9, 0, 0, 0); }), "probe: chain must be in 1..8, got 9");
  EXPECT_EQ(message_of([&] { mma::check_probe(s, 1, 1, 511, 256, 128); }),
            "probe: A holds 511 entries, expected 512");
  EXPECT_EQ(message_of([&] { mma::check_probe(s, 1, 1, 512, 256, 127); }),
            "probe: C holds 127 entries, expected 128");
  // The probes check before they touch the GPU.
  std::vector<std::uint16_t> a(10), b(10);
  std::vector<std::uint32_t> c(10);
  EXPECT_THROW(mma::run_mma_sync(mma::Kind::f16, 1, 1, a, b, c), std::invalid_argument);
  EXPECT_THROW(mma::run_wgmma(mma::Kind::f16, 1, 1, a, b, c), std::invalid_argument);
}

TEST(Nvfp4, WrapperRejectsBadInput) {
  const int tiles = 1, k = 32;
  std::vector<std::uint8_t> a(16 * k, 3), sa(16 * 2, 0x38), b(k * 8, 5), sb(2 * 8, 0x7E);
  std::vector<std::uint32_t> c(128, 0);
  EXPECT_NO_THROW(mma::check_nvfp4(tiles, k, a, sa, b, sb, c));
  EXPECT_EQ(message_of([&] { mma::check_nvfp4(tiles, 24, a, sa, b, sb, c); }),
            "nvfp4: K must be a positive multiple of 16 up to 128, got 24");
  a[17] = 0x10;
  EXPECT_EQ(message_of([&] { mma::check_nvfp4(tiles, k, a, sa, b, sb, c); }),
            "nvfp4: A[17] = 16 is not a 4-bit e2m1 code");
  a[17] = 0xF;
  sb[3] = 0x7F;
  EXPECT_EQ(message_of([&] { mma::check_nvfp4(tiles, k, a, sa, b, sb, c); }),
            "nvfp4: B scale[3] = 127 is the ue4m3 NaN: its product with an e2m1 value is no f16");
  sb[3] = 0x00;
  sa[0] = 0x80;
  EXPECT_EQ(message_of([&] { mma::check_nvfp4(tiles, k, a, sa, b, sb, c); }),
            "nvfp4: A scale[0] = 128 has bit 7 set (ue4m3 has 7 bits): its product with an e2m1 value is no f16");
  sa[0] = 0x38;
  sa.pop_back();
  EXPECT_EQ(message_of([&] { mma::check_nvfp4(tiles, k, a, sa, b, sb, c); }),
            "nvfp4: scales hold 31 and 16 entries, expected 32 and 16");
}

TEST(Nvfp4, NativeKernelAbsentByDefault) {
  if (mma::native_nvfp4_available()) GTEST_SKIP() << "built with LOWBIT_DEVICE_SM120";
  std::vector<std::uint8_t> a(16 * 64), sa(16 * 4, 0x38), b(64 * 8), sb(4 * 8, 0x38);
  std::vector<std::uint32_t> c(128);
  EXPECT_THROW(mma::run_nvfp4_native_sm120(1, 64, a, sa, b, sb, c, 0x3F800000u), lowbit::device::Error);
}

}  // namespace
