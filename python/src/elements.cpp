// Element level: formats, profiles, tensor-core model rows, and array conversion through the library's batch
// path (lowbit/batch.hpp), with the interpreter's lock released while it runs.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <tbb/blocked_range.h>
#include <tbb/info.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common.hpp"
#include "lowbit/batch.hpp"
#include "lowbit/exact.hpp"
#include "lowbit/names.hpp"
#include "lowbit/philox.hpp"
#include "lowbit/policy.hpp"
#include "lowbit/profile.hpp"
#include "lowbit/registry.hpp"
#include "lowbit/text.hpp"

namespace lowbit::python {

namespace {


// ---- formats ------------------------------------------------------------------------------------------

// A value significand * 2^exponent as a pair, which the package turns into a fractions.Fraction.
using Dyadic = std::pair<std::uint64_t, int>;

nb::dict format_info(const Format& f) {
  nb::dict d;
  d["name"] = f.name;
  std::vector<std::string> aliases;
  for (const FormatEntry& e : builtin_format_entries())
    if (e.format == &f)
      for (std::string_view a : e.aliases) aliases.emplace_back(a);
  d["aliases"] = aliases;
  d["bits"] = f.bits;
  d["exponent_bits"] = f.exponent_bits;
  d["mantissa_bits"] = f.mantissa_bits;
  d["bias"] = f.bias;
  d["is_signed"] = f.is_signed();
  d["twos_complement"] = f.signedness == Signedness::twos_complement;
  d["specials"] = specials_name(f);
  d["has_zero"] = f.has_zero;
  d["has_nan"] = f.has_nan();
  d["has_inf"] = f.has_inf();
  d["has_subnormals"] = f.has_subnormals();
  d["code_bits"] = f.code_bits();
  d["code_shift"] = f.code_shift;
  d["storage_bits"] = f.storage_bits();
  d["storage_bytes"] = storage_bytes(f);
  const std::uint64_t top = f.max_finite_magnitude();
  // The same constants as `lowbit formats --json` (tools/lowbit/main.cpp format_json): a fixed-point format
  // has no normal binade, a format without zero no subnormals.
  d["max"] = Dyadic{f.magnitude_significand(top), f.magnitude_exponent(top)};
  d["min_normal"] = f.is_fixed_point() ? nb::none() : nb::cast(Dyadic{1, f.emin()});
  d["min_subnormal"] = f.has_zero ? nb::cast(Dyadic{1, f.emin() - f.mantissa_bits}) : nb::none();
  return d;
}

std::vector<std::string> builtin_names() {
  std::vector<std::string> out;
  for (const FormatEntry& e : builtin_format_entries()) out.emplace_back(e.format->name);
  return out;
}

// Every spelling find_format accepts among the built-in rows, for suggestions of the closest names.
std::vector<std::string> known_spellings() {
  std::vector<std::string> out;
  for (const FormatEntry& e : builtin_format_entries()) {
    out.emplace_back(e.format->name);
    for (std::string_view a : e.aliases) out.emplace_back(a);
  }
  return out;
}

std::optional<std::string> canonical_format(const std::string& name) {
  const Format* f = find_format(name);
  if (!f) return std::nullopt;
  return std::string(f->name);
}

// ---- profiles and models ------------------------------------------------------------------------------

template <class E>
std::vector<std::string> mode_names(ModeMask mask) {
  std::vector<std::string> out;
  for (E v : all<E>())
    if (mask & (1u << static_cast<unsigned>(v))) out.emplace_back(name(v));
  return out;
}

// The fields of `lowbit profiles --json` (tools/lowbit/main.cpp rule_json, profile_json).
nb::dict rule_info(const TargetRule& r) {
  nb::dict d;
  d["format"] = r.target ? nb::cast(std::string(r.target->name)) : nb::none();
  d["roundings"] = mode_names<Rounding>(r.roundings);
  d["default_rounding"] = r.default_rounding ? nb::cast(std::string(name(*r.default_rounding))) : nb::none();
  d["overflows"] = mode_names<Overflow>(r.overflows);
  d["default_overflow"] = name(r.default_overflow);
  d["note"] = r.note;
  return d;
}

nb::list profile_infos() {
  nb::list out;
  for (const Profile& p : profiles()) {
    nb::dict d;
    d["name"] = p.name;
    d["description"] = p.description;
    const Quirks& q = p.quirks;
    nb::dict quirks;
    quirks["nan_to_no_nan"] = name(q.nan_to_no_nan);
    quirks["nan_style"] = name(q.nan_style);
    quirks["unsigned_negative"] = name(q.unsigned_negative);
    quirks["zero_into_no_zero"] = name(q.zero_into_no_zero);
    quirks["numpy_half_nan"] = q.numpy_half_nan;
    quirks["identity_copies"] = q.identity_copies;
    quirks["nozero_lowest_binade_rounds_up"] = q.nozero_lowest_binade_rounds_up;
    quirks["infinity_ignores_saturation"] = q.infinity_ignores_saturation;
    d["quirks"] = quirks;
    d["int8_sign_magnitude"] = p.int8_sign_magnitude;
    nb::list targets;
    for (const TargetRule& r : p.targets) targets.append(rule_info(r));
    d["targets"] = targets;
    d["other_targets"] = p.any_target ? nb::object(rule_info(p.fallback)) : nb::none();
    out.append(d);
  }
  return out;
}

// ---- policies -----------------------------------------------------------------------------------------

template <class E>
std::optional<E> parse_option(const char* argument, const std::optional<std::string>& text) {
  if (!text) return std::nullopt;
  const std::optional<E> v = parse<E>(*text);
  if (!v) value_error(argument, "'" + *text + "' is not one of " + choices<E>());
  return v;
}

// A policy resolved against a profile for a target, as `lowbit convert` resolves its options.
struct Resolved {
  Policy policy;
  const Format* target = nullptr;
  std::string profile;
};

Resolved resolve_policy(const std::string& to, const std::optional<std::string>& profile_name,
                        const std::optional<std::string>& rounding, const std::optional<std::string>& overflow,
                        const std::optional<std::string>& subnormals, const std::optional<std::string>& tininess,
                        std::optional<int> sr_bits) {
  const Format& target = require_format("to", to);
  PolicyRequest req;
  req.rounding = parse_option<Rounding>("rounding", rounding);
  req.overflow = parse_option<Overflow>("overflow", overflow);
  req.subnormals = parse_option<Subnormals>("subnormals", subnormals);
  req.tininess = parse_option<Tininess>("tininess", tininess);
  const Profile* profile = nullptr;
  if (profile_name) {
    profile = find_profile(*profile_name);
    if (!profile) {
      std::string names;
      for (const Profile& p : profiles()) names += (names.empty() ? "" : ", ") + std::string(p.name);
      value_error("profile", "'" + *profile_name + "' is not a profile (" + names + ")");
    }
  }
  req.sr_bits = sr_bits.value_or(0);
  std::string error;
  const std::optional<lowbit::Resolved> r = resolve(profile, target, req, error);
  if (!r) library_error(error);
  // The random-bit rules of `lowbit convert --sr-bits` (tools/lowbit/main.cpp run_convert).
  if (is_stochastic(r->policy.rounding)) {
    if (!sr_bits)
      value_error("sr_bits", std::string("rounding ") + name(r->policy.rounding) +
                                 " needs the number of random bits N (1.." + std::to_string(max_sr_bits) + ")");
    if (*sr_bits < 1 || *sr_bits > max_sr_bits)
      value_error("sr_bits", std::to_string(*sr_bits) + " is outside 1.." + std::to_string(max_sr_bits));
  } else if (sr_bits) {
    value_error("sr_bits", std::string("rounding ") + name(r->policy.rounding) +
                               " is not stochastic (sr-a, sr-b, sr-c take random bits)");
  }
  return Resolved{r->policy, r->target, profile ? profile->name : ""};
}

// ---- arrays -------------------------------------------------------------------------------------------

const Format& checked_codes(const Codes& codes, const char* argument, const std::string& format) {
  const Format& f = require_format("from", format);
  if (codes.itemsize() != storage_bytes(f))
    type_error(argument, std::to_string(codes.itemsize()) + "-byte items cannot hold " + f.name + " codes (" +
                             std::to_string(storage_bytes(f)) + " bytes each)");
  return f;
}

// The index of the first element that is not a code of `format` (a bit above its width, or one of tf32's
// low storage bits), or -1.  Formats that fill their storage have no such element.
long long first_invalid(const Codes& codes, const std::string& format) {
  const Format& f = checked_codes(codes, "codes", format);
  if (f.code_shift == 0 && static_cast<std::size_t>(f.code_bits()) == 8 * storage_bytes(f)) return -1;
  const std::size_t n = codes.size();
  nb::gil_scoped_release unlocked;
  for (std::size_t i = 0; i < n; ++i)
    if (!f.valid_code(load(codes, i))) return static_cast<long long>(i);
  return -1;
}

// Threads for n elements: `threads` when given (at least 1), else every core for arrays of 2^22 elements
// and more, one below that (where starting threads costs more than it saves).
int thread_count(std::size_t n, std::optional<int> threads) {
  if (threads) return std::max(*threads, 1);
  return n >= (std::size_t{1} << 22) ? tbb::info::default_concurrency() : 1;
}

// Run body(begin, end) over [0, n) in chunks on `threads` threads.  Each element's result depends on that
// element alone, so the split does not change any output.
template <class Body>
void in_chunks(std::size_t n, int threads, Body&& body) {
  constexpr std::size_t chunk = std::size_t{1} << 16;
  if (threads <= 1 || n <= chunk) {
    body(std::size_t{0}, n);
    return;
  }
  tbb::task_arena arena(threads);
  arena.execute([&] {
    tbb::parallel_for(tbb::blocked_range<std::size_t>(0, n, chunk),
                      [&](const tbb::blocked_range<std::size_t>& r) { body(r.begin(), r.end()); });
  });
}

// Convert codes of `from` into the resolved target; codes, flags and ternary values into the given arrays
// (flags and ternary optional).  Returns the index of the first element whose conversion the profile's
// implementation does not define (flag::unsupported), or -1.
long long convert_into(const Codes& in, const std::string& from_name, const Resolved& r, Out out,
                       std::optional<Out> flags, std::optional<Out> ternary, std::optional<Codes> rbits,
                       std::optional<int> threads) {
  const Format& from = checked_codes(in, "x", from_name);
  const Format& to = *r.target;
  const std::size_t n = in.size();
  if (out.size() != n || out.itemsize() != batch_code_bytes(to)) type_error("out", "wrong size or item width");
  if (flags && (flags->size() != n || flags->itemsize() != 1)) type_error("flags", "wrong size or item width");
  if (ternary && (ternary->size() != n || ternary->itemsize() != 1)) type_error("ternary", "wrong size or item width");
  const bool stochastic = is_stochastic(r.policy.rounding);
  if (stochastic && (!rbits || rbits->size() != n || rbits->itemsize() != 4))
    type_error("random_bits", "one 32-bit value per element is needed");
  // The unsupported flag (LLVM has no result for NaN into a format without NaN) is only seen in the flags:
  // compute them when the caller did not ask but the pair can raise it.
  std::vector<std::uint8_t> own_flags;
  std::uint8_t* flag_out = flags ? static_cast<std::uint8_t*>(flags->data()) : nullptr;
  const bool can_be_unsupported =
      r.policy.quirks.nan_to_no_nan == NanToNoNan::unsupported && !to.has_nan() && from.has_nan();
  if (!flag_out && can_be_unsupported) {
    own_flags.resize(n);
    flag_out = own_flags.data();
  }
  const auto* src = static_cast<const unsigned char*>(in.data());
  auto* dst = static_cast<unsigned char*>(out.data());
  auto* tern = ternary ? static_cast<std::int8_t*>(ternary->data()) : nullptr;
  const auto* rb = stochastic ? static_cast<const std::uint32_t*>(rbits->data()) : nullptr;
  const std::size_t in_bytes = in.itemsize(), out_bytes = out.itemsize();
  {
    nb::gil_scoped_release unlocked;
    in_chunks(n, thread_count(n, threads), [&](std::size_t b, std::size_t e) {
      convert_batch(from, src + b * in_bytes, e - b, to, r.policy, dst + b * out_bytes,
                    flag_out ? flag_out + b : nullptr, tern ? tern + b : nullptr, rb ? rb + b : nullptr);
    });
  }
  if (can_be_unsupported)
    for (std::size_t i = 0; i < n; ++i)
      if (flag_out[i] & flag::unsupported) return static_cast<long long>(i);
  return -1;
}

// The exact value of each code as an f64 (every value of a format that fits_f64 is one).
bool fits_f64(const Format& f) {
  if (f.mantissa_bits > 52) return false;
  if (f.emax() > 1023) return false;
  const int lowest = f.has_zero ? f.emin() - f.mantissa_bits : f.emin();
  return lowest >= -1074;
}

void decode_into(const Codes& in, const std::string& format, Out out, std::optional<int> threads) {
  const Format& f = checked_codes(in, "codes", format);
  if (!fits_f64(f))
    value_error("fmt", std::string("the values of ") + f.name + " are not all f64 values, so they cannot be decoded into f64");
  if (out.size() != in.size() || out.itemsize() != 8) type_error("out", "wrong size or item width");
  const std::size_t n = in.size();
  const auto* src = static_cast<const unsigned char*>(in.data());
  auto* dst = static_cast<unsigned char*>(out.data());
  const std::size_t in_bytes = in.itemsize();
  nb::gil_scoped_release unlocked;
  // Exact: f64 holds every value, so no policy choice matters but the NaN one (payloads kept).
  in_chunks(n, thread_count(n, threads), [&](std::size_t b, std::size_t e) {
    convert_batch(f, src + b * in_bytes, e - b, formats::f64, Policy{}, dst + b * 8, nullptr, nullptr, nullptr);
  });
}

// lowbit's stochastic-rounding stream (philox.hpp): the random bits of elements 0 .. n-1 under a seed.
nb::ndarray<nb::numpy, std::uint32_t, nb::ndim<1>> philox_bits(std::uint64_t seed, std::size_t n, int sr_bits) {
  if (sr_bits < 1 || sr_bits > max_sr_bits) value_error("sr_bits", std::to_string(sr_bits) + " is outside 1..32");
  std::vector<std::uint32_t> v(n);
  {
    nb::gil_scoped_release unlocked;
    for (std::size_t i = 0; i < n; ++i) v[i] = philox::sr_bits(seed, i, sr_bits);
  }
  return to_numpy(std::move(v));
}

// A DLPack tensor in host memory seen as unsigned integers of its item width (no copy), with the DLPack
// type code and bit width that say what the items are.
nb::tuple dlpack_codes(nb::object x) {
  nb::ndarray<nb::ro> t;
  if (!nb::try_cast(x, t)) type_error("x", "the object's __dlpack__ gave nothing this package can read");
  if (t.device_type() != nb::device::cpu::value)
    type_error("x", "the tensor is not in host memory (DLPack device " + std::to_string(t.device_type()) + ")");
  const nb::dlpack::dtype dt = t.dtype();
  if (dt.lanes != 1 || dt.bits % 8 != 0 || dt.bits == 0 || dt.bits > 64)
    type_error("x", "DLPack items of " + std::to_string(dt.bits) + " bits in " + std::to_string(dt.lanes) +
                        " lanes are not supported (whole bytes, one lane)");
  std::vector<std::size_t> shape(t.ndim());
  std::vector<std::int64_t> strides(t.ndim());
  for (std::size_t i = 0; i < t.ndim(); ++i) {
    shape[i] = t.shape(i);
    strides[i] = t.stride(i);
  }
  const nb::dlpack::dtype as_uint{static_cast<std::uint8_t>(nb::dlpack::dtype_code::UInt), dt.bits, 1};
  // The view keeps the producer's object (and so its memory) alive.
  nb::ndarray<nb::numpy, nb::ro> view(t.data(), t.ndim(), shape.data(), x, strides.data(), as_uint);
  return nb::make_tuple(view, static_cast<int>(dt.code), static_cast<int>(dt.bits));
}

}  // namespace

std::uint64_t load(const Codes& codes, std::size_t i) {
  const auto* p = static_cast<const unsigned char*>(codes.data());
  switch (codes.itemsize()) {
    case 1: return p[i];
    case 2: {
      std::uint16_t v;
      std::memcpy(&v, p + 2 * i, 2);
      return v;
    }
    case 4: {
      std::uint32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      return v;
    }
    default: {
      std::uint64_t v;
      std::memcpy(&v, p + 8 * i, 8);
      return v;
    }
  }
}

std::size_t storage_bytes(const Format& f) {
  const int b = f.storage_bits();
  return b <= 8 ? 1 : b <= 16 ? 2 : b <= 32 ? 4 : 8;
}

const Format& require_format(std::string_view argument, const std::string& name) {
  const Format* f = find_format(name);
  if (!f) value_error(argument, "'" + name + "' is not a format (see lowbit.formats())");
  return *f;
}

void library_error(const std::string& message) {
  // "--name: why" or "--name value: why" -> "name: why" or "name='value': why".
  if (message.rfind("--", 0) == 0) {
    const std::size_t colon = message.find(':');
    if (colon != std::string::npos) {
      std::string head = message.substr(2, colon - 2);
      std::string value;
      if (const std::size_t space = head.find(' '); space != std::string::npos) {
        value = head.substr(space + 1);
        head.resize(space);
      }
      std::replace(head.begin(), head.end(), '-', '_');
      const std::string argument = value.empty() ? head : head + "='" + value + "'";
      throw nb::value_error((argument + message.substr(colon)).c_str());
    }
  }
  throw nb::value_error(message.c_str());
}

void bind_elements(nb::module_& m) {
  m.def("builtin_formats", &builtin_names, "The built-in format names, in table order.");
  m.def("known_spellings", &known_spellings, "Every name and alias of the built-in formats.");
  m.def("canonical_format", &canonical_format, nb::arg("name"),
        "The canonical name of a format name or alias (case-insensitive; P3109 and parametric names too), or None.");
  m.def(
      "format_info", [](const std::string& name) { return format_info(require_format("name", name)); },
      nb::arg("name"), "The constants of a format as a dict; values as (significand, exponent) pairs.");
  m.def("profiles", &profile_infos, "Every profile as the dicts of `lowbit profiles --json`.");
  m.def(
      "choices",
      [](const std::string& kind) -> std::vector<std::string> {
        std::vector<std::string> out;
        auto names = [&](auto tag) {
          for (auto v : all<decltype(tag)>()) out.emplace_back(name(v));
        };
        if (kind == "rounding") names(Rounding{});
        else if (kind == "overflow") names(Overflow{});
        else if (kind == "subnormals") names(Subnormals{});
        else if (kind == "tininess") names(Tininess{});
        else value_error("kind", "'" + kind + "' is not rounding, overflow, subnormals or tininess");
        return out;
      },
      nb::arg("kind"), "The names an element-policy option takes.");

  nb::class_<Resolved>(m, "Policy", "An element policy resolved for a target (see resolve).")
      .def_prop_ro("target", [](const Resolved& r) { return std::string(r.target->name); })
      .def_prop_ro("code_bytes", [](const Resolved& r) { return batch_code_bytes(*r.target); })
      .def_prop_ro("rounding", [](const Resolved& r) { return std::string(name(r.policy.rounding)); })
      .def_prop_ro("overflow", [](const Resolved& r) { return std::string(name(r.policy.overflow)); })
      .def_prop_ro("subnormals", [](const Resolved& r) { return std::string(name(r.policy.subnormals)); })
      .def_prop_ro("tininess", [](const Resolved& r) { return std::string(name(r.policy.tininess)); })
      .def_prop_ro("sr_bits", [](const Resolved& r) { return r.policy.sr_bits; })
      .def_prop_ro("stochastic", [](const Resolved& r) { return is_stochastic(r.policy.rounding); })
      .def_prop_ro("profile", [](const Resolved& r) { return r.profile; });
  m.def("resolve", &resolve_policy, nb::arg("to"), nb::arg("profile").none(), nb::arg("rounding").none(),
        nb::arg("overflow").none(), nb::arg("subnormals").none(), nb::arg("tininess").none(),
        nb::arg("sr_bits").none(),
        "Resolve element-policy options against a profile for a target, as `lowbit convert` does; ValueError "
        "naming the option otherwise.");
  m.def("first_invalid", &first_invalid, nb::arg("codes"), nb::arg("format"),
        "The index of the first element that is not a code of the format, or -1.");
  m.def("convert_into", &convert_into, nb::arg("x"), nb::arg("from_format"), nb::arg("policy"), nb::arg("out"),
        nb::arg("flags").none(), nb::arg("ternary").none(), nb::arg("random_bits").none(), nb::arg("threads").none(),
        "Convert 1-D contiguous codes through convert_batch into `out` (flags and ternary optional); returns the "
        "index of the first element the profile leaves undefined, or -1.");
  m.def("decode_into", &decode_into, nb::arg("codes"), nb::arg("format"), nb::arg("out"), nb::arg("threads").none(),
        "The exact f64 value of each code, into `out`.");
  m.def(
      "code_text",
      [](const std::string& format, std::uint64_t code) {
        const Format& f = require_format("fmt", format);
        if (!f.valid_code(code)) value_error("code", std::to_string(code) + " is not a " + f.name + " code");
        return exact::code_text(f, code);
      },
      nb::arg("format"), nb::arg("code"), "The exact value of a code as decimal text, or nan / inf / -inf / -0.");
  m.def(
      "code_and_value",
      [](const std::string& format, std::uint64_t code) { return code_and_value(require_format("fmt", format), code); },
      nb::arg("format"), nb::arg("code"),
      "\"0x3c (1.5)\": a code and its exact value, short (s*2^e) when long, as `lowbit check` reports mismatches.");
  m.def(
      "simd_target", [] { return std::string(batch_target_name()); },
      "The instruction set the batch path dispatches to on this machine (for example AVX3).");
  m.def("philox_bits", &philox_bits, nb::arg("seed"), nb::arg("n"), nb::arg("sr_bits"),
        "The random bits lowbit's stochastic rounding draws for elements 0..n-1 under `seed` (Philox4x32-10).");
  m.def("dlpack_codes", &dlpack_codes, nb::arg("x"),
        "A host DLPack tensor as an unsigned-integer numpy view without a copy, with its DLPack type code and bits.");
}

}  // namespace lowbit::python
