#include "base/net/http_client.hpp"

#include <curl/curl.h>

#include "base/net/curl_common.hpp"
#include "base/net/http_headers.hpp"
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

#include "base/digest.hpp"

namespace gpuenv {
namespace {

constexpr std::size_t k_error_body_bytes = 64 * 1024;  // kept of a non-2xx answer to a download
constexpr IoArea k_body_io{"http.io", "check that the file exists and is readable"};  // a request's body file
constexpr IoArea k_download_io{"http.io", "check free disk space and permissions"};   // a download's file

bool tls_problem(CURLcode c) {
  return c == CURLE_PEER_FAILED_VERIFICATION || c == CURLE_SSL_CACERT_BADFILE || c == CURLE_SSL_CERTPROBLEM ||
         c == CURLE_SSL_ISSUER_ERROR;
}


bool may_retry(const HttpRequest& r) {
  switch (r.retry) {
    case HttpRetry::always: return true;
    case HttpRetry::never: return false;
    case HttpRetry::automatic: break;
  }
  const std::string m = r.method;
  return m == "GET" || m == "HEAD" || m == "PUT" || m == "DELETE";
}

// State of one attempt, shared with curl's callbacks.
struct Attempt {
  const HttpRequest* req = nullptr;
  HttpResponse* resp = nullptr;
  CURL* easy = nullptr;
  int in_fd = -1;
  std::uint64_t sent = 0;  // request body bytes handed to curl
  int out_fd = -1;
  Sha256 hash;
  bool first_write = true;
  bool to_file = false;
  bool too_large = false;
  int write_errno = 0;
  std::optional<long> retry_after_s;
};

std::size_t on_header(char* data, std::size_t size, std::size_t n, void* user) {
  auto* a = static_cast<Attempt*>(user);
  const std::size_t len = size * n;
  const std::string_view line(data, len);
  if (is_status_line(line)) {  // a new response (after a redirect or 100 Continue): start over
    a->resp->headers.clear();
    a->retry_after_s.reset();
    return len;
  }
  auto header = parse_header_line(line);
  if (!header) return len;
  if (header->name == "retry-after") {
    if (const auto seconds = parse_retry_after(header->value)) a->retry_after_s = seconds;  // an HTTP date: normal backoff
  }
  a->resp->headers.emplace_back(std::move(header->name), std::move(header->value));
  return len;
}

std::size_t on_write(char* data, std::size_t size, std::size_t n, void* user) {
  auto* a = static_cast<Attempt*>(user);
  const std::size_t len = size * n;
  if (a->first_write) {
    a->first_write = false;
    long code = 0;
    curl_easy_getinfo(a->easy, CURLINFO_RESPONSE_CODE, &code);
    a->to_file = a->out_fd >= 0 && code >= 200 && code < 300;
  }
  // The limit is for the body asked for; the error body of a download is only kept in part.
  const bool error_of_download = a->out_fd >= 0 && !a->to_file;
  if (!error_of_download && a->resp->body_bytes + len > a->req->max_body) {
    a->too_large = true;
    return 0;  // aborts with CURLE_WRITE_ERROR
  }
  if (a->to_file) {
    std::size_t done = 0;
    while (done < len) {
      const ssize_t w = ::write(a->out_fd, data + done, len - done);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) {
        a->write_errno = errno;
        return 0;
      }
      done += static_cast<std::size_t>(w);
    }
  } else if (a->out_fd < 0 || a->resp->body.size() < k_error_body_bytes) {
    a->resp->body.append(data, len);
  }
  a->hash.update(data, len);
  a->resp->body_bytes += len;
  return len;
}

std::size_t on_read(char* buf, std::size_t size, std::size_t n, void* user) {
  auto* a = static_cast<Attempt*>(user);
  const std::size_t room = size * n;
  if (a->req->body_file) {
    const auto& f = *a->req->body_file;
    const std::uint64_t left = f.length - a->sent;
    const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(left, room));
    if (want == 0) return 0;
    ssize_t r;
    do {
      r = ::pread(a->in_fd, buf, want, static_cast<off_t>(f.offset + a->sent));
    } while (r < 0 && errno == EINTR);
    if (r <= 0) return CURL_READFUNC_ABORT;  // the file shrank or cannot be read
    a->sent += static_cast<std::uint64_t>(r);
    return static_cast<std::size_t>(r);
  }
  const std::size_t want = std::min<std::size_t>(a->req->body.size() - static_cast<std::size_t>(a->sent), room);
  std::memcpy(buf, a->req->body.data() + a->sent, want);
  a->sent += want;
  return want;
}

int on_seek(void* user, curl_off_t offset, int origin) {
  auto* a = static_cast<Attempt*>(user);
  if (origin != SEEK_SET || offset < 0) return CURL_SEEKFUNC_CANTSEEK;
  a->sent = static_cast<std::uint64_t>(offset);
  return CURL_SEEKFUNC_OK;
}

bool sends_body(const HttpRequest& r) { return r.method != "GET" && r.method != "HEAD" && r.method != "DELETE"; }

class CurlHttpClient final : public HttpClient {
 public:
  explicit CurlHttpClient(HttpOptions o) : m_o(std::move(o)) { init_curl_once(); }
  ~CurlHttpClient() override {
    for (CURL* e : m_pool) curl_easy_cleanup(e);
  }
  CurlHttpClient(const CurlHttpClient&) = delete;
  CurlHttpClient& operator=(const CurlHttpClient&) = delete;

  Result<HttpResponse> send(const HttpRequest& req) override {
    const std::string where = req.method + " " + redact_url(req.url);
    const int max_attempts = may_retry(req) ? std::max(1, m_o.max_attempts) : 1;
    int in_fd = -1;
    if (req.body_file) {
      in_fd = ::open(req.body_file->path.c_str(), O_RDONLY | O_CLOEXEC);
      if (in_fd < 0) {
        return io_error(k_body_io, "cannot read " + req.body_file->path, where);
      }
    }
    struct CloseIn {
      int fd;
      ~CloseIn() {
        if (fd >= 0) ::close(fd);
      }
    } close_in{in_fd};
    NetworkBudget::Active spending(m_o.limits.budget.get());
    const auto started = NetworkBudget::Clock::now();
    const std::optional<std::uint64_t> size = req.body_file ? std::optional<std::uint64_t>(req.body_file->length) : std::nullopt;
    HttpResponse resp;
    int slow_attempts = 0;
    for (int attempt = 1;; ++attempt) {
      const RequestDeadline deadline = request_deadline(m_o.limits, started, size);
      if (NetworkBudget::Clock::now() >= deadline.at) return deadline_error(where, deadline, attempt - 1, "no time is left for an attempt");
      resp = HttpResponse{};
      resp.attempts = attempt;
      Attempt a;
      a.req = &req;
      a.resp = &resp;
      a.in_fd = in_fd;
      if (!req.download_to.empty()) {
        a.out_fd = ::open(req.download_to.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (a.out_fd < 0) {
          return io_error(k_download_io, "cannot create " + req.download_to, where);
        }
      }
      char errbuf[CURL_ERROR_SIZE] = {};
      const CURLcode code = perform(req, a, errbuf, millis_until(deadline.at));
      if (a.out_fd >= 0) {
        const bool synced = code != CURLE_OK || !a.to_file || ::fsync(a.out_fd) == 0;
        if (!synced && a.write_errno == 0) a.write_errno = errno;
        ::close(a.out_fd);
      }
      resp.body_sha256 = a.hash.finish();
      if (a.write_errno != 0) {
        return io_error(k_download_io, "cannot write " + req.download_to, where, a.write_errno);
      }
      if (a.too_large) {
        return make_error(ErrorKind::environment, "http.too_large",
                          "the response body is larger than the limit of " + std::to_string(req.max_body) + " bytes", where,
                          "the server may be serving something else than asked for");
      }
      const bool last = attempt >= max_attempts;
      std::string why = code == CURLE_OK ? "HTTP " + std::to_string(resp.status)
                                         : std::string(curl_easy_strerror(code)) + (errbuf[0] ? std::string(": ") + errbuf : "");
      if (code == CURLE_OK) {
        if (!retryable_http(resp.status) || last) return resp;
      } else if (hit_deadline(code, deadline.at)) {
        return deadline_error(where, deadline, attempt, why);
      } else if (!retryable_curl(code) || last || (code == CURLE_OPERATION_TIMEDOUT && ++slow_attempts >= m_o.limits.max_slow_attempts)) {
        return transfer_error(where, code, why, attempt);
      }
      const auto delay = retry_delay(attempt, m_o.backoff_base, m_o.backoff_cap, a.retry_after_s, m_o.limits, deadline.at, rng(), &why);
      if (NetworkBudget::Clock::now() + delay >= deadline.at) {
        if (code == CURLE_OK) {  // the last answer, as when attempts run out; said once, since the caller sees only the status
          m_o.limits.notice(where + ": " + why + "; giving up");
          return resp;
        }
        return deadline_error(where, deadline, attempt, why + "; no time is left for another attempt");
      }
      m_o.limits.notice(retry_notice(where, why, delay, attempt + 1, max_attempts));
      std::this_thread::sleep_for(delay);
    }
  }

 private:
  CURLcode perform(const HttpRequest& req, Attempt& a, char* errbuf, long timeout_ms) {
    CURL* e = take_easy();
    a.easy = e;
    curl_slist* headers = nullptr;
    for (const auto& [name, value] : req.headers) headers = curl_slist_append(headers, (name + ": " + value).c_str());
    headers = curl_slist_append(headers, "Expect:");  // no 100-continue round trip before bodies
    curl_easy_setopt(e, CURLOPT_URL, req.url.c_str());
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, &a);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &on_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &a);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, req.follow_redirects ? 1L : 0L);
    curl_easy_setopt(e, CURLOPT_MAXREDIRS, 10L);
    set_transfer_options(e, m_o.ca_bundle, m_o.limits, timeout_ms, m_o.user_agent);
    if (req.method == "HEAD") {
      curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    } else if (sends_body(req)) {
      const std::uint64_t length = req.body_file ? req.body_file->length : req.body.size();
      curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
      curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(length));
      curl_easy_setopt(e, CURLOPT_READFUNCTION, &on_read);
      curl_easy_setopt(e, CURLOPT_READDATA, &a);
      curl_easy_setopt(e, CURLOPT_SEEKFUNCTION, &on_seek);
      curl_easy_setopt(e, CURLOPT_SEEKDATA, &a);
      curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, req.method.c_str());
    } else if (req.method != "GET") {
      curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, req.method.c_str());
    }
    const CURLcode code = curl_easy_perform(e);
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &a.resp->status);
    char* effective = nullptr;
    curl_easy_getinfo(e, CURLINFO_EFFECTIVE_URL, &effective);
    if (effective) a.resp->effective_url = effective;
    curl_slist_free_all(headers);
    give_easy(e);
    return code;
  }

  static std::mt19937& rng() {
    thread_local std::mt19937 r{std::random_device{}()};
    return r;
  }

  static Error deadline_error(const std::string& where, const RequestDeadline& deadline, int attempts, const std::string& why) {
    return make_error(ErrorKind::environment, "http.deadline",
                      "no answer within " + deadline.what + " (" + why + ", after " + std::to_string(attempts) + " attempt" + (attempts == 1 ? "" : "s") + ")", where,
                      deadline_hint(deadline, "registry"));
  }

  static Error transfer_error(const std::string& where, CURLcode code, const std::string& why, int attempt) {
    const std::string tries = " (after " + std::to_string(attempt) + " attempt" + (attempt == 1 ? "" : "s") + ")";
    if (tls_problem(code)) {
      return make_error(ErrorKind::environment, "http.tls", why + tries, where,
                        "TLS verification failed; give the CA that signed the server's certificate (--ca-bundle FILE or GPUENV_CA_BUNDLE) rather than "
                        "disabling verification");
    }
    if (code == CURLE_OPERATION_TIMEDOUT) {
      return make_error(ErrorKind::environment, "http.too_slow", why + tries, where,
                        "the server did not connect or sent too little for too long (GPUENV_CONNECT_TIMEOUT, GPUENV_MIN_RATE over GPUENV_RATE_WINDOW); check the network and try again later");
    }
    return make_error(ErrorKind::environment, "http.failed", why + tries, where, "check that the server is reachable; try again later");
  }

  // Handles are kept, so that their connections (and TLS sessions) are reused by later requests.
  CURL* take_easy() {
    std::lock_guard lock(m_mu);
    if (m_pool.empty()) return curl_easy_init();
    CURL* e = m_pool.back();
    m_pool.pop_back();
    return e;
  }
  void give_easy(CURL* e) {
    curl_easy_reset(e);
    std::lock_guard lock(m_mu);
    m_pool.push_back(e);
  }

  HttpOptions m_o;
  std::mutex m_mu;
  std::vector<CURL*> m_pool;
};

}  // namespace

std::optional<std::string> HttpResponse::header(const std::string& name) const {
  for (const auto& [n, v] : headers) {
    if (n == name) return v;
  }
  return std::nullopt;
}

std::string redact_url(const std::string& url) {
  std::string u = url.substr(0, url.find_first_of("?#"));
  const auto scheme_end = u.find("://");
  if (scheme_end == std::string::npos) return u;
  const auto host_begin = scheme_end + 3;
  const auto path_begin = u.find('/', host_begin);
  const auto at = u.rfind('@', path_begin == std::string::npos ? std::string::npos : path_begin);
  if (at != std::string::npos && at >= host_begin) u.erase(host_begin, at + 1 - host_begin);
  return u;
}

std::unique_ptr<HttpClient> make_curl_http_client(HttpOptions options) { return std::make_unique<CurlHttpClient>(std::move(options)); }

}  // namespace gpuenv
