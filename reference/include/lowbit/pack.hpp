// lowbit/pack.hpp — sub-byte packing of element codes and the block-scale layouts.
//
// Packing (docs/semantics.md §4 "Packing and layouts"):
//  * FP4 (e2m1): two codes per byte, element 0 in the low nibble (bits 3:0), element 1 in the high
//    nibble (bits 7:4) — the order of Transformer Engine, PyTorch's float4_e2m1fn_x2 and cuBLASLt.
//    (PTX `cvt.rn.satfinite.e2m1x2.f32 d, a, b` puts `a` in the high nibble, so callers pass (x1, x0).)
//    An odd count is padded with a zero nibble in the high half of the last byte.
//  * FP6 (e2m3, e3m2): four codes in three bytes, as one little-endian bit stream: code i occupies
//    bits 6i .. 6i+5 of the 24-bit little-endian word b0 | b1 << 8 | b2 << 16, so
//        b0 = c0 | c1 << 6,   b1 = c1 >> 2 | c2 << 4,   b2 = c2 >> 4 | c3 << 2
//    (the order of CUTLASS's sub-byte arrays).  A count that is not a multiple of four is padded
//    with zero codes to a whole group of three bytes.  torchao's mx_formats `pack_uint6` uses another
//    order (the high four bits of c0 and c1 in the first byte, the low two bits of all four codes in
//    the third); its bytes are not interchangeable with these.
//  * Rows of a 2-D tensor are packed independently (each row padded to whole bytes), so a packed
//    row of C codes takes packed_bytes(bits, C) bytes.
//
// Scale layouts: row-major, or the cuBLASLt "1D block scaling factors layout" used by
// CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3 (NVFP4) and VEC32_UE8M0 (MX): the scale matrix (one row per
// tensor row, one column per block along it) is padded to a multiple of 128 rows and 4 columns and cut
// into 128x4 tiles of 512 bytes; tiles are stored in the order tile = row_block * n_col_blocks +
// col_block, and inside a tile the scale of (r, c) sits at (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4.
// Padding bytes are zero.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace lowbit::pack {

// Bytes that `count` codes of `bits` bits take when packed (bits 4: ceil(count / 2); bits 6:
// 3 * ceil(count / 4); bits 8: count).  std::invalid_argument for other widths.
std::size_t packed_bytes(int bits, std::size_t count);

// FP4: two codes per byte, element 0 in the low nibble.  Codes must fit in 4 bits
// (std::invalid_argument names the first that does not).
std::vector<std::uint8_t> pack_fp4(std::span<const std::uint8_t> codes);
// The first `count` codes of packed FP4 bytes; std::invalid_argument when `bytes` is not
// packed_bytes(4, count) long.
std::vector<std::uint8_t> unpack_fp4(std::span<const std::uint8_t> bytes, std::size_t count);

// FP6: four codes in three bytes, code i in bits 6i..6i+5 of the little-endian 24-bit group.
std::vector<std::uint8_t> pack_fp6(std::span<const std::uint8_t> codes);
std::vector<std::uint8_t> unpack_fp6(std::span<const std::uint8_t> bytes, std::size_t count);

// Dispatch on the element width (4, 6 or 8; 8 copies).
std::vector<std::uint8_t> pack_codes(int bits, std::span<const std::uint8_t> codes);
std::vector<std::uint8_t> unpack_codes(int bits, std::span<const std::uint8_t> bytes, std::size_t count);

// A rows x cols matrix of codes packed row by row (each row padded to whole bytes): rows *
// packed_bytes(bits, cols) bytes.
std::vector<std::uint8_t> pack_rows(int bits, std::span<const std::uint8_t> codes, std::size_t rows, std::size_t cols);
std::vector<std::uint8_t> unpack_rows(int bits, std::span<const std::uint8_t> bytes, std::size_t rows,
                                      std::size_t cols);

// ---- cuBLASLt 128x4-tiled block-scale layout -----------------------------------------------------

struct TiledShape {
  std::size_t rows = 0, cols = 0;                // the logical scale matrix
  std::size_t padded_rows = 0, padded_cols = 0;  // rows rounded up to 128, cols to 4
  std::size_t row_blocks() const { return padded_rows / 128; }
  std::size_t col_blocks() const { return padded_cols / 4; }
  std::size_t bytes() const { return padded_rows * padded_cols; }
};
TiledShape cublaslt_shape(std::size_t rows, std::size_t cols);

// Byte offset of scale (r, c) in the tiled layout of a scale matrix with `col_blocks` 4-column blocks.
constexpr std::size_t cublaslt_offset(std::size_t r, std::size_t c, std::size_t col_blocks) {
  const std::size_t tile = (r / 128) * col_blocks + c / 4;
  return tile * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4;
}

// Row-major rows x cols scales -> the tiled layout (padding zero).  std::invalid_argument when the
// input is not rows * cols bytes.
std::vector<std::uint8_t> swizzle_cublaslt(std::span<const std::uint8_t> row_major, std::size_t rows, std::size_t cols);
// The tiled layout -> row-major rows x cols scales (padding ignored).  std::invalid_argument when the
// input is not cublaslt_shape(rows, cols).bytes() long.
std::vector<std::uint8_t> unswizzle_cublaslt(std::span<const std::uint8_t> tiled, std::size_t rows, std::size_t cols);

}  // namespace lowbit::pack
