// The reference's element code compiled for the device.
//
// The conversion in lowbit/convert.hpp is written once, constexpr and integer-only, and marked
// LOWBIT_HD so that nvcc compiles it for the host and the device alike.  This
// translation unit maps it over an array of f32 codes; it is the smallest kernel that proves the
// element code builds for every architecture the device side targets.  Hardware conversions
// (cvt.rn.satfinite.e4m3x2.f32, ...) will sit beside it as subjects under test, never in its place.
#include <cstddef>
#include <cstdint>

#include "lowbit/convert.hpp"
#include "lowbit/device/elements.hpp"
#include "lowbit/format.hpp"
#include "lowbit/policy.hpp"

namespace lowbit::device {
namespace {

// One thread per element, grid-stride so that any launch size covers the array.  The target row and
// the policy travel by value, and the source row is copied into a local constant: the namespace-scope
// constexpr rows of format.hpp have no device-side storage to refer to.
__global__ void convert_from_f32_kernel(Format to, Policy policy, const std::uint32_t* in, Result* out, std::size_t n) {
  constexpr Format from = formats::f32;
  const std::size_t stride = static_cast<std::size_t>(blockDim.x) * gridDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    out[i] = convert(from, in[i], to, policy);
  }
}

// The element code is also a constant expression on the device side of the compiler: one case
// (448 is e4m3's largest value, docs/semantics.md §1) checked while this file compiles.
static_assert(convert(formats::f32, 0x43E00000u, formats::e4m3, Policy{}).code == 0x7E);

}  // namespace

cudaError_t convert_from_f32(const Format& to, const Policy& policy, const std::uint32_t* in, Result* out,
                             std::size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  constexpr unsigned threads = 256;
  const std::size_t wanted = (n + threads - 1) / threads;
  const unsigned blocks = static_cast<unsigned>(wanted < 4096 ? wanted : 4096);
  convert_from_f32_kernel<<<blocks, threads, 0, stream>>>(to, policy, in, out, n);
  return cudaGetLastError();
}

}  // namespace lowbit::device
