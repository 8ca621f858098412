// Precision contracts: one GEMM-based op (a linear layer's fprop, dgrad or wgrad) as one document — each
// operand's storage and quantization, the GEMM procedure, the ordered epilogue and the output cast — and the
// stages it passes through, so that a fused kernel can be compared with it stage by stage.
//
// A contract composes what the reference already defines and computes nothing of its own: quantization is
// scale::quantize (through a recipe, lowbit/recipe.hpp), the GEMM is a row of the procedure table
// (gemm::run), the scales, alpha and the residual are gemm::apply_epilogue, and the output cast is the
// element conversion under a policy.  The document's schema is docs/contract.md; the named contracts (the
// training recipes of Transformer Engine, DeepSeek-V3 and torchao) are documents of the same schema, built
// in, validated by the same loader.
//
// Passes, with X [M,K] activations, W [N,K] weights (as linear layers store them) and dY [M,N]:
//   fprop  Y  = X  · Wᵀ   A = X   (rows along K),  B = Wᵀ
//   dgrad  dX = dY · W    A = dY  (rows along N),  B = W
//   wgrad  dW = dYᵀ · X   A = dYᵀ (rows along M),  B = X
// Each operand is quantized along the reduction dimension: A as it is laid out above, B as its transpose
// (W for fprop, Wᵀ for dgrad, Xᵀ for wgrad), which is TE's rowwise or columnwise copy of that tensor.
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lowbit/error.hpp"
#include "lowbit/format.hpp"
#include "lowbit/gemm.hpp"
#include "lowbit/names.hpp"
#include "lowbit/policy.hpp"
#include "lowbit/procedure.hpp"
#include "lowbit/recipe.hpp"
#include "lowbit/scale.hpp"

namespace lowbit::contract {

// The version of the document schema (docs/contract.md), its "lowbit_contract" key.
inline constexpr int schema_version = 1;

enum class Pass : std::uint8_t { fprop, dgrad, wgrad };
inline constexpr Named<Pass> pass_names[] = {
    {Pass::fprop, "fprop", "Y = X Wᵀ"},
    {Pass::dgrad, "dgrad", "dX = dY W"},
    {Pass::wgrad, "wgrad", "dW = dYᵀ X"},
};
constexpr const auto& names_of(Pass) { return pass_names; }

// The tensors a layer's passes read.
enum class Operand : std::uint8_t { x, w, dy };
inline constexpr Named<Operand> operand_names[] = {
    {Operand::x, "x", "activations [M, K]"},
    {Operand::w, "w", "weights [N, K]"},
    {Operand::dy, "dy", "output gradient [M, N]"},
};
constexpr const auto& names_of(Operand) { return operand_names; }

// What has been held against hardware: nothing, or the MMA model the contract's procedure runs (the
// contract's whole composition, quantizers and epilogue order, has not been run on a GPU).
enum class Hardware : std::uint8_t { unverified, model_verified };
inline constexpr Named<Hardware> hardware_names[] = {
    {Hardware::unverified, "unverified", "not run on hardware"},
    {Hardware::model_verified, "model-verified",
     "the procedure's MMA model equals the GPU bit for bit (reports/device/); the composition is not run there"},
};
constexpr const auto& names_of(Hardware) { return hardware_names; }

// How an operand's rows-along-the-reduction form is made from the tensor as stored.
enum class Form : std::uint8_t { as_stored, transposed };

// The GEMM operands of a pass: A (rows along the reduction) and B (given as its transpose, rows along the
// reduction too).
struct PassOperands {
  Operand a;
  Form a_form;  // transposed: wgrad's dYᵀ
  Operand b;
  Form b_form;  // transposed: dgrad's Wᵀ, wgrad's Xᵀ
};
constexpr PassOperands operands_of(Pass p) {
  switch (p) {
    case Pass::fprop: return {Operand::x, Form::as_stored, Operand::w, Form::as_stored};
    case Pass::dgrad: return {Operand::dy, Form::as_stored, Operand::w, Form::transposed};
    case Pass::wgrad: return {Operand::dy, Form::transposed, Operand::x, Form::transposed};
  }
  return {Operand::x, Form::as_stored, Operand::w, Form::as_stored};
}

// The epilogue's steps, applied in order to the f32 result of the GEMM (docs/contract.md "Epilogue").
enum class StepKind : std::uint8_t { dequantize, bias, residual, relu, clamp, amax, cast, gelu, silu };
inline constexpr Named<StepKind> step_names[] = {
    {StepKind::dequantize, "dequantize",
     "the per-tensor (and NVFP4 tensor) scales and alpha, as cuBLASLt applies them"},
    {StepKind::bias, "bias", "a bias vector of N added in f32"},
    {StepKind::residual, "residual", "an [M, N] residual, times beta, added in f32"},
    {StepKind::relu, "relu", "max(y, +0); NaN passes"},
    {StepKind::clamp, "clamp", "y clamped to [min, max]; NaN passes"},
    {StepKind::amax, "amax", "the largest |y| (fmaxf: NaN ignored) recorded as a stage"},
    {StepKind::cast, "cast", "y times an output scale, converted into the output format under a policy"},
    {StepKind::gelu, "gelu",
     "GELU, checked within tolerance_ulp of its correctly rounded f32 value (MPFR); the exact stages end before it"},
    {StepKind::silu, "silu",
     "SiLU x / (1 + e^-x), checked within tolerance_ulp of its correctly rounded f32 value (MPFR)"},
};
constexpr const auto& names_of(StepKind) { return step_names; }

// The two definitions of GELU kernels compute: x·Φ(x) with the normal CDF through erf (PyTorch's
// F.gelu(approximate="none")), and Hendrycks and Gimpel's tanh approximation 0.5·x·(1 + tanh(√(2/π)·(x +
// 0.044715·x³))) (F.gelu(approximate="tanh"), pytorch/pytorch#61439; the form XLA fuses into cuBLASLt's GELU
// epilogue, openxla/xla#7751).  Each is the function the reference rounds correctly, not a kernel's code.
enum class GeluForm : std::uint8_t { erf, tanh };
inline constexpr Named<GeluForm> gelu_form_names[] = {
    {GeluForm::erf, "erf", "x * Phi(x) = 0.5 * x * erfc(-x / sqrt(2))"},
    {GeluForm::tanh, "tanh", "0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))"},
};
constexpr const auto& names_of(GeluForm) { return gelu_form_names; }

struct Step {
  StepKind kind = StepKind::dequantize;
  std::uint32_t alpha = 0x3F800000u;  // dequantize
  std::uint32_t beta = 0x3F800000u;   // residual
  const Format* format = nullptr;     // bias, residual: the input's format; cast: the output format
  std::uint32_t lo = 0, hi = 0;       // clamp (f32 bits)
  std::uint32_t scale = 0x3F800000u;  // cast: the output scale
  Policy policy{.rounding = Rounding::rne, .overflow = Overflow::satfinite};  // cast
  GeluForm gelu_form = GeluForm::erf;                                         // gelu ("approximation")
  std::uint32_t tolerance_ulp = 0;                                            // gelu, silu
};

// An activation step's reference: the f32 value of the function at the f32 `x`, correctly rounded (nearest
// even, from a 256-bit MPFR evaluation); NaN gives the GPU's canonical 0x7fffffff, ±Inf the limits (+Inf,
// and -0 for GELU(-Inf) and SiLU(-Inf)).
std::uint32_t activation_f32(StepKind kind, GeluForm form, std::uint32_t x);

// The distance in ulps between two codes of a sign-magnitude float format: the count of representable values
// from one to the other (±0 are 0 apart; an infinity is one beyond the largest finite value), or nullopt
// when exactly one is NaN (two NaNs are 0 apart).
std::optional<std::uint64_t> ulp_distance(const Format& f, std::uint64_t a, std::uint64_t b);

// One operand's quantization: a recipe (nullopt: the operand enters the GEMM in its storage format).
// `stored`: the recipe is the operand's storage (storage.<t>.quantized): its codes and scales are inputs
// and enter the GEMM unchanged; nothing is quantized.
struct Quantization {
  std::optional<Recipe> recipe;
  scale::Options options;  // resolved from the recipe (and "eps")
  bool stored = false;
};

struct PassContract {
  Pass pass = Pass::fprop;
  Quantization a, b;
  const gemm::Procedure* procedure = nullptr;
  std::vector<Step> epilogue;
};

struct Contract {
  std::string name;
  std::string description;
  std::string source;
  Hardware hardware = Hardware::unverified;
  // By Operand: f32, bf16 or f16; for an operand stored already quantized, its element format.
  const Format* storage[3] = {&formats::f32, &formats::f32, &formats::f32};
  // By Operand: the scheme an operand stored already quantized was quantized with (storage.<t>.quantized).
  std::optional<Quantization> stored[3];
  std::vector<PassContract> passes;
  nlohmann::ordered_json document;  // as loaded

  const Format& storage_of(Operand t) const { return *storage[static_cast<int>(t)]; }
  const std::optional<Quantization>& stored_of(Operand t) const { return stored[static_cast<int>(t)]; }
  const PassContract* find(Pass p) const;
};

// A contract from its document.  Throws ArgumentError whose argument is the JSON path at fault
// ("passes.fprop.epilogue[2].format", "passes.dgrad.w.quantize.element", "storage.x").
Contract parse(const nlohmann::json& document);

// The named contracts, in listing order.
struct NamedContract {
  const char* name;
  const char* description;  // with its source
  const char* document;     // the JSON document
};
std::span<const NamedContract> named();
// A named contract, parsed; nullopt for a name that is not one.
std::optional<Contract> find_named(std::string_view name);

// A matrix of codes of one format (an input, or one stage's array), row-major.
struct Array {
  const Format* format = nullptr;
  std::vector<std::uint64_t> shape;  // one or two dimensions
  std::vector<std::uint64_t> codes;
};

// The parts of an operand stored already quantized, as inputs are named ("w.codes", "w.scales",
// "w.tensor_scale"), and the formats they hold.
enum class StoredPart : std::uint8_t { codes, scales, tensor_scale };
inline constexpr Named<StoredPart> stored_part_names[] = {
    {StoredPart::codes, "codes", "the element codes, one per byte, [rows, cols] as the tensor is stored"},
    {StoredPart::scales, "scales", "the decode scales in block order: f32, or e8m0 / ue4m3 codes"},
    {StoredPart::tensor_scale, "tensor_scale", "NVFP4's f32 tensor decode scale S_dec, [1]"},
};
constexpr const auto& names_of(StoredPart) { return stored_part_names; }
// The format of one part (nullptr: the scheme has no such part, e.g. a tensor scale outside NVFP4).
const Format* stored_part_format(const Quantization& q, StoredPart part);

// The inputs of one run: codes of each tensor's storage format (bias and residual of their step's format).
struct Inputs {
  std::optional<Array> x, w, dy, bias, residual;
  // The parts of each operand stored already quantized, keyed "<operand>.<part>" ("w.codes").
  std::map<std::string, Array> stored;
  // The delayed-scaling state of each tensor a pass quantizes with the delayed scheme (TE DelayedScaling):
  // its scale quantizes the tensor, its history takes the tensor's amax.  A tensor without one starts as TE's
  // first step does: scale 1, a history of 1024 zeros, algorithm max, margin 0.
  std::map<Operand, scale::DelayedState> delayed;
  // The seed of the random bits of a stochastic rounding (philox::sr_bits over each quantized operand's
  // elements, row-major in the form it is quantized in); required when a recipe rounds stochastically.
  std::optional<std::uint64_t> sr_seed;
};

// One stage of a run: a name ("x.quantized", "accumulator", "epilogue[1].bias", "amax", "output"), the
// part of it ("codes", "scales", "tensor_scale"; empty for a stage of one array) and its array.
struct Stage {
  Stage(std::string name_, std::string part_, std::string description_, Array array_,
        std::optional<std::uint32_t> tolerance = std::nullopt)
      : name(std::move(name_)),
        part(std::move(part_)),
        description(std::move(description_)),
        array(std::move(array_)),
        tolerance_ulp(tolerance) {}
  std::string name;
  std::string part;
  std::string description;
  Array array;
  // A stage from an activation on (gelu, silu): a kernel's array of it is compared within this many ulps of
  // the reference, not bit for bit.
  std::optional<std::uint32_t> tolerance_ulp;
  std::string file() const { return part.empty() ? name + ".npy" : name + "." + part + ".npy"; }
};

struct RunResult {
  std::vector<Stage> stages;
  // Each delayed-scaling state after this pass's step (scale::delayed_update): the tensor's next scale and
  // its history with this amax recorded; also the stages "<t>.state.history" and "<t>.state.scale".
  std::map<Operand, scale::DelayedState> next_delayed;
};

// Runs one pass.  Throws ArgumentError whose argument is the input at fault ("x", "w", "dy", "bias",
// "residual", "pass") for a missing input the pass needs, an input of another format than its storage, or
// mismatched shapes.
RunResult run(const Contract& c, Pass pass, const Inputs& in);

// An operand stored already quantized, made from its values (codes of a storage format: f32, bf16 or f16)
// by the storage's own scheme (scale::quantize), as the parts a run reads ("w.codes", ...): what a
// checkpoint's exporter would have written.  Throws ArgumentError naming the operand.
std::map<std::string, Array> store(const Contract& c, Operand t, const Array& values);

}  // namespace lowbit::contract

namespace lowbit::contract {

// One stage compared with a kernel's array of it: the elements whose codes differ (NaN is compared by its
// code: a kernel's NaN of another payload differs), the first `max_details` of them kept.
struct Difference {
  std::size_t index = 0;  // row-major
  std::uint64_t expected = 0, actual = 0;
  std::optional<std::uint64_t> ulps;  // with a tolerance: the distance (nullopt: NaN against a number)
};
struct StageComparison {
  std::uint64_t compared = 0;
  std::uint64_t differing = 0;  // with a tolerance: the elements beyond it
  std::vector<Difference> first;
  std::string error;  // the arrays cannot be compared (format or shape); nothing counted
  // With a tolerance: the elements that differ but lie within it, and the element farthest from the reference
  // (the first of them; a NaN against a number is the farthest of all).
  std::uint64_t within = 0;
  std::optional<Difference> worst;
};
// Code for code, or, with `tolerance_ulp`, by ulp_distance: an element farther than the tolerance differs.
StageComparison compare(const Array& expected, const Array& actual, std::size_t max_details = 10,
                        std::optional<std::uint32_t> tolerance_ulp = std::nullopt);

}  // namespace lowbit::contract
