// The GEMM benchmark's peers, each built at its best (tools/bench/CMakeLists.txt): Eigen's f32 product compiled
// twice from eigen_peer.cpp (-O3 -march=native, and the project's own portable flags), and OpenBLAS's sgemm and
// dgemm (Debian's build, whose kernels are chosen at run time; OPENBLAS_CORETYPE overrides the choice).
#pragma once
#include <string>

namespace lowbit_bench {

// C = A B for n x n column-major matrices on `threads` OpenMP threads (1 when built without OpenMP).
void eigen_native_sgemm(int n, const float* a, const float* b, float* c, int threads);
void eigen_portable_sgemm(int n, const float* a, const float* b, float* c, int threads);
// The flags each Eigen build was compiled with, Eigen's version, and the most threads its OpenMP offers.
std::string eigen_native_flags();
std::string eigen_portable_flags();
std::string eigen_version();
int eigen_max_threads();

// OpenBLAS, on `threads` of its own threads.
void openblas_sgemm(int n, const float* a, const float* b, float* c, int threads);
void openblas_dgemm(int n, const double* a, const double* b, double* c, int threads);
void openblas_threads(int threads);
std::string openblas_description();  // version, build configuration and the kernel core it chose

}  // namespace lowbit_bench
