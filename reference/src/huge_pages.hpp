// Large fresh buffers of the library's own (the exact GEMM's operands and result): backed by 2 MiB pages where the
// kernel lends them.  A fresh buffer of 8 MiB costs 2048 page faults at 4 KiB a page, each a trap, a cleared page
// and the bookkeeping of both; on the development machine (an AMD EPYC, Linux 6.18) 2 MiB pages took an exact
// 1024^3 e4m3 GEMM from 64 ms to 55 ms on one thread and from 45 ms to 33 ms on two.  Linux's transparent huge
// pages in their "madvise" mode (the default of many distributions, Debian's included) back a range with 2 MiB
// pages only where the program asks with madvise(MADV_HUGEPAGE); PyTorch's CPU allocator asks the same for its large
// blocks (c10/core/alloc_cpu.cpp, THP_MEM_ALLOC_ENABLE).  Only buffers of 4 MiB to 64 MiB ask: on the same machine
// the three 128 MiB buffers of a 4096^3 product made the first call in a process 20% slower (the kernel compacted
// memory to find that many 2 MiB pages) for 5% on the calls after it.  A hint only: where it is refused, or off
// Linux, nothing changes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace lowbit::detail {

// Asks for 2 MiB pages over the whole 2 MiB pages inside [p, p + bytes), before they are first touched.  The answer
// is not checked: a kernel without transparent huge pages, or with them off, refuses, and the buffer keeps its small
// pages.
inline void prefer_huge_pages(void* p, std::size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr std::uintptr_t kHuge = std::uintptr_t{1} << 21;
  const auto begin = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t first = (begin + kHuge - 1) & ~(kHuge - 1), last = (begin + bytes) & ~(kHuge - 1);
  if (last > first) (void)madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

// v sized to n elements for the caller to write every one of: what it held is kept where its storage suffices, and
// dropped otherwise (the new elements are value-initialised); new storage of 4 MiB to 64 MiB is asked for 2 MiB
// pages before the elements are written.
template <class T>
void resize_large(std::vector<T>& v, std::size_t n) {
  constexpr std::size_t kSmallest = std::size_t{4} << 20, kLargest = std::size_t{64} << 20;
  if (n > v.capacity() && n * sizeof(T) >= kSmallest && n * sizeof(T) <= kLargest) {
    std::vector<T> fresh;
    fresh.reserve(n);
    prefer_huge_pages(fresh.data(), n * sizeof(T));
    v.swap(fresh);
  }
  v.resize(n);
}

}  // namespace lowbit::detail
