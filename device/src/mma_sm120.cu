// The native NVFP4 block-scaled mma.sync for sm_120a (GeForce/RTX Blackwell).  Built only when CMake's
// LOWBIT_DEVICE_SM120 is ON, as its own object library compiled for CUDA architecture 120a alone; CI does
// not build it, and this project has never run it (no sm_120 GPU): it compiles, nothing more is claimed.
//
// Instruction (PTX ISA 8.7+, "mma" with .kind::mxf4nvf4 and .block_scale; spelling checked with nvcc 13.0):
//   mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3
//     d, a, b, c, scale-a, {byte-id-a, thread-id-a}, scale-b, {byte-id-b, thread-id-b}
// Fragments (PTX ISA "Matrix Fragments for mma.m16n8k64", 4-bit elements, 8 per .b32 register, element 0
// in the low nibble), with g = laneid >> 2, t = laneid % 4:
//   A (a0..a3, 32 elements): row = g for i < 8 or 16 <= i < 24, g + 8 otherwise;
//                            col = t * 8 + (i & 7) (+ 32 for i >= 16)
//   B (b0, b1, 16 elements): row = t * 8 + (i & 7) (+ 32 for i >= 8); col = g
//   C/D: as m16n8k16 (mma.hpp Operand::cd).
// Scales (scale_vec::4X: one ue4m3 per 16 elements of K, four per row of A / column of B, packed one per
// byte, K block 0 in the low byte).  UNVERIFIED reading of the ISA's scale-factor layout: with
// thread-id-a = 0 the lanes with t = 0 supply row g's scales and t = 1 row g + 8's; with thread-id-b = 0 the
// lanes with t = 0 supply column g's.  Every lane here supplies the row/column its position suggests, so a
// different selection among the lanes of a quad still finds consistent data for A's t = 0/1 split.
#include <cuda_runtime.h>

#include <string>

#include "lowbit/device/check.hpp"
#include "lowbit/device/mma.hpp"

namespace lowbit::device::mma {

namespace {

__global__ void nvfp4_native_kernel(int tiles, int chain, const std::uint8_t* a, const std::uint8_t* sa,
                                    const std::uint8_t* b, const std::uint8_t* sb, const std::uint32_t* c,
                                    std::uint32_t tensor_scale, std::uint32_t* d) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM120_ALL)
  const int lane = static_cast<int>(threadIdx.x & 31), g = lane >> 2, t = lane & 3;
  const int warps = static_cast<int>((gridDim.x * blockDim.x) >> 5);
  const int kt = chain * 64, kb = chain * 4;  // K and scale blocks per row
  for (int tile = static_cast<int>((blockIdx.x * blockDim.x + threadIdx.x) >> 5); tile < tiles; tile += warps) {
    const std::uint8_t* ta = a + static_cast<std::size_t>(tile) * 16 * kt;
    const std::uint8_t* tsa = sa + static_cast<std::size_t>(tile) * 16 * kb;
    const std::uint8_t* tb = b + static_cast<std::size_t>(tile) * kt * 8;
    const std::uint8_t* tsb = sb + static_cast<std::size_t>(tile) * kb * 8;
    const std::uint32_t* tc = c + static_cast<std::size_t>(tile) * 128;
    float acc[4];
    for (int i = 0; i < 4; ++i) {
      const Coord x = coord(Operand::cd, lane, i);
      acc[i] = __uint_as_float(tc[x.row * 8 + x.col]);
    }
    for (int s = 0; s < chain; ++s) {
      std::uint32_t ra[4] = {0, 0, 0, 0}, rb[2] = {0, 0};
      for (int i = 0; i < 32; ++i) {
        const int row = (i < 8 || (i >= 16 && i < 24)) ? g : g + 8;
        const int col = t * 8 + (i & 7) + (i >= 16 ? 32 : 0);
        ra[i / 8] |= (ta[row * kt + s * 64 + col] & 0xFu) << (4 * (i % 8));
      }
      for (int i = 0; i < 16; ++i) {
        const int row = t * 8 + (i & 7) + (i >= 8 ? 32 : 0);
        rb[i / 8] |= (tb[(s * 64 + row) * 8 + g] & 0xFu) << (4 * (i % 8));
      }
      const int srow = g + 8 * (t & 1);
      std::uint32_t scale_a = 0, scale_b = 0;
      for (int j = 0; j < 4; ++j) {
        scale_a |= static_cast<std::uint32_t>(tsa[srow * kb + s * 4 + j]) << (8 * j);
        scale_b |= static_cast<std::uint32_t>(tsb[(s * 4 + j) * 8 + g]) << (8 * j);
      }
      const unsigned short zero = 0;
      asm volatile(
          "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3 "
          "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3}, {%10}, {%11, %12}, {%13}, {%14, %15};"
          : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
          : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]), "r"(scale_a), "h"(zero),
            "h"(zero), "r"(scale_b), "h"(zero), "h"(zero));
    }
    std::uint32_t* td = d + static_cast<std::size_t>(tile) * 128;
    for (int i = 0; i < 4; ++i) {
      const Coord x = coord(Operand::cd, lane, i);
      td[x.row * 8 + x.col] = __float_as_uint(__fmul_rn(acc[i], __uint_as_float(tensor_scale)));
    }
  }
#else
  (void)tiles;
  (void)chain;
  (void)a;
  (void)sa;
  (void)b;
  (void)sb;
  (void)c;
  (void)tensor_scale;
  (void)d;
#endif
}

}  // namespace

bool native_nvfp4_available() { return true; }

std::vector<std::uint32_t> run_nvfp4_native_sm120(int tiles, int k, std::span<const std::uint8_t> a,
                                                  std::span<const std::uint8_t> a_scales,
                                                  std::span<const std::uint8_t> b,
                                                  std::span<const std::uint8_t> b_scales,
                                                  std::span<const std::uint32_t> c, std::uint32_t tensor_scale) {
  check_nvfp4(tiles, k, a, a_scales, b, b_scales, c);
  if (k % 64 != 0) throw std::invalid_argument("nvfp4 (sm_120a): K must be a multiple of 64, got " + std::to_string(k));
  const int cap = detail::current_capability();
  if (cap != 120)
    throw Error("the native NVFP4 mma.sync is built for sm_120a only; this GPU is sm_" + std::to_string(cap));
  detail::Buffer da(a.size_bytes(), a.data()), dsa(a_scales.size_bytes(), a_scales.data()),
      db(b.size_bytes(), b.data()), dsb(b_scales.size_bytes(), b_scales.data()), dc(c.size_bytes(), c.data());
  auto launch = [&](std::uint32_t* d) {
    nvfp4_native_kernel<<<(tiles + 7) / 8, 256>>>(tiles, k / 64, da.as<const std::uint8_t>(),
                                                  dsa.as<const std::uint8_t>(), db.as<const std::uint8_t>(),
                                                  dsb.as<const std::uint8_t>(), dc.as<const std::uint32_t>(),
                                                  tensor_scale, d);
  };
  return detail::run_poisoned(c.size(), launch, "nvfp4 native (sm_120a)");
}

}  // namespace lowbit::device::mma
