#include "src/integer_gemm.hpp"

#include <cblas.h>
#include <tbb/blocked_range.h>
#include <tbb/blocked_range2d.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_reduce.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

namespace lowbit::gemm::detail {

namespace {

// ---- the plain kernel ----------------------------------------------------------------------------------
// Vectorised for AVX-512, AVX2 and the baseline; the loader picks one for the CPU.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define LOWBIT_INTEGER_GEMM_CLONES [[gnu::target_clones("avx512f", "avx2", "default")]]
#endif
#endif
#ifndef LOWBIT_INTEGER_GEMM_CLONES
#define LOWBIT_INTEGER_GEMM_CLONES
#endif

typedef double v8d __attribute__((vector_size(64)));

// B goes in panels of 16 columns; a 4 x 16 block of C lives in eight vector registers across a slice of K.
constexpr int kPanel = 16, kRows = 4, kSlice = 256;

LOWBIT_INTEGER_GEMM_CLONES void micro_kernel(int kc, const double* a0, const double* a1, const double* a2,
                                             const double* a3, const double* bp, double* out) {
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

void plain_gemm(int m, int n, int k, const double* a, int lda, const double* b, int ldb, double* c, int ldc) {
  const int panels = (n + kPanel - 1) / kPanel;
  const auto kk = static_cast<std::size_t>(k);
  std::vector<double> bp(static_cast<std::size_t>(panels) * kk * kPanel, 0.0);
  for (std::size_t r = 0; r < kk; ++r)
    for (int j = 0; j < n; ++j)
      bp[(static_cast<std::size_t>(j / kPanel) * kk + r) * kPanel + static_cast<std::size_t>(j % kPanel)] =
          b[r * static_cast<std::size_t>(ldb) + static_cast<std::size_t>(j)];
  for (int i = 0; i < m; ++i) std::fill_n(c + static_cast<std::size_t>(i) * static_cast<std::size_t>(ldc), n, 0.0);
  const int row_blocks = (m + kRows - 1) / kRows;
  for (int k0 = 0; k0 < k; k0 += kSlice) {
    const int kc = std::min(kSlice, k - k0);
    tbb::parallel_for(
        tbb::blocked_range2d<int>(0, panels, 4, 0, row_blocks, 64), [&](const tbb::blocked_range2d<int>& r) {
          double out[kRows * kPanel];
          for (int p = r.rows().begin(); p != r.rows().end(); ++p)
            for (int rb = r.cols().begin(); rb != r.cols().end(); ++rb) {
              const int i0 = rb * kRows;
              const double* rows[kRows];
              for (int q = 0; q < kRows; ++q)  // rows past the end repeat row i0 and are not stored
                rows[q] = a + static_cast<std::size_t>(i0 + q < m ? i0 + q : i0) * static_cast<std::size_t>(lda) +
                          static_cast<std::size_t>(k0);
              micro_kernel(kc, rows[0], rows[1], rows[2], rows[3],
                           &bp[(static_cast<std::size_t>(p) * kk + static_cast<std::size_t>(k0)) * kPanel], out);
              const int w = std::min(kPanel, n - p * kPanel);
              for (int q = 0; q < kRows && i0 + q < m; ++q)
                for (int j = 0; j < w; ++j)
                  c[static_cast<std::size_t>(i0 + q) * static_cast<std::size_t>(ldc) +
                    static_cast<std::size_t>(p * kPanel + j)] += out[q * kPanel + j];
            }
        });
  }
}

// ---- splitting an operand into bands ---------------------------------------------------------------------
// An operand's integers x split at 2^s: x goes to the high band as x / 2^s when 2^s divides it, to the low band
// as x otherwise.  x = 2^s * high + low, element by element, with one of the two zero.  The bands' widths
// follow from one table: widest[t] is the bit width of the largest |x| whose lowest set bit is bit t.  Then
// |high| < 2^(widest[t] - s) over t >= s and |low| < 2^widest[t] over t < s.  (An fp8 value has at most 4
// significant bits, so a low band holds at most s + 3 bits: e5m2, 32 bits wide on its grid, splits at s = 15
// into two bands of 17.)
struct Widths {
  int widest[64] = {};
  int whole = 0;
  int common = 0;  // the trailing zero bits every value has (2^common divides them all), taken out first
  int high(int s) const {
    int w = 0;
    for (int t = s; t < 64; ++t)
      if (widest[t] > 0) w = std::max(w, widest[t] - s);
    return w;
  }
  int low(int s) const {
    int w = 0;
    for (int t = 0; t < s; ++t) w = std::max(w, widest[t]);
    return w;
  }
};

// The widths of the values divided by 2^common; false when some value is not an integer below 2^53 in magnitude.
// An integer-valued double x != 0 below 2^53 is 2^e * (1.f) with e = its exponent: bit_width(|x|) = e + 1, and
// its lowest set bit is bit e - 52 + ctz(f) (ctz over the 52 fraction bits, 52 when f = 0).
bool measure(const std::vector<double>& v, Widths& w) {
  struct Table {
    int widest[64] = {};
    bool ok = true;
  };
  const Table all = tbb::parallel_reduce(
      tbb::blocked_range<std::size_t>(0, v.size(), 1 << 15), Table{},
      [&](const tbb::blocked_range<std::size_t>& r, Table t) {
        for (std::size_t i = r.begin(); i != r.end(); ++i) {
          const std::uint64_t bits = std::bit_cast<std::uint64_t>(v[i]) & ~(std::uint64_t{1} << 63);
          if (bits == 0) continue;
          const int e = static_cast<int>(bits >> 52) - 1023;
          const std::uint64_t fraction = bits & ((std::uint64_t{1} << 52) - 1);
          const int low = e - 52 + (fraction ? std::countr_zero(fraction) : 52);
          if (e > 52 || low < 0) {  // 2^53 or more, or not an integer (subnormals included)
            t.ok = false;
            continue;
          }
          t.widest[low] = std::max(t.widest[low], e + 1);
        }
        return t;
      },
      [](Table x, const Table& y) {
        x.ok = x.ok && y.ok;
        for (int t = 0; t < 64; ++t) x.widest[t] = std::max(x.widest[t], y.widest[t]);
        return x;
      });
  if (!all.ok) return false;
  w.common = 0;
  while (w.common < 63 && all.widest[w.common] == 0) ++w.common;
  if (w.common == 63) w.common = 0;  // all zero
  for (int t = w.common; t < 64; ++t) {
    if (all.widest[t] == 0) continue;
    w.widest[t - w.common] = all.widest[t] - w.common;
    w.whole = std::max(w.whole, all.widest[t] - w.common);
  }
  return true;
}

// v / 2^common (exact: powers of two), or v itself.
const std::vector<double>& without_common(const std::vector<double>& v, int common, std::vector<double>& storage) {
  if (common == 0) return v;
  storage.resize(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) storage[i] = std::ldexp(v[i], -common);
  return storage;
}

enum class Band : std::uint8_t { whole, high, low, both };  // both: high + low, each element's band value

// One product of bands, with its integer coefficient in the sum.
struct Piece {
  Band a, b;
  i128 coefficient;
};

// How A B is computed: pieces over slices of K, `slice` long; the exact sum is the sum over slices and
// pieces of coefficient * (A band) (B band).
struct Plan {
  int shift = 0;
  int slice = 0;
  std::vector<Piece> pieces;
  long cost = 0;  // band products in all (pieces times slices)
};

// The longest slice of K whose dot products of pieces `width` bits wide stay below 2^53: every product is
// below 2^width and a sum of L of them below L * 2^width <= 2^53 when L <= 2^(53 - width).
long slice_for(int width) { return width >= 53 ? 0 : (width <= 22 ? (1L << 31) : (1L << (53 - width))); }

void consider(Plan& best, int k, int shift, int width, std::vector<Piece> pieces) {
  const long slice = std::min<long>(k, slice_for(width));
  if (slice < std::min(k, kMinSlice)) return;
  const long cost = static_cast<long>(pieces.size()) * ((k + slice - 1) / slice);
  if (!best.pieces.empty() && cost >= best.cost) return;
  best = {shift, static_cast<int>(slice), std::move(pieces), cost};
}

i128 pow2(int s) { return static_cast<i128>(1) << s; }

Plan choose(const Widths& wa, const Widths& wb, int k) {
  Plan best;
  consider(best, k, 0, wa.whole + wb.whole, {{Band::whole, Band::whole, 1}});
  for (int s = 1; s < 53; ++s) {
    const int ah = wa.high(s), al = wa.low(s), bh = wb.high(s), bl = wb.low(s);
    // One operand split: A B = 2^s A Bh + A Bl (or the same with A split).
    consider(best, k, s, wa.whole + std::max(bh, bl),
             {{Band::whole, Band::high, pow2(s)}, {Band::whole, Band::low, 1}});
    consider(best, k, s, wb.whole + std::max(ah, al),
             {{Band::high, Band::whole, pow2(s)}, {Band::low, Band::whole, 1}});
    // Both split (Karatsuba): with P1 = Ah Bh, P2 = Al Bl, P3 = (Ah + Al)(Bh + Bl),
    // A B = 2^2s P1 + 2^s (P3 - P1 - P2) + P2 = (2^2s - 2^s) P1 + (1 - 2^s) P2 + 2^s P3.
    const int both = std::max(ah + bh, std::max(al + bl, std::max(ah, al) + std::max(bh, bl)));
    consider(best, k, s, both,
             {{Band::high, Band::high, pow2(2 * s) - pow2(s)},
              {Band::low, Band::low, 1 - pow2(s)},
              {Band::both, Band::both, pow2(s)}});
  }
  return best;
}

// The bands of rows [r0, r1) of a row-major matrix with `cols` columns that `wanted` names, in one pass: band[b]
// points at the rows of band b (the matrix itself for the whole band, else `storage[b]`).  2^s divides x when
// h = |x| * 2^-s (exact) is an integer, which (h + 2^52) - 2^52 == h tests for h below 2^52 (the sum rounds to an
// integer; the difference is exact): plain double arithmetic that vectorises on any x86-64.
void band_rows(const std::vector<double>& x, int cols, int r0, int r1, int s, const bool (&wanted)[4],
               std::vector<double> (&storage)[4], const double* (&band)[4]) {
  const std::size_t at = static_cast<std::size_t>(r0) * static_cast<std::size_t>(cols);
  const std::size_t count = static_cast<std::size_t>(r1 - r0) * static_cast<std::size_t>(cols);
  band[0] = x.data() + at;
  for (int b = 1; b < 4; ++b)
    if (wanted[b]) {
      storage[b].resize(count);
      band[b] = storage[b].data();
    }
  if (!wanted[1] && !wanted[2] && !wanted[3]) return;
  const double inverse = std::ldexp(1.0, -s);
  double* high = wanted[1] ? storage[1].data() : nullptr;
  double* low = wanted[2] ? storage[2].data() : nullptr;
  double* both = wanted[3] ? storage[3].data() : nullptr;
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, count, 1 << 14), [&](const tbb::blocked_range<std::size_t>& r) {
    for (std::size_t i = r.begin(); i != r.end(); ++i) {
      const double v = x[at + i], h = v * inverse, ah = std::fabs(h);
      const bool divides = (ah + 0x1p52) - 0x1p52 == ah;
      if (high) high[i] = divides ? h : 0.0;
      if (low) low[i] = divides ? 0.0 : v;
      if (both) both[i] = divides ? h : v;
    }
  });
}

}  // namespace

void integer_gemm(IntegerKernel kernel, int m, int n, int k, const double* a, int lda, const double* b, int ldb,
                  double* c, int ldc) {
  if (m <= 0 || n <= 0) return;
  if (kernel == IntegerKernel::plain || k <= 0) {
    plain_gemm(m, n, k, a, lda, b, ldb, c, ldc);
    return;
  }
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0, a, lda, b, ldb, 0.0, c, ldc);
}

namespace {

// The widths of both operands and the plan, as exact_integer_product makes them; false when it would refuse.
bool plan_for(int k, const std::vector<double>& a, const std::vector<double>& b, const ProductOptions& options,
              Widths& wa, Widths& wb, Plan& plan) {
  const int kbits = std::bit_width(static_cast<unsigned>(std::max(k, 1)));
  if (options.a_width > 0 && options.b_width > 0 && options.a_width + options.b_width + kbits <= 53) {
    wa.whole = options.a_width;  // one product, as choose() would find it: no table of widths needed
    wb.whole = options.b_width;
  } else if (!measure(a, wa) || !measure(b, wb)) {
    return false;
  }
  // The sums (of the values less their common factors) below 2^126: |sum| < K 2^(wa + wb), and each piece's
  // contribution is at most three times that.
  if (wa.whole + wb.whole + kbits + 2 > 126) return false;
  plan = choose(wa, wb, std::max(k, 1));
  return !plan.pieces.empty();
}

}  // namespace

long integer_product_cost(int k, const std::vector<double>& a, const std::vector<double>& b,
                          const ProductOptions& options) {
  Widths wa, wb;
  Plan plan;
  return plan_for(k, a, b, options, wa, wb, plan) ? plan.cost : 0;
}

// The bound of approximate_product.  Every product a_ik b_kj is exact (two integers of at most 24 significant bits
// below 2^53: 48 bits, below 2^106), so only the additions round; a sum of K terms in any order (any tree, blocked,
// with or without fused multiply-adds) has |fl(S) - S| <= gamma(K - 1) sum_k |a_ik b_kj|, gamma(n) = n u / (1 - n u),
// u = 2^-53 (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., section 4.2, the bound for any
// ordering); and sum_k |a_ik b_kj| <= ||a_i||_2 ||b_j||_2 (Cauchy-Schwarz).  The norms are computed in doubles: each
// square is exact (48 bits), their sum is at most (1 + gamma(K)) off, the square root half an ulp; and nothing
// underflows (every value is zero or an integer).  With K u <= 2^-20, gamma(K - 1) (1 + gamma(K))^2 (1 + u)^4 <
// 2 K u, so row_bound[i] = sqrt(2 K u) ||a_i|| and col_bound[j] = sqrt(2 K u) ||b_j|| (both rounded up by a factor
// 1 + 2^-40) give |D_ij - S_ij| <= row_bound[i] col_bound[j].
void approximate_product(IntegerKernel kernel, int m, int n, int k, const std::vector<double>& a,
                         const std::vector<double>& b, double* d, std::vector<double>& row_bound,
                         std::vector<double>& col_bound) {
  integer_gemm(kernel, m, n, k, a.data(), k, b.data(), n, d, n);
  const double scale = std::sqrt(2.0 * std::max(k, 1) * 0x1p-53) * (1 + 0x1p-40);
  row_bound.assign(static_cast<std::size_t>(m), 0.0);
  col_bound.assign(static_cast<std::size_t>(n), 0.0);
  tbb::parallel_for(tbb::blocked_range<int>(0, m, 64), [&](const tbb::blocked_range<int>& r) {
    for (int i = r.begin(); i != r.end(); ++i) {
      double s = 0;
      const double* row = a.data() + static_cast<std::size_t>(i) * static_cast<std::size_t>(k);
      for (int q = 0; q < k; ++q) s += row[q] * row[q];
      row_bound[static_cast<std::size_t>(i)] = std::sqrt(s) * scale;
    }
  });
  for (int q = 0; q < k; ++q) {  // B row by row: every column's sum of squares at once
    const double* row = b.data() + static_cast<std::size_t>(q) * static_cast<std::size_t>(n);
    for (int j = 0; j < n; ++j) col_bound[static_cast<std::size_t>(j)] += row[j] * row[j];
  }
  for (double& c : col_bound) c = std::sqrt(c) * scale;
}

i128 exact_element(const double* a_row, const double* bt_row, int k) {
  i128 s = 0;
  for (int q = 0; q < k; ++q)
    s += static_cast<i128>(static_cast<std::int64_t>(a_row[q])) * static_cast<std::int64_t>(bt_row[q]);
  return s;
}

bool exact_integer_product(IntegerKernel kernel, int m, int n, int k, const std::vector<double>& a_in,
                           const std::vector<double>& b_in, const std::function<void(const ProductRows&)>& rows,
                           const ProductOptions& options) {
  Widths wa, wb;
  Plan plan;
  if (!plan_for(k, a_in, b_in, options, wa, wb, plan)) return false;
  std::vector<double> a_storage, b_storage;
  const std::vector<double>& a = without_common(a_in, wa.common, a_storage);
  const std::vector<double>& b = without_common(b_in, wb.common, b_storage);
  const bool one_slice = plan.slice >= k;
  // Rows in blocks, so that the bands of A and the sums stay a few tens of MiB at any size.
  const int block = std::max(1, std::min(m, (1 << 21) / std::max(n, 1)));
  bool a_wanted[4] = {}, b_wanted[4] = {};
  for (const Piece& p : plan.pieces) {
    a_wanted[static_cast<int>(p.a)] = true;
    b_wanted[static_cast<int>(p.b)] = true;
  }
  std::vector<double> a_bands[4], b_bands[4];
  const double* bb[4] = {};
  band_rows(b, n, 0, k, plan.shift, b_wanted, b_bands, bb);
  const std::size_t block_size = static_cast<std::size_t>(block) * static_cast<std::size_t>(n);
  const bool in_place = options.product != nullptr && one_slice && plan.pieces.size() == 1;
  std::vector<std::vector<double>> products(in_place    ? 0
                                            : one_slice ? plan.pieces.size()
                                                        : 1,
                                            std::vector<double>(block_size));
  std::vector<i128> sums(one_slice ? 0 : block_size);
  for (int i0 = 0; i0 < m; i0 += block) {
    const int i1 = std::min(m, i0 + block), r = i1 - i0;
    const std::size_t count = static_cast<std::size_t>(r) * static_cast<std::size_t>(n);
    ProductRows out;
    out.i0 = i0;
    out.i1 = i1;
    out.shift = wa.common + wb.common;
    const double* ab[4] = {};
    band_rows(a, k, i0, i1, plan.shift, a_wanted, a_bands, ab);
    auto multiply = [&](const Piece& p, int k0, int kc, double* product) {
      integer_gemm(kernel, r, n, kc, ab[static_cast<int>(p.a)] + k0, k,
                   bb[static_cast<int>(p.b)] + static_cast<std::size_t>(k0) * static_cast<std::size_t>(n), n, product,
                   n);
    };
    if (one_slice) {  // the pieces handed over as they are, combined by the receiver
      out.pieces = static_cast<int>(plan.pieces.size());
      for (std::size_t p = 0; p < plan.pieces.size(); ++p) {
        double* product = in_place ? options.product + static_cast<std::size_t>(i0) * static_cast<std::size_t>(n)
                                   : products[p].data();
        multiply(plan.pieces[p], 0, k, product);
        out.values[p] = product;
        out.coefficient[p] = plan.pieces[p].coefficient;
      }
      rows(out);
      continue;
    }
    std::fill_n(sums.begin(), count, i128{0});
    for (int k0 = 0; k0 < k; k0 += plan.slice) {
      const int kc = std::min(plan.slice, k - k0);
      for (const Piece& p : plan.pieces) {
        multiply(p, k0, kc, products[0].data());
        const i128 coefficient = p.coefficient;
        const double* product = products[0].data();
        tbb::parallel_for(tbb::blocked_range<std::size_t>(0, count, 1 << 14),
                          [&](const tbb::blocked_range<std::size_t>& q) {
                            for (std::size_t i = q.begin(); i != q.end(); ++i)
                              sums[i] += coefficient * static_cast<i128>(static_cast<std::int64_t>(product[i]));
                          });
      }
    }
    out.sums = sums.data();
    rows(out);
  }
  return true;
}

}  // namespace lowbit::gemm::detail
