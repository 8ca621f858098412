// Host/device annotation, kept in one place (as Eigen keeps its host/device macros together).
// Element code is written once, constexpr, and compiled for the host and, under nvcc, the device.
#pragma once

#if defined(__CUDACC__)
#define LOWBIT_HD __host__ __device__
#else
#define LOWBIT_HD
#endif
