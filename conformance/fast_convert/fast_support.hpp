// Shared by the tests of the 32-bit element conversion (lowbit/fast_convert.hpp): the element/policy
// pairs it must equal lowbit::convert on, the boundary inputs of a target, and the comparison.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "lowbit/convert.hpp"
#include "lowbit/exact.hpp"
#include "lowbit/fast_convert.hpp"
#include "lowbit/format.hpp"
#include "lowbit/policy.hpp"
#include "lowbit/policy_pairs.hpp"
#include "lowbit/profile.hpp"
#include "lowbit/scale.hpp"

namespace lowbit::fast_test {

struct Pair {
  const Format* to;
  Policy policy;
  std::string why;  // which profile defaults or quantizer paths use it
};

inline Policy with(Rounding r, Overflow o, Quirks q = {}) {
  Policy p;
  p.rounding = r;
  p.overflow = o;
  p.quirks = q;
  return p;
}

// The pairs the proof covers, each (target, policy) once:
//  - e4m3, e5m2, e2m1, e2m3, e3m2, e8m0, ue4m3 (and bf16) under every profile's default policy for them;
//  - every built-in element of at most 8 bits the device quantizers can take, under the two element
//    policies their kernels compile as constants: scale::Options' default (rne, satfinite, built-in
//    quirks) and the cuda profile's rne + satfinite (device/include/lowbit/device/quantize.hpp);
//  - the policies of the scale rules (reference/include/lowbit/scale_rules.hpp): e8m0 under rup +
//    satfinite (DeepGEMM's ue8m0-packed scale), under rup / rne + satfinite with a negative read as its
//    magnitude (MX rceil / rne), e4m3 under rne + satfinite (the NVFP4 block scale), bf16 under rne
//    (NVFP4 fast-math multipliers).
inline std::vector<Pair> proof_pairs() {
  std::vector<Pair> out;
  auto add = [&](const Format& to, const Policy& p, const std::string& why) {
    for (Pair& q : out)
      if (same_format(*q.to, to) && same_policy_value(q.policy, p)) {
        q.why += "," + why;
        return;
      }
    out.push_back({&to, p, why});
  };
  namespace F = formats;
  for (const Format* t : {&F::e4m3, &F::e5m2, &F::e2m1, &F::e2m3, &F::e3m2, &F::e8m0, &F::ue4m3, &F::bf16})
    for (const DefaultPolicy& d : default_policies(*t)) add(*d.target, d.policy, d.labels);
  const Policy quantizer = scale::Options{}.element_policy;
  PolicyRequest cuda_req;
  cuda_req.rounding = Rounding::rne;
  cuda_req.overflow = Overflow::satfinite;
  std::string error;
  const Policy cuda = resolve(find_profile("cuda"), F::e4m3, cuda_req, error)->policy;
  for (const Format& t : F::builtin) {
    if (t.storage_bits() > 8 || !fast::applies(F::f32, t, quantizer)) continue;
    add(t, quantizer, "quantizer");
    add(t, cuda, "quantizer/cuda");
  }
  Quirks magnitude;
  magnitude.unsigned_negative = UnsignedNegative::magnitude;
  add(F::e8m0, with(Rounding::rup, Overflow::satfinite), "ue8m0-packed scale");
  add(F::e8m0, with(Rounding::rup, Overflow::satfinite, magnitude), "mx rceil scale");
  add(F::e8m0, with(Rounding::rne, Overflow::satfinite, magnitude), "mx rne scale");
  add(F::e4m3, with(Rounding::rne, Overflow::satfinite), "nvfp4 block scale");
  add(F::bf16, Policy{}, "nvfp4 fast-math multiplier");
  return out;
}

inline constexpr const Format* k_sources[] = {&formats::f32, &formats::bf16, &formats::f16};

inline std::string hex(std::uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

// The code of `from` nearest below-or-at an exact binary value sig * 2^exp (from has a wider range
// than every target here), built by the exact path.
inline std::uint32_t code_of_value(const Format& from, bool negative, std::uint64_t sig, int exp) {
  Unpacked u;
  u.cls = ValueClass::finite;
  u.negative = negative;
  u.significand = sig;
  u.exponent = exp;
  Policy p;
  p.rounding = Rounding::rtz;
  return static_cast<std::uint32_t>(round_to(from, u, p).code);
}

// Every boundary input of `to` in the source format `from`, both signs: each finite magnitude of the
// target and each midpoint between neighbours (the midpoint above the largest one is the overflow
// threshold; the one below the smallest subnormal the flush-to-zero threshold), each +-1 and +-2 ulps of
// the source; the source's own boundaries (signed zeros, smallest and largest subnormal, smallest
// normal, largest finite, infinities, quiet and signalling NaNs with and without payloads); and, for
// every exponent field of the source, the significands 0, 1, 2, half, half +-1, all ones, all ones - 1.
inline std::vector<std::uint32_t> boundary_inputs(const Format& from, const Format& to) {
  std::vector<std::uint32_t> v;
  const int mf = from.mantissa_bits;
  const std::uint32_t sign = 1u << (from.exponent_bits + mf);
  const std::uint32_t mag_mask = sign - 1;
  auto around = [&](std::uint32_t c) {
    for (int k = -2; k <= 2; ++k) {
      const std::uint32_t x = c + static_cast<std::uint32_t>(k);
      if (x <= mag_mask) {
        v.push_back(x);
        v.push_back(x | sign);
      }
    }
  };
  // The target's magnitudes and midpoints (a magnitude code m has value sig * 2^exp; a midpoint between m
  // and m + 1 is (2 sig + 1) * 2^(exp - 1) inside a binade, computed as the sum of the two values).
  const std::uint64_t top = to.max_finite_magnitude();
  const std::uint64_t step = top > 4096 ? top / 2048 : 1;  // wide targets (bf16): a spread of codes
  for (std::uint64_t m = 0; m <= top; m += (m < 64 || top - m < 64) ? 1 : step) {
    if (!to.has_zero || m != 0) {
      const std::uint64_t s = to.magnitude_significand(m);
      const int e = to.magnitude_exponent(m);
      around(code_of_value(from, false, s, e));
      // Midpoint to the next magnitude (beyond the largest: one ulp further, the overflow threshold).
      const std::uint64_t s2 = m < top ? to.magnitude_significand(m + 1) : s + 1;
      const int e2 = m < top ? to.magnitude_exponent(m + 1) : e;
      const int lo = e < e2 ? e : e2;
      around(code_of_value(from, false, (s << (e - lo)) + (s2 << (e2 - lo)), lo - 1));
    } else {
      // Half the smallest subnormal: the threshold below which nearest modes give zero.
      around(code_of_value(from, false, 1, to.emin() - to.mantissa_bits - 1));
    }
  }
  // The source's own boundaries.
  const std::uint32_t inf = ((1u << from.exponent_bits) - 1) << mf;
  for (std::uint32_t c : {0u, 1u, 2u, (1u << mf) - 1, 1u << mf, inf - 1, inf, inf + 1, inf | (1u << (mf - 1)),
                          inf | ((1u << mf) - 1), inf | 0x5u})
    for (std::uint32_t s : {0u, sign}) v.push_back(c | s);
  // Every exponent field with its notable significands.
  const std::uint32_t half = 1u << (mf - 1), ones = (1u << mf) - 1;
  for (std::uint32_t field = 0; field < (1u << from.exponent_bits); ++field)
    for (std::uint32_t m : {0u, 1u, 2u, half - 1, half, half + 1, ones - 1, ones})
      for (std::uint32_t s : {0u, sign}) v.push_back((field << mf) | (m & ones) | s);
  return v;
}

// Compares fast::convert with lowbit::convert on `inputs`; returns the mismatches, reporting the first few.
inline std::uint64_t compare(const Format& from, const std::vector<std::uint32_t>& inputs, const Format& to,
                             const Policy& p, int max_reports = 3) {
  std::uint64_t bad = 0;
  for (std::uint32_t c : inputs) {
    const Result want = convert(from, c, to, p);
    const Result got = fast::convert(from, c, to, p);
    if (got == want) continue;
    if (static_cast<int>(bad++) < max_reports)
      ADD_FAILURE() << from.name << " -> " << to.name << " under " << whole_policy_text(p) << ": input " << hex(c) << " ("
                    << exact::code_text(from, c) << ")\n  convert:       " << hex(want.code) << " flags "
                    << int(want.flags) << " ternary " << int(want.ternary) << "\n  fast::convert: " << hex(got.code)
                    << " flags " << int(got.flags) << " ternary " << int(got.ternary);
  }
  return bad;
}

}  // namespace lowbit::fast_test
