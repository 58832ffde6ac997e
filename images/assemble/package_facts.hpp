#pragma once
// Internal to images/assemble: what the finished tree says of its packages beyond the lock, for the SBOM
// (sbom.hpp): which installed package depends on which (dpkg's status: Depends and Pre-Depends; a wheel's installed
// METADATA: Requires-Dist whose marker holds for the image's Python and platform, extras not counted), and the
// licence a package declares as an SPDX expression: a wheel's core metadata 2.4 License-Expression (PEP 639), a .deb's
// machine-readable copyright file (Debian's copyright format 1.0, "DEP-5") when every licence it names is a short
// name of that format's table with an SPDX identifier, or an SPDX identifier itself. Nothing is guessed: a package
// with a licence outside the table (public-domain, an exception, an unversioned GPL) declares none here.
#include <map>
#include <string_view>
#include <set>
#include <string>
#include <utility>

#include "resolver/platform.hpp"

namespace gpuenv::images::assembly {

struct PackageFacts {
  std::set<std::pair<std::string, std::string>> deb_depends;    ///< (package, a package it needs), both installed
  std::set<std::pair<std::string, std::string>> wheel_depends;  ///< canonical names, both installed
  std::map<std::string, std::string> wheel_licences;            ///< canonical name -> SPDX expression
  std::map<std::string, std::string> deb_licences;              ///< package -> SPDX expression
};

/// The SPDX expression of a machine-readable Debian copyright file (TEXT): the licences of its header and Files
/// paragraphs joined by AND (each once, sorted); "" when it is not in that format or names a licence this cannot map.
std::string dep5_licence(std::string_view text);

/// Read beneath ROOT (never following a link out of it): /var/lib/dpkg/status, each installed package's
/// /usr/share/doc/<package>/copyright, and each wheel's METADATA
/// (WHEEL_METADATA: canonical name -> its path relative to ROOT). A file that cannot be read or parsed adds nothing.
PackageFacts read_package_facts(const std::string& root, const std::map<std::string, std::string>& wheel_metadata, const resolver::Platform& platform,
                                const std::string& python);

}  // namespace gpuenv::images::assembly
