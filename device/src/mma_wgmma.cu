// The wgmma probe (sm_90a only: this source's target is compiled for CUDA architecture 90a alone, and
// the kernel body is further guarded by __CUDA_ARCH_FEAT_SM90_ALL).
//
// One warpgroup (128 threads) per CTA and one 64 x 8 tile at a time: the threads copy A (64 x Ktot) and
// B (Ktot x 8, stored N-major, i.e. K-major per column as the B operand wants it) into shared memory in
// the no-swizzle core-matrix layout of mma.hpp (smem_offset), fence the generic-proxy writes for the
// async proxy, then issue `chain` wgmma.mma_async instructions on the same accumulator registers inside
// one wgmma.fence / commit_group / wait_group 0 bracket (PTX ISA "Asynchronous Warpgroup Level Matrix
// Multiply-Accumulate Instructions": wgmma.fence, wgmma.mma_async, wgmma.commit_group, wgmma.wait_group).
//   fp8:  wgmma.mma_async.sync.aligned.m64n8k32.f32.{e4m3,e5m2}.{e4m3,e5m2} d, a-desc, b-desc, scale-d,
//         imm-scale-a, imm-scale-b
//   f16/bf16: wgmma.mma_async.sync.aligned.m64n8k16.f32.{f16,bf16}.{f16,bf16} d, a-desc, b-desc, scale-d,
//         imm-scale-a, imm-scale-b, imm-trans-a, imm-trans-b   (trans 0: K-major, as laid out here)
// scale-d = 1 (D = A B + D), imm-scale-a = imm-scale-b = 1 (no negation).
#include <cuda_runtime.h>

#include <string>

#include "lowbit/device/check.hpp"
#include "lowbit/device/mma.hpp"

namespace lowbit::device::mma {

namespace {

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define LOWBIT_WGMMA 1
#else
#define LOWBIT_WGMMA 0
#endif

#if LOWBIT_WGMMA
template <Kind K>
__device__ __forceinline__ void wgmma(float& d0, float& d1, float& d2, float& d3, std::uint64_t da,
                                      std::uint64_t db) {
#define LOWBIT_WGMMA_FP8(TYPES)                                                                              \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                                                    \
               "wgmma.mma_async.sync.aligned.m64n8k32.f32." TYPES " {%0, %1, %2, %3}, %4, %5, p, 1, 1;\n}\n" \
               : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)                                                       \
               : "l"(da), "l"(db)                                                                             \
               : "memory")
#define LOWBIT_WGMMA_16(TYPES)                                                                                     \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                                                          \
               "wgmma.mma_async.sync.aligned.m64n8k16.f32." TYPES " {%0, %1, %2, %3}, %4, %5, p, 1, 1, 0, 0;\n}\n" \
               : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)                                                             \
               : "l"(da), "l"(db)                                                                                   \
               : "memory")
  if constexpr (K == Kind::e4m3_e4m3) LOWBIT_WGMMA_FP8("e4m3.e4m3");
  else if constexpr (K == Kind::e5m2_e5m2) LOWBIT_WGMMA_FP8("e5m2.e5m2");
  else if constexpr (K == Kind::e4m3_e5m2) LOWBIT_WGMMA_FP8("e4m3.e5m2");
  else if constexpr (K == Kind::e5m2_e4m3) LOWBIT_WGMMA_FP8("e5m2.e4m3");
  else if constexpr (K == Kind::f16) LOWBIT_WGMMA_16("f16.f16");
  else if constexpr (K == Kind::bf16) LOWBIT_WGMMA_16("bf16.bf16");
#undef LOWBIT_WGMMA_FP8
#undef LOWBIT_WGMMA_16
}
#endif

template <Kind K>
__global__ void __launch_bounds__(128) wgmma_kernel(int tiles, int chain, const std::uint16_t* a,
                                                    const std::uint16_t* b, const std::uint32_t* c,
                                                    std::uint32_t* d, int lbo_a, int sbo_a) {
#if LOWBIT_WGMMA
  constexpr bool fp8 = K == Kind::e4m3_e4m3 || K == Kind::e5m2_e5m2 || K == Kind::e4m3_e5m2 || K == Kind::e5m2_e4m3;
  constexpr int bytes = fp8 ? 1 : 2;  // element size
  constexpr int ki = 32 / bytes;      // instruction K: 32 bytes of K either way
  __shared__ __align__(1024) std::uint8_t sa[kMaxChain * kWgmmaABytes];
  __shared__ __align__(1024) std::uint8_t sb[kMaxChain * kWgmmaBBytes];
  const int t = static_cast<int>(threadIdx.x);
  const int kt = chain * ki;
  for (int tile = static_cast<int>(blockIdx.x); tile < tiles; tile += static_cast<int>(gridDim.x)) {
    const std::uint16_t* ta = a + static_cast<std::size_t>(tile) * 64 * kt;
    const std::uint16_t* tb = b + static_cast<std::size_t>(tile) * kt * 8;
    // A: row r, element k of instruction s = k / ki, byte (k % ki) * bytes of that instruction's K.
    for (int e = t; e < 64 * kt; e += 128) {
      const int r = e / kt, k = e % kt, s = k / ki, kb = (k % ki) * bytes;
      std::uint8_t* p = sa + s * kWgmmaABytes + smem_offset(r, kb, kLayoutLbo, kLayoutSbo);
      if constexpr (fp8) *p = static_cast<std::uint8_t>(ta[e]);
      else *reinterpret_cast<std::uint16_t*>(p) = ta[e];
    }
    // B: column n is the operand's row n (one row group of 8), K-major.
    for (int e = t; e < kt * 8; e += 128) {
      const int k = e / 8, n = e % 8, s = k / ki, kb = (k % ki) * bytes;
      std::uint8_t* p = sb + s * kWgmmaBBytes + smem_offset(n, kb, kLayoutLbo, kLayoutSbo);
      if constexpr (fp8) *p = static_cast<std::uint8_t>(tb[e]);
      else *reinterpret_cast<std::uint16_t*>(p) = tb[e];
    }
    // Generic-proxy writes made visible to the async proxy that wgmma reads shared memory through
    // (PTX ISA "Memory Consistency Model", proxies; fence.proxy.async), then every thread's writes.
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    const std::uint32_t* tc = c + static_cast<std::size_t>(tile) * 64 * 8;
    float acc[4];
    for (int i = 0; i < 4; ++i) {
      const Coord x = wgmma_d_coord(t, i);
      acc[i] = __uint_as_float(tc[x.row * 8 + x.col]);
    }
    asm volatile("wgmma.fence.sync.aligned;\n" : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])::"memory");
    for (int s = 0; s < chain; ++s) {
      const auto addr_a = static_cast<std::uint32_t>(__cvta_generic_to_shared(sa + s * kWgmmaABytes));
      const auto addr_b = static_cast<std::uint32_t>(__cvta_generic_to_shared(sb + s * kWgmmaBBytes));
      // B has one row group (N = 8): its K step is 128 bytes whichever field the hardware reads it from.
      wgmma<K>(acc[0], acc[1], acc[2], acc[3], make_descriptor(addr_a, lbo_a, sbo_a),
               make_descriptor(addr_b, kLayoutLbo, kLayoutLbo));
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n"
                 : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])::"memory");
    std::uint32_t* td = d + static_cast<std::size_t>(tile) * 64 * 8;
    for (int i = 0; i < 4; ++i) {
      const Coord x = wgmma_d_coord(t, i);
      td[x.row * 8 + x.col] = __float_as_uint(acc[i]);
    }
    __syncthreads();  // shared memory is rewritten for the next tile only after every read of it completed
  }
#else
  (void)tiles;
  (void)chain;
  (void)a;
  (void)b;
  (void)c;
  (void)d;
  (void)lbo_a;
  (void)sbo_a;
#endif
}

}  // namespace

std::vector<std::uint32_t> run_wgmma(Kind kind, int tiles, int chain, std::span<const std::uint16_t> a,
                                     std::span<const std::uint16_t> b, std::span<const std::uint32_t> c,
                                     Descriptors descriptors) {
  check_probe(wgmma_shape(kind), tiles, chain, a.size(), b.size(), c.size());
  const int cap = detail::current_capability();
  if (cap != 90)
    throw Error(std::string("wgmma ") + kind_name(kind) + " is built for sm_90a only; this GPU is sm_" +
                std::to_string(cap));
  detail::Buffer da(a.size_bytes(), a.data()), db(b.size_bytes(), b.data()), dc(c.size_bytes(), c.data());
  const auto* pa = da.as<const std::uint16_t>();
  const auto* pb = db.as<const std::uint16_t>();
  const auto* pc = dc.as<const std::uint32_t>();
  const int lbo = descriptors == Descriptors::isa ? kLayoutLbo : kLayoutSbo;
  const int sbo = descriptors == Descriptors::isa ? kLayoutSbo : kLayoutLbo;
  const int blocks = tiles < 132 * 8 ? tiles : 132 * 8;
  auto launch = [&](std::uint32_t* d) {
    switch (kind) {
      case Kind::e4m3_e4m3: wgmma_kernel<Kind::e4m3_e4m3><<<blocks, 128>>>(tiles, chain, pa, pb, pc, d, lbo, sbo); break;
      case Kind::e5m2_e5m2: wgmma_kernel<Kind::e5m2_e5m2><<<blocks, 128>>>(tiles, chain, pa, pb, pc, d, lbo, sbo); break;
      case Kind::e4m3_e5m2: wgmma_kernel<Kind::e4m3_e5m2><<<blocks, 128>>>(tiles, chain, pa, pb, pc, d, lbo, sbo); break;
      case Kind::e5m2_e4m3: wgmma_kernel<Kind::e5m2_e4m3><<<blocks, 128>>>(tiles, chain, pa, pb, pc, d, lbo, sbo); break;
      case Kind::f16: wgmma_kernel<Kind::f16><<<blocks, 128>>>(tiles, chain, pa, pb, pc, d, lbo, sbo); break;
      case Kind::bf16: wgmma_kernel<Kind::bf16><<<blocks, 128>>>(tiles, chain, pa, pb, pc, d, lbo, sbo); break;
      case Kind::f16_f16acc: break;  // rejected by wgmma_shape
    }
  };
  return detail::run_poisoned(c.size(), launch,
                              std::string("wgmma ") + kind_name(kind) +
                                  (descriptors == Descriptors::isa ? "" : " (swapped descriptor offsets)"));
}

}  // namespace lowbit::device::mma
