// libFuzzer target for the parsers of image building: ELF headers, locks, apt preferences, registry
// references, WWW-Authenticate challenges, Docker config.json, and the SPDX document the CycloneDX SBOM is made from.
// The first byte picks the parser.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "packages/apt/apt_preferences.hpp"
#include "images/assemble/cyclonedx.hpp"
#include "images/elf/elf.hpp"
#include "images/registry/registry_client.hpp"
#include "resolver/lockfile.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  using namespace gpuenv;
  switch (data[0] % 7) {
    case 0: {
      auto elf = images::parse_elf(text, "fuzz");
      if (elf) (void)images::ld_cache_flags(*elf);
      break;
    }
    case 1: (void)resolver::parse_lock(text, "fuzz.lock"); break;
    case 2: (void)packages::parse_apt_preferences(text, "preferences"); break;
    case 3: (void)images::parse_image_reference(text); break;
    case 4: (void)images::parse_auth_challenge(text); break;
    case 5: (void)images::parse_docker_config_credentials(text, "registry.example.com"); break;
    default: (void)images::cyclonedx_json(text, {Digest::of("fuzz"), "amd64", "debian-12", "fuzz"}, "fuzz"); break;
  }
  return 0;
}
