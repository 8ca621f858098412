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
#include "lowbit/text.hpp"

namespace lowbit::cli {

// A usage or input error: reported as "lowbit: <message>" with exit code 2.
struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A "0x..." string of at most `bits` bits; `what` names the culprit in the message.
inline std::uint64_t parse_hex_field(const nlohmann::json& j, const std::string& what, int bits) {
  if (!j.is_string()) throw InputError(what + ": expected a \"0x...\" string");
  const std::string s = j.get<std::string>();
  bool wide = false;
  const std::optional<std::uint64_t> parsed = parse_hex(s, HexPrefix::required, &wide);
  if (!parsed || s.size() > 18) throw InputError(what + ": '" + s + "' is not a 0x hex value");
  const std::uint64_t v = *parsed;
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
