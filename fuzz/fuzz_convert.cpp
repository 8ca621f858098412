// Differential fuzzing of the element conversion: for a random source format and code, target format,
// policy (every rounding, stochastic ones with random bits, overflow, subnormal and tininess modes,
// profile quirks) the constexpr fast path (convert.hpp) must equal the exact path (exact.hpp): code,
// flags and ternary value.  For f32 / bf16 / f16 sources a short batch also goes through the SIMD path
// (convert_batch), which must equal the scalar fast path element for element.
#include <cstring>

#include "fuzz_support.hpp"
#include "lowbit/batch.hpp"
#include "lowbit/convert.hpp"
#include "lowbit/exact.hpp"

using namespace lowbit;

namespace {

std::uint64_t draw_code(FuzzedDataProvider& in, const Format& f) {
  const std::uint64_t raw = in.ConsumeIntegral<std::uint64_t>();
  const int width = f.code_bits();
  std::uint64_t c = width >= 64 ? raw : raw & ((std::uint64_t{1} << width) - 1);
  if (f.code_shift > 0) c <<= f.code_shift;
  return c;
}

std::string describe(const Format& from, std::uint64_t code, const Format& to, const Policy& p, std::uint64_t r) {
  return std::string(from.name) + " " + fuzz::hex(code) + " -> " + to.name + " (" + fuzz::policy_text(p) + ", R " +
         fuzz::hex(r) + ")";
}

std::string result_text(const Result& x) {
  return "code " + fuzz::hex(x.code) + " flags " + fuzz::hex(x.flags) + " ternary " + std::to_string(int(x.ternary));
}

void batch_check(FuzzedDataProvider& in, const Format& from, const Format& to, const Policy& p) {
  const int w = from.storage_bits();
  if (!(w == 16 || w == 32) || from.code_shift != 0 || from.code_bits() != w) return;
  const std::size_t n = in.ConsumeIntegralInRange<std::size_t>(1, 40);
  std::vector<std::uint8_t> src(n * static_cast<std::size_t>(w / 8));
  std::vector<std::uint32_t> rbits(n);
  std::vector<std::uint64_t> codes(n);
  for (std::size_t i = 0; i < n; ++i) {
    codes[i] = draw_code(in, from);
    rbits[i] = fuzz::draw_rbits(in, p);
    for (int b = 0; b < w / 8; ++b) src[i * static_cast<std::size_t>(w / 8) + b] = static_cast<std::uint8_t>(codes[i] >> (8 * b));
  }
  const std::size_t ob = batch_code_bytes(to);
  std::vector<std::uint8_t> out(n * ob);
  std::vector<std::uint8_t> flags(n);
  std::vector<std::int8_t> tern(n);
  convert_batch(from, src.data(), n, to, p, out.data(), flags.data(), tern.data(), rbits.data());
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t got = 0;
    for (std::size_t b = 0; b < ob; ++b) got |= std::uint64_t{out[i * ob + b]} << (8 * b);
    const Result want = convert(from, codes[i], to, p, rbits[i]);
    const Result have{got, flags[i], tern[i]};
    if (!(want == have))
      fuzz::fail("convert_batch (" + std::string(batch_supported(from, to, p) ? "vector" : "scalar") + " path) " +
                 describe(from, codes[i], to, p, rbits[i]) + ": batch " + result_text(have) + ", scalar " +
                 result_text(want));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const auto& formats = fuzz::all_formats();
  const Format& from = *formats[in.ConsumeIntegralInRange<std::size_t>(0, formats.size() - 1)];
  const Format& to = *formats[in.ConsumeIntegralInRange<std::size_t>(0, formats.size() - 1)];
  const Policy p = fuzz::draw_policy(in);
  const std::uint64_t code = draw_code(in, from);
  const std::uint64_t r = fuzz::draw_rbits(in, p);
  if (!from.valid_code(code)) return 0;
  const Result fast = convert(from, code, to, p, r);
  const Result slow = exact::convert(from, code, to, p, r);
  if (!(fast == slow))
    fuzz::fail("fast != exact: " + describe(from, code, to, p, r) + ": fast " + result_text(fast) + ", exact " +
               result_text(slow));
  if (!to.valid_code(fast.code) && !(fast.flags & flag::unsupported))
    fuzz::fail("invalid result code: " + describe(from, code, to, p, r) + ": " + result_text(fast));
  batch_check(in, from, to, p);
  return 0;
}
