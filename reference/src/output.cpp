// The one writer (lowbit/output.hpp).  Everything is done relative to an open descriptor of the target's
// directory (openat, renameat2, unlinkat), so that a directory renamed or replaced by a link half-way
// through cannot redirect a write.
#include "lowbit/output.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "lowbit/io.hpp"

namespace lowbit::io {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view temporary_prefix = ".lowbit-tmp-";
constexpr std::string_view lock_prefix = ".lowbit-lock-";
constexpr std::size_t suffix_digits = 16;

std::string errno_text(int e) { return std::strerror(e); }

// ---- fault injection (LOWBIT_FAULT_WRITE) -------------------------------------------------------------

constexpr int stop = -1;  // the "error" that stops the process instead (SIGSTOP), then writes on

struct Fault {
  int error = 0;       // errno to fail with; 0: no fault
  long long at = 0;    // which write fails, counting from 1
  long long seen = 0;  // writes made so far
};

Fault& fault() {
  static Fault f;
  static std::once_flag once;
  std::call_once(once, [] {
    const char* v = std::getenv("LOWBIT_FAULT_WRITE");
    if (!v) return;
    const std::string s(v);
    const auto colon = s.find(':');
    if (colon == std::string::npos) return;
    const std::string name = s.substr(0, colon);
    const int e = name == "ENOSPC" ? ENOSPC : name == "EIO" ? EIO : name == "EFBIG" ? EFBIG : name == "STOP" ? stop : 0;
    char* end = nullptr;
    const long long n = std::strtoll(s.c_str() + colon + 1, &end, 10);
    if (e != 0 && end && *end == '\0' && n > 0) f = Fault{e, n, 0};
  });
  return f;
}

// write(2) of all of `bytes`, EINTR retried; -1 with errno set on failure (a short write is continued).
// `written` counts the bytes that reached the file.
int write_fully(int fd, std::span<const std::uint8_t> bytes, std::uint64_t& written) {
  static std::mutex m;
  std::size_t done = 0;
  while (done < bytes.size()) {
    {
      const std::lock_guard<std::mutex> lock(m);
      Fault& f = fault();
      if (f.error != 0 && ++f.seen == f.at) {
        if (f.error == stop) {
          ::raise(SIGSTOP);
        } else {
          errno = f.error;
          return -1;
        }
      }
    }
    const ssize_t put = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (put < 0 && errno == EINTR) continue;
    if (put < 0) return -1;
    if (put == 0) {
      errno = EIO;
      return -1;
    }
    done += static_cast<std::size_t>(put);
    written += static_cast<std::uint64_t>(put);
  }
  return 0;
}

std::string random_suffix() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char digits[] = "0123456789abcdef";
  std::uint64_t r = rng();
  std::string s(suffix_digits, '0');
  for (char& c : s) {
    c = digits[r & 15u];
    r >>= 4;
  }
  return s;
}

// True when `entry` is a temporary of the target `name`: the prefix, the name, '-', then exactly the
// random suffix (so that the temporaries of "a-b" are never taken for those of "a").
bool is_temporary_of(std::string_view entry, std::string_view name) {
  const std::size_t head = temporary_prefix.size() + name.size() + 1;
  if (entry.size() != head + suffix_digits) return false;
  if (entry.substr(0, temporary_prefix.size()) != temporary_prefix) return false;
  if (entry.substr(temporary_prefix.size(), name.size()) != name || entry[head - 1] != '-') return false;
  for (char c : entry.substr(head))
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

std::string kind_of(mode_t mode) {
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISREG(mode)) return "a file";
  return "not a file";
}

// ---- the target's directory, its lock and its stale temporaries -------------------------------------------

struct Place {
  std::string shown;   // the path as the user wrote it, for messages
  fs::path directory;  // the directory that holds the target
  std::string name;    // the target's name in it
  int dirfd = -1;

  explicit Place(const std::string& path) : shown(path) {
    const fs::path p(path);
    name = p.filename().string();
    if (path.empty() || name.empty() || name == "." || name == "..")
      throw FileError(shown, "", "not a file or folder name to write");
    directory = p.has_parent_path() ? p.parent_path() : fs::path(".");
    dirfd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0) throw FileError(shown, "", "cannot open its folder '" + directory.string() + "': " + errno_text(errno));
  }
  ~Place() {
    if (dirfd >= 0) ::close(dirfd);
  }
  Place(const Place&) = delete;
  Place& operator=(const Place&) = delete;

  // lstat of the target; false when it does not exist.
  bool stat_target(struct stat& st) const {
    if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) return true;
    if (errno == ENOENT) return false;
    throw FileError(shown, "", "cannot examine it: " + errno_text(errno));
  }

  void sync_directory() const {
    if (::fsync(dirfd) != 0 && errno != EINVAL && errno != EROFS)
      throw FileError(shown, "", "fsync of its folder failed: " + errno_text(errno));
  }
};

// An flock'd ".lowbit-lock-<name>" beside the target, held while this object lives.  The file is removed
// by the holder; a process that locked a file that was removed meanwhile (its inode is no longer the one
// under that name) tries again, so that two runs never hold two different lock files.
class Lock {
 public:
  explicit Lock(const Place& place) : place_(place), file_(std::string(lock_prefix) + place.name) {
    for (int attempt = 0; attempt < 100; ++attempt) {
      fd_ = ::openat(place.dirfd, file_.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
      if (fd_ < 0) throw FileError(place.shown, "", "cannot create the lock file " + file_ + ": " + errno_text(errno));
      while (::flock(fd_, LOCK_EX) != 0)
        if (errno != EINTR) throw FileError(place.shown, "", "cannot lock " + file_ + ": " + errno_text(errno));
      struct stat held {}, named {};
      if (::fstat(fd_, &held) == 0 && ::fstatat(place.dirfd, file_.c_str(), &named, AT_SYMLINK_NOFOLLOW) == 0 &&
          held.st_dev == named.st_dev && held.st_ino == named.st_ino)
        return;
      ::close(fd_);
      fd_ = -1;
    }
    throw FileError(place.shown, "", "cannot take the lock " + file_ + " (it keeps being replaced)");
  }
  ~Lock() {
    ::unlinkat(place_.dirfd, file_.c_str(), 0);
    ::close(fd_);
  }
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;

 private:
  const Place& place_;
  std::string file_;
  int fd_ = -1;
};

// Removes the temporaries a run into the same target left when it died: with the lock held, no live run
// owns one.  Only regular files and folders of this user are removed; anything else planted under such a
// name (a link, a device) is left alone, and it cannot be mistaken for ours, since ours are made with
// O_EXCL under fresh names.
void remove_stale_temporaries(const Place& place) {
  const int fd = ::openat(place.dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  DIR* d = ::fdopendir(fd);
  if (!d) {
    ::close(fd);
    return;
  }
  std::vector<std::string> stale;
  while (const dirent* e = ::readdir(d))
    if (is_temporary_of(e->d_name, place.name)) stale.emplace_back(e->d_name);
  ::closedir(d);
  for (const std::string& s : stale) {
    struct stat st {};
    if (::fstatat(place.dirfd, s.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_uid != ::geteuid()) continue;
    std::error_code ec;
    if (S_ISREG(st.st_mode)) ::unlinkat(place.dirfd, s.c_str(), 0);
    else if (S_ISDIR(st.st_mode)) fs::remove_all(place.directory / s, ec);
  }
}

// ---- inputs ------------------------------------------------------------------------------------------

struct Identity {
  dev_t dev;
  ino_t ino;
  std::string path;
};

std::vector<Identity> identities(const std::vector<std::string>& inputs) {
  std::vector<Identity> ids;
  for (const std::string& in : inputs) {
    struct stat st {};
    if (in.empty() || in == "-" || ::stat(in.c_str(), &st) != 0) continue;
    ids.push_back({st.st_dev, st.st_ino, in});
  }
  return ids;
}

void refuse_input_file(const Place& place, const struct stat& target, const std::vector<std::string>& inputs) {
  for (const Identity& id : identities(inputs))
    if (id.dev == target.st_dev && id.ino == target.st_ino)
      throw FileError(place.shown, "", "is the input '" + id.path + "'; not writing over an input");
}

// A folder output must not hold an input (replacing the folder would remove it).
void refuse_input_folder(const Place& place, const struct stat& target, const std::vector<std::string>& inputs) {
  for (const std::string& in : inputs) {
    if (in.empty() || in == "-") continue;
    std::error_code ec;
    fs::path p = fs::weakly_canonical(fs::path(in), ec);
    if (ec) continue;
    for (; p.has_relative_path(); p = p.parent_path()) {
      struct stat st {};
      if (::stat(p.c_str(), &st) == 0 && st.st_dev == target.st_dev && st.st_ino == target.st_ino)
        throw FileError(place.shown, "", "holds the input '" + in + "'; not replacing it");
    }
  }
}

// Writes `parts` to the fresh file `fd` (named `shown` in messages), then fsync and close, all checked.
// Closes fd in every case.
void fill(int fd, std::span<const std::span<const std::uint8_t>> parts, const std::string& shown) {
  std::uint64_t written = 0;
  for (const std::span<const std::uint8_t> part : parts)
    if (write_fully(fd, part, written) != 0) {
      const int e = errno;
      ::close(fd);
      throw FileError(shown, "byte " + std::to_string(written), "write failed: " + errno_text(e));
    }
  if (::fsync(fd) != 0 && errno != EINVAL) {
    const int e = errno;
    ::close(fd);
    throw FileError(shown, "", "fsync failed: " + errno_text(e));
  }
  if (::close(fd) != 0) throw FileError(shown, "", "close failed: " + errno_text(errno));
}

}  // namespace

// ---- files -------------------------------------------------------------------------------------------

void write_stdout(std::string_view text) {
  std::fflush(stdout);  // what stdio holds goes first
  std::uint64_t written = 0;
  const std::span<const std::uint8_t> bytes(reinterpret_cast<const std::uint8_t*>(text.data()), text.size());
  if (write_fully(STDOUT_FILENO, bytes, written) != 0)
    throw FileError("standard output", "byte " + std::to_string(written), "write failed: " + errno_text(errno));
}

void write_output(const std::string& path, std::span<const std::span<const std::uint8_t>> parts,
                  const OutputOptions& options) {
  if (path == "-") {
    for (const std::span<const std::uint8_t> part : parts)
      write_stdout(std::string_view(reinterpret_cast<const char*>(part.data()), part.size()));
    return;
  }
  const Place place(path);
  const Lock lock(place);
  struct stat st {};
  const bool exists = place.stat_target(st);
  if (exists && !S_ISREG(st.st_mode))
    throw FileError(path, "", "exists and is " + kind_of(st.st_mode) + "; not writing over it");
  if (exists) refuse_input_file(place, st, options.inputs);
  remove_stale_temporaries(place);

  const std::string tmp = std::string(temporary_prefix) + place.name + "-" + random_suffix();
  const int fd = ::openat(place.dirfd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (fd < 0)
    throw FileError(path, "", "cannot create a temporary file in '" + place.directory.string() + "': " + errno_text(errno));
  // A replaced file keeps its permissions.
  if (exists) ::fchmod(fd, st.st_mode & 07777);
  try {
    fill(fd, parts, path);
    if (::renameat(place.dirfd, tmp.c_str(), place.dirfd, place.name.c_str()) != 0)
      throw FileError(path, "", "cannot rename the temporary file into place: " + errno_text(errno));
  } catch (...) {
    ::unlinkat(place.dirfd, tmp.c_str(), 0);
    throw;
  }
  place.sync_directory();
}

void write_output(const std::string& path, std::string_view text, const OutputOptions& options) {
  const std::span<const std::uint8_t> part(reinterpret_cast<const std::uint8_t*>(text.data()), text.size());
  write_output(path, std::span<const std::span<const std::uint8_t>>(&part, 1), options);
}

// ---- folders -----------------------------------------------------------------------------------------

struct FolderOutput::State {
  Place place;
  Lock lock;
  std::string staging;              // the temporary folder's name beside the target
  int staging_fd = -1;              // open descriptor of it
  std::map<std::string, int> dirs;  // subfolders made in it (relative path -> descriptor)
  bool existed = false;
  struct stat original {};
  bool committed = false;

  explicit State(const std::string& target) : place(target), lock(place) {}
};

FolderOutput::FolderOutput(std::string target, Options options)
    : target_(std::move(target)), state_(std::make_unique<State>(target_)) {
  State& s = *state_;
  s.existed = s.place.stat_target(s.original);
  if (s.existed) {
    const mode_t mode = s.original.st_mode;
    if (!S_ISDIR(mode)) throw FileError(target_, "", "exists and is " + kind_of(mode) + ", not a folder; not replacing it");
    refuse_input_folder(s.place, s.original, options.inputs);
    std::error_code ec;
    const fs::path p(target_);
    const bool empty = fs::is_empty(p, ec);
    if (ec) throw FileError(target_, "", "cannot read the folder: " + ec.message());
    struct stat marker {};
    const bool marked = !options.marker.empty() &&
                        ::fstatat(s.place.dirfd, (s.place.name + "/" + options.marker).c_str(), &marker,
                                  AT_SYMLINK_NOFOLLOW) == 0 &&
                        S_ISREG(marker.st_mode);
    if (!empty && !marked)
      throw FileError(target_, "", "exists and is not an empty folder" +
                                       (options.marker.empty() ? std::string{}
                                                               : ", nor one lowbit wrote (no " + options.marker + ")") +
                                       "; not replacing it");
  }
  remove_stale_temporaries(s.place);
  s.staging = std::string(temporary_prefix) + s.place.name + "-" + random_suffix();
  if (::mkdirat(s.place.dirfd, s.staging.c_str(), 0777) != 0)
    throw FileError(target_, "", "cannot create a folder in '" + s.place.directory.string() + "': " + errno_text(errno));
  s.staging_fd = ::openat(s.place.dirfd, s.staging.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (s.staging_fd < 0) {
    const int e = errno;
    ::unlinkat(s.place.dirfd, s.staging.c_str(), AT_REMOVEDIR);
    throw FileError(target_, "", "cannot open the folder it made: " + errno_text(e));
  }
}

FolderOutput::~FolderOutput() {
  State& s = *state_;
  for (auto& [rel, fd] : s.dirs) ::close(fd);
  if (s.staging_fd >= 0) ::close(s.staging_fd);
  // Before commit the staging folder holds the new output; after it, the previous one (or nothing).
  if (!s.staging.empty()) {
    std::error_code ec;
    fs::remove_all(s.place.directory / s.staging, ec);
  }
}

void FolderOutput::add(const std::string& relative, std::span<const std::span<const std::uint8_t>> parts) {
  State& s = *state_;
  if (s.committed) throw std::logic_error("FolderOutput::add after commit");
  const std::string shown = (fs::path(target_) / relative).string();
  std::vector<std::string> steps;
  for (std::size_t at = 0; at <= relative.size();) {
    const std::size_t slash = std::min(relative.find('/', at), relative.size());
    steps.push_back(relative.substr(at, slash - at));
    at = slash + 1;
  }
  for (const std::string& step : steps)
    if (step.empty() || step == "." || step == "..")
      throw FileError(shown, "", "not a path inside the folder");
  int parent = s.staging_fd;
  std::string so_far;
  for (std::size_t i = 0; i + 1 < steps.size(); ++i) {
    so_far += (so_far.empty() ? "" : "/") + steps[i];
    const auto found = s.dirs.find(so_far);
    if (found != s.dirs.end()) {
      parent = found->second;
      continue;
    }
    if (::mkdirat(parent, steps[i].c_str(), 0777) != 0)
      throw FileError(shown, "", "cannot create the folder " + so_far + ": " + errno_text(errno));
    const int fd = ::openat(parent, steps[i].c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) throw FileError(shown, "", "cannot open the folder " + so_far + ": " + errno_text(errno));
    s.dirs.emplace(so_far, fd);
    parent = fd;
  }
  const int fd = ::openat(parent, steps.back().c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (fd < 0) throw FileError(shown, "", "cannot create it: " + errno_text(errno));
  fill(fd, parts, shown);
}

void FolderOutput::add(const std::string& relative, std::string_view text) {
  const std::span<const std::uint8_t> part(reinterpret_cast<const std::uint8_t*>(text.data()), text.size());
  add(relative, std::span<const std::span<const std::uint8_t>>(&part, 1));
}

void FolderOutput::commit() {
  State& s = *state_;
  if (s.committed) return;
  for (auto& [rel, fd] : s.dirs)
    if (::fsync(fd) != 0 && errno != EINVAL) throw FileError(target_, "", "fsync of " + rel + " failed: " + errno_text(errno));
  if (::fsync(s.staging_fd) != 0 && errno != EINVAL)
    throw FileError(target_, "", "fsync of the new folder failed: " + errno_text(errno));
  const int dirfd = s.place.dirfd;
  const char* staging = s.staging.c_str();
  const char* name = s.place.name.c_str();
  struct stat now {};
  const bool exists = s.place.stat_target(now);
  if (exists != s.existed || (exists && (now.st_dev != s.original.st_dev || now.st_ino != s.original.st_ino)))
    throw FileError(target_, "", "was replaced by another program while lowbit wrote it; not replacing it");
  if (exists) {
    // The new folder and the previous one trade names in one step; the previous one, now under the
    // temporary name, is removed by the destructor.
    if (::renameat2(dirfd, staging, dirfd, name, RENAME_EXCHANGE) != 0) {
      if (errno != EINVAL && errno != ENOSYS)
        throw FileError(target_, "", "cannot swap the new folder in: " + errno_text(errno));
      // A file system without RENAME_EXCHANGE: move the previous folder aside, then the new one in.
      const std::string aside = std::string(temporary_prefix) + s.place.name + "-" + random_suffix();
      if (::renameat(dirfd, name, dirfd, aside.c_str()) != 0)
        throw FileError(target_, "", "cannot move the previous folder aside: " + errno_text(errno));
      if (::renameat(dirfd, staging, dirfd, name) != 0) {
        const int e = errno;
        ::renameat(dirfd, aside.c_str(), dirfd, name);
        throw FileError(target_, "", "cannot rename the new folder into place: " + errno_text(e));
      }
      s.staging = aside;  // the destructor removes the previous folder
    }
  } else if (::renameat2(dirfd, staging, dirfd, name, RENAME_NOREPLACE) != 0) {
    if (errno != EINVAL && errno != ENOSYS)
      throw FileError(target_, "", "cannot rename the new folder into place: " + errno_text(errno));
    if (::renameat(dirfd, staging, dirfd, name) != 0)
      throw FileError(target_, "", "cannot rename the new folder into place: " + errno_text(errno));
  }
  s.committed = true;
  if (!exists) s.staging.clear();
  s.place.sync_directory();
}

}  // namespace lowbit::io
