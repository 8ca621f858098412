// `lowbit quantize` and `lowbit dequantize`: the scaling schemes from the command line.
// Text mode (stable contract): f32 (or bf16/f16) bit patterns in, one JSON object out.
// File mode: a .npy tensor in, a directory out (codes.npy, scales.npy, tensor_scale.npy, quantized.json;
// reference/README.md "Files"), written as a whole or not at all.
// Checkpoint mode: a safetensors file in, a quantized safetensors checkpoint out, with the metadata
// convention that `lowbit verify-checkpoint` (checkpoint_cmd.cpp) reads back.
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "cli_util.hpp"
#include "commands.hpp"
#include "lowbit/checkpoint.hpp"
#include "lowbit/convert.hpp"
#include "lowbit/exact.hpp"
#include "lowbit/io.hpp"
#include "lowbit/output.hpp"
#include "lowbit/pack.hpp"
#include "lowbit/philox.hpp"
#include "lowbit/profile.hpp"
#include "lowbit/registry.hpp"
#include "lowbit/scale.hpp"
#include "quantize_common.hpp"
#include "state_files.hpp"

namespace lowbit::cli {

namespace {

using json = nlohmann::json;
namespace S = scale;

struct DequantizeOptions {
  std::string in = "-", out = "-";
  bool exact = false;
};

// Parse "R,C" or "N", each in full: decimal digits only (no sign, no trailing junk, no third dimension),
// each side at most INT_MAX.
std::pair<int, int> parse_shape(const std::string& s, std::size_t count) {
  if (s.empty()) {
    if (count > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      throw InputError("--in: " + std::to_string(count) + " values are more than a row can hold");
    return {1, static_cast<int>(count)};
  }
  const auto side = [&](const std::string& t) {
    if (t.empty() || t.size() > 10 || t.find_first_not_of("0123456789") != std::string::npos ||
        std::stoll(t) > std::numeric_limits<int>::max())
      throw InputError("--shape: '" + s + "' is not R,C or N (whole numbers up to " +
                       std::to_string(std::numeric_limits<int>::max()) + ")");
    return static_cast<int>(std::stoll(t));
  };
  const auto comma = s.find(',');
  if (comma == std::string::npos) return {1, side(s)};
  return {side(s.substr(0, comma)), side(s.substr(comma + 1))};
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

template <class Code>
json hex_list(const std::vector<Code>& v, const Format& f) {
  json a = json::array();
  for (Code c : v) a.push_back(hex(f, c));
  return a;
}

S::DelayedState read_state(const std::string& path) {
  S::DelayedState st;
  if (path.empty()) return st;
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(path, ec))) return st;  // a new state file (no open: a FIFO would block)
  // lowbit state's safetensors form, one layer (lowbit/training_state.hpp).
  if (is_safetensors_name(path)) {
    const training::TrainingState t = read_state_file(path, "--state", formats::e4m3);
    if (t.layers.size() != 1 || t.grad_scaler)
      throw InputError("--state: '" + path + "' holds " + std::to_string(t.layers.size()) + " layer(s)" +
                       (t.grad_scaler ? " and a grad_scaler" : "") + "; quantize steps one");
    return t.layers.begin()->second.delayed;
  }
  json j;
  try {
    j = parse_json(read_all(path, "--state"), "--state");
  } catch (const json::parse_error& e) {
    throw InputError("--state: '" + path + "': malformed JSON at byte " + std::to_string(e.byte));
  } catch (const json::exception& e) {  // a number too large for a double (out_of_range.406)
    throw InputError("--state: '" + path + "': malformed JSON: " + e.what());
  }
  try {
    for (const json& h : j.at("history"))
      st.history.push_back(
          std::bit_cast<float>(static_cast<std::uint32_t>(parse_hex_field(h, "--state: history", 32))));
    st.scale = std::bit_cast<float>(static_cast<std::uint32_t>(parse_hex_field(j.at("scale"), "--state: scale", 32)));
    st.max_algorithm = j.value("algorithm", std::string("max")) != "most_recent";
    st.margin = j.value("margin", 0);
  } catch (const json::exception&) { throw InputError("--state: '" + path + "' needs \"history\" and \"scale\""); }
  if (st.history.empty()) throw InputError("--state: '" + path + "': the history is empty");
  return st;
}

json state_json(const S::DelayedState& st) {
  json h = json::array();
  for (float x : st.history) h.push_back(hex(std::bit_cast<std::uint32_t>(x), 8));
  return {{"history", h},
          {"scale", hex(std::bit_cast<std::uint32_t>(st.scale), 8)},
          {"algorithm", st.max_algorithm ? "max" : "most_recent"},
          {"margin", st.margin}};
}

// Writes the state after the step: safetensors for a .safetensors name (the unnamed layer of lowbit state's
// form, with the element quantize used), else the JSON object above.
void save_state(const std::string& path, const S::DelayedState& st, const Format& element,
                const std::vector<std::string>& inputs) {
  if (is_safetensors_name(path)) {
    training::TrainingState t;
    t.layers[""] = training::LayerState{st, &element};
    write_state_file(path, t, "--state", inputs);
    return;
  }
  write_all(path, state_json(st).dump(1) + "\n", "--state", inputs);
}

}  // namespace

namespace {

void run_quantize_text(const QuantizeOptions& o) {
  std::string profile_name;
  S::Options so = build_options(o, profile_name);
  const Format* in_format = find_format(o.in_format.empty() ? "f32" : o.in_format);
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
  const auto direction = parse<S::Direction>(o.direction);
  if (!direction) throw InputError("--direction: " + choices<S::Direction>(", "));
  const bool want_row = *direction != S::Direction::col;
  const bool want_col = *direction != S::Direction::row;

  auto emit = [&](const S::Quantized& q, const std::string& prefix, bool transposed_back) {
    std::vector<std::uint8_t> codes = q.codes;
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
    if (!o.state.empty()) save_state(o.state, st, *so.element, {o.in});
  }
  write_all(o.out, out.dump() + "\n", "--out", {o.in, o.state});
}

void run_dequantize_text(const DequantizeOptions& o) {
  json j;
  try {
    j = parse_json(read_all(o.in, "--in"), "--in");
  } catch (const json::parse_error& e) { throw InputError("--in: malformed JSON at byte " + std::to_string(e.byte)); }
  catch (const json::exception& e) { throw InputError(std::string("--in: malformed JSON: ") + e.what()); }
  if (!j.is_object()) throw InputError("--in: expected the JSON object that quantize writes");
  auto need = [&](const char* key) -> const json& {
    if (!j.contains(key)) throw InputError(std::string("--in: \"") + key + "\" is missing");
    return j.at(key);
  };
  S::Quantized q;
  const std::string scheme = json_string(need("scheme"), "--in: \"scheme\"");
  const auto sc = parse<S::Scheme>(scheme == "block1x128" || scheme == "block128x128" ? "block" : scheme);
  if (!sc) throw InputError("--in: unknown scheme '" + scheme + "'");
  q.scheme = *sc;
  q.element = find_format(json_string(need("element"), "--in: \"element\""));
  if (!q.element) throw InputError("--in: unknown element format");
  if (q.element->storage_bits() > 8)
    throw InputError(std::string("--in: \"element\" must be a format of at most 8 bits, not ") + q.element->name);
  const json& shape = need("shape");
  if (!shape.is_array() || shape.empty() || shape.size() > 2) throw InputError("--in: \"shape\" must be [N] or [R, C]");
  constexpr int int_max = std::numeric_limits<int>::max();
  q.rows = shape.size() == 2 ? json_int(shape[0], "--in: \"shape\"[0]", 1, int_max) : 1;
  q.cols = json_int(shape.back(), "--in: \"shape\"", 1, int_max);
  const json& block = need("block");
  if (!block.is_array() || block.size() != 2) throw InputError("--in: \"block\" must be [R, C]");
  q.block_rows = json_int(block[0], "--in: \"block\"[0]", 1, int_max);
  q.block_cols = json_int(block[1], "--in: \"block\"[1]", 1, int_max);
  if (q.block_rows < 1 || q.block_cols < 1) throw InputError("--in: \"block\" must be positive");
  const bool transposed = j.value("axis", 1) == 0;
  if (transposed) std::swap(q.rows, q.cols);
  q.scale_format = S::scheme_row(q.scheme).scale_element;
  if (!q.scale_format) q.scale_format = j.contains("packed_scales") ? &formats::e8m0 : &formats::f32;
  std::size_t idx = 0;
  for (const json& s : need("scales"))
    q.scales.push_back(
        parse_hex_field(s, "--in: scales[" + std::to_string(idx++) + "]", q.scale_format->storage_bits()));
  idx = 0;
  for (const json& c : need("codes"))
    q.codes.push_back(static_cast<std::uint8_t>(
        parse_hex_field(c, "--in: codes[" + std::to_string(idx++) + "]", q.element->storage_bits())));
  if (q.codes.size() != static_cast<std::size_t>(q.rows) * static_cast<std::size_t>(q.cols))
    throw InputError("--in: " + std::to_string(q.codes.size()) + " codes for shape " + std::to_string(q.rows) + "x" +
                     std::to_string(q.cols));
  if (q.scales.size() != static_cast<std::size_t>(q.scale_rows()) * static_cast<std::size_t>(q.scale_cols()))
    throw InputError("--in: " + std::to_string(q.scales.size()) + " scales, expected " +
                     std::to_string(q.scale_rows() * q.scale_cols()));
  if (transposed) {  // codes were written in the original order; quantization ran on the transpose
    std::vector<std::uint8_t> t(q.codes.size());
    for (int i = 0; i < q.cols; ++i)
      for (int jj = 0; jj < q.rows; ++jj)
        t[static_cast<std::size_t>(jj) * q.cols + i] = q.codes[static_cast<std::size_t>(i) * q.rows + jj];
    q.codes = t;
  }
  if (j.contains("tensor_scale"))
    q.tensor_scale = static_cast<std::uint32_t>(parse_hex_field(j.at("tensor_scale"), "--in: tensor_scale", 32));
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
  write_all(o.out, s, "--out", {o.in});
}

// ---- shared: recipe, packing, scale layouts -------------------------------------------------------

namespace fs = std::filesystem;

// An io::FileError becomes an InputError with the same message (file, byte or key, problem): exit 2.
template <class F>
void file_errors_exit_2(F&& body) {
  try {
    body();
  } catch (const io::FileError& e) { throw InputError(e.what()); }
}

// The random bits of a stochastic element rounding, one per element (the text mode's rules).
std::vector<std::uint32_t> random_bits(const QuantizeOptions& o, const S::Options& so, std::size_t n) {
  std::vector<std::uint32_t> rbits;
  if (!is_stochastic(so.element_policy.rounding)) {
    if (o.sr_bits != 0 || o.sr_seed >= 0 || !o.sr_bits_file.empty())
      throw InputError("--sr-bits: only with a stochastic rounding (sr-a, sr-b, sr-c)");
    return rbits;
  }
  if (o.sr_bits < 1 || o.sr_bits > max_sr_bits) throw InputError("--sr-bits: 1..32 with a stochastic rounding");
  if ((o.sr_seed >= 0) == !o.sr_bits_file.empty())
    throw InputError("--sr-seed / --sr-bits-file: a stochastic rounding needs exactly one of them");
  if (o.sr_seed >= 0) {
    for (std::size_t i = 0; i < n; ++i)
      rbits.push_back(philox::sr_bits(static_cast<std::uint64_t>(o.sr_seed), i, o.sr_bits));
    return rbits;
  }
  std::istringstream is(read_all(o.sr_bits_file, "--sr-bits-file"));
  std::string tok;
  while (is >> tok) {
    const std::string what = "--sr-bits-file: value " + std::to_string(rbits.size() + 1);
    rbits.push_back(static_cast<std::uint32_t>(parse_hex_field(json(tok), what, o.sr_bits)));
  }
  if (rbits.size() != n)
    throw InputError("--sr-bits-file: " + std::to_string(rbits.size()) + " values for " + std::to_string(n) +
                     " elements");
  return rbits;
}

// File and checkpoint modes quantize rowwise along the last axis.
void require_row_direction(const QuantizeOptions& o, const char* mode) {
  if (o.direction != "row")
    throw InputError(std::string("--direction: ") + mode +
                     " writes the row direction only (col and both are text mode)");
  if (o.axis == 0) throw InputError(std::string("--axis: ") + mode + " quantizes along the last axis (0 is text mode)");
  if (o.axis != -1 && o.axis != 1) throw InputError("--axis: 0 or 1");
  if (!o.shape.empty()) throw InputError(std::string("--shape: ") + mode + " takes the shape from the input file");
}

bool plain_file_name(const std::string& s) {
  return !s.empty() && s != "." && s != ".." && s.find('/') == std::string::npos;
}

}  // namespace

namespace {

// ---- file mode: FILE.npy -> DIR ---------------------------------------------------------------------

// The input tensor of file mode (quantized::read_source_npy): values, or codes of the format --in-format names.
quantized::Source read_input_npy(const std::string& path, const std::string& in_format) {
  const Format* named = nullptr;
  if (!in_format.empty()) {
    named = find_format(in_format);
    if (!named) throw InputError("--in-format: unknown format '" + in_format + "'");
  }
  try {
    return quantized::read_source_npy(path, named);
  } catch (const ArgumentError& e) {
    throw InputError("--in-format: " + std::string(e.what()));
  }
}

struct OutFile {
  std::string name;
  std::vector<std::uint8_t> bytes;
};

// Write `files` into DIR as a whole, by the one writer (lowbit/output.hpp): a new folder swapped in at the
// end.  An existing DIR is replaced only when it is empty or a previous quantized folder (holds
// quantized.json) that does not hold `input`; on any failure DIR is as it was.
void write_dir_atomic(const std::string& dir, const std::vector<OutFile>& files, const std::string& input) {
  try {
    io::FolderOutput out(dir, {.marker = "quantized.json", .inputs = {input}});
    for (const OutFile& f : files) {
      const std::span<const std::uint8_t> part(f.bytes);
      out.add(f.name, std::span<const std::span<const std::uint8_t>>(&part, 1));
    }
    out.commit();
  } catch (const io::FileError& e) {
    throw InputError(std::string("--out: ") + e.what());
  }
}

std::vector<std::uint8_t> npy_bytes(const io::Tensor& t) { return io::encode_npy(t.dtype, t.shape, t.bytes); }

void run_quantize_files(const QuantizeOptions& o) {
  require_row_direction(o, "file mode");
  std::string profile_name;
  const S::Options so = build_options(o, profile_name);
  const auto layout = parse<ScaleLayout>(o.scale_layout);
  if (!layout) throw InputError("--scale-layout: unknown '" + o.scale_layout + "' (row-major, cublaslt)");
  const Packing packing = o.pack ? packing_for(*so.element) : Packing::none;

  quantized::Source a = read_input_npy(o.in, o.in_format);
  const auto dims = matrix_dims(a.shape);
  if (!dims) throw io::FileError(o.in, "key \"shape\"", shape_text(a.shape) + " is too large");
  if (dims->first < 1 || dims->second < 1)
    throw io::FileError(o.in, "key \"shape\"", shape_text(a.shape) + " holds no elements");
  if (a.rounded)
    std::cerr << "lowbit quantize: " << a.rounded << " of the " << a.values.size() << " float64 elements of '" << o.in
              << "' were rounded (once, to nearest even) into " << a.format->name << "\n";
  const S::Tensor x{dims->first, dims->second, std::move(a.values)};
  const std::vector<std::uint32_t> rbits = random_bits(o, so, x.data.size());
  if (!o.state.empty() && so.scheme != S::Scheme::delayed) throw InputError("--state: applies to the delayed scheme");
  S::DelayedState st = read_state(o.state);
  const S::Quantized q = S::quantize(x, so, rbits.empty() ? nullptr : &rbits, &st);
  check_layout(q, *layout, "--scale-layout");

  std::vector<OutFile> files;
  const io::Tensor codes =
      io::Tensor::from_values<std::uint8_t>(io::DType::u8, packed_shape(a.shape, packing), store_codes(q, packing));
  files.push_back({"codes.npy", npy_bytes(codes)});
  files.push_back({"scales.npy", npy_bytes(store_scales(q, *layout))});
  json out;
  out["format"] = "lowbit-quantized";
  out["version"] = quantized_json_version;
  out["scheme"] = o.scheme;
  out["element"] = q.element->name;
  out["shape"] = a.shape;
  if (!profile_name.empty()) out["profile"] = profile_name;
  out["block"] = json::array({q.block_rows, q.block_cols});
  out["scale_format"] = q.scale_format->name;
  out["scale_shape"] = json::array({q.scale_rows(), q.scale_cols()});
  out["scale_layout"] = name(*layout);
  out["packing"] = name(packing);
  out["recipe"] = recipe_keys(o, so, q, profile_name);
  json names = {{"codes", "codes.npy"}, {"scales", "scales.npy"}};
  if (q.tensor_scale) {
    out["tensor_scale"] = hex(*q.tensor_scale, 8);
    const std::uint32_t ts = *q.tensor_scale;
    files.push_back({"tensor_scale.npy",
                     npy_bytes(io::Tensor::from_values<std::uint32_t>(io::DType::f32, {1}, std::span(&ts, 1)))});
    names["tensor_scale"] = "tensor_scale.npy";
  }
  out["files"] = names;
  if (so.scheme == S::Scheme::delayed) {
    const json sj = state_json(st);
    out["amax_history"] = sj["history"];
    out["scale"] = sj["scale"];
  }
  const std::string text = out.dump(1) + "\n";
  files.push_back({"quantized.json", std::vector<std::uint8_t>(text.begin(), text.end())});
  write_dir_atomic(o.out, files, o.in);
  if (so.scheme == S::Scheme::delayed && !o.state.empty()) save_state(o.state, st, *so.element, {o.in});
}

// ---- checkpoint mode: A.safetensors -> B.safetensors ---------------------------------------------

void run_quantize_checkpoint(const QuantizeOptions& o) {
  require_row_direction(o, "checkpoint mode");
  if (!o.state.empty()) throw InputError("--state: checkpoint mode does not take the delayed scheme's state");
  std::string profile_name;
  const S::Options so = build_options(o, profile_name);
  if (so.scheme == S::Scheme::delayed)
    throw InputError(
        "--scheme: delayed scaling takes its scale from training state, not from the tensor; "
        "checkpoints are written with current-scaling schemes");
  if (is_stochastic(so.element_policy.rounding))
    throw InputError("--rounding: a checkpoint records no random bits, so its codes could not be re-computed");
  const auto layout = parse<ScaleLayout>(o.scale_layout);
  if (!layout) throw InputError("--scale-layout: unknown '" + o.scale_layout + "' (row-major, cublaslt)");
  const Packing packing = o.pack ? packing_for(*so.element) : Packing::none;
  if (!o.out.ends_with(".safetensors")) throw InputError("--out: checkpoint mode writes a .safetensors file");

  const io::Safetensors src = io::read_safetensors(o.in);
  std::vector<std::string> names = o.tensors;
  if (names.empty()) {
    for (const auto& [n, t] : src.tensors)
      if (t.rank() >= 2 && (t.dtype == io::DType::f32 || t.dtype == io::DType::bf16 || t.dtype == io::DType::f16))
        names.push_back(n);
    if (names.empty()) throw io::FileError(o.in, "", "no F32, BF16 or F16 tensor of rank 2 or more to quantize");
  }
  std::map<std::string, io::Tensor> out_tensors;
  std::map<std::string, std::string> meta = src.metadata;
  for (const auto& [n, t] : src.tensors)
    if (std::find(names.begin(), names.end(), n) == names.end()) out_tensors[n] = t;
  for (const std::string& w : names) {
    const io::Tensor& t = src.tensor(w);
    const auto values = float_values(t);
    if (!values)
      throw io::FileError(o.in, "key \"" + w + "\"",
                          std::string("dtype ") + std::string(io::dtype_name(t.dtype)) + " is not F32, BF16 or F16");
    const auto dims = matrix_dims(t.shape);
    if (!dims || dims->first < 1 || dims->second < 1)
      throw io::FileError(o.in, "key \"" + w + "\"", "shape " + shape_text(t.shape) + " cannot be quantized");
    const S::Quantized q = S::quantize(S::Tensor{dims->first, dims->second, *values}, so);
    check_layout(q, *layout, "--scale-layout");
    for (const char* suffix : {".data", ".block_scales", ".tensor_scale"})
      if (src.contains(w + suffix)) throw io::FileError(o.in, "key \"" + w + suffix + "\"", "already present");
    out_tensors[w + ".data"] =
        io::Tensor::from_values<std::uint8_t>(io::DType::u8, packed_shape(t.shape, packing), store_codes(q, packing));
    io::Tensor scales = store_scales(q, *layout);
    out_tensors[w + ".block_scales"] = scales;
    if (q.tensor_scale) {
      const std::uint32_t ts = *q.tensor_scale;
      out_tensors[w + ".tensor_scale"] = io::Tensor::from_values<std::uint32_t>(io::DType::f32, {1}, std::span(&ts, 1));
    }
    for (const auto& [k, v] : recipe_keys(o, so, q, profile_name)) meta[w + "." + k] = v;
    meta[w + ".layout"] = name(*layout);
    meta[w + ".packing"] = name(packing);
  }
  io::write_safetensors(o.out, out_tensors, meta, io::OutputOptions{{o.in}});
}

// ---- checkpoint mode, --export: SRC -> DIR as compressed-tensors or ModelOpt write it ----------------------

void run_quantize_export(const QuantizeOptions& o) {
  // The recipe is the format's preset: lowbit's own recipe options would contradict it.
  const std::pair<const char*, bool> own[] = {
      {"--scheme", !o.scheme.empty()},
      {"--element", !o.element.empty()},
      {"--block", o.block != 0},
      {"--scale-rule", !o.scale_rule.empty()},
      {"--scale-format", !o.scale_format.empty()},
      {"--variant", !o.variant.empty()},
      {"--compute", !o.compute.empty()},
      {"--zero-scale", !o.zero_scale.empty()},
      {"--profile", !o.profile.empty()},
      {"--rounding", !o.rounding.empty()},
      {"--nonfinite", !o.nonfinite.empty()},
      {"--amax-nan", !o.amax_nan.empty()},
      {"--hadamard", !o.hadamard_text.empty()},
      {"--state", !o.state.empty()},
      {"--pack", o.pack},
      {"--scale-layout", o.scale_layout != "row-major"},
      {"--tensor", !o.tensors.empty()},
      {"--shape", !o.shape.empty()},
      {"--in-format", !o.in_format.empty()},
      {"--axis", o.axis != -1},
      {"--direction", o.direction != "row"},
      {"--sr-bits", o.sr_bits != 0},
      {"--sr-seed", o.sr_seed != -1},
      {"--sr-bits-file", !o.sr_bits_file.empty()},
  };
  for (const auto& [flag, given] : own)
    if (given)
      throw InputError(std::string(flag) + ": --export writes the exporter's own recipe (--recipe); " + flag +
                       " does not apply");
  const auto format = parse<checkpoint::CheckpointFormat>(o.export_format);
  if (format == checkpoint::CheckpointFormat::gguf) {
    // One GGUF file: gguf-py's MXFP4 of every projection, under gguf-py's Llama names.
    if (!o.out.ends_with(".gguf")) throw InputError("--out: --export gguf writes one FILE.gguf");
    if (!o.ignore.empty()) throw InputError("--ignore: not with --export gguf (its projections are fixed by name)");
    if (!o.input_scales.empty()) throw InputError("--input-scales: not with --export gguf (MXFP4A16: weights only)");
    if (o.recipe.empty()) throw InputError("--recipe: required with --export gguf (MXFP4)");
    const checkpoint::ExportSummary s = checkpoint::export_gguf(o.in, o.out, {.recipe = o.recipe});
    io::write_stdout("wrote " + o.out + ": gguf " + o.recipe + ", " + std::to_string(s.quantized.size()) +
                     " weights quantized, " + std::to_string(s.copied) + " tensors copied\n");
    return;
  }
  if (!format || (*format != checkpoint::CheckpointFormat::compressed_tensors &&
                  *format != checkpoint::CheckpointFormat::modelopt))
    throw InputError("--export: '" + echo_text(o.export_format, 40) +
                     "' is not compressed-tensors, modelopt or gguf");
  if (o.recipe.empty()) {
    const std::string list = *format == checkpoint::CheckpointFormat::modelopt ? choices<checkpoint::ModeloptAlgo>()
                                                                               : choices<checkpoint::CtPreset>();
    throw InputError("--recipe: required with --export " + o.export_format + " (" + list + ")");
  }
  checkpoint::ExportOptions eo;
  eo.format = *format;
  eo.recipe = o.recipe;
  eo.ignore = o.ignore;
  eo.input_scales = o.input_scales;
  const checkpoint::ExportSummary s = checkpoint::export_checkpoint(o.in, o.out, eo);
  io::write_stdout("wrote " + o.out + ": " + o.export_format + " " + o.recipe + ", " +
                   std::to_string(s.quantized.size()) + " weights quantized, " + std::to_string(s.copied) +
                   " tensors copied\n");
}

void run_quantize(const QuantizeOptions& o) {
  if (o.in.empty()) throw InputError("--in: required");
  if (o.out.empty()) throw InputError("--out: required");
  if (!o.export_format.empty()) {
    file_errors_exit_2([&] { run_quantize_export(o); });
    return;
  }
  for (const auto& [flag, given] : {std::pair<const char*, bool>{"--recipe", !o.recipe.empty()},
                                    {"--ignore", !o.ignore.empty()},
                                    {"--input-scales", !o.input_scales.empty()}})
    if (given) throw InputError(std::string(flag) + ": applies with --export");
  if (o.scheme.empty()) throw InputError("--scheme: required (or --export FORMAT --recipe NAME for a checkpoint)");
  if (o.in == "-" && o.out == "-") {
    if (o.pack) throw InputError("--pack: applies to file and checkpoint modes (text mode codes are never packed)");
    if (o.scale_layout != "row-major") throw InputError("--scale-layout: applies to file and checkpoint modes");
    if (!o.tensors.empty()) throw InputError("--tensor: applies to checkpoint mode");
    run_quantize_text(o);
    return;
  }
  if (o.in == "-" || o.out == "-")
    throw InputError(
        "--in/--out: text mode reads '-' and writes '-'; file mode reads FILE.npy and writes a directory; "
        "checkpoint mode reads and writes .safetensors files");
  file_errors_exit_2([&] {
    if (o.in.ends_with(".safetensors")) {
      run_quantize_checkpoint(o);
    } else {
      if (!o.tensors.empty()) throw InputError("--tensor: applies to checkpoint mode (.safetensors in and out)");
      run_quantize_files(o);
    }
  });
}

// ---- dequantize DIR -> FILE.npy -----------------------------------------------------------------------

void run_dequantize_dir(const DequantizeOptions& o) {
  if (o.exact) throw InputError("--exact: applies to text mode (a directory dequantizes to an f32 .npy file)");
  if (o.out == "-") throw InputError("--out: a quantized directory dequantizes to a .npy file, not '-'");
  const fs::path dir(o.in);
  const std::string jpath = (dir / "quantized.json").string();
  json j;
  {
    std::ifstream in(jpath, std::ios::binary);
    if (!in) throw io::FileError(jpath, "", "cannot be read (is '" + o.in + "' a directory that quantize wrote?)");
    std::ostringstream ss;
    ss << in.rdbuf();
    try {
      j = parse_json(ss.str(), jpath);
    } catch (const json::parse_error& e) {
      throw io::FileError(jpath, "byte " + std::to_string(e.byte), "malformed JSON");
    } catch (const json::exception& e) {  // a number too large for a double (out_of_range.406)
      throw io::FileError(jpath, "", std::string("malformed JSON: ") + e.what());
    }
  }
  auto bad = [&](const std::string& key, const std::string& why) {
    return io::FileError(jpath, "key \"" + key + "\"", why);
  };
  auto need = [&](const std::string& key) -> const json& {
    if (!j.is_object() || !j.contains(key)) throw bad(key, "missing");
    return j.at(key);
  };
  auto need_string = [&](const std::string& key) {
    const json& v = need(key);
    if (!v.is_string()) throw bad(key, "expected a string");
    return v.get<std::string>();
  };
  // Version 1 stored f32 scales as '<u4' bit patterns; reading them as values would be silently wrong.
  const json& version = need("version");
  if (!version.is_number_integer() || version.get<long long>() != quantized_json_version)
    throw bad("version", version.dump() +
                             (version == 1 ? " is the old layout (f32 scales as '<u4' bit patterns); "
                                             "quantize the tensor again with this lowbit"
                                           : " is not a version this lowbit reads") +
                             " (this lowbit reads version " + std::to_string(quantized_json_version) + ")");
  S::Quantized q;
  const std::string scheme = need_string("scheme");
  const auto sc = parse<S::Scheme>(scheme == "block1x128" || scheme == "block128x128" ? "block" : scheme);
  if (!sc) throw bad("scheme", "unknown scheme '" + scheme + "'");
  q.scheme = *sc;
  q.element = find_format(need_string("element"));
  if (!q.element || q.element->bits > 8) throw bad("element", "not an element format of at most 8 bits");
  q.scale_format = find_format(need_string("scale_format"));
  if (q.scale_format != &formats::f32 && q.scale_format != &formats::e8m0 && q.scale_format != &formats::e4m3)
    throw bad("scale_format", "expected f32, e8m0 or e4m3");
  std::vector<std::uint64_t> shape;
  const json& js = need("shape");
  if (!js.is_array()) throw bad("shape", "expected an array");
  for (const json& d : js) {
    if (!d.is_number_unsigned()) throw bad("shape", "expected non-negative integers");
    shape.push_back(d.get<std::uint64_t>());
  }
  const auto dims = matrix_dims(shape);
  if (!dims || dims->first < 1 || dims->second < 1) throw bad("shape", shape_text(shape) + " is not a quantized shape");
  q.rows = dims->first;
  q.cols = dims->second;
  const json& jb = need("block");
  if (!jb.is_array() || jb.size() != 2 || !jb[0].is_number_integer() || !jb[1].is_number_integer() ||
      jb[0].get<long long>() < 1 || jb[1].get<long long>() < 1 || jb[0].get<long long>() > 0x7FFFFFFF ||
      jb[1].get<long long>() > 0x7FFFFFFF)
    throw bad("block", "expected [rows, cols] of positive integers");
  q.block_rows = jb[0].get<int>();
  q.block_cols = jb[1].get<int>();
  const auto packing = parse<Packing>(need_string("packing"));
  if (!packing) throw bad("packing", "expected none, fp4x2 or fp6x4");
  if (*packing != Packing::none && packing_bits(*packing) != q.element->bits)
    throw bad("packing", std::string(name(*packing)) + " does not hold " + q.element->name + " codes");
  const auto layout = parse<ScaleLayout>(need_string("scale_layout"));
  if (!layout) throw bad("scale_layout", "expected row-major or cublaslt");
  try {
    check_layout(q, *layout, "scale_layout");
  } catch (const InputError& e) { throw bad("scale_layout", e.what()); }
  const json& files = need("files");
  auto file = [&](const std::string& role) -> std::optional<std::string> {
    if (!files.is_object() || !files.contains(role)) return std::nullopt;
    const json& f = files.at(role);
    if (!f.is_string() || !plain_file_name(f.get<std::string>()))
      throw bad("files." + role, "expected a file name inside the directory");
    return (dir / f.get<std::string>()).string();
  };
  // Codes.
  const auto cpath = file("codes");
  if (!cpath) throw bad("files.codes", "missing");
  const io::NpyArray codes = io::read_npy(*cpath, io::DType::u8);
  const std::vector<std::uint64_t> want = packed_shape(shape, *packing);
  if (codes.shape != want)
    throw io::FileError(*cpath, "key \"shape\"",
                        shape_text(codes.shape) + ", but quantized.json's shape and packing need " + shape_text(want));
  const std::vector<std::uint8_t> unpacked = pack::unpack_rows(
      packing_bits(*packing), codes.bytes, static_cast<std::size_t>(q.rows), static_cast<std::size_t>(q.cols));
  const std::uint64_t data_at = fs::file_size(*cpath) - codes.bytes.size();
  for (std::size_t i = 0; i < unpacked.size(); ++i) {
    if (!q.element->valid_code(unpacked[i])) {
      const std::size_t byte = *packing == Packing::none
                                   ? i
                                   : (i / static_cast<std::size_t>(q.cols)) *
                                         pack::packed_bytes(packing_bits(*packing), static_cast<std::size_t>(q.cols));
      throw io::FileError(*cpath, "byte " + std::to_string(data_at + byte),
                          "code " + hex(unpacked[i], 2) + " of element " + std::to_string(i) + " is not a " +
                              q.element->name + " code");
    }
    q.codes.push_back(unpacked[i]);
  }
  // Scales.
  const auto spath = file("scales");
  if (!spath) throw bad("files.scales", "missing");
  const bool wide = q.scale_format->bits == 32;
  const io::NpyArray scales = io::read_npy(*spath, wide ? io::DType::f32 : io::DType::u8);
  const std::vector<std::uint64_t> swant =
      *layout == ScaleLayout::cublaslt
          ? std::vector<std::uint64_t>{pack::cublaslt_shape(static_cast<std::size_t>(q.scale_rows()),
                                                            static_cast<std::size_t>(q.scale_cols()))
                                           .bytes()}
          : std::vector<std::uint64_t>{static_cast<std::uint64_t>(q.scale_rows()),
                                       static_cast<std::uint64_t>(q.scale_cols())};
  if (scales.shape != swant)
    throw io::FileError(*spath, "key \"shape\"",
                        shape_text(scales.shape) + ", but the " + name(*layout) + " scales of " +
                            std::to_string(q.scale_rows()) + "x" + std::to_string(q.scale_cols()) + " blocks need " +
                            shape_text(swant));
  std::vector<std::uint64_t> stored;
  if (wide) {
    for (std::uint32_t w : scales.values<std::uint32_t>()) stored.push_back(w);
  } else {
    for (std::uint8_t b : scales.values<std::uint8_t>()) stored.push_back(b);
  }
  q.scales = load_scales(stored, q, *layout);
  // Tensor scale.
  if (const auto tpath = file("tensor_scale")) {
    const io::NpyArray ts = io::read_npy(*tpath, io::DType::f32);
    if (ts.elements() != 1) throw io::FileError(*tpath, "key \"shape\"", shape_text(ts.shape) + ", expected one value");
    q.tensor_scale = ts.values<std::uint32_t>()[0];
  } else if (S::scheme_row(q.scheme).family == S::Family::nvfp4) {
    throw bad("files.tensor_scale", "missing (two-level NVFP4 has a tensor scale)");
  }
  const std::vector<double> v = S::dequantize(q);
  std::vector<float> f(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) f[i] = static_cast<float>(v[i]);  // exact product, one rounding
  io::write_npy(o.out, io::Tensor::from_values<float>(io::DType::f32, shape, f), io::OutputOptions{{o.in}});
}

void run_dequantize(const DequantizeOptions& o) {
  if (o.in != "-" && fs::is_directory(o.in)) {
    file_errors_exit_2([&] { run_dequantize_dir(o); });
    return;
  }
  run_dequantize_text(o);
}

}  // namespace

void add_quantize(CLI::App& app) {
  auto o = std::make_shared<QuantizeOptions>();
  auto* q =
      app.add_subcommand("quantize",
                         "Quantize a tensor with a scaling scheme (text: --in - --out -; files: --in X.npy --out DIR; "
                         "checkpoints: --in A.safetensors --out B.safetensors)");
  q->add_option("--scheme", o->scheme,
                "tensor, delayed, channel, token, block1x128, block128x128, block, mx, nvfp4, nvfp4-2d, nvfp4-1level "
                "(required but with --export)");
  q->add_option("--element", o->element, "Element format (default e4m3; e2m1 for NVFP4)");
  q->add_option("--block", o->block, "Block length along the axis (mx 32, block 128, nvfp4 16)")
      ->check(whole_number(1, scale::max_block_side));
  q->add_option("--axis", o->axis, "Axis the blocks run along: 1 (last, default) or 0")->check(whole_number(0, 1));
  q->add_option("--direction", o->direction, "row (default), col (the transpose, own scales) or both");
  q->add_option("--scale-rule", o->scale_rule, "MX scale rule: floor (default), ceil, even, rceil, rne");
  q->add_option("--scale-format", o->scale_format, "f32 (default), pow2, ue8m0-packed");
  q->add_option("--nonfinite", o->nonfinite, "NaN/Inf in an MX block: scale-nan (default), propagate, amax");
  q->add_option("--variant", o->variant,
                "NVFP4: standard (default), fast-math, 4over6 (per-block map to 4 or 6, least absolute error), "
                "4over6-mse (least squared error); NVFP4 and MX: torchao (torchao 0.18's arithmetic, the torchao "
                "profile's default); NVFP4 and FP8 (tensor, token, block): compressed-tensors (its arithmetic, "
                "with --compute), FP8 only: compressed-tensors-gpu (its GPU path); NVFP4 and FP8 per-tensor: "
                "modelopt (ModelOpt's export); FP8 block: transformers (its FineGrainedFP8, weight_scale_inv "
                "checkpoints); MX e2m1: gguf (gguf-py's MXFP4 quantizer)");
  q->add_option("--compute", o->compute,
                "compressed-tensors variant: the precision its scales are computed in, the weight's dtype: f32 "
                "(default), bf16, f16");
  q->add_option("--zero-scale", o->zero_scale, "NVFP4 zero block scale: kernel (FLT_MAX, default) or reference (0)");
  q->add_option("--profile", o->profile, "Profile for element rounding and scheme defaults (te: rceil, pow2)");
  q->add_option("--rounding", o->rounding, "Element rounding (default rne)");
  q->add_option("--sr-bits", o->sr_bits, "Random bits per element for sr-a/sr-b/sr-c")->check(whole_number(1, 32));
  q->add_option("--sr-seed", o->sr_seed, "Draw the random bits from Philox4x32-10 with this seed")
      ->check(whole_number(0, std::numeric_limits<long long>::max()));
  q->add_option("--sr-bits-file", o->sr_bits_file, "One 0x hex random value per element");
  q->add_flag("--hadamard{exact}", o->hadamard_text,
              "NVFP4: apply the 16x16 random Hadamard transform first: --hadamard (or =exact) sums exactly into f32, "
              "--hadamard=te-bf16 is Transformer Engine's bf16 tensor-core product rounded to bf16 (bf16 inputs)");
  q->add_option("--state", o->state, "Delayed scaling: read and write the amax history (JSON)");
  q->add_option("--amax-nan", o->amax_nan, "ignore (fmaxf, default) or propagate");
  q->add_option("--shape", o->shape, "R,C for a 2-D tensor (default: 1-D)");
  q->add_option("--in-format", o->in_format,
                "The format the input holds. Text: f32 (default), bf16 or f16 bit patterns. FILE.npy: a float64 "
                "array is rounded once into f32 (default), bf16 or f16; integer and ml_dtypes arrays are codes of "
                "the format named here (required for them)");
  q->add_option("--in", o->in,
                "'-': whitespace-separated 0x bit patterns on stdin; FILE.npy (f32, f16, f64 values; codes with "
                "--in-format: bf16 as uint16 or ml_dtypes' bfloat16, ml_dtypes' float8/6/4); or "
                "A.safetensors (checkpoint mode)")
      ->required();
  q->add_option("--out", o->out,
                "'-': one JSON object on stdout; DIR for FILE.npy (codes.npy, scales.npy, tensor_scale.npy, "
                "quantized.json); B.safetensors in checkpoint mode")
      ->required();
  q->add_flag("--pack", o->pack,
              "File and checkpoint modes: pack 4-bit codes two per byte, 6-bit codes four per 3 bytes");
  q->add_option("--scale-layout", o->scale_layout, "File and checkpoint modes: row-major (default) or cublaslt");
  q->add_option("--tensor", o->tensors,
                "Checkpoint mode: a tensor to quantize (repeatable; default every float "
                "tensor of rank 2 or more)");
  q->add_option("--export", o->export_format,
                "Checkpoint mode: write DIR as an exporter does: compressed-tensors (config.json's "
                "quantization_config, as vLLM loads it), modelopt (hf_quant_config.json, as TensorRT-LLM loads it) "
                "or gguf (one FILE.gguf of gguf-py's MXFP4 tensors)");
  q->add_option("--recipe", o->recipe,
                "With --export, the format's preset: compressed-tensors FP8, FP8_DYNAMIC, FP8_BLOCK, NVFP4, NVFP4A16, "
                "MXFP4A16; modelopt FP8, NVFP4; gguf MXFP4");
  q->add_option("--ignore", o->ignore,
                "With --export, a module to leave unquantized besides lm_head (repeatable): its name, its last "
                "components, or re:REGEX");
  q->add_option(
      "--input-scales", o->input_scales,
      "With --export FP8 / NVFP4: a safetensors file holding each quantized module's activation scale as the "
      "checkpoint stores it (M.input_scale; compressed-tensors NVFP4 M.input_global_scale), copied bit for bit");
  q->callback([o] {
    guarded([&] {
      if (!o->hadamard_text.empty()) {
        const auto h = parse<scale::Hadamard>(o->hadamard_text);
        if (!h || *h == scale::Hadamard::none)
          throw InputError("--hadamard: '" + o->hadamard_text + "' is not exact or te-bf16");
        o->hadamard = *h;
      }
      run_quantize(*o);
    });
  });

  auto d = std::make_shared<DequantizeOptions>();
  auto* dq = app.add_subcommand(
      "dequantize", "Dequantize quantize's JSON (one f32 bit pattern per element) or directory (an f32 .npy file)");
  dq->add_option("--in", d->in, "'-' or a file: the JSON quantize wrote; or a directory quantize wrote");
  dq->add_option("--out", d->out, "'-' or a file (FILE.npy, f32, for a directory)");
  dq->add_flag("--exact", d->exact, "Write exact decimals instead of f32 bit patterns");
  dq->callback([d] { guarded([&] { run_dequantize(*d); }); });
}

}  // namespace lowbit::cli
