// Converts a few f32 values into e4m3 through lowbit's exact path, finding both formats by name, and
// prints code, flags and the exact decimal value of each result (install_helpers.py holds the expected lines).
#include <cstdint>
#include <cstdio>

#include "lowbit/exact.hpp"
#include "lowbit/registry.hpp"
#include "lowbit/text.hpp"

int main() {
  const lowbit::Format* f32 = lowbit::find_format("f32");
  const lowbit::Format* e4m3 = lowbit::find_format("float8_e4m3fn");
  if (!f32 || !e4m3) {
    std::fprintf(stderr, "consumer: a built-in format is missing\n");
    return 1;
  }
  const lowbit::Policy rne_nosat{};
  // 448 (max), 464 (the midpoint to the next binade: ties to even, 448), 465, 0.3, 2^-10
  const std::uint32_t inputs[] = {0x43e00000u, 0x43e80000u, 0x43e88000u, 0x3e99999au, 0x3a800000u};
  for (const std::uint32_t x : inputs) {
    const lowbit::Result r = lowbit::exact::convert(*f32, x, *e4m3, rne_nosat);
    std::printf("0x%08x -> 0x%02llx %s %s\n", static_cast<unsigned>(x), static_cast<unsigned long long>(r.code),
                lowbit::flags_text(r.flags).c_str(), lowbit::exact::code_text(*e4m3, r.code).c_str());
  }
  return 0;
}
