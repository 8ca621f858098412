// The parts of a conversion that are the same whatever computes the rounding: the results for NaN,
// infinity, zero and overflow, the profile quirks, and the final packing of a rounded magnitude.
// Both the exact path (exact.hpp) and the fast path (convert.hpp) call these; each computes the
// rounding itself (truncated magnitude, remainder, decision, tininess) independently.
#pragma once
#include <cstdint>

#include "lowbit/format.hpp"
#include "lowbit/policy.hpp"
#include "lowbit/value.hpp"

namespace lowbit::rules {

LOWBIT_HD constexpr std::int8_t signed_ternary(bool negative, int magnitude_ternary) {
  return static_cast<std::int8_t>(negative ? -magnitude_ternary : magnitude_ternary);
}

LOWBIT_HD constexpr Result max_result(const Format& to, bool negative, std::uint8_t flags) {
  return {to.encode(negative, to.max_finite_magnitude(negative)), flags, signed_ternary(negative, -1)};
}

// The smallest value of a format: zero, or 2^emin in a format without zero.
LOWBIT_HD constexpr Result smallest_result(const Format& to, bool negative, std::uint8_t flags, int magnitude_ternary) {
  return {to.encode(negative, 0), flags, signed_ternary(negative, magnitude_ternary)};
}

// Infinity where the format has it, else NaN where it has that, else ±max (the format always saturates).
LOWBIT_HD constexpr Result inf_or_nan_result(const Format& to, bool negative, std::uint8_t flags) {
  if (to.has_inf()) return {to.encode(negative, to.inf_magnitude()), flags, signed_ternary(negative, 1)};
  if (to.has_nan()) return {to.nan_code(negative, to.mantissa_mask()), flags, 0};
  return max_result(to, negative, flags);
}

// A finite value whose rounded magnitude exceeds the largest finite one (docs/semantics.md §2 "Overflow").
LOWBIT_HD constexpr Result overflow_result(const Format& to, bool negative, const Policy& p) {
  constexpr std::uint8_t f = flag::overflow | flag::inexact;
  if (p.overflow != Overflow::nosat) return max_result(to, negative, f);
  switch (p.rounding) {
    case Rounding::rtz: return max_result(to, negative, f);
    case Rounding::rup: return negative ? max_result(to, negative, f) : inf_or_nan_result(to, negative, f);
    case Rounding::rdn: return negative ? inf_or_nan_result(to, negative, f) : max_result(to, negative, f);
    // Nearest, odd and stochastic modes: an overflowed odd result must not pass for max (it would
    // mislead the second rounding that round-to-odd exists for), so it goes where rne goes.
    default: return inf_or_nan_result(to, negative, f);
  }
}

// ±Inf in.  Infinities are exact in every rounding mode (IEEE 754; gfloat's round_float); into a
// format without infinity they are an overflow: NaN (or max where there is no NaN) unless saturating.
LOWBIT_HD constexpr Result inf_result(const Format& to, bool negative, const Policy& p) {
  constexpr std::uint8_t f = flag::overflow | flag::inexact;
  if (p.overflow == Overflow::satfinite && !p.quirks.infinity_ignores_saturation) return max_result(to, negative, f);
  if (to.has_inf()) return {to.encode(negative, to.inf_magnitude()), 0, 0};
  return inf_or_nan_result(to, negative, f);
}

// The NaN style that applies to a NaN from a source of `source_bits` storage bits (0: read from text, which
// counts as wide).
LOWBIT_HD constexpr NanStyle nan_style_for(const Quirks& q, int source_bits) {
  const bool narrow = source_bits > 0 && source_bits < q.narrow_nan_below;
  const NanStyle s = narrow && q.narrow_nan_style != NanStyle::as_wide ? q.narrow_nan_style : q.nan_style;
  return s == NanStyle::as_wide ? NanStyle::preserve : s;
}

// The styles whose code ignores the payload and sets every mantissa bit.
LOWBIT_HD constexpr bool all_ones_style(NanStyle s) {
  return s == NanStyle::positive_all_ones || s == NanStyle::signed_all_ones || s == NanStyle::negative_all_ones;
}

// Quirks::nan_decode: how a NaN of a source without IEEE NaNs is read (policy.hpp).
LOWBIT_HD constexpr Unpacked decode_nan(Unpacked x, const Quirks& q) {
  if (q.nan_decode == NanDecode::by_code || x.source_nan == NanEncoding::ieee) return x;
  if (x.source_nan == NanEncoding::negative_zero) x.negative = false;
  if (q.nan_decode == NanDecode::torch_widening && x.source_nan == NanEncoding::all_ones &&
      x.source_mantissa_bits > 0) {
    // c10's fp8e4m3fn_to_fp32_value puts the code's mantissa bits (all ones) at the top of the f32
    // mantissa: a quiet NaN whose payload is those bits.
    x.payload = bits::ones(x.source_mantissa_bits);
    x.payload_bits = x.source_mantissa_bits;
    x.signaling = false;
  }
  return x;
}

LOWBIT_HD constexpr Result nan_result(const Format& to, const Unpacked& in, const Policy& p) {
  const Unpacked x = decode_nan(in, p.quirks);
  const std::uint8_t sig = x.signaling ? flag::invalid : 0;
  if (!to.has_nan()) {
    switch (p.quirks.nan_to_no_nan) {
      case NanToNoNan::plus_max: return {to.encode(false, to.max_finite_magnitude()), flag::invalid, 0};
      case NanToNoNan::flipped_zero: return {to.encode(!x.negative, 0), flag::invalid, 0};
      case NanToNoNan::unsupported: return {0, static_cast<std::uint8_t>(flag::invalid | flag::unsupported), 0};
      case NanToNoNan::negative_zero: return {to.encode(true, 0), flag::invalid, 0};
    }
  }
  const NanStyle style = nan_style_for(p.quirks, x.source_bits);
  if (all_ones_style(style)) {
    const bool negative = style == NanStyle::negative_all_ones || (style == NanStyle::signed_all_ones && x.negative);
    return {to.nan_code(negative, to.mantissa_mask()), sig, 0};
  }
  const bool negative = style == NanStyle::positive_quiet ? false : x.negative;
  if (to.nan != NanEncoding::ieee) return {to.nan_code(negative), sig, 0};
  if (p.quirks.numpy_half_nan && to.exponent_bits == 5 && to.mantissa_bits == 10 && x.payload_bits > 10) {
    std::uint64_t m = x.payload >> (x.payload_bits - 10);
    if (m == 0) m = 1;
    return {to.nan_code(x.negative, m), sig, 0};
  }
  if (style == NanStyle::quiet_signed || style == NanStyle::positive_quiet)
    return {to.nan_code(negative, std::uint64_t{1} << (to.mantissa_bits - 1)), sig, 0};
  // IEEE target: quiet bit plus the top payload bits (the bits below the source's quiet bit).
  const int mt = to.mantissa_bits;
  std::uint64_t rest = 0;
  if (x.payload_bits > 1) {
    rest = x.payload & bits::ones(x.payload_bits - 1);
    rest = x.payload_bits >= mt ? (rest >> (x.payload_bits - mt)) : (rest << (mt - x.payload_bits));
  }
  return {to.nan_code(x.negative, (std::uint64_t{1} << (mt - 1)) | rest), sig, 0};
}

LOWBIT_HD constexpr Result zero_result(const Format& to, bool negative, const Policy& p) {
  if (to.has_zero) return {to.encode(negative && to.is_signed(), 0), 0, 0};
  const bool nan = p.quirks.zero_into_no_zero == ZeroIntoNoZero::nan_unless_saturating &&
                   p.overflow != Overflow::satfinite && to.has_nan();
  if (nan) return {to.nan_code(false), flag::invalid, 0};
  return {to.encode(false, 0), flag::inexact | flag::underflow, 1};
}

// What a negative value becomes in an unsigned format; `proceed` means: round |x| as usual.
struct NegativeOutcome {
  bool proceed;
  Result result;
};
LOWBIT_HD constexpr NegativeOutcome unsigned_negative(const Format& to, const Policy& p) {
  switch (p.quirks.unsigned_negative) {
    case UnsignedNegative::magnitude: return {true, {}};
    case UnsignedNegative::nan_unless_saturating:
      if (p.overflow == Overflow::satfinite) return {false, {to.encode(false, 0), flag::inexact, 1}};
      [[fallthrough]];
    case UnsignedNegative::nan: break;
  }
  if (to.has_nan()) return {false, {to.nan_code(false), flag::invalid, 0}};
  return {false, {to.encode(false, 0), flag::invalid, 1}};
}

// Pack a rounded magnitude.  `magnitude` may exceed the largest finite one (then it overflows);
// `inexact`: something was dropped; `away`: the magnitude was rounded up; `tiny`: the result is tiny
// under the policy's tininess rule.
LOWBIT_HD constexpr Result finish(const Format& to, bool negative, std::uint64_t magnitude, bool inexact, bool away,
                                  bool tiny, const Policy& p) {
  if (magnitude > to.max_finite_magnitude(negative)) return overflow_result(to, negative, p);
  if (tiny && flushes_results(p.subnormals) && to.has_subnormals())
    return {to.encode(negative, 0), flag::underflow | flag::inexact, signed_ternary(negative, -1)};
  std::uint8_t f = 0;
  if (inexact) f = static_cast<std::uint8_t>(flag::inexact | (tiny ? flag::underflow : 0));
  return {to.encode(negative, magnitude), f, signed_ternary(negative, inexact ? (away ? 1 : -1) : 0)};
}

}  // namespace lowbit::rules
