// The (target, policy) pairs of the f32 conversion digests (lowbit/conversion_digest.hpp): every built-in
// format under each profile's default policy for it (policy_pairs.hpp), then the element/policy pairs of
// the 32-bit path's proof that are not among them (the device quantizers' element policies and the
// scale rules', fast_support.hpp), each once.  The committed file lists exactly these, in this order.
#pragma once
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <vector>

#include "../fast_convert/fast_support.hpp"
#include "lowbit/batch.hpp"
#include "lowbit/conversion_digest.hpp"
#include "lowbit/fast_convert.hpp"
#include "lowbit/policy_pairs.hpp"

namespace lowbit::digest_test {

struct DigestPair {
  const Format* target;
  Policy policy;
  std::string labels;
  bool fast;  // the 32-bit path applies from f32: the generator checks it on every input too
};

inline std::vector<DigestPair> digest_pairs() {
  std::vector<DigestPair> out;
  auto add = [&](const Format& to, const Policy& p, const std::string& labels) {
    for (DigestPair& d : out)
      if (same_format(*d.target, to) && same_policy_value(d.policy, p)) {
        d.labels += "," + labels;
        return;
      }
    out.push_back({&to, p, labels, fast::applies(formats::f32, to, p)});
  };
  for (const Format& f : formats::builtin)
    for (const DefaultPolicy& d : default_policies(f)) add(*d.target, d.policy, d.labels);
  for (const fast_test::Pair& p : fast_test::proof_pairs()) {
    bool present = false;
    for (const DigestPair& d : out) present |= same_format(*d.target, *p.to) && same_policy_value(d.policy, p.policy);
    if (!present) add(*p.to, p.policy, p.why);
  }
  return out;
}

// One block of consecutive f32 inputs through the batch conversion twice, with flags and ternary and with
// codes alone, for holding it against lowbit::convert input by input (the digest sweep and batch.Full).
struct BatchBlock {
  static constexpr std::uint64_t size = std::uint64_t{1} << 16;
  std::vector<std::uint32_t> in = std::vector<std::uint32_t>(size);
  std::vector<std::uint16_t> codes = std::vector<std::uint16_t>(size), codes_only = std::vector<std::uint16_t>(size);
  std::vector<std::uint8_t> flags = std::vector<std::uint8_t>(size);
  std::vector<std::int8_t> ternary = std::vector<std::int8_t>(size);
  bool wide = false;  // two-byte codes

  void run(const Format& to, const Policy& p, std::uint64_t first) {
    wide = batch_code_bytes(to) == 2;
    for (std::uint64_t i = 0; i < size; ++i) in[i] = static_cast<std::uint32_t>(first + i);
    convert_batch(formats::f32, in.data(), size, to, p, codes.data(), flags.data(), ternary.data(), nullptr);
    convert_batch(formats::f32, in.data(), size, to, p, codes_only.data(), nullptr, nullptr, nullptr);
  }
  std::uint64_t code(std::size_t k) const {
    return wide ? codes[k] : reinterpret_cast<const std::uint8_t*>(codes.data())[k];
  }
  std::uint64_t code_only(std::size_t k) const {
    return wide ? codes_only[k] : reinterpret_cast<const std::uint8_t*>(codes_only.data())[k];
  }
  bool matches(std::size_t k, const Result& want) const {
    return code(k) == want.code && code_only(k) == want.code && flags[k] == want.flags && ternary[k] == want.ternary;
  }
};

// One chunk's digest through lowbit::convert, and the inputs on which the faster paths differ from it
// (with the first of each): the 32-bit path where it applies, and the batch conversion where its vector
// kernel takes the pair (batch_supported), both with flags and ternary and with codes alone.  The reference
// converts each input once and every path is held against that one answer.
struct ChunkResult {
  std::uint64_t digest = 0;
  std::uint64_t fast_mismatches = 0;
  std::uint32_t first_mismatch = 0;
  std::uint64_t batch_mismatches = 0;
  std::uint32_t first_batch_mismatch = 0;
};

namespace detail {

// The lowbit::convert results of one block of inputs, as arrays: the digest terms and the batch comparison run
// over them in a second loop (block_terms, block_batch_mismatches), which vectorises where the first, one call of
// convert per input, cannot.
struct Wanted {
  std::vector<std::uint64_t> code = std::vector<std::uint64_t>(BatchBlock::size);
  std::vector<std::uint8_t> flags = std::vector<std::uint8_t>(BatchBlock::size);
  std::vector<std::int8_t> ternary = std::vector<std::int8_t>(BatchBlock::size);
};

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define LOWBIT_DIGEST_CLONES [[gnu::target_clones("arch=x86-64-v4", "default")]]
#else
#define LOWBIT_DIGEST_CLONES
#endif

// The sum of digest::term over a block whose first input is `first`.
LOWBIT_DIGEST_CLONES inline std::uint64_t block_terms(std::uint64_t first, const Wanted& w) {
  std::uint64_t sum = 0;
  for (std::uint64_t k = 0; k < BatchBlock::size; ++k)
    sum += digest::term(first + k, Result{w.code[k], w.flags[k], w.ternary[k]});
  return sum;
}

// How many inputs of the block the batch conversion answers otherwise (code with and without the flags, flags,
// ternary), and the first of them (its offset in the block) in *first.
template <class Code>
LOWBIT_DIGEST_CLONES inline std::uint64_t block_mismatches(const Code* codes, const Code* codes_only, const BatchBlock& blk,
                                                           const Wanted& w, std::uint64_t* first) {
  std::uint64_t count = 0;
  for (std::uint64_t k = 0; k < BatchBlock::size; ++k)
    count += (codes[k] != w.code[k]) | (codes_only[k] != w.code[k]) | (blk.flags[k] != w.flags[k]) |
             (blk.ternary[k] != w.ternary[k]);
  if (count != 0)
    for (std::uint64_t k = 0; k < BatchBlock::size; ++k)
      if (!blk.matches(k, Result{w.code[k], w.flags[k], w.ternary[k]})) {
        *first = k;
        break;
      }
  return count;
}

template <typename Target>
[[gnu::flatten]] ChunkResult chunk_digest_with(const DigestPair& p, int chunk, Target target) {
  const Format& to = target();
  ChunkResult r;
  const bool batch = batch_supported(formats::f32, to, p.policy);
  BatchBlock blk;
  Wanted w;
  const std::uint64_t begin = static_cast<std::uint64_t>(chunk) * digest::k_chunk;
  for (std::uint64_t b = begin; b < begin + digest::k_chunk; b += BatchBlock::size) {
    if (batch) blk.run(to, p.policy, b);
    for (std::uint64_t i = b; i < b + BatchBlock::size; ++i) {
      const auto c = static_cast<std::uint32_t>(i);
      const Result want = convert(formats::f32, c, to, p.policy);
      w.code[i - b] = want.code;
      w.flags[i - b] = want.flags;
      w.ternary[i - b] = want.ternary;
      if (p.fast && !(fast::convert(formats::f32, c, to, p.policy) == want)) {
        if (r.fast_mismatches++ == 0) r.first_mismatch = c;
      }
    }
    r.digest += block_terms(b, w);
    if (!batch) continue;
    std::uint64_t at = 0;
    const std::uint64_t bad =
        blk.wide ? block_mismatches(blk.codes.data(), blk.codes_only.data(), blk, w, &at)
                 : block_mismatches(reinterpret_cast<const std::uint8_t*>(blk.codes.data()),
                                    reinterpret_cast<const std::uint8_t*>(blk.codes_only.data()), blk, w, &at);
    if (bad != 0 && r.batch_mismatches == 0) r.first_batch_mismatch = static_cast<std::uint32_t>(b + at);
    r.batch_mismatches += bad;
  }
  return r;
}

// The built-in row equal to the pair's target as a constant (same_format: every field that conversion
// reads), else the pair's own row.
template <std::size_t I = 0>
ChunkResult chunk_digest_dispatch(const DigestPair& p, int chunk) {
  if constexpr (I < std::size(formats::builtin)) {
    if (same_format(*p.target, formats::builtin[I]))
      return chunk_digest_with(p, chunk, []() -> const Format& { return formats::builtin[I]; });
    return chunk_digest_dispatch<I + 1>(p, chunk);
  } else {
    return chunk_digest_with(p, chunk, [&p]() -> const Format& { return *p.target; });
  }
}

}  // namespace detail

inline ChunkResult chunk_digest(const DigestPair& p, int chunk) { return detail::chunk_digest_dispatch(p, chunk); }

}  // namespace lowbit::digest_test
