// Shared by the device tests: the skip-without-GPU gate and small helpers.
//
// Every device test starts with LOWBIT_REQUIRE_GPU(cap): without a GPU it skips with the reason (ctest
// sees exit 0), and on a GPU older than `cap` it also skips, naming the GPU and the capability needed.
#pragma once
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "lowbit/device/check.hpp"

namespace lowbit::device::testing {

inline const GpuProbe& gpu() {
  static const GpuProbe p = probe_gpu();
  return p;
}

}  // namespace lowbit::device::testing

#define LOWBIT_REQUIRE_GPU(cap)                                                                        \
  do {                                                                                                 \
    const auto& lowbit_probe_ = ::lowbit::device::testing::gpu();                                     \
    if (!lowbit_probe_.present) GTEST_SKIP() << "device tier skipped: " << lowbit_probe_.why;          \
    if (lowbit_probe_.info.capability() < (cap))                                                       \
      GTEST_SKIP() << lowbit_probe_.info.name << " (sm_" << lowbit_probe_.info.capability()             \
                   << ") is older than the sm_" << (cap) << " this test needs";                        \
  } while (0)
