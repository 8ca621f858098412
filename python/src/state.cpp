// The training scale state (lowbit/training_state.hpp) for lowbit.state: TE's delayed scaling per layer and
// PyTorch's GradScaler, read from and written to their JSON and safetensors forms, stepped exactly and
// compared run against run, as `lowbit state` and `verify-checkpoint --state` do.  A state crosses into
// Python as the JSON text of its documented form (the package turns it into a dict); every error is a
// ValueError naming the keyword and, for a file, the file and the key.
#include "lowbit/training_state.hpp"

#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "common.hpp"
#include "lowbit/error.hpp"
#include "lowbit/io.hpp"
#include "lowbit/output.hpp"
#include "lowbit/registry.hpp"

namespace lowbit::python {

namespace {

namespace T = lowbit::training;
using json = nlohmann::json;

bool is_safetensors(const std::string& path) { return path.size() > 12 && path.ends_with(".safetensors"); }

json parse_text(const std::string& argument, const std::string& text) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) { value_error(argument, std::string("malformed JSON: ") + e.what()); }
}

const Format& element_of(const std::string& name) {
  const Format& f = require_format("element", name);
  if (f.storage_bits() > 8) value_error("element", "'" + name + "' is not an element format of at most 8 bits");
  return f;
}

// The library's message without its file part (the state came as a dict, named by `argument`).
std::string without_file(const io::FileError& e) {
  const std::string m = e.what();
  return m.rfind(e.path() + ": ", 0) == 0 ? m.substr(e.path().size() + 2) : m;
}

T::TrainingState state_of(const std::string& argument, const std::string& text, const std::string& element) {
  try {
    return T::state_from_json(parse_text(argument, text), argument, element_of(element));
  } catch (const io::FileError& e) { value_error(argument, without_file(e)); }
}

std::vector<T::Step> steps_of(const std::string& text) {
  try {
    return T::steps_from_json(parse_text("steps", text), "steps");
  } catch (const io::FileError& e) { value_error("steps", without_file(e)); }
}

// A safetensors state file as the JSON text of its content (the package reads a JSON file itself).
std::string read_safetensors_state(const std::string& path) {
  try {
    return T::state_json(T::state_from_safetensors(io::read_safetensors(path))).dump();
  } catch (const io::FileError& e) { value_error("path", e.what()); }
}

// Writes the state through the one writer (a new file renamed over the old; none of `inputs` replaced).
void write_state(const std::string& text, const std::string& path, const std::vector<std::string>& inputs) {
  const T::TrainingState s = state_of("state", text, "e4m3");
  try {
    if (is_safetensors(path)) {
      std::map<std::string, io::Tensor> tensors;
      std::map<std::string, std::string> metadata;
      T::state_tensors(s, tensors, metadata);
      io::write_safetensors(path, tensors, metadata, io::OutputOptions{inputs});
    } else {
      const std::string body = T::state_json(s).dump(1) + "\n";
      io::write_output(path, body, io::OutputOptions{inputs});
    }
  } catch (const io::FileError& e) { value_error("path", e.what()); }
}

std::string step_state(const std::string& text, const std::string& steps_text) {
  T::TrainingState s = state_of("state", text, "e4m3");
  const std::vector<T::Step> steps = steps_of(steps_text);
  for (std::size_t k = 0; k < steps.size(); ++k) {
    try {
      T::advance(s, steps[k]);
    } catch (const std::invalid_argument& e) {
      value_error("steps", "steps[" + std::to_string(k) + "]: " + e.what());
    }
  }
  return T::state_json(s).dump();
}

// (steps compared, [(step, layer, expected bits, actual bits)], notes)
std::tuple<std::size_t, std::vector<std::tuple<std::size_t, std::string, std::uint32_t, std::uint32_t>>,
           std::vector<std::string>>
compare_states(const std::string& saved, const std::string& restored, const std::string& steps_text) {
  T::StateComparison c;
  try {
    c = T::compare_runs(state_of("saved", saved, "e4m3"), state_of("restored", restored, "e4m3"), steps_of(steps_text));
  } catch (const std::invalid_argument& e) { value_error("steps", e.what()); }
  std::vector<std::tuple<std::size_t, std::string, std::uint32_t, std::uint32_t>> d;
  for (const T::Divergence& v : c.first_per_layer) d.emplace_back(v.step, v.layer, v.expected, v.actual);
  return {c.steps, d, c.state_notes};
}

}  // namespace

void bind_state(nb::module_& m) {
  m.def("state_read_safetensors", &read_safetensors_state, nb::arg("path"));
  m.def("state_write", &write_state, nb::arg("state"), nb::arg("path"), nb::arg("inputs"));
  m.def("state_normal", [](const std::string& text, const std::string& element) {
    return T::state_json(state_of("state", text, element)).dump();
  }, nb::arg("state"), nb::arg("element"));
  m.def("state_step", &step_state, nb::arg("state"), nb::arg("steps"));
  m.def("state_compare", &compare_states, nb::arg("saved"), nb::arg("restored"), nb::arg("steps"));
}

}  // namespace lowbit::python
