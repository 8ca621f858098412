// `lowbit profiles`: the profiles and their targets, and with --diff every kind of disagreement.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli_util.hpp"
#include "commands.hpp"
#include "lowbit/names.hpp"
#include "lowbit/profile.hpp"
#include "lowbit/profile_diff.hpp"
#include "lowbit/text.hpp"

namespace lowbit::cli {

namespace {

using json = nlohmann::json;

// ---- lowbit profiles ------------------------------------------------------------------------------

std::string rule_text(const lowbit::TargetRule& r) {
  std::string s = r.default_rounding ? lowbit::name(*r.default_rounding) : "(rounding must be named)";
  s += "/";
  s += lowbit::name(r.default_overflow);
  return s;
}

std::string cell_text(const lowbit::DiffCell& c) {
  if (!c.available) return "n/a";
  if (c.unsupported) return "undefined";
  return lowbit::hex(*c.target, c.result.code) + "=" + short_value(*c.target, c.result.code);
}

void run_profiles(bool diff, bool as_json) {
  const auto all = lowbit::profiles();
  if (!diff) {
    if (as_json) {
      std::cout << lowbit::profiles_json() << '\n';
      return;
    }
    for (const lowbit::Profile& p : all) {
      std::cout << p.name << ": " << p.description << " (reproduces " << p.version << ")\n";
      std::string targets;
      for (const lowbit::TargetRule& r : p.targets)
        append(targets, ", ", std::string(r.target->name) + " " + rule_text(r));
      if (!targets.empty()) std::cout << "  targets: " << targets << '\n';
      if (p.any_target) std::cout << "  any other target: " << rule_text(p.fallback) << '\n';
    }
    return;
  }
  const std::vector<lowbit::DiffRow> rows = lowbit::profile_differences();
  if (as_json) {
    // Sorted keys (nlohmann::json), as before the rows were shared with the report.
    const json out = lowbit::cli::profile_difference_rows(false);
    std::cout << out.dump(2) << '\n';
    return;
  }
  // The divergence matrix: per format and input class, which implementations agree, with the example.
  std::vector<std::vector<std::string>> table = {{"format", "class", "input", "result: implementations"}};
  for (const lowbit::DiffRow& r : rows) {
    bool first = true;
    for (const lowbit::DiffGroup& g : r.groups()) {
      std::string names;
      for (const lowbit::Profile* p : g.profiles) append(names, " ", p->name);
      table.push_back({first ? r.probe->target : "", first ? lowbit::name(r.probe->cls) : "",
                       first ? r.probe->input : "", cell_text(*g.example) + ": " + names});
      first = false;
    }
  }
  print_table(table);
  std::cout << '\n';
  for (const lowbit::DiffRow& r : rows)
    std::cout << r.probe->target << " " << r.probe->input << ": " << r.probe->shows << '\n';
  std::cout << "(a profile missing from a row has no such conversion without options; int8 under microxcaling is "
               "int8sm; undefined: the implementation has no defined result; FORMAT:0xCODE inputs are codes of "
               "that format)\n";
}

// ---- lowbit decode / table ------------------------------------------------------------------------

}  // namespace

void add_profiles(CLI::App& app) {
  struct Options {
    bool diff = false, json = false;
  };
  auto o = std::make_shared<Options>();
  auto* sub = app.add_subcommand("profiles", "List the profiles (named policy bundles)");
  sub->add_flag("--diff", o->diff,
                "Print the divergence matrix: per format and input class, which profiles agree, one example each");
  sub->add_flag("--json", o->json, "Print JSON");
  sub->callback([o] { guarded([&] { run_profiles(o->diff, o->json); }); });
}

}  // namespace lowbit::cli
