#pragma once
// Internal to images/assemble: the root filesystem as the assembler sees it on disk (the walk that reads it out,
// who installed each path), and the small file helpers the steps share.
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/error.hpp"
#include "images/oci/tar_writer.hpp"
#include "images/plan/layer_plan.hpp"

namespace gpuenv::images::assembly {

/// A `build.*` error of the environment.
Error build_error(const std::string& id, const std::string& what, const std::string& where, const std::string& hint);

/// The `build.io` errors of the image's tree and layers (io_error).
inline constexpr IoArea k_build_io{"build.io", "check free disk space and permissions"};

/// What installed a path, and the owner and mode a .deb (or a base image's layer) recorded for it.
struct Owner {
  int package = k_no_package;  ///< index into the lock's packages
  bool recorded = false;
  std::uint32_t mode = 0, uid = 0, gid = 0;
};

/// Path (relative to the root) -> its owner.
using Owners = std::unordered_map<std::string, Owner>;

/// One path of the tree on disk.
struct Node {
  std::string path;  ///< relative, no leading '/'
  TarEntry::Type type = TarEntry::Type::file;
  std::uint32_t st_mode = 0;
  std::uint64_t size = 0;
  dev_t dev = 0;
  ino_t ino = 0;
  nlink_t nlink = 1;
  std::int64_t ctime_ns = 0;
  std::string link;
};

/// Every path under `root`, sorted by name, parents before children. Device nodes, FIFOs and sockets are
/// refused (`build.special_file`) unless `skip_special` (a base image's, which stay in its own layers).
Result<std::vector<Node>> walk_tree(const std::string& root, bool skip_special);

/// The nodes as the plan sees them, with the package that installed each.
std::vector<RootEntry> root_entries(const std::vector<Node>& nodes, const Owners& owners);

/// A read-only mapping of a cached blob (wheels run to hundreds of megabytes).
class Mapped {
 public:
  /// Errors: `build.io`.
  static Result<Mapped> open(const std::string& path);
  Mapped() = default;
  Mapped(Mapped&& o) noexcept;
  Mapped& operator=(Mapped&&) = delete;
  Mapped(const Mapped&) = delete;
  ~Mapped();
  [[nodiscard]] std::string_view bytes() const { return {m_data ? m_data : "", m_size}; }

 private:
  const char* m_data = nullptr;
  std::size_t m_size = 0;
};

/// Writes `bytes` to `path` (parents created) through a temporary file, fsynced and renamed. Errors: `build.io`.
Status write_file(const std::string& path, const std::string& bytes);

}  // namespace gpuenv::images::assembly
