// Device tier: the FP8 GEMMs bit for bit against the tensor-core models (docs/semantics.md §5).
//
//   CUTLASS fast accumulation   == run_model(hopper-fp8)                       (asserted)
//   CUTLASS promoted (128)      == run_promoted(hopper-fp8, 128)               (asserted)
//   CUTLASS promoted_blockwise  == run_promoted(hopper-fp8, 128)               (asserted; blockwise mainloop,
//                                                                                unit scales)
//   CUTLASS blockwise           == run_block_scaled(hopper-fp8, 1x128, 128x128) (asserted)
//   CUTLASS bf16 D              == rne-to-bf16 of the f32 model result          (asserted)
//   CUTLASS alpha != 1          vs apply_epilogue() (the model's unconfirmed order: recorded, not asserted)
//   cuBLASLt fast accumulation on / off vs every candidate model: which one matches is recorded, not asserted
//   cuBLASLt e4m3 D and amax_d  vs quantize_output() of its own f32 D: recorded, not asserted
//   4096^3 smoke: CUTLASS vs cuBLASLt by relative error (asserted, loose bound)
//
// Operands are seeded random e4m3 matrices (B also e5m2) in several regimes: quantized N(0,1), the whole
// exponent range, pairwise cancellation across group boundaries, subnormals, and NaN / Inf.  Output
// buffers are poisoned (0xFF bytes) before every launch; an element left unwritten is a mismatch.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "lowbit/convert.hpp"
#include "lowbit/device/check.hpp"
#include "lowbit/device/cublaslt.hpp"
#include "lowbit/device/gemm.hpp"
#include "lowbit/format.hpp"
#include "lowbit/gemm.hpp"
#include "support.hpp"

namespace lowbit::device {
namespace {

namespace dg = lowbit::device::gemm;
namespace lt = lowbit::device::cublaslt;
using lowbit::gemm::Matrix;
using Codes = std::vector<std::uint64_t>;

constexpr std::uint32_t kPoison32 = 0xFFFFFFFFu;
constexpr std::uint16_t kPoison16 = 0xFFFFu;
constexpr std::uint8_t kPoison8 = 0xFFu;  // e4m3 -NaN: never a satfinite output

// ---- device memory ---------------------------------------------------------------------------------

class Buffer {
 public:
  explicit Buffer(std::size_t bytes) : bytes_(bytes) { LOWBIT_CUDA_CHECK(cudaMalloc(&p_, bytes)); }
  ~Buffer() {
    if (p_) cudaFree(p_);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  void* get() const { return p_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(p_);
  }
  template <class T>
  void upload(const std::vector<T>& v) {
    LOWBIT_CUDA_CHECK(cudaMemcpy(p_, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  template <class T>
  std::vector<T> download(std::size_t n) const {
    std::vector<T> v(n);
    LOWBIT_CUDA_CHECK(cudaMemcpy(v.data(), p_, n * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
  }
  void fill(int byte) { LOWBIT_CUDA_CHECK(cudaMemset(p_, byte, bytes_)); }

 private:
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
};

void sync() {
  LOWBIT_CUDA_CHECK(cudaGetLastError());
  LOWBIT_CUDA_CHECK(cudaDeviceSynchronize());
}

// ---- element helpers (the reference's conversions) --------------------------------------------------

Policy satfinite() {
  Policy p;
  p.overflow = Overflow::satfinite;
  return p;
}

std::uint64_t quantize(float x, const Format& f) {
  return convert(formats::f32, std::bit_cast<std::uint32_t>(x), f, satfinite()).code;
}
float value(const Format& f, std::uint64_t code) {  // exact for every fp8 / bf16 code
  return std::bit_cast<float>(static_cast<std::uint32_t>(convert(f, code, formats::f32, Policy{}).code));
}
std::uint32_t bits(float x) { return std::bit_cast<std::uint32_t>(x); }
bool is_nan32(std::uint32_t c) { return (c & 0x7F800000u) == 0x7F800000u && (c & 0x007FFFFFu) != 0; }

// ---- operands ----------------------------------------------------------------------------------------

enum class Regime { normal, wide, cancellation, subnormal, special };
const char* regime_name(Regime r) {
  switch (r) {
    case Regime::normal: return "normal";
    case Regime::wide: return "wide";
    case Regime::cancellation: return "cancellation";
    case Regime::subnormal: return "subnormal";
    case Regime::special: return "nan_inf";
  }
  return "?";
}

struct Case {
  std::string label;
  int m = 0, n = 0, k = 0;
  Matrix a, b;    // a: M x K e4m3; b: K x N (e4m3 or e5m2), row-major codes as the reference takes them
  Matrix sa, sb;  // block scales (f32 codes): M x K/128 and K/128 x N/128 (blockwise cases only)
  // Model results, computed once and shared by the tests.
  std::optional<Codes> fast, promoted, blockwise;
  std::map<std::string, Codes> candidates;
};

const Format& fmt_e4m3() { return formats::e4m3; }

std::uint64_t random_code(std::mt19937_64& rng, const Format& f) {  // any finite code
  for (;;) {
    const std::uint64_t c = rng() & 0xFFu;
    const Unpacked u = unpack(f, c);
    if (u.cls == ValueClass::finite || u.cls == ValueClass::zero) return c;
  }
}

std::uint64_t small_code(std::mt19937_64& rng, const Format& f) {  // subnormals and the smallest normals
  const int mant = f.mantissa_bits;
  const std::uint64_t sign = (rng() & 1) << (f.bits - 1);
  const std::uint64_t exp = rng() % 3 == 0 ? 1 : 0;  // two thirds subnormal
  const std::uint64_t frac = rng() & ((1u << mant) - 1);
  return sign | (exp << mant) | frac;
}

Matrix matrix(const Format& f, int rows, int cols) {
  Matrix x;
  x.format = &f;
  x.rows = rows;
  x.cols = cols;
  x.codes.assign(static_cast<std::size_t>(rows) * cols, 0);
  return x;
}

void fill(Matrix& x, Regime r, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const Format& f = *x.format;
  for (auto& c : x.codes) {
    switch (r) {
      case Regime::normal:
      case Regime::special:
      case Regime::cancellation: c = quantize(normal(rng), f); break;
      case Regime::wide: c = random_code(rng, f); break;
      case Regime::subnormal: c = rng() % 2 ? small_code(rng, f) : quantize(normal(rng), f); break;
    }
  }
}

Case make_case(int m, int n, int k, Regime r, const Format& fb, std::uint64_t seed, bool blockwise_scales) {
  std::mt19937_64 rng(seed);
  Case c;
  c.m = m;
  c.n = n;
  c.k = k;
  c.label = std::string(regime_name(r)) + " " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) +
            " e4m3 x " + fb.name;
  c.a = matrix(fmt_e4m3(), m, k);
  c.b = matrix(fb, k, n);
  fill(c.a, r, rng);
  fill(c.b, r, rng);
  if (r == Regime::cancellation) {
    // Pairs (p, p + 1) for odd p, so that pairs straddle the 32-element groups and the 128-element
    // promotion blocks: a[i][p+1] = a[i][p] and b[p+1][j] = -b[p][j] (one in eight with the last
    // mantissa bit changed), with a spread of magnitudes.  The products cancel, the exact sums are tiny
    // next to their terms, and the alignment to the group's largest exponent decides the result.
    std::uniform_int_distribution<int> shift(-6, 6);
    for (int i = 0; i < m; ++i)
      for (int p = 1; p + 1 < k; p += 2) {
        const float v =
            value(fmt_e4m3(), c.a.codes[static_cast<std::size_t>(i) * k + p]) * std::ldexp(1.0f, shift(rng));
        const std::uint64_t q = quantize(v, fmt_e4m3());
        c.a.codes[static_cast<std::size_t>(i) * k + p] = q;
        c.a.codes[static_cast<std::size_t>(i) * k + p + 1] = q;
      }
    const std::uint64_t sign = std::uint64_t{1} << (fb.bits - 1);
    for (int p = 1; p + 1 < k; p += 2)
      for (int j = 0; j < n; ++j) {
        std::uint64_t q = c.b.codes[static_cast<std::size_t>(p) * n + j] ^ sign;
        if (rng() % 8 == 0 && (q & 0x7F) != 0) q ^= 1;  // stays finite: the top codes are not touched
        const Unpacked u = unpack(fb, q);
        if (u.cls == ValueClass::finite || u.cls == ValueClass::zero)
          c.b.codes[static_cast<std::size_t>(p + 1) * n + j] = q;
      }
  }
  if (r == Regime::special) {
    // A few NaNs in A (e4m3 has no Inf) and +-Inf in an e5m2 B, including Inf - Inf in one output.
    const std::uint64_t nan_a = 0x7F;
    for (int t = 0; t < 3; ++t)
      c.a.codes[(rng() % m) * static_cast<std::size_t>(k) + rng() % k] = nan_a | ((rng() & 1) << 7);
    if (fb.exponent_bits == 5) {
      for (int t = 0; t < 4; ++t)
        c.b.codes[(rng() % k) * static_cast<std::size_t>(n) + rng() % n] = 0x7C | ((rng() & 1) << 7);
      // Column 0: +Inf and -Inf in the same column, so that every row whose A is non-zero at both
      // positions sums Inf - Inf.
      c.b.codes[0] = 0x7C;
      c.b.codes[static_cast<std::size_t>(k - 1) * n] = 0xFC;
    }
  }
  if (blockwise_scales) {
    const int kb = k / 128, nb = n / 128;
    c.sa = matrix(formats::f32, m, kb);
    c.sb = matrix(formats::f32, kb, nb);
    std::uniform_real_distribution<float> mant(1.0f, 2.0f);
    std::uniform_int_distribution<int> ex(-8, 8);
    for (auto& s : c.sa.codes) s = bits(std::ldexp(mant(rng), ex(rng)));
    for (auto& s : c.sb.codes) s = bits(std::ldexp(mant(rng), ex(rng)));
  }
  return c;
}

const lowbit::gemm::TensorCoreModel& hopper_fp8() {
  const auto* m = lowbit::gemm::find_model("hopper-fp8");
  if (!m) throw std::runtime_error("the reference has no hopper-fp8 model");
  return *m;
}

std::vector<Case>& cases() {
  static std::vector<Case> all = [] {
    std::vector<Case> v;
    std::uint64_t seed = 0x10b17f8u;
    struct Shape {
      int m, n, k;
    };
    const Shape shapes[] = {{128, 128, 32}, {128, 128, 128}, {256, 256, 256}, {256, 256, 1024}, {256, 256, 4096}};
    for (const Shape& s : shapes)
      for (Regime r : {Regime::normal, Regime::wide, Regime::cancellation, Regime::subnormal}) {
        if (s.k == 4096 && (r == Regime::cancellation || r == Regime::subnormal)) continue;  // time
        v.push_back(make_case(s.m, s.n, s.k, r, formats::e4m3, ++seed, s.k % 128 == 0));
      }
    v.push_back(make_case(256, 128, 512, Regime::normal, formats::e5m2, ++seed, false));
    v.push_back(make_case(256, 128, 512, Regime::wide, formats::e5m2, ++seed, false));
    v.push_back(make_case(128, 256, 256, Regime::special, formats::e5m2, ++seed, false));
    v.push_back(make_case(128, 128, 256, Regime::special, formats::e4m3, ++seed, true));
    // 4 x 6 tiles: enough for the tile scheduler's swizzle and 2 x 1 clusters to change the tile order.
    v.push_back(make_case(512, 768, 256, Regime::normal, formats::e4m3, ++seed, true));
    return v;
  }();
  return all;
}

const Codes& fast_model(Case& c) {
  if (!c.fast) c.fast = lowbit::gemm::run_model(hopper_fp8(), c.a, c.b, nullptr);
  return *c.fast;
}
const Codes& promoted_model(Case& c) {
  if (!c.promoted) c.promoted = lowbit::gemm::run_promoted(hopper_fp8(), dg::kPromotionInterval, c.a, c.b, nullptr);
  return *c.promoted;
}
const Codes& blockwise_model(Case& c) {
  if (!c.blockwise) c.blockwise = lowbit::gemm::run_block_scaled(hopper_fp8(), c.a, c.b, c.sa, c.sb, nullptr);
  return *c.blockwise;
}

// Device copies: A as is (M x K), B transposed to N x K (column-major K x N).
std::vector<std::uint8_t> device_a(const Case& c) {
  std::vector<std::uint8_t> v(c.a.codes.size());
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::uint8_t>(c.a.codes[i]);
  return v;
}
std::vector<std::uint8_t> device_b(const Case& c) {
  std::vector<std::uint8_t> v(static_cast<std::size_t>(c.n) * c.k);
  for (int kk = 0; kk < c.k; ++kk)
    for (int j = 0; j < c.n; ++j) v[static_cast<std::size_t>(j) * c.k + kk] = static_cast<std::uint8_t>(c.b.at(kk, j));
  return v;
}

// ---- comparison and reporting ------------------------------------------------------------------------

struct Tally {
  std::uint64_t compared = 0, mismatches = 0, unwritten = 0, nan_payload = 0;
};

int g_printed = 0;  // mismatch lines printed by this process (at most ~20)

void print_operands(const Case& c, int i, int j) {
  std::printf("    A row %d (e4m3):", i);
  for (int kk = 0; kk < c.k; ++kk)
    std::printf("%s%02llX", kk % 32 ? " " : " | ", static_cast<unsigned long long>(c.a.at(i, kk)));
  std::printf("\n    B col %d (%s):", j, c.b.format->name);
  for (int kk = 0; kk < c.k; ++kk)
    std::printf("%s%02llX", kk % 32 ? " " : " | ", static_cast<unsigned long long>(c.b.at(kk, j)));
  std::printf("\n");
}

// Compares f32 codes (got: device, want: reference).  `poison` marks unwritten elements.
Tally compare32(const char* what, const Case& c, const std::vector<std::uint32_t>& got, const Codes& want) {
  Tally t;
  int local = 0;
  for (std::size_t e = 0; e < got.size(); ++e) {
    ++t.compared;
    const std::uint32_t w = static_cast<std::uint32_t>(want[e]);
    if (got[e] == w) continue;
    ++t.mismatches;
    if (got[e] == kPoison32) ++t.unwritten;
    if (g_printed < 20) {
      const int i = static_cast<int>(e / c.n), j = static_cast<int>(e % c.n);
      std::printf("  [%s] %s: D(%d, %d) = 0x%08X (%.9g), expected 0x%08X (%.9g)\n", what, c.label.c_str(), i, j, got[e],
                  std::bit_cast<float>(got[e]), w, std::bit_cast<float>(w));
      if (local++ == 0 && g_printed < 4 && c.k <= 1024) print_operands(c, i, j);
      ++g_printed;
    }
  }
  return t;
}

// bf16 codes against the f32 reference rounded to bf16 (rne); NaN against NaN counts as equal and is
// tallied in nan_payload when the codes differ.
Tally compare16(const char* what, const Case& c, const std::vector<std::uint16_t>& got, const Codes& want32) {
  Tally t;
  for (std::size_t e = 0; e < got.size(); ++e) {
    ++t.compared;
    const std::uint64_t w = convert(formats::f32, want32[e], formats::bf16, Policy{}).code;
    if (got[e] == w) continue;
    const bool got_nan = (got[e] & 0x7F80u) == 0x7F80u && (got[e] & 0x7Fu);
    if (got_nan && is_nan32(static_cast<std::uint32_t>(want32[e]))) {
      ++t.nan_payload;
      continue;
    }
    ++t.mismatches;
    if (got[e] == kPoison16) ++t.unwritten;
    if (g_printed < 20) {
      std::printf("  [%s] %s: D(%zu, %zu) = 0x%04X, expected 0x%04llX (f32 0x%08llX)\n", what, c.label.c_str(), e / c.n,
                  e % c.n, got[e], static_cast<unsigned long long>(w), static_cast<unsigned long long>(want32[e]));
      ++g_printed;
    }
  }
  return t;
}

void add(Tally& to, const Tally& t) {
  to.compared += t.compared;
  to.mismatches += t.mismatches;
  to.unwritten += t.unwritten;
  to.nan_payload += t.nan_payload;
}

// ---- runners -----------------------------------------------------------------------------------------

struct DeviceCase {
  Buffer a, b;
  std::unique_ptr<Buffer> sfa, sfb;
  explicit DeviceCase(const Case& c) : a(static_cast<std::size_t>(c.m) * c.k), b(static_cast<std::size_t>(c.n) * c.k) {
    a.upload(device_a(c));
    b.upload(device_b(c));
    if (!c.sa.codes.empty()) {
      std::vector<float> fa(dg::sfa_count(c.m, c.k)), fb(dg::sfb_count(c.n, c.k));
      for (int i = 0; i < c.m; ++i)
        for (int kb = 0; kb < c.k / 128; ++kb)
          fa[dg::sfa_index(c.m, i, kb)] = std::bit_cast<float>(static_cast<std::uint32_t>(c.sa.at(i, kb)));
      for (int kb = 0; kb < c.k / 128; ++kb)
        for (int nb = 0; nb < c.n / 128; ++nb)
          fb[dg::sfb_index(c.k, kb, nb)] = std::bit_cast<float>(static_cast<std::uint32_t>(c.sb.at(kb, nb)));
      sfa = std::make_unique<Buffer>(fa.size() * sizeof(float));
      sfb = std::make_unique<Buffer>(fb.size() * sizeof(float));
      sfa->upload(fa);
      sfb->upload(fb);
    }
  }
};

// A launch configuration of lowbit::device::gemm (Fp8Gemm::cluster_m, Fp8Gemm::swizzle).
struct Config {
  int cluster_m = 1;
  int swizzle = 1;
  std::string suffix() const {
    std::string s;
    if (cluster_m != 1) s += ".cluster" + std::to_string(cluster_m) + "x1";
    if (swizzle != 1) s += ".swizzle" + std::to_string(swizzle);
    return s;
  }
};

template <class T>
std::vector<T> run_cutlass(const Case& c, const DeviceCase& dc, dg::Mode mode, dg::Out out, float alpha,
                           Config cfg = {}) {
  const std::size_t count = static_cast<std::size_t>(c.m) * c.n;
  Buffer d(count * sizeof(T));
  d.fill(0xFF);
  dg::Fp8Gemm g;
  g.mode = mode;
  g.m = c.m;
  g.n = c.n;
  g.k = c.k;
  g.a = dc.a.get();
  g.b = dc.b.get();
  g.b_type = c.b.format->exponent_bits == 5 ? dg::Fp8::e5m2 : dg::Fp8::e4m3;
  g.d = d.get();
  g.d_type = out;
  g.alpha = alpha;
  g.cluster_m = cfg.cluster_m;
  g.swizzle = cfg.swizzle;
  if (mode == dg::Mode::blockwise) {
    g.sfa = dc.sfa->as<const float>();
    g.sfb = dc.sfb->as<const float>();
  }
  dg::run(g);
  sync();
  return d.download<T>(count);
}

// ---- CUTLASS against the models ----------------------------------------------------------------------

bool hopper_only() { return testing::gpu().info.major == 9; }

TEST(CutlassFp8Gemm, EqualsTheModelsBitForBit) {
  LOWBIT_REQUIRE_GPU(90);
  if (!hopper_only())
    GTEST_SKIP() << "the wgmma kernels are built for sm_90a only; this GPU is " << testing::gpu().info.name;
  std::map<std::string, Tally> tallies;
  int ncases = 0;
  for (Case& c : cases()) {
    ++ncases;
    DeviceCase dc(c);
    const bool bf16_ok = c.b.format->exponent_bits == 4;
    // Fast accumulation.
    add(tallies["cutlass.fast_accum"],
        compare32("fast_accum", c, run_cutlass<std::uint32_t>(c, dc, dg::Mode::fast_accum, dg::Out::f32, 1.0f),
                  fast_model(c)));
    // Promotion every 128.
    add(tallies["cutlass.promoted"],
        compare32("promoted", c, run_cutlass<std::uint32_t>(c, dc, dg::Mode::promoted, dg::Out::f32, 1.0f),
                  promoted_model(c)));
    if (bf16_ok) {
      add(tallies["cutlass.fast_accum.bf16"],
          compare16("fast_accum bf16", c, run_cutlass<std::uint16_t>(c, dc, dg::Mode::fast_accum, dg::Out::bf16, 1.0f),
                    fast_model(c)));
      add(tallies["cutlass.promoted.bf16"],
          compare16("promoted bf16", c, run_cutlass<std::uint16_t>(c, dc, dg::Mode::promoted, dg::Out::bf16, 1.0f),
                    promoted_model(c)));
    }
    const Config swz{1, dg::kMaxSwizzle}, c2{2, dg::kMaxSwizzle};  // the other launch configurations
    // Promotion every 128 on the blockwise mainloop with unit scales: the promoted model again.
    if (bf16_ok && c.k % dg::kScaleBlock == 0) {
      const dg::Mode pb = dg::Mode::promoted_blockwise;
      add(tallies["cutlass.promoted_blockwise"],
          compare32("promoted_blockwise", c, run_cutlass<std::uint32_t>(c, dc, pb, dg::Out::f32, 1.0f), promoted_model(c)));
      add(tallies["cutlass.promoted_blockwise.bf16"],
          compare16("promoted_blockwise bf16", c, run_cutlass<std::uint16_t>(c, dc, pb, dg::Out::bf16, 1.0f),
                    promoted_model(c)));
      add(tallies["cutlass.promoted_blockwise.bf16" + swz.suffix()],
          compare16("promoted_blockwise bf16 swizzle", c,
                    run_cutlass<std::uint16_t>(c, dc, pb, dg::Out::bf16, 1.0f, swz), promoted_model(c)));
      if (c.m % 256 == 0)
        add(tallies["cutlass.promoted_blockwise.bf16" + c2.suffix()],
            compare16("promoted_blockwise bf16 cluster 2x1", c,
                      run_cutlass<std::uint16_t>(c, dc, pb, dg::Out::bf16, 1.0f, c2), promoted_model(c)));
    }
    // The other launch configurations the benchmark measures (e4m3 x e4m3 -> bf16): the same bits.
    if (bf16_ok) {
      add(tallies["cutlass.fast_accum.bf16" + swz.suffix()],
          compare16("fast_accum bf16 swizzle", c,
                    run_cutlass<std::uint16_t>(c, dc, dg::Mode::fast_accum, dg::Out::bf16, 1.0f, swz), fast_model(c)));
      add(tallies["cutlass.promoted.bf16" + swz.suffix()],
          compare16("promoted bf16 swizzle", c,
                    run_cutlass<std::uint16_t>(c, dc, dg::Mode::promoted, dg::Out::bf16, 1.0f, swz),
                    promoted_model(c)));
      if (c.m % 256 == 0)
        add(tallies["cutlass.promoted.bf16" + c2.suffix()],
            compare16("promoted bf16 cluster 2x1", c,
                      run_cutlass<std::uint16_t>(c, dc, dg::Mode::promoted, dg::Out::bf16, 1.0f, c2),
                      promoted_model(c)));
      if (!c.sa.codes.empty()) {
        add(tallies["cutlass.blockwise.bf16" + swz.suffix()],
            compare16("blockwise bf16 swizzle", c,
                      run_cutlass<std::uint16_t>(c, dc, dg::Mode::blockwise, dg::Out::bf16, 1.0f, swz),
                      blockwise_model(c)));
        if (c.m % 256 == 0)
          add(tallies["cutlass.blockwise.bf16" + c2.suffix()],
              compare16("blockwise bf16 cluster 2x1", c,
                        run_cutlass<std::uint16_t>(c, dc, dg::Mode::blockwise, dg::Out::bf16, 1.0f, c2),
                        blockwise_model(c)));
      }
    }
    // Block scaling.
    if (!c.sa.codes.empty()) {
      add(tallies["cutlass.blockwise"],
          compare32("blockwise", c, run_cutlass<std::uint32_t>(c, dc, dg::Mode::blockwise, dg::Out::f32, 1.0f),
                    blockwise_model(c)));
      add(tallies["cutlass.blockwise.bf16"],
          compare16("blockwise bf16", c, run_cutlass<std::uint16_t>(c, dc, dg::Mode::blockwise, dg::Out::bf16, 1.0f),
                    blockwise_model(c)));
    }
  }
  RecordProperty("cases", std::to_string(ncases));
  std::uint64_t total = 0, bad = 0;
  for (const auto& [key, t] : tallies) {
    RecordProperty(key + ".compared", std::to_string(t.compared));
    RecordProperty(key + ".mismatches", std::to_string(t.mismatches));
    RecordProperty(key + ".unwritten", std::to_string(t.unwritten));
    if (t.nan_payload) RecordProperty(key + ".nan_payload_differences", std::to_string(t.nan_payload));
    const double rate = t.compared ? 1.0 - static_cast<double>(t.mismatches) / t.compared : 0.0;
    RecordProperty(key + ".match_rate", std::to_string(rate));
    std::printf("[gemm] %-44s %10llu compared %8llu mismatches %6llu unwritten  match rate %.6f\n", key.c_str(),
                static_cast<unsigned long long>(t.compared), static_cast<unsigned long long>(t.mismatches),
                static_cast<unsigned long long>(t.unwritten), rate);
    total += t.compared;
    bad += t.mismatches;
  }
  RecordProperty("compared", std::to_string(total));
  RecordProperty("mismatches", std::to_string(bad));
  for (const auto& [key, t] : tallies) EXPECT_EQ(t.mismatches, 0u) << key << " differs from its model";
}

TEST(CutlassFp8Gemm, EpilogueAgainstApplyEpilogue) {
  LOWBIT_REQUIRE_GPU(90);
  if (!hopper_only())
    GTEST_SKIP() << "the wgmma kernels are built for sm_90a only; this GPU is " << testing::gpu().info.name;
  // Per-tensor scaling: alpha = fp32(scale_a * scale_b), D = fp32(alpha * acc).  apply_epilogue() is the
  // model's unconfirmed order; whether CUTLASS's epilogue matches it is recorded, not asserted.
  const float scale_a = 0.3f, scale_b = 1.7f;
  const float alpha = scale_a * scale_b;
  Tally fast, promoted;
  for (Case& c : cases()) {
    if (c.k > 1024) continue;
    DeviceCase dc(c);
    add(fast,
        compare32("fast_accum alpha", c, run_cutlass<std::uint32_t>(c, dc, dg::Mode::fast_accum, dg::Out::f32, alpha),
                  lowbit::gemm::apply_epilogue(fast_model(c), nullptr, bits(1.0f), 0, bits(scale_a), bits(scale_b))));
    add(promoted,
        compare32(
            "promoted alpha", c, run_cutlass<std::uint32_t>(c, dc, dg::Mode::promoted, dg::Out::f32, alpha),
            lowbit::gemm::apply_epilogue(promoted_model(c), nullptr, bits(1.0f), 0, bits(scale_a), bits(scale_b))));
  }
  RecordProperty("epilogue.fast_accum.compared", std::to_string(fast.compared));
  RecordProperty("epilogue.fast_accum.mismatches", std::to_string(fast.mismatches));
  RecordProperty("epilogue.promoted.compared", std::to_string(promoted.compared));
  RecordProperty("epilogue.promoted.mismatches", std::to_string(promoted.mismatches));
  const bool matches = fast.mismatches == 0 && promoted.mismatches == 0;
  RecordProperty("epilogue.matches_apply_epilogue", matches ? "yes" : "no");
  std::printf(
      "[gemm] epilogue alpha = %.9g: fast_accum %llu / %llu mismatches, promoted %llu / %llu: %s apply_epilogue()\n",
      alpha, static_cast<unsigned long long>(fast.mismatches), static_cast<unsigned long long>(fast.compared),
      static_cast<unsigned long long>(promoted.mismatches), static_cast<unsigned long long>(promoted.compared),
      matches ? "matches" : "differs from");
  EXPECT_EQ(fast.unwritten + promoted.unwritten, 0u);
}

// ---- cuBLASLt against the candidate models -----------------------------------------------------------

std::vector<std::uint32_t> run_cublaslt(lt::Handle& h, const Case& c, const DeviceCase& dc, bool fast_accum,
                                        Buffer& workspace, std::size_t ws_bytes) {
  const std::size_t count = static_cast<std::size_t>(c.m) * c.n;
  Buffer d(count * sizeof(float));
  d.fill(0xFF);
  lt::Fp8Gemm g;
  g.m = c.m;
  g.n = c.n;
  g.k = c.k;
  g.a = dc.a.get();
  g.b = dc.b.get();
  g.b_type = c.b.format->exponent_bits == 5 ? lt::Type::e5m2 : lt::Type::e4m3;
  g.d = d.get();
  g.d_type = lt::Type::f32;
  g.fast_accum = fast_accum;
  g.workspace = workspace.get();
  g.workspace_bytes = ws_bytes;
  h.run(g);
  sync();
  return d.download<std::uint32_t>(count);
}

constexpr std::size_t kWorkspace = 32u << 20;

TEST(CublasLtFp8Gemm, WhichModelMatches) {
  LOWBIT_REQUIRE_GPU(89);
  lt::Handle handle;
  Buffer workspace(kWorkspace);
  for (bool fast : {true, false}) {
    const std::string prefix = fast ? "cublaslt.fast_accum." : "cublaslt.no_fast_accum.";
    std::map<std::string, Tally> per;
    std::uint64_t unwritten = 0;
    int ncases = 0;
    for (Case& c : cases()) {
      ++ncases;
      DeviceCase dc(c);
      const auto got = run_cublaslt(handle, c, dc, fast, workspace, kWorkspace);
      for (std::uint32_t v : got) unwritten += v == kPoison32;
      // The candidates: the fast-accumulation model, promotion every 128 (and other intervals where K
      // is small enough for the extra model runs to be cheap), and the exact product rounded once.
      std::map<std::string, const Codes*> cand;
      cand["hopper-fp8"] = &fast_model(c);
      cand["promoted-128"] = &promoted_model(c);
      if (c.k <= 1024) {
        for (int interval : {32, 64, 256, 512}) {
          if (interval >= c.k) continue;
          const std::string key = "promoted-" + std::to_string(interval);
          auto it = c.candidates.find(key);
          if (it == c.candidates.end())
            it = c.candidates.emplace(key, lowbit::gemm::run_promoted(hopper_fp8(), interval, c.a, c.b, nullptr)).first;
          cand[key] = &it->second;
        }
        auto it = c.candidates.find("exact");
        if (it == c.candidates.end()) it = c.candidates.emplace("exact", lowbit::gemm::exact(c.a, c.b, nullptr)).first;
        cand["exact"] = &it->second;
      }
      for (const auto& [name, want] : cand) {
        Tally& t = per[name];
        for (std::size_t e = 0; e < got.size(); ++e) {
          ++t.compared;
          if (got[e] != static_cast<std::uint32_t>((*want)[e])) ++t.mismatches;
        }
      }
    }
    std::string matches;
    for (const auto& [name, t] : per) {
      RecordProperty(prefix + "compared." + name, std::to_string(t.compared));
      RecordProperty(prefix + "mismatches." + name, std::to_string(t.mismatches));
      std::printf("[gemm] cuBLASLt fast_accum %-3s vs %-13s %10llu compared %10llu mismatches\n", fast ? "on" : "off",
                  name.c_str(), static_cast<unsigned long long>(t.compared),
                  static_cast<unsigned long long>(t.mismatches));
      if (t.compared && t.mismatches == 0) matches += (matches.empty() ? "" : ",") + name;
    }
    if (matches.empty()) matches = "none";
    RecordProperty(prefix + "matches", matches);
    RecordProperty(prefix + "cases", std::to_string(ncases));
    RecordProperty(prefix + "unwritten", std::to_string(unwritten));
    RecordProperty(prefix + "algo_id", std::to_string(handle.last_algo_id()));
    std::printf("[gemm] cuBLASLt fast_accum %s matches: %s\n", fast ? "on" : "off", matches.c_str());
    EXPECT_EQ(unwritten, 0u) << "cuBLASLt left output elements unwritten";
  }
}

TEST(CublasLtFp8Gemm, AmaxAndE4m3Output) {
  LOWBIT_REQUIRE_GPU(89);
  // cuBLASLt's own f32 D (with scale_a, scale_b) quantized by the reference, against its e4m3 D (with
  // scale_d), and amax_d against max |D|.  Recorded, not asserted: cuBLASLt may pick different kernels
  // for the two outputs.
  Case c = make_case(256, 256, 1024, Regime::normal, formats::e4m3, 0xA11A, false);
  DeviceCase dc(c);
  lt::Handle handle;
  Buffer workspace(kWorkspace);
  const float sa = 1.5f, sb = 0.75f, sd = 0.0625f;
  // One scale per 16 bytes (a_scale, b_scale, d_scale, c_scale = 1), as separately allocated scalars would be.
  Buffer scales(16 * sizeof(float));
  std::vector<float> host_scales(16, 0.0f);
  host_scales[0] = sa;
  host_scales[4] = sb;
  host_scales[8] = sd;
  host_scales[12] = 1.0f;
  scales.upload(host_scales);
  Buffer amax(sizeof(float));
  const std::size_t count = static_cast<std::size_t>(c.m) * c.n;
  Buffer d32(count * 4), d8(count), cbf16(count * 2);
  cbf16.fill(0);
  for (bool fast : {true, false}) {
    const std::string prefix = fast ? "cublaslt.fast_accum." : "cublaslt.no_fast_accum.";
    lt::Fp8Gemm g;
    g.m = c.m;
    g.n = c.n;
    g.k = c.k;
    g.a = dc.a.get();
    g.b = dc.b.get();
    g.scale_a = scales.as<const float>();
    g.scale_b = scales.as<const float>() + 4;
    g.fast_accum = fast;
    g.workspace = workspace.get();
    g.workspace_bytes = kWorkspace;
    d32.fill(0xFF);
    g.d = d32.get();
    g.d_type = lt::Type::f32;
    handle.run(g);
    sync();
    const auto f32 = d32.download<std::uint32_t>(count);
    d8.fill(0xFF);
    amax.fill(0xFF);
    g.d = d8.get();
    g.d_type = lt::Type::e4m3;
    g.c = cbf16.get();
    g.scale_d = scales.as<const float>() + 8;
    g.scale_c = scales.as<const float>() + 12;
    g.amax_d = amax.as<float>();
    // cuBLASLt may have no kernel for an e4m3 D with these attributes: record the status, do not fail.
    const cublasStatus_t status = handle.try_run(g);
    RecordProperty(prefix + "e4m3_d.status", cublasLtGetStatusName(status));
    if (status != CUBLAS_STATUS_SUCCESS) {
      std::printf("[gemm] cuBLASLt fast_accum %-3s e4m3 D (bf16 C, scale_c, scale_d, amax_d): %s\n", fast ? "on" : "off",
                  cublasLtGetStatusName(status));
      EXPECT_EQ(status, CUBLAS_STATUS_NOT_SUPPORTED) << cublasLtGetStatusName(status);
      continue;
    }
    RecordProperty(prefix + "e4m3_d.algo_id", std::to_string(handle.last_algo_id()));
    sync();
    const auto q = d8.download<std::uint8_t>(count);
    const float got_amax = amax.download<float>(1)[0];

    Codes f32c(f32.begin(), f32.end());
    const Codes want = lowbit::gemm::quantize_output(f32c, bits(sd), formats::e4m3);
    std::uint64_t mism = 0, unwritten = 0;
    float max_abs = 0.0f;
    for (std::size_t e = 0; e < count; ++e) {
      mism += q[e] != want[e];
      unwritten += q[e] == kPoison8;
      max_abs = std::max(max_abs, std::fabs(std::bit_cast<float>(f32[e])));
    }
    // The f32 D against the model's epilogue of each accumulation candidate.
    const Codes ep_fast = lowbit::gemm::apply_epilogue(fast_model(c), nullptr, bits(1.0f), 0, bits(sa), bits(sb));
    const Codes ep_prom = lowbit::gemm::apply_epilogue(promoted_model(c), nullptr, bits(1.0f), 0, bits(sa), bits(sb));
    std::uint64_t mf = 0, mp = 0;
    for (std::size_t e = 0; e < count; ++e) {
      mf += f32[e] != static_cast<std::uint32_t>(ep_fast[e]);
      mp += f32[e] != static_cast<std::uint32_t>(ep_prom[e]);
    }
    RecordProperty(prefix + "e4m3_d.compared", std::to_string(count));
    RecordProperty(prefix + "e4m3_d.mismatches", std::to_string(mism));
    RecordProperty(prefix + "e4m3_d.unwritten", std::to_string(unwritten));
    RecordProperty(prefix + "amax_d", std::to_string(got_amax));
    RecordProperty(prefix + "amax_d.expected_max_abs_d", std::to_string(max_abs));
    const char* amax_is = got_amax == max_abs        ? "max|D| before scale_d"
                          : got_amax == max_abs * sd ? "max|D| after scale_d"
                                                     : "neither";
    RecordProperty(prefix + "amax_d.matches", amax_is);
    RecordProperty(prefix + "scaled_f32.mismatches.hopper-fp8+apply_epilogue", std::to_string(mf));
    RecordProperty(prefix + "scaled_f32.mismatches.promoted-128+apply_epilogue", std::to_string(mp));
    std::printf(
        "[gemm] cuBLASLt fast_accum %-3s e4m3 D vs quantize_output: %llu / %zu mismatches; amax %.9g, max|D| "
        "%.9g (%s); scaled f32 D vs epilogue(hopper-fp8) %llu, vs epilogue(promoted-128) %llu mismatches\n",
        fast ? "on" : "off", static_cast<unsigned long long>(mism), count, got_amax, max_abs, amax_is,
        static_cast<unsigned long long>(mf), static_cast<unsigned long long>(mp));
    EXPECT_EQ(unwritten, 0u);
  }
}

// ---- 4096^3 smoke ------------------------------------------------------------------------------------

TEST(CutlassFp8Gemm, Smoke4096AgainstCublasLt) {
  LOWBIT_REQUIRE_GPU(90);
  if (!hopper_only())
    GTEST_SKIP() << "the wgmma kernels are built for sm_90a only; this GPU is " << testing::gpu().info.name;
  const int n = 4096;
  const std::size_t count = static_cast<std::size_t>(n) * n;
  // Quantized N(0,1) codes, drawn from a table (fast).
  std::mt19937_64 rng(0x5EED4096);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::uint8_t> table(4096);
  for (auto& t : table) t = static_cast<std::uint8_t>(quantize(normal(rng), formats::e4m3));
  std::vector<std::uint8_t> a(count), b(count);
  for (auto& x : a) x = table[rng() & 4095];
  for (auto& x : b) x = table[rng() & 4095];
  Buffer da(count), db(count), d(count * 4), workspace(kWorkspace);
  da.upload(a);
  db.upload(b);
  auto cutlass = [&](dg::Mode mode) {
    d.fill(0xFF);
    dg::Fp8Gemm g;
    g.mode = mode;
    g.m = g.n = g.k = n;
    g.a = da.get();
    g.b = db.get();
    g.d = d.get();
    dg::run(g);
    sync();
    return d.download<float>(count);
  };
  lt::Handle handle;
  auto cublas = [&](bool fast) {
    d.fill(0xFF);
    lt::Fp8Gemm g;
    g.m = g.n = g.k = n;
    g.a = da.get();
    g.b = db.get();
    g.d = d.get();
    g.fast_accum = fast;
    g.workspace = workspace.get();
    g.workspace_bytes = kWorkspace;
    handle.run(g);
    sync();
    return d.download<float>(count);
  };
  auto rel = [](const std::vector<float>& x, const std::vector<float>& ref, std::uint64_t& nonfinite) {
    double num = 0, den = 0;
    for (std::size_t e = 0; e < x.size(); ++e) {
      if (!std::isfinite(x[e]) || !std::isfinite(ref[e])) {
        ++nonfinite;
        continue;
      }
      const double diff = static_cast<double>(x[e]) - ref[e];
      num += diff * diff;
      den += static_cast<double>(ref[e]) * ref[e];
    }
    return den > 0 ? std::sqrt(num / den) : 0.0;
  };
  const auto cf = cutlass(dg::Mode::fast_accum);
  const auto cp = cutlass(dg::Mode::promoted);
  const auto lf = cublas(true);
  const auto lp = cublas(false);
  std::uint64_t nonfinite = 0;
  const double e_fast = rel(cf, lf, nonfinite);
  const double e_prom = rel(cp, lp, nonfinite);
  const double e_fp = rel(cf, cp, nonfinite);
  RecordProperty("smoke4096.relerr.fast_vs_cublaslt_fast", std::to_string(e_fast));
  RecordProperty("smoke4096.relerr.promoted_vs_cublaslt", std::to_string(e_prom));
  RecordProperty("smoke4096.relerr.fast_vs_promoted", std::to_string(e_fp));
  RecordProperty("smoke4096.nonfinite", std::to_string(nonfinite));
  std::printf(
      "[gemm] 4096^3 normwise relative difference: CUTLASS fast vs cuBLASLt fast %.3g, CUTLASS promoted vs "
      "cuBLASLt %.3g, CUTLASS fast vs promoted %.3g (non-finite %llu)\n",
      e_fast, e_prom, e_fp, static_cast<unsigned long long>(nonfinite));
  // Inputs are finite and |D| stays far below the f32 range: a non-finite element is an unwritten one.
  EXPECT_EQ(nonfinite, 0u);
  // A layout or scheduling error gives differences of order 1; accumulation orders give < 1e-3 here.
  EXPECT_LT(e_fast, 1e-2);
  EXPECT_LT(e_prom, 1e-2);
}

}  // namespace
}  // namespace lowbit::device
