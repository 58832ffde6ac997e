#include "images/registry/referrers.hpp"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "base/json_field.hpp"

namespace gpuenv::images {

// Helpers in a named namespace: the unity build puts this file beside the registry client's.
namespace referrers_detail {

using nlohmann::json;

constexpr const char* k_created = "org.opencontainers.image.created";
constexpr int k_max_index_writes = 8;

/// The entries of an index's manifests list; empty for anything that is not an OCI index.
json index_entries(const std::optional<std::string>& index) {
  if (!index) return json::array();
  const json j = json::parse(*index, nullptr, false);
  return field_of_type(j, "manifests", json::value_t::array);
}

bool lists(const std::optional<std::string>& index, const Digest& manifest) {
  const json entries = index_entries(index);
  return std::any_of(entries.begin(), entries.end(), [&](const json& e) { return string_field(e, "digest") == manifest.str(); });
}

std::string created_of(const json& j) { return string_field(field_of_type(j, "annotations", json::value_t::object), k_created); }

/// The bytes of an index of ENTRIES.
std::string index_of(const json& entries) {
  const json index = {{"schemaVersion", 2}, {"mediaType", media_type::k_index}, {"manifests", entries}};
  return index.dump();
}

/// EXISTING's index without the entries whose manifests are gone from REF's repository.
Result<std::optional<std::string>> without_gone_entries(RegistryClient& client, const ImageReference& ref, const std::optional<std::string>& existing) {
  json kept = json::array();
  for (const auto& e : index_entries(existing)) {
    const auto digest = Digest::parse(string_field(e, "digest"));
    if (!digest) continue;
    auto found = client.get_manifest(ref, digest->str());
    if (!found && !is_referrer_fault(found.error())) return std::move(found).error();
    if (found && *found) kept.push_back(e);
  }
  return std::optional<std::string>(index_of(kept));
}

/// PUTs CURRENT with MANIFEST added as the fallback index TAG; a registry that refuses an index naming a manifest
/// deleted since gets the index without the deleted entries, once more, so one deletion cannot stop every later write.
Status put_index(RegistryClient& client, const ImageReference& ref, const std::string& tag, const std::optional<std::string>& current, std::string_view manifest,
                 std::size_t max_of_type) {
  auto put = client.put_manifest(ref, tag, referrers_index_with(current, manifest, max_of_type), media_type::k_index);
  if (put) return ok_status();
  if (!registry_said(put.error(), "MANIFEST_BLOB_UNKNOWN") && !registry_said(put.error(), "MANIFEST_UNKNOWN")) return std::move(put).error();
  GPUENV_TRY(kept, without_gone_entries(client, ref, current));
  GPUENV_CHECK(client.put_manifest(ref, tag, referrers_index_with(kept, manifest, max_of_type), media_type::k_index));
  return ok_status();
}

/// The fallback index TAG of REF's repository, as bytes; std::nullopt when there is none.
Result<std::optional<std::string>> read_index(RegistryClient& client, const ImageReference& ref, const std::string& tag) {
  GPUENV_TRY(found, client.get_manifest(ref, tag));
  if (!found) return std::optional<std::string>();
  return std::optional<std::string>(std::move(found->bytes));
}

void pause(std::mt19937& rng, int min_ms, int max_ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(min_ms, max_ms)(rng)));
}

}  // namespace referrers_detail

bool referrer_is_newer(const std::string& created_a, const std::string& digest_a, const std::string& created_b, const std::string& digest_b) {
  if (created_a != created_b) return created_a > created_b;
  return digest_a < digest_b;
}

std::string referrers_index_with(const std::optional<std::string>& existing, std::string_view manifest, std::size_t max_of_type) {
  using namespace referrers_detail;
  const Digest digest = Digest::of(manifest);
  if (existing && lists(existing, digest)) return *existing;  // there already
  const json m = json::parse(manifest, nullptr, false);
  json entry = {{"mediaType", media_type::k_manifest}, {"digest", digest.str()}, {"size", manifest.size()}};
  if (m.is_object() && m.contains("artifactType")) entry["artifactType"] = m["artifactType"];
  if (m.is_object() && m.contains("annotations")) entry["annotations"] = m["annotations"];
  const json kept = index_entries(existing);
  const std::string type = string_field(entry, "artifactType");
  std::vector<std::size_t> same_type;
  for (std::size_t i = 0; i < kept.size(); ++i)
    if (string_field(kept[i], "artifactType") == type) same_type.push_back(i);
  std::set<std::size_t> dropped;
  if (max_of_type != k_every_referrer && same_type.size() + 1 > max_of_type) {
    std::sort(same_type.begin(), same_type.end(), [&](std::size_t a, std::size_t b) {
      return referrer_is_newer(created_of(kept[b]), string_field(kept[b], "digest"), created_of(kept[a]), string_field(kept[a], "digest"));
    });  // oldest first
    dropped.insert(same_type.begin(), same_type.begin() + static_cast<std::ptrdiff_t>(same_type.size() + 1 - max_of_type));
  }
  json entries = json::array();
  for (std::size_t i = 0; i < kept.size(); ++i)
    if (dropped.count(i) == 0) entries.push_back(kept[i]);
  entries.push_back(std::move(entry));
  return index_of(entries);
}

bool is_referrer_fault(const Error& e) {
  static const std::set<std::string> faults = {"registry.not_found", "registry.digest_mismatch", "registry.truncated", "registry.manifest",
                                               "registry.media_type", "http.too_large"};
  return faults.count(e.id) > 0;
}

Result<int> add_to_fallback_index(RegistryClient& client, const ImageReference& ref, const Digest& subject, std::string_view manifest, std::size_t max_of_type) {
  using namespace referrers_detail;
  const std::string tag = referrers_fallback_tag(subject);
  const Digest digest = Digest::of(manifest);
  std::mt19937 rng(std::random_device{}());
  int writes = 0;
  for (int attempt = 0; attempt < k_max_index_writes; ++attempt) {
    if (attempt > 0) pause(rng, 10, 100);
    const auto started = std::chrono::steady_clock::now();
    GPUENV_TRY(current, read_index(client, ref, tag));
    if (!lists(current, digest)) {
      GPUENV_CHECK(put_index(client, ref, tag, current, manifest, max_of_type));
      ++writes;
      GPUENV_TRY(back, read_index(client, ref, tag));
      if (!lists(back, digest)) continue;  // a concurrent writer's index replaced ours
    }
    // A writer that read the index before our PUT may still write its own, without our entry: look again once a
    // read-modify-write like ours has had time to finish.
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count();
    const int wait = static_cast<int>(std::min<long long>(2000, 2 * took));
    pause(rng, 50 + wait, 150 + wait);
    GPUENV_TRY(again, read_index(client, ref, tag));
    if (lists(again, digest)) return writes;
  }
  const std::string where = ref.registry + "/" + ref.repository + ":" + tag;
  return make_error(ErrorKind::environment, "registry.referrer_lost",
                    "the fallback index " + where + " never kept the referrer " + digest.str() + " (" + std::to_string(k_max_index_writes) + " tries)",
                    where, "many writers are adding referrers to it at once; the referrer is stored but not listed: run the command again");
}

Result<PutReferrer> put_referrer(RegistryClient& client, const ImageReference& ref, const Digest& subject, const std::string& manifest,
                                 std::size_t max_of_type) {
  PutReferrer out;
  GPUENV_TRY(put, client.put_manifest(ref, Digest::of(manifest).str(), manifest, media_type::k_manifest));
  out.manifest = put.digest;
  out.referrers_api = !put.oci_subject.empty();
  if (!out.referrers_api) {
    GPUENV_TRY(api, client.has_referrers_api(ref, subject));
    out.referrers_api = api;
  }
  if (out.referrers_api) return out;
  GPUENV_TRY(writes, add_to_fallback_index(client, ref, subject, manifest, max_of_type));
  out.index_writes = writes;
  return out;
}

}  // namespace gpuenv::images
