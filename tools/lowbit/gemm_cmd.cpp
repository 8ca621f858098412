// `lowbit gemm`: the GEMM references and tensor-core models from the command line.
#include <bit>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "cli_util.hpp"
#include "commands.hpp"
#include "lowbit/gemm.hpp"
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
  bool amax = false;
  int rows = 0, cols = 0;  // D's shape, once known
  // File mode: .npy operands (see read_npy_operands).
  std::string b, c, a_format, b_format, a_scales, b_scales, scale_format, alpha, beta, scale_a, scale_b;
  int scale_block = 0;
};

// Models beyond the tensor-core presets: the exact reference, f32 accumulation orders, promotion.
struct ExtraModel {
  const char* name;
  const char* description;
};
const ExtraModel extra_models[] = {
    {"exact", "exact sum of products (and C), rounded once to f32 with rne"},
    {"f32-sequential", "acc = fl(acc + fl(a*b)) in K order"},
    {"f32-fma", "acc = fmaf(a, b, acc) in K order"},
    {"f32-pairwise", "products fl(a*b) summed by recursive halving"},
    {"f32-splitk4", "four contiguous K slices, each sequential, then summed in order"},
    {"f32-blocked128", "each 128-element block summed exactly and rounded to f32, then added in f32"},
    {"hopper-fp8-promote128", "hopper-fp8 inside 128-element blocks from zero, each promoted with an fp32 FMA"},
    {"hopper-fp8-blockscaled", "DeepGEMM: hopper-fp8 per 128-block, promoted with fp32(sa*sb) (1x128 / 128x128 f32 scales)"},
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
// formats of at most 8 bits, u16 for 16-bit formats, u32 for f32/tf32 bit patterns), or f16 / f32 / bf16
// arrays holding the values themselves (their bit patterns are the codes).  A is M x K, B is K x N, C (f32)
// M x N; scales as the text mode describes them.  The files are turned into the text mode's JSON object,
// so both modes share one code path.
json read_npy_operands(const GemmOptions& o) {
  json j;
  auto load = [&](const std::string& path, const std::string& option, const std::string& key, int& rows, int& cols) {
    io::NpyArray t;
    try {
      t = io::read_npy(path);
    } catch (const io::FileError& e) {
      throw InputError(option + ": " + e.what());
    }
    if (t.rank() != 2) throw InputError(option + ": '" + path + "' must be a 2-D array");
    if (t.shape[0] > (1u << 20) || t.shape[1] > (1u << 20)) throw InputError(option + ": '" + path + "' is too large");
    rows = static_cast<int>(t.shape[0]);
    cols = static_cast<int>(t.shape[1]);
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
  int ar = 0, ac = 0, br = 0, bc = 0;
  const io::DType adt = load(o.a, "--a", "a", ar, ac);
  if (o.b.empty()) throw InputError("--b: required with --a FILE");
  const io::DType bdt = load(o.b, "--b", "b", br, bc);
  if (ac != br) throw InputError("--b: A is " + std::to_string(ar) + "x" + std::to_string(ac) + " but B is " +
                                 std::to_string(br) + "x" + std::to_string(bc));
  j["m"] = ar;
  j["k"] = ac;
  j["n"] = bc;
  auto natural = [](io::DType d) -> std::string {
    switch (d) {
      case io::DType::f16: return "f16";
      case io::DType::bf16: return "bf16";
      case io::DType::f32: return "f32";
      default: return "e4m3";
    }
  };
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
      io::write_npy(o.out, dtype, shape, bytes);
    } catch (const io::FileError& e) {
      throw InputError(std::string("--out: ") + e.what());
    }
    return;
  }
  write_all(o.out, out.dump() + "\n", "--out");
}

void run_gemm(GemmOptions& o) {
  if (o.list) {
    std::string s;
    for (const auto& m : extra_models) s += std::string(m.name) + "\t" + m.description + "\n";
    for (const auto& m : gemm::models())
      s += std::string(m.name) + "\tk=" + std::to_string(m.group) + " F=" + std::to_string(m.fraction_bits) + "; " +
           m.source + "\n";
    write_all("-", s, "--out");
    return;
  }
  if (o.model.empty()) throw InputError("--model: required (see lowbit gemm --list-models)");
  json j;
  if (o.a != "-") {
    j = read_npy_operands(o);
  } else {
    if (!o.b.empty()) throw InputError("--b: only with --a FILE (with --a -, B is in the JSON object)");
    const std::string text = read_all(o.a, "--a");
    try {
      j = json::parse(text);
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
  const Format& fa = read_format(j, "a_format", "e4m3");
  const Format& fb = read_format(j, "b_format", "e4m3");
  const Matrix a = read_matrix(j, "a", fa, m, k);
  const Matrix b = read_matrix(j, "b", fb, k, n);
  std::unique_ptr<Matrix> c;
  if (j.contains("c")) c = std::make_unique<Matrix>(read_matrix(j, "c", formats::f32, m, n));
  // D = alpha * scale_a * scale_b * (A B) + beta * C; beta defaults to 1 when C is given (C accumulates,
  // as a tensor core's D = A B + C does) and to 0 otherwise.
  constexpr std::uint32_t one = 0x3F800000u;
  const std::uint32_t alpha = read_f32(j, "alpha", one), beta = read_f32(j, "beta", c ? one : 0);
  const std::uint32_t sa = read_f32(j, "scale_a", one), sb = read_f32(j, "scale_b", one);
  // cuBLASLt's C and D scales and its optional quantized output ("d_format", e.g. e4m3: rne + satfinite of
  // fp32(d * scale_d)); "amax_d" is taken on D before scale_d and the conversion.
  const std::uint32_t sc = read_f32(j, "scale_c", one), sd = read_f32(j, "scale_d", one);
  const Format* d_format = nullptr;
  if (j.contains("d_format")) {
    d_format = &read_format(j, "d_format", "f32");
    if (d_format->bits > 16) throw InputError("\"d_format\": a quantized output is a format of at most 16 bits");
  } else if (sd != one) {
    throw InputError("\"scale_d\": only with a quantized output (\"d_format\")");
  }
  // Without an epilogue, C enters the accumulation itself; with one, the model runs from zero and the
  // epilogue (gemm::apply_epilogue) combines its result with C.
  const bool epilogue = alpha != one || (c && beta != one) || sa != one || sb != one || (c && sc != one);
  const Matrix* cin = epilogue ? nullptr : c.get();

  std::vector<std::uint64_t> d;
  const std::string& name = o.model;
  auto order = [&](gemm::Order ord) {
    gemm::OrderOptions oo;
    oo.order = ord;
    return gemm::accumulate(a, b, cin, oo);
  };
  const gemm::TensorCoreModel* tc = gemm::find_model(name);
  const gemm::TensorCoreModel& hopper = *gemm::find_model("hopper-fp8");
  std::uint32_t esa = sa, esb = sb;  // the scales left for the epilogue
  if (name == "exact" && j.contains("a_scales")) {
    // Block-scaled exact reference: "scale_format" e8m0 / ue4m3 (MX, NVFP4: one B scale per column) or f32
    // (DeepGEMM: B scales per 128x128 block), "scale_block" the K block (default 32, 16 for ue4m3, 128 for f32).
    const Format& sf = read_format(j, "scale_format", "e8m0");
    const int def = &sf == &formats::f32 ? 128 : (&sf == &formats::ue4m3 ? 16 : 32);
    const int blk = j.contains("scale_block") ? read_dim(j, "scale_block") : def;
    const int bn = &sf == &formats::f32 ? 128 : 1;
    const int kb = (k + blk - 1) / blk;
    const Matrix as = read_matrix(j, "a_scales", sf, m, kb);
    const Matrix bs = read_matrix(j, "b_scales", sf, kb, (n + bn - 1) / bn);
    if (epilogue) throw InputError("\"alpha\"/\"beta\"/\"scale_a\": not combined with block scales");
    write_result(o, gemm::exact_block_scaled(a, b, as, bs, blk, bn, c.get(), formats::f32, Policy{}), false);
    return;
  }
  if (name == "exact") {
    gemm::ExactOptions eo;
    eo.alpha = alpha;
    eo.beta = beta;
    eo.scale_a = sa;
    eo.scale_b = sb;
    eo.scale_c = sc;
    const std::vector<std::uint64_t> dd = gemm::exact(a, b, c.get(), eo);
    if (d_format) {
      // Rounded once, from the exact scale_d * D, into the output format.
      gemm::ExactOptions q = eo;
      q.scale_d = sd;
      q.out = d_format;
      q.policy.overflow = Overflow::satfinite;
      write_result(o, dd, false, d_format, gemm::exact(a, b, c.get(), q));
    } else {
      write_result(o, dd, false);
    }
    return;
  } else if (name == "f32-sequential") {
    d = order(gemm::Order::sequential);
  } else if (name == "f32-fma") {
    d = order(gemm::Order::sequential_fma);
  } else if (name == "f32-pairwise") {
    d = order(gemm::Order::pairwise);
  } else if (name == "f32-splitk4") {
    d = order(gemm::Order::split_k);
  } else if (name == "f32-blocked128") {
    d = order(gemm::Order::blocked);
  } else if (name == "hopper-fp8-promote128") {
    // The promotion multiplies each block by s = fp32(scale_a * scale_b) (DeepGEMM's FMA).
    const float s = std::bit_cast<float>(sa) * std::bit_cast<float>(sb);
    d = gemm::run_promoted(hopper, 128, a, b, cin, std::bit_cast<std::uint32_t>(s));
    esa = esb = one;
  } else if (name == "hopper-fp8-blockscaled") {
    const int kb = (k + 127) / 128, nb = (n + 127) / 128;
    const Matrix as = read_matrix(j, "a_scales", formats::f32, m, kb);
    const Matrix bs = read_matrix(j, "b_scales", formats::f32, kb, nb);
    d = gemm::run_block_scaled(hopper, a, b, as, bs, cin);
  } else if (tc && tc->scale != gemm::BlockScale::none) {
    const Format& sf = read_format(j, "scale_format", tc->scale_block == 16 ? "ue4m3" : "e8m0");
    const int blk = j.contains("scale_block") ? read_dim(j, "scale_block") : tc->scale_block;
    if (blk != tc->scale_block)
      throw InputError("\"scale_block\": model " + name + " uses " + std::to_string(tc->scale_block));
    const int kb = (k + blk - 1) / blk;
    const Matrix as = read_matrix(j, "a_scales", sf, m, kb);
    const Matrix bs = read_matrix(j, "b_scales", sf, kb, n);
    d = gemm::run_model(*tc, a, b, cin, &as, &bs);
  } else if (tc) {
    for (const auto& [key, f] : {std::pair{"a_format", &fa}, std::pair{"b_format", &fb}})
      if (!gemm::takes_operands(*tc, *f))
        throw InputError(std::string("\"") + key + "\": model " + name + " converts its operands to f16 exactly; " +
                         f->name + " has values that f16 lacks");
    d = gemm::run_model(*tc, a, b, cin);
  } else {
    throw InputError("--model: unknown model '" + name + "' (see lowbit gemm --list-models)");
  }
  const bool f16_out = tc && tc->output == gemm::Output::f16_rne;
  if (epilogue) {
    if (f16_out) throw InputError("--model: " + name + " writes f16; alpha, beta and scales are not supported there");
    d = gemm::apply_epilogue(d, c.get(), alpha, beta, esa, esb, sc);
  }
  if (d_format) {
    if (f16_out) throw InputError("\"d_format\": " + name + " writes f16");
    write_result(o, d, false, d_format, gemm::quantize_output(d, sd, *d_format));
    return;
  }
  write_result(o, d, f16_out);
}

}  // namespace

void add_gemm(CLI::App& app) {
  auto o = std::make_shared<GemmOptions>();
  auto* sub = app.add_subcommand("gemm", "Run a GEMM reference or tensor-core model on codes (JSON in, JSON out)");
  sub->add_option("--model", o->model, "Model name (see --list-models)");
  sub->add_option("--a", o->a, "'-': one JSON object on stdin with m, n, k, formats, codes, scales; or A.npy");
  sub->add_option("--b", o->b, "B.npy (with --a A.npy)");
  sub->add_option("--c", o->c, "C.npy, f32 (with --a A.npy)");
  sub->add_option("--a-format", o->a_format, "A's format (default: from the .npy dtype, e4m3 for integer codes)");
  sub->add_option("--b-format", o->b_format, "B's format");
  sub->add_option("--a-scales", o->a_scales, "A's block scales (.npy of codes)");
  sub->add_option("--b-scales", o->b_scales, "B's block scales (.npy of codes)");
  sub->add_option("--scale-format", o->scale_format, "e8m0, ue4m3 or f32");
  sub->add_option("--scale-block", o->scale_block, "K elements per scale");
  sub->add_option("--alpha", o->alpha, "f32 bits (0x...)");
  sub->add_option("--beta", o->beta, "f32 bits (0x...)");
  sub->add_option("--scale-a", o->scale_a, "per-tensor A scale, f32 bits");
  sub->add_option("--scale-b", o->scale_b, "per-tensor B scale, f32 bits");
  sub->add_option("--out", o->out, "'-', a JSON file, or D.npy (f32)");
  sub->add_flag("--list-models", o->list, "List the models: name, tab, parameters and source");
  sub->add_flag("--amax", o->amax, "Also write amax_d, the largest |d| (f32 bits)");
  sub->callback([o] { guarded([&] { run_gemm(*o); }); });
}

}  // namespace lowbit::cli
