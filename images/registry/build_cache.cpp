#include "images/registry/build_cache.hpp"

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <map>
#include <chrono>
#include <thread>

#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "base/json_field.hpp"
#include "base/safe_text.hpp"
#include "images/registry/referrers.hpp"

namespace gpuenv::images {

// Helpers in a named namespace: the unity build puts this file beside the registry client's.
namespace build_cache_detail {

using nlohmann::json;

constexpr const char* k_empty_type = "application/vnd.oci.empty.v1+json";
constexpr std::string_view k_empty_blob = "{}";
constexpr const char* k_created = "org.opencontainers.image.created";
/// Nesting of a valid document: the document, images, an image, its layers, a descriptor; a little more is allowed.
constexpr int k_max_depth = 8;
/// Build cache documents the fallback index keeps; older ones are dropped from it by the next writer.
constexpr std::size_t k_max_index_documents = 1024;
constexpr std::size_t k_max_generator = 256;
constexpr std::size_t k_max_name = 64;
constexpr const char* k_bad_hint = "the build cache's document is damaged or was written by another tool; the build goes on without it";

Error bad(const std::string& where, const std::string& what) {
  return make_error(ErrorKind::environment, "cache.bad_document", what, where, k_bad_hint);
}

/// Refuses, before parsing, a document over the size limit or nested deeper than any valid one (scanned once,
/// strings skipped), so a hostile document costs one pass over at most max_document_bytes.
Status guard_text(std::string_view text, const std::string& where, const BuildCacheLimits& limits) {
  if (text.size() > limits.max_document_bytes) {
    return bad(where, "the document has " + std::to_string(text.size()) + " bytes, more than the " + std::to_string(limits.max_document_bytes) +
                          " allowed");
  }
  int depth = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > k_max_depth) return bad(where, "the document is nested deeper than " + std::to_string(k_max_depth) + " levels");
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return ok_status();
}

/// The JSON of TEXT, refusing a syntax error and a key repeated in one object (which a plain parse would let
/// the last one win).
Result<json> parse_strictly(std::string_view text, const std::string& where) {
  std::vector<std::set<std::string>> keys;
  std::string repeated;
  const json::parser_callback_t on_event = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      keys.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      if (!keys.empty()) keys.pop_back();
    } else if (event == json::parse_event_t::key && !keys.empty() && parsed.is_string()) {
      if (!keys.back().insert(parsed.get<std::string>()).second && repeated.empty()) repeated = parsed.get<std::string>();
    }
    return true;
  };
  json j = json::parse(text, on_event, false);
  if (j.is_discarded()) return bad(where, "the document is not JSON");
  if (!repeated.empty()) return bad(where, "the key '" + safe_text(repeated, 64) + "' appears twice in one object");
  return j;
}

/// Whether J is an object with exactly the fields FIELDS; an error naming the first missing or unknown one.
Status exact_fields(const json& j, std::initializer_list<const char*> fields, const std::string& where, const std::string& path) {
  if (!j.is_object()) return bad(where, path + " is not an object");
  for (const char* f : fields)
    if (!j.contains(f)) return bad(where, path + " lacks the field '" + f + "'");
  for (const auto& item : j.items()) {
    const std::string& name = item.key();  // not a structured binding: clang 14 cannot capture one in a lambda
    if (std::find_if(fields.begin(), fields.end(), [&](const char* f) { return name == f; }) == fields.end()) {
      return bad(where, path + " has an unknown field '" + safe_text(name, 64) + "'");
    }
  }
  return ok_status();
}

constexpr const char* k_top = "the document";

/// "PATH.FIELD" for messages; FIELD alone at the top.
std::string field_path(const std::string& path, const char* field) { return path == k_top ? std::string(field) : path + "." + field; }

Result<std::string> string_at(const json& j, const char* field, const std::string& where, const std::string& path) {
  const json& v = j.at(field);
  if (!v.is_string()) return bad(where, field_path(path, field) + " is not a string");
  return v.get<std::string>();
}

Result<std::string> key_at(const json& j, const std::string& where, const std::string& path) {
  GPUENV_TRY(key, string_at(j, "key", where, path));
  if (!is_sha256_hex(key)) return bad(where, path + ".key '" + safe_text(key, 80) + "' is not 64 lower-case hex digits");
  return key;
}

Result<resolver::Platform> platform_at(const json& j, const std::string& where, const std::string& path) {
  GPUENV_TRY(text, string_at(j, "platform", where, path));
  auto platform = resolver::parse_platform(text);
  // Only the spelling render writes: the same document has the same bytes.
  if (!platform || platform->str() != text) {
    return bad(where, path + ".platform '" + safe_text(text, 64) + "' is not linux/amd64 or linux/arm64");
  }
  return *platform;
}

Result<Digest> digest_at(const json& j, const char* field, const std::string& where, const std::string& path) {
  GPUENV_TRY(text, string_at(j, field, where, path));
  auto digest = Digest::parse(text);
  if (!digest) return bad(where, path + "." + field + " '" + safe_text(text, 80) + "' is not sha256: and 64 lower-case hex digits");
  return *digest;
}

bool is_layer_type(const std::string& mt) { return mt == media_type::k_layer_gzip || mt == media_type::k_layer_zstd; }

/// A descriptor of the document: exactly mediaType, digest (sha256) and size; its media type one ALLOWED accepts.
template <class Allowed>
Result<Descriptor> descriptor_of(const json& v, const std::string& where, const std::string& path, Allowed allowed, const char* expected) {
  GPUENV_CHECK(exact_fields(v, {"mediaType", "digest", "size"}, where, path));
  GPUENV_TRY(mt, string_at(v, "mediaType", where, path));
  if (!allowed(mt)) return bad(where, path + ".mediaType '" + safe_text(mt, 100) + "' is not " + expected);
  auto d = parse_descriptor(v, where, {ErrorKind::environment, "cache.bad_document", k_bad_hint});
  if (!d) return std::move(d).error().while_("reading " + path);
  return std::move(*d);
}

/// An array field of J with at most LIMIT entries.
Result<const json*> array_at(const json& j, const char* field, std::size_t limit, const std::string& where, const std::string& path) {
  const json& v = j.at(field);
  if (!v.is_array()) return bad(where, field_path(path, field) + " is not an array");
  if (v.size() > limit) {
    return bad(where, field_path(path, field) + " has " + std::to_string(v.size()) + " entries, more than the " + std::to_string(limit) + " allowed");
  }
  return &v;
}

Result<CachedImage> image_of(const json& j, const std::string& where, const std::string& path, const BuildCacheLimits& limits) {
  GPUENV_CHECK(exact_fields(j, {"key", "platform", "manifest", "config", "sbom", "layers"}, where, path));
  CachedImage out;
  GPUENV_TRY(key, key_at(j, where, path));
  GPUENV_TRY(platform, platform_at(j, where, path));
  out.key = std::move(key);
  out.platform = platform;
  auto is = [](const char* want) { return [want](const std::string& mt) { return mt == want; }; };
  GPUENV_TRY(manifest, descriptor_of(j.at("manifest"), where, path + ".manifest", is(media_type::k_manifest), media_type::k_manifest));
  GPUENV_TRY(config, descriptor_of(j.at("config"), where, path + ".config", is(media_type::k_config), media_type::k_config));
  const std::string spdx(k_spdx_type);
  GPUENV_TRY(sbom, descriptor_of(j.at("sbom"), where, path + ".sbom", is(spdx.c_str()), spdx.c_str()));
  out.manifest = std::move(manifest);
  out.config = std::move(config);
  out.sbom = std::move(sbom);
  GPUENV_TRY(layers, array_at(j, "layers", limits.max_image_layers, where, path));
  for (std::size_t i = 0; i < layers->size(); ++i) {
    GPUENV_TRY(d, descriptor_of((*layers)[i], where, path + ".layers[" + std::to_string(i) + "]", is_layer_type, "a tar+gzip or tar+zstd layer"));
    out.layers.push_back(std::move(d));
  }
  return out;
}

Result<CachedLayer> layer_of(const json& j, const std::string& where, const std::string& path) {
  GPUENV_CHECK(exact_fields(j, {"key", "platform", "name", "blob", "diff_id", "files"}, where, path));
  CachedLayer out;
  GPUENV_TRY(key, key_at(j, where, path));
  GPUENV_TRY(platform, platform_at(j, where, path));
  GPUENV_TRY(name, string_at(j, "name", where, path));
  const bool name_ok = !name.empty() && name.size() <= k_max_name &&
                       name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-_.") == std::string::npos;
  if (!name_ok) return bad(where, path + ".name '" + safe_text(name, 80) + "' is not a layer name (lower-case letters, digits, '-', '_', '.')");
  GPUENV_TRY(blob, descriptor_of(j.at("blob"), where, path + ".blob", is_layer_type, "a tar+gzip or tar+zstd layer"));
  GPUENV_TRY(diff_id, digest_at(j, "diff_id", where, path));
  GPUENV_TRY(files, digest_at(j, "files", where, path));
  out.key = std::move(key);
  out.platform = platform;
  out.name = std::move(name);
  out.blob = std::move(blob);
  out.diff_id = std::move(diff_id);
  out.files = std::move(files);
  return out;
}

/// A descriptor as the document writes it: media type, digest and size, never annotations.
json descriptor_value(const Descriptor& d) { return json{{"mediaType", d.media_type}, {"digest", d.digest.str()}, {"size", d.size}}; }

// ---- the registry store ----

Descriptor empty_descriptor() { return Descriptor{k_empty_type, Digest::of(k_empty_blob), k_empty_blob.size(), {}}; }

std::string root_manifest_bytes(const std::string& name) {
  const json empty = descriptor_value(empty_descriptor());
  const json m = {{"schemaVersion", 2},
                  {"mediaType", media_type::k_manifest},
                  {"artifactType", std::string(k_build_cache_root_type)},
                  {"config", empty},
                  {"layers", json::array({empty})},
                  {"annotations", {{"dev.gpuenv.build-cache.name", name}}}};
  return m.dump();
}

Descriptor root_descriptor(const std::string& name) {
  const std::string bytes = root_manifest_bytes(name);
  return Descriptor{media_type::k_manifest, Digest::of(bytes), bytes.size(), {}};
}

std::string document_manifest(const Descriptor& root, const Descriptor& envelope, const std::vector<CacheBlob>& blobs, const std::string& created) {
  json layers = json::array({descriptor_value(envelope)});
  for (const auto& b : blobs) layers.push_back(descriptor_value(b.descriptor));
  const json m = {{"schemaVersion", 2},
                  {"mediaType", media_type::k_manifest},
                  {"artifactType", std::string(k_build_cache_artifact_type)},
                  {"config", descriptor_value(empty_descriptor())},
                  {"layers", layers},
                  {"subject", descriptor_value(root)},
                  {"annotations", {{k_created, created}}}};
  return m.dump();
}

/// The org.opencontainers.image.created annotation of a manifest or an index entry; "" when it has none.
std::string created_of(const json& j) { return string_field(field_of_type(j, "annotations", json::value_t::object), k_created); }

std::string why(const Error& e) { return safe_text(e.message, 300); }

/// A referrer of the root as the referrers list names it.
struct Candidate {
  Descriptor manifest;
  std::string created;
};

}  // namespace build_cache_detail


// ---- the document ----

std::vector<Descriptor> CacheDocument::blobs() const {
  std::vector<Descriptor> out;
  std::set<Digest> seen;
  auto add = [&](Descriptor d, const std::string& media_type) {
    d.annotations.clear();
    if (!media_type.empty()) d.media_type = media_type;
    if (seen.insert(d.digest).second) out.push_back(std::move(d));
  };
  for (const auto& image : images) {
    add(image.manifest, std::string(k_cached_manifest_type));
    add(image.config, {});
    add(image.sbom, {});
    for (const auto& l : image.layers) add(l, {});
  }
  for (const auto& l : layers) add(l.blob, {});
  return out;
}

namespace build_cache_detail {

std::string render_document(const CacheDocument& document) {
  json images = json::array();
  for (const auto& image : document.images) {
    json layers = json::array();
    for (const auto& l : image.layers) layers.push_back(descriptor_value(l));
    images.push_back({{"key", image.key},
                      {"platform", image.platform.str()},
                      {"manifest", descriptor_value(image.manifest)},
                      {"config", descriptor_value(image.config)},
                      {"sbom", descriptor_value(image.sbom)},
                      {"layers", layers}});
  }
  json layers = json::array();
  for (const auto& l : document.layers) {
    layers.push_back({{"key", l.key},
                      {"platform", l.platform.str()},
                      {"name", l.name},
                      {"blob", descriptor_value(l.blob)},
                      {"diff_id", l.diff_id.str()},
                      {"files", l.files.str()}});
  }
  // nlohmann::json keeps an object's keys sorted, and dump() without an indent writes no spaces.
  const json doc = {{"schema", std::string(k_build_cache_schema)}, {"generator", document.generator}, {"images", images}, {"layers", layers}};
  return doc.dump();
}

Result<CacheDocument> parse_document(std::string_view json_text, const std::string& where, const BuildCacheLimits& limits) {
  GPUENV_CHECK(guard_text(json_text, where, limits));
  GPUENV_TRY(j, parse_strictly(json_text, where));
  if (!j.is_object()) return bad(where, "the document is not a JSON object");
  const std::string schema = string_field(j, "schema", "(none)");
  if (schema != k_build_cache_schema) {
    return make_error(ErrorKind::environment, "cache.schema", "the document's schema is '" + safe_text(schema, 80) + "', not " + std::string(k_build_cache_schema),
                      where, "a gpuenv of another version wrote this build cache; the build goes on without it (use a cache of its own for each version)");
  }
  GPUENV_CHECK(exact_fields(j, {"schema", "generator", "images", "layers"}, where, k_top));
  CacheDocument out;
  GPUENV_TRY(generator, string_at(j, "generator", where, k_top));
  if (generator.size() > k_max_generator || !is_safe_text(generator)) return bad(where, "the document's generator is not a short line of text");
  out.generator = std::move(generator);
  GPUENV_TRY(images, array_at(j, "images", limits.max_images, where, k_top));
  GPUENV_TRY(layers, array_at(j, "layers", limits.max_layers, where, k_top));
  for (std::size_t i = 0; i < images->size(); ++i) {
    GPUENV_TRY(image, image_of((*images)[i], where, "images[" + std::to_string(i) + "]", limits));
    out.images.push_back(std::move(image));
  }
  for (std::size_t i = 0; i < layers->size(); ++i) {
    GPUENV_TRY(layer, layer_of((*layers)[i], where, "layers[" + std::to_string(i) + "]"));
    out.layers.push_back(std::move(layer));
  }
  return out;
}

}  // namespace build_cache_detail

std::string render_cache_document(const CacheDocument& document) { return build_cache_detail::render_document(document); }

Result<CacheDocument> parse_cache_document(std::string_view json_text, const std::string& where, const BuildCacheLimits& limits) {
  return build_cache_detail::parse_document(json_text, where, limits);
}

std::string build_cache_root_manifest(const std::string& name) { return build_cache_detail::root_manifest_bytes(name); }

// ---- the registry store ----

RegistryBuildCache::RegistryBuildCache(RegistryClient& client, ImageReference ref, BuildCacheLimits limits)
    : m_client(client), m_ref(std::move(ref)), m_limits(limits) {}

namespace build_cache_detail {

std::string repository_of(const ImageReference& ref) { return ref.registry + "/" + ref.repository; }

/// The root under REF's tag (or digest): std::nullopt when there is none, an error when it is something else.
Result<std::optional<Descriptor>> find_root(RegistryClient& client, const ImageReference& ref) {
  const Descriptor root = root_descriptor(ref.manifest_reference());
  const std::string reference = ref.manifest_reference();
  GPUENV_TRY(found, client.get_manifest(ref, reference));
  if (!found) return std::optional<Descriptor>();
  if (found->digest != root.digest) {
    return make_error(ErrorKind::usage, "cache.not_a_cache",
                      ref.to_string() + " names " + found->digest.str() + ", which is not a gpuenv build cache's root " + root.digest.str(),
                      ref.to_string(), "give the build cache a tag of its own (e.g. " + repository_of(ref) + ":build-cache); gpuenv never overwrites another manifest");
  }
  return std::optional<Descriptor>(root);
}

/// The referrers of ROOT, newest first, of the build cache's type; what was passed over goes to NOTES.
std::vector<Candidate> candidates_of(const RemoteManifest& index, const std::string& where, std::vector<std::string>& notes) {
  const json j = json::parse(index.bytes, nullptr, false);
  if (!j.is_object() || !j.contains("manifests") || !j["manifests"].is_array()) {
    notes.push_back("the list of " + where + "'s documents is not an OCI index; no document was read");
    return {};
  }
  std::vector<Candidate> out;
  std::size_t other_types = 0, malformed = 0;
  std::string an_other_type;
  for (const auto& e : j["manifests"]) {
    const std::string type = string_field(e, "artifactType");
    if (type != k_build_cache_artifact_type) {
      if (other_types++ == 0) an_other_type = type.empty() ? "(none)" : type;
      continue;
    }
    auto d = parse_descriptor(e, where);
    if (!d || d->media_type != media_type::k_manifest) {
      ++malformed;
      continue;
    }
    out.push_back(Candidate{*d, created_of(e)});
  }
  if (other_types > 0) {
    notes.push_back("skipped " + std::to_string(other_types) + " referrer(s) of " + where + " of another type than " + std::string(k_build_cache_artifact_type) +
                    " (e.g. '" + safe_text(an_other_type, 100) + "')");
  }
  if (malformed > 0) notes.push_back("skipped " + std::to_string(malformed) + " malformed entr" + (malformed == 1 ? "y" : "ies") + " of " + where + "'s referrers");
  std::sort(out.begin(), out.end(), [](const Candidate& a, const Candidate& b) {
    return referrer_is_newer(a.created, a.manifest.digest.str(), b.created, b.manifest.digest.str());
  });
  return out;
}

/// One referrer read: std::nullopt, with a note, when it is not a usable document.
Result<std::optional<StoredDocument>> read_document(RegistryClient& client, const ImageReference& ref, const Candidate& c, const Digest& root,
                                                    const BuildCacheLimits& limits, std::vector<std::string>& notes) {
  const std::string where = repository_of(ref) + "@" + c.manifest.digest.str();
  auto skip = [&](const std::string& why_not) {
    notes.push_back("skipped the build cache document " + where + ": " + why_not);
    return std::optional<StoredDocument>();
  };
  if (c.manifest.size > limits.max_document_bytes) {
    return skip("its manifest has " + std::to_string(c.manifest.size) + " bytes, more than the " + std::to_string(limits.max_document_bytes) + " allowed");
  }
  auto manifest = client.get_manifest(ref, c.manifest.digest.str());
  if (!manifest) {
    if (is_referrer_fault(manifest.error())) return skip(why(manifest.error()));
    return std::move(manifest).error().while_("reading the build cache document " + where);
  }
  if (!*manifest) return skip("its manifest is gone from the registry");
  const json m = json::parse((*manifest)->bytes, nullptr, false);
  if (string_field(m, "artifactType") != k_build_cache_artifact_type) return skip("its manifest's artifactType is '" + safe_text(string_field(m, "artifactType"), 100) + "'");
  if (!m.contains("subject") || string_field(m["subject"], "digest") != root.str()) return skip("its manifest's subject is not the build cache's root");
  if (!m.contains("layers") || !m["layers"].is_array() || m["layers"].empty()) return skip("its manifest has no layers");
  auto envelope = parse_descriptor(m["layers"][0], where);
  if (!envelope) return skip(why(envelope.error()));
  if (envelope->media_type != k_build_cache_envelope_type) return skip("its first layer is '" + safe_text(envelope->media_type, 100) + "', not the signed document");
  if (envelope->size > limits.max_document_bytes) {
    return skip("its signed document has " + std::to_string(envelope->size) + " bytes, more than the " + std::to_string(limits.max_document_bytes) + " allowed");
  }
  auto bytes = client.get_blob(ref, *envelope, limits.max_document_bytes);
  if (!bytes) {
    if (is_referrer_fault(bytes.error())) return skip(why(bytes.error()));
    return std::move(bytes).error().while_("reading the build cache document " + where);
  }
  return std::optional<StoredDocument>(StoredDocument{c.manifest.digest, created_of(m), std::move(*bytes), where});
}


Result<CacheRead> read_cache(RegistryClient& client, const ImageReference& ref, const BuildCacheLimits& limits) {
  CacheRead out;
  const std::string doing = "reading the build cache " + ref.to_string();
  auto root = find_root(client, ref);
  if (!root) return std::move(root).error().while_(doing);
  if (!*root) return out;
  out.root_found = true;
  const Digest root_digest = (*root)->digest;
  auto listed = client.get_referrers(ref, root_digest);
  if (!listed) return std::move(listed).error().while_(doing);
  std::optional<RemoteManifest> index = std::move(*listed);
  out.referrers_api = index.has_value();
  if (!index) {
    auto fallback = client.get_manifest(ref, referrers_fallback_tag(root_digest));
    if (!fallback) return std::move(fallback).error().while_(doing);
    index = std::move(*fallback);
  }
  if (!index) return out;
  std::vector<Candidate> candidates = candidates_of(*index, ref.to_string(), out.notes);
  if (candidates.size() > limits.max_documents) {
    out.notes.push_back("skipped the " + std::to_string(candidates.size() - limits.max_documents) + " oldest document(s) of " + ref.to_string() +
                        " (only the newest " + std::to_string(limits.max_documents) + " are read)");
    candidates.resize(limits.max_documents);
  }
  for (const auto& c : candidates) {
    GPUENV_TRY(doc, read_document(client, ref, c, root_digest, limits, out.notes));
    if (doc) out.documents.push_back(std::move(*doc));
  }
  std::stable_sort(out.documents.begin(), out.documents.end(), [](const StoredDocument& a, const StoredDocument& b) {
    return referrer_is_newer(a.created, a.manifest.str(), b.created, b.manifest.str());
  });
  return out;
}

/// Makes every blob a document names present in REF's repository (HEAD, a mount from MOUNT_FROM, or an upload),
/// counted into STATS; a remote blob that is neither present nor mountable is `cache.blob_missing`.
Status put_named_blobs(RegistryClient& client, const ImageReference& ref, const std::vector<CacheBlob>& blobs, const std::string& mount_from, PushStats& stats) {
  for (const auto& b : blobs) {
    auto put = client.put_blob(ref, b.source, mount_from);
    if (!put) {
      Error e = std::move(put).error();
      if (e.id == "registry.blob_missing") e.id = "cache.blob_missing";
      return e;
    }
    switch (put->outcome) {
      case BlobOutcome::present: ++stats.blobs_present; break;
      case BlobOutcome::mounted: ++stats.blobs_mounted; break;
      case BlobOutcome::uploaded: ++stats.blobs_uploaded; break;
    }
    stats.chunks += put->chunks;
    stats.bytes_uploaded += put->bytes_uploaded;
  }
  return ok_status();
}

Result<CacheWrite> write_cache(RegistryClient& client, const ImageReference& ref, const std::string& envelope, const std::vector<CacheBlob>& blobs,
                              const std::string& mount_from, const std::string& created) {
  const std::string doing = "writing to the build cache " + ref.to_string();
  for (const auto& b : blobs) {
    if (b.source.digest != b.descriptor.digest || b.source.size != b.descriptor.size) {
      return make_error(ErrorKind::internal, "cache.bad_blob", "the source of blob " + b.descriptor.digest.str() + " holds " + b.source.digest.str(), ref.to_string(),
                        "this is a bug in gpuenv; report it");
    }
  }
  auto root = find_root(client, ref);
  if (!root) return std::move(root).error().while_(doing);
  const std::string empty(k_empty_blob);
  if (auto st = client.put_blob(ref, BlobSource::of(empty)); !st) return std::move(st).error().while_(doing);
  if (!*root) {
    // Two writers creating the root at once upload the same empty blob; docker-registry may then refuse the root
    // manifest for a moment as naming a blob it does not know yet (MANIFEST_BLOB_UNKNOWN, seen in CI's concurrent-writers
    // test). The blob is uploaded again and the root put again, at most three times, 100 and 200 ms apart.
    for (int attempt = 0;; ++attempt) {
      auto st = client.put_manifest(ref, ref.manifest_reference(), root_manifest_bytes(ref.manifest_reference()), media_type::k_manifest);
      if (st) break;
      if (attempt == 2 || !registry_said(st.error(), "MANIFEST_BLOB_UNKNOWN")) return std::move(st).error().while_(doing);
      std::this_thread::sleep_for(std::chrono::milliseconds(100 * (attempt + 1)));
      if (auto again = client.put_blob(ref, BlobSource::of(empty)); !again) return std::move(again).error().while_(doing);
    }
  }
  const Descriptor root_d = root_descriptor(ref.manifest_reference());
  CacheWrite out;
  if (auto st = put_named_blobs(client, ref, blobs, mount_from, out.blobs); !st) return std::move(st).error().while_(doing);
  const Descriptor envelope_d{std::string(k_build_cache_envelope_type), Digest::of(envelope), envelope.size(), {}};
  if (auto st = client.put_blob(ref, BlobSource::of(envelope)); !st) return std::move(st).error().while_(doing);
  const std::string manifest = document_manifest(root_d, envelope_d, blobs, created);
  auto put = put_referrer(client, ref, root_d.digest, manifest, k_max_index_documents);
  if (!put) {
    Error e = std::move(put).error();
    if (e.id == "registry.referrer_lost") e.id = "cache.write_lost";
    return std::move(e.while_(doing));
  }
  ++out.blobs.manifests;
  out.manifest = out.blobs.digest = put->manifest;
  out.referrers_api = put->referrers_api;
  out.index_writes = put->index_writes;
  return out;
}

}  // namespace build_cache_detail

Result<CacheRead> RegistryBuildCache::read() { return build_cache_detail::read_cache(m_client, m_ref, m_limits); }

Result<CacheWrite> RegistryBuildCache::write(const std::string& envelope, const std::vector<CacheBlob>& blobs, const std::string& mount_from,
                                             const std::string& created) {
  return build_cache_detail::write_cache(m_client, m_ref, envelope, blobs, mount_from, created);
}

Status RegistryBuildCache::fetch_blob(const Descriptor& d, OciLayout& layout) { return m_client.fetch_blob(m_ref, d, layout); }

Result<std::string> RegistryBuildCache::get_blob(const Descriptor& d, std::uint64_t limit) { return m_client.get_blob(m_ref, d, limit); }

}  // namespace gpuenv::images
