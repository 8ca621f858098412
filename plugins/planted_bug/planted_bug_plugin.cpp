// A gate subject with a planted bug: lowbit's own fast-path conversions, except that f32 into e4m3 under
// rne returns one ulp too little for a result that rounded away from zero in the binade [8, 16).  The
// gate's tests prove that `lowbit gate` catches it and names the element; every other conversion
// passes.  It also runs the f32-sequential GEMM (acc = fl(acc + fl(a * b)) from C, in K order) to
// exercise the gemm entry point (other models are reported as skipped), in the operands' storage the
// recipe's "layout" names, and quantizes every scheme suite's recipe with lowbit's own reference
// quantizer (lowbit::scale::quantize) to exercise the quantize entry point: it passes, unless the
// environment sets LOWBIT_PLANTED_QUANTIZE_BUG=1, which plants the same kind of error there: an e4m3
// element code in the binade [8, 16) (magnitude codes 0x51..0x57) comes out one ulp too small.  Its contract
// entry runs lowbit's own precision contract (lowbit::contract::run) on the request and supplies the output and
// the accumulator only, as a fused kernel exposes them (every other stage is left unwritten, count 0); with
// LOWBIT_PLANTED_CONTRACT_BUG=1 the output's element [0, 0] comes out one code off.
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lowbit/contract.hpp"
#include "lowbit/convert.hpp"
#include "lowbit/plugin.h"
#include "lowbit/error.hpp"
#include "lowbit/profile.hpp"
#include "lowbit/recipe.hpp"
#include "lowbit/registry.hpp"
#include "lowbit/scale.hpp"
#include "../recipe_lookup.hpp"

namespace {

std::size_t width(const lowbit::Format& f) {
  const int b = f.storage_bits();
  return b <= 8 ? 1 : b <= 16 ? 2 : b <= 32 ? 4 : 8;
}

std::uint64_t load(const void* p, std::size_t i, std::size_t w) {
  std::uint64_t v = 0;
  const auto* b = static_cast<const std::uint8_t*>(p) + i * w;
  for (std::size_t k = 0; k < w; ++k) v |= std::uint64_t{b[k]} << (8 * k);
  return v;
}

void store(void* p, std::size_t i, std::size_t w, std::uint64_t v) {
  auto* b = static_cast<std::uint8_t*>(p) + i * w;
  for (std::size_t k = 0; k < w; ++k) b[k] = static_cast<std::uint8_t>(v >> (8 * k));
}

std::string last;

int convert(const char* from, const char* to, const lowbit_policy* policy, const void* in, uint64_t n, void* out,
            uint8_t* flags, int* flags_written) {
  const lowbit::Format* f = lowbit::find_format(from);
  const lowbit::Format* t = lowbit::find_format(to);
  const lowbit::Profile* prof = lowbit::find_profile(policy->profile ? policy->profile : "");
  if (!f || !t || !prof) return LOWBIT_PLUGIN_UNSUPPORTED;
  lowbit::PolicyRequest req;
  req.rounding = lowbit::parse<lowbit::Rounding>(policy->rounding);
  req.overflow = lowbit::parse<lowbit::Overflow>(policy->overflow);
  req.subnormals = lowbit::parse<lowbit::Subnormals>(policy->subnormals);
  req.tininess = lowbit::parse<lowbit::Tininess>(policy->tininess);
  if (!req.rounding || !req.overflow || !req.subnormals || !req.tininess) return LOWBIT_PLUGIN_UNSUPPORTED;
  std::string error;
  const auto resolved = lowbit::resolve(prof, *t, req, error);
  if (!resolved) {
    last = error;
    return LOWBIT_PLUGIN_UNSUPPORTED;
  }
  const bool planted = std::strcmp(from, "f32") == 0 && std::strcmp(to, "e4m3") == 0 &&
                       resolved->policy.rounding == lowbit::Rounding::rne;
  const std::size_t wi = width(*f), wo = width(*resolved->target);
  for (uint64_t i = 0; i < n; ++i) {
    const std::uint64_t code = load(in, i, wi);
    lowbit::Result r = lowbit::convert(*f, code, *resolved->target, resolved->policy);
    // The planted bug: |x| in [8, 16) (f32 biased exponent 130) that rounded away from zero.
    const bool away = (code >> 31) ? r.ternary < 0 : r.ternary > 0;
    if (planted && ((code >> 23) & 0xff) == 130 && away && (r.code & 0x7f) != 0) r.code -= 1;
    store(out, i, wo, r.code);
    flags[i] = static_cast<std::uint8_t>(r.flags & 0x1f);
  }
  *flags_written = 1;
  return LOWBIT_PLUGIN_OK;
}

float as_float(const lowbit_array& a, std::uint64_t i) {
  const std::uint64_t v = load(a.data, i, a.element_bytes);
  if (std::strcmp(a.format, "f32") == 0) return std::bit_cast<float>(static_cast<std::uint32_t>(v));
  if (std::strcmp(a.format, "bf16") == 0) return std::bit_cast<float>(static_cast<std::uint32_t>(v << 16));
  // f16 widens exactly into f32.
  const lowbit::Result r = lowbit::convert(lowbit::formats::f16, v, lowbit::formats::f32, lowbit::Policy{});
  return std::bit_cast<float>(static_cast<std::uint32_t>(r.code));
}

template <class A>
A* find(A* v, uint32_t n, const char* name) {
  for (uint32_t i = 0; i < n; ++i)
    if (std::strcmp(v[i].name, name) == 0) return &v[i];
  return nullptr;
}

int gemm(const char* recipe, const lowbit_array* in, uint32_t n_in, lowbit_array* out, uint32_t n_out) {
  const std::string r = recipe;
  if (r.find("\"model\":\"f32-sequential\"") == std::string::npos) return LOWBIT_PLUGIN_UNSUPPORTED;
  const lowbit_array* a = find(in, n_in, "a");
  const lowbit_array* b = find(in, n_in, "b");
  const lowbit_array* c = find(in, n_in, "c");
  lowbit_array* d = n_out == 1 ? out : nullptr;
  if (!a || !b || !c || !d || a->rank != 2 || b->rank != 2) {
    last = "f32-sequential: expected a, b, c and d";
    return LOWBIT_PLUGIN_ERROR;
  }
  // The storage of A and B (vectors/SPEC.md "On-demand shapes"): "layout" is absent for the committed suites
  // (nn); `t` stores A as [K, M] and B as [N, K].  LOWBIT_PLANTED_IGNORE_LAYOUT=1 reads every suite as nn,
  // the mistake of a kernel that assumes its operands' storage: the gate's tests prove it is caught.
  std::string layout = "nn";
  const auto at = r.find("\"layout\":\"");
  if (at != std::string::npos) layout = r.substr(at + 10, 2);
  const char* ignore = std::getenv("LOWBIT_PLANTED_IGNORE_LAYOUT");
  if (ignore && std::strcmp(ignore, "1") == 0) layout = "nn";
  const bool a_t = layout[0] == 't', b_t = layout.size() > 1 && layout[1] == 't';
  const std::uint64_t m = a->shape[a_t ? 1 : 0], k = a->shape[a_t ? 0 : 1], nn = b->shape[b_t ? 0 : 1];
  if (b->count != k * nn || c->count != m * nn || d->count != m * nn) {
    last = "f32-sequential: the shapes of a, b, c and d do not agree under layout " + layout;
    return LOWBIT_PLUGIN_ERROR;
  }
  for (std::uint64_t i = 0; i < m; ++i)
    for (std::uint64_t j = 0; j < nn; ++j) {
      float acc = as_float(*c, i * nn + j);
      for (std::uint64_t p = 0; p < k; ++p) {
        const float prod = as_float(*a, a_t ? p * m + i : i * k + p) * as_float(*b, b_t ? j * k + p : p * nn + j);
        acc = acc + prod;
      }
      store(d->data, i * nn + j, 4, std::bit_cast<std::uint32_t>(acc));
    }
  return LOWBIT_PLUGIN_OK;
}

// ---- quantize: the recipe object of a scheme suite into lowbit::scale::Options --------------------

using lowbit_example::recipe_value;  // ../recipe_lookup.hpp

bool positive(const std::string& t, int& v) {
  if (t.empty() || t.size() > 6 || t.find_first_not_of("0123456789") != std::string::npos) return false;
  v = std::stoi(t);
  return v > 0;
}

// The options `lowbit quantize` builds for the same keys, through lowbit's own recipe conversion
// (lowbit/recipe.hpp; no profile: the suites name none).  false: a key or value this example does not
// know (the case is reported as skipped).
bool options_from(const std::string& recipe, lowbit::scale::Options& so, int& sr_bits) {
  static const char* const known[] = {"quantization_format", "element", "block_size", "scale_rule", "scale_format",
                                      "nonfinite", "variant", "zero_scale", "hadamard", "rounding", "sr_bits",
                                      "algorithm", "margin"};
  // Every key of the recipe must be one this example reads.
  for (std::size_t at = recipe.find('"'); at != std::string::npos;) {
    const auto end = recipe.find('"', at + 1);
    if (end == std::string::npos) return false;
    const std::string key = recipe.substr(at + 1, end - at - 1);
    bool ok = false;
    for (const char* k : known) ok = ok || key == k;
    if (!ok) return false;
    const auto value_end = recipe.find('"', recipe.find('"', end + 1) + 1);  // skip the value
    if (value_end == std::string::npos) return false;
    at = recipe.find('"', value_end + 1);
  }
  std::string v;
  sr_bits = 0;
  if (recipe_value(recipe, "sr_bits", v) && !positive(v, sr_bits)) return false;
  try {
    lowbit::Recipe r = lowbit::recipe_from_keys([&](const std::string& key) -> std::optional<std::string> {
      std::string value;
      if (!recipe_value(recipe, key.c_str(), value)) return std::nullopt;
      return value;
    });
    r.sr_bits = sr_bits;
    so = lowbit::build(r).options;
  } catch (const lowbit::ArgumentError&) {
    return false;
  }
  return so.scale_format != lowbit::scale::ScaleFormat::ue8m0_packed;  // this example writes no packed scales
}

std::uint32_t f32_word(const lowbit_array& a, std::uint64_t i) { return static_cast<std::uint32_t>(load(a.data, i, 4)); }

int quantize(const char* recipe_json, const lowbit_array* in, uint32_t n_in, lowbit_array* out, uint32_t n_out) {
  namespace S = lowbit::scale;
  const std::string recipe = recipe_json;
  S::Options so;
  int sr_bits = 0;
  if (!options_from(recipe, so, sr_bits)) return LOWBIT_PLUGIN_UNSUPPORTED;
  const lowbit_array* x = find(in, n_in, "x");
  lowbit_array* codes = find(out, n_out, "codes");
  lowbit_array* scales = find(out, n_out, "scales");
  if (!x || x->rank != 2 || x->element_bytes != 4 || !codes || !scales) {
    last = "quantize: expected an f32 [rows, cols] x, and codes and scales";
    return LOWBIT_PLUGIN_ERROR;
  }
  S::Tensor t{static_cast<int>(x->shape[0]), static_cast<int>(x->shape[1]), {}};
  for (std::uint64_t i = 0; i < x->count; ++i) t.data.push_back(std::bit_cast<float>(f32_word(*x, i)));
  std::vector<std::uint32_t> rbits;
  const lowbit_array* r = find(in, n_in, "rbits");
  if (lowbit::is_stochastic(so.element_policy.rounding)) {
    if (!r || r->count != x->count || r->element_bytes != 4) {
      last = "quantize: a stochastic recipe needs rbits of x's shape";
      return LOWBIT_PLUGIN_ERROR;
    }
    for (std::uint64_t i = 0; i < r->count; ++i) rbits.push_back(f32_word(*r, i));
  }
  S::DelayedState state;
  const bool delayed = so.scheme == S::Scheme::delayed;
  if (delayed) {
    const lowbit_array* h = find(in, n_in, "history_in");
    const lowbit_array* s = find(in, n_in, "scale_in");
    std::string v;
    if (!h || !s || s->count != 1 || !recipe_value(recipe, "algorithm", v)) {
      last = "quantize: the delayed scheme needs history_in, scale_in and an algorithm";
      return LOWBIT_PLUGIN_ERROR;
    }
    state.max_algorithm = v == "max";
    if (recipe_value(recipe, "margin", v)) state.margin = std::stoi(v);
    for (std::uint64_t i = 0; i < h->count; ++i) state.history.push_back(std::bit_cast<float>(f32_word(*h, i)));
    state.scale = std::bit_cast<float>(f32_word(*s, 0));
  }
  S::Quantized q = S::quantize(t, so, rbits.empty() ? nullptr : &rbits, delayed ? &state : nullptr);
  if (codes->count != q.codes.size() || scales->count != q.scales.size()) {
    last = "quantize: the outputs' shapes differ from the quantizer's";
    return LOWBIT_PLUGIN_ERROR;
  }
  const char* bug = std::getenv("LOWBIT_PLANTED_QUANTIZE_BUG");
  const bool planted = bug && std::strcmp(bug, "1") == 0 && q.element == &lowbit::formats::e4m3;
  for (std::size_t i = 0; i < q.codes.size(); ++i) {
    std::uint8_t c = q.codes[i];
    // The planted bug: an e4m3 code of [8, 16) (exponent field 10) above the binade's first, one ulp low.
    if (planted && (c & 0x78) == 0x50 && (c & 0x07) != 0) c = static_cast<std::uint8_t>(c - 1);
    store(codes->data, i, codes->element_bytes, c);
  }
  for (std::size_t i = 0; i < q.scales.size(); ++i) store(scales->data, i, scales->element_bytes, q.scales[i]);
  if (lowbit_array* ts = find(out, n_out, "tensor_scale")) {
    if (!q.tensor_scale || ts->count != 1) {
      last = "quantize: tensor_scale expected but the recipe has none";
      return LOWBIT_PLUGIN_ERROR;
    }
    store(ts->data, 0, 4, *q.tensor_scale);
  }
  if (delayed) {
    lowbit_array* h = find(out, n_out, "history_out");
    lowbit_array* s = find(out, n_out, "scale_out");
    if (!h || !s || h->count != state.history.size() || s->count != 1) {
      last = "quantize: the delayed scheme writes history_out and scale_out";
      return LOWBIT_PLUGIN_ERROR;
    }
    for (std::size_t i = 0; i < state.history.size(); ++i) store(h->data, i, 4, std::bit_cast<std::uint32_t>(state.history[i]));
    store(s->data, 0, 4, std::bit_cast<std::uint32_t>(state.scale));
  }
  return LOWBIT_PLUGIN_OK;
}

// One pass of the request's contract (plugin.h's contract entry).
int contract(const char* request_json, const lowbit_array* in, uint32_t n_in, lowbit_array* out, uint32_t n_out) {
  namespace K = lowbit::contract;
  try {
    const nlohmann::json request = nlohmann::json::parse(request_json);
    const K::Contract c = K::parse(request.at("contract"));
    const auto pass = lowbit::parse<K::Pass>(request.at("pass").get<std::string>());
    if (!pass) {
      last = "contract: the request names no pass";
      return LOWBIT_PLUGIN_ERROR;
    }
    K::Inputs inputs;
    if (request.contains("sr_seed")) inputs.sr_seed = request.at("sr_seed").get<std::uint64_t>();
    // The delayed-scaling state (lowbit state's JSON: layers by tensor, f32 values as "0x..." bits), for the
    // tensors this pass quantizes with the delayed scheme.
    if (request.contains("state")) {
      const K::PassContract* pc = c.find(*pass);
      const K::PassOperands ops = K::operands_of(*pass);
      for (const auto& [layer, j] : request.at("state").at("layers").items()) {
        const auto t = lowbit::parse<K::Operand>(layer);
        if (!t || !pc || (*t != ops.a && *t != ops.b)) continue;
        const K::Quantization& q = *t == ops.a ? pc->a : pc->b;
        if (!q.recipe || q.options.scheme != lowbit::scale::Scheme::delayed) continue;
        auto f32 = [](const nlohmann::json& v) {
          return std::bit_cast<float>(static_cast<std::uint32_t>(std::stoul(v.get<std::string>(), nullptr, 16)));
        };
        lowbit::scale::DelayedState st;
        for (const auto& h : j.at("history")) st.history.push_back(f32(h));
        st.scale = f32(j.at("scale"));
        st.max_algorithm = j.value("algorithm", std::string("max")) != "most_recent";
        st.margin = j.value("margin", 0);
        inputs.delayed[*t] = st;
      }
    }
    for (std::uint32_t i = 0; i < n_in; ++i) {
      const lowbit::Format* f = lowbit::find_format(in[i].format);
      if (!f) {
        last = std::string("contract: input ") + in[i].name + " of unknown format " + in[i].format;
        return LOWBIT_PLUGIN_ERROR;
      }
      K::Array a{f, std::vector<std::uint64_t>(in[i].shape, in[i].shape + in[i].rank), {}};
      for (std::uint64_t j = 0; j < in[i].count; ++j) a.codes.push_back(load(in[i].data, j, in[i].element_bytes));
      const std::string name = in[i].name;
      // The parts of an operand stored already quantized ("w.codes", "w.scales", "w.tensor_scale").
      if (name.find('.') != std::string::npos) {
        inputs.stored[name] = std::move(a);
        continue;
      }
      auto& slot = name == "x"      ? inputs.x
                   : name == "w"    ? inputs.w
                   : name == "dy"   ? inputs.dy
                   : name == "bias" ? inputs.bias
                                    : inputs.residual;
      slot = std::move(a);
    }
    const K::RunResult r = K::run(c, *pass, inputs);
    for (std::uint32_t i = 0; i < n_out; ++i) {
      const std::string name = out[i].name;
      const K::Stage* stage = nullptr;
      for (const K::Stage& s : r.stages)
        if (s.file() == name + ".npy") stage = &s;
      if (!stage || (name != "output" && name != "accumulator") || stage->array.codes.size() != out[i].count) {
        out[i].count = 0;  // not supplied
        continue;
      }
      for (std::uint64_t j = 0; j < out[i].count; ++j) {
        std::uint64_t code = stage->array.codes[j];
        const char* bug = std::getenv("LOWBIT_PLANTED_CONTRACT_BUG");
        if (j == 0 && name == "output" && bug && std::string(bug) == "1") code ^= 1;
        store(out[i].data, j, out[i].element_bytes, code);
      }
    }
  } catch (const std::exception& e) {
    last = std::string("contract: ") + e.what();
    return LOWBIT_PLUGIN_ERROR;
  }
  return LOWBIT_PLUGIN_OK;
}

const char* last_error() { return last.c_str(); }

const lowbit_plugin table = {LOWBIT_PLUGIN_ABI_VERSION, sizeof(lowbit_plugin),
                             "planted-bug (lowbit fast path, one planted ulp in f32->e4m3 rne [8, 16); lowbit's "
                             "quantizer)",
                             convert, quantize, gemm, last_error, contract};

}  // namespace

extern "C" LOWBIT_PLUGIN_EXPORT const lowbit_plugin* lowbit_plugin_entry(uint32_t host_abi_version) {
  return host_abi_version == LOWBIT_PLUGIN_ABI_VERSION ? &table : nullptr;
}
