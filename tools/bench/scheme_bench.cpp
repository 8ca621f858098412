// Scaling-scheme throughput against the plain conversion, side by side in one run (ratios,
// never a lone absolute time).
//
//   BM_Plain/<element>: lowbit::convert_batch f32 -> element (the SIMD path), the element policy every
//     scheme uses (rne + satfinite), codes written one per byte;
//   BM_PlainCodes/<element>: the same conversion delivered as quantize delivers codes, one byte per
//     element in a freshly allocated, zeroed vector (16 MiB here), converted row by row straight into it;
//   BM_Scaled/e4m3: the scaled conversion alone (ScaledBatch, one multiplier per 32 elements, all 1);
//   BM_Scheme/<scheme>: lowbit::scale::quantize (amax passes, scales, element codes), one thread, a fresh
//     result each time (its codes allocated and zeroed, as BM_PlainCodes delivers them);
//   BM_SchemeInto/<scheme>: lowbit::scale::quantize_into the previous result, whose storage it reuses (the
//     codes overwritten in place, as BM_Plain reuses its output): the rows the targets are checked on.
// Input: a 4096 x 4096 (LOWBIT_SCHEME_BENCH_SIDE) f32 tensor of normally distributed values (seeded);
// elements per second.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "lowbit/batch.hpp"
#include "lowbit/format.hpp"
#include "lowbit/scale.hpp"

namespace {

using namespace lowbit;

// The tensor's side: 4096 (64 MiB of f32, streamed from memory), or LOWBIT_SCHEME_BENCH_SIDE (for example
// 256: 256 KiB, which stays in cache and so shows the arithmetic alone).
int side_from_env() {
  const char* s = std::getenv("LOWBIT_SCHEME_BENCH_SIDE");
  const int v = s != nullptr ? std::atoi(s) : 0;
  return v >= 16 && v <= 16384 ? v : 4096;
}
const int kSide = side_from_env();

const scale::Tensor& input() {
  static const scale::Tensor t = [] {
    scale::Tensor x{kSide, kSide, std::vector<float>(static_cast<std::size_t>(kSide) * kSide)};
    std::mt19937 g(20240602);
    std::normal_distribution<float> d(0.0f, 3.0f);
    for (float& v : x.data) v = d(g);
    return x;
  }();
  return t;
}

void finish(benchmark::State& state) {
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * kSide * kSide);
}

void plain(benchmark::State& state, const Format* element) {
  const scale::Options defaults;
  const auto& x = input();
  std::vector<std::uint8_t> out(x.data.size() * batch_code_bytes(*element));
  for (auto _ : state) {
    convert_batch(formats::f32, x.data.data(), x.data.size(), *element, defaults.element_policy, out.data(), nullptr,
                  nullptr, nullptr);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetLabel(batch_target_name());
  finish(state);
}

void plain_codes(benchmark::State& state, const Format* element) {
  const scale::Options defaults;
  const auto& x = input();
  for (auto _ : state) {
    std::vector<std::uint8_t> codes(x.data.size() * batch_code_bytes(*element));
    for (std::size_t r = 0; r < static_cast<std::size_t>(kSide); ++r) {
      const std::size_t at = r * kSide;
      convert_batch(formats::f32, x.data.data() + at, kSide, *element, defaults.element_policy,
                    codes.data() + at * batch_code_bytes(*element), nullptr, nullptr, nullptr);
    }
    benchmark::DoNotOptimize(codes.data());
    benchmark::ClobberMemory();
  }
  finish(state);
}

// The scaled conversion alone (ScaledBatch, the inner step of every block scheme): the whole tensor times
// one multiplier per 32 elements (all 1, so the codes are the plain conversion's), into a reused buffer.
void scaled(benchmark::State& state, const Format* element) {
  const scale::Options defaults;
  const auto& x = input();
  std::vector<std::uint8_t> out(x.data.size() * batch_code_bytes(*element));
  const std::vector<float> mult(x.data.size() / 32 + 1, 1.0f);
  const ScaledBatch batch(*element, defaults.element_policy);
  for (auto _ : state) {
    batch.run(x.data.data(), x.data.size(), mult.data(), 32, out.data(), nullptr);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  finish(state);
}

void scheme(benchmark::State& state, scale::Options o) {
  const auto& x = input();
  for (auto _ : state) {
    scale::Quantized q = scale::quantize(x, o);
    benchmark::DoNotOptimize(q.codes.data());
    benchmark::ClobberMemory();
  }
  finish(state);
}

void scheme_into(benchmark::State& state, scale::Options o) {
  const auto& x = input();
  scale::Quantized q;
  scale::quantize_into(x, o, q);  // the storage every timed call reuses
  for (auto _ : state) {
    scale::quantize_into(x, o, q);
    benchmark::DoNotOptimize(q.codes.data());
    benchmark::ClobberMemory();
  }
  finish(state);
}

struct Case {
  const char* name;
  scale::Options options;
};

scale::Options make(scale::Scheme s, const Format* element = nullptr, int block = 0, int block_rows = 0,
                    scale::MxRule rule = scale::MxRule::floor) {
  scale::Options o;
  o.scheme = s;
  o.element = element;
  o.block = block;
  o.block_rows = block_rows;
  o.mx_rule = rule;
  return o;
}

void register_all() {
  using scale::Scheme;
  benchmark::RegisterBenchmark("BM_Plain/e4m3", [](benchmark::State& s) { plain(s, &formats::e4m3); })
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_Plain/e2m1", [](benchmark::State& s) { plain(s, &formats::e2m1); })
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_PlainCodes/e4m3", [](benchmark::State& s) { plain_codes(s, &formats::e4m3); })
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_PlainCodes/e2m1", [](benchmark::State& s) { plain_codes(s, &formats::e2m1); })
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_Scaled/e4m3", [](benchmark::State& s) { scaled(s, &formats::e4m3); })
      ->Unit(benchmark::kMillisecond);
  const Case cases[] = {
      {"tensor", make(Scheme::tensor)},
      {"channel", make(Scheme::channel)},
      {"token", make(Scheme::token)},
      {"block_1x128", make(Scheme::block, nullptr, 128, 1)},
      {"block_128x128", make(Scheme::block, nullptr, 128, 128)},
      {"mx_e4m3_floor", make(Scheme::mx, &formats::e4m3, 32, 0, scale::MxRule::floor)},
      {"mx_e4m3_rceil", make(Scheme::mx, &formats::e4m3, 32, 0, scale::MxRule::rceil)},
      {"mx_e2m1", make(Scheme::mx, &formats::e2m1, 32, 0, scale::MxRule::floor)},
      {"nvfp4", make(Scheme::nvfp4)},
      {"nvfp4_2d", make(Scheme::nvfp4_2d)},
  };
  for (const Case& c : cases) {
    const scale::Options o = c.options;
    benchmark::RegisterBenchmark((std::string("BM_Scheme/") + c.name).c_str(),
                                 [o](benchmark::State& s) { scheme(s, o); })
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark((std::string("BM_SchemeInto/") + c.name).c_str(), [o](benchmark::State& s) {
      scheme_into(s, o);
    })->Unit(benchmark::kMillisecond);
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::AddCustomContext("lowbit.flags", LOWBIT_BENCH_FLAGS);
  benchmark::AddCustomContext("compiler", LOWBIT_BENCH_COMPILER);
  benchmark::AddCustomContext("lowbit.simd_target", batch_target_name());
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
