#include "lowbit/exact.hpp"

#include <cctype>

#include "lowbit/rules.hpp"

namespace lowbit::exact {

namespace {

mpq_class pow2(long e) {
  mpz_class one = 1;
  mpq_class r;
  if (e >= 0) {
    mpz_class n;
    mpz_mul_2exp(n.get_mpz_t(), one.get_mpz_t(), static_cast<mp_bitcnt_t>(e));
    r = n;
  } else {
    mpz_class d;
    mpz_mul_2exp(d.get_mpz_t(), one.get_mpz_t(), static_cast<mp_bitcnt_t>(-e));
    r = mpq_class(1, d);
  }
  r.canonicalize();
  return r;
}

// q * 2^k, exactly (GMP shifts the numerator or the denominator and keeps the fraction canonical).
mpq_class times_pow2(const mpq_class& q, long k) {
  mpq_class r;
  if (k >= 0) mpq_mul_2exp(r.get_mpq_t(), q.get_mpq_t(), static_cast<mp_bitcnt_t>(k));
  else mpq_div_2exp(r.get_mpq_t(), q.get_mpq_t(), static_cast<mp_bitcnt_t>(-k));
  return r;
}

// floor(log2 q) for q > 0.  With a and b the bit lengths of the numerator and the denominator,
// 2^(a-1) <= num < 2^a and 2^(b-1) <= den < 2^b, so 2^(a-b-1) < q < 2^(a-b+1): the answer is a-b
// when num >= den * 2^(a-b), and a-b-1 otherwise.
long floor_log2(const mpq_class& q) {
  const long e =
      static_cast<long>(mpz_sizeinbase(q.get_num_mpz_t(), 2)) - static_cast<long>(mpz_sizeinbase(q.get_den_mpz_t(), 2));
  mpz_class num = q.get_num(), den = q.get_den();
  if (e >= 0) mpz_mul_2exp(den.get_mpz_t(), den.get_mpz_t(), static_cast<mp_bitcnt_t>(e));
  else mpz_mul_2exp(num.get_mpz_t(), num.get_mpz_t(), static_cast<mp_bitcnt_t>(-e));
  return num >= den ? e : e - 1;
}

// A 64-bit integer as a GMP integer, and back (the value must fit).
static_assert(sizeof(unsigned long) == sizeof(std::uint64_t), "GMP's ui functions take 64-bit values here");
mpz_class from_u64(std::uint64_t v) { return mpz_class(static_cast<unsigned long>(v)); }
std::uint64_t to_u64(const mpz_class& z) { return static_cast<std::uint64_t>(z.get_ui()); }

mpz_class floor_q(const mpq_class& q) {
  mpz_class r;
  mpz_fdiv_q(r.get_mpz_t(), q.get_num_mpz_t(), q.get_den_mpz_t());
  return r;
}

// rne of a non-negative rational to an integer.
mpz_class rne_q(const mpq_class& q) {
  mpz_class f = floor_q(q);
  mpq_class frac = q - f;
  if (frac > mpq_class(1, 2) || (frac == mpq_class(1, 2) && mpz_odd_p(f.get_mpz_t()))) f += 1;
  return f;
}

// docs/semantics.md §2's table, with rem the dropped fraction (0 < rem < 1) and lsb the kept last bit.
bool rounds_away(Rounding mode, bool negative, bool lsb, const mpq_class& rem, std::uint64_t r, int n) {
  // A named mpz_class, not gmpxx's expression template (which would refer to a destroyed temporary).
  auto two_n = [n]() -> mpz_class { return mpz_class(1) << n; };
  switch (mode) {
    case Rounding::rne: {
      const int c = mpq_cmp_ui(rem.get_mpq_t(), 1, 2);
      return c > 0 || (c == 0 && lsb);
    }
    case Rounding::rna: return mpq_cmp_ui(rem.get_mpq_t(), 1, 2) >= 0;
    case Rounding::rtz: return false;
    case Rounding::rup: return !negative;
    case Rounding::rdn: return negative;
    case Rounding::rto: return !lsb;
    case Rounding::sr_a: return floor_q(rem * two_n()) + from_u64(r) >= two_n();
    case Rounding::sr_b: return floor_q(rem * two_n() * 2) + 2 * from_u64(r) + 1 >= two_n() * 2;
    case Rounding::sr_c: return rne_q(rem * two_n()) + from_u64(r) >= two_n();
  }
  return false;
}

const char* mode_name(Rounding r) {
  switch (r) {
    case Rounding::rne: return "rne";
    case Rounding::rna: return "rna";
    case Rounding::rtz: return "rtz";
    case Rounding::rup: return "rup";
    case Rounding::rdn: return "rdn";
    case Rounding::rto: return "rto";
    case Rounding::sr_a: return "sr-a";
    case Rounding::sr_b: return "sr-b";
    case Rounding::sr_c: return "sr-c";
  }
  return "?";
}

std::string fraction(const mpq_class& q) {
  if (q == 0) return "0";
  return q.get_str();
}

}  // namespace

Value from_unpacked(const Unpacked& u) {
  Value v;
  v.cls = u.cls;
  v.negative = u.negative;
  if (u.cls == ValueClass::nan) v.nan = u;
  if (u.cls == ValueClass::finite) {
    mpz_class s;
    mpz_import(s.get_mpz_t(), 1, 1, sizeof(u.significand), 0, 0, &u.significand);
    v.magnitude = times_pow2(mpq_class(s), u.exponent);
  }
  return v;
}

std::optional<Value> parse(std::string_view text) {
  Value v;
  std::size_t i = 0;
  auto at = [&](std::size_t k) -> char {
    return k < text.size() ? static_cast<char>(std::tolower(static_cast<unsigned char>(text[k]))) : '\0';
  };
  if (at(i) == '+' || at(i) == '-') v.negative = text[i++] == '-';
  std::string rest;
  for (std::size_t k = i; k < text.size(); ++k) rest += at(k);
  if (rest == "inf" || rest == "infinity") {
    v.cls = ValueClass::inf;
    return v;
  }
  if (rest == "nan") {
    v.cls = ValueClass::nan;
    v.nan.cls = ValueClass::nan;
    v.nan.negative = v.negative;
    return v;
  }
  const bool hex = rest.size() > 2 && rest[0] == '0' && rest[1] == 'x';
  std::size_t k = hex ? 2 : 0;
  const int radix = hex ? 16 : 10;
  auto digit = [&](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (hex && c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  std::string digits;
  long frac_digits = 0;
  bool any = false, point = false;
  for (; k < rest.size(); ++k) {
    const char c = rest[k];
    if (c == '.' && !point) {
      point = true;
      continue;
    }
    if (digit(c) < 0) break;
    any = true;
    digits += c;
    if (point) ++frac_digits;
  }
  if (!any) return std::nullopt;
  long exp = 0;
  if (k < rest.size() && rest[k] == (hex ? 'p' : 'e')) {
    ++k;
    bool eneg = false;
    if (k < rest.size() && (rest[k] == '+' || rest[k] == '-')) eneg = rest[k++] == '-';
    bool edig = false;
    for (; k < rest.size() && rest[k] >= '0' && rest[k] <= '9'; ++k) {
      edig = true;
      if (exp < 1000000000L) exp = exp * 10 + (rest[k] - '0');
    }
    if (!edig) return std::nullopt;
    if (eneg) exp = -exp;
  }
  if (k != rest.size()) return std::nullopt;
  const std::size_t first = digits.find_first_not_of('0');
  if (first == std::string::npos) {
    v.cls = ValueClass::zero;
    return v;
  }
  digits = digits.substr(first);
  mpz_class mant(digits, radix);
  // Magnitude estimate in bits, to cap literals far outside every format before building them.
  const long ndig = static_cast<long>(digits.size());
  const double bits_per_digit = hex ? 4.0 : 3.3219280948873623;
  const double approx = hex ? 4.0 * static_cast<double>(ndig - frac_digits) + static_cast<double>(exp)
                            : bits_per_digit * (static_cast<double>(ndig - frac_digits) + static_cast<double>(exp));
  v.cls = ValueClass::finite;
  if (approx > 2010.0) {
    v.magnitude = pow2(2000);
    v.capped = true;
    return v;
  }
  if (approx < -2010.0) {
    v.magnitude = pow2(-2000);
    v.capped = true;
    return v;
  }
  mpq_class q(mant);
  if (hex) {
    q *= pow2(exp - 4 * frac_digits);
  } else {
    const long e10 = exp - frac_digits;
    mpz_class p10;
    mpz_ui_pow_ui(p10.get_mpz_t(), 10, static_cast<unsigned long>(e10 < 0 ? -e10 : e10));
    if (e10 >= 0) q *= p10;
    else q /= p10;
  }
  q.canonicalize();
  v.magnitude = q;
  return v;
}

Result round(const Format& to, const Value& x, const Policy& p, std::uint64_t rbits, Trace* trace) {
  if (trace) {
    if (x.cls == ValueClass::nan) trace->input = x.negative ? "-nan" : "nan";
    else if (x.cls == ValueClass::inf) trace->input = x.negative ? "-inf" : "inf";
    else if (x.cls == ValueClass::zero) trace->input = x.negative ? "-0" : "0";
    else trace->input = (x.negative ? "-" : "") + decimal(x.magnitude) + (x.capped ? " (capped)" : "");
  }
  auto say = [&](std::string s) {
    if (trace) trace->decision = std::move(s);
  };
  if (x.cls == ValueClass::nan) {
    say("NaN input: the NaN rule applies");
    return rules::nan_result(to, x.nan, p);
  }
  bool negative = x.negative;
  if (negative && !to.is_signed() && x.cls != ValueClass::zero) {
    const auto o = rules::unsigned_negative(to, p);
    if (!o.proceed) {
      say("negative input into an unsigned format");
      return o.result;
    }
    negative = false;
  }
  if (x.cls == ValueClass::inf) {
    say("infinite input");
    return rules::inf_result(to, negative, p);
  }
  if (x.cls == ValueClass::zero) {
    say("zero input");
    return rules::zero_result(to, negative, p);
  }

  const mpq_class& q = x.magnitude;
  const long e = floor_log2(q);
  const long m = to.mantissa_bits;
  const long emin = to.emin();
  if (!to.has_zero && e < emin) {
    say("below the smallest value of a format without zero: the smallest value");
    return rules::smallest_result(to, negative, flag::inexact | flag::underflow, 1);
  }
  // Truncate with the exponent clamped below at emin (giving subnormals).
  const long eq = e > emin ? e : emin;
  const mpq_class scaled = times_pow2(q, m - eq);
  const mpz_class n = floor_q(scaled);
  const mpq_class rem = scaled - n;
  mpz_class lower = (mpz_class(eq - emin) << static_cast<mp_bitcnt_t>(m)) + n;
  if (!to.has_zero) lower -= mpz_class(1) << static_cast<mp_bitcnt_t>(m);
  const bool inexact = rem != 0;
  const bool lsb = mpz_odd_p(lower.get_mpz_t()) != 0;
  bool away = inexact && rounds_away(p.rounding, negative, lsb, rem, rbits, p.sr_bits);
  if (inexact && p.quirks.nozero_lowest_binade_rounds_up && !to.has_zero && e == emin) away = true;

  bool tiny = false;
  // A value of at least 2^emin is never tiny: 2^emin is a value at the format's precision, so rounding
  // with an unbounded exponent range cannot take the value below it.  Below 2^emin (e < emin):
  if (to.has_tiny_range() && e < emin) {
    if (p.tininess == Tininess::before) {
      tiny = true;
    } else {
      // Round with an unbounded exponent range at the format's precision, then compare with 2^emin:
      // the rounded value is (n2 + away2) * 2^(e-m), below 2^emin when n2 + away2 < 2^(emin - e + m).
      const mpq_class s2 = times_pow2(q, m - e);
      const mpz_class n2 = floor_q(s2);
      const mpq_class r2 = s2 - n2;
      const bool away2 =
          r2 != 0 && rounds_away(p.rounding, negative, mpz_odd_p(n2.get_mpz_t()) != 0, r2, rbits, p.sr_bits);
      tiny = n2 + (away2 ? 1 : 0) < mpz_class(1) << static_cast<mp_bitcnt_t>(emin - e + m);
    }
  }

  const mpz_class rounded = lower + (away ? 1 : 0);
  const mpz_class limit = from_u64(to.max_finite_magnitude(negative)) + 1;
  const std::uint64_t mag = rounded >= limit ? to.max_finite_magnitude(negative) + 1 : to_u64(rounded);

  if (trace) {
    const std::uint64_t maxm = to.max_finite_magnitude(negative);
    const std::uint64_t lo = lower >= limit ? maxm + 1 : to_u64(lower);
    trace->has_neighbours = true;
    trace->lower_beyond_max = lo > maxm;
    trace->upper_beyond_max = lo + 1 > maxm;
    trace->lower_code = trace->lower_beyond_max ? 0 : to.encode(negative, lo);
    trace->upper_code = trace->upper_beyond_max ? 0 : to.encode(negative, lo + 1);
    const mpq_class ulp = pow2(eq - m);
    mpq_class lo_val = mpq_class(n) * ulp;
    trace->lower = (negative ? "-" : "") + decimal(lo_val);
    trace->upper = (negative ? "-" : "") + decimal(lo_val + ulp);
    trace->remainder = fraction(rem);
    std::string d = std::string(mode_name(p.rounding)) + ": ";
    if (!inexact) d += "exact, nothing dropped";
    else d += away ? "rounds away from zero (to the upper neighbour)" : "truncates (to the lower neighbour)";
    if (tiny) d += "; the result is tiny";
    if (rounded >= limit) d += "; the rounded magnitude exceeds the largest finite value: overflow";
    say(d);
  }
  return rules::finish(to, negative, mag, inexact, away, tiny, p);
}

Result convert(const Format& from, std::uint64_t code, const Format& to, const Policy& p, std::uint64_t rbits) {
  // A conversion into the same format is a copy under profiles whose implementation copies (numpy).
  if (p.quirks.identity_copies && same_format(from, to)) return {code, 0, 0};
  return round(to, from_code(from, code, flushes_inputs(p.subnormals)), p, rbits);
}

std::string decimal(bool negative, const mpz_class& significand, long exponent) {
  std::string s;
  if (exponent >= 0) {
    s = mpz_class(significand << static_cast<mp_bitcnt_t>(exponent)).get_str();
  } else {
    mpz_class five;
    mpz_ui_pow_ui(five.get_mpz_t(), 5, static_cast<unsigned long>(-exponent));
    std::string digits = mpz_class(significand * five).get_str();
    const std::size_t frac = static_cast<std::size_t>(-exponent);
    if (digits.size() <= frac) digits = std::string(frac - digits.size() + 1, '0') + digits;
    std::string ip = digits.substr(0, digits.size() - frac);
    std::string fp = digits.substr(digits.size() - frac);
    while (!fp.empty() && fp.back() == '0') fp.pop_back();
    s = fp.empty() ? ip : ip + "." + fp;
  }
  return (negative && significand != 0 ? "-" : "") + s;
}

std::string decimal(const mpq_class& q) {
  // Exact decimal when the (canonical) denominator is 2^a 5^b; otherwise the fraction itself.
  mpz_class num = q.get_num();
  const bool neg = num < 0;
  if (neg) num = -num;
  mpz_class den = q.get_den();
  const long a = static_cast<long>(mpz_scan1(den.get_mpz_t(), 0));
  den >>= static_cast<mp_bitcnt_t>(a);
  long b = 0;
  while (mpz_divisible_ui_p(den.get_mpz_t(), 5)) {
    den /= 5;
    ++b;
  }
  std::string out = neg ? "-" : "";
  if (den != 1) {
    out += num.get_str();
    out += '/';
    out += mpz_class(q.get_den()).get_str();
    return out;
  }
  // num / (2^a 5^b) = num * 5^(n-b) * 2^(n-a) / 10^n with n = max(a, b); as significand * 2^(-a) when b = 0.
  if (b == 0) return decimal(neg, num, -a);
  const long n = a > b ? a : b;
  mpz_class p5, p2 = 1;
  mpz_ui_pow_ui(p5.get_mpz_t(), 5, static_cast<unsigned long>(n - b));
  p2 <<= static_cast<mp_bitcnt_t>(n - a);
  std::string digits = mpz_class(num * p5 * p2).get_str();
  const auto frac = static_cast<std::size_t>(n);
  if (digits.size() <= frac) digits = std::string(frac - digits.size() + 1, '0') + digits;
  out += digits.substr(0, digits.size() - frac);
  std::string fp = digits.substr(digits.size() - frac);
  while (!fp.empty() && fp.back() == '0') fp.pop_back();
  if (!fp.empty()) {
    out += '.';
    out += fp;
  }
  return out;
}

std::string code_text(const Format& f, std::uint64_t code) {
  const Unpacked u = unpack(f, code);
  switch (u.cls) {
    case ValueClass::nan: return "nan";
    case ValueClass::inf: return u.negative ? "-inf" : "inf";
    case ValueClass::zero: return u.negative ? "-0" : "0";
    case ValueClass::finite: break;
  }
  mpz_class s;
  mpz_import(s.get_mpz_t(), 1, 1, sizeof(u.significand), 0, 0, &u.significand);
  return decimal(u.negative, s, u.exponent);
}

}  // namespace lowbit::exact
