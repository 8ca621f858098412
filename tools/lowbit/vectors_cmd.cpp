// `lowbit vectors list|generate`, `lowbit check` and `lowbit gate` (vectors/SPEC.md).
#include <dlfcn.h>
#include <fnmatch.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli_util.hpp"
#include "commands.hpp"
#include "lowbit/io.hpp"
#include "lowbit/plugin.h"
#include "lowbit/registry.hpp"
#include "vectors.hpp"
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
};

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
    s = V::generate(o.suite, checked_seed(o.seed));
  } catch (const std::invalid_argument& e) {
    throw InputError(e.what());
  }
  if (shard) {
    // Every shard generates the whole suite (under a second for the largest) and writes only its part.
    V::write_suite_shard(s, *shard, o.out);
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

void write_junit(const std::string& path, const std::vector<V::SuiteReport>& reports, const std::string& name) {
  if (!path.empty()) write_all(path, V::junit_xml(reports, name), "--junit");
}

int run_check(const VectorsOptions& o) {
  const std::size_t report_lines = max_report(o.max_report);
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
    for (const std::string& d : damage) std::cerr << "lowbit: golden set damaged: " << d << "\n";
    return 2;
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
          V::compare(golden[i], V::folder_reader(pairs[i].second), skip, std::max<std::size_t>(report_lines, 1)));
    } catch (const json::exception& e) {
      // A manifest whose checksum holds but whose content the checker cannot use is a damaged set.
      std::cout.flush();
      std::cerr << "lowbit: golden set damaged: " << pairs[i].first << "/manifest.json: " << e.what() << "\n";
      return 2;
    }
  }
  V::print_reports(reports, report_lines);
  write_junit(o.junit, reports, "lowbit check");
  for (const V::SuiteReport& r : reports)
    if (r.mismatches()) return 1;
  return 0;
}

// ---- the gate --------------------------------------------------------------------------------------

std::size_t code_bytes(const Format& f) {
  const int b = f.storage_bits();
  return b <= 8 ? 1 : b <= 16 ? 2 : b <= 32 ? 4 : 8;
}

struct Plugin {
  void* handle = nullptr;
  const lowbit_plugin* table = nullptr;
  ~Plugin() {
    if (handle) dlclose(handle);
  }
  std::string error() const {
    const char* e = table->last_error ? table->last_error() : nullptr;
    return e ? e : "(no message)";
  }
};

void load_plugin(const std::string& path, Plugin& p) {
  // dlopen searches the library path for a bare name; a path with a slash is taken as it is.
  const std::string where = path.find('/') == std::string::npos ? "./" + path : path;
  std::error_code ec;
  if (!fs::is_regular_file(where, ec)) throw InputError("--plugin: '" + path + "' is not a file");
  p.handle = dlopen(where.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!p.handle) throw InputError("--plugin: cannot load '" + path + "': " + dlerror());
  void* sym = dlsym(p.handle, LOWBIT_PLUGIN_ENTRY_SYMBOL);
  if (!sym) throw InputError("--plugin: '" + path + "' does not export " LOWBIT_PLUGIN_ENTRY_SYMBOL);
  lowbit_plugin_entry_fn entry;
  static_assert(sizeof entry == sizeof sym);
  std::memcpy(&entry, &sym, sizeof entry);
  p.table = entry(LOWBIT_PLUGIN_ABI_VERSION);
  if (!p.table)
    throw InputError("--plugin: '" + path + "' cannot serve plugin ABI version " +
                     std::to_string(LOWBIT_PLUGIN_ABI_VERSION));
  if (p.table->abi_version != LOWBIT_PLUGIN_ABI_VERSION)
    throw InputError("--plugin: '" + path + "' speaks plugin ABI version " + std::to_string(p.table->abi_version) +
                     ", this lowbit " + std::to_string(LOWBIT_PLUGIN_ABI_VERSION));
}

struct GateRun {
  std::map<std::string, std::string> results;  // path -> bytes
  std::map<std::string, std::string> errors;   // path -> why there is no result
  std::map<std::string, std::string> skip;     // unit -> reason
};

void gate_convert(const Plugin& p, const V::Golden& g, GateRun& run) {
  for (const json& e : g.manifest.at("files")) {
    const std::string path = e.at("path");
    if (!p.table->convert) {
      run.skip[path] = "the plugin has no convert entry point";
      continue;
    }
    const std::string from_name = e.at("from"), to_name = e.at("to");
    const Format* from = find_format(from_name);
    const Format* to = find_format(to_name);
    // The golden lines (verified): inputs in order.
    std::vector<std::uint64_t> inputs;
    const std::string& text = g.files.at(path);
    std::size_t pos = 0;
    while (pos < text.size()) {
      const std::size_t end = text.find('\n', pos);
      const std::string line = text.substr(pos, end - pos);
      pos = end == std::string::npos ? text.size() : end + 1;
      if (line.empty() || line[0] == '#') continue;
      inputs.push_back(std::stoull(line.substr(0, line.find(' ')), nullptr, 16));
    }
    const std::size_t wi = code_bytes(*from), wo = code_bytes(*to);
    std::vector<std::uint8_t> in(inputs.size() * wi), out(inputs.size() * wo);
    for (std::size_t i = 0; i < inputs.size(); ++i)
      for (std::size_t b = 0; b < wi; ++b) in[i * wi + b] = static_cast<std::uint8_t>(inputs[i] >> (8 * b));
    std::vector<std::uint8_t> flags(inputs.size());
    int flags_written = 0;
    const std::string profile = g.manifest.value("profile", "");
    const std::string rounding = e.at("rounding"), overflow = e.at("overflow"), subnormals = e.at("subnormals"),
                      tininess = e.at("tininess");
    const lowbit_policy pol{profile.c_str(), rounding.c_str(), overflow.c_str(), subnormals.c_str(), tininess.c_str()};
    const int rc = p.table->convert(from_name.c_str(), to_name.c_str(), &pol, in.data(), inputs.size(), out.data(),
                                    flags.data(), &flags_written);
    if (rc == LOWBIT_PLUGIN_UNSUPPORTED) {
      run.skip[path] = "the plugin does not implement this conversion";
      continue;
    }
    if (rc != LOWBIT_PLUGIN_OK) {
      run.errors[path] = path + ": the plugin's convert failed: " + p.error();
      continue;
    }
    std::string body;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      std::uint64_t code = 0;
      for (std::size_t b = 0; b < wo; ++b) code |= std::uint64_t{out[i * wo + b]} << (8 * b);
      body += hex(inputs[i], from->hex_digits()).substr(2) + " " + hex(code, to->hex_digits()).substr(2);
      if (flags_written) body += " " + hex(flags[i], 2).substr(2);
      body += "\n";
    }
    run.results[path] = body;
  }
}

void gate_tensors(const Plugin& p, const V::Golden& g, GateRun& run, bool gemm) {
  const auto entry = gemm ? p.table->gemm : p.table->quantize;
  for (const json& c : g.manifest.value("cases", json::array())) {
    const long long index = c.value("index", 0LL);
    char id[32];
    std::snprintf(id, sizeof id, "case-%03lld", index);
    if (!entry) {
      run.skip[id] = gemm ? "the plugin has no gemm entry point" : "the plugin has no quantize entry point";
      continue;
    }
    struct Held {
      io::NpyArray npy;
      std::string name, format, dtype, path;
    };
    std::vector<Held> ins, outs;
    for (const json& e : g.manifest.at("files")) {
      if (e.value("case", -1LL) != index) continue;
      const std::string path = e.at("path");
      const std::string& bytes = g.files.at(path);
      Held h{io::parse_npy(std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(bytes.data()),
                                                           bytes.size()),
                           path),
             e.value("name", ""), e.value("format", ""), e.value("dtype", ""), path};
      if (e.at("role") == "input") {
        ins.push_back(std::move(h));
      } else {
        std::fill(h.npy.bytes.begin(), h.npy.bytes.end(), 0);
        outs.push_back(std::move(h));
      }
    }
    auto arrays = [](std::vector<Held>& v) {
      std::vector<lowbit_array> a;
      for (Held& h : v)
        a.push_back({h.name.c_str(), h.format.c_str(), h.dtype.c_str(), io::dtype_bits(h.npy.dtype) / 8,
                     static_cast<std::uint32_t>(h.npy.shape.size()), h.npy.shape.data(), h.npy.elements(),
                     h.npy.bytes.data()});
      return a;
    };
    std::vector<lowbit_array> in_arrays = arrays(ins), out_arrays = arrays(outs);
    const std::string recipe = c.at("recipe").dump();
    const int rc = entry(recipe.c_str(), in_arrays.data(), static_cast<std::uint32_t>(in_arrays.size()),
                         out_arrays.data(), static_cast<std::uint32_t>(out_arrays.size()));
    if (rc == LOWBIT_PLUGIN_UNSUPPORTED) {
      run.skip[id] = "the plugin does not implement this recipe";
      continue;
    }
    for (Held& h : outs) {
      if (rc != LOWBIT_PLUGIN_OK) {
        run.errors[h.path] = h.path + ": the plugin failed: " + p.error();
        continue;
      }
      const std::vector<std::uint8_t> bytes = io::encode_npy(h.npy.dtype, h.npy.shape, h.npy.bytes);
      run.results[h.path] = std::string(bytes.begin(), bytes.end());
    }
  }
}

int run_gate(const VectorsOptions& o) {
  const std::size_t report_lines = max_report(o.max_report);
  const std::uint64_t seed = checked_seed(o.seed);
  std::optional<checks::Shard> shard;
  if (o.sharded) shard = V::shard_option(o.shard);
  if (shard && o.out.empty()) throw InputError("--out: required with --shard (the folder for the shard's result)");
  if (!shard && !o.out.empty()) throw InputError("--out: only with --shard (the report goes to stdout and --junit)");
  std::vector<std::string> names = o.suites;
  if (names.empty())
    for (const V::SuiteInfo& s : V::suites())
      if (s.committed) names.push_back(s.name);
  std::vector<V::Suite> generated;
  for (const std::string& n : names) {
    try {
      generated.push_back(V::generate(n, seed));
    } catch (const std::invalid_argument& e) {
      throw InputError(e.what());
    }
  }
  Plugin p;
  load_plugin(o.plugin, p);
  std::cout << "plugin: " << (p.table->name ? p.table->name : "(unnamed)") << " (" << o.plugin << ")\n";
  std::vector<V::SuiteReport> reports;
  V::GateShard part;  // with --shard: what this shard ran
  for (const V::Suite& s : generated) {
    V::Golden g = V::golden_from(s);
    if (shard) {
      const std::uint64_t units = V::unit_count(g);
      part.space.push_back({s.name, units, checks::shard_range(units, *shard)});
      g = V::golden_part(g, part.space.back().range);
    }
    GateRun run;
    const std::string kind = g.manifest.value("kind", "");
    if (kind == "convert") gate_convert(p, g, run);
    else gate_tensors(p, g, run, kind == "gemm");
    const V::Reader reader = [&run](const std::string& path, std::string& error) -> std::optional<std::string> {
      if (const auto it = run.results.find(path); it != run.results.end()) return it->second;
      const auto e = run.errors.find(path);
      error = e != run.errors.end() ? e->second : path + ": no result";
      return std::nullopt;
    };
    reports.push_back(V::compare(g, reader, run.skip, std::max<std::size_t>(report_lines, 1)));
  }
  V::print_reports(reports, report_lines);
  write_junit(o.junit, reports, "lowbit gate");
  if (shard) {
    part.suites = names;
    part.seed = seed;
    part.max_report = report_lines;
    part.plugin = V::plugin_identity(o.plugin, p.table->name ? p.table->name : "(unnamed)");
    part.reports = reports;
    std::error_code ec;
    fs::create_directories(o.out, ec);
    if (ec || !fs::is_directory(o.out)) throw InputError("--out: cannot create folder '" + o.out + "'");
    try {
      checks::write_shard(o.out, V::gate_shard_doc(*shard, part));
    } catch (const std::runtime_error& e) { throw InputError(std::string("--out: ") + e.what()); }
    std::cout << "shard " << checks::shard_text(*shard) << " written to " << o.out << " (join with lowbit merge)\n";
  }
  for (const V::SuiteReport& r : reports)
    if (r.mismatches()) return 1;
  return 0;
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
  gen->add_option("--seed", o->seed, "Seed of the random cases (default 1)");
  auto* gen_shard = gen->add_option(
      "--shard", o->shard, "Write only part I of N of the suite's files or cases, for lowbit merge (1 <= I <= N)");
  gen->callback([o, gen_shard] {
    o->sharded = gen_shard->count() > 0;
    guarded([o] { run_generate(*o); });
  });

  auto* check = app.add_subcommand(
      "check", "Compare a subject's results with golden vectors: exit 0 all match, 1 mismatches, 2 damaged golden "
               "set or bad arguments");
  check->add_option("--vectors", o->vectors, "A golden suite folder, or a folder of suite folders")->required();
  check->add_option("--results", o->results, "The subject's results, in the golden layout")->required();
  check->add_option("--junit", o->junit, "Write JUnit XML here");
  check->add_option("--max-report", o->max_report, "Mismatch lines to print (default 10)");
  check->add_option("--only", o->only,
                    "Compare only the files (or case-NNN folders) matching this glob, as PATH or SUITE/PATH "
                    "(repeatable); the rest are reported as skipped");
  check->callback([o] {
    int rc = 0;
    guarded([&] { rc = run_check(*o); });
    if (rc != 0) throw CLI::RuntimeError(rc);
  });

  auto* gate = app.add_subcommand(
      "gate", "Run golden suites in-process through a subject library (include/lowbit/plugin.h): exit 0, 1 or 2 "
              "as check");
  gate->add_option("--plugin", o->plugin, "The subject: a shared library exporting lowbit_plugin_entry")->required();
  gate->add_option("--suite", o->suites, "Suites to run (repeatable; default: every committed suite)");
  gate->add_option("--seed", o->seed, "Seed of the random cases (default 1)");
  gate->add_option("--junit", o->junit, "Write JUnit XML here");
  gate->add_option("--max-report", o->max_report, "Mismatch lines to print (default 10)");
  auto* gate_shard = gate->add_option("--shard", o->shard,
                                      "Run only part I of N of each suite's files or cases (1 <= I <= N); needs --out");
  gate->add_option("--out", o->out, "With --shard: the folder for the shard's result (shard.json), for lowbit merge");
  gate->callback([o, gate_shard] {
    o->sharded = gate_shard->count() > 0;
    int rc = 0;
    guarded([&] { rc = run_gate(*o); });
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace lowbit::cli
