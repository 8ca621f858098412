// MPFR as a second, independent oracle for the rounding of finite values (docs/semantics.md §2, §8).
//
// lowbit's exact path (GMP rationals) and its integer path are compared here with GNU MPFR emulating each
// target format the way MPFR's own tests emulate IEEE formats: precision = the target's significand bits,
// exponent range = the target's, mpfr_check_range for overflow and underflow, then mpfr_subnormalize for
// the subnormal range (MPFR manual, "Exception Related Functions"; src/subnormal.c).  Round to nearest,
// ties away (rna), which MPFR's functions do not offer, is emulated with one extra bit: x rounded toward
// zero on the target's grid refined by one bit tells whether x lies below the midpoint (then rtz) or at or
// above it (then away from zero).  Compared for every case: the value of the code, the sign of a zero where
// the target has -0, the flags inexact, underflow, overflow (and no invalid), and the ternary value.
//
// Nothing here calls lowbit to compute an expectation: the targets' fields and largest values are written
// below from the specifications (OCP OFP8 and MX v1.0, IEEE 754-2019, the P3109 interim report), codes are
// decoded by this file's own decoder, and source values reach MPFR through mpfr_set_flt / mpfr_set_d, the
// compiler's _Float16, or that decoder.
//
// What MPFR cannot speak to stays lowbit's own rule and is tested elsewhere (conformance/checks, the peer
// tests): NaN and infinite inputs and NaN payloads; saturation (only Overflow::nosat is compared here);
// where the target has no infinity, the NaN (or, without NaN, the largest value) that an overflow to
// infinity becomes; ftz/daz and tininess "before rounding" (MPFR detects tininess after rounding only);
// negative values into unsigned formats; zero and values below 2^-127 into e8m0, which has no zero; ties
// under rne in formats of precision 1 (e8m0, P3109 binaryKp1: no even neighbour, MPFR rounds such a tie away,
// lowbit to the even code as P3109 defines it); and -0 where the format has none (FNUZ, P3109, two's complement: lowbit gives +0).
//
// Tiers: MpfrQuick samples every sweep (a few seconds); MpfrFull is exhaustive where practical: every code
// of bf16, f16 and every 8-bit (and narrower) format as the source, and for f32 and f64 sources every
// point of each target's grid refined by one bit (two in the binade below the smallest normal, where
// tininess is decided) with the source's neighbours on either side, plus random inputs.
#include <gtest/gtest.h>
#include <mpfr.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "lowbit/convert.hpp"
#include "lowbit/exact.hpp"
#include "lowbit/names.hpp"
#include "lowbit/registry.hpp"

namespace {

using lowbit::Format;
using lowbit::Policy;
using lowbit::Result;
using lowbit::Rounding;

// ---- the targets, from their specifications -------------------------------------------------------------

enum class Sign { magnitude, none, twos_complement };
enum class NanAt { none, ieee, all_ones, negative_zero };  // negative_zero: the one NaN at 0x80 (FNUZ, P3109)
enum class InfAt { none, ieee, top };                      // top: the largest magnitude code that is not NaN

struct Target {
  const char* name;  // as lowbit::find_format spells it
  int e, m, bias;    // exponent and mantissa field widths; bias (a fixed-point format: e = 0, ulp 2^-bias)
  Sign sign;
  NanAt nan;
  InfAt inf;
  bool has_zero;  // false: the exponent field 0 is an ordinary binade (e8m0)
  double max;     // the largest finite value, as the specification tables state it
};

// OCP OFP8 v1.0 (e4m3, e5m2), OCP MX v1.0 §5 (e2m3, e3m2, e2m1, e8m0, MXINT8 with its implicit 2^-6),
// IEEE 754-2019 binary16, bfloat16, ml_dtypes' float8 family, NVFP4's ue4m3 scale, the P3109 interim report
// v4.0 (binaryKpP: bias 2^(K-P-1) signed, 2^(K-P) unsigned) and three parametric formats.
const Target k_targets[] = {
    {"bf16", 8, 7, 127, Sign::magnitude, NanAt::ieee, InfAt::ieee, true, 0x1.fep127},
    {"f16", 5, 10, 15, Sign::magnitude, NanAt::ieee, InfAt::ieee, true, 65504},
    {"e4m3", 4, 3, 7, Sign::magnitude, NanAt::all_ones, InfAt::none, true, 448},
    {"e5m2", 5, 2, 15, Sign::magnitude, NanAt::ieee, InfAt::ieee, true, 57344},
    {"e4m3fnuz", 4, 3, 8, Sign::magnitude, NanAt::negative_zero, InfAt::none, true, 240},
    {"e5m2fnuz", 5, 2, 16, Sign::magnitude, NanAt::negative_zero, InfAt::none, true, 57344},
    {"e4m3b11fnuz", 4, 3, 11, Sign::magnitude, NanAt::negative_zero, InfAt::none, true, 30},
    {"e4m3ieee", 4, 3, 7, Sign::magnitude, NanAt::ieee, InfAt::ieee, true, 240},
    {"e3m4", 3, 4, 3, Sign::magnitude, NanAt::ieee, InfAt::ieee, true, 15.5},
    {"e2m3", 2, 3, 1, Sign::magnitude, NanAt::none, InfAt::none, true, 7.5},
    {"e3m2", 3, 2, 3, Sign::magnitude, NanAt::none, InfAt::none, true, 28},
    {"e2m1", 2, 1, 1, Sign::magnitude, NanAt::none, InfAt::none, true, 6},
    {"e8m0", 8, 0, 127, Sign::none, NanAt::all_ones, InfAt::none, false, 0x1p127},
    {"ue4m3", 4, 3, 7, Sign::none, NanAt::all_ones, InfAt::none, true, 448},
    {"int8", 0, 7, 6, Sign::twos_complement, NanAt::none, InfAt::none, true, 127.0 / 64},
    {"int8sm", 0, 7, 6, Sign::magnitude, NanAt::none, InfAt::none, true, 127.0 / 64},
    // Precision 1: a zero and no subnormals, so a nonzero value below 2^emin rounds to 0 or 2^emin and is tiny
    // (IEEE 754-2019 §7.5); binary8p1se: 7 exponent bits, bias 2^6, ±inf at the top codes, max 2^(126-64).
    {"binary8p1se", 7, 0, 64, Sign::magnitude, NanAt::negative_zero, InfAt::top, true, 0x1p62},
    {"binary8p1sf", 7, 0, 64, Sign::magnitude, NanAt::negative_zero, InfAt::none, true, 0x1p63},
    {"binary8p3se", 5, 2, 16, Sign::magnitude, NanAt::negative_zero, InfAt::top, true, 49152},
    {"binary8p4sf", 4, 3, 8, Sign::magnitude, NanAt::negative_zero, InfAt::none, true, 240},
    {"binary8p5se", 3, 4, 4, Sign::magnitude, NanAt::negative_zero, InfAt::top, true, 15},
    {"binary8p3ue", 6, 2, 32, Sign::none, NanAt::all_ones, InfAt::top, true, 0x1.4p31},
    {"binary6p3uf", 4, 2, 8, Sign::none, NanAt::all_ones, InfAt::none, true, 192},
    {"binary4p2sf", 2, 1, 2, Sign::magnitude, NanAt::negative_zero, InfAt::none, true, 3},
    {"e6m9", 6, 9, 31, Sign::magnitude, NanAt::ieee, InfAt::ieee, true, 0x1.ff8p31},
    {"e3m2b2-fn", 3, 2, 2, Sign::magnitude, NanAt::all_ones, InfAt::none, true, 0x1.8p5},
    {"e4m2u", 4, 2, 7, Sign::none, NanAt::ieee, InfAt::ieee, true, 224},
};

bool fixed_point(const Target& t) { return t.e == 0; }
int code_bits(const Target& t) { return t.e + t.m + (t.sign == Sign::none ? 0 : 1); }
bool has_inf(const Target& t) { return t.inf != InfAt::none; }
bool has_nan(const Target& t) { return t.nan != NanAt::none; }
bool has_negative_zero(const Target& t) { return t.sign == Sign::magnitude && t.nan != NanAt::negative_zero; }
bool has_subnormals(const Target& t) { return t.has_zero && !fixed_point(t) && t.m > 0; }
// Exponent of the smallest normal binade.
int emin(const Target& t) { return t.has_zero ? 1 - t.bias : -t.bias; }
std::uint64_t ones(int n) { return n >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << n) - 1; }

// ---- decoding a code: class, sign, exact value ---------------------------------------------------------

enum class Class { finite, inf, nan };

struct Decoded {
  Class cls = Class::finite;
  bool negative = false;
  std::uint64_t significand = 0;  // finite: value = significand * 2^exponent
  long exponent = 0;
};

Decoded decode(const Target& t, std::uint64_t code) {
  Decoded d;
  const int mag_bits = t.e + t.m;
  std::uint64_t mag = code & ones(mag_bits);
  if (t.sign == Sign::magnitude) d.negative = ((code >> mag_bits) & 1) != 0;
  if (t.sign == Sign::twos_complement) {
    const auto v = static_cast<std::int64_t>(code << (64 - code_bits(t))) >> (64 - code_bits(t));
    d.negative = v < 0;
    mag = static_cast<std::uint64_t>(v < 0 ? -v : v);
  }
  const std::uint64_t field = fixed_point(t) ? 0 : mag >> t.m;
  const std::uint64_t mant = mag & ones(t.m);
  const bool top_field = !fixed_point(t) && field == ones(t.e);
  switch (t.nan) {
    case NanAt::none: break;
    case NanAt::ieee:
      if (top_field && mant != 0) d.cls = Class::nan;
      break;
    case NanAt::all_ones:
      if (mag == ones(mag_bits)) d.cls = Class::nan;
      break;
    case NanAt::negative_zero:
      if (d.negative && mag == 0) d.cls = Class::nan;
      break;
  }
  if (d.cls == Class::nan) return d;
  const std::uint64_t top_non_nan = t.nan == NanAt::all_ones ? ones(mag_bits) - 1 : ones(mag_bits);
  if ((t.inf == InfAt::ieee && top_field && mant == 0) || (t.inf == InfAt::top && mag == top_non_nan)) {
    d.cls = Class::inf;
    return d;
  }
  if (fixed_point(t)) {
    d.significand = mag;
    d.exponent = -t.bias;
  } else if (t.has_zero && field == 0) {
    d.significand = mant;
    d.exponent = 1 - t.bias - t.m;
  } else {
    d.significand = (std::uint64_t{1} << t.m) | mant;
    d.exponent = static_cast<long>(field) - t.bias - t.m;
  }
  return d;
}

void set_value(mpfr_ptr v, const Decoded& d) {
  mpfr_set_uj_2exp(v, d.significand, d.exponent, MPFR_RNDN);  // exact: precision 64 holds any significand
  if (d.negative) mpfr_neg(v, v, MPFR_RNDN);
}

// ---- MPFR's answer ---------------------------------------------------------------------------------------

// An MPFR variable of a given precision, cleared on scope exit.
struct Mp {
  mpfr_t v;
  explicit Mp(mpfr_prec_t p) { mpfr_init2(v, p); }
  ~Mp() { mpfr_clear(v); }
  Mp(const Mp&) = delete;
  Mp& operator=(const Mp&) = delete;
  operator mpfr_ptr() { return v; }
  operator mpfr_srcptr() const { return v; }
};

// Restores MPFR's exponent range on scope exit.
struct RangeGuard {
  mpfr_exp_t lo = mpfr_get_emin(), hi = mpfr_get_emax();
  ~RangeGuard() {
    mpfr_set_emin(lo);
    mpfr_set_emax(hi);
  }
};

enum class Outcome { finite, infinity, to_max };

struct Expected {
  Outcome outcome = Outcome::finite;
  bool negative = false;
  int ternary = 0;
  std::uint8_t flags = 0;  // lowbit::flag mask
};

mpfr_rnd_t mpfr_mode(Rounding r) {
  switch (r) {
    case Rounding::rne: return MPFR_RNDN;
    case Rounding::rtz: return MPFR_RNDZ;
    case Rounding::rup: return MPFR_RNDU;
    case Rounding::rdn: return MPFR_RNDD;
    default: break;
  }
  ADD_FAILURE() << "no MPFR rounding mode for " << static_cast<int>(r);
  return MPFR_RNDN;
}

int sign_of(int t) { return (t > 0) - (t < 0); }

// x rounded with `rnd` to y's precision with an unbounded exponent, then brought into the exponent range
// whose smallest positive value is 2^(e0 - 1) (MPFR's emin = e0) and whose largest binade ends below 2^e1
// (emax = e1), with subnormals when `subnormals`.  MPFR's flags are left as the calls set them; returns the
// ternary value.
int round_emulated(mpfr_ptr y, mpfr_srcptr x, mpfr_rnd_t rnd, mpfr_exp_t e0, mpfr_exp_t e1, bool subnormals) {
  RangeGuard guard;
  int t = mpfr_set(y, x, rnd);
  mpfr_set_emin(e0);
  mpfr_set_emax(e1);
  t = mpfr_check_range(y, t, rnd);
  if (subnormals) t = mpfr_subnormalize(y, t, rnd);
  return t;
}

// The direction rna takes at `prec` bits with an unbounded exponent, by one extra bit: x toward zero at
// prec + 1 bits; when that is already on the prec-bit grid x lies below the midpoint (toward zero), else at
// or above it (away from zero).
mpfr_rnd_t rna_direction_unbounded(mpfr_srcptr x, mpfr_prec_t prec) {
  Mp fine(prec + 1), coarse(prec);
  mpfr_set(fine, x, MPFR_RNDZ);
  return mpfr_set(coarse, fine, MPFR_RNDZ) == 0 ? MPFR_RNDZ : MPFR_RNDA;
}

// A floating-point target.  The finite result goes to `value` (precision 64).
Expected expected_float(const Target& t, mpfr_srcptr x, Rounding mode, mpfr_ptr value) {
  const mpfr_prec_t prec = t.m + 1;
  // MPFR's exponent of 2^k is k + 1.  Smallest positive value: 2^(emin - m) with subnormals, else 2^emin.
  const mpfr_exp_t e0 = has_subnormals(t) ? emin(t) - t.m + 1 : emin(t) + 1;
  const mpfr_exp_t e1 = std::ilogb(t.max) + 1;
  const bool negative = mpfr_signbit(x) != 0;
  const bool sub = has_subnormals(t);
  Expected want;
  want.negative = negative;
  Mp y(prec);
  bool tiny = false;
  int ternary = 0;
  if (mode == Rounding::rna) {
    // The direction from the grid refined by one bit (in the subnormal range too: MPFR's emin one lower),
    // then the rounding in that direction.  Tininess after rounding asks for rna with an unbounded exponent.
    Mp fine(prec + 1), coarse(prec), unbounded(prec), smallest_normal(8);
    round_emulated(fine, x, MPFR_RNDZ, e0 - 1, e1, sub);
    const mpfr_rnd_t dir = round_emulated(coarse, fine, MPFR_RNDZ, e0, e1, sub) == 0 ? MPFR_RNDZ : MPFR_RNDA;
    mpfr_set(unbounded, x, rna_direction_unbounded(x, prec));
    mpfr_set_ui_2exp(smallest_normal, 1, emin(t), MPFR_RNDN);
    tiny = t.has_zero && !fixed_point(t) && !mpfr_zero_p(unbounded) && mpfr_cmpabs(unbounded, smallest_normal) < 0;
    mpfr_clear_flags();
    ternary = round_emulated(y, x, dir, e0, e1, sub);
  } else {
    mpfr_clear_flags();
    ternary = round_emulated(y, x, mpfr_mode(mode), e0, e1, sub);
    tiny = mpfr_underflow_p() != 0;  // from check_range or subnormalize: tiny after rounding
  }
  bool overflow = mpfr_overflow_p() != 0;
  Mp max(64);
  mpfr_set_d(max, t.max, MPFR_RNDN);
  if (mpfr_inf_p(y)) {
    want.outcome = Outcome::infinity;
  } else if (mpfr_cmpabs(y, max) > 0) {
    // The top binade is partly NaN or Inf (e4m3, ue4m3, P3109 extended): a rounded value (unbounded
    // exponent) above the largest finite one is an overflow, which goes by direction (IEEE 754-2019 §7.4).
    overflow = true;
    const bool to_inf = mode == Rounding::rne || mode == Rounding::rna || (mode == Rounding::rup && !negative) ||
                        (mode == Rounding::rdn && negative);
    want.outcome = to_inf ? Outcome::infinity : Outcome::to_max;
  }
  const bool inexact = ternary != 0 || overflow;
  switch (want.outcome) {
    case Outcome::finite: want.ternary = sign_of(ternary); break;
    case Outcome::infinity: want.ternary = negative ? -1 : 1; break;
    case Outcome::to_max: want.ternary = negative ? 1 : -1; break;
  }
  // MPFR raises underflow for an exact subnormal result too; IEEE 754-2019 §7.5 (default exception
  // handling) raises the flag only when the tiny result is also inexact.
  if (inexact) want.flags |= lowbit::flag::inexact;
  if (tiny && inexact) want.flags |= lowbit::flag::underflow;
  if (overflow) want.flags |= lowbit::flag::overflow;
  mpfr_set(value, y, MPFR_RNDN);
  return want;
}

// A fixed-point target (int8: integer multiples of 2^-bias): mpfr_rint in the direction asked, and
// mpfr_round (ties away from zero) for rna.  Beyond the range the format saturates (it has neither Inf nor
// NaN); there is no tininess in a fixed-point format.
Expected expected_fixed(const Target& t, mpfr_srcptr x, Rounding mode, mpfr_ptr value) {
  Expected want;
  want.negative = mpfr_signbit(x) != 0;
  Mp scaled(80), n(80);
  mpfr_mul_2si(scaled, x, t.bias, MPFR_RNDN);  // exact
  const int ternary = mode == Rounding::rna ? mpfr_round(n, scaled) : mpfr_rint(n, scaled, mpfr_mode(mode));
  const long top = static_cast<long>(ones(t.m));
  const long bottom = t.sign == Sign::twos_complement ? -top - 1 : -top;
  if (mpfr_cmp_si(n, top) > 0 || mpfr_cmp_si(n, bottom) < 0) {
    want.outcome = Outcome::to_max;
    want.ternary = want.negative ? 1 : -1;
    want.flags = lowbit::flag::inexact | lowbit::flag::overflow;
    return want;
  }
  want.ternary = sign_of(ternary);
  if (ternary != 0) want.flags = lowbit::flag::inexact;
  mpfr_div_2si(value, n, t.bias, MPFR_RNDN);
  return want;
}

// ---- comparison ------------------------------------------------------------------------------------------

std::string text_of(mpfr_srcptr v) {
  char buf[128];
  mpfr_snprintf(buf, sizeof buf, "%Ra", v);
  return buf;
}

std::string hex(std::uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// Empty when `got` is what MPFR says, else what differs.
std::string compare(const Target& t, const Expected& want, mpfr_srcptr value, const Result& got) {
  std::string why;
  if (got.code > ones(code_bits(t))) return "the code does not fit the format";
  const Decoded d = decode(t, got.code);
  Outcome outcome = want.outcome;
  int ternary = want.ternary;
  if (outcome == Outcome::infinity && !has_inf(t)) {
    if (has_nan(t)) {
      // lowbit's rule (docs/semantics.md §2): an overflow to infinity in a format without it is NaN.
      if (d.cls != Class::nan) why += "an overflow to infinity should give the format's NaN; ";
      ternary = 0;
    } else {
      outcome = Outcome::to_max;  // neither Inf nor NaN: the format saturates
      ternary = want.negative ? 1 : -1;
    }
  }
  if (outcome == Outcome::infinity && has_inf(t) && (d.cls != Class::inf || d.negative != want.negative))
    why += std::string("expected ") + (want.negative ? "-inf; " : "+inf; ");
  if (outcome == Outcome::to_max || outcome == Outcome::finite) {
    Mp want_value(64), got_value(64);
    if (outcome == Outcome::to_max) {
      mpfr_set_d(want_value, want.negative ? -t.max : t.max, MPFR_RNDN);
      if (t.sign == Sign::twos_complement && want.negative) mpfr_set_d(want_value, -2.0, MPFR_RNDN);
    } else {
      mpfr_set(want_value, value, MPFR_RNDN);
    }
    if (d.cls != Class::finite) {
      why += "expected the finite value " + text_of(want_value) + "; ";
    } else {
      set_value(got_value, d);
      if (!mpfr_equal_p(got_value, want_value)) why += "expected the value " + text_of(want_value) + "; ";
      else if (mpfr_zero_p(want_value) && has_negative_zero(t) && mpfr_signbit(got_value) != mpfr_signbit(want_value))
        why += "the sign of zero differs; ";
    }
  }
  if (got.flags != want.flags) why += "expected flags " + std::to_string(want.flags) + "; ";
  if (got.ternary != ternary) why += "expected ternary " + std::to_string(ternary) + "; ";
  if (!why.empty()) {
    why += "got " + hex(got.code) + " flags " + std::to_string(got.flags) + " ternary " + std::to_string(got.ternary);
  }
  return why;
}

// ---- sources ---------------------------------------------------------------------------------------------

enum class SourceKind { f32, f64, bf16, f16, table };
struct Source {
  SourceKind kind;
  const Target* table = nullptr;  // kind table: a format of the target list
  const Format* format = nullptr;
  const char* name = "";
};

// The exact value of a source code, from MPFR's own conversions, the compiler's _Float16, or this file's
// decoder.  False for NaN and infinity (lowbit's own rules, tested elsewhere).
bool source_value(const Source& s, std::uint64_t code, mpfr_ptr v) {
  switch (s.kind) {
    case SourceKind::f32: {
      const float f = std::bit_cast<float>(static_cast<std::uint32_t>(code));
      if (!std::isfinite(f)) return false;
      mpfr_set_flt(v, f, MPFR_RNDN);
      return true;
    }
    case SourceKind::f64: {
      const double f = std::bit_cast<double>(code);
      if (!std::isfinite(f)) return false;
      mpfr_set_d(v, f, MPFR_RNDN);
      return true;
    }
    case SourceKind::bf16: {
      const float f = std::bit_cast<float>(static_cast<std::uint32_t>(code << 16));
      if (!std::isfinite(f)) return false;
      mpfr_set_flt(v, f, MPFR_RNDN);
      return true;
    }
    case SourceKind::f16: {
      const float f = static_cast<float>(std::bit_cast<_Float16>(static_cast<std::uint16_t>(code)));
      if (!std::isfinite(f)) return false;
      mpfr_set_flt(v, f, MPFR_RNDN);
      return true;
    }
    case SourceKind::table: {
      const Decoded d = decode(*s.table, code);
      if (d.cls != Class::finite) return false;
      set_value(v, d);
      return true;
    }
  }
  return false;
}

const Format& lowbit_format(const char* name) {
  const Format* f = lowbit::find_format(name);
  if (!f) throw std::runtime_error(std::string("lowbit has no format ") + name);
  return *f;
}

Source f32_source() { return {SourceKind::f32, nullptr, &lowbit::formats::f32, "f32"}; }
Source f64_source() { return {SourceKind::f64, nullptr, &lowbit::formats::f64, "f64"}; }

// Every target of at most 8 bits is also a source (its every code).
std::vector<Source> small_sources() {
  std::vector<Source> r;
  for (const Target& t : k_targets)
    if (code_bits(t) <= 8) r.push_back({SourceKind::table, &t, &lowbit_format(t.name), t.name});
  return r;
}

// Inputs that MPFR cannot speak to for this target (see the header).
bool outside_oracle(const Target& t, mpfr_srcptr x, Rounding mode) {
  if (t.sign == Sign::none && mpfr_signbit(x) && !mpfr_zero_p(x)) return true;
  if (!t.has_zero) {
    if (mpfr_zero_p(x)) return true;
    Mp smallest(8);
    mpfr_set_ui_2exp(smallest, 1, emin(t), MPFR_RNDN);
    if (mpfr_cmpabs(x, smallest) < 0) return true;
  }
  if (mode == Rounding::rne && t.m == 0 && !fixed_point(t)) {
    // A tie between two powers of two: x = 3 * 2^k.  Precision 1 has no even significand; lowbit (after P3109's
    // ties-to-even on the encoding, as gfloat computes it) takes the even code, MPFR rounds such a tie away.
    Mp two_bits(2);
    if (mpfr_set(two_bits, x, MPFR_RNDN) == 0 && !mpfr_zero_p(two_bits)) {
      Mp one_bit(1);
      if (mpfr_set(one_bit, two_bits, MPFR_RNDN) != 0) return true;
    }
  }
  return false;
}

// ---- the sweep -------------------------------------------------------------------------------------------

constexpr Rounding k_modes[] = {Rounding::rne, Rounding::rna, Rounding::rtz, Rounding::rup, Rounding::rdn};

struct Input {
  const Source* source;
  std::uint64_t code;
};

struct Tally {
  std::atomic<std::uint64_t> compared{0}, mismatches{0};
  std::mutex mutex;
  std::vector<std::string> shown;
  void report(std::string line) {
    std::lock_guard<std::mutex> lock(mutex);
    if (shown.size() < 20) shown.push_back(std::move(line));
  }
};

const char* mode_name(Rounding r) { return lowbit::name(r); }

// Every input into `t` under every mode: MPFR against lowbit's exact path and its integer path.
void sweep(const Target& t, const std::vector<Input>& inputs, Tally& tally) {
  const Format& to = lowbit_format(t.name);
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, inputs.size(), 256),
                    [&](const tbb::blocked_range<std::size_t>& r) {
                      Mp x(64), value(64);
                      for (std::size_t i = r.begin(); i != r.end(); ++i) {
                        const Input& in = inputs[i];
                        if (!source_value(*in.source, in.code, x)) continue;
                        for (Rounding mode : k_modes) {
                          if (outside_oracle(t, x, mode)) continue;
                          const Expected want =
                              fixed_point(t) ? expected_fixed(t, x, mode, value) : expected_float(t, x, mode, value);
                          const Policy p{.rounding = mode, .overflow = lowbit::Overflow::nosat};
                          const Result exact = lowbit::exact::convert(*in.source->format, in.code, to, p);
                          const Result fast = lowbit::convert(*in.source->format, in.code, to, p);
                          tally.compared.fetch_add(1, std::memory_order_relaxed);
                          for (const auto& [path, got] : {std::pair{"exact", exact}, std::pair{"integer", fast}}) {
                            const std::string why = compare(t, want, value, got);
                            if (why.empty()) continue;
                            tally.mismatches.fetch_add(1, std::memory_order_relaxed);
                            tally.report(std::string(t.name) + " " + mode_name(mode) + " nosat, " + path + " path, " +
                                         in.source->name + " " + hex(in.code) + " = " + text_of(x) + ": " + why);
                          }
                        }
                      }
                    });
}

void expect_clean(const Target& t, Tally& tally, const char* what) {
  std::printf("  %-12s %10llu cases, %llu mismatches (%s)\n", t.name,
              static_cast<unsigned long long>(tally.compared.load()),
              static_cast<unsigned long long>(tally.mismatches.load()), what);
  EXPECT_GT(tally.compared.load(), 0u) << t.name << ": nothing was compared (" << what << ")";
  std::string lines;
  for (const std::string& s : tally.shown) lines += "\n  " + s;
  EXPECT_EQ(tally.mismatches.load(), 0u) << t.name << " (" << what << "), " << tally.compared.load()
                                         << " cases; first mismatches:" << lines;
}

// Every code of the small formats (every `stride`-th code of bf16 and f16, all of them with stride 1).
void every_code(int stride_16) {
  static const std::vector<Source> small = small_sources();
  static const Source bf16{SourceKind::bf16, nullptr, &lowbit::formats::bf16, "bf16"};
  static const Source f16{SourceKind::f16, nullptr, &lowbit::formats::f16, "f16"};
  std::vector<Input> inputs;
  for (const Source& s : small)
    for (std::uint64_t c = 0; c <= ones(code_bits(*s.table)); ++c) inputs.push_back({&s, c});
  for (const Source* s : {&bf16, &f16})
    for (std::uint64_t c = 0; c < 65536; c += static_cast<std::uint64_t>(stride_16)) inputs.push_back({s, c});
  for (const Target& t : k_targets) {
    Tally tally;
    sweep(t, inputs, tally);
    expect_clean(t, tally, "every code of the small formats, bf16 and f16");
  }
}

// f32 or f64 inputs on and around each target's grid refined by one bit (two bits in the binade below the
// smallest normal, where tininess after rounding is decided), both signs, with the source's next value up
// and down; every `stride`-th grid point.  Fixed point: the grid 2^-(bias+1) over twice the range.
std::vector<Input> grid_inputs(const Target& t, const Source& s, int stride) {
  std::vector<double> points;
  if (fixed_point(t)) {
    const double ulp = std::ldexp(1.0, -t.bias - 1);
    for (int n = -4 * (1 << t.m); n <= 4 * (1 << t.m); ++n) points.push_back(n * ulp);
  } else {
    const int top = std::ilogb(t.max);
    for (int e = emin(t) - t.m - 3; e <= top + 2; ++e) {
      const int extra = e == emin(t) - 1 ? 2 : 1;
      const int k0 = 1 << (t.m + extra);
      for (int k = k0; k < 2 * k0; ++k) points.push_back(std::ldexp(static_cast<double>(k), e - t.m - extra));
    }
  }
  std::vector<Input> r;
  std::size_t at = 0;
  for (double v : points) {
    if (at++ % static_cast<std::size_t>(stride) != 0) continue;
    for (double sv : {v, -v}) {
      if (s.kind == SourceKind::f32) {
        const float f = static_cast<float>(sv);
        if (!std::isfinite(f) || static_cast<double>(f) != sv) continue;
        for (float g : {f, std::nextafter(f, INFINITY), std::nextafter(f, -INFINITY)})
          r.push_back({&s, std::bit_cast<std::uint32_t>(g)});
      } else {
        for (double g : {sv, std::nextafter(sv, INFINITY), std::nextafter(sv, -INFINITY)})
          r.push_back({&s, std::bit_cast<std::uint64_t>(g)});
      }
    }
  }
  return r;
}

// Random f32 bit patterns (every class), and f32 / f64 values with a random significand and an exponent
// around the target's range (below its smallest subnormal to beyond its largest value).
std::vector<Input> random_inputs(const Target& t, const Source& s32, const Source& s64, int n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Input> r;
  const int lo = (fixed_point(t) ? -t.bias : emin(t) - t.m) - 6, hi = std::ilogb(t.max) + 4;
  std::uniform_int_distribution<int> exponent(lo, hi);
  for (int i = 0; i < n; ++i) {
    r.push_back({&s32, rng() & 0xFFFFFFFFu});
    const double sig = std::ldexp(static_cast<double>(rng() >> 11), -52);  // [0, 2)
    const double v = std::ldexp(1.0 + sig / 2, exponent(rng)) * ((rng() & 1) ? -1 : 1);
    const float f = static_cast<float>(v);
    if (std::isfinite(f)) r.push_back({&s32, std::bit_cast<std::uint32_t>(f)});
    r.push_back({&s64, std::bit_cast<std::uint64_t>(v)});
  }
  return r;
}

void wide_sources(int grid_stride, int random_count) {
  static const Source s32 = f32_source(), s64 = f64_source();
  for (const Target& t : k_targets) {
    std::vector<Input> inputs = grid_inputs(t, s32, grid_stride);
    const std::vector<Input> g64 = grid_inputs(t, s64, grid_stride);
    const std::vector<Input> rnd =
        random_inputs(t, s32, s64, random_count, 0x6c6f77626974u + std::hash<std::string>{}(t.name));
    inputs.insert(inputs.end(), g64.begin(), g64.end());
    inputs.insert(inputs.end(), rnd.begin(), rnd.end());
    Tally tally;
    sweep(t, inputs, tally);
    expect_clean(t, tally, "f32 and f64 sources on and around the target's grid, and random ones");
  }
}

// ---- the tests -------------------------------------------------------------------------------------------

// The table above against lowbit's rows: a typo on either side shows here, before any rounding is compared.
TEST(MpfrQuick, TargetsMatchTheFormatRows) {
  for (const Target& t : k_targets) {
    SCOPED_TRACE(t.name);
    const Format& f = lowbit_format(t.name);
    EXPECT_EQ(f.exponent_bits, t.e);
    EXPECT_EQ(f.mantissa_bits, t.m);
    if (!fixed_point(t)) EXPECT_EQ(f.bias, t.bias);
    else EXPECT_EQ(f.emin() - f.mantissa_bits, -t.bias);  // the ulp of the fixed-point row
    EXPECT_EQ(f.code_bits(), code_bits(t));
    EXPECT_EQ(f.has_zero, t.has_zero);
    EXPECT_EQ(f.has_nan(), has_nan(t));
    EXPECT_EQ(f.has_inf(), has_inf(t));
    EXPECT_EQ(f.is_signed(), t.sign != Sign::none);
    EXPECT_EQ(lowbit::max_value(f), t.max);
    // This file's decoder against the specification's largest value: the largest finite code decodes to it.
    double largest = 0;
    for (std::uint64_t c = 0; c <= ones(std::min(code_bits(t), 16)); ++c) {
      const Decoded d = decode(t, c);
      if (d.cls == Class::finite && !d.negative)
        largest = std::max(largest, std::ldexp(static_cast<double>(d.significand), static_cast<int>(d.exponent)));
    }
    EXPECT_EQ(largest, t.max);
  }
}

TEST(MpfrQuick, ThreadLocalExponentRange) {
  // The sweeps set MPFR's exponent range in parallel tasks: MPFR must keep it per thread.
  EXPECT_TRUE(mpfr_buildopt_tls_p()) << "MPFR was built without thread-local storage";
}

// Hand-checked anchors, so that the oracle itself is seen to round as the specifications say.
TEST(MpfrQuick, OracleAnchors) {
  const Target& e4m3 = k_targets[2];
  const Target& e5m2 = k_targets[3];
  Mp x(64), v(64);
  mpfr_set_d(x, 464, MPFR_RNDN);  // a tie: 448 is even
  Expected w = expected_float(e4m3, x, Rounding::rne, v);
  EXPECT_EQ(w.outcome, Outcome::finite);
  EXPECT_EQ(mpfr_get_d(v, MPFR_RNDN), 448);
  EXPECT_EQ(w.flags, lowbit::flag::inexact);
  mpfr_set_d(x, 465, MPFR_RNDN);
  EXPECT_EQ(expected_float(e4m3, x, Rounding::rne, v).outcome, Outcome::infinity);
  EXPECT_EQ(expected_float(e4m3, x, Rounding::rtz, v).outcome, Outcome::finite);
  mpfr_set_d(x, 61440, MPFR_RNDN);  // e5m2: the tie above 57344 goes to 2^16, an overflow
  w = expected_float(e5m2, x, Rounding::rne, v);
  EXPECT_EQ(w.outcome, Outcome::infinity);
  EXPECT_EQ(w.flags, lowbit::flag::inexact | lowbit::flag::overflow);
  mpfr_set_d(x, 0x1.8p-10, MPFR_RNDN);  // e4m3: 3/4 of the smallest subnormal 2^-9: rne to 2^-9, tiny
  w = expected_float(e4m3, x, Rounding::rne, v);
  EXPECT_EQ(mpfr_get_d(v, MPFR_RNDN), 0x1p-9);
  EXPECT_EQ(w.flags, lowbit::flag::inexact | lowbit::flag::underflow);
  mpfr_set_d(x, 0x1p-10, MPFR_RNDN);  // half the smallest subnormal: rne gives 0, rna 2^-9
  EXPECT_EQ((expected_float(e4m3, x, Rounding::rne, v), mpfr_get_d(v, MPFR_RNDN)), 0);
  EXPECT_EQ((expected_float(e4m3, x, Rounding::rna, v), mpfr_get_d(v, MPFR_RNDN)), 0x1p-9);
  // Just below 2^-6 (e4m3's smallest normal): rounds to 2^-6, yet tiny after rounding unless the rounding
  // with an unbounded exponent reaches 2^-6.  2^-6 - 2^-11 is the point halfway in the 4-bit binade below.
  mpfr_set_d(x, 0x1p-6 - 0x1p-11, MPFR_RNDN);
  w = expected_float(e4m3, x, Rounding::rne, v);  // a tie in the binade below: to even 2^-6, not tiny
  EXPECT_EQ(mpfr_get_d(v, MPFR_RNDN), 0x1p-6);
  EXPECT_EQ(w.flags, lowbit::flag::inexact);
  mpfr_set_d(x, 0x1p-6 - 0x1p-11 - 0x1p-20, MPFR_RNDN);  // below that point: 2^-6 still, but tiny
  w = expected_float(e4m3, x, Rounding::rna, v);
  EXPECT_EQ(mpfr_get_d(v, MPFR_RNDN), 0x1p-6);
  EXPECT_EQ(w.flags, lowbit::flag::inexact | lowbit::flag::underflow);
}

TEST(MpfrQuick, SmallFormatsAndSampledHalf) { every_code(61); }
TEST(MpfrQuick, SampledWideSources) { wide_sources(23, 256); }

TEST(MpfrFull, EveryCodeOfSmallFormatsBf16AndF16) { every_code(1); }
TEST(MpfrFull, WideSources) { wide_sources(1, 1 << 14); }

}  // namespace
