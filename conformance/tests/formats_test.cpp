// Format rows and the registry: names and aliases (case-insensitive), the P3109 family, parametric
// rows, and the derived constants.  Expected values come from docs/semantics.md §1's table and the P3109
// interim report's definitions (bias floor(2^(K-P-1)), NaN at 0x80, +Inf at 0x7F), not from the code.
#include <gtest/gtest.h>

#include "lowbit/exact.hpp"
#include "lowbit/format.hpp"
#include "lowbit/registry.hpp"

namespace {

using namespace lowbit;

TEST(Registry, BuiltinNamesAndAliasesAreCaseInsensitive) {
  struct {
    const char* name;
    const Format* want;
  } const cases[] = {
      {"e4m3", &formats::e4m3},           {"float8_e4m3fn", &formats::e4m3},  {"Float8E4M3FN", &formats::e4m3},
      {"FLOAT8_E4M3FN", &formats::e4m3},  {"torch.float8_e4m3fn", &formats::e4m3},
      {"float8_e5m2", &formats::e5m2},    {"Float8E5M2", &formats::e5m2},     {"float8_e4m3fnuz", &formats::e4m3fnuz},
      {"Float8E5M2FNUZ", &formats::e5m2fnuz}, {"float8_e4m3b11fnuz", &formats::e4m3b11fnuz},
      {"float8_e4m3", &formats::e4m3ieee}, {"float8_e3m4", &formats::e3m4},   {"float6_e2m3fn", &formats::e2m3},
      {"Float6E3M2FN", &formats::e3m2},   {"float4_e2m1fn", &formats::e2m1},  {"Float4E2M1FN", &formats::e2m1},
      {"float8_e8m0fnu", &formats::e8m0}, {"Float8E8M0FNU", &formats::e8m0},  {"bfloat16", &formats::bf16},
      {"BF16", &formats::bf16},           {"half", &formats::f16},            {"Float16", &formats::f16},
      {"float32", &formats::f32},         {"DOUBLE", &formats::f64},          {"tf32", &formats::tf32},
      {"ue4m3", &formats::ue4m3},         {"int8", &formats::int8},
  };
  for (const auto& c : cases) EXPECT_EQ(find_format(c.name), c.want) << c.name;
}

TEST(Registry, UnknownNames) {
  for (const char* n : {"", "e4m3x", "float9", "binary8p9se", "binary8p8se", "binary8p3sx", "e0m3", "e4m3-weird",
                        "fp4x", "e4m3b"})
    EXPECT_EQ(find_format(n), nullptr) << n;
}

TEST(Registry, EveryBuiltinRowIsListed) {
  std::size_t n = 0;
  for (const FormatEntry& e : builtin_format_entries()) {
    EXPECT_EQ(find_format(e.format->name), e.format);
    for (std::string_view a : e.aliases) EXPECT_EQ(find_format(a), e.format) << a;
    ++n;
  }
  EXPECT_EQ(n, std::size(formats::builtin));
}

// P3109 interim report v4.0: binaryKpP{s,u}{e,f}.
TEST(Registry, P3109Family) {
  const Format* se = find_format("binary8p3se");
  ASSERT_NE(se, nullptr);
  EXPECT_EQ(find_format("BINARY8P3SE"), se);
  EXPECT_EQ(find_format("p3109_k8p3se"), se);  // gfloat's spelling
  EXPECT_EQ(se->bits, 8);
  EXPECT_EQ(se->mantissa_bits, 2);
  EXPECT_EQ(se->bias, 16);  // floor(2^(8-3-1))
  EXPECT_TRUE(se->is_nan_code(0x80));
  EXPECT_FALSE(se->is_nan_code(0x00));
  EXPECT_TRUE(se->is_inf_code(0x7F));
  EXPECT_TRUE(se->is_inf_code(0xFF));
  EXPECT_EQ(exact::code_text(*se, 0x7E), "49152");  // 1.5 * 2^(31-16)
  EXPECT_EQ(exact::code_text(*se, 0x01), "0.00000762939453125");  // 2^-17

  // docs/semantics.md §1: binary8p4se has bias 8, max 224, min subnormal 2^-10.
  const Format* p4e = find_format("binary8p4se");
  ASSERT_NE(p4e, nullptr);
  EXPECT_EQ(p4e->bias, 8);
  EXPECT_EQ(exact::code_text(*p4e, p4e->max_finite_magnitude()), "224");
  EXPECT_EQ(exact::code_text(*p4e, 0x01), "0.0009765625");

  // The finite variant keeps 0x7F as a number: 1.875 * 2^7 = 240.
  const Format* sf = find_format("binary8p4sf");
  ASSERT_NE(sf, nullptr);
  EXPECT_FALSE(sf->has_inf());
  EXPECT_EQ(exact::code_text(*sf, 0x7F), "240");
  EXPECT_TRUE(sf->is_nan_code(0x80));

  // Unsigned: bias 2^(K-P), NaN at 2^K - 1, +Inf just below it in the extended variant.
  const Format* ue = find_format("binary8p3ue");
  ASSERT_NE(ue, nullptr);
  EXPECT_FALSE(ue->is_signed());
  EXPECT_EQ(ue->bias, 32);
  EXPECT_TRUE(ue->is_nan_code(0xFF));
  EXPECT_TRUE(ue->is_inf_code(0xFE));
}

TEST(Registry, ParametricRows) {
  const Format* f = find_format("e3m4b5-fn");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(find_format("E3M4B5-FN"), f);
  EXPECT_EQ(f->exponent_bits, 3);
  EXPECT_EQ(f->mantissa_bits, 4);
  EXPECT_EQ(f->bias, 5);
  EXPECT_TRUE(f->is_nan_code(0x7F));
  EXPECT_TRUE(f->is_nan_code(0xFF));
  EXPECT_FALSE(f->has_inf());
  EXPECT_EQ(exact::code_text(*f, 0x7E), "7.5");          // (1 + 14/16) * 2^(7-5)
  EXPECT_EQ(exact::code_text(*f, 0x10), "0.0625");       // min normal 2^(1-5)
  EXPECT_EQ(exact::code_text(*f, 0x01), "0.00390625");   // min subnormal 2^(1-5-4)
  // Default bias 2^(E-1)-1 and IEEE specials: e5m2 spelled parametrically has e5m2's values.
  const Format* g = find_format("e5m2");
  EXPECT_EQ(g, &formats::e5m2);
  const Format* h = find_format("e5m10-ieee");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->bias, 15);
  EXPECT_EQ(exact::code_text(*h, 0x7BFF), "65504");  // binary16's max
  EXPECT_TRUE(h->is_inf_code(0x7C00));
  const Format* u = find_format("e4m3b7u-fn");
  ASSERT_NE(u, nullptr);
  EXPECT_FALSE(u->is_signed());
  EXPECT_EQ(exact::code_text(*u, 0x7E), "448");
  EXPECT_EQ(find_format("e4m3u-fnuz"), nullptr);  // fnuz needs a sign bit to put NaN on
}

// docs/semantics.md §1's table: max finite, min normal, min subnormal as exact decimals.
TEST(Format, DerivedConstantsMatchTheTable) {
  struct Row {
    const Format* f;
    const char* max;
    std::uint64_t min_normal_code;
    const char* min_normal;
    const char* min_subnormal;
  };
  const Row rows[] = {
      {&formats::f16, "65504", 0x0400, "0.00006103515625", "0.000000059604644775390625"},
      {&formats::e4m3, "448", 0x08, "0.015625", "0.001953125"},
      {&formats::e5m2, "57344", 0x04, "0.00006103515625", "0.0000152587890625"},
      {&formats::e4m3fnuz, "240", 0x08, "0.0078125", "0.0009765625"},
      {&formats::e5m2fnuz, "57344", 0x04, "0.000030517578125", "0.00000762939453125"},
      {&formats::e4m3b11fnuz, "30", 0x08, "0.0009765625", "0.0001220703125"},
      {&formats::e4m3ieee, "240", 0x08, "0.015625", "0.001953125"},
      {&formats::e3m4, "15.5", 0x10, "0.25", "0.015625"},
      {&formats::e2m3, "7.5", 0x08, "1", "0.125"},
      {&formats::e3m2, "28", 0x04, "0.25", "0.0625"},
      {&formats::e2m1, "6", 0x2, "1", "0.5"},
      {&formats::ue4m3, "448", 0x08, "0.015625", "0.001953125"},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.f->name);
    EXPECT_EQ(exact::code_text(*r.f, r.f->max_finite_magnitude()), r.max);
    EXPECT_EQ(exact::code_text(*r.f, r.min_normal_code), r.min_normal);
    EXPECT_EQ(exact::code_text(*r.f, 0x01 << r.f->code_shift), r.min_subnormal);
  }
  // e8m0: 2^127 at 0xFE, 2^-127 at 0x00, NaN at 0xFF.
  EXPECT_EQ(formats::e8m0.max_finite_magnitude(), 0xFEu);
  EXPECT_EQ(exact::code_text(formats::e8m0, 0x7F), "1");
  EXPECT_EQ(exact::code_text(formats::e8m0, 0xFF), "nan");
  EXPECT_EQ(exact::code_text(formats::e8m0, 0x80), "2");
  // int8 (MXINT8): two's complement with scale 2^-6; 0x80 is -2, 0x7F is 127/64.
  EXPECT_EQ(exact::code_text(formats::int8, 0x80), "-2");
  EXPECT_EQ(exact::code_text(formats::int8, 0x7F), "1.984375");
  EXPECT_EQ(exact::code_text(formats::int8, 0xFF), "-0.015625");
  // NaN and Inf codes of §1.
  EXPECT_TRUE(formats::e4m3.is_nan_code(0x7F) && formats::e4m3.is_nan_code(0xFF));
  EXPECT_FALSE(formats::e4m3.has_inf());
  for (std::uint64_t c : {0x7Du, 0x7Eu, 0x7Fu, 0xFDu, 0xFEu, 0xFFu}) EXPECT_TRUE(formats::e5m2.is_nan_code(c));
  EXPECT_TRUE(formats::e5m2.is_inf_code(0x7C) && formats::e5m2.is_inf_code(0xFC));
  EXPECT_TRUE(formats::e4m3ieee.is_inf_code(0x78) && formats::e4m3ieee.is_inf_code(0xF8));
  for (const Format* f : {&formats::e4m3fnuz, &formats::e5m2fnuz, &formats::e4m3b11fnuz}) {
    EXPECT_TRUE(f->is_nan_code(0x80)) << f->name;
    EXPECT_FALSE(f->has_negative_zero()) << f->name;
  }
  for (const Format* f : {&formats::e2m1, &formats::e2m3, &formats::e3m2}) {
    EXPECT_FALSE(f->has_nan()) << f->name;
    EXPECT_FALSE(f->has_inf()) << f->name;
  }
  EXPECT_TRUE(formats::ue4m3.is_nan_code(0x7F));
  // tf32 lives in the f32 layout with the low 13 bits zero.
  EXPECT_EQ(exact::code_text(formats::tf32, 0x3F802000), "1.0009765625");
  EXPECT_FALSE(formats::tf32.valid_code(0x3F801000));
}

// Decoding by hand-enumerated E2M1 values (docs/semantics.md §1: 0, 0.5, 1, 1.5, 2, 3, 4, 6).
TEST(Format, E2M1Values) {
  const char* values[] = {"0", "0.5", "1", "1.5", "2", "3", "4", "6"};
  for (std::uint64_t c = 0; c < 8; ++c) {
    EXPECT_EQ(exact::code_text(formats::e2m1, c), values[c]);
    std::string negative(1, '-');
    negative += c == 0 ? "0" : values[c];
    EXPECT_EQ(exact::code_text(formats::e2m1, c | 8), negative);
  }
}

}  // namespace
