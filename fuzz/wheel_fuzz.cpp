// libFuzzer target: the Python packaging parsers on untrusted bytes (the first byte picks the parser).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "packages/wheels/markers.hpp"
#include "packages/wheels/metadata.hpp"
#include "packages/wheels/pep440.hpp"
#include "packages/wheels/pip_config.hpp"
#include "packages/wheels/simple_index.hpp"
#include "packages/wheels/wheel_tags.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  using namespace gpuenv;
  using namespace gpuenv::packages;
  switch (data[0] % 7) {
    case 0: (void)parse_simple_page(text, "application/vnd.pypi.simple.v1+json", "https://index.example/simple/x/"); break;
    case 1: (void)parse_simple_page(text, "text/html", "https://index.example/simple/x/"); break;
    case 2: (void)parse_core_metadata(text, "fuzz"); break;
    case 3: (void)parse_requirement(text); break;
    case 4: (void)parse_wheel_filename(text); break;
    case 5: (void)parse_pip_config(text, "fuzz"); break;
    default: {
      auto v = Pep440Version::parse(text.substr(0, text.size() / 3));
      auto s = Pep440SpecifierSet::parse(text.substr(text.size() / 3));
      if (v && s) (void)s->contains(*v);
      break;
    }
  }
  return 0;
}
