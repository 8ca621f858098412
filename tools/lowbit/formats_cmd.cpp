// `lowbit formats`: every registered format with its constants (text table or JSON).
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli_util.hpp"
#include "commands.hpp"
#include "lowbit/exact.hpp"
#include "lowbit/format.hpp"
#include "lowbit/registry.hpp"
#include "lowbit/text.hpp"

namespace lowbit::cli {

namespace {

using json = nlohmann::json;

// Exact decimal text of significand * 2^exponent.
std::string dyadic(std::uint64_t significand, int exponent) {
  return lowbit::exact::decimal(false, mpz_class(std::to_string(significand)), exponent);
}

// ---- lowbit formats -------------------------------------------------------------------------------

// NaN or Inf codes as "0x..", or "0x..-0x.." for a contiguous range of codes (in code space; tf32's
// codes are its f32-layout storage codes, so its ranges list every 2^13-th code between the ends).
json code_ranges(const Format& f, bool nan) {
  json out = json::array();
  auto push = [&](std::uint64_t lo, std::uint64_t hi) {
    const std::string a = lowbit::hex(f, lo << f.code_shift);
    out.push_back(lo == hi ? a : a + "-" + lowbit::hex(f, hi << f.code_shift));
  };
  const std::uint64_t sign = f.sign_bit();
  if (nan) {
    switch (f.nan) {
      case lowbit::NanEncoding::none: return nullptr;
      case lowbit::NanEncoding::ieee: {
        const std::uint64_t lo = (lowbit::bits::ones(f.exponent_bits) << f.mantissa_bits) | 1;
        push(lo, f.magnitude_mask());
        if (sign) push(sign | lo, sign | f.magnitude_mask());
        break;
      }
      case lowbit::NanEncoding::all_ones:
        push(f.magnitude_mask(), f.magnitude_mask());
        if (sign) push(sign | f.magnitude_mask(), sign | f.magnitude_mask());
        break;
      case lowbit::NanEncoding::negative_zero: push(sign, sign); break;
    }
  } else {
    if (!f.has_inf()) return nullptr;
    push(f.inf_magnitude(), f.inf_magnitude());
    if (sign) push(sign | f.inf_magnitude(), sign | f.inf_magnitude());
  }
  return out;
}

json format_json(const lowbit::FormatEntry& e) {
  const Format& f = *e.format;
  json j;
  j["name"] = f.name;
  j["aliases"] = json::array();
  for (std::string_view a : e.aliases) j["aliases"].push_back(std::string(a));
  j["bits"] = f.bits;
  j["exponent_bits"] = f.exponent_bits;
  j["mantissa_bits"] = f.mantissa_bits;
  j["bias"] = f.bias;
  j["max"] = lowbit::exact::code_text(f, f.encode(false, f.max_finite_magnitude()));
  // A fixed-point format (int8) has no normal binade; a format without zero (e8m0) no subnormals.
  j["min_normal"] = f.is_fixed_point() ? json(nullptr) : json(dyadic(1, f.emin()));
  j["min_subnormal"] = f.has_zero ? json(dyadic(1, f.emin() - f.mantissa_bits)) : json(nullptr);
  j["nan_codes"] = code_ranges(f, true);
  j["inf_codes"] = code_ranges(f, false);
  return j;
}

std::string join_codes(const json& codes) {
  if (codes.is_null()) return "-";
  std::string s;
  for (const auto& c : codes) append(s, ",", c.get<std::string>());
  return s;
}

void run_formats(bool as_json) {
  json all = json::array();
  for (const lowbit::FormatEntry& e : lowbit::builtin_format_entries()) all.push_back(format_json(e));
  if (as_json) {
    std::cout << all.dump(2) << '\n';
    return;
  }
  // Text: the same facts, values in a short exact form (--json has the full decimals).
  std::vector<std::vector<std::string>> rows = {
      {"name", "bits", "E", "M", "bias", "max", "min_normal", "min_subnormal", "nan_codes", "inf_codes", "aliases"}};
  const auto entries = lowbit::builtin_format_entries();
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const Format& f = *entries[i].format;
    const json& j = all[i];
    auto pow2 = [](int e) { return e >= 0 && e < 20 ? std::to_string(1u << e) : "2^" + std::to_string(e); };
    std::string aliases;
    for (std::string_view a : entries[i].aliases) append(aliases, ",", a);
    rows.push_back({f.name, std::to_string(f.bits), std::to_string(f.exponent_bits), std::to_string(f.mantissa_bits),
                    std::to_string(f.bias), short_value(f, f.encode(false, f.max_finite_magnitude())),
                    f.is_fixed_point() ? "-" : pow2(f.emin()), f.has_zero ? pow2(f.emin() - f.mantissa_bits) : "-",
                    join_codes(j["nan_codes"]), join_codes(j["inf_codes"]), aliases});
  }
  print_table(rows);
}

}  // namespace

void add_formats(CLI::App& app) {
  auto as_json = std::make_shared<bool>(false);
  auto* sub = app.add_subcommand("formats", "List every registered format (P3109 binaryKpP{s,u}{e,f} and "
                                            "parametric e<E>m<M>[b<bias>][u][-ieee|-fn|-fnuz|-finite] names "
                                            "are accepted wherever a format is)");
  sub->add_flag("--json", *as_json, "Print a JSON array");
  sub->callback([as_json] { guarded([&] { run_formats(*as_json); }); });
}

}  // namespace lowbit::cli
