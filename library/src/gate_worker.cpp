// The gate's worker process: the plugin is loaded and called there, never in the gate (gate.hpp, Isolation).
//
// The gate starts the worker with fork + exec of LoadOptions::worker_command (the command line's hidden
// `lowbit gate-worker`), so the plugin starts in a fresh process image: nothing of the gate's threads,
// locks, heap or exit handlers.  The worker's stdin is /dev/null, its stdout and stderr are pipes the
// gate reads, and descriptor 3 is a SOCK_SEQPACKET socket carrying one packet per message:
//   worker -> gate  Loading (the table passed its checks; its name is read next), then Hello (name and
//                   entry points, or why the library is refused), then one Reply per Call
//   gate -> worker  Call, with a memfd (SCM_RIGHTS) holding the call: a CallHeader, the strings, the
//                   inputs and the outputs.  Each output ends at a page boundary followed by a page the
//                   worker makes inaccessible, so a write beyond it faults at once.
// A worker that dies, hangs past the timeout (killed with its process group) or breaks the protocol fails
// the call it was making; the next call starts a new worker.
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <vector>

#include "gate_plugin.hpp"
#include "lowbit/error.hpp"
#include "lowbit/registry.hpp"

namespace lowbit::gate {

namespace {

// ---- the protocol ----------------------------------------------------------------------------------------

constexpr int socket_fd = 3;  // the worker's end of the socket
enum class Message : std::uint32_t { loading = 1, hello = 2, call = 3, reply = 4 };
enum class Op : std::uint32_t { convert = 1, quantize = 2, gemm = 3, contract = 4 };

struct Hello {
  Message kind = Message::hello;
  int refused = 0;
  std::uint32_t entries = 0;  // bit 0 convert, 1 quantize, 2 gemm, 3 contract
  char name[256] = {};
  char message[2048] = {};  // why refused
};

struct Reply {
  Message kind = Message::reply;
  int rc = 0;
  int flags_written = 0;
  int thrown = 0;           // a C++ exception left the entry point; message is its what()
  char message[2048] = {};  // last_error() after LOWBIT_PLUGIN_ERROR
};

// Offsets are from the start of the call's memory.
struct ArrayDesc {
  std::uint64_t name, format, dtype;
  std::uint32_t element_bytes, rank;
  std::uint64_t shape, count, data;
};

struct CallHeader {
  Op op;
  std::uint32_t n_in, n_out;
  std::uint64_t n;                 // convert: the codes
  std::uint64_t text[8];           // from, to, profile, rounding, overflow, subnormals, tininess; recipe
  std::uint64_t in, out, flags;    // convert
  std::uint64_t arrays;            // n_in + n_out ArrayDesc
  std::uint64_t guards, n_guards;  // offsets of the pages to make inaccessible
};

void copy_text(char* to, std::size_t size, const char* from) { std::snprintf(to, size, "%s", from ? from : ""); }

std::size_t page_size() { return static_cast<std::size_t>(sysconf(_SC_PAGESIZE)); }

// The call's memory as the gate lays it out.
class CallImage {
 public:
  CallImage() { put(CallHeader{}); }
  template <class T>
  std::uint64_t put(const T& v) {
    return put_bytes(&v, sizeof v, alignof(T));
  }
  std::uint64_t put_bytes(const void* p, std::size_t n, std::size_t align = 8) {
    bytes_.resize((bytes_.size() + align - 1) / align * align);
    const std::uint64_t at = bytes_.size();
    bytes_.insert(bytes_.end(), static_cast<const std::uint8_t*>(p), static_cast<const std::uint8_t*>(p) + n);
    return at;
  }
  std::uint64_t put_text(const char* s) { return put_bytes(s ? s : "", std::strlen(s ? s : "") + 1, 1); }
  // n zero bytes ending at a page boundary, then a guard page.
  std::uint64_t put_output(std::size_t n) {
    const std::size_t page = page_size();
    const std::size_t end = (bytes_.size() + n + page - 1) / page * page;
    bytes_.resize(end + page);
    guards_.push_back(end);
    return end - n;
  }
  CallHeader& header() { return *reinterpret_cast<CallHeader*>(bytes_.data()); }
  // The finished image in a memfd; `map` receives a shared mapping of it.
  int seal(std::uint8_t*& map, std::size_t& size) {
    const std::uint64_t guards = put_bytes(guards_.data(), guards_.size() * sizeof(std::uint64_t));
    header().guards = guards;
    header().n_guards = guards_.size();
    const std::size_t page = page_size();
    size = (bytes_.size() + page - 1) / page * page;
    const int fd = static_cast<int>(syscall(SYS_memfd_create, "lowbit-gate-call", 1u /* MFD_CLOEXEC */));
    if (fd < 0) throw std::runtime_error("the gate cannot create shared memory");
    if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
      close(fd);
      throw std::runtime_error("the gate cannot size shared memory");
    }
    void* m = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
      close(fd);
      throw std::runtime_error("the gate cannot map shared memory");
    }
    map = static_cast<std::uint8_t*>(m);
    std::memcpy(map, bytes_.data(), bytes_.size());
    return fd;
  }

 private:
  std::vector<std::uint8_t> bytes_;
  std::vector<std::uint64_t> guards_;
};

bool send_packet(int sock, const void* p, std::size_t n, int pass_fd = -1) {
  iovec iov{const_cast<void*>(p), n};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (pass_fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
  }
  for (;;) {
    const ssize_t r = sendmsg(sock, &msg, MSG_NOSIGNAL);
    if (r == static_cast<ssize_t>(n)) return true;
    if (r < 0 && errno == EINTR) continue;
    return false;
  }
}

// One packet into `buf`; the descriptor passed with it, if any, in `fd`.  Returns its size, 0 at the end.
ssize_t receive_packet(int sock, void* buf, std::size_t n, int* fd = nullptr) {
  iovec iov{buf, n};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t r;
  do r = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  while (r < 0 && errno == EINTR);
  if (fd) *fd = -1;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      int got;
      std::memcpy(&got, CMSG_DATA(c), sizeof got);
      if (fd) *fd = got;
      else close(got);
    }
  return r;
}

// ---- the worker's side -----------------------------------------------------------------------------------

int serve_call(const lowbit_plugin& t, int memfd) {
  struct stat st;
  if (fstat(memfd, &st) != 0 || static_cast<std::size_t>(st.st_size) < sizeof(CallHeader)) return 3;
  const std::size_t size = static_cast<std::size_t>(st.st_size);
  void* m = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
  close(memfd);
  if (m == MAP_FAILED) return 3;
  auto* base = static_cast<std::uint8_t*>(m);
  const CallHeader h = *reinterpret_cast<const CallHeader*>(base);
  const auto* guards = reinterpret_cast<const std::uint64_t*>(base + h.guards);
  for (std::uint64_t i = 0; i < h.n_guards; ++i) mprotect(base + guards[i], page_size(), PROT_NONE);
  auto text = [&](int i) { return reinterpret_cast<const char*>(base + h.text[i]); };
  Reply reply;
  try {
    if (h.op == Op::convert) {
      const lowbit_policy policy{text(2), text(3), text(4), text(5), text(6)};
      reply.rc =
          t.convert(text(0), text(1), &policy, base + h.in, h.n, base + h.out, base + h.flags, &reply.flags_written);
    } else {
      std::vector<lowbit_array> arrays;
      const auto* d = reinterpret_cast<const ArrayDesc*>(base + h.arrays);
      for (std::uint32_t i = 0; i < h.n_in + h.n_out; ++i)
        arrays.push_back({reinterpret_cast<const char*>(base + d[i].name),
                          reinterpret_cast<const char*>(base + d[i].format),
                          reinterpret_cast<const char*>(base + d[i].dtype), d[i].element_bytes, d[i].rank,
                          reinterpret_cast<const std::uint64_t*>(base + d[i].shape), d[i].count, base + d[i].data});
      const auto entry = h.op == Op::quantize ? t.quantize : h.op == Op::gemm ? t.gemm : detail::contract_entry(t);
      if (!entry) throw std::runtime_error("the plugin has no entry point for this call");
      reply.rc = entry(text(7), arrays.data(), h.n_in, arrays.data() + h.n_in, h.n_out);
      // An output the plugin left unwritten (count set to 0, the contract entry's rule) goes back as such.
      auto* written = reinterpret_cast<ArrayDesc*>(base + h.arrays);
      for (std::uint32_t i = h.n_in; i < h.n_in + h.n_out; ++i)
        if (arrays[i].count == 0) written[i].count = 0;
    }
    if (reply.rc == LOWBIT_PLUGIN_ERROR && t.last_error) copy_text(reply.message, sizeof reply.message, t.last_error());
  } catch (const std::exception& e) {
    reply.thrown = 1;
    copy_text(reply.message, sizeof reply.message, e.what());
  } catch (...) {
    reply.thrown = 1;
    copy_text(reply.message, sizeof reply.message, "(not a std::exception)");
  }
  munmap(m, size);
  return send_packet(socket_fd, &reply, sizeof reply) ? 0 : 3;
}

}  // namespace

int worker_main(const std::string& path) {
  const detail::Opened opened = detail::open_plugin(path, path);
  Hello hello;
  if (!opened.refused.empty()) {
    hello.refused = 1;
    copy_text(hello.message, sizeof hello.message, opened.refused.c_str());
    return send_packet(socket_fd, &hello, sizeof hello) ? 0 : 3;
  }
  const Message loading = Message::loading;
  if (!send_packet(socket_fd, &loading, sizeof loading)) return 3;
  const lowbit_plugin& t = *opened.table;
  copy_text(hello.name, sizeof hello.name, t.name ? t.name : "(unnamed)");  // faults here: a bad name pointer
  hello.entries =
      (t.convert ? 1u : 0u) | (t.quantize ? 2u : 0u) | (t.gemm ? 4u : 0u) | (detail::contract_entry(t) ? 8u : 0u);
  if (!send_packet(socket_fd, &hello, sizeof hello)) return 3;
  for (;;) {
    Message kind{};
    int memfd = -1;
    const ssize_t r = receive_packet(socket_fd, &kind, sizeof kind, &memfd);
    if (r <= 0) return 0;  // the gate is done
    if (r != sizeof kind || kind != Message::call || memfd < 0) return 3;
    if (const int rc = serve_call(t, memfd); rc != 0) return rc;
  }
}

namespace {

// ---- the gate's side -------------------------------------------------------------------------------------

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

constexpr std::size_t capture_limit = 1 << 16;

// Read what is there from a non-blocking descriptor into `into` (at most capture_limit kept); false at
// the end of the file.
bool drain(int fd, std::string& into) {
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      if (into.size() < capture_limit) into.append(buf, std::min<std::size_t>(n, capture_limit - into.size()));
      continue;
    }
    if (n == 0) return false;
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  }
}

// How a wait for the worker ended.
struct Waited {
  bool packet = false;  // a packet arrived (in the caller's buffer)
  std::string failure;  // else: "crashed", "hung", "exited", ... what the plugin did
  std::string detail;   // how: the signal, the timeout, the exit status
};

// A descriptor moved above 0, 1 and 2: a caller that closed its stdout must not find the worker's
// socket or pipes there (its report would go into them).
int above_stdio(int fd) {
  if (fd < 0 || fd > 2) return fd;
  const int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  close(fd);
  return moved;
}

class Worker {
 public:
  Worker(const std::vector<std::string>& command, const std::string& plugin) {
    if (command.empty()) throw std::runtime_error("the gate has no worker command");
    std::vector<std::string> args = command;
    args.push_back(plugin);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int sv[2], out[2], err[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
      throw std::runtime_error("the gate cannot create a socket");
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
      close(sv[0]);
      close(sv[1]);
      throw std::runtime_error("the gate cannot create a pipe");
    }
    for (int* fd : {&sv[0], &sv[1], &out[0], &out[1], &err[0], &err[1]}) *fd = above_stdio(*fd);
    const int null_fd = above_stdio(open("/dev/null", O_RDONLY | O_CLOEXEC));
    std::fflush(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      // Only async-signal-safe calls until exec.  dup2 clears close-on-exec on the copies.
      setpgid(0, 0);
      if (null_fd >= 0) dup2(null_fd, 0);
      dup2(out[1], 1);
      dup2(err[1], 2);
      if (sv[1] == socket_fd) fcntl(socket_fd, F_SETFD, 0);
      else dup2(sv[1], socket_fd);
      syscall(SYS_close_range, socket_fd + 1, ~0u, 0u);  // nothing else of the gate's (Linux 5.9; else kept)
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(sv[1]);
    close(out[1]);
    close(err[1]);
    if (null_fd >= 0) close(null_fd);
    if (pid_ < 0) {
      close(sv[0]);
      close(out[0]);
      close(err[0]);
      throw std::runtime_error("the gate cannot fork a worker process");
    }
    setpgid(pid_, pid_);  // also here: no race with the child's own call
    sock_ = sv[0];
    out_ = out[0];
    err_ = err[0];
    fcntl(out_, F_SETFL, fcntl(out_, F_GETFL) | O_NONBLOCK);
    fcntl(err_, F_SETFL, fcntl(err_, F_GETFL) | O_NONBLOCK);
    // The worker's pidfd (Linux 5.3) becomes readable when it ends, so a wait wakes at once.
    pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0));
  }
  ~Worker() { stop(); }
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  int socket() const { return sock_; }
  std::string out, err;  // what the plugin printed since the last take_output()

  // Wait up to `timeout` seconds for one packet into buf; on anything else the worker is stopped.
  Waited wait_packet(void* buf, std::size_t n, double timeout, ssize_t* got, int* fd_out = nullptr) {
    Waited w;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout);
    for (;;) {
      pollfd fds[4] = {{sock_, POLLIN, 0}, {out_, POLLIN, 0}, {err_, POLLIN, 0}, {pidfd_, POLLIN, 0}};
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        kill(-pid_, SIGKILL);
        char text[96];
        std::snprintf(text, sizeof text, ": no return within %g s (--timeout), killed", timeout);
        w.failure = "hung";
        w.detail = text;
        stop();
        return w;
      }
      poll(fds, 4, static_cast<int>(std::min<long long>(left.count(), pidfd_ >= 0 ? 1000 : 10)));
      drain_output();
      if (fds[0].revents & POLLIN) {
        *got = receive_packet(sock_, buf, n, fd_out);
        if (*got > 0) {
          w.packet = true;
          return w;
        }
      }
      if ((fds[0].revents & (POLLHUP | POLLERR | POLLIN)) || (pidfd_ >= 0 && (fds[3].revents & POLLIN)) ||
          (pidfd_ < 0 && ended())) {
        // The socket closed or the worker ended: how it ended.
        describe_end(w);
        return w;
      }
    }
  }
  bool alive() const { return pid_ > 0; }

  void stop() {
    if (pid_ <= 0) return;
    if (sock_ >= 0) close(sock_);
    sock_ = -1;
    // Ended, or given a moment to end on its own at the socket's close; then its process group goes.
    for (int i = 0; i < 100 && !ended(); ++i) usleep(1000);
    kill(-pid_, SIGKILL);
    int status;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    drain_output();
    for (int* fd : {&out_, &err_, &pidfd_})
      if (*fd >= 0) {
        close(*fd);
        *fd = -1;
      }
  }

 private:
  // Ended but not reaped (WNOWAIT): while the zombie is there its id, and its process group's, is not reused.
  bool ended() const {
    siginfo_t info{};
    return waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid_;
  }
  void drain_output() {
    if (out_ >= 0 && !drain(out_, out)) {
      close(out_);
      out_ = -1;
    }
    if (err_ >= 0 && !drain(err_, err)) {
      close(err_);
      err_ = -1;
    }
  }
  void describe_end(Waited& w) {
    for (int i = 0; i < 1000 && !ended(); ++i) usleep(1000);  // the socket closes just before the process ends
    siginfo_t info{};
    const bool done =
        waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid_;
    char text[200];
    if (!done) {
      w.failure = "closed the gate's socket";
      w.detail = "";
    } else if (info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED) {
      const int sig = info.si_status;
      const char* cause = sig == SIGSEGV || sig == SIGBUS
                              ? ": an invalid memory access, or a write beyond an output buffer"
                          : sig == SIGABRT ? ": abort(), or a failed assertion"
                                           : "";
      w.failure = "crashed";
      std::snprintf(text, sizeof text, ": killed by signal %d (%s, %s%s)", sig, signal_name(sig), strsignal(sig),
                    cause);
      w.detail = text;
    } else {
      w.failure = "exited";
      std::snprintf(text, sizeof text, " with status %d before returning (exit() or _exit() in the plugin)",
                    info.si_status);
      w.detail = text;
      if (info.si_status == 127) w.detail += "; or the worker command could not be started";
    }
    stop();
  }

  pid_t pid_ = -1;
  int sock_ = -1, out_ = -1, err_ = -1, pidfd_ = -1;
};

// The state a worker subject keeps.
struct WorkerPlugin {
  std::string where, path;
  LoadOptions options;
  std::unique_ptr<Worker> worker;
  std::string load_failure;  // the first worker failed while loading: every call fails with this
  std::string last_error = "(no message)";
  int flags_written_last = 0;
  std::size_t output_notes = 0;  // calls whose plugin output was shown on stderr

  std::string take_output() {
    if (!worker || (worker->out.empty() && worker->err.empty())) return "";
    const std::string o =
        " (plugin stdout: '" + output_tail(worker->out, 200) + "', stderr: '" + output_tail(worker->err, 200) + "')";
    worker->out.clear();
    worker->err.clear();
    return o;
  }

  // Start a worker and read its Hello.  Throws ArgumentError for a refused library or table; returns
  // the failure ("" when loaded) of a worker that crashed, hung or exited while loading.
  std::string start(Hello& hello) {
    worker = std::make_unique<Worker>(options.worker_command, where);
    ssize_t got = 0;
    bool reading_name = false;
    for (;;) {
      Hello packet;
      const Waited w = worker->wait_packet(&packet, sizeof packet, options.timeout_seconds, &got);
      if (!w.packet) {
        if (reading_name && w.failure == "crashed")
          throw ArgumentError("plugin", "'" + path + "' returns a table whose name pointer cannot be read" + w.detail);
        return w.failure + " while loading (in a library constructor or " LOWBIT_PLUGIN_ENTRY_SYMBOL ")" + w.detail;
      }
      if (got == sizeof(Message) && packet.kind == Message::loading) {
        reading_name = true;
        continue;
      }
      if (got != sizeof(Hello) || packet.kind != Message::hello) {
        worker->stop();
        return "broke the worker protocol while loading";
      }
      if (packet.refused) throw ArgumentError("plugin", packet.message);
      hello = packet;
      return "";
    }
  }

  // One call in the worker: returns the plugin's status, or LOWBIT_PLUGIN_ERROR with last_error set.
  int call(const std::string& what, CallImage& image, std::uint8_t*& map, std::size_t& size) {
    if (!load_failure.empty()) {
      last_error = load_failure;
      return LOWBIT_PLUGIN_ERROR;
    }
    try {
      if (!worker || !worker->alive()) {
        Hello hello;
        if (const std::string f = start(hello); !f.empty()) {
          last_error = f + take_output();
          return LOWBIT_PLUGIN_ERROR;
        }
      }
      const int fd = image.seal(map, size);
      const Message kind = Message::call;
      const bool sent = send_packet(worker->socket(), &kind, sizeof kind, fd);
      close(fd);
      Reply reply;
      ssize_t got = 0;
      const Waited w = sent ? worker->wait_packet(&reply, sizeof reply, options.timeout_seconds, &got) : Waited{};
      const std::string output = take_output();
      if (!w.packet) {
        last_error = (sent ? w.failure + " during " + what + w.detail : "the worker did not take " + what) + output;
        if (worker) worker->stop();
        return LOWBIT_PLUGIN_ERROR;
      }
      if (got != sizeof reply || reply.kind != Message::reply) {
        worker->stop();
        last_error = "the worker broke the protocol during " + what;
        return LOWBIT_PLUGIN_ERROR;
      }
      if (reply.thrown) {
        last_error = "threw a C++ exception during " + what + ": " + reply.message + output;
        return LOWBIT_PLUGIN_ERROR;
      }
      // Output of a call that returned is shown apart from the report, on stderr, for the first few calls.
      if (!output.empty() && output_notes++ < 5)
        std::fprintf(stderr, "lowbit: gate: the plugin wrote during %s:%s\n", what.c_str(), output.c_str());
      flags_written_last = reply.flags_written;
      if (reply.rc == LOWBIT_PLUGIN_ERROR) last_error = reply.message[0] ? reply.message : "(no message)";
      return reply.rc;
    } catch (const std::runtime_error& e) {  // no socket, pipe, fork or memory: this call's error
      last_error = std::string(e.what()) + " for " + what;
      return LOWBIT_PLUGIN_ERROR;
    }
  }
};

std::size_t element_width(const char* format) {
  const Format* f = format ? find_format(format) : nullptr;
  const int b = f ? f->storage_bits() : 64;
  return b <= 8 ? 1 : b <= 16 ? 2 : b <= 32 ? 4 : 8;
}

// The shared memory of one call, unmapped when it goes.
struct Mapping {
  std::uint8_t* map = nullptr;
  std::size_t size = 0;
  ~Mapping() {
    if (map) munmap(map, size);
  }
};

Subject failing_subject(const std::string& why) {
  Subject s;
  s.name = "(not loaded)";
  s.convert = [](const char*, const char*, const lowbit_policy*, const void*, std::uint64_t, void*, std::uint8_t*,
                 int*) { return LOWBIT_PLUGIN_ERROR; };
  s.quantize = s.gemm = s.contract = [](const char*, const lowbit_array*, std::uint32_t, lowbit_array*, std::uint32_t) {
    return LOWBIT_PLUGIN_ERROR;
  };
  s.last_error = [why] { return why; };
  return s;
}

}  // namespace

namespace detail {

Subject worker_subject(const std::string& where, const std::string& path, const LoadOptions& options) {
  auto state = std::make_shared<WorkerPlugin>();
  state->where = where;
  state->path = path;
  state->options = options;
  Hello hello;
  std::string failure;
  try {
    failure = state->start(hello);
  } catch (const std::runtime_error& e) { failure = e.what(); }
  if (!failure.empty()) return failing_subject(failure + state->take_output());
  Subject s;
  s.name = hello.name;
  if (hello.entries & 1u)
    s.convert = [state](const char* from, const char* to, const lowbit_policy* policy, const void* in, std::uint64_t n,
                        void* out, std::uint8_t* flags, int* flags_written) {
      const std::size_t wi = element_width(from), wo = element_width(to);
      CallImage image;
      CallHeader h{};
      h.op = Op::convert;
      h.n = n;
      const char* texts[7] = {
          from, to, policy->profile, policy->rounding, policy->overflow, policy->subnormals, policy->tininess};
      for (int i = 0; i < 7; ++i) h.text[i] = image.put_text(texts[i]);
      h.text[7] = image.put_text("");
      h.in = image.put_bytes(in, n * wi);
      h.out = image.put_output(n * wo);
      h.flags = image.put_output(n);
      image.header() = h;
      Mapping m;
      const int rc = state->call(std::string("convert(") + from + " -> " + to + ")", image, m.map, m.size);
      if (rc == LOWBIT_PLUGIN_OK) {
        std::memcpy(out, m.map + h.out, n * wo);
        std::memcpy(flags, m.map + h.flags, n);
      }
      *flags_written = rc == LOWBIT_PLUGIN_OK ? state->flags_written_last : 0;
      return rc;
    };
  auto tensor_entry = [&](Op op, const char* what) -> decltype(s.quantize) {
    if (!(hello.entries & (op == Op::quantize ? 2u : op == Op::gemm ? 4u : 8u))) return {};
    return [state, op, what](const char* recipe, const lowbit_array* in, std::uint32_t n_in, lowbit_array* out,
                             std::uint32_t n_out) {
      CallImage image;
      CallHeader h{};
      h.op = op;
      h.n_in = n_in;
      h.n_out = n_out;
      for (int i = 0; i < 7; ++i) h.text[i] = image.put_text("");
      h.text[7] = image.put_text(recipe);
      std::vector<ArrayDesc> descs;
      for (std::uint32_t i = 0; i < n_in + n_out; ++i) {
        const lowbit_array& a = i < n_in ? in[i] : out[i - n_in];
        ArrayDesc d{};
        d.name = image.put_text(a.name);
        d.format = image.put_text(a.format);
        d.dtype = image.put_text(a.dtype);
        d.element_bytes = a.element_bytes;
        d.rank = a.rank;
        d.shape = image.put_bytes(a.shape, a.rank * sizeof(std::uint64_t));
        d.count = a.count;
        const std::size_t bytes = a.count * a.element_bytes;
        d.data = i < n_in ? image.put_bytes(a.data, bytes) : image.put_output(bytes);
        descs.push_back(d);
      }
      h.arrays = image.put_bytes(descs.data(), descs.size() * sizeof(ArrayDesc));
      image.header() = h;
      Mapping m;
      const int rc = state->call(what, image, m.map, m.size);
      if (rc == LOWBIT_PLUGIN_OK) {
        const auto* written = reinterpret_cast<const ArrayDesc*>(m.map + h.arrays);
        for (std::uint32_t i = 0; i < n_out; ++i) {
          std::memcpy(out[i].data, m.map + descs[n_in + i].data, out[i].count * out[i].element_bytes);
          if (written[n_in + i].count == 0) out[i].count = 0;
        }
      }
      return rc;
    };
  };
  s.quantize = tensor_entry(Op::quantize, "quantize");
  s.gemm = tensor_entry(Op::gemm, "gemm");
  s.contract = tensor_entry(Op::contract, "contract");
  s.last_error = [state] { return state->last_error; };
  return s;
}

}  // namespace detail

}  // namespace lowbit::gate
