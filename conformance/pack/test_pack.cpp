// Packing and scale layouts (lowbit/pack.hpp).  Every expected byte and offset below is worked by hand
// from the conventions of docs/semantics.md §4 "Packing and layouts":
//   FP4: element 0 in the low nibble; FP6: code i in bits 6i..6i+5 of a little-endian 24-bit group;
//   cuBLASLt tiles: tile = row_block * n_col_blocks + col_block, 512 bytes each, offset inside a tile
//   (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <stdexcept>
#include <vector>

#include "lowbit/pack.hpp"

namespace {

using Bytes = std::vector<std::uint8_t>;
using namespace lowbit::pack;

TEST(Fp4, ElementZeroInTheLowNibble) {
  // codes 1, 2 -> byte 0x21 (1 low, 2 high); 3, 0xF -> 0xF3.
  EXPECT_EQ(pack_fp4(Bytes{0x1, 0x2, 0x3, 0xF}), (Bytes{0x21, 0xF3}));
  // e2m1 +6 (0x7) and -0.5 (0x9): 0x97.
  EXPECT_EQ(pack_fp4(Bytes{0x7, 0x9}), (Bytes{0x97}));
}

TEST(Fp4, OddCountPadsAZeroHighNibble) {
  EXPECT_EQ(pack_fp4(Bytes{0x1, 0x2, 0x3, 0xF, 0x7}), (Bytes{0x21, 0xF3, 0x07}));
  EXPECT_EQ(pack_fp4(Bytes{0xA}), (Bytes{0x0A}));
  EXPECT_TRUE(pack_fp4(Bytes{}).empty());
  EXPECT_EQ(unpack_fp4(Bytes{0x21, 0xF3, 0x07}, 5), (Bytes{0x1, 0x2, 0x3, 0xF, 0x7}));
}

TEST(Fp4, RejectsWideCodesAndWrongSizes) {
  EXPECT_THROW(pack_fp4(Bytes{0x1, 0x10}), std::invalid_argument);
  EXPECT_THROW(unpack_fp4(Bytes{0x21}, 3), std::invalid_argument);     // 3 codes need 2 bytes
  EXPECT_THROW(unpack_fp4(Bytes{0x21, 0}, 2), std::invalid_argument);  // 2 codes need 1 byte
}

TEST(Fp6, FourCodesInThreeLittleEndianBytes) {
  // 1 | 2 << 6 | 3 << 12 | 4 << 18 = 0x000001 + 0x000080 + 0x003000 + 0x100000 = 0x103081.
  EXPECT_EQ(pack_fp6(Bytes{1, 2, 3, 4}), (Bytes{0x81, 0x30, 0x10}));
  // b0 = 0x21 | (0x33 << 6 & 0xFF) = 0xE1; b1 = 0x33 >> 2 | (0x2A << 4 & 0xFF) = 0x0C | 0xA0 = 0xAC;
  // b2 = 0x2A >> 4 | 0x3F << 2 = 0x02 | 0xFC = 0xFE.
  EXPECT_EQ(pack_fp6(Bytes{0x21, 0x33, 0x2A, 0x3F}), (Bytes{0xE1, 0xAC, 0xFE}));
  // Code 3 alone at all ones: bits 18..23 -> b2 = 0xFC.
  EXPECT_EQ(pack_fp6(Bytes{0, 0, 0, 0x3F}), (Bytes{0x00, 0x00, 0xFC}));
}

TEST(Fp6, PartialGroupsPadWithZeroCodes) {
  EXPECT_EQ(pack_fp6(Bytes{0x3F}), (Bytes{0x3F, 0x00, 0x00}));
  EXPECT_EQ(pack_fp6(Bytes{0x3F, 0x3F, 0x3F, 0x3F, 0x01}), (Bytes{0xFF, 0xFF, 0xFF, 0x01, 0x00, 0x00}));
  // 0x3F, 0x3F: bits 0..11 set -> 0xFF, 0x0F, 0x00.
  EXPECT_EQ(pack_fp6(Bytes{0x3F, 0x3F}), (Bytes{0xFF, 0x0F, 0x00}));
  EXPECT_EQ(unpack_fp6(Bytes{0xFF, 0x0F, 0x00}, 2), (Bytes{0x3F, 0x3F}));
  EXPECT_EQ(packed_bytes(6, 5), 6u);
  EXPECT_EQ(packed_bytes(6, 8), 6u);
  EXPECT_EQ(packed_bytes(4, 5), 3u);
  EXPECT_EQ(packed_bytes(8, 5), 5u);
  EXPECT_THROW(packed_bytes(5, 5), std::invalid_argument);
  EXPECT_THROW(pack_fp6(Bytes{0x40}), std::invalid_argument);
  EXPECT_THROW(unpack_fp6(Bytes{0, 0}, 1), std::invalid_argument);
}

TEST(Packing, RoundTripsEveryCountUpTo67) {
  std::mt19937 rng(7);
  for (int bits : {4, 6, 8})
    for (std::size_t n = 0; n <= 67; ++n) {
      Bytes codes(n);
      for (auto& c : codes) c = static_cast<std::uint8_t>(rng() & ((1u << bits) - 1));
      const Bytes p = pack_codes(bits, codes);
      ASSERT_EQ(p.size(), packed_bytes(bits, n));
      EXPECT_EQ(unpack_codes(bits, p, n), codes) << bits << " bits, " << n << " codes";
    }
}

TEST(Packing, RowsArePaddedIndependently) {
  // 2 rows of 3 FP4 codes: each row takes 2 bytes, the second byte's high nibble zero.
  const Bytes codes{0x1, 0x2, 0x3, 0x4, 0x5, 0x6};
  EXPECT_EQ(pack_rows(4, codes, 2, 3), (Bytes{0x21, 0x03, 0x54, 0x06}));
  EXPECT_EQ(unpack_rows(4, Bytes{0x21, 0x03, 0x54, 0x06}, 2, 3), codes);
  // 2 rows of 5 FP6 codes: 6 bytes each.
  const Bytes six{1, 2, 3, 4, 5, 0x3F, 0x3F, 0x3F, 0x3F, 0x3F};
  const Bytes packed = pack_rows(6, six, 2, 5);
  EXPECT_EQ(packed, (Bytes{0x81, 0x30, 0x10, 0x05, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0x3F, 0x00, 0x00}));
  EXPECT_EQ(unpack_rows(6, packed, 2, 5), six);
  EXPECT_THROW(pack_rows(4, codes, 2, 4), std::invalid_argument);
}

TEST(CublasLtLayout, HandWorkedOffsets) {
  // One column block (cols <= 4): tile 0 for rows 0..127.
  EXPECT_EQ(cublaslt_offset(0, 0, 1), 0u);
  EXPECT_EQ(cublaslt_offset(0, 3, 1), 3u);
  EXPECT_EQ(cublaslt_offset(1, 0, 1), 16u);     // (1 % 32) * 16
  EXPECT_EQ(cublaslt_offset(31, 0, 1), 496u);   // 31 * 16
  EXPECT_EQ(cublaslt_offset(32, 0, 1), 4u);     // (32 / 32) * 4
  EXPECT_EQ(cublaslt_offset(33, 1, 1), 21u);    // 16 + 4 + 1
  EXPECT_EQ(cublaslt_offset(100, 2, 1), 78u);   // (100 % 32 = 4) * 16 + (100 / 32 = 3) * 4 + 2
  EXPECT_EQ(cublaslt_offset(127, 3, 1), 511u);  // 31 * 16 + 3 * 4 + 3, the last byte of the tile
  // Two column blocks: tile = row_block * 2 + col_block.
  EXPECT_EQ(cublaslt_offset(0, 4, 2), 512u);     // tile 1
  EXPECT_EQ(cublaslt_offset(128, 0, 2), 1024u);  // tile 2
  EXPECT_EQ(cublaslt_offset(130, 5, 2), 1569u);  // tile 3: 1536 + 2 * 16 + 0 * 4 + 1
  EXPECT_EQ(cublaslt_offset(255, 7, 2), 2047u);  // tile 3's last byte
}

TEST(CublasLtLayout, PaddedShape) {
  const TiledShape s = cublaslt_shape(2, 3);
  EXPECT_EQ(s.padded_rows, 128u);
  EXPECT_EQ(s.padded_cols, 4u);
  EXPECT_EQ(s.bytes(), 512u);
  const TiledShape t = cublaslt_shape(129, 5);
  EXPECT_EQ(t.padded_rows, 256u);
  EXPECT_EQ(t.padded_cols, 8u);
  EXPECT_EQ(t.row_blocks(), 2u);
  EXPECT_EQ(t.col_blocks(), 2u);
  EXPECT_EQ(t.bytes(), 2048u);
  EXPECT_EQ(cublaslt_shape(128, 4).bytes(), 512u);
  EXPECT_EQ(cublaslt_shape(0, 0).bytes(), 0u);
}

TEST(CublasLtLayout, SmallMatrixBytes) {
  // 2 x 3 scales 1..6: row 0 at bytes 0..2, row 1 at bytes 16..18, every other byte of the 512 zero.
  const Bytes tiled = swizzle_cublaslt(Bytes{1, 2, 3, 4, 5, 6}, 2, 3);
  ASSERT_EQ(tiled.size(), 512u);
  Bytes expected(512, 0);
  expected[0] = 1;
  expected[1] = 2;
  expected[2] = 3;
  expected[16] = 4;
  expected[17] = 5;
  expected[18] = 6;
  EXPECT_EQ(tiled, expected);
  EXPECT_EQ(unswizzle_cublaslt(tiled, 2, 3), (Bytes{1, 2, 3, 4, 5, 6}));
}

TEST(CublasLtLayout, BijectionOnFullTiles) {
  // 256 x 8: every offset in 0..2047 is hit exactly once.
  std::set<std::size_t> seen;
  for (std::size_t r = 0; r < 256; ++r)
    for (std::size_t c = 0; c < 8; ++c) seen.insert(cublaslt_offset(r, c, 2));
  EXPECT_EQ(seen.size(), 2048u);
  EXPECT_EQ(*seen.rbegin(), 2047u);
}

TEST(CublasLtLayout, RoundTripsOddSizes) {
  std::mt19937 rng(11);
  for (std::size_t rows : {1u, 5u, 31u, 33u, 127u, 128u, 129u, 300u})
    for (std::size_t cols : {1u, 2u, 3u, 4u, 5u, 9u}) {
      Bytes m(rows * cols);
      for (auto& v : m) v = static_cast<std::uint8_t>(1 + rng() % 255);  // non-zero, so padding shows
      const Bytes t = swizzle_cublaslt(m, rows, cols);
      ASSERT_EQ(t.size(), cublaslt_shape(rows, cols).bytes());
      EXPECT_EQ(unswizzle_cublaslt(t, rows, cols), m) << rows << "x" << cols;
      // Exactly rows * cols bytes are non-zero: the padding is zero.
      EXPECT_EQ(static_cast<std::size_t>(std::count_if(t.begin(), t.end(), [](std::uint8_t b) { return b != 0; })),
                rows * cols);
    }
}

TEST(CublasLtLayout, RejectsWrongSizes) {
  EXPECT_THROW(swizzle_cublaslt(Bytes{1, 2, 3}, 2, 2), std::invalid_argument);
  EXPECT_THROW(unswizzle_cublaslt(Bytes(511, 0), 2, 3), std::invalid_argument);
}

}  // namespace
