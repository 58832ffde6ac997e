#include "app/marks.hpp"

#include "base/time.hpp"
#include "base/duration.hpp"
#include "app/status.hpp"

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "app/base_image.hpp"
#include "app/catalog.hpp"
#include "app/resolve.hpp"
#include "app/statements.hpp"
#include "base/file_io.hpp"
#include "base/file_lock.hpp"
#include "base/json_field.hpp"
#include "base/net/http_client.hpp"
#include "base/safe_text.hpp"
#include "images/oci/archive.hpp"
#include "images/oci/image_reader.hpp"
#include "images/oci/layout_image.hpp"
#include "images/registry/registry_client.hpp"
#include "marks/dsse.hpp"
#include "marks/from_report.hpp"
#include "marks/keys.hpp"
#include "marks/in_toto.hpp"
#include "marks/referrer.hpp"
#include "images/plan/image_config.hpp"

namespace gpuenv::app {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

/// A record larger than this is not one gpuenv wrote (a mark is a few KiB).
constexpr std::uint64_t k_max_record_bytes = 4u << 20;

/// The lock that serialises the writers of one image's marks: exclusive, waited for up to 60 s (a mark is written
/// in seconds; a longer wait is a stuck writer, docs/mark.md).
Result<FileLock> lock_marks(const std::string& path) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  LockOptions o;
  o.patience = std::chrono::seconds(60);
  o.what = "the mark writers' lock of this image";
  o.io = {"mark.io", "check the cache directory (GPUENV_CACHE_DIR)"};
  o.locked_id = "mark.locked";
  o.locked_hint = "wait for the other gpuenv marking this image to finish, or find the process that holds the lock (fuser " + path + ")";
  o.create_mode = 0600;
  return FileLock::acquire(path, o);
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

Result<std::unique_ptr<marks::MarkStore>> open_mark_store(const std::string& image, bool plain_http, Services& services) {
  GPUENV_TRY(place, marks::mark_store_place(image));
  if (place.kind == marks::MarkStorePlace::Kind::archive) return marks::open_archive_mark_store(place.path, place.ref, image);
  if (place.kind == marks::MarkStorePlace::Kind::layout) return marks::open_layout_mark_store(place.path, place.ref);
  Status problem = ok_status();
  const images::RegistryOptions options = registry_options(services, place.registry.registry, plain_http, &problem);
  if (!problem) return problem.error();
  GPUENV_TRY(http, open_http_client(services));
  return marks::make_registry_mark_store(place.registry, std::move(http), options);
}

Result<marks::Key> load_signing_key(const std::string& path, const Services& services) {
  std::string file = path;
  if (file.empty()) file = env_or(services, "GPUENV_MARK_KEY");
  if (file.empty())
    return make_error(ErrorKind::usage, "key.missing", "no signing key given", "--key",
                      "give the private key file with --key gpuenv.key or name it in GPUENV_MARK_KEY (gpuenv key generate makes one)");
  return marks::read_private_key(file);
}

Result<StoredRecord> store_record(marks::MarkStore& store, const Digest& image, const std::string& envelope, std::string_view predicate_type,
                                  Services& services) {
  StoredRecord out;
  const std::string where = store.where(image);
  const Digest layer = Digest::of(envelope);
  const std::string lock_path = cache_root(services) + "/locks/mark-" + Digest::of(store.lock_key(image)).hex().substr(0, 32) + ".lock";
  GPUENV_TRY(lock, lock_marks(lock_path));
  for (int attempt = 0; attempt < 3; ++attempt) {
    GPUENV_TRY(existing, store.read_att(image));
    if (has_layer(existing, layer)) {
      out.already_there = attempt == 0;
      out.records = existing->layers.size();
      break;
    }
    const marks::AttImage att = marks::append_record(existing, envelope, predicate_type);
    if (auto st = store.write_att(image, att, envelope); !st) return std::move(st).error().while_("storing the record in " + where);
    // Another host may have replaced the tag between our read and our write: read it back.
    GPUENV_TRY(again, store.read_att(image));
    if (has_layer(again, layer)) {
      out.records = again->layers.size();
      break;
    }
  }
  if (out.records == 0)
    return make_error(ErrorKind::environment, "mark.lost_race", "the record was overwritten by another writer three times", where,
                      "other hosts are writing this image's records at the same moment; try again");
  return out;
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
  GPUENV_TRY(stored, store_record(*store, image, envelope, marks::k_predicate_type, services));
  out.already_there = stored.already_there;
  out.records = stored.records;
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

Result<std::vector<marks::Key>> load_public_keys(const std::vector<std::string>& files) {
  if (files.empty()) return make_error(ErrorKind::usage, "key.missing", "no public key given", "--key", "give the public key of the signer: --key gpuenv.pub");
  std::vector<marks::Key> keys;
  for (const auto& k : files) {
    GPUENV_TRY(key, marks::read_public_key(k));
    keys.push_back(std::move(key));
  }
  return keys;
}

std::vector<const marks::Key*> key_pointers(const std::vector<marks::Key>& keys) {
  std::vector<const marks::Key*> out;
  for (const auto& k : keys) out.push_back(&k);
  return out;
}

Result<Verification> verify(const VerifyRequest& r, Services& services) {
  GPUENV_TRY(keys, load_public_keys(r.keys));
  const std::vector<const marks::Key*> key_ptrs = key_pointers(keys);
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
    // The image's SBOM and provenance share its attestation image (app/statements.hpp): not marks, not judged here.
    if (const auto t = layer.annotations.find("predicateType");
        t != layer.annotations.end() && (t->second == marks::k_cyclonedx_predicate_type || t->second == marks::k_slsa_predicate_type))
      continue;
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
      // An SBOM or provenance statement is listed by what it says; anything else by why it cannot be read.
      auto other = marks::parse_in_toto(env->payload, store->where(digest));
      l.summary = other ? statement_summary(*other) : std::string();
      if (l.summary.empty()) l.problem = st.error().message;
      else l.predicate_type = other->predicate_type;
    } else {
      l.statement = std::move(*st);
    }
    out.push_back(std::move(l));
  }
  return out;
}

}  // namespace gpuenv::app
