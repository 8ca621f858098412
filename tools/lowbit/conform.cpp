// Placeholder until `lowbit conform` lands.
#include <iostream>

#include "commands.hpp"

namespace lowbit::cli {

void add_conform(CLI::App& app) {
  auto* sub = app.add_subcommand("conform", "Run the conformance checks (not yet implemented)");
  sub->callback([] {
    std::cerr << "lowbit conform: not yet implemented\n";
    throw CLI::RuntimeError(2);
  });
}

}  // namespace lowbit::cli
