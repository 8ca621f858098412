// Sub-byte packing and the cuBLASLt block-scale layout; the conventions are stated in lowbit/pack.hpp.
#include "lowbit/pack.hpp"

#include <stdexcept>
#include <string>

namespace lowbit::pack {

namespace {

void check_width(std::span<const std::uint8_t> codes, int bits) {
  for (std::size_t i = 0; i < codes.size(); ++i)
    if (codes[i] >> bits) {
      std::string m("pack: code ");
      m += std::to_string(i);
      m += " (";
      m += std::to_string(codes[i]);
      m += ") does not fit in ";
      m += std::to_string(bits);
      m += " bits";
      throw std::invalid_argument(m);
    }
}

void check_size(std::size_t got, std::size_t want, const char* what) {
  if (got != want) {
    std::string m(what);
    m += ": ";
    m += std::to_string(got);
    m += " bytes, expected ";
    m += std::to_string(want);
    throw std::invalid_argument(m);
  }
}

}  // namespace

std::size_t packed_bytes(int bits, std::size_t count) {
  switch (bits) {
    case 4: return (count + 1) / 2;
    case 6: return (count + 3) / 4 * 3;
    case 8: return count;
    default: throw std::invalid_argument("pack: only 4-, 6- and 8-bit codes are packed, not " + std::to_string(bits));
  }
}

std::vector<std::uint8_t> pack_fp4(std::span<const std::uint8_t> codes) {
  check_width(codes, 4);
  std::vector<std::uint8_t> out(packed_bytes(4, codes.size()), 0);
  for (std::size_t i = 0; i < codes.size(); ++i)
    out[i / 2] |= static_cast<std::uint8_t>(codes[i] << (4 * (i % 2)));  // element 0 low nibble
  return out;
}

std::vector<std::uint8_t> unpack_fp4(std::span<const std::uint8_t> bytes, std::size_t count) {
  check_size(bytes.size(), packed_bytes(4, count), "unpack_fp4");
  std::vector<std::uint8_t> out(count);
  for (std::size_t i = 0; i < count; ++i) out[i] = (bytes[i / 2] >> (4 * (i % 2))) & 0xF;
  return out;
}

std::vector<std::uint8_t> pack_fp6(std::span<const std::uint8_t> codes) {
  check_width(codes, 6);
  std::vector<std::uint8_t> out(packed_bytes(6, codes.size()), 0);
  for (std::size_t g = 0; g * 4 < codes.size(); ++g) {
    std::uint32_t word = 0;  // the little-endian 24-bit group: code k in bits 6k..6k+5
    for (std::size_t k = 0; k < 4 && g * 4 + k < codes.size(); ++k)
      word |= static_cast<std::uint32_t>(codes[g * 4 + k]) << (6 * k);
    for (std::size_t b = 0; b < 3; ++b) out[g * 3 + b] = static_cast<std::uint8_t>(word >> (8 * b));
  }
  return out;
}

std::vector<std::uint8_t> unpack_fp6(std::span<const std::uint8_t> bytes, std::size_t count) {
  check_size(bytes.size(), packed_bytes(6, count), "unpack_fp6");
  std::vector<std::uint8_t> out(count);
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t g = i / 4, k = i % 4;
    const std::uint32_t word = static_cast<std::uint32_t>(bytes[g * 3]) |
                               static_cast<std::uint32_t>(bytes[g * 3 + 1]) << 8 |
                               static_cast<std::uint32_t>(bytes[g * 3 + 2]) << 16;
    out[i] = static_cast<std::uint8_t>((word >> (6 * k)) & 0x3F);
  }
  return out;
}

std::vector<std::uint8_t> pack_codes(int bits, std::span<const std::uint8_t> codes) {
  switch (bits) {
    case 4: return pack_fp4(codes);
    case 6: return pack_fp6(codes);
    case 8: return {codes.begin(), codes.end()};
    default: packed_bytes(bits, 0);  // throws
  }
  return {};
}

std::vector<std::uint8_t> unpack_codes(int bits, std::span<const std::uint8_t> bytes, std::size_t count) {
  switch (bits) {
    case 4: return unpack_fp4(bytes, count);
    case 6: return unpack_fp6(bytes, count);
    case 8: check_size(bytes.size(), count, "unpack_codes"); return {bytes.begin(), bytes.end()};
    default: packed_bytes(bits, 0);  // throws
  }
  return {};
}

std::vector<std::uint8_t> pack_rows(int bits, std::span<const std::uint8_t> codes, std::size_t rows, std::size_t cols) {
  check_size(codes.size(), rows * cols, "pack_rows");
  const std::size_t row_bytes = packed_bytes(bits, cols);
  std::vector<std::uint8_t> out;
  out.reserve(rows * row_bytes);
  for (std::size_t r = 0; r < rows; ++r) {
    const std::vector<std::uint8_t> p = pack_codes(bits, codes.subspan(r * cols, cols));
    out.insert(out.end(), p.begin(), p.end());
  }
  return out;
}

std::vector<std::uint8_t> unpack_rows(int bits, std::span<const std::uint8_t> bytes, std::size_t rows,
                                      std::size_t cols) {
  const std::size_t row_bytes = packed_bytes(bits, cols);
  check_size(bytes.size(), rows * row_bytes, "unpack_rows");
  std::vector<std::uint8_t> out;
  out.reserve(rows * cols);
  for (std::size_t r = 0; r < rows; ++r) {
    const std::vector<std::uint8_t> u = unpack_codes(bits, bytes.subspan(r * row_bytes, row_bytes), cols);
    out.insert(out.end(), u.begin(), u.end());
  }
  return out;
}

TiledShape cublaslt_shape(std::size_t rows, std::size_t cols) {
  TiledShape s;
  s.rows = rows;
  s.cols = cols;
  s.padded_rows = (rows + 127) / 128 * 128;
  s.padded_cols = (cols + 3) / 4 * 4;
  return s;
}

std::vector<std::uint8_t> swizzle_cublaslt(std::span<const std::uint8_t> row_major, std::size_t rows,
                                           std::size_t cols) {
  check_size(row_major.size(), rows * cols, "swizzle_cublaslt");
  const TiledShape s = cublaslt_shape(rows, cols);
  std::vector<std::uint8_t> out(s.bytes(), 0);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) out[cublaslt_offset(r, c, s.col_blocks())] = row_major[r * cols + c];
  return out;
}

std::vector<std::uint8_t> unswizzle_cublaslt(std::span<const std::uint8_t> tiled, std::size_t rows, std::size_t cols) {
  const TiledShape s = cublaslt_shape(rows, cols);
  check_size(tiled.size(), s.bytes(), "unswizzle_cublaslt");
  std::vector<std::uint8_t> out(rows * cols);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) out[r * cols + c] = tiled[cublaslt_offset(r, c, s.col_blocks())];
  return out;
}

}  // namespace lowbit::pack
