// Batch conversion: many codes of f32, bf16 or f16 into one format of at most 16 bits, vectorised with
// Highway (runtime dispatch to the best instruction set the CPU has).
//
// The contract is equality with the scalar fast path (convert.hpp) bit for bit: the code, the flags and
// the ternary value of every element, for every target row (built-in, parametric, P3109) and every
// policy (all roundings including the stochastic ones, overflow, subnormal and tininess modes, quirks).
// The conformance suite (conformance/batch/) checks that exhaustively over 16-bit sources and over every
// f32 for the common targets.  Pairs the vector kernel does not cover run the scalar loop instead, so
// convert_batch is correct for every pair; batch_supported says which path a pair takes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "lowbit/format.hpp"
#include "lowbit/policy.hpp"

namespace lowbit {

// Does the vector kernel handle this pair and policy?  Sources: rows with the fields of f32, bf16 or
// f16 (the name does not matter); targets: at most 16 storage bits, no code shift, an exponent range
// that keeps the kernel's 32-bit lane arithmetic exact.  A stochastic policy also needs
// 1 <= sr_bits <= 32.
bool batch_supported(const Format& from, const Format& to);
bool batch_supported(const Format& from, const Format& to, const Policy& p);

// Bytes per output code: 1 for targets of at most 8 storage bits (sub-byte codes are not packed),
// 2 for 9 to 16, 4 for 17 to 32, 8 above.
std::size_t batch_code_bytes(const Format& to);

// Convert n codes of `from` (packed little-endian in its storage width: 4 bytes for f32, 2 for bf16
// and f16) into `to`.  out_codes receives batch_code_bytes(to) bytes per element.  flags and ternary
// (nullable) receive the Result's flags and ternary per element.  rbits holds the random value of each
// element for the stochastic modes (it must then be non-null; R < 2^sr_bits as for convert()); it is
// ignored otherwise.  Inputs must be valid codes of `from`.
void convert_batch(const Format& from, const void* in, std::size_t n, const Format& to, const Policy& p,
                   void* out_codes, std::uint8_t* flags, std::int8_t* ternary, const std::uint32_t* rbits);

// The same contract computed one element at a time with lowbit::convert (the fallback; also the
// baseline the benchmarks and tests compare against).  Any source of up to 64 bits, any target.
void convert_batch_scalar(const Format& from, const void* in, std::size_t n, const Format& to, const Policy& p,
                          void* out_codes, std::uint8_t* flags, std::int8_t* ternary, const std::uint32_t* rbits);

// The per-block scale rules ScaledBatch::run_blocks computes in its vectors, each the scalar rule of
// scale_rules.hpp restated over lanes (conformance/scale's oracle holds the schemes that use it against
// their reference under every SIMD target).  The block's amax a is its largest |x| (finite: a row holding a
// NaN or an infinity is left to the caller).
//  - mx_floor, mx_ceil, mx_even: rules::mx_scale's code from a's bits (emax, mantissa_bits), the multiplier
//    rules::mx_multiplier of it; a row with a non-zero element whose product would not be a normal f32 number
//    (the OCP rules' exact route, rules::mx_needs_exact) is left to the caller.
//  - mx_rceil: the code of fp32(a * fp32(1 / elem_max)) rounded up into e8m0 where that quotient is a normal
//    number whose code stays below 255 (other blocks leave the row to the caller), the multiplier as above.
//  - current: TE's compute_scale_from_amax (rules::scale_from_amax with value_for_inf = FLT_MAX, elem_max as
//    the format's largest value, eps, and the pow2 rounding when `pow2`); the multiplier is the scale s and
//    the scale code the bits of fp32(1 / s).
//  - nvfp4: TE's NVFP4 block scale (step 5 of docs/semantics.md §4): the e4m3 code, rounded to nearest even and
//    saturated, of rules::nvfp4_block_dec(a, enc_sixth); the multiplier multipliers[code] (256 entries, the
//    scheme's step-6 multiplier of each code).
// Every rule also leaves to the caller a row where a block's amax times its multiplier is not a finite number
// (the pass converts finite products only).
enum class BlockRuleKind : std::uint8_t { mx_floor, mx_ceil, mx_even, mx_rceil, current, nvfp4 };
struct BlockRule {
  BlockRuleKind kind = BlockRuleKind::mx_floor;
  int emax = 0;                        // MX: the element's largest power of two
  int mantissa_bits = 0;               // mx_even: the element's mantissa width
  float elem_max = 0.0f;               // mx_rceil and current: the element's largest finite value
  float eps = 0.0f;                    // current
  bool pow2 = false;                   // current: the scale rounded down to a power of two
  float enc_sixth = 0.0f;              // nvfp4: S_enc * fp32(1 / 6)
  const float* multipliers = nullptr;  // nvfp4: the multiplier of each e4m3 scale code
};

// A scaled conversion prepared once for many calls: the element codes of fp32(in[i] * mult[i / block]),
// i.e. one IEEE fp32 multiplication (round to nearest even, subnormals kept) and then convert_batch's
// conversion of the product from f32 into `to`, bit for bit what convert() gives for that product.  This
// is the inner step of every scaling scheme (scale.cpp): multiplying in the conversion's own pass saves
// writing and re-reading a row of products, and preparing the per-call tables once saves their set-up on
// every row.
//
// NaN rule (the one scale.cpp defines for its fp32 step): a NaN multiplier gives that NaN bit for bit
// whatever in[i] is; a NaN in[i] with a non-NaN multiplier gives in[i] quieted, as the fp32
// multiplication does.  block >= 1 (1: one multiplier per element).  Codes are batch_code_bytes(to)
// bytes each; rbits as for convert_batch.
// How ScaledBatch writes its codes.  cached: ordinary stores, the codes stay in the cache for a caller that reads
// them next.  streaming: non-temporal stores where the vector kernel can make them (one-byte codes, whole
// vectors of at least 16 bytes at addresses aligned to them; the rest as `cached`), for a caller that writes a
// large tensor's codes once and reads them no more: the stores do not read the lines they fill, so the codes
// cost one write to memory instead of a read and a write.  The codes are the same either way; the caller calls
// flush() before it hands them on.
enum class CodeStores : std::uint8_t { cached, streaming };

class ScaledBatch {
 public:
  ScaledBatch(const Format& to, const Policy& p, CodeStores stores = CodeStores::cached);
  ~ScaledBatch();
  ScaledBatch(const ScaledBatch&) = delete;
  ScaledBatch& operator=(const ScaledBatch&) = delete;

  // `ahead` (optional) is where the caller will read next: the loop asks for ahead[i] while it converts
  // in[i], spreading those requests over the conversion (without it, it asks for in[i + 512]).
  void run(const float* in, std::size_t n, const float* mult, std::size_t block, void* out_codes,
           const std::uint32_t* rbits, const float* ahead = nullptr) const;
  // One pass over rows of blocks that scales and converts them where the rows allow it: a block's scale is
  // computed from its largest |x| by `rule` (BlockRule above) before any of its elements is converted, and its
  // elements converted as run() converts them with that multiplier, the input read once from memory.  Row r
  // (r < rows) is in[r * n, (r + 1) * n), cut into n / block blocks; its codes go to out_codes + r * n and its
  // blocks' scale codes to scales + r * (n / block).  row_ok[r] is set to 1 for a row done so, and to 0 for a row
  // left to the caller, whose codes and scales are then unspecified: every row when takes_blocks(n, block) is
  // false, else a row holding a NaN or an infinity, or a block or element the rule's fast form does not give
  // (BlockRule).  `end` bounds what the pass asks ahead for (the end of the tensor the rows lie in).  Returns the
  // number of rows done.
  std::size_t run_blocks(const float* in, std::size_t rows, std::size_t n, std::size_t block, const BlockRule& rule,
                         std::uint8_t* out_codes, std::uint64_t* scales, std::uint8_t* row_ok, const float* end) const;
  // Whether run_blocks takes rows of n values in blocks of `block` under this conversion at all: whole vectors of
  // the vector kernel per block, whole blocks per row, one-byte codes, round to nearest even (whether a given
  // row's values allow it is known only by running it).
  bool takes_blocks(std::size_t n, std::size_t block) const;
  // Under CodeStores::streaming: orders the codes written so far before every later store (a fence), so that
  // another thread that is handed them sees them; the destructor does it too.  Nothing under `cached`.
  void flush() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Block maxima of |x| as f32 bit patterns (sign cleared), the first pass of every block-scaled scheme
// (scale.cpp): for each block k of `block` (>= 1) consecutive values of in[0, n), the last one possibly cut
// short by n, top[k] = max(top[k], max over the block of (bits(x) & 0x7FFFFFFF)).  For values >= +0 the order
// of patterns is the order of values; an infinity's pattern is 0x7F800000 and a NaN's is above it, so one
// maximum also tells whether a block holds a NaN or an infinity.  With min_m1 non-null, also
// *min_m1 = min(*min_m1, min over in[0, n) of (|x| pattern - 1)) in wrapping 32-bit arithmetic: the smallest
// non-zero |x| pattern less one (a zero gives 0xFFFFFFFF, also the value when there is none).
void block_abs_max_bits(const float* in, std::size_t n, std::size_t block, std::uint32_t* top,
                        std::uint32_t* min_m1);

// The instruction set the dispatcher picks on this machine (for example "AVX3" or "AVX2").
const char* batch_target_name();

}  // namespace lowbit
