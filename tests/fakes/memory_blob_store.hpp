#pragma once
// A test double of the BlobStore port that keeps blobs in memory. Callers of the port read blobs by path, so a
// blob is written out to a scratch directory when it is found, and files handed to adopt() are read in and
// removed. It checks sha256 like the directory store and counts what it was asked.
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "base/cache/blob_store.hpp"
#include "base/digest.hpp"

namespace gpuenv::testing {

class MemoryBlobStore final : public gpuenv::BlobStore {
 public:
  /// SCRATCH: where found blobs are written out and temporary paths are handed out (made if missing).
  explicit MemoryBlobStore(std::filesystem::path scratch) : m_scratch(std::move(scratch)) { std::filesystem::create_directories(m_scratch); }

  std::map<std::string, std::string> blobs;  ///< sha256 hex -> bytes
  int finds = 0, adopts = 0, puts = 0;

  Result<std::optional<std::string>> find(const Digest& sha256) override {
    ++finds;
    if (sha256.empty()) return make_error(ErrorKind::internal, "cache.bad_digest", "a blob was asked for without a sha256", "", "");
    auto it = blobs.find(sha256.hex());
    if (it == blobs.end()) return std::optional<std::string>{};
    const std::filesystem::path out = m_scratch / ("found-" + it->first);
    if (!std::filesystem::exists(out)) std::ofstream(out, std::ios::binary) << it->second;
    return std::optional<std::string>(out.string());
  }
  Result<std::string> temp_path() override { return (m_scratch / ("tmp-" + std::to_string(m_next++))).string(); }
  Result<std::string> adopt(const std::string& file, const Digest& sha256, bool /*already_verified*/) override {
    ++adopts;
    std::ifstream in(file, std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    std::filesystem::remove(file);
    if (Digest::of(bytes.str()) != sha256) {
      return make_error(ErrorKind::environment, "cache.hash_mismatch", "the file does not have the sha256 it was stored under", file, "");
    }
    blobs[sha256.hex()] = bytes.str();
    return *find(sha256).value();
  }
  Result<Digest> put(std::string_view bytes) override {
    ++puts;
    const Digest sha = Digest::of(bytes);
    blobs[sha.hex()] = std::string(bytes);
    return sha;
  }
  Result<std::vector<BlobInfo>> list() override {
    std::vector<BlobInfo> out;
    for (const auto& [sha, bytes] : blobs) out.push_back({*Digest::from_hex(sha), bytes.size(), {}});
    return out;
  }
  Result<std::uint64_t> prune(std::chrono::system_clock::time_point) override {
    std::uint64_t freed = 0;
    for (const auto& [sha, bytes] : blobs) freed += bytes.size();
    blobs.clear();
    return freed;
  }

 private:
  std::filesystem::path m_scratch;
  int m_next = 0;
};

/// A BlobStore that forwards to one the test keeps, so that it outlives the workflow that opened it.
class BorrowedBlobStore final : public gpuenv::BlobStore {
 public:
  explicit BorrowedBlobStore(gpuenv::BlobStore& inner) : m_inner(inner) {}
  Result<std::optional<std::string>> find(const Digest& sha256) override { return m_inner.find(sha256); }
  Result<std::string> temp_path() override { return m_inner.temp_path(); }
  Result<std::string> adopt(const std::string& file, const Digest& sha256, bool already_verified) override {
    return m_inner.adopt(file, sha256, already_verified);
  }
  Result<Digest> put(std::string_view bytes) override { return m_inner.put(bytes); }
  Result<std::vector<BlobInfo>> list() override { return m_inner.list(); }
  Result<std::uint64_t> prune(std::chrono::system_clock::time_point cutoff) override { return m_inner.prune(cutoff); }

 private:
  gpuenv::BlobStore& m_inner;
};

}  // namespace gpuenv::testing
