// A code unpacked into its exact value: class, sign, and significand * 2^exponent.
#pragma once
#include <cstdint>

#include "lowbit/format.hpp"
#include "lowbit/hd.hpp"

namespace lowbit {

enum class ValueClass : std::uint8_t { zero, finite, inf, nan };

struct Unpacked {
  ValueClass cls = ValueClass::zero;
  bool negative = false;
  std::uint64_t significand = 0;  // finite: non-zero; value = significand * 2^exponent
  int exponent = 0;
  // NaN details.  Only IEEE-encoded NaNs carry a payload; payload_bits is then the source's mantissa
  // width and payload its mantissa field (quiet bit included).
  bool signaling = false;
  std::uint64_t payload = 0;
  int payload_bits = 0;
  // Where a NaN came from, for the profile quirks that depend on it (Quirks::nan_decode and
  // narrow_nan_style): the source's storage width (0 for a NaN read from text, which counts as wide), its
  // NaN encoding and its mantissa width.
  int source_bits = 0;
  NanEncoding source_nan = NanEncoding::ieee;
  int source_mantissa_bits = 0;
};

// Unpack a valid code of `f`.  With `daz`, a subnormal reads as a zero of the same sign.
LOWBIT_HD constexpr Unpacked unpack(const Format& f, std::uint64_t code, bool daz = false) {
  Unpacked u;
  u.negative = f.code_negative(code);
  if (f.is_nan_code(code)) {
    u.cls = ValueClass::nan;
    u.source_bits = f.storage_bits();
    u.source_nan = f.nan;
    u.source_mantissa_bits = f.mantissa_bits;
    if (f.nan == NanEncoding::ieee) {
      u.payload = f.code_magnitude(code) & f.mantissa_mask();
      u.payload_bits = f.mantissa_bits;
      u.signaling = (u.payload >> (f.mantissa_bits - 1)) == 0;
    }
    return u;
  }
  if (f.is_inf_code(code)) {
    u.cls = ValueClass::inf;
    return u;
  }
  const std::uint64_t m = f.code_magnitude(code);
  const std::uint64_t sig = f.magnitude_significand(m);
  if ((f.has_zero && sig == 0) || (daz && f.is_subnormal_code(code))) {
    u.cls = ValueClass::zero;
    return u;
  }
  u.cls = ValueClass::finite;
  u.significand = sig;
  u.exponent = f.magnitude_exponent(m);
  return u;
}

}  // namespace lowbit
