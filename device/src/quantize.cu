// Device quantizers (lowbit/device/quantize.hpp): the reference's element code and scale rules on the GPU.
//
// Passes (each a plain kernel, checked after launch):
//   tensor amax  one running maximum per thread, one warp reduction and one atomic per warp at the end
//   block amax   (general route) per-chunk block maxima merged across a warp with __match_any_sync, one
//                atomic per block per warp step; channel blocks take a column kernel (one atomic per slab)
//   scales       (general route) one thread per block: the shared rules of lowbit/scale_rules.hpp
//   elements     (general route) 16-byte loads (k_unroll_of<HW, PK> rows in flight per thread), no atomics: x
//                times the block's multiplier, converted, four codes per 32-bit store
//   rows         (rows route) a group of threads per row-local block, several blocks per group step with
//                all loads issued first: amax by redux / shuffles, each scale computed once and shuffled to
//                its group, elements converted from registers, four codes per 32-bit store
// Element conversion: under the two constant element policies (Options' default and the cuda profile's) the
// 32-bit path lowbit::fast::convert, inline; under any other policy the general lowbit::convert, called out of
// line once per four elements (code4_call: one copy per kernel); the hardware path two elements per cvt.
// Amaxes are |x| bit patterns (for values >= +0 the pattern order is the value order), four elements at a
// time by one integer maximum, with the per-element rule only when the four hold a NaN or an infinity
// (amax4); NaN reads as +0 and sets a flag, as the reference's one-pass table does (scale.cpp block_amaxes).
// Which NaN a propagating amax returns never reaches an output (every rule maps a NaN amax to a fixed
// result), so the flag suffices.
#include <cfloat>
#include <cstdint>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include "lowbit/convert.hpp"
#include "lowbit/device/check.hpp"
#include "lowbit/device/quantize.hpp"
#include "lowbit/fast_convert.hpp"
#include "lowbit/scale_rules.hpp"

namespace lowbit::device::quant {

using scale::MxRule;
using scale::NonFinite;
using scale::Scheme;
using scale::ScaleFormat;
namespace rules = scale::rules;

namespace {

constexpr std::uint32_t k_flag_nan = 1, k_flag_nonfinite = 2;
constexpr std::uint32_t k_canonical_nan = 0x7FC00000u;

// ---- element conversion --------------------------------------------------------------------------------

// f32 bits into the element of kind K under policy `pol`.  A constant policy (the compiled kinds, never
// stochastic) takes the 32-bit path, lowbit::fast::convert, with the row a constant for the named kinds and
// the plan's row for the generic one (make_plan gives a generic element a constant policy kind only where
// fast::applies holds); a runtime policy takes the general lowbit::convert.  conformance/fast_convert and the
// device conversion test hold the two equal on every f32 input of the pairs compiled here.
template <ElementKind K, bool Fast>
__device__ __forceinline__ std::uint32_t convert_as(const Plan& p, std::uint32_t bits, const Policy& pol,
                                                    std::uint32_t r) {
  constexpr Format f32 = formats::f32;
  auto run = [&](const Format& e) -> std::uint32_t {
    if constexpr (Fast) return static_cast<std::uint32_t>(fast::convert(f32, bits, e, pol).code);
    else return static_cast<std::uint32_t>(convert(f32, bits, e, pol, r).code);
  };
  if constexpr (K == ElementKind::e4m3) {
    constexpr Format e = formats::e4m3;
    return run(e);
  } else if constexpr (K == ElementKind::e5m2) {
    constexpr Format e = formats::e5m2;
    return run(e);
  } else if constexpr (K == ElementKind::e2m1) {
    constexpr Format e = formats::e2m1;
    return run(e);
  } else {
    return run(p.element);
  }
}

// f32 bits into the plan's element, with the row a constant where K says and the policy a constant where PK
// says (then every policy branch folds away).
template <ElementKind K, PolicyKind PK>
__device__ __forceinline__ std::uint32_t sw_convert(const Plan& p, std::uint32_t bits, std::uint32_t r) {
  if constexpr (PK == PolicyKind::cuda) {
    constexpr Policy pol = k_cuda_policy;
    return convert_as<K, true>(p, bits, pol, r);
  } else if constexpr (PK == PolicyKind::rne_satfinite) {
    constexpr Policy pol = k_rne_satfinite_policy;
    return convert_as<K, true>(p, bits, pol, r);
  } else {
    return convert_as<K, false>(p, bits, p.policy, r);
  }
}

// The compiled element kinds take the 32-bit path under both constant policies (checked while compiling).
static_assert(fast::applies(formats::f32, formats::e4m3, k_cuda_policy) &&
              fast::applies(formats::f32, formats::e5m2, k_cuda_policy) &&
              fast::applies(formats::f32, formats::e2m1, k_cuda_policy) &&
              fast::applies(formats::f32, formats::e4m3, k_rne_satfinite_policy) &&
              fast::applies(formats::f32, formats::e5m2, k_rne_satfinite_policy) &&
              fast::applies(formats::f32, formats::e2m1, k_rne_satfinite_policy));

// v * 2^-se exactly, rounded once into the element (the MX exact route, scale.cpp to_element_scaled).
template <ElementKind K>
__device__ __noinline__ std::uint32_t sw_scaled(const Plan& p, float v, int se, std::uint32_t r) {
  constexpr Format f32 = formats::f32;
  Unpacked u = unpack(f32, rules::bits_of(v));
  if (u.cls == ValueClass::finite) u.exponent -= se;
  return static_cast<std::uint32_t>(round_to(p.element, u, p.policy, r).code);
}

// The hardware conversion: cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 d, a, b puts cvt(a) in the upper byte of d
// and cvt(b) in the lower one (PTX ISA, "cvt"); sm_89 and newer.
// hw_convert2(hi, lo) converts two values in one instruction: cvt(lo) in bits 7:0, cvt(hi) in bits 15:8 (the
// instruction's two lanes, each held against the reference on every f32 input by device/tests/cvt_test.cpp).
template <ElementKind K>
__device__ __forceinline__ std::uint32_t hw_convert2(float hi, float lo) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  unsigned short d = 0;
  if constexpr (K == ElementKind::e5m2)
    asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(d) : "f"(hi), "f"(lo));
  else
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(d) : "f"(hi), "f"(lo));
  return d;
#else
  (void)hi, (void)lo;
  return 0xFFFFFFFFu;  // never launched: make_plan and quantize() refuse the path below sm_89
#endif
}
template <ElementKind K>
__device__ __forceinline__ std::uint32_t hw_convert(float y) {
  return hw_convert2<K>(0.0f, y) & 0xFFu;
}

// The fp32 product the host computes, NaN propagation included: the host's multiply returns a NaN operand
// quieted (x86), and the reference substitutes a NaN factor itself; a new NaN (0 * Inf) is x86's default
// NaN, the negative quiet NaN.
// The product is NaN exactly when an operand is NaN or it is 0 * Inf: one test on the common path.
__device__ __forceinline__ float host_mul(float v, float m) {
  const float y = v * m;
  if (!rules::is_nan(y)) return y;
  if (rules::is_nan(m)) return m;
  if (rules::is_nan(v)) return rules::float_of(rules::bits_of(v) | 0x00400000u);
  return rules::float_of(0xFFC00000u);
}

// One element's code: the scheme's fp32 operation, then the element conversion.
template <ElementKind K, bool HW, PolicyKind PK>
__device__ __forceinline__ std::uint32_t element_code(const Plan& p, float v, float mult, std::uint32_t sc,
                                                      std::uint32_t r) {
  if (p.scheme == Scheme::mx) {
    if (sc == 0xFFu) return sw_convert<K, PK>(p, k_canonical_nan, r);  // a NaN scale: the element's NaN
    float y = host_mul(v, mult);
    if (p.mx_rule != MxRule::rceil && p.mx_rule != MxRule::rne) {
      if (rules::is_nan(v)) y = v;  // the OCP rules: a NaN input stays itself
      else if (rules::mx_needs_exact(v, y)) return sw_scaled<K>(p, v, static_cast<int>(sc) - 127, r);
    }
    if constexpr (HW) return hw_convert<K>(y);
    return sw_convert<K, PK>(p, rules::bits_of(y), r);
  }
  const float y = host_mul(v, mult);
  if constexpr (HW) return hw_convert<K>(y);
  return sw_convert<K, PK>(p, rules::bits_of(y), r);
}

// ---- amaxes and scales -------------------------------------------------------------------------------

// |x| pattern at most `limit` (else +0), and the NaN / non-finite flags.
__device__ __forceinline__ void amax_step(float v, std::uint32_t limit, std::uint32_t& m, std::uint32_t& f) {
  const std::uint32_t b = rules::bits_of(v) & 0x7FFFFFFFu;
  m = max(m, b > limit ? 0u : b);
  f |= (b > 0x7F800000u ? k_flag_nan : 0u) | (b >= 0x7F800000u ? k_flag_nonfinite : 0u);
}

// A block's amax as amax_of in scale.cpp reads it: the pattern, or NaN for a propagating amax over a NaN
// (never under MX NonFinite::propagate, whose amax is finite-only).
__device__ __forceinline__ float amax_value(const Plan& p, std::uint32_t m, std::uint32_t f) {
  const bool finite_only = p.scheme == Scheme::mx && p.nonfinite == NonFinite::propagate;
  if ((f & k_flag_nan) && p.amax_propagates_nan && !finite_only) return rules::float_of(k_canonical_nan);
  return rules::float_of(m);
}

struct Nvfp4Tensor {
  float s_enc, s_dec, enc_sixth;
};
__device__ __forceinline__ Nvfp4Tensor nvfp4_tensor(const Plan& p, std::uint32_t m, std::uint32_t f) {
  const float global = amax_value(p, m, f);
  Nvfp4Tensor t{};
  t.s_enc = rules::nvfp4_s_enc(global, 448.0f, p.elem_max);
  t.s_dec = 1.0f / t.s_enc;
  t.enc_sixth = t.s_enc * rules::nvfp4_sixth();
  return t;
}

struct BlockScale {
  std::uint32_t word;  // the scale as Quantized::scales holds it (f32 bits or a code)
  float mult;          // the element multiplier
};

__device__ BlockScale block_scale(const Plan& p, std::uint32_t m, std::uint32_t f, const Nvfp4Tensor& nv) {
  BlockScale s{};
  switch (p.scheme) {
    case Scheme::delayed:
      s.mult = p.delayed_scale;
      s.word = rules::bits_of(1.0f / p.delayed_scale);
      break;
    case Scheme::mx: {
      std::uint64_t sc = 0;
      if (p.nonfinite == NonFinite::scale_nan && (f & k_flag_nonfinite)) sc = 0xFF;
      else sc = rules::mx_scale(amax_value(p, m, f), p.emax, p.elem_max, p.mantissa_bits, p.mx_rule);
      s.word = static_cast<std::uint32_t>(sc);
      s.mult = rules::mx_multiplier(sc);
      break;
    }
    case Scheme::nvfp4:
    case Scheme::nvfp4_2d: {
      const float a = amax_value(p, m, f);
      const float dec = rules::is_nan(a) ? FLT_MAX : rules::nvfp4_block_dec(a, nv.enc_sixth);
      Policy sat;
      sat.overflow = Overflow::satfinite;
      constexpr Format f32 = formats::f32;
      constexpr Format e4m3 = formats::e4m3;
      const std::uint64_t sc = convert(f32, rules::bits_of(dec), e4m3, sat).code;
      s.word = static_cast<std::uint32_t>(sc);
      s.mult = rules::nvfp4_multiplier(sc, nv.s_enc, nv.s_dec,
                                       p.fast_math ? scale::Multiplier::bf16_quotient : scale::Multiplier::reciprocal,
                                       p.zero_reference ? scale::ZeroScale::reference : scale::ZeroScale::kernel);
      break;
    }
    default: {  // tensor, channel, token, block
      const float a = amax_value(p, m, f);
      if (p.scale_format == ScaleFormat::ue8m0_packed) {
        s.word = static_cast<std::uint32_t>(rules::packed_block_scale(a, p.elem_max, s.mult));
      } else {
        s.mult = rules::scale_from_amax(a, p.elem_max, p.eps, p.scale_format, FLT_MAX);
        s.word = rules::bits_of(1.0f / s.mult);
      }
      break;
    }
  }
  return s;
}

// ---- workspace -------------------------------------------------------------------------------------------

constexpr std::size_t align256(std::size_t n) { return (n + 255) / 256 * 256; }
struct Work {
  std::uint32_t* tensor;  // [0] amax pattern, [1] flags
  std::uint32_t* amax;    // per block
  std::uint32_t* flags;   // per block
  float* mult;            // per block
  std::uint32_t* sc;      // per block: the scale word
};
Work carve(const Plan& p, void* w) {
  auto* b = static_cast<unsigned char*>(w);
  const std::size_t n = align256(p.blocks() * 4);
  Work k{};
  k.tensor = reinterpret_cast<std::uint32_t*>(b);
  k.amax = reinterpret_cast<std::uint32_t*>(b + 256);
  k.flags = reinterpret_cast<std::uint32_t*>(b + 256 + n);
  k.mult = reinterpret_cast<float*>(b + 256 + 2 * n);
  k.sc = reinterpret_cast<std::uint32_t*>(b + 256 + 3 * n);
  return k;
}

// ---- kernels ---------------------------------------------------------------------------------------------

__device__ __forceinline__ std::size_t global_thread() {
  return static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ std::size_t grid_threads() { return static_cast<std::size_t>(gridDim.x) * blockDim.x; }

// Chunks of four elements a thread loads before it uses any (several 16-byte loads in flight per lane).
constexpr int k_unroll = 4;
// The element kernels: four chunks in flight on the hardware path and the 32-bit path of the constant policies
// (a few instructions per element: memory bound), two under a runtime policy (the general conversion is
// instruction bound: the warps hide the latency, registers are scarcer).
template <bool HW, PolicyKind PK>
inline constexpr int k_unroll_of = HW || PK != PolicyKind::runtime ? k_unroll : 2;
// Only a runtime policy can round stochastically (the constant policies are rne; the hardware path is rne):
// elsewhere the random bits are never read and hold no registers.
template <bool HW, PolicyKind PK>
inline constexpr bool k_may_be_stochastic = !HW && PK == PolicyKind::runtime;

// Four elements' amax step.  The common case costs a mask and a maximum per element: when the largest |x|
// pattern of the four is below +Inf's, every element is finite, so none exceeds the limit (which is +Inf's
// pattern or the largest finite one) and none raises a flag, and amax_step would have given the same maximum.
// Otherwise (a NaN or an infinity among them, rare) the four take amax_step from the registers they are in.
__device__ __forceinline__ void amax4(const float4& v, std::uint32_t limit, std::uint32_t& m, std::uint32_t& f) {
  const std::uint32_t a = rules::bits_of(v.x) & 0x7FFFFFFFu, b = rules::bits_of(v.y) & 0x7FFFFFFFu;
  const std::uint32_t c = rules::bits_of(v.z) & 0x7FFFFFFFu, d = rules::bits_of(v.w) & 0x7FFFFFFFu;
  const std::uint32_t top = max(max(a, b), max(c, d));
  if (top < 0x7F800000u) {
    m = max(m, top);
    return;
  }
  amax_step(v.x, limit, m, f);
  amax_step(v.y, limit, m, f);
  amax_step(v.z, limit, m, f);
  amax_step(v.w, limit, m, f);
}

// The whole tensor's amax into tensor[0..1].
__global__ void tensor_amax_kernel(const __grid_constant__ Plan p, const float* x, std::uint32_t* tensor) {
  const std::uint32_t limit = amax_limit(p);
  std::uint32_t m = 0, f = 0;
  const std::size_t n = p.elements();
  if (p.vec4) {
    // k_unroll loads in flight per thread, then the remainder one at a time.
    const auto* x4 = reinterpret_cast<const float4*>(x);
    const std::size_t n4 = n / 4, g = grid_threads();
    std::size_t i = global_thread();
    for (; i + (k_unroll - 1) * g < n4; i += k_unroll * g) {
      float4 v[k_unroll];
#pragma unroll
      for (int k = 0; k < k_unroll; ++k) v[k] = x4[i + static_cast<std::size_t>(k) * g];
#pragma unroll
      for (int k = 0; k < k_unroll; ++k) amax4(v[k], limit, m, f);
    }
    for (; i < n4; i += g) amax4(x4[i], limit, m, f);
  } else {
    for (std::size_t i = global_thread(); i < n; i += grid_threads()) amax_step(x[i], limit, m, f);
  }
  m = __reduce_max_sync(0xFFFFFFFFu, m);
  f = __reduce_or_sync(0xFFFFFFFFu, f);
  if ((threadIdx.x & 31) == 0) {
    if (m) atomicMax(&tensor[0], m);
    if (f) atomicOr(&tensor[1], f);
  }
}

// Block amaxes for any block shape whose chunks lie inside one block (chunk 4 needs bc % 4 == 0).  The warp
// steps together so that every lane takes part in the match and the reductions.
__global__ void block_amax_kernel(const __grid_constant__ Plan p, const float* x, std::uint32_t* amax,
                                  std::uint32_t* flags) {
  const std::uint32_t limit = amax_limit(p);
  const int ch = p.vec4 ? 4 : 1;
  const std::size_t n = p.elements();
  const unsigned lane = threadIdx.x & 31;
  const std::size_t warp = global_thread() / 32, warps = grid_threads() / 32;
  const std::size_t step = warps * 32 * static_cast<std::size_t>(ch);
  for (std::size_t base = warp * 32 * static_cast<std::size_t>(ch); base < n; base += step) {
    const std::size_t i = base + static_cast<std::size_t>(lane) * static_cast<std::size_t>(ch);
    std::uint32_t m = 0, f = 0, blk = 0xFFFFFFFFu;
    if (i < n) {
      const int r = static_cast<int>(i / static_cast<std::size_t>(p.cols));
      const int c = static_cast<int>(i - static_cast<std::size_t>(r) * static_cast<std::size_t>(p.cols));
      blk = static_cast<std::uint32_t>(block_index(p, r, c));
      if (ch == 4) {
        amax4(*reinterpret_cast<const float4*>(x + i), limit, m, f);
      } else {
        amax_step(x[i], limit, m, f);
      }
    }
    const unsigned peers = __match_any_sync(0xFFFFFFFFu, blk);
    m = __reduce_max_sync(peers, m);
    f = __reduce_or_sync(peers, f);
    if (blk != 0xFFFFFFFFu && lane == static_cast<unsigned>(__ffs(peers) - 1)) {
      if (m) atomicMax(&amax[blk], m);
      if (f) atomicOr(&flags[blk], f);
    }
  }
}

// Channel blocks (one per column over all rows): thread per column, a slab of rows per CTA row.
constexpr int k_slab = 64;
__global__ void column_amax_kernel(const __grid_constant__ Plan p, const float* x, std::uint32_t* amax,
                                   std::uint32_t* flags) {
  const int c = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (c >= p.cols) return;
  const std::uint32_t limit = amax_limit(p);
  const int r0 = static_cast<int>(blockIdx.y) * k_slab;
  const int r1 = min(p.rows, r0 + k_slab);
  std::uint32_t m = 0, f = 0;
  for (int r = r0; r < r1; ++r) amax_step(x[static_cast<std::size_t>(r) * p.cols + c], limit, m, f);
  const std::size_t b = block_index(p, r0, c);
  if (m) atomicMax(&amax[b], m);
  if (f) atomicOr(&flags[b], f);
}

// One thread per block (four blocks when ue8m0-packed): scale words, multipliers, the tensor scale.
__global__ void scales_kernel(const __grid_constant__ Plan p, Work w, Outputs out) {
  const std::size_t t = global_thread();
  const bool packed = p.scale_format == ScaleFormat::ue8m0_packed;
  const std::size_t per = packed ? 4 : 1;
  Nvfp4Tensor nv{};
  if (p.scheme == Scheme::nvfp4 || p.scheme == Scheme::nvfp4_2d) {
    nv = nvfp4_tensor(p, w.tensor[0], w.tensor[1]);
    if (t == 0 && out.tensor_scale) *out.tensor_scale = rules::bits_of(nv.s_dec);
  }
  if (t == 0 && out.tensor_amax) {
    const float a = amax_value(p, w.tensor[0], w.tensor[1]);
    *out.tensor_amax = rules::bits_of(a);
  }
  std::uint32_t word = 0;
  for (std::size_t k = 0; k < per; ++k) {
    const std::size_t b = t * per + k;
    if (b >= p.blocks()) break;
    const BlockScale s = block_scale(p, w.amax[b], w.flags[b], nv);
    w.mult[b] = s.mult;
    w.sc[b] = s.word;
    if (out.scales) out.scales[b] = s.word;
    word |= (s.word & 0xFFu) << (8 * k);
  }
  if (packed && t * per < p.blocks() && out.packed_scales) out.packed_scales[t] = word;
}

// Four elements' codes packed into one word (the first in bits 7:0), each with its own multiplier and scale
// word (channel blocks differ per column; row blocks pass the same four).
template <ElementKind K, bool HW, PolicyKind PK>
__device__ __forceinline__ std::uint32_t code4_inline(const Plan& p, float4 v, uint4 rr, float4 m, uint4 sc) {
  return (element_code<K, HW, PK>(p, v.x, m.x, sc.x, rr.x) & 0xFFu) |
         (element_code<K, HW, PK>(p, v.y, m.y, sc.y, rr.y) & 0xFFu) << 8 |
         (element_code<K, HW, PK>(p, v.z, m.z, sc.z, rr.z) & 0xFFu) << 16 |
         (element_code<K, HW, PK>(p, v.w, m.w, sc.w, rr.w) & 0xFFu) << 24;
}
// The general software conversion (a runtime policy) is long: one out-of-line copy per kernel (a call per four
// elements), so that the unrolled loops below do not multiply it.  The hardware conversion and the 32-bit path
// under a constant policy are a few instructions: inline.
template <ElementKind K, bool HW, PolicyKind PK>
__device__ __noinline__ std::uint32_t code4_call(const Plan& p, float4 v, uint4 rr, float4 m, uint4 sc) {
  return code4_inline<K, HW, PK>(p, v, rr, m, sc);
}
// Whether element_code<K, true, PK>(p, v, mult, sc, r) is the instruction applied to y = host_mul(v, mult):
// always outside MX; in MX, unless the block's scale is NaN, or (under the OCP rules) v is a NaN (converted
// as itself) or takes the exact route.
__device__ __forceinline__ bool hw_direct(const Plan& p, float v, float y, std::uint32_t sc) {
  if (p.scheme != Scheme::mx) return true;
  if (sc == 0xFFu) return false;
  if (p.mx_rule == MxRule::rceil || p.mx_rule == MxRule::rne) return true;
  return !rules::is_nan(v) && !rules::mx_needs_exact(v, y);
}
// The hardware path, two elements per instruction: when every element of the four is the instruction on its
// product (hw_direct), two cvt ...x2 give the four codes; otherwise each element takes element_code.
template <ElementKind K, PolicyKind PK>
__device__ __forceinline__ std::uint32_t code4_hw(const Plan& p, float4 v, uint4 rr, float4 m, uint4 sc) {
  const float y0 = host_mul(v.x, m.x), y1 = host_mul(v.y, m.y), y2 = host_mul(v.z, m.z), y3 = host_mul(v.w, m.w);
  if (hw_direct(p, v.x, y0, sc.x) && hw_direct(p, v.y, y1, sc.y) && hw_direct(p, v.z, y2, sc.z) &&
      hw_direct(p, v.w, y3, sc.w))
    return hw_convert2<K>(y1, y0) | hw_convert2<K>(y3, y2) << 16;
  return code4_inline<K, true, PK>(p, v, rr, m, sc);
}
template <ElementKind K, bool HW, PolicyKind PK>
__device__ __forceinline__ std::uint32_t code4(const Plan& p, float4 v, uint4 rr, float4 m, uint4 sc) {
  if constexpr (HW) return code4_hw<K, PK>(p, v, rr, m, sc);
  else if constexpr (PK != PolicyKind::runtime) return code4_inline<K, false, PK>(p, v, rr, m, sc);  // 32-bit path
  else return code4_call<K, HW, PK>(p, v, rr, m, sc);
}

// Max / or over the G lanes of a group (G a power of two dividing 32; warp-uniform): one redux each for a
// whole warp, butterfly shuffles otherwise.  Every lane of the warp must call it.
__device__ __forceinline__ void group_reduce(int G, std::uint32_t& m, std::uint32_t& f) {
  if (G == 32) {
    m = __reduce_max_sync(0xFFFFFFFFu, m);
    f = __reduce_or_sync(0xFFFFFFFFu, f);
    return;
  }
  for (int o = G / 2; o > 0; o /= 2) {
    m = max(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
    f |= __shfl_xor_sync(0xFFFFFFFFu, f, o);
  }
}

// The general route's elements, two-dimensional: thread x of the grid owns one chunk of columns (4 with
// 16-byte loads and one 4-byte store, else 1) and walks the rows gy at a time, U rows per step with
// all their loads issued first, so its block column and its multipliers are fixed while the block row stays
// the same (no division per element, no 64-bit division).
template <ElementKind K, bool HW, PolicyKind PK>
__global__ void __launch_bounds__(k_threads, 3) elements_kernel(const __grid_constant__ Plan p, const float* x,
                                                             const std::uint32_t* rbits, Work w, std::uint8_t* codes) {
  constexpr int U = k_unroll_of<HW, PK>;
  const bool sto = k_may_be_stochastic<HW, PK> && p.stochastic;
  const int ch = p.vec4 ? 4 : 1;
  const int q = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const int c = q * ch;
  if (c >= p.cols) return;
  const auto cols = static_cast<std::size_t>(p.cols);
  const int bcol = c / p.bc;
  const int nb = p.bc == 1 ? ch : 1;  // blocks the chunk touches (channel: one per column)
  const int gy = static_cast<int>(gridDim.y);
  int rb_cur = -1;
  float m[4] = {0, 0, 0, 0};
  std::uint32_t sc[4] = {0, 0, 0, 0};
  auto fetch = [&](int r) {  // the chunk's multipliers and scale words for row r
    const int rb = p.nbr == 1 ? 0 : (p.br == 1 ? r : r / p.br);
    if (rb != rb_cur) {
      rb_cur = rb;
      const std::size_t b0 = static_cast<std::size_t>(rb) * static_cast<std::size_t>(p.nbc) + static_cast<std::size_t>(bcol);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const std::size_t b = b0 + static_cast<std::size_t>(k < nb ? k : 0);
        m[k] = w.mult[b];
        sc[k] = w.sc[b];
      }
    }
  };
  if (ch == 4) {
    const float* xc = x + c;
    const std::uint32_t* rc = rbits ? rbits + c : nullptr;
    std::uint8_t* oc = codes + c;
    for (int r0 = static_cast<int>(blockIdx.y); r0 < p.rows; r0 += U * gy) {
      float4 v[U];
      uint4 rr[U];
#pragma unroll
      for (int k = 0; k < U; ++k) {
        const int r = r0 + k * gy;
        const std::size_t o = static_cast<std::size_t>(r) * cols;
        v[k] = r < p.rows ? *reinterpret_cast<const float4*>(xc + o) : make_float4(0, 0, 0, 0);
        rr[k] = r < p.rows && sto ? *reinterpret_cast<const uint4*>(rc + o) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int k = 0; k < U; ++k) {
        const int r = r0 + k * gy;
        if (r >= p.rows) break;
        fetch(r);
        const std::uint32_t word = code4<K, HW, PK>(p, v[k], rr[k], make_float4(m[0], m[1], m[2], m[3]),
                                                    make_uint4(sc[0], sc[1], sc[2], sc[3]));
        *reinterpret_cast<std::uint32_t*>(oc + static_cast<std::size_t>(r) * cols) = word;
      }
    }
  } else {
    for (int r = static_cast<int>(blockIdx.y); r < p.rows; r += gy) {
      fetch(r);
      const std::size_t i = static_cast<std::size_t>(r) * cols + static_cast<std::size_t>(c);
      const std::uint32_t rv = sto ? rbits[i] : 0u;
      codes[i] = static_cast<std::uint8_t>(element_code<K, HW, PK>(p, x[i], m[0], sc[0], rv));
    }
  }
}

// The rows route: groups of G lanes (G divides 32), row-local blocks; the warp steps together so that the
// group reductions see every lane.
//  - short blocks (16-byte chunks, one chunk per lane per block: 1x128, MX, NVFP4 1D): each group takes
//    U blocks per step, loads all their chunks first, reduces the U amaxes, computes each
//    block's scale once (lane j of the group computes slot j's and shuffles it to the group), converts from
//    registers: one read of the input;
//  - long blocks (token, 1xN with N > 128): a warp per block, the amax sweep and the element sweep each with
//    U loads in flight per lane (the second sweep reads the block again, from L1 / L2);
//  - scalar loads (unaligned or odd shapes): one element per lane per step, both sweeps.
// With AmaxOnly (the row_amax diagnostic) each block's amax pattern goes to out.scales and the kernel stops
// there: the same loads and reductions, no scales, no conversion.
template <ElementKind K, bool HW, PolicyKind PK, bool AmaxOnly = false>
__global__ void __launch_bounds__(k_threads, 3) rows_kernel(const __grid_constant__ Plan p, int G, const float* x,
                                                         const std::uint32_t* rbits, const std::uint32_t* tensor,
                                                         Outputs out) {
  constexpr int U = k_unroll_of<HW, PK>;
  const bool sto = k_may_be_stochastic<HW, PK> && p.stochastic;
  const unsigned lane = threadIdx.x & 31;
  const unsigned gl = lane % static_cast<unsigned>(G);  // lane in group
  const unsigned grp = lane / static_cast<unsigned>(G);
  const unsigned gpw = 32 / static_cast<unsigned>(G);  // groups per warp
  const std::size_t warp = global_thread() / 32, warps = grid_threads() / 32;
  const std::size_t total = p.blocks();  // < 2^32 (make_plan)
  const std::uint32_t limit = amax_limit(p);
  const int ch = p.vec4 && p.bc % 4 == 0 ? 4 : 1;  // a chunk of four inside one block (bc == 1: scalar)
  const int span = G * ch;                       // elements a group covers per inner step
  const int steps = (p.bc + span - 1) / span;    // inner steps per block (uniform)
  const auto cols = static_cast<std::size_t>(p.cols);
  const std::uint32_t nbc32 = static_cast<std::uint32_t>(p.nbc);
  const bool exact = p.cols % p.bc == 0;  // blocks tile the rows: block b starts at element b * bc
  Nvfp4Tensor nv{};
  if (!AmaxOnly && p.scheme == Scheme::nvfp4) {
    nv = nvfp4_tensor(p, tensor[0], tensor[1]);
    if (global_thread() == 0 && out.tensor_scale) *out.tensor_scale = rules::bits_of(nv.s_dec);
  }
  // Element offset of block b's first element, and the end of its row segment (cols from the block start).
  auto block_start = [&](std::uint32_t b, std::size_t& off, int& len) {
    if (exact) {
      off = static_cast<std::size_t>(b) * static_cast<std::size_t>(p.bc);
      len = p.bc;
    } else {
      const std::uint32_t r = b / nbc32;
      const int c0 = static_cast<int>(b - r * nbc32) * p.bc;
      off = static_cast<std::size_t>(r) * cols + static_cast<std::size_t>(c0);
      len = min(p.bc, p.cols - c0);
    }
  };

  if (ch == 4 && steps == 1) {
    const std::size_t per_step = static_cast<std::size_t>(gpw) * U;  // blocks a warp takes per step
    for (std::size_t base = warp * per_step; base < total; base += warps * per_step) {
      float4 v[U];
      uint4 rr[U];
      std::uint32_t m[U], f[U];
      std::size_t off[U];
      bool in[U];
#pragma unroll
      for (int k = 0; k < U; ++k) {
        const std::size_t blk = base + static_cast<std::size_t>(k) * gpw + grp;
        int len = 0;
        off[k] = 0;
        if (blk < total) block_start(static_cast<std::uint32_t>(blk), off[k], len);
        const int c = static_cast<int>(gl) * 4;
        in[k] = c < len;
        off[k] += static_cast<std::size_t>(c);
        v[k] = in[k] ? *reinterpret_cast<const float4*>(x + off[k]) : make_float4(0, 0, 0, 0);
        rr[k] = in[k] && sto ? *reinterpret_cast<const uint4*>(rbits + off[k]) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int k = 0; k < U; ++k) {
        m[k] = 0;
        f[k] = 0;
        amax4(v[k], limit, m[k], f[k]);  // zeros (absent chunks) change neither
        group_reduce(G, m[k], f[k]);
      }
      if constexpr (AmaxOnly) {
#pragma unroll
        for (int k = 0; k < U; ++k) {
          const std::size_t blk = base + static_cast<std::size_t>(k) * gpw + grp;
          if (gl == 0 && blk < total) out.scales[blk] = m[k];
        }
      } else {
        // Each block's scale once: lane j of a group computes slot k0 + j's, then the group reads it.
        float mult[U];
        std::uint32_t word[U];
#pragma unroll
        for (int k = 0; k < U; ++k) mult[k] = 0.0f, word[k] = 0u;
        for (int k0 = 0; k0 < U; k0 += G) {  // one step unless G < U
          const int ks = k0 + static_cast<int>(gl);
          std::uint32_t ms = 0, fs = 0;
#pragma unroll
          for (int k = 0; k < U; ++k)
            if (k == ks) ms = m[k], fs = f[k];
          const BlockScale bs = block_scale(p, ms, fs, nv);
          const std::size_t blk = base + static_cast<std::size_t>(ks) * gpw + grp;
          if (ks < U && blk < total && out.scales) out.scales[blk] = bs.word;
#pragma unroll
          for (int k = 0; k < U; ++k) {
            if (k >= k0 && k < k0 + G) {  // warp-uniform
              const int src = static_cast<int>(grp) * G + (k - k0);
              mult[k] = __shfl_sync(0xFFFFFFFFu, bs.mult, src);
              word[k] = __shfl_sync(0xFFFFFFFFu, bs.word, src);
            }
          }
        }
#pragma unroll
        for (int k = 0; k < U; ++k) {
          if (!in[k]) continue;
          const std::uint32_t codes4 = code4<K, HW, PK>(p, v[k], rr[k], make_float4(mult[k], mult[k], mult[k], mult[k]),
                                                        make_uint4(word[k], word[k], word[k], word[k]));
          *reinterpret_cast<std::uint32_t*>(out.codes + off[k]) = codes4;
        }
      }
    }
    return;
  }

  if (ch == 4) {  // long blocks: G == 32, a warp per block
    for (std::size_t blk = warp; blk < total; blk += warps) {
      std::size_t off = 0;
      int len = 0;
      block_start(static_cast<std::uint32_t>(blk), off, len);
      const float* xb = x + off;
      std::uint32_t m = 0, f = 0;
      for (int s0 = 0; s0 < steps; s0 += U) {
        float4 v[U];
#pragma unroll
        for (int k = 0; k < U; ++k) {
          const int c = (s0 + k) * span + static_cast<int>(gl) * 4;
          v[k] = c < len ? *reinterpret_cast<const float4*>(xb + c) : make_float4(0, 0, 0, 0);
        }
#pragma unroll
        for (int k = 0; k < U; ++k) amax4(v[k], limit, m, f);
      }
      group_reduce(G, m, f);
      if constexpr (AmaxOnly) {
        if (gl == 0) out.scales[blk] = m;
      } else {
        const BlockScale bs = block_scale(p, m, f, nv);
        if (gl == 0 && out.scales) out.scales[blk] = bs.word;
        const float4 mult = make_float4(bs.mult, bs.mult, bs.mult, bs.mult);
        const uint4 word = make_uint4(bs.word, bs.word, bs.word, bs.word);
        for (int s0 = 0; s0 < steps; s0 += U) {
          float4 v[U];
          uint4 rr[U];
#pragma unroll
          for (int k = 0; k < U; ++k) {
            const int c = (s0 + k) * span + static_cast<int>(gl) * 4;
            v[k] = c < len ? *reinterpret_cast<const float4*>(xb + c) : make_float4(0, 0, 0, 0);
            rr[k] = c < len && sto ? *reinterpret_cast<const uint4*>(rbits + off + c) : make_uint4(0, 0, 0, 0);
          }
#pragma unroll
          for (int k = 0; k < U; ++k) {
            const int c = (s0 + k) * span + static_cast<int>(gl) * 4;
            if (c < len)
              *reinterpret_cast<std::uint32_t*>(out.codes + off + c) = code4<K, HW, PK>(p, v[k], rr[k], mult, word);
          }
        }
      }
    }
    return;
  }

  // Scalar loads: one element per lane per step.
  for (std::size_t base = warp * gpw; base < total; base += warps * gpw) {
    const std::size_t blk = base + grp;
    const bool valid = blk < total;
    std::size_t off = 0;
    int len = 0;
    if (valid) block_start(static_cast<std::uint32_t>(blk), off, len);
    const float* xb = x + off;
    std::uint32_t m = 0, f = 0;
    for (int s = 0; s < steps; ++s) {
      const int c = s * span + static_cast<int>(gl);
      if (c < len) amax_step(xb[c], limit, m, f);
    }
    group_reduce(G, m, f);
    if (!valid) continue;
    if constexpr (AmaxOnly) {
      if (gl == 0) out.scales[blk] = m;
    } else {
      const BlockScale bs = block_scale(p, m, f, nv);
      if (gl == 0 && out.scales) out.scales[blk] = bs.word;
      for (int s = 0; s < steps; ++s) {
        const int c = s * span + static_cast<int>(gl);
        if (c >= len) continue;
        const std::uint32_t rv = sto ? rbits[off + c] : 0u;
        out.codes[off + c] = static_cast<std::uint8_t>(element_code<K, HW, PK>(p, xb[c], bs.mult, bs.word, rv));
      }
    }
  }
}

// CTAs of `kernel` with `block` threads that one multiprocessor holds at once (the occupancy query, cached per
// kernel and block size): the launches are one wave of that many CTAs per multiprocessor.
template <class Kernel>
int ctas_per_sm(Kernel kernel, unsigned block) {
  static std::mutex mutex;
  static std::map<std::pair<const void*, unsigned>, int> cache;
  const auto key = std::make_pair(reinterpret_cast<const void*>(kernel), block);
  std::lock_guard<std::mutex> lock(mutex);
  if (const auto it = cache.find(key); it != cache.end()) return it->second;
  int n = 0;
  LOWBIT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, static_cast<int>(block), 0));
  return cache[key] = n < 1 ? 1 : n;
}

template <ElementKind K, bool HW, PolicyKind PK>
void launch_elements(const Plan& p, const float* x, const std::uint32_t* rbits, const Work& w, const Outputs& out,
                     cudaStream_t stream) {
  const auto kernel = elements_kernel<K, HW, PK>;
  const Launch2 l = elements_launch(p, multiprocessors(), ctas_per_sm(kernel, elements_block(p)));
  kernel<<<dim3(l.gx, l.gy), l.block, 0, stream>>>(p, x, rbits, w, out.codes);
  LOWBIT_CUDA_CHECK_LAUNCH();
}
template <ElementKind K, bool HW, PolicyKind PK, bool AmaxOnly = false>
void launch_rows(const Plan& p, const float* x, const std::uint32_t* rbits, const Work& w, const Outputs& out,
                 cudaStream_t stream) {
  const auto kernel = rows_kernel<K, HW, PK, AmaxOnly>;
  const RowsLaunch l = rows_launch(p, multiprocessors(), ctas_per_sm(kernel, k_threads));
  kernel<<<l.grid, l.block, 0, stream>>>(p, l.group, x, rbits, w.tensor, out);
  LOWBIT_CUDA_CHECK_LAUNCH();
}

struct RowsTag {
  template <ElementKind K, bool HW, PolicyKind PK>
  static void go(const Plan& q, const float* xx, const std::uint32_t* rb, const Work& ww, const Outputs& o,
                 cudaStream_t s) {
    launch_rows<K, HW, PK>(q, xx, rb, ww, o, s);
  }
};
struct ElementsTag {
  template <ElementKind K, bool HW, PolicyKind PK>
  static void go(const Plan& q, const float* xx, const std::uint32_t* rb, const Work& ww, const Outputs& o,
                 cudaStream_t s) {
    launch_elements<K, HW, PK>(q, xx, rb, ww, o, s);
  }
};

// The software conversion for a constant-row element kind, with the policy constant where it is one of
// the compiled ones.
template <class Tag, ElementKind K>
void software(const Plan& p, const float* x, const std::uint32_t* rbits, const Work& w, const Outputs& out,
              cudaStream_t stream) {
  switch (p.policy_kind) {
    case PolicyKind::cuda: return Tag::template go<K, false, PolicyKind::cuda>(p, x, rbits, w, out, stream);
    case PolicyKind::rne_satfinite:
      return Tag::template go<K, false, PolicyKind::rne_satfinite>(p, x, rbits, w, out, stream);
    case PolicyKind::runtime: return Tag::template go<K, false, PolicyKind::runtime>(p, x, rbits, w, out, stream);
  }
}

}  // namespace

int multiprocessors() {
  static const int sms = [] {
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return 1;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n < 1) return 1;
    return n;
  }();
  return sms;
}

void quantize(const Plan& plan, const float* x, const std::uint32_t* rbits, const Outputs& out, void* workspace,
              cudaStream_t stream) {
  if (!x || !out.codes || !out.scales || !workspace)
    throw std::invalid_argument("quantize: x, out.codes, out.scales and the workspace must be device pointers");
  if (plan.stochastic && !rbits)
    throw std::invalid_argument("quantize: stochastic rounding needs rbits (one random value per element)");
  if (plan.scale_format == ScaleFormat::ue8m0_packed && !out.packed_scales)
    throw std::invalid_argument("quantize: --scale-format ue8m0-packed needs out.packed_scales");
  if ((plan.scheme == Scheme::nvfp4 || plan.scheme == Scheme::nvfp4_2d) && !out.tensor_scale)
    throw std::invalid_argument("quantize: NVFP4 needs out.tensor_scale");
  Plan p = plan;
  // 16-byte loads need 16-byte aligned inputs and 4-byte aligned codes.
  auto aligned = [](const void* q, std::uintptr_t a) { return q == nullptr || reinterpret_cast<std::uintptr_t>(q) % a == 0; };
  if (!aligned(x, 16) || !aligned(rbits, 16) || !aligned(out.codes, 4)) p.vec4 = false;
  if (p.path == ElementPath::hardware && p.policy_kind != PolicyKind::cuda)
    throw std::invalid_argument("quantize: the hardware element path needs the cuda profile's element policy");
  if (p.path == ElementPath::hardware) {
    int dev = 0, major = 0, minor = 0;
    LOWBIT_CUDA_CHECK(cudaGetDevice(&dev));
    LOWBIT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    LOWBIT_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    if (major * 10 + minor < 89)
      throw std::invalid_argument("quantize: the hardware element path (cvt ... e4m3x2/e5m2x2) needs sm_89 or newer");
  }
  const Work w = carve(p, workspace);
  LOWBIT_CUDA_CHECK(cudaMemsetAsync(workspace, 0, 256 + 2 * align256(p.blocks() * 4), stream));
  const int sms = multiprocessors();

  const int amax_ctas = ctas_per_sm(tensor_amax_kernel, k_threads);
  if (p.needs_tensor_amax) {
    const Launch l = elementwise_launch(p, sms, amax_ctas);
    tensor_amax_kernel<<<l.grid, l.block, 0, stream>>>(p, x, w.tensor);
    LOWBIT_CUDA_CHECK_LAUNCH();
  }
  const bool hw = p.path == ElementPath::hardware;
  // The element pass for the plan's element kind, policy and path (the hardware path exists for e4m3 and
  // e5m2 under the cuda profile's policy only: make_plan checks it).
  auto elements = [&](auto launcher_tag) {
    using Tag = decltype(launcher_tag);
    switch (p.kind) {
      case ElementKind::e4m3:
        if (hw) return Tag::template go<ElementKind::e4m3, true, PolicyKind::cuda>(p, x, rbits, w, out, stream);
        return software<Tag, ElementKind::e4m3>(p, x, rbits, w, out, stream);
      case ElementKind::e5m2:
        if (hw) return Tag::template go<ElementKind::e5m2, true, PolicyKind::cuda>(p, x, rbits, w, out, stream);
        return software<Tag, ElementKind::e5m2>(p, x, rbits, w, out, stream);
      case ElementKind::e2m1: return software<Tag, ElementKind::e2m1>(p, x, rbits, w, out, stream);
      case ElementKind::generic:
        return software<Tag, ElementKind::generic>(p, x, rbits, w, out, stream);
    }
  };
  if (p.route == Route::rows) {
    elements(RowsTag{});
    return;
  }
  // General route: block amaxes (the tensor's own for a one-block tensor), scales, elements.
  if (p.blocks() == 1) {
    if (!p.needs_tensor_amax) {
      const Launch l = elementwise_launch(p, sms, amax_ctas);
      tensor_amax_kernel<<<l.grid, l.block, 0, stream>>>(p, x, w.tensor);
      LOWBIT_CUDA_CHECK_LAUNCH();
    }
    LOWBIT_CUDA_CHECK(cudaMemcpyAsync(w.amax, w.tensor, 4, cudaMemcpyDeviceToDevice, stream));
    LOWBIT_CUDA_CHECK(cudaMemcpyAsync(w.flags, w.tensor + 1, 4, cudaMemcpyDeviceToDevice, stream));
  } else if (p.bc == 1 && p.br >= p.rows) {
    const dim3 grid((static_cast<unsigned>(p.cols) + k_threads - 1) / k_threads,
                    static_cast<unsigned>((p.rows + k_slab - 1) / k_slab));
    column_amax_kernel<<<grid, k_threads, 0, stream>>>(p, x, w.amax, w.flags);
    LOWBIT_CUDA_CHECK_LAUNCH();
  } else {
    Plan q = p;
    if (q.bc % 4 != 0) q.vec4 = false;  // a chunk of four must lie inside one block
    const Launch l = elementwise_launch(q, sms, ctas_per_sm(block_amax_kernel, k_threads));
    block_amax_kernel<<<l.grid, l.block, 0, stream>>>(q, x, w.amax, w.flags);
    LOWBIT_CUDA_CHECK_LAUNCH();
  }
  const Launch ls = scales_launch(p);
  scales_kernel<<<ls.grid, ls.block, 0, stream>>>(p, w, out);
  LOWBIT_CUDA_CHECK_LAUNCH();
  elements(ElementsTag{});
}

void row_amax(const Plan& plan, const float* x, std::uint32_t* amax, cudaStream_t stream) {
  if (plan.route != Route::rows)
    throw std::invalid_argument("row_amax: the diagnostic covers the rows route (token, 1xN, MX, NVFP4 1D) only");
  if (!x || !amax) throw std::invalid_argument("row_amax: x and amax must be device pointers");
  Plan p = plan;
  if (reinterpret_cast<std::uintptr_t>(x) % 16 != 0) p.vec4 = false;
  Outputs out;
  out.scales = amax;
  // The kernel of a constant policy (four loads in flight per lane, as the fused pass of the 32-bit path).
  launch_rows<ElementKind::generic, false, PolicyKind::rne_satfinite, true>(p, x, nullptr, Work{}, out, stream);
}

}  // namespace lowbit::device::quant
