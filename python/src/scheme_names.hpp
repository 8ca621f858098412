// Name tables (lowbit/names.hpp) for the scaling-scheme enums of lowbit/scale.hpp, spelled as
// `lowbit quantize` spells its option values (tools/lowbit/quantize_cmd.cpp).  The library has no tables for
// these enums yet; when it gains them beside the enums, these go (a second names_of is a compile error, so
// the two cannot drift apart silently).
#pragma once
#include "lowbit/named.hpp"
#include "lowbit/scale.hpp"

namespace lowbit::scale {

inline constexpr Named<MxRule> mx_rule_names[] = {
    {MxRule::floor, "floor", "OCP MX v1.0 §6.3 (torchao FLOOR)"},
    {MxRule::ceil, "ceil", "torchao CEIL"},
    {MxRule::even, "even", "torchao EVEN"},
    {MxRule::rceil, "rceil", "TE / cuBLAS / torchao RCEIL"},
    {MxRule::rne, "rne", "as rceil, ties to even"},
};
constexpr const auto& names_of(MxRule) { return mx_rule_names; }

inline constexpr Named<ScaleFormat> scale_format_names[] = {
    {ScaleFormat::f32, "f32", "f32 scales"},
    {ScaleFormat::pow2, "pow2", "power-of-two f32 scales"},
    {ScaleFormat::ue8m0_packed, "ue8m0-packed", "e8m0 scales, four to a 32-bit word"},
};
constexpr const auto& names_of(ScaleFormat) { return scale_format_names; }

inline constexpr Named<NonFinite> nonfinite_names[] = {
    {NonFinite::scale_nan, "scale-nan", "the block's scale is NaN"},
    {NonFinite::propagate, "propagate", "the scale from the finite elements"},
    {NonFinite::amax, "amax", "the scale rule sees the fmaxf amax"},
};
constexpr const auto& names_of(NonFinite) { return nonfinite_names; }

inline constexpr Named<ZeroScale> zero_scale_names[] = {
    {ZeroScale::kernel, "kernel", "FLT_MAX element multiplier (TE kernels)"},
    {ZeroScale::reference, "reference", "0 (TE's C++ test reference)"},
};
constexpr const auto& names_of(ZeroScale) { return zero_scale_names; }

inline constexpr Named<Variant> variant_names[] = {
    {Variant::standard, "standard", "two-level NVFP4"},
    {Variant::fast_math, "fast-math", "bf16 element multiplier"},
    {Variant::four_over_six, "4over6", "per block map to 4 or 6, least absolute error"},
    {Variant::four_over_six_mse, "4over6-mse", "per block map to 4 or 6, least squared error"},
};
constexpr const auto& names_of(Variant) { return variant_names; }

}  // namespace lowbit::scale
