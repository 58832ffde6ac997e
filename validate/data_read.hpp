#pragma once
// The data_read measurement (docs/validate.md, "The data path"): the sequential read rate of the path training data
// lives on, through the DataFiles port. A directory gets a directory of gpuenv's own, a file written in it under a
// size cap, read back and removed; a file is only read. Judged by the check (checks/data.cpp).
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "validate/check.hpp"
#include "validate/data_files.hpp"

namespace gpuenv::validate {

/// The names of the directories gpuenv makes inside a data directory: this prefix and six random characters. A
/// directory is made as k_data_new_prefix + six characters, its owner file written and synced there, and only then
/// renamed to this prefix + the same six: a directory under this name always holds its owner file.
inline constexpr const char* k_data_dir_prefix = ".gpuenv-data-read-";
/// The name of a directory of gpuenv's while its owner file is being written (milliseconds, in a live run).
inline constexpr const char* k_data_new_prefix = ".gpuenv-data-new-";
/// A directory of gpuenv's whose run cannot be told from its owner file (a .gpuenv-data-new-* one, or one without a
/// readable owner file) is removed once unchanged this long: a live run renames its directory within moments of
/// making it, and the longest check deadline is 95 s.
inline constexpr std::chrono::minutes k_data_stale_age{10};
/// The error id of a measurement the check's deadline left no time for (checks/data.cpp: WARN data_read_no_time).
inline constexpr const char* k_data_no_time = "data.no_time";
/// The file in each such directory naming its owner (host, boot id, pid namespace, pid), for later runs.
inline constexpr const char* k_data_owner_file = "owner";
/// The file read back.
inline constexpr const char* k_data_file = "data";

/// How much a level writes and how long it may spend.
struct DataReadPlan {
  std::uint64_t file_cap = 0;             ///< the most bytes written to a file of gpuenv's own
  std::uint64_t min_file = 0;             ///< fewer free bytes than 10 x this: not enough space to measure
  std::chrono::milliseconds write_time{};  ///< writing stops here; what was written is read
  std::chrono::milliseconds read_time{};   ///< reading stops here; what was read is judged
  std::size_t block = 0;                  ///< bytes per read and write call
};
/// quick: 256 MiB, 4 s writing, 3 s reading; standard: 2 GiB, 20 s, 10 s; long: 8 GiB, 60 s, 30 s; 8 MiB blocks.
DataReadPlan data_read_plan(Level level);

/// What was measured.
struct DataReadFigures {
  bool own_file = false;          ///< directory mode: a file gpuenv wrote; false: the user's file, read only
  std::string file;               ///< the file read
  std::uint64_t bytes_read = 0;
  std::uint64_t bytes_to_read = 0;  ///< the file's size
  double seconds = 0;               ///< the time the reads took
  bool direct = false;              ///< every read bypassed the page cache (O_DIRECT)
  bool fell_back = false;           ///< O_DIRECT was refused part-way and reads went on buffered
  bool write_stopped = false;       ///< writing reached its time limit: the file is smaller than planned
  bool read_stopped = false;        ///< reading reached its time limit before the end of the file
  std::vector<std::string> notes;   ///< stale directories removed or kept, cleanup trouble
  [[nodiscard]] double rate() const { return seconds > 0 ? static_cast<double>(bytes_read) / seconds : 0; }
};

/// Measures PATH's sequential read rate at LEVEL, finishing before DEADLINE. Errors (ids of data_files.hpp, and
/// "data.unsupported" for a path that is neither a directory nor a regular file, "data.mismatch" when a file of
/// gpuenv's own reads back other bytes than were written, "data.no_space" when a tenth of the free space is less
/// than the plan's minimum file, k_data_no_time when DEADLINE leaves no time to write (directory) or read (file)).
Result<DataReadFigures> measure_data_read(DataFiles& files, const std::string& path, Level level,
                                          std::chrono::steady_clock::time_point deadline);

/// The verdict on a measurement (checks/data.cpp): PASS or FAIL (`data_read_slow`) against MIN (bytes per second),
/// MEASURED (`data_read_unjudged`) without one; nothing read is FAIL `data_path_unusable`. A read stopped at its
/// time limit is judged on what was read, and the message says so. Metrics: read_gbs, bytes_read, seconds and
/// threshold_gbs.
GpuOutcome judge_data_read(const DataReadFigures& figures, std::optional<double> min);

/// The text of an owner file; parse_data_owner reads it back (nullopt for anything else).
std::string data_owner_text(const DataOwner& owner);
std::optional<DataOwner> parse_data_owner(const std::string& text);

/// Whether the process that made a directory owned by DIR_OWNER is gone, seen from SELF: the same host booted since
/// (another boot id), or the same boot and pid namespace and no process PID (ALIVE says). Another host's, another
/// pid namespace's, or a live process's directory is kept.
bool data_owner_gone(const DataOwner& dir_owner, const DataOwner& self, bool pid_alive);

/// Removes the directories of gpuenv's in DIR (of this user, not links) whose run is gone: a .gpuenv-data-read-*
/// one whose owner file says so (data_owner_gone), or that has no readable owner file and is k_data_stale_age old;
/// a .gpuenv-data-new-* one whose owner file says so, or that is k_data_stale_age old. Returns a note for each
/// removed or kept.
std::vector<std::string> remove_stale_data_directories(DataFiles& files, const std::string& dir);

}  // namespace gpuenv::validate
