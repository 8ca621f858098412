// The fast path of the scaling schemes (scale.hpp): quantize() streams the tensor through SIMD block maxima
// and the batch conversion, one member function of Streaming per scheme family; quantize_reference()
// (scale_reference.cpp) is the plain definition it is proven equal to.  Also dequantize, transpose and the
// Hadamard transform.
#include "lowbit/scale.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cfloat>
#include <cmath>
#include <memory>
#include <stdexcept>

#include "lowbit/batch.hpp"
#include "lowbit/convert.hpp"
#include "lowbit/gemm.hpp"
#include "lowbit/scale_rules.hpp"

namespace lowbit::scale {

namespace {


std::uint32_t bits_of(float f) { return std::bit_cast<std::uint32_t>(f); }
float float_of(std::uint32_t b) { return std::bit_cast<float>(b); }

// The element's largest finite value as an f32 (every supported element's max is exact in f32).
float max_of(const Format& f) { return static_cast<float>(max_value(f)); }

std::uint64_t to_element(float v, const Format& element, const Policy& p, std::uint32_t r) {
  return convert(formats::f32, bits_of(v), element, p, r).code;
}

// x * 2^-e computed exactly (the OCP definition divides by the power of two mathematically), rounded
// once into the element.
std::uint64_t to_element_scaled(float v, int e, const Format& element, const Policy& p, std::uint32_t r) {
  Unpacked u = unpack(formats::f32, bits_of(v));
  if (u.cls == ValueClass::finite) u.exponent -= e;
  return round_to(element, u, p, r).code;
}

double code_value(const Format& f, std::uint64_t code) {
  const Unpacked u = unpack(f, code);
  switch (u.cls) {
    case ValueClass::nan: return std::nan("");
    case ValueClass::inf: return u.negative ? -INFINITY : INFINITY;
    case ValueClass::zero: return u.negative ? -0.0 : 0.0;
    case ValueClass::finite: break;
  }
  const double v = std::ldexp(static_cast<double>(u.significand), u.exponent);
  return u.negative ? -v : v;
}

// The MX element's largest power of two (the exponent of its largest normal binade).
int emax_elem(const Format& f) { return f.emax(); }

// ---- the row kernels of the fast path (Streaming, below) ---------------------------------------------

// Element codes of v[0..n) through convert_batch, one byte each (normalize admits elements of at most
// 8 bits, whose batch codes are single bytes), straight into `out`.
void to_elements(const float* v, std::size_t n, const Format& el, const Policy& p, const std::uint32_t* r,
                 std::uint8_t* out) {
  convert_batch(formats::f32, v, n, el, p, out, nullptr, nullptr, r);
}

// Block amaxes in one pass over the rows.  |x| as a bit pattern, with NaN (and, when finite_only,
// infinities) read as +0: for values >= +0 the order of the bit patterns is the order of the values, so
// the largest pattern is what the fmaxf loop (block_amax) returns.  A block holding a NaN is flagged
// (block_amax then decides what a propagating amax returns); so is one holding any NaN or infinity.
struct BlockAmaxes {
  int nbr = 0, nbc = 0;
  std::vector<std::uint32_t> bits;
  std::vector<std::uint8_t> nan, nonfinite;
  std::uint32_t min_nonzero_m1 = 0xFFFFFFFFu;  // the smallest non-zero |x| pattern less one (row_blocks)
  float value(std::size_t b) const { return float_of(bits[b]); }
};

// Which elements a block amax reads: all of them (NaN dropped, or propagated where the options say), or
// the finite ones (MX under NonFinite::propagate: NaN and infinities read as +0).
enum class Reach : std::uint8_t { all, finite };
// What a gathered band of block amaxes carries besides the maxima.
struct Gather {
  Reach reach = Reach::all;
  bool smallest_nonzero = false;  // the band's smallest non-zero |x| pattern too (MX's exact-route test)
};
// Blocks of `rows` rows by `cols` columns, streamed one band of rows at a time (Streaming::banded).
struct Band {
  int rows = 1;
  int cols = 1;
  Gather gather{};
};
// The row kernels below are built for AVX-512, AVX2 and the baseline (the loader picks one for the CPU);
// they are integer maxima, fp32 multiplications and divisions, each the same operation on every build.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define LOWBIT_SCALE_CLONES [[gnu::target_clones("avx512f", "avx2", "default")]]
#endif
#endif
#ifndef LOWBIT_SCALE_CLONES
#define LOWBIT_SCALE_CLONES
#endif

// One block [c0, c1) of a row: see row_blocks below.
[[gnu::always_inline]] inline void block_span(const float* v, int c0, int c1, std::int32_t lim, std::uint32_t& m,
                                              std::uint8_t& nan, std::uint8_t& nonfinite) {
  std::int32_t mm = 0, top = 0;
  for (int c = c0; c < c1; ++c) {
    const auto b = static_cast<std::int32_t>(std::bit_cast<std::uint32_t>(v[c]) & 0x7FFFFFFFu);
    top = std::max(top, b);
    mm = std::max(mm, b > lim ? 0 : b);
  }
  m = std::max(m, static_cast<std::uint32_t>(mm));
  nan |= top > 0x7F800000;
  nonfinite |= top >= 0x7F800000;
}

// One row of n values cut into blocks of bc: each block's largest |x| pattern at most `limit`
// (larger ones, NaN and perhaps infinities, read as +0) merged into m[blk] by maximum, and the block's
// NaN (pattern above 0x7F800000) and non-finite flags or-ed into nan[blk] and nonfinite[blk]; with min_m1
// non-null also the smallest non-zero |x| pattern less one, merged by minimum (a zero's pattern less one
// wraps to 0xFFFFFFFF, which also stands for "none").  The block maxima come from block_abs_max_bits
// (batch.hpp, a SIMD pass); a block whose maximum is above `limit` holds a NaN or an infinity and is read
// again by block_span for its largest pattern at most `limit` (rare).
LOWBIT_SCALE_CLONES void row_blocks(const float* v, int n, int bc, std::int32_t lim, std::uint32_t* m,
                                    std::uint8_t* nan, std::uint8_t* nonfinite, std::uint32_t* min_m1 = nullptr) {
  constexpr int kPiece = 256;  // blocks per call of block_abs_max_bits
  std::uint32_t tops[kPiece];
  const auto ulim = static_cast<std::uint32_t>(lim);
  const std::int64_t span = static_cast<std::int64_t>(kPiece) * bc;
  const int piece = span >= n ? n : static_cast<int>(span);  // a multiple of bc, or all of the row
  for (int c0 = 0; c0 < n; c0 += piece) {
    const int len = std::min(piece, n - c0);
    const int nb = (len + bc - 1) / bc;
    std::fill(tops, tops + nb, 0u);
    block_abs_max_bits(v + c0, static_cast<std::size_t>(len), static_cast<std::size_t>(bc), tops, min_m1);
    const int b0 = c0 / bc;
    std::uint32_t over = 0;
    for (int k = 0; k < nb; ++k) {
      const std::uint32_t t = tops[k];
      m[b0 + k] = std::max(m[b0 + k], t <= ulim ? t : 0u);
      nan[b0 + k] |= static_cast<std::uint8_t>(t > 0x7F800000u);
      nonfinite[b0 + k] |= static_cast<std::uint8_t>(t >= 0x7F800000u);
      over |= static_cast<std::uint32_t>(t > ulim);
    }
    if (over == 0) continue;
    for (int k = 0; k < nb; ++k)
      if (tops[k] > ulim)
        block_span(v, c0 + k * bc, std::min(c0 + len, c0 + (k + 1) * bc), lim, m[b0 + k], nan[b0 + k],
                   nonfinite[b0 + k]);
  }
}

// Chunks of a row for the streaming passes below: whole blocks (a multiple of bc) or whole divisors of a
// block (bc a multiple of the chunk), about 2 KiB each; the whole row when neither fits.
int chunk_of(int bc, int n) {
  constexpr int kChunk = 512;
  if (n <= kChunk) return n;
  if (bc <= kChunk) return kChunk / bc * bc;
  return bc % kChunk == 0 ? kChunk : n;
}

// Asks for the memory of [from, min(from + n, end)), one request per cache line: the streaming passes call it
// for the chunk after the one they are about to read (a pass that only reads waits on memory otherwise).
void prefetch_span(const float* from, int n, const float* end) {
  for (const float* a = from; a < std::min(end, from + n); a += 16) __builtin_prefetch(a, 0, 2);
}

// row_blocks over v[0, n) chunk by chunk, asking for the next chunk's memory (up to `end`, running on
// into the next row) before each one.
void stream_blocks(const float* v, int n, int bc, std::int32_t lim, std::uint32_t* m, std::uint8_t* nan,
                   std::uint8_t* nonfinite, const float* end) {
  const int chunk = chunk_of(bc, n);
  for (int c0 = 0; c0 < n; c0 += chunk) {
    const int len = std::min(chunk, n - c0);
    prefetch_span(v + c0 + len, len, end);
    const int blk = c0 / bc;
    row_blocks(v + c0, len, bc, lim, m + blk, nan + blk, nonfinite + blk);
  }
}

// One block per column: column c's largest |x| pattern into top[c] (one maximum per element: NaN and infinity
// show in it as patterns of at least 0x7F800000, and block_amaxes reads the rare column holding one again).
LOWBIT_SCALE_CLONES void row_columns(const float* __restrict v, int n, std::uint32_t* __restrict top) {
  for (int c = 0; c < n; ++c) top[c] = std::max(top[c], std::bit_cast<std::uint32_t>(v[c]) & 0x7FFFFFFFu);
}

// out[c] = v[c] * f[c / bc] (row_multiply; mul_fixed: bc = BC).
template <int BC>
[[gnu::always_inline]] inline void mul_fixed(const float* v, int n, const float* f, float* out) {
  int c0 = 0, blk = 0;
  for (; c0 + BC <= n; c0 += BC, ++blk) {
    const float m = f[blk];
    for (int c = 0; c < BC; ++c) out[c0 + c] = v[c0 + c] * m;
  }
  for (int c = c0; c < n; ++c) out[c] = v[c] * f[blk];
}

LOWBIT_SCALE_CLONES void row_multiply(const float* v, int n, int bc, const float* f, float* out) {
  if (bc == 16) return mul_fixed<16>(v, n, f, out);
  if (bc == 32) return mul_fixed<32>(v, n, f, out);
  for (int c0 = 0, blk = 0; c0 < n; c0 += bc, ++blk) {
    const float m = f[blk];
    const int c1 = std::min(n, c0 + bc);
    for (int c = c0; c < c1; ++c) out[c] = v[c] * m;
  }
}

BlockAmaxes block_amaxes(const Tensor& x, int br, int bc, Reach reach) {
  BlockAmaxes a;
  a.nbr = (x.rows + br - 1) / br;
  a.nbc = (x.cols + bc - 1) / bc;
  const std::size_t blocks = static_cast<std::size_t>(a.nbr) * static_cast<std::size_t>(a.nbc);
  a.bits.assign(blocks, 0);
  a.nan.assign(blocks, 0);
  a.nonfinite.assign(blocks, 0);
  const std::uint32_t limit = reach == Reach::finite ? 0x7F7FFFFFu : 0x7F800000u;
  const std::size_t cols = static_cast<std::size_t>(x.cols);
  std::vector<std::uint32_t> top(bc == 1 ? cols : 0);  // one block per column: the band's column maxima
  for (int r = 0; r < x.rows; ++r) {
    const float* v = &x.data[static_cast<std::size_t>(r) * cols];
    const std::size_t base = static_cast<std::size_t>(r / br) * static_cast<std::size_t>(a.nbc);
    if (bc == 1) {  // one block per column: the row updates a whole row of blocks
      // In chunks, each asking for the next one's memory first, as stream_blocks does.
      const float* end = x.data.data() + x.data.size();
      const int chunk = chunk_of(1, x.cols);
      for (int c0 = 0; c0 < x.cols; c0 += chunk) {
        const int len = std::min(chunk, x.cols - c0);
        prefetch_span(v + c0 + len, len, end);
        row_columns(v + c0, len, &top[static_cast<std::size_t>(c0)]);
      }
      if ((r + 1) % br == 0 || r + 1 == x.rows) {
        const int r0 = r / br * br;
        for (std::size_t c = 0; c < cols; ++c) {
          // A column whose maximum is a NaN's pattern (or an infinity's, when those are not read) is read
          // again for its largest pattern at most `limit`, as row_blocks does with such a block.
          std::uint32_t m = top[c];
          if (m > limit) {
            m = 0;
            for (int k = r0; k <= r; ++k) {
              const std::uint32_t b = bits_of(x.data[static_cast<std::size_t>(k) * cols + c]) & 0x7FFFFFFFu;
              m = std::max(m, b > limit ? 0u : b);
            }
          }
          a.bits[base + c] = m;
          a.nan[base + c] = static_cast<std::uint8_t>(top[c] > 0x7F800000u);
          a.nonfinite[base + c] = static_cast<std::uint8_t>(top[c] >= 0x7F800000u);
        }
        std::fill(top.begin(), top.end(), 0u);
      }
      continue;
    }
    stream_blocks(v, x.cols, bc, static_cast<std::int32_t>(limit), &a.bits[base], &a.nan[base], &a.nonfinite[base],
                  x.data.data() + x.data.size());
  }
  return a;
}

// The block amaxes of rows [r0, r1) alone (one row of blocks of r1 - r0 rows by bc columns), into a
// (reused): that band's entries of block_amaxes(x, r1 - r0, bc, g.reach); with g.smallest_nonzero also the
// band's smallest non-zero |x| pattern.  Any bc >= 1 (the schemes with one block per column take
// block_amaxes).
void band_amaxes(const Tensor& x, int r0, int r1, int bc, const Gather& g, BlockAmaxes& a) {
  a.nbr = 1;
  a.nbc = (x.cols + bc - 1) / bc;
  const std::size_t n = static_cast<std::size_t>(a.nbc);
  a.bits.assign(n, 0);
  a.nan.assign(n, 0);
  a.nonfinite.assign(n, 0);
  a.min_nonzero_m1 = 0xFFFFFFFFu;
  const std::uint32_t limit = g.reach == Reach::finite ? 0x7F7FFFFFu : 0x7F800000u;
  for (int r = r0; r < r1; ++r) {
    const float* v = &x.data[static_cast<std::size_t>(r) * static_cast<std::size_t>(x.cols)];
    row_blocks(v, x.cols, bc, static_cast<std::int32_t>(limit), a.bits.data(), a.nan.data(), a.nonfinite.data(),
               g.smallest_nonzero ? &a.min_nonzero_m1 : nullptr);
  }
}

// ---- MX scales, one row of blocks at a time --------------------------------------------------------
// rules::mx_scale for every block of a row from its amax pattern, with the rule a constant in each loop so
// that the loop has no branch per block (it vectorises).  For rceil and rne, whose rule is a conversion of the
// quotient d = fp32(a * fp32(1 / elem_max)) into e8m0, the codes come from the caller's batch conversion
// (`e8m0`), or, for rceil without it, straight from d: where d is a normal number its code is d's exponent
// field, plus one unless d is a power of two, which is the conversion's answer as long as it stays below 255
// (conformance/scale checks every exponent); a block whose d is zero, subnormal or infinite, or would round
// up past 2^127, makes the call return false, and the caller converts the row through the batch path.
// A block gets 0xFF whatever its amax where NaN propagates and it holds a NaN (amax_of gives that NaN, and
// mx_scale of a NaN is 0xFF): on_nan = 1; and under scale-nan where it holds a NaN or an infinity:
// on_nonfinite = 1.  (The arrays are distinct: __restrict lets the byte loads vectorise instead of reloading
// every pointer after each store.)
template <MxRule R>
[[gnu::always_inline]] inline bool mx_codes_fixed(const std::uint32_t* __restrict amax, const std::uint8_t* __restrict nan,
                                                  const std::uint8_t* __restrict nonfinite, std::uint8_t on_nan,
                                                  std::uint8_t on_nonfinite, const std::uint8_t* __restrict e8m0,
                                                  std::size_t n, int emax, float elem_max, int mantissa_bits,
                                                  std::uint64_t* __restrict sc) {
  const float inv_elem_max = 1.0f / elem_max;  // as rules::mx_scale forms it
  std::uint32_t bad = 0;
  for (std::size_t k = 0; k < n; ++k) {
    std::uint64_t c = 0;
    if constexpr (R == MxRule::rne) {
      c = e8m0[k];
    } else if constexpr (R == MxRule::rceil) {
      const std::uint32_t d = bits_of(float_of(amax[k]) * inv_elem_max);  // >= +0: amax is an |x| pattern
      const std::uint32_t e = d >> 23;
      const std::uint32_t direct = e + ((d & 0x7FFFFFu) != 0 ? 1u : 0u);
      bad |= (e == 0 ? 1u : 0u) | (direct >= 255 ? 1u : 0u);
      c = direct;
    } else {
      c = rules::mx_scale(float_of(amax[k]), emax, elem_max, mantissa_bits, R);
    }
    const bool force = ((nan[k] & on_nan) | (nonfinite[k] & on_nonfinite)) != 0;
    sc[k] = force ? 0xFFu : c;
  }
  return bad == 0;
}

// Which blocks get the NaN scale whatever their amax (1: those holding a NaN; those holding NaN or Inf).
struct MxForced {
  std::uint8_t on_nan = 0;
  std::uint8_t on_nonfinite = 0;
};
// The scale rule of a row and the element constants it reads.
struct MxScaleRule {
  MxRule rule = MxRule::floor;
  int emax = 0;
  float elem_max = 0.0f;
  int mantissa_bits = 0;
};

// The codes of a row of n blocks from their amaxes t (see mx_codes_fixed); false when rceil's direct form
// does not cover the row, or for rne without `e8m0` (the caller then converts the quotients and calls
// again with their codes).
LOWBIT_SCALE_CLONES bool mx_row_codes(const BlockAmaxes& t, MxForced forced, const std::uint8_t* e8m0, std::size_t n,
                                      MxScaleRule r, std::uint64_t* sc) {
  auto fill = [&](auto rule) {
    return mx_codes_fixed<decltype(rule)::value>(t.bits.data(), t.nan.data(), t.nonfinite.data(), forced.on_nan,
                                                 forced.on_nonfinite, e8m0, n, r.emax, r.elem_max, r.mantissa_bits, sc);
  };
  if (e8m0 != nullptr) return fill(std::integral_constant<MxRule, MxRule::rne>{});  // the codes given
  switch (r.rule) {
    case MxRule::floor: return fill(std::integral_constant<MxRule, MxRule::floor>{});
    case MxRule::ceil: return fill(std::integral_constant<MxRule, MxRule::ceil>{});
    case MxRule::even: return fill(std::integral_constant<MxRule, MxRule::even>{});
    case MxRule::rceil: return fill(std::integral_constant<MxRule, MxRule::rceil>{});
    case MxRule::rne: return false;  // only through the conversion
  }
  return false;
}

// What a row of MX scales tells the element pass: any NaN scale, any block holding a NaN, and the largest
// scale code that is not NaN (the OCP rules' exact route, see the MX case of quantize).
struct MxRowSummary {
  bool nan_scale = false;
  bool nan_block = false;
  std::uint32_t e_max = 0;
};
// What the element pass of the current MX row needs: whether any block has the NaN scale, and whether the
// row may hold elements the scaled pass cannot give (see Streaming::mx).
struct MxRowState {
  bool nan_scale = false;
  bool special = false;
};

// Each block's element multiplier (rules::mx_multiplier) and the row's summary, in one loop without branches
// (it vectorises; a select inside the maximum, max(e, c == 0xFF ? 0 : c), kept gcc 12 from vectorising it).
LOWBIT_SCALE_CLONES MxRowSummary mx_row_multipliers(const std::uint64_t* __restrict sc, const std::uint8_t* __restrict nan,
                                                    std::size_t n, float* __restrict mults) {
  std::uint32_t nan_any = 0, nan_block = 0, e_max = 0;
  for (std::size_t k = 0; k < n; ++k) {
    const auto c = static_cast<std::uint32_t>(sc[k]);  // an e8m0 code, 0 to 0xFF
    const std::uint32_t keep = ((c + 1u) >> 8) - 1u;    // all ones unless c is 0xFF (NaN)
    nan_any |= ~keep;
    nan_block |= nan[k];
    e_max = std::max(e_max, c & keep);
    mults[k] = rules::mx_multiplier(c);
  }
  return {nan_any != 0, nan_block != 0, e_max};
}

}  // namespace

float amax(const float* v, std::size_t n, std::size_t stride, AmaxNan nan) {
  const bool propagate_nan = nan == AmaxNan::propagate;
  float a = 0.0f;
  for (std::size_t i = 0; i < n; ++i) {
    const float x = std::fabs(v[i * stride]);
    if (std::isnan(x)) {
      if (propagate_nan) return x;
      continue;  // fmaxf(a, NaN) == a
    }
    a = std::fmax(a, x);
  }
  return a;
}

// The rule itself lives in scale_rules.hpp, shared with the device quantizers.
float scale_from_amax(float amax_in, float fp8_max, float eps, ScaleFormat format, float value_for_inf) {
  return rules::scale_from_amax(amax_in, fp8_max, eps, format, value_for_inf);
}

// The rule lives in scale_rules.hpp, shared with the device quantizers.
std::uint64_t mx_scale(float a, const Format& element, MxRule rule) {
  return rules::mx_scale(a, emax_elem(element), max_of(element), element.mantissa_bits, rule);
}

Tensor transpose(const Tensor& x) {
  Tensor t{x.cols, x.rows, std::vector<float>(x.data.size())};
  for (int r = 0; r < x.rows; ++r)
    for (int c = 0; c < x.cols; ++c)
      t.data[static_cast<std::size_t>(c) * x.rows + r] = x.data[static_cast<std::size_t>(r) * x.cols + c];
  return t;
}

namespace {
// 16x16 Sylvester Hadamard matrix entry: (-1)^popcount(i & j).
int hadamard16(int i, int j) { return (std::popcount(static_cast<unsigned>(i & j)) & 1) ? -1 : 1; }
// TE's fixed sign vector for the random Hadamard transform (docs/semantics.md §4).
constexpr int k_rht_signs[16] = {1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1};
}  // namespace

// hadamard_rows (scale.hpp): y = x diag(s) H / 4 on each whole 16-element row group.  The sum of sixteen
// ±x_i is formed exactly in f64 (every partial sum of sixteen f32 values is exact there) and rounded once
// to f32.  TE computes it with
// a bf16 tensor-core GEMM; this project does not claim bit equality with that kernel.
Tensor hadamard_rows(const Tensor& x) {
  Tensor y = x;
  for (int r = 0; r < x.rows; ++r)
    for (int c0 = 0; c0 + 16 <= x.cols; c0 += 16)
      for (int j = 0; j < 16; ++j) {
        double s = 0;
        for (int i = 0; i < 16; ++i)
          s += static_cast<double>(x.data[static_cast<std::size_t>(r) * x.cols + c0 + i]) * k_rht_signs[i] *
               hadamard16(i, j);
        y.data[static_cast<std::size_t>(r) * x.cols + c0 + j] = static_cast<float>(s * 0.25);
      }
  return y;
}

// hadamard_rows_te_bf16 (scale.hpp), following Transformer Engine (NVIDIA/TransformerEngine):
//  * transformer_engine/pytorch/tensor/nvfp4_tensor.py at commit 13d544cf, get_wgrad_sign_vector (line 48: the
//    sign vector above) and get_rht_matrix (lines 92-102: diag(s) @ H16 * 1/sqrt(16), cast to bf16), applied
//    as x.reshape(-1, 16) @ matrix;
//  * transformer_engine/common/hadamard_transform/hadamard_transform_utils.cuh at commit 76323235:
//    k16x16HadamardScale = 0.25f (line 21); get_hadamard_matrix_fragment builds the entries as copysignf(0.25,
//    sign bit (mask >> column) ^ popcount(row & column)) converted to bf16 (cvt.rn.bf16x2.f32, exact for
//    ±0.25); mma_m16_n16_k16_b16_b16_b16_noacc runs wmma.mma.sync.aligned.row.row.m16n16k16.f32.bf16.bf16.f32
//    with a zero accumulator, then rounds each f32 result with cvt.rn.bf16x2.f32 and takes the amax of those
//    bf16 values (max.xorsign.abs.bf16x2).
// The MMA of K = 16 is one step of the hopper-bf16 model (group 16: the whole row group at once), the one bf16
// tensor-core model held against hardware here (an H200, reports/device/).  TE runs this kernel on sm90 and
// sm100; that Blackwell's bf16 MMA equals the model is not confirmed.
Tensor hadamard_rows_te_bf16(const Tensor& x) {
  const gemm::TensorCoreModel* model = gemm::find_model("hopper-bf16");
  if (!model) throw std::logic_error("the hopper-bf16 tensor-core model row is missing");
  constexpr std::uint64_t plus_quarter = 0x3E80, minus_quarter = 0xBE80;  // bf16 +-0.25
  // Column j of the bf16 matrix diag(s) H / 4 (the MMA's B operand, read along K = i).
  std::array<std::array<std::uint64_t, 16>, 16> column{};
  for (int j = 0; j < 16; ++j)
    for (int i = 0; i < 16; ++i) column[j][i] = k_rht_signs[i] * hadamard16(i, j) > 0 ? plus_quarter : minus_quarter;
  Tensor y = x;
  std::array<std::uint64_t, 16> a{};
  const Policy to_bf16{.rounding = Rounding::rne, .overflow = Overflow::nosat};
  for (int r = 0; r < x.rows; ++r)
    for (int c0 = 0; c0 + 16 <= x.cols; c0 += 16) {
      for (int i = 0; i < 16; ++i) {
        const std::size_t at = static_cast<std::size_t>(r) * x.cols + c0 + i;
        const std::uint32_t bits = std::bit_cast<std::uint32_t>(x.data[at]);
        // TE's transform reads bf16 tensors only: a bf16 value is an f32 whose low 16 bits are zero.
        if ((bits & 0xFFFFu) != 0)
          throw std::invalid_argument("the te-bf16 Hadamard transform reads bf16 values; element " +
                                      std::to_string(at) + " (row " + std::to_string(r) + ", column " +
                                      std::to_string(c0 + i) + ") is not one");
        a[i] = bits >> 16;
      }
      for (int j = 0; j < 16; ++j) {
        const std::uint32_t acc = gemm::model_step(*model, formats::bf16, a, formats::bf16, column[j], 0u);
        const std::uint64_t rounded = convert(formats::f32, acc, formats::bf16, to_bf16).code;
        y.data[static_cast<std::size_t>(r) * x.cols + c0 + j] =
            std::bit_cast<float>(static_cast<std::uint32_t>(rounded << 16));
      }
    }
  return y;
}

Tensor hadamard_transform(const Tensor& x, Hadamard h) {
  switch (h) {
    case Hadamard::none: return x;
    case Hadamard::exact: return hadamard_rows(x);
    case Hadamard::te_bf16: return hadamard_rows_te_bf16(x);
  }
  return x;
}

namespace {

// ---- the fast path, one class per call ----------------------------------------------------------------
// Streaming quantizes each element by its block's multiplier exactly as quantize_reference() does (one
// fp32 operation) inside the batch conversion (ScaledBatch, or a row buffer and convert_batch), which
// equals the scalar conversion bit for bit for every policy (batch.hpp), stochastic rounding included
// with the element's random value.  Block maxima come from bit patterns in one SIMD pass, a band of rows
// is gathered while the previous one converts; conformance/scale/test_oracle.cpp proves the result equal
// to quantize_reference() under every SIMD target.  One member function per scheme family.
class Streaming {
 public:
  Streaming(const Tensor& x, const Options& o, const std::vector<std::uint32_t>* rbits, Quantized& q)
      : x_(x),
        o_(o),
        el_(*o.element),
        p_(o.element_policy),
        q_(q),
        R_(x.rows),
        C_(x.cols),
        any_(x.rows > 0 && x.cols > 0),
        elem_max_(max_of(*o.element)),
        rptr_(rbits ? rbits->data() : nullptr),
        buf_(static_cast<std::size_t>(x.cols)),
        scaled_(*o.element, o.element_policy, stores_for(x.data.size())) {
    // A large tensor's codes are sized at once and the scaled conversions write them with non-temporal stores
    // (CodeStores::streaming): the zeros land in the cache in one fast fill and the stores replace whole lines
    // without reading them from memory, where ordinary stores would read every line of the codes first.  A small
    // tensor's codes grow row by row as rows are written (every writer of row r calls grow_to(r) first;
    // quantize() sizes them in full at the end), so that the bytes each row zeroes are in cache when its
    // conversion overwrites them and stay there for the caller.
    if (stores_for(x.data.size()) == CodeStores::streaming) q_.codes.resize(x.data.size());
    else q_.codes.reserve(x.data.size());
  }

  void current();
  void delayed(DelayedState& st);
  void mx();
  void nvfp4();
  void nvfp4_1level();
  // Makes streamed codes visible before they are read or handed on (ScaledBatch::flush).
  void finish() const { scaled_.flush(); }

 private:
  // The input a group of bands gathers before it converts them (banded): well inside the 1 MiB or more of
  // second-level cache of current cores, so that the conversion reads it from there.
  static constexpr std::size_t kGroupBytes = std::size_t{128} << 10;
  // Codes of at least 4 MiB (a 2048 x 2048 tensor) are streamed: they outgrow the caches a caller would read them from.
  static CodeStores stores_for(std::size_t codes) {
    return codes >= (std::size_t{1} << 22) ? CodeStores::streaming : CodeStores::cached;
  }
  float at(int r, int c) const { return x_.data[idx(r, c)]; }
  std::size_t idx(int r, int c) const { return static_cast<std::size_t>(r) * C_ + c; }
  std::uint32_t rb(std::size_t i) const { return rptr_ ? rptr_[i] : 0; }
  const std::uint32_t* rbits_at(std::size_t i) const { return rptr_ ? rptr_ + i : nullptr; }
  void grow_to(int r) {
    if (q_.codes.size() < idx(r + 1, 0)) q_.codes.resize(idx(r + 1, 0));
  }

  // fmaxf over |x| of a block, as quantize_reference() takes it: what a NaN block's amax is when NaN
  // propagates (the one-pass maxima ignore NaN).
  float block_amax(int r0, int r1, int c0, int c1, Reach reach) const {
    float a = 0.0f;
    for (int r = r0; r < r1; ++r)
      for (int c = c0; c < c1; ++c) {
        const float v = std::fabs(at(r, c));
        if (std::isnan(v)) {
          if (o_.amax_propagates_nan && reach == Reach::all) return v;
          continue;
        }
        if (reach == Reach::finite && std::isinf(v)) continue;
        a = std::fmax(a, v);
      }
    return a;
  }
  // The amax of block b from a one-pass table; a propagating amax over a block with a NaN asks
  // block_amax, which returns that NaN.
  float amax_of(const BlockAmaxes& t, std::size_t b, int r0, int r1, int c0, int c1, Reach reach) const {
    if (t.nan[b] && o_.amax_propagates_nan && reach == Reach::all) return block_amax(r0, r1, c0, c1, Reach::all);
    return t.value(b);
  }

  // Row r's elements (buf_) into codes through the batch path.  Row r + 1 is asked for first: the conversion
  // loads nothing of x, so its lines arrive while the conversion runs instead of stalling the next pass.
  void convert_row(int r) {
    if (r + 1 < R_) prefetch_span(&x_.data[idx(r + 1, 0)], C_, x_.data.data() + x_.data.size());
    grow_to(r);
    to_elements(buf_.data(), static_cast<std::size_t>(C_), el_, p_, rbits_at(idx(r, 0)), &q_.codes[idx(r, 0)]);
  }
  // Row r's codes of fp32(x * mult[c / block]) in one pass (ScaledBatch: the multiplication inside the
  // batch conversion, NaN multipliers giving their own NaN; its loop asks for the input 2 KiB ahead, into
  // the next row).
  void scaled_row(int r, const float* mult, int block) {
    grow_to(r);
    scaled_.run(&x_.data[idx(r, 0)], static_cast<std::size_t>(C_), mult, static_cast<std::size_t>(block),
                &q_.codes[idx(r, 0)], rbits_at(idx(r, 0)));
  }
  // Every element times its block's factor f[(r / br) * nbc + c / bc], then into codes: the fp32 operation
  // each scheme specifies, then the element conversion.  A NaN factor gives its own NaN whatever the element
  // (the product of two NaNs is the factor's, as the reference computes it).
  void convert_rows(int br, int bc, int nbc, const std::vector<float>& f) {
    for (int r = 0; r < R_; ++r) scaled_row(r, &f[static_cast<std::size_t>(r / br) * static_cast<std::size_t>(nbc)], bc);
  }

  // `one_pass`: the rule of ScaledBatch::run_blocks, for bands of one row (see banded).
  template <class BandMults, class AfterRow>
  void banded(const Band& band, BandMults&& band_mults, AfterRow&& after_row, const BlockRule* one_pass = nullptr);

  void mx_elements(int r, const std::vector<float>& mults, std::size_t first, const MxRowState& row);
  void four_over_six(const BlockAmaxes& t, int br, float global, float s_enc, float s_dec);

  const Tensor& x_;
  const Options& o_;
  const Format& el_;
  const Policy& p_;
  Quantized& q_;
  const int R_, C_;
  const bool any_;
  const float elem_max_;
  const std::uint32_t* rptr_;
  std::vector<float> buf_;
  std::vector<int> fix_;  // columns of the current MX row that take the scalar path after the batch
  const ScaledBatch scaled_;
};

// One pass for blocks of band.rows rows by band.cols columns (cols >= 1; MX may have blocks of 1), a group of
// bands at a time: the group's block amaxes are gathered (a read of about kGroupBytes of input from memory, which
// the hardware prefetcher streams), then each band's rows are converted while they are still in the cache
// (reading the input once from memory instead of an amax pass and a conversion pass).  A band larger than a
// group (the tensor scheme's, which is all of it) is a group of its own: its amax pass, then its conversion.
// band_mults(r0, r1, t) returns the multipliers of band [r0, r1) (one per block) from its amaxes t and records
// its scales; after_row(r) runs once row r's codes are written.
//
// Bands of one row with a `one_pass` rule that ScaledBatch::run_blocks takes go through it instead, about 1 MiB of
// rows at a time, each block's scale code written to q.scales[r * nbc + block]; a row it leaves (a NaN, say) then
// goes through its amaxes, band_mults, the scaled conversion and after_row on its own.  band_mults(r0, r1, t) puts
// its scales at q.scales[(r0 / band.rows) * nbc] either way.
template <class BandMults, class AfterRow>
void Streaming::banded(const Band& band, BandMults&& band_mults, AfterRow&& after_row, const BlockRule* one_pass) {
  const int br = band.rows, bc = band.cols;
  if (one_pass != nullptr && br == 1 &&
      scaled_.takes_blocks(static_cast<std::size_t>(C_), static_cast<std::size_t>(bc))) {
    const auto nbc = static_cast<std::size_t>(C_ / bc);
    const int chunk = static_cast<int>(
        std::max<std::size_t>(1, (std::size_t{1} << 20) / (static_cast<std::size_t>(C_) * sizeof(float))));
    std::vector<std::uint8_t> ok(static_cast<std::size_t>(std::min(chunk, R_)));
    BlockAmaxes a;
    for (int r0 = 0; r0 < R_; r0 += chunk) {
      const int r1 = std::min(R_, r0 + chunk);
      grow_to(r1 - 1);
      const std::size_t done = scaled_.run_blocks(&x_.data[idx(r0, 0)], static_cast<std::size_t>(r1 - r0),
                                                  static_cast<std::size_t>(C_), static_cast<std::size_t>(bc), *one_pass,
                                                  &q_.codes[idx(r0, 0)], &q_.scales[static_cast<std::size_t>(r0) * nbc],
                                                  ok.data(), x_.data.data() + x_.data.size());
      if (done == static_cast<std::size_t>(r1 - r0)) continue;
      finish();  // the codes it streamed are ordered before the stores below that replace them
      for (int r = r0; r < r1; ++r) {
        if (ok[static_cast<std::size_t>(r - r0)]) continue;
        band_amaxes(x_, r, r + 1, bc, band.gather, a);
        const float* mult = band_mults(r, r + 1, a);
        scaled_.run(&x_.data[idx(r, 0)], static_cast<std::size_t>(C_), mult, static_cast<std::size_t>(bc),
                    &q_.codes[idx(r, 0)], rbits_at(idx(r, 0)));
        after_row(r);
      }
    }
    return;
  }
  const std::size_t band_bytes = static_cast<std::size_t>(std::min(br, R_)) * static_cast<std::size_t>(C_) * sizeof(float);
  const int group = static_cast<int>(std::max<std::size_t>(1, kGroupBytes / std::max<std::size_t>(band_bytes, 1)));
  std::vector<BlockAmaxes> amaxes(static_cast<std::size_t>(std::min(group, ceil_div(R_, br))));
  const std::int64_t group_rows = static_cast<std::int64_t>(group) * br;
  for (int g0 = 0; g0 < R_; g0 = static_cast<int>(std::min<std::int64_t>(R_, g0 + group_rows))) {
    const int g1 = static_cast<int>(std::min<std::int64_t>(R_, g0 + group_rows));
    std::size_t k = 0;
    for (int r0 = g0; r0 < g1; r0 += br) band_amaxes(x_, r0, std::min(g1, r0 + br), bc, band.gather, amaxes[k++]);
    k = 0;
    const int next = g1 - g0;  // row r's conversion asks for row r + next, the next group's row in its place
    for (int r0 = g0; r0 < g1; r0 += br) {
      const int r1 = std::min(g1, r0 + br);
      const float* mult = band_mults(r0, r1, amaxes[k++]);
      for (int r = r0; r < r1; ++r) {
        grow_to(r);
        const float* ahead = r + next < R_ ? &x_.data[idx(r + next, 0)] : nullptr;
        scaled_.run(&x_.data[idx(r, 0)], static_cast<std::size_t>(C_), mult, static_cast<std::size_t>(bc),
                    &q_.codes[idx(r, 0)], rbits_at(idx(r, 0)), ahead);
        after_row(r);
      }
    }
  }
}

// tensor, channel, token, block: TE compute_scale_from_amax per tensor / column / row / block.  Blocks
// (TE Float8BlockScaling): value_for_inf is the input type's max (FLT_MAX).
void Streaming::current() {
  const SchemeRow& row = scheme_row(o_.scheme);
  const int br = block_size(row.block_rows, R_, o_.block_rows);
  const int bc = block_size(row.block_cols, C_, o_.block);
  q_.block_rows = br;
  q_.block_cols = bc;
  const bool packed = o_.scale_format == ScaleFormat::ue8m0_packed;
  q_.scale_format = packed ? &formats::e8m0 : &formats::f32;
  // The multiplier of a block with amax a, its scale code into `code`.
  auto block_scale = [&](float a, std::uint64_t& code) {
    float s = 0;
    std::uint64_t scale_code = 0;
    if (packed) {
      // DeepGEMM's sm_100 path: sf = fp32(max(amax, 1e-4) / max), rounded up to a power of two
      // (ceil_to_ue8m0); elements x * fp32(1 / sf).
      scale_code = rules::packed_block_scale(a, elem_max_, s);
    } else {
      s = rules::scale_from_amax(a, elem_max_, o_.eps, o_.scale_format, FLT_MAX);
      scale_code = bits_of(1.0f / s);
    }
    code = scale_code;
    return s;
  };
  if (any_ && bc > 1) {
    std::vector<float> mult;
    q_.scales.resize(static_cast<std::size_t>(ceil_div(R_, br)) * static_cast<std::size_t>(ceil_div(C_, bc)));
    // Bands of one row (token, 1 x 128 blocks) go through the one pass where it takes them (not the packed scales,
    // whose rule is a conversion).
    const BlockRule rule{.kind = BlockRuleKind::current,
                         .elem_max = elem_max_,
                         .eps = o_.eps,
                         .pow2 = o_.scale_format == ScaleFormat::pow2};
    const auto nbc = static_cast<std::size_t>(ceil_div(C_, bc));
    banded(
        Band{.rows = br, .cols = bc},
        [&](int r0, int r1, const BlockAmaxes& t) {
          const std::size_t first = static_cast<std::size_t>(r0 / br) * nbc;
          mult.clear();
          for (int c0 = 0, blk = 0; c0 < C_; c0 += bc, ++blk)
            mult.push_back(
                block_scale(amax_of(t, static_cast<std::size_t>(blk), r0, r1, c0, std::min(C_, c0 + bc), Reach::all),
                            q_.scales[first + static_cast<std::size_t>(blk)]));
          return mult.data();
        },
        [](int) {}, packed ? nullptr : &rule);
  } else {
    q_.scales.clear();
    const BlockAmaxes t = any_ ? block_amaxes(x_, br, bc, Reach::all) : BlockAmaxes{};
    std::vector<float> mult;
    for (int r0 = 0; r0 < std::max(R_, 1); r0 += br)
      for (int c0 = 0; c0 < std::max(C_, 1); c0 += bc) {
        const int r1 = std::min(R_, r0 + br), c1 = std::min(C_, c0 + bc);
        const float a =
            any_ ? amax_of(t, static_cast<std::size_t>(r0 / br) * t.nbc + c0 / bc, r0, r1, c0, c1, Reach::all)
                 : block_amax(r0, r1, c0, c1, Reach::all);
        mult.push_back(block_scale(a, q_.scales.emplace_back()));
      }
    if (any_) convert_rows(br, bc, t.nbc, mult);
  }
  if (packed)
    for (std::size_t i = 0; i < q_.scales.size(); i += 4) {
      std::uint32_t w = 0;
      for (std::size_t k = 0; k < 4 && i + k < q_.scales.size(); ++k)
        w |= static_cast<std::uint32_t>(q_.scales[i + k]) << (8 * k);
      q_.packed_scales.push_back(w);
    }
}

// TE delayed scaling: quantize with the current scale, then the state step (delayed_update: record this
// tensor's amax in slot 0, update the scale from the history and roll it; delayed_scaling.cu).
void Streaming::delayed(DelayedState& st) {
  if (st.history.empty()) st.history.assign(1024, 0.0f);
  const float s = st.scale;
  q_.block_rows = std::max(R_, 1);
  q_.block_cols = std::max(C_, 1);
  q_.scale_format = &formats::f32;
  q_.scales.assign(1, bits_of(1.0f / s));
  float tensor_amax = 0.0f;
  if (any_) {
    convert_rows(R_, C_, 1, std::vector<float>{s});
    tensor_amax = amax_of(block_amaxes(x_, R_, C_, Reach::all), 0, 0, R_, 0, C_, Reach::all);
  }
  delayed_update(st, tensor_amax, el_);  // the state step quantize_reference() and `lowbit state step` share
}

// OCP MX, one row of blocks at a time: the scales of the row (mx_row_codes, through the batch conversion
// for rceil / rne where the direct form does not cover the row), their multipliers, the row's elements in
// one scaled pass, then what the pass cannot give (mx_elements).
void Streaming::mx() {
  q_.block_rows = 1;
  q_.block_cols = o_.block;
  q_.scale_format = &formats::e8m0;
  if (!any_) {
    q_.scales.clear();
    return;
  }
  const Reach reach = o_.nonfinite == NonFinite::propagate ? Reach::finite : Reach::all;
  const bool fp32_multiply = o_.mx_rule == MxRule::rceil || o_.mx_rule == MxRule::rne;
  const int nbc = ceil_div(C_, o_.block);
  const int emax = emax_elem(el_);
  const int mantissa_bits = el_.mantissa_bits;
  std::vector<float> mults(static_cast<std::size_t>(nbc));
  q_.scales.resize(static_cast<std::size_t>(R_) * static_cast<std::size_t>(nbc));  // written by position
  std::size_t first = 0;  // the current row's first scale
  // rceil / rne: rules::mx_scale's conversion, prepared once.
  std::vector<float> descale(fp32_multiply ? static_cast<std::size_t>(nbc) : 0);
  std::vector<std::uint8_t> e8m0_codes(descale.size());
  const float inv_elem_max = 1.0f / elem_max_;
  const float one = 1.0f;
  std::unique_ptr<ScaledBatch> to_e8m0;
  if (fp32_multiply) {
    Policy sp;
    sp.rounding = o_.mx_rule == MxRule::rceil ? Rounding::rup : Rounding::rne;
    sp.overflow = Overflow::satfinite;
    sp.quirks.unsigned_negative = UnsignedNegative::magnitude;
    to_e8m0 = std::make_unique<ScaledBatch>(formats::e8m0, sp);
  }
  MxRowState row;
  // floor, ceil, even and rceil take a row in one pass where it allows it (ScaledBatch::run_blocks); rne's scales
  // are conversions, which only the general way makes.
  BlockRule one_pass{.emax = emax, .mantissa_bits = mantissa_bits, .elem_max = elem_max_};
  bool by_rows = true;
  switch (o_.mx_rule) {
    case MxRule::floor: one_pass.kind = BlockRuleKind::mx_floor; break;
    case MxRule::ceil: one_pass.kind = BlockRuleKind::mx_ceil; break;
    case MxRule::even: one_pass.kind = BlockRuleKind::mx_even; break;
    case MxRule::rceil: one_pass.kind = BlockRuleKind::mx_rceil; break;
    case MxRule::rne: by_rows = false; break;
  }
  banded(
      Band{.rows = 1, .cols = o_.block, .gather = {.reach = reach, .smallest_nonzero = !fp32_multiply}},
      [&](int r, int, const BlockAmaxes& t) {
        first = static_cast<std::size_t>(r) * static_cast<std::size_t>(nbc);
        std::uint64_t* sc = &q_.scales[first];
        const auto n = static_cast<std::size_t>(nbc);
        // Blocks whose scale is NaN whatever their amax (mx_row_codes): a NaN amax where NaN propagates,
        // and blocks holding NaN or Inf under scale-nan.
        const MxForced forced{.on_nan = static_cast<std::uint8_t>(o_.amax_propagates_nan && reach == Reach::all),
                              .on_nonfinite = static_cast<std::uint8_t>(o_.nonfinite == NonFinite::scale_nan)};
        const MxScaleRule rule{.rule = o_.mx_rule, .emax = emax, .elem_max = elem_max_, .mantissa_bits = mantissa_bits};
        // rceil / rne: rules::mx_scale is one conversion of a * fp32(1 / elem_max) into e8m0; the row's blocks
        // go through the batch path together unless mx_row_codes' direct form (rceil) covers every block.
        if (!mx_row_codes(t, forced, nullptr, n, rule, sc)) {
          for (std::size_t k = 0; k < n; ++k) descale[k] = t.value(k) * inv_elem_max;
          to_e8m0->run(descale.data(), n, &one, n, e8m0_codes.data(), nullptr);
          mx_row_codes(t, forced, e8m0_codes.data(), n, rule, sc);
        }
        // x * 2^(127 - e) as TE and torchao form it: e = 254 gives the f32 subnormal 2^-127.
        const MxRowSummary summary = mx_row_multipliers(sc, t.nan.data(), n, mults.data());
        row.nan_scale = summary.nan_scale;
        if (!fp32_multiply) {
          // The OCP rules divide by the power of two exactly: the same fp32 multiplication whenever its
          // result is a normal number (or the input is zero or infinite); the rest take the exact scalar
          // route, and a NaN input stays itself.  A row that may hold such an element is done again through
          // a row of products (rare; doing it again where nothing needed it gives the same codes).  Which
          // rows: y = v * 2^(127 - e) cannot overflow (the scale comes from the block's amax, and e >= the
          // floor rule's e), so y is not normal only for a NaN v (the block's NaN flag), a NaN scale (its
          // multiplier is 0), or a non-zero |v| < 2^(e - 253); the row's smallest non-zero |v| against its
          // largest e decides the last.  2^(e_max - 253) as an f32 pattern (0 below the smallest
          // subnormal: no non-zero |v| lies under it).
          const std::uint32_t below = rules::mx_normal_product_floor(summary.e_max);
          row.special = summary.nan_scale || summary.nan_block || (below != 0 && t.min_nonzero_m1 < below - 1);
        }
        return mults.data();
      },
      [&](int r) { mx_elements(r, mults, first, row); }, by_rows ? &one_pass : nullptr);
}

// What the scaled pass over an MX row cannot give: in a row that may hold them, the elements of the OCP
// rules' exact route (rules::mx_needs_exact) and the NaN inputs (which convert as themselves); the elements
// of NaN-scale blocks (the element format's NaN conversion).
void Streaming::mx_elements(int r, const std::vector<float>& mults, std::size_t first, const MxRowState& row) {
  const int bc = o_.block;
  fix_.clear();
  // The row's streamed codes are ordered before the ordinary stores below that replace some of them.
  if (row.special || row.nan_scale) finish();
  if (row.special) {
    row_multiply(&x_.data[idx(r, 0)], C_, bc, mults.data(), buf_.data());
    for (int c0 = 0, blk = 0; c0 < C_; c0 += bc, ++blk) {
      if (q_.scales[first + static_cast<std::size_t>(blk)] == 0xFF) continue;
      for (int c = c0; c < std::min(C_, c0 + bc); ++c) {
        const float v = at(r, c);
        const float y = buf_[static_cast<std::size_t>(c)];
        if (std::isnan(v)) buf_[static_cast<std::size_t>(c)] = v;
        else if (rules::mx_needs_exact(v, y)) fix_.push_back(c);
      }
    }
    convert_row(r);
  }
  if (row.nan_scale) {
    const Unpacked nan_in = unpack(formats::f32, 0x7FC00000u);
    for (int c0 = 0, blk = 0; c0 < C_; c0 += bc, ++blk) {
      if (q_.scales[first + static_cast<std::size_t>(blk)] != 0xFF) continue;
      for (int c = c0; c < std::min(C_, c0 + bc); ++c)
        q_.codes[idx(r, c)] = static_cast<std::uint8_t>(round_to(el_, nan_in, p_, rb(idx(r, c))).code);
    }
  }
  for (int c : fix_) {
    const int se = static_cast<int>(q_.scales[first + static_cast<std::size_t>(c / bc)]) - 127;
    q_.codes[idx(r, c)] = static_cast<std::uint8_t>(to_element_scaled(at(r, c), se, el_, p_, rb(idx(r, c))));
  }
}

// Two-level NVFP4: TE core_nvfp4.cuh / quantize_transpose_nvfp4.cuh, docs/semantics.md §4 steps 1-7; the
// variant's row gives scale_max, the multiplier and how each block's scale is chosen.
void Streaming::nvfp4() {
  const VariantRow& variant = variant_row(o_.variant);
  const int br = block_size(scheme_row(o_.scheme).block_rows, R_, o_.block_rows);
  const bool map_to_6 = variant.choice == BlockChoice::map_to_6;
  // The tensor amax first (a NaN anywhere, where NaN propagates: block_amax over the tensor).  4over6 reads
  // every block's amax after it, so it gathers the whole table of block amaxes; map-to-6 reads the tensor
  // once for its amax alone (the tensor scheme's pass) and gathers each band's block amaxes in banded, while
  // the band is in the cache for its conversion.
  BlockAmaxes t;
  float global = 0.0f;
  if (any_ && !map_to_6) {
    t = block_amaxes(x_, br, 16, Reach::all);
    if (o_.amax_propagates_nan && std::find(t.nan.begin(), t.nan.end(), 1) != t.nan.end())
      global = block_amax(0, R_, 0, C_, Reach::all);
    else global = float_of(*std::max_element(t.bits.begin(), t.bits.end()));
  } else if (any_ && !o_.tensor_amax) {
    BlockAmaxes whole;
    band_amaxes(x_, 0, R_, C_, Gather{}, whole);
    global = o_.amax_propagates_nan && whole.nan[0] ? block_amax(0, R_, 0, C_, Reach::all) : whole.value(0);
  }
  if (o_.tensor_amax) global = *o_.tensor_amax;  // fused projections' shared amax
  const bool torchao = variant.order == Order::torchao;  // S_dec = amax / 2688 itself
  const float s_dec = torchao ? rules::torchao_tensor_dec(global)
                              : 1.0f / rules::nvfp4_s_enc(global, variant.scale_max, elem_max_);  // 2688 (1536) / amax
  const float s_enc = torchao ? 1.0f / s_dec : rules::nvfp4_s_enc(global, variant.scale_max, elem_max_);
  q_.tensor_scale = bits_of(s_dec);
  q_.scale_format = &formats::e4m3;
  q_.block_rows = br;
  q_.block_cols = 16;
  if (!map_to_6) return four_over_six(t, br, global, s_enc, s_dec);
  if (!any_) {
    q_.scales.clear();
    return;
  }
  // Each code's element multiplier (step 6), from a table over the 256 codes.
  std::array<float, 256> mult_of{};
  for (std::size_t sc = 0; sc < mult_of.size(); ++sc)
    mult_of[sc] = rules::nvfp4_multiplier(sc, s_enc, s_dec, variant.multiplier, o_.zero_scale);
  // One row of blocks at a time: step 5 for each block, the block decode scales into e4m3 through the
  // batch path (as the scalar conversion with r = 0 under rne), then the rows' elements.
  const auto nbc = static_cast<std::size_t>(ceil_div(C_, 16));
  const float enc_sixth = s_enc * rules::nvfp4_sixth();
  std::vector<float> block_dec(nbc), mults(nbc);
  Policy sat;
  sat.overflow = Overflow::satfinite;
  const ScaledBatch to_scale(formats::e4m3, sat);  // times 1: the conversion of block_dec itself
  const float one = 1.0f;
  std::vector<std::uint8_t> block_codes(nbc);
  q_.scales.resize(static_cast<std::size_t>(ceil_div(R_, br)) * nbc);  // written by position
  // Bands of one row go through the one pass where it takes them (its rule is TE's step 5; torchao's order is not).
  const BlockRule one_pass{.kind = BlockRuleKind::nvfp4, .enc_sixth = enc_sixth, .multipliers = mult_of.data()};
  banded(
      Band{.rows = br, .cols = 16},
      [&](int r0, int r1, const BlockAmaxes& band) {
        for (std::size_t k = 0; k < nbc; ++k)  // fminf(v, FLT_MAX): a NaN v gives FLT_MAX
          block_dec[k] = torchao ? rules::torchao_block_dec(band.value(k), s_dec)
                                 : rules::nvfp4_block_dec(band.value(k), enc_sixth);
        if (o_.amax_propagates_nan)  // a block holding a NaN: its amax from amax_of (that NaN)
          for (std::size_t k = 0; k < nbc; ++k) {
            if (!band.nan[k]) continue;
            const int c0 = static_cast<int>(k) * 16;
            const float ba = amax_of(band, k, r0, r1, c0, std::min(C_, c0 + 16), Reach::all);
            block_dec[k] = torchao ? rules::torchao_block_dec(ba, s_dec) : std::fmin(ba * enc_sixth, FLT_MAX);
          }
        to_scale.run(block_dec.data(), nbc, &one, nbc, block_codes.data(), nullptr);
        const std::size_t first = static_cast<std::size_t>(r0 / br) * nbc;
        std::copy(block_codes.begin(), block_codes.end(), q_.scales.begin() + static_cast<std::ptrdiff_t>(first));
        for (std::size_t k = 0; k < nbc; ++k) mults[k] = mult_of[block_codes[k]];
        return mults.data();
      },
      [](int) {}, torchao ? nullptr : &one_pass);
}

// 4over6, after TE's quantize_4over6 kernel (NVIDIA/TransformerEngine
// transformer_engine/common/cast/nvfp4/quantize_4over6_kernel.cuh at commit fca9586d, and the reference
// quantizer in transformer_engine/pytorch/custom_recipes/quantization_ref_nvfp4.py).  Per block: base =
// fp32(block_amax / 6) * S_enc; the map-to-6 scale is e4m3(fminf(base, 448)), the map-to-4 scale
// e4m3(fminf(base * 1.5, 448)); each candidate converts its elements with its own step-6 multiplier.  Its
// error sums, element by element in column order from +0, |d| (or d * d) with d = fp32(fp32(fp32(e2m1
// value * scale) * global_amax) / 1536) - x; a 16x16 block adds its sixteen row sums as a halving tree (row
// i + row i+8, then i + i+4, i + i+2, i + i+1).  map-to-4 is kept only when its error is strictly smaller
// (a tie or a NaN keeps map-to-6).  Here the whole tensor converts under each candidate, then each block
// picks.
void Streaming::four_over_six(const BlockAmaxes& t, int br, float global, float s_enc, float s_dec) {
  const VariantRow& variant = variant_row(o_.variant);
  const bool mse = variant.choice == BlockChoice::least_squared_error;
  const float denom = elem_max_ * variant.scale_max;   // 1536
  const float scale_max_e4m3 = max_of(formats::e4m3);  // the block scale's own bound stays 448
  Policy sat;
  sat.overflow = Overflow::satfinite;
  std::vector<std::uint64_t> sc4, sc6;
  std::vector<float> m4, m6;
  for (int r0 = 0; r0 < R_; r0 += br)
    for (int c0 = 0; c0 < C_; c0 += 16) {
      const int r1 = std::min(R_, r0 + br), c1 = std::min(C_, c0 + 16);
      const float ba = amax_of(t, static_cast<std::size_t>(r0 / br) * t.nbc + c0 / 16, r0, r1, c0, c1, Reach::all);
      const float base = ba / elem_max_ * s_enc;
      sc4.push_back(to_element(std::fmin(base * 1.5f, scale_max_e4m3), formats::e4m3, sat, 0));
      sc6.push_back(to_element(std::fmin(base, scale_max_e4m3), formats::e4m3, sat, 0));
      m4.push_back(rules::nvfp4_multiplier(sc4.back(), s_enc, s_dec, Multiplier::reciprocal, o_.zero_scale));
      m6.push_back(rules::nvfp4_multiplier(sc6.back(), s_enc, s_dec, Multiplier::reciprocal, o_.zero_scale));
    }
  if (any_) {
    convert_rows(br, 16, t.nbc, m4);
    finish();
    const auto codes4 = q_.codes;
    convert_rows(br, 16, t.nbc, m6);
    finish();
    // One row's error over columns [c0, c1) for candidate codes `cd` under block scale code `sc`.
    auto row_error = [&](const auto& cd, int r, int c0, int c1, std::uint64_t sc) {
      const float sf = static_cast<float>(code_value(formats::e4m3, sc));
      float e = 0.0f;
      for (int c = c0; c < c1; ++c) {
        const float dq = static_cast<float>(code_value(el_, cd[idx(r, c)]));
        const float d = dq * sf * global / denom - at(r, c);
        e = e + (mse ? d * d : std::fabs(d));
      }
      return e;
    };
    auto block_error = [&](const auto& cd, int r0, int c0, int c1, std::uint64_t sc) {
      if (br == 1) return row_error(cd, r0, c0, c1, sc);
      float v[16] = {};
      for (int i = 0; i < 16 && r0 + i < R_; ++i) v[i] = row_error(cd, r0 + i, c0, c1, sc);
      for (int half = 8; half > 0; half /= 2)
        for (int i = 0; i < half; ++i) v[i] = v[i] + v[i + half];
      return v[0];
    };
    std::size_t b = 0;
    for (int r0 = 0; r0 < R_; r0 += br)
      for (int c0 = 0; c0 < C_; c0 += 16, ++b) {
        const int r1 = std::min(R_, r0 + br), c1 = std::min(C_, c0 + 16);
        const bool pick4 = block_error(codes4, r0, c0, c1, sc4[b]) < block_error(q_.codes, r0, c0, c1, sc6[b]);
        if (!pick4) continue;
        sc6[b] = sc4[b];
        for (int r = r0; r < r1; ++r)
          for (int c = c0; c < c1; ++c) q_.codes[idx(r, c)] = codes4[idx(r, c)];
      }
  }
  q_.scales = std::move(sc6);
}

// torchao 0.18 single-level NVFP4: scale = fp32(block_amax / 6) clamped to [2^-6, 448] (a zero block gets
// 2^-6, code 0x08), stored as e4m3; elements x * fp32(1 / scale) in fp32.
void Streaming::nvfp4_1level() {
  q_.scales.clear();
  q_.scale_format = &formats::e4m3;
  q_.block_rows = 1;
  q_.block_cols = 16;
  Policy sat;
  sat.overflow = Overflow::satfinite;
  const BlockAmaxes t = any_ ? block_amaxes(x_, 1, 16, Reach::all) : BlockAmaxes{};
  std::vector<float> scales_f;
  for (int r = 0; r < R_; ++r)
    for (int c0 = 0; c0 < C_; c0 += 16) {
      const int c1 = std::min(C_, c0 + 16);
      float s = amax_of(t, static_cast<std::size_t>(r) * t.nbc + c0 / 16, r, r + 1, c0, c1, Reach::all) / elem_max_;
      s = std::clamp(s, 0x1p-6f, 448.0f);
      const std::uint64_t sc = to_element(s, formats::e4m3, sat, 0);
      q_.scales.push_back(sc);
      scales_f.push_back(1.0f / static_cast<float>(code_value(formats::e4m3, sc)));
    }
  if (any_) convert_rows(1, 16, t.nbc, scales_f);
}

}  // namespace

void quantize_into(const Tensor& xin, const Options& oin, Quantized& q, const std::vector<std::uint32_t>* rbits,
                   DelayedState* state) {
  Options o = oin;
  require_resolved(o);
  if (is_stochastic(o.element_policy.rounding) && (!rbits || rbits->size() != xin.data.size()))
    throw std::invalid_argument("stochastic rounding needs one random value per element");
  // The exporters' variants have no streaming form: they check exporters' checkpoints, one weight at a time,
  // and their definition (scale_reference.cpp) is their only path.
  if (variant_row(o.variant).exporter) {
    q = quantize_reference(xin, o, rbits, state);
    return;
  }
  // torchao's to_mx neither: its NaN and Inf blocks and its RCEIL fallback are its definition's alone.
  if (o.variant == Variant::torchao && scheme_row(o.scheme).family == Family::mx) {
    q = quantize_reference(xin, o, rbits, state);
    return;
  }
  Tensor transformed;
  const bool transforms = o.hadamard != Hadamard::none;
  if (transforms) transformed = hadamard_transform(xin, o.hadamard);
  const Tensor& x = transforms ? transformed : xin;
  // A fresh result that keeps the previous one's storage: codes of the same count are kept as they are (every
  // writer below overwrites whole rows), others start empty as in a new Quantized.
  std::vector<std::uint8_t> codes = std::move(q.codes);
  std::vector<std::uint64_t> scales = std::move(q.scales);
  std::vector<std::uint32_t> packed_scales = std::move(q.packed_scales);
  // The scale list is kept too: a family that writes its scales by position sizes it (a list of the same size is
  // then not written twice), the others empty it (Streaming).
  if (codes.size() != x.data.size()) codes.clear();
  packed_scales.clear();
  q = Quantized{};
  q.codes = std::move(codes);
  q.scales = std::move(scales);
  q.packed_scales = std::move(packed_scales);
  q.scheme = o.scheme;
  q.element = o.element;
  q.rows = x.rows;
  q.cols = x.cols;
  Streaming pass(x, o, rbits, q);
  DelayedState local;
  switch (scheme_row(o.scheme).family) {
    case Family::current: pass.current(); break;
    case Family::delayed: pass.delayed(state ? *state : local); break;
    case Family::mx: pass.mx(); break;
    case Family::nvfp4: pass.nvfp4(); break;
    case Family::nvfp4_1level: pass.nvfp4_1level(); break;
  }
  pass.finish();
  q.codes.resize(x.data.size());  // every row was written (grow_to); this only covers an empty tensor
}

Quantized quantize(const Tensor& x, const Options& o, const std::vector<std::uint32_t>* rbits, DelayedState* state) {
  Quantized q;
  quantize_into(x, o, q, rbits, state);
  return q;
}

std::vector<double> dequantize(const Quantized& q) {
  std::vector<double> out(q.codes.size());
  const int sc_cols = q.scale_cols();
  double ts = q.tensor_scale ? static_cast<double>(float_of(*q.tensor_scale)) : 1.0;
  if (q.global_scale) ts = 1.0 / static_cast<double>(float_of(*q.global_scale));  // compressed-tensors' encode scale
  for (int r = 0; r < q.rows; ++r)
    for (int c = 0; c < q.cols; ++c) {
      const std::size_t i = static_cast<std::size_t>(r) * q.cols + c;
      const std::size_t si = static_cast<std::size_t>(r / q.block_rows) * sc_cols + c / q.block_cols;
      const double s = code_value(*q.scale_format, q.scales[si]);
      out[i] = code_value(*q.element, q.codes[i]) * s * ts;
    }
  return out;
}

}  // namespace lowbit::scale
