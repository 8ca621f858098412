// `lowbit report [--out DIR] [--quick] [--input FILE.npy|FILE.safetensors] [--device-runs DIR] [--json-only]`:
// the accuracy report.
//
// Computes DIR/report.json here (every number deterministic: in-house generators, lowbit/rng.hpp, and
// the library's exact machinery), then runs tools/report/render.py, which draws the figures with
// matplotlib and writes DIR/report.md, DIR/index.html (self-contained: figures embedded as data: URIs)
// and DIR/figures/*.png.  Every file is written to a temporary name and renamed into place.
//
// Sections of report.json (tools/report/README.md describes each field):
//   quantization      every element format x scaling scheme on six synthetic tensors: SQNR, RMSE, max
//                     absolute and relative error, fractions flushed to zero and saturated, and a histogram
//                     of log2 relative errors;
//   input             the same on the tensors of --input;
//   gemm_error_vs_k   GEMM error against the exact reference as K grows, for every accumulation order and
//                     tensor-core model of `lowbit gemm --list-models`, on the fixed experiment of
//                     conformance/gemm/test_exact.cpp (M = N = 64, seed 1, N(0,1) quantized to e4m3);
//   profile_differences  `lowbit profiles --diff` with each profile's output;
//   hardware_runs     the latest runs of tools/device-check found in reports/device/.
// Numbers are rounded to 6 significant digits, so the file is byte-identical from run to run; the only
// run-dependent values (date, seconds) are in "run".
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli_util.hpp"
#include "commands.hpp"
#include "install_paths.hpp"
#include "lowbit/batch.hpp"
#include "lowbit/contract.hpp"
#include "lowbit/convert.hpp"
#include "lowbit/exact.hpp"
#include "lowbit/gemm.hpp"
#include "lowbit/procedure.hpp"
#include "lowbit/io.hpp"
#include "lowbit/profile.hpp"
#include "lowbit/profile_diff.hpp"
#include "lowbit/registry.hpp"
#include "lowbit/scale.hpp"
#include "quantize_common.hpp"
#include "lowbit/rng.hpp"

#ifndef LOWBIT_VERSION
#define LOWBIT_VERSION "0.0.0"
#endif

namespace lowbit::cli {

namespace {

namespace fs = std::filesystem;
namespace S = lowbit::scale;
namespace F = lowbit::formats;
using json = nlohmann::ordered_json;

const char* const section_names[] = {"synthetic", "input", "gemm", "contracts", "profiles", "hardware"};

struct ReportOptions {
  std::string out = "reports/out/accuracy";
  bool quick = false;
  std::vector<std::string> sections;  // empty: all
  std::string input;
  std::string device_runs = "reports/device";
  bool json_only = false;
};

// ---- numbers ------------------------------------------------------------------------------------------

// A finite double rounded to 6 significant digits (the printed decimal read back), so that the JSON text
// does not depend on the last bits of a library function.  Non-finite: null.
json num(double x) {
  if (!std::isfinite(x)) return nullptr;
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return std::strtod(buf, nullptr);
}

// 10 log10(x) through the deterministic logarithm.
double db(double x) { return 10.0 * rng::det_log(x) / 2.30258509299404568402; }

// The value of every code of a format of at most 16 bits, as a double (exact: every such value is one).
std::vector<double> decode_table(const Format& f) {
  const std::size_t n = std::size_t{1} << f.storage_bits();
  std::vector<double> t(n, std::nan(""));
  for (std::size_t c = 0; c < n; ++c)
    if (f.valid_code(c)) t[c] = std::bit_cast<double>(convert(f, c, F::f64, Policy{}).code);
  return t;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// ---- synthetic tensors ------------------------------------------------------------------------------

struct Distribution {
  std::string name;
  std::string description;
  std::uint64_t seed;
  S::Tensor x;
};

constexpr std::uint64_t base_seed = 20261130;

// One tensor of a distribution, rows x cols, from the stream `seed`.
S::Tensor make_tensor(const std::string& name, int rows, int cols, std::uint64_t seed) {
  S::Tensor t{rows, cols, std::vector<float>(static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols))};
  std::uint64_t s = seed;
  auto fill = [&](auto&& draw) {
    for (float& v : t.data) v = static_cast<float>(draw());
  };
  if (name == "gaussian") {
    fill([&] { return rng::normal(s); });
  } else if (name == "laplace") {
    fill([&] { return rng::laplace(s); });
  } else if (name == "student-t3") {
    fill([&] { return rng::student_t3(s); });
  } else if (name == "log-uniform") {
    fill([&] { return rng::log_uniform(s, -24.0, 8.0); });
  } else if (name == "llm-activations") {
    // Tokens x channels: N(0,1), and 6 distinct outlier channels (drawn from the stream) scaled by 100.
    std::vector<bool> outlier(static_cast<std::size_t>(cols), false);
    for (int picked = 0; picked < std::min(6, cols);) {
      const auto c = static_cast<std::size_t>(rng::splitmix(s) % static_cast<std::uint64_t>(cols));
      if (!outlier[c]) {
        outlier[c] = true;
        ++picked;
      }
    }
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) {
        const double v = rng::normal(s) * (outlier[static_cast<std::size_t>(c)] ? 100.0 : 1.0);
        t.data[static_cast<std::size_t>(r) * cols + c] = static_cast<float>(v);
      }
  } else if (name == "weight-like") {
    // Output channels x input channels: row r is N(0, sigma_r^2), sigma_r = 2^u / sqrt(cols), u uniform on
    // [-1, 1) (a fan-in initialisation whose rows drifted apart by up to 2x either way in training).
    const double inv = 1.0 / std::sqrt(static_cast<double>(cols));
    for (int r = 0; r < rows; ++r) {
      const double sigma = rng::det_exp2(2.0 * rng::uniform_open(s) - 1.0) * inv;
      for (int c = 0; c < cols; ++c)
        t.data[static_cast<std::size_t>(r) * cols + c] = static_cast<float>(rng::normal(s) * sigma);
    }
  }
  return t;
}

std::vector<Distribution> distributions(int rows, int cols) {
  const std::vector<std::pair<std::string, std::string>> list = {
      {"gaussian", "N(0, 1)"},
      {"laplace", "Laplace, unit variance"},
      {"student-t3", "Student's t, nu = 3 (heavy tails)"},
      {"log-uniform", "random sign times 2^U(-24, 8): log-uniform over 32 binades"},
      {"llm-activations", "tokens x channels, N(0, 1) with 6 outlier channels x100"},
      {"weight-like", "rows N(0, sigma_r^2), sigma_r = 2^U(-1, 1) / sqrt(cols)"},
  };
  std::vector<Distribution> out;
  std::uint64_t i = 0;
  for (const auto& [name, description] : list) {
    const std::uint64_t seed = base_seed + 1000 * ++i;
    out.push_back({name, description, seed, make_tensor(name, rows, cols, seed)});
  }
  return out;
}

// ---- element format x scaling scheme ------------------------------------------------------------------

struct Config {
  std::string name;    // "scheme/element[/variant]"
  std::string scheme;  // "none" (a plain cast) or a scheme name
  const Format* element;
  std::string description;
  S::Options options;  // for schemes
};

std::vector<Config> configs() {
  std::vector<Config> out;
  auto add = [&](const std::string& scheme, const Format& el, const std::string& variant, const std::string& what,
                 S::Options o) {
    o.element = &el;
    std::string name = scheme + "/" + el.name;
    if (!variant.empty()) name += "/" + variant;
    out.push_back({name, scheme, &el, what, o});
  };
  // Every element format of `lowbit formats` but the unsigned scale formats (e8m0, ue4m3) and f32/f64, and
  // the signed 8-bit P3109 formats of precision 3, 4 and 5: as a plain cast and (at most 8 bits, the
  // schemes' limit) under one scale per tensor.  int8 and int8sm are fixed point (2^-6 steps up to
  // 1.984375), so the plain cast of them is a cast to that grid.
  const Format& p3 = *find_format("binary8p3se");
  const Format& p4 = *find_format("binary8p4se");
  const Format& p5 = *find_format("binary8p5se");
  S::Options none;
  for (const Format* f : {&F::bf16, &F::f16, &F::e4m3, &F::e5m2, &F::e3m4, &F::e2m3, &F::e3m2, &F::e2m1})
    add("none", *f, "", "plain cast (rne, satfinite), no scale", none);
  for (const Format* f : {&F::tf32, &F::e4m3fnuz, &F::e5m2fnuz, &F::e4m3b11fnuz, &F::e4m3ieee, &p3, &p4, &p5, &F::int8,
                          &F::int8sm})
    add("none", *f, "", "plain cast (rne, satfinite), no scale", none);
  S::Options tensor;
  tensor.scheme = S::Scheme::tensor;
  for (const Format* f : {&F::e4m3, &F::e5m2, &F::e4m3fnuz, &F::e5m2fnuz, &F::e3m4, &F::e2m3, &F::e3m2, &F::e2m1})
    add("tensor", *f, "", "one scale per tensor, max_elem / amax (TE current scaling)", tensor);
  for (const Format* f : {&F::e4m3b11fnuz, &F::e4m3ieee, &p3, &p4, &p5, &F::int8, &F::int8sm})
    add("tensor", *f, "", "one scale per tensor, max_elem / amax (TE current scaling)", tensor);
  S::Options delayed;
  delayed.scheme = S::Scheme::delayed;
  add("delayed", F::e4m3, "",
      "TE delayed scaling: the scale comes from the amax history of the previous step (an independent tensor "
      "of the same distribution)",
      delayed);
  S::Options channel;
  channel.scheme = S::Scheme::channel;
  add("channel", F::e4m3, "", "one scale per column", channel);
  S::Options token;
  token.scheme = S::Scheme::token;
  add("token", F::e4m3, "", "one scale per row", token);
  S::Options b1;
  b1.scheme = S::Scheme::block;
  b1.block = 128;
  add("block1x128", F::e4m3, "", "one f32 scale per 1x128 block", b1);
  S::Options b2 = b1;
  b2.block_rows = 128;
  add("block128x128", F::e4m3, "", "one f32 scale per 128x128 block", b2);
  S::Options mx;
  mx.scheme = S::Scheme::mx;
  for (const Format* f : {&F::e4m3, &F::e5m2, &F::e2m3, &F::e3m2, &F::e2m1, &F::int8, &F::int8sm})
    add("mx", *f, "", "OCP MX: e8m0 scale per 32, floor(log2 amax) - emax_elem", mx);
  S::Options mxr = mx;
  mxr.mx_rule = S::MxRule::rceil;
  for (const Format* f : {&F::e4m3, &F::e2m1})
    add("mx", *f, "rceil", "MX with TE/cuBLAS rceil scales (round the scale up)", mxr);
  S::Options nv;
  nv.scheme = S::Scheme::nvfp4;
  add("nvfp4", F::e2m1, "", "NVFP4: e4m3 scale per 1x16 block and an f32 tensor scale", nv);
  S::Options nv2 = nv;
  nv2.scheme = S::Scheme::nvfp4_2d;
  add("nvfp4-2d", F::e2m1, "", "NVFP4 with 16x16 blocks", nv2);
  S::Options nv1 = nv;
  nv1.scheme = S::Scheme::nvfp4_1level;
  add("nvfp4-1level", F::e2m1, "", "NVFP4 without the tensor scale (torchao)", nv1);
  S::Options nv46 = nv;
  nv46.variant = S::Variant::four_over_six;
  add("nvfp4", F::e2m1, "4over6", "NVFP4 4over6: each block maps its amax to 6 or to 4, whichever errs less", nv46);
  return out;
}

// ---- metrics ------------------------------------------------------------------------------------------

constexpr int hist_lo = -24, hist_hi = 2;  // log2 relative-error bins [2^b, 2^(b+1)), b in lo..hi

struct Metrics {
  std::uint64_t n = 0, nonfinite_inputs = 0, nonfinite_outputs = 0, zero_inputs = 0;
  double sum_x2 = 0, sum_e2 = 0, max_abs = 0, max_rel = 0;
  std::uint64_t flushed = 0, saturated = 0, exact = 0;
  std::vector<std::uint64_t> hist = std::vector<std::uint64_t>(hist_hi - hist_lo + 1, 0);
};

// The element format's range at its ends: the largest and most negative finite values and the gaps to
// their neighbours.
struct Range {
  double max = -INFINITY, below_max = -INFINITY, min = INFINITY, above_min = INFINITY;
};
Range range_of(const std::vector<double>& table) {
  Range r;
  for (double v : table) {
    if (!std::isfinite(v)) continue;
    if (v > r.max) {
      r.below_max = r.max;
      r.max = v;
    } else if (v < r.max && v > r.below_max) {
      r.below_max = v;
    }
    if (v < r.min) {
      r.above_min = r.min;
      r.min = v;
    } else if (v > r.min && v < r.above_min) {
      r.above_min = v;
    }
  }
  return r;
}

// Metrics of y (the dequantized values) against x.  el holds each element's code value (y = el * s for
// the element's scale s).  Saturated: the code is the format's largest (most negative) finite value and
// x lies beyond y by more than half the gap below (above) it, times s: clipped, not merely rounded.
Metrics measure(const std::vector<float>& x, const std::vector<double>& y, const std::vector<double>& el,
                const Range& range) {
  Metrics m;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double xi = x[i];
    if (!std::isfinite(xi)) {
      ++m.nonfinite_inputs;
      continue;
    }
    const double yi = y[i];
    if (!std::isfinite(yi)) {
      ++m.nonfinite_outputs;
      continue;
    }
    ++m.n;
    const double e = std::fabs(xi - yi);
    m.sum_x2 += xi * xi;
    m.sum_e2 += e * e;
    m.max_abs = std::max(m.max_abs, e);
    if (el[i] == range.max || el[i] == range.min) {
      const double half_gap =
          el[i] == range.max ? (range.max - range.below_max) / 2 : (range.above_min - range.min) / 2;
      const double s = std::fabs(yi / el[i]);
      if (((el[i] > 0) == (xi > yi)) && e > half_gap * s) ++m.saturated;
    }
    if (xi == 0) {
      ++m.zero_inputs;
      continue;
    }
    if (yi == 0) ++m.flushed;
    const double rel = e / std::fabs(xi);
    m.max_rel = std::max(m.max_rel, rel);
    if (rel == 0) {
      ++m.exact;
      continue;
    }
    int b = 0;
    std::frexp(rel, &b);  // rel = f * 2^b, f in [0.5, 1): floor(log2 rel) = b - 1, exactly
    m.hist[static_cast<std::size_t>(std::clamp(b - 1, hist_lo, hist_hi) - hist_lo)]++;
  }
  return m;
}

json metrics_json(const Metrics& m) {
  json j;
  const double n = static_cast<double>(m.n);
  j["sqnr_db"] = m.sum_e2 > 0 && m.sum_x2 > 0 ? num(db(m.sum_x2 / m.sum_e2)) : json(nullptr);
  j["rmse"] = num(m.n ? std::sqrt(m.sum_e2 / n) : 0.0);
  j["max_abs_error"] = num(m.max_abs);
  j["max_rel_error"] = num(m.max_rel);
  j["flushed_to_zero"] = num(m.n ? static_cast<double>(m.flushed) / n : 0.0);
  j["saturated"] = num(m.n ? static_cast<double>(m.saturated) / n : 0.0);
  j["elements"] = m.n;
  if (m.nonfinite_inputs) j["nonfinite_inputs"] = m.nonfinite_inputs;
  if (m.nonfinite_outputs) j["nonfinite_outputs"] = m.nonfinite_outputs;
  j["rel_error_log2_hist"] = {{"lo", hist_lo}, {"exact", m.exact}, {"zero_inputs", m.zero_inputs}, {"counts", m.hist}};
  return j;
}

struct Tables {
  std::map<const Format*, std::vector<double>> values;
  const std::vector<double>& of(const Format& f) {
    auto it = values.find(&f);
    if (it == values.end()) it = values.emplace(&f, decode_table(f)).first;
    return it->second;
  }
};

// Quantize x under one configuration and measure.  `previous` (delayed scaling) is the tensor of the
// previous step whose amax sets the scale.
Metrics evaluate(const Config& c, const S::Tensor& x, const S::Tensor* previous, Tables& tables) {
  const Format& el = *c.element;
  const std::size_t n = x.data.size();
  std::vector<double> y(n), ev(n);
  if (el.storage_bits() > 16) {
    // tf32 (a plain cast only: scheme elements have at most 8 bits): no decode table; each code decoded
    // on its own, the range from the format's largest finite magnitude (symmetric).
    Policy p;
    p.overflow = Overflow::satfinite;
    Range range;
    range.max = max_value(el);
    range.below_max = magnitude_value(el, el.max_finite_magnitude() - 1);
    range.min = -range.max;
    range.above_min = -range.below_max;
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint64_t code = convert(F::f32, std::bit_cast<std::uint32_t>(x.data[i]), el, p).code;
      y[i] = ev[i] = std::bit_cast<double>(convert(el, code, F::f64, Policy{}).code);
    }
    return measure(x.data, y, ev, range);
  }
  const std::vector<double>& table = tables.of(el);
  const Range range = range_of(table);
  if (c.scheme == "none") {
    Policy p;
    p.overflow = Overflow::satfinite;
    const std::size_t w = batch_code_bytes(el);
    std::vector<std::uint8_t> codes(n * w);
    convert_batch(F::f32, x.data.data(), n, el, p, codes.data(), nullptr, nullptr, nullptr);
    for (std::size_t i = 0; i < n; ++i) {
      std::uint64_t code = codes[i * w];
      if (w == 2) code |= static_cast<std::uint64_t>(codes[i * w + 1]) << 8;
      y[i] = ev[i] = table[code];
    }
  } else {
    S::DelayedState state;
    S::Quantized q;
    if (c.options.scheme == S::Scheme::delayed) {
      S::quantize(*previous, c.options, nullptr, &state);  // records the previous step's amax, sets the scale
      q = S::quantize(x, c.options, nullptr, &state);
    } else {
      q = S::quantize(x, c.options);
    }
    y = S::dequantize(q);
    for (std::size_t i = 0; i < n; ++i) ev[i] = table[q.codes[i]];
  }
  return measure(x.data, y, ev, range);
}

json config_json(const Config& c) {
  return {{"name", c.name}, {"scheme", c.scheme}, {"element", c.element->name}, {"description", c.description}};
}

// ---- GEMM error against K -----------------------------------------------------------------------------
// The fixed experiment of conformance/gemm/test_exact.cpp ("the DeepSeek-V3 experiment"), generated
// exactly as that test does so that the numbers agree with it and with README.md: M = N = 64, for each K a
// fresh splitmix64 stream from seed 1, N(0,1) samples by rng::normal (Marsaglia's polar method with
// lowbit's own logarithm: the same inputs on every platform), A (64 x K) then B (K x 64),
// each quantized per tensor to e4m3: scale = fp32(448 / amax), code = e4m3(rne, satfinite)(fp32(x * scale)).
// The errors are measured on the codes' products (the scales multiply D and D_exact alike).

std::vector<std::uint64_t> quantized_normal(int n, std::uint64_t& seed) {
  std::vector<float> x(static_cast<std::size_t>(n));
  for (float& v : x) v = static_cast<float>(rng::normal(seed));
  float amax = 0;
  for (float v : x) amax = std::max(amax, std::fabs(v));
  const float scale = 448.0f / amax;
  Policy p;
  p.overflow = Overflow::satfinite;
  std::vector<std::uint64_t> codes(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    codes[i] = convert(F::f32, std::bit_cast<std::uint32_t>(x[i] * scale), F::e4m3, p).code;
  return codes;
}

struct GemmErrors {
  bool finite = true;
  double norm = 0, max_rel = 0, median_rel = 0;
};

// norm = ||D - D_exact||_F / ||D_exact||_F; the element-wise relative errors over the outputs with
// |D_exact| >= 0.1 rms(D_exact): their maximum and median (the mean of the two middle ones for an even
// count).  f16 outputs are widened exactly.
GemmErrors gemm_errors(const std::vector<std::uint64_t>& d, bool f16_out, const std::vector<std::uint64_t>& ref) {
  auto value = [&](std::uint64_t code) {
    if (f16_out) return std::bit_cast<double>(convert(F::f16, code, F::f64, Policy{}).code);
    return static_cast<double>(std::bit_cast<float>(static_cast<std::uint32_t>(code)));
  };
  GemmErrors e;
  double num2 = 0, den = 0;
  for (std::size_t i = 0; i < d.size(); ++i) {
    const double r = std::bit_cast<float>(static_cast<std::uint32_t>(ref[i]));
    const double v = value(d[i]);
    if (!std::isfinite(v)) e.finite = false;
    num2 += (v - r) * (v - r);
    den += r * r;
  }
  if (!e.finite) return e;
  const double rms = std::sqrt(den / static_cast<double>(d.size()));
  std::vector<double> rel;
  for (std::size_t i = 0; i < d.size(); ++i) {
    const double r = std::bit_cast<float>(static_cast<std::uint32_t>(ref[i]));
    if (std::fabs(r) >= 0.1 * rms) rel.push_back(std::fabs(value(d[i]) - r) / std::fabs(r));
  }
  std::sort(rel.begin(), rel.end());
  e.norm = std::sqrt(num2 / den);
  e.max_rel = rel.empty() ? 0 : rel.back();
  if (!rel.empty())
    e.median_rel = rel.size() % 2 ? rel[rel.size() / 2] : (rel[rel.size() / 2 - 1] + rel[rel.size() / 2]) / 2;
  return e;
}

struct GemmPlan {
  std::vector<int> ks;
  std::vector<std::string> models;  // every model evaluated at every k of `ks`
  std::vector<int> kept_ks;         // in --quick: k where the models of `kept` run as well
  std::vector<std::string> kept;
};

json gemm_section(bool quick, json& skipped, json& experiment) {
  // Every procedure in `lowbit gemm --list-models` order, and the ones this experiment cannot run, with why.
  std::vector<std::string> all;
  std::map<std::string, std::string> why_not;
  for (const gemm::Procedure& p : gemm::procedures()) {
    all.push_back(p.name);
    if (p.kind == gemm::Kind::exact) why_not[p.name] = "the reference itself (its error is zero by definition)";
    else if (p.model && p.model->scale == gemm::BlockScale::per_16)
      why_not[p.name] = "takes FP4 operands with per-16 block scales; this experiment's operands are e4m3";
    else if (!gemm::takes(p, F::e4m3))
      why_not[p.name] = "takes " + gemm::operand_text(p) + "; this experiment's operands are e4m3";
    else if (p.scales == gemm::ScaleLayout::deepgemm_1d1d)
      why_not[p.name] = "with unit block scales and no C it is hopper-fp8-blockscaled, element for element";
  }
  std::vector<int> ks;
  for (int k = 64; k <= 16384; k *= 2) ks.push_back(k);
  // --quick: the two models the experiment is about, the plain f32 order and the other FP8 tensor cores (the
  // f32 orders are the slow ones to emulate: f32-blocked128 alone takes longer than all of these).
  std::vector<std::string> quick_models = {"f32-sequential", "ada-fp8", "hopper-fp8", "hopper-fp8-promote128",
                                           "blackwell-f8f6f4"};
  const std::vector<int> quick_ks = {64, 256, 1024, 4096, 16384};

  experiment = {{"m", 64},
                {"n", 64},
                {"seed", 1},
                {"inputs",
                 "N(0,1) by Box-Muller over splitmix64, quantized per tensor to e4m3: scale = fp32(448 / "
                 "amax), code = e4m3(rne, satfinite)(fp32(x * scale)); A (64 x K) then B (K x 64) from one "
                 "stream per K"},
                {"reference", "exact: the exact sum of products rounded once to f32"},
                {"norm_rel_error", "||D - D_exact||_F / ||D_exact||_F"},
                {"max_rel_error", "max |d - d_exact| / |d_exact| over outputs with |d_exact| >= 0.1 rms(D_exact)"},
                {"median_rel_error", "median of the same element-wise errors"},
                {"scales",
                 "hopper-fp8-blockscaled: unit f32 block scales; blackwell-mxf8f6f4: unit e8m0 scales "
                 "(0x7f), as the experiment is scaled per tensor"},
                {"k", quick ? quick_ks : ks}};
  if (quick)
    experiment["quick"] =
        "--quick: the models of \"models\" at every k listed; the full report runs every model "
        "at k = 64, 128, ..., 16384";

  const std::vector<int>& run_ks = quick ? quick_ks : ks;
  std::vector<std::string> run_models;
  for (const std::string& m : all) {
    if (why_not.count(m)) continue;
    if (quick && std::find(quick_models.begin(), quick_models.end(), m) == quick_models.end()) continue;
    run_models.push_back(m);
  }
  experiment["models"] = run_models;
  for (const std::string& m : all)
    if (why_not.count(m)) skipped.push_back({{"model", m}, {"why", why_not[m]}});

  json rows = json::array();
  std::map<std::string, std::vector<json>> by_model;
  std::map<std::string, std::pair<std::vector<int>, bool>> overflowed;  // K list, f16 output
  for (int k : run_ks) {
    std::uint64_t seed = 1;
    const gemm::Matrix a{&F::e4m3, 64, k, quantized_normal(64 * k, seed)};
    const gemm::Matrix b{&F::e4m3, k, 64, quantized_normal(k * 64, seed)};
    const std::vector<std::uint64_t> ref = gemm::exact(a, b, nullptr);
    for (const std::string& name : run_models) {
      const gemm::Procedure& p = *gemm::find_procedure(name);
      // Block scales of 1 where the procedure reads scales (the experiment is scaled per tensor).
      gemm::Operands ops{.a = &a, .b = &b};
      gemm::Matrix as, bs;
      if (gemm::needs_block_scales(p)) {
        const gemm::ScaleShape sh = gemm::scale_shape(p, 64, 64, k, nullptr, 0);
        const std::uint64_t unit = convert(F::f32, 0x3F800000u, *sh.format, Policy{}).code;
        as = {sh.format, sh.a_rows, sh.a_cols, std::vector<std::uint64_t>(static_cast<std::size_t>(sh.a_rows) * sh.a_cols, unit)};
        bs = {sh.format, sh.b_rows, sh.b_cols, std::vector<std::uint64_t>(static_cast<std::size_t>(sh.b_rows) * sh.b_cols, unit)};
        ops.a_scales = &as;
        ops.b_scales = &bs;
      }
      const gemm::RunResult r = gemm::run(p, ops);
      const std::vector<std::uint64_t>& d = r.d;
      const bool f16_out = same_format(*r.format, F::f16);
      const GemmErrors e = gemm_errors(d, f16_out, ref);
      if (!e.finite) {
        overflowed[name].first.push_back(k);
        overflowed[name].second = f16_out;
        continue;
      }
      by_model[name].push_back({{"model", name},
                                {"k", k},
                                {"norm_rel_error", num(e.norm)},
                                {"max_rel_error", num(e.max_rel)},
                                {"median_rel_error", num(e.median_rel)}});
    }
  }
  // Models whose outputs overflowed, once each with the K where they did.
  for (const std::string& m : run_models) {
    const auto it = overflowed.find(m);
    if (it == overflowed.end()) continue;
    json entry{{"model", m},
               {"why", std::string("outputs overflow ") + (it->second.second ? "the f16 accumulator" : "f32") +
                           (it->second.second ? " (|D| exceeds 65504: the e4m3 codes reach 448)" : "")}};
    entry["k"] = it->second.first;
    skipped.push_back(entry);
  }
  // Grouped by model (list order), K ascending within each.
  for (const std::string& m : run_models)
    for (json& r : by_model[m]) rows.push_back(std::move(r));
  return rows;
}

// ---- named contracts -----------------------------------------------------------------------------------

// One [rows, cols] operand of a contract in its storage format: f32 values of a report distribution,
// rounded once (rne) into the storage format.
namespace C = lowbit::contract;
C::Array contract_operand(const Format& storage, const std::string& dist, int rows, int cols, std::uint64_t seed) {
  const S::Tensor t = make_tensor(dist, rows, cols, seed);
  C::Array a{&storage, {static_cast<std::uint64_t>(rows), static_cast<std::uint64_t>(cols)}, {}};
  for (float v : t.data) a.codes.push_back(convert(F::f32, std::bit_cast<std::uint32_t>(v), storage, Policy{}).code);
  return a;
}

// Every named contract's fprop, the layer output against the exact layer (the exact sum of the stored
// inputs' products, rounded once to f32), at a few K on two input pairs: which recipe loses what, at which K.
json contract_section(bool quick, json& experiment) {
  const int m = 32, n = 32;
  const std::vector<int> ks = quick ? std::vector<int>{128, 1024} : std::vector<int>{128, 512, 2048, 8192};
  const std::vector<std::array<const char*, 3>> pairs = {{"gaussian", "gaussian", "X and W N(0, 1)"},
                                                         {"llm-activations", "weight-like",
                                                          "X tokens x channels with 6 outlier channels x100, "
                                                          "W rows N(0, sigma_r^2)"}};
  experiment = {{"m", m},
                {"n", n},
                {"k", ks},
                {"pass", "fprop: Y = X W^T, bias zero, every other step as the contract names it"},
                {"inputs", json::array()},
                {"reference", "exact: the exact sum of the stored inputs' products rounded once to f32 (a W stored "
                              "quantized: the bf16 values it was quantized from)"},
                {"norm_rel_error", "||Y - Y_exact||_F / ||Y_exact||_F, Y the contract's output decoded"},
                {"max_rel_error", "max |y - y_exact| / |y_exact| over outputs with |y_exact| >= 0.1 rms(Y_exact)"}};
  for (const auto& p : pairs) experiment["inputs"].push_back({{"name", std::string(p[0]) + "/" + p[1]}, {"what", p[2]}});
  json rows = json::array();
  for (const C::NamedContract& nc : C::named()) {
    const std::optional<C::Contract> c = C::find_named(nc.name);
    if (!c || !c->find(C::Pass::fprop)) continue;
    for (const auto& p : pairs)
      for (int k : ks) {
        const std::uint64_t seed = base_seed + static_cast<std::uint64_t>(k);
        C::Inputs in;
        in.x = contract_operand(c->storage_of(C::Operand::x), p[0], m, k, seed);
        // A W stored already quantized (a serving checkpoint's) is quantized from bf16 values by its storage's
        // scheme; the exact layer multiplies those bf16 values, so the row counts the checkpoint's rounding too.
        const bool w_stored = c->stored_of(C::Operand::w).has_value();
        const C::Array w_values =
            contract_operand(w_stored ? F::bf16 : c->storage_of(C::Operand::w), p[1], n, k, seed + 1);
        if (w_stored) in.stored = C::store(*c, C::Operand::w, w_values);
        else in.w = w_values;
        in.sr_seed = 1;
        for (const C::Step& st : c->find(C::Pass::fprop)->epilogue)
          if (st.kind == C::StepKind::bias) in.bias = C::Array{st.format, {static_cast<std::uint64_t>(n)}, std::vector<std::uint64_t>(static_cast<std::size_t>(n), 0)};
        const C::RunResult r = C::run(*c, C::Pass::fprop, in);
        const auto out = std::find_if(r.stages.begin(), r.stages.end(), [](const C::Stage& s) { return s.name == "output"; });
        if (out == r.stages.end()) continue;
        // The exact layer: X [m, k] times W^T, W^T as the [k, n] B operand.
        gemm::Matrix a{in.x->format, m, k, in.x->codes}, b{w_values.format, k, n, {}};
        b.codes.resize(static_cast<std::size_t>(k) * n);
        for (int j = 0; j < n; ++j)
          for (int i = 0; i < k; ++i) b.codes[static_cast<std::size_t>(i) * n + j] = w_values.codes[static_cast<std::size_t>(j) * k + i];
        const std::vector<std::uint64_t> ref = gemm::exact(a, b, nullptr);
        std::vector<std::uint64_t> y;  // the output decoded exactly into f32 (every output format fits)
        for (std::uint64_t code : out->array.codes) y.push_back(convert(*out->array.format, code, F::f32, Policy{}).code);
        const GemmErrors e = gemm_errors(y, false, ref);
        json row{{"contract", nc.name}, {"inputs", std::string(p[0]) + "/" + p[1]}, {"k", k},
                 {"output_format", out->array.format->name}};
        if (!e.finite) row["overflow"] = true;
        else {
          row["norm_rel_error"] = num(e.norm);
          row["max_rel_error"] = num(e.max_rel);
        }
        rows.push_back(row);
      }
  }
  return rows;
}

// ---- profile differences ------------------------------------------------------------------------------

json profile_section() {
  json out;
  json names = json::array();
  for (const Profile& p : profiles()) names.push_back(p.name);
  out["profiles"] = names;
  out["rows"] = profile_difference_rows(true);
  out["note"] =
      "each profile's default policy for the target; null: the profile has no such conversion without "
      "options; unsupported: the implementation has no defined result";
  return out;
}

// ---- hardware runs -------------------------------------------------------------------------------------
// tools/device-check writes one JSON file per run (schema "lowbit-device-check/1", tools/device_report.py):
// gpu, binaries (exit, seconds), tests (binary, suite, name, result, seconds, failures, properties),
// benchmarks (each benchmark's own JSON), missing.  Read generically: the latest three runs by date.

// A device-check report's fields hold the JSON types device-check writes; another type (a number where the
// date belongs, a test that is not an object) is a damaged report, exit 2 naming the file and the field,
// never an exception in the middle of the report.
void check_device_run_types(const std::string& file, const json& j) {
  auto type_of = [](const json& v) { return std::string(v.type_name()); };
  auto need = [&](const json& obj, const char* key, bool (json::*is)() const noexcept, const char* want,
                  const std::string& where) {
    if (obj.contains(key) && !(obj.at(key).*is)())
      throw InputError("--device-runs: '" + file + "': field \"" + where + key + "\" is a " + type_of(obj.at(key)) +
                       " where " + want + " belongs");
  };
  need(j, "date", &json::is_string, "a string", "");
  need(j, "gpu", &json::is_object, "an object", "");
  need(j, "binaries", &json::is_object, "an object", "");
  need(j, "benchmarks", &json::is_object, "an object", "");
  need(j, "missing", &json::is_array, "an array", "");
  need(j, "tests", &json::is_array, "an array", "");
  if (!j.contains("tests")) return;
  for (const json& t : j.at("tests")) {
    if (!t.is_object())
      throw InputError("--device-runs: '" + file + "': an entry of \"tests\" is a " + type_of(t) +
                       " where an object belongs");
    for (const char* key : {"binary", "suite", "name", "result"})
      need(t, key, &json::is_string, "a string", "tests[].");
    need(t, "failures", &json::is_array, "an array", "tests[].");
  }
}

json hardware_section(const std::string& dir) {
  json runs = json::array();
  std::error_code ec;
  if (dir.empty() || !fs::is_directory(dir, ec)) return runs;
  std::vector<std::pair<std::string, json>> found;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& p : files) {
    json j;
    try {
      j = parse_json(read_all(p.string(), "--device-runs"), "--device-runs: '" + p.string() + "'");
    } catch (const json::exception&) {
      continue;  // not a report of device-check
    }
    if (!j.is_object() || !j.contains("schema") || !j.at("schema").is_string() ||
        j.at("schema").get<std::string>() != "lowbit-device-check/1")
      continue;
    check_device_run_types(p.string(), j);
    found.emplace_back(j.value("date", ""), j);
    found.back().second["file"] = p.filename().string();
  }
  std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  if (found.size() > 3) found.resize(3);
  for (auto& [date, j] : found) {
    json r;
    r["file"] = j["file"];
    r["date"] = date;
    r["gpu"] = j.contains("gpu") && j["gpu"].is_object() ? j["gpu"] : json::object();
    r["binaries"] = j.contains("binaries") ? j["binaries"] : json::object();
    json tests = json::array();
    if (j.contains("tests") && j["tests"].is_array())
      for (const json& t : j["tests"]) {
        if (!t.is_object()) continue;
        json tt;
        for (const char* key : {"binary", "suite", "name", "result", "seconds"})
          if (t.contains(key)) tt[key] = t[key];
        if (t.contains("properties")) tt["properties"] = t["properties"];
        if (t.contains("failures") && t["failures"].is_array() && !t["failures"].empty())
          tt["first_failure"] = t["failures"][0];
        tests.push_back(tt);
      }
    r["tests"] = tests;
    r["benchmarks"] = j.contains("benchmarks") ? j["benchmarks"] : json::object();
    r["missing"] = j.contains("missing") ? j["missing"] : json::array();
    runs.push_back(r);
  }
  return runs;
}

// ---- --input ----------------------------------------------------------------------------------------------

struct InputTensor {
  std::string name;
  std::string dtype;
  std::vector<std::uint64_t> shape;
  std::optional<S::Tensor> x;
  std::string why;  // when x is empty
};

std::optional<std::vector<float>> input_values(const io::Tensor& t) {
  if (t.dtype == io::DType::f64) {
    std::vector<float> v;
    for (double d : t.values<double>()) v.push_back(static_cast<float>(d));  // rne, as numpy's astype
    return v;
  }
  return float_values(t);
}

std::vector<InputTensor> read_input(const std::string& path) {
  auto ends_with = [&](const std::string& s) {
    return path.size() >= s.size() && path.compare(path.size() - s.size(), s.size(), s) == 0;
  };
  std::map<std::string, io::Tensor> tensors;
  try {
    if (ends_with(".npy")) {
      tensors[fs::path(path).stem().string()] = io::read_npy(path);
    } else if (ends_with(".safetensors")) {
      tensors = io::read_safetensors(path).tensors;
    } else {
      throw InputError("--input: '" + path + "' is neither a .npy nor a .safetensors file");
    }
  } catch (const io::FileError& e) { throw InputError(std::string("--input: ") + e.what()); }
  std::vector<InputTensor> out;
  for (const auto& [name, t] : tensors) {
    InputTensor it{name, std::string(io::dtype_name(t.dtype)), t.shape, std::nullopt, ""};
    const auto dims = matrix_dims(t.shape);
    const auto values = input_values(t);
    if (!values) it.why = "holds " + it.dtype + "; the report reads f32, f64, f16 and bf16 tensors";
    else if (!dims || dims->first == 0 || dims->second == 0) it.why = "is empty or too large";
    else it.x = S::Tensor{dims->first, dims->second, *values};
    out.push_back(std::move(it));
  }
  if (out.empty()) throw InputError("--input: '" + path + "' holds no tensor");
  return out;
}

// ---- rendering ------------------------------------------------------------------------------------------

std::string now_utc() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// The renderer: $LOWBIT_REPORT_RENDERER, else the installed one (share/lowbit/report/render.py beside an
// installed binary), else tools/report/render.py of the source tree this binary was built from.
std::string renderer_path() {
  if (const char* env = std::getenv("LOWBIT_REPORT_RENDERER"); env && *env) return env;
  if (const auto installed = installed_file(InstalledDir::data, "report/render.py")) return installed->string();
#ifdef LOWBIT_SOURCE_DIR
  return std::string(LOWBIT_SOURCE_DIR) + "/tools/report/render.py";
#else
  return "tools/report/render.py";
#endif
}

// Run `python3 render.py DIR/report.json` ($LOWBIT_PYTHON picks the interpreter); its exit status.
int run_renderer(const std::string& script, const std::string& report) {
  const char* py = std::getenv("LOWBIT_PYTHON");
  const std::string python = py && *py ? py : "python3";
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    std::vector<std::string> args = {python, script, report};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    std::fprintf(stderr, "lowbit: report: cannot run %s: %s\n", python.c_str(), std::strerror(errno));
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void write_file(const fs::path& path, const std::string& text) { write_all(path.string(), text, "--out"); }

void run_report(const ReportOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  // Check the arguments before any work.
  const fs::path dir(o.out);
  std::error_code ec;
  if (o.out.empty()) throw InputError("--out: empty directory name");
  // The folder is created only when the report is written: a run that stops on a bad input (a damaged
  // --device-runs file, an unreadable --input) leaves no empty folder behind.  Here: it exists and is
  // writable, or the nearest folder above it that exists is.
  if (fs::exists(fs::symlink_status(dir, ec))) {
    if (!fs::is_directory(dir, ec)) throw InputError("--out: '" + o.out + "' is not a directory");
    if (access(dir.c_str(), W_OK) != 0) throw InputError("--out: directory '" + o.out + "' is not writable");
  } else {
    fs::path above = dir.parent_path().empty() ? fs::path(".") : dir.parent_path();
    while (!above.empty() && !fs::exists(fs::symlink_status(above, ec))) above = above.parent_path();
    if (above.empty()) above = ".";
    if (!fs::is_directory(above, ec) || access(above.c_str(), W_OK) != 0)
      throw InputError("--out: cannot create directory '" + o.out + "' ('" + above.string() +
                       "' is not a writable folder)");
  }
  if (!o.device_runs.empty() && o.device_runs != "reports/device" && !fs::is_directory(o.device_runs, ec))
    throw InputError("--device-runs: '" + o.device_runs + "' is not a directory");
  for (const std::string& name : o.sections)
    if (std::find_if(std::begin(section_names), std::end(section_names), [&](const char* n) { return name == n; }) ==
        std::end(section_names))
      throw InputError("--sections: unknown section '" + name + "' (synthetic, input, gemm, contracts, profiles, hardware)");
  auto wanted = [&](const char* name) {
    return o.sections.empty() || std::find(o.sections.begin(), o.sections.end(), name) != o.sections.end();
  };
  if (!o.input.empty() && !wanted("input")) throw InputError("--input: the sections chosen leave out \"input\"");
  std::vector<InputTensor> inputs;
  if (!o.input.empty()) inputs = read_input(o.input);
  const std::string script = renderer_path();
  if (!o.json_only && !fs::is_regular_file(script, ec))
    throw InputError("report: the renderer '" + script +
                     "' is missing (set LOWBIT_REPORT_RENDERER, or pass --json-only to write report.json alone)");

  const int rows = o.quick ? 256 : 1024, cols = o.quick ? 1024 : 4096;
  const bool synthetic = wanted("synthetic");
  if (synthetic) std::cerr << "report: synthetic tensors (" << rows << " x " << cols << ")\n";
  const std::vector<Distribution> dists = synthetic ? distributions(rows, cols) : std::vector<Distribution>{};
  const std::vector<Config> cfgs = configs();

  json report;
  report["schema"] = "lowbit-report/1";
  report["lowbit_version"] = LOWBIT_VERSION;
  report["mode"] = o.quick ? "quick" : "full";
  json sj = json::array();
  for (const char* n : section_names)
    if (wanted(n)) sj.push_back(n);
  report["sections"] = sj;
  report["regenerate"] = o.quick ? "lowbit report --quick --out DIR" : "lowbit report --out reports/accuracy";
  // Where every number comes from, without a date: the tool's version and the generators' seeds.
  report["provenance"] = {
      {"lowbit_version", LOWBIT_VERSION},
      {"synthetic",
       "splitmix64 streams with lowbit's own deterministic log and exp (reference/include/lowbit/rng.hpp): "
       "the same tensors on every platform; distribution i (1, 2, ... in list order) draws from seed " +
           std::to_string(base_seed) + " + 1000 i (\"seed\" of each distribution), delayed scaling's previous "
           "step from that seed + 1"},
      {"synthetic_base_seed", base_seed},
      {"gemm",
       "seed 1, a fresh splitmix64 stream per K; normal samples by the polar method with lowbit's own "
       "logarithm (reference/include/lowbit/rng.hpp), as conformance/gemm/test_exact.cpp draws them"},
      {"gemm_seed", 1},
      {"profile_differences", "lowbit's profile tables, as `lowbit profiles --diff --json` prints them"},
      {"run_dependent", "only \"run\" (date and seconds) differs from run to run"}};
  report["metrics"] = {{"sqnr_db", "10 log10(sum x^2 / sum (x - q)^2), q the dequantized value"},
                       {"rmse", "sqrt(mean (x - q)^2)"},
                       {"max_abs_error", "max |x - q|"},
                       {"max_rel_error", "max |x - q| / |x| over x != 0"},
                       {"flushed_to_zero", "fraction of elements with x != 0 and q = 0"},
                       {"saturated",
                        "fraction of elements clipped: the element code is the format's largest (most negative) finite "
                        "value and x lies beyond q by more than half the gap to the next code (times the scale)"},
                       {"rel_error_log2_hist",
                        "counts[i]: elements with |x - q| / |x| in [2^(lo+i), 2^(lo+i+1)); the first and last "
                        "bins also hold everything beyond them; exact: error 0; zero_inputs: x = 0 (no "
                        "relative error)"},
                       {"numbers", "rounded to 6 significant digits"}};
  report["element_policy"] = "rne, satfinite (every scheme and the plain casts)";

  json dj = json::array();
  for (const Distribution& d : dists) {
    double amax = 0, sum2 = 0;
    for (float v : d.x.data) {
      amax = std::max(amax, static_cast<double>(std::fabs(v)));
      sum2 += static_cast<double>(v) * v;
    }
    dj.push_back({{"name", d.name},
                  {"description", d.description},
                  {"rows", d.x.rows},
                  {"cols", d.x.cols},
                  {"seed", d.seed},
                  {"rms", num(std::sqrt(sum2 / static_cast<double>(d.x.data.size())))},
                  {"amax", num(amax)}});
  }
  report["distributions"] = dj;
  json cj = json::array();
  for (const Config& c : cfgs) cj.push_back(config_json(c));
  report["configs"] = cj;

  // Quantization: distributions on two threads (each its own decode tables); results in list order.
  if (synthetic)
    std::cerr << "report: " << cfgs.size() << " formats x schemes on " << dists.size() << " distributions ("
              << std::round(seconds_since(t0) * 10) / 10 << " s)\n";
  std::vector<std::vector<Metrics>> results(dists.size());
  {
    const unsigned threads = std::max(1u, std::min(2u, std::thread::hardware_concurrency()));
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        Tables tables;
        for (std::size_t i = t; i < dists.size(); i += threads) {
          const S::Tensor previous = make_tensor(dists[i].name, rows, cols, dists[i].seed + 1);
          for (const Config& c : cfgs) results[i].push_back(evaluate(c, dists[i].x, &previous, tables));
        }
      });
    for (std::thread& t : pool) t.join();
  }
  json qj = json::array();
  for (std::size_t i = 0; i < dists.size(); ++i)
    for (std::size_t k = 0; k < cfgs.size(); ++k) {
      json r{{"distribution", dists[i].name},
             {"config", cfgs[k].name},
             {"scheme", cfgs[k].scheme},
             {"element", cfgs[k].element->name}};
      r.update(metrics_json(results[i][k]));
      qj.push_back(r);
    }
  report["quantization"] = qj;

  if (!inputs.empty()) {
    std::cerr << "report: " << inputs.size() << " tensor(s) of " << o.input << "\n";
    json ij;
    ij["file"] = fs::path(o.input).filename().string();
    json tensors = json::array();
    Tables tables;
    for (const InputTensor& t : inputs) {
      json tj{{"name", t.name}, {"dtype", t.dtype}, {"shape", t.shape}};
      if (!t.x) {
        tj["skipped"] = t.why;
        tensors.push_back(tj);
        continue;
      }
      json rs = json::array();
      for (const Config& c : cfgs) {
        if (c.scheme == "delayed") continue;  // no previous step
        json r{{"config", c.name}, {"scheme", c.scheme}, {"element", c.element->name}};
        r.update(metrics_json(evaluate(c, *t.x, nullptr, tables)));
        rs.push_back(r);
      }
      tj["results"] = rs;
      tensors.push_back(tj);
    }
    ij["tensors"] = tensors;
    ij["note"] =
        "every configuration but delayed scaling (it needs a previous step); a tensor of rank > 2 is "
        "read as rows x last dimension";
    report["input"] = ij;
  } else {
    report["input"] = nullptr;
  }

  json skipped = json::array(), experiment = nullptr, gemm_rows = json::array();
  if (wanted("gemm")) {
    std::cerr << "report: GEMM error against K (" << std::round(seconds_since(t0) * 10) / 10 << " s)\n";
    gemm_rows = gemm_section(o.quick, skipped, experiment);
  }
  report["gemm_experiment"] = experiment;
  report["gemm_error_vs_k"] = gemm_rows;
  report["gemm_skipped"] = skipped;
  json contract_experiment = nullptr, contract_rows = json::array();
  if (wanted("contracts")) {
    std::cerr << "report: named contracts (" << std::round(seconds_since(t0) * 10) / 10 << " s)\n";
    contract_rows = contract_section(o.quick, contract_experiment);
  }
  report["contract_experiment"] = contract_experiment;
  report["contract_errors"] = contract_rows;
  report["profile_differences"] = wanted("profiles") ? profile_section() : json(nullptr);
  report["hardware_runs"] = wanted("hardware") ? hardware_section(o.device_runs) : json::array();
  report["run"] = {{"date_utc", now_utc()}, {"seconds", std::round(seconds_since(t0) * 10) / 10}};

  fs::create_directories(dir, ec);
  if (!fs::is_directory(dir, ec)) throw InputError("--out: cannot create directory '" + o.out + "': " + ec.message());
  const fs::path json_path = dir / "report.json";
  write_file(json_path, report.dump(1) + "\n");
  std::cout << "report: " << json_path.string() << "\n";
  if (o.json_only) return;
  std::cout.flush();
  const int rc = run_renderer(script, json_path.string());
  if (rc != 0)
    throw InputError("report: rendering failed (" + script + " exited " + std::to_string(rc) +
                     "); report.json is written, index.html and report.md are not");
  std::cout << "report: " << (dir / "index.html").string() << ", " << (dir / "report.md").string() << " ("
            << std::round(seconds_since(t0) * 10) / 10 << " s)\n";
}

}  // namespace

void add_report(CLI::App& app) {
  auto o = std::make_shared<ReportOptions>();
  auto* sub = app.add_subcommand(
      "report", "Write the accuracy report: report.json, report.md and a self-contained index.html with figures");
  sub->add_option("--out", o->out, "Output directory")->capture_default_str();
  sub->add_flag("--quick", o->quick, "Smaller tensors and fewer GEMM models (CI's quick tier)");
  sub->add_option("--input", o->input, "Also measure every float tensor of FILE.npy or FILE.safetensors");
  sub->add_option("--device-runs", o->device_runs, "Directory of tools/device-check reports (JSON)")
      ->capture_default_str();
  sub->add_flag("--json-only", o->json_only, "Write report.json only (no Python, no matplotlib)");
  sub->add_option("--sections", o->sections,
                  "Only these sections (comma-separated): synthetic, input, gemm, contracts, profiles, hardware (default: all)")
      ->delimiter(',');
  sub->callback([o] { guarded([&] { run_report(*o); }); });
}

}  // namespace lowbit::cli
