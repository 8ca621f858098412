// `lowbit contract list | show | run | check`: precision contracts (lowbit/contract.hpp, docs/contract.md) from
// the command line.  `run` writes every stage of one pass as .npy with a manifest.json listing them, as one
// folder swapped in whole; `check` compares a kernel's stages bit for bit: its files, named as the stages, or
// what a plugin's contract entry (include/lowbit/plugin.h) computes from the run's inputs.
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli_util.hpp"
#include "commands.hpp"
#include "lowbit/contract.hpp"
#include "lowbit/gate.hpp"
#include "lowbit/io.hpp"
#include "lowbit/sha256.hpp"
#include "state_files.hpp"

#ifndef LOWBIT_VERSION
#define LOWBIT_VERSION "0.0.0"
#endif

namespace lowbit::cli {

namespace {

using json = nlohmann::ordered_json;
namespace K = contract;

struct ContractOptions {
  std::string contract, show, pass = "fprop", x, w, dy, bias, residual, out, inputs, results, plugin, state;
  // The parts of operands stored already quantized, by input name ("w.codes"): --w-codes, ...
  std::map<std::string, std::string> stored;
  long long sr_seed = -1;
  double timeout = 60;
  bool json = false, in_process = false;
};

// A named contract, or a contract file: errors name the file and the JSON path.
K::Contract load_contract(const std::string& what, const std::string& option) {
  if (auto c = K::find_named(what)) return *c;
  std::error_code ec;
  if (!std::filesystem::exists(what, ec))
    throw InputError(option + ": '" + echo_text(what) +
                     "' is neither a named contract (see lowbit contract list) nor a file");
  const std::string text = read_all(what, option);
  nlohmann::json doc;
  try {
    doc = parse_json(text, option);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(option + ": '" + echo_text(what) + "': malformed JSON at byte " + std::to_string(e.byte));
  } catch (const nlohmann::json::exception& e) {
    throw InputError(option + ": '" + echo_text(what) + "': malformed JSON: " + e.what());
  }
  try {
    return K::parse(doc);
  } catch (const ArgumentError& e) {
    throw InputError(option + ": '" + echo_text(what) + "': " + (e.argument.empty() ? "" : e.argument + ": ") +
                     e.what());
  }
}

// The .npy dtype a stage's codes are stored as: f32 and f16 as themselves, bf16 as '<u2' (io.hpp's
// convention), other formats as unsigned codes of their storage width.
io::DType dtype_of(const Format& f) {
  if (same_format(f, formats::f32)) return io::DType::f32;
  if (same_format(f, formats::f16)) return io::DType::f16;
  if (same_format(f, formats::bf16)) return io::DType::bf16;
  const int bits = f.storage_bits();
  return bits <= 8 ? io::DType::u8 : bits <= 16 ? io::DType::u16 : io::DType::u32;
}

std::vector<std::uint8_t> npy_bytes(const K::Array& a) {
  const unsigned width = io::dtype_bits(dtype_of(*a.format)) / 8;
  std::vector<std::uint8_t> bytes;
  bytes.reserve(a.codes.size() * width);
  for (std::uint64_t v : a.codes)
    for (unsigned b = 0; b < width; ++b) bytes.push_back(static_cast<std::uint8_t>(v >> (8 * b)));
  return io::encode_npy(dtype_of(*a.format), a.shape, bytes);
}

// Codes of an array read from a .npy of `dtype`; the caller checked its width.
std::vector<std::uint64_t> codes_of(const io::Tensor& t) {
  std::vector<std::uint64_t> v;
  switch (io::dtype_bits(t.dtype)) {
    case 8:
      for (std::uint8_t c : t.values<std::uint8_t>()) v.push_back(c);
      break;
    case 16:
      for (std::uint16_t c : t.values<std::uint16_t>()) v.push_back(c);
      break;
    default:
      for (std::uint32_t c : t.values<std::uint32_t>()) v.push_back(c);
  }
  return v;
}

// An input tensor: f32 ('<f4'), f16 ('<f2') or bf16 bit patterns ('<u2'), of rank `rank`.
K::Array read_input(const std::string& path, const std::string& option, std::size_t rank) {
  io::NpyArray t;
  try {
    t = io::read_npy(path);
  } catch (const io::FileError& e) { throw InputError(option + ": " + e.what()); }
  const Format* f = t.dtype == io::DType::f32   ? &formats::f32
                    : t.dtype == io::DType::f16 ? &formats::f16
                    : t.dtype == io::DType::u16 ? &formats::bf16
                                                : nullptr;
  if (!f)
    throw InputError(option + ": '" + echo_text(path) + "' holds '" +
                     std::string(io::npy_descr(t.dtype).value_or("?")) +
                     "'; expected f32 ('<f4'), f16 ('<f2') or bf16 bit patterns ('<u2')");
  if (t.rank() != rank)
    throw InputError(option + ": '" + echo_text(path) + "' is " + std::to_string(t.rank()) + "-D; expected " +
                     std::to_string(rank) + "-D");
  return {f, t.shape, codes_of(t)};
}

// The option of an input the engine names: "w.codes" is --w-codes, "sr_seed" --sr-seed.
std::string option_of(const std::string& argument) {
  std::string s = "--";
  for (char ch : argument) s += ch == '_' || ch == '.' ? '-' : ch;
  return s;
}

// One part of an operand stored already quantized: u8 codes of its element, its scales as `contract run`
// writes them (f32 '<f4', or e8m0 / e4m3 codes as u8), the tensor scale '<f4'.  A part the contract does
// not store is read as its dtype says, for the engine to refuse by name.
K::Array read_stored(const K::Contract& c, const std::string& key, const std::string& path) {
  const std::string option = option_of(key);
  io::NpyArray t;
  try {
    t = io::read_npy(path);
  } catch (const io::FileError& e) { throw InputError(option + ": " + e.what()); }
  const Format* want = nullptr;
  for (K::Operand op : all<K::Operand>())
    for (K::StoredPart part : all<K::StoredPart>())
      if (c.stored_of(op) && key == std::string(name(op)) + "." + name(part))
        want = K::stored_part_format(*c.stored_of(op), part);
  if (!want) want = t.dtype == io::DType::f32 ? &formats::f32 : &formats::e4m3;
  if (t.dtype != dtype_of(*want))
    throw InputError(option + ": '" + echo_text(path) + "' holds '" +
                     std::string(io::npy_descr(t.dtype).value_or("?")) + "'; " + want->name + " codes are stored as '" +
                     std::string(io::npy_descr(dtype_of(*want)).value_or("?")) + "'");
  return {want, t.shape, codes_of(t)};
}

void run_list() {
  std::string s;
  for (const K::NamedContract& c : K::named()) s += std::string(c.name) + "\t" + c.description + "\n";
  write_all("-", s, "--out");
}

void run_show(const ContractOptions& o) {
  const K::Contract c = load_contract(o.show, "NAME|FILE");
  if (o.json) return write_all("-", c.document.dump(2) + "\n", "--out");
  std::string s = c.name + ": " + c.description + "\n";
  if (!c.source.empty()) s += "source: " + c.source + "\n";
  s += std::string("hardware: ") + name(c.hardware) + "\n";
  s += "storage:";
  for (K::Operand t : all<K::Operand>())
    s += std::string(" ") + name(t) + " " + (c.stored_of(t) ? "quantized " : "") + c.storage_of(t).name;
  s += "\n";
  for (const K::PassContract& p : c.passes) {
    const K::PassOperands ops = K::operands_of(p.pass);
    s += std::string(name(p.pass)) + " (" + row_of(p.pass)->help + "): procedure " + p.procedure->name + "\n";
    for (const auto& [t, q] : {std::pair{ops.a, &p.a}, std::pair{ops.b, &p.b}}) {
      s += std::string("  ") + name(t) + ": ";
      if (!q->recipe) {
        s += std::string("not quantized (") + c.storage_of(t).name + ")\n";
        continue;
      }
      if (q->stored) {
        s += std::string("stored quantized (") + name(q->options.scheme) + " " + q->options.element->name +
             "), its codes and scales unchanged\n";
        continue;
      }
      s += std::string(name(q->options.scheme)) + " " + q->options.element->name + " (" +
           policy_text(q->options.element_policy) + ")\n";
    }
    s += "  epilogue:";
    for (const K::Step& st : p.epilogue) {
      s += std::string(" ") + name(st.kind) + (st.format ? std::string("(") + st.format->name + ")" : "");
      if (st.kind == K::StepKind::gelu || st.kind == K::StepKind::silu)
        s += std::string("(") + (st.kind == K::StepKind::gelu ? std::string(name(st.gelu_form)) + ", " : "") +
             "within " + std::to_string(st.tolerance_ulp) + " ulp)";
    }
    s += "\n";
  }
  write_all("-", s, "--out");
}

void run_run(const ContractOptions& o) {
  if (o.out.empty()) throw InputError("--out: required");
  const K::Contract c = load_contract(o.contract, "--contract");
  const auto pass = parse<K::Pass>(o.pass);
  if (!pass) throw InputError("--pass: unknown '" + echo_text(o.pass) + "' (" + choices<K::Pass>() + ")");
  K::Inputs in;
  std::vector<std::string> read;
  std::map<std::string, std::string> paths;
  for (const auto& [key, path, slot, rank] :
       {std::tuple{"x", &o.x, &in.x, 2u}, std::tuple{"w", &o.w, &in.w, 2u}, std::tuple{"dy", &o.dy, &in.dy, 2u},
        std::tuple{"bias", &o.bias, &in.bias, 1u}, std::tuple{"residual", &o.residual, &in.residual, 2u}}) {
    if (path->empty()) continue;
    *slot = read_input(*path, flag_of(key), rank);
    read.push_back(*path);
    paths[key] = *path;
  }
  for (const auto& [key, path] : o.stored) {
    if (path.empty()) continue;
    in.stored[key] = read_stored(c, key, path);
    read.push_back(path);
  }
  if (o.sr_seed >= 0) in.sr_seed = static_cast<std::uint64_t>(o.sr_seed);
  // The delayed-scaling state (lowbit state's file, layers named by tensor): the tensors this pass quantizes
  // with the delayed scheme take theirs; the others are carried into next_state.json unchanged.
  const K::PassContract* pc = c.find(*pass);
  std::vector<K::Operand> delayed_here;
  if (pc) {
    const K::PassOperands ops = K::operands_of(*pass);
    for (const auto& [t, q] : {std::pair{ops.a, &pc->a}, std::pair{ops.b, &pc->b}})
      if (q->recipe && q->options.scheme == scale::Scheme::delayed) delayed_here.push_back(t);
  }
  training::TrainingState state;
  if (!o.state.empty()) {
    state = read_state_file(o.state, "--state", formats::e4m3);
    for (const auto& [layer, ls] : state.layers) {
      const auto t = parse<K::Operand>(layer);
      if (!t)
        throw InputError("--state: '" + echo_text(o.state) + "': layer '" + echo_text(layer) +
                         "' is not one of the layer's tensors (" + choices<K::Operand>() + ")");
      for (K::Operand d : delayed_here)
        if (d == *t) in.delayed[d] = ls.delayed;
    }
    if (delayed_here.empty())
      throw InputError("--state: " + std::string(pc ? name(pc->pass) : o.pass) + " of " + c.name +
                       " quantizes no tensor with the delayed scheme");
    read.push_back(o.state);
  }
  K::RunResult r;
  try {
    r = K::run(c, *pass, in);
  } catch (const ArgumentError& e) { throw InputError(option_of(e.argument) + ": " + e.what()); }
  json manifest;
  manifest["lowbit_contract_run"] = 1;
  manifest["generator"] = std::string("lowbit ") + LOWBIT_VERSION;
  manifest["contract"] = c.name;
  manifest["pass"] = name(*pass);
  manifest["document"] = c.document;
  // The seed of the stochastic rounding, so that a check by --plugin can hand the kernel the same one.
  if (in.sr_seed) manifest["sr_seed"] = *in.sr_seed;
  manifest["inputs"] = json::array();
  manifest["stages"] = json::array();
  try {
    io::FolderOutput out(o.out, {.marker = "manifest.json", .inputs = read});
    auto add = [&](const std::string& file, const std::vector<std::uint8_t>& bytes) {
      const std::span<const std::uint8_t> part(bytes);
      out.add(file, std::span<const std::span<const std::uint8_t>>(&part, 1));
      return Sha256::of(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
    };
    for (const auto& [key, slot] : {std::pair{"x", &in.x}, std::pair{"w", &in.w}, std::pair{"dy", &in.dy},
                                    std::pair{"bias", &in.bias}, std::pair{"residual", &in.residual}}) {
      if (!*slot) continue;
      const std::string file = std::string("inputs/") + key + ".npy";
      const std::string sum = add(file, npy_bytes(**slot));
      manifest["inputs"].push_back({{"name", key},
                                    {"path", file},
                                    {"format", (*slot)->format->name},
                                    {"shape", (*slot)->shape},
                                    {"sha256", sum}});
    }
    for (const auto& [key, array] : in.stored) {
      const std::string file = "inputs/" + key + ".npy";
      const std::string sum = add(file, npy_bytes(array));
      manifest["inputs"].push_back(
          {{"name", key}, {"path", file}, {"format", array.format->name}, {"shape", array.shape}, {"sha256", sum}});
    }
    for (const K::Stage& s : r.stages) {
      const std::string sum = add(s.file(), npy_bytes(s.array));
      json e = {{"stage", s.name}, {"path", s.file()}, {"format", s.array.format->name}, {"shape", s.array.shape}};
      if (!s.part.empty()) e["part"] = s.part;
      e["description"] = s.description;
      // From an activation on, `check` compares within the contract's tolerance (docs/contract.md).
      if (s.tolerance_ulp) e["tolerance_ulp"] = *s.tolerance_ulp;
      e["sha256"] = sum;
      manifest["stages"].push_back(e);
    }
    if (!delayed_here.empty()) {
      // The state after this pass's step: each tensor it quantized stepped once, the others as given (every
      // pass of one training step reads the same --state; docs/contract.md "Delayed scaling").
      manifest["state"] = o.state.empty() ? json(nullptr) : json(training::state_json(state));
      for (const auto& [t, st] : r.next_delayed) {
        const K::PassOperands ops = K::operands_of(*pass);
        const K::Quantization& q = t == ops.a ? pc->a : pc->b;
        state.layers[name(t)] = training::LayerState{st, q.options.element};
      }
      out.add("next_state.json", training::state_json(state).dump(1) + "\n");
    }
    out.add("manifest.json", manifest.dump(1) + "\n");
    out.commit();
  } catch (const io::FileError& e) { throw InputError(std::string("--out: ") + e.what()); }
}

// The manifest of a folder `contract run` wrote, its files' checksums verified.
json read_manifest(const std::string& dir) {
  const std::string path = dir + "/manifest.json";
  json m;
  try {
    m = json::parse(read_all(path, "--inputs"));
  } catch (const json::exception& e) {
    throw InputError("--inputs: '" + echo_text(path) + "': malformed JSON: " + e.what());
  }
  if (!m.is_object() || m.value("lowbit_contract_run", 0) != 1 || !m.contains("stages") || !m["stages"].is_array())
    throw InputError("--inputs: '" + echo_text(path) + "' is not the manifest of lowbit contract run");
  return m;
}

K::Array read_stage(const std::string& path, const Format& f, const std::string& option) {
  io::NpyArray t;
  try {
    t = io::read_npy(path);
  } catch (const io::FileError& e) { throw InputError(option + ": " + e.what()); }
  const io::DType want = dtype_of(f);
  const bool bf16_bits = want == io::DType::bf16 && t.dtype == io::DType::u16;
  if (t.dtype != want && !bf16_bits) {
    K::Array a{&f, t.shape, {}};
    a.format = nullptr;  // marks a dtype mismatch for the caller
    return a;
  }
  return {&f, t.shape, codes_of(t)};
}

// The plugin ran and failed or declined: the check fails (exit 1), as a gate subject's error fails its unit.
struct PluginFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A kernel's array of one stage: nullopt when it supplies none; format nullptr when it holds another dtype.
using Supplier = std::function<std::optional<K::Array>(const std::string& file, const Format& f)>;

// The kernel's stage files in the folder `dir` (--results).
Supplier folder_results(const std::string& dir) {
  return [dir](const std::string& file, const Format& f) -> std::optional<K::Array> {
    const std::string path = dir + "/" + file;
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return std::nullopt;
    return read_stage(path, f, "--results");
  };
}

// What the plugin's contract entry computes from the run's inputs (--plugin): every stage of the manifest
// offered as an output, those it leaves unwritten (count 0) not supplied.  The request is plugin.h's.
Supplier plugin_results(const ContractOptions& o, const K::Contract& c, const json& m) {
  const gate::Subject subject = gate::load_plugin(
      o.plugin,
      {o.in_process ? gate::Isolation::in_process : gate::Isolation::child_process, o.timeout, gate_worker_command()});
  if (!subject.contract)
    throw InputError("--plugin: '" + echo_text(o.plugin) + "' (" + subject.name +
                     ") has no contract entry point (NULL, or a table whose struct_size ends before it)");
  json request = {{"contract", c.document}, {"pass", m.value("pass", "fprop")}};
  // The delayed-scaling state the run was given (lowbit state's JSON), as the kernel's step starts from it.
  if (m.contains("state") && !m["state"].is_null()) request["state"] = m["state"];
  // --sr-seed, else the seed the run recorded (a different --sr-seed tests the kernel's seed handling).
  if (o.sr_seed >= 0) request["sr_seed"] = o.sr_seed;
  else if (m.contains("sr_seed") && m["sr_seed"].is_number_unsigned()) request["sr_seed"] = m["sr_seed"];
  const std::string request_text = request.dump();
  // The arrays' memory: names, formats, dtypes, shapes and data, kept alive through the call.
  struct Buffer {
    std::string name, format, dtype;
    std::vector<std::uint64_t> shape;
    std::vector<std::uint8_t> data;
  };
  auto buffer_of = [](const std::string& name, const Format& f, std::vector<std::uint64_t> shape) {
    Buffer b{name, f.name, std::string(io::npy_descr(dtype_of(f)).value_or("?")), std::move(shape), {}};
    std::uint64_t count = 1;
    for (std::uint64_t d : b.shape) count *= d;
    b.data.assign(count * (io::dtype_bits(dtype_of(f)) / 8), 0);
    return b;
  };
  auto array_of = [](Buffer& b, const Format& f) {
    const std::uint32_t width = io::dtype_bits(dtype_of(f)) / 8;
    return lowbit_array{
        b.name.c_str(), b.format.c_str(),      b.dtype.c_str(), width, static_cast<std::uint32_t>(b.shape.size()),
        b.shape.data(), b.data.size() / width, b.data.data()};
  };
  std::vector<Buffer> ins, outs;
  std::vector<const Format*> in_formats, out_formats;
  for (const json& e : m.value("inputs", json::array())) {
    const Format* f = find_format(e.value("format", ""));
    const std::string file = e.value("path", ""), name = e.value("name", "");
    if (!f || file.rfind("inputs/", 0) != 0 || file.find('/', 7) != std::string::npos)
      throw InputError("--inputs: manifest.json: an input entry without a plain path or a known format");
    const K::Array a = read_stage(o.inputs + "/" + file, *f, "--inputs");
    if (!a.format) throw InputError("--inputs: '" + echo_text(o.inputs + "/" + file) + "' holds another dtype");
    Buffer b = buffer_of(name, *f, a.shape);
    const std::size_t width = io::dtype_bits(dtype_of(*f)) / 8;
    for (std::size_t i = 0; i < a.codes.size(); ++i)
      for (std::size_t k = 0; k < width; ++k) b.data[i * width + k] = static_cast<std::uint8_t>(a.codes[i] >> (8 * k));
    ins.push_back(std::move(b));
    in_formats.push_back(f);
  }
  for (const json& e : m["stages"]) {
    const Format* f = find_format(e.value("format", ""));
    const std::string file = e.value("path", "");
    if (!f || file.size() < 4)
      throw InputError("--inputs: manifest.json: a stage entry without a path or a known format");
    // The stored stage's own shape (its file is verified against the manifest's checksum), not the manifest's.
    const K::Array want = read_stage(o.inputs + "/" + file, *f, "--inputs");
    outs.push_back(buffer_of(file.substr(0, file.size() - 4), *f, want.shape));
    out_formats.push_back(f);
  }
  std::vector<lowbit_array> in_arrays, out_arrays;
  for (std::size_t i = 0; i < ins.size(); ++i) in_arrays.push_back(array_of(ins[i], *in_formats[i]));
  for (std::size_t i = 0; i < outs.size(); ++i) out_arrays.push_back(array_of(outs[i], *out_formats[i]));
  const int rc = subject.contract(request_text.c_str(), in_arrays.data(), static_cast<std::uint32_t>(in_arrays.size()),
                                  out_arrays.data(), static_cast<std::uint32_t>(out_arrays.size()));
  if (rc != LOWBIT_PLUGIN_OK)
    throw PluginFailure(
        subject.name + "'s contract entry " +
        (rc == LOWBIT_PLUGIN_UNSUPPORTED ? std::string("declined the contract") : "failed: " + subject.last_error()));
  auto results = std::make_shared<std::map<std::string, K::Array>>();
  for (std::size_t i = 0; i < outs.size(); ++i) {
    if (out_arrays[i].count == 0) continue;  // not supplied; any other count is the buffer's own
    const std::size_t width = io::dtype_bits(dtype_of(*out_formats[i])) / 8;
    K::Array a{out_formats[i], outs[i].shape, std::vector<std::uint64_t>(outs[i].data.size() / width)};
    for (std::size_t j = 0; j < a.codes.size(); ++j)
      for (std::size_t k = 0; k < width; ++k) a.codes[j] |= std::uint64_t{outs[i].data[j * width + k]} << (8 * k);
    (*results)[outs[i].name + ".npy"] = std::move(a);
  }
  return [results](const std::string& file, const Format&) -> std::optional<K::Array> {
    const auto it = results->find(file);
    if (it == results->end()) return std::nullopt;
    return it->second;
  };
}

int run_check(const ContractOptions& o) {
  const K::Contract c = load_contract(o.contract, "--contract");
  const json m = read_manifest(o.inputs);
  if (m.value("contract", "") != c.name)
    throw InputError("--inputs: '" + echo_text(o.inputs) + "' was written for contract " +
                     echo_text(m.value("contract", "?")) + ", not " + c.name);
  if (o.results.empty() == o.plugin.empty())
    throw InputError(o.plugin.empty() ? "--results: required (or --plugin)" : "--plugin: not with --results");
  if (o.plugin.empty() && (o.sr_seed >= 0 || o.in_process))
    throw InputError(std::string(o.in_process ? "--in-process" : "--sr-seed") + ": only with --plugin");
  if (!(o.timeout > 0) || o.timeout > 86400) throw InputError("--timeout: must be a number of seconds in (0, 86400]");
  // The stored files are verified before a plugin runs on the inputs.
  for (const json& e : m["stages"]) {
    const std::string file = e.value("path", "");
    if (file.empty() || file.find('/') != std::string::npos || !find_format(e.value("format", "")))
      throw InputError("--inputs: manifest.json: a stage entry without a plain path or a known format");
    const std::string bytes = read_all(o.inputs + "/" + file, "--inputs");
    if (Sha256::of(bytes) != e.value("sha256", ""))
      throw InputError("--inputs: '" + echo_text(o.inputs + "/" + file) +
                       "' does not match its checksum in manifest.json");
  }
  for (const json& e : m.value("inputs", json::array())) {
    const std::string bytes = read_all(o.inputs + "/" + e.value("path", ""), "--inputs");
    if (Sha256::of(bytes) != e.value("sha256", ""))
      throw InputError("--inputs: '" + echo_text(o.inputs + "/" + e.value("path", "")) +
                       "' does not match its checksum in manifest.json");
  }
  Supplier supplied;
  try {
    supplied = o.plugin.empty() ? folder_results(o.results) : plugin_results(o, c, m);
  } catch (const PluginFailure& e) {
    write_all("-", std::string("FAILED: ") + e.what() + "\n", "--out");
    return 1;
  }
  std::uint64_t compared = 0, differing = 0, within_tolerance = 0;
  std::string first_stage;
  bool output_compared = false;
  std::string text;
  for (const json& e : m["stages"]) {
    const std::string file = e.value("path", ""), stage = e.value("stage", "");
    const Format* f = find_format(e.value("format", ""));
    if (file.empty() || file.find('/') != std::string::npos || !f)
      throw InputError("--inputs: manifest.json: a stage entry without a plain path or a known format");
    const K::Array want = read_stage(o.inputs + "/" + file, *f, "--inputs");
    const std::optional<K::Array> result = supplied(file, *f);
    if (!result) {
      text += file + ": not supplied\n";
      continue;
    }
    const K::Array& got = *result;
    if (!got.format) {
      text +=
          file + ": error: holds another dtype than " + std::string(io::npy_descr(dtype_of(*f)).value_or("?")) + "\n";
      ++differing;
      if (first_stage.empty()) first_stage = file;
      continue;
    }
    std::optional<std::uint32_t> tolerance;
    if (e.contains("tolerance_ulp")) {
      if (!e["tolerance_ulp"].is_number_unsigned() || e["tolerance_ulp"].get<std::uint64_t>() > (1u << 20))
        throw InputError("--inputs: manifest.json: " + file + ": tolerance_ulp is not a whole number in 0..2^20");
      tolerance = e["tolerance_ulp"].get<std::uint32_t>();
    }
    const K::StageComparison cmp = K::compare(want, got, 10, tolerance);
    if (!cmp.error.empty()) {
      text += file + ": error: " + cmp.error + "\n";
      ++differing;
      if (first_stage.empty()) first_stage = file;
      continue;
    }
    compared += cmp.compared;
    within_tolerance += cmp.within;
    output_compared = output_compared || stage == "output";
    const std::string label = stage + (e.contains("part") ? "." + e["part"].get<std::string>() : "");
    auto element = [&](const K::Difference& d) {
      std::string at;
      std::size_t rem = d.index;
      for (std::size_t i = want.shape.size(); i-- > 0;) {
        at = std::to_string(rem % want.shape[i]) + (at.empty() ? "" : ", ") + at;
        rem /= want.shape[i];
      }
      std::string line = label + "[" + at + "]: expected " + code_and_value(*f, d.expected) + ", actual " +
                         code_and_value(*f, d.actual);
      if (tolerance) line += d.ulps ? ", " + std::to_string(*d.ulps) + " ulp" : ", NaN against a number";
      return line;
    };
    // Within a tolerance: how many elements differ inside it, and the farthest one.
    const std::string within = !tolerance  ? ""
                               : cmp.worst ? " (" + std::to_string(cmp.within) + " within " +
                                                 std::to_string(*tolerance) + " ulp; worst " + element(*cmp.worst) + ")"
                                           : " (all equal; tolerance " + std::to_string(*tolerance) + " ulp)";
    if (cmp.differing == 0) {
      text += file + ": " + std::to_string(cmp.compared) +
              (tolerance ? " elements within tolerance" : " elements equal") + within + "\n";
      continue;
    }
    differing += cmp.differing;
    if (first_stage.empty()) first_stage = file;
    text += file + ": " + std::to_string(cmp.differing) + " of " + std::to_string(cmp.compared) + " elements " +
            (tolerance ? "beyond " + std::to_string(*tolerance) + " ulp" : std::string("differ")) + within + "\n";
    for (const K::Difference& d : cmp.first) text += "  " + element(d) + "\n";
  }
  if (!output_compared && differing == 0) {
    write_all("-", text + "FAILED: the kernel's output.npy was not compared\n", "--out");
    return 1;
  }
  if (differing) {
    write_all("-", text + "FAILED: first differing stage " + first_stage + "\n", "--out");
    return 1;
  }
  if (within_tolerance)
    text += "ok: " + std::to_string(compared) + " elements compared, " + std::to_string(compared - within_tolerance) +
            " equal and " + std::to_string(within_tolerance) + " within their stage's tolerance\n";
  else text += "ok: " + std::to_string(compared) + " elements equal\n";
  write_all("-", text, "--out");
  return 0;
}

}  // namespace

void add_contract(CLI::App& app) {
  auto o = std::make_shared<ContractOptions>();
  auto* sub =
      app.add_subcommand("contract", "Precision contracts: a whole GEMM-based op, stage by stage (docs/contract.md)");
  sub->require_subcommand(1);
  auto* list = sub->add_subcommand("list", "Print each named contract: its name, a tab, a description with its source");
  list->callback([] { guarded([] { run_list(); }); });
  auto* show = sub->add_subcommand("show", "Print a contract: its passes, operands, procedures and epilogues");
  show->add_option("contract", o->show, "A named contract or a contract file")->required();
  show->add_flag("--json", o->json, "The contract's JSON document");
  show->callback([o] { guarded([o] { run_show(*o); }); });
  auto* run = sub->add_subcommand("run", "Run one pass and write every stage as .npy with a manifest.json");
  run->add_option("--contract", o->contract, "A named contract or a contract file")->required();
  run->add_option("--pass", o->pass, "fprop (default), dgrad or wgrad");
  run->add_option("--x", o->x, "X [M, K] .npy (f32, f16, or bf16 bits as uint16)");
  run->add_option("--w", o->w, "W [N, K] .npy");
  run->add_option("--dy", o->dy, "dY [M, N] .npy");
  for (K::Operand t : all<K::Operand>())
    for (K::StoredPart part : all<K::StoredPart>()) {
      const std::string key = std::string(name(t)) + "." + name(part);
      run->add_option(
          option_of(key), o->stored[key],
          std::string("An operand stored quantized (storage.") + name(t) + ".quantized): " + row_of(part)->help);
    }
  run->add_option("--bias", o->bias, "the bias step's vector .npy");
  run->add_option("--residual", o->residual, "the residual step's [rows, cols] .npy");
  run->add_option("--state", o->state,
                  "The delayed-scaling state (lowbit state's JSON or safetensors, layers x, w, dy); the state "
                  "after the step is written as next_state.json");
  run->add_option("--sr-seed", o->sr_seed, "Seed of a stochastic rounding's random bits (Philox)")
      ->check(whole_number(0, LLONG_MAX));
  run->add_option("--out", o->out, "Folder to write (replaced whole; empty, new or a previous run's)")->required();
  run->callback([o] { guarded([o] { run_run(*o); }); });
  auto* check = sub->add_subcommand(
      "check",
      "Compare a kernel's stage files bit for bit: exit 0 all equal, 1 differences or no output compared, 2 bad input");
  check->add_option("--contract", o->contract, "The contract the run was made with")->required();
  check->add_option("--inputs", o->inputs, "The folder `lowbit contract run` wrote")->required();
  check->add_option("--results", o->results, "The kernel's files, named as the stages (output.npy at least)");
  check->add_option("--plugin", o->plugin,
                    "Instead of --results: a library whose contract entry (include/lowbit/plugin.h) runs the "
                    "inputs, called in a worker process");
  check->add_flag("--in-process", o->in_process, "With --plugin: call it in this process (for debugging)");
  check->add_option("--timeout", o->timeout, "With --plugin: seconds the call may take (default 60)");
  check->add_option("--sr-seed", o->sr_seed, "With --plugin: the seed the run was made with (stochastic rounding)")
      ->check(whole_number(0, LLONG_MAX));
  check->callback([o] {
    int rc = 0;
    guarded([&] { rc = run_check(*o); });
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
  // The subcommands that read files take --max-bytes, as the other reading commands do (main.cpp).
  for (CLI::App* reading : {show, run, check}) add_max_bytes(reading);
}

}  // namespace lowbit::cli
