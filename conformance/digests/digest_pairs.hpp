// The (target, policy) pairs of the f32 conversion digests (lowbit/conversion_digest.hpp): every built-in
// format under each profile's default policy for it (policy_pairs.hpp), then the element/policy pairs of
// the 32-bit path's proof that are not among them (the device quantizers' element policies and the
// scale rules', fast_support.hpp), each once.  The committed file lists exactly these, in this order.
#pragma once
#include <string>
#include <vector>

#include "../fast_convert/fast_support.hpp"
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

// One chunk's digest through lowbit::convert, and (where the 32-bit path applies) the number of inputs
// on which fast::convert differs from it, with the first one.
struct ChunkResult {
  std::uint64_t digest = 0;
  std::uint64_t fast_mismatches = 0;
  std::uint32_t first_mismatch = 0;
};
inline ChunkResult chunk_digest(const DigestPair& p, int chunk) {
  ChunkResult r;
  const std::uint64_t begin = static_cast<std::uint64_t>(chunk) * digest::k_chunk;
  for (std::uint64_t i = begin; i < begin + digest::k_chunk; ++i) {
    const auto c = static_cast<std::uint32_t>(i);
    const Result want = convert(formats::f32, c, *p.target, p.policy);
    r.digest += digest::term(i, want);
    if (p.fast && !(fast::convert(formats::f32, c, *p.target, p.policy) == want)) {
      if (r.fast_mismatches++ == 0) r.first_mismatch = c;
    }
  }
  return r;
}

}  // namespace lowbit::digest_test
