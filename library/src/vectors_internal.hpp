// Pieces of the golden-vector generator shared by its files (vectors_gen.cpp, vectors_contract.cpp):
// the seeded streams of vectors/SPEC.md "Random cases" and the .npy file of a suite.  Internal to the library.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lowbit/format.hpp"
#include "lowbit/io.hpp"
#include "lowbit/vectors.hpp"

namespace lowbit::vectors::detail {

// FNV-1a, 64-bit (offset basis 0xcbf29ce484222325, prime 0x100000001b3) of a stream's key.
inline std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

// splitmix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014).
struct Rng {
  std::uint64_t state;
  Rng(std::uint64_t seed, const std::string& key) : state(seed ^ fnv1a(key)) {}
  std::uint64_t next() {
    state += 0x9e3779b97f4a7c15ull;
    std::uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform enough for test data: next() mod n (the modulo bias is part of the definition).
  std::uint64_t below(std::uint64_t n) { return next() % n; }
};

// The numpy dtype of an array of `f`'s codes: numpy's float types for f64/f32/f16, else an unsigned
// integer of the storage width (bf16 as '<u2', io.hpp's convention).
io::DType dtype_of(const Format& f);

// A suite's .npy file of `f`'s codes, with the manifest fields name, format, dtype and shape.
File npy_file(const std::string& path, const std::string& role, const std::string& name, const Format& f,
              std::vector<std::uint64_t> shape, const std::vector<std::uint64_t>& codes);

// A contract suite (`contract-<name>`, vectors/SPEC.md "Contract suites"): every pass of the named contract
// at its default shapes, or at the layer shapes given (M x N x K: X [M, K], W [N, K], dY [M, N]).
Suite contract_suite(const std::string& suite, const std::string& contract, std::uint64_t seed,
                     const std::vector<GemmShape>* custom);

}  // namespace lowbit::vectors::detail
