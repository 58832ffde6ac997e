#pragma once
// The port through which the registry client speaks HTTP: any method, request headers, a body from memory or
// streamed from a slice of a file, response headers, and a response body into memory (bounded) or streamed
// to a file while its sha256 is computed. The Fetcher port only GETs, which is not enough to push an image.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/error.hpp"
#include "base/net/net_limits.hpp"

namespace gpuenv {

/// A request body read from `length` bytes of `path` starting at `offset`; never loaded into memory.
struct HttpFileBody {
  std::string path;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
};

/// When a failed attempt of a request may be repeated.
enum class HttpRetry {
  automatic,  ///< GET, HEAD and PUT are retried; POST and PATCH are not
  always,     ///< the caller knows the request is safe to repeat (e.g. a POST starting a blob upload)
  never,      ///< one attempt only
};

/// One HTTP request. Headers named "Authorization" are sent but never appear in errors.
struct HttpRequest {
  std::string method = "GET";
  std::string url;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;                       ///< sent when `body_file` is empty (and the method sends a body)
  std::optional<HttpFileBody> body_file;  ///< streamed from disk instead of `body`
  bool follow_redirects = false;          ///< curl drops Authorization when a redirect changes host
  std::string download_to;                ///< not empty: a 2xx body goes to this file (created or truncated)
  std::uint64_t max_body = 4u << 20;      ///< more body bytes than this (in memory or to the file) fails
  HttpRetry retry = HttpRetry::automatic;
};

/// The final answer to a request (after redirects and retries).
struct HttpResponse {
  long status = 0;
  std::vector<std::pair<std::string, std::string>> headers;  ///< names lower-cased, in arrival order
  std::string body;            ///< in memory; for a download, only the body of a non-2xx answer
  std::string effective_url;   ///< after redirects
  std::string body_sha256;     ///< lower-case hex of the body received (downloads and memory alike)
  std::uint64_t body_bytes = 0;
  int attempts = 0;

  /// The first value of header `name` (lower-case), if present.
  [[nodiscard]] std::optional<std::string> header(const std::string& name) const;
};

/// Settings of the curl adapter.
struct HttpOptions {
  std::string ca_bundle;                             ///< extra CA file; TLS verification is always on
  NetLimits limits;                                  ///< timeouts, rate rule, deadlines, budget, notices
  int max_attempts = 4;                              ///< per request, first try included
  std::chrono::milliseconds backoff_base{250};       ///< doubled per retry, jittered, capped below
  std::chrono::milliseconds backoff_cap{8000};
  std::string user_agent = "gpuenv";
};

/// Sends HTTP requests. Safe to call from several threads at once.
///
/// An answer with any status is a successful send (the caller judges 4xx/5xx); an error means no usable
/// answer: connection or TLS failure ("http.failed", "http.tls"), a body over `max_body` ("http.too_large"),
/// a download file that cannot be written ("http.io"), no answer within the request's deadline or the command's
/// network budget ("http.deadline", see NetLimits). Retryable requests (see HttpRetry) are repeated with
/// exponential backoff on connection errors, timeouts, 408, 429 (honouring Retry-After in seconds, up to its
/// cap) and 5xx, each retry announced through NetLimits::on_notice; the last answer is returned when attempts
/// or the deadline run out. A file body is re-read from its offset on each attempt.
class HttpClient {
 public:
  virtual ~HttpClient() = default;
  /// Sends `request`; see the class comment for what counts as failure.
  virtual Result<HttpResponse> send(const HttpRequest& request) = 0;
};

/// The libcurl adapter.
std::unique_ptr<HttpClient> make_curl_http_client(HttpOptions options);

/// The URL without its query string and user info, for error messages.
std::string redact_url(const std::string& url);

}  // namespace gpuenv
