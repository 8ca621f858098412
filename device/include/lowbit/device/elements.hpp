// Device conversions built from the reference's element code (device/src/elements.cu), and the pieces
// of the device-versus-host conversion test (device/tests/convert_test.cpp): a sequence of f32 codes,
// and the digest of a run of results (lowbit/conversion_digest.hpp).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "lowbit/format.hpp"
#include "lowbit/policy.hpp"

namespace lowbit::device {

// Convert n f32 codes (device memory) into `to` under `policy`, writing one Result per element
// (device memory).  Deterministic policies only: the stochastic modes need random bits per element.
// Returns the launch error, if any; the work itself completes asynchronously on `stream`.
cudaError_t convert_from_f32(const Format& to, const Policy& policy, const std::uint32_t* in, Result* out,
                             std::size_t n, cudaStream_t stream = nullptr);

// The same through the 32-bit path (lowbit/fast_convert.hpp), the row and policy read at run time.
// cudaErrorInvalidValue, before anything is launched, where fast::applies(f32, to, policy) is false.
cudaError_t fast_convert_from_f32(const Format& to, const Policy& policy, const std::uint32_t* in, Result* out,
                                  std::size_t n, cudaStream_t stream = nullptr);

// in[i] = first + i for i < n (device memory): the f32 codes of one chunk of a sweep.
cudaError_t fill_sequence(std::uint32_t* in, std::uint32_t first, std::size_t n, cudaStream_t stream = nullptr);

// *digest += the sum of lowbit::digest::term(first_index + i, results[i]) for i < n (mod 2^64; `digest`
// is one word of device memory).
cudaError_t digest_results(const Result* results, std::size_t n, std::uint64_t first_index, std::uint64_t* digest,
                           cudaStream_t stream = nullptr);

}  // namespace lowbit::device
