#include "lowbit/quantized.hpp"

#include <bit>
#include <string>

#include "lowbit/convert.hpp"
#include "lowbit/error.hpp"
#include "lowbit/pack.hpp"

namespace lowbit::quantized {

namespace S = scale;

Packing packing_for(const Format& element) {
  if (element.bits == 4) return Packing::fp4x2;
  if (element.bits == 6) return Packing::fp6x4;
  throw ArgumentError("pack", std::string("packs 4- and 6-bit elements (e2m1, e2m3, e3m2), not ") + element.name);
}

int packing_bits(Packing p) { return p == Packing::fp4x2 ? 4 : p == Packing::fp6x4 ? 6 : 8; }

void check_layout(const S::Quantized& q, ScaleLayout layout) {
  if (layout == ScaleLayout::row_major) return;
  // cuBLASLt's 1D block scaling factors layout holds 8-bit scales (VEC16_UE4M3, VEC32_UE8M0), one row
  // per tensor row.
  if (q.scale_format->bits != 8 || q.block_rows != 1)
    throw ArgumentError("scale_layout",
                        std::string("the cublaslt layout holds 8-bit scales of 1-D blocks (mx, nvfp4, nvfp4-1level), "
                                    "not ") +
                            q.scale_format->name + " scales of " + std::to_string(q.block_rows) + "x" +
                            std::to_string(q.block_cols) + " blocks");
}

std::vector<std::uint8_t> store_codes(const S::Quantized& q, Packing p) {
  if (p == Packing::none) return q.codes;
  return pack::pack_rows(packing_bits(p), q.codes, static_cast<std::size_t>(q.rows), static_cast<std::size_t>(q.cols));
}

io::Tensor store_scales(const S::Quantized& q, ScaleLayout layout) {
  const auto sr = static_cast<std::uint64_t>(q.scale_rows()), sc = static_cast<std::uint64_t>(q.scale_cols());
  if (q.scale_format->bits == 32) {
    // f32 decode scales as numpy's float32 ('<f4'): the same four bytes, read back as values.
    std::vector<std::uint32_t> w(q.scales.begin(), q.scales.end());
    return io::Tensor::from_values<std::uint32_t>(io::DType::f32, {sr, sc}, w);
  }
  std::vector<std::uint8_t> b(q.scales.begin(), q.scales.end());
  if (layout == ScaleLayout::row_major) return io::Tensor::from_values<std::uint8_t>(io::DType::u8, {sr, sc}, b);
  b = pack::swizzle_cublaslt(b, sr, sc);
  return io::Tensor::from_values<std::uint8_t>(io::DType::u8, {b.size()}, b);
}

std::vector<std::uint64_t> load_scales(const std::vector<std::uint64_t>& stored, const S::Quantized& shape,
                                       ScaleLayout layout) {
  if (layout == ScaleLayout::row_major) return stored;
  std::vector<std::uint8_t> b(stored.begin(), stored.end());
  b = pack::unswizzle_cublaslt(b, static_cast<std::size_t>(shape.scale_rows()),
                               static_cast<std::size_t>(shape.scale_cols()));
  return {b.begin(), b.end()};
}

std::optional<std::pair<int, int>> matrix_dims(const std::vector<std::uint64_t>& shape) {
  const auto n = io::element_count(shape);
  if (!n) return std::nullopt;
  const std::uint64_t cols = shape.empty() ? 1 : shape.back();
  const std::uint64_t rows = cols == 0 ? 0 : *n / cols;
  constexpr std::uint64_t limit = 0x7FFFFFFF;
  if (rows > limit || cols > limit || *n > limit) return std::nullopt;
  return std::pair<int, int>{static_cast<int>(rows), static_cast<int>(cols)};
}

std::vector<std::uint64_t> packed_shape(const std::vector<std::uint64_t>& shape, Packing p) {
  if (p == Packing::none) return shape;
  std::vector<std::uint64_t> s = shape.empty() ? std::vector<std::uint64_t>{1} : shape;
  s.back() = pack::packed_bytes(packing_bits(p), s.back());
  return s;
}

std::optional<std::vector<float>> float_values(const io::Tensor& t) {
  std::vector<float> v;
  if (t.dtype == io::DType::f32) return t.values<float>();
  if (t.dtype != io::DType::bf16 && t.dtype != io::DType::f16) return std::nullopt;
  const Format& f = t.dtype == io::DType::bf16 ? formats::bf16 : formats::f16;
  for (std::uint16_t b : t.values<std::uint16_t>())
    v.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(convert(f, b, formats::f32, Policy{}).code)));
  return v;
}

}  // namespace lowbit::quantized
