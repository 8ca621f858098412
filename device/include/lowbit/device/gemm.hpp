// FP8 GEMM on Hopper Tensor Cores (wgmma, sm_90a) through CUTLASS's collective builders.
//
//   D (M x N, row-major, f32 or bf16) = alpha * A (M x K, e4m3, row-major) * B (K x N, e4m3 or e5m2,
//   column-major: "TN", each column of B contiguous along K)
//
// Three mainloops, one tile shape (128 x 128 x 128 CTA tile, cooperative warp-specialized kernel with
// two consumer warpgroups, persistent tile scheduler), cluster 1x1x1 or (promoted / blockwise, bf16 D)
// 2x1x1, and a run-time tile swizzle (Fp8Gemm::cluster_m, Fp8Gemm::swizzle):
//
//   Mode::fast_accum  KernelTmaWarpSpecializedCooperativeFP8FastAccum: every k-block's wgmma accumulates into
//                     the same accumulator, over the whole of K (model: run_model(hopper-fp8)).
//   Mode::promoted    KernelTmaWarpSpecializedCooperative with FP8 inputs (CUTLASS's FP8 mainloop): the wgmma
//                     accumulator is zeroed and added into an f32 register accumulator (one FADD) every
//                     mma_promotion_interval k-blocks.  A k-block is one wgmma of K = 32 (the FP8 instruction
//                     K); the tile's K = 128 holds 4 of them, and CUTLASS's interval must be a multiple of 4,
//                     so the interval is 4 k-blocks = 128 elements of K, DeepSeek-V3's N_C
//                     (model: run_promoted(hopper-fp8, 128)).
//   Mode::blockwise   KernelTmaWarpSpecializedCooperativeFP8Blockwise: DeepSeek-V3 / DeepGEMM block scaling,
//                     A scales per row and 128 elements of K ("1x128"), B scales per 128 x 128 block; every
//                     128 elements of K the partial sum p is promoted with acc = fma(p, fp32(sa * sb), acc)
//                     (model: run_block_scaled(hopper-fp8)).
//   Mode::promoted_blockwise
//                     Mode::promoted's arithmetic on the blockwise mainloop: every scale 1.0f (a buffer of ones
//                     the library keeps per device), so each promotion is fma(p, 1, acc) = acc + p, one
//                     rounding, as Mode::promoted's FADD (model: run_promoted(hopper-fp8, 128) =
//                     run_block_scaled with unit scales).  Why: on an H200 the blockwise mainloop ran 8% faster
//                     than CUTLASS's generic FP8 promotion mainloop at 4096^3 and 8192^3 (reports/device/
//                     2026-11-30-nvidia-h200.log: 1087 against 997 TFLOP/s), though it does more work.  Built
//                     where Mode::blockwise is: an e4m3 B; K a multiple of 128.
//
// The epilogue is D = convert(alpha * acc) (CUTLASS's ScaledAcc fusion, no C operand): one f32 multiply,
// then round-to-nearest-even to bf16 for a bf16 D.  Per-tensor scaling is alpha = scale_a * scale_b
// (times any user alpha), computed by the caller in f32.
//
// Shapes are not padded silently: check() rejects them with a message naming the argument and the padded
// shape that would be accepted (padded_shape()); pad A, B with zero rows / columns and D with extra rows /
// columns to run such a shape.  K in the per-tensor modes needs only 16-byte rows (a multiple of 16): the
// last K tile is filled with zeros by the TMA loads, which leaves every model's result unchanged.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace lowbit::device::gemm {

enum class Fp8 : std::uint8_t { e4m3, e5m2 };
enum class Out : std::uint8_t { f32, bf16 };
enum class Mode : std::uint8_t { fast_accum, promoted, blockwise, promoted_blockwise };

const char* name(Fp8 t);
const char* name(Out t);
const char* name(Mode m);

inline constexpr int kTileM = 128;
inline constexpr int kTileN = 128;
inline constexpr int kTileK = 128;
inline constexpr int kInstructionK = 32;        // wgmma .e4m3/.e5m2: m64nNk32
inline constexpr int kPromotionMmas = 4;        // CUTLASS's mma_promotion_interval, in k-blocks
inline constexpr int kPromotionInterval = 128;  // the same in elements of K: kPromotionMmas * kInstructionK
inline constexpr int kScaleBlock = 128;         // blockwise: A 1 x 128, B 128 x 128
inline constexpr std::size_t kAlignment = 16;   // bytes, every pointer (TMA)
inline constexpr int kMaxSwizzle = 8;

struct Fp8Gemm {
  Mode mode = Mode::fast_accum;
  int m = 0, n = 0, k = 0;
  const void* a = nullptr;  // M x K e4m3 codes, row-major (row stride K bytes)
  const void* b = nullptr;  // K x N codes, column-major (column stride K bytes) = N x K row-major
  Fp8 b_type = Fp8::e4m3;
  void* d = nullptr;  // M x N, row-major (row stride N elements)
  Out d_type = Out::f32;
  float alpha = 1.0f;  // D = alpha * AB; per-tensor scaling folds scale_a * scale_b in here
  // Launch configuration (the arithmetic, hence every bit of D, is the same in all of them):
  //  cluster_m: CTAs per thread-block cluster along M, 1 or 2.  With 2 the two CTAs of a cluster share
  //    their B tile through TMA multicast (half the L2 -> SM traffic for B).  Built for every mode but
  //    Mode::fast_accum, with an e4m3 B and a bf16 D only, and m must then be a multiple of 256.
  //  swizzle: the persistent tile scheduler's max_swizzle_size (1, 2, 4 or 8): CTAs working at the same
  //    time cover a swizzle-wide band of output tiles instead of one row of them, so the A and B panels
  //    they read stay in L2 (matters once A and B outgrow L2, e.g. 8192^3).
  int cluster_m = 1;
  int swizzle = 1;
  // Mode::blockwise only (f32 scales; see sfa_index / sfb_index for the layouts):
  const float* sfa = nullptr;  // (K/128) x M, M fastest ("MN-major", DeepGEMM's layout for A's scales)
  const float* sfb = nullptr;  // (N/128) x (K/128), K fastest
  // Optional: a device workspace of at least workspace_size() bytes; without one, run() allocates the
  // workspace it needs (if any) on the stream and frees it after the launch.
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  cudaStream_t stream = nullptr;
};

struct Shape {
  int m = 0, n = 0, k = 0;
  bool operator==(const Shape&) const = default;
};

// The smallest shape >= (m, n, k) that check() accepts for `mode`.
Shape padded_shape(Mode mode, int m, int n, int k);

// Number of f32 scales and the element index of scale (row i, k-block kb) / (k-block kb, column-block nb).
std::size_t sfa_count(int m, int k);
std::size_t sfb_count(int n, int k);
inline std::size_t sfa_index(int m, int i, int kb) { return static_cast<std::size_t>(kb) * m + i; }
inline std::size_t sfb_index(int k, int kb, int nb) { return static_cast<std::size_t>(nb) * (k / kScaleBlock) + kb; }

// The argument checks run() makes first: an empty string when `g` is valid, else a message naming the
// first bad argument ("lowbit::device::gemm: m = 100 is not a multiple of the 128-row tile; ...").
std::string validate(const Fp8Gemm& g);
// Throws std::invalid_argument with validate()'s message.
void check(const Fp8Gemm& g);

// False when the library was built without the CUTLASS kernels (no sm_90a in the build).
bool available();

// Bytes of device workspace run() needs for `g` (after check()).
std::size_t workspace_size(const Fp8Gemm& g);

// check(), then launch on g.stream (asynchronous).  Throws std::invalid_argument for bad arguments and
// lowbit::device::Error (with the call site) when CUTLASS or the CUDA runtime refuses the launch.
void run(const Fp8Gemm& g);

}  // namespace lowbit::device::gemm
