#pragma once
// A whole VM disk image (docs/vm.md): the partitions' file systems, made beforehand as files, placed behind a GPT
// in one sparse raw file (runs of zeros stay holes), and qcow2 from it by qemu-img. The file appears complete or
// not at all: it is written beside OUT and renamed.
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/process/command_runner.hpp"
#include "images/disk/gpt.hpp"

namespace gpuenv::images::disk {

struct DiskPartition {
  PartitionRequest request;  ///< its size: the image's, rounded up to whole MiB, unless larger
  std::string image;         ///< the file system image to place in it
};

/// Writes the raw disk to OUT. Errors: `disk.partition` (via plan_gpt), `disk.io` (with errno's text), `io.*` (the temporary file beside OUT).
Result<GptLayout> write_raw_disk(const std::string& out, const Guid& disk, const std::vector<DiskPartition>& partitions);

/// qemu-img convert -O qcow2 RAW OUT (no compression: the same bytes each time). Errors: `disk.qcow2`,
/// `process.not_found` (qemu-utils).
Status convert_to_qcow2(const std::string& raw, const std::string& out, CommandRunner& runner);

}  // namespace gpuenv::images::disk
