// Device conversions built from the reference's element code (device/src/elements.cu).
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

}  // namespace lowbit::device
