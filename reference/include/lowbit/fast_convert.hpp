// The 32-bit element conversion: the same rounding as lowbit::convert (convert.hpp) for sources that are
// IEEE binary formats of at most 32 bits (f32, bf16, f16, ...), computed with 32-bit significands.
//
// Why a second path: convert() takes any format as source, so its significands are 64-bit and its
// shifts guarded for every width; on a GPU each 64-bit shift, compare or add is two or more
// instructions, and the device quantizers spent most of their time there.  Here a source significand
// holds at most 24 bits and the target at most 23 mantissa bits, so every value fits a 32-bit word and
// a dropped fraction d / 2^shift is compared with 1/2 in 32 bits.  With the format rows and the policy
// as constants (the kernels pass constexpr copies) every format and policy test folds away and what is
// left is a handful of selects.
//
// The steps are convert.hpp's, in the same order: specials (rules.hpp, shared), normalise, truncate at
// max(e, emin), decide from the dropped bits, tininess, pack (rules::finish, shared).  Where the two
// differ is only the arithmetic width; conformance/fast_convert holds them equal (code, flags and
// ternary) on every input of f32, bf16 and f16 for the element/policy pairs the device quantizers and
// the profiles use (every f32 input in the full tier), and on random formats and policies.
//
// Constexpr, integer-only, no heap: usable from host and device code like the rest of the element code.
#pragma once
#include <cstdint>

#include "lowbit/bits.hpp"
#include "lowbit/format.hpp"
#include "lowbit/hd.hpp"
#include "lowbit/policy.hpp"
#include "lowbit/rules.hpp"
#include "lowbit/value.hpp"

namespace lowbit::fast {

// Whether the 32-bit path computes `from` -> `to` under `p`: an IEEE-encoded source of at most 32 bits
// with a significand of at most 24 bits; a floating-point target (sign-magnitude or unsigned, not fixed
// point, stored unshifted) of at most 32 code bits and 23 mantissa bits; a deterministic rounding mode
// (the stochastic modes need the random value's N bits beside the dropped ones: convert() keeps them).
LOWBIT_HD constexpr bool applies(const Format& from, const Format& to, const Policy& p) {
  const bool ieee_source = from.signedness == Signedness::sign_magnitude && from.nan == NanEncoding::ieee &&
                           from.inf == InfEncoding::ieee && from.has_zero && from.code_shift == 0 &&
                           from.exponent_bits >= 2 && from.exponent_bits <= 8 && from.mantissa_bits >= 1 &&
                           from.mantissa_bits <= 23 && from.code_bits() <= 32;
  const bool float_target = to.signedness != Signedness::twos_complement && !to.is_fixed_point() &&
                            to.code_shift == 0 && to.code_bits() <= 32 && to.mantissa_bits <= 23 &&
                            to.exponent_bits <= 8;
  return ieee_source && float_target && !is_stochastic(p.rounding);
}

namespace detail {

// Bits needed to hold v (0 for v == 0), 32-bit.
LOWBIT_HD constexpr int width32(std::uint32_t v) {
#if defined(__CUDA_ARCH__)
  if (!__builtin_is_constant_evaluated()) return 32 - __clz(static_cast<int>(v));
#endif
  return bits::width(v);
}

// The dropped part of sig below `shift` bits, and the kept part.  A shift of 25 or more drops all of a
// 24-bit significand; it is clamped to 31 so that the shifts stay defined, which keeps every answer:
// d < 2^24 is below half an ulp for any shift of 25 or more, as convert.hpp's compare_half finds for
// shifts up to 64 and beyond.
struct Split {
  std::uint32_t kept, dropped;
  int shift;  // clamped to [1, 31]
};
LOWBIT_HD constexpr Split split(std::uint32_t sig, int shift) {
  const int s = shift < 31 ? shift : 31;
  return {sig >> s, sig & ((1u << s) - 1u), s};
}

// convert.hpp's rounds_away for the deterministic modes, with d / 2^s the dropped fraction (d != 0).
LOWBIT_HD constexpr bool rounds_away(Rounding mode, bool negative, bool lsb, std::uint32_t d, int s) {
  const std::uint32_t half = 1u << (s - 1);
  switch (mode) {
    case Rounding::rne: return d > half || (d == half && lsb);
    case Rounding::rna: return d >= half;
    case Rounding::rtz: return false;
    case Rounding::rup: return !negative;
    case Rounding::rdn: return negative;
    case Rounding::rto: return !lsb;
    default: return false;  // stochastic: never here (applies())
  }
}

}  // namespace detail

// Convert a valid code of `from` into `to` under `p`, where applies(from, to, p) holds: the same Result
// (code, flags, ternary) as lowbit::convert(from, code, to, p).
LOWBIT_HD constexpr Result convert(const Format& from, std::uint32_t code, const Format& to, const Policy& p) {
  if (p.quirks.identity_copies && same_format(from, to)) return {code, 0, 0};
  const int mf = from.mantissa_bits;
  const int mag_bits = from.exponent_bits + mf;
  const std::uint32_t a = code & ((1u << mag_bits) - 1u);
  const bool sign = ((code >> mag_bits) & 1u) != 0;
  const std::uint32_t inf_pattern = ((1u << from.exponent_bits) - 1u) << mf;
  const std::uint32_t field = a >> mf;
  const std::uint32_t mant = a & ((1u << mf) - 1u);

  // (1) Specials and sign rules, as round_to takes them (the results are rules.hpp's).
  if (a > inf_pattern) {
    Unpacked nan;
    nan.cls = ValueClass::nan;
    nan.negative = sign;
    nan.payload = mant;
    nan.payload_bits = mf;
    nan.signaling = (mant >> (mf - 1)) == 0;
    // Where the NaN came from, as unpack() records it: the narrow-source NaN quirks (xla, torch) read it.
    nan.source_bits = from.storage_bits();
    nan.source_nan = from.nan;
    nan.source_mantissa_bits = mf;
    return rules::nan_result(to, nan, p);
  }
  if (a == 0 || (field == 0 && flushes_inputs(p.subnormals))) return rules::zero_result(to, sign, p);
  bool negative = sign;
  if (negative && !to.is_signed()) {
    const auto o = rules::unsigned_negative(to, p);
    if (!o.proceed) return o.result;
    negative = false;
  }
  if (a == inf_pattern) return rules::inf_result(to, negative, p);

  // (2) Normalise: x = sig * 2^exp with floor(log2 |x|) = e (sig < 2^24).
  const std::uint32_t sig = field != 0 ? (mant | (1u << mf)) : mant;
  const int exp = (field != 0 ? static_cast<int>(field) : 1) - from.bias - mf;
  const int e = field != 0 ? static_cast<int>(field) - from.bias : exp + detail::width32(sig) - 1;
  const int m = to.mantissa_bits;
  const int emin = to.emin();
  if (!to.has_zero && e < emin) return rules::smallest_result(to, negative, flag::inexact | flag::underflow, 1);
  if (e > to.emax() + 1) return rules::overflow_result(to, negative, p);

  // (3) Truncate at the ulp 2^(max(e, emin) - m).  shift >= -m (sig has e - exp + 1 bits), so a left
  // shift keeps n below 2^(m + 1).
  const int eq = e > emin ? e : emin;
  const int shift = eq - m - exp;
  std::uint32_t n = 0, d = 0;
  int s = 1;
  if (shift <= 0) {
    n = sig << -shift;
  } else {
    const detail::Split t = detail::split(sig, shift);
    n = t.kept, d = t.dropped, s = t.shift;
  }
  std::uint32_t lower = (static_cast<std::uint32_t>(eq - emin) << m) + n;
  if (!to.has_zero) lower -= 1u << m;  // the exponent field 0 is a normal binade

  // (4) Decide.
  const bool inexact = d != 0;
  bool away = inexact && detail::rounds_away(p.rounding, negative, (lower & 1u) != 0, d, s);
  if (inexact && p.quirks.nozero_lowest_binade_rounds_up && !to.has_zero && e == emin) away = true;

  // (5) Tininess, as round_to decides it (after rounding: once more with one more bit at e = emin - 1).
  bool tiny = false;
  if (to.has_tiny_range() && e < emin) {  // also a format with a zero and no subnormals (P3109 precision 1)
    if (p.tininess == Tininess::before || e < emin - 1) {
      tiny = true;
    } else {
      const int shift2 = shift - 1;
      std::uint32_t n2 = 0, d2 = 0;
      int s2 = 1;
      if (shift2 <= 0) {
        n2 = sig << -shift2;
      } else {
        const detail::Split t = detail::split(sig, shift2);
        n2 = t.kept, d2 = t.dropped, s2 = t.shift;
      }
      const bool away2 = d2 != 0 && detail::rounds_away(p.rounding, negative, (n2 & 1u) != 0, d2, s2);
      tiny = !(away2 && n2 + 1 == (1u << (m + 1)));
    }
  }

  // (6) Pack.
  return rules::finish(to, negative, lower + (away ? 1u : 0u), inexact, away, tiny, p);
}

}  // namespace lowbit::fast
