// Writing checkpoints as the exporters write them (`lowbit quantize --export`): the tensors, dtypes, shapes,
// nibble order and config files that checkpoint_formats.cpp (compressed-tensors 0.20.1) and
// checkpoint_modelopt.cpp (ModelOpt 0.47.0) read, computed under the same scale-row variants, so that
// verify_checkpoint reads an export back identical.
//
// What is quantized mirrors the exporters' defaults: compressed-tensors' presets target Linear modules and
// LLM Compressor's examples ignore lm_head (the fixtures' config.json: targets ["Linear"], ignore ["lm_head"]);
// ModelOpt's *_DEFAULT_CFG quantizes every Linear but lm_head and lists the unquantized modules with a weight
// in exclude_modules (the fixtures' hf_quant_config.json: ["lm_head", "model.embed_tokens"]).  Safetensors do
// not say which module is a Linear, so a Linear weight is a matrix M.weight of F32, BF16 or F16 whose module
// is not an embedding (last name component embed_tokens, as Llama, Qwen and Mistral name it).
//
// Activation scales (compressed-tensors FP8 and NVFP4, ModelOpt FP8 and NVFP4) are calibration results from
// activations this function never sees, derived by each exporter's own observer (LLM Compressor's
// static_minmax, ModelOpt's max calibrator), so they are taken as stored values from a file and copied bit
// for bit; a recipe that needs them and has none is refused rather than given a placeholder scale, which
// would clamp or waste the activations' range without a word (the "missing input_scale" of the reports).
#include <algorithm>
#include <bit>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>

#include "checkpoint_internal.hpp"
#include "lowbit/checkpoint.hpp"
#include "lowbit/convert.hpp"
#include "lowbit/error.hpp"
#include "lowbit/output.hpp"
#include "lowbit/pack.hpp"
#include "lowbit/quantized.hpp"
#include "lowbit/text.hpp"

namespace lowbit::checkpoint {

namespace {

namespace S = scale;
namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace detail;

// How the activation scale of a recipe is stored, if it is.
enum class InputScale : std::uint8_t { none, ct_fp8, ct_nvfp4, modelopt };

// What one recipe writes.
struct Plan {
  CheckpointFormat format = CheckpointFormat::compressed_tensors;
  std::string recipe;
  S::Request request;
  bool weight_dtype_compute = false;  // the scales are computed in the weight's dtype (--compute)
  bool packed = false;                // FP4 codes two a byte, the even column in the low nibble
  int cols_multiple = 1;              // the exporter's group length the columns must divide into
  InputScale input = InputScale::none;
  std::string input_suffix;  // ".input_scale" / ".input_global_scale"
  std::optional<CtPreset> ct;
  std::optional<ModeloptAlgo> modelopt;
};

Plan plan_of(const ExportOptions& o) {
  Plan p;
  p.format = o.format;
  p.recipe = o.recipe;
  S::Request& r = p.request;
  if (o.format == CheckpointFormat::compressed_tensors) {
    const auto preset = parse<CtPreset>(o.recipe);
    if (!preset)
      throw ArgumentError("recipe", "'" + echo_text(o.recipe, 40) +
                                        "' is not a compressed-tensors preset lowbit writes (" + choices<CtPreset>() +
                                        ")");
    p.ct = *preset;
    r.variant = S::Variant::compressed_tensors;
    r.element = &formats::e4m3;
    p.weight_dtype_compute = true;
    switch (*preset) {
      case CtPreset::fp8:
        r.scheme = S::Scheme::tensor;
        p.input = InputScale::ct_fp8;
        p.input_suffix = ".input_scale";
        break;
      case CtPreset::fp8_dynamic: r.scheme = S::Scheme::token; break;  // "channel": one scale per output row
      case CtPreset::fp8_block:
        r.scheme = S::Scheme::block;
        r.block_rows = 128;
        r.block = 128;
        break;
      case CtPreset::nvfp4:
      case CtPreset::nvfp4a16:
        r.scheme = S::Scheme::nvfp4;
        r.element = &formats::e2m1;
        p.packed = true;
        p.cols_multiple = 16;
        if (*preset == CtPreset::nvfp4) {
          p.input = InputScale::ct_nvfp4;
          p.input_suffix = ".input_global_scale";
        }
        break;
      case CtPreset::mxfp4a16:
        // compressed-tensors' MXFP4 is the plain MX scheme with the `even` scale rule (docs/semantics.md §4.8).
        r.variant.reset();
        p.weight_dtype_compute = false;
        r.scheme = S::Scheme::mx;
        r.element = &formats::e2m1;
        r.block = 32;
        r.mx_rule = S::MxRule::even;
        p.packed = true;
        p.cols_multiple = 32;
        break;
    }
  } else if (o.format == CheckpointFormat::modelopt) {
    const auto algo = parse<ModeloptAlgo>(o.recipe);
    if (!algo)
      throw ArgumentError("recipe", "'" + echo_text(o.recipe, 40) + "' is not a ModelOpt quant_algo lowbit writes (" +
                                        choices<ModeloptAlgo>() + ")");
    p.modelopt = *algo;
    r.variant = S::Variant::modelopt;
    p.input = InputScale::modelopt;
    p.input_suffix = ".input_scale";
    if (*algo == ModeloptAlgo::fp8) {
      r.scheme = S::Scheme::tensor;
      r.element = &formats::e4m3;
      p.weight_dtype_compute = true;
    } else {
      r.scheme = S::Scheme::nvfp4;
      r.element = &formats::e2m1;
      p.packed = true;
      p.cols_multiple = 16;
    }
  } else {
    throw ArgumentError(
        "export", "'" + std::string(name(o.format)) + "' is not an exporter's format (compressed-tensors, modelopt)");
  }
  return p;
}

// An --ignore name against a module name: the name itself, its last components, or "re:" and a regular
// expression searched in it (compressed-tensors' spelling of a pattern).
bool ignore_matches(const std::string& pattern, const std::string& module) {
  if (pattern.rfind("re:", 0) == 0) return std::regex_search(module, std::regex(pattern.substr(3)));
  return module == pattern || (module.size() > pattern.size() && module.ends_with("." + pattern));
}

bool is_float(io::DType d) { return d == io::DType::f32 || d == io::DType::bf16 || d == io::DType::f16; }

// The f32 scales `bits` in `dtype` (the weight's: compressed-tensors keeps it), each exactly: the scale rows
// compute them in that dtype, so a scale that does not fit is a defect of this code, not of the input.
io::Tensor scales_in(io::DType dtype, std::vector<std::uint64_t> shape, const std::vector<std::uint64_t>& bits) {
  if (dtype == io::DType::f32) {
    std::vector<std::uint32_t> v(bits.begin(), bits.end());
    return io::Tensor::from_values<std::uint32_t>(dtype, std::move(shape), std::span<const std::uint32_t>(v));
  }
  const Format& to = dtype == io::DType::bf16 ? formats::bf16 : formats::f16;
  std::vector<std::uint16_t> v;
  for (std::uint64_t b : bits) {
    const Result r = convert(formats::f32, b, to, Policy{});
    if (r.ternary != 0)
      throw std::logic_error("export: a scale computed in " + std::string(to.name) + " does not fit it");
    v.push_back(static_cast<std::uint16_t>(r.code));
  }
  return io::Tensor::from_values<std::uint16_t>(dtype, std::move(shape), std::span<const std::uint16_t>(v));
}

io::Tensor one_f32(std::uint32_t bits, std::vector<std::uint64_t> shape) {
  return io::Tensor::from_values<std::uint32_t>(io::DType::f32, std::move(shape), std::span(&bits, 1));
}

io::Tensor bytes_tensor(io::DType dtype, std::vector<std::uint64_t> shape, std::vector<std::uint8_t> bytes) {
  io::Tensor t{dtype, std::move(shape), std::move(bytes)};
  t.check_consistent();
  return t;
}

// compressed-tensors 0.20.1's config group of each preset (quant_scheme.py; the fields as its
// QuantizationArgs serialise them, as the fixtures' config.json hold them).
json ct_group(CtPreset p) {
  json w = {{"dynamic", false}, {"num_bits", 8}, {"symmetric", true}, {"type", "float"}, {"group_size", nullptr}};
  json in = nullptr;
  switch (p) {
    case CtPreset::fp8:
      w["strategy"] = "tensor";
      in = {{"dynamic", false},     {"group_size", nullptr}, {"num_bits", 8},  {"observer", "static_minmax"},
            {"strategy", "tensor"}, {"symmetric", true},     {"type", "float"}};
      break;
    case CtPreset::fp8_dynamic:
      w["strategy"] = "channel";
      in = {{"dynamic", true},     {"group_size", nullptr}, {"num_bits", 8},
            {"strategy", "token"}, {"symmetric", true},     {"type", "float"}};
      break;
    case CtPreset::fp8_block:
      w["strategy"] = "block";
      w["block_structure"] = {128, 128};
      in = {{"dynamic", true},     {"group_size", 128}, {"num_bits", 8},
            {"strategy", "group"}, {"symmetric", true}, {"type", "float"}};
      break;
    case CtPreset::nvfp4:
    case CtPreset::nvfp4a16:
      w["num_bits"] = 4;
      w["group_size"] = 16;
      w["strategy"] = "tensor_group";
      w["scale_dtype"] = "torch.float8_e4m3fn";
      if (p == CtPreset::nvfp4)
        in = {{"dynamic", "local"},
              {"group_size", 16},
              {"num_bits", 4},
              {"observer", "static_minmax"},
              {"scale_dtype", "torch.float8_e4m3fn"},
              {"strategy", "tensor_group"},
              {"symmetric", true},
              {"type", "float"}};
      break;
    case CtPreset::mxfp4a16:
      w["num_bits"] = 4;
      w["group_size"] = 32;
      w["strategy"] = "group";
      w["scale_dtype"] = "torch.uint8";
      break;
  }
  const char* format = p == CtPreset::mxfp4a16                             ? "mxfp4-pack-quantized"
                       : (p == CtPreset::nvfp4 || p == CtPreset::nvfp4a16) ? "nvfp4-pack-quantized"
                                                                           : "float-quantized";
  return {{"format", format},
          {"input_activations", in},
          {"output_activations", nullptr},
          {"targets", {"Linear"}},
          {"weights", w}};
}

class Exporter {
 public:
  Exporter(const ExportOptions& o, const Plan& p, const TensorSet& src) : o_(o), p_(p), src_(src) {}

  void select() {
    for (const std::string& pat : o_.ignore)
      if (pat.rfind("re:", 0) == 0) try {
          (void)std::regex(pat.substr(3));
        } catch (const std::regex_error& e) {
          throw ArgumentError("ignore", "'" + echo_text(pat, 80) + "' is not a regular expression: " + e.what());
        }
    std::vector<bool> used(o_.ignore.size(), false);
    for (const auto& [key, where] : src_.where) {
      if (!key.ends_with(".weight") || src_.at(key).rank() != 2) continue;
      const std::string m = key.substr(0, key.size() - 7);
      bool skip = leaf_of(m) == "embed_tokens" || ignore_matches("lm_head", m);
      for (std::size_t i = 0; i < o_.ignore.size(); ++i)
        if (ignore_matches(o_.ignore[i], m)) {
          skip = true;
          used[i] = true;
          user_ignored_.insert(m);
        }
      if (skip) {
        unquantized_.push_back(m);
        continue;
      }
      const io::Tensor& t = src_.at(key);
      if (!is_float(t.dtype))
        throw key_error(src_.file_of(key), key,
                        "dtype " + std::string(io::dtype_name(t.dtype)) +
                            " is not F32, BF16 or F16: a Linear weight to quantize (--ignore the module to copy it)");
      if (p_.cols_multiple > 1 && t.shape[1] % static_cast<std::uint64_t>(p_.cols_multiple) != 0)
        throw key_error(src_.file_of(key), key,
                        std::to_string(t.shape[1]) + " columns, not a multiple of " + p_.recipe + "'s " +
                            std::to_string(p_.cols_multiple) + "-element group (the exporter refuses it too)");
      for (const char* suffix : {".weight_scale", ".weight_packed", ".weight_global_scale", ".weight_scale_2",
                                 ".input_scale", ".input_global_scale"})
        if (src_.contains(m + suffix))
          throw key_error(src_.file_of(m + suffix), m + suffix, "present: the source is already quantized");
      modules_.push_back(m);
    }
    for (std::size_t i = 0; i < o_.ignore.size(); ++i)
      if (!used[i])
        throw ArgumentError(
            "ignore", "'" + echo_text(o_.ignore[i], 80) + "' names no module with a matrix weight in " + src_.path);
    if (modules_.empty()) throw io::FileError(src_.path, "tensors", "no Linear weight (a matrix M.weight) to quantize");
  }

  void read_input_scales() {
    if (p_.input == InputScale::none) {
      if (!o_.input_scales.empty())
        throw ArgumentError("input_scales", p_.recipe + " stores no activation scale (its activations are " +
                                                (p_.ct == CtPreset::fp8_dynamic || p_.ct == CtPreset::fp8_block
                                                     ? "quantized dynamically)"
                                                     : "not quantized)"));
      return;
    }
    const std::string first = modules_.front() + p_.input_suffix;
    if (o_.input_scales.empty())
      throw ArgumentError(
          "input_scales",
          "required: " + std::string(name(p_.format)) + " " + p_.recipe +
              " stores each quantized module's static activation scale, from calibration on activations "
              "(" +
              first + " and " + std::to_string(modules_.size() - 1) + " more); give them in a safetensors file");
    io::Safetensors f;
    try {
      f = io::read_safetensors(o_.input_scales);
    } catch (const io::FileError& e) { throw ArgumentError("input_scales", e.what()); }
    const std::set<std::string> wanted(modules_.begin(), modules_.end());
    auto bad = [&](const std::string& key, const std::string& why) {
      return ArgumentError("input_scales", key_error(f.path, key, why).what());
    };
    for (const auto& [key, t] : f.tensors)
      if (!key.ends_with(p_.input_suffix) || !wanted.count(key.substr(0, key.size() - p_.input_suffix.size())))
        throw bad(key, "not the " + p_.input_suffix.substr(1) + " of a module " + p_.recipe + " quantizes");
    for (const std::string& m : modules_) {
      const std::string key = m + p_.input_suffix;
      if (!f.contains(key))
        throw bad(key, "missing: " + p_.recipe + " stores " + key + ", the activation scale of " + m);
      const io::Tensor& t = f.tensor(key);
      const io::DType want = p_.input == InputScale::ct_fp8 ? src_.at(m + ".weight").dtype : io::DType::f32;
      if (t.dtype != want || t.elements() != 1)
        throw bad(key, std::string(io::dtype_name(t.dtype)) + " " + shape_text(t.shape) + ", not one " +
                           std::string(io::dtype_name(want)) + " value" +
                           (p_.input == InputScale::ct_fp8 ? " (compressed-tensors keeps the weight's dtype)" : ""));
      const auto bits = float_bits(t);
      const float v = std::bit_cast<float>(static_cast<std::uint32_t>((*bits)[0]));
      if (!(std::isfinite(v) && v > 0.0f))
        throw bad(key, f32_text(static_cast<std::uint32_t>((*bits)[0])) + " is not a positive finite scale");
      // compressed-tensors stores [1]; ModelOpt a scalar [].
      inputs_[m] = io::Tensor{
          t.dtype, p_.input == InputScale::modelopt ? std::vector<std::uint64_t>{} : std::vector<std::uint64_t>{1},
          t.bytes};
    }
    // ModelOpt's export gives fused projections one input amax, the largest (quant_utils.py
    // preprocess_linear_fusion: torch.max over the group's input_quantizer.amax), so one input_scale, the
    // largest; NVFP4 only, as for weight_scale_2 (FP8 is not fused).
    if (p_.modelopt != ModeloptAlgo::nvfp4) return;
    auto value = [&](const std::string& m) { return std::bit_cast<float>(inputs_.at(m).values<std::uint32_t>()[0]); };
    std::map<std::string, io::Tensor> fused;
    for (const std::string& m : modules_) {
      std::string largest = m;
      for (const std::string& peer : group_of(m))
        if (value(peer) > value(largest)) largest = peer;
      fused[m] = inputs_.at(largest);
    }
    inputs_ = std::move(fused);
  }

  // The fused projections m shares a global scale with, m among them; empty when none.
  std::vector<std::string> group_of(const std::string& m) const {
    return fused_group(m, o_.fused, [&](const std::string& p) {
      return std::find(modules_.begin(), modules_.end(), p) != modules_.end();
    });
  }

  float amax(const std::string& m) {
    const auto it = amax_.find(m);
    if (it != amax_.end()) return it->second;
    return amax_[m] = amax_of(*quantized::float_values(src_.at(m + ".weight")));
  }

  // Every tensor of the export.
  std::map<std::string, io::Tensor> tensors() {
    std::map<std::string, io::Tensor> out;
    const std::set<std::string> q(modules_.begin(), modules_.end());
    for (const auto& [key, where] : src_.where)
      if (!(key.ends_with(".weight") && q.count(key.substr(0, key.size() - 7)))) {
        out[key] = src_.at(key);
        ++copied_;
      }
    for (const std::string& m : modules_) quantize(m, out);
    return out;
  }

  void quantize(const std::string& m, std::map<std::string, io::Tensor>& out) {
    const std::string key = m + ".weight";
    const io::Tensor& st = src_.at(key);
    const auto values = quantized::float_values(st);
    const auto dims = quantized::matrix_dims(st.shape);
    if (!dims || dims->first < 1 || dims->second < 1)
      throw key_error(src_.file_of(key), key, "shape " + shape_text(st.shape) + " cannot be quantized");
    S::Request req = p_.request;
    if (p_.weight_dtype_compute) req.compute = compute_of(st.dtype);
    if (req.scheme == S::Scheme::nvfp4) {
      // q/k/v and gate/up share one global scale, that of the group's largest amax (LLM Compressor's
      // update_fused_layer_weight_global_scales keeps the smallest 2688 / amax; ModelOpt's export the largest amax).
      float a = amax(m);
      for (const std::string& peer : group_of(m)) a = std::fmax(a, amax(peer));
      req.tensor_amax = a;
    }
    S::Options so;
    if (const auto refused = S::resolve(req, so))
      throw key_error(src_.file_of(key), key, S::argument_of(refused->option) + ": " + refused->message);
    const S::Quantized q = S::quantize(S::Tensor{dims->first, dims->second, *values}, so);
    if (req.scheme == S::Scheme::mx && st.dtype == io::DType::f16) refuse_f16_underflow(key, q);
    const auto rows = static_cast<std::uint64_t>(q.rows), cols = static_cast<std::uint64_t>(q.cols);
    const std::vector<std::uint64_t> scale_shape{static_cast<std::uint64_t>(q.scale_rows()),
                                                 static_cast<std::uint64_t>(q.scale_cols())};
    const bool ct = p_.format == CheckpointFormat::compressed_tensors;
    if (p_.packed) {
      out[m + (ct ? ".weight_packed" : ".weight")] =
          bytes_tensor(io::DType::u8, {rows, (cols + 1) / 2},
                       pack::pack_rows(4, q.codes, static_cast<std::size_t>(rows), static_cast<std::size_t>(cols)));
      std::vector<std::uint8_t> sb(q.scales.begin(), q.scales.end());
      out[m + ".weight_scale"] =
          bytes_tensor(req.scheme == S::Scheme::mx ? io::DType::u8 : io::DType::f8_e4m3, scale_shape, std::move(sb));
      if (req.scheme == S::Scheme::nvfp4) {
        if (ct) out[m + ".weight_global_scale"] = one_f32(*q.global_scale, {1});  // the encode scale 2688 / amax
        else out[m + ".weight_scale_2"] = one_f32(*q.tensor_scale, {});           // the decode scale amax / 2688
      }
    } else {
      out[key] = bytes_tensor(io::DType::f8_e4m3, st.shape, q.codes);
      if (ct) {
        const std::vector<std::uint64_t> shape = req.scheme == S::Scheme::tensor  ? std::vector<std::uint64_t>{1}
                                                 : req.scheme == S::Scheme::token ? std::vector<std::uint64_t>{rows, 1}
                                                                                  : scale_shape;
        out[m + ".weight_scale"] = scales_in(st.dtype, shape, q.scales);
      } else {
        out[m + ".weight_scale"] = one_f32(static_cast<std::uint32_t>(q.scales[0]), {});
      }
    }
    if (p_.input != InputScale::none) out[m + p_.input_suffix] = inputs_.at(m);
  }

  // compressed-tensors 0.20.1 computes an MX scale in the weight's dtype (calculate_qparams: generate_mx_scales,
  // then maybe_convert_from_mx_exp's 2 ** (code - 127) cast back to that dtype, then a zero scale replaced by
  // _get_dtype_eps(uint8) = 1).  In f16 a scale below 2^-24, the least subnormal, underflows to 0 and so becomes
  // 1.0, code 0x7f (an all-zero block among them); in bf16 and f32 every e8m0 scale from 2^-127 up is kept.  The
  // MX row does not carry that rule, so such a weight is refused rather than written with scales the exporter
  // would not write.
  void refuse_f16_underflow(const std::string& key, const S::Quantized& q) const {
    constexpr std::uint64_t least_f16_code = 127 - 24;
    for (std::size_t b = 0; b < q.scales.size(); ++b)
      if (q.scales[b] < least_f16_code)
        throw key_error(src_.file_of(key), key,
                        "block " + std::to_string(b) + ": e8m0 scale " + hex(q.scales[b], 2) + " (2^" +
                            std::to_string(static_cast<int>(q.scales[b]) - 127) +
                            ") is below f16's least subnormal 2^-24: compressed-tensors computes MX scales in the "
                            "weight's dtype and would store 1.0 (0x7f) there, which lowbit does not reproduce "
                            "(docs/semantics.md §4.8); export a bf16 or f32 copy of the weights");
  }

  // config.json's quantization_config, and for ModelOpt hf_quant_config.json.
  json ct_quantization_config() const {
    std::set<std::string> ignore = user_ignored_;
    json list = {"lm_head"};
    for (const std::string& m : ignore)
      if (m != "lm_head") list.push_back(m);
    return {{"config_groups", {{"group_0", ct_group(*p_.ct)}}},
            {"format", ct_group(*p_.ct)["format"]},
            {"global_compression_ratio", nullptr},
            {"ignore", list},
            {"kv_cache_scheme", nullptr},
            {"moe_sparsity_config", nullptr},
            {"quant_method", "compressed-tensors"},
            {"quantization_status", "compressed"},
            {"sparsity_config", json::object()},
            {"transform_config", json::object()},
            {"version", "0.20.1"}};
  }

  json modelopt_exclude() const {
    std::vector<std::string> v = unquantized_;
    std::sort(v.begin(), v.end());
    return v;
  }

  json hf_quant_config() const {
    json q = {{"quant_algo", p_.recipe}, {"kv_cache_quant_algo", nullptr}, {"exclude_modules", modelopt_exclude()}};
    if (p_.modelopt == ModeloptAlgo::nvfp4) q["group_size"] = 16;
    return {{"quantization", q}};
  }

  json modelopt_quantization_config() const {
    const bool nvfp4 = p_.modelopt == ModeloptAlgo::nvfp4;
    json args = {{"dynamic", false}, {"num_bits", nvfp4 ? 4 : 8}, {"type", "float"}};
    if (nvfp4) args["group_size"] = 16;
    return {{"config_groups", {{"group_0", {{"input_activations", args}, {"weights", args}, {"targets", {"Linear"}}}}}},
            {"ignore", modelopt_exclude()},
            {"quant_algo", p_.recipe},
            {"quant_method", "modelopt"}};
  }

  const std::vector<std::string>& modules() const { return modules_; }
  std::size_t copied() const { return copied_; }

 private:
  const ExportOptions& o_;
  const Plan& p_;
  const TensorSet& src_;
  std::vector<std::string> modules_, unquantized_;
  std::set<std::string> user_ignored_;
  std::map<std::string, io::Tensor> inputs_;
  std::map<std::string, float> amax_;
  std::size_t copied_ = 0;
};

void add_text(io::FolderOutput& out, const std::string& name, const json& j) { out.add(name, j.dump(2) + "\n"); }

}  // namespace

ExportSummary export_checkpoint(const std::string& source, const std::string& out, const ExportOptions& options) {
  const Plan plan = plan_of(options);
  if (out.empty()) throw ArgumentError("out", "required");
  const TensorSet src = read_tensor_set(source);
  std::error_code ec;
  json config = json::object();
  if (fs::is_directory(source, ec) && fs::exists(fs::path(source) / "config.json", ec)) {
    const std::string path = (fs::path(source) / "config.json").string();
    config = read_json(path);
    if (!config.is_object()) throw io::FileError(path, "file", "not a JSON object (a model's config)");
    if (config.contains("quantization_config"))
      throw key_error(path, "quantization_config", "present: the source is already quantized");
  }
  Exporter e(options, plan, src);
  e.select();
  e.read_input_scales();

  std::vector<std::string> inputs{source};
  if (!options.input_scales.empty()) inputs.push_back(options.input_scales);
  std::unique_ptr<io::FolderOutput> folder;
  try {
    folder = std::make_unique<io::FolderOutput>(out, io::FolderOutput::Options{"lowbit_export.json", inputs});
  } catch (const io::FileError& err) { throw ArgumentError("out", err.what()); }

  const std::map<std::string, io::Tensor> tensors = e.tensors();
  const std::vector<std::uint8_t> st = io::encode_safetensors(tensors, {{"format", "pt"}});
  const std::span<const std::uint8_t> part(st);
  folder->add("model.safetensors", std::span<const std::span<const std::uint8_t>>(&part, 1));
  if (plan.format == CheckpointFormat::compressed_tensors) {
    config["quantization_config"] = e.ct_quantization_config();
  } else {
    config["quantization_config"] = e.modelopt_quantization_config();
    add_text(*folder, "hf_quant_config.json", e.hf_quant_config());
  }
  add_text(*folder, "config.json", config);
  // The marker that lets a later export replace this folder (io::FolderOutput); loaders ignore it.
  add_text(*folder, "lowbit_export.json",
           {{"written_by", "lowbit quantize --export"},
            {"format", name(plan.format)},
            {"recipe", plan.recipe},
            {"quantized", e.modules()}});
  try {
    folder->commit();
  } catch (const io::FileError& err) { throw ArgumentError("out", err.what()); }
  return {e.modules(), e.copied()};
}

}  // namespace lowbit::checkpoint
