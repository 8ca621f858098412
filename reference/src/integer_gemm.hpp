// Exact products of integer-valued f64 matrices: the fast route of gemm::exact (src/gemm.cpp).  Internal
// to the library; conformance/gemm/test_integer_gemm.cpp holds the BLAS route to the plain one.
#pragma once
#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

namespace lowbit::gemm::detail {

__extension__ typedef __int128 i128;

enum class IntegerKernel : std::uint8_t {
  blas,   // OpenBLAS's dgemm (cblas_dgemm), on OpenBLAS's own threads
  plain,  // a blocked loop of this library (oneTBB), the twin the BLAS route is proven equal to
};

// C (m x n, leading dimension ldc) = A (m x k, lda) B (k x n, ldb), row-major, for doubles holding integers
// whose every product and partial sum stays below 2^53 in magnitude.  Every multiplication and addition is
// then exact, so any kernel, any blocking and any order of the additions give the one exact answer.
void integer_gemm(IntegerKernel kernel, int m, int n, int k, const double* a, int lda, const double* b, int ldb,
                  double* c, int ldc);

// Slices of K shorter than this make a BLAS call not worth its setup; a split that needs them is refused.
inline constexpr int kMinSlice = 256;

// A block of rows [i0, i1) of an exact product (row-major, n per row), each sum times 2^shift: either 128-bit
// `sums`, or, when one slice of K sufficed, sum = coefficient[0] * values[0][i] + ... over `pieces` band products
// (integers in doubles; coefficient[0] = 1 when there is one piece).
struct ProductRows {
  int i0 = 0, i1 = 0;
  int shift = 0;
  const i128* sums = nullptr;
  int pieces = 0;
  const double* values[3] = {};
  i128 coefficient[3] = {};
  // Element i's sum.  The doubles are read through memcpy: they may lie in storage of another type
  // (ProductOptions::product).
  i128 sum(std::size_t i) const {
    if (sums) return sums[i];
    i128 s = 0;
    for (int p = 0; p < pieces; ++p) {
      double v;
      std::memcpy(&v, values[p] + i, sizeof v);
      s += coefficient[p] * static_cast<i128>(static_cast<std::int64_t>(v));
    }
    return s;
  }
};

// The exact integer product A B of integer-valued doubles below 2^53 in magnitude (A is m x k, B is k x n,
// row-major), at any K: common trailing zero bits are taken out, then each operand is split, when its range asks
// for it, into two bands whose products integer_gemm computes exactly over slices of K, and the pieces are
// combined exactly in 128-bit integers.  `rows` receives the product block after block, in order.  Returns false,
// having called nothing, when no split keeps every piece below 2^53 with slices of at least min(K, kMinSlice).
struct ProductOptions {
  // Bounds on the operands known beforehand (|a| < 2^a_width, from their format's grid, say): when they keep one
  // band product below 2^53 the operands are not measured.  0: unknown.
  int a_width = 0, b_width = 0;
  // m x n doubles (say, the caller's output reused) where one band product over one slice of K may be written
  // instead of a buffer of its own; null: none.
  double* product = nullptr;
};
bool exact_integer_product(IntegerKernel kernel, int m, int n, int k, const std::vector<double>& a,
                           const std::vector<double>& b, const std::function<void(const ProductRows&)>& rows,
                           const ProductOptions& options = {});

// How many band products exact_integer_product would compute (pieces times slices of K); 0 when it would refuse.
long integer_product_cost(int k, const std::vector<double>& a, const std::vector<double>& b,
                          const ProductOptions& options = {});

// The filtered route of gemm::exact, where exact_integer_product would take three band products or more.  D = fl(A B)
// in one BLAS product of the integer-valued doubles (into `d`, m x n row-major), with bounds such that
//   |D_ij - (A B)_ij| <= row_bound[i] * col_bound[j]
// whatever order of additions the BLAS takes (the derivation is at its definition).  Operands: integers below 2^53
// in magnitude of at most 24 significant bits (every product exact in a double).
void approximate_product(IntegerKernel kernel, int m, int n, int k, const std::vector<double>& a,
                         const std::vector<double>& b, double* d, std::vector<double>& row_bound,
                         std::vector<double>& col_bound);

// (A B)_ij exactly: row i of A and row j of B transposed, k long, summed in 128 bits (each product of two integers
// below 2^53; the caller keeps the sum below 2^126).
i128 exact_element(const double* a_row, const double* bt_row, int k);

}  // namespace lowbit::gemm::detail
