// lowbit_device_quantize_bench: each device quantizer's effective bandwidth against a measured device-to-device
// copy.  Bytes counted = the f32 input once per pass that reads it (quant::input_reads: a two-pass scheme such
// as per-tensor current scaling reads it twice, and both reads count) + codes written (one byte each) + scales
// written (+ the random words read under stochastic rounding).  The copy moves 2 x its size (read + write).
// Target: >= 90% of the copy for each scheme's fastest path.  Both element paths are reported: the software
// path (the 32-bit lowbit::fast::convert under the constant element policies; rows marked "general" run the
// general lowbit::convert under a runtime policy for comparison) and the hardware cvt path.  "row amax only"
// is the rows route's loads and reductions alone (quant::row_amax): the read floor of the fused pass.
//
// Usage: lowbit_device_quantize_bench [--json PATH] [--rows R] [--cols C] [--reps N]
// Timing: cudaEvents around each launch sequence, after two warm-up runs, median of --reps runs; the input
// (16384 x 8192 f32 = 512 MiB by default) is far larger than L2, so no rotation is needed.  Without a GPU the
// binary says so and exits 0.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "lowbit/device/check.hpp"
#include "lowbit/device/quantize.hpp"
#include "lowbit/format.hpp"
#include "lowbit/scale.hpp"

namespace {

namespace scale = lowbit::scale;
namespace quant = lowbit::device::quant;
namespace formats = lowbit::formats;

// Normal-ish data from a counter hash (sum of four uniforms), never all zeros; a few per mille outliers.
__global__ void fill_kernel(float* x, std::uint32_t* rb, std::size_t n) {
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    std::uint64_t z = i * 0x9E3779B97F4A7C15ull + 0x1234567ull;
    float s = 0;
    for (int k = 0; k < 4; ++k) {
      z ^= z >> 31;
      z *= 0xBF58476D1CE4E5B9ull;
      z ^= z >> 29;
      s += static_cast<float>(z >> 40) * 0x1p-24f;
    }
    x[i] = (s - 2.0f) * ((z & 0x3FF) == 0 ? 64.0f : 1.0f);
    rb[i] = static_cast<std::uint32_t>(z >> 7);
  }
}

struct Row {
  std::string name;
  double ms = 0, gbs = 0, fraction = 0;
  int passes = 1;
};

double median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string json;
  int rows = 16384, cols = 8192, reps = 7;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json" && i + 1 < argc) json = argv[++i];
    else if (a == "--rows" && i + 1 < argc) rows = std::atoi(argv[++i]);
    else if (a == "--cols" && i + 1 < argc) cols = std::atoi(argv[++i]);
    else if (a == "--reps" && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
    else {
      std::fprintf(stderr, "usage: %s [--json PATH] [--rows R] [--cols C] [--reps N]\n", argv[0]);
      return 2;
    }
  }
  const auto probe = lowbit::device::probe_gpu();
  if (!probe.present) {
    std::printf("lowbit_device_quantize_bench: no GPU (%s); nothing measured\n", probe.why.c_str());
    return 0;
  }
  try {
    const std::size_t n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
    float* x = nullptr;
    float* copy_dst = nullptr;
    std::uint32_t* rb = nullptr;
    std::uint8_t* codes = nullptr;
    LOWBIT_CUDA_CHECK(cudaMalloc(&x, n * 4));
    LOWBIT_CUDA_CHECK(cudaMalloc(&copy_dst, n * 4));
    LOWBIT_CUDA_CHECK(cudaMalloc(&rb, n * 4));
    LOWBIT_CUDA_CHECK(cudaMalloc(&codes, n));
    fill_kernel<<<1024, 256>>>(x, rb, n);
    LOWBIT_CUDA_CHECK_LAUNCH();
    LOWBIT_CUDA_CHECK(cudaDeviceSynchronize());
    cudaEvent_t e0, e1;
    LOWBIT_CUDA_CHECK(cudaEventCreate(&e0));
    LOWBIT_CUDA_CHECK(cudaEventCreate(&e1));
    auto time = [&](auto&& body) {
      body();
      body();
      LOWBIT_CUDA_CHECK(cudaDeviceSynchronize());
      std::vector<float> t;
      for (int r = 0; r < reps; ++r) {
        LOWBIT_CUDA_CHECK(cudaEventRecord(e0));
        body();
        LOWBIT_CUDA_CHECK(cudaEventRecord(e1));
        LOWBIT_CUDA_CHECK(cudaEventSynchronize(e1));
        float ms = 0;
        LOWBIT_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
        t.push_back(ms);
      }
      return median(t);
    };
    const double copy_ms = time([&] { LOWBIT_CUDA_CHECK(cudaMemcpyAsync(copy_dst, x, n * 4, cudaMemcpyDeviceToDevice)); });
    const double copy_gbs = 2.0 * static_cast<double>(n) * 4 / (copy_ms * 1e6);

    struct Config {
      std::string name;
      scale::Options o;
      quant::ElementPath path = quant::ElementPath::software;
    };
    std::vector<Config> configs;
    // A policy the kernels read at run time (nosat: it differs from the constant ones, so the general
    // conversion runs); with this data nothing overflows, so the codes are the default policy's.
    auto general = [](scale::Options& o) { o.element_policy.overflow = lowbit::Overflow::nosat; };
    auto add = [&](const std::string& name, scale::Scheme s, const lowbit::Format* el, auto&& tweak,
                   quant::ElementPath path = quant::ElementPath::software) {
      scale::Options o;
      o.scheme = s;
      o.element = el;
      tweak(o);
      // The hardware path stands for the cuda profile's element policy (make_plan insists).
      if (path == quant::ElementPath::hardware) o.element_policy = quant::cuda_profile_policy(*el);
      configs.push_back({name, o, path});
    };
    auto none = [](scale::Options&) {};
    add("tensor e4m3 (2 passes)", scale::Scheme::tensor, &formats::e4m3, none);
    add("tensor e4m3 hw cvt (2 passes)", scale::Scheme::tensor, &formats::e4m3, none, quant::ElementPath::hardware);
    add("tensor e4m3 cuda policy sw (2 passes)", scale::Scheme::tensor, &formats::e4m3,
        [](scale::Options& o) { o.element_policy = quant::k_cuda_policy; });
    add("tensor e4m3 general (2 passes)", scale::Scheme::tensor, &formats::e4m3, general);
    add("delayed e4m3 (amax pass + elements)", scale::Scheme::delayed, &formats::e4m3, none);
    add("channel e4m3 (2 passes)", scale::Scheme::channel, &formats::e4m3, none);
    add("token e4m3", scale::Scheme::token, &formats::e4m3, none);
    add("block 1x128 e4m3", scale::Scheme::block, &formats::e4m3, none);
    add("block 1x128 e4m3 hw cvt", scale::Scheme::block, &formats::e4m3, none, quant::ElementPath::hardware);
    add("block 1x128 e4m3 general", scale::Scheme::block, &formats::e4m3, general);
    add("block 1x128 ue8m0-packed (2 passes)", scale::Scheme::block, &formats::e4m3,
        [](scale::Options& o) { o.scale_format = scale::ScaleFormat::ue8m0_packed; });
    add("block 128x128 e4m3 (2 passes)", scale::Scheme::block, &formats::e4m3, [](scale::Options& o) { o.block_rows = 128; });
    add("mx e4m3 floor", scale::Scheme::mx, &formats::e4m3, none);
    add("mx e4m3 rceil", scale::Scheme::mx, &formats::e4m3, [](scale::Options& o) { o.mx_rule = scale::MxRule::rceil; });
    add("mx e4m3 rceil hw cvt", scale::Scheme::mx, &formats::e4m3,
        [](scale::Options& o) { o.mx_rule = scale::MxRule::rceil; }, quant::ElementPath::hardware);
    add("mx e2m1 rceil", scale::Scheme::mx, &formats::e2m1, [](scale::Options& o) { o.mx_rule = scale::MxRule::rceil; });
    add("mx e3m2 floor (generic element)", scale::Scheme::mx, &formats::e3m2, none);
    add("mx e2m3 rceil (generic element)", scale::Scheme::mx, &formats::e2m3, [](scale::Options& o) { o.mx_rule = scale::MxRule::rceil; });
    add("mx e4m3 floor general", scale::Scheme::mx, &formats::e4m3, general);
    add("nvfp4 1d (amax pass + fused)", scale::Scheme::nvfp4, nullptr, none);
    add("nvfp4 1d stochastic (reads rbits)", scale::Scheme::nvfp4, nullptr, [](scale::Options& o) {
      o.element_policy.rounding = lowbit::Rounding::sr_a;
      o.element_policy.sr_bits = 32;
    });
    add("nvfp4 16x16 (3 passes)", scale::Scheme::nvfp4_2d, nullptr, none);

    std::vector<Row> table;
    // The read floor of the fused pass: loads and block reductions only, one word per block written.
    for (const auto& [name, scheme] : {std::pair{"row amax only, 1x128 blocks (1 pass)", scale::Scheme::block},
                                       std::pair{"row amax only, mx blocks (1 pass)", scale::Scheme::mx}}) {
      scale::Options o;
      o.scheme = scheme;
      const quant::Plan p = quant::make_plan(rows, cols, o);
      std::uint32_t* amax = nullptr;
      LOWBIT_CUDA_CHECK(cudaMalloc(&amax, p.blocks() * 4));
      const double ms = time([&] { quant::row_amax(p, x, amax); });
      LOWBIT_CUDA_CHECK(cudaDeviceSynchronize());
      const double bytes = static_cast<double>(n) * 4 + static_cast<double>(p.blocks()) * 4;
      Row r;
      r.name = name;
      r.ms = ms;
      r.gbs = bytes / (ms * 1e6);
      r.fraction = r.gbs / copy_gbs;
      table.push_back(r);
      cudaFree(amax);
    }
    for (const Config& c : configs) {
      const quant::Plan p = quant::make_plan(rows, cols, c.o, c.path, 2.0f);
      std::uint32_t *scales = nullptr, *packed = nullptr, *ts = nullptr;
      void* work = nullptr;
      LOWBIT_CUDA_CHECK(cudaMalloc(&scales, p.blocks() * 4));
      LOWBIT_CUDA_CHECK(cudaMalloc(&packed, std::max<std::size_t>(4, p.packed_words() * 4)));
      LOWBIT_CUDA_CHECK(cudaMalloc(&ts, 8));
      LOWBIT_CUDA_CHECK(cudaMalloc(&work, quant::workspace_bytes(p)));
      quant::Outputs out;
      out.codes = codes;
      out.scales = scales;
      out.packed_scales = packed;
      out.tensor_scale = ts;
      const double ms = time([&] { quant::quantize(p, x, p.stochastic ? rb : nullptr, out, work); });
      LOWBIT_CUDA_CHECK(cudaDeviceSynchronize());
      const int reads = quant::input_reads(p);
      double bytes = reads * static_cast<double>(n) * 4 + static_cast<double>(n) + static_cast<double>(p.blocks()) * 4;
      if (p.stochastic) bytes += static_cast<double>(n) * 4;
      Row r;
      r.name = c.name;
      r.passes = reads;
      r.ms = ms;
      r.gbs = bytes / (ms * 1e6);
      r.fraction = r.gbs / copy_gbs;
      table.push_back(r);
      cudaFree(scales);
      cudaFree(packed);
      cudaFree(ts);
      cudaFree(work);
    }

    std::printf("GPU %s (sm_%d), tensor %d x %d f32 (%.0f MiB), median of %d\n", probe.info.name.c_str(),
                probe.info.capability(), rows, cols, static_cast<double>(n) * 4 / (1 << 20), reps);
    std::printf("%-42s %6s %9s %9s %9s\n", "quantizer", "reads", "ms", "GB/s", "of copy");
    std::printf("%-42s %6d %9.3f %9.1f %8.1f%%\n", "device-to-device copy (read+write)", 1, copy_ms, copy_gbs, 100.0);
    for (const Row& r : table)
      std::printf("%-42s %6d %9.3f %9.1f %8.1f%%%s\n", r.name.c_str(), r.passes, r.ms, r.gbs, 100 * r.fraction,
                  r.fraction >= 0.90 ? "" : "  (below 90%)");
    if (!json.empty()) {
      FILE* f = std::fopen(json.c_str(), "w");
      if (!f) {
        std::fprintf(stderr, "cannot write %s\n", json.c_str());
        return 2;
      }
      std::fprintf(f, "{\n  \"gpu\": \"%s\",\n  \"capability\": %d,\n  \"rows\": %d,\n  \"cols\": %d,\n  \"reps\": %d,\n",
                   probe.info.name.c_str(), probe.info.capability(), rows, cols, reps);
      std::fprintf(f, "  \"copy\": {\"ms\": %.6f, \"gbs\": %.3f},\n  \"quantizers\": [\n", copy_ms, copy_gbs);
      for (std::size_t i = 0; i < table.size(); ++i)
        std::fprintf(f,
                     "    {\"name\": \"%s\", \"input_reads\": %d, \"ms\": %.6f, \"gbs\": %.3f, \"fraction_of_copy\": "
                     "%.4f}%s\n",
                     table[i].name.c_str(), table[i].passes, table[i].ms, table[i].gbs, table[i].fraction,
                     i + 1 < table.size() ? "," : "");
      std::fprintf(f, "  ]\n}\n");
      std::fclose(f);
    }
    cudaFree(x);
    cudaFree(copy_dst);
    cudaFree(rb);
    cudaFree(codes);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lowbit_device_quantize_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
