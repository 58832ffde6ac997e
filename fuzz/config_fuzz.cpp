// libFuzzer target: gpuenv's user configuration (resolver parse_user_config) and catalog YAML (resolver
// load_catalog, then check_catalog and catalog_digest on what loads). The first byte picks the reader; a catalog
// input may hold several files separated by NUL bytes (each declares its own kind).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz/fuzz_support.hpp"
#include "resolver/catalog.hpp"
#include "resolver/spec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace gpuenv;
  if (size == 0) return 0;
  const std::string_view text = fuzzing::as_text(data, size).substr(1);
  if (data[0] % 2 == 0) {
    (void)resolver::parse_user_config(text, "config.yaml");
    return 0;
  }
  std::vector<resolver::CatalogFile> files;
  for (std::string_view part : fuzzing::split(text, '\0', 4)) files.push_back({"catalog/part" + std::to_string(files.size()) + ".yaml", part});
  auto catalog = resolver::load_catalog(files);
  if (catalog) (void)resolver::check_catalog(*catalog);
  (void)resolver::catalog_digest(files);
  return 0;
}
