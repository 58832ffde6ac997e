#pragma once
// A deterministic, multi-threaded zstd (RFC 8878) compressor for OCI image layers
// (media_type::k_layer_zstd, "application/vnd.oci.image.layer.v1.tar+zstd", in images/oci/layout.hpp).
//
// One zstd frame, written by libzstd's multi-threaded streaming compressor (ZSTD_compressStream2 with
// ZSTD_c_nbWorkers >= 1). The input is cut into jobs of k_zstd_job_bytes; each job is compressed on a worker
// with the last part of the previous job (the overlap, window / 2^(9 - k_zstd_overlap_log)) as its history, so
// the bytes depend on the input, the level, the content size and the libzstd release, never on the thread count,
// on scheduling or on how the caller splits its write() calls. Single-threaded zstd (nbWorkers = 0, as
// `zstd --single-thread`) writes other bytes, so nbWorkers is at least 1 even for one thread, and a libzstd built
// without multi-threading is an error rather than a silent fallback.
//
// The frame is fixed: no dictionary and no dictionary ID, a content checksum (the low 32 bits of XXH64) at the
// end, and the content size in the header when the caller states it (ZstdOptions::content_size, as a layer
// builder knows it from the uncompressed tar). Level, job size and overlap are pinned rather than left to
// libzstd's defaults, so a libzstd whose defaults moved would not change layer digests. At level 3 with the
// content size given, the bytes equal those of `zstd -3 -T<n>` on the same file (libzstd 1.5.4's defaults for
// that level are the pinned values).
//
// As with gzip, determinism holds for one libzstd release: zstd_implementation() names it, with the settings, so
// that a cache of layer digests can be keyed on it.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.hpp"

namespace gpuenv::images {

/// zstd level used unless one is asked for: zstd's own default, pinned here rather than taken from libzstd.
inline constexpr int k_zstd_default_level = 3;
/// Uncompressed bytes per multi-threaded job (ZSTD_c_jobSize): libzstd 1.5.4's default at level 3.
inline constexpr int k_zstd_job_bytes = 8 << 20;
/// History reloaded from the previous job, as a fraction of the window (ZSTD_c_overlapLog; 6 = window / 8):
/// libzstd 1.5.4's default for levels 1 to 4.
inline constexpr int k_zstd_overlap_log = 6;

/// Receives compressed bytes, in stream order, on the thread that calls write() or finish(); returning an
/// error stops the compressor, which then returns that error.
using ZstdSink = std::function<Status(const char* data, std::size_t size)>;

/// Compression settings. Level and content size change the output bytes; the thread count never does.
struct ZstdOptions {
  /// zstd level 1..19 (the "ultra" levels 20..22 need up to 128 MiB windows per worker and are refused).
  int level = k_zstd_default_level;
  /// Worker threads, at most 256; 0 means std::thread::hardware_concurrency(). Memory grows with it: libzstd
  /// holds about one job of input and its output per busy thread (measured on 200 MiB at level 3: 27 MiB for
  /// 2 threads, 140 MiB for 16).
  unsigned threads = 0;
  /// Total bytes that write() will be given, written into the frame header; a different total fails. Unknown
  /// when empty. Inputs of at most 512 KiB with a stated size are compressed in one job on the caller's thread
  /// (libzstd's rule; still the same bytes for every thread count).
  std::optional<std::uint64_t> content_size;
};

/// What finish() wrote.
struct ZstdSummary {
  std::uint64_t uncompressed_bytes = 0;
  std::uint64_t compressed_bytes = 0;  ///< the whole frame: every byte given to the sink
  std::uint32_t content_checksum = 0;  ///< low 32 bits of XXH64 of the uncompressed bytes, as in the frame
};

/// Streaming, deterministic, multi-threaded zstd compressor. Memory is bounded by libzstd (see threads); write()
/// blocks while the workers are behind. Not thread-safe: one caller thread at a time.
class ParallelZstd {
 public:
  /// Prepares a compressor writing to `sink`; libzstd starts its workers on the first write(). Invalid options
  /// are reported by the first write() or finish() (see check_options()).
  ParallelZstd(ZstdSink sink, ZstdOptions options = {});
  /// Stops and joins the workers; without finish() the frame is left incomplete, never a failure.
  ~ParallelZstd();
  ParallelZstd(ParallelZstd&&) noexcept;
  ParallelZstd& operator=(ParallelZstd&&) noexcept;
  ParallelZstd(const ParallelZstd&) = delete;
  ParallelZstd& operator=(const ParallelZstd&) = delete;

  /// Adds `size` bytes of input, handing compressed bytes to the sink as libzstd produces them. Fails with
  /// `zstd.options` for invalid options, `zstd.no_threads` when libzstd was built without multi-threading,
  /// `zstd.size_mismatch` past the stated content size, the sink's own error, `zstd.compress` when libzstd
  /// fails, `zstd.out_of_memory`, and `zstd.finished` after finish(). A failure stops the workers; every later
  /// call returns the same error.
  Status write(const char* data, std::size_t size);
  /// Compresses what remains and ends the frame. Fails as write() does, and with `zstd.size_mismatch` when
  /// fewer bytes than the stated content size were written.
  Result<ZstdSummary> finish();

  /// Checks the level (1..19); fails with `zstd.options` naming the bad value. Threads past 256 are capped.
  static Status check_options(const ZstdOptions& options);

 private:
  struct State;
  std::unique_ptr<State> m_state;
};

/// Compresses `data` in memory with ParallelZstd, stating its size as the content size unless `options` states
/// one; fails as ParallelZstd::write() does.
Result<std::string> zstd_compress(std::string_view data, const ZstdOptions& options = {});

/// The linked libzstd and the settings that decide the bytes ("zstd-1.5.4-l3-j8M-o6"), for layer cache keys.
std::string zstd_implementation(const ZstdOptions& options = {});

}  // namespace gpuenv::images
