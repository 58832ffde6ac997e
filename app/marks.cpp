#include "app/marks.hpp"

#include "base/time.hpp"
#include "base/duration.hpp"
#include "app/status.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "app/base_image.hpp"
#include "app/catalog.hpp"
#include "app/resolve.hpp"
#include "base/file_io.hpp"
#include "base/json_field.hpp"
#include "base/net/http_client.hpp"
#include "base/safe_text.hpp"
#include "base/unique_fd.hpp"
#include "images/oci/archive.hpp"
#include "images/oci/image_reader.hpp"
#include "images/oci/layout_image.hpp"
#include "images/registry/registry_client.hpp"
#include "marks/dsse.hpp"
#include "marks/from_report.hpp"
#include "marks/keys.hpp"
#include "marks/referrer.hpp"
#include "images/plan/image_config.hpp"

namespace gpuenv::app {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* k_ref_name = "org.opencontainers.image.ref.name";
/// A record larger than this is not one gpuenv wrote (a mark is a few KiB).
constexpr std::uint64_t k_max_record_bytes = 4u << 20;
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
  Result<std::optional<marks::AttImage>> read_att(const Digest& image) override {
    GPUENV_TRY(entries, index_entries());
    const auto e = entry(entries, marks::attestation_tag(image));
    if (!e) return std::optional<marks::AttImage>();
    GPUENV_TRY(manifest, read_blob(*e, k_max_att_document_bytes));
    GPUENV_TRY(config_d, att_config(manifest, where(image)));
    GPUENV_TRY(config, read_blob(config_d, k_max_att_document_bytes));
    GPUENV_TRY(att, marks::parse_att_manifest(manifest, config, where(image)));
    return std::optional<marks::AttImage>(std::move(att));
  }

  Result<std::string> read_record(const images::Descriptor& layer, std::uint64_t limit) override { return read_blob(layer, limit); }

  Status write_att(const Digest& image, const marks::AttImage& att, std::string_view envelope) override {
    std::map<Digest, std::pair<std::string, std::string>> blobs;  // digest -> (bytes, media type)
    blobs[Digest::of(envelope)] = {std::string(envelope), std::string(marks::k_envelope_media_type)};
    blobs[Digest::of(att.config)] = {att.config, images::media_type::k_config};
    blobs[Digest::of(att.manifest)] = {att.manifest, images::media_type::k_manifest};
    images::Descriptor named{images::media_type::k_manifest, Digest::of(att.manifest), att.manifest.size(), {}};
    named.annotations[k_ref_name] = marks::attestation_tag(image);
    return replace_entry(std::move(named), blobs);
  }

  Result<std::string> write_referrer(const Digest& image, const std::string& manifest, const std::string& bundle) override {
    const std::string tag = marks::referrers_tag(image);
    GPUENV_TRY(entries, index_entries());
    std::optional<std::string> existing;
    if (const auto e = entry(entries, tag)) {
      GPUENV_TRY(bytes, read_blob(*e, k_max_att_document_bytes));
      existing = std::move(bytes);
    }
    const std::string index = marks::append_to_referrers_index(existing, manifest);
    std::map<Digest, std::pair<std::string, std::string>> blobs;
    blobs[Digest::of(marks::k_empty_blob)] = {std::string(marks::k_empty_blob), std::string(marks::k_empty_media_type)};
    blobs[Digest::of(bundle)] = {bundle, std::string(marks::k_bundle_media_type)};
    blobs[Digest::of(manifest)] = {manifest, images::media_type::k_manifest};
    blobs[Digest::of(index)] = {index, images::media_type::k_index};
    images::Descriptor named{images::media_type::k_index, Digest::of(index), index.size(), {}};
    named.annotations[k_ref_name] = tag;
    GPUENV_CHECK(replace_entry(std::move(named), blobs));
    return m_name + ":" + tag;
  }

  [[nodiscard]] std::string where(const Digest& image) const override { return m_name + ":" + marks::attestation_tag(image); }
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
    GPUENV_TRY(image, m_client.fetch_manifest_and_config(m_ref));
    auto d = Digest::parse(image.manifest_digest);
    if (!d) return make_error(ErrorKind::environment, "mark.bad_image", "the registry named the manifest '" + image.manifest_digest + "'", m_ref.to_string(), "");
    images::Descriptor out;
    out.digest = *d;
    out.size = image.manifest.size();
    out.media_type = image.media_type;
    return out;
  }
  [[nodiscard]] std::string subject_name() const override { return m_ref.registry + "/" + m_ref.repository; }

  Result<std::optional<marks::AttImage>> read_att(const Digest& image) override {
    GPUENV_TRY(manifest, m_client.get_manifest(m_ref, marks::attestation_tag(image)));
    if (!manifest) return std::optional<marks::AttImage>();
    GPUENV_TRY(config_d, att_config(manifest->bytes, where(image)));
    GPUENV_TRY(config, m_client.get_blob(m_ref, config_d, k_max_att_document_bytes));
    GPUENV_TRY(att, marks::parse_att_manifest(manifest->bytes, config, where(image)));
    return std::optional<marks::AttImage>(std::move(att));
  }

  Result<std::string> read_record(const images::Descriptor& layer, std::uint64_t limit) override { return m_client.get_blob(m_ref, layer, limit); }

  Status write_att(const Digest& image, const marks::AttImage& att, std::string_view envelope) override {
    GPUENV_CHECK(m_client.put_blob(m_ref, envelope));
    GPUENV_CHECK(m_client.put_blob(m_ref, att.config));
    GPUENV_CHECK(m_client.put_manifest(m_ref, marks::attestation_tag(image), att.manifest, images::media_type::k_manifest));
    return ok_status();
  }

  Result<std::string> write_referrer(const Digest& image, const std::string& manifest, const std::string& bundle) override {
    GPUENV_CHECK(m_client.put_blob(m_ref, marks::k_empty_blob));
    GPUENV_CHECK(m_client.put_blob(m_ref, bundle));
    const std::string digest = Digest::of(manifest).str();
    GPUENV_TRY(put, m_client.put_manifest(m_ref, digest, manifest, images::media_type::k_manifest));
    const std::string repo = m_ref.registry + "/" + m_ref.repository;
    if (!put.oci_subject.empty()) return repo + " (the referrers API)";
    GPUENV_TRY(api, m_client.has_referrers_api(m_ref, image.str()));
    if (api) return repo + " (the referrers API)";
    // The tag schema: the client keeps the index of referrers itself (distribution-spec 1.1, "Pushing Manifests
    // with Subject"); registries ignore If-Match, so writers of one image are serialised by the caller's lock.
    const std::string tag = marks::referrers_tag(image);
    GPUENV_TRY(existing, m_client.get_manifest(m_ref, tag));
    std::optional<std::string> old;
    if (existing) old = existing->bytes;
    const std::string index = marks::append_to_referrers_index(old, manifest);
    if (!old || index != *old) GPUENV_CHECK(m_client.put_manifest(m_ref, tag, index, images::media_type::k_index));
    return repo + ":" + tag + " (the fallback index)";
  }

  [[nodiscard]] std::string where(const Digest& image) const override {
    return m_ref.registry + "/" + m_ref.repository + ":" + marks::attestation_tag(image);
  }
  [[nodiscard]] std::string lock_key(const Digest& image) const override { return "registry " + m_ref.registry + "/" + m_ref.repository + " " + image.str(); }

 private:
  images::ImageReference m_ref;
  std::unique_ptr<HttpClient> m_http;
  images::RegistryClient m_client;
};

/// Holds an exclusive flock for its lifetime.
Result<UniqueFd> lock_exclusive(const std::string& path, std::chrono::seconds patience) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (fd.get() < 0)
    return make_error(ErrorKind::environment, "mark.io", std::string("cannot open the lock: ") + std::strerror(errno), path, "check the cache directory (GPUENV_CACHE_DIR)");
  const auto until = std::chrono::steady_clock::now() + patience;
  while (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR)
      return make_error(ErrorKind::environment, "mark.io", std::string("cannot lock: ") + std::strerror(errno), path, "");
    if (std::chrono::steady_clock::now() > until)
      return make_error(ErrorKind::environment, "mark.locked", "another gpuenv has been marking this image for " + std::to_string(patience.count()) + " s", path,
                        "wait for it to finish, or find the process that holds the lock (fuser " + path + ")");
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  return fd;
}

bool has_layer(const std::optional<marks::AttImage>& att, const Digest& layer) {
  if (!att) return false;
  for (const auto& l : att->layers)
    if (l.digest == layer) return true;
  return false;
}

/// GPU, driver and CC mode of this host, for the `auto` of verify.
struct HostWanted {
  std::string gpu, driver, cc;
};

/// What a pre-flight status file says of the host, in host_facts' terms; its report must be readable and not stale.
struct StatusFacts {
  std::set<std::string> models;
  std::string driver, cc, source;
};

Result<StatusFacts> status_facts(const std::string& file, const Services& services) {
  GPUENV_TRY(s, node_status({file, ""}, services));
  if (s.state != "healthy" && s.state != "failed")
    return make_error(ErrorKind::environment, "verify.no_host", "--host-status " + file + ": " + s.state + " (" + s.reason + ")", "--host-status",
                      "run gpuenv preflight first, or leave --host-status out to ask the driver");
  StatusFacts out{{s.gpu_models.begin(), s.gpu_models.end()}, s.driver, s.cc_state, "the pre-flight status " + file};
  return out;
}

Result<HostWanted> probe_host(const VerifyRequest& r, const resolver::Catalog& catalog, const Services& services) {
  StatusFacts facts;
  if (!r.host_status.empty()) {
    GPUENV_TRY(from_status, status_facts(r.host_status, services));
    facts = std::move(from_status);
  } else {
    GPUENV_TRY(host, host_facts(services, catalog));
    for (const auto& g : host.gpus) facts.models.insert(g.name);
    if (host.driver) facts.driver = host.driver->str();
    facts.cc = host.cc_state;
    facts.source = host.source;
  }
  HostWanted out;
  if (r.gpu == "auto") {
    const std::set<std::string>& models = facts.models;
    if (models.empty())
      return make_error(ErrorKind::environment, "verify.no_host", "--gpu auto: no NVIDIA GPU found on this host (" + facts.source + ")", "--gpu",
                        "name the GPU model and driver the image will run on: --gpu 'NVIDIA H200' --driver 580.65.06");
    if (models.size() > 1) {
      std::string list;
      for (const auto& m : models) list += (list.empty() ? "" : ", ") + m;
      return make_error(ErrorKind::environment, "verify.no_host", "--gpu auto: this host has GPUs of several models (" + list + ")", "--gpu",
                        "name the model the work will run on with --gpu");
    }
    out.gpu = *models.begin();
  }
  if (r.driver == "auto") {
    if (facts.driver.empty())
      return make_error(ErrorKind::environment, "verify.no_host", "--driver auto: no NVIDIA driver found on this host (" + facts.source + ")", "--driver",
                        "name the driver version the image will run with: --driver 580.65.06");
    out.driver = facts.driver;
  }
  if (r.cc == "auto") {
    if (facts.cc.empty() || facts.cc == "unknown")
      return make_error(ErrorKind::environment, "verify.no_host", "--cc auto: this host's confidential-computing state is unknown", "--cc",
                        "say which mode the work needs: --cc on or --cc off");
    out.cc = facts.cc;
  }
  return out;
}

}  // namespace

Result<std::unique_ptr<MarkStore>> open_mark_store(const std::string& image, bool plain_http, Services& services) {
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
    return std::unique_ptr<MarkStore>(std::make_unique<ArchiveMarkStore>(path, ref, image));
  }
  if (!layout_arg.empty()) {
    auto [path, ref] = images::split_image_ref(layout_arg);
    std::error_code ec;
    if (!fs::is_regular_file(fs::path(path) / "index.json", ec))
      return make_error(ErrorKind::usage, "mark.bad_image", "not an OCI image layout (no index.json)", path, "give the directory `gpuenv build` wrote");
    return std::unique_ptr<MarkStore>(std::make_unique<LayoutMarkStore>(path, ref));
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
  Status problem = ok_status();
  const images::RegistryOptions options = registry_options(services, ref->registry, plain_http, &problem);
  if (!problem) return problem.error();
  HttpOptions ho;
  ho.limits = services.net;
  ho.ca_bundle = env_or(services, "GPUENV_CA_BUNDLE");
  return std::unique_ptr<MarkStore>(std::make_unique<RegistryMarkStore>(*ref, make_curl_http_client(ho), options));
}

Result<marks::Key> load_signing_key(const std::string& path, const Services& services) {
  std::string file = path;
  if (file.empty()) file = env_or(services, "GPUENV_MARK_KEY");
  if (file.empty())
    return make_error(ErrorKind::usage, "key.missing", "no signing key given", "--key",
                      "give the private key file with --key gpuenv.key or name it in GPUENV_MARK_KEY (gpuenv key generate makes one)");
  return marks::read_private_key(file);
}

Result<MarkResult> mark(const MarkRequest& r, Services& services) {
  GPUENV_TRY(key, load_signing_key(r.key_path, services));
  std::string bytes;
  std::string report_where = r.report_path;
  if (r.report_bytes) {
    bytes = *r.report_bytes;
    report_where = "the validation report";
  } else {
    if (r.report_path.empty()) return make_error(ErrorKind::usage, "mark.no_report", "no validation report given", "--report", "give the report `gpuenv validate --json` wrote");
    GPUENV_TRY(text, read_file_limited(r.report_path, 64u << 20));
    bytes = std::move(text);
  }
  const auto valid = parse_duration(r.valid_for, "--valid-for");
  if (!valid || valid->count() <= 0)
    return make_error(ErrorKind::usage, "mark.bad_duration", "--valid-for '" + r.valid_for + "' is not a duration above zero and at most ten years",
                      "--valid-for", "write it as 30d, 12h, 90m or 3600s");
  const std::optional<std::int64_t> valid_for = valid->count();
  GPUENV_TRY(facts, marks::read_report(bytes, report_where));
  GPUENV_TRY(store, open_mark_store(r.image, r.plain_http, services));
  GPUENV_TRY(subject, store->image_descriptor());
  const Digest image = subject.digest;
  const std::string version = r.verifier_version.empty() ? std::string(GPUENV_VERSION) : r.verifier_version;
  GPUENV_TRY(predicate, marks::predicate_for(facts, image, {r.allow_replay, *valid_for, version}, report_where));
  const std::string statement = marks::render_statement(store->subject_name(), image, predicate);
  GPUENV_TRY(envelope, marks::sign_envelope(statement, marks::k_in_toto_payload_type, key));
  MarkResult out;
  out.image = image;
  out.where = store->where(image);
  out.record_digest = Digest::of(envelope).str();
  out.predicate = predicate;
  const Digest layer = Digest::of(envelope);

  const std::string lock_path = cache_root(services) + "/locks/mark-" + Digest::of(store->lock_key(image)).hex().substr(0, 32) + ".lock";
  GPUENV_TRY(lock, lock_exclusive(lock_path, std::chrono::seconds(60)));
  for (int attempt = 0; attempt < 3; ++attempt) {
    GPUENV_TRY(existing, store->read_att(image));
    if (has_layer(existing, layer)) {
      out.already_there = attempt == 0;
      out.records = existing->layers.size();
      break;
    }
    const marks::AttImage att = marks::append_record(existing, envelope, marks::k_predicate_type);
    if (auto st = store->write_att(image, att, envelope); !st) return std::move(st).error().while_("storing the mark in " + out.where);
    // Another host may have replaced the tag between our read and our write: read it back.
    GPUENV_TRY(again, store->read_att(image));
    if (has_layer(again, layer)) {
      out.records = again->layers.size();
      break;
    }
  }
  if (out.records == 0)
    return make_error(ErrorKind::environment, "mark.lost_race", "the mark was overwritten by another writer three times", out.where,
                      "other hosts are marking this image at the same moment; mark again");
  if (r.referrers) {
    GPUENV_TRY(bundle, marks::bundle_of(envelope, key));
    const std::string manifest = marks::referrer_manifest(bundle, subject, marks::k_predicate_type, format_rfc3339_utc(now_seconds(services)));
    GPUENV_TRY(where, store->write_referrer(image, manifest, bundle));
    out.referrer = Digest::of(manifest).str() + " in " + where;
  }
  return out;
}

bool Verification::ok() const {
  for (const auto& r : records)
    if (r.verdict.counts) return true;
  return false;
}

Result<Verification> verify(const VerifyRequest& r, Services& services) {
  if (r.keys.empty()) return make_error(ErrorKind::usage, "key.missing", "no public key given", "--key", "give the public key of the signer: --key gpuenv.pub");
  std::vector<marks::Key> keys;
  for (const auto& k : r.keys) {
    GPUENV_TRY(key, marks::read_public_key(k));
    keys.push_back(std::move(key));
  }
  std::vector<const marks::Key*> key_ptrs;
  for (const auto& k : keys) key_ptrs.push_back(&k);
  Verification out;
  marks::MarkWanted& w = out.wanted;
  if (!r.level.empty() && marks::level_rank(r.level) == 0)
    return make_error(ErrorKind::usage, "verify.level", "unknown level '" + r.level + "'", "--level", "use quick, standard or long");
  if (!r.cc.empty() && r.cc != "auto" && r.cc != "on" && r.cc != "off" && r.cc != "devtools")
    return make_error(ErrorKind::usage, "verify.cc", "unknown confidential-computing mode '" + r.cc + "'", "--cc", "use auto, on, off or devtools");
  if (!r.max_age.empty()) {
    const auto age = parse_duration(r.max_age, "--max-age");
    if (!age)
      return make_error(ErrorKind::usage, "verify.max_age", "--max-age '" + r.max_age + "' is not a duration of at most ten years", "--max-age",
                        "write it as 7d, 12h, 90m or 3600s");
    w.max_age_s = age->count();
  }
  w.level = r.level;
  w.driver = r.driver == "auto" ? "" : r.driver;
  w.cc_mode = r.cc == "auto" ? "" : r.cc;
  // The catalog, read once and only when a GPU is named or the host's GPUs are asked for ("any" needs neither).
  LoadedCatalog catalog;
  if (!r.gpu.empty() || ((r.driver == "auto" || r.cc == "auto") && r.host_status.empty())) {
    GPUENV_TRY(loaded, load_catalog_from(r.catalog_dir));
    catalog = std::move(loaded);
  }
  // The spelling a record carries is NVML's: a model's name (the spec's "H100") is mapped to it, or refused with the
  // candidates when the model has several products (a usage error, before the host is asked anything).
  auto name_gpu = [&](const std::string& given) -> Status {
    const resolver::GpuProducts named = resolver::gpu_products(catalog.catalog, given);
    if (named.products.size() > 1) {
      std::string list;
      for (const auto& p : named.products) list += (list.empty() ? "'" : ", '") + p + "'";
      return make_error(ErrorKind::usage, "verify.ambiguous_gpu",
                        "--gpu " + safe_text(given, 80) + " is the catalog's " + named.model->name + ", which is " +
                            std::to_string(named.products.size()) + " products to NVML: " + list,
                        "--gpu", "name the one the work runs on as nvidia-smi --query-gpu=name prints it, e.g. --gpu " + list.substr(0, list.find(',')));
    }
    w.gpu_product = named.products.front();
    w.gpu_spellings = named.spellings;
    return ok_status();
  };
  if (r.gpu != "auto" && !r.gpu.empty()) GPUENV_CHECK(name_gpu(r.gpu));
  if (r.gpu == "auto" || r.driver == "auto" || r.cc == "auto") {
    GPUENV_TRY(host, probe_host(r, catalog.catalog, services));
    if (r.gpu == "auto" && !host.gpu.empty()) GPUENV_CHECK(name_gpu(host.gpu));
    if (r.driver == "auto") w.driver = host.driver;
    if (r.cc == "auto") w.cc_mode = host.cc;
  }
  w.allow_replay = r.allow_replay;
  w.now = now_seconds(services);

  GPUENV_TRY(store, open_mark_store(r.image, r.plain_http, services));
  GPUENV_TRY(subject, store->image_descriptor());
  const Digest image = subject.digest;
  out.image = image;
  w.image = image;
  out.where = store->where(image);
  GPUENV_TRY(att, store->read_att(image));
  if (!att) return out;
  for (const auto& layer : att->layers) {
    JudgedRecord j;
    j.digest = layer.digest.str();
    if (layer.media_type != marks::k_envelope_media_type) {
      j.verdict.reasons.push_back("its layer is a " + (layer.media_type.empty() ? std::string("(no media type)") : layer.media_type) + ", not a DSSE envelope");
    } else if (auto bytes = store->read_record(layer, k_max_record_bytes); !bytes) {
      j.verdict.reasons.push_back("it could not be read: " + bytes.error().message);
    } else {
      j.verdict = marks::judge_mark(*bytes, key_ptrs, w, out.where);
    }
    out.records.push_back(std::move(j));
  }
  return out;
}

Result<std::vector<ListedRecord>> list_marks(const std::string& image, bool plain_http, Services& services) {
  GPUENV_TRY(store, open_mark_store(image, plain_http, services));
  GPUENV_TRY(subject, store->image_descriptor());
  const Digest digest = subject.digest;
  GPUENV_TRY(att, store->read_att(digest));
  std::vector<ListedRecord> out;
  if (!att) return out;
  for (const auto& layer : att->layers) {
    ListedRecord l;
    l.digest = layer.digest.str();
    if (const auto t = layer.annotations.find("predicateType"); t != layer.annotations.end()) l.predicate_type = t->second;
    if (layer.media_type != marks::k_envelope_media_type) {
      l.problem = "a " + layer.media_type + " layer, not a DSSE envelope";
    } else if (auto bytes = store->read_record(layer, k_max_record_bytes); !bytes) {
      l.problem = bytes.error().message;
    } else if (auto env = marks::parse_envelope(*bytes, store->where(digest)); !env) {
      l.problem = env.error().message;
    } else if (auto st = marks::parse_statement(env->payload, store->where(digest)); !st) {
      l.problem = st.error().message;
    } else {
      l.statement = std::move(*st);
    }
    out.push_back(std::move(l));
  }
  return out;
}

}  // namespace gpuenv::app
