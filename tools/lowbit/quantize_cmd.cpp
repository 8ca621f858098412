// `lowbit quantize` and `lowbit dequantize`: the scaling schemes from the command line.
// Text mode (stable contract): f32 (or bf16/f16) bit patterns in, one JSON object out.
#include <bit>
#include <cfloat>
#include <cmath>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli_util.hpp"
#include "commands.hpp"
#include "lowbit/convert.hpp"
#include "lowbit/exact.hpp"
#include "lowbit/philox.hpp"
#include "lowbit/profile.hpp"
#include "lowbit/registry.hpp"
#include "lowbit/scale.hpp"

namespace lowbit::cli {

namespace {

using json = nlohmann::json;
namespace S = scale;

struct QuantizeOptions {
  std::string scheme, element, direction = "row", scale_rule, scale_format, nonfinite, variant = "standard",
                            zero_scale = "kernel", profile, rounding, sr_bits_file, state, in, out, shape,
                            in_format = "f32", amax_nan = "ignore";
  int block = 0, axis = -1, sr_bits = 0;
  long long sr_seed = -1;
  bool hadamard = false;
};

struct DequantizeOptions {
  std::string in = "-", out = "-";
  bool exact = false;
};

// Parse "R,C" or "N".
std::pair<int, int> parse_shape(const std::string& s, std::size_t count) {
  if (s.empty()) return {1, static_cast<int>(count)};
  const auto comma = s.find(',');
  try {
    if (comma == std::string::npos) return {1, std::stoi(s)};
    return {std::stoi(s.substr(0, comma)), std::stoi(s.substr(comma + 1))};
  } catch (...) {
    throw InputError("--shape: '" + s + "' is not R,C");
  }
}

std::vector<float> read_values(const std::string& text, const Format& in_format) {
  std::vector<float> v;
  std::istringstream is(text);
  std::string tok;
  std::size_t index = 0;
  while (is >> tok) {
    ++index;
    const std::string what = "--in: value " + std::to_string(index);
    const std::uint64_t c = parse_hex_field(json(tok), what, in_format.storage_bits());
    const Result r = convert(in_format, c, formats::f32, Policy{});  // exact: f16 and bf16 widen exactly
    v.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(r.code)));
  }
  return v;
}

json hex_list(const std::vector<std::uint64_t>& v, const Format& f) {
  json a = json::array();
  for (std::uint64_t c : v) a.push_back(hex(f, c));
  return a;
}

S::DelayedState read_state(const std::string& path) {
  S::DelayedState st;
  if (path.empty()) return st;
  std::ifstream probe(path);
  if (!probe) return st;  // a new state file
  json j;
  try {
    j = json::parse(read_all(path, "--state"));
  } catch (const json::parse_error& e) {
    throw InputError("--state: '" + path + "': malformed JSON at byte " + std::to_string(e.byte));
  }
  try {
    for (const json& h : j.at("history"))
      st.history.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(parse_hex_field(h, "--state: history", 32))));
    st.scale = std::bit_cast<float>(static_cast<std::uint32_t>(parse_hex_field(j.at("scale"), "--state: scale", 32)));
    st.max_algorithm = j.value("algorithm", std::string("max")) != "most_recent";
    st.margin = j.value("margin", 0);
  } catch (const json::exception&) {
    throw InputError("--state: '" + path + "' needs \"history\" and \"scale\"");
  }
  if (st.history.empty()) throw InputError("--state: '" + path + "': the history is empty");
  return st;
}

json state_json(const S::DelayedState& st) {
  json h = json::array();
  for (float x : st.history) h.push_back(hex(std::bit_cast<std::uint32_t>(x), 8));
  return {{"history", h}, {"scale", hex(std::bit_cast<std::uint32_t>(st.scale), 8)},
          {"algorithm", st.max_algorithm ? "max" : "most_recent"}, {"margin", st.margin}};
}

S::Options build_options(const QuantizeOptions& o, std::string& profile_name) {
  S::Options so;
  const auto scheme = S::parse_scheme(o.scheme == "block1x128" || o.scheme == "block128x128" ? "block" : o.scheme);
  if (!scheme)
    throw InputError("--scheme: unknown scheme '" + o.scheme +
                     "' (tensor, delayed, channel, token, block1x128, block128x128, block, mx, nvfp4, nvfp4-2d, "
                     "nvfp4-1level)");
  so.scheme = *scheme;
  if (o.scheme == "block128x128") so.block_rows = 128;
  if (!o.element.empty()) {
    so.element = find_format(o.element);
    if (!so.element) throw InputError("--element: unknown format '" + o.element + "'");
  }
  so.block = o.block;
  if (o.scheme == "block128x128" && o.block == 0) so.block = 128;
  const Profile* prof = nullptr;
  if (!o.profile.empty()) {
    prof = find_profile(o.profile);
    if (!prof) throw InputError("--profile: unknown profile '" + o.profile + "'");
    profile_name = prof->name;
  }
  // Profile defaults for the schemes (README "Scaling schemes"): te uses rceil MX scales, power-of-two
  // block scales and its fmaxf amax for non-finite blocks; torchao and ocp use floor.
  if (prof && std::string(prof->name) == "te") {
    so.mx_rule = S::MxRule::rceil;
    if (so.scheme == S::Scheme::block) so.scale_format = S::ScaleFormat::pow2;
    so.nonfinite = S::NonFinite::amax;
  }
  if (!o.scale_rule.empty()) {
    const std::string& r = o.scale_rule;
    if (r == "floor") so.mx_rule = S::MxRule::floor;
    else if (r == "ceil") so.mx_rule = S::MxRule::ceil;
    else if (r == "even") so.mx_rule = S::MxRule::even;
    else if (r == "rceil") so.mx_rule = S::MxRule::rceil;
    else if (r == "rne") so.mx_rule = S::MxRule::rne;
    else throw InputError("--scale-rule: unknown rule '" + r + "' (floor, ceil, even, rceil, rne)");
    if (so.scheme != S::Scheme::mx) throw InputError("--scale-rule: applies to the mx scheme");
  }
  if (!o.scale_format.empty()) {
    if (o.scale_format == "f32") so.scale_format = S::ScaleFormat::f32;
    else if (o.scale_format == "pow2") so.scale_format = S::ScaleFormat::pow2;
    else if (o.scale_format == "ue8m0-packed") so.scale_format = S::ScaleFormat::ue8m0_packed;
    else throw InputError("--scale-format: unknown '" + o.scale_format + "' (f32, pow2, ue8m0-packed)");
  }
  if (!o.nonfinite.empty()) {
    if (o.nonfinite == "scale-nan") so.nonfinite = S::NonFinite::scale_nan;
    else if (o.nonfinite == "propagate") so.nonfinite = S::NonFinite::propagate;
    else if (o.nonfinite == "amax") so.nonfinite = S::NonFinite::amax;
    else throw InputError("--nonfinite: unknown '" + o.nonfinite + "' (scale-nan, propagate, amax)");
  }
  if (o.variant == "fast-math") so.variant = S::Variant::fast_math;
  else if (o.variant == "4over6")
    throw InputError("--variant: 4over6 is not implemented yet (its per-block rule must first be confirmed against "
                     "Transformer Engine's kernel)");
  else if (o.variant != "standard") throw InputError("--variant: unknown '" + o.variant + "' (standard, fast-math)");
  if (o.zero_scale == "reference") so.zero_scale = S::ZeroScale::reference;
  else if (o.zero_scale != "kernel") throw InputError("--zero-scale: unknown '" + o.zero_scale + "' (kernel, reference)");
  if (o.amax_nan == "propagate") so.amax_propagates_nan = true;
  else if (o.amax_nan != "ignore") throw InputError("--amax-nan: unknown '" + o.amax_nan + "' (ignore, propagate)");
  so.hadamard = o.hadamard;
  if (const std::string e = S::normalize(so); !e.empty()) throw InputError(e);
  // The element policy: the profile's rounding and quirks; schemes always clamp to the element's range.
  PolicyRequest req;
  if (!o.rounding.empty()) {
    req.rounding = parse_rounding(o.rounding);
    if (!req.rounding) throw InputError("--rounding: unknown rounding mode '" + o.rounding + "'");
  }
  req.overflow = Overflow::satfinite;
  req.sr_bits = o.sr_bits;
  std::string err;
  const auto resolved = resolve(prof, *so.element, req, err);
  if (!resolved) throw InputError(err);
  so.element = resolved->target;
  so.element_policy = resolved->policy;
  return so;
}

void run_quantize(const QuantizeOptions& o) {
  if (o.in.empty()) throw InputError("--in: required");
  if (o.out.empty()) throw InputError("--out: required");
  if (o.in != "-" || o.out != "-")
    throw InputError("--in/--out: only '-' (text mode) is supported so far; .npy files are planned");
  std::string profile_name;
  S::Options so = build_options(o, profile_name);
  const Format* in_format = find_format(o.in_format);
  if (!in_format || (in_format != &formats::f32 && in_format != &formats::bf16 && in_format != &formats::f16))
    throw InputError("--in-format: expected f32, bf16 or f16");
  const std::vector<float> values = read_values(read_all("-", "--in"), *in_format);
  const auto [rows, cols] = parse_shape(o.shape, values.size());
  if (rows < 1 || cols < 1 || static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols) != values.size())
    throw InputError("--shape: " + std::to_string(rows) + "x" + std::to_string(cols) + " does not hold the " +
                     std::to_string(values.size()) + " values read");
  S::Tensor x{rows, cols, values};
  if (o.axis != -1 && o.axis != 0 && o.axis != 1) throw InputError("--axis: 0 or 1");
  const bool along_rows = o.axis != 0;  // blocks along the last axis unless --axis 0

  const bool stochastic = is_stochastic(so.element_policy.rounding);
  std::vector<std::uint32_t> rbits;
  if (stochastic) {
    if (o.sr_bits < 1 || o.sr_bits > max_sr_bits) throw InputError("--sr-bits: 1..32 with a stochastic rounding");
    if ((o.sr_seed >= 0) == !o.sr_bits_file.empty())
      throw InputError("--sr-seed / --sr-bits-file: a stochastic rounding needs exactly one of them");
    if (o.sr_seed >= 0) {
      for (std::size_t i = 0; i < values.size(); ++i)
        rbits.push_back(philox::sr_bits(static_cast<std::uint64_t>(o.sr_seed), i, o.sr_bits));
    } else {
      std::istringstream is(read_all(o.sr_bits_file, "--sr-bits-file"));
      std::string tok;
      while (is >> tok) {
        const std::string what = "--sr-bits-file: value " + std::to_string(rbits.size() + 1);
        const std::uint64_t r = parse_hex_field(json(tok), what, o.sr_bits);
        rbits.push_back(static_cast<std::uint32_t>(r));
      }
      if (rbits.size() != values.size())
        throw InputError("--sr-bits-file: " + std::to_string(rbits.size()) + " values for " +
                         std::to_string(values.size()) + " elements");
    }
  } else if (o.sr_bits != 0 || o.sr_seed >= 0 || !o.sr_bits_file.empty()) {
    throw InputError("--sr-bits: only with a stochastic rounding (sr-a, sr-b, sr-c)");
  }
  if (!o.state.empty() && so.scheme != S::Scheme::delayed) throw InputError("--state: applies to the delayed scheme");

  auto one_direction = [&](const S::Tensor& t, const std::vector<std::uint32_t>* rb, S::DelayedState* st) {
    return S::quantize(t, so, rb && !rb->empty() ? rb : nullptr, st);
  };
  // Random bits follow the element order of the tensor being quantized.
  auto transpose_bits = [&](const std::vector<std::uint32_t>& r, int R, int C) {
    std::vector<std::uint32_t> t(r.size());
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < C; ++j) t[static_cast<std::size_t>(j) * R + i] = r[static_cast<std::size_t>(i) * C + j];
    return t;
  };

  json out;
  out["scheme"] = o.scheme;
  out["element"] = so.element->name;
  out["shape"] = rows == 1 && o.shape.find(',') == std::string::npos ? json::array({cols}) : json::array({rows, cols});
  if (!profile_name.empty()) out["profile"] = profile_name;
  S::DelayedState st = read_state(o.state);
  const bool want_row = o.direction == "row" || o.direction == "both";
  const bool want_col = o.direction == "col" || o.direction == "both";
  if (!want_row && !want_col) throw InputError("--direction: row, col or both");

  auto emit = [&](const S::Quantized& q, const std::string& prefix, bool transposed_back) {
    std::vector<std::uint64_t> codes = q.codes;
    if (transposed_back) {  // back to the original row-major order
      codes.assign(q.codes.size(), 0);
      for (int i = 0; i < q.rows; ++i)
        for (int j = 0; j < q.cols; ++j)
          codes[static_cast<std::size_t>(j) * q.rows + i] = q.codes[static_cast<std::size_t>(i) * q.cols + j];
    }
    out[prefix + "scales"] = hex_list(q.scales, *q.scale_format);
    out[prefix + "codes"] = hex_list(codes, *q.element);
    out[prefix + "block"] = json::array({q.block_rows, q.block_cols});
    if (q.tensor_scale) out[prefix + "tensor_scale"] = hex(*q.tensor_scale, 8);
    if (!q.packed_scales.empty()) {
      json p = json::array();
      for (std::uint32_t w : q.packed_scales) p.push_back(hex(w, 8));
      out[prefix + "packed_scales"] = p;
    }
  };
  if (want_row) {
    S::Quantized q;
    if (along_rows) {
      q = one_direction(x, &rbits, &st);
      emit(q, "", false);
    } else {
      const auto tb = rbits.empty() ? rbits : transpose_bits(rbits, rows, cols);
      q = one_direction(S::transpose(x), &tb, &st);
      emit(q, "", true);
      out["axis"] = 0;
    }
    if (q.tensor_scale) out["tensor_scale"] = hex(*q.tensor_scale, 8);
  }
  if (want_col) {
    // The columnwise copy (TE's backward-pass layout): the transpose, quantized with its own scales,
    // its codes row-major over the transpose.
    const auto tb = rbits.empty() ? rbits : transpose_bits(rbits, rows, cols);
    S::DelayedState col_state = st;
    const S::Quantized q = one_direction(S::transpose(x), &tb, want_row ? &col_state : &st);
    emit(q, "col_", false);
  }
  if (so.scheme == S::Scheme::delayed) {
    const json sj = state_json(st);
    out["amax_history"] = sj["history"];
    out["scale"] = sj["scale"];
    if (!o.state.empty()) write_all(o.state, sj.dump(1) + "\n", "--state");
  }
  write_all(o.out, out.dump() + "\n", "--out");
}

void run_dequantize(const DequantizeOptions& o) {
  json j;
  try {
    j = json::parse(read_all(o.in, "--in"));
  } catch (const json::parse_error& e) {
    throw InputError("--in: malformed JSON at byte " + std::to_string(e.byte));
  }
  if (!j.is_object()) throw InputError("--in: expected the JSON object that quantize writes");
  auto need = [&](const char* key) -> const json& {
    if (!j.contains(key)) throw InputError(std::string("--in: \"") + key + "\" is missing");
    return j.at(key);
  };
  S::Quantized q;
  const std::string scheme = need("scheme").get<std::string>();
  const auto sc = S::parse_scheme(scheme == "block1x128" || scheme == "block128x128" ? "block" : scheme);
  if (!sc) throw InputError("--in: unknown scheme '" + scheme + "'");
  q.scheme = *sc;
  q.element = find_format(need("element").get<std::string>());
  if (!q.element) throw InputError("--in: unknown element format");
  const json& shape = need("shape");
  if (!shape.is_array() || shape.empty() || shape.size() > 2) throw InputError("--in: \"shape\" must be [N] or [R, C]");
  q.rows = shape.size() == 2 ? shape[0].get<int>() : 1;
  q.cols = shape.back().get<int>();
  const json& block = need("block");
  q.block_rows = block.at(0).get<int>();
  q.block_cols = block.at(1).get<int>();
  if (q.block_rows < 1 || q.block_cols < 1) throw InputError("--in: \"block\" must be positive");
  const bool transposed = j.value("axis", 1) == 0;
  if (transposed) std::swap(q.rows, q.cols);
  q.scale_format = q.scheme == S::Scheme::mx ? &formats::e8m0
                   : (q.scheme == S::Scheme::nvfp4 || q.scheme == S::Scheme::nvfp4_2d ||
                      q.scheme == S::Scheme::nvfp4_1level)
                       ? &formats::e4m3
                       : (j.contains("packed_scales") ? &formats::e8m0 : &formats::f32);
  std::size_t idx = 0;
  for (const json& s : need("scales"))
    q.scales.push_back(parse_hex_field(s, "--in: scales[" + std::to_string(idx++) + "]", q.scale_format->storage_bits()));
  idx = 0;
  for (const json& c : need("codes"))
    q.codes.push_back(parse_hex_field(c, "--in: codes[" + std::to_string(idx++) + "]", q.element->storage_bits()));
  if (q.codes.size() != static_cast<std::size_t>(q.rows) * static_cast<std::size_t>(q.cols))
    throw InputError("--in: " + std::to_string(q.codes.size()) + " codes for shape " + std::to_string(q.rows) + "x" +
                     std::to_string(q.cols));
  if (q.scales.size() != static_cast<std::size_t>(q.scale_rows()) * static_cast<std::size_t>(q.scale_cols()))
    throw InputError("--in: " + std::to_string(q.scales.size()) + " scales, expected " +
                     std::to_string(q.scale_rows() * q.scale_cols()));
  if (transposed) {  // codes were written in the original order; quantization ran on the transpose
    std::vector<std::uint64_t> t(q.codes.size());
    for (int i = 0; i < q.cols; ++i)
      for (int jj = 0; jj < q.rows; ++jj)
        t[static_cast<std::size_t>(jj) * q.cols + i] = q.codes[static_cast<std::size_t>(i) * q.rows + jj];
    q.codes = t;
  }
  if (j.contains("tensor_scale")) q.tensor_scale = static_cast<std::uint32_t>(parse_hex_field(j.at("tensor_scale"), "--in: tensor_scale", 32));
  std::vector<double> v = S::dequantize(q);
  if (transposed) {
    std::vector<double> t(v.size());
    for (int i = 0; i < q.rows; ++i)
      for (int jj = 0; jj < q.cols; ++jj)
        t[static_cast<std::size_t>(jj) * q.rows + i] = v[static_cast<std::size_t>(i) * q.cols + jj];
    v = t;
  }
  std::string s;
  for (double d : v) {
    if (o.exact) {
      // The product is exact in f64 (dequantize's contract), so its decimal is the exact value.
      if (std::isnan(d)) s += "nan\n";
      else if (std::isinf(d)) s += d < 0 ? "-inf\n" : "inf\n";
      else if (d == 0) s += std::signbit(d) ? "-0\n" : "0\n";
      else {
        int e = 0;
        const double m = std::frexp(std::fabs(d), &e);
        const auto sig = static_cast<long long>(std::ldexp(m, 53));
        s += exact::decimal(d < 0, mpz_class(std::to_string(sig)), e - 53) + "\n";
      }
    } else {
      const float f = static_cast<float>(d);  // one rounding, rne
      s += hex(std::bit_cast<std::uint32_t>(f), 8) + "\n";
    }
  }
  write_all(o.out, s, "--out");
}

}  // namespace

void add_quantize(CLI::App& app) {
  auto o = std::make_shared<QuantizeOptions>();
  auto* q = app.add_subcommand("quantize", "Quantize a tensor with a scaling scheme (text mode: --in - --out -)");
  q->add_option("--scheme", o->scheme,
                "tensor, delayed, channel, token, block1x128, block128x128, block, mx, nvfp4, nvfp4-2d, nvfp4-1level")
      ->required();
  q->add_option("--element", o->element, "Element format (default e4m3; e2m1 for NVFP4)");
  q->add_option("--block", o->block, "Block length along the axis (mx 32, block 128, nvfp4 16)");
  q->add_option("--axis", o->axis, "Axis the blocks run along: 1 (last, default) or 0");
  q->add_option("--direction", o->direction, "row (default), col (the transpose, own scales) or both");
  q->add_option("--scale-rule", o->scale_rule, "MX scale rule: floor (default), ceil, even, rceil, rne");
  q->add_option("--scale-format", o->scale_format, "f32 (default), pow2, ue8m0-packed");
  q->add_option("--nonfinite", o->nonfinite, "NaN/Inf in an MX block: scale-nan (default), propagate, amax");
  q->add_option("--variant", o->variant, "NVFP4: standard (default), fast-math");
  q->add_option("--zero-scale", o->zero_scale, "NVFP4 zero block scale: kernel (FLT_MAX, default) or reference (0)");
  q->add_option("--profile", o->profile, "Profile for element rounding and scheme defaults (te: rceil, pow2)");
  q->add_option("--rounding", o->rounding, "Element rounding (default rne)");
  q->add_option("--sr-bits", o->sr_bits, "Random bits per element for sr-a/sr-b/sr-c");
  q->add_option("--sr-seed", o->sr_seed, "Draw the random bits from Philox4x32-10 with this seed");
  q->add_option("--sr-bits-file", o->sr_bits_file, "One 0x hex random value per element");
  q->add_flag("--hadamard", o->hadamard, "NVFP4: apply the 16x16 random Hadamard transform first");
  q->add_option("--state", o->state, "Delayed scaling: read and write the amax history (JSON)");
  q->add_option("--amax-nan", o->amax_nan, "ignore (fmaxf, default) or propagate");
  q->add_option("--shape", o->shape, "R,C for a 2-D tensor (default: 1-D)");
  q->add_option("--in-format", o->in_format, "f32 (default), bf16 or f16 bit patterns");
  q->add_option("--in", o->in, "'-': whitespace-separated 0x bit patterns on stdin")->required();
  q->add_option("--out", o->out, "'-': one JSON object on stdout")->required();
  q->callback([o] { guarded([&] { run_quantize(*o); }); });

  auto d = std::make_shared<DequantizeOptions>();
  auto* dq = app.add_subcommand("dequantize", "Dequantize quantize's JSON: one f32 bit pattern per element");
  dq->add_option("--in", d->in, "'-' or a file: the JSON quantize wrote");
  dq->add_option("--out", d->out, "'-' or a file");
  dq->add_flag("--exact", d->exact, "Write exact decimals instead of f32 bit patterns");
  dq->callback([d] { guarded([&] { run_dequantize(*d); }); });
}

}  // namespace lowbit::cli
