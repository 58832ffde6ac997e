#pragma once
// A registry in memory behind the HttpClient port: the distribution-spec calls gpuenv's registry client makes
// (blob HEAD and GET, uploads by POST, PATCH and PUT ?digest=, cross-repository mounts, manifest PUT, GET and HEAD
// by tag or digest) answered as Debian's docker-registry 2.8 answers them, without a referrers API unless
// enable_referrers_api() asks for one (OCI 1.1: GET /referrers/<digest>, OCI-Subject on a manifest PUT). The double
// of base/net/http_client's libcurl adapter for the app workflow tests (push, pull, inspect, mark, verify), which
// the CLI tests run against a real docker-registry on 127.0.0.1.
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/digest.hpp"
#include "base/net/http_client.hpp"

namespace gpuenv::testing {

class MemoryRegistry {
 public:
  struct Manifest {
    std::string bytes, media_type;
  };

  /// The client a Services hands out: every request goes to this registry. HOST is what URLs must name.
  class Client final : public HttpClient {
   public:
    explicit Client(MemoryRegistry& registry) : m_registry(registry) {}
    Result<HttpResponse> send(const HttpRequest& request) override { return m_registry.answer(request); }

   private:
    MemoryRegistry& m_registry;
  };

  explicit MemoryRegistry(std::string host) : m_host(std::move(host)) {}

  /// Answers a cross-repository mount with an upload session, as registries that never mount do.
  void decline_mounts() {
    std::lock_guard lock(m_mu);
    m_decline_mounts = true;
  }

  /// From now on, answers the referrers API as an OCI 1.1 registry does.
  void enable_referrers_api() {
    std::lock_guard lock(m_mu);
    m_referrers_api = true;
  }

  /// Every request seen, as "METHOD path" (no scheme, host or query).
  std::vector<std::string> requests() const {
    std::lock_guard lock(m_mu);
    return m_requests;
  }
  std::size_t count(const std::string& method, const std::string& path_part) const {
    std::lock_guard lock(m_mu);
    std::size_t n = 0;
    for (const auto& r : m_requests)
      if (r.rfind(method + " ", 0) == 0 && r.find(path_part) != std::string::npos) ++n;
    return n;
  }
  std::optional<Manifest> manifest(const std::string& repository, const std::string& reference) const {
    std::lock_guard lock(m_mu);
    const auto it = m_repos.find(repository);
    if (it == m_repos.end()) return std::nullopt;
    const auto m = it->second.manifests.find(reference);
    if (m == it->second.manifests.end()) return std::nullopt;
    return m->second;
  }
  bool has_blob(const std::string& repository, const std::string& digest) const {
    std::lock_guard lock(m_mu);
    const auto it = m_repos.find(repository);
    return it != m_repos.end() && it->second.blobs.count(digest) > 0;
  }
  /// Replaces the bytes of a stored blob (a registry that serves what it was not given).
  void corrupt_blob(const std::string& repository, const std::string& digest, std::string bytes) {
    std::lock_guard lock(m_mu);
    m_repos[repository].blobs[digest] = std::move(bytes);
  }

 private:
  struct Repo {
    std::map<std::string, std::string> blobs;     // digest -> bytes
    std::map<std::string, Manifest> manifests;    // tag or digest -> manifest
  };
  struct Upload {
    std::string repository, bytes;
  };

  static HttpResponse status(long code, std::string body = {}) {
    HttpResponse r;
    r.status = code;
    r.body = std::move(body);
    r.body_sha256 = Digest::of(r.body).hex();
    r.body_bytes = r.body.size();
    r.attempts = 1;
    return r;
  }
  static HttpResponse error(long code, const std::string& what) {
    return status(code, R"({"errors":[{"code":")" + what + R"(","message":")" + what + R"("}]})");
  }
  static std::string body_of(const HttpRequest& request) {
    if (!request.body_file) return request.body;
    std::ifstream in(request.body_file->path, std::ios::binary);
    in.seekg(static_cast<std::streamoff>(request.body_file->offset));
    std::string out(request.body_file->length, '\0');
    in.read(out.data(), static_cast<std::streamsize>(out.size()));
    out.resize(static_cast<std::size_t>(in.gcount()));
    return out;
  }
  static std::string header(const HttpRequest& request, const std::string& name) {
    for (const auto& [k, v] : request.headers)
      if (k == name) return v;
    return {};
  }
  static std::string query_value(const std::string& query, const std::string& key) {
    for (std::size_t at = 0; at < query.size();) {
      const std::size_t amp = query.find('&', at);
      const std::string pair = query.substr(at, amp == std::string::npos ? std::string::npos : amp - at);
      if (pair.rfind(key + "=", 0) == 0) {
        std::string v = pair.substr(key.size() + 1), out;
        for (std::size_t i = 0; i < v.size(); ++i) {
          if (v[i] == '%' && i + 2 < v.size()) {
            out += static_cast<char>(std::stoi(v.substr(i + 1, 2), nullptr, 16));
            i += 2;
          } else {
            out += v[i];
          }
        }
        return out;
      }
      if (amp == std::string::npos) break;
      at = amp + 1;
    }
    return {};
  }

  /// A blob or manifest answer; a 2xx body into request.download_to when the client asked for a file.
  static HttpResponse content(const HttpRequest& request, const std::string& bytes, const std::string& media_type, const std::string& digest) {
    HttpResponse r = status(200, request.method == "HEAD" ? std::string() : bytes);
    if (request.method != "HEAD") r.body_sha256 = Digest::of(bytes).hex();
    r.headers = {{"content-type", media_type}, {"docker-content-digest", digest}, {"content-length", std::to_string(bytes.size())}};
    if (!request.download_to.empty() && request.method == "GET") {
      std::ofstream(request.download_to, std::ios::binary | std::ios::trunc) << bytes;
      r.body.clear();
    }
    return r;
  }

  Result<HttpResponse> answer(const HttpRequest& request) {
    std::lock_guard lock(m_mu);
    const std::string prefix_http = "http://" + m_host, prefix_https = "https://" + m_host;
    std::string rest;
    if (request.url.rfind(prefix_http, 0) == 0) rest = request.url.substr(prefix_http.size());
    else if (request.url.rfind(prefix_https, 0) == 0) rest = request.url.substr(prefix_https.size());
    else return make_error(ErrorKind::environment, "http.failed", "no such host", request.url, "");
    const auto q = rest.find('?');
    const std::string path = rest.substr(0, q), query = q == std::string::npos ? std::string() : rest.substr(q + 1);
    m_requests.push_back(request.method + " " + path);
    if (path == "/v2/" || path == "/v2") return status(200, "{}");
    if (path.rfind("/uploads/", 0) == 0) return upload(request, path.substr(9), query);
    if (path.rfind("/v2/", 0) != 0) return error(404, "NAME_UNKNOWN");
    for (const char* kind : {"/blobs/uploads/", "/blobs/", "/manifests/", "/referrers/"}) {
      const auto at = path.rfind(kind);
      if (at == std::string::npos) continue;
      const std::string repository = path.substr(4, at - 4), what = path.substr(at + std::string(kind).size());
      const std::string k = kind;
      if (k == "/blobs/uploads/") return start_upload(request, repository, query);
      if (k == "/blobs/") return blob(request, repository, what);
      if (k == "/manifests/") return manifest_call(request, repository, what);
      if (m_referrers_api && request.method == "GET") return referrers(repository, what);
      return error(404, "UNSUPPORTED");  // no referrers API: the client falls back to the tag schema
    }
    return error(404, "NAME_UNKNOWN");
  }

  HttpResponse blob(const HttpRequest& request, const std::string& repository, const std::string& digest) {
    const auto& blobs = m_repos[repository].blobs;
    const auto it = blobs.find(digest);
    if (it == blobs.end()) return error(404, "BLOB_UNKNOWN");
    return content(request, it->second, "application/octet-stream", digest);
  }

  HttpResponse start_upload(const HttpRequest& request, const std::string& repository, const std::string& query) {
    if (request.method != "POST") return error(405, "UNSUPPORTED");
    const std::string mount = query_value(query, "mount"), from = query_value(query, "from");
    if (!mount.empty() && !m_decline_mounts && m_repos.count(from) && m_repos[from].blobs.count(mount)) {
      m_repos[repository].blobs[mount] = m_repos[from].blobs[mount];
      HttpResponse r = status(201);
      r.headers = {{"docker-content-digest", mount}, {"location", "/v2/" + repository + "/blobs/" + mount}};
      return r;
    }
    const std::string id = std::to_string(++m_next_upload);
    m_uploads[id] = {repository, {}};
    HttpResponse r = status(202);
    r.headers = {{"location", "/uploads/" + id}, {"range", "0-0"}};
    return r;
  }

  HttpResponse upload(const HttpRequest& request, const std::string& id, const std::string& query) {
    const auto it = m_uploads.find(id);
    if (it == m_uploads.end()) return error(404, "BLOB_UPLOAD_UNKNOWN");
    it->second.bytes += body_of(request);
    if (request.method == "PATCH") {
      HttpResponse r = status(202);
      r.headers = {{"location", "/uploads/" + id}, {"range", "0-" + std::to_string(it->second.bytes.size() - 1)}};
      return r;
    }
    if (request.method != "PUT") return error(405, "UNSUPPORTED");
    const std::string digest = query_value(query, "digest");
    const Upload done = std::move(it->second);
    m_uploads.erase(it);
    if (Digest::of(done.bytes).str() != digest) return error(400, "DIGEST_INVALID");
    m_repos[done.repository].blobs[digest] = done.bytes;
    HttpResponse r = status(201);
    r.headers = {{"docker-content-digest", digest}, {"location", "/v2/" + done.repository + "/blobs/" + digest}};
    return r;
  }

  HttpResponse manifest_call(const HttpRequest& request, const std::string& repository, const std::string& reference) {
    Repo& repo = m_repos[repository];
    if (request.method == "PUT") {
      const std::string bytes = body_of(request), digest = Digest::of(bytes).str();
      if (reference.rfind("sha256:", 0) == 0 && reference != digest) return error(400, "DIGEST_INVALID");
      const Manifest m{bytes, header(request, "Content-Type")};
      repo.manifests[reference] = m;
      repo.manifests[digest] = m;
      HttpResponse r = status(201);
      r.headers = {{"docker-content-digest", digest}, {"location", "/v2/" + repository + "/manifests/" + digest}};
      const std::string subject = m_referrers_api ? subject_of(bytes) : std::string();
      if (!subject.empty()) r.headers.emplace_back("oci-subject", subject);
      return r;
    }
    const auto it = repo.manifests.find(reference);
    if (it == repo.manifests.end()) return error(404, "MANIFEST_UNKNOWN");
    return content(request, it->second.bytes, it->second.media_type, Digest::of(it->second.bytes).str());
  }

  static std::string subject_of(const std::string& manifest) {
    const auto j = nlohmann::json::parse(manifest, nullptr, false);
    if (!j.is_object() || !j.contains("subject") || !j["subject"].is_object()) return {};
    return j["subject"].value("digest", std::string());
  }

  /// The referrers API's index of the manifests of REPOSITORY whose subject is DIGEST.
  HttpResponse referrers(const std::string& repository, const std::string& digest) {
    nlohmann::json entries = nlohmann::json::array();
    for (const auto& [reference, m] : m_repos[repository].manifests) {
      if (reference.rfind("sha256:", 0) != 0 || subject_of(m.bytes) != digest) continue;
      const auto j = nlohmann::json::parse(m.bytes);
      nlohmann::json e = {{"mediaType", m.media_type}, {"digest", reference}, {"size", m.bytes.size()}};
      if (j.contains("artifactType")) e["artifactType"] = j["artifactType"];
      if (j.contains("annotations")) e["annotations"] = j["annotations"];
      entries.push_back(e);
    }
    const std::string type = "application/vnd.oci.image.index.v1+json";
    HttpResponse r = status(200, nlohmann::json{{"schemaVersion", 2}, {"mediaType", type}, {"manifests", entries}}.dump());
    r.headers = {{"content-type", type}};
    return r;
  }

  std::string m_host;
  bool m_referrers_api = false;
  mutable std::mutex m_mu;
  std::map<std::string, Repo> m_repos;
  std::map<std::string, Upload> m_uploads;
  std::vector<std::string> m_requests;
  int m_next_upload = 0;
  bool m_decline_mounts = false;
};

}  // namespace gpuenv::testing
