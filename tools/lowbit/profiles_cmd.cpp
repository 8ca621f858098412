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
  return j;
}

json profile_json(const lowbit::Profile& p) {
  json j;
  j["name"] = p.name;
  j["description"] = p.description;
  const lowbit::Quirks& q = p.quirks;
  j["quirks"] = {{"nan_to_no_nan", lowbit::name(q.nan_to_no_nan)},
                 {"nan_style", lowbit::name(q.nan_style)},
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
      std::cout << p.name << ": " << p.description << '\n';
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
  std::vector<std::vector<std::string>> table;
  std::vector<std::string> head = {"target", "input"};
  for (const lowbit::Profile& p : all) head.push_back(p.name);
  table.push_back(head);
  for (const lowbit::DiffRow& r : rows) {
    std::vector<std::string> line = {r.probe->target, r.probe->input};
    for (const lowbit::DiffCell& c : r.cells) line.push_back(cell_text(c));
    table.push_back(line);
  }
  print_table(table);
  std::cout << '\n';
  for (const lowbit::DiffRow& r : rows) std::cout << r.probe->target << " " << r.probe->input << ": " << r.probe->shows << '\n';
  std::cout << "(n/a: the profile has no such conversion without options; int8 under microxcaling is int8sm; "
               "undefined: the implementation has no defined result)\n";
}

// ---- lowbit decode / table ------------------------------------------------------------------------

}  // namespace

void add_profiles(CLI::App& app) {
  struct Options {
    bool diff = false, json = false;
  };
  auto o = std::make_shared<Options>();
  auto* sub = app.add_subcommand("profiles", "List the profiles (named policy bundles)");
  sub->add_flag("--diff", o->diff, "Print every kind of disagreement between the profiles, one example each");
  sub->add_flag("--json", o->json, "Print JSON");
  sub->callback([o] { guarded([&] { run_profiles(o->diff, o->json); }); });
}

}  // namespace lowbit::cli
