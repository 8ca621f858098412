// The GEMM drivers of the tensor-core models (run_model, run_promoted, run_block_scaled) against the
// definition: a plain loop of model_step calls, one per output and group of K, C fed back.  The drivers
// decode the operands once and vectorise the finite steps; these tests hold them to the definition bit for
// bit on random shapes (tiles of columns cut at every position), every unscaled model, operand formats
// mixed freely, and inputs full of zeros, subnormals, NaN, infinities and values near the extremes.
// Likewise the exact GEMM's blocked integer route against its wide fixed-point route.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "lowbit/convert.hpp"
#include "lowbit/gemm.hpp"
#include "lowbit/names.hpp"
#include "random_codes.hpp"

namespace {

using lowbit::Format;
using lowbit::gemm::Matrix;
using lowbit::gemm::TensorCoreModel;
using lowbit::testing::splitmix;
namespace F = lowbit::formats;

const Format* const kFormats[] = {&F::e4m3, &F::e5m2, &F::e2m1, &F::e3m2, &F::e2m3,
                                  &F::f16,  &F::bf16, &F::f32,  &F::int8};

// A random code of f: mostly finite, with zeros, subnormals, the largest magnitudes and (when `specials`)
// NaN and infinities at raised rates.
std::uint64_t pick(const Format& f, std::uint64_t& s, bool specials) {
  const std::uint64_t mask = lowbit::bits::ones(f.code_bits());
  const std::uint64_t sign = f.is_signed() ? (splitmix(s) & 1) << (f.code_bits() - 1) : 0;
  const unsigned r = static_cast<unsigned>(splitmix(s) % 100);
  if (r < 15) return f.encode(splitmix(s) & 1, 0);
  if (r < 30 && f.mantissa_bits > 0 && f.has_subnormals())
    return sign | (splitmix(s) & f.mantissa_mask());  // exponent field 0: a subnormal (or zero)
  if (r < 38) return f.encode(splitmix(s) & 1, f.max_finite_magnitude() - (splitmix(s) & 3));
  if (r < 42 && specials) {
    if (f.has_inf() && (splitmix(s) & 1)) return f.encode(splitmix(s) & 1, f.inf_magnitude());
    if (f.has_nan()) return f.nan_code(splitmix(s) & 1, f.mantissa_mask());
  }
  for (;;) {
    const std::uint64_t c = splitmix(s) & mask;
    if (!f.is_nan_code(c) && !f.is_inf_code(c)) return c;
  }
}

Matrix random_matrix(const Format& f, int rows, int cols, std::uint64_t& s, bool specials) {
  Matrix m{&f, rows, cols, {}};
  m.codes.resize(static_cast<std::size_t>(rows) * cols);
  for (auto& c : m.codes) c = pick(f, s, specials);
  return m;
}

// Codes of an 8-bit-exponent format (f32, bf16) with exponents in [e, e + 3] (and some zeros): products
// then land near the bottom of the f32 range (subnormal results, the f32 and e8m13 subnormal grids) or
// beyond its top (overflow), where the drivers leave their fast rounding.
Matrix window_matrix(const Format& f, int rows, int cols, int e, std::uint64_t& s) {
  Matrix m{&f, rows, cols, {}};
  for (int i = 0; i < rows * cols; ++i) {
    const std::uint64_t sign = (splitmix(s) & 1) << (f.code_bits() - 1);
    const auto field = static_cast<std::uint64_t>(e + f.bias + static_cast<int>(splitmix(s) % 4));
    m.codes.push_back(splitmix(s) % 8 == 0 ? 0 : sign | field << f.mantissa_bits | (splitmix(s) & f.mantissa_mask()));
  }
  return m;
}

// ---- the definition ------------------------------------------------------------------------------------

// Group [lo, lo + g) of row i and column j, zero-padded beyond `end`.
void gather(const Matrix& a, const Matrix& b, int i, int j, int lo, int g, int end, std::vector<std::uint64_t>& ra,
            std::vector<std::uint64_t>& rb) {
  ra.assign(static_cast<std::size_t>(g), a.format->encode(false, 0));
  rb.assign(static_cast<std::size_t>(g), b.format->encode(false, 0));
  for (int k = 0; k < g && lo + k < end; ++k) {
    ra[static_cast<std::size_t>(k)] = a.at(i, lo + k);
    rb[static_cast<std::size_t>(k)] = b.at(lo + k, j);
  }
}

std::vector<std::uint64_t> model_by_steps(const TensorCoreModel& model, const Matrix& a, const Matrix& b,
                                          const Matrix* c) {
  const Format& acc = model.output == lowbit::gemm::Output::f16_rne ? F::f16 : F::f32;
  std::vector<std::uint64_t> d, ra, rb;
  for (int i = 0; i < a.rows; ++i)
    for (int j = 0; j < b.cols; ++j) {
      auto sum = static_cast<std::uint32_t>(c ? lowbit::convert(*c->format, c->at(i, j), acc, {}).code : 0);
      for (int lo = 0; lo < a.cols; lo += model.group) {
        gather(a, b, i, j, lo, model.group, a.cols, ra, rb);
        sum = lowbit::gemm::model_step(model, *a.format, ra, *b.format, rb, sum);
      }
      d.push_back(sum);
    }
  return d;
}

// Blocks of `block` elements of K, each from a zero C; acc = fma(scale(i, blk, j), partial, acc).
template <class Scale>
std::vector<std::uint64_t> promoted_by_steps(const TensorCoreModel& model, int block, const Matrix& a, const Matrix& b,
                                             const Matrix* c, Scale scale) {
  std::vector<std::uint64_t> d, ra, rb;
  for (int i = 0; i < a.rows; ++i)
    for (int j = 0; j < b.cols; ++j) {
      float acc = c ? std::bit_cast<float>(static_cast<std::uint32_t>(c->at(i, j))) : 0.0f;
      for (int lo = 0; lo < a.cols; lo += block) {
        std::uint32_t partial = 0;
        for (int glo = lo; glo < std::min(a.cols, lo + block); glo += model.group) {
          gather(a, b, i, j, glo, model.group, std::min(a.cols, lo + block), ra, rb);
          partial = lowbit::gemm::model_step(model, *a.format, ra, *b.format, rb, partial);
        }
        acc = std::fmaf(scale(i, lo / block, j), std::bit_cast<float>(partial), acc);
      }
      // The GPU's f32 FFMA returns the canonical NaN 0x7FFFFFFF for every NaN result (lowbit/gemm.hpp).
      d.push_back(std::isnan(acc) ? 0x7FFFFFFFu : std::bit_cast<std::uint32_t>(acc));
    }
  return d;
}

std::vector<const TensorCoreModel*> unscaled_models() {
  std::vector<const TensorCoreModel*> v;
  for (const TensorCoreModel& m : lowbit::gemm::models())
    if (m.scale == lowbit::gemm::BlockScale::none) v.push_back(&m);
  return v;
}

// The first differing output, for the failure message.
std::string first_difference(const std::vector<std::uint64_t>& got, const std::vector<std::uint64_t>& want, int n) {
  for (std::size_t i = 0; i < want.size(); ++i)
    if (got[i] != want[i])
      return "output (" + std::to_string(i / static_cast<std::size_t>(n)) + ", " +
             std::to_string(i % static_cast<std::size_t>(n)) + "): got " + std::to_string(got[i]) + ", want " +
             std::to_string(want[i]);
  return "";
}

struct Case {
  const TensorCoreModel* model;
  Matrix a, b, c;
  bool with_c;
};

Case random_case(std::uint64_t& s, const std::vector<const TensorCoreModel*>& models, int trial) {
  const TensorCoreModel* model = models[static_cast<std::size_t>(trial) % models.size()];
  // The formats the model computes on (hopper-fp8-mma-sync: those f16 holds exactly).
  std::vector<const Format*> formats;
  for (const Format* f : kFormats)
    if (lowbit::gemm::defined_on(*model, *f)) formats.push_back(f);
  const Format& fa = *formats[splitmix(s) % formats.size()];
  const Format& fb = (splitmix(s) & 1) ? fa : *formats[splitmix(s) % formats.size()];
  const int m = 1 + static_cast<int>(splitmix(s) % 5);
  const int n = 1 + static_cast<int>(splitmix(s) % 140);  // one to three tiles of columns, cut anywhere
  const int k = static_cast<int>(splitmix(s) % 100);
  const bool specials = splitmix(s) % 3 == 0;  // most cases take the finite path only
  Case c{model, random_matrix(fa, m, k, s, specials), random_matrix(fb, k, n, s, specials), {}, false};
  if (trial % 5 == 4 && lowbit::gemm::defined_on(*model, F::f32)) {
    // Both operands at 2^e: products near 2^(2e), with e chosen at the bottom or the top of the range.
    static const int windows[] = {-76, -72, -70, -68, -66, -64, 61, 62, 63, 64};
    const int e = windows[splitmix(s) % std::size(windows)];
    const Format& wa = (splitmix(s) & 1) ? F::f32 : F::bf16;
    const Format& wb = (splitmix(s) & 1) ? F::f32 : F::bf16;
    c.a = window_matrix(wa, m, k, e, s);
    c.b = window_matrix(wb, k, n, e, s);
  }
  c.with_c = splitmix(s) & 1;
  c.c = random_matrix(F::f32, m, n, s, specials);
  if (trial % 5 == 4 && c.with_c) c.c = window_matrix(F::f32, m, n, (splitmix(s) & 1) ? -126 : 124, s);
  return c;
}

TEST(FastDriver, RunModelEqualsModelStepLoop) {
  const auto models = unscaled_models();
  std::uint64_t s = 0x5EED0001;
  for (int trial = 0; trial < 600; ++trial) {
    const Case t = random_case(s, models, trial);
    const Matrix* c = t.with_c ? &t.c : nullptr;
    const auto want = model_by_steps(*t.model, t.a, t.b, c);
    const auto got = lowbit::gemm::run_model(*t.model, t.a, t.b, c);
    ASSERT_EQ(got, want) << "trial " << trial << ", " << t.model->name << ", " << t.a.format->name << " x "
                         << t.b.format->name << ", " << t.a.rows << "x" << t.a.cols << "x" << t.b.cols << ": "
                         << first_difference(got, want, t.b.cols);
  }
}

TEST(FastDriver, RunPromotedEqualsModelStepLoop) {
  const auto models = unscaled_models();
  std::uint64_t s = 0x5EED0002;
  for (int trial = 0; trial < 300; ++trial) {
    const Case t = random_case(s, models, trial);
    const Matrix* c = t.with_c ? &t.c : nullptr;
    const int block = t.model->group * (1 + static_cast<int>(splitmix(s) % 4));
    const std::uint32_t bits = static_cast<std::uint32_t>(pick(F::f32, s, false));
    const float scale = std::bit_cast<float>(bits);
    const auto want = promoted_by_steps(*t.model, block, t.a, t.b, c, [&](int, int, int) { return scale; });
    const auto got = lowbit::gemm::run_promoted(*t.model, block, t.a, t.b, c, bits);
    ASSERT_EQ(got, want) << "trial " << trial << ", " << t.model->name << " block " << block << ", " << t.a.format->name
                         << " x " << t.b.format->name << ", " << t.a.rows << "x" << t.a.cols << "x" << t.b.cols << ": "
                         << first_difference(got, want, t.b.cols);
  }
}

TEST(FastDriver, RunBlockScaledEqualsModelStepLoop) {
  const auto models = unscaled_models();
  std::uint64_t s = 0x5EED0003;
  for (int trial = 0; trial < 200; ++trial) {
    Case t = random_case(s, models, trial);
    // K long enough for several 128-blocks now and then.
    if (trial % 4 == 0) {
      const int k = 129 + static_cast<int>(splitmix(s) % 200);
      t.a = random_matrix(*t.a.format, t.a.rows, k, s, false);
      t.b = random_matrix(*t.b.format, k, t.b.cols, s, false);
    }
    const Matrix* c = t.with_c ? &t.c : nullptr;
    // B's scales per 128x128 block (the 1d2d kernel) on even trials, per column (bn = 1, the 1d1d kernel) on
    // odd ones.
    const int bn = trial % 2 == 0 ? 128 : 1;
    const int kb = (t.a.cols + 127) / 128, nb = (t.b.cols + bn - 1) / bn;
    Matrix sa{&F::f32, t.a.rows, kb, {}}, sb{&F::f32, kb, nb, {}};
    for (int i = 0; i < t.a.rows * kb; ++i)
      sa.codes.push_back(std::bit_cast<std::uint32_t>(
          std::ldexp(1.0f + static_cast<float>(splitmix(s) % 8) / 8, static_cast<int>(splitmix(s) % 9) - 4)));
    for (int i = 0; i < kb * nb; ++i)
      sb.codes.push_back(std::bit_cast<std::uint32_t>(
          std::ldexp(1.0f + static_cast<float>(splitmix(s) % 8) / 8, static_cast<int>(splitmix(s) % 9) - 4)));
    const auto want = promoted_by_steps(*t.model, 128, t.a, t.b, c, [&](int i, int blk, int j) {
      const float x = std::bit_cast<float>(static_cast<std::uint32_t>(sa.at(i, blk)));
      const float y = std::bit_cast<float>(static_cast<std::uint32_t>(sb.at(blk, j / bn)));
      return x * y;
    });
    const auto got = lowbit::gemm::run_block_scaled(*t.model, t.a, t.b, sa, sb, c, bn);
    ASSERT_EQ(got, want) << "trial " << trial << ", bn " << bn << ", " << t.model->name << ", " << t.a.format->name
                         << " x " << t.b.format->name << ", " << t.a.rows << "x" << t.a.cols << "x" << t.b.cols << ": "
                         << first_difference(got, want, t.b.cols);
  }
}

// Zero products and a tiny C: the largest exponent is C's (or a zero product's, -126 plus the other factor's), from
// -126 up, so the step's scale 2^(F - emax) runs past the largest f32 power of two (the narrow kernel clamps it and
// must leave such a C to model_step) and down into the f32 range again, across F = 13, 24, 25.
TEST(FastDriver, TinyCWithZeroProducts) {
  std::uint64_t s = 0x5EED0006;
  const auto models = unscaled_models();
  for (int trial = 0; trial < 120; ++trial) {
    const TensorCoreModel& model = *models[static_cast<std::size_t>(trial) % models.size()];
    if (!lowbit::gemm::takes_operands(model, F::e4m3)) continue;
    const int m = 1 + static_cast<int>(splitmix(s) % 5), n = 1 + static_cast<int>(splitmix(s) % 70);
    const int k = 1 + static_cast<int>(splitmix(s) % 100);
    Matrix a = random_matrix(F::e4m3, m, k, s, false), b = random_matrix(F::e4m3, k, n, s, false);
    std::fill((trial % 2 ? a : b).codes.begin(), (trial % 2 ? a : b).codes.end(), 0);
    Matrix c{&F::f32, m, n, {}};
    for (int i = 0; i < m * n; ++i) {
      const std::uint64_t field = splitmix(s) % 32;  // exponents -126 (and subnormals) to -96
      c.codes.push_back((splitmix(s) & 1) << 31 | field << 23 | (splitmix(s) & 0x7FFFFF));
    }
    const auto want = model_by_steps(model, a, b, &c);
    const auto got = lowbit::gemm::run_model(model, a, b, &c);
    ASSERT_EQ(got, want) << "trial " << trial << ", " << model.name << ", " << m << "x" << k << "x" << n << ": "
                         << first_difference(got, want, n);
  }
}

// C in any format is its f32 value: the drivers that keep an f32 accumulator (run_promoted, run_block_scaled,
// the f32 orders) and run_model give with C in bf16, f16 or e4m3 exactly what they give with C converted to f32.
TEST(FastDriver, CInAnyFormatIsItsF32Value) {
  std::uint64_t s = 0x5EED0005;
  const Format* formats[] = {&F::bf16, &F::f16, &F::e4m3};
  const auto models = unscaled_models();
  for (int trial = 0; trial < 60; ++trial) {
    const TensorCoreModel& model = *models[static_cast<std::size_t>(trial) % models.size()];
    if (model.output == lowbit::gemm::Output::f16_rne) continue;  // an f16 accumulator: C converts to f16 there
    const Format& fa = lowbit::gemm::defined_on(model, F::bf16) ? F::bf16 : F::e4m3;
    const int m = 1 + static_cast<int>(splitmix(s) % 4), n = 1 + static_cast<int>(splitmix(s) % 70);
    const int k = 1 + static_cast<int>(splitmix(s) % 300);
    const Matrix a = random_matrix(fa, m, k, s, false), b = random_matrix(fa, k, n, s, false);
    const Matrix c = random_matrix(*formats[trial % 3], m, n, s, true);
    Matrix c32{&F::f32, m, n, {}};
    for (std::uint64_t code : c.codes) c32.codes.push_back(lowbit::convert(*c.format, code, F::f32, {}).code);
    const int kb = (k + 127) / 128, nb = (n + 127) / 128;
    const Matrix sa{&F::f32, m, kb, std::vector<std::uint64_t>(static_cast<std::size_t>(m * kb), 0x3FC00000u)};
    const Matrix sb{&F::f32, kb, nb, std::vector<std::uint64_t>(static_cast<std::size_t>(kb * nb), 0x40000000u)};
    const std::string what = std::string(model.name) + ", C " + c.format->name + ", trial " + std::to_string(trial);
    EXPECT_EQ(lowbit::gemm::run_model(model, a, b, &c), lowbit::gemm::run_model(model, a, b, &c32)) << what;
    EXPECT_EQ(lowbit::gemm::run_promoted(model, 4 * model.group, a, b, &c),
              lowbit::gemm::run_promoted(model, 4 * model.group, a, b, &c32))
        << what;
    if (128 % model.group == 0) {
      EXPECT_EQ(lowbit::gemm::run_block_scaled(model, a, b, sa, sb, &c),
                lowbit::gemm::run_block_scaled(model, a, b, sa, sb, &c32))
          << what;
    }
    lowbit::gemm::OrderOptions o;
    o.order = lowbit::nth<lowbit::gemm::Order>(static_cast<std::size_t>(trial));
    EXPECT_EQ(lowbit::gemm::accumulate(a, b, &c, o), lowbit::gemm::accumulate(a, b, &c32, o)) << what;
  }
}

// The exact GEMM takes its integer-valued f64 route without C (OpenBLAS's dgemm, e5m2 and mixed operands split
// into bands, f16 too when its values span few enough binades) and its wide fixed-point route with one; a C of
// +0 changes nothing else, so both must agree on every shape and rounding.
TEST(FastDriver, ExactIntegerRouteEqualsWideRoute) {
  std::uint64_t s = 0x5EED0004;
  const Format* small[] = {&F::e4m3, &F::e5m2, &F::e2m1, &F::e3m2, &F::e2m3, &F::int8, &F::f16};
  for (int trial = 0; trial < 90; ++trial) {
    // Every third trial e5m2 x e5m2 (three band products) or e5m2 x e4m3 (two).
    const Format& fa = trial % 3 == 0 ? F::e5m2 : *small[splitmix(s) % std::size(small)];
    const Format& fb = trial % 3 == 0 ? (trial % 2 ? F::e4m3 : F::e5m2) : *small[splitmix(s) % std::size(small)];
    const int m = 1 + static_cast<int>(splitmix(s) % 11), n = 1 + static_cast<int>(splitmix(s) % 40);
    const int k = static_cast<int>(splitmix(s) % (trial % 4 == 3 ? 3000 : 600));
    Matrix a = random_matrix(fa, m, k, s, false), b = random_matrix(fb, k, n, s, false);
    // f16 over a few binades (exponent fields 12 to 17) now and then, which the integer route takes.
    for (Matrix* x : {&a, &b})
      if (same_format(*x->format, F::f16) && trial % 2)
        for (auto& code : x->codes) code = (code & 0x83FFu) | ((12 + splitmix(s) % 6) << 10);
    const Matrix zero{&F::f32, m, n, std::vector<std::uint64_t>(static_cast<std::size_t>(m) * n, 0)};
    lowbit::gemm::ExactOptions o;
    if (trial % 2) o.policy.rounding = lowbit::Rounding::rtz;
    if (trial % 3 == 0) o.out = &F::bf16;
    const auto got = lowbit::gemm::exact(a, b, nullptr, o), want = lowbit::gemm::exact(a, b, &zero, o);
    ASSERT_EQ(got, want) << "trial " << trial << ", " << fa.name << " x " << fb.name << ", " << m << "x" << k << "x"
                         << n << ": " << first_difference(got, want, n);
  }
}

// The exact GEMM's filtered route (e5m2 x e5m2 and f16 x f16 over their whole ranges: one BLAS product and an error
// bound, the exact sum where the bound leaves the rounding open) on sums built to need the exact sum: each row of A
// repeats its first half in its second, and every third column of B negates its first half in its second, so
// that those outputs cancel exactly (zero, which must be +0), or all but one product when one element is changed
// (tiny results far below the bound, and -0 where a rounding flushes a tiny negative one); under rne into f32 (the
// hardware's conversion) and other roundings and outputs.
TEST(FastDriver, ExactFilterOnCancellingSums) {
  std::uint64_t s = 0x5EED0007;
  for (int trial = 0; trial < 24; ++trial) {
    const Format& f = trial % 3 == 2 ? F::f16 : F::e5m2;
    const int m = 1 + static_cast<int>(splitmix(s) % 6), half = 100 + static_cast<int>(splitmix(s) % 900);
    const int k = 2 * half, n = 6 + static_cast<int>(splitmix(s) % 20);
    Matrix a = random_matrix(f, m, k, s, false), b = random_matrix(f, k, n, s, false);
    const std::uint64_t sign = std::uint64_t{1} << (f.code_bits() - 1);
    for (int i = 0; i < m; ++i)
      for (int q = 0; q < half; ++q) a.codes[static_cast<std::size_t>(i) * k + half + q] = a.at(i, q);
    for (int j = 1; j < n; j += 3)
      for (int q = 0; q < half; ++q) {
        const bool changed = q == 7 && (j / 3 + trial) % 2 == 1;
        b.codes[static_cast<std::size_t>(half + q) * n + j] = changed ? pick(f, s, false) : b.at(q, j) ^ sign;
      }
    const Matrix zero{&F::f32, m, n, std::vector<std::uint64_t>(static_cast<std::size_t>(m) * n, 0)};
    lowbit::gemm::ExactOptions o;
    if (trial % 4 == 1) o.policy.rounding = lowbit::Rounding::rtz;
    if (trial % 4 == 2) o.out = &F::bf16;
    if (trial % 4 == 3) o.policy.subnormals = lowbit::Subnormals::ftz;
    const auto got = lowbit::gemm::exact(a, b, nullptr, o), want = lowbit::gemm::exact(a, b, &zero, o);
    ASSERT_EQ(got, want) << "trial " << trial << ", " << f.name << ", " << m << "x" << k << "x" << n << ": "
                         << first_difference(got, want, n);
  }
}

}  // namespace
