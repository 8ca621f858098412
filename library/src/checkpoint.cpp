#include "lowbit/checkpoint.hpp"

#include <algorithm>
#include <string>

#include "lowbit/error.hpp"
#include "lowbit/names.hpp"
#include "lowbit/pack.hpp"
#include "lowbit/quantized.hpp"
#include "lowbit/recipe.hpp"
#include "lowbit/scale.hpp"
#include "lowbit/text.hpp"

namespace lowbit::checkpoint {

// The exact value of a code, or a note when the stored byte is not a code of the format.
// Long decimals (tiny e8m0 scales) as the power of two s*2^e that such a value is.
std::string value_text(const Format& f, std::uint64_t code) {
  if (!f.valid_code(code)) return "not a " + std::string(f.name) + " code";
  return short_value(f, code, 24);
}

namespace {

namespace S = scale;
using quantized::Packing;
using quantized::ScaleLayout;
using namespace quantized;

io::FileError key_error(const std::string& path, const std::string& key, const std::string& why) {
  return io::FileError(path, "key \"" + key + "\"", why);
}

// The stored codes of W.data, one byte per element (row-major), checked against W's shape.
std::vector<std::uint8_t> actual_codes(const io::Safetensors& b, const std::string& key, const S::Quantized& q,
                                       const std::vector<std::uint64_t>& shape, Packing packing) {
  const io::Tensor& t = b.tensor(key);
  const Format& el = *q.element;
  const bool byte_dtype = t.dtype == io::DType::u8 || (t.dtype == io::DType::i8 && el.bits == 8) ||
                          (t.dtype == io::DType::f8_e4m3 && el.name == std::string("e4m3")) ||
                          (t.dtype == io::DType::f8_e5m2 && el.name == std::string("e5m2"));
  if (!byte_dtype || (packing != Packing::none && t.dtype != io::DType::u8))
    throw key_error(b.path, key,
                    "dtype " + std::string(io::dtype_name(t.dtype)) + " does not hold " +
                        (packing == Packing::none ? std::string("one ") + el.name + " code per byte (U8)"
                                                  : std::string(name(packing)) + "-packed codes (U8)"));
  const std::vector<std::uint64_t> want = packed_shape(shape, packing);
  if (t.shape != want)
    throw key_error(b.path, key,
                    "shape " + shape_text(t.shape) + ", but the source tensor's shape " + shape_text(shape) +
                        (packing == Packing::none ? "" : std::string(" packed ") + name(packing)) + " needs " +
                        shape_text(want));
  return pack::unpack_rows(packing_bits(packing), t.bytes, static_cast<std::size_t>(q.rows),
                           static_cast<std::size_t>(q.cols));
}

// The stored scales of W.block_scales in block order; `padding` receives the non-zero padding bytes of
// a tiled layout (count and first offset).
std::vector<std::uint64_t> actual_scales(const io::Safetensors& b, const std::string& key, const S::Quantized& q,
                                         ScaleLayout layout, std::vector<std::string>& notes) {
  const io::Tensor& t = b.tensor(key);
  const bool wide = q.scale_format->bits == 32;
  const bool ok = wide ? (t.dtype == io::DType::f32 || t.dtype == io::DType::u32)
                       : (t.dtype == io::DType::u8 ||
                          (t.dtype == io::DType::f8_e8m0 && q.scale_format->name == std::string("e8m0")) ||
                          (t.dtype == io::DType::f8_e4m3 && q.scale_format->name == std::string("e4m3")));
  if (!ok)
    throw key_error(b.path, key,
                    "dtype " + std::string(io::dtype_name(t.dtype)) + " does not hold " + q.scale_format->name +
                        " scales (" + (wide ? "F32 or U32" : "U8 or the F8 dtype of the scale format") + ")");
  const auto sr = static_cast<std::size_t>(q.scale_rows()), sc = static_cast<std::size_t>(q.scale_cols());
  const std::size_t want = layout == ScaleLayout::cublaslt ? pack::cublaslt_shape(sr, sc).bytes() : sr * sc;
  if (t.elements() != want)
    throw key_error(b.path, key,
                    "shape " + shape_text(t.shape) + " holds " + std::to_string(t.elements()) + " scales; the " +
                        name(layout) + " scales of " + std::to_string(sr) + "x" + std::to_string(sc) + " blocks take " +
                        std::to_string(want));
  std::vector<std::uint64_t> stored;
  if (wide) {
    for (std::uint32_t w : t.values<std::uint32_t>()) stored.push_back(w);
  } else {
    for (std::uint8_t v : t.values<std::uint8_t>()) stored.push_back(v);
  }
  if (layout == ScaleLayout::cublaslt) {
    // Padding bytes (rows past the last, columns past the last block) must be zero.
    const pack::TiledShape s = pack::cublaslt_shape(sr, sc);
    std::vector<bool> used(s.bytes(), false);
    for (std::size_t r = 0; r < sr; ++r)
      for (std::size_t c = 0; c < sc; ++c) used[pack::cublaslt_offset(r, c, s.col_blocks())] = true;
    std::size_t count = 0, first = 0;
    for (std::size_t i = 0; i < stored.size(); ++i)
      if (!used[i] && stored[i] != 0 && count++ == 0) first = i;
    if (count)
      notes.push_back("scale padding: " + std::to_string(count) +
                      " non-zero byte(s) in the cublaslt layout, first at " + "offset " + std::to_string(first) + " (" +
                      hex(stored[first], 2) + ")");
  }
  return load_scales(stored, q, layout);
}

}  // namespace

void compare_blocks(const S::Quantized& q, const std::vector<std::uint8_t>& codes,
                    const std::vector<std::uint64_t>& scales, TensorReport& rep) {
  const int sr = q.scale_rows(), sc = q.scale_cols();
  rep.blocks = static_cast<std::size_t>(sr) * static_cast<std::size_t>(sc);
  for (int br = 0; br < sr; ++br)
    for (int bc = 0; bc < sc; ++bc) {
      BlockDiff d;
      d.block = static_cast<std::size_t>(br) * static_cast<std::size_t>(sc) + static_cast<std::size_t>(bc);
      d.r0 = br * q.block_rows;
      d.r1 = std::min(q.rows, d.r0 + q.block_rows) - 1;
      d.c0 = bc * q.block_cols;
      d.c1 = std::min(q.cols, d.c0 + q.block_cols) - 1;
      d.scale_expected = q.scales[d.block];
      d.scale_actual = scales[d.block];
      d.scale_differs = d.scale_expected != d.scale_actual;
      for (int r = d.r0; r <= d.r1; ++r)
        for (int c = d.c0; c <= d.c1; ++c) {
          const std::size_t i =
              static_cast<std::size_t>(r) * static_cast<std::size_t>(q.cols) + static_cast<std::size_t>(c);
          if (q.codes[i] != codes[i] && d.codes_differ++ == 0) d.first = {r, c, q.codes[i], codes[i]};
        }
      if (d.scale_differs || d.codes_differ) rep.diffs.push_back(d);
    }
}

TensorReport verify_tensor(const io::Safetensors& a, const io::Safetensors& b, const std::string& w) {
  TensorReport rep;
  rep.name = w;
  const std::string prefix = w + ".";
  auto get = [&](const std::string& key) { return b.meta(prefix + key); };
  Recipe o;
  S::Options so;
  try {
    o = recipe_from_keys(get);
    so = build(o).options;
  } catch (const ArgumentError& e) { throw key_error(b.path, prefix + recipe_key(e.argument), e.what()); }
  if (so.scheme == S::Scheme::delayed)
    throw key_error(b.path, prefix + "quantization_format",
                    "delayed scaling cannot be re-computed from the tensor alone");
  if (is_stochastic(so.element_policy.rounding))
    throw key_error(b.path, prefix + "rounding", "a stochastic rounding cannot be re-computed without its random bits");
  const auto layout = parse<ScaleLayout>(get("layout").value_or("row-major"));
  if (!layout) throw key_error(b.path, prefix + "layout", "'" + *get("layout") + "' is not row-major or cublaslt");
  const auto packing = parse<Packing>(get("packing").value_or("none"));
  if (!packing) throw key_error(b.path, prefix + "packing", "'" + *get("packing") + "' is not none, fp4x2 or fp6x4");
  if (*packing != Packing::none && packing_bits(*packing) != so.element->bits)
    throw key_error(b.path, prefix + "packing",
                    std::string(name(*packing)) + " does not hold " + so.element->name + " codes");
  if (so.element->bits > 8)
    throw key_error(b.path, prefix + "element", std::string(so.element->name) + " codes do not fit in a byte");

  // The source tensor.
  const io::Tensor& src = a.tensor(w);
  const auto values = float_values(src);
  if (!values)
    throw key_error(a.path, w, "dtype " + std::string(io::dtype_name(src.dtype)) + " is not F32, BF16 or F16");
  const auto dims = matrix_dims(src.shape);
  if (!dims || dims->first < 1 || dims->second < 1)
    throw key_error(a.path, w, "shape " + shape_text(src.shape) + " cannot be quantized");
  const S::Quantized q = S::quantize(S::Tensor{dims->first, dims->second, *values}, so);
  if (o.block > 0) {
    const int br = o.block_rows > 0 ? o.block_rows : 1;
    if (br != q.block_rows || o.block != q.block_cols)
      throw key_error(b.path, prefix + "block_size",
                      "'" + *get("block_size") + "' does not match the " + o.scheme + " scheme's " +
                          std::to_string(q.block_rows) + "x" + std::to_string(q.block_cols) + " blocks");
  }
  try {
    quantized::check_layout(q, *layout);
  } catch (const ArgumentError& e) { throw key_error(b.path, prefix + "layout", e.what()); }
  rep.element = q.element;
  rep.scale_format = q.scale_format;
  rep.recipe = o.scheme + " " + q.element->name + ", block " + std::to_string(q.block_rows) + "x" +
               std::to_string(q.block_cols) + ", layout " + name(*layout) + ", packing " + name(*packing);

  // The stored form.
  const std::vector<std::uint8_t> codes = actual_codes(b, prefix + "data", q, src.shape, *packing);
  const std::vector<std::uint64_t> scales = actual_scales(b, prefix + "block_scales", q, *layout, rep.notes);
  if (q.tensor_scale) {
    const io::Tensor& t = b.tensor(prefix + "tensor_scale");
    if ((t.dtype != io::DType::f32 && t.dtype != io::DType::u32) || t.elements() != 1)
      throw key_error(
          b.path, prefix + "tensor_scale",
          "expected one F32 value, found " + std::string(io::dtype_name(t.dtype)) + " " + shape_text(t.shape));
    const std::uint32_t actual = t.values<std::uint32_t>()[0];
    if (actual != *q.tensor_scale)
      rep.notes.push_back("tensor_scale: expected " + hex(*q.tensor_scale, 8) + " (" +
                          value_text(formats::f32, *q.tensor_scale) + ") actual " + hex(actual, 8) + " (" +
                          value_text(formats::f32, actual) + ")");
  } else if (b.contains(prefix + "tensor_scale")) {
    rep.notes.push_back("tensor_scale: present, but the " + o.scheme + " scheme has none");
  }

  compare_blocks(q, codes, scales, rep);
  return rep;
}

}  // namespace lowbit::checkpoint
