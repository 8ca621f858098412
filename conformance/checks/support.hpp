// Shared pieces of the checks: a thread-safe recorder of cases and mismatches, progress throttling,
// mismatch descriptions, and the lists of formats and policies the sweeps walk.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "checks.hpp"
#include "lowbit/format.hpp"
#include "lowbit/names.hpp"
#include "lowbit/policy.hpp"
#include "lowbit/text.hpp"

namespace lowbit::checks {

// Counts cases and mismatches from many threads and keeps the descriptions of the kept_examples mismatches
// of lowest position, whichever thread finds them first: the kept set is a function of the inputs alone.
class Recorder {
 public:
  void cases(std::uint64_t n) { cases_.fetch_add(n, std::memory_order_relaxed); }
  // Counts one mismatch at `at`; `describe()` builds its text, and is called only while the mismatch
  // could still be among the kept ones (describing is slow; a broken path mismatches everywhere).
  template <class Describe>
  void mismatch(Position at, Describe&& describe) {
    mismatches_.fetch_add(1, std::memory_order_relaxed);
    if (at.input > threshold_.load(std::memory_order_relaxed)) return;
    keep(at, describe());
  }
  Outcome outcome() const;

 private:
  void keep(Position at, std::string text);

  std::atomic<std::uint64_t> cases_{0};
  std::atomic<std::uint64_t> mismatches_{0};
  // Once kept_examples are held, the largest input position among them: a later mismatch beyond it
  // cannot displace one (a cheap test before the lock).
  std::atomic<std::uint64_t> threshold_{~std::uint64_t{0}};
  mutable std::mutex mutex_;
  std::vector<Example> examples_;  // sorted by position
};

// Forwards progress to the caller's callback at most a few times a second, from whichever thread
// happens to report.
class Ticker {
 public:
  Ticker(const Progress& progress, std::uint64_t total) : progress_(progress), total_(total) {}
  void advance(std::uint64_t n);
  void finish();

 private:
  const Progress& progress_;
  std::uint64_t total_;
  std::atomic<std::uint64_t> done_{0};
  std::atomic<std::int64_t> last_ms_{0};
  std::mutex mutex_;
};

// policy_text, code_and_value, flags_text: lowbit/text.hpp.
std::string result_text(const Format& f, const Result& r);
// One mismatch of a conversion from a code: "<from> 0x.. (v) -> <to> [<policy>]: expected ..., actual ...".
std::string describe(const Format& from, std::uint64_t code, const Format& to, const Policy& p,
                     std::string_view context, const Result& expected, std::string_view expected_from,
                     const Result& actual, std::string_view actual_from, std::uint64_t rbits = 0);

// Formats of at most 8 / 16 bits among the built-in rows, plus a few P3109 and parametric rows that
// exercise encodings no built-in row has (infinity at the top code, unsigned with infinity, no
// mantissa bits).  `sweep_targets` is every built-in row plus those extras.
std::vector<const Format*> small_formats(int max_bits);
std::vector<const Format*> sweep_targets();
std::vector<const Format*> extra_formats();

// Every finite value of a format of at most 16 bits, every midpoint between neighbours, and the
// midpoint between each extreme and the next value the format would have with an unbounded exponent
// (formats without zero also get 0 and half their smallest value); both signs; exact doubles.
std::vector<double> midpoint_points(const Format& t);

// Every deterministic policy: each non-stochastic rounding x each overflow mode x each subnormal mode x each
// tininess rule (the enums' name tables, names.hpp).
std::vector<Policy> deterministic_policies();
// The deterministic roundings (rne, rna, rtz, rup, rdn, rto), in table order.
std::vector<Rounding> deterministic_modes();

// Parallel loop over [0, n) in chunks (oneTBB); `body(begin, end)`.
void parallel_chunks(std::uint64_t n, std::uint64_t grain, const std::function<void(std::uint64_t, std::uint64_t)>& body);

// The check families (each defined in its own file).
std::vector<Check> semantics_checks();
std::vector<Check> sweep_checks();
std::vector<Check> cuda_host_checks();  // empty when the toolkit's headers were not found

}  // namespace lowbit::checks
