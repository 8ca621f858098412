// The exact GEMM's integer products (reference/src/integer_gemm.hpp): OpenBLAS's dgemm and the library's plain
// blocked loop against a third computation that shares nothing with either, a triple loop summing in 128-bit
// integers.  Operands sit at the edge of the 2^53 bound (products and partial sums just below it), and the band
// splits and K slices of exact_integer_product are each forced by the operands' ranges.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "random_codes.hpp"
#include "src/integer_gemm.hpp"

namespace {

using lowbit::gemm::detail::approximate_product;
using lowbit::gemm::detail::exact_element;
using lowbit::gemm::detail::exact_integer_product;
using lowbit::gemm::detail::i128;
using lowbit::gemm::detail::integer_gemm;
using lowbit::gemm::detail::IntegerKernel;
using lowbit::gemm::detail::ProductRows;
using lowbit::testing::splitmix;

constexpr IntegerKernel kKernels[] = {IntegerKernel::blas, IntegerKernel::plain};

std::string name(IntegerKernel k) { return k == IntegerKernel::blas ? "blas" : "plain"; }

// A uniformly random integer of magnitude below 2^bits, either sign; a quarter of them at the largest magnitude.
double random_integer(int bits, std::uint64_t& s) {
  const std::uint64_t top = (std::uint64_t{1} << bits) - 1;
  const std::uint64_t mag = splitmix(s) % 4 == 0 ? top : splitmix(s) & top;
  return (splitmix(s) & 1) ? -static_cast<double>(mag) : static_cast<double>(mag);
}

// A value as a float format holds it: a significand of `sig` bits times 2^e, e in [0, span), or zero.
double random_float_like(int sig, int span, std::uint64_t& s) {
  if (splitmix(s) % 8 == 0) return 0.0;
  const std::uint64_t mag = (std::uint64_t{1} << (sig - 1)) | (splitmix(s) & ((std::uint64_t{1} << (sig - 1)) - 1));
  const double v =
      std::ldexp(static_cast<double>(mag), static_cast<int>(splitmix(s) % static_cast<std::uint64_t>(span)));
  return (splitmix(s) & 1) ? -v : v;
}

template <class Gen>
std::vector<double> matrix(int rows, int cols, Gen gen) {
  std::vector<double> v(static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols));
  for (double& x : v) x = gen();
  return v;
}

// The reference: A B summed exactly in 128-bit integers.
std::vector<i128> triple_loop(int m, int n, int k, const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<i128> c(static_cast<std::size_t>(m) * static_cast<std::size_t>(n), 0);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j)
      for (int q = 0; q < k; ++q)
        c[static_cast<std::size_t>(i) * n + j] +=
            static_cast<i128>(static_cast<std::int64_t>(a[static_cast<std::size_t>(i) * k + q])) *
            static_cast<i128>(static_cast<std::int64_t>(b[static_cast<std::size_t>(q) * n + j]));
  return c;
}

// integer_gemm on operands whose products and K-sums reach just below 2^53: widths wa + wb + bit_width(K) = 53.
TEST(IntegerGemm, BothKernelsExactAtTheBound) {
  std::uint64_t s = 0x1A7E0001;
  for (int trial = 0; trial < 40; ++trial) {
    const int m = 1 + static_cast<int>(splitmix(s) % 37), n = 1 + static_cast<int>(splitmix(s) % 41);
    const int k = 1 + static_cast<int>(splitmix(s) % 700);
    const int kbits = std::bit_width(static_cast<unsigned>(k));
    const int wa = 1 + static_cast<int>(splitmix(s) % static_cast<std::uint64_t>(52 - kbits)), wb = 53 - kbits - wa;
    // Leading dimensions wider than the matrices: the kernels must read and write only their own columns.
    const int lda = k + static_cast<int>(splitmix(s) % 3), ldb = n + static_cast<int>(splitmix(s) % 3);
    const int ldc = n + static_cast<int>(splitmix(s) % 3);
    const auto a = matrix(m, lda, [&] { return random_integer(wa, s); });
    const auto b = matrix(k, ldb, [&] { return random_integer(wb, s); });
    std::vector<i128> want(static_cast<std::size_t>(m) * n, 0);
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j)
        for (int q = 0; q < k; ++q)
          want[static_cast<std::size_t>(i) * n + j] +=
              static_cast<i128>(static_cast<std::int64_t>(a[static_cast<std::size_t>(i) * lda + q])) *
              static_cast<i128>(static_cast<std::int64_t>(b[static_cast<std::size_t>(q) * ldb + j]));
    for (IntegerKernel kernel : kKernels) {
      std::vector<double> c(static_cast<std::size_t>(m) * ldc, -1.0);
      integer_gemm(kernel, m, n, k, a.data(), lda, b.data(), ldb, c.data(), ldc);
      for (int i = 0; i < m; ++i) {
        for (int j = 0; j < n; ++j)
          ASSERT_EQ(static_cast<i128>(static_cast<std::int64_t>(c[static_cast<std::size_t>(i) * ldc + j])),
                    want[static_cast<std::size_t>(i) * n + j])
              << name(kernel) << " trial " << trial << ": " << m << "x" << k << "x" << n << ", widths " << wa << "+"
              << wb << ", output (" << i << ", " << j << ")";
        for (int j = n; j < ldc; ++j) ASSERT_EQ(c[static_cast<std::size_t>(i) * ldc + j], -1.0) << name(kernel);
      }
    }
  }
}

struct ProductCase {
  const char* what;
  int m, n, k;
  std::vector<double> a, b;
};

void expect_exact(const ProductCase& t) {
  const std::vector<i128> want = triple_loop(t.m, t.n, t.k, t.a, t.b);
  for (IntegerKernel kernel : kKernels) {
    std::vector<i128> got(want.size(), 7);
    int next_row = 0;
    const bool done = exact_integer_product(kernel, t.m, t.n, t.k, t.a, t.b, [&](const ProductRows& r) {
      ASSERT_EQ(r.i0, next_row) << t.what;
      ASSERT_TRUE((r.sums != nullptr) != (r.pieces > 0)) << t.what;
      for (std::size_t i = 0; i < static_cast<std::size_t>(r.i1 - r.i0) * t.n; ++i)
        got[static_cast<std::size_t>(r.i0) * t.n + i] = r.sum(i) << r.shift;
      next_row = r.i1;
    });
    ASSERT_TRUE(done) << t.what << " (" << name(kernel) << ") was refused";
    EXPECT_EQ(next_row, t.m) << t.what;
    for (std::size_t i = 0; i < want.size(); ++i)
      ASSERT_TRUE(got[i] == want[i]) << t.what << " (" << name(kernel) << "): output " << i << " differs";
  }
}

// Each route of exact_integer_product, forced by the operands' ranges.
TEST(IntegerGemm, ExactProductOnEveryRoute) {
  std::uint64_t s = 0x1A7E0002;
  for (int trial = 0; trial < 6; ++trial) {
    const int m = 1 + static_cast<int>(splitmix(s) % 6), n = 1 + static_cast<int>(splitmix(s) % 9);
    // One product: 20 + 20 bits, K = 1000 (51 bits).
    expect_exact({"one product", m, n, 1000, matrix(m, 1000, [&] { return random_integer(20, s); }),
                  matrix(1000, n, [&] { return random_integer(20, s); })});
    // One product over slices of K: 21 + 21 bits allow 2048 terms per slice; K = 5000 takes three.  (Neither
    // operand splits: random integers mostly have bit 0 set, so every band would be as wide as the whole.)
    expect_exact({"slices of K", m, n, 5000, matrix(m, 5000, [&] { return random_integer(21, s); }),
                  matrix(5000, n, [&] { return random_integer(21, s); })});
    // One operand split: A 10 bits, B e5m2-like (3 significant bits over 38): one product would need 48 bits
    // and so slices of 32; B in two bands of about 21 bits keeps slices of 2^22.
    expect_exact({"B split", m, n, 700, matrix(m, 700, [&] { return random_integer(10, s); }),
                  matrix(700, n, [&] { return random_float_like(3, 38, s); })});
    expect_exact({"A split", m, n, 700, matrix(m, 700, [&] { return random_float_like(3, 38, s); }),
                  matrix(700, n, [&] { return random_integer(10, s); })});
    // Both split (three products): e5m2 on its grid (3 significant bits over 32) on both sides.
    expect_exact({"both split", m, n, 1500, matrix(m, 1500, [&] { return random_float_like(3, 30, s); }),
                  matrix(1500, n, [&] { return random_float_like(3, 30, s); })});
    // Both split over slices of K: 8 significant bits over 26 (33 bits wide) on both sides split at 13 into bands
    // of 20 bits, whose products allow slices of 2^13 = 8192: K = 9000 takes two.  (One side split would leave
    // 33 + 20 bits, and one product 66.)
    expect_exact({"both split, slices of K", m, n, 9000, matrix(m, 9000, [&] { return random_float_like(8, 26, s); }),
                  matrix(9000, n, [&] { return random_float_like(8, 26, s); })});
  }
  // Common trailing zeros: every value of A a multiple of 2^20 and of B of 2^9 (as f16 values far from its
  // smallest are on its grid), 30 + 30 bits wide; taken out, one product of 10 + 21 bits.
  expect_exact({"common factors", 4, 5, 800, matrix(4, 800, [&] { return std::ldexp(random_integer(10, s), 20); }),
                matrix(800, 5, [&] { return std::ldexp(random_integer(21, s), 9); })});
  // K = 0: every sum is zero.
  expect_exact({"K = 0", 3, 4, 0, {}, {}});
}

// The filtered route's bound: |D - S| <= row_bound[i] col_bound[j] for D from either kernel and S the exact sum
// (exact_element against the 128-bit triple loop), on e5m2-like operands (3 significant bits over 32) whose
// products span far more than a double holds, half of them cancelling in pairs.
TEST(IntegerGemm, ApproximateProductWithinItsBound) {
  std::uint64_t s = 0x1A7E0004;
  for (int trial = 0; trial < 8; ++trial) {
    const int m = 1 + static_cast<int>(splitmix(s) % 5), n = 1 + static_cast<int>(splitmix(s) % 7);
    const int k = 2 * (50 + static_cast<int>(splitmix(s) % 1500));
    auto a = matrix(m, k, [&] { return random_float_like(3, 30, s); });
    auto b = matrix(k, n, [&] { return random_float_like(3, 30, s); });
    for (int q = 0; q < k / 2; ++q)  // A's second half repeats the first, B's negates it in even columns
      for (int j = 0; j < n; j += 2)
        b[static_cast<std::size_t>(k / 2 + q) * n + j] = -b[static_cast<std::size_t>(q) * n + j];
    for (int i = 0; i < m; ++i)
      for (int q = 0; q < k / 2; ++q)
        a[static_cast<std::size_t>(i) * k + k / 2 + q] = a[static_cast<std::size_t>(i) * k + q];
    const std::vector<i128> want = triple_loop(m, n, k, a, b);
    std::vector<double> bt(b.size());
    for (int q = 0; q < k; ++q)
      for (int j = 0; j < n; ++j) bt[static_cast<std::size_t>(j) * k + q] = b[static_cast<std::size_t>(q) * n + j];
    for (IntegerKernel kernel : kKernels) {
      std::vector<double> d(static_cast<std::size_t>(m) * n), rows, cols;
      approximate_product(kernel, m, n, k, a, b, d.data(), rows, cols);
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
          const i128 exact = want[static_cast<std::size_t>(i) * n + j];
          ASSERT_TRUE(exact_element(a.data() + static_cast<std::size_t>(i) * k,
                                    bt.data() + static_cast<std::size_t>(j) * k, k) == exact);
          // |D - S| in long double: 64 significant bits, its own error (below 2^-63 |S|) far below the bound.
          const long double err = std::fabs(static_cast<long double>(d[static_cast<std::size_t>(i) * n + j]) -
                                            static_cast<long double>(exact));
          EXPECT_LE(err,
                    static_cast<long double>(rows[static_cast<std::size_t>(i)]) * cols[static_cast<std::size_t>(j)])
              << name(kernel) << " trial " << trial << " output (" << i << ", " << j << ")";
        }
    }
  }
}

TEST(IntegerGemm, RefusesWhatNoSplitKeepsBelow2To53) {
  std::uint64_t s = 0x1A7E0003;
  // Random 40-bit integers on both sides: one product needs 80 bits and no band is narrower than the whole.
  const auto a = matrix(2, 300, [&] { return random_integer(40, s); });
  const auto b = matrix(300, 2, [&] { return random_integer(40, s); });
  bool called = false;
  for (IntegerKernel kernel : kKernels)
    EXPECT_FALSE(exact_integer_product(kernel, 2, 2, 300, a, b, [&](const ProductRows&) { called = true; }));
  EXPECT_FALSE(called);
  // A value that is not an integer, or one of 2^53 or more.
  std::vector<double> half(4, 0.5), big(4, 0x1p53);
  EXPECT_FALSE(exact_integer_product(IntegerKernel::plain, 2, 2, 2, half, half, [](const ProductRows&) {}));
  EXPECT_FALSE(exact_integer_product(IntegerKernel::plain, 2, 2, 2, big, big, [](const ProductRows&) {}));
}

}  // namespace
