// The vendor peer: cuBLASLt's FP8 GEMM with per-tensor scale pointers, amax of D and fast accumulation
// on or off, in the same "TN" convention as lowbit/device/gemm.hpp:
//
//   D (M x N, row-major) = scale_d * (alpha * scale_a * scale_b * A (M x K, row-major) * B (K x N, column-major)
//                                     + beta * scale_c * C)
//   amax_d = max |alpha * scale_a * scale_b * AB + beta * scale_c * C| (before scale_d, as cuBLASLt defines it)
//
// In cuBLASLt's column-major terms this is D^T (N x M) = B^T A^T: cuBLASLt's A is our B with
// transa = T (K x N stored, ld = K) and its B is our A with transb = N (K x M stored, ld = K), the
// only layout Hopper's FP8 kernels take ("TN").  Our scale_a / scale_b are attached to cuBLASLt's B / A.
//
// Every cuBLASLt call goes through LOWBIT_CUBLAS_CHECK, which throws lowbit::device::Error naming the call,
// the file, the line and cublasLtGetStatusName / cublasLtGetStatusString.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "lowbit/device/check.hpp"

namespace lowbit::device {

void check_cublas(cublasStatus_t s, const char* call, const char* file, int line);

}  // namespace lowbit::device

#define LOWBIT_CUBLAS_CHECK(call) ::lowbit::device::check_cublas((call), #call, __FILE__, __LINE__)

namespace lowbit::device::cublaslt {

enum class Type : std::uint8_t { e4m3, e5m2, f32, bf16 };
const char* name(Type t);
std::size_t bytes(Type t);

struct Fp8Gemm {
  int m = 0, n = 0, k = 0;
  const void* a = nullptr;  // M x K, row-major (row stride K)
  Type a_type = Type::e4m3;
  const void* b = nullptr;  // K x N, column-major (column stride K)
  Type b_type = Type::e4m3;
  // Optional C (M x N, row-major): f32 for an f32 D, bf16 for a bf16 or e4m3 D (cuBLASLt's C type for an
  // FP8 D).  Without C, beta must be 0; an e4m3 D then still needs a C buffer for cuBLASLt's descriptor
  // check, so an e4m3 D requires `c`.
  const void* c = nullptr;
  void* d = nullptr;  // M x N, row-major
  Type d_type = Type::f32;
  float alpha = 1.0f, beta = 0.0f;  // host scalars
  // Device pointers to one f32 each, or null (= 1).  scale_d and amax_d only with an e4m3 D.
  const float* scale_a = nullptr;
  const float* scale_b = nullptr;
  const float* scale_c = nullptr;
  const float* scale_d = nullptr;
  float* amax_d = nullptr;
  bool fast_accum = false;  // CUBLASLT_MATMUL_DESC_FAST_ACCUM
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  cudaStream_t stream = nullptr;
};

// The argument checks run() makes (no GPU needed): empty when valid, else a message naming the argument.
std::string validate(const Fp8Gemm& g);

// One cuBLASLt algorithm, held fixed across problems: its id and configuration (tile, stages, CTA swizzling,
// custom option, inner shape, cluster shape), always without split-K.  A gate pins one so that every case
// runs the same kernel with the same summation order, whatever the heuristic would pick per shape.
struct PinnedAlgo {
  int id = -1;
  std::uint32_t config[6] = {};
  std::size_t workspace = 0;  // what the heuristic reported for the problem it was chosen on
};
std::string describe(const PinnedAlgo& a);

// A cuBLASLt handle plus the last heuristic choice, reused across calls with the same problem.
class Handle {
 public:
  Handle();
  ~Handle();
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  cublasLtHandle_t get() const { return handle_; }

  // Validates, builds the descriptors, asks the heuristic for its candidate algorithms (within the
  // workspace and the actual pointer alignments), launches the first one cublasLtMatmul accepts on
  // g.stream and remembers it per problem signature, so repeated calls skip the heuristic.  Throws
  // std::invalid_argument for bad arguments, lowbit::device::Error for a cuBLASLt failure or when no algorithm exists.
  void run(const Fp8Gemm& g);
  // The same, but a cublasLtMatmul that refuses every candidate algorithm with CUBLAS_STATUS_NOT_SUPPORTED
  // returns that status (name: cublasLtGetStatusName) instead of throwing; other failures still throw.
  cublasStatus_t try_run(const Fp8Gemm& g);

  // The heuristic's first candidate for g's problem that splits K into one slice and reduces nothing
  // (CUBLASLT_ALGO_CONFIG_SPLITK_NUM 1, REDUCTION_SCHEME none).  Throws Error when there is none.
  PinnedAlgo choose_pinned(const Fp8Gemm& g);
  // Runs g with exactly the pinned algorithm (split-K 1).  Throws std::invalid_argument for bad arguments and
  // Error naming the algorithm and the shape when cublasLtMatmulAlgoCheck refuses it for g's problem.
  void run_pinned(const Fp8Gemm& g, const PinnedAlgo& pin);

  // The heuristic's choice of the last run(): workspace bytes it needs, and the algorithm id.
  std::size_t last_workspace() const { return last_workspace_; }
  int last_algo_id() const { return last_algo_id_; }

 private:
  struct Problem;
  struct Choice {
    cublasLtMatmulAlgo_t algo;
    std::size_t workspace;
    int id;
  };
  cublasLtHandle_t handle_ = nullptr;
  std::map<std::vector<long long>, Choice> choices_;  // problem signature -> heuristic result
  std::size_t last_workspace_ = 0;
  int last_algo_id_ = -1;
};

}  // namespace lowbit::device::cublaslt
