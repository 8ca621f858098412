// The GEMM procedure table (lowbit/procedure.hpp): which operands each procedure takes, against the
// conversion of every code; the table's own consistency; `run` against the functions it dispatches to;
// its errors, each naming the argument; and the TF32 truncation of an f32 operand however it is named.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "lowbit/convert.hpp"
#include "lowbit/procedure.hpp"
#include "lowbit/registry.hpp"
#include "lowbit/value.hpp"

namespace {

using lowbit::ArgumentError;
using lowbit::Format;
using lowbit::gemm::Matrix;
namespace F = lowbit::formats;
namespace G = lowbit::gemm;

// Whether converting every code of f into g keeps its value: same class, a finite value without rounding
// (nearest even, no saturation, so an out-of-range value overflows).  Signed zeros count as one value.
bool converts_every_code(const Format& f, const Format& g) {
  for (std::uint64_t code = 0; code < (std::uint64_t{1} << f.storage_bits()); ++code) {
    if (!f.valid_code(code)) continue;
    const lowbit::Result r = lowbit::convert(f, code, g, lowbit::Policy{});
    const lowbit::Unpacked in = lowbit::unpack(f, code), out = lowbit::unpack(g, r.code);
    if (in.cls != out.cls) return false;
    if (in.cls == lowbit::ValueClass::nan) continue;  // a NaN stays a NaN (a signaling one raises invalid)
    if (r.flags & (lowbit::flag::inexact | lowbit::flag::overflow | lowbit::flag::invalid)) return false;
    if (in.cls == lowbit::ValueClass::inf && in.negative != out.negative) return false;
  }
  return true;
}

// holds_every_value against the conversion of every code, for every built-in source of at most 16 bits into
// every built-in format: for these rows the predicate is exact (the "sufficient, not necessary" slack is only
// reached by degenerate parametric formats).
TEST(Procedures, HoldsEveryValueIsTheConversionOfEveryCode) {
  int held = 0;
  for (const Format& f : F::builtin) {
    if (f.storage_bits() > 16) continue;
    for (const Format& g : F::builtin) {
      const bool want = converts_every_code(f, g);
      EXPECT_EQ(G::holds_every_value(g, f), want) << f.name << " into " << g.name;
      held += want;
    }
  }
  EXPECT_GT(held, 40);  // the sweep reaches holding pairs, not only refusals
}

// Parametric and P3109 sources: whatever the predicate takes converts exactly (it may refuse more).
TEST(Procedures, HoldsEveryValueNeverTakesAFormatWithAValueTheTargetLacks) {
  int taken = 0;
  for (const char* target : {"f16", "bf16", "e4m3", "e5m2", "tf32"}) {
    const Format& g = *lowbit::find_format(target);
    for (int e = 1; e <= 5; ++e)
      for (int m = 0; e + m <= 10; ++m)
        for (int bias : {0, 1, 3, 7, 15})
          for (const char* specials : {"-ieee", "-fn", "-fnuz", "-finite"}) {
            char name[32];
            std::snprintf(name, sizeof name, "e%dm%db%d%s", e, m, bias, specials);
            const Format* f = lowbit::find_format(name);
            if (!f || !G::holds_every_value(g, *f)) continue;
            ++taken;
            EXPECT_TRUE(converts_every_code(*f, g)) << name << " into " << target;
          }
  }
  EXPECT_GT(taken, 100);
}

struct Takes {
  const char* procedure;
  const char* format;
  bool taken;
};
// From each instruction's own operand types (PTX ISA: wgmma / mma / tcgen05.mma operand kinds) and, for the
// rows that convert, which formats those hold.
const Takes takes_cases[] = {
    {"hopper-fp8", "e4m3", true},
    {"hopper-fp8", "e5m2", true},
    {"hopper-fp8", "bf16", false},
    {"hopper-fp8", "e2m1", false},
    {"hopper-fp8", "e4m3fnuz", false},
    {"ada-fp8", "f16", false},
    {"hopper-f16", "f16", true},
    {"hopper-f16", "e4m3", true},
    {"hopper-f16", "e5m2", true},
    {"hopper-f16", "int8", true},
    {"hopper-f16", "bf16", false},
    {"hopper-f16", "f32", false},
    {"hopper-bf16", "bf16", true},
    {"hopper-bf16", "e8m0", true},
    {"hopper-bf16", "f16", false},
    {"hopper-tf32", "f32", true},
    {"hopper-tf32", "tf32", true},
    {"hopper-tf32", "bf16", true},
    {"hopper-tf32", "f16", true},
    {"hopper-tf32", "f64", false},
    {"blackwell-f8f6f4", "e3m2", true},
    {"blackwell-f8f6f4", "e2m1", true},
    {"blackwell-f8f6f4", "bf16", false},
    {"blackwell-mxf4", "e2m1", true},
    {"blackwell-mxf4", "e4m3", false},
    {"hopper-fp8-mma-sync", "e2m1", true},
    {"hopper-fp8-mma-sync", "f16", false},
    {"hopper-fp8-promote128", "e5m2", true},
    {"hopper-fp8-promote128", "bf16", false},
    {"exact", "f32", true},
    {"exact", "e8m0", true},
    {"exact", "f64", false},
    {"f32-sequential", "bf16", true},
    {"f32-sequential", "tf32", true},
    {"f32-sequential", "f64", false},
};

TEST(Procedures, OperandsTaken) {
  for (const Takes& t : takes_cases) {
    const G::Procedure* p = G::find_procedure(t.procedure);
    ASSERT_NE(p, nullptr) << t.procedure;
    EXPECT_EQ(G::takes(*p, *lowbit::find_format(t.format)), t.taken) << t.procedure << " / " << t.format;
  }
}

TEST(Procedures, TheTableIsConsistent) {
  std::set<std::string> names;
  for (const G::Procedure& p : G::procedures()) {
    SCOPED_TRACE(p.name);
    EXPECT_TRUE(names.insert(p.name).second) << "duplicate name";
    EXPECT_EQ(G::find_procedure(p.name), &p);
    EXPECT_FALSE(p.golden.empty()) << "every procedure has a golden suite";
    if (p.kind == G::Kind::model || p.kind == G::Kind::promoted || p.kind == G::Kind::block_scaled) {
      ASSERT_NE(p.model, nullptr);
    }
    if (p.kind == G::Kind::promoted || p.kind == G::Kind::block_scaled) { EXPECT_GT(p.interval, 0); }
    for (const G::OperandPair& g : p.golden) {
      EXPECT_TRUE(G::takes(p, *g.a)) << g.a->name;
      EXPECT_TRUE(G::takes(p, *g.b)) << g.b->name;
      EXPECT_EQ(g.scale != nullptr,
                p.scales != G::ScaleLayout::none && (p.scales != G::ScaleLayout::optional_k || g.scale))
          << "scales exactly where the layout has them";
    }
  }
  for (const G::TensorCoreModel& m : G::models()) {
    const G::Procedure* p = G::find_procedure(m.name);
    ASSERT_NE(p, nullptr) << m.name;
    EXPECT_EQ(p->kind, G::Kind::model);
    EXPECT_EQ(p->model, &m);
    EXPECT_FALSE(m.operands.empty()) << m.name;
  }
}

// Small moderate operands: codes whose magnitude stays well inside every format (no overflow in the sums).
Matrix operand(const Format& f, int rows, int cols, std::uint64_t seed) {
  Matrix m{&f, rows, cols, {}};
  const std::uint64_t one = lowbit::convert(F::f32, 0x3F800000u, f, lowbit::Policy{}).code;
  for (int i = 0; i < rows * cols; ++i) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    const std::uint64_t step = (seed >> 33) % 5;
    m.codes.push_back((seed >> 40) & 1 ? one : f.encode(seed >> 41 & 1, step + (f.max_finite_magnitude() > 8 ? 1 : 0)));
  }
  return m;
}

TEST(Procedures, RunIsTheFunctionItNames) {
  const int m = 3, n = 5, k = 70;
  for (const G::Procedure& p : G::procedures()) {
    if (p.scales != G::ScaleLayout::none) continue;  // block-scaled runs: gemm_cli and the golden suites
    SCOPED_TRACE(p.name);
    const G::OperandPair& g = p.golden[0];
    const Matrix a = operand(*g.a, m, k, 1), b = operand(*g.b, k, n, 2);
    const Matrix c{&F::f32, m, n, std::vector<std::uint64_t>(static_cast<std::size_t>(m) * n, 0x3F800000u)};
    const G::RunResult r = G::run(p, {.a = &a, .b = &b, .c = &c});
    std::vector<std::uint64_t> want;
    switch (p.kind) {
      case G::Kind::exact: want = G::exact(a, b, &c); break;
      case G::Kind::f32_order: want = G::accumulate(a, b, &c, p.order); break;
      case G::Kind::model: want = G::run_model(*p.model, a, b, &c); break;
      case G::Kind::promoted: want = G::run_promoted(*p.model, p.interval, a, b, &c); break;
      case G::Kind::block_scaled: break;
    }
    EXPECT_EQ(r.d, want);
  }
}

G::Epilogue with_scale_d(std::uint32_t v) {
  G::Epilogue e;
  e.scale_d = v;
  return e;
}
G::Epilogue with_d_format(const Format& f) {
  G::Epilogue e;
  e.d_format = &f;
  return e;
}
G::Epilogue with_alpha(std::uint32_t v) {
  G::Epilogue e;
  e.alpha = v;
  return e;
}

// A procedure's errors name the argument at fault.
std::string argument_of(const G::Procedure& p, const G::Operands& o) {
  try {
    G::run(p, o);
  } catch (const ArgumentError& e) { return e.argument; }
  return "(no error)";
}

TEST(Procedures, ErrorsNameTheArgument) {
  const Matrix a8 = operand(F::e4m3, 2, 32, 3), b8 = operand(F::e4m3, 32, 2, 4);
  const Matrix abf = operand(F::bf16, 2, 32, 3), bbf = operand(F::bf16, 32, 2, 4);
  const Matrix a4 = operand(F::e2m1, 2, 64, 5), b4 = operand(F::e2m1, 64, 2, 6);
  const G::Procedure& hopper = *G::find_procedure("hopper-fp8");
  EXPECT_EQ(argument_of(hopper, {.a = &abf, .b = &b8}), "a_format");
  EXPECT_EQ(argument_of(hopper, {.a = &a8, .b = &bbf}), "b_format");
  const Matrix s1{&F::e8m0, 2, 1, {0x7F, 0x7F}};
  EXPECT_EQ(argument_of(hopper, {.a = &a8, .b = &b8, .a_scales = &s1, .b_scales = &s1}), "a_scales");
  const G::Procedure& mxf4 = *G::find_procedure("blackwell-mxf4");
  EXPECT_EQ(argument_of(mxf4, {.a = &a4, .b = &b4}), "a_scales");
  const Matrix sa{&F::e8m0, 2, 2, {0x7F, 0x7F, 0x7F, 0x7F}},
      sb_wrong{&F::e8m0, 2, 3, std::vector<std::uint64_t>(6, 0x7F)};
  EXPECT_EQ(argument_of(mxf4, {.a = &a4, .b = &b4, .a_scales = &sa, .b_scales = &sb_wrong}), "b_scales");
  const G::Procedure& exact = *G::find_procedure("exact");
  EXPECT_EQ(argument_of(exact, {.a = &a8, .b = &b8, .epilogue = with_scale_d(0x40000000u)}), "scale_d");
  EXPECT_EQ(argument_of(exact, {.a = &a8, .b = &b8, .epilogue = with_d_format(F::f32)}), "d_format");
  const Matrix a16 = operand(F::f16, 2, 16, 7), b16 = operand(F::f16, 16, 2, 8);
  EXPECT_EQ(
      argument_of(*G::find_procedure("hopper-f16-f16acc"), {.a = &a16, .b = &b16, .epilogue = with_alpha(0x40000000u)}),
      "model");
  // A scale block the model does not use.
  EXPECT_THROW(G::scale_shape(mxf4, 2, 2, 64, nullptr, 16), ArgumentError);
}

// ampere-tf32 truncates an f32 operand to tf32 whatever the row it is named by: the parametric e8m23 is f32.
// 1 + 2^-23 (0x3f800001) times 1 is 1 after truncation; before the truncation was keyed on the identity of the
// built-in row, e8m23 kept the low bit and gave 0x3f800001.
TEST(Procedures, Tf32TruncatesAnF32OperandByAnyName) {
  const Format& e8m23 = *lowbit::find_format("e8m23");
  ASSERT_NE(&e8m23, &F::f32);
  for (const char* model : {"ampere-tf32", "hopper-tf32"}) {
    const G::Procedure& p = *G::find_procedure(model);
    for (const Format* f : {&F::f32, &e8m23}) {
      const Matrix a{f, 1, 1, {0x3F800001u}}, b{f, 1, 1, {0x3F800000u}};
      EXPECT_EQ(G::run(p, {.a = &a, .b = &b}).d[0], 0x3F800000u) << model << " " << f->name;
    }
  }
}

}  // namespace

namespace {

// An f32 code of a float, for hand-derived cases.
std::uint64_t f32(float v) { return std::bit_cast<std::uint32_t>(v); }

// A 1 x K e4m3 row (or K x 1 column) holding 1.0 (0x38) at the given positions and +0 elsewhere.
Matrix ones_at(int k, std::initializer_list<int> at, bool column) {
  Matrix m{&F::e4m3, column ? k : 1, column ? 1 : k, std::vector<std::uint64_t>(static_cast<std::size_t>(k), 0)};
  for (int i : at) m.codes[static_cast<std::size_t>(i)] = 0x38;
  return m;
}

}  // namespace

// DeepGEMM's 1d1d kernel (impls/sm90_fp8_gemm_1d1d.cuh): every K block's WGMMA result from +0, promoted
// with final += (sa * sb) * block, the scales one per row (A) and one per column (B) of each 128-block, and C
// reduced into D at the end.  K = 256, every element 1.0: each block's partial is 128 exactly, so with
// sa = (2, 0.5) and sb = (3, 4): 6 * 128 = 768, + 2 * 128 = 1024, then + C = 0.25 gives 1024.25.
TEST(Procedures, BlockScaled1d1dPromotesEachBlockWithItsScalesAndAddsCLast) {
  const G::Procedure& p = *G::find_procedure("hopper-fp8-blockscaled-1d1d");
  Matrix a{&F::e4m3, 1, 256, std::vector<std::uint64_t>(256, 0x38)};
  Matrix b{&F::e4m3, 256, 1, std::vector<std::uint64_t>(256, 0x38)};
  const Matrix sa{&F::f32, 1, 2, {f32(2.0f), f32(0.5f)}};
  const Matrix sb{&F::f32, 2, 1, {f32(3.0f), f32(4.0f)}};
  const Matrix c{&F::f32, 1, 1, {f32(0.25f)}};
  EXPECT_EQ(G::run(p, {.a = &a, .b = &b, .c = &c, .a_scales = &sa, .b_scales = &sb}).d.at(0), f32(1024.25f));
  // B's scales are one per column: a second column with its own scales (1, 1) gives 128 + 128 + C.
  Matrix b2{&F::e4m3, 256, 2, std::vector<std::uint64_t>(512, 0x38)};
  const Matrix sb2{&F::f32, 2, 2, {f32(3.0f), f32(1.0f), f32(4.0f), f32(1.0f)}};
  const Matrix c2{&F::f32, 1, 2, {f32(0.25f), f32(0.25f)}};
  const auto d2 = G::run(p, {.a = &a, .b = &b2, .c = &c2, .a_scales = &sa, .b_scales = &sb2}).d;
  // Column 1: 2 * 128 + 0.5 * 128 + 0.25.
  EXPECT_EQ(d2, (std::vector<std::uint64_t>{f32(1024.25f), f32(320.25f)}));
  // Scales of another shape (one for both columns, as a 128x128 block would have) are refused naming them.
  EXPECT_EQ(argument_of(p, {.a = &a, .b = &b2, .a_scales = &sa, .b_scales = &sb}), "b_scales");
}

// Where C enters is visible: with C = 2^24 (f32 spacing 2 there) and one product of 1 in each of two K
// blocks, the 1d2d kernel's accumulator starts at C, so each + 1 is a tie that rounds back to 2^24; the
// 1d1d kernel sums 1 + 1 = 2 from +0 and adds it to C once: 2^24 + 2.
TEST(Procedures, BlockScaled1d1dAddsCOnceWhereThe1d2dKernelStartsFromIt) {
  const Matrix a = ones_at(256, {0, 128}, false), b = ones_at(256, {0, 128}, true);
  const Matrix sa{&F::f32, 1, 2, {f32(1.0f), f32(1.0f)}};
  const Matrix sb_col{&F::f32, 2, 1, {f32(1.0f), f32(1.0f)}};  // 1d1d: per column; 1d2d: per 128 columns
  const Matrix c{&F::f32, 1, 1, {f32(16777216.0f)}};
  const auto d1d1 = G::run(*G::find_procedure("hopper-fp8-blockscaled-1d1d"),
                           {.a = &a, .b = &b, .c = &c, .a_scales = &sa, .b_scales = &sb_col})
                        .d;
  const auto d1d2 = G::run(*G::find_procedure("hopper-fp8-blockscaled"),
                           {.a = &a, .b = &b, .c = &c, .a_scales = &sa, .b_scales = &sb_col})
                        .d;
  EXPECT_EQ(d1d1.at(0), 0x4B800001u);  // 2^24 + 2
  EXPECT_EQ(d1d2.at(0), 0x4B800000u);  // 2^24
}
