// The conversion benchmark's memory floor: kernels that read n f32 values and write one code of `bytes` bytes per
// value (the value's top byte or top two bytes), nothing else: what the machine's memory allows a conversion that
// streams the same bytes.  Built at their best (-O3 -march=native, tools/bench/CMakeLists.txt), in two kinds:
// ordinary stores (a loop the compiler vectorises) and non-temporal stores (whole vectors, Highway's Stream), which
// do not read the output's lines before writing them.  The benchmark reports both; the faster is the floor.
#pragma once
#include <cstddef>
#include <cstdint>

namespace lowbit_bench {

enum class FloorStores : std::uint8_t { cached, streaming };

void floor_kernel(const std::uint32_t* in, std::size_t n, int bytes, void* out, FloorStores stores);
const char* floor_flags();

}  // namespace lowbit_bench
