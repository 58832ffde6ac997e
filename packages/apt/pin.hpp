#pragma once
// Pinning the Debian packages of an image: open the repositories once (fetch and verify every repository's
// indexes, read the preferences, build one index: an AptUniverse), then answer each closure query of a lock from
// it: what apt would install for the requested packages (plus the required set of a minimal root), each package
// with the URL, size and sha256 the verified indexes give for it.
#include <functional>
#include <memory>
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

/// The repositories of a lock and how apt weighs them.
struct AptUniverseRequest {
  std::vector<AptSource> sources;       ///< only is_used() entries are fetched
  std::string codename;                 ///< the base's release ("bookworm"): suites must belong to it
  /// apt preferences (apt_preferences(5)) in the order apt reads them (preferences, then preferences.d/* by
  /// name), concatenated with a blank line between files; empty for none.
  std::string preferences_text;
  /// Where preferences_text came from, for error messages ("/etc/apt/preferences").
  std::string preferences_origin = "preferences";
};

/// Every repository of a lock, fetched and verified once, as one index with the preferences applied: each closure
/// query of the lock (the image's packages, a VM driver's module source, its build's packages) is answered from
/// it, so that a lock reads each InRelease and Packages file once and runs gpgv once per repository.
class AptUniverse {
 public:
  const PackageIndex& index() const { return *m_index; }
  /// What was used, with its signer ("URI suite signed by FINGERPRINT").
  const std::vector<std::string>& repositories() const { return m_repositories; }
  /// The architecture apt calls native (the first of AptFetchContext::architectures).
  const std::string& native_arch() const { return m_native_arch; }
  /// The architectures packages were read for: AptFetchContext::architectures and "all".
  const std::vector<std::string>& architectures() const { return m_architectures; }

 private:
  friend Result<AptUniverse> open_apt_universe(const AptUniverseRequest& request, AptFetchContext& ctx);
  std::unique_ptr<PackageIndex> m_index = std::make_unique<PackageIndex>();  // a stable address for the views into it
  std::vector<std::string> m_repositories;
  std::string m_native_arch;
  std::vector<std::string> m_architectures;
};

/// Reads the preferences (before anything is fetched, so that a mistake in them costs no download), then fetches
/// and verifies every used source that belongs to the codename. Errors: "apt.no_sources" when no source serves the
/// base's release, "apt.preferences_*" from parse_apt_preferences, and everything fetch_repository reports.
Result<AptUniverse> open_apt_universe(const AptUniverseRequest& request, AptFetchContext& ctx);

/// One closure query of a lock.
struct AptPinRequest {
  std::vector<std::string> packages;    ///< "name" or "name=version"
  bool required_set = true;
  std::vector<std::string> left_out;    ///< never installed as a dependency (ClosureRequest::left_out)
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
};

/// Resolves REQUEST in UNIVERSE, with each version at apt's pin priority (its repository's Release flags and the
/// universe's preferences); fetches nothing. Errors: "apt.not_found" (a package of `alone` the repositories lack),
/// and everything dependency_closure reports.
Result<AptPinResult> pin_apt(const AptUniverse& universe, const AptPinRequest& request);

}  // namespace gpuenv::packages
