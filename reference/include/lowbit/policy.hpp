// Policy: how a real number becomes a code.  Passed explicitly to every conversion; there is no
// global floating-point state (no fesetround, no rounding-mode global as in SoftFloat).
#pragma once
#include <cstdint>

#include "lowbit/hd.hpp"
#include "lowbit/named.hpp"

namespace lowbit {

// docs/semantics.md §2.  rem is the dropped fraction of one ulp, in [0, 1).
enum class Rounding : std::uint8_t {
  rne,   // ties to even
  rna,   // ties away from zero
  rtz,   // toward zero
  rup,   // toward +inf
  rdn,   // toward -inf
  rto,   // to odd: truncate, then set the last bit if anything was dropped
  sr_a,  // P3109 StochasticA (gfloat StochasticFastest): floor(rem*2^N) + R >= 2^N
  sr_b,  // P3109 StochasticB (gfloat StochasticFast):    floor(rem*2^(N+1)) + 2R + 1 >= 2^(N+1)
  sr_c,  // P3109 StochasticC (gfloat Stochastic):        rne(rem*2^N) + R >= 2^N
};
inline constexpr Named<Rounding> rounding_names[] = {
    {Rounding::rne, "rne", "round to nearest, ties to even"},
    {Rounding::rna, "rna", "round to nearest, ties away from zero"},
    {Rounding::rtz, "rtz", "toward zero"},
    {Rounding::rup, "rup", "toward +inf"},
    {Rounding::rdn, "rdn", "toward -inf"},
    {Rounding::rto, "rto", "to odd"},
    {Rounding::sr_a, "sr-a", "stochastic, P3109 StochasticA"},
    {Rounding::sr_b, "sr-b", "stochastic, P3109 StochasticB"},
    {Rounding::sr_c, "sr-c", "stochastic, P3109 StochasticC"},
};
constexpr const auto& names_of(Rounding) { return rounding_names; }
LOWBIT_HD constexpr bool is_stochastic(Rounding r) {
  return r == Rounding::sr_a || r == Rounding::sr_b || r == Rounding::sr_c;
}

enum class Overflow : std::uint8_t {
  satfinite,     // clamp to ±max; ±Inf also becomes ±max (P3109 SatFinite, CUDA __NV_SATFINITE)
  satpropagate,  // clamp finite overflow to ±max; ±Inf stays ±Inf where the format has it (P3109 SatPropagate)
  nosat,         // IEEE 754 §7.4 rules by rounding direction
};
inline constexpr Named<Overflow> overflow_names[] = {
    {Overflow::satfinite, "satfinite", "clamp to +-max, infinities included"},
    {Overflow::satpropagate, "satpropagate", "clamp finite overflow to +-max, infinities stay"},
    {Overflow::nosat, "nosat", "IEEE 754 overflow by rounding direction"},
};
constexpr const auto& names_of(Overflow) { return overflow_names; }

enum class Subnormals : std::uint8_t {
  keep,
  ftz,      // tiny results flush to signed zero
  daz,      // subnormal inputs read as signed zero
  ftz_daz,  // both
};
inline constexpr Named<Subnormals> subnormal_names[] = {
    {Subnormals::keep, "keep", "subnormal inputs and results kept"},
    {Subnormals::ftz, "ftz", "tiny results flush to signed zero"},
    {Subnormals::daz, "daz", "subnormal inputs read as signed zero"},
    {Subnormals::ftz_daz, "ftz-daz", "both"},
};
constexpr const auto& names_of(Subnormals) { return subnormal_names; }
LOWBIT_HD constexpr bool flushes_results(Subnormals s) { return s == Subnormals::ftz || s == Subnormals::ftz_daz; }
LOWBIT_HD constexpr bool flushes_inputs(Subnormals s) { return s == Subnormals::daz || s == Subnormals::ftz_daz; }

// When a result is "tiny" (IEEE 754 §7.5): after rounding to the format's precision with an unbounded
// exponent (x86's choice and the default), or before rounding (Arm's).
enum class Tininess : std::uint8_t { after, before };
inline constexpr Named<Tininess> tininess_names[] = {
    {Tininess::after, "after", "tiny after rounding (x86)"},
    {Tininess::before, "before", "tiny before rounding (Arm)"},
};
constexpr const auto& names_of(Tininess) { return tininess_names; }

// Status flags as a TestFloat-style mask (the file format uses these values).
namespace flag {
inline constexpr std::uint8_t inexact = 1;
inline constexpr std::uint8_t underflow = 2;
inline constexpr std::uint8_t overflow = 4;
inline constexpr std::uint8_t infinite = 8;  // divide by zero; never raised by a conversion
inline constexpr std::uint8_t invalid = 16;
// Not an IEEE flag: the selected profile's implementation has no defined result for this input
// (LLVM asserts on NaN into FP4/FP6).  The command line turns it into an error.
inline constexpr std::uint8_t unsupported = 128;
}  // namespace flag

// ---- implementation-defined choices, set by profiles (docs/semantics.md §3) ----------------------------

// NaN into a format that has no NaN (e2m1, e2m3, e3m2, int8).
enum class NanToNoNan : std::uint8_t {
  plus_max,       // +max with invalid (built-in default; CUDA's cvt)
  flipped_zero,   // the zero code whose sign is the NaN's sign flipped (ml_dtypes' float4/float6)
  unsupported,    // no defined result (LLVM APFloat asserts)
  negative_zero,  // the -0 code whatever the NaN's sign (XLA's CPU casts into float4_e2m1fn)
};
inline constexpr Named<NanToNoNan> nan_to_no_nan_names[] = {
    {NanToNoNan::plus_max, "plus_max"},
    {NanToNoNan::flipped_zero, "flipped_zero"},
    {NanToNoNan::unsupported, "unsupported"},
    {NanToNoNan::negative_zero, "negative_zero"},
};
constexpr const auto& names_of(NanToNoNan) { return nan_to_no_nan_names; }
// NaN into a format that has NaN.
enum class NanStyle : std::uint8_t {
  preserve,           // keep the sign and the top payload bits, set the quiet bit (IEEE 754 §6.2.3)
  positive_all_ones,  // one canonical positive NaN with every mantissa bit set (CUDA: 0x7FFF, 0x7F)
  quiet_signed,       // the quiet NaN of the input's sign, payload dropped (ml_dtypes' ConvertImpl)
  signed_all_ones,    // the NaN of the input's sign with every mantissa bit set (PyTorch's float8_e5m2)
  negative_all_ones,  // every bit set whatever the input's sign (PyTorch's vectorised f32 -> bf16: 0xFFFF)
  positive_quiet,     // the positive quiet NaN, payload dropped (PyTorch's scalar c10::BFloat16: 0x7FC0)
  // Only as Quirks::narrow_nan_style: NaNs of narrow sources take the style of f32's (nan_style).
  as_wide,
};
inline constexpr Named<NanStyle> nan_style_names[] = {
    {NanStyle::preserve, "preserve"},
    {NanStyle::positive_all_ones, "positive_all_ones"},
    {NanStyle::quiet_signed, "quiet_signed"},
    {NanStyle::signed_all_ones, "signed_all_ones"},
    {NanStyle::negative_all_ones, "negative_all_ones"},
    {NanStyle::positive_quiet, "positive_quiet"},
    {NanStyle::as_wide, "as_wide", "narrow sources: as f32 sources (read as preserve where it is the style itself)"},
};
constexpr const auto& names_of(NanStyle) { return nan_style_names; }
// A negative value (not -0) into an unsigned format.
enum class UnsignedNegative : std::uint8_t {
  nan,                    // NaN with invalid (built-in default)
  magnitude,              // the sign is ignored (CUDA's e8m0 conversion)
  nan_unless_saturating,  // NaN, or the smallest value under satfinite (ml_dtypes' float8_e8m0fnu)
};
inline constexpr Named<UnsignedNegative> unsigned_negative_names[] = {
    {UnsignedNegative::nan, "nan"},
    {UnsignedNegative::magnitude, "magnitude"},
    {UnsignedNegative::nan_unless_saturating, "nan_unless_saturating"},
};
constexpr const auto& names_of(UnsignedNegative) { return unsigned_negative_names; }
// Zero into a format without zero (e8m0).
enum class ZeroIntoNoZero : std::uint8_t {
  smallest,               // the smallest value, 2^-127 (built-in default; CUDA)
  nan_unless_saturating,  // NaN, or the smallest value under satfinite (ml_dtypes)
};
inline constexpr Named<ZeroIntoNoZero> zero_into_no_zero_names[] = {
    {ZeroIntoNoZero::smallest, "smallest"},
    {ZeroIntoNoZero::nan_unless_saturating, "nan_unless_saturating"},
};
constexpr const auto& names_of(ZeroIntoNoZero) { return zero_into_no_zero_names; }

// How the NaN of a source without IEEE NaNs (the fn formats' all-ones code, the fnuz formats' negative-zero
// code, e8m0's 0xFF) is read before the NaN rule applies.
enum class NanDecode : std::uint8_t {
  by_code,        // the code's sign bit is the NaN's sign; no payload (built-in default; ml_dtypes)
  fnuz_positive,  // as by_code, except that the fnuz NaN is positive (XLA's expand_float_ops)
  // The fnuz NaN is positive; an all-ones NaN keeps its mantissa bits as a quiet payload (PyTorch widens
  // float8_e4m3fn 0x7F to f32 0x7FF00000 and the fnuz NaN 0x80 to 0x7F800001 before every cast).
  torch_widening,
};
inline constexpr Named<NanDecode> nan_decode_names[] = {
    {NanDecode::by_code, "by_code"},
    {NanDecode::fnuz_positive, "fnuz_positive"},
    {NanDecode::torch_widening, "torch_widening"},
};
constexpr const auto& names_of(NanDecode) { return nan_decode_names; }

struct Quirks {
  NanToNoNan nan_to_no_nan = NanToNoNan::plus_max;
  NanStyle nan_style = NanStyle::preserve;
  // The NaN style for NaNs from sources of fewer than `narrow_nan_below` storage bits (by default every
  // source narrower than f32: bf16, f16 and the 8-bit formats), which PyTorch and XLA convert by other paths
  // than f32's; as_wide: the same as nan_style.
  NanStyle narrow_nan_style = NanStyle::as_wide;
  std::uint8_t narrow_nan_below = 32;
  NanDecode nan_decode = NanDecode::by_code;
  UnsignedNegative unsigned_negative = UnsignedNegative::nan;
  ZeroIntoNoZero zero_into_no_zero = ZeroIntoNoZero::smallest;
  // numpy's own f32/f64 -> float16 cast (npy_floatbits_to_halfbits): a NaN keeps its top 10 payload bits
  // without setting the quiet bit, and an empty payload becomes 1 (f32 0x7FA00000 -> 0x7D00).
  bool numpy_half_nan = false;
  // A conversion from a format into itself copies the code, signaling NaNs included (numpy astype).
  bool identity_copies = false;
  // In a format without zero (e8m0), values strictly inside the lowest binade (2^-127, 2^-126) round up
  // to 2^-126 whatever the rounding mode says (ml_dtypes' float8_e8m0fnu from f32/bf16 subnormals:
  // 0x00400001..0x005FFFFF -> 0x01).
  bool nozero_lowest_binade_rounds_up = false;
  // An infinite input ignores satfinite: it stays infinite where the format has infinity, else becomes
  // NaN, else max (ml_dtypes' ConvertImpl returns infinity() before it looks at its saturate flag).
  bool infinity_ignores_saturation = false;
  LOWBIT_HD constexpr bool operator==(const Quirks&) const = default;
};

struct Policy {
  Rounding rounding = Rounding::rne;
  Overflow overflow = Overflow::nosat;
  Subnormals subnormals = Subnormals::keep;
  Tininess tininess = Tininess::after;
  int sr_bits = 0;  // N, for the stochastic modes: the random value R lies in [0, 2^N); 1 <= N <= 32
  Quirks quirks{};
};

inline constexpr int max_sr_bits = 32;

// What every conversion returns: the code, the IEEE flags raised, and the ternary value
// (the sign of rounded - exact, as MPFR reports it; 0 when exact or when the result is NaN).
struct Result {
  std::uint64_t code = 0;
  std::uint8_t flags = 0;
  std::int8_t ternary = 0;
  LOWBIT_HD constexpr bool operator==(const Result&) const = default;
};

}  // namespace lowbit
