#include "lowbit/profile.hpp"

#include <array>

#include "lowbit/registry.hpp"

namespace lowbit {

namespace {

using R = Rounding;
using O = Overflow;
namespace F = formats;

constexpr ModeMask rn = bit(R::rne);
constexpr ModeMask ieee5 = bit(R::rne) | bit(R::rna) | bit(R::rtz) | bit(R::rup) | bit(R::rdn);
constexpr ModeMask sat_or_not = bit(O::satfinite) | bit(O::nosat);
constexpr ModeMask sat = bit(O::satfinite);
constexpr ModeMask nosat = bit(O::nosat);
constexpr ModeMask keep_only = 1u << static_cast<unsigned>(Subnormals::keep);
constexpr ModeMask all_subnormal_modes = 0xF;

// The rule tables read as tables.
// clang-format off
// ---- ocp: OCP 8-bit Floating Point v1.0 (OFP8) and Microscaling Formats v1.0 (MX) ---------------
// OFP8 §5 defines only round-to-nearest-even, with saturating and non-saturating conversion (e4m3
// non-saturating overflow gives NaN, it has no Inf).  MX §5.3: FP6/FP4 elements have no Inf/NaN and
// saturate.  The MX scale is floor(log2(amax)) - emax_elem (§6.3), i.e. e8m0 rounds toward zero.
const TargetRule ocp_rules[] = {
    {&F::e4m3, rn, R::rne, sat_or_not, O::nosat, "OFP8 v1.0 §5"},
    {&F::e5m2, rn, R::rne, sat_or_not, O::nosat, "OFP8 v1.0 §5"},
    {&F::e2m3, rn, R::rne, sat, O::satfinite, "MX v1.0 §5.3"},
    {&F::e3m2, rn, R::rne, sat, O::satfinite, "MX v1.0 §5.3"},
    {&F::e2m1, rn, R::rne, sat, O::satfinite, "MX v1.0 §5.3"},
    {&F::int8, rn, R::rne, sat, O::satfinite, "MX v1.0 §5.4"},
    {&F::e8m0, bit(R::rtz), R::rtz, sat_or_not, O::satfinite, "MX v1.0 §6.3: floor(log2)"},
};

// ---- cuda: the CUDA 13.0 toolkit's conversion functions (cuda_fp8.h, cuda_fp6.h, cuda_fp4.h,
// cuda_fp16.h, cuda_bf16.h), measured on this machine's toolkit (docs/semantics.md §3's table).
const TargetRule cuda_rules[] = {
    {&F::e4m3, rn, R::rne, sat_or_not, O::satfinite, "__nv_cvt_float_to_fp8(x, sat, __NV_E4M3)"},
    {&F::e5m2, rn, R::rne, sat_or_not, O::satfinite, "__nv_cvt_float_to_fp8(x, sat, __NV_E5M2)"},
    {&F::e2m3, rn, R::rne, sat, O::satfinite, "__nv_cvt_float_to_fp6(x, __NV_E2M3, cudaRoundNearest)"},
    {&F::e3m2, rn, R::rne, sat, O::satfinite, "__nv_cvt_float_to_fp6(x, __NV_E3M2, cudaRoundNearest)"},
    {&F::e2m1, rn, R::rne, sat, O::satfinite, "__nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest)"},
    {&F::e8m0, bit(R::rtz) | bit(R::rup), std::nullopt, sat_or_not, O::satfinite,
     "__nv_cvt_float_to_e8m0(x, sat, cudaRoundZero | cudaRoundPosInf): no default rounding"},
    {&F::f16, bit(R::rne) | bit(R::rtz) | bit(R::rup) | bit(R::rdn), R::rne, nosat, O::nosat,
     "__float2half_rn / _rz / _ru / _rd"},
    {&F::bf16, bit(R::rne) | bit(R::rtz) | bit(R::rup) | bit(R::rdn), R::rne, nosat, O::nosat,
     "__float2bfloat16_rn / _rz / _ru / _rd"},
    {&F::f32, bit(R::rne) | bit(R::rtz) | bit(R::rup) | bit(R::rdn), R::rne, nosat, O::nosat,
     "__double2float_rn / _rz / _ru / _rd"},
};

// ---- ml_dtypes (jax-ml/ml_dtypes include/float8.h, mxfloat.h): rne, non-saturating by default, with
// saturate and truncate template flags; e8m0 rounds ties up.
constexpr ModeMask ne_tz = bit(R::rne) | bit(R::rtz);
const TargetRule mldtypes_rules[] = {
    {&F::f64, ne_tz, R::rne, sat_or_not, O::nosat, "numpy"},
    {&F::f32, ne_tz, R::rne, sat_or_not, O::nosat, "numpy"},
    {&F::bf16, ne_tz, R::rne, sat_or_not, O::nosat, "ml_dtypes.bfloat16"},
    {&F::f16, ne_tz, R::rne, sat_or_not, O::nosat, "numpy float16"},
    {&F::e4m3, ne_tz, R::rne, sat_or_not, O::nosat, "float8_e4m3fn"},
    {&F::e5m2, ne_tz, R::rne, sat_or_not, O::nosat, "float8_e5m2"},
    {&F::e4m3fnuz, ne_tz, R::rne, sat_or_not, O::nosat, "float8_e4m3fnuz"},
    {&F::e5m2fnuz, ne_tz, R::rne, sat_or_not, O::nosat, "float8_e5m2fnuz"},
    {&F::e4m3b11fnuz, ne_tz, R::rne, sat_or_not, O::nosat, "float8_e4m3b11fnuz"},
    {&F::e4m3ieee, ne_tz, R::rne, sat_or_not, O::nosat, "float8_e4m3"},
    {&F::e3m4, ne_tz, R::rne, sat_or_not, O::nosat, "float8_e3m4"},
    {&F::e2m3, ne_tz, R::rne, sat_or_not, O::nosat, "float6_e2m3fn (always saturates)"},
    {&F::e3m2, ne_tz, R::rne, sat_or_not, O::nosat, "float6_e3m2fn (always saturates)"},
    {&F::e2m1, ne_tz, R::rne, sat_or_not, O::nosat, "float4_e2m1fn (always saturates)"},
    {&F::e8m0, bit(R::rna) | bit(R::rtz), R::rna, sat_or_not, O::nosat,
     "float8_e8m0fnu: a tie rounds up (rna on a positive value)"},
};

// ---- llvm: APFloat's five IEEE rounding modes, no saturating conversion (NanOnly formats overflow to
// NaN, FiniteOnly ones clamp); it asserts on NaN into a format without NaN.
const TargetRule llvm_rules[] = {
    {&F::f64, ieee5, R::rne, nosat, O::nosat, "IEEEdouble"},
    {&F::f32, ieee5, R::rne, nosat, O::nosat, "IEEEsingle"},
    {&F::tf32, ieee5, R::rne, nosat, O::nosat, "FloatTF32"},
    {&F::bf16, ieee5, R::rne, nosat, O::nosat, "BFloat"},
    {&F::f16, ieee5, R::rne, nosat, O::nosat, "IEEEhalf"},
    {&F::e4m3, ieee5, R::rne, nosat, O::nosat, "Float8E4M3FN"},
    {&F::e5m2, ieee5, R::rne, nosat, O::nosat, "Float8E5M2"},
    {&F::e4m3fnuz, ieee5, R::rne, nosat, O::nosat, "Float8E4M3FNUZ"},
    {&F::e5m2fnuz, ieee5, R::rne, nosat, O::nosat, "Float8E5M2FNUZ"},
    {&F::e4m3b11fnuz, ieee5, R::rne, nosat, O::nosat, "Float8E4M3B11FNUZ"},
    {&F::e4m3ieee, ieee5, R::rne, nosat, O::nosat, "Float8E4M3"},
    {&F::e3m4, ieee5, R::rne, nosat, O::nosat, "Float8E3M4"},
    {&F::e2m3, ieee5, R::rne, nosat, O::nosat, "Float6E2M3FN"},
    {&F::e3m2, ieee5, R::rne, nosat, O::nosat, "Float6E3M2FN"},
    {&F::e2m1, ieee5, R::rne, nosat, O::nosat, "Float4E2M1FN"},
};

// ---- te: Transformer Engine kernels cast with cvt.rn.satfinite; the MXFP8 scale is
// cvt.rp.satfinite.ue8m0x2 (docs/semantics.md §4).
const TargetRule te_rules[] = {
    {&F::e4m3, rn, R::rne, sat, O::satfinite, "cvt.rn.satfinite.e4m3x2.f32"},
    {&F::e5m2, rn, R::rne, sat, O::satfinite, "cvt.rn.satfinite.e5m2x2.f32"},
    {&F::e2m1, rn, R::rne, sat, O::satfinite, "cvt.rn.satfinite.e2m1x2.f32"},
    {&F::e8m0, bit(R::rup), R::rup, sat, O::satfinite, "cvt.rp.satfinite.ue8m0x2.f32"},
    {&F::bf16, rn, R::rne, nosat, O::nosat, "__float2bfloat16_rn"},
    {&F::f16, rn, R::rne, nosat, O::nosat, "__float2half_rn"},
    {&F::f32, rn, R::rne, nosat, O::nosat, "fp32"},
};

// ---- torchao (prototype/mx_formats): elements rne after clamping; e8m0 scale modes FLOOR (default),
// CEIL / RCEIL (round up) and EVEN; RCEIL sends Inf and values above 2^127 to 255.
const TargetRule torchao_rules[] = {
    {&F::e4m3, rn, R::rne, sat, O::satfinite, "clamp, then cast"},
    // torch's cast (data_lp.to(float8_e5m2)): a NaN is 0x7F | sign (Float8_e5m2.h), as the torch profile's.
    {&F::e5m2, rn, R::rne, sat, O::satfinite, "clamp, then torch's cast (Float8_e5m2.h: NaN 0x7F | sign)",
     NanStyle::signed_all_ones},
    {&F::e2m3, rn, R::rne, sat, O::satfinite, "f32_to_f6_e2m3_unpacked"},
    {&F::e3m2, rn, R::rne, sat, O::satfinite, "f32_to_f6_e3m2_unpacked"},
    {&F::e2m1, rn, R::rne, sat, O::satfinite, "f32_to_f4_unpacked"},
    {&F::e8m0, bit(R::rtz) | bit(R::rup) | bit(R::rne), R::rtz, nosat, O::nosat,
     "ScaleCalculationMode FLOOR (rtz), CEIL/RCEIL (rup), EVEN (rne)"},
    {&F::bf16, rn, R::rne, nosat, O::nosat, "torch"},
    {&F::f32, rn, R::rne, nosat, O::nosat, "torch"},
};

// ---- microxcaling (microsoft/microxcaling): round "nearest" is half away from zero, "even" is rne,
// "floor" truncates; elements clamp; int8 is sign-magnitude.
constexpr ModeMask mx_modes = bit(R::rna) | bit(R::rne) | bit(R::rtz);
const TargetRule microxcaling_rules[] = {
    {&F::e4m3, mx_modes, R::rna, sat, O::satfinite, "mx/elemwise_ops.py _quantize_elemwise_core"},
    {&F::e5m2, mx_modes, R::rna, sat, O::satfinite, "mx/elemwise_ops.py"},
    {&F::e2m3, mx_modes, R::rna, sat, O::satfinite, "mx/elemwise_ops.py"},
    {&F::e3m2, mx_modes, R::rna, sat, O::satfinite, "mx/elemwise_ops.py"},
    {&F::e2m1, mx_modes, R::rna, sat, O::satfinite, "mx/elemwise_ops.py"},
    {&F::int8sm, mx_modes, R::rna, sat, O::satfinite, "int8: sign-magnitude, max 127/64"},
    {&F::bf16, mx_modes, R::rna, sat_or_not, O::nosat, "mx/elemwise_ops.py"},
    {&F::f16, mx_modes, R::rna, sat_or_not, O::nosat, "mx/elemwise_ops.py"},
    {&F::e8m0, bit(R::rtz), R::rtz, sat, O::satfinite, "shared exponent: floor(log2)"},
};

// ---- torch: PyTorch 2.15.0's element casts (`x.to(dtype)`) on the CPU, x86-64 with AVX2 or AVX-512 dispatch.
// Every cast widens the source to f32 exactly and rounds that once (c10's conversion functions take a float).
// Lines are those of the 2.15.0 tag (the same files ship in the wheel under torch/include).
//  - float8_e4m3fn: torch/headeronly/util/Float8_e4m3fn.h:206-213 (fp8e4m3fn_from_fp32_value): |x| >= 480
//    and infinities give 0x7E (448), a NaN 0x7F, with the sign OR-ed in (:241); :235-237 turn a rounding carry
//    into 0x7F back into 0x7E.  Rounding is by addition of 0x7FFFF + the kept last bit (:222-229): rne.
//  - float8_e5m2: Float8_e5m2.h:117-119: |x| >= 65536 gives 0x7C (Inf), a NaN 0x7F, sign OR-ed in; rne
//    below, so 61440 rounds to Inf (no saturating cast).
//  - float8_e4m3fnuz / float8_e5m2fnuz: Float8_e4m3fnuz.h:107-109, Float8_e5m2fnuz.h:105-107: |x| >= 2^8
//    (2^16) and NaN give 0x80; a rounding carry past the largest finite value lands on 0x80 too (nosat); a
//    result of zero is +0.
//  - float8_e8m0fnu: Float8_e8m0fnu.h:61-112: the exponent field of |x| (:67, the sign is masked off),
//    rounded up when the guard bit is set and the value is not an exact 2^-127 (:78-102): nearest with ties
//    up for normal inputs, and (2^-127, 2^-126) to 2^-126; zero and everything below 2^-127 give 0x00;
//    NaN and Inf 0xFF (:70-72); 1.5 * 2^127 and above carry into 0xFF.
//  - bfloat16: the vectorised kernel's cvtfp32_bf16 (aten/src/ATen/cpu/vec/vec256/vec256_16bit_float.h:51-66,
//    vec512/vec512_bfloat16.h:47-50) blends 0xFFFF into every NaN lane; c10::BFloat16(float)
//    (torch/headeronly/util/BFloat16.h:100-108, the scalar path: strided tensors, ATEN_CPU_CAPABILITY=default,
//    and every source other than f32, which is widened to float first) returns 0x7FC0.
//  - float16: at::vec::float2half_scalar (torch/headeronly/cpu/vec/vec_half.h:12-27) and the vectorised copy
//    are F16C's vcvtps2ph: rne, a NaN quieted with its top payload bits and sign (f32 0x7F810000 -> 0x7E08).
//  - NaN sources: c10 widens float8_e4m3fn's NaN to sign | 0x7FF00000 (Float8_e4m3fn.h:132-163) and the fnuz
//    NaN 0x80 to +0x7F800001 (Float8_fnuz_cvt.h:28-31); NanDecode::torch_widening.
//  - float4_e2m1fn_x2 has no cast (c10/util/Float4_e2m1fn_x2.h defines the storage type only), nor do the
//    fp6 formats: the profile has no rule for them.
const TargetRule torch_rules[] = {
    {&F::e4m3, rn, R::rne, sat, O::satfinite, "Float8_e4m3fn.h:206-213 fp8e4m3fn_from_fp32_value (saturates)"},
    {&F::e5m2, rn, R::rne, nosat, O::nosat, "Float8_e5m2.h:117-119 fp8e5m2_from_fp32_value",
     NanStyle::signed_all_ones},
    {&F::e4m3fnuz, rn, R::rne, nosat, O::nosat, "Float8_e4m3fnuz.h:107-109"},
    {&F::e5m2fnuz, rn, R::rne, nosat, O::nosat, "Float8_e5m2fnuz.h:105-107"},
    {&F::e8m0, bit(R::rna), R::rna, nosat, O::nosat, "Float8_e8m0fnu.h:61-112 fp8e8m0fnu_from_fp32_value"},
    {&F::bf16, rn, R::rne, nosat, O::nosat, "vec256_16bit_float.h:51-66 cvtfp32_bf16 (NaN 0xFFFF); BFloat16.h:108",
     NanStyle::negative_all_ones, NanStyle::positive_quiet},
    {&F::f16, rn, R::rne, nosat, O::nosat, "vec_half.h:12-27 float2half_scalar (F16C vcvtps2ph)"},
};
// Strided tensors (the scalar c10 path of the AVX2 / AVX-512 kernels): as torch except bfloat16, where every NaN
// is c10::BFloat16's 0x7FC0 (BFloat16.h:100-108).  Measured: no other dtype depends on the layout.
const TargetRule torch_strided_rules[] = {
    torch_rules[0], torch_rules[1], torch_rules[2], torch_rules[3], torch_rules[4],
    {&F::bf16, rn, R::rne, nosat, O::nosat, "BFloat16.h:100-108 round_to_nearest_even (NaN 0x7FC0)",
     NanStyle::positive_quiet, NanStyle::positive_quiet},
    torch_rules[6],
};
// ATEN_CPU_CAPABILITY=default (no AVX2 kernels), contiguous tensors: bfloat16 as torch-strided, and float16
// from bf16, f16 and the 8-bit formats through the scalar fp16_ieee_from_fp32_value (Half.h:261-297 without
// F16C: a NaN is sign | 0x7E00, :295-297); from f32 the vectorised copy still keeps the payload.
const TargetRule torch_default_rules[] = {
    torch_rules[0], torch_rules[1], torch_rules[2], torch_rules[3], torch_rules[4], torch_strided_rules[5],
    {&F::f16, rn, R::rne, nosat, O::nosat, "f32: vectorised copy (payload kept); others: Half.h:295-297 (0x7E00)",
     NanStyle::preserve, NanStyle::quiet_signed},
};
// Before 2.13 (2.12.1's Float8_e4m3fn.h:206-208): every |x| >= 480 and every NaN became 0x7F, the sign
// OR-ed in, and a rounding carry into 0x7F was kept: rne without saturation.  The rest is as 2.15.
const TargetRule torch_212_rules[] = {
    {&F::e4m3, rn, R::rne, nosat, O::nosat, "2.12.1 Float8_e4m3fn.h:206-208: |x| >= 480 -> 0x7F (NaN)"},
    torch_rules[1], torch_rules[2], torch_rules[3], torch_rules[4], torch_rules[5], torch_rules[6],
};

// ---- xla: jaxlib 0.10.2's CPU casts (`jax.jit(lambda v: v.astype(t))`, XLA's convert on the CPU).  8-bit
// and smaller targets are rewritten by xla/codegen/emitters/transforms/expand_float_ops.cc: EmitFloatConversion
// is a port of ml_dtypes' ConvertImpl (rne, no saturation), except that
//  - bf16 and f16 into float8_e5m2 go through EmitF16ToF8e5m2 (bf16 via f32 and f16), whose NaN is the
//    constant 0x7F ("select(is_nan, 0x7F, ...)");
//  - the NaN of float4_e2m1fn is to_zero | 0x8, the -0 code, whatever the input's sign;
//  - a fnuz NaN source is read as positive ("it's positive but encoded as negative 0").
// f16 and bf16 targets from f32, bf16 and f16 are LLVM fptrunc on the CPU: f16 (F16C vcvtps2ph) quiets a NaN
// and keeps its top payload bits (f32 0x7F800001 -> 0x7E00, 0x7F810000 -> 0x7E08); bf16 keeps ml_dtypes' quiet
// signed NaN.  From the 8-bit formats both are EmitFloatConversion's extension, whose NaN is
// APFloat::getNaN with the sign: 0x7E00 | sign (e5m2 0x7D -> 0x7E00).
// XLA's CPU backend has no fp6 conversion (F6E2M3FN: "Invalid XLA PrimitiveType").
const TargetRule xla_rules[] = {
    {&F::e4m3, rn, R::rne, nosat, O::nosat, "F8E4M3FN: expand_float_ops EmitFloatConversion"},
    {&F::e5m2, rn, R::rne, nosat, O::nosat, "F8E5M2: EmitF16ToF8e5m2 from bf16/f16 (NaN 0x7F)", std::nullopt,
     NanStyle::positive_all_ones},
    {&F::e4m3fnuz, rn, R::rne, nosat, O::nosat, "F8E4M3FNUZ"},
    {&F::e5m2fnuz, rn, R::rne, nosat, O::nosat, "F8E5M2FNUZ"},
    {&F::e4m3b11fnuz, rn, R::rne, nosat, O::nosat, "F8E4M3B11FNUZ"},
    {&F::e4m3ieee, rn, R::rne, nosat, O::nosat, "F8E4M3"},
    {&F::e3m4, rn, R::rne, nosat, O::nosat, "F8E3M4"},
    {&F::e8m0, bit(R::rna), R::rna, nosat, O::nosat, "F8E8M0FNU: ml_dtypes' rule (ties up)"},
    {&F::e2m1, rn, R::rne, nosat, O::nosat, "F4E2M1FN: NaN -> 0x8"},
    {&F::bf16, rn, R::rne, nosat, O::nosat, "BF16"},
    {&F::f16, rn, R::rne, nosat, O::nosat, "F16: fptrunc (payload kept); from 8 bits: EmitFloatConversion (0x7E00)",
     NanStyle::preserve, NanStyle::quiet_signed, 16},
};

const Profile table[] = {
    {.name = "ocp",
     .description = "OCP OFP8 v1.0 and MX v1.0 specifications",
     .version = "OFP8 v1.0, MX v1.0",
     .subnormal_modes = keep_only,
     .targets = ocp_rules,
     .any_target = true,
     .fallback = {nullptr, rn, R::rne, all_overflows, O::nosat, "OCP specifies rne only"}},
    {.name = "cuda",
     .description = "CUDA 13.0 toolkit conversion functions (host path = the cvt instructions)",
     .version = "CUDA 13.0",
     .quirks = {.nan_to_no_nan = NanToNoNan::plus_max,
      .nan_style = NanStyle::positive_all_ones,
      .unsigned_negative = UnsignedNegative::magnitude,
      .zero_into_no_zero = ZeroIntoNoZero::smallest},
     .subnormal_modes = keep_only,
     .targets = cuda_rules},
    {.name = "ml_dtypes",
     .description = "jax-ml/ml_dtypes C++ casts (numpy astype)",
     .version = "ml_dtypes 0.6.0, numpy 2.4.6",
     .quirks = {.nan_to_no_nan = NanToNoNan::flipped_zero,
      .nan_style = NanStyle::quiet_signed,
      .unsigned_negative = UnsignedNegative::nan_unless_saturating,
      .zero_into_no_zero = ZeroIntoNoZero::nan_unless_saturating,
      .numpy_half_nan = true,
      .identity_copies = true,
      .nozero_lowest_binade_rounds_up = true,
      .infinity_ignores_saturation = true},
     .subnormal_modes = keep_only,
     .targets = mldtypes_rules},
    {.name = "llvm",
     .description = "LLVM APFloat convert()",
     .version = "APFloat (not run here)",
     .quirks = {.nan_to_no_nan = NanToNoNan::unsupported},
     .subnormal_modes = keep_only,
     .targets = llvm_rules},
    {.name = "te",
     .description = "NVIDIA Transformer Engine kernels",
     .version = "Transformer Engine kernels (not run here)",
     .quirks = {.nan_to_no_nan = NanToNoNan::plus_max,
      .nan_style = NanStyle::positive_all_ones,
      .unsigned_negative = UnsignedNegative::magnitude,
      .zero_into_no_zero = ZeroIntoNoZero::smallest},
     .subnormal_modes = keep_only,
     .targets = te_rules},
    {.name = "torchao",
     .description = "torchao prototype/mx_formats element casts, to_mx and NVFP4",
     .version = "torchao 0.18.0 (MX and NVFP4 compared; fp4 / fp6 casts of NaN from source)",
     .quirks = {.nan_to_no_nan = NanToNoNan::plus_max, .nan_style = NanStyle::preserve},
     .subnormal_modes = keep_only,
     .targets = torchao_rules},
    {.name = "torch",
     .description = "PyTorch element casts, contiguous CPU tensors (AVX2/AVX-512 dispatch)",
     .version = "torch 2.15.0",
     .quirks = {.nan_style = NanStyle::preserve,
      .nan_decode = NanDecode::torch_widening,
      .unsigned_negative = UnsignedNegative::magnitude,
      .zero_into_no_zero = ZeroIntoNoZero::smallest,
      .identity_copies = true,
      .nozero_lowest_binade_rounds_up = true},
     .subnormal_modes = keep_only,
     .targets = torch_rules},
    {.name = "torch-strided",
     .description = "PyTorch element casts, strided CPU tensors (AVX2/AVX-512 dispatch)",
     .version = "torch 2.15.0",
     .quirks = {.nan_style = NanStyle::preserve,
      .nan_decode = NanDecode::torch_widening,
      .unsigned_negative = UnsignedNegative::magnitude,
      .zero_into_no_zero = ZeroIntoNoZero::smallest,
      .identity_copies = true,
      .nozero_lowest_binade_rounds_up = true},
     .subnormal_modes = keep_only,
     .targets = torch_strided_rules},
    {.name = "torch-default",
     .description = "PyTorch element casts, contiguous CPU tensors, ATEN_CPU_CAPABILITY=default dispatch",
     .version = "torch 2.15.0",
     .quirks = {.nan_style = NanStyle::preserve,
      .nan_decode = NanDecode::torch_widening,
      .unsigned_negative = UnsignedNegative::magnitude,
      .zero_into_no_zero = ZeroIntoNoZero::smallest,
      .identity_copies = true,
      .nozero_lowest_binade_rounds_up = true},
     .subnormal_modes = keep_only,
     .targets = torch_default_rules},
    {.name = "torch-2.12",
     .description = "PyTorch before 2.13: float8_e4m3fn does not saturate",
     .version = "torch 2.12.1",
     .quirks = {.nan_style = NanStyle::preserve,
      .nan_decode = NanDecode::torch_widening,
      .unsigned_negative = UnsignedNegative::magnitude,
      .zero_into_no_zero = ZeroIntoNoZero::smallest,
      .identity_copies = true,
      .nozero_lowest_binade_rounds_up = true},
     .subnormal_modes = keep_only,
     .targets = torch_212_rules},
    {.name = "xla",
     .description = "XLA's CPU casts (jax astype under jit)",
     .version = "jaxlib 0.10.2",
     .quirks = {.nan_to_no_nan = NanToNoNan::negative_zero,
      .nan_style = NanStyle::quiet_signed,
      .nan_decode = NanDecode::fnuz_positive,
      .unsigned_negative = UnsignedNegative::nan_unless_saturating,
      .zero_into_no_zero = ZeroIntoNoZero::nan_unless_saturating,
      .identity_copies = true,
      .nozero_lowest_binade_rounds_up = true},
     .subnormal_modes = keep_only,
     .targets = xla_rules},
    {.name = "microxcaling",
     .description = "microsoft/microxcaling MX emulation",
     .version = "microxcaling (not run here)",
     .subnormal_modes = keep_only,
     .int8_sign_magnitude = true,
     .targets = microxcaling_rules},
    {.name = "p3109",
     .description = "IEEE P3109 interim report v4.0 (gfloat reference)",
     .version = "gfloat 0.5.2",
     .subnormal_modes = all_subnormal_modes,
     .tininess_choice = true,
     .any_target = true,
     .fallback = {nullptr, all_roundings, R::rne, all_overflows, O::nosat, "P3109 defines every mode"}},
};

// clang-format on

std::string modes_text(ModeMask m, bool rounding) {
  std::string s;
  auto add = [&](auto value) {
    if (m & bit(value)) s += (s.empty() ? "" : ", ") + std::string(name(value));
  };
  if (rounding)
    for (Rounding r : all<Rounding>()) add(r);
  else
    for (Overflow o : all<Overflow>()) add(o);
  return s;
}

}  // namespace

std::span<const Profile> profiles() { return table; }

const Profile* find_profile(std::string_view n) {
  for (const Profile& p : table)
    if (n == p.name) return &p;
  if (n == "ml-dtypes" || n == "mldtypes") return find_profile("ml_dtypes");
  return nullptr;
}

std::optional<Resolved> resolve(const Profile* profile, const Format& target, const PolicyRequest& req,
                                std::string& error, std::string* argument) {
  auto fail = [&](const char* arg, std::string message) -> std::optional<Resolved> {
    error = std::move(message);
    if (argument) *argument = arg;
    return std::nullopt;
  };
  Resolved out{{}, &target};
  Policy& p = out.policy;
  p.sr_bits = req.sr_bits;
  if (!profile) {
    p.rounding = req.rounding.value_or(Rounding::rne);
    p.overflow = req.overflow.value_or(Overflow::nosat);
    p.subnormals = req.subnormals.value_or(Subnormals::keep);
    p.tininess = req.tininess.value_or(Tininess::after);
    return out;
  }
  const Format* t = &target;
  if (profile->int8_sign_magnitude && t == &formats::int8) t = &formats::int8sm;
  out.target = t;
  const TargetRule* rule = nullptr;
  for (const TargetRule& r : profile->targets)
    if (r.target == t) rule = &r;
  if (!rule) {
    if (!profile->any_target) {
      return fail("to", std::string("profile ") + profile->name + " has no conversion into " + t->name);
    }
    rule = &profile->fallback;
  }
  p.quirks = profile->quirks;
  if (rule->nan_style) p.quirks.nan_style = *rule->nan_style;
  if (rule->narrow_nan_style) p.quirks.narrow_nan_style = *rule->narrow_nan_style;
  if (rule->narrow_nan_below) p.quirks.narrow_nan_below = *rule->narrow_nan_below;
  if (req.rounding) {
    if (!(rule->roundings & bit(*req.rounding))) {
      return fail("rounding", std::string("profile ") + profile->name + " has no " + name(*req.rounding) +
                                  " conversion into " + t->name + " (it has " + modes_text(rule->roundings, true) +
                                  ")");
    }
    p.rounding = *req.rounding;
  } else if (rule->default_rounding) {
    p.rounding = *rule->default_rounding;
  } else {
    return fail("rounding", std::string("profile ") + profile->name + " has no default rounding into " + t->name +
                                "; name one of " + modes_text(rule->roundings, true));
  }
  if (req.overflow) {
    if (!(rule->overflows & bit(*req.overflow))) {
      return fail("overflow", std::string("profile ") + profile->name + " has no " + name(*req.overflow) +
                                  " conversion into " + t->name + " (it has " + modes_text(rule->overflows, false) +
                                  ")");
    }
    p.overflow = *req.overflow;
  } else {
    p.overflow = rule->default_overflow;
  }
  const Subnormals s = req.subnormals.value_or(Subnormals::keep);
  if (!(profile->subnormal_modes & (1u << static_cast<unsigned>(s)))) {
    return fail("subnormals", std::string("profile ") + profile->name + " has no " + name(s) + " mode");
  }
  p.subnormals = s;
  if (req.tininess && *req.tininess != Tininess::after && !profile->tininess_choice) {
    return fail("tininess", std::string("profile ") + profile->name + " has no choice of tininess detection");
  }
  p.tininess = req.tininess.value_or(Tininess::after);
  return out;
}

}  // namespace lowbit
