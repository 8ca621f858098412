// lowbit/training_state.hpp — the scale state a training checkpoint must carry for exact continuation:
// Transformer Engine's delayed-scaling state per layer (amax history, scale, algorithm, margin) and PyTorch's
// loss scaler (GradScaler's state_dict), stepped exactly (scale::delayed_update, scale::grad_scaler_update),
// written as JSON or as safetensors with metadata (the same content), and compared run against run.
//
// JSON: {"layers": {NAME: {"history": ["0x..."], "scale": "0x...", "algorithm": "max"|"most_recent",
//        "margin": N, "element": "e4m3"}}, "grad_scaler": {"scale": "0x...", "growth_tracker": N,
//        "growth_factor": X, "backoff_factor": X, "growth_interval": N}}
// f32 values as bit patterns; the factors as JSON numbers (read as the nearest double, as Python reads them).
// The object `quantize --state` writes (history, scale, algorithm, margin) is one unnamed layer, and is
// written back in that shape.
// safetensors: NAME.amax_history (F32 [length]) and NAME.scale (F32 []) per layer, its algorithm, margin
// and element as metadata NAME.algorithm, NAME.margin, NAME.element (the unnamed layer without "NAME.");
// grad_scaler.scale (F32 []), grad_scaler.growth_tracker (I32 []), metadata grad_scaler.growth_factor,
// grad_scaler.backoff_factor (17 significant digits: the double exactly), grad_scaler.growth_interval;
// metadata "lowbit.training_state" = "1".
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "lowbit/format.hpp"
#include "lowbit/io.hpp"
#include "lowbit/scale.hpp"

namespace lowbit::training {

struct LayerState {
  scale::DelayedState delayed;
  const Format* element = nullptr;  // the format the scale maps the amax onto (e4m3 unless stated)
};

struct TrainingState {
  std::map<std::string, LayerState> layers;  // "" is the unnamed layer of a `quantize --state` file
  std::optional<scale::GradScalerState> grad_scaler;
};

// One training step's inputs: each layer's amax, and whether the loss scaler's unscale found an Inf or NaN.
struct Step {
  std::map<std::string, float> amax;
  std::optional<bool> found_inf;
};

// Readers: io::FileError(file, key, problem) naming the key at fault.  `element` is the format of a layer
// whose JSON has no "element" key.
TrainingState state_from_json(const nlohmann::json& j, const std::string& file, const Format& element);
TrainingState state_from_safetensors(const io::Safetensors& st);
std::vector<Step> steps_from_json(const nlohmann::json& j, const std::string& file);

nlohmann::ordered_json state_json(const TrainingState& s);
void state_tensors(const TrainingState& s, std::map<std::string, io::Tensor>& tensors,
                   std::map<std::string, std::string>& metadata);

// Advances `s` by one step.  std::invalid_argument naming the layer when the step lacks a layer's amax,
// names a layer the state does not hold, or gives found_inf without a loss scaler (or the reverse).
void advance(TrainingState& s, const Step& step);

// Where a restored state's run first leaves the uninterrupted run's.
struct Divergence {
  std::size_t step = 0;                    // 0: the scales as restored (what the next step uses); k: after step k
  std::string layer;                       // a layer's name, or "grad_scaler"
  std::uint32_t expected = 0, actual = 0;  // the scales' f32 bits
};
struct StateComparison {
  std::size_t steps = 0;
  std::vector<Divergence> first_per_layer;  // each diverging scale's first step, earliest first; empty: identical
  std::vector<std::string> state_notes;     // where the states differ other than in a scale
  bool identical() const { return first_per_layer.empty(); }
};
// Runs both states through `steps`, comparing every scale after each step (step 0: as given).
StateComparison compare_runs(TrainingState expected, TrainingState actual, const std::vector<Step>& steps);

}  // namespace lowbit::training
