// Every enum name table (names.hpp) names each value of its enum exactly once, in declaration order, and
// nothing else: a value added to an enum without a row fails here, not silently in a printer or a fuzzer.
#include <gtest/gtest.h>

#include <cstddef>
#include <set>
#include <string>
#include <string_view>

#include "lowbit/names.hpp"
#include "lowbit/policy.hpp"
#include "lowbit/scale.hpp"

namespace {

using namespace lowbit;

// The compiler's own spelling of a constant of enum type: "lowbit::Rounding::sr_c" for an enumerator,
// "(lowbit::Rounding)9" (GCC, clang) for a value that no enumerator names.  This is how the test knows
// the enum's real list of enumerators without a list written by hand.
template <auto V>
constexpr std::string_view spelled() {
  return __PRETTY_FUNCTION__;
}
template <auto V>
constexpr bool is_enumerator() {
  const std::string_view s = spelled<V>();
  const std::size_t eq = s.rfind("V = ");
  return eq != std::string_view::npos && s[eq + 4] != '(';
}

template <class E, std::size_t... I>
constexpr std::size_t enumerators(std::index_sequence<I...>) {
  return (std::size_t{0} + ... + (is_enumerator<static_cast<E>(I)>() ? 1 : 0));
}
// How many of the values 0..63 are enumerators of E (every enum here is dense from 0 and far below 64).
template <class E>
constexpr std::size_t enumerator_count() {
  return enumerators<E>(std::make_index_sequence<64>{});
}

template <class E>
void check_table(const char* enum_name) {
  SCOPED_TRACE(enum_name);
  const auto rows = names_table<E>();
  EXPECT_EQ(rows.size(), enumerator_count<E>()) << "the table must have one row per enumerator";
  std::set<std::string> seen;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(static_cast<std::size_t>(rows[i].value), i) << "rows in declaration order, row " << i;
    ASSERT_NE(rows[i].name, nullptr);
    EXPECT_FALSE(std::string(rows[i].name).empty()) << "row " << i;
    EXPECT_TRUE(seen.insert(rows[i].name).second) << "duplicate name " << rows[i].name;
    EXPECT_EQ(parse<E>(rows[i].name), rows[i].value) << rows[i].name;
    EXPECT_STREQ(name(rows[i].value), rows[i].name);
  }
  EXPECT_FALSE(parse<E>("")) << "the empty string names nothing";
  EXPECT_STREQ(name(static_cast<E>(rows.size())), "?") << "a value outside the table has no name";
}

TEST(Names, PolicyEnums) {
  check_table<Rounding>("Rounding");
  check_table<Overflow>("Overflow");
  check_table<Subnormals>("Subnormals");
  check_table<Tininess>("Tininess");
  check_table<NanToNoNan>("NanToNoNan");
  check_table<NanStyle>("NanStyle");
  check_table<NanDecode>("NanDecode");
  check_table<UnsignedNegative>("UnsignedNegative");
  check_table<ZeroIntoNoZero>("ZeroIntoNoZero");
}

TEST(Names, ScaleEnums) {
  namespace S = lowbit::scale;
  check_table<S::Scheme>("Scheme");
  check_table<S::ScaleFormat>("ScaleFormat");
  check_table<S::MxRule>("MxRule");
  check_table<S::NonFinite>("NonFinite");
  check_table<S::ZeroScale>("ZeroScale");
  check_table<S::Variant>("Variant");
  check_table<S::Direction>("Direction");
  check_table<S::AmaxNan>("AmaxNan");
  check_table<S::Option>("Option");
}

TEST(Names, TheReflectionSeesEnumerators) {
  // The check above is only as good as is_enumerator: Rounding has nine values, the tenth is not one.
  static_assert(is_enumerator<Rounding::sr_c>());
  static_assert(!is_enumerator<static_cast<Rounding>(9)>());
  static_assert(enumerator_count<Rounding>() == 9);
  static_assert(enumerator_count<Tininess>() == 2);
}

TEST(Names, Spellings) {
  // The command line's spellings (README's policy list).
  EXPECT_EQ(choices<Rounding>(), "rne, rna, rtz, rup, rdn, rto, sr-a, sr-b, sr-c");
  EXPECT_EQ(choices<Overflow>(" "), "satfinite satpropagate nosat");
  EXPECT_EQ(choices<Subnormals>(), "keep, ftz, daz, ftz-daz");
  EXPECT_EQ(parse<Rounding>("sr-b"), Rounding::sr_b);
  EXPECT_FALSE(parse<Rounding>("sr_b"));
  EXPECT_EQ(nth<Overflow>(4), Overflow::satpropagate);  // 4 mod 3 = 1
  // The scheme options as `lowbit quantize` spells them (README "Scaling schemes", the golden suites'
  // recipes).
  namespace S = lowbit::scale;
  EXPECT_EQ(choices<S::Scheme>(), "tensor, delayed, channel, token, block, mx, nvfp4, nvfp4-2d, nvfp4-1level");
  EXPECT_EQ(choices<S::ScaleFormat>(), "f32, pow2, ue8m0-packed");
  EXPECT_EQ(choices<S::MxRule>(), "floor, ceil, even, rceil, rne");
  EXPECT_EQ(choices<S::NonFinite>(), "scale-nan, propagate, amax");
  EXPECT_EQ(choices<S::ZeroScale>(), "kernel, reference");
  EXPECT_EQ(choices<S::Variant>(),
            "standard, fast-math, 4over6, 4over6-mse, torchao, compressed-tensors, modelopt, gguf, transformers, "
            "compressed-tensors-gpu");
  EXPECT_EQ(choices<S::Direction>(), "row, col, both");
  EXPECT_EQ(choices<S::AmaxNan>(), "ignore, propagate");
  EXPECT_EQ(parse<S::Scheme>("nvfp4-2d"), S::Scheme::nvfp4_2d);
  EXPECT_FALSE(parse<S::Scheme>("nvfp4_2d"));
  EXPECT_STREQ(name(S::Option::mx_rule), "scale-rule");
}

}  // namespace
