// GEMM throughput, lowbit side by side with its f32 peers in one run (ratios, never a lone absolute time).
//
//   BM_Gemm/<impl>/n:<n>/threads:<t>/real_time, wall time per n x n x n GEMM:
//     peers (gemm_peers.hpp, each built at its best; tools/bench/README.md):
//       eigen_f32           Eigen's f32 product, -O3 -march=native (and -fopenmp: Eigen::setNbThreads(t));
//       eigen_f32_portable  the same source at the project's flags (no -march: SSE2), as this benchmark had it;
//       openblas_sgemm      OpenBLAS's cblas_sgemm (openblas_set_num_threads(t));
//       openblas_dgemm      OpenBLAS's cblas_dgemm of the same values as doubles;
//     lowbit (inside a oneTBB arena of t threads; the exact route's dgemm on t OpenBLAS threads):
//       exact_e4m3, exact_e5m2          gemm::exact (integer-valued f64 products through OpenBLAS, rounded once);
//       hopper-fp8                      gemm::run_model (MMA-Sim's Hopper FP8 wgmma, k = 32 per step);
//       hopper-fp8-promote128           gemm::run_promoted(hopper-fp8, 128) (DeepGEMM's promotion);
//       hopper-fp8-block-scaled         gemm::run_block_scaled(hopper-fp8) (1x128 and 128x128 f32 scales);
//       hopper-fp8-mma-sync             gemm::run_model (FP8 mma.sync on Hopper: two f16 steps per 32 of K);
//       hopper-f16, hopper-bf16, hopper-tf32   gemm::run_model of those models.
//   Sizes: n = 1024 for every row; n = 4096 for the peers and the exact rows (LOWBIT_GEMM_BENCH_LARGE=0 leaves
//   it out).
// Operands: uniformly random finite e4m3 (e5m2) codes, seeded, for the fp8 rows and the peers (the same values as
// f32 or f64); normally distributed values (sigma 1) rounded to f16, bf16 or f32 for the hopper-f16, -bf16 and
// -tf32 rows.  The JSON context records every peer's flags and version.
#include <benchmark/benchmark.h>
#include <tbb/task_arena.h>
#include <tbb/version.h>

#include <bit>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gemm_peers.hpp"
#include "lowbit/convert.hpp"
#include "lowbit/format.hpp"
#include "lowbit/gemm.hpp"

namespace {

using namespace lowbit;
using gemm::Matrix;

Matrix random_fp8(const Format& f, int rows, int cols, std::uint32_t seed) {
  std::mt19937 g(seed);
  Matrix m{&f, rows, cols, {}};
  m.codes.reserve(static_cast<std::size_t>(rows) * cols);
  while (m.codes.size() < static_cast<std::size_t>(rows) * cols) {
    const std::uint64_t c = g() & 0xFF;
    if (!f.is_nan_code(c) && !f.is_inf_code(c)) m.codes.push_back(c);
  }
  return m;
}

// Normally distributed values (sigma 1) rounded to f (nearest even).
Matrix random_normal(const Format& f, int rows, int cols, std::uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  Matrix m{&f, rows, cols, {}};
  m.codes.resize(static_cast<std::size_t>(rows) * cols);
  for (auto& c : m.codes) c = convert(formats::f32, std::bit_cast<std::uint32_t>(d(g)), f, Policy{}).code;
  return m;
}

// Operands are made once per kind and size, on first use.
const Matrix& operand(const std::string& kind, int n, int which) {
  static std::map<std::string, Matrix> cache;
  const std::string key = kind + "/" + std::to_string(n) + "/" + std::to_string(which);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  const auto seed = static_cast<std::uint32_t>(1 + which);
  Matrix m = kind == "e5m2"   ? random_fp8(formats::e5m2, n, n, seed)
             : kind == "f16"  ? random_normal(formats::f16, n, n, seed)
             : kind == "bf16" ? random_normal(formats::bf16, n, n, seed)
             : kind == "f32"  ? random_normal(formats::f32, n, n, seed)
                              : random_fp8(formats::e4m3, n, n, seed);
  return cache.emplace(key, std::move(m)).first->second;
}

template <class T>
std::vector<T> as_values(const Matrix& m) {
  std::vector<T> v(m.codes.size());
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<T>(
        std::bit_cast<float>(static_cast<std::uint32_t>(convert(*m.format, m.codes[i], formats::f32, Policy{}).code)));
  return v;
}

template <class T, class Fn>
void peer(benchmark::State& state, Fn gemm_fn) {
  const int n = static_cast<int>(state.range(0)), threads = static_cast<int>(state.range(1));
  const std::vector<T> a = as_values<T>(operand("e4m3", n, 0)), b = as_values<T>(operand("e4m3", n, 1));
  std::vector<T> c(a.size());
  for (auto _ : state) {
    gemm_fn(n, a.data(), b.data(), c.data(), threads);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  state.counters["threads"] = threads;
}

void eigen_peer(benchmark::State& state, void (*fn)(int, const float*, const float*, float*, int)) {
  if (state.range(1) > lowbit_bench::eigen_max_threads()) {
    state.SkipWithError("Eigen was built without OpenMP: single-threaded only");
    return;
  }
  peer<float>(state, fn);
}

template <class Fn>
void lowbit_gemm(benchmark::State& state, const std::string& kind, Fn fn) {
  const int n = static_cast<int>(state.range(0)), threads = static_cast<int>(state.range(1));
  const Matrix &a = operand(kind, n, 0), &b = operand(kind, n, 1);
  tbb::task_arena arena(threads);
  lowbit_bench::openblas_threads(threads);  // the exact route's dgemm
  for (auto _ : state) {
    std::vector<std::uint64_t> d;
    arena.execute([&] { d = fn(a, b); });
    benchmark::DoNotOptimize(d.data());
    benchmark::ClobberMemory();
  }
  state.counters["threads"] = threads;
}

// DeepGEMM's scales: one f32 per row and 128 of K for A, one per 128 x 128 block for B; powers of two times
// 1, 1.25, 1.5 or 1.75.
Matrix block_scales(int rows, int cols, std::uint32_t seed) {
  std::mt19937 g(seed);
  Matrix s{&formats::f32, rows, cols, {}};
  for (int i = 0; i < rows * cols; ++i)
    s.codes.push_back(std::bit_cast<std::uint32_t>(
        std::ldexp(1.0f + static_cast<float>(g() % 4) / 4, static_cast<int>(g() % 9) - 4)));
  return s;
}

void register_all() {
  const bool large = [] {
    const char* e = std::getenv("LOWBIT_GEMM_BENCH_LARGE");
    return e == nullptr || std::string(e) != "0";
  }();
  auto add = [](const std::string& name, auto fn, int n) {
    for (int t : {1, 2})
      benchmark::RegisterBenchmark(("BM_Gemm/" + name).c_str(), fn)
          ->Args({n, t})
          ->ArgNames({"n", "threads"})
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
  };
  const auto* hopper = gemm::find_model("hopper-fp8");
  auto model_row = [&](const std::string& row, const char* model_name, const std::string& kind) {
    const gemm::TensorCoreModel* model = gemm::find_model(model_name);
    add(
        row,
        [model, kind](benchmark::State& s) {
          lowbit_gemm(s, kind,
                      [model](const Matrix& a, const Matrix& b) { return gemm::run_model(*model, a, b, nullptr); });
        },
        1024);
  };
  for (int n : {1024, 4096}) {
    if (n == 4096 && !large) continue;
    add(
        "eigen_f32", [](benchmark::State& s) { eigen_peer(s, lowbit_bench::eigen_native_sgemm); }, n);
    if (n == 1024)
      add(
          "eigen_f32_portable", [](benchmark::State& s) { eigen_peer(s, lowbit_bench::eigen_portable_sgemm); }, n);
    add(
        "openblas_sgemm", [](benchmark::State& s) { peer<float>(s, lowbit_bench::openblas_sgemm); }, n);
    add(
        "openblas_dgemm", [](benchmark::State& s) { peer<double>(s, lowbit_bench::openblas_dgemm); }, n);
    add(
        "exact_e4m3",
        [](benchmark::State& s) {
          lowbit_gemm(s, "e4m3", [](const Matrix& a, const Matrix& b) { return gemm::exact(a, b, nullptr); });
        },
        n);
    add(
        "exact_e5m2",
        [](benchmark::State& s) {
          lowbit_gemm(s, "e5m2", [](const Matrix& a, const Matrix& b) { return gemm::exact(a, b, nullptr); });
        },
        n);
  }
  model_row("hopper-fp8", "hopper-fp8", "e4m3");
  add(
      "hopper-fp8-promote128",
      [hopper](benchmark::State& s) {
        lowbit_gemm(s, "e4m3", [hopper](const Matrix& a, const Matrix& b) {
          return gemm::run_promoted(*hopper, 128, a, b, nullptr);
        });
      },
      1024);
  add(
      "hopper-fp8-block-scaled",
      [hopper](benchmark::State& s) {
        const int n = static_cast<int>(s.range(0)), kb = (n + 127) / 128;
        const Matrix sa = block_scales(n, kb, 3), sb = block_scales(kb, kb, 4);
        lowbit_gemm(s, "e4m3", [&](const Matrix& a, const Matrix& b) {
          return gemm::run_block_scaled(*hopper, a, b, sa, sb, nullptr);
        });
      },
      1024);
  model_row("hopper-fp8-mma-sync", "hopper-fp8-mma-sync", "e4m3");
  model_row("hopper-f16", "hopper-f16", "f16");
  model_row("hopper-bf16", "hopper-bf16", "bf16");
  model_row("hopper-tf32", "hopper-tf32", "f32");
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::AddCustomContext("eigen_f32.flags", lowbit_bench::eigen_native_flags());
  benchmark::AddCustomContext("eigen_f32_portable.flags", lowbit_bench::eigen_portable_flags());
  benchmark::AddCustomContext("eigen.version", lowbit_bench::eigen_version());
  benchmark::AddCustomContext("openblas", lowbit_bench::openblas_description());
  const char* core = std::getenv("OPENBLAS_CORETYPE");
  benchmark::AddCustomContext("openblas.coretype_env", core ? core : "(unset: detected at load)");
  benchmark::AddCustomContext("lowbit.flags", LOWBIT_BENCH_FLAGS);
  benchmark::AddCustomContext("compiler", LOWBIT_BENCH_COMPILER);
  benchmark::AddCustomContext("tbb.version", TBB_VERSION_STRING);
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
