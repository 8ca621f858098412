// mma.sync probes (sm_89+ for FP8, sm_80+ for f16/bf16) and the NVFP4-on-f16 emulation
// (lowbit/device/mma.hpp).
//
// Each warp takes one tile at a time: it loads its fragments of A (16 x K), B (K x 8) and C (16 x 8)
// straight from global memory through the PTX ISA fragment maps of mma.hpp, issues the instruction
// (chain times along K, D fed back as C) and stores D through the same C/D map.  Nothing is fast here on
// purpose: the point is that every register holds exactly the matrix entry the ISA says it does.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstring>
#include <stdexcept>
#include <string>

#include "lowbit/device/check.hpp"
#include "lowbit/device/mma.hpp"

namespace lowbit::device::mma {

// ---- host-side descriptions and checks -------------------------------------------------------------

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::e4m3_e4m3: return "e4m3.e4m3";
    case Kind::e5m2_e5m2: return "e5m2.e5m2";
    case Kind::e4m3_e5m2: return "e4m3.e5m2";
    case Kind::e5m2_e4m3: return "e5m2.e4m3";
    case Kind::f16: return "f16";
    case Kind::bf16: return "bf16";
    case Kind::f16_f16acc: return "f16.f16acc";
  }
  return "?";
}

bool is_fp8(Kind k) {
  return k == Kind::e4m3_e4m3 || k == Kind::e5m2_e5m2 || k == Kind::e4m3_e5m2 || k == Kind::e5m2_e4m3;
}

int instruction_k(Kind k) { return is_fp8(k) ? 32 : 16; }

Shape mma_sync_shape(Kind k) { return {16, 8, instruction_k(k)}; }

Shape wgmma_shape(Kind k) {
  if (k == Kind::f16_f16acc) throw std::invalid_argument("the wgmma probe has no f16-accumulator form");
  return {64, 8, instruction_k(k)};
}

void check_probe(const Shape& s, int tiles, int chain, std::size_t a, std::size_t b, std::size_t c) {
  if (tiles < 1) throw std::invalid_argument("probe: tiles must be positive, got " + std::to_string(tiles));
  if (chain < 1 || chain > kMaxChain)
    throw std::invalid_argument("probe: chain must be in 1.." + std::to_string(kMaxChain) + ", got " +
                                std::to_string(chain));
  const auto t = static_cast<std::size_t>(tiles);
  const auto kt = static_cast<std::size_t>(chain) * static_cast<std::size_t>(s.k);
  const std::size_t want_a = t * static_cast<std::size_t>(s.m) * kt, want_b = t * kt * static_cast<std::size_t>(s.n),
                    want_c = t * static_cast<std::size_t>(s.m) * static_cast<std::size_t>(s.n);
  auto size = [](const char* what, std::size_t got, std::size_t want) {
    if (got != want)
      throw std::invalid_argument(std::string("probe: ") + what + " holds " + std::to_string(got) +
                                  " entries, expected " + std::to_string(want));
  };
  size("A", a, want_a);
  size("B", b, want_b);
  size("C", c, want_c);
}

void check_nvfp4(int tiles, int k, std::span<const std::uint8_t> a, std::span<const std::uint8_t> a_scales,
                 std::span<const std::uint8_t> b, std::span<const std::uint8_t> b_scales,
                 std::span<const std::uint32_t> c) {
  if (k < 16 || k % 16 != 0 || k > 16 * kMaxChain)
    throw std::invalid_argument("nvfp4: K must be a positive multiple of 16 up to " + std::to_string(16 * kMaxChain) +
                                ", got " + std::to_string(k));
  check_probe({16, 8, 16}, tiles, k / 16, a.size(), b.size(), c.size());
  const std::size_t blocks = static_cast<std::size_t>(tiles) * static_cast<std::size_t>(k / 16);
  if (a_scales.size() != blocks * 16 || b_scales.size() != blocks * 8)
    throw std::invalid_argument("nvfp4: scales hold " + std::to_string(a_scales.size()) + " and " +
                                std::to_string(b_scales.size()) + " entries, expected " +
                                std::to_string(blocks * 16) + " and " + std::to_string(blocks * 8));
  auto codes = [](const char* what, std::span<const std::uint8_t> v) {
    for (std::size_t i = 0; i < v.size(); ++i)
      if (v[i] > 0xF)
        throw std::invalid_argument(std::string("nvfp4: ") + what + "[" + std::to_string(i) + "] = " +
                                    std::to_string(v[i]) + " is not a 4-bit e2m1 code");
  };
  // ue4m3 scales: 0x7F is NaN, bit 7 is not part of the format.  Every other code is finite, at most
  // 448, and (see dequantize below) its product with any e2m1 value is exact in f16.
  auto scales = [](const char* what, std::span<const std::uint8_t> v) {
    for (std::size_t i = 0; i < v.size(); ++i)
      if (v[i] >= 0x7F)
        throw std::invalid_argument(std::string("nvfp4: ") + what + "[" + std::to_string(i) + "] = " +
                                    std::to_string(v[i]) +
                                    (v[i] == 0x7F ? " is the ue4m3 NaN" : " has bit 7 set (ue4m3 has 7 bits)") +
                                    ": its product with an e2m1 value is no f16");
  };
  codes("A", a);
  codes("B", b);
  scales("A scale", a_scales);
  scales("B scale", b_scales);
}

// ---- the harness ------------------------------------------------------------------------------------

namespace detail {

Buffer::Buffer(std::size_t bytes, const void* from) {
  LOWBIT_CUDA_CHECK(cudaMalloc(&ptr_, bytes == 0 ? 1 : bytes));
  if (from && bytes) LOWBIT_CUDA_CHECK(cudaMemcpy(ptr_, from, bytes, cudaMemcpyHostToDevice));
}

Buffer::~Buffer() { cudaFree(ptr_); }

std::vector<std::uint32_t> run_poisoned(std::size_t outputs, const std::function<void(std::uint32_t*)>& launch,
                                        const std::string& what) {
  constexpr std::uint32_t poison[2] = {0x7FA5A5A5u, 0xFF5A5A5Au};
  Buffer d(outputs * sizeof(std::uint32_t));
  std::vector<std::uint32_t> out[2];
  for (int run = 0; run < 2; ++run) {
    std::vector<std::uint32_t> fill(outputs, poison[run]);
    LOWBIT_CUDA_CHECK(cudaMemcpy(d.as<void>(), fill.data(), outputs * sizeof(std::uint32_t), cudaMemcpyHostToDevice));
    launch(d.as<std::uint32_t>());
    LOWBIT_CUDA_CHECK_LAUNCH();
    LOWBIT_CUDA_CHECK(cudaDeviceSynchronize());
    out[run].resize(outputs);
    LOWBIT_CUDA_CHECK(
        cudaMemcpy(out[run].data(), d.as<void>(), outputs * sizeof(std::uint32_t), cudaMemcpyDeviceToHost));
  }
  for (std::size_t i = 0; i < outputs; ++i) {
    if (out[0][i] == poison[0] && out[1][i] == poison[1])
      throw Error(what + ": output " + std::to_string(i) + " was never written");
    if (out[0][i] != out[1][i])
      throw Error(what + ": output " + std::to_string(i) + " differs between two identical runs (" +
                  std::to_string(out[0][i]) + " vs " + std::to_string(out[1][i]) + ")");
  }
  return out[0];
}

int current_capability() {
  int dev = 0, major = 0, minor = 0;
  LOWBIT_CUDA_CHECK(cudaGetDevice(&dev));
  LOWBIT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  LOWBIT_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  return major * 10 + minor;
}

}  // namespace detail

namespace {

// ---- the instructions -------------------------------------------------------------------------------
// acc holds the accumulator codes of the lane's four C/D elements (f32 bits, or f16 bits for the
// f16-accumulator form); a and b the packed fragment registers.

template <Kind K>
__device__ __forceinline__ void issue(std::uint32_t (&acc)[4], const std::uint32_t (&a)[4],
                                      const std::uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__)
  float d0 = __uint_as_float(acc[0]), d1 = __uint_as_float(acc[1]), d2 = __uint_as_float(acc[2]),
        d3 = __uint_as_float(acc[3]);
  if constexpr (K == Kind::f16_f16acc) {
    // PTX ISA "mma" (m16n8k16, .f16 accumulator): C and D are two .f16x2 registers, element 0 low.
    std::uint32_t c0 = (acc[0] & 0xFFFFu) | (acc[1] << 16), c1 = (acc[2] & 0xFFFFu) | (acc[3] << 16);
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0, %1}, {%2, %3, %4, %5}, {%6, %7}, {%0, %1};"
                 : "+r"(c0), "+r"(c1)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    acc[0] = c0 & 0xFFFFu;
    acc[1] = c0 >> 16;
    acc[2] = c1 & 0xFFFFu;
    acc[3] = c1 >> 16;
    return;
  } else if constexpr (K == Kind::f16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else if constexpr (K == Kind::bf16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
#if __CUDA_ARCH__ >= 890
    // PTX ISA "mma" with .e4m3/.e5m2 A and B (sm_89+): m16n8k32, f32 accumulator.
    if constexpr (K == Kind::e4m3_e4m3)
      asm volatile(
          "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
          "{%0, %1, %2, %3};"
          : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    else if constexpr (K == Kind::e5m2_e5m2)
      asm volatile(
          "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
          "{%0, %1, %2, %3};"
          : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    else if constexpr (K == Kind::e4m3_e5m2)
      asm volatile(
          "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
          "{%0, %1, %2, %3};"
          : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    else
      asm volatile(
          "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
          "{%0, %1, %2, %3};"
          : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    (void)a;
    (void)b;
    __trap();  // FP8 mma.sync needs sm_89; the host wrapper refuses older GPUs first
#endif
  }
  acc[0] = __float_as_uint(d0);
  acc[1] = __float_as_uint(d1);
  acc[2] = __float_as_uint(d2);
  acc[3] = __float_as_uint(d3);
#else
  (void)acc;
  (void)a;
  (void)b;
#endif
}

template <Kind K>
struct Layout {
  static constexpr bool fp8 = K == Kind::e4m3_e4m3 || K == Kind::e5m2_e5m2 || K == Kind::e4m3_e5m2 ||
                              K == Kind::e5m2_e4m3;
  static constexpr int k = fp8 ? 32 : 16;
  static constexpr Operand a = fp8 ? Operand::a_k32 : Operand::a_k16;
  static constexpr Operand b = fp8 ? Operand::b_k32 : Operand::b_k16;
  static constexpr int bits = fp8 ? 8 : 16;     // element width in a register
  static constexpr int per_register = 32 / bits;
};

// One warp per tile (warp-stride loop).  Operand codes are std::uint16_t (fp8 in the low byte).
template <Kind K>
__global__ void mma_sync_kernel(int tiles, int chain, const std::uint16_t* a, const std::uint16_t* b,
                                const std::uint32_t* c, std::uint32_t* d) {
  using L = Layout<K>;
  const int lane = static_cast<int>(threadIdx.x & 31);
  const int warps = static_cast<int>((gridDim.x * blockDim.x) >> 5);
  const int kt = chain * L::k;
  for (int tile = static_cast<int>((blockIdx.x * blockDim.x + threadIdx.x) >> 5); tile < tiles; tile += warps) {
    const std::uint16_t* ta = a + static_cast<std::size_t>(tile) * 16 * kt;
    const std::uint16_t* tb = b + static_cast<std::size_t>(tile) * kt * 8;
    const std::uint32_t* tc = c + static_cast<std::size_t>(tile) * 128;
    std::uint32_t acc[4];
    for (int i = 0; i < 4; ++i) {
      const Coord x = coord(Operand::cd, lane, i);
      acc[i] = tc[x.row * 8 + x.col];
    }
    for (int s = 0; s < chain; ++s) {
      std::uint32_t ra[4] = {0, 0, 0, 0}, rb[2] = {0, 0};
      for (int i = 0; i < 4 * L::per_register; ++i) {
        const Coord x = coord(L::a, lane, i);
        const std::uint32_t code = ta[x.row * kt + s * L::k + x.col] & ((1u << L::bits) - 1);
        ra[i / L::per_register] |= code << (L::bits * (i % L::per_register));
      }
      for (int i = 0; i < 2 * L::per_register; ++i) {
        const Coord x = coord(L::b, lane, i);
        const std::uint32_t code = tb[(s * L::k + x.row) * 8 + x.col] & ((1u << L::bits) - 1);
        rb[i / L::per_register] |= code << (L::bits * (i % L::per_register));
      }
      issue<K>(acc, ra, rb);
    }
    std::uint32_t* td = d + static_cast<std::size_t>(tile) * 128;
    for (int i = 0; i < 4; ++i) {
      const Coord x = coord(Operand::cd, lane, i);
      td[x.row * 8 + x.col] = acc[i];
    }
  }
}

template <Kind K>
void launch_mma_sync(int tiles, int chain, const std::uint16_t* a, const std::uint16_t* b, const std::uint32_t* c,
                     std::uint32_t* d) {
  constexpr int threads = 256;  // 8 warps, one tile each per round
  const int blocks = (tiles + 7) / 8;
  mma_sync_kernel<K><<<blocks, threads>>>(tiles, chain, a, b, c, d);
}

// ---- NVFP4 dequantized to f16 -----------------------------------------------------------------------
// Exactness: an e2m1 value is s * 2^e with a significand of at most 2 bits (0, 0.5, 1, 1.5, 2, 3, 4, 6:
// multiples of 2^-1 below 8); a finite ue4m3 scale has at most 4 significant bits and is a multiple of
// 2^-9 at most 448.  Their product has at most 6 significant bits, is a multiple of 2^-10 (>= 2^-24, f16's
// subnormal step) and at most 6 * 448 = 2688 < 65504 (f16's largest finite value): below 2^-14 it is an
// f16 subnormal (a multiple of 2^-24), above it an f16 normal whose 6 significant bits fit 11.  So the
// product computed in f32 (exact: 6 bits) converts to f16 without rounding, for every finite ue4m3 code.
// The NaN scale 0x7F and codes with bit 7 set are rejected by check_nvfp4.
__device__ __forceinline__ float e2m1_value(std::uint32_t code) {
  const std::uint32_t m = code & 7u;
  const float mag = m == 0 ? 0.0f : m == 1 ? 0.5f : m == 2 ? 1.0f : m == 3 ? 1.5f : m == 4 ? 2.0f : m == 5 ? 3.0f
                    : m == 6 ? 4.0f : 6.0f;
  return (code & 8u) ? -mag : mag;
}

__device__ __forceinline__ float ue4m3_value(std::uint32_t code) {
  const int field = static_cast<int>((code >> 3) & 15u);
  const float mant = static_cast<float>(code & 7u);
  if (field == 0) return ldexpf(mant, -9);
  return ldexpf(8.0f + mant, field - 10);
}

__device__ __forceinline__ std::uint32_t dequantize(std::uint32_t code, std::uint32_t scale) {
  const float v = __fmul_rn(e2m1_value(code), ue4m3_value(scale));
  return __half_as_ushort(__float2half_rn(v));
}

__global__ void nvfp4_emulated_kernel(int tiles, int chain, const std::uint8_t* a, const std::uint8_t* sa,
                                      const std::uint8_t* b, const std::uint8_t* sb, const std::uint32_t* c,
                                      std::uint32_t tensor_scale, std::uint32_t* d) {
  const int lane = static_cast<int>(threadIdx.x & 31);
  const int warps = static_cast<int>((gridDim.x * blockDim.x) >> 5);
  const int kt = chain * 16;
  for (int tile = static_cast<int>((blockIdx.x * blockDim.x + threadIdx.x) >> 5); tile < tiles; tile += warps) {
    const std::uint8_t* ta = a + static_cast<std::size_t>(tile) * 16 * kt;
    const std::uint8_t* tsa = sa + static_cast<std::size_t>(tile) * 16 * chain;
    const std::uint8_t* tb = b + static_cast<std::size_t>(tile) * kt * 8;
    const std::uint8_t* tsb = sb + static_cast<std::size_t>(tile) * chain * 8;
    const std::uint32_t* tc = c + static_cast<std::size_t>(tile) * 128;
    std::uint32_t acc[4];
    for (int i = 0; i < 4; ++i) {
      const Coord x = coord(Operand::cd, lane, i);
      acc[i] = tc[x.row * 8 + x.col];
    }
    for (int s = 0; s < chain; ++s) {  // one m16n8k16 per 16-element scale block
      std::uint32_t ra[4] = {0, 0, 0, 0}, rb[2] = {0, 0};
      for (int i = 0; i < 8; ++i) {
        const Coord x = coord(Operand::a_k16, lane, i);
        const std::uint32_t h = dequantize(ta[x.row * kt + s * 16 + x.col], tsa[x.row * chain + s]);
        ra[i / 2] |= h << (16 * (i % 2));
      }
      for (int i = 0; i < 4; ++i) {
        const Coord x = coord(Operand::b_k16, lane, i);
        const std::uint32_t h = dequantize(tb[(s * 16 + x.row) * 8 + x.col], tsb[s * 8 + x.col]);
        rb[i / 2] |= h << (16 * (i % 2));
      }
      issue<Kind::f16>(acc, ra, rb);
    }
    std::uint32_t* td = d + static_cast<std::size_t>(tile) * 128;
    for (int i = 0; i < 4; ++i) {
      const Coord x = coord(Operand::cd, lane, i);
      td[x.row * 8 + x.col] = __float_as_uint(__fmul_rn(__uint_as_float(acc[i]), __uint_as_float(tensor_scale)));
    }
  }
}

}  // namespace

std::vector<std::uint32_t> run_mma_sync(Kind kind, int tiles, int chain, std::span<const std::uint16_t> a,
                                        std::span<const std::uint16_t> b, std::span<const std::uint32_t> c) {
  check_probe(mma_sync_shape(kind), tiles, chain, a.size(), b.size(), c.size());
  const int cap = detail::current_capability();
  const int needed = is_fp8(kind) ? 89 : 80;
  if (cap < needed)
    throw Error(std::string("mma.sync ") + kind_name(kind) + " needs sm_" + std::to_string(needed) +
                " or newer; this GPU is sm_" + std::to_string(cap));
  detail::Buffer da(a.size_bytes(), a.data()), db(b.size_bytes(), b.data()), dc(c.size_bytes(), c.data());
  const auto* pa = da.as<const std::uint16_t>();
  const auto* pb = db.as<const std::uint16_t>();
  const auto* pc = dc.as<const std::uint32_t>();
  auto launch = [&](std::uint32_t* d) {
    switch (kind) {
      case Kind::e4m3_e4m3: launch_mma_sync<Kind::e4m3_e4m3>(tiles, chain, pa, pb, pc, d); break;
      case Kind::e5m2_e5m2: launch_mma_sync<Kind::e5m2_e5m2>(tiles, chain, pa, pb, pc, d); break;
      case Kind::e4m3_e5m2: launch_mma_sync<Kind::e4m3_e5m2>(tiles, chain, pa, pb, pc, d); break;
      case Kind::e5m2_e4m3: launch_mma_sync<Kind::e5m2_e4m3>(tiles, chain, pa, pb, pc, d); break;
      case Kind::f16: launch_mma_sync<Kind::f16>(tiles, chain, pa, pb, pc, d); break;
      case Kind::bf16: launch_mma_sync<Kind::bf16>(tiles, chain, pa, pb, pc, d); break;
      case Kind::f16_f16acc: launch_mma_sync<Kind::f16_f16acc>(tiles, chain, pa, pb, pc, d); break;
    }
  };
  return detail::run_poisoned(c.size(), launch, std::string("mma.sync ") + kind_name(kind));
}

std::vector<std::uint32_t> run_nvfp4_emulated(int tiles, int k, std::span<const std::uint8_t> a,
                                              std::span<const std::uint8_t> a_scales,
                                              std::span<const std::uint8_t> b,
                                              std::span<const std::uint8_t> b_scales,
                                              std::span<const std::uint32_t> c, std::uint32_t tensor_scale) {
  check_nvfp4(tiles, k, a, a_scales, b, b_scales, c);
  const int cap = detail::current_capability();
  if (cap < 80) throw Error("the NVFP4 emulation needs f16 mma.sync (sm_80 or newer); this GPU is sm_" + std::to_string(cap));
  detail::Buffer da(a.size_bytes(), a.data()), dsa(a_scales.size_bytes(), a_scales.data()),
      db(b.size_bytes(), b.data()), dsb(b_scales.size_bytes(), b_scales.data()), dc(c.size_bytes(), c.data());
  const int chain = k / 16;
  auto launch = [&](std::uint32_t* d) {
    nvfp4_emulated_kernel<<<(tiles + 7) / 8, 256>>>(tiles, chain, da.as<const std::uint8_t>(),
                                                    dsa.as<const std::uint8_t>(), db.as<const std::uint8_t>(),
                                                    dsb.as<const std::uint8_t>(), dc.as<const std::uint32_t>(),
                                                    tensor_scale, d);
  };
  return detail::run_poisoned(c.size(), launch, "nvfp4 emulation");
}

#if !defined(LOWBIT_DEVICE_HAS_SM120)
bool native_nvfp4_available() { return false; }

std::vector<std::uint32_t> run_nvfp4_native_sm120(int, int, std::span<const std::uint8_t>,
                                                  std::span<const std::uint8_t>, std::span<const std::uint8_t>,
                                                  std::span<const std::uint8_t>, std::span<const std::uint32_t>,
                                                  std::uint32_t) {
  throw Error("the native NVFP4 mma.sync kernel was not built (configure with -DLOWBIT_DEVICE_SM120=ON)");
}
#endif

}  // namespace lowbit::device::mma
