// Scaling schemes: a low-bit code means nothing without its scale, its granularity and its layout.
// Each scheme follows one real implementation's exact operation order (docs/semantics.md §4); every "fp32"
// step is a single IEEE binary32 operation rounded to nearest even, done with the host's float type
// (the build forbids contraction into FMAs).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lowbit/format.hpp"
#include "lowbit/policy.hpp"

namespace lowbit::scale {

enum class Scheme : std::uint8_t { tensor, delayed, channel, token, block, mx, nvfp4, nvfp4_2d, nvfp4_1level };
enum class ScaleFormat : std::uint8_t { f32, pow2, ue8m0_packed };
// MX shared-scale rules.  floor: OCP MX v1.0 §6.3 (torchao FLOOR); ceil: torchao CEIL; even: torchao EVEN
// (amax rounded at the element's mantissa width first); rceil: TE / cuBLAS / torchao RCEIL
// (cvt.rp.satfinite.ue8m0 of fp32(amax * fp32(1 / max_elem))); rne: as rceil with ties-to-even rounding.
enum class MxRule : std::uint8_t { floor, ceil, even, rceil, rne };
// NaN or Inf inside an MX block.  scale_nan: the block's scale is NaN (0xFF) and every element is the
// element format's NaN conversion (torchao: amax propagates NaN, a non-finite amax gives 255).
// propagate: the scale comes from the finite elements; each non-finite element converts on its own.
// amax: the scale rule sees the fmaxf amax as it is (TE: Inf gives 0xFE under rceil).
enum class NonFinite : std::uint8_t { scale_nan, propagate, amax };
// NVFP4 with a zero block scale: the kernel's element multiplier is FLT_MAX (TE kernels); TE's C++
// test reference uses 0 instead.
enum class ZeroScale : std::uint8_t { kernel, reference };
// Two-level NVFP4 variants.  fast_math: the element multiplier is bf16(min(S_enc / scale, bf16 max)).
// four_over_six / four_over_six_mse: TE's "4over6" (docs/semantics.md §4): S_enc = 1536 / amax (256 in place of
// 448), and each block keeps whichever of its map-to-6 and map-to-4 (block scale times 1.5) encodings has
// the smaller summed dequantization error, absolute (TE's default) or squared; a tie keeps map-to-6.
enum class Variant : std::uint8_t { standard, fast_math, four_over_six, four_over_six_mse };
enum class Direction : std::uint8_t { row, col, both };

struct Options {
  Scheme scheme = Scheme::tensor;
  const Format* element = nullptr;  // default per scheme: e4m3, or e2m1 for NVFP4
  int block = 0;                    // block length along the axis (0: the scheme's default)
  int block_rows = 0;               // for 2-D blocks (block128x128: 128; nvfp4_2d: 16); 0 = 1-D
  ScaleFormat scale_format = ScaleFormat::f32;
  MxRule mx_rule = MxRule::floor;
  NonFinite nonfinite = NonFinite::scale_nan;
  bool amax_propagates_nan = false;  // false: amax ignores NaN as fmaxf does
  float eps = 0.0f;
  ZeroScale zero_scale = ZeroScale::kernel;
  Variant variant = Variant::standard;
  bool hadamard = false;
  Policy element_policy{.rounding = Rounding::rne, .overflow = Overflow::satfinite};
};

// A 2-D f32 tensor (a 1-D one has one row).
struct Tensor {
  int rows = 0;
  int cols = 0;
  std::vector<float> data;  // row-major
};

// Delayed scaling state (TE delayed_scaling.cu): training state that checkpoints must carry.
struct DelayedState {
  std::vector<float> history;  // slot 0 is the newest amax
  float scale = 1.0f;
  bool max_algorithm = true;  // false: most_recent
  int margin = 0;
};

struct Quantized {
  Scheme scheme = Scheme::tensor;
  const Format* element = nullptr;
  int rows = 0, cols = 0;
  int block_rows = 1, block_cols = 1;         // the block shape behind each scale
  std::vector<std::uint8_t> codes;            // one byte per element (elements are at most 8 bits), row-major
  const Format* scale_format = nullptr;       // f32, e8m0 (MX, ue8m0-packed) or e4m3 (NVFP4)
  std::vector<std::uint64_t> scales;          // decode scales in block order (row-major over blocks)
  std::optional<std::uint32_t> tensor_scale;  // NVFP4 S_dec (f32 bits)
  std::vector<std::uint32_t> packed_scales;   // ue8m0-packed: four codes per word, the first in bits 7:0
  int scale_rows() const { return (rows + block_rows - 1) / block_rows; }
  int scale_cols() const { return (cols + block_cols - 1) / block_cols; }
};

// Fill in the scheme's defaults (element, block shape) and reject incompatible options with a message
// naming the option (an element wider than 8 bits among them).  Returns the error, or an empty string.
std::string normalize(Options& o);

// Quantize rowwise (blocks along each row).  `rbits` supplies one random value per element (row-major)
// for stochastic element rounding.  `state` is read and updated for the delayed scheme.
Quantized quantize(const Tensor& x, const Options& o, const std::vector<std::uint32_t>* rbits = nullptr,
                   DelayedState* state = nullptr);

Tensor transpose(const Tensor& x);

// The dequantized value of each element: code * scale (* tensor scale), exact in f64 for every scheme
// here (the significands multiply to at most 35 bits).
std::vector<double> dequantize(const Quantized& q);

// Helpers shared with tests and the command line.
float amax(const float* v, std::size_t n, std::size_t stride, bool propagate_nan);
// TE compute_scale_from_amax (recipe_common.cuh), docs/semantics.md §4.
float scale_from_amax(float amax, float fp8_max, float eps, bool pow2, float value_for_inf);
// The MX shared scale (an e8m0 code) of a block amax for an element format.
std::uint64_t mx_scale(float amax, const Format& element, MxRule rule);
const char* name(Scheme s);
std::optional<Scheme> parse_scheme(std::string_view s);

}  // namespace lowbit::scale
