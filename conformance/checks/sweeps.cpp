// Sweeps of the fast path (convert.hpp) against the exact path (exact.hpp): round trips, exhaustive
// small sources, the midpoint sweep, and the stochastic modes.  The exact path computes the rounding
// with GMP rationals and shares with the fast path only the rules for specials and packing
// (rules.hpp), so agreement on the rounding itself is evidence, not a tautology.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <map>

#include "lowbit/convert.hpp"
#include "lowbit/exact.hpp"
#include "lowbit/profile.hpp"
#include "support.hpp"

namespace lowbit::checks {

namespace {

struct Input {
  const Format* from;
  std::uint64_t code;
};

// Every valid code of the given formats.
std::vector<Input> all_codes(const std::vector<const Format*>& fs) {
  std::vector<Input> v;
  for (const Format* f : fs) {
    const std::uint64_t n = std::uint64_t{1} << f->storage_bits();
    for (std::uint64_t c = 0; c < n; ++c)
      if (f->valid_code(c)) v.push_back({f, c});
  }
  return v;
}

// Fast vs exact for one input under one policy; `value` is the exact input (daz already applied).
inline void compare_one(Recorder& rec, Position at, const Input& in, const exact::Value& value, const Format& to,
                        const Policy& p, std::string_view context, std::uint64_t rbits = 0) {
  const Result fast = convert(*in.from, in.code, to, p, rbits);
  // exact::convert is exact::round of the exact input, except that a conversion into the same format
  // may be a plain copy under a profile's quirks; the sweeps reuse the exact input across targets and
  // policies, and ask exact::convert itself for same-format pairs.
  const Result slow = same_format(*in.from, to) ? exact::convert(*in.from, in.code, to, p, rbits)
                                                : exact::round(to, value, p, rbits);
  if (fast == slow) return;
  rec.mismatch(
      at, [&] { return describe(*in.from, in.code, to, p, context, slow, "exact path", fast, "fast path", rbits); });
}

// The policy list of a sweep, each with a context label (a profile's quirks, or empty).
struct NamedPolicy {
  Policy policy;
  std::string context;
};

// The deterministic policies with the built-in quirks, plus every profile's quirks under rne and rtz
// with each overflow mode (the quirks decide NaN, zero and negative inputs into formats lacking them).
// `reduced` (the quick tier's 16-bit targets, where the inputs are many): every rounding with the two
// overflow modes that differ for finite inputs (satfinite, nosat), subnormals kept; flush-to-zero
// with both tininess rules under rne and rup; no profile quirks (they act on specials, which the
// 8-bit targets and the exhaustive sweep cover).
std::vector<NamedPolicy> sweep_policies(bool reduced) {
  std::vector<NamedPolicy> v;
  for (const Policy& p : deterministic_policies()) {
    if (reduced) {
      const bool plain = p.subnormals == Subnormals::keep && p.tininess == Tininess::after &&
                         p.overflow != Overflow::satpropagate;
      const bool flushing = p.subnormals == Subnormals::ftz && p.overflow == Overflow::nosat &&
                            (p.rounding == Rounding::rne || p.rounding == Rounding::rup);
      if (!plain && !flushing) continue;
    }
    v.push_back({p, ""});
  }
  if (reduced) return v;
  std::vector<Quirks> seen;  // a quirk set shared by several profiles (torch and its variants) is swept once
  for (const Profile& prof : profiles()) {
    // The profile's quirks, and each target rule's NaN styles on top of them (TargetRule::nan_style ...).
    std::vector<std::pair<Quirks, std::string>> quirk_sets = {
        {prof.quirks, std::string("quirks of profile ") + prof.name}};
    for (const TargetRule& rule : prof.targets) {
      if (!rule.nan_style && !rule.narrow_nan_style && !rule.narrow_nan_below) continue;
      Quirks q = prof.quirks;
      if (rule.nan_style) q.nan_style = *rule.nan_style;
      if (rule.narrow_nan_style) q.narrow_nan_style = *rule.narrow_nan_style;
      if (rule.narrow_nan_below) q.narrow_nan_below = *rule.narrow_nan_below;
      quirk_sets.push_back({q, std::string("quirks of profile ") + prof.name + " for " + rule.target->name});
    }
    for (std::size_t k = 0; k < quirk_sets.size(); ++k) {
      // Named members, not a structured binding: clang 14 cannot capture a binding in a lambda.
      const Quirks& q = quirk_sets[k].first;
      const std::string& label = quirk_sets[k].second;
      if (std::find(seen.begin(), seen.end(), q) != seen.end()) continue;
      seen.push_back(q);
      for (Rounding r : {Rounding::rne, Rounding::rtz})
        for (Overflow o : all<Overflow>()) {
          Policy p;
          p.rounding = r;
          p.overflow = o;
          p.quirks = q;
          v.push_back({p, label});
        }
    }
  }
  return v;
}

// inputs[local] x targets x policies, fast vs exact; input i of `inputs` is input first + i of the check.
void fast_vs_exact(Recorder& rec, Ticker& tick, const std::vector<Input>& inputs, Range local, std::uint64_t first,
                   const std::vector<const Format*>& targets, const std::vector<NamedPolicy>& policies) {
  parallel_chunks(local.size(), 16, [&](std::uint64_t b, std::uint64_t e) {
    for (std::uint64_t i = local.begin + b; i < local.begin + e; ++i) {
      const Input& in = inputs[i];
      const exact::Value plain = exact::from_code(*in.from, in.code, false);
      const exact::Value dazed = exact::from_code(*in.from, in.code, true);
      std::uint32_t step = 0;
      for (const Format* to : targets) {
        for (const NamedPolicy& np : policies) {
          compare_one(rec, {first + i, step}, in, flushes_inputs(np.policy.subnormals) ? dazed : plain, *to, np.policy,
                      np.context);
          ++step;
        }
      }
      rec.cases(step);
    }
    tick.advance(e - b);
  });
}

// Every code of `sources` x every target x every policy: one input per source code.
Check exhaustive_check(std::string name, Tier tier, std::string description, std::vector<const Format*> sources) {
  auto inputs = [sources] { return all_codes(sources); };
  return {std::move(name),
          tier,
          std::move(description),
          "source code",
          [inputs] { return static_cast<std::uint64_t>(inputs().size()); },
          [inputs](Range r, const Progress& progress) {
            const std::vector<Input> codes = inputs();
            const std::vector<NamedPolicy> pol = sweep_policies(false);
            Recorder rec;
            Ticker tick(progress, r.size());
            fast_vs_exact(rec, tick, codes, r, 0, sweep_targets(), pol);
            tick.finish();
            return rec.outcome();
          }};
}

// ---- round trips --------------------------------------------------------------------------------

// Every code of every format of at most 16 bits converts into its own format unchanged, and through
// f64 and back unchanged, on both paths.  The one exception is IEEE 754 §6.2.3's: a signaling NaN
// comes back quiet (quiet bit set, payload kept) and raises invalid.
Outcome round_trip(Range r, const Progress& progress) {
  Recorder rec;
  const std::vector<Input> inputs = all_codes(small_formats(16));
  Ticker tick(progress, r.size());
  const Policy p{};  // rne, nosat, keep: nothing to round
  parallel_chunks(r.size(), 1024, [&](std::uint64_t b, std::uint64_t e) {
    for (std::uint64_t i = r.begin + b; i < r.begin + e; ++i) {
      const Format& f = *inputs[i].from;
      const std::uint64_t c = inputs[i].code;
      Result want{c, 0, 0};
      if (f.is_nan_code(c) && f.nan == NanEncoding::ieee) {
        const std::uint64_t quiet = std::uint64_t{1} << (f.mantissa_bits - 1 + f.code_shift);
        if (!(c & quiet)) want = {c | quiet, flag::invalid, 0};
      }
      std::uint32_t step = 0;
      auto check = [&](const Result& got, const char* path) {
        if (got != want)
          rec.mismatch({i, step}, [&] { return describe(f, c, f, p, path, want, "the code itself", got, path); });
        ++step;
      };
      check(convert(f, c, f, p), "fast path, into itself");
      check(exact::convert(f, c, f, p), "exact path, into itself");
      const Result wide = convert(f, c, formats::f64, p);
      // Back from f64 the NaN is already quiet: nothing is raised the second time.
      want.flags = 0;
      check(convert(formats::f64, wide.code, f, p), "fast path, through f64");
      const Result wide_x = exact::convert(f, c, formats::f64, p);
      check(exact::convert(formats::f64, wide_x.code, f, p), "exact path, through f64");
      // The widening itself is exact: no flag other than a signaling NaN's invalid.
      if ((wide.flags & ~flag::invalid) != 0 || wide.ternary != 0)
        rec.mismatch({i, step}, [&] {
          return describe(f, c, formats::f64, p, "widening must be exact", {wide.code, 0, 0}, "exact widening", wide,
                          "fast path");
        });
      rec.cases(5);
    }
    tick.advance(e - b);
  });
  tick.finish();
  return rec.outcome();
}

// ---- midpoint sweep -----------------------------------------------------------------------------

std::uint64_t bits_of(double d) { return std::bit_cast<std::uint64_t>(d); }
std::uint64_t bits_of(float f) { return std::bit_cast<std::uint32_t>(f); }

// Source codes: each point exactly representable in `src` (f32 or f64), and one source ulp either side.
std::vector<Input> midpoint_inputs(const Format& src, const std::vector<double>& points) {
  std::vector<std::uint64_t> codes;
  const bool single = src.bits == 32;
  const std::uint64_t sign = std::uint64_t{1} << (src.bits - 1);
  const std::uint64_t inf = src.inf_magnitude();
  for (double d : points) {
    std::uint64_t c = 0;
    if (single) {
      const float f = static_cast<float>(d);
      if (static_cast<double>(f) != d) continue;  // needs more than f32 has: the point does not exist there
      c = bits_of(f);
    } else {
      c = bits_of(d);
    }
    const std::uint64_t mag = c & ~sign;
    if (mag >= inf) continue;
    codes.push_back(c);
    if (mag + 1 < inf) codes.push_back(c + 1);
    if (mag > 0) codes.push_back(c - 1);
  }
  std::sort(codes.begin(), codes.end());
  codes.erase(std::unique(codes.begin(), codes.end()), codes.end());
  std::vector<Input> v;
  for (std::uint64_t c : codes) v.push_back({&src, c});
  return v;
}

// The midpoint sweep's inputs as one list: for each format of at most 16 bits, its points as f32 sources,
// then as f64 sources.
struct Segment {
  const Format* target;
  std::vector<Input> inputs;
};

std::vector<Segment> midpoint_segments() {
  std::vector<Segment> v;
  for (const Format* t : small_formats(16)) {
    const std::vector<double> pts = midpoint_points(*t);
    for (const Format* src : {&formats::f32, &formats::f64}) v.push_back({t, midpoint_inputs(*src, pts)});
  }
  return v;
}

std::uint64_t midpoint_count() {
  std::uint64_t n = 0;
  for (const Segment& s : midpoint_segments()) n += s.inputs.size();
  return n;
}

Outcome midpoint_sweep(bool reduced_wide, Range r, const Progress& progress) {
  const std::vector<NamedPolicy> all = sweep_policies(false);
  const std::vector<NamedPolicy> reduced = sweep_policies(reduced_wide);
  Recorder rec;
  Ticker tick(progress, r.size());
  std::uint64_t first = 0;  // the check's position of the segment's first input
  for (const Segment& seg : midpoint_segments()) {
    const std::uint64_t last = first + seg.inputs.size();
    if (r.begin < last && r.end > first) {
      const Range local{std::max(r.begin, first) - first, std::min(r.end, last) - first};
      fast_vs_exact(rec, tick, seg.inputs, local, first, {seg.target}, seg.target->storage_bits() > 8 ? reduced : all);
    }
    first = last;
  }
  tick.finish();
  return rec.outcome();
}

// ---- stochastic modes ---------------------------------------------------------------------------

std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Random R for sr-a / sr-b / sr-c with several N, on inputs drawn from every small format's codes,
// 16-bit codes, and f32 / f64 bit patterns (f64 mostly within the small formats' range), into every
// format of at most 16 bits plus tf32 and f32.
Outcome stochastic_sweep(Range range, const Progress& progress) {
  static constexpr int widths[] = {1, 2, 3, 4, 5, 8, 11, 16, 23, 31, 32};
  static constexpr Rounding modes[] = {Rounding::sr_a, Rounding::sr_b, Rounding::sr_c};
  const std::vector<const Format*> small = small_formats(8);
  const Format* wide_src[] = {&formats::bf16, &formats::f16, &formats::f32, &formats::f64};
  std::vector<const Format*> targets = small_formats(16);
  targets.push_back(&formats::tf32);
  targets.push_back(&formats::f32);
  Recorder rec;
  Ticker tick(progress, range.size());
  parallel_chunks(range.size(), 4096, [&](std::uint64_t b, std::uint64_t e) {
    for (std::uint64_t i = range.begin + b; i < range.begin + e; ++i) {
      std::uint64_t h = splitmix(i ^ 0x5EED5EED12345678ull);
      auto take = [&](std::uint64_t n) {
        const std::uint64_t r = h % n;
        h = splitmix(h);
        return r;
      };
      Input in{};
      const std::uint64_t kind = take(10);
      if (kind < 4) {
        in.from = small[take(small.size())];
      } else {
        in.from = wide_src[kind < 6 ? take(2) : 2 + take(2)];
      }
      const int sb = in.from->storage_bits();
      in.code = bits::low(take(~std::uint64_t{0}) ^ (h << 7), sb);
      if (in.from == &formats::f64 && (h & 3) != 0) {
        // Keep most f64 inputs where the small formats live: exponent in [-160, 160].
        const std::uint64_t biased = 1023 - 160 + take(321);
        in.code = (in.code & ~(bits::ones(11) << 52)) | (biased << 52);
      }
      const Format& to = *targets[take(targets.size())];
      Policy p;
      p.rounding = modes[take(3)];
      p.sr_bits = widths[take(std::size(widths))];
      p.overflow = nth<Overflow>(take(lowbit::count<Overflow>()));
      p.subnormals = take(2) ? Subnormals::keep : Subnormals::ftz;
      p.tininess = take(2) ? Tininess::after : Tininess::before;
      const std::uint64_t r = bits::low(take(~std::uint64_t{0}), p.sr_bits);
      const exact::Value v = exact::from_code(*in.from, in.code, false);
      compare_one(rec, {i, 0}, in, v, to, p, "", r);
    }
    rec.cases(e - b);
    tick.advance(e - b);
  });
  tick.finish();
  return rec.outcome();
}

// A check whose inputs are a fixed count of cases (the stochastic sweeps: case i is drawn from seed i).
Check counted_check(std::string name, Tier tier, std::string description, std::uint64_t count,
                    std::function<Outcome(Range, const Progress&)> run) {
  return {std::move(name), tier, std::move(description), "random case", [count] { return count; }, std::move(run)};
}

}  // namespace

std::vector<Check> sweep_checks() {
  std::vector<Check> v;
  v.push_back({"round-trip", Tier::quick,
               "every code of every format of at most 16 bits into itself and through f64 and back, fast and exact",
               "code", [] { return static_cast<std::uint64_t>(all_codes(small_formats(16)).size()); }, round_trip});
  v.push_back(exhaustive_check("exhaustive-8bit", Tier::quick,
                               "every code of every format of at most 8 bits x every target x every deterministic "
                               "policy (rounding, overflow, subnormals, tininess) and every profile's quirks: fast == "
                               "exact",
                               small_formats(8)));
  v.push_back({"midpoints", Tier::quick,
               "f32 and f64 sources into every format of at most 16 bits: every value, every midpoint (and the "
               "one beyond max), one source ulp either side; all policies for 8-bit targets, a reduced set for "
               "16-bit ones: fast == exact",
               "source code", midpoint_count,
               [](Range r, const Progress& progress) { return midpoint_sweep(true, r, progress); }});
  v.push_back(counted_check("stochastic", Tier::quick,
                            "sr-a, sr-b, sr-c with random R and N in 1..32, random inputs, every small target: fast "
                            "== exact",
                            2'000'000, stochastic_sweep));
  v.push_back(exhaustive_check("exhaustive-16bit", Tier::full,
                               "every bf16 and f16 code x every target x every deterministic policy and profile "
                               "quirk: fast == exact",
                               {&formats::bf16, &formats::f16}));
  v.push_back({"midpoints-all-policies", Tier::full,
               "the midpoint sweep with every deterministic policy for the 16-bit targets too", "source code",
               midpoint_count, [](Range r, const Progress& progress) { return midpoint_sweep(false, r, progress); }});
  v.push_back(counted_check("stochastic-long", Tier::full, "the stochastic sweep with 40 million cases", 40'000'000,
                            stochastic_sweep));
  return v;
}

}  // namespace lowbit::checks
