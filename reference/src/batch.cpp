// The batch conversion (batch.hpp): the scalar fast path of convert.hpp, restated over 32-bit lanes.
//
// Highway's static/dynamic dispatch pattern (google/highway README, "Static vs. dynamic dispatch"):
// this file re-includes itself once per target through hwy/foreach_target.h, each copy compiling the
// kernel into its own namespace (N_AVX2, N_AVX3, ...); HWY_EXPORT builds the table of those copies and
// HWY_DYNAMIC_DISPATCH calls the best one the running CPU supports.
//
// The kernel follows convert.hpp's numbered steps on every lane at once, without branches:
//  (0) read the source and widen it to the f32 layout (f32, bf16 and f16 values are all f32 values);
//  (1) classify (NaN, infinity, zero, subnormal input under daz);
//  (2) normalise: every finite non-zero input becomes sig * 2^(e - 23) with 2^23 <= sig < 2^24;
//  (3) truncate: shift = max(emin - e, 0) + 23 - m bits fall below the target's ulp;
//  (4) decide from the dropped bits d (same rules as detail::rounds_away);
//  (5) tininess (after rounding: one more rounding with one more bit, as in convert.hpp);
//  (6) pack: sign, overflow, flush to zero;
// then every special lane takes its result from a small table that was computed once per call by
// the scalar path itself (zero, infinity, NaN, negative into unsigned) or by the same rules:: calls the
// scalar path makes (overflow, the smallest value of a format without zero, flushed results).
//
// A lane's result is packed in one u32: code | flags << 16 | (u8)ternary << 24, so choosing between
// results is a single blend whatever is being produced.

#ifndef LOWBIT_SRC_BATCH_SHARED
#define LOWBIT_SRC_BATCH_SHARED

#include "lowbit/batch.hpp"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>
#include <utility>

#include "lowbit/convert.hpp"
#include "lowbit/rules.hpp"
#include "lowbit/scale_rules.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace lowbit::batch_detail {

enum class Source : std::uint8_t { f32, bf16, f16 };

constexpr std::uint32_t pack(const Result& r) {
  return static_cast<std::uint32_t>(r.code) | (std::uint32_t{r.flags} << 16) |
         (std::uint32_t{static_cast<std::uint8_t>(r.ternary)} << 24);
}

// Everything the kernel needs about the pair and the policy, derived once per call.
struct Params {
  Source source = Source::f32;
  bool daz = false;
  // Target geometry.
  std::int32_t mantissa_bits = 0;
  std::int32_t shift_base = 0;     // 23 - m: dropped bits of a normal result
  std::int32_t emin_biased = 0;    // emin + 127, compared with the f32 biased exponent
  std::uint32_t lower_offset = 0;  // -(2^m) where the exponent field 0 is a normal binade (no zero)
  std::uint32_t max_pos = 0, max_neg = 0;  // largest finite magnitude code per sign
  std::uint32_t carry_all_ones = 0;        // 2^(m+1) - 1: the tininess-after carry test
  // Sign encoding.
  bool is_signed = false;
  bool twos_complement = false;
  bool negative_zero = false;  // sign-magnitude with a -0 code
  std::uint32_t sign_bit = 0;
  std::uint32_t twos_modulus = 0;  // 2^code_bits
  std::uint32_t code_mask = 0;
  // Shortcuts (see Convert).
  bool normalize_codes_only = false;  // normalise f32 subnormal inputs when only codes are produced
  bool normalize_with_flags = false;  // ... when flags and ternary are produced too
  bool zero_needs_blend = false;      // a zero input's result is not what the rounding steps give it
  bool inf_needs_blend = false;       // an infinite input's result is not the overflow result
  bool inf_needs_blend_codes = false; // ... its code is not the overflow code
  // Rules.
  bool no_zero = false;           // the exponent field 0 is a normal binade (e8m0)
  bool subnormal_results = false;  // the target has subnormals (what FTZ flushes)
  bool tiny_results = false;       // results can be tiny (Format::has_tiny_range)
  bool ftz = false;
  bool tininess_before = false;
  bool unsigned_reject = false;  // a negative non-zero value into an unsigned format has a fixed result
  std::uint32_t sr_bits = 0;
  std::uint32_t sr_ones = 0;  // 2^N - 1
  // Packed special results, [0] positive, [1] negative.
  std::uint32_t zero[2] = {}, inf[2] = {}, overflow[2] = {}, flushed[2] = {}, smallest[2] = {};
  std::uint32_t unsigned_negative = 0;
  std::uint32_t nan_quiet[2] = {}, nan_signaling[2] = {};
  // How a NaN's payload reaches the code (rules::nan_result): not at all, as the bits below the quiet bit
  // (code |= (f32 payload below the quiet bit) >> rest_shift), or numpy's half cast (the top 10 mantissa
  // bits, quiet bit included, 1 when they are all zero).
  enum class NanPayload : std::uint8_t { none, below_quiet_bit, numpy_half } nan_payload = NanPayload::none;
  bool lowest_binade_up = false;  // Quirks::nozero_lowest_binade_rounds_up in a format without zero
  std::uint32_t nan_rest_shift = 0;
  // The rne shortcut (ConvertRne): taken for codes only when `rne_fast` and the floating-point environment is the
  // default one (rne_environment).
  bool rne_fast = false;
  bool stream_codes = false;  // ScaledBatch under CodeStores::streaming
  const Format* target = nullptr;  // the pair's target and policy, for LoopRne's unaligned head
  Policy policy{};
  std::uint32_t rne_bias = 0;       // 2^(s-1) - 1 - ((127 - target bias) << 23), added modulo 2^32
  std::uint32_t rne_threshold = 0;  // the f32 pattern of 2^emin: below it the result is subnormal (or zero)
  std::uint32_t rne_magic = 0;      // the f32 pattern of 2^(emin - m + 23), whose ulp is the subnormal spacing
  // ConvertRne's shape (RneShape below): 0 when the special codes are not mirrored by sign, else 1 + its bits;
  // with the positive special codes it uses then.
  int rne_shape = 0;
  std::uint32_t rne_overflow = 0, rne_inf = 0, rne_nan = 0;
};

// The shapes ConvertRne is compiled for, so that its loop carries no choice that is fixed per call.  A shape other
// than 0 means every special code (overflow, infinity where it differs from overflow, the quiet NaN unless it is
// the same for both signs) of a negative input is the positive one with the sign bit added: the kernel then picks
// one code for the magnitude and adds the sign last, as for every other lane, instead of choosing between two
// codes per lane.  Its bits:
struct RneShape {
  static constexpr int kSaturates = 1;     // overflow gives the largest finite magnitude: a minimum
  static constexpr int kInf = 2;           // an infinite input's code is not the overflow code
  static constexpr int kPayload = 4;       // a NaN keeps its payload bits below the quiet bit
  static constexpr int kNegativeZero = 8;  // the sign bit goes on every negative lane, -0 included
  static constexpr int kNanUnsigned = 16;  // a NaN's code is the same for both signs: no sign bit is added to it
  static constexpr int kCount = 33;        // 0 (the general form) and 1 + every combination of the bits
};

// Whether the floating-point environment is the default one, which ConvertRne's subnormal step relies on: round to
// nearest even, no flush to zero, no denormals-are-zero (x86's MXCSR; elsewhere the shortcut is not taken).
inline bool rne_environment() {
#if defined(__x86_64__) || defined(__i386__)
  return (_mm_getcsr() & 0xE040u) == 0;  // RC (bits 13-14), FZ (bit 15), DAZ (bit 6)
#else
  return false;
#endif
}

// Source rows are recognised by their fields (same_format), not their names.
inline bool source_of(const Format& f, Source* s) {
  if (same_format(f, formats::f32)) *s = Source::f32;
  else if (same_format(f, formats::bf16)) *s = Source::bf16;
  else if (same_format(f, formats::f16)) *s = Source::f16;
  else return false;
  return true;
}

}  // namespace lowbit::batch_detail

#endif  // LOWBIT_SRC_BATCH_SHARED

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/batch.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/cache_control.h>
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace lowbit::batch_detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DU = hn::ScalableTag<std::uint32_t>;
using DI = hn::RebindToSigned<DU>;
using DF = hn::RebindToFloat<DU>;
using VU = hn::Vec<DU>;
using VI = hn::Vec<DI>;
using MU = hn::Mask<DU>;

// Lane-wise 2^s - 1 and 2^s for 0 <= s <= 31.
HWY_INLINE VU LowMask(DU du, VU s) { return hn::Sub(hn::Shl(hn::Set(du, 1u), s), hn::Set(du, 1u)); }
HWY_INLINE VU Pow2(DU du, VU s) { return hn::Shl(hn::Set(du, 1u), s); }

// Step 4 (detail::rounds_away): does the truncated magnitude move away from zero?
//   d: the dropped bits, d < 2^shift; shift: the exact count (may exceed 31; the stochastic modes need
//   it), clamped: min(shift, 31) (the deterministic modes only compare d with half an ulp, and for
//   shift > 31 both d < 2^24 and half >= 2^30 hold); lsb: the last kept bit.
template <Rounding R>
HWY_INLINE MU RoundsAway(DU du, VU d, VI shift, VU clamped, MU lsb, MU negative, MU inexact, VU r,
                         const Params& c) {
  const DI di;
  if constexpr (R == Rounding::rne || R == Rounding::rna) {
    // compare_half: half = 2^(shift-1); shift >= 1 wherever d != 0.
    const VU half = hn::Shl(hn::Set(du, 1u), hn::Sub(clamped, hn::Set(du, 1u)));
    if constexpr (R == Rounding::rne) return hn::Or(hn::Gt(d, half), hn::And(hn::Eq(d, half), lsb));
    else return hn::And(inexact, hn::Not(hn::Lt(d, half)));
  } else if constexpr (R == Rounding::rtz) {
    (void)d, (void)shift, (void)clamped, (void)lsb, (void)negative, (void)r, (void)c;
    return hn::And(inexact, hn::Not(inexact));
  } else if constexpr (R == Rounding::rup) {
    return hn::AndNot(negative, inexact);
  } else if constexpr (R == Rounding::rdn) {
    return hn::And(negative, inexact);
  } else if constexpr (R == Rounding::rto) {
    return hn::AndNot(lsb, inexact);
  } else {
    // Stochastic (P3109): with q = floor(d * 2^N / 2^shift) < 2^N,
    //   sr_a: q + R >= 2^N;
    //   sr_b: floor(d * 2^(N+1) / 2^shift) + 2R + 1 >= 2^(N+1), i.e. q + b + R >= 2^N where b is the
    //         next bit of the fraction below q's last bit (2q + b + 2R + 1 >= 2^(N+1) for integers);
    //   sr_c: rne(d * 2^N / 2^shift) + R >= 2^N, i.e. q + u + R >= 2^N with u the rne increment.
    // q + R >= 2^N is R > (2^N - 1) - q, which stays in 32 bits for N = 32; q + 1 + R >= 2^N adds
    // the case R == (2^N - 1) - q.
    const VI ls = hn::Sub(hn::Set(di, static_cast<std::int32_t>(c.sr_bits)), shift);  // N - shift
    const auto left = hn::RebindMask(du, hn::Gt(ls, hn::Set(di, -1)));
    const VU lcount = hn::BitCast(du, hn::Min(hn::Max(ls, hn::Zero(di)), hn::Set(di, 31)));
    const VU rcount = hn::BitCast(du, hn::Min(hn::Max(hn::Neg(ls), hn::Zero(di)), hn::Set(di, 31)));
    // shift <= N: d * 2^(N - shift) is an integer below 2^N; else d >> (shift - N) (0 from 32 on,
    // which the clamp to 31 also gives since d < 2^24).
    const VU q = hn::IfThenElse(left, hn::Shl(d, lcount), hn::Shr(d, rcount));
    const VU threshold = hn::Sub(hn::Set(du, c.sr_ones), q);
    const MU above = hn::Gt(r, threshold);
    if constexpr (R == Rounding::sr_a) {
      return hn::And(inexact, above);
    } else {
      MU extra;
      const VU below_count = hn::Sub(hn::Max(rcount, hn::Set(du, 1u)), hn::Set(du, 1u));
      if constexpr (R == Rounding::sr_b) {
        extra = hn::AndNot(left, hn::TestBit(hn::Shr(d, below_count), hn::Set(du, 1u)));
      } else {
        // rne of the rcount dropped bits (none when shift <= N: then rem = 0 < half = 1).
        const VU rem = hn::And(d, LowMask(du, rcount));
        const VU half = Pow2(du, below_count);
        extra = hn::Or(hn::Gt(rem, half), hn::And(hn::Eq(rem, half), hn::TestBit(q, hn::Set(du, 1u))));
      }
      return hn::And(inexact, hn::Or(above, hn::And(extra, hn::Eq(r, threshold))));
    }
  }
}

// Step 0: load N source values as f32-layout bits.  f16 is widened by integer arithmetic so that NaN
// payloads and the signaling bit survive (F16C's vcvtph2ps would quiet a signaling NaN); its subnormals
// become normal f32 values through an exact int -> float conversion, so f16_subnormal marks them for
// daz.  (f32 and bf16 subnormals are f32 subnormals; Convert finds those itself.)
template <bool kSimple>
HWY_INLINE VU LoadSource(DU du, const Params& c, const void* in, std::size_t i, MU* f16_subnormal) {
  const DI di;
  const DF df;
  const hn::Rebind<std::uint16_t, DU> d16;
  if (kSimple || c.source == Source::f32) return hn::LoadU(du, static_cast<const std::uint32_t*>(in) + i);
  const VU h = hn::PromoteTo(du, hn::LoadU(d16, static_cast<const std::uint16_t*>(in) + i));
  if (c.source == Source::bf16) return hn::ShiftLeft<16>(h);
  const VU mag = hn::And(h, hn::Set(du, 0x7FFFu));
  const VU field = hn::ShiftRight<10>(mag);
  const MU top = hn::Eq(field, hn::Set(du, 31u));
  const MU low = hn::Eq(field, hn::Zero(du));
  // Normal: rebias 15 -> 127; infinity and NaN: exponent 31 -> 255 with the payload kept in place.
  VU x = hn::Add(hn::ShiftLeft<13>(mag), hn::IfThenElse(top, hn::Set(du, 224u << 23), hn::Set(du, 112u << 23)));
  // Subnormal: mag * 2^-24, exact as float(mag) with 24 taken off its exponent.
  const VU sub = hn::Sub(hn::BitCast(du, hn::ConvertTo(df, hn::BitCast(di, mag))), hn::Set(du, 24u << 23));
  x = hn::IfThenElse(low, hn::IfThenElseZero(hn::Ne(mag, hn::Zero(du)), sub), x);
  *f16_subnormal = hn::And(low, hn::Ne(mag, hn::Zero(du)));
  return hn::Or(x, hn::ShiftLeft<16>(hn::And(h, hn::Set(du, 0x8000u))));
}

HWY_INLINE VU Pick(MU negative, std::uint32_t neg, std::uint32_t pos) {
  const DU du;
  return hn::IfThenElse(negative, hn::Set(du, neg), hn::Set(du, pos));
}

// Steps 1-6 on one vector of f32-layout inputs; returns packed results (only the code part when
// kFlags is false).  kSimple: the common case (Simple() below), where most of the per-call choices are
// known at compile time and the loop carries no branches for them.
template <Rounding R, bool kFlags, bool kSimple>
HWY_INLINE VU Convert(DU du, const Params& c, VU x, MU f16_subnormal, VU r) {
  const DI di;
  const DF df;
  const bool normalize = !kSimple && (kFlags ? c.normalize_with_flags : c.normalize_codes_only);
  const bool blend_zero = normalize || (!kSimple && c.zero_needs_blend);
  const bool daz = !kSimple && c.daz;
  const bool is_signed = kSimple || c.is_signed;
  const bool twos_complement = !kSimple && c.twos_complement;
  const bool ftz = !kSimple && c.ftz;
  const bool no_zero = !kSimple && c.no_zero;
  const bool unsigned_reject = !kSimple && c.unsigned_reject;
  const bool inf_needs_blend = kFlags ? c.inf_needs_blend : c.inf_needs_blend_codes;

  // (1) Classify.
  const MU neg_in = hn::RebindMask(du, hn::Lt(hn::BitCast(di, x), hn::Zero(di)));
  VU a = hn::And(x, hn::Set(du, 0x7FFFFFFFu));
  const MU is_nan = hn::Gt(a, hn::Set(du, 0x7F800000u));
  if (daz) {
    // Subnormal inputs read as zeros of their sign; from here on they are zeros like any other.
    const MU sub_in = (!kSimple && c.source == Source::f16) ? f16_subnormal
                                              : hn::And(hn::Lt(a, hn::Set(du, 0x00800000u)), hn::Ne(a, hn::Zero(du)));
    a = hn::IfThenZeroElse(sub_in, a);
  }
  // Unsigned targets round |x| (when the negative rule lets them proceed at all).
  const MU neg = is_signed ? neg_in : hn::And(neg_in, hn::Not(neg_in));

  // (2) The biased exponent eb = e + 127 and the significand, value = sig * 2^(eb - 150).
  VI eb;
  VU sig;
  if (normalize) {
    // Normalise f32 subnormals: a * 2^-149 equals float(a) * 2^-149 exactly (a < 2^23), so the float's
    // bits less 149 in the exponent field give the same layout with a biased exponent <= 0.  Needed
    // where the exact exponent of such an input matters: a target whose binades reach below 2^-126, or
    // its tininess, or the "below the smallest value" rule of a format without zero.
    const MU sub = hn::Lt(a, hn::Set(du, 0x00800000u));
    const VU as_float = hn::BitCast(du, hn::ConvertTo(df, hn::BitCast(di, a)));
    const VU a2 = hn::IfThenElse(sub, hn::Sub(as_float, hn::Set(du, 149u << 23)), a);
    eb = hn::ShiftRight<23>(hn::BitCast(di, a2));  // arithmetic shift
    sig = hn::Or(hn::And(a2, hn::Set(du, 0x007FFFFFu)), hn::Set(du, 0x00800000u));
  } else {
    // IEEE layout as it is: a subnormal is mant * 2^(1 - 150), a zero is sig = 0.  Exact wherever
    // the target's binades all lie at or above 2^-126 (the input's ulp is then never split wrongly);
    // the classification of such inputs as below emin - 1 also holds when emin >= -124.
    const VU field = hn::Max(hn::ShiftRight<23>(a), hn::Set(du, 1u));
    sig = hn::Sub(a, hn::ShiftLeft<23>(hn::Sub(field, hn::Set(du, 1u))));
    eb = hn::BitCast(di, field);
  }

  // (3) Truncate.  t = emin - e; below the smallest normal binade the ulp stays at 2^(emin - m).
  const VI t = hn::Sub(hn::Set(di, c.emin_biased), eb);
  const VI shift = hn::Add(hn::Max(t, hn::Zero(di)), hn::Set(di, c.shift_base));
  const VU clamped = hn::BitCast(du, hn::Min(shift, hn::Set(di, 31)));
  // The code of 2^max(e, emin) less the hidden bit (which `kept` brings).
  const VU base = hn::Add(hn::Shl(hn::BitCast(du, hn::Max(hn::Neg(t), hn::Zero(di))),
                                  hn::Set(du, static_cast<std::uint32_t>(c.mantissa_bits))),
                          hn::Set(du, c.lower_offset));

  // (4) Decide.
  MU inexact = hn::And(neg_in, hn::Not(neg_in));
  MU away = inexact;
  VU magnitude;
  bool by_addition = false;
  if constexpr (!kFlags && R != Rounding::rto && !is_stochastic(R))
    by_addition = (R != Rounding::rne || c.mantissa_bits > 0) && (kSimple || !c.lowest_binade_up);
  if (by_addition) {
    // Codes only: the classic rounding by addition, (sig + bias) >> shift, with bias 2^(shift-1) - 1
    // plus the kept last bit (rne), 2^(shift-1) (rna), 2^shift - 1 (directed away) or 0.  The carry
    // out of the kept bits moves into the next binade exactly as `lower + 1` does.  rne reads the last
    // bit from `kept`, which equals the code's last bit when m >= 1.  sig < 2^24 and shift <= 31 keep
    // the sum inside 32 bits.
    const VU top = hn::Sub(hn::Set(du, 32u), clamped);
    VU bias;
    if constexpr (R == Rounding::rne)
      bias = hn::Add(hn::Shr(hn::Set(du, 0x7FFFFFFFu), top), hn::And(hn::Shr(sig, clamped), hn::Set(du, 1u)));
    else if constexpr (R == Rounding::rna)
      bias = hn::Shl(hn::Set(du, 1u), hn::Sub(clamped, hn::Set(du, 1u)));
    else if constexpr (R == Rounding::rup)
      bias = hn::IfThenZeroElse(neg, hn::Shr(hn::Set(du, 0xFFFFFFFFu), top));
    else if constexpr (R == Rounding::rdn)
      bias = hn::IfThenElseZero(neg, hn::Shr(hn::Set(du, 0xFFFFFFFFu), top));
    else
      bias = hn::Zero(du);
    magnitude = hn::Add(base, hn::Shr(hn::Add(sig, bias), clamped));
  } else {
    const VU kept = hn::Shr(sig, clamped);
    const VU d = hn::Sub(sig, hn::Shl(kept, clamped));
    const VU lower = hn::Add(base, kept);
    inexact = hn::Ne(d, hn::Zero(du));
    const MU lsb = hn::TestBit(lower, hn::Set(du, 1u));
    away = RoundsAway<R>(du, d, shift, clamped, lsb, neg, inexact, r, c);
    // Quirks::nozero_lowest_binade_rounds_up: inside the lowest binade (e == emin) every inexact value
    // rounds up.  Its lanes are normalised (a format without zero and emin < -124 normalises; with a
    // higher emin the f32 subnormals lie below it either way).
    if (!kSimple && c.lowest_binade_up) away = hn::Or(away, hn::And(inexact, hn::RebindMask(du, hn::Eq(t, hn::Zero(di)))));
    magnitude = hn::IfThenElse(away, hn::Add(lower, hn::Set(du, 1u)), lower);
  }

  // (5) Tininess.
  MU tiny = hn::And(neg_in, hn::Not(neg_in));
  if ((kFlags || ftz) && c.tiny_results) {
    if (c.tininess_before) {
      tiny = hn::RebindMask(du, hn::Gt(t, hn::Zero(di)));
    } else {
      // e == emin - 1: round with m + 1 kept bits (the unbounded-exponent rounding); tiny unless that
      // carries into 2^emin.  shift_base bits are dropped then, whatever the lane.
      const VU s2 = hn::Set(du, static_cast<std::uint32_t>(c.shift_base));
      const VU kept2 = hn::Shr(sig, s2);
      const VU d2 = hn::And(sig, LowMask(du, s2));
      const MU inexact2 = hn::Ne(d2, hn::Zero(du));
      const MU lsb2 = hn::TestBit(kept2, hn::Set(du, 1u));
      const MU away2 = RoundsAway<R>(du, d2, hn::BitCast(di, s2), s2, lsb2, neg, inexact2, r, c);
      const MU carries = hn::And(away2, hn::Eq(kept2, hn::Set(du, c.carry_all_ones)));
      const MU far = hn::RebindMask(du, hn::Gt(t, hn::Set(di, 1)));
      const MU near = hn::RebindMask(du, hn::Eq(t, hn::Set(di, 1)));
      tiny = hn::Or(far, hn::AndNot(carries, near));
    }
  }

  // (6) Pack (rules::finish).
  VU code;
  if (twos_complement) {
    const MU flip = hn::And(neg, hn::Ne(magnitude, hn::Zero(du)));
    code = hn::IfThenElse(flip, hn::And(hn::Sub(hn::Set(du, c.twos_modulus), magnitude), hn::Set(du, c.code_mask)),
                          magnitude);
  } else if (is_signed) {
    const MU with_sign = c.negative_zero ? neg : hn::And(neg, hn::Ne(magnitude, hn::Zero(du)));
    code = hn::Or(magnitude, hn::IfThenElseZero(with_sign, hn::Set(du, c.sign_bit)));
  } else {
    code = magnitude;
  }
  VU packed = code;
  if constexpr (kFlags) {
    const VU flags = hn::IfThenElseZero(
        inexact, hn::IfThenElse(tiny, hn::Set(du, std::uint32_t{flag::inexact | flag::underflow} << 16),
                                hn::Set(du, std::uint32_t{flag::inexact} << 16)));
    // The ternary is the sign of rounded - exact: +1 when rounding moved the value up.
    const VU ternary = hn::IfThenElseZero(
        inexact, hn::IfThenElse(hn::Xor(away, neg), hn::Set(du, 0x01u << 24), hn::Set(du, 0xFFu << 24)));
    packed = hn::Or(packed, hn::Or(flags, ternary));
  }
  if (ftz && c.subnormal_results) packed = hn::IfThenElse(tiny, Pick(neg, c.flushed[1], c.flushed[0]), packed);
  const VU max = twos_complement ? Pick(neg, c.max_neg, c.max_pos) : hn::Set(du, c.max_pos);
  packed = hn::IfThenElse(hn::Gt(magnitude, max), Pick(neg, c.overflow[1], c.overflow[0]), packed);
  if (no_zero)
    packed = hn::IfThenElse(hn::RebindMask(du, hn::Gt(t, hn::Zero(di))), Pick(neg, c.smallest[1], c.smallest[0]),
                            packed);

  // Specials, in the reverse of the scalar path's order so that its first match wins.  A zero comes
  // out of the steps above as the zero code with no flags (sig = 0 is exact) unless its lane was
  // normalised, flushed, or the format has no zero; an infinity as an overflow, which is the same
  // result where the tables agree and 2^128 is beyond the format (Params::inf_needs_blend).
  if (blend_zero || unsigned_reject) {
    const MU is_zero = hn::Eq(a, hn::Zero(du));
    if (blend_zero) packed = hn::IfThenElse(is_zero, Pick(neg_in, c.zero[1], c.zero[0]), packed);
    if (inf_needs_blend)
      packed = hn::IfThenElse(hn::Eq(a, hn::Set(du, 0x7F800000u)), Pick(neg_in, c.inf[1], c.inf[0]), packed);
    if (unsigned_reject)
      packed = hn::IfThenElse(hn::AndNot(is_zero, neg_in), hn::Set(du, c.unsigned_negative), packed);
  } else if (inf_needs_blend) {
    packed = hn::IfThenElse(hn::Eq(a, hn::Set(du, 0x7F800000u)), Pick(neg_in, c.inf[1], c.inf[0]), packed);
  }
  VU nan;
  if (kFlags) {  // quiet and signaling NaNs differ in their flags only
    const MU quiet = hn::TestBit(x, hn::Set(du, 0x00400000u));
    nan = hn::IfThenElse(quiet, Pick(neg_in, c.nan_quiet[1], c.nan_quiet[0]),
                         Pick(neg_in, c.nan_signaling[1], c.nan_signaling[0]));
  } else {
    nan = Pick(neg_in, c.nan_quiet[1], c.nan_quiet[0]);
  }
  if (c.nan_payload == Params::NanPayload::below_quiet_bit) {
    const VU rest = hn::Shr(hn::And(x, hn::Set(du, 0x003FFFFFu)), hn::Set(du, c.nan_rest_shift));
    nan = hn::Or(nan, rest);
  } else if (!kSimple && c.nan_payload == Params::NanPayload::numpy_half) {
    const VU top10 = hn::Max(hn::ShiftRight<13>(hn::And(x, hn::Set(du, 0x007FFFFFu))), hn::Set(du, 1u));
    nan = hn::Or(hn::AndNot(hn::Set(du, 0x3FFu), nan), top10);
  }
  return hn::IfThenElse(is_nan, nan, packed);
}

// The rne shortcut for codes only, f32 into a signed sign-magnitude target with zero and subnormals whose binades
// lie within f32's (every fp8, fp6 and fp4 format, bf16, f16), s = 23 - m dropped bits:
//  - a normal result: nearest-even by addition on the f32 pattern, (a + 2^(s-1) - 1 + lsb) >> s, where lsb is the
//    last kept bit; the carry out of the kept bits moves into the next binade as the code's carry does, and
//    subtracting (127 - bias) << 23 first rebiases the exponent (rne_bias folds both constants);
//  - a subnormal result (a below 2^emin): |x| + 2^(emin - m + 23) in f32, whose ulp is the target's subnormal
//    spacing 2^(emin - m) and which the hardware rounds to nearest even (|x| < 2^emin keeps the sum below twice
//    the constant), less the constant's pattern: the code, a carry into the smallest normal included;
//  - overflow, infinity and NaN as Convert has them (the same tables).
// The default floating-point environment (round to nearest, no flush to zero or denormals-are-zero) is checked
// per call; conformance/batch/batch_test.cpp and the full tier hold the shortcut to the scalar path.
//
// Shape 0 (RneShape) chooses each special code by the lane's sign; the other shapes have one code for both signs'
// magnitudes and put the sign bit on last, with the choices of the shape's bits fixed at compile time.
// The rounded magnitude code of |x| (a: |x|'s pattern) before the special cases, and the NaN payload bits.
HWY_INLINE VU RneMagnitude(DU du, const Params& c, VU a) {
  const DF df;
  const VU shift = hn::Set(du, static_cast<std::uint32_t>(c.shift_base));
  const VU lsb = hn::And(hn::Shr(a, shift), hn::Set(du, 1u));
  const VU normal = hn::Shr(hn::Add(hn::Add(a, lsb), hn::Set(du, c.rne_bias)), shift);
  const VU magic = hn::Set(du, c.rne_magic);
  const VU subnormal = hn::Sub(hn::BitCast(du, hn::Add(hn::BitCast(df, a), hn::BitCast(df, magic))), magic);
  return hn::IfThenElse(hn::Lt(a, hn::Set(du, c.rne_threshold)), subnormal, normal);
}
HWY_INLINE VU RnePayload(DU du, const Params& c, VU x) {
  return hn::Shr(hn::And(x, hn::Set(du, 0x003FFFFFu)), hn::Set(du, c.nan_rest_shift));
}

// kFinite: every x is finite (no NaN or infinity to give its code), as in the products of a row that
// BlocksRowT has checked.
template <int kShape, bool kFinite = false>
HWY_INLINE VU ConvertRne(DU du, const Params& c, VU x) {
  const DI di;
  const MU neg = hn::RebindMask(du, hn::Lt(hn::BitCast(di, x), hn::Zero(di)));
  const VU a = hn::And(x, hn::Set(du, 0x7FFFFFFFu));
  const VU magnitude = RneMagnitude(du, c, a);
  const VU inf = hn::Set(du, 0x7F800000u);
  if constexpr (kShape != 0) {
    constexpr int bits = kShape - 1;
    MU with_sign = neg;
    if constexpr (!(bits & RneShape::kNegativeZero)) with_sign = hn::And(neg, hn::Ne(magnitude, hn::Zero(du)));
    const VU max_pos = hn::Set(du, c.max_pos);
    VU code;
    if constexpr (bits & RneShape::kSaturates) code = hn::Min(magnitude, max_pos);
    else code = hn::IfThenElse(hn::Gt(magnitude, max_pos), hn::Set(du, c.rne_overflow), magnitude);
    if constexpr (kFinite) {
      (void)inf;
      return hn::Or(code, hn::IfThenElseZero(with_sign, hn::Set(du, c.sign_bit)));
    }
    if constexpr (bits & RneShape::kInf) code = hn::IfThenElse(hn::Eq(a, inf), hn::Set(du, c.rne_inf), code);
    const MU is_nan = hn::Gt(a, inf);
    if constexpr (bits & RneShape::kNanUnsigned) {
      code = hn::Or(code, hn::IfThenElseZero(with_sign, hn::Set(du, c.sign_bit)));
      return hn::IfThenElse(is_nan, hn::Set(du, c.rne_nan), code);
    } else {
      VU nan = hn::Set(du, c.rne_nan);
      if constexpr (bits & RneShape::kPayload) nan = hn::Or(nan, RnePayload(du, c, x));
      code = hn::IfThenElse(is_nan, nan, code);
      return hn::Or(code, hn::IfThenElseZero(with_sign, hn::Set(du, c.sign_bit)));
    }
  }
  const MU with_sign = c.negative_zero ? neg : hn::And(neg, hn::Ne(magnitude, hn::Zero(du)));
  VU code = hn::Or(magnitude, hn::IfThenElseZero(with_sign, hn::Set(du, c.sign_bit)));
  code = hn::IfThenElse(hn::Gt(magnitude, hn::Set(du, c.max_pos)), Pick(neg, c.overflow[1], c.overflow[0]), code);
  if (c.inf_needs_blend_codes) code = hn::IfThenElse(hn::Eq(a, inf), Pick(neg, c.inf[1], c.inf[0]), code);
  VU nan = Pick(neg, c.nan_quiet[1], c.nan_quiet[0]);
  if (c.nan_payload == Params::NanPayload::below_quiet_bit) nan = hn::Or(nan, RnePayload(du, c, x));
  return hn::IfThenElse(hn::Gt(a, inf), nan, code);
}

// The codes of a vector of packed results (their low bytes): TruncateTo, or on AVX-512 the one instruction that
// narrows sixteen 32-bit lanes (vpmovdb, vpmovdw) where Highway 1.0's TruncateTo shuffles twice.
template <class DN>
HWY_INLINE hn::Vec<DN> Codes(DN dn, VU packed) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  if constexpr (hn::MaxLanes(DU()) == 16 && sizeof(hn::TFromD<DN>) == 1)
    return hn::Vec<DN>{_mm512_cvtepi32_epi8(packed.raw)};
  if constexpr (hn::MaxLanes(DU()) == 16 && sizeof(hn::TFromD<DN>) == 2)
    return hn::Vec<DN>{_mm512_cvtepi32_epi16(packed.raw)};
#endif
  return hn::TruncateTo(dn, packed);
}

// Outputs of at least this many bytes are written with non-temporal stores, which do not read the lines they
// fill (a conversion this large streams from memory and its codes leave the cache anyway); smaller ones, which a
// caller is likely to read next (a scheme's rows), stay in the cache.
constexpr std::size_t kStreamBytes = std::size_t{1} << 22;

// Codes from `start` on, a whole vector at a time: stored, or `kStream`ed (non-temporal, to aligned addresses).
template <int kShape, bool kStream, class DN>
HWY_INLINE std::size_t RneVectors(DN dn, const Params& c, const std::uint32_t* src, std::size_t start, std::size_t n,
                                  hn::TFromD<DN>* dst) {
  const DU du;
  const std::size_t lanes = hn::Lanes(du);
  std::size_t i = start;
  // The input 8 KiB ahead is asked for explicitly: on the development machine's AMD EPYC this took f32 -> e4m3,
  // e5m2, e2m1 and bf16 from 76%-83% of the memory floor to about the floor itself (4 KiB ahead gave less;
  // tools/bench/RESULTS.md, "Prefetching the input").
  constexpr std::size_t kAhead = 2048;
  for (; i + lanes <= n; i += lanes) {
    if (i + kAhead < n) hwy::Prefetch(src + i + kAhead);
    const auto codes = Codes(dn, ConvertRne<kShape>(du, c, hn::LoadU(du, src + i)));
    if constexpr (kStream) hn::Stream(codes, dn, dst + i);
    else hn::StoreU(codes, dn, dst + i);
  }
  if constexpr (kStream) hwy::FlushStream();
  return i;
}

template <int kShape, class DN>
std::size_t LoopRneTo(DN dn, const Params& params, const void* in, std::size_t n, hn::TFromD<DN>* dst) {
  const Params c = params;  // a local copy, as in Loop
  const std::size_t lanes = hn::Lanes(DU()), out_bytes = sizeof(hn::TFromD<DN>), vector_bytes = lanes * out_bytes;
  const auto* src = static_cast<const std::uint32_t*>(in);
  // Non-temporal stores take whole aligned vectors of at least 16 bytes (hn::Stream writes 16 bytes for any
  // shorter vector); the elements before the first aligned one go through the scalar path.
  const bool stream = n * out_bytes >= kStreamBytes && vector_bytes >= 16 && (vector_bytes & (vector_bytes - 1)) == 0 &&
                      reinterpret_cast<std::uintptr_t>(dst) % out_bytes == 0;
  if (!stream) return RneVectors<kShape, false>(dn, c, src, 0, n, dst);
  const std::size_t misaligned = reinterpret_cast<std::uintptr_t>(dst) % vector_bytes;
  const std::size_t head = misaligned == 0 ? 0 : (vector_bytes - misaligned) / out_bytes;
  convert_batch_scalar(formats::f32, in, head, *c.target, c.policy, dst, nullptr, nullptr, nullptr);
  return RneVectors<kShape, true>(dn, c, src, head, n, dst);
}

// f(std::integral_constant<int, c.rne_shape>()): the shape as a compile-time constant.
template <class F, int... kShapes>
HWY_INLINE std::size_t WithRneShape(const Params& c, const F& f, std::integer_sequence<int, kShapes...>) {
  std::size_t done = 0;
  (void)((c.rne_shape == kShapes && (done = f(std::integral_constant<int, kShapes>()), true)) || ...);
  return done;
}
template <class F>
HWY_INLINE std::size_t WithRneShape(const Params& c, const F& f) {
  return WithRneShape(c, f, std::make_integer_sequence<int, RneShape::kCount>());
}

std::size_t LoopRne(const Params& c, const void* in, std::size_t n, void* out, std::size_t out_bytes) {
  return WithRneShape(c, [&](auto shape) HWY_ATTR {
    if (out_bytes == 1)
      return LoopRneTo<decltype(shape)::value>(hn::Rebind<std::uint8_t, DU>(), c, in, n,
                                               static_cast<std::uint8_t*>(out));
    return LoopRneTo<decltype(shape)::value>(hn::Rebind<std::uint16_t, DU>(), c, in, n,
                                             static_cast<std::uint16_t*>(out));
  });
}

template <Rounding R, bool kFlags, bool kSimple>
std::size_t Loop(const Params& params, const void* in, std::size_t n, void* out, std::size_t out_bytes,
                std::uint8_t* flags, std::int8_t* ternary, const std::uint32_t* rbits) {
  // A local copy: the byte stores below may alias anything reached through a reference, which would
  // make the compiler reload (and re-broadcast) every constant after each store.
  const Params c = params;
  const DU du;
  const hn::Rebind<std::uint8_t, DU> d8;
  const hn::Rebind<std::uint16_t, DU> d16;
  const std::size_t lanes = hn::Lanes(du);
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    // Streaming from memory: ask for the input 2 KiB ahead (the kernel is short enough per element
    // that the hardware prefetcher alone leaves it waiting on DRAM).
    if (c.source == Source::f32) hwy::Prefetch(static_cast<const std::uint32_t*>(in) + i + 512);
    MU f16_subnormal = hn::FirstN(du, 0);
    const VU x = LoadSource<kSimple>(du, c, in, i, &f16_subnormal);
    const VU r = is_stochastic(R) ? hn::LoadU(du, rbits + i) : hn::Zero(du);
    const VU packed = Convert<R, kFlags, kSimple>(du, c, x, f16_subnormal, r);
    if (out_bytes == 1) hn::StoreU(Codes(d8, packed), d8, static_cast<std::uint8_t*>(out) + i);
    else hn::StoreU(Codes(d16, packed), d16, static_cast<std::uint16_t*>(out) + i);
    if constexpr (kFlags) {
      if (flags != nullptr) hn::StoreU(Codes(d8, hn::ShiftRight<16>(packed)), d8, flags + i);
      // int8_t storage written through its unsigned char representation.
      if (ternary != nullptr)
        hn::StoreU(Codes(d8, hn::ShiftRight<24>(packed)), d8, reinterpret_cast<std::uint8_t*>(ternary) + i);
    }
  }
  return i;
}

// The common case: f32 input, a signed sign-magnitude target with zero, no daz or ftz, no f32
// subnormal normalisation, and no numpy half NaN rule.
inline bool Simple(const Params& c, bool with_flags) {
  return c.source == Source::f32 && !c.daz && !c.ftz && c.is_signed && !c.twos_complement && !c.no_zero &&
         !(with_flags ? c.normalize_with_flags : c.normalize_codes_only) && !c.zero_needs_blend &&
         c.nan_payload != Params::NanPayload::numpy_half;
}

template <Rounding R, bool kFlags>
std::size_t Run(const Params& c, const void* in, std::size_t n, void* out, std::size_t out_bytes,
                std::uint8_t* flags, std::int8_t* ternary, const std::uint32_t* rbits) {
  if (Simple(c, kFlags)) return Loop<R, kFlags, true>(c, in, n, out, out_bytes, flags, ternary, rbits);
  return Loop<R, kFlags, false>(c, in, n, out, out_bytes, flags, ternary, rbits);
}

template <bool kFlags>
std::size_t RunFlags(const Params& c, Rounding rounding, const void* in, std::size_t n, void* out,
                     std::size_t out_bytes, std::uint8_t* flags, std::int8_t* ternary, const std::uint32_t* rbits) {
  switch (rounding) {
    case Rounding::rne: return Run<Rounding::rne, kFlags>(c, in, n, out, out_bytes, flags, ternary, rbits);
    case Rounding::rna: return Run<Rounding::rna, kFlags>(c, in, n, out, out_bytes, flags, ternary, rbits);
    case Rounding::rtz: return Run<Rounding::rtz, kFlags>(c, in, n, out, out_bytes, flags, ternary, rbits);
    case Rounding::rup: return Run<Rounding::rup, kFlags>(c, in, n, out, out_bytes, flags, ternary, rbits);
    case Rounding::rdn: return Run<Rounding::rdn, kFlags>(c, in, n, out, out_bytes, flags, ternary, rbits);
    case Rounding::rto: return Run<Rounding::rto, kFlags>(c, in, n, out, out_bytes, flags, ternary, rbits);
    case Rounding::sr_a: return Run<Rounding::sr_a, kFlags>(c, in, n, out, out_bytes, flags, ternary, rbits);
    case Rounding::sr_b: return Run<Rounding::sr_b, kFlags>(c, in, n, out, out_bytes, flags, ternary, rbits);
    case Rounding::sr_c: return Run<Rounding::sr_c, kFlags>(c, in, n, out, out_bytes, flags, ternary, rbits);
  }
  return 0;
}

// Converts the largest multiple of the vector length; returns how many elements it did.
std::size_t ConvertVectors(const Params& c, Rounding rounding, const void* in, std::size_t n, void* out,
                           std::size_t out_bytes, std::uint8_t* flags, std::int8_t* ternary,
                           const std::uint32_t* rbits) {
  if (flags != nullptr || ternary != nullptr)
    return RunFlags<true>(c, rounding, in, n, out, out_bytes, flags, ternary, rbits);
  if (c.rne_fast && rounding == Rounding::rne && rne_environment()) return LoopRne(c, in, n, out, out_bytes);
  return RunFlags<false>(c, rounding, in, n, out, out_bytes, flags, ternary, rbits);
}

// ---- the scaled conversion (ScaledBatch, batch.hpp) ---------------------------------------------------
// Each vector: the multipliers (one per element, one broadcast per block when the block is a multiple of
// the vector length, or gathered lane by lane otherwise), the products fp32(x * m) with a NaN multiplier
// taking its own bits, then Convert on the products' bits as Loop does for an f32 source.
// kStream: one-byte codes written with non-temporal stores (the caller has checked the alignment; ScaledStreams),
// made visible by ScaledBatch::flush (a fence per call cost more than the stores saved on a scheme's short rows).
template <Rounding R, bool kSimple, bool kRne = false, bool kStream = false, int kShape = 0>
std::size_t LoopScaled(const Params& params, const float* in, std::size_t n, const float* mult, std::size_t block,
                       void* out, std::size_t out_bytes, const std::uint32_t* rbits, const float* ahead) {
  const Params c = params;  // a local copy, as in Loop
  const DU du;
  const DF df;
  const hn::Rebind<std::uint8_t, DU> d8;
  const hn::Rebind<std::uint16_t, DU> d16;
  const std::size_t lanes = hn::Lanes(du);
  // maybe_nan: whether m may hold a NaN (false for a block's broadcast multiplier already tested).
  auto one = [&](std::size_t i, hn::Vec<DF> m, auto maybe_nan) HWY_ATTR {
    hwy::Prefetch(ahead + i);  // in + i + 512 as in Loop, or where the caller reads next
    const auto v = hn::LoadU(df, in + i);
    VU x;
    if constexpr (decltype(maybe_nan)::value) x = hn::BitCast(du, hn::IfThenElse(hn::IsNaN(m), m, hn::Mul(v, m)));
    else x = hn::BitCast(du, hn::Mul(v, m));
    const VU r = is_stochastic(R) ? hn::LoadU(du, rbits + i) : hn::Zero(du);
    VU packed;
    if constexpr (kRne) packed = ConvertRne<kShape>(du, c, x);
    else packed = Convert<R, false, kSimple>(du, c, x, hn::FirstN(du, 0), r);
    if constexpr (kStream) hn::Stream(Codes(d8, packed), d8, static_cast<std::uint8_t*>(out) + i);
    else if (out_bytes == 1) hn::StoreU(Codes(d8, packed), d8, static_cast<std::uint8_t*>(out) + i);
    else hn::StoreU(Codes(d16, packed), d16, static_cast<std::uint16_t*>(out) + i);
  };
  if (ahead == nullptr) ahead = in + 512;
  std::size_t i = 0;
  const std::true_type maybe_nan;
  if (block == 1) {
    for (; i + lanes <= n; i += lanes) one(i, hn::LoadU(df, mult + i), maybe_nan);
  } else if (block % lanes == 0) {
    // Whole blocks of whole vectors, one broadcast each (counted loops: two vectors a block for MX's 32
    // on AVX-512), then the vectors of a last block cut short by n.  A block's multiplier is tested for NaN once.
    const std::size_t per = block / lanes, full = n / block;
    for (std::size_t b = 0; b < full; ++b) {
      const auto m = hn::Set(df, mult[b]);
      if (std::isnan(mult[b])) {
        for (std::size_t k = 0; k < per; ++k, i += lanes) one(i, m, maybe_nan);
      } else {
        for (std::size_t k = 0; k < per; ++k, i += lanes) one(i, m, std::false_type());
      }
    }
    if (i + lanes <= n) {
      const auto m = hn::Set(df, mult[full]);
      for (; i + lanes <= n; i += lanes) one(i, m, maybe_nan);
    }
  } else {
    alignas(64) float lane_mult[64];  // 32-bit lanes: at most 64 up to 2048-bit vectors
    for (; i + lanes <= n; i += lanes) {
      for (std::size_t j = 0; j < lanes; ++j) lane_mult[j] = mult[(i + j) / block];
      one(i, hn::Load(df, lane_mult), maybe_nan);
    }
  }
  return i;
}

// Whether a scaled call's codes can be streamed: asked for, one byte each, and whole vectors of at least 16 bytes
// (hn::Stream writes 16 bytes for a shorter one) at addresses aligned to them.
inline bool ScaledStreams(const Params& c, const void* out, std::size_t out_bytes) {
  const std::size_t vector_bytes = hn::Lanes(DU());
  return c.stream_codes && out_bytes == 1 && vector_bytes >= 16 && (vector_bytes & (vector_bytes - 1)) == 0 &&
         reinterpret_cast<std::uintptr_t>(out) % vector_bytes == 0;
}

template <Rounding R>
std::size_t RunScaled(const Params& c, const float* in, std::size_t n, const float* mult, std::size_t block, void* out,
                      std::size_t out_bytes, const std::uint32_t* rbits, const float* ahead) {
  if constexpr (R == Rounding::rne)
    if (c.rne_fast && rne_environment()) {
      const bool stream = ScaledStreams(c, out, out_bytes);
      return WithRneShape(c, [&](auto shape) HWY_ATTR {
        if (stream)
          return LoopScaled<R, true, true, true, decltype(shape)::value>(c, in, n, mult, block, out, out_bytes, rbits,
                                                                         ahead);
        return LoopScaled<R, true, true, false, decltype(shape)::value>(c, in, n, mult, block, out, out_bytes, rbits,
                                                                        ahead);
      });
    }
  if (Simple(c, false)) return LoopScaled<R, true>(c, in, n, mult, block, out, out_bytes, rbits, ahead);
  return LoopScaled<R, false>(c, in, n, mult, block, out, out_bytes, rbits, ahead);
}

// Converts the largest multiple of the vector length; returns how many elements it did.
std::size_t ConvertScaledVectors(const Params& c, Rounding rounding, const float* in, std::size_t n, const float* mult,
                                 std::size_t block, void* out, std::size_t out_bytes, const std::uint32_t* rbits,
                                 const float* ahead) {
  switch (rounding) {
    case Rounding::rne: return RunScaled<Rounding::rne>(c, in, n, mult, block, out, out_bytes, rbits, ahead);
    case Rounding::rna: return RunScaled<Rounding::rna>(c, in, n, mult, block, out, out_bytes, rbits, ahead);
    case Rounding::rtz: return RunScaled<Rounding::rtz>(c, in, n, mult, block, out, out_bytes, rbits, ahead);
    case Rounding::rup: return RunScaled<Rounding::rup>(c, in, n, mult, block, out, out_bytes, rbits, ahead);
    case Rounding::rdn: return RunScaled<Rounding::rdn>(c, in, n, mult, block, out, out_bytes, rbits, ahead);
    case Rounding::rto: return RunScaled<Rounding::rto>(c, in, n, mult, block, out, out_bytes, rbits, ahead);
    case Rounding::sr_a: return RunScaled<Rounding::sr_a>(c, in, n, mult, block, out, out_bytes, rbits, ahead);
    case Rounding::sr_b: return RunScaled<Rounding::sr_b>(c, in, n, mult, block, out, out_bytes, rbits, ahead);
    case Rounding::sr_c: return RunScaled<Rounding::sr_c>(c, in, n, mult, block, out, out_bytes, rbits, ahead);
  }
  return 0;
}

// ---- block maxima of |x| (block_abs_max_bits, batch.hpp) --------------------------------------------
// Each block's vectors are reduced vertically (and, max: two operations per vector); the horizontal step,
// the costly part for short blocks, is shared by `lanes` blocks at a time: their vertical maxima are folded
// pairwise, each fold one ConcatEven/ConcatOdd pair and a maximum, until one vector holds block j's maximum
// in lane j (log2(lanes) levels, lanes - 1 folds for lanes blocks instead of one full reduction each).
// Returns false where the block is not a whole number of vectors (the caller's scalar loop does those).
#if HWY_TARGET != HWY_SCALAR
// The fold buffer holds lanes x lanes values: enough for 512-bit vectors of 32-bit lanes; wider vectors (or a
// lane count that is not a power of two, which the pairwise folds assume) take the caller's scalar loop.
constexpr std::size_t kFoldLanes = 16;

// kPer: vectors per block when it is a small constant (the vertical loop unrolled), 0 otherwise.
template <std::size_t kPer, bool kMin>
void BlockAbsMaxT(const float* in, std::size_t n, std::size_t block, std::uint32_t* top, std::uint32_t* min_m1) {
  const DU du;
  const std::size_t lanes = hn::Lanes(du);
  HWY_ALIGN std::uint32_t fold[kFoldLanes * kFoldLanes];  // lanes <= kFoldLanes (BlockAbsMax)
  const VU abs_mask = hn::Set(du, 0x7FFFFFFFu), one = hn::Set(du, 1u);
  VU low = hn::Set(du, 0xFFFFFFFFu);  // minimum of |x| pattern - 1 (wrapping: zeros stay at 0xFFFFFFFF)
  const auto* bits = reinterpret_cast<const std::uint32_t*>(in);
  auto load = [&](std::size_t i) HWY_ATTR {
    // A pass that only reads waits on memory unless it asks ahead: 4 KiB, as far as the hardware prefetcher
    // alone did not keep it fed (a scheme's gather of rows already asked for costs one more instruction).
    hwy::Prefetch(bits + i + 1024);
    const VU a = hn::And(hn::LoadU(du, bits + i), abs_mask);
    if constexpr (kMin) low = hn::Min(low, hn::Sub(a, one));
    return a;
  };
  // The vertical maximum of the vectors [i, i + count * lanes), four at a time into four maxima (one chain of
  // maxima kept the loads of a long block, a whole row for the token scheme, waiting on each other's turn).
  auto vertical = [&](std::size_t i, std::size_t count) HWY_ATTR {
    VU m0 = hn::Zero(du), m1 = hn::Zero(du), m2 = hn::Zero(du), m3 = hn::Zero(du);
    std::size_t k = 0;
    for (; k + 4 <= count; k += 4, i += 4 * lanes) {
      m0 = hn::Max(m0, load(i));
      m1 = hn::Max(m1, load(i + lanes));
      m2 = hn::Max(m2, load(i + 2 * lanes));
      m3 = hn::Max(m3, load(i + 3 * lanes));
    }
    for (; k < count; ++k, i += lanes) m0 = hn::Max(m0, load(i));
    return hn::Max(hn::Max(m0, m1), hn::Max(m2, m3));
  };
  auto whole_block = [&](std::size_t i) HWY_ATTR {
    if constexpr (kPer == 0) {
      return vertical(i, block / lanes);
    } else {
      VU m = load(i);
      for (std::size_t k = 1; k < kPer; ++k) m = hn::Max(m, load(i + k * lanes));
      return m;
    }
  };
  const std::size_t whole = n / block;
  std::size_t b = 0;
  for (; b + lanes <= whole; b += lanes) {
    for (std::size_t j = 0; j < lanes; ++j) hn::Store(whole_block((b + j) * block), du, fold + j * lanes);
    for (std::size_t count = lanes; count > 1; count /= 2)
      for (std::size_t j = 0; j < count / 2; ++j) {
        const VU lo = hn::Load(du, fold + 2 * j * lanes), hi = hn::Load(du, fold + (2 * j + 1) * lanes);
        hn::Store(hn::Max(hn::ConcatEven(du, hi, lo), hn::ConcatOdd(du, hi, lo)), du, fold + j * lanes);
      }
    hn::StoreU(hn::Max(hn::LoadU(du, top + b), hn::Load(du, fold)), du, top + b);
  }
  // The blocks left over (fewer than `lanes`), then a last block cut short by n: one reduction each.
  auto merge = [&](std::size_t blk, std::size_t i, std::size_t len) HWY_ATTR {
    const VU v = len == block ? whole_block(i) : vertical(i, len / lanes);
    std::uint32_t m = hn::GetLane(hn::MaxOfLanes(du, v));
    for (std::size_t k = i + len / lanes * lanes; k < i + len; ++k) {
      const std::uint32_t a = std::bit_cast<std::uint32_t>(in[k]) & 0x7FFFFFFFu;
      m = a > m ? a : m;
      if (kMin && a - 1u < *min_m1) *min_m1 = a - 1u;
    }
    if (m > top[blk]) top[blk] = m;
  };
  for (; b < whole; ++b) merge(b, b * block, block);
  if (whole * block < n) merge(whole, whole * block, n - whole * block);
  if constexpr (kMin) {
    const std::uint32_t m = hn::GetLane(hn::MinOfLanes(du, low));
    if (m < *min_m1) *min_m1 = m;
  }
}

template <bool kMin>
void BlockAbsMaxPer(const float* in, std::size_t n, std::size_t block, std::uint32_t* top, std::uint32_t* min_m1) {
  switch (block / hn::Lanes(DU())) {
    case 1: return BlockAbsMaxT<1, kMin>(in, n, block, top, min_m1);
    case 2: return BlockAbsMaxT<2, kMin>(in, n, block, top, min_m1);
    case 4: return BlockAbsMaxT<4, kMin>(in, n, block, top, min_m1);
    case 8: return BlockAbsMaxT<8, kMin>(in, n, block, top, min_m1);
    default: return BlockAbsMaxT<0, kMin>(in, n, block, top, min_m1);
  }
}
#endif

bool BlockAbsMax(const float* in, std::size_t n, std::size_t block, std::uint32_t* top, std::uint32_t* min_m1) {
#if HWY_TARGET == HWY_SCALAR
  (void)in, (void)n, (void)block, (void)top, (void)min_m1;
  return false;
#else
  const std::size_t lanes = hn::Lanes(DU());
  if (lanes > kFoldLanes || (lanes & (lanes - 1)) != 0 || block == 0 || block % lanes != 0) return false;
  if (min_m1 != nullptr) BlockAbsMaxPer<true>(in, n, block, top, min_m1);
  else BlockAbsMaxPer<false>(in, n, block, top, min_m1);
  return true;
#endif
}

// ---- one pass over a row of blocks (ScaledBatch::run_blocks, batch.hpp) ----------------------------------
// A tile of `lanes` blocks at a time: their vectors are read once from memory for the blocks' maxima (folded into
// one vector as in BlockAbsMaxT), the tile's scales and multipliers computed from that vector, and the same
// vectors read again from the first-level cache for the scaled conversion (LoopScaled's arithmetic).  The amax
// pass and the conversion of each block then cost one read from memory, where a pass over the row for the maxima
// and another for the conversion read it twice or serialise a gather with the conversion.
#if HWY_TARGET != HWY_SCALAR
// A tile's scales: the multipliers (f32 lanes) and scale codes of the blocks whose maxima (|x| patterns, all
// finite) are the lanes of `top`; the mask of the blocks the rule leaves to the caller.
// `scale_params`: the e4m3 conversion of the nvfp4 rule's block scales.
HWY_INLINE MU TileScales(DU du, const BlockRule& rule, const Params& scale_params, VU top, hn::Vec<DF>& mult,
                         VU& code) {
  const DF df;
  const DI di;
  auto pow2_multiplier = [&](VU e8m0) HWY_ATTR {
    // rules::mx_multiplier for codes <= 254: 2^(127 - e) with e = 254 the f32 subnormal 2^-127.
    const VU k = hn::Sub(hn::Set(du, 254u), e8m0);
    return hn::BitCast(df, hn::IfThenElse(hn::Eq(k, hn::Zero(du)), hn::Set(du, 0x00400000u), hn::ShiftLeft<23>(k)));
  };
  switch (rule.kind) {
    case BlockRuleKind::mx_floor:
    case BlockRuleKind::mx_ceil:
    case BlockRuleKind::mx_even: {
      VU b = top;
      if (rule.kind == BlockRuleKind::mx_even)
        b = hn::And(hn::Add(b, hn::Set(du, 1u << (22 - rule.mantissa_bits))), hn::Set(du, 0xFF800000u));
      VI pow2 = hn::Sub(hn::BitCast(di, hn::ShiftRight<23>(b)), hn::Set(di, 127));
      if (rule.kind == BlockRuleKind::mx_ceil)
        pow2 =
            hn::Add(pow2, hn::BitCast(di, hn::IfThenElseZero(hn::Ne(hn::And(b, hn::Set(du, 0x7FFFFFu)), hn::Zero(du)),
                                                             hn::Set(du, 1u))));
      const VI se = hn::Min(hn::Max(hn::Sub(pow2, hn::Set(di, rule.emax)), hn::Set(di, -127)), hn::Set(di, 127));
      code = hn::BitCast(du, hn::Add(se, hn::Set(di, 127)));
      mult = pow2_multiplier(code);
      return hn::FirstN(du, 0);
    }
    case BlockRuleKind::mx_rceil: {
      // rules::mx_scale: fp32(a * fp32(1 / elem_max)) into e8m0 rounding up; for a normal quotient d its code is
      // d's exponent field, plus one unless d is a power of two.
      const float inv = 1.0f / rule.elem_max;
      const VU d = hn::BitCast(du, hn::Mul(hn::BitCast(df, top), hn::Set(df, inv)));
      const VU e = hn::ShiftRight<23>(d);
      code = hn::Add(e, hn::IfThenElseZero(hn::Ne(hn::And(d, hn::Set(du, 0x7FFFFFu)), hn::Zero(du)), hn::Set(du, 1u)));
      mult = pow2_multiplier(code);
      return hn::Or(hn::Eq(e, hn::Zero(du)), hn::Gt(code, hn::Set(du, 254u)));
    }
    case BlockRuleKind::current: {
      // rules::scale_from_amax(a, elem_max, eps, format, FLT_MAX) for a finite a >= +0 (and a finite eps, which
      // keeps the clamped amax finite).
      if (!std::isfinite(rule.eps)) break;
      hn::Vec<DF> a = hn::BitCast(df, top);
      a = hn::IfThenElse(hn::Lt(a, hn::Set(df, rule.eps)), hn::Set(df, rule.eps), a);
      hn::Vec<DF> s = hn::Div(hn::Set(df, rule.elem_max), a);
      s = hn::IfThenElse(hn::Eq(s, hn::Set(df, INFINITY)), hn::Set(df, FLT_MAX), s);
      s = hn::IfThenElse(hn::Eq(a, hn::Zero(df)), hn::Set(df, 1.0f), s);
      if (rule.pow2) s = hn::BitCast(df, hn::And(hn::BitCast(du, s), hn::Set(du, 0xFF800000u)));
      mult = s;
      code = hn::BitCast(du, hn::Div(hn::Set(df, 1.0f), s));
      return hn::FirstN(du, 0);
    }
    case BlockRuleKind::nvfp4: {
      // rules::nvfp4_block_dec: fminf(a * enc_sixth, FLT_MAX) (a and enc_sixth finite: the product is not NaN),
      // then its e4m3 code and the table's multiplier.
      const hn::Vec<DF> dec = hn::Min(hn::Mul(hn::BitCast(df, top), hn::Set(df, rule.enc_sixth)), hn::Set(df, FLT_MAX));
      code = hn::And(ConvertRne<0>(du, scale_params, hn::BitCast(du, dec)), hn::Set(du, 0xFFu));  // the code byte
      mult = hn::GatherIndex(df, rule.multipliers, hn::BitCast(di, code));
      return hn::FirstN(du, 0);
    }
  }
  return hn::FirstN(du, hn::Lanes(du));
}

// Rows of n values (row r at in + r * n), cut into tiles of up to `lanes` blocks that never cross a row's end.  The
// tiles are pipelined: one loop reads tile q's vectors from memory for its maxima while it converts tile q - 1's
// vectors (read by the previous step, so from the first-level cache), then folds tile q's maxima and computes its
// scales; the memory reads of one tile thus overlap the arithmetic of the one before, as a single pass over the
// input would, while each block's scale is still known before its first element is converted.
// What one step of BlocksRowsT reads and converts: the tile whose maxima it gathers (`start`, its first value,
// and k blocks) and the tile it converts (`done_start`, done_k blocks, with multipliers `mults`).
struct TileStep {
  const float* in = nullptr;
  std::uint8_t* out = nullptr;
  std::size_t readable = 0;  // values readable from `in` on (the prefetch bound)
  std::size_t block = 0, per = 0;
  std::size_t start = 0, k = 0;
  std::size_t done_start = 0, done_k = 0;
  const float* mults = nullptr;
  std::uint32_t* fold = nullptr;  // lanes x lanes: block j's vertical maximum at fold + j * lanes
  bool exact_route = false;
};

// One step: block j's vectors of the gathered tile are read (maxima into fold, the smallest |x| pattern less one
// into *low) beside block j's vectors of the converted tile, vector by vector, so that the reads from memory of
// the one overlap the conversion of the other.  Not inlined: its loop keeps the conversion's constants in
// registers, which the driver's tile arithmetic would otherwise push out.
// kStream: the codes written with non-temporal stores (ScaledStreams).
template <int kShape, bool kStream>
HWY_NOINLINE void BlocksStep(const Params& params, const TileStep& t, std::uint32_t* low_out) {
  const Params c = params;  // a local copy, as in Loop
  const DU du;
  const DF df;
  const hn::Rebind<std::uint8_t, DU> d8;
  const std::size_t lanes = hn::Lanes(du), per = t.per;
  const float* in = t.in;
  std::uint8_t* out = t.out;
  const auto* bits = reinterpret_cast<const std::uint32_t*>(in);
  // The maxima's reads ask for the input 8 KiB ahead, as RneVectors does, up to the end of the tensor.
  constexpr std::size_t kAhead = 2048;
  const std::size_t readable = t.readable;
  const bool exact_route = t.exact_route;
  const VU abs_mask = hn::Set(du, 0x7FFFFFFFu), one = hn::Set(du, 1u);
  VU low = hn::Set(du, 0xFFFFFFFFu);
  auto load = [&](std::size_t i) HWY_ATTR {
    if (i + kAhead < readable) hwy::Prefetch(bits + i + kAhead);
    const VU a = hn::And(hn::LoadU(du, bits + i), abs_mask);
    if (exact_route) low = hn::Min(low, hn::Sub(a, one));
    return a;
  };
  auto convert = [&](std::size_t i, hn::Vec<DF> m) HWY_ATTR {
    const auto codes8 = Codes(d8, ConvertRne<kShape, true>(du, c, hn::BitCast(du, hn::Mul(hn::LoadU(df, in + i), m))));
    if constexpr (kStream) hn::Stream(codes8, d8, out + i);
    else hn::StoreU(codes8, d8, out + i);
  };
  if (t.k == lanes && t.done_k == lanes && per <= 2) {
    // Whole tiles of blocks of one or two vectors (NVFP4's 16, MX's 32 on AVX-512): no choice per block.
    for (std::size_t j = 0; j < lanes; ++j) {
      const auto m = hn::Set(df, t.mults[j]);
      const std::size_t i = t.start + j * t.block, o = t.done_start + j * t.block;
      VU a = load(i);
      convert(o, m);
      if (per == 2) {
        a = hn::Max(a, load(i + lanes));
        convert(o + lanes, m);
      }
      hn::Store(a, du, t.fold + j * lanes);
    }
    if (exact_route) *low_out = hn::GetLane(hn::MinOfLanes(du, low));
    return;
  }
  for (std::size_t j = 0; j < lanes; ++j) {
    VU m0 = hn::Zero(du), m1 = hn::Zero(du);
    std::size_t i = t.start + j * t.block, o = t.done_start + j * t.block;
    if (j < t.k && j < t.done_k) {
      const auto m = hn::Set(df, t.mults[j]);
      std::size_t v = 0;
      for (; v + 2 <= per; v += 2, i += 2 * lanes, o += 2 * lanes) {
        m0 = hn::Max(m0, load(i));
        convert(o, m);
        m1 = hn::Max(m1, load(i + lanes));
        convert(o + lanes, m);
      }
      if (v < per) {
        m0 = hn::Max(m0, load(i));
        convert(o, m);
      }
    } else if (j < t.k) {
      std::size_t v = 0;
      for (; v + 2 <= per; v += 2, i += 2 * lanes) {
        m0 = hn::Max(m0, load(i));
        m1 = hn::Max(m1, load(i + lanes));
      }
      if (v < per) m0 = hn::Max(m0, load(i));
    } else if (j < t.done_k) {
      const auto m = hn::Set(df, t.mults[j]);
      for (std::size_t v = 0; v < per; ++v, o += lanes) convert(o, m);
    }
    hn::Store(hn::Max(m0, m1), du, t.fold + j * lanes);
  }
  if (exact_route) *low_out = hn::GetLane(hn::MinOfLanes(du, low));
}

template <int kShape, bool kStream>
std::size_t BlocksRowsT(const Params& params, const BlockRule& rule, const Params& scale_params, const float* in,
                        std::size_t rows, std::size_t n, std::size_t block, std::uint8_t* out, std::uint64_t* scales,
                        std::uint8_t* row_ok, const float* end) {
  const DU du;
  const DF df;
  const std::size_t lanes = hn::Lanes(du), nb = n / block, per_row = (nb + lanes - 1) / lanes;
  HWY_ALIGN std::uint32_t fold[kFoldLanes * kFoldLanes];
  HWY_ALIGN float mults[2][kFoldLanes];
  TileStep step;
  step.in = in;
  step.out = out;
  step.readable = static_cast<std::size_t>(end - in);
  step.block = block;
  step.per = block / lanes;
  step.fold = fold;
  step.exact_route = rule.kind == BlockRuleKind::mx_floor || rule.kind == BlockRuleKind::mx_ceil ||
                     rule.kind == BlockRuleKind::mx_even;
  std::fill(row_ok, row_ok + rows, std::uint8_t{1});
  const std::size_t tiles = rows * per_row;
  for (std::size_t q = 0; q <= tiles; ++q) {
    // Tile q (none past the last): its row, first block and block count; skipped once its row has failed.
    const std::size_t row = q / per_row, b0 = q % per_row * lanes;
    step.k = q < tiles && row_ok[row] ? std::min(lanes, nb - b0) : 0;
    step.start = row * n + b0 * block;
    step.mults = mults[(q + 1) & 1];  // the previous tile's multipliers
    std::uint32_t low = 0xFFFFFFFFu;  // the tile's smallest |x| pattern less one (zeros wrap to all ones)
    BlocksStep<kShape, kStream>(params, step, &low);
    const std::size_t k = step.k;
    step.done_start = step.start;
    step.done_k = 0;
    if (k == 0) continue;
    for (std::size_t count = lanes; count > 1; count /= 2)
      for (std::size_t j = 0; j < count / 2; ++j) {
        const VU lo = hn::Load(du, fold + 2 * j * lanes), hi = hn::Load(du, fold + (2 * j + 1) * lanes);
        hn::Store(hn::Max(hn::ConcatEven(du, hi, lo), hn::ConcatOdd(du, hi, lo)), du, fold + j * lanes);
      }
    const VU top = hn::Load(du, fold);
    hn::Vec<DF> mult;
    VU code;
    // A NaN or an infinity, or a block the rule leaves to the caller, leaves the row to it.
    bool ok = hn::AllFalse(du, hn::Gt(top, hn::Set(du, 0x7F7FFFFFu))) &&
              hn::AllFalse(du, hn::And(TileScales(du, rule, scale_params, top, mult, code), hn::FirstN(du, k))) &&
              // Finite products: |x * m| <= amax * m in every block.
              hn::AllFalse(df, hn::And(hn::Not(hn::Le(hn::Mul(hn::BitCast(df, top), mult), hn::Set(df, FLT_MAX))),
                                       hn::FirstN(df, k)));
    if (ok && step.exact_route) {
      // Every product v * 2^(127 - e) of a non-zero v is a normal number when |v| >= 2^(e_max - 253)
      // (rules::mx_normal_product_floor, which Streaming::mx applies to a row): the tile's smallest non-zero |v|
      // against its largest code (blocks past k have code 0 from a zero maximum, below every real one).
      const std::uint32_t below = scale::rules::mx_normal_product_floor(hn::GetLane(hn::MaxOfLanes(du, code)));
      ok = below == 0 || low >= below - 1;
    }
    if (!ok) {
      row_ok[row] = 0;
      continue;
    }
    hn::Store(mult, df, mults[q & 1]);
    // The codes widened to the scales' 64 bits, the first k of them stored.
    const hn::Repartition<std::uint64_t, DU> d64;
    const hn::Half<DU> dh;
    std::uint64_t* sc = scales + row * nb + b0;
    const std::size_t half = lanes / 2;
    const auto lo = hn::PromoteTo(d64, hn::LowerHalf(dh, code)), hi = hn::PromoteTo(d64, hn::UpperHalf(dh, code));
    if (k == lanes) {
      hn::StoreU(lo, d64, sc);
      hn::StoreU(hi, d64, sc + half);
    } else {
      HWY_ALIGN std::uint64_t wide[kFoldLanes];
      hn::Store(lo, d64, wide);
      hn::Store(hi, d64, wide + half);
      std::copy(wide, wide + k, sc);
    }
    step.done_k = k;
  }
  std::size_t ok_rows = 0;
  for (std::size_t r = 0; r < rows; ++r) ok_rows += row_ok[r];
  return ok_rows;
}
#endif

// Whether BlocksRow takes rows of n values in blocks of `block`: whole vectors per block, whole blocks per row,
// and a lane count the fold takes.
bool BlocksTake(std::size_t n, std::size_t block) {
#if HWY_TARGET == HWY_SCALAR
  (void)n, (void)block;
  return false;
#else
  const std::size_t lanes = hn::Lanes(DU());
  return lanes <= kFoldLanes && (lanes & (lanes - 1)) == 0 && block != 0 && block % lanes == 0 && n % block == 0;
#endif
}

std::size_t BlocksRows(const Params& c, const BlockRule& rule, const Params& scale_params, const float* in,
                       std::size_t rows, std::size_t n, std::size_t block, std::uint8_t* out, std::uint64_t* scales,
                       std::uint8_t* row_ok, const float* end) {
#if HWY_TARGET == HWY_SCALAR
  (void)c, (void)rule, (void)scale_params, (void)in, (void)n, (void)block, (void)out, (void)scales, (void)end;
  std::fill(row_ok, row_ok + rows, std::uint8_t{0});
  return 0;
#else
  if (!BlocksTake(n, block)) {
    std::fill(row_ok, row_ok + rows, std::uint8_t{0});
    return 0;
  }
  // Every row starts a whole number of vectors into the codes (n is a multiple of the block, a multiple of lanes).
  const bool stream = ScaledStreams(c, out, 1);
  return WithRneShape(c, [&](auto shape) HWY_ATTR {
    if (stream)
      return BlocksRowsT<decltype(shape)::value, true>(c, rule, scale_params, in, rows, n, block, out, scales, row_ok,
                                                       end);
    return BlocksRowsT<decltype(shape)::value, false>(c, rule, scale_params, in, rows, n, block, out, scales, row_ok,
                                                      end);
  });
#endif
}

const char* TargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace lowbit::batch_detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace lowbit {
namespace batch_detail {
HWY_EXPORT(ConvertVectors);
HWY_EXPORT(TargetName);
HWY_EXPORT(ConvertScaledVectors);
HWY_EXPORT(BlockAbsMax);
HWY_EXPORT(BlocksRows);
HWY_EXPORT(BlocksTake);

std::size_t bytes_for(int storage_bits) {
  return storage_bits <= 8 ? 1 : storage_bits <= 16 ? 2 : storage_bits <= 32 ? 4 : 8;
}

std::uint64_t load_code(const void* in, std::size_t bytes, std::size_t i) {
  const auto* p = static_cast<const unsigned char*>(in) + i * bytes;
  std::uint64_t v = 0;
  for (std::size_t b = 0; b < bytes; ++b) v |= std::uint64_t{p[b]} << (8 * b);  // little-endian storage
  return v;
}

void store_code(void* out, std::size_t bytes, std::size_t i, std::uint64_t code) {
  auto* p = static_cast<unsigned char*>(out) + i * bytes;
  for (std::size_t b = 0; b < bytes; ++b) p[b] = static_cast<unsigned char>(code >> (8 * b));
}

// A representative input of one special class in the source format, converted by the scalar path.
struct Representatives {
  const Format* format;
  std::uint32_t sign, inf, quiet_nan, signaling_nan;  // the signaling NaN has only the lowest payload bit
};
Representatives representatives(Source source) {
  switch (source) {
    case Source::bf16: return {&formats::bf16, 0x8000u, 0x7F80u, 0x7FC0u, 0x7F81u};
    case Source::f16: return {&formats::f16, 0x8000u, 0x7C00u, 0x7E00u, 0x7C01u};
    case Source::f32: break;
  }
  return {&formats::f32, 0x80000000u, 0x7F800000u, 0x7FC00000u, 0x7F800001u};
}

Params make_params(Source source, const Format& to, const Policy& p) {
  Params c;
  c.source = source;
  c.daz = flushes_inputs(p.subnormals);
  const int m = to.mantissa_bits;
  c.mantissa_bits = m;
  c.shift_base = 23 - m;
  c.emin_biased = to.emin() + 127;
  c.lower_offset = to.has_zero ? 0u : 0u - (std::uint32_t{1} << m);
  c.max_pos = static_cast<std::uint32_t>(to.max_finite_magnitude(false));
  c.max_neg = static_cast<std::uint32_t>(to.max_finite_magnitude(true));
  c.carry_all_ones = static_cast<std::uint32_t>(bits::ones(m + 1));
  c.is_signed = to.is_signed();
  c.twos_complement = to.signedness == Signedness::twos_complement;
  c.negative_zero = to.has_negative_zero();
  c.sign_bit = static_cast<std::uint32_t>(to.sign_bit());
  c.twos_modulus = static_cast<std::uint32_t>(bits::ones(to.code_bits()) + 1);
  c.code_mask = static_cast<std::uint32_t>(bits::ones(to.code_bits()));
  c.no_zero = !to.has_zero;
  c.subnormal_results = to.has_subnormals();
  c.tiny_results = to.has_tiny_range();
  c.ftz = flushes_results(p.subnormals);
  c.tininess_before = p.tininess == Tininess::before;
  c.sr_bits = static_cast<std::uint32_t>(p.sr_bits);
  c.sr_ones = static_cast<std::uint32_t>(bits::ones(p.sr_bits));
  const Representatives rep = representatives(source);
  const auto scalar_packed = [&](std::uint32_t code) { return pack(convert(*rep.format, code, to, p)); };
  for (int s = 0; s < 2; ++s) {
    const bool negative = s == 1;
    const std::uint32_t sign = negative ? rep.sign : 0u;
    c.zero[s] = scalar_packed(sign);
    c.inf[s] = scalar_packed(sign | rep.inf);
    // A NaN's code depends on its payload, never on the signaling bit as such (rules::nan_result), and
    // the kernel adds the payload's part itself; the signaling bit decides the flags.  So the signaling
    // entry takes the quiet NaN's code (empty payload) with the signaling NaN's flags.
    c.nan_quiet[s] = scalar_packed(sign | rep.quiet_nan);
    c.nan_signaling[s] = (c.nan_quiet[s] & 0xFFFFu) | (scalar_packed(sign | rep.signaling_nan) & 0xFFFF0000u);
    // The same rules:: calls convert.hpp makes for these lanes.
    const bool neg_eff = negative && to.is_signed();
    c.overflow[s] = pack(rules::overflow_result(to, neg_eff, p));
    c.smallest[s] = pack(rules::smallest_result(to, neg_eff, flag::inexact | flag::underflow, 1));
    c.flushed[s] = pack(Result{to.encode(neg_eff, 0), flag::underflow | flag::inexact, rules::signed_ternary(neg_eff, -1)});
  }
  const int emin = to.emin();
  c.normalize_with_flags = emin < -124;
  c.normalize_codes_only = emin < -126 || (emin < -124 && (c.ftz || c.no_zero));
  c.zero_needs_blend = c.no_zero || c.ftz;
  c.inf_needs_blend = !(c.inf[0] == c.overflow[0] && c.inf[1] == c.overflow[1] && to.emax() < 128);
  c.inf_needs_blend_codes = !(((c.inf[0] ^ c.overflow[0]) & 0xFFFF) == 0 && ((c.inf[1] ^ c.overflow[1]) & 0xFFFF) == 0 &&
                              to.emax() < 128);
  if (!to.is_signed()) {
    const auto o = rules::unsigned_negative(to, p);
    c.unsigned_reject = !o.proceed;
    c.unsigned_negative = pack(o.result);
  }
  using NP = Params::NanPayload;
  // The style rules::nan_result applies to this source's NaNs (Quirks::narrow_nan_style for bf16 and f16).
  const NanStyle style = rules::nan_style_for(p.quirks, rep.format->storage_bits());
  const bool ieee_nan = to.nan == NanEncoding::ieee && !rules::all_ones_style(style);
  if (ieee_nan && p.quirks.numpy_half_nan && to.exponent_bits == 5 && to.mantissa_bits == 10 && source == Source::f32)
    c.nan_payload = NP::numpy_half;  // the f32 payload is wider than 10 bits; bf16's and f16's are not
  else if (ieee_nan && style == NanStyle::preserve) c.nan_payload = NP::below_quiet_bit;
  c.lowest_binade_up = p.quirks.nozero_lowest_binade_rounds_up && !to.has_zero;
  // rules::nan_result keeps the payload bits below the source's quiet bit, aligned at the top of the
  // target's mantissa: in the f32 layout (bf16 and f16 payloads sit at the top of it) that is a right
  // shift by 23 - m_target of the 22 bits below the quiet bit.
  c.nan_rest_shift = static_cast<std::uint32_t>(23 - m);
  // ConvertRne: the common case (source f32, no daz or ftz, a signed sign-magnitude target with zero) whose
  // subnormal binade and magic constant are normal f32 values and which needs neither normalisation nor a zero
  // blend nor numpy's half NaN rule; m >= 1 keeps a dropped bit and a kept bit.
  c.target = &to;
  c.policy = p;
  c.rne_fast = source == Source::f32 && !c.daz && !c.ftz && c.is_signed && !c.twos_complement && to.has_zero &&
               to.has_subnormals() && !c.normalize_codes_only && !c.zero_needs_blend && !c.lowest_binade_up &&
               c.nan_payload != Params::NanPayload::numpy_half && m >= 1 && emin == 1 - to.bias && emin >= -126 &&
               emin <= 127 && emin - m + 23 >= -126;
  if (c.rne_fast) {
    c.rne_bias = (std::uint32_t{1} << (22 - m)) - 1u - (static_cast<std::uint32_t>(127 - to.bias) << 23);
    c.rne_threshold = static_cast<std::uint32_t>(emin + 127) << 23;
    c.rne_magic = static_cast<std::uint32_t>(emin - m + 23 + 127) << 23;
    const auto code_of = [](std::uint32_t packed) { return packed & 0xFFFFu; };
    const auto mirrored = [&](const std::uint32_t(&r)[2]) { return code_of(r[1]) == (code_of(r[0]) | c.sign_bit); };
    c.rne_overflow = code_of(c.overflow[0]);
    c.rne_inf = code_of(c.inf[0]);
    c.rne_nan = code_of(c.nan_quiet[0]);
    const bool nan_unsigned =
        code_of(c.nan_quiet[1]) == code_of(c.nan_quiet[0]) && c.nan_payload == Params::NanPayload::none;
    if (mirrored(c.overflow) && (nan_unsigned || mirrored(c.nan_quiet)) &&
        (!c.inf_needs_blend_codes || mirrored(c.inf)))
      c.rne_shape = 1 + (c.rne_overflow == c.max_pos ? RneShape::kSaturates : 0) +
                    (nan_unsigned ? RneShape::kNanUnsigned : 0) + (c.inf_needs_blend_codes ? RneShape::kInf : 0) +
                    (c.nan_payload == Params::NanPayload::below_quiet_bit ? RneShape::kPayload : 0) +
                    (c.negative_zero ? RneShape::kNegativeZero : 0);
  }
  return c;
}

}  // namespace batch_detail

bool batch_supported(const Format& from, const Format& to) {
  batch_detail::Source s;
  if (!batch_detail::source_of(from, &s)) return false;
  // 16 storage bits keep every magnitude code below 2^16; m <= 22 keeps at least one f32 mantissa bit
  // dropped for a normal result; |emin| <= 60000 keeps (e - emin) << m inside 31 bits.
  return to.storage_bits() <= 16 && to.code_shift == 0 && to.mantissa_bits <= 22 && to.emin() >= -60000 &&
         to.emin() <= 60000;
}

bool batch_supported(const Format& from, const Format& to, const Policy& p) {
  if (!batch_supported(from, to)) return false;
  return !is_stochastic(p.rounding) || (p.sr_bits >= 1 && p.sr_bits <= max_sr_bits);
}

std::size_t batch_code_bytes(const Format& to) { return batch_detail::bytes_for(to.storage_bits()); }

void convert_batch_scalar(const Format& from, const void* in, std::size_t n, const Format& to, const Policy& p,
                          void* out_codes, std::uint8_t* flags, std::int8_t* ternary, const std::uint32_t* rbits) {
  const std::size_t in_bytes = batch_detail::bytes_for(from.storage_bits());
  const std::size_t out_bytes = batch_code_bytes(to);
  const bool sr = is_stochastic(p.rounding);
  for (std::size_t i = 0; i < n; ++i) {
    const Result r = convert(from, batch_detail::load_code(in, in_bytes, i), to, p, sr ? rbits[i] : 0);
    batch_detail::store_code(out_codes, out_bytes, i, r.code);
    if (flags != nullptr) flags[i] = r.flags;
    if (ternary != nullptr) ternary[i] = r.ternary;
  }
}

void convert_batch(const Format& from, const void* in, std::size_t n, const Format& to, const Policy& p,
                   void* out_codes, std::uint8_t* flags, std::int8_t* ternary, const std::uint32_t* rbits) {
  batch_detail::Source s;
  if (!batch_supported(from, to, p) || !batch_detail::source_of(from, &s)) {
    convert_batch_scalar(from, in, n, to, p, out_codes, flags, ternary, rbits);
    return;
  }
  if (p.quirks.identity_copies && same_format(from, to)) {
    // convert() copies the code (signaling NaNs included); from is f32, bf16 or f16 and to has at most
    // 16 bits, so this is bf16 or f16 into itself, two bytes a code either way.
    std::memcpy(out_codes, in, n * batch_code_bytes(to));
    if (flags != nullptr) std::memset(flags, 0, n);
    if (ternary != nullptr) std::memset(ternary, 0, n);
    return;
  }
  const batch_detail::Params c = batch_detail::make_params(s, to, p);
  const std::size_t out_bytes = batch_code_bytes(to);
  const std::size_t done =
      HWY_DYNAMIC_DISPATCH(batch_detail::ConvertVectors)(c, p.rounding, in, n, out_codes, out_bytes, flags, ternary, rbits);
  // The tail (fewer elements than one vector) goes through the scalar path.
  if (done < n) {
    const std::size_t in_bytes = batch_detail::bytes_for(from.storage_bits());
    const bool sr = is_stochastic(p.rounding);
    convert_batch_scalar(from, static_cast<const unsigned char*>(in) + done * in_bytes, n - done, to, p,
                         static_cast<unsigned char*>(out_codes) + done * out_bytes,
                         flags != nullptr ? flags + done : nullptr, ternary != nullptr ? ternary + done : nullptr,
                         sr ? rbits + done : nullptr);
  }
}

struct ScaledBatch::Impl {
  const Format* to = nullptr;
  Policy policy;
  bool vector = false;  // the pair and policy take the vector kernel
  std::size_t out_bytes = 0;
  batch_detail::Params params;
};

ScaledBatch::ScaledBatch(const Format& to, const Policy& p, CodeStores stores) : impl_(std::make_unique<Impl>()) {
  impl_->to = &to;
  impl_->policy = p;
  impl_->out_bytes = batch_code_bytes(to);
  impl_->vector = batch_supported(formats::f32, to, p);
  if (impl_->vector) impl_->params = batch_detail::make_params(batch_detail::Source::f32, to, p);
  impl_->params.stream_codes = stores == CodeStores::streaming;
}

ScaledBatch::~ScaledBatch() { flush(); }

void ScaledBatch::flush() const {
  if (impl_->params.stream_codes) hwy::FlushStream();
}

void ScaledBatch::run(const float* in, std::size_t n, const float* mult, std::size_t block, void* out_codes,
                      const std::uint32_t* rbits, const float* ahead) const {
  const Impl& s = *impl_;
  const bool sr = is_stochastic(s.policy.rounding);
  std::size_t done = 0;
  if (s.vector)
    done = HWY_DYNAMIC_DISPATCH(batch_detail::ConvertScaledVectors)(s.params, s.policy.rounding, in, n, mult, block,
                                                                   out_codes, s.out_bytes, sr ? rbits : nullptr, ahead);
  // The rest (the tail, or every element of a pair the vector kernel does not take) one at a time.
  for (std::size_t i = done; i < n; ++i) {
    const float m = mult[block == 1 ? i : i / block];
    const float y = std::isnan(m) ? m : in[i] * m;
    const Result r = convert(formats::f32, std::bit_cast<std::uint32_t>(y), *s.to, s.policy, sr ? rbits[i] : 0);
    batch_detail::store_code(out_codes, s.out_bytes, i, r.code);
  }
}

bool ScaledBatch::takes_blocks(std::size_t n, std::size_t block) const {
  const Impl& s = *impl_;
  return s.vector && s.out_bytes == 1 && s.policy.rounding == Rounding::rne && s.params.rne_fast &&
         batch_detail::rne_environment() && HWY_DYNAMIC_DISPATCH(batch_detail::BlocksTake)(n, block);
}

std::size_t ScaledBatch::run_blocks(const float* in, std::size_t rows, std::size_t n, std::size_t block,
                                    const BlockRule& rule, std::uint8_t* out_codes, std::uint64_t* scales,
                                    std::uint8_t* row_ok, const float* end) const {
  if (rows == 0) return 0;
  if (!takes_blocks(n, block)) {
    std::fill(row_ok, row_ok + rows, std::uint8_t{0});
    return 0;
  }
  // The nvfp4 rule's block scales: e4m3, rounded to nearest even and saturated.
  batch_detail::Params scale_params;
  if (rule.kind == BlockRuleKind::nvfp4)
    scale_params = batch_detail::make_params(batch_detail::Source::f32, formats::e4m3,
                                             Policy{.rounding = Rounding::rne, .overflow = Overflow::satfinite});
  return HWY_DYNAMIC_DISPATCH(batch_detail::BlocksRows)(impl_->params, rule, scale_params, in, rows, n, block,
                                                        out_codes, scales, row_ok, end);
}

void block_abs_max_bits(const float* in, std::size_t n, std::size_t block, std::uint32_t* top, std::uint32_t* min_m1) {
  if (n == 0) return;
  if (HWY_DYNAMIC_DISPATCH(batch_detail::BlockAbsMax)(in, n, block, top, min_m1)) return;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t a = std::bit_cast<std::uint32_t>(in[i]) & 0x7FFFFFFFu;
    std::uint32_t& t = top[i / block];
    t = a > t ? a : t;
    if (min_m1 != nullptr && a - 1u < *min_m1) *min_m1 = a - 1u;
  }
}

const char* batch_target_name() { return HWY_DYNAMIC_DISPATCH(batch_detail::TargetName)(); }

}  // namespace lowbit
#endif  // HWY_ONCE
