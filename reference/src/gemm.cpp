#include "lowbit/gemm.hpp"

#include <gmpxx.h>
#include <tbb/blocked_range.h>
#include <tbb/blocked_range2d.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_reduce.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "lowbit/convert.hpp"
#include "lowbit/exact.hpp"
#include "src/huge_pages.hpp"
#include "src/integer_gemm.hpp"

namespace lowbit::gemm {

namespace {

// 128-bit integers (a GCC/Clang extension) hold a group's aligned sum.
__extension__ typedef __int128 i128;
__extension__ typedef unsigned __int128 u128;

constexpr Policy rne_policy{};

float to_float(const Format& f, std::uint64_t code) {
  const Result r = convert(f, code, formats::f32, rne_policy);
  return std::bit_cast<float>(static_cast<std::uint32_t>(r.code));
}
std::uint32_t float_bits(float x) { return std::bit_cast<std::uint32_t>(x); }

// Element (i, j) of C as an f32: the code itself when C is f32 (NaN payloads and all), else its conversion.
float c_value(const Matrix& c, int i, int j) {
  const std::uint64_t code = c.at(i, j);
  if (same_format(*c.format, formats::f32)) return std::bit_cast<float>(static_cast<std::uint32_t>(code));
  return to_float(*c.format, code);
}

// An f32 result of GPU arithmetic (FADD / FFMA / FMUL): a NaN result is always the canonical 0x7FFFFFFF there
// (PTX ISA §9.7.3 "Floating-Point Instructions": "Single-precision instructions return an unspecified NaN";
// sm_90 returns 0x7FFFFFFF whatever the operands, e.g. for Inf - Inf, where x86 returns 0xFFC00000).
std::uint32_t gpu_f32_bits(float x) { return std::isnan(x) ? 0x7FFFFFFFu : float_bits(x); }
// The GPU's FADD of two f32 codes (nearest even).
std::uint32_t gpu_add(std::uint32_t x, std::uint32_t y) {
  return gpu_f32_bits(std::bit_cast<float>(x) + std::bit_cast<float>(y));
}

void check_shapes(const Matrix& a, const Matrix& b, const Matrix* c) {
  if (!a.format || !b.format) throw std::invalid_argument("operand without a format");
  if (a.cols != b.rows) throw std::invalid_argument("inner dimensions differ: A is " + std::to_string(a.rows) + "x" +
                                                    std::to_string(a.cols) + ", B is " + std::to_string(b.rows) +
                                                    "x" + std::to_string(b.cols));
  if (c && (c->rows != a.rows || c->cols != b.cols))
    throw std::invalid_argument("C must be " + std::to_string(a.rows) + "x" + std::to_string(b.cols));
  for (const Format* f : {a.format, b.format})
    if (f->mantissa_bits > 23)
      throw std::invalid_argument(std::string("operand format ") + f->name + " has a significand wider than 24 bits");
}

// ---- a wide two's complement fixed-point accumulator --------------------------------------------------
// 20 limbs, least significant bit 2^-640: holds every product of two f32 values (2^-298 .. 2^256) and
// sums of up to 2^300 of them exactly.
struct Wide {
  static constexpr int limbs = 20;
  static constexpr int lsb = -640;
  std::uint64_t w[limbs] = {};

  void add(std::uint64_t sig, int exp, bool negative) {
    const int p = exp - lsb;
    const int i = p >> 6;
    const int off = p & 63;
    const std::uint64_t lo = sig << off;
    const std::uint64_t hi = off ? sig >> (64 - off) : 0;
    if (!negative) {
      std::uint64_t carry = 0;
      for (int k = i; k < limbs; ++k) {
        const std::uint64_t add = (k == i ? lo : (k == i + 1 ? hi : 0));
        const std::uint64_t s1 = w[k] + add;
        const std::uint64_t c1 = s1 < add;
        const std::uint64_t s2 = s1 + carry;
        const std::uint64_t c2 = s2 < carry;
        w[k] = s2;
        carry = c1 | c2;
        if (k > i && !carry) break;
      }
    } else {
      std::uint64_t borrow = 0;
      for (int k = i; k < limbs; ++k) {
        const std::uint64_t sub = (k == i ? lo : (k == i + 1 ? hi : 0));
        const std::uint64_t d1 = w[k] - sub;
        const std::uint64_t b1 = w[k] < sub;
        const std::uint64_t d2 = d1 - borrow;
        const std::uint64_t b2 = d1 < borrow;
        w[k] = d2;
        borrow = b1 | b2;
        if (k > i && !borrow) break;
      }
    }
  }

  bool negative() const { return (w[limbs - 1] >> 63) != 0; }

  // The value as significand * 2^exponent with a 64-bit significand; bits below the window are folded
  // into its last bit (a sticky bit), which keeps every rounding to 24 bits or fewer exact, stochastic
  // modes with up to 32 random bits included.
  Unpacked unpacked() const {
    std::uint64_t v[limbs];
    const bool neg = negative();
    std::copy(w, w + limbs, v);
    if (neg) {
      std::uint64_t carry = 1;
      for (int k = 0; k < limbs; ++k) {
        v[k] = ~v[k] + carry;
        carry = carry && v[k] == 0;
      }
    }
    int top = limbs - 1;
    while (top >= 0 && v[top] == 0) --top;
    Unpacked u;
    u.negative = neg;
    if (top < 0) return u;  // zero
    const int msb = top * 64 + bits::width(v[top]) - 1;
    const int start = msb - 63;  // window [start, msb]
    std::uint64_t sig = 0;
    bool sticky = false;
    if (start <= 0) {
      sig = v[0];
    } else {
      const int i = start >> 6, off = start & 63;
      sig = v[i] >> off;
      if (off && i + 1 < limbs) sig |= v[i + 1] << (64 - off);
      for (int k = 0; k < i; ++k) sticky |= v[k] != 0;
      sticky |= (v[i] & bits::ones(off)) != 0;
    }
    u.cls = ValueClass::finite;
    u.significand = sig | (sticky ? 1 : 0);
    u.exponent = (start > 0 ? start : 0) + lsb;
    return u;
  }

  mpq_class rational() const {
    std::uint64_t v[limbs];
    std::copy(w, w + limbs, v);
    const bool neg = negative();
    if (neg) {
      std::uint64_t carry = 1;
      for (int k = 0; k < limbs; ++k) {
        v[k] = ~v[k] + carry;
        carry = carry && v[k] == 0;
      }
    }
    mpz_class z;
    mpz_import(z.get_mpz_t(), limbs, -1, sizeof(std::uint64_t), 0, 0, v);
    if (neg) z = -z;
    mpz_class d = 1;
    d <<= -lsb;
    mpq_class q(z, d);
    q.canonicalize();
    return q;
  }
};

// Special values met on the way: NaN, and infinities of each sign.
struct Specials {
  bool nan = false, pinf = false, ninf = false;
  void product(const Unpacked& x, const Unpacked& y) {
    if (x.cls == ValueClass::nan || y.cls == ValueClass::nan) nan = true;
    else if (x.cls == ValueClass::inf || y.cls == ValueClass::inf) {
      if (x.cls == ValueClass::zero || y.cls == ValueClass::zero) nan = true;
      else (x.negative != y.negative ? ninf : pinf) = true;
    }
  }
  void value(const Unpacked& x) {
    if (x.cls == ValueClass::nan) nan = true;
    else if (x.cls == ValueClass::inf) (x.negative ? ninf : pinf) = true;
  }
  bool any() const { return nan || pinf || ninf; }
  // The result code in `out`: canonical NaN (every mantissa bit set, as the tensor cores and MMA-Sim
  // write it), or the infinity.
  std::uint64_t code(const Format& out) const {
    if (nan || (pinf && ninf)) return out.nan_code(false, out.mantissa_mask());
    return out.encode(ninf, out.inf_magnitude());
  }
};

void add_product(Wide& acc, const Unpacked& x, const Unpacked& y) {
  if (x.cls != ValueClass::finite || y.cls != ValueClass::finite) return;
  acc.add(x.significand * y.significand, x.exponent + y.exponent, x.negative != y.negative);
}

std::vector<Unpacked> unpack_all(const Matrix& m) {
  std::vector<Unpacked> r(m.codes.size());
  for (std::size_t i = 0; i < r.size(); ++i) r[i] = unpack(*m.format, m.codes[i]);
  return r;
}

// The grid of a format whose values are all integer multiples of 2^lsb below 2^(lsb + width).
struct Grid {
  int lsb;
  int width;
};
Grid grid(const Format& f) {
  const int lsb = f.has_zero ? f.emin() - f.mantissa_bits : f.emin();
  return {lsb, f.emax() + 1 - lsb};
}

// The operand's values as integers on its grid (value / 2^lsb), in doubles, into v (resized to hold them);
// `finite_only` is cleared by a NaN or an infinity.  Codes of at most 8 bits through a table of every code.
void grid_values(const Format& f, const std::vector<std::uint64_t>& codes, int lsb, bool& finite_only,
                 std::vector<double>& v) {
  auto value = [&f, lsb](std::uint64_t code, bool& finite) {
    const Unpacked u = unpack(f, code);
    finite = u.cls != ValueClass::nan && u.cls != ValueClass::inf;
    if (u.cls != ValueClass::finite) return 0.0;
    const double x = std::ldexp(static_cast<double>(u.significand), u.exponent - lsb);
    return u.negative ? -x : x;
  };
  const std::size_t table_size = f.storage_bits() <= 8 ? std::size_t{1} << f.storage_bits() : 0;
  std::vector<double> table(table_size);
  std::vector<std::uint8_t> table_finite(table_size);
  for (std::size_t c = 0; c < table_size; ++c) {
    bool finite = true;
    table[c] = value(c, finite);
    table_finite[c] = finite;
  }
  lowbit::detail::resize_large(v, codes.size());
  std::atomic<bool> special{false};
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, v.size(), 1 << 14),
                    [&](const tbb::blocked_range<std::size_t>& r) {
                      bool all_finite = true;
                      for (std::size_t i = r.begin(); i != r.end(); ++i) {
                        const std::uint64_t code = codes[i];
                        bool finite = true;
                        if (code < table_size) {
                          v[i] = table[code];
                          finite = table_finite[code] != 0;
                        } else {
                          v[i] = value(code, finite);
                        }
                        all_finite &= finite;
                      }
                      if (!all_finite) special = true;
                    });
  if (special) finite_only = false;
}

// Storage for the operands' doubles that a thread keeps from one exact product to the next, up to kKept bytes an
// operand, as a BLAS keeps its packing buffers: fresh buffers cost a page fault and a cleared page for every page
// they span, even at 2 MiB a page (huge_pages.hpp).  On the development machine (an AMD EPYC) keeping them took an
// exact 1024^3 e4m3 product from 55 ms to 51 ms on one thread and from 34 ms to 30 ms on two.  A call made while
// the thread's storage is in use (a oneTBB thread waiting inside one product can take up a task that starts
// another) uses storage of its own.
class OperandStorage {
 public:
  OperandStorage() : mine_(!kept_.busy) {
    if (mine_) kept_.busy = true;
  }
  ~OperandStorage() {
    if (!mine_) return;
    for (std::vector<double>* v : {&kept_.a, &kept_.b})
      if (v->capacity() * sizeof(double) > kKept) std::vector<double>().swap(*v);
    kept_.busy = false;
  }
  OperandStorage(const OperandStorage&) = delete;
  OperandStorage& operator=(const OperandStorage&) = delete;
  std::vector<double>& a() { return mine_ ? kept_.a : own_a_; }
  std::vector<double>& b() { return mine_ ? kept_.b : own_b_; }

 private:
  static constexpr std::size_t kKept = std::size_t{32} << 20;  // a 2048 x 2048 operand
  struct Kept {
    std::vector<double> a, b;
    bool busy = false;
  };
  static thread_local Kept kept_;
  const bool mine_;
  std::vector<double> own_a_, own_b_;
};
thread_local OperandStorage::Kept OperandStorage::kept_;

int width128(u128 x) {
  const auto high = static_cast<std::uint64_t>(x >> 64);
  return high ? 64 + std::bit_width(high) : std::bit_width(static_cast<std::uint64_t>(x));
}

// An exact integer sum times 2^exponent as an Unpacked value with a 64-bit significand: bits below the top 64
// are folded into its last bit (a sticky bit), as Wide::unpacked does.
Unpacked unpacked_sum(detail::i128 s, int exponent) {
  Unpacked u;
  if (s == 0) return u;  // an exact zero sum is +0
  u.cls = ValueClass::finite;
  u.negative = s < 0;
  const auto mag = static_cast<u128>(s < 0 ? -s : s);
  const int drop = std::max(0, width128(mag) - 64);
  const bool sticky = drop > 0 && (mag & ((static_cast<u128>(1) << drop) - 1)) != 0;
  u.significand = static_cast<std::uint64_t>(mag >> drop) | (sticky ? 1 : 0);
  u.exponent = exponent + drop;
  return u;
}

// 2^e as a double, for e in the normal range [-1022, 1023].
double pow2_normal(int e) { return std::bit_cast<double>(static_cast<std::uint64_t>(1023 + e) << 52); }

// The same sum rounded to f32 by the default policy (nearest even, overflow to infinity, subnormals kept):
// rounded first to 53 bits toward odd (the bits dropped folded into the last one), which is exact in a double
// together with the power of two, then converted by the hardware, which rounds to nearest even.  Rounding to
// odd at p + 2 or more bits and then to nearest at p bits rounds correctly once (Boldo and Melquiond, "When
// double rounding is odd", IMACS 2005; p = 24 here, or fewer for an f32 subnormal).  `exponent` is that of the
// grids' product, far inside a double's range.
std::uint64_t round_sum_f32(detail::i128 s, int exponent) {
  if (s == 0) return 0;
  const bool negative = s < 0;
  const auto mag = static_cast<u128>(negative ? -s : s);
  const int drop = std::max(0, width128(mag) - 53);
  std::uint64_t top = static_cast<std::uint64_t>(mag >> drop);
  if (drop > 0 && (mag & ((static_cast<u128>(1) << drop) - 1)) != 0) top |= 1;
  const double x = static_cast<double>(top) * pow2_normal(exponent + drop);
  return std::bit_cast<std::uint32_t>(static_cast<float>(negative ? -x : x));
}

// Vectorised kernels are built for AVX-512, AVX2 and the baseline; the loader picks one for the CPU.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define LOWBIT_GEMM_CLONES [[gnu::target_clones("avx512f", "avx2", "default")]]
#endif
#endif
#ifndef LOWBIT_GEMM_CLONES
#define LOWBIT_GEMM_CLONES
#endif

typedef double v8d __attribute__((vector_size(64)));
typedef std::int32_t v8i __attribute__((vector_size(32)));
typedef std::int64_t v8l __attribute__((vector_size(64)));
typedef std::uint64_t v8u __attribute__((vector_size(64)));

}  // namespace

// ---- exact -------------------------------------------------------------------------------------------

namespace {

// The end of every exact dot product: C (an f32 value) joins the sum, special values decide the result
// when there are any, and the exact sum is rounded once; an exact zero sum is +0 (docs/semantics.md §5).
std::uint64_t finish_exact(Wide& acc, Specials& sp, const Unpacked& uc, const Format& out, const Policy& p) {
  sp.value(uc);
  if (sp.any()) return sp.code(out);
  if (uc.cls == ValueClass::finite) acc.add(uc.significand, uc.exponent, uc.negative);
  Unpacked u = acc.unpacked();
  u.negative = u.negative && u.cls != ValueClass::zero;
  return round_to(out, u, p).code;
}

}  // namespace

std::uint64_t exact_dot(const Format& fa, std::span<const std::uint64_t> a, const Format& fb,
                        std::span<const std::uint64_t> b, std::uint32_t c, const Format& out, const Policy& p) {
  Wide acc;
  Specials sp;
  for (std::size_t k = 0; k < a.size(); ++k) {
    const Unpacked x = unpack(fa, a[k]), y = unpack(fb, b[k]);
    sp.product(x, y);
    add_product(acc, x, y);
  }
  const Unpacked uc = unpack(formats::f32, c);
  return finish_exact(acc, sp, uc, out, p);
}

namespace {

// How an exact sum on the grid (an integer times 2^exponent) becomes a code of `out`.
struct GridRounding {
  const Format& out;
  const Policy& policy;
  int exponent;   // of the grids' product
  bool hardware;  // the default policy into f32: the hardware's conversion of a double (round_sum_f32)
  std::uint64_t operator()(detail::i128 sum, int shift) const {
    return hardware ? round_sum_f32(sum, exponent + shift)
                    : round_to(out, unpacked_sum(sum, exponent + shift), policy).code;
  }
  // A double x (times 2^exponent) rounded: x itself is exact, so this is one rounding.
  std::uint64_t of_double(double x) const {
    if (hardware) return std::bit_cast<std::uint32_t>(static_cast<float>(x * pow2_normal(exponent)));
    Unpacked u;
    if (x != 0) {
      int e = 0;
      const double f = std::frexp(std::fabs(x), &e);  // |x| = f 2^e, 1/2 <= f < 1: f 2^53 is a 53-bit integer
      u.cls = ValueClass::finite;
      u.negative = x < 0;
      u.significand = static_cast<std::uint64_t>(std::ldexp(f, 53));
      u.exponent = e - 53 + exponent;
    }
    return round_to(out, u, policy).code;
  }
};

// The integer route (integer_gemm.hpp): every band product exact, the pieces combined in 128 bits, each sum rounded
// once.  A single band product is written by the BLAS into d's own storage (a double and a code are 8 bytes each),
// each double read (memcpy) before its code overwrites it.
bool exact_by_bands(int m, int n, int k, const std::vector<double>& ma, const std::vector<double>& mb,
                    const detail::ProductOptions& base, const GridRounding& round, std::vector<std::uint64_t>& d) {
  static_assert(sizeof(double) == sizeof(std::uint64_t));
  detail::ProductOptions options = base;
  options.product = reinterpret_cast<double*>(d.data());
  const auto round_rows = [&](const detail::ProductRows& r) {
    const std::size_t at = static_cast<std::size_t>(r.i0) * static_cast<std::size_t>(n);
    const std::size_t count = static_cast<std::size_t>(r.i1 - r.i0) * static_cast<std::size_t>(n);
    tbb::parallel_for(tbb::blocked_range<std::size_t>(0, count, 4096), [&](const tbb::blocked_range<std::size_t>& q) {
      if (r.pieces == 1 && round.hardware) {
        // An integer below 2^53 times a power of two is exact in a double: one rounding, the hardware's.
        const double scale = pow2_normal(round.exponent + r.shift);
        for (std::size_t i = q.begin(); i != q.end(); ++i) {
          double v;
          std::memcpy(&v, r.values[0] + i, sizeof v);
          d[at + i] = std::bit_cast<std::uint32_t>(static_cast<float>(v * scale));
        }
      } else {
        for (std::size_t i = q.begin(); i != q.end(); ++i) d[at + i] = round(r.sum(i), r.shift);  // read, then write
      }
    });
  };
  return detail::exact_integer_product(detail::IntegerKernel::blas, m, n, k, ma, mb, round_rows, options);
}

// The filtered route (detail::approximate_product): one BLAS product D and a bound E with |D - S| <= E for the exact
// sum S.  Every deterministic rounding maps the values in order onto the codes in order (signed zeros included: a
// negative value never rounds to +0, nor a positive one to -0; an exact zero is +0 and lies in the interval only
// when its ends have opposite signs or one is +0), so where both ends of [D - E, D + E] round to the same code, S
// rounds to it too.  That settles almost every element; the rest take the exact sum in 128 bits.
void exact_by_filter(int m, int n, int k, const std::vector<double>& ma, const std::vector<double>& mb,
                     const GridRounding& round, std::vector<std::uint64_t>& d) {
  static_assert(sizeof(double) == sizeof(std::uint64_t));
  double* approx = reinterpret_cast<double*>(d.data());  // D in d's storage, read before each code is written
  std::vector<double> row_bound, col_bound;
  detail::approximate_product(detail::IntegerKernel::blas, m, n, k, ma, mb, approx, row_bound, col_bound);
  tbb::enumerable_thread_specific<std::vector<std::size_t>> undecided;
  tbb::parallel_for(tbb::blocked_range<int>(0, m, 16), [&](const tbb::blocked_range<int>& r) {
    std::vector<std::size_t>& mine = undecided.local();
    for (int i = r.begin(); i != r.end(); ++i)
      for (int j = 0; j < n; ++j) {
        const std::size_t at = static_cast<std::size_t>(i) * static_cast<std::size_t>(n) + static_cast<std::size_t>(j);
        double x;
        std::memcpy(&x, approx + at, sizeof x);
        // E, widened by 2^-50 (|D| + E) + 2^-1000 for the roundings of D - E and D + E themselves.
        const double bound = row_bound[static_cast<std::size_t>(i)] * col_bound[static_cast<std::size_t>(j)];
        const double e = bound + (std::fabs(x) + bound) * 0x1p-50 + 0x1p-1000;
        const std::uint64_t low = round.of_double(x - e), high = round.of_double(x + e);
        if (low == high) {
          d[at] = low;
        } else {
          d[at] = 0;
          mine.push_back(at);
        }
      }
  });
  std::vector<std::size_t> rest;
  for (const auto& v : undecided) rest.insert(rest.end(), v.begin(), v.end());
  if (rest.empty()) return;
  std::vector<double> bt(mb.size());  // B transposed: each column contiguous
  for (int q = 0; q < k; ++q)
    for (int j = 0; j < n; ++j)
      bt[static_cast<std::size_t>(j) * static_cast<std::size_t>(k) + static_cast<std::size_t>(q)] =
          mb[static_cast<std::size_t>(q) * static_cast<std::size_t>(n) + static_cast<std::size_t>(j)];
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, rest.size(), 64), [&](const tbb::blocked_range<std::size_t>& r) {
    for (std::size_t t = r.begin(); t != r.end(); ++t) {
      const std::size_t at = rest[t], i = at / static_cast<std::size_t>(n), j = at % static_cast<std::size_t>(n);
      const detail::i128 s = detail::exact_element(ma.data() + i * static_cast<std::size_t>(k),
                                                   bt.data() + j * static_cast<std::size_t>(k), k);
      d[at] = round(s, 0);
    }
  });
}

// The product on the grids, exactly, when both formats' grids are at most 53 bits wide and every value is finite:
// by bands where that takes at most two band products (or the policy is stochastic, whose rounding needs the exact
// sum everywhere), else by the filter.  False: the general route.
bool exact_on_grid(const Matrix& a, const Matrix& b, const Format& out, const Policy& policy,
                   std::vector<std::uint64_t>& d) {
  const Grid ga = grid(*a.format), gb = grid(*b.format);
  if (ga.width > 53 || gb.width > 53) return false;
  const int m = a.rows, n = b.cols, k = a.cols;
  bool finite_only = true;
  OperandStorage storage;
  grid_values(*a.format, a.codes, ga.lsb, finite_only, storage.a());
  grid_values(*b.format, b.codes, gb.lsb, finite_only, storage.b());
  const std::vector<double>& ma = storage.a();
  const std::vector<double>& mb = storage.b();
  if (!finite_only) return false;
  const bool hardware = same_format(out, formats::f32) && policy.rounding == Rounding::rne &&
                        policy.overflow == Overflow::nosat && policy.subnormals == Subnormals::keep;
  const GridRounding round{out, policy, ga.lsb + gb.lsb, hardware};
  detail::ProductOptions options;
  options.a_width = ga.width;
  options.b_width = gb.width;
  const long cost = detail::integer_product_cost(k, ma, mb, options);
  // The filter needs the operands' significands of at most 24 bits (exact products in a double), which every grid
  // format has, and 128-bit exact sums for its fallback.
  const bool filter =
      !is_stochastic(policy.rounding) && (cost == 0 || cost >= 3) && a.format->mantissa_bits <= 23 &&
      b.format->mantissa_bits <= 23 &&
      ga.width + gb.width + static_cast<int>(bits::width(static_cast<std::uint64_t>(std::max(k, 1)))) + 2 <= 126;
  if (filter) {
    exact_by_filter(m, n, k, ma, mb, round, d);
    return true;
  }
  return cost > 0 && exact_by_bands(m, n, k, ma, mb, options, round, d);
}

}  // namespace

std::vector<std::uint64_t> exact(const Matrix& a, const Matrix& b, const Matrix* c, const ExactOptions& o) {
  check_shapes(a, b, c);
  const Format& out = o.out ? *o.out : formats::f32;
  const int m = a.rows, n = b.cols, kk = a.cols;
  std::vector<std::uint64_t> d;
  lowbit::detail::resize_large(d, static_cast<std::size_t>(m) * n);
  // C accumulates as it is when beta is 1; any other alpha, beta or scale takes the rational route.
  const bool plain = o.alpha == 0x3F800000u && o.scale_a == 0x3F800000u && o.scale_b == 0x3F800000u &&
                     o.scale_c == 0x3F800000u && o.scale_d == 0x3F800000u &&
                     (!c || o.beta == 0x3F800000u);
  // Fast exact routes for formats on an integer grid of at most 53 bits (fp8, fp6, fp4, f16, int8), their values as
  // integer-valued doubles (exact_on_grid).  A NaN or an infinity anywhere sends the product to the general route.
  if (plain && !c && exact_on_grid(a, b, out, o.policy, d)) return d;
  const std::vector<Unpacked> ua = unpack_all(a), ub = unpack_all(b);
  const Unpacked alpha = unpack(formats::f32, o.alpha), beta = unpack(formats::f32, o.beta);
  const Unpacked sca = unpack(formats::f32, o.scale_a), scb = unpack(formats::f32, o.scale_b);
  const Unpacked scc = unpack(formats::f32, o.scale_c), scd = unpack(formats::f32, o.scale_d);
  for (const Unpacked* u : {&alpha, &beta, &sca, &scb, &scc, &scd})
    if (u->cls == ValueClass::nan || u->cls == ValueClass::inf)
      throw std::invalid_argument("alpha, beta and the scales must be finite");
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      Wide acc;
      Specials sp;
      for (int k = 0; k < kk; ++k) {
        const Unpacked& x = ua[static_cast<std::size_t>(i) * kk + k];
        const Unpacked& y = ub[static_cast<std::size_t>(k) * n + j];
        sp.product(x, y);
        add_product(acc, x, y);
      }
      std::uint64_t& out_code = d[static_cast<std::size_t>(i) * n + j];
      if (plain) {
        const Unpacked uc = c ? unpack(formats::f32, c->at(i, j)) : Unpacked{};
        out_code = finish_exact(acc, sp, uc, out, o.policy);
        continue;
      }
      // alpha * sum + beta * c, exactly, through rationals.  alpha and beta are finite (checked above).
      const Unpacked uc = c ? unpack(formats::f32, c->at(i, j)) : Unpacked{};
      Specials s2;
      if (sp.nan || (sp.pinf && sp.ninf)) {
        s2.nan = true;
      } else if (sp.pinf || sp.ninf) {
        Unpacked inf;
        inf.cls = ValueClass::inf;
        inf.negative = sp.ninf;
        s2.product(alpha, inf);
      }
      if (c) s2.product(beta, uc);
      if (s2.any()) {
        out_code = s2.code(out);
        continue;
      }
      auto signed_value = [](const Unpacked& u) {
        const exact::Value v = exact::from_unpacked(u);
        return u.negative ? mpq_class(-v.magnitude) : v.magnitude;
      };
      const bool scaled_zero = alpha.cls != ValueClass::finite || sca.cls != ValueClass::finite ||
                               scb.cls != ValueClass::finite;
      mpq_class total =
          scaled_zero ? mpq_class(0) : acc.rational() * signed_value(alpha) * signed_value(sca) * signed_value(scb);
      if (c && beta.cls == ValueClass::finite && uc.cls == ValueClass::finite && scc.cls == ValueClass::finite)
        total += signed_value(beta) * signed_value(scc) * signed_value(uc);
      total = scd.cls == ValueClass::finite ? total * signed_value(scd) : mpq_class(0);
      exact::Value v;
      if (total != 0) {
        v.cls = ValueClass::finite;
        v.negative = total < 0;
        v.magnitude = abs(total);
      }
      out_code = exact::round(out, v, o.policy).code;
    }
  return d;
}

std::vector<std::uint64_t> exact_block_scaled(const Matrix& a, const Matrix& b, const Matrix& a_scales,
                                              const Matrix& b_scales, int block, int bn, const Matrix* c,
                                              const Format& out, const Policy& p) {
  check_shapes(a, b, c);
  const int m = a.rows, n = b.cols, kk = a.cols;
  if (block < 1 || bn < 1) throw std::invalid_argument("scale blocks must be positive");
  const int kb = kk / block + (kk % block != 0), nb = n / bn + (n % bn != 0);  // ceil, without overflow
  if (a_scales.rows != m || a_scales.cols != kb)
    throw std::invalid_argument("a_scales must be " + std::to_string(m) + "x" + std::to_string(kb));
  if (b_scales.rows != kb || b_scales.cols != nb)
    throw std::invalid_argument("b_scales must be " + std::to_string(kb) + "x" + std::to_string(nb));
  const int bits = a.format->mantissa_bits + b.format->mantissa_bits + a_scales.format->mantissa_bits +
                   b_scales.format->mantissa_bits + 4;
  if (bits > 63) throw std::invalid_argument("the scaled products need more than 63 significant bits");
  const std::vector<Unpacked> ua = unpack_all(a), ub = unpack_all(b), usa = unpack_all(a_scales),
                              usb = unpack_all(b_scales);
  std::vector<std::uint64_t> d(static_cast<std::size_t>(m) * n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      Wide acc;
      Specials sp;
      for (int k = 0; k < kk; ++k) {
        const Unpacked& x = ua[static_cast<std::size_t>(i) * kk + k];
        const Unpacked& y = ub[static_cast<std::size_t>(k) * n + j];
        const Unpacked& s0 = usa[static_cast<std::size_t>(i) * kb + k / block];
        const Unpacked& s1 = usb[static_cast<std::size_t>(k / block) * nb + j / bn];
        // (a * sa) * (b * sb): NaN and Inf follow the products' rules, a NaN scale poisons its products.
        if (s0.cls == ValueClass::nan || s1.cls == ValueClass::nan) {
          sp.nan = true;
          continue;
        }
        sp.product(x, y);
        if (s0.cls == ValueClass::inf || s1.cls == ValueClass::inf) {
          Unpacked inf;
          inf.cls = ValueClass::inf;
          sp.product(x, inf);
          sp.product(y, inf);
        }
        if (x.cls != ValueClass::finite || y.cls != ValueClass::finite || s0.cls != ValueClass::finite ||
            s1.cls != ValueClass::finite)
          continue;
        const bool neg = ((x.negative != y.negative) != s0.negative) != s1.negative;
        acc.add(x.significand * y.significand * s0.significand * s1.significand,
                x.exponent + y.exponent + s0.exponent + s1.exponent, neg);
      }
      const Unpacked uc = c ? unpack(formats::f32, c->at(i, j)) : Unpacked{};
      d[static_cast<std::size_t>(i) * n + j] = finish_exact(acc, sp, uc, out, p);
    }
  return d;
}

// ---- f32 accumulation orders -------------------------------------------------------------------------

std::vector<std::uint64_t> accumulate(const Matrix& a, const Matrix& b, const Matrix* c, const OrderOptions& o) {
  check_shapes(a, b, c);
  const int m = a.rows, n = b.cols, kk = a.cols;
  std::vector<float> fa(a.codes.size()), fb(b.codes.size());
  for (std::size_t i = 0; i < fa.size(); ++i) fa[i] = to_float(*a.format, a.codes[i]);
  for (std::size_t i = 0; i < fb.size(); ++i) fb[i] = to_float(*b.format, b.codes[i]);
  std::vector<std::uint64_t> d(static_cast<std::size_t>(m) * n);
  std::vector<float> prod(static_cast<std::size_t>(kk));
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      const float cv = c ? c_value(*c, i, j) : 0.0f;
      const float* ar = &fa[static_cast<std::size_t>(i) * kk];
      auto bv = [&](int k) { return fb[static_cast<std::size_t>(k) * n + j]; };
      float acc = cv;
      switch (o.order) {
        case Order::sequential:
          for (int k = 0; k < kk; ++k) {
            const float p = ar[k] * bv(k);
            acc = acc + p;
          }
          break;
        case Order::sequential_fma:
          for (int k = 0; k < kk; ++k) acc = std::fmaf(ar[k], bv(k), acc);
          break;
        case Order::pairwise: {
          for (int k = 0; k < kk; ++k) prod[static_cast<std::size_t>(k)] = ar[k] * bv(k);
          // Recursive halving: sum(lo, hi) = sum(lo, mid) + sum(mid, hi), mid = lo + (hi - lo) / 2.
          auto sum = [&](auto&& self, int lo, int hi) -> float {
            if (hi - lo == 0) return 0.0f;
            if (hi - lo == 1) return prod[static_cast<std::size_t>(lo)];
            const int mid = lo + (hi - lo) / 2;
            const float l = self(self, lo, mid);
            const float r = self(self, mid, hi);
            return l + r;
          };
          acc = kk ? sum(sum, 0, kk) : 0.0f;
          if (c) acc = acc + cv;
          break;
        }
        case Order::split_k: {
          const int s = std::max(1, o.splits);
          const int chunk = (kk + s - 1) / s;
          acc = 0.0f;
          for (int lo = 0; lo < kk; lo += chunk) {
            float part = 0.0f;
            for (int k = lo; k < std::min(kk, lo + chunk); ++k) {
              const float p = ar[k] * bv(k);
              part = part + p;
            }
            acc = acc + part;
          }
          if (c) acc = acc + cv;
          break;
        }
        case Order::blocked: {
          const int bl = std::max(1, o.block);
          std::vector<std::uint64_t> ra(static_cast<std::size_t>(bl)), rb(static_cast<std::size_t>(bl));
          for (int lo = 0; lo < kk; lo += bl) {
            const int len = std::min(bl, kk - lo);
            for (int k = 0; k < len; ++k) {
              ra[static_cast<std::size_t>(k)] = a.at(i, lo + k);
              rb[static_cast<std::size_t>(k)] = b.at(lo + k, j);
            }
            const auto part = static_cast<std::uint32_t>(
                exact_dot(*a.format, std::span(ra).first(static_cast<std::size_t>(len)), *b.format,
                          std::span(rb).first(static_cast<std::size_t>(len)), 0, formats::f32, rne_policy));
            acc = acc + std::bit_cast<float>(part);
          }
          break;
        }
      }
      d[static_cast<std::size_t>(i) * n + j] = float_bits(acc);
    }
  return d;
}

// ---- tensor-core models ------------------------------------------------------------------------------

namespace {

// The instructions' own operand formats.
namespace F = formats;
constexpr const Format* f16_operands[] = {&F::f16};
constexpr const Format* bf16_operands[] = {&F::bf16};
constexpr const Format* tf32_operands[] = {&F::f32, &F::tf32};  // tf32 values travel in f32 registers
constexpr const Format* fp8_operands[] = {&F::e4m3, &F::e5m2};
constexpr const Format* f8f6f4_operands[] = {&F::e4m3, &F::e5m2, &F::e2m3, &F::e3m2, &F::e2m1};
constexpr const Format* fp4_operands[] = {&F::e2m1};

// The golden suites' operand configurations (vectors/SPEC.md): each model on its own formats, the fp8
// models also mixed, the kind::f8f6f4 models across element widths.
constexpr OperandPair f16_golden[] = {{&F::f16, &F::f16}};
constexpr OperandPair bf16_golden[] = {{&F::bf16, &F::bf16}};
constexpr OperandPair tf32_golden[] = {{&F::f32, &F::f32}};
constexpr OperandPair fp8_golden[] = {{&F::e4m3, &F::e4m3}, {&F::e5m2, &F::e4m3}};
constexpr OperandPair f8f6f4_golden[] = {{&F::e4m3, &F::e5m2}, {&F::e2m1, &F::e3m2}, {&F::e2m3, &F::e4m3}};
constexpr OperandPair mxf8f6f4_golden[] = {{&F::e4m3, &F::e4m3, &F::e8m0, 32}, {&F::e2m1, &F::e5m2, &F::e8m0, 32}};
constexpr OperandPair mxf4_golden[] = {{&F::e2m1, &F::e2m1, &F::e8m0, 32}};
constexpr OperandPair mxf4nvf4_golden[] = {{&F::e2m1, &F::e2m1, &F::ue4m3, 16}};

// One row per tensor-core model.  The f16, bf16 and tf32 models also take narrower formats (fp8, fp6, fp4)
// converted exactly first, as a kernel that widens its operands before the MMA does; the fp8 and Blackwell
// block-scaled models take only their instruction's formats.
// clang-format off
const TensorCoreModel model_table[] = {
    {.name = "volta-f16", .group = 4, .fraction_bits = 23, .output = Output::f32_rz, .truncate_tf32 = false,
     .scale = BlockScale::none, .scale_block = 0,
     .source = "Volta mma.m8n8k4 f16: k=4, F=23 (MMA-Sim; Fasi et al. PeerJ CS 2021)",
     .operands = f16_operands, .conversion = Conversion::exact, .golden = f16_golden},
    {.name = "ampere-f16", .group = 8, .fraction_bits = 24, .output = Output::f32_rz, .truncate_tf32 = false,
     .scale = BlockScale::none, .scale_block = 0,
     .source = "Ampere mma.m16n8k16 f16 split into two k=8 halves, F=24 (MMA-Sim)",
     .operands = f16_operands, .conversion = Conversion::exact, .golden = f16_golden},
    {.name = "ampere-f16-f16acc", .group = 8, .fraction_bits = 24, .output = Output::f16_rne, .truncate_tf32 = false,
     .scale = BlockScale::none, .scale_block = 0,
     .source = "Ampere mma.m16n8k16.f16.f16: as ampere-f16 with an f16 accumulator rounded rne (MMA-Sim)",
     .operands = f16_operands, .conversion = Conversion::exact, .golden = f16_golden},
    {.name = "ampere-bf16", .group = 8, .fraction_bits = 24, .output = Output::f32_rz, .truncate_tf32 = false,
     .scale = BlockScale::none, .scale_block = 0,
     .source = "Ampere mma.m16n8k16 bf16 split into two k=8 halves, F=24 (MMA-Sim)",
     .operands = bf16_operands, .conversion = Conversion::exact, .golden = bf16_golden},
    {.name = "ampere-tf32", .group = 4, .fraction_bits = 24, .output = Output::f32_rz, .truncate_tf32 = true,
     .scale = BlockScale::none, .scale_block = 0,
     .source = "Ampere mma.m16n8k8 tf32 split into two k=4 halves, inputs truncated to tf32, F=24 (MMA-Sim)",
     .operands = tf32_operands, .conversion = Conversion::exact, .golden = tf32_golden},
    {.name = "ada-fp8", .group = 16, .fraction_bits = 13, .output = Output::f32_e8m13_rz, .truncate_tf32 = false,
     .scale = BlockScale::none, .scale_block = 0,
     .source = "Ada mma.m16n8k32 e4m3/e5m2 split into two k=16 halves, F=13, output RZ to 13 fraction bits (MMA-Sim)",
     .operands = fp8_operands, .golden = fp8_golden},
    {.name = "hopper-f16", .group = 16, .fraction_bits = 25, .output = Output::f32_rz, .truncate_tf32 = false,
     .scale = BlockScale::none, .scale_block = 0,
     .source = "Hopper wgmma k=16 f16, F=25 (MMA-Sim); equal bit for bit to an H200's wgmma m64n8k16 and mma.sync "
               "m16n8k16 on 2^20 dot products each (reports/device/)",
     .operands = f16_operands, .conversion = Conversion::exact, .golden = f16_golden},
    {.name = "hopper-f16-f16acc", .group = 16, .fraction_bits = 25, .output = Output::f16_rne, .truncate_tf32 = false,
     .scale = BlockScale::none, .scale_block = 0,
     .source = "Hopper wgmma k=16 f16 with an f16 accumulator rounded rne, a zero result +0 (MMA-Sim); equal bit for "
               "bit to an H200's mma.sync m16n8k16 f16.f16 on 2^20 dot products (reports/device/)",
     .operands = f16_operands, .conversion = Conversion::exact, .golden = f16_golden},
    {.name = "hopper-bf16", .group = 16, .fraction_bits = 25, .output = Output::f32_rz, .truncate_tf32 = false,
     .scale = BlockScale::none, .scale_block = 0,
     .source = "Hopper wgmma k=16 bf16, F=25 (MMA-Sim); equal bit for bit to an H200's wgmma m64n8k16 and mma.sync "
               "m16n8k16 on 2^20 dot products each (reports/device/)",
     .operands = bf16_operands, .conversion = Conversion::exact, .golden = bf16_golden},
    {.name = "hopper-tf32", .group = 8, .fraction_bits = 25, .output = Output::f32_rz, .truncate_tf32 = true,
     .scale = BlockScale::none, .scale_block = 0,
     .source = "Hopper wgmma k=8 tf32, inputs truncated to tf32, F=25 (MMA-Sim)",
     .operands = tf32_operands, .conversion = Conversion::exact, .golden = tf32_golden},
    {.name = "hopper-fp8", .group = 32, .fraction_bits = 13, .output = Output::f32_e8m13_rz, .truncate_tf32 = false,
     .scale = BlockScale::none, .scale_block = 0,
     .source = "Hopper wgmma k=32 e4m3/e5m2, F=13, output RZ to 13 fraction bits (MMA-Sim; DeepSeek-V3 §3.3.2 "
               "reports about 14 kept bits); equal bit for bit to an H200's wgmma m64n8k32 (e4m3, e5m2, mixed; 2^20 "
               "dot products each) and to cuBLASLt's FP8 GEMM with fast accumulation (reports/device/). FP8 mma.sync "
               "on Hopper is another datapath: hopper-fp8-mma-sync",
     .operands = fp8_operands, .golden = fp8_golden},
    // The SASS of mma.sync.m16n8k32 e4m3/e5m2 for sm_90 is F2FP.F16.E4M3.UNPACK_B / F2FP.F16.E5M2.UNPACK_B (an
    // exact conversion) and two HMMA.16816.F32.  The k split follows the fragments (PTX ISA, "Matrix Fragments
    // for mma.m16n8k32"): thread t's A register holds k = 4t..4t+3 and 4t+16..4t+19; unpacking its low and high
    // halves puts k = 4t, 4t+1 (4t+16, 4t+17) into the first m16n8k16.  Found from 40 cases an H200 printed,
    // then held against 2^20 dot products per operand kind (device/tests/mma_test.cpp).  Its operands are the
    // instruction's e4m3/e5m2 and the formats they hold (fp6, fp4), all converted to f16 by the datapath.
    {.name = "hopper-fp8-mma-sync", .group = 32, .fraction_bits = 25, .output = Output::f32_rz,
     .truncate_tf32 = false, .scale = BlockScale::none, .scale_block = 0,
     .source = "Hopper mma.sync m16n8k32 e4m3/e5m2: operands converted to f16, k = 4q, 4q+1 then 4q+2, 4q+3 in two "
               "hopper-f16 steps from +0, C added last in f32 (RNE); equal bit for bit to an H200's mma.sync (e4m3, "
               "e5m2, mixed; 2^20 dot products each; NaN payloads compared loosely there) (reports/device/)",
     .datapath = Datapath::f16_pairs, .operands = fp8_operands, .conversion = Conversion::exact,
     .golden = fp8_golden},
    {.name = "blackwell-f8f6f4", .group = 32, .fraction_bits = 25, .output = Output::f32_rz, .truncate_tf32 = false,
     .scale = BlockScale::none, .scale_block = 0,
     .source = "Blackwell tcgen05.mma kind::f8f6f4 k=32, F=25 (MMA-Sim); not run on hardware by this project",
     .operands = f8f6f4_operands, .golden = f8f6f4_golden},
    {.name = "blackwell-mxf8f6f4", .group = 32, .fraction_bits = 25, .output = Output::f32_rz, .truncate_tf32 = false,
     .scale = BlockScale::per_instruction, .scale_block = 32,
     .source = "Blackwell tcgen05.mma kind::mxf8f6f4.block_scale, ue8m0 per 32, F=25 (MMA-Sim); not run on hardware",
     .operands = f8f6f4_operands, .golden = mxf8f6f4_golden},
    {.name = "blackwell-mxf4", .group = 64, .fraction_bits = 35, .output = Output::f32_rz, .truncate_tf32 = false,
     .scale = BlockScale::per_16, .scale_block = 32,
     .source = "Blackwell kind::mxf4.block_scale k=64: four 16-groups summed exactly, times ue8m0 scales (per 32), "
               "aligned to the scales' exponent sum, F=35 (MMA-Sim); not run on hardware",
     .operands = fp4_operands, .golden = mxf4_golden},
    {.name = "blackwell-mxf4nvf4", .group = 64, .fraction_bits = 35, .output = Output::f32_rz, .truncate_tf32 = false,
     .scale = BlockScale::per_16, .scale_block = 16,
     .source = "Blackwell kind::mxf4nvf4.block_scale.scale_vec::4X k=64: four 16-groups, ue4m3 scales per 16, F=35 "
               "(MMA-Sim); not run on hardware",
     .operands = fp4_operands, .golden = mxf4nvf4_golden},
};
// clang-format on

// A term of a fused sum: (-1)^neg * sig * 2^(exp - frac), aligned by `exp` (MMA-Sim's exponent).
struct Term {
  bool neg;
  std::uint64_t sig;
  int frac;
  int exp;
};

// MMA-Sim's significand/exponent of a value: a normal value has its exponent, a subnormal the format's
// smallest normal exponent, a zero -126.
Term term_of(const Format& f, const Unpacked& u) {
  if (u.cls != ValueClass::finite) return {false, 0, 0, -126};
  return {u.negative, u.significand, f.mantissa_bits, u.exponent + f.mantissa_bits};
}

Unpacked maybe_tf32(const Format& f, std::uint64_t code, bool truncate) {
  if (truncate && same_format(f, formats::f32)) code &= ~std::uint64_t{0x1FFF};
  return unpack(f, code);
}

const Format& accumulator_format(const TensorCoreModel& m) {
  return m.output == Output::f16_rne ? formats::f16 : formats::f32;
}

const Format e8m13{.name = "e8m13", .bits = 22, .exponent_bits = 8, .mantissa_bits = 13, .bias = 127};

// A zero result is +0, also when a nonzero negative sum truncates to zero (|sum| < 2^-149 in f32, below
// 2^-126 * 2^-13 in e8m13): MMA-Sim gives +0 there, in c785138 because math.trunc returns an integer
// (mmasim/simulator/arithmetic.py:192, nv_fused_dot_add) and in 2.1.1 by adding +0.0 to every result
// (mmasim/arithmetic/fdpa.py:102 and :179, "-0.0 to +0.0").  No hardware run has reached the case yet (the
// H200 data of reports/device/ has no such sum); the f16-output rule below is the H200's.
std::uint32_t positive_zero(std::uint32_t f32_code) { return (f32_code & 0x7FFFFFFFu) == 0 ? 0u : f32_code; }

// The exact aligned sum `sum` * 2^(emax - F) rounded to the model's output.
std::uint32_t round_sum(const TensorCoreModel& model, i128 sum, int emax) {
  Unpacked u;
  if (sum != 0) {
    const bool neg = sum < 0;
    const u128 mag = static_cast<u128>(neg ? -sum : sum);
    // |sum| < 2^64 for every preset (at most 65 terms below 2^(F+11)); fold anything above 64 bits.
    int drop = 0;
    u128 m = mag;
    bool sticky = false;
    while ((m >> 64) != 0) {
      sticky |= (m & 1) != 0;
      m >>= 1;
      ++drop;
    }
    u.cls = ValueClass::finite;
    u.negative = neg;
    u.significand = static_cast<std::uint64_t>(m) | (sticky ? 1 : 0);
    u.exponent = emax - model.fraction_bits + drop;
  }
  Policy rz;
  rz.rounding = Rounding::rtz;
  switch (model.output) {
    case Output::f16_rne: {
      // A zero result is +0, also when a nonzero (tiny negative) sum rounds to zero: Hopper's mma.sync
      // m16n8k16 f16.f16 (H200) returned +0 in all 20002 of 2^20 random cases where RNE gives -0
      // (device/tests/mma_test.cpp), and matched every other case.  Unconfirmed on other GPUs.
      const std::uint32_t code = static_cast<std::uint32_t>(round_to(formats::f16, u, rne_policy).code);
      return code == 0x8000u ? 0u : code;
    }
    case Output::f32_rz: {
      const Result r = round_to(formats::f32, u, rz);
      // MMA-Sim converts its normalised value to f32 by the nearest rule, so a result beyond the
      // largest finite value becomes infinity, not max (unconfirmed on hardware).
      if (r.flags & flag::overflow) return static_cast<std::uint32_t>(formats::f32.encode(u.negative, formats::f32.inf_magnitude()));
      return positive_zero(static_cast<std::uint32_t>(r.code));
    }
    case Output::f32_e8m13_rz: {
      const Result r = round_to(e8m13, u, rz);
      if (r.flags & flag::overflow) return static_cast<std::uint32_t>(formats::f32.encode(u.negative, formats::f32.inf_magnitude()));
      return positive_zero(static_cast<std::uint32_t>(convert(e8m13, r.code, formats::f32, rne_policy).code));
    }
  }
  return 0;
}

// Align to the largest exponent, truncate each term toward zero to F fraction bits, sum exactly, round.
std::uint32_t fused_sum(const TensorCoreModel& model, std::span<const Term> terms) {
  int emax = terms[0].exp;
  for (const Term& t : terms) emax = std::max(emax, t.exp);
  i128 sum = 0;
  for (const Term& t : terms) {
    if (t.sig == 0) continue;
    const int shift = model.fraction_bits + t.exp - emax - t.frac;
    i128 v = 0;
    if (shift >= 0) v = static_cast<i128>(t.sig) << shift;
    else if (shift > -64) v = static_cast<i128>(t.sig >> -shift);
    sum += t.neg ? -v : v;
  }
  return round_sum(model, sum, emax);
}

// ---- the f16_pairs datapath (Hopper FP8 mma.sync) -------------------------------------------------------

// Whether every value of f is an f16 value (holds_every_value: at most 11 significant bits, nothing above f16's
// max and nothing finer than its smallest subnormal 2^-24).  conformance/gemm/test_mma_sync_model.cpp checks the
// predicate against the conversion of every code of the built-in formats, and that it accepts no parametric
// format with a value the wider format lacks.
bool values_in_f16(const Format& f) { return holds_every_value(formats::f16, f); }

// The f16_pairs models' operand check (check_shapes has already refused significands wider than 24 bits).
void require_f16_operands(const TensorCoreModel& model, const Format& fa, const Format& fb) {
  if (model.datapath != Datapath::f16_pairs) return;
  for (const Format* f : {&fa, &fb})
    if (!values_in_f16(*f))
      throw std::invalid_argument(std::string("model ") + model.name +
                                  " converts its operands to f16 exactly, and format " + f->name +
                                  " has values that f16 lacks");
}

// The model of one half-step: the same F and output over half the group, fused.
TensorCoreModel half_step(const TensorCoreModel& model) {
  TensorCoreModel h = model;
  h.group = model.group / 2;
  h.datapath = Datapath::fused;
  return h;
}

// The k (within the instruction) of slot j of half `which` (0: k = 4q, 4q+1; 1: k = 4q+2, 4q+3).
int pair_k(int j, int which) { return (j / 2) * 4 + 2 * which + j % 2; }

std::uint64_t to_f16(const Format& f, std::uint64_t code) { return convert(f, code, formats::f16, rne_policy).code; }

std::uint32_t f16_pairs_step(const TensorCoreModel& model, const Format& fa, std::span<const std::uint64_t> a,
                             const Format& fb, std::span<const std::uint64_t> b, std::uint32_t c) {
  require_f16_operands(model, fa, fb);
  if (a.size() != b.size() || a.size() > static_cast<std::size_t>(model.group))
    throw std::invalid_argument(std::string("model ") + model.name + ": one step takes at most " +
                                std::to_string(model.group) + " elements of A and as many of B, not " +
                                std::to_string(a.size()) + " and " + std::to_string(b.size()));
  const TensorCoreModel half = half_step(model);
  std::vector<std::uint64_t> ha(static_cast<std::size_t>(half.group)), hb(ha.size());
  std::uint32_t partial = 0;
  for (int which = 0; which < 2; ++which) {
    for (int j = 0; j < half.group; ++j) {
      const auto k = static_cast<std::size_t>(pair_k(j, which));
      ha[static_cast<std::size_t>(j)] = k < a.size() ? to_f16(fa, a[k]) : 0;
      hb[static_cast<std::size_t>(j)] = k < b.size() ? to_f16(fb, b[k]) : 0;
    }
    partial = model_step(half, formats::f16, ha, formats::f16, hb, partial);
  }
  return gpu_add(c, partial);
}

// ---- the fast model driver ---------------------------------------------------------------------------
// run_model (unscaled models), run_promoted and run_block_scaled give exactly what a loop of model_step
// calls gives (conformance/gemm/test_fast_driver.cpp compares them on random shapes, models and inputs,
// NaN, Inf and subnormals included), only faster:
//  - each operand element is decoded once (through a table of every code for formats of at most 16 bits)
//    into its exact value and MMA-Sim's exponent;
//  - a step whose group and C are all finite aligns and truncates in floating point: with emax the largest
//    term exponent, a term's aligned value truncated to F fraction bits is trunc(x * y * 2^(F - emax)).
//    |x| <= 2^(exp + 1) for every element, so each term is an integer of magnitude below 2^(F + 2);
//  - the step's sum rounded toward zero to an f32-layout output is a truncation of the double's bits
//    when the result is a normal f32;
//  - every other case (NaN or Inf in the group or in C, a result outside the normal range, an f16 output
//    on the wide path) takes the model's own code: model_step, or the rounding of fused_sum.
// Two kernels compute the finite steps, chosen per GEMM from the operands (choose_path):
//  - narrow (f32 lanes, 16 to a vector, four rows of A at a time): when every product of the operands is an
//    f32 normal value exactly (at most 24 significant bits, magnitudes within f32's normal range), F <= 25
//    and the output is f32-layout.  x * y is then exact in f32 and so is its scaling by 2^(F - emax) (or
//    the result is below 1 and truncates to 0 either way); the terms, below 2^27, are summed in two int32
//    accumulators of at most 2^(29 - F) terms each (below 2^31), C's term apart, and the three added in
//    doubles.  2^(F - emax) is an f32 whenever some product is nonzero (every nonzero product has an exponent
//    of at least F - 127, checked); when it is not, all products are zero and the scale is clamped to 2^127,
//    which leaves them zero: only C's term needs the true scale, and a nonzero C takes model_step there;
//  - wide (f64 lanes, 8 to a vector, one row at a time) for the rest: every product and scaling is exact in
//    double, the terms (below 2^(F + 2) <= 2^30) are int32 and the group sum stays below 2^37.
// Columns go in tiles of kTile; tiles and blocks of rows run in parallel (oneTBB).
// (The kernels use GCC vector extensions: a v16f or a v8d is one AVX-512 register, two AVX2 or four SSE2 ones.)

constexpr int kTile = 32;     // columns per tile: two vectors of 16 f32 lanes
constexpr int kRowBlock = 4;  // rows of A per block

typedef float v16f __attribute__((vector_size(64)));
typedef std::int32_t v16i __attribute__((vector_size(64)));
typedef float v8f __attribute__((vector_size(32)));
typedef std::uint32_t v16u __attribute__((vector_size(64)));
typedef std::int16_t v32h __attribute__((vector_size(64)));
typedef std::int16_t v16h __attribute__((vector_size(32)));

// The narrow kernel wants AVX-512BW (16-bit lanes) and DQ beside AVX-512F: x86-64-v4, else AVX2, else the baseline.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define LOWBIT_NARROW_CLONES [[gnu::target_clones("arch=x86-64-v4", "avx2", "default")]]
#endif
#endif
#ifndef LOWBIT_NARROW_CLONES
#define LOWBIT_NARROW_CLONES
#endif

enum class FastPath : std::uint8_t {
  none,    // every step through model_step (block-scaled models, F > 28)
  wide,    // f64 lanes
  narrow,  // f32 lanes
};

// One element decoded: its exact value, MMA-Sim's exponent, whether it is NaN or infinite, whether it keeps the
// bound |x| <= 2^(exp + 1) the fast sums rely on, and for a nonzero finite value its binade (floor(log2 |x|))
// and the span of its significand's set bits.
struct Decoded {
  double value = 0;
  std::int32_t exp = 0;
  bool special = false;
  bool bounded = true;
  bool nonzero = false;
  int binade = 0;
  int sig_bits = 0;
};

Decoded decode_element(const Format& f, std::uint64_t code, bool tf32) {
  const Unpacked u = maybe_tf32(f, code, tf32);
  Decoded d;
  d.exp = term_of(f, u).exp;
  d.special = u.cls == ValueClass::nan || u.cls == ValueClass::inf;
  if (u.cls != ValueClass::finite) return d;
  // Powers of two as bit patterns where they are normal doubles (every built-in format's are), else ldexp.
  auto pow2 = [](int e) { return e >= -1022 && e <= 1023 ? pow2_normal(e) : std::ldexp(1.0, e); };
  const double v = static_cast<double>(u.significand) * pow2(u.exponent);
  d.value = u.negative ? -v : v;
  d.bounded = v <= pow2(d.exp + 1);
  d.nonzero = true;
  d.binade = u.exponent + static_cast<int>(bits::width(u.significand)) - 1;
  d.sig_bits = static_cast<int>(bits::width(u.significand)) - std::countr_zero(u.significand);
  return d;
}

// An operand's elements decoded once: through a table of every code for formats of at most 16 bits, else element
// by element into a copy of the whole operand (each element is read twice: for its range, then for the kernels).
class Decoder {
 public:
  Decoder(const Format& f, bool tf32, const std::vector<std::uint64_t>& codes) {
    if (f.storage_bits() <= 16) {
      table_.resize(std::size_t{1} << f.storage_bits());
      for (std::size_t c = 0; c < table_.size(); ++c) table_[c] = decode_element(f, c, tf32);
      // Codes beyond the format's storage width (never valid) are decoded element by element, as they are.
      for (std::uint64_t c : codes)
        if (c >= table_.size()) {
          table_.clear();
          break;
        }
      if (!table_.empty()) return;
    }
    elements_.resize(codes.size());
    tbb::parallel_for(tbb::blocked_range<std::size_t>(0, codes.size(), 1 << 14),
                      [&](const tbb::blocked_range<std::size_t>& r) {
                        for (std::size_t i = r.begin(); i != r.end(); ++i)
                          elements_[i] = decode_element(f, codes[i], tf32);
                      });
  }
  // Element `index` of the operand, whose code is `code`.
  const Decoded& operator()(std::size_t index, std::uint64_t code) const {
    return table_.empty() ? elements_[index] : table_[code];
  }

 private:
  std::vector<Decoded> table_, elements_;
};

// What an operand's finite nonzero values span, for choose_path.
struct Range {
  bool bounded = true;
  bool any = false;
  int min_binade = 0, max_binade = 0, min_exp = 0, sig_bits = 0;
  void add(const Decoded& d) {
    bounded = bounded && d.bounded;
    if (!d.nonzero) return;
    if (!any) {
      any = true;
      min_binade = max_binade = d.binade;
      min_exp = d.exp;
    }
    min_binade = std::min(min_binade, d.binade);
    max_binade = std::max(max_binade, d.binade);
    min_exp = std::min(min_exp, d.exp);
    sig_bits = std::max(sig_bits, d.sig_bits);
  }
  void add(const Range& r) {
    bounded = bounded && r.bounded;
    if (!r.any) return;
    if (!any) {
      *this = r;
      return;
    }
    min_binade = std::min(min_binade, r.min_binade);
    max_binade = std::max(max_binade, r.max_binade);
    min_exp = std::min(min_exp, r.min_exp);
    sig_bits = std::max(sig_bits, r.sig_bits);
  }
};

// Operands decoded once.  A is rows x kp, B is kp x cols (kp = K padded to the group with zero codes), B stored
// tile by tile: each tile kp x kTile, row-major (the columns past n are zeros).  The steps run `step_model`,
// fused, over `step` elements at a time: the model itself, or for an f16_pairs model its half-step over operands
// converted to f16 with each instruction's K permuted so that its first half-step reads k = 4q, 4q+1 and its
// second k = 4q+2, 4q+3 (owned here, and already padded).
struct FastOperands {
  TensorCoreModel step_model{};
  const Matrix* a = nullptr;
  const Matrix* b = nullptr;
  std::unique_ptr<Matrix> own_a, own_b;
  int m = 0, n = 0, kk = 0, kp = 0, group = 0, groups = 0;
  int step = 0, steps = 0;  // elements per fused step, and steps in all (kp / step)
  int tiles = 0;
  std::uint64_t pad_a = 0, pad_b = 0;
  FastPath path = FastPath::none;
  std::vector<double> va, vb;              // wide: the values
  std::vector<float> xa, xb;               // narrow: the values
  std::vector<std::int32_t> ea, eb;        // wide: the exponents
  std::vector<std::int16_t> ha, hb;        // narrow: the exponents
  std::vector<std::uint8_t> special_a;     // m x steps: a NaN or Inf in the row's step
  std::vector<std::uint8_t> special_b;     // steps x n
  std::vector<std::uint8_t> special_tile;  // steps x tiles: some column of the tile has one
};

// An f16_pairs operand: converted to f16, each instruction's K (`group`) permuted as FastOperands says, K
// padded to `kp` with +0.  `rows_are_k`: B (K x N) rather than A (M x K).
Matrix pairs_operand(const Matrix& x, int group, int kp, bool rows_are_k) {
  const int kk = rows_are_k ? x.rows : x.cols, other = rows_are_k ? x.cols : x.rows;
  // source[p]: the K index that lands at position p (-1: padding).
  std::vector<int> source(static_cast<std::size_t>(kp));
  const int half = group / 2;
  for (int p = 0; p < kp; ++p) {
    const int k = p / group * group + pair_k(p % group % half, p % group / half);
    source[static_cast<std::size_t>(p)] = k < kk ? k : -1;
  }
  // Codes below 256 through a table (every such code, as to_f16 converts it), others one by one.
  std::uint64_t table[256];
  const bool small = x.format->storage_bits() <= 8;
  if (small)
    for (std::uint64_t c = 0; c < 256; ++c) table[c] = to_f16(*x.format, c);
  auto f16 = [&](std::uint64_t code) { return small && code < 256 ? table[code] : to_f16(*x.format, code); };
  Matrix r{&formats::f16, rows_are_k ? kp : other, rows_are_k ? other : kp, {}};
  r.codes.assign(static_cast<std::size_t>(kp) * static_cast<std::size_t>(other), 0);
  std::size_t at = 0;  // r is written in order: B row by row (p outer), A row by row (p inner)
  for (int outer = 0; outer < (rows_are_k ? kp : other); ++outer)
    for (int inner = 0; inner < (rows_are_k ? other : kp); ++inner, ++at) {
      const int p = rows_are_k ? outer : inner, o = rows_are_k ? inner : outer;
      const int k = source[static_cast<std::size_t>(p)];
      if (k >= 0) r.codes[at] = f16(rows_are_k ? x.at(k, o) : x.at(o, k));
    }
  return r;
}

// The ranges of A (m x kk, K padded to kp) and B (kk x n) over their codes, in parallel.
Range operand_range(const Decoder& decode, const std::vector<std::uint64_t>& codes) {
  return tbb::parallel_reduce(
      tbb::blocked_range<std::size_t>(0, codes.size(), 1 << 14), Range{},
      [&](const tbb::blocked_range<std::size_t>& r, Range acc) {
        for (std::size_t i = r.begin(); i != r.end(); ++i) acc.add(decode(i, codes[i]));
        return acc;
      },
      [](Range x, const Range& y) {
        x.add(y);
        return x;
      });
}

FastPath choose_path(const TensorCoreModel& model, const Range& ra, const Range& rb) {
  if (model.scale != BlockScale::none || model.fraction_bits > 28 || !ra.bounded || !rb.bounded) return FastPath::none;
  const int F = model.fraction_bits;
  // The narrow kernel alternates two int32 accumulators, C's term in one of them: each holds at most
  // ceil(group / 2) terms below 2^(F + 2) and one below 2^(F + 1).
  const std::int64_t per_accumulator = (model.group + 1) / 2;
  const bool narrow_sums = model.output != Output::f16_rne && F <= 25 &&
                           (per_accumulator << (F + 2)) + (std::int64_t{1} << (F + 1)) <= std::int64_t{1} << 31;
  bool products_fit = true;
  if (ra.any && rb.any)
    products_fit = ra.sig_bits + rb.sig_bits <= 24 && ra.min_binade + rb.min_binade >= -126 &&
                   ra.max_binade + rb.max_binade <= 125 && ra.min_exp + rb.min_exp >= F - 127;
  return narrow_sums && products_fit ? FastPath::narrow : FastPath::wide;
}

FastOperands prepare(const TensorCoreModel& model, const Matrix& a, const Matrix& b) {
  require_f16_operands(model, *a.format, *b.format);
  FastOperands f;
  f.m = a.rows;
  f.n = b.cols;
  f.kk = a.cols;
  f.group = model.group;
  f.groups = (f.kk + f.group - 1) / f.group;
  f.kp = f.groups * f.group;
  f.step_model = model;
  f.a = &a;
  f.b = &b;
  if (model.datapath == Datapath::f16_pairs) {
    f.step_model = half_step(model);
    f.own_a = std::make_unique<Matrix>(pairs_operand(a, f.group, f.kp, false));
    f.own_b = std::make_unique<Matrix>(pairs_operand(b, f.group, f.kp, true));
    f.a = f.own_a.get();
    f.b = f.own_b.get();
    f.kk = f.kp;
  }
  f.step = f.step_model.group;
  f.steps = f.kp / f.step;
  f.tiles = (f.n + kTile - 1) / kTile;
  f.pad_a = f.a->format->encode(false, 0);
  f.pad_b = f.b->format->encode(false, 0);
  const bool tf32 = f.step_model.truncate_tf32;
  if (model.scale != BlockScale::none) return f;  // block-scaled models: every step through model_step
  const Decoder decode_a(*f.a->format, tf32, f.a->codes), decode_b(*f.b->format, tf32, f.b->codes);
  const Decoded pad_a = decode_element(*f.a->format, f.pad_a, tf32),
                pad_b = decode_element(*f.b->format, f.pad_b, tf32);
  f.path = choose_path(f.step_model, operand_range(decode_a, f.a->codes), operand_range(decode_b, f.b->codes));
  if (f.path == FastPath::none) return f;
  const bool narrow = f.path == FastPath::narrow;
  const std::size_t m = static_cast<std::size_t>(f.m), n = static_cast<std::size_t>(f.n),
                    kp = static_cast<std::size_t>(f.kp), steps = static_cast<std::size_t>(f.steps),
                    step = static_cast<std::size_t>(f.step), kk = static_cast<std::size_t>(f.kk),
                    tile = static_cast<std::size_t>(kTile), tiles = static_cast<std::size_t>(f.tiles);
  if (narrow) {
    f.xa.resize(m * kp);
    f.ha.resize(m * kp);
    f.xb.assign(kp * tile * tiles, 0.0f);
    f.hb.assign(kp * tile * tiles, -252);
  } else {
    f.va.resize(m * kp);
    f.ea.resize(m * kp);
    f.vb.assign(kp * tile * tiles, 0.0);
    f.eb.assign(kp * tile * tiles, -252);
  }
  f.special_a.assign(m * steps, 0);
  f.special_b.assign(steps * n, 0);
  f.special_tile.assign(steps * tiles, 0);
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, m, 16), [&](const tbb::blocked_range<std::size_t>& r) {
    for (std::size_t i = r.begin(); i != r.end(); ++i)
      for (std::size_t k = 0; k < kp; ++k) {
        const Decoded& d = k < kk ? decode_a(i * kk + k, f.a->codes[i * kk + k]) : pad_a;
        if (narrow) {
          f.xa[i * kp + k] = static_cast<float>(d.value);
          f.ha[i * kp + k] = static_cast<std::int16_t>(d.exp);
        } else {
          f.va[i * kp + k] = d.value;
          f.ea[i * kp + k] = d.exp;
        }
        if (d.special) f.special_a[i * steps + k / step] = 1;
      }
  });
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, kp, 16), [&](const tbb::blocked_range<std::size_t>& r) {
    for (std::size_t k = r.begin(); k != r.end(); ++k)
      for (std::size_t j = 0; j < n; ++j) {
        const Decoded& d = k < kk ? decode_b(k * n + j, f.b->codes[k * n + j]) : pad_b;
        const std::size_t at = (j / tile) * kp * tile + k * tile + j % tile;
        if (narrow) {
          f.xb[at] = static_cast<float>(d.value);
          f.hb[at] = static_cast<std::int16_t>(d.exp);
        } else {
          f.vb[at] = d.value;
          f.eb[at] = d.exp;
        }
        if (d.special) f.special_b[(k / step) * n + j] = 1;
      }
  });
  for (std::size_t t = 0; t < steps; ++t)
    for (std::size_t j = 0; j < n; ++j)
      if (f.special_b[t * n + j]) f.special_tile[t * tiles + j / tile] = 1;
  return f;
}

// The wide kernel: one group of one row over kTile columns: em = the largest term exponent per column (C
// included), s = the aligned, truncated sum of C and the group's products, an integer held in a double.  Eight
// columns at a time in vector registers, K innermost so that the maxima and sums stay in registers.
LOWBIT_GEMM_CLONES void group_kernel(int len, int fbits, const std::int32_t* ea, const double* va,
                                     const std::int32_t* eb, const double* vb, std::size_t ldb,
                                     const std::int32_t* cexp, const double* cval, std::int32_t* em, double* s) {
  for (int j0 = 0; j0 < kTile; j0 += 8) {
    v8i e, t;
    v8d x, sum, sum1 = {};
    std::memcpy(&e, cexp + j0, sizeof e);
    for (int k = 0; k < len; ++k) {
      std::memcpy(&t, eb + static_cast<std::size_t>(k) * ldb + j0, sizeof t);
      t += ea[k];
      e = t > e ? t : e;
    }
    const v8l field = (static_cast<std::int64_t>(1023 + fbits) - __builtin_convertvector(e, v8l)) << 52;
    v8d scale;
    std::memcpy(&scale, &field, sizeof scale);
    std::memcpy(&x, cval + j0, sizeof x);
    sum = __builtin_convertvector(__builtin_convertvector(x * scale, v8i), v8d);
    int k = 0;
    for (; k + 1 < len; k += 2) {  // two sums, two dependency chains (integer sums: any order is exact)
      v8d y;
      std::memcpy(&x, vb + static_cast<std::size_t>(k) * ldb + j0, sizeof x);
      std::memcpy(&y, vb + static_cast<std::size_t>(k + 1) * ldb + j0, sizeof y);
      x = va[k] * x * scale;
      y = va[k + 1] * y * scale;
      sum += __builtin_convertvector(__builtin_convertvector(x, v8i), v8d);
      sum1 += __builtin_convertvector(__builtin_convertvector(y, v8i), v8d);
    }
    if (k < len) {
      std::memcpy(&x, vb + static_cast<std::size_t>(k) * ldb + j0, sizeof x);
      x = va[k] * x * scale;
      sum += __builtin_convertvector(__builtin_convertvector(x, v8i), v8d);
    }
    sum += sum1;
    std::memcpy(em + j0, &e, sizeof e);
    std::memcpy(s + j0, &sum, sizeof sum);
  }
}

// The rounded result of a finite step of the wide kernel: the sum s * 2^(emax - F).
std::uint32_t finish_step(const TensorCoreModel& model, double s, int emax) {
  if (model.output != Output::f16_rne && s != 0) {
    const int keep = model.output == Output::f32_rz ? 23 : 13;
    std::uint64_t bits = std::bit_cast<std::uint64_t>(s * pow2_normal(emax - model.fraction_bits));
    const int e = static_cast<int>((bits >> 52) & 0x7FF) - 1023;
    if (e >= -126 && e <= 127) {  // a normal f32: rounding toward zero drops the low bits
      bits &= ~((std::uint64_t{1} << (52 - keep)) - 1);
      return std::bit_cast<std::uint32_t>(static_cast<float>(std::bit_cast<double>(bits)));
    }
  }
  return round_sum(model, static_cast<i128>(static_cast<std::int64_t>(s)), emax);
}

// C as a term of the wide kernel: MMA-Sim's exponent and the value (0 for NaN and Inf, which set `special`).
void decode_c(const Format& acc, std::uint32_t code, std::int32_t& exp, double& value, std::uint8_t& special) {
  if (&acc == &formats::f32) {
    const int field = static_cast<int>((code >> 23) & 0xFF);
    special = field == 0xFF;
    exp = field ? field - 127 : -126;
    value = special ? 0.0 : static_cast<double>(std::bit_cast<float>(code));
    return;
  }
  const Decoded d = decode_element(acc, code, false);
  exp = d.exp;
  value = d.value;
  special = d.special;
}

// One step of the narrow kernel for a block of kRowBlock rows over one tile.
struct NarrowStep {
  int len = 0;                             // products in the step
  int fbits = 0;                           // F
  int keep = 0;                            // fraction bits of the output: 23 (f32_rz) or 13 (e8m13)
  bool wide_total = false;                 // the total may reach 2^31 - 64 (narrow_wide_total): check for overflow
  const std::int16_t* ea[kRowBlock] = {};  // row r's exponents and values at the step's first k
  const float* xa[kRowBlock] = {};
  const std::int16_t* eb = nullptr;  // the tile's exponents and values at the step's first k, kTile per k
  const float* xb = nullptr;
  const std::uint32_t* c = nullptr;  // kRowBlock x kTile codes of C (f32)
  std::uint32_t* d = nullptr;        // kRowBlock x kTile results
  std::uint32_t* redo = nullptr;     // kRowBlock x kTile: nonzero where the lane must take model_step
};

// Whether a step's total may reach 2^31 - 64 (then it may overflow int32, or its conversion to f32 round to 2^31):
// each accumulator holds at most ceil(step / 2) terms below 2^(F + 2), one of them C's term below 2^(F + 1) too.
bool narrow_wide_total(int step, int fbits) {
  const std::int64_t per = (step + 1) / 2;
  return 2 * (per << (fbits + 2)) + (std::int64_t{1} << (fbits + 1)) > (std::int64_t{1} << 31) - 64;
}

// The finish of sixteen lanes: total = a0 + a1 (the terms, C's among them) times 2^(e - F), rounded toward zero to
// `keep` fraction bits; `bad` is all ones where that is not a normal f32 or the int32 sum overflowed (an exact zero
// total is +0 whatever e is).  total is rounded toward zero to 24 bits by converting it to f32 (to nearest) and
// stepping back one unit toward zero when the conversion rounded away from zero (cvtt of the f32 is then farther
// from zero than total: back - total nonzero with total's sign); times 2^(e - F) that is exact whenever the result
// is a normal f32.  (Inlined into each build of narrow_kernel, whose instruction set it then uses.  gcc 12
// scalarises & and | of comparison results, and of two selects, on these vectors: each mask here is arithmetic or
// comes from one unsigned comparison, of the largest of the quantities whose ranges are checked.)
[[gnu::always_inline]] inline void narrow_finish(const NarrowStep& s, v16i a0, v16i a1, v16i e, std::uint32_t* d,
                                                 std::uint32_t* bad) {
  v16u sum_u, a0_u, a1_u;
  std::memcpy(&a0_u, &a0, sizeof a0);
  std::memcpy(&a1_u, &a1, sizeof a1);
  sum_u = a0_u + a1_u;  // wraps on overflow, which is flagged
  v16i total;
  std::memcpy(&total, &sum_u, sizeof total);
  const v16i overflow = ((a0 ^ total) & (a1 ^ total)) >> 31;  // -1 where a0 and a1 share a sign that total lacks
  const v16f nearest = __builtin_convertvector(total, v16f);
  const v16i back = __builtin_convertvector(nearest, v16i), diff = back - total;
  const v16i away = (~(diff ^ total) & (diff | -diff)) >> 31;  // -1 where the conversion rounded away from zero
  v16i t_bits;
  std::memcpy(&t_bits, &nearest, sizeof t_bits);
  t_bits += away;  // one unit toward zero (nearest is not zero there)
  v16f t;
  std::memcpy(&t, &t_bits, sizeof t);
  // 2^(e - F) is an f32 when e - F is in [-126, 127], and so is the result when its field is in [1, 254]; the
  // conversion's field must stay below 158 (|total| < 2^31: cvtt of 2^31 has no int32).
  const v16i shift = e - s.fbits;
  const v16i scale_bits = (shift + 127) << 23;
  v16f scale;
  std::memcpy(&scale, &scale_bits, sizeof scale);
  const v16f y = t * scale;
  v16i bits;
  std::memcpy(&bits, &y, sizeof bits);
  const v16i field = ((bits >> 23) & 0xFF) - 1, moved = shift + 126;
  v16u range_field, range_shift;
  std::memcpy(&range_field, &field, sizeof field);
  std::memcpy(&range_shift, &moved, sizeof moved);
  v16u out_of_range = range_field > range_shift ? range_field : range_shift;
  const v16i nonzero = (total | -total) >> 31;  // -1 where total != 0
  v16u nonzero_u;
  std::memcpy(&nonzero_u, &nonzero, sizeof nonzero);
  if (s.wide_total) {
    const v16i big = ((t_bits >> 23) & 0xFF) + (253 - 157);
    v16u range_big;
    std::memcpy(&range_big, &big, sizeof big);
    out_of_range = out_of_range > range_big ? out_of_range : range_big;
  }
  v16u flagged = out_of_range > 253u ? nonzero_u : v16u{};
  if (s.wide_total) {
    v16u overflow_u;
    std::memcpy(&overflow_u, &overflow, sizeof overflow);
    flagged = flagged > overflow_u ? flagged : overflow_u;
  }
  std::memcpy(bad, &flagged, sizeof flagged);
  bits &= ~((1 << (23 - s.keep)) - 1) & nonzero;  // a zero total is +0 (the scale may be garbage then)
  std::memcpy(d, &bits, sizeof bits);
}

// Returns whether some lane needs model_step.  The largest exponents are found in 16-bit lanes (all 32 columns of
// the tile in one vector; every exponent sum lies in [-252, 254]), the terms in f32 lanes.  Masks are all-ones
// lanes of unsigned vectors, merged by their maximum (see narrow_finish).
LOWBIT_NARROW_CLONES bool narrow_kernel(const NarrowStep& s) {
  constexpr int R = kRowBlock, V = kTile / 16;
  static_assert(kTile == 32, "the exponent pass holds a tile in one vector of 32 16-bit lanes");
  v16i e[R][V];
  v16u flags[R][V];
  v16f cval[R][V];
  v32h e16[R];
  const v16i m126 = v16i{} - 126, zero = {};
  const v16u ones = v16u{} - 1u;
  for (int r = 0; r < R; ++r) {
    for (int v = 0; v < V; ++v) {
      v16i code;
      std::memcpy(&code, s.c + r * kTile + v * 16, sizeof code);
      const v16i field = (code >> 23) & 0xFF;
      e[r][v] = field == 0 ? m126 : field - 127;
      flags[r][v] = field == 0xFF ? ones : v16u{};  // a NaN or an infinite C counts as zero here and is redone
      code = field == 0xFF ? zero : code;
      std::memcpy(&cval[r][v], &code, sizeof code);
    }
    const v16h low = __builtin_convertvector(e[r][0], v16h), high = __builtin_convertvector(e[r][1], v16h);
    e16[r] = __builtin_shufflevector(low, high, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19,
                                     20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31);
  }
  for (int k = 0; k < s.len; ++k) {
    v32h b;
    std::memcpy(&b, s.eb + static_cast<std::size_t>(k) * kTile, sizeof b);
    for (int r = 0; r < R; ++r) {
      const v32h t = b + s.ea[r][k];
      e16[r] = t > e16[r] ? t : e16[r];
    }
  }
  v16f scale[R][V];
  v16i acc0[R][V], acc1[R][V];
  for (int r = 0; r < R; ++r) {
    const v16h low = __builtin_shufflevector(e16[r], e16[r], 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const v16h high =
        __builtin_shufflevector(e16[r], e16[r], 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31);
    e[r][0] = __builtin_convertvector(low, v16i);
    e[r][1] = __builtin_convertvector(high, v16i);
    for (int v = 0; v < V; ++v) {
      const v16i se = s.fbits - e[r][v];
      const v16i clamped = se > 127 ? zero + 127 : se;
      const v16i field = (clamped + 127) << 23;
      std::memcpy(&scale[r][v], &field, sizeof field);
      // C's term starts the first accumulator; with the scale clamped only a zero C is exact (choose_path).
      acc0[r][v] = __builtin_convertvector(cval[r][v] * scale[r][v], v16i);
      acc1[r][v] = zero;
      v16i c_bits;
      std::memcpy(&c_bits, &cval[r][v], sizeof c_bits);
      const v16i c_mag = c_bits & 0x7FFFFFFF;
      v16u c_nonzero;
      std::memcpy(&c_nonzero, &c_mag, sizeof c_mag);
      const v16u lost = se > 127 ? c_nonzero : v16u{};  // nonzero where C's true scale is lost
      flags[r][v] = flags[r][v] > lost ? flags[r][v] : lost;
    }
  }
  int k = 0;
  for (; k + 1 < s.len; k += 2) {  // two accumulators, two dependency chains (integer sums: any order is exact)
    v16f y0[V], y1[V];
    for (int v = 0; v < V; ++v) {
      std::memcpy(&y0[v], s.xb + static_cast<std::size_t>(k) * kTile + v * 16, sizeof y0[v]);
      std::memcpy(&y1[v], s.xb + static_cast<std::size_t>(k + 1) * kTile + v * 16, sizeof y1[v]);
    }
    for (int r = 0; r < R; ++r) {
      const float x0 = s.xa[r][k], x1 = s.xa[r][k + 1];
      for (int v = 0; v < V; ++v) {
        acc0[r][v] += __builtin_convertvector(x0 * y0[v] * scale[r][v], v16i);
        acc1[r][v] += __builtin_convertvector(x1 * y1[v] * scale[r][v], v16i);
      }
    }
  }
  if (k < s.len) {
    v16f y0[V];
    for (int v = 0; v < V; ++v) std::memcpy(&y0[v], s.xb + static_cast<std::size_t>(k) * kTile + v * 16, sizeof y0[v]);
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < V; ++v) acc1[r][v] += __builtin_convertvector(s.xa[r][k] * y0[v] * scale[r][v], v16i);
  }
  v16u any = {};
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) {
      const int at = r * kTile + v * 16;
      std::uint32_t bad_lanes[16];
      narrow_finish(s, acc0[r][v], acc1[r][v], e[r][v], s.d + at, bad_lanes);
      v16u bad;
      std::memcpy(&bad, bad_lanes, sizeof bad);
      const v16u redo = flags[r][v] > bad ? flags[r][v] : bad;
      std::memcpy(s.redo + at, &redo, sizeof redo);
      any = any > redo ? any : redo;
    }
  std::uint32_t lanes[16];
  std::memcpy(lanes, &any, sizeof lanes);
  std::uint32_t all = 0;
  for (std::uint32_t x : lanes) all |= x;
  return all != 0;
}

// Working state of a block of rows and one tile of columns: C on entry to a step, the result after it.
struct Lanes {
  std::uint32_t store[2][kRowBlock * kTile];
  std::uint32_t* code = store[0];  // row r, column j at r * kTile + j
  std::uint32_t* next = store[1];
  std::uint32_t redo[kRowBlock * kTile];
  std::int32_t cexp[kTile];
  double cval[kTile];
  std::uint8_t cspecial[kTile];
  std::int32_t em[kTile];
  double s[kTile];
  std::vector<std::uint64_t> ra, rb;
  Lanes() = default;
  Lanes(const Lanes&) = delete;
};

// Step t of row i, column j, through model_step (C = c).
std::uint32_t slow_step(const FastOperands& f, int i, int j, int t, std::uint32_t c, Lanes& l) {
  l.ra.resize(static_cast<std::size_t>(f.step));
  l.rb.resize(static_cast<std::size_t>(f.step));
  const int lo = t * f.step;
  for (int k = 0; k < f.step; ++k) {
    const bool in = lo + k < f.kk;
    l.ra[static_cast<std::size_t>(k)] = in ? f.a->at(i, lo + k) : f.pad_a;
    l.rb[static_cast<std::size_t>(k)] = in ? f.b->at(lo + k, j) : f.pad_b;
  }
  return model_step(f.step_model, *f.a->format, l.ra, *f.b->format, l.rb, c);
}

// Steps [t0, t1) of the wide kernel for row i (its lanes at `code`) over columns [j0, j0 + w).
void wide_steps(const FastOperands& f, int i, int j0, int w, int t0, int t1, std::uint32_t* code, Lanes& l) {
  const TensorCoreModel& model = f.step_model;
  const Format& acc = accumulator_format(model);
  for (int j = 0; j < w; ++j) decode_c(acc, code[j], l.cexp[j], l.cval[j], l.cspecial[j]);
  std::fill(l.cexp + w, l.cexp + kTile, -126);  // columns past the end: zeros
  std::fill(l.cval + w, l.cval + kTile, 0.0);
  const std::size_t kp = static_cast<std::size_t>(f.kp), n = static_cast<std::size_t>(f.n),
                    ldb = static_cast<std::size_t>(kTile);
  for (int t = t0; t < t1; ++t) {
    const std::size_t k0 = static_cast<std::size_t>(t) * static_cast<std::size_t>(f.step);
    const std::size_t ai = static_cast<std::size_t>(i) * kp + k0, bi = static_cast<std::size_t>(j0) * kp + k0 * ldb;
    group_kernel(f.step, model.fraction_bits, &f.ea[ai], &f.va[ai], &f.eb[bi], &f.vb[bi], ldb, l.cexp, l.cval,
                 l.em, l.s);
    const bool row_special = f.special_a[static_cast<std::size_t>(i) * static_cast<std::size_t>(f.steps) +
                                         static_cast<std::size_t>(t)] != 0;
    const std::uint8_t* col_special = &f.special_b[static_cast<std::size_t>(t) * n + static_cast<std::size_t>(j0)];
    for (int j = 0; j < w; ++j) {
      if (row_special || col_special[j] || l.cspecial[j]) code[j] = slow_step(f, i, j0 + j, t, code[j], l);
      else code[j] = finish_step(model, l.s[j], l.em[j]);
      decode_c(acc, code[j], l.cexp[j], l.cval[j], l.cspecial[j]);
    }
  }
}

// Steps [t0, t1) of the narrow kernel for rows [i0, i0 + rows) over columns [j0, j0 + w).
void narrow_steps(const FastOperands& f, int i0, int rows, int j0, int w, int t0, int t1, Lanes& l) {
  const std::size_t kp = static_cast<std::size_t>(f.kp), n = static_cast<std::size_t>(f.n);
  const std::size_t tile = static_cast<std::size_t>(j0 / kTile), tiles = static_cast<std::size_t>(f.tiles);
  NarrowStep s;
  s.len = f.step;
  s.fbits = f.step_model.fraction_bits;
  s.keep = f.step_model.output == Output::f32_rz ? 23 : 13;
  s.wide_total = narrow_wide_total(f.step, s.fbits);
  s.redo = l.redo;
  for (int t = t0; t < t1; ++t) {
    const std::size_t k0 = static_cast<std::size_t>(t) * static_cast<std::size_t>(f.step);
    bool special = f.special_tile[static_cast<std::size_t>(t) * tiles + tile] != 0;
    for (int r = 0; r < kRowBlock; ++r) {
      const std::size_t i = static_cast<std::size_t>(i0 + std::min(r, rows - 1));  // rows past the end: repeats
      s.ea[r] = &f.ha[i * kp + k0];
      s.xa[r] = &f.xa[i * kp + k0];
      if (r < rows) special |= f.special_a[i * static_cast<std::size_t>(f.steps) + static_cast<std::size_t>(t)] != 0;
    }
    s.eb = &f.hb[tile * kp * kTile + k0 * kTile];
    s.xb = &f.xb[tile * kp * kTile + k0 * kTile];
    s.c = l.code;
    s.d = l.next;
    if (narrow_kernel(s) || special) {
      const std::uint8_t* col_special = &f.special_b[static_cast<std::size_t>(t) * n + static_cast<std::size_t>(j0)];
      for (int r = 0; r < rows; ++r) {
        const int i = i0 + r;
        const bool row_special = f.special_a[static_cast<std::size_t>(i) * static_cast<std::size_t>(f.steps) +
                                             static_cast<std::size_t>(t)] != 0;
        for (int j = 0; j < w; ++j)
          if (row_special || col_special[j] || l.redo[r * kTile + j])
            l.next[r * kTile + j] = slow_step(f, i, j0 + j, t, l.code[r * kTile + j], l);
      }
    }
    std::swap(l.code, l.next);
  }
}

// Steps [t0, t1) of rows [i0, i0 + rows) over columns [j0, j0 + w); l.code holds C on entry and the result on
// return.
void run_steps(const FastOperands& f, int i0, int rows, int j0, int w, int t0, int t1, Lanes& l) {
  switch (f.path) {
    case FastPath::narrow: narrow_steps(f, i0, rows, j0, w, t0, t1, l); return;
    case FastPath::wide:
      for (int r = 0; r < rows; ++r) wide_steps(f, i0 + r, j0, w, t0, t1, l.code + r * kTile, l);
      return;
    case FastPath::none:
      for (int r = 0; r < rows; ++r)
        for (int j = 0; j < w; ++j)
          for (int t = t0; t < t1; ++t)
            l.code[r * kTile + j] = slow_step(f, i0 + r, j0 + j, t, l.code[r * kTile + j], l);
      return;
  }
}

// Instructions [g0, g1) (groups of K) of rows [i0, i0 + rows) over columns [j0, j0 + w); l.code holds C on entry
// and the result on return.  An f16_pairs instruction: its two half-steps from +0, then C + their result in f32.
void run_groups(const FastOperands& f, int i0, int rows, int j0, int w, int g0, int g1, Lanes& l) {
  if (f.step == f.group) {
    run_steps(f, i0, rows, j0, w, g0, g1, l);
    return;
  }
  const int per = f.group / f.step;
  std::uint32_t c[kRowBlock * kTile];
  for (int g = g0; g < g1; ++g) {
    std::copy(l.code, l.code + kRowBlock * kTile, c);
    std::fill(l.code, l.code + kRowBlock * kTile, 0u);
    run_steps(f, i0, rows, j0, w, g * per, (g + 1) * per, l);
    for (int r = 0; r < rows; ++r)
      for (int j = 0; j < w; ++j) l.code[r * kTile + j] = gpu_add(c[r * kTile + j], l.code[r * kTile + j]);
  }
}

// body(i0, rows, j0, w, lanes) for every block of rows and tile of columns, in parallel; tiles outermost within
// a task so that a tile of B stays in cache across rows.  Lanes past w (and rows past `rows`) hold zeros.
template <class Body>
void for_each_tile(int m, int n, const Body& body) {
  const int tiles = (n + kTile - 1) / kTile, blocks = (m + kRowBlock - 1) / kRowBlock;
  tbb::parallel_for(tbb::blocked_range2d<int>(0, blocks, 4, 0, tiles, 4), [&](const tbb::blocked_range2d<int>& r) {
    Lanes l;
    for (int t = r.cols().begin(); t != r.cols().end(); ++t)
      for (int blk = r.rows().begin(); blk != r.rows().end(); ++blk) {
        const int i0 = blk * kRowBlock, j0 = t * kTile;
        std::fill(l.code, l.code + kRowBlock * kTile, 0u);
        body(i0, std::min(kRowBlock, m - i0), j0, std::min(kTile, n - j0), l);
      }
  });
}

}  // namespace

std::span<const TensorCoreModel> models() { return model_table; }

bool holds_every_value(const Format& g, const Format& f) {
  if (f.mantissa_bits > g.mantissa_bits) return false;
  if (!g.is_signed() && f.is_signed()) return false;
  if ((f.has_inf() && !g.has_inf()) || (f.has_nan() && !g.has_nan())) return false;
  // Every finite value of f has at most f.mantissa_bits + 1 significant bits, is a multiple of f's smallest
  // positive value 2^q (the code 1, or 0 in a format without zero) and is at most f's largest magnitude
  // (two's complement: one more on the negative side, which g must reach too).  g holds such a value when it has as many significand
  // bits, its own smallest positive value divides 2^q, and its max is no smaller.
  auto lsb = [](const Format& x) { return x.magnitude_exponent(x.has_zero ? 1 : 0); };
  if (lsb(f) < lsb(g)) return false;
  if (max_value(f) > max_value(g)) return false;
  auto lowest = [](const Format& x) { return magnitude_value(x, x.max_finite_magnitude(true)); };
  return !f.is_signed() || lowest(f) <= lowest(g);
}

bool defined_on(const TensorCoreModel& model, const Format& f) {
  return model.datapath == Datapath::f16_pairs ? values_in_f16(f) : f.mantissa_bits <= 23;
}

bool takes_operands(const TensorCoreModel& model, const Format& f) {
  for (const Format* own : model.operands) {
    if (same_format(*own, f)) return true;
    if (model.conversion == Conversion::exact && holds_every_value(*own, f)) return true;
  }
  return false;
}

const TensorCoreModel* find_model(std::string_view name) {
  for (const TensorCoreModel& m : model_table)
    if (name == m.name) return &m;
  return nullptr;
}

std::uint32_t model_step(const TensorCoreModel& model, const Format& fa, std::span<const std::uint64_t> a,
                         const Format& fb, std::span<const std::uint64_t> b, std::uint32_t c,
                         const Format* scale_format, std::span<const std::uint64_t> sa,
                         std::span<const std::uint64_t> sb) {
  if (model.datapath == Datapath::f16_pairs) return f16_pairs_step(model, fa, a, fb, b, c);
  const Format& acc = accumulator_format(model);
  const Unpacked uc = unpack(acc, c);
  Specials sp;
  sp.value(uc);
  std::vector<Term> terms;
  terms.reserve(a.size() + 1);
  terms.push_back(term_of(acc, uc));
  if (model.scale == BlockScale::per_16) {
    // MMA-Sim's nv_fused_dot_add_with_block_scale: NaN only from a scale or C; each 16 products are
    // summed exactly, multiplied by the scale significands, and aligned by the scales' exponent sum.
    for (std::size_t g = 0; g * 16 < a.size(); ++g) {
      const std::size_t si = g * 16 / static_cast<std::size_t>(model.scale_block);
      // ue4m3 and e8m0 are unsigned formats: their codes have no sign bit (a ue4m3 code is below 0x80, which
      // the command line's operand check enforces), so a scale is never negative.  MMA-Sim holds ue4m3 scales
      // in float8_e4m3fn tensors and clears their top bit (mmasim/arithmetic/helper.py
      // truncate_e4m3_to_ue4m3: x & 0x7F), the same values.
      const Unpacked s0 = unpack(*scale_format, sa[si]), s1 = unpack(*scale_format, sb[si]);
      if (s0.cls == ValueClass::nan || s1.cls == ValueClass::nan) sp.nan = true;
      i128 group = 0;
      int frac = 0;
      for (std::size_t k = g * 16; k < std::min(a.size(), g * 16 + 16); ++k) {
        const Unpacked x = unpack(fa, a[k]), y = unpack(fb, b[k]);
        if (x.cls != ValueClass::finite || y.cls != ValueClass::finite) continue;
        // Products of fp4 values share the grid 2^(2 * lsb); sum them there.
        const int lsb = fa.emin() - fa.mantissa_bits + fb.emin() - fb.mantissa_bits;
        const int e = x.exponent + y.exponent - lsb;
        const i128 v = static_cast<i128>(x.significand * y.significand) << e;
        group += (x.negative != y.negative) ? -v : v;
        frac = -lsb;
      }
      const Term t0 = term_of(*scale_format, s0), t1 = term_of(*scale_format, s1);
      if (group == 0 || s0.cls != ValueClass::finite || s1.cls != ValueClass::finite) {
        terms.push_back({false, 0, 0, t0.exp + t1.exp});
        continue;
      }
      const bool neg = group < 0;
      const auto mag = static_cast<std::uint64_t>(neg ? -group : group);
      terms.push_back({neg, mag * t0.sig * t1.sig, frac + t0.frac + t1.frac, t0.exp + t1.exp});
    }
  } else {
    int scale_exp = 0;
    if (model.scale == BlockScale::per_instruction) {
      const Unpacked s0 = unpack(*scale_format, sa[0]), s1 = unpack(*scale_format, sb[0]);
      if (s0.cls == ValueClass::nan || s1.cls == ValueClass::nan) sp.nan = true;
      scale_exp = term_of(*scale_format, s0).exp + term_of(*scale_format, s1).exp;
    }
    for (std::size_t k = 0; k < a.size(); ++k) {
      const Unpacked x = maybe_tf32(fa, a[k], model.truncate_tf32);
      const Unpacked y = maybe_tf32(fb, b[k], model.truncate_tf32);
      sp.product(x, y);
      const Term tx = term_of(fa, x), ty = term_of(fb, y);
      terms.push_back({tx.neg != ty.neg, tx.sig * ty.sig, tx.frac + ty.frac, tx.exp + ty.exp + scale_exp});
    }
  }
  if (sp.any()) return static_cast<std::uint32_t>(sp.code(acc));
  return fused_sum(model, terms);
}

std::vector<std::uint64_t> run_model(const TensorCoreModel& model, const Matrix& a, const Matrix& b, const Matrix* c,
                                     const Matrix* a_scales, const Matrix* b_scales) {
  check_shapes(a, b, c);
  const bool scaled = model.scale != BlockScale::none;
  if (scaled && (!a_scales || !b_scales))
    throw std::invalid_argument(std::string("model ") + model.name + " needs block scales for A and B");
  const int m = a.rows, n = b.cols, kk = a.cols;
  const int g = model.group;
  const int padded = (kk + g - 1) / g * g;
  const Format& acc = accumulator_format(model);
  std::vector<std::uint64_t> d(static_cast<std::size_t>(m) * n);
  if (!scaled) {
    const FastOperands f = prepare(model, a, b);
    for_each_tile(m, n, [&](int i0, int rows, int j0, int w, Lanes& l) {
      for (int r = 0; r < rows; ++r)
        for (int j = 0; j < w; ++j)
          l.code[r * kTile + j] =
              c ? static_cast<std::uint32_t>(convert(*c->format, c->at(i0 + r, j0 + j), acc, rne_policy).code) : 0;
      run_groups(f, i0, rows, j0, w, 0, f.groups, l);
      for (int r = 0; r < rows; ++r)
        for (int j = 0; j < w; ++j) d[static_cast<std::size_t>(i0 + r) * n + j0 + j] = l.code[r * kTile + j];
    });
    return d;
  }
  // Block-scaled models: the plain loop over model_step.
  std::vector<std::uint64_t> ra(static_cast<std::size_t>(g)), rb(static_cast<std::size_t>(g));
  const int nscale = scaled ? g / model.scale_block + (g % model.scale_block ? 1 : 0) : 0;
  std::vector<std::uint64_t> rsa(static_cast<std::size_t>(std::max(1, nscale))), rsb(rsa.size());
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      std::uint32_t sum = c ? static_cast<std::uint32_t>(
                                  convert(*c->format, c->at(i, j), acc, rne_policy).code)
                            : 0;
      for (int lo = 0; lo < padded; lo += g) {
        const Format* fa = a.format;
        for (int k = 0; k < g; ++k) {
          const bool in = lo + k < kk;
          ra[static_cast<std::size_t>(k)] = in ? a.at(i, lo + k) : a.format->encode(false, 0);
          rb[static_cast<std::size_t>(k)] = in ? b.at(lo + k, j) : b.format->encode(false, 0);
        }
        if (scaled) {
          for (int s = 0; s < nscale; ++s) {
            const int col = (lo + s * model.scale_block) / model.scale_block;
            const bool in = col < a_scales->cols;
            rsa[static_cast<std::size_t>(s)] = in ? a_scales->at(i, col) : a_scales->format->encode(false, 0);
            rsb[static_cast<std::size_t>(s)] = in ? b_scales->at(col, j) : b_scales->format->encode(false, 0);
          }
        }
        sum = model_step(model, *fa, ra, *b.format, rb, sum, scaled ? a_scales->format : nullptr, rsa, rsb);
      }
      d[static_cast<std::size_t>(i) * n + j] = sum;
    }
  return d;
}

std::vector<std::uint64_t> run_promoted(const TensorCoreModel& inner, int block, const Matrix& a, const Matrix& b,
                                        const Matrix* c, std::uint32_t scale) {
  check_shapes(a, b, c);
  if (inner.scale != BlockScale::none) throw std::invalid_argument("promotion takes an unscaled inner model");
  if (block <= 0 || block % inner.group) throw std::invalid_argument("the promotion interval must be a multiple of the model's group");
  const int m = a.rows, n = b.cols, kk = a.cols;
  const float s = std::bit_cast<float>(scale);
  std::vector<std::uint64_t> d(static_cast<std::size_t>(m) * n);
  const FastOperands f = prepare(inner, a, b);
  const int g = inner.group;
  // For each output: acc = C (or 0); per block of K, the model from a zero C over the block's groups, then
  // acc = fma(s, partial, acc).
  for_each_tile(m, n, [&](int i0, int rows, int j0, int w, Lanes& l) {
    float acc[kRowBlock * kTile];
    for (int r = 0; r < rows; ++r)
      for (int j = 0; j < w; ++j) acc[r * kTile + j] = c ? c_value(*c, i0 + r, j0 + j) : 0.0f;
    for (int lo = 0; lo < kk; lo += block) {
      std::fill(l.code, l.code + kRowBlock * kTile, 0u);
      run_groups(f, i0, rows, j0, w, lo / g, std::min(f.groups, (lo + block) / g), l);
      for (int r = 0; r < rows; ++r)
        for (int j = 0; j < w; ++j)
          acc[r * kTile + j] = std::fmaf(s, std::bit_cast<float>(l.code[r * kTile + j]), acc[r * kTile + j]);
    }
    for (int r = 0; r < rows; ++r)
      for (int j = 0; j < w; ++j) d[static_cast<std::size_t>(i0 + r) * n + j0 + j] = gpu_f32_bits(acc[r * kTile + j]);
  });
  return d;
}

std::vector<std::uint64_t> run_block_scaled(const TensorCoreModel& inner, const Matrix& a, const Matrix& b,
                                            const Matrix& a_scales, const Matrix& b_scales, const Matrix* c, int bn) {
  check_shapes(a, b, c);
  if (inner.scale != BlockScale::none) throw std::invalid_argument("block scaling takes an unscaled inner model");
  if (bn != 1 && bn != 128) throw std::invalid_argument("bn is 128 (B per 128x128 block) or 1 (B per column)");
  const int m = a.rows, n = b.cols, kk = a.cols;
  const int kb = (kk + 127) / 128, nb = (n + bn - 1) / bn;
  if (a_scales.rows != m || a_scales.cols != kb)
    throw std::invalid_argument("a_scales must be " + std::to_string(m) + "x" + std::to_string(kb));
  if (b_scales.rows != kb || b_scales.cols != nb)
    throw std::invalid_argument("b_scales must be " + std::to_string(kb) + "x" + std::to_string(nb));
  const int g = inner.group;
  std::vector<std::uint64_t> d(static_cast<std::size_t>(m) * n);
  if (128 % g == 0) {
    const FastOperands f = prepare(inner, a, b);
    // Per 128-element block of K: the model from a zero C over the block's groups, then
    // acc = fma(fp32(sa * sb), partial, acc).
    for_each_tile(m, n, [&](int i0, int rows, int j0, int w, Lanes& l) {
      float acc[kRowBlock * kTile];
      for (int r = 0; r < rows; ++r)
        for (int j = 0; j < w; ++j) acc[r * kTile + j] = c ? c_value(*c, i0 + r, j0 + j) : 0.0f;
      for (int blk = 0; blk < kb; ++blk) {
        const int lo = blk * 128;
        std::fill(l.code, l.code + kRowBlock * kTile, 0u);
        run_groups(f, i0, rows, j0, w, lo / g, std::min(f.groups, (lo + 128) / g), l);
        for (int r = 0; r < rows; ++r) {
          const float sa = std::bit_cast<float>(static_cast<std::uint32_t>(a_scales.at(i0 + r, blk)));
          for (int j = 0; j < w; ++j) {
            const float sb = std::bit_cast<float>(static_cast<std::uint32_t>(b_scales.at(blk, (j0 + j) / bn)));
            const float sc = sa * sb;
            acc[r * kTile + j] = std::fmaf(sc, std::bit_cast<float>(l.code[r * kTile + j]), acc[r * kTile + j]);
          }
        }
      }
      for (int r = 0; r < rows; ++r)
        for (int j = 0; j < w; ++j) d[static_cast<std::size_t>(i0 + r) * n + j0 + j] = gpu_f32_bits(acc[r * kTile + j]);
    });
    return d;
  }
  // A group that does not divide 128: the plain loop over model_step.
  std::vector<std::uint64_t> ra(static_cast<std::size_t>(g)), rb(static_cast<std::size_t>(g));
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      float acc = c ? c_value(*c, i, j) : 0.0f;
      for (int blk = 0; blk < kb; ++blk) {
        const int lo = blk * 128;
        std::uint32_t partial = 0;
        for (int glo = lo; glo < std::min(kk, lo + 128); glo += g) {
          for (int k = 0; k < g; ++k) {
            const bool in = glo + k < kk && glo + k < lo + 128;
            ra[static_cast<std::size_t>(k)] = in ? a.at(i, glo + k) : a.format->encode(false, 0);
            rb[static_cast<std::size_t>(k)] = in ? b.at(glo + k, j) : b.format->encode(false, 0);
          }
          partial = model_step(inner, *a.format, ra, *b.format, rb, partial);
        }
        const float sa = std::bit_cast<float>(static_cast<std::uint32_t>(a_scales.at(i, blk)));
        const float sb = std::bit_cast<float>(static_cast<std::uint32_t>(b_scales.at(blk, j / bn)));
        const float s = sa * sb;
        acc = std::fmaf(s, std::bit_cast<float>(partial), acc);
      }
      d[static_cast<std::size_t>(i) * n + j] = gpu_f32_bits(acc);
    }
  return d;
}

std::vector<std::uint64_t> apply_epilogue(const std::vector<std::uint64_t>& acc, const Matrix* c, std::uint32_t alpha,
                                          std::uint32_t beta, std::uint32_t scale_a, std::uint32_t scale_b,
                                          std::uint32_t scale_c) {
  const float s = std::bit_cast<float>(scale_a) * std::bit_cast<float>(scale_b);
  const float f = s * std::bit_cast<float>(alpha);
  const float bt = std::bit_cast<float>(beta) * std::bit_cast<float>(scale_c);
  std::vector<std::uint64_t> d(acc.size());
  for (std::size_t i = 0; i < acc.size(); ++i) {
    float v = f * std::bit_cast<float>(static_cast<std::uint32_t>(acc[i]));
    if (c && beta != 0) {
      const float t = bt * std::bit_cast<float>(static_cast<std::uint32_t>(c->codes[i]));
      v = v + t;
    }
    d[i] = gpu_f32_bits(v);
  }
  return d;
}

std::vector<std::uint64_t> quantize_output(const std::vector<std::uint64_t>& d, std::uint32_t scale_d,
                                           const Format& out) {
  Policy sat;
  sat.overflow = Overflow::satfinite;
  const float sd = std::bit_cast<float>(scale_d);
  std::vector<std::uint64_t> q(d.size());
  for (std::size_t i = 0; i < d.size(); ++i) {
    const float v = std::bit_cast<float>(static_cast<std::uint32_t>(d[i])) * sd;
    q[i] = convert(formats::f32, gpu_f32_bits(v), out, sat).code;
  }
  return q;
}

}  // namespace lowbit::gemm
