// Training scale state (lowbit/training_state.hpp): the documents, the steps and the run-against-run check.
#include "lowbit/training_state.hpp"

#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <span>
#include <stdexcept>

#include "lowbit/registry.hpp"
#include "lowbit/text.hpp"

namespace lowbit::training {

namespace {

using json = nlohmann::json;
namespace S = scale;

constexpr const char* scaler_key = "grad_scaler";
constexpr const char* marker_key = "lowbit.training_state";

[[noreturn]] void fail(const std::string& file, const std::string& key, const std::string& problem) {
  throw io::FileError(file, key, problem);
}

std::string prefix_of(const std::string& layer) { return layer.empty() ? std::string{} : layer + "."; }

float f32_field(const json& j, const std::string& file, const std::string& key) {
  if (!j.is_string()) fail(file, key, "expected the f32 bit pattern as a \"0x...\" string");
  bool wide = false;
  const auto v = parse_hex(j.get<std::string>(), HexPrefix::required, &wide);
  if (!v || wide || *v > 0xFFFFFFFFu)
    fail(file, key, "'" + j.get<std::string>() + "' is not a 32-bit \"0x...\" pattern");
  return std::bit_cast<float>(static_cast<std::uint32_t>(*v));
}

std::int64_t int_field(const json& j, const std::string& file, const std::string& key, std::int64_t lo,
                       std::int64_t hi) {
  if (!j.is_number_integer()) fail(file, key, "expected a whole number");
  const bool beyond_int64 =
      j.is_number_unsigned() &&
      j.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  if (!beyond_int64) {
    const std::int64_t v = j.get<std::int64_t>();
    if (v >= lo && v <= hi) return v;
  }
  fail(file, key, j.dump() + " is outside " + std::to_string(lo) + ".." + std::to_string(hi));
}

double factor_field(const json& j, const std::string& file, const std::string& key) {
  if (!j.is_number()) fail(file, key, "expected a number");
  return j.get<double>();
}

// The checks both readers make on a loss scaler (GradScaler's own: growth_factor > 1, backoff_factor < 1).
void check_scaler(const S::GradScalerState& g, const std::string& file) {
  if (!(g.growth_factor > 1.0)) fail(file, "grad_scaler.growth_factor", "must be > 1 (torch's GradScaler asserts it)");
  if (!(g.backoff_factor < 1.0))
    fail(file, "grad_scaler.backoff_factor", "must be < 1 (torch's GradScaler asserts it)");
}

const Format& element_named(const std::string& name, const std::string& file, const std::string& key) {
  const Format* f = find_format(name);
  if (!f) fail(file, key, "unknown format '" + name + "'");
  if (!(max_value(*f) > 0.0) || f->storage_bits() > 8)
    fail(file, key, "'" + name + "' is not an element format of at most 8 bits");
  return *f;
}

LayerState layer_from_json(const json& j, const std::string& file, const std::string& name, const Format& element) {
  const std::string p = name.empty() ? std::string{} : "layers." + name + ".";
  if (!j.is_object()) fail(file, name.empty() ? "state" : "layers." + name, "expected an object");
  for (auto it = j.begin(); it != j.end(); ++it)
    if (it.key() != "history" && it.key() != "scale" && it.key() != "algorithm" && it.key() != "margin" &&
        it.key() != "element")
      fail(file, p + it.key(), "unknown key");
  LayerState l;
  if (!j.contains("history") || !j.at("history").is_array() || j.at("history").empty())
    fail(file, p + "history", "needs a non-empty array of f32 patterns");
  std::size_t i = 0;
  for (const json& h : j.at("history"))
    l.delayed.history.push_back(f32_field(h, file, p + "history[" + std::to_string(i++) + "]"));
  if (!j.contains("scale")) fail(file, p + "scale", "is missing");
  l.delayed.scale = f32_field(j.at("scale"), file, p + "scale");
  const std::string algorithm = j.contains("algorithm") && j.at("algorithm").is_string()
                                    ? j.at("algorithm").get<std::string>()
                                : j.contains("algorithm") ? std::string("?")
                                                          : std::string("max");
  if (algorithm != "max" && algorithm != "most_recent") fail(file, p + "algorithm", "max or most_recent");
  l.delayed.max_algorithm = algorithm == "max";
  l.delayed.margin =
      j.contains("margin") ? static_cast<int>(int_field(j.at("margin"), file, p + "margin", -126, 126)) : 0;
  if (j.contains("element")) {
    if (!j.at("element").is_string()) fail(file, p + "element", "expected a format name");
    l.element = &element_named(j.at("element").get<std::string>(), file, p + "element");
  } else {
    l.element = &element;
  }
  return l;
}

std::string f32_json(float v) { return hex(std::bit_cast<std::uint32_t>(v), 8); }

nlohmann::ordered_json layer_json(const LayerState& l) {
  nlohmann::ordered_json h = nlohmann::ordered_json::array();
  for (float x : l.delayed.history) h.push_back(f32_json(x));
  return nlohmann::ordered_json{{"history", h},
                                {"scale", f32_json(l.delayed.scale)},
                                {"algorithm", l.delayed.max_algorithm ? "max" : "most_recent"},
                                {"margin", l.delayed.margin},
                                {"element", l.element->name}};
}

std::string exact_double(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

double parse_double(const std::string& s, const std::string& file, const std::string& key) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v))
    fail(file, key, "'" + s + "' is not a finite number");
  return v;
}

std::int64_t parse_int(const std::string& s, const std::string& file, const std::string& key, std::int64_t lo,
                       std::int64_t hi) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || end != s.c_str() + s.size() || errno != 0 || v < lo || v > hi)
    fail(file, key, "'" + s + "' is not a whole number in " + std::to_string(lo) + ".." + std::to_string(hi));
  return v;
}

float scalar_f32(const io::Safetensors& st, const std::string& key) {
  const io::Tensor& t = st.tensor(key, io::DType::f32);
  if (t.elements() != 1) fail(st.path, key, "expected one value");
  return t.values<float>()[0];
}

}  // namespace

TrainingState state_from_json(const json& j, const std::string& file, const Format& element) {
  TrainingState s;
  if (!j.is_object()) fail(file, "", "expected a JSON object");
  if (j.contains("history")) {  // `quantize --state`'s object
    s.layers.emplace("", layer_from_json(j, file, "", element));
    return s;
  }
  for (auto it = j.begin(); it != j.end(); ++it)
    if (it.key() != "layers" && it.key() != scaler_key) fail(file, it.key(), "unknown key (layers, grad_scaler)");
  if (j.contains("layers")) {
    if (!j.at("layers").is_object()) fail(file, "layers", "expected an object of layer states");
    for (auto it = j.at("layers").begin(); it != j.at("layers").end(); ++it) {
      if (it.key().empty() || it.key() == scaler_key) fail(file, "layers." + it.key(), "is not a layer name");
      s.layers.emplace(it.key(), layer_from_json(it.value(), file, it.key(), element));
    }
  }
  if (j.contains(scaler_key)) {
    const json& g = j.at(scaler_key);
    if (!g.is_object()) fail(file, scaler_key, "expected an object");
    for (const char* k : {"scale", "growth_tracker", "growth_factor", "backoff_factor", "growth_interval"})
      if (!g.contains(k)) fail(file, std::string(scaler_key) + "." + k, "is missing");
    for (auto it = g.begin(); it != g.end(); ++it)
      if (it.key() != "scale" && it.key() != "growth_tracker" && it.key() != "growth_factor" &&
          it.key() != "backoff_factor" && it.key() != "growth_interval")
        fail(file, std::string(scaler_key) + "." + it.key(), "unknown key");
    S::GradScalerState gs;
    gs.scale = f32_field(g.at("scale"), file, "grad_scaler.scale");
    gs.growth_tracker = static_cast<std::int32_t>(int_field(g.at("growth_tracker"), file, "grad_scaler.growth_tracker",
                                                            0, std::numeric_limits<std::int32_t>::max() - 1));
    gs.growth_factor = factor_field(g.at("growth_factor"), file, "grad_scaler.growth_factor");
    gs.backoff_factor = factor_field(g.at("backoff_factor"), file, "grad_scaler.backoff_factor");
    gs.growth_interval = int_field(g.at("growth_interval"), file, "grad_scaler.growth_interval", 1,
                                   std::numeric_limits<std::int32_t>::max());
    check_scaler(gs, file);
    s.grad_scaler = gs;
  }
  if (s.layers.empty() && !s.grad_scaler) fail(file, "layers", "the state holds no layer and no grad_scaler");
  return s;
}

TrainingState state_from_safetensors(const io::Safetensors& st) {
  TrainingState s;
  const auto marker = st.meta(marker_key);
  if (!marker || *marker != "1")
    fail(st.path, std::string("__metadata__.") + marker_key, "missing or not \"1\": not a training state");
  std::map<std::string, bool> used;
  for (const auto& entry : st.tensors) {
    const std::string& key = entry.first;
    const std::string suffix = "amax_history";
    if (key.size() < suffix.size() || key.compare(key.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    std::string layer = key.substr(0, key.size() - suffix.size());
    if (!layer.empty()) {
      if (layer.back() != '.') continue;
      layer.pop_back();
      if (layer.empty() || layer == scaler_key) fail(st.path, key, "is not a layer's amax history");
    }
    const std::string p = prefix_of(layer);
    LayerState l;
    const io::Tensor& h = st.tensor(key, io::DType::f32);
    if (h.rank() != 1 || h.elements() == 0) fail(st.path, key, "expected a non-empty 1-D F32 tensor");
    l.delayed.history = h.values<float>();
    l.delayed.scale = scalar_f32(st, p + "scale");
    const std::string algorithm = st.meta_at(p + "algorithm");
    if (algorithm != "max" && algorithm != "most_recent")
      fail(st.path, "__metadata__." + p + "algorithm", "max or most_recent");
    l.delayed.max_algorithm = algorithm == "max";
    l.delayed.margin =
        static_cast<int>(parse_int(st.meta_at(p + "margin"), st.path, "__metadata__." + p + "margin", -126, 126));
    l.element = &element_named(st.meta_at(p + "element"), st.path, "__metadata__." + p + "element");
    used[key] = used[p + "scale"] = true;
    s.layers.emplace(layer, l);
  }
  if (st.contains("grad_scaler.scale") || st.contains("grad_scaler.growth_tracker")) {
    S::GradScalerState g;
    const std::string m = "__metadata__.grad_scaler.";
    g.scale = scalar_f32(st, "grad_scaler.scale");
    const io::Tensor& t = st.tensor("grad_scaler.growth_tracker", io::DType::i32);
    if (t.elements() != 1) fail(st.path, "grad_scaler.growth_tracker", "expected one value");
    g.growth_tracker = t.values<std::int32_t>()[0];
    if (g.growth_tracker < 0 || g.growth_tracker == std::numeric_limits<std::int32_t>::max())
      fail(st.path, "grad_scaler.growth_tracker", std::to_string(g.growth_tracker) + " is outside 0..2147483646");
    g.growth_factor = parse_double(st.meta_at("grad_scaler.growth_factor"), st.path, m + "growth_factor");
    g.backoff_factor = parse_double(st.meta_at("grad_scaler.backoff_factor"), st.path, m + "backoff_factor");
    g.growth_interval = parse_int(st.meta_at("grad_scaler.growth_interval"), st.path, m + "growth_interval", 1,
                                  std::numeric_limits<std::int32_t>::max());
    check_scaler(g, st.path);
    used["grad_scaler.scale"] = used["grad_scaler.growth_tracker"] = true;
    s.grad_scaler = g;
  }
  for (const auto& entry : st.tensors)
    if (!used.count(entry.first)) fail(st.path, entry.first, "is not part of a training state");
  if (s.layers.empty() && !s.grad_scaler) fail(st.path, "amax_history", "the file holds no layer and no grad_scaler");
  return s;
}

std::vector<Step> steps_from_json(const json& j, const std::string& file) {
  const json& list = j.is_object() && j.contains("steps") ? j.at("steps") : j;
  if (!list.is_array()) fail(file, "steps", "expected an array of steps");
  std::vector<Step> steps;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string k = "steps[" + std::to_string(i) + "]";
    const json& e = list.at(i);
    if (!e.is_object()) fail(file, k, "expected an object with amax and/or found_inf");
    Step s;
    for (auto it = e.begin(); it != e.end(); ++it)
      if (it.key() != "amax" && it.key() != "found_inf")
        fail(file, k + "." + it.key(), "unknown key (amax, found_inf)");
    if (e.contains("amax")) {
      if (!e.at("amax").is_object()) fail(file, k + ".amax", "expected an object of layer amaxes");
      for (auto it = e.at("amax").begin(); it != e.at("amax").end(); ++it)
        s.amax[it.key()] = f32_field(it.value(), file, k + ".amax." + it.key());
    }
    if (e.contains("found_inf")) {
      if (!e.at("found_inf").is_boolean()) fail(file, k + ".found_inf", "expected true or false");
      s.found_inf = e.at("found_inf").get<bool>();
    }
    steps.push_back(std::move(s));
  }
  return steps;
}

nlohmann::ordered_json state_json(const TrainingState& s) {
  if (s.layers.size() == 1 && s.layers.count("") && !s.grad_scaler) return layer_json(s.layers.at(""));
  nlohmann::ordered_json out;
  if (!s.layers.empty()) {
    nlohmann::ordered_json layers = nlohmann::ordered_json::object();
    for (const auto& entry : s.layers) layers[entry.first] = layer_json(entry.second);
    out["layers"] = layers;
  }
  if (s.grad_scaler) {
    const S::GradScalerState& g = *s.grad_scaler;
    out[scaler_key] = nlohmann::ordered_json{{"scale", f32_json(g.scale)},
                                             {"growth_tracker", g.growth_tracker},
                                             {"growth_factor", g.growth_factor},
                                             {"backoff_factor", g.backoff_factor},
                                             {"growth_interval", g.growth_interval}};
  }
  return out;
}

void state_tensors(const TrainingState& s, std::map<std::string, io::Tensor>& tensors,
                   std::map<std::string, std::string>& metadata) {
  metadata[marker_key] = "1";
  for (const auto& entry : s.layers) {
    const std::string p = prefix_of(entry.first);
    const LayerState& l = entry.second;
    tensors[p + "amax_history"] = io::Tensor::from_values<float>(io::DType::f32, {l.delayed.history.size()},
                                                                 std::span<const float>(l.delayed.history));
    tensors[p + "scale"] =
        io::Tensor::from_values<float>(io::DType::f32, {}, std::span<const float>(&l.delayed.scale, 1));
    metadata[p + "algorithm"] = l.delayed.max_algorithm ? "max" : "most_recent";
    metadata[p + "margin"] = std::to_string(l.delayed.margin);
    metadata[p + "element"] = l.element->name;
  }
  if (s.grad_scaler) {
    const S::GradScalerState& g = *s.grad_scaler;
    tensors["grad_scaler.scale"] =
        io::Tensor::from_values<float>(io::DType::f32, {}, std::span<const float>(&g.scale, 1));
    tensors["grad_scaler.growth_tracker"] =
        io::Tensor::from_values<std::int32_t>(io::DType::i32, {}, std::span<const std::int32_t>(&g.growth_tracker, 1));
    metadata["grad_scaler.growth_factor"] = exact_double(g.growth_factor);
    metadata["grad_scaler.backoff_factor"] = exact_double(g.backoff_factor);
    metadata["grad_scaler.growth_interval"] = std::to_string(g.growth_interval);
  }
}

void advance(TrainingState& s, const Step& step) {
  for (const auto& entry : step.amax)
    if (!s.layers.count(entry.first))
      throw std::invalid_argument("amax for layer '" + entry.first + "', which the state does not hold");
  for (const auto& entry : s.layers)
    if (!step.amax.count(entry.first))
      throw std::invalid_argument("no amax for layer '" +
                                  (entry.first.empty() ? std::string("(unnamed)") : entry.first) + "'");
  if (step.found_inf.has_value() != s.grad_scaler.has_value())
    throw std::invalid_argument(s.grad_scaler ? "no found_inf for the grad_scaler"
                                              : "found_inf given, but the state has no grad_scaler");
  for (auto& entry : s.layers)
    S::delayed_update(entry.second.delayed, step.amax.at(entry.first), *entry.second.element);
  if (s.grad_scaler) {
    if (s.grad_scaler->growth_tracker == std::numeric_limits<std::int32_t>::max())
      throw std::invalid_argument("grad_scaler.growth_tracker would pass INT32_MAX");
    S::grad_scaler_update(*s.grad_scaler, *step.found_inf);
  }
}

namespace {

// Every scale of a state, by layer name ("grad_scaler" for the loss scaler's).
std::map<std::string, std::uint32_t> scales_of(const TrainingState& s) {
  std::map<std::string, std::uint32_t> out;
  for (const auto& entry : s.layers) out[entry.first] = std::bit_cast<std::uint32_t>(entry.second.delayed.scale);
  if (s.grad_scaler) out[scaler_key] = std::bit_cast<std::uint32_t>(s.grad_scaler->scale);
  return out;
}

void note_state_differences(const TrainingState& e, const TrainingState& a, std::vector<std::string>& notes) {
  for (const auto& entry : e.layers) {
    const auto it = a.layers.find(entry.first);
    if (it == a.layers.end()) continue;
    const LayerState& x = entry.second;
    const LayerState& y = it->second;
    const std::string n = "layer '" + entry.first + "': ";
    if (x.delayed.history.size() != y.delayed.history.size())
      notes.push_back(n + "history length " + std::to_string(y.delayed.history.size()) + ", expected " +
                      std::to_string(x.delayed.history.size()));
    else
      for (std::size_t i = 0; i < x.delayed.history.size(); ++i)
        if (std::bit_cast<std::uint32_t>(x.delayed.history[i]) != std::bit_cast<std::uint32_t>(y.delayed.history[i])) {
          notes.push_back(n + "history slot " + std::to_string(i) + " is " +
                          hex(std::bit_cast<std::uint32_t>(y.delayed.history[i]), 8) + ", expected " +
                          hex(std::bit_cast<std::uint32_t>(x.delayed.history[i]), 8));
          break;
        }
    if (x.delayed.max_algorithm != y.delayed.max_algorithm) notes.push_back(n + "algorithm differs");
    if (x.delayed.margin != y.delayed.margin) notes.push_back(n + "margin differs");
    if (x.element != y.element) notes.push_back(n + "element differs");
  }
  if (e.grad_scaler && a.grad_scaler) {
    const S::GradScalerState& x = *e.grad_scaler;
    const S::GradScalerState& y = *a.grad_scaler;
    if (x.growth_tracker != y.growth_tracker)
      notes.push_back("grad_scaler: growth_tracker " + std::to_string(y.growth_tracker) + ", expected " +
                      std::to_string(x.growth_tracker));
    if (x.growth_interval != y.growth_interval) notes.push_back("grad_scaler: growth_interval differs");
    if (x.growth_factor != y.growth_factor) notes.push_back("grad_scaler: growth_factor differs");
    if (x.backoff_factor != y.backoff_factor) notes.push_back("grad_scaler: backoff_factor differs");
  }
}

}  // namespace

StateComparison compare_runs(TrainingState expected, TrainingState actual, const std::vector<Step>& steps) {
  StateComparison c;
  c.steps = steps.size();
  const auto names = scales_of(expected);
  const auto restored = scales_of(actual);
  for (const auto& entry : names)
    if (!restored.count(entry.first))
      throw std::invalid_argument("the restored state has no " + (entry.first == scaler_key
                                                                      ? std::string(scaler_key)
                                                                      : "layer '" + entry.first + "'"));
  for (const auto& entry : restored)
    if (!names.count(entry.first))
      throw std::invalid_argument("the restored state holds '" + entry.first + "', which the saved state does not");
  note_state_differences(expected, actual, c.state_notes);
  std::map<std::string, bool> diverged;
  for (std::size_t k = 0; k <= steps.size(); ++k) {
    if (k > 0) {
      advance(expected, steps[k - 1]);
      advance(actual, steps[k - 1]);
    }
    const auto e = scales_of(expected);
    const auto a = scales_of(actual);
    for (const auto& entry : e)
      if (!diverged[entry.first] && entry.second != a.at(entry.first)) {
        diverged[entry.first] = true;
        c.first_per_layer.push_back({k, entry.first, entry.second, a.at(entry.first)});
      }
  }
  return c;
}

}  // namespace lowbit::training
