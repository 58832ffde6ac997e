#pragma once
// A deterministic, parallel gzip (RFC 1952) compressor for OCI image layers, using pigz's technique over zlib.
//
// The input is cut into fixed blocks of `block_bytes` (the cuts depend only on the byte offset, never on how
// the caller splits its write() calls). Each block is compressed on a worker thread as raw deflate by a fresh
// zlib stream primed with the previous block's last 32 KiB as dictionary, so the bytes a block produces are a
// pure function of (level, dictionary, block, whether it is the last block): the output does not depend on
// the thread count, on scheduling, or on the chunking of write() calls. Every block but the last ends on a
// byte boundary without a final-block bit (Z_BLOCK, then empty static blocks or a sync marker, as pigz does);
// the last ends with Z_FINISH; concatenated, they form one deflate stream. CRC-32s are computed per block and
// combined with crc32_combine.
//
// The gzip member written is fixed: ID1 ID2 = 1f 8b, CM = 8, FLG = 0 (no name, comment or extra field),
// MTIME = 0, XFL as zlib writes it (2 for level 9, 4 for levels 0 and 1, else 0), OS = 255 ("unknown", as Go's
// compress/gzip writes for the layers Docker and containerd produce, and so no trace of the building host).
// With the same options the bytes equal those of `pigz -n -<level> -b <block KiB>` apart from the OS byte (and,
// at level 0, XFL: pigz writes 0 where zlib writes 4).
//
// Determinism holds for one deflate implementation: every machine linking the same zlib release produces the
// same bytes, but zlib-ng, Intel's or Cloudflare's zlib, the s390x hardware deflate and possibly other zlib
// releases produce other (equally valid) bytes. deflate_implementation() names the one in use so that a cache
// of layer digests can be keyed on it.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/error.hpp"

namespace gpuenv::images {

/// Receives compressed bytes, in stream order, on the thread that calls write() or finish(); returning an
/// error stops the compressor, which then returns that error.
using GzipSink = std::function<Status(const char* data, std::size_t size)>;

/// Compression settings. Level and block size change the output bytes; the thread count never does.
struct GzipOptions {
  /// zlib level 0..9. Pinned at 6 rather than Z_DEFAULT_COMPRESSION so that a zlib whose default moved would
  /// not change layer digests; 6 is also gzip's, pigz's and Go's default.
  int level = 6;
  /// Uncompressed bytes per block, 32 KiB..64 MiB. 128 KiB, pigz's default: on a 500 MiB tar of /usr it runs
  /// as fast as 1 MiB blocks, its output is 0.01% smaller, it keeps 8 times less memory in flight and splits
  /// small layers across more threads (bench/gzip.sh).
  std::size_t block_bytes = std::size_t{128} << 10;
  /// Worker threads; 0 means std::thread::hardware_concurrency(). At most 2 x threads blocks are in flight.
  unsigned threads = 0;
};

/// What finish() wrote.
struct GzipSummary {
  std::uint64_t uncompressed_bytes = 0;
  std::uint64_t compressed_bytes = 0;  ///< header, deflate data and trailer: every byte given to the sink
  std::uint32_t crc32 = 0;             ///< CRC-32 of the uncompressed bytes, as in the trailer
};

/// Streaming, deterministic, parallel gzip compressor. Memory is bounded: write() blocks while 2 x threads
/// blocks are compressed or waiting to be written. Not thread-safe: one caller thread at a time.
class ParallelGzip {
 public:
  /// Prepares a compressor writing to `sink`; threads start on the first full block. Invalid options are
  /// reported by the first write() or finish() (see check_options()).
  ParallelGzip(GzipSink sink, GzipOptions options = {});
  /// Stops and joins the worker threads; without finish() the stream is left incomplete, never a failure.
  ~ParallelGzip();
  ParallelGzip(ParallelGzip&&) noexcept;
  ParallelGzip& operator=(ParallelGzip&&) noexcept;
  ParallelGzip(const ParallelGzip&) = delete;
  ParallelGzip& operator=(const ParallelGzip&) = delete;

  /// Adds `size` bytes of input, handing finished blocks to the sink; blocks while the workers are behind.
  /// Fails with `gzip.options` for invalid options, with the sink's own error, `gzip.deflate` when zlib fails,
  /// `gzip.out_of_memory`, `gzip.threads` when no worker thread can be started, and `gzip.finished` after
  /// finish(). A failure stops the workers; every later call returns the same error.
  Status write(const char* data, std::size_t size);
  /// Compresses what remains, writes the trailer and joins the workers. Fails as write() does.
  Result<GzipSummary> finish();

  /// Checks level (0..9) and block_bytes (32 KiB..64 MiB); fails with `gzip.options` naming the bad value.
  static Status check_options(const GzipOptions& options);

 private:
  struct State;
  std::unique_ptr<State> m_state;
};

/// Compresses `data` in memory with ParallelGzip; fails as ParallelGzip::write() does.
Result<std::string> gzip_compress(std::string_view data, const GzipOptions& options = {});

/// The deflate implementation linked in ("zlib 1.2.13"); output bytes are stable for a given one.
std::string deflate_implementation();

}  // namespace gpuenv::images
