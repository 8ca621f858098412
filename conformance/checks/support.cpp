#include "support.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "lowbit/exact.hpp"
#include "lowbit/profile.hpp"
#include "lowbit/registry.hpp"

namespace lowbit::checks {

const char* name(Tier t) { return t == Tier::quick ? "quick" : "full"; }

std::optional<Tier> parse_tier(std::string_view s) {
  if (s == "quick") return Tier::quick;
  if (s == "full") return Tier::full;
  return std::nullopt;
}

void Recorder::keep(Position at, std::string text) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (examples_.size() == kept_examples && !(at < examples_.back().at)) return;
  const auto where = std::upper_bound(examples_.begin(), examples_.end(), at,
                                      [](const Position& p, const Example& e) { return p < e.at; });
  examples_.insert(where, Example{at, std::move(text)});
  if (examples_.size() > kept_examples) examples_.pop_back();
  if (examples_.size() == kept_examples) threshold_.store(examples_.back().at.input, std::memory_order_relaxed);
}

Outcome Recorder::outcome() const {
  Outcome o;
  o.cases = cases_.load();
  o.mismatches = mismatches_.load();
  std::lock_guard<std::mutex> lock(mutex_);
  o.examples = examples_;
  return o;
}

void Ticker::advance(std::uint64_t n) {
  const std::uint64_t done = done_.fetch_add(n, std::memory_order_relaxed) + n;
  if (!progress_) return;
  const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::steady_clock::now().time_since_epoch())
                       .count();
  std::int64_t last = last_ms_.load(std::memory_order_relaxed);
  if (now - last < 250) return;
  if (!last_ms_.compare_exchange_strong(last, now)) return;
  std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
  if (lock.owns_lock()) progress_(std::min(done, total_), total_);
}

void Ticker::finish() {
  if (!progress_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  progress_(total_, total_);
}

std::string result_text(const Format& f, const Result& r) {
  return code_and_value(f, r.code) + " flags " + flags_text(r.flags) + " ternary " + std::to_string(r.ternary);
}

std::string describe(const Format& from, std::uint64_t code, const Format& to, const Policy& p,
                     std::string_view context, const Result& expected, std::string_view expected_from,
                     const Result& actual, std::string_view actual_from, std::uint64_t rbits) {
  std::string s = std::string(from.name) + " " + code_and_value(from, code) + " -> " + to.name + " [" +
                  policy_text(p);
  if (is_stochastic(p.rounding)) s += " R=" + hex(rbits, 1);
  if (!context.empty()) s += "; " + std::string(context);
  s += "]: expected " + result_text(to, expected) + " (" + std::string(expected_from) + "), actual " +
       result_text(to, actual) + " (" + std::string(actual_from) + ")";
  return s;
}

std::vector<const Format*> extra_formats() {
  // binary8p3se: infinity at the top code (0x7F / 0xFF), NaN at 0x80; binary8p4sf: finite P3109;
  // binary8p3ue: unsigned with infinity; binary8p1se: no mantissa bits but a zero; e3m4b5-fn: a
  // parametric fn row with a non-standard bias.
  std::vector<const Format*> v;
  for (const char* n : {"binary8p3se", "binary8p4sf", "binary8p3ue", "binary8p1se", "e3m4b5-fn"})
    if (const Format* f = find_format(n)) v.push_back(f);
  return v;
}

std::vector<const Format*> small_formats(int max_bits) {
  std::vector<const Format*> v;
  for (const Format& f : formats::builtin)
    if (f.storage_bits() <= max_bits) v.push_back(&f);
  for (const Format* f : extra_formats())
    if (f->storage_bits() <= max_bits) v.push_back(f);
  return v;
}

std::vector<const Format*> sweep_targets() {
  std::vector<const Format*> v;
  for (const Format& f : formats::builtin) v.push_back(&f);
  for (const Format* f : extra_formats()) v.push_back(f);
  return v;
}

std::vector<Rounding> deterministic_modes() {
  std::vector<Rounding> v;
  for (Rounding r : all<Rounding>())
    if (!is_stochastic(r)) v.push_back(r);
  return v;
}

std::vector<Policy> deterministic_policies() {
  std::vector<Policy> v;
  for (Rounding r : deterministic_modes())
    for (Overflow o : all<Overflow>())
      for (Subnormals s : all<Subnormals>())
        for (Tininess t : all<Tininess>()) {
          Policy p;
          p.rounding = r;
          p.overflow = o;
          p.subnormals = s;
          p.tininess = t;
          v.push_back(p);
        }
  return v;
}

// Every finite value of `t`, every midpoint between neighbours, and the midpoint between each
// extreme and the next value the format would have with an unbounded exponent ("virtual" max);
// formats without zero also get 0 and half their smallest value.  All of these are exact doubles
// (at most 17 significant bits, exponents within ±2^8).
std::vector<double> midpoint_points(const Format& t) {
  std::vector<double> values;
  double top[2] = {0, 0}, top_ulp[2] = {0, 0};
  const std::uint64_t n = std::uint64_t{1} << t.storage_bits();
  for (std::uint64_t c = 0; c < n; ++c) {
    if (!t.valid_code(c) || t.is_nan_code(c) || t.is_inf_code(c)) continue;
    const Unpacked u = unpack(t, c);
    double v = 0;
    if (u.cls == ValueClass::finite) v = std::ldexp(static_cast<double>(u.significand), u.exponent);
    if (u.negative) v = -v;
    values.push_back(v);
    const int side = u.negative ? 1 : 0;
    if (u.cls == ValueClass::finite && std::fabs(v) > top[side]) {
      top[side] = std::fabs(v);
      top_ulp[side] = std::ldexp(1.0, u.exponent);
    }
  }
  if (!t.has_zero) {
    values.push_back(0.0);
    values.push_back(std::ldexp(1.0, t.emin() - 1));
  }
  values.push_back(top[0] + top_ulp[0]);
  if (t.is_signed()) values.push_back(-(top[1] + top_ulp[1]));
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  std::vector<double> points = values;
  for (std::size_t i = 0; i + 1 < values.size(); ++i) points.push_back((values[i] + values[i + 1]) / 2);
  // Both signs of every point (unsigned targets see negative inputs too).
  const std::size_t k = points.size();
  for (std::size_t i = 0; i < k; ++i) points.push_back(-points[i]);
  return points;
}

void parallel_chunks(std::uint64_t n, std::uint64_t grain,
                     const std::function<void(std::uint64_t, std::uint64_t)>& body) {
  tbb::parallel_for(tbb::blocked_range<std::uint64_t>(0, n, grain),
                    [&](const tbb::blocked_range<std::uint64_t>& r) { body(r.begin(), r.end()); });
}

}  // namespace lowbit::checks
