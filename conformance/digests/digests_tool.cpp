// lowbit_conversion_digests: writes or checks the f32 conversion digests (lowbit/conversion_digest.hpp)
// of every pair of digest_pairs.hpp, every f32 input of each.  While it converts, it also holds the
// 32-bit path (lowbit/fast_convert.hpp) and the batch conversion (lowbit/batch.hpp, where its vector
// kernel takes the pair) against lowbit::convert on every input of the pairs they apply to, and refuses
// to write when they differ anywhere.
//
//   lowbit_conversion_digests --write FILE   compute everything and write FILE (atomically)
//   lowbit_conversion_digests --check FILE   compute everything and compare with FILE (the full tier)
//
// Exit status: 0 when written / equal, 1 when a digest differs or a faster path differs, 2 on a usage
// error or an unreadable or malformed FILE.
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "digest_pairs.hpp"
#include "lowbit/output.hpp"

namespace {

using namespace lowbit;

int usage() {
  std::cerr << "usage: lowbit_conversion_digests --write FILE | --check FILE\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return usage();
  const std::string mode = argv[1], path = argv[2];
  if (mode != "--write" && mode != "--check") return usage();
  digest::File expected;
  if (mode == "--check") {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      std::cerr << "lowbit_conversion_digests: cannot read " << path << "\n";
      return 2;
    }
    std::stringstream text;
    text << in.rdbuf();
    std::string error;
    const auto f = digest::parse_file(text.str(), error);
    if (!f) {
      std::cerr << "lowbit_conversion_digests: " << path << ": " << error << "\n";
      return 2;
    }
    expected = *f;
  }

  const auto pairs = digest_test::digest_pairs();
  const std::size_t units = pairs.size() * digest::k_chunks;
  std::fprintf(stderr, "[digests] %zu pairs, %zu chunks\n", pairs.size(), units);
  std::vector<digest_test::ChunkResult> results(units);
  std::atomic<std::size_t> done{0};
  std::mutex print;
  const auto start = std::chrono::steady_clock::now();
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, units, 1), [&](const tbb::blocked_range<std::size_t>& r) {
    for (std::size_t u = r.begin(); u != r.end(); ++u) {
      results[u] = digest_test::chunk_digest(pairs[u / digest::k_chunks], static_cast<int>(u % digest::k_chunks));
      const std::size_t n = ++done;
      if (n % 64 == 0) {
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::lock_guard<std::mutex> lock(print);
        std::fprintf(stderr, "[digests] %zu / %zu chunks, %.0f s\n", n, units, s);
      }
    }
  });

  int status = 0;
  digest::File out;
  out.version = digest::k_version;
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    digest::FilePair fp{pairs[i].target->name, whole_policy_text(pairs[i].policy), pairs[i].labels, pairs[i].fast, {}};
    std::uint64_t fast_bad = 0, batch_bad = 0;
    std::uint32_t first = 0, first_batch = 0;
    for (int c = 0; c < digest::k_chunks; ++c) {
      const auto& r = results[i * digest::k_chunks + static_cast<std::size_t>(c)];
      fp.digests.push_back(r.digest);
      if (r.fast_mismatches && !fast_bad) first = r.first_mismatch;
      if (r.batch_mismatches && !batch_bad) first_batch = r.first_batch_mismatch;
      fast_bad += r.fast_mismatches;
      batch_bad += r.batch_mismatches;
    }
    if (fast_bad) {
      std::printf("fast::convert differs from convert: f32 -> %s under %s on %llu inputs, the first 0x%08x\n",
                  fp.target.c_str(), fp.policy.c_str(), static_cast<unsigned long long>(fast_bad), first);
      status = 1;
    }
    if (batch_bad) {
      std::printf("convert_batch differs from convert: f32 -> %s under %s on %llu inputs, the first 0x%08x\n",
                  fp.target.c_str(), fp.policy.c_str(), static_cast<unsigned long long>(batch_bad), first_batch);
      status = 1;
    }
    out.pairs.push_back(std::move(fp));
  }
  std::size_t fast_pairs = 0, batch_pairs = 0;
  for (const auto& p : pairs) {
    fast_pairs += p.fast;
    batch_pairs += batch_supported(formats::f32, *p.target, p.policy);
  }
  std::printf("%zu pairs (%zu also through the 32-bit path, %zu through the batch kernel), %zu chunks of 2^%d f32 inputs\n",
              pairs.size(), fast_pairs, batch_pairs, units, digest::k_chunk_bits);

  if (mode == "--write") {
    if (status) {
      std::printf("not written: a faster path differs\n");
      return status;
    }
    // The project's one durable writer: an exclusive temporary beside FILE, checked writes, a rename; a
    // device, FIFO or symbolic link at FILE is refused and the previous file stays as it was.
    try {
      io::write_output(path, digest::write_file(out));
    } catch (const std::exception& e) {
      std::cerr << "lowbit_conversion_digests: " << e.what() << "\n";
      return 2;
    }
    std::printf("wrote %s\n", path.c_str());
    return 0;
  }
  // --check: the same pairs in the same order, and every digest.
  std::size_t differ = 0;
  if (expected.pairs.size() != out.pairs.size()) {
    std::printf("%s lists %zu pairs; the enumeration has %zu\n", path.c_str(), expected.pairs.size(), out.pairs.size());
    return 1;
  }
  for (std::size_t i = 0; i < out.pairs.size(); ++i) {
    const auto &e = expected.pairs[i], &g = out.pairs[i];
    if (e.target != g.target || e.policy != g.policy || e.fast != g.fast) {
      std::printf("pair %zu: file has %s | %s, the enumeration %s | %s\n", i, e.target.c_str(), e.policy.c_str(),
                  g.target.c_str(), g.policy.c_str());
      ++differ;
      continue;
    }
    for (int c = 0; c < digest::k_chunks; ++c)
      if (e.digests[static_cast<std::size_t>(c)] != g.digests[static_cast<std::size_t>(c)] && differ++ < 20)
        std::printf("f32 -> %s under %s: chunk %d (inputs 0x%08llx..) digest %s, recomputed %s\n", g.target.c_str(),
                    g.policy.c_str(), c, static_cast<unsigned long long>(c) << digest::k_chunk_bits,
                    digest::hex16(e.digests[static_cast<std::size_t>(c)]).c_str(),
                    digest::hex16(g.digests[static_cast<std::size_t>(c)]).c_str());
  }
  std::printf("%zu differences\n", differ);
  return differ || status ? 1 : 0;
}
