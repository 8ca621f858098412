// The reference's element code compiled for the device.
//
// The conversions in lowbit/convert.hpp (the general one) and lowbit/fast_convert.hpp (the 32-bit path)
// are written once, constexpr and integer-only, and marked LOWBIT_HD so that nvcc compiles them for the
// host and the device alike (STYLE.md lesson 6).  This translation unit maps them over an array of f32
// codes, and reduces a run of results to the digest the host commits (lowbit/conversion_digest.hpp), so
// that device/tests/convert_test.cpp can hold the GPU's compilation of the element code against the
// host's on every f32 input.  Hardware conversions (cvt.rn.satfinite.e4m3x2.f32, ...) sit beside it as
// subjects under test (src/cvt.cu), never in its place.
#include <cstddef>
#include <cstdint>

#include "lowbit/conversion_digest.hpp"
#include "lowbit/convert.hpp"
#include "lowbit/device/elements.hpp"
#include "lowbit/fast_convert.hpp"
#include "lowbit/format.hpp"
#include "lowbit/policy.hpp"

namespace lowbit::device {
namespace {

constexpr unsigned k_threads = 256;

unsigned blocks_for(std::size_t n) {
  const std::size_t wanted = (n + k_threads - 1) / k_threads;
  return static_cast<unsigned>(wanted < 8192 ? wanted : 8192);
}

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

__global__ void fast_convert_from_f32_kernel(Format to, Policy policy, const std::uint32_t* in, Result* out,
                                             std::size_t n) {
  constexpr Format from = formats::f32;
  const std::size_t stride = static_cast<std::size_t>(blockDim.x) * gridDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    out[i] = fast::convert(from, in[i], to, policy);
  }
}

__global__ void fill_sequence_kernel(std::uint32_t* in, std::uint32_t first, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(blockDim.x) * gridDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    in[i] = first + static_cast<std::uint32_t>(i);
}

// Each thread sums its terms, the warp adds them with shuffles, one atomic add per warp (addition mod
// 2^64 is associative and commutative, so the order does not matter).
__global__ void digest_kernel(const Result* results, std::size_t n, std::uint64_t first_index, std::uint64_t* digest) {
  std::uint64_t sum = 0;
  const std::size_t stride = static_cast<std::size_t>(blockDim.x) * gridDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    sum += digest::term(first_index + i, results[i]);
  for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xFFFFFFFFu, sum, o);
  if ((threadIdx.x & 31) == 0 && sum != 0) atomicAdd(reinterpret_cast<unsigned long long*>(digest), sum);
}

// The element code is also a constant expression on the device side of the compiler: one case
// (448 is e4m3's largest value, docs/semantics.md §1) checked while this file compiles.
static_assert(convert(formats::f32, 0x43E00000u, formats::e4m3, Policy{}).code == 0x7E);
static_assert(fast::convert(formats::f32, 0x43E00000u, formats::e4m3, Policy{}).code == 0x7E);

}  // namespace

cudaError_t convert_from_f32(const Format& to, const Policy& policy, const std::uint32_t* in, Result* out,
                             std::size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  convert_from_f32_kernel<<<blocks_for(n), k_threads, 0, stream>>>(to, policy, in, out, n);
  return cudaGetLastError();
}

cudaError_t fast_convert_from_f32(const Format& to, const Policy& policy, const std::uint32_t* in, Result* out,
                                  std::size_t n, cudaStream_t stream) {
  if (!fast::applies(formats::f32, to, policy)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  fast_convert_from_f32_kernel<<<blocks_for(n), k_threads, 0, stream>>>(to, policy, in, out, n);
  return cudaGetLastError();
}

cudaError_t fill_sequence(std::uint32_t* in, std::uint32_t first, std::size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  fill_sequence_kernel<<<blocks_for(n), k_threads, 0, stream>>>(in, first, n);
  return cudaGetLastError();
}

cudaError_t digest_results(const Result* results, std::size_t n, std::uint64_t first_index, std::uint64_t* digest,
                           cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  digest_kernel<<<blocks_for(n), k_threads, 0, stream>>>(results, n, first_index, digest);
  return cudaGetLastError();
}

}  // namespace lowbit::device
