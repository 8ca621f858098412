// Shards of the checks library (conformance/checks/shard.hpp): the strict I/N parser, the split's tiling
// (recomputed here from its definition), the recorder's choice of kept mismatches (by position, whatever
// the thread order), and a check with planted mismatches run whole and in shards, written, read back,
// verified and merged: the merged outcome is the whole run's.
#include "shard.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "support.hpp"

namespace {

namespace fs = std::filesystem;
using namespace lowbit::checks;

TEST(ParseShard, TakesIOverN) {
  std::string error;
  for (auto [text, index, count] : std::vector<std::tuple<const char*, std::uint32_t, std::uint32_t>>{
           {"1/1", 1, 1}, {"3/8", 3, 8}, {"8/8", 8, 8}, {"100000/100000", 100000, 100000}, {"07/10", 7, 10}}) {
    const std::optional<Shard> s = parse_shard(text, error);
    ASSERT_TRUE(s) << text << ": " << error;
    EXPECT_EQ(s->index, index) << text;
    EXPECT_EQ(s->count, count) << text;
  }
}

TEST(ParseShard, RefusesEverythingElse) {
  for (const char* text : {"0/4",
                           "5/4",
                           "1/0",
                           "0/0",
                           "a/b",
                           "1/4x",
                           "x1/4",
                           "/4",
                           "1/",
                           "",
                           "/",
                           "-1/4",
                           "+1/4",
                           " 1/4",
                           "1/4 ",
                           "1 /4",
                           "1/4/2",
                           "1.0/4",
                           "0x1/4",
                           "1/100001",
                           "4294967297/4294967298",
                           "1234567890/1234567890"}) {
    std::string error;
    EXPECT_FALSE(parse_shard(text, error)) << "'" << text << "' was taken";
    EXPECT_NE(error.find(std::string("'") + text + "'"), std::string::npos) << error;
  }
}

// floor(k·n/N) by 128-bit arithmetic, independent of the library's overflow-free form.
std::uint64_t boundary(std::uint64_t n, std::uint64_t k, std::uint64_t count) {
  __extension__ using u128 = unsigned __int128;
  return static_cast<std::uint64_t>(static_cast<u128>(n) * k / count);
}

TEST(ShardRange, TilesEverySpaceInOrderWithSizesWithinOne) {
  const std::uint64_t totals[] = {
      0, 1, 2, 3, 7, 32, 100, 135184, std::uint64_t{1} << 32, (std::uint64_t{1} << 40) + 3, ~std::uint64_t{0}};
  for (std::uint64_t n : totals) {
    for (std::uint32_t count : {1u, 2u, 3u, 4u, 7u, 16u, 40u, 1000u, 99991u, 100000u}) {
      std::uint64_t next = 0, smallest = ~std::uint64_t{0}, largest = 0;
      for (std::uint32_t i = 1; i <= count; ++i) {
        const Range r = shard_range(n, {i, count});
        ASSERT_EQ(r.begin, next) << n << " " << i << "/" << count;
        ASSERT_EQ(r.begin, boundary(n, i - 1, count));
        ASSERT_EQ(r.end, boundary(n, i, count));
        smallest = std::min(smallest, r.size());
        largest = std::max(largest, r.size());
        next = r.end;
      }
      EXPECT_EQ(next, n) << count;
      EXPECT_LE(largest - smallest, 1u) << n << " in " << count;
    }
  }
}

TEST(Recorder, KeepsTheLowestPositionsWhateverTheThreadOrder) {
  Recorder rec;
  constexpr std::uint64_t n = 200000;
  std::atomic<std::uint64_t> described{0};
  parallel_chunks(n, 64, [&](std::uint64_t b, std::uint64_t e) {
    // Walk each chunk backwards, so that high positions are often found first.
    for (std::uint64_t i = e; i-- > b;)
      for (std::uint32_t step : {1u, 0u})
        rec.mismatch({i, step}, [&] {
          described.fetch_add(1);
          return std::to_string(i) + "." + std::to_string(step);
        });
  });
  const Outcome o = rec.outcome();
  EXPECT_EQ(o.mismatches, 2 * n);
  std::vector<std::string> texts;
  for (const Example& e : o.examples) texts.push_back(e.text);
  EXPECT_EQ(texts, (std::vector<std::string>{"0.0", "0.1", "1.0", "1.1", "2.0"}));
  // Descriptions are built only while they can still be kept: far fewer than the mismatches.
  EXPECT_LT(described.load(), n / 4);
}

// A check over 1000 inputs that mismatches on every input divisible by 7 (twice on those divisible by 49),
// in parallel, with a note about the whole check.
Check planted() {
  return {"planted",
          Tier::quick,
          "a check with planted mismatches",
          "input",
          [] { return std::uint64_t{1000}; },
          [](Range r, const Progress&) {
            Recorder rec;
            parallel_chunks(r.size(), 8, [&](std::uint64_t b, std::uint64_t e) {
              for (std::uint64_t i = r.begin + b; i < r.begin + e; ++i) {
                rec.cases(2);
                if (i % 7 == 0) rec.mismatch({i, 0}, [&] { return "input " + std::to_string(i); });
                if (i % 49 == 0) rec.mismatch({i, 1}, [&] { return "input " + std::to_string(i) + " again"; });
              }
            });
            Outcome o = rec.outcome();
            o.note = "1000 inputs";
            return o;
          }};
}

TEST(Shards, OfAPlantedCheckMergeIntoTheWholeRun) {
  const Check c = planted();
  const Outcome whole = run_all(c);
  ASSERT_EQ(whole.cases, 2000u);
  ASSERT_EQ(whole.mismatches, 143u + 21u);  // multiples of 7 in [0, 1000): 143; of 49: 21
  std::vector<std::string> first;
  for (const Example& e : whole.examples) first.push_back(e.text);
  ASSERT_EQ(first, (std::vector<std::string>{"input 0", "input 0 again", "input 7", "input 14", "input 21"}));

  const fs::path dir = fs::temp_directory_path() / ("lowbit-shard-test-" + std::to_string(getpid()));
  for (std::uint32_t count : {1u, 2u, 5u, 9u, 143u, 1000u, 1500u}) {
    fs::remove_all(dir);
    std::vector<LoadedShard> loaded;
    for (std::uint32_t i = 1; i <= count; ++i) {
      const Shard s{i, count};
      CheckRun r{c.name, c.tier, c.description, c.unit, c.inputs(), shard_range(c.inputs(), s), {}, 0.5};
      r.outcome = c.run(r.range, {});
      const RunInfo info{"0.0.0", "quick", "2026-01-0" + std::to_string(1 + i % 9) + "T00:00:00Z", 1.0, 2};
      const ordered_json doc = conform_shard_doc(s, info, {c.name}, {r}, "build");
      if (count > 9) {
        // Many shards: the documents as load_shard returns them, without the files (the small counts
        // go through the files).
        loaded.push_back({"shard " + std::to_string(i), doc, s, {{c.name, r.inputs, r.range}}});
        continue;
      }
      const fs::path d = dir / std::to_string(i);
      fs::create_directories(d);
      write_shard(d, doc);
      auto back = load_shard(d);
      ASSERT_TRUE(std::holds_alternative<LoadedShard>(back)) << std::get<LoadError>(back).text;
      loaded.push_back(std::get<LoadedShard>(std::move(back)));
    }
    EXPECT_TRUE(verify_cover(loaded, "0.0.0").empty());
    std::vector<std::string> problems;
    const std::optional<MergedRun> m = merge_conform(loaded, problems);
    ASSERT_TRUE(m) << (problems.empty() ? "" : problems.front());
    ASSERT_EQ(m->runs.size(), 1u);
    const CheckRun& r = m->runs[0];
    EXPECT_EQ(r.outcome.cases, whole.cases) << count;
    EXPECT_EQ(r.outcome.mismatches, whole.mismatches) << count;
    ASSERT_EQ(r.outcome.examples.size(), whole.examples.size());
    for (std::size_t k = 0; k < whole.examples.size(); ++k) {
      EXPECT_EQ(r.outcome.examples[k].at, whole.examples[k].at);
      EXPECT_EQ(r.outcome.examples[k].text, whole.examples[k].text);
    }
    EXPECT_EQ(r.outcome.note, "1000 inputs");
    EXPECT_EQ(r.range, (Range{0, 1000}));
    EXPECT_DOUBLE_EQ(r.seconds, 0.5 * count);
    EXPECT_DOUBLE_EQ(m->info.seconds, 1.0 * count);
    EXPECT_EQ(m->info.started, count >= 9 ? "2026-01-01T00:00:00Z" : "2026-01-02T00:00:00Z");
  }
  fs::remove_all(dir);
}

// The registered checks that run in a second: their shards' cases add up to the whole run's, and every
// shard reports the same note.
TEST(Shards, OfTheQuickTablesAndTheRoundTripAddUp) {
  for (const char* name :
       {"semantics-peer-cases", "semantics-cuda-table", "semantics-ml_dtypes-table", "semantics-rules", "round-trip"}) {
    const Check* c = find_check(name);
    ASSERT_NE(c, nullptr) << name;
    const Outcome whole = run_all(*c);
    ASSERT_GT(whole.cases, 0u) << name;
    std::uint64_t cases = 0, mismatches = 0;
    for (std::uint32_t i = 1; i <= 4; ++i) {
      const Outcome o = c->run(shard_range(c->inputs(), {i, 4}), {});
      cases += o.cases;
      mismatches += o.mismatches;
      EXPECT_EQ(o.note, whole.note) << name;
    }
    EXPECT_EQ(cases, whole.cases) << name;
    EXPECT_EQ(mismatches, whole.mismatches) << name;
  }
}

TEST(LoadShard, NamesWhatIsWrong) {
  const fs::path dir = fs::temp_directory_path() / ("lowbit-shard-load-" + std::to_string(getpid()));
  fs::remove_all(dir);
  auto error = [&](const fs::path& d) {
    auto r = load_shard(d);
    EXPECT_TRUE(std::holds_alternative<LoadError>(r)) << d;
    return std::holds_alternative<LoadError>(r) ? std::get<LoadError>(r) : LoadError{};
  };
  EXPECT_EQ(error(dir).failure, LoadFailure::unreadable);
  fs::create_directories(dir);
  EXPECT_EQ(error(dir).failure, LoadFailure::unreadable);
  const ordered_json doc = shard_header("conform", {2, 3}, "0.0.0", "build", ordered_json::object(),
                                        {{"space", 10, shard_range(10, {2, 3})}});
  write_shard(dir, doc);
  EXPECT_TRUE(std::holds_alternative<LoadedShard>(load_shard(dir)));
  std::ofstream(dir / shard_file, std::ios::app) << "\n";
  const LoadError e = error(dir);
  EXPECT_EQ(e.failure, LoadFailure::damaged);
  EXPECT_NE(e.text.find("SHA-256 differs"), std::string::npos) << e.text;
  fs::remove_all(dir);
}

}  // namespace
