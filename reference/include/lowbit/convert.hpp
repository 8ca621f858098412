// The fast path: integer-only, constexpr element conversion for host and device.
//
// One generic routine written as numbered steps (the shape of ml_dtypes' ConvertImpl and SoftFloat's
// roundPack): (1) NaN, infinity, zero and sign rules, (2) normalise, (3) truncate to the target's
// precision with the exponent clamped at the smallest normal one, (4) decide from the dropped bits,
// (5) tininess, (6) pack with overflow and flush-to-zero.  The exact path (exact.hpp) computes the
// same thing with rationals; the conformance suite checks the two agree on every input it can reach.
#pragma once
#include <cstdint>

#include "lowbit/bits.hpp"
#include "lowbit/format.hpp"
#include "lowbit/hd.hpp"
#include "lowbit/policy.hpp"
#include "lowbit/rules.hpp"
#include "lowbit/value.hpp"

namespace lowbit {

namespace detail {

// Compare d / 2^shift with 1/2 (d < 2^shift): -1, 0, +1.
LOWBIT_HD constexpr int compare_half(std::uint64_t d, int shift) {
  if (shift > 64) return -1;  // d < 2^64 <= 2^(shift-1)
  const std::uint64_t half = std::uint64_t{1} << (shift - 1);
  return d < half ? -1 : (d == half ? 0 : 1);
}

// floor(d * 2^k / 2^shift) for k >= 0, d < 2^shift (the result is below 2^k).
LOWBIT_HD constexpr std::uint64_t scaled_floor(std::uint64_t d, int shift, int k) {
  return shift <= k ? d << (k - shift) : bits::shr(d, shift - k);
}

// rne(d * 2^k / 2^shift) for k >= 0, d < 2^shift (the result is at most 2^k).
LOWBIT_HD constexpr std::uint64_t scaled_rne(std::uint64_t d, int shift, int k) {
  if (shift <= k) return d << (k - shift);
  const int s = shift - k;
  const std::uint64_t t = bits::shr(d, s);
  const std::uint64_t r = bits::low(d, s);
  const int c = compare_half(r, s);
  return t + ((c > 0 || (c == 0 && (t & 1))) ? 1 : 0);
}

// Step 4: does the magnitude round away from zero?  `lsb` is the last kept bit of the truncated
// magnitude code; the dropped fraction is d / 2^shift with d != 0 (callers handle exact cases).
LOWBIT_HD constexpr bool rounds_away(Rounding mode, bool negative, bool lsb, std::uint64_t d, int shift,
                                     std::uint64_t r, int n) {
  switch (mode) {
    case Rounding::rne: {
      const int c = compare_half(d, shift);
      return c > 0 || (c == 0 && lsb);
    }
    case Rounding::rna: return compare_half(d, shift) >= 0;
    case Rounding::rtz: return false;
    case Rounding::rup: return !negative;
    case Rounding::rdn: return negative;
    case Rounding::rto: return !lsb;
    case Rounding::sr_a: return scaled_floor(d, shift, n) + r >= (std::uint64_t{1} << n);
    case Rounding::sr_b: return scaled_floor(d, shift, n + 1) + 2 * r + 1 >= (std::uint64_t{1} << (n + 1));
    case Rounding::sr_c: return scaled_rne(d, shift, n) + r >= (std::uint64_t{1} << n);
  }
  return false;
}

}  // namespace detail

// Round an unpacked exact value into `to`.  `rbits` is R for the stochastic modes (R < 2^sr_bits).
LOWBIT_HD constexpr Result round_to(const Format& to, const Unpacked& x, const Policy& p, std::uint64_t rbits = 0) {
  // (1) Specials and sign rules.
  if (x.cls == ValueClass::nan) return rules::nan_result(to, x, p);
  bool negative = x.negative;
  if (negative && !to.is_signed() && x.cls != ValueClass::zero) {
    const auto o = rules::unsigned_negative(to, p);
    if (!o.proceed) return o.result;
    negative = false;
  }
  if (x.cls == ValueClass::inf) return rules::inf_result(to, negative, p);
  if (x.cls == ValueClass::zero) return rules::zero_result(to, negative, p);

  // (2) Normalise: x = sig * 2^exp with floor(log2 |x|) = e.
  const std::uint64_t sig = x.significand;
  const int exp = x.exponent;
  const int e = exp + bits::width(sig) - 1;
  const int m = to.mantissa_bits;
  const int emin = to.emin();

  // Below the smallest value of a format without zero: there is nothing lower to round to.
  if (!to.has_zero && e < emin) return rules::smallest_result(to, negative, flag::inexact | flag::underflow, 1);
  // Far above the largest binade: every rounding mode overflows.
  if (e > to.emax() + 1) return rules::overflow_result(to, negative, p);

  // (3) Truncate: the ulp is 2^(max(e, emin) - m); `shift` bits of sig fall below it.
  const int eq = e > emin ? e : emin;
  const int shift = eq - m - exp;
  std::uint64_t n = 0;
  std::uint64_t d = 0;
  if (shift <= 0) {
    n = sig << -shift;
  } else {
    n = bits::shr(sig, shift);
    d = bits::low(sig, shift);
  }
  std::uint64_t lower = (static_cast<std::uint64_t>(eq - emin) << m) + n;
  if (!to.has_zero) lower -= std::uint64_t{1} << m;  // the exponent field 0 is a normal binade

  // (4) Decide.
  const bool inexact = d != 0;
  bool away = inexact && detail::rounds_away(p.rounding, negative, lower & 1, d, shift, rbits, p.sr_bits);
  if (inexact && p.quirks.nozero_lowest_binade_rounds_up && !to.has_zero && e == emin) away = true;

  // (5) Tininess (never in a fixed-point format, where no binade is "normal").
  bool tiny = false;
  if (to.has_tiny_range() && e < emin) {
    if (p.tininess == Tininess::before || e < emin - 1) {
      tiny = true;
    } else {
      // e == emin - 1: round once more with one more bit, as if the exponent were unbounded; the
      // value is tiny unless that rounding reaches 2^emin.
      const int shift2 = shift - 1;
      const std::uint64_t n2 = shift2 <= 0 ? sig << -shift2 : bits::shr(sig, shift2);
      const std::uint64_t d2 = shift2 <= 0 ? 0 : bits::low(sig, shift2);
      const bool away2 = d2 != 0 && detail::rounds_away(p.rounding, negative, n2 & 1, d2, shift2, rbits, p.sr_bits);
      tiny = !(away2 && n2 + 1 == (std::uint64_t{1} << (m + 1)));
    }
  }

  // (6) Pack.
  return rules::finish(to, negative, lower + (away ? 1 : 0), inexact, away, tiny, p);
}

// Convert a valid code of `from` into `to`.
// Convert a valid code of `from` into `to`.
LOWBIT_HD constexpr Result convert(const Format& from, std::uint64_t code, const Format& to, const Policy& p,
                                   std::uint64_t rbits = 0) {
  if (p.quirks.identity_copies && same_format(from, to)) return {code, 0, 0};
  return round_to(to, unpack(from, code, flushes_inputs(p.subnormals)), p, rbits);
}

}  // namespace lowbit
