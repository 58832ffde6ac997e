#include "images/oci/parallel_zstd.hpp"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "images/oci/layout.hpp"

using gpuenv::ErrorKind;
using gpuenv::make_error;
using gpuenv::ok_status;
using gpuenv::Status;
using gpuenv::images::k_zstd_job_bytes;
using gpuenv::images::ParallelZstd;
using gpuenv::images::ZstdOptions;
using gpuenv::images::ZstdSummary;

namespace fs = std::filesystem;

namespace {

constexpr std::size_t k_job = k_zstd_job_bytes;

/// Decompresses with the streaming API; nullopt unless `z` is exactly one valid frame (checksum included).
std::optional<std::string> unzstd_stream(const std::string& z) {
  ZSTD_DCtx* d = ZSTD_createDCtx();
  if (d == nullptr) return std::nullopt;
  std::string out;
  std::vector<char> buf(ZSTD_DStreamOutSize());
  ZSTD_inBuffer in{z.data(), z.size(), 0};
  std::size_t rc = 1;
  while (rc != 0) {
    ZSTD_outBuffer ob{buf.data(), buf.size(), 0};
    rc = ZSTD_decompressStream(d, &ob, &in);
    if (ZSTD_isError(rc)) break;
    out.append(buf.data(), ob.pos);
    if (rc != 0 && in.pos == in.size && ob.pos < ob.size) break;  // truncated
  }
  ZSTD_freeDCtx(d);
  if (rc != 0 || in.pos != in.size) return std::nullopt;
  return out;
}

/// Decompresses with the one-shot API, which needs the content size in the frame header.
std::optional<std::string> unzstd_one_shot(const std::string& z) {
  const unsigned long long size = ZSTD_getFrameContentSize(z.data(), z.size());
  if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN) return std::nullopt;
  std::string out(size, '\0');
  const std::size_t rc = ZSTD_decompress(out.data(), out.size(), z.data(), z.size());
  if (ZSTD_isError(rc) || rc != size) return std::nullopt;
  return out;
}

/// Compresses `data`, giving it to write() in pieces of `chunk` bytes (0: all at once).
std::string zstd(const std::string& data, const ZstdOptions& options, std::size_t chunk = 0,
                 ZstdSummary* summary = nullptr) {
  std::string out;
  ParallelZstd z(
      [&out](const char* p, std::size_t n) -> Status {
        out.append(p, n);
        return ok_status();
      },
      options);
  const std::size_t step = chunk == 0 ? std::max<std::size_t>(data.size(), 1) : chunk;
  for (std::size_t at = 0; at < data.size(); at += step) {
    auto s = z.write(data.data() + at, std::min(step, data.size() - at));
    EXPECT_TRUE(s.ok()) << s.error().to_string();
  }
  auto r = z.finish();
  EXPECT_TRUE(r.ok()) << r.error().to_string();
  if (r.ok() && summary != nullptr) *summary = *r;
  return out;
}

ZstdOptions zstd_opts(unsigned threads, std::optional<std::uint64_t> content_size = std::nullopt, int level = 3) {
  ZstdOptions o;
  o.threads = threads;
  o.content_size = content_size;
  o.level = level;
  return o;
}

std::string zstd_random_bytes(std::size_t n, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

/// Text-like, binary-like, random and zero runs: compressibility changes every few kilobytes.
std::string zstd_mixed_bytes(std::size_t n, unsigned seed) {
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

std::uint32_t zstd_le32(const std::string& s, std::size_t at) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[at + static_cast<std::size_t>(i)]);
  return v;
}

void expect_round_trip(const std::string& data, const ZstdOptions& o) {
  ZstdSummary summary;
  const std::string z = zstd(data, o, 0, &summary);
  auto back = unzstd_stream(z);
  ASSERT_TRUE(back.has_value()) << "libzstd rejects the frame of " << data.size() << " bytes";
  EXPECT_TRUE(*back == data) << "round trip of " << data.size() << " bytes differs";
  if (o.content_size) {
    auto one_shot = unzstd_one_shot(z);
    ASSERT_TRUE(one_shot.has_value());
    EXPECT_TRUE(*one_shot == data);
  }
  EXPECT_EQ(summary.uncompressed_bytes, data.size());
  EXPECT_EQ(summary.compressed_bytes, z.size());
  ASSERT_GE(z.size(), 4U);
  EXPECT_EQ(summary.content_checksum, zstd_le32(z, z.size() - 4));
}

bool have_tool(const char* tool) { return std::system((std::string("command -v ") + tool + " >/dev/null 2>&1").c_str()) == 0; }

/// A temporary directory removed at the end of the test.
struct ZstdTempDir {
  fs::path path;
  ZstdTempDir() {
    std::string pattern = (fs::temp_directory_path() / "gpuenv-zstd-XXXXXX").string();
    if (mkdtemp(pattern.data()) != nullptr) path = pattern;
  }
  ~ZstdTempDir() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
  ZstdTempDir(const ZstdTempDir&) = delete;
  ZstdTempDir& operator=(const ZstdTempDir&) = delete;
  void put(const std::string& name, const std::string& bytes) const {
    std::ofstream(path / name, std::ios::binary) << bytes;
  }
  [[nodiscard]] std::string get(const std::string& name) const {
    std::ifstream in(path / name, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
};

TEST(ParallelZstd, RoundTripsEmptyInput) {
  expect_round_trip("", zstd_opts(2));
  expect_round_trip("", zstd_opts(2, 0));
  // With or without a stated size, an empty frame says it is empty.
  EXPECT_EQ(ZSTD_getFrameContentSize(zstd("", zstd_opts(2)).data(), zstd("", zstd_opts(2)).size()), 0U);
  EXPECT_TRUE(zstd("", zstd_opts(1)) == zstd("", zstd_opts(8, 0)));
}

TEST(ParallelZstd, RoundTripsOneByte) {
  expect_round_trip("x", zstd_opts(2));
  expect_round_trip("x", zstd_opts(2, 1));
}

TEST(ParallelZstd, RoundTripsRandomData) {
  const std::string data = zstd_random_bytes(3'000'000, 4);
  expect_round_trip(data, zstd_opts(3, data.size()));
  // Incompressible data is stored in raw blocks: 3 bytes of header per 128 KiB block.
  EXPECT_LT(zstd(data, zstd_opts(3)).size(), data.size() + data.size() / 1000 + 64);
}

TEST(ParallelZstd, RoundTripsHighlyCompressibleData) {
  const std::string data(20'000'000, 'a');
  expect_round_trip(data, zstd_opts(2, data.size()));
  EXPECT_LT(zstd(data, zstd_opts(2)).size(), data.size() / 1000);
}

TEST(ParallelZstd, RoundTripsMixedDataOverSeveralJobs) {
  const std::string data = zstd_mixed_bytes(3 * k_job + 12345, 5);
  expect_round_trip(data, zstd_opts(4, data.size()));
  expect_round_trip(data, zstd_opts(4));
  expect_round_trip(data, ZstdOptions{});
}

TEST(ParallelZstd, RoundTripsAtSeveralLevels) {
  const std::string data = zstd_mixed_bytes(2'000'000, 6);
  for (int level : {1, 3, 9, 19}) {
    SCOPED_TRACE("level " + std::to_string(level));
    expect_round_trip(data, zstd_opts(2, data.size(), level));
  }
}

TEST(ParallelZstd, SameBytesForEveryThreadCount) {
  // A few MiB (one job, and below 512 KiB the one-job path of libzstd) and several jobs, with and without a
  // stated content size.
  for (std::size_t n : {std::size_t{300'000}, std::size_t{3'000'000}, 2 * k_job + 99}) {
    const std::string data = zstd_mixed_bytes(n, 7);
    for (bool sized : {false, true}) {
      SCOPED_TRACE(std::to_string(n) + (sized ? " bytes, size stated" : " bytes, size unknown"));
      const std::optional<std::uint64_t> size = sized ? std::optional<std::uint64_t>(n) : std::nullopt;
      const std::string one = zstd(data, zstd_opts(1, size));
      for (unsigned threads : {2U, 4U, 8U, 0U}) {
        EXPECT_TRUE(zstd(data, zstd_opts(threads, size)) == one) << threads << " threads";
      }
    }
  }
}

TEST(ParallelZstd, SameBytesForEveryWriteChunking) {
  const std::string small = zstd_mixed_bytes(700'000, 8);
  EXPECT_TRUE(zstd(small, zstd_opts(3), 1) == zstd(small, zstd_opts(3))) << "1-byte writes";
  const std::string data = zstd_mixed_bytes(2 * k_job + 77, 8);
  const std::string whole = zstd(data, zstd_opts(3));
  EXPECT_TRUE(zstd(data, zstd_opts(3), 4093) == whole) << "4093-byte writes";
  EXPECT_TRUE(zstd(data, zstd_opts(3), k_job) == whole) << "job-sized writes";
  EXPECT_TRUE(zstd(data, zstd_opts(3), k_job + 1) == whole) << "job+1-byte writes";
  const std::string sized = zstd(data, zstd_opts(3, data.size()));
  EXPECT_TRUE(zstd(data, zstd_opts(3, data.size()), 4093) == sized) << "4093-byte writes, size stated";
}

TEST(ParallelZstd, EmptyWritesDoNotChangeTheFrame) {
  std::string out;
  ParallelZstd z(
      [&out](const char* p, std::size_t n) -> Status {
        out.append(p, n);
        return ok_status();
      },
      zstd_opts(2));
  ASSERT_TRUE(z.write("", 0).ok());
  ASSERT_TRUE(z.write("abc", 3).ok());
  ASSERT_TRUE(z.write(nullptr, 0).ok());
  ASSERT_TRUE(z.finish().ok());
  EXPECT_TRUE(out == zstd("abc", zstd_opts(2)));
}

TEST(ParallelZstd, FrameHeaderHasContentSizeAndChecksumAndNoDictionary) {
  const std::string data = zstd_mixed_bytes(1'000'000, 9);
  const std::string z = zstd(data, zstd_opts(2, data.size()));
  // RFC 8878 3.1.1: magic number, then the Frame_Header_Descriptor.
  ASSERT_GT(z.size(), 6U);
  EXPECT_EQ(zstd_le32(z, 0), 0xFD2FB528U);
  const auto descriptor = static_cast<unsigned char>(z[4]);
  EXPECT_NE(descriptor & 0x04, 0) << "Content_Checksum_Flag";
  EXPECT_EQ(descriptor & 0x03, 0) << "Dictionary_ID_Flag: no dictionary ID field";
  EXPECT_NE(descriptor & 0xC0, 0) << "Frame_Content_Size_Flag: the size is written";
  EXPECT_EQ(ZSTD_getFrameContentSize(z.data(), z.size()), data.size());
  EXPECT_EQ(ZSTD_findFrameCompressedSize(z.data(), z.size()), z.size()) << "exactly one frame";
}

TEST(ParallelZstd, ContentSizeIsUnknownUnlessStated) {
  const std::string z = zstd(zstd_mixed_bytes(100'000, 10), zstd_opts(2));
  EXPECT_EQ(ZSTD_getFrameContentSize(z.data(), z.size()), ZSTD_CONTENTSIZE_UNKNOWN);
}

TEST(ParallelZstd, ChecksumCatchesCorruptedContent) {
  const std::string data(1'000'000, 'q');
  std::string z = zstd(data, zstd_opts(2, data.size()));
  z[z.size() - 1] = static_cast<char>(z[z.size() - 1] ^ 1);  // the checksum itself
  EXPECT_FALSE(unzstd_stream(z).has_value());
}

TEST(ParallelZstd, TruncatedFrameIsRejected) {
  const std::string data = zstd_mixed_bytes(500'000, 11);
  const std::string z = zstd(data, zstd_opts(2));
  EXPECT_FALSE(unzstd_stream(z.substr(0, z.size() - 5)).has_value());
}

TEST(ParallelZstd, ZstdCompressHelperStatesTheSizeAndMatchesStreaming) {
  const std::string data = zstd_mixed_bytes(2'000'000, 12);
  auto r = gpuenv::images::zstd_compress(data, zstd_opts(2));
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_TRUE(*r == zstd(data, zstd_opts(1, data.size()), 999));
  EXPECT_EQ(ZSTD_getFrameContentSize(r->data(), r->size()), data.size());
}

TEST(ParallelZstd, ZstdBinaryAcceptsAndRestoresOutput) {
  if (!have_tool("zstd")) GTEST_SKIP() << "the zstd command is not installed";
  ZstdTempDir dir;
  ASSERT_FALSE(dir.path.empty());
  const std::string data = zstd_mixed_bytes(k_job + 1'000'000, 13);
  for (bool sized : {false, true}) {
    dir.put("in.zst", zstd(data, zstd_opts(2, sized ? std::optional<std::uint64_t>(data.size()) : std::nullopt)));
    const std::string z = (dir.path / "in.zst").string();
    EXPECT_EQ(std::system(("zstd -q -t " + z).c_str()), 0);
    ASSERT_EQ(std::system(("zstd -q -d -c " + z + " > " + (dir.path / "out").string()).c_str()), 0);
    EXPECT_TRUE(dir.get("out") == data);
  }
}

TEST(ParallelZstd, MatchesZstdBinaryAtLevelThree) {
  // The zstd command states the size of a file it compresses, and leaves job size and overlap to libzstd,
  // whose level-3 defaults are the values pinned here: the same libzstd gives the same bytes.
  if (!have_tool("zstd")) GTEST_SKIP() << "the zstd command is not installed";
  ZstdTempDir dir;
  ASSERT_FALSE(dir.path.empty());
  const std::string data = zstd_mixed_bytes(2 * k_job + 3'000'000, 14);
  dir.put("in", data);
  const std::string cmd = "zstd -q -3 -T2 -c " + (dir.path / "in").string() + " > " + (dir.path / "cli.zst").string();
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const std::string theirs = dir.get("cli.zst");
  const std::string ours = zstd(data, zstd_opts(3, data.size()));
  EXPECT_TRUE(ours == theirs) << ours.size() << " bytes vs the zstd command's " << theirs.size();
}

TEST(ParallelZstd, FailingSinkStopsWithItsError) {
  int calls = 0;
  ParallelZstd z(
      [&calls](const char*, std::size_t) -> Status {
        if (++calls == 2) {
          return make_error(ErrorKind::environment, "test.disk_full", "no space left", "/tmp/layer", "hint: free space");
        }
        return ok_status();
      },
      zstd_opts(2));
  const std::string data = zstd_random_bytes(5 * k_job, 15);  // incompressible: 1 MiB of output per MiB of input
  Status s = ok_status();
  for (std::size_t at = 0; at < data.size() && s.ok(); at += 100'000) {
    s = z.write(data.data() + at, std::min<std::size_t>(100'000, data.size() - at));
  }
  ASSERT_FALSE(s.ok()) << "40 MiB of incompressible input must reach the sink during write()";
  EXPECT_EQ(s.error().id, "test.disk_full");
  EXPECT_EQ(s.error().kind, ErrorKind::environment);
  EXPECT_EQ(calls, 2);
  auto again = z.write("x", 1);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().id, "test.disk_full");
  auto finished = z.finish();
  ASSERT_FALSE(finished.ok());
  EXPECT_EQ(finished.error().id, "test.disk_full");
  EXPECT_EQ(calls, 2);
}

TEST(ParallelZstd, FailingSinkAtFinishFailsFinish) {
  ParallelZstd z([](const char*, std::size_t) -> Status {
    return make_error(ErrorKind::environment, "test.refused", "refused");
  });
  ASSERT_TRUE(z.write("abc", 3).ok()) << "3 bytes stay buffered until finish()";
  auto r = z.finish();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "test.refused");
}

TEST(ParallelZstd, WritesReachTheSinkBeforeFinish) {
  std::size_t seen = 0;
  ParallelZstd z(
      [&seen](const char*, std::size_t n) -> Status {
        seen += n;
        return ok_status();
      },
      zstd_opts(2));
  const std::string data = zstd_random_bytes(6 * k_job, 16);
  ASSERT_TRUE(z.write(data.data(), data.size()).ok());
  EXPECT_GT(seen, 0U) << "memory is bounded: compressed jobs are handed over while writing";
  auto r = z.finish();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->compressed_bytes, seen);
}

TEST(ParallelZstd, StatedSizeMismatchFails) {
  {
    ParallelZstd z([](const char*, std::size_t) -> Status { return ok_status(); }, zstd_opts(2, 5));
    ASSERT_TRUE(z.write("abc", 3).ok());
    auto s = z.write("def", 3);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().id, "zstd.size_mismatch");
    EXPECT_FALSE(z.finish().ok());
  }
  {
    ParallelZstd z([](const char*, std::size_t) -> Status { return ok_status(); }, zstd_opts(2, 5));
    ASSERT_TRUE(z.write("abc", 3).ok());
    auto r = z.finish();
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().id, "zstd.size_mismatch");
  }
}

TEST(ParallelZstd, DestructorWithoutFinishJoinsThreads) {
  const std::string data = zstd_mixed_bytes(2 * k_job + 5, 17);
  for (unsigned threads : {1U, 2U, 8U}) {
    ParallelZstd z([](const char*, std::size_t) -> Status { return ok_status(); }, zstd_opts(threads));
    ASSERT_TRUE(z.write(data.data(), data.size()).ok());
  }
  ParallelZstd never_written([](const char*, std::size_t) -> Status { return ok_status(); });
}

TEST(ParallelZstd, MovedCompressorKeepsWorking) {
  std::string out;
  ParallelZstd a(
      [&out](const char* p, std::size_t n) -> Status {
        out.append(p, n);
        return ok_status();
      },
      zstd_opts(2));
  const std::string data = zstd_mixed_bytes(3'000'000, 18);
  ASSERT_TRUE(a.write(data.data(), data.size() / 2).ok());
  ParallelZstd b = std::move(a);
  ASSERT_TRUE(b.write(data.data() + data.size() / 2, data.size() - data.size() / 2).ok());
  ASSERT_TRUE(b.finish().ok());
  EXPECT_TRUE(unzstd_stream(out) == data);
  auto s = a.write("x", 1);  // NOLINT(bugprone-use-after-move): the moved-from state is part of the contract
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().id, "zstd.moved_from");
}

TEST(ParallelZstd, WriteAfterFinishFails) {
  ParallelZstd z([](const char*, std::size_t) -> Status { return ok_status(); });
  ASSERT_TRUE(z.finish().ok());
  auto s = z.write("x", 1);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().id, "zstd.finished");
  EXPECT_FALSE(z.finish().ok());
}

TEST(ParallelZstd, RejectsInvalidOptions) {
  for (int level : {0, -1, 20, 22}) {
    const ZstdOptions bad = zstd_opts(1, std::nullopt, level);
    EXPECT_FALSE(ParallelZstd::check_options(bad).ok());
    ParallelZstd z([](const char*, std::size_t) -> Status { return ok_status(); }, bad);
    auto s = z.write("x", 1);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().id, "zstd.options");
    EXPECT_EQ(s.error().kind, ErrorKind::usage);
    auto r = z.finish();
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().id, "zstd.options");
  }
  EXPECT_TRUE(ParallelZstd::check_options(ZstdOptions{}).ok());
}

TEST(ParallelZstd, ThreadCountPastTheLimitIsCapped) {
  const std::string data = zstd_mixed_bytes(100'000, 19);
  EXPECT_TRUE(zstd(data, zstd_opts(100'000)) == zstd(data, zstd_opts(1)));
}

TEST(ParallelZstd, NamesTheImplementationAndSettings) {
  EXPECT_EQ(gpuenv::images::zstd_implementation(), std::string("zstd-") + ZSTD_versionString() + "-l3-j8M-o6");
  EXPECT_EQ(gpuenv::images::zstd_implementation(zstd_opts(4, std::nullopt, 19)),
            std::string("zstd-") + ZSTD_versionString() + "-l19-j8M-o6");
}

TEST(ParallelZstd, LayerMediaTypeIsOciZstd) {
  EXPECT_STREQ(gpuenv::images::media_type::k_layer_zstd, "application/vnd.oci.image.layer.v1.tar+zstd");
}

}  // namespace
