// The GPU's conversion instructions against the reference (lowbit/device/cvt.hpp).
//
// Instruction forms and their operand order are the PTX ISA's (CUDA 13.0, "cvt": for the x2 forms the
// first source operand lands in the upper half of the destination, the second in the lower half).
// The reference side is lowbit::convert, the constexpr integer code of reference/include/lowbit/
// convert.hpp, compiled for the device: nothing here re-implements a rounding rule.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "lowbit/convert.hpp"
#include "lowbit/device/check.hpp"
#include "lowbit/device/cvt.hpp"
#include "lowbit/format.hpp"

namespace lowbit::device {

namespace {

constexpr HwCvtInfo table[] = {
    {HwCvt::e4m3x2_f32_rn_satfinite, "e4m3x2.f32", "cvt.rn.satfinite.e4m3x2.f32", "f32", "e4m3", "rne", "satfinite",
     2, 89, false},
    {HwCvt::e5m2x2_f32_rn_satfinite, "e5m2x2.f32", "cvt.rn.satfinite.e5m2x2.f32", "f32", "e5m2", "rne", "satfinite",
     2, 89, false},
    {HwCvt::e4m3x2_f16x2_rn_satfinite, "e4m3x2.f16x2", "cvt.rn.satfinite.e4m3x2.f16x2", "f16", "e4m3", "rne",
     "satfinite", 2, 89, false},
    {HwCvt::e5m2x2_f16x2_rn_satfinite, "e5m2x2.f16x2", "cvt.rn.satfinite.e5m2x2.f16x2", "f16", "e5m2", "rne",
     "satfinite", 2, 89, false},
    {HwCvt::f16x2_e4m3x2_rn, "f16x2.e4m3x2", "cvt.rn.f16x2.e4m3x2", "e4m3", "f16", "rne", nullptr, 2, 89, false},
    {HwCvt::f16x2_e5m2x2_rn, "f16x2.e5m2x2", "cvt.rn.f16x2.e5m2x2", "e5m2", "f16", "rne", nullptr, 2, 89, false},
    {HwCvt::f16_f32_rn, "f16.f32.rn", "cvt.rn.f16.f32", "f32", "f16", "rne", nullptr, 1, 53, false},
    {HwCvt::f16_f32_rz, "f16.f32.rz", "cvt.rz.f16.f32", "f32", "f16", "rtz", nullptr, 1, 53, false},
    {HwCvt::f16_f32_rm, "f16.f32.rm", "cvt.rm.f16.f32", "f32", "f16", "rdn", nullptr, 1, 53, false},
    {HwCvt::f16_f32_rp, "f16.f32.rp", "cvt.rp.f16.f32", "f32", "f16", "rup", nullptr, 1, 53, false},
    {HwCvt::bf16_f32_rn, "bf16.f32.rn", "cvt.rn.bf16.f32", "f32", "bf16", "rne", nullptr, 1, 80, false},
    {HwCvt::bf16_f32_rz, "bf16.f32.rz", "cvt.rz.bf16.f32", "f32", "bf16", "rtz", nullptr, 1, 80, false},
    {HwCvt::bf16_f32_rm, "bf16.f32.rm", "cvt.rm.bf16.f32", "f32", "bf16", "rdn", nullptr, 1, 90, false},
    {HwCvt::bf16_f32_rp, "bf16.f32.rp", "cvt.rp.bf16.f32", "f32", "bf16", "rup", nullptr, 1, 90, false},
    {HwCvt::e2m1x2_f32_rn_satfinite, "e2m1x2.f32", "cvt.rn.satfinite.e2m1x2.f32", "f32", "e2m1", "rne", "satfinite",
     2, 100, true},
    {HwCvt::e2m3x2_f32_rn_satfinite, "e2m3x2.f32", "cvt.rn.satfinite.e2m3x2.f32", "f32", "e2m3", "rne", "satfinite",
     2, 100, true},
    {HwCvt::e3m2x2_f32_rn_satfinite, "e3m2x2.f32", "cvt.rn.satfinite.e3m2x2.f32", "f32", "e3m2", "rne", "satfinite",
     2, 100, true},
    {HwCvt::ue8m0x2_f32_rz_satfinite, "ue8m0x2.f32.rz", "cvt.rz.satfinite.ue8m0x2.f32", "f32", "e8m0", "rtz",
     "satfinite", 2, 100, true},
    {HwCvt::ue8m0x2_f32_rp_satfinite, "ue8m0x2.f32.rp", "cvt.rp.satfinite.ue8m0x2.f32", "f32", "e8m0", "rup",
     "satfinite", 2, 100, true},
};

// Whether this compilation pass may emit the form.  The Blackwell forms need an architecture-specific
// (sm_100a, sm_120a, ...) target (guarded where they are issued); the FP8 forms sm_89; the others every
// target built here.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
constexpr bool device_has_fp8_cvt = true;
#else
constexpr bool device_has_fp8_cvt = false;
#endif

struct Counters {
  unsigned long long mismatches;
  unsigned int recorded;
  unsigned int unsupported;  // set when the image running has no code for the form
};

// One instruction on (lo, hi) source codes; returns the destination bits (lane 0 in the low half).
// `ok` is cleared when this image cannot execute the form.
template <HwCvt W>
__device__ __forceinline__ std::uint32_t hardware(std::uint32_t lo, std::uint32_t hi, bool& ok) {
  [[maybe_unused]] const float flo = __uint_as_float(lo);
  [[maybe_unused]] const float fhi = __uint_as_float(hi);
  std::uint32_t r = 0;
  if constexpr (W == HwCvt::f16_f32_rn || W == HwCvt::f16_f32_rz || W == HwCvt::f16_f32_rm ||
                W == HwCvt::f16_f32_rp || W == HwCvt::bf16_f32_rn || W == HwCvt::bf16_f32_rz) {
    unsigned short h = 0;
    if constexpr (W == HwCvt::f16_f32_rn) asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(flo));
    if constexpr (W == HwCvt::f16_f32_rz) asm("cvt.rz.f16.f32 %0, %1;" : "=h"(h) : "f"(flo));
    if constexpr (W == HwCvt::f16_f32_rm) asm("cvt.rm.f16.f32 %0, %1;" : "=h"(h) : "f"(flo));
    if constexpr (W == HwCvt::f16_f32_rp) asm("cvt.rp.f16.f32 %0, %1;" : "=h"(h) : "f"(flo));
    if constexpr (W == HwCvt::bf16_f32_rn) asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(flo));
    if constexpr (W == HwCvt::bf16_f32_rz) asm("cvt.rz.bf16.f32 %0, %1;" : "=h"(h) : "f"(flo));
    r = h;
  } else if constexpr (W == HwCvt::bf16_f32_rm || W == HwCvt::bf16_f32_rp) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    unsigned short h = 0;
    if constexpr (W == HwCvt::bf16_f32_rm) asm("cvt.rm.bf16.f32 %0, %1;" : "=h"(h) : "f"(flo));
    if constexpr (W == HwCvt::bf16_f32_rp) asm("cvt.rp.bf16.f32 %0, %1;" : "=h"(h) : "f"(flo));
    r = h;
#else
    ok = false;
#endif
  } else if constexpr (W == HwCvt::e4m3x2_f32_rn_satfinite || W == HwCvt::e5m2x2_f32_rn_satfinite ||
                       W == HwCvt::e4m3x2_f16x2_rn_satfinite || W == HwCvt::e5m2x2_f16x2_rn_satfinite ||
                       W == HwCvt::f16x2_e4m3x2_rn || W == HwCvt::f16x2_e5m2x2_rn) {
    if constexpr (device_has_fp8_cvt) {
      unsigned short h = 0;
      const std::uint32_t packed16 = (lo & 0xFFFFu) | (hi << 16);  // f16x2: lane 0 in the low half
      const unsigned short packed8 = static_cast<unsigned short>((lo & 0xFFu) | ((hi & 0xFFu) << 8));
      if constexpr (W == HwCvt::e4m3x2_f32_rn_satfinite)
        asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(h) : "f"(fhi), "f"(flo));
      if constexpr (W == HwCvt::e5m2x2_f32_rn_satfinite)
        asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(h) : "f"(fhi), "f"(flo));
      if constexpr (W == HwCvt::e4m3x2_f16x2_rn_satfinite)
        asm("cvt.rn.satfinite.e4m3x2.f16x2 %0, %1;" : "=h"(h) : "r"(packed16));
      if constexpr (W == HwCvt::e5m2x2_f16x2_rn_satfinite)
        asm("cvt.rn.satfinite.e5m2x2.f16x2 %0, %1;" : "=h"(h) : "r"(packed16));
      if constexpr (W == HwCvt::f16x2_e4m3x2_rn) asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(r) : "h"(packed8));
      if constexpr (W == HwCvt::f16x2_e5m2x2_rn) asm("cvt.rn.f16x2.e5m2x2 %0, %1;" : "=r"(r) : "h"(packed8));
      if constexpr (W != HwCvt::f16x2_e4m3x2_rn && W != HwCvt::f16x2_e5m2x2_rn) r = h;
    } else {
      ok = false;
    }
  } else {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000 && \
    (defined(__CUDA_ARCH_FAMILY_SPECIFIC__) || defined(__CUDA_ARCH_SPECIFIC__))
    unsigned short h = 0;
    if constexpr (W == HwCvt::e2m1x2_f32_rn_satfinite)
      asm("{ .reg .b8 t; cvt.rn.satfinite.e2m1x2.f32 t, %1, %2; mov.b16 %0, {t, 0}; }"
          : "=h"(h)
          : "f"(fhi), "f"(flo));
    if constexpr (W == HwCvt::e2m3x2_f32_rn_satfinite)
      asm("cvt.rn.satfinite.e2m3x2.f32 %0, %1, %2;" : "=h"(h) : "f"(fhi), "f"(flo));
    if constexpr (W == HwCvt::e3m2x2_f32_rn_satfinite)
      asm("cvt.rn.satfinite.e3m2x2.f32 %0, %1, %2;" : "=h"(h) : "f"(fhi), "f"(flo));
    if constexpr (W == HwCvt::ue8m0x2_f32_rz_satfinite)
      asm("cvt.rz.satfinite.ue8m0x2.f32 %0, %1, %2;" : "=h"(h) : "f"(fhi), "f"(flo));
    if constexpr (W == HwCvt::ue8m0x2_f32_rp_satfinite)
      asm("cvt.rp.satfinite.ue8m0x2.f32 %0, %1, %2;" : "=h"(h) : "f"(fhi), "f"(flo));
    if constexpr (W == HwCvt::e2m1x2_f32_rn_satfinite) {
      // e2m1x2 packs two nibbles into one byte: re-spread them so that lane 1 sits at bit 8 as in the
      // other forms.
      h = static_cast<unsigned short>((h & 0xFu) | ((h & 0xF0u) << 4));
    }
    r = h;
#else
    ok = false;
#endif
  }
  return r;
}

struct Params {
  Format from;
  Format to;
  Policy policy;
  std::uint64_t begin;
  std::uint64_t count;
  std::uint32_t sign_bit;   // of the source format: the high lane's input is u ^ sign_bit
  std::uint32_t lane_bits;  // width of one lane of the destination (8 or 16)
  int lanes;
  unsigned max_report;
};

template <HwCvt W>
__global__ void sweep_kernel(Params p, Counters* counters, SweepMismatch* report) {
  const std::uint64_t stride = static_cast<std::uint64_t>(blockDim.x) * gridDim.x;
  const std::uint32_t lane_mask = p.lane_bits == 32 ? 0xFFFFFFFFu : ((1u << p.lane_bits) - 1u);
  for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.count; i += stride) {
    const std::uint32_t u = static_cast<std::uint32_t>(p.begin + i);
    const std::uint32_t v = u ^ p.sign_bit;
    bool ok = true;
    const std::uint32_t h = hardware<W>(u, p.lanes == 2 ? v : 0u, ok);
    if (!ok) {
      atomicOr(&counters->unsupported, 1u);
      return;
    }
    for (int lane = 0; lane < p.lanes; ++lane) {
      const std::uint32_t input = lane == 0 ? u : v;
      const std::uint32_t got = (h >> (lane * p.lane_bits)) & lane_mask;
      const std::uint32_t want = static_cast<std::uint32_t>(convert(p.from, input, p.to, p.policy).code);
      if (got != want) {
        atomicAdd(&counters->mismatches, 1ull);
        const unsigned slot = atomicAdd(&counters->recorded, 1u);
        if (slot < p.max_report) report[slot] = {input, static_cast<std::uint32_t>(lane), got, want};
      }
    }
  }
}

template <HwCvt W>
cudaError_t launch(const Params& p, Counters* c, SweepMismatch* r, cudaStream_t s) {
  constexpr unsigned threads = 256;
  const std::uint64_t wanted = (p.count + threads - 1) / threads;
  const unsigned blocks = static_cast<unsigned>(std::min<std::uint64_t>(wanted, 132ull * 32));
  sweep_kernel<W><<<blocks, threads, 0, s>>>(p, c, r);
  return cudaGetLastError();
}

cudaError_t dispatch(HwCvt w, const Params& p, Counters* c, SweepMismatch* r, cudaStream_t s) {
  switch (w) {
#define LOWBIT_CASE(x) \
  case HwCvt::x:       \
    return launch<HwCvt::x>(p, c, r, s);
    LOWBIT_CASE(e4m3x2_f32_rn_satfinite)
    LOWBIT_CASE(e5m2x2_f32_rn_satfinite)
    LOWBIT_CASE(e4m3x2_f16x2_rn_satfinite)
    LOWBIT_CASE(e5m2x2_f16x2_rn_satfinite)
    LOWBIT_CASE(f16x2_e4m3x2_rn)
    LOWBIT_CASE(f16x2_e5m2x2_rn)
    LOWBIT_CASE(f16_f32_rn)
    LOWBIT_CASE(f16_f32_rz)
    LOWBIT_CASE(f16_f32_rm)
    LOWBIT_CASE(f16_f32_rp)
    LOWBIT_CASE(bf16_f32_rn)
    LOWBIT_CASE(bf16_f32_rz)
    LOWBIT_CASE(bf16_f32_rm)
    LOWBIT_CASE(bf16_f32_rp)
    LOWBIT_CASE(e2m1x2_f32_rn_satfinite)
    LOWBIT_CASE(e2m3x2_f32_rn_satfinite)
    LOWBIT_CASE(e3m2x2_f32_rn_satfinite)
    LOWBIT_CASE(ue8m0x2_f32_rz_satfinite)
    LOWBIT_CASE(ue8m0x2_f32_rp_satfinite)
#undef LOWBIT_CASE
  }
  return cudaErrorInvalidValue;
}

const Format* format_named(const char* name) {
  for (const Format* f : {&formats::f32, &formats::f16, &formats::bf16, &formats::e4m3, &formats::e5m2,
                          &formats::e2m1, &formats::e2m3, &formats::e3m2, &formats::e8m0})
    if (std::string_view(f->name) == name) return f;
  return nullptr;
}

}  // namespace

std::span<const HwCvtInfo> hardware_conversions() { return table; }

const HwCvtInfo* find_hardware_conversion(std::string_view name) {
  for (const HwCvtInfo& c : table)
    if (name == c.name) return &c;
  return nullptr;
}

std::vector<SweepChunk> sweep_chunks(std::uint64_t total, std::uint64_t per_launch) {
  if (per_launch == 0) throw std::invalid_argument("sweep_chunks: per_launch must be positive");
  std::vector<SweepChunk> v;
  for (std::uint64_t b = 0; b < total; b += per_launch) v.push_back({b, std::min(per_launch, total - b)});
  return v;
}

SweepResult sweep(const HwCvtInfo& cvt, const Format& to, const Policy& policy, std::uint64_t begin,
                  std::uint64_t count, int max_report) {
  const Format* from = format_named(cvt.from);
  if (!from) throw Error(std::string("sweep: unknown source format ") + cvt.from);
  const std::uint64_t all = std::uint64_t{1} << from->bits;
  if (count == 0) count = all - begin;
  if (begin >= all || count > all - begin)
    throw std::invalid_argument("sweep: range [" + std::to_string(begin) + ", +" + std::to_string(count) +
                                ") exceeds the " + std::to_string(all) + " codes of " + from->name);
  const GpuProbe probe = probe_gpu();
  if (!probe.present) throw Error(probe.why);
  require_capability(probe.info, cvt.min_capability, cvt.ptx);

  Params p{};
  p.from = *from;
  p.to = to;
  p.policy = policy;
  p.sign_bit = std::uint32_t{1} << (from->bits - 1);
  p.lane_bits = cvt.lanes == 2 ? 16u : 32u;
  if (cvt.lanes == 2 && (std::string_view(cvt.to) != "f16")) p.lane_bits = 8;
  p.lanes = cvt.lanes;
  p.max_report = static_cast<unsigned>(std::max(0, max_report));

  Counters* counters = nullptr;
  SweepMismatch* report = nullptr;
  LOWBIT_CUDA_CHECK(cudaMalloc(&counters, sizeof(Counters)));
  LOWBIT_CUDA_CHECK(cudaMalloc(&report, sizeof(SweepMismatch) * std::max(1, max_report)));
  LOWBIT_CUDA_CHECK(cudaMemset(counters, 0, sizeof(Counters)));
  cudaEvent_t start, stop;
  LOWBIT_CUDA_CHECK(cudaEventCreate(&start));
  LOWBIT_CUDA_CHECK(cudaEventCreate(&stop));
  LOWBIT_CUDA_CHECK(cudaEventRecord(start));
  // Launches of at most 2^30 codes each keep any one kernel short (no watchdog surprises).
  for (const SweepChunk& c : sweep_chunks(count, std::uint64_t{1} << 30)) {
    p.begin = begin + c.begin;
    p.count = c.count;
    LOWBIT_CUDA_CHECK(dispatch(cvt.id, p, counters, report, nullptr));
  }
  LOWBIT_CUDA_CHECK(cudaEventRecord(stop));
  LOWBIT_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  LOWBIT_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  Counters host{};
  LOWBIT_CUDA_CHECK(cudaMemcpy(&host, counters, sizeof host, cudaMemcpyDeviceToHost));
  SweepResult r;
  r.inputs = count;
  r.comparisons = count * static_cast<std::uint64_t>(cvt.lanes);
  r.mismatches = host.mismatches;
  r.milliseconds = ms;
  const unsigned n = std::min<unsigned>(host.recorded, p.max_report);
  r.first.resize(n);
  if (n) LOWBIT_CUDA_CHECK(cudaMemcpy(r.first.data(), report, sizeof(SweepMismatch) * n, cudaMemcpyDeviceToHost));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(counters);
  cudaFree(report);
  if (host.unsupported)
    throw Error(std::string("this binary holds no code for ") + cvt.ptx + " on " + probe.info.name +
                (cvt.needs_blackwell ? " (it needs an sm_100a or sm_120a build)" : ""));
  return r;
}

}  // namespace lowbit::device
