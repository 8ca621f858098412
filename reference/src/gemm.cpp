#include "lowbit/gemm.hpp"

#include <gmpxx.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <memory>
#include <stdexcept>

#include <tbb/blocked_range.h>
#include <tbb/blocked_range2d.h>
#include <tbb/parallel_for.h>

#include "lowbit/convert.hpp"
#include "lowbit/exact.hpp"

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

// ---- exact products of integer-valued doubles ------------------------------------------------------------
// C (m x n) = A (m x k) * B (k x n), all row-major, for doubles holding integers whose products and partial
// sums stay below 2^53: every operation is exact, so the blocking below (any order of the sums) gives
// the one exact answer.  B goes in panels of 16 columns; a 4 x 16 block of C lives in eight vector
// registers across a slice of K.

constexpr int kPanel = 16, kRows = 4, kSlice = 256;

LOWBIT_GEMM_CLONES void micro_kernel(int kc, const double* a0, const double* a1, const double* a2, const double* a3,
                                     const double* bp, double* out) {
  v8d c00 = {}, c01 = {}, c10 = {}, c11 = {}, c20 = {}, c21 = {}, c30 = {}, c31 = {};
  for (int k = 0; k < kc; ++k) {
    v8d b0, b1;
    std::memcpy(&b0, bp + static_cast<std::size_t>(k) * kPanel, sizeof b0);
    std::memcpy(&b1, bp + static_cast<std::size_t>(k) * kPanel + 8, sizeof b1);
    c00 += a0[k] * b0;
    c01 += a0[k] * b1;
    c10 += a1[k] * b0;
    c11 += a1[k] * b1;
    c20 += a2[k] * b0;
    c21 += a2[k] * b1;
    c30 += a3[k] * b0;
    c31 += a3[k] * b1;
  }
  const v8d all[8] = {c00, c01, c10, c11, c20, c21, c30, c31};
  std::memcpy(out, all, sizeof all);
}

std::vector<double> integer_gemm(int m, int n, int k, const std::vector<double>& a, const std::vector<double>& b) {
  const int panels = (n + kPanel - 1) / kPanel;
  const std::size_t kk = static_cast<std::size_t>(k);
  std::vector<double> bp(static_cast<std::size_t>(panels) * kk * kPanel, 0.0);
  for (std::size_t r = 0; r < kk; ++r)
    for (int j = 0; j < n; ++j)
      bp[(static_cast<std::size_t>(j / kPanel) * kk + r) * kPanel + static_cast<std::size_t>(j % kPanel)] =
          b[r * static_cast<std::size_t>(n) + static_cast<std::size_t>(j)];
  std::vector<double> c(static_cast<std::size_t>(m) * static_cast<std::size_t>(n), 0.0);
  const int row_blocks = (m + kRows - 1) / kRows;
  for (int k0 = 0; k0 < k; k0 += kSlice) {
    const int kc = std::min(kSlice, k - k0);
    tbb::parallel_for(tbb::blocked_range2d<int>(0, panels, 4, 0, row_blocks, 64), [&](const tbb::blocked_range2d<int>& r) {
      double out[kRows * kPanel];
      for (int p = r.rows().begin(); p != r.rows().end(); ++p)
        for (int rb = r.cols().begin(); rb != r.cols().end(); ++rb) {
          const int i0 = rb * kRows;
          const double* rows[kRows];
          for (int q = 0; q < kRows; ++q)  // rows past the end repeat row i0 and are not stored
            rows[q] = &a[static_cast<std::size_t>(i0 + q < m ? i0 + q : i0) * kk + static_cast<std::size_t>(k0)];
          micro_kernel(kc, rows[0], rows[1], rows[2], rows[3],
                       &bp[(static_cast<std::size_t>(p) * kk + static_cast<std::size_t>(k0)) * kPanel], out);
          const int w = std::min(kPanel, n - p * kPanel);
          for (int q = 0; q < kRows && i0 + q < m; ++q)
            for (int j = 0; j < w; ++j)
              c[static_cast<std::size_t>(i0 + q) * static_cast<std::size_t>(n) + static_cast<std::size_t>(p * kPanel + j)] +=
                  out[q * kPanel + j];
        }
    });
  }
  return c;
}

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

std::vector<std::uint64_t> exact(const Matrix& a, const Matrix& b, const Matrix* c, const ExactOptions& o) {
  check_shapes(a, b, c);
  const Format& out = o.out ? *o.out : formats::f32;
  const int m = a.rows, n = b.cols, kk = a.cols;
  std::vector<std::uint64_t> d(static_cast<std::size_t>(m) * n);
  // C accumulates as it is when beta is 1; any other alpha, beta or scale takes the rational route.
  const bool plain = o.alpha == 0x3F800000u && o.scale_a == 0x3F800000u && o.scale_b == 0x3F800000u &&
                     o.scale_c == 0x3F800000u && o.scale_d == 0x3F800000u &&
                     (!c || o.beta == 0x3F800000u);
  // Fast exact route: formats on a small integer grid whose products and K-sums stay below 2^53 are
  // multiplied as doubles holding integers; every partial sum is then an exactly representable integer,
  // whatever order the additions take (an exact sum has no order).  A NaN or an infinity anywhere sends
  // the product to the general route.
  const Grid ga = grid(*a.format), gb = grid(*b.format);
  const int kbits = bits::width(static_cast<std::uint64_t>(kk));
  if (plain && !c && ga.width + gb.width + kbits <= 53) {
    bool finite_only = true;
    auto scaled = [&finite_only](const Format& f, const std::vector<std::uint64_t>& codes, int lsb) {
      std::vector<double> v(codes.size());
      for (std::size_t i = 0; i < v.size(); ++i) {
        const Unpacked u = unpack(f, codes[i]);
        if (u.cls == ValueClass::nan || u.cls == ValueClass::inf) finite_only = false;
        if (u.cls != ValueClass::finite) continue;
        const double x = std::ldexp(static_cast<double>(u.significand), u.exponent - lsb);
        v[i] = u.negative ? -x : x;
      }
      return v;
    };
    const std::vector<double> ma = scaled(*a.format, a.codes, ga.lsb), mb = scaled(*b.format, b.codes, gb.lsb);
    if (finite_only) {
      const std::vector<double> prod = integer_gemm(m, n, kk, ma, mb);
      tbb::parallel_for(tbb::blocked_range<std::size_t>(0, prod.size(), 4096), [&](const tbb::blocked_range<std::size_t>& r) {
        for (std::size_t i = r.begin(); i != r.end(); ++i) {
          const double s = prod[i];
          Unpacked u;
          if (s != 0) {
            u.cls = ValueClass::finite;
            u.negative = s < 0;
            u.significand = static_cast<std::uint64_t>(std::fabs(s));
            u.exponent = ga.lsb + gb.lsb;
          }
          d[i] = round_to(out, u, o.policy).code;
        }
      });
      return d;
    }
  }

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
//  - each operand element is decoded once into its exact value (a double) and MMA-Sim's exponent;
//  - a step whose group and C are all finite aligns and truncates in floating point: with emax the largest
//    term exponent, a term's aligned value truncated to F fraction bits is trunc(x * y * 2^(F - emax)).
//    The product and the scaling are exact in double (significands of at most 24 bits, exponents far
//    inside its range) and |x| <= 2^(exp + 1) for every element, so each term is an integer of magnitude
//    at most 2^(F + 2) <= 2^30 (an int32) and the group sum stays below 2^37, exact in a double;
//  - the step's sum rounded toward zero to an f32-layout output is a truncation of the double's bits
//    when the result is a normal f32;
//  - every other case (NaN or Inf in the group or in C, an f16 output, a result outside the normal
//    range) takes the model's own code: model_step, or the rounding of fused_sum.
// Columns go in tiles of kTile; tiles and rows run in parallel (oneTBB).
// (The kernels use GCC vector extensions: a v8d is one AVX-512 register, two AVX2 or four SSE2 ones.)

constexpr int kTile = 64;


double pow2(int e) { return std::bit_cast<double>(static_cast<std::uint64_t>(1023 + e) << 52); }

// Operands decoded once.  A is rows x kp, B is kp x cols (kp = K padded to the group with zero codes).
// The steps run `step_model`, fused, over `step` elements at a time: the model itself, or for an f16_pairs
// model its half-step over operands converted to f16 with each instruction's K permuted so that its first
// half-step reads k = 4q, 4q+1 and its second k = 4q+2, 4q+3 (owned here, and already padded).
struct FastOperands {
  TensorCoreModel step_model{};
  const Matrix* a = nullptr;
  const Matrix* b = nullptr;
  std::unique_ptr<Matrix> own_a, own_b;
  int m = 0, n = 0, kk = 0, kp = 0, group = 0, groups = 0;
  int step = 0, steps = 0;  // elements per fused step, and steps in all (kp / step)
  int tiles = 0;  // B is stored tile by tile: each tile kp x kTile, row-major (the extra columns are zeros)
  std::uint64_t pad_a = 0, pad_b = 0;
  std::vector<double> va, vb;
  std::vector<std::int32_t> ea, eb;
  std::vector<std::uint8_t> special_a;  // m x steps: a NaN or Inf in the row's step
  std::vector<std::uint8_t> special_b;  // steps x n
  bool fast = false;                    // false: every step goes through model_step
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

// Decode one element; false when it breaks the bound |x| <= 2^(exp + 1) the fast sum relies on.
bool decode_element(const Format& f, std::uint64_t code, bool tf32, double& value, std::int32_t& exp, bool& special) {
  const Unpacked u = maybe_tf32(f, code, tf32);
  exp = term_of(f, u).exp;
  special = u.cls == ValueClass::nan || u.cls == ValueClass::inf;
  value = 0;
  if (u.cls != ValueClass::finite) return true;
  const double v = std::ldexp(static_cast<double>(u.significand), u.exponent);
  value = u.negative ? -v : v;
  return v <= std::ldexp(1.0, exp + 1);
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
  f.fast = model.scale == BlockScale::none && model.fraction_bits <= 28;
  if (!f.fast) return f;
  const Format& fa = *f.a->format;
  const Format& fb = *f.b->format;
  const bool tf32 = f.step_model.truncate_tf32;
  const std::size_t m = static_cast<std::size_t>(f.m), n = static_cast<std::size_t>(f.n),
                    kp = static_cast<std::size_t>(f.kp), steps = static_cast<std::size_t>(f.steps),
                    step = static_cast<std::size_t>(f.step), kk = static_cast<std::size_t>(f.kk);
  f.va.resize(m * kp);
  f.ea.resize(m * kp);
  const std::size_t tile = static_cast<std::size_t>(kTile);
  f.vb.assign(kp * tile * static_cast<std::size_t>(f.tiles), 0.0);
  f.eb.assign(f.vb.size(), -252);
  f.special_a.assign(m * steps, 0);
  f.special_b.assign(steps * n, 0);
  bool ok = true;
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t k = 0; k < kp; ++k) {
      const std::uint64_t code = k < kk ? f.a->codes[i * kk + k] : f.pad_a;
      bool special = false;
      ok &= decode_element(fa, code, tf32, f.va[i * kp + k], f.ea[i * kp + k], special);
      if (special) f.special_a[i * steps + k / step] = 1;
    }
  for (std::size_t k = 0; k < kp; ++k)
    for (std::size_t j = 0; j < n; ++j) {
      const std::uint64_t code = k < kk ? f.b->codes[k * n + j] : f.pad_b;
      bool special = false;
      const std::size_t at = (j / tile) * kp * tile + k * tile + j % tile;
      ok &= decode_element(fb, code, tf32, f.vb[at], f.eb[at], special);
      if (special) f.special_b[(k / step) * n + j] = 1;
    }
  f.fast = ok;
  return f;
}

// One group of one row over kTile columns: em = the largest term exponent per column (C included), s = the
// aligned, truncated sum of C and the group's products, an integer held in a double.  Eight columns at a
// time in vector registers, K innermost so that the maxima and sums stay in registers.

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

// The rounded result of a finite step: the sum s * 2^(emax - F).
std::uint32_t finish_step(const TensorCoreModel& model, double s, int emax) {
  if (model.output != Output::f16_rne && s != 0) {
    const int keep = model.output == Output::f32_rz ? 23 : 13;
    std::uint64_t bits = std::bit_cast<std::uint64_t>(s * pow2(emax - model.fraction_bits));
    const int e = static_cast<int>((bits >> 52) & 0x7FF) - 1023;
    if (e >= -126 && e <= 127) {  // a normal f32: rounding toward zero drops the low bits
      bits &= ~((std::uint64_t{1} << (52 - keep)) - 1);
      return std::bit_cast<std::uint32_t>(static_cast<float>(std::bit_cast<double>(bits)));
    }
  }
  return round_sum(model, static_cast<i128>(static_cast<std::int64_t>(s)), emax);
}

// C as a term: MMA-Sim's exponent and the value (0 for NaN and Inf, which set `special`).
void decode_c(const Format& acc, std::uint32_t code, std::int32_t& exp, double& value, std::uint8_t& special) {
  if (&acc == &formats::f32) {
    const int field = static_cast<int>((code >> 23) & 0xFF);
    special = field == 0xFF;
    exp = field ? field - 127 : -126;
    value = special ? 0.0 : static_cast<double>(std::bit_cast<float>(code));
    return;
  }
  bool sp = false;
  decode_element(acc, code, false, value, exp, sp);
  special = sp;
}

// Working state of one row and one tile of columns.
struct Lanes {
  std::uint32_t code[kTile];
  std::int32_t cexp[kTile];
  double cval[kTile];
  std::uint8_t cspecial[kTile];
  std::int32_t em[kTile];
  double s[kTile];
  std::vector<std::uint64_t> ra, rb;
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

// Steps [t0, t1) of row i over columns [j0, j0 + w); l.code holds C on entry and the result on return.
void run_steps(const FastOperands& f, int i, int j0, int w, int t0, int t1, Lanes& l) {
  const TensorCoreModel& model = f.step_model;
  if (!f.fast) {
    for (int j = 0; j < w; ++j)
      for (int t = t0; t < t1; ++t) l.code[j] = slow_step(f, i, j0 + j, t, l.code[j], l);
    return;
  }
  const Format& acc = accumulator_format(model);
  for (int j = 0; j < w; ++j) decode_c(acc, l.code[j], l.cexp[j], l.cval[j], l.cspecial[j]);
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
      if (row_special || col_special[j] || l.cspecial[j]) l.code[j] = slow_step(f, i, j0 + j, t, l.code[j], l);
      else l.code[j] = finish_step(model, l.s[j], l.em[j]);
      decode_c(acc, l.code[j], l.cexp[j], l.cval[j], l.cspecial[j]);
    }
  }
}

// Instructions [g0, g1) (groups of K) of row i over columns [j0, j0 + w); l.code holds C on entry and the
// result on return.  An f16_pairs instruction: its two half-steps from +0, then C + their result in f32.
void run_groups(const FastOperands& f, int i, int j0, int w, int g0, int g1, Lanes& l) {
  if (f.step == f.group) {
    run_steps(f, i, j0, w, g0, g1, l);
    return;
  }
  const int per = f.group / f.step;
  std::uint32_t c[kTile];
  for (int g = g0; g < g1; ++g) {
    std::copy(l.code, l.code + w, c);
    std::fill(l.code, l.code + w, 0u);
    run_steps(f, i, j0, w, g * per, (g + 1) * per, l);
    for (int j = 0; j < w; ++j) l.code[j] = gpu_add(c[j], l.code[j]);
  }
}

// body(i, j0, w, lanes) for every row and tile of columns, in parallel; tiles outermost within a task so
// that a tile of B stays in cache across rows.
template <class Body>
void for_each_tile(int m, int n, const Body& body) {
  const int tiles = (n + kTile - 1) / kTile;
  tbb::parallel_for(tbb::blocked_range2d<int>(0, m, 16, 0, tiles, 4), [&](const tbb::blocked_range2d<int>& r) {
    Lanes l;
    for (int t = r.cols().begin(); t != r.cols().end(); ++t)
      for (int i = r.rows().begin(); i != r.rows().end(); ++i) {
        const int j0 = t * kTile;
        body(i, j0, std::min(kTile, n - j0), l);
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
    for_each_tile(m, n, [&](int i, int j0, int w, Lanes& l) {
      for (int j = 0; j < w; ++j)
        l.code[j] = c ? static_cast<std::uint32_t>(convert(*c->format, c->at(i, j0 + j), acc, rne_policy).code) : 0;
      run_groups(f, i, j0, w, 0, f.groups, l);
      for (int j = 0; j < w; ++j) d[static_cast<std::size_t>(i) * n + j0 + j] = l.code[j];
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
  for_each_tile(m, n, [&](int i, int j0, int w, Lanes& l) {
    float acc[kTile];
    for (int j = 0; j < w; ++j) acc[j] = c ? c_value(*c, i, j0 + j) : 0.0f;
    for (int lo = 0; lo < kk; lo += block) {
      std::fill(l.code, l.code + w, 0u);
      run_groups(f, i, j0, w, lo / g, std::min(f.groups, (lo + block) / g), l);
      for (int j = 0; j < w; ++j) acc[j] = std::fmaf(s, std::bit_cast<float>(l.code[j]), acc[j]);
    }
    for (int j = 0; j < w; ++j) d[static_cast<std::size_t>(i) * n + j0 + j] = gpu_f32_bits(acc[j]);
  });
  return d;
}

std::vector<std::uint64_t> run_block_scaled(const TensorCoreModel& inner, const Matrix& a, const Matrix& b,
                                            const Matrix& a_scales, const Matrix& b_scales, const Matrix* c) {
  check_shapes(a, b, c);
  if (inner.scale != BlockScale::none) throw std::invalid_argument("block scaling takes an unscaled inner model");
  const int m = a.rows, n = b.cols, kk = a.cols;
  const int kb = (kk + 127) / 128, nb = (n + 127) / 128;
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
    for_each_tile(m, n, [&](int i, int j0, int w, Lanes& l) {
      float acc[kTile];
      for (int j = 0; j < w; ++j)
        acc[j] = c ? c_value(*c, i, j0 + j) : 0.0f;
      for (int blk = 0; blk < kb; ++blk) {
        const int lo = blk * 128;
        std::fill(l.code, l.code + w, 0u);
        run_groups(f, i, j0, w, lo / g, std::min(f.groups, (lo + 128) / g), l);
        const float sa = std::bit_cast<float>(static_cast<std::uint32_t>(a_scales.at(i, blk)));
        for (int j = 0; j < w; ++j) {
          const float sb = std::bit_cast<float>(static_cast<std::uint32_t>(b_scales.at(blk, (j0 + j) / 128)));
          const float sc = sa * sb;
          acc[j] = std::fmaf(sc, std::bit_cast<float>(l.code[j]), acc[j]);
        }
      }
      for (int j = 0; j < w; ++j) d[static_cast<std::size_t>(i) * n + j0 + j] = gpu_f32_bits(acc[j]);
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
        const float sb = std::bit_cast<float>(static_cast<std::uint32_t>(b_scales.at(blk, j / 128)));
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
