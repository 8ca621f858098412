// Digests of conversions over every f32 input: how the host's answers travel to a GPU run without the
// GPU waiting for the host.  For one target and policy, the 2^32 f32 inputs fall into chunks of 2^24
// consecutive codes; a chunk's digest is the sum (mod 2^64) of term(i, convert(f32, i, target, policy))
// over its inputs i.  A sum does not depend on the order the terms are added in, so a GPU reduces it with
// atomics and the host in any order; a wrong code, flag or ternary in any element changes the sum except
// with probability about 2^-64.
//
// The digest file (device/digests/f32_conversions.txt, written by lowbit_conversion_digests in the full
// tier) holds, for each pair, the target, the whole policy (whole_policy_text, lowbit/policy_pairs.hpp) and its 256 chunk digests.
// term() is LOWBIT_HD (the device reduction calls it); the file functions are host only.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "lowbit/hd.hpp"
#include "lowbit/policy.hpp"

namespace lowbit::digest {

inline constexpr int k_chunk_bits = 24;
inline constexpr std::uint64_t k_chunk = std::uint64_t{1} << k_chunk_bits;
inline constexpr int k_chunks = 1 << (32 - k_chunk_bits);  // chunks of the f32 inputs
inline constexpr int k_version = 1;

// splitmix64's finaliser (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", 2014).
LOWBIT_HD constexpr std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// One input's term: its index, its code, its flags and its ternary value, each moving every bit.
LOWBIT_HD constexpr std::uint64_t term(std::uint64_t index, const Result& r) {
  const std::uint64_t h = mix(r.code + 0x9E3779B97F4A7C15ull * (index + 1));
  const std::uint64_t extra = std::uint64_t{r.flags} | (std::uint64_t{static_cast<std::uint8_t>(r.ternary)} << 8);
  return mix(h ^ (extra << 40) ^ index);
}

// ---- the digest file (host) ---------------------------------------------------------------------------

struct FilePair {
  std::string target;                  // format name
  std::string policy;                  // whole_policy_text()
  std::string labels;                  // the profiles (or quantizer paths) that use it, comma-separated
  bool fast = false;                   // fast::applies(f32, target, policy): the 32-bit path was checked too
  std::vector<std::uint64_t> digests;  // k_chunks
};

struct File {
  int version = 0;
  std::vector<FilePair> pairs;
};

inline std::string hex16(std::uint64_t v) {
  static const char* digits = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<std::size_t>(i)] = digits[v & 15];
  return s;
}

// The file's text: a header, then per pair a line "pair <target> | <policy> | <labels> | fast|general" and
// its digests, eight per line in chunk order.
inline std::string write_file(const File& f) {
  std::ostringstream s;
  s << "# lowbit f32 conversion digests (reference/include/lowbit/conversion_digest.hpp): for each target and\n"
       "# policy, the digest of lowbit::convert over each chunk of 2^"
    << k_chunk_bits
    << " consecutive f32 codes.  Written by\n"
       "# lowbit_conversion_digests --write (full tier); the quick tier recomputes a slice, the full tier all.\n";
  s << "version " << f.version << "\nchunk_bits " << k_chunk_bits << "\n";
  for (const FilePair& p : f.pairs) {
    s << "pair " << p.target << " | " << p.policy << " | " << p.labels << " | " << (p.fast ? "fast" : "general")
      << "\n";
    for (std::size_t i = 0; i < p.digests.size(); ++i) s << hex16(p.digests[i]) << (i % 8 == 7 ? "\n" : " ");
    if (p.digests.size() % 8) s << "\n";
  }
  return s.str();
}

// Parses a digest file; on error returns nullopt with `error` naming the line.
inline std::optional<File> parse_file(std::string_view text, std::string& error) {
  File f;
  std::size_t pos = 0, line_no = 0;
  bool chunk_bits_seen = false;
  auto fail = [&](const std::string& why) {
    error = "line " + std::to_string(line_no) + ": " + why;
    return std::nullopt;
  };
  while (pos < text.size()) {
    const std::size_t end = std::min(text.find('\n', pos), text.size());
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    if (line.rfind("version ", 0) == 0) {
      const std::string_view v = line.substr(8);
      if (v.empty() || v.size() > 6 || v.find_first_not_of("0123456789") != std::string_view::npos)
        return fail("malformed version line");
      f.version = std::stoi(std::string(v));
    } else if (line.rfind("chunk_bits ", 0) == 0) {
      if (std::string(line.substr(11)) != std::to_string(k_chunk_bits))
        return fail("chunk_bits is not " + std::to_string(k_chunk_bits));
      chunk_bits_seen = true;
    } else if (line.rfind("pair ", 0) == 0) {
      std::vector<std::string> parts;
      std::string_view rest = line.substr(5);
      for (std::size_t bar; (bar = rest.find(" | ")) != std::string_view::npos; rest = rest.substr(bar + 3))
        parts.emplace_back(rest.substr(0, bar));
      parts.emplace_back(rest);
      if (parts.size() != 4 || (parts[3] != "fast" && parts[3] != "general")) return fail("malformed pair line");
      f.pairs.push_back({parts[0], parts[1], parts[2], parts[3] == "fast", {}});
    } else {
      if (f.pairs.empty()) return fail("digests before the first pair line");
      std::size_t i = 0;
      while (i < line.size()) {
        const std::size_t sp = std::min(line.find(' ', i), line.size());
        const std::string_view word = line.substr(i, sp - i);
        if (word.size() != 16 || word.find_first_not_of("0123456789abcdef") != std::string_view::npos)
          return fail("not a 16-digit hex digest: '" + std::string(word) + "'");
        f.pairs.back().digests.push_back(std::stoull(std::string(word), nullptr, 16));
        i = sp + 1;
      }
    }
  }
  if (f.version != k_version)
    return fail("version " + std::to_string(f.version) + ", expected " + std::to_string(k_version));
  if (!chunk_bits_seen) return fail("no chunk_bits line");
  for (const FilePair& p : f.pairs)
    if (p.digests.size() != static_cast<std::size_t>(k_chunks)) {
      error = "pair " + p.target + " | " + p.policy + ": " + std::to_string(p.digests.size()) + " digests, expected " +
              std::to_string(k_chunks);
      return std::nullopt;
    }
  return f;
}

}  // namespace lowbit::digest
