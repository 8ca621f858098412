// Seeded random operands for the GEMM and scheme tests: splitmix64 (Steele, Lea, Flood, "Fast splittable
// pseudorandom number generators", OOPSLA 2014), so every run and every machine sees the same cases.
#pragma once
#include <cstdint>
#include <vector>

#include "lowbit/format.hpp"

namespace lowbit::testing {

inline std::uint64_t splitmix(std::uint64_t& s) {
  std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// n uniformly random codes of `f` that are neither NaN nor infinite.
inline std::vector<std::uint64_t> finite_codes(const Format& f, int n, std::uint64_t& seed) {
  std::vector<std::uint64_t> v;
  while (static_cast<int>(v.size()) < n) {
    const std::uint64_t c = splitmix(seed) & bits::ones(f.code_bits());
    if (!f.is_nan_code(c) && !f.is_inf_code(c)) v.push_back(c);
  }
  return v;
}

}  // namespace lowbit::testing
