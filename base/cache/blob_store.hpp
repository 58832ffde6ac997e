#pragma once
// The content-addressed cache: blobs named by their sha256, written atomically, safe with several gpuenv
// processes at once.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/digest.hpp"
#include "base/error.hpp"

namespace gpuenv {

struct BlobInfo {
  Digest sha256;
  std::uint64_t bytes = 0;
  std::chrono::system_clock::time_point last_used;  ///< modification time, refreshed on use
};

/// Port for the cache. "Not cached" is std::nullopt, never an error; errors are I/O failures.
class BlobStore {
 public:
  virtual ~BlobStore() = default;
  /// Path of a cached blob, or std::nullopt when it is not cached. Marks the blob as used.
  virtual Result<std::optional<std::string>> find(const Digest& sha256) = 0;
  /// A fresh path in the store's own file system for a caller to write a candidate blob into.
  virtual Result<std::string> temp_path() = 0;
  /// Moves a finished file into the store after checking its sha256; on mismatch the file is deleted and
  /// the error is "cache.hash_mismatch". `already_verified` skips the re-read when the caller hashed the
  /// bytes as it wrote them (the Fetcher does). Returns the blob's path.
  virtual Result<std::string> adopt(const std::string& file, const Digest& sha256, bool already_verified = false) = 0;
  /// Stores bytes (small documents) and returns their sha256.
  virtual Result<Digest> put(std::string_view bytes) = 0;
  virtual Result<std::vector<BlobInfo>> list() = 0;
  /// Removes blobs last used before `cutoff` (all, with the maximum time point); returns bytes freed.
  virtual Result<std::uint64_t> prune(std::chrono::system_clock::time_point cutoff) = 0;
};

/// A directory store: ROOT/blobs/sha256/ab/abcdef..., temporary files in ROOT/tmp, writes by fsync and
/// rename, and ROOT/lock (flock: shared while writing, exclusive while pruning).
std::unique_ptr<BlobStore> make_dir_blob_store(std::string root);

/// The default cache root: $GPUENV_CACHE_DIR, else $XDG_CACHE_HOME/gpuenv, else $HOME/.cache/gpuenv. The
/// caller passes the variables in (only cli/ reads the environment).
std::string default_cache_root(const std::string& gpuenv_cache_dir, const std::string& xdg_cache_home, const std::string& home);

/// The sha256 of a file's bytes.
Result<Digest> sha256_of_file(const std::string& path);

}  // namespace gpuenv
