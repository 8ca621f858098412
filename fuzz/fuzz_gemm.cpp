// Tensor-core models (lowbit/gemm.hpp) on random small dot products.
//  * model_step never fails on any mix of codes (NaN, Inf, subnormals, zeros) of any operand format the
//    models take (gemm::takes_operands), scaled models included;
//  * a model whose F is large enough that no product loses a bit to the alignment equals the exact dot
//    product rounded once to the model's output (toward zero into f32 or e8m13, to nearest even into
//    f16): exact_dot for unscaled models, exact_block_scaled for the block-scaled ones; a result beyond
//    the largest f32 is infinity (MMA-Sim's rule);
//  * run_model over a 1 x K by K x 1 product equals the loop of model_step calls it is defined by.
#include <cstring>

#include "fuzz_support.hpp"
#include "lowbit/convert.hpp"
#include "lowbit/gemm.hpp"

using namespace lowbit;
namespace G = lowbit::gemm;

namespace {

const Format& pick(FuzzedDataProvider& in, std::initializer_list<const char*> names) {
  const std::size_t i = in.ConsumeIntegralInRange<std::size_t>(0, names.size() - 1);
  return *find_format(*(names.begin() + i));
}

std::uint64_t draw_code(FuzzedDataProvider& in, const Format& f) {
  std::uint64_t c;
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0: c = f.encode(in.ConsumeBool(), 0); break;                                    // zero
    case 1: c = f.encode(in.ConsumeBool(), f.max_finite_magnitude()); break;             // ±max
    case 2: c = in.ConsumeIntegral<std::uint64_t>() & bits::ones(f.code_bits()) & 0xFF; break;  // small magnitudes
    default: c = in.ConsumeIntegral<std::uint64_t>() & bits::ones(f.code_bits());
  }
  c <<= f.code_shift;
  return f.valid_code(c) ? c : f.encode(false, 0);
}

// The lowest and highest bit positions of the nonzero terms of a step (products with their scales, and C).
struct Span {
  int lo = 1 << 20, hi = -(1 << 20);
  void add(const Unpacked& u, int extra_bits, int extra_exp) {
    if (u.cls != ValueClass::finite) return;
    lo = std::min(lo, u.exponent + extra_exp);
    hi = std::max(hi, u.exponent + extra_exp + bits::width(u.significand) + extra_bits);
  }
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  for (const char* n : {"e4m3", "e5m2", "e2m1", "e2m3", "e3m2", "bf16", "f16", "tf32", "f32", "int8", "e4m3fnuz",
                        "e5m2fnuz", "ue4m3", "e8m0", "e8m13", "e11m23"})
    if (!find_format(n)) fuzz::fail(std::string("format ") + n + " is not registered");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const auto models = G::models();
  G::TensorCoreModel model = models[in.ConsumeIntegralInRange<std::size_t>(0, models.size() - 1)];
  const bool scaled = model.scale != G::BlockScale::none;
  const bool fp4 = model.scale == G::BlockScale::per_16;
  const Format& pa = fp4 ? pick(in, {"e2m1"})
                         : pick(in, {"e4m3", "e5m2", "e2m1", "e2m3", "e3m2", "bf16", "f16", "tf32", "f32", "int8",
                                     "e4m3fnuz", "e5m2fnuz"});
  const Format& pb = fp4 ? pa : pick(in, {"e4m3", "e5m2", "e2m1", "e2m3", "e3m2", "bf16", "f16", "tf32", "f32", "int8"});
  // hopper-fp8-mma-sync takes only formats that f16 holds exactly (it refuses the others); e4m3 in their place.
  const Format& fa = G::defined_on(model, pa) ? pa : formats::e4m3;
  const Format& fb = G::defined_on(model, pb) ? pb : formats::e4m3;
  const Format* sf = nullptr;
  if (scaled) sf = model.scale_block == 16 ? find_format("ue4m3") : find_format("e8m0");
  const int k = in.ConsumeIntegralInRange<int>(1, model.group);
  std::vector<std::uint64_t> a(static_cast<std::size_t>(k)), b(a.size());
  for (int i = 0; i < k; ++i) {
    a[static_cast<std::size_t>(i)] = draw_code(in, fa);
    b[static_cast<std::size_t>(i)] = draw_code(in, fb);
  }
  const std::uint32_t c = static_cast<std::uint32_t>(draw_code(in, model.output == G::Output::f16_rne ? formats::f16 : formats::f32));
  std::vector<std::uint64_t> sa, sb;
  if (scaled) {
    const int ns = (model.group + model.scale_block - 1) / model.scale_block;
    for (int i = 0; i < ns; ++i) {
      // Scales near 1 most of the time (the exact comparison stays inside f32), any code otherwise.
      const bool any = in.ConsumeIntegralInRange<int>(0, 7) == 0;
      const std::uint64_t bias = sf == &formats::f32 ? 0x3F800000u : (sf->name == std::string("e8m0") ? 127 : 0x38);
      sa.push_back(any ? draw_code(in, *sf) : bias + in.ConsumeIntegralInRange<int>(-3, 3));
      sb.push_back(any ? draw_code(in, *sf) : bias + in.ConsumeIntegralInRange<int>(-3, 3));
    }
    for (auto* v : {&sa, &sb})
      for (auto& s : *v)
        if (!sf->valid_code(s)) s = sf->encode(false, 0);
  }

  // Any model, any codes: a result, never a failure.
  const std::uint32_t d = G::model_step(model, fa, a, fb, b, c, sf, sa, sb);
  (void)d;

  // run_model over the 1 x k by k x 1 product: the same as one step (k <= group).
  {
    G::Matrix ma{&fa, 1, k, a}, mb{&fb, k, 1, b};
    const Format& acc = model.output == G::Output::f16_rne ? formats::f16 : formats::f32;
    G::Matrix mc{&acc, 1, 1, {c}};
    std::vector<std::uint64_t> got;
    if (scaled) {
      const int ns = (k + model.scale_block - 1) / model.scale_block;
      G::Matrix msa{sf, 1, ns, std::vector<std::uint64_t>(sa.begin(), sa.begin() + ns)};
      G::Matrix msb{sf, ns, 1, std::vector<std::uint64_t>(sb.begin(), sb.begin() + ns)};
      got = G::run_model(model, ma, mb, &mc, &msa, &msb);
    } else {
      got = G::run_model(model, ma, mb, &mc);
    }
    // The driver takes C through the accumulator format: compare against the step with that C.
    const std::uint32_t want = G::model_step(model, fa, a, fb, b, c, sf, sa, sb);
    const bool nan_both = acc.is_nan_code(got[0]) && acc.is_nan_code(want);
    if (got.size() != 1 || (got[0] != want && !nan_both))
      fuzz::fail(std::string("run_model != model_step: model ") + model.name + " " + fa.name + " x " + fb.name +
                 " k " + std::to_string(k) + ": " + fuzz::hex(got[0]) + " vs " + fuzz::hex(want));
  }

  // A model with F large: exact, then the model's output rounding.  (Not for hopper-fp8-mma-sync: its two
  // half-steps round toward zero in turn and C is added last to nearest even; conformance/gemm/
  // test_mma_sync_model.cpp holds it to hardware results and hand-derived cases.)
  if (model.truncate_tf32 || model.datapath != G::Datapath::fused) return 0;
  bool finite = true;
  for (std::size_t i = 0; i < a.size(); ++i)
    finite &= unpack(fa, a[i]).cls != ValueClass::nan && unpack(fa, a[i]).cls != ValueClass::inf &&
              unpack(fb, b[i]).cls != ValueClass::nan && unpack(fb, b[i]).cls != ValueClass::inf;
  const Format& acc = model.output == G::Output::f16_rne ? formats::f16 : formats::f32;
  const Unpacked uc = unpack(acc, c);
  finite &= uc.cls != ValueClass::nan && uc.cls != ValueClass::inf;
  for (std::uint64_t s : sa) finite &= unpack(*sf, s).cls == ValueClass::finite;
  for (std::uint64_t s : sb) finite &= unpack(*sf, s).cls == ValueClass::finite;
  if (!finite) return 0;
  if (model.output == G::Output::f16_rne) return 0;  // C is an f16 code there; exact_dot takes f32 C
  // F = 100 keeps every aligned term below 2^102 (no overflow of the 128-bit sum); the step is exact when
  // the lowest bit of every nonzero term lies within 2^96 of the alignment exponent, which the model takes
  // from every term, zeros included (MMA-Sim: a zero's exponent is -126, a subnormal's the format's smallest).
  auto mexp = [](const Format& f, const Unpacked& u) { return u.cls == ValueClass::finite ? u.exponent + f.mantissa_bits : -126; };
  Span span;
  span.hi = mexp(acc, uc);
  if (uc.cls == ValueClass::finite) span.lo = uc.exponent;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const Unpacked x = unpack(fa, a[i]), y = unpack(fb, b[i]);
    int se = 0, shi = 0;
    if (scaled) {
      const std::size_t g = i / static_cast<std::size_t>(model.scale_block);
      const Unpacked s0 = unpack(*sf, sa[g]), s1 = unpack(*sf, sb[g]);
      se = s0.exponent + s1.exponent;
      shi = mexp(*sf, s0) + mexp(*sf, s1) + 12;  // a 16-group sum of e2m1 products stays below 2^10
    }
    const int scale_terms = scaled ? shi - 12 : 0;
    span.hi = std::max(span.hi, fp4 ? shi : mexp(fa, x) + mexp(fb, y) + scale_terms + 2);
    if (x.cls == ValueClass::finite && y.cls == ValueClass::finite) span.lo = std::min(span.lo, x.exponent + y.exponent + se);
  }
  if (span.hi - span.lo > 90) return 0;
  model.fraction_bits = 100;
  const std::uint32_t big = G::model_step(model, fa, a, fb, b, c, sf, sa, sb);
  Policy rz{.rounding = Rounding::rtz};
  const Format& out = model.output == G::Output::f32_e8m13_rz ? *find_format("e8m13") : formats::f32;
  std::uint64_t want;
  G::Matrix ma{&fa, 1, k, a}, mb{&fb, k, 1, b};
  G::Matrix mc{&formats::f32, 1, 1, {c}};
  const Format* wide = find_format("e11m23");
  std::uint64_t beyond;  // the same sum into f32's precision with an unbounded exponent: is it past f32's max?
  if (scaled) {
    const int ns = (k + model.scale_block - 1) / model.scale_block;
    G::Matrix msa{sf, 1, ns, std::vector<std::uint64_t>(sa.begin(), sa.begin() + ns)};
    G::Matrix msb{sf, ns, 1, std::vector<std::uint64_t>(sb.begin(), sb.begin() + ns)};
    want = G::exact_block_scaled(ma, mb, msa, msb, model.scale_block, 1, &mc, out, rz)[0];
    beyond = G::exact_block_scaled(ma, mb, msa, msb, model.scale_block, 1, &mc, *wide, rz)[0];
  } else {
    want = G::exact_dot(fa, a, fb, b, c, out, rz);
    beyond = G::exact_dot(fa, a, fb, b, c, *wide, rz);
  }
  const Unpacked wu = unpack(*wide, beyond);
  const bool overflow = wu.cls == ValueClass::finite && wu.exponent + bits::width(wu.significand) - 1 >= 128;
  std::uint64_t expect = overflow ? formats::f32.encode(wu.negative, formats::f32.inf_magnitude())
                                  : (&out == &formats::f32 ? want : convert(out, want, formats::f32, Policy{}).code);
  // Every model's zero result is +0, also where a nonzero negative sum truncates to -0 (MMA-Sim's rule,
  // reference/src/gemm.cpp positive_zero; docs/semantics.md §5), which exact-then-RZ keeps as -0.
  if ((expect & 0x7FFFFFFFu) == 0) expect = 0;
  auto list = [](const std::vector<std::uint64_t>& v) {
    std::string t;
    for (std::uint64_t x : v) t += " " + fuzz::hex(x);
    return t;
  };
  if (big != expect)
    fuzz::fail("a" + list(a) + " b" + list(b) + " sa" + list(sa) + " sb" + list(sb) + ": " +std::string("model with F = 100 != exact then RZ: model ") + model.name + " " + fa.name + " x " +
               fb.name + " k " + std::to_string(k) + " c " + fuzz::hex(c) + ": model " + fuzz::hex(big) +
               ", exact " + fuzz::hex(expect));
  return 0;
}
