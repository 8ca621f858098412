// `lowbit merge DIR... --out DIR`: joins the results of a sharded run into what the unsharded run writes.
//
// Each DIR is one shard's result folder (conformance/checks/shard.hpp): from `lowbit conform --shard`,
// `lowbit vectors generate --shard`, `lowbit gate --shard` or `tools/device-check --shard`.  The merge
// first verifies that the folders are one complete run (one kind, version, build and set of options; every
// shard 1..N exactly once; each range the split gives; every checksum intact), and writes nothing unless
// they are.  Then, by kind:
//   conform  DIR/conformance.json, conformance.md, junit.xml: the unsharded run's, byte for byte except the
//            timings (the earliest start; each check's seconds and the total are the shards' sums)
//   vectors  DIR as the suite folder `lowbit vectors generate` writes, byte for byte
//   gate     the gate's report on stdout, DIR/junit.xml and DIR/gate.json (the --json report), byte for byte
//   device   DIR/device-fleet.json and device-fleet.md: every GPU of every task with its own results
// Exit status: that of the run it reproduces (0, or 1 for mismatches / failed device tests); 1, with
// nothing written, for a missing, duplicated, foreign or damaged shard; 2 for unreadable input or a
// usage error.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include "cli_util.hpp"
#include "commands.hpp"
#include "conform_report.hpp"
#include "shard.hpp"
#include "vectors_shard.hpp"

namespace lowbit::cli {

namespace {

namespace fs = std::filesystem;
namespace V = lowbit::vectors;
using checks::LoadedShard;
using checks::Malformed;
using ordered_json = nlohmann::ordered_json;

struct MergeOptions {
  std::vector<std::string> dirs;
  std::string out;
};

void create_out(const std::string& out) {
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec || !fs::is_directory(out)) throw InputError("--out: cannot create folder '" + out + "'");
}

int merge_conform(const std::vector<LoadedShard>& shards, const std::string& out, std::vector<std::string>& problems) {
  const std::optional<checks::MergedRun> m = checks::merge_conform(shards, problems);
  if (!m) return -1;
  create_out(out);
  try {
    write_conformance_report(out, m->runs, m->info);
  } catch (const std::runtime_error& e) { throw InputError(std::string("--out: ") + e.what()); }
  print_conformance_summary(std::cout, m->runs, m->info, "merged from " + std::to_string(shards.size()) + " shards, ");
  std::cout << "\nreport: " << (fs::path(out) / "conformance.json").string() << ", "
            << (fs::path(out) / "conformance.md").string() << ", " << (fs::path(out) / "junit.xml").string() << "\n";
  return conformant(m->runs) ? 0 : 1;
}

int merge_vectors(const std::vector<LoadedShard>& shards, const std::string& out, std::vector<std::string>& problems) {
  std::error_code ec;
  if (fs::exists(fs::symlink_status(out, ec)) && !(fs::is_directory(out, ec) && fs::is_empty(out, ec)))
    throw InputError("--out: '" + out + "' exists and is not an empty folder");
  const std::optional<V::Suite> s = V::merge_suite_shards(shards, problems);
  if (!s) return -1;
  V::write_suite(*s, out);
  std::cout << s->name << ": " << s->files.size() << " files written to " << out << "\n";
  return 0;
}

int merge_gate(const std::vector<LoadedShard>& shards, const std::string& out, std::vector<std::string>& problems) {
  const std::optional<V::MergedGate> m = V::merge_gate_shards(shards, problems);
  if (!m) return -1;
  create_out(out);
  write_all((fs::path(out) / "junit.xml").string(), V::junit_xml(m->reports, "lowbit gate"), "--out");
  write_all((fs::path(out) / "gate.json").string(),
            V::report_json(m->reports, "gate", m->plugin_name, m->max_report, m->req).dump(2) + "\n", "--out");
  // The unsharded gate's stdout, line for line.
  std::cout << "plugin: " << m->plugin_name << " (" << m->plugin_path << ")\n";
  V::print_reports(m->reports, m->max_report, m->req);
  std::cout.flush();
  std::cerr << "lowbit: merge: JUnit and JSON written to " << (fs::path(out) / "junit.xml").string() << " and "
            << (fs::path(out) / "gate.json").string() << "\n";
  return V::verdict(m->reports, m->req).empty() ? 0 : 1;
}

// ---- device-check shards ---------------------------------------------------------------------------------

struct GpuResult {
  std::uint32_t task = 0, tasks = 0;
  std::string host;
  ordered_json gpu;  // as the shard wrote it: slot, index, uuid, name, driver_version, ... and the results
  std::uint64_t passed = 0, failed = 0, skipped = 0, bad_binaries = 0;
};

std::string md_cell(const std::string& s) {
  std::string o;
  for (char c : s) o += c == '|' ? '/' : c == '\n' ? ' ' : c;
  return o;
}

int merge_device(const std::vector<LoadedShard>& shards, const std::string& out, std::vector<std::string>& problems) {
  const std::size_t before = problems.size();
  std::vector<GpuResult> gpus;
  std::map<std::string, std::string> uuids;  // uuid -> where it was first seen
  for (const LoadedShard& s : shards) {
    try {
      const ordered_json& run = checks::object_field(s.doc, "run", "shard.json");
      const std::string host = checks::string_field(run, "host", "shard.json.run");
      const ordered_json& list = checks::array_field(s.doc, "gpus", "shard.json");
      if (list.empty()) throw Malformed("shard.json.gpus is empty: the task ran on no GPU");
      for (std::size_t i = 0; i < list.size(); ++i) {
        const std::string at = "shard.json.gpus[" + std::to_string(i) + "]";
        GpuResult g{s.shard.index, s.shard.count, host, list[i]};
        const std::string uuid = checks::string_field(list[i], "uuid", at);
        checks::string_field(list[i], "name", at);
        checks::string_field(list[i], "driver_version", at);
        checks::uint_field(list[i], "slot", at);
        const ordered_json& tests = checks::array_field(list[i], "tests", at);
        for (std::size_t k = 0; k < tests.size(); ++k) {
          const std::string result = checks::string_field(tests[k], "result", at + ".tests[" + std::to_string(k) + "]");
          (result == "passed" ? g.passed : result == "skipped" ? g.skipped : g.failed)++;
        }
        for (const auto& [name, b] : checks::object_field(list[i], "binaries", at).items())
          if (!b.is_object() || b.value("exit", -1) != 0) ++g.bad_binaries;
        if (const auto [it, fresh] = uuids.emplace(uuid, s.where); !fresh)
          problems.push_back(s.where + ": duplicated GPU: " + uuid + " is also reported by " + it->second);
        gpus.push_back(std::move(g));
      }
    } catch (const Malformed& e) { problems.push_back(s.where + "/" + checks::shard_file + ": damaged: " + e.what()); }
  }
  if (problems.size() != before) return -1;
  std::sort(gpus.begin(), gpus.end(), [](const GpuResult& a, const GpuResult& b) {
    return std::pair(a.task, a.gpu.value("slot", 0)) < std::pair(b.task, b.gpu.value("slot", 0));
  });
  const LoadedShard& ref = shards.front();
  bool all_passed = true;
  ordered_json fleet;
  fleet["schema"] = "lowbit-device-fleet/1";
  fleet["lowbit_version"] = ref.doc.at("lowbit_version");
  fleet["build_id"] = ref.doc.at("build_id");
  fleet["options"] = ref.doc.at("options");
  fleet["tasks"] = ref.shard.count;
  ordered_json list = ordered_json::array();
  for (const GpuResult& g : gpus) {
    all_passed = all_passed && g.failed == 0 && g.bad_binaries == 0;
    ordered_json j = {{"task", g.task}, {"host", g.host}};
    for (const auto& [k, v] : g.gpu.items()) j[k] = v;
    list.push_back(j);
  }
  fleet["gpus"] = list;
  fleet["passed"] = all_passed;

  std::ostringstream md;
  md << "# lowbit device fleet report\n\n- lowbit " << ref.doc.at("lowbit_version").get<std::string>() << ", build "
     << ref.doc.at("build_id").get<std::string>() << "\n- " << ref.shard.count << " tasks, " << gpus.size()
     << " GPUs\n- result: " << (all_passed ? "**every device test passed or skipped**" : "**FAILURES**") << "\n\n";
  md << "| task | host | GPU | model | driver | UUID | passed | failed | skipped | binaries failed |\n"
        "|---:|---|---:|---|---|---|---:|---:|---:|---:|\n";
  for (const GpuResult& g : gpus)
    md << "| " << g.task << "/" << g.tasks << " | " << md_cell(g.host) << " | " << g.gpu.value("index", "?") << " | "
       << md_cell(g.gpu.value("name", "")) << " | " << md_cell(g.gpu.value("driver_version", "")) << " | "
       << md_cell(g.gpu.value("uuid", "")) << " | " << g.passed << " | " << g.failed << " | " << g.skipped << " | "
       << g.bad_binaries << " |\n";
  for (const GpuResult& g : gpus) {
    if (g.failed == 0 && g.bad_binaries == 0) continue;
    md << "\n## " << g.gpu.value("uuid", "") << " (" << g.gpu.value("name", "") << ", " << g.host << ")\n\n";
    for (const auto& [name, b] : g.gpu.at("binaries").items())
      if (b.value("exit", -1) != 0) md << "- " << name << ": exit " << b.value("exit", -1) << "\n";
    for (const ordered_json& t : g.gpu.at("tests"))
      if (t.value("result", "") == "failed")
        md << "- FAILED " << t.value("binary", "") << " " << t.value("suite", "") << "." << t.value("name", "") << "\n";
  }
  create_out(out);
  write_all((fs::path(out) / "device-fleet.json").string(), fleet.dump(1) + "\n", "--out");
  write_all((fs::path(out) / "device-fleet.md").string(), md.str(), "--out");
  std::cout << md.str() << "\nreport: " << (fs::path(out) / "device-fleet.json").string() << ", "
            << (fs::path(out) / "device-fleet.md").string() << "\n";
  return all_passed ? 0 : 1;
}

int run_merge(const MergeOptions& o) {
  std::vector<LoadedShard> loaded;
  std::vector<std::string> unreadable, problems;
  for (const std::string& d : o.dirs) {
    auto r = checks::load_shard(d);
    if (auto* e = std::get_if<checks::LoadError>(&r))
      (e->failure == checks::LoadFailure::unreadable ? unreadable : problems).push_back(e->text);
    else loaded.push_back(std::move(std::get<LoadedShard>(r)));
  }
  auto refuse = [](const std::vector<std::string>& lines, int code) {
    std::cout.flush();
    for (const std::string& l : lines) std::cerr << "lowbit: merge: " << l << "\n";
    std::cerr << "lowbit: merge: nothing written\n";
    return code;
  };
  if (!unreadable.empty()) return refuse(unreadable, 2);
  if (!loaded.empty())
    for (const std::string& p : checks::verify_cover(loaded, LOWBIT_VERSION)) problems.push_back(p);
  if (!problems.empty()) return refuse(problems, 1);
  const std::string kind = loaded.front().doc.at("kind").get<std::string>();
  int rc = -1;
  if (kind == "conform") rc = merge_conform(loaded, o.out, problems);
  else if (kind == "vectors") rc = merge_vectors(loaded, o.out, problems);
  else if (kind == "gate") rc = merge_gate(loaded, o.out, problems);
  else if (kind == "device") rc = merge_device(loaded, o.out, problems);
  else problems.push_back(loaded.front().where + ": foreign: kind '" + kind + "' is not one this lowbit merges");
  if (rc < 0) return refuse(problems, 1);
  return rc;
}

}  // namespace

void add_merge(CLI::App& app) {
  auto o = std::make_shared<MergeOptions>();
  auto* sub = app.add_subcommand(
      "merge",
      "Join the result folders of a sharded run (--shard I/N of conform, vectors generate, gate, device-check) into "
      "the unsharded run's report: exit as that run, 1 for a missing, duplicated, foreign or damaged shard, 2 for "
      "unreadable input");
  sub->add_option("dirs", o->dirs, "The shards' result folders (each holds shard.json)")->required();
  sub->add_option("--out", o->out, "Folder for the merged report (for vectors: the suite folder, absent or empty)")
      ->required();
  sub->callback([o] {
    int rc = 0;
    guarded([&] { rc = run_merge(*o); });
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace lowbit::cli
