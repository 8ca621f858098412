// The per-block scale rules of the scaling schemes, written once for the host (src/scale.cpp) and the
// device quantizers (device/src/quantize.cu).  Each function is the fp32 operation order of scale.cpp,
// docs/semantics.md §4: every arithmetic step is one IEEE binary32 operation rounded to nearest even (the
// builds forbid FMA contraction: -ffp-contract=off on the host, --fmad=false on the device, and nvcc's
// default -prec-div=true makes device division IEEE).  The fmaxf / fminf steps of the kernels this follows
// return the non-NaN operand for every NaN, quiet or signaling; glibc's fmaxf follows IEEE 754-2008 maxNum
// instead and returns NaN for a signaling operand, so the rules use fmax_nan_drop / fmin_nan_drop below,
// not the library.  Classification is done on bit patterns so that no library call differs between the two.
#pragma once
#include <cfloat>
#include <cmath>
#include <cstdint>

#include "lowbit/convert.hpp"
#include "lowbit/format.hpp"
#include "lowbit/hd.hpp"
#include "lowbit/policy.hpp"
#include "lowbit/scale.hpp"

namespace lowbit::scale::rules {

LOWBIT_HD inline std::uint32_t bits_of(float f) { return __builtin_bit_cast(std::uint32_t, f); }
LOWBIT_HD inline float float_of(std::uint32_t b) { return __builtin_bit_cast(float, b); }
LOWBIT_HD inline bool is_nan(float f) { return (bits_of(f) & 0x7FFFFFFFu) > 0x7F800000u; }
LOWBIT_HD inline bool is_inf(float f) { return (bits_of(f) & 0x7FFFFFFFu) == 0x7F800000u; }

// fmaxf / fminf as CUDA's max.f32 / min.f32 and TE's kernels have them: a NaN operand (quiet or signaling)
// is dropped, two NaNs give the canonical NaN.  Equal operands (+0 and -0 included) give the first.
LOWBIT_HD inline float fmax_nan_drop(float a, float b) {
  if (is_nan(a)) return is_nan(b) ? float_of(0x7FFFFFFFu) : b;
  if (is_nan(b)) return a;
  return a < b ? b : a;
}
LOWBIT_HD inline float fmin_nan_drop(float a, float b) {
  if (is_nan(a)) return is_nan(b) ? float_of(0x7FFFFFFFu) : b;
  if (is_nan(b)) return a;
  return b < a ? b : a;
}

// The value of an e8m0 code as an f32 (2^(code - 127); code 0 is the f32 subnormal 2^-127; 0xFF NaN).
LOWBIT_HD inline float e8m0_value(std::uint64_t code) {
  if (code == 0xFF) return float_of(0x7FC00000u);
  return code >= 1 ? float_of(static_cast<std::uint32_t>(code) << 23) : float_of(0x00400000u);
}

// The value of an e4m3 code as an f32 (exact: s.eeee.mmm, bias 7; 0x7F / 0xFF NaN).
LOWBIT_HD inline float e4m3_value(std::uint64_t code) {
  const auto c = static_cast<std::uint32_t>(code & 0xFF);
  const std::uint32_t sign = (c & 0x80u) << 24;
  const std::uint32_t mag = c & 0x7Fu;
  if (mag == 0x7Fu) return float_of(sign | 0x7FC00000u);
  const std::uint32_t e = mag >> 3, m = mag & 7u;
  std::uint32_t b = 0;
  if (e == 0) {
    if (m == 0) return float_of(sign);
    // m * 2^-9: normalise the three-bit subnormal significand into an f32 normal number.
    int k = 2;  // position of the leading one of m
    while (((m >> k) & 1u) == 0) --k;
    const std::uint32_t frac = (m & ((1u << k) - 1u)) << (23 - k);
    b = (static_cast<std::uint32_t>(k - 9 + 127) << 23) | frac;
  } else {
    b = ((e - 7 + 127) << 23) | (m << 20);
  }
  return float_of(sign | b);
}

// TE compute_scale_from_amax (recipe_common.cuh), docs/semantics.md §4; ScaleFormat::pow2 keeps the scale's
// sign and exponent (rounds it down to 2^k), any other format leaves it.
LOWBIT_HD inline float scale_from_amax(float amax_in, float fp8_max, float eps, ScaleFormat format,
                                       float value_for_inf) {
  const bool pow2 = format == ScaleFormat::pow2;
  float a = amax_in;
  if (a < eps) a = eps;  // a NaN amax compares false and skips this
  if (is_inf(a) || a == 0.0f || is_nan(a)) return 1.0f;
  float s = fp8_max / a;
  if (is_inf(s)) s = value_for_inf;
  if (pow2) s = float_of(bits_of(s) & 0xFF800000u);  // keep sign and exponent: round down to 2^k
  return s;
}

// DeepGEMM's ue8m0-packed block scale (sm_100 path): sf = fp32(max(amax, 1e-4) / max) rounded up to a power
// of two (ceil_to_ue8m0) is the e8m0 code returned; the element multiplier fp32(1 / sf) goes to `mult`.
LOWBIT_HD inline std::uint64_t packed_block_scale(float a, float elem_max, float& mult) {
  const float sf = fmax_nan_drop(a, 1e-4f) / elem_max;  // a NaN amax of any kind gives 1e-4
  Policy up;
  up.rounding = Rounding::rup;
  up.overflow = Overflow::satfinite;
  constexpr Format f32 = formats::f32;
  constexpr Format e8m0 = formats::e8m0;
  const std::uint64_t code = convert(f32, bits_of(sf), e8m0, up).code;
  mult = 1.0f / e8m0_value(code);
  return code;
}

// The MX shared scale (an e8m0 code) of a block amax, with the element's emax, largest value and mantissa
// width given.
LOWBIT_HD inline std::uint64_t mx_scale(float a, int emax, float elem_max, int mantissa_bits, MxRule rule) {
  if (is_nan(a)) return 0xFF;
  if (rule == MxRule::rceil || rule == MxRule::rne) {
    const float descale = a * (1.0f / elem_max);
    Policy p;
    p.rounding = rule == MxRule::rceil ? Rounding::rup : Rounding::rne;
    p.overflow = Overflow::satfinite;
    p.quirks.unsigned_negative = UnsignedNegative::magnitude;
    constexpr Format f32 = formats::f32;
    constexpr Format e8m0 = formats::e8m0;
    return convert(f32, bits_of(descale), e8m0, p).code;
  }
  if (is_inf(a)) return 0xFF;
  std::uint32_t b = bits_of(a);
  if (rule == MxRule::even) {
    // torchao EVEN: add half an ulp at the element's mantissa width, then keep sign and exponent.
    b = (b + (1u << (23 - mantissa_bits - 1))) & 0xFF800000u;
  }
  int pow2 = static_cast<int>((b >> 23) & 0xFF) - 127;  // an f32 subnormal amax reads as 2^-127
  if (rule == MxRule::ceil && (b & 0x7FFFFFu) != 0) pow2 += 1;
  int se = pow2 - emax;
  se = se < -127 ? -127 : (se > 127 ? 127 : se);
  return static_cast<std::uint64_t>(se + 127);
}

// torchao 0.18's to_mx scale (mx_tensor.py) of a block amax that is not NaN (a NaN amax is 0xFF under every
// mode).  FLOOR / CEIL / EVEN read the biased exponent field of the amax's bits, an Inf amax included (255:
// 2^128, so an Inf block of e4m3 elements gets 2^(128 - 8), code 0xF7), then clamp to [-127, 128].  RCEIL's
// CPU fallback (_to_mx_rceil): descale = fp32(amax / elem_max); Inf gives 254; otherwise
// clamp(ceil(log2(descale)), -127, 127) + 127, log2 as an f32 (torch.log2 of a float32 tensor; here the exact
// log2 rounded to f32, through double).  Where descale lies just above a power of two 2^k (k != 0) whose log2
// rounds to k, this gives k where cvt.rp (rules::mx_scale's rceil) gives k + 1.
inline std::uint64_t mx_scale_torchao(float a, int emax, float elem_max, int mantissa_bits, MxRule rule) {
  if (rule == MxRule::rceil) {
    const float descale = a / elem_max;
    if (is_inf(descale)) return 254;
    const float l = static_cast<float>(std::log2(static_cast<double>(descale)));
    float e = std::ceil(l);  // -inf for a zero descale
    e = e < -127.0f ? -127.0f : (e > 127.0f ? 127.0f : e);
    return static_cast<std::uint64_t>(static_cast<int>(e) + 127);
  }
  std::uint32_t b = bits_of(a);
  if (rule == MxRule::even) b = (b + (1u << (23 - mantissa_bits - 1))) & 0xFF800000u;
  int pow2 = static_cast<int>((b >> 23) & 0xFF) - 127;
  if (rule == MxRule::ceil && (b & 0x7FFFFFu) != 0) pow2 += 1;
  int se = pow2 - emax;
  se = se < -127 ? -127 : (se > 128 ? 128 : se);
  return static_cast<std::uint64_t>(se + 127);
}

// The MX element multiplier 2^(127 - e) of a scale code e as TE and torchao form it: e = 254 gives the f32
// subnormal 2^-127; a NaN scale (0xFF) gives 0 (its elements are the element format's NaN conversion).
// Written without branches (selects only), so that a loop over a row of scales vectorises.
LOWBIT_HD inline float mx_multiplier(std::uint64_t sc) {
  const int k = 254 - static_cast<int>(sc);  // the biased f32 exponent of 2^(127 - e)
  const std::uint32_t b = k >= 1 ? static_cast<std::uint32_t>(k) << 23 : 0x00400000u;
  return float_of(sc == 0xFF ? 0u : b);
}

// The OCP MX rules (floor, ceil, even) divide by the power of two exactly: the fp32 product y = v * mult is
// that quotient whenever it is a normal number (or v is zero or infinite).  True when the element v needs the
// exact route instead (v finite and nonzero, y not a normal f32 number).
LOWBIT_HD inline bool mx_needs_exact(float v, float y) {
  const std::uint32_t bv = bits_of(v) & 0x7FFFFFFFu;
  const std::uint32_t by = bits_of(y) & 0x7FFFFFFFu;
  const bool normal = by >= 0x00800000u && by < 0x7F800000u;
  return bv != 0 && bv < 0x7F800000u && !normal;
}

// The OCP rules' products y = v * 2^(127 - e) (mx_multiplier) of every non-zero v of a row whose largest scale
// code is e_max are normal numbers when |v| >= 2^(e_max - 253) (a smaller e only makes y larger); that bound as an
// f32 pattern, 0 where it lies below the smallest subnormal (no non-zero |v| is under it).
LOWBIT_HD inline std::uint32_t mx_normal_product_floor(std::uint32_t e_max) {
  const int te = static_cast<int>(e_max) - 253;
  return te >= -126 ? static_cast<std::uint32_t>(te + 127) << 23 : te >= -149 ? 1u << (te + 149) : 0u;
}

// NVFP4 step 2: S_enc = fminf(scale_max * elem_max / amax, FLT_MAX), 1 for a zero amax or a zero quotient
// (fminf drops a NaN quotient: FLT_MAX).
LOWBIT_HD inline float nvfp4_s_enc(float global, float scale_max, float elem_max) {
  float s_enc = fmin_nan_drop(scale_max * elem_max / global, FLT_MAX);
  if (global == 0.0f || s_enc == 0.0f) s_enc = 1.0f;
  return s_enc;
}

// NVFP4 step 5 before the e4m3 conversion: fminf(block_amax * fp32(S_enc * fp32(1/6)), FLT_MAX) (a NaN
// product gives FLT_MAX).  `enc_sixth` is S_enc * fp32(1/6).
LOWBIT_HD inline float nvfp4_block_dec(float block_amax, float enc_sixth) {
  const float v = block_amax * enc_sixth;
  return v < FLT_MAX ? v : FLT_MAX;
}
LOWBIT_HD inline float nvfp4_sixth() { return 1.0f / 6.0f; }  // fp32(1/6), as TE's kernel spells it

// torchao 0.18's two-level NVFP4 (prototype/mx_formats/nvfp4_tensor.py): the tensor decode scale
// per_tensor_amax_to_scale = fp32(amax / (448 * 6)), and a block's scale before its e4m3 cast,
// torch.clamp(fp32(fp32(block_amax / 6) / S_dec), 2^-6, 448), a NaN staying NaN (torch.clamp keeps NaN).
LOWBIT_HD inline float torchao_tensor_dec(float global) { return global / 2688.0f; }
LOWBIT_HD inline float torchao_block_dec(float block_amax, float s_dec) {
  const float v = block_amax / 6.0f / s_dec;
  if (v != v) return v;
  return v < 0x1p-6f ? 0x1p-6f : (v > 448.0f ? 448.0f : v);
}

// NVFP4 step 6: the element multiplier of a block scale code.  Multiplier::reciprocal: fminf(1 / (scale *
// S_dec), FLT_MAX) (0 for a zero scale under ZeroScale::reference); Multiplier::bf16_quotient (fast-math):
// bf16(fminf(S_enc / scale, bf16 max)), whatever the zero-scale rule; Multiplier::dec_quotient (torchao):
// fp32(fp32(1 / S_dec) / scale), no bound.
LOWBIT_HD inline float nvfp4_multiplier(std::uint64_t sc, float s_enc, float s_dec, Multiplier multiplier,
                                        ZeroScale zero_scale) {
  const float scale_f = e4m3_value(sc);
  if (multiplier == Multiplier::dec_quotient) return 1.0f / s_dec / scale_f;  // torchao: (1 / S_dec) / scale
  if (multiplier == Multiplier::bf16_quotient) {
    const float m = fmin_nan_drop(s_enc / scale_f, float_of(0x7F7F0000u));
    constexpr Format f32 = formats::f32;
    constexpr Format bf16 = formats::bf16;
    constexpr Policy exact{};  // rne; the way back is exact
    return float_of(static_cast<std::uint32_t>(
        convert(bf16, convert(f32, bits_of(m), bf16, exact).code, f32, exact).code));
  }
  if (sc == 0 && zero_scale == ZeroScale::reference) return 0.0f;
  return fmin_nan_drop(1.0f / (scale_f * s_dec), FLT_MAX);
}

}  // namespace lowbit::scale::rules
