// Differential against the CUDA toolkit's host conversions (cuda_fp8.h, cuda_fp6.h, cuda_fp4.h,
// cuda_fp16.h, cuda_bf16.h), compiled by the host compiler: off the device these functions run the
// toolkit's software emulation of the `cvt` instructions.  lowbit's side is the scalar fast path under
// `--profile cuda` (the fast path is itself checked against the exact path by the other checks).
// Built only when the top-level CMake finds the toolkit's headers (LOWBIT_HAVE_CUDA_HEADERS).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp4.h>
#include <cuda_fp6.h>
#include <cuda_fp8.h>

#include <bit>
#include <cmath>
#include <cstring>

#include "lowbit/batch.hpp"
#include "lowbit/convert.hpp"
#include "lowbit/profile.hpp"
#include "lowbit/registry.hpp"
#include "support.hpp"

namespace lowbit::checks {

namespace {

template <class T>
std::uint32_t raw16(T v) {
  std::uint16_t u;
  std::memcpy(&u, &v, sizeof u);
  return u;
}

// The toolkit's conversions, one per (target, rounding, saturation) it offers from f32.
struct Subject {
  const char* function;  // the toolkit call, for messages
  const char* to;
  const char* rounding;  // nullptr: the profile's default
  const char* overflow;  // nullptr: the profile's default
  std::uint32_t (*convert)(float);
};

const Subject subjects[] = {
    {"__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3)", "e4m3", nullptr, "satfinite",
     [](float x) -> std::uint32_t { return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3); }},
    {"__nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E4M3)", "e4m3", nullptr, "nosat",
     [](float x) -> std::uint32_t { return __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E4M3); }},
    {"__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2)", "e5m2", nullptr, "satfinite",
     [](float x) -> std::uint32_t { return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2); }},
    {"__nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E5M2)", "e5m2", nullptr, "nosat",
     [](float x) -> std::uint32_t { return __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E5M2); }},
    {"__nv_cvt_float_to_fp6(x, __NV_E2M3, cudaRoundNearest)", "e2m3", nullptr, nullptr,
     [](float x) -> std::uint32_t { return __nv_cvt_float_to_fp6(x, __NV_E2M3, cudaRoundNearest); }},
    {"__nv_cvt_float_to_fp6(x, __NV_E3M2, cudaRoundNearest)", "e3m2", nullptr, nullptr,
     [](float x) -> std::uint32_t { return __nv_cvt_float_to_fp6(x, __NV_E3M2, cudaRoundNearest); }},
    {"__nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest)", "e2m1", nullptr, nullptr,
     [](float x) -> std::uint32_t { return __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest); }},
    {"__nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundZero)", "e8m0", "rtz", "satfinite",
     [](float x) -> std::uint32_t { return __nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundZero); }},
    {"__nv_cvt_float_to_e8m0(x, __NV_NOSAT, cudaRoundZero)", "e8m0", "rtz", "nosat",
     [](float x) -> std::uint32_t { return __nv_cvt_float_to_e8m0(x, __NV_NOSAT, cudaRoundZero); }},
    {"__nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundPosInf)", "e8m0", "rup", "satfinite",
     [](float x) -> std::uint32_t { return __nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundPosInf); }},
    {"__nv_cvt_float_to_e8m0(x, __NV_NOSAT, cudaRoundPosInf)", "e8m0", "rup", "nosat",
     [](float x) -> std::uint32_t { return __nv_cvt_float_to_e8m0(x, __NV_NOSAT, cudaRoundPosInf); }},
    {"__float2half_rn", "f16", "rne", nullptr, [](float x) { return raw16(__float2half_rn(x)); }},
    {"__float2half_rz", "f16", "rtz", nullptr, [](float x) { return raw16(__float2half_rz(x)); }},
    {"__float2half_ru", "f16", "rup", nullptr, [](float x) { return raw16(__float2half_ru(x)); }},
    {"__float2half_rd", "f16", "rdn", nullptr, [](float x) { return raw16(__float2half_rd(x)); }},
    {"__float2bfloat16_rn", "bf16", "rne", nullptr, [](float x) { return raw16(__float2bfloat16_rn(x)); }},
    {"__float2bfloat16_rz", "bf16", "rtz", nullptr, [](float x) { return raw16(__float2bfloat16_rz(x)); }},
    {"__float2bfloat16_ru", "bf16", "rup", nullptr, [](float x) { return raw16(__float2bfloat16_ru(x)); }},
    {"__float2bfloat16_rd", "bf16", "rdn", nullptr, [](float x) { return raw16(__float2bfloat16_rd(x)); }},
};
constexpr std::size_t subject_count = std::size(subjects);

struct Bound {
  const Subject* subject;
  const Format* to;
  Policy policy;
};

// Each subject's policy, resolved as `lowbit convert --profile cuda --to T [--rounding R] [--overflow O]`.
// A subject that does not resolve is one mismatch of the whole check, counted by the range that holds
// input 0 (so that shards count it once).
std::vector<Bound> bind(Recorder& rec, Range r) {
  std::vector<Bound> v;
  const Profile* cuda = find_profile("cuda");
  for (const Subject& s : subjects) {
    PolicyRequest req;
    if (s.rounding) req.rounding = parse<Rounding>(s.rounding);
    if (s.overflow) req.overflow = parse<Overflow>(s.overflow);
    std::string error;
    const Format* to = find_format(s.to);
    const auto resolved = resolve(cuda, *to, req, error);
    if (!resolved) {
      if (r.begin == 0 && r.end > 0) {
        rec.cases(1);
        rec.mismatch({0, static_cast<std::uint32_t>(&s - subjects)},
                     [&] { return std::string(s.function) + ": --profile cuda does not resolve: " + error; });
      }
      continue;
    }
    v.push_back({&s, resolved->target, resolved->policy});
  }
  return v;
}

// A disagreement on the check's input `input` (f32 bits `u`), at the position of its subject.
void record(Recorder& rec, std::uint64_t input, const Bound& b, std::uint32_t u, std::uint64_t theirs,
            const Result& ours, const char* path) {
  rec.mismatch({input, static_cast<std::uint32_t>(b.subject - subjects)}, [&] {
    return std::string("f32 ") + code_and_value(formats::f32, u) + " -> " + b.to->name +
           " [cuda: " + policy_text(b.policy) + "]: the toolkit's " + b.subject->function + " gives " +
           code_and_value(*b.to, theirs) + ", lowbit's " + path + " gives " + result_text(*b.to, ours);
  });
}

// inputs[i] for i in `r`.
void run_inputs(Recorder& rec, const std::vector<Bound>& bound, const std::vector<std::uint32_t>& inputs, Range r) {
  for (std::uint64_t i = r.begin; i < r.end; ++i) {
    const std::uint32_t u = inputs[i];
    const float x = std::bit_cast<float>(u);
    for (const Bound& b : bound) {
      const std::uint64_t theirs = b.subject->convert(x);
      const Result ours = convert(formats::f32, u, *b.to, b.policy);
      if (ours.code != theirs) record(rec, i, b, u, theirs, ours, "scalar fast path");
    }
  }
  rec.cases(r.size() * bound.size());
}

std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The quick tier's inputs: (1) every sign and exponent with edge significands (TestFloat's pattern
// idea); (2) every value and midpoint of each target the toolkit converts into, with one and two f32
// ulps either side; (3) seeded random bit patterns, half of them uniform over all 2^32 and half with
// exponents where the small formats live, up to `total`.
std::vector<std::uint32_t> quick_inputs(std::uint64_t total) {
  std::vector<std::uint32_t> v;
  std::vector<std::uint32_t> sig = {0, 1, 2, 3, 4, 5, 6, 7, 0x7FFFFF, 0x7FFFFE, 0x7FFFFD, 0x7FFFFC, 0x555555, 0x2AAAAA};
  for (int k = 0; k < 23; ++k) {
    const std::uint32_t p = 1u << k;
    for (std::uint32_t s : {p, p - 1, p + 1, 0x7FFFFFu - (p - 1), 0x7FFFFFu ^ p, p | (p >> 1), p | 1u})
      sig.push_back(s & 0x7FFFFF);
  }
  for (std::uint32_t sign : {0u, 1u})
    for (std::uint32_t e = 0; e < 256; ++e)
      for (std::uint32_t s : sig) v.push_back((sign << 31) | (e << 23) | s);
  for (const char* t : {"e4m3", "e5m2", "e2m1", "e2m3", "e3m2", "e8m0", "bf16", "f16"}) {
    for (double d : midpoint_points(*find_format(t))) {
      const float f = static_cast<float>(d);
      if (static_cast<double>(f) != d || std::isinf(f)) continue;
      const std::uint32_t c = std::bit_cast<std::uint32_t>(f);
      for (int k = -2; k <= 2; ++k) {
        const std::uint32_t m = (c & 0x7FFFFFFFu) + static_cast<std::uint32_t>(k);
        if ((c & 0x7FFFFFFFu) + static_cast<std::uint32_t>(k + 2) < 2) continue;  // below +0
        v.push_back((c & 0x80000000u) | (m & 0x7FFFFFFFu));
      }
    }
  }
  std::uint64_t h = 0xC0DA5EEDull;
  while (v.size() < total) {
    h = splitmix(h);
    std::uint32_t u = static_cast<std::uint32_t>(h);
    if (h >> 63) {
      const std::uint32_t e = 127 - 40 + static_cast<std::uint32_t>((h >> 32) % 60);
      u = (u & 0x807FFFFFu) | (e << 23);
    }
    v.push_back(u);
  }
  return v;
}

constexpr std::uint64_t quick_count = 12'000'000;

Outcome quick_run(Range r, const Progress& progress) {
  Recorder rec;
  const std::vector<Bound> bound = bind(rec, r);
  const std::vector<std::uint32_t> inputs = quick_inputs(quick_count);
  Ticker tick(progress, r.size());
  parallel_chunks(r.size(), 1 << 14, [&](std::uint64_t b, std::uint64_t e) {
    run_inputs(rec, bound, inputs, {r.begin + b, r.begin + e});
    tick.advance(e - b);
  });
  tick.finish();
  Outcome o = rec.outcome();
  o.note = std::to_string(inputs.size()) + " f32 inputs x " + std::to_string(bound.size()) + " toolkit conversions";
  return o;
}

constexpr std::uint64_t all_f32 = std::uint64_t{1} << 32;

// All 2^32 inputs (input i is the f32 with bits i): lowbit's side uses the batch path (lowbit/batch.hpp),
// whose contract is equality with the scalar fast path; a disagreement is re-described with the scalar result.
Outcome full_run(Range r, const Progress& progress) {
  Recorder rec;
  const std::vector<Bound> bound = bind(rec, r);
  constexpr std::uint64_t chunk = 1 << 16;
  Ticker tick(progress, r.size());
  // Chunks of aligned inputs; the first and last may be cut by the range.
  const std::uint64_t first_chunk = r.begin / chunk, end_chunk = (r.end + chunk - 1) / chunk;
  parallel_chunks(end_chunk - first_chunk, 1, [&](std::uint64_t b, std::uint64_t e) {
    std::vector<std::uint32_t> block(chunk);
    std::vector<std::uint16_t> ours16(chunk);
    std::vector<std::uint8_t> ours8(chunk);
    for (std::uint64_t c = first_chunk + b; c < first_chunk + e; ++c) {
      const std::uint64_t lo = std::max(c * chunk, r.begin), hi = std::min((c + 1) * chunk, r.end);
      const std::uint64_t n = hi - lo;
      for (std::uint64_t i = 0; i < n; ++i) block[i] = static_cast<std::uint32_t>(lo + i);
      for (const Bound& bd : bound) {
        const bool wide = batch_code_bytes(*bd.to) == 2;
        convert_batch(formats::f32, block.data(), n, *bd.to, bd.policy,
                      wide ? static_cast<void*>(ours16.data()) : static_cast<void*>(ours8.data()), nullptr, nullptr,
                      nullptr);
        for (std::uint64_t i = 0; i < n; ++i) {
          const std::uint64_t ours = wide ? ours16[i] : ours8[i];
          const std::uint64_t theirs = bd.subject->convert(std::bit_cast<float>(block[i]));
          if (ours == theirs) continue;
          const Result scalar = convert(formats::f32, block[i], *bd.to, bd.policy);
          Result batch = scalar;
          batch.code = ours;
          record(rec, lo + i, bd, block[i], theirs, batch,
                 scalar.code == theirs ? "batch path (which here differs from its scalar path)" : "batch path");
        }
      }
      rec.cases(n * bound.size());
      tick.advance(n);
    }
  });
  tick.finish();
  Outcome o = rec.outcome();
  o.note = "all 2^32 f32 inputs x " + std::to_string(bound.size()) + " toolkit conversions";
  return o;
}

}  // namespace

std::vector<Check> cuda_host_checks() {
  static_assert(subject_count == 19);
  return {
      {"cuda-host", Tier::quick,
       "the CUDA toolkit's host conversions (fp8, fp6, fp4, e8m0, f16, bf16) vs lowbit --profile cuda: boundary "
       "patterns, every value and midpoint of each target +-2 ulps, and seeded random f32 (12 million inputs)",
       "f32 input", [] { return quick_count; }, quick_run},
      {"cuda-host-all-f32", Tier::full, "the CUDA toolkit's host conversions vs lowbit --profile cuda on all 2^32 f32",
       "f32 input", [] { return all_f32; }, full_run},
  };
}

}  // namespace lowbit::checks
