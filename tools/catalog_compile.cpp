// Build-time tool: loads recipes/catalog/*.yaml with the same loader gpuenv uses for --catalog, and writes the
// compact encoding (resolver/catalog_codec.hpp) plus the catalog digest that locks record.
// Usage: gpuenv-catalog-compile OUT.bin OUT.sha256 FILE.yaml...
#include <filesystem>
#include <iostream>

#include "base/digest.hpp"
#include "base/file_io.hpp"
#include "base/yaml_guard.hpp"
#include "resolver/catalog_codec.hpp"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: gpuenv-catalog-compile OUT.bin OUT.sha256 FILE.yaml...\n";
    return 2;
  }
  std::vector<std::pair<std::string, std::string>> texts;
  for (int i = 3; i < argc; ++i) {
    auto t = gpuenv::read_yaml_file(argv[i], 64u << 20);
    if (!t) {
      std::cerr << t.error().to_string() << "\n";
      return 1;
    }
    texts.emplace_back(argv[i], std::move(*t));
  }
  std::vector<gpuenv::resolver::CatalogFile> files;
  for (const auto& [p, t] : texts) files.push_back({"recipes/catalog/" + std::filesystem::path(p).filename().string(), t});
  auto catalog = gpuenv::resolver::load_catalog(files);
  if (!catalog) {
    std::cerr << catalog.error().to_string() << "\n";
    return 1;
  }
  const std::string bin = gpuenv::resolver::encode_catalog(*catalog);
  auto round = gpuenv::resolver::decode_catalog(bin);
  if (!round || !(*round == *catalog)) {
    std::cerr << "error: the catalog encoding does not round-trip; this is a bug in resolver/catalog_codec.cpp\n";
    return 1;
  }
  if (auto st = gpuenv::write_file_atomic(argv[1], bin); !st) {
    std::cerr << st.error().to_string() << "\n";
    return 1;
  }
  if (auto st = gpuenv::write_file_atomic(argv[2], gpuenv::resolver::catalog_digest(files) + "\n"); !st) {
    std::cerr << st.error().to_string() << "\n";
    return 1;
  }
  return 0;
}
