// The scheme rows (scale.hpp) and resolve(): one row per scheme, the defaults each row gives, a refusal
// naming the option for every option a row does not take, and the rows' claims about the schemes
// checked against what quantize() does (the block shape, the scale format, one pass or two).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "lowbit/format.hpp"
#include "lowbit/names.hpp"
#include "lowbit/scale.hpp"

namespace {

namespace S = lowbit::scale;
namespace F = lowbit::formats;
using lowbit::all;
using lowbit::name;

TEST(SchemeRows, OneRowPerSchemeInOrder) {
  ASSERT_EQ(std::size(S::scheme_rows), lowbit::count<S::Scheme>());
  std::size_t i = 0;
  for (S::Scheme s : all<S::Scheme>()) {
    EXPECT_EQ(S::scheme_rows[i].scheme, s) << name(s);
    EXPECT_EQ(&S::scheme_row(s), &S::scheme_rows[i]) << name(s);
    EXPECT_TRUE(S::scheme_row(s).takes.contains(S::Option::element)) << name(s);
    EXPECT_NE(S::scheme_row(s).source, nullptr);
    ++i;
  }
  ASSERT_EQ(std::size(S::variant_rows), lowbit::count<S::Variant>());
  i = 0;
  for (S::Variant v : all<S::Variant>()) EXPECT_EQ(S::variant_rows[i++].variant, v) << name(v);
}

// A request naming `opt` with a value the scheme would accept if it took the option at all.
S::Request naming(S::Scheme s, S::Option opt) {
  const S::SchemeRow& row = S::scheme_row(s);
  S::Request r;
  r.scheme = s;
  switch (opt) {
    case S::Option::element: r.element = row.default_element; break;
    case S::Option::block: r.block = row.block_cols.kind == S::Extent::Kind::whole ? 4 : row.block_cols.size; break;
    case S::Option::scale_format: r.scale_format = S::ScaleFormat::f32; break;
    case S::Option::mx_rule: r.mx_rule = S::MxRule::floor; break;
    case S::Option::nonfinite: r.nonfinite = S::NonFinite::scale_nan; break;
    case S::Option::amax_nan: r.amax_nan = S::AmaxNan::ignore; break;
    case S::Option::eps: r.eps = 0.0f; break;
    case S::Option::zero_scale: r.zero_scale = S::ZeroScale::kernel; break;
    case S::Option::variant: r.variant = S::Variant::standard; break;
    case S::Option::hadamard: r.hadamard = S::Hadamard::exact; break;
    case S::Option::compute: r.compute = S::Compute::f32; break;
  }
  return r;
}

// Every option, named at a value the schemes that take it accept, is accepted by those and refused by the
// others, even at its default value (the request is what the caller gave), with a message naming it.
TEST(SchemeRows, AnOptionASchemeDoesNotTakeIsRefused) {
  int refused = 0, accepted = 0;
  for (S::Scheme s : all<S::Scheme>())
    for (S::Option opt : all<S::Option>()) {
      SCOPED_TRACE(std::string(name(s)) + " --" + name(opt));
      S::Options out;
      const auto f = S::resolve(naming(s, opt), out);
      if (S::scheme_row(s).takes.contains(opt)) {
        EXPECT_FALSE(f) << f->message;
        ++accepted;
      } else {
        ASSERT_TRUE(f);
        EXPECT_EQ(f->option, opt);
        EXPECT_NE(f->message.rfind("--", 0), 0u) << "the library words no flag: " << f->message;
        EXPECT_NE(f->message.find(name(s)), std::string::npos) << f->message;
        ++refused;
      }
    }
  // 9 schemes x 11 options: the rows take 51 of them (tensor, channel, token 6 each, delayed 2, block 7,
  // mx 6, the two-level NVFP4 7 each, nvfp4-1level 4: from the rows' `takes`, counted by hand).
  EXPECT_EQ(accepted, 6 + 2 + 6 + 6 + 7 + 6 + 7 + 7 + 4);
  EXPECT_EQ(refused, 99 - accepted);
}

std::string refusal(const S::Request& r) {
  S::Options out;
  const auto f = S::resolve(r, out);
  return f ? std::string(name(f->option)) + ": " + f->message : "";
}

TEST(SchemeRows, RefusalsNameTheOptionAndTheReason) {
  S::Request r;
  r.scheme = S::Scheme::tensor;
  r.block = 4;  // accepted and ignored before the rows
  EXPECT_EQ(refusal(r).rfind("block: does not apply to the tensor scheme (given 4; it applies to block, mx,", 0), 0u)
      << refusal(r);
  r = {};
  r.scheme = S::Scheme::mx;
  r.scale_format = S::ScaleFormat::pow2;
  EXPECT_EQ(refusal(r).rfind("scale-format: does not apply to the mx scheme (given pow2;", 0), 0u) << refusal(r);
  r.scheme = S::Scheme::tensor;
  r.scale_format = S::ScaleFormat::ue8m0_packed;
  EXPECT_EQ(refusal(r), "scale-format: ue8m0-packed does not apply to the tensor scheme (it applies to block)");
  r = {};
  r.scheme = S::Scheme::nvfp4;
  r.block = 32;
  EXPECT_EQ(refusal(r), "block: NVFP4 blocks are 16 columns, not 32");
  r = {};
  r.scheme = S::Scheme::nvfp4_2d;
  r.block_rows = 8;
  EXPECT_EQ(refusal(r), "block: NVFP4 blocks are 16 rows, not 8");
  r.block_rows = 16;
  EXPECT_EQ(refusal(r), "");
  r = {};
  r.scheme = S::Scheme::mx;
  r.block_rows = 2;
  EXPECT_EQ(refusal(r), "block: MX blocks are 1 row, not 2");
  r.block_rows.reset();
  r.block = 0;
  EXPECT_EQ(refusal(r), "block: must be positive");
  r = {};
  r.scheme = S::Scheme::nvfp4_1level;
  r.zero_scale = S::ZeroScale::reference;  // its block scales are at least 2^-6: never zero
  EXPECT_EQ(refusal(r).rfind("zero-scale: does not apply to the nvfp4-1level scheme", 0), 0u) << refusal(r);
  r = {};
  r.scheme = S::Scheme::mx;
  r.element = &F::bf16;
  EXPECT_EQ(refusal(r), "element: MX elements are e4m3, e5m2, e2m3, e3m2, e2m1, int8 or int8sm, not bf16");
  r.scheme = S::Scheme::tensor;
  EXPECT_EQ(refusal(r), "element: scheme elements are at most 8 bits, not bf16");
  r.scheme = S::Scheme::nvfp4;
  r.element = &F::e4m3;
  EXPECT_EQ(refusal(r), "element: NVFP4 elements are e2m1, not e4m3");
  r = {};
  r.scheme = S::Scheme::block;
  r.scale_format = S::ScaleFormat::ue8m0_packed;
  r.eps = 1e-12f;
  EXPECT_EQ(refusal(r).rfind("eps: ue8m0-packed scales take no eps", 0), 0u) << refusal(r);
  r = {};
  r.scheme = S::Scheme::nvfp4;
  r.variant = S::Variant::four_over_six_mse;
  r.hadamard = S::Hadamard::exact;
  EXPECT_EQ(refusal(r), "variant: 4over6-mse is not combined with the Hadamard transform");
  r.hadamard = S::Hadamard::none;
  r.element_policy.rounding = lowbit::Rounding::sr_a;
  r.element_policy.sr_bits = 8;
  EXPECT_EQ(refusal(r), "variant: 4over6-mse is not combined with stochastic rounding");
  r.variant = S::Variant::fast_math;
  EXPECT_EQ(refusal(r), "");
}

TEST(SchemeRows, DefaultsComeFromTheRow) {
  struct Want {
    S::Scheme scheme;
    const lowbit::Format* element;
    int block, block_rows;
  };
  const Want want[] = {{S::Scheme::tensor, &F::e4m3, 0, 0},       {S::Scheme::delayed, &F::e4m3, 0, 0},
                       {S::Scheme::channel, &F::e4m3, 0, 0},      {S::Scheme::token, &F::e4m3, 0, 0},
                       {S::Scheme::block, &F::e4m3, 128, 0},      {S::Scheme::mx, &F::e4m3, 32, 0},
                       {S::Scheme::nvfp4, &F::e2m1, 16, 0},       {S::Scheme::nvfp4_2d, &F::e2m1, 16, 16},
                       {S::Scheme::nvfp4_1level, &F::e2m1, 16, 0}};
  ASSERT_EQ(std::size(want), lowbit::count<S::Scheme>());
  for (const Want& w : want) {
    SCOPED_TRACE(name(w.scheme));
    S::Request r;
    r.scheme = w.scheme;
    S::Options o;
    ASSERT_FALSE(S::resolve(r, o));
    EXPECT_EQ(o.element, w.element);
    EXPECT_EQ(o.block, w.block);
    EXPECT_EQ(o.block_rows, w.block_rows);
    // normalize() is resolve() of the Options' own request, and running it again changes nothing.
    S::Options again = o;
    EXPECT_EQ(S::normalize(again), "");
    EXPECT_EQ(again.block, o.block);
    EXPECT_EQ(again.block_rows, o.block_rows);
    EXPECT_EQ(again.element, o.element);
  }
}

// What quantize() returns agrees with the row: the block shape and the scales' format.
TEST(SchemeRows, QuantizeFollowsTheRow) {
  const S::Tensor x{40, 300, std::vector<float>(40 * 300, 1.5f)};
  for (S::Scheme s : all<S::Scheme>()) {
    SCOPED_TRACE(name(s));
    const S::SchemeRow& row = S::scheme_row(s);
    S::Options o;
    o.scheme = s;
    const S::Quantized q = S::quantize(x, o);
    auto extent = [](const S::Extent& e, int whole) {
      switch (e.kind) {
        case S::Extent::Kind::whole: return whole;
        case S::Extent::Kind::fixed: return e.size;
        case S::Extent::Kind::chosen: return e.size == 0 ? 1 : e.size;
      }
      return 0;
    };
    EXPECT_EQ(q.block_rows, extent(row.block_rows, 40));
    EXPECT_EQ(q.block_cols, extent(row.block_cols, 300));
    EXPECT_EQ(q.scale_format, row.scale_element ? row.scale_element : &F::f32);
    EXPECT_EQ(q.element, row.default_element);
  }
}

// Passes::one: a band of rows does not depend on the rows after it (quantizing the first band alone gives
// its codes and scales); Passes::two: some later row changes the first row's result.
TEST(SchemeRows, PassesSayWhetherLaterRowsMatter) {
  const int rows = 32, cols = 48;
  S::Tensor x{rows, cols, std::vector<float>(static_cast<std::size_t>(rows) * cols)};
  for (std::size_t i = 0; i < x.data.size(); ++i) x.data[i] = static_cast<float>(static_cast<int>(i * 7 % 23) - 11);
  S::Tensor louder = x;  // the last row 64 times larger: the tensor's and every column's amax change
  for (int c = 0; c < cols; ++c) louder.data[static_cast<std::size_t>(rows - 1) * cols + c] *= 64.0f;
  for (S::Scheme s : all<S::Scheme>()) {
    SCOPED_TRACE(name(s));
    S::Options o;
    o.scheme = s;
    const S::Quantized a = S::quantize(x, o), b = S::quantize(louder, o);
    const bool first_row_same = std::equal(a.codes.begin(), a.codes.begin() + cols, b.codes.begin()) &&
                                a.scales[0] == b.scales[0] && a.tensor_scale == b.tensor_scale;
    EXPECT_EQ(first_row_same, S::scheme_row(s).passes == S::Passes::one);
  }
}

}  // namespace
