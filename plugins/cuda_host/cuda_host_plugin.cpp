// A gate subject wrapping the CUDA toolkit's host conversions (cuda_fp8.h, cuda_fp6.h, cuda_fp4.h,
// cuda_fp16.h, cuda_bf16.h) compiled by the host compiler, where they run the toolkit's software
// emulation of the `cvt` instructions.  It converts from f32 under the `cuda` profile, with the
// rounding and saturation each toolkit function offers (conformance/checks/cuda_host.cpp lists the
// same 19 functions); everything else is reported as unsupported.  The toolkit reports no flags.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp4.h>
#include <cuda_fp6.h>
#include <cuda_fp8.h>

#include <bit>
#include <cstdint>
#include <cstring>

#include "lowbit/plugin.h"

namespace {

template <class T>
std::uint32_t raw16(T v) {
  std::uint16_t u;
  std::memcpy(&u, &v, sizeof u);
  return u;
}

struct Subject {
  const char* to;
  const char* rounding;
  const char* overflow;
  std::uint32_t (*convert)(float);
};

const Subject subjects[] = {
    {"e4m3", "rne", "satfinite", [](float x) -> std::uint32_t { return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3); }},
    {"e4m3", "rne", "nosat", [](float x) -> std::uint32_t { return __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E4M3); }},
    {"e5m2", "rne", "satfinite", [](float x) -> std::uint32_t { return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2); }},
    {"e5m2", "rne", "nosat", [](float x) -> std::uint32_t { return __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E5M2); }},
    {"e2m3", "rne", "satfinite",
     [](float x) -> std::uint32_t { return __nv_cvt_float_to_fp6(x, __NV_E2M3, cudaRoundNearest); }},
    {"e3m2", "rne", "satfinite",
     [](float x) -> std::uint32_t { return __nv_cvt_float_to_fp6(x, __NV_E3M2, cudaRoundNearest); }},
    {"e2m1", "rne", "satfinite",
     [](float x) -> std::uint32_t { return __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest); }},
    {"e8m0", "rtz", "satfinite",
     [](float x) -> std::uint32_t { return __nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundZero); }},
    {"e8m0", "rtz", "nosat", [](float x) -> std::uint32_t { return __nv_cvt_float_to_e8m0(x, __NV_NOSAT, cudaRoundZero); }},
    {"e8m0", "rup", "satfinite",
     [](float x) -> std::uint32_t { return __nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundPosInf); }},
    {"e8m0", "rup", "nosat",
     [](float x) -> std::uint32_t { return __nv_cvt_float_to_e8m0(x, __NV_NOSAT, cudaRoundPosInf); }},
    {"f16", "rne", "nosat", [](float x) { return raw16(__float2half_rn(x)); }},
    {"f16", "rtz", "nosat", [](float x) { return raw16(__float2half_rz(x)); }},
    {"f16", "rup", "nosat", [](float x) { return raw16(__float2half_ru(x)); }},
    {"f16", "rdn", "nosat", [](float x) { return raw16(__float2half_rd(x)); }},
    {"bf16", "rne", "nosat", [](float x) { return raw16(__float2bfloat16_rn(x)); }},
    {"bf16", "rtz", "nosat", [](float x) { return raw16(__float2bfloat16_rz(x)); }},
    {"bf16", "rup", "nosat", [](float x) { return raw16(__float2bfloat16_ru(x)); }},
    {"bf16", "rdn", "nosat", [](float x) { return raw16(__float2bfloat16_rd(x)); }},
};

bool is(const char* a, const char* b) { return a && std::strcmp(a, b) == 0; }

int convert(const char* from, const char* to, const lowbit_policy* p, const void* in, uint64_t n, void* out, uint8_t*,
            int* flags_written) {
  *flags_written = 0;
  if (!is(from, "f32") || !is(p->profile, "cuda") || !is(p->subnormals, "keep") || !is(p->tininess, "after"))
    return LOWBIT_PLUGIN_UNSUPPORTED;
  for (const Subject& s : subjects) {
    if (!is(to, s.to) || !is(p->rounding, s.rounding) || !is(p->overflow, s.overflow)) continue;
    const bool wide = is(to, "f16") || is(to, "bf16");
    for (uint64_t i = 0; i < n; ++i) {
      std::uint32_t u;
      std::memcpy(&u, static_cast<const std::uint8_t*>(in) + 4 * i, 4);
      const std::uint32_t code = s.convert(std::bit_cast<float>(u));
      if (wide) {
        const std::uint16_t c16 = static_cast<std::uint16_t>(code);
        std::memcpy(static_cast<std::uint8_t*>(out) + 2 * i, &c16, 2);
      } else {
        static_cast<std::uint8_t*>(out)[i] = static_cast<std::uint8_t>(code);
      }
    }
    return LOWBIT_PLUGIN_OK;
  }
  return LOWBIT_PLUGIN_UNSUPPORTED;
}

const lowbit_plugin table = {LOWBIT_PLUGIN_ABI_VERSION, sizeof(lowbit_plugin),
                             "cuda-host (CUDA toolkit host conversions from f32)", convert, nullptr, nullptr, nullptr, nullptr};

}  // namespace

extern "C" LOWBIT_PLUGIN_EXPORT const lowbit_plugin* lowbit_plugin_entry(uint32_t host_abi_version) {
  return host_abi_version == LOWBIT_PLUGIN_ABI_VERSION ? &table : nullptr;
}
