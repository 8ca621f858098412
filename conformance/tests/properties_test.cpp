// RapidCheck properties of the conversion (foundation issue §7).  Each property is stated from the
// definitions of docs/semantics.md §2, not from the code: the comparisons use exact values (every value of
// a format of at most 16 bits is an exact double; the stochastic averages are GMP rationals).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <bit>
#include <cmath>

#include "lowbit/convert.hpp"
#include "lowbit/exact.hpp"
#include "lowbit/registry.hpp"

namespace {

using namespace lowbit;

// ---- generators ---------------------------------------------------------------------------------

const std::vector<const Format*>& targets() {
  static const std::vector<const Format*> v = [] {
    std::vector<const Format*> r;
    for (const Format& f : formats::builtin)
      if (f.storage_bits() <= 16) r.push_back(&f);
    for (const char* n : {"binary8p3se", "binary8p4sf", "binary8p3ue", "e3m4b5-fn"}) r.push_back(find_format(n));
    return r;
  }();
  return v;
}
const std::vector<const Format*>& signed_magnitude_targets() {
  static const std::vector<const Format*> v = [] {
    std::vector<const Format*> r;
    for (const Format* f : targets())
      if (f->signedness == Signedness::sign_magnitude) r.push_back(f);
    return r;
  }();
  return v;
}

const std::vector<Rounding> deterministic = {Rounding::rne, Rounding::rna, Rounding::rtz,
                                             Rounding::rup, Rounding::rdn, Rounding::rto};
const std::vector<Overflow> overflows = {Overflow::satfinite, Overflow::satpropagate, Overflow::nosat};

// A finite, non-zero double where the small formats live (binary exponent in [-150, 150]), with a
// random number of significant bits so that exact values, ties and near-ties all occur.
rc::Gen<double> small_range_double() {
  return rc::gen::apply(
      [](bool negative, int exponent, std::uint64_t mantissa, int kept) {
        const std::uint64_t m = kept >= 52 ? mantissa : (mantissa >> (52 - kept)) << (52 - kept);
        const double d = std::ldexp(1.0 + std::ldexp(static_cast<double>(m & ((1ull << 52) - 1)), -52), exponent);
        return negative ? -d : d;
      },
      rc::gen::arbitrary<bool>(), rc::gen::inRange(-150, 151), rc::gen::arbitrary<std::uint64_t>(),
      rc::gen::inRange(0, 53));
}

// ---- helpers ------------------------------------------------------------------------------------

std::uint64_t code_of(double d) { return std::bit_cast<std::uint64_t>(d); }

Result conv(double x, const Format& to, const Policy& p, std::uint64_t r = 0) {
  return convert(formats::f64, code_of(x), to, p, r);
}

// The value of a code as a double (exact for formats of at most 16 bits); NaN for NaN codes.
double value_of(const Format& f, std::uint64_t code) {
  const Unpacked u = unpack(f, code);
  double v = 0;
  switch (u.cls) {
    case ValueClass::nan: return std::nan("");
    case ValueClass::inf: v = INFINITY; break;
    case ValueClass::zero: v = 0; break;
    case ValueClass::finite: v = std::ldexp(static_cast<double>(u.significand), u.exponent); break;
  }
  return u.negative ? -v : v;
}
// The value of a magnitude code (finite).
double magnitude_value_of(const Format& f, std::uint64_t m) {
  return std::ldexp(static_cast<double>(f.magnitude_significand(m)), f.magnitude_exponent(m));
}

// A format from a list, named in the counterexample.
const Format& pick(const std::vector<const Format*>& list) {
  const Format& f = *list[*rc::gen::inRange<std::size_t>(0, list.size())];
  RC_LOG() << "target " << f.name << "\n";
  return f;
}

Policy make(Rounding r, Overflow o = Overflow::nosat, Subnormals s = Subnormals::keep) {
  Policy p;
  p.rounding = r;
  p.overflow = o;
  p.subnormals = s;
  return p;
}

// ---- properties ---------------------------------------------------------------------------------

// x <= y implies round(x) <= round(y), whenever neither result is NaN.
RC_GTEST_PROP(Properties, Monotonic, ()) {
  const Format& t = pick(targets());
  const Policy p = make(*rc::gen::elementOf(deterministic), *rc::gen::elementOf(overflows));
  double x = *small_range_double().as("x");
  double y = *small_range_double().as("y");
  if (y < x) std::swap(x, y);
  const double rx = value_of(t, conv(x, t, p).code);
  const double ry = value_of(t, conv(y, t, p).code);
  if (std::isnan(rx) || std::isnan(ry)) return;
  RC_ASSERT(rx <= ry);
}

// round(-x) = -round(x) for the symmetric modes; rup(-x) = -rdn(x).
RC_GTEST_PROP(Properties, SignSymmetric, ()) {
  const Format& t = pick(signed_magnitude_targets());
  const Rounding r = *rc::gen::elementOf(deterministic);
  const Overflow o = *rc::gen::elementOf(overflows);
  const double x = *small_range_double().as("x");
  const Rounding mirror = r == Rounding::rup ? Rounding::rdn : r == Rounding::rdn ? Rounding::rup : r;
  const double a = value_of(t, conv(-x, t, make(r, o)).code);
  const double b = value_of(t, conv(x, t, make(mirror, o)).code);
  if (std::isnan(a) || std::isnan(b)) {
    RC_ASSERT(std::isnan(a) && std::isnan(b));
    return;
  }
  RC_ASSERT(a == -b);
}

// The result is one of the two neighbours of x: nothing representable lies strictly between x and
// the result (checked by stepping the result's magnitude code one towards x).
RC_GTEST_PROP(Properties, Bracketing, ()) {
  const Format& t = pick(targets());
  const Policy p = make(*rc::gen::elementOf(deterministic), *rc::gen::elementOf(overflows));
  const double x = *small_range_double().as("x");
  const Result res = conv(x, t, p);
  if ((res.flags & (flag::overflow | flag::invalid)) || t.is_nan_code(res.code)) return;
  const double r = value_of(t, res.code);
  if (r == x) return;
  RC_ASSERT(r == 0 || (r < 0) == (x < 0));
  const std::uint64_t m = t.code_magnitude(res.code);
  const double ax = std::fabs(x), ar = std::fabs(r);
  if (ar < ax) {
    // The next value up: one more unit in the last place, which past max is the value the format
    // would have with an unbounded exponent (rounding below it toward max is not an overflow).
    RC_ASSERT(std::ldexp(static_cast<double>(t.magnitude_significand(m) + 1), t.magnitude_exponent(m)) > ax);
  } else if (m > 0) {
    RC_ASSERT(magnitude_value_of(t, m - 1) < ax);
  } else {
    RC_ASSERT(!t.has_zero);  // rounded up to the smallest value of a format without zero
  }
}

// rdn(x) <= x <= rup(x) when nothing overflows; on overflow without saturation, rup of a positive
// value is +Inf where the format has it (docs/semantics.md §2, nosat).
RC_GTEST_PROP(Properties, DirectedRoundingInequalities, ()) {
  const Format& t = pick(targets());
  const Overflow o = *rc::gen::elementOf(overflows);
  const double x = *small_range_double().as("x");
  const Result up = conv(x, t, make(Rounding::rup, o));
  const Result dn = conv(x, t, make(Rounding::rdn, o));
  const double u = value_of(t, up.code), d = value_of(t, dn.code);
  if (!(up.flags & flag::overflow) && !std::isnan(u)) RC_ASSERT(x <= u);
  // A format without zero sends everything below its smallest value to that value (docs/semantics.md §3,
  // e8m0), so rdn cannot go below x there.
  const bool floor_of_range = !t.has_zero && (dn.flags & flag::underflow);
  if (!(dn.flags & flag::overflow) && !std::isnan(d) && !floor_of_range) RC_ASSERT(d <= x);
  if ((up.flags & flag::overflow) && x > 0 && o == Overflow::nosat && t.has_inf()) RC_ASSERT(u == INFINITY);
  if ((dn.flags & flag::overflow) && x < 0 && o == Overflow::nosat && t.has_inf()) RC_ASSERT(d == -INFINITY);
  if (!std::isnan(u) && !std::isnan(d)) RC_ASSERT(d <= u);
}

// Rounding a result again into its own format changes nothing and raises nothing.
RC_GTEST_PROP(Properties, Idempotent, ()) {
  const Format& t = pick(targets());
  const Subnormals s = *rc::gen::element(Subnormals::keep, Subnormals::ftz);
  const Policy p = make(*rc::gen::elementOf(deterministic), *rc::gen::elementOf(overflows), s);
  const double x = *small_range_double().as("x");
  const Result once = conv(x, t, p);
  const Result twice = convert(t, once.code, t, p);
  RC_ASSERT(twice.code == once.code);
  RC_ASSERT(twice.flags == 0);
  RC_ASSERT(twice.ternary == 0);
}

// Round to odd into a format W with at least two more significand bits (and a wider range, finer
// subnormals) than T, then rne into T, equals rne into T directly: the reason rto exists
// (docs/semantics.md §2, "Double rounding"; ml_dtypes' DoubleRound test).
RC_GTEST_PROP(Properties, RoundToOddThenNearestEqualsNearest, ()) {
  struct Pair {
    const Format* wide;
    const Format* narrow;
  };
  static const std::vector<Pair> pairs = [] {
    std::vector<Pair> v;
    for (const Format* w : {&formats::f32, &formats::tf32, &formats::bf16, &formats::f16})
      for (const Format* t : targets()) {
        if (t == w || w->mantissa_bits < t->mantissa_bits + 2) continue;
        if (w->emax() <= t->emax()) continue;  // W must hold T's overflow threshold
        if (w->emin() - w->mantissa_bits > t->emin() - t->mantissa_bits - 2) continue;  // finer ulps at the bottom
        if (w->is_signed() != t->is_signed() && !w->is_signed()) continue;
        v.push_back({w, t});
      }
    return v;
  }();
  const Pair pr = *rc::gen::elementOf(pairs);
  RC_LOG() << pr.wide->name << " then " << pr.narrow->name << "\n";
  const double x = *small_range_double().as("x");
  const Result odd = conv(x, *pr.wide, make(Rounding::rto));
  const Result twice = convert(*pr.wide, odd.code, *pr.narrow, make(Rounding::rne));
  const Result direct = conv(x, *pr.narrow, make(Rounding::rne));
  RC_ASSERT(twice.code == direct.code);
}

// ---- stochastic rounding: exact averages over all 2^N random values --------------------------------
//
// With L the lower neighbour (rtz), U the next value, ulp = U - L and rem = (|x| - |L|) / ulp, the
// fraction of the 2^N values of R that round away is (docs/semantics.md §2's conditions, counted):
//   sr-a: floor(rem 2^N) / 2^N.  Bias in (-2^-N, 0] ulp; exact when rem 2^N is an integer.
//   sr-b: with f = floor(rem 2^(N+1)), R rounds away iff R >= (2^(N+1) - 1 - f) / 2, i.e. for
//         ceil(f / 2) values: probability ceil(f/2) / 2^N.  Since rem 2^N lies in [f/2, (f+1)/2),
//         the bias lies in (-2^-(N+1), +2^-(N+1)] ulp; exact when rem 2^N is an integer.
//   sr-c: rne(rem 2^N) / 2^N.  |bias| <= 2^-(N+1) ulp (equality at a tie of rem 2^N); exact when
//         rem 2^N is an integer.
// So each mode's expectation equals x exactly when rem has at most N fractional bits, and otherwise
// stays within 2^-N ulp (sr-a, and toward zero) or 2^-(N+1) ulp (sr-b, sr-c).
mpq_class exact_value(const Format& f, std::uint64_t code) {
  const exact::Value v = exact::from_code(f, code);
  mpq_class q = v.cls == ValueClass::finite ? v.magnitude : mpq_class(0);
  return v.negative ? mpq_class(-q) : q;
}

RC_GTEST_PROP(Properties, StochasticAverages, ()) {
  static const std::vector<const Format*> sr_targets = {&formats::e4m3, &formats::e5m2, &formats::e2m1,
                                                        &formats::e3m2, &formats::e2m3, &formats::bf16,
                                                        &formats::f16,  &formats::e4m3fnuz, find_format("binary8p3se")};
  const Format& t = pick(sr_targets);
  const Rounding mode = *rc::gen::element(Rounding::sr_a, Rounding::sr_b, Rounding::sr_c);
  const int n = *rc::gen::inRange(1, 11).as("N");
  const double x = *small_range_double().as("x");
  Policy p = make(Rounding::rtz, Overflow::satfinite);
  const Result low = conv(x, t, p);
  const std::uint64_t lm = t.code_magnitude(low.code);
  if (t.is_nan_code(low.code) || lm >= t.max_finite_magnitude(x < 0)) return;  // no finite upper neighbour
  const bool negative = x < 0;
  const mpq_class L = exact_value(t, low.code);
  const mpq_class U = exact_value(t, t.encode(negative, lm + 1));
  const mpq_class ulp = abs(U - L);
  mpq_class xq = exact::from_code(formats::f64, code_of(x)).magnitude;
  if (negative) xq = -xq;
  const mpq_class rem = abs(xq - L) / ulp;

  p.rounding = mode;
  p.sr_bits = n;
  mpq_class sum = 0;
  const std::uint64_t count = std::uint64_t{1} << n;
  for (std::uint64_t r = 0; r < count; ++r) {
    const Result res = conv(x, t, p, r);
    RC_ASSERT(res.code == low.code || res.code == t.encode(negative, lm + 1));
    sum += exact_value(t, res.code);
  }
  const mpq_class mean = sum / mpq_class(mpz_class(std::to_string(count)));
  const mpq_class bias_ulps = (abs(mean) - abs(xq)) / ulp;  // > 0: away from zero
  const mpq_class scaled = rem * mpq_class(mpz_class(std::to_string(count)));
  if (scaled.get_den() == 1) {
    RC_ASSERT(mean == xq);
    return;
  }
  const mpq_class bound(1, mpz_class(std::to_string(mode == Rounding::sr_a ? count : 2 * count)));
  if (mode == Rounding::sr_a) {
    RC_ASSERT(bias_ulps <= 0);
    RC_ASSERT(-bias_ulps < bound);
  } else {
    RC_ASSERT(abs(bias_ulps) <= bound);
  }
}

}  // namespace
