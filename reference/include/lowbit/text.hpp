// Text forms of codes, values, flags and policies: the one place every printer, message and file writer
// takes them from (the command line, golden vectors, the checks' failure messages, reports).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lowbit/format.hpp"
#include "lowbit/policy.hpp"

namespace lowbit {

// Lowercase hex digits of v, zero-padded to at least `digits` ("3c" for 0x3c, 2).
std::string hex_digits(std::uint64_t v, int digits);
// The same with the 0x prefix ("0x3c").
std::string hex(std::uint64_t v, int digits);
// A code padded to its format's storage width ("0x3c" in e4m3, "0x3f80" in bf16).
std::string hex(const Format& f, std::uint64_t code);

// Hex digits with a "0x" / "0X" prefix that `prefix` requires or allows.  nullopt when the text is not a hex
// number.  A value of more than 64 bits sets *too_wide (when given) and returns its low 64 bits.
enum class HexPrefix : std::uint8_t { required, optional };
std::optional<std::uint64_t> parse_hex(std::string_view s, HexPrefix prefix, bool* too_wide = nullptr);

// The raised flags in the contract's order (inexact, underflow, overflow, infinite, invalid, unsupported),
// comma-separated, or "-" for none.
std::string flags_text(std::uint8_t flags);

// The exact decimal of a code when it has at most `max_chars` characters, else s*2^e with s odd ("2^e" for
// s = 1): 2^-149 reads "2^-149", not 45 digits.  NaN and infinities as exact::code_text writes them.
std::string short_value(const Format& f, std::uint64_t code, std::size_t max_chars = 14);
// "0x3c (1.5)": the code and its value, or a note when it is not a code of the format.
std::string code_and_value(const Format& f, std::uint64_t code, std::size_t max_chars = 24);

// "rne satfinite keep after" (and " sr-bits N" for a stochastic rounding).
std::string policy_text(const Policy& p);

// "[a, b, c]".
std::string shape_text(const std::vector<std::uint64_t>& shape);

// Text for an XML attribute or element (JUnit reports): & < > " ' escaped; a control character other than tab
// and newline, which XML 1.0 does not admit, becomes '?'.
std::string xml_escape(std::string_view s);

// Text taken from an input (a bad line, a suite or case name, a manifest field, a parser's message), made
// safe to echo in a message: control characters are escaped, so that a file cannot move the cursor, change
// the terminal's colours or forge a line of a report ("\n", "\r", "\t", "\0", other C0 bytes, DEL, the
// C1 controls and bytes that are not UTF-8 as "\xHH"; the line and paragraph separators and the
// bidirectional controls as "\u{HHHH}"), and at most `max_bytes` bytes of it are shown: a longer text is
// cut at a character boundary and followed by "... (N bytes in all, the first M shown)".
inline constexpr std::size_t echo_max_bytes = 96;
std::string echo_text(std::string_view s, std::size_t max_bytes = echo_max_bytes);

// The part of `text` around byte `offset` (0-based), made safe as echo_text makes it and preceded by the
// position: "byte 12345: ...xyz..." with at most `max_bytes` bytes shown, about half of them before the
// offset.  For a message about a large input (a JSON document, a header) that points into it.
std::string echo_at(std::string_view text, std::size_t offset, std::size_t max_bytes = echo_max_bytes);

}  // namespace lowbit
