#pragma once
// The set of binary packages `apt-get install --no-install-recommends` would install on an empty system.
//
// The walk follows apt's MarkInstall (apt 2.6, Debian 12) so that the answer matches apt's:
// - The requested packages (and, with required_set, every package whose candidate is `Essential: yes` or
//   `Priority: required`, in name order) are selected first; then the dependencies of each are resolved in that
//   order, depth first.
// - Only Pre-Depends and Depends are followed (Pre-Depends first, each field in written order); Recommends and
//   Suggests are not installed.
// - Every package is installed at its candidate version, or at the version a request names ("name=version").
//   The candidate is PackageIndex::candidate(): apt's policy for an empty system, the version with the highest
//   pin priority above 0 (500 by default, 1 from NotAutomatic and 100 from ButAutomaticUpgrades repositories,
//   or what apt preferences give; see apt_preferences.hpp), the highest version among equal priorities. As
//   with apt, a dependency whose version constraint the candidate does not meet is NOT satisfied by an older or
//   other version in the index: it fails.
// - A dependency group already satisfied by a selected package (through any alternative, real or provided) is
//   left alone. Otherwise the possible solutions are listed alternative by alternative; within one alternative
//   the real package of that name comes first, then the providers in apt's CompareProviders order (Essential
//   first, then the more important Priority: required < important < standard < optional < extra; apt's last
//   tie-break is its internal package id, which is replaced here by the package name, ascending). The first
//   solution that can be installed wins.
// - A solution can be installed when every one of its own Pre-Depends/Depends groups is satisfied by a selected
//   package or by some candidate (apt's one-level look-ahead), when its own dependencies can be installed in
//   turn, and when it neither conflicts with nor breaks a selected package nor is conflicted or broken by one.
//   That last condition differs from apt, which would instead unselect the earlier package and leave its
//   problem resolver to repair the result; gpuenv never produces such a repair and reports it instead.
// - A dependency on `name:any` is satisfied by a package of that name with `Multi-Arch: allowed` or by a
//   provider; `name:native` and `name:<arch>` by a package of that architecture ("all" counts as native).
// - A request naming a virtual package is resolved to its provider when there is exactly one, as apt does.
#include <string>
#include <vector>

#include "packages/apt/package_index.hpp"
#include "base/error.hpp"

namespace gpuenv::packages {

/// What to install.
struct ClosureRequest {
  std::vector<std::string> packages;  ///< "name" or "name=version"
  bool required_set = true;  ///< add every package with Essential: yes or Priority: required, as a minimal root needs
  std::string native_arch = "amd64";
  /// What is already installed (a base image's dpkg status as a PackageIndex, see installed_packages_text):
  /// a dependency an installed package satisfies pulls in nothing, and a request or required package that is
  /// installed is left as it is (its installed version stays). Conflicts with installed packages are not checked.
  const PackageIndex* installed = nullptr;
  /// Packages that are never installed as a dependency (a slim base's maintainer-script tools, which gpuenv
  /// never runs): a dependency group one of whose alternatives names one of them (or a virtual package its
  /// candidate provides, at a version that meets it) counts as met and pulls in nothing, with a line in
  /// `decisions` naming the package that asked. A request naming one still installs it.
  std::vector<std::string> left_out;
};

/// The stanzas of a dpkg status file (/var/lib/dpkg/status) whose Status is "install ok installed", as text that
/// PackageIndex::add() reads.
std::string installed_packages_text(std::string_view dpkg_status);

/// The packages to install and why each choice among alternatives or providers was made.
struct ClosureResult {
  std::vector<const BinaryPackage*> packages;  ///< sorted by name
  std::vector<std::string> decisions;          ///< one line per choice among alternatives or providers
};

/// Computes what `apt-get install --no-install-recommends` would install on an empty system (rules above).
/// Fails with ErrorKind::unsatisfiable: `apt.unknown_package` for a request naming nothing in the index or an
/// absent version, `apt.no_candidate` for a request naming a package whose every version is pinned at 0 or
/// below, `apt.virtual_package` for a request naming a virtual package with several providers,
/// `apt.unsatisfiable` for a dependency nothing satisfies (naming the chain of packages that led to it) and
/// `apt.conflict` when selected packages conflict or break each other (naming both and the relation); with
/// ErrorKind::environment and `apt.relation_syntax` when a needed relation field is malformed.
Result<ClosureResult> dependency_closure(const PackageIndex& index, const ClosureRequest& request);

}  // namespace gpuenv::packages
