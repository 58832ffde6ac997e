#pragma once
// Pinning the Debian packages of an image: fetch and verify every repository's indexes, compute what apt
// would install for the requested packages (plus the required set of a minimal root), and return each
// package with the URL, size and sha256 the verified indexes give for it.
#include <functional>
#include <string>
#include <vector>

#include "packages/apt/apt_sources.hpp"
#include "packages/apt/package_index.hpp"
#include "packages/apt/repository.hpp"
#include "resolver/lockfile.hpp"

namespace gpuenv::packages {

/// One pinned artifact of a lock (a .deb here; wheels share the shape): the lock's own record. Its source is
/// the repository ("URI suite component") or index it came from.
using PinnedPackage = resolver::LockedPackage;
using resolver::PackageKind;

struct AptPinRequest {
  std::vector<AptSource> sources;       ///< only is_used() entries are fetched
  std::string codename;                 ///< the base's release ("bookworm"): suites must belong to it
  std::vector<std::string> packages;    ///< "name" or "name=version"
  bool required_set = true;
  std::vector<std::string> left_out;    ///< never installed as a dependency (ClosureRequest::left_out)
  /// apt preferences (apt_preferences(5)) in the order apt reads them (preferences, then preferences.d/* by
  /// name), concatenated with a blank line between files; empty for none.
  std::string preferences_text;
  /// Where preferences_text came from, for error messages ("/etc/apt/preferences").
  std::string preferences_origin = "preferences";
  /// A base image's dpkg status (/var/lib/dpkg/status): what it has installed satisfies dependencies and is
  /// not pinned again (closure.hpp). Empty for a root built from packages alone.
  std::string installed_status;
  /// Called once every index is read, before the closure: more packages ("name" or "name=version") chosen by
  /// what the repositories hold (the CUDA packages of images/cuda_content.hpp), with lines for `decisions`.
  std::function<std::vector<std::string>(const PackageIndex&, std::vector<std::string>& decisions)> more_packages;
  /// Pinned alone ("name" or "name=version"), their dependencies not followed: a VM driver's module source, which
  /// only the build's sandbox unpacks. Returned in AptPinResult::alone, in this order.
  std::vector<std::string> alone;
};

struct AptPinResult {
  std::vector<PinnedPackage> packages;  ///< sorted by name
  std::vector<PinnedPackage> alone;     ///< AptPinRequest::alone, at apt's candidate (or the version named)
  std::vector<std::string> decisions;   ///< why alternatives were chosen
  std::vector<std::string> repositories;///< what was used, with signer
};

/// Fetches, verifies and resolves, with each version at apt's pin priority (its repository's Release flags and
/// the request's preferences). Errors: "apt.no_sources" when no source serves the base's release,
/// "apt.preferences_*" from parse_apt_preferences, "apt.not_found" (a package of `alone` the repositories lack), and
/// everything fetch_repository and dependency_closure report.
Result<AptPinResult> pin_apt(const AptPinRequest& request, AptFetchContext& ctx);

}  // namespace gpuenv::packages
