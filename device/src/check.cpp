// The GPU gate (lowbit/device/check.hpp).
#include "lowbit/device/check.hpp"

namespace lowbit::device {

GpuProbe probe_gpu() {
  GpuProbe p;
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    p.why = std::string("no usable GPU: cudaGetDeviceCount returned ") + cudaGetErrorName(e);
    return p;
  }
  if (count == 0) {
    p.why = "no GPU on this machine";
    return p;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    p.why = "cudaGetDeviceProperties(0) failed";
    return p;
  }
  GpuInfo& g = p.info;
  g.device = 0;
  g.name = prop.name;
  g.major = prop.major;
  g.minor = prop.minor;
  g.sms = prop.multiProcessorCount;
  g.memory = prop.totalGlobalMem;
  g.l2_bytes = prop.l2CacheSize;
  g.bus_width_bits = prop.memoryBusWidth;
  cudaDeviceGetAttribute(&g.clock_khz, cudaDevAttrClockRate, 0);
  cudaDeviceGetAttribute(&g.memory_clock_khz, cudaDevAttrMemoryClockRate, 0);
  cudaDriverGetVersion(&g.driver_version);
  cudaRuntimeGetVersion(&g.runtime_version);
  p.present = true;
  return p;
}

void require_capability(const GpuInfo& gpu, int needed, const char* what) {
  if (gpu.capability() >= needed) return;
  throw Error(gpu.name + " (sm_" + std::to_string(gpu.capability()) + ") cannot run " + what + ": it needs sm_" +
              std::to_string(needed) + " or newer");
}

}  // namespace lowbit::device
