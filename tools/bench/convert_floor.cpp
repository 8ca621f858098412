#include "convert_floor.hpp"

#include <hwy/cache_control.h>
#include <hwy/highway.h>

namespace lowbit_bench {

namespace {

namespace hn = hwy::HWY_NAMESPACE;

// Plain loops: gcc vectorises them (at -march=native on AVX-512: four 64-byte loads, two permutes and one 64-byte
// store per 64 values).
void top_bytes(const std::uint32_t* __restrict in, std::size_t n, std::uint8_t* __restrict out) {
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::uint8_t>(in[i] >> 24);
}
void top_halves(const std::uint32_t* __restrict in, std::size_t n, std::uint16_t* __restrict out) {
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::uint16_t>(in[i] >> 16);
}

// The same through non-temporal stores of whole vectors (the static target of -march=native), from the first
// address aligned to a vector; the elements before it and the tail by the plain loop.
template <class T>
void streamed(const std::uint32_t* in, std::size_t n, T* out) {
  const hn::ScalableTag<std::uint32_t> du;
  const hn::Rebind<T, decltype(du)> dn;
  const std::size_t lanes = hn::Lanes(du), vector_bytes = lanes * sizeof(T);
  std::size_t i = 0;
  const std::size_t misaligned = reinterpret_cast<std::uintptr_t>(out) % vector_bytes;
  if (vector_bytes < 16 || misaligned % sizeof(T) != 0) i = n;  // no whole aligned vectors: all by the loop
  else if (misaligned != 0) i = (vector_bytes - misaligned) / sizeof(T);
  if constexpr (sizeof(T) == 1) top_bytes(in, i < n ? i : n, out);
  else top_halves(in, i < n ? i : n, out);
  for (; i + lanes <= n; i += lanes)
    hn::Stream(hn::TruncateTo(dn, hn::ShiftRight<32 - 8 * sizeof(T)>(hn::LoadU(du, in + i))), dn, out + i);
  hwy::FlushStream();
  if (i < n) {
    if constexpr (sizeof(T) == 1) top_bytes(in + i, n - i, out + i);
    else top_halves(in + i, n - i, out + i);
  }
}

}  // namespace

void floor_kernel(const std::uint32_t* in, std::size_t n, int bytes, void* out, FloorStores stores) {
  if (stores == FloorStores::streaming) {
    if (bytes == 2) streamed(in, n, static_cast<std::uint16_t*>(out));
    else streamed(in, n, static_cast<std::uint8_t*>(out));
    return;
  }
  if (bytes == 2) top_halves(in, n, static_cast<std::uint16_t*>(out));
  else top_bytes(in, n, static_cast<std::uint8_t*>(out));
}

const char* floor_flags() { return LOWBIT_FLOOR_FLAGS; }

}  // namespace lowbit_bench
