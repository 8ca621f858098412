// A quantized tensor as files store it: codes one per byte or packed along each row (lowbit/pack.hpp), scales
// row-major or in cuBLASLt's tiled layout, and the shapes that go with them.  The command line's file and
// checkpoint modes, verify-checkpoint, the golden vectors and the Python package share these.
#pragma once
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "lowbit/io.hpp"
#include "lowbit/named.hpp"
#include "lowbit/scale.hpp"

namespace lowbit::quantized {

// The `version` of quantized.json (reference/README.md "Files").  2: f32 scales and the tensor scale are
// '<f4' values; version 1 wrote them as '<u4' bit patterns and is refused with that reason.
inline constexpr int quantized_json_version = 2;

// How codes are stored: one per byte, or packed along each row (lowbit/pack.hpp).
enum class Packing : std::uint8_t { none, fp4x2, fp6x4 };
inline constexpr Named<Packing> packing_names[] = {
    {Packing::none, "none", "one code per byte"},
    {Packing::fp4x2, "fp4x2", "two 4-bit codes per byte, element 0 in the low nibble"},
    {Packing::fp6x4, "fp6x4", "four 6-bit codes in three bytes, a little-endian bit stream"},
};
constexpr const auto& names_of(Packing) { return packing_names; }
// The packing that packs an element: fp4x2 for 4-bit, fp6x4 for 6-bit elements; ArgumentError ("pack") for
// wider ones.
Packing packing_for(const Format& element);
// The element width a packing holds (4, 6, or 8 for none).
int packing_bits(Packing p);

// How scales are stored: row-major, or the cuBLASLt 128x4-tiled layout (8-bit scales of 1-D blocks).
enum class ScaleLayout : std::uint8_t { row_major, cublaslt };
inline constexpr Named<ScaleLayout> scale_layout_names[] = {
    {ScaleLayout::row_major, "row-major", "one row of scales per tensor row (per block row)"},
    {ScaleLayout::cublaslt, "cublaslt", "cuBLASLt's 1D block scaling factors layout: 128x4 tiles of 512 bytes"},
};
constexpr const auto& names_of(ScaleLayout) { return scale_layout_names; }
// ArgumentError ("scale_layout") unless `q`'s scales can be stored in `layout`.
void check_layout(const scale::Quantized& q, ScaleLayout layout);

// Stored codes: rows x cols codes, one byte each (none) or packed row by row.
std::vector<std::uint8_t> store_codes(const scale::Quantized& q, Packing p);
// Stored scales: u8 codes for e8m0/e4m3 scales (rows x cols row-major, or the tiled buffer), f32 ('<f4')
// values for f32 scales.  Row-major scales have shape [scale_rows, scale_cols]; tiled ones are 1-D.
io::Tensor store_scales(const scale::Quantized& q, ScaleLayout layout);
// The scale codes in block order from stored bytes (u8 codes or f32 bit patterns, row-major or tiled).
std::vector<std::uint64_t> load_scales(const std::vector<std::uint64_t>& stored, const scale::Quantized& shape,
                                       ScaleLayout layout);

// The dims of a tensor as a rows x cols matrix: rank 0 and 1 are one row; higher ranks flatten the
// leading dims into rows.  nullopt when a dimension does not fit in an int.
std::optional<std::pair<int, int>> matrix_dims(const std::vector<std::uint64_t>& shape);
// `shape` with its last dim replaced by the bytes a packed row takes (rank 0: [bytes]).
std::vector<std::uint64_t> packed_shape(const std::vector<std::uint64_t>& shape, Packing p);
// f32 values of an f32, bf16 or f16 tensor (exact widening); nullopt for another dtype.
std::optional<std::vector<float>> float_values(const io::Tensor& t);

// A source tensor (activations, weights: what gets quantized) read from a .npy file, as f32 values.
struct Source {
  std::vector<std::uint64_t> shape;
  std::vector<float> values;
  const Format* format = nullptr;  // what the values are: f32, f16, or the named format
  std::uint64_t rounded = 0;       // float64 elements that the one rounding changed
};
// `named` is the format the caller was told the file holds, or nullptr when none was named:
//  * none named: '<f4' and '<f2' as they are; '<f8' rounded once (IEEE 754 default: to nearest, ties to even,
//    overflow to Inf, a NaN quieted keeping its sign and top payload bits) into f32 — what numpy's
//    astype(np.float32) gives.  Integer and ml_dtypes arrays hold codes of a format the file does not name,
//    and are refused so.
//  * f32, bf16 or f16 named: '<f8' rounded once, directly, into that format (not through f32: ml_dtypes'
//    astype(bfloat16) of a float64 rounds twice); an array of that format's own numpy dtype ('<f4', '<f2'; f32
//    also takes '<f2', whose values it holds exactly) as it is.
//  * any format of at most 32 bits named: an integer or ml_dtypes array of its storage width (1, 2 or 4 bytes)
//    as its codes, each checked to be a code (a 4-bit format's byte holds the code in its low nibble).
// Values wider than they are read (f64, a format whose codes do not fit f32) are refused.  Errors:
// ArgumentError "in_format" for a dtype that does not go with the named (or missing) format, its message
// naming the file and its "descr"; io::FileError for a file that cannot be read.
Source read_source_npy(const std::string& path, const Format* named);

}  // namespace lowbit::quantized
