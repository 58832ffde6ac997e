#pragma once
// Internal to images/assemble: layer blobs. gpuenv's layers are named by their input key and written from the
// tree in one pass (tar, compression and both digests into a temporary blob) unless a build wrote that key
// before; a base image's layers are copied as they are.
#include <cstdint>
#include <functional>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "images/assemble/assemble_image.hpp"
#include "images/assemble/root_tree.hpp"
#include "images/oci/layout.hpp"
#include "images/oci/tar_writer.hpp"

namespace gpuenv::images::assembly {

/// The content identity of a regular file of the tree ("<package tree key>/<path>" for a file linked from
/// the package store), or "" when only its bytes can tell (they are hashed then).
using ContentId = std::function<std::string(const Node&)>;

/// A layer's tar stream, from the tree's nodes that belong to it (read again on every write()).
class LayerStream {
 public:
  LayerStream(const std::string& root, std::vector<const Node*> nodes, const Owners& owners, std::int64_t mtime)
      : m_root(root), m_nodes(std::move(nodes)), m_owners(owners), m_mtime(mtime) {}

  /// Writes the whole tar to `sink`; returns the number of entries. Errors: `build.io` (a file changed or
  /// went away), the sink's and the tar writer's.
  Result<std::uint64_t> write(const ByteSink& sink) const { return emit(sink, true); }

  /// The number of entries the tar holds.
  [[nodiscard]] std::uint64_t entry_count() const { return m_nodes.size(); }

  /// The tar's length, from the entries alone (no file is read).
  Result<std::uint64_t> size() const;

  /// The layer's input key: a sha256 of everything its tar is made of (every header field, hard links,
  /// the mtime, and each file's content identity, or its bytes' sha256 where it has none). Equal keys mean
  /// equal tars, so a layer whose key was written before is taken as it is. Errors: `build.io`.
  Result<std::string> key(const ContentId& content_id) const;

  /// The sha256 of the layer's entry list (each entry's path, type, mode, owner, size and link target, hard links
  /// resolved; no file content): what a shared cache's layer entry must match (SharedCache).
  [[nodiscard]] Digest files_digest() const;

 private:
  [[nodiscard]] TarEntry entry_of(const Node& n) const;
  Status copy_data(TarWriter& tar, const Node& n, std::vector<char>& buf) const;
  /// The tar to `sink` (without file content unless `with_data`); its whole length, content included, in `length`.
  Result<std::uint64_t> emit(const ByteSink& sink, bool with_data, std::uint64_t* length = nullptr) const;
  /// The entries in tar order, hard links resolved as write() writes them.
  [[nodiscard]] std::vector<TarEntry> entries() const;

  const std::string& m_root;
  std::vector<const Node*> m_nodes;
  const Owners& m_owners;
  std::int64_t m_mtime;
};

/// How gpuenv's layers are compressed, and where compressed digests are remembered.
struct LayerCompression {
  bool zstd = false;         ///< tar+zstd at zstd_level, else tar+gzip at gzip_level
  int gzip_level = 6;
  int zstd_level = 3;
  unsigned threads = 0;
  std::string memo_dir;      ///< input key -> the layer's digests across builds; "" disables
};

/// The compressor's settings and implementation (libzstd's release, the deflate code): part of every key under
/// which a compressed blob is found again.
std::string compressor_identity(const LayerCompression& compression);

/// A layer from somewhere other than this tree (the shared cache), asked for after the memo and before compressing.
using OtherSource = std::function<std::optional<BuiltLayer>()>;

/// Writes one of gpuenv's layers into the layout, or takes the one its input `key` (LayerStream::key) names:
/// a key remembered in the memo with its blob in the layout is taken as it is, nothing read; else what OTHER
/// (may be empty) gives; otherwise the layer is written in one pass (tar, uncompressed digest, compression,
/// compressed digest) and the key remembered. `root` is for messages. Errors: `build.unstable_tree` (the tree's
/// length changed while it was read), `build.io`, compression's, the layout's.
Result<BuiltLayer> write_layer(OciLayout& layout, const LayerStream& stream, const std::string& name, const LayerCompression& compression,
                               const std::string& root, const std::string& key, const OtherSource& other = {});

/// Copies the layers of a base image (`manifest` and `config` parsed from its layout) into the layout, in order.
/// Errors: `build.bad_base` (no diff_id per layer, a layer without a sha256 digest), `build.io`, the layout's.
Result<std::vector<BuiltLayer>> copy_base_layers(OciLayout& layout, const std::string& base_layout_dir, const std::string& base_manifest_digest,
                                                 const nlohmann::json& manifest, const nlohmann::json& config);

}  // namespace gpuenv::images::assembly
