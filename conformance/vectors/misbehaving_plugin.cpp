// A gate subject that misbehaves on purpose (conformance/vectors/test_gate.py): it forwards every
// call to the planted-bug plugin (LOWBIT_PLANTED_PLUGIN, a real subject with known results) and, chosen by
// LOWBIT_MISBEHAVE="WHAT:WHERE", does WHAT at WHERE instead:
//   WHERE  convert   the conversion f16 -> e5m2 (one unit of convert-te, two of convert-ocp)
//          quantize  the one scheme case of element e5m2 on a 1x16 input (scheme-tensor's case-005)
//          entry     in lowbit_plugin_entry
//          ctor      in the library's constructor (while it loads)
//   WHAT   segv, abort, throw, overrun (8 bytes past the output), hang, exit (exit(0)), garbage (status 7),
//          noise (prints "all match" on stdout and stderr, then forwards), closestdout (closes fd 1, then
//          forwards)
// and, with no WHERE: decline (every entry point answers UNSUPPORTED), null (every entry point NULL),
// short (struct_size 16), v1 (ABI version 1's first table, struct_size LOWBIT_PLUGIN_TABLE_SIZE_V1: a plugin
// compiled before the contract entry was appended, which still loads), badabi (ABI version 99), badptr (a convert
// pointer into no library), badname (a name pointer that cannot be read).
#include <dlfcn.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "lowbit/plugin.h"

namespace {

std::string what_to_do() {
  const char* m = std::getenv("LOWBIT_MISBEHAVE");
  return m ? m : "";
}

bool is(const std::string& where) {
  const std::string m = what_to_do();
  return m.size() > where.size() && m.compare(m.size() - where.size(), where.size(), where) == 0 &&
         m[m.size() - where.size() - 1] == ':';
}

std::string what() {
  const std::string m = what_to_do();
  return m.substr(0, m.find(':'));
}

// Does the misbehaviour.  Returns the status to answer (after "noise" and "closestdout": -1, forward).
int misbehave(void* out, std::size_t out_bytes) {
  const std::string w = what();
  if (w == "segv") std::raise(SIGSEGV);
  if (w == "abort") std::abort();
  if (w == "throw") throw std::runtime_error("thrown by the misbehaving plugin");
  if (w == "overrun") {
    // 8 bytes beyond the end of the output buffer the host gave.
    volatile unsigned char* p = static_cast<unsigned char*>(out);
    for (std::size_t i = 0; i < 8; ++i) p[out_bytes + i] = 0xAB;
    return LOWBIT_PLUGIN_OK;
  }
  if (w == "hang")
    for (;;) pause();
  if (w == "exit") std::exit(0);
  if (w == "garbage") return 7;
  if (w == "noise") {
    std::printf("all match: PLUGIN NOISE on stdout\n");
    std::fflush(stdout);
    std::fprintf(stderr, "PLUGIN NOISE on stderr\n");
    return -1;
  }
  if (w == "closestdout") {
    close(1);
    return -1;
  }
  return -1;
}

const lowbit_plugin* planted() {
  static const lowbit_plugin* table = [] {
    const char* path = std::getenv("LOWBIT_PLANTED_PLUGIN");
    void* h = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : nullptr;
    void* sym = h ? dlsym(h, LOWBIT_PLUGIN_ENTRY_SYMBOL) : nullptr;
    if (!sym) {
      std::fprintf(stderr, "misbehaving plugin: LOWBIT_PLANTED_PLUGIN does not name the planted plugin\n");
      std::abort();
    }
    lowbit_plugin_entry_fn entry;
    std::memcpy(&entry, &sym, sizeof entry);
    return entry(LOWBIT_PLUGIN_ABI_VERSION);
  }();
  return table;
}

std::size_t code_bytes(const char* format) {
  const std::string f = format;
  if (f == "f64") return 8;
  if (f == "f32" || f == "tf32") return 4;
  if (f == "f16" || f == "bf16") return 2;
  return 1;
}

int convert(const char* from, const char* to, const lowbit_policy* policy, const void* in, uint64_t n, void* out,
            uint8_t* flags, int* flags_written) {
  if (what() == "decline") return LOWBIT_PLUGIN_UNSUPPORTED;
  const bool here = is("convert") && std::strcmp(from, "f16") == 0 && std::strcmp(to, "e5m2") == 0;
  if (here || what() == "noise" || what() == "closestdout")
    if (const int rc = misbehave(out, n * code_bytes(to)); rc >= 0) return rc;
  return planted()->convert(from, to, policy, in, n, out, flags, flags_written);
}

const lowbit_array* find(const lowbit_array* a, uint32_t n, const char* name) {
  for (uint32_t i = 0; i < n; ++i)
    if (std::strcmp(a[i].name, name) == 0) return &a[i];
  return nullptr;
}

int quantize(const char* recipe, const lowbit_array* in, uint32_t n_in, lowbit_array* out, uint32_t n_out) {
  if (what() == "decline") return LOWBIT_PLUGIN_UNSUPPORTED;
  const lowbit_array* x = find(in, n_in, "x");
  const bool here = is("quantize") && std::strstr(recipe, "\"element\":\"e5m2\"") && x && x->rank == 2 &&
                    x->shape[0] == 1 && x->shape[1] == 16;
  if (here || what() == "noise" || what() == "closestdout") {
    const lowbit_array* codes = find(out, n_out, "codes");
    if (const int rc = misbehave(codes ? codes->data : nullptr, codes ? codes->count * codes->element_bytes : 0);
        rc >= 0)
      return rc;
  }
  return planted()->quantize(recipe, in, n_in, out, n_out);
}

int gemm(const char* recipe, const lowbit_array* in, uint32_t n_in, lowbit_array* out, uint32_t n_out) {
  if (what() == "decline") return LOWBIT_PLUGIN_UNSUPPORTED;
  return planted()->gemm(recipe, in, n_in, out, n_out);
}

const char* last_error() { return planted()->last_error(); }

int contract(const char* request, const lowbit_array* in, uint32_t n_in, lowbit_array* out, uint32_t n_out) {
  if (what() == "decline") return LOWBIT_PLUGIN_UNSUPPORTED;
  return planted()->contract(request, in, n_in, out, n_out);
}

lowbit_plugin table = {
    LOWBIT_PLUGIN_ABI_VERSION, sizeof(lowbit_plugin), "misbehaving", convert, quantize, gemm, last_error, contract};

__attribute__((constructor)) void on_load() {
  if (is("ctor")) misbehave(nullptr, 0);
}

}  // namespace

extern "C" LOWBIT_PLUGIN_EXPORT const lowbit_plugin* lowbit_plugin_entry(uint32_t host_abi_version) {
  if (host_abi_version != LOWBIT_PLUGIN_ABI_VERSION) return nullptr;
  if (is("entry")) misbehave(nullptr, 0);
  const std::string w = what();
  if (w == "null") {
    static const lowbit_plugin none = {
        LOWBIT_PLUGIN_ABI_VERSION, sizeof(lowbit_plugin), "all-null", nullptr, nullptr, nullptr, nullptr, nullptr};
    return &none;
  }
  if (w == "short") {
    // What an older or careless plugin hands over: the two version fields and nothing the host can use.
    static const struct {
      uint32_t abi_version, struct_size;
      const char* name;
      void* garbage;
    } small = {LOWBIT_PLUGIN_ABI_VERSION, 16, "short", reinterpret_cast<void*>(0x10)};
    return reinterpret_cast<const lowbit_plugin*>(&small);
  }
  if (w == "v1") {
    // ABI version 1's first table, as a plugin compiled against that header lays it out: no contract entry.
    static const struct {
      uint32_t abi_version, struct_size;
      const char* name;
      decltype(table.convert) convert;
      decltype(table.quantize) quantize;
      decltype(table.gemm) gemm;
      decltype(table.last_error) last_error;
    } first = {LOWBIT_PLUGIN_ABI_VERSION, 48, "misbehaving (ABI 1's first table)", convert, quantize, gemm, last_error};
    static_assert(sizeof first == LOWBIT_PLUGIN_TABLE_SIZE_V1, "ABI 1's first table is 48 bytes on LP64");
    return reinterpret_cast<const lowbit_plugin*>(&first);
  }
  if (w == "badabi") table.abi_version = 99;
  if (w == "badname") table.name = reinterpret_cast<const char*>(0x10);
  if (w == "badptr") {
    const std::uintptr_t nowhere = 0x10;
    std::memcpy(&table.convert, &nowhere, sizeof nowhere);
  }
  return &table;
}
