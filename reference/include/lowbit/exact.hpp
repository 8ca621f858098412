// The exact path: the truth every other path is compared against.
//
// A real number is held as an exact GMP rational; rounding computes floor(log2 |x|), the truncated
// magnitude and the dropped fraction as rationals and applies docs/semantics.md §2's table literally.
// No binary floating point is involved anywhere, so there is no double rounding.  Small and obviously
// right; the fast path may be clever because this one watches it.
#pragma once
#include <gmpxx.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "lowbit/format.hpp"
#include "lowbit/policy.hpp"
#include "lowbit/value.hpp"

namespace lowbit::exact {

struct Value {
  ValueClass cls = ValueClass::zero;
  bool negative = false;
  mpq_class magnitude;  // finite: > 0
  Unpacked nan;         // NaN details (sign, payload) when cls == nan
  bool capped = false;  // a text literal beyond 2^±2000, replaced by 2^±2000 (rounds the same everywhere)
};

Value from_unpacked(const Unpacked& u);
inline Value from_code(const Format& f, std::uint64_t code, bool daz = false) {
  return from_unpacked(unpack(f, code, daz));
}

// Parse a C strtod-style literal exactly: decimal or hexadecimal significand with optional exponent,
// or inf / infinity / nan (case-insensitive, optional sign; a NaN keeps its sign).  Returns nullopt
// when the whole text is not one literal.
std::optional<Value> parse(std::string_view text);

// Everything --trace explains about one conversion.
struct Trace {
  std::string input;         // the exact input, as a decimal
  std::string lower, upper;  // the neighbours (values), when the input is finite and non-zero
  std::uint64_t lower_code = 0, upper_code = 0;
  bool has_neighbours = false;
  // A neighbour past the largest finite value has no finite code (it is where overflow would land).
  bool lower_beyond_max = false, upper_beyond_max = false;
  std::string remainder;  // dropped fraction of one ulp, as a fraction
  std::string decision;   // one sentence
};

Result round(const Format& to, const Value& x, const Policy& p, std::uint64_t rbits = 0, Trace* trace = nullptr);

Result convert(const Format& from, std::uint64_t code, const Format& to, const Policy& p, std::uint64_t rbits = 0);

// Exact decimal text of significand * 2^exponent ("-0.375", "448", "0.001953125").
std::string decimal(bool negative, const mpz_class& significand, long exponent);
// Exact decimal text of a rational whose denominator has no prime factors but 2 and 5; any other
// rational prints as num/den.
std::string decimal(const mpq_class& q);
// The value of a code as exact decimal text, or nan / inf / -inf / -0.
std::string code_text(const Format& f, std::uint64_t code);

}  // namespace lowbit::exact
