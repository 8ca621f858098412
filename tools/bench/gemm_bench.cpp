// GEMM throughput at M = N = K = 1024, side by side in one run (ratios, never a lone absolute
// time).
//
//   BM_Gemm/<impl>/threads:<t>, wall time per GEMM:
//     eigen_f32              Eigen::MatrixXf product of the same values as f32 (with t > 1 only when this
//                            benchmark was built with OpenMP, Eigen::setNbThreads(t));
//     exact_e4m3             lowbit::gemm::exact (the exact product rounded once to f32, rne);
//     hopper-fp8             lowbit::gemm::run_model (MMA-Sim's Hopper FP8 model, k = 32 per step);
//     hopper-fp8-promote128  lowbit::gemm::run_promoted (the model per 128 of K, promoted into f32).
//   lowbit's drivers run inside a oneTBB arena of t threads.
// Operands: uniformly random finite e4m3 codes (seeded), the same for every implementation.
#include <benchmark/benchmark.h>
#include <tbb/task_arena.h>

#include <Eigen/Core>
#include <bit>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "lowbit/convert.hpp"
#include "lowbit/format.hpp"
#include "lowbit/gemm.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace {

using namespace lowbit;
using gemm::Matrix;

constexpr int kSize = 1024;

Matrix random_e4m3(int rows, int cols, std::uint32_t seed) {
  std::mt19937 g(seed);
  Matrix m{&formats::e4m3, rows, cols, {}};
  m.codes.reserve(static_cast<std::size_t>(rows) * cols);
  while (m.codes.size() < static_cast<std::size_t>(rows) * cols) {
    const std::uint64_t c = g() & 0xFF;
    if (!formats::e4m3.is_nan_code(c)) m.codes.push_back(c);
  }
  return m;
}

const Matrix& operand_a() {
  static const Matrix m = random_e4m3(kSize, kSize, 1);
  return m;
}
const Matrix& operand_b() {
  static const Matrix m = random_e4m3(kSize, kSize, 2);
  return m;
}

Eigen::MatrixXf as_eigen(const Matrix& m) {
  Eigen::MatrixXf r(m.rows, m.cols);
  for (int i = 0; i < m.rows; ++i)
    for (int j = 0; j < m.cols; ++j)
      r(i, j) = std::bit_cast<float>(
          static_cast<std::uint32_t>(convert(*m.format, m.at(i, j), formats::f32, Policy{}).code));
  return r;
}

int eigen_threads_available() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

void eigen_f32(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  if (threads > eigen_threads_available()) {
    state.SkipWithError("Eigen was built without OpenMP: single-threaded only");
    return;
  }
  Eigen::setNbThreads(threads);
  const Eigen::MatrixXf a = as_eigen(operand_a()), b = as_eigen(operand_b());
  Eigen::MatrixXf c(kSize, kSize);
  for (auto _ : state) {
    c.noalias() = a * b;
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  state.counters["threads"] = Eigen::nbThreads();
  Eigen::setNbThreads(1);
}

template <class Fn>
void lowbit_gemm(benchmark::State& state, Fn fn) {
  const int threads = static_cast<int>(state.range(0));
  const Matrix &a = operand_a(), &b = operand_b();
  tbb::task_arena arena(threads);
  for (auto _ : state) {
    std::vector<std::uint64_t> d;
    arena.execute([&] { d = fn(a, b); });
    benchmark::DoNotOptimize(d.data());
    benchmark::ClobberMemory();
  }
  state.counters["threads"] = threads;
}

void register_all() {
  const gemm::TensorCoreModel* hopper = gemm::find_model("hopper-fp8");
  const gemm::TensorCoreModel* mma_sync = gemm::find_model("hopper-fp8-mma-sync");
  for (int t : {1, 2}) {
    benchmark::RegisterBenchmark("BM_Gemm/eigen_f32", eigen_f32)->Arg(t)->ArgName("threads")->Unit(benchmark::kMillisecond)->UseRealTime();
    benchmark::RegisterBenchmark("BM_Gemm/exact_e4m3", [](benchmark::State& s) {
      lowbit_gemm(s, [](const Matrix& a, const Matrix& b) { return gemm::exact(a, b, nullptr); });
    })->Arg(t)->ArgName("threads")->Unit(benchmark::kMillisecond)->UseRealTime();
    benchmark::RegisterBenchmark("BM_Gemm/hopper-fp8", [hopper](benchmark::State& s) {
      lowbit_gemm(s, [hopper](const Matrix& a, const Matrix& b) { return gemm::run_model(*hopper, a, b, nullptr); });
    })->Arg(t)->ArgName("threads")->Unit(benchmark::kMillisecond)->UseRealTime();
    // FP8 mma.sync on Hopper: operands converted to f16 and K permuted once, then two f16 steps per 32 of K.
    benchmark::RegisterBenchmark("BM_Gemm/hopper-fp8-mma-sync", [mma_sync](benchmark::State& s) {
      lowbit_gemm(s, [mma_sync](const Matrix& a, const Matrix& b) { return gemm::run_model(*mma_sync, a, b, nullptr); });
    })->Arg(t)->ArgName("threads")->Unit(benchmark::kMillisecond)->UseRealTime();
    benchmark::RegisterBenchmark("BM_Gemm/hopper-fp8-promote128", [hopper](benchmark::State& s) {
      lowbit_gemm(s, [hopper](const Matrix& a, const Matrix& b) {
        return gemm::run_promoted(*hopper, 128, a, b, nullptr);
      });
    })->Arg(t)->ArgName("threads")->Unit(benchmark::kMillisecond)->UseRealTime();
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
