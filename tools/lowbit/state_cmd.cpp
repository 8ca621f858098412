// `lowbit state step` and `lowbit state convert`: the training scale state (lowbit/training_state.hpp) —
// TE's delayed scaling per layer and PyTorch's GradScaler — advanced exactly by a step's amaxes and found-inf
// flag, and converted between its JSON and safetensors forms.  Nothing is written unless every input reads.
#include <bit>
#include <memory>
#include <string>
#include <vector>

#include "cli_util.hpp"
#include "commands.hpp"
#include "lowbit/registry.hpp"
#include "lowbit/training_state.hpp"
#include "state_files.hpp"

namespace lowbit::cli {

namespace {

struct StateOptions {
  std::string state, out = "-", steps, element = "e4m3";
  std::vector<std::string> amax;
  std::string found_inf;
};

const Format& element_option(const std::string& name) {
  const Format* f = find_format(name);
  if (!f || !(max_value(*f) > 0.0) || f->storage_bits() > 8)
    throw InputError("--element: '" + echo_text(name) + "' is not an element format of at most 8 bits");
  return *f;
}

// --amax NAME=0x... (the unnamed layer of a `quantize --state` file: 0x... alone) and --found-inf as one step.
training::Step step_of_options(const StateOptions& o) {
  training::Step s;
  for (const std::string& a : o.amax) {
    const std::size_t eq = a.rfind('=');
    const std::string layer = eq == std::string::npos ? std::string{} : a.substr(0, eq);
    const std::string value = eq == std::string::npos ? a : a.substr(eq + 1);
    bool wide = false;
    const auto v = parse_hex(value, HexPrefix::required, &wide);
    if (!v || wide || *v > 0xFFFFFFFFu)
      throw InputError("--amax: '" + echo_text(a) + "' is not NAME=0x... (an f32 bit pattern)");
    if (s.amax.count(layer)) throw InputError("--amax: layer '" + layer + "' given twice");
    s.amax[layer] = std::bit_cast<float>(static_cast<std::uint32_t>(*v));
  }
  if (!o.found_inf.empty()) {
    if (o.found_inf != "true" && o.found_inf != "false" && o.found_inf != "1" && o.found_inf != "0")
      throw InputError("--found-inf: true or false (1 or 0)");
    s.found_inf = o.found_inf == "true" || o.found_inf == "1";
  }
  return s;
}

void run_step(const StateOptions& o) {
  training::TrainingState s = read_state_file(o.state, "--state", element_option(o.element));
  std::vector<training::Step> steps;
  if (!o.steps.empty()) {
    if (!o.amax.empty() || !o.found_inf.empty()) throw InputError("--steps: not with --amax or --found-inf");
    steps = read_steps_file(o.steps, "--steps");
  } else {
    if (o.amax.empty() && o.found_inf.empty())
      throw InputError("--amax / --found-inf / --steps: give this step's inputs");
    steps.push_back(step_of_options(o));
  }
  for (std::size_t k = 0; k < steps.size(); ++k) {
    try {
      training::advance(s, steps[k]);
    } catch (const std::invalid_argument& e) {
      throw InputError(
          (o.steps.empty() ? std::string("--amax / --found-inf") : "--steps: steps[" + std::to_string(k) + "]") + ": " +
          e.what());
    }
  }
  write_state_file(o.out, s, "--out", {o.state, o.steps});
}

}  // namespace

void add_state(CLI::App& app) {
  auto* state = app.add_subcommand("state", "Training scale state: TE's delayed scaling and PyTorch's GradScaler");
  state->require_subcommand(1);

  auto o = std::make_shared<StateOptions>();
  auto* step = state->add_subcommand(
      "step",
      "Advance a training state by one step's amaxes and found-inf flag (or by every step of --steps), "
      "exactly as Transformer Engine's delayed scaling and torch's GradScaler.update do");
  step->add_option("--state", o->state,
                   "The state: JSON (quantize --state's, or layers and grad_scaler) or .safetensors")
      ->required();
  step->add_option("--out", o->out, "Where the next state goes: .safetensors, else JSON (default -: stdout)");
  step->add_option(
      "--amax", o->amax,
      "A layer's amax this step, NAME=0x... (f32 bits; 0x... alone for a quantize --state file), repeatable");
  step->add_option("--found-inf", o->found_inf, "Whether this step's gradients held an Inf or NaN: true or false");
  step->add_option("--steps", o->steps,
                   "A JSON list of steps, each {\"amax\": {NAME: \"0x...\"}, \"found_inf\": BOOL}");
  step->add_option("--element", o->element, "The element format of layers whose state names none (default e4m3)");
  add_max_bytes(step);
  step->callback([o] { guarded([&] { run_step(*o); }); });

  auto c = std::make_shared<StateOptions>();
  auto* convert = state->add_subcommand("convert", "Write a training state in the other form (JSON or .safetensors)");
  convert->add_option("--in", c->state, "The state: JSON or .safetensors")->required();
  convert->add_option("--out", c->out, "The same state: .safetensors, else JSON (default -: stdout)");
  convert->add_option("--element", c->element, "The element format of layers whose state names none (default e4m3)");
  add_max_bytes(convert);
  convert->callback([c] {
    guarded([&] {
      write_state_file(c->out, read_state_file(c->state, "--in", element_option(c->element)), "--out", {c->state});
    });
  });
}

}  // namespace lowbit::cli
