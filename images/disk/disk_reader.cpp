#include "images/disk/disk_reader.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "base/unique_fd.hpp"
#include "images/disk/filesystems.hpp"

#include <nlohmann/json.hpp>

namespace gpuenv::images::disk {
namespace {

namespace fs = std::filesystem;

constexpr IoArea k_disk_path_io{"disk.io", "check the path"};  // the disk named on the command line
constexpr IoArea k_raw_disk_io{"disk.io", ""};                 // its raw form in the work directory

constexpr const char* k_lock_in_root = "/usr/share/gpuenv/gpuenv.lock";
constexpr std::uint64_t k_max_virtual_size = std::uint64_t{16} << 40;  // ext4's largest file with 4 KiB blocks
constexpr std::uint64_t k_max_unpack_ratio = 400;                      // as for archives (base/archive/safe_extract.hpp)

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

}  // namespace

/// A qcow2 that inspect may hand to qemu-img: version 2 or 3, no backing file (qemu-img would open whatever it names:
/// a host file, an nbd:// or http:// server, a FIFO that never answers), no external data file, not encrypted. Read
/// from the header itself (QEMU's docs/interop/qcow2.txt), before any tool opens the file.
Status check_qcow2_header(std::string_view head_view, const std::string& path) {
  const std::string head(head_view);
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
  if (be(head, 24, 8) > k_max_virtual_size)
    return refuse("says its disk is " + std::to_string(be(head, 24, 8) >> 30) + " GiB; inspect reads disks of at most 16 TiB (ext4's largest file)",
                  "is it a disk gpuenv built? gpuenv writes disks of a few GiB");
  return ok_status();
}

Result<std::uint64_t> qcow2_data_bytes(std::string_view map_json, const std::string& path) {
  auto bad = [&](const std::string& why) {
    return make_error(ErrorKind::environment, "disk.qcow2", "qemu-img's map of the qcow2 " + why, path, "is it a qcow2 file? qemu-img check tells");
  };
  const nlohmann::json j = nlohmann::json::parse(map_json, nullptr, false);
  if (j.is_discarded() || !j.is_array()) return bad("is not a JSON list");
  std::uint64_t data = 0;
  for (const auto& e : j) {
    if (!e.is_object()) return bad("holds an entry that is not an object");
    const auto length = e.find("length");
    const auto has_data = e.find("data");
    if (length == e.end() || !length->is_number_unsigned() || has_data == e.end() || !has_data->is_boolean()) return bad("holds an entry without a length or data flag");
    const auto zero = e.find("zero");
    if (!has_data->get<bool>() || (zero != e.end() && zero->is_boolean() && zero->get<bool>())) continue;
    const std::uint64_t n = length->get<std::uint64_t>();
    if (n > k_max_virtual_size || data + n > k_max_virtual_size) return bad("adds up to more than 16 TiB of data");
    data += n;
  }
  return data;
}

bool looks_like_disk(const std::string& path) {
  const std::string head = head_of(path, 520);
  return is_qcow2(head) || (head.size() >= 520 && head.compare(512, 8, "EFI PART") == 0);
}

Result<DiskSummary> read_disk(const std::string& path, const std::string& work_dir, CommandRunner& runner) {
  DiskSummary out;
  out.path = path;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return io_error(k_disk_path_io, "cannot read the disk", path);
  out.file_size = static_cast<std::uint64_t>(st.st_size);
  out.allocated = static_cast<std::uint64_t>(st.st_blocks) * 512;
  std::string raw = path;
  const std::string head = head_of(path, 104);
  out.format = is_qcow2(head) ? "qcow2" : "raw";
  if (out.format == "qcow2") {
    GPUENV_CHECK(check_qcow2_header(head, path));
    // What the conversion would write, from the qcow2's own tables (qemu-img map reads no data): compressed
    // clusters let a 3 MB file unpack to 2 GiB, so the same 400:1 bound as for archives holds before anything is
    // written.
    GPUENV_TRY(map, runner.run({"qemu-img", "map", "--output=json", "-f", "qcow2", path}, {}, k_tool_timeout));
    if (map.exit_code != 0)
      return make_error(ErrorKind::environment, "disk.qcow2", "qemu-img could not map the qcow2 (exit " + std::to_string(map.exit_code) + "): " + map.err, path,
                        "is it a qcow2 file? qemu-img check tells");
    GPUENV_TRY(data, qcow2_data_bytes(map.out, path));
    const std::uint64_t bound = std::max<std::uint64_t>(out.file_size, 1) * k_max_unpack_ratio;
    if (data > bound)
      return make_error(ErrorKind::spec, "disk.qcow2",
                        "the qcow2 unpacks to " + std::to_string(data >> 20) + " MiB of data from a file of " + std::to_string(out.file_size >> 10) +
                            " KiB, more than " + std::to_string(k_max_unpack_ratio) + " times its size (compressed clusters of one byte over and over?)",
                        path, "inspect reads disks gpuenv built, which are not compressed; convert it with qemu-img convert -O qcow2 where you trust it");
    raw = (fs::path(work_dir) / "disk.raw").string();
    GPUENV_TRY(r, runner.run({"qemu-img", "convert", "-q", "-f", "qcow2", "-O", "raw", path, raw}, {}, k_tool_timeout));
    if (r.exit_code != 0)
      return make_error(ErrorKind::environment, "disk.qcow2", "qemu-img could not read the qcow2 (exit " + std::to_string(r.exit_code) + "): " + r.err, path,
                        "is it a qcow2 file? qemu-img check tells");
  }
  struct stat rst {};
  if (::stat(raw.c_str(), &rst) != 0) return io_error(k_raw_disk_io, "cannot read the disk", raw);
  out.disk_size = static_cast<std::uint64_t>(rst.st_size);
  GPUENV_TRY(layout, read_gpt(head_of(raw, 34 * k_sector), out.disk_size));
  out.layout = std::move(layout);
  // The lock, from the root partition (debugfs reads a file system at an offset inside the disk: unix_io's
  // "?offset=").
  const Partition* root = nullptr;
  for (const auto& p : out.layout.partitions)
    if (const auto platform = root_partition_platform(p.type); platform && !root) {
      root = &p;
      out.platform = platform;
    }
  if (!root) {
    out.lock_problem = "the disk has no Linux root partition (of type x86-64 or ARM64)";
    return out;
  }
  const std::string image = raw + "?offset=" + std::to_string(root->offset());
  auto read = runner.run({"debugfs", "-R", std::string("cat ") + k_lock_in_root, image}, {}, k_tool_timeout);
  if (!read && read.error().id == "process.output_limit") {
    out.lock_problem = std::string(k_lock_in_root) + " is larger than a lock may be (64 MiB): not a lock gpuenv wrote";
    return out;
  }
  GPUENV_TRY(cat, std::move(read));
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
