#pragma once
// Unpacked trees kept once per input: installed packages (for builds) and image layers (for `run`), as containerd keeps one snapshot per
// layer. A package (its sha256 and what its installation depends on: the install format, the wheel's scheme
// and REQUESTED choice) is unpacked once into its own tree under the store; every build then assembles its
// root by hard-linking those trees in lock order, so an unchanged package is never unpacked again.
//
// Linking reproduces unpacking over the root: a later package's file replaces an earlier one; a directory
// that exists (or a symlink to a directory beneath the root) is entered; symlinks on the way are followed
// only while they stay beneath the root; a non-directory never replaces a directory. A store tree is
// committed by renaming a complete staged directory (its record written first), so a killed build leaves
// no half tree; two builds filling one tree keep the first. Nothing writes into a linked file afterwards:
// every later writer of the root (the dpkg database, the loader cache, gpuenv's files) replaces files
// through a new inode, so the store stays as it was unpacked. `gpuenv run` keeps image layers the same way (one
// tree per layer digest, whiteout markers kept as files and applied when linking), so images that share their
// big layers share their unpacked files.
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/error.hpp"
#include "images/rootfs/deb_rootfs.hpp"

namespace gpuenv::images {

/// Bumped whenever install_deb, install_wheel or keep_in_minimal_image change what they write for the same
/// package, so that trees unpacked by an older gpuenv are never taken for new ones.
inline constexpr const char* k_package_tree_format = "gpuenv-package-tree-v1";

/// What one package's installation recorded, as the build needs it again.
struct TreeRecord {
  InstalledDeb deb;                 ///< a .deb's control, md5sums, conffiles and entries
  std::vector<std::string> files;   ///< a wheel's installed files, relative to the root
  std::uint64_t regular_files = 0;  ///< what the tree held when it was committed: linking checks it still does
  std::uint64_t regular_bytes = 0;
};

/// One package's tree in the store.
struct PackageTree {
  std::string key;   ///< hex sha256 of the tree's inputs
  std::string root;  ///< the installed files
  TreeRecord record;
};

/// Regular files linked into a root: (device, inode) -> "<tree key>/<path in the tree>", the file's content
/// identity (a file whose inode is not listed was written after linking, or not from the store).
using LinkedFiles = std::map<std::pair<dev_t, ino_t>, std::string>;

class PackageTreeStore {
 public:
  /// `store_dir`: the trees (created when missing); `staging_dir`: where new trees are unpacked first, on the
  /// same file system (the build's locked work directory).
  PackageTreeStore(std::string store_dir, std::string staging_dir) : m_dir(std::move(store_dir)), m_staging(std::move(staging_dir)) {}

  /// The tree for `inputs` (everything its content depends on; hashed into its key): taken from the store, or
  /// made by `install(root)` into a fresh directory and committed. Errors: install's, `build.io`.
  Result<PackageTree> get(const std::string& inputs, const std::function<Result<TreeRecord>(const std::string& root)>& install);

 private:
  std::string m_dir;
  std::string m_staging;
};

/// Hard-links `tree` into `root` (the rules above), adding every linked regular file to `linked`. `origin`
/// names the package in errors. Errors: `build.conflict` (a directory stands where a file goes),
/// `archive.unsafe` (a symlink leading out of the root), `build.bad_tree` (the tree no longer holds the files
/// and bytes it was committed with: someone changed the cache), `build.io`.
/// With `whiteouts` (the tree is an image layer): `.wh.NAME` removes NAME from what the layers below put in
/// the root, `.wh..wh..opq` empties its directory of them, and the markers themselves are not linked.
Status link_tree(const PackageTree& tree, const std::string& root, const std::string& origin, LinkedFiles& linked, bool whiteouts = false);

/// The record as stored (JSON) and read back. Errors: `build.bad_tree` for a record that is not one.
std::string render_tree_record(const TreeRecord& record);
Result<TreeRecord> parse_tree_record(const std::string& text, const std::string& where);

}  // namespace gpuenv::images
