// lowbit/output.hpp — the one writer of every file and folder lowbit writes.
//
// Every output of the library, the command line, the reports, the golden vectors, JUnit and state files
// goes through here, so that one set of rules holds everywhere:
//  * A file is written under a temporary name in the target's directory, created exclusively (O_EXCL,
//    O_NOFOLLOW, a random suffix after the fixed prefix ".lowbit-tmp-"), every write, fsync and close is
//    checked, and the temporary is renamed over the target last.  The directory is then fsync'd.
//  * A folder (a suite, a quantized tensor, a shard) is built as a new sibling folder under the same kind
//    of temporary name and swapped in whole: renameat2(RENAME_EXCHANGE) when the target exists (then the
//    previous folder, now under the temporary name, is removed), rename otherwise.
//  * A lock file ".lowbit-lock-<name>" beside the target is held (flock) for the whole write, so that two
//    runs into one target are serialised; the holder removes the temporaries of runs that died before it
//    (they cannot hold the lock any more), and removes the lock file when it is done.
//  * A target that exists and is not what the writer replaces is refused, naming it: a symbolic link,
//    a device, a FIFO or a socket (never followed, never replaced); a folder where a file is written; a
//    file, or a folder that is neither empty nor marked as lowbit's, where a folder is written.  "-" is
//    standard output (files only).
//  * A target that is one of the command's inputs (same device and inode), or a folder that holds one,
//    is refused.
//  * Nothing but the temporaries the writer made, and the previous output it replaces, is ever removed.
//  * Errors are io::FileError "<path>: [byte N: ]<problem>", exit status 2 on the command line.
//
// Fault injection for tests: LOWBIT_FAULT_WRITE="<ENOSPC|EIO|EFBIG>:<n>" in the environment makes the
// n-th write(2) of this process made by this writer (counting from 1, standard output included) fail
// with that error, as a full disk or a failing device would; "STOP:<n>" stops the process (SIGSTOP) just
// before its n-th write instead, so that a test can signal it there.  It is read once, at the first write.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lowbit::io {

// Inputs an output must not be (or, for a folder, must not hold).
struct OutputOptions {
  std::vector<std::string> inputs;
};

// Writes `parts`, concatenated, to `path` (or to standard output for "-") by the rules above.  On any
// failure the previous file is untouched and no temporary is left.
void write_output(const std::string& path, std::span<const std::span<const std::uint8_t>> parts,
                  const OutputOptions& options = {});
void write_output(const std::string& path, std::string_view text, const OutputOptions& options = {});

// Writes to standard output, every write checked (EINTR retried): FileError naming "standard output".
void write_stdout(std::string_view text);

// A folder built whole and swapped in at commit().  Destroyed without commit (an exception, a refused
// input), it leaves the previous folder as it was and removes what it had written.
class FolderOutput {
 public:
  struct Options {
    // A file name whose presence marks an existing folder as one lowbit wrote and may replace
    // ("quantized.json", "manifest.json"); empty: only an empty folder is replaced.
    std::string marker;
    std::vector<std::string> inputs;
  };
  // Checks the target, takes the lock and creates the staging folder; FileError when the target is
  // refused or the folder cannot be made.
  FolderOutput(std::string target, Options options);
  ~FolderOutput();
  FolderOutput(const FolderOutput&) = delete;
  FolderOutput& operator=(const FolderOutput&) = delete;

  // Adds a file at `relative` ("case-000/a.npy"; no "..", not absolute), creating its folders.
  void add(const std::string& relative, std::span<const std::span<const std::uint8_t>> parts);
  void add(const std::string& relative, std::string_view text);
  // Swaps the finished folder in; after it the destructor removes only the previous folder.
  void commit();

  const std::string& target() const noexcept { return target_; }

 private:
  struct State;
  std::string target_;
  std::unique_ptr<State> state_;
};

}  // namespace lowbit::io
