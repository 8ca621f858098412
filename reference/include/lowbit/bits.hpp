// Small integer helpers usable in constexpr host and device code (std::bit_width is not __device__).
#pragma once
#include <cstdint>

#include "lowbit/hd.hpp"

namespace lowbit::bits {

// Number of bits needed to hold v (0 for v == 0).
LOWBIT_HD constexpr int width(std::uint64_t v) {
#if defined(__CUDA_ARCH__)
  // On the device one count-leading-zeros instruction (the same value as the search below).
  if (!__builtin_is_constant_evaluated()) return 64 - __clzll(static_cast<long long>(v));
#endif
  int n = 0;
  if (v >> 32) {
    n += 32;
    v >>= 32;
  }
  if (v >> 16) {
    n += 16;
    v >>= 16;
  }
  if (v >> 8) {
    n += 8;
    v >>= 8;
  }
  if (v >> 4) {
    n += 4;
    v >>= 4;
  }
  if (v >> 2) {
    n += 2;
    v >>= 2;
  }
  if (v >> 1) {
    n += 1;
    v >>= 1;
  }
  return n + static_cast<int>(v);
}

// 2^n - 1 for n in [0, 64].
LOWBIT_HD constexpr std::uint64_t ones(int n) { return n >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << n) - 1; }

// v >> n, defined for every n >= 0 (0 when n >= 64).
LOWBIT_HD constexpr std::uint64_t shr(std::uint64_t v, int n) { return n >= 64 ? 0 : v >> n; }

// Low n bits of v, defined for every n >= 0.
LOWBIT_HD constexpr std::uint64_t low(std::uint64_t v, int n) { return n >= 64 ? v : v & ones(n); }

}  // namespace lowbit::bits
