// The rows of `lowbit profiles --diff --json` and of the accuracy report's "profile_differences": one
// function for both (cli_util.hpp declares it).
#include <cstdint>
#include <string>

#include "cli_util.hpp"
#include "lowbit/text.hpp"
#include "lowbit/exact.hpp"
#include "lowbit/profile.hpp"
#include "lowbit/profile_diff.hpp"

namespace lowbit::cli {

nlohmann::ordered_json profile_difference_rows(bool short_values) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const DiffRow& r : profile_differences()) {
    nlohmann::ordered_json j{{"target", r.probe->target},
                             {"class", name(r.probe->cls)},
                             {"input", r.probe->input},
                             {"shows", r.probe->shows}};
    nlohmann::ordered_json results = nlohmann::ordered_json::object();
    for (const DiffCell& c : r.cells) {
      if (!c.available) {
        results[c.profile->name] = nullptr;
        continue;
      }
      nlohmann::ordered_json cj{
          {"target", c.target->name}, {"rounding", name(c.policy.rounding)}, {"overflow", name(c.policy.overflow)}};
      if (c.unsupported) {
        cj["unsupported"] = true;
        cj["code"] = nullptr;
        cj["value"] = nullptr;
      } else {
        cj["code"] = hex(*c.target, c.result.code);
        if (short_values) {
          cj["value"] = short_value(*c.target, c.result.code);
          cj["exact_value"] = c.value;
        } else {
          cj["value"] = c.value;
        }
        cj["flags"] = flags_text(c.result.flags);
      }
      results[c.profile->name] = cj;
    }
    j["results"] = results;
    // Which implementations agree: one entry per distinct result, largest group first.
    nlohmann::ordered_json groups = nlohmann::ordered_json::array();
    for (const DiffGroup& g : r.groups()) {
      const DiffCell& c = *g.example;
      nlohmann::ordered_json gj{{"target", c.target->name}};
      gj["code"] =
          c.unsupported ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(hex(*c.target, c.result.code));
      gj["value"] = c.unsupported
                        ? nlohmann::ordered_json("undefined")
                        : nlohmann::ordered_json(short_values ? short_value(*c.target, c.result.code) : c.value);
      nlohmann::ordered_json names = nlohmann::ordered_json::array();
      for (const Profile* p : g.profiles) names.push_back(p->name);
      gj["profiles"] = names;
      groups.push_back(gj);
    }
    j["groups"] = groups;
    nlohmann::ordered_json none = nlohmann::ordered_json::array();
    for (const DiffCell& c : r.cells)
      if (!c.available) none.push_back(c.profile->name);
    j["no_conversion"] = none;
    rows.push_back(j);
  }
  return rows;
}

}  // namespace lowbit::cli
