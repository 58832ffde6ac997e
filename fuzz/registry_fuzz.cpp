// libFuzzer target: the registry client (images/registry) against a scripted registry whose answers are the
// input: the WWW-Authenticate challenge, the token service's JSON answer, error bodies, manifests, indexes and
// blobs. Nothing leaves the process: the HttpClient port is answered from memory, and a download may only go to a
// file beneath the scratch directory (the layout a pull writes).
//
// Input: the first byte picks the operation (fetch_manifest_and_config, pull, blob_exists, or push of a small image
// in chunks: the upload's Location and Range answers, the digest the registry confirms); the rest is a list of
// answers separated by NUL bytes, one per request in order (a 404 when they run out). An answer is a status byte
// (an index into k_statuses), header lines ending at the first blank line, then the body.
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "base/digest.hpp"
#include "base/net/http_headers.hpp"
#include "fuzz/fuzz_support.hpp"
#include "images/oci/layout.hpp"
#include "images/registry/registry_client.hpp"

namespace {

using namespace gpuenv;

constexpr long k_statuses[] = {200, 200, 201, 202, 206, 307, 401, 403, 404, 416, 429, 500};
constexpr int k_max_requests = 64;

class ScriptedRegistry final : public HttpClient {
 public:
  ScriptedRegistry(std::vector<std::string_view> answers, const fuzzing::ScratchDir& scratch)
      : m_answers(std::move(answers)), m_scratch(scratch) {}

  Result<HttpResponse> send(const HttpRequest& request) override {
    if (++m_requests > k_max_requests) return make_error(ErrorKind::environment, "http.failed", "too many requests", request.url, "");
    HttpResponse r;
    r.effective_url = request.url;
    r.attempts = 1;
    if (m_next >= m_answers.size()) {
      r.status = 404;
      return r;
    }
    std::string_view answer = m_answers[m_next++];
    r.status = answer.empty() ? 200 : k_statuses[static_cast<unsigned char>(answer[0]) % std::size(k_statuses)];
    if (!answer.empty()) answer.remove_prefix(1);
    // Header lines up to the first empty one, as curl hands them to its header callback.
    while (!answer.empty()) {
      const auto nl = answer.find('\n');
      const std::string_view line = answer.substr(0, nl);
      answer.remove_prefix(nl == std::string_view::npos ? answer.size() : nl + 1);
      if (line.empty() || line == "\r") break;
      if (auto h = parse_header_line(line)) r.headers.emplace_back(std::move(h->name), std::move(h->value));
    }
    if (answer.size() > request.max_body) return make_error(ErrorKind::environment, "http.too_large", "body too large", request.url, "");
    r.body_sha256 = sha256_hex(answer);
    r.body_bytes = answer.size();
    if (!request.download_to.empty() && r.status >= 200 && r.status < 300) {
      if (!m_scratch.inside(request.download_to)) std::abort();  // the client may write only inside its layout
      const int fd = ::open(request.download_to.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd < 0) return make_error(ErrorKind::environment, "http.io", "cannot write the download", request.download_to, "");
      const bool written = ::write(fd, answer.data(), answer.size()) == static_cast<ssize_t>(answer.size());
      ::close(fd);
      if (!written) return make_error(ErrorKind::environment, "http.io", "cannot write the download", request.download_to, "");
    } else {
      r.body = std::string(answer);
    }
    return r;
  }

 private:
  std::vector<std::string_view> m_answers;
  const fuzzing::ScratchDir& m_scratch;
  std::size_t m_next = 0;
  int m_requests = 0;
};

/// A layout holding one small image (config, a 100-byte layer, manifest), written once: what push sends.
std::string source_layout(const fuzzing::ScratchDir& dir) {
  const std::string path = dir.path() + "/source";
  auto layout = images::OciLayout::open(path);
  if (!layout) std::abort();
  auto config = layout->put_bytes(R"({"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}})",
                                  "application/vnd.oci.image.config.v1+json");
  auto layer = layout->put_bytes(std::string(100, 'x'), "application/vnd.oci.image.layer.v1.tar");
  if (!config || !layer) std::abort();
  const std::string manifest = R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":)" +
                               images::descriptor_json(*config) + R"(,"layers":[)" + images::descriptor_json(*layer) + "]}";
  auto m = layout->put_bytes(manifest, "application/vnd.oci.image.manifest.v1+json");
  if (!m || !layout->write_index({*m})) std::abort();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const fuzzing::ScratchDir scratch;
  static const fuzzing::ScratchDir source;
  static const std::string layout = source_layout(source);
  if (size == 0) return 0;
  ScriptedRegistry http(fuzzing::split(fuzzing::as_text(data, size).substr(1), '\0', 32), scratch);
  images::RegistryOptions options;
  options.credentials = images::RegistryCredentials{"user", "secret"};
  options.parallel_blobs = 1;  // answers are consumed in request order: one request at a time
  options.chunk_threshold = 16;  // push uploads every blob in chunks
  options.chunk_size = 40;
  images::RegistryClient client(http, options);
  const auto ref = images::parse_image_reference("registry.example/team/image:1.0");
  if (!ref) std::abort();
  switch (data[0] % 4) {
    case 0: (void)client.fetch_manifest_and_config(*ref); break;
    case 1: (void)client.pull(*ref, scratch.path() + "/layout"); break;
    case 2: (void)client.blob_exists(*ref, *Digest::parse("sha256:" + std::string(64, 'a'))); break;
    default: (void)client.push(layout, *ref); break;
  }
  scratch.reset();
  return 0;
}
