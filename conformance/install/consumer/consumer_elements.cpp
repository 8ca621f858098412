// The header-only element code at compile time: f32 -> e4m3 under rne, checked by static_assert, and the
// same conversion at run time (install_helpers.py holds the expected line).
#include <cstdio>

#include "lowbit/convert.hpp"
#include "lowbit/format.hpp"

namespace {
constexpr lowbit::Policy rne_satfinite{.overflow = lowbit::Overflow::satfinite};
// 480 lies beyond e4m3's largest finite value 448 (0x7e); saturation keeps it there (OCP FP8 v1.0, 5.2).
static_assert(lowbit::convert(lowbit::formats::f32, 0x43f00000u, lowbit::formats::e4m3, rne_satfinite).code == 0x7e);
}  // namespace

int main() {
  const lowbit::Result r = lowbit::convert(lowbit::formats::f32, 0x3fc00000u, lowbit::formats::e4m3, rne_satfinite);
  std::printf("1.5 -> 0x%02llx\n", static_cast<unsigned long long>(r.code));
  return 0;
}
