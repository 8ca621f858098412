// Device tier: tensor-core instructions against the bit-accurate models of lowbit/gemm.hpp (docs/semantics.md
// §5).  For each instruction: a layout self-check whose answer does not depend on any model (a fragment or
// descriptor error shows up there, not as a model mismatch), then >= 2^20 dot products from seeded
// generators in several regimes, each compared bit for bit with every model that could describe the
// instruction.  All models' rates are recorded (RecordProperty "<instr>.<model>.cases" / ".mismatches" /
// ".match_rate") before anything is asserted.
//
// What is asserted (the project's claims, docs/semantics.md §5 and gemm.cpp's model table):
//   - every layout self-check passes;
//   - wgmma (sm_90a): fp8 kinds match hopper-fp8, f16 hopper-f16, bf16 hopper-bf16, 100%;
//   - mma.sync on sm_80..sm_89: ampere-* for f16/bf16, ada-fp8 for FP8 (sm_89), 100%;
//   - mma.sync FP8 on sm_90: no FP8 tensor instruction in the SASS (fp8 -> f16 conversions and two f16
//     HMMAs); asserted against hopper-fp8-mma-sync (two hopper-f16 steps and an f32 add of C: the model
//     table's Datapath::f16_pairs), with ada-fp8 and hopper-fp8 recorded too;
//   - mma.sync f16/bf16 on sm_90: at least one of ampere-* / hopper-* must match 100% (the first H200 run:
//     hopper-*), and "<instr>.matching_model" names it;
//   - the NVFP4 emulation (f16 mma.sync, f32 accumulate, tensor scale in the epilogue): the expected output
//     is a model on the exactly dequantized f16 operands followed by one f32 multiply.  The issue defines it
//     by hopper-f16; on Hopper the f16 mma.sync is not known to be the wgmma datapath, so both hopper-f16
//     and ampere-f16 are evaluated and at least one must match 100% ("nvfp4.matching_model").
//   - on other GPUs (sm_100 and later) mma.sync results are reported only.
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "lowbit/convert.hpp"
#include "lowbit/device/mma.hpp"
#include "lowbit/format.hpp"
#include "lowbit/gemm.hpp"
#include "lowbit/scale.hpp"
#include "lowbit/value.hpp"
#include "support.hpp"

namespace {

namespace mma = lowbit::device::mma;
namespace gemm = lowbit::gemm;
namespace fmts = lowbit::formats;
using lowbit::Format;
using mma::Kind;

// ---- operands --------------------------------------------------------------------------------------------

struct Batch {
  int tiles = 0, chain = 1, m = 16, n = 8, k = 32;
  std::vector<std::uint16_t> a, b;  // codes
  std::vector<std::uint32_t> c;     // accumulator codes
  bool regimes = true;              // tile t was filled in Regime(t % Regime::count)
  int kt() const { return chain * k; }
  std::uint64_t a_at(int t, int r, int kk) const {
    return a[(static_cast<std::size_t>(t) * m + r) * kt() + kk];
  }
  std::uint64_t b_at(int t, int kk, int col) const {
    return b[(static_cast<std::size_t>(t) * kt() + kk) * n + col];
  }
  std::uint32_t c_at(int t, int r, int col) const { return c[(static_cast<std::size_t>(t) * m + r) * n + col]; }
};

const Format& format_a(Kind k) {
  switch (k) {
    case Kind::e4m3_e4m3:
    case Kind::e4m3_e5m2: return fmts::e4m3;
    case Kind::e5m2_e5m2:
    case Kind::e5m2_e4m3: return fmts::e5m2;
    case Kind::bf16: return fmts::bf16;
    default: return fmts::f16;
  }
}
const Format& format_b(Kind k) {
  switch (k) {
    case Kind::e4m3_e4m3:
    case Kind::e5m2_e4m3: return fmts::e4m3;
    case Kind::e5m2_e5m2:
    case Kind::e4m3_e5m2: return fmts::e5m2;
    case Kind::bf16: return fmts::bf16;
    default: return fmts::f16;
  }
}
bool f16_accumulator(Kind k) { return k == Kind::f16_f16acc; }

struct Rng {
  std::mt19937_64 g;
  explicit Rng(std::uint64_t seed) : g(seed) {}
  std::uint64_t bits(int n) { return n <= 0 ? 0 : g() & ((std::uint64_t{1} << n) - 1); }
  int range(int lo, int hi) { return lo + static_cast<int>(g() % static_cast<std::uint64_t>(hi - lo + 1)); }
  bool one_in(int n) { return g() % static_cast<std::uint64_t>(n) == 0; }
};

// The largest exponent field of a finite value.
int top_field(const Format& f) {
  return f.inf == lowbit::InfEncoding::ieee ? (1 << f.exponent_bits) - 2 : (1 << f.exponent_bits) - 1;
}

// A finite code from sign, exponent field and mantissa (a NaN pattern becomes the largest finite value).
std::uint64_t code_of(const Format& f, bool neg, int field, std::uint64_t mant) {
  field = std::max(0, std::min(field, top_field(f)));
  const std::uint64_t mag = (static_cast<std::uint64_t>(field) << f.mantissa_bits) | (mant & f.mantissa_mask());
  std::uint64_t c = f.encode(neg, mag);
  if (f.is_nan_code(c) || f.is_inf_code(c)) c = f.encode(neg, mag - 1);
  return c;
}

std::uint64_t random_code(const Format& f, Rng& r, int lo, int hi) {
  return code_of(f, r.one_in(2), r.range(lo, hi), r.bits(f.mantissa_bits));
}

// Exponent-field ranges: the whole format for narrow ones, +-30 binades for the 8-bit-exponent ones (whose
// full range would put most products outside f32).
int uniform_lo(const Format& f) { return f.exponent_bits >= 8 ? f.bias - 30 : 0; }
int uniform_hi(const Format& f) { return f.exponent_bits >= 8 ? f.bias + 30 : top_field(f); }

// An accumulator code of value about 2^e (f32, or f16 for the f16-accumulator form).
std::uint32_t acc_code(bool f16acc, bool neg, int e, Rng& r, int mant_bits = -1) {
  const Format& f = f16acc ? fmts::f16 : fmts::f32;
  const int field = std::max(0, std::min(e + f.bias, top_field(f)));
  std::uint64_t mant = r.bits(f.mantissa_bits);
  if (mant_bits >= 0) mant &= ~lowbit::bits::ones(f.mantissa_bits - mant_bits);
  return static_cast<std::uint32_t>(code_of(f, neg, field, mant));
}

enum class Regime : int { uniform, narrow, wide, cancellation, subnormal, ties, specials, large_c, count };
const char* regime_name(Regime g) {
  static const char* names[] = {"uniform", "narrow", "wide", "cancellation", "subnormal", "ties", "specials", "large_c"};
  return names[static_cast<int>(g)];
}

void fill_tile(Batch& x, int t, const Format& fa, const Format& fb, bool f16acc, Regime regime, Rng& r) {
  const int kt = x.kt();
  auto A = [&](int row, int kk) -> std::uint16_t& {
    return x.a[(static_cast<std::size_t>(t) * x.m + row) * kt + kk];
  };
  auto B = [&](int kk, int col) -> std::uint16_t& {
    return x.b[(static_cast<std::size_t>(t) * kt + kk) * x.n + col];
  };
  auto C = [&](int row, int col) -> std::uint32_t& { return x.c[(static_cast<std::size_t>(t) * x.m + row) * x.n + col]; };
  // Field ranges of this tile and the value exponents of the products they give.
  int alo = uniform_lo(fa), ahi = uniform_hi(fa), blo = uniform_lo(fb), bhi = uniform_hi(fb);
  if (f16acc) {  // keep most f16-accumulator sums finite
    alo = fa.bias - 10, ahi = fa.bias + 5, blo = fb.bias - 10, bhi = fb.bias + 5;
  }
  auto fill_ab = [&](int lo_a, int hi_a, int lo_b, int hi_b) {
    for (int row = 0; row < x.m; ++row)
      for (int kk = 0; kk < kt; ++kk) A(row, kk) = static_cast<std::uint16_t>(random_code(fa, r, lo_a, hi_a));
    for (int kk = 0; kk < kt; ++kk)
      for (int col = 0; col < x.n; ++col) B(kk, col) = static_cast<std::uint16_t>(random_code(fb, r, lo_b, hi_b));
  };
  auto product_exp = [&](int fa_field, int fb_field) { return fa_field - fa.bias + fb_field - fb.bias; };
  auto fill_c = [&](int elo, int ehi, int zero_one_in) {
    for (int row = 0; row < x.m; ++row)
      for (int col = 0; col < x.n; ++col)
        C(row, col) = r.one_in(zero_one_in) ? (r.one_in(2) ? 0u : (f16acc ? 0x8000u : 0x80000000u))
                                            : acc_code(f16acc, r.one_in(2), r.range(elo, ehi), r);
  };
  switch (regime) {
    case Regime::uniform:
      fill_ab(alo, ahi, blo, bhi);
      fill_c(product_exp(alo, blo), product_exp(ahi, bhi), 8);
      break;
    case Regime::narrow:
      fill_ab(fa.bias - 1, fa.bias + 1, fb.bias - 1, fb.bias + 1);
      fill_c(-2, 4, 8);
      break;
    case Regime::wide: {
      const int lo_a = std::max(1, alo), lo_b = std::max(1, blo);
      for (int row = 0; row < x.m; ++row)
        for (int kk = 0; kk < kt; ++kk)
          A(row, kk) = static_cast<std::uint16_t>(r.one_in(2) ? random_code(fa, r, lo_a, lo_a + 2)
                                                              : random_code(fa, r, ahi - 2, ahi));
      for (int kk = 0; kk < kt; ++kk)
        for (int col = 0; col < x.n; ++col)
          B(kk, col) = static_cast<std::uint16_t>(r.one_in(2) ? random_code(fb, r, lo_b, lo_b + 2)
                                                              : random_code(fb, r, bhi - 2, bhi));
      fill_c(product_exp(lo_a, lo_b), product_exp(ahi, bhi), 8);
      break;
    }
    case Regime::cancellation: {
      // Pairs k, k + 1 with a_{k+1} = a_k and b_{k+1} = -b_k cancel exactly; one pair per 16 is left small.
      fill_ab(fa.bias - 3, fa.bias + 3, fb.bias - 3, fb.bias + 3);
      for (int kk = 0; kk + 1 < kt; kk += 2) {
        const bool small = kk % 16 == 14;
        for (int row = 0; row < x.m; ++row) {
          if (small) A(row, kk) = static_cast<std::uint16_t>(random_code(fa, r, std::max(1, fa.bias - 12), fa.bias - 4));
          A(row, kk + 1) = small ? static_cast<std::uint16_t>(random_code(fa, r, std::max(1, fa.bias - 12), fa.bias - 4))
                                 : A(row, kk);
        }
        for (int col = 0; col < x.n; ++col) {
          if (small) {
            B(kk, col) = static_cast<std::uint16_t>(random_code(fb, r, std::max(1, fb.bias - 12), fb.bias - 4));
            B(kk + 1, col) = static_cast<std::uint16_t>(random_code(fb, r, std::max(1, fb.bias - 12), fb.bias - 4));
          } else {
            B(kk + 1, col) = static_cast<std::uint16_t>(B(kk, col) ^ fb.sign_bit());
          }
        }
      }
      fill_c(-12, 2, 2);
      break;
    }
    case Regime::subnormal: {
      for (int row = 0; row < x.m; ++row)
        for (int kk = 0; kk < kt; ++kk)
          A(row, kk) = static_cast<std::uint16_t>(random_code(fa, r, 0, r.one_in(4) ? 3 : 0));
      for (int kk = 0; kk < kt; ++kk)
        for (int col = 0; col < x.n; ++col)
          B(kk, col) = static_cast<std::uint16_t>(random_code(fb, r, 0, r.one_in(4) ? 3 : 0));
      const int e = product_exp(1, 1);
      fill_c(e - 12, e + 2, 2);
      // C at the bottom of the accumulator too (subnormal codes of f32 / f16, and both zeros), and one row of
      // A in 8 all zeros of either sign, so that D is C plus an exact zero (-0 + +0 among them): whether a
      // subnormal C survives and which zero comes out are then the hardware's answer, not the models' alone.
      const Format& acc = f16acc ? fmts::f16 : fmts::f32;
      for (int row = 0; row < x.m; ++row) {
        if (r.one_in(8))
          for (int kk = 0; kk < kt; ++kk) A(row, kk) = static_cast<std::uint16_t>(fa.encode(r.one_in(2), 0));
        for (int col = 0; col < x.n; ++col)
          if (r.one_in(4)) C(row, col) = static_cast<std::uint32_t>(code_of(acc, r.one_in(2), 0, r.bits(acc.mantissa_bits)));
      }
      break;
    }
    case Regime::ties: {
      // Powers of two (and a few 1.5 * 2^e) whose products sit G binades apart, G around the models'
      // truncation points (F = 13 for FP8, 24/25 for f16/bf16): terms land exactly on, just above and just
      // below the last kept bit.
      static const int gaps[] = {12, 13, 14, 15, 16, 22, 23, 24, 25, 26, 27};
      int g = gaps[r.range(0, 10)];
      const int max_gap = (top_field(fa) - 1) + (top_field(fb) - 1);
      if (g > max_gap) g = r.range(12, std::min(16, max_gap));
      const int da = std::min(g / 2, top_field(fa) - 1), db = std::min(g - da, top_field(fb) - 1);
      const int ha = std::min(top_field(fa), std::max(fa.bias, da + 1) + (f16acc ? 0 : r.range(0, 1)));
      const int hb = std::min(top_field(fb), std::max(fb.bias, db + 1));
      auto tie_mant = [&](const Format& f) {
        return r.one_in(4) ? (std::uint64_t{1} << (f.mantissa_bits - 1)) : std::uint64_t{0};
      };
      for (int row = 0; row < x.m; ++row)
        for (int kk = 0; kk < kt; ++kk)
          A(row, kk) = static_cast<std::uint16_t>(code_of(fa, r.one_in(2), r.one_in(2) ? ha : ha - da, tie_mant(fa)));
      for (int kk = 0; kk < kt; ++kk)
        for (int col = 0; col < x.n; ++col)
          B(kk, col) = static_cast<std::uint16_t>(code_of(fb, r.one_in(2), r.one_in(2) ? hb : hb - db, tie_mant(fb)));
      const int e = product_exp(ha, hb);
      for (int row = 0; row < x.m; ++row)
        for (int col = 0; col < x.n; ++col)
          C(row, col) = r.one_in(3) ? 0u : acc_code(f16acc, r.one_in(2), e + r.range(-g - 1, 1), r, 0);
      break;
    }
    case Regime::specials: {
      fill_ab(std::max(0, fa.bias - 4), fa.bias + 4, std::max(0, fb.bias - 4), fb.bias + 4);
      auto special = [&](const Format& f) -> std::uint16_t {
        const bool neg = r.one_in(2);
        if (f.has_inf() && !r.one_in(3)) return static_cast<std::uint16_t>(f.encode(neg, f.inf_magnitude()));
        return static_cast<std::uint16_t>(f.nan_code(neg, std::uint64_t{1} << (f.mantissa_bits - 1)));  // quiet
      };
      for (int row = 0; row < x.m; ++row)
        for (int kk = 0; kk < kt; ++kk)
          if (r.one_in(kt)) A(row, kk) = special(fa);
      for (int kk = 0; kk < kt; ++kk)
        for (int col = 0; col < x.n; ++col)
          if (r.one_in(kt)) B(kk, col) = special(fb);
      fill_c(-4, 8, 8);
      const Format& acc = f16acc ? fmts::f16 : fmts::f32;
      for (int row = 0; row < x.m; ++row)
        for (int col = 0; col < x.n; ++col)
          if (r.one_in(8))
            C(row, col) = static_cast<std::uint32_t>(
                r.one_in(3) ? acc.nan_code(r.one_in(2), std::uint64_t{1} << (acc.mantissa_bits - 1))
                            : acc.encode(r.one_in(2), acc.inf_magnitude()));
      break;
    }
    case Regime::large_c:
      fill_ab(fa.bias - 2, fa.bias + 2, fb.bias - 2, fb.bias + 2);
      if (f16acc) fill_c(-12, 14, 16);
      else if (r.one_in(2)) fill_c(4, 40, 16);
      else fill_c(-40, -8, 16);
      break;
    case Regime::count: break;
  }
}

Batch make_batch(Kind kind, int m, int tiles, int chain, std::uint64_t seed) {
  Batch x;
  x.tiles = tiles;
  x.chain = chain;
  x.m = m;
  x.n = 8;
  x.k = mma::instruction_k(kind);
  x.a.assign(static_cast<std::size_t>(tiles) * m * x.kt(), 0);
  x.b.assign(static_cast<std::size_t>(tiles) * x.kt() * 8, 0);
  x.c.assign(static_cast<std::size_t>(tiles) * m * 8, 0);
  Rng r(seed);
  for (int t = 0; t < tiles; ++t)
    fill_tile(x, t, format_a(kind), format_b(kind), f16_accumulator(kind),
              static_cast<Regime>(t % static_cast<int>(Regime::count)), r);
  return x;
}

// ---- expected values ----------------------------------------------------------------------------------------

template <class F>
void parallel_for(int n, F&& f) {
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::atomic<int> next{0};
  std::vector<std::thread> pool;
  for (unsigned i = 0; i < threads; ++i)
    pool.emplace_back([&] {
      for (int j; (j = next.fetch_add(1)) < n;) f(j);
    });
  for (auto& th : pool) th.join();
}

// The model's answer for every output: C, then model_step over each group of K in order, each step's
// rounded result fed back as C (the definition of run_model, written out per dot product).
std::vector<std::uint32_t> model_outputs(const gemm::TensorCoreModel& model, const Format& fa, const Format& fb,
                                         const Batch& x) {
  std::vector<std::uint32_t> out(x.c.size());
  const int kt = x.kt(), g = model.group;
  parallel_for(x.tiles, [&](int t) {
    std::vector<std::uint64_t> ra(static_cast<std::size_t>(g)), rb(static_cast<std::size_t>(g));
    for (int row = 0; row < x.m; ++row)
      for (int col = 0; col < x.n; ++col) {
        std::uint32_t acc = x.c_at(t, row, col);
        for (int k0 = 0; k0 < kt; k0 += g) {
          for (int j = 0; j < g; ++j) {
            ra[static_cast<std::size_t>(j)] = x.a_at(t, row, k0 + j);
            rb[static_cast<std::size_t>(j)] = x.b_at(t, k0 + j, col);
          }
          acc = gemm::model_step(model, fa, ra, fb, rb, acc);
        }
        out[(static_cast<std::size_t>(t) * x.m + row) * x.n + col] = acc;
      }
  });
  return out;
}

constexpr int kPrint = 5;  // mismatches printed per instruction and model (and per layout self-check)

// ---- comparison and reporting ---------------------------------------------------------------------------------

bool is_nan(bool f16, std::uint32_t v) {
  return f16 ? ((v & 0x7C00u) == 0x7C00u && (v & 0x3FFu) != 0) : ((v & 0x7F800000u) == 0x7F800000u && (v & 0x7FFFFFu) != 0);
}

struct Tally {
  long long cases = 0, mismatches = 0, nan_payload = 0;
  long long by_regime[static_cast<int>(Regime::count)] = {};  // mismatches per operand regime
  double rate() const { return cases ? 1.0 - static_cast<double>(mismatches) / static_cast<double>(cases) : 0.0; }
};

std::string hex(std::uint64_t v, int digits) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%0*llx", digits, static_cast<unsigned long long>(v));
  return buf;
}

// Compares, tallies, and prints the first `print` mismatches with their operands.
void compare(const std::string& label, const Batch& x, bool f16acc, const std::vector<std::uint32_t>& expected,
             const std::vector<std::uint32_t>& actual, Tally& tally, int print) {
  int printed = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    ++tally.cases;
    const std::uint32_t e = expected[i], a = actual[i];
    if (e == a) continue;
    if (is_nan(f16acc, e) && is_nan(f16acc, a)) {
      ++tally.nan_payload;
      continue;
    }
    ++tally.mismatches;
    const int t = static_cast<int>(i / static_cast<std::size_t>(x.m * x.n));
    if (x.regimes) ++tally.by_regime[t % static_cast<int>(Regime::count)];
    if (printed++ >= print) continue;
    const int row = static_cast<int>(i / static_cast<std::size_t>(x.n)) % x.m, col = static_cast<int>(i % static_cast<std::size_t>(x.n));
    std::ostringstream s;
    s << label << " mismatch: tile " << t << " ("
      << (x.regimes ? regime_name(static_cast<Regime>(t % static_cast<int>(Regime::count))) : "see test") << ", chain "
      << x.chain << ") row " << row << " col " << col << "\n  A:";
    const int digits = x.k == 32 ? 2 : 4;
    for (int kk = 0; kk < x.kt(); ++kk) s << " " << hex(x.a_at(t, row, kk), digits);
    s << "\n  B:";
    for (int kk = 0; kk < x.kt(); ++kk) s << " " << hex(x.b_at(t, kk, col), digits);
    s << "\n  C: " << hex(x.c_at(t, row, col), f16acc ? 4 : 8) << "  expected " << hex(e, f16acc ? 4 : 8) << "  actual "
      << hex(a, f16acc ? 4 : 8) << "\n";
    std::fputs(s.str().c_str(), stdout);
  }
}

void record(const std::string& instr, const std::string& model, const Tally& t) {
  ::testing::Test::RecordProperty(instr + "." + model + ".cases", std::to_string(t.cases));
  ::testing::Test::RecordProperty(instr + "." + model + ".mismatches", std::to_string(t.mismatches));
  char rate[32];
  std::snprintf(rate, sizeof rate, "%.9f", t.rate());
  ::testing::Test::RecordProperty(instr + "." + model + ".match_rate", rate);
  if (t.nan_payload) ::testing::Test::RecordProperty(instr + "." + model + ".nan_payload_differs", std::to_string(t.nan_payload));
  std::string regimes;
  for (int g = 0; g < static_cast<int>(Regime::count); ++g)
    if (t.by_regime[g]) {
      ::testing::Test::RecordProperty(instr + "." + model + ".mismatches." + regime_name(static_cast<Regime>(g)),
                                      std::to_string(t.by_regime[g]));
      regimes += std::string(regimes.empty() ? "" : ", ") + regime_name(static_cast<Regime>(g)) + " " +
                 std::to_string(t.by_regime[g]);
    }
  std::printf("%-28s %-20s cases %9lld  mismatches %9lld  match %.6f%s%s%s\n", instr.c_str(), model.c_str(), t.cases,
              t.mismatches, t.rate(), t.nan_payload ? "  (NaN payloads differ)" : "", regimes.empty() ? "" : "  by regime: ",
              regimes.c_str());
}

using Runner = std::function<std::vector<std::uint32_t>(const Batch&)>;

// ---- the model-independent layout self-check ------------------------------------------------------------------
// Even tiles: A one-hot rows (1.0 at column (5 row + t) mod Ktot, +0 elsewhere), B distinct finite values per
// column, C = +0: D = the selected B value exactly, under every model.  Odd tiles: A = +0, B finite, C with at
// most 10 significant bits: D = C exactly.  A fragment, register or descriptor error selects the wrong entry.
Batch layout_batch(Kind kind, int m, int tiles, int chain, std::vector<std::uint32_t>& want) {
  const Format& fa = format_a(kind);
  const Format& fb = format_b(kind);
  const bool f16acc = f16_accumulator(kind);
  Batch x;
  x.tiles = tiles;
  x.chain = chain;
  x.m = m;
  x.n = 8;
  x.k = mma::instruction_k(kind);
  const int kt = x.kt();
  x.a.assign(static_cast<std::size_t>(tiles) * m * kt, 0);
  x.b.assign(static_cast<std::size_t>(tiles) * kt * 8, 0);
  x.c.assign(static_cast<std::size_t>(tiles) * m * 8, 0);
  want.assign(x.c.size(), 0);
  x.regimes = false;
  Rng r(0x5e1fc4ecull + static_cast<std::uint64_t>(kind));
  const std::uint64_t one = code_of(fa, false, fa.bias, 0);
  for (int t = 0; t < tiles; ++t)
    for (int kk = 0; kk < kt; ++kk)
      for (int col = 0; col < 8; ++col) {
        // Distinct magnitudes along K for each column: exponent field and mantissa from (kk + 3 col) mod Ktot.
        const int v = (kk + 3 * col + t) % kt;
        const int field = fb.bias - 4 + v / (1 << fb.mantissa_bits);
        x.b[(static_cast<std::size_t>(t) * kt + kk) * 8 + col] = static_cast<std::uint16_t>(
            code_of(fb, ((kk + col) & 1) != 0, field, static_cast<std::uint64_t>(v) & fb.mantissa_mask()));
      }
  for (int t = 0; t < tiles; ++t)
    for (int row = 0; row < m; ++row) {
      const std::size_t base = (static_cast<std::size_t>(t) * m + row) * 8;
      if (t % 2 == 0) {
        const int sel = (5 * row + t) % kt;
        x.a[(static_cast<std::size_t>(t) * m + row) * kt + sel] = static_cast<std::uint16_t>(one);
        for (int col = 0; col < 8; ++col) {
          const std::uint64_t bc = x.b[(static_cast<std::size_t>(t) * kt + sel) * 8 + col];
          if (f16acc) {
            want[base + col] = static_cast<std::uint32_t>(bc);  // f16 x 1.0 in an f16 accumulator: itself
          } else {
            const lowbit::Unpacked u = lowbit::unpack(fb, bc);
            const float v = std::ldexp(static_cast<float>(u.significand), u.exponent);
            want[base + col] = std::bit_cast<std::uint32_t>(u.negative ? -v : v);
          }
        }
      } else {
        for (int col = 0; col < 8; ++col) {
          const std::uint32_t cc = acc_code(f16acc, r.one_in(2), r.range(-6, 6), r, f16acc ? -1 : 10);
          x.c[base + col] = cc;
          want[base + col] = cc;
        }
      }
    }
  return x;
}

// Runs the self-check; returns the number of wrong outputs and prints the first few.
long long layout_check(const std::string& instr, Kind kind, int m, const Runner& run) {
  std::vector<std::uint32_t> want;
  const Batch x = layout_batch(kind, m, 64, 2, want);
  const std::vector<std::uint32_t> got = run(x);
  Tally t;
  compare(instr + " layout self-check", x, f16_accumulator(kind), want, got, t, kPrint);
  return t.mismatches;
}

constexpr const char* hopper_fp8_mma_sync = "hopper-fp8-mma-sync";  // FP8 mma.sync on Hopper

struct Candidate {
  const char* model;
  bool print = true;  // print its mismatches
};

// Generates >= 2^20 dot products (two launches: chain 1 and chain 2), runs them, compares with each model,
// records everything, and returns the tallies in the order of `models`.
std::vector<Tally> validate(const std::string& instr, Kind kind, int m, const Runner& run,
                            const std::vector<Candidate>& models) {
  const int dots_per_tile = m * 8;
  const int tiles1 = (3 << 18) / dots_per_tile, tiles2 = (1 << 18) / dots_per_tile;
  std::vector<Tally> tallies(models.size());
  std::uint64_t seed = 0x6d6d61ull * 1000003ull + static_cast<std::uint64_t>(kind) * 7919ull + static_cast<std::uint64_t>(m);
  for (const auto& [tiles, chain] : {std::pair{tiles1, 1}, std::pair{tiles2, 2}}) {
    const Batch x = make_batch(kind, m, tiles, chain, seed++);
    const std::vector<std::uint32_t> got = run(x);
    for (std::size_t i = 0; i < models.size(); ++i) {
      const gemm::TensorCoreModel* model = gemm::find_model(models[i].model);
      if (!model) throw std::runtime_error(std::string("no model ") + models[i].model);
      const std::vector<std::uint32_t> want = model_outputs(*model, format_a(kind), format_b(kind), x);
      compare(instr + " vs " + models[i].model, x, f16_accumulator(kind), want, got, tallies[i],
              models[i].print ? kPrint - static_cast<int>(std::min<long long>(kPrint, tallies[i].mismatches)) : 0);
    }
  }
  for (std::size_t i = 0; i < models.size(); ++i) record(instr, models[i].model, tallies[i]);
  return tallies;
}

int capability() { return lowbit::device::testing::gpu().info.capability(); }

// A kind's name as a test-name suffix ("e4m3.e4m3" -> "e4m3_e4m3").
std::string test_name(Kind k) {
  std::string s = mma::kind_name(k);
  for (char& ch : s)
    if (ch == '.') ch = '_';
  return s;
}

// ---- mma.sync -------------------------------------------------------------------------------------------------

struct MmaSyncCase {
  Kind kind;
  const char* ampere_or_ada;  // the pre-Hopper model
  const char* hopper;         // the wgmma-style model
};

class MmaSync : public ::testing::TestWithParam<MmaSyncCase> {};

TEST_P(MmaSync, MatchesModels) {
  const MmaSyncCase p = GetParam();
  LOWBIT_REQUIRE_GPU(mma::is_fp8(p.kind) ? 89 : 80);
  const std::string instr = std::string("mma.sync.") + mma::kind_name(p.kind);
  const Runner run = [&](const Batch& x) { return mma::run_mma_sync(p.kind, x.tiles, x.chain, x.a, x.b, x.c); };
  const long long layout = layout_check(instr, p.kind, 16, run);
  RecordProperty(instr + ".layout_check.mismatches", std::to_string(layout));
  EXPECT_EQ(layout, 0) << instr << ": the layout self-check failed (fragment maps), model numbers below are moot";
  const int cap = capability();
  std::vector<Candidate> candidates{{p.ampere_or_ada}, {p.hopper}};
  if (mma::is_fp8(p.kind)) candidates.push_back({hopper_fp8_mma_sync});
  const auto t = validate(instr, p.kind, 16, run, candidates);
  if (cap < 90) {
    EXPECT_EQ(t[0].mismatches, 0) << instr << " on sm_" << cap << " should be " << p.ampere_or_ada;
  } else if (cap == 90 && mma::is_fp8(p.kind)) {
    // The claim (gemm.cpp's model table, Datapath::f16_pairs): fp8 -> f16, two hopper-f16 steps, C added in f32.
    const char* match = t[2].mismatches == 0 ? hopper_fp8_mma_sync
                        : t[0].mismatches == 0 ? p.ampere_or_ada
                        : t[1].mismatches == 0 ? p.hopper : "none";
    RecordProperty(instr + ".matching_model", match);
    std::printf("%s on sm_90 matches: %s\n", instr.c_str(), match);
    EXPECT_EQ(t[2].mismatches, 0) << instr << " on sm_90 should be " << hopper_fp8_mma_sync;
    // NaN bits too: the model's NaN is the canonical 0x7FFFFFFF of the tensor core and of the GPU's FADD (the
    // first H200 run compared an x86 add here and counted its payloads as "NaN payloads differ").
    EXPECT_EQ(t[2].nan_payload, 0) << instr << ": NaN results whose bits differ from " << hopper_fp8_mma_sync;
  } else if (cap == 90) {
    const char* match = t[0].mismatches == 0 ? p.ampere_or_ada : t[1].mismatches == 0 ? p.hopper : "none";
    RecordProperty(instr + ".matching_model", match);
    std::printf("%s on sm_90 matches: %s\n", instr.c_str(), match);
    EXPECT_TRUE(t[0].mismatches == 0 || t[1].mismatches == 0)
        << instr << " on sm_90: neither " << p.ampere_or_ada << " nor " << p.hopper << " matches";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, MmaSync,
    ::testing::Values(MmaSyncCase{Kind::e4m3_e4m3, "ada-fp8", "hopper-fp8"},
                      MmaSyncCase{Kind::e5m2_e5m2, "ada-fp8", "hopper-fp8"},
                      MmaSyncCase{Kind::e4m3_e5m2, "ada-fp8", "hopper-fp8"},
                      MmaSyncCase{Kind::e5m2_e4m3, "ada-fp8", "hopper-fp8"},
                      MmaSyncCase{Kind::f16, "ampere-f16", "hopper-f16"},
                      MmaSyncCase{Kind::bf16, "ampere-bf16", "hopper-bf16"},
                      MmaSyncCase{Kind::f16_f16acc, "ampere-f16-f16acc", "hopper-f16-f16acc"}),
    [](const ::testing::TestParamInfo<MmaSyncCase>& i) { return test_name(i.param.kind); });

// ---- wgmma ----------------------------------------------------------------------------------------------------

struct WgmmaCase {
  Kind kind;
  const char* claimed;
  const char* other;
};

class Wgmma : public ::testing::TestWithParam<WgmmaCase> {};

TEST_P(Wgmma, MatchesModels) {
  const WgmmaCase p = GetParam();
  LOWBIT_REQUIRE_GPU(90);
  if (capability() != 90) GTEST_SKIP() << "the wgmma probe is built for sm_90a only";
  const std::string instr = std::string("wgmma.") + mma::kind_name(p.kind);
  auto runner = [&](mma::Descriptors d) -> Runner {
    return [&, d](const Batch& x) { return mma::run_wgmma(p.kind, x.tiles, x.chain, x.a, x.b, x.c, d); };
  };
  // The descriptor reading of the PTX ISA first; if its self-check fails, the swapped offsets, so that a
  // misread descriptor is told apart from a numerics difference (both outcomes recorded).
  const long long isa = layout_check(instr + " (ISA descriptors)", p.kind, 64, runner(mma::Descriptors::isa));
  RecordProperty(instr + ".layout_check.mismatches", std::to_string(isa));
  mma::Descriptors use = mma::Descriptors::isa;
  if (isa != 0) {
    const long long swapped =
        layout_check(instr + " (swapped descriptors)", p.kind, 64, runner(mma::Descriptors::swapped));
    RecordProperty(instr + ".layout_check_swapped.mismatches", std::to_string(swapped));
    if (swapped == 0) use = mma::Descriptors::swapped;
  }
  EXPECT_EQ(isa, 0) << instr << ": the layout self-check failed with the ISA's descriptor offsets";
  const auto t = validate(instr, p.kind, 64, runner(use), {{p.claimed}, {p.other, false}});
  EXPECT_EQ(t[0].mismatches, 0) << instr << " should be " << p.claimed;
}

INSTANTIATE_TEST_SUITE_P(Kinds, Wgmma,
                         ::testing::Values(WgmmaCase{Kind::e4m3_e4m3, "hopper-fp8", "ada-fp8"},
                                           WgmmaCase{Kind::e5m2_e5m2, "hopper-fp8", "ada-fp8"},
                                           WgmmaCase{Kind::e4m3_e5m2, "hopper-fp8", "ada-fp8"},
                                           WgmmaCase{Kind::f16, "hopper-f16", "ampere-f16"},
                                           WgmmaCase{Kind::bf16, "hopper-bf16", "ampere-bf16"}),
                         [](const ::testing::TestParamInfo<WgmmaCase>& i) { return test_name(i.param.kind); });

// ---- NVFP4 emulated on f16 tensor cores ---------------------------------------------------------------------

double e2m1_value(std::uint8_t code) {
  const lowbit::Unpacked u = lowbit::unpack(fmts::e2m1, code);
  if (u.cls != lowbit::ValueClass::finite) return u.negative ? -0.0 : 0.0;
  const double v = std::ldexp(static_cast<double>(u.significand), u.exponent);
  return u.negative ? -v : v;
}
double ue4m3_value(std::uint8_t code) {
  const lowbit::Unpacked u = lowbit::unpack(fmts::ue4m3, code);
  return u.cls == lowbit::ValueClass::finite ? std::ldexp(static_cast<double>(u.significand), u.exponent) : 0.0;
}
// The exact f16 code of value(code) * value(scale) (the reference's conversion from f64; exact, so any
// rounding rule gives it).
std::uint16_t dequantized(std::uint8_t code, std::uint8_t scale) {
  const double v = e2m1_value(code) * ue4m3_value(scale);
  const lowbit::Result res = lowbit::convert(fmts::f64, std::bit_cast<std::uint64_t>(v), fmts::f16, lowbit::Policy{});
  EXPECT_EQ(res.flags & lowbit::flag::inexact, 0) << "dequantization inexact for " << int(code) << " x " << int(scale);
  return static_cast<std::uint16_t>(res.code);
}

TEST(Nvfp4Emulated, MatchesModelOnDequantizedOperands) {
  LOWBIT_REQUIRE_GPU(80);
  const int tiles = 2048, k = 32, chain = k / 16;  // 4 launches x 2048 tiles x 128 outputs = 2^20 dot products
  const std::uint32_t tensor_scales[] = {0x3F800000u, 0x3DCCCCCDu /* 0.1f */, 0x0C000000u /* 2^-103 */,
                                         0x4B3A1F2Du};
  Tally tally[2];
  const char* names[2] = {"hopper-f16", "ampere-f16"};
  std::uint64_t seed = 0x4e5646344ull;
  for (std::uint32_t ts : tensor_scales) {
    Rng r(seed++);
    std::vector<std::uint8_t> a(static_cast<std::size_t>(tiles) * 16 * k), sa(static_cast<std::size_t>(tiles) * 16 * chain),
        b(static_cast<std::size_t>(tiles) * k * 8), sb(static_cast<std::size_t>(tiles) * chain * 8);
    std::vector<std::uint32_t> c(static_cast<std::size_t>(tiles) * 128);
    for (auto& v : a) v = static_cast<std::uint8_t>(r.bits(4));
    for (auto& v : b) v = static_cast<std::uint8_t>(r.bits(4));
    // Scale regimes per tile: any finite code, around 1, the extremes (subnormal and near 448), zero.
    auto scale = [&](int t) -> std::uint8_t {
      switch (t % 4) {
        case 0: return static_cast<std::uint8_t>(r.range(0, 0x7E));
        case 1: return static_cast<std::uint8_t>(r.range(0x30, 0x40));
        case 2: return static_cast<std::uint8_t>(r.one_in(2) ? r.range(0, 7) : r.range(0x70, 0x7E));
        default: return static_cast<std::uint8_t>(r.one_in(4) ? 0 : r.range(0x20, 0x50));
      }
    };
    for (int t = 0; t < tiles; ++t) {
      for (int i = 0; i < 16 * chain; ++i) sa[static_cast<std::size_t>(t) * 16 * chain + i] = scale(t);
      for (int i = 0; i < 8 * chain; ++i) sb[static_cast<std::size_t>(t) * 8 * chain + i] = scale(t);
      for (int i = 0; i < 128; ++i)
        c[static_cast<std::size_t>(t) * 128 + i] = r.one_in(4) ? 0u : acc_code(false, r.one_in(2), r.range(-12, 14), r);
    }
    const std::vector<std::uint32_t> got = mma::run_nvfp4_emulated(tiles, k, a, sa, b, sb, c, ts);
    // The same operands as an f16 Batch: A[t][row][kk] = a * sa[row][kk / 16], B[t][kk][col] = b * sb[kk / 16][col].
    Batch x;
    x.tiles = tiles;
    x.chain = chain;
    x.m = 16;
    x.n = 8;
    x.k = 16;
    x.regimes = false;  // scale regime t % 4; A and B below are the dequantized f16 operands
    x.a.resize(a.size());
    x.b.resize(b.size());
    x.c = c;
    for (int t = 0; t < tiles; ++t) {
      for (int row = 0; row < 16; ++row)
        for (int kk = 0; kk < k; ++kk) {
          const std::size_t i = (static_cast<std::size_t>(t) * 16 + row) * k + kk;
          x.a[i] = dequantized(a[i], sa[(static_cast<std::size_t>(t) * 16 + row) * chain + kk / 16]);
        }
      for (int kk = 0; kk < k; ++kk)
        for (int col = 0; col < 8; ++col) {
          const std::size_t i = (static_cast<std::size_t>(t) * k + kk) * 8 + col;
          x.b[i] = dequantized(b[i], sb[(static_cast<std::size_t>(t) * chain + kk / 16) * 8 + col]);
        }
    }
    for (int mi = 0; mi < 2; ++mi) {
      std::vector<std::uint32_t> want = model_outputs(*gemm::find_model(names[mi]), fmts::f16, fmts::f16, x);
      for (auto& w : want)  // the epilogue: one f32 multiply, round to nearest even
        w = std::bit_cast<std::uint32_t>(std::bit_cast<float>(w) * std::bit_cast<float>(ts));
      compare(std::string("nvfp4 emulated vs ") + names[mi] + " (tensor scale " + hex(ts, 8) + ")", x, false, want,
              got, tally[mi], static_cast<int>(5 - std::min<long long>(5, tally[mi].mismatches)));
    }
  }
  for (int mi = 0; mi < 2; ++mi) record("nvfp4_emulated", names[mi], tally[mi]);
  const char* match = tally[0].mismatches == 0 ? names[0] : tally[1].mismatches == 0 ? names[1] : "none";
  RecordProperty("nvfp4_emulated.matching_model", match);
  std::printf("nvfp4 emulation matches: %s\n", match);
  EXPECT_TRUE(tally[0].mismatches == 0 || tally[1].mismatches == 0)
      << "the NVFP4 emulation matches neither hopper-f16 nor ampere-f16 on the dequantized operands";
}

// ---- directed: a negative sum below f32's smallest subnormal ------------------------------------------------
// bf16 products reach 2^-266, but the random regimes never put a nonzero sum below 2^-149 (f32's smallest
// subnormal) before the accumulator.  Such a sum truncates to zero, and the sign of that zero is where MMA-Sim
// (+0) and lowbit's hopper-bf16 model (-0 for a negative sum) disagree.  Each case below is one dot product
// in column 0 of one tile (B[k][0] = 2^-75 for k = 0, 1, else 0; the other columns have B = 0, so D = C):
// the test prints the sign the hardware gives beside the model's and asserts that they are equal (when they
// are not, the model's rule is what must change, not this test).
struct ZeroSignCase {
  const char* what;
  std::uint16_t a0, a1;  // A[row][0], A[row][1] (bf16 codes)
  std::uint32_t c;       // C[row][0] (f32 code)
};
constexpr std::uint16_t k_bf16_2m75 = 0x1A00, k_bf16_neg_2m75 = 0x9A00, k_bf16_2m76 = 0x1980;  // 2^-75, -2^-75, 2^-76
constexpr ZeroSignCase k_zero_sign_cases[] = {
    {"-2^-75 x 2^-75 + (+0) = -2^-150", k_bf16_neg_2m75, 0, 0x00000000u},
    {"-2^-75 x 2^-75 + (-0) = -2^-150", k_bf16_neg_2m75, 0, 0x80000000u},
    {"+2^-75 x 2^-75 + (+0) = +2^-150", k_bf16_2m75, 0, 0x00000000u},
    {"+2^-75 x 2^-75 + (-0) = +2^-150", k_bf16_2m75, 0, 0x80000000u},
    {"-2^-75 x 2^-75 + 2^-76 x 2^-75 + (+0) = -2^-151", k_bf16_neg_2m75, k_bf16_2m76, 0x00000000u},
    {"-2^-75 x 2^-75 - 2^-75 x 2^-75 + (+0) = -2^-149 (representable)", k_bf16_neg_2m75, k_bf16_neg_2m75, 0x00000000u},
};

const char* zero_name(std::uint32_t v) {
  return v == 0x00000000u ? "+0" : v == 0x80000000u ? "-0" : "nonzero";
}

Batch zero_sign_batch(int m) {
  Batch x;
  x.tiles = 1;
  x.chain = 1;
  x.m = m;
  x.n = 8;
  x.k = 16;
  x.regimes = false;
  x.a.assign(static_cast<std::size_t>(m) * 16, 0);
  x.b.assign(16 * 8, 0);
  x.c.assign(static_cast<std::size_t>(m) * 8, 0);
  x.b[0 * 8 + 0] = k_bf16_2m75;
  x.b[1 * 8 + 0] = k_bf16_2m75;
  int row = 0;
  for (const ZeroSignCase& z : k_zero_sign_cases) {
    x.a[static_cast<std::size_t>(row) * 16 + 0] = z.a0;
    x.a[static_cast<std::size_t>(row) * 16 + 1] = z.a1;
    x.c[static_cast<std::size_t>(row) * 8 + 0] = z.c;
    ++row;
  }
  return x;
}

void zero_sign(const std::string& instr, int m, const Runner& run) {
  const Batch x = zero_sign_batch(m);
  const std::vector<std::uint32_t> got = run(x);
  const std::vector<std::uint32_t> model = model_outputs(*gemm::find_model("hopper-bf16"), fmts::bf16, fmts::bf16, x);
  int row = 0, differ = 0;
  for (const ZeroSignCase& z : k_zero_sign_cases) {
    const std::size_t i = static_cast<std::size_t>(row) * 8;
    std::printf("[zero sign] %-22s %-62s hardware %08x (%s), hopper-bf16 model %08x (%s)%s\n", instr.c_str(), z.what,
                got[i], zero_name(got[i]), model[i], zero_name(model[i]), got[i] == model[i] ? "" : "  DIFFER");
    ::testing::Test::RecordProperty(instr + ".zero_sign." + std::to_string(row) + ".hardware", hex(got[i], 8));
    ::testing::Test::RecordProperty(instr + ".zero_sign." + std::to_string(row) + ".model", hex(model[i], 8));
    differ += got[i] != model[i];
    ++row;
  }
  // The rows below the cases: A = +0 and C = +0, so D = +0 under every model.
  for (std::size_t i = std::size(k_zero_sign_cases) * 8; i < got.size(); ++i)
    EXPECT_EQ(got[i], 0u) << instr << " output " << i;
  EXPECT_EQ(differ, 0) << instr << ": the sign of a truncated tiny sum differs from the hopper-bf16 model (see the "
                       << "[zero sign] lines: the model's rule is what must follow the hardware)";
}

TEST(TensorCoreZeroSign, MmaSyncBf16) {
  LOWBIT_REQUIRE_GPU(80);
  zero_sign("mma.sync.bf16", 16,
            [](const Batch& x) { return mma::run_mma_sync(Kind::bf16, x.tiles, x.chain, x.a, x.b, x.c); });
}

TEST(TensorCoreZeroSign, WgmmaBf16) {
  LOWBIT_REQUIRE_GPU(90);
  if (capability() != 90) GTEST_SKIP() << "the wgmma probe is built for sm_90a only";
  zero_sign("wgmma.bf16", 64, [](const Batch& x) {
    return mma::run_wgmma(Kind::bf16, x.tiles, x.chain, x.a, x.b, x.c, mma::Descriptors::isa);
  });
}

// ---- TE's random Hadamard transform on the tensor core ---------------------------------------------------

// Transformer Engine's RHT (hadamard_transform_utils.cuh mma_m16_n16_k16_b16_b16_b16_noacc) is one bf16 MMA of
// K = 16 per 16-element group, from a zero accumulator, rounded to nearest-even bf16 (cvt.rn.bf16x2.f32).
// lowbit's Hadamard::te_bf16 (scale::hadamard_rows_te_bf16) models it with the hopper-bf16 step.  Here the
// hardware's mma.sync m16n8k16 bf16 computes the same products: A = 16 groups of the input, B = TE's matrix
// diag(s) H / 4 in bf16 (read from the library, as the transform of each unit vector: exact), in two halves of
// 8 columns, C = +0; each f32 result rounded to bf16 on the host must equal the library's transform, bit for bit.
TEST(TeRht, MmaSyncEqualsTheTeBf16Transform) {
  LOWBIT_REQUIRE_GPU(80);
  namespace S = lowbit::scale;
  const lowbit::Policy rn{};  // rne: cvt.rn
  auto to_bf16 = [&](float v) {
    return static_cast<std::uint16_t>(lowbit::convert(fmts::f32, std::bit_cast<std::uint32_t>(v), fmts::bf16, rn).code);
  };
  S::Tensor unit{16, 16, std::vector<float>(256, 0.0f)};
  for (int i = 0; i < 16; ++i) unit.data[static_cast<std::size_t>(i) * 17] = 1.0f;
  const S::Tensor m = S::hadamard_rows_te_bf16(unit);  // row i: e_i times the matrix
  // Inputs: random bf16 values over a wide range (every group's sums round), 64 tiles of 16 groups.
  const int tiles = 64, rows = 16 * tiles;
  std::mt19937_64 g(20261201);
  S::Tensor x{rows, 16, std::vector<float>(static_cast<std::size_t>(rows) * 16)};
  for (float& v : x.data) {
    const auto code = static_cast<std::uint16_t>(g() & 0xFFFF);
    const float f = std::bit_cast<float>(static_cast<std::uint32_t>(code) << 16);
    v = std::isfinite(f) && std::fabs(f) < 1e30f ? f : 1.0f;
  }
  const S::Tensor want = S::hadamard_rows_te_bf16(x);
  std::vector<std::uint16_t> a, b;
  for (int t = 0; t < tiles; ++t)
    for (int half = 0; half < 2; ++half) {
      for (int r = 0; r < 16; ++r)
        for (int k = 0; k < 16; ++k) a.push_back(to_bf16(x.data[static_cast<std::size_t>(t * 16 + r) * 16 + k]));
      for (int k = 0; k < 16; ++k)
        for (int n = 0; n < 8; ++n) b.push_back(to_bf16(m.data[static_cast<std::size_t>(k) * 16 + half * 8 + n]));
    }
  const std::vector<std::uint32_t> c(static_cast<std::size_t>(2 * tiles) * 16 * 8, 0u);
  const std::vector<std::uint32_t> d = mma::run_mma_sync(Kind::bf16, 2 * tiles, 1, a, b, c);
  long long differ = 0;
  for (int t = 0; t < tiles; ++t)
    for (int half = 0; half < 2; ++half)
      for (int r = 0; r < 16; ++r)
        for (int n = 0; n < 8; ++n) {
          const float got = std::bit_cast<float>(d[(static_cast<std::size_t>(t * 2 + half) * 16 + r) * 8 + n]);
          const float exp = want.data[static_cast<std::size_t>(t * 16 + r) * 16 + half * 8 + n];
          if (to_bf16(got) != to_bf16(exp) && differ++ < 5)
            std::printf("[te rht] group %d, output %d: mma.sync 0x%04x, te-bf16 model 0x%04x\n", t * 16 + r,
                        half * 8 + n, to_bf16(got), to_bf16(exp));
        }
  RecordProperty("te_rht.groups", std::to_string(rows));
  RecordProperty("te_rht.mismatches", std::to_string(differ));
  EXPECT_EQ(differ, 0) << "mma.sync bf16 and lowbit's te-bf16 Hadamard differ";
}

// tf32: the probes have no tf32 instruction (mma.sync m16n8k8 .tf32, wgmma m64nNk8 .tf32) yet; the same
// directed cases belong there once one exists.

}  // namespace
