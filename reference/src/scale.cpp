#include "lowbit/scale.hpp"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <stdexcept>

#include "lowbit/convert.hpp"

namespace lowbit::scale {

namespace {

constexpr Policy exact_policy{};  // rne: used only where the conversion is exact

std::uint32_t bits_of(float f) { return std::bit_cast<std::uint32_t>(f); }
float float_of(std::uint32_t b) { return std::bit_cast<float>(b); }

// The element's largest finite value as an f32 (every supported element's max is exact in f32).
float max_of(const Format& f) { return static_cast<float>(max_value(f)); }

std::uint64_t to_element(float v, const Format& element, const Policy& p, std::uint32_t r) {
  return convert(formats::f32, bits_of(v), element, p, r).code;
}

// x * 2^-e computed exactly (the OCP definition divides by the power of two mathematically), rounded
// once into the element.
std::uint64_t to_element_scaled(float v, int e, const Format& element, const Policy& p, std::uint32_t r) {
  Unpacked u = unpack(formats::f32, bits_of(v));
  if (u.cls == ValueClass::finite) u.exponent -= e;
  return round_to(element, u, p, r).code;
}

double code_value(const Format& f, std::uint64_t code) {
  const Unpacked u = unpack(f, code);
  switch (u.cls) {
    case ValueClass::nan: return std::nan("");
    case ValueClass::inf: return u.negative ? -INFINITY : INFINITY;
    case ValueClass::zero: return u.negative ? -0.0 : 0.0;
    case ValueClass::finite: break;
  }
  const double v = std::ldexp(static_cast<double>(u.significand), u.exponent);
  return u.negative ? -v : v;
}

// The MX element's largest power of two (the exponent of its largest normal binade).
int emax_elem(const Format& f) { return f.emax(); }

const float k_sixth = 1.0f / 6.0f;  // fp32(1/6), as TE's kernel spells it

// 16x16 Sylvester Hadamard matrix entry: (-1)^popcount(i & j).
int hadamard16(int i, int j) { return (std::popcount(static_cast<unsigned>(i & j)) & 1) ? -1 : 1; }
// TE's fixed sign vector for the random Hadamard transform (SEMANTICS.md §4).
constexpr int k_rht_signs[16] = {1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1};

// y = x diag(s) H / 4 on each 16-element row group.  The sum of sixteen ±x_i is formed exactly in f64
// (every partial sum of sixteen f32 values is exact there) and rounded once to f32.  TE computes it with
// a bf16 tensor-core GEMM; this project does not claim bit equality with that kernel.
Tensor hadamard_rows(const Tensor& x) {
  Tensor y = x;
  for (int r = 0; r < x.rows; ++r)
    for (int c0 = 0; c0 + 16 <= x.cols; c0 += 16)
      for (int j = 0; j < 16; ++j) {
        double s = 0;
        for (int i = 0; i < 16; ++i)
          s += static_cast<double>(x.data[static_cast<std::size_t>(r) * x.cols + c0 + i]) * k_rht_signs[i] *
               hadamard16(i, j);
        y.data[static_cast<std::size_t>(r) * x.cols + c0 + j] = static_cast<float>(s * 0.25);
      }
  return y;
}

struct BlockIter {
  int r0, r1, c0, c1;
};

}  // namespace

float amax(const float* v, std::size_t n, std::size_t stride, bool propagate_nan) {
  float a = 0.0f;
  for (std::size_t i = 0; i < n; ++i) {
    const float x = std::fabs(v[i * stride]);
    if (std::isnan(x)) {
      if (propagate_nan) return x;
      continue;  // fmaxf(a, NaN) == a
    }
    a = std::fmax(a, x);
  }
  return a;
}

float scale_from_amax(float amax_in, float fp8_max, float eps, bool pow2, float value_for_inf) {
  float a = amax_in;
  if (a < eps) a = eps;  // a NaN amax compares false and skips this
  if (std::isinf(a) || a == 0.0f || std::isnan(a)) return 1.0f;
  float s = fp8_max / a;
  if (std::isinf(s)) s = value_for_inf;
  if (pow2) s = float_of(bits_of(s) & 0xFF800000u);  // keep sign and exponent: round down to 2^k
  return s;
}

std::uint64_t mx_scale(float a, const Format& element, MxRule rule) {
  if (std::isnan(a)) return 0xFF;
  const int emax = emax_elem(element);
  if (rule == MxRule::rceil || rule == MxRule::rne) {
    const float descale = a * (1.0f / max_of(element));
    Policy p;
    p.rounding = rule == MxRule::rceil ? Rounding::rup : Rounding::rne;
    p.overflow = Overflow::satfinite;
    p.quirks.unsigned_negative = UnsignedNegative::magnitude;
    return convert(formats::f32, bits_of(descale), formats::e8m0, p).code;
  }
  if (std::isinf(a)) return 0xFF;
  std::uint32_t b = bits_of(a);
  if (rule == MxRule::even) {
    // torchao EVEN: add half an ulp at the element's mantissa width, then keep sign and exponent.
    b = (b + (1u << (23 - element.mantissa_bits - 1))) & 0xFF800000u;
  }
  int pow2 = static_cast<int>((b >> 23) & 0xFF) - 127;  // an f32 subnormal amax reads as 2^-127
  if (rule == MxRule::ceil && (b & 0x7FFFFFu) != 0) pow2 += 1;
  int se = pow2 - emax;
  se = std::clamp(se, -127, 127);
  return static_cast<std::uint64_t>(se + 127);
}

const char* name(Scheme s) {
  switch (s) {
    case Scheme::tensor: return "tensor";
    case Scheme::delayed: return "delayed";
    case Scheme::channel: return "channel";
    case Scheme::token: return "token";
    case Scheme::block: return "block";
    case Scheme::mx: return "mx";
    case Scheme::nvfp4: return "nvfp4";
    case Scheme::nvfp4_2d: return "nvfp4-2d";
    case Scheme::nvfp4_1level: return "nvfp4-1level";
  }
  return "?";
}

std::optional<Scheme> parse_scheme(std::string_view s) {
  for (Scheme v : {Scheme::tensor, Scheme::delayed, Scheme::channel, Scheme::token, Scheme::block, Scheme::mx,
                   Scheme::nvfp4, Scheme::nvfp4_2d, Scheme::nvfp4_1level})
    if (s == name(v)) return v;
  return std::nullopt;
}

std::string normalize(Options& o) {
  const bool nv = o.scheme == Scheme::nvfp4 || o.scheme == Scheme::nvfp4_2d || o.scheme == Scheme::nvfp4_1level;
  if (!o.element) o.element = nv ? &formats::e2m1 : &formats::e4m3;
  if (nv && o.element != &formats::e2m1) return "--element: NVFP4 elements are e2m1";
  if (o.scheme == Scheme::mx) {
    const Format* e = o.element;
    if (e != &formats::e4m3 && e != &formats::e5m2 && e != &formats::e2m3 && e != &formats::e3m2 &&
        e != &formats::e2m1 && e != &formats::int8 && e != &formats::int8sm)
      return std::string("--element: MX elements are e4m3, e5m2, e2m3, e3m2, e2m1 or int8, not ") + e->name;
    if (o.block == 0) o.block = 32;
  }
  if (o.scheme == Scheme::block && o.block == 0) o.block = 128;
  if (nv) {
    if (o.block == 0) o.block = 16;
    if (o.block != 16) return "--block: NVFP4 blocks are 16 elements";
    if (o.scheme == Scheme::nvfp4_2d) o.block_rows = 16;
  }
  if (o.block < 0 || o.block_rows < 0) return "--block: must be positive";
  if (o.scale_format == ScaleFormat::ue8m0_packed && o.scheme != Scheme::block)
    return "--scale-format: ue8m0-packed applies to the block schemes";
  if (o.scale_format == ScaleFormat::pow2 && o.scheme != Scheme::block && o.scheme != Scheme::tensor &&
      o.scheme != Scheme::channel && o.scheme != Scheme::token)
    return "--scale-format: pow2 applies to tensor, channel, token and block schemes";
  if (o.hadamard && !nv) return "--hadamard: applies to NVFP4";
  if (o.variant == Variant::fast_math && !(o.scheme == Scheme::nvfp4 || o.scheme == Scheme::nvfp4_2d))
    return "--variant fast-math: applies to two-level NVFP4";
  return "";
}

Tensor transpose(const Tensor& x) {
  Tensor t{x.cols, x.rows, std::vector<float>(x.data.size())};
  for (int r = 0; r < x.rows; ++r)
    for (int c = 0; c < x.cols; ++c)
      t.data[static_cast<std::size_t>(c) * x.rows + r] = x.data[static_cast<std::size_t>(r) * x.cols + c];
  return t;
}

Quantized quantize(const Tensor& xin, const Options& oin, const std::vector<std::uint32_t>* rbits,
                   DelayedState* state) {
  Options o = oin;
  if (const std::string e = normalize(o); !e.empty()) throw std::invalid_argument(e);
  const Format& el = *o.element;
  const Policy& p = o.element_policy;
  if (is_stochastic(p.rounding) && (!rbits || rbits->size() != xin.data.size()))
    throw std::invalid_argument("stochastic rounding needs one random value per element");
  auto rb = [&](std::size_t i) -> std::uint32_t { return rbits ? (*rbits)[i] : 0; };
  const Tensor x = o.hadamard ? hadamard_rows(xin) : xin;
  const int R = x.rows, C = x.cols;
  Quantized q;
  q.scheme = o.scheme;
  q.element = &el;
  q.rows = R;
  q.cols = C;
  q.codes.assign(x.data.size(), 0);
  const float elem_max = max_of(el);
  auto at = [&](int r, int c) { return x.data[static_cast<std::size_t>(r) * C + c]; };
  auto idx = [&](int r, int c) { return static_cast<std::size_t>(r) * C + c; };
  auto block_amax = [&](int r0, int r1, int c0, int c1, bool finite_only) {
    float a = 0.0f;
    for (int r = r0; r < r1; ++r)
      for (int c = c0; c < c1; ++c) {
        const float v = std::fabs(at(r, c));
        if (std::isnan(v)) {
          if (o.amax_propagates_nan && !finite_only) return v;
          continue;
        }
        if (finite_only && std::isinf(v)) continue;
        a = std::fmax(a, v);
      }
    return a;
  };
  auto block_has_nonfinite = [&](int r0, int r1, int c0, int c1) {
    for (int r = r0; r < r1; ++r)
      for (int c = c0; c < c1; ++c)
        if (!std::isfinite(at(r, c))) return true;
    return false;
  };

  switch (o.scheme) {
    case Scheme::tensor:
    case Scheme::channel:
    case Scheme::token:
    case Scheme::block: {
      // TE compute_scale_from_amax per tensor / column / row / block.  Blocks (TE Float8BlockScaling):
      // value_for_inf is the input type's max (FLT_MAX).
      int br = R, bc = C;
      if (o.scheme == Scheme::channel) bc = 1;
      if (o.scheme == Scheme::token) br = 1;
      if (o.scheme == Scheme::block) {
        bc = o.block;
        br = o.block_rows > 0 ? o.block_rows : 1;
      }
      br = std::max(br, 1);
      bc = std::max(bc, 1);
      q.block_rows = br;
      q.block_cols = bc;
      const bool packed = o.scale_format == ScaleFormat::ue8m0_packed;
      q.scale_format = packed ? &formats::e8m0 : &formats::f32;
      for (int r0 = 0; r0 < std::max(R, 1); r0 += br)
        for (int c0 = 0; c0 < std::max(C, 1); c0 += bc) {
          const int r1 = std::min(R, r0 + br), c1 = std::min(C, c0 + bc);
          const float a = block_amax(r0, r1, c0, c1, false);
          float s = 0;
          std::uint64_t scale_code = 0;
          if (packed) {
            // DeepGEMM's sm_100 path: sf = fp32(max(amax, 1e-4) / max), rounded up to a power of two
            // (ceil_to_ue8m0); elements x * fp32(1 / sf).
            const float sf = std::fmax(a, 1e-4f) / elem_max;
            Policy up;
            up.rounding = Rounding::rup;
            up.overflow = Overflow::satfinite;
            scale_code = convert(formats::f32, bits_of(sf), formats::e8m0, up).code;
            s = 1.0f / static_cast<float>(code_value(formats::e8m0, scale_code));
          } else {
            s = scale_from_amax(a, elem_max, o.eps, o.scale_format == ScaleFormat::pow2, FLT_MAX);
            scale_code = bits_of(1.0f / s);
          }
          q.scales.push_back(scale_code);
          for (int r = r0; r < r1; ++r)
            for (int c = c0; c < c1; ++c) q.codes[idx(r, c)] = to_element(at(r, c) * s, el, p, rb(idx(r, c)));
        }
      if (packed)
        for (std::size_t i = 0; i < q.scales.size(); i += 4) {
          std::uint32_t w = 0;
          for (std::size_t k = 0; k < 4 && i + k < q.scales.size(); ++k)
            w |= static_cast<std::uint32_t>(q.scales[i + k]) << (8 * k);
          q.packed_scales.push_back(w);
        }
      break;
    }
    case Scheme::delayed: {
      // TE delayed scaling: quantize with the current scale, record this tensor's amax in slot 0, then
      // update the scale from the history and roll it (delayed_scaling.cu).
      DelayedState local;
      DelayedState& st = state ? *state : local;
      if (st.history.empty()) st.history.assign(1024, 0.0f);
      const float s = st.scale;
      q.block_rows = std::max(R, 1);
      q.block_cols = std::max(C, 1);
      q.scale_format = &formats::f32;
      q.scales.push_back(bits_of(1.0f / s));
      for (std::size_t i = 0; i < x.data.size(); ++i) q.codes[i] = to_element(x.data[i] * s, el, p, rb(i));
      st.history[0] = std::fmax(st.history[0], block_amax(0, R, 0, C, false));
      float a = st.history[0];
      if (st.max_algorithm) {
        a = 0.0f;
        for (float h : st.history) a = std::fmax(a, h);  // fmaxf: NaN entries ignored, Inf kept
      }
      const float scaled_max = elem_max * std::ldexp(1.0f, -st.margin);
      if (std::isfinite(a) && a > 0.0f) {
        float ns = scaled_max / a;
        if (std::isinf(ns)) ns = FLT_MAX;
        st.scale = ns;
      }
      std::vector<float> rolled(st.history.size());
      for (std::size_t i = 0; i + 1 < st.history.size(); ++i) rolled[i] = st.history[i + 1];
      rolled.back() = st.history[0];
      rolled[0] = 0.0f;
      st.history = rolled;
      break;
    }
    case Scheme::mx: {
      q.block_rows = 1;
      q.block_cols = o.block;
      q.scale_format = &formats::e8m0;
      const Unpacked nan_in = unpack(formats::f32, 0x7FC00000u);
      for (int r = 0; r < R; ++r)
        for (int c0 = 0; c0 < C; c0 += o.block) {
          const int c1 = std::min(C, c0 + o.block);
          std::uint64_t sc = 0;
          const bool nonfinite = block_has_nonfinite(r, r + 1, c0, c1);
          if (o.nonfinite == NonFinite::scale_nan && nonfinite) sc = 0xFF;
          else sc = mx_scale(block_amax(r, r + 1, c0, c1, o.nonfinite == NonFinite::propagate), el, o.mx_rule);
          q.scales.push_back(sc);
          const int se = static_cast<int>(sc) - 127;
          const bool fp32_multiply = o.mx_rule == MxRule::rceil || o.mx_rule == MxRule::rne;
          // x * 2^(127 - e) as TE and torchao form it: e = 254 gives the f32 subnormal 2^-127.
          const float mult = sc == 0xFF ? std::nanf("") : static_cast<float>(std::ldexp(1.0, -se));
          for (int c = c0; c < c1; ++c) {
            const std::size_t i = idx(r, c);
            if (sc == 0xFF) q.codes[i] = round_to(el, nan_in, p, rb(i)).code;
            else if (fp32_multiply) q.codes[i] = to_element(at(r, c) * mult, el, p, rb(i));
            else q.codes[i] = to_element_scaled(at(r, c), se, el, p, rb(i));
          }
        }
      break;
    }
    case Scheme::nvfp4:
    case Scheme::nvfp4_2d: {
      // TE core_nvfp4.cuh / quantize_transpose_nvfp4.cuh, SEMANTICS.md §4 steps 1-7.
      const float scale_max = max_of(formats::e4m3);  // 448
      const float global = block_amax(0, R, 0, C, false);
      float s_enc = std::fmin(scale_max * elem_max / global, FLT_MAX);  // 2688 / amax; fminf drops a NaN
      if (global == 0.0f || s_enc == 0.0f) s_enc = 1.0f;
      const float s_dec = 1.0f / s_enc;
      q.tensor_scale = bits_of(s_dec);
      q.scale_format = &formats::e4m3;
      const int br = o.scheme == Scheme::nvfp4_2d ? 16 : 1;
      q.block_rows = br;
      q.block_cols = 16;
      Policy sat;
      sat.overflow = Overflow::satfinite;
      for (int r0 = 0; r0 < R; r0 += br)
        for (int c0 = 0; c0 < C; c0 += 16) {
          const int r1 = std::min(R, r0 + br), c1 = std::min(C, c0 + 16);
          const float ba = block_amax(r0, r1, c0, c1, false);
          const float s_dec_b = ba * (s_enc * k_sixth);
          const std::uint64_t sc = to_element(std::fmin(s_dec_b, FLT_MAX), formats::e4m3, sat, 0);
          q.scales.push_back(sc);
          const float scale_f = static_cast<float>(code_value(formats::e4m3, sc));
          float mult = 0;
          if (o.variant == Variant::fast_math) {
            // bf16(min(S_enc / scale, bf16 max)) as the element multiplier.
            const float m = std::fmin(s_enc / scale_f, float_of(0x7F7F0000u));
            mult = float_of(static_cast<std::uint32_t>(
                convert(formats::bf16, convert(formats::f32, bits_of(m), formats::bf16, exact_policy).code,
                        formats::f32, exact_policy)
                    .code));
          } else if (sc == 0 && o.zero_scale == ZeroScale::reference) {
            mult = 0.0f;
          } else {
            mult = std::fmin(1.0f / (scale_f * s_dec), FLT_MAX);
          }
          for (int r = r0; r < r1; ++r)
            for (int c = c0; c < c1; ++c) q.codes[idx(r, c)] = to_element(at(r, c) * mult, el, p, rb(idx(r, c)));
        }
      break;
    }
    case Scheme::nvfp4_1level: {
      // torchao single-level NVFP4: scale = fp32(block_amax / 6) clamped to [2^-6, 448] (a zero block
      // gets 2^-6, code 0x08), stored as e4m3; elements x / scale in fp32.
      q.scale_format = &formats::e4m3;
      q.block_rows = 1;
      q.block_cols = 16;
      Policy sat;
      sat.overflow = Overflow::satfinite;
      for (int r = 0; r < R; ++r)
        for (int c0 = 0; c0 < C; c0 += 16) {
          const int c1 = std::min(C, c0 + 16);
          float s = block_amax(r, r + 1, c0, c1, false) / elem_max;
          s = std::clamp(s, 0x1p-6f, 448.0f);
          const std::uint64_t sc = to_element(s, formats::e4m3, sat, 0);
          q.scales.push_back(sc);
          const float scale_f = static_cast<float>(code_value(formats::e4m3, sc));
          for (int c = c0; c < c1; ++c) q.codes[idx(r, c)] = to_element(at(r, c) / scale_f, el, p, rb(idx(r, c)));
        }
      break;
    }
  }
  return q;
}

std::vector<double> dequantize(const Quantized& q) {
  std::vector<double> out(q.codes.size());
  const int sc_cols = q.scale_cols();
  const double ts = q.tensor_scale ? static_cast<double>(float_of(*q.tensor_scale)) : 1.0;
  for (int r = 0; r < q.rows; ++r)
    for (int c = 0; c < q.cols; ++c) {
      const std::size_t i = static_cast<std::size_t>(r) * q.cols + c;
      const std::size_t si = static_cast<std::size_t>(r / q.block_rows) * sc_cols + c / q.block_cols;
      const double s = code_value(*q.scale_format, q.scales[si]);
      out[i] = code_value(*q.element, q.codes[i]) * s * ts;
    }
  return out;
}

}  // namespace lowbit::scale
