// `lowbit gemm`: the GEMM references and tensor-core models from the command line.
#include <bit>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "cli_util.hpp"
#include "lowbit/scale.hpp"
#include "commands.hpp"
#include "lowbit/gemm.hpp"
#include "lowbit/procedure.hpp"
#include "lowbit/io.hpp"
#include "lowbit/registry.hpp"

namespace lowbit::cli {

namespace {

using json = nlohmann::json;
using gemm::Matrix;

struct GemmOptions {
  std::string model;
  std::string a = "-";
  std::string out = "-";
  bool list = false;
  bool json = false;  // --list-models --json
  bool amax = false;
  int rows = 0, cols = 0;  // D's shape, once known
  // File mode: .npy operands (see read_npy_operands).
  std::string b, c, a_format, b_format, a_scales, b_scales, scale_format, alpha, beta, scale_a, scale_b;
  int scale_block = 0;
};

Matrix read_matrix(const json& j, const std::string& key, const Format& f, int rows, int cols) {
  if (!j.contains(key)) throw InputError("\"" + key + "\": missing");
  const json& arr = j.at(key);
  if (!arr.is_array()) throw InputError("\"" + key + "\": expected an array of \"0x...\" codes");
  const std::size_t want = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
  if (arr.size() != want)
    throw InputError("\"" + key + "\": " + std::to_string(arr.size()) + " codes, expected " + std::to_string(want) +
                     " (" + std::to_string(rows) + " x " + std::to_string(cols) + ")");
  Matrix m{&f, rows, cols, std::vector<std::uint64_t>(want)};
  for (std::size_t i = 0; i < want; ++i) {
    const std::string what = "\"" + key + "\"[" + std::to_string(i) + "]";
    const std::uint64_t c = parse_hex_field(arr[i], what, f.storage_bits());
    if (!f.valid_code(c)) throw InputError(what + ": not a valid " + std::string(f.name) + " code");
    m.codes[i] = c;
  }
  return m;
}

int read_dim(const json& j, const char* key) {
  if (!j.contains(key)) throw InputError(std::string("\"") + key + "\": missing");
  const json& v = j.at(key);
  if (!v.is_number_integer() || v.get<long long>() < 1 || v.get<long long>() > (1 << 20))
    throw InputError(std::string("\"") + key + "\": expected an integer in 1..2^20");
  return static_cast<int>(v.get<long long>());
}

const Format& read_format(const json& j, const char* key, const char* fallback) {
  std::string name = fallback;
  if (j.contains(key)) {
    if (!j.at(key).is_string()) throw InputError(std::string("\"") + key + "\": expected a format name");
    name = j.at(key).get<std::string>();
  }
  const Format* f = find_format(name);
  if (!f) throw InputError(std::string("\"") + key + "\": unknown format '" + name + "'");
  if (f->mantissa_bits > 23) throw InputError(std::string("\"") + key + "\": " + f->name + " is wider than f32");
  return *f;
}

std::uint32_t read_f32(const json& j, const char* key, std::uint32_t fallback) {
  if (!j.contains(key)) return fallback;
  return static_cast<std::uint32_t>(parse_hex_field(j.at(key), std::string("\"") + key + "\"", 32));
}

// File mode: operands are .npy files of codes, as unsigned integers of the format's storage width (u8 for
// formats of at most 8 bits, u16 for 16-bit formats, u32 for f32/tf32 bit patterns) or ml_dtypes arrays
// ('<V1', '<f1', '<V2'), both with --a-format / --b-format naming their format, or f16 / f32 arrays holding the
// values themselves (their bit patterns are the codes).  A is M x K, B is K x N, C (f32)
// M x N; scales as the text mode describes them.  The files are turned into the text mode's JSON object,
// so both modes share one code path.
json read_npy_operands(const GemmOptions& o) {
  json j;
  std::string descr;  // of the file `load` read last
  auto load = [&](const std::string& path, const std::string& option, const std::string& key, int& rows, int& cols) {
    io::NpyArray t;
    try {
      t = io::read_npy(path, io::NpyRead{.untyped_codes = true});  // ml_dtypes arrays: their format is named
    } catch (const io::FileError& e) {
      throw InputError(option + ": " + e.what());
    }
    if (t.rank() != 2) throw InputError(option + ": '" + path + "' must be a 2-D array");
    if (t.shape[0] > (1u << 20) || t.shape[1] > (1u << 20)) throw InputError(option + ": '" + path + "' is too large");
    rows = static_cast<int>(t.shape[0]);
    cols = static_cast<int>(t.shape[1]);
    descr = t.descr;
    json arr = json::array();
    const unsigned width = io::dtype_bits(t.dtype);
    if (width == 8) {
      for (std::uint8_t v : t.values<std::uint8_t>()) arr.push_back(hex(v, 2));
    } else if (width == 16) {
      for (std::uint16_t v : t.values<std::uint16_t>()) arr.push_back(hex(v, 4));
    } else if (width == 32) {
      for (std::uint32_t v : t.values<std::uint32_t>()) arr.push_back(hex(v, 8));
    } else {
      throw InputError(option + ": '" + path + "' holds " + std::string(io::dtype_name(t.dtype)) +
                       "; expected 8-, 16- or 32-bit codes");
    }
    j[key] = arr;
    return t.dtype;
  };
  // Integer and ml_dtypes arrays hold codes whose format the file does not name: the option must name it, and
  // its codes must be of the array's width.
  auto operand = [&](const std::string& path, const std::string& option, const std::string& format, const std::string& key,
                     int& rows, int& cols) {
    const io::DType d = load(path, option, key, rows, cols);
    const bool codes = d != io::DType::f16 && d != io::DType::bf16 && d != io::DType::f32;
    if (!codes) return d;
    if (format.empty())
      throw InputError(option + "-format: '" + path + "' holds '" + descr +
                       "' codes of a format the file does not name; name it (e4m3, e5m2, e2m1, bf16, ...)");
    const Format* f = find_format(format);
    if (f && static_cast<unsigned>(f->storage_bits() + 7) / 8 * 8 != io::dtype_bits(d))
      throw InputError(option + "-format: '" + path + "' holds '" + descr + "', " +
                       std::to_string(io::dtype_bits(d) / 8) + "-byte elements, not " + f->name + " codes");
    return d;
  };
  int ar = 0, ac = 0, br = 0, bc = 0;
  const io::DType adt = operand(o.a, "--a", o.a_format, "a", ar, ac);
  if (o.b.empty()) throw InputError("--b: required with --a FILE");
  const io::DType bdt = operand(o.b, "--b", o.b_format, "b", br, bc);
  if (ac != br) throw InputError("--b: A is " + std::to_string(ar) + "x" + std::to_string(ac) + " but B is " +
                                 std::to_string(br) + "x" + std::to_string(bc));
  j["m"] = ar;
  j["k"] = ac;
  j["n"] = bc;
  auto natural = [](io::DType d) -> std::string { return d == io::DType::f16 ? "f16" : d == io::DType::bf16 ? "bf16" : "f32"; };
  j["a_format"] = o.a_format.empty() ? natural(adt) : o.a_format;
  j["b_format"] = o.b_format.empty() ? natural(bdt) : o.b_format;
  int r = 0, cc = 0;
  if (!o.c.empty()) load(o.c, "--c", "c", r, cc);
  if (!o.a_scales.empty()) load(o.a_scales, "--a-scales", "a_scales", r, cc);
  if (!o.b_scales.empty()) load(o.b_scales, "--b-scales", "b_scales", r, cc);
  if (!o.scale_format.empty()) j["scale_format"] = o.scale_format;
  if (o.scale_block) j["scale_block"] = o.scale_block;
  for (auto [key, value] : {std::pair{"alpha", &o.alpha}, std::pair{"beta", &o.beta}, std::pair{"scale_a", &o.scale_a},
                            std::pair{"scale_b", &o.scale_b}})
    if (!value->empty()) j[key] = *value;
  return j;
}

// Writes {"d": [...]} (f32 bits, or f16 bits for an f16 model, or the quantized codes when `qformat` is
// given), plus "amax_d" (over the f32 D) when asked.
void write_result(const GemmOptions& o, const std::vector<std::uint64_t>& d, bool f16_out,
                  const Format* qformat = nullptr, const std::vector<std::uint64_t>& quantized = {}) {
  json out;
  out["d"] = json::array();
  if (qformat)
    for (std::uint64_t v : quantized) out["d"].push_back(hex(*qformat, v));
  float amax = 0;
  for (std::uint64_t v : d) {
    if (!qformat) out["d"].push_back(hex(v, f16_out ? 4 : 8));
    const float x = f16_out ? 0.0f : std::bit_cast<float>(static_cast<std::uint32_t>(v));
    amax = std::fmax(amax, std::fabs(x));  // fmaxf: a NaN element is ignored
  }
  if (o.amax && !f16_out) out["amax_d"] = hex(std::bit_cast<std::uint32_t>(amax), 8);
  if (o.out.size() > 4 && o.out.substr(o.out.size() - 4) == ".npy") {
    // D as an f32 (or f16) array of the given shape, its bit patterns the codes; a quantized D as u8 (or
    // u16) codes.
    const std::uint64_t shape[2] = {static_cast<std::uint64_t>(o.rows), static_cast<std::uint64_t>(o.cols)};
    std::vector<std::uint8_t> bytes;
    const int width = qformat ? (qformat->storage_bits() <= 8 ? 1 : 2) : (f16_out ? 2 : 4);
    const io::DType dtype = qformat ? (width == 1 ? io::DType::u8 : io::DType::u16)
                                    : (f16_out ? io::DType::f16 : io::DType::f32);
    for (std::uint64_t v : qformat ? quantized : d)
      for (int b = 0; b < width; ++b) bytes.push_back(static_cast<std::uint8_t>(v >> (8 * b)));
    try {
      io::write_npy(o.out, dtype, shape, bytes, io::OutputOptions{{o.a, o.b}});
    } catch (const io::FileError& e) {
      throw InputError(std::string("--out: ") + e.what());
    }
    return;
  }
  write_all(o.out, out.dump() + "\n", "--out", {o.a, o.b});
}

// `lowbit gemm --list-models`: name, tab, what it computes (a model: k, F and its source); --json: every row.
void list_models(const GemmOptions& o) {
  if (o.json) {
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (const gemm::Procedure& p : gemm::procedures()) {
      nlohmann::ordered_json r = {{"name", p.name}, {"kind", lowbit::name(p.kind)}, {"description", p.description},
                {"scales", lowbit::name(p.scales)}};
      r["operands"] = json::array();
      for (const Format* f : p.operands) r["operands"].push_back(f->name);
      r["converts_exactly"] = p.conversion == gemm::Conversion::exact;
      r["operand_rule"] = gemm::operand_text(p);
      if (p.model) {
        const gemm::TensorCoreModel& m = *p.model;
        r["model"] = {{"name", m.name}, {"group", m.group}, {"fraction_bits", m.fraction_bits},
                      {"output", lowbit::name(m.output)}, {"block_scale", lowbit::name(m.scale)},
                      {"scale_block", m.scale_block}, {"datapath", lowbit::name(m.datapath)}};
      }
      if (p.interval) r["interval"] = p.interval;
      r["golden"] = json::array();
      for (const gemm::OperandPair& g : p.golden) {
        nlohmann::ordered_json e = {{"a_format", g.a->name}, {"b_format", g.b->name}};
        if (g.scale) e["scale_format"] = g.scale->name, e["scale_block"] = g.scale_block;
        r["golden"].push_back(e);
      }
      rows.push_back(r);
    }
    write_all("-", rows.dump(2) + "\n", "--out");
    return;
  }
  std::string s;
  for (const gemm::Procedure& p : gemm::procedures()) {
    if (p.kind == gemm::Kind::model)
      s += std::string(p.name) + "\tk=" + std::to_string(p.model->group) + " F=" +
           std::to_string(p.model->fraction_bits) + "; " + p.description + "\n";
    else
      s += std::string(p.name) + "\t" + p.description + "\n";
  }
  write_all("-", s, "--out");
}

// The JSON key a library argument id names (the ids are the text mode's keys).
InputError key_error(const ArgumentError& e) { return InputError("\"" + e.argument + "\": " + e.what()); }

void run_gemm(GemmOptions& o) {
  if (o.json && !o.list) throw InputError("--json: only with --list-models");
  if (o.list) return list_models(o);
  if (o.model.empty()) throw InputError("--model: required (see lowbit gemm --list-models)");
  const gemm::Procedure* proc = gemm::find_procedure(o.model);
  if (!proc) throw InputError("--model: unknown model '" + o.model + "' (see lowbit gemm --list-models)");
  json j;
  if (o.a != "-") {
    j = read_npy_operands(o);
  } else {
    if (!o.b.empty()) throw InputError("--b: only with --a FILE (with --a -, B is in the JSON object)");
    const std::string text = read_all(o.a, "--a");
    try {
      j = parse_json(text, "--a");
    } catch (const json::parse_error& e) {
      throw InputError(std::string("--a: malformed JSON at byte ") + std::to_string(e.byte) + ": " + e.what());
    } catch (const json::exception& e) {  // a number too large for a double (out_of_range.406)
      throw InputError(std::string("--a: malformed JSON: ") + e.what());
    }
  }
  if (!j.is_object()) throw InputError("--a: expected one JSON object");
  const int m = read_dim(j, "m"), n = read_dim(j, "n"), k = read_dim(j, "k");
  o.rows = m;
  o.cols = n;
  // D is held as one 8-byte code per element while it is computed (and A, B, C as well): an m x n output past
  // max_output_bytes is refused here, before anything is allocated.
  const std::uint64_t d_bytes = static_cast<std::uint64_t>(m) * static_cast<std::uint64_t>(n) * 8;
  if (d_bytes > max_output_bytes)
    throw InputError("--a: D would be " + std::to_string(m) + "x" + std::to_string(n) + ", " + std::to_string(d_bytes) +
                     " bytes while computed, over the limit of " + std::to_string(max_output_bytes) + " bytes");
  const Format& fa = read_format(j, "a_format", "e4m3");
  const Format& fb = read_format(j, "b_format", "e4m3");
  const Matrix a = read_matrix(j, "a", fa, m, k);
  const Matrix b = read_matrix(j, "b", fb, k, n);
  std::unique_ptr<Matrix> c;
  if (j.contains("c")) c = std::make_unique<Matrix>(read_matrix(j, "c", formats::f32, m, n));
  gemm::Operands ops{.a = &a, .b = &b, .c = c.get()};
  // Block scales: read with the shapes and format the procedure uses (required where its layout has them).
  std::unique_ptr<Matrix> as, bs;
  const bool required = gemm::needs_block_scales(*proc);
  if (required || (proc->scales == gemm::ScaleLayout::optional_k && j.contains("a_scales"))) {
    const Format* sf = j.contains("scale_format") ? &read_format(j, "scale_format", "e8m0") : nullptr;
    const int blk = j.contains("scale_block") ? read_dim(j, "scale_block") : 0;
    gemm::ScaleShape sh;
    try {
      sh = gemm::scale_shape(*proc, m, n, k, sf, blk);
    } catch (const ArgumentError& e) {
      throw key_error(e);
    }
    as = std::make_unique<Matrix>(read_matrix(j, "a_scales", *sh.format, sh.a_rows, sh.a_cols));
    bs = std::make_unique<Matrix>(read_matrix(j, "b_scales", *sh.format, sh.b_rows, sh.b_cols));
    ops.a_scales = as.get();
    ops.b_scales = bs.get();
    ops.scale_block = sh.block;
  } else {
    for (const char* key : {"a_scales", "b_scales", "scale_format", "scale_block"})
      if (j.contains(key)) throw InputError(std::string("\"") + key + "\": " + proc->name + " takes no block scales");
  }
  // D = alpha * scale_a * scale_b * (A B) + beta * C; beta defaults to 1 when C is given (C accumulates,
  // as a tensor core's D = A B + C does) and to 0 otherwise.  cuBLASLt's C and D scales and its optional
  // quantized output ("d_format", e.g. e4m3: rne + satfinite of fp32(d * scale_d)); "amax_d" is taken on D
  // before scale_d and the conversion.
  constexpr std::uint32_t one = 0x3F800000u;
  gemm::Epilogue& e = ops.epilogue;
  e.alpha = read_f32(j, "alpha", one);
  if (j.contains("beta")) e.beta = read_f32(j, "beta", one);
  e.scale_a = read_f32(j, "scale_a", one);
  e.scale_b = read_f32(j, "scale_b", one);
  e.scale_c = read_f32(j, "scale_c", one);
  e.scale_d = read_f32(j, "scale_d", one);
  if (j.contains("d_format")) e.d_format = &read_format(j, "d_format", "f32");
  gemm::RunResult d;
  try {
    d = gemm::run(*proc, ops);
  } catch (const ArgumentError& err) {
    throw key_error(err);
  }
  const bool f16_out = same_format(*d.format, formats::f16);
  write_result(o, d.d, f16_out, d.quantized_format, d.quantized);
}
}  // namespace

void add_gemm(CLI::App& app) {
  auto o = std::make_shared<GemmOptions>();
  auto* sub = app.add_subcommand("gemm", "Run a GEMM reference or tensor-core model on codes (JSON in, JSON out)");
  sub->add_option("--model", o->model, "Model name (see --list-models)");
  sub->add_option("--a", o->a, "'-': one JSON object on stdin with m, n, k, formats, codes, scales; or A.npy");
  sub->add_option("--b", o->b, "B.npy (with --a A.npy)");
  sub->add_option("--c", o->c, "C.npy, f32 (with --a A.npy)");
  sub->add_option("--a-format", o->a_format, "A's format (default: from the .npy dtype, f16 or f32; required for integer and ml_dtypes codes)");
  sub->add_option("--b-format", o->b_format, "B's format");
  sub->add_option("--a-scales", o->a_scales, "A's block scales (.npy of codes)");
  sub->add_option("--b-scales", o->b_scales, "B's block scales (.npy of codes)");
  sub->add_option("--scale-format", o->scale_format, "e8m0, ue4m3 or f32");
  sub->add_option("--scale-block", o->scale_block, "K elements per scale")->check(whole_number(1, lowbit::scale::max_block_side));
  sub->add_option("--alpha", o->alpha, "f32 bits (0x...)");
  sub->add_option("--beta", o->beta, "f32 bits (0x...)");
  sub->add_option("--scale-a", o->scale_a, "per-tensor A scale, f32 bits");
  sub->add_option("--scale-b", o->scale_b, "per-tensor B scale, f32 bits");
  sub->add_option("--out", o->out, "'-', a JSON file, or D.npy (f32)");
  sub->add_flag("--list-models", o->list, "List the models: name, tab, parameters and source");
  sub->add_flag("--json", o->json, "With --list-models: every procedure's row as JSON (kind, operands, scales, model)");
  sub->add_flag("--amax", o->amax, "Also write amax_d, the largest |d| (f32 bits)");
  sub->callback([o] { guarded([&] { run_gemm(*o); }); });
}

}  // namespace lowbit::cli
