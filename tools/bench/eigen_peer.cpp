// Eigen's f32 GEMM as a benchmark peer.  Compiled twice (tools/bench/CMakeLists.txt), with the function names
// and the flags string given by LOWBIT_EIGEN_PEER (native or portable) and LOWBIT_EIGEN_PEER_FLAGS.
#define LOWBIT_CONCAT2(a, b) a##b
#define LOWBIT_CONCAT(a, b) LOWBIT_CONCAT2(a, b)
#define LOWBIT_PEER_FN(suffix) LOWBIT_CONCAT(LOWBIT_CONCAT(eigen_, LOWBIT_EIGEN_PEER), suffix)

// Each build gets Eigen in a namespace of its own: the two object files would otherwise define the same
// instantiations of Eigen's templates (its GEMM kernel among them) with different code, and the linker would
// keep one of them for both peers.
#define Eigen LOWBIT_CONCAT(lowbit_eigen_, LOWBIT_EIGEN_PEER)
#include <Eigen/Core>
#include <string>

#include "gemm_peers.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace lowbit_bench {

void LOWBIT_PEER_FN(_sgemm)(int n, const float* a, const float* b, float* c, int threads) {
  Eigen::setNbThreads(threads);
  const Eigen::Map<const Eigen::MatrixXf> ma(a, n, n), mb(b, n, n);
  Eigen::Map<Eigen::MatrixXf> mc(c, n, n);
  mc.noalias() = ma * mb;
}

std::string LOWBIT_PEER_FN(_flags)() { return LOWBIT_EIGEN_PEER_FLAGS; }

#ifdef LOWBIT_EIGEN_PEER_IS_NATIVE
std::string eigen_version() {
  return std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) + "." +
         std::to_string(EIGEN_MINOR_VERSION) + " (SIMD: " + Eigen::SimdInstructionSetsInUse() + ")";
}
int eigen_max_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}
#endif

}  // namespace lowbit_bench
