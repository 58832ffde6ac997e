#include "images/oci/layout_image.hpp"

#include <sys/stat.h>

#include "base/text.hpp"
#include "base/digest.hpp"
#include "base/file_io.hpp"

namespace gpuenv::images {
namespace {

using nlohmann::json;

/// Reads the documents of one layout with the caller's errors.
class Reader {
 public:
  Reader(const std::string& dir, const LayoutErrors& errors) : m_dir(dir), m_e(errors) {}

  Error not_image(const std::string& what, const std::string& where) const {
    return make_error(m_e.not_image_kind, m_e.not_image, what, where, m_e.not_image_hint);
  }
  Error damaged(const std::string& what, const std::string& where) const {
    return make_error(ErrorKind::environment, m_e.damaged, what, where, m_e.damaged_hint);
  }
  DescriptorErrors descriptor_errors() const { return {ErrorKind::environment, m_e.damaged, m_e.damaged_hint}; }
  std::string blob(const Digest& d) const { return m_dir + "/blobs/sha256/" + d.hex(); }

  /// A whole document; a special file is refused before it is opened for reading, a large one before it is read.
  Result<std::string> read(const std::string& path, bool missing_is_damage) const {
    auto text = read_file_limited(path, k_max_image_document_bytes, {m_e.not_image_kind, m_e.not_image, "this is not a document of an image gpuenv reads"});
    if (text) return text;
    const Error& e = text.error();
    if (e.id == "io.not_found" && missing_is_damage) return damaged("the layout lacks this blob", path);
    if (e.id == m_e.not_image) return std::move(text).error();
    return not_image("cannot read: " + e.message, path);
  }

  /// The blob DIGEST names, holding exactly those bytes, as a JSON object.
  Result<std::pair<std::string, json>> document(const Digest& digest, const std::string& what) const {
    const std::string path = blob(digest);
    GPUENV_TRY(text, read(path, true));
    if (Digest::of(text) != digest) return damaged(what + " does not hold the bytes its digest " + digest.str() + " names", path);
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return not_image(what + " is not a JSON object", path);
    return std::pair<std::string, json>{std::move(text), std::move(j)};
  }

  /// The entry of index.json REF names (ref name or manifest digest; empty: the only one).
  Result<Descriptor> choose(const json& index, const std::string& ref, const std::string& index_path) const {
    std::string names;
    const json* chosen = choose_index_entry(index, ref, names);
    const std::size_t count = index.contains("manifests") && index["manifests"].is_array() ? index["manifests"].size() : 0;
    if (count == 0) return make_error(ErrorKind::usage, m_e.no_image, "the layout's index names no image", index_path, "build or pull an image into it");
    if (chosen == nullptr) {
      return make_error(ErrorKind::usage, m_e.no_image,
                        ref.empty() ? "the layout holds " + std::to_string(count) + " images (" + names + "); name one"
                                    : "no image named '" + ref + "' (the index names: " + names + ")",
                        m_dir, "give the image as DIR:REF (a ref name in index.json, or a manifest digest)");
    }
    return parse_descriptor(*chosen, index_path, descriptor_errors());
  }

 private:
  const std::string& m_dir;
  const LayoutErrors& m_e;
};

}  // namespace

Result<LayoutImage> read_layout_image(const std::string& layout_dir, const std::string& ref, const LayoutErrors& errors, const resolver::Platform& platform) {
  const Reader r(layout_dir, errors);
  const std::string index_path = layout_dir + "/index.json";
  struct stat st {};
  if (::stat(layout_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return r.not_image("not a directory", layout_dir);
  if (::lstat(index_path.c_str(), &st) != 0) return r.not_image("the directory " + layout_dir + " is not an OCI layout (it has no index.json)", layout_dir);
  GPUENV_TRY(index_text, r.read(index_path, false));
  const json index = json::parse(index_text, nullptr, false);
  if (index.is_discarded() || !index.is_object()) return r.not_image("index.json is not a JSON object", index_path);
  GPUENV_TRY(entry, r.choose(index, ref, index_path));
  GPUENV_TRY(doc, r.document(entry.digest, "the manifest"));
  LayoutImage out;
  out.manifest_digest = entry.digest.str();
  if (doc.second.contains("manifests")) {  // an index of platforms: the platform's image, as a pull would take it
    const json* inner = platform_entry(doc.second, platform, out.index_platforms);
    if (inner == nullptr)
      return r.not_image("the image index " + entry.digest.str() + " has no " + platform.str() + " image (it has: " + join(out.index_platforms, ", ") + ")",
                         r.blob(entry.digest));
    GPUENV_TRY(chosen, parse_descriptor(*inner, r.blob(entry.digest), r.descriptor_errors()));
    GPUENV_TRY(inner_doc, r.document(chosen.digest, "the manifest"));
    out.manifest_digest = chosen.digest.str();
    doc = std::move(inner_doc);
  }
  const std::string manifest_path = r.blob(*Digest::parse(out.manifest_digest));
  const json& manifest = doc.second;
  if (!manifest.contains("config") || !manifest.contains("layers") || !manifest["layers"].is_array())
    return r.not_image("not an image manifest (it needs a config and a layers list)", manifest_path);
  GPUENV_TRY(config_d, parse_descriptor(manifest["config"], manifest_path, r.descriptor_errors()));
  GPUENV_TRY(config_doc, r.document(config_d.digest, "the config"));
  for (const auto& l : manifest["layers"]) {
    GPUENV_TRY(layer, parse_descriptor(l, manifest_path, r.descriptor_errors()));
    out.layers.push_back(std::move(layer));
  }
  out.manifest_text = std::move(doc.first);
  out.manifest = std::move(doc.second);
  out.config_text = std::move(config_doc.first);
  out.config = std::move(config_doc.second);
  out.config_descriptor = std::move(config_d);
  return out;
}

}  // namespace gpuenv::images
