#pragma once
// The GUID partition table of a VM disk image (docs/vm.md), written by gpuenv itself: pure, so the same layout
// gives the same bytes. UEFI 2.10 section 5.3: a protective MBR in LBA 0, the primary header in LBA 1 and its 128
// entries of 128 bytes in LBAs 2-33, the backup entries and header in the last 33 LBAs, CRC-32 over header and
// entries. 512-byte sectors; partitions aligned to 1 MiB, as parted and sfdisk place them.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"
#include "resolver/platform.hpp"

namespace gpuenv::images::disk {

inline constexpr std::uint64_t k_sector = 512;
inline constexpr std::uint64_t k_align_bytes = 1u << 20;

/// A GUID as text writes it ("c12a7328-f81f-11d2-ba4b-00a0c93ec93b"): bytes in that order. On disk the first
/// three fields are little-endian (UEFI's mixed-endian form); `to_disk` does that.
struct Guid {
  std::array<std::uint8_t, 16> bytes{};
  /// 8-4-4-4-12 hex digits, either case; std::nullopt for anything else.
  static std::optional<Guid> parse(std::string_view text);
  /// Lower-case 8-4-4-4-12.
  [[nodiscard]] std::string str() const;
  /// The 16 bytes as GPT stores them.
  [[nodiscard]] std::array<std::uint8_t, 16> to_disk() const;
  bool operator==(const Guid&) const = default;
};

/// A version-4-shaped GUID drawn from SEED by sha256: the same seed, the same GUID (fixed UUIDs from the lock).
Guid guid_from_seed(std::string_view seed);

/// Partition types (UEFI 2.10 table 5.7; the Discoverable Partitions Specification for the roots, one per
/// architecture: resolver::PlatformFacts::gpt_root_type).
inline constexpr const char* k_type_esp = "c12a7328-f81f-11d2-ba4b-00a0c93ec93b";
inline constexpr const char* k_type_root_x86_64 = "4f68bce3-e8cd-4db1-96e7-fbcaf984b709";
inline constexpr const char* k_type_root_arm64 = "b921b045-1df0-41c3-af44-4c6f280d3fae";

/// The root partition type of PLATFORM (its Discoverable Partitions Specification GUID).
Guid root_partition_type(const resolver::Platform& platform);

/// The platform whose root partition type TYPE is; std::nullopt for any other type.
std::optional<resolver::Platform> root_partition_platform(const Guid& type);

struct PartitionRequest {
  Guid type, unique;
  std::string name;        ///< at most 36 UTF-16 code units; ASCII here
  std::uint64_t size = 0;  ///< bytes; rounded up to whole MiB
};

struct Partition {
  Guid type, unique;
  std::string name;
  std::uint64_t first_lba = 0, last_lba = 0;  ///< inclusive
  [[nodiscard]] std::uint64_t offset() const { return first_lba * k_sector; }
  [[nodiscard]] std::uint64_t size() const { return (last_lba - first_lba + 1) * k_sector; }
};

struct GptLayout {
  Guid disk;
  std::uint64_t total_lbas = 0;
  std::vector<Partition> partitions;
  [[nodiscard]] std::uint64_t size() const { return total_lbas * k_sector; }
};

/// Places the partitions one after the other from 1 MiB, each aligned to 1 MiB, and sizes the disk to hold them
/// and the backup table (the last MiB). Errors (`disk.partition`): no partition, more than 128, an empty one, a
/// name that is too long or not ASCII.
Result<GptLayout> plan_gpt(const Guid& disk, const std::vector<PartitionRequest>& partitions);

/// The table's bytes: `head` for LBAs 0-33 (protective MBR, primary header, entries) and `tail` for the last 33
/// LBAs (backup entries, backup header).
struct GptBytes {
  std::string head, tail;
};
GptBytes gpt_bytes(const GptLayout& layout);

/// Reads the primary table from HEAD (at least LBAs 0-33 of a disk of DISK_SIZE bytes): signature, revision,
/// header and entries CRC-32, places inside the disk. Errors (`disk.gpt`): not a GPT, or a damaged one, saying
/// which field.
Result<GptLayout> read_gpt(std::string_view head, std::uint64_t disk_size);

/// "EFI system partition", "Linux root (x86-64)", "Linux root (ARM64)", or the type GUID's text.
std::string partition_type_name(const Guid& type);

}  // namespace gpuenv::images::disk
