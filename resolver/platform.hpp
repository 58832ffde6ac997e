#pragma once
// The platform an image is built for (docs/spec.md "Platforms"): one value that carries every name the
// architecture has in each system gpuenv speaks to, so that no code spells "amd64" or "x86_64" itself.
//
//   OCI (image-spec image-index.md, config.md)   os "linux", architecture "amd64" | "arm64", variant "" | "v8"
//   Debian (dpkg-architecture)                   amd64 | arm64, multiarch triplet x86_64-linux-gnu | aarch64-linux-gnu
//   Python (PEP 425, PEP 508, PEP 600)           platform_machine x86_64 | aarch64, tags manylinux_2_X_<machine>
//   UEFI / Discoverable Partitions Specification  removable-media loader BOOTX64.EFI | BOOTAA64.EFI,
//                                                root partition type 4f68bce3-... | b921b045-...
//   ELF (System V ABI supplements)                e_machine 62 (EM_X86_64) | 183 (EM_AARCH64)
//
// Sources: OCI image-spec v1.1 image-index.md ("platform", arm64 variant v8) and Go's GOARCH values it refers to;
// dpkg's cputable and ostable (amd64 -> x86_64, arm64 -> aarch64); UEFI 2.10 section 3.5.1.1 (removable media
// file names); the UAPI group's Discoverable Partitions Specification (root partition type GUIDs); elf.h.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"

namespace gpuenv::resolver {

/// What gpuenv knows about one CPU architecture (a row of k_platform_facts).
struct PlatformFacts {
  std::string_view oci_architecture;   ///< "amd64", "arm64"
  std::string_view oci_variant;        ///< written in indexes and configs: "" for amd64, "v8" for arm64
  std::string_view debian_arch;        ///< "amd64", "arm64"
  std::string_view triplet;            ///< "x86_64-linux-gnu", "aarch64-linux-gnu"
  std::string_view machine;            ///< uname -m, PEP 508 platform_machine, wheel tags: "x86_64", "aarch64"
  std::string_view efi_suffix;         ///< systemd-boot<suffix>.efi and BOOT<SUFFIX>.EFI: "x64", "aa64"
  std::string_view gpt_root_type;      ///< the root partition's type GUID (Discoverable Partitions Specification)
  std::string_view gpt_root_name;      ///< "Linux root (x86-64)", "Linux root (ARM64)"
  std::uint16_t elf_machine;           ///< e_machine: 62, 183
  std::string_view cuda_target;        ///< CUDA's targets directory: "x86_64-linux", "sbsa-linux"
  std::string_view qemu_user;          ///< the static user-mode emulator: "qemu-x86_64-static", "qemu-aarch64-static"
};

/// linux/amd64 and linux/arm64, in this order (the order locks and indexes list platforms in).
inline constexpr PlatformFacts k_platform_facts[] = {
    {"amd64", "", "amd64", "x86_64-linux-gnu", "x86_64", "x64", "4f68bce3-e8cd-4db1-96e7-fbcaf984b709", "Linux root (x86-64)", 62, "x86_64-linux",
     "qemu-x86_64-static"},
    {"arm64", "v8", "arm64", "aarch64-linux-gnu", "aarch64", "aa64", "b921b045-1df0-41c3-af44-4c6f280d3fae", "Linux root (ARM64)", 183, "sbsa-linux",
     "qemu-aarch64-static"},
};

/// An image's platform: always one of k_platform_facts (made only by parse_platform, platform_of and the
/// constants below), so its facts are always there.
class Platform {
 public:
  /// linux/amd64: what a lock or image that names no platform is.
  Platform() = default;
  [[nodiscard]] const PlatformFacts& facts() const { return k_platform_facts[m_row]; }
  /// "linux/amd64", "linux/arm64": the spec's and the lock's spelling (the variant is implied).
  [[nodiscard]] std::string str() const { return "linux/" + std::string(facts().oci_architecture); }
  /// "linux-amd64": for file names.
  [[nodiscard]] std::string file_tag() const { return "linux-" + std::string(facts().oci_architecture); }
  [[nodiscard]] std::string_view os() const { return "linux"; }
  [[nodiscard]] std::string_view oci_architecture() const { return facts().oci_architecture; }
  [[nodiscard]] std::string_view oci_variant() const { return facts().oci_variant; }
  [[nodiscard]] std::string_view debian_arch() const { return facts().debian_arch; }
  [[nodiscard]] std::string_view triplet() const { return facts().triplet; }
  [[nodiscard]] std::string_view machine() const { return facts().machine; }
  [[nodiscard]] bool is_amd64() const { return m_row == 0; }
  [[nodiscard]] bool is_arm64() const { return m_row == 1; }
  friend bool operator==(const Platform&, const Platform&) = default;
  friend auto operator<=>(const Platform&, const Platform&) = default;

  static Platform amd64() { return Platform(0); }
  static Platform arm64() { return Platform(1); }

 private:
  explicit Platform(std::size_t row) : m_row(row) {}
  std::size_t m_row = 0;
};

/// Reads "linux/amd64", "linux/arm64", "linux/arm64/v8" (also "amd64", "arm64", "x86_64", "aarch64" as a
/// shorthand for linux). Errors: `spec.bad_platform` (ErrorKind::spec) naming the platforms gpuenv builds.
Result<Platform> parse_platform(std::string_view text);

/// The platform of an OCI os/architecture/variant triple (an index entry, a config); std::nullopt for one gpuenv
/// does not build (windows, arm/v7, riscv64, an arm64 variant other than v8).
std::optional<Platform> platform_of(std::string_view os, std::string_view architecture, std::string_view variant);

/// The platform of a Debian architecture ("amd64", "arm64"); std::nullopt for others.
std::optional<Platform> platform_of_debian_arch(std::string_view debian_arch);

/// The platform this gpuenv was compiled for (the host it runs on).
Platform native_platform();

/// "linux/amd64, linux/arm64": the platforms gpuenv builds.
std::string known_platforms();

/// "linux/amd64, linux/arm64" for a list.
std::string platform_list(const std::vector<Platform>& platforms);

}  // namespace gpuenv::resolver
