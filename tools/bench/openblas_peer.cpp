// OpenBLAS's sgemm and dgemm as benchmark peers (Debian's libopenblas0-pthread, built with DYNAMIC_ARCH: the
// kernels for the CPU are chosen when the library loads, or named by OPENBLAS_CORETYPE).
#include <cblas.h>

#include <string>

#include "gemm_peers.hpp"

namespace lowbit_bench {

void openblas_threads(int threads) { openblas_set_num_threads(threads); }

void openblas_sgemm(int n, const float* a, const float* b, float* c, int threads) {
  openblas_set_num_threads(threads);
  cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
}

void openblas_dgemm(int n, const double* a, const double* b, double* c, int threads) {
  openblas_set_num_threads(threads);
  cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, a, n, b, n, 0.0, c, n);
}

std::string openblas_description() { return std::string(openblas_get_config()) + ", core " + openblas_get_corename(); }

}  // namespace lowbit_bench
