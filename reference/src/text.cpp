#include "lowbit/text.hpp"

#include "lowbit/exact.hpp"
#include "lowbit/names.hpp"
#include "lowbit/value.hpp"

namespace lowbit {

std::string hex_digits(std::uint64_t v, int digits) {
  static constexpr char d[] = "0123456789abcdef";
  std::string s;
  for (; v != 0; v >>= 4) s.insert(s.begin(), d[v & 15]);
  if (s.size() < static_cast<std::size_t>(digits)) s.insert(0, static_cast<std::size_t>(digits) - s.size(), '0');
  return s;
}

std::string hex(std::uint64_t v, int digits) { return "0x" + hex_digits(v, digits); }

std::string hex(const Format& f, std::uint64_t code) { return hex(code, f.hex_digits()); }

std::optional<std::uint64_t> parse_hex(std::string_view s, HexPrefix prefix, bool* too_wide) {
  if (too_wide) *too_wide = false;
  if (s.size() >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    s.remove_prefix(2);
  } else if (prefix == HexPrefix::required) {
    return std::nullopt;
  }
  if (s.empty()) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : s) {
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else return std::nullopt;
    if ((v >> 60) && too_wide) *too_wide = true;
    v = (v << 4) | static_cast<std::uint64_t>(d);
  }
  return v;
}

std::string flags_text(std::uint8_t flags) {
  std::string s;
  auto add = [&](std::uint8_t bit, const char* n) {
    if (!(flags & bit)) return;
    if (!s.empty()) s += ',';
    s += n;
  };
  add(flag::inexact, "inexact");
  add(flag::underflow, "underflow");
  add(flag::overflow, "overflow");
  add(flag::infinite, "infinite");
  add(flag::invalid, "invalid");
  add(flag::unsupported, "unsupported");
  return s.empty() ? "-" : s;
}

std::string short_value(const Format& f, std::uint64_t code, std::size_t max_chars) {
  const std::string d = exact::code_text(f, code);
  if (d.size() <= max_chars) return d;
  const Unpacked u = unpack(f, code);
  if (u.cls != ValueClass::finite) return d;
  std::uint64_t s = u.significand;
  int e = u.exponent;
  while (s != 0 && (s & 1) == 0) {
    s >>= 1;
    ++e;
  }
  return std::string(u.negative ? "-" : "") + (s == 1 ? "" : std::to_string(s) + "*") + "2^" + std::to_string(e);
}

std::string code_and_value(const Format& f, std::uint64_t code, std::size_t max_chars) {
  if (!f.valid_code(code)) return hex(code, f.hex_digits()) + " (not a code of " + f.name + ")";
  return hex(f, code) + " (" + short_value(f, code, max_chars) + ")";
}

std::string policy_text(const Policy& p) {
  std::string s = std::string(name(p.rounding)) + " " + name(p.overflow) + " " + name(p.subnormals) + " " +
                  name(p.tininess);
  if (is_stochastic(p.rounding)) s += " sr-bits " + std::to_string(p.sr_bits);
  return s;
}

std::string shape_text(const std::vector<std::uint64_t>& shape) {
  std::string s("[");
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

}  // namespace lowbit
