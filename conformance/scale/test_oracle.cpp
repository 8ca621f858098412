// The streaming SIMD quantizer (scale::quantize) against the plain definition (scale::quantize_reference),
// bit for bit: codes, scales, the tensor scale, packed scales, block shape and delayed-scaling state.
//
// Every scheme with every value of every option its row takes (element, block shape, scale format, MX rule,
// non-finite rule, amax NaN rule, eps, zero scale, variant, Hadamard) and several element policies
// (stochastic rounding among them), on adversarial tensors (NaN of both signs and signaling, ±Inf, all-zero
// blocks, subnormals, every power of two, ties of the small formats, values at and past the elements'
// maxima, odd shapes and block boundaries from 1x1 to rows of a few thousand columns) and seeded random
// ones, under every Highway target the machine runs (the batch conversion and the block maxima dispatch
// on it).  The full tier (LOWBIT_ORACLE_FULL) runs larger tensors, more seeds and the long rows under
// every option.
#include <gtest/gtest.h>
#include <hwy/highway.h>
#include <hwy/targets.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "../gemm/random_codes.hpp"
#include "lowbit/batch.hpp"
#include "lowbit/format.hpp"
#include "lowbit/names.hpp"
#include "lowbit/registry.hpp"
#include "lowbit/scale.hpp"

#ifndef LOWBIT_ORACLE_FULL
#define LOWBIT_ORACLE_FULL 0
#endif

namespace {

namespace S = lowbit::scale;
namespace F = lowbit::formats;
using lowbit::all;
using lowbit::name;

constexpr bool k_full = LOWBIT_ORACLE_FULL != 0;

float f32(std::uint32_t b) { return std::bit_cast<float>(b); }
std::uint32_t bits(float f) { return std::bit_cast<std::uint32_t>(f); }

// ---- tensors ------------------------------------------------------------------------------------------

struct Rng {
  std::uint64_t state;
  std::uint64_t next() { return lowbit::testing::splitmix(state); }
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
};

// Values on the schemes' edges: zeros, infinities and NaNs (quiet, signaling, negative, with payloads),
// f32 subnormals and the smallest normals, the largest f32, the elements' maxima and the values past them
// (e4m3 448, 464 (the tie to 480), 480; e5m2 57344, 61440; e2m1 6, 5 (a tie), 7; e2m3 7.5, e3m2 28; int8
// 1.984375), ties of the e2m1 / e4m3 grids, and powers of two next to each of them.
std::vector<float> edge_values() {
  std::vector<float> v;
  for (std::uint32_t b : {0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00001u, 0x7F800001u,
                          0xFFA00000u, 0x00000001u, 0x80000001u, 0x007FFFFFu, 0x00800000u, 0x00400000u, 0x80800000u,
                          0x7F7FFFFFu, 0xFF7FFFFFu, 0x7F000000u})
    v.push_back(f32(b));
  for (float x : {448.0f, 464.0f, 480.0f,    57344.0f, 61440.0f, 6.0f, 5.0f, 7.0f,    2.5f,    1.75f, 0.25f,      0.75f,
                  7.5f,   28.0f,  1.984375f, 1.0f,     1.5f,     0.5f, 3.0f, 1536.0f, 2688.0f, 1e-4f, 2.0f / 3.0f})
    for (float s : {1.0f, -1.0f}) v.push_back(s * x);
  return v;
}

float draw(Rng& g, const std::vector<float>& edges) {
  switch (g.below(6)) {
    case 0: return edges[g.below(edges.size())];
    case 1: return f32(static_cast<std::uint32_t>(g.next()));  // any pattern: NaN, Inf, subnormal included
    case 2: {  // k/4 * 2^e: on the small formats' grids, or between two of their points
      const int k = static_cast<int>(g.below(65)) - 32;
      const int e = static_cast<int>(g.below(280)) - 150;
      return std::ldexp(static_cast<float>(k) * 0.25f, e);
    }
    case 3: {  // a power of two, either sign, any f32 exponent
      const int e = static_cast<int>(g.below(277)) - 149;
      return (g.next() & 1 ? -1.0f : 1.0f) * std::ldexp(1.0f, e);
    }
    default: {  // ordinary data: a few binades around 1
      const float m = 1.0f + static_cast<float>(g.next() >> 41) * 0x1p-23f;
      return (g.next() & 1 ? -1.0f : 1.0f) * std::ldexp(m, static_cast<int>(g.below(24)) - 12);
    }
  }
}

struct Case {
  std::string label;
  S::Tensor x;
};

// One tensor of each kind at rows x cols.
std::vector<Case> tensors(int rows, int cols, std::uint64_t seed) {
  Rng g{seed};
  const auto edges = edge_values();
  const auto n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
  std::vector<Case> out;
  auto add = [&](const std::string& kind, auto&& value) {
    S::Tensor t{rows, cols, std::vector<float>(n)};
    for (std::size_t i = 0; i < n; ++i) t.data[i] = value(i);
    out.push_back({kind + " " + std::to_string(rows) + "x" + std::to_string(cols), std::move(t)});
  };
  add("mixed", [&](std::size_t) { return draw(g, edges); });
  add("finite", [&](std::size_t) {
    float v = draw(g, edges);
    while (!std::isfinite(v)) v = draw(g, edges);
    return v;
  });
  // Zero blocks and the odd special: mostly +-0 with a NaN, an infinity or a subnormal here and there.
  add("sparse", [&](std::size_t) {
    const std::size_t k = g.below(40);
    if (k == 0) return f32(0x7FC00000u);
    if (k == 1) return -INFINITY;
    if (k == 2) return f32(static_cast<std::uint32_t>(g.below(0x800000)));  // a subnormal (or +0)
    if (k < 5) return draw(g, edges);
    return k & 1 ? 0.0f : -0.0f;
  });
  // Every power of two in order: the scales at every exponent, under and over the element ranges.
  add("powers", [&](std::size_t i) {
    const int e = static_cast<int>(i % 277) - 149;
    return (i / 277) % 2 ? -std::ldexp(1.0f, e) : std::ldexp(1.0f, e);
  });
  add("random", [&](std::size_t) {
    const float m = 1.0f + static_cast<float>(g.next() >> 41) * 0x1p-23f;
    return (g.next() & 1 ? -1.0f : 1.0f) * std::ldexp(m, static_cast<int>(g.below(40)) - 20);
  });
  return out;
}

// ---- options ------------------------------------------------------------------------------------------

// Every Options value a scheme's row admits along each option (a cartesian product, pruned of what the
// variant rows exclude), with the element policies to run each under.
std::vector<S::Options> option_grid(S::Scheme scheme) {
  const S::SchemeRow& row = S::scheme_row(scheme);
  auto takes = [&](S::Option o) { return row.takes.contains(o); };
  std::vector<const lowbit::Format*> elements(row.elements.begin(), row.elements.end());
  if (elements.empty())
    elements = {&F::e4m3,     &F::e5m2,     &F::e3m4,
                &F::e2m3,     &F::e2m1,     &F::int8,
                &F::e4m3fnuz, &F::e5m2fnuz, lowbit::find_format("binary8p3se")};
  std::vector<std::pair<int, int>> blocks = {{0, 0}};  // (block_rows, block): the defaults
  if (scheme == S::Scheme::block) blocks = {{0, 0}, {0, 4}, {3, 5}, {128, 128}, {2, 1}};
  if (scheme == S::Scheme::mx) blocks = {{0, 0}, {0, 2}, {0, 7}, {0, 1}};
  std::vector<S::Options> out;
  S::Options o;
  o.scheme = scheme;
  for (const lowbit::Format* el : elements)
    for (auto [br, bc] : blocks)
      for (S::ScaleFormat sf : all<S::ScaleFormat>()) {
        if (!row.scale_formats.contains(sf)) continue;
        for (S::MxRule rule : all<S::MxRule>()) {
          if (!takes(S::Option::mx_rule) && rule != S::MxRule::floor) continue;
          for (S::NonFinite nf : all<S::NonFinite>()) {
            if (!takes(S::Option::nonfinite) && nf != S::NonFinite::scale_nan) continue;
            for (bool prop : {false, true})
              for (float eps : {0.0f, 1.0f}) {
                if (eps != 0.0f && (!takes(S::Option::eps) || sf == S::ScaleFormat::ue8m0_packed)) continue;
                for (S::Variant v : all<S::Variant>()) {
                  if (!row.variants.contains(v) || (v != S::Variant::standard && !takes(S::Option::variant))) continue;
                  // The exporters' arithmetic has no eps, pow2 or packed scales, NaN amax or zero-scale choice.
                  if (S::variant_row(v).exporter &&
                      (eps != 0.0f || sf != S::ScaleFormat::f32 || prop))
                    continue;
                  // torchao's to_mx has its own NaN and Inf rule and amax, its four modes, its five elements.
                  if (v == S::Variant::torchao && scheme == S::Scheme::mx &&
                      (nf != S::NonFinite::scale_nan || prop || rule == S::MxRule::rne || el == &lowbit::formats::int8 ||
                       el == &lowbit::formats::int8sm))
                    continue;
                  // gguf-py's MXFP4 is one arithmetic: e2m1, blocks of 32, its own rule, NaN and Inf handling.
                  if (v == S::Variant::gguf && (el != &lowbit::formats::e2m1 || bc != 0 || rule != S::MxRule::floor ||
                                                nf != S::NonFinite::scale_nan || prop))
                    continue;
                  for (S::ZeroScale z : all<S::ZeroScale>()) {
                    if (!takes(S::Option::zero_scale) && z != S::ZeroScale::kernel) continue;
                    if (S::variant_row(v).exporter && z != S::ZeroScale::kernel) continue;
                    // The te-bf16 transform reads bf16 inputs only; test_hadamard.cpp covers it.
                    for (S::Hadamard had : {S::Hadamard::none, S::Hadamard::exact}) {
                      if (had != S::Hadamard::none &&
                          (!takes(S::Option::hadamard) || !S::variant_row(v).takes_hadamard))
                        continue;
                      o.element = el;
                      o.block_rows = br;
                      o.block = bc;
                      o.scale_format = sf;
                      o.mx_rule = rule;
                      o.nonfinite = nf;
                      o.amax_propagates_nan = prop;
                      o.eps = eps;
                      o.variant = v;
                      o.zero_scale = z;
                      o.hadamard = had;
                      out.push_back(o);
                    }
                  }
                }
              }
          }
        }
      }
  return out;
}

// The element policies each combination runs under: the schemes' own (rne, satfinite), stochastic
// rounding with 8 random bits, and two others that reach the other conversion paths (rtz with flushed
// subnormals; rna without saturation and with ml_dtypes' and CUDA's quirks).
std::vector<lowbit::Policy> policies(const S::Options& o) {
  using lowbit::Policy, lowbit::Rounding, lowbit::Overflow, lowbit::Subnormals;
  std::vector<Policy> v = {Policy{.rounding = Rounding::rne, .overflow = Overflow::satfinite}};
  if (o.variant == S::Variant::gguf) return v;  // gguf-py's argmin takes no element policy
  if (S::variant_row(o.variant).takes_stochastic_rounding)
    v.push_back(Policy{.rounding = Rounding::sr_a, .overflow = Overflow::satfinite, .sr_bits = 8});
  v.push_back(Policy{.rounding = Rounding::rtz, .overflow = Overflow::satfinite, .subnormals = Subnormals::ftz_daz});
  Policy q{.rounding = Rounding::rna, .overflow = Overflow::nosat};
  q.quirks.nan_to_no_nan = lowbit::NanToNoNan::flipped_zero;
  q.quirks.nan_style = lowbit::NanStyle::quiet_signed;
  q.quirks.infinity_ignores_saturation = true;
  v.push_back(q);
  return v;
}

std::string describe(const S::Options& o) {
  std::ostringstream s;
  s << name(o.scheme) << " element " << o.element->name << " block " << o.block_rows << "x" << o.block << " "
    << name(o.scale_format) << " " << name(o.mx_rule) << " " << name(o.nonfinite)
    << (o.amax_propagates_nan ? " amax-nan" : "") << " eps " << o.eps << " " << name(o.variant) << " "
    << name(o.zero_scale)
    << (o.hadamard != S::Hadamard::none ? std::string(" hadamard ") + name(o.hadamard) : std::string()) << " rounding "
    << name(o.element_policy.rounding) << " overflow " << name(o.element_policy.overflow) << " subnormals "
    << name(o.element_policy.subnormals);
  return s.str();
}

// ---- the comparison -------------------------------------------------------------------------------------

struct Tally {
  std::size_t runs = 0, elements = 0, mismatches = 0;
};

// The first difference between the two results, or "".
std::string difference(const S::Quantized& a, const S::Quantized& b) {
  auto hex = [](std::uint64_t v) {
    std::ostringstream s;
    s << "0x" << std::hex << v;
    return s.str();
  };
  if (a.rows != b.rows || a.cols != b.cols || a.block_rows != b.block_rows || a.block_cols != b.block_cols)
    return "shape or block shape";
  if (a.element != b.element || a.scale_format != b.scale_format || a.scheme != b.scheme) return "formats";
  if (a.codes.size() != b.codes.size()) return "code count";
  for (std::size_t i = 0; i < a.codes.size(); ++i)
    if (a.codes[i] != b.codes[i])
      return "code " + std::to_string(i) + " (row " + std::to_string(i / a.cols) + ", column " +
             std::to_string(i % a.cols) + "): fast " + hex(a.codes[i]) + ", reference " + hex(b.codes[i]);
  if (a.scales.size() != b.scales.size()) return "scale count";
  for (std::size_t i = 0; i < a.scales.size(); ++i)
    if (a.scales[i] != b.scales[i])
      return "scale " + std::to_string(i) + ": fast " + hex(a.scales[i]) + ", reference " + hex(b.scales[i]);
  if (a.tensor_scale != b.tensor_scale) return "tensor scale";
  if (a.global_scale != b.global_scale) return "global scale";
  if (a.packed_scales != b.packed_scales) return "packed scales";
  return "";
}

// Delayed-scaling states: no history yet (1024 zeros), and short histories of edge values with every
// kind of scale a state file can carry (ordinary, zero, infinite, the largest, subnormal, quiet and
// signaling NaN of either sign), under both algorithms and several margins.
std::vector<S::DelayedState> states(Rng& g) {
  const auto edges = edge_values();
  std::vector<S::DelayedState> v;
  v.push_back({});
  const std::uint32_t scales[] = {0x3F800000u, 0x43600000u, 0x00000000u, 0x7F800000u, 0x7F7FFFFFu,
                                  0x00000003u, 0xFFC00001u, 0x7F800001u, 0x3E000000u};
  for (std::size_t k = 0; k < std::size(scales); ++k) {
    S::DelayedState st;
    st.history.resize(1 + g.below(5));
    for (float& h : st.history) h = draw(g, edges);
    st.scale = f32(scales[k]);
    st.max_algorithm = k % 2 == 0;
    st.margin = static_cast<int>(g.below(7)) - 3;
    v.push_back(st);
  }
  return v;
}

void compare(const S::Tensor& x, const S::Options& o, Rng& g, const std::string& label, Tally& t) {
  std::vector<std::uint32_t> rbits;
  const bool stochastic = lowbit::is_stochastic(o.element_policy.rounding);
  if (stochastic) {
    rbits.resize(x.data.size());
    for (auto& r : rbits) r = static_cast<std::uint32_t>(g.next()) & ((1u << o.element_policy.sr_bits) - 1u);
  }
  const auto* rb = stochastic ? &rbits : nullptr;
  std::vector<S::DelayedState> start = {S::DelayedState{}};
  if (o.scheme == S::Scheme::delayed) start = states(g);
  for (const S::DelayedState& st : start) {
    S::DelayedState fast_state = st, ref_state = st;
    const S::Quantized fast = S::quantize(x, o, rb, &fast_state);
    const S::Quantized ref = S::quantize_reference(x, o, rb, &ref_state);
    ++t.runs;
    t.elements += x.data.size();
    std::string d = difference(fast, ref);
    auto same_state = [&](const S::DelayedState& a) {
      std::vector<std::uint32_t> fh, rh;
      for (float h : a.history) fh.push_back(bits(h));
      for (float h : ref_state.history) rh.push_back(bits(h));
      return fh == rh && bits(a.scale) == bits(ref_state.scale);
    };
    if (d.empty() && o.scheme == S::Scheme::delayed && !same_state(fast_state)) d = "delayed state";
    if (d.empty()) {
      // quantize_into over storage that holds another result: codes of the same count (kept and overwritten
      // in place), scales, packed scales and both tensor-level scales.
      S::DelayedState into_state = st;
      S::Quantized into;
      into.codes.assign(x.data.size(), 0xA5);
      into.scales.assign(3, 0xDEADu);
      into.packed_scales.assign(2, 7u);
      into.tensor_scale = 0x3F800000u;
      into.global_scale = 0x40000000u;
      into.block_rows = 7;
      S::quantize_into(x, o, into, rb, &into_state);
      d = difference(into, ref);
      if (d.empty() && o.scheme == S::Scheme::delayed && !same_state(into_state)) d = "delayed state";
      if (!d.empty()) d = "quantize_into: " + d;
    }
    if (!d.empty()) {
      ++t.mismatches;
      if (t.mismatches <= 10) ADD_FAILURE() << d << "\n  " << describe(o) << "\n  tensor " << label;
    }
  }
}

// Every Highway target the machine runs, each in turn (the batch conversion and block maxima dispatch
// on it); `body` runs under each.
template <class Body>
int for_each_target(Body&& body) {
  int tested = 0;
  for (const std::int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    EXPECT_STREQ(lowbit::batch_target_name(), hwy::TargetName(target));
    body();
    ++tested;
  }
  hwy::SetSupportedTargetsForTest(0);
  return tested;
}

// Small and odd shapes: every block boundary the schemes have (1, 15, 16, 17, 31, 32, 33 columns; 16 and
// 17 rows for the 16x16 blocks).
const std::vector<std::pair<int, int>> k_small_shapes = {{1, 1},  {1, 15},  {2, 16},  {1, 17},
                                                         {3, 33}, {17, 48}, {16, 31}, {5, 64}};

TEST(Oracle, EverySchemeOptionPolicyAndTarget) {
  std::vector<Case> cases;
  std::uint64_t seed = 11;
  for (auto [r, c] : k_small_shapes)
    for (Case& k : tensors(r, c, ++seed)) cases.push_back(std::move(k));
  if (k_full)
    for (auto [r, c] : std::vector<std::pair<int, int>>{{33, 130}, {129, 20}, {7, 300}})
      for (Case& k : tensors(r, c, ++seed)) cases.push_back(std::move(k));
  Tally t;
  const int targets = for_each_target([&] {
    Rng g{7};
    for (S::Scheme s : all<S::Scheme>())
      for (S::Options o : option_grid(s))
        for (const lowbit::Policy& p : policies(o)) {
          o.element_policy = p;
          for (const Case& c : cases) {
            // The sweep is a product; in the quick tier each combination meets a rotating share of the
            // tensors (every tensor is met by every scheme and option value, and every combination by some).
            if (!k_full && g.below(3) != 0) continue;
            compare(c.x, o, g, c.label, t);
          }
        }
  });
  EXPECT_GE(targets, 1);
  RecordProperty("runs", static_cast<int>(t.runs));
  RecordProperty("elements", static_cast<int>(t.elements));
  std::printf("%d targets, %zu runs, %zu elements, %zu mismatches\n", targets, t.runs, t.elements, t.mismatches);
  EXPECT_EQ(t.mismatches, 0u);
  EXPECT_GT(t.runs, 10000u);
}

// Long rows (the chunked and prefetched streaming passes, several pieces of 256 blocks) and tall bands
// (128-row blocks, 16-row NVFP4 blocks with a partial last band), under a spread of each scheme's option
// combinations: eight, evenly spaced through its grid (every combination in the full tier, and a sixteenth
// of them on 40 rows of 4100 columns).
TEST(Oracle, LongRowsAndBands) {
  std::vector<Case> cases;
  for (Case& k : tensors(3, 2500, 101)) cases.push_back(std::move(k));
  for (Case& k : tensors(130, 40, 102)) cases.push_back(std::move(k));
  if (k_full)
    for (Case& k : tensors(40, 4100, 103)) cases.push_back(std::move(k));
  Tally t;
  const int targets = for_each_target([&] {
    Rng g{9};
    for (S::Scheme s : all<S::Scheme>()) {
      const auto grid = option_grid(s);
      for (std::size_t i = 0; i < grid.size(); ++i) {
        S::Options o = grid[i];
        for (const lowbit::Policy& p : policies(o)) {
          o.element_policy = p;
          for (const Case& c : cases) {
            const bool big = c.x.data.size() > 100000;
            const std::size_t stride = std::max<std::size_t>(1, grid.size() / 8);
            if (k_full ? (big && g.below(16) != 0) : i % stride != 0) continue;
            compare(c.x, o, g, c.label, t);
          }
        }
      }
    }
  });
  EXPECT_GE(targets, 1);
  std::printf("%d targets, %zu runs, %zu elements, %zu mismatches\n", targets, t.runs, t.elements, t.mismatches);
  EXPECT_EQ(t.mismatches, 0u);
}

// The fast path's two regimes of size: rows gathered a group at a time (about 128 KiB of input a group, so
// that 36 rows of 1000 columns are two groups of one-row bands, and 16-row bands pair up with a partial last
// group), and codes of 4 MiB or more, written with non-temporal stores (ScaledBatch under
// CodeStores::streaming: a 2048 x 2048 tensor, the smallest that takes them, under each scheme's default
// options and an MX rule of each kind).  The best target only for the large tensor (the reference is slow).
TEST(Oracle, GroupsOfBandsAndStreamedCodes) {
  std::vector<Case> cases = tensors(36, 1000, 104);
  Tally t;
  const int targets = for_each_target([&] {
    Rng g{13};
    for (S::Scheme s : all<S::Scheme>()) {
      const auto grid = option_grid(s);
      const std::size_t stride = std::max<std::size_t>(1, grid.size() / 4);
      for (std::size_t i = 0; i < grid.size(); i += stride) {
        S::Options o = grid[i];
        for (const Case& c : cases) compare(c.x, o, g, c.label, t);
      }
    }
  });
  EXPECT_GE(targets, 1);
  Rng g{17};
  const auto big = tensors(2048, 2048, 105);
  std::vector<S::Request> requests;
  for (S::Scheme s : {S::Scheme::tensor, S::Scheme::channel, S::Scheme::token, S::Scheme::block, S::Scheme::mx,
                      S::Scheme::nvfp4, S::Scheme::nvfp4_2d}) {
    S::Request r;
    r.scheme = s;
    requests.push_back(r);
  }
  requests[3].block_rows = 128;  // 128 x 128 blocks
  requests[4].mx_rule = S::MxRule::floor;
  S::Request rceil = requests[4];
  rceil.mx_rule = S::MxRule::rceil;
  requests.push_back(rceil);
  for (const S::Request& r : requests) {
    S::Options o;
    const auto refused = S::resolve(r, o);
    ASSERT_FALSE(refused.has_value()) << name(r.scheme);
    compare(big[0].x, o, g, big[0].label, t);  // mixed: NaN, Inf and subnormals in every MX row's reach
    if (r.scheme == S::Scheme::mx || r.scheme == S::Scheme::token) compare(big[4].x, o, g, big[4].label, t);
  }
  std::printf("%d targets, %zu runs, %zu elements, %zu mismatches\n", targets, t.runs, t.elements, t.mismatches);
  EXPECT_EQ(t.mismatches, 0u);
}

// Rows as the one pass over rows meets them (ScaledBatch::run_blocks, which the token, one-row block, MX and NVFP4
// schemes take where a block is a whole number of vectors): row r is ordinary data a few binades around 2^(r % 21 -
// 10), with zeros here and there, or, for r % 8 = k > 0, such data with one thing the pass leaves to the general way or
// tests on the edge: 1 a NaN, 2 an infinity, 3 an f32 subnormal, 4 an all-zero first block of `block`, 5 an all-zero
// row, 6 values near the top of f32, 7 values near the bottom of its normal range.
S::Tensor row_kinds(int rows, int cols, int block, std::uint64_t seed) {
  Rng g{seed};
  S::Tensor t{rows, cols, std::vector<float>(static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols))};
  for (int r = 0; r < rows; ++r) {
    const int kind = r % 8;
    float* v = &t.data[static_cast<std::size_t>(r) * static_cast<std::size_t>(cols)];
    const int centre = kind == 6 ? 120 : kind == 7 ? -115 : r % 21 - 10;
    for (int c = 0; c < cols; ++c) {
      const float m = 1.0f + static_cast<float>(g.next() >> 41) * 0x1p-23f;
      v[c] = g.below(17) == 0
                 ? 0.0f
                 : (g.next() & 1 ? -1.0f : 1.0f) * std::ldexp(m, centre + static_cast<int>(g.below(9)) - 4);
    }
    const std::size_t at = g.below(static_cast<std::size_t>(cols));
    if (kind == 1) v[at] = f32(g.next() & 1 ? 0x7FC00000u : 0xFF800001u);
    if (kind == 2) v[at] = g.next() & 1 ? INFINITY : -INFINITY;
    if (kind == 3) v[at] = f32(0x00000100u);
    if (kind == 4) std::fill(v, v + std::min(block, cols), -0.0f);
    if (kind == 5) std::fill(v, v + cols, 0.0f);
  }
  return t;
}

// The one pass over rows and the rows it leaves to the general way, side by side in one tensor: the token scheme,
// one-row blocks of 16, 32 and 128 columns, MX blocks of 16, 32 and 64 under every rule, and NVFP4 under every
// variant, with every element, scale format, eps, amax NaN rule and non-finite rule they take, on 40 rows of 512
// columns and (every eighth combination) 300 rows of 1024, which the pass takes in two runs of rows; every target.
TEST(Oracle, OnePassRowsAndTheRowsItLeaves) {
  std::vector<S::Options> grid;
  const std::vector<const lowbit::Format*> elements = {&F::e4m3, &F::e5m2, &F::e2m1,    &F::e2m3,
                                                       &F::e3m2, &F::int8, &F::e4m3fnuz};
  for (const lowbit::Format* el : elements)
    for (S::Scheme s : {S::Scheme::token, S::Scheme::block, S::Scheme::mx, S::Scheme::nvfp4})
      for (int bc : s == S::Scheme::block ? std::vector<int>{16, 32, 128}
                    : s == S::Scheme::mx  ? std::vector<int>{16, 32, 64}
                                          : std::vector<int>{0})
        for (S::ScaleFormat sf : all<S::ScaleFormat>())
          for (S::MxRule rule : all<S::MxRule>())
            for (S::NonFinite nf : all<S::NonFinite>())
              for (S::AmaxNan an : all<S::AmaxNan>())
                for (float eps : {0.0f, 1.0f})
                  for (S::Variant v : all<S::Variant>()) {
                    S::Request q;
                    q.scheme = s;
                    q.element = el;
                    if (s == S::Scheme::nvfp4) q.variant = v;
                    else if (v != S::Variant::standard) continue;
                    if (bc != 0) q.block = bc;
                    if (s == S::Scheme::block) q.block_rows = 1;
                    if (s == S::Scheme::mx) {
                      q.mx_rule = rule;
                      q.nonfinite = nf;
                    } else if (rule != S::MxRule::floor || nf != S::NonFinite::scale_nan) {
                      continue;
                    }
                    if (s == S::Scheme::token || s == S::Scheme::block) {
                      q.scale_format = sf;
                      q.eps = eps;
                    } else if (sf != S::ScaleFormat::f32 || eps != 0.0f) {
                      continue;
                    }
                    q.amax_nan = an;
                    S::Options o;
                    if (!S::resolve(q, o).has_value()) grid.push_back(o);
                  }
  ASSERT_GT(grid.size(), 200u);
  Tally t;
  const int targets = for_each_target([&] {
    Rng g{19};
    for (std::size_t i = 0; i < grid.size(); ++i) {
      const S::Options& o = grid[i];
      const S::Tensor small = row_kinds(40, 512, o.block, 1000 + i);
      compare(small, o, g, "row kinds 40x512", t);
      if (i % 8 == 0) compare(row_kinds(300, 1024, o.block, 2000 + i), o, g, "row kinds 300x1024", t);
    }
  });
  EXPECT_GE(targets, 1);
  std::printf("%d targets, %zu runs, %zu elements, %zu mismatches\n", targets, t.runs, t.elements, t.mismatches);
  EXPECT_EQ(t.mismatches, 0u);
}

// The reference is not the fast path under another name: a hand-derived case per family, so that the
// sweep above compares two computations each of which is right on its own.
TEST(Oracle, ReferenceAgreesWithHandDerivedCases) {
  // Per tensor, e4m3: amax 2, s = fp32(448 / 2) = 224, decode scale fp32(1 / 224) = 0x3B924925; the
  // elements 1 * 224 = 224 (e4m3 0x76: 2^7 * 1.75) and -2 * 224 = -448 (0xFE).
  S::Options t;
  const S::Quantized qt = S::quantize_reference({1, 2, {1.0f, -2.0f}}, t);
  EXPECT_EQ(qt.scales, (std::vector<std::uint64_t>{0x3B924925u}));
  EXPECT_EQ(qt.codes, (std::vector<std::uint8_t>{0x76, 0xFE}));
  // MX e4m3 floor: amax 485 has floor(log2) = 8 = emax, scale 2^0 (code 127); 400 / 1 is a tie between
  // 384 and 416 that rne breaks to 384 (0x7C); 485 saturates to 448 (0x7E).
  S::Options m;
  m.scheme = S::Scheme::mx;
  m.block = 2;
  const S::Quantized qm = S::quantize_reference({1, 2, {485.0f, 400.0f}}, m);
  EXPECT_EQ(qm.scales, (std::vector<std::uint64_t>{127}));
  EXPECT_EQ(qm.codes, (std::vector<std::uint8_t>{0x7E, 0x7C}));
  // NVFP4, all ones: S_enc = 2688 / 1, S_dec = fp32(1 / 2688) = 0x39C30C31; block dec = 2688 / 6 = 448
  // (e4m3 0x7E); multiplier fminf(1 / (448 * S_dec), FLT_MAX) = 6 (1 / fp32(448 / 2688) rounds back to 6):
  // each element 6, e2m1 0x7.
  S::Options n;
  n.scheme = S::Scheme::nvfp4;
  const S::Quantized qn = S::quantize_reference({1, 16, std::vector<float>(16, 1.0f)}, n);
  EXPECT_EQ(qn.tensor_scale, 0x39C30C31u);
  EXPECT_EQ(qn.scales, (std::vector<std::uint64_t>{0x7E}));
  EXPECT_EQ(qn.codes, std::vector<std::uint8_t>(16, 0x7));
  // Single-level NVFP4: amax 3 gives fp32(3 / 6) = 0.5 (e4m3 0x30); 3 / 0.5 = 6 (0x7), 1 / 0.5 = 2 (0x4).
  S::Options one;
  one.scheme = S::Scheme::nvfp4_1level;
  const S::Quantized q1 = S::quantize_reference({1, 2, {3.0f, -1.0f}}, one);
  EXPECT_EQ(q1.scales, (std::vector<std::uint64_t>{0x30}));
  EXPECT_EQ(q1.codes, (std::vector<std::uint8_t>{0x7, 0xC}));
  // Delayed: the codes take the state's scale 2 (1 * 2 = 2: e4m3 0x40); the amax 1 enters slot 0, the new
  // scale is 448 / 1, and the history rolls: [0, 0.5] -> slot 0 = max(0, 1) = 1 -> rolled [0, 1].
  S::Options d;
  d.scheme = S::Scheme::delayed;
  S::DelayedState st{{0.0f, 0.5f}, 2.0f, true, 0};
  const S::Quantized qd = S::quantize_reference({1, 1, {1.0f}}, d, nullptr, &st);
  EXPECT_EQ(qd.codes, (std::vector<std::uint8_t>{0x40}));
  EXPECT_EQ(st.scale, 448.0f);
  EXPECT_EQ(st.history, (std::vector<float>{0.0f, 1.0f}));
}

}  // namespace
