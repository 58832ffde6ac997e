#pragma once
// The DataFiles port: the file-system calls of the data_read check (docs/validate.md, "The data path"). The real
// adapter (adapters/posix_data_files) reads with O_DIRECT where the file system takes it and otherwise drops the
// file's own cached pages; tests hand in a fake to inject short reads, I/O errors and a clock.
//
// Every Error a port call returns carries one of the ids below, so that the check can say what went wrong
// without reading errno itself.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/error.hpp"

namespace gpuenv::validate {

/// Error ids of the DataFiles port.
inline constexpr const char* k_data_missing = "data.missing";      ///< ENOENT, ENOTDIR
inline constexpr const char* k_data_denied = "data.denied";        ///< EACCES, EPERM
inline constexpr const char* k_data_read_only = "data.read_only";  ///< EROFS
inline constexpr const char* k_data_no_space = "data.no_space";    ///< ENOSPC, EDQUOT
inline constexpr const char* k_data_io = "data.io";                ///< EIO and every other failure

/// Buffers handed to DataReadFile::read and DataWriteFile::write are aligned to this, and their sizes are
/// multiples of it (O_DIRECT's rule for every block size Linux file systems use).
inline constexpr std::size_t k_data_alignment = 4096;

/// What a path is.
enum class DataPathKind { missing, directory, regular_file, other };

struct DataPathInfo {
  DataPathKind kind = DataPathKind::missing;
  std::uint64_t size = 0;        ///< bytes, for a regular file
  std::uint64_t free_bytes = 0;  ///< what this user may still write on its file system (statvfs f_bavail)
  bool read_only = false;        ///< its file system is mounted read-only (ST_RDONLY)
};

/// Who made a directory of gpuenv's: enough for a later run to tell whether that process is gone.
struct DataOwner {
  std::string host;           ///< the host name
  std::string boot_id;        ///< /proc/sys/kernel/random/boot_id: changes at every boot
  std::string pid_namespace;  ///< the pid namespace ("pid:[4026531836]"): a pid means nothing outside it
  long pid = 0;
};

/// An entry of a directory, as DataFiles::list sees it without following links.
struct DataEntry {
  std::string name;
  bool directory = false;  ///< a real directory, not a link to one
  bool mine = false;       ///< owned by this process's user
  std::chrono::seconds age{0};  ///< since it last changed (wall clock minus its mtime); 0 when its mtime is ahead
};

/// A file open for reading, never for writing.
class DataReadFile {
 public:
  virtual ~DataReadFile() = default;
  /// Whether reads bypass the page cache (O_DIRECT) now; an adapter that fell back says false from then on.
  [[nodiscard]] virtual bool direct() const = 0;
  /// Reads up to SIZE bytes at the current offset into BUFFER (aligned to k_data_alignment, SIZE a multiple of it);
  /// returns how many were read, 0 at the end. A read may be short. Errors: the ids above.
  virtual Result<std::size_t> read(std::byte* buffer, std::size_t size) = 0;
};

/// A new file being written.
class DataWriteFile {
 public:
  virtual ~DataWriteFile() = default;
  [[nodiscard]] virtual bool direct() const = 0;
  /// Writes SIZE bytes from BUFFER (aligned, SIZE a multiple of k_data_alignment), all of them or an Error.
  virtual Status write(const std::byte* buffer, std::size_t size) = 0;
  /// Makes the data durable (fdatasync), drops the file's pages from the page cache and closes it.
  virtual Status finish() = 0;
};

/// The file-system calls of the data_read check.
class DataFiles {
 public:
  virtual ~DataFiles() = default;
  /// What PATH is (a missing path is kind `missing`, not an Error), with its file system's free space.
  virtual Result<DataPathInfo> inspect(const std::string& path) = 0;
  /// Opens PATH read-only (O_RDONLY: never for writing) for a sequential read: with O_DIRECT where the file system
  /// takes it, else buffered after dropping the file's own cached pages (posix_fadvise, never the host's caches).
  virtual Result<std::unique_ptr<DataReadFile>> open_read(const std::string& path) = 0;
  /// Makes a new directory PARENT/PREFIX + six random characters (mode 0700, mkdtemp); returns its path.
  virtual Result<std::string> make_directory(const std::string& parent, const std::string& prefix) = 0;
  /// Creates PATH, which must not exist (O_EXCL, mode 0600), for writing; O_DIRECT where the file system takes it.
  virtual Result<std::unique_ptr<DataWriteFile>> create(const std::string& path) = 0;
  /// Writes a small new file (O_EXCL, 0600) holding TEXT, synced (fdatasync), and syncs the directory holding it
  /// (fsync), so that the file, its contents and its name are all on disk when this returns.
  virtual Status write_small(const std::string& path, const std::string& text) = 0;
  /// Renames the directory PARENT/FROM to PARENT/TO, both names looked up from one descriptor of PARENT; never
  /// replaces an existing TO (RENAME_NOREPLACE; where the file system lacks it, a TO seen to exist is refused and
  /// rename can at most replace an empty directory). PARENT is synced afterwards. Names hold no '/'.
  virtual Status rename_directory(const std::string& parent, const std::string& from, const std::string& to) = 0;
  /// Reads at most LIMIT bytes of a small file, not following a link.
  virtual Result<std::string> read_small(const std::string& path, std::size_t limit) = 0;
  /// The entries of DIR (without "." and "..").
  virtual Result<std::vector<DataEntry>> list(const std::string& dir) = 0;
  /// Removes the directory DIR and the files directly in it (links are removed, never followed); refuses, leaving
  /// it, when it holds a directory. DIR's parent is opened once, DIR opened from it without following a link, its
  /// files unlinked through DIR's descriptor and DIR removed through the parent's (no path looked up twice).
  virtual Status remove_directory(const std::string& dir) = 0;
  /// This process as the owner of the directories it makes.
  virtual DataOwner self() = 0;
  /// Whether a process PID exists in this pid namespace (a process of another user counts).
  virtual bool alive(long pid) = 0;
  /// The clock reads are timed and bounded with.
  virtual std::chrono::steady_clock::time_point now() = 0;
};

/// The real adapter: POSIX calls on this machine's file systems.
std::shared_ptr<DataFiles> make_posix_data_files();

}  // namespace gpuenv::validate
