// The contract document's loader (docs/contract.md): every key checked, every error an ArgumentError whose
// argument is the JSON path of the value at fault.
#include "lowbit/contract.hpp"

#include <bit>
#include <set>
#include <string>

#include "contract_layout.hpp"
#include "lowbit/registry.hpp"
#include "lowbit/text.hpp"

namespace lowbit::contract {

namespace {

using json = nlohmann::json;
namespace S = scale;

// A value of the document and its path, for messages.
struct Node {
  const json& j;
  std::string path;

  Node at(const std::string& key) const { return {j.at(key), path.empty() ? key : path + "." + key}; }
  Node at(std::size_t i) const { return {j.at(i), path + "[" + std::to_string(i) + "]"}; }
  bool has(const std::string& key) const { return j.contains(key); }
  [[noreturn]] void fail(const std::string& message) const { throw ArgumentError(path, message); }

  // An object whose keys are among `allowed` and hold every one of `required`.
  const Node& object(std::initializer_list<const char*> allowed,
                     std::initializer_list<const char*> required = {}) const {
    if (!j.is_object()) fail("expected an object, not " + echo_text(j.dump(), 40));
    for (auto it = j.begin(); it != j.end(); ++it) {
      bool known = false;
      std::string list;
      for (const char* a : allowed) {
        known = known || it.key() == a;
        list += (list.empty() ? "" : ", ") + std::string(a);
      }
      if (!known) at(it.key()).fail("unknown key (this object takes " + list + ")");
    }
    for (const char* r : required)
      if (!j.contains(r)) throw ArgumentError(path.empty() ? r : path + "." + r, "missing");
    return *this;
  }
  std::string string() const {
    if (!j.is_string()) fail("expected a string, not " + echo_text(j.dump(), 40));
    return j.get<std::string>();
  }
  bool boolean() const {
    if (!j.is_boolean()) fail("expected true or false, not " + echo_text(j.dump(), 40));
    return j.get<bool>();
  }
  // An f32 value as its bit pattern: a "0x..." string of 8 hex digits, or a JSON number that is an f32 value.
  std::uint32_t f32() const {
    if (j.is_string()) {
      const std::string s = j.get<std::string>();
      const auto v = parse_hex(s, HexPrefix::required);
      if (!v || *v > 0xFFFFFFFFu) fail("'" + echo_text(s) + "' is not the bits of an f32 (\"0x3f800000\")");
      return static_cast<std::uint32_t>(*v);
    }
    if (j.is_number()) {
      const double d = j.get<double>();
      const float f = static_cast<float>(d);
      if (static_cast<double>(f) != d)
        fail(echo_text(j.dump(), 40) + " is not an f32 value (give its bits as \"0x...\")");
      return std::bit_cast<std::uint32_t>(f);
    }
    fail("expected an f32 value (a number or \"0x...\" bits)");
  }
  const Format& format() const {
    const std::string n = string();
    const Format* f = find_format(n);
    if (!f) fail("unknown format '" + echo_text(n) + "' (see `lowbit formats`)");
    return *f;
  }
  template <class E>
  E choice() const {
    const std::string n = string();
    const auto v = lowbit::parse<E>(n);
    if (!v) fail("unknown '" + echo_text(n) + "' (" + choices<E>() + ")");
    return *v;
  }
};

// A storage format: the floating-point types activations and weights are held in.
const Format& storage_format(const Node& n) {
  const Format& f = n.format();
  for (const Format* s : {&formats::f32, &formats::bf16, &formats::f16})
    if (same_format(f, *s)) return *s;
  n.fail(std::string(f.name) + " is not a storage format (f32, bf16 or f16)");
}

// A storage entry: a storage format, or {"quantized": RECIPE} for an operand whose codes and scales are
// the inputs (a checkpoint's packed weights): the recipe names the scheme, element and scale layout.
void stored_operand(const Node& n, Operand t, Contract& c);

// "quantize": the recipe keys of a quantized tensor (lowbit/recipe.hpp), every value a string, and "eps".
Quantization quantization(const Node& n) {
  Quantization q;
  if (n.j.is_null()) return q;
  n.object({"quantization_format", "element", "block_size", "scale_rule", "scale_format", "nonfinite", "variant",
            "zero_scale", "hadamard", "amax_nan", "profile", "rounding", "sr_bits", "eps"},
           {"quantization_format"});
  const auto get = [&](const std::string& key) -> std::optional<std::string> {
    if (!n.has(key) || key == "eps" || key == "sr_bits") return std::nullopt;
    return n.at(key).string();
  };
  Recipe r;
  try {
    r = recipe_from_keys(get);
  } catch (const ArgumentError& e) { throw ArgumentError(n.path + "." + e.argument, e.what()); }
  if (n.has("sr_bits")) {
    const Node s = n.at("sr_bits");
    if (!s.j.is_number_integer() || s.j.get<long long>() < 1 || s.j.get<long long>() > max_sr_bits)
      s.fail("expected a whole number in 1..32");
    r.sr_bits = static_cast<int>(s.j.get<long long>());
  }
  try {
    q.options = build(r).options;
  } catch (const ArgumentError& e) { throw ArgumentError(n.path + "." + recipe_key(e.argument), e.what()); }
  if (n.has("eps")) {
    q.options.eps = std::bit_cast<float>(n.at("eps").f32());
    if (const std::string why = S::normalize(q.options); !why.empty()) n.at("eps").fail(why);
  }
  q.recipe = r;
  return q;
}

void stored_operand(const Node& n, Operand t, Contract& c) {
  const int i = static_cast<int>(t);
  if (!n.j.is_object()) {
    c.storage[i] = &storage_format(n);
    return;
  }
  n.object({"quantized"}, {"quantized"});
  const Node r = n.at("quantized");
  if (r.j.is_null()) r.fail("expected the recipe the stored codes were made with");
  Quantization q = quantization(r);
  const layout::ScaleInfo info = layout::scale_info(q);
  if (info.arrangement == layout::Arrangement::unsupported) r.at("quantization_format").fail(info.why);
  // The codes are read as they are stored: a transform or a rounding stored in them is the exporter's
  // business, and a stored Hadamard would need the other operand rotated too, which no step does.
  if (q.options.hadamard != S::Hadamard::none)
    r.at("hadamard").fail("a stored operand's codes enter the GEMM as they are; a transform is not modelled");
  if (q.options.scheme == S::Scheme::nvfp4 || q.options.scheme == S::Scheme::nvfp4_2d)
    if (q.options.variant == S::Variant::compressed_tensors)
      r.at("variant").fail(
          "the stored tensor scale is the decode scale S_dec; compressed-tensors' weight_global_scale is its "
          "reciprocal: give 1/weight_global_scale with the standard variant");
  if (is_stochastic(q.options.element_policy.rounding))
    r.at("rounding").fail("a stored operand's codes are given; a rounding that needs random bits makes none of them");
  q.stored = true;
  c.storage[i] = q.options.element;
  c.stored[i] = q;
}

Step step(const Node& n) {
  n.object({"step", "alpha", "beta", "format", "min", "max", "scale", "rounding", "overflow", "approximation",
            "tolerance_ulp"},
           {"step"});
  Step s;
  s.kind = n.at("step").choice<StepKind>();
  // The keys each step takes, beside "step".
  std::set<std::string> takes;
  switch (s.kind) {
    case StepKind::dequantize: takes = {"alpha"}; break;
    case StepKind::bias: takes = {"format"}; break;
    case StepKind::residual: takes = {"format", "beta"}; break;
    case StepKind::relu:
    case StepKind::amax: break;
    case StepKind::clamp: takes = {"min", "max"}; break;
    case StepKind::cast: takes = {"format", "scale", "rounding", "overflow"}; break;
    case StepKind::gelu: takes = {"approximation", "tolerance_ulp"}; break;
    case StepKind::silu: takes = {"tolerance_ulp"}; break;
  }
  for (auto it = n.j.begin(); it != n.j.end(); ++it)
    if (it.key() != "step" && !takes.count(it.key()))
      n.at(it.key()).fail(std::string("the ") + name(s.kind) + " step takes no \"" + it.key() + "\"");
  if (n.has("alpha")) s.alpha = n.at("alpha").f32();
  if (n.has("beta")) s.beta = n.at("beta").f32();
  if (n.has("scale")) s.scale = n.at("scale").f32();
  if (s.kind == StepKind::bias || s.kind == StepKind::residual)
    s.format = n.has("format") ? &storage_format(n.at("format")) : &formats::f32;
  if (s.kind == StepKind::clamp) {
    if (!n.has("min") || !n.has("max")) n.fail("a clamp step needs \"min\" and \"max\"");
    s.lo = n.at("min").f32();
    s.hi = n.at("max").f32();
    const float lo = std::bit_cast<float>(s.lo), hi = std::bit_cast<float>(s.hi);
    if (!(lo <= hi)) n.at("max").fail("max must not be below min (nor NaN)");
  }
  if (s.kind == StepKind::gelu || s.kind == StepKind::silu) {
    // The tolerance is the contract's statement of how far a kernel's approximate activation may lie from the
    // correctly rounded one; there is no default.
    if (!n.has("tolerance_ulp"))
      n.fail(std::string("a ") + name(s.kind) +
             " step needs \"tolerance_ulp\" (a whole number of ulps, 0 for the correctly rounded value)");
    const Node t = n.at("tolerance_ulp");
    if (!t.j.is_number_integer() || t.j.get<long long>() < 0 || t.j.get<long long>() > (1 << 20))
      t.fail("expected a whole number of ulps in 0..2^20");
    s.tolerance_ulp = static_cast<std::uint32_t>(t.j.get<long long>());
    if (s.kind == StepKind::gelu) {
      if (!n.has("approximation")) n.fail("a gelu step needs \"approximation\": erf or tanh");
      s.gelu_form = n.at("approximation").choice<GeluForm>();
    }
  }
  if (s.kind == StepKind::cast) {
    if (!n.has("format")) n.fail("a cast step needs \"format\"");
    s.format = &n.at("format").format();
    if (s.format->bits > 32 || s.format->mantissa_bits > 23)
      n.at("format").fail(std::string(s.format->name) + " is wider than f32");
    s.policy = Policy{};  // IEEE's default: rne, overflow to infinity (or NaN where there is none)
    if (n.has("rounding")) s.policy.rounding = n.at("rounding").choice<Rounding>();
    if (n.has("overflow")) s.policy.overflow = n.at("overflow").choice<Overflow>();
    if (is_stochastic(s.policy.rounding)) n.at("rounding").fail("the output cast takes no stochastic rounding");
  }
  return s;
}

// Every epilogue rule that needs no shapes: the order of amax and cast, and whether a dequantize step has
// anything to apply.
void check_epilogue(const Node& n, const PassContract& p) {
  const bool scales_left = layout::scales_left_for_epilogue(p);
  bool dequantized = false, cast = false, amax = false;
  const Step* activation = nullptr;
  for (std::size_t i = 0; i < p.epilogue.size(); ++i) {
    const Step& s = p.epilogue[i];
    const Node at = n.at(i);
    if (cast) at.fail("the cast is the last step; nothing follows it");
    // The exact stages end before an activation: after it only the output cast, into a float format whose
    // ulps the tolerance counts.
    if (activation && s.kind != StepKind::cast)
      at.at("step").fail(std::string("only a cast follows the ") + name(activation->kind) +
                         " step (the exact stages end before it)");
    if (activation && s.kind == StepKind::cast) {
      bool float_out = false;
      for (const Format* f : {&formats::f32, &formats::bf16, &formats::f16})
        float_out = float_out || same_format(*s.format, *f);
      if (!float_out)
        at.at("format").fail(std::string("after the ") + name(activation->kind) +
                             " step the output is f32, bf16 or f16 (its tolerance counts their ulps), not " +
                             s.format->name);
    }
    if (s.kind == StepKind::gelu || s.kind == StepKind::silu) activation = &s;
    switch (s.kind) {
      case StepKind::dequantize:
        if (dequantized) at.fail("a second dequantize step");
        if (i != 0) at.fail("dequantize is the first step (the scales multiply the accumulator)");
        if (!scales_left && s.alpha == 0x3F800000u)
          at.fail(std::string("nothing to dequantize: ") + p.procedure->name +
                  " applies the operands' scales itself (or they have none), and alpha is 1");
        dequantized = true;
        break;
      case StepKind::amax:
        if (amax) at.fail("a second amax step");
        amax = true;
        break;
      case StepKind::cast: cast = true; break;
      default: break;
    }
  }
  if (scales_left && !dequantized)
    n.fail("the operands' per-tensor scales are applied by no step: the first step must be {\"step\": \"dequantize\"}");
}

PassContract pass_contract(const Node& n, Pass pass, const Contract& c) {
  const PassOperands ops = operands_of(pass);
  const std::string a = name(ops.a), b = name(ops.b);
  n.object({a.c_str(), b.c_str(), "procedure", "epilogue"}, {a.c_str(), b.c_str(), "procedure", "epilogue"});
  PassContract p;
  p.pass = pass;
  for (const auto& [key, q, t, form] :
       {std::tuple{a, &p.a, ops.a, ops.a_form}, std::tuple{b, &p.b, ops.b, ops.b_form}}) {
    const Node operand = n.at(key);
    operand.object({"quantize"}, {"quantize"});
    const auto& stored = c.stored_of(t);
    if (!stored) {
      *q = quantization(operand.at("quantize"));
      continue;
    }
    if (!operand.at("quantize").j.is_null())
      operand.at("quantize")
          .fail(std::string(name(t)) + " is stored quantized (storage." + name(t) +
                "): its codes and scales enter the GEMM unchanged; give \"quantize\": null");
    // The stored scales run along the tensor's rows as stored; a pass that reads the transpose can take
    // them only when one scale covers the whole tensor.
    if (form == Form::transposed && layout::scale_info(*stored).arrangement != layout::Arrangement::per_tensor)
      operand.fail(std::string(name(p.pass)) + " reads " + name(t) + "ᵀ, quantized along the other dimension; " +
                   name(t) + "'s stored block scales run along its rows (only a per-tensor scale transposes)");
    *q = *stored;
  }
  const Node proc = n.at("procedure");
  p.procedure = gemm::find_procedure(proc.string());
  if (!p.procedure) proc.fail("unknown procedure '" + echo_text(proc.string()) + "' (see lowbit gemm --list-models)");
  if (p.procedure->model && p.procedure->model->output == gemm::Output::f16_rne)
    proc.fail(std::string(p.procedure->name) + " writes f16; an epilogue reads an f32 accumulator");
  for (const auto& [key, q, t] : {std::tuple{a, &p.a, ops.a}, std::tuple{b, &p.b, ops.b}}) {
    const Format& element = q->recipe ? *q->options.element : c.storage_of(t);
    if (!gemm::takes(*p.procedure, element))
      n.at(key)
          .at("quantize")
          .fail(std::string(p.procedure->name) + " takes " + gemm::operand_text(*p.procedure) + ", not " +
                element.name + (q->stored ? std::string(" (stored: storage.") + name(t) + ")" : ""));
    // TE's transform reads bf16 tensors (scale::hadamard_rows_te_bf16): the operand must be stored as bf16.
    if (q->recipe && q->options.hadamard == S::Hadamard::te_bf16 && !same_format(c.storage_of(t), formats::bf16))
      n.at(key)
          .at("quantize")
          .at("hadamard")
          .fail(std::string("te-bf16 reads bf16 values; storage.") + name(t) + " is " + c.storage_of(t).name);
  }
  if (const auto why = layout::scale_problem(p)) {
    const Quantization& q = why->first == 0 ? p.a : p.b;
    const Operand t = why->first == 0 ? ops.a : ops.b;
    n.at(why->first == 0 ? a : b)
        .at("quantize")
        .fail(why->second + (q.stored ? std::string(" (stored: storage.") + name(t) + ")" : ""));
  }
  const Node epi = n.at("epilogue");
  if (!epi.j.is_array()) epi.fail("expected an array of steps");
  for (std::size_t i = 0; i < epi.j.size(); ++i) p.epilogue.push_back(step(epi.at(i)));
  check_epilogue(epi, p);
  return p;
}

}  // namespace

const PassContract* Contract::find(Pass p) const {
  for (const PassContract& pc : passes)
    if (pc.pass == p) return &pc;
  return nullptr;
}

Contract parse(const json& document) {
  const Node root{document, ""};
  root.object({"lowbit_contract", "name", "description", "source", "hardware", "storage", "passes"},
              {"lowbit_contract", "name", "storage", "passes"});
  const Node version = root.at("lowbit_contract");
  if (!version.j.is_number_integer() || version.j.get<long long>() != schema_version)
    version.fail("this lowbit reads contract schema version " + std::to_string(schema_version));
  Contract c;
  c.document = nlohmann::ordered_json::parse(document.dump());
  c.name = root.at("name").string();
  if (root.has("description")) c.description = root.at("description").string();
  if (root.has("source")) c.source = root.at("source").string();
  if (root.has("hardware")) c.hardware = root.at("hardware").choice<Hardware>();
  const Node storage = root.at("storage");
  storage.object({"x", "w", "dy"});
  for (Operand t : all<Operand>())
    if (storage.has(name(t))) stored_operand(storage.at(name(t)), t, c);
  const Node passes = root.at("passes");
  passes.object({"fprop", "dgrad", "wgrad"});
  if (passes.j.empty()) passes.fail("a contract defines at least one pass (fprop, dgrad, wgrad)");
  for (Pass p : all<Pass>())
    if (passes.has(name(p))) c.passes.push_back(pass_contract(passes.at(name(p)), p, c));
  return c;
}

std::optional<Contract> find_named(std::string_view n) {
  for (const NamedContract& row : named())
    if (n == row.name) return parse(json::parse(row.document));
  return std::nullopt;
}

}  // namespace lowbit::contract
