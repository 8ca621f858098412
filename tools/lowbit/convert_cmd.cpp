// `lowbit convert`: values from stdin (bits of --from, text literals, or packed --raw) into codes of --to.
//
// It streams, so that a pipeline of any length runs in bounded memory: each result is written as its
// input is read, and the first bad line (or --raw value) stops the command with exit 2 and a message
// naming its 1-based line number (or byte offset).  Everything written before it is the conversion of
// the lines before it, complete (flushed before the message); nothing after it is converted.  Validating
// the whole input first would mean holding all of it (README.md, "Exit codes and stability").
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli_util.hpp"
#include "commands.hpp"
#include "lowbit/batch.hpp"
#include "lowbit/convert.hpp"
#include "lowbit/exact.hpp"
#include "lowbit/names.hpp"
#include "lowbit/policy.hpp"
#include "lowbit/profile.hpp"
#include "lowbit/registry.hpp"
#include "lowbit/text.hpp"

namespace lowbit::cli {

namespace {

using json = nlohmann::json;

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
  // The longest line accepted: 1 MiB, room for any decimal an input value needs (an f64's exact decimal has at
  // most 767 significant digits, 1074 places after the point).
  static constexpr std::size_t max_line_bytes = std::size_t{1} << 20;
  // Set when next() handed out the first max_line_bytes and more of a line that had not ended.
  bool too_long() const { return too_long_; }

  bool next(std::string& line) {
    line.clear();
    for (;;) {
      if (pos_ == len_) {
        if (eof_) return done(line);
        len_ = std::fread(buf_.data(), 1, buf_.size(), stdin);
        pos_ = 0;
        if (len_ == 0) {
          eof_ = true;
          return done(line);
        }
      }
      const char* start = buf_.data() + pos_;
      const void* nl = std::memchr(start, '\n', len_ - pos_);
      if (nl) {
        const std::size_t n = static_cast<std::size_t>(static_cast<const char*>(nl) - start);
        line.append(start, n);
        pos_ += n + 1;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        too_long_ = line.size() > max_line_bytes;
        return true;
      }
      line.append(start, len_ - pos_);
      pos_ = len_;
      // A value line is a few dozen bytes; a line without end (a stream with no newline) is refused once it
      // passes the bound rather than held whole in memory.
      if (line.size() > max_line_bytes) {
        too_long_ = true;
        return true;
      }
    }
  }

 private:
  bool done(const std::string& line) {
    too_long_ = line.size() > max_line_bytes;
    return !line.empty();
  }

  std::vector<char> buf_ = std::vector<char>(1u << 20);
  std::size_t pos_ = 0, len_ = 0;
  bool eof_ = false, too_long_ = false;
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

// The one wording of a result the profile's implementation does not define (flag::unsupported: LLVM asserts
// on NaN into FP4/FP6), for text and --raw alike; each mode puts its own position (line, byte offset) first.
std::string no_defined_result(const lowbit::Profile* profile, const std::string& input, const Format& to) {
  return std::string("profile ") + (profile ? profile->name : "(none)") + " has no defined result for " + input +
         " into " + to.name;
}

// --raw: packed little-endian input values of `from`, one code per 1, 2, 4 or 8 bytes out.  An input without a
// defined result stops the run as in text mode: the codes before it are written, then the error.
void convert_raw(const Format& from, const Format& to, const lowbit::Policy& policy, const lowbit::Profile* profile,
                 Out& out) {
  const int in_w = byte_width(from.storage_bits());
  const int out_w = byte_width(to.storage_bits());
  // Sources of at most 16 bits: every conversion once, then a table look-up per value.
  std::vector<std::uint64_t> table;
  std::vector<bool> valid, undefined;
  if (in_w <= 2) {
    const std::size_t n = std::size_t{1} << (8 * in_w);
    table.resize(n);
    valid.resize(n);
    undefined.resize(n);
    for (std::size_t c = 0; c < n; ++c) {
      valid[c] = from.valid_code(c);
      if (!valid[c]) continue;
      const Result r = lowbit::convert(from, c, to, policy);
      table[c] = r.code;
      undefined[c] = (r.flags & lowbit::flag::unsupported) != 0;
    }
  }
  const bool use_batch = in_w == 4 && from.code_bits() == 32 && from.code_shift == 0 &&
                         lowbit::batch_code_bytes(to) == static_cast<std::size_t>(out_w) &&
                         lowbit::batch_supported(from, to, policy);
  // Only NaN into a format without NaN can be undefined (rules::nan_result); the batch path then reports flags.
  const bool may_be_undefined = policy.quirks.nan_to_no_nan == lowbit::NanToNoNan::unsupported && !to.has_nan();
  std::vector<unsigned char> in(std::size_t{1} << 22);
  std::vector<unsigned char> res;
  std::vector<std::uint8_t> batch_flags;
  std::size_t carry = 0;       // bytes of an incomplete value kept from the previous block
  std::uint64_t offset = 0;    // byte offset of in[0] in the input stream
  auto stop_undefined = [&](std::size_t i, std::uint64_t v) {
    out.put_bytes(res.data(), i * static_cast<std::size_t>(out_w));
    out.flush();
    throw InputError("--raw: the value at byte offset " + std::to_string(offset + i * static_cast<std::size_t>(in_w)) +
                     ": " + no_defined_result(profile, lowbit::hex(from, v), to));
  };
  for (;;) {
    const std::size_t got = std::fread(in.data() + carry, 1, in.size() - carry, stdin);
    const std::size_t have = carry + got;
    const std::size_t whole = have / static_cast<std::size_t>(in_w);
    res.resize(whole * static_cast<std::size_t>(out_w));
    // Wider sources (f32): the vectorised batch path when it covers the pair and every input bit
    // pattern is a code (f32 and the like: code_bits fills the storage, no code shift).
    if (table.empty() && use_batch) {
      if (may_be_undefined) batch_flags.resize(whole);
      lowbit::convert_batch(from, in.data(), whole, to, policy, res.data(),
                            may_be_undefined ? batch_flags.data() : nullptr, nullptr, nullptr);
      for (std::size_t i = 0; may_be_undefined && i < whole; ++i) {
        if (!(batch_flags[i] & lowbit::flag::unsupported)) continue;
        std::uint64_t v = 0;
        for (int b = in_w - 1; b >= 0; --b)
          v = (v << 8) | in[i * static_cast<std::size_t>(in_w) + static_cast<std::size_t>(b)];
        stop_undefined(i, v);
      }
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
            throw InputError("--raw: the value at byte offset " + std::to_string(offset + i * static_cast<std::size_t>(in_w)) +
                             " (" + lowbit::hex(from, v) + ") is too wide for " + from.name);
          }
          if (undefined[v]) stop_undefined(i, v);
          code = table[v];
        } else {
          if (!from.valid_code(v)) {
            out.put_bytes(res.data(), i * static_cast<std::size_t>(out_w));
            out.flush();
            throw InputError("--raw: the value at byte offset " + std::to_string(offset + i * static_cast<std::size_t>(in_w)) +
                             " (" + lowbit::hex(from, v) + ") is not a valid " + from.name + " code");
          }
          const Result r = lowbit::convert(from, v, to, policy);
          if (r.flags & lowbit::flag::unsupported) stop_undefined(i, v);
          code = r.code;
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
    throw InputError("--raw: the input ends with a partial value: " + std::to_string(carry) + " byte(s) at byte offset " +
                     std::to_string(offset) + ", a " + from.name + " value takes " + std::to_string(in_w));
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
      throw InputError("--rounding: unknown rounding mode '" + o.rounding + "' (rne, rna, rtz, rup, rdn, rto, sr-a, sr-b, sr-c)");
  }
  if (!o.overflow.empty()) {
    req.overflow = lowbit::parse<lowbit::Overflow>(o.overflow);
    if (!req.overflow) throw InputError("--overflow: unknown overflow mode '" + o.overflow + "' (satfinite, satpropagate, nosat)");
  }
  if (!o.subnormals.empty()) {
    req.subnormals = lowbit::parse<lowbit::Subnormals>(o.subnormals);
    if (!req.subnormals) throw InputError("--subnormals: unknown mode '" + o.subnormals + "' (keep, ftz, daz, ftz-daz)");
  }
  if (!o.tininess.empty()) {
    req.tininess = lowbit::parse<lowbit::Tininess>(o.tininess);
    if (!req.tininess) throw InputError("--tininess: unknown value '" + o.tininess + "' (after, before)");
  }
  const lowbit::Profile* profile = nullptr;
  if (!o.profile.empty()) {
    profile = lowbit::find_profile(o.profile);
    if (!profile) {
      std::string names;
      for (const lowbit::Profile& p : lowbit::profiles()) append(names, ", ", p.name);
      throw InputError("--profile: unknown profile '" + o.profile + "' (" + names + ")");
    }
  }
  req.sr_bits = o.sr_bits;
  std::string error, argument;
  const std::optional<lowbit::Resolved> resolved = lowbit::resolve(profile, to_requested, req, error, &argument);
  if (!resolved) throw InputError("--" + argument + ": " + error);
  const lowbit::Policy& policy = resolved->policy;
  const Format& to = *resolved->target;
  const bool stochastic = lowbit::is_stochastic(policy.rounding);
  if (stochastic) {
    if (!o.sr_bits_given)
      throw InputError(std::string("--sr-bits: rounding ") + lowbit::name(policy.rounding) +
                       " needs the number of random bits N (1.." + std::to_string(lowbit::max_sr_bits) + ")");
    if (o.sr_bits < 1 || o.sr_bits > lowbit::max_sr_bits)
      throw InputError("--sr-bits: " + std::to_string(o.sr_bits) + " is outside 1.." + std::to_string(lowbit::max_sr_bits));
  } else if (o.sr_bits_given) {
    throw InputError(std::string("--sr-bits: rounding ") + lowbit::name(policy.rounding) +
                     " is not stochastic (sr-a, sr-b, sr-c take random bits)");
  }
  if (o.raw) {
    if (o.flags) throw InputError("--raw cannot be combined with --flags");
    if (o.trace) throw InputError("--raw cannot be combined with --trace");
    if (text) throw InputError("--raw cannot be combined with --from text");
    if (stochastic) throw InputError(std::string("--raw cannot be combined with a stochastic rounding (") +
                                     lowbit::name(policy.rounding) + ")");
    Out out;
    convert_raw(*from, to, policy, profile, out);
    return;
  }

  Out out;
  LineReader in;
  std::string line;
  std::uint64_t number = 0;
  const std::uint64_t r_limit = stochastic ? (std::uint64_t{1} << policy.sr_bits) : 0;
  auto fail = [&](const std::string& why) {
    out.flush();
    throw InputError("line " + std::to_string(number) + ": " + why);
  };
  while (in.next(line)) {
    ++number;
    if (in.too_long())
      fail("longer than " + std::to_string(LineReader::max_line_bytes) + " bytes (a value line is a few dozen): '" +
           lowbit::echo_text(std::string_view(line).substr(0, lowbit::echo_max_bytes)) + "...'");
    const std::vector<std::string_view> f = fields(line);
    if (f.empty()) fail("empty line (expected a value)");
    if (f.size() > 2) fail("too many fields in '" + lowbit::echo_text(line) + "'");
    std::uint64_t rbits = 0;
    if (stochastic) {
      if (f.size() < 2) fail("random bits missing: rounding " + std::string(lowbit::name(policy.rounding)) +
                             " needs a second field of " + std::to_string(policy.sr_bits) + " random bits in 0x hex");
      bool wide = false;
      const std::optional<std::uint64_t> r = lowbit::parse_hex(f[1], lowbit::HexPrefix::required, &wide);
      if (!r) fail("random bits '" + lowbit::echo_text(f[1]) + "' are not 0x hex");
      if (wide || *r >= r_limit)
        fail("random bits " + lowbit::echo_text(f[1]) + " are not below 2^" + std::to_string(policy.sr_bits));
      rbits = *r;
    } else if (f.size() == 2) {
      fail("random bits '" + lowbit::echo_text(f[1]) + "' present, but rounding " + lowbit::name(policy.rounding) +
           " is not stochastic");
    }
    Result r;
    lowbit::exact::Trace trace;
    std::string shown =
        lowbit::echo_text(f[0]);  // the input as the error names it: as typed, or the code as --raw names it
    if (text) {
      const std::optional<lowbit::exact::Value> x = lowbit::exact::parse(f[0]);
      if (!x) fail("'" + lowbit::echo_text(f[0]) + "' is not a number (decimal, hex-float, nan, inf)");
      r = lowbit::exact::round(to, *x, policy, rbits, o.trace ? &trace : nullptr);
    } else {
      bool wide = false;
      const std::optional<std::uint64_t> v = lowbit::parse_hex(f[0], lowbit::HexPrefix::required, &wide);
      if (!v) fail("'" + lowbit::echo_text(f[0]) + "' is not 0x hex bits of " + from->name);
      if (wide || !from->valid_code(*v))
        fail(code_problem(*from, f[0]));
      shown = lowbit::hex(*from, *v);
      if (o.trace) {
        r = lowbit::exact::round(to, lowbit::exact::from_code(*from, *v, lowbit::flushes_inputs(policy.subnormals)),
                                 policy, rbits, &trace);
      } else {
        r = lowbit::convert(*from, *v, to, policy, rbits);
      }
    }
    if (r.flags & lowbit::flag::unsupported) fail(no_defined_result(profile, shown, to));
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

void add_convert(CLI::App& app) {
  auto co = std::make_shared<ConvertOptions>();
  auto* sub = app.add_subcommand(
      "convert",
      "Convert values read from stdin, one per line (0x hex bits of --from, or text literals); streams: a bad "
      "line stops it (exit 2, naming the line) after the results of the lines before it");
  sub->add_option("--to", co->to, "Target format")->required();
  sub->add_option("--from", co->from, "Source format, or `text` for decimal / hex-float literals (default f32)");
  sub->add_option("--rounding", co->rounding, "rne, rna, rtz, rup, rdn, rto, sr-a, sr-b, sr-c (default rne)");
  sub->add_option("--overflow", co->overflow, "satfinite, satpropagate, nosat (default nosat)");
  sub->add_option("--subnormals", co->subnormals, "keep, ftz, daz, ftz-daz (default keep)");
  sub->add_option("--tininess", co->tininess, "after (default) or before rounding");
  sub->add_option("--profile", co->profile, "ocp, cuda, ml_dtypes, llvm, te, torchao, microxcaling, p3109");
  auto* sr = sub->add_option("--sr-bits", co->sr_bits, "Random bits N per value for sr-a/sr-b/sr-c (1..32)")
                 ->check(whole_number(0, 32));
  sub->add_flag("--flags", co->flags, "Print the raised flags after each code");
  sub->add_flag("--raw", co->raw, "Packed little-endian binary in and out");
  sub->add_flag("--trace", co->trace, "Explain each conversion");
  sub->callback([co, sr] {
    co->sr_bits_given = sr->count() > 0;
    guarded([&] { run_convert(*co); });
  });
}

}  // namespace lowbit::cli
