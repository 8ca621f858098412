// The reference of a contract's activation steps (gelu, silu): the function's value at an f32 argument,
// correctly rounded to f32 through MPFR, and the ulp distance a kernel's approximate result is held to.
//
// Kernels compute GELU and SiLU with approximate functions (tanhf, erff, __expf, fast reciprocals), so no
// bit-exact reference exists for them; the contract states a tolerance in ulps of the correctly rounded
// value instead (docs/contract.md "Activations").  Each function is evaluated in forms that do not cancel:
//   GELU (erf)   x·Φ(x)                         = x · erfc(-x/√2) / 2
//   GELU (tanh)  0.5·x·(1 + tanh(u)), u = √(2/π)·(x + 0.044715·x³)  = x / (1 + e^(-2u))
//   SiLU         x · sigmoid(x)                 = x / (1 + e^(-x))
// at 256 bits, then rounded once to f32 (mpfr_get_flt, nearest even, subnormals included: the MPFR
// manual's "Conversion Functions").  For a nonzero finite f32 x every value here is transcendental, so it is
// never within 2^-256 of a rounding boundary of f32 in practice, and the one rounding is the correct one.
#include <mpfr.h>

#include <bit>
#include <cmath>

#include "lowbit/contract.hpp"

namespace lowbit::contract {

namespace {

constexpr mpfr_prec_t precision = 256;
constexpr std::uint32_t canonical_nan = 0x7FFFFFFFu;  // the GPU's NaN of an f32 operation (gemm.hpp)

// RAII for MPFR variables.
struct Real {
  mpfr_t v;
  Real() { mpfr_init2(v, precision); }
  ~Real() { mpfr_clear(v); }
  Real(const Real&) = delete;
  Real& operator=(const Real&) = delete;
};

// x / (1 + e^(-t)) for the argument t already in `t`.
void over_one_plus_exp_minus(mpfr_t out, const mpfr_t x, const mpfr_t t) {
  Real e;
  mpfr_neg(e.v, t, MPFR_RNDN);
  mpfr_exp(e.v, e.v, MPFR_RNDN);
  mpfr_add_ui(e.v, e.v, 1, MPFR_RNDN);
  mpfr_div(out, x, e.v, MPFR_RNDN);
}

}  // namespace

std::uint32_t activation_f32(StepKind kind, GeluForm form, std::uint32_t bits) {
  const float f = std::bit_cast<float>(bits);
  if (std::isnan(f)) return canonical_nan;
  // The limits: +Inf at +Inf; at -Inf each function tends to 0 from below.
  if (std::isinf(f)) return f > 0 ? bits : 0x80000000u;
  // ±0 gives the same zero (x times a positive factor).
  if (f == 0) return bits;
  Real x, t, out;
  mpfr_set_flt(x.v, f, MPFR_RNDN);  // exact
  if (kind == StepKind::silu) {
    over_one_plus_exp_minus(out.v, x.v, x.v);
  } else if (form == GeluForm::erf) {
    // x · erfc(-x / √2) / 2
    Real root2;
    mpfr_sqrt_ui(root2.v, 2, MPFR_RNDN);
    mpfr_div(t.v, x.v, root2.v, MPFR_RNDN);
    mpfr_neg(t.v, t.v, MPFR_RNDN);
    mpfr_erfc(t.v, t.v, MPFR_RNDN);
    mpfr_mul(out.v, x.v, t.v, MPFR_RNDN);
    mpfr_div_2ui(out.v, out.v, 1, MPFR_RNDN);
  } else {
    // u = √(2/π) · (x + 0.044715 · x³), the constant the exact decimal 44715 / 10^6; then x / (1 + e^(-2u)).
    Real c, pi, cube;
    mpfr_const_pi(pi.v, MPFR_RNDN);
    mpfr_ui_div(c.v, 2, pi.v, MPFR_RNDN);
    mpfr_sqrt(c.v, c.v, MPFR_RNDN);
    mpfr_pow_ui(cube.v, x.v, 3, MPFR_RNDN);
    mpfr_mul_ui(cube.v, cube.v, 44715, MPFR_RNDN);
    mpfr_div_ui(cube.v, cube.v, 1000000, MPFR_RNDN);
    mpfr_add(t.v, x.v, cube.v, MPFR_RNDN);
    mpfr_mul(t.v, t.v, c.v, MPFR_RNDN);
    mpfr_mul_2ui(t.v, t.v, 1, MPFR_RNDN);
    over_one_plus_exp_minus(out.v, x.v, t.v);
  }
  // mpfr_get_flt rounds into binary32's range, subnormals included; MPFR's default exponent range is far wider
  // than f32's, so the value above neither overflowed nor underflowed before this one rounding.
  const float r = mpfr_get_flt(out.v, MPFR_RNDN);
  return std::bit_cast<std::uint32_t>(r);
}

std::optional<std::uint64_t> ulp_distance(const Format& f, std::uint64_t a, std::uint64_t b) {
  const bool na = f.is_nan_code(a), nb = f.is_nan_code(b);
  if (na || nb) return na && nb ? std::optional<std::uint64_t>{0} : std::nullopt;
  // Sign-magnitude codes in order: the magnitude counts representable values up from zero.
  const int top = f.bits - 1;
  const std::uint64_t magnitude_mask = (std::uint64_t{1} << top) - 1;
  const auto ordered = [&](std::uint64_t c) {
    const auto m = static_cast<std::int64_t>(c & magnitude_mask);
    return ((c >> top) & 1) ? -m : m;
  };
  const std::int64_t d = ordered(a) - ordered(b);
  return static_cast<std::uint64_t>(d < 0 ? -d : d);
}

}  // namespace lowbit::contract
