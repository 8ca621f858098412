// `lowbit conform [--tier quick|full] [--out DIR] [--check NAME]... [--shard I/N] [--list]`: the main job.
//
// Runs the conformance checks through the library (conformance/checks), shows progress on stderr,
// prints a table (check, cases, mismatches, seconds), writes DIR/conformance.json, DIR/conformance.md and
// DIR/junit.xml atomically (temporary file + rename), and exits 0 when every check that ran found no
// mismatch, 1 otherwise, 2 on a usage error.  With --shard I/N it runs the I-th of N parts of every
// check's inputs (conformance/checks/shard.hpp) and writes DIR/shard.json instead, which `lowbit merge`
// joins with the other parts into the report the unsharded run writes.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "lowbit/text.hpp"
#include "lowbit/output.hpp"
#include "checks.hpp"
#include "commands.hpp"
#include "conform_report.hpp"
#include "shard.hpp"
#include "install_paths.hpp"

namespace lowbit::cli {

namespace {

namespace fs = std::filesystem;
using checks::Check;
using checks::CheckRun;
using checks::Outcome;
using checks::RunInfo;
using json = nlohmann::ordered_json;
using Row = CheckRun;

struct Options {
  std::string tier = "quick";
  std::string out = "reports/out";
  std::vector<std::string> only;
  std::string shard;     // "I/N"
  bool sharded = false;  // --shard was given
  bool list = false;
};

std::string now_utc() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", s);
  return buf;
}

std::string status_of(const Row& r) {
  if (r.outcome.skipped) return "skipped";
  return r.outcome.mismatches == 0 ? "ok" : "MISMATCH";
}

// Progress on stderr: a line rewritten in place on a terminal, a line per 10% otherwise.
class ProgressLine {
 public:
  ProgressLine(std::string name, std::size_t index, std::size_t count)
      : name_(std::move(name)), prefix_("[" + std::to_string(index) + "/" + std::to_string(count) + "] "),
        tty_(isatty(STDERR_FILENO) != 0), start_(std::chrono::steady_clock::now()) {
    std::cerr << prefix_ << name_ << (tty_ ? " ..." : "\n") << std::flush;
  }
  void update(std::uint64_t done, std::uint64_t total) {
    if (total == 0) return;
    const int percent = static_cast<int>(100.0 * static_cast<double>(done) / static_cast<double>(total));
    if (tty_) {
      std::cerr << "\r" << prefix_ << name_ << " " << percent << "% (" << seconds_text(elapsed()) << " s)   "
                << std::flush;
    } else if (percent / 10 > last_decile_ && percent < 100) {
      last_decile_ = percent / 10;
      std::cerr << "  " << name_ << ": " << percent << "% after " << seconds_text(elapsed()) << " s\n" << std::flush;
    }
  }
  void done(const Row& r) {
    std::cerr << (tty_ ? "\r" : "") << prefix_ << name_ << ": " << status_of(r) << ", " << r.outcome.cases
              << " cases, " << r.outcome.mismatches << " mismatches, " << seconds_text(r.seconds) << " s        \n"
              << std::flush;
  }
  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::string name_, prefix_;
  bool tty_;
  std::chrono::steady_clock::time_point start_;
  int last_decile_ = 0;
};

void print_table(std::ostream& os, const std::vector<Row>& rows) {
  std::size_t w = 5;
  for (const Row& r : rows) w = std::max(w, r.name.size());
  char line[512];
  std::snprintf(line, sizeof line, "%-*s  %-5s  %14s  %10s  %9s  %s\n", static_cast<int>(w), "check", "tier", "cases",
                "mismatches", "seconds", "status");
  os << line;
  for (const Row& r : rows) {
    std::snprintf(line, sizeof line, "%-*s  %-5s  %14llu  %10llu  %9s  %s\n", static_cast<int>(w), r.name.c_str(),
                  checks::name(r.tier), static_cast<unsigned long long>(r.outcome.cases),
                  static_cast<unsigned long long>(r.outcome.mismatches), seconds_text(r.seconds).c_str(),
                  status_of(r).c_str());
    os << line;
  }
}

json report_json(const std::vector<Row>& rows, const RunInfo& info, bool conformant) {
  json j;
  j["schema_version"] = 1;
  j["lowbit_version"] = info.version;
  j["tier"] = info.tier;
  j["started"] = info.started;
  j["seconds"] = info.seconds;
  j["threads"] = info.threads;
  j["conformant"] = conformant;
  json list = json::array();
  for (const Row& r : rows) {
    json c;
    c["name"] = r.name;
    c["tier"] = checks::name(r.tier);
    c["description"] = r.description;
    c["inputs"] = r.inputs;
    c["unit"] = r.unit;
    c["status"] = status_of(r);
    c["cases"] = r.outcome.cases;
    c["mismatches"] = r.outcome.mismatches;
    c["seconds"] = r.seconds;
    if (!r.outcome.note.empty()) c["note"] = r.outcome.note;
    json first = json::array();
    for (const checks::Example& e : r.outcome.examples) first.push_back(e.text);
    c["first_mismatches"] = first;
    list.push_back(c);
  }
  j["checks"] = list;
  return j;
}

// The accuracy report (`lowbit report`, report_cmd.cpp): its committed snapshot, the command that
// regenerates it, and a link to it relative to `dir` when the snapshot is at hand: installed
// (share/doc/lowbit/accuracy beside an installed binary), else in the source tree.
constexpr const char* accuracy_snapshot = "reports/accuracy/index.html";
constexpr const char* accuracy_command = "lowbit report --out reports/accuracy";

std::string accuracy_link(const fs::path& dir) {
  std::optional<fs::path> snapshot = installed_file(InstalledDir::doc, "accuracy/index.html");
#ifdef LOWBIT_SOURCE_DIR
  std::error_code exists_ec;
  if (!snapshot && fs::exists(fs::path(LOWBIT_SOURCE_DIR) / accuracy_snapshot, exists_ec))
    snapshot = fs::path(LOWBIT_SOURCE_DIR) / accuracy_snapshot;
#endif
  if (snapshot) {
    std::error_code ec;
    const fs::path rel = fs::relative(*snapshot, fs::absolute(dir, ec), ec);
    if (!ec && !rel.empty()) return rel.generic_string();
    return snapshot->string();
  }
  return accuracy_snapshot;
}

std::string report_markdown(const std::vector<Row>& rows, const RunInfo& info, bool conformant,
                            const std::string& accuracy) {
  std::ostringstream md;
  md << "# lowbit conformance report\n\n";
  md << "- lowbit " << info.version << "\n";
  md << "- tier: " << info.tier << "\n- started: " << info.started << "\n- total: " << seconds_text(info.seconds)
     << " s on " << info.threads
     << " hardware threads\n- result: " << (conformant ? "**conformant** (no mismatch)" : "**MISMATCHES FOUND**")
     << "\n\n";
  md << "| check | tier | cases | mismatches | seconds | status |\n|---|---|---:|---:|---:|---|\n";
  for (const Row& r : rows)
    md << "| " << r.name << " | " << checks::name(r.tier) << " | " << r.outcome.cases << " | " << r.outcome.mismatches
       << " | " << seconds_text(r.seconds) << " | " << status_of(r) << " |\n";
  md << "\n## What each check does\n\n";
  for (const Row& r : rows) {
    md << "- **" << r.name << "**: " << r.description << " (" << r.inputs << " " << r.unit << "s";
    if (!r.outcome.note.empty()) md << "; " << r.outcome.note;
    md << ")\n";
  }
  bool any = false;
  for (const Row& r : rows) {
    if (r.outcome.examples.empty()) continue;
    if (!any) md << "\n## First mismatches\n";
    any = true;
    md << "\n### " << r.name << " (" << r.outcome.mismatches << " in all)\n\n";
    for (const checks::Example& e : r.outcome.examples) md << "- `" << e.text << "`\n";
  }
  md << "\n## Accuracy report\n\nWhat these formats, scaling schemes and accumulation models do to realistic "
        "tensors: [the accuracy report](" << accuracy << ") (regenerate with `" << accuracy_command << "`).\n";
  return md.str();
}


// One <testcase> per check: a <failure> with the first mismatches, or <skipped> with the reason.
std::string junit_xml(const std::vector<Row>& rows, const RunInfo& info) {
  std::uint64_t failures = 0, skipped = 0;
  for (const Row& r : rows) {
    if (r.outcome.skipped) ++skipped;
    else if (r.outcome.mismatches) ++failures;
  }
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.3f", info.seconds);
  const std::string counts = "tests=\"" + std::to_string(rows.size()) + "\" failures=\"" + std::to_string(failures) +
                             "\" errors=\"0\" skipped=\"" + std::to_string(skipped) + "\" time=\"" + secs + "\"";
  std::string x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x += "<testsuites name=\"lowbit conform\" " + counts + ">\n";
  x += "  <testsuite name=\"lowbit conform " + xml_escape(info.tier) + "\" " + counts + ">\n";
  for (const Row& r : rows) {
    std::snprintf(secs, sizeof secs, "%.3f", r.seconds);
    x += "    <testcase classname=\"conform." + xml_escape(info.tier) + "\" name=\"" + xml_escape(r.name) +
         "\" time=\"" + secs + "\"";
    if (r.outcome.skipped) {
      x += ">\n      <skipped message=\"" + xml_escape(r.outcome.note) + "\"/>\n    </testcase>\n";
    } else if (r.outcome.mismatches) {
      std::string body;
      for (const checks::Example& e : r.outcome.examples) body += e.text + "\n";
      x += ">\n      <failure message=\"" + std::to_string(r.outcome.mismatches) + " of " +
           std::to_string(r.outcome.cases) + " cases disagree\" type=\"mismatch\">" + xml_escape(body) +
           "</failure>\n    </testcase>\n";
    } else {
      x += "/>\n";
    }
  }
  x += "  </testsuite>\n</testsuites>\n";
  return x;
}

// Through the one writer (lowbit/output.hpp); its FileError names the file.
void write_atomically(const fs::path& path, const std::string& text) { io::write_output(path.string(), text); }

int run(const Options& o) {
  std::optional<checks::Shard> shard;
  if (o.sharded) {
    std::string error;
    shard = checks::parse_shard(o.shard, error);
    if (!shard) {
      std::cerr << "lowbit: --shard: " << error << "\n";
      return 2;
    }
  }
  const checks::Tier tier = *checks::parse_tier(o.tier);
  std::vector<const Check*> selected;
  if (o.only.empty()) {
    selected = checks::checks_for(tier);
  } else {
    for (const std::string& n : o.only) {
      const Check* c = checks::find_check(n);
      if (!c) {
        std::cerr << "lowbit: --check: unknown check '" << n << "' (see lowbit conform --list)\n";
        return 2;
      }
      selected.push_back(c);
    }
  }
  if (o.list) {
    for (const Check& c : checks::all_checks())
      std::cout << c.name << "  [" << checks::name(c.tier) << "]  " << c.description << "\n";
    return 0;
  }

  const fs::path dir(o.out);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) {
    std::cerr << "lowbit: --out: cannot create directory '" << o.out << "'\n";
    return 2;
  }

  RunInfo info{LOWBIT_VERSION, o.tier, now_utc(), 0, std::thread::hardware_concurrency()};
  if (shard) std::cerr << "shard " << checks::shard_text(*shard) << " of every check's inputs\n";
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Row> rows;
  std::size_t index = 0;
  for (const Check* c : selected) {
    Row r{c->name, c->tier, c->description, c->unit, c->inputs(), {}, {}, 0};
    r.range = shard ? checks::shard_range(r.inputs, *shard) : checks::Range{0, r.inputs};
    std::string label = c->name;
    if (shard)
      label += " (inputs " + std::to_string(r.range.begin) + "-" + std::to_string(r.range.end) + " of " +
               std::to_string(r.inputs) + ")";
    ProgressLine line(label, ++index, selected.size());
    r.outcome = c->run(r.range, [&](std::uint64_t done, std::uint64_t total) { line.update(done, total); });
    r.seconds = line.elapsed();
    line.done(r);
    rows.push_back(std::move(r));
  }
  info.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::cout << "\n";
  print_conformance_summary(std::cout, rows, info, shard ? "shard " + checks::shard_text(*shard) + ", " : "");
  std::vector<std::string> names;
  for (const Check* c : selected) names.push_back(c->name);
  try {
    if (shard) {
      checks::write_shard(dir, checks::conform_shard_doc(*shard, info, names, rows, checks::build_id()));
      std::cout << "\nshard result: " << (dir / checks::shard_file).string()
                << " (join the shards with lowbit merge)\n";
      std::cout.flush();
      return conformant(rows) ? 0 : 1;
    }
    write_conformance_report(dir, rows, info);
  } catch (const std::exception& e) {
    std::cerr << "lowbit: --out: " << e.what() << "\n";
    return 2;
  }
  std::cout << "\nreport: " << (dir / "conformance.json").string() << ", " << (dir / "conformance.md").string() << ", "
            << (dir / "junit.xml").string() << "\n";
  std::cout << "accuracy report: " << accuracy_link(".") << " (regenerate: " << accuracy_command << ")\n";
  std::cout.flush();
  return conformant(rows) ? 0 : 1;
}

}  // namespace

bool conformant(const std::vector<checks::CheckRun>& runs) {
  for (const checks::CheckRun& r : runs)
    if (r.outcome.mismatches != 0) return false;
  return true;
}

void print_conformance_summary(std::ostream& os, const std::vector<checks::CheckRun>& runs, const checks::RunInfo& info,
                               const std::string& what) {
  const bool ok = conformant(runs);
  print_table(os, runs);
  os << "\n"
     << (ok ? "conformant" : "MISMATCHES FOUND") << " (" << what << info.tier << " tier, " << seconds_text(info.seconds)
     << " s)\n";
  for (const checks::CheckRun& r : runs) {
    if (r.outcome.examples.empty()) continue;
    os << "\n" << r.name << ": first mismatches of " << r.outcome.mismatches << ":\n";
    for (const checks::Example& e : r.outcome.examples) os << "  " << e.text << "\n";
  }
}

void write_conformance_report(const fs::path& dir, const std::vector<checks::CheckRun>& runs,
                              const checks::RunInfo& info) {
  const bool ok = conformant(runs);
  json j = report_json(runs, info, ok);
  j["accuracy_report"] = {{"link", accuracy_link(dir)}, {"command", accuracy_command}};
  write_atomically(dir / "conformance.json", j.dump(2) + "\n");
  write_atomically(dir / "conformance.md", report_markdown(runs, info, ok, accuracy_link(dir)));
  write_atomically(dir / "junit.xml", junit_xml(runs, info));
}

void add_conform(CLI::App& app) {
  auto opts = std::make_shared<Options>();
  auto* sub = app.add_subcommand("conform",
                                 "Run the conformance checks (exit 0: conformant, 1: mismatches, 2: usage error)");
  sub->add_option("--tier", opts->tier, "quick (every CI run, under 10 minutes on 2 cores) or full (exhaustive)")
      ->check(CLI::IsMember({"quick", "full"}))
      ->capture_default_str();
  sub->add_option("--out", opts->out,
                  "Directory for conformance.json, conformance.md and junit.xml (with --shard: "
                  "shard.json and shard.json.sha256)")
      ->capture_default_str();
  sub->add_option("--check", opts->only, "Run only the named check (repeatable; see --list)");
  auto* shard = sub->add_option(
      "--shard", opts->shard,
      "Run part I of N of every check's inputs (1 <= I <= N) and write a shard result for lowbit merge");
  sub->add_flag("--list", opts->list, "List the checks and exit");
  sub->callback([opts, shard] {
    opts->sharded = shard->count() > 0;
    std::cout.flush();
    const int code = run(*opts);
    std::cout.flush();
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace lowbit::cli
