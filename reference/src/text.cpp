#include "lowbit/text.hpp"

#include <algorithm>

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

std::string xml_escape(std::string_view s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&apos;"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n') o += '?';
        else o += c;
    }
  }
  return o;
}

}  // namespace lowbit

namespace lowbit {

namespace {

// The length of the UTF-8 sequence at s[i] (RFC 3629: no overlong forms, no surrogates, nothing above
// U+10FFFF) and its code point, or 0 when the bytes there are not one.
std::size_t utf8_sequence(std::string_view s, std::size_t i, std::uint32_t& cp) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  std::size_t n = 0;
  std::uint32_t min = 0;
  if (c < 0x80) {
    cp = c;
    return 1;
  }
  if (c >= 0xc2 && c <= 0xdf) n = 2, cp = c & 0x1fu, min = 0x80;
  else if (c >= 0xe0 && c <= 0xef) n = 3, cp = c & 0x0fu, min = 0x800;
  else if (c >= 0xf0 && c <= 0xf4) n = 4, cp = c & 0x07u, min = 0x10000;
  else return 0;
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xc0u) != 0x80u) return 0;
    cp = (cp << 6) | (b(k) & 0x3fu);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

// Code points a terminal or a reader acts on rather than shows: U+2028/2029 (line and paragraph
// separators) and the bidirectional embeddings, overrides and isolates (U+202A..202E, U+2066..2069),
// which can make a line read in another order than its bytes (CVE-2021-42574, "Trojan Source").
bool is_format_control(std::uint32_t cp) {
  return (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069) || cp == 0x200e || cp == 0x200f;
}

void escape_into(std::string& out, std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    std::uint32_t cp = 0;
    const std::size_t n = utf8_sequence(s, i, cp);
    if (n == 0) {
      out += "\\x" + hex_digits(static_cast<unsigned char>(s[i]), 2);
      ++i;
      continue;
    }
    if (cp == '\n') out += "\\n";
    else if (cp == '\r') out += "\\r";
    else if (cp == '\t') out += "\\t";
    else if (cp == 0) out += "\\0";
    else if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f)) out += "\\x" + hex_digits(cp, 2);
    else if (is_format_control(cp)) out += "\\u{" + hex_digits(cp, 4) + "}";
    else out.append(s.substr(i, n));
    i += n;
  }
}

// The largest cut of s at most `limit` bytes long that does not split a UTF-8 sequence.
std::size_t cut_at(std::string_view s, std::size_t limit) {
  if (limit >= s.size()) return s.size();
  std::size_t end = limit;
  // Step back over continuation bytes (at most three) to the start of the sequence the limit splits; the
  // bytes before it are whole sequences (or bytes escaped one by one).
  for (int k = 0; k < 3 && end > 0 && (static_cast<unsigned char>(s[end]) & 0xc0u) == 0x80u; ++k) --end;
  return end;
}

}  // namespace

std::string echo_text(std::string_view s, std::size_t max_bytes) {
  std::string out;
  const std::size_t shown = cut_at(s, max_bytes);
  escape_into(out, s.substr(0, shown));
  if (shown < s.size())
    out += "... (" + std::to_string(s.size()) + " bytes in all, the first " + std::to_string(shown) + " shown)";
  return out;
}

std::string echo_at(std::string_view text, std::size_t offset, std::size_t max_bytes) {
  offset = std::min(offset, text.size());
  const std::size_t before = std::min(offset, max_bytes / 2);
  std::size_t start = offset - before;
  // Start at a character boundary: skip continuation bytes (at most three).
  for (int k = 0; k < 3 && start < offset && (static_cast<unsigned char>(text[start]) & 0xc0u) == 0x80u; ++k) ++start;
  const std::string_view window = text.substr(start);
  const std::size_t shown = cut_at(window, max_bytes);
  std::string out = "byte " + std::to_string(offset) + ": ";
  if (start > 0) out += "...";
  escape_into(out, window.substr(0, shown));
  if (shown < window.size()) out += "...";
  return out;
}

}  // namespace lowbit
