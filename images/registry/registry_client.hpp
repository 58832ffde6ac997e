#pragma once
// A client of the OCI distribution spec (v1.1): pushes an image from an OCI image layout to a registry and
// pulls one from a registry into a layout. Speaks anonymous, HTTP basic and bearer-token authentication
// (the WWW-Authenticate challenge of the Docker token protocol), with credentials taken from the caller or
// from a Docker config.json. Credentials never appear in errors.
//
// Uploads: one path for every blob (put_blob: HEAD, a cross-repository mount when asked, POST, then one PUT or
// PATCH chunks and a PUT, the registry's digest checked) and one for every manifest (put_manifest); push and the
// marks' registry store go through them.
//
// Retries: requests that are safe to repeat (HEAD, GET, the manifest PUT, the monolithic blob PUT, the POST
// that starts an upload) are retried by the HttpClient. A chunk (PATCH) of a chunked upload is not retried: a
// failed chunk fails that blob, and pushing again resumes at blob granularity (blobs already in the registry
// are skipped).
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "images/oci/layout.hpp"
#include "resolver/platform.hpp"
#include "base/net/http_client.hpp"
#include "base/base64.hpp"
#include "base/digest.hpp"
#include "base/error.hpp"

namespace gpuenv::images {

namespace media_type {
inline constexpr const char* k_docker_manifest = "application/vnd.docker.distribution.manifest.v2+json";
inline constexpr const char* k_docker_manifest_list = "application/vnd.docker.distribution.manifest.list.v2+json";
}  // namespace media_type

/// Where an image lives: "host[:port]/repo/path[:tag][@sha256:hex]".
struct ImageReference {
  std::string registry;    ///< host[:port], as written
  std::string repository;  ///< "team/image"
  std::string tag;         ///< "latest" when neither tag nor digest is given
  std::string digest;      ///< "sha256:<hex>" or empty

  /// The tag or, when given, the digest: what goes after /manifests/.
  [[nodiscard]] std::string manifest_reference() const { return digest.empty() ? tag : digest; }
  /// The reference written back in canonical form.
  [[nodiscard]] std::string to_string() const;
};

/// Parses an image reference; the registry host must be explicit (contain '.' or ':', or be "localhost").
/// Error: `registry.bad_reference` (ErrorKind::usage) naming what is wrong.
Result<ImageReference> parse_image_reference(std::string_view text);

/// A user name and password (or token) for a registry.
struct RegistryCredentials {
  std::string username;
  std::string password;
};

/// The credentials for `registry` (host[:port]) in the text of a Docker config.json ("auths" entries keyed by
/// host, with or without scheme and path; "auth" base64 "user:password", or "username"/"password"). No entry,
/// or an entry without usable credentials (a credential helper's), is nullopt. Error: `registry.config`.
Result<std::optional<RegistryCredentials>> parse_docker_config_credentials(std::string_view json_text, const std::string& registry,
                                                                           const std::string& where = "config.json");

/// Like parse_docker_config_credentials, reading `path` (e.g. $HOME/.docker/config.json, given by the caller);
/// a missing file is nullopt.
Result<std::optional<RegistryCredentials>> load_docker_config_credentials(const std::string& path, const std::string& registry);

/// A parsed WWW-Authenticate challenge: `Bearer realm="...",service="...",scope="..."`.
struct AuthChallenge {
  std::string scheme;                         ///< lower-cased: "bearer", "basic"
  std::map<std::string, std::string> params;  ///< names lower-cased, values unquoted
};

/// Parses the first challenge of a WWW-Authenticate header. Error: `registry.auth_challenge`.
Result<AuthChallenge> parse_auth_challenge(std::string_view header);

/// Base64 (base/base64.hpp): standard and padded when written; standard or URL-safe when read.
using gpuenv::base64_decode;
using gpuenv::base64_encode;

/// How to reach a registry.
struct RegistryOptions {
  bool plain_http = false;                              ///< http:// instead of https:// (a loopback test registry)
  std::optional<RegistryCredentials> credentials;       ///< for basic auth and for the token realm
  std::uint64_t chunk_threshold = std::uint64_t{64} << 20;  ///< blobs larger than this are uploaded in chunks
  std::uint64_t chunk_size = std::uint64_t{64} << 20;
  int parallel_blobs = 3;                               ///< blobs pushed or pulled at once
  std::uint64_t max_manifest_bytes = 4u << 20;
};

/// What to push.
struct PushOptions {
  std::string ref_name;    ///< the index.json entry whose org.opencontainers.image.ref.name is this; empty: the only one
  std::string mount_from;  ///< a repository on the same registry to mount blobs from (empty: no mount attempt)
  /// Blobs the layout lacks on purpose (a build served from the registry's build cache leaves its layers there):
  /// one of these missing from the layout is pushed as BlobSource::remote, present in the target repository or
  /// mounted from `mount_from`, else `registry.blob_missing`. A blob the layout holds is pushed as usual.
  std::set<Digest> remote_blobs;
};

/// What a push did.
struct PushStats {
  int blobs_present = 0;   ///< already in the repository (HEAD said so)
  int blobs_mounted = 0;   ///< mounted from `mount_from`
  int blobs_uploaded = 0;  ///< uploaded (monolithic or chunked)
  int chunks = 0;          ///< PATCH requests sent
  std::uint64_t bytes_uploaded = 0;
  int manifests = 0;       ///< manifests and indexes PUT
  Digest digest;           ///< of the top manifest, as the registry confirmed it
};

/// A blob to upload: its digest and size, and its bytes in memory or in a file, which is streamed and never read
/// whole; or a blob that is never uploaded (`remote_only`), which only a HEAD or a mount can put in place.
struct BlobSource {
  Digest digest;           ///< what the upload's ?digest= names and the registry must confirm
  std::uint64_t size = 0;  ///< above RegistryOptions::chunk_threshold the blob goes up in chunks
  std::string_view bytes;  ///< the blob when `path` is empty; must outlive the upload
  std::string path;        ///< a file holding exactly the blob
  bool remote_only = false;  ///< no bytes here: present in the repository or mounted, else `registry.blob_missing`

  /// BYTES (hashed here), which must outlive the upload.
  static BlobSource of(std::string_view bytes);
  /// A temporary string would be gone before the upload: refused at compile time.
  static BlobSource of(std::string&& bytes) = delete;
  /// The file at PATH, whose SIZE bytes have DIGEST; the registry checks the digest of what it receives.
  static BlobSource file(std::string path, const Digest& digest, std::uint64_t size);
  /// A blob that lives only in the registry (DIGEST, SIZE bytes): put_blob finds it with a HEAD or mounts it, and
  /// never uploads it.
  static BlobSource remote(const Digest& digest, std::uint64_t size);
};

/// How a blob came to be in a repository.
enum class BlobOutcome { present, mounted, uploaded };

/// What put_blob did.
struct BlobPut {
  BlobOutcome outcome = BlobOutcome::present;
  int chunks = 0;                    ///< PATCH requests sent
  std::uint64_t bytes_uploaded = 0;  ///< the blob's size when it was uploaded, else 0
};

/// Which image to pull out of a multi-platform index.
struct PullOptions {
  resolver::Platform platform;  ///< chosen from an index by images::platform_entry
};

/// What a pull did.
struct PullStats {
  Descriptor manifest;  ///< as written to index.json (media type, digest, size, ref name)
  Digest index_digest;  ///< the index the reference named, when the manifest was chosen from one; else empty
  int blobs_downloaded = 0;
  int blobs_present = 0;  ///< already in the layout
  std::uint64_t bytes_downloaded = 0;
};

/// An image's manifest and config as a registry serves them, without any layer.
struct RemoteImage {
  std::string manifest;         ///< the image manifest's bytes (the chosen platform's when the reference names an index)
  Digest manifest_digest;       ///< of `manifest`
  std::string media_type;       ///< of `manifest`
  Digest index_digest;          ///< the index the manifest was chosen from; empty when the reference named a manifest
  Descriptor config_descriptor;  ///< as the manifest names it
  std::string config;           ///< the config blob's bytes, matching config_descriptor
};

/// A manifest or index as a registry serves it.
struct RemoteManifest {
  std::string bytes;
  std::string media_type;
  Digest digest;  ///< of bytes
};

struct RegistryAuthCache;

/// Whether ERROR, an unexpected answer of a registry, carries the distribution-spec error CODE the registry sent
/// ("MANIFEST_BLOB_UNKNOWN"): the codes stand in the message as "(CODE: message; CODE: message)".
bool registry_said(const Error& error, std::string_view code);

/// "sha256-<hex>": the referrers tag schema's fallback tag of the manifest DIGEST (distribution-spec 1.1), under
/// which clients of a registry without the referrers API keep the index of its referrers.
std::string referrers_fallback_tag(const Digest& digest);

/// Talks to registries through an HttpClient. Errors (ErrorKind::environment unless noted): `registry.auth`
/// (401/403), `registry.not_found` (404), `registry.http` (other failures, with the registry's error codes),
/// `registry.digest_mismatch`, `registry.truncated` (a blob shorter than its descriptor), `registry.media_type`,
/// `registry.layout` (the local layout is unusable), and the HttpClient's own errors.
class RegistryClient {
 public:
  /// `http` must outlive the client.
  RegistryClient(HttpClient& http, RegistryOptions options);

  /// Pushes the image named by `options.ref_name` in the OCI layout at `layout_dir` (an image manifest or an
  /// index with its manifests) to `ref` (its tag; a digest in `ref` must match the manifest's).
  Result<PushStats> push(const std::string& layout_dir, const ImageReference& ref, const PushOptions& options = {});

  /// Pulls `ref` into the OCI layout at `layout_dir` (created if missing), choosing a platform from an index;
  /// index.json is written last and names the pulled manifest with ref name = the tag (or the digest).
  Result<PullStats> pull(const ImageReference& ref, const std::string& layout_dir, const PullOptions& options = {});

  /// Fetches `ref`'s image manifest (choosing a platform from an index as pull does), checked against its digest,
  /// and nothing else: the subject of what is stored beside an image (marks). Errors as pull's.
  Result<RemoteManifest> fetch_image_manifest(const ImageReference& ref, const PullOptions& options = {});

  /// Fetches `ref`'s image manifest (choosing a platform from an index as pull does) and its config blob, each
  /// checked against its digest, and no layer. Errors as pull's; a config over 16 MiB is `registry.manifest`.
  Result<RemoteImage> fetch_manifest_and_config(const ImageReference& ref, const PullOptions& options = {});

  /// Whether blob `digest` exists in `ref`'s repository.
  Result<bool> blob_exists(const ImageReference& ref, const Digest& digest);

  // Single documents, for what lives beside an image (marks: docs/mark.md). Each checks digests as pull does.

  /// The manifest or index tagged (or digested) REFERENCE in REF's repository, asked for with every OCI and
  /// Docker manifest type in Accept; std::nullopt when the registry has none (404 MANIFEST_UNKNOWN or
  /// NAME_UNKNOWN). Errors as pull's.
  Result<std::optional<RemoteManifest>> get_manifest(const ImageReference& ref, const std::string& reference);
  /// Blob D of REF's repository in memory, checked against its size and digest; `registry.manifest` when it is
  /// larger than LIMIT.
  Result<std::string> get_blob(const ImageReference& ref, const Descriptor& d, std::uint64_t limit);
  /// Blob D of REF's repository into LAYOUT (nothing when the layout has it): streamed to a temporary file of the
  /// layout, checked against D's size and digest, then adopted under its digest. Errors as pull's.
  Status fetch_blob(const ImageReference& ref, const Descriptor& d, OciLayout& layout);
  /// Puts blob SOURCE into REF's repository unless a HEAD finds it there: mounted from MOUNT_FROM (a repository
  /// of the same registry; empty: no attempt) when the registry agrees, else a POST and one PUT, or PATCH chunks
  /// of chunk_size and a PUT when the blob is larger than chunk_threshold. A Docker-Content-Digest naming another
  /// digest is `registry.digest_mismatch`; a remote source (BlobSource::remote) that is neither present nor
  /// mountable is `registry.blob_missing`; other errors as the class says.
  Result<BlobPut> put_blob(const ImageReference& ref, const BlobSource& source, const std::string& mount_from = {});
  /// What a manifest PUT answered.
  struct PutManifest {
    Digest digest;            ///< of the bytes, checked against the one the registry confirms
    std::string oci_subject;  ///< the OCI-Subject header: the registry processed the manifest's subject (referrers API)
  };
  /// PUTs BYTES as a manifest of MEDIA_TYPE under REFERENCE (a tag, or its own digest); a Docker-Content-Digest
  /// naming another digest is `registry.digest_mismatch`.
  Result<PutManifest> put_manifest(const ImageReference& ref, const std::string& reference, const std::string& bytes, const std::string& media_type);
  /// Whether REF's repository answers the referrers API for DIGEST (GET /v2/<name>/referrers/<digest>: 200 with
  /// an OCI index); false for a 404 or 400, which sends the caller to the tag schema's fallback index.
  Result<bool> has_referrers_api(const ImageReference& ref, const Digest& digest);
  /// The referrers of DIGEST in REF's repository as the referrers API lists them (an OCI index, at most
  /// max_manifest_bytes; only the first page when the registry pages the list); std::nullopt when the registry
  /// has no referrers API (as has_referrers_api decides), which sends the caller to the fallback index
  /// (referrers_fallback_tag). Errors as pull's.
  Result<std::optional<RemoteManifest>> get_referrers(const ImageReference& ref, const Digest& digest);

 private:
  HttpClient& m_http;
  RegistryOptions m_o;
  std::shared_ptr<RegistryAuthCache> m_auth;  // Authorization values by registry and scope
};

}  // namespace gpuenv::images
