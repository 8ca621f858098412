// ModelOpt's Hugging Face export (the checkpoint TensorRT-LLM loads), read as NVIDIA ModelOpt 0.47.0 writes it
// (modelopt/torch/export/unified_export_hf.py export_hf_checkpoint, _export_quantized_weight; quant_utils.py
// get_quant_config, to_quantized_weight; qtensor/nvfp4_tensor.py):
//   hf_quant_config.json  {"producer": {"name": "modelopt", "version"}, "quantization": {"quant_algo": "FP8" |
//                         "NVFP4", "group_size": 16 (NVFP4), "exclude_modules": [fnmatch patterns],
//                         "kv_cache_quant_algo"}}; config.json repeats it as quantization_config with
//                         quant_method "modelopt"
//   FP8    M.weight F8_E4M3, the weight's shape; M.weight_scale F32 [] (one value), the decode scale amax / 448;
//          M.input_scale F32 [], the activation's decode scale
//   NVFP4  M.weight U8 [rows, cols / 2], the even column in the low nibble; M.weight_scale F8_E4M3
//          [rows, cols / 16], row-major; M.weight_scale_2 F32 [], the decode scale amax / 2688 (where
//          compressed-tensors stores its inverse); M.input_scale F32 [], the activation's amax / 2688.
//          Projections reading one input (q/k/v, gate/up) share one weight_scale_2 (preprocess_linear_fusion,
//          for every format but FP8), as TensorRT-LLM's fused GEMMs need.
// The arithmetic is the scale rows' modelopt variant (scale.hpp, docs/semantics.md §4.9).
#include <algorithm>
#include <bit>
#include <cmath>
#include <filesystem>
#include <set>
#include <string>

#include "checkpoint_internal.hpp"
#include "lowbit/checkpoint.hpp"
#include "lowbit/pack.hpp"
#include "lowbit/quantized.hpp"
#include "lowbit/text.hpp"

namespace lowbit::checkpoint::detail {

namespace {

namespace S = scale;
namespace fs = std::filesystem;
using json = nlohmann::json;

enum class Algo : std::uint8_t { fp8, nvfp4 };

struct MoConfig {
  std::string path;  // hf_quant_config.json
  Algo algo = Algo::fp8;
  std::vector<std::string> exclude;
};

// fnmatch without character classes (the patterns ModelOpt writes: "lm_head", "model.layers.*.mlp.gate").
bool glob_matches(const std::string& pattern, const std::string& text) {
  std::size_t p = 0, t = 0, star = std::string::npos, mark = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = t;
    } else if (star != std::string::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

MoConfig mo_config(const std::string& dir) {
  MoConfig c;
  c.path = (fs::path(dir) / "hf_quant_config.json").string();
  const json j = read_json(c.path);
  if (!j.is_object() || !j.contains("quantization") || !j["quantization"].is_object())
    throw key_error(c.path, "quantization", "missing: nothing says how the weights were quantized");
  if (j.contains("producer")) {
    const json& p = j["producer"];
    if (!p.is_object() || !p.contains("name") || !p["name"].is_string())
      throw key_error(c.path, "producer.name", "missing or not a string");
    if (p["name"].get<std::string>() != "modelopt")
      throw key_error(c.path, "producer.name",
                      "'" + echo_text(p["name"].get<std::string>(), 40) + "': only ModelOpt's export is read");
  }
  const json& q = j["quantization"];
  if (!q.contains("quant_algo") || !q["quant_algo"].is_string())
    throw key_error(c.path, "quantization.quant_algo", "missing or not a string");
  const std::string algo = q["quant_algo"].get<std::string>();
  if (algo == "FP8") {
    c.algo = Algo::fp8;
  } else if (algo == "NVFP4") {
    c.algo = Algo::nvfp4;
    if (q.contains("group_size") && !q["group_size"].is_null() &&
        !(q["group_size"].is_number_integer() && q["group_size"].get<long long>() == 16))
      throw key_error(c.path, "quantization.group_size", "NVFP4's block is 16 elements");
  } else {
    throw key_error(c.path, "quantization.quant_algo",
                    "'" + echo_text(algo, 40) + "': FP8 (per-tensor) and NVFP4 are read");
  }
  if (q.contains("exclude_modules") && !q["exclude_modules"].is_null()) {
    if (!q["exclude_modules"].is_array()) throw key_error(c.path, "quantization.exclude_modules", "not a list");
    for (const json& e : q["exclude_modules"]) {
      if (!e.is_string()) throw key_error(c.path, "quantization.exclude_modules", "holds a non-string");
      c.exclude.push_back(e.get<std::string>());
    }
  }
  return c;
}

// One F32 value (shape [] or [1]), or nullopt.
std::optional<std::uint32_t> one_f32(const io::Tensor& t) {
  if (t.dtype != io::DType::f32 || t.elements() != 1) return std::nullopt;
  return t.values<std::uint32_t>()[0];
}

class MoVerifier {
 public:
  MoVerifier(const TensorSet& src, const TensorSet& q, const MoConfig& c, const CheckpointOptions& o,
             CheckpointReport& rep)
      : src_(src), q_(q), c_(c), o_(o), rep_(rep) {}

  void run() {
    std::set<std::string> modules;
    for (const auto& [k, where] : q_.where) {
      for (const char* suffix : {".weight_scale", ".weight_scale_2", ".input_scale"})
        if (k.ends_with(suffix)) modules.insert(k.substr(0, k.size() - std::string(suffix).size()));
      if (k.ends_with(".weight") && q_.at(k).dtype == io::DType::f8_e4m3) modules.insert(k.substr(0, k.size() - 7));
    }
    std::vector<std::string> todo;
    for (const std::string& m : modules)
      if (std::none_of(c_.exclude.begin(), c_.exclude.end(), [&](const std::string& p) { return glob_matches(p, m); }))
        todo.push_back(m);
    if (todo.empty())
      throw io::FileError(q_.path, "tensors",
                          "no weight_scale, weight_scale_2 or F8_E4M3 weight: nothing is quantized");
    for (const std::string& m : todo) verify_module(m);
    if (c_.algo == Algo::nvfp4) check_fused(todo);
  }

 private:
  void problem(const std::string& s) { rep_.problems.push_back(s); }

  std::vector<std::string> group_of(const std::string& m) const {
    return fused_group(m, o_.fused, [&](const std::string& p) { return q_.contains(p + ".weight_scale_2"); });
  }

  float source_amax(const std::string& m) {
    const std::string key = m + ".weight";
    const auto v = quantized::float_values(src_.at(key));
    if (!v) throw key_error(src_.file_of(key), key, "not F32, BF16 or F16");
    return amax_of(*v);
  }

  // A scalar scale tensor: present, one positive finite F32.  Returns its bits, or records the problem.
  std::optional<std::uint32_t> scalar(const std::string& key, const char* what) {
    if (!q_.contains(key)) {
      problem(key + ": missing (" + what + ")");
      return std::nullopt;
    }
    const io::Tensor& t = q_.at(key);
    const auto v = one_f32(t);
    if (!v) {
      problem(key + ": " + std::string(io::dtype_name(t.dtype)) + " " + shape_text(t.shape) + ", not one F32 value (" +
              what + ")");
      return std::nullopt;
    }
    const float f = std::bit_cast<float>(*v);
    if (!(std::isfinite(f) && f > 0.0f)) {
      problem(key + ": " + f32_text(*v) + " is not a positive finite scale");
      return std::nullopt;
    }
    return v;
  }

  void verify_module(const std::string& m) {
    const bool nvfp4 = c_.algo == Algo::nvfp4;
    const std::string data_key = m + ".weight", scale_key = m + ".weight_scale", scale2_key = m + ".weight_scale_2";
    const char* kind = nvfp4 ? "NVFP4" : "FP8 per-tensor";
    bool complete = true;
    for (const std::string& k : {data_key, scale_key})
      if (!q_.contains(k)) {
        problem(k + ": missing (ModelOpt's " + kind + " stores " + data_key + " and " + scale_key + ")");
        complete = false;
      }
    std::optional<std::uint32_t> scale2;
    if (nvfp4) {
      scale2 = scalar(scale2_key, "NVFP4's per-tensor decode scale amax / 2688");
      if (!scale2) complete = false;
    }
    // quant_algo FP8 and NVFP4 quantize the activations too (W8A8, W4A4): TensorRT-LLM reads their static scale.
    scalar(m + ".input_scale", nvfp4 ? "the activations' decode scale, quant_algo NVFP4 quantizes them"
                                     : "the activations' decode scale, quant_algo FP8 quantizes them");
    if (!complete) return;

    const io::Tensor& st = src_.at(data_key);
    const auto values = quantized::float_values(st);
    if (!values)
      throw key_error(src_.file_of(data_key), data_key,
                      "dtype " + std::string(io::dtype_name(st.dtype)) + " is not F32, BF16 or F16");
    if (st.shape.size() != 2)
      throw key_error(src_.file_of(data_key), data_key, "shape " + shape_text(st.shape) + " is not a matrix");
    const auto dims = quantized::matrix_dims(st.shape);
    if (!dims) throw key_error(src_.file_of(data_key), data_key, "shape " + shape_text(st.shape) + " is too large");
    if (nvfp4 && st.shape[1] % 16 != 0) {
      problem(data_key + ": " + std::to_string(st.shape[1]) +
              " columns, not a multiple of NVFP4's 16-element block (ModelOpt refuses such a weight)");
      return;
    }
    S::Request req;
    req.variant = S::Variant::modelopt;
    if (nvfp4) {
      req.scheme = S::Scheme::nvfp4;
      req.element = &formats::e2m1;
      const auto group = group_of(m);
      if (!group.empty()) {
        float a = 0.0f;
        for (const std::string& peer : group) a = std::fmax(a, source_amax(peer));
        req.tensor_amax = a;
      }
    } else {
      req.scheme = S::Scheme::tensor;
      req.element = &formats::e4m3;
      req.compute = compute_of(st.dtype);
    }
    S::Options so;
    if (const auto refused = S::resolve(req, so))
      throw key_error(c_.path, "quantization.quant_algo", S::argument_of(refused->option) + ": " + refused->message);
    const S::Quantized q = S::quantize(S::Tensor{dims->first, dims->second, *values}, so);

    TensorReport tr;
    tr.name = m;
    tr.element = q.element;
    tr.scale_format = q.scale_format;
    tr.recipe = std::string("modelopt ") + kind + " (" + name(so.scheme) + " scheme, modelopt variant" +
                (nvfp4 ? std::string() : ", compute " + std::string(name(so.compute))) + ")";

    std::string why;
    const auto stored = stored_codes(q_.at(data_key), data_key, st.shape, nvfp4, why);
    if (!stored) {
      problem(why);
      return;
    }
    const std::vector<std::uint8_t>& codes = *stored;

    const io::Tensor& sc = q_.at(scale_key);
    std::vector<std::uint64_t> scales;
    if (nvfp4) {
      const auto sr = static_cast<std::uint64_t>(q.scale_rows()), scols = static_cast<std::uint64_t>(q.scale_cols());
      if (sc.dtype != io::DType::f8_e4m3 && sc.dtype != io::DType::u8) {
        problem(scale_key + ": dtype " + std::string(io::dtype_name(sc.dtype)) + " does not hold e4m3 scale codes");
        return;
      }
      const std::vector<std::uint64_t> row_major{sr, scols};
      if (sc.shape != row_major) {
        std::string why = scale_key + ": shape " + shape_text(sc.shape) + ", but NVFP4 blocks of 1x16 over " +
                          shape_text(st.shape) + " take " + shape_text(row_major);
        if (sc.elements() == pack::cublaslt_shape(sr, scols).bytes() && sc.elements() != sr * scols)
          why += "; its size is the swizzled (cuBLASLt tiled) layout's, ModelOpt's export stores them row-major";
        problem(why);
        return;
      }
      for (std::uint8_t b : sc.values<std::uint8_t>()) scales.push_back(b);
      const std::uint32_t expected = *q.tensor_scale;
      if (*scale2 != expected) {
        std::string n = scale2_key + ": expected " + f32_text(expected) + " actual " + f32_text(*scale2);
        if (near_inverse(std::bit_cast<float>(*scale2), std::bit_cast<float>(expected)))
          n += "; it holds the inverse, the encode scale 2688 / amax (compressed-tensors' weight_global_scale "
               "convention), where ModelOpt stores the decode scale amax / 2688";
        tr.notes.push_back(n);
      }
    } else {
      const auto v = one_f32(sc);
      if (!v) {
        problem(scale_key + ": " + std::string(io::dtype_name(sc.dtype)) + " " + shape_text(sc.shape) +
                ", not one F32 value (FP8 per-tensor's decode scale amax / 448)");
        return;
      }
      scales.push_back(*v);
      if (near_inverse(std::bit_cast<float>(*v), std::bit_cast<float>(static_cast<std::uint32_t>(q.scales[0]))))
        tr.notes.push_back(scale_key + ": " + f32_text(*v) +
                           " is the inverse of the decode scale ModelOpt stores (amax / 448): the encode scale");
    }

    compare_blocks(q, codes, scales, tr);
    if (nvfp4 && !tr.diffs.empty()) {
      if (nibbles_swapped(q_.at(data_key).bytes, static_cast<std::size_t>(q.rows), static_cast<std::size_t>(q.cols),
                          q.codes))
        tr.notes.insert(tr.notes.begin(), data_key +
                                              ": nibble order swapped: the even column is in the high nibble, where "
                                              "ModelOpt (and TensorRT-LLM) put it in the low nibble");
    }
    rep_.tensors.push_back(std::move(tr));
  }

  // NVFP4's fused projections: one weight_scale_2 and one input_scale for the group.
  void check_fused(const std::vector<std::string>& todo) {
    std::set<std::string> seen;
    for (const std::string& m : todo) {
      const auto group = group_of(m);
      if (group.empty() || seen.count(group.front())) continue;
      seen.insert(group.front());
      for (const char* suffix : {".weight_scale_2", ".input_scale"}) {
        std::set<std::uint32_t> values;
        std::string listing, leaves;
        for (const std::string& peer : group) {
          leaves += (leaves.empty() ? "" : ", ") + leaf_of(peer);
          const io::Tensor* t = q_.find(peer + suffix);
          const auto v = t ? one_f32(*t) : std::nullopt;
          if (!v) continue;
          values.insert(*v);
          listing += (listing.empty() ? "" : ", ") + peer + suffix + " " + f32_text(*v);
        }
        if (values.size() > 1)
          problem("fused " + parent_of(m) + " {" + leaves + "}: " + std::string(suffix + 1) +
                  " differs where TensorRT-LLM's fused projection takes one (ModelOpt's export makes them equal): " +
                  listing);
      }
    }
  }

  const TensorSet& src_;
  const TensorSet& q_;
  const MoConfig& c_;
  const CheckpointOptions& o_;
  CheckpointReport& rep_;
};

}  // namespace

CheckpointReport verify_modelopt(const std::string& source, const std::string& dir, const CheckpointOptions& options) {
  const MoConfig c = mo_config(dir);
  const TensorSet q = read_tensor_set(dir);
  const TensorSet src = read_tensor_set(source);
  CheckpointReport rep;
  rep.format = CheckpointFormat::modelopt;
  MoVerifier(src, q, c, options, rep).run();
  return rep;
}

}  // namespace lowbit::checkpoint::detail
