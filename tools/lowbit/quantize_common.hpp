// Shared by `lowbit quantize` / `dequantize` (quantize_cmd.cpp) and `lowbit verify-checkpoint`
// (checkpoint_cmd.cpp): the quantization options, the recipe that checkpoints and quantized
// directories record, and the stored form of codes and scales (packing, scale layout).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lowbit/io.hpp"
#include "lowbit/scale.hpp"

namespace lowbit::cli {

struct QuantizeOptions {
  // The scheme options: empty when not given (the library then takes the scheme's default, and refuses a
  // given option the scheme does not take).
  std::string scheme, element, scale_rule, scale_format, nonfinite, variant, zero_scale, amax_nan;
  std::string direction = "row", profile, rounding, sr_bits_file, state, in, out, shape, in_format = "f32",
              scale_layout = "row-major";
  int block = 0, axis = -1, sr_bits = 0;
  int block_rows = 0;  // from a recipe's "RxC" block size (not a command-line option)
  long long sr_seed = -1;
  bool hadamard = false, pack = false;
  std::vector<std::string> tensors;  // checkpoint mode: the tensors to quantize (empty: every float tensor)
};

// The scheme options and element policy of `o`; InputError naming the option at fault.
scale::Options build_options(const QuantizeOptions& o, std::string& profile_name);

// How codes are stored: one per byte, or packed along each row (lowbit/pack.hpp).
enum class Packing : std::uint8_t { none, fp4x2, fp6x4 };
const char* name(Packing p);
std::optional<Packing> parse_packing(const std::string& s);
// The packing --pack selects for an element: fp4x2 for 4-bit, fp6x4 for 6-bit elements; InputError
// for wider ones.
Packing packing_for(const Format& element);
// The element width a packing holds (4, 6, or 8 for none).
int packing_bits(Packing p);

// How scales are stored: row-major, or the cuBLASLt 128x4-tiled layout (8-bit scales of 1-D blocks).
enum class ScaleLayout : std::uint8_t { row_major, cublaslt };
const char* name(ScaleLayout l);
std::optional<ScaleLayout> parse_layout(const std::string& s);
// InputError (naming `what`) unless `q`'s scales can be stored in `layout`.
void check_layout(const scale::Quantized& q, ScaleLayout layout, const std::string& what);

// The recipe of a quantization as string keys (checkpoint metadata W.<key>, quantized.json "recipe"):
// quantization_format, element, block_size, scale_rule, scale_format, nonfinite, variant, zero_scale,
// hadamard, amax_nan, profile, rounding.  Packing and layout are added by the caller.
std::map<std::string, std::string> recipe_keys(const QuantizeOptions& o, const scale::Options& so,
                                               const scale::Quantized& q, const std::string& profile_name);
// The inverse: options from recipe keys.  `get(key)` returns a value or nullopt.  Errors are InputError
// with a message starting `key "<prefix><key>": `.
QuantizeOptions options_from_recipe(const std::function<std::optional<std::string>(const std::string&)>& get,
                                    const std::string& prefix);
// build_options for a recipe: an InputError naming a command-line option is reworded to name the
// recipe key instead (`--scale-rule: ...` becomes `key "<prefix>scale_rule": ...`).
scale::Options build_recipe_options(const QuantizeOptions& o, const std::string& prefix);

// Stored codes: rows x cols codes, one byte each (none) or packed row by row.
std::vector<std::uint8_t> store_codes(const scale::Quantized& q, Packing p);
// Stored scales: u8 codes for e8m0/e4m3 scales (rows x cols row-major, or the tiled buffer), u32 f32
// bit patterns for f32 scales.  Row-major scales have shape [scale_rows, scale_cols]; tiled ones are 1-D.
io::Tensor store_scales(const scale::Quantized& q, ScaleLayout layout);
// The scale codes in block order from stored bytes (u8 codes or u32 words, row-major or tiled).
std::vector<std::uint64_t> load_scales(const std::vector<std::uint64_t>& stored, const scale::Quantized& shape,
                                       ScaleLayout layout);

// The dims of a tensor as a rows x cols matrix: rank 0 and 1 are one row; higher ranks flatten the
// leading dims into rows.  nullopt when a dimension does not fit in an int.
std::optional<std::pair<int, int>> matrix_dims(const std::vector<std::uint64_t>& shape);
// `shape` with its last dim replaced by the bytes a packed row takes (rank 0: [bytes]).
std::vector<std::uint64_t> packed_shape(const std::vector<std::uint64_t>& shape, Packing p);
// f32 values of an f32, bf16 or f16 tensor (exact widening); nullopt for another dtype.
std::optional<std::vector<float>> float_values(const io::Tensor& t);
// "[a, b, c]".
std::string shape_text(const std::vector<std::uint64_t>& shape);

}  // namespace lowbit::cli
