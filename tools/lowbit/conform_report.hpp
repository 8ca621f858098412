// The report of a conformance run, shared by `lowbit conform` (conform.cpp) and `lowbit merge`
// (merge_cmd.cpp), so that a run joined from shards is written by the same code as an unsharded one.
#pragma once
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "shard.hpp"

namespace lowbit::cli {

// No check found a mismatch.
bool conformant(const std::vector<checks::CheckRun>& runs);

// The table, the verdict line ("conformant (<what><tier> tier, S s)") and the first mismatches.
void print_conformance_summary(std::ostream& os, const std::vector<checks::CheckRun>& runs, const checks::RunInfo& info,
                               const std::string& what);

// dir/conformance.json, dir/conformance.md and dir/junit.xml, each through a temporary file renamed into
// place.  std::runtime_error when one cannot be written.
void write_conformance_report(const std::filesystem::path& dir, const std::vector<checks::CheckRun>& runs,
                              const checks::RunInfo& info);

}  // namespace lowbit::cli
