#pragma once
// Reading files with a size limit, and writing them atomically.
//
// AtomicFile is the one way gpuenv writes a file that another process (or a later run) may read: the bytes go to
// a temporary file beside the target, with a unique name (so concurrent writers never share one), and only
// commit() makes them visible: the file is synced, renamed over the target, and the directory synced. A file
// that is never committed is removed, so nothing half-written is left behind.
#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"
#include "base/unique_fd.hpp"

namespace gpuenv {

/// The error a file over its size limit gets: callers that read a particular format name their own.
struct TooLarge {
  ErrorKind kind = ErrorKind::environment;
  std::string id = "io.too_large";
  std::string hint = "is this the right file?";
};

/// Reads a whole regular file of at most MAX_BYTES (larger files are refused without being read).
/// Errors: `io.not_found` (usage), `io.not_a_file` (usage), TOO_LARGE, `io.error` (environment).
Result<std::string> read_file_limited(const std::string& path, std::size_t max_bytes, const TooLarge& too_large = {});

/// The whole content of the open file FD when it is a regular file of at most MAX_BYTES; std::nullopt when FD is
/// invalid, not a regular file, larger, or unreadable. For readers that opened FD under their own rule (beneath
/// a root, O_NOFOLLOW) and have their own error for "not there".
std::optional<std::string> read_regular_fd(int fd, std::size_t max_bytes);

/// Whether commit() (and commit_directory) syncs the file or tree and its directory: `synced` for what outlives the
/// run (caches, layouts, locks, reports); `scratch` for files of a tree under construction in a work directory,
/// which is thrown away whole if the run stops (syncing each of a wheel's thousands of files would cost minutes and
/// protect nothing).
enum class Durability { synced, scratch };

class AtomicFile {
 public:
  /// A temporary file beside PATH (the directory must exist), mode MODE once committed; what killed writers of
  /// PATH left beside it is removed first (remove_dead_temporaries).
  static Result<AtomicFile> create(const std::string& path, mode_t mode = 0644, Durability durability = Durability::synced);
  /// The same inside an open directory: NAME is one path component (no '/'); nothing outside DIR_FD is followed.
  static Result<AtomicFile> create_in(int dir_fd, const std::string& name, mode_t mode = 0644, Durability durability = Durability::synced);

  AtomicFile(AtomicFile&&) noexcept;
  AtomicFile& operator=(AtomicFile&&) = delete;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();  ///< removes the temporary file unless committed

  [[nodiscard]] int fd() const { return m_fd.get(); }
  [[nodiscard]] const std::string& path() const { return m_where; }
  Status write(std::string_view bytes);
  /// Syncs, sets the mode, renames over the target and syncs the directory. Afterwards the object is spent.
  Status commit();

 private:
  AtomicFile(UniqueFd fd, int dir_fd, bool own_dir, std::string temp, std::string target, mode_t mode);
  UniqueFd m_fd;
  int m_dir_fd = -1;   ///< the directory both names are in (AT_FDCWD-relative paths when m_own_dir)
  bool m_own_dir = false;
  std::string m_temp;    ///< name relative to m_dir_fd
  std::string m_target;  ///< name relative to m_dir_fd
  std::string m_where;   ///< the target as the caller named it, for messages
  mode_t m_mode = 0644;
  Durability m_durability = Durability::synced;
  bool m_done = false;
};

/// The names in the open directory DIR_FD, sorted, "." and ".." left out (DIR_FD stays open and is not moved).
/// Errors: `io.error` when it cannot be listed (WHERE names it in the message).
Result<std::vector<std::string>> sorted_directory_names(int dir_fd, const std::string& where);

/// Removes the directory tree DIR the way a cache removes an entry others may be reading: renamed first (to
/// ".removing-<name>-<pid>" beside it), so that no reader takes a half-removed tree for a whole one, then removed.
/// False when it could not be renamed (gone already, or taken by another remover).
bool remove_tree_renamed(const std::string& dir);

/// The PID at the start of TEXT, up to SEPARATOR ("4242-7-9f" with '-'); 0 when TEXT does not start so.
long leading_pid(std::string_view text, char separator);
/// Whether PID is a process that has exited (kill(PID, 0) says ESRCH); false for this process and for PIDs of
/// other users' processes, which are alive.
bool process_gone(long pid);
/// Where this process's PIDs mean something: the first 12 hex digits of the kernel's boot id, "n", and the inode of
/// its PID namespace ("3f2a9c0d11e4n4026531836"); "" when /proc cannot tell. A cache or an output directory shared
/// by machines (NFS) or containers holds temporaries of writers whose PIDs are not this kernel's or namespace's.
const std::string& writer_host();
/// "PID" SEPARATOR writer_host(): how temporaries of shared directories name their writer.
std::string writer_stamp(char separator);
/// Whether TEXT starts with a writer_stamp (then SEPARATOR) of this machine and PID namespace whose process has
/// exited. False for any other machine's or namespace's writer, and for names without a stamp: those are judged by
/// age (untouched for a day) by their sweepers.
bool writer_gone(std::string_view text, char separator);
/// Whether NAME in the open directory DIR_FD is a regular file last written more than 24 hours ago.
bool untouched_for_a_day(int dir_fd, const char* name);
/// Removes from the open directory DIR_FD the temporary files of NAME (".NAME.tmp.PID.HOST.N.RANDOM") whose writer
/// has exited (writer_gone) or that nobody wrote to for a day (a writer on another machine, killed): what a killed
/// AtomicFile left. Returns how many. AtomicFile::create calls it for its own target.
std::size_t remove_dead_temporaries(int dir_fd, const std::string& name);
/// A fresh temporary name beside PATH for a tool to write (qemu-img), named as AtomicFile names its own, after
/// removing what exited writers of PATH left.
std::string temporary_beside(const std::string& path);

/// A tree being staged for commit_directory at PATH: removed with all it holds when this goes out of scope, so a
/// writer that fails half-way leaves nothing behind (once committed, PATH no longer exists and nothing is removed).
class StagedDirectory {
 public:
  explicit StagedDirectory(std::string path) : m_path(std::move(path)) {}
  ~StagedDirectory();
  StagedDirectory(const StagedDirectory&) = delete;
  StagedDirectory& operator=(const StagedDirectory&) = delete;
  [[nodiscard]] const std::string& path() const { return m_path; }

 private:
  std::string m_path;
};

/// How commit_directory ended.
enum class DirCommit {
  placed,         ///< the staged tree has the target's name now
  already_there,  ///< the target was a non-empty directory (another writer committed first): it stays, the staged tree is removed
};

/// The one directory commit: a tree written whole under STAGED (a sibling of TARGET, or a directory on its file
/// system) is renamed onto TARGET, which must be absent or an empty directory. With Durability::synced the staged
/// tree's file system is synced first (syncfs: a power cut never leaves a named, partly written tree) and TARGET's
/// directory after the rename (best effort, as AtomicFile::commit: the new name survives one); `scratch` syncs
/// nothing. STAGED is gone afterwards, whatever happens. Errors: io_error(AREA, "cannot sync", STAGED), and
/// io_error(AREA, WHAT, TARGET) when the rename fails for another reason than an existing non-empty TARGET.
Result<DirCommit> commit_directory(const std::string& staged, const std::string& target, Durability durability, const IoArea& area,
                                   const std::string& what);

/// Writes BYTES to PATH atomically (AtomicFile); the directory must exist.
Status write_file_atomic(const std::string& path, std::string_view bytes, mode_t mode = 0644, Durability durability = Durability::synced);

}  // namespace gpuenv
