// Facts written down elsewhere, as data: docs/semantics.md §6's peer test cases, the measured CUDA table
// and the ml_dtypes table of §3, and the rules of §2 that name a result.  Every expected code below is
// copied from (or, for a value the document gives as a number, encoded by hand from) the cited line;
// none is computed by the library.  Each case runs under the profile of the implementation it
// describes, resolved the way `lowbit convert --profile P` resolves it.
#include <cstdlib>

#include "lowbit/convert.hpp"
#include "lowbit/exact.hpp"
#include "lowbit/profile.hpp"
#include "lowbit/registry.hpp"
#include "support.hpp"

namespace lowbit::checks {

namespace {

constexpr int unstated = -1;  // the source does not state the flags
constexpr std::uint64_t any_nan = ~std::uint64_t{0};  // the source says "NaN" without a code

struct Case {
  const char* source;    // where the expected result is written down
  const char* profile;   // nullptr: the built-in defaults
  const char* from;      // "text" (an exact literal) or a source format
  const char* input;     // the literal, or the source code in hex
  const char* to;
  const char* rounding;  // nullptr: the profile's default
  const char* overflow;  // nullptr: the profile's default
  std::uint64_t expected;
  int flags = unstated;
};

constexpr std::uint8_t ux = flag::underflow | flag::inexact;
constexpr std::uint8_t ox = flag::overflow | flag::inexact;

// ---- docs/semantics.md §6 ----------------------------------------------------------------------------
const char* const llvm_e4m3 = "docs/semantics.md §6: LLVM APFloatTest, e4m3 from decimal";
const char* const sat_e4m3 = "docs/semantics.md §6: e4m3 saturating / non-saturating";
const char* const gfloat_e5m2 = "docs/semantics.md §6: gfloat test_round.py, e5m2";
const char* const llvm_e5m2_e4m3 = "docs/semantics.md §6: LLVM APFloatTest ConvertE5M2ToE4M3FN";
const char* const mld_e5m2_e4m3 = "docs/semantics.md §6: ml_dtypes float8_test.cc, e5m2 0x1F -> e4m3";
const char* const mld_f16_e5m2 = "docs/semantics.md §6: ml_dtypes float8_test.cc, f16 -> e5m2";
const char* const e5m2fnuz_dec = "docs/semantics.md §6: e5m2fnuz from decimal";
const char* const torchao_e2m1 = "docs/semantics.md §6: torchao e2m1 (rne); codes from §1's E2M1 value list";
const char* const torchao_e3m2 = "docs/semantics.md §6: torchao e3m2";
const char* const e8m0_up = "docs/semantics.md §6: e8m0 round-up, f32 bits -> code";

const Case section6[] = {
    {llvm_e4m3, "llvm", "text", "448", "e4m3", nullptr, nullptr, 0x7E},
    {llvm_e4m3, "llvm", "text", "464", "e4m3", nullptr, nullptr, 0x7E},
    {llvm_e4m3, "llvm", "text", "465", "e4m3", nullptr, nullptr, any_nan},
    {llvm_e4m3, "llvm", "text", "480", "e4m3", nullptr, nullptr, any_nan},
    {llvm_e4m3, "llvm", "text", "inf", "e4m3", nullptr, nullptr, any_nan},
    {sat_e4m3, "ocp", "text", "500", "e4m3", nullptr, "satfinite", 0x7E},
    {sat_e4m3, "ocp", "text", "-inf", "e4m3", nullptr, "satfinite", 0xFE},
    {sat_e4m3, "ocp", "text", "464", "e4m3", nullptr, "nosat", 0x7E},
    {sat_e4m3, "ocp", "text", "465", "e4m3", nullptr, "nosat", 0x7F},
    {sat_e4m3, "ocp", "text", "-inf", "e4m3", nullptr, "nosat", 0xFF},
    {gfloat_e5m2, "p3109", "text", "61439.9", "e5m2", nullptr, "nosat", 0x7B},
    {gfloat_e5m2, "p3109", "text", "61440", "e5m2", nullptr, "nosat", 0x7C},
    {gfloat_e5m2, "p3109", "text", "61440", "e5m2", nullptr, "satfinite", 0x7B},
    {gfloat_e5m2, "p3109", "text", "inf", "e5m2", nullptr, "satfinite", 0x7B},
    // e5m2 codes of 0x1.0p-10, 0x1.8p-10, 0x1.8p-9, 512, inf: 0x14, 0x16, 0x1A, 0x60, 0x7C (§1: bias 15).
    // e4m3 results 0, 0x1.0p-9, 0x1.0p-8: codes 0x00, 0x01, 0x02 (min subnormal 2^-9).
    {llvm_e5m2_e4m3, "llvm", "e5m2", "0x14", "e4m3", nullptr, nullptr, 0x00, ux},
    {llvm_e5m2_e4m3, "llvm", "e5m2", "0x16", "e4m3", nullptr, nullptr, 0x01},
    {llvm_e5m2_e4m3, "llvm", "e5m2", "0x1A", "e4m3", nullptr, nullptr, 0x02},
    {llvm_e5m2_e4m3, "llvm", "e5m2", "0x60", "e4m3", nullptr, nullptr, any_nan, ox},
    {llvm_e5m2_e4m3, "llvm", "e5m2", "0x7C", "e4m3", nullptr, nullptr, any_nan},
    {mld_e5m2_e4m3, "ml_dtypes", "e5m2", "0x1F", "e4m3", "rne", nullptr, 0x04},
    {mld_e5m2_e4m3, "ml_dtypes", "e5m2", "0x1F", "e4m3", "rtz", nullptr, 0x03},
    {mld_f16_e5m2, "ml_dtypes", "f16", "0x7C00", "e5m2", nullptr, nullptr, 0x7C},
    {mld_f16_e5m2, "ml_dtypes", "f16", "0x7C01", "e5m2", nullptr, nullptr, 0x7E},
    {mld_f16_e5m2, "ml_dtypes", "f16", "0xFC01", "e5m2", nullptr, nullptr, 0xFE},
    {mld_f16_e5m2, "ml_dtypes", "f16", "0x3FFF", "e5m2", "rne", nullptr, 0x40},
    {mld_f16_e5m2, "ml_dtypes", "f16", "0x3FFF", "e5m2", "rtz", nullptr, 0x3F},
    {e5m2fnuz_dec, "llvm", "text", "59392", "e5m2fnuz", nullptr, nullptr, 0x7F},
    {e5m2fnuz_dec, "llvm", "text", "61440", "e5m2fnuz", nullptr, nullptr, 0x80},
    {e5m2fnuz_dec, "llvm", "text", "-0", "e5m2fnuz", nullptr, nullptr, 0x00},
    {torchao_e2m1, "torchao", "text", "0.25", "e2m1", nullptr, nullptr, 0x0},
    {torchao_e2m1, "torchao", "text", "0.75", "e2m1", nullptr, nullptr, 0x2},
    {torchao_e2m1, "torchao", "text", "1.25", "e2m1", nullptr, nullptr, 0x2},
    {torchao_e2m1, "torchao", "text", "1.75", "e2m1", nullptr, nullptr, 0x4},
    {torchao_e2m1, "torchao", "text", "2.5", "e2m1", nullptr, nullptr, 0x4},
    {torchao_e2m1, "torchao", "text", "3.5", "e2m1", nullptr, nullptr, 0x6},
    {torchao_e2m1, "torchao", "text", "5", "e2m1", nullptr, nullptr, 0x6},
    {torchao_e2m1, "torchao", "text", "6.1", "e2m1", nullptr, nullptr, 0x7},
    {torchao_e3m2, "torchao", "text", "29", "e3m2", nullptr, nullptr, 0b011111},
    {torchao_e3m2, "torchao", "text", "26", "e3m2", nullptr, nullptr, 0b011110},
    {torchao_e3m2, "torchao", "text", "0.1251", "e3m2", nullptr, nullptr, 0b000010},
    {torchao_e3m2, "torchao", "text", "0.0314", "e3m2", nullptr, nullptr, 0b000001},
    {torchao_e3m2, "torchao", "text", "0.03", "e3m2", nullptr, nullptr, 0},
    // TE / CUDA: cvt.rp.satfinite.ue8m0; torchao RCEIL differs above 2^127 and for Inf.
    {e8m0_up, "te", "f32", "0x00000000", "e8m0", nullptr, nullptr, 0},
    {e8m0_up, "te", "f32", "0x00400000", "e8m0", nullptr, nullptr, 0},
    {e8m0_up, "te", "f32", "0x00400001", "e8m0", nullptr, nullptr, 1},
    {e8m0_up, "te", "f32", "0x007FFFFF", "e8m0", nullptr, nullptr, 1},
    {e8m0_up, "te", "f32", "0x3F7FFFFF", "e8m0", nullptr, nullptr, 127},
    {e8m0_up, "te", "f32", "0x3F800000", "e8m0", nullptr, nullptr, 127},
    {e8m0_up, "te", "f32", "0x3F800001", "e8m0", nullptr, nullptr, 128},
    {e8m0_up, "te", "f32", "0x7F000000", "e8m0", nullptr, nullptr, 254},
    {e8m0_up, "te", "f32", "0x7F000001", "e8m0", nullptr, nullptr, 254},
    {e8m0_up, "te", "f32", "0x7F800000", "e8m0", nullptr, nullptr, 254},
    {e8m0_up, "cuda", "f32", "0x00400001", "e8m0", "rup", "satfinite", 1},
    {e8m0_up, "cuda", "f32", "0x3F800001", "e8m0", "rup", "satfinite", 128},
    {e8m0_up, "cuda", "f32", "0x7F000001", "e8m0", "rup", "satfinite", 254},
    {e8m0_up, "cuda", "f32", "0x7F800000", "e8m0", "rup", "satfinite", 254},
    {e8m0_up, "torchao", "f32", "0x00000000", "e8m0", "rup", nullptr, 0},
    {e8m0_up, "torchao", "f32", "0x00400001", "e8m0", "rup", nullptr, 1},
    {e8m0_up, "torchao", "f32", "0x3F7FFFFF", "e8m0", "rup", nullptr, 127},
    {e8m0_up, "torchao", "f32", "0x3F800001", "e8m0", "rup", nullptr, 128},
    {e8m0_up, "torchao", "f32", "0x7F000000", "e8m0", "rup", nullptr, 254},
    {e8m0_up, "torchao", "f32", "0x7F000001", "e8m0", "rup", nullptr, 255},
    {e8m0_up, "torchao", "f32", "0x7F800000", "e8m0", "rup", nullptr, 255},
};

// ---- docs/semantics.md §3: the CUDA 13.0 table (f32 inputs) --------------------------------------------
const char* const cuda_table = "docs/semantics.md §3: CUDA 13.0 toolkit table";
struct Column {
  const char* to;
  const char* rounding;
  const char* overflow;
};
const Column cuda_columns[] = {{"e4m3", nullptr, "satfinite"}, {"e4m3", nullptr, "nosat"},
                               {"e5m2", nullptr, "satfinite"}, {"e5m2", nullptr, "nosat"},
                               {"e2m1", nullptr, nullptr},     {"e2m3", nullptr, nullptr},
                               {"e3m2", nullptr, nullptr},     {"e8m0", "rtz", nullptr},
                               {"e8m0", "rup", nullptr}};
constexpr std::int64_t dash = -1;
struct Row {
  const char* input;  // f32 bits
  const char* what;
  std::int64_t codes[9];
};
const Row cuda_rows[] = {
    {"0x7F800000", "+inf", {0x7e, 0x7f, 0x7b, 0x7c, 0x7, 0x1f, 0x1f, 0xfe, 0xfe}},
    {"0xFF800000", "-inf", {0xfe, 0xff, 0xfb, 0xfc, 0xf, 0x3f, 0x3f, 0xfe, 0xfe}},
    {"0x7FC00000", "NaN", {0x7f, 0x7f, 0x7f, 0x7f, 0x7, 0x1f, 0x1f, 0xff, 0xff}},
    {"0xFFC00000", "-NaN", {0x7f, 0x7f, 0x7f, 0x7f, 0x7, 0x1f, 0x1f, 0xff, 0xff}},
    {"0x80000000", "-0", {0x80, 0x80, 0x80, 0x80, 0x8, 0x20, 0x20, 0x00, 0x00}},
    {"0x43F00000", "480", {0x7e, 0x7f, dash, dash, dash, dash, dash, dash, dash}},
    {"0x3E800000", "0.25", {dash, dash, dash, dash, 0x0, dash, dash, 0x7d, 0x7d}},
    {"0x3E99999A", "0.3", {0x2a, 0x2a, 0x35, 0x35, 0x1, 0x02, 0x05, 0x7d, 0x7e}},
    {"0xC2C80000", "-100", {0xec, 0xec, 0xd6, 0xd6, 0xf, 0x3f, 0x3f, 0x85, 0x86}},
};

// ---- docs/semantics.md §3: the ml_dtypes table (f32 inputs; "sat" = the saturating conversion) -----------
const char* const mld_table = "docs/semantics.md §3: ml_dtypes table (commit b793a6e)";
const char* const mld_issue = "docs/semantics.md §3: ml_dtypes issue 400";
const Case mldtypes_cases[] = {
    {mld_table, "ml_dtypes", "f32", "0x3FC00000", "e8m0", nullptr, nullptr, 0x80},  // 1.5: a tie rounds up
    {mld_table, "ml_dtypes", "f32", "0x40400000", "e8m0", nullptr, nullptr, 0x81},  // 3
    {mld_table, "ml_dtypes", "f32", "0x40C00000", "e8m0", nullptr, nullptr, 0x82},  // 6
    {mld_table, "ml_dtypes", "f32", "0x3F400000", "e8m0", nullptr, nullptr, 0x7F},  // 0.75
    {mld_table, "ml_dtypes", "f32", "0x3FC00000", "e8m0", nullptr, "satfinite", 0x80},
    {mld_table, "ml_dtypes", "f32", "0x40400000", "e8m0", nullptr, "satfinite", 0x81},
    {mld_table, "ml_dtypes", "f32", "0x40C00000", "e8m0", nullptr, "satfinite", 0x82},
    {mld_table, "ml_dtypes", "f32", "0x3F400000", "e8m0", nullptr, "satfinite", 0x7F},
    {mld_table, "ml_dtypes", "f32", "0xBF800000", "e8m0", nullptr, nullptr, 0xFF},  // -1
    {mld_table, "ml_dtypes", "f32", "0x00000000", "e8m0", nullptr, nullptr, 0xFF},  // 0
    {mld_table, "ml_dtypes", "f32", "0x80000000", "e8m0", nullptr, nullptr, 0xFF},  // -0
    {mld_table, "ml_dtypes", "f32", "0xBF800000", "e8m0", nullptr, "satfinite", 0x00},
    {mld_table, "ml_dtypes", "f32", "0x00000000", "e8m0", nullptr, "satfinite", 0x00},
    {mld_table, "ml_dtypes", "f32", "0x80000000", "e8m0", nullptr, "satfinite", 0x00},
    {mld_table, "ml_dtypes", "f32", "0x7FC00000", "e8m0", nullptr, nullptr, 0xFF},  // NaN
    {mld_table, "ml_dtypes", "f32", "0x7FC00000", "e8m0", nullptr, "satfinite", 0xFF},
    {mld_table, "ml_dtypes", "f32", "0x7FC00000", "e2m1", nullptr, nullptr, 0x8},
    {mld_table, "ml_dtypes", "f32", "0x7FC00000", "e2m3", nullptr, nullptr, 0x20},
    {mld_table, "ml_dtypes", "f32", "0x7FC00000", "e3m2", nullptr, nullptr, 0x20},
    {mld_table, "ml_dtypes", "f32", "0xFFC00000", "e2m1", nullptr, nullptr, 0x0},  // -NaN
    {mld_table, "ml_dtypes", "f32", "0xFFC00000", "e2m3", nullptr, nullptr, 0x00},
    {mld_table, "ml_dtypes", "f32", "0xFFC00000", "e3m2", nullptr, nullptr, 0x00},
    {mld_table, "ml_dtypes", "f32", "0x7F800000", "e8m0", nullptr, nullptr, 0xFF},  // +Inf
    {mld_table, "ml_dtypes", "f32", "0x7F800000", "e8m0", nullptr, "satfinite", 0xFF},
    {mld_table, "ml_dtypes", "f32", "0x7F800000", "e2m1", nullptr, nullptr, 0x7},
    {mld_table, "ml_dtypes", "f32", "0x7F800000", "e2m3", nullptr, nullptr, 0x1F},
    {mld_table, "ml_dtypes", "f32", "0x7F800000", "e3m2", nullptr, nullptr, 0x1F},
    {mld_table, "ml_dtypes", "f32", "0x7F800000", "e4m3fnuz", nullptr, nullptr, 0x80},
    {mld_table, "ml_dtypes", "f32", "0x7F800000", "e5m2fnuz", nullptr, nullptr, 0x80},
    {mld_table, "ml_dtypes", "f32", "0x000116C2", "e8m0", nullptr, nullptr, 0x00},  // 1e-40
    {mld_table, "ml_dtypes", "f32", "0x000116C2", "e8m0", nullptr, "satfinite", 0x00},
    {mld_table, "ml_dtypes", "f32", "0x7F61B1E6", "e8m0", nullptr, nullptr, 0xFF},  // 3e38
    {mld_table, "ml_dtypes", "f32", "0x7F61B1E6", "e8m0", nullptr, "satfinite", 0xFE},
    {mld_table, "ml_dtypes", "f32", "0x43E00000", "e4m3fnuz", nullptr, nullptr, 0x80},  // 448
    {mld_table, "ml_dtypes", "f32", "0x43E00000", "e5m2fnuz", nullptr, nullptr, 0x63},
    {mld_table, "ml_dtypes", "f32", "0x80000000", "e4m3fnuz", nullptr, nullptr, 0x00},  // -0
    {mld_table, "ml_dtypes", "f32", "0x80000000", "e5m2fnuz", nullptr, nullptr, 0x00},
    // [1000, 448, 464, 465, -1000] -> [nan, 448, 448, nan, nan]
    {mld_issue, "ml_dtypes", "f32", "0x447A0000", "e4m3", nullptr, nullptr, any_nan},
    {mld_issue, "ml_dtypes", "f32", "0x43E00000", "e4m3", nullptr, nullptr, 0x7E},
    {mld_issue, "ml_dtypes", "f32", "0x43E80000", "e4m3", nullptr, nullptr, 0x7E},
    {mld_issue, "ml_dtypes", "f32", "0x43E88000", "e4m3", nullptr, nullptr, any_nan},
    {mld_issue, "ml_dtypes", "f32", "0xC47A0000", "e4m3", nullptr, nullptr, any_nan},
};

// ---- §3 microxcaling, §2 rules with a named result, and the built-in defaults of the foundation issue --
const char* const mx_block = "docs/semantics.md §3: microxcaling MX-E4M3 block, scale 2^0, half away from zero";
const char* const mx_rne = "docs/semantics.md §3: the same block under rne gives 384 for 400";
const char* const overflow_rules = "docs/semantics.md §2: overflow thresholds and nosat rules";
const char* const corner = "docs/semantics.md §2 corner rules; foundation issue §3 defaults and flag rules";
const Case rule_cases[] = {
    // Elements 448, 448, 416, -448, -448, -448, 2^-6, -2^-6 in e4m3 (§1: bias 7).
    {mx_block, "microxcaling", "text", "485", "e4m3", nullptr, nullptr, 0x7E},
    {mx_block, "microxcaling", "text", "475", "e4m3", nullptr, nullptr, 0x7E},
    {mx_block, "microxcaling", "text", "400", "e4m3", nullptr, nullptr, 0x7D},
    {mx_block, "microxcaling", "text", "-485", "e4m3", nullptr, nullptr, 0xFE},
    {mx_block, "microxcaling", "text", "-475", "e4m3", nullptr, nullptr, 0xFE},
    {mx_block, "microxcaling", "text", "-450", "e4m3", nullptr, nullptr, 0xFE},
    {mx_block, "microxcaling", "text", "0x1p-6", "e4m3", nullptr, nullptr, 0x08},
    {mx_block, "microxcaling", "text", "-0x1p-6", "e4m3", nullptr, nullptr, 0x88},
    {mx_rne, "ocp", "text", "400", "e4m3", nullptr, nullptr, 0x7C},
    {overflow_rules, nullptr, "text", "464", "e4m3", nullptr, nullptr, 0x7E, flag::inexact},
    {overflow_rules, nullptr, "text", "464.0001", "e4m3", nullptr, nullptr, any_nan, ox},
    {overflow_rules, nullptr, "text", "61440", "e5m2", nullptr, nullptr, 0x7C, ox},
    {overflow_rules, nullptr, "text", "61439.99", "e5m2", nullptr, nullptr, 0x7B, flag::inexact},
    {overflow_rules, nullptr, "text", "1e6", "e5m2", "rtz", "nosat", 0x7B, ox},
    {overflow_rules, nullptr, "text", "1e6", "e5m2", "rup", "nosat", 0x7C, ox},
    {overflow_rules, nullptr, "text", "-1e6", "e5m2", "rup", "nosat", 0xFB, ox},
    {overflow_rules, nullptr, "text", "-1e6", "e5m2", "rdn", "nosat", 0xFC, ox},
    {overflow_rules, nullptr, "text", "1e6", "e5m2", "rdn", "nosat", 0x7B, ox},
    {overflow_rules, nullptr, "text", "inf", "e5m2", nullptr, "satfinite", 0x7B},
    {overflow_rules, nullptr, "text", "-inf", "e5m2", nullptr, "satpropagate", 0xFC, 0},
    {overflow_rules, nullptr, "text", "1e6", "e5m2", nullptr, "satpropagate", 0x7B, ox},
    {overflow_rules, nullptr, "text", "100", "e2m1", nullptr, "nosat", 0x7, ox},  // no Inf, no NaN: saturates
    {overflow_rules, nullptr, "text", "inf", "e4m3", nullptr, "nosat", any_nan, ox},  // ±Inf into no Inf
    // A round-to-odd result beyond max is an overflow (e4m3: 448 with a remainder).
    {corner, "p3109", "text", "449", "e4m3", "rto", "satfinite", 0x7E, ox},
    {corner, "p3109", "text", "449", "e4m3", "rto", "nosat", any_nan, ox},
    // e8m0 rne: a tie goes to the even biased exponent (1.5 -> 2^1 = 0x80, 3 -> 2^1, 6 -> 2^3 = 0x82).
    {corner, nullptr, "text", "1.5", "e8m0", "rne", nullptr, 0x80},
    {corner, nullptr, "text", "3", "e8m0", "rne", nullptr, 0x80},
    {corner, nullptr, "text", "6", "e8m0", "rne", nullptr, 0x82},
    // NaN into a format without NaN: +max with invalid.
    {corner, nullptr, "text", "nan", "e2m1", nullptr, nullptr, 0x7, flag::invalid},
    {corner, nullptr, "text", "-nan", "e2m3", nullptr, nullptr, 0x1F, flag::invalid},
    // Underflow is tiny and inexact; an exact subnormal raises nothing.
    {corner, nullptr, "text", "0x1p-9", "e4m3", nullptr, nullptr, 0x01, 0},
    {corner, nullptr, "text", "0x1.8p-9", "e4m3", nullptr, nullptr, 0x02, ux},
};

// The policy a case names, or an error.
std::optional<Resolved> policy_of(const Case& c, const Format& to, std::string& error) {
  PolicyRequest req;
  if (c.rounding) req.rounding = parse<Rounding>(c.rounding);
  if (c.overflow) req.overflow = parse<Overflow>(c.overflow);
  const Profile* prof = c.profile ? find_profile(c.profile) : nullptr;
  if (c.profile && !prof) {
    error = std::string("unknown profile ") + c.profile;
    return std::nullopt;
  }
  return resolve(prof, to, req, error);
}

std::string case_text(const Case& c, const Policy& p) {
  return std::string(c.from) + " " + c.input + " -> " + c.to + " [" + (c.profile ? c.profile : "built-in") + ": " +
         policy_text(p) + "]";
}

// One case, the check's input `input`: its comparisons are steps 0, 1, ... of that input.
void run_case(Recorder& rec, std::uint64_t input, const Case& c) {
  std::uint32_t step = 0;
  auto fail = [&](std::string text) { rec.mismatch({input, step}, [&] { return std::move(text); }); };
  const Format* to = find_format(c.to);
  std::string error;
  const std::optional<Resolved> r = to ? policy_of(c, *to, error) : std::nullopt;
  if (!r) {
    rec.cases(1);
    fail(std::string(c.from) + " " + c.input + " -> " + c.to + " [" + (c.profile ? c.profile : "built-in") +
         "]: the policy does not resolve: " + (to ? error : "unknown format") + " (" + c.source + ")");
    return;
  }
  const Format& t = *r->target;
  const Policy& p = r->policy;
  auto judge = [&](const Result& got, const char* path) {
    rec.cases(1);
    const bool code_ok = c.expected == any_nan ? t.is_nan_code(got.code) : got.code == c.expected;
    const bool flags_ok = c.flags == unstated || got.flags == static_cast<std::uint8_t>(c.flags);
    if (!code_ok || !flags_ok) {
      std::string want = c.expected == any_nan ? std::string("a NaN of ") + t.name : code_and_value(t, c.expected);
      if (c.flags != unstated) want += " flags " + flags_text(static_cast<std::uint8_t>(c.flags));
      fail(case_text(c, p) + ": expected " + want + " (" + c.source + "), actual " + result_text(t, got) + " (" + path +
           ")");
    }
    ++step;
  };
  if (std::string_view(c.from) == "text") {
    const std::optional<exact::Value> v = exact::parse(c.input);
    if (!v) {
      rec.cases(1);
      fail(std::string("unparsable literal ") + c.input);
      return;
    }
    judge(exact::round(t, *v, p), "exact path");
    // Where the literal is exactly an f64, the fast path sees it too.
    const Result wide = exact::round(formats::f64, *v, Policy{});
    if ((wide.flags & flag::inexact) == 0 && v->cls != ValueClass::nan)
      judge(convert(formats::f64, wide.code, t, p), "fast path from the exact f64");
    return;
  }
  const Format* from = find_format(c.from);
  const std::uint64_t code = std::strtoull(c.input, nullptr, 16);
  judge(exact::convert(*from, code, t, p), "exact path");
  judge(convert(*from, code, t, p), "fast path");
}

// A check over a list of cases: input i is the i-th case.
Check case_check(std::string name, std::string description, std::function<std::vector<Case>()> cases) {
  return {std::move(name),
          Tier::quick,
          std::move(description),
          "case",
          [cases] { return static_cast<std::uint64_t>(cases().size()); },
          [cases](Range r, const Progress&) {
            const std::vector<Case> all = cases();
            Recorder rec;
            for (std::uint64_t i = r.begin; i < r.end; ++i) run_case(rec, i, all[i]);
            return rec.outcome();
          }};
}

std::vector<Case> table_cases(std::span<const Case> table) { return {table.begin(), table.end()}; }

// The CUDA table as cases: row by row, each column with a code.
std::vector<Case> cuda_table_cases() {
  std::vector<Case> v;
  for (const Row& row : cuda_rows) {
    for (std::size_t k = 0; k < std::size(cuda_columns); ++k) {
      if (row.codes[k] == dash) continue;
      const Column& col = cuda_columns[k];
      v.push_back({cuda_table, "cuda", "f32", row.input, col.to, col.rounding, col.overflow,
                   static_cast<std::uint64_t>(row.codes[k])});
    }
  }
  return v;
}

}  // namespace

std::vector<Check> semantics_checks() {
  std::vector<Check> v;
  v.push_back(case_check("semantics-peer-cases",
                         "docs/semantics.md §6: the peers' own test cases (LLVM, ml_dtypes, gfloat, torchao, TE), each "
                         "under its profile",
                         [] { return table_cases(section6); }));
  v.push_back(case_check("semantics-cuda-table",
                         "docs/semantics.md §3: the CUDA 13.0 toolkit table under --profile cuda", cuda_table_cases));
  v.push_back(case_check("semantics-ml_dtypes-table",
                         "docs/semantics.md §3: the ml_dtypes table and issue 400 under --profile ml_dtypes",
                         [] { return table_cases(mldtypes_cases); }));
  v.push_back(case_check("semantics-rules",
                         "docs/semantics.md §2-3 rules that name a result: overflow thresholds and nosat directions, "
                         "round to odd at max, e8m0 ties, NaN into formats without NaN, microxcaling half-away",
                         [] { return table_cases(rule_cases); }));
  return v;
}

}  // namespace lowbit::checks
