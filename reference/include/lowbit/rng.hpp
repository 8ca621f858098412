// Deterministic random numbers (the accuracy report's tensors, test inputs): the same bits on every machine and
// compiler.
//
// The uniform source is splitmix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number generators",
// OOPSLA 2014; the constants of conformance/gemm/random_codes.hpp).  Every transform below uses only IEEE
// 754 binary64 operations that are correctly rounded (+, -, *, /, sqrt) or exact (frexp, ldexp, floor),
// in a fixed order, and the project builds with -ffp-contract=off, so no FMA contraction changes a
// result.  libm's log, exp, sin and cos are not used: their last bit differs between C libraries.  So
// there is no std::*_distribution (its algorithm is implementation-defined) and no Box-Muller:
//   * log(x) is a fixed atanh series (det_log), exp2(t) a fixed Taylor series (det_exp2); both are
//     accurate to a few units in the last place, which is plenty for drawing samples, and their bits
//     depend on nothing but the input;
//   * normal samples come from Marsaglia's polar method (Marsaglia and Bray, SIAM Review 6(3), 1964),
//     which needs only log and sqrt.
#pragma once
#include <cmath>
#include <cstdint>

namespace lowbit::rng {

// splitmix64: the next 64 random bits of the stream whose state is `s`.
inline std::uint64_t splitmix(std::uint64_t& s) {
  std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A uniform double in the open interval (0, 1): the top 53 bits, offset by half a step (exact).
inline double uniform_open(std::uint64_t& s) { return (static_cast<double>(splitmix(s) >> 11) + 0.5) * 0x1p-53; }

// ln(x) for a positive finite x.  x = m * 2^e with m in [sqrt(1/2), sqrt(2)) (frexp and a doubling are
// exact); ln(m) = 2 atanh(f) = 2 (f + f^3/3 + f^5/5 + ...) with f = (m - 1) / (m + 1), |f| <= 0.1716, so
// 13 terms leave a truncation error below 2^-60.  ln 2 is its double nearest value.
inline double det_log(double x) {
  int e = 0;
  double m = std::frexp(x, &e);  // m in [0.5, 1)
  if (m < 0.70710678118654752440) {
    m *= 2.0;
    e -= 1;
  }
  const double f = (m - 1.0) / (m + 1.0);
  const double f2 = f * f;
  double poly = 0.0;
  for (int j = 12; j >= 0; --j) poly = poly * f2 + 1.0 / static_cast<double>(2 * j + 1);
  constexpr double ln2 = 0.69314718055994530942;
  return static_cast<double>(e) * ln2 + 2.0 * f * poly;
}

// 2^t for a finite t with |t| < 1000: 2^floor(t) (exact, ldexp) times exp(r * ln 2) for the fraction r in
// [0, 1) (exact subtraction), the exponential summed as a Horner-form Taylor series of 22 terms
// (0.694^22 / 22! < 2^-80).
inline double det_exp2(double t) {
  const double n = std::floor(t);
  const double y = (t - n) * 0.69314718055994530942;
  double r = 1.0;
  for (int k = 22; k >= 1; --k) r = 1.0 + r * y / static_cast<double>(k);
  return std::ldexp(r, static_cast<int>(n));
}

// One standard normal sample (Marsaglia's polar method; the second sample of each accepted pair is
// dropped, so each sample depends only on the stream).
inline double normal(std::uint64_t& s) {
  for (;;) {
    const double u = 2.0 * uniform_open(s) - 1.0;
    const double v = 2.0 * uniform_open(s) - 1.0;
    const double q = u * u + v * v;
    if (q >= 1.0 || q == 0.0) continue;
    return u * std::sqrt(-2.0 * det_log(q) / q);
  }
}

// Laplace with unit variance (scale b = 1/sqrt(2)): inverse CDF, -b sign(w) ln(1 - 2|w|), w uniform on
// (-1/2, 1/2).
inline double laplace(std::uint64_t& s) {
  const double w = uniform_open(s) - 0.5;
  const double b = 0.70710678118654752440;
  const double mag = -b * det_log(1.0 - 2.0 * std::fabs(w));
  return w < 0 ? -mag : mag;
}

// Student's t with nu = 3 degrees of freedom: Z / sqrt(chi^2_3 / 3), chi^2_3 a sum of three squared
// standard normals.
inline double student_t3(std::uint64_t& s) {
  const double z = normal(s);
  const double a = normal(s), b = normal(s), c = normal(s);
  return z / std::sqrt((a * a + b * b + c * c) / 3.0);
}

// A random sign times 2^t, t uniform on [lo, hi): log-uniform magnitudes over hi - lo binades.
inline double log_uniform(std::uint64_t& s, double lo, double hi) {
  const bool negative = (splitmix(s) >> 63) != 0;
  const double m = det_exp2(lo + (hi - lo) * uniform_open(s));
  return negative ? -m : m;
}

}  // namespace lowbit::rng
