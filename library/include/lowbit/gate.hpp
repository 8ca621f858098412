// The gate: golden suites run through a subject under test, its results compared with the suite's expected
// files (lowbit/vectors.hpp).  A subject is the plugin ABI's entry points (include/lowbit/plugin.h) as C++
// callables, so a shared library (`lowbit gate --plugin`) and the Python package's subjects run alike.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lowbit/plugin.h"
#include "lowbit/vectors.hpp"

namespace lowbit::gate {

struct Subject {
  std::string name;  // shown in reports
  // The entry points, with plugin.h's signatures and return codes; an empty one is not implemented.
  std::function<int(const char* from, const char* to, const lowbit_policy* policy, const void* in, std::uint64_t n,
                    void* out, std::uint8_t* flags, int* flags_written)>
      convert;
  std::function<int(const char* recipe_json, const lowbit_array* inputs, std::uint32_t n_inputs,
                    lowbit_array* outputs, std::uint32_t n_outputs)>
      quantize, gemm;
  // A pass of a precision contract (plugin.h's `contract` entry, read only from a table whose struct_size
  // holds it): outputs the plugin leaves unwritten come back with count 0.
  std::function<int(const char* request_json, const lowbit_array* inputs, std::uint32_t n_inputs,
                    lowbit_array* outputs, std::uint32_t n_outputs)>
      contract;
  // The message of the last LOWBIT_PLUGIN_ERROR ("(no message)" when the subject gives none).
  std::function<std::string()> last_error;
};

// Where a plugin's code runs.  In a child process (the default), a worker process started by fork + exec
// of LoadOptions::worker_command loads the library and makes the calls, with each call's outputs in shared
// memory ending at a guard page and the plugin's stdout and stderr captured apart from the caller's: a
// crash, hang, exit() or buffer overrun of the plugin, at any point, is the call's error
// (LOWBIT_PLUGIN_ERROR with last_error() saying what happened), never the caller's, and the next call
// starts a new worker.  In process, the library is loaded here and called directly (for debugging).
enum class Isolation { child_process, in_process };

struct LoadOptions {
  Isolation isolation = Isolation::child_process;
  double timeout_seconds = 60;  // per call (and for loading), in a child process: then the worker is killed
  // An executable and its first arguments that run worker_main() with the plugin's path appended (the
  // command line's hidden `lowbit gate-worker PLUGIN`); needed for Isolation::child_process.
  std::vector<std::string> worker_command;
};

// The worker's side, for the executable of worker_command: load the plugin at `path` and serve the gate's
// calls over descriptor 3 until the gate closes it.  Returns the process's exit status.
int worker_main(const std::string& path);

// A shared library exporting lowbit_plugin_entry as a subject (the library stays loaded while the subject or a
// copy of it lives).  Throws ArgumentError ("plugin") for a file that is not there or cannot be loaded, that
// lacks the entry symbol, speaks another ABI version, or returns a table with a struct_size smaller than this
// ABI's first table (LOWBIT_PLUGIN_TABLE_SIZE_V1; a table of that size has no contract entry) or a function pointer outside every loaded library (plugin.h's versioning rule: exit 2).  In a
// child process, a plugin that crashes, hangs or exits while it loads gives a subject whose every call fails
// with that reason.
Subject load_plugin(const std::string& path, const LoadOptions& options = {});

// Run one golden suite (convert, scheme or gemm kind) through the subject and compare: each unit the subject
// declines or lacks an entry point for is skipped with the reason; a subject's error is the unit's problem.
vectors::SuiteReport run_suite(const Subject& subject, const vectors::Golden& golden, std::size_t max_details);

}  // namespace lowbit::gate
