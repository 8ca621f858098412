// FP8 GEMM throughput: the CUTLASS kernels (fast accumulation, promotion every 128 on two mainloops,
// DeepSeek block scaling) against cuBLASLt (fast accumulation on and off) at 4096^3 and 8192^3, bf16 D, in one run.
//
//   lowbit_device_gemm_bench [--json PATH] [--reps N]
//
// Inputs are random non-zero e4m3 codes (quantized N(0,1)); at 4096 two input sets rotate so that A and B
// do not stay in L2 between launches (2 x 32 MB > the 50-60 MB L2).  Each repetition times a batch of
// launches between two cudaEvents, recorded after one untimed launch so that the host's per-call work
// (descriptor set-up, heuristics) overlaps the previous kernel; the reported time is the median per-launch
// time over the repetitions.  Without a GPU it prints a message and exits 0.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "lowbit/device/check.hpp"
#include "lowbit/device/cublaslt.hpp"
#include "lowbit/device/gemm.hpp"

namespace {

namespace dg = lowbit::device::gemm;
namespace lt = lowbit::device::cublaslt;

struct DeviceMemory {
  void* p = nullptr;
  explicit DeviceMemory(std::size_t bytes) { LOWBIT_CUDA_CHECK(cudaMalloc(&p, bytes)); }
  ~DeviceMemory() {
    if (p) cudaFree(p);
  }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
};

struct Result {
  int size = 0;
  std::string impl;
  double ms = 0, tflops = 0;
  bool ran = false;
  std::string why;
};

// Quantized N(0,1) e4m3 codes, none zero or NaN: |x| in [2^-6, 4], e4m3 = s eeee mmm with bias 7.
std::vector<std::uint8_t> random_codes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::uint8_t> table(4096);
  for (auto& t : table) {
    float x = normal(rng);
    float mag = std::clamp(std::fabs(x), 0x1p-6f, 4.0f);
    int e = 0;
    const float f = std::frexp(mag, &e);  // mag = f * 2^e, f in [0.5, 1)
    int mant = static_cast<int>(std::lround((f * 2.0f - 1.0f) * 8.0f));
    int exp = e - 1 + 7;
    if (mant == 8) {
      mant = 0;
      ++exp;
    }
    t = static_cast<std::uint8_t>((x < 0 ? 0x80 : 0) | (exp << 3) | mant);
  }
  std::vector<std::uint8_t> v(n);
  for (auto& c : v) c = table[rng() & 4095];
  return v;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

// Milliseconds per launch of `launch(i)` over `inner` back-to-back launches (i rotates the input set;
// `counter` carries the rotation across calls).
double time_ms(const std::function<void(int)>& launch, int inner, int& counter) {
  cudaEvent_t start, stop;
  LOWBIT_CUDA_CHECK(cudaEventCreate(&start));
  LOWBIT_CUDA_CHECK(cudaEventCreate(&stop));
  launch(counter++);  // untimed: the host's set-up of the next launch overlaps it
  LOWBIT_CUDA_CHECK(cudaEventRecord(start));
  for (int j = 0; j < inner; ++j) launch(counter++);
  LOWBIT_CUDA_CHECK(cudaEventRecord(stop));
  LOWBIT_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  LOWBIT_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  LOWBIT_CUDA_CHECK(cudaGetLastError());
  LOWBIT_CUDA_CHECK(cudaEventDestroy(start));
  LOWBIT_CUDA_CHECK(cudaEventDestroy(stop));
  return static_cast<double>(ms) / inner;
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += (c == '\n') ? ' ' : c;
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  std::string json;
  int reps = 15;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--json") && i + 1 < argc) {
      json = argv[++i];
    } else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) {
      reps = std::max(10, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--json PATH] [--reps N (>= 10)]\n", argv[0]);
      return 2;
    }
  }
  const auto probe = lowbit::device::probe_gpu();
  if (!probe.present) {
    std::printf("lowbit_device_gemm_bench: no GPU (%s); nothing measured\n", probe.why.c_str());
    return 0;
  }
  const auto& gpu = probe.info;
  if (gpu.capability() < 89) {
    std::printf("lowbit_device_gemm_bench: %s (sm_%d) has no FP8 tensor cores (needs sm_89+); nothing measured\n",
                gpu.name.c_str(), gpu.capability());
    return 0;
  }
  const bool hopper = gpu.major == 9;
  std::vector<Result> results;
  try {
    lt::Handle handle;
    const std::size_t ws_bytes = 32u << 20;
    DeviceMemory workspace(ws_bytes);
    for (int n : {4096, 8192}) {
      const std::size_t elems = static_cast<std::size_t>(n) * n;
      const int sets = n <= 4096 ? 2 : 1;
      const int inner = n <= 4096 ? 10 : 3;
      std::vector<std::unique_ptr<DeviceMemory>> as, bs;
      for (int s = 0; s < sets; ++s) {
        as.push_back(std::make_unique<DeviceMemory>(elems));
        bs.push_back(std::make_unique<DeviceMemory>(elems));
        const auto ca = random_codes(elems, 1000 + 2 * s + n);
        const auto cb = random_codes(elems, 1001 + 2 * s + n);
        LOWBIT_CUDA_CHECK(cudaMemcpy(as.back()->p, ca.data(), elems, cudaMemcpyHostToDevice));
        LOWBIT_CUDA_CHECK(cudaMemcpy(bs.back()->p, cb.data(), elems, cudaMemcpyHostToDevice));
      }
      DeviceMemory d(elems * 2);  // bf16
      // Block scales near 1 (powers of two times a random mantissa).
      std::vector<float> sfa(dg::sfa_count(n, n)), sfb(dg::sfb_count(n, n));
      std::mt19937 rng(7);
      std::uniform_real_distribution<float> u(0.5f, 2.0f);
      for (auto& x : sfa) x = u(rng);
      for (auto& x : sfb) x = u(rng);
      DeviceMemory dsfa(sfa.size() * 4), dsfb(sfb.size() * 4);
      LOWBIT_CUDA_CHECK(cudaMemcpy(dsfa.p, sfa.data(), sfa.size() * 4, cudaMemcpyHostToDevice));
      LOWBIT_CUDA_CHECK(cudaMemcpy(dsfb.p, sfb.data(), sfb.size() * 4, cudaMemcpyHostToDevice));
      const double flop = 2.0 * n * static_cast<double>(n) * n;

      // Every implementation of this size is timed in interleaved rounds (round r times each one once),
      // so that clock and power drift over the run affects all of them alike; the median over rounds
      // is reported.
      std::vector<std::pair<std::string, std::function<void(int)>>> pending;
      auto record = [&](const std::string& impl, const std::function<void(int)>& launch) {
        pending.emplace_back(impl, launch);
      };
      // Launch configurations side by side (device/tests/gemm_test.cpp checks each one bit for bit):
      // the default (cluster 1x1x1, no swizzle), the scheduler's swizzle 8, and for the promoted and
      // blockwise mainloops also cluster 2x1x1 (B multicast) with swizzle 8.  promoted_blockwise is the
      // promoted arithmetic on the blockwise mainloop (unit scales).
      struct Variant {
        dg::Mode mode;
        int cluster_m, swizzle;
      };
      const Variant variants[] = {{dg::Mode::fast_accum, 1, 1}, {dg::Mode::fast_accum, 1, dg::kMaxSwizzle},
                                  {dg::Mode::promoted, 1, 1},   {dg::Mode::promoted, 1, dg::kMaxSwizzle},
                                  {dg::Mode::promoted, 2, dg::kMaxSwizzle},
                                  {dg::Mode::blockwise, 1, 1},  {dg::Mode::blockwise, 1, dg::kMaxSwizzle},
                                  {dg::Mode::blockwise, 2, dg::kMaxSwizzle},
                                  {dg::Mode::promoted_blockwise, 1, 1},
                                  {dg::Mode::promoted_blockwise, 1, dg::kMaxSwizzle},
                                  {dg::Mode::promoted_blockwise, 2, dg::kMaxSwizzle}};
      for (const Variant& v : variants) {
        const dg::Mode mode = v.mode;
        std::string impl = std::string("cutlass.") + dg::name(mode);
        if (v.cluster_m != 1) impl += ".cluster" + std::to_string(v.cluster_m) + "x1";
        if (v.swizzle != 1) impl += ".swizzle" + std::to_string(v.swizzle);
        if (!hopper) {
          results.push_back({n, impl, 0, 0, false, "the wgmma kernels need sm_90a"});
          continue;
        }
        dg::Fp8Gemm g;
        g.mode = mode;
        g.cluster_m = v.cluster_m;
        g.swizzle = v.swizzle;
        g.m = g.n = g.k = n;
        g.d = d.p;
        g.d_type = dg::Out::bf16;
        if (mode == dg::Mode::blockwise) {
          g.sfa = static_cast<const float*>(dsfa.p);
          g.sfb = static_cast<const float*>(dsfb.p);
        }
        g.workspace = workspace.p;
        g.workspace_bytes = ws_bytes;
        record(impl, [&, g](int i) mutable {
          g.a = as[i % sets]->p;
          g.b = bs[i % sets]->p;
          dg::run(g);
        });
      }
      for (bool fast : {true, false}) {
        lt::Fp8Gemm g;
        g.m = g.n = g.k = n;
        g.d = d.p;
        g.d_type = lt::Type::bf16;
        g.fast_accum = fast;
        g.workspace = workspace.p;
        g.workspace_bytes = ws_bytes;
        record(fast ? "cublaslt.fast_accum" : "cublaslt.no_fast_accum", [&, g](int i) mutable {
          g.a = as[i % sets]->p;
          g.b = bs[i % sets]->p;
          handle.run(g);
        });
      }
      std::vector<Result> sized(pending.size());
      std::vector<std::vector<double>> per(pending.size());
      std::vector<bool> failed(pending.size(), false);
      for (std::size_t k = 0; k < pending.size(); ++k) {
        sized[k].size = n;
        sized[k].impl = pending[k].first;
      }
      int counter = 0;
      for (int round = -1; round < reps; ++round) {  // round -1: warm-up, not recorded
        for (std::size_t k = 0; k < pending.size(); ++k) {
          if (failed[k]) continue;
          try {
            const double ms = time_ms(pending[k].second, round < 0 ? 3 : inner, counter);
            if (round >= 0) per[k].push_back(ms);
          } catch (const std::exception& e) {
            failed[k] = true;
            sized[k].why = e.what();
            std::printf("  %s at %d: %s\n", pending[k].first.c_str(), n, e.what());
          }
        }
      }
      for (std::size_t k = 0; k < pending.size(); ++k) {
        if (failed[k] || per[k].empty()) {
          results.push_back(sized[k]);
          continue;
        }
        sized[k].ms = median(per[k]);
        sized[k].tflops = flop / (sized[k].ms * 1e-3) / 1e12;
        sized[k].ran = true;
        results.push_back(sized[k]);
      }
    }
  } catch (const std::exception& e) {
    std::printf("lowbit_device_gemm_bench: %s\n", e.what());
    return 1;
  }

  auto find = [&](int n, const std::string& impl) -> const Result* {
    for (const auto& r : results)
      if (r.size == n && r.impl == impl && r.ran) return &r;
    return nullptr;
  };
  struct Ratio {
    int size;
    std::string num, den;
    double value;
    double target;
  };
  std::vector<Ratio> ratios;
  for (int n : {4096, 8192}) {
    const std::pair<const char*, const char*> pairs[] = {
        {"cutlass.fast_accum", "cublaslt.fast_accum"},
        {"cutlass.fast_accum.swizzle8", "cublaslt.fast_accum"},
        {"cutlass.promoted", "cublaslt.no_fast_accum"},
        {"cutlass.promoted.swizzle8", "cublaslt.no_fast_accum"},
        {"cutlass.promoted.cluster2x1.swizzle8", "cublaslt.no_fast_accum"},
        {"cutlass.blockwise", "cublaslt.no_fast_accum"},
        {"cutlass.blockwise.swizzle8", "cublaslt.no_fast_accum"},
        {"cutlass.blockwise.cluster2x1.swizzle8", "cublaslt.no_fast_accum"},
        {"cutlass.promoted_blockwise", "cublaslt.no_fast_accum"},
        {"cutlass.promoted_blockwise.swizzle8", "cublaslt.no_fast_accum"},
        {"cutlass.promoted_blockwise.cluster2x1.swizzle8", "cublaslt.no_fast_accum"}};
    for (auto [num, den] : pairs) {
      const Result* a = find(n, num);
      const Result* b = find(n, den);
      // Targets: fast accumulation >= 0.95 of cuBLASLt's, the promoted and block-scaled kernels >= 0.90 of
      // cuBLASLt without fast accumulation.
      const double target = std::string(den) == "cublaslt.fast_accum" ? 0.95 : 0.90;
      if (a && b) ratios.push_back({n, num, den, a->tflops / b->tflops, target});
    }
  }

  std::printf("FP8 GEMM (e4m3 x e4m3 -> bf16, TN) on %s (sm_%d, %d SMs), median of %d interleaved rounds\n", gpu.name.c_str(),
              gpu.capability(), gpu.sms, reps);
  std::printf("%6s  %-48s %10s %10s\n", "size", "implementation", "ms", "TFLOP/s");
  for (const auto& r : results) {
    if (r.ran) std::printf("%6d  %-48s %10.4f %10.1f\n", r.size, r.impl.c_str(), r.ms, r.tflops);
    else std::printf("%6d  %-48s %10s %10s  (%s)\n", r.size, r.impl.c_str(), "-", "-", r.why.c_str());
  }
  for (const auto& q : ratios)
    std::printf("%6d  %s / %s = %.3f (target >= %.2f)%s\n", q.size, q.num.c_str(), q.den.c_str(), q.value, q.target,
                q.value >= q.target ? "" : "  BELOW TARGET");

  if (!json.empty()) {
    FILE* f = std::fopen(json.c_str(), "w");
    if (!f) {
      std::printf("cannot write %s\n", json.c_str());
      return 1;
    }
    std::fprintf(f, "{\n  \"benchmark\": \"lowbit_device_gemm_bench\",\n  \"gpu\": \"%s\",\n  \"capability\": %d,\n",
                 json_escape(gpu.name).c_str(), gpu.capability());
    std::fprintf(f, "  \"d_type\": \"bf16\",\n  \"repetitions\": %d,\n  \"results\": [\n",
                 reps);
    for (std::size_t i = 0; i < results.size(); ++i) {
      const auto& r = results[i];
      std::fprintf(
          f, "    {\"size\": %d, \"impl\": \"%s\", \"ran\": %s, \"ms\": %.6f, \"tflops\": %.3f, \"why\": \"%s\"}%s\n",
          r.size, r.impl.c_str(), r.ran ? "true" : "false", r.ms, r.tflops, json_escape(r.why).c_str(),
          i + 1 < results.size() ? "," : "");
    }
    std::fprintf(f, "  ],\n  \"ratios\": [\n");
    for (std::size_t i = 0; i < ratios.size(); ++i)
      std::fprintf(f,
                   "    {\"size\": %d, \"numerator\": \"%s\", \"denominator\": \"%s\", \"ratio\": %.4f, \"target\": %.2f}%s\n",
                   ratios[i].size, ratios[i].num.c_str(), ratios[i].den.c_str(), ratios[i].value, ratios[i].target,
                   i + 1 < ratios.size() ? "," : "");
    std::fprintf(f, "  ]\n}\n");
    std::fclose(f);
  }
  return 0;
}
