// Device quantizers against the host reference, bit for bit (codes, scales, packed scales, tensor scale).
//
// For every scheme x element x rule combination the device implements, on adversarial tensors (zeros, a zero
// block, NaN, +-Inf, f32 subnormals, exact ties of the element grid after scaling, amax exactly at powers of
// two, one huge outlier, shapes that are not multiples of the block) and seeded random tensors (normal-ish and
// log-uniform magnitudes), the kernel's output is compared with lowbit::scale::quantize() on the same input.
// Pass: zero mismatches.  The hardware element path (cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32) is a subject under
// test, compared with the reference run under the cuda profile's element policy (the policy it stands for:
// NaN becomes the canonical 0x7F, as device/tests/cvt_test.cpp proves the instruction does on every f32
// input): zero mismatches on every input, NaN included.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "lowbit/device/check.hpp"
#include "lowbit/device/quantize.hpp"
#include "lowbit/format.hpp"
#include "lowbit/scale.hpp"
#include "support.hpp"

namespace {

using lowbit::Format;
using lowbit::Policy;
using lowbit::Rounding;
using lowbit::Overflow;
namespace formats = lowbit::formats;
namespace scale = lowbit::scale;
namespace quant = lowbit::device::quant;

std::uint32_t bits(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
float from_bits(std::uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// splitmix64: a seeded generator without libm.
struct Rng {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  std::uint32_t u32() { return static_cast<std::uint32_t>(next() >> 32); }
  float uniform() { return static_cast<float>(next() >> 40) * 0x1p-24f; }  // [0, 1)
  // Irwin-Hall sum of four uniforms, centred: normal-ish with sd ~0.58.
  float normalish() { return uniform() + uniform() + uniform() + uniform() - 2.0f; }
  // Magnitude 2^[lo, hi) with a random significand and sign, built from bits.
  float log_uniform(int lo, int hi) {
    const int e = lo + static_cast<int>(next() % static_cast<std::uint64_t>(hi - lo));
    const std::uint32_t mant = u32() & 0x7FFFFFu;
    const std::uint32_t sign = (u32() & 1u) << 31;
    return from_bits(sign | (static_cast<std::uint32_t>(e + 127) << 23) | mant);
  }
};

struct Case {
  std::string name;
  scale::Tensor x;
};

scale::Tensor make(int r, int c) { return scale::Tensor{r, c, std::vector<float>(static_cast<std::size_t>(r) * c, 0.0f)}; }

// The value of an element code (finite codes), for building ties.
double code_value(const Format& f, std::uint64_t code) {
  const std::uint64_t m = f.code_magnitude(code);
  double v = static_cast<double>(f.magnitude_significand(m));
  int e = f.magnitude_exponent(m);
  for (; e > 0; --e) v *= 2;
  for (; e < 0; ++e) v /= 2;
  return f.code_negative(code) ? -v : v;
}

// Adversarial and random tensors; `el` sets the grid the tie tensor is built on.
std::vector<Case> cases(const Format& el, bool big) {
  std::vector<Case> out;
  Rng g{0x5EED0000u + static_cast<std::uint64_t>(el.bits)};
  out.push_back({"zeros 3x17", make(3, 17)});
  {
    auto t = make(1, 1);
    t.data[0] = -3.25f;
    out.push_back({"1x1", t});
  }
  {
    auto t = make(3, 17);
    for (auto& v : t.data) v = g.normalish();
    out.push_back({"normal 3x17", t});
  }
  {  // 16-byte loads with row tails: 1000 is a multiple of 4 but not of 16, 32 or 128 (partial blocks at the row
     // ends, a token row of 8 warp-wide chunks the last of which is partial)
    auto t = make(20, 1000);
    for (auto& v : t.data) v = g.normalish();
    t.data[999] = 1.0e6f;  // the outlier in a row's partial last block
    out.push_back({"normal 20x1000", t});
  }
  {  // specials, subnormals, a zero block, an outlier; 129x130 is no multiple of any block
    auto t = make(129, 130);
    for (auto& v : t.data) v = g.normalish() * 4.0f;
    for (int c = 0; c < 64; ++c) t.data[static_cast<std::size_t>(2 * 130 + c)] = 0.0f;  // zero blocks in row 2
    for (int r = 16; r < 32; ++r)
      for (int c = 16; c < 32; ++c) t.data[static_cast<std::size_t>(r * 130 + c)] = (r + c) % 2 ? 0.0f : -0.0f;
    t.data[5] = from_bits(0x7FC00001u);              // quiet NaN with payload
    t.data[130 * 3 + 40] = from_bits(0xFFA00000u);   // negative signaling NaN
    t.data[130 * 4 + 7] = from_bits(0x7F800000u);    // +Inf
    t.data[130 * 5 + 99] = from_bits(0xFF800000u);   // -Inf
    t.data[130 * 6 + 1] = from_bits(0x00000001u);    // smallest subnormal
    t.data[130 * 6 + 2] = from_bits(0x807FFFFFu);    // largest negative subnormal
    t.data[130 * 7 + 3] = 3.0e38f;                   // huge outlier
    for (int c = 0; c < 130; ++c) t.data[static_cast<std::size_t>(8 * 130 + c)] = from_bits(0x00400000u + c);  // a subnormal row
    for (int c = 0; c < 130; ++c) t.data[static_cast<std::size_t>(9 * 130 + c)] = g.log_uniform(-140, -120);
    out.push_back({"specials 129x130", t});
  }
  {  // only finite: specials without NaN / Inf (the hardware path's assertion set)
    auto t = make(64, 96);
    for (auto& v : t.data) v = g.log_uniform(-30, 30);
    t.data[17] = 3.0e38f;
    t.data[200] = from_bits(0x00000003u);
    out.push_back({"log-uniform finite 64x96", t});
  }
  {  // ties: each row's amax is elem_max * 2^k (pow2 scales and MX scales are exact powers of two), the rest are
     // midpoints of consecutive element codes times 2^k
    auto t = make(48, 128);
    const std::uint64_t maxmag = el.max_finite_magnitude();
    for (int r = 0; r < 48; ++r) {
      const int k = (r % 13) - 6;
      const double p2 = k >= 0 ? static_cast<double>(1u << k) : 1.0 / static_cast<double>(1u << -k);
      t.data[static_cast<std::size_t>(r) * 128] = static_cast<float>(code_value(el, el.encode(false, maxmag)) * p2);
      for (int c = 1; c < 128; ++c) {
        const std::uint64_t m = 1 + g.next() % (maxmag - 1);
        const double mid = (code_value(el, el.encode(false, m)) + code_value(el, el.encode(false, m - 1))) / 2;
        t.data[static_cast<std::size_t>(r) * 128 + c] = static_cast<float>((g.u32() & 1 ? -mid : mid) * p2);
      }
    }
    out.push_back({"ties 48x128", t});
  }
  {  // amax exactly at powers of two
    auto t = make(32, 64);
    for (int r = 0; r < 32; ++r)
      for (int c = 0; c < 64; ++c)
        t.data[static_cast<std::size_t>(r) * 64 + c] = c == r ? std::ldexp(1.0f, r - 16) : g.uniform() * std::ldexp(1.0f, r - 16);
    out.push_back({"pow2 amax 32x64", t});
  }
  if (big) {
    auto t = make(256, 4096);
    for (auto& v : t.data) v = g.normalish();
    out.push_back({"normal 256x4096", t});
    auto u = make(256, 1024);
    for (auto& v : u.data) v = g.log_uniform(-60, 60);
    out.push_back({"log-uniform 256x1024", u});
  }
  return out;
}

template <class T>
struct DevBuf {
  T* p = nullptr;
  std::size_t n = 0;
  explicit DevBuf(std::size_t count, int poison = 0xA5) : n(count) {
    LOWBIT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p), std::max<std::size_t>(1, n) * sizeof(T)));
    LOWBIT_CUDA_CHECK(cudaMemset(p, poison, std::max<std::size_t>(1, n) * sizeof(T)));
  }
  ~DevBuf() { cudaFree(p); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  std::vector<T> get() const {
    std::vector<T> h(n);
    if (n) LOWBIT_CUDA_CHECK(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
  void put(const std::vector<T>& h) { LOWBIT_CUDA_CHECK(cudaMemcpy(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice)); }
};

struct Tally {
  std::size_t cases = 0, elements = 0, mismatches = 0;
  int printed = 0;
};

std::string describe(const scale::Options& o) {
  std::string s = lowbit::name(o.scheme);
  s += " ";
  s += o.element ? o.element->name : "default";
  s += " block " + std::to_string(o.block) + "x" + std::to_string(o.block_rows);
  s += " sf " + std::to_string(static_cast<int>(o.scale_format)) + " mx " + std::to_string(static_cast<int>(o.mx_rule)) +
       " nf " + std::to_string(static_cast<int>(o.nonfinite)) + (o.amax_propagates_nan ? " amax-nan" : "") +
       " var " + std::to_string(static_cast<int>(o.variant)) + " zs " + std::to_string(static_cast<int>(o.zero_scale)) +
       " rnd " + std::to_string(static_cast<int>(o.element_policy.rounding));
  return s;
}

// One tensor under one configuration: device against reference.
void check(const Case& c, const scale::Options& o, quant::ElementPath path, Tally& t) {
  const int R = c.x.rows, C = c.x.cols;
  const bool stochastic = lowbit::is_stochastic(o.element_policy.rounding);
  std::vector<std::uint32_t> rb;
  if (stochastic) {
    Rng g{0xABCDEFu + static_cast<std::uint64_t>(R) * 131 + static_cast<std::uint64_t>(C)};
    rb.resize(c.x.data.size());
    for (auto& v : rb) v = g.u32();
  }
  const float delayed_scale = 3.5f;
  scale::DelayedState st;
  st.scale = delayed_scale;
  const scale::Quantized q = scale::quantize(c.x, o, stochastic ? &rb : nullptr, &st);
  const quant::Plan plan = quant::make_plan(R, C, o, path, delayed_scale);

  DevBuf<float> x(c.x.data.size());
  x.put(c.x.data);
  DevBuf<std::uint32_t> r(rb.size());
  if (stochastic) r.put(rb);
  DevBuf<std::uint8_t> codes(c.x.data.size());
  DevBuf<std::uint32_t> scales(plan.blocks());
  DevBuf<std::uint32_t> packed(plan.packed_words());
  DevBuf<std::uint32_t> ts(1), tamax(1);
  DevBuf<unsigned char> work(quant::workspace_bytes(plan));
  quant::Outputs out;
  out.codes = codes.p;
  out.scales = scales.p;
  out.packed_scales = plan.packed_words() ? packed.p : nullptr;
  out.tensor_scale = ts.p;
  out.tensor_amax = tamax.p;
  quant::quantize(plan, x.p, stochastic ? r.p : nullptr, out, work.p);
  LOWBIT_CUDA_CHECK(cudaDeviceSynchronize());

  const auto dc = codes.get();
  const auto ds = scales.get();
  ++t.cases;
  t.elements += dc.size();
  auto report = [&](const char* what, std::size_t i, std::uint32_t in, std::uint64_t want, std::uint64_t got) {
    if (t.printed++ < 20)
      std::printf("MISMATCH %s | %s | %s[%zu] (row %zu col %zu) input 0x%08X expected 0x%llX actual 0x%llX\n",
                  c.name.c_str(), describe(o).c_str(), what, i, C ? i / C : 0, C ? i % C : 0, in,
                  static_cast<unsigned long long>(want), static_cast<unsigned long long>(got));
  };
  ASSERT_EQ(q.codes.size(), dc.size());
  for (std::size_t i = 0; i < dc.size(); ++i)
    if (q.codes[i] != dc[i]) {
      ++t.mismatches;
      report("code", i, bits(c.x.data[i]), q.codes[i], dc[i]);
    }
  ASSERT_EQ(q.scales.size(), ds.size()) << describe(o);
  for (std::size_t i = 0; i < ds.size(); ++i)
    if (q.scales[i] != ds[i]) {
      ++t.mismatches;
      report("scale", i, 0, q.scales[i], ds[i]);
    }
  if (plan.packed_words()) {
    const auto dp = packed.get();
    ASSERT_EQ(q.packed_scales.size(), dp.size());
    for (std::size_t i = 0; i < dp.size(); ++i)
      if (q.packed_scales[i] != dp[i]) {
        ++t.mismatches;
        report("packed", i, 0, q.packed_scales[i], dp[i]);
      }
  }
  if (q.tensor_scale) {
    const std::uint32_t got = ts.get()[0];
    if (*q.tensor_scale != got) {
      ++t.mismatches;
      report("tensor_scale", 0, 0, *q.tensor_scale, got);
    }
  }
  if (o.scheme == scale::Scheme::delayed) {
    // The reference records fmaxf(0, tensor amax) in the history's last slot after the roll.
    const float want = st.history.back();
    const float got = std::fmax(0.0f, from_bits(tamax.get()[0]));
    if (bits(want) != bits(got)) {
      ++t.mismatches;
      report("delayed amax", 0, 0, bits(want), bits(got));
    }
  }
}

void finish(const Tally& t) {
  ::testing::Test::RecordProperty("cases", static_cast<int>(t.cases));
  ::testing::Test::RecordProperty("elements", static_cast<int>(t.elements));
  ::testing::Test::RecordProperty("mismatches", static_cast<int>(t.mismatches));
  std::printf("%zu cases, %zu elements, %zu mismatches\n", t.cases, t.elements, t.mismatches);
  EXPECT_EQ(t.mismatches, 0u);
}

scale::Options opts(scale::Scheme s, const Format* el = nullptr) {
  scale::Options o;
  o.scheme = s;
  o.element = el;
  return o;
}

constexpr const Format* k_mx_elements[] = {&formats::e4m3, &formats::e5m2, &formats::e2m3, &formats::e3m2,
                                           &formats::e2m1};

TEST(DeviceQuantize, PerTensorDelayedChannelToken) {
  LOWBIT_REQUIRE_GPU(89);
  Tally t;
  for (const Format* el : {&formats::e4m3, &formats::e5m2, &formats::e3m2, &formats::int8}) {
    for (const Case& c : cases(*el, el == &formats::e4m3)) {
      for (scale::Scheme s : {scale::Scheme::tensor, scale::Scheme::delayed, scale::Scheme::channel, scale::Scheme::token}) {
        for (int variant = 0; variant < 3; ++variant) {
          scale::Options o = opts(s, el);
          if (variant == 1) o.amax_propagates_nan = true;
          if (variant == 2) {
            if (s == scale::Scheme::delayed) continue;
            o.scale_format = scale::ScaleFormat::pow2;
            o.eps = 1e-12f;
          }
          check(c, o, quant::ElementPath::software, t);
        }
      }
    }
  }
  finish(t);
}

TEST(DeviceQuantize, Blocks1x128And128x128) {
  LOWBIT_REQUIRE_GPU(89);
  Tally t;
  for (const Format* el : {&formats::e4m3, &formats::e5m2}) {
    auto cs = cases(*el, el == &formats::e4m3);
    {  // a tensor larger than one 128x128 block in both directions
      Rng g{77};
      auto x = make(300, 520);
      for (auto& v : x.data) v = g.log_uniform(-20, 20);
      cs.push_back({"log-uniform 300x520", x});
    }
    for (const Case& c : cs)
      for (int rows : {0, 128})
        for (auto sf : {scale::ScaleFormat::f32, scale::ScaleFormat::pow2, scale::ScaleFormat::ue8m0_packed})
          for (bool prop : {false, true}) {
            scale::Options o = opts(scale::Scheme::block, el);
            o.block = 128;
            o.block_rows = rows;
            o.scale_format = sf;
            o.amax_propagates_nan = prop;
            check(c, o, quant::ElementPath::software, t);
          }
  }
  finish(t);
}

TEST(DeviceQuantize, MxEveryElementAndRule) {
  LOWBIT_REQUIRE_GPU(89);
  Tally t;
  for (const Format* el : k_mx_elements) {
    for (const Case& c : cases(*el, el == &formats::e4m3 || el == &formats::e2m1))
      for (auto rule : {scale::MxRule::floor, scale::MxRule::ceil, scale::MxRule::even, scale::MxRule::rceil,
                        scale::MxRule::rne})
        for (auto nf : {scale::NonFinite::scale_nan, scale::NonFinite::propagate, scale::NonFinite::amax}) {
          scale::Options o = opts(scale::Scheme::mx, el);
          o.mx_rule = rule;
          o.nonfinite = nf;
          check(c, o, quant::ElementPath::software, t);
          if (nf == scale::NonFinite::amax && rule == scale::MxRule::rceil) {
            o.amax_propagates_nan = true;
            check(c, o, quant::ElementPath::software, t);
          }
        }
  }
  finish(t);
}

TEST(DeviceQuantize, Nvfp4OneAndTwoDimensional) {
  LOWBIT_REQUIRE_GPU(89);
  Tally t;
  for (const Case& c : cases(formats::e2m1, true))
    for (auto s : {scale::Scheme::nvfp4, scale::Scheme::nvfp4_2d})
      for (int v = 0; v < 6; ++v) {
        scale::Options o = opts(s);
        if (v == 1) o.variant = scale::Variant::fast_math;
        if (v == 2) o.zero_scale = scale::ZeroScale::reference;
        if (v == 3) o.amax_propagates_nan = true;
        if (v >= 4) {  // stochastic rounding from supplied random bits
          o.element_policy.rounding = v == 4 ? Rounding::sr_a : Rounding::sr_c;
          o.element_policy.sr_bits = 32;
        }
        check(c, o, quant::ElementPath::software, t);
      }
  finish(t);
}

TEST(DeviceQuantize, StochasticFp8Elements) {
  LOWBIT_REQUIRE_GPU(89);
  Tally t;
  for (const Case& c : cases(formats::e4m3, false))
    for (auto s : {scale::Scheme::tensor, scale::Scheme::block, scale::Scheme::mx}) {
      scale::Options o = opts(s, &formats::e4m3);
      o.element_policy.rounding = Rounding::sr_b;
      o.element_policy.sr_bits = 32;
      check(c, o, quant::ElementPath::software, t);
    }
  finish(t);
}

// The hardware conversion as a subject under test, against the reference under the cuda profile's policy.
TEST(DeviceQuantize, HardwareCvtPath) {
  LOWBIT_REQUIRE_GPU(89);
  Tally t;
  for (const Format* el : {&formats::e4m3, &formats::e5m2})
    for (const Case& c : cases(*el, el == &formats::e4m3))
      for (auto s : {scale::Scheme::tensor, scale::Scheme::token, scale::Scheme::block, scale::Scheme::mx}) {
        scale::Options o = opts(s, el);
        o.element_policy = quant::cuda_profile_policy(*el);
        check(c, o, quant::ElementPath::hardware, t);
        if (s == scale::Scheme::mx) {
          o.mx_rule = scale::MxRule::rceil;
          check(c, o, quant::ElementPath::hardware, t);
        }
        if (s == scale::Scheme::block) {  // 128x128 blocks, amax propagating NaN
          o.block_rows = 128;
          o.amax_propagates_nan = true;
          check(c, o, quant::ElementPath::hardware, t);
        }
      }
  finish(t);
}

// The software path with the policies compiled as constants and at run time: the cuda profile's policy
// (constant), and the same policy with one field changed so that it runs with the policy read at run time.
TEST(DeviceQuantize, ConstantAndRuntimePolicies) {
  LOWBIT_REQUIRE_GPU(89);
  Tally t;
  for (const Format* el : {&formats::e4m3, &formats::e5m2, &formats::e2m1})
    for (const Case& c : cases(*el, false))
      for (auto s : {scale::Scheme::tensor, scale::Scheme::channel, scale::Scheme::block, scale::Scheme::mx})
        for (int v = 0; v < 3; ++v) {
          scale::Options o = opts(s, el);
          if (s != scale::Scheme::mx && el == &formats::e2m1) continue;
          if (v == 1) o.element_policy = quant::k_cuda_policy;
          if (v == 2) {  // runtime policy
            if (el == &formats::e2m1) continue;
            o.element_policy.overflow = Overflow::nosat;
          }
          check(c, o, quant::ElementPath::software, t);
        }
  finish(t);
}

// Generic elements (the row read at run time) under the cuda profile's policy compiled as a constant: the
// 32-bit path; int8 under it takes the general conversion (make_plan's runtime policy kind).
TEST(DeviceQuantize, GenericElementsUnderTheConstantPolicies) {
  LOWBIT_REQUIRE_GPU(89);
  Tally t;
  for (const Format* el : {&formats::e3m2, &formats::e2m3, &formats::e4m3fnuz, &formats::e3m4, &formats::int8})
    for (const Case& c : cases(*el, false))
      for (auto s : {scale::Scheme::tensor, scale::Scheme::block, scale::Scheme::mx}) {
        if (s == scale::Scheme::mx && (el == &formats::e4m3fnuz || el == &formats::e3m4 || el == &formats::int8)) continue;
        scale::Options o = opts(s, el);
        check(c, o, quant::ElementPath::software, t);
        o.element_policy = quant::k_cuda_policy;
        check(c, o, quant::ElementPath::software, t);
      }
  finish(t);
}

// The row-amax diagnostic (the benchmark's read floor of the fused pass): each block's amax pattern as the
// fused pass computes it, against a plain loop over the block here: the largest |x| pattern, a pattern above
// amax_limit (NaN, and infinity under MX NonFinite::propagate) read as +0.
TEST(DeviceQuantize, RowAmaxDiagnostic) {
  LOWBIT_REQUIRE_GPU(89);
  std::size_t blocks = 0, mismatches = 0;
  for (const Case& c : cases(formats::e4m3, true))
    for (int v = 0; v < 5; ++v) {
      scale::Options o = opts(v == 0 ? scale::Scheme::token : v == 1 ? scale::Scheme::block
                              : v == 4 ? scale::Scheme::nvfp4 : scale::Scheme::mx);
      if (v == 3) o.nonfinite = scale::NonFinite::propagate;
      if (v == 4) o.element = nullptr;
      const quant::Plan plan = quant::make_plan(c.x.rows, c.x.cols, o);
      ASSERT_EQ(plan.route, quant::Route::rows);
      const std::uint32_t limit = quant::amax_limit(plan);
      std::vector<std::uint32_t> want(plan.blocks(), 0);
      for (int r = 0; r < c.x.rows; ++r)
        for (int col = 0; col < c.x.cols; ++col) {
          const std::uint32_t b = bits(c.x.data[static_cast<std::size_t>(r) * c.x.cols + col]) & 0x7FFFFFFFu;
          std::uint32_t& w = want[quant::block_index(plan, r, col)];
          w = std::max(w, b > limit ? 0u : b);
        }
      DevBuf<float> x(c.x.data.size());
      x.put(c.x.data);
      DevBuf<std::uint32_t> amax(plan.blocks());
      quant::row_amax(plan, x.p, amax.p);
      LOWBIT_CUDA_CHECK(cudaDeviceSynchronize());
      const auto got = amax.get();
      for (std::size_t b = 0; b < want.size(); ++b, ++blocks)
        if (got[b] != want[b] && mismatches++ < 10)
          std::printf("MISMATCH row_amax %s | %s | block %zu: expected 0x%08X actual 0x%08X\n", c.name.c_str(),
                      describe(o).c_str(), b, want[b], got[b]);
    }
  RecordProperty("blocks", static_cast<int>(blocks));
  std::printf("row_amax: %zu blocks, %zu mismatches\n", blocks, mismatches);
  EXPECT_EQ(mismatches, 0u);
  scale::Options ch = opts(scale::Scheme::channel);
  EXPECT_THROW(quant::row_amax(quant::make_plan(8, 8, ch), nullptr, nullptr), std::invalid_argument);
}

// Bad input: the plan names the option it rejects, before anything runs.
TEST(DeviceQuantize, RejectsWhatTheDevicePathLacks) {
  LOWBIT_REQUIRE_GPU(89);
  scale::Options o = opts(scale::Scheme::nvfp4);
  o.hadamard = scale::Hadamard::exact;
  EXPECT_THROW(quant::make_plan(16, 16, o), std::invalid_argument);
}

}  // namespace
