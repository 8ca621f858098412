// Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC 2011;
// constants and known-answer vectors from Random123's philox.h and tests/kat_vectors).  Counter-based:
// the random bits of element i depend only on (seed, i), so any slice of a tensor can be regenerated.
#pragma once
#include <array>
#include <cstdint>

#include "lowbit/hd.hpp"

namespace lowbit::philox {

using Counter = std::array<std::uint32_t, 4>;
using Key = std::array<std::uint32_t, 2>;

LOWBIT_HD constexpr Counter round(const Counter& c, const Key& k) {
  const std::uint64_t p0 = std::uint64_t{0xD2511F53u} * c[0];
  const std::uint64_t p1 = std::uint64_t{0xCD9E8D57u} * c[2];
  return {static_cast<std::uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<std::uint32_t>(p1),
          static_cast<std::uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<std::uint32_t>(p0)};
}

LOWBIT_HD constexpr Counter philox4x32_10(Counter c, Key k) {
  c = round(c, k);
  for (int i = 1; i < 10; ++i) {
    k = {k[0] + 0x9E3779B9u, k[1] + 0xBB67AE85u};
    c = round(c, k);
  }
  return c;
}

// Random123's known answers.
static_assert(philox4x32_10({0, 0, 0, 0}, {0, 0}) == Counter{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u});
static_assert(philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu}) ==
              Counter{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu});
static_assert(philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u}) ==
              Counter{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u});

// lowbit's stochastic-rounding stream: element i (row-major index) draws counter {i mod 2^32, i / 2^32,
// 0, 0} under key {seed mod 2^32, seed / 2^32} and uses the top N bits of the first output word.
LOWBIT_HD constexpr std::uint32_t sr_bits(std::uint64_t seed, std::uint64_t i, int n) {
  const Counter out = philox4x32_10({static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(i >> 32), 0, 0},
                                    {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)});
  return n >= 32 ? out[0] : out[0] >> (32 - n);
}

}  // namespace lowbit::philox
