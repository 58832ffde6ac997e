#include "images/oci/parallel_gzip.hpp"

#define ZLIB_CONST
#include <zlib.h>

#include <algorithm>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <new>
#include <optional>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace gpuenv::images {
namespace {

constexpr std::size_t k_dict_bytes = 32768;  // deflate's window: all a block can refer back to
constexpr std::size_t k_min_block_bytes = k_dict_bytes;
constexpr std::size_t k_max_block_bytes = std::size_t{64} << 20;
constexpr unsigned k_max_threads = 256;
constexpr unsigned char k_os_unknown = 255;
constexpr int k_raw_window_bits = -15;  // raw deflate, 32 KiB window: the gzip wrapper is ours
constexpr int k_mem_level = 8;          // zlib's and pigz's default

/// One block: its dictionary and data in, its deflate bytes and CRC-32 out.
struct Job {
  std::uint64_t seq = 0;
  bool last = false;
  std::vector<unsigned char> input;  // dict_len bytes of dictionary, then data_len bytes of data
  std::size_t dict_len = 0;
  std::size_t data_len = 0;
  std::vector<unsigned char> output;  // grows only, so recycled jobs allocate nothing
  std::size_t output_len = 0;
  std::uint32_t crc = 0;
  bool done = false;  // guarded by State::mutex
  std::optional<Error> error;
};

/// zlib's allocations for one deflate stream at a time, kept between blocks: a fresh stream per block then
/// costs no malloc, free or page faults (freeing ~270 KiB per block let glibc hand pages back to the kernel).
class DeflateArena {
 public:
  static voidpf alloc(voidpf opaque, uInt items, uInt size) {
    auto* self = static_cast<DeflateArena*>(opaque);
    const std::size_t bytes = std::size_t{items} * size;
    if (self->m_next == self->m_chunks.size()) self->m_chunks.emplace_back();
    Chunk& c = self->m_chunks[self->m_next];
    if (c.size < bytes) {
      c.data.reset(new (std::nothrow) unsigned char[bytes]);
      c.size = c.data ? bytes : 0;
      if (!c.data) return Z_NULL;
    }
    ++self->m_next;
    return c.data.get();
  }
  static void release(voidpf, voidpf) {}  // everything is released by reset() and the destructor
  /// Makes every chunk available to the next stream; call between deflateEnd and deflateInit2.
  void reset() { m_next = 0; }

 private:
  struct Chunk {
    std::unique_ptr<unsigned char[]> data;
    std::size_t size = 0;
  };
  std::vector<Chunk> m_chunks;
  std::size_t m_next = 0;
};

Error deflate_error(const Job& job, const char* call, int rc, const z_stream& zs) {
  return make_error(ErrorKind::internal, "gzip.deflate",
                    std::string(call) + " failed with zlib code " + std::to_string(rc) +
                        (zs.msg != nullptr ? std::string(" (") + zs.msg + ")" : std::string()) + " on block " +
                        std::to_string(job.seq) + " of " + std::to_string(job.data_len) + " bytes",
                    "zlib " + std::string(zlibVersion()), "hint: this is a bug or an out-of-memory condition");
}

/// Compresses one block with a fresh deflate stream, so that its bytes depend on nothing but the block, its
/// dictionary, the level and whether it is the last one (a reused stream keeps stale window bytes).
Status deflate_block(Job& job, int level, DeflateArena& arena) {
  arena.reset();
  z_stream zs{};
  zs.zalloc = &DeflateArena::alloc;
  zs.zfree = &DeflateArena::release;
  zs.opaque = &arena;
  int rc = deflateInit2(&zs, level, Z_DEFLATED, k_raw_window_bits, k_mem_level, Z_DEFAULT_STRATEGY);
  if (rc != Z_OK) return deflate_error(job, "deflateInit2", rc, zs);
  struct End {
    z_stream* s;
    ~End() { deflateEnd(s); }
  } end{&zs};
  if (job.dict_len > 0) {
    rc = deflateSetDictionary(&zs, job.input.data(), static_cast<uInt>(job.dict_len));
    if (rc != Z_OK) return deflate_error(job, "deflateSetDictionary", rc, zs);
  }
  // Stored blocks (level 0) are cut to fit the output room, so the room must be a function of the input alone.
  const std::size_t bound = deflateBound(&zs, static_cast<uLong>(job.data_len)) + 64;
  if (job.output.size() < bound) job.output.resize(bound);
  job.output_len = 0;
  zs.next_in = job.input.data() + job.dict_len;
  zs.avail_in = static_cast<uInt>(job.data_len);

  auto run = [&](int flush, const char* what) -> Status {
    do {
      if (job.output_len == job.output.size()) job.output.resize(job.output.size() * 2);
      zs.next_out = job.output.data() + job.output_len;
      zs.avail_out = static_cast<uInt>(std::min<std::size_t>(job.output.size() - job.output_len, UINT_MAX));
      const int r = deflate(&zs, flush);
      job.output_len = static_cast<std::size_t>(zs.next_out - job.output.data());
      // Z_BUF_ERROR only says that a repeated flush had nothing left to do.
      if (r != Z_OK && r != Z_STREAM_END && r != Z_BUF_ERROR) return deflate_error(job, what, r, zs);
    } while (zs.avail_out == 0);
    return ok_status();
  };

  if (job.last) {
    if (auto s = run(Z_FINISH, "deflate(Z_FINISH)"); !s) return s;
  } else {
    // End on a byte boundary without a final block, spending as few bits as pigz does: Z_BLOCK leaves up to 7
    // bits pending; an odd count needs the 5-byte sync marker, an even one is padded with 10-bit empty static
    // blocks.
    if (auto s = run(Z_BLOCK, "deflate(Z_BLOCK)"); !s) return s;
    int bits = 0;
    rc = deflatePending(&zs, nullptr, &bits);
    if (rc != Z_OK) return deflate_error(job, "deflatePending", rc, zs);
    if ((bits & 1) != 0) {
      if (auto s = run(Z_SYNC_FLUSH, "deflate(Z_SYNC_FLUSH)"); !s) return s;
    } else if ((bits & 7) != 0) {
      do {
        rc = deflatePrime(&zs, 10, 2);  // BFINAL 0, BTYPE 01 (static), end-of-block code 0000000
        if (rc != Z_OK) return deflate_error(job, "deflatePrime", rc, zs);
        rc = deflatePending(&zs, nullptr, &bits);
        if (rc != Z_OK) return deflate_error(job, "deflatePending", rc, zs);
      } while ((bits & 7) != 0);
      if (auto s = run(Z_BLOCK, "deflate(Z_BLOCK)"); !s) return s;
    }
  }
  if (zs.avail_in != 0) return deflate_error(job, "deflate left input unconsumed", Z_STREAM_ERROR, zs);
  job.crc = static_cast<std::uint32_t>(
      crc32(crc32(0L, Z_NULL, 0), job.input.data() + job.dict_len, static_cast<uInt>(job.data_len)));
  return ok_status();
}

/// Runs deflate_block and keeps any failure in the job; never throws.
void compress_job(Job& job, int level, DeflateArena& arena) {
  try {
    if (auto s = deflate_block(job, level, arena); !s) job.error = s.error();
  } catch (const std::bad_alloc&) {
    job.error = make_error(ErrorKind::environment, "gzip.out_of_memory",
                           "out of memory compressing block " + std::to_string(job.seq), "",
                           "hint: use fewer threads or a smaller block size");
  } catch (const std::exception& e) {
    job.error = make_error(ErrorKind::internal, "gzip.internal",
                           "compressing block " + std::to_string(job.seq) + ": " + e.what());
  }
}

void put_le32(unsigned char* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}

}  // namespace

struct ParallelGzip::State {
  State(GzipSink sink_in, GzipOptions options_in) : sink(std::move(sink_in)), options(options_in) {
    if (auto s = check_options(options); !s) options_error = s.error();
    threads = options.threads != 0 ? options.threads : std::max(1U, std::thread::hardware_concurrency());
    threads = std::min(threads, k_max_threads);
    capacity = std::size_t{2} * threads;
  }
  ~State() { stop_workers(); }
  State(const State&) = delete;
  State& operator=(const State&) = delete;

  GzipSink sink;
  GzipOptions options;
  unsigned threads = 1;
  std::size_t capacity = 2;  // blocks submitted and not yet written
  std::optional<Error> options_error;

  // Used by the caller's thread only.
  std::unique_ptr<Job> filling;
  std::vector<std::unique_ptr<Job>> spare;
  std::uint64_t next_seq = 0;    // sequence number of the next block submitted
  std::uint64_t next_write = 0;  // sequence number of the next block given to the sink
  std::uint64_t total_in = 0;
  std::uint64_t total_out = 0;
  std::uint32_t crc = 0;
  bool header_written = false;
  bool finished = false;
  std::optional<Error> failure;
  std::vector<std::thread> workers;

  // Shared with the workers.
  std::mutex mutex;
  std::condition_variable work_cv;  // a job was queued, or stop
  std::condition_variable done_cv;  // a job is done
  std::deque<Job*> queue;
  std::vector<std::unique_ptr<Job>> ring;  // in-flight jobs by seq % capacity, owned here
  bool stop = false;

  void worker_loop() {
    DeflateArena arena;
    for (;;) {
      Job* job = nullptr;
      {
        std::unique_lock lock(mutex);
        work_cv.wait(lock, [&] { return stop || !queue.empty(); });
        if (stop) return;
        job = queue.front();
        queue.pop_front();
      }
      compress_job(*job, options.level, arena);
      {
        std::lock_guard lock(mutex);
        job->done = true;
      }
      done_cv.notify_one();
    }
  }

  Status start_workers() {
    ring.resize(capacity);
    std::string why;
    for (unsigned i = 0; i < threads; ++i) {
      try {
        workers.emplace_back([this] { worker_loop(); });
      } catch (const std::system_error& e) {
        why = e.what();
        break;  // fewer workers change the speed, never the bytes
      }
    }
    if (workers.empty()) {
      return make_error(ErrorKind::environment, "gzip.threads", "cannot start a compression thread: " + why, "",
                        "hint: raise the process or thread limit (ulimit -u)");
    }
    return ok_status();
  }

  void stop_workers() {
    {
      std::lock_guard lock(mutex);
      stop = true;
      queue.clear();
    }
    work_cv.notify_all();
    for (auto& t : workers) t.join();
    workers.clear();
  }

  Error fail(Error e) {
    failure = e;
    stop_workers();
    return e;
  }

  std::unique_ptr<Job> take_spare() {
    if (!spare.empty()) {
      auto job = std::move(spare.back());
      spare.pop_back();
      return job;
    }
    auto job = std::make_unique<Job>();
    job->input.resize(k_dict_bytes + options.block_bytes);
    return job;
  }

  Status emit(const unsigned char* p, std::size_t n) {
    auto s = sink(reinterpret_cast<const char*>(p), n);
    if (!s) return fail(std::move(s).error().while_("writing gzip output"));
    total_out += n;
    return ok_status();
  }

  /// Gives a finished job's bytes to the sink, in order, and recycles it.
  Status write_out(std::unique_ptr<Job> job) {
    if (job->error) return fail(*job->error);
    if (!header_written) {
      const unsigned char xfl = options.level == 9 ? 2 : options.level < 2 ? 4 : 0;  // as zlib's deflate writes
      const unsigned char header[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, xfl, k_os_unknown};
      if (auto s = emit(header, sizeof header); !s) return s;
      header_written = true;
    }
    if (auto s = emit(job->output.data(), job->output_len); !s) return s;
    crc = static_cast<std::uint32_t>(crc32_combine(crc, job->crc, static_cast<z_off_t>(job->data_len)));
    ++next_write;
    spare.push_back(std::move(job));
    return ok_status();
  }

  /// Writes the next block in order; waits for it when `wait`, else returns false when it is not done yet.
  Result<bool> drain_one(bool wait) {
    std::unique_ptr<Job> job;
    {
      std::unique_lock lock(mutex);
      auto& slot = ring[next_write % capacity];
      if (!wait && !slot->done) return false;
      done_cv.wait(lock, [&] { return slot->done; });
      job = std::move(slot);
    }
    if (auto s = write_out(std::move(job)); !s) return s.error();
    return true;
  }

  /// Hands the filling block to the workers (or compresses it here when it is the only one), keeping at most
  /// `capacity` blocks in flight, and writes whatever is ready.
  Status submit(bool last) {
    if (last && next_seq == 0) {  // a single block: no thread is worth starting
      filling->seq = 0;
      filling->last = true;
      DeflateArena arena;
      compress_job(*filling, options.level, arena);
      ++next_seq;
      return write_out(std::move(filling));
    }
    while (next_seq - next_write >= capacity) {
      if (auto r = drain_one(true); !r) return r.error();
    }
    if (workers.empty()) {
      if (auto s = start_workers(); !s) return fail(s.error());
    }
    std::unique_ptr<Job> job = std::move(filling);
    job->seq = next_seq;
    job->last = last;
    job->done = false;
    job->error.reset();
    if (!last) {
      filling = take_spare();
      const std::size_t dict = std::min(k_dict_bytes, job->data_len);
      std::memcpy(filling->input.data(), job->input.data() + job->dict_len + job->data_len - dict, dict);
      filling->dict_len = dict;
      filling->data_len = 0;
    }
    {
      std::lock_guard lock(mutex);
      queue.push_back(job.get());
      ring[next_seq % capacity] = std::move(job);
    }
    work_cv.notify_one();
    ++next_seq;
    while (next_write < next_seq) {
      auto r = drain_one(false);
      if (!r) return r.error();
      if (!*r) break;
    }
    return ok_status();
  }

  Status check_usable() {
    if (failure) return *failure;
    if (options_error) return *options_error;
    if (finished) {
      return make_error(ErrorKind::internal, "gzip.finished", "the gzip stream is already finished", "",
                        "hint: create a new ParallelGzip for another stream");
    }
    return ok_status();
  }

  Status write(const char* data, std::size_t size) {
    if (auto s = check_usable(); !s) return s;
    if (!filling) filling = take_spare();
    while (size > 0) {
      if (filling->data_len == options.block_bytes) {
        // Only now is it known that this full block is not the last one.
        if (auto s = submit(false); !s) return s;
      }
      const std::size_t n = std::min(size, options.block_bytes - filling->data_len);
      std::memcpy(filling->input.data() + filling->dict_len + filling->data_len, data, n);
      filling->data_len += n;
      total_in += n;
      data += n;
      size -= n;
    }
    return ok_status();
  }

  Result<GzipSummary> finish() {
    if (auto s = check_usable(); !s) return s.error();
    if (!filling) filling = take_spare();
    if (auto s = submit(true); !s) return s.error();
    while (next_write < next_seq) {
      if (auto r = drain_one(true); !r) return r.error();
    }
    unsigned char trailer[8];
    put_le32(trailer, crc);
    put_le32(trailer + 4, static_cast<std::uint32_t>(total_in));  // ISIZE is the length modulo 2^32
    if (auto s = emit(trailer, sizeof trailer); !s) return s.error();
    finished = true;
    stop_workers();
    spare.clear();
    return GzipSummary{total_in, total_out, crc};
  }
};

namespace {

Error exception_error(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr) {
    return make_error(ErrorKind::environment, "gzip.out_of_memory", "out of memory while compressing", "",
                      "hint: use fewer threads or a smaller block size");
  }
  return make_error(ErrorKind::internal, "gzip.internal", std::string("while compressing: ") + e.what());
}

Error moved_from_error() {
  return make_error(ErrorKind::internal, "gzip.moved_from", "this ParallelGzip was moved from", "",
                    "hint: use the object it was moved to");
}

}  // namespace

ParallelGzip::ParallelGzip(GzipSink sink, GzipOptions options)
    : m_state(std::make_unique<State>(std::move(sink), options)) {}

ParallelGzip::~ParallelGzip() = default;
ParallelGzip::ParallelGzip(ParallelGzip&&) noexcept = default;
ParallelGzip& ParallelGzip::operator=(ParallelGzip&&) noexcept = default;

Status ParallelGzip::write(const char* data, std::size_t size) {
  if (!m_state) return moved_from_error();
  try {
    return m_state->write(data, size);
  } catch (const std::exception& e) {
    return m_state->fail(exception_error(e));
  }
}

Result<GzipSummary> ParallelGzip::finish() {
  if (!m_state) return moved_from_error();
  try {
    return m_state->finish();
  } catch (const std::exception& e) {
    return m_state->fail(exception_error(e));
  }
}

Status ParallelGzip::check_options(const GzipOptions& options) {
  if (options.level < 0 || options.level > 9) {
    return make_error(ErrorKind::usage, "gzip.options",
                      "gzip level " + std::to_string(options.level) + " is not between 0 and 9", "",
                      "hint: use 6 (the default) or 9 for the smallest layers");
  }
  if (options.block_bytes < k_min_block_bytes || options.block_bytes > k_max_block_bytes) {
    return make_error(ErrorKind::usage, "gzip.options",
                      "gzip block size " + std::to_string(options.block_bytes) + " is not between " +
                          std::to_string(k_min_block_bytes) + " and " + std::to_string(k_max_block_bytes) + " bytes",
                      "", "hint: keep the default of 128 KiB");
  }
  return ok_status();
}

Result<std::string> gzip_compress(std::string_view data, const GzipOptions& options) {
  std::string out;
  ParallelGzip gz(
      [&out](const char* p, std::size_t n) -> Status {
        out.append(p, n);
        return ok_status();
      },
      options);
  if (auto s = gz.write(data.data(), data.size()); !s) return s.error();
  if (auto r = gz.finish(); !r) return std::move(r).error();
  return out;
}

std::string deflate_implementation() { return std::string("zlib ") + zlibVersion(); }

}  // namespace gpuenv::images
