// libFuzzer target: the GPT reader behind `gpuenv inspect DISK` (images/disk/gpt.hpp) on untrusted bytes: the first
// 8 bytes are the disk's size (little-endian), the rest its first sectors.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "images/disk/gpt.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 8) return 0;
  std::uint64_t disk_size = 0;
  for (int i = 7; i >= 0; --i) disk_size = (disk_size << 8) | data[i];
  const std::string_view head(reinterpret_cast<const char*>(data) + 8, size - 8);
  auto layout = gpuenv::images::disk::read_gpt(head, disk_size);
  if (layout)
    for (const auto& p : layout->partitions) (void)gpuenv::images::disk::partition_type_name(p.type);
  return 0;
}
