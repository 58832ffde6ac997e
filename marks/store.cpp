#include "marks/store.hpp"

#include <filesystem>
#include <map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/file_io.hpp"
#include "base/json_field.hpp"
#include "images/oci/archive.hpp"
#include "images/oci/image_reader.hpp"
#include "images/oci/layout_image.hpp"
#include "images/registry/referrers.hpp"
#include "marks/referrer.hpp"

namespace gpuenv::marks {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* k_ref_name = "org.opencontainers.image.ref.name";
constexpr std::uint64_t k_max_att_document_bytes = 4u << 20;

Error bad_att(const std::string& what, const std::string& where) {
  return make_error(ErrorKind::environment, "mark.bad_att", what, where, "the tag holds something other than cosign's attestations; look at it with skopeo inspect");
}

/// The config descriptor of an attestation manifest.
Result<images::Descriptor> att_config(const std::string& manifest, const std::string& where) {
  const json j = json::parse(manifest, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("config")) return bad_att("the attestation manifest has no config", where);
  return images::parse_descriptor(j["config"], where, {ErrorKind::environment, "mark.bad_att", "the attestation manifest is damaged"});
}

// ---- layouts and archives -----------------------------------------------------------------------------------

/// A store whose records are named in an OCI index.json beside the image (a layout, or an archive of one): the
/// attestation image as the entry "sha256-<hex>.att", the referrers' fallback index as "sha256-<hex>".
class IndexMarkStore : public MarkStore {
 public:
  Result<std::optional<AttImage>> read_att(const Digest& image) override {
    GPUENV_TRY(entries, index_entries());
    const auto e = entry(entries, attestation_tag(image));
    if (!e) return std::optional<AttImage>();
    GPUENV_TRY(manifest, read_blob(*e, k_max_att_document_bytes));
    GPUENV_TRY(config_d, att_config(manifest, where(image)));
    GPUENV_TRY(config, read_blob(config_d, k_max_att_document_bytes));
    GPUENV_TRY(att, parse_att_manifest(manifest, config, where(image)));
    return std::optional<AttImage>(std::move(att));
  }

  Result<std::string> read_record(const images::Descriptor& layer, std::uint64_t limit) override { return read_blob(layer, limit); }

  Status write_att(const Digest& image, const AttImage& att, std::string_view envelope) override {
    std::map<Digest, std::pair<std::string, std::string>> blobs;  // digest -> (bytes, media type)
    blobs[Digest::of(envelope)] = {std::string(envelope), std::string(k_envelope_media_type)};
    blobs[Digest::of(att.config)] = {att.config, images::media_type::k_config};
    blobs[Digest::of(att.manifest)] = {att.manifest, images::media_type::k_manifest};
    images::Descriptor named{images::media_type::k_manifest, Digest::of(att.manifest), att.manifest.size(), {}};
    named.annotations[k_ref_name] = attestation_tag(image);
    return replace_entry(std::move(named), blobs);
  }

  Result<std::string> write_referrer(const Digest& image, const std::string& manifest, const std::string& bundle) override {
    const std::string tag = images::referrers_fallback_tag(image);
    GPUENV_TRY(entries, index_entries());
    std::optional<std::string> existing;
    if (const auto e = entry(entries, tag)) {
      GPUENV_TRY(bytes, read_blob(*e, k_max_att_document_bytes));
      existing = std::move(bytes);
    }
    const std::string index = images::referrers_index_with(existing, manifest);
    std::map<Digest, std::pair<std::string, std::string>> blobs;
    blobs[Digest::of(k_empty_blob)] = {std::string(k_empty_blob), std::string(k_empty_media_type)};
    blobs[Digest::of(bundle)] = {bundle, std::string(k_bundle_media_type)};
    blobs[Digest::of(manifest)] = {manifest, images::media_type::k_manifest};
    blobs[Digest::of(index)] = {index, images::media_type::k_index};
    images::Descriptor named{images::media_type::k_index, Digest::of(index), index.size(), {}};
    named.annotations[k_ref_name] = tag;
    GPUENV_CHECK(replace_entry(std::move(named), blobs));
    return m_name + ":" + tag;
  }

  [[nodiscard]] std::string where(const Digest& image) const override { return m_name + ":" + attestation_tag(image); }
  [[nodiscard]] std::string subject_name() const override { return m_ref.empty() ? m_name : m_name + ":" + m_ref; }
  [[nodiscard]] std::string lock_key(const Digest& image) const override {
    std::error_code ec;
    const fs::path canonical = fs::weakly_canonical(m_path, ec);
    return "index " + (ec ? m_path : canonical.string()) + " " + image.str();
  }

 protected:
  IndexMarkStore(std::string path, std::string ref, std::string name) : m_path(std::move(path)), m_ref(std::move(ref)), m_name(std::move(name)) {}
  /// index.json's text.
  virtual Result<std::string> read_index() const = 0;
  /// Blob D's bytes (at most LIMIT), unchecked.
  virtual Result<std::string> read_blob_bytes(const images::Descriptor& d, std::uint64_t limit) const = 0;
  /// Stores BLOBS (digest -> bytes, media type) and then ENTRIES as index.json.
  virtual Status commit(const std::vector<images::Descriptor>& entries, const std::map<Digest, std::pair<std::string, std::string>>& blobs) = 0;

  std::string m_path, m_ref, m_name;

 private:
  static std::optional<images::Descriptor> entry(const std::vector<images::Descriptor>& entries, const std::string& tag) {
    for (const auto& e : entries) {
      const auto name = e.annotations.find(k_ref_name);
      if (name != e.annotations.end() && name->second == tag) return e;
    }
    return std::nullopt;
  }

  /// index.json with NAMED in place of the entry of the same ref name, after BLOBS are stored.
  Status replace_entry(images::Descriptor named, const std::map<Digest, std::pair<std::string, std::string>>& blobs) {
    GPUENV_TRY(entries, index_entries());
    std::vector<images::Descriptor> out;
    const std::string& tag = named.annotations[k_ref_name];
    for (auto& e : entries) {
      const auto name = e.annotations.find(k_ref_name);
      if (name == e.annotations.end() || name->second != tag) out.push_back(std::move(e));
    }
    out.push_back(std::move(named));
    return commit(out, blobs);
  }

  Result<std::vector<images::Descriptor>> index_entries() const {
    GPUENV_TRY(text, read_index());
    const json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("manifests") || !j["manifests"].is_array())
      return make_error(ErrorKind::environment, "mark.bad_image", "index.json has no manifests list", m_name, "the image is damaged; build it again");
    std::vector<images::Descriptor> out;
    for (const auto& m : j["manifests"]) {
      GPUENV_TRY(d, images::parse_descriptor(m, m_name + " index.json"));
      out.push_back(std::move(d));
    }
    return out;
  }

  Result<std::string> read_blob(const images::Descriptor& d, std::uint64_t limit) const {
    const std::string where = m_name + " blobs/sha256/" + d.digest.hex();
    if (d.size > limit) return bad_att("blob " + d.digest.str() + " is " + std::to_string(d.size) + " bytes, more than a record may have", where);
    GPUENV_TRY(bytes, read_blob_bytes(d, limit));
    if (Digest::of(bytes) != d.digest) return bad_att("blob " + d.digest.str() + " does not hold the bytes its digest names", where);
    return bytes;
  }
};

/// An OCI layout directory.
class LayoutMarkStore final : public IndexMarkStore {
 public:
  LayoutMarkStore(std::string dir, std::string ref) : IndexMarkStore(dir, ref, dir) {}

  Result<images::Descriptor> image_descriptor() override {
    images::LayoutErrors errors;
    errors.no_image = errors.not_image = errors.damaged = "mark.bad_image";
    GPUENV_TRY(image, images::read_layout_image(m_path, m_ref, errors));
    auto d = Digest::parse(image.manifest_digest);
    if (!d) return make_error(ErrorKind::internal, "mark.bad_image", "the layout reader gave no digest", m_path, "");
    images::Descriptor out;
    out.digest = *d;
    out.size = image.manifest_text.size();
    out.media_type = string_field(image.manifest, "mediaType", images::media_type::k_manifest);
    return out;
  }

 private:
  Result<std::string> read_index() const override { return read_file_limited(m_path + "/index.json", images::k_max_image_document_bytes); }
  Result<std::string> read_blob_bytes(const images::Descriptor& d, std::uint64_t limit) const override {
    return read_file_limited(m_path + "/blobs/sha256/" + d.digest.hex(), limit);
  }
  Status commit(const std::vector<images::Descriptor>& entries, const std::map<Digest, std::pair<std::string, std::string>>& blobs) override {
    GPUENV_TRY(layout, images::OciLayout::open(m_path));
    for (const auto& [digest, blob] : blobs) GPUENV_CHECK(layout.put_bytes(blob.first, blob.second));
    return layout.write_index(entries);
  }
};

/// An image archive (oci-archive, or a docker archive that carries an OCI index, as Docker 25+ and gpuenv write
/// them): read member by member, rewritten whole (beside it, then renamed) when a record is added.
class ArchiveMarkStore final : public IndexMarkStore {
 public:
  ArchiveMarkStore(std::string file, std::string ref, std::string argument) : IndexMarkStore(std::move(file), std::move(ref), ""), m_argument(std::move(argument)) {
    m_name = m_path;
  }

  Result<images::Descriptor> image_descriptor() override {
    GPUENV_TRY(summary, images::read_image_summary(m_argument, {}));
    auto d = Digest::parse(summary.digest);
    if (!d) return make_error(ErrorKind::usage, "mark.bad_image", "the archive names no image manifest", m_path, "");
    GPUENV_TRY(members, images::read_archive_members(m_path, {"index.json", "blobs/sha256/" + d->hex()}, m_path));
    if (!members.count("index.json"))
      return make_error(ErrorKind::usage, "mark.bad_image", "the archive has no OCI index.json to name marks in (a docker archive older than Docker 25)", m_path,
                        "load it into a registry or a layout (skopeo copy docker-archive:" + m_path + " oci:DIR) and mark that");
    const auto manifest = members.find("blobs/sha256/" + d->hex());
    if (manifest == members.end())
      return make_error(ErrorKind::usage, "mark.bad_image", "the archive's image has no OCI manifest blob (" + d->str() + ")", m_path,
                        "load it into a registry or a layout and mark that");
    const json m = json::parse(manifest->second, nullptr, false);
    images::Descriptor out;
    out.digest = *d;
    out.size = manifest->second.size();
    out.media_type = string_field(m, "mediaType", images::media_type::k_manifest);
    return out;
  }

 private:
  Result<std::string> read_index() const override {
    GPUENV_TRY(members, images::read_archive_members(m_path, {"index.json"}, m_path));
    const auto it = members.find("index.json");
    if (it == members.end()) return make_error(ErrorKind::usage, "mark.bad_image", "the archive has no index.json", m_path, "");
    return it->second;
  }
  Result<std::string> read_blob_bytes(const images::Descriptor& d, std::uint64_t /*limit: the reader's own, 16 MiB*/) const override {
    const std::string name = "blobs/sha256/" + d.digest.hex();
    GPUENV_TRY(members, images::read_archive_members(m_path, {name}, m_path));
    const auto it = members.find(name);
    if (it == members.end()) return bad_att("the archive lacks blob " + d.digest.str(), m_path);
    return it->second;
  }
  Status commit(const std::vector<images::Descriptor>& entries, const std::map<Digest, std::pair<std::string, std::string>>& blobs) override {
    json manifests = json::array();
    for (const auto& e : entries) manifests.push_back(images::descriptor_object(e));
    const json index = {{"schemaVersion", 2}, {"mediaType", images::media_type::k_index}, {"manifests", manifests}};
    std::map<Digest, std::string> bytes;
    for (const auto& [digest, blob] : blobs) bytes[digest] = blob.first;
    return images::rewrite_archive(m_path, index.dump(), bytes);
  }

  std::string m_argument;
};

// ---- the registry store --------------------------------------------------------------------------------------

class RegistryMarkStore final : public MarkStore {
 public:
  RegistryMarkStore(images::ImageReference ref, std::unique_ptr<HttpClient> http, const images::RegistryOptions& options)
      : m_ref(std::move(ref)), m_http(std::move(http)), m_client(*m_http, options) {}

  Result<images::Descriptor> image_descriptor() override {
    GPUENV_TRY(image, m_client.fetch_image_manifest(m_ref));  // the subject: the manifest alone, no config
    images::Descriptor out;
    out.digest = image.digest;
    out.size = image.bytes.size();
    out.media_type = image.media_type;
    return out;
  }
  [[nodiscard]] std::string subject_name() const override { return m_ref.registry + "/" + m_ref.repository; }

  Result<std::optional<AttImage>> read_att(const Digest& image) override {
    GPUENV_TRY(manifest, m_client.get_manifest(m_ref, attestation_tag(image)));
    if (!manifest) return std::optional<AttImage>();
    GPUENV_TRY(config_d, att_config(manifest->bytes, where(image)));
    GPUENV_TRY(config, m_client.get_blob(m_ref, config_d, k_max_att_document_bytes));
    GPUENV_TRY(att, parse_att_manifest(manifest->bytes, config, where(image)));
    return std::optional<AttImage>(std::move(att));
  }

  Result<std::string> read_record(const images::Descriptor& layer, std::uint64_t limit) override { return m_client.get_blob(m_ref, layer, limit); }

  Status write_att(const Digest& image, const AttImage& att, std::string_view envelope) override {
    GPUENV_CHECK(m_client.put_blob(m_ref, images::BlobSource::of(envelope)));
    GPUENV_CHECK(m_client.put_blob(m_ref, images::BlobSource::of(att.config)));
    GPUENV_CHECK(m_client.put_manifest(m_ref, attestation_tag(image), att.manifest, images::media_type::k_manifest));
    return ok_status();
  }

  Result<std::string> write_referrer(const Digest& image, const std::string& manifest, const std::string& bundle) override {
    GPUENV_CHECK(m_client.put_blob(m_ref, images::BlobSource::of(k_empty_blob)));
    GPUENV_CHECK(m_client.put_blob(m_ref, images::BlobSource::of(bundle)));
    // Without the referrers API the client keeps the index of referrers itself (distribution-spec 1.1, "Pushing
    // Manifests with Subject"), read back against other writers (images/registry/referrers.hpp).
    GPUENV_TRY(put, images::put_referrer(m_client, m_ref, image, manifest));
    const std::string repo = m_ref.registry + "/" + m_ref.repository;
    if (put.referrers_api) return repo + " (the referrers API)";
    return repo + ":" + images::referrers_fallback_tag(image) + " (the fallback index)";
  }

  [[nodiscard]] std::string where(const Digest& image) const override {
    return m_ref.registry + "/" + m_ref.repository + ":" + attestation_tag(image);
  }
  [[nodiscard]] std::string lock_key(const Digest& image) const override { return "registry " + m_ref.registry + "/" + m_ref.repository + " " + image.str(); }

 private:
  images::ImageReference m_ref;
  std::unique_ptr<HttpClient> m_http;
  images::RegistryClient m_client;
};

}  // namespace

Result<MarkStorePlace> mark_store_place(const std::string& image) {
  // An archive: oci-archive:FILE[:REF], docker-archive:FILE[:NAME:TAG] or a plain tar FILE.
  std::string archive_arg;
  for (const char* prefix : {"oci-archive:", "docker-archive:"})
    if (image.rfind(prefix, 0) == 0) archive_arg = image.substr(std::string(prefix).size());
  std::string layout_arg;
  if (image.rfind("oci:", 0) == 0) layout_arg = image.substr(4);
  else if (archive_arg.empty() && image.rfind("docker://", 0) != 0) {
    const auto [path, ref] = images::split_image_ref(image);
    std::error_code ec;
    if (fs::is_directory(path, ec)) layout_arg = image;
    else if (fs::is_regular_file(path, ec)) archive_arg = image;
  }
  if (!archive_arg.empty()) {
    auto [path, ref] = images::split_image_ref(archive_arg);
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) return make_error(ErrorKind::usage, "mark.bad_image", "no such archive file", path, "give the file `gpuenv build --format oci-archive` wrote");
    return MarkStorePlace{MarkStorePlace::Kind::archive, path, ref, {}};
  }
  if (!layout_arg.empty()) {
    auto [path, ref] = images::split_image_ref(layout_arg);
    std::error_code ec;
    if (!fs::is_regular_file(fs::path(path) / "index.json", ec))
      return make_error(ErrorKind::usage, "mark.bad_image", "not an OCI image layout (no index.json)", path, "give the directory `gpuenv build` wrote");
    return MarkStorePlace{MarkStorePlace::Kind::layout, path, ref, {}};
  }
  if (image.rfind('/', 0) == 0 || image.rfind("./", 0) == 0 || image.rfind("../", 0) == 0)
    return make_error(ErrorKind::usage, "mark.bad_image", "no such image layout or archive", images::split_image_ref(image).first,
                      "give the directory or file `gpuenv build` wrote, or a registry reference (docker://host[:port]/repo:tag)");
  const std::string text = image.rfind("docker://", 0) == 0 ? image.substr(9) : image;
  auto ref = images::parse_image_reference(text);
  if (!ref) {
    Error e = ref.error();
    e.hint = "give an OCI layout directory (DIR or DIR:REF) or a registry reference (docker://host[:port]/repo:tag)";
    return e;
  }
  return MarkStorePlace{MarkStorePlace::Kind::registry, {}, {}, *ref};
}

Result<std::unique_ptr<MarkStore>> open_layout_mark_store(const std::string& dir, const std::string& ref) {
  return std::unique_ptr<MarkStore>(std::make_unique<LayoutMarkStore>(dir, ref));
}

Result<std::unique_ptr<MarkStore>> open_archive_mark_store(const std::string& file, const std::string& ref, const std::string& argument) {
  return std::unique_ptr<MarkStore>(std::make_unique<ArchiveMarkStore>(file, ref, argument));
}

std::unique_ptr<MarkStore> make_registry_mark_store(images::ImageReference ref, std::unique_ptr<HttpClient> http, const images::RegistryOptions& options) {
  return std::make_unique<RegistryMarkStore>(std::move(ref), std::move(http), options);
}

}  // namespace gpuenv::marks
