// Conversion throughput, every implementation side by side in one run (ratios, never a lone
// absolute time).
//
//   BM_Convert/<target>/<impl>: f32 -> target over 2^24 uniformly random 32-bit patterns (every class:
//     NaN, infinity, subnormal, normal, as the exhaustive sweeps see them), items per second.
//     Semantics: the `cuda` profile (rne + satfinite for fp8/fp4, rne + nosat for bf16/f16), so every
//     implementation computes the same codes.
//     impl: floor       the memory floor (convert_floor.hpp): read the f32 values, write one code's bytes per
//                       value, nothing else, built at -O3 -march=native;
//           simd        lowbit::convert_batch, codes only;
//           floor/threads:2, simd/threads:2   the same on two threads (oneTBB, the input cut in 16 chunks);
//           simd_flags  lowbit::convert_batch with flags and ternary;
//           scalar      lowbit::convert one element at a time;
//           exact       lowbit::exact::convert (GMP rationals), on the first 2^14 inputs;
//           cuda_host   the CUDA toolkit's host conversions (when its headers were found);
//           eigen       Eigen::bfloat16 / Eigen::half (bf16 and f16 only).
//   BM_Sweep/e4m3/<impl>: all 2^32 f32 inputs into e4m3 (rne + satfinite) on 2 threads (oneTBB):
//     simd alone, the toolkit alone, and the differential sweep (both, compared code by code; the
//     mismatch count is reported as a counter and must be 0).
#include <benchmark/benchmark.h>
#include <hwy/highway.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>
#include <tbb/task_arena.h>
#include <tbb/version.h>

#include <Eigen/Core>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "convert_floor.hpp"
#include "lowbit/batch.hpp"
#include "lowbit/convert.hpp"
#include "lowbit/exact.hpp"
#include "lowbit/format.hpp"
#include "lowbit/profile.hpp"

#if LOWBIT_BENCH_CUDA_HOST
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp4.h>
#include <cuda_fp8.h>
#endif

namespace {

using namespace lowbit;

constexpr std::size_t kInputs = std::size_t{1} << 24;
constexpr std::size_t kExactInputs = std::size_t{1} << 14;
constexpr int kSweepThreads = 2;

const std::vector<std::uint32_t>& input_bits() {
  static const std::vector<std::uint32_t> v = [] {
    std::vector<std::uint32_t> r(kInputs);
    std::mt19937 g(20240601);
    for (auto& x : r) x = static_cast<std::uint32_t>(g());
    return r;
  }();
  return v;
}

const std::vector<float>& input_floats() {
  static const std::vector<float> v = [] {
    std::vector<float> r(kInputs);
    std::memcpy(r.data(), input_bits().data(), kInputs * sizeof(float));
    return r;
  }();
  return v;
}

float as_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

Policy cuda_policy(const Format& to) {
  std::string error;
  const auto r = resolve(find_profile("cuda"), to, PolicyRequest{}, error);
  if (!r) throw std::runtime_error("cuda profile: " + error);
  return r->policy;
}

void finish(benchmark::State& state, std::size_t n) {
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(n));
}

void simd(benchmark::State& state, const Format* to, bool with_flags) {
  const Policy p = cuda_policy(*to);
  const auto& in = input_bits();
  std::vector<std::uint8_t> out(kInputs * batch_code_bytes(*to));
  std::vector<std::uint8_t> flags(with_flags ? kInputs : 0);
  std::vector<std::int8_t> ternary(with_flags ? kInputs : 0);
  for (auto _ : state) {
    convert_batch(formats::f32, in.data(), kInputs, *to, p, out.data(), with_flags ? flags.data() : nullptr,
                  with_flags ? ternary.data() : nullptr, nullptr);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetLabel(batch_target_name());
  finish(state, kInputs);
}

// `body(begin, end)` over the inputs on `threads` threads: 16 equal chunks.
template <class Body>
void on_threads(int threads, const Body& body) {
  if (threads == 1) {
    body(std::size_t{0}, kInputs);
    return;
  }
  static tbb::task_arena arena(threads);
  arena.execute([&] {
    tbb::parallel_for(
        tbb::blocked_range<std::size_t>(0, kInputs, kInputs / 16),
        [&](const tbb::blocked_range<std::size_t>& r) { body(r.begin(), r.end()); }, tbb::static_partitioner());
  });
}

void simd_threads(benchmark::State& state, const Format* to, int threads) {
  const Policy p = cuda_policy(*to);
  const auto& in = input_bits();
  const std::size_t bytes = batch_code_bytes(*to);
  std::vector<std::uint8_t> out(kInputs * bytes);
  for (auto _ : state) {
    on_threads(threads, [&](std::size_t b, std::size_t e) {
      convert_batch(formats::f32, in.data() + b, e - b, *to, p, out.data() + b * bytes, nullptr, nullptr, nullptr);
    });
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetLabel(batch_target_name());
  state.counters["threads"] = threads;
  finish(state, kInputs);
}

void floor_threads(benchmark::State& state, const Format* to, int threads, lowbit_bench::FloorStores stores) {
  const auto& in = input_bits();
  const int bytes = static_cast<int>(batch_code_bytes(*to));
  std::vector<std::uint8_t> out(kInputs * static_cast<std::size_t>(bytes));
  for (auto _ : state) {
    on_threads(threads, [&](std::size_t b, std::size_t e) {
      lowbit_bench::floor_kernel(in.data() + b, e - b, bytes, out.data() + b * static_cast<std::size_t>(bytes), stores);
    });
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.counters["threads"] = threads;
  finish(state, kInputs);
}

void scalar(benchmark::State& state, const Format* to) {
  const Policy p = cuda_policy(*to);
  const auto& in = input_bits();
  std::vector<std::uint16_t> out(kInputs);
  for (auto _ : state) {
    for (std::size_t i = 0; i < kInputs; ++i)
      out[i] = static_cast<std::uint16_t>(convert(formats::f32, in[i], *to, p).code);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  finish(state, kInputs);
}

void exact_path(benchmark::State& state, const Format* to) {
  const Policy p = cuda_policy(*to);
  const auto& in = input_bits();
  std::vector<std::uint16_t> out(kExactInputs);
  for (auto _ : state) {
    for (std::size_t i = 0; i < kExactInputs; ++i)
      out[i] = static_cast<std::uint16_t>(exact::convert(formats::f32, in[i], *to, p).code);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  finish(state, kExactInputs);
}

template <class F>
void per_element(benchmark::State& state, F convert_one) {
  const auto& in = input_floats();
  std::vector<std::uint16_t> out(kInputs);
  for (auto _ : state) {
    for (std::size_t i = 0; i < kInputs; ++i) out[i] = convert_one(in[i]);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  finish(state, kInputs);
}

std::uint16_t eigen_bf16(float x) { return Eigen::numext::bit_cast<std::uint16_t>(Eigen::bfloat16(x)); }
std::uint16_t eigen_f16(float x) { return Eigen::numext::bit_cast<std::uint16_t>(Eigen::half(x)); }

#if LOWBIT_BENCH_CUDA_HOST
// The toolkit's host paths (cuda_fp8.h, cuda_fp4.h, cuda_bf16.h, cuda_fp16.h), the same calls the
// `cuda` profile names.
std::uint16_t cuda_e4m3(float x) { return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3); }
std::uint16_t cuda_e5m2(float x) { return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2); }
std::uint16_t cuda_e2m1(float x) { return __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest); }
std::uint16_t cuda_bf16(float x) {
  const __nv_bfloat16 h = __float2bfloat16_rn(x);
  std::uint16_t u;
  std::memcpy(&u, &h, sizeof u);
  return u;
}
std::uint16_t cuda_f16(float x) {
  const __half h = __float2half_rn(x);
  std::uint16_t u;
  std::memcpy(&u, &h, sizeof u);
  return u;
}

// The exhaustive f32 -> e4m3 sweep in blocks of 2^16 inputs on kSweepThreads threads.
enum class SweepKind { simd, cuda_host, differential };

void sweep(benchmark::State& state, SweepKind kind) {
  const Policy p = cuda_policy(formats::e4m3);
  constexpr std::uint64_t block = std::uint64_t{1} << 16;
  constexpr std::uint64_t blocks = (std::uint64_t{1} << 32) / block;
  tbb::task_arena arena(kSweepThreads);
  std::atomic<std::uint64_t> mismatches{0};
  for (auto _ : state) {
    arena.execute([&] {
      tbb::parallel_for(tbb::blocked_range<std::uint64_t>(0, blocks), [&](const tbb::blocked_range<std::uint64_t>& r) {
        std::vector<std::uint32_t> in(block);
        std::vector<std::uint8_t> ours(block), theirs(block);
        std::uint64_t bad = 0;
        for (std::uint64_t b = r.begin(); b != r.end(); ++b) {
          for (std::uint64_t i = 0; i < block; ++i) in[i] = static_cast<std::uint32_t>(b * block + i);
          if (kind != SweepKind::cuda_host)
            convert_batch(formats::f32, in.data(), block, formats::e4m3, p, ours.data(), nullptr, nullptr, nullptr);
          if (kind != SweepKind::simd)
            for (std::uint64_t i = 0; i < block; ++i) theirs[i] = static_cast<std::uint8_t>(cuda_e4m3(as_float(in[i])));
          if (kind == SweepKind::differential)
            for (std::uint64_t i = 0; i < block; ++i) bad += ours[i] != theirs[i];
          benchmark::DoNotOptimize(ours.data());
          benchmark::DoNotOptimize(theirs.data());
        }
        mismatches += bad;
      });
    });
  }
  state.counters["threads"] = kSweepThreads;
  if (kind == SweepKind::differential) state.counters["mismatches"] = static_cast<double>(mismatches.load());
  finish(state, std::size_t{1} << 32);
}
#endif

struct Target {
  const char* name;
  const Format* format;
  std::uint16_t (*cuda_host)(float);
  std::uint16_t (*eigen)(float);
};

void register_all() {
#if LOWBIT_BENCH_CUDA_HOST
  const Target targets[] = {{"e4m3", &formats::e4m3, cuda_e4m3, nullptr},
                            {"e5m2", &formats::e5m2, cuda_e5m2, nullptr},
                            {"e2m1", &formats::e2m1, cuda_e2m1, nullptr},
                            {"bf16", &formats::bf16, cuda_bf16, eigen_bf16},
                            {"f16", &formats::f16, cuda_f16, eigen_f16}};
#else
  const Target targets[] = {{"e4m3", &formats::e4m3, nullptr, nullptr},
                            {"e5m2", &formats::e5m2, nullptr, nullptr},
                            {"e2m1", &formats::e2m1, nullptr, nullptr},
                            {"bf16", &formats::bf16, nullptr, eigen_bf16},
                            {"f16", &formats::f16, nullptr, eigen_f16}};
#endif
  for (const Target& t : targets) {
    const std::string base = std::string("BM_Convert/") + t.name + "/";
    const Format* f = t.format;
    using lowbit_bench::FloorStores;
    for (auto [suffix, stores] : {std::pair{"", FloorStores::cached}, std::pair{"_stream", FloorStores::streaming}}) {
      const FloorStores st = stores;
      benchmark::RegisterBenchmark((base + "floor" + suffix).c_str(),
                                   [f, st](benchmark::State& s) { floor_threads(s, f, 1, st); })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
      benchmark::RegisterBenchmark((base + "floor" + suffix + "/threads:2").c_str(),
                                   [f, st](benchmark::State& s) { floor_threads(s, f, 2, st); })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
    benchmark::RegisterBenchmark((base + "simd").c_str(), [f](benchmark::State& s) { simd(s, f, false); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark((base + "simd/threads:2").c_str(), [f](benchmark::State& s) { simd_threads(s, f, 2); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark((base + "simd_flags").c_str(), [f](benchmark::State& s) { simd(s, f, true); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark((base + "scalar").c_str(), [f](benchmark::State& s) { scalar(s, f); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark((base + "exact").c_str(), [f](benchmark::State& s) { exact_path(s, f); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    if (t.cuda_host != nullptr) {
      auto fn = t.cuda_host;
      benchmark::RegisterBenchmark((base + "cuda_host").c_str(), [fn](benchmark::State& s) { per_element(s, fn); })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
    if (t.eigen != nullptr) {
      auto fn = t.eigen;
      benchmark::RegisterBenchmark((base + "eigen").c_str(), [fn](benchmark::State& s) { per_element(s, fn); })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
#if LOWBIT_BENCH_CUDA_HOST
  for (auto [name, kind] : {std::pair{"simd", SweepKind::simd}, std::pair{"cuda_host", SweepKind::cuda_host},
                            std::pair{"differential", SweepKind::differential}}) {
    const SweepKind k = kind;
    benchmark::RegisterBenchmark((std::string("BM_Sweep/e4m3/") + name).c_str(),
                                 [k](benchmark::State& s) { sweep(s, k); })
        ->Unit(benchmark::kSecond)
        ->Iterations(1)
        ->UseRealTime();
  }
#endif
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::AddCustomContext("lowbit.flags", LOWBIT_BENCH_FLAGS);
  benchmark::AddCustomContext("floor.flags", lowbit_bench::floor_flags());
  benchmark::AddCustomContext("compiler", LOWBIT_BENCH_COMPILER);
  benchmark::AddCustomContext(
      "highway.version", std::to_string(HWY_MAJOR) + "." + std::to_string(HWY_MINOR) + "." + std::to_string(HWY_PATCH));
  benchmark::AddCustomContext("tbb.version", TBB_VERSION_STRING);
  benchmark::AddCustomContext("lowbit.simd_target", batch_target_name());
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
