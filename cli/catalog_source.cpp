#include <algorithm>
#include <filesystem>

#include "cli/commands.hpp"
#include "cli/io.hpp"
#include "recipes/embedded.hpp"

namespace gpuenv::cli {

Result<LoadedCatalog> load_catalog_from(const std::string& dir) {
  std::vector<std::pair<std::string, std::string>> owned;  // path, text (directory catalogs)
  std::vector<resolver::CatalogFile> files;
  std::string digest_input;
  LoadedCatalog loaded;
  if (dir.empty()) {
    loaded.origin = "embedded";
    for (const auto& f : recipes::embedded_catalog()) files.push_back({"recipes/" + std::string(f.path), f.text});
  } else {
    loaded.origin = dir;
    std::error_code ec;
    std::vector<std::string> paths;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
      if (entry.path().extension() == ".yaml") paths.push_back(entry.path().string());
    if (ec) {
      return make_error(ErrorKind::environment, "catalog.read", "cannot list the catalog directory: " + ec.message(), dir, "");
    }
    std::sort(paths.begin(), paths.end());
    for (const auto& p : paths) {
      auto text = read_file_limited(p, 64u << 20);
      if (!text) return std::move(text).error();
      owned.emplace_back(p, std::move(*text));
    }
    for (const auto& [p, t] : owned) files.push_back({p, t});
    if (files.empty()) return make_error(ErrorKind::usage, "catalog.empty", "no *.yaml files in the catalog directory", dir, "");
  }
  for (const auto& f : files) {
    const std::string name = std::filesystem::path(f.path).filename().string();
    digest_input += name;
    digest_input += '\0';
    digest_input += f.text;
    digest_input += '\0';
  }
  auto catalog = resolver::load_catalog(files);
  if (!catalog) return std::move(catalog).error();
  loaded.catalog = std::move(*catalog);
  loaded.sha256 = sha256_hex(digest_input);
  return loaded;
}

}  // namespace gpuenv::cli
