// Device tier: the reference's constexpr element conversion compiled for the GPU against the host's, on
// every one of the 2^32 f32 inputs, for every format under each profile's default policy (and the device
// quantizers' element and scale policies): code, flags and ternary value.
//
// The host's answers arrive as digests (lowbit/conversion_digest.hpp) that the host computed in the full
// tier and committed (device/digests/f32_conversions.txt, compiled into this binary), so that the GPU run
// does not wait for 2^32 host conversions per pair.  For each pair the GPU converts each chunk of 2^24
// inputs with lowbit::convert (device::convert_from_f32) and, where the 32-bit path applies, with
// lowbit::fast::convert (device::fast_convert_from_f32), and digests the results; every chunk digest must
// equal the committed one.  A chunk that differs is converted once more and compared element by element
// with the host's conversion, so that the first differing inputs are printed with both results.
#include "lowbit/convert.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "lowbit/conversion_digest.hpp"
#include "lowbit/device/check.hpp"
#include "lowbit/device/elements.hpp"
#include "lowbit/fast_convert.hpp"
#include "lowbit/policy_pairs.hpp"
#include "lowbit/registry.hpp"
#include "support.hpp"

// The committed digest file's text (generated from device/digests/f32_conversions.txt at configure time).
std::string lowbit_f32_digests_text();

namespace {

using lowbit::Format;
using lowbit::Policy;
using lowbit::Result;
namespace digest = lowbit::digest;
namespace device = lowbit::device;

template <class T>
struct DevBuf {
  T* p = nullptr;
  explicit DevBuf(std::size_t n) { LOWBIT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(T))); }
  ~DevBuf() { cudaFree(p); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
};

enum class Path { general, fast };
const char* path_name(Path p) { return p == Path::general ? "convert" : "fast::convert"; }

void run_chunk(Path path, const Format& to, const Policy& pol, const std::uint32_t* in, Result* out) {
  const cudaError_t e = path == Path::general ? device::convert_from_f32(to, pol, in, out, digest::k_chunk)
                                              : device::fast_convert_from_f32(to, pol, in, out, digest::k_chunk);
  LOWBIT_CUDA_CHECK(e);
}

// Every chunk's digest on the GPU through one path.
std::vector<std::uint64_t> device_digests(Path path, const Format& to, const Policy& pol, std::uint32_t* in,
                                          Result* out, std::uint64_t* sums) {
  LOWBIT_CUDA_CHECK(cudaMemset(sums, 0, sizeof(std::uint64_t) * digest::k_chunks));
  for (int c = 0; c < digest::k_chunks; ++c) {
    const std::uint64_t first = static_cast<std::uint64_t>(c) * digest::k_chunk;
    LOWBIT_CUDA_CHECK(device::fill_sequence(in, static_cast<std::uint32_t>(first), digest::k_chunk));
    run_chunk(path, to, pol, in, out);
    LOWBIT_CUDA_CHECK(device::digest_results(out, digest::k_chunk, first, sums + c));
  }
  std::vector<std::uint64_t> h(digest::k_chunks);
  LOWBIT_CUDA_CHECK(cudaMemcpy(h.data(), sums, sizeof(std::uint64_t) * h.size(), cudaMemcpyDeviceToHost));
  return h;
}

// A chunk whose digest differs: the GPU's results against the host's, element by element.
void explain_chunk(Path path, const Format& to, const Policy& pol, int chunk, std::uint32_t* in, Result* out) {
  const auto first = static_cast<std::uint32_t>(static_cast<std::uint64_t>(chunk) * digest::k_chunk);
  LOWBIT_CUDA_CHECK(device::fill_sequence(in, first, digest::k_chunk));
  run_chunk(path, to, pol, in, out);
  std::vector<Result> got(digest::k_chunk);
  LOWBIT_CUDA_CHECK(cudaMemcpy(got.data(), out, sizeof(Result) * got.size(), cudaMemcpyDeviceToHost));
  int printed = 0;
  std::uint64_t differ = 0;
  for (std::uint64_t i = 0; i < digest::k_chunk; ++i) {
    const std::uint32_t x = first + static_cast<std::uint32_t>(i);
    const Result want = lowbit::convert(lowbit::formats::f32, x, to, pol);
    if (got[i] == want) continue;
    ++differ;
    if (printed++ < 5)
      std::printf("    f32 0x%08X: host code 0x%llX flags %d ternary %d, GPU (%s) code 0x%llX flags %d ternary %d\n", x,
                  static_cast<unsigned long long>(want.code), want.flags, want.ternary, path_name(path),
                  static_cast<unsigned long long>(got[i].code), got[i].flags, got[i].ternary);
  }
  std::printf("    chunk %d: %llu of %llu results differ from the host's convert()%s\n", chunk,
              static_cast<unsigned long long>(differ), static_cast<unsigned long long>(digest::k_chunk),
              differ ? "" : " (so the committed digest is what differs: regenerate it)");
}

TEST(DeviceConvert, EveryF32InputEqualsTheHostsDigests) {
  LOWBIT_REQUIRE_GPU(70);
  std::string error;
  const auto file = digest::parse_file(lowbit_f32_digests_text(), error);
  ASSERT_TRUE(file) << "device/digests/f32_conversions.txt: " << error;
  ASSERT_FALSE(file->pairs.empty());
  DevBuf<std::uint32_t> in(digest::k_chunk);
  DevBuf<Result> out(digest::k_chunk);
  DevBuf<std::uint64_t> sums(digest::k_chunks);
  std::size_t pairs = 0, fast_pairs = 0, bad_chunks = 0, bad_pairs = 0;
  const auto start = std::chrono::steady_clock::now();
  for (const digest::FilePair& fp : file->pairs) {
    const Format* to = lowbit::find_format(fp.target);
    const auto pol = lowbit::parse_whole_policy_text(fp.policy);
    ASSERT_NE(to, nullptr) << fp.target;
    ASSERT_TRUE(pol) << fp.policy;
    ASSERT_EQ(fp.fast, lowbit::fast::applies(lowbit::formats::f32, *to, *pol)) << fp.target << " | " << fp.policy;
    const auto t0 = std::chrono::steady_clock::now();
    std::size_t pair_bad = 0;
    for (Path path : {Path::general, Path::fast}) {
      if (path == Path::fast && !fp.fast) continue;
      const auto got = device_digests(path, *to, *pol, in.p, out.p, sums.p);
      int explained = 0;
      for (int c = 0; c < digest::k_chunks; ++c) {
        if (got[static_cast<std::size_t>(c)] == fp.digests[static_cast<std::size_t>(c)]) continue;
        ++pair_bad;
        if (explained++ < 2) {
          std::printf(
              "  MISMATCH f32 -> %s | %s | %s: %s on the GPU, chunk %d (inputs 0x%08llX..): digest %s, host %s\n",
              fp.target.c_str(), fp.policy.c_str(), fp.labels.c_str(), path_name(path), c,
              static_cast<unsigned long long>(c) << digest::k_chunk_bits,
              digest::hex16(got[static_cast<std::size_t>(c)]).c_str(),
              digest::hex16(fp.digests[static_cast<std::size_t>(c)]).c_str());
          explain_chunk(path, *to, *pol, c, in.p, out.p);
        }
      }
    }
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("[convert] f32 -> %-12s %-9s %3d chunks %s %4zu differ %8.1f ms  %s\n", fp.target.c_str(),
                fp.fast ? "+fast" : "", digest::k_chunks, pair_bad ? "MISMATCH" : "equal   ", pair_bad, ms,
                fp.labels.c_str());
    ++pairs;
    fast_pairs += fp.fast;
    bad_chunks += pair_bad;
    bad_pairs += pair_bad != 0;
    EXPECT_EQ(pair_bad, 0u) << "f32 -> " << fp.target << " under " << fp.policy << " (" << fp.labels << ")";
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  RecordProperty("pairs", std::to_string(pairs));
  RecordProperty("fast_pairs", std::to_string(fast_pairs));
  RecordProperty("inputs_per_pair", "4294967296");
  RecordProperty("mismatching_chunks", std::to_string(bad_chunks));
  RecordProperty("mismatching_pairs", std::to_string(bad_pairs));
  RecordProperty("seconds", std::to_string(s));
  std::printf("%zu pairs (%zu also through the 32-bit path) x 2^32 f32 inputs: %zu chunks differ, %.1f s\n", pairs,
              fast_pairs, bad_chunks, s);
}

// The 32-bit path is refused where it does not apply, before any launch.
TEST(DeviceConvert, FastPathRefusesWhatItDoesNotCover) {
  LOWBIT_REQUIRE_GPU(70);
  Policy sr;
  sr.rounding = lowbit::Rounding::sr_a;
  sr.sr_bits = 8;
  EXPECT_EQ(device::fast_convert_from_f32(lowbit::formats::e4m3, sr, nullptr, nullptr, 16), cudaErrorInvalidValue);
  EXPECT_EQ(device::fast_convert_from_f32(lowbit::formats::int8, Policy{}, nullptr, nullptr, 16),
            cudaErrorInvalidValue);
}

}  // namespace
