// GEMM references: the exact answer, the answers of common f32 accumulation orders, and bit-accurate
// tensor-core models (docs/semantics.md §5).
//
// Operands are matrices of codes of any format whose significand fits 24 bits (fp4, fp6, fp8, bf16,
// f16, tf32, f32, int8).  Outputs are f32 codes unless a model says otherwise.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lowbit/format.hpp"
#include "lowbit/named.hpp"
#include "lowbit/policy.hpp"
#include "lowbit/value.hpp"

namespace lowbit::gemm {

// A row-major matrix of codes.
struct Matrix {
  const Format* format = nullptr;
  int rows = 0;
  int cols = 0;
  std::vector<std::uint64_t> codes;
  std::uint64_t at(int r, int c) const { return codes[static_cast<std::size_t>(r) * cols + c]; }
};

// ---- the exact reference -------------------------------------------------------------------------

// D = alpha * (A B) + beta * C, computed exactly and rounded once into `out` under `policy`.
// alpha and beta are f32 bit patterns (1.0f = 0x3F800000); C (optional) holds f32 codes.
struct ExactOptions {
  std::uint32_t alpha = 0x3F800000u;
  std::uint32_t beta = 0x3F800000u;
  // Per-tensor scales as cuBLASLt's A/B scale pointers apply them: D = alpha * scale_a * scale_b * AB
  // + beta * C, all exactly.
  std::uint32_t scale_a = 0x3F800000u;
  std::uint32_t scale_b = 0x3F800000u;
  // cuBLASLt's C and D scales: D = scale_d * (alpha * scale_a * scale_b * AB + beta * scale_c * C), exactly,
  // then rounded once into `out` (an fp8 `out` with a satfinite policy gives cuBLASLt's quantized output).
  std::uint32_t scale_c = 0x3F800000u;
  std::uint32_t scale_d = 0x3F800000u;
  const Format* out = nullptr;  // default f32
  Policy policy{};              // default rne
};
std::vector<std::uint64_t> exact(const Matrix& a, const Matrix& b, const Matrix* c, const ExactOptions& o = {});

// The exact block-scaled product: D = sum_k (a_ik * sa_i,k/block) * (b_kj * sb_k/block,j/bn) (+ C), rounded once.
// a_scales is M x ceil(K/block); b_scales is ceil(K/block) x ceil(N/bn) (bn = 1: one scale per column, as MX and
// NVFP4 have; bn = 128: DeepGEMM's 128x128 weight blocks).  Scales are codes of their own format (e8m0, ue4m3,
// f32).  A NaN scale makes the outputs it touches the canonical NaN.
std::vector<std::uint64_t> exact_block_scaled(const Matrix& a, const Matrix& b, const Matrix& a_scales,
                                              const Matrix& b_scales, int block, int bn, const Matrix* c,
                                              const Format& out, const Policy& p);

// One exact dot product (plus c, an f32 code), rounded once into `out`.
std::uint64_t exact_dot(const Format& fa, std::span<const std::uint64_t> a, const Format& fb,
                        std::span<const std::uint64_t> b, std::uint32_t c, const Format& out, const Policy& p);

// ---- f32 accumulation orders -----------------------------------------------------------------------
enum class Order : std::uint8_t {
  sequential,      // acc = fl(acc + fl(a*b)), k = 0, 1, ...
  sequential_fma,  // acc = fmaf(a, b, acc)
  pairwise,        // products fl(a*b), summed by recursive halving (left half + right half)
  split_k,         // `splits` contiguous slices, each sequential from 0, then the slices summed in order
  blocked,         // every `block` elements: the exact block sum rounded to f32 (rne), added to acc in f32
};
inline constexpr Named<Order> order_names[] = {
    {Order::sequential, "sequential"}, {Order::sequential_fma, "sequential-fma"}, {Order::pairwise, "pairwise"},
    {Order::split_k, "split-k"},       {Order::blocked, "blocked"},
};
constexpr const auto& names_of(Order) { return order_names; }
struct OrderOptions {
  Order order = Order::sequential;
  int splits = 4;
  int block = 128;
};
// C (optional; f32 codes, or codes of any format, read as their f32 value) starts the accumulator (sequential
// orders) or is added last (pairwise, split-K).
std::vector<std::uint64_t> accumulate(const Matrix& a, const Matrix& b, const Matrix* c, const OrderOptions& o);

// ---- bit-accurate tensor-core models (MMA-Sim, arXiv 2511.10909) -----------------------------------
enum class Output : std::uint8_t {
  f32_rz,        // normalise, round toward zero to f32 (23 fraction bits, f32 subnormals)
  f32_e8m13_rz,  // round toward zero to 13 fraction bits, stored as f32 ("e8m13")
  f16_rne,       // round to nearest even to f16
};
inline constexpr Named<Output> output_names[] = {
    {Output::f32_rz, "f32-rz"}, {Output::f32_e8m13_rz, "f32-e8m13-rz"}, {Output::f16_rne, "f16-rne"}};
constexpr const auto& names_of(Output) { return output_names; }
enum class BlockScale : std::uint8_t {
  none,
  per_instruction,  // one scale per operand per instruction-K group (mxf8f6f4: ue8m0 per 32)
  per_16,           // fp4 kinds: each 16 products summed exactly, times the two scales (mxf4, mxf4nvf4)
};
inline constexpr Named<BlockScale> block_scale_names[] = {
    {BlockScale::none, "none"}, {BlockScale::per_instruction, "per-instruction"}, {BlockScale::per_16, "per-16"}};
constexpr const auto& names_of(BlockScale) { return block_scale_names; }

// How one step evaluates its `group` products.
enum class Datapath : std::uint8_t {
  fused,      // one fused sum of the group's products and C, as above
  f16_pairs,  // Hopper's FP8 mma.sync, which has no FP8 tensor instruction behind it (its SASS converts to f16
              // and issues two HMMA.16816.F32): the operands converted exactly to f16; the products of
              // k = 4q, 4q+1 (q = 0 .. group/4 - 1) fused from +0 as one step of group/2, those of k = 4q+2,
              // 4q+3 fused onto that result, and C added last with one f32 add (nearest even; a NaN result
              // is the canonical 0x7FFFFFFF).  The fused half-steps use the model's F and output.
};
inline constexpr Named<Datapath> datapath_names[] = {{Datapath::fused, "fused"}, {Datapath::f16_pairs, "f16-pairs"}};
constexpr const auto& names_of(Datapath) { return datapath_names; }

// Whether a model (or procedure) takes operands of formats other than its instruction's own.
enum class Conversion : std::uint8_t {
  none,    // only the instruction's own operand formats
  exact,   // also every format whose every value one of those holds: converted exactly first (a kernel that
           // widens fp8 to bf16 before a bf16 MMA computes the same products)
};
inline constexpr Named<Conversion> conversion_names[] = {{Conversion::none, "none"}, {Conversion::exact, "exact"}};
constexpr const auto& names_of(Conversion) { return conversion_names; }

// One golden-suite operand configuration of a procedure: A's and B's formats, and block scales if any.
struct OperandPair {
  const Format* a;
  const Format* b;
  const Format* scale = nullptr;
  int scale_block = 0;
};

struct TensorCoreModel {
  const char* name;
  int group;           // products per step: the instruction's K after splitting
  int fraction_bits;   // F: each term truncated to F fraction bits relative to 2^(max exponent)
  Output output;
  bool truncate_tf32;  // f32 inputs lose their low 13 bits (TF32 tensor cores)
  BlockScale scale;
  int scale_block;     // elements per scale along K (32 for ue8m0, 16 for ue4m3)
  const char* source;  // where the parameters come from, and what is unconfirmed on hardware
  Datapath datapath = Datapath::fused;
  // The instruction's own operand formats, and whether others are converted to one of them first.
  std::span<const Format* const> operands = {};
  Conversion conversion = Conversion::none;
  // The operand configurations of the model's golden suite (vectors/SPEC.md).
  std::span<const OperandPair> golden = {};
};

std::span<const TensorCoreModel> models();
const TensorCoreModel* find_model(std::string_view name);

// Whether `model` takes operands of format `f`: its instruction's own formats, and under Conversion::exact
// every format whose every value one of them holds.
bool takes_operands(const TensorCoreModel& model, const Format& f);

// Whether model_step and the drivers compute for operands of format `f`: every format whose significand fits 24
// bits, and for an f16_pairs model those whose every value f16 holds.  Wider than takes_operands: the sweeps
// and fuzzers that prove the drivers equal model_step use the whole domain.
bool defined_on(const TensorCoreModel& model, const Format& f);

// Whether every value of `f` (finite, infinite and NaN) is a value of `g`, so that converting f into g is exact.
// Sufficient, not necessary: a few degenerate parametric formats whose values g holds are refused too.
bool holds_every_value(const Format& g, const Format& f);

// One step of a model: the group's products (and C, an f32 code) aligned, truncated, summed exactly and
// rounded (a fused model; an f16_pairs model as Datapath says).  `a`, `b` hold `model.group` values (shorter
// spans are padded with zeros).  Scales (for the block-scaled kinds) are codes of `scale_format`, one per
// `scale_block` elements.
std::uint32_t model_step(const TensorCoreModel& model, const Format& fa, std::span<const std::uint64_t> a,
                         const Format& fb, std::span<const std::uint64_t> b, std::uint32_t c,
                         const Format* scale_format = nullptr, std::span<const std::uint64_t> sa = {},
                         std::span<const std::uint64_t> sb = {});

// The model's GEMM driver: for each output, C (or +0) then each group of K in order, the rounded result
// of one step fed back as C for the next.  K not a multiple of the group is padded with zeros.
// Block scales: a_scales is rows(A) x ceil(K / scale_block), b_scales is ceil(K / scale_block) x cols(B).
std::vector<std::uint64_t> run_model(const TensorCoreModel& model, const Matrix& a, const Matrix& b, const Matrix* c,
                                     const Matrix* a_scales = nullptr, const Matrix* b_scales = nullptr);

// DeepSeek-V3 / DeepGEMM promotion: the model inside blocks of `block` elements starting from zero; each
// block's result promoted into an f32 accumulator with one fp32 FMA, acc = fma(s, partial, acc), where s is
// the f32 scale factor (1.0f when unscaled).  C (optional; any format, read as its f32 value) starts the
// accumulator.
//
// NaN results of the f32 arithmetic that run_promoted, run_block_scaled, apply_epilogue and quantize_output
// model are the GPU's canonical NaN 0x7FFFFFFF, whatever the operands (PTX ISA §9.7.3, Floating-Point
// Instructions: "Single-precision instructions return an unspecified NaN"; sm_90's FADD / FFMA / FMUL return
// 0x7FFFFFFF, e.g. for a promotion of -Inf into +Inf, where x86 would give 0xFFC00000).
std::vector<std::uint64_t> run_promoted(const TensorCoreModel& inner, int block, const Matrix& a, const Matrix& b,
                                        const Matrix* c, std::uint32_t scale = 0x3F800000u);

// DeepGEMM's block-scaled FP8 GEMM: A carries one f32 scale per row and 128-element K block
// (a_scales: M x ceil(K/128), "1x128"), B one per 128x128 block (bn = 128, b_scales: ceil(K/128) x
// ceil(N/128); the 1d2d kernel) or one per column and K block (bn = 1, b_scales: ceil(K/128) x N; the 1d1d
// kernel of weight gradients); each K block's model result, from +0, is promoted with
// acc = fma(fp32(sa * sb), partial, acc), and C (optional) starts acc.
std::vector<std::uint64_t> run_block_scaled(const TensorCoreModel& inner, const Matrix& a, const Matrix& b,
                                            const Matrix& a_scales, const Matrix& b_scales, const Matrix* c,
                                            int bn = 128);

// The per-tensor epilogue of a model's result (cuBLASLt-style scales, unconfirmed order):
// d = fp32(fp32(fp32(scale_a * scale_b) * alpha) * acc), then + fp32(fp32(beta * scale_c) * c) when beta != 0.
std::vector<std::uint64_t> apply_epilogue(const std::vector<std::uint64_t>& acc, const Matrix* c, std::uint32_t alpha,
                                          std::uint32_t beta, std::uint32_t scale_a, std::uint32_t scale_b,
                                          std::uint32_t scale_c = 0x3F800000u);
// cuBLASLt's quantized output: each f32 result d becomes out(rne, satfinite)(fp32(d * scale_d)).
std::vector<std::uint64_t> quantize_output(const std::vector<std::uint64_t>& d, std::uint32_t scale_d,
                                           const Format& out);

}  // namespace lowbit::gemm
