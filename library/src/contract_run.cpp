// Running one pass of a contract: quantize (scale::quantize), multiply (gemm::run), then the epilogue's steps
// through gemm::apply_epilogue and the element conversion, keeping every stage.
#include <bit>
#include <cmath>
#include <string>

#include "contract_layout.hpp"
#include "lowbit/contract.hpp"
#include "lowbit/convert.hpp"
#include "lowbit/philox.hpp"
#include "lowbit/text.hpp"

namespace lowbit::contract {

namespace {

namespace S = scale;
using gemm::Matrix;
constexpr std::uint32_t one = 0x3F800000u;

std::uint64_t rows_of(const Array& a) { return a.shape.size() == 2 ? a.shape[0] : 1; }
std::uint64_t cols_of(const Array& a) { return a.shape.back(); }

std::string shape_words(const Array& a) { return std::to_string(rows_of(a)) + " x " + std::to_string(cols_of(a)); }

const std::optional<Array>& input(const Inputs& in, Operand t) {
  switch (t) {
    case Operand::x: return in.x;
    case Operand::w: return in.w;
    case Operand::dy: return in.dy;
  }
  return in.x;
}

// The pass's shapes: A is rows x k, B's rows-along-K form is cols x k, the output rows x cols.
struct Dims {
  int rows = 0, cols = 0, k = 0;
};

// Every input the pass needs present, none it does not read, each of its storage format and 2-D, the shapes
// agreeing (X [M,K], W [N,K], dY [M,N]).
Dims check_inputs(const Contract& c, const PassContract& p, const Inputs& in) {
  const PassOperands ops = operands_of(p.pass);
  const std::string pass = name(p.pass);
  for (Operand t : all<Operand>())
    if ((t == ops.a || t == ops.b) && !input(in, t))
      throw ArgumentError(name(t),
                          pass + " reads " + name(ops.a) + " and " + name(ops.b) + "; " + name(t) + " is missing");
  for (Operand t : all<Operand>()) {
    const bool needed = t == ops.a || t == ops.b;
    const auto& a = input(in, t);
    if (!needed && a)
      throw ArgumentError(name(t), pass + " reads " + name(ops.a) + " and " + name(ops.b) + ", not " + name(t));
    if (!a) continue;
    if (a->shape.size() != 2 || a->shape[0] < 1 || a->shape[1] < 1)
      throw ArgumentError(name(t), "expected a 2-D array with no empty dimension");
    if (a->shape[0] > (1u << 20) || a->shape[1] > (1u << 20)) throw ArgumentError(name(t), "a dimension over 2^20");
    if (!same_format(*a->format, c.storage_of(t)))
      throw ArgumentError(name(t), std::string("holds ") + a->format->name + "; the contract stores " + name(t) +
                                       " as " + c.storage_of(t).name);
  }
  Dims d;
  auto agree = [&](Operand t, std::uint64_t got, std::uint64_t want, const char* dim, const std::string& why) {
    if (got != want)
      throw ArgumentError(name(t), "is " + shape_words(*input(in, t)) + "; " + dim + " must be " +
                                       std::to_string(want) + " (" + why + ")");
  };
  switch (p.pass) {
    case Pass::fprop:
      agree(Operand::w, cols_of(*in.w), cols_of(*in.x), "its columns (K)", "X is " + shape_words(*in.x));
      d = {static_cast<int>(rows_of(*in.x)), static_cast<int>(rows_of(*in.w)), static_cast<int>(cols_of(*in.x))};
      break;
    case Pass::dgrad:
      agree(Operand::w, rows_of(*in.w), cols_of(*in.dy), "its rows (N)", "dY is " + shape_words(*in.dy));
      d = {static_cast<int>(rows_of(*in.dy)), static_cast<int>(cols_of(*in.w)), static_cast<int>(cols_of(*in.dy))};
      break;
    case Pass::wgrad:
      agree(Operand::x, rows_of(*in.x), rows_of(*in.dy), "its rows (M)", "dY is " + shape_words(*in.dy));
      d = {static_cast<int>(cols_of(*in.dy)), static_cast<int>(cols_of(*in.x)), static_cast<int>(rows_of(*in.dy))};
      break;
  }
  const std::uint64_t out = static_cast<std::uint64_t>(d.rows) * static_cast<std::uint64_t>(d.cols);
  if (out > (std::uint64_t{1} << 28))
    throw ArgumentError(pass == "fprop" ? "w" : "x", "the output would exceed 2^28 elements");
  return d;
}

// The steps' inputs: each present exactly when a step reads it, of that step's format, of the output's shape.
void check_step_inputs(const PassContract& p, const Inputs& in, const Dims& d) {
  const Step* bias = nullptr;
  const Step* residual = nullptr;
  for (const Step& s : p.epilogue) {
    if (s.kind == StepKind::bias) bias = &s;
    if (s.kind == StepKind::residual) residual = &s;
  }
  for (const auto& [id, step, arr] :
       {std::tuple{"bias", bias, &in.bias}, std::tuple{"residual", residual, &in.residual}}) {
    if (step && !*arr) throw ArgumentError(id, std::string("the epilogue's ") + id + " step needs it; it is missing");
    if (!step && *arr) throw ArgumentError(id, std::string("the ") + name(p.pass) + " epilogue has no " + id + " step");
    if (!step) continue;
    const Array& a = **arr;
    if (!same_format(*a.format, *step->format))
      throw ArgumentError(id, std::string("holds ") + a.format->name + "; the step reads " + step->format->name);
    const bool is_bias = std::string(id) == "bias";
    const std::uint64_t want_rows = is_bias ? 1 : static_cast<std::uint64_t>(d.rows);
    if ((is_bias && a.shape.size() != 1) || (!is_bias && a.shape.size() != 2) || rows_of(a) != want_rows ||
        cols_of(a) != static_cast<std::uint64_t>(d.cols))
      throw ArgumentError(id, is_bias ? "expected a vector of " + std::to_string(d.cols) + " (the output's columns)"
                                      : "expected " + std::to_string(d.rows) + " x " + std::to_string(d.cols) +
                                            " (the output's shape)");
  }
}

// An input's values in the rows-along-K form the quantizer reads (transposed when the pass says so).
S::Tensor along_k(const Array& a, Form form) {
  const int r = static_cast<int>(rows_of(a)), c = static_cast<int>(cols_of(a));
  S::Tensor t{r, c, std::vector<float>(a.codes.size())};
  for (std::size_t i = 0; i < a.codes.size(); ++i)
    t.data[i] =
        std::bit_cast<float>(static_cast<std::uint32_t>(convert(*a.format, a.codes[i], formats::f32, Policy{}).code));
  return form == Form::transposed ? S::transpose(t) : t;
}
// The same as codes of the storage format (an operand that is not quantized).
Matrix codes_along_k(const Array& a, Form form) {
  const bool transposed = form == Form::transposed;
  const int r = static_cast<int>(rows_of(a)), c = static_cast<int>(cols_of(a));
  Matrix m{a.format, transposed ? c : r, transposed ? r : c, a.codes};
  if (transposed)
    for (int i = 0; i < r; ++i)
      for (int j = 0; j < c; ++j)
        m.codes[static_cast<std::size_t>(j) * r + i] = a.codes[static_cast<std::size_t>(i) * c + j];
  return m;
}
Matrix transposed(const Matrix& m) {
  Matrix t{m.format, m.cols, m.rows, std::vector<std::uint64_t>(m.codes.size())};
  for (int i = 0; i < m.rows; ++i)
    for (int j = 0; j < m.cols; ++j) t.codes[static_cast<std::size_t>(j) * m.rows + i] = m.at(i, j);
  return t;
}

// The layout of an operand quantized with `q` at rows x cols: the quantizer's own result for zeros, whose
// block shape, scale format and scale count are those of any tensor of that shape.
S::Quantized layout_of(const Quantization& q, int rows, int cols) {
  const S::Tensor zeros{rows, cols, std::vector<float>(static_cast<std::size_t>(rows) * cols)};
  return S::quantize(zeros, q.options);
}

std::string stored_key(Operand t, StoredPart part) { return std::string(name(t)) + "." + name(part); }

// An operand stored already quantized, from its parts: each present exactly when the scheme has it, of its
// format, the scales of the shape the codes' blocks make, every code one of the element's.
S::Quantized stored_operand(const Quantization& q, Operand t, const Inputs& in) {
  const auto part = [&](StoredPart p) -> const Array* {
    const auto it = in.stored.find(stored_key(t, p));
    return it == in.stored.end() ? nullptr : &it->second;
  };
  for (StoredPart p : all<StoredPart>()) {
    const Format* want = stored_part_format(q, p);
    const Array* a = part(p);
    const std::string key = stored_key(t, p);
    if (want && !a) throw ArgumentError(key, std::string(name(t)) + " is stored quantized: " + key + " is missing");
    if (!want && a)
      throw ArgumentError(key, std::string("the ") + name(q.options.scheme) + " scheme stores no " + name(p));
    if (a && !same_format(*a->format, *want))
      throw ArgumentError(key, std::string("holds ") + a->format->name + " codes; expected " + want->name);
  }
  const Array& codes = *part(StoredPart::codes);
  if (codes.shape.size() != 2 || codes.shape[0] < 1 || codes.shape[1] < 1)
    throw ArgumentError(stored_key(t, StoredPart::codes), "expected a 2-D array with no empty dimension");
  if (codes.shape[0] > (1u << 20) || codes.shape[1] > (1u << 20))
    throw ArgumentError(stored_key(t, StoredPart::codes), "a dimension over 2^20");
  const Format& element = *q.options.element;
  const std::uint64_t code_limit = std::uint64_t{1} << element.bits;
  for (std::size_t i = 0; i < codes.codes.size(); ++i)
    if (codes.codes[i] >= code_limit)
      throw ArgumentError(stored_key(t, StoredPart::codes),
                          "element " + std::to_string(i) + " (row-major) is " + std::to_string(codes.codes[i]) +
                              ", not a code of " + element.name + " (" + std::to_string(element.bits) + " bits)");
  S::Quantized out = layout_of(q, static_cast<int>(codes.shape[0]), static_cast<int>(codes.shape[1]));
  const Array& scales = *part(StoredPart::scales);
  const std::vector<std::uint64_t> want_shape{static_cast<std::uint64_t>(out.scale_rows()),
                                              static_cast<std::uint64_t>(out.scale_cols())};
  if (scales.shape != want_shape)
    throw ArgumentError(stored_key(t, StoredPart::scales),
                        "has shape " + shape_text(scales.shape) + "; codes of " + shape_text(codes.shape) +
                            " in blocks of " + std::to_string(out.block_rows) + "x" + std::to_string(out.block_cols) +
                            " have " + shape_text(want_shape) + " scales");
  // NVFP4's block scales are positive e4m3 values (the MMA reads them as ue4m3): a sign bit is no scale.
  if (same_format(*out.scale_format, formats::e4m3))
    for (std::size_t i = 0; i < scales.codes.size(); ++i)
      if (scales.codes[i] & 0x80u)
        throw ArgumentError(
            stored_key(t, StoredPart::scales),
            "element " + std::to_string(i) + " (row-major) is a negative e4m3 scale (" + hex(scales.codes[i], 2) + ")");
  for (std::size_t i = 0; i < codes.codes.size(); ++i) out.codes[i] = static_cast<std::uint8_t>(codes.codes[i]);
  out.scales = scales.codes;
  if (const Array* ts = part(StoredPart::tensor_scale)) {
    if (ts->shape != std::vector<std::uint64_t>{1})
      throw ArgumentError(stored_key(t, StoredPart::tensor_scale),
                          "has shape " + shape_text(ts->shape) + "; expected [1]");
    out.tensor_scale = static_cast<std::uint32_t>(ts->codes[0]);
  }
  return out;
}

struct QuantizedOperand {
  Matrix codes;                   // rows along K
  std::optional<S::Quantized> q;  // the quantizer's result
  layout::ScaleInfo info;
  std::optional<S::DelayedState> next_delayed;  // the delayed scheme: the state after this step
};

QuantizedOperand quantize_operand(const Quantization& qz, const Array& a, Form form, Operand t, const Inputs& in) {
  QuantizedOperand out;
  out.info = layout::scale_info(qz);
  if (!qz.recipe) {
    out.codes = codes_along_k(a, form);
    return out;
  }
  if (qz.stored) {
    // The stored codes and scales, unchanged; a transposed form has one scale per tensor (parse checked it).
    S::Quantized q = stored_operand(qz, t, in);
    if (form == Form::transposed) {
      const Matrix m = transposed(Matrix{q.element, q.rows, q.cols, {q.codes.begin(), q.codes.end()}});
      q.rows = m.rows;
      q.cols = m.cols;
      std::swap(q.block_rows, q.block_cols);
      q.codes.assign(m.codes.begin(), m.codes.end());
    }
    out.codes = Matrix{q.element, q.rows, q.cols, {q.codes.begin(), q.codes.end()}};
    out.q = std::move(q);
    return out;
  }
  const S::Tensor x = along_k(a, form);
  if (qz.options.scheme == S::Scheme::delayed) {
    // TE's delayed scaling: this step's scale from the state, the tensor's amax into its history (the
    // transposed form has the same amax, as TE's columnwise copy shares the rowwise scale).
    const auto it = in.delayed.find(t);
    out.next_delayed = it != in.delayed.end() ? it->second : S::DelayedState{};
    out.q = S::quantize(x, qz.options, nullptr, &*out.next_delayed);
    out.codes = Matrix{out.q->element, out.q->rows, out.q->cols, {out.q->codes.begin(), out.q->codes.end()}};
    return out;
  }
  std::vector<std::uint32_t> rbits;
  if (is_stochastic(qz.options.element_policy.rounding)) {
    if (!in.sr_seed)
      throw ArgumentError("sr_seed", std::string(name(t)) + "'s quantization rounds stochastically: a seed is needed");
    rbits.resize(x.data.size());
    for (std::size_t i = 0; i < rbits.size(); ++i)
      rbits[i] = philox::sr_bits(*in.sr_seed, i, qz.options.element_policy.sr_bits);
  }
  out.q = S::quantize(x, qz.options, rbits.empty() ? nullptr : &rbits);
  out.codes = Matrix{out.q->element, out.q->rows, out.q->cols, {out.q->codes.begin(), out.q->codes.end()}};
  return out;
}

// Where a procedure reads an operand's block scales: A's as rows x K blocks (one per row, a tile's scale
// repeated over its rows); B's as K blocks x columns, one per column, or one per tile of columns (DeepGEMM's
// 128x128 weights).
enum class ScaleSide : std::uint8_t { a_per_row, b_per_column, b_per_tile };
Matrix block_scales(const QuantizedOperand& o, ScaleSide side) {
  const S::Quantized& q = *o.q;
  const bool per_column = side != ScaleSide::b_per_tile;
  const int kb = q.scale_cols();
  const int rows = per_column ? q.rows : q.scale_rows();
  Matrix m{o.info.format, rows, kb, std::vector<std::uint64_t>(static_cast<std::size_t>(rows) * kb)};
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < kb; ++k) {
      const int sr = per_column ? r / q.block_rows : r;
      std::uint64_t code = q.scales[static_cast<std::size_t>(sr) * kb + k];
      if (!same_format(*q.scale_format, *o.info.format))
        code = convert(*q.scale_format, code, *o.info.format, Policy{}).code;
      m.codes[static_cast<std::size_t>(r) * kb + k] = code;
    }
  return side == ScaleSide::a_per_row ? m : transposed(m);
}

void add_state_stages(RunResult& r, Operand t, const QuantizedOperand& o) {
  if (!o.next_delayed) return;
  const S::DelayedState& st = *o.next_delayed;
  Array history{&formats::f32, {st.history.size()}, {}};
  for (float h : st.history) history.codes.push_back(std::bit_cast<std::uint32_t>(h));
  const std::string stage = std::string(name(t)) + ".state";
  r.stages.push_back({stage, "history", "the amax history after this step, rolled as TE rolls it (slot 0 takes the next step's amax)",
                      std::move(history)});
  r.stages.push_back(
      {stage, "scale", "the scale the next step quantizes with", {&formats::f32, {1}, {std::bit_cast<std::uint32_t>(st.scale)}}});
  r.next_delayed[t] = st;
}

void add_quantized_stages(RunResult& r, const std::string& who, const QuantizedOperand& o, Form form) {
  if (!o.q) return;
  const S::Quantized& q = *o.q;
  const std::string stage = who + ".quantized";
  const std::string shown = form == Form::transposed ? who + "ᵀ" : who;
  r.stages.push_back(
      {stage,
       "codes",
       shown + "'s codes, rows along the reduction dimension",
       {q.element, {static_cast<std::uint64_t>(q.rows), static_cast<std::uint64_t>(q.cols)}, o.codes.codes}});
  r.stages.push_back({stage,
                      "scales",
                      "the decode scales, one per block in block order",
                      {q.scale_format,
                       {static_cast<std::uint64_t>(q.scale_rows()), static_cast<std::uint64_t>(q.scale_cols())},
                       q.scales}});
  if (q.tensor_scale)
    r.stages.push_back(
        {stage, "tensor_scale", "the NVFP4 tensor decode scale", {&formats::f32, {1}, {*q.tensor_scale}}});
}

std::uint32_t per_tensor_scale(const QuantizedOperand& o) {
  if (!o.q) return one;
  if (o.info.arrangement == layout::Arrangement::per_tensor) return static_cast<std::uint32_t>(o.q->scales.at(0));
  if (o.q->tensor_scale) return *o.q->tensor_scale;
  return one;
}

// The GEMM: A times B (B given rows along K), with the block scales or the per-tensor scales the procedure
// takes inside it.  Returns the procedure's f32 result.
std::vector<std::uint64_t> multiply(const PassContract& p, const QuantizedOperand& a, const QuantizedOperand& b) {
  const gemm::Procedure& proc = *p.procedure;
  const Matrix bk = transposed(b.codes);
  gemm::Operands ops{.a = &a.codes, .b = &bk};
  Matrix as, bs;
  if (layout::blocked(a.info) && layout::blocked(b.info)) {
    // f32 tiles of B are DeepGEMM's 128x128 weight blocks, one scale per tile of columns; every other B
    // scale (1x128 f32, MX, NVFP4, NVFP4's 16x16 tiles repeated over their columns) is one per column.
    const bool f32_tiles =
        same_format(*b.info.format, formats::f32) && b.info.arrangement == layout::Arrangement::tiles;
    as = block_scales(a, ScaleSide::a_per_row);
    bs = block_scales(b, f32_tiles ? ScaleSide::b_per_tile : ScaleSide::b_per_column);
    ops.a_scales = &as;
    ops.b_scales = &bs;
    ops.scale_block = a.info.block_k;
  }
  if (proc.kind == gemm::Kind::promoted) {
    // The promotion's FMA multiplies each block by fp32(scale_a * scale_b) (gemm::run_promoted).
    ops.epilogue.scale_a = per_tensor_scale(a);
    ops.epilogue.scale_b = per_tensor_scale(b);
  }
  return gemm::run(proc, ops).d;
}

Array f32_array(const Dims& d, std::vector<std::uint64_t> v) {
  return {&formats::f32, {static_cast<std::uint64_t>(d.rows), static_cast<std::uint64_t>(d.cols)}, std::move(v)};
}

// f32 arrays in the output's shape, for gemm::apply_epilogue's C: a residual as it is, a bias vector repeated
// over the rows.
enum class Spread : std::uint8_t { whole, over_rows };
Matrix as_c(const Array& a, const Dims& d, Spread spread) {
  const bool broadcast_rows = spread == Spread::over_rows;
  Matrix c{&formats::f32, d.rows, d.cols, std::vector<std::uint64_t>(static_cast<std::size_t>(d.rows) * d.cols)};
  for (int i = 0; i < d.rows; ++i)
    for (int j = 0; j < d.cols; ++j) {
      const std::uint64_t code = a.codes[broadcast_rows ? j : static_cast<std::size_t>(i) * d.cols + j];
      c.codes[static_cast<std::size_t>(i) * d.cols + j] = convert(*a.format, code, formats::f32, Policy{}).code;
    }
  return c;
}

float value(std::uint64_t bits) { return std::bit_cast<float>(static_cast<std::uint32_t>(bits)); }

// The scales the dequantize step multiplies by: each operand's per-tensor decode scale where the procedure
// did not take it inside (every procedure but the promoted ones), or its NVFP4 tensor scale.
struct EpilogueScales {
  std::uint32_t a = one, b = one;
};
EpilogueScales epilogue_scales(const PassContract& p, const QuantizedOperand& a, const QuantizedOperand& b) {
  const bool promoted = p.procedure->kind == gemm::Kind::promoted;
  auto left = [&](const QuantizedOperand& o) {
    if (!o.q) return one;
    if (o.info.arrangement == layout::Arrangement::per_tensor) return promoted ? one : per_tensor_scale(o);
    return o.q->tensor_scale ? *o.q->tensor_scale : one;
  };
  return {left(a), left(b)};
}

// One epilogue step on y (f32 codes), recording its stage.
// `tolerance`: the activation's, once one has applied (the stages from it on are compared within it).
void apply(const Step& s, std::size_t index, const EpilogueScales& scales, const Inputs& in, const Dims& d,
           std::optional<std::uint32_t> tolerance, std::vector<std::uint64_t>& y, RunResult& r) {
  const std::string stage = "epilogue[" + std::to_string(index) + "]." + name(s.kind);
  switch (s.kind) {
    case StepKind::dequantize:
      // cuBLASLt's order (gemm::apply_epilogue): fp32(fp32(fp32(scale_a * scale_b) * alpha) * acc).
      y = gemm::apply_epilogue(y, nullptr, s.alpha, 0, scales.a, scales.b);
      break;
    case StepKind::bias: {
      const Matrix c = as_c(*in.bias, d, Spread::over_rows);
      y = gemm::apply_epilogue(y, &c, one, one, one, one);
      break;
    }
    case StepKind::residual: {
      const Matrix c = as_c(*in.residual, d, Spread::whole);
      y = gemm::apply_epilogue(y, &c, one, s.beta, one, one);
      break;
    }
    case StepKind::relu:
    case StepKind::clamp: {
      // relu: y > 0 ? y : +0 (so -0 gives +0); clamp: below min gives min, above max gives max.  NaN passes
      // unchanged in both (docs/contract.md).
      for (std::uint64_t& v : y) {
        const float f = value(v);
        if (std::isnan(f)) continue;
        if (s.kind == StepKind::relu) {
          if (!(f > 0)) v = 0;
        } else if (f < value(s.lo)) {
          v = s.lo;
        } else if (f > value(s.hi)) {
          v = s.hi;
        }
      }
      break;
    }
    case StepKind::amax: {
      std::vector<float> f(y.size());
      for (std::size_t i = 0; i < y.size(); ++i) f[i] = value(y[i]);
      const float m = S::amax(f.data(), f.size(), 1, S::AmaxNan::ignore);
      r.stages.push_back({"amax",
                          "",
                          "the largest |y| before the output cast (fmaxf: NaN ignored)",
                          {&formats::f32, {1}, {std::bit_cast<std::uint32_t>(m)}}});
      return;
    }
    case StepKind::gelu:
    case StepKind::silu:
      for (std::uint64_t& v : y) v = activation_f32(s.kind, s.gelu_form, static_cast<std::uint32_t>(v));
      r.stages.push_back({stage, "",
                          std::string("after epilogue step ") + std::to_string(index) + " (" + name(s.kind) +
                              (s.kind == StepKind::gelu ? std::string(", ") + name(s.gelu_form) + " form" : "") +
                              "): the correctly rounded f32 value; a kernel's within " +
                              std::to_string(s.tolerance_ulp) + " ulp",
                          f32_array(d, y), s.tolerance_ulp});
      return;
    case StepKind::cast: {
      // The output scale as one f32 multiplication (apply_epilogue with alpha = scale), then the conversion.
      const std::vector<std::uint64_t> scaled = gemm::apply_epilogue(y, nullptr, s.scale, 0, one, one);
      Array out{s.format, {static_cast<std::uint64_t>(d.rows), static_cast<std::uint64_t>(d.cols)}, {}};
      out.codes.reserve(scaled.size());
      for (std::uint64_t v : scaled) out.codes.push_back(convert(formats::f32, v, *s.format, s.policy).code);
      r.stages.push_back({"output", "",
                          std::string("the output: y times the output scale, cast into ") + s.format->name,
                          std::move(out), tolerance});
      return;
    }
  }
  r.stages.push_back({stage, "",
                      std::string("after epilogue step ") + std::to_string(index) + " (" + name(s.kind) + ")",
                      f32_array(d, y)});
}

// The inputs with each stored operand's codes in its tensor's place (so that the shapes are checked as any
// tensor's), and every stored part known.
Inputs with_stored_codes(const Contract& c, const Inputs& in) {
  Inputs r = in;
  for (const auto& [key, array] : in.stored) {
    bool known = false;
    for (Operand t : all<Operand>())
      for (StoredPart p : all<StoredPart>()) known = known || (key == stored_key(t, p) && c.stored_of(t));
    if (!known)
      throw ArgumentError(
          key, "no such stored part (the contract stores quantized: " + [&] {
            std::string s;
            for (Operand t : all<Operand>())
              if (c.stored_of(t)) s += (s.empty() ? "" : ", ") + std::string(name(t));
            return s.empty() ? std::string("none") : s;
          }() + ")");
  }
  for (Operand t : all<Operand>()) {
    if (!c.stored_of(t)) continue;
    std::optional<Array>& slot = t == Operand::x ? r.x : t == Operand::w ? r.w : r.dy;
    if (slot)
      throw ArgumentError(name(t), std::string(name(t)) + " is stored quantized (storage." + name(t) + "): give " +
                                       stored_key(t, StoredPart::codes) + " and " + stored_key(t, StoredPart::scales) +
                                       " instead");
    const auto it = in.stored.find(stored_key(t, StoredPart::codes));
    if (it != in.stored.end()) slot = it->second;
  }
  return r;
}

}  // namespace

const Format* stored_part_format(const Quantization& q, StoredPart part) {
  switch (part) {
    case StoredPart::codes: return q.options.element;
    case StoredPart::scales: return layout_of(q, 1, 1).scale_format;
    case StoredPart::tensor_scale: return layout::scale_info(q).tensor_scale ? &formats::f32 : nullptr;
  }
  return nullptr;
}

std::map<std::string, Array> store(const Contract& c, Operand t, const Array& values) {
  const auto& q = c.stored_of(t);
  if (!q) throw ArgumentError(name(t), std::string(name(t)) + " is not stored quantized");
  if (values.shape.size() != 2 || values.shape[0] < 1 || values.shape[1] < 1)
    throw ArgumentError(name(t), "expected a 2-D array with no empty dimension");
  const S::Quantized r = S::quantize(along_k(values, Form::as_stored), q->options);
  std::map<std::string, Array> parts;
  parts[stored_key(t, StoredPart::codes)] = {r.element,
                                             {static_cast<std::uint64_t>(r.rows), static_cast<std::uint64_t>(r.cols)},
                                             {r.codes.begin(), r.codes.end()}};
  parts[stored_key(t, StoredPart::scales)] = {
      r.scale_format,
      {static_cast<std::uint64_t>(r.scale_rows()), static_cast<std::uint64_t>(r.scale_cols())},
      r.scales};
  if (r.tensor_scale) parts[stored_key(t, StoredPart::tensor_scale)] = {&formats::f32, {1}, {*r.tensor_scale}};
  return parts;
}

RunResult run(const Contract& c, Pass pass, const Inputs& given) {
  const PassContract* p = c.find(pass);
  if (!p) {
    std::string defined;
    for (const PassContract& pc : c.passes) defined += (defined.empty() ? "" : ", ") + std::string(name(pc.pass));
    throw ArgumentError("pass", c.name + " defines no " + name(pass) + " (it defines " + defined + ")");
  }
  const PassOperands pass_ops = operands_of(pass);
  for (const auto& [t, st] : given.delayed) {
    const Quantization* q = t == pass_ops.a ? &p->a : t == pass_ops.b ? &p->b : nullptr;
    if (!q || !q->recipe || q->options.scheme != S::Scheme::delayed)
      throw ArgumentError("state", std::string(name(p->pass)) + " quantizes " + name(t) +
                                       (q ? " with another scheme than delayed" : " not at all") +
                                       "; its state has nothing to step");
  }
  const Inputs in = with_stored_codes(c, given);
  Dims d;
  try {
    d = check_inputs(c, *p, in);
  } catch (const ArgumentError& e) {
    // A stored operand's shape is its codes'.
    for (Operand t : all<Operand>())
      if (c.stored_of(t) && e.argument == name(t)) throw ArgumentError(stored_key(t, StoredPart::codes), e.what());
    throw;
  }
  check_step_inputs(*p, in, d);
  const PassOperands ops = operands_of(pass);
  RunResult r;
  // A in its rows-along-K form; B's rows-along-K form is the tensor (fprop's W) or its transpose.
  const QuantizedOperand a = quantize_operand(p->a, *input(in, ops.a), ops.a_form, ops.a, in);
  const QuantizedOperand b = quantize_operand(p->b, *input(in, ops.b), ops.b_form, ops.b, in);
  add_quantized_stages(r, name(ops.a), a, ops.a_form);
  add_quantized_stages(r, name(ops.b), b, ops.b_form);
  add_state_stages(r, ops.a, a);
  add_state_stages(r, ops.b, b);
  std::vector<std::uint64_t> y = multiply(*p, a, b);
  r.stages.push_back({"accumulator", "",
                      std::string("the f32 result of ") + p->procedure->name +
                          " (block scales, and a promoted procedure's per-tensor scales, applied inside it)",
                      f32_array(d, y)});
  bool cast = false;
  std::optional<std::uint32_t> tolerance;
  const EpilogueScales scales = epilogue_scales(*p, a, b);
  for (std::size_t i = 0; i < p->epilogue.size(); ++i) {
    const Step& s = p->epilogue[i];
    if (s.kind == StepKind::gelu || s.kind == StepKind::silu) tolerance = s.tolerance_ulp;
    apply(s, i, scales, in, d, tolerance, y, r);
    cast = cast || s.kind == StepKind::cast;
  }
  if (!cast) r.stages.push_back({"output", "", "the output: the last step's f32 values", f32_array(d, y), tolerance});
  return r;
}

}  // namespace lowbit::contract

namespace lowbit::contract {

StageComparison compare(const Array& expected, const Array& actual, std::size_t max_details,
                        std::optional<std::uint32_t> tolerance_ulp) {
  StageComparison c;
  if (!same_format(*expected.format, *actual.format)) {
    c.error = std::string("holds ") + actual.format->name + " codes, expected " + expected.format->name;
    return c;
  }
  if (expected.shape != actual.shape || expected.codes.size() != actual.codes.size()) {
    c.error = "has shape " + shape_text(actual.shape) + ", expected " + shape_text(expected.shape);
    return c;
  }
  c.compared = expected.codes.size();
  for (std::size_t i = 0; i < expected.codes.size(); ++i) {
    if (expected.codes[i] == actual.codes[i]) continue;
    Difference d{i, expected.codes[i], actual.codes[i], std::nullopt};
    if (tolerance_ulp) {
      d.ulps = ulp_distance(*expected.format, d.expected, d.actual);
      // The farthest: a NaN against a number beyond every distance, the first of equals kept.
      const auto rank = [](const Difference& x) { return x.ulps ? *x.ulps : UINT64_MAX; };
      if (!c.worst || rank(d) > rank(*c.worst)) c.worst = d;
      if (d.ulps && *d.ulps <= *tolerance_ulp) {
        ++c.within;
        continue;
      }
    }
    ++c.differing;
    if (c.first.size() < max_details) c.first.push_back(d);
  }
  return c;
}

}  // namespace lowbit::contract
