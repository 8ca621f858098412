// Helpers shared by the subcommands that live outside main.cpp.
#pragma once
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <cstdint>
#include <limits>
#include <optional>
#include <cstdio>
#include <filesystem>
#include <algorithm>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>
#include <string_view>

#include "lowbit/error.hpp"
#include "lowbit/format.hpp"
#include "lowbit/io.hpp"
#include "lowbit/output.hpp"
#include "lowbit/registry.hpp"
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

// An integer option read in full and range-checked before CLI11 converts it: an optional '-', then decimal
// digits, nothing else (no empty value, no "4abc", no "0x10", no "1e3"), and lo <= value <= hi.  Without it
// CLI11 turns '' into 0 and clamps a value beyond the type.  Attach with ->check(whole_number(lo, hi)).
inline CLI::Validator whole_number(long long lo, long long hi) {
  const std::string range = std::to_string(lo) + ".." + std::to_string(hi);
  return CLI::Validator(
      [lo, hi, range](std::string& s) -> std::string {
        const bool negative = !s.empty() && s[0] == '-';
        const std::string digits = negative ? s.substr(1) : s;
        if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos)
          return "'" + s + "' is not a whole number in " + range;
        if (digits.size() > 19) return s + " is outside " + range;
        // 19 digits fit an unsigned 64-bit value; compare in it before narrowing.
        const unsigned long long magnitude = std::stoull(digits);
        const bool in_range =
            negative ? (lo < 0 && magnitude <= static_cast<unsigned long long>(-(lo + 1)) + 1)
                     : (hi >= 0 && magnitude <= static_cast<unsigned long long>(hi) &&
                        (lo <= 0 || magnitude >= static_cast<unsigned long long>(lo)));
        if (!in_range) return s + " is outside " + range;
        return std::string{};
      },
      "INT in " + range, "whole_number");
}

// A JSON integer in lo..hi (not 4.5, not "4", not 4294967297 narrowed to 1); `what` names the key.
inline int json_int(const nlohmann::json& v, const std::string& what, int lo, int hi) {
  if (!v.is_number_integer()) throw InputError(what + " must be a whole number, not " + v.dump().substr(0, 40));
  const bool in_range = v.is_number_unsigned() ? v.get<std::uint64_t>() <= static_cast<std::uint64_t>(hi) &&
                                                     v.get<std::uint64_t>() >= static_cast<std::uint64_t>(std::max(lo, 0))
                                               : v.get<std::int64_t>() >= lo && v.get<std::int64_t>() <= hi;
  if (!in_range) throw InputError(what + ": " + v.dump() + " is outside " + std::to_string(lo) + ".." + std::to_string(hi));
  return static_cast<int>(v.get<std::int64_t>());
}

// A JSON string; `what` names the key.
inline std::string json_string(const nlohmann::json& v, const std::string& what) {
  if (!v.is_string()) throw InputError(what + " must be a string, not " + v.dump().substr(0, 40));
  return v.get<std::string>();
}

// A format by name or alias; InputError naming `option` when there is none.
inline const Format& require_format(const std::string& option, const std::string& name) {
  const Format* f = find_format(name);
  if (!f) throw InputError(option + ": unknown format '" + name + "' (see `lowbit formats`)");
  return *f;
}

// Why a code is not one of `f`'s (it needs more bits, or tf32's low storage bits are not zero).
inline std::string code_problem(const Format& f, std::string_view text) {
  return "'" + lowbit::echo_text(text) + "' is too wide for " + f.name + " (" + std::to_string(f.code_bits()) +
         " code bits" + (f.code_shift ? " above " + std::to_string(f.code_shift) + " zero bits" : "") + ")";
}

// Append `item` to a separated list.
inline void append(std::string& list, std::string_view sep, std::string_view item) {
  if (!list.empty()) list += sep;
  list += item;
}

// Rows of cells printed as aligned columns (two spaces between), for the listing commands.
inline void print_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width;
  for (const auto& r : rows)
    for (std::size_t i = 0; i < r.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], r[i].size());
    }
  for (const auto& r : rows) {
    std::string line;
    for (std::size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 2, ' ');
    }
    std::cout << line << '\n';
  }
}

// --max-bytes: the most bytes one input may hold, each file and stdin alike (io::max_input_bytes; default
// 4 GiB, io::default_max_input_bytes), so that /dev/zero or a runaway pipe as stdin, or a sparse file that
// declares 40 GB, is refused instead of exhausting memory.  A whole number of bytes, or one with a binary
// suffix: K, M, G, T (KiB, MiB, GiB, TiB also read).
inline std::optional<std::uint64_t> parse_byte_count(const std::string& s) {
  std::size_t digits = 0;
  while (digits < s.size() && s[digits] >= '0' && s[digits] <= '9') ++digits;
  if (digits == 0 || digits > 19) return std::nullopt;
  const std::string suffix = s.substr(digits);
  int shift = -1;
  for (const auto& [name, bits] : {std::pair{"", 0}, std::pair{"K", 10}, std::pair{"KiB", 10}, std::pair{"M", 20},
                                   std::pair{"MiB", 20}, std::pair{"G", 30}, std::pair{"GiB", 30}, std::pair{"T", 40},
                                   std::pair{"TiB", 40}})
    if (suffix == name) shift = bits;
  if (shift < 0) return std::nullopt;
  const std::uint64_t n = std::stoull(s.substr(0, digits));
  constexpr std::uint64_t max = std::uint64_t{1} << 62;
  if (n == 0 || n > (max >> shift)) return std::nullopt;
  return n << shift;
}

inline void add_max_bytes(CLI::App* sub) {
  // The validator refuses a bad count during parsing (exit 2 naming --max-bytes); the function then sets it.
  const CLI::Validator byte_count(
      [](std::string& s) -> std::string {
        return parse_byte_count(s) ? std::string{}
                                   : "'" + lowbit::echo_text(s) +
                                         "' is not a byte count in 1..2^62 (a whole number, or with K, M, G, T)";
      },
      "BYTES", "byte_count");
  sub->add_option_function<std::string>(
         "--max-bytes", [](const std::string& s) { io::set_max_input_bytes(*parse_byte_count(s)); },
         "The most bytes one input (each file, and stdin) may hold: a number, or with K, M, G, T (default 4G)")
      ->check(byte_count);
}

// Read all of stdin or a file, at most io::max_input_bytes() (--max-bytes).  A file that is not a regular
// file (a FIFO, a device) is refused without blocking in open(); only stdin may be a pipe.
inline std::string read_all(const std::string& path, const std::string& option) {
  int fd = STDIN_FILENO;
  if (path != "-") {
    fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) throw InputError(option + ": cannot read '" + path + "': " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      throw InputError(option + ": '" + path + "' is not a regular file (only - reads a pipe)");
    }
  }
  std::string text;
  char buf[1 << 16];
  for (;;) {
    const ssize_t got = ::read(fd, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      const int e = errno;
      if (fd != STDIN_FILENO) ::close(fd);
      throw InputError(option + ": cannot read '" + path + "': " + std::strerror(e));
    }
    if (got == 0) break;
    if (text.size() + static_cast<std::uint64_t>(got) > io::max_input_bytes()) {
      if (fd != STDIN_FILENO) ::close(fd);
      throw InputError(option + ": '" + path + "' holds more than " + std::to_string(io::max_input_bytes()) +
                       " bytes, the limit of one input (--max-bytes)");
    }
    text.append(buf, static_cast<std::size_t>(got));
  }
  if (fd != STDIN_FILENO) ::close(fd);
  return text;
}

// The most bytes one output may take, in memory while it is computed: 4 GiB.  A command whose output would
// take more (two small operands asking for a huge GEMM result) is refused before allocating it.
inline constexpr std::uint64_t max_output_bytes = std::uint64_t{4} << 30;

// The deepest nesting of arrays and objects a JSON input may have: lowbit's own documents nest at most four
// levels, so 64 is far beyond any of them, and refusing deeper input while parsing (before its tree is built)
// bounds the memory a file of nested '[' can take.
inline constexpr int max_json_depth = 64;

// nlohmann::json::parse with the depth bound: deeper input is an InputError naming `option`.  Other parse
// errors are nlohmann's exceptions, as from json::parse.
inline nlohmann::json parse_json(std::string_view text, const std::string& option) {
  const nlohmann::json::parser_callback_t bound = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json&) {
    if (depth > max_json_depth &&
        (event == nlohmann::json::parse_event_t::object_start || event == nlohmann::json::parse_event_t::array_start))
      throw InputError(option + ": JSON nested deeper than " + std::to_string(max_json_depth) + " levels");
    return true;
  };
  return nlohmann::json::parse(text.begin(), text.end(), bound);
}

// Write a file through the one writer (lowbit/output.hpp), or stdout for "-"; a failure is an InputError
// naming `option` and the file.  `inputs`: files the command read, which the output must not be.
inline void write_all(const std::string& path, const std::string& text, const std::string& option,
                      const std::vector<std::string>& inputs = {}) {
  try {
    io::write_output(path, text, io::OutputOptions{inputs});
  } catch (const io::FileError& e) {
    throw InputError(option + ": " + e.what());
  }
}

// The rows of lowbit::profile_differences() as JSON (profile_diff_json.cpp), for `lowbit profiles --diff
// --json` and the accuracy report: per row target, input, shows and results, a profile's cell null where
// it has no such conversion, else target, rounding, overflow and either unsupported: true (code and value
// null) or code, value and flags.  value: the exact decimal, or with `short_values` the short form of
// `lowbit profiles --diff` followed by exact_value, the exact decimal.
nlohmann::ordered_json profile_difference_rows(bool short_values);

// The command-line flag of a library argument id: "scale_rule" is --scale-rule.
// This executable in its hidden worker mode (`lowbit gate-worker PLUGIN`, gate::worker_main), for the commands
// that load a plugin (`gate`, `contract check --plugin`).
inline std::vector<std::string> gate_worker_command() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw InputError("cannot find this executable (/proc/self/exe) to start the plugin's worker: " + ec.message());
  return {self.string(), "gate-worker"};
}

inline std::string flag_of(std::string_view argument) {
  std::string s = "--";
  for (char c : argument) s += c == '_' ? '-' : c;
  return s;
}

// Print an error message as "lowbit: MESSAGE".  Messages quote their input (a bad line, a name, a parser's
// message); each site cuts what it quotes (lowbit::echo_text), and this last pass escapes any control
// character left and bounds the whole line, so that no message can write a terminal sequence or a line of
// its own.
inline constexpr std::size_t max_message_bytes = 4096;
inline void print_error(std::string_view message) {
  std::cerr << "lowbit: " << lowbit::echo_text(message, max_message_bytes) << "\n";
}

// Run a subcommand body: an InputError prints its message and exits 2.
template <class F>
void guarded(F&& body) {
  try {
    body();
  } catch (const InputError& e) {
    std::fflush(stdout);
    print_error(e.what());
    throw CLI::RuntimeError(2);
  } catch (const ArgumentError& e) {
    // A library error the subcommand left as it is: its argument is the flag of the same name.
    std::fflush(stdout);
    print_error(flag_of(e.argument) + ": " + e.what());
    throw CLI::RuntimeError(2);
  } catch (const std::invalid_argument& e) {
    std::fflush(stdout);
    print_error(e.what());
    throw CLI::RuntimeError(2);
  } catch (const io::FileError& e) {
    // A file the subcommand did not word itself: the message names the file and the byte.
    std::fflush(stdout);
    print_error(e.what());
    throw CLI::RuntimeError(2);
  }
}

}  // namespace lowbit::cli
