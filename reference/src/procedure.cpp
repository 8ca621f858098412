#include "lowbit/procedure.hpp"

#include <bit>
#include <memory>

namespace lowbit::gemm {

namespace {

namespace F = formats;
constexpr std::uint32_t one = 0x3F800000u;

constexpr OperandPair exact_golden[] = {{&F::e4m3, &F::e4m3},
                                        {&F::e5m2, &F::e4m3},
                                        {&F::bf16, &F::bf16},
                                        {&F::e2m1, &F::e2m1},
                                        {&F::e4m3, &F::e4m3, &F::e8m0, 32},
                                        {&F::e2m1, &F::e2m1, &F::ue4m3, 16}};
constexpr OperandPair order_golden[] = {{&F::bf16, &F::bf16}, {&F::f16, &F::f16}, {&F::f32, &F::f32}};
constexpr OperandPair promoted_golden[] = {{&F::e4m3, &F::e4m3}, {&F::e5m2, &F::e4m3}};
constexpr OperandPair deepgemm_golden[] = {{&F::e4m3, &F::e4m3, &F::f32, 128}};

// The procedures that are not one tensor-core model, in listing order; `inner` names the model a composite
// runs per block of K.
struct Composite {
  Procedure row;
  const char* inner = nullptr;
};
// clang-format off
const Composite composites[] = {
    {{.name = "exact", .kind = Kind::exact,
      .description = "exact sum of products (and C), rounded once to f32 with rne",
      .scales = ScaleLayout::optional_k, .golden = exact_golden}},
    {{.name = "f32-sequential", .kind = Kind::f32_order, .description = "acc = fl(acc + fl(a*b)) in K order",
      .order = {.order = Order::sequential}, .golden = order_golden}},
    {{.name = "f32-fma", .kind = Kind::f32_order, .description = "acc = fmaf(a, b, acc) in K order",
      .order = {.order = Order::sequential_fma}, .golden = order_golden}},
    {{.name = "f32-pairwise", .kind = Kind::f32_order, .description = "products fl(a*b) summed by recursive halving",
      .order = {.order = Order::pairwise}, .golden = order_golden}},
    {{.name = "f32-splitk4", .kind = Kind::f32_order,
      .description = "four contiguous K slices, each sequential, then summed in order",
      .order = {.order = Order::split_k, .splits = 4}, .golden = order_golden}},
    {{.name = "f32-blocked128", .kind = Kind::f32_order,
      .description = "each 128-element block summed exactly and rounded to f32, then added in f32",
      .order = {.order = Order::blocked, .block = 128}, .golden = order_golden}},
    // DeepSeek-V3 §3.3.2: WGMMA's limited accumulation promoted every 128 of K into CUDA-core f32 registers.
    {{.name = "hopper-fp8-promote128", .kind = Kind::promoted,
      .description = "hopper-fp8 inside 128-element blocks from zero, each promoted with an fp32 FMA",
      .interval = 128, .golden = promoted_golden}, "hopper-fp8"},
    // DeepGEMM's FP8 GEMM: 1x128 activation scales and 128x128 weight scales, applied at each promotion.
    {{.name = "hopper-fp8-blockscaled", .kind = Kind::block_scaled,
      .description = "DeepGEMM: hopper-fp8 per 128-block, promoted with fp32(sa*sb) (1x128 / 128x128 f32 scales)",
      .interval = 128, .scales = ScaleLayout::deepgemm_1x128, .golden = deepgemm_golden}, "hopper-fp8"},
    // DeepGEMM's 1d1d kernel (sm90_fp8_gemm_1d1d.cuh), used for weight gradients: both operands scaled per
    // 1x128 along K, the same promotion (final_accum += scale_a * scale_b * accum, the WGMMA accumulator from
    // +0 each K block), and the f32 result reduced into D by a TMA reduce-add (D = fl(D + result)), so C is
    // added once at the end rather than starting the accumulator.  Not yet run on hardware.
    {{.name = "hopper-fp8-blockscaled-1d1d", .kind = Kind::block_scaled,
      .description = "DeepGEMM 1d1d: hopper-fp8 per 128-block, promoted with fp32(sa*sb) (1x128 / 1x128 f32 scales), C added after",
      .interval = 128, .scales = ScaleLayout::deepgemm_1d1d, .golden = deepgemm_golden}, "hopper-fp8"},
};
// clang-format on

std::vector<Procedure> build_table() {
  std::vector<Procedure> v;
  for (const Composite& c : composites) {
    Procedure p = c.row;
    if (c.inner) {
      p.model = find_model(c.inner);
      p.operands = p.model->operands;
      p.conversion = p.model->conversion;
    }
    v.push_back(p);
  }
  for (const TensorCoreModel& m : models())
    v.push_back({.name = m.name,
                 .kind = Kind::model,
                 .description = m.source,
                 .model = &m,
                 .scales = m.scale == BlockScale::none ? ScaleLayout::none : ScaleLayout::per_k_block,
                 .operands = m.operands,
                 .conversion = m.conversion,
                 .golden = m.golden});
  return v;
}

const std::vector<Procedure>& table() {
  static const std::vector<Procedure> t = build_table();
  return t;
}

}  // namespace

std::span<const Procedure> procedures() { return table(); }

const Procedure* find_procedure(std::string_view name) {
  for (const Procedure& p : table())
    if (name == p.name) return &p;
  return nullptr;
}

bool takes(const Procedure& p, const Format& f) {
  switch (p.kind) {
    case Kind::exact: return f.mantissa_bits <= 23;
    case Kind::f32_order: return holds_every_value(formats::f32, f);
    case Kind::model:
    case Kind::promoted:
    case Kind::block_scaled: return takes_operands(*p.model, f);
  }
  return false;
}

std::string operand_text(const Procedure& p) {
  if (p.kind == Kind::exact) return "formats whose significand fits 24 bits";
  if (p.kind == Kind::f32_order) return "formats whose every value is an f32 value";
  std::string s;
  for (const Format* f : p.operands) s += (s.empty() ? "" : ", ") + std::string(f->name);
  if (p.conversion == Conversion::exact) s += ", and formats whose every value one of those holds (converted exactly)";
  return s;
}

ScaleShape scale_shape(const Procedure& p, int m, int n, int k, const Format* format, int block) {
  ScaleShape s;
  auto blocks = [](int len, int per) { return (len + per - 1) / per; };
  switch (p.scales) {
    case ScaleLayout::none:
      if (format) throw ArgumentError("scale_format", std::string(p.name) + " takes no block scales");
      if (block) throw ArgumentError("scale_block", std::string(p.name) + " takes no block scales");
      return s;
    case ScaleLayout::optional_k: {
      // e8m0 per 32 (MX), ue4m3 per 16 (NVFP4), both one B scale per column; f32 per 128 with B per 128 x 128.
      s.format = format ? format : &formats::e8m0;
      const bool f32 = same_format(*s.format, formats::f32);
      s.block = block ? block : (f32 ? 128 : same_format(*s.format, formats::ue4m3) ? 16 : 32);
      const int bn = f32 ? 128 : 1;
      s.a_rows = m;
      s.a_cols = s.b_rows = blocks(k, s.block);
      s.b_cols = blocks(n, bn);
      return s;
    }
    case ScaleLayout::per_k_block: {
      const TensorCoreModel& model = *p.model;
      s.format = format ? format : (model.scale_block == 16 ? &formats::ue4m3 : &formats::e8m0);
      s.block = block ? block : model.scale_block;
      if (s.block != model.scale_block)
        throw ArgumentError("scale_block",
                            "model " + std::string(p.name) + " uses " + std::to_string(model.scale_block));
      s.a_rows = m;
      s.a_cols = s.b_rows = blocks(k, s.block);
      s.b_cols = n;
      return s;
    }
    case ScaleLayout::deepgemm_1x128:
    case ScaleLayout::deepgemm_1d1d:
      if (format && !same_format(*format, formats::f32))
        throw ArgumentError("scale_format", std::string(p.name) + " takes f32 scales");
      if (block && block != p.interval)
        throw ArgumentError("scale_block", std::string(p.name) + " uses " + std::to_string(p.interval));
      s.format = &formats::f32;
      s.block = p.interval;
      s.a_rows = m;
      s.a_cols = s.b_rows = blocks(k, p.interval);
      s.b_cols = p.scales == ScaleLayout::deepgemm_1d1d ? n : blocks(n, p.interval);
      return s;
  }
  return s;
}

namespace {

void check_operands(const Procedure& p, const Operands& o) {
  if (!o.a || !o.b) throw ArgumentError(o.a ? "b" : "a", "missing operand");
  for (const auto& [id, f] : {std::pair{"a_format", o.a->format}, std::pair{"b_format", o.b->format}})
    if (!takes(p, *f)) throw ArgumentError(id, std::string(p.name) + " takes " + operand_text(p) + ", not " + f->name);
  const bool scaled = o.a_scales || o.b_scales;
  if (p.scales == ScaleLayout::none && scaled)
    throw ArgumentError(o.a_scales ? "a_scales" : "b_scales", std::string(p.name) + " takes no block scales");
  if (needs_block_scales(p) && (!o.a_scales || !o.b_scales))
    throw ArgumentError(o.a_scales ? "b_scales" : "a_scales", std::string(p.name) + " needs block scales for A and B");
  if (scaled && (!o.a_scales || !o.b_scales))
    throw ArgumentError(o.a_scales ? "b_scales" : "a_scales", "block scales are given for both operands or neither");
  if (scaled) {
    const ScaleShape s = scale_shape(p, o.a->rows, o.b->cols, o.a->cols, o.a_scales->format, o.scale_block);
    for (const auto& [id, mat, rows, cols] : {std::tuple{"a_scales", o.a_scales, s.a_rows, s.a_cols},
                                              std::tuple{"b_scales", o.b_scales, s.b_rows, s.b_cols}}) {
      if (mat->rows != rows || mat->cols != cols)
        throw ArgumentError(id, "expected " + std::to_string(rows) + " x " + std::to_string(cols) + " scales, not " +
                                    std::to_string(mat->rows) + " x " + std::to_string(mat->cols));
      if (!same_format(*mat->format, *s.format))
        throw ArgumentError(id, std::string("scales of ") + s.format->name + ", not " + mat->format->name);
    }
  }
  const Epilogue& e = o.epilogue;
  if (e.d_format && e.d_format->bits > 16)
    throw ArgumentError("d_format", "a quantized output is a format of at most 16 bits");
  if (!e.d_format && e.scale_d != one) throw ArgumentError("scale_d", "only with a quantized output (d_format)");
}

// The exact reference, optionally block-scaled, with its epilogue computed exactly and rounded once.
RunResult run_exact(const Operands& o, bool epilogue) {
  const Epilogue& e = o.epilogue;
  RunResult out;
  if (o.a_scales) {
    if (epilogue) throw ArgumentError("alpha", "alpha, beta and per-tensor scales are not combined with block scales");
    if (e.d_format) throw ArgumentError("d_format", "a quantized output is not combined with block scales");
    const ScaleShape s =
        scale_shape(*find_procedure("exact"), o.a->rows, o.b->cols, o.a->cols, o.a_scales->format, o.scale_block);
    const int bn = same_format(*s.format, formats::f32) ? 128 : 1;
    out.d = exact_block_scaled(*o.a, *o.b, *o.a_scales, *o.b_scales, s.block, bn, o.c, formats::f32, Policy{});
    return out;
  }
  ExactOptions eo;
  eo.alpha = e.alpha;
  eo.beta = e.beta.value_or(o.c ? one : 0);
  eo.scale_a = e.scale_a;
  eo.scale_b = e.scale_b;
  eo.scale_c = e.scale_c;
  out.d = exact(*o.a, *o.b, o.c, eo);
  if (e.d_format) {
    // Rounded once, from the exact scale_d * D, into the output format.
    ExactOptions q = eo;
    q.scale_d = e.scale_d;
    q.out = e.d_format;
    q.policy.overflow = Overflow::satfinite;
    out.quantized_format = e.d_format;
    out.quantized = exact(*o.a, *o.b, o.c, q);
  }
  return out;
}

}  // namespace

RunResult run(const Procedure& p, const Operands& o) {
  check_operands(p, o);
  const Epilogue& e = o.epilogue;
  const std::uint32_t beta = e.beta.value_or(o.c ? one : 0);
  const bool epilogue =
      e.alpha != one || (o.c && beta != one) || e.scale_a != one || e.scale_b != one || (o.c && e.scale_c != one);
  if (p.kind == Kind::exact) return run_exact(o, epilogue);
  // Without an epilogue, C enters the accumulation itself; with one, the procedure runs from zero and the
  // epilogue (apply_epilogue) combines its result with C.
  const Matrix* cin = epilogue ? nullptr : o.c;
  std::uint32_t esa = e.scale_a, esb = e.scale_b;  // the scales left for the epilogue
  RunResult out;
  switch (p.kind) {
    case Kind::exact: break;
    case Kind::f32_order: out.d = accumulate(*o.a, *o.b, cin, p.order); break;
    case Kind::model:
      out.d = o.a_scales ? run_model(*p.model, *o.a, *o.b, cin, o.a_scales, o.b_scales)
                         : run_model(*p.model, *o.a, *o.b, cin);
      if (p.model->output == Output::f16_rne) out.format = &formats::f16;
      break;
    case Kind::promoted: {
      // The promotion multiplies each block by s = fp32(scale_a * scale_b) (DeepGEMM's FMA).
      const float s = std::bit_cast<float>(e.scale_a) * std::bit_cast<float>(e.scale_b);
      out.d = run_promoted(*p.model, p.interval, *o.a, *o.b, cin, std::bit_cast<std::uint32_t>(s));
      esa = esb = one;
      break;
    }
    case Kind::block_scaled:
      if (p.scales == ScaleLayout::deepgemm_1d1d) {
        // The 1d1d kernel's TMA reduce-add: the result, from +0, added to C once in f32.
        out.d = run_block_scaled(*p.model, *o.a, *o.b, *o.a_scales, *o.b_scales, nullptr, 1);
        if (cin) out.d = apply_epilogue(out.d, cin, one, one, one, one);
      } else {
        out.d = run_block_scaled(*p.model, *o.a, *o.b, *o.a_scales, *o.b_scales, cin);
      }
      break;
  }
  const bool f16_out = same_format(*out.format, formats::f16);
  if (epilogue) {
    if (f16_out)
      throw ArgumentError("model", std::string(p.name) + " writes f16; alpha, beta and scales are not supported there");
    out.d = apply_epilogue(out.d, o.c, e.alpha, beta, esa, esb, e.scale_c);
  }
  if (e.d_format) {
    if (f16_out) throw ArgumentError("d_format", std::string(p.name) + " writes f16");
    out.quantized_format = e.d_format;
    out.quantized = quantize_output(out.d, e.scale_d, *e.d_format);
  }
  return out;
}

}  // namespace lowbit::gemm
