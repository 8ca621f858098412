// The `lowbit` command line.  Its contract (subcommands, output formats, exit codes) is stable and
// documented in README.md; scripts and CI depend on it.  Exit codes: 0 success, 1 checked and found
// mismatches (conform), 2 usage or input error with a message on stderr naming the culprit.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli_util.hpp"
#include "commands.hpp"
#include "lowbit/batch.hpp"
#include "lowbit/convert.hpp"
#include "lowbit/exact.hpp"
#include "lowbit/format.hpp"
#include "lowbit/policy.hpp"
#include "lowbit/profile.hpp"
#include "lowbit/profile_diff.hpp"
#include "lowbit/registry.hpp"
#include "lowbit/text.hpp"

#ifndef LOWBIT_VERSION
#define LOWBIT_VERSION "0.0.0"
#endif

namespace {

using lowbit::Format;
using lowbit::Result;
using lowbit::short_value;
using json = nlohmann::json;

// A usage or input error: main prints "lowbit: <message>" on stderr and exits 2.
struct UsageError {
  std::string message;
};

// ---- text helpers ---------------------------------------------------------------------------------

// Append `item` to a separated list.
void append(std::string& list, std::string_view sep, std::string_view item) {
  if (!list.empty()) list += sep;
  list += item;
}

const Format& require_format(const std::string& option, const std::string& name) {
  const Format* f = lowbit::find_format(name);
  if (!f) throw UsageError{option + ": unknown format '" + name + "' (see `lowbit formats`)"};
  return *f;
}

// Why a code is not one of `f`'s (it needs more bits, or tf32's low storage bits are not zero).
std::string code_problem(const Format& f, std::string_view text) {
  return "'" + std::string(text) + "' is too wide for " + f.name + " (" + std::to_string(f.code_bits()) + " code bits" +
         (f.code_shift ? " above " + std::to_string(f.code_shift) + " zero bits" : "") + ")";
}

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

void print_table(const std::vector<std::vector<std::string>>& rows) {
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

// ---- lowbit profiles ------------------------------------------------------------------------------

std::vector<std::string> mode_names(lowbit::ModeMask m, bool rounding) {
  std::vector<std::string> out;
  if (rounding) {
    for (lowbit::Rounding r : lowbit::all<lowbit::Rounding>())
      if (m & lowbit::bit(r)) out.push_back(lowbit::name(r));
  } else {
    for (lowbit::Overflow o : lowbit::all<lowbit::Overflow>())
      if (m & lowbit::bit(o)) out.push_back(lowbit::name(o));
  }
  return out;
}

json rule_json(const lowbit::TargetRule& r) {
  json j;
  j["format"] = r.target ? json(r.target->name) : json(nullptr);
  j["roundings"] = mode_names(r.roundings, true);
  j["default_rounding"] = r.default_rounding ? json(lowbit::name(*r.default_rounding)) : json(nullptr);
  j["overflows"] = mode_names(r.overflows, false);
  j["default_overflow"] = lowbit::name(r.default_overflow);
  j["note"] = r.note;
  return j;
}

json profile_json(const lowbit::Profile& p) {
  json j;
  j["name"] = p.name;
  j["description"] = p.description;
  const lowbit::Quirks& q = p.quirks;
  j["quirks"] = {{"nan_to_no_nan", lowbit::name(q.nan_to_no_nan)},
                 {"nan_style", lowbit::name(q.nan_style)},
                 {"unsigned_negative", lowbit::name(q.unsigned_negative)},
                 {"zero_into_no_zero", lowbit::name(q.zero_into_no_zero)},
                 {"numpy_half_nan", q.numpy_half_nan},
                 {"identity_copies", q.identity_copies},
                 {"nozero_lowest_binade_rounds_up", q.nozero_lowest_binade_rounds_up},
                 {"infinity_ignores_saturation", q.infinity_ignores_saturation}};
  j["int8_sign_magnitude"] = p.int8_sign_magnitude;
  j["targets"] = json::array();
  for (const lowbit::TargetRule& r : p.targets) j["targets"].push_back(rule_json(r));
  j["other_targets"] = p.any_target ? rule_json(p.fallback) : json(nullptr);
  return j;
}

std::string rule_text(const lowbit::TargetRule& r) {
  std::string s = r.default_rounding ? lowbit::name(*r.default_rounding) : "(rounding must be named)";
  s += "/";
  s += lowbit::name(r.default_overflow);
  return s;
}

std::string cell_text(const lowbit::DiffCell& c) {
  if (!c.available) return "n/a";
  if (c.unsupported) return "undefined";
  return lowbit::hex(*c.target, c.result.code) + "=" + short_value(*c.target, c.result.code);
}

void run_profiles(bool diff, bool as_json) {
  const auto all = lowbit::profiles();
  if (!diff) {
    if (as_json) {
      json out = json::array();
      for (const lowbit::Profile& p : all) out.push_back(profile_json(p));
      std::cout << out.dump(2) << '\n';
      return;
    }
    for (const lowbit::Profile& p : all) {
      std::cout << p.name << ": " << p.description << '\n';
      std::string targets;
      for (const lowbit::TargetRule& r : p.targets)
        append(targets, ", ", std::string(r.target->name) + " " + rule_text(r));
      if (!targets.empty()) std::cout << "  targets: " << targets << '\n';
      if (p.any_target) std::cout << "  any other target: " << rule_text(p.fallback) << '\n';
    }
    return;
  }
  const std::vector<lowbit::DiffRow> rows = lowbit::profile_differences();
  if (as_json) {
    // Sorted keys (nlohmann::json), as before the rows were shared with the report.
    const json out = lowbit::cli::profile_difference_rows(false);
    std::cout << out.dump(2) << '\n';
    return;
  }
  std::vector<std::vector<std::string>> table;
  std::vector<std::string> head = {"target", "input"};
  for (const lowbit::Profile& p : all) head.push_back(p.name);
  table.push_back(head);
  for (const lowbit::DiffRow& r : rows) {
    std::vector<std::string> line = {r.probe->target, r.probe->input};
    for (const lowbit::DiffCell& c : r.cells) line.push_back(cell_text(c));
    table.push_back(line);
  }
  print_table(table);
  std::cout << '\n';
  for (const lowbit::DiffRow& r : rows) std::cout << r.probe->target << " " << r.probe->input << ": " << r.probe->shows << '\n';
  std::cout << "(n/a: the profile has no such conversion without options; int8 under microxcaling is int8sm; "
               "undefined: the implementation has no defined result)\n";
}

// ---- lowbit decode / table ------------------------------------------------------------------------

void run_decode(const std::string& format_name, const std::vector<std::string>& codes, bool as_json) {
  const Format& f = require_format("--format", format_name);
  json out = json::array();
  std::string text;
  for (const std::string& c : codes) {
    bool too_wide = false;
    const std::optional<std::uint64_t> v = lowbit::parse_hex(c, lowbit::HexPrefix::optional, &too_wide);
    if (!v) throw UsageError{"decode: '" + c + "' is not a hex code"};
    if (too_wide || !f.valid_code(*v))
      throw UsageError{"decode: code " + code_problem(f, c)};
    const std::string code = lowbit::hex(f, *v);
    const std::string value = lowbit::exact::code_text(f, *v);
    if (as_json) out.push_back({{"code", code}, {"value", value}});
    else text += code + " " + value + "\n";
  }
  if (as_json) std::cout << out.dump(2) << '\n';
  else std::cout << text;
}

void run_table(const std::string& format_name, bool as_json) {
  const Format& f = require_format("--format", format_name);
  if (f.storage_bits() > 16)
    throw UsageError{std::string("--format: table lists formats of at most 16 bits; ") + f.name + " has " +
                     std::to_string(f.storage_bits())};
  json out = json::array();
  std::string text;
  const std::uint64_t n = std::uint64_t{1} << f.code_bits();
  for (std::uint64_t c = 0; c < n; ++c) {
    const std::uint64_t code = c << f.code_shift;
    const std::string hc = lowbit::hex(f, code);
    const std::string value = lowbit::exact::code_text(f, code);
    if (as_json) out.push_back({{"code", hc}, {"value", value}});
    else text += hc + " " + value + "\n";
  }
  if (as_json) std::cout << out.dump(2) << '\n';
  else std::cout << text;
}

// ---- lowbit convert -------------------------------------------------------------------------------

struct ConvertOptions {
  std::string to, from = "f32", rounding, overflow, subnormals, tininess, profile;
  int sr_bits = 0;
  bool sr_bits_given = false;
  bool flags = false, raw = false, trace = false;
};

// Buffered stdout writes: everything converted so far reaches stdout before an error is reported.
class Out {
 public:
  ~Out() { flush(); }
  void put(std::string_view s) {
    buf_.append(s);
    if (buf_.size() >= (1u << 20)) flush();
  }
  void put_bytes(const void* p, std::size_t n) { buf_.append(static_cast<const char*>(p), n); if (buf_.size() >= (1u << 20)) flush(); }
  void flush() {
    if (!buf_.empty()) std::fwrite(buf_.data(), 1, buf_.size(), stdout);
    buf_.clear();
    std::fflush(stdout);
  }

 private:
  std::string buf_;
};

// Reads stdin in big blocks and hands out lines (without the newline; a trailing '\r' is dropped).
class LineReader {
 public:
  bool next(std::string& line) {
    line.clear();
    for (;;) {
      if (pos_ == len_) {
        if (eof_) return !line.empty();
        len_ = std::fread(buf_.data(), 1, buf_.size(), stdin);
        pos_ = 0;
        if (len_ == 0) {
          eof_ = true;
          return !line.empty();
        }
      }
      const char* start = buf_.data() + pos_;
      const void* nl = std::memchr(start, '\n', len_ - pos_);
      if (nl) {
        const std::size_t n = static_cast<std::size_t>(static_cast<const char*>(nl) - start);
        line.append(start, n);
        pos_ += n + 1;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        return true;
      }
      line.append(start, len_ - pos_);
      pos_ = len_;
    }
  }

 private:
  std::vector<char> buf_ = std::vector<char>(1u << 20);
  std::size_t pos_ = 0, len_ = 0;
  bool eof_ = false;
};

std::vector<std::string_view> fields(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    const std::size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

int byte_width(int storage_bits) {
  if (storage_bits <= 8) return 1;
  if (storage_bits <= 16) return 2;
  if (storage_bits <= 32) return 4;
  return 8;
}

// --raw: packed little-endian input values of `from`, one code per 1, 2, 4 or 8 bytes out.
void convert_raw(const Format& from, const Format& to, const lowbit::Policy& policy, Out& out) {
  const int in_w = byte_width(from.storage_bits());
  const int out_w = byte_width(to.storage_bits());
  // Sources of at most 16 bits: every conversion once, then a table look-up per value.
  std::vector<std::uint64_t> table;
  std::vector<bool> valid;
  if (in_w <= 2) {
    const std::size_t n = std::size_t{1} << (8 * in_w);
    table.resize(n);
    valid.resize(n);
    for (std::size_t c = 0; c < n; ++c) {
      valid[c] = from.valid_code(c);
      if (valid[c]) table[c] = lowbit::convert(from, c, to, policy).code;
    }
  }
  const bool use_batch = in_w == 4 && from.code_bits() == 32 && from.code_shift == 0 &&
                         lowbit::batch_code_bytes(to) == static_cast<std::size_t>(out_w) &&
                         lowbit::batch_supported(from, to, policy);
  std::vector<unsigned char> in(std::size_t{1} << 22);
  std::vector<unsigned char> res;
  std::size_t carry = 0;       // bytes of an incomplete value kept from the previous block
  std::uint64_t offset = 0;    // byte offset of in[0] in the input stream
  for (;;) {
    const std::size_t got = std::fread(in.data() + carry, 1, in.size() - carry, stdin);
    const std::size_t have = carry + got;
    const std::size_t whole = have / static_cast<std::size_t>(in_w);
    res.resize(whole * static_cast<std::size_t>(out_w));
    // Wider sources (f32): the vectorised batch path when it covers the pair and every input bit
    // pattern is a code (f32 and the like: code_bits fills the storage, no code shift).
    if (table.empty() && use_batch) {
      lowbit::convert_batch(from, in.data(), whole, to, policy, res.data(), nullptr, nullptr, nullptr);
    } else {
      for (std::size_t i = 0; i < whole; ++i) {
        const unsigned char* p = in.data() + i * static_cast<std::size_t>(in_w);
        std::uint64_t v = 0;
        for (int b = in_w - 1; b >= 0; --b) v = (v << 8) | p[b];
        std::uint64_t code;
        if (!table.empty()) {
          if (!valid[v]) {
            out.put_bytes(res.data(), i * static_cast<std::size_t>(out_w));
            out.flush();
            throw UsageError{"--raw: the value at byte offset " + std::to_string(offset + i * static_cast<std::size_t>(in_w)) +
                             " (" + lowbit::hex(from, v) + ") is too wide for " + from.name};
          }
          code = table[v];
        } else {
          if (!from.valid_code(v)) {
            out.put_bytes(res.data(), i * static_cast<std::size_t>(out_w));
            out.flush();
            throw UsageError{"--raw: the value at byte offset " + std::to_string(offset + i * static_cast<std::size_t>(in_w)) +
                             " (" + lowbit::hex(from, v) + ") is not a valid " + from.name + " code"};
          }
          code = lowbit::convert(from, v, to, policy).code;
        }
        unsigned char* q = res.data() + i * static_cast<std::size_t>(out_w);
        for (int b = 0; b < out_w; ++b) q[b] = static_cast<unsigned char>(code >> (8 * b));
      }
    }
    out.put_bytes(res.data(), res.size());
    const std::size_t used = whole * static_cast<std::size_t>(in_w);
    carry = have - used;
    if (carry) std::memmove(in.data(), in.data() + used, carry);
    offset += used;
    if (got == 0) break;
  }
  if (carry) {
    out.flush();
    throw UsageError{"--raw: the input ends with a partial value: " + std::to_string(carry) + " byte(s) at byte offset " +
                     std::to_string(offset) + ", a " + from.name + " value takes " + std::to_string(in_w)};
  }
}

void run_convert(const ConvertOptions& o) {
  const Format& to_requested = require_format("--to", o.to);
  const bool text = o.from == "text";
  const Format* from = text ? nullptr : &require_format("--from", o.from);

  lowbit::PolicyRequest req;
  if (!o.rounding.empty()) {
    req.rounding = lowbit::parse<lowbit::Rounding>(o.rounding);
    if (!req.rounding)
      throw UsageError{"--rounding: unknown rounding mode '" + o.rounding + "' (rne, rna, rtz, rup, rdn, rto, sr-a, sr-b, sr-c)"};
  }
  if (!o.overflow.empty()) {
    req.overflow = lowbit::parse<lowbit::Overflow>(o.overflow);
    if (!req.overflow) throw UsageError{"--overflow: unknown overflow mode '" + o.overflow + "' (satfinite, satpropagate, nosat)"};
  }
  if (!o.subnormals.empty()) {
    req.subnormals = lowbit::parse<lowbit::Subnormals>(o.subnormals);
    if (!req.subnormals) throw UsageError{"--subnormals: unknown mode '" + o.subnormals + "' (keep, ftz, daz, ftz-daz)"};
  }
  if (!o.tininess.empty()) {
    req.tininess = lowbit::parse<lowbit::Tininess>(o.tininess);
    if (!req.tininess) throw UsageError{"--tininess: unknown value '" + o.tininess + "' (after, before)"};
  }
  const lowbit::Profile* profile = nullptr;
  if (!o.profile.empty()) {
    profile = lowbit::find_profile(o.profile);
    if (!profile) {
      std::string names;
      for (const lowbit::Profile& p : lowbit::profiles()) append(names, ", ", p.name);
      throw UsageError{"--profile: unknown profile '" + o.profile + "' (" + names + ")"};
    }
  }
  req.sr_bits = o.sr_bits;
  std::string error;
  const std::optional<lowbit::Resolved> resolved = lowbit::resolve(profile, to_requested, req, error);
  if (!resolved) throw UsageError{error};
  const lowbit::Policy& policy = resolved->policy;
  const Format& to = *resolved->target;
  const bool stochastic = lowbit::is_stochastic(policy.rounding);
  if (stochastic) {
    if (!o.sr_bits_given)
      throw UsageError{std::string("--sr-bits: rounding ") + lowbit::name(policy.rounding) +
                       " needs the number of random bits N (1.." + std::to_string(lowbit::max_sr_bits) + ")"};
    if (o.sr_bits < 1 || o.sr_bits > lowbit::max_sr_bits)
      throw UsageError{"--sr-bits: " + std::to_string(o.sr_bits) + " is outside 1.." + std::to_string(lowbit::max_sr_bits)};
  } else if (o.sr_bits_given) {
    throw UsageError{std::string("--sr-bits: rounding ") + lowbit::name(policy.rounding) +
                     " is not stochastic (sr-a, sr-b, sr-c take random bits)"};
  }
  if (o.raw) {
    if (o.flags) throw UsageError{"--raw cannot be combined with --flags"};
    if (o.trace) throw UsageError{"--raw cannot be combined with --trace"};
    if (text) throw UsageError{"--raw cannot be combined with --from text"};
    if (stochastic) throw UsageError{std::string("--raw cannot be combined with a stochastic rounding (") +
                                     lowbit::name(policy.rounding) + ")"};
    Out out;
    convert_raw(*from, to, policy, out);
    return;
  }

  Out out;
  LineReader in;
  std::string line;
  std::uint64_t number = 0;
  const std::uint64_t r_limit = stochastic ? (std::uint64_t{1} << policy.sr_bits) : 0;
  auto fail = [&](const std::string& why) {
    out.flush();
    throw UsageError{"line " + std::to_string(number) + ": " + why};
  };
  while (in.next(line)) {
    ++number;
    const std::vector<std::string_view> f = fields(line);
    if (f.empty()) fail("empty line (expected a value)");
    if (f.size() > 2) fail("too many fields in '" + line + "'");
    std::uint64_t rbits = 0;
    if (stochastic) {
      if (f.size() < 2) fail("random bits missing: rounding " + std::string(lowbit::name(policy.rounding)) +
                             " needs a second field of " + std::to_string(policy.sr_bits) + " random bits in 0x hex");
      bool wide = false;
      const std::optional<std::uint64_t> r = lowbit::parse_hex(f[1], lowbit::HexPrefix::required, &wide);
      if (!r) fail("random bits '" + std::string(f[1]) + "' are not 0x hex");
      if (wide || *r >= r_limit)
        fail("random bits " + std::string(f[1]) + " are not below 2^" + std::to_string(policy.sr_bits));
      rbits = *r;
    } else if (f.size() == 2) {
      fail("random bits '" + std::string(f[1]) + "' present, but rounding " + lowbit::name(policy.rounding) +
           " is not stochastic");
    }
    Result r;
    lowbit::exact::Trace trace;
    if (text) {
      const std::optional<lowbit::exact::Value> x = lowbit::exact::parse(f[0]);
      if (!x) fail("'" + std::string(f[0]) + "' is not a number (decimal, hex-float, nan, inf)");
      r = lowbit::exact::round(to, *x, policy, rbits, o.trace ? &trace : nullptr);
    } else {
      bool wide = false;
      const std::optional<std::uint64_t> v = lowbit::parse_hex(f[0], lowbit::HexPrefix::required, &wide);
      if (!v) fail("'" + std::string(f[0]) + "' is not 0x hex bits of " + from->name);
      if (wide || !from->valid_code(*v))
        fail(code_problem(*from, f[0]));
      if (o.trace) {
        r = lowbit::exact::round(to, lowbit::exact::from_code(*from, *v, lowbit::flushes_inputs(policy.subnormals)),
                                 policy, rbits, &trace);
      } else {
        r = lowbit::convert(*from, *v, to, policy, rbits);
      }
    }
    if (r.flags & lowbit::flag::unsupported)
      fail(std::string("profile ") + (profile ? profile->name : "(none)") + " has no defined result for " +
           std::string(f[0]) + " into " + to.name);
    std::string s = lowbit::hex(to, r.code);
    if (o.flags) s += " " + lowbit::flags_text(r.flags);
    s += '\n';
    if (o.trace) {
      s += "  input:     " + trace.input + "\n";
      if (trace.has_neighbours) {
        const std::string beyond = "beyond the largest finite value";
        s += "  lower:     " + trace.lower + " (" + (trace.lower_beyond_max ? beyond : lowbit::hex(to, trace.lower_code)) + ")\n";
        s += "  upper:     " + trace.upper + " (" + (trace.upper_beyond_max ? beyond : lowbit::hex(to, trace.upper_code)) + ")\n";
        s += "  remainder: " + trace.remainder + " ulp\n";
      }
      s += "  decision:  " + trace.decision + "\n";
      s += "  policy:    " + std::string(lowbit::name(policy.rounding)) + " " + lowbit::name(policy.overflow) + " " +
           lowbit::name(policy.subnormals) + " tininess " + lowbit::name(policy.tininess) +
           (stochastic ? " sr-bits " + std::to_string(policy.sr_bits) + " R " + lowbit::hex(rbits, 1) : "") + "\n";
      s += "  result:    " + lowbit::hex(to, r.code) + " = " + lowbit::exact::code_text(to, r.code) + "\n";
      s += "  flags:     " + lowbit::flags_text(r.flags) + "\n";
      s += "  ternary:   " + std::to_string(static_cast<int>(r.ternary)) + "\n";
    }
    out.put(s);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"lowbit: bit-exact emulator and conformance suite for low-precision ML number formats"};
  app.set_version_flag("--version", std::string("lowbit ") + LOWBIT_VERSION);
  app.require_subcommand(1);

  bool json_out = false, diff = false;
  auto* formats_cmd = app.add_subcommand("formats", "List every registered format (P3109 binaryKpP{s,u}{e,f} and "
                                                    "parametric e<E>m<M>[b<bias>][u][-ieee|-fn|-fnuz|-finite] names "
                                                    "are accepted wherever a format is)");
  formats_cmd->add_flag("--json", json_out, "Print a JSON array");

  auto* profiles_cmd = app.add_subcommand("profiles", "List the profiles (named policy bundles)");
  profiles_cmd->add_flag("--diff", diff, "Print every kind of disagreement between the profiles, one example each");
  profiles_cmd->add_flag("--json", json_out, "Print JSON");

  std::string format_name;
  std::vector<std::string> codes;
  auto* decode_cmd = app.add_subcommand("decode", "Print the exact value of codes");
  decode_cmd->add_option("--format", format_name, "Format name or alias")->required();
  decode_cmd->add_option("codes", codes, "Codes in hex")->required();
  decode_cmd->add_flag("--json", json_out, "Print a JSON array");

  auto* table_cmd = app.add_subcommand("table", "Print every code and value of a format of at most 16 bits");
  table_cmd->add_option("--format", format_name, "Format name or alias")->required();
  table_cmd->add_flag("--json", json_out, "Print a JSON array");

  ConvertOptions co;
  auto* convert_cmd = app.add_subcommand(
      "convert", "Convert values read from stdin, one per line (0x hex bits of --from, or text literals)");
  convert_cmd->add_option("--to", co.to, "Target format")->required();
  convert_cmd->add_option("--from", co.from, "Source format, or `text` for decimal / hex-float literals (default f32)");
  convert_cmd->add_option("--rounding", co.rounding, "rne, rna, rtz, rup, rdn, rto, sr-a, sr-b, sr-c (default rne)");
  convert_cmd->add_option("--overflow", co.overflow, "satfinite, satpropagate, nosat (default nosat)");
  convert_cmd->add_option("--subnormals", co.subnormals, "keep, ftz, daz, ftz-daz (default keep)");
  convert_cmd->add_option("--tininess", co.tininess, "after (default) or before rounding");
  convert_cmd->add_option("--profile", co.profile, "ocp, cuda, ml_dtypes, llvm, te, torchao, microxcaling, p3109");
  auto* sr = convert_cmd->add_option("--sr-bits", co.sr_bits, "Random bits N per value for sr-a/sr-b/sr-c (1..32)");
  convert_cmd->add_flag("--flags", co.flags, "Print the raised flags after each code");
  convert_cmd->add_flag("--raw", co.raw, "Packed little-endian binary in and out");
  convert_cmd->add_flag("--trace", co.trace, "Explain each conversion");

  lowbit::cli::add_conform(app);
  lowbit::cli::add_gemm(app);
  lowbit::cli::add_quantize(app);
  lowbit::cli::add_verify_checkpoint(app);
  lowbit::cli::add_vectors(app);
  lowbit::cli::add_report(app);
  lowbit::cli::add_merge(app);

  // CLI11 reports a stray word as "a subcommand is required"; name it instead.
  if (argc > 1 && argv[1][0] != '-') {
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands({}))
      if (sub->check_name(argv[1])) known = true;
    if (!known) {
      std::cerr << "lowbit: unknown subcommand '" << argv[1] << "' (see lowbit --help)\n";
      return 2;
    }
  }

  try {
    app.parse(argc, argv);
    co.sr_bits_given = sr->count() > 0;
    if (formats_cmd->parsed()) run_formats(json_out);
    else if (profiles_cmd->parsed()) run_profiles(diff, json_out);
    else if (decode_cmd->parsed()) run_decode(format_name, codes, json_out);
    else if (table_cmd->parsed()) run_table(format_name, json_out);
    else if (convert_cmd->parsed()) run_convert(co);
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::cerr << "lowbit: " << e.what() << "\n";
    return 2;
  } catch (const UsageError& e) {
    std::fflush(stdout);
    std::cerr << "lowbit: " << e.message << "\n";
    return 2;
  }
  std::fflush(stdout);
  return 0;
}
