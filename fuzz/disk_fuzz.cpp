// libFuzzer target: what `gpuenv inspect DISK` reads from a disk on untrusted bytes. An input that starts with a
// qcow2's magic is a qcow2 header (images/disk/disk_reader.hpp); one that starts with '[' is a `qemu-img map` answer
// for that qcow2; any other input is a GPT (images/disk/gpt.hpp): its first 8 bytes the disk's size (little-endian),
// the rest its first sectors.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "images/disk/disk_reader.hpp"
#include "images/disk/gpt.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  if (all.substr(0, 4) == std::string_view("QFI\xfb", 4)) {
    (void)gpuenv::images::disk::check_qcow2_header(all, "fuzz");
    return 0;
  }
  if (!all.empty() && all[0] == '[') {
    (void)gpuenv::images::disk::qcow2_data_bytes(all, "fuzz");
    return 0;
  }
  if (size < 8) return 0;
  std::uint64_t disk_size = 0;
  for (int i = 7; i >= 0; --i) disk_size = (disk_size << 8) | data[i];
  const std::string_view head(all.substr(8));
  auto layout = gpuenv::images::disk::read_gpt(head, disk_size);
  if (layout)
    for (const auto& p : layout->partitions) (void)gpuenv::images::disk::partition_type_name(p.type);
  return 0;
}
