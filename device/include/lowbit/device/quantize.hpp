// Device quantizers: the scaling schemes of lowbit/scale.hpp on an f32 row-major tensor in device memory,
// rowwise, bit for bit what lowbit::scale::quantize() returns on the host for the same Options.
//
// The element conversion is the reference's constexpr code (lowbit::convert / round_to) compiled for the
// device, and every per-block scale rule is the shared LOWBIT_HD code of lowbit/scale_rules.hpp (the one
// definition src/scale.cpp uses too).  The hardware path replaces only the element conversion, by
// cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 (sm_89 and newer); it is a subject under test, never the reference.
//
// Host side: make_plan() validates Options and the shape (rejecting what the device path does not
// implement, naming the option) and builds a trivially copyable Plan; the launch shapes and buffer sizes
// are plain functions of the Plan (tested without a GPU).  Device side: quantize() runs the passes on a
// stream: [tensor amax] -> [block amaxes] -> scales -> elements, or one fused pass for row-local blocks.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "lowbit/format.hpp"
#include "lowbit/hd.hpp"
#include "lowbit/policy.hpp"
#include "lowbit/scale.hpp"

namespace lowbit::device::quant {

// Which element conversion the kernels use.
enum class ElementPath : std::uint8_t {
  software,  // lowbit::convert, compiled for the device
  // cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32: e4m3 / e5m2 elements under the cuda profile's element policy only
  // (lowbit::resolve(find_profile("cuda"), element, {rne, satfinite}): its quirks make every NaN the
  // canonical 0x7F, as the instruction does; device/tests/cvt_test.cpp proves the instruction equals the
  // reference under that policy on every f32 input).
  hardware,
};

// The element policies the kernels are compiled for with the policy a compile-time constant (every policy
// branch of lowbit::convert folds); any other policy runs the same code with the policy read at run time.
enum class PolicyKind : std::uint8_t {
  runtime,
  rne_satfinite,  // Options' default element policy: rne, satfinite, built-in quirks
  cuda,           // the cuda profile's rne + satfinite policy (NaN: canonical positive NaN)
};
inline constexpr Policy k_rne_satfinite_policy{.rounding = Rounding::rne, .overflow = Overflow::satfinite};
inline constexpr Policy k_cuda_policy{.rounding = Rounding::rne,
                                      .overflow = Overflow::satfinite,
                                      .quirks = {.nan_to_no_nan = NanToNoNan::plus_max,
                                                 .nan_style = NanStyle::positive_all_ones,
                                                 .unsigned_negative = UnsignedNegative::magnitude,
                                                 .zero_into_no_zero = ZeroIntoNoZero::smallest}};
// Field-by-field equality of two policies (Policy has no operator==).
bool same_policy(const Policy& a, const Policy& b);
// The element policy the hardware path stands for: what --profile cuda resolves for `element` under rne
// and satfinite.  Throws std::invalid_argument when the profile has no such rule.
Policy cuda_profile_policy(const Format& element);

// How the passes are arranged (chosen by make_plan from the scheme and the shape).
enum class Route : std::uint8_t {
  rows,     // blocks inside one row (token, 1xN, MX, NVFP4 1D): amax, scale and elements in one pass
  general,  // block amaxes (atomics), then one thread per block for the scales, then the elements
};

// Element kernels are instantiated for a few element formats with the row as a compile-time constant
// (the conversion folds), and once for a runtime row.
enum class ElementKind : std::uint8_t { generic, e4m3, e5m2, e2m1 };

// Everything the kernels need, trivially copyable (the Options' Format pointer becomes a copy of the row).
struct Plan {
  int rows = 0, cols = 0;
  scale::Scheme scheme = scale::Scheme::tensor;
  int br = 1, bc = 1;    // the block shape behind each scale (tensor: rows x cols, channel: rows x 1, ...)
  int nbr = 1, nbc = 1;  // blocks per column and per row
  scale::ScaleFormat scale_format = scale::ScaleFormat::f32;
  scale::MxRule mx_rule = scale::MxRule::floor;
  scale::NonFinite nonfinite = scale::NonFinite::scale_nan;
  bool amax_propagates_nan = false;
  float eps = 0.0f;
  bool zero_reference = false;  // ZeroScale::reference
  bool fast_math = false;       // Variant::fast_math
  float delayed_scale = 1.0f;   // the delayed scheme's current scale
  Format element{};
  Policy policy{};
  ElementKind kind = ElementKind::generic;
  PolicyKind policy_kind = PolicyKind::runtime;
  ElementPath path = ElementPath::software;
  Route route = Route::general;
  bool vec4 = false;            // 16-byte loads: cols % 4 == 0 and (bc % 4 == 0 or bc == 1)
  bool needs_tensor_amax = false;  // tensor, delayed (reported), NVFP4 (S_enc)
  float elem_max = 0.0f;
  int emax = 0;
  int mantissa_bits = 0;
  bool stochastic = false;

  LOWBIT_HD std::size_t elements() const { return static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols); }
  LOWBIT_HD std::size_t blocks() const { return static_cast<std::size_t>(nbr) * static_cast<std::size_t>(nbc); }
  std::size_t packed_words() const {
    return scale_format == scale::ScaleFormat::ue8m0_packed ? (blocks() + 3) / 4 : 0;
  }
};

// Validate and plan.  Throws std::invalid_argument naming the option (as the command line spells it) for a
// combination the reference rejects or the device path does not implement: --hadamard, --variant 4over6,
// nvfp4-1level, an empty tensor, and the hardware element path for an element other than e4m3 / e5m2 or
// an element policy other than the cuda profile's (cuda_profile_policy).  `delayed_scale`
// is the delayed scheme's current scale (DelayedState::scale).
Plan make_plan(int rows, int cols, const scale::Options& options, ElementPath path = ElementPath::software,
               float delayed_scale = 1.0f);

// Device outputs, laid out as lowbit::scale::Quantized: codes one byte per element row-major; one scale per
// block in block order (row-major over blocks), as a 32-bit word holding the f32 bits or the e8m0 / e4m3 code;
// the ue8m0-packed words (four codes per word, the first in bits 7:0); the NVFP4 tensor scale S_dec (f32
// bits); and the tensor amax (f32 bits, for tensor and delayed: what delayed scaling records in its
// history).  Pointers a scheme does not produce may be null.
struct Outputs {
  std::uint8_t* codes = nullptr;          // plan.elements()
  std::uint32_t* scales = nullptr;        // plan.blocks()
  std::uint32_t* packed_scales = nullptr;  // plan.packed_words() (ue8m0-packed only)
  std::uint32_t* tensor_scale = nullptr;  // 1 word (NVFP4)
  std::uint32_t* tensor_amax = nullptr;   // 1 word (tensor, delayed; optional)
};

// Workspace (device memory, 256-byte aligned) the passes need: block amax patterns and flags, multipliers.
std::size_t workspace_bytes(const Plan& plan);

// Launch shapes (host logic, tested without a GPU).  Every kernel loops grid-stride, so a grid of any size
// covers the work; the grids are one wave: at most `ctas_per_sm` CTAs per multiprocessor, the number the
// occupancy query (cudaOccupancyMaxActiveBlocksPerMultiprocessor) reports for the kernel and block size, so
// that every CTA is resident from the start and none waits for a second wave.
struct Launch {
  unsigned grid = 0, block = 0;
};
constexpr unsigned k_threads = 256;
// Elements handled by one thread per step of a grid-stride loop (4 with 16-byte loads, else 1).
int chunk(const Plan& plan);
// The general route's amax and element passes: at most sms x ctas_per_sm CTAs, never more than the work needs.
Launch elementwise_launch(const Plan& plan, int sms, int ctas_per_sm = 8);
// The general route's element pass, two-dimensional: x covers the row's chunks (block = the chunks rounded
// up to a warp, at most k_threads), y takes rows grid-stride; sms x ctas_per_sm CTAs in all (at least one row
// of x).  elements_block(plan) is its block size (for the occupancy query).
struct Launch2 {
  unsigned gx = 0, gy = 0, block = 0;
};
unsigned elements_block(const Plan& plan);
Launch2 elements_launch(const Plan& plan, int sms, int ctas_per_sm = 16);
// The scale pass: one thread per block (per four blocks when ue8m0-packed).
Launch scales_launch(const Plan& plan);
// The rows route: `group` threads per block (bc / 4 rounded to a power of two, at most 32), blocks handled
// grid-stride by at most sms x ctas_per_sm CTAs.
struct RowsLaunch {
  unsigned grid = 0, block = 0;
  int group = 0;
};
RowsLaunch rows_launch(const Plan& plan, int sms, int ctas_per_sm = 8);
// How many times quantize() reads the input from memory: one pass per kernel that reads it (a tensor amax
// pass, a block amax pass, the element or fused pass).  The benchmark counts each read in the bytes the
// scheme must move.
int input_reads(const Plan& plan);
// Which of the blocks a launch writes: the index of block (r, c) in Quantized order.
LOWBIT_HD inline std::size_t block_index(const Plan& p, int r, int c) {
  return static_cast<std::size_t>(r / p.br) * static_cast<std::size_t>(p.nbc) + static_cast<std::size_t>(c / p.bc);
}

// Quantize x (plan.elements() floats, device memory; 16-byte aligned for the vector loads, else the scalar
// loads are used) into `out`.  `rbits` (device, one word per element, row-major) is required for stochastic
// element rounding and ignored otherwise.  `workspace` holds workspace_bytes(plan).  Asynchronous on
// `stream`; launch errors are thrown as lowbit::device::Error naming the call.
void quantize(const Plan& plan, const float* x, const std::uint32_t* rbits, const Outputs& out, void* workspace,
              cudaStream_t stream = nullptr);

// Diagnostic for the benchmark: the rows route's reads and reductions alone.  For a plan whose route is
// Route::rows, writes each block's amax as the fused pass computes it (the largest |x| bit pattern at most
// the plan's limit, NaN and infinity read as +0 beyond it; see amax_limit) to amax[block] (plan.blocks()
// words, device memory), and nothing else: no scales, no codes.  Its time is the read floor of the fused
// pass.  Throws std::invalid_argument for another route.
void row_amax(const Plan& plan, const float* x, std::uint32_t* amax, cudaStream_t stream = nullptr);
// The limit of row_amax and the passes: |x| patterns above it read as +0 (+Inf's pattern 0x7F800000, or the
// largest finite one under MX NonFinite::propagate, whose amax is over the finite elements).
LOWBIT_HD inline std::uint32_t amax_limit(const Plan& p) {
  return p.scheme == scale::Scheme::mx && p.nonfinite == scale::NonFinite::propagate ? 0x7F7FFFFFu : 0x7F800000u;
}

// Number of multiprocessors of the current device (cached per process).
int multiprocessors();

}  // namespace lowbit::device::quant
