#include "images/assemble/layer_writer.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/digest.hpp"
#include "base/unique_fd.hpp"
#include "images/oci/parallel_gzip.hpp"
#include "images/oci/parallel_zstd.hpp"

namespace gpuenv::images::assembly {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

/// gzip or zstd, as the layer's compression says, over one sink.
class LayerCompressor {
 public:
  LayerCompressor(const LayerCompression& c, std::uint64_t content_size, const ByteSink& sink) {
    if (c.zstd) m_zstd.emplace(sink, zstd_options(c, content_size));
    else m_gzip.emplace(sink, gzip_options(c));
  }
  Status write(const char* d, std::size_t n) { return m_zstd ? m_zstd->write(d, n) : m_gzip->write(d, n); }
  Status finish() {
    if (m_zstd) {
      if (auto f = m_zstd->finish(); !f) return std::move(f).error();
    } else {
      if (auto f = m_gzip->finish(); !f) return std::move(f).error();
    }
    return ok_status();
  }
  static GzipOptions gzip_options(const LayerCompression& c) {
    GzipOptions go;
    go.level = c.gzip_level;
    go.threads = c.threads;
    return go;
  }
  static ZstdOptions zstd_options(const LayerCompression& c, std::uint64_t content_size) {
    ZstdOptions zo;
    zo.level = c.zstd_level;
    zo.threads = c.threads;
    zo.content_size = content_size;
    return zo;
  }

 private:
  std::optional<ParallelGzip> m_gzip;
  std::optional<ParallelZstd> m_zstd;
};

/// The uncompressed tar's digest, size and entry count.
struct TarSummary {
  std::string diff_id;
  std::uint64_t size = 0;
  std::uint64_t entries = 0;
};

/// The memo file of a layer's input key and its compressor; "" when the memo is off.
std::string key_memo_path(const LayerCompression& c, const std::string& key) {
  if (c.memo_dir.empty() || key.empty()) return {};
  return c.memo_dir + "/key-" + key + "-" + sha256_hex(compressor_identity(c)).substr(0, 16);
}

Error discard(const std::string& tmp, Error e) {
  ::unlink(tmp.c_str());
  return e;
}

/// Tar, compression and both digests in one pass into a temporary blob, adopted into the layout. `tar.size`
/// is the tar's length from its entries (zstd states it in its frame); the digest and entries are filled in.
Result<Descriptor> compress_layer(OciLayout& layout, const LayerStream& stream, const std::string& name, const LayerCompression& c, TarSummary& tar,
                                  const std::string& root) {
  const std::string tmp = layout.temp_path("layer-" + name);
  UniqueFd out(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (out.get() < 0) return io_error(k_build_io, "cannot create", tmp);
  Sha256 digest;
  std::uint64_t zsize = 0;
  LayerCompressor compressor(c, tar.size, [&](const char* d, std::size_t n) -> Status {
    digest.update(d, n);
    zsize += n;
    for (std::size_t done = 0; done < n;) {
      const ssize_t w = ::write(out.get(), d + done, n - done);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return io_error(k_build_io, "cannot write a layer", tmp);
      done += static_cast<std::size_t>(w);
    }
    return ok_status();
  });
  Sha256 check;
  std::uint64_t raw = 0;
  auto again = stream.write([&](const char* d, std::size_t n) {
    check.update(d, n);
    raw += n;
    return compressor.write(d, n);
  });
  if (!again) return discard(tmp, std::move(again).error());
  if (auto fin = compressor.finish(); !fin) return discard(tmp, std::move(fin).error());
  const std::string diff_id = "sha256:" + check.finish();
  if (raw != tar.size)
    return discard(tmp, build_error("build.unstable_tree", "layer " + name + " changed while it was read", root,
                                    "make sure nothing else writes into the build directory"));
  tar.diff_id = diff_id;
  tar.entries = *again;
  if (::fsync(out.get()) != 0) return discard(tmp, io_error(k_build_io, "cannot write a layer", tmp));
  return layout.adopt_file(tmp, digest.finish_digest(), zsize, c.zstd ? media_type::k_layer_zstd : media_type::k_layer_gzip);
}

/// Docker's layer types hold the same bytes as OCI's.
std::string oci_layer_type(std::string type) {
  if (type == "application/vnd.docker.image.rootfs.diff.tar.gzip") return media_type::k_layer_gzip;
  if (type == "application/vnd.docker.image.rootfs.diff.tar") return "application/vnd.oci.image.layer.v1.tar";
  return type;
}

/// Copies one base blob into the layout unless it is there already.
Status copy_base_blob(OciLayout& layout, const std::string& base_layout_dir, const Descriptor& blob) {
  if (layout.has_blob(blob.digest)) return ok_status();
  const std::string tmp = layout.temp_path("base-layer");
  std::error_code cec;
  fs::copy_file(base_layout_dir + "/blobs/sha256/" + blob.digest.hex(), tmp, fs::copy_options::overwrite_existing, cec);
  UniqueFd fd(::open(tmp.c_str(), O_RDONLY | O_CLOEXEC));
  if (cec || fd.get() < 0 || ::fsync(fd.get()) != 0) {
    ::unlink(tmp.c_str());
    return io_error(k_build_io, "cannot copy a base layer", tmp);
  }
  if (auto d = layout.adopt_file(tmp, blob.digest, blob.size, blob.media_type); !d) return std::move(d).error();
  return ok_status();
}

}  // namespace

std::string compressor_identity(const LayerCompression& c) {
  return c.zstd ? zstd_implementation(LayerCompressor::zstd_options(c, 0)) : "gzip " + std::to_string(c.gzip_level) + " " + deflate_implementation();
}

TarEntry LayerStream::entry_of(const Node& n) const {
  TarEntry e;
  e.path = n.path;
  e.type = n.type;
  auto it = m_owners.find(n.path);
  if (it != m_owners.end() && it->second.recorded) {
    e.mode = it->second.mode & 07777;
    e.uid = it->second.uid;
    e.gid = it->second.gid;
  } else {
    e.mode = n.type == TarEntry::Type::directory ? 0755 : n.type == TarEntry::Type::symlink ? 0777 : ((n.st_mode & 0111) ? 0755 : 0644);
  }
  if (n.type == TarEntry::Type::symlink) e.link_target = n.link;
  return e;
}

Status LayerStream::copy_data(TarWriter& tar, const Node& n, std::vector<char>& buf) const {
  UniqueFd fd(::open((m_root + "/" + n.path).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (fd.get() < 0) return io_error(k_build_io, "cannot read", n.path);
  std::uint64_t left = n.size;
  while (left > 0) {
    const ssize_t r = ::read(fd.get(), buf.data(), std::min<std::uint64_t>(left, buf.size()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return io_error(k_build_io, "file changed while it was being packed", n.path);
    if (auto st = tar.write_data(buf.data(), static_cast<std::size_t>(r)); !st) return std::move(st).error();
    left -= static_cast<std::uint64_t>(r);
  }
  return ok_status();
}

std::vector<TarEntry> LayerStream::entries() const {
  std::vector<TarEntry> out;
  std::map<std::pair<dev_t, ino_t>, std::string> first_path;
  for (const Node* n : m_nodes) {
    TarEntry e = entry_of(*n);
    if (n->type == TarEntry::Type::file && n->nlink > 1) {
      auto [at, inserted] = first_path.try_emplace({n->dev, n->ino}, n->path);
      if (!inserted) {
        e.type = TarEntry::Type::hardlink;
        e.link_target = at->second;
      }
    }
    if (e.type == TarEntry::Type::file) e.size = n->size;
    out.push_back(std::move(e));
  }
  return out;
}

Result<std::uint64_t> LayerStream::emit(const ByteSink& sink, bool with_data, std::uint64_t* length) const {
  TarWriter tar(sink, m_mtime);
  std::vector<char> buf(with_data ? std::size_t{1} << 20 : 0);
  const std::vector<TarEntry> all = entries();
  for (std::size_t i = 0; i < all.size(); ++i) {
    const TarEntry& e = all[i];
    if (auto st = tar.add(e); !st) return std::move(st).error();
    if (e.type != TarEntry::Type::file) continue;
    if (auto st = with_data ? copy_data(tar, *m_nodes[i], buf) : tar.skip_data(e.size); !st) return std::move(st).error();
  }
  if (auto st = tar.finish(); !st) return std::move(st).error();
  if (length) *length = tar.bytes_written();  // skipped content counts
  return static_cast<std::uint64_t>(all.size());
}

Result<std::uint64_t> LayerStream::size() const {
  std::uint64_t length = 0;
  auto n = emit([](const char*, std::size_t) { return ok_status(); }, false, &length);
  if (!n) return std::move(n).error();
  return length;
}

namespace {

/// A field of the key: its length, then its bytes (no two different entries hash alike).
void key_field(Sha256& h, std::string_view v) {
  const std::string len = std::to_string(v.size()) + ":";
  h.update(len.data(), len.size());
  h.update(v.data(), v.size());
}

Result<std::string> file_sha256(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (fd.get() < 0) return io_error(k_build_io, "cannot read", path);
  Sha256 h;
  std::vector<char> buf(1 << 16);
  while (true) {
    const ssize_t r = ::read(fd.get(), buf.data(), buf.size());
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return io_error(k_build_io, "cannot read", path);
    if (r == 0) break;
    h.update(buf.data(), static_cast<std::size_t>(r));
  }
  return "sha256:" + h.finish();
}

}  // namespace

Result<std::string> LayerStream::key(const ContentId& content_id) const {
  Sha256 h;
  key_field(h, "gpuenv-layer-key-v1");
  key_field(h, std::to_string(m_mtime));
  const std::vector<TarEntry> all = entries();
  for (std::size_t i = 0; i < all.size(); ++i) {
    const TarEntry& e = all[i];
    key_field(h, e.path);
    key_field(h, std::to_string(static_cast<int>(e.type)) + " " + std::to_string(e.mode) + " " + std::to_string(e.uid) + " " + std::to_string(e.gid) + " " +
                     std::to_string(e.size));
    key_field(h, e.link_target);
    if (e.type != TarEntry::Type::file) continue;
    std::string id = content_id ? content_id(*m_nodes[i]) : std::string();
    if (id.empty()) {
      auto sum = file_sha256(m_root + "/" + m_nodes[i]->path);
      if (!sum) return std::move(sum).error();
      id = *sum;
    }
    key_field(h, id);
  }
  return h.finish();
}

Digest LayerStream::files_digest() const {
  Sha256 h;
  key_field(h, "gpuenv-layer-files-v1");
  for (const TarEntry& e : entries()) {
    key_field(h, e.path);
    key_field(h, std::to_string(static_cast<int>(e.type)) + " " + std::to_string(e.mode) + " " + std::to_string(e.uid) + " " + std::to_string(e.gid) + " " +
                     std::to_string(e.size));
    key_field(h, e.link_target);
  }
  return h.finish_digest();
}

namespace {

/// Where the cache keeps a layer blob it wrote, linked from the layouts that hold it (so that a layout's
/// garbage collection never loses a layer another build can take again); "" when the memo is off.
std::string kept_blob_path(const LayerCompression& c, const Digest& d) { return c.memo_dir.empty() ? "" : c.memo_dir + "/blobs/" + d.hex(); }

/// Keeps a blob just written to the layout in the cache too (a hard link; nothing when the file systems differ).
void keep_blob(OciLayout& layout, const LayerCompression& c, const Digest& d) {
  const std::string kept = kept_blob_path(c, d);
  if (kept.empty()) return;
  std::error_code ec;
  fs::create_directories(c.memo_dir + "/blobs", ec);
  (void)::link(layout.blob_path(d).c_str(), kept.c_str());
}

/// Brings a kept blob of `size` bytes into the layout (a hard link, else a copy); false when there is none.
bool restore_blob(OciLayout& layout, const LayerCompression& c, const Descriptor& blob) {
  const std::string kept = kept_blob_path(c, blob.digest);
  struct stat st {};
  if (kept.empty() || ::stat(kept.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || static_cast<std::uint64_t>(st.st_size) != blob.size) return false;
  const std::string tmp = layout.temp_path("kept-layer");
  std::error_code ec;
  if (::link(kept.c_str(), tmp.c_str()) != 0 && !fs::copy_file(kept, tmp, fs::copy_options::overwrite_existing, ec)) return false;
  if (layout.adopt_file(tmp, blob.digest, blob.size, blob.media_type)) return true;
  ::unlink(tmp.c_str());
  return false;
}

/// A layer whose input key was written before, when its blob is in the layout or kept in the cache.
std::optional<BuiltLayer> remembered_layer(OciLayout& layout, const LayerCompression& c, const std::string& memo, const std::string& name,
                                           const char* media_type) {
  if (memo.empty()) return std::nullopt;
  std::ifstream in(memo);
  std::string diff_id, blob;
  BuiltLayer bl;
  if (!(in >> diff_id >> bl.uncompressed_size >> bl.entries >> blob >> bl.blob.size)) return std::nullopt;
  auto d = Digest::parse(blob);
  if (!d || !Digest::parse(diff_id)) return std::nullopt;
  bl.name = name;
  bl.diff_id = diff_id;
  bl.blob = Descriptor{media_type, std::move(*d), bl.blob.size, {}};
  bl.reused = true;
  if (!layout.has_blob(bl.blob.digest) && !restore_blob(layout, c, bl.blob)) return std::nullopt;
  (void)::utimensat(AT_FDCWD, memo.c_str(), nullptr, 0);  // its last use, for `gpuenv cache prune`
  return bl;
}

}  // namespace

Result<BuiltLayer> write_layer(OciLayout& layout, const LayerStream& stream, const std::string& name, const LayerCompression& c, const std::string& root,
                               const std::string& key, const OtherSource& other) {
  const char* type = c.zstd ? media_type::k_layer_zstd : media_type::k_layer_gzip;
  const std::string kmemo = key_memo_path(c, key);
  if (auto bl = remembered_layer(layout, c, kmemo, name, type)) return *bl;
  if (other)
    if (auto bl = other()) return *bl;
  TarSummary tar;
  auto size = stream.size();
  if (!size) return std::move(size).error();
  tar.size = *size;
  BuiltLayer bl;
  bl.name = name;
  auto written = compress_layer(layout, stream, name, c, tar, root);
  if (!written) return std::move(written).error();
  bl.blob = *written;
  keep_blob(layout, c, bl.blob.digest);
  bl.diff_id = tar.diff_id;
  bl.uncompressed_size = tar.size;
  bl.entries = tar.entries;
  if (!kmemo.empty())
    (void)write_file(kmemo, bl.diff_id + " " + std::to_string(bl.uncompressed_size) + " " + std::to_string(bl.entries) + " " + bl.blob.digest.str() + " " +
                                std::to_string(bl.blob.size) + "\n");
  return bl;
}

Result<std::vector<BuiltLayer>> copy_base_layers(OciLayout& layout, const std::string& base_layout_dir, const std::string& base_manifest_digest,
                                                 const json& manifest, const json& config) {
  if (!config.is_object() || !config.contains("rootfs") || !config["rootfs"].is_object() || !config["rootfs"].contains("diff_ids") ||
      !config["rootfs"]["diff_ids"].is_array() || config["rootfs"]["diff_ids"].size() != manifest["layers"].size())
    return build_error("build.bad_base", "the base image's config does not list one diff_id per layer", base_manifest_digest, "use another base image, or rebuild it");
  std::vector<BuiltLayer> out;
  std::size_t i = 0;
  for (const auto& l : manifest["layers"]) {
    BuiltLayer bl;
    bl.name = "base-image";
    GPUENV_TRY(blob, parse_descriptor(l, base_manifest_digest, {ErrorKind::environment, "build.bad_base", "use another base image"}));
    bl.blob = Descriptor{oci_layer_type(blob.media_type), blob.digest, blob.size, {}};
    if (auto st = copy_base_blob(layout, base_layout_dir, bl.blob); !st) return std::move(st).error();
    bl.diff_id = config["rootfs"]["diff_ids"][i++].get<std::string>();
    bl.reused = true;
    out.push_back(std::move(bl));
  }
  return out;
}

}  // namespace gpuenv::images::assembly
