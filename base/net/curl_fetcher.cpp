#include "base/net/curl_fetcher.hpp"

#include "base/digest.hpp"

#include <curl/curl.h>

#include "base/net/curl_common.hpp"
#include "base/net/http_client.hpp"
#include "base/net/http_headers.hpp"
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>
#include <thread>
#include <utility>
#include <vector>

namespace gpuenv {
namespace {

constexpr IoArea k_fetch_io{"fetch.io", "check free disk space and permissions"};
constexpr IoArea k_part_create_io{"fetch.io", "check that the directory exists and is writable"};

using Clock = std::chrono::steady_clock;


enum class Outcome { pending, done, failed };

struct Transfer;

/// Writes and hashes received bytes on its own thread, so that on a large download the receiving thread
/// only copies into a buffer while the previous buffer goes to disk and through sha256 (hashing alone is
/// about a third of a loopback transfer's time). Chunks of one transfer are handled in order; `drain`
/// waits until a transfer's chunks are all written.
class DiskWriter {
 public:
  static constexpr std::size_t chunk_bytes = std::size_t{1} << 20;
  static constexpr std::size_t max_queued_bytes = std::size_t{64} << 20;

  DiskWriter() = default;
  ~DiskWriter() {
    if (m_thread.joinable()) {
      {
        std::lock_guard lock(m_mu);
        m_stop = true;
      }
      m_cv.notify_all();
      m_thread.join();
    }
  }
  DiskWriter(const DiskWriter&) = delete;
  DiskWriter& operator=(const DiskWriter&) = delete;

  std::vector<char> take_buffer() {
    std::lock_guard lock(m_mu);
    if (m_free.empty()) {
      std::vector<char> b;
      b.reserve(chunk_bytes);
      return b;
    }
    auto b = std::move(m_free.back());
    m_free.pop_back();
    return b;
  }

  void submit(Transfer* t, std::vector<char> buf);
  void drain(Transfer* t);

 private:
  struct Chunk {
    Transfer* t;
    std::vector<char> buf;
  };
  void loop();

  std::mutex m_mu;
  std::condition_variable m_cv;       // work arrived, or stop
  std::condition_variable m_done_cv;  // a chunk was finished
  std::deque<Chunk> m_queue;
  std::vector<std::vector<char>> m_free;
  std::size_t m_queued = 0;
  bool m_stop = false;
  std::thread m_thread;
};

struct Transfer {
  // What to do.
  std::size_t index = 0;  // in the caller's requests
  std::string url;
  std::string dest;  // empty: into memory
  std::optional<Digest> sha256;
  std::optional<std::uint64_t> size;
  // State.
  CURL* easy = nullptr;
  int fd = -1;
  std::string memory;
  Sha256 hash;
  std::uint64_t offset = 0;    // bytes already on disk when this attempt started
  std::uint64_t received = 0;  // bytes written by this attempt
  bool first_write = true;
  bool too_large = false;
  bool restarted_after_mismatch = false;
  bool no_ranges = false;
  std::string accept;  // "Accept: ..." header line, or empty
  std::string range;   // "a-b" for a ranged get, or empty
  bool no_range_support = false;
  curl_slist* headers = nullptr;  // the server ignored Range once: always start from byte 0
  int attempts = 0;
  int slow_attempts = 0;  // ended by the connect timeout or the rate rule
  Clock::time_point not_before{};
  Clock::time_point started{};  // of the first attempt: the request's deadline counts from here
  RequestDeadline deadline;
  std::optional<long> retry_after_s;
  char errbuf[CURL_ERROR_SIZE] = {};
  Outcome outcome = Outcome::pending;
  std::optional<Error> error;
  std::uint64_t max_bytes = 0;
  std::uint64_t* progress_bytes = nullptr;
  // Handed to the DiskWriter (files only).
  std::vector<char> stage;     // bytes not yet submitted
  std::size_t in_flight = 0;   // chunks submitted and not yet written (guarded by the writer's mutex)
  std::atomic<int> write_errno{0};  // set by the writer thread when a write fails
  DiskWriter* writer = nullptr;
  bool write_failed() const { return write_errno.load(std::memory_order_relaxed) != 0; }
  std::string part() const { return dest + ".part"; }
};

void DiskWriter::submit(Transfer* t, std::vector<char> buf) {
  std::unique_lock lock(m_mu);
  if (!m_thread.joinable()) m_thread = std::thread([this] { loop(); });
  m_done_cv.wait(lock, [&] { return m_queued < max_queued_bytes; });
  m_queued += buf.size();
  ++t->in_flight;
  m_queue.push_back({t, std::move(buf)});
  m_cv.notify_one();
}

void DiskWriter::drain(Transfer* t) {
  std::unique_lock lock(m_mu);
  m_done_cv.wait(lock, [&] { return t->in_flight == 0; });
}

void DiskWriter::loop() {
  std::unique_lock lock(m_mu);
  while (true) {
    m_cv.wait(lock, [&] { return m_stop || !m_queue.empty(); });
    if (m_queue.empty()) return;
    Chunk c = std::move(m_queue.front());
    m_queue.pop_front();
    lock.unlock();
    int err = 0;
    if (!c.t->write_failed()) {
      std::size_t done = 0;
      while (done < c.buf.size()) {
        const ssize_t w = ::write(c.t->fd, c.buf.data() + done, c.buf.size() - done);
        if (w < 0) {
          if (errno == EINTR) continue;
          err = errno;
          break;
        }
        done += static_cast<std::size_t>(w);
      }
      if (err == 0) {
        // Start writeback now so the fsync at the end finds little left to do.
        const off_t end = ::lseek(c.t->fd, 0, SEEK_CUR);
        if (end > 0) ::sync_file_range(c.t->fd, end - static_cast<off_t>(c.buf.size()), static_cast<off_t>(c.buf.size()), SYNC_FILE_RANGE_WRITE);
        c.t->hash.update(c.buf.data(), c.buf.size());
      }
    }
    if (err != 0) c.t->write_errno.store(err);
    lock.lock();
    m_queued -= c.buf.size();
    --c.t->in_flight;
    c.buf.clear();
    if (m_free.size() < max_queued_bytes / chunk_bytes) m_free.push_back(std::move(c.buf));
    m_done_cv.notify_all();
  }
}



class CurlFetcher final : public Fetcher {
 public:
  explicit CurlFetcher(FetchOptions o) : m_o(std::move(o)) {
    init_curl_once();
    m_multi = curl_multi_init();
    curl_multi_setopt(m_multi, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
    curl_multi_setopt(m_multi, CURLMOPT_MAX_HOST_CONNECTIONS, static_cast<long>(std::max(1, m_o.parallel)));
  }
  ~CurlFetcher() override {
    for (CURL* e : m_pool) curl_easy_cleanup(e);
    curl_multi_cleanup(m_multi);
  }
  CurlFetcher(const CurlFetcher&) = delete;
  CurlFetcher& operator=(const CurlFetcher&) = delete;

  Result<std::string> get(const std::string& url, const std::string& accept) override {
    std::deque<Transfer> ts(1);
    ts[0].url = url;
    if (!accept.empty()) ts[0].accept = "Accept: " + accept;
    ts[0].max_bytes = m_o.max_document_bytes;
    run(ts);
    if (ts[0].outcome != Outcome::done) return *ts[0].error;
    return std::move(ts[0].memory);
  }

  Result<std::string> get_range(const std::string& url, std::uint64_t offset, std::uint64_t length) override {
    if (length == 0) return std::string();
    std::deque<Transfer> ts(1);
    ts[0].url = url;
    ts[0].range = std::to_string(offset) + "-" + std::to_string(offset + length - 1);
    ts[0].max_bytes = length;
    run(ts);
    if (ts[0].outcome != Outcome::done) return *ts[0].error;
    return std::move(ts[0].memory);
  }

  std::vector<Result<FetchedFile>> fetch_all(const std::vector<FetchRequest>& requests) override { return fetch_each(requests, {}); }

  std::vector<Result<FetchedFile>> fetch_each(const std::vector<FetchRequest>& requests, const FetchDone& done) override {
    std::deque<Transfer> ts(requests.size());
    for (std::size_t i = 0; i < requests.size(); ++i) {
      ts[i].url = requests[i].url;
      ts[i].dest = requests[i].dest;
      ts[i].sha256 = requests[i].sha256;
      ts[i].size = requests[i].size;
      ts[i].index = i;
    }
    run(ts, [&](const Transfer& t) {
      if (done) done(t.index, result_of(t));
    });
    std::vector<Result<FetchedFile>> out;
    for (auto& t : ts) out.push_back(result_of(t));
    return out;
  }

 private:
  static Result<FetchedFile> result_of(const Transfer& t) {
    if (t.outcome == Outcome::done) return FetchedFile{t.url, t.dest, t.offset + t.received, t.sha256.value_or(Digest()), t.attempts};
    return *t.error;
  }

  static std::size_t on_header(char* data, std::size_t size, std::size_t n, void* user) {
    auto* t = static_cast<Transfer*>(user);
    const std::size_t len = size * n;
    if (const auto header = parse_header_line(std::string_view(data, len)); header && header->name == "retry-after") {
      if (const auto seconds = parse_retry_after(header->value)) t->retry_after_s = seconds;
    }
    return len;
  }

  static std::size_t on_write(char* data, std::size_t size, std::size_t n, void* user) {
    auto* t = static_cast<Transfer*>(user);
    const std::size_t len = size * n;
    if (t->first_write) {
      t->first_write = false;
      long code = 0;
      curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &code);
      if (!t->range.empty() && code != 206) {  // a ranged get answered with the whole file
        t->no_range_support = true;
        return 0;
      }
      if (t->offset > 0 && code == 200) {  // the server ignored Range: start over
        if (ftruncate(t->fd, 0) != 0 || lseek(t->fd, 0, SEEK_SET) != 0) return 0;
        t->hash.reset();
        t->offset = 0;
      }
    }
    const std::uint64_t total = t->offset + t->received + len;
    if ((t->size && total > *t->size) || (t->max_bytes && total > t->max_bytes)) {
      t->too_large = true;
      return 0;  // aborts the transfer with CURLE_WRITE_ERROR
    }
    if (t->fd >= 0) {
      if (t->write_failed()) return 0;  // aborts the transfer; complete() reports the errno
      std::size_t done = 0;
      while (done < len) {
        if (t->stage.capacity() == 0) t->stage = t->writer->take_buffer();
        const std::size_t take = std::min(len - done, DiskWriter::chunk_bytes - t->stage.size());
        t->stage.insert(t->stage.end(), data + done, data + done + take);
        done += take;
        if (t->stage.size() == DiskWriter::chunk_bytes) t->writer->submit(t, std::exchange(t->stage, {}));
      }
    } else {
      t->memory.append(data, len);
      t->hash.update(data, len);
    }
    t->received += len;
    if (t->progress_bytes) *t->progress_bytes += len;
    return len;
  }

  CURL* take_easy() {
    if (m_pool.empty()) return curl_easy_init();
    CURL* e = m_pool.back();
    m_pool.pop_back();
    curl_easy_reset(e);
    return e;
  }

  Error fail(const Transfer& t, const std::string& id, const std::string& what, const std::string& hint) const {
    return make_error(ErrorKind::environment, id, what + " (after " + std::to_string(t.attempts) + " attempt" + (t.attempts == 1 ? "" : "s") + ")",
                      t.url, hint);
  }

  // Opens the part file and hashes what an earlier attempt left in it, for resuming.
  bool open_part(Transfer& t) {
    t.hash.reset();
    t.offset = 0;
    t.fd = ::open(t.part().c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (t.fd < 0) {
      t.error = io_error(k_part_create_io, "cannot create " + t.part(), t.url);
      return false;
    }
    char buf[1 << 16];
    while (true) {
      const ssize_t r = ::read(t.fd, buf, sizeof buf);
      if (r <= 0) break;
      t.hash.update(buf, static_cast<std::size_t>(r));
      t.offset += static_cast<std::uint64_t>(r);
    }
    if (t.no_ranges || (t.size && t.offset > *t.size)) {  // cannot resume, or stale leftovers: start over
      if (ftruncate(t.fd, 0) != 0) {
        t.error = io_error(k_fetch_io, "cannot truncate " + t.part(), t.url);
        ::close(t.fd);
        t.fd = -1;
        return false;
      }
      lseek(t.fd, 0, SEEK_SET);
      t.hash.reset();
      t.offset = 0;
    }
    return true;
  }

  bool start(Transfer& t) {
    if (t.attempts == 0) t.started = Clock::now();
    t.deadline = request_deadline(m_o.limits, t.started, t.size);
    if (Clock::now() >= t.deadline.at) {
      t.error = deadline_error(t, "no time is left for an attempt");
      t.outcome = Outcome::failed;  // run() counts it as done
      if (!t.dest.empty()) ::unlink(t.part().c_str());
      return false;
    }
    ++t.attempts;
    t.received = 0;
    t.first_write = true;
    t.too_large = false;
    t.retry_after_s.reset();
    t.errbuf[0] = 0;
    if (!t.dest.empty()) {
      if (!open_part(t)) {
        t.outcome = Outcome::failed;
        return false;
      }
    } else {
      t.memory.clear();
      t.hash.reset();
      t.offset = 0;
    }
    t.progress_bytes = &m_progress.bytes_done;
    t.writer = &m_writer;
    t.stage.clear();
    t.write_errno.store(0);
    CURL* e = take_easy();
    t.easy = e;
    curl_easy_setopt(e, CURLOPT_URL, t.url.c_str());
    curl_easy_setopt(e, CURLOPT_PRIVATE, &t);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &CurlFetcher::on_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &CurlFetcher::on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, &t);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t.errbuf);
    curl_easy_setopt(e, CURLOPT_FAILONERROR, 1L);
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(e, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    // Waiting for a connection that may multiplex pays only where HTTP/2 can be offered (TLS with ALPN); on
    // plain http the other transfers would wait for the first one to finish (measured: serial downloads).
    curl_easy_setopt(e, CURLOPT_PIPEWAIT, t.url.rfind("https://", 0) == 0 ? 1L : 0L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https,file");
    curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    set_transfer_options(e, m_o.ca_bundle, m_o.limits, millis_until(t.deadline.at), m_o.user_agent);
    curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 512L * 1024L);  // fewer, larger writes for big files
    if (t.offset > 0) curl_easy_setopt(e, CURLOPT_RESUME_FROM_LARGE, static_cast<curl_off_t>(t.offset));
    if (!t.range.empty()) curl_easy_setopt(e, CURLOPT_RANGE, t.range.c_str());
    if (!t.accept.empty()) {
      if (!t.headers) t.headers = curl_slist_append(nullptr, t.accept.c_str());
      curl_easy_setopt(e, CURLOPT_HTTPHEADER, t.headers);
    }
    curl_multi_add_handle(m_multi, e);
    return true;
  }

  void schedule_retry(Transfer& t, std::string why, bool slow = false) {
    if (slow && ++t.slow_attempts >= m_o.limits.max_slow_attempts) {
      t.error = fail(t, "fetch.too_slow", why,
                     "the server did not connect or sent too little for too long (GPUENV_CONNECT_TIMEOUT, GPUENV_MIN_RATE over GPUENV_RATE_WINDOW); "
                     "check the network, use another mirror or try again later");
      finish_failed(t);
      return;
    }
    if (t.attempts >= m_o.max_attempts) {
      if (!t.error) t.error = fail(t, "fetch.failed", why, "the server or the network keeps failing; try again later or use another mirror");
      finish_failed(t);
      return;
    }
    const auto delay = retry_delay(t.attempts, m_o.backoff_base, m_o.backoff_cap, t.retry_after_s, m_o.limits, t.deadline.at, m_rng, &why);
    if (Clock::now() + delay >= t.deadline.at) {
      t.error = deadline_error(t, why + "; no time is left for another attempt");
      finish_failed(t);
      return;
    }
    t.error.reset();
    m_o.limits.notice(retry_notice("GET " + redact_url(t.url), why, delay, t.attempts + 1, m_o.max_attempts));
    t.not_before = Clock::now() + delay;
    m_waiting.push_back(&t);
  }

  Error deadline_error(const Transfer& t, const std::string& why) const {
    return fail(t, "fetch.deadline", "not done within " + t.deadline.what + ": " + why,
                deadline_hint(t.deadline, "mirror"));
  }

  void finish_failed(Transfer& t) {
    t.outcome = Outcome::failed;
    ++m_progress.files_done;
    if (!t.dest.empty()) ::unlink(t.part().c_str());
  }

  // A transfer curl finished: the file is judged by its size and sha256, then renamed into place.
  void finish_complete(Transfer& t) {
    const std::uint64_t total = t.offset + t.received;
    const Digest digest = t.hash.finish_digest();
    const bool size_bad = t.size && total != *t.size;
    const bool sha_bad = t.sha256 && digest != *t.sha256;
    if (size_bad || sha_bad) {
      if (t.fd >= 0) {
        ::close(t.fd);
        t.fd = -1;
      }
      if (!t.dest.empty()) ::unlink(t.part().c_str());
      const std::string what = size_bad ? "size " + std::to_string(total) + " instead of " + std::to_string(*t.size)
                                        : "sha256 " + digest.hex() + " instead of " + t.sha256->hex();
      if (!t.restarted_after_mismatch) {  // a corrupted transfer may heal once; a wrong file will not
        t.restarted_after_mismatch = true;
        schedule_retry(t, what);
        return;
      }
      t.error = fail(t, "fetch.hash_mismatch", "downloaded file has " + what,
                     "the mirror serves different bytes than its index promises; try another mirror or refresh the index");
      finish_failed(t);
      return;
    }
    if (!t.dest.empty()) {
      if (::fsync(t.fd) != 0 || ::close(t.fd) != 0 || ::rename(t.part().c_str(), t.dest.c_str()) != 0) {
        t.fd = -1;
        t.error = io_error(k_fetch_io, "cannot store " + t.dest, t.url);
        finish_failed(t);
        return;
      }
      t.fd = -1;
    }
    if (!t.sha256) t.sha256 = digest;
    t.outcome = Outcome::done;
    ++m_progress.files_done;
  }

  void complete(Transfer& t, CURLcode code) {
    if (t.fd >= 0) {  // everything received must be on disk (and hashed) before the file is judged
      if (!t.stage.empty() && !t.write_failed())  // also after a failure: a resume continues from them
        m_writer.submit(&t, std::exchange(t.stage, {}));
      t.stage.clear();
      m_writer.drain(&t);
    }
    long http = 0;
    curl_easy_getinfo(t.easy, CURLINFO_RESPONSE_CODE, &http);
    curl_multi_remove_handle(m_multi, t.easy);
    m_pool.push_back(t.easy);
    t.easy = nullptr;
    if (t.fd >= 0 && code != CURLE_OK) {
      ::close(t.fd);
      t.fd = -1;
    }
    if (const int err = t.write_errno.load(); err != 0) {
      if (t.fd >= 0) ::close(t.fd);
      t.fd = -1;
      t.error = io_error(k_fetch_io, "cannot write " + t.part(), t.url, err);
      finish_failed(t);
      return;
    }
    if (code == CURLE_OK) {
      finish_complete(t);
      return;
    }
    if (t.no_range_support) {
      t.error = fail(t, "fetch.no_ranges", "the server does not answer Range requests", "");
      finish_failed(t);
      return;
    }
    if (t.too_large) {
      if (!t.dest.empty()) ::unlink(t.part().c_str());
      t.error = fail(t, "fetch.too_large", "the body is larger than " + (t.size ? "the index says (" + std::to_string(*t.size) + " bytes)" : "the limit of " + std::to_string(t.max_bytes) + " bytes"),
                     "the mirror may be serving another file; try another mirror");
      if (t.size && !t.restarted_after_mismatch) {
        t.restarted_after_mismatch = true;
        t.error.reset();
        schedule_retry(t, "body larger than expected");
        return;
      }
      finish_failed(t);
      return;
    }
    if (code == CURLE_HTTP_RETURNED_ERROR) {
      if (http == 404 || http == 410) {
        t.error = fail(t, "fetch.not_found", "HTTP " + std::to_string(http) + ": not found", "check the URL, suite and component; the index may be stale");
        finish_failed(t);
        return;
      }
      if (http == 416 && t.offset > 0) {  // our partial file is stale or complete: start over
        ::unlink(t.part().c_str());
        schedule_retry(t, "HTTP 416");
        return;
      }
      if (retryable_http(http)) {
        schedule_retry(t, "HTTP " + std::to_string(http));
        return;
      }
      t.error = fail(t, "fetch.http", "HTTP " + std::to_string(http), http == 401 || http == 403 ? "check credentials and access rights" : "");
      finish_failed(t);
      return;
    }
    if (code == CURLE_RANGE_ERROR) {
      t.no_ranges = true;
      schedule_retry(t, "the server does not support resuming");
      return;
    }
    const std::string why = std::string(curl_easy_strerror(code)) + (t.errbuf[0] ? std::string(": ") + t.errbuf : "");
    if (hit_deadline(code, t.deadline.at)) {
      if (!t.dest.empty()) ::unlink(t.part().c_str());
      t.error = deadline_error(t, why);
      finish_failed(t);
      return;
    }
    if (retryable_curl(code)) {
      schedule_retry(t, why, code == CURLE_OPERATION_TIMEDOUT);
      return;
    }
    t.error = fail(t, "fetch.failed", why,
                   code == CURLE_PEER_FAILED_VERIFICATION || code == CURLE_SSL_CACERT_BADFILE
                       ? "TLS verification failed; give the right CA bundle (GPUENV_CA_BUNDLE) rather than disabling verification"
                       : "");
    finish_failed(t);
  }

  /// Runs the transfers; `finished` is told of each as it gets its outcome (done or failed).
  void run(std::deque<Transfer>& ts, const std::function<void(const Transfer&)>& finished = {}) {
    auto tell = [&](const Transfer& t) {
      if (finished && t.outcome != Outcome::pending) finished(t);
    };
    struct FreeHeaders {
      std::deque<Transfer>& ts;
      ~FreeHeaders() {
        for (auto& t : ts) curl_slist_free_all(t.headers);
      }
    } free_headers{ts};
    m_progress = FetchProgress{};
    m_progress.files_total = ts.size();
    for (const auto& t : ts) m_progress.bytes_total += t.size.value_or(0);
    m_waiting.clear();
    for (auto& t : ts) m_waiting.push_back(&t);
    NetworkBudget::Active spending(m_o.limits.budget.get());
    int active = 0;
    while (active > 0 || !m_waiting.empty()) {
      const auto now = Clock::now();
      for (auto it = m_waiting.begin(); it != m_waiting.end() && active < std::max(1, m_o.parallel);) {
        Transfer* t = *it;
        if (t->not_before > now) {
          ++it;
          continue;
        }
        it = m_waiting.erase(it);
        if (start(*t)) ++active;
        else {
          ++m_progress.files_done;
          tell(*t);
        }
      }
      int running = 0;
      curl_multi_perform(m_multi, &running);
      int left = 0;
      while (CURLMsg* msg = curl_multi_info_read(m_multi, &left)) {
        if (msg->msg != CURLMSG_DONE) continue;
        Transfer* t = nullptr;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &t);
        --active;
        complete(*t, msg->data.result);
        tell(*t);
      }
      if (m_o.on_progress) m_o.on_progress(m_progress);
      if (active == 0 && !m_waiting.empty()) {
        auto next = Clock::time_point::max();
        for (auto* t : m_waiting) next = std::min(next, t->not_before);
        const auto wait = next - Clock::now();
        if (wait > Clock::duration::zero()) std::this_thread::sleep_for(std::min<Clock::duration>(wait, std::chrono::seconds(1)));
        continue;
      }
      curl_multi_poll(m_multi, nullptr, 0, 50, nullptr);
    }
  }

  FetchOptions m_o;
  DiskWriter m_writer;
  CURLM* m_multi = nullptr;
  std::vector<CURL*> m_pool;
  std::vector<Transfer*> m_waiting;
  FetchProgress m_progress;
  std::mt19937 m_rng{std::random_device{}()};
};

}  // namespace

std::unique_ptr<Fetcher> make_curl_fetcher(FetchOptions options) { return std::make_unique<CurlFetcher>(std::move(options)); }

}  // namespace gpuenv
