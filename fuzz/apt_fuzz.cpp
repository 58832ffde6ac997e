// libFuzzer target: the apt parsers on untrusted bytes (the first byte picks the parser).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "packages/apt/apt_sources.hpp"
#include "packages/apt/deb822.hpp"
#include "packages/apt/debian_version.hpp"
#include "packages/apt/package_index.hpp"
#include "base/archive/safe_extract.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  using namespace gpuenv;
  using namespace gpuenv::packages;
  switch (data[0] % 8) {
    case 0: (void)parse_deb822(text, "fuzz"); break;
    case 1: (void)parse_release(text, "fuzz"); break;
    case 2: (void)parse_sources_list(text, "fuzz"); break;
    case 3: (void)parse_sources_deb822(text, "fuzz"); break;
    case 4: (void)parse_relations(text, "fuzz"); break;
    case 5: {
      auto a = DebianVersion::parse(text.substr(0, text.size() / 2));
      auto b = DebianVersion::parse(text.substr(text.size() / 2));
      if (a && b) (void)compare_debian_versions(*a, *b);
      break;
    }
    case 6: (void)parse_ar(text, "fuzz"); break;
    default: {
      PackageIndex index;
      (void)index.add(std::string(text), RepositoryRef{"http://x/", "s", "main", "fuzz"}, {"amd64", "all"});
      break;
    }
  }
  return 0;
}
