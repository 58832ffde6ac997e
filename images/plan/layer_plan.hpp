#pragma once
// The image plan (pure: no filesystem, no network, no processes). images/assemble reads the lock and the
// finished root filesystem out into plain values; the plan decides from them, and the assembler carries the
// decisions out:
// - layer_plan (here): which path goes into which of gpuenv's layers, by the package that installed it;
// - gpu_rules: one source of CUDA libraries, no driver library in the image, the ld.so.conf.d entry for the
//   CUDA libraries of NVIDIA's wheels;
// - image_config: the reuse key, the config's environment, NVIDIA_* variables, labels and command.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "resolver/lockfile.hpp"

namespace gpuenv::images {

/// gpuenv's layers, bottom to top (a base image's own layers, when there is one, come below them all).
inline constexpr std::array<std::string_view, 6> k_layer_order = {"base", "cuda", "cudnn", "framework", "user", "metadata"};

/// A path not installed by a package of the lock (gpuenv's own files, the dpkg database, a base image's files).
inline constexpr int k_no_package = -1;

/// One path of the finished root filesystem, as the plan needs to know it.
struct RootEntry {
  enum class Kind { file, directory, symlink };
  std::string path;             ///< relative to the root, no leading '/'
  Kind kind = Kind::file;
  std::uint64_t size = 0;       ///< bytes of a regular file; 0 otherwise
  int package = k_no_package;   ///< index into the lock's packages of what installed it (the last one to write it)
};

/// What one package's files weigh in one layer.
struct PackageBytes {
  std::size_t package = 0;  ///< index into the lock's packages
  std::uint64_t bytes = 0;  ///< sum of its regular files' sizes (0 when it brings only directories there)
};

/// One of gpuenv's layers: the root entries it holds and the packages they come from.
struct LayerPlan {
  std::string name;                         ///< one of k_layer_order
  std::vector<std::size_t> entries;         ///< indices into the root entries, in their order (parents first)
  std::vector<std::string> packages;        ///< "name version" of the packages it holds, sorted
  std::vector<PackageBytes> package_bytes;  ///< by package index, ascending
};

/// The layer a package belongs to, by name: "cuda" (CUDA .debs and NVIDIA wheels), "cudnn", "framework"
/// (torch, tensorflow, jax, jaxlib and their plugins, and what they pull in), "user" (what the spec names)
/// and "base" (the rest of the .debs).
std::string layer_of(const resolver::LockedPackage& package, const resolver::Lock& lock);

/// Splits the root entries into layers: a path goes into its package's layer, a path no package installed
/// into "metadata"; a directory no package installed goes only where it is a parent of something, and a
/// directory appears in every layer that holds something beneath it. Returns the non-empty layers in
/// k_layer_order. Never fails; `package` indices must be valid for `lock`.
std::vector<LayerPlan> plan_layers(const std::vector<RootEntry>& root, const resolver::Lock& lock);

}  // namespace gpuenv::images
