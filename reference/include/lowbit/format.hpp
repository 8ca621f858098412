// One descriptor row per number format; every other constant is derived from the row.
//
// The row follows the structure of LLVM's fltSemantics and ml_dtypes' traits: widths, bias, and the
// encodings of the non-finite values as enums (see docs/semantics.md §1 for the table of facts).
// Everything here is constexpr and usable in device code.
#pragma once
#include <cstdint>

#include "lowbit/bits.hpp"
#include "lowbit/hd.hpp"

namespace lowbit {

// How the sign is stored.
enum class Signedness : std::uint8_t {
  sign_magnitude,   // a sign bit above the magnitude (every float format)
  unsigned_,        // no sign bit (e8m0, ue4m3, unsigned P3109 formats)
  twos_complement,  // int8 with an implicit scale: 0x80 is the most negative value
};

// Where NaN lives.
enum class NanEncoding : std::uint8_t {
  none,           // no NaN (e2m1, e2m3, e3m2, int8)
  ieee,           // exponent all ones, mantissa non-zero (f16, bf16, e5m2, ...)
  all_ones,       // the all-ones magnitude, either sign (e4m3fn 0x7F/0xFF, e8m0 0xFF, ue4m3 0x7F)
  negative_zero,  // the code of -0 (fnuz formats and signed P3109: 0x80); such formats have one zero
};

// Where infinity lives.
enum class InfEncoding : std::uint8_t {
  none,  // no infinity
  ieee,  // exponent all ones, mantissa zero
  top,   // the largest magnitude code that is not NaN (P3109 extended formats)
};

struct Format {
  const char* name;
  int bits;  // width as the format's specification counts it (tf32: 19)
  int exponent_bits;
  int mantissa_bits;
  int bias;
  Signedness signedness = Signedness::sign_magnitude;
  NanEncoding nan = NanEncoding::ieee;
  InfEncoding inf = InfEncoding::ieee;
  // false: the exponent field 0 is an ordinary binade, there is no zero and no subnormal (e8m0).
  bool has_zero = true;
  // Storage: the code is stored shifted left by this many zero bits (tf32 lives in the f32 layout).
  int code_shift = 0;

  // ---- widths -------------------------------------------------------------------------------
  LOWBIT_HD constexpr bool is_signed() const { return signedness != Signedness::unsigned_; }
  LOWBIT_HD constexpr int magnitude_bits() const { return exponent_bits + mantissa_bits; }
  LOWBIT_HD constexpr int code_bits() const { return magnitude_bits() + (is_signed() ? 1 : 0); }
  LOWBIT_HD constexpr int storage_bits() const {
    return code_bits() + code_shift > bits ? code_bits() + code_shift : bits;
  }
  LOWBIT_HD constexpr int hex_digits() const { return (storage_bits() + 3) / 4; }
  LOWBIT_HD constexpr std::uint64_t magnitude_mask() const { return bits::ones(magnitude_bits()); }
  LOWBIT_HD constexpr std::uint64_t mantissa_mask() const { return bits::ones(mantissa_bits); }
  // A fixed-point format (int8): no exponent field, every value a multiple of one ulp.
  LOWBIT_HD constexpr bool is_fixed_point() const { return exponent_bits == 0; }

  // ---- specials -----------------------------------------------------------------------------
  LOWBIT_HD constexpr bool has_nan() const { return nan != NanEncoding::none; }
  LOWBIT_HD constexpr bool has_inf() const { return inf != InfEncoding::none; }
  LOWBIT_HD constexpr bool has_negative_zero() const {
    return has_zero && signedness == Signedness::sign_magnitude && nan != NanEncoding::negative_zero;
  }
  LOWBIT_HD constexpr bool has_subnormals() const { return has_zero && !is_fixed_point() && mantissa_bits > 0; }
  // Whether a result can be tiny (IEEE 754-2019 §7.5): nonzero values below 2^emin exist between zero and the
  // smallest normal binade.  True with subnormals, and also for a format with zero and no mantissa bits
  // (P3109 precision 1), where such values round to 0 or 2^emin; never in a fixed-point format.
  LOWBIT_HD constexpr bool has_tiny_range() const { return has_zero && !is_fixed_point(); }
  // Magnitude code of +infinity (meaningful only when has_inf()).
  LOWBIT_HD constexpr std::uint64_t inf_magnitude() const {
    if (inf == InfEncoding::ieee) return bits::ones(exponent_bits) << mantissa_bits;
    return magnitude_mask() - (nan == NanEncoding::all_ones ? 1 : 0);
  }
  // Largest magnitude code of a finite value of the given sign.
  LOWBIT_HD constexpr std::uint64_t max_finite_magnitude(bool negative = false) const {
    if (negative && signedness == Signedness::twos_complement) return magnitude_mask() + 1;
    if (has_inf()) return inf_magnitude() - 1;
    if (nan == NanEncoding::all_ones) return magnitude_mask() - 1;
    return magnitude_mask();
  }

  // ---- exponents ----------------------------------------------------------------------------
  // Exponent of the smallest normal binade (for a fixed-point format, the exponent that makes the
  // ulp 2^(emin - mantissa_bits)).
  LOWBIT_HD constexpr int emin() const { return has_zero ? 1 - bias : -bias; }
  // Value of a magnitude code as significand * 2^exponent (finite codes only).
  LOWBIT_HD constexpr std::uint64_t magnitude_significand(std::uint64_t m) const {
    const std::uint64_t field = m >> mantissa_bits;
    const std::uint64_t mant = m & mantissa_mask();
    if (has_zero && field == 0) return mant;
    if (is_fixed_point()) return m;
    return (std::uint64_t{1} << mantissa_bits) | mant;
  }
  LOWBIT_HD constexpr int magnitude_exponent(std::uint64_t m) const {
    const int field = static_cast<int>(m >> mantissa_bits);
    if (is_fixed_point() || (has_zero && field == 0)) return emin() - mantissa_bits;
    return field - bias - mantissa_bits;
  }
  // floor(log2(largest finite value)).
  LOWBIT_HD constexpr int emax() const {
    const std::uint64_t m = max_finite_magnitude();
    return magnitude_exponent(m) + bits::width(magnitude_significand(m)) - 1;
  }

  // ---- codes --------------------------------------------------------------------------------
  // A code is valid when its low code_shift bits are zero and it fits the format's width.
  LOWBIT_HD constexpr bool valid_code(std::uint64_t code) const {
    return bits::low(code, code_shift) == 0 && bits::shr(code >> code_shift, code_bits()) == 0;
  }
  LOWBIT_HD constexpr std::uint64_t sign_bit() const { return is_signed() ? std::uint64_t{1} << magnitude_bits() : 0; }
  // Storage code of a signed magnitude.  A zero magnitude gives -0 only where the format has it.
  LOWBIT_HD constexpr std::uint64_t encode(bool negative, std::uint64_t magnitude) const {
    std::uint64_t c = magnitude;
    if (negative && magnitude != 0) {
      if (signedness == Signedness::twos_complement)
        c = (bits::ones(code_bits()) + 1 - magnitude) & bits::ones(code_bits());
      else if (signedness == Signedness::sign_magnitude) c |= sign_bit();
    } else if (negative && has_negative_zero()) {
      c |= sign_bit();
    }
    return c << code_shift;
  }
  LOWBIT_HD constexpr bool code_negative(std::uint64_t code) const {
    return is_signed() && ((code >> code_shift) & sign_bit()) != 0;
  }
  // Magnitude code of a storage code (two's complement: the absolute value).
  LOWBIT_HD constexpr std::uint64_t code_magnitude(std::uint64_t code) const {
    const std::uint64_t c = code >> code_shift;
    if (signedness == Signedness::twos_complement && code_negative(code))
      return (bits::ones(code_bits()) + 1 - c) & bits::ones(code_bits());
    return c & magnitude_mask();
  }
  LOWBIT_HD constexpr bool is_nan_code(std::uint64_t code) const {
    const std::uint64_t m = code_magnitude(code);
    switch (nan) {
      case NanEncoding::none: return false;
      case NanEncoding::ieee: return (m >> mantissa_bits) == bits::ones(exponent_bits) && (m & mantissa_mask()) != 0;
      case NanEncoding::all_ones: return m == magnitude_mask();
      case NanEncoding::negative_zero: return code_negative(code) && m == 0;
    }
    return false;
  }
  LOWBIT_HD constexpr bool is_inf_code(std::uint64_t code) const {
    return has_inf() && !is_nan_code(code) && code_magnitude(code) == inf_magnitude();
  }
  // The NaN code of a sign (sign ignored where the format has one NaN).
  LOWBIT_HD constexpr std::uint64_t nan_code(bool negative, std::uint64_t ieee_mantissa = 0) const {
    switch (nan) {
      case NanEncoding::none: return 0;
      case NanEncoding::ieee:
        return ((negative ? sign_bit() : 0) | (bits::ones(exponent_bits) << mantissa_bits) | ieee_mantissa)
               << code_shift;
      case NanEncoding::all_ones: return ((negative ? sign_bit() : 0) | magnitude_mask()) << code_shift;
      case NanEncoding::negative_zero: return sign_bit() << code_shift;
    }
    return 0;
  }
  // A subnormal code (non-zero, exponent field zero) in a format with subnormals.
  LOWBIT_HD constexpr bool is_subnormal_code(std::uint64_t code) const {
    if (!has_subnormals() || is_nan_code(code)) return false;
    const std::uint64_t m = code_magnitude(code);
    return m != 0 && (m >> mantissa_bits) == 0;
  }
};

// Whether two rows describe the same format (names aside).
LOWBIT_HD constexpr bool same_format(const Format& a, const Format& b) {
  return a.bits == b.bits && a.exponent_bits == b.exponent_bits && a.mantissa_bits == b.mantissa_bits &&
         a.bias == b.bias && a.signedness == b.signedness && a.nan == b.nan && a.inf == b.inf &&
         a.has_zero == b.has_zero && a.code_shift == b.code_shift;
}

// ---- the built-in rows (docs/semantics.md §1) --------------------------------------------------------
// One row per line reads as the table it is.
// clang-format off
namespace formats {
using S = Signedness;
using N = NanEncoding;
using I = InfEncoding;
inline constexpr Format f64{.name = "f64", .bits = 64, .exponent_bits = 11, .mantissa_bits = 52, .bias = 1023};
inline constexpr Format f32{.name = "f32", .bits = 32, .exponent_bits = 8, .mantissa_bits = 23, .bias = 127};
inline constexpr Format tf32{.name = "tf32", .bits = 19, .exponent_bits = 8, .mantissa_bits = 10, .bias = 127,
                             .code_shift = 13};
inline constexpr Format bf16{.name = "bf16", .bits = 16, .exponent_bits = 8, .mantissa_bits = 7, .bias = 127};
inline constexpr Format f16{.name = "f16", .bits = 16, .exponent_bits = 5, .mantissa_bits = 10, .bias = 15};
inline constexpr Format e4m3{.name = "e4m3", .bits = 8, .exponent_bits = 4, .mantissa_bits = 3, .bias = 7,
                             .nan = N::all_ones, .inf = I::none};
inline constexpr Format e5m2{.name = "e5m2", .bits = 8, .exponent_bits = 5, .mantissa_bits = 2, .bias = 15};
inline constexpr Format e4m3fnuz{.name = "e4m3fnuz", .bits = 8, .exponent_bits = 4, .mantissa_bits = 3, .bias = 8,
                                 .nan = N::negative_zero, .inf = I::none};
inline constexpr Format e5m2fnuz{.name = "e5m2fnuz", .bits = 8, .exponent_bits = 5, .mantissa_bits = 2, .bias = 16,
                                 .nan = N::negative_zero, .inf = I::none};
inline constexpr Format e4m3b11fnuz{.name = "e4m3b11fnuz", .bits = 8, .exponent_bits = 4, .mantissa_bits = 3,
                                    .bias = 11, .nan = N::negative_zero, .inf = I::none};
inline constexpr Format e4m3ieee{.name = "e4m3ieee", .bits = 8, .exponent_bits = 4, .mantissa_bits = 3, .bias = 7};
inline constexpr Format e3m4{.name = "e3m4", .bits = 8, .exponent_bits = 3, .mantissa_bits = 4, .bias = 3};
inline constexpr Format e2m3{.name = "e2m3", .bits = 6, .exponent_bits = 2, .mantissa_bits = 3, .bias = 1,
                             .nan = N::none, .inf = I::none};
inline constexpr Format e3m2{.name = "e3m2", .bits = 6, .exponent_bits = 3, .mantissa_bits = 2, .bias = 3,
                             .nan = N::none, .inf = I::none};
inline constexpr Format e2m1{.name = "e2m1", .bits = 4, .exponent_bits = 2, .mantissa_bits = 1, .bias = 1,
                             .nan = N::none, .inf = I::none};
inline constexpr Format e8m0{.name = "e8m0", .bits = 8, .exponent_bits = 8, .mantissa_bits = 0, .bias = 127,
                             .signedness = S::unsigned_, .nan = N::all_ones, .inf = I::none, .has_zero = false};
inline constexpr Format ue4m3{.name = "ue4m3", .bits = 8, .exponent_bits = 4, .mantissa_bits = 3, .bias = 7,
                              .signedness = S::unsigned_, .nan = N::all_ones, .inf = I::none};
// MXINT8 element (OCP MX v1.0 §5.4): two's complement with an implicit scale of 2^-6.  As a
// fixed-point row: no exponent field, 7 magnitude bits, ulp 2^(emin - 7) with emin = 1 - bias = 1.
inline constexpr Format int8{.name = "int8", .bits = 8, .exponent_bits = 0, .mantissa_bits = 7, .bias = 0,
                             .signedness = S::twos_complement, .nan = N::none, .inf = I::none};
// microsoft/microxcaling stores int8 elements as sign-magnitude (max 127/64, no -2).
inline constexpr Format int8sm{.name = "int8sm", .bits = 8, .exponent_bits = 0, .mantissa_bits = 7, .bias = 0,
                               .nan = N::none, .inf = I::none};

inline constexpr Format builtin[] = {f64,      f32,         tf32,     bf16, f16,  e4m3, e5m2, e4m3fnuz,
                                     e5m2fnuz, e4m3b11fnuz, e4m3ieee, e3m4, e2m3, e3m2, e2m1, e8m0,
                                     ue4m3,    int8,        int8sm};
}  // namespace formats
// clang-format on

// An exact power of two as a double (constexpr; used by the compile-time checks below).
constexpr double exp2_exact(int e) {
  double r = 1.0;
  for (; e > 0; --e) r *= 2.0;
  for (; e < 0; ++e) r *= 0.5;
  return r;
}
constexpr double magnitude_value(const Format& f, std::uint64_t m) {
  return static_cast<double>(f.magnitude_significand(m)) * exp2_exact(f.magnitude_exponent(m));
}
constexpr double max_value(const Format& f) { return magnitude_value(f, f.max_finite_magnitude()); }
constexpr double min_normal_value(const Format& f) { return exp2_exact(f.emin()); }
constexpr double min_subnormal_value(const Format& f) {
  return f.has_zero ? exp2_exact(f.emin() - f.mantissa_bits) : exp2_exact(f.emin());
}

// Cross-check of the derived constants against the table in docs/semantics.md §1.
namespace formats::check {
static_assert(max_value(f32) == 0x1.fffffep127 && min_normal_value(f32) == 0x1p-126 &&
              min_subnormal_value(f32) == 0x1p-149);
static_assert(max_value(f64) == 0x1.fffffffffffffp1023 && min_subnormal_value(f64) == 0x1p-1074);
static_assert(max_value(tf32) == 0x1.ffcp127 && min_subnormal_value(tf32) == 0x1p-136);
static_assert(max_value(bf16) == 0x1.fep127 && min_subnormal_value(bf16) == 0x1p-133);
static_assert(max_value(f16) == 65504 && min_normal_value(f16) == 0x1p-14 && min_subnormal_value(f16) == 0x1p-24);
static_assert(max_value(e4m3) == 448 && e4m3.max_finite_magnitude() == 0x7E && min_normal_value(e4m3) == 0x1p-6 &&
              min_subnormal_value(e4m3) == 0x1p-9);
static_assert(max_value(e5m2) == 57344 && e5m2.max_finite_magnitude() == 0x7B && e5m2.inf_magnitude() == 0x7C &&
              min_subnormal_value(e5m2) == 0x1p-16);
static_assert(max_value(e4m3fnuz) == 240 && e4m3fnuz.max_finite_magnitude() == 0x7F &&
              min_normal_value(e4m3fnuz) == 0x1p-7 && min_subnormal_value(e4m3fnuz) == 0x1p-10);
static_assert(max_value(e5m2fnuz) == 57344 && min_normal_value(e5m2fnuz) == 0x1p-15 &&
              min_subnormal_value(e5m2fnuz) == 0x1p-17);
static_assert(max_value(e4m3b11fnuz) == 30 && min_normal_value(e4m3b11fnuz) == 0x1p-10 &&
              min_subnormal_value(e4m3b11fnuz) == 0x1p-13);
static_assert(max_value(e4m3ieee) == 240 && e4m3ieee.inf_magnitude() == 0x78 &&
              min_subnormal_value(e4m3ieee) == 0x1p-9);
static_assert(max_value(e3m4) == 15.5 && min_normal_value(e3m4) == 0.25 && min_subnormal_value(e3m4) == 0x1p-6);
static_assert(max_value(e2m3) == 7.5 && min_normal_value(e2m3) == 1 && min_subnormal_value(e2m3) == 0.125);
static_assert(max_value(e3m2) == 28 && min_normal_value(e3m2) == 0.25 && min_subnormal_value(e3m2) == 0.0625);
static_assert(max_value(e2m1) == 6 && min_normal_value(e2m1) == 1 && min_subnormal_value(e2m1) == 0.5);
static_assert(max_value(e8m0) == 0x1p127 && e8m0.max_finite_magnitude() == 0xFE && min_normal_value(e8m0) == 0x1p-127);
static_assert(max_value(ue4m3) == 448 && ue4m3.max_finite_magnitude() == 0x7E && ue4m3.storage_bits() == 8);
static_assert(max_value(int8) == 127.0 / 64 && int8.max_finite_magnitude(true) == 128 &&
              min_subnormal_value(int8) == 0x1p-6);
static_assert(int8.encode(true, 128) == 0x80 && int8.encode(true, 1) == 0xFF && int8.code_magnitude(0x80) == 128);
static_assert(tf32.storage_bits() == 32 && tf32.valid_code(0x3F802000) && !tf32.valid_code(0x3F801000));
static_assert(e2m1.valid_code(0x7) && e2m1.valid_code(0xF) && !e2m1.valid_code(0x10));
static_assert(e4m3.is_nan_code(0x7F) && e4m3.is_nan_code(0xFF) && !e4m3.is_nan_code(0x7E));
static_assert(e5m2.is_nan_code(0x7D) && e5m2.is_inf_code(0xFC) && e4m3fnuz.is_nan_code(0x80));
}  // namespace formats::check

}  // namespace lowbit
