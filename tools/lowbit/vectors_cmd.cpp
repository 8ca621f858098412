// `lowbit vectors list|generate`, `lowbit check` and `lowbit gate` (vectors/SPEC.md).
#include <fcntl.h>
#include <fnmatch.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli_util.hpp"
#include "commands.hpp"
#include "lowbit/gate.hpp"
#include "lowbit/io.hpp"
#include "lowbit/registry.hpp"
#include "lowbit/vectors.hpp"
#include "vectors_shard.hpp"

namespace lowbit::cli {

namespace {

namespace V = lowbit::vectors;
namespace fs = std::filesystem;
using json = nlohmann::json;

struct VectorsOptions {
  std::string suite, out, vectors, results, junit, plugin;
  std::vector<std::string> suites;
  std::vector<std::string> only;  // check: glob patterns selecting files / cases
  long long seed = static_cast<long long>(V::default_seed);
  long long max_report = 10;
  std::string shard;     // generate, gate: "I/N" (vectors_shard.hpp)
  bool sharded = false;  // --shard was given
  std::string json;      // check, gate: the JSON report's file ("-": stdout, instead of the text report)
  std::vector<std::string> require;  // check, gate: suite globs that must compare a case
  long long min_cases = 1;
  double timeout = 60;      // gate: seconds per call of the plugin
  bool in_process = false;  // gate: call the plugin in this process (debugging)
  std::string shape, layout;  // generate, gate: on-demand shapes and layout (vectors/SPEC.md section 3)
  V::ShapeRequest shapes;     // what of --shape / --layout was given
};

// The report goes to stdout: a closed one is an error before anything runs, not a pass nobody sees.
void require_stdout() {
  if (fcntl(1, F_GETFD) == -1) throw InputError("stdout: closed, the report would be lost");
}

V::Requirements requirements(const VectorsOptions& o) {
  if (o.min_cases < 1) throw InputError("--min-cases: must be a positive integer");
  return {o.require, static_cast<std::uint64_t>(o.min_cases)};
}

// Every --require glob must name a suite of the run: a misspelt one would require nothing.
void check_required(const V::Requirements& req, const std::vector<std::string>& names) {
  const std::vector<std::string> unmatched = V::unmatched_requirements(req, names);
  if (!unmatched.empty()) throw InputError("--require: '" + unmatched.front() + "' matches no suite of this run");
}

// The text report on stdout (unless the JSON report goes there), JUnit and JSON files; the exit status.
int report(const VectorsOptions& o, const std::vector<V::SuiteReport>& reports, const std::string& command,
           const std::string& subject, std::size_t report_lines, const V::Requirements& req) {
  if (o.json != "-") V::print_reports(reports, report_lines, req);
  if (!o.junit.empty()) write_all(o.junit, V::junit_xml(reports, "lowbit " + command), "--junit");
  if (!o.json.empty())
    write_all(o.json, V::report_json(reports, command, subject, report_lines, req).dump(2) + "\n", "--json");
  std::cout.flush();
  // A report that did not reach stdout (a closed or full descriptor) is no pass.
  if (!std::cout || std::ferror(stdout)) throw InputError("stdout: the report could not be written");
  return V::verdict(reports, req).empty() ? 0 : 1;
}

// The request from the options' counts: `--shape` without a value asks for the default shapes.
void take_shapes(VectorsOptions& o, const CLI::Option* shape, const CLI::Option* layout) {
  o.shapes = {};
  if (shape->count() > 0) o.shapes.shape = o.shape;
  if (layout->count() > 0) o.shapes.layout = o.layout;
}

std::uint64_t checked_seed(long long seed) {
  if (seed < 0) throw InputError("--seed: must be a non-negative integer");
  return static_cast<std::uint64_t>(seed);
}

void run_list() {
  for (const V::SuiteInfo& s : V::suites()) std::cout << s.name << '\t' << s.description << '\n';
}

void run_generate(const VectorsOptions& o) {
  if (o.out.empty()) throw InputError("--out: required");
  std::optional<checks::Shard> shard;
  if (o.sharded) shard = V::shard_option(o.shard);
  V::Suite s;
  try {
    s = V::generate(o.suite, checked_seed(o.seed), o.shapes);
  } catch (const ArgumentError&) {
    throw;
  } catch (const std::invalid_argument& e) {
    throw InputError(e.what());
  }
  if (shard) {
    // Every shard generates the whole suite (under a second for the largest) and writes only its part.
    V::write_suite_shard(s, *shard, o.out, o.shapes);
    std::cout << s.name << ": shard " << checks::shard_text(*shard) << " written to " << o.out
              << " (join with lowbit merge)\n";
    return;
  }
  V::write_suite(s, o.out);
  std::cout << s.name << ": " << s.files.size() << " files written to " << o.out << "\n";
}

std::size_t max_report(long long n) {
  if (n < 0) throw InputError("--max-report: must be a non-negative integer");
  return static_cast<std::size_t>(n);
}

int run_check(const VectorsOptions& o) {
  require_stdout();
  const std::size_t report_lines = max_report(o.max_report);
  const V::Requirements req = requirements(o);
  std::error_code ec;
  if (!fs::is_directory(o.vectors, ec)) throw InputError("--vectors: '" + o.vectors + "' is not a folder");
  if (!fs::is_directory(o.results, ec)) throw InputError("--results: '" + o.results + "' is not a folder");
  // One suite (the folder holds a manifest) or a folder of suites.
  std::vector<std::pair<std::string, std::string>> pairs;  // golden folder, results folder
  auto has_manifest = [&](const fs::path& p) {
    return fs::exists(p / "manifest.json", ec) || fs::exists(p / "manifest.json.sha256", ec);
  };
  if (has_manifest(o.vectors)) {
    pairs.emplace_back(o.vectors, o.results);
  } else {
    std::vector<std::string> names;
    for (const fs::directory_entry& d : fs::directory_iterator(o.vectors, ec))
      if (d.is_directory() && has_manifest(d.path())) names.push_back(d.path().filename().string());
    std::sort(names.begin(), names.end());
    for (const std::string& n : names)
      pairs.emplace_back((fs::path(o.vectors) / n).string(), (fs::path(o.results) / n).string());
    if (pairs.empty())
      throw InputError("--vectors: no manifest.json in '" + o.vectors + "' or in its immediate subfolders");
  }
  std::vector<std::string> damage;
  std::vector<V::Golden> golden;
  for (const auto& [g, r] : pairs) {
    std::optional<V::Golden> loaded = V::load_golden(V::folder_reader(g), g, damage);
    if (loaded) golden.push_back(std::move(*loaded));
  }
  if (!damage.empty()) {
    std::cout.flush();
    // A damage line names files and fields of the suite: escaped and bounded (text.hpp echo_text).
    for (const std::string& d : damage)
      std::cerr << "lowbit: golden set damaged: " << lowbit::echo_text(d, 1024) << "\n";
    return 2;
  }
  {
    std::vector<std::string> suite_names;
    for (const V::Golden& g : golden) suite_names.push_back(g.name);
    check_required(req, suite_names);
  }
  std::vector<V::SuiteReport> reports;
  for (std::size_t i = 0; i < golden.size(); ++i) {
    // --only: units no pattern selects are skipped (a subject that implements part of a suite).
    std::map<std::string, std::string> skip;
    if (!o.only.empty()) {
      std::vector<std::string> units;
      if (golden[i].manifest.value("kind", "") == "convert") {
        for (const json& e : golden[i].manifest.at("files")) units.push_back(e.at("path"));
      } else {
        for (const json& c : golden[i].manifest.value("cases", json::array())) {
          char id[32];
          std::snprintf(id, sizeof id, "case-%03lld", c.value("index", 0LL));
          units.push_back(id);
        }
      }
      for (const std::string& u : units) {
        const std::string qualified = golden[i].name + "/" + u;
        bool selected = false;
        for (const std::string& pat : o.only)
          if (fnmatch(pat.c_str(), u.c_str(), 0) == 0 || fnmatch(pat.c_str(), qualified.c_str(), 0) == 0)
            selected = true;
        if (!selected) skip[u] = "not selected by --only";
      }
    }
    try {
      reports.push_back(
          V::compare(golden[i], V::folder_reader(pairs[i].second, "results file "), skip, std::max<std::size_t>(report_lines, 1)));
    } catch (const json::exception& e) {
      // A manifest whose checksum holds but whose content the checker cannot use is a damaged set.
      std::cout.flush();
      std::cerr << "lowbit: golden set damaged: " << lowbit::echo_text(pairs[i].first)
                << "/manifest.json: " << lowbit::echo_text(e.what(), 1024) << "\n";
      return 2;
    }
  }
  return report(o, reports, "check", "", report_lines, req);
}

// ---- the gate --------------------------------------------------------------------------------------

int run_gate(const VectorsOptions& o) {
  require_stdout();
  const std::size_t report_lines = max_report(o.max_report);
  const V::Requirements req = requirements(o);
  if (!(o.timeout > 0) || o.timeout > 86400) throw InputError("--timeout: must be a number of seconds in (0, 86400]");
  const std::uint64_t seed = checked_seed(o.seed);
  std::optional<checks::Shard> shard;
  if (o.sharded) shard = V::shard_option(o.shard);
  if (shard && o.out.empty()) throw InputError("--out: required with --shard (the folder for the shard's result)");
  if (!shard && !o.out.empty()) throw InputError("--out: only with --shard (the report goes to stdout and --junit)");
  std::vector<std::string> names = o.suites;
  if (names.empty() && o.shapes.given())
    throw InputError(std::string(o.shapes.shape ? "--shape" : "--layout") +
                     ": needs --suite (a gemm-* or scheme-* suite)");
  if (names.empty())
    for (const V::SuiteInfo& s : V::suites())
      if (s.committed) names.push_back(s.name);
  std::vector<V::Suite> generated;
  for (const std::string& n : names) {
    try {
      generated.push_back(V::generate(n, seed, o.shapes));
    } catch (const ArgumentError&) {
      throw;
    } catch (const std::invalid_argument& e) {
      throw InputError(e.what());
    }
  }
  check_required(req, names);
  const gate::Subject subject = gate::load_plugin(
      o.plugin,
      {o.in_process ? gate::Isolation::in_process : gate::Isolation::child_process, o.timeout, gate_worker_command()});
  if (o.json != "-") std::cout << "plugin: " << subject.name << " (" << o.plugin << ")\n";
  std::vector<V::SuiteReport> reports;
  V::GateShard part;  // with --shard: what this shard ran
  for (const V::Suite& s : generated) {
    V::Golden g = V::golden_from(s);
    if (shard) {
      const std::uint64_t units = V::unit_count(g);
      part.space.push_back({s.name, units, checks::shard_range(units, *shard)});
      g = V::golden_part(g, part.space.back().range);
    }
    reports.push_back(gate::run_suite(subject, g, std::max<std::size_t>(report_lines, 1)));
  }
  const int rc = report(o, reports, "gate", subject.name, report_lines, req);
  if (shard) {
    part.suites = names;
    part.seed = seed;
    part.max_report = report_lines;
    part.plugin = V::plugin_identity(o.plugin, subject.name);
    part.reports = reports;
    part.req = req;
    part.shapes = o.shapes;
    std::error_code ec;
    fs::create_directories(o.out, ec);
    if (ec || !fs::is_directory(o.out)) throw InputError("--out: cannot create folder '" + o.out + "'");
    try {
      checks::write_shard(o.out, V::gate_shard_doc(*shard, part));
    } catch (const std::runtime_error& e) { throw InputError(std::string("--out: ") + e.what()); }
    (o.json == "-" ? std::cerr : std::cout)
        << "shard " << checks::shard_text(*shard) << " written to " << o.out << " (join with lowbit merge)\n";
  }
  return rc;
}

// The options check and gate share: JSON, requirements.
void add_report_options(CLI::App* c, const std::shared_ptr<VectorsOptions>& o) {
  c->add_option("--junit", o->junit, "Write JUnit XML here");
  c->add_option("--json", o->json,
                "Write the JSON report (vectors/SPEC.md) here; '-': to stdout, instead of the text report");
  c->add_option("--max-report", o->max_report,
                "Lines of each listing (errors, skips, mismatches) to print (default 10)");
  c->add_option("--require", o->require,
                "Each suite matching this glob must compare at least one case (repeatable; a glob matching no "
                "suite is an error)");
  c->add_option("--min-cases", o->min_cases, "Fail unless at least N cases are compared over all suites (default 1)");
}

}  // namespace

void add_vectors(CLI::App& app) {
  auto o = std::make_shared<VectorsOptions>();
  auto* v = app.add_subcommand("vectors", "Golden vectors: list the suites, generate one (vectors/SPEC.md)");
  v->require_subcommand(1);
  auto* list = v->add_subcommand("list", "Print each suite: its name, a tab, a short description");
  list->callback([] { guarded([] { run_list(); }); });
  auto* gen = v->add_subcommand("generate", "Write a suite into a new folder");
  gen->add_option("--suite", o->suite, "Suite name (see `lowbit vectors list`)")->required();
  gen->add_option("--out", o->out, "Folder to create (it must not exist, or be empty)")->required();
  gen->add_option("--seed", o->seed, "Seed of the random cases (default 1)")->check(whole_number(0, LLONG_MAX));
  auto* gen_shard = gen->add_option(
      "--shard", o->shard, "Write only part I of N of the suite's files or cases, for lowbit merge (1 <= I <= N)");
  auto* gen_shape = gen->add_option("--shape", o->shape, "On demand, never committed: gemm-* suites at MxNxK[,...], scheme-* suites at RxC[,...]; without a value the "
      "defaults (GEMM: M, N in {64,129,256}, K in {128,4112}; scheme: 128x128,257x4096)")->expected(0, 1);
  auto* gen_layout = gen->add_option("--layout", o->layout, "With --shape, gemm-* suites: A's then B's storage, n row-major (A [M,K], B [K,N]) or t transposed (A [K,M], "
      "B [N,K]); nt for operands contiguous along K (default nn)");
  gen->callback([o, gen_shard, gen_shape, gen_layout] {
    o->sharded = gen_shard->count() > 0;
    take_shapes(*o, gen_shape, gen_layout);
    guarded([o] { run_generate(*o); });
  });

  auto* check = app.add_subcommand(
      "check",
      "Compare a subject's results with golden vectors: exit 0 cases compared and all match, 1 mismatches, "
      "errors or nothing compared, 2 damaged golden set or bad arguments");
  check->add_option("--vectors", o->vectors, "A golden suite folder, or a folder of suite folders")->required();
  check->add_option("--results", o->results, "The subject's results, in the golden layout")->required();
  add_report_options(check, o);
  check->add_option("--only", o->only,
                    "Compare only the files (or case-NNN folders) matching this glob, as PATH or SUITE/PATH "
                    "(repeatable); the rest are reported as skipped");
  check->callback([o] {
    int rc = 0;
    guarded([&] { rc = run_check(*o); });
    if (rc != 0) throw CLI::RuntimeError(rc);
  });

  auto* gate = app.add_subcommand(
      "gate",
      "Run golden suites through a subject library (include/lowbit/plugin.h), called in a worker process: "
      "exit 0, 1 or 2 as check (2 also for a broken plugin table)");
  gate->add_option("--plugin", o->plugin, "The subject: a shared library exporting lowbit_plugin_entry")->required();
  gate->add_option("--suite", o->suites, "Suites to run (repeatable; default: every committed suite)");
  gate->add_option("--seed", o->seed, "Seed of the random cases (default 1)")->check(whole_number(0, LLONG_MAX));
  add_report_options(gate, o);
  gate->add_option("--timeout", o->timeout,
                   "Seconds each call of the plugin may take before it is killed and reported (default 60)");
  gate->add_flag("--in-process", o->in_process,
                 "Call the plugin in this process instead of a child process (debugging: a crash of the plugin "
                 "is then the gate's)");
  auto* gate_shard = gate->add_option("--shard", o->shard,
                                      "Run only part I of N of each suite's files or cases (1 <= I <= N); needs --out");
  gate->add_option("--out", o->out, "With --shard: the folder for the shard's result (shard.json), for lowbit merge");
  // The gate's worker process (gate::worker_main): started by the gate itself, not by users.
  auto* worker = app.add_subcommand("gate-worker", "");
  worker->group("");  // hidden from --help
  worker->add_option("plugin", o->plugin)->required();
  worker->callback([o] {
    const int rc = gate::worker_main(o->plugin);
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
  auto* gate_shape = gate->add_option("--shape", o->shape, "On demand, never committed: gemm-* suites at MxNxK[,...], scheme-* suites at RxC[,...]; without a value the "
      "defaults (GEMM: M, N in {64,129,256}, K in {128,4112}; scheme: 128x128,257x4096)")->expected(0, 1);
  auto* gate_layout = gate->add_option("--layout", o->layout, "With --shape, gemm-* suites: A's then B's storage, n row-major (A [M,K], B [K,N]) or t transposed (A [K,M], "
      "B [N,K]); nt for operands contiguous along K (default nn)");
  gate->callback([o, gate_shard, gate_shape, gate_layout] {
    o->sharded = gate_shard->count() > 0;
    take_shapes(*o, gate_shape, gate_layout);
    int rc = 0;
    guarded([&] { rc = run_gate(*o); });
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace lowbit::cli
