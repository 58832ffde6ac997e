#pragma once
// What a VM disk gpuenv built holds (`gpuenv inspect DISK`, docs/vm.md): its format and sizes, its partitions
// (the GPT read back and checked), and the lock inside its root (/usr/share/gpuenv/gpuenv.lock, read from the
// ext4 partition with debugfs, nothing mounted), so its packages, kernel and spec are known without booting it.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.hpp"
#include "base/process/command_runner.hpp"
#include "images/disk/gpt.hpp"
#include "resolver/lockfile.hpp"
#include "resolver/platform.hpp"

namespace gpuenv::images::disk {

/// Whether PATH is a regular file that starts like a qcow2 (its magic) or a raw disk with a GPT ("EFI PART" in
/// LBA 1); the rest of inspect's inputs are images.
bool looks_like_disk(const std::string& path);

struct DiskSummary {
  std::string path;
  std::string format;                ///< raw | qcow2
  std::uint64_t file_size = 0;       ///< bytes of the file
  std::uint64_t allocated = 0;       ///< bytes it occupies (sparse raw, qcow2)
  std::uint64_t disk_size = 0;       ///< the disk's own size (a qcow2's virtual size)
  GptLayout layout;
  /// The platform of its root partition's type (x86-64: linux/amd64, ARM64: linux/arm64); unset when it has none.
  std::optional<resolver::Platform> platform;
  std::optional<resolver::Lock> lock;  ///< the lock gpuenv wrote into the root, when there is one
  std::string lock_problem;            ///< why it could not be read, when it could not
};

/// Status of a qcow2 HEAD (its first 104 bytes) for inspect: refused (`disk.qcow2`) when it names a backing file or
/// an external data file, is encrypted, is another version than 2 and 3, or says its disk is above 16 TiB.
Status check_qcow2_header(std::string_view head, const std::string& path);

/// The bytes of data (not zero, not unallocated) that `qemu-img map --output=json` lists in MAP_JSON: what a
/// conversion to raw writes. Error `disk.qcow2` for a map that is not one, or adds up past 16 TiB.
Result<std::uint64_t> qcow2_data_bytes(std::string_view map_json, const std::string& path);

/// Reads DISK (a qcow2 is first converted to a sparse raw file in WORK_DIR). Errors: `disk.gpt` (not a GPT disk or
/// a damaged one), `disk.io`, `disk.qcow2` (a qcow2 that names a backing file or an external data file, an
/// encrypted one or another version than 2 and 3, all refused from its header before qemu-img opens it; one whose
/// data is more than 400 times its size, refused from its map before anything is written; or qemu-img failed),
/// `process.not_found`. A lock above 64 MiB is a lock_problem, never read whole.
Result<DiskSummary> read_disk(const std::string& path, const std::string& work_dir, CommandRunner& runner);

}  // namespace gpuenv::images::disk
