// Subcommands that live in their own translation units register themselves through these hooks.
#pragma once
#include <CLI/CLI.hpp>

namespace lowbit::cli {

// `lowbit conform`: defined in conform.cpp.
void add_conform(CLI::App& app);

}  // namespace lowbit::cli
