#pragma once
// The file systems of a VM disk image (docs/vm.md), made as files without mounting, root or loop devices, and
// the same bytes for the same inputs:
// - the EFI system partition: FAT32 by dosfstools' mkfs.fat (--invariant, a fixed volume id) and mtools' mmd
//   and mcopy, with every timestamp SOURCE_DATE_EPOCH (mtools reads it);
// - the root: ext4 by e2fsprogs' `mkfs.ext4 -d` from a directory tree, with gpuenv's own mke2fs.conf (not the
//   host's), a fixed UUID and directory hash seed and E2FSPROGS_FAKE_TIME; then debugfs sets every inode's
//   owner, mode and times from what the packages recorded, so neither the builder's uid nor the files' ctimes
//   on the build host reach the image.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/process/command_runner.hpp"
#include "images/disk/gpt.hpp"

namespace gpuenv::images::disk {

struct FatFile {
  std::string dest;    ///< inside the file system: "EFI/BOOT/BOOTX64.EFI" (upper case is kept)
  std::string source;  ///< a file on the host
};

struct FatRequest {
  std::string out;           ///< the file system image to write (replaced)
  std::uint64_t size = 0;    ///< bytes, a multiple of 1 MiB; at least 33 MiB (FAT32's least cluster count)
  std::uint32_t volume_id = 0;
  std::string label = "ESP";  ///< at most 11 characters
  std::int64_t epoch = 0;     ///< SOURCE_DATE_EPOCH: every timestamp
  std::vector<FatFile> files;
};

/// Errors: `disk.fat` (a tool failed, with its message), `disk.path` (a destination that is empty, absolute,
/// has `..` or characters FAT cannot hold), `process.not_found` (dosfstools or mtools missing).
Status make_fat(const FatRequest& request, CommandRunner& runner);

/// What a path's inode must say, whatever the tree on disk says.
struct InodeOwner {
  std::string path;  ///< relative to the root: "" for the root itself, "etc/hostname"
  std::uint32_t uid = 0, gid = 0;
  std::optional<std::uint32_t> mode;  ///< permission bits (07777); the tree's when not given
};

struct Ext4Request {
  std::string out;         ///< the file system image to write (replaced)
  std::string root;        ///< the directory tree to copy in
  std::uint64_t size = 0;  ///< bytes, a multiple of 1 MiB
  Guid uuid;               ///< the file system's UUID; also the directory hash seed
  std::string label = "root";
  std::int64_t epoch = 0;  ///< every inode's atime, ctime, mtime and crtime
  /// Every path of the tree, each with its owner; a path of the tree left out keeps uid and gid 0.
  std::vector<InodeOwner> owners;
};

/// Errors: `disk.ext4` (mkfs.ext4 or debugfs failed, with its message: a tree too big for SIZE says so),
/// `disk.path` (a path debugfs cannot be told: a double quote or a control character), `process.not_found`.
Status make_ext4(const Ext4Request& request, CommandRunner& runner);

/// How long one tool may run (a 10 GiB root through debugfs takes a minute on two cores).
inline constexpr std::chrono::minutes k_tool_timeout{20};

}  // namespace gpuenv::images::disk
