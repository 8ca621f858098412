// Block-scaled FP8 checkpoints with weight_scale_inv: DeepSeek-V3's published weights and what Hugging Face
// transformers' FineGrainedFP8 quantizer writes (quant_method "fp8"), read as transformers 5.24 loads them
// (quantizers/quantizer_finegrained_fp8.py, integrations/finegrained_fp8.py; DeepSeek-V3's inference/kernel.py
// weight_dequant):
//   config.json  quantization_config {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [R, C]
//                (DeepSeek-V3: [128, 128]), "activation_scheme": "dynamic" | "static",
//                "modules_to_not_convert": [names], "scale_fmt": "float" (or "ue8m0", not read)}
//   M.weight            F8_E4M3, the weight's shape
//   M.weight_scale_inv  F32 [ceil(rows / R), ceil(cols / C)]: the decode scale, w ~ code * scale_inv per block
//                       (despite its name it is the inverse of the multiplier 448 / amax, not of the scale)
//   M.activation_scale  F32 [] with activation_scheme "static"
// The arithmetic re-quantizing the source is the block row's transformers variant (scale.hpp,
// docs/semantics.md §4.11).  A weight whose shape the block does not divide is left unquantized by
// transformers (Fp8Quantize passes it through); DeepSeek-V3's checkpoint holds partial blocks at the edges,
// which the block scheme takes as they are.
#include <bit>
#include <cmath>
#include <filesystem>
#include <set>
#include <string>

#include "checkpoint_internal.hpp"
#include "lowbit/checkpoint.hpp"
#include "lowbit/quantized.hpp"
#include "lowbit/text.hpp"

namespace lowbit::checkpoint::detail {

namespace {

namespace S = scale;
namespace fs = std::filesystem;
using json = nlohmann::json;

struct Fp8Config {
  std::string path;  // config.json
  int block_rows = 128, block_cols = 128;
  bool static_activations = false;
  std::vector<std::string> not_converted;
};

Fp8Config fp8_config(const std::string& dir) {
  Fp8Config c;
  c.path = (fs::path(dir) / "config.json").string();
  const json j = read_json(c.path);
  const json& q = j.at("quantization_config");  // the caller has seen quant_method "fp8"
  if (q.contains("fmt") && !(q["fmt"].is_string() && q["fmt"].get<std::string>() == "e4m3"))
    throw key_error(c.path, "quantization_config.fmt", "only e4m3 weights are written with weight_scale_inv");
  if (q.contains("scale_fmt") && !q["scale_fmt"].is_null() &&
      !(q["scale_fmt"].is_string() && q["scale_fmt"].get<std::string>() == "float"))
    throw key_error(c.path, "quantization_config.scale_fmt",
                    "power-of-two (ue8m0) scales are not read; f32 weight_scale_inv is (DeepSeek-V3's)");
  if (q.contains("weight_block_size") && !q["weight_block_size"].is_null()) {
    const json& b = q["weight_block_size"];
    if (!b.is_array() || b.size() != 2 || !b[0].is_number_integer() || !b[1].is_number_integer() ||
        b[0].get<long long>() < 1 || b[1].get<long long>() < 1 || b[0].get<long long>() > (1 << 20) ||
        b[1].get<long long>() > (1 << 20))
      throw key_error(c.path, "quantization_config.weight_block_size", "expected [rows, cols], two positive integers");
    c.block_rows = static_cast<int>(b[0].get<long long>());
    c.block_cols = static_cast<int>(b[1].get<long long>());
  }
  if (q.contains("activation_scheme") && !q["activation_scheme"].is_null()) {
    const json& a = q["activation_scheme"];
    if (!a.is_string() || (a.get<std::string>() != "dynamic" && a.get<std::string>() != "static"))
      throw key_error(c.path, "quantization_config.activation_scheme", "expected \"dynamic\" or \"static\"");
    c.static_activations = a.get<std::string>() == "static";
  }
  if (q.contains("modules_to_not_convert") && !q["modules_to_not_convert"].is_null()) {
    if (!q["modules_to_not_convert"].is_array())
      throw key_error(c.path, "quantization_config.modules_to_not_convert", "not a list");
    for (const json& e : q["modules_to_not_convert"]) {
      if (!e.is_string()) throw key_error(c.path, "quantization_config.modules_to_not_convert", "holds a non-string");
      c.not_converted.push_back(e.get<std::string>());
    }
  }
  return c;
}

// transformers' rule for modules_to_not_convert: a name matches when it equals the module or is a dotted part of it.
bool not_converted(const Fp8Config& c, const std::string& module) {
  for (const std::string& n : c.not_converted)
    if (module == n || module.ends_with("." + n) || module.starts_with(n + ".") ||
        module.find("." + n + ".") != std::string::npos)
      return true;
  return false;
}

class Fp8BlockVerifier {
 public:
  Fp8BlockVerifier(const TensorSet& src, const TensorSet& q, const Fp8Config& c, CheckpointReport& rep)
      : src_(src), q_(q), c_(c), rep_(rep) {}

  void run() {
    std::set<std::string> modules;
    for (const auto& [k, where] : q_.where) {
      if (k.ends_with(".weight_scale_inv")) modules.insert(k.substr(0, k.size() - 17));
      if (k.ends_with(".weight") && q_.at(k).dtype == io::DType::f8_e4m3) modules.insert(k.substr(0, k.size() - 7));
    }
    if (modules.empty())
      throw io::FileError(q_.path, "tensors", "no weight_scale_inv or F8_E4M3 weight: nothing is quantized");
    for (const std::string& m : modules) verify_module(m);
  }

 private:
  void problem(const std::string& s) { rep_.problems.push_back(s); }

  void verify_module(const std::string& m) {
    const std::string data_key = m + ".weight", scale_key = m + ".weight_scale_inv";
    if (not_converted(c_, m)) {
      problem(m +
              ": quantized, but quantization_config.modules_to_not_convert names it (a loader keeps it unquantized)");
      return;
    }
    bool complete = true;
    if (!q_.contains(data_key)) {
      problem(data_key + ": missing (its weight_scale_inv is there)");
      complete = false;
    }
    if (!q_.contains(scale_key)) {
      problem(scale_key +
              ": missing: every F8_E4M3 weight needs its block decode scales; a loader without them "
              "reads the e4m3 codes as the weights");
      complete = false;
    }
    if (c_.static_activations && !q_.contains(m + ".activation_scale"))
      problem(m + ".activation_scale: missing (activation_scheme \"static\" quantizes the inputs with it)");
    if (!complete) return;

    const io::Tensor& st = src_.at(data_key);
    const auto values = quantized::float_values(st);
    if (!values)
      throw key_error(src_.file_of(data_key), data_key,
                      "dtype " + std::string(io::dtype_name(st.dtype)) + " is not F32, BF16 or F16");
    const auto dims = quantized::matrix_dims(st.shape);
    if (st.shape.size() != 2 || !dims)
      throw key_error(src_.file_of(data_key), data_key, "shape " + shape_text(st.shape) + " is not a matrix");
    S::Request req;
    req.scheme = S::Scheme::block;
    req.element = &formats::e4m3;
    req.variant = S::Variant::transformers;
    req.block_rows = c_.block_rows;
    req.block = c_.block_cols;
    S::Options so;
    if (const auto refused = S::resolve(req, so))
      throw key_error(c_.path, "quantization_config.weight_block_size",
                      S::argument_of(refused->option) + ": " + refused->message);
    const S::Quantized q = S::quantize(S::Tensor{dims->first, dims->second, *values}, so);

    TensorReport tr;
    tr.name = m;
    tr.element = q.element;
    tr.scale_format = q.scale_format;
    tr.recipe = "fp8 weight_scale_inv " + std::to_string(c_.block_rows) + "x" + std::to_string(c_.block_cols) +
                " (block scheme, transformers variant)";
    std::string why;
    const auto stored = stored_codes(q_.at(data_key), data_key, st.shape, false, why);
    if (!stored) {
      problem(why);
      return;
    }
    const io::Tensor& sc = q_.at(scale_key);
    const std::vector<std::uint64_t> want{static_cast<std::uint64_t>(q.scale_rows()),
                                          static_cast<std::uint64_t>(q.scale_cols())};
    if (sc.dtype != io::DType::f32) {
      problem(scale_key + ": dtype " + std::string(io::dtype_name(sc.dtype)) +
              ", not F32 (the decode scale per block)");
      return;
    }
    if (sc.shape != want) {
      std::string w = scale_key + ": shape " + shape_text(sc.shape) + ", but blocks of " +
                      std::to_string(c_.block_rows) + "x" + std::to_string(c_.block_cols) + " over " +
                      shape_text(st.shape) + " take " + shape_text(want);
      const std::vector<std::uint64_t> flipped{want[1], want[0]};
      if (sc.shape == flipped && want[0] != want[1])
        w += "; it is the transpose (blocks of the weight's columns first)";
      problem(w);
      return;
    }
    std::vector<std::uint64_t> scales;
    for (std::uint32_t v : sc.values<std::uint32_t>()) scales.push_back(v);
    // weight_scale_inv confused with the multiplier it inverts: every block's stored value near 1 / expected.
    std::size_t inverse = 0, nontrivial = 0;
    for (std::size_t i = 0; i < scales.size(); ++i) {
      const float e = std::bit_cast<float>(static_cast<std::uint32_t>(q.scales[i]));
      const float a = std::bit_cast<float>(static_cast<std::uint32_t>(scales[i]));
      if (e == 1.0f || !std::isfinite(e)) continue;
      ++nontrivial;
      if (near_inverse(a, e)) ++inverse;
    }
    compare_blocks(q, *stored, scales, tr);
    if (nontrivial > 0 && inverse == nontrivial)
      tr.notes.insert(tr.notes.begin(),
                      scale_key +
                          ": holds the multipliers 448 / amax, the inverses of the decode scales that "
                          "weight_scale_inv stores (w = code * weight_scale_inv)");
    rep_.tensors.push_back(std::move(tr));
  }

  const TensorSet& src_;
  const TensorSet& q_;
  const Fp8Config& c_;
  CheckpointReport& rep_;
};

}  // namespace

CheckpointReport verify_fp8_block(const std::string& source, const std::string& dir) {
  const Fp8Config c = fp8_config(dir);
  const TensorSet q = read_tensor_set(dir);
  const TensorSet src = read_tensor_set(source);
  CheckpointReport rep;
  rep.format = CheckpointFormat::fp8_block;
  Fp8BlockVerifier(src, q, c, rep).run();
  return rep;
}

}  // namespace lowbit::checkpoint::detail
