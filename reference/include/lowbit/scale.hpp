// Scaling schemes: a low-bit code means nothing without its scale, its granularity and its layout.
// Each scheme follows one real implementation's exact operation order (docs/semantics.md §4); every "fp32"
// step is a single IEEE binary32 operation rounded to nearest even, done with the host's float type
// (the build forbids contraction into FMAs).
//
// A scheme is a row of data (SchemeRow, scheme_rows below): its block shape, its elements, its scale
// format, which options it takes and whether it reads the tensor twice.  resolve() turns a Request (the
// options a caller named, and only those) into the Options quantize() runs, refusing, with a message naming
// the option, anything the row does not take.  quantize() is the streaming SIMD path; quantize_reference()
// (scale_reference.cpp) is the plain scalar definition of every scheme's operation order, and the
// conformance suite proves the two equal bit for bit.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lowbit/format.hpp"
#include "lowbit/names.hpp"
#include "lowbit/policy.hpp"

namespace lowbit::scale {

enum class Scheme : std::uint8_t { tensor, delayed, channel, token, block, mx, nvfp4, nvfp4_2d, nvfp4_1level };
inline constexpr Named<Scheme> scheme_names[] = {
    {Scheme::tensor, "tensor", "one scale per tensor from its amax (TE current scaling)"},
    {Scheme::delayed, "delayed", "one scale per tensor from the amax history (TE delayed scaling)"},
    {Scheme::channel, "channel", "one scale per column"},
    {Scheme::token, "token", "one scale per row"},
    {Scheme::block, "block", "one scale per block of 1 or more rows by N columns (TE Float8BlockScaling)"},
    {Scheme::mx, "mx", "OCP MX: an e8m0 scale per block of a row"},
    {Scheme::nvfp4, "nvfp4", "two-level NVFP4: an e4m3 scale per 1x16 block and an f32 tensor scale"},
    {Scheme::nvfp4_2d, "nvfp4-2d", "two-level NVFP4 with 16x16 blocks"},
    {Scheme::nvfp4_1level, "nvfp4-1level", "single-level NVFP4 (torchao): an e4m3 scale per 1x16 block"},
};
constexpr const auto& names_of(Scheme) { return scheme_names; }

enum class ScaleFormat : std::uint8_t { f32, pow2, ue8m0_packed };
inline constexpr Named<ScaleFormat> scale_format_names[] = {
    {ScaleFormat::f32, "f32", "f32 scales"},
    {ScaleFormat::pow2, "pow2", "f32 scales rounded down to a power of two"},
    {ScaleFormat::ue8m0_packed, "ue8m0-packed", "DeepGEMM's e8m0 scales, four per 32-bit word"},
};
constexpr const auto& names_of(ScaleFormat) { return scale_format_names; }

// MX shared-scale rules.  floor: OCP MX v1.0 §6.3 (torchao FLOOR); ceil: torchao CEIL; even: torchao EVEN
// (amax rounded at the element's mantissa width first); rceil: TE / cuBLAS / torchao RCEIL
// (cvt.rp.satfinite.ue8m0 of fp32(amax * fp32(1 / max_elem))); rne: as rceil with ties-to-even rounding.
enum class MxRule : std::uint8_t { floor, ceil, even, rceil, rne };
inline constexpr Named<MxRule> mx_rule_names[] = {
    {MxRule::floor, "floor", "OCP MX v1.0: floor(log2 amax) - emax_elem"},
    {MxRule::ceil, "ceil", "torchao CEIL: the exponent rounded up"},
    {MxRule::even, "even", "torchao EVEN: amax rounded at the element's mantissa width first"},
    {MxRule::rceil, "rceil", "TE / cuBLAS: amax / max_elem rounded up to a power of two"},
    {MxRule::rne, "rne", "amax / max_elem rounded to the nearest power of two, ties to even"},
};
constexpr const auto& names_of(MxRule) { return mx_rule_names; }

// NaN or Inf inside an MX block.  scale_nan: the block's scale is NaN (0xFF) and every element is the
// element format's NaN conversion (torchao: amax propagates NaN, a non-finite amax gives 255).
// propagate: the scale comes from the finite elements; each non-finite element converts on its own.
// amax: the scale rule sees the fmaxf amax as it is (TE: Inf gives 0xFE under rceil).
enum class NonFinite : std::uint8_t { scale_nan, propagate, amax };
inline constexpr Named<NonFinite> nonfinite_names[] = {
    {NonFinite::scale_nan, "scale-nan", "a block holding NaN or Inf gets the NaN scale"},
    {NonFinite::propagate, "propagate", "the scale from the finite elements; NaN and Inf convert on their own"},
    {NonFinite::amax, "amax", "the scale rule sees the fmaxf amax as it is (TE)"},
};
constexpr const auto& names_of(NonFinite) { return nonfinite_names; }

// NVFP4 with a zero block scale: the kernel's element multiplier is FLT_MAX (TE kernels); TE's C++
// test reference uses 0 instead.
enum class ZeroScale : std::uint8_t { kernel, reference };
inline constexpr Named<ZeroScale> zero_scale_names[] = {
    {ZeroScale::kernel, "kernel", "element multiplier FLT_MAX (TE kernels)"},
    {ZeroScale::reference, "reference", "element multiplier 0 (TE's C++ test reference)"},
};
constexpr const auto& names_of(ZeroScale) { return zero_scale_names; }

// Two-level NVFP4 variants.  fast_math: the element multiplier is bf16(min(S_enc / scale, bf16 max)).
// four_over_six / four_over_six_mse: TE's "4over6" (docs/semantics.md §4): S_enc = 1536 / amax (256 in place of
// 448), and each block keeps whichever of its map-to-6 and map-to-4 (block scale times 1.5) encodings has
// the smaller summed dequantization error, absolute (TE's default) or squared; a tie keeps map-to-6.
// torchao: torchao 0.18's arithmetic.  Two-level NVFP4 (prototype/mx_formats/nvfp4_tensor.py,
// per_tensor_amax_to_scale and nvfp4_quantize): S_dec = fp32(amax / 2688); each block scale
// fp32(fp32(block_amax / 6) / S_dec) clamped to [2^-6, 448] (an all-zero block gets 2^-6, code 0x08); elements
// x * fp32(fp32(1 / S_dec) / scale).  MX (mx_tensor.py to_mx, _to_mx_rceil): docs/semantics.md §4.5a.
// compressed_tensors: the arithmetic of compressed-tensors 0.20.1's CPU path (the vLLM / LLM Compressor
// checkpoint format), for NVFP4 and for the FP8 rows (tensor, token, block): scales computed in the
// Compute precision (the weight's dtype), elements divided by the scale, docs/semantics.md §4.8.
// compressed_tensors_gpu: its GPU (Triton) path for the FP8 rows: the same scales, the element quotient kept
// in f32 (tl.div_rn) where the CPU path rounds it to the weight's dtype first.
// modelopt: the arithmetic of NVIDIA ModelOpt 0.47.0's Hugging Face export (the TensorRT-LLM checkpoint format),
// for NVFP4 and per-tensor FP8, docs/semantics.md §4.9: scales in f32 from amax / 448 and amax / 2688, elements
// divided by the scale (the FP8 quotient rounded to the weight's dtype, the Compute precision, first).
// gguf: the arithmetic of gguf-py 0.19.0's MXFP4 quantizer (quants.py MXFP4.quantize_blocks, what llama.cpp's
// GGUF files hold), for the MX row with e2m1 elements in blocks of 32, docs/semantics.md §4.11: the e8m0 code
// floor(f32 log2(amax)) - 2 + 127 cast to uint8 (wrapping below 0; 0 for a zero, NaN or infinite amax), each
// element the first kvalue of least f32 |d * k - x|, d half the scale (ties toward zero, a zero +0).
// transformers: the arithmetic of Hugging Face transformers 5.24's FineGrainedFP8 quantizer (the
// weight_scale_inv checkpoints of DeepSeek-V3 and quant_method "fp8"), for the FP8 block rows,
// docs/semantics.md §4.12: per block s = fp32(fp32(1 / amax) * 448) (torch's scalar / tensor is a reciprocal
// and a product), decode scale fp32(1 / s), elements fp32(x * s).
enum class Variant : std::uint8_t {
  standard,
  fast_math,
  four_over_six,
  four_over_six_mse,
  torchao,
  compressed_tensors,
  modelopt,
  gguf,
  transformers,
  compressed_tensors_gpu
};
inline constexpr Named<Variant> variant_names[] = {
    {Variant::standard, "standard", "TE's kernel"},
    {Variant::fast_math, "fast-math", "the element multiplier as a bf16"},
    {Variant::four_over_six, "4over6", "per block map to 4 or 6, least absolute error"},
    {Variant::four_over_six_mse, "4over6-mse", "per block map to 4 or 6, least squared error"},
    {Variant::torchao, "torchao",
     "torchao 0.18's arithmetic (NVFP4 S_dec = amax / 2688; MX to_mx's NaN, Inf and smallest scale, RCEIL's CPU "
     "fallback)"},
    {Variant::compressed_tensors, "compressed-tensors", "compressed-tensors 0.20.1 (vLLM checkpoints), its CPU path"},
    {Variant::modelopt, "modelopt", "ModelOpt 0.47.0's Hugging Face export (TensorRT-LLM checkpoints)"},
    {Variant::gguf, "gguf", "gguf-py 0.19.0's MXFP4 quantizer (GGUF files, llama.cpp)"},
    {Variant::transformers, "transformers", "transformers 5.24's FineGrainedFP8 (weight_scale_inv checkpoints)"},
    {Variant::compressed_tensors_gpu, "compressed-tensors-gpu",
     "compressed-tensors 0.20.1's GPU (Triton) path: the FP8 quotient kept in f32"},
};
constexpr const auto& names_of(Variant) { return variant_names; }

// The precision an exporter computes its scales in.  compressed-tensors keeps the weight's dtype through its
// calibration (torch ops on bf16 tensors round every result to bf16); TE computes in f32.
enum class Compute : std::uint8_t { f32, bf16, f16 };
inline constexpr Named<Compute> compute_names[] = {
    {Compute::f32, "f32", "every step one binary32 operation"},
    {Compute::bf16, "bf16", "each step rounded to bf16 (a bf16 weight's torch ops)"},
    {Compute::f16, "f16", "each step rounded to f16 (an f16 weight's torch ops)"},
};
constexpr const auto& names_of(Compute) { return compute_names; }

// Which copies `lowbit quantize` writes: rowwise, the transpose (TE's columnwise copy), or both.
enum class Direction : std::uint8_t { row, col, both };
inline constexpr Named<Direction> direction_names[] = {
    {Direction::row, "row", "blocks along each row"},
    {Direction::col, "col", "the transpose, with its own scales"},
    {Direction::both, "both", "both copies"},
};
constexpr const auto& names_of(Direction) { return direction_names; }

// What an amax does with a NaN: fmaxf drops it (TE's kernels), or the first NaN is the amax.
enum class AmaxNan : std::uint8_t { ignore, propagate };
inline constexpr Named<AmaxNan> amax_nan_names[] = {
    {AmaxNan::ignore, "ignore", "fmaxf: NaN is dropped"},
    {AmaxNan::propagate, "propagate", "a NaN is the amax"},
};
constexpr const auto& names_of(AmaxNan) { return amax_nan_names; }

// The options of a scheme request, named as the command line spells them (its flag is "--" + name; a recipe
// key or a Python keyword is argument_of's spelling, with underscores), so that a refusal can say which one
// is at fault.  `block` is the block's shape, rows and columns (--block, a recipe's block
// size N or RxN, the block128x128 spelling).
enum class Option : std::uint8_t {
  element,
  block,
  scale_format,
  mx_rule,
  nonfinite,
  amax_nan,
  eps,
  zero_scale,
  variant,
  hadamard,
  compute,
};
inline constexpr Named<Option> option_names[] = {
    {Option::element, "element", "the element format"},
    {Option::block, "block", "the block shape"},
    {Option::scale_format, "scale-format", "the per-tensor family's scale format"},
    {Option::mx_rule, "scale-rule", "the MX shared-scale rule"},
    {Option::nonfinite, "nonfinite", "NaN and Inf inside an MX block"},
    {Option::amax_nan, "amax-nan", "what an amax does with NaN"},
    {Option::eps, "eps", "the smallest amax of compute_scale_from_amax"},
    {Option::zero_scale, "zero-scale", "NVFP4's element multiplier for a zero block scale"},
    {Option::variant, "variant", "the two-level NVFP4 variant"},
    {Option::hadamard, "hadamard", "the 16x16 random Hadamard transform first"},
    {Option::compute, "compute", "the precision the scales are computed in (compressed-tensors variant)"},
};
constexpr const auto& names_of(Option) { return option_names; }

// A set of values of a small enum (every enum here has fewer than 64 values).
template <class E>
class EnumSet {
 public:
  constexpr EnumSet() = default;
  constexpr EnumSet(std::initializer_list<E> values) {
    for (E v : values) bits_ |= bit(v);
  }
  static constexpr EnumSet every() {
    EnumSet s;
    for (E v : all<E>()) s.bits_ |= bit(v);
    return s;
  }
  constexpr bool contains(E v) const { return (bits_ & bit(v)) != 0; }
  constexpr bool empty() const { return bits_ == 0; }

 private:
  static constexpr std::uint64_t bit(E v) { return std::uint64_t{1} << static_cast<unsigned>(v); }
  std::uint64_t bits_ = 0;
};

// ---- scheme rows ----------------------------------------------------------------------------------------

// One side of a scheme's blocks: how many rows (or columns) one scale covers.  whole: the tensor's extent
// (at least 1); fixed: `size`, which a request may name but not change; chosen: the request's value, or
// `size` when it names none (0 for block rows: 1-D blocks, one row each).
struct Extent {
  enum class Kind : std::uint8_t { whole, fixed, chosen };
  Kind kind = Kind::whole;
  int size = 0;
};
inline constexpr Extent whole_extent{.kind = Extent::Kind::whole};
constexpr Extent fixed_extent(int n) { return {.kind = Extent::Kind::fixed, .size = n}; }
constexpr Extent chosen_extent(int default_size) { return {.kind = Extent::Kind::chosen, .size = default_size}; }
// The rows (or columns) one scale covers for a tensor extent and the options' value of a chosen side (0:
// the default of 1).
constexpr int block_size(const Extent& e, int tensor_extent, int chosen) {
  switch (e.kind) {
    case Extent::Kind::whole: return tensor_extent > 1 ? tensor_extent : 1;
    case Extent::Kind::fixed: return e.size;
    case Extent::Kind::chosen: return chosen > 0 ? chosen : 1;
  }
  return 1;
}

// Which quantizer runs the scheme: one function per family in scale.cpp (the fast path) and in
// scale_reference.cpp (the definition).
enum class Family : std::uint8_t {
  current,       // TE compute_scale_from_amax per block: tensor, channel, token, block
  delayed,       // TE delayed scaling: the scale from the history, the amax recorded
  mx,            // OCP MX: an e8m0 shared scale per block
  nvfp4,         // two-level NVFP4: f32 tensor scale, e4m3 block scales (TE's kernels; 4over6)
  nvfp4_1level,  // torchao's single-level NVFP4
};

// How often the tensor is read: once (each block's scale needs only its own block, so a band of rows is
// converted while the next is gathered), or twice (a scale needs the whole tensor or whole columns first:
// the tensor amax, a column's amax, NVFP4's tensor scale).
enum class Passes : std::uint8_t { one, two };

struct SchemeRow {
  Scheme scheme;
  Family family;
  const char* label;  // how messages name the scheme's kind ("MX", "NVFP4")
  Extent block_rows;
  Extent block_cols;
  const Format* default_element;
  std::span<const Format* const> elements;  // the elements it takes; empty: any element of at most 8 bits
  EnumSet<ScaleFormat> scale_formats;       // the --scale-format values it takes
  const Format* scale_element;              // the scales' format; nullptr: f32, or e8m0 for ue8m0-packed
  Passes passes;
  EnumSet<Option> takes;      // the options a request may name
  EnumSet<Variant> variants;  // the --variant values it takes
  const char* source;         // the implementation whose operation order it follows
};

inline constexpr const Format* mx_elements[] = {&formats::e4m3, &formats::e5m2, &formats::e2m3,  &formats::e3m2,
                                                &formats::e2m1, &formats::int8, &formats::int8sm};
inline constexpr const Format* nvfp4_elements[] = {&formats::e2m1};

namespace detail {
inline constexpr EnumSet<Option> current_options{Option::element, Option::scale_format, Option::amax_nan,
                                                 Option::eps,     Option::variant,      Option::compute};
inline constexpr EnumSet<Option> nvfp4_options{Option::element, Option::block,    Option::amax_nan, Option::zero_scale,
                                               Option::variant, Option::hadamard, Option::compute};
// The FP8 rows' variants: TE's arithmetic and compressed-tensors'; the per-tensor row also ModelOpt's (its FP8
// export is per-tensor).
inline constexpr EnumSet<Variant> current_variants{Variant::standard, Variant::compressed_tensors,
                                                   Variant::compressed_tensors_gpu};
inline constexpr EnumSet<Variant> tensor_variants{Variant::standard, Variant::compressed_tensors,
                                                  Variant::compressed_tensors_gpu, Variant::modelopt};
// Two-level NVFP4: every variant but gguf-py's (an MX quantizer).
inline constexpr EnumSet<Variant> nvfp4_variants{
    Variant::standard, Variant::fast_math,          Variant::four_over_six, Variant::four_over_six_mse,
    Variant::torchao,  Variant::compressed_tensors, Variant::modelopt};
// The block row's: TE's, compressed-tensors' and transformers' FineGrainedFP8 (its weight_scale_inv blocks).
inline constexpr EnumSet<Variant> block_variants{Variant::standard, Variant::compressed_tensors,
                                                 Variant::compressed_tensors_gpu, Variant::transformers};
}  // namespace detail

inline constexpr SchemeRow scheme_rows[] = {
    {.scheme = Scheme::tensor,
     .family = Family::current,
     .label = "per-tensor",
     .block_rows = whole_extent,
     .block_cols = whole_extent,
     .default_element = &formats::e4m3,
     .elements = {},
     .scale_formats = {ScaleFormat::f32, ScaleFormat::pow2},
     .scale_element = nullptr,
     .passes = Passes::two,
     .takes = detail::current_options,
     .variants = detail::tensor_variants,
     .source = "TE compute_scale_from_amax (recipe_common.cuh), Float8CurrentScaling"},
    {.scheme = Scheme::delayed,
     .family = Family::delayed,
     .label = "delayed",
     .block_rows = whole_extent,
     .block_cols = whole_extent,
     .default_element = &formats::e4m3,
     .elements = {},
     .scale_formats = {ScaleFormat::f32},
     .scale_element = nullptr,
     .passes = Passes::one,
     .takes = {Option::element, Option::amax_nan},
     .variants = {Variant::standard},
     .source = "TE delayed_scaling.cu"},
    {.scheme = Scheme::channel,
     .family = Family::current,
     .label = "per-channel",
     .block_rows = whole_extent,
     .block_cols = fixed_extent(1),
     .default_element = &formats::e4m3,
     .elements = {},
     .scale_formats = {ScaleFormat::f32, ScaleFormat::pow2},
     .scale_element = nullptr,
     .passes = Passes::two,
     .takes = detail::current_options,
     .variants = {Variant::standard},
     .source = "TE compute_scale_from_amax per column"},
    {.scheme = Scheme::token,
     .family = Family::current,
     .label = "per-token",
     .block_rows = fixed_extent(1),
     .block_cols = whole_extent,
     .default_element = &formats::e4m3,
     .elements = {},
     .scale_formats = {ScaleFormat::f32, ScaleFormat::pow2},
     .scale_element = nullptr,
     .passes = Passes::one,
     .takes = detail::current_options,
     .variants = detail::current_variants,
     .source = "TE compute_scale_from_amax per row"},
    {.scheme = Scheme::block,
     .family = Family::current,
     .label = "block",
     .block_rows = chosen_extent(0),
     .block_cols = chosen_extent(128),
     .default_element = &formats::e4m3,
     .elements = {},
     .scale_formats = EnumSet<ScaleFormat>::every(),
     .scale_element = nullptr,
     .passes = Passes::one,
     .takes = {Option::element, Option::block, Option::scale_format, Option::amax_nan, Option::eps, Option::variant,
               Option::compute},
     .variants = detail::block_variants,
     .source = "TE Float8BlockScaling (value_for_inf FLT_MAX); DeepGEMM's ue8m0 packing"},
    {.scheme = Scheme::mx,
     .family = Family::mx,
     .label = "MX",
     .block_rows = fixed_extent(1),
     .block_cols = chosen_extent(32),
     .default_element = &formats::e4m3,
     .elements = mx_elements,
     .scale_formats = {ScaleFormat::f32},
     .scale_element = &formats::e8m0,
     .passes = Passes::one,
     .takes = {Option::element, Option::block, Option::mx_rule, Option::nonfinite, Option::amax_nan, Option::variant},
     .variants = {Variant::standard, Variant::torchao, Variant::gguf},
     .source = "OCP MX v1.0 §6.3; torchao 0.18 to_mx (variant torchao); TE / cuBLAS rceil; gguf-py 0.19.0 MXFP4 "
               "(variant gguf)"},
    {.scheme = Scheme::nvfp4,
     .family = Family::nvfp4,
     .label = "NVFP4",
     .block_rows = fixed_extent(1),
     .block_cols = fixed_extent(16),
     .default_element = &formats::e2m1,
     .elements = nvfp4_elements,
     .scale_formats = {ScaleFormat::f32},
     .scale_element = &formats::e4m3,
     .passes = Passes::two,
     .takes = detail::nvfp4_options,
     .variants = detail::nvfp4_variants,
     .source = "TE core_nvfp4.cuh, quantize_transpose_nvfp4.cuh, quantize_4over6_kernel.cuh"},
    {.scheme = Scheme::nvfp4_2d,
     .family = Family::nvfp4,
     .label = "NVFP4",
     .block_rows = fixed_extent(16),
     .block_cols = fixed_extent(16),
     .default_element = &formats::e2m1,
     .elements = nvfp4_elements,
     .scale_formats = {ScaleFormat::f32},
     .scale_element = &formats::e4m3,
     .passes = Passes::two,
     .takes = detail::nvfp4_options,
     .variants = detail::nvfp4_variants,
     .source = "TE quantize_transpose_nvfp4.cuh (16x16 weight blocks)"},
    {.scheme = Scheme::nvfp4_1level,
     .family = Family::nvfp4_1level,
     .label = "NVFP4",
     .block_rows = fixed_extent(1),
     .block_cols = fixed_extent(16),
     .default_element = &formats::e2m1,
     .elements = nvfp4_elements,
     .scale_formats = {ScaleFormat::f32},
     .scale_element = &formats::e4m3,
     .passes = Passes::one,
     .takes = {Option::element, Option::block, Option::amax_nan, Option::hadamard},
     .variants = {Variant::standard},
     .source =
         "torchao 0.18 nvfp4_quantize single-level (scale = fp32(block amax / 6) in [2^-6, 448], x * fp32(1 / scale))"},
};

// The row of a scheme.
constexpr const SchemeRow& scheme_row(Scheme s) {
  for (const SchemeRow& r : scheme_rows)
    if (r.scheme == s) return r;
  return scheme_rows[0];  // unreachable for a value of the enum (conformance/scale checks every one)
}

// What each two-level NVFP4 variant changes: rows of data as the schemes are.
enum class BlockChoice : std::uint8_t {
  map_to_6,             // the block scale maps the block amax to 6
  least_abs_error,      // 4over6: map to 4 or 6, the smaller summed |error| (a tie keeps 6)
  least_squared_error,  // 4over6-mse: the same with squared errors
};
enum class Multiplier : std::uint8_t {
  reciprocal,     // fminf(1 / (scale * S_dec), FLT_MAX)
  bf16_quotient,  // fast-math: bf16(fminf(S_enc / scale, bf16 max))
  dec_quotient    // torchao: fp32(fp32(1 / S_dec) / scale)
};
// Whose order of operations a variant follows: how the tensor's decode scale, each block's scale and the
// elements are formed.
enum class Order : std::uint8_t {
  te,       // TE: S_enc = scale_max * 6 / amax, S_dec = fp32(1 / S_enc); block scale fminf(amax * fp32(S_enc / 6))
  torchao,  // torchao: S_dec = fp32(amax / (448 * 6)); block scale clamp(fp32(fp32(amax / 6) / S_dec), 2^-6, 448)
  compressed_tensors,  // compressed-tensors: its global scale, block scale and x / (scale / global), see quantize
  modelopt,            // ModelOpt: S_dec = fp32(amax / 2688); block scale fp32(amax / fp32(6 * S_dec)) in [2^-9, 448]
  gguf,                // gguf-py's MXFP4: the e8m0 code from numpy's f32 log2, each element an argmin (MX only)
  transformers         // transformers' FineGrainedFP8: s = fp32(fp32(1 / amax) * 448), decode fp32(1 / s)
};
struct VariantRow {
  Variant variant;
  Order order;
  float scale_max;  // the block scale's bound in S_enc = scale_max * 6 / amax: 448, or 256 for 4over6
  Multiplier multiplier;
  BlockChoice choice;
  bool takes_hadamard;
  bool takes_stochastic_rounding;
  // An exporter's arithmetic (compressed-tensors, ModelOpt, gguf-py): checked against that exporter's checkpoints
  // (conformance/checkpoint) rather than golden vectors; its definition (scale_reference.cpp) is its only
  // path; it takes no eps, pow2 or packed scales, NaN-propagating amax or zero-scale choice.
  bool exporter = false;
  // compressed-tensors' FP8 element quotient x / s: rounded to the weight's dtype (its CPU path, torch ops on that
  // dtype) or kept in f32 (its GPU path, the Triton kernel's tl.div_rn of the f32 values).
  bool quotient_in_f32 = false;
};
inline constexpr VariantRow variant_rows[] = {
    {.variant = Variant::standard,
     .order = Order::te,
     .scale_max = 448.0f,
     .multiplier = Multiplier::reciprocal,
     .choice = BlockChoice::map_to_6,
     .takes_hadamard = true,
     .takes_stochastic_rounding = true},
    {.variant = Variant::fast_math,
     .order = Order::te,
     .scale_max = 448.0f,
     .multiplier = Multiplier::bf16_quotient,
     .choice = BlockChoice::map_to_6,
     .takes_hadamard = true,
     .takes_stochastic_rounding = true},
    {.variant = Variant::four_over_six,
     .order = Order::te,
     .scale_max = 256.0f,
     .multiplier = Multiplier::reciprocal,
     .choice = BlockChoice::least_abs_error,
     .takes_hadamard = false,
     .takes_stochastic_rounding = false},
    {.variant = Variant::four_over_six_mse,
     .order = Order::te,
     .scale_max = 256.0f,
     .multiplier = Multiplier::reciprocal,
     .choice = BlockChoice::least_squared_error,
     .takes_hadamard = false,
     .takes_stochastic_rounding = false},
    {.variant = Variant::torchao,
     .order = Order::torchao,
     .scale_max = 448.0f,
     .multiplier = Multiplier::dec_quotient,
     .choice = BlockChoice::map_to_6,
     .takes_hadamard = false,
     .takes_stochastic_rounding = false},
    {.variant = Variant::compressed_tensors,
     .order = Order::compressed_tensors,
     .scale_max = 448.0f,
     .multiplier = Multiplier::reciprocal,  // not used: its elements divide (Order::compressed_tensors)
     .choice = BlockChoice::map_to_6,
     .takes_hadamard = false,
     .takes_stochastic_rounding = false,
     .exporter = true},
    {.variant = Variant::modelopt,
     .order = Order::modelopt,
     .scale_max = 448.0f,
     .multiplier = Multiplier::reciprocal,  // not used: its elements divide (Order::modelopt)
     .choice = BlockChoice::map_to_6,
     .takes_hadamard = false,
     .takes_stochastic_rounding = false,
     .exporter = true},
    {.variant = Variant::gguf,
     .order = Order::gguf,
     .scale_max = 448.0f,                   // not used: an MX scale
     .multiplier = Multiplier::reciprocal,  // not used: its elements are an argmin (Order::gguf)
     .choice = BlockChoice::map_to_6,
     .takes_hadamard = false,
     .takes_stochastic_rounding = false,
     .exporter = true},
    {.variant = Variant::transformers,
     .order = Order::transformers,
     .scale_max = 448.0f,
     .multiplier = Multiplier::reciprocal,  // not used: FP8 blocks only (Order::transformers)
     .choice = BlockChoice::map_to_6,
     .takes_hadamard = false,
     .takes_stochastic_rounding = false,
     .exporter = true},
    {.variant = Variant::compressed_tensors_gpu,
     .order = Order::compressed_tensors,
     .scale_max = 448.0f,
     .multiplier = Multiplier::reciprocal,  // not used: its elements divide (Order::compressed_tensors)
     .choice = BlockChoice::map_to_6,
     .takes_hadamard = false,
     .takes_stochastic_rounding = false,
     .exporter = true,
     .quotient_in_f32 = true},
};
constexpr const VariantRow& variant_row(Variant v) {
  for (const VariantRow& r : variant_rows)
    if (r.variant == v) return r;
  return variant_rows[0];
}

// The random Hadamard transform an NVFP4 quantization may run first (docs/semantics.md §4.6): y = x diag(s) H / 4
// on each whole 16-element row group, H the 16x16 Sylvester Hadamard matrix, s TE's fixed sign vector.  Two
// arithmetics of the same transform:
//  * exact: the sum of sixteen ±x/4 formed exactly (f64) and rounded once to f32, on any f32 input;
//  * te-bf16: Transformer Engine's kernel — bf16 inputs times the matrix stored in bf16 (±0.25, exact) as one
//    tensor-core MMA of K = 16 from a +0 accumulator (f32), each result rounded to nearest-even bf16 before the
//    amax and the quantization (TE hadamard_transform_utils.cuh, see hadamard_rows_te_bf16).
enum class Hadamard : std::uint8_t { none, exact, te_bf16 };
inline constexpr Named<Hadamard> hadamard_names[] = {
    {Hadamard::none, "none", "no transform"},
    {Hadamard::exact, "exact", "the exact sum of sixteen terms, rounded once to f32 (any f32 input)"},
    {Hadamard::te_bf16, "te-bf16",
     "Transformer Engine's: bf16 inputs, a bf16 tensor-core product (hopper-bf16 model) rounded to bf16"},
};
constexpr const auto& names_of(Hadamard) { return hadamard_names; }

// ---- requests and options -------------------------------------------------------------------------------

// What quantize() runs: every option resolved (resolve() or normalize() fills the scheme's defaults).
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
  Hadamard hadamard = Hadamard::none;
  Compute compute = Compute::f32;
  // NVFP4: the amax the tensor scale comes from, where a runtime shares one tensor scale across fused
  // projections (q/k/v, gate/up: the largest of their amaxes); nullopt: this tensor's own amax.
  std::optional<float> tensor_amax;
  Policy element_policy{.rounding = Rounding::rne, .overflow = Overflow::satfinite};
};

// The longest block side a request may choose (2^20 elements): far beyond any scheme's block (MX 32, NVFP4
// 16, TE's 128), and small enough that an index plus a block never overflows an int for any tensor the
// readers accept.
inline constexpr int max_block_side = 1 << 20;

// ceil(n / d) for n >= 0, d >= 1, without the overflow of (n + d - 1) / d.
constexpr int ceil_div(int n, int d) { return n / d + (n % d != 0 ? 1 : 0); }

// What a caller asks for: the options it names, and no others (an option left empty takes the scheme's
// default; one the scheme does not take is refused even at its default value).
struct Request {
  Scheme scheme = Scheme::tensor;
  const Format* element = nullptr;  // nullptr: the scheme's default
  std::optional<int> block;         // columns of a block
  std::optional<int> block_rows;    // rows of a block
  std::optional<ScaleFormat> scale_format;
  std::optional<MxRule> mx_rule;
  std::optional<NonFinite> nonfinite;
  std::optional<AmaxNan> amax_nan;
  std::optional<float> eps;
  std::optional<ZeroScale> zero_scale;
  std::optional<Variant> variant;
  Hadamard hadamard = Hadamard::none;
  std::optional<Compute> compute;
  std::optional<float> tensor_amax;  // NVFP4 (Options::tensor_amax)
  Policy element_policy{.rounding = Rounding::rne, .overflow = Overflow::satfinite};
};

// Why a request was refused: the option at fault, and why (the message names no front end's spelling of it).
struct Refusal {
  Option option;
  std::string message;
};

// The Options of a request, or why not.
std::optional<Refusal> resolve(const Request& r, Options& out);

// The request an Options value stands for: every field that differs from Options{}'s is named.
Request request_of(const Options& o);

// resolve(request_of(o)) in place: fills in the scheme's defaults (element, block shape) and rejects
// options the scheme does not take or values it does not accept, with a message naming the option (an
// element wider than 8 bits among them).  Returns the message, or an empty string.  Idempotent.
std::string normalize(Options& o);
// normalize() that throws ArgumentError(argument_of(option), message) instead.
void require_resolved(Options& o);
// An option's argument id (ArgumentError): its name with underscores ("scale_rule", "amax_nan").
std::string argument_of(Option o);

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

// The state update of one delayed-scaling step after a tensor was quantized with st.scale: record
// `tensor_amax`, compute the next scale for `element` (fp32(fp32(max * 2^-margin) / a), kept when a is not
// finite and positive, FLT_MAX for an infinite quotient), roll the history.  What quantize() does for the
// delayed scheme once the elements are converted; an empty history starts as 1024 zeros.
void delayed_update(DelayedState& st, float tensor_amax, const Format& element);

// PyTorch's loss scaler (torch.amp.GradScaler): its state_dict's five entries.  The factors are Python
// floats (doubles); the scale is its f32 tensor, the growth tracker its int32 tensor.
struct GradScalerState {
  float scale = 65536.0f;  // init_scale 2**16
  std::int32_t growth_tracker = 0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  std::int64_t growth_interval = 2000;
};

// GradScaler.update() after a step whose gradients held an Inf or NaN (`found_inf`) or did not, as torch's
// CPU kernel computes it (docs/semantics.md §4.10).  growth_tracker must be below INT32_MAX.
void grad_scaler_update(GradScalerState& st, bool found_inf);

struct Quantized {
  Scheme scheme = Scheme::tensor;
  const Format* element = nullptr;
  int rows = 0, cols = 0;
  int block_rows = 1, block_cols = 1;         // the block shape behind each scale
  std::vector<std::uint8_t> codes;            // one byte per element (elements are at most 8 bits), row-major
  const Format* scale_format = nullptr;       // f32, e8m0 (MX, ue8m0-packed) or e4m3 (NVFP4)
  std::vector<std::uint64_t> scales;          // decode scales in block order (row-major over blocks)
  std::optional<std::uint32_t> tensor_scale;  // NVFP4 S_dec (f32 bits)
  // compressed-tensors NVFP4: the encode scale it stores (weight_global_scale, f32 bits); the decode scale is
  // then 1 / global_scale, and tensor_scale is absent.
  std::optional<std::uint32_t> global_scale;
  std::vector<std::uint32_t> packed_scales;  // ue8m0-packed: four codes per word, the first in bits 7:0
  int scale_rows() const { return ceil_div(rows, block_rows); }
  int scale_cols() const { return ceil_div(cols, block_cols); }
};

// Quantize rowwise (blocks along each row): the streaming SIMD path.  `rbits` supplies one random value
// per element (row-major) for stochastic element rounding.  `state` is read and updated for the delayed
// scheme.  Throws std::invalid_argument for options normalize() refuses.
Quantized quantize(const Tensor& x, const Options& o, const std::vector<std::uint32_t>* rbits = nullptr,
                   DelayedState* state = nullptr);

// quantize() into `out`, reusing its storage: the result is the one quantize() returns, but codes of the same
// element count are overwritten where they lie instead of being allocated and zeroed again (for a caller that
// quantizes tensor after tensor of one shape).  If it throws, `out` is left valid with unspecified contents.
void quantize_into(const Tensor& x, const Options& o, Quantized& out, const std::vector<std::uint32_t>* rbits = nullptr,
                   DelayedState* state = nullptr);

// The same result by the plain definition of each scheme (src/scale_reference.cpp): scalar, one block
// and one element at a time, every fp32 step one binary32 operation, every element through the scalar
// conversion.  What quantize() is proven equal to; far slower.
Quantized quantize_reference(const Tensor& x, const Options& o, const std::vector<std::uint32_t>* rbits = nullptr,
                             DelayedState* state = nullptr);

Tensor transpose(const Tensor& x);

// y = x diag(s) H / 4 on each whole 16-element group of each row (TE's sign vector s, the 16x16
// Sylvester Hadamard matrix H); a row's last partial group is left as it is.  Each output is the sum of
// sixteen ±x_i formed exactly in f64 and rounded once to f32 (Hadamard::exact).
Tensor hadamard_rows(const Tensor& x);
// The same transform as Transformer Engine computes it (Hadamard::te_bf16): each group's sixteen outputs are one
// MMA of the bf16 inputs with the bf16 matrix (gemm::model_step of the hopper-bf16 model, C = +0), each rounded
// to nearest-even bf16.  Throws std::invalid_argument naming the element for an input that is not a bf16 value.
Tensor hadamard_rows_te_bf16(const Tensor& x);
// The transform `h` names (Hadamard::none: x itself).
Tensor hadamard_transform(const Tensor& x, Hadamard h);

// The dequantized value of each element: code * scale (* tensor scale), exact in f64 for every scheme
// here (the significands multiply to at most 35 bits).
std::vector<double> dequantize(const Quantized& q);

// Helpers shared with tests and the command line.
// fmaxf over |v[i * stride]|, i < n, from +0 (a NaN dropped, or returned under AmaxNan::propagate).
float amax(const float* v, std::size_t n, std::size_t stride, AmaxNan nan);
// TE compute_scale_from_amax (recipe_common.cuh), docs/semantics.md §4; `format` pow2 rounds the scale down to a
// power of two.
float scale_from_amax(float amax, float fp8_max, float eps, ScaleFormat format, float value_for_inf);
// The MX shared scale (an e8m0 code) of a block amax for an element format.
std::uint64_t mx_scale(float amax, const Format& element, MxRule rule);

}  // namespace lowbit::scale
