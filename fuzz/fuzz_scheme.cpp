// Scaling schemes (lowbit/scale.hpp) on random small tensors (NaN, Inf, subnormals, zeros, values on and
// between the element grid) with random scheme parameters.  Checked:
//  * the shape of the result: one valid element code per input, one valid scale code per block;
//  * quantize is a function: a second call gives the same bits;
//  * dequantize(quantize(x)) is within the element's rounding bound of x: for a tensor of finite values
//    and a finite nonzero decode scale s, |deq - clamp(x, ±max·s)| is at most the gap of the element grid
//    around x/s (times s) plus a few f32 roundings of the multiplier (2^-20 relative; 2^-7 for the
//    fast-math variant, whose multiplier is a bf16);
//  * block-local schemes (1-D block, MX): quantizing one block on its own gives the codes and the scale
//    that block got inside the whole tensor (a short row takes the vector kernels' tail and scalar paths,
//    a long one the vector body);
//  * the streaming quantizer equals the plain definition (quantize_reference): codes, scales, tensor
//    scale, packed scales and the delayed-scaling state, bit for bit.
#include <cfloat>
#include <cmath>
#include <cstring>

#include "fuzz_support.hpp"
#include "lowbit/convert.hpp"
#include "lowbit/scale.hpp"

using namespace lowbit;
namespace S = lowbit::scale;

namespace {

float f32_of(std::uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

std::uint32_t bits_of_f32(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

float draw_value(FuzzedDataProvider& in, const std::vector<float>& so_far) {
  static const std::uint32_t specials[] = {
      0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00001u, 0x7F800001u,  // zeros, inf, NaN
      0x00000001u, 0x80000001u, 0x007FFFFFu, 0x00800000u, 0x00400000u,                            // subnormals
      0x7F7FFFFFu, 0xFF7FFFFFu, 0x43E00000u, 0x43F00000u, 0x40C00000u, 0x40A00000u,                // max, 448, 480, 6, 5
      0x3F800000u, 0xBF800000u, 0x47600000u, 0x3E800000u, 0x3A800000u, 0x38800000u, 0x2F000000u,  // 1, 57344, ...
  };
  switch (in.ConsumeIntegralInRange<int>(0, 4)) {
    case 0: return f32_of(in.ConsumeIntegral<std::uint32_t>());
    case 1: return f32_of(specials[in.ConsumeIntegralInRange<std::size_t>(0, std::size(specials) - 1)]);
    case 2: {  // k/2 * 2^e: on the grid of small formats, or halfway between two of its points
      const int k = in.ConsumeIntegralInRange<int>(-32, 32);
      const int e = in.ConsumeIntegralInRange<int>(-140, 127);
      return std::ldexp(static_cast<float>(k) * 0.5f, e);
    }
    case 3:
      if (!so_far.empty()) {
        const float v = so_far[in.ConsumeIntegralInRange<std::size_t>(0, so_far.size() - 1)];
        return std::ldexp(in.ConsumeBool() ? -v : v, in.ConsumeIntegralInRange<int>(-3, 3));
      }
      return 0.0f;
    default: return static_cast<float>(in.ConsumeIntegralInRange<int>(-8, 8));
  }
}

// The gap of `f`'s grid around the finite value v >= 0 (0 when v is a point of the grid), as a double.
double grid_gap(const Format& f, double v) {
  if (!(v >= 0) || std::isinf(v)) return 0;
  std::uint64_t bits;
  std::memcpy(&bits, &v, 8);
  Policy dn{.rounding = Rounding::rtz, .overflow = Overflow::satfinite};
  Policy up{.rounding = Rounding::rup, .overflow = Overflow::satfinite};
  const std::uint64_t lo = convert(formats::f64, bits, f, dn).code, hi = convert(formats::f64, bits, f, up).code;
  const Unpacked a = unpack(f, lo), b = unpack(f, hi);
  auto val = [](const Unpacked& u) {
    if (u.cls != ValueClass::finite) return 0.0;
    return std::ldexp(static_cast<double>(u.significand), u.exponent) * (u.negative ? -1 : 1);
  };
  return std::fabs(val(b) - val(a));
}

double code_value(const Format& f, std::uint64_t code) {
  const Unpacked u = unpack(f, code);
  if (u.cls == ValueClass::nan) return std::nan("");
  if (u.cls == ValueClass::inf) return u.negative ? -INFINITY : INFINITY;
  if (u.cls == ValueClass::zero) return u.negative ? -0.0 : 0.0;
  return std::ldexp(static_cast<double>(u.significand), u.exponent) * (u.negative ? -1 : 1);
}

std::string where(const S::Options& o, int rows, int cols) {
  return std::string("scheme ") + name(o.scheme) + " element " + o.element->name + " block " + std::to_string(o.block) +
         "x" + std::to_string(o.block_rows) + " scale_format " + name(o.scale_format) + " mx_rule " + name(o.mx_rule) +
         " nonfinite " + name(o.nonfinite) + " amax_nan " + std::to_string(o.amax_propagates_nan) + " eps " +
         std::to_string(o.eps) + " zero_scale " + name(o.zero_scale) + " variant " + name(o.variant) + " hadamard " +
         name(o.hadamard) + " policy " + fuzz::policy_text(o.element_policy) + " tensor " +
         std::to_string(rows) + "x" + std::to_string(cols);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  S::Options o;
  o.scheme = fuzz::draw<S::Scheme>(in);
  static const char* const elements[] = {"", "e4m3", "e5m2", "e2m3", "e3m2", "e2m1", "int8", "int8sm",
                                         "e4m3fnuz", "e5m2fnuz", "e3m4", "e8m0", "binary8p3se", "e2m5u", "bf16"};
  const char* el = elements[in.ConsumeIntegralInRange<std::size_t>(0, std::size(elements) - 1)];
  o.element = *el ? find_format(el) : nullptr;
  static const int blocks[] = {0, 0, 1, 2, 3, 4, 7, 8, 16, 32, 33, 128};
  o.block = blocks[in.ConsumeIntegralInRange<std::size_t>(0, std::size(blocks) - 1)];
  static const int block_rows[] = {0, 0, 1, 2, 3, 16, 128};
  o.block_rows = block_rows[in.ConsumeIntegralInRange<std::size_t>(0, std::size(block_rows) - 1)];
  o.scale_format = fuzz::draw<S::ScaleFormat>(in);
  o.mx_rule = fuzz::draw<S::MxRule>(in);
  o.nonfinite = fuzz::draw<S::NonFinite>(in);
  o.amax_propagates_nan = in.ConsumeBool();
  static const float eps[] = {0.0f, 0.0f, 1e-4f, 1e-30f, 1.0f, 1e30f};
  o.eps = eps[in.ConsumeIntegralInRange<std::size_t>(0, std::size(eps) - 1)];
  o.zero_scale = fuzz::draw<S::ZeroScale>(in);
  o.variant = fuzz::draw<S::Variant>(in);
  // The exact-sum transform (te-bf16 takes bf16 inputs only: test_hadamard.cpp holds it).
  o.hadamard = in.ConsumeIntegralInRange<int>(0, 3) == 0 ? S::Hadamard::exact : S::Hadamard::none;
  // Mostly only the options the scheme's row takes (the rest back at their defaults), so that most inputs
  // quantize; now and then all of them, which normalize() must refuse with a message.
  if (in.ConsumeIntegralInRange<int>(0, 7) != 0) {
    const S::SchemeRow& row = S::scheme_row(o.scheme);
    const S::Options d;
    auto takes = [&](S::Option opt) { return row.takes.contains(opt); };
    if (!takes(S::Option::block)) o.block = d.block, o.block_rows = d.block_rows;
    if (!takes(S::Option::scale_format)) o.scale_format = d.scale_format;
    if (!takes(S::Option::mx_rule)) o.mx_rule = d.mx_rule;
    if (!takes(S::Option::nonfinite)) o.nonfinite = d.nonfinite;
    if (!takes(S::Option::eps)) o.eps = d.eps;
    if (!takes(S::Option::zero_scale)) o.zero_scale = d.zero_scale;
    if (!takes(S::Option::variant)) o.variant = d.variant;
    if (!takes(S::Option::hadamard)) o.hadamard = d.hadamard;
  }
  // The element policy: usually the schemes' own (rne, satfinite), sometimes anything.
  if (in.ConsumeIntegralInRange<int>(0, 3) == 0) {
    o.element_policy = fuzz::draw_policy(in);
  } else if (in.ConsumeBool()) {
    o.element_policy.rounding = fuzz::draw<Rounding>(in);
    if (is_stochastic(o.element_policy.rounding)) o.element_policy.sr_bits = in.ConsumeIntegralInRange<int>(1, 32);
  }
  const int rows = in.ConsumeIntegralInRange<int>(1, 20);
  const int cols = in.ConsumeIntegralInRange<int>(1, 70);
  S::Tensor x{rows, cols, {}};
  for (int i = 0; i < rows * cols; ++i) x.data.push_back(draw_value(in, x.data));
  std::vector<std::uint32_t> rbits(x.data.size());
  for (auto& r : rbits) r = fuzz::draw_rbits(in, o.element_policy);
  S::DelayedState state;
  if (o.scheme == S::Scheme::delayed) {
    state.history.resize(in.ConsumeIntegralInRange<std::size_t>(0, 4));
    for (float& h : state.history) h = draw_value(in, x.data);
    state.scale = draw_value(in, x.data);
    state.max_algorithm = in.ConsumeBool();
    state.margin = in.ConsumeIntegralInRange<int>(-300, 300);
  }

  S::Options norm = o;
  if (!S::normalize(norm).empty()) return 0;  // rejected with a message: nothing more to check
  const Format& elem = *norm.element;
  const bool stochastic = is_stochastic(o.element_policy.rounding);
  const std::vector<std::uint32_t>* rb = stochastic ? &rbits : nullptr;
  S::DelayedState state2 = state, state_ref = state;
  const S::Quantized q = S::quantize(x, o, rb, &state);
  const std::string w = where(norm, rows, cols);

  // Shape and codes.
  if (q.rows != rows || q.cols != cols || q.codes.size() != x.data.size() || q.element != &elem || !q.scale_format)
    fuzz::fail("result shape: " + w);
  for (std::size_t i = 0; i < q.codes.size(); ++i)
    if (!elem.valid_code(q.codes[i])) fuzz::fail("invalid element code " + fuzz::hex(q.codes[i]) + ": " + w);
  if (q.block_rows < 1 || q.block_cols < 1 ||
      q.scales.size() != static_cast<std::size_t>(q.scale_rows()) * static_cast<std::size_t>(q.scale_cols()))
    fuzz::fail("scale count " + std::to_string(q.scales.size()) + " for blocks " + std::to_string(q.block_rows) + "x" +
               std::to_string(q.block_cols) + ": " + w);
  for (std::uint64_t s : q.scales)
    if (!q.scale_format->valid_code(s)) fuzz::fail("invalid scale code " + fuzz::hex(s) + ": " + w);

  // Determinism.
  {
    const S::Quantized again = S::quantize(x, o, rb, &state2);
    if (again.codes != q.codes || again.scales != q.scales || again.tensor_scale != q.tensor_scale ||
        again.packed_scales != q.packed_scales)
      fuzz::fail("two calls differ: " + w);
  }

  // The fast path against the definition.
  {
    const S::Quantized ref = S::quantize_reference(x, o, rb, &state_ref);
    if (ref.codes != q.codes) {
      std::size_t i = 0;
      while (ref.codes[i] == q.codes[i]) ++i;
      fuzz::fail("quantize and quantize_reference differ at code " + std::to_string(i) + ": " + fuzz::hex(q.codes[i]) +
                 " and " + fuzz::hex(ref.codes[i]) + ": " + w);
    }
    if (ref.scales != q.scales || ref.tensor_scale != q.tensor_scale || ref.packed_scales != q.packed_scales ||
        ref.block_rows != q.block_rows || ref.block_cols != q.block_cols || ref.scale_format != q.scale_format)
      fuzz::fail("quantize and quantize_reference differ in their scales: " + w);
    auto same_bits = [](float a, float b) { return bits_of_f32(a) == bits_of_f32(b); };
    bool same_state = same_bits(state.scale, state_ref.scale) && state.history.size() == state_ref.history.size();
    for (std::size_t i = 0; same_state && i < state.history.size(); ++i)
      same_state = same_bits(state.history[i], state_ref.history[i]);
    if (!same_state) fuzz::fail("quantize and quantize_reference leave different delayed states: " + w);
  }

  // The rounding bound.
  bool all_finite = true;
  for (float v : x.data) all_finite &= std::isfinite(v);
  const Policy& p = norm.element_policy;
  // Not for the exporters' variants (compressed-tensors, ModelOpt): their elements divide by an f32 quotient of
  // the scales (x / (scale / global)), not by the decode scale the file stores, so their codes are held against
  // those exporters' own checkpoints (conformance/checkpoint), not against this bound.
  const bool bound_applies = all_finite && norm.hadamard == S::Hadamard::none && p.overflow == Overflow::satfinite &&
                             p.subnormals == Subnormals::keep && elem.has_zero && elem.is_signed() &&
                             !S::variant_row(norm.variant).exporter;
  if (bound_applies) {
    const std::vector<double> deq = S::dequantize(q);
    const double emax = code_value(elem, elem.encode(false, elem.max_finite_magnitude()));
    const double rel = norm.variant == S::Variant::fast_math ? 0x1p-7 : 0x1p-20;
    const double ts = q.tensor_scale ? static_cast<double>(f32_of(*q.tensor_scale)) : 1.0;
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) {
        const std::size_t i = static_cast<std::size_t>(r) * cols + c;
        const std::size_t si = static_cast<std::size_t>(r / q.block_rows) * q.scale_cols() + c / q.block_cols;
        const double s = code_value(*q.scale_format, q.scales[si]) * ts;
        // Scales far below the f32 range meet the kernels' FLT_MAX caps on the multiplier; not a rounding bound.
        if (!std::isfinite(s) || !(s > 0) || s * emax < 0x1p-100) continue;
        const double xv = x.data[i];
        // The scheme's fp32 step x * (1 / s) can overflow to infinity (x near FLT_MAX, a small decode scale,
        // as TE's kernels compute it); satfinite then clamps that infinity unless the policy lets infinities
        // through (Quirks::infinity_ignores_saturation, ml_dtypes' rule: infinity, or NaN in a format without
        // infinities such as e4m3), which is no rounding error.
        if (p.quirks.infinity_ignores_saturation && !std::isfinite(deq[i]) && std::fabs(xv) / s > 0x1.ffffp127) continue;
        const double clamped = std::fmax(-emax * s, std::fmin(emax * s, xv));
        const double y = std::fabs(clamped) / s;
        const double gap = std::fmax(grid_gap(elem, y * (1 - 0x1p-20)), grid_gap(elem, std::fmin(y * (1 + 0x1p-20), emax)));
        const double tol = gap * s + std::fabs(xv) * rel;
        if (!(std::fabs(deq[i] - clamped) <= tol))
          fuzz::fail("dequantize(quantize(x)) at (" + std::to_string(r) + ", " + std::to_string(c) + "): x " +
                     std::to_string(xv) + " (" + fuzz::hex(bits_of_f32(x.data[i])) + ") code " +
                     fuzz::hex(q.codes[i]) + " scale " + fuzz::hex(q.scales[si]) + " gives " + std::to_string(deq[i]) +
                     ", bound " + std::to_string(tol) + ": " + w);
      }
  }

  // Block-local schemes: one block on its own gives what it got inside the tensor.
  const bool local = (norm.scheme == S::Scheme::block && q.block_rows == 1) || norm.scheme == S::Scheme::mx;
  if (local && norm.hadamard == S::Hadamard::none) {
    const int r = in.ConsumeIntegralInRange<int>(0, rows - 1);
    const int blk = in.ConsumeIntegralInRange<int>(0, q.scale_cols() - 1);
    const int c0 = blk * q.block_cols, c1 = std::min(cols, c0 + q.block_cols);
    S::Tensor one{1, c1 - c0, {}};
    std::vector<std::uint32_t> rb1;
    for (int c = c0; c < c1; ++c) {
      one.data.push_back(x.data[static_cast<std::size_t>(r) * cols + c]);
      rb1.push_back(rbits[static_cast<std::size_t>(r) * cols + c]);
    }
    const S::Quantized q1 = S::quantize(one, o, stochastic ? &rb1 : nullptr);
    const std::size_t si = static_cast<std::size_t>(r) * q.scale_cols() + blk;
    if (q1.scales.size() != 1 || q1.scales[0] != q.scales[si])
      fuzz::fail("block (" + std::to_string(r) + ", " + std::to_string(blk) + ") alone: scale " +
                 (q1.scales.empty() ? std::string("none") : fuzz::hex(q1.scales[0])) + ", in the tensor " +
                 fuzz::hex(q.scales[si]) + ": " + w);
    for (int c = c0; c < c1; ++c)
      if (q1.codes[static_cast<std::size_t>(c - c0)] != q.codes[static_cast<std::size_t>(r) * cols + c])
        fuzz::fail("block (" + std::to_string(r) + ", " + std::to_string(blk) + ") alone: code at column " +
                   std::to_string(c) + " is " + fuzz::hex(q1.codes[static_cast<std::size_t>(c - c0)]) +
                   ", in the tensor " + fuzz::hex(q.codes[static_cast<std::size_t>(r) * cols + c]) + ": " + w);
  }
  return 0;
}
