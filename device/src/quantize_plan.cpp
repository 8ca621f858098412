// Host side of the device quantizers: option checks, the plan, buffer sizes and launch shapes
// (lowbit/device/quantize.hpp).  Plain C++, tested without a GPU (tests/quantize_host_test.cpp).
#include <algorithm>
#include <stdexcept>
#include <string>

#include "lowbit/device/quantize.hpp"
#include "lowbit/fast_convert.hpp"
#include "lowbit/profile.hpp"

namespace lowbit::device::quant {

using scale::Scheme;
using scale::ScaleFormat;

bool same_policy(const Policy& a, const Policy& b) {
  return a.rounding == b.rounding && a.overflow == b.overflow && a.subnormals == b.subnormals &&
         a.tininess == b.tininess && a.sr_bits == b.sr_bits && a.quirks == b.quirks;
}

Policy cuda_profile_policy(const Format& element) {
  PolicyRequest req;
  req.rounding = Rounding::rne;
  req.overflow = Overflow::satfinite;
  std::string error;
  const auto r = resolve(find_profile("cuda"), element, req, error);
  if (!r) throw std::invalid_argument("--profile cuda: " + error);
  return r->policy;
}

Plan make_plan(int rows, int cols, const scale::Options& options, ElementPath path, float delayed_scale) {
  scale::Options o = options;
  if (const std::string e = scale::normalize(o); !e.empty()) throw std::invalid_argument(e);
  if (rows <= 0 || cols <= 0) throw std::invalid_argument("--shape: the device quantizers need rows > 0 and cols > 0");
  if (o.hadamard != scale::Hadamard::none)
    throw std::invalid_argument("--hadamard: not implemented by the device quantizers");
  // TE's kernel and its fast-math multiplier; not 4over6 or the libraries' and exporters' arithmetic.
  if (o.variant != scale::Variant::standard && o.variant != scale::Variant::fast_math)
    throw std::invalid_argument(std::string("--variant ") + std::string(name(o.variant)) +
                                ": not implemented by the device quantizers");
  if (o.scheme == Scheme::nvfp4_1level)
    throw std::invalid_argument("--scheme nvfp4-1level: not implemented by the device quantizers");
  const Format& el = *o.element;
  Plan p;
  p.rows = rows;
  p.cols = cols;
  p.scheme = o.scheme;
  switch (o.scheme) {
    case Scheme::tensor:
    case Scheme::delayed: p.br = rows, p.bc = cols; break;
    case Scheme::channel: p.br = rows, p.bc = 1; break;
    case Scheme::token: p.br = 1, p.bc = cols; break;
    case Scheme::block: p.br = o.block_rows > 0 ? o.block_rows : 1, p.bc = o.block; break;
    case Scheme::mx: p.br = 1, p.bc = o.block; break;
    case Scheme::nvfp4: p.br = 1, p.bc = 16; break;
    case Scheme::nvfp4_2d: p.br = 16, p.bc = 16; break;
    case Scheme::nvfp4_1level: break;
  }
  if (p.bc <= 0 || p.br <= 0) throw std::invalid_argument("--block: must be positive");
  p.nbr = (rows + p.br - 1) / p.br;
  p.nbc = (cols + p.bc - 1) / p.bc;
  if (p.blocks() > 0xFFFFFFFFu) throw std::invalid_argument("--shape: the device quantizers need fewer than 2^32 blocks");
  p.scale_format = o.scale_format;
  p.mx_rule = o.mx_rule;
  p.nonfinite = o.nonfinite;
  p.amax_propagates_nan = o.amax_propagates_nan;
  p.eps = o.eps;
  p.zero_reference = o.zero_scale == scale::ZeroScale::reference;
  p.fast_math = o.variant == scale::Variant::fast_math;
  p.delayed_scale = delayed_scale;
  p.element = el;
  p.policy = o.element_policy;
  p.stochastic = is_stochastic(p.policy.rounding);
  p.elem_max = static_cast<float>(max_value(el));
  p.emax = el.emax();
  p.mantissa_bits = el.mantissa_bits;
  if (same_format(el, formats::e4m3)) p.kind = ElementKind::e4m3;
  else if (same_format(el, formats::e5m2)) p.kind = ElementKind::e5m2;
  else if (same_format(el, formats::e2m1)) p.kind = ElementKind::e2m1;
  else p.kind = ElementKind::generic;
  p.path = path;
  if (path == ElementPath::hardware) {
    if (p.kind != ElementKind::e4m3 && p.kind != ElementKind::e5m2)
      throw std::invalid_argument(std::string("--element-path hardware: Hopper's cvt converts into e4m3 and e5m2 only, not ") +
                                  el.name);
    if (!same_policy(p.policy, cuda_profile_policy(el)))
      throw std::invalid_argument(
          "--element-path hardware: cvt.rn.satfinite stands for the cuda profile's element policy (--profile cuda "
          "--rounding rne --overflow satfinite: NaN becomes the canonical 0x7F); set Options.element_policy to "
          "cuda_profile_policy(element)");
  }
  if (same_policy(p.policy, k_cuda_policy)) p.policy_kind = PolicyKind::cuda;
  else if (same_policy(p.policy, k_rne_satfinite_policy)) p.policy_kind = PolicyKind::rne_satfinite;
  else p.policy_kind = PolicyKind::runtime;
  // The constant policy kinds run the 32-bit path (lowbit/fast_convert.hpp); an element it does not cover
  // (the fixed-point int8 rows) takes the general conversion with the policy read at run time.
  if (p.policy_kind != PolicyKind::runtime && !fast::applies(formats::f32, el, p.policy)) p.policy_kind = PolicyKind::runtime;
  const bool row_local = p.br == 1 && (o.scheme == Scheme::token || o.scheme == Scheme::block ||
                                       o.scheme == Scheme::mx || o.scheme == Scheme::nvfp4);
  p.route = row_local && p.scale_format != ScaleFormat::ue8m0_packed ? Route::rows : Route::general;
  p.vec4 = cols % 4 == 0 && (p.bc % 4 == 0 || p.bc == 1);
  p.needs_tensor_amax = o.scheme == Scheme::tensor || o.scheme == Scheme::delayed || o.scheme == Scheme::nvfp4 ||
                        o.scheme == Scheme::nvfp4_2d;
  return p;
}

std::size_t workspace_bytes(const Plan& p) {
  const std::size_t n = (p.blocks() * 4 + 255) / 256 * 256;
  return 256 + 4 * n;
}

int chunk(const Plan& p) { return p.vec4 ? 4 : 1; }

Launch elementwise_launch(const Plan& p, int sms, int ctas_per_sm) {
  const std::size_t work = (p.elements() + static_cast<std::size_t>(chunk(p)) - 1) / static_cast<std::size_t>(chunk(p));
  const std::size_t wanted = (work + k_threads - 1) / k_threads;
  const std::size_t cap = static_cast<std::size_t>(std::max(sms, 1)) * static_cast<std::size_t>(std::max(ctas_per_sm, 1));
  return {static_cast<unsigned>(std::max<std::size_t>(1, std::min(wanted, cap))), k_threads};
}

unsigned elements_block(const Plan& p) {
  const int ch = chunk(p);
  const unsigned per_row = static_cast<unsigned>((p.cols + ch - 1) / ch);
  return std::min<unsigned>(k_threads, (per_row + 31) / 32 * 32);
}

Launch2 elements_launch(const Plan& p, int sms, int ctas_per_sm) {
  const int ch = chunk(p);
  const unsigned per_row = static_cast<unsigned>((p.cols + ch - 1) / ch);
  const unsigned block = elements_block(p);
  const unsigned gx = (per_row + block - 1) / block;
  const unsigned want = static_cast<unsigned>(std::max(sms, 1)) * static_cast<unsigned>(std::max(ctas_per_sm, 1));
  const unsigned gy = std::max(1u, std::min({static_cast<unsigned>(p.rows), 65535u, want / gx}));
  return {gx, gy, block};
}

Launch scales_launch(const Plan& p) {
  const std::size_t per = p.scale_format == ScaleFormat::ue8m0_packed ? 4 : 1;
  const std::size_t n = (p.blocks() + per - 1) / per;
  return {static_cast<unsigned>(std::max<std::size_t>(1, (n + k_threads - 1) / k_threads)), k_threads};
}

RowsLaunch rows_launch(const Plan& p, int sms, int ctas_per_sm) {
  const int per = (p.bc + chunk(p) - 1) / chunk(p);  // chunks in one block
  int g = 1;
  while (g < per && g < 32) g *= 2;
  const std::size_t groups_per_warp = static_cast<std::size_t>(32 / g);
  const std::size_t warps = (p.blocks() + groups_per_warp - 1) / groups_per_warp;
  const std::size_t wanted = (warps * 32 + k_threads - 1) / k_threads;
  const std::size_t cap = static_cast<std::size_t>(std::max(sms, 1)) * static_cast<std::size_t>(std::max(ctas_per_sm, 1));
  return {static_cast<unsigned>(std::max<std::size_t>(1, std::min(wanted, cap))), k_threads, g};
}

int input_reads(const Plan& p) {
  int reads = p.needs_tensor_amax ? 1 : 0;  // the tensor amax pass
  if (p.route == Route::rows) return reads + 1;  // one fused pass (long blocks re-read a block from L1 / L2)
  if (p.blocks() == 1) return (p.needs_tensor_amax ? reads : reads + 1) + 1;  // the tensor's amax, the elements
  return reads + 2;  // block amaxes, then the elements
}

}  // namespace lowbit::device::quant
