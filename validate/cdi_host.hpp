#pragma once
// The host side of the cdi_spec check: the CDI spec directories listed and their spec files read (bounded, never
// written), and the host paths a spec names looked up beneath a root. The directories and the root come from
// CheckInputs::cdi, so tests point them at a temporary tree; the CLI gives /etc/cdi, /var/run/cdi, the container
// toolkit's spec-dirs and "/".
//
// As CDI's own scan (pkg/cdi/spec-dirs.go, scanSpecDirs): every entry of each directory whose name ends in
// ".json" or ".yaml", without recursing; entries that are directories are skipped. A spec file that is a symlink is
// read through it, as a runtime would; one that is not a regular file (a FIFO, a device, a dangling link) is not
// opened for reading at all.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/unique_fd.hpp"
#include "validate/cdi_spec.hpp"

namespace gpuenv::validate {

/// One spec file found in a directory.
struct CdiSpecFile {
  std::string path;  ///< DIR/NAME as found (untrusted: messages pass it through safe_text)
  CdiFormat format = CdiFormat::yaml;
  bool symlink = false;             ///< the entry is a symlink (read through it)
  std::optional<std::string> text;  ///< the file's bytes; empty: PROBLEM says why
  std::string problem;              ///< "permission denied", "a FIFO, not a regular file", "larger than 4 MiB"
  bool permission_denied = false;   ///< could not be read by this user: not judged rather than broken
};

/// What the directories held.
struct CdiDirectoryScan {
  std::vector<std::string> searched;   ///< directories that exist and were listed
  std::vector<std::string> absent;     ///< directories that do not exist
  std::vector<std::string> unlisted;   ///< "DIR (why)": there but not listable, or not a directory
  std::vector<CdiSpecFile> files;      ///< in directory order, then by name
  std::vector<std::string> skipped;    ///< entries named *.json or *.yaml that are directories (runtimes skip them)
  std::size_t left_out = 0;            ///< spec files past MAX_FILES, not read
};

/// Lists DIRS (duplicates, such as /var/run/cdi and /run/cdi, once): at most MAX_FILES spec files, not yet read.
/// Never fails: what could not be listed is recorded in the scan.
CdiDirectoryScan scan_cdi_directories(const std::vector<std::string>& dirs, std::size_t max_files);

/// Reads FILE's bytes into FILE.text (at most MAX_BYTES), or says in FILE.problem why not. Only a regular file is
/// opened (stat first, through a symlink): opening a FIFO or a device can block or act.
void read_cdi_spec_file(CdiSpecFile& file, std::size_t max_bytes);

/// Whether a host path is there.
enum class HostPathState { present, missing, not_checked };

/// The host's file system as seen from a root directory: "/" on the host itself, or a host's tree mounted
/// elsewhere. Paths are resolved beneath the root (openat2 RESOLVE_IN_ROOT: ".." and absolute symlinks stay
/// inside it), so nothing a spec names is looked up outside the tree given.
class HostRoot {
 public:
  /// Opens ROOT; an Error (`cdi.root`) when it is not a directory that can be opened.
  static Result<HostRoot> open(const std::string& root);
  /// Whether ABSOLUTE_PATH exists beneath the root (any file type, symlinks followed within it); `not_checked`
  /// with WHY when it cannot be told (permission denied, a kernel without openat2).
  HostPathState probe(const std::string& absolute_path, std::string& why) const;
  [[nodiscard]] const std::string& root() const { return m_root; }

 private:
  HostRoot(UniqueFd fd, std::string root) : m_fd(std::move(fd)), m_root(std::move(root)) {}
  UniqueFd m_fd;
  std::string m_root;
};

}  // namespace gpuenv::validate
