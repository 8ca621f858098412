// Profile resolution: a profile's defaults replace the built-in ones, explicit options replace both,
// and a combination the implementation does not have is an error naming the option (foundation
// issue §4; docs/semantics.md §3 for what each implementation offers).
#include <gtest/gtest.h>

#include "lowbit/profile.hpp"
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
