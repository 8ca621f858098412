// Inside the gate (gate.cpp, gate_worker.cpp): opening a plugin and checking its table, and the subject
// whose calls a worker process makes.
#pragma once
#include <cstddef>
#include <string>

#include "lowbit/gate.hpp"
#include "lowbit/plugin.h"

namespace lowbit::gate::detail {

struct Opened {
  void* handle = nullptr;
  const lowbit_plugin* table = nullptr;
  std::string refused;  // why the library or its table is refused (exit 2), or ""
};

// dlopen `where` (the path as given, `path`, names it in messages), call lowbit_plugin_entry and check the
// table (plugin.h's versioning rule; every function pointer in a loaded library).
Opened open_plugin(const std::string& where, const std::string& path);

// The table's contract entry, or nullptr when its struct_size does not reach it (a plugin compiled against
// ABI version 1's first table).
inline decltype(lowbit_plugin::contract) contract_entry(const lowbit_plugin& t) {
  return LOWBIT_PLUGIN_HAS(&t, contract) ? t.contract : nullptr;
}

// A subject whose calls run in a worker process started from options.worker_command.
Subject worker_subject(const std::string& where, const std::string& path, const LoadOptions& options);

}  // namespace lowbit::gate::detail
