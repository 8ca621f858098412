// Checkpoints as exporters write them: tensor sets (a file, a directory, a sharded index) and the
// compressed-tensors layout (vLLM, LLM Compressor), read as compressed-tensors 0.20.1 defines it:
//   config.json  quantization_config: quant_method "compressed-tensors", format, config_groups
//                {targets, weights {num_bits, type, strategy, group_size, block_structure, symmetric,
//                dynamic, scale_dtype}, input_activations}, ignore (quantization/quant_config.py,
//                quant_scheme.py, quant_args.py)
//   FP8          M.weight F8_E4M3, M.weight_scale in the weight's dtype: [1] (tensor), [rows, 1] (channel),
//                [ceil(rows/R), ceil(cols/C)] (block R x C); the decode scale (compressors/naive_quantized)
//   NVFP4        M.weight_packed U8 [rows, cols/2], even column in the low nibble (compressors/nvfp4/helpers.py
//                pack_fp4_to_uint8: indices[:, 0] | indices[:, 1] << 4); M.weight_scale F8_E4M3
//                [rows, cols/16]; M.weight_global_scale F32 [1], the encode scale 2688 / amax;
//                M.input_global_scale F32 [1] where activations are quantized
//   MXFP4        M.weight_packed as NVFP4's; M.weight_scale U8 [rows, cols/32], e8m0 codes
//                (compressors/mxfp4/base.py), the scale rule lowbit's `even`
// The arithmetic each maps onto is the scale rows' compressed-tensors variant (scale.hpp).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "checkpoint_internal.hpp"
#include "lowbit/checkpoint.hpp"
#include "lowbit/error.hpp"
#include "lowbit/names.hpp"
#include "lowbit/pack.hpp"
#include "lowbit/quantized.hpp"
#include "lowbit/text.hpp"

namespace lowbit::checkpoint {

namespace S = scale;
namespace fs = std::filesystem;

namespace detail {

using json = nlohmann::json;

// Configs and indexes are small; anything larger is not one.
constexpr std::uintmax_t max_json_bytes = 64u << 20;

json read_json(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw io::FileError(path, "file", "not a regular file");
  if (fs::file_size(path, ec) > max_json_bytes)
    throw io::FileError(path, "file", "larger than " + std::to_string(max_json_bytes) + " bytes");
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in && !in.eof()) throw io::FileError(path, "file", "cannot be read");
  try {
    return json::parse(ss.str());
  } catch (const json::exception& e) { throw io::FileError(path, "file", "not JSON: " + echo_text(e.what(), 200)); }
}

io::FileError key_error(const std::string& path, const std::string& key, const std::string& why) {
  return io::FileError(path, "key \"" + key + "\"", why);
}

}  // namespace detail

using namespace detail;

const io::Tensor* TensorSet::find(const std::string& key) const {
  const auto it = where.find(key);
  return it == where.end() ? nullptr : &files[it->second].tensors.at(key);
}

const io::Tensor& TensorSet::at(const std::string& key) const {
  if (const io::Tensor* t = find(key)) return *t;
  throw key_error(path, key, "missing");
}

std::string TensorSet::file_of(const std::string& key) const {
  const auto it = where.find(key);
  return it == where.end() ? path : files[it->second].path;
}

TensorSet read_tensor_set(const std::string& path) {
  TensorSet set;
  set.path = path;
  std::error_code ec;
  auto add = [&](const std::string& file) {
    set.files.push_back(io::read_safetensors(file));
    for (const auto& [k, t] : set.files.back().tensors) {
      if (set.where.count(k)) throw key_error(file, k, "also in " + set.files[set.where[k]].path);
      set.where[k] = set.files.size() - 1;
    }
  };
  if (!fs::is_directory(path, ec)) {
    add(path);
    return set;
  }
  const std::string index = (fs::path(path) / "model.safetensors.index.json").string();
  if (fs::exists(index, ec)) {
    const json j = read_json(index);
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
      throw key_error(index, "weight_map", "missing, or not an object of tensor name to file");
    std::vector<std::string> shards;
    std::map<std::string, std::string> wanted;
    for (const auto& [k, v] : j["weight_map"].items()) {
      if (!v.is_string()) throw key_error(index, "weight_map." + k, "not a file name");
      const std::string f = v.get<std::string>();
      if (f.empty() || f.find('/') != std::string::npos || f.find('\\') != std::string::npos || f == "." || f == "..")
        throw key_error(index, "weight_map." + k, "'" + echo_text(f, 80) + "' is not a file name in the directory");
      if (std::find(shards.begin(), shards.end(), f) == shards.end()) shards.push_back(f);
      wanted[k] = f;
    }
    for (const std::string& f : shards) add((fs::path(path) / f).string());
    for (const auto& [k, f] : wanted)
      if (!set.where.count(k) || fs::path(set.files[set.where[k]].path).filename() != f)
        throw key_error(index, "weight_map." + k, "not in " + f);
    return set;
  }
  const std::string single = (fs::path(path) / "model.safetensors").string();
  if (!fs::exists(single, ec))
    throw io::FileError(path, "directory", "holds neither model.safetensors nor model.safetensors.index.json");
  add(single);
  return set;
}

namespace {

// ---- compressed-tensors -----------------------------------------------------------------------------------

// One config group's weight arguments, mapped onto a scheme.
struct CtWeights {
  std::string group, key;  // "config_groups.<group>" and the JSON path of its weights, for messages
  std::string kind;        // "FP8 per-tensor", "NVFP4", ...
  S::Request request;
  bool packed = false;        // weight_packed (FP4) rather than weight (FP8)
  bool static_input = false;  // input_scale / input_global_scale expected
  std::vector<std::string> targets;
};

struct CtConfig {
  std::string path;  // config.json
  std::vector<CtWeights> groups;
  std::vector<std::string> ignore;
};

std::string text_of(const json& j, const std::string& path, const std::string& key) {
  if (!j.is_string()) throw key_error(path, key, "not a string");
  return j.get<std::string>();
}

// The weights arguments of one config group onto a scheme request, or a FileError naming the key.
CtWeights ct_weights(const std::string& path, const std::string& group, const json& g) {
  CtWeights w;
  w.group = group;
  const std::string base = "quantization_config.config_groups." + group;
  w.key = base + ".weights";
  if (!g.is_object()) throw key_error(path, base, "not an object");
  if (g.contains("targets")) {
    if (!g["targets"].is_array()) throw key_error(path, base + ".targets", "not a list");
    for (const json& t : g["targets"]) w.targets.push_back(text_of(t, path, base + ".targets"));
  }
  if (!g.contains("weights") || !g["weights"].is_object())
    throw key_error(path, w.key, "missing: compressed-tensors gives each group's weight arguments there");
  const json& a = g["weights"];
  auto get = [&](const char* k) -> const json* { return a.contains(k) && !a[k].is_null() ? &a[k] : nullptr; };
  const json* bits = get("num_bits");
  if (!bits || !bits->is_number_integer()) throw key_error(path, w.key + ".num_bits", "missing or not an integer");
  const json* type = get("type");
  if (!type || text_of(*type, path, w.key + ".type") != "float")
    throw key_error(path, w.key + ".type", "only float weights (FP8, NVFP4, MXFP4) are checked");
  if (const json* sym = get("symmetric"); sym && !(sym->is_boolean() && sym->get<bool>()))
    throw key_error(path, w.key + ".symmetric", "asymmetric float weights are not a compressed-tensors format");
  if (const json* dyn = get("dynamic"); dyn && !(dyn->is_boolean() && !dyn->get<bool>()))
    throw key_error(path, w.key + ".dynamic", "dynamic weights store no scales to check");
  const json* strategy_j = get("strategy");
  if (!strategy_j) throw key_error(path, w.key + ".strategy", "missing");
  const std::string strategy = text_of(*strategy_j, path, w.key + ".strategy");
  auto group_size = [&]() {
    const json* gs = get("group_size");
    if (!gs || !gs->is_number_integer() || gs->get<long long>() < 1 || gs->get<long long>() > S::max_block_side)
      throw key_error(path, w.key + ".group_size", "missing or not a positive integer");
    return static_cast<int>(gs->get<long long>());
  };
  const int nb = bits->get<int>();
  S::Request& r = w.request;
  r.variant = S::Variant::compressed_tensors;
  if (nb == 8) {
    r.element = &formats::e4m3;
    if (strategy == "tensor") {
      r.scheme = S::Scheme::tensor;
      w.kind = "FP8 per-tensor";
    } else if (strategy == "channel") {
      r.scheme = S::Scheme::token;  // one scale per output row
      w.kind = "FP8 per-channel";
    } else if (strategy == "block") {
      const json* bs = get("block_structure");
      if (!bs || !bs->is_array() || bs->size() != 2 || !(*bs)[0].is_number_integer() || !(*bs)[1].is_number_integer() ||
          (*bs)[0].get<long long>() < 1 || (*bs)[1].get<long long>() < 1 ||
          (*bs)[0].get<long long>() > S::max_block_side || (*bs)[1].get<long long>() > S::max_block_side)
        throw key_error(path, w.key + ".block_structure", "not [rows, cols] of positive integers");
      r.scheme = S::Scheme::block;
      r.block_rows = (*bs)[0].get<int>();
      r.block = (*bs)[1].get<int>();
      w.kind = "FP8 block " + std::to_string(*r.block_rows) + "x" + std::to_string(*r.block);
    } else if (strategy == "group") {
      r.scheme = S::Scheme::block;
      r.block = group_size();
      w.kind = "FP8 group " + std::to_string(*r.block);
    } else {
      throw key_error(path, w.key + ".strategy",
                      "'" + echo_text(strategy, 40) + "' is not tensor, channel, block or group");
    }
  } else if (nb == 4) {
    w.packed = true;
    r.element = &formats::e2m1;
    const int gsz = group_size();
    if (strategy == "tensor_group" && gsz == 16) {
      r.scheme = S::Scheme::nvfp4;
      w.kind = "NVFP4";
    } else if (strategy == "group" && gsz == 32) {
      r.scheme = S::Scheme::mx;
      r.variant.reset();
      r.block = 32;
      r.mx_rule = S::MxRule::even;
      w.kind = "MXFP4";
    } else {
      throw key_error(path, w.key + ".strategy",
                      "'" + echo_text(strategy, 40) + "' with group_size " + std::to_string(gsz) +
                          " is neither NVFP4 (tensor_group, 16) nor MXFP4 (group, 32)");
    }
  } else {
    throw key_error(path, w.key + ".num_bits", std::to_string(nb) + " bits: only 8 (FP8) and 4 (NVFP4, MXFP4)");
  }
  if (g.contains("input_activations") && g["input_activations"].is_object()) {
    const json& ia = g["input_activations"];
    // A static activation scale is stored: dynamic false (FP8) or "local" (NVFP4's global scale).
    w.static_input = !(ia.contains("dynamic") && ia["dynamic"].is_boolean() && ia["dynamic"].get<bool>());
  }
  return w;
}

CtConfig ct_config(const std::string& dir) {
  CtConfig c;
  c.path = (fs::path(dir) / "config.json").string();
  const json j = read_json(c.path);
  if (!j.is_object() || !j.contains("quantization_config") || !j["quantization_config"].is_object())
    throw key_error(c.path, "quantization_config", "missing: nothing says how the weights were quantized");
  const json& q = j["quantization_config"];
  if (!q.contains("quant_method")) throw key_error(c.path, "quantization_config.quant_method", "missing");
  const std::string method = text_of(q["quant_method"], c.path, "quantization_config.quant_method");
  if (method == "modelopt")
    throw key_error(c.path, "quantization_config.quant_method",
                    "'modelopt', but the directory has no hf_quant_config.json (ModelOpt's export writes both)");
  if (method != "compressed-tensors")
    throw key_error(c.path, "quantization_config.quant_method",
                    "'" + echo_text(method, 40) + "': compressed-tensors, ModelOpt and fp8 (weight_scale_inv) checkpoints are read");
  if (!q.contains("config_groups") || !q["config_groups"].is_object() || q["config_groups"].empty())
    throw key_error(c.path, "quantization_config.config_groups", "missing or empty");
  for (const auto& [name, g] : q["config_groups"].items()) c.groups.push_back(ct_weights(c.path, name, g));
  if (q.contains("ignore") && !q["ignore"].is_null()) {
    if (!q["ignore"].is_array()) throw key_error(c.path, "quantization_config.ignore", "not a list");
    for (const json& t : q["ignore"]) c.ignore.push_back(text_of(t, c.path, "quantization_config.ignore"));
  }
  return c;
}

// compressed-tensors' module matching (utils/match.py): "re:<pattern>" matches the module name; a plain
// target its name or last component.  A class name (Linear) cannot be told from the tensors: it matches
// every module.
bool target_matches(const std::string& target, const std::string& module) {
  if (target.rfind("re:", 0) == 0) {
    try {
      return std::regex_search(module, std::regex(target.substr(3)));
    } catch (const std::regex_error&) { return false; }
  }
  if (!target.empty() && std::isupper(static_cast<unsigned char>(target[0])) && target.find('.') == std::string::npos)
    return true;
  return module == target || (module.size() > target.size() && module.ends_with("." + target));
}

}  // namespace

namespace detail {

std::string leaf_of(const std::string& m) {
  const auto dot = m.rfind('.');
  return dot == std::string::npos ? m : m.substr(dot + 1);
}
std::string parent_of(const std::string& m) {
  const auto dot = m.rfind('.');
  return dot == std::string::npos ? std::string() : m.substr(0, dot);
}

// The f32 bits of each value of a BF16, F16 or F32 tensor.
std::optional<std::vector<std::uint64_t>> float_bits(const io::Tensor& t) {
  const auto v = quantized::float_values(t);
  if (!v) return std::nullopt;
  std::vector<std::uint64_t> out;
  out.reserve(v->size());
  for (float f : *v) out.push_back(std::bit_cast<std::uint32_t>(f));
  return out;
}

S::Compute compute_of(io::DType d) {
  if (d == io::DType::bf16) return S::Compute::bf16;
  if (d == io::DType::f16) return S::Compute::f16;
  return S::Compute::f32;
}

float amax_of(const std::vector<float>& v) {
  float a = 0.0f;
  for (float x : v) a = std::fmax(a, std::fabs(x));
  return a;
}

bool near_inverse(float a, float b) {
  const double p = static_cast<double>(a) * static_cast<double>(b);
  return std::isfinite(p) && std::fabs(p - 1.0) < 0.02 && std::fabs(static_cast<double>(a) / b - 1.0) > 0.02;
}

std::optional<std::vector<std::uint8_t>> stored_codes(const io::Tensor& t, const std::string& key,
                                                      const std::vector<std::uint64_t>& source_shape, bool packed,
                                                      std::string& why) {
  const std::string held = key + ": " + std::string(io::dtype_name(t.dtype)) + " " + shape_text(t.shape);
  if (packed) {
    const std::vector<std::uint64_t> want{source_shape[0], (source_shape[1] + 1) / 2};
    if (t.dtype != io::DType::u8 || t.shape != want) {
      why = held + ", but the " + shape_text(source_shape) + " source weight packs into U8 " + shape_text(want) +
            " (two FP4 codes a byte)";
      return std::nullopt;
    }
    return pack::unpack_rows(4, t.bytes, static_cast<std::size_t>(source_shape[0]),
                             static_cast<std::size_t>(source_shape[1]));
  }
  if ((t.dtype != io::DType::f8_e4m3 && t.dtype != io::DType::u8) || t.shape != source_shape) {
    why = held + ", but the source weight is " + shape_text(source_shape) + " (F8_E4M3 codes of that shape)";
    return std::nullopt;
  }
  return t.values<std::uint8_t>();
}

bool nibbles_swapped(const std::vector<std::uint8_t>& bytes, std::size_t rows, std::size_t cols,
                     const std::vector<std::uint8_t>& codes) {
  std::vector<std::uint8_t> swapped(bytes.size());
  for (std::size_t i = 0; i < bytes.size(); ++i) swapped[i] = static_cast<std::uint8_t>((bytes[i] >> 4) | (bytes[i] << 4));
  return pack::unpack_rows(4, swapped, rows, cols) == codes;
}

std::string f32_text(std::uint32_t bits) { return hex(bits, 8) + " (" + value_text(formats::f32, bits) + ")"; }

std::vector<std::string> fused_group(const std::string& m, const std::vector<std::vector<std::string>>& fused,
                                     const std::function<bool(const std::string&)>& present) {
  for (const auto& g : fused)
    if (std::find(g.begin(), g.end(), leaf_of(m)) != g.end()) {
      std::vector<std::string> out;
      for (const std::string& leaf : g) {
        const std::string peer = parent_of(m).empty() ? leaf : parent_of(m) + "." + leaf;
        if (peer == m || present(peer)) out.push_back(peer);
      }
      return out.size() > 1 ? out : std::vector<std::string>{};
    }
  return {};
}

}  // namespace detail

namespace {

class CtVerifier {
 public:
  CtVerifier(const TensorSet& src, const TensorSet& q, const CtConfig& c, const CheckpointOptions& o,
             CheckpointReport& rep)
      : src_(src), q_(q), c_(c), o_(o), rep_(rep) {}

  void run() {
    // The quantized modules: those with a weight_scale, weight_packed or an FP8 weight.
    std::set<std::string> modules;
    for (const auto& [k, where] : q_.where) {
      for (const char* suffix : {".weight_scale", ".weight_packed", ".weight_global_scale"})
        if (k.ends_with(suffix)) modules.insert(k.substr(0, k.size() - std::string(suffix).size()));
      if (k.ends_with(".weight") && q_.at(k).dtype == io::DType::f8_e4m3) modules.insert(k.substr(0, k.size() - 7));
    }
    if (modules.empty())
      throw io::FileError(q_.path, "tensors", "no weight_scale, weight_packed or F8_E4M3 weight: nothing is quantized");
    std::map<std::string, float> fused_amax;  // module -> its fused group's largest amax (NVFP4)
    std::vector<std::pair<std::string, const CtWeights*>> todo;
    for (const std::string& m : modules) {
      if (std::any_of(c_.ignore.begin(), c_.ignore.end(), [&](const std::string& t) { return target_matches(t, m); }))
        continue;
      const CtWeights* w = nullptr;
      for (const CtWeights& g : c_.groups)
        if (g.targets.empty() || std::any_of(g.targets.begin(), g.targets.end(),
                                             [&](const std::string& t) { return target_matches(t, m); })) {
          w = &g;
          break;
        }
      if (!w) throw key_error(c_.path, "quantization_config.config_groups", "no group targets " + echo_text(m, 120));
      todo.emplace_back(m, w);
    }
    for (const auto& [m, w] : todo)
      if (w->request.scheme == S::Scheme::nvfp4) fused_amax[m] = source_amax(m);
    for (const auto& [m, w] : todo) {
      const auto group = fused_group(m);
      if (group.empty() || !fused_amax.count(m)) continue;
      float a = 0.0f;
      for (const std::string& peer : group)
        if (fused_amax.count(peer)) a = std::fmax(a, source_amax(peer));
      shared_amax_[m] = a;
    }
    for (const auto& [m, w] : todo) verify_module(m, *w);
    check_fused(todo);
  }

 private:
  // The fused projections m belongs with (those with a global scale), m among them; empty when none.
  std::vector<std::string> fused_group(const std::string& m) const {
    return detail::fused_group(m, o_.fused,
                               [&](const std::string& p) { return q_.contains(p + ".weight_global_scale"); });
  }

  float source_amax(const std::string& m) {
    const auto it = amax_cache_.find(m);
    if (it != amax_cache_.end()) return it->second;
    const io::Tensor& t = src_.at(m + ".weight");
    const auto v = quantized::float_values(t);
    if (!v) throw key_error(src_.file_of(m + ".weight"), m + ".weight", "not F32, BF16 or F16");
    return amax_cache_[m] = amax_of(*v);
  }

  void problem(const std::string& s) { rep_.problems.push_back(s); }

  void verify_module(const std::string& m, const CtWeights& w) {
    const std::string data_key = m + (w.packed ? ".weight_packed" : ".weight");
    const std::string scale_key = m + ".weight_scale";
    const std::string global_key = m + ".weight_global_scale";
    const bool nvfp4 = w.request.scheme == S::Scheme::nvfp4;
    bool complete = true;
    for (const std::string& k : {data_key, scale_key})
      if (!q_.contains(k)) {
        problem(k + ": missing (" + w.kind + " stores " + data_key + " and " + scale_key + ")");
        complete = false;
      }
    if (nvfp4 && !q_.contains(global_key)) {
      problem(global_key + ": missing (NVFP4 stores the weight's global encode scale there)");
      complete = false;
    }
    if (w.static_input) {
      const std::string ik = m + (nvfp4 ? ".input_global_scale" : ".input_scale");
      if (!q_.contains(ik)) problem(ik + ": missing (the config's input_activations are static)");
      else if (const auto v = float_bits(q_.at(ik)); !v || v->size() != 1)
        problem(ik + ": not one F32, BF16 or F16 value (" + shape_text(q_.at(ik).shape) + ")");
      else if (const float f = std::bit_cast<float>(static_cast<std::uint32_t>((*v)[0])); !(std::isfinite(f) && f > 0))
        problem(ik + ": " + f32_text(static_cast<std::uint32_t>((*v)[0])) + " is not a positive finite scale");
    }
    if (!complete) return;

    // The source weight and the scheme its dtype selects.
    const std::string src_key = m + ".weight";
    const io::Tensor& st = src_.at(src_key);
    const auto values = quantized::float_values(st);
    if (!values)
      throw key_error(src_.file_of(src_key), src_key,
                      "dtype " + std::string(io::dtype_name(st.dtype)) + " is not F32, BF16 or F16");
    const auto dims = quantized::matrix_dims(st.shape);
    if (!dims || st.shape.size() != 2)
      throw key_error(src_.file_of(src_key), src_key, "shape " + shape_text(st.shape) + " is not a matrix");
    S::Request req = w.request;
    if (req.variant) req.compute = compute_of(st.dtype);
    if (nvfp4 && shared_amax_.count(m)) req.tensor_amax = shared_amax_.at(m);
    S::Options so;
    if (const auto refused = S::resolve(req, so))
      throw key_error(c_.path, w.key, S::argument_of(refused->option) + ": " + refused->message);
    const S::Quantized q = S::quantize(S::Tensor{dims->first, dims->second, *values}, so);

    TensorReport tr;
    tr.name = m;
    tr.element = q.element;
    tr.scale_format = q.scale_format;
    tr.recipe = "compressed-tensors " + w.kind + " (" + name(so.scheme) + " scheme" +
                (req.variant ? std::string(", ") + name(so.variant) + " variant, compute " + name(so.compute) : "") +
                (req.mx_rule ? std::string(", scale rule ") + name(so.mx_rule) : "") + ")";

    // Codes.
    std::string why;
    const auto stored = stored_codes(q_.at(data_key), data_key, st.shape, w.packed, why);
    if (!stored) {
      problem(why);
      return;
    }
    const std::vector<std::uint8_t>& codes = *stored;

    // Scales.
    const io::Tensor& sc = q_.at(scale_key);
    const auto sr = static_cast<std::uint64_t>(q.scale_rows()), scols = static_cast<std::uint64_t>(q.scale_cols());
    std::vector<std::uint64_t> scales;
    const bool f32_scales = q.scale_format == &formats::f32;
    if (f32_scales) {
      const auto bits = float_bits(sc);
      if (!bits) {
        problem(scale_key + ": dtype " + std::string(io::dtype_name(sc.dtype)) +
                " (FP8 scales are stored in the weight's float dtype)");
        return;
      }
      scales = *bits;
      if (sc.dtype != st.dtype)
        tr.notes.push_back(scale_key + ": dtype " + std::string(io::dtype_name(sc.dtype)) +
                           ", the source weight's is " + std::string(io::dtype_name(st.dtype)) +
                           " (compressed-tensors keeps the weight's)");
    } else {
      const bool ok = sc.dtype == io::DType::u8 ||
                      (sc.dtype == io::DType::f8_e4m3 && q.scale_format == &formats::e4m3) ||
                      (sc.dtype == io::DType::f8_e8m0 && q.scale_format == &formats::e8m0);
      if (!ok) {
        problem(scale_key + ": dtype " + std::string(io::dtype_name(sc.dtype)) + " does not hold " +
                q.scale_format->name + " scale codes");
        return;
      }
      for (std::uint8_t b : sc.values<std::uint8_t>()) scales.push_back(b);
    }
    const std::vector<std::uint64_t> row_major{sr, scols};
    const bool shape_ok = so.scheme == S::Scheme::tensor ? sc.elements() == 1 : sc.shape == row_major;
    if (!shape_ok) {
      std::string why = scale_key + ": shape " + shape_text(sc.shape) + ", but " + w.kind + " blocks of " +
                        std::to_string(q.block_rows) + "x" + std::to_string(q.block_cols) + " over " +
                        shape_text(st.shape) + " take " +
                        (so.scheme == S::Scheme::tensor ? "[1]" : shape_text(row_major));
      if (!f32_scales && sc.elements() == pack::cublaslt_shape(sr, scols).bytes() && sc.elements() != sr * scols)
        why += "; its size is the swizzled (cuBLASLt tiled) layout's, compressed-tensors stores them row-major";
      problem(why);
      return;
    }

    // Global scale (NVFP4).
    if (nvfp4) {
      const io::Tensor& gt = q_.at(global_key);
      if (gt.dtype != io::DType::f32 || gt.elements() != 1) {
        problem(global_key + ": " + std::string(io::dtype_name(gt.dtype)) + " " + shape_text(gt.shape) +
                ", not one F32 value");
        return;
      }
      const std::uint32_t actual = gt.values<std::uint32_t>()[0], expected = *q.global_scale;
      if (actual != expected) {
        std::string n = global_key + ": expected " + f32_text(expected) + " actual " + f32_text(actual);
        if (near_inverse(std::bit_cast<float>(actual), std::bit_cast<float>(expected)))
          n += "; it holds the inverse, the decode scale (ModelOpt's weight_scale_2 convention), where "
               "compressed-tensors stores the encode scale 2688 / amax";
        tr.notes.push_back(n);
      }
    } else if (so.scheme == S::Scheme::tensor || so.scheme == S::Scheme::token || so.scheme == S::Scheme::block) {
      // A scale that is the reciprocal of the decode scale (448 / amax where amax / 448 belongs).
      std::size_t inverse = 0;
      for (std::size_t i = 0; i < scales.size() && i < q.scales.size(); ++i)
        if (near_inverse(std::bit_cast<float>(static_cast<std::uint32_t>(scales[i])),
                         std::bit_cast<float>(static_cast<std::uint32_t>(q.scales[i]))))
          ++inverse;
      if (inverse * 2 > scales.size())
        tr.notes.push_back(scale_key + ": " + std::to_string(inverse) + " of " + std::to_string(scales.size()) +
                           " scales are the inverse of the decode scale compressed-tensors stores (amax / 448)");
    }

    compare_blocks(q, codes, scales, tr);
    if (w.packed && !tr.diffs.empty()) {
      // Nibble order: the stored bytes with their halves swapped give every code?
      if (nibbles_swapped(q_.at(data_key).bytes, static_cast<std::size_t>(q.rows), static_cast<std::size_t>(q.cols),
                          q.codes))
        tr.notes.insert(tr.notes.begin(), data_key +
                                              ": nibble order swapped: the even column is in the high nibble, where "
                                              "compressed-tensors (and vLLM) put it in the low nibble");
    }
    rep_.tensors.push_back(std::move(tr));
  }

  void check_fused(const std::vector<std::pair<std::string, const CtWeights*>>& todo) {
    std::set<std::string> seen;
    for (const auto& [m, w] : todo) {
      if (w->request.scheme != S::Scheme::nvfp4) continue;
      const auto group = fused_group(m);
      if (group.empty() || seen.count(group.front())) continue;
      seen.insert(group.front());
      std::string listing;
      std::set<std::uint32_t> values;
      for (const std::string& peer : group) {
        const io::Tensor* t = q_.find(peer + ".weight_global_scale");
        if (!t || t->dtype != io::DType::f32 || t->elements() != 1) continue;
        const std::uint32_t v = t->values<std::uint32_t>()[0];
        values.insert(v);
        listing += (listing.empty() ? "" : ", ") + peer + ".weight_global_scale " + f32_text(v);
      }
      if (values.size() > 1)
        problem("fused " + parent_of(m) + " {" +
                [&] {
                  std::string s;
                  for (const std::string& p : group) s += (s.empty() ? "" : ", ") + leaf_of(p);
                  return s;
                }() +
                "}: global scales differ where vLLM's fused projection needs one: " + listing);
    }
  }

  const TensorSet& src_;
  const TensorSet& q_;
  const CtConfig& c_;
  const CheckpointOptions& o_;
  CheckpointReport& rep_;
  std::map<std::string, float> amax_cache_, shared_amax_;
};

}  // namespace

CheckpointReport verify_checkpoint(const std::string& source, const std::string& quantized,
                                   const CheckpointOptions& options) {
  CheckpointReport rep;
  std::error_code ec;
  if (fs::is_directory(quantized, ec)) {
    if (fs::exists(fs::path(quantized) / "hf_quant_config.json", ec))
      return verify_modelopt(source, quantized, options);
    const std::string config = (fs::path(quantized) / "config.json").string();
    if (!fs::exists(config, ec))
      throw io::FileError(quantized, "directory",
                          "holds neither config.json nor hf_quant_config.json: not an exporter's checkpoint");
    {
      const json j = read_json(config);
      if (j.is_object() && j.contains("quantization_config") && j["quantization_config"].is_object() &&
          j["quantization_config"].contains("quant_method") && j["quantization_config"]["quant_method"] == "fp8")
        return verify_fp8_block(source, quantized);
    }
    const CtConfig c = ct_config(quantized);
    const TensorSet q = read_tensor_set(quantized);
    const TensorSet src = read_tensor_set(source);
    rep.format = CheckpointFormat::compressed_tensors;
    CtVerifier(src, q, c, options, rep).run();
    return rep;
  }
  if (fs::path(quantized).extension() == ".gguf" || is_gguf(quantized)) return verify_gguf(source, quantized, options);
  // lowbit's own layout: one file, its W.quantization_format entries.
  const TensorSet src = read_tensor_set(source);
  if (src.files.size() != 1)
    throw io::FileError(source, "file", "lowbit's own checkpoints are checked against one source file");
  const io::Safetensors b = io::read_safetensors(quantized);
  const std::string suffix = ".quantization_format";
  std::vector<std::string> names;
  for (const auto& [k, v] : b.metadata)
    if (k.size() > suffix.size() && k.ends_with(suffix)) names.push_back(k.substr(0, k.size() - suffix.size()));
  if (names.empty())
    throw io::FileError(quantized, "key \"__metadata__\"",
                        "no W.quantization_format entry: nothing says how any tensor was quantized");
  for (const std::string& w : names) rep.tensors.push_back(verify_tensor(src.files[0], b, w));
  return rep;
}

}  // namespace lowbit::checkpoint
