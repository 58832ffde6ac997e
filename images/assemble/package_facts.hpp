#pragma once
// Internal to images/assemble: what the finished tree says of its packages beyond the lock, for the SBOM
// (sbom.hpp): which installed package depends on which (dpkg's status: Depends and Pre-Depends; a wheel's installed
// METADATA: Requires-Dist whose marker holds for the image's Python and platform, extras not counted), and the
// licence a wheel declares as an SPDX expression (core metadata 2.4's License-Expression, PEP 639). Debian states
// licences in copyright files whose names are not SPDX's; none is guessed.
#include <map>
#include <set>
#include <string>
#include <utility>

#include "resolver/platform.hpp"

namespace gpuenv::images::assembly {

struct PackageFacts {
  std::set<std::pair<std::string, std::string>> deb_depends;    ///< (package, a package it needs), both installed
  std::set<std::pair<std::string, std::string>> wheel_depends;  ///< canonical names, both installed
  std::map<std::string, std::string> wheel_licences;            ///< canonical name -> SPDX expression
};

/// Read beneath ROOT (never following a link out of it): /var/lib/dpkg/status, and each wheel's METADATA
/// (WHEEL_METADATA: canonical name -> its path relative to ROOT). A file that cannot be read or parsed adds nothing.
PackageFacts read_package_facts(const std::string& root, const std::map<std::string, std::string>& wheel_metadata, const resolver::Platform& platform,
                                const std::string& python);

}  // namespace gpuenv::images::assembly
