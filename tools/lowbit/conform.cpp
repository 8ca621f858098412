// `lowbit conform [--tier quick|full] [--out DIR] [--check NAME]... [--list]`: the main job.
//
// Runs the conformance checks through the library (conformance/checks), shows progress on stderr,
// prints a table (check, cases, mismatches, seconds), writes DIR/conformance.json and
// DIR/conformance.md atomically (temporary file + rename), and exits 0 when every check that ran found
// no mismatch, 1 otherwise, 2 on a usage error.
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

#include "checks.hpp"
#include "commands.hpp"
#include "install_paths.hpp"

namespace lowbit::cli {

namespace {

namespace fs = std::filesystem;
using checks::Check;
using checks::Outcome;
using json = nlohmann::ordered_json;

struct Row {
  const Check* check;
  Outcome outcome;
  double seconds = 0;
};

struct Options {
  std::string tier = "quick";
  std::string out = "reports/out";
  std::vector<std::string> only;
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
  for (const Row& r : rows) w = std::max(w, r.check->name.size());
  char line[512];
  std::snprintf(line, sizeof line, "%-*s  %-5s  %14s  %10s  %9s  %s\n", static_cast<int>(w), "check", "tier", "cases",
                "mismatches", "seconds", "status");
  os << line;
  for (const Row& r : rows) {
    std::snprintf(line, sizeof line, "%-*s  %-5s  %14llu  %10llu  %9s  %s\n", static_cast<int>(w),
                  r.check->name.c_str(), checks::name(r.check->tier),
                  static_cast<unsigned long long>(r.outcome.cases),
                  static_cast<unsigned long long>(r.outcome.mismatches), seconds_text(r.seconds).c_str(),
                  status_of(r).c_str());
    os << line;
  }
}

json report_json(const std::vector<Row>& rows, const std::string& tier, const std::string& started, double total,
                 bool conformant) {
  json j;
  j["schema_version"] = 1;
#ifdef LOWBIT_VERSION
  j["lowbit_version"] = LOWBIT_VERSION;
#endif
  j["tier"] = tier;
  j["started"] = started;
  j["seconds"] = total;
  j["threads"] = std::thread::hardware_concurrency();
  j["conformant"] = conformant;
  json list = json::array();
  for (const Row& r : rows) {
    json c;
    c["name"] = r.check->name;
    c["tier"] = checks::name(r.check->tier);
    c["description"] = r.check->description;
    c["status"] = status_of(r);
    c["cases"] = r.outcome.cases;
    c["mismatches"] = r.outcome.mismatches;
    c["seconds"] = r.seconds;
    if (!r.outcome.note.empty()) c["note"] = r.outcome.note;
    c["first_mismatches"] = r.outcome.examples;
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

std::string report_markdown(const std::vector<Row>& rows, const std::string& tier, const std::string& started,
                            double total, bool conformant, const std::string& accuracy) {
  std::ostringstream md;
  md << "# lowbit conformance report\n\n";
#ifdef LOWBIT_VERSION
  md << "- lowbit " << LOWBIT_VERSION << "\n";
#endif
  md << "- tier: " << tier << "\n- started: " << started << "\n- total: " << seconds_text(total) << " s on "
     << std::thread::hardware_concurrency() << " hardware threads\n- result: "
     << (conformant ? "**conformant** (no mismatch)" : "**MISMATCHES FOUND**") << "\n\n";
  md << "| check | tier | cases | mismatches | seconds | status |\n|---|---|---:|---:|---:|---|\n";
  for (const Row& r : rows)
    md << "| " << r.check->name << " | " << checks::name(r.check->tier) << " | " << r.outcome.cases << " | "
       << r.outcome.mismatches << " | " << seconds_text(r.seconds) << " | " << status_of(r) << " |\n";
  md << "\n## What each check does\n\n";
  for (const Row& r : rows) {
    md << "- **" << r.check->name << "**: " << r.check->description;
    if (!r.outcome.note.empty()) md << " (" << r.outcome.note << ")";
    md << "\n";
  }
  bool any = false;
  for (const Row& r : rows) {
    if (r.outcome.examples.empty()) continue;
    if (!any) md << "\n## First mismatches\n";
    any = true;
    md << "\n### " << r.check->name << " (" << r.outcome.mismatches << " in all)\n\n";
    for (const std::string& e : r.outcome.examples) md << "- `" << e << "`\n";
  }
  md << "\n## Accuracy report\n\nWhat these formats, scaling schemes and accumulation models do to realistic "
        "tensors: [the accuracy report](" << accuracy << ") (regenerate with `" << accuracy_command << "`).\n";
  return md.str();
}

// Write a file atomically: a temporary file in the same folder, then rename over the target.
void write_atomically(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.parent_path() / ("." + path.filename().string() + ".tmp." + std::to_string(getpid()));
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw std::runtime_error("cannot write " + tmp.string());
    f << text;
    f.flush();
    if (!f) throw std::runtime_error("cannot write " + tmp.string());
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw std::runtime_error("cannot rename into " + path.string());
  }
}

int run(const Options& o) {
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

  const std::string started = now_utc();
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Row> rows;
  std::size_t index = 0;
  for (const Check* c : selected) {
    ProgressLine line(c->name, ++index, selected.size());
    Row r{c, {}, 0};
    r.outcome = c->run([&](std::uint64_t done, std::uint64_t total) { line.update(done, total); });
    r.seconds = line.elapsed();
    line.done(r);
    rows.push_back(std::move(r));
  }
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  bool conformant = true;
  for (const Row& r : rows) conformant = conformant && r.outcome.mismatches == 0;

  std::cout << "\n";
  print_table(std::cout, rows);
  std::cout << "\n" << (conformant ? "conformant" : "MISMATCHES FOUND") << " (" << o.tier << " tier, "
            << seconds_text(total) << " s)\n";
  for (const Row& r : rows) {
    if (r.outcome.examples.empty()) continue;
    std::cout << "\n" << r.check->name << ": first mismatches of " << r.outcome.mismatches << ":\n";
    for (const std::string& e : r.outcome.examples) std::cout << "  " << e << "\n";
  }

  try {
    json j = report_json(rows, o.tier, started, total, conformant);
    j["accuracy_report"] = {{"link", accuracy_link(dir)}, {"command", accuracy_command}};
    write_atomically(dir / "conformance.json", j.dump(2) + "\n");
    write_atomically(dir / "conformance.md",
                     report_markdown(rows, o.tier, started, total, conformant, accuracy_link(dir)));
  } catch (const std::exception& e) {
    std::cerr << "lowbit: --out: " << e.what() << "\n";
    return 2;
  }
  std::cout << "\nreport: " << (dir / "conformance.json").string() << ", " << (dir / "conformance.md").string()
            << "\n";
  std::cout << "accuracy report: " << accuracy_link(".") << " (regenerate: " << accuracy_command << ")\n";
  std::cout.flush();
  return conformant ? 0 : 1;
}

}  // namespace

void add_conform(CLI::App& app) {
  auto opts = std::make_shared<Options>();
  auto* sub = app.add_subcommand("conform",
                                 "Run the conformance checks (exit 0: conformant, 1: mismatches, 2: usage error)");
  sub->add_option("--tier", opts->tier, "quick (every CI run, under 10 minutes on 2 cores) or full (exhaustive)")
      ->check(CLI::IsMember({"quick", "full"}))
      ->capture_default_str();
  sub->add_option("--out", opts->out, "Directory for conformance.json and conformance.md")->capture_default_str();
  sub->add_option("--check", opts->only, "Run only the named check (repeatable; see --list)");
  sub->add_flag("--list", opts->list, "List the checks and exit");
  sub->callback([opts] {
    std::cout.flush();
    const int code = run(*opts);
    std::cout.flush();
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace lowbit::cli
