#include "images/disk/disk_reader.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "base/unique_fd.hpp"
#include "images/disk/filesystems.hpp"

namespace gpuenv::images::disk {
namespace {

namespace fs = std::filesystem;

constexpr const char* k_lock_in_root = "/usr/share/gpuenv/gpuenv.lock";

/// The first N bytes of PATH ("" when it cannot be read).
std::string head_of(const std::string& path, std::size_t n) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  struct stat st {};
  if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return "";
  std::string out(n, '\0');
  std::size_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd.get(), out.data() + got, n - got, static_cast<off_t>(got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += static_cast<std::size_t>(r);
  }
  out.resize(got);
  return out;
}

bool is_qcow2(const std::string& head) { return head.size() >= 4 && head.compare(0, 4, "QFI\xfb") == 0; }

std::uint64_t be(const std::string& b, std::size_t at, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = v << 8 | static_cast<unsigned char>(b[at + static_cast<std::size_t>(i)]);
  return v;
}

/// A qcow2 that inspect may hand to qemu-img: version 2 or 3, no backing file (qemu-img would open whatever it names:
/// a host file, an nbd:// or http:// server, a FIFO that never answers), no external data file, not encrypted. Read
/// from the header itself (QEMU's docs/interop/qcow2.txt), before any tool opens the file.
Status check_qcow2_header(const std::string& head, const std::string& path) {
  auto refuse = [&](const std::string& why, const std::string& hint) { return make_error(ErrorKind::spec, "disk.qcow2", "the qcow2 " + why, path, hint); };
  if (head.size() < 72) return refuse("is shorter than its header", "is it a qcow2 file? qemu-img check tells");
  const std::uint64_t version = be(head, 4, 4);
  if (version != 2 && version != 3) return refuse("is version " + std::to_string(version) + ", not 2 or 3", "convert it with qemu-img convert -O qcow2");
  if (be(head, 8, 8) != 0 || be(head, 16, 4) != 0)
    return refuse("names a backing file: inspect reads only self-contained disks, never a file, host or pipe a disk names",
                  "make it self-contained first (qemu-img convert -O qcow2 IN OUT) where you trust what it names");
  if (be(head, 32, 4) != 0) return refuse("is encrypted", "inspect reads unencrypted disks; gpuenv writes no encrypted ones");
  if (version == 3) {
    if (head.size() < 104) return refuse("is shorter than its version 3 header", "is it a qcow2 file? qemu-img check tells");
    constexpr std::uint64_t k_external_data_file = 1u << 2;  // incompatible feature bit 2
    if (be(head, 72, 8) & k_external_data_file)
      return refuse("keeps its data in an external file: inspect reads only self-contained disks", "make it self-contained first (qemu-img convert -O qcow2 IN OUT)");
  }
  return ok_status();
}

}  // namespace

bool looks_like_disk(const std::string& path) {
  const std::string head = head_of(path, 520);
  return is_qcow2(head) || (head.size() >= 520 && head.compare(512, 8, "EFI PART") == 0);
}

Result<DiskSummary> read_disk(const std::string& path, const std::string& work_dir, CommandRunner& runner) {
  DiskSummary out;
  out.path = path;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return make_error(ErrorKind::environment, "disk.io", std::string("cannot read the disk: ") + std::strerror(errno), path, "check the path");
  out.file_size = static_cast<std::uint64_t>(st.st_size);
  out.allocated = static_cast<std::uint64_t>(st.st_blocks) * 512;
  std::string raw = path;
  const std::string head = head_of(path, 104);
  out.format = is_qcow2(head) ? "qcow2" : "raw";
  if (out.format == "qcow2") {
    GPUENV_CHECK(check_qcow2_header(head, path));
    raw = (fs::path(work_dir) / "disk.raw").string();
    GPUENV_TRY(r, runner.run({"qemu-img", "convert", "-q", "-f", "qcow2", "-O", "raw", path, raw}, {}, k_tool_timeout));
    if (r.exit_code != 0)
      return make_error(ErrorKind::environment, "disk.qcow2", "qemu-img could not read the qcow2 (exit " + std::to_string(r.exit_code) + "): " + r.err, path,
                        "is it a qcow2 file? qemu-img check tells");
  }
  struct stat rst {};
  if (::stat(raw.c_str(), &rst) != 0) return make_error(ErrorKind::environment, "disk.io", std::string("cannot read the disk: ") + std::strerror(errno), raw, "");
  out.disk_size = static_cast<std::uint64_t>(rst.st_size);
  GPUENV_TRY(layout, read_gpt(head_of(raw, 34 * k_sector), out.disk_size));
  out.layout = std::move(layout);
  // The lock, from the root partition (debugfs reads a file system at an offset inside the disk: unix_io's
  // "?offset=").
  const Partition* root = nullptr;
  for (const auto& p : out.layout.partitions)
    if (p.type.str() == k_type_root_x86_64) root = &p;
  if (!root) {
    out.lock_problem = "the disk has no Linux root (x86-64) partition";
    return out;
  }
  const std::string image = raw + "?offset=" + std::to_string(root->offset());
  GPUENV_TRY(cat, runner.run({"debugfs", "-R", std::string("cat ") + k_lock_in_root, image}, {}, k_tool_timeout));
  if (cat.exit_code != 0 || cat.out.empty()) {
    out.lock_problem = "no " + std::string(k_lock_in_root) + " in the root partition (not a disk gpuenv built?)";
    return out;
  }
  auto lock = resolver::parse_lock(cat.out, path + ":" + k_lock_in_root);
  if (lock) out.lock = std::move(*lock);
  else out.lock_problem = lock.error().message;
  return out;
}

}  // namespace gpuenv::images::disk
