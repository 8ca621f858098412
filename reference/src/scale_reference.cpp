// quantize_reference(): what each scaling scheme computes, written as plainly as it can be.  One block at a
// time, one element at a time, in row-major order; every fp32 step is one IEEE binary32 operation on the
// host's float type (the build forbids FMA contraction); every element goes through the scalar conversion
// (convert.hpp), and the per-block rules are the definitions in scale_rules.hpp, which the device
// quantizers share.  Nothing here is tuned: no batch conversion, no SIMD, no one-pass banding, no block
// maxima from bit patterns.  quantize() (scale.cpp) is the fast path and is proven equal to this, bit for
// bit, by conformance/scale/test_oracle.cpp and fuzz/fuzz_scheme.cpp.
//
// The operation orders follow docs/semantics.md §4 and the sources each scheme row cites (scale.hpp).
#include <algorithm>
#include <array>
#include <bit>
#include <cfloat>
#include <cmath>
#include <stdexcept>

#include "lowbit/convert.hpp"
#include "lowbit/scale.hpp"
#include "lowbit/scale_rules.hpp"

namespace lowbit::scale {

namespace {

std::uint32_t bits_of(float f) { return std::bit_cast<std::uint32_t>(f); }

// The value of a code as an f32 (exact for every element and scale format the schemes use).
float value_of(const Format& f, std::uint64_t code) {
  const Unpacked u = unpack(f, code);
  switch (u.cls) {
    case ValueClass::nan: return std::nanf("");
    case ValueClass::inf: return u.negative ? -INFINITY : INFINITY;
    case ValueClass::zero: return u.negative ? -0.0f : 0.0f;
    case ValueClass::finite: break;
  }
  const double v = std::ldexp(static_cast<double>(u.significand), u.exponent);
  return static_cast<float>(u.negative ? -v : v);
}

// The schemes' fp32 product of an element and its block's factor: one binary32 multiplication, and where
// the factor is NaN, that NaN bit for bit (IEEE 754 lets the product of two NaNs be either; the schemes take
// the factor's, batch.hpp's ScaledBatch rule).  A NaN x with a non-NaN factor gives x quieted.
float product(float x, float factor) { return std::isnan(factor) ? factor : x * factor; }

// The fp32 quotient x / scale (single-level NVFP4): one binary32 division; a NaN x gives x quieted whatever
// the scale is (x86's rule for two NaN operands: the first one).
float quotient(float x, float scale) {
  return std::isnan(x) ? std::bit_cast<float>(bits_of(x) | 0x00400000u) : x / scale;
}

// The result of one torch operation on tensors of the Compute dtype: the f32 result (exact or correctly
// rounded for every operation used here, whose operands are values of that dtype) rounded to the dtype,
// to nearest even, overflowing to infinity, as torch's CPU kernels for bf16 and f16 compute in f32 and
// round the result.  f32: the value itself.
float in_compute(float v, Compute c) {
  if (c == Compute::f32) return v;
  Policy p;
  p.overflow = Overflow::nosat;
  const Format& f = c == Compute::bf16 ? formats::bf16 : formats::f16;
  const std::uint64_t code = convert(formats::f32, bits_of(v), f, p).code;
  return std::bit_cast<float>(static_cast<std::uint32_t>(convert(f, code, formats::f32, p).code));
}

// torch.finfo(dtype).eps and .tiny of the Compute dtype (compressed-tensors' _get_dtype_eps and the
// clamp of generate_gparam).
float compute_eps(Compute c) {
  switch (c) {
    case Compute::bf16: return 0x1p-7f;
    case Compute::f16: return 0x1p-10f;
    case Compute::f32: break;
  }
  return 0x1p-23f;
}
float compute_tiny(Compute c) { return c == Compute::f16 ? 0x1p-14f : 0x1p-126f; }

// Which elements an amax looks at.
enum class AmaxOf : std::uint8_t {
  elements,     // every element; a NaN is dropped (fmaxf), or returned where the options propagate NaN
  finite_ones,  // NaN and infinities dropped (MX under NonFinite::propagate)
  nan_first,    // every element, a NaN returned whatever the options (torch.amax, an exporter's arithmetic)
};

class Reference {
 public:
  Reference(const Tensor& x, const Options& o, const std::vector<std::uint32_t>* rbits, Quantized& q)
      : x_(x), o_(o), el_(*o.element), rbits_(is_stochastic(o.element_policy.rounding) ? rbits : nullptr), q_(q) {}

  void current();
  void current_compressed_tensors(int br, int bc);
  void current_modelopt();
  void current_transformers(int br, int bc);
  void delayed(DelayedState& st);
  void mx();
  void mx_torchao();
  void mx_gguf();
  void nvfp4();
  void nvfp4_compressed_tensors(int br);
  void nvfp4_modelopt(int br);
  void nvfp4_1level();

 private:
  int rows() const { return x_.rows; }
  int cols() const { return x_.cols; }
  std::size_t index(int r, int c) const { return static_cast<std::size_t>(r) * static_cast<std::size_t>(cols()) + c; }
  float at(int r, int c) const { return x_.data[index(r, c)]; }
  float elem_max() const { return static_cast<float>(max_value(el_)); }

  // The element code of the f32 value v for element (r, c): the scalar conversion, with that element's
  // random value under a stochastic rounding.
  std::uint8_t element(float v, int r, int c) const {
    const std::uint32_t random = rbits_ ? (*rbits_)[index(r, c)] : 0;
    return static_cast<std::uint8_t>(convert(formats::f32, bits_of(v), el_, o_.element_policy, random).code);
  }
  void set(int r, int c, std::uint8_t code) { q_.codes[index(r, c)] = code; }

  // fmaxf over |x| of rows [r0, r1) x columns [c0, c1), from +0, in row-major order.  A NaN is dropped, or,
  // where the options propagate NaN (and `of` is `elements`), the first NaN met is the amax (its sign
  // cleared, as fabs leaves it).
  float amax(int r0, int r1, int c0, int c1, AmaxOf of) const {
    float a = 0.0f;
    for (int r = r0; r < r1; ++r)
      for (int c = c0; c < c1; ++c) {
        const float v = std::fabs(at(r, c));
        if (std::isnan(v)) {
          if ((o_.amax_propagates_nan && of == AmaxOf::elements) || of == AmaxOf::nan_first) return v;
          continue;
        }
        if (of == AmaxOf::finite_ones && std::isinf(v)) continue;
        a = std::fmax(a, v);
      }
    return a;
  }

  // f(r0, r1, c0, c1) for each br x bc block in row-major block order, the last ones partial; an empty tensor
  // still has one block.
  template <class F>
  void each_block(int br, int bc, F f) const {
    for (int r0 = 0; r0 < std::max(rows(), 1); r0 += br)
      for (int c0 = 0; c0 < std::max(cols(), 1); c0 += bc)
        f(r0, std::min(rows(), r0 + br), c0, std::min(cols(), c0 + bc));
  }

  bool holds_nan_or_inf(int r, int c0, int c1) const {
    for (int c = c0; c < c1; ++c)
      if (!std::isfinite(at(r, c))) return true;
    return false;
  }

  // An f32 value into an e4m3 block scale code: rne, saturating (TE's block scale conversion).
  static std::uint64_t to_e4m3(float v) {
    Policy sat;
    sat.overflow = Overflow::satfinite;
    return convert(formats::f32, bits_of(v), formats::e4m3, sat).code;
  }

  void four_over_six_block(int r0, int r1, int c0, int c1, float global, float s_enc, float s_dec);
  // One candidate's codes of a block of at most 16 x 16 elements, (r - r0) * 16 + (c - c0).
  using BlockCodes = std::array<std::uint8_t, 256>;
  float four_over_six_error(const BlockCodes& codes, int r0, int r1, int c0, int c1, std::uint64_t scale,
                            float global) const;

  const Tensor& x_;
  const Options& o_;
  const Format& el_;
  const std::vector<std::uint32_t>* rbits_;
  Quantized& q_;
};

// tensor, channel, token, block: per block, TE compute_scale_from_amax (value_for_inf FLT_MAX) gives the
// element multiplier s, the stored decode scale is fp32(1 / s), each element is fp32(x * s).  ue8m0-packed
// blocks take DeepGEMM's scale instead (rules::packed_block_scale).  An empty tensor still has one block.
void Reference::current() {
  const SchemeRow& row = scheme_row(o_.scheme);
  const int br = block_size(row.block_rows, rows(), o_.block_rows);
  const int bc = block_size(row.block_cols, cols(), o_.block);
  if (variant_row(o_.variant).order == Order::compressed_tensors) return current_compressed_tensors(br, bc);
  if (variant_row(o_.variant).order == Order::modelopt) return current_modelopt();
  if (variant_row(o_.variant).order == Order::transformers) return current_transformers(br, bc);
  const bool packed = o_.scale_format == ScaleFormat::ue8m0_packed;
  q_.block_rows = br;
  q_.block_cols = bc;
  q_.scale_format = packed ? &formats::e8m0 : &formats::f32;
  each_block(br, bc, [&](int r0, int r1, int c0, int c1) {
    const float a = amax(r0, r1, c0, c1, AmaxOf::elements);
    float s = 0.0f;
    if (packed) {
      q_.scales.push_back(rules::packed_block_scale(a, elem_max(), s));
    } else {
      s = rules::scale_from_amax(a, elem_max(), o_.eps, o_.scale_format, FLT_MAX);
      q_.scales.push_back(bits_of(1.0f / s));
    }
    for (int r = r0; r < r1; ++r)
      for (int c = c0; c < c1; ++c) set(r, c, element(product(at(r, c), s), r, c));
  });
  if (packed)  // four codes per 32-bit word, the first in bits 7:0
    for (std::size_t i = 0; i < q_.scales.size(); i += 4) {
      std::uint32_t w = 0;
      for (std::size_t k = 0; k < 4 && i + k < q_.scales.size(); ++k)
        w |= static_cast<std::uint32_t>(q_.scales[i + k]) << (8 * k);
      q_.packed_scales.push_back(w);
    }
}

// compressed-tensors 0.20.1 FP8 (quantization/utils/helpers.py calculate_qparams;
// quantization/lifecycle/forward_helpers.py _quantize; quant_args.py round_to_quantized_type_args), every
// torch operation in the weight's dtype (o_.compute): per block the scale s = c(amax / 448) (the decode scale,
// stored as it is), an all-zero block's s the dtype's eps; each element c(x / s), clamped to [-448, 448],
// then into e4m3 (a second rounding after c's).  Its "channel" strategy is one scale per output row: the
// token scheme here.  The compressed-tensors-gpu variant is its Triton kernel
// (quantization/lifecycle/forward_helpers.py _quantize_kernel): output = tl.div_rn(x as f32, s as f32), clamped
// to [-448, 448] and cast to float8e4nv, with no rounding to the weight's dtype between.
void Reference::current_compressed_tensors(int br, int bc) {
  q_.block_rows = br;
  q_.block_cols = bc;
  q_.scale_format = &formats::f32;
  const float fmax = elem_max();
  each_block(br, bc, [&](int r0, int r1, int c0, int c1) {
    float s = in_compute(amax(r0, r1, c0, c1, AmaxOf::elements) / fmax, o_.compute);
    if (s == 0.0f) s = compute_eps(o_.compute);
    q_.scales.push_back(bits_of(s));
    for (int r = r0; r < r1; ++r)
      for (int c = c0; c < c1; ++c) {
        // The CPU path's torch division rounds to the weight's dtype; the GPU path's Triton kernel keeps f32.
        const float q = quotient(at(r, c), s);
        const float v = variant_row(o_.variant).quotient_in_f32 ? q : in_compute(q, o_.compute);
        set(r, c, element(std::isnan(v) ? v : std::clamp(v, -fmax, fmax), r, c));
      }
  });
}

// ModelOpt 0.47.0's per-tensor FP8 export (modelopt/torch/export/unified_export_hf.py _export_quantized_weight,
// the QUANTIZATION_FP8 branch; quant_utils.py to_quantized_weight): the decode scale
// s = torch.tensor(amax.item() / 448), the f64 quotient rounded to f32, which is fp32(amax / 448) (a / 448 =
// a / 7 * 2^-6 repeats with period 3 in binary, so it never lies within 2^-53 of an f32 midpoint); each element
// (w / s).to(float8_e4m3fn): a bf16 weight divided by a 0-dim f32 tensor stays bf16, torch's CPU kernel divides
// in f32 by the unrounded s and rounds the quotient to the weight's dtype (o_.compute), then e4m3 to nearest
// even (a double rounding).  An all-zero tensor has s = 0 and every code 0 / 0, NaN, as torch gives.  Its
// quotients stay within 448 (s is the tensor's own amax / 448), so torch's overflow to NaN never applies.
void Reference::current_modelopt() {
  q_.block_rows = std::max(rows(), 1);
  q_.block_cols = std::max(cols(), 1);
  q_.scale_format = &formats::f32;
  const float s = amax(0, rows(), 0, cols(), AmaxOf::elements) / elem_max();
  q_.scales.push_back(bits_of(s));
  for (int r = 0; r < rows(); ++r)
    for (int c = 0; c < cols(); ++c) set(r, c, element(in_compute(quotient(at(r, c), s), o_.compute), r, c));
}

// transformers 5.24's FineGrainedFP8 quantizer (integrations/finegrained_fp8.py, Fp8Quantize._quantize_one), the
// writer of quant_method "fp8" checkpoints with DeepSeek-V3's weight_scale_inv: the weight as f32, per block
// max_abs = torch.amax(|x|) (a NaN propagates), s = _FP8_MAX / max_abs where max_abs > 0, else 1 (a NaN or all-zero
// block); torch computes a Python scalar divided by a tensor as the tensor's reciprocal times the scalar
// (fp32(fp32(1 / max_abs) * 448)), one rounding more than TE's 448 / amax.  The stored weight_scale_inv is
// fp32(1 / s) (a decode scale), each element clamp(fp32(x * s), -448, 448) cast to e4m3 (to nearest even).
void Reference::current_transformers(int br, int bc) {
  q_.block_rows = br;
  q_.block_cols = bc;
  q_.scale_format = &formats::f32;
  const float fmax = elem_max();
  each_block(br, bc, [&](int r0, int r1, int c0, int c1) {
    const float a = amax(r0, r1, c0, c1, AmaxOf::nan_first);
    const float recip = 1.0f / a;
    const float s = a > 0.0f ? recip * fmax : 1.0f;
    q_.scales.push_back(bits_of(1.0f / s));
    for (int r = r0; r < r1; ++r)
      for (int c = c0; c < c1; ++c) {
        const float v = at(r, c) * s;
        set(r, c, element(std::isnan(v) ? v : std::clamp(v, -fmax, fmax), r, c));
      }
  });
}

// TE delayed scaling (delayed_scaling.cu): the elements take the state's scale s (fp32(x * s), decode scale
// fp32(1 / s)); then this tensor's amax goes into history slot 0 (fmaxf with what is there), the new scale
// is fp32(fp32(max_elem * 2^-margin) / a) for the history's fmaxf (max) or slot 0 (most_recent) when that
// is finite and positive (FLT_MAX for an infinite quotient), and the history rolls by one with slot 0
// zeroed.  A state without history starts with 1024 zeros.
void Reference::delayed(DelayedState& st) {
  if (st.history.empty()) st.history.assign(1024, 0.0f);
  const float s = st.scale;
  q_.block_rows = std::max(rows(), 1);
  q_.block_cols = std::max(cols(), 1);
  q_.scale_format = &formats::f32;
  q_.scales.push_back(bits_of(1.0f / s));
  for (int r = 0; r < rows(); ++r)
    for (int c = 0; c < cols(); ++c) set(r, c, element(product(at(r, c), s), r, c));
  delayed_update(st, amax(0, rows(), 0, cols(), AmaxOf::elements), el_);
}

// OCP MX: per block of one row, the e8m0 scale e = rules::mx_scale of the block's amax (the finite elements'
// under NonFinite::propagate); NaN (0xFF) for a block holding NaN or Inf under NonFinite::scale_nan.  Under
// a NaN scale every element is the element format's conversion of NaN.  Otherwise: the OCP rules (floor,
// ceil, even) divide by 2^(e - 127) exactly and round once (OCP MX v1.0 §6.3); rceil and rne multiply in
// fp32 by TE's and torchao's multiplier 2^(127 - e) (rules::mx_multiplier), then convert.
void Reference::mx() {
  if (o_.variant == Variant::torchao) return mx_torchao();
  if (variant_row(o_.variant).order == Order::gguf) return mx_gguf();
  q_.block_rows = 1;
  q_.block_cols = o_.block;
  q_.scale_format = &formats::e8m0;
  const AmaxOf of = o_.nonfinite == NonFinite::propagate ? AmaxOf::finite_ones : AmaxOf::elements;
  const bool fp32_multiply = o_.mx_rule == MxRule::rceil || o_.mx_rule == MxRule::rne;
  const Unpacked nan = unpack(formats::f32, 0x7FC00000u);
  for (int r = 0; r < rows(); ++r)
    for (int c0 = 0; c0 < cols(); c0 += o_.block) {
      const int c1 = std::min(cols(), c0 + o_.block);
      std::uint64_t e =
          rules::mx_scale(amax(r, r + 1, c0, c1, of), el_.emax(), elem_max(), el_.mantissa_bits, o_.mx_rule);
      if (o_.nonfinite == NonFinite::scale_nan && holds_nan_or_inf(r, c0, c1)) e = 0xFF;
      q_.scales.push_back(e);
      for (int c = c0; c < c1; ++c) {
        const std::uint32_t random = rbits_ ? (*rbits_)[index(r, c)] : 0;
        if (e == 0xFF) {
          set(r, c, static_cast<std::uint8_t>(round_to(el_, nan, o_.element_policy, random).code));
        } else if (fp32_multiply) {
          set(r, c, element(product(at(r, c), rules::mx_multiplier(e)), r, c));
        } else {
          Unpacked u = unpack(formats::f32, bits_of(at(r, c)));
          if (u.cls == ValueClass::finite) u.exponent -= static_cast<int>(e) - 127;
          set(r, c, static_cast<std::uint8_t>(round_to(el_, u, o_.element_policy, random).code));
        }
      }
    }
}

// torchao 0.18's to_mx (prototype/mx_formats/mx_tensor.py; docs/semantics.md §4.5a), per block of one row:
// the amax is torch.amax(|x|), a NaN propagating.  FLOOR / CEIL / EVEN: the code rules::mx_scale_torchao
// (0xFF for a NaN amax), the divisor its f32 value clamped below to 2^-126 (F32_MIN_NORMAL: code 0 divides by
// 2^-126, not 2^-127) and +Inf for 0xFF, each element fp32(x / divisor) (exact here, as the power of two
// keeps every quotient that an element can hold), then clamped and cast.  Under the NaN scale, x / Inf:
// finite elements become +-0, a NaN stays itself (quieted), +-Inf / Inf is x86's default NaN 0xFFC00000.
// RCEIL (_to_mx_rceil's CPU fallback): the code rules::mx_scale_torchao, the multiplier NaN (the descale
// itself) for 255, 2^-127 for 254, 1.0 for 0, else 2^(127 - e); each element fp32(x * multiplier), clamped,
// cast.
void Reference::mx_torchao() {
  q_.block_rows = 1;
  q_.block_cols = o_.block;
  q_.scale_format = &formats::e8m0;
  const int emax = el_.emax();
  for (int r = 0; r < rows(); ++r)
    for (int c0 = 0; c0 < cols(); c0 += o_.block) {
      const int c1 = std::min(cols(), c0 + o_.block);
      float a = 0.0f;  // torch.amax(|x|): the first NaN is the amax
      for (int c = c0; c < c1 && !std::isnan(a); ++c)
        a = std::isnan(at(r, c)) ? std::fabs(at(r, c)) : std::fmax(a, std::fabs(at(r, c)));
      if (o_.mx_rule == MxRule::rceil) {
        const float descale = a / elem_max();
        const std::uint64_t e =
            std::isnan(a) ? 0xFF : rules::mx_scale_torchao(a, emax, elem_max(), el_.mantissa_bits, MxRule::rceil);
        q_.scales.push_back(e);
        const float mult = e == 0xFF  ? descale
                           : e == 254 ? 0x1p-127f
                           : e == 0   ? 1.0f
                                      : std::ldexp(1.0f, 127 - static_cast<int>(e));
        // torch's x * NaN is the multiplier's NaN even where x is a NaN too (a NaN element of a NaN block
        // comes out positive, as the descale of |x|'s amax is): product().
        for (int c = c0; c < c1; ++c) set(r, c, element(product(at(r, c), mult), r, c));
        continue;
      }
      const std::uint64_t e =
          std::isnan(a) ? 0xFF : rules::mx_scale_torchao(a, emax, elem_max(), el_.mantissa_bits, o_.mx_rule);
      q_.scales.push_back(e);
      const int shift = e == 0 ? -126 : static_cast<int>(e) - 127;  // the divisor 2^shift (e < 0xFF)
      for (int c = c0; c < c1; ++c) {
        const float x = at(r, c);
        if (e == 0xFF) {
          const float y = std::isnan(x)   ? std::bit_cast<float>(bits_of(x) | 0x00400000u)
                          : std::isinf(x) ? std::bit_cast<float>(0xFFC00000u)
                                          : std::copysign(0.0f, x);
          set(r, c, element(y, r, c));
          continue;
        }
        Unpacked u = unpack(formats::f32, bits_of(x));
        if (u.cls == ValueClass::finite) u.exponent -= shift;
        set(r, c, static_cast<std::uint8_t>(round_to(el_, u, o_.element_policy, 0).code));
      }
    }
}

// gguf-py 0.19.0's MXFP4 quantizer (gguf/quants.py, class MXFP4, quantize_blocks lines 668-688; e8m0_to_fp32_half
// lines 663-665; docs/semantics.md §4.11), per block of 32 elements of one row, as numpy computes it in f32:
//   d = abs(blocks).max(axis=-1): the block's amax, NaN where the block holds a NaN (numpy's max propagates it);
//   e = np.where(d > 0, np.floor(np.log2(d)) - 2 + 127, 0).astype(np.uint8): numpy's f32 log2 (the f32 nearest
//       the exact log2 on every input tried: it rounds to k + 1 for an amax just below 2^(k+1), |k| >= 3), then
//       the cast: below 0 it wraps modulo 256 (an amax under 2^-125), an infinite one gives 0, as do a zero and
//       a NaN amax (d > 0 is false);
//   d = e8m0_to_fp32_half(e): the f32 bits 0x00200000 << e for e < 2, else (e - 1) << 23: 2^(e - 128), half the
//       e8m0 value, 2^127 for e = 255 (not NaN);
//   each element the index of the first least |d * k - x| over kvalues (0, 1, 2, 3, 4, 6, 8, 12, 0, -1, ...,
//       -12: the e2m1 values doubled, index = e2m1 code), each product and difference one f32 operation
//       (np.argmin: the first NaN where there is one, else the first minimum; ties toward zero, a zero +0).
void Reference::mx_gguf() {
  q_.block_rows = 1;
  q_.block_cols = o_.block;
  q_.scale_format = &formats::e8m0;
  static constexpr float kvalues[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  for (int r = 0; r < rows(); ++r)
    for (int c0 = 0; c0 < cols(); c0 += o_.block) {
      const int c1 = std::min(cols(), c0 + o_.block);
      float d = 0.0f;
      for (int c = c0; c < c1 && !std::isnan(d); ++c) {
        const float a = std::fabs(at(r, c));
        d = std::isnan(a) ? a : std::max(d, a);
      }
      std::uint32_t e = 0;
      if (d > 0.0f) {
        // numpy's float32 log2, floor, - 2 + 127 (exact in f32: small integers), then .astype(np.uint8).
        const float lg = static_cast<float>(std::log2(static_cast<double>(d)));
        const float v = std::floor(lg) - 2.0f + 127.0f;
        e = std::isinf(v) ? 0u : static_cast<std::uint32_t>(static_cast<std::int32_t>(v)) & 0xFFu;
      }
      q_.scales.push_back(e);
      const float half = std::bit_cast<float>(e < 2 ? 0x00200000u << e : (e - 1) << 23);
      for (int c = c0; c < c1; ++c) {
        const float x = at(r, c);
        int best = -1;
        float least = 0.0f;
        for (int k = 0; k < 16; ++k) {
          const float err = std::fabs(half * kvalues[k] - x);
          if (std::isnan(err)) {
            best = k;
            break;
          }
          if (best < 0 || err < least) {
            best = k;
            least = err;
          }
        }
        set(r, c, static_cast<std::uint8_t>(best));
      }
    }
}

// Two-level NVFP4 (TE core_nvfp4.cuh; docs/semantics.md §4 steps 1-7): the tensor amax gives
// S_enc = rules::nvfp4_s_enc (scale_max * 6 / amax, scale_max 448, or 256 under 4over6) and the stored
// tensor scale S_dec = fp32(1 / S_enc).  Per block: the decode scale fminf(amax * fp32(S_enc * fp32(1/6)),
// FLT_MAX) into e4m3, its element multiplier rules::nvfp4_multiplier, each element fp32(x * multiplier).
// 4over6 picks between two scales per block instead (four_over_six_block).  The torchao variant forms both
// scales its own way (rules::torchao_tensor_dec, rules::torchao_block_dec) and multiplies by
// fp32(fp32(1 / S_dec) / scale).
void Reference::nvfp4() {
  const VariantRow& v = variant_row(o_.variant);
  const int br = block_size(scheme_row(o_.scheme).block_rows, rows(), o_.block_rows);
  if (v.order == Order::compressed_tensors) return nvfp4_compressed_tensors(br);
  if (v.order == Order::modelopt) return nvfp4_modelopt(br);
  const float global = o_.tensor_amax ? *o_.tensor_amax : amax(0, rows(), 0, cols(), AmaxOf::elements);
  const bool torchao = v.order == Order::torchao;
  // torchao: S_dec = amax / 2688 itself (S_enc only names its reciprocal for the step-6 signature).
  const float s_dec =
      torchao ? rules::torchao_tensor_dec(global) : 1.0f / rules::nvfp4_s_enc(global, v.scale_max, elem_max());
  const float s_enc = torchao ? 1.0f / s_dec : rules::nvfp4_s_enc(global, v.scale_max, elem_max());
  q_.tensor_scale = bits_of(s_dec);
  q_.scale_format = &formats::e4m3;
  q_.block_rows = br;
  q_.block_cols = 16;
  const float enc_sixth = s_enc * rules::nvfp4_sixth();
  for (int r0 = 0; r0 < rows(); r0 += br)
    for (int c0 = 0; c0 < cols(); c0 += 16) {
      const int r1 = std::min(rows(), r0 + br), c1 = std::min(cols(), c0 + 16);
      if (v.choice != BlockChoice::map_to_6) {
        four_over_six_block(r0, r1, c0, c1, global, s_enc, s_dec);
        continue;
      }
      const float block_amax = amax(r0, r1, c0, c1, AmaxOf::elements);
      const std::uint64_t sc = to_e4m3(torchao ? rules::torchao_block_dec(block_amax, s_dec)
                                               : rules::nvfp4_block_dec(block_amax, enc_sixth));
      q_.scales.push_back(sc);
      const float m = rules::nvfp4_multiplier(sc, s_enc, s_dec, v.multiplier, o_.zero_scale);
      for (int r = r0; r < r1; ++r)
        for (int c = c0; c < c1; ++c) set(r, c, element(product(at(r, c), m), r, c));
    }
}

// compressed-tensors 0.20.1 NVFP4, c the weight's dtype (o_.compute):
//   global  gs = c(c(1 / max(amax, tiny)) * 2688), or 1 where that is not finite (helpers.py generate_gparam:
//           2688 / t is torch's t.reciprocal() * 2688); amax the largest of the fused projections' where
//           o_.tensor_amax gives it.  Stored as it is (weight_global_scale), the encode scale.
//   block   e4m3(clamp(fp32(gs * c(block amax / 6)), +-448)), an e4m3 zero replaced by 0.125 (code 0x20)
//           (calculate_qparams steps 1-5, _get_dtype_eps).
//   element fp32(x / fp32(scale / gs)), clamped to [-6, 6], to e2m1 to nearest even (forward_helpers.py
//           _quantize; quant_args.py cast_to_fp4's intervals are those of round-to-nearest-even).
void Reference::nvfp4_compressed_tensors(int br) {
  q_.scale_format = &formats::e4m3;
  q_.block_rows = br;
  q_.block_cols = 16;
  const Compute c = o_.compute;
  const float a =
      std::max(o_.tensor_amax ? *o_.tensor_amax : amax(0, rows(), 0, cols(), AmaxOf::elements), compute_tiny(c));
  float gs = in_compute(in_compute(1.0f / a, c) * 2688.0f, c);
  if (!std::isfinite(gs)) gs = 1.0f;
  q_.global_scale = bits_of(gs);
  const float e4m3_max = static_cast<float>(max_value(formats::e4m3));
  const float fmax = elem_max();
  for (int r0 = 0; r0 < rows(); r0 += br)
    for (int c0 = 0; c0 < cols(); c0 += 16) {
      const int r1 = std::min(rows(), r0 + br), c1 = std::min(cols(), c0 + 16);
      const float local = in_compute(amax(r0, r1, c0, c1, AmaxOf::elements) / fmax, c);
      const float s = gs * local;
      std::uint64_t sc = to_e4m3(std::isnan(s) ? s : std::clamp(s, -e4m3_max, e4m3_max));
      if (sc == 0x00 || sc == 0x80) sc = 0x20;  // 0.125 (scales == 0 is true for -0 too)
      q_.scales.push_back(sc);
      const float effective = value_of(formats::e4m3, sc) / gs;
      for (int r = r0; r < r1; ++r)
        for (int cc = c0; cc < c1; ++cc) {
          const float v = quotient(at(r, cc), effective);
          set(r, cc, element(std::isnan(v) ? v : std::clamp(v, -fmax, fmax), r, cc));
        }
    }
}

// ModelOpt 0.47.0's NVFP4 export (modelopt/torch/quantization/qtensor/nvfp4_tensor.py, NVFP4QTensor
// get_weights_scaling_factor_2, get_weights_scaling_factor, _cast_per_block_scale_to_fp8, quantize, _cast_fp4),
// every step an f32 torch operation whatever the weight's dtype (the weight's bf16 values are exact in f32):
//   tensor   S_dec = fp32(amax / 2688) (amax.float() / (6.0 * 448.0)), stored as weight_scale_2, the decode
//            scale; amax the largest of the fused projections' where o_.tensor_amax gives it (quant_utils.py
//            preprocess_linear_fusion, for every format but FP8).
//   block    fp32(block amax / fp32(6 * S_dec)), a zero replaced by 1.0, clamped to [2^-9, 448], to e4m3 to
//            nearest even: an all-zero block's scale is 1.0 (code 0x38) where TE's is 0.
//   element  fp32(x / fp32(scale * S_dec)), then _cast_fp4: torch.searchsorted on the e2m1 midpoints with the
//            odd midpoints (0.75, 1.75, 3.5) rounded up, which is round-to-nearest-even; values past 5
//            saturate to 6; the sign is (x < 0), so -0.0 gives +0 (code 0) where lowbit's e2m1 keeps -0.
//   packing  even column in the low nibble ((q[..., 1::2] << 4) | q[..., 0::2]), as lowbit's fp4x2.
void Reference::nvfp4_modelopt(int br) {
  q_.scale_format = &formats::e4m3;
  q_.block_rows = br;
  q_.block_cols = 16;
  const float a = o_.tensor_amax ? *o_.tensor_amax : amax(0, rows(), 0, cols(), AmaxOf::elements);
  const float s_dec = a / 2688.0f;
  q_.tensor_scale = bits_of(s_dec);
  const float six_dec = 6.0f * s_dec;
  for (int r0 = 0; r0 < rows(); r0 += br)
    for (int c0 = 0; c0 < cols(); c0 += 16) {
      const int r1 = std::min(rows(), r0 + br), c1 = std::min(cols(), c0 + 16);
      float s = amax(r0, r1, c0, c1, AmaxOf::elements) / six_dec;
      if (s == 0.0f) s = 1.0f;
      const std::uint64_t sc = to_e4m3(std::isnan(s) ? s : std::clamp(s, 0x1p-9f, 448.0f));
      q_.scales.push_back(sc);
      const float effective = value_of(formats::e4m3, sc) * s_dec;
      for (int r = r0; r < r1; ++r)
        for (int cc = c0; cc < c1; ++cc) {
          const float v = quotient(at(r, cc), effective);
          set(r, cc, v == 0.0f ? std::uint8_t{0} : element(v, r, cc));
        }
    }
}

// 4over6 (TE quantize_4over6_kernel.cuh at commit fca9586d; the reference quantizer
// transformer_engine/pytorch/custom_recipes/quantization_ref_nvfp4.py): base = fp32(fp32(amax / 6) * S_enc);
// the map-to-6 scale is e4m3(fminf(base, 448)), the map-to-4 scale e4m3(fminf(fp32(base * 1.5), 448)); each
// candidate converts the block with its own multiplier; the block keeps map-to-4 only when its summed
// error (four_over_six_error) is strictly smaller.
void Reference::four_over_six_block(int r0, int r1, int c0, int c1, float global, float s_enc, float s_dec) {
  const float base = amax(r0, r1, c0, c1, AmaxOf::elements) / elem_max() * s_enc;
  const float e4m3_max = static_cast<float>(max_value(formats::e4m3));
  const std::uint64_t sc4 = to_e4m3(std::fmin(base * 1.5f, e4m3_max));
  const std::uint64_t sc6 = to_e4m3(std::fmin(base, e4m3_max));
  const float m4 = rules::nvfp4_multiplier(sc4, s_enc, s_dec, Multiplier::reciprocal, o_.zero_scale);
  const float m6 = rules::nvfp4_multiplier(sc6, s_enc, s_dec, Multiplier::reciprocal, o_.zero_scale);
  BlockCodes four{}, six{};
  for (int r = r0; r < r1; ++r)
    for (int c = c0; c < c1; ++c) {
      four[(r - r0) * 16 + (c - c0)] = element(product(at(r, c), m4), r, c);
      six[(r - r0) * 16 + (c - c0)] = element(product(at(r, c), m6), r, c);
    }
  const bool pick4 =
      four_over_six_error(four, r0, r1, c0, c1, sc4, global) < four_over_six_error(six, r0, r1, c0, c1, sc6, global);
  q_.scales.push_back(pick4 ? sc4 : sc6);
  for (int r = r0; r < r1; ++r)
    for (int c = c0; c < c1; ++c) set(r, c, (pick4 ? four : six)[(r - r0) * 16 + (c - c0)]);
}

// The summed dequantization error of one 4over6 candidate: per row, from +0 in column order, |d| (or d * d
// for 4over6-mse) with d = fp32(fp32(fp32(e2m1 value * scale) * tensor amax) / 1536) - x; a 16x16 block
// adds its sixteen row sums (rows past the tensor's end count 0) as a halving tree: row i + row i+8, then
// i + i+4, i + i+2, i + i+1.
float Reference::four_over_six_error(const BlockCodes& codes, int r0, int r1, int c0, int c1, std::uint64_t scale,
                                     float global) const {
  const VariantRow& v = variant_row(o_.variant);
  const bool squared = v.choice == BlockChoice::least_squared_error;
  const float denom = elem_max() * v.scale_max;
  const float sf = value_of(formats::e4m3, scale);
  float row_sums[16] = {};
  for (int r = r0; r < r1; ++r) {
    float e = 0.0f;
    for (int c = c0; c < c1; ++c) {
      const float d = value_of(el_, codes[(r - r0) * 16 + (c - c0)]) * sf * global / denom - at(r, c);
      e = e + (squared ? d * d : std::fabs(d));
    }
    row_sums[r - r0] = e;
  }
  if (q_.block_rows == 1) return row_sums[0];
  for (int half = 8; half > 0; half /= 2)
    for (int i = 0; i < half; ++i) row_sums[i] = row_sums[i] + row_sums[i + half];
  return row_sums[0];
}

// torchao 0.18's single-level NVFP4 (prototype/mx_formats/nvfp4_tensor.py nvfp4_quantize, "multiply by
// reciprocal instead of dividing to match MSLK triton kernel numerics"): per 1x16 block the scale
// fp32(amax / 6) clamped to [2^-6, 448] (a NaN stays NaN) into e4m3, each element fp32(x * fp32(1 / scale)).
// (Earlier torchao divided, fp32(x / scale): the two differ where 1 / scale is inexact, near e2m1 ties.)
void Reference::nvfp4_1level() {
  q_.scale_format = &formats::e4m3;
  q_.block_rows = 1;
  q_.block_cols = 16;
  for (int r = 0; r < rows(); ++r)
    for (int c0 = 0; c0 < cols(); c0 += 16) {
      const int c1 = std::min(cols(), c0 + 16);
      float s = amax(r, r + 1, c0, c1, AmaxOf::elements) / elem_max();
      if (s < 0x1p-6f) s = 0x1p-6f;
      else if (448.0f < s) s = 448.0f;
      const std::uint64_t sc = to_e4m3(s);
      q_.scales.push_back(sc);
      const float reciprocal = 1.0f / value_of(formats::e4m3, sc);
      for (int c = c0; c < c1; ++c) set(r, c, element(product(at(r, c), reciprocal), r, c));
    }
}

}  // namespace

// The state half of TE's delayed scaling (delayed_scaling.cu, kernel amax_and_scale_update): the amax goes
// into history slot 0 (fmaxf with what is there), the scale is computed from the history before it rolls
// (its fmaxf under max, slot 0 under most_recent), then the history rolls by one: new[i] = old[i + 1],
// new[last] = old[0], and new slot 0 is zeroed for the next step's amax.
void delayed_update(DelayedState& st, float tensor_amax, const Format& element) {
  if (st.history.empty()) st.history.assign(1024, 0.0f);
  st.history[0] = rules::fmax_nan_drop(st.history[0], tensor_amax);
  float a = st.history[0];
  if (st.max_algorithm) {
    a = 0.0f;
    for (float h : st.history) a = rules::fmax_nan_drop(a, h);
  }
  const float scaled_max = static_cast<float>(max_value(element)) * std::ldexp(1.0f, -st.margin);
  if (std::isfinite(a) && a > 0.0f) {
    const float next = scaled_max / a;
    st.scale = std::isinf(next) ? FLT_MAX : next;
  }
  const std::vector<float> old = st.history;
  for (std::size_t i = 0; i < old.size(); ++i) st.history[i] = old[(i + 1) % old.size()];
  st.history[0] = 0.0f;
}

// torch's _amp_update_scale_ on the CPU (aten/src/ATen/native/cpu/AmpGradScalerKernels.cpp,
// _amp_update_scale_cpu_kernel, which torch/amp/grad_scaler.py GradScaler.update calls): the factors are
// doubles, so each product is float * double in double, then one conversion to float.
void grad_scaler_update(GradScalerState& st, bool found_inf) {
  if (found_inf) {
    st.scale = static_cast<float>(static_cast<double>(st.scale) * st.backoff_factor);
    st.growth_tracker = 0;
    return;
  }
  const std::int64_t successful = static_cast<std::int64_t>(st.growth_tracker) + 1;
  if (successful == st.growth_interval) {
    const float grown = static_cast<float>(static_cast<double>(st.scale) * st.growth_factor);
    if (std::isfinite(grown)) st.scale = grown;  // torch: "Do not grow the scale past fp32 bounds to inf"
    st.growth_tracker = 0;
  } else {
    st.growth_tracker = static_cast<std::int32_t>(successful);
  }
}

Quantized quantize_reference(const Tensor& xin, const Options& oin, const std::vector<std::uint32_t>* rbits,
                             DelayedState* state) {
  Options o = oin;
  require_resolved(o);
  if (is_stochastic(o.element_policy.rounding) && (!rbits || rbits->size() != xin.data.size()))
    throw std::invalid_argument("stochastic rounding needs one random value per element");
  const Tensor x = hadamard_transform(xin, o.hadamard);
  Quantized q;
  q.scheme = o.scheme;
  q.element = o.element;
  q.rows = x.rows;
  q.cols = x.cols;
  q.codes.assign(x.data.size(), 0);
  Reference ref(x, o, rbits, q);
  DelayedState local;
  switch (scheme_row(o.scheme).family) {
    case Family::current: ref.current(); break;
    case Family::delayed: ref.delayed(state ? *state : local); break;
    case Family::mx: ref.mx(); break;
    case Family::nvfp4: ref.nvfp4(); break;
    case Family::nvfp4_1level: ref.nvfp4_1level(); break;
  }
  return q;
}

}  // namespace lowbit::scale
