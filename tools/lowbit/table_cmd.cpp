// `lowbit table`: every code of a format of at most 16 bits and its exact value.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli_util.hpp"
#include "commands.hpp"
#include "lowbit/exact.hpp"
#include "lowbit/text.hpp"

namespace lowbit::cli {

namespace {

using json = nlohmann::json;

void run_table(const std::string& format_name, bool as_json) {
  const Format& f = require_format("--format", format_name);
  if (f.storage_bits() > 16)
    throw InputError(std::string("--format: table lists formats of at most 16 bits; ") + f.name + " has " +
                     std::to_string(f.storage_bits()));
  json out = json::array();
  std::string text;
  const std::uint64_t n = std::uint64_t{1} << f.code_bits();
  for (std::uint64_t c = 0; c < n; ++c) {
    const std::uint64_t code = c << f.code_shift;
    const std::string hc = lowbit::hex(f, code);
    const std::string value = lowbit::exact::code_text(f, code);
    if (as_json) out.push_back({{"code", hc}, {"value", value}});
    else text += hc + " " + value + "\n";
  }
  if (as_json) std::cout << out.dump(2) << '\n';
  else std::cout << text;
}

}  // namespace

void add_table(CLI::App& app) {
  struct Options {
    std::string format;
    bool json = false;
  };
  auto o = std::make_shared<Options>();
  auto* sub = app.add_subcommand("table", "Print every code and value of a format of at most 16 bits");
  sub->add_option("--format", o->format, "Format name or alias")->required();
  sub->add_flag("--json", o->json, "Print a JSON array");
  sub->callback([o] { guarded([&] { run_table(o->format, o->json); }); });
}

}  // namespace lowbit::cli
