// Checked CUDA calls and the GPU gate, shared by every device kernel, test and benchmark.
//
// Every runtime / cuBLASLt call goes through LOWBIT_CUDA_CHECK or LOWBIT_CUBLAS_CHECK, which throw
// lowbit::device::Error naming the call, the file and the line: a failure is reported where it
// happened, never turned into a silent wrong answer further on.
#pragma once
#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace lowbit::device {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] inline void fail_call(const char* call, const char* file, int line, const std::string& what) {
  throw Error(std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: " + what);
}

inline void check_cuda(cudaError_t e, const char* call, const char* file, int line) {
  if (e != cudaSuccess) {
    std::string what = cudaGetErrorName(e);
    what += " (";
    what += cudaGetErrorString(e);
    what += ")";
    fail_call(call, file, line, what);
  }
}

// What the device tier needs to know about the GPU it runs on.
struct GpuInfo {
  int device = 0;
  std::string name;
  int major = 0, minor = 0;  // compute capability
  int sms = 0;
  std::size_t memory = 0;
  int clock_khz = 0;
  int memory_clock_khz = 0;
  int bus_width_bits = 0;
  int l2_bytes = 0;
  int driver_version = 0, runtime_version = 0;
  int capability() const { return major * 10 + minor; }
};

// The first GPU, or an empty optional-like result: `present` is false (and `why` says why) when the
// machine has no usable GPU.  Never throws: a machine without a GPU is an expected state.
struct GpuProbe {
  bool present = false;
  std::string why;
  GpuInfo info;
};
GpuProbe probe_gpu();

// Throws Error naming the GPU and the capability needed when the GPU is older than `needed`
// (capability as major * 10 + minor: 89 for sm_89), e.g. "NVIDIA T4 (sm_75) cannot run the FP8
// mma.sync probe: it needs sm_89 or newer".
void require_capability(const GpuInfo& gpu, int needed, const char* what);

}  // namespace lowbit::device

#define LOWBIT_CUDA_CHECK(call) ::lowbit::device::check_cuda((call), #call, __FILE__, __LINE__)
// After a kernel launch: the launch error now, and (in checking builds) nothing else.
#define LOWBIT_CUDA_CHECK_LAUNCH() ::lowbit::device::check_cuda(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
