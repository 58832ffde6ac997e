#pragma once
// The compatibility catalog a workflow resolves against: the one compiled into gpuenv, or a directory of YAML.
#include <string>

#include "base/error.hpp"
#include "resolver/catalog.hpp"

namespace gpuenv::app {

/// The catalog in use and the digest that locks record.
struct LoadedCatalog {
  resolver::Catalog catalog;
  std::string sha256;
  std::string origin;  ///< "embedded" or the directory
};

/// Loads the embedded catalog, or every *.yaml of DIR when it is not empty.
Result<LoadedCatalog> load_catalog_from(const std::string& dir);

}  // namespace gpuenv::app
