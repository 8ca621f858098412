// The subcommands the fuzzed command line does not need (conform runs the sweeps, report renders
// pages, merge joins their shards): registered as nothing, so that the text-input harness links without them.
#include "commands.hpp"

namespace lowbit::cli {
void add_conform(CLI::App&) {}
void add_report(CLI::App&) {}
void add_merge(CLI::App&) {}
}  // namespace lowbit::cli
