// Profile resolution: a profile's defaults replace the built-in ones, explicit options replace both,
// and a combination the implementation does not have is an error naming the option (foundation
// issue §4; docs/semantics.md §3 for what each implementation offers).
#include "lowbit/profile.hpp"

#include <gtest/gtest.h>

#include "lowbit/convert.hpp"
#include "lowbit/exact.hpp"
#include "lowbit/registry.hpp"

namespace {

using namespace lowbit;

PolicyRequest rq(std::optional<Rounding> r = {}, std::optional<Overflow> o = {}, std::optional<Subnormals> s = {},
                 std::optional<Tininess> t = {}, int sr_bits = 0) {
  PolicyRequest q;
  q.rounding = r;
  q.overflow = o;
  q.subnormals = s;
  q.tininess = t;
  q.sr_bits = sr_bits;
  return q;
}

std::optional<Resolved> resolve_named(const char* profile, const Format& to, PolicyRequest req, std::string& error) {
  const Profile* p = profile ? find_profile(profile) : nullptr;
  if (profile) {
    EXPECT_NE(p, nullptr) << profile;
  }
  return resolve(p, to, req, error);
}

TEST(Profiles, AllNamedProfilesExist) {
  for (const char* n : {"ocp", "cuda", "ml_dtypes", "llvm", "te", "torchao", "microxcaling", "p3109"})
    EXPECT_NE(find_profile(n), nullptr) << n;
  EXPECT_EQ(find_profile("nvidia"), nullptr);
  EXPECT_EQ(find_profile(""), nullptr);
}

TEST(Profiles, BuiltinDefaults) {
  std::string error;
  const auto r = resolve_named(nullptr, formats::e4m3, rq(), error);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->policy.rounding, Rounding::rne);
  EXPECT_EQ(r->policy.overflow, Overflow::nosat);
  EXPECT_EQ(r->policy.subnormals, Subnormals::keep);
  EXPECT_EQ(r->policy.tininess, Tininess::after);
}

// docs/semantics.md §3, cuda: rne with satfinite by default; e8m0 only rz or rp, with no default.
TEST(Profiles, CudaDefaultsAndE8m0) {
  std::string error;
  auto r = resolve_named("cuda", formats::e4m3, rq(), error);
  ASSERT_TRUE(r) << error;
  EXPECT_EQ(r->policy.rounding, Rounding::rne);
  EXPECT_EQ(r->policy.overflow, Overflow::satfinite);

  error.clear();
  EXPECT_FALSE(resolve_named("cuda", formats::e8m0, rq(Rounding::rne), error));
  EXPECT_NE(error.find("--rounding"), std::string::npos) << error;

  error.clear();
  EXPECT_FALSE(resolve_named("cuda", formats::e8m0, rq(), error));  // no default rounding: must be named
  EXPECT_NE(error.find("--rounding"), std::string::npos) << error;

  for (Rounding ok : {Rounding::rtz, Rounding::rup}) {
    error.clear();
    r = resolve_named("cuda", formats::e8m0, rq(ok), error);
    ASSERT_TRUE(r) << error;
    EXPECT_EQ(r->policy.rounding, ok);
  }
  error.clear();
  EXPECT_FALSE(resolve_named("cuda", formats::e4m3, rq(Rounding::rtz), error));  // fp8: rn only
  EXPECT_NE(error.find("--rounding"), std::string::npos);
  error.clear();
  EXPECT_FALSE(resolve_named("cuda", formats::e2m1, rq({}, Overflow::nosat), error));  // fp4 saturates
  EXPECT_NE(error.find("--overflow"), std::string::npos);
  error.clear();
  EXPECT_FALSE(resolve_named("cuda", formats::e4m3fnuz, rq(), error));  // the toolkit has no such conversion
  EXPECT_NE(error.find("--to"), std::string::npos);
  error.clear();
  EXPECT_FALSE(resolve_named("cuda", formats::e4m3, rq(Rounding::sr_a, {}, {}, {}, 8), error));
}

// docs/semantics.md §3, llvm: five IEEE modes, no saturating conversion.
TEST(Profiles, LlvmHasNoSaturation) {
  std::string error;
  EXPECT_FALSE(resolve_named("llvm", formats::e4m3, rq({}, Overflow::satfinite), error));
  EXPECT_NE(error.find("--overflow"), std::string::npos);
  error.clear();
  EXPECT_FALSE(resolve_named("llvm", formats::e4m3, rq(Rounding::rto), error));
  for (Rounding r : {Rounding::rne, Rounding::rna, Rounding::rtz, Rounding::rup, Rounding::rdn}) {
    error.clear();
    EXPECT_TRUE(resolve_named("llvm", formats::e5m2, rq(r), error)) << error;
  }
}

// ml_dtypes: rne and non-saturating by default; e8m0 ties round up (rna on a positive value).
TEST(Profiles, MlDtypes) {
  std::string error;
  auto r = resolve_named("ml_dtypes", formats::e4m3, rq(), error);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->policy.overflow, Overflow::nosat);
  r = resolve_named("ml_dtypes", formats::e8m0, rq(), error);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->policy.rounding, Rounding::rna);
  EXPECT_NE(find_profile("ml-dtypes"), nullptr);
  EXPECT_FALSE(resolve_named("ml_dtypes", formats::e4m3, rq({}, {}, {}, Tininess::before), error));
  EXPECT_NE(error.find("--tininess"), std::string::npos);
}

TEST(Profiles, SubnormalModesOnlyWhereTheImplementationHasThem) {
  std::string error;
  EXPECT_FALSE(resolve_named("cuda", formats::e4m3, rq({}, {}, Subnormals::ftz), error));
  EXPECT_NE(error.find("--subnormals"), std::string::npos);
  error.clear();
  auto r = resolve_named("p3109", formats::e4m3, rq({}, {}, Subnormals::ftz, Tininess::before),
                         error);
  ASSERT_TRUE(r) << error;
  EXPECT_EQ(r->policy.subnormals, Subnormals::ftz);
  EXPECT_EQ(r->policy.tininess, Tininess::before);
}

// p3109 has every mode, stochastic ones included; explicit options replace the profile's defaults.
TEST(Profiles, P3109AndExplicitOptions) {
  std::string error;
  const Format* f = find_format("binary8p3se");
  auto r = resolve_named("p3109", *f, rq(Rounding::sr_b, Overflow::satpropagate, {}, {}, 5),
                         error);
  ASSERT_TRUE(r) << error;
  EXPECT_EQ(r->policy.rounding, Rounding::sr_b);
  EXPECT_EQ(r->policy.overflow, Overflow::satpropagate);
  EXPECT_EQ(r->policy.sr_bits, 5);
  r = resolve_named("ocp", formats::e4m3, rq({}, Overflow::satfinite), error);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->policy.overflow, Overflow::satfinite);
  EXPECT_FALSE(resolve_named("ocp", formats::e4m3, rq(Rounding::rtz), error));  // OFP8: rne only
}

// microxcaling: int8 elements are sign-magnitude; its "nearest" is half away from zero.
TEST(Profiles, MicroxcalingInt8IsSignMagnitude) {
  std::string error;
  auto r = resolve_named("microxcaling", formats::int8, rq(), error);
  ASSERT_TRUE(r) << error;
  EXPECT_EQ(r->target, &formats::int8sm);
  r = resolve_named("microxcaling", formats::e4m3, rq(), error);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->policy.rounding, Rounding::rna);
  EXPECT_EQ(r->policy.overflow, Overflow::satfinite);
}

TEST(Profiles, ModeNamesRoundTrip) {
  for (Rounding r : {Rounding::rne, Rounding::rna, Rounding::rtz, Rounding::rup, Rounding::rdn, Rounding::rto,
                     Rounding::sr_a, Rounding::sr_b, Rounding::sr_c})
    EXPECT_EQ(parse<Rounding>(name(r)), r);
  EXPECT_EQ(parse<Rounding>("sr-a"), Rounding::sr_a);
  EXPECT_FALSE(parse<Rounding>("nearest"));
  EXPECT_EQ(parse<Overflow>("satfinite"), Overflow::satfinite);
  EXPECT_FALSE(parse<Overflow>("saturate"));
  EXPECT_EQ(parse<Subnormals>("ftz-daz"), Subnormals::ftz_daz);
  EXPECT_EQ(parse<Tininess>("before"), Tininess::before);
}

}  // namespace

// ---- the peer profiles (reference/src/profile.cpp cites each rule's source line) -----------------------

namespace peer_profiles {

// One conversion under a profile's defaults, by the fast path and the exact path, which must agree.
std::uint64_t code_under(const char* profile, const Format& from, std::uint64_t code, const Format& to) {
  std::string error;
  const auto r = resolve(find_profile(profile), to, PolicyRequest{}, error);
  EXPECT_TRUE(r) << profile << ' ' << to.name << ": " << error;
  if (!r) return ~std::uint64_t{0};
  const Result fast = convert(from, code, *r->target, r->policy);
  const Result slow = exact::convert(from, code, *r->target, r->policy);
  EXPECT_EQ(fast, slow) << profile << ' ' << from.name << ' ' << code << " -> " << to.name;
  return fast.code;
}

// torch 2.15.0, torch/headeronly/util/Float8_e4m3fn.h:206-213, Float8_e5m2.h:117-119.
TEST(PeerProfiles, TorchFloat8) {
  const auto& f32 = formats::f32;
  EXPECT_EQ(code_under("torch", f32, 0x43F00000, formats::e4m3), 0x7Eu);       // 480 saturates
  EXPECT_EQ(code_under("torch", f32, 0xFF800000, formats::e4m3), 0xFEu);       // -Inf saturates
  EXPECT_EQ(code_under("torch", f32, 0xFFC00000, formats::e4m3), 0xFFu);       // -NaN keeps its sign
  EXPECT_EQ(code_under("torch-2.12", f32, 0x43F00000, formats::e4m3), 0x7Fu);  // 2.12.1: NaN
  EXPECT_EQ(code_under("torch-2.12", f32, 0xFF800000, formats::e4m3), 0xFFu);
  EXPECT_EQ(code_under("torch", f32, 0x476F0000, formats::e5m2), 0x7Bu);      // 61184 -> 57344
  EXPECT_EQ(code_under("torch", f32, 0x47700000, formats::e5m2), 0x7Cu);      // 61440 -> Inf, no saturation
  EXPECT_EQ(code_under("torch", f32, 0x7FC00000, formats::e5m2), 0x7Fu);      // NaN: every mantissa bit set
  EXPECT_EQ(code_under("torch", f32, 0xFF800001, formats::e5m2), 0xFFu);      // ... with the input's sign
  EXPECT_EQ(code_under("torch", f32, 0x43780000, formats::e4m3fnuz), 0x80u);  // 248: a carry onto NaN
  EXPECT_EQ(code_under("torch", f32, 0x80000000, formats::e4m3fnuz), 0x00u);  // -0 -> +0
}

// Float8_e8m0fnu.h:61-112: the exponent field of |x|, up when the guard bit is set and x is not 2^-127.
TEST(PeerProfiles, TorchE8m0) {
  const auto& f32 = formats::f32;
  const auto& e8 = formats::e8m0;
  EXPECT_EQ(code_under("torch", f32, 0x3FC00000, e8), 0x80u);  // 1.5: the tie goes up to 2
  EXPECT_EQ(code_under("torch", f32, 0x3FBFFFFF, e8), 0x7Fu);  // just below: 1
  EXPECT_EQ(code_under("torch", f32, 0xC0800000, e8), 0x81u);  // -4: the sign is masked off
  EXPECT_EQ(code_under("torch", f32, 0x00000000, e8), 0x00u);  // 0 -> 2^-127
  EXPECT_EQ(code_under("torch", f32, 0x80000000, e8), 0x00u);
  EXPECT_EQ(code_under("torch", f32, 0x00400000, e8), 0x00u);  // exactly 2^-127
  EXPECT_EQ(code_under("torch", f32, 0x00400001, e8), 0x01u);  // above it: 2^-126
  EXPECT_EQ(code_under("torch", f32, 0x7F400000, e8), 0xFFu);  // 1.5 * 2^127 carries into NaN
  EXPECT_EQ(code_under("torch", f32, 0x7F800000, e8), 0xFFu);  // Inf
  EXPECT_EQ(code_under("torch", f32, 0xFFC00000, e8), 0xFFu);  // NaN
}

// The NaN of bfloat16 and float16 by layout, dispatch and source (profile.cpp's torch notes).
TEST(PeerProfiles, TorchHalfNans) {
  const auto& f32 = formats::f32;
  EXPECT_EQ(code_under("torch", f32, 0x7FC00000, formats::bf16), 0xFFFFu);  // cvtfp32_bf16
  EXPECT_EQ(code_under("torch", f32, 0x7F810000, formats::bf16), 0xFFFFu);
  EXPECT_EQ(code_under("torch-strided", f32, 0xFF810000, formats::bf16), 0x7FC0u);  // BFloat16.h:108
  EXPECT_EQ(code_under("torch", formats::f16, 0xFE00, formats::bf16), 0x7FC0u);     // narrow source: scalar
  EXPECT_EQ(code_under("torch", f32, 0x7F810000, formats::f16), 0x7E08u);           // vcvtps2ph keeps the payload
  EXPECT_EQ(code_under("torch", f32, 0xFFA00000, formats::f16), 0xFF00u);
  EXPECT_EQ(code_under("torch-default", formats::bf16, 0x7F81, formats::f16), 0x7E00u);  // Half.h:295-297
  EXPECT_EQ(code_under("torch-default", f32, 0x7F810000, formats::f16), 0x7E08u);
  // NanDecode::torch_widening: e4m3fn 0x7F is f32 0x7FF00000, the fnuz NaN +0x7F800001.
  EXPECT_EQ(code_under("torch", formats::e4m3, 0xFF, formats::f16), 0xFF80u);
  EXPECT_EQ(code_under("torch", formats::e4m3fnuz, 0x80, formats::f16), 0x7E00u);
  EXPECT_EQ(code_under("torch", formats::e5m2fnuz, 0x80, formats::e4m3), 0x7Fu);
  EXPECT_EQ(code_under("torch", formats::e8m0, 0xFF, formats::e5m2), 0x7Fu);
  EXPECT_EQ(code_under("ml_dtypes", formats::e4m3fnuz, 0x80, formats::e4m3), 0xFFu);  // ml_dtypes: negative
  // A same-dtype .to() returns the tensor itself: a signaling NaN stays as it is.
  EXPECT_EQ(code_under("torch", formats::f16, 0x7C01, formats::f16), 0x7C01u);
}

// jaxlib 0.10.2, xla/codegen/emitters/transforms/expand_float_ops.cc.
TEST(PeerProfiles, Xla) {
  const auto& f32 = formats::f32;
  EXPECT_EQ(code_under("xla", f32, 0x7FC00000, formats::e2m1), 0x8u);  // to_zero | 0x8
  EXPECT_EQ(code_under("xla", f32, 0xFFC00000, formats::e2m1), 0x8u);
  EXPECT_EQ(code_under("xla", f32, 0x7F800001, formats::f16), 0x7E00u);  // quiet, top payload bits
  EXPECT_EQ(code_under("xla", f32, 0xFF810000, formats::f16), 0xFE08u);
  EXPECT_EQ(code_under("xla", formats::bf16, 0xFF81, formats::f16), 0xFE08u);
  EXPECT_EQ(code_under("xla", formats::e5m2, 0x7D, formats::f16), 0x7E00u);     // extf: getNaN | sign
  EXPECT_EQ(code_under("xla", f32, 0xFF800001, formats::e5m2), 0xFEu);          // ConvertImpl: quiet, signed
  EXPECT_EQ(code_under("xla", formats::f16, 0xFE00, formats::e5m2), 0x7Fu);     // EmitF16ToF8e5m2
  EXPECT_EQ(code_under("xla", formats::bf16, 0xFFC1, formats::e5m2), 0x7Fu);    // via f32 and f16
  EXPECT_EQ(code_under("xla", formats::e4m3fnuz, 0x80, formats::e4m3), 0x7Fu);  // "positive but encoded as -0"
  EXPECT_EQ(code_under("xla", f32, 0x80000000, formats::e8m0), 0xFFu);          // -0 into e8m0: NaN
}

TEST(PeerProfiles, EveryProfileNamesItsVersion) {
  for (const Profile& p : profiles()) {
    ASSERT_NE(p.version, nullptr) << p.name;
    EXPECT_GT(std::string(p.version).size(), 0u) << p.name;
  }
  EXPECT_STREQ(find_profile("torch")->version, "torch 2.15.0");
  EXPECT_STREQ(find_profile("torch-2.12")->version, "torch 2.12.1");
  EXPECT_STREQ(find_profile("xla")->version, "jaxlib 0.10.2");
  // float4_e2m1fn_x2 and the fp6 formats: torch has no cast, so neither has the profile.
  std::string error;
  EXPECT_FALSE(resolve(find_profile("torch"), formats::e2m1, PolicyRequest{}, error));
  EXPECT_NE(error.find("no conversion into e2m1"), std::string::npos) << error;
}

}  // namespace peer_profiles
