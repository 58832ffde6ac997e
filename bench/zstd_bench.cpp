// Compresses INPUT to OUTPUT with gpuenv's ParallelZstd and prints the throughput (for bench/zstd.sh).
// The content size is stated (from fstat), as a layer build knows it and as the zstd command does for a file;
// -u leaves it unknown.
// Usage: zstd_bench [-p THREADS] [-l LEVEL] [-u] INPUT OUTPUT
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "images/oci/parallel_zstd.hpp"

namespace {

gpuenv::Status write_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return gpuenv::make_error(gpuenv::ErrorKind::environment, "bench.write", std::strerror(errno));
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return gpuenv::ok_status();
}

}  // namespace

int main(int argc, char** argv) {
  gpuenv::images::ZstdOptions o;
  bool state_size = true;
  int i = 1;
  for (; i < argc && argv[i][0] == '-'; ++i) {
    const std::string flag = argv[i];
    if (flag == "-u") {
      state_size = false;
      continue;
    }
    if (i + 1 >= argc) break;
    if (flag == "-p") o.threads = static_cast<unsigned>(std::atoi(argv[++i]));
    else if (flag == "-l") o.level = std::atoi(argv[++i]);
    else break;
  }
  if (argc - i != 2) {
    std::fprintf(stderr, "usage: zstd_bench [-p THREADS] [-l LEVEL] [-u] INPUT OUTPUT\n");
    return 2;
  }
  const int in = ::open(argv[i], O_RDONLY | O_CLOEXEC);
  const int out = ::open(argv[i + 1], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  struct stat st {};
  if (in < 0 || out < 0 || ::fstat(in, &st) != 0) {
    std::fprintf(stderr, "zstd_bench: cannot open %s or %s: %s\n", argv[i], argv[i + 1], std::strerror(errno));
    return 1;
  }
  if (state_size) o.content_size = static_cast<std::uint64_t>(st.st_size);
  const auto start = std::chrono::steady_clock::now();
  gpuenv::images::ParallelZstd z([out](const char* p, std::size_t n) { return write_all(out, p, n); }, o);
  std::vector<char> buf(std::size_t{1} << 20);
  for (;;) {
    const ssize_t n = ::read(in, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      std::fprintf(stderr, "zstd_bench: read: %s\n", std::strerror(errno));
      return 1;
    }
    if (n == 0) break;
    if (auto s = z.write(buf.data(), static_cast<std::size_t>(n)); !s) {
      std::fprintf(stderr, "%s\n", s.error().to_string().c_str());
      return 1;
    }
  }
  auto r = z.finish();
  if (!r) {
    std::fprintf(stderr, "%s\n", r.error().to_string().c_str());
    return 1;
  }
  ::close(in);
  if (::close(out) != 0) return 1;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("zstd_bench (%s): %llu -> %llu bytes (%.2f%%) in %.3f s: %.1f MB/s of input\n",
              gpuenv::images::zstd_implementation(o).c_str(), static_cast<unsigned long long>(r->uncompressed_bytes),
              static_cast<unsigned long long>(r->compressed_bytes),
              100.0 * static_cast<double>(r->compressed_bytes) / static_cast<double>(std::max<std::uint64_t>(r->uncompressed_bytes, 1)),
              s, static_cast<double>(r->uncompressed_bytes) / s / 1e6);
  return 0;
}
