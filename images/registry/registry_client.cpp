#include "images/registry/registry_client.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "base/text.hpp"
#include "base/digest.hpp"
#include "base/file_io.hpp"
#include "base/json_field.hpp"

namespace gpuenv::images {

using nlohmann::json;

/// Authorization header values, shared by the sessions of one client (and their threads).
struct RegistryAuthCache {
  std::mutex mu;
  std::map<std::string, std::string> authorization;  // "registry scopes" (or "registry" for basic) -> header value
};

namespace {

constexpr const char* k_ref_name = "org.opencontainers.image.ref.name";
constexpr const char* k_octet_stream = "application/octet-stream";


/// Whether `d` is "sha256:" and 64 lower-case hex digits (the only digests gpuenv accepts, also because the
/// hex becomes a file name).
bool valid_digest(std::string_view d) { return is_sha256_digest(d); }

bool is_index_type(const std::string& mt) { return mt == media_type::k_index || mt == media_type::k_docker_manifest_list; }
bool is_manifest_type(const std::string& mt) { return mt == media_type::k_manifest || mt == media_type::k_docker_manifest; }

std::string accept_manifests() {
  return std::string(media_type::k_manifest) + ", " + media_type::k_index + ", " + media_type::k_docker_manifest + ", " +
         media_type::k_docker_manifest_list;
}

std::string percent_encode(std::string_view s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (const unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

std::string with_query(const std::string& url, const std::string& param) {
  return url + (url.find('?') == std::string::npos ? "?" : "&") + param;
}

/// "CODE: message; CODE: message" from a registry's JSON error body, or empty (registry_said reads it back).
std::string registry_error_text(const std::string& body) {
  const auto j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("errors") || !j["errors"].is_array()) return {};
  std::string out;
  for (const auto& e : j["errors"]) {
    if (!e.is_object()) continue;
    const std::string code = e.contains("code") && e["code"].is_string() ? e["code"].get<std::string>() : "";
    const std::string msg = e.contains("message") && e["message"].is_string() ? e["message"].get<std::string>() : "";
    if (code.empty() && msg.empty()) continue;
    if (!out.empty()) out += "; ";
    out += code + (code.empty() || msg.empty() ? "" : ": ") + msg;
  }
  return out;
}

std::string content_type(const HttpResponse& r) {
  std::string ct = r.header("content-type").value_or("");
  ct = ct.substr(0, ct.find(';'));
  while (!ct.empty() && std::isspace(static_cast<unsigned char>(ct.back()))) ct.pop_back();
  return ct;
}

/// A file of the local layout, as the registry client reads it: its errors are the layout's (`registry.layout`).
Result<std::string> read_layout_file(const std::string& path, std::uint64_t limit) {
  auto bytes = read_file_limited(path, limit);
  if (bytes) return bytes;
  if (bytes.error().id == "io.too_large") {
    return make_error(ErrorKind::environment, "registry.layout", "larger than " + std::to_string(limit) + " bytes", path,
                      "this is not a manifest gpuenv can push");
  }
  return make_error(ErrorKind::environment, "registry.layout", "cannot read " + path, path, "check that the OCI layout is complete");
}

Result<Descriptor> descriptor_from(const json& j, const std::string& where) {
  return parse_descriptor(j, where, {ErrorKind::environment, "registry.manifest", "the manifest is malformed"});
}

/// The blobs an image manifest names (config first, then layers).
Result<std::vector<Descriptor>> manifest_blobs(const json& m, const std::string& where) {
  std::vector<Descriptor> out;
  if (!m.is_object() || !m.contains("config") || !m.contains("layers") || !m["layers"].is_array()) {
    return make_error(ErrorKind::environment, "registry.manifest", "the image manifest lacks config or layers", where, "the manifest is malformed");
  }
  auto c = descriptor_from(m["config"], where);
  if (!c) return std::move(c).error();
  out.push_back(*c);
  for (const auto& l : m["layers"]) {
    auto d = descriptor_from(l, where);
    if (!d) return std::move(d).error();
    out.push_back(*d);
  }
  return out;
}

Error media_type_error(const std::string& mt, const std::string& where) {
  return make_error(ErrorKind::environment, "registry.media_type", "unsupported manifest media type '" + mt + "'", where,
                    "gpuenv handles OCI image manifests and indexes and Docker schema 2 manifests and manifest lists; "
                    "re-push the image with a current tool");
}

/// Runs f(0..n-1) on up to `parallel` threads; the first error stops the remaining work.
template <class F>
Status for_each_parallel(std::size_t n, int parallel, F f) {
  std::atomic<std::size_t> next{0};
  std::mutex mu;
  std::optional<Error> first;
  auto worker = [&] {
    while (true) {
      {
        std::lock_guard lock(mu);
        if (first) return;
      }
      const std::size_t i = next++;
      if (i >= n) return;
      Status st = f(i);
      if (!st) {
        std::lock_guard lock(mu);
        if (!first) first = std::move(st).error();
      }
    }
  };
  std::vector<std::thread> threads;
  const std::size_t extra = std::min<std::size_t>(n, static_cast<std::size_t>(std::max(1, parallel))) - (n > 0 ? 1 : 0);
  for (std::size_t t = 0; t < extra; ++t) {
    try {
      threads.emplace_back(worker);
    } catch (const std::system_error&) {
      break;  // fewer threads: the calling thread still does the work
    }
  }
  worker();
  for (auto& t : threads) t.join();
  if (first) return *first;
  return ok_status();
}

/// One conversation with one repository: builds URLs, adds authorization and answers challenges.
class Session {
 public:
  Session(HttpClient& http, const RegistryOptions& o, RegistryAuthCache& auth, const ImageReference& ref, std::vector<std::string> scopes)
      : m_http(http), m_o(o), m_auth(auth), m_ref(ref), m_scopes(std::move(scopes)) {
    m_base = std::string(m_o.plain_http ? "http://" : "https://") + m_ref.registry;
    for (const auto& s : m_scopes) m_scope_key += " " + s;
  }

  [[nodiscard]] std::string url(const std::string& path) const { return m_base + "/v2/" + m_ref.repository + path; }
  [[nodiscard]] const ImageReference& ref() const { return m_ref; }

  /// A Location header made absolute.
  [[nodiscard]] std::string absolute(const std::string& location) const {
    if (location.rfind("http://", 0) == 0 || location.rfind("https://", 0) == 0) return location;
    return m_base + (location.rfind('/', 0) == 0 ? "" : "/") + location;
  }

  /// Sends `req` with the cached authorization; on 401 answers the challenge (basic or bearer) and sends once more.
  Result<HttpResponse> send(const HttpRequest& req) {
    HttpRequest first = req;
    add_authorization(first);
    auto resp = m_http.send(first);
    if (!resp || resp->status != 401) return resp;
    const auto header = resp->header("www-authenticate");
    if (!header) return resp;
    auto challenge = parse_auth_challenge(*header);
    if (!challenge) return resp;
    if (challenge->scheme == "basic") {
      if (!m_o.credentials) return resp;
      std::lock_guard lock(m_auth.mu);
      const std::string value = "Basic " + base64_encode(m_o.credentials->username + ":" + m_o.credentials->password);
      if (m_auth.authorization[m_ref.registry] == value && first_has_authorization(first)) return resp;  // they were refused
      m_auth.authorization[m_ref.registry] = value;
    } else if (challenge->scheme == "bearer") {
      auto token = fetch_token(*challenge);
      if (!token) return std::move(token).error();
      std::lock_guard lock(m_auth.mu);
      m_auth.authorization[m_ref.registry + m_scope_key] = "Bearer " + *token;
    } else {
      return resp;
    }
    HttpRequest second = req;
    add_authorization(second);
    return m_http.send(second);
  }

  /// The error for an unexpected answer to `what`.
  [[nodiscard]] Error response_error(const HttpResponse& r, const std::string& what, const HttpRequest& req) const {
    const std::string registry_says = registry_error_text(r.body);
    const std::string status = "HTTP " + std::to_string(r.status) + (registry_says.empty() ? "" : " (" + registry_says + ")");
    const std::string where = req.method + " " + redact_url(req.url);
    if (r.status == 401 || r.status == 403) {
      return make_error(ErrorKind::environment, "registry.auth", what + ": " + status, where,
                        std::string(m_o.credentials ? "the registry refused the credentials given" : "no credentials were given") +
                            "; set GPUENV_REGISTRY_USER and GPUENV_REGISTRY_PASSWORD or add an \"auths\" entry for " + m_ref.registry +
                            " to ~/.docker/config.json, and check that the account may access " + m_ref.repository);
    }
    if (r.status == 404) {
      return make_error(ErrorKind::environment, "registry.not_found", what + ": " + status, where,
                        "check the registry, repository and tag or digest of " + m_ref.to_string());
    }
    const std::string tries = r.attempts > 1 ? " after " + std::to_string(r.attempts) + " attempts" : "";
    return make_error(ErrorKind::environment, "registry.http", what + ": " + status + tries, where,
                      r.status >= 500 ? "the registry is failing; try again later" : "");
  }

 private:
  static bool first_has_authorization(const HttpRequest& r) {
    return std::any_of(r.headers.begin(), r.headers.end(), [](const auto& h) { return h.first == "Authorization"; });
  }

  void add_authorization(HttpRequest& r) {
    std::lock_guard lock(m_auth.mu);
    auto it = m_auth.authorization.find(m_ref.registry + m_scope_key);
    if (it == m_auth.authorization.end()) it = m_auth.authorization.find(m_ref.registry);
    if (it != m_auth.authorization.end()) r.headers.emplace_back("Authorization", it->second);
  }

  /// Asks the challenge's realm for a token covering the challenge's scope and this session's scopes.
  Result<std::string> fetch_token(const AuthChallenge& c) {
    const auto realm = c.params.find("realm");
    if (realm == c.params.end() || (realm->second.rfind("https://", 0) != 0 && realm->second.rfind("http://", 0) != 0)) {
      return make_error(ErrorKind::environment, "registry.auth", "the registry's bearer challenge names no usable token realm", m_base,
                        "the registry is misconfigured");
    }
    std::string url = realm->second;
    if (const auto s = c.params.find("service"); s != c.params.end()) url = with_query(url, "service=" + percent_encode(s->second));
    std::set<std::string> scopes(m_scopes.begin(), m_scopes.end());
    if (const auto s = c.params.find("scope"); s != c.params.end()) {
      std::istringstream in(s->second);  // several scopes are separated by spaces
      for (std::string one; in >> one;) scopes.insert(one);
    }
    for (const auto& s : scopes) url = with_query(url, "scope=" + percent_encode(s));
    HttpRequest req;
    req.url = url;
    req.max_body = 1u << 20;
    // Credentials go to the realm only over TLS, unless the caller chose plain HTTP for this registry.
    const bool safe = url.rfind("https://", 0) == 0 || m_o.plain_http;
    if (m_o.credentials && safe) {
      req.headers.emplace_back("Authorization", "Basic " + base64_encode(m_o.credentials->username + ":" + m_o.credentials->password));
    }
    auto resp = m_http.send(req);
    if (!resp) return std::move(resp).error().while_("requesting a registry token");
    if (resp->status != 200) {
      auto e = response_error(*resp, "the token service refused a token", req);
      if (resp->status == 404) e.id = "registry.auth";
      return e;
    }
    const auto j = json::parse(resp->body, nullptr, false);
    for (const char* key : {"token", "access_token"}) {
      if (!j.is_discarded() && j.is_object() && j.contains(key) && j[key].is_string() && !j[key].get<std::string>().empty()) {
        return j[key].get<std::string>();
      }
    }
    return make_error(ErrorKind::environment, "registry.auth", "the token service answered without a token", redact_url(url),
                      "the token service is misconfigured");
  }

  HttpClient& m_http;
  const RegistryOptions& m_o;
  RegistryAuthCache& m_auth;
  ImageReference m_ref;
  std::vector<std::string> m_scopes;
  std::string m_scope_key;
  std::string m_base;
};

// ---- upload: the one path of every blob and manifest ----

/// The scopes of an upload to REF's repository, with MOUNT_FROM's pull scope when blobs may be mounted from it.
std::vector<std::string> push_scopes(const ImageReference& ref, const std::string& mount_from) {
  std::vector<std::string> scopes = {"repository:" + ref.repository + ":pull,push"};
  if (!mount_from.empty()) scopes.push_back("repository:" + mount_from + ":pull");
  return scopes;
}

/// Whether the registry's Docker-Content-Digest in R (when it sent one) names DIGEST.
Status check_digest_header(const HttpResponse& r, const Digest& digest, const HttpRequest& req) {
  const auto got = r.header("docker-content-digest");
  if (got && *got != digest.str()) {
    return make_error(ErrorKind::environment, "registry.digest_mismatch", "the registry stored " + *got + " for " + digest.str(),
                      req.method + " " + redact_url(req.url), "the upload was corrupted or the registry rewrote it; try again");
  }
  return ok_status();
}

/// SOURCE's bytes OFFSET..OFFSET+LEN as the body of REQ: a range of its file (streamed) or of its bytes.
void set_body(HttpRequest& req, const BlobSource& source, std::uint64_t offset, std::uint64_t len) {
  if (!source.path.empty()) {
    req.body_file = HttpFileBody{source.path, offset, len};
  } else {
    req.body = std::string(source.bytes.substr(offset, len));
  }
}

/// PATCHes SOURCE to the upload session at *UPLOAD in chunks of chunk_size, following each answer's Location;
/// returns the number of chunks.
Result<int> upload_chunks(Session& s, const RegistryOptions& o, const BlobSource& source, std::string* upload) {
  const std::string digest = source.digest.str();
  const std::uint64_t chunk = std::max<std::uint64_t>(1, o.chunk_size);
  int chunks = 0;
  for (std::uint64_t offset = 0; offset < source.size; offset += chunk) {
    const std::uint64_t len = std::min(chunk, source.size - offset);
    HttpRequest patch;
    patch.method = "PATCH";
    patch.retry = HttpRetry::never;  // see the header's comment: a failed chunk fails the blob
    patch.url = *upload;
    patch.headers.emplace_back("Content-Type", k_octet_stream);
    patch.headers.emplace_back("Content-Range", std::to_string(offset) + "-" + std::to_string(offset + len - 1));
    set_body(patch, source, offset, len);
    auto r = s.send(patch);
    if (!r) return std::move(r).error().while_("uploading a chunk of " + digest);
    if (r->status != 202) return s.response_error(*r, "cannot upload a chunk of " + digest, patch);
    if (const auto range = r->header("range"); range) {
      const std::string want = std::to_string(offset + len - 1);
      if (range->size() < want.size() || range->compare(range->size() - want.size(), want.size(), want) != 0) {
        return make_error(ErrorKind::environment, "registry.http", "the registry holds " + *range + " of the upload instead of 0-" + want,
                          redact_url(*upload), "the upload was interrupted; push again");
      }
    }
    if (const auto next = r->header("location"); next) *upload = s.absolute(*next);
    ++chunks;
  }
  return chunks;
}

/// A remote blob (BlobSource::remote) that S's repository lacks and MOUNT_FROM (when given) could not lend.
Error blob_missing_error(const Session& s, const BlobSource& source, const std::string& mount_from) {
  const std::string repo = s.ref().registry + "/" + s.ref().repository;
  return make_error(ErrorKind::environment, "registry.blob_missing",
                    "blob " + source.digest.str() + " (" + std::to_string(source.size) + " bytes) is not on this machine and not in " + repo +
                        (mount_from.empty() ? "" : ", and the registry could not mount it from " + mount_from),
                    repo,
                    "the blob was taken to be in the registry (a layer a build cache served); it was removed or lives in another "
                    "registry: build again without the cache, or push to a repository of the registry that holds the cache");
}

/// The one blob upload (RegistryClient::put_blob says what it does), in S's repository.
Result<BlobPut> upload_blob(Session& s, const RegistryOptions& o, const BlobSource& source, const std::string& mount_from) {
  const std::string digest = source.digest.str();
  HttpRequest head;
  head.method = "HEAD";
  head.url = s.url("/blobs/" + digest);
  auto h = s.send(head);
  if (!h) return std::move(h).error().while_("checking blob " + digest);
  if (h->status == 200) return BlobPut{BlobOutcome::present, 0, 0};
  if (h->status != 404) return s.response_error(*h, "cannot check blob " + digest, head);
  if (source.remote_only && mount_from.empty()) return blob_missing_error(s, source, mount_from);

  HttpRequest post;
  post.method = "POST";
  post.retry = HttpRetry::always;  // a repeated POST only leaves an unused upload session behind
  post.url = s.url("/blobs/uploads/");
  if (!mount_from.empty()) post.url += "?mount=" + percent_encode(digest) + "&from=" + percent_encode(mount_from);
  auto p = s.send(post);
  if (!p) return std::move(p).error().while_("starting the upload of " + digest);
  if (p->status == 201 && !mount_from.empty()) {
    GPUENV_CHECK(check_digest_header(*p, source.digest, post));
    return BlobPut{BlobOutcome::mounted, 0, 0};
  }
  if (p->status != 202) return s.response_error(*p, "cannot start the upload of " + digest, post);
  auto location = p->header("location");
  if (!location) return s.response_error(*p, "the registry gave no upload location for " + digest, post);
  std::string upload = s.absolute(*location);
  if (source.remote_only) {  // the registry declined the mount and opened an upload there are no bytes for
    HttpRequest cancel;
    cancel.method = "DELETE";
    cancel.url = upload;
    (void)s.send(cancel);  // an abandoned session expires anyway: its answer changes nothing
    return blob_missing_error(s, source, mount_from);
  }

  int chunks = 0;
  HttpRequest put;
  put.method = "PUT";
  if (source.size <= o.chunk_threshold) {
    set_body(put, source, 0, source.size);
  } else {
    GPUENV_TRY(sent, upload_chunks(s, o, source, &upload));
    chunks = sent;
  }
  put.url = with_query(upload, "digest=" + percent_encode(digest));
  put.headers.emplace_back("Content-Type", k_octet_stream);  // a form type would have the registry read the body as a form
  auto r = s.send(put);
  if (!r) return std::move(r).error().while_("uploading " + digest);
  if (r->status != 201) return s.response_error(*r, "cannot upload " + digest, put);
  GPUENV_CHECK(check_digest_header(*r, source.digest, put));
  return BlobPut{BlobOutcome::uploaded, chunks, source.size};
}

/// The one manifest upload (RegistryClient::put_manifest says what it does), in S's repository.
Result<RegistryClient::PutManifest> upload_manifest(Session& s, const std::string& reference, std::string bytes, const std::string& media_type) {
  RegistryClient::PutManifest out;
  out.digest = Digest::of(bytes);
  const std::string digest = out.digest.str();
  HttpRequest req;
  req.method = "PUT";
  req.url = s.url("/manifests/" + reference);
  req.headers.emplace_back("Content-Type", media_type);
  req.body = std::move(bytes);
  auto resp = s.send(req);
  if (!resp) return std::move(resp).error().while_("pushing manifest " + digest);
  if (resp->status != 201 && resp->status != 200) return s.response_error(*resp, "cannot push manifest " + digest, req);
  GPUENV_CHECK(check_digest_header(*resp, out.digest, req));
  if (const auto subject = resp->header("oci-subject")) out.oci_subject = *subject;
  return out;
}

// ---- push ----

/// An image of a layout pushed through the one upload path: manifests depth first, each after its blobs.
class Pusher {
 public:
  Pusher(Session& s, const RegistryOptions& o, OciLayout layout, const PushOptions& po) : m_s(s), m_o(o), m_layout(std::move(layout)), m_po(po) {}

  Status push_manifest(const Descriptor& d, const std::string& reference) {
    auto bytes = read_layout_file(m_layout.blob_path(d.digest), m_o.max_manifest_bytes);
    if (!bytes) return std::move(bytes).error();
    const std::string where = m_layout.blob_path(d.digest);
    if (Digest::of(*bytes) != d.digest) {
      return make_error(ErrorKind::environment, "registry.layout", "the manifest's bytes do not match its digest " + d.digest.str(), where,
                        "the OCI layout is damaged; build it again");
    }
    const auto j = json::parse(*bytes, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      return make_error(ErrorKind::environment, "registry.manifest", "the manifest is not a JSON object", where, "build the image again");
    }
    std::string mt = d.media_type;
    if (mt.empty() && j.contains("mediaType") && j["mediaType"].is_string()) mt = j["mediaType"].get<std::string>();
    if (is_index_type(mt)) {
      if (!j.contains("manifests") || !j["manifests"].is_array()) {
        return make_error(ErrorKind::environment, "registry.manifest", "the index lacks manifests", where, "build the image again");
      }
      for (const auto& child : j["manifests"]) {
        auto cd = descriptor_from(child, where);
        if (!cd) return std::move(cd).error();
        if (auto st = push_manifest(*cd, cd->digest.str()); !st) return st;
      }
    } else if (is_manifest_type(mt)) {
      auto blobs = manifest_blobs(j, where);
      if (!blobs) return std::move(blobs).error();
      std::vector<Descriptor> todo;
      for (const auto& b : *blobs)
        if (m_done.insert(b.digest).second) todo.push_back(b);
      if (auto st = for_each_parallel(todo.size(), m_o.parallel_blobs, [&](std::size_t i) { return push_layout_blob(todo[i]); }); !st) return st;
    } else {
      return media_type_error(mt, where);
    }
    GPUENV_CHECK(upload_manifest(m_s, reference, std::move(*bytes), mt));
    std::lock_guard lock(m_mu);
    ++m_stats.manifests;
    return ok_status();
  }

  [[nodiscard]] const PushStats& stats() const { return m_stats; }

 private:
  /// Blob D of the layout, streamed from its file, counted by how it came to be in the repository.
  Status push_layout_blob(const Descriptor& d) {
    const std::string path = m_layout.blob_path(d.digest);
    struct stat st {};
    const bool found = ::stat(path.c_str(), &st) == 0;
    if (!found && errno == ENOENT && m_po.remote_blobs.count(d.digest) > 0) {
      return count(upload_blob(m_s, m_o, BlobSource::remote(d.digest, d.size), m_po.mount_from));
    }
    if (!found || static_cast<std::uint64_t>(st.st_size) != d.size) {
      return make_error(ErrorKind::environment, "registry.layout", "blob " + d.digest.str() + " is missing or not " + std::to_string(d.size) + " bytes",
                        path, "the OCI layout is damaged; build it again");
    }
    return count(upload_blob(m_s, m_o, BlobSource::file(path, d.digest, d.size), m_po.mount_from));
  }

  /// Counts what PUT did to a blob.
  Status count(Result<BlobPut> answer) {
    GPUENV_TRY(put, std::move(answer));
    std::lock_guard lock(m_mu);
    switch (put.outcome) {
      case BlobOutcome::present: ++m_stats.blobs_present; break;
      case BlobOutcome::mounted: ++m_stats.blobs_mounted; break;
      case BlobOutcome::uploaded: ++m_stats.blobs_uploaded; break;
    }
    m_stats.chunks += put.chunks;
    m_stats.bytes_uploaded += put.bytes_uploaded;
    return ok_status();
  }

  Session& m_s;
  const RegistryOptions& m_o;
  OciLayout m_layout;
  const PushOptions& m_po;
  std::set<Digest> m_done;  // blobs handled already (shared layers of an index's manifests)
  std::mutex m_mu;
  PushStats m_stats;
};

// ---- pull ----

struct FetchedManifest {
  std::string bytes;
  std::string media_type;
  Digest digest;
};

Result<FetchedManifest> get_manifest(Session& s, const RegistryOptions& o, const std::string& reference) {
  HttpRequest req;
  req.url = s.url("/manifests/" + reference);
  req.headers.emplace_back("Accept", accept_manifests());
  req.max_body = o.max_manifest_bytes;
  auto resp = s.send(req);
  if (!resp) return std::move(resp).error().while_("fetching manifest " + reference);
  if (resp->status != 200) return s.response_error(*resp, "cannot fetch manifest " + s.ref().repository + ":" + reference, req);
  auto digest = Digest::from_hex(resp->body_sha256);  // the HttpClient hashed the body as it arrived
  if (!digest) digest = Digest::of(resp->body);
  FetchedManifest m{std::move(resp->body), content_type(*resp), *digest};
  const std::string where = "GET " + redact_url(req.url);
  if (reference.rfind("sha256:", 0) == 0 && m.digest.str() != reference) {
    return make_error(ErrorKind::environment, "registry.digest_mismatch", "the manifest served has digest " + m.digest.str() + " instead of " + reference,
                      where, "the registry or a proxy altered the manifest; do not use this image");
  }
  if (const auto said = resp->header("docker-content-digest"); said && *said != m.digest.str()) {
    return make_error(ErrorKind::environment, "registry.digest_mismatch", "the manifest served has digest " + m.digest.str() + " but the registry says " + *said,
                      where, "the manifest was altered in transit; try again");
  }
  const auto j = json::parse(m.bytes, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return make_error(ErrorKind::environment, "registry.manifest", "the manifest is not a JSON object", where, "the registry serves something else");
  }
  if (j.contains("mediaType") && j["mediaType"].is_string()) {
    const std::string declared = j["mediaType"].get<std::string>();
    if (m.media_type.empty() || m.media_type == "application/json") m.media_type = declared;
  }
  if (!is_index_type(m.media_type) && !is_manifest_type(m.media_type)) {
    if (m.media_type.empty()) m.media_type = "(none)";
    return media_type_error(m.media_type, where);
  }
  return m;
}

/// Whether the answer to REQ (GET /blobs/<digest>, into a file or into memory) holds the blob D: a 200 with all of
/// its bytes and their sha256. A longer body is `registry.digest_mismatch`, a shorter one `registry.truncated`.
Status check_blob_answer(Session& s, Result<HttpResponse>& resp, const HttpRequest& req, const Descriptor& d, const std::string& where) {
  const char* altered = "the registry serves other bytes than the manifest names; do not use this image";
  if (!resp) {
    if (resp.error().id == "http.too_large") {
      return make_error(ErrorKind::environment, "registry.digest_mismatch", "blob " + d.digest.str() + " is larger than its " + std::to_string(d.size) + " bytes",
                        where, altered);
    }
    return std::move(resp).error().while_("fetching blob " + d.digest.str());
  }
  if (resp->status != 200) return s.response_error(*resp, "cannot fetch blob " + d.digest.str(), req);
  const bool to_file = !req.download_to.empty();
  const std::uint64_t received = to_file ? resp->body_bytes : resp->body.size();
  if (received < d.size) {
    return make_error(ErrorKind::environment, "registry.truncated",
                      "blob " + d.digest.str() + " has " + std::to_string(received) + " of its " + std::to_string(d.size) + " bytes", where,
                      "the transfer or the registry's storage is incomplete; try again");
  }
  const std::string got = to_file ? resp->body_sha256 : sha256_hex(resp->body);
  if (got != d.digest.hex()) {
    return make_error(ErrorKind::environment, "registry.digest_mismatch", "blob " + d.digest.str() + " arrived with digest sha256:" + got, where, altered);
  }
  return ok_status();
}

Status pull_blob(Session& s, OciLayout& layout, const Descriptor& d, PullStats& stats, std::mutex& mu) {
  if (layout.has_blob(d.digest)) {
    std::lock_guard lock(mu);
    ++stats.blobs_present;
    return ok_status();
  }
  HttpRequest req;
  req.url = s.url("/blobs/" + d.digest.str());
  req.follow_redirects = true;  // registries send blobs from storage elsewhere; curl drops Authorization there
  req.download_to = layout.temp_path(d.digest.hex().substr(0, 12));
  req.max_body = d.size;
  const std::string where = "GET " + redact_url(req.url);
  auto resp = s.send(req);
  struct Cleanup {
    const std::string& path;
    bool keep = false;
    ~Cleanup() {
      if (!keep) ::unlink(path.c_str());
    }
  } cleanup{req.download_to};
  if (auto st = check_blob_answer(s, resp, req, d, where); !st) return st;
  auto adopted = layout.adopt_file(req.download_to, d.digest, d.size, d.media_type);
  if (!adopted) return std::move(adopted).error();
  cleanup.keep = true;
  std::lock_guard lock(mu);
  ++stats.blobs_downloaded;
  stats.bytes_downloaded += d.size;
  return ok_status();
}

/// index.json's manifests with `replaced` ref name left out (a pull adds to a layout, replacing the same name).
std::vector<Descriptor> other_index_entries(const OciLayout& layout, const std::string& replaced) {
  std::vector<Descriptor> out;
  std::ifstream in(layout.dir() + "/index.json", std::ios::binary);
  if (!in) return out;
  const auto j = json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("manifests") || !j["manifests"].is_array()) return out;
  for (const auto& m : j["manifests"]) {
    auto d = descriptor_from(m, "index.json");
    if (!d) continue;
    const auto name = d->annotations.find(k_ref_name);
    if (name != d->annotations.end() && name->second == replaced) continue;
    out.push_back(*d);
  }
  return out;
}

/// `ref`'s image manifest: the one it names, or the one for the platform of `options` from the index it names
/// (whose digest goes to *index_digest). `doing` ("pulling") starts the context of errors.
Result<FetchedManifest> get_image_manifest(Session& s, const RegistryOptions& o, const ImageReference& ref, const PullOptions& options,
                                           const std::string& doing, Digest* index_digest) {
  auto m = get_manifest(s, o, ref.manifest_reference());
  if (!m) return std::move(m).error().while_(doing + " " + ref.to_string());
  if (is_index_type(m->media_type)) {
    if (index_digest) *index_digest = m->digest;
    const auto j = json::parse(m->bytes, nullptr, false);
    std::string chosen;
    std::vector<std::string> seen;
    const json* entry = platform_entry(j, options.platform, seen);
    if (entry != nullptr && entry->contains("digest") && (*entry)["digest"].is_string()) chosen = (*entry)["digest"].get<std::string>();
    const std::string wanted = options.platform.str();
    if (chosen.empty()) {
      return make_error(ErrorKind::environment, "registry.not_found", "no image for platform " + wanted + " in " + ref.to_string() + " (it has: " + join(seen, ", ") + ")",
                        ref.to_string(), "choose one of the platforms the image is built for");
    }
    if (!valid_digest(chosen)) return make_error(ErrorKind::environment, "registry.manifest", "unsupported digest '" + chosen + "'", ref.to_string(), "");
    m = get_manifest(s, o, chosen);
    if (!m) return std::move(m).error().while_(doing + " " + ref.to_string() + " for " + wanted);
    if (!is_manifest_type(m->media_type)) return media_type_error(m->media_type, ref.to_string() + " for " + wanted);
  }
  return m;
}

/// The blob `d` in memory (a config: small), checked against its size and digest.
Result<std::string> get_small_blob(Session& s, const Descriptor& d, std::uint64_t limit) {
  HttpRequest req;
  req.url = s.url("/blobs/" + d.digest.str());
  req.follow_redirects = true;  // registries send blobs from storage elsewhere; curl drops Authorization there
  const std::string where = "GET " + redact_url(req.url);
  if (d.size > limit) {
    return make_error(ErrorKind::environment, "registry.manifest", "blob " + d.digest.str() + " is " + std::to_string(d.size) + " bytes, more than the " +
                      std::to_string(limit) + " a config may have", where, "this is not an image configuration gpuenv reads");
  }
  req.max_body = d.size;
  auto resp = s.send(req);
  if (auto st = check_blob_answer(s, resp, req, d, where); !st) return std::move(st).error();
  return std::move(resp->body);
}

}  // namespace

// ---- public functions ----

std::string ImageReference::to_string() const {
  std::string out = registry + "/" + repository;
  if (!tag.empty()) out += ":" + tag;
  if (!digest.empty()) out += "@" + digest;
  return out;
}

Result<ImageReference> parse_image_reference(std::string_view text) {
  const std::string input(text);
  const std::string example = "write it as host[:port]/repository[:tag][@sha256:digest], e.g. registry.example.com/team/image:1.0";
  auto bad = [&](const std::string& what, const std::string& hint) {
    return make_error(ErrorKind::usage, "registry.bad_reference", what + " in image reference '" + input + "'", "", hint);
  };
  std::string s = input;
  ImageReference r;
  if (const auto at = s.find('@'); at != std::string::npos) {
    r.digest = s.substr(at + 1);
    s.resize(at);
    if (!valid_digest(r.digest)) return bad("malformed or unsupported digest '" + r.digest + "'", "a digest is sha256: and 64 lower-case hex digits");
  }
  const auto slash = s.find('/');
  if (slash == std::string::npos) {
    return bad("no registry host", "name the registry explicitly (short Docker Hub names are not supported); " + example);
  }
  r.registry = s.substr(0, slash);
  const bool hostlike = r.registry.find_first_of(".:") != std::string::npos || r.registry == "localhost";
  if (!hostlike) {
    return bad("'" + r.registry + "' is not a registry host (no '.' or ':' and not localhost)",
               "name the registry explicitly (short Docker Hub names are not supported); " + example);
  }
  const bool host_chars = std::all_of(r.registry.begin(), r.registry.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '.' || c == '-' || c == ':' || c == '[' || c == ']';
  });
  if (!host_chars || r.registry.front() == '.' || r.registry.front() == '-' || r.registry.front() == ':') {
    return bad("malformed registry host '" + r.registry + "'", example);
  }
  if (const auto colon = r.registry.rfind(':'); colon != std::string::npos && r.registry.find(']') == std::string::npos) {
    const std::string port = r.registry.substr(colon + 1);
    if (port.empty() || port.size() > 5 || !std::all_of(port.begin(), port.end(), [](unsigned char c) { return std::isdigit(c); })) {
      return bad("malformed port '" + port + "'", example);
    }
  }
  std::string rest = s.substr(slash + 1);
  if (const auto colon = rest.rfind(':'); colon != std::string::npos) {
    r.tag = rest.substr(colon + 1);
    rest.resize(colon);
    const bool tag_ok = !r.tag.empty() && r.tag.size() <= 128 && (std::isalnum(static_cast<unsigned char>(r.tag[0])) || r.tag[0] == '_') &&
                        std::all_of(r.tag.begin(), r.tag.end(), [](unsigned char c) { return std::isalnum(c) || c == '_' || c == '.' || c == '-'; });
    if (!tag_ok) return bad("malformed tag '" + r.tag + "'", "a tag is up to 128 letters, digits, '_', '.' and '-', not starting with '.' or '-'");
  }
  if (rest.empty()) return bad("no repository", example);
  // Each path component: lower-case letters and digits, separated by '.', '_', '__' or runs of '-'.
  std::size_t start = 0;
  while (true) {
    const auto end = rest.find('/', start);
    const std::string comp = rest.substr(start, end == std::string::npos ? std::string::npos : end - start);
    auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
    bool ok = !comp.empty() && alnum(comp.front()) && alnum(comp.back());
    for (std::size_t i = 0; ok && i < comp.size();) {
      if (alnum(comp[i])) {
        ++i;
        continue;
      }
      std::size_t j = i;
      while (j < comp.size() && !alnum(comp[j])) ++j;
      const std::string sep = comp.substr(i, j - i);
      ok = sep == "." || sep == "_" || sep == "__" || sep.find_first_not_of('-') == std::string::npos;
      i = j;
    }
    if (!ok) {
      return bad("malformed repository component '" + comp + "'",
                 "repository components are lower-case letters and digits separated by '.', '_', '__' or '-'");
    }
    if (end == std::string::npos) break;
    start = end + 1;
  }
  r.repository = rest;
  if (r.repository.size() > 255) return bad("repository name longer than 255 characters", example);
  if (r.tag.empty() && r.digest.empty()) r.tag = "latest";
  return r;
}

Result<std::optional<RegistryCredentials>> parse_docker_config_credentials(std::string_view json_text, const std::string& registry,
                                                                           const std::string& where) {
  const auto j = json::parse(json_text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return make_error(ErrorKind::environment, "registry.config", "not a JSON object", where, "fix or remove the Docker configuration file");
  }
  if (!j.contains("auths") || !j["auths"].is_object()) return std::optional<RegistryCredentials>{};
  auto host_of = [](std::string key) {
    for (const char* scheme : {"https://", "http://"})
      if (key.rfind(scheme, 0) == 0) key.erase(0, std::strlen(scheme));
    return key.substr(0, key.find('/'));
  };
  const json* entry = nullptr;
  for (const auto& [key, value] : j["auths"].items()) {
    if (key == registry) {  // an exact key wins over one with a scheme or path
      entry = &value;
      break;
    }
    if (!entry && host_of(key) == registry) entry = &value;
  }
  if (!entry || !entry->is_object()) return std::optional<RegistryCredentials>{};
  const std::string entry_where = where + ": auths." + registry;
  if (entry->contains("auth") && (*entry)["auth"].is_string() && !(*entry)["auth"].get<std::string>().empty()) {
    const auto decoded = base64_decode((*entry)["auth"].get<std::string>());
    const auto colon = decoded ? decoded->find(':') : std::string::npos;
    if (!decoded || colon == std::string::npos) {  // the value is a secret: never quote it
      return make_error(ErrorKind::environment, "registry.config", "the \"auth\" value is not base64 of user:password", entry_where,
                        "log in to the registry again or fix the entry");
    }
    return std::optional<RegistryCredentials>{RegistryCredentials{decoded->substr(0, colon), decoded->substr(colon + 1)}};
  }
  if (entry->contains("username") && (*entry)["username"].is_string() && entry->contains("password") && (*entry)["password"].is_string()) {
    return std::optional<RegistryCredentials>{RegistryCredentials{(*entry)["username"].get<std::string>(), (*entry)["password"].get<std::string>()}};
  }
  return std::optional<RegistryCredentials>{};
}

Result<std::optional<RegistryCredentials>> load_docker_config_credentials(const std::string& path, const std::string& registry) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::optional<RegistryCredentials>{};
  auto text = read_layout_file(path, 4u << 20);
  if (!text) {
    auto e = std::move(text).error();
    e.id = "registry.config";
    return e;
  }
  return parse_docker_config_credentials(*text, registry, path);
}

Result<AuthChallenge> parse_auth_challenge(std::string_view header) {
  AuthChallenge c;
  std::size_t i = 0;
  auto skip_space = [&] {
    while (i < header.size() && (header[i] == ' ' || header[i] == '\t')) ++i;
  };
  auto token = [&] {
    const std::size_t b = i;
    while (i < header.size() && header[i] != ' ' && header[i] != '\t' && header[i] != '=' && header[i] != ',') ++i;
    return std::string(header.substr(b, i - b));
  };
  auto lower = [](std::string s) {
    for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return s;
  };
  skip_space();
  c.scheme = lower(token());
  if (c.scheme.empty()) {
    return make_error(ErrorKind::environment, "registry.auth_challenge", "empty WWW-Authenticate challenge", "", "the registry is misconfigured");
  }
  while (i < header.size()) {
    skip_space();
    while (i < header.size() && (header[i] == ',' || header[i] == ' ')) ++i;
    const std::size_t name_at = i;
    std::string name = lower(token());
    skip_space();
    if (name.empty()) break;
    if (i >= header.size() || header[i] != '=') {
      i = name_at;  // the next challenge's scheme: only the first challenge is read
      break;
    }
    ++i;
    skip_space();
    std::string value;
    if (i < header.size() && header[i] == '"') {
      ++i;
      bool closed = false;
      while (i < header.size()) {
        if (header[i] == '\\' && i + 1 < header.size()) {
          value += header[i + 1];
          i += 2;
        } else if (header[i] == '"') {
          ++i;
          closed = true;
          break;
        } else {
          value += header[i++];
        }
      }
      if (!closed) {
        return make_error(ErrorKind::environment, "registry.auth_challenge", "unterminated quoted value in WWW-Authenticate: " + std::string(header), "",
                          "the registry is misconfigured");
      }
    } else {
      value = token();
    }
    c.params[name] = value;
  }
  return c;
}

RegistryClient::RegistryClient(HttpClient& http, RegistryOptions options)
    : m_http(http), m_o(std::move(options)), m_auth(std::make_shared<RegistryAuthCache>()) {}

Result<bool> RegistryClient::blob_exists(const ImageReference& ref, const Digest& digest) {
  Session s(m_http, m_o, *m_auth, ref, {"repository:" + ref.repository + ":pull"});
  HttpRequest req;
  req.method = "HEAD";
  req.url = s.url("/blobs/" + digest.str());
  auto resp = s.send(req);
  if (!resp) return std::move(resp).error();
  if (resp->status == 200) return true;
  if (resp->status == 404) return false;
  return s.response_error(*resp, "cannot check blob " + digest.str(), req);
}

Result<std::optional<RemoteManifest>> RegistryClient::get_manifest(const ImageReference& ref, const std::string& reference) {
  Session s(m_http, m_o, *m_auth, ref, {"repository:" + ref.repository + ":pull"});
  auto m = images::get_manifest(s, m_o, reference);
  if (!m) {
    if (m.error().id == "registry.not_found") return std::optional<RemoteManifest>();
    return std::move(m).error();
  }
  return std::optional<RemoteManifest>(RemoteManifest{std::move(m->bytes), std::move(m->media_type), std::move(m->digest)});
}

Result<std::string> RegistryClient::get_blob(const ImageReference& ref, const Descriptor& d, std::uint64_t limit) {
  Session s(m_http, m_o, *m_auth, ref, {"repository:" + ref.repository + ":pull"});
  return get_small_blob(s, d, limit);
}

BlobSource BlobSource::of(std::string_view bytes) {
  BlobSource out;
  out.digest = Digest::of(bytes);
  out.size = bytes.size();
  out.bytes = bytes;
  return out;
}

BlobSource BlobSource::remote(const Digest& digest, std::uint64_t size) {
  BlobSource out;
  out.digest = digest;
  out.size = size;
  out.remote_only = true;
  return out;
}

BlobSource BlobSource::file(std::string path, const Digest& digest, std::uint64_t size) {
  BlobSource out;
  out.digest = digest;
  out.size = size;
  out.path = std::move(path);
  return out;
}

Result<BlobPut> RegistryClient::put_blob(const ImageReference& ref, const BlobSource& source, const std::string& mount_from) {
  Session s(m_http, m_o, *m_auth, ref, push_scopes(ref, mount_from));
  return upload_blob(s, m_o, source, mount_from);
}

Result<RegistryClient::PutManifest> RegistryClient::put_manifest(const ImageReference& ref, const std::string& reference, const std::string& bytes,
                                                                 const std::string& media_type) {
  Session s(m_http, m_o, *m_auth, ref, push_scopes(ref, {}));
  return upload_manifest(s, reference, bytes, media_type);
}

Result<bool> RegistryClient::has_referrers_api(const ImageReference& ref, const Digest& digest) {
  GPUENV_TRY(referrers, get_referrers(ref, digest));
  return referrers.has_value();
}

Result<std::optional<RemoteManifest>> RegistryClient::get_referrers(const ImageReference& ref, const Digest& digest) {
  Session s(m_http, m_o, *m_auth, ref, {"repository:" + ref.repository + ":pull"});
  HttpRequest req;
  req.url = s.url("/referrers/" + digest.str());
  req.headers.emplace_back("Accept", media_type::k_index);
  req.max_body = m_o.max_manifest_bytes;
  auto resp = s.send(req);
  if (!resp) return std::move(resp).error().while_("asking for the referrers of " + digest.str());
  if (resp->status == 404 || resp->status == 400) return std::optional<RemoteManifest>();  // no such API: the tag schema's fallback
  if (resp->status != 200) return s.response_error(*resp, "cannot ask for the referrers of " + digest.str(), req);
  if (content_type(*resp) != media_type::k_index) return std::optional<RemoteManifest>();  // a page, not the API
  auto body_digest = Digest::from_hex(resp->body_sha256);  // the HttpClient hashed the body as it arrived
  if (!body_digest) body_digest = Digest::of(resp->body);
  return std::optional<RemoteManifest>(RemoteManifest{std::move(resp->body), media_type::k_index, *body_digest});
}

Status RegistryClient::fetch_blob(const ImageReference& ref, const Descriptor& d, OciLayout& layout) {
  Session s(m_http, m_o, *m_auth, ref, {"repository:" + ref.repository + ":pull"});
  PullStats stats;
  std::mutex mu;
  if (auto st = pull_blob(s, layout, d, stats, mu); !st) return std::move(st).error().while_("fetching a blob of " + ref.to_string());
  return ok_status();
}

std::string referrers_fallback_tag(const Digest& digest) { return "sha256-" + digest.hex(); }

namespace {

/// REF's image manifest (get_image_manifest) and its blobs, config first: a manifest that names none is refused.
Result<std::pair<FetchedManifest, std::vector<Descriptor>>> image_manifest_and_blobs(Session& s, const RegistryOptions& o, const ImageReference& ref,
                                                                                    const PullOptions& options, Digest* index_digest) {
  auto m = get_image_manifest(s, o, ref, options, "reading the manifest of", index_digest);
  if (!m) return std::move(m).error();
  auto blobs = manifest_blobs(json::parse(m->bytes, nullptr, false), ref.to_string());
  if (!blobs) return std::move(blobs).error();
  return std::make_pair(std::move(*m), std::move(*blobs));
}

}  // namespace

Result<RemoteManifest> RegistryClient::fetch_image_manifest(const ImageReference& ref, const PullOptions& options) {
  Session s(m_http, m_o, *m_auth, ref, {"repository:" + ref.repository + ":pull"});
  GPUENV_TRY(found, image_manifest_and_blobs(s, m_o, ref, options, nullptr));
  return RemoteManifest{std::move(found.first.bytes), std::move(found.first.media_type), found.first.digest};
}

Result<RemoteImage> RegistryClient::fetch_manifest_and_config(const ImageReference& ref, const PullOptions& options) {
  Session s(m_http, m_o, *m_auth, ref, {"repository:" + ref.repository + ":pull"});
  RemoteImage out;
  GPUENV_TRY(found, image_manifest_and_blobs(s, m_o, ref, options, &out.index_digest));
  auto& [m, blobs] = found;
  out.config_descriptor = blobs.front();
  auto config = get_small_blob(s, out.config_descriptor, std::uint64_t{16} << 20);
  if (!config) return std::move(config).error().while_("reading the config of " + ref.to_string());
  out.config = std::move(*config);
  out.manifest = std::move(m.bytes);
  out.manifest_digest = m.digest;
  out.media_type = m.media_type;
  return out;
}

Result<PushStats> RegistryClient::push(const std::string& layout_dir, const ImageReference& ref, const PushOptions& options) {
  const std::string index_path = layout_dir + "/index.json";
  auto index_text = read_layout_file(index_path, m_o.max_manifest_bytes);
  if (!index_text) return std::move(index_text).error();
  const auto index = json::parse(*index_text, nullptr, false);
  if (index.is_discarded() || !index.is_object() || !index.contains("manifests") || !index["manifests"].is_array()) {
    return make_error(ErrorKind::environment, "registry.layout", "index.json has no manifests list", index_path, "build the image again");
  }
  std::vector<Descriptor> candidates;
  std::vector<std::string> names;
  for (const auto& m : index["manifests"]) {
    auto d = descriptor_from(m, index_path);
    if (!d) return std::move(d).error();
    const auto name = d->annotations.find(k_ref_name);
    if (options.ref_name.empty() && name != d->annotations.end() && is_attachment_tag(name->second)) continue;  // marks beside the image
    names.push_back(name == d->annotations.end() ? "(unnamed)" : name->second);
    if (options.ref_name.empty() || (name != d->annotations.end() && name->second == options.ref_name)) candidates.push_back(*d);
  }
  if (candidates.size() != 1) {
    std::string listed;
    for (const auto& n : names) listed += (listed.empty() ? "" : ", ") + n;
    return make_error(ErrorKind::usage, "registry.layout",
                      candidates.empty() ? "index.json names no image '" + options.ref_name + "' (it names: " + listed + ")"
                                         : "index.json names " + std::to_string(candidates.size()) + " images (" + listed + ")",
                      index_path, "choose the image to push by its ref name");
  }
  const Descriptor top = candidates.front();
  if (!ref.digest.empty() && ref.digest != top.digest.str()) {
    return make_error(ErrorKind::usage, "registry.digest_mismatch", "the image to push has digest " + top.digest.str() + ", not " + ref.digest,
                      ref.to_string(), "drop the digest from the reference or push the image it names");
  }
  auto layout = OciLayout::open(layout_dir);
  if (!layout) return std::move(layout).error();
  Session s(m_http, m_o, *m_auth, ref, push_scopes(ref, options.mount_from));
  Pusher pusher(s, m_o, std::move(*layout), options);
  if (auto st = pusher.push_manifest(top, ref.tag.empty() ? top.digest.str() : ref.tag); !st) {
    return std::move(st).error().while_("pushing " + layout_dir + " to " + ref.to_string());
  }
  PushStats stats = pusher.stats();
  stats.digest = top.digest;
  return stats;
}

Result<PullStats> RegistryClient::pull(const ImageReference& ref, const std::string& layout_dir, const PullOptions& options) {
  Session s(m_http, m_o, *m_auth, ref, {"repository:" + ref.repository + ":pull"});
  Digest index_digest;
  auto m = get_image_manifest(s, m_o, ref, options, "pulling", &index_digest);
  if (!m) return std::move(m).error();
  const auto j = json::parse(m->bytes, nullptr, false);
  auto blobs = manifest_blobs(j, ref.to_string());
  if (!blobs) return std::move(blobs).error();
  auto layout = OciLayout::open(layout_dir);
  if (!layout) return std::move(layout).error();
  PullStats stats;
  stats.index_digest = index_digest;
  std::mutex mu;
  std::set<std::string> unique;
  std::vector<Descriptor> todo;
  for (const auto& b : *blobs)
    if (unique.insert(b.digest.str()).second) todo.push_back(b);
  if (auto st = for_each_parallel(todo.size(), m_o.parallel_blobs, [&](std::size_t i) { return pull_blob(s, *layout, todo[i], stats, mu); }); !st) {
    return std::move(st).error().while_("pulling " + ref.to_string());
  }
  auto stored = layout->put_bytes(m->bytes, m->media_type);
  if (!stored) return std::move(stored).error();
  Descriptor d = *stored;
  const std::string name = ref.tag.empty() ? ref.digest : ref.tag;
  d.annotations[k_ref_name] = name;
  auto entries = other_index_entries(*layout, name);
  entries.push_back(d);
  if (auto st = layout->write_index(entries); !st) return std::move(st).error();
  stats.manifest = d;
  return stats;
}

bool registry_said(const Error& error, std::string_view code) {
  const std::string& m = error.message;
  for (std::size_t at = m.find(code); at != std::string::npos; at = m.find(code, at + 1)) {
    const char before = at == 0 ? '\0' : m[at - 1];
    const char after = at + code.size() < m.size() ? m[at + code.size()] : '\0';
    if ((before == '(' || before == ' ') && (after == ':' || after == ';' || after == ')')) return true;
  }
  return false;
}

}  // namespace gpuenv::images
