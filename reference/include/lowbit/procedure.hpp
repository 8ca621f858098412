// GEMM procedures as data: one row per way of computing D = A B (+ C) that lowbit models, from the exact
// answer through f32 accumulation orders and tensor-core models to the composites kernels build from them
// (DeepSeek-V3's promotion, DeepGEMM's block scaling).  The command line, the accuracy report, the golden
// vectors and the gate all run a procedure through `run`; a new tensor-core model is one row of the model
// table (gemm.cpp), a new composite one row of the composite table (procedure.cpp).
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lowbit/error.hpp"
#include "lowbit/gemm.hpp"
#include "lowbit/names.hpp"

namespace lowbit::gemm {

enum class Kind : std::uint8_t {
  exact,         // the exact sum of products (and C) rounded once
  f32_order,     // an f32 accumulation order (gemm::accumulate)
  model,         // a tensor-core model's GEMM driver (gemm::run_model)
  promoted,      // the model inside blocks of K from zero, each promoted into an f32 accumulator by an FMA
  block_scaled,  // as promoted, each block's FMA multiplied by the product of A's and B's block scales
};
inline constexpr Named<Kind> kind_names[] = {
    {Kind::exact, "exact", "the exact sum of products (and C), rounded once"},
    {Kind::f32_order, "f32-order", "an f32 accumulation order"},
    {Kind::model, "model", "a bit-accurate tensor-core model"},
    {Kind::promoted, "promoted", "a model per block of K, promoted into f32 by an FMA"},
    {Kind::block_scaled, "block-scaled", "a model per block of K, promoted with the block scales' product"},
};
constexpr const auto& names_of(Kind) { return kind_names; }

// Where the block scales of A and B sit (their codes, A's rows by K blocks and K blocks by B's columns).
enum class ScaleLayout : std::uint8_t {
  none,            // no block scales
  optional_k,      // exact: optionally one scale per K block of each A row and each B column (e8m0, ue4m3), or
                   // f32 scales with B's per 128 x 128 block (DeepGEMM's weights)
  per_k_block,     // the model's own: A is M x ceil(K / block), B is ceil(K / block) x N
  deepgemm_1x128,  // A: M x ceil(K / 128) f32 (1 x 128), B: ceil(K / 128) x ceil(N / 128) f32 (128 x 128)
  deepgemm_1d1d,   // A: M x ceil(K / 128) f32 (1 x 128), B: ceil(K / 128) x N f32 (1 x 128 along K)
};
inline constexpr Named<ScaleLayout> scale_layout_names[] = {
    {ScaleLayout::none, "none", "no block scales"},
    {ScaleLayout::optional_k, "optional-k-blocks", "optional scales per K block (B per column, or per 128x128)"},
    {ScaleLayout::per_k_block, "k-blocks", "one scale per K block of each A row and each B column"},
    {ScaleLayout::deepgemm_1x128, "1x128-128x128", "A per 1x128, B per 128x128, f32"},
    {ScaleLayout::deepgemm_1d1d, "1x128-1x128", "A and B per 1x128 along K, f32"},
};
constexpr const auto& names_of(ScaleLayout) { return scale_layout_names; }

struct Procedure {
  const char* name;
  Kind kind;
  const char* description;
  const TensorCoreModel* model = nullptr;  // model, promoted, block_scaled: the (inner) tensor-core model
  OrderOptions order{};                    // f32_order: the order and its parameters
  int interval = 0;                        // promoted, block_scaled: K elements per promotion
  ScaleLayout scales = ScaleLayout::none;
  // The operand formats the procedure takes (empty: every format whose values the kind handles, see
  // `takes`) and whether it converts others exactly first.
  std::span<const Format* const> operands = {};
  Conversion conversion = Conversion::none;
  std::span<const OperandPair> golden = {};  // the golden suite's operand configurations
};

// Every procedure: the exact reference, the f32 orders and the composites, then one per tensor-core model
// (`lowbit gemm --list-models` order).
std::span<const Procedure> procedures();
const Procedure* find_procedure(std::string_view name);

// Whether the procedure takes operands of format `f`.  exact: every format whose significand fits 24 bits;
// f32 orders: every format whose every value is an f32 value (they read operands as f32); a model and the
// composites over it: the model's rule (takes_operands).
bool takes(const Procedure& p, const Format& f);
// The formats a message lists for a procedure that refuses an operand ("e4m3, e5m2" or a sentence).
std::string operand_text(const Procedure& p);

// The output's f32 epilogue, cuBLASLt's scales among it (gemm::apply_epilogue, quantize_output), all f32 bits.
struct Epilogue {
  std::uint32_t alpha = 0x3F800000u;
  std::optional<std::uint32_t> beta;  // default: 1 with C (C accumulates, as D = A B + C), 0 without
  std::uint32_t scale_a = 0x3F800000u;
  std::uint32_t scale_b = 0x3F800000u;
  std::uint32_t scale_c = 0x3F800000u;
  std::uint32_t scale_d = 0x3F800000u;  // only with a quantized output
  const Format* d_format = nullptr;     // a quantized output of at most 16 bits: rne, satfinite of fp32(d * scale_d)
};

// The block scales a procedure reads: their format, K elements per scale, and the shapes of A's and B's scales.
struct ScaleShape {
  const Format* format = nullptr;
  int block = 0;
  int a_rows = 0, a_cols = 0, b_rows = 0, b_cols = 0;
};
// The scale shape for D = A (m x k) B (k x n): `format` and `block` as given, else the procedure's defaults
// (exact: e8m0 per 32, ue4m3 per 16, f32 per 128 with B per 128 x 128).  Throws ArgumentError
// ("scale_format", "scale_block") for a format or block the procedure does not use.
ScaleShape scale_shape(const Procedure& p, int m, int n, int k, const Format* format, int block);
// Whether the procedure cannot run without block scales (its layout is its own, not the exact reference's
// optional ones).
constexpr bool needs_block_scales(const Procedure& p) {
  return p.scales == ScaleLayout::per_k_block || p.scales == ScaleLayout::deepgemm_1x128 ||
         p.scales == ScaleLayout::deepgemm_1d1d;
}

struct Operands {
  const Matrix* a = nullptr;
  const Matrix* b = nullptr;
  const Matrix* c = nullptr;  // f32 codes (or any format, read as its f32 value)
  const Matrix* a_scales = nullptr;
  const Matrix* b_scales = nullptr;
  int scale_block = 0;  // 0: the procedure's default
  Epilogue epilogue{};
};

struct RunResult {
  const Format* format = &formats::f32;  // D's format: f32, or f16 for an f16-accumulator model
  std::vector<std::uint64_t> d;
  const Format* quantized_format = nullptr;  // with Epilogue::d_format: D cast into it
  std::vector<std::uint64_t> quantized;
};

// Run a procedure.  Without an epilogue (alpha, scales, beta other than 1 with C), C enters the accumulation as
// the procedure defines it; with one, the procedure runs from zero and the epilogue combines its result with C
// (the exact reference computes everything exactly and rounds once).  Throws ArgumentError naming the operand
// ("a_format", "b_format", "a_scales", "b_scales", "scale_format", "scale_block", "alpha", "d_format",
// "scale_d") for what the procedure does not take.
RunResult run(const Procedure& p, const Operands& o);

}  // namespace lowbit::gemm
