#include "images/oci/parallel_gzip.hpp"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <vector>

using gpuenv::ErrorKind;
using gpuenv::make_error;
using gpuenv::ok_status;
using gpuenv::Status;
using gpuenv::images::GzipOptions;
using gpuenv::images::GzipSummary;
using gpuenv::images::ParallelGzip;

namespace fs = std::filesystem;

namespace {

constexpr std::size_t k_block = 32768;  // the smallest block, so that small inputs span many blocks

/// Inflates a gzip stream with zlib (windowBits 16 + 15); nullopt unless it is exactly one valid member.
std::optional<std::string> gunzip(const std::string& gz) {
  z_stream zs{};
  if (inflateInit2(&zs, 16 + 15) != Z_OK) return std::nullopt;
  std::string out;
  std::vector<unsigned char> buf(1 << 16);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
  zs.avail_in = static_cast<uInt>(gz.size());
  int rc = Z_OK;
  while (rc == Z_OK) {
    zs.next_out = buf.data();
    zs.avail_out = static_cast<uInt>(buf.size());
    rc = inflate(&zs, Z_NO_FLUSH);
    out.append(reinterpret_cast<const char*>(buf.data()), buf.size() - zs.avail_out);
  }
  const bool whole = rc == Z_STREAM_END && zs.avail_in == 0;
  inflateEnd(&zs);
  if (!whole) return std::nullopt;
  return out;
}

/// Compresses `data`, giving it to write() in pieces of `chunk` bytes (0: all at once).
std::string gzip(const std::string& data, GzipOptions options, std::size_t chunk = 0,
                 GzipSummary* summary = nullptr) {
  std::string out;
  ParallelGzip gz(
      [&out](const char* p, std::size_t n) -> Status {
        out.append(p, n);
        return ok_status();
      },
      options);
  const std::size_t step = chunk == 0 ? std::max<std::size_t>(data.size(), 1) : chunk;
  for (std::size_t at = 0; at < data.size(); at += step) {
    auto s = gz.write(data.data() + at, std::min(step, data.size() - at));
    EXPECT_TRUE(s.ok()) << s.error().to_string();
  }
  auto r = gz.finish();
  EXPECT_TRUE(r.ok()) << r.error().to_string();
  if (r.ok() && summary != nullptr) *summary = *r;
  return out;
}

GzipOptions opts(unsigned threads, std::size_t block = k_block, int level = 6) {
  GzipOptions o;
  o.threads = threads;
  o.block_bytes = block;
  o.level = level;
  return o;
}

std::string random_bytes(std::size_t n, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

/// Text-like, binary-like, random and zero runs: compressibility changes every few kilobytes.
std::string mixed_bytes(std::size_t n, unsigned seed) {
  static const char* const words[] = {"lib", "cuda", "torch", "usr", "share", "so.12", "\n", " ", "=", "0x"};
  std::mt19937 rng(seed);
  std::string s;
  s.reserve(n);
  while (s.size() < n) {
    const std::size_t run = 1 + rng() % 20000;
    switch (rng() % 4) {
      case 0:
        for (std::size_t i = 0; i < run / 4 && s.size() < n; ++i) s += words[rng() % std::size(words)];
        break;
      case 1:
        for (std::size_t i = 0; i < run && s.size() < n; ++i) s += static_cast<char>(rng());
        break;
      case 2: s.append(std::min(run, n - s.size()), '\0'); break;
      default:
        for (std::size_t i = 0; i < run && s.size() < n; ++i) s += static_cast<char>("ELF\x7f\x02\x01"[i % 6] + rng() % 2);
        break;
    }
  }
  s.resize(n);
  return s;
}

void expect_round_trip(const std::string& data, const GzipOptions& o) {
  GzipSummary summary;
  const std::string gz = gzip(data, o, 0, &summary);
  auto back = gunzip(gz);
  ASSERT_TRUE(back.has_value()) << "zlib rejects the stream of " << data.size() << " bytes";
  EXPECT_TRUE(*back == data) << "round trip of " << data.size() << " bytes differs";
  EXPECT_EQ(summary.uncompressed_bytes, data.size());
  EXPECT_EQ(summary.compressed_bytes, gz.size());
  EXPECT_EQ(summary.crc32, crc32(0, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size())));
}

std::uint32_t le32(const std::string& s, std::size_t at) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[at + static_cast<std::size_t>(i)]);
  return v;
}

bool have(const char* tool) { return std::system((std::string("command -v ") + tool + " >/dev/null 2>&1").c_str()) == 0; }

/// A temporary directory removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "gpuenv-gzip-XXXXXX").string();
    if (mkdtemp(pattern.data()) != nullptr) path = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
  void put(const std::string& name, const std::string& bytes) const {
    std::ofstream(path / name, std::ios::binary) << bytes;
  }
  [[nodiscard]] std::string get(const std::string& name) const {
    std::ifstream in(path / name, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
};

TEST(ParallelGzip, RoundTripsEmptyInput) {
  expect_round_trip("", opts(2));
  // Header, one empty final static block (03 00), CRC 0 and ISIZE 0.
  const std::string gz = gzip("", opts(2));
  EXPECT_EQ(gz, std::string("\x1f\x8b\x08\0\0\0\0\0\0\xff\x03\0\0\0\0\0\0\0\0\0", 20));
}

TEST(ParallelGzip, RoundTripsOneByte) { expect_round_trip("x", opts(2)); }

TEST(ParallelGzip, RoundTripsExactlyOneBlock) { expect_round_trip(mixed_bytes(k_block, 1), opts(2)); }

TEST(ParallelGzip, RoundTripsOneBlockPlusOneByte) { expect_round_trip(mixed_bytes(k_block + 1, 2), opts(2)); }

TEST(ParallelGzip, RoundTripsExactlyTwoBlocks) { expect_round_trip(mixed_bytes(2 * k_block, 3), opts(2)); }

TEST(ParallelGzip, RoundTripsRandomData) {
  const std::string data = random_bytes(3'000'000, 4);
  expect_round_trip(data, opts(3));
  // Incompressible data grows only by the stored-block framing.
  EXPECT_LT(gzip(data, opts(3)).size(), data.size() + data.size() / 1000 + 64);
}

TEST(ParallelGzip, RoundTripsHighlyCompressibleData) {
  const std::string data(8'000'000, 'a');
  expect_round_trip(data, opts(2));
  EXPECT_LT(gzip(data, opts(2)).size(), data.size() / 500);
}

TEST(ParallelGzip, RoundTripsTwentyMegabytesOfMixedDataWithDefaultOptions) {
  expect_round_trip(mixed_bytes(20'000'000, 5), GzipOptions{});
}

TEST(ParallelGzip, RoundTripsEveryLevel) {
  const std::string data = mixed_bytes(5 * k_block + 123, 6);
  for (int level = 0; level <= 9; ++level) {
    SCOPED_TRACE("level " + std::to_string(level));
    expect_round_trip(data, opts(2, k_block, level));
  }
}

TEST(ParallelGzip, SameBytesForEveryThreadCount) {
  const std::string data = mixed_bytes(3'000'000, 7);
  const std::string one = gzip(data, opts(1));
  for (unsigned threads : {2U, 3U, 8U, 0U}) {
    EXPECT_TRUE(gzip(data, opts(threads)) == one) << threads << " threads";
  }
  const std::string one_default = gzip(data, opts(1, GzipOptions{}.block_bytes));
  EXPECT_TRUE(gzip(data, opts(8, GzipOptions{}.block_bytes)) == one_default);
}

TEST(ParallelGzip, SameBytesForEveryWriteChunking) {
  const std::string data = mixed_bytes(5 * k_block + 77, 8);
  const std::string whole = gzip(data, opts(3));
  EXPECT_TRUE(gzip(data, opts(3), 1) == whole) << "1-byte writes";
  EXPECT_TRUE(gzip(data, opts(3), 4093) == whole) << "4093-byte writes";
  EXPECT_TRUE(gzip(data, opts(3), k_block) == whole) << "block-sized writes";
  EXPECT_TRUE(gzip(data, opts(3), k_block + 1) == whole) << "block+1-byte writes";
}

TEST(ParallelGzip, HeaderIsFixedAndCarriesNoHostData) {
  const std::string gz = gzip("hello", opts(1));
  ASSERT_GE(gz.size(), 18U);
  EXPECT_EQ(static_cast<unsigned char>(gz[0]), 0x1f);  // ID1
  EXPECT_EQ(static_cast<unsigned char>(gz[1]), 0x8b);  // ID2
  EXPECT_EQ(gz[2], 8);                                 // CM = deflate
  EXPECT_EQ(gz[3], 0);                                 // FLG: no name, comment, extra or header CRC
  EXPECT_EQ(le32(gz, 4), 0U);                          // MTIME = 0
  EXPECT_EQ(gz[8], 0);                                 // XFL for level 6
  EXPECT_EQ(static_cast<unsigned char>(gz[9]), 255);   // OS = unknown
}

TEST(ParallelGzip, ExtraFlagsFollowZlib) {
  EXPECT_EQ(gzip("x", opts(1, k_block, 9))[8], 2);
  EXPECT_EQ(gzip("x", opts(1, k_block, 1))[8], 4);
  EXPECT_EQ(gzip("x", opts(1, k_block, 0))[8], 4);
  EXPECT_EQ(gzip("x", opts(1, k_block, 5))[8], 0);
}

TEST(ParallelGzip, TrailerCarriesCrcAndSize) {
  const std::string data = mixed_bytes(3 * k_block + 5, 9);
  const std::string gz = gzip(data, opts(2));
  EXPECT_EQ(le32(gz, gz.size() - 8), crc32(0, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size())));
  EXPECT_EQ(le32(gz, gz.size() - 4), data.size());
}

TEST(ParallelGzip, GzipCompressHelperMatchesStreaming) {
  const std::string data = mixed_bytes(200'000, 10);
  auto r = gpuenv::images::gzip_compress(data, opts(2));
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_TRUE(*r == gzip(data, opts(1), 999));
}

TEST(ParallelGzip, GzipBinaryAcceptsAndRestoresOutput) {
  if (!have("gzip")) GTEST_SKIP() << "gzip is not installed";
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  const std::string data = mixed_bytes(1'000'000, 11);
  dir.put("in.gz", gzip(data, opts(2)));
  const std::string gz = (dir.path / "in.gz").string();
  EXPECT_EQ(std::system(("gzip -t " + gz).c_str()), 0);
  ASSERT_EQ(std::system(("gzip -dc " + gz + " > " + (dir.path / "out").string()).c_str()), 0);
  EXPECT_TRUE(dir.get("out") == data);
}

TEST(ParallelGzip, PythonGzipModuleReadsOutput) {
  if (!have("python3")) GTEST_SKIP() << "python3 is not installed";
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  const std::string data = mixed_bytes(300'000, 12);
  dir.put("in.gz", gzip(data, opts(2)));
  const std::string cmd = "python3 -c 'import gzip,sys; sys.stdout.buffer.write(gzip.open(sys.argv[1]).read())' " +
                          (dir.path / "in.gz").string() + " > " + (dir.path / "out").string();
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  EXPECT_TRUE(dir.get("out") == data);
}

TEST(ParallelGzip, MatchesPigzApartFromOsByte) {
  if (!have("pigz")) GTEST_SKIP() << "pigz is not installed";
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  const std::string data = mixed_bytes(2'000'000, 13);
  dir.put("in", data);
  for (int level : {1, 6, 9}) {
    const std::string cmd = "pigz -n -" + std::to_string(level) + " -b 32 -p 2 -c < " + (dir.path / "in").string() +
                            " > " + (dir.path / "pigz.gz").string();
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    std::string theirs = dir.get("pigz.gz");
    std::string ours = gzip(data, opts(2, k_block, level));
    ASSERT_GT(theirs.size(), 10U);
    EXPECT_EQ(static_cast<unsigned char>(theirs[9]), 3);  // pigz writes OS = Unix
    theirs[9] = ours[9];
    EXPECT_TRUE(ours == theirs) << "level " << level << ": " << ours.size() << " bytes vs pigz " << theirs.size();
  }
}

TEST(ParallelGzip, FailingSinkStopsWithItsError) {
  int calls = 0;
  ParallelGzip gz(
      [&calls](const char*, std::size_t) -> Status {
        if (++calls == 3) {
          return make_error(ErrorKind::environment, "test.disk_full", "no space left", "/tmp/layer", "hint: free space");
        }
        return ok_status();
      },
      opts(2));
  const std::string data = mixed_bytes(40 * k_block, 14);
  Status s = ok_status();
  for (std::size_t at = 0; at < data.size() && s.ok(); at += 10000) {
    s = gz.write(data.data() + at, std::min<std::size_t>(10000, data.size() - at));
  }
  ASSERT_FALSE(s.ok()) << "40 blocks with 4 in flight must reach the sink during write()";
  EXPECT_EQ(s.error().id, "test.disk_full");
  EXPECT_EQ(calls, 3);
  auto again = gz.write("x", 1);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().id, "test.disk_full");
  auto finished = gz.finish();
  ASSERT_FALSE(finished.ok());
  EXPECT_EQ(finished.error().id, "test.disk_full");
  EXPECT_EQ(calls, 3);
}

TEST(ParallelGzip, FailingSinkAtTheTrailerFailsFinish) {
  ParallelGzip gz([](const char*, std::size_t n) -> Status {
    if (n == 8) return make_error(ErrorKind::environment, "test.trailer", "trailer refused");
    return ok_status();
  });
  ASSERT_TRUE(gz.write("abc", 3).ok());
  auto r = gz.finish();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "test.trailer");
}

TEST(ParallelGzip, WritesReachTheSinkBeforeFinish) {
  // Bounded memory: with 2 threads at most 4 blocks are in flight, so after 100 blocks the sink has seen the
  // header and at least 100 - 1 (held back until it is known not to be the last) - 4 blocks.
  int calls = 0;
  ParallelGzip gz(
      [&calls](const char*, std::size_t) -> Status {
        ++calls;
        return ok_status();
      },
      opts(2));
  const std::string data = mixed_bytes(100 * k_block, 15);
  ASSERT_TRUE(gz.write(data.data(), data.size()).ok());
  EXPECT_GE(calls, 1 + 100 - 1 - 4);
  ASSERT_TRUE(gz.finish().ok());
  EXPECT_EQ(calls, 1 + 100 + 1);
}

TEST(ParallelGzip, DestructorWithoutFinishJoinsThreads) {
  const std::string data = mixed_bytes(30 * k_block, 16);
  for (unsigned threads : {1U, 2U, 8U}) {
    ParallelGzip gz([](const char*, std::size_t) -> Status { return ok_status(); }, opts(threads));
    ASSERT_TRUE(gz.write(data.data(), data.size()).ok());
  }
  ParallelGzip never_written([](const char*, std::size_t) -> Status { return ok_status(); });
}

TEST(ParallelGzip, MovedCompressorKeepsWorking) {
  std::string out;
  ParallelGzip a(
      [&out](const char* p, std::size_t n) -> Status {
        out.append(p, n);
        return ok_status();
      },
      opts(2));
  const std::string data = mixed_bytes(10 * k_block, 17);
  ASSERT_TRUE(a.write(data.data(), data.size() / 2).ok());
  ParallelGzip b = std::move(a);
  ASSERT_TRUE(b.write(data.data() + data.size() / 2, data.size() - data.size() / 2).ok());
  ASSERT_TRUE(b.finish().ok());
  EXPECT_TRUE(gunzip(out) == data);
}

TEST(ParallelGzip, WriteAfterFinishFails) {
  ParallelGzip gz([](const char*, std::size_t) -> Status { return ok_status(); });
  ASSERT_TRUE(gz.finish().ok());
  auto s = gz.write("x", 1);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().id, "gzip.finished");
  EXPECT_FALSE(gz.finish().ok());
}

TEST(ParallelGzip, RejectsInvalidOptions) {
  for (const GzipOptions& bad : {opts(1, k_block, 10), opts(1, k_block, -1), opts(1, 1000), opts(1, std::size_t{1} << 30)}) {
    EXPECT_FALSE(ParallelGzip::check_options(bad).ok());
    ParallelGzip gz([](const char*, std::size_t) -> Status { return ok_status(); }, bad);
    auto s = gz.write("x", 1);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().id, "gzip.options");
    auto r = gz.finish();
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().id, "gzip.options");
  }
  EXPECT_TRUE(ParallelGzip::check_options(GzipOptions{}).ok());
}

TEST(ParallelGzip, NamesTheDeflateImplementation) {
  EXPECT_EQ(gpuenv::images::deflate_implementation(), std::string("zlib ") + zlibVersion());
}

TEST(ParallelGzip, SizeFieldWrapsPastFourGibibytes) {
  // 4 GiB + 3 bytes of zeros at level 0 (stored blocks, the fastest: a few seconds): ISIZE is the length
  // modulo 2^32, the counters are 64-bit, and zlib's streaming inflate checks CRC and ISIZE.
  const std::uint64_t total = (std::uint64_t{1} << 32) + 3;
  const std::vector<char> zeros(std::size_t{1} << 20, '\0');
  z_stream zs{};
  ASSERT_EQ(inflateInit2(&zs, 16 + 15), Z_OK);
  std::vector<unsigned char> sink_buf(std::size_t{1} << 20);
  std::uint64_t inflated = 0;
  int last_rc = Z_OK;
  std::string tail;  // the last bytes of the stream, for the trailer
  ParallelGzip gz(
      [&](const char* p, std::size_t n) -> Status {
        tail.append(p, n);
        if (tail.size() > 64) tail.erase(0, tail.size() - 64);
        zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(p));
        zs.avail_in = static_cast<uInt>(n);
        while (zs.avail_in > 0 && last_rc == Z_OK) {
          zs.next_out = sink_buf.data();
          zs.avail_out = static_cast<uInt>(sink_buf.size());
          last_rc = inflate(&zs, Z_NO_FLUSH);
          inflated += sink_buf.size() - zs.avail_out;  // content: inflate checks it against the CRC
        }
        if (last_rc != Z_OK && last_rc != Z_STREAM_END) return make_error(ErrorKind::internal, "test.inflate", "inflate failed");
        return ok_status();
      },
      opts(0, std::size_t{1} << 20, 0));
  for (std::uint64_t left = total; left > 0;) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(left, zeros.size()));
    ASSERT_TRUE(gz.write(zeros.data(), n).ok());
    left -= n;
  }
  auto r = gz.finish();
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  inflateEnd(&zs);
  EXPECT_EQ(last_rc, Z_STREAM_END);
  EXPECT_EQ(inflated, total);
  EXPECT_EQ(r->uncompressed_bytes, total);
  uLong expected_crc = 0;
  const uLong mib_crc = crc32(0, reinterpret_cast<const Bytef*>(zeros.data()), static_cast<uInt>(zeros.size()));
  for (int i = 0; i < 4096; ++i) expected_crc = crc32_combine(expected_crc, mib_crc, static_cast<z_off_t>(zeros.size()));
  expected_crc = crc32(expected_crc, reinterpret_cast<const Bytef*>(zeros.data()), 3);
  EXPECT_EQ(r->crc32, expected_crc);
  EXPECT_EQ(le32(tail, tail.size() - 8), expected_crc);
  EXPECT_EQ(le32(tail, tail.size() - 4), 3U);
}

}  // namespace
