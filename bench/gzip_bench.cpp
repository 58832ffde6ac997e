// Compresses INPUT to OUTPUT with gpuenv's ParallelGzip and prints the throughput (for bench/gzip.sh).
// Usage: gzip_bench [-p THREADS] [-l LEVEL] [-b BLOCK_KIB] INPUT OUTPUT
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "images/oci/parallel_gzip.hpp"

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
  gpuenv::images::GzipOptions o;
  int i = 1;
  for (; i + 1 < argc && argv[i][0] == '-'; i += 2) {
    const std::string flag = argv[i];
    if (flag == "-p") o.threads = static_cast<unsigned>(std::atoi(argv[i + 1]));
    else if (flag == "-l") o.level = std::atoi(argv[i + 1]);
    else if (flag == "-b") o.block_bytes = static_cast<std::size_t>(std::atol(argv[i + 1])) << 10;
    else break;
  }
  if (argc - i != 2) {
    std::fprintf(stderr, "usage: gzip_bench [-p THREADS] [-l LEVEL] [-b BLOCK_KIB] INPUT OUTPUT\n");
    return 2;
  }
  const int in = ::open(argv[i], O_RDONLY | O_CLOEXEC);
  const int out = ::open(argv[i + 1], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (in < 0 || out < 0) {
    std::fprintf(stderr, "gzip_bench: cannot open %s or %s: %s\n", argv[i], argv[i + 1], std::strerror(errno));
    return 1;
  }
  const auto start = std::chrono::steady_clock::now();
  gpuenv::images::ParallelGzip gz([out](const char* p, std::size_t n) { return write_all(out, p, n); }, o);
  std::vector<char> buf(std::size_t{1} << 20);
  for (;;) {
    const ssize_t n = ::read(in, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      std::fprintf(stderr, "gzip_bench: read: %s\n", std::strerror(errno));
      return 1;
    }
    if (n == 0) break;
    if (auto s = gz.write(buf.data(), static_cast<std::size_t>(n)); !s) {
      std::fprintf(stderr, "%s\n", s.error().to_string().c_str());
      return 1;
    }
  }
  auto r = gz.finish();
  if (!r) {
    std::fprintf(stderr, "%s\n", r.error().to_string().c_str());
    return 1;
  }
  ::close(in);
  if (::close(out) != 0) return 1;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("gzip_bench: %llu -> %llu bytes (%.2f%%) in %.3f s: %.1f MB/s of input\n",
              static_cast<unsigned long long>(r->uncompressed_bytes), static_cast<unsigned long long>(r->compressed_bytes),
              100.0 * static_cast<double>(r->compressed_bytes) / static_cast<double>(std::max<std::uint64_t>(r->uncompressed_bytes, 1)),
              s, static_cast<double>(r->uncompressed_bytes) / s / 1e6);
  return 0;
}
