// Precision contracts (lowbit/contract.hpp, docs/contract.md) for lowbit.contract: the named contracts, a
// document validated by the library's loader, and one pass run to its stages, as `lowbit contract` runs it.
//
// A contract reaches these functions as a name (text = None) or as the JSON text of a document (the package
// reads a file or serializes a dict), with `label` saying where it came from for messages.  Every error is a
// ValueError naming the package's keyword: "contract: ...: passes.fprop.epilogue[2].format: ...", "x: ...".
#include "lowbit/contract.hpp"

#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common.hpp"
#include "lowbit/error.hpp"
#include "lowbit/names.hpp"
#include "lowbit/registry.hpp"
#include "lowbit/training_state.hpp"

namespace lowbit::python {

namespace {

namespace K = lowbit::contract;

K::Contract load_contract(const std::string& label, const std::optional<std::string>& text) {
  if (!text) {
    if (std::optional<K::Contract> c = K::find_named(label)) return std::move(*c);
    value_error("contract", "'" + label + "' is not a named contract (see lowbit.contract.names())");
  }
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(*text);
  } catch (const nlohmann::json::parse_error& e) {
    value_error("contract", label + ": malformed JSON at byte " + std::to_string(e.byte));
  } catch (const nlohmann::json::exception& e) { value_error("contract", label + ": malformed JSON: " + e.what()); }
  try {
    return K::parse(doc);
  } catch (const ArgumentError& e) {
    value_error("contract", label + ": " + (e.argument.empty() ? "" : e.argument + ": ") + e.what());
  }
}

std::vector<std::pair<std::string, std::string>> names() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const K::NamedContract& c : K::named()) out.emplace_back(c.name, c.description);
  return out;
}

// The document as loaded (the named contract's own text, or the file's), as JSON text.
std::string document(const std::string& label, const std::optional<std::string>& text) {
  return load_contract(label, text).document.dump();
}

// One input as the run reads it: codes of a format, row-major, of `shape`.
using Input = std::tuple<Codes, std::string, std::vector<std::uint64_t>>;

std::optional<K::Array> array_of(const char* argument, const std::optional<Input>& in) {
  if (!in) return std::nullopt;
  const auto& [codes, format, shape] = *in;
  K::Array a{&require_format(argument, format), shape, std::vector<std::uint64_t>(codes.size())};
  if (codes.itemsize() != storage_bytes(*a.format))
    type_error(argument, "item width does not match " + std::string(a.format->name));
  std::uint64_t count = 1;
  for (std::uint64_t d : shape) count *= d;
  if (count != codes.size()) value_error(argument, "the shape does not hold its codes");
  for (std::size_t i = 0; i < codes.size(); ++i) a.codes[i] = load(codes, i);
  return a;
}

// The parts of the contract's operands stored already quantized, as (input name, format): ("w.codes",
// "e2m1"), ("w.scales", "e4m3"), ("w.tensor_scale", "f32").
std::vector<std::pair<std::string, std::string>> stored_parts(const std::string& label,
                                                              const std::optional<std::string>& text) {
  const K::Contract c = load_contract(label, text);
  std::vector<std::pair<std::string, std::string>> out;
  for (K::Operand t : all<K::Operand>())
    if (const auto& q = c.stored_of(t))
      for (K::StoredPart part : all<K::StoredPart>())
        if (const Format* f = K::stored_part_format(*q, part))
          out.emplace_back(std::string(name(t)) + "." + name(part), f->name);
  return out;
}

// (stage, part, description, format, shape, codes, tolerance in ulps or None) of each stage, in the order `contract
// run` lists them.
using StageTuple = std::tuple<std::string, std::string, std::string, std::string, std::vector<std::uint64_t>,
                              nb::ndarray<nb::numpy, std::uint64_t, nb::ndim<1>>, std::optional<std::uint32_t>>;

// (contract name, stages, the delayed-scaling state after the step as lowbit state's JSON text, or None when
// the pass quantizes nothing with the delayed scheme).
std::tuple<std::string, std::vector<StageTuple>, std::optional<std::string>> run(
    const std::string& label, const std::optional<std::string>& text,
                                                    const std::string& pass_name, const std::optional<Input>& x,
                                                    const std::optional<Input>& w, const std::optional<Input>& dy,
                                                    const std::optional<Input>& bias,
                                                    const std::optional<Input>& residual,
                                                    const std::map<std::string, Input>& stored,
                                                    const std::optional<std::string>& state_text,
                                                    std::optional<std::uint64_t> sr_seed) {
  const K::Contract c = load_contract(label, text);
  const std::optional<K::Pass> pass = parse<K::Pass>(pass_name);
  if (!pass) value_error("pass_", "unknown '" + pass_name + "' (" + choices<K::Pass>() + ")");
  K::Inputs in{.x = array_of("x", x),
               .w = array_of("w", w),
               .dy = array_of("dy", dy),
               .bias = array_of("bias", bias),
               .residual = array_of("residual", residual),
               .stored = {},
               .delayed = {},
               .sr_seed = sr_seed};
  for (const auto& [key, part] : stored) in.stored[key] = *array_of(key.c_str(), part);
  // The delayed-scaling state, as `contract run --state` reads it: layers by tensor; those this pass
  // quantizes with the delayed scheme are stepped, the others carried.
  std::vector<K::Operand> delayed_here;
  if (const K::PassContract* pc = c.find(*pass)) {
    const K::PassOperands ops = K::operands_of(*pass);
    for (const auto& [t, q] : {std::pair{ops.a, &pc->a}, std::pair{ops.b, &pc->b}})
      if (q->recipe && q->options.scheme == scale::Scheme::delayed) delayed_here.push_back(t);
  }
  training::TrainingState state;
  if (state_text) {
    try {
      state = training::state_from_json(nlohmann::json::parse(*state_text), "state", formats::e4m3);
    } catch (const io::FileError& e) { value_error("state", e.what()); } catch (const nlohmann::json::exception& e) {
      value_error("state", std::string("malformed: ") + e.what());
    }
    for (const auto& [layer, ls] : state.layers) {
      const auto t = parse<K::Operand>(layer);
      if (!t) value_error("state", "layer '" + layer + "' is not one of the layer's tensors (" + choices<K::Operand>() + ")");
      for (K::Operand d : delayed_here)
        if (d == *t) in.delayed[d] = ls.delayed;
    }
    if (delayed_here.empty()) value_error("state", name(*pass) + std::string(" of ") + c.name + " quantizes no tensor with the delayed scheme");
  }
  K::RunResult r;
  std::optional<ArgumentError> refused;
  {
    nb::gil_scoped_release unlocked;
    try {
      r = K::run(c, *pass, in);
    } catch (const ArgumentError& e) { refused = e; }
  }
  if (refused) value_error(refused->argument == "pass" ? "pass_" : refused->argument, refused->what());
  std::vector<StageTuple> stages;
  for (K::Stage& s : r.stages)
    stages.emplace_back(s.name, s.part, s.description, s.array.format->name, s.array.shape,
                        to_numpy(std::move(s.array.codes)), s.tolerance_ulp);
  std::optional<std::string> next;
  if (!delayed_here.empty()) {
    const K::PassContract& pc = *c.find(*pass);
    const K::PassOperands ops = K::operands_of(*pass);
    for (const auto& [t, st] : r.next_delayed)
      state.layers[name(t)] = training::LayerState{st, (t == ops.a ? pc.a : pc.b).options.element};
    next = training::state_json(state).dump();
  }
  return {c.name, std::move(stages), next};
}

}  // namespace

void bind_contract(nb::module_& m) {
  m.def("contract_names", &names);
  m.def("contract_document", &document, nb::arg("label"), nb::arg("text").none());
  m.def("contract_run", &run, nb::arg("label"), nb::arg("text").none(), nb::arg("pass_"), nb::arg("x").none(),
        nb::arg("w").none(), nb::arg("dy").none(), nb::arg("bias").none(), nb::arg("residual").none(),
        nb::arg("stored"), nb::arg("state").none(), nb::arg("sr_seed").none());
  m.def("contract_stored_parts", &stored_parts, nb::arg("label"), nb::arg("text").none());
}

}  // namespace lowbit::python
