// Exact text parsing (C strtod syntax, read exactly as a rational): decimal and hex-float literals,
// huge and tiny exponents, nan / inf spellings, and malformed strings.
#include <gtest/gtest.h>

#include "lowbit/convert.hpp"
#include "lowbit/exact.hpp"

namespace {

using namespace lowbit;

mpq_class q(const char* s) {
  mpq_class r(s);
  r.canonicalize();
  return r;
}

void expect_finite(const char* text, bool negative, const mpq_class& magnitude) {
  SCOPED_TRACE(text);
  const auto v = exact::parse(text);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->cls, ValueClass::finite);
  EXPECT_EQ(v->negative, negative);
  EXPECT_EQ(v->magnitude, magnitude);
  EXPECT_FALSE(v->capped);
}

TEST(Parse, DecimalIsExact) {
  expect_finite("0.1", false, q("1/10"));  // not the double nearest 0.1
  expect_finite("-2.5", true, q("5/2"));
  expect_finite("+448", false, q("448"));
  expect_finite("1e5", false, q("100000"));
  expect_finite("1E-3", false, q("1/1000"));
  expect_finite(".5", false, q("1/2"));
  expect_finite("1.", false, q("1"));
  expect_finite("007.250", false, q("29/4"));
  expect_finite("61439.99", false, q("6143999/100"));
  expect_finite("0.1251", false, q("1251/10000"));
}

TEST(Parse, HexFloat) {
  expect_finite("0x1.8p-3", false, q("3/16"));
  expect_finite("0X1P3", false, q("8"));
  expect_finite("-0x1.0p-10", true, q("1/1024"));
  expect_finite("0x.8p1", false, q("1"));
  expect_finite("0x10", false, q("16"));  // strtod accepts a hex significand without an exponent
  expect_finite("0x1.fffffep127", false, q("340282346638528859811704183484516925440"));
  expect_finite("0xAbC", false, q("2748"));
}

TEST(Parse, Zeros) {
  for (const char* z : {"0", "-0", "0.000", "0x0p+5", "-0e10"}) {
    const auto v = exact::parse(z);
    ASSERT_TRUE(v) << z;
    EXPECT_EQ(v->cls, ValueClass::zero) << z;
    EXPECT_EQ(v->negative, z[0] == '-') << z;
  }
}

// Exponents far beyond every format stay exact (1e400) or are capped at 2^±2000, which rounds the
// same in every format of at most 64 bits (f64's range is within 2^±1075).
TEST(Parse, HugeAndTinyExponents) {
  const auto big = exact::parse("1e400");
  ASSERT_TRUE(big);
  mpz_class p10;
  mpz_ui_pow_ui(p10.get_mpz_t(), 10, 400);
  EXPECT_EQ(big->magnitude, mpq_class(p10));
  EXPECT_FALSE(big->capped);
  const auto tiny = exact::parse("1e-400");
  ASSERT_TRUE(tiny);
  EXPECT_EQ(tiny->magnitude, mpq_class(mpz_class(1), p10));

  const auto huge = exact::parse("1e100000");
  ASSERT_TRUE(huge);
  EXPECT_TRUE(huge->capped);
  const auto minute = exact::parse("-1e-100000");
  ASSERT_TRUE(minute);
  EXPECT_TRUE(minute->capped);
  EXPECT_TRUE(minute->negative);
  // A hex exponent large enough to overflow a long is still read (and capped).
  EXPECT_TRUE(exact::parse("0x1p99999999999999999999"));

  // f64 results (IEEE 754): 1e400 overflows to +inf under rne; 1e-400 underflows to +0 with
  // underflow and inexact; the capped literals do the same.
  const Policy p{};
  EXPECT_EQ(exact::round(formats::f64, *big, p).code, 0x7FF0000000000000u);
  EXPECT_EQ(exact::round(formats::f64, *huge, p).code, 0x7FF0000000000000u);
  const Result t = exact::round(formats::f64, *tiny, p);
  EXPECT_EQ(t.code, 0u);
  EXPECT_EQ(t.flags, flag::underflow | flag::inexact);
  EXPECT_EQ(exact::round(formats::f64, *minute, p).code, 0x8000000000000000u);
  // Just below half of f64's smallest subnormal 2^-1074 still rounds to zero; just above, to 2^-1074.
  EXPECT_EQ(exact::round(formats::f64, *exact::parse("0x1.fffp-1076"), p).code, 0u);
  EXPECT_EQ(exact::round(formats::f64, *exact::parse("0x1.001p-1075"), p).code, 1u);
}

TEST(Parse, NanAndInfSpellings) {
  for (const char* s : {"inf", "INF", "Inf", "+inf", "infinity", "INFINITY", "Infinity", "-inf", "-Infinity"}) {
    const auto v = exact::parse(s);
    ASSERT_TRUE(v) << s;
    EXPECT_EQ(v->cls, ValueClass::inf) << s;
    EXPECT_EQ(v->negative, s[0] == '-') << s;
  }
  for (const char* s : {"nan", "NaN", "NAN", "+nan", "-nan", "-NaN"}) {
    const auto v = exact::parse(s);
    ASSERT_TRUE(v) << s;
    EXPECT_EQ(v->cls, ValueClass::nan) << s;
    EXPECT_EQ(v->negative, s[0] == '-') << s;  // a NaN keeps its sign
  }
}

TEST(Parse, MalformedIsRejected) {
  for (const char* s : {"", " ", "abc", "1.2.3", "0x", "0x.", "0xp1", "1e", "1e+", "e5", ".", "--1", "+-1", "1 ",
                        " 1", "1f", "0x1p", "0x1g", "inff", "in", "nanx", "infinit", "1,5", "0b101", "1e5.5",
                        "0x1.8e3p1x"})
    EXPECT_FALSE(exact::parse(s).has_value()) << '"' << s << '"';
}

}  // namespace
