// Host side of the device quantizers (quick tier, no GPU): the plan (block shapes, routes, vector loads),
// option checks and their messages, workspace and launch shapes, and the shared scale rules' decoders.
#include <gtest/gtest.h>

#include <cstring>
#include <stdexcept>
#include <string>

#include "lowbit/device/quantize.hpp"
#include "lowbit/scale_rules.hpp"

namespace {

namespace scale = lowbit::scale;
namespace quant = lowbit::device::quant;
namespace formats = lowbit::formats;
namespace rules = lowbit::scale::rules;

scale::Options opts(scale::Scheme s, const lowbit::Format* el = nullptr) {
  scale::Options o;
  o.scheme = s;
  o.element = el;
  return o;
}

std::string message(int rows, int cols, const scale::Options& o, quant::ElementPath path = quant::ElementPath::software) {
  try {
    quant::make_plan(rows, cols, o, path);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(QuantizePlan, BlockShapesPerScheme) {
  const quant::Plan t = quant::make_plan(129, 130, opts(scale::Scheme::tensor));
  EXPECT_EQ(t.br, 129);
  EXPECT_EQ(t.bc, 130);
  EXPECT_EQ(t.blocks(), 1u);
  EXPECT_TRUE(t.needs_tensor_amax);
  EXPECT_EQ(t.route, quant::Route::general);
  EXPECT_FALSE(t.vec4);  // 130 % 4 != 0

  const quant::Plan ch = quant::make_plan(8, 12, opts(scale::Scheme::channel));
  EXPECT_EQ(ch.br, 8);
  EXPECT_EQ(ch.bc, 1);
  EXPECT_EQ(ch.nbc, 12);
  EXPECT_TRUE(ch.vec4);

  const quant::Plan tok = quant::make_plan(8, 12, opts(scale::Scheme::token));
  EXPECT_EQ(tok.blocks(), 8u);
  EXPECT_EQ(tok.route, quant::Route::rows);

  scale::Options b = opts(scale::Scheme::block);
  b.block_rows = 128;
  const quant::Plan bb = quant::make_plan(300, 520, b);
  EXPECT_EQ(bb.br, 128);
  EXPECT_EQ(bb.bc, 128);
  EXPECT_EQ(bb.nbr, 3);
  EXPECT_EQ(bb.nbc, 5);
  EXPECT_EQ(bb.route, quant::Route::general);
  EXPECT_EQ(quant::block_index(bb, 299, 519), 14u);
  EXPECT_EQ(quant::block_index(bb, 128, 0), 5u);

  b.block_rows = 0;
  b.scale_format = scale::ScaleFormat::ue8m0_packed;
  const quant::Plan packed = quant::make_plan(3, 520, b);
  EXPECT_EQ(packed.blocks(), 15u);
  EXPECT_EQ(packed.packed_words(), 4u);  // 15 codes, four per word
  EXPECT_EQ(packed.route, quant::Route::general);

  const quant::Plan mx = quant::make_plan(3, 17, opts(scale::Scheme::mx));
  EXPECT_EQ(mx.bc, 32);
  EXPECT_EQ(mx.nbc, 1);
  EXPECT_EQ(mx.route, quant::Route::rows);
  EXPECT_EQ(mx.kind, quant::ElementKind::e4m3);
  EXPECT_EQ(mx.emax, 8);
  EXPECT_EQ(mx.elem_max, 448.0f);

  const quant::Plan nv = quant::make_plan(32, 64, opts(scale::Scheme::nvfp4));
  EXPECT_EQ(nv.kind, quant::ElementKind::e2m1);
  EXPECT_EQ(nv.bc, 16);
  EXPECT_TRUE(nv.needs_tensor_amax);
  EXPECT_EQ(nv.route, quant::Route::rows);
  const quant::Plan nv2 = quant::make_plan(33, 64, opts(scale::Scheme::nvfp4_2d));
  EXPECT_EQ(nv2.br, 16);
  EXPECT_EQ(nv2.nbr, 3);
  EXPECT_EQ(nv2.route, quant::Route::general);

  const quant::Plan gen = quant::make_plan(4, 4, opts(scale::Scheme::tensor, &formats::e3m2));
  EXPECT_EQ(gen.kind, quant::ElementKind::generic);
  // A generic element under a constant policy takes the 32-bit path with the row read at run time; int8,
  // which that path does not cover, the general conversion (runtime policy kind).
  EXPECT_EQ(gen.policy_kind, quant::PolicyKind::rne_satfinite);
  const quant::Plan i8 = quant::make_plan(4, 4, opts(scale::Scheme::tensor, &formats::int8));
  EXPECT_EQ(i8.policy_kind, quant::PolicyKind::runtime);
}

// The passes that read the input, as quantize() launches them (the benchmark counts each read).
TEST(QuantizePlan, InputReadsPerScheme) {
  auto reads = [](scale::Scheme s, auto&& tweak) {
    scale::Options o = opts(s);
    tweak(o);
    return quant::input_reads(quant::make_plan(256, 1024, o));
  };
  auto none = [](scale::Options&) {};
  EXPECT_EQ(reads(scale::Scheme::tensor, none), 2);    // tensor amax, elements
  EXPECT_EQ(reads(scale::Scheme::delayed, none), 2);   // the amax it records, elements
  EXPECT_EQ(reads(scale::Scheme::channel, none), 2);   // column amaxes, elements
  EXPECT_EQ(reads(scale::Scheme::token, none), 1);     // fused
  EXPECT_EQ(reads(scale::Scheme::block, none), 1);     // 1x128 fused
  EXPECT_EQ(reads(scale::Scheme::block, [](scale::Options& o) { o.block_rows = 128; }), 2);
  EXPECT_EQ(reads(scale::Scheme::block, [](scale::Options& o) { o.scale_format = scale::ScaleFormat::ue8m0_packed; }), 2);
  EXPECT_EQ(reads(scale::Scheme::mx, none), 1);
  EXPECT_EQ(reads(scale::Scheme::nvfp4, none), 2);     // tensor amax (S_enc), fused
  EXPECT_EQ(reads(scale::Scheme::nvfp4_2d, none), 3);  // tensor amax, block amaxes, elements
}

// The amax limit: +Inf's pattern, or the largest finite one under MX NonFinite::propagate.
TEST(QuantizePlan, AmaxLimit) {
  EXPECT_EQ(quant::amax_limit(quant::make_plan(4, 64, opts(scale::Scheme::mx))), 0x7F800000u);
  scale::Options o = opts(scale::Scheme::mx);
  o.nonfinite = scale::NonFinite::propagate;
  EXPECT_EQ(quant::amax_limit(quant::make_plan(4, 64, o)), 0x7F7FFFFFu);
  EXPECT_EQ(quant::amax_limit(quant::make_plan(4, 64, opts(scale::Scheme::token))), 0x7F800000u);
}

TEST(QuantizePlan, RejectsWithTheOptionNamed) {
  scale::Options h = opts(scale::Scheme::nvfp4);
  h.hadamard = scale::Hadamard::exact;
  EXPECT_NE(message(16, 16, h).find("--hadamard"), std::string::npos);
  scale::Options v = opts(scale::Scheme::nvfp4);
  v.variant = scale::Variant::four_over_six;
  EXPECT_NE(message(16, 16, v).find("--variant 4over6"), std::string::npos);
  v.variant = scale::Variant::torchao;  // the libraries' arithmetic is the CPU's alone
  EXPECT_NE(message(16, 16, v).find("--variant torchao"), std::string::npos);
  EXPECT_NE(message(16, 16, opts(scale::Scheme::nvfp4_1level)).find("nvfp4-1level"), std::string::npos);
  EXPECT_NE(message(0, 16, opts(scale::Scheme::tensor)).find("--shape"), std::string::npos);
  // The reference's own checks come first (normalize).
  EXPECT_NE(message(16, 16, opts(scale::Scheme::mx, &formats::f16)).find("element: "), std::string::npos);
  // The hardware path: e4m3 / e5m2 under rne + satfinite only.
  EXPECT_NE(message(4, 4, opts(scale::Scheme::mx, &formats::e2m1), quant::ElementPath::hardware).find("--element-path"),
            std::string::npos);
  scale::Options sr = opts(scale::Scheme::tensor);
  sr.element_policy.rounding = lowbit::Rounding::sr_a;
  sr.element_policy.sr_bits = 32;
  EXPECT_NE(message(4, 4, sr, quant::ElementPath::hardware).find("cuda profile"), std::string::npos);
  // The default policy keeps a NaN's sign; the instruction does not: the hardware path stands for the cuda
  // profile's policy only.
  EXPECT_NE(message(4, 4, opts(scale::Scheme::tensor, &formats::e5m2), quant::ElementPath::hardware).find("cuda profile"),
            std::string::npos);
  scale::Options cu = opts(scale::Scheme::tensor, &formats::e5m2);
  cu.element_policy = quant::cuda_profile_policy(formats::e5m2);
  EXPECT_EQ(message(4, 4, cu, quant::ElementPath::hardware), "");
}

// The policies compiled as constants: the constant for the cuda profile is what the profile resolves.
TEST(QuantizePlan, PolicyKinds) {
  EXPECT_TRUE(quant::same_policy(quant::cuda_profile_policy(formats::e4m3), quant::k_cuda_policy));
  EXPECT_TRUE(quant::same_policy(quant::cuda_profile_policy(formats::e5m2), quant::k_cuda_policy));
  EXPECT_TRUE(quant::same_policy(scale::Options{}.element_policy, quant::k_rne_satfinite_policy));
  EXPECT_FALSE(quant::same_policy(quant::k_cuda_policy, quant::k_rne_satfinite_policy));
  EXPECT_EQ(quant::make_plan(4, 4, opts(scale::Scheme::tensor)).policy_kind, quant::PolicyKind::rne_satfinite);
  scale::Options cu = opts(scale::Scheme::mx);
  cu.element_policy = quant::k_cuda_policy;
  const quant::Plan hw = quant::make_plan(4, 64, cu, quant::ElementPath::hardware);
  EXPECT_EQ(hw.policy_kind, quant::PolicyKind::cuda);
  EXPECT_EQ(hw.path, quant::ElementPath::hardware);
  scale::Options sr = opts(scale::Scheme::tensor);
  sr.element_policy.rounding = lowbit::Rounding::sr_a;
  sr.element_policy.sr_bits = 32;
  EXPECT_EQ(quant::make_plan(4, 4, sr).policy_kind, quant::PolicyKind::runtime);
}

// The reference's fmaxf steps drop a signaling NaN as they drop a quiet one (CUDA max.f32; glibc's fmaxf
// would return NaN for a signaling operand).  Expected values by hand: 1e-4 / 448 rounded up to a power of
// two is 2^-22 (e8m0 code 127 - 22 = 0x69), so finite elements times 2^22 saturate to +-448.
TEST(ScaleRules, SignalingNanAmaxIsDroppedLikeAQuietOne) {
  auto f = [](std::uint32_t b) {
    float v;
    std::memcpy(&v, &b, 4);
    return v;
  };
  float m = 0;
  EXPECT_EQ(rules::packed_block_scale(f(0x7FC00000u), 448.0f, m), 0x69u);
  EXPECT_EQ(m, 0x1p22f);
  EXPECT_EQ(rules::packed_block_scale(f(0x7FA00000u), 448.0f, m), 0x69u);  // signaling
  EXPECT_EQ(rules::packed_block_scale(f(0xFFA00000u), 448.0f, m), 0x69u);
  EXPECT_EQ(m, 0x1p22f);
  EXPECT_EQ(rules::bits_of(rules::fmax_nan_drop(f(0x7FA00000u), 2.0f)), rules::bits_of(2.0f));
  EXPECT_EQ(rules::bits_of(rules::fmax_nan_drop(2.0f, f(0xFFA00000u))), rules::bits_of(2.0f));
  EXPECT_EQ(rules::bits_of(rules::fmin_nan_drop(f(0x7FA00000u), 2.0f)), rules::bits_of(2.0f));
  EXPECT_EQ(rules::fmax_nan_drop(1.0f, 3.0f), 3.0f);
  EXPECT_EQ(rules::fmin_nan_drop(1.0f, 3.0f), 1.0f);

  // Block 1x128, ue8m0-packed, amax propagating NaN: a signaling NaN in the block gives the same scale
  // and codes as a quiet one.
  for (std::uint32_t nan : {0x7FC00000u, 0xFFA00000u, 0x7F800001u}) {
    scale::Tensor x{1, 4, {f(nan), 1.0f, -2.0f, 3.0f}};
    scale::Options o = opts(scale::Scheme::block, &formats::e4m3);
    o.block = 128;
    o.scale_format = scale::ScaleFormat::ue8m0_packed;
    o.amax_propagates_nan = true;
    const scale::Quantized q = scale::quantize(x, o);
    ASSERT_EQ(q.scales.size(), 1u);
    EXPECT_EQ(q.scales[0], 0x69u) << std::hex << nan;
    EXPECT_EQ(q.codes[1], 0x7Eu) << std::hex << nan;
    EXPECT_EQ(q.codes[2], 0xFEu) << std::hex << nan;
    EXPECT_EQ(q.codes[3], 0x7Eu) << std::hex << nan;
    // Delayed scaling records fmaxf(0, amax): the NaN is dropped whatever its kind.
    scale::Options d = opts(scale::Scheme::delayed, &formats::e4m3);
    d.amax_propagates_nan = true;
    scale::DelayedState st;
    (void)scale::quantize(x, d, nullptr, &st);
    EXPECT_EQ(rules::bits_of(st.history.back()), 0u) << std::hex << nan;
  }
}

TEST(QuantizePlan, WorkspaceAndLaunchShapes) {
  const quant::Plan t = quant::make_plan(16384, 8192, opts(scale::Scheme::tensor));
  EXPECT_EQ(quant::chunk(t), 4);
  EXPECT_EQ(quant::workspace_bytes(t), 256u + 4u * 256u);
  const quant::Launch l = quant::elementwise_launch(t, 132);
  EXPECT_EQ(l.block, 256u);
  EXPECT_EQ(l.grid, 132u * 8u);  // capped: grid-stride covers the rest
  const quant::Launch2 e = quant::elements_launch(t, 132);
  EXPECT_EQ(e.block, 256u);
  EXPECT_EQ(e.gx, 8u);    // 2048 chunks of four per row
  EXPECT_EQ(e.gy, 264u);  // 132 * 16 CTAs in all
  const quant::Plan narrow = quant::make_plan(1000, 12, opts(scale::Scheme::channel));
  const quant::Launch2 en = quant::elements_launch(narrow, 132);
  EXPECT_EQ(en.block, 32u);  // 3 chunks: one warp
  EXPECT_EQ(en.gx, 1u);
  EXPECT_EQ(en.gy, 1000u);  // every row its own y (at most 132 x 16)
  const quant::Plan small = quant::make_plan(1, 1, opts(scale::Scheme::tensor));
  EXPECT_EQ(quant::chunk(small), 1);
  EXPECT_EQ(quant::elementwise_launch(small, 132).grid, 1u);

  const quant::Plan mx = quant::make_plan(64, 4096, opts(scale::Scheme::mx));
  const quant::RowsLaunch r = quant::rows_launch(mx, 132);
  EXPECT_EQ(r.group, 8);  // 32 elements in chunks of 4
  EXPECT_EQ(r.block, 256u);
  EXPECT_EQ(r.grid, 256u);  // 8192 blocks, 4 per warp, 8 warps per CTA
  const quant::Plan nv = quant::make_plan(4, 64, opts(scale::Scheme::nvfp4));
  EXPECT_EQ(quant::rows_launch(nv, 132).group, 4);
  const quant::Plan tok = quant::make_plan(4, 8192, opts(scale::Scheme::token));
  EXPECT_EQ(quant::rows_launch(tok, 132).group, 32);
  const quant::Plan odd = quant::make_plan(3, 17, opts(scale::Scheme::mx));
  EXPECT_FALSE(odd.vec4);
  EXPECT_EQ(quant::rows_launch(odd, 132).group, 32);  // 32 single elements

  // One wave: with the occupancy query's CTAs per multiprocessor the grid never exceeds sms x that, and shrinks
  // to the work when there is less.
  EXPECT_EQ(quant::elementwise_launch(t, 132, 3).grid, 396u);
  EXPECT_EQ(quant::elementwise_launch(small, 132, 3).grid, 1u);
  EXPECT_EQ(quant::rows_launch(mx, 132, 5).grid, 256u);  // the work (8192 blocks) needs 256 CTAs < 660
  const quant::Plan big = quant::make_plan(16384, 8192, opts(scale::Scheme::mx));
  EXPECT_EQ(quant::rows_launch(big, 132, 5).grid, 660u);
  EXPECT_EQ(quant::elements_block(t), 256u);
  const quant::Launch2 e3 = quant::elements_launch(t, 132, 3);
  EXPECT_EQ(e3.gx, 8u);
  EXPECT_EQ(e3.gy, 49u);  // 396 CTAs / 8 per row of the grid
  EXPECT_LE(e3.gx * e3.gy, 396u);
  EXPECT_EQ(quant::elements_launch(narrow, 132, 4).gy, 528u);  // one CTA per row of the grid: 132 x 4 rows in flight
  EXPECT_EQ(quant::elements_block(narrow), 32u);
  EXPECT_EQ(quant::elements_launch(t, 132, 0).gy, 16u);  // a zero from the query counts as one CTA per multiprocessor

  scale::Options p = opts(scale::Scheme::block);
  p.scale_format = scale::ScaleFormat::ue8m0_packed;
  const quant::Plan pk = quant::make_plan(1000, 128, p);
  EXPECT_EQ(quant::scales_launch(pk).grid, 1u);  // 1000 blocks, four per thread: 250 threads
  const quant::Plan pk2 = quant::make_plan(1100, 128, p);
  EXPECT_EQ(quant::scales_launch(pk2).grid, 2u);  // 275 threads
}

// The shared decoders equal the formats' definitions: e4m3 s.eeee.mmm bias 7, e8m0 2^(code - 127).
TEST(ScaleRules, Decoders) {
  auto f = [](std::uint32_t b) {
    float v;
    std::memcpy(&v, &b, 4);
    return v;
  };
  EXPECT_EQ(rules::e4m3_value(0x7E), 448.0f);
  EXPECT_EQ(rules::e4m3_value(0xFE), -448.0f);
  EXPECT_EQ(rules::e4m3_value(0x01), 0x1p-9f);
  EXPECT_EQ(rules::e4m3_value(0x07), 7 * 0x1p-9f);
  EXPECT_EQ(rules::e4m3_value(0x08), 0x1p-6f);
  EXPECT_EQ(rules::e4m3_value(0x38), 1.0f);
  EXPECT_EQ(rules::e4m3_value(0x3B), 1.375f);
  EXPECT_TRUE(rules::is_nan(rules::e4m3_value(0x7F)));
  EXPECT_EQ(rules::bits_of(rules::e4m3_value(0x80)), 0x80000000u);
  EXPECT_EQ(rules::e8m0_value(127), 1.0f);
  EXPECT_EQ(rules::e8m0_value(254), 0x1p127f);
  EXPECT_EQ(rules::e8m0_value(0), f(0x00400000u));  // 2^-127, an f32 subnormal
  EXPECT_TRUE(rules::is_nan(rules::e8m0_value(255)));
  // MX multipliers 2^(127 - e): e = 254 gives the subnormal 2^-127; NaN scales give 0.
  EXPECT_EQ(rules::mx_multiplier(127), 1.0f);
  EXPECT_EQ(rules::mx_multiplier(254), f(0x00400000u));
  EXPECT_EQ(rules::mx_multiplier(0), 0x1p127f);
  EXPECT_EQ(rules::mx_multiplier(255), 0.0f);
  // TE scale_from_amax: 448 / 448 = 1; a zero, NaN or infinite amax gives 1; pow2 rounds 448 / 300 down to 1.
  EXPECT_EQ(rules::scale_from_amax(448.0f, 448.0f, 0.0f, scale::ScaleFormat::f32, 3.4e38f), 1.0f);
  EXPECT_EQ(rules::scale_from_amax(0.0f, 448.0f, 0.0f, scale::ScaleFormat::f32, 3.4e38f), 1.0f);
  EXPECT_EQ(rules::scale_from_amax(300.0f, 448.0f, 0.0f, scale::ScaleFormat::pow2, 3.4e38f), 1.0f);
  EXPECT_EQ(rules::scale_from_amax(1.0f, 448.0f, 0.0f, scale::ScaleFormat::pow2, 3.4e38f), 256.0f);
  // NVFP4: S_enc of amax 2688 is 1; a zero amax gives 1.
  EXPECT_EQ(rules::nvfp4_s_enc(2688.0f, 448.0f, 6.0f), 1.0f);
  EXPECT_EQ(rules::nvfp4_s_enc(0.0f, 448.0f, 6.0f), 1.0f);
}

}  // namespace
