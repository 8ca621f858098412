// `lowbit decode`: the exact value of codes given on the command line.
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

void run_decode(const std::string& format_name, const std::vector<std::string>& codes, bool as_json) {
  const Format& f = require_format("--format", format_name);
  json out = json::array();
  std::string text;
  for (const std::string& c : codes) {
    bool too_wide = false;
    const std::optional<std::uint64_t> v = lowbit::parse_hex(c, lowbit::HexPrefix::optional, &too_wide);
    if (!v) throw InputError("decode: '" + c + "' is not a hex code");
    if (too_wide || !f.valid_code(*v))
      throw InputError("decode: code " + code_problem(f, c));
    const std::string code = lowbit::hex(f, *v);
    const std::string value = lowbit::exact::code_text(f, *v);
    if (as_json) out.push_back({{"code", code}, {"value", value}});
    else text += code + " " + value + "\n";
  }
  if (as_json) std::cout << out.dump(2) << '\n';
  else std::cout << text;
}

}  // namespace

void add_decode(CLI::App& app) {
  struct Options {
    std::string format;
    std::vector<std::string> codes;
    bool json = false;
  };
  auto o = std::make_shared<Options>();
  auto* sub = app.add_subcommand("decode", "Print the exact value of codes");
  sub->add_option("--format", o->format, "Format name or alias")->required();
  sub->add_option("codes", o->codes, "Codes in hex")->required();
  sub->add_flag("--json", o->json, "Print a JSON array");
  sub->callback([o] { guarded([&] { run_decode(o->format, o->codes, o->json); }); });
}

}  // namespace lowbit::cli
