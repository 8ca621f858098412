// Shared by the batch tests: run convert_batch on a set of inputs and compare every element's code,
// flags and ternary with lowbit::convert (the scalar path, itself checked against the exact path).
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

#include "lowbit/batch.hpp"
#include "lowbit/convert.hpp"
#include "lowbit/exact.hpp"
#include "lowbit/format.hpp"
#include "lowbit/policy.hpp"
#include "lowbit/profile.hpp"

namespace lowbit::batch_test {

inline std::string describe(const Policy& p) {
  std::ostringstream s;
  s << name(p.rounding) << '/' << name(p.overflow) << '/' << name(p.subnormals) << '/' << name(p.tininess);
  if (is_stochastic(p.rounding)) s << "/sr_bits=" << p.sr_bits;
  s << " quirks{nan_to_no_nan=" << name(p.quirks.nan_to_no_nan) << ",nan_style=" << name(p.quirks.nan_style)
    << ",narrow_nan_style=" << name(p.quirks.narrow_nan_style) << ",narrow_nan_below=" << int(p.quirks.narrow_nan_below)
    << ",nan_decode=" << name(p.quirks.nan_decode) << ",unsigned_negative=" << name(p.quirks.unsigned_negative)
    << ",zero_into_no_zero=" << name(p.quirks.zero_into_no_zero) << ",numpy_half_nan=" << p.quirks.numpy_half_nan
    << ",identity_copies=" << p.quirks.identity_copies
    << ",nozero_lowest_binade_rounds_up=" << p.quirks.nozero_lowest_binade_rounds_up << '}';
  return s.str();
}

inline std::string hex(std::uint64_t v) {
  std::ostringstream s;
  s << "0x" << std::hex << v;
  return s.str();
}

// Which outputs convert_batch is asked for; the kernel has a codes-only variant.
enum class Outputs { all, codes_only, flags_only, ternary_only };

// Returns the number of mismatching elements and records the first few as test failures.
// `inputs` are codes of `from` (f32: 32-bit, bf16/f16: 16-bit values in the low bits).  The batch runs
// once per requested output variant (the kernel has a codes-only variant) against one expected set.
inline std::size_t compare(const Format& from, const std::vector<std::uint32_t>& inputs, const Format& to,
                           const Policy& p, const std::vector<std::uint32_t>* rbits = nullptr,
                           std::initializer_list<Outputs> variants = {Outputs::all, Outputs::codes_only},
                           int max_reports = 3) {
  const std::size_t n = inputs.size();
  std::vector<Result> want(n);
  for (std::size_t i = 0; i < n; ++i) want[i] = convert(from, inputs[i], to, p, rbits != nullptr ? (*rbits)[i] : 0);
  const std::size_t in_bytes = batch_code_bytes(from);  // the same packing as the output
  std::vector<unsigned char> in(n * in_bytes);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t b = 0; b < in_bytes; ++b) in[i * in_bytes + b] = static_cast<unsigned char>(inputs[i] >> (8 * b));
  const std::size_t out_bytes = batch_code_bytes(to);
  std::size_t bad = 0;
  for (Outputs outputs : variants) {
    std::vector<unsigned char> codes(n * out_bytes + 1, 0xA5);
    std::vector<std::uint8_t> flags(n + 1, 0xA5);
    std::vector<std::int8_t> ternary(n + 1, 0x5A);
    const bool want_flags = outputs == Outputs::all || outputs == Outputs::flags_only;
    const bool want_ternary = outputs == Outputs::all || outputs == Outputs::ternary_only;
    convert_batch(from, in.data(), n, to, p, codes.data(), want_flags ? flags.data() : nullptr,
                  want_ternary ? ternary.data() : nullptr, rbits != nullptr ? rbits->data() : nullptr);
    for (std::size_t i = 0; i < n; ++i) {
      std::uint64_t code = 0;
      for (std::size_t b = 0; b < out_bytes; ++b) code |= std::uint64_t{codes[i * out_bytes + b]} << (8 * b);
      const Result& w = want[i];
      const bool ok = code == w.code && (!want_flags || flags[i] == w.flags) && (!want_ternary || ternary[i] == w.ternary);
      if (ok) continue;
      if (static_cast<int>(bad) < max_reports) {
        const std::uint64_t r = rbits != nullptr ? (*rbits)[i] : 0;
        ADD_FAILURE() << from.name << " -> " << to.name << " under " << describe(p) << " (outputs variant "
                      << int(outputs) << "): input " << hex(inputs[i]) << " (" << exact::code_text(from, inputs[i])
                      << ")" << (rbits ? " rbits " + hex(r) : "") << "\n  expected " << hex(w.code) << " ("
                      << exact::code_text(to, w.code) << ") flags " << int(w.flags) << " ternary " << int(w.ternary)
                      << "\n  actual   " << hex(code) << " ("
                      << (to.valid_code(code) ? exact::code_text(to, code) : std::string("invalid")) << ") flags "
                      << (want_flags ? int(flags[i]) : -1) << " ternary " << (want_ternary ? int(ternary[i]) : -1);
      }
      ++bad;
    }
    // Nothing may be written past the end.
    EXPECT_EQ(codes[n * out_bytes], 0xA5);
    EXPECT_EQ(flags[n], 0xA5);
    EXPECT_EQ(ternary[n], 0x5A);
  }
  return bad;
}

// Every policy of the deterministic roundings: rounding x overflow x subnormals x tininess.
inline std::vector<Policy> deterministic_policies() {
  std::vector<Policy> v;
  for (Rounding r : {Rounding::rne, Rounding::rna, Rounding::rtz, Rounding::rup, Rounding::rdn, Rounding::rto})
    for (Overflow o : {Overflow::satfinite, Overflow::satpropagate, Overflow::nosat})
      for (Subnormals s : {Subnormals::keep, Subnormals::ftz, Subnormals::daz, Subnormals::ftz_daz})
        for (Tininess t : {Tininess::after, Tininess::before})
          v.push_back(Policy{.rounding = r, .overflow = o, .subnormals = s, .tininess = t});
  return v;
}

// Every combination of the profile quirks.
inline std::vector<Quirks> all_quirks() {
  std::vector<Quirks> v;
  for (NanToNoNan a : all<NanToNoNan>())
    for (NanStyle b : all<NanStyle>())
      for (UnsignedNegative c : all<UnsignedNegative>())
        for (ZeroIntoNoZero d : all<ZeroIntoNoZero>())
          v.push_back(Quirks{.nan_to_no_nan = a, .nan_style = b, .unsigned_negative = c, .zero_into_no_zero = d});
  return v;
}

// Every style for NaNs of narrow sources against every style of wide ones, each NaN decoding, both the default
// and a 16-bit narrow threshold (what Quirks::narrow_nan_style, narrow_nan_below and nan_decode choose).
inline std::vector<Quirks> nan_source_quirks() {
  std::vector<Quirks> v;
  for (NanStyle wide : all<NanStyle>())
    for (NanStyle narrow : all<NanStyle>())
      for (NanDecode d : all<NanDecode>())
        for (std::uint8_t below : {std::uint8_t{32}, std::uint8_t{16}})
          v.push_back(
              Quirks{.nan_style = wide, .narrow_nan_style = narrow, .narrow_nan_below = below, .nan_decode = d});
  return v;
}

// The built-in targets of at most 16 bits.
inline std::vector<const Format*> small_builtin_targets() {
  std::vector<const Format*> v;
  for (const Format& f : formats::builtin)
    if (f.storage_bits() <= 16) v.push_back(&f);
  return v;
}

}  // namespace lowbit::batch_test
