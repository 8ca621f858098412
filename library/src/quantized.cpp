#include "lowbit/quantized.hpp"

#include <bit>
#include <string>

#include "lowbit/convert.hpp"
#include "lowbit/error.hpp"
#include "lowbit/pack.hpp"
#include "lowbit/text.hpp"

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

namespace {

bool integer_dtype(io::DType d) {
  switch (d) {
    case io::DType::boolean:
    case io::DType::u8:
    case io::DType::i8:
    case io::DType::u16:
    case io::DType::i16:
    case io::DType::u32:
    case io::DType::i32:
    case io::DType::u64:
    case io::DType::i64: return true;
    default: return false;
  }
}

[[noreturn]] void refuse(const io::NpyArray& a, const std::string& why) {
  throw ArgumentError("in_format", "'" + a.path + "' (key \"descr\") holds '" + a.descr + "': " + why);
}

// Every code widened exactly into f32 (convert's default policy: a NaN code stays a NaN of its sign).
std::vector<float> widen(const Format& f, const std::vector<std::uint64_t>& codes) {
  std::vector<float> v;
  v.reserve(codes.size());
  for (std::uint64_t c : codes)
    v.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(convert(f, c, formats::f32, Policy{}).code)));
  return v;
}

std::vector<std::uint64_t> codes_of(const io::NpyArray& a) {
  std::vector<std::uint64_t> c(a.elements());
  const std::size_t w = io::dtype_bits(a.dtype) / 8;
  for (std::size_t i = 0; i < c.size(); ++i)
    for (std::size_t b = 0; b < w; ++b) c[i] |= std::uint64_t{a.bytes[i * w + b]} << (8 * b);
  return c;
}

}  // namespace

Source read_source_npy(const std::string& path, const Format* named) {
  const io::NpyArray a = io::read_npy(path, io::NpyRead{.untyped_codes = true});
  Source s{a.shape, {}, named, 0};
  const bool codes = a.untyped || integer_dtype(a.dtype);
  if (named && (named->mantissa_bits > 23 || named->storage_bits() > 32))
    throw ArgumentError("in_format", std::string(named->name) +
                                         " is wider than f32, the precision sources are quantized from (a float64 "
                                         "array is read without a named format, rounded once into f32)");
  if (a.dtype == io::DType::f64) {
    const Format& into = named ? *named : formats::f32;
    if (&into != &formats::f32 && &into != &formats::bf16 && &into != &formats::f16)
      refuse(a, std::string("a float64 array is rounded once into f32, bf16 or f16, not into ") + into.name +
                    " (quantize it into " + into.name + " instead)");
    s.format = &into;
    std::vector<std::uint64_t> out;
    out.reserve(a.elements());
    for (std::uint64_t bits : a.values<std::uint64_t>()) {
      const Result r = convert(formats::f64, bits, into, Policy{});
      if (r.ternary != 0) ++s.rounded;
      out.push_back(r.code);
    }
    s.values = widen(into, out);
    return s;
  }
  if (!codes) {
    const bool is_f32 = a.dtype == io::DType::f32, is_f16 = a.dtype == io::DType::f16;
    if (!is_f32 && !is_f16) refuse(a, "not an array of values or codes");
    if (!named || named == &formats::f32 || (named == &formats::f16 && is_f16)) {
      s.format = is_f32 ? &formats::f32 : &formats::f16;
      s.values = *float_values(a);
      return s;
    }
    refuse(a, std::string(is_f32 ? "float32" : "float16") + " values, not " + named->name +
                  (named == &formats::bf16 ? " bit patterns (uint16, or ml_dtypes' bfloat16)" : " codes") +
                  (is_f32 ? "; read them as f32" : "; read them as f16 or f32"));
  }
  const unsigned width = io::dtype_bits(a.dtype);
  if (!named) {
    std::string why = a.untyped ? "an ml_dtypes array, whose format the file does not name"
                                : "integers: codes of a format the file does not name";
    why += width == 16 ? "; name it (bf16 for ml_dtypes' bfloat16 or uint16 bit patterns)"
                       : "; name it (e4m3, e5m2, e2m1, ... for ml_dtypes' float8, float4 and float6 types)";
    refuse(a, why);
  }
  const unsigned storage = static_cast<unsigned>(named->storage_bits() + 7) / 8 * 8;  // a 4-bit code takes a byte
  if (width != storage || a.dtype == io::DType::boolean || (a.untyped && storage > 16))
    refuse(a, std::to_string(width / 8) + "-byte elements, not " + named->name + " codes (" +
                  std::to_string(storage / 8) + " byte" + (storage > 8 ? "s" : "") + " each)");
  std::vector<std::uint64_t> c = codes_of(a);
  for (std::size_t i = 0; i < c.size(); ++i)
    if (named->bits < 64 && (c[i] >> named->bits) != 0)
      throw ArgumentError("in_format", "'" + a.path + "': element " + std::to_string(i) + " is " +
                                           hex(c[i], 2 * static_cast<int>(width / 8)) + ", not a " +
                                           std::to_string(named->bits) + "-bit " + named->name + " code");
  s.values = widen(*named, c);
  return s;
}

}  // namespace lowbit::quantized
