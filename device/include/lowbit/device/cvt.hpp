// The GPU's own conversion instructions as subjects under test (device/src/cvt.cu).
//
// Each entry is one `cvt` form; a sweep runs it over every code of its source format (all 2^32 f32
// patterns for the f32 forms) and compares every result, bit for bit, with the reference's fast path
// compiled for the device (lowbit::convert from reference/include/lowbit/convert.hpp) under the
// policy that `lowbit convert --profile cuda` resolves for the same target, rounding and saturation.
// Two-lane forms (e4m3x2, ...) are checked in both lanes: the low lane converts code u, the high lane
// u with its sign bit flipped, so each lane sees every input once.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "lowbit/format.hpp"
#include "lowbit/policy.hpp"

namespace lowbit::device {

enum class HwCvt : std::uint8_t {
  // sm_89 and newer (Ada, Hopper, Blackwell)
  e4m3x2_f32_rn_satfinite,
  e5m2x2_f32_rn_satfinite,
  e4m3x2_f16x2_rn_satfinite,
  e5m2x2_f16x2_rn_satfinite,
  f16x2_e4m3x2_rn,
  f16x2_e5m2x2_rn,
  // every architecture the project builds for
  f16_f32_rn,
  f16_f32_rz,
  f16_f32_rm,
  f16_f32_rp,
  bf16_f32_rn,
  bf16_f32_rz,
  bf16_f32_rm,
  bf16_f32_rp,
  // sm_100a / sm_120a only (ptxas rejects them for sm_90a): compiled into the Blackwell images, and
  // reported as not runnable on anything older.
  e2m1x2_f32_rn_satfinite,
  e2m3x2_f32_rn_satfinite,
  e3m2x2_f32_rn_satfinite,
  ue8m0x2_f32_rz_satfinite,
  ue8m0x2_f32_rp_satfinite,
};

struct HwCvtInfo {
  HwCvt id;
  const char* name;       // short name used in reports and test names
  const char* ptx;        // the instruction
  const char* from;       // source format name (registry)
  const char* to;         // target format name (registry)
  const char* rounding;   // as `lowbit convert --rounding` spells it
  const char* overflow;   // nullptr: the cuda profile's default for the target
  int lanes;              // 1 or 2
  int min_capability;     // major * 10 + minor
  bool needs_blackwell;   // an "a"-architecture feature of sm_100a / sm_120a
};

std::span<const HwCvtInfo> hardware_conversions();
const HwCvtInfo* find_hardware_conversion(std::string_view name);

struct SweepMismatch {
  std::uint32_t input;      // source code
  std::uint32_t lane;       // 0: low lane, 1: high lane
  std::uint32_t hardware;   // the instruction's code
  std::uint32_t reference;  // the reference's code
};

struct SweepResult {
  std::uint64_t inputs = 0;      // source codes converted (per lane)
  std::uint64_t comparisons = 0;  // inputs * lanes
  std::uint64_t mismatches = 0;
  std::vector<SweepMismatch> first;  // up to max_report of them, in no particular order
  double milliseconds = 0;           // device time of the sweep
};

// How a sweep of `total` source codes is cut into launches: each launch covers at most `per_launch`
// codes, the last one the remainder.  Host logic, tested without a GPU.
struct SweepChunk {
  std::uint64_t begin;
  std::uint64_t count;
};
std::vector<SweepChunk> sweep_chunks(std::uint64_t total, std::uint64_t per_launch);

// Run one hardware conversion over source codes [begin, begin + count) (count = 0: every code of the
// source format) against the reference under `policy`.  Throws Error when the GPU cannot run the form
// (naming the GPU and the capability) or when the binary holds no code for it.
SweepResult sweep(const HwCvtInfo& cvt, const Format& to, const Policy& policy, std::uint64_t begin = 0,
                  std::uint64_t count = 0, int max_report = 32);

}  // namespace lowbit::device
