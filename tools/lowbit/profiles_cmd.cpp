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

std::vector<std::string> mode_names(lowbit::ModeMask m, bool rounding) {
  std::vector<std::string> out;
  if (rounding) {
    for (lowbit::Rounding r : lowbit::all<lowbit::Rounding>())
      if (m & lowbit::bit(r)) out.push_back(lowbit::name(r));
  } else {
    for (lowbit::Overflow o : lowbit::all<lowbit::Overflow>())
      if (m & lowbit::bit(o)) out.push_back(lowbit::name(o));
  }
  return out;
}

json rule_json(const lowbit::TargetRule& r) {
  json j;
  j["format"] = r.target ? json(r.target->name) : json(nullptr);
  j["roundings"] = mode_names(r.roundings, true);
  j["default_rounding"] = r.default_rounding ? json(lowbit::name(*r.default_rounding)) : json(nullptr);
  j["overflows"] = mode_names(r.overflows, false);
  j["default_overflow"] = lowbit::name(r.default_overflow);
  j["note"] = r.note;
  j["nan_style"] = r.nan_style ? json(lowbit::name(*r.nan_style)) : json(nullptr);
  j["narrow_nan_style"] = r.narrow_nan_style ? json(lowbit::name(*r.narrow_nan_style)) : json(nullptr);
  j["narrow_nan_below"] = r.narrow_nan_below ? json(*r.narrow_nan_below) : json(nullptr);
  return j;
}

json profile_json(const lowbit::Profile& p) {
  json j;
  j["name"] = p.name;
  j["description"] = p.description;
  j["version"] = p.version;
  const lowbit::Quirks& q = p.quirks;
  j["quirks"] = {{"nan_to_no_nan", lowbit::name(q.nan_to_no_nan)},
                 {"nan_style", lowbit::name(q.nan_style)},
                 {"narrow_nan_style", lowbit::name(q.narrow_nan_style)},
                 {"narrow_nan_below", q.narrow_nan_below},
                 {"nan_decode", lowbit::name(q.nan_decode)},
                 {"unsigned_negative", lowbit::name(q.unsigned_negative)},
                 {"zero_into_no_zero", lowbit::name(q.zero_into_no_zero)},
                 {"numpy_half_nan", q.numpy_half_nan},
                 {"identity_copies", q.identity_copies},
                 {"nozero_lowest_binade_rounds_up", q.nozero_lowest_binade_rounds_up},
                 {"infinity_ignores_saturation", q.infinity_ignores_saturation}};
  j["int8_sign_magnitude"] = p.int8_sign_magnitude;
  j["targets"] = json::array();
  for (const lowbit::TargetRule& r : p.targets) j["targets"].push_back(rule_json(r));
  j["other_targets"] = p.any_target ? rule_json(p.fallback) : json(nullptr);
  return j;
}

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
      json out = json::array();
      for (const lowbit::Profile& p : all) out.push_back(profile_json(p));
      std::cout << out.dump(2) << '\n';
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
