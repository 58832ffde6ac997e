#include "images/oci/parallel_zstd.hpp"

#include <zstd.h>
#include <zstd_errors.h>

#include <algorithm>
#include <exception>
#include <new>
#include <thread>
#include <utility>
#include <vector>

namespace gpuenv::images {
namespace {

// Why nbWorkers is never 0: zstd.h (1.5.4, and still today) says nothing about thread counts and output. The
// guarantee is the maintainers' word. facebook/zstd issue #2238: "the multi-threaded output is the same for any
// number of threads", while "Single-threaded output is different than multi-threaded output"; issue #2327
// (fixed in 1.4.7 by removing a one-pass shortcut): "The output of zstd multithreaded compression must be
// independent of the number of threads." The zstd(1) manual of 1.5.4 says of --single-thread (nbWorkers 0):
// "Final compressed result is also slightly different from -T1." Maintainer Cyan4973 in #2327 narrowed it to
// *streaming* compression, which is all this file uses; and the tests check it (SameBytesForEveryThreadCount).
constexpr int k_min_level = 1;
constexpr int k_max_level = 19;
constexpr unsigned k_max_zstd_threads = 256;  // ZSTDMT_NBWORKERS_MAX on 64-bit hosts

struct CctxFree {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }  // joins libzstd's workers
};
using CctxPtr = std::unique_ptr<ZSTD_CCtx, CctxFree>;

std::string version_where() { return std::string("libzstd ") + ZSTD_versionString(); }

Error zstd_error(const char* call, std::size_t rc) {
  if (ZSTD_getErrorCode(rc) == ZSTD_error_memory_allocation) {
    return make_error(ErrorKind::environment, "zstd.out_of_memory",
                      std::string(call) + " failed: " + ZSTD_getErrorName(rc), version_where(),
                      "hint: use fewer threads (each holds about 9 MiB) or free memory");
  }
  return make_error(ErrorKind::internal, "zstd.compress",
                    std::string(call) + " failed with zstd error " + std::to_string(ZSTD_getErrorCode(rc)) + " (" +
                        ZSTD_getErrorName(rc) + ")",
                    version_where(), "hint: this is a bug in gpuenv or libzstd");
}

Error size_mismatch(std::uint64_t stated, std::uint64_t given) {
  return make_error(ErrorKind::internal, "zstd.size_mismatch",
                    "the zstd frame was promised " + std::to_string(stated) + " bytes but is given " +
                        (given > stated ? "at least " : "") + std::to_string(given),
                    "", "hint: this is a bug: the content size must be the exact length of the layer");
}

Error zstd_exception_error(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr) {
    return make_error(ErrorKind::environment, "zstd.out_of_memory", "out of memory while compressing", "",
                      "hint: use fewer threads or free memory");
  }
  return make_error(ErrorKind::internal, "zstd.internal", std::string("while compressing: ") + e.what());
}

Error zstd_moved_from_error() {
  return make_error(ErrorKind::internal, "zstd.moved_from", "this ParallelZstd was moved from", "",
                    "hint: use the object it was moved to");
}

}  // namespace

struct ParallelZstd::State {
  State(ZstdSink sink_in, ZstdOptions options_in) : sink(std::move(sink_in)), options(options_in) {
    if (auto s = check_options(options); !s) options_error = s.error();
    threads = options.threads != 0 ? options.threads : std::max(1U, std::thread::hardware_concurrency());
    threads = std::min(threads, k_max_zstd_threads);
  }

  ZstdSink sink;
  ZstdOptions options;
  unsigned threads = 1;
  std::optional<Error> options_error;

  CctxPtr cctx;
  std::vector<char> out;  // compressed bytes not yet given to the sink
  std::size_t out_len = 0;
  std::uint64_t total_in = 0;
  std::uint64_t total_out = 0;
  std::uint32_t tail = 0;  // the last 4 bytes given to the sink, little-endian: the checksum once finished
  bool finished = false;
  std::optional<Error> failure;

  Error fail(Error e) {
    failure = e;
    cctx.reset();
    return e;
  }

  Status check_usable() const {
    if (failure) return *failure;
    if (options_error) return *options_error;
    if (finished) {
      return make_error(ErrorKind::internal, "zstd.finished", "the zstd frame is already finished", "",
                        "hint: create a new ParallelZstd for another frame");
    }
    return ok_status();
  }

  Status set(ZSTD_cParameter param, int value, const char* name) {
    const std::size_t rc = ZSTD_CCtx_setParameter(cctx.get(), param, value);
    if (ZSTD_isError(rc)) return fail(zstd_error(name, rc));
    return ok_status();
  }

  /// Creates and configures the context; every parameter that decides the bytes is set explicitly.
  Status start() {
    if (cctx) return ok_status();
    const ZSTD_bounds workers = ZSTD_cParam_getBounds(ZSTD_c_nbWorkers);
    if (ZSTD_isError(workers.error) || workers.upperBound < 1) {
      return fail(make_error(ErrorKind::environment, "zstd.no_threads",
                             "the linked libzstd was built without multi-threading (ZSTD_MULTITHREAD)",
                             version_where(),
                             "hint: link a libzstd built with multi-threading (Debian's is); single-threaded zstd "
                             "writes other bytes, so gpuenv does not fall back to it"));
    }
    cctx.reset(ZSTD_createCCtx());
    if (!cctx) {
      return fail(make_error(ErrorKind::environment, "zstd.out_of_memory", "cannot allocate a zstd context",
                             version_where(), "hint: free memory"));
    }
    const int workers_wanted = static_cast<int>(std::min<unsigned>(threads, static_cast<unsigned>(workers.upperBound)));
    if (auto s = set(ZSTD_c_compressionLevel, options.level, "ZSTD_c_compressionLevel"); !s) return s;
    if (auto s = set(ZSTD_c_checksumFlag, 1, "ZSTD_c_checksumFlag"); !s) return s;
    if (auto s = set(ZSTD_c_contentSizeFlag, 1, "ZSTD_c_contentSizeFlag"); !s) return s;
    if (auto s = set(ZSTD_c_dictIDFlag, 0, "ZSTD_c_dictIDFlag"); !s) return s;
    if (auto s = set(ZSTD_c_nbWorkers, workers_wanted, "ZSTD_c_nbWorkers"); !s) return s;
    if (auto s = set(ZSTD_c_jobSize, k_zstd_job_bytes, "ZSTD_c_jobSize"); !s) return s;
    if (auto s = set(ZSTD_c_overlapLog, k_zstd_overlap_log, "ZSTD_c_overlapLog"); !s) return s;
    if (options.content_size) {
      const std::size_t rc = ZSTD_CCtx_setPledgedSrcSize(cctx.get(), *options.content_size);
      if (ZSTD_isError(rc)) return fail(zstd_error("ZSTD_CCtx_setPledgedSrcSize", rc));
    }
    // libzstd's recommended size (one compressed block): it stays in cache, and a 1 MiB buffer measured ~10%
    // slower on bench/zstd.sh. The size never changes the bytes, only how they are cut into sink calls.
    out.resize(ZSTD_CStreamOutSize());
    return ok_status();
  }

  Status emit() {
    if (out_len == 0) return ok_status();
    auto s = sink(out.data(), out_len);
    if (!s) return fail(std::move(s).error().while_("writing zstd output"));
    for (std::size_t i = out_len >= 4 ? out_len - 4 : 0; i < out_len; ++i) {
      tail = (tail >> 8) | (std::uint32_t{static_cast<unsigned char>(out[i])} << 24);
    }
    total_out += out_len;
    out_len = 0;
    return ok_status();
  }

  /// One ZSTD_compressStream2 call into the free part of `out`, which is handed to the sink when full.
  Result<std::size_t> step(ZSTD_inBuffer& in, ZSTD_EndDirective op) {
    ZSTD_outBuffer ob{out.data() + out_len, out.size() - out_len, 0};
    const std::size_t rc = ZSTD_compressStream2(cctx.get(), &ob, &in, op);
    out_len += ob.pos;
    if (ZSTD_isError(rc)) return fail(zstd_error("ZSTD_compressStream2", rc));
    if (out_len == out.size()) {
      if (auto s = emit(); !s) return s.error();
    }
    return rc;
  }

  Status write(const char* data, std::size_t size) {
    if (auto s = check_usable(); !s) return s;
    // An empty write must not start the frame: the first ZSTD_compressStream2 call decides how it is compressed
    // (ZSTD_e_end on the first call means a one-job frame), so the bytes would depend on the call pattern.
    if (size == 0) return ok_status();
    if (options.content_size && size > *options.content_size - total_in) {
      return fail(size_mismatch(*options.content_size, total_in + size));
    }
    if (auto s = start(); !s) return s;
    ZSTD_inBuffer in{data, size, 0};
    while (in.pos < in.size) {
      if (auto r = step(in, ZSTD_e_continue); !r) return r.error();
    }
    total_in += size;
    return ok_status();
  }

  Result<ZstdSummary> finish() {
    if (auto s = check_usable(); !s) return s.error();
    if (options.content_size && total_in != *options.content_size) {
      return fail(size_mismatch(*options.content_size, total_in));
    }
    if (auto s = start(); !s) return s.error();
    ZSTD_inBuffer in{nullptr, 0, 0};
    for (;;) {
      auto r = step(in, ZSTD_e_end);
      if (!r) return r.error();
      if (*r == 0) break;
    }
    if (auto s = emit(); !s) return s.error();
    finished = true;
    cctx.reset();
    out = {};
    return ZstdSummary{total_in, total_out, tail};
  }
};

ParallelZstd::ParallelZstd(ZstdSink sink, ZstdOptions options)
    : m_state(std::make_unique<State>(std::move(sink), options)) {}

ParallelZstd::~ParallelZstd() = default;
ParallelZstd::ParallelZstd(ParallelZstd&&) noexcept = default;
ParallelZstd& ParallelZstd::operator=(ParallelZstd&&) noexcept = default;

Status ParallelZstd::write(const char* data, std::size_t size) {
  if (!m_state) return zstd_moved_from_error();
  try {
    return m_state->write(data, size);
  } catch (const std::exception& e) {
    return m_state->fail(zstd_exception_error(e));
  }
}

Result<ZstdSummary> ParallelZstd::finish() {
  if (!m_state) return zstd_moved_from_error();
  try {
    return m_state->finish();
  } catch (const std::exception& e) {
    return m_state->fail(zstd_exception_error(e));
  }
}

Status ParallelZstd::check_options(const ZstdOptions& options) {
  if (options.level < k_min_level || options.level > k_max_level) {
    return make_error(ErrorKind::usage, "zstd.options",
                      "zstd level " + std::to_string(options.level) + " is not between " + std::to_string(k_min_level) +
                          " and " + std::to_string(k_max_level),
                      "", "hint: use 3 (the default) or 19 for the smallest layers");
  }
  return ok_status();
}

Result<std::string> zstd_compress(std::string_view data, const ZstdOptions& options) {
  ZstdOptions o = options;
  if (!o.content_size) o.content_size = data.size();
  std::string out;
  ParallelZstd z(
      [&out](const char* p, std::size_t n) -> Status {
        out.append(p, n);
        return ok_status();
      },
      o);
  if (auto s = z.write(data.data(), data.size()); !s) return s.error();
  if (auto r = z.finish(); !r) return std::move(r).error();
  return out;
}

std::string zstd_implementation(const ZstdOptions& options) {
  return std::string("zstd-") + ZSTD_versionString() + "-l" + std::to_string(options.level) + "-j" +
         std::to_string(k_zstd_job_bytes >> 20) + "M-o" + std::to_string(k_zstd_overlap_log);
}

}  // namespace gpuenv::images
