#include "lowbit/registry.hpp"

#include <algorithm>
#include <cctype>
#include <deque>
#include <mutex>
#include <regex>

namespace lowbit {

namespace {

std::string lower(std::string_view s) {
  std::string r(s);
  std::transform(r.begin(), r.end(), r.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return r;
}

const std::vector<FormatEntry>& entries() {
  using namespace formats;
  static const std::vector<FormatEntry> e = {
      {&f64, {"float64", "double", "binary64", "fp64", "torch.float64"}},
      {&f32, {"float32", "float", "binary32", "fp32", "torch.float32"}},
      {&tf32, {"tensorfloat32", "floattf32", "fp19"}},
      {&bf16, {"bfloat16", "bfloat", "brainfloat16", "torch.bfloat16"}},
      {&f16, {"float16", "half", "binary16", "fp16", "ieeehalf", "torch.float16"}},
      {&e4m3, {"float8_e4m3fn", "Float8E4M3FN", "e4m3fn", "fp8_e4m3", "torch.float8_e4m3fn", "ofp8_e4m3"}},
      {&e5m2, {"float8_e5m2", "Float8E5M2", "fp8_e5m2", "torch.float8_e5m2", "ofp8_e5m2"}},
      {&e4m3fnuz, {"float8_e4m3fnuz", "Float8E4M3FNUZ", "torch.float8_e4m3fnuz"}},
      {&e5m2fnuz, {"float8_e5m2fnuz", "Float8E5M2FNUZ", "torch.float8_e5m2fnuz"}},
      {&e4m3b11fnuz, {"float8_e4m3b11fnuz", "Float8E4M3B11FNUZ", "e4m3b11"}},
      {&e4m3ieee, {"float8_e4m3", "Float8E4M3"}},
      {&e3m4, {"float8_e3m4", "Float8E3M4"}},
      {&e2m3, {"float6_e2m3fn", "Float6E2M3FN", "e2m3fn", "fp6_e2m3"}},
      {&e3m2, {"float6_e3m2fn", "Float6E3M2FN", "e3m2fn", "fp6_e3m2"}},
      {&e2m1, {"float4_e2m1fn", "Float4E2M1FN", "e2m1fn", "fp4", "fp4_e2m1", "torch.float4_e2m1fn_x2"}},
      {&e8m0, {"float8_e8m0fnu", "Float8E8M0FNU", "e8m0fnu", "ue8m0", "torch.float8_e8m0fnu"}},
      {&ue4m3, {"float8_ue4m3", "ue4m3fn", "nvfp4_scale"}},
      {&int8, {"mxint8", "int8_twos_complement"}},
      {&int8sm, {"int8_sign_magnitude", "mx_int8_sm"}},
  };
  return e;
}

std::mutex g_mutex;
std::deque<Format>& made() {
  static std::deque<Format> d;
  return d;
}
std::deque<std::string>& names() {
  static std::deque<std::string> d;
  return d;
}

// Keep one instance per distinct row so that pointers compare equal for equal names.
const Format* intern(Format f, const std::string& name) {
  std::lock_guard<std::mutex> lock(g_mutex);
  for (const Format& g : made())
    if (std::string_view(g.name) == name) return &g;
  names().push_back(name);
  f.name = names().back().c_str();
  made().push_back(f);
  return &made().back();
}

}  // namespace

std::span<const FormatEntry> builtin_format_entries() { return entries(); }

// IEEE P3109 interim report v4.0 (gfloat's format_info_p3109): K bits, precision P; signed formats
// have one zero and NaN at 2^(K-1) (the -0 code), unsigned ones NaN at 2^K - 1; extended formats have
// infinity at the largest remaining magnitude; bias floor(2^(K-P-1)) signed, 2^(K-P) unsigned.
const Format* p3109_format(int k, int p, bool is_signed, bool extended) {
  if (k < 2 || k > 16 || p < 1 || p > k || (is_signed && p == k)) return nullptr;
  const int m = p - 1;
  const int e = is_signed ? k - p : k - p + 1;
  const int bias = is_signed ? ((k - p - 1) >= 0 ? (1 << (k - p - 1)) : 0) : (1 << (k - p));
  Format f{.name = "",
           .bits = k,
           .exponent_bits = e,
           .mantissa_bits = m,
           .bias = bias,
           .signedness = is_signed ? Signedness::sign_magnitude : Signedness::unsigned_,
           .nan = is_signed ? NanEncoding::negative_zero : NanEncoding::all_ones,
           .inf = extended ? InfEncoding::top : InfEncoding::none};
  if (e == 0) return nullptr;  // P = K: no exponent field; not a floating-point format
  const std::string name =
      "binary" + std::to_string(k) + "p" + std::to_string(p) + (is_signed ? "s" : "u") + (extended ? "e" : "f");
  return intern(f, name);
}

const Format* find_format(std::string_view name) {
  const std::string n = lower(name);
  for (const FormatEntry& e : entries()) {
    if (n == e.format->name) return e.format;
    for (std::string_view a : e.aliases)
      if (n == lower(a)) return e.format;
  }
  std::smatch mt;
  static const std::regex p3109(R"(binary(\d+)p(\d+)([su])([ef]))");
  static const std::regex gf(R"(p3109_k(\d+)p(\d+)([su])([ef]))");
  if (std::regex_match(n, mt, p3109) || std::regex_match(n, mt, gf)) {
    if (mt[1].length() > 2 || mt[2].length() > 2) return nullptr;
    return p3109_format(std::stoi(mt[1]), std::stoi(mt[2]), mt[3] == "s", mt[4] == "e");
  }
  static const std::regex param(R"(e(\d+)m(\d+)(?:b(\d+))?(u)?(?:-(ieee|fn|fnuz|finite))?)");
  if (std::regex_match(n, mt, param)) {
    if (mt[1].length() > 2 || mt[2].length() > 2 || mt[3].length() > 5) return nullptr;
    const int e = std::stoi(mt[1]);
    const int m = std::stoi(mt[2]);
    const bool is_unsigned = mt[4].matched;
    const std::string kind = mt[5].matched ? std::string(mt[5]) : "ieee";
    if (e < 1 || e > 11 || m > 52 || e + m + (is_unsigned ? 0 : 1) > 64) return nullptr;
    const int bias = mt[3].matched ? std::stoi(mt[3]) : (1 << (e - 1)) - 1;
    Format f{.name = "",
             .bits = e + m + (is_unsigned ? 0 : 1),
             .exponent_bits = e,
             .mantissa_bits = m,
             .bias = bias,
             .signedness = is_unsigned ? Signedness::unsigned_ : Signedness::sign_magnitude};
    if (kind == "ieee") {
      if (e < 2 && m == 0) return nullptr;
    } else if (kind == "fn") {
      f.nan = NanEncoding::all_ones;
      f.inf = InfEncoding::none;
    } else if (kind == "fnuz") {
      if (is_unsigned) return nullptr;
      f.nan = NanEncoding::negative_zero;
      f.inf = InfEncoding::none;
    } else {
      f.nan = NanEncoding::none;
      f.inf = InfEncoding::none;
    }
    if (kind == "ieee" && m == 0) return nullptr;  // IEEE NaN needs a mantissa bit
    std::string canon = "e" + std::to_string(e) + "m" + std::to_string(m);
    if (mt[3].matched) canon += "b" + std::to_string(bias);
    if (is_unsigned) canon += "u";
    if (kind != "ieee") canon += "-" + kind;
    return intern(f, canon);
  }
  return nullptr;
}

std::string specials_name(const Format& f) {
  if (f.nan == NanEncoding::ieee) return "ieee";
  if (f.nan == NanEncoding::none) return "finite";
  if (f.nan == NanEncoding::all_ones) return f.inf == InfEncoding::none ? "fn" : "fn+inf";
  return f.inf == InfEncoding::none ? "fnuz" : "nan-at-neg-zero+inf";
}

}  // namespace lowbit
