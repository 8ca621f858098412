// The golden-vector generator (vectors/SPEC.md).  Everything that reaches a file is computed with
// integers or through lowbit's reference (whose f32 steps are single IEEE operations in a build without
// contraction); random cases come from splitmix64 streams, never from std::*_distribution or libm, so
// the same generator version and seed give the same bytes with any compiler and optimisation level.
#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <cstdio>
#include <fstream>
#include <memory>
#include <span>
#include <tuple>
#include <stdexcept>

#include "lowbit/contract.hpp"
#include "lowbit/convert.hpp"
#include "lowbit/text.hpp"
#include "lowbit/gemm.hpp"
#include "lowbit/procedure.hpp"
#include "lowbit/io.hpp"
#include "lowbit/output.hpp"
#include "lowbit/profile.hpp"
#include "lowbit/registry.hpp"
#include "lowbit/scale.hpp"
#include "lowbit/quantized.hpp"
#include "lowbit/recipe.hpp"
#include "lowbit/error.hpp"
#include "lowbit/sha256.hpp"
#include "lowbit/vectors.hpp"
#include "vectors_internal.hpp"

namespace lowbit::vectors {

namespace detail {

io::DType dtype_of(const Format& f) {
  if (same_format(f, formats::f32)) return io::DType::f32;
  if (same_format(f, formats::f64)) return io::DType::f64;
  if (same_format(f, formats::f16)) return io::DType::f16;
  const int b = f.storage_bits();
  return b <= 8 ? io::DType::u8 : b <= 16 ? io::DType::u16 : b <= 32 ? io::DType::u32 : io::DType::u64;
}

File npy_file(const std::string& path, const std::string& role, const std::string& name, const Format& f,
              std::vector<std::uint64_t> shape, const std::vector<std::uint64_t>& codes) {
  const io::DType dt = dtype_of(f);
  const std::size_t w = io::dtype_bits(dt) / 8;
  std::vector<std::uint8_t> raw(codes.size() * w);
  for (std::size_t i = 0; i < codes.size(); ++i)
    for (std::size_t b = 0; b < w; ++b) raw[i * w + b] = static_cast<std::uint8_t>(codes[i] >> (8 * b));
  const std::vector<std::uint8_t> bytes = io::encode_npy(dt, shape, raw);
  File file{path, role, std::string(bytes.begin(), bytes.end()), nlohmann::json::object()};
  file.meta["name"] = name;
  file.meta["format"] = f.name;
  file.meta["dtype"] = std::string(*io::npy_descr(dt));
  file.meta["shape"] = shape;
  return file;
}

}  // namespace detail

namespace {

using json = nlohmann::json;
namespace S = lowbit::scale;

// The seeded streams and the .npy files (vectors_internal.hpp).
using detail::dtype_of;
using detail::npy_file;
using detail::Rng;

// ---- conversion suites ----------------------------------------------------------------------------

struct TargetChoice {
  const Format* target;
  ModeMask roundings;
  std::optional<Rounding> default_rounding;
  ModeMask overflows;
  Overflow default_overflow;
};

// The targets a profile converts into: its rule table, and for profiles that take any target a fixed
// list (ocp: f16 and bf16 beside its table; p3109: members of the binaryKpP family).
std::vector<TargetChoice> targets_of(const Profile& p) {
  std::vector<TargetChoice> v;
  for (const TargetRule& r : p.targets)
    v.push_back({r.target, r.roundings, r.default_rounding, r.overflows, r.default_overflow});
  if (p.any_target) {
    std::vector<const Format*> extra;
    if (std::string(p.name) == "p3109") {
      for (const char* n : {"binary8p1se", "binary8p3se", "binary8p4se", "binary8p4sf", "binary8p5ue", "binary6p3sf",
                            "binary4p2sf"})
        extra.push_back(find_format(n));
    } else {
      extra = {&formats::f16, &formats::bf16};
    }
    for (const Format* f : extra) {
      if (!f) throw std::logic_error("vectors: a built-in target is missing");
      const TargetRule& r = p.fallback;
      v.push_back({f, r.roundings, r.default_rounding, r.overflows, r.default_overflow});
    }
  }
  return v;
}

struct PolicyChoice {
  Rounding rounding;
  Overflow overflow;
  Subnormals subnormals = Subnormals::keep;
  Tininess tininess = Tininess::after;
  bool operator<(const PolicyChoice& o) const {
    return std::tie(rounding, overflow, subnormals, tininess) <
           std::tie(o.rounding, o.overflow, o.subnormals, o.tininess);
  }
};

// A star around the defaults: every deterministic rounding with the default overflow, every overflow
// with the default rounding, and where the profile allows them each subnormal mode and tininess before.
std::vector<PolicyChoice> policies_of(const Profile& p, const TargetChoice& t) {
  std::set<PolicyChoice> set;
  std::vector<Rounding> bases;
  // Deterministic roundings only: a stochastic case needs its random bits, which these suites do not carry.
  auto deterministic = [&](Rounding r) { return (t.roundings & bit(r)) && !is_stochastic(r); };
  if (t.default_rounding) bases.push_back(*t.default_rounding);
  else
    for (Rounding r : all<Rounding>())
      if (deterministic(r)) bases.push_back(r);
  for (Rounding base : bases) {
    for (Rounding r : all<Rounding>())
      if (deterministic(r)) set.insert({r, t.default_overflow});
    for (Overflow o : all<Overflow>())
      if (t.overflows & bit(o)) set.insert({base, o});
    for (Subnormals m : all<Subnormals>())
      if (m != Subnormals::keep && (p.subnormal_modes & (1u << static_cast<unsigned>(m))))
        set.insert({base, t.default_overflow, m});
    if (p.tininess_choice) set.insert({base, t.default_overflow, Subnormals::keep, Tininess::before});
  }
  return {set.begin(), set.end()};
}

std::string policy_dir(const PolicyChoice& c) {
  return std::string(name(c.rounding)) + "-" + name(c.overflow) + "-" + name(c.subnormals) + "-" + name(c.tininess);
}

// TestFloat-style patterns (Berkeley TestFloat 3, genCases: "exponent x significand" tables): biased
// exponents at the source's edges and across the target's range, times significands that put ties,
// near-ties and single bits where the target rounds, both signs.
std::vector<std::uint64_t> float_patterns(const Format& s, const Format& t) {
  const int M = s.mantissa_bits;
  const int top = (1 << s.exponent_bits) - 1;  // Inf/NaN exponent field
  // The target's range in the source's biased exponents, two binades wider on each side.
  const int lo = t.emin() - t.mantissa_bits - 2 + s.bias;
  const int hi = t.emax() + 2 + s.bias;
  std::vector<int> window;
  for (int e = std::max(lo, 1); e <= std::min(hi, top - 1); ++e) window.push_back(e);
  // At most `cap` exponents of the window: its lowest and highest fifth-parts, and evenly spread ones.
  const std::size_t cap = s.bits == 32 ? 16 : 10;
  std::set<int> exps = {0, 1, 2, top - 2, top - 1, top};
  const std::size_t n = window.size();
  if (n <= cap) {
    exps.insert(window.begin(), window.end());
  } else {
    const std::size_t edge = cap * 3 / 10, middle = cap - 2 * edge;
    for (std::size_t i = 0; i < edge; ++i) {
      exps.insert(window[i]);
      exps.insert(window[n - 1 - i]);
    }
    for (std::size_t i = 1; i <= middle; ++i) exps.insert(window[i * (n - 1) / (middle + 1)]);
  }
  // Significands: zero, one, all ones, the top bit with the last, alternating bits; then for the
  // dropped-bit counts k of the target's normal binade and one either side, the tie (the k-th bit from
  // the bottom alone), one below and above it, the tie with the kept last bit set, and all k bits set;
  // for the deeper subnormal binades the two ties.
  const std::uint64_t mask = bits::ones(M);
  std::set<std::uint64_t> sigs = {0, 1, mask, (std::uint64_t{1} << (M - 1)) | 1, 0x5555555555555555ull & mask};
  const int d = std::max(1, M - t.mantissa_bits);  // bits dropped in the target's normal range
  for (int k = std::max(1, d - 1); k <= std::min(M, d + t.mantissa_bits + 1); ++k) {
    const std::uint64_t half = std::uint64_t{1} << (k - 1);
    if (k <= d + 1) {
      for (std::uint64_t v : {half, half - 1, half + 1, half | (std::uint64_t{1} << k), (half << 1) - 1})
        sigs.insert(v & mask);
    } else {
      for (std::uint64_t v : {half, half | (std::uint64_t{1} << k)}) sigs.insert(v & mask);
    }
  }
  std::vector<std::uint64_t> out;
  for (std::uint64_t sign : {std::uint64_t{0}, std::uint64_t{1}})
    for (int e : exps)
      for (std::uint64_t m : sigs) out.push_back((sign << (s.exponent_bits + M)) | (std::uint64_t(e) << M) | m);
  return out;
}

// Seeded random codes: half uniform over every code, half in the target's exponent window.
void random_codes(const Format& s, const Format& t, Rng& rng, std::size_t n, std::vector<std::uint64_t>& out) {
  const int M = s.mantissa_bits;
  const int top = (1 << s.exponent_bits) - 1;
  const int lo = std::max(1, t.emin() - t.mantissa_bits - 2 + s.bias);
  const int hi = std::max(lo, std::min(top - 1, t.emax() + 2 + s.bias));
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t r = rng.next();
    if (i % 2 == 0) {
      out.push_back(r & bits::ones(s.storage_bits()));
    } else {
      const std::uint64_t e = static_cast<std::uint64_t>(lo) + rng.below(static_cast<std::uint64_t>(hi - lo + 1));
      const std::uint64_t sign = rng.next() & 1;
      out.push_back((sign << (s.exponent_bits + M)) | (e << M) | (r & bits::ones(M)));
    }
  }
}

std::vector<std::uint64_t> all_codes(const Format& s) {
  std::vector<std::uint64_t> v;
  const std::uint64_t n = std::uint64_t{1} << s.storage_bits();
  for (std::uint64_t c = 0; c < n; ++c)
    if (s.valid_code(c)) v.push_back(c);
  return v;
}

// One scalar file.  Cases the profile leaves undefined (LLVM's NaN into FP4) are left out.
File scalar_file(const Profile& prof, const Format& from, const Format& to, const PolicyChoice& pc,
                 const Policy& policy, const std::vector<std::uint64_t>& inputs, std::uint64_t seed,
                 const std::string& path) {
  std::string body;
  std::uint64_t n = 0;
  for (std::uint64_t in : inputs) {
    const Result r = convert(from, in, to, policy);
    if (r.flags & flag::unsupported) continue;
    body += hex_digits(in, from.hex_digits());
    body += ' ';
    body += hex_digits(r.code, to.hex_digits());
    body += ' ';
    body += hex_digits(r.flags, 2);
    body += '\n';
    ++n;
  }
  std::string head = "#lowbit-vectors scalar schema " + std::to_string(schema_version) + " generator " +
                     std::to_string(generator_version) + "\n";
  head += std::string("#from ") + from.name + " to " + to.name + " profile " + prof.name + " rounding " +
          name(pc.rounding) + " overflow " + name(pc.overflow) + " subnormals " + name(pc.subnormals) +
          " tininess " + name(pc.tininess) + "\n";
  head += "#cases " + std::to_string(n) + " seed " + std::to_string(seed) + "\n";
  File f{path, "expected", head + body, json::object()};
  f.meta = {{"from", from.name},
            {"to", to.name},
            {"rounding", name(pc.rounding)},
            {"overflow", name(pc.overflow)},
            {"subnormals", name(pc.subnormals)},
            {"tininess", name(pc.tininess)},
            {"cases", n},
            {"dtype", "text"}};
  return f;
}

Suite convert_suite(const std::string& suite, const Profile& prof, bool exhaustive16, std::uint64_t seed) {
  Suite s;
  s.name = suite;
  const std::vector<TargetChoice> targets = targets_of(prof);
  // Sources: the wide floats and every target of the profile of at most 8 bits.
  std::vector<const Format*> sources;
  if (exhaustive16) {
    sources = {&formats::bf16, &formats::f16};
  } else {
    sources = {&formats::f64, &formats::f32, &formats::bf16, &formats::f16};
    for (const TargetChoice& t : targets)
      if (t.target->storage_bits() <= 8) sources.push_back(t.target);
  }
  for (const TargetChoice& t : targets) {
    for (const PolicyChoice& pc : policies_of(prof, t)) {
      PolicyRequest req;
      req.rounding = pc.rounding;
      req.overflow = pc.overflow;
      req.subnormals = pc.subnormals;
      req.tininess = pc.tininess;
      std::string error;
      const std::optional<Resolved> res = resolve(&prof, *t.target, req, error);
      if (!res) continue;
      const Format& to = *res->target;
      for (const Format* from : sources) {
        if (same_format(*from, to)) continue;
        const std::string path = std::string(to.name) + "/" + policy_dir(pc) + "/" + from->name + ".txt";
        std::vector<std::uint64_t> inputs;
        if (from->storage_bits() <= 8 || (exhaustive16 && from->storage_bits() <= 16)) {
          inputs = all_codes(*from);
        } else {
          inputs = float_patterns(*from, to);
          Rng rng(seed, suite + "/" + path);
          random_codes(*from, to, rng, from->bits == 64 ? 64 : from->bits == 32 ? 96 : 32, inputs);
        }
        s.files.push_back(scalar_file(prof, *from, to, pc, res->policy, inputs, seed, path));
      }
    }
  }
  s.manifest["kind"] = "convert";
  s.manifest["profile"] = prof.name;
  return s;
}

// ---- tensors for the scheme suites ------------------------------------------------------------------

std::uint32_t f32_bits(float f) { return std::bit_cast<std::uint32_t>(f); }

// Random f32 values: sign, an exponent in [127 + lo, 127 + hi], a random significand.
std::vector<float> random_tensor(Rng& rng, std::size_t n, int lo, int hi) {
  std::vector<float> v(n);
  for (float& x : v) {
    const std::uint64_t r = rng.next();
    const std::uint32_t e = static_cast<std::uint32_t>(127 + lo) + static_cast<std::uint32_t>(rng.below(hi - lo + 1));
    x = std::bit_cast<float>(static_cast<std::uint32_t>(((r >> 40) & 1) << 31) | (e << 23) |
                             static_cast<std::uint32_t>(r & 0x7fffff));
  }
  return v;
}

// Values that sit on the schemes' edges (docs/semantics.md §2-§4): zeros of both signs, the e4m3 and e2m1
// ties and maxima, f32 subnormals and extremes, powers of two; a zero block; optionally NaN and Inf.
std::vector<float> edge_tensor(Rng& rng, int rows, int cols, bool nonfinite) {
  static const std::uint32_t edges[] = {
      0x00000000u, 0x80000000u, 0x3f800000u, 0xbf800000u, 0x43e00000u /*448*/, 0x43e80000u /*464*/,
      0x43e88000u /*465*/,      0x40c00000u /*6*/,        0x40a00000u /*5*/,   0x3e800000u /*0.25*/,
      0x3f400000u /*0.75*/,     0x00000001u,             0x00800000u,         0x7f7fffffu /*FLT_MAX*/,
      0xff7fffffu,              0x477fe000u /*65504*/,    0x47600000u /*57344*/, 0x3c800000u /*2^-6*/,
      0x3b000000u /*2^-9*/,     0x43f00000u /*480*/,      0x3e99999au /*0.3*/,  0xc2c80000u /*-100*/};
  std::vector<float> v = random_tensor(rng, static_cast<std::size_t>(rows) * cols, -8, 8);
  for (std::size_t i = 0; i < v.size(); i += 3) v[i] = std::bit_cast<float>(edges[(i / 3) % std::size(edges)]);
  // The second row's first 20 elements are zeros (an all-zero block for blocks of up to 16).
  if (rows > 1)
    for (int c = 0; c < std::min(cols, 20); ++c) v[static_cast<std::size_t>(cols) + c] = 0.0f;
  if (nonfinite) {
    v[1] = std::bit_cast<float>(0x7fc00000u);
    if (v.size() > 40) v[40] = std::bit_cast<float>(0x7f800000u);
    if (v.size() > 70) v[70] = std::bit_cast<float>(0xff800000u);
  }
  return v;
}

struct TensorCase {
  std::string name;
  int rows, cols;
  std::vector<float> x;
};

std::vector<TensorCase> scheme_tensors(Rng& rng, int block, bool two_d, bool nonfinite) {
  std::vector<TensorCase> v;
  const int b = std::max(block, 1);
  auto add = [&](const std::string& kind, int r, int c) {
    TensorCase t{kind + "-" + std::to_string(r) + "x" + std::to_string(c), r, c, {}};
    if (kind == "edges") t.x = edge_tensor(rng, r, c, false);
    else if (kind == "nonfinite") t.x = edge_tensor(rng, r, c, true);
    else if (kind == "wide") t.x = random_tensor(rng, static_cast<std::size_t>(r) * c, -126, 127);
    else t.x = random_tensor(rng, static_cast<std::size_t>(r) * c, -12, 6);
    v.push_back(std::move(t));
  };
  add("random", 1, b);
  add("random", 3, 2 * b + 5);  // not a multiple of the block
  add("edges", 4, b + 7);
  add("wide", 2, b + 1);
  if (two_d) add("random", b + 3, b + 9);
  if (nonfinite) add("nonfinite", 3, b + 3);
  return v;
}

// On-demand scheme tensors: one `random` tensor per requested shape, drawn in the order given.
std::vector<TensorCase> shaped_tensors(Rng& rng, const std::vector<TensorShape>& shapes) {
  std::vector<TensorCase> v;
  for (const TensorShape& sh : shapes)
    v.push_back({"random-" + std::to_string(sh.rows) + "x" + std::to_string(sh.cols), sh.rows, sh.cols,
                 random_tensor(rng, static_cast<std::size_t>(sh.rows) * static_cast<std::size_t>(sh.cols), -12, 6)});
  return v;
}

struct LabelledRecipe {
  lowbit::Recipe o;
  std::string label;
};

lowbit::Recipe qopt(const std::string& scheme, const std::string& element) {
  lowbit::Recipe o;
  o.scheme = scheme;
  o.element = element;
  return o;
}

std::vector<LabelledRecipe> scheme_recipes(const std::string& family) {
  std::vector<LabelledRecipe> v;
  auto add = [&](lowbit::Recipe o, const std::string& label) { v.push_back({std::move(o), label}); };
  if (family == "tensor" || family == "channel" || family == "token") {
    add(qopt(family, "e4m3"), "e4m3");
    add(qopt(family, "e5m2"), "e5m2");
    auto p = qopt(family, "e4m3");
    p.scale_format = "pow2";
    add(p, "e4m3-pow2");
  } else if (family == "delayed") {
    add(qopt("delayed", "e4m3"), "e4m3");
    add(qopt("delayed", "e5m2"), "e5m2");
  } else if (family == "block") {
    add(qopt("block1x128", "e4m3"), "1x128-e4m3");
    auto p = qopt("block1x128", "e4m3");
    p.scale_format = "pow2";
    add(p, "1x128-e4m3-pow2");
    add(qopt("block128x128", "e4m3"), "128x128-e4m3");
  } else if (family == "mx") {
    for (const S::MxRule rule : all<S::MxRule>()) {
      auto o = qopt("mx", "e4m3");
      o.scale_rule = name(rule);
      add(o, std::string("e4m3-") + name(rule));
    }
    for (const char* el : {"e5m2", "e2m3", "e3m2", "e2m1", "int8"}) add(qopt("mx", el), std::string(el) + "-floor");
    auto r = qopt("mx", "e2m1");
    r.scale_rule = "rceil";
    add(r, "e2m1-rceil");
    for (const S::NonFinite nf : all<S::NonFinite>()) {
      if (nf == S::NonFinite::scale_nan) continue;  // the default, in every case above
      auto o = qopt("mx", "e4m3");
      o.nonfinite = name(nf);
      add(o, std::string("e4m3-floor-") + name(nf));
    }
    for (const char* rule : {"floor", "rceil"}) {  // torchao 0.18's to_mx, its NaN and Inf blocks included
      auto o = qopt("mx", "e4m3");
      o.scale_rule = rule;
      o.variant = "torchao";
      add(o, std::string("e4m3-") + rule + "-torchao");
    }
  } else if (family == "nvfp4" || family == "nvfp4-2d") {
    add(qopt(family, "e2m1"), "standard");
    for (const S::Variant var : all<S::Variant>()) {
      if (var == S::Variant::standard) continue;  // the first case
      // An exporter's arithmetic is checked against that exporter's checkpoints (conformance/checkpoint);
      // the kernels' and libraries' variants (TE's, torchao's) have golden cases.
      if (S::variant_row(var).exporter) continue;
      auto o = qopt(family, "e2m1");
      o.variant = name(var);
      add(o, name(var));
    }
    auto z = qopt(family, "e2m1");
    z.zero_scale = "reference";
    add(z, "zero-scale-reference");
    if (family == "nvfp4") {
      auto h = qopt(family, "e2m1");
      h.hadamard = S::Hadamard::exact;
      add(h, "hadamard");
      auto sr = qopt(family, "e2m1");
      sr.rounding = "sr-a";
      sr.sr_bits = 8;
      add(sr, "sr-a-8");
    }
  } else if (family == "nvfp4-1level") {
    add(qopt(family, "e2m1"), "standard");
  }
  return v;
}

// `custom`: the on-demand shapes (vectors/SPEC.md "On-demand shapes"), else the committed tensors.
Suite scheme_suite(const std::string& suite, const std::string& family, std::uint64_t seed,
                   const std::vector<TensorShape>* custom = nullptr) {
  Suite s;
  s.name = suite;
  json cases = json::array();
  int index = 0;
  for (const LabelledRecipe& rc : scheme_recipes(family)) {
    const BuiltRecipe built = build(rc.o);
    const S::Options& so = built.options;
    const bool two_d = so.block_rows > 1;
    const bool nonfinite = family == "mx" || family == "tensor" || family == "nvfp4";
    Rng rng(seed, suite + "/" + rc.label);
    std::vector<TensorCase> tensors =
        custom ? shaped_tensors(rng, *custom) : scheme_tensors(rng, so.block == 0 ? 16 : so.block, two_d, nonfinite);
    for (TensorCase& t : tensors) {
      if (t.name.rfind("nonfinite", 0) == 0 && family == "mx" && rc.o.nonfinite.empty() && rc.o.variant.empty() &&
          rc.label != "e4m3-floor")
        continue;  // NaN/Inf blocks: only under the rules that name a choice
      if (t.name.rfind("nonfinite", 0) == 0 && so.variant == S::Variant::torchao && so.element == &formats::e2m1)
        continue;  // torchao's NaN scales make e2m1 codes of the NaN's bit pattern, which lowbit does not model
                   // (docs/semantics.md §4.7a): no golden case claims them
      if (so.variant == S::Variant::four_over_six || so.variant == S::Variant::four_over_six_mse ||
          so.hadamard != S::Hadamard::none) {
        // Keep these cases' rows a multiple of 16 where the scheme transforms 16x16 tiles.
        if (so.hadamard != S::Hadamard::none && t.cols % 16 != 0) continue;
      }
      const S::Tensor x{t.rows, t.cols, t.x};
      std::vector<std::uint32_t> rbits;
      const bool stochastic = is_stochastic(so.element_policy.rounding);
      if (stochastic)
        for (std::size_t i = 0; i < t.x.size(); ++i)
          rbits.push_back(static_cast<std::uint32_t>(rng.next() >> 56));  // 8 random bits per element
      S::DelayedState state;
      S::DelayedState state_in;
      if (family == "delayed") {
        state.max_algorithm = rc.label == "e4m3";
        state.margin = rc.label == "e4m3" ? 0 : 1;
        state.history = random_tensor(rng, 8, -4, 4);
        state.history[3] = 0.0f;
        state.scale = std::bit_cast<float>(0x42000000u);  // 32
        state_in = state;
      }
      const S::Quantized q =
          S::quantize(x, so, stochastic ? &rbits : nullptr, family == "delayed" ? &state : nullptr);
      char id[32];
      std::snprintf(id, sizeof id, "case-%03d", index);
      const std::string dir = id;
      const std::vector<std::uint64_t> shape = {static_cast<std::uint64_t>(t.rows), static_cast<std::uint64_t>(t.cols)};
      auto with_case = [&](File f) {
        f.meta["case"] = index;
        s.files.push_back(std::move(f));
      };
      std::vector<std::uint64_t> xb;
      for (float f : t.x) xb.push_back(f32_bits(f));
      with_case(npy_file(dir + "/x.npy", "input", "x", formats::f32, shape, xb));
      if (stochastic) {
        // The random values are plain integers: '<u4', format "uint32".
        File f = npy_file(dir + "/rbits.npy", "input", "rbits", formats::f32, shape,
                          std::vector<std::uint64_t>(rbits.begin(), rbits.end()));
        const std::vector<std::uint8_t> bytes =
            io::encode_npy(io::DType::u32, shape,
                           std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(f.bytes.data()) +
                                                             (f.bytes.size() - rbits.size() * 4),
                                                         rbits.size() * 4));
        f.bytes.assign(bytes.begin(), bytes.end());
        f.meta["format"] = "uint32";
        f.meta["dtype"] = "<u4";
        with_case(std::move(f));
      }
      if (family == "delayed") {
        std::vector<std::uint64_t> h;
        for (float f : state_in.history) h.push_back(f32_bits(f));
        with_case(npy_file(dir + "/history_in.npy", "input", "history_in", formats::f32, {h.size()}, h));
        with_case(npy_file(dir + "/scale_in.npy", "input", "scale_in", formats::f32, {1}, {f32_bits(state_in.scale)}));
      }
      std::vector<std::uint64_t> codes(q.codes.begin(), q.codes.end());
      with_case(npy_file(dir + "/codes.npy", "expected", "codes", *q.element, shape, codes));
      const std::vector<std::uint64_t> sshape = {static_cast<std::uint64_t>(q.scale_rows()),
                                                 static_cast<std::uint64_t>(q.scale_cols())};
      // NVFP4's block scales are the scheme's only E4M3 scales, and never negative (scale.hpp): their
      // format is UE4M3, as the block-scaled GEMM suites name the same bytes.
      const Format& scale_label = q.scale_format == &formats::e4m3 ? formats::ue4m3 : *q.scale_format;
      with_case(npy_file(dir + "/scales.npy", "expected", "scales", scale_label, sshape, q.scales));
      if (q.tensor_scale)
        with_case(npy_file(dir + "/tensor_scale.npy", "expected", "tensor_scale", formats::f32, {1}, {*q.tensor_scale}));
      if (family == "delayed") {
        std::vector<std::uint64_t> h;
        for (float f : state.history) h.push_back(f32_bits(f));
        with_case(npy_file(dir + "/history_out.npy", "expected", "history_out", formats::f32, {h.size()}, h));
        with_case(npy_file(dir + "/scale_out.npy", "expected", "scale_out", formats::f32, {1}, {f32_bits(state.scale)}));
      }
      json recipe = json::object();
      for (const auto& [k, v] : recipe_keys(rc.o, built, q)) recipe[k] = v;
      if (rc.o.scheme == "block1x128" || rc.o.scheme == "block128x128") recipe["quantization_format"] = rc.o.scheme;
      if (stochastic) recipe["sr_bits"] = std::to_string(rc.o.sr_bits);
      if (family == "delayed") {
        recipe["algorithm"] = state_in.max_algorithm ? "max" : "most_recent";
        recipe["margin"] = std::to_string(state_in.margin);
      }
      cases.push_back({{"index", index}, {"name", rc.label + "/" + t.name}, {"recipe", recipe}, {"shape", shape}});
      ++index;
    }
  }
  s.manifest["kind"] = "scheme";
  s.manifest["scheme"] = family;
  s.manifest["profile"] = nullptr;
  s.manifest["cases"] = cases;
  return s;
}

// ---- GEMM suites -----------------------------------------------------------------------------------

// A random finite code of `f` (NaN and Inf codes are redrawn), or with `lo`..`hi` a code in that range.
std::uint64_t finite_code(const Format& f, Rng& rng) {
  for (;;) {
    const std::uint64_t c = rng.next() & bits::ones(f.storage_bits());
    if (f.valid_code(c) && !f.is_nan_code(c) && !f.is_inf_code(c)) return c;
  }
}

// f32 / f16 / bf16 operands: moderate exponents so that sums neither overflow nor vanish.
std::uint64_t moderate_code(const Format& f, Rng& rng) {
  if (f.storage_bits() <= 8) return finite_code(f, rng);
  const std::uint64_t r = rng.next();
  const int M = f.mantissa_bits;
  const std::uint64_t e = static_cast<std::uint64_t>(f.bias - 6) + rng.below(12);
  const std::uint64_t code = ((r >> 63) << (f.exponent_bits + M)) | (e << M) | (r & bits::ones(M));
  return code << f.code_shift;
}

gemm::Matrix random_matrix(const Format& f, int rows, int cols, Rng& rng) {
  gemm::Matrix m{&f, rows, cols, {}};
  for (int i = 0; i < rows * cols; ++i) m.codes.push_back(moderate_code(f, rng));
  return m;
}

// The GEMM suites in `lowbit vectors list` order: the procedures that are one computation (exact, the f32
// orders, each tensor-core model), then the composites built on a model (promotion, block scaling).
std::vector<const gemm::Procedure*> gemm_procedures() {
  std::vector<const gemm::Procedure*> v;
  auto composite = [](const gemm::Procedure& p) {
    return p.kind == gemm::Kind::promoted || p.kind == gemm::Kind::block_scaled;
  };
  for (const gemm::Procedure& p : gemm::procedures())
    if (!composite(p)) v.push_back(&p);
  for (const gemm::Procedure& p : gemm::procedures())
    if (composite(p)) v.push_back(&p);
  return v;
}

gemm::Matrix scale_matrix(const Format& f, int rows, int cols, Rng& rng) {
  gemm::Matrix m{&f, rows, cols, {}};
  for (int i = 0; i < rows * cols; ++i) {
    if (same_format(f, formats::e8m0)) m.codes.push_back(124 + rng.below(7));        // 2^-3 .. 2^3
    else if (same_format(f, formats::ue4m3)) m.codes.push_back(0x30 + rng.below(24));  // 0.5 .. 3.75
    else {
      // f32 around 1.  Two draws in separate statements: the operands of one `+` are unsequenced in C++,
      // and the order is part of the bytes (vectors/SPEC.md section 3).
      const std::uint64_t step = rng.below(16);
      const std::uint64_t significand = rng.next() & 0x7fffff;
      m.codes.push_back(0x3e000000u + (step << 21) + significand);
    }
  }
  return m;
}

// A rows x cols row-major array stored transposed (cols x rows, row-major).
std::vector<std::uint64_t> transposed(const std::vector<std::uint64_t>& v, int rows, int cols) {
  std::vector<std::uint64_t> t(v.size());
  const auto r = static_cast<std::size_t>(rows), c = static_cast<std::size_t>(cols);
  for (std::size_t i = 0; i < r; ++i)
    for (std::size_t j = 0; j < c; ++j) t[j * r + i] = v[i * c + j];
  return t;
}

// The on-demand request of a GEMM suite: its shapes (each a `random` case) and how A and B are stored.
struct GemmRequest {
  std::vector<GemmShape> shapes;
  Layout layout;
};

std::string layout_text(const Layout& l) { return std::string(name(l.a)) + name(l.b); }

Suite gemm_suite(const std::string& suite, const gemm::Procedure& proc, std::uint64_t seed,
                 const GemmRequest* custom = nullptr) {
  Suite s;
  s.name = suite;
  json cases = json::array();
  int index = 0;
  const std::string model = proc.name;
  const bool composite = proc.kind == gemm::Kind::promoted || proc.kind == gemm::Kind::block_scaled;
  for (const gemm::OperandPair& sp : proc.golden) {
    const int group = proc.kind == gemm::Kind::model ? proc.model->group : 32;
    struct Shape {
      int m, n, k;
      const char* kind;
    };
    std::vector<Shape> shapes = {{4, 3, 1, "random"}, {4, 3, 17, "random"}, {5, 4, 2 * group + 3, "random"},
                                 {3, 5, 130, "random"}, {2, 3, group, "cancel"}};
    // A composite also gets a K over two promotion blocks and a partial third.
    if (composite) shapes.push_back({2, 130, 300, "random"});
    if (!sp.scale) shapes.push_back({2, 2, group + 1, "specials"});
    if (custom) {
      shapes.clear();
      for (const GemmShape& g : custom->shapes) shapes.push_back({g.m, g.n, g.k, "random"});
    }
    for (const Shape& sh : shapes) {
      Rng rng(seed, suite + "/" + std::to_string(index));
      gemm::Matrix a = random_matrix(*sp.a, sh.m, sh.k, rng);
      gemm::Matrix b = random_matrix(*sp.b, sh.k, sh.n, rng);
      if (std::string(sh.kind) == "cancel") {
        // Row 0 of A times column 0 of B: max, -max, then the smallest positive value: an exact sum that
        // truncating accumulators lose (README's 448 - 448 + 2^-6 example).
        const std::uint64_t one_b = convert(formats::f32, 0x3f800000u, *sp.b, Policy{}).code;
        const std::uint64_t mx = sp.a->max_finite_magnitude();
        a.codes[0] = sp.a->encode(false, mx);
        if (sh.k > 1) a.codes[1] = sp.a->encode(true, mx);
        if (sh.k > 2) a.codes[2] = sp.a->encode(false, 1);
        for (int k = 0; k < sh.k; ++k) b.codes[static_cast<std::size_t>(k) * sh.n] = one_b;
      } else if (std::string(sh.kind) == "specials") {
        if (sp.a->has_nan()) a.codes[0] = sp.a->nan_code(false);
        if (sp.a->has_inf()) a.codes[static_cast<std::size_t>(sh.k) + 1] = sp.a->encode(false, sp.a->inf_magnitude());
        a.codes[static_cast<std::size_t>(sh.k) + 2 < a.codes.size() ? static_cast<std::size_t>(sh.k) + 2 : 0] =
            sp.a->encode(true, 0);
      }
      const gemm::Matrix c = random_matrix(formats::f32, sh.m, sh.n, rng);
      gemm::Matrix as, bs;
      gemm::Operands ops{.a = &a, .b = &b, .c = &c};
      gemm::ScaleShape sc;
      if (sp.scale) {
        sc = gemm::scale_shape(proc, sh.m, sh.n, sh.k, sp.scale, sp.scale_block);
        as = scale_matrix(*sp.scale, sc.a_rows, sc.a_cols, rng);
        bs = scale_matrix(*sp.scale, sc.b_rows, sc.b_cols, rng);
        ops.a_scales = &as;
        ops.b_scales = &bs;
        ops.scale_block = sp.scale_block;
      }
      const gemm::RunResult r = gemm::run(proc, ops);
      const std::vector<std::uint64_t>& d = r.d;
      const Format* out = r.format;
      char id[32];
      std::snprintf(id, sizeof id, "case-%03d", index);
      const std::string dir = id;
      auto with_case = [&](File f) {
        f.meta["case"] = index;
        s.files.push_back(std::move(f));
      };
      auto u = [](int v) { return static_cast<std::uint64_t>(v); };
      // An operand (and its scales) stored `t` is written transposed; the values are the same draws.
      const bool a_t = custom && custom->layout.a == Storage::t;
      const bool b_t = custom && custom->layout.b == Storage::t;
      auto stored = [&](const std::string& path, const std::string& role, const std::string& array, const Format& f,
                        int rows, int cols, const std::vector<std::uint64_t>& codes, bool t) {
        with_case(t ? npy_file(path, role, array, f, {u(cols), u(rows)}, transposed(codes, rows, cols))
                    : npy_file(path, role, array, f, {u(rows), u(cols)}, codes));
      };
      stored(dir + "/a.npy", "input", "a", *sp.a, sh.m, sh.k, a.codes, a_t);
      stored(dir + "/b.npy", "input", "b", *sp.b, sh.k, sh.n, b.codes, b_t);
      with_case(npy_file(dir + "/c.npy", "input", "c", formats::f32, {u(sh.m), u(sh.n)}, c.codes));
      if (sp.scale) {
        stored(dir + "/a_scales.npy", "input", "a_scales", *sp.scale, sc.a_rows, sc.a_cols, as.codes, a_t);
        stored(dir + "/b_scales.npy", "input", "b_scales", *sp.scale, sc.b_rows, sc.b_cols, bs.codes, b_t);
      }
      with_case(npy_file(dir + "/d.npy", "expected", "d", *out, {u(sh.m), u(sh.n)}, d));
      json recipe = {{"model", model}, {"a_format", sp.a->name}, {"b_format", sp.b->name}, {"d_format", out->name}};
      if (sp.scale) {
        recipe["scale_format"] = sp.scale->name;
        recipe["scale_block"] = sp.scale_block;
        if (proc.scales == gemm::ScaleLayout::deepgemm_1x128) recipe["b_scale_block"] = "128x128";
      }
      recipe["c"] = true;
      if (custom) recipe["layout"] = layout_text(custom->layout);
      json entry = {{"index", index},
                    {"name", std::string(sh.kind) + "-" + std::to_string(sh.m) + "x" + std::to_string(sh.n) + "x" +
                                 std::to_string(sh.k)},
                    {"recipe", recipe},
                    {"m", sh.m},
                    {"n", sh.n},
                    {"k", sh.k}};
      if (custom) entry["layout"] = layout_text(custom->layout);
      cases.push_back(std::move(entry));
      ++index;
    }
  }
  s.manifest["kind"] = "gemm";
  s.manifest["model"] = model;
  s.manifest["profile"] = nullptr;
  s.manifest["cases"] = cases;
  return s;
}

std::string scheme_description(const std::string& f) {
  if (f == "tensor") return "per-tensor current scaling (TE compute_scale_from_amax), e4m3/e5m2, f32 and pow2 scales";
  if (f == "delayed") return "delayed scaling: one step from a given amax history and scale (max, most_recent)";
  if (f == "channel") return "per-channel scaling (the per-tensor rule per column)";
  if (f == "token") return "per-token scaling (the per-tensor rule per row)";
  if (f == "block") return "blockwise FP8: 1x128 and 128x128 blocks, f32 and pow2 scales";
  if (f == "mx") return "OCP MX: every element format, scale rules floor/ceil/even/rceil/rne, NaN/Inf choices";
  if (f == "nvfp4") return "two-level NVFP4 1x16: standard, fast-math, 4over6, zero-scale, Hadamard, sr-a";
  if (f == "nvfp4-2d") return "two-level NVFP4 16x16 blocks: standard, fast-math, 4over6, zero-scale";
  return "single-level NVFP4 (torchao)";
}

}  // namespace

std::vector<SuiteInfo> suites() {
  std::vector<SuiteInfo> v;
  for (const Profile& p : profiles())
    v.push_back({std::string("convert-") + p.name,
                 std::string("element conversions under ") + p.name +
                     ": every source of <=8 bits exhaustively, f16/bf16/f32/f64 by pattern sets and seeded random cases",
                 true});
  for (const Profile& p : profiles())
    v.push_back({std::string("convert16-") + p.name,
                 std::string("element conversions under ") + p.name + ": every bf16 and f16 input (on demand)", false});
  for (const S::Scheme f : all<S::Scheme>())
    v.push_back({std::string("scheme-") + name(f), scheme_description(name(f)), true});
  for (const gemm::Procedure* p : gemm_procedures())
    v.push_back({std::string("gemm-") + p->name,
                 std::string("GEMM under model ") + p->name + ": random, cancelling and special operands", true});
  for (const contract::NamedContract& c : contract::named())
    v.push_back({std::string("contract-") + c.name,
                 std::string("precision contract ") + c.name + ": every pass, every stage, on random, edge and "
                                                              "nonfinite inputs",
                 true});
  return v;
}

namespace {

std::string description_of(const std::string& name) {
  for (const SuiteInfo& i : suites())
    if (i.name == name) return i.description;
  throw std::invalid_argument("--suite: unknown suite '" + name + "' (see `lowbit vectors list`)");
}

Suite finished(Suite s, const std::string& name, std::uint64_t seed, const std::string& description) {
  std::sort(s.files.begin(), s.files.end(), [](const File& a, const File& b) { return a.path < b.path; });
  s.manifest["schema"] = schema_version;
  s.manifest["generator"] = generator_version;
  s.manifest["suite"] = name;
  s.manifest["seed"] = seed;
  s.manifest["description"] = description;
  return s;
}

// ---- strict option texts ---------------------------------------------------------------------------

// A positive decimal integer of at most max_dimension: digits only (no sign, space or leading zero), checked
// digit by digit so that no text overflows.
int dimension(const std::string& digits, const std::string& option, const std::string& item) {
  const std::string what = "'" + item + "': ";
  if (digits.empty()) throw ArgumentError(option, what + "a dimension is empty");
  long long v = 0;
  for (const char c : digits) {
    if (c < '0' || c > '9') throw ArgumentError(option, what + "'" + digits + "' is not a decimal integer");
    v = v * 10 + (c - '0');
    if (v > max_dimension) throw ArgumentError(option, what + "a dimension over " + std::to_string(max_dimension));
  }
  if (v == 0) throw ArgumentError(option, what + "a dimension is 0 (each must be at least 1)");
  if (digits[0] == '0') throw ArgumentError(option, what + "'" + digits + "' has a leading zero");
  return static_cast<int>(v);
}

// The comma-separated items of `text`, each split at 'x' into `parts` dimensions.
std::vector<std::vector<int>> shape_items(const std::string& text, std::size_t parts, const char* form) {
  const std::string option = "shape";
  std::vector<std::vector<int>> out;
  std::set<std::vector<int>> seen;
  std::size_t pos = 0;
  for (;;) {
    const std::size_t comma = text.find(',', pos);
    const std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (item.empty()) throw ArgumentError(option, "an empty shape in '" + text + "' (shapes are " + form + ",...)");
    std::vector<int> dims;
    std::size_t at = 0;
    for (;;) {
      const std::size_t x = item.find('x', at);
      dims.push_back(dimension(item.substr(at, x == std::string::npos ? std::string::npos : x - at), option, item));
      if (x == std::string::npos) break;
      at = x + 1;
    }
    if (dims.size() != parts)
      throw ArgumentError(
          option, "'" + item + "' is not " + form + " (" + std::to_string(parts) + " positive integers joined by 'x')");
    if (!seen.insert(dims).second) throw ArgumentError(option, "'" + item + "' is given twice");
    out.push_back(std::move(dims));
    if (out.size() > max_shapes) throw ArgumentError(option, "more than " + std::to_string(max_shapes) + " shapes");
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

void check_elements(long long rows, long long cols, const std::string& item, const char* array) {
  // Both at most max_dimension (2^20), so the product fits in 64 bits.
  if (rows * cols > max_elements)
    throw ArgumentError("shape", "'" + item + "': " + array + " would have " + std::to_string(rows * cols) +
                                     " elements, over " + std::to_string(max_elements));
}

}  // namespace

Suite generate(const std::string& name, std::uint64_t seed) {
  const std::string description = description_of(name);
  Suite s;
  if (name.rfind("convert16-", 0) == 0) s = convert_suite(name, *find_profile(name.substr(10)), true, seed);
  else if (name.rfind("convert-", 0) == 0) s = convert_suite(name, *find_profile(name.substr(8)), false, seed);
  else if (name.rfind("scheme-", 0) == 0) s = scheme_suite(name, name.substr(7), seed);
  else if (name.rfind("contract-", 0) == 0) s = detail::contract_suite(name, name.substr(9), seed, nullptr);
  else s = gemm_suite(name, *gemm::find_procedure(name.substr(5)), seed);
  return finished(std::move(s), name, seed, description);
}

std::vector<GemmShape> parse_gemm_shapes(const std::string& text) {
  std::vector<GemmShape> v;
  if (text.empty()) {
    for (const int m : {64, 129, 256})
      for (const int n : {64, 129, 256})
        for (const int k : {128, 4112}) v.push_back({m, n, k});
    return v;
  }
  for (const std::vector<int>& d : shape_items(text, 3, "MxNxK")) {
    const std::string item = std::to_string(d[0]) + "x" + std::to_string(d[1]) + "x" + std::to_string(d[2]);
    check_elements(d[0], d[2], item, "A");
    check_elements(d[2], d[1], item, "B");
    check_elements(d[0], d[1], item, "C and D");
    v.push_back({d[0], d[1], d[2]});
  }
  return v;
}

std::vector<TensorShape> parse_tensor_shapes(const std::string& text) {
  if (text.empty()) return {{128, 128}, {257, 4096}};
  std::vector<TensorShape> v;
  for (const std::vector<int>& d : shape_items(text, 2, "RxC")) {
    check_elements(d[0], d[1], std::to_string(d[0]) + "x" + std::to_string(d[1]), "the tensor");
    v.push_back({d[0], d[1]});
  }
  return v;
}

Layout parse_layout(const std::string& text) {
  const auto letter = [&](char c) -> std::optional<Storage> { return parse<Storage>(std::string(1, c)); };
  if (text.size() == 2)
    if (const auto a = letter(text[0]), b = letter(text[1]); a && b) return {*a, *b};
  throw ArgumentError("layout", "'" + text +
                                    "' is not one of nn, nt, tn, tt (A's storage, then B's: n row-major, "
                                    "t transposed)");
}

Suite generate(const std::string& name, std::uint64_t seed, const ShapeRequest& request) {
  if (!request.given()) return generate(name, seed);
  const std::string description = description_of(name);
  const bool gemm_kind = name.rfind("gemm-", 0) == 0, scheme_kind = name.rfind("scheme-", 0) == 0;
  const bool contract_kind = name.rfind("contract-", 0) == 0;
  if (!gemm_kind && !scheme_kind && !contract_kind)
    throw ArgumentError(request.shape ? "shape" : "layout",
                        "'" + name + "' is a conversion suite; only gemm-*, scheme-* and contract-* suites take shapes");
  if (!request.shape)
    throw ArgumentError("layout",
                        "applies only to requested shapes (the committed suites store A and B row-major, nn)");
  Suite s;
  json shapes = json::array();
  if (gemm_kind) {
    GemmRequest r{parse_gemm_shapes(*request.shape), {}};
    if (request.layout) r.layout = parse_layout(*request.layout);
    for (const GemmShape& g : r.shapes)
      shapes.push_back(std::to_string(g.m) + "x" + std::to_string(g.n) + "x" + std::to_string(g.k));
    s = gemm_suite(name, *gemm::find_procedure(name.substr(5)), seed, &r);
    s.manifest["layout"] = layout_text(r.layout);
  } else if (contract_kind) {
    // Layer shapes M x N x K (X [M, K], W [N, K], dY [M, N]), each run through every pass.
    if (request.layout)
      throw ArgumentError("layout", "'" + name + "' is a contract suite: its inputs are stored as the layer stores "
                                                 "them (X [M, K], W [N, K], dY [M, N])");
    const std::vector<GemmShape> layer = parse_gemm_shapes(*request.shape);
    for (const GemmShape& g : layer)
      shapes.push_back(std::to_string(g.m) + "x" + std::to_string(g.n) + "x" + std::to_string(g.k));
    s = detail::contract_suite(name, name.substr(9), seed, &layer);
  } else {
    if (request.layout)
      throw ArgumentError("layout", "'" + name + "' is a scheme suite; only gemm-* suites take a layout");
    const std::vector<TensorShape> tensors = parse_tensor_shapes(*request.shape);
    for (const TensorShape& t : tensors) shapes.push_back(std::to_string(t.rows) + "x" + std::to_string(t.cols));
    s = scheme_suite(name, name.substr(7), seed, &tensors);
  }
  s.manifest["shapes"] = shapes;
  return finished(std::move(s), name, seed, description);
}

std::string manifest_text(const Suite& s) {
  json m = s.manifest;
  json files = json::array();
  for (const File& f : s.files) {
    json j = f.meta;
    j["path"] = f.path;
    j["role"] = f.role;
    j["bytes"] = f.bytes.size();
    j["sha256"] = Sha256::of(f.bytes);
    files.push_back(j);
  }
  m["files"] = files;
  return m.dump(1, ' ', true) + "\n";
}

std::string checksum_line(const std::string& manifest) { return Sha256::of(manifest) + "  manifest.json\n"; }

// The suite is built as a new folder and swapped in whole (lowbit/output.hpp); an existing --out must be
// an empty folder.  The one writer's FileError becomes the library's ArgumentError of "out".
void write_suite(const Suite& s, const std::string& dir) {
  try {
    io::FolderOutput out(dir, {});
    for (const File& f : s.files) out.add(f.path, f.bytes);
    const std::string m = manifest_text(s);
    out.add("manifest.json", m);
    out.add("manifest.json.sha256", checksum_line(m));
    out.commit();
  } catch (const io::FileError& e) {
    throw ArgumentError("out", e.what());
  }
}

}  // namespace lowbit::vectors
