// Shared helpers of the fuzz targets: the formats they draw from and a failure report that stops the run.
#pragma once
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "lowbit/format.hpp"
#include "lowbit/names.hpp"
#include "lowbit/text.hpp"
#include "lowbit/policy.hpp"
#include "lowbit/registry.hpp"

namespace lowbit::fuzz {

// Every built-in row, then parametric and P3109 rows that exercise the generic code (odd widths,
// biases, no zero, unsigned, finite).
inline const std::vector<const Format*>& all_formats() {
  static const std::vector<const Format*> list = [] {
    std::vector<const Format*> v;
    for (const FormatEntry& e : builtin_format_entries()) v.push_back(e.format);
    for (const char* name : {"binary8p3se", "binary8p4sf", "binary8p1ue", "binary6p3uf", "binary4p2se", "binary3p1sf",
                             "e3m4b5-fn", "e5m7", "e6m9-fnuz", "e2m5u", "e4m0", "e8m10-finite", "e11m40", "e1m6",
                             "e7m16b50-ieee", "e0m7"}) {
      if (const Format* f = find_format(name)) v.push_back(f);
    }
    return v;
  }();
  return list;
}

// One value of an enum, drawn over its name table (names.hpp): a new value is drawn without a change here.
template <class E>
E draw(FuzzedDataProvider& in) {
  return nth<E>(in.ConsumeIntegralInRange<std::size_t>(0, count<E>() - 1));
}

// A policy with every field drawn, quirks included; stochastic modes get 1..32 random bits.
inline Policy draw_policy(FuzzedDataProvider& in) {
  Policy p;
  p.rounding = draw<Rounding>(in);
  p.overflow = draw<Overflow>(in);
  p.subnormals = draw<Subnormals>(in);
  p.tininess = draw<Tininess>(in);
  p.sr_bits = is_stochastic(p.rounding) ? in.ConsumeIntegralInRange<int>(1, max_sr_bits) : 0;
  const auto q = in.ConsumeIntegral<std::uint16_t>();
  p.quirks.nan_to_no_nan = nth<NanToNoNan>(q & 0xF);
  p.quirks.nan_style = nth<NanStyle>(q >> 4 & 0xF);
  p.quirks.unsigned_negative = nth<UnsignedNegative>(q >> 8 & 0xF);
  p.quirks.zero_into_no_zero = nth<ZeroIntoNoZero>(q >> 12 & 0xF);
  p.quirks.narrow_nan_style = draw<NanStyle>(in);
  p.quirks.narrow_nan_below = in.ConsumeBool() ? 16 : 32;
  p.quirks.nan_decode = draw<NanDecode>(in);
  const auto b = in.ConsumeIntegral<std::uint8_t>();
  p.quirks.numpy_half_nan = b & 1;
  p.quirks.identity_copies = (b >> 1) & 1;
  p.quirks.nozero_lowest_binade_rounds_up = (b >> 2) & 1;
  p.quirks.infinity_ignores_saturation = (b >> 3) & 1;
  return p;
}

// A random value R < 2^sr_bits for a stochastic policy (0 otherwise).
inline std::uint32_t draw_rbits(FuzzedDataProvider& in, const Policy& p) {
  if (!is_stochastic(p.rounding)) return 0;
  const std::uint32_t r = in.ConsumeIntegral<std::uint32_t>();
  return p.sr_bits >= 32 ? r : r & ((std::uint32_t{1} << p.sr_bits) - 1);
}

[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "\nFUZZ FINDING: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

inline std::string hex(std::uint64_t v) { return lowbit::hex(v, 1); }

inline std::string policy_text(const Policy& p) {
  const Quirks& q = p.quirks;
  return std::string("rounding ") + name(p.rounding) + " overflow " + name(p.overflow) + " subnormals " +
         name(p.subnormals) + " tininess " + name(p.tininess) + " sr_bits " + std::to_string(p.sr_bits) + " quirks " +
         name(q.nan_to_no_nan) + "/" + name(q.nan_style) + "/" + name(q.narrow_nan_style) + "/" +
         std::to_string(int(q.narrow_nan_below)) + "/" + name(q.nan_decode) + "/" + name(q.unsigned_negative) + "/" +
         name(q.zero_into_no_zero) + "/" + std::to_string(q.numpy_half_nan) + "/" +
         std::to_string(q.identity_copies) + "/" + std::to_string(q.nozero_lowest_binade_rounds_up) + "/" +
         std::to_string(q.infinity_ignores_saturation);
}

}  // namespace lowbit::fuzz
