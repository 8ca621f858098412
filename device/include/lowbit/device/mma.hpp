// Tensor-core probes: kernels that execute one tensor-core instruction (or a chain of them along K, the
// accumulator fed back) on given operands, so that their outputs can be held bit for bit against the
// tensor-core models of lowbit/gemm.hpp (docs/semantics.md §5).
//
// The fragment maps below are plain constexpr C++ (host and device): the device kernels load and store
// their registers through them, and the quick tier checks them against the PTX ISA's formulas.
//
// Operand storage (host and device alike), one tile after another:
//   A: M x Ktot row-major codes, B: Ktot x N row-major codes, C and D: M x N row-major accumulator codes
//   (f32 bits, or f16 bits in the low half for the f16-accumulator form); Ktot = chain * instruction K.
// Codes travel as std::uint16_t (an fp8 code in the low byte) and accumulators as std::uint32_t.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "lowbit/hd.hpp"

namespace lowbit::device::mma {

// ---- mma.sync fragment layouts ---------------------------------------------------------------------
// PTX ISA, "Warp-level Matrix Fragment" sections for mma.m16n8k16 (floating point, §9.7.14.5.8 in ISA 8.x
// numbering: "Matrix Fragments for mma.m16n8k16 with floating point type") and mma.m16n8k32
// (§9.7.14.5.9 "Matrix Fragments for mma.m16n8k32", the .e4m3/.e5m2/.s8/.u8 layout).  With
//   groupID = laneid >> 2, threadID_in_group = laneid % 4,
// and i the index of an element in the thread's fragment (register i / per_register, lowest bits first):
//   m16n8k16 A (.f16x2 a0..a3, 8 elements):
//     row = groupID      for i < 2 or 4 <= i < 6, groupID + 8 otherwise
//     col = tig * 2 + (i & 1) for i < 4,          tig * 2 + (i & 1) + 8 for i >= 4
//   m16n8k16 B (b0, b1, 4 elements):  row = tig * 2 + (i & 1) (+ 8 for i >= 2), col = groupID
//   m16n8k32 A (.b32 a0..a3, 16 fp8 elements):
//     row = groupID      for i < 4 or 8 <= i < 12, groupID + 8 otherwise
//     col = tig * 4 + (i & 3) for i < 8,          tig * 4 + (i & 3) + 16 for i >= 8
//   m16n8k32 B (b0, b1, 8 fp8 elements):  row = tig * 4 + (i & 3) (+ 16 for i >= 4), col = groupID
//   C / D of both shapes (4 elements: f32 c0..c3, or f16 in two .f16x2 registers):
//     row = groupID for i < 2, groupID + 8 otherwise;  col = tig * 2 + (i & 1)
enum class Operand : std::uint8_t { a_k16, b_k16, a_k32, b_k32, cd };

struct Coord {
  int row = 0;
  int col = 0;
  constexpr bool operator==(const Coord&) const = default;
};
struct Slot {
  int lane = 0;
  int index = 0;  // element index i within the lane's fragment
  constexpr bool operator==(const Slot&) const = default;
};

struct Extent {
  int rows, cols, per_thread;
};
LOWBIT_HD constexpr Extent extent(Operand op) {
  switch (op) {
    case Operand::a_k16: return {16, 16, 8};
    case Operand::b_k16: return {16, 8, 4};
    case Operand::a_k32: return {16, 32, 16};
    case Operand::b_k32: return {32, 8, 8};
    case Operand::cd: return {16, 8, 4};
  }
  return {0, 0, 0};
}

// Element i of lane `lane` of the fragment: which matrix entry it holds.
LOWBIT_HD constexpr Coord coord(Operand op, int lane, int i) {
  const int group = lane >> 2, tig = lane & 3;
  switch (op) {
    case Operand::a_k16:
      return {(i < 2 || (i >= 4 && i < 6)) ? group : group + 8, tig * 2 + (i & 1) + (i >= 4 ? 8 : 0)};
    case Operand::b_k16: return {tig * 2 + (i & 1) + (i >= 2 ? 8 : 0), group};
    case Operand::a_k32:
      return {(i < 4 || (i >= 8 && i < 12)) ? group : group + 8, tig * 4 + (i & 3) + (i >= 8 ? 16 : 0)};
    case Operand::b_k32: return {tig * 4 + (i & 3) + (i >= 4 ? 16 : 0), group};
    case Operand::cd: return {i < 2 ? group : group + 8, tig * 2 + (i & 1)};
  }
  return {};
}

// The inverse: which lane and element hold matrix entry (row, col).
LOWBIT_HD constexpr Slot slot(Operand op, int row, int col) {
  switch (op) {
    case Operand::a_k16: {
      const int group = row & 7, tig = (col & 7) >> 1;
      const int i = (col & 1) + ((row >> 3) << 1) + ((col >> 3) << 2);
      return {group * 4 + tig, i};
    }
    case Operand::b_k16: return {col * 4 + ((row & 7) >> 1), (row & 1) + ((row >> 3) << 1)};
    case Operand::a_k32: {
      const int group = row & 7, tig = (col & 15) >> 2;
      const int i = (col & 3) + ((row >> 3) << 2) + ((col >> 4) << 3);
      return {group * 4 + tig, i};
    }
    case Operand::b_k32: return {col * 4 + ((row & 15) >> 2), (row & 3) + ((row >> 4) << 2)};
    case Operand::cd: return {(row & 7) * 4 + (col >> 1), (col & 1) + ((row >> 3) << 1)};
  }
  return {};
}

// ---- wgmma (sm_90a) ----------------------------------------------------------------------------------
// Accumulator of wgmma .m64nNk*, f32 (PTX ISA "Register Fragments and Shared Memory Matrix Layouts",
// "Matrix D" figure for wgmma .m64nNk16/.m64nNk32): warp w of the warpgroup holds rows 16w .. 16w + 15;
// within the warp, d(4j + i) sits at row 16w + groupID + 8 * (i >> 1), col 8j + tig * 2 + (i & 1).
// For N = 8 (j = 0) this is the mma.sync C/D layout shifted by 16 rows per warp.
LOWBIT_HD constexpr Coord wgmma_d_coord(int thread, int i) {
  const int warp = thread >> 5, lane = thread & 31;
  const Coord c = coord(Operand::cd, lane, i & 3);
  return {warp * 16 + c.row, (i >> 2) * 8 + c.col};
}

// Shared-memory operand layout, no swizzle ("interleave"), K-major (PTX ISA "Shared Memory Matrix Layout"
// and "Matrix Descriptor Format" under "Asynchronous Warpgroup Level Matrix Multiply-Accumulate"): the
// unit is the core matrix, 8 rows (M or N) of 16 contiguous bytes (16 fp8 or 8 f16 elements along K),
// 128 contiguous bytes.  Core matrices adjacent along K are `lbo` bytes apart (the descriptor's leading
// dimension byte offset), core matrices adjacent along M/N are `sbo` bytes apart (stride dimension byte
// offset).  Byte `kbyte` of row `row` of one instruction's operand therefore lives at:
LOWBIT_HD constexpr int smem_offset(int row, int kbyte, int lbo, int sbo) {
  return (row >> 3) * sbo + (kbyte >> 4) * lbo + (row & 7) * 16 + (kbyte & 15);
}
// This project's layout of one instruction's operand (K = 32 bytes): the two core matrices of a row
// group side by side (lbo = 128), row groups 256 bytes apart (sbo = 256).  A 64 x 32-byte A operand
// fills 2048 bytes, an 8 x 32-byte B operand 256 bytes.
inline constexpr int kLayoutLbo = 128;
inline constexpr int kLayoutSbo = 256;
inline constexpr int kWgmmaABytes = 2048;
inline constexpr int kWgmmaBBytes = 256;

// The 64-bit matrix descriptor (PTX ISA "Matrix Descriptor Format"): bits 0-13 start address >> 4,
// 16-29 leading dimension byte offset >> 4, 32-45 stride dimension byte offset >> 4, 49-51 base offset
// (only meaningful for swizzled layouts; 0 here), 62-63 swizzle mode (0 = none, "interleave").
LOWBIT_HD constexpr std::uint64_t make_descriptor(std::uint32_t smem_address, int lbo, int sbo) {
  return (static_cast<std::uint64_t>((smem_address >> 4) & 0x3FFFu)) |
         (static_cast<std::uint64_t>((static_cast<std::uint32_t>(lbo) >> 4) & 0x3FFFu) << 16) |
         (static_cast<std::uint64_t>((static_cast<std::uint32_t>(sbo) >> 4) & 0x3FFFu) << 32);
}

// Which descriptor field carries which offset.  `isa` is the PTX ISA's reading (LBO = the K step);
// `swapped` gives the two offsets the other way round, a fallback the layout self-check tries so that a
// misreading of the descriptor shows up as such, not as a model mismatch.
enum class Descriptors : std::uint8_t { isa, swapped };

// ---- the probes --------------------------------------------------------------------------------------
enum class Kind : std::uint8_t {
  e4m3_e4m3,
  e5m2_e5m2,
  e4m3_e5m2,
  e5m2_e4m3,
  f16,         // f16 x f16, f32 accumulator
  bf16,        // bf16 x bf16, f32 accumulator
  f16_f16acc,  // f16 x f16, f16 accumulator (mma.sync only)
};
const char* kind_name(Kind k);
bool is_fp8(Kind k);
// Instruction K: 32 for fp8, 16 for f16/bf16.
int instruction_k(Kind k);

struct Shape {
  int m, n, k;  // one instruction
};
Shape mma_sync_shape(Kind k);  // 16 x 8 x {32, 16}
Shape wgmma_shape(Kind k);     // 64 x 8 x {32, 16}; throws for f16_f16acc (not provided here)

// Argument checks shared by every probe: throws std::invalid_argument naming what is wrong.
// Sizes: a = tiles * m * chain * k, b = tiles * chain * k * n, c = tiles * m * n.
void check_probe(const Shape& s, int tiles, int chain, std::size_t a, std::size_t b, std::size_t c);
inline constexpr int kMaxChain = 8;

// D for every tile: chain instructions along K (K offset 0, k, 2k, ...), C into the first, each one's D
// into the next.  Runs on the current CUDA device; throws lowbit::device::Error on a CUDA failure and
// when an output element was not written (each launch is made twice over differently poisoned outputs;
// the two runs must also agree).
std::vector<std::uint32_t> run_mma_sync(Kind kind, int tiles, int chain, std::span<const std::uint16_t> a,
                                        std::span<const std::uint16_t> b, std::span<const std::uint32_t> c);

// wgmma.mma_async m64n8k{32,16} with A and B in shared memory (no swizzle), one warpgroup per CTA.
// Needs sm_90 (the kernel is compiled for sm_90a only).
std::vector<std::uint32_t> run_wgmma(Kind kind, int tiles, int chain, std::span<const std::uint16_t> a,
                                     std::span<const std::uint16_t> b, std::span<const std::uint32_t> c,
                                     Descriptors descriptors = Descriptors::isa);

// ---- NVFP4 on f16 tensor cores -------------------------------------------------------------------------
// NVFP4 operands: e2m1 codes (4 bits, one per std::uint8_t), one ue4m3 scale per 16 elements along K.
// A is tiles x 16 x K codes with scales tiles x 16 x K/16; B is tiles x K x 8 codes with scales
// tiles x K/16 x 8; C tiles x 16 x 8 f32.  On the device each element times its scale becomes an f16
// (exactly, see mma.cu), m16n8k16 f16 mma.sync instructions with an f32 accumulator run along K (one
// instruction per scale block), and the epilogue multiplies by the f32 tensor scale: D = fp32(acc * ts).
// K must be a positive multiple of 16 (at most 16 * kMaxChain).
std::vector<std::uint32_t> run_nvfp4_emulated(int tiles, int k, std::span<const std::uint8_t> a,
                                              std::span<const std::uint8_t> a_scales,
                                              std::span<const std::uint8_t> b,
                                              std::span<const std::uint8_t> b_scales,
                                              std::span<const std::uint32_t> c, std::uint32_t tensor_scale);
// The host wrapper's checks (quick-tier tested): codes must be 4-bit e2m1, scales ue4m3 without the NaN
// code 0x7F and without the (meaningless) bit 7.  Throws std::invalid_argument naming the first bad entry.
void check_nvfp4(int tiles, int k, std::span<const std::uint8_t> a, std::span<const std::uint8_t> a_scales,
                 std::span<const std::uint8_t> b, std::span<const std::uint8_t> b_scales,
                 std::span<const std::uint32_t> c);

// ---- sm_120a native NVFP4 (compiled only with LOWBIT_DEVICE_SM120=ON; never run by this project) -------
// mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3 over
// the same operand layout as run_nvfp4_emulated (K a multiple of 64), tensor scale in the epilogue.
bool native_nvfp4_available();  // true when the sm_120a object was built in
std::vector<std::uint32_t> run_nvfp4_native_sm120(int tiles, int k, std::span<const std::uint8_t> a,
                                                  std::span<const std::uint8_t> a_scales,
                                                  std::span<const std::uint8_t> b,
                                                  std::span<const std::uint8_t> b_scales,
                                                  std::span<const std::uint32_t> c, std::uint32_t tensor_scale);

// ---- shared by the probe sources ---------------------------------------------------------------------
namespace detail {
// A device allocation (cudaMalloc / cudaFree), optionally filled from host memory.
class Buffer {
 public:
  explicit Buffer(std::size_t bytes, const void* from = nullptr);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
};
// Runs launch(d_out) twice, over outputs poisoned with two different patterns, and returns the outputs.
// Throws lowbit::device::Error when an element kept its poison in both runs (never written) or when the
// two runs disagree.  `what` names the probe in the message.
std::vector<std::uint32_t> run_poisoned(std::size_t outputs, const std::function<void(std::uint32_t*)>& launch,
                                        const std::string& what);
// The current device's compute capability (major * 10 + minor).
int current_capability();
}  // namespace detail

}  // namespace lowbit::device::mma
