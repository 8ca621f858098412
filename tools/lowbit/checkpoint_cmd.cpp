// `lowbit verify-checkpoint --source A.safetensors --quantized B.safetensors`: re-quantize every weight
// of A that B's metadata describes, with the recipe B records, and list every block whose codes or
// scales differ — the check one runs on an exporter's output.  Exit 0: identical; 1: differences;
// 2: a bad file or metadata (the message names the file and the key).
//
// `lowbit verify-checkpoint --state SAVED --restored RESTORED --steps STEPS`: a training state instead of weights
// (lowbit/training_state.hpp): both states run through the steps after the checkpoint, every next-step scale
// compared, the first layer and step that differ named.  Same exit codes.
//
// A GGUF file (B.gguf, or any file starting with GGUF's magic) is checked tensor by tensor: each MXFP4 tensor
// re-quantized from the source under the mx scheme's gguf variant; other tensors listed as skipped.
//
// B's convention for a quantized weight W (reference/README.md "Files"):
//   tensors   W.data          codes: U8 (I8 / F8_E4M3 / F8_E5M2 accepted for those elements), W's
//                             shape; or U8 packed along the last dimension (W.packing)
//             W.block_scales  U8 (F8_E8M0 / F8_E4M3 accepted) scale codes, or F32 (U32 accepted) decode
//                             scales; row-major (any shape holding scale_rows x scale_cols values) or the
//                             cuBLASLt tiled buffer (W.layout)
//             W.tensor_scale  F32 (U32 accepted), one value: the NVFP4 tensor decode scale
//   metadata  W.quantization_format (required) and the recipe keys of quantize_common.hpp, plus
//             W.layout (row-major | cublaslt) and W.packing (none | fp4x2 | fp6x4).
#include <algorithm>
#include <bit>
#include <cstdint>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli_util.hpp"
#include "commands.hpp"
#include "lowbit/checkpoint.hpp"
#include "lowbit/exact.hpp"
#include "lowbit/io.hpp"
#include "lowbit/pack.hpp"
#include "lowbit/scale.hpp"
#include "quantize_common.hpp"
#include "state_files.hpp"

namespace lowbit::cli {

namespace {

using json = nlohmann::json;
namespace S = scale;
using checkpoint::BlockDiff;
using checkpoint::TensorReport;
using checkpoint::value_text;

struct VerifyOptions {
  std::string source, quantized;
  std::vector<std::string> fused;  // "a,b,c" groups, or "none"
  std::vector<std::string> names;  // GGUF "gguf_name=source_name"
  long long max_report = -1;       // < 0: every differing block
  bool as_json = false;
  std::string state, restored, steps;  // --state mode
};

std::string block_line(const TensorReport& t, const BlockDiff& d) {
  std::string s = "  block " + std::to_string(d.block) + " (rows " + std::to_string(d.r0) + ".." +
                  std::to_string(d.r1) + ", cols " + std::to_string(d.c0) + ".." + std::to_string(d.c1) + "):";
  const int sd = t.scale_format->hex_digits();
  if (d.scale_differs)
    s += " scale expected " + hex(d.scale_expected, sd) + " (" + value_text(*t.scale_format, d.scale_expected) +
         ") actual " + hex(d.scale_actual, sd) + " (" + value_text(*t.scale_format, d.scale_actual) + ")";
  if (d.codes_differ) {
    if (d.scale_differs) s += ";";
    const int cd = t.element->hex_digits();
    s += " " + std::to_string(d.codes_differ) + (d.codes_differ == 1 ? " code differs" : " codes differ") +
         ", first at (" + std::to_string(d.first.row) + ", " + std::to_string(d.first.col) + "): expected " +
         hex(d.first.expected, cd) + " (" + value_text(*t.element, d.first.expected) + ") actual " +
         hex(d.first.actual, cd) + " (" + value_text(*t.element, d.first.actual) + ")";
  }
  return s;
}

json block_json(const TensorReport& t, const BlockDiff& d) {
  json j = {{"block", d.block}, {"rows", {d.r0, d.r1}}, {"cols", {d.c0, d.c1}}};
  const int sd = t.scale_format->hex_digits();
  if (d.scale_differs)
    j["scale"] = {{"expected", hex(d.scale_expected, sd)},
                  {"actual", hex(d.scale_actual, sd)},
                  {"expected_value", value_text(*t.scale_format, d.scale_expected)},
                  {"actual_value", value_text(*t.scale_format, d.scale_actual)}};
  if (d.codes_differ) {
    const int cd = t.element->hex_digits();
    j["codes"] = {{"differ", d.codes_differ},
                  {"first",
                   {{"row", d.first.row},
                    {"col", d.first.col},
                    {"expected", hex(d.first.expected, cd)},
                    {"actual", hex(d.first.actual, cd)},
                    {"expected_value", value_text(*t.element, d.first.expected)},
                    {"actual_value", value_text(*t.element, d.first.actual)}}}};
  }
  return j;
}

std::string scale_text(std::uint32_t bits) { return hex(bits, 8) + " (" + value_text(formats::f32, bits) + ")"; }

std::string layer_text(const std::string& layer) {
  return layer == "grad_scaler" ? std::string("grad_scaler")
         : layer.empty()        ? std::string("the layer")
                                : "layer '" + layer + "'";
}

// --state SAVED --restored RESTORED --steps STEPS: both states run through the steps; every scale (each
// layer's delayed scale, the loss scale) is compared as restored and after each step.
int run_verify_state(const VerifyOptions& o) {
  if (!o.source.empty() || !o.quantized.empty()) throw InputError("--state: not with --source or --quantized");
  if (o.restored.empty()) throw InputError("--restored: required with --state (the state as the trainer restored it)");
  if (o.steps.empty()) throw InputError("--steps: required with --state (the steps after the checkpoint)");
  const training::TrainingState saved = read_state_file(o.state, "--state", formats::e4m3);
  const training::TrainingState restored = read_state_file(o.restored, "--restored", formats::e4m3);
  const std::vector<training::Step> steps = read_steps_file(o.steps, "--steps");
  training::StateComparison c;
  try {
    c = training::compare_runs(saved, restored, steps);
  } catch (const std::invalid_argument& e) { throw InputError(std::string("--steps / --restored: ") + e.what()); }
  if (o.as_json) {
    json out = {{"state", o.state},           {"restored", o.restored},       {"steps", c.steps},
                {"identical", c.identical()}, {"state_notes", c.state_notes}, {"differences", json::array()}};
    for (const training::Divergence& d : c.first_per_layer)
      out["differences"].push_back({{"layer", d.layer},
                                    {"after_step", d.step},
                                    {"expected", hex(d.expected, 8)},
                                    {"actual", hex(d.actual, 8)},
                                    {"expected_value", value_text(formats::f32, d.expected)},
                                    {"actual_value", value_text(formats::f32, d.actual)}});
    std::cout << out.dump(1) << "\n";
  } else {
    std::string s;
    for (const std::string& n : c.state_notes) s += "state: " + n + "\n";
    for (const training::Divergence& d : c.first_per_layer)
      s += layer_text(d.layer) + ": scale first differs " +
           (d.step == 0 ? std::string("as restored") : "after step " + std::to_string(d.step)) + ": expected " +
           scale_text(d.expected) + " actual " + scale_text(d.actual) + "\n";
    s += "verify-checkpoint --state: " + std::to_string(c.steps) + " step(s), ";
    if (c.identical()) {
      s += "every next-step scale identical\n";
    } else {
      const training::Divergence& d = c.first_per_layer.front();
      s += "first difference: " + layer_text(d.layer) + " " +
           (d.step == 0 ? std::string("as restored") : "after step " + std::to_string(d.step)) + "\n";
    }
    std::cout << s;
  }
  std::cout.flush();
  return c.identical() ? 0 : 1;
}

int run_verify(const VerifyOptions& o) {
  if (!o.state.empty()) return run_verify_state(o);
  if (o.source.empty()) throw InputError("--source is required (or --state for a training state)");
  if (o.quantized.empty()) throw InputError("--quantized is required (or --state for a training state)");
  if (!o.restored.empty() || !o.steps.empty()) throw InputError("--restored / --steps: only with --state");
  checkpoint::CheckpointOptions copt;
  if (!o.fused.empty()) {
    copt.fused.clear();
    for (const std::string& g : o.fused) {
      if (g == "none") continue;
      std::vector<std::string> group;
      std::size_t start = 0;
      while (start <= g.size()) {
        const std::size_t comma = std::min(g.find(',', start), g.size());
        const std::string leaf = g.substr(start, comma - start);
        if (leaf.empty()) throw ArgumentError("fused", "'" + g + "' is not a comma-separated list of module names");
        group.push_back(leaf);
        start = comma + 1;
      }
      if (group.size() < 2) throw ArgumentError("fused", "'" + g + "' names one module; a fused group has two or more");
      copt.fused.push_back(group);
    }
  }
  for (const std::string& n : o.names) {
    const auto eq = n.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == n.size())
      throw ArgumentError("names", "'" + echo_text(n, 120) + "' is not GGUF_NAME=SOURCE_NAME");
    if (!copt.gguf_names.emplace(n.substr(0, eq), n.substr(eq + 1)).second)
      throw ArgumentError("names", "'" + echo_text(n.substr(0, eq), 120) + "' is named twice");
  }
  checkpoint::CheckpointReport report;
  try {
    report = checkpoint::verify_checkpoint(o.source, o.quantized, copt);
  } catch (const io::FileError& e) { throw InputError(e.what()); }
  const std::vector<TensorReport>& reports = report.tensors;

  std::size_t differing = 0;
  for (const TensorReport& t : reports) differing += t.diffs.size();
  const bool identical = report.identical();
  const std::size_t limit = o.max_report < 0 ? SIZE_MAX : static_cast<std::size_t>(o.max_report);
  std::size_t shown = 0;
  if (o.as_json) {
    json out = {{"source", o.source},        {"quantized", o.quantized},    {"format", name(report.format)},
                {"identical", identical},    {"problems", report.problems}, {"differing_blocks", differing},
                {"skipped", report.skipped}, {"tensors", json::array()}};
    for (const TensorReport& t : reports) {
      json jt = {{"name", t.name},     {"recipe", t.recipe},
                 {"blocks", t.blocks}, {"differing_blocks", t.diffs.size()},
                 {"notes", t.notes},   {"differences", json::array()}};
      for (const BlockDiff& d : t.diffs)
        if (shown < limit) {
          jt["differences"].push_back(block_json(t, d));
          ++shown;
        }
      out["tensors"].push_back(jt);
    }
    out["reported_blocks"] = shown;
    std::cout << out.dump(1) << "\n";
  } else {
    std::string s;
    for (const std::string& p : report.problems) s += "problem: " + p + "\n";
    for (const std::string& k : report.skipped) s += "skipped: " + k + "\n";
    for (const TensorReport& t : reports) {
      s += t.name + ": " + t.recipe + ": ";
      if (t.diffs.empty() && t.notes.empty()) {
        s += "identical (" + std::to_string(t.blocks) + " blocks)\n";
        continue;
      }
      s += std::to_string(t.diffs.size()) + " of " + std::to_string(t.blocks) + " blocks differ\n";
      for (const std::string& n : t.notes) s += "  " + n + "\n";
      for (const BlockDiff& d : t.diffs)
        if (shown < limit) {
          s += block_line(t, d) + "\n";
          ++shown;
        }
    }
    if (shown < differing) s += "(" + std::to_string(differing - shown) + " more differing blocks not listed)\n";
    // lowbit's own files keep the summary they always had; an exporter's is named.
    const std::string format =
        report.format == checkpoint::CheckpointFormat::lowbit ? "" : std::string(name(report.format)) + ", ";
    s += "verify-checkpoint: " + format + std::to_string(reports.size()) + " tensor(s), " + std::to_string(differing) +
         " differing block(s)" +
         (report.problems.empty() ? "" : ", " + std::to_string(report.problems.size()) + " problem(s)") +
         (identical ? ", identical" : "") + "\n";
    std::cout << s;
  }
  std::cout.flush();
  return identical ? 0 : 1;
}

}  // namespace

void add_verify_checkpoint(CLI::App& app) {
  auto o = std::make_shared<VerifyOptions>();
  auto* v = app.add_subcommand("verify-checkpoint",
                               "Re-quantize a checkpoint's source weights with the recipe in its metadata and list "
                               "every block whose codes or scales differ (exit 0 identical, 1 differences, 2 bad "
                               "file or metadata)");
  v->add_option("--source", o->source,
                "The unquantized weights (F32, BF16, F16): a safetensors file, or a directory with model.safetensors "
                "or model.safetensors.index.json");
  v->add_option(
      "--quantized", o->quantized,
      "lowbit's B.safetensors (W.data, W.block_scales, W.tensor_scale, metadata), or an exporter's "
      "checkpoint directory (compressed-tensors: config.json and its safetensors; ModelOpt: hf_quant_config.json), "
      "or a GGUF file (its MXFP4 tensors, as gguf-py quantizes them)");
  v->add_option("--fused", o->fused,
                "Projections sharing one NVFP4 global scale (weight_global_scale, ModelOpt's weight_scale_2), "
                "comma-separated module names, repeatable "
                "(default q_proj,k_proj,v_proj and gate_proj,up_proj; none: no fused groups)");
  v->add_option("--names", o->names,
                "GGUF: GGUF_NAME=SOURCE_NAME for a tensor that neither has the source's name nor gguf-py's Llama "
                "name (blk.N.attn_q.weight -> model.layers.N.self_attn.q_proj.weight, ...), repeatable");
  v->add_option("--max-report", o->max_report, "List at most N differing blocks (default: all)")
      ->check(whole_number(0, std::numeric_limits<int>::max()));
  v->add_flag("--json", o->as_json, "Print one JSON object");
  v->add_option("--state", o->state,
                "Instead of weights: a training state as the uninterrupted run saved it (lowbit state's JSON or "
                ".safetensors); with --restored and --steps, every next-step scale of both runs is compared");
  v->add_option("--restored", o->restored, "With --state: the same state as the trainer restored it");
  v->add_option("--steps", o->steps, "With --state: the steps after the checkpoint (lowbit state step --steps)");
  v->callback([o] {
    int code = 0;
    guarded([&] { code = run_verify(*o); });
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace lowbit::cli
