#include "app/marks.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "app/base_image.hpp"
#include "app/catalog.hpp"
#include "app/resolve.hpp"
#include "base/file_io.hpp"
#include "base/net/http_client.hpp"
#include "base/unique_fd.hpp"
#include "images/oci/image_reader.hpp"
#include "images/oci/layout_image.hpp"
#include "images/registry/registry_client.hpp"
#include "marks/dsse.hpp"
#include "marks/from_report.hpp"
#include "marks/keys.hpp"

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

// ---- the layout store ----------------------------------------------------------------------------------------

class LayoutMarkStore final : public MarkStore {
 public:
  LayoutMarkStore(std::string dir, std::string ref) : m_dir(std::move(dir)), m_ref(std::move(ref)) {}

  Result<Digest> image_digest() override {
    images::LayoutErrors errors;
    errors.no_image = errors.not_image = errors.damaged = "mark.bad_image";
    GPUENV_TRY(image, images::read_layout_image(m_dir, m_ref, errors));
    auto d = Digest::parse(image.manifest_digest);
    if (!d) return make_error(ErrorKind::internal, "mark.bad_image", "the layout reader gave no digest", m_dir, "");
    return *d;
  }
  [[nodiscard]] std::string subject_name() const override { return m_ref.empty() ? m_dir : m_dir + ":" + m_ref; }

  Result<std::optional<marks::AttImage>> read_att(const Digest& image) override {
    GPUENV_TRY(entries, index_entries());
    const std::string tag = marks::attestation_tag(image);
    for (const auto& e : entries) {
      const auto name = e.annotations.find(k_ref_name);
      if (name == e.annotations.end() || name->second != tag) continue;
      GPUENV_TRY(manifest, read_blob(e, k_max_att_document_bytes));
      GPUENV_TRY(config_d, att_config(manifest, where(image)));
      GPUENV_TRY(config, read_blob(config_d, k_max_att_document_bytes));
      GPUENV_TRY(att, marks::parse_att_manifest(manifest, config, where(image)));
      return std::optional<marks::AttImage>(std::move(att));
    }
    return std::optional<marks::AttImage>();
  }

  Result<std::string> read_record(const images::Descriptor& layer, std::uint64_t limit) override { return read_blob(layer, limit); }

  Status write_att(const Digest& image, const marks::AttImage& att, std::string_view envelope) override {
    GPUENV_TRY(layout, images::OciLayout::open(m_dir));
    GPUENV_CHECK(layout.put_bytes(std::string(envelope), std::string(marks::k_envelope_media_type)));
    GPUENV_CHECK(layout.put_bytes(att.config, images::media_type::k_config));
    GPUENV_TRY(manifest, layout.put_bytes(att.manifest, images::media_type::k_manifest));
    const std::string tag = marks::attestation_tag(image);
    manifest.annotations[k_ref_name] = tag;
    GPUENV_TRY(entries, index_entries());
    std::vector<images::Descriptor> out;
    for (auto& e : entries) {
      const auto name = e.annotations.find(k_ref_name);
      if (name == e.annotations.end() || name->second != tag) out.push_back(std::move(e));
    }
    out.push_back(std::move(manifest));
    return layout.write_index(out);
  }

  [[nodiscard]] std::string where(const Digest& image) const override { return m_dir + ":" + marks::attestation_tag(image); }
  [[nodiscard]] std::string lock_key(const Digest& image) const override {
    std::error_code ec;
    const fs::path canonical = fs::weakly_canonical(m_dir, ec);
    return "layout " + (ec ? m_dir : canonical.string()) + " " + image.str();
  }

 private:
  Result<std::vector<images::Descriptor>> index_entries() const {
    const std::string path = m_dir + "/index.json";
    GPUENV_TRY(text, read_file_limited(path, images::k_max_image_document_bytes));
    const json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("manifests") || !j["manifests"].is_array())
      return make_error(ErrorKind::environment, "mark.bad_image", "index.json has no manifests list", path, "the layout is damaged; build the image again");
    std::vector<images::Descriptor> out;
    for (const auto& m : j["manifests"]) {
      GPUENV_TRY(d, images::parse_descriptor(m, path));
      out.push_back(std::move(d));
    }
    return out;
  }

  Result<std::string> read_blob(const images::Descriptor& d, std::uint64_t limit) const {
    const std::string path = m_dir + "/blobs/sha256/" + d.digest.hex();
    if (d.size > limit) return bad_att("blob " + d.digest.str() + " is " + std::to_string(d.size) + " bytes, more than a record may have", path);
    GPUENV_TRY(bytes, read_file_limited(path, limit));
    if (Digest::of(bytes) != d.digest) return bad_att("blob " + d.digest.str() + " does not hold the bytes its digest names", path);
    return bytes;
  }

  std::string m_dir, m_ref;
};

// ---- the registry store --------------------------------------------------------------------------------------

class RegistryMarkStore final : public MarkStore {
 public:
  RegistryMarkStore(images::ImageReference ref, std::unique_ptr<HttpClient> http, const images::RegistryOptions& options)
      : m_ref(std::move(ref)), m_http(std::move(http)), m_client(*m_http, options) {}

  Result<Digest> image_digest() override {
    if (!m_ref.digest.empty()) {
      if (auto d = Digest::parse(m_ref.digest)) return *d;
    }
    GPUENV_TRY(image, m_client.fetch_manifest_and_config(m_ref));
    auto d = Digest::parse(image.manifest_digest);
    if (!d) return make_error(ErrorKind::environment, "mark.bad_image", "the registry named the manifest '" + image.manifest_digest + "'", m_ref.to_string(), "");
    return *d;
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
    GPUENV_TRY(digest, m_client.put_manifest(m_ref, marks::attestation_tag(image), att.manifest, images::media_type::k_manifest));
    (void)digest;
    return ok_status();
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

Result<HostWanted> probe_host(const VerifyRequest& r, const Services& services) {
  GPUENV_TRY(catalog, load_catalog_from(r.catalog_dir));
  GPUENV_TRY(facts, host_facts(services, catalog.catalog));
  HostWanted out;
  if (r.gpu == "auto") {
    std::set<std::string> models;
    for (const auto& g : facts.gpus) models.insert(g.name);
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
    if (!facts.driver)
      return make_error(ErrorKind::environment, "verify.no_host", "--driver auto: no NVIDIA driver found on this host (" + facts.source + ")", "--driver",
                        "name the driver version the image will run with: --driver 580.65.06");
    out.driver = facts.driver->str();
  }
  if (r.cc == "auto") {
    if (facts.cc_state == "unknown")
      return make_error(ErrorKind::environment, "verify.no_host", "--cc auto: this host's confidential-computing state is unknown", "--cc",
                        "say which mode the work needs: --cc on or --cc off");
    out.cc = facts.cc_state;
  }
  return out;
}

}  // namespace

Result<std::unique_ptr<MarkStore>> open_mark_store(const std::string& image, bool plain_http, Services& services) {
  auto refuse_archive = [&] {
    return make_error(ErrorKind::usage, "mark.bad_image", "an image archive cannot take marks (a tar file is written once)", image,
                      "mark the image in its layout directory or in the registry it was pushed to");
  };
  if (image.rfind("oci-archive:", 0) == 0 || image.rfind("docker-archive:", 0) == 0) return refuse_archive();
  std::string layout_arg;
  if (image.rfind("oci:", 0) == 0) layout_arg = image.substr(4);
  else if (image.rfind("docker://", 0) != 0) {
    const auto [path, ref] = images::split_image_ref(image);
    std::error_code ec;
    if (fs::is_directory(path, ec)) layout_arg = image;
    else if (fs::exists(path, ec)) return refuse_archive();
  }
  if (!layout_arg.empty()) {
    auto [path, ref] = images::split_image_ref(layout_arg);
    std::error_code ec;
    if (!fs::is_regular_file(fs::path(path) / "index.json", ec))
      return make_error(ErrorKind::usage, "mark.bad_image", "not an OCI image layout (no index.json)", path, "give the directory `gpuenv build` wrote");
    return std::unique_ptr<MarkStore>(std::make_unique<LayoutMarkStore>(path, ref));
  }
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
  const auto valid_for = marks::parse_duration(r.valid_for);
  if (!valid_for || *valid_for <= 0)
    return make_error(ErrorKind::usage, "mark.bad_duration", "--valid-for '" + r.valid_for + "' is not a duration", "--valid-for", "write it as 30d, 12h, 90m or 3600s");
  GPUENV_TRY(facts, marks::read_report(bytes, report_where));
  GPUENV_TRY(store, open_mark_store(r.image, r.plain_http, services));
  GPUENV_TRY(image, store->image_digest());
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
      return out;
    }
    const marks::AttImage att = marks::append_record(existing, envelope, marks::k_predicate_type);
    if (auto st = store->write_att(image, att, envelope); !st) return std::move(st).error().while_("storing the mark in " + out.where);
    // Another host may have replaced the tag between our read and our write: read it back.
    GPUENV_TRY(again, store->read_att(image));
    if (has_layer(again, layer)) {
      out.records = again->layers.size();
      return out;
    }
  }
  return make_error(ErrorKind::environment, "mark.lost_race", "the mark was overwritten by another writer three times", out.where,
                    "other hosts are marking this image at the same moment; mark again");
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
    const auto age = marks::parse_duration(r.max_age);
    if (!age) return make_error(ErrorKind::usage, "verify.max_age", "--max-age '" + r.max_age + "' is not a duration", "--max-age", "write it as 7d, 12h, 90m or 3600s");
    w.max_age_s = *age;
  }
  w.level = r.level;
  w.driver = r.driver == "auto" ? "" : r.driver;
  w.cc_mode = r.cc == "auto" ? "" : r.cc;
  if (r.gpu == "auto" || r.driver == "auto" || r.cc == "auto") {
    GPUENV_TRY(host, probe_host(r, services));
    if (r.gpu == "auto") w.gpu_product = host.gpu;
    if (r.driver == "auto") w.driver = host.driver;
    if (r.cc == "auto") w.cc_mode = host.cc;
  }
  if (r.gpu != "auto") w.gpu_product = r.gpu;
  w.allow_replay = r.allow_replay;
  w.now = now_seconds(services);

  GPUENV_TRY(store, open_mark_store(r.image, r.plain_http, services));
  GPUENV_TRY(image, store->image_digest());
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
  GPUENV_TRY(digest, store->image_digest());
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
