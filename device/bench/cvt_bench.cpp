// The exhaustive 2^32 conversion sweep's time on the GPU: each f32 form of the device tier run over
// every f32 pattern, hardware instruction and reference fast path side by side, compared in the same
// kernel.  Median of three timed sweeps after one warm-up.  `--json PATH` writes the numbers.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "lowbit/device/check.hpp"
#include "lowbit/device/cvt.hpp"
#include "lowbit/profile.hpp"
#include "lowbit/registry.hpp"

int main(int argc, char** argv) {
  using namespace lowbit;
  using namespace lowbit::device;
  std::string json;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
      json = argv[++i];
    } else {
      std::fprintf(stderr, "lowbit_device_cvt_bench: unknown argument '%s' (usage: [--json PATH])\n", argv[i]);
      return 2;
    }
  }
  const GpuProbe probe = probe_gpu();
  if (!probe.present) {
    std::printf("lowbit_device_cvt_bench: skipped: %s\n", probe.why.c_str());
    return 0;
  }
  try {
    std::string out = "{\"gpu\": \"" + probe.info.name + "\", \"sweeps\": [";
    std::printf("%-32s %14s %12s %14s\n", "instruction", "comparisons", "median ms", "Gcomparisons/s");
    bool first = true;
    for (const char* name : {"e4m3x2.f32", "e5m2x2.f32", "f16.f32.rn", "bf16.f32.rn"}) {
      const HwCvtInfo* c = find_hardware_conversion(name);
      if (probe.info.capability() < c->min_capability) continue;
      PolicyRequest req;
      req.rounding = parse<Rounding>(c->rounding);
      if (c->overflow) req.overflow = parse<Overflow>(c->overflow);
      std::string error;
      const auto r = resolve(find_profile("cuda"), *find_format(c->to), req, error);
      if (!r) throw Error(error);
      sweep(*c, *r->target, r->policy);  // warm-up
      std::vector<double> ms;
      SweepResult last;
      for (int rep = 0; rep < 3; ++rep) {
        last = sweep(*c, *r->target, r->policy);
        ms.push_back(last.milliseconds);
      }
      std::sort(ms.begin(), ms.end());
      const double med = ms[1];
      const double rate = static_cast<double>(last.comparisons) / (med * 1e-3) / 1e9;
      std::printf("%-32s %14llu %12.1f %14.2f\n", c->ptx, static_cast<unsigned long long>(last.comparisons), med,
                  rate);
      out += std::string(first ? "" : ", ") + "{\"instruction\": \"" + c->ptx +
             "\", \"comparisons\": " + std::to_string(last.comparisons) + ", \"median_ms\": " + std::to_string(med) +
             ", \"mismatches\": " + std::to_string(last.mismatches) + "}";
      first = false;
    }
    out += "]}\n";
    if (!json.empty()) {
      std::ofstream f(json);
      f << out;
      if (!f) {
        std::fprintf(stderr, "lowbit_device_cvt_bench: cannot write --json %s\n", json.c_str());
        return 2;
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lowbit_device_cvt_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
