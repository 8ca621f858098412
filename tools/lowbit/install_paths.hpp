// Where an installed `lowbit` finds the files it reads at run time (cmake/lowbitInstall.cmake): beside its
// own location, <prefix>/bin/lowbit -> <prefix>/share/lowbit and <prefix>/share/doc/lowbit, so that a
// package unpacked anywhere works without the source tree it was built from.  The build tree's binary has
// no such folders beside it and falls back to the source tree (LOWBIT_SOURCE_DIR).
#pragma once
#include <filesystem>
#include <optional>
#include <system_error>

namespace lowbit::cli {

enum class InstalledDir { data, doc };

// `relative` under the installed data or doc folder, when this binary is an installed one and the file
// exists there.
inline std::optional<std::filesystem::path> installed_file(InstalledDir dir, const std::filesystem::path& relative) {
#if defined(LOWBIT_DATA_FROM_BINDIR) && defined(LOWBIT_DOC_FROM_BINDIR)
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return std::nullopt;
  const fs::path base =
      self.parent_path() / (dir == InstalledDir::data ? LOWBIT_DATA_FROM_BINDIR : LOWBIT_DOC_FROM_BINDIR);
  const fs::path file = (base / relative).lexically_normal();
  if (fs::is_regular_file(file, ec)) return file;
#else
  (void)dir;
  (void)relative;
#endif
  return std::nullopt;
}

}  // namespace lowbit::cli
