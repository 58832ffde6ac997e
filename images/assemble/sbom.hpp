#pragma once
// Internal to images/assemble: the image's SPDX 2.3 SBOM (written into the image and beside the layout).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "images/assemble/package_facts.hpp"
#include "resolver/lockfile.hpp"

namespace gpuenv::images::assembly {

/// A package a base image brings, from its dpkg status.
struct BasePackage {
  std::string name, version, architecture;
};

/// The installed packages of a dpkg status text (stanzas that do not parse are not listed).
std::vector<BasePackage> base_packages(std::string_view dpkg_status);

/// What the SBOM describes besides the lock.
struct SbomInputs {
  std::string lock_sha256;
  std::int64_t source_date_epoch = 0;
  std::string generator;            ///< "gpuenv 0.1.0"
  std::string distro;               ///< "debian", for the .debs' purls
  std::string base_digest;          ///< the base image's manifest digest; "" for none
  std::vector<BasePackage> base;    ///< what the base image's dpkg status lists
  PackageFacts facts;               ///< dependencies and wheels' licences, read from the finished tree
};

/// The SBOM text: the image, every locked package (with its purl, sha256 and, for a wheel that declares one, its
/// licence), a base image with the packages it holds that the lock does not replace, and DEPENDS_ON between
/// packages as the tree's facts say.
std::string sbom_json(const resolver::Lock& lock, const SbomInputs& inputs);

}  // namespace gpuenv::images::assembly
