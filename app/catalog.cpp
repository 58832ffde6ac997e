#include <algorithm>
#include <filesystem>

#include "app/catalog.hpp"

#include "base/yaml_guard.hpp"
#include "recipes/embedded.hpp"
#include "resolver/catalog_codec.hpp"

namespace gpuenv::app {

Result<LoadedCatalog> load_catalog_from(const std::string& dir) {
  LoadedCatalog loaded;
  if (dir.empty()) {
    auto catalog = resolver::decode_catalog(recipes::compiled_catalog());
    if (!catalog) return std::move(catalog).error();
    loaded.catalog = std::move(*catalog);
    loaded.sha256 = std::string(recipes::compiled_catalog_sha256());
    loaded.origin = "embedded";
    return loaded;
  }
  loaded.origin = dir;
  std::error_code ec;
  std::vector<std::string> paths;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
    if (entry.path().extension() == ".yaml") paths.push_back(entry.path().string());
  if (ec) return make_error(ErrorKind::environment, "catalog.read", "cannot list the catalog directory: " + ec.message(), dir, "");
  std::sort(paths.begin(), paths.end());
  std::vector<std::pair<std::string, std::string>> owned;
  for (const auto& p : paths) {
    auto text = read_yaml_file(p, 64u << 20);
    if (!text) return std::move(text).error();
    owned.emplace_back(p, std::move(*text));
  }
  if (owned.empty()) return make_error(ErrorKind::usage, "catalog.empty", "no *.yaml files in the catalog directory", dir, "");
  std::vector<resolver::CatalogFile> files;
  for (const auto& [p, t] : owned) files.push_back({p, t});
  auto catalog = resolver::load_catalog(files);
  if (!catalog) return std::move(catalog).error();
  loaded.catalog = std::move(*catalog);
  loaded.sha256 = resolver::catalog_digest(files);
  return loaded;
}

}  // namespace gpuenv::app
