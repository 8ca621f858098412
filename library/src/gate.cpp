#include "lowbit/gate.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <span>

#include "lowbit/error.hpp"
#include "lowbit/io.hpp"
#include "lowbit/registry.hpp"
#include "lowbit/text.hpp"

namespace lowbit::gate {

namespace {

namespace V = lowbit::vectors;
namespace fs = std::filesystem;
using json = nlohmann::json;

std::string error_of(const Subject& p) { return p.last_error ? p.last_error() : "(no message)"; }

// A status no plugin returns: an exception that left an entry point in process.
constexpr int thrown_status = -0x7477;

// Why a call that neither succeeded nor declined has no result.
std::string call_error(const Subject& p, const std::string& entry, int rc) {
  if (rc == LOWBIT_PLUGIN_ERROR) return "the plugin's " + entry + " failed: " + error_of(p);
  if (rc == thrown_status) return "the plugin's " + entry + " threw a C++ exception";
  return "the plugin's " + entry + " returned " + std::to_string(rc) +
         ", not a status of plugin.h (0 ok, 1 unsupported, 2 error)";
}

std::size_t code_bytes(const Format& f) {
  const int b = f.storage_bits();
  return b <= 8 ? 1 : b <= 16 ? 2 : b <= 32 ? 4 : 8;
}


struct GateRun {
  std::map<std::string, std::string> results;  // path -> bytes
  std::map<std::string, std::string> errors;   // path -> why there is no result
  std::map<std::string, std::string> skip;     // unit -> reason
};

void gate_convert(const Subject& p, const V::Golden& g, GateRun& run) {
  for (const json& e : g.manifest.at("files")) {
    const std::string path = e.at("path");
    if (!p.convert) {
      run.skip[path] = "the plugin has no convert entry point (NULL in its table)";
      continue;
    }
    const std::string from_name = e.at("from"), to_name = e.at("to");
    const Format* from = find_format(from_name);
    const Format* to = find_format(to_name);
    // The golden lines (verified): inputs in order.
    std::vector<std::uint64_t> inputs;
    const std::string& text = g.files.at(path);
    std::size_t pos = 0;
    while (pos < text.size()) {
      const std::size_t end = text.find('\n', pos);
      const std::string line = text.substr(pos, end - pos);
      pos = end == std::string::npos ? text.size() : end + 1;
      if (line.empty() || line[0] == '#') continue;
      inputs.push_back(std::stoull(line.substr(0, line.find(' ')), nullptr, 16));
    }
    const std::size_t wi = code_bytes(*from), wo = code_bytes(*to);
    std::vector<std::uint8_t> in(inputs.size() * wi), out(inputs.size() * wo);
    for (std::size_t i = 0; i < inputs.size(); ++i)
      for (std::size_t b = 0; b < wi; ++b) in[i * wi + b] = static_cast<std::uint8_t>(inputs[i] >> (8 * b));
    std::vector<std::uint8_t> flags(inputs.size());
    int flags_written = 0;
    const std::string profile = g.manifest.value("profile", "");
    const std::string rounding = e.at("rounding"), overflow = e.at("overflow"), subnormals = e.at("subnormals"),
                      tininess = e.at("tininess");
    const lowbit_policy pol{profile.c_str(), rounding.c_str(), overflow.c_str(), subnormals.c_str(), tininess.c_str()};
    const int rc = p.convert(from_name.c_str(), to_name.c_str(), &pol, in.data(), inputs.size(), out.data(),
                                    flags.data(), &flags_written);
    if (rc == LOWBIT_PLUGIN_UNSUPPORTED) {
      run.skip[path] = "the plugin declined " + from_name + " -> " + to_name + " (" + profile + " " + rounding + " " +
                       overflow + " " + subnormals + " " + tininess + ")";
      continue;
    }
    if (rc != LOWBIT_PLUGIN_OK) {
      run.errors[path] = call_error(p, "convert", rc);
      continue;
    }
    std::string body;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      std::uint64_t code = 0;
      for (std::size_t b = 0; b < wo; ++b) code |= std::uint64_t{out[i * wo + b]} << (8 * b);
      body.append(hex(inputs[i], from->hex_digits()), 2).append(" ").append(hex(code, to->hex_digits()), 2);
      if (flags_written) body.append(" ").append(hex(flags[i], 2), 2);
      body += '\n';
    }
    run.results[path] = body;
  }
}

void gate_tensors(const Subject& p, const V::Golden& g, GateRun& run, bool gemm) {
  const auto& entry = gemm ? p.gemm : p.quantize;
  for (const json& c : g.manifest.value("cases", json::array())) {
    const long long index = c.value("index", 0LL);
    char id[32];
    std::snprintf(id, sizeof id, "case-%03lld", index);
    if (!entry) {
      run.skip[id] = gemm ? "the plugin has no gemm entry point (NULL in its table)"
                          : "the plugin has no quantize entry point (NULL in its table)";
      continue;
    }
    struct Held {
      io::NpyArray npy;
      std::string name, format, dtype, path;
    };
    std::vector<Held> ins, outs;
    for (const json& e : g.manifest.at("files")) {
      if (e.value("case", -1LL) != index) continue;
      const std::string path = e.at("path");
      const std::string& bytes = g.files.at(path);
      Held h{io::parse_npy(std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(bytes.data()),
                                                           bytes.size()),
                           path),
             e.value("name", ""), e.value("format", ""), e.value("dtype", ""), path};
      if (e.at("role") == "input") {
        ins.push_back(std::move(h));
      } else {
        std::fill(h.npy.bytes.begin(), h.npy.bytes.end(), 0);
        outs.push_back(std::move(h));
      }
    }
    auto arrays = [](std::vector<Held>& v) {
      std::vector<lowbit_array> a;
      for (Held& h : v)
        a.push_back({h.name.c_str(), h.format.c_str(), h.dtype.c_str(), io::dtype_bits(h.npy.dtype) / 8,
                     static_cast<std::uint32_t>(h.npy.shape.size()), h.npy.shape.data(), h.npy.elements(),
                     h.npy.bytes.data()});
      return a;
    };
    std::vector<lowbit_array> in_arrays = arrays(ins), out_arrays = arrays(outs);
    const std::string recipe = c.at("recipe").dump();
    const int rc = entry(recipe.c_str(), in_arrays.data(), static_cast<std::uint32_t>(in_arrays.size()),
                         out_arrays.data(), static_cast<std::uint32_t>(out_arrays.size()));
    if (rc == LOWBIT_PLUGIN_UNSUPPORTED) {
      run.skip[id] = std::string("the plugin's ") + (gemm ? "gemm" : "quantize") + " declined recipe " + recipe;
      continue;
    }
    const std::string failure = rc == LOWBIT_PLUGIN_OK ? "" : call_error(p, gemm ? "gemm" : "quantize", rc);
    for (Held& h : outs) {
      if (rc != LOWBIT_PLUGIN_OK) {
        run.errors[h.path] = failure;
        continue;
      }
      const std::vector<std::uint8_t> bytes = io::encode_npy(h.npy.dtype, h.npy.shape, h.npy.bytes);
      run.results[h.path] = std::string(bytes.begin(), bytes.end());
    }
  }
}

}  // namespace

namespace {

// ---- the plugin's table --------------------------------------------------------------------------------

// Why a table returned by lowbit_plugin_entry cannot be used (plugin.h's versioning rule), or "".  A
// function pointer must lie in a loaded library (dladdr): a table shorter than it claims, or one built
// from garbage, is refused before anything is called through it.
std::string table_problem(const lowbit_plugin* table) {
  if (!table) return "cannot serve plugin ABI version " + std::to_string(LOWBIT_PLUGIN_ABI_VERSION);
  if (table->abi_version != LOWBIT_PLUGIN_ABI_VERSION)
    return "speaks plugin ABI version " + std::to_string(table->abi_version) + ", this lowbit " +
           std::to_string(LOWBIT_PLUGIN_ABI_VERSION);
  if (table->struct_size < sizeof(lowbit_plugin))
    return "returns a table of struct_size " + std::to_string(table->struct_size) + " bytes; ABI version " +
           std::to_string(LOWBIT_PLUGIN_ABI_VERSION) + " needs " + std::to_string(sizeof(lowbit_plugin));
  const std::pair<const char*, const void*> entries[] = {
      {"convert", reinterpret_cast<const void*>(table->convert)},
      {"quantize", reinterpret_cast<const void*>(table->quantize)},
      {"gemm", reinterpret_cast<const void*>(table->gemm)},
      {"last_error", reinterpret_cast<const void*>(table->last_error)}};
  for (const auto& entry : entries) {
    Dl_info info;
    if (entry.second && dladdr(entry.second, &info) == 0) {
      char where[32];
      std::snprintf(where, sizeof where, "%p", entry.second);
      return std::string("returns a table whose ") + entry.first + " pointer " + where + " lies in no loaded library";
    }
  }
  return "";
}

struct Opened {
  void* handle = nullptr;
  const lowbit_plugin* table = nullptr;
  std::string refused;  // why the library is refused (exit 2), or ""
};

Opened open_plugin(const std::string& where, const std::string& path) {
  Opened o;
  o.handle = dlopen(where.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!o.handle) {
    const char* e = dlerror();
    o.refused = "cannot load '" + path + "': " + (e ? e : "(no message)");
    return o;
  }
  void* sym = dlsym(o.handle, LOWBIT_PLUGIN_ENTRY_SYMBOL);
  if (!sym) {
    o.refused = "'" + path + "' does not export " LOWBIT_PLUGIN_ENTRY_SYMBOL;
    return o;
  }
  lowbit_plugin_entry_fn entry;
  static_assert(sizeof entry == sizeof sym);
  std::memcpy(&entry, &sym, sizeof entry);
  o.table = entry(LOWBIT_PLUGIN_ABI_VERSION);
  if (const std::string why = table_problem(o.table); !why.empty()) o.refused = "'" + path + "' " + why;
  return o;
}

// ---- calls in a child process --------------------------------------------------------------------------

// Shared memory whose last byte is followed by an inaccessible page: a write past its end faults in the
// child.  The data starts `size` bytes before that page (8-byte sizes keep it 8-byte aligned).
class GuardedBuffer {
 public:
  explicit GuardedBuffer(std::size_t size) : size_(size) {
    const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    span_ = (size + page - 1) / page * page + page;
    void* p = mmap(nullptr, span_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("the gate cannot map " + std::to_string(size) + " bytes");
    base_ = static_cast<std::uint8_t*>(p);
    mprotect(base_ + span_ - page, page, PROT_NONE);
    std::memset(base_, 0, span_ - page);
  }
  ~GuardedBuffer() { munmap(base_, span_); }
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;
  std::uint8_t* data() const {
    const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    return base_ + span_ - page - size_;
  }

 private:
  std::size_t size_, span_ = 0;
  std::uint8_t* base_ = nullptr;
};

// What the child leaves for the parent (in shared memory).
struct ChildReport {
  static constexpr std::uint32_t done_mark = 0x6c6f7762;  // set after the call returned
  std::uint32_t done;
  int refused;  // the library or its table is unusable (the message says why)
  int thrown;   // a C++ exception left the plugin (the message is its what())
  int rc;
  int flags_written;
  std::uint32_t entries;  // probe: bit 0 convert, 1 quantize, 2 gemm
  std::uint32_t reading_name;  // probe: set while the table's name is read (a fault there: a bad pointer)
  char name[256];
  char message[2048];
};

void copy_text(char* to, std::size_t size, const char* from) { std::snprintf(to, size, "%s", from ? from : ""); }

const char* signal_name(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGABRT: return "SIGABRT";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGTRAP: return "SIGTRAP";
    case SIGPIPE: return "SIGPIPE";
    case SIGSYS: return "SIGSYS";
    default: return "signal";
  }
}

// One line of at most `max` characters from captured output (its end, where the last words are).
std::string output_tail(const std::string& text, std::size_t max) {
  std::string t;
  if (text.size() > max) {
    t = "...";
    t.append(text, text.size() - max, max);
  } else {
    t = text;
  }
  for (char& c : t)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  while (!t.empty() && t.back() == ' ') t.pop_back();
  return t;
}

struct ChildOutcome {
  std::string failure;   // "" when the call returned; else what the plugin did: "crashed", "hung", "exited", ...
  std::string detail;    // how: the signal, the timeout, the exit status
  std::string out, err;  // the plugin's stdout and stderr (at most capture_limit bytes each)
};

constexpr std::size_t capture_limit = 1 << 16;

// Read what is there from a non-blocking descriptor; -1 on end of file.
int drain(int fd, std::string& into) {
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      if (into.size() < capture_limit) into.append(buf, std::min<std::size_t>(n, capture_limit - into.size()));
      continue;
    }
    if (n == 0) return -1;
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
  }
}

// Fork a child that opens the plugin and runs `body` on its table, with the report in `report`; wait at most
// `timeout` seconds.  The child's stdin is /dev/null and its stdout and stderr go to pipes read here.
ChildOutcome run_in_child(const std::string& where, const std::string& path, double timeout,
                          const std::function<int(const lowbit_plugin&)>& body, ChildReport* report) {
  ChildOutcome o;
  int out_pipe[2], err_pipe[2];
  if (pipe(out_pipe) != 0) throw std::runtime_error("the gate cannot create a pipe");
  if (pipe(err_pipe) != 0) {
    close(out_pipe[0]);
    close(out_pipe[1]);
    throw std::runtime_error("the gate cannot create a pipe");
  }
  // Whatever the caller buffered must not be written twice (by a child that calls exit()).
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    for (const int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) close(fd);
    throw std::runtime_error("the gate cannot fork a child process");
  }
  if (pid == 0) {
    setpgid(0, 0);
    const int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, 0);
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    for (const int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1], null_fd})
      if (fd > 2) close(fd);
    // Nothing may leave this block but _exit: the child must never return into the caller's frames.
    try {
      const Opened opened = open_plugin(where, path);
      if (!opened.refused.empty()) {
        report->refused = 1;
        copy_text(report->message, sizeof report->message, opened.refused.c_str());
      } else {
        report->rc = body(*opened.table);
      }
    } catch (const std::exception& e) {
      report->thrown = 1;
      copy_text(report->message, sizeof report->message, e.what());
    } catch (...) {
      report->thrown = 1;
      copy_text(report->message, sizeof report->message, "(not a std::exception)");
    }
    report->done = ChildReport::done_mark;
    _exit(0);
  }
  setpgid(pid, pid);  // also in the parent: no race with the child's own call
  close(out_pipe[1]);
  close(err_pipe[1]);
  // The child's pidfd (Linux 5.3) becomes readable when it ends, so the wait below wakes at once; without
  // one, the loop polls every millisecond.
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  pollfd fds[3] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}, {pidfd, POLLIN, 0}};
  std::string* into[2] = {&o.out, &o.err};
  for (int i = 0; i < 2; ++i) fcntl(fds[i].fd, F_SETFL, fcntl(fds[i].fd, F_GETFL) | O_NONBLOCK);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout);
  int status = 0;
  bool timed_out = false;
  for (;;) {
    // Ended, but not reaped (WNOWAIT): while the zombie is there its id, and so its process group's,
    // cannot be reused, and the kill of the group below reaches only what the plugin started.
    siginfo_t info{};
    if (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid) break;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      kill(-pid, SIGKILL);
      timed_out = true;
      break;
    }
    poll(fds, 3, static_cast<int>(std::min<long long>(left.count(), pidfd >= 0 ? 1000 : 1)));
    for (int i = 0; i < 2; ++i)
      if (fds[i].fd >= 0 && drain(fds[i].fd, *into[i]) < 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
      }
  }
  if (pidfd >= 0) close(pidfd);
  kill(-pid, SIGKILL);  // whatever the plugin started in the child's process group
  waitpid(pid, &status, 0);
  for (int i = 0; i < 2; ++i)
    if (fds[i].fd >= 0) {
      drain(fds[i].fd, *into[i]);
      close(fds[i].fd);
    }
  char text[200];
  if (timed_out) {
    o.failure = "hung";
    std::snprintf(text, sizeof text, ": no return within %g s (--timeout), killed", timeout);
    o.detail = text;
  } else if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* cause = sig == SIGSEGV || sig == SIGBUS
                            ? ": an invalid memory access, or a write beyond an output buffer"
                        : sig == SIGABRT ? ": abort(), or a failed assertion"
                                         : "";
    o.failure = "crashed";
    std::snprintf(text, sizeof text, ": killed by signal %d (%s, %s%s)", sig, signal_name(sig), strsignal(sig), cause);
    o.detail = text;
  } else if (report->done != ChildReport::done_mark) {
    o.failure = "exited";
    std::snprintf(text, sizeof text, " with status %d before returning (exit() or _exit() in the plugin)",
                  WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    o.detail = text;
  } else if (report->thrown) {
    o.failure = "threw a C++ exception";
    o.detail = std::string(": ") + report->message;
  }
  return o;
}

// The state an isolated subject keeps: where the library is, the message of the last failed call.
struct ChildPlugin {
  std::string where, path;
  double timeout = 60;
  std::string last_error = "(no message)";
  std::size_t output_notes = 0;  // calls whose plugin output was shown on stderr
  int flags_written_last = 0;    // convert: the child's *flags_written

  // One call of an entry point in a child: `body` calls it; returns the plugin's status, or
  // LOWBIT_PLUGIN_ERROR with last_error saying what happened to the child.
  int call(const std::string& what, const std::function<int(const lowbit_plugin&, ChildReport&)>& body) {
    std::optional<GuardedBuffer> shared;
    ChildOutcome o;
    ChildReport* report = nullptr;
    try {
      shared.emplace(sizeof(ChildReport));
      report = reinterpret_cast<ChildReport*>(shared->data());
      o = run_in_child(
          where, path, timeout, [&](const lowbit_plugin& t) { return body(t, *report); }, report);
    } catch (const std::runtime_error& e) {  // no pipe, no fork, no memory: this call's error
      last_error = std::string(e.what()) + " for " + what;
      return LOWBIT_PLUGIN_ERROR;
    }
    const std::string output = o.out.empty() && o.err.empty() ? ""
                                                              : " (plugin stdout: '" + output_tail(o.out, 200) +
                                                                    "', stderr: '" + output_tail(o.err, 200) + "')";
    if (!o.failure.empty()) {
      last_error = o.failure + " during " + what + o.detail + output;
      return LOWBIT_PLUGIN_ERROR;
    }
    if (report->refused) {
      last_error = std::string("the plugin was refused in the child process: ") + report->message;
      return LOWBIT_PLUGIN_ERROR;
    }
    // Output of a call that returned is shown apart from the report, on stderr, for the first few calls.
    if (!output.empty() && output_notes++ < 5)
      std::fprintf(stderr, "lowbit: gate: the plugin wrote during %s:%s\n", what.c_str(), output.c_str());
    flags_written_last = report->flags_written;
    if (report->rc == LOWBIT_PLUGIN_ERROR) last_error = report->message[0] ? report->message : "(no message)";
    return report->rc;
  }
};

void record_error(const lowbit_plugin& t, int rc, ChildReport& r) {
  if (rc == LOWBIT_PLUGIN_ERROR && t.last_error) copy_text(r.message, sizeof r.message, t.last_error());
}

std::size_t element_width(const char* format) {
  const Format* f = format ? find_format(format) : nullptr;
  return f ? code_bytes(*f) : 8;
}

Subject child_subject(const std::string& where, const std::string& path, const LoadOptions& options) {
  auto state = std::make_shared<ChildPlugin>();
  state->where = where;
  state->path = path;
  state->timeout = options.timeout_seconds;
  // A probe: load the library once in a child, read the table's name and entry points.
  std::string name;
  std::uint32_t entries = 0;
  {
    GuardedBuffer shared(sizeof(ChildReport));
    auto* report = reinterpret_cast<ChildReport*>(shared.data());
    const ChildOutcome o = run_in_child(
        where, path, options.timeout_seconds,
        [report](const lowbit_plugin& t) {
          report->reading_name = 1;
          copy_text(report->name, sizeof report->name, t.name ? t.name : "(unnamed)");
          report->reading_name = 0;
          report->entries = (t.convert ? 1u : 0u) | (t.quantize ? 2u : 0u) | (t.gemm ? 4u : 0u);
          return 0;
        },
        report);
    if (o.failure.empty() && report->refused) throw ArgumentError("plugin", report->message);
    if (o.failure == "crashed" && report->reading_name)
      throw ArgumentError("plugin", "'" + path + "' returns a table whose name pointer cannot be read" + o.detail);
    if (!o.failure.empty()) {
      // Every call fails with the reason: the suites report it, unit by unit, and the gate exits 1.
      const std::string why =
          o.failure + " while loading (in a library constructor or " + LOWBIT_PLUGIN_ENTRY_SYMBOL + ")" + o.detail;
      Subject s;
      s.name = "(not loaded)";
      s.convert = [](const char*, const char*, const lowbit_policy*, const void*, std::uint64_t, void*, std::uint8_t*,
                     int*) { return LOWBIT_PLUGIN_ERROR; };
      s.quantize = s.gemm = [](const char*, const lowbit_array*, std::uint32_t, lowbit_array*, std::uint32_t) {
        return LOWBIT_PLUGIN_ERROR;
      };
      s.last_error = [why] { return why; };
      return s;
    }
    name = report->name;
    entries = report->entries;
  }
  Subject s;
  s.name = name;
  if (entries & 1u)
    s.convert = [state](const char* from, const char* to, const lowbit_policy* policy, const void* in, std::uint64_t n,
                        void* out, std::uint8_t* flags, int* flags_written) {
      const std::size_t wo = element_width(to);
      GuardedBuffer out_buf(n * wo), flag_buf(n);
      const int rc =
          state->call(std::string("convert(") + from + " -> " + to + ")", [&](const lowbit_plugin& t, ChildReport& r) {
            int written = 0;
            const int code = t.convert(from, to, policy, in, n, out_buf.data(), flag_buf.data(), &written);
            r.flags_written = written;
            record_error(t, code, r);
            return code;
          });
      if (rc == LOWBIT_PLUGIN_OK) {
        std::memcpy(out, out_buf.data(), n * wo);
        std::memcpy(flags, flag_buf.data(), n);
      }
      *flags_written = state->flags_written_last;
      return rc;
    };
  auto tensor_entry = [&](int bit, const char* what) -> decltype(s.quantize) {
    if (!(entries & (1u << bit))) return {};
    return [state, bit, what](const char* recipe, const lowbit_array* in, std::uint32_t n_in, lowbit_array* out,
                              std::uint32_t n_out) {
      std::vector<std::unique_ptr<GuardedBuffer>> buffers;
      std::vector<lowbit_array> outputs(out, out + n_out);
      for (lowbit_array& a : outputs) {
        buffers.push_back(std::make_unique<GuardedBuffer>(a.count * a.element_bytes));
        a.data = buffers.back()->data();
      }
      const int rc = state->call(what, [&](const lowbit_plugin& t, ChildReport& r) {
        const auto f = bit == 1 ? t.quantize : t.gemm;
        const int code = f(recipe, in, n_in, outputs.data(), n_out);
        record_error(t, code, r);
        return code;
      });
      if (rc == LOWBIT_PLUGIN_OK)
        for (std::uint32_t i = 0; i < n_out; ++i)
          std::memcpy(out[i].data, buffers[i]->data(), out[i].count * out[i].element_bytes);
      return rc;
    };
  };
  s.quantize = tensor_entry(1, "quantize");
  s.gemm = tensor_entry(2, "gemm");
  s.last_error = [state] { return state->last_error; };
  return s;
}

Subject in_process_subject(const std::string& where, const std::string& path) {
  const Opened opened = open_plugin(where, path);
  if (!opened.refused.empty()) {
    if (opened.handle) dlclose(opened.handle);
    throw ArgumentError("plugin", opened.refused);
  }
  // The handle closes when the last copy of the subject's entry points goes.
  const std::shared_ptr<void> library(opened.handle, [](void* h) { dlclose(h); });
  const lowbit_plugin* table = opened.table;
  Subject s;
  s.name = table->name ? table->name : "(unnamed)";
  if (table->convert)
    s.convert = [library, f = table->convert](const char* from, const char* to, const lowbit_policy* policy,
                                              const void* in, std::uint64_t n, void* out, std::uint8_t* flags,
                                              int* flags_written) {
      try {
        return f(from, to, policy, in, n, out, flags, flags_written);
      } catch (...) { return thrown_status; }
    };
  auto tensor_entry = [&](auto f) -> decltype(s.quantize) {
    if (!f) return {};
    return [library, f](const char* recipe, const lowbit_array* in, std::uint32_t n_in, lowbit_array* out,
                        std::uint32_t n_out) {
      try {
        return f(recipe, in, n_in, out, n_out);
      } catch (...) { return thrown_status; }
    };
  };
  s.quantize = tensor_entry(table->quantize);
  s.gemm = tensor_entry(table->gemm);
  s.last_error = [library, f = table->last_error]() -> std::string {
    const char* e = f ? f() : nullptr;
    return e ? e : "(no message)";
  };
  return s;
}

}  // namespace

Subject load_plugin(const std::string& path, const LoadOptions& options) {
  // dlopen searches the library path for a bare name; a path with a slash is taken as it is.
  const std::string where = path.find('/') == std::string::npos ? "./" + path : path;
  std::error_code ec;
  if (!fs::is_regular_file(where, ec)) throw ArgumentError("plugin", "'" + path + "' is not a file");
  if (options.isolation == Isolation::in_process) return in_process_subject(where, path);
  return child_subject(where, path, options);
}

V::SuiteReport run_suite(const Subject& subject, const V::Golden& g, std::size_t max_details) {
  GateRun run;
  const std::string kind = g.manifest.value("kind", "");
  if (kind == "convert") gate_convert(subject, g, run);
  else gate_tensors(subject, g, run, kind == "gemm");
  const V::Reader reader = [&run](const std::string& path, std::string& error) -> std::optional<std::string> {
    if (const auto it = run.results.find(path); it != run.results.end()) return it->second;
    const auto e = run.errors.find(path);
    error = e != run.errors.end() ? e->second : path + ": no result";
    return std::nullopt;
  };
  return V::compare(g, reader, run.skip, max_details);
}

}  // namespace lowbit::gate
