#include "images/disk/disk_image.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "base/file_io.hpp"
#include "base/unique_fd.hpp"
#include "images/disk/filesystems.hpp"

namespace gpuenv::images::disk {
namespace {

constexpr IoArea k_disk_io{"disk.io", "check the output directory's space and permissions"};

namespace fs = std::filesystem;

Status pwrite_all(int fd, const char* data, std::size_t n, off_t at, const std::string& where) {
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, data, n, at);
    if (w < 0) {
      if (errno == EINTR) continue;
      return io_error(k_disk_io, "cannot write", where);
    }
    data += w;
    n -= static_cast<std::size_t>(w);
    at += w;
  }
  return ok_status();
}

/// Copies the file IMAGE to OFFSET of FD, leaving blocks of zeros as holes.
Status place(int fd, const std::string& image, off_t offset, const std::string& where) {
  UniqueFd in(::open(image.c_str(), O_RDONLY | O_CLOEXEC));
  if (in.get() < 0) return io_error(k_disk_io, "cannot open the file system image", image);
  constexpr std::size_t k_block = 64 * 1024;
  std::string buf(k_block, '\0');
  static const std::string zeros(k_block, '\0');
  off_t at = 0;
  for (;;) {
    const ssize_t n = ::read(in.get(), buf.data(), k_block);
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error(k_disk_io, "cannot read", image);
    }
    if (n == 0) break;
    if (std::memcmp(buf.data(), zeros.data(), static_cast<std::size_t>(n)) != 0) GPUENV_CHECK(pwrite_all(fd, buf.data(), static_cast<std::size_t>(n), offset + at, where));
    at += n;
  }
  return ok_status();
}

}  // namespace

Result<GptLayout> write_raw_disk(const std::string& out, const Guid& disk, const std::vector<DiskPartition>& partitions) {
  std::vector<PartitionRequest> requests;
  for (const auto& p : partitions) {
    std::error_code ec;
    const auto size = fs::file_size(p.image, ec);
    if (ec) return make_error(ErrorKind::environment, "disk.io", "cannot read the file system image: " + ec.message(), p.image, "this is a bug in the disk plan");
    PartitionRequest r = p.request;
    r.size = std::max<std::uint64_t>(r.size, size);
    requests.push_back(r);
  }
  GPUENV_TRY(layout, plan_gpt(disk, requests));
  const GptBytes table = gpt_bytes(layout);
  // Beside OUT and renamed when complete (base/file_io's AtomicFile): a failed build leaves no disk.
  GPUENV_TRY(file, AtomicFile::create(out, 0644));
  const std::string& where = file.path();
  if (::ftruncate(file.fd(), static_cast<off_t>(layout.size())) != 0) return io_error(k_disk_io, "cannot size the disk image", where);
  GPUENV_CHECK(pwrite_all(file.fd(), table.head.data(), table.head.size(), 0, where));
  GPUENV_CHECK(pwrite_all(file.fd(), table.tail.data(), table.tail.size(), static_cast<off_t>(layout.size() - table.tail.size()), where));
  for (std::size_t i = 0; i < partitions.size(); ++i) GPUENV_CHECK(place(file.fd(), partitions[i].image, static_cast<off_t>(layout.partitions[i].offset()), where));
  GPUENV_CHECK(file.commit());
  return layout;
}

Status convert_to_qcow2(const std::string& raw, const std::string& out, CommandRunner& runner) {
  const std::string tmp = temporary_beside(out);  // removed by the next conversion to OUT if this one is killed
  const std::vector<std::string> argv = {"qemu-img", "convert", "-q", "-f", "raw", "-O", "qcow2", raw, tmp};
  GPUENV_TRY(r, runner.run(argv, {}, k_tool_timeout));
  if (r.exit_code != 0) {
    ::unlink(tmp.c_str());
    return make_error(ErrorKind::environment, "disk.qcow2", "qemu-img convert failed (exit " + std::to_string(r.exit_code) + "): " + r.err, out,
                      "qemu-utils' qemu-img converts the raw disk; check the output directory's space");
  }
  if (::rename(tmp.c_str(), out.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return io_error(k_disk_io, "cannot move the qcow2 image into place", out);
  }
  return ok_status();
}

}  // namespace gpuenv::images::disk
