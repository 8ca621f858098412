// Helpers shared by the subcommands that live outside main.cpp.
#pragma once
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "lowbit/format.hpp"

namespace lowbit::cli {

// A usage or input error: reported as "lowbit: <message>" with exit code 2.
struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Lowercase 0x hex padded to `digits` digits.
inline std::string hex(std::uint64_t v, int digits) {
  static const char* const d = "0123456789abcdef";
  std::string s;
  for (; v != 0; v >>= 4) s.insert(s.begin(), d[v & 15]);
  if (s.size() < static_cast<std::size_t>(digits)) s.insert(0, static_cast<std::size_t>(digits) - s.size(), '0');
  return "0x" + s;
}
inline std::string hex(const Format& f, std::uint64_t code) { return hex(code, f.hex_digits()); }

// A "0x..." string of at most `bits` bits; `what` names the culprit in the message.
inline std::uint64_t parse_hex_field(const nlohmann::json& j, const std::string& what, int bits) {
  if (!j.is_string()) throw InputError(what + ": expected a \"0x...\" string");
  const std::string s = j.get<std::string>();
  if (s.size() < 3 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X') || s.size() > 18)
    throw InputError(what + ": '" + s + "' is not a 0x hex value");
  std::uint64_t v = 0;
  for (std::size_t i = 2; i < s.size(); ++i) {
    const char c = s[i];
    int h = -1;
    if (c >= '0' && c <= '9') h = c - '0';
    else if (c >= 'a' && c <= 'f') h = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') h = c - 'A' + 10;
    if (h < 0) throw InputError(what + ": '" + s + "' is not a 0x hex value");
    v = v << 4 | static_cast<std::uint64_t>(h);
  }
  if (bits < 64 && (v >> bits) != 0) throw InputError(what + ": " + s + " is wider than " + std::to_string(bits) + " bits");
  return v;
}

// Read all of stdin or a file.
inline std::string read_all(const std::string& path, const std::string& option) {
  if (path == "-") {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    return ss.str();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(option + ": cannot read '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Write a file atomically (temporary + rename), or stdout for "-".
inline void write_all(const std::string& path, const std::string& text, const std::string& option) {
  if (path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return;
  }
  const std::string tmp = path + ".tmp-lowbit";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw InputError(option + ": cannot write '" + path + "'");
    out << text;
    if (!out) {
      std::filesystem::remove(tmp);
      throw InputError(option + ": cannot write '" + path + "'");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp);
    throw InputError(option + ": cannot write '" + path + "': " + ec.message());
  }
}

// The rows of lowbit::profile_differences() as JSON (profile_diff_json.cpp), for `lowbit profiles --diff
// --json` and the accuracy report: per row target, input, shows and results, a profile's cell null where
// it has no such conversion, else target, rounding, overflow and either unsupported: true (code and value
// null) or code, value and flags.  value: the exact decimal, or with `short_values` the short form of
// `lowbit profiles --diff` followed by exact_value, the exact decimal.
nlohmann::ordered_json profile_difference_rows(bool short_values);

// A short exact form of a code for tables: the decimal when it is short (at most 14 characters), else
// s*2^e with s odd ("2^-127"); defined in profile_diff_json.cpp.
std::string short_value(const Format& f, std::uint64_t code);

// Run a subcommand body: an InputError prints its message and exits 2.
template <class F>
void guarded(F&& body) {
  try {
    body();
  } catch (const InputError& e) {
    std::fflush(stdout);
    std::cerr << "lowbit: " << e.what() << "\n";
    throw CLI::RuntimeError(2);
  } catch (const std::invalid_argument& e) {
    std::fflush(stdout);
    std::cerr << "lowbit: " << e.what() << "\n";
    throw CLI::RuntimeError(2);
  }
}

}  // namespace lowbit::cli
