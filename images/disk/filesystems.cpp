#include "images/disk/filesystems.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>

#include "base/file_io.hpp"

namespace gpuenv::images::disk {
namespace {

namespace fs = std::filesystem;

Error tool_error(const std::string& id, const std::vector<std::string>& argv, const CommandResult& r, const std::string& hint) {
  std::string tool;
  for (const auto& a : argv)
    if (a.find('=') == std::string::npos && a != "env") {
      tool = a;
      break;
    }
  std::string why = r.err.empty() ? r.out : r.err;
  while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
  if (why.size() > 600) why = why.substr(why.size() - 600);
  return make_error(ErrorKind::environment, id, tool + " failed (exit " + std::to_string(r.exit_code) + "): " + why, argv.back(), hint);
}

/// Runs ARGV; a non-zero exit is error ID.
Status run_tool(CommandRunner& runner, const std::vector<std::string>& argv, const std::string& id, const std::string& hint, std::string_view input = {}) {
  GPUENV_TRY(r, runner.run(argv, input, k_tool_timeout));
  if (r.exit_code != 0) return tool_error(id, argv, r, hint);
  return ok_status();
}

Error path_error(const std::string& path, const std::string& why) {
  return make_error(ErrorKind::spec, "disk.path", "'" + path + "' " + why, path, "rename the file, or leave it out of the image");
}

/// A FAT destination: relative, no "." or "..", no characters FAT forbids.
Status check_fat_dest(const std::string& dest) {
  if (dest.empty() || dest.front() == '/' || dest.back() == '/') return path_error(dest, "is not a relative file path");
  for (const auto& part : fs::path(dest))
    if (part == "." || part == "..") return path_error(dest, "holds . or ..");
  for (char c : dest)
    if (static_cast<unsigned char>(c) < 0x20 || std::string_view("\"*:<>?\\|").find(c) != std::string_view::npos)
      return path_error(dest, "holds a character FAT cannot store");
  return ok_status();
}

std::vector<std::string> with_epoch(std::int64_t epoch, std::vector<std::string> argv) {
  // mtools: SOURCE_DATE_EPOCH for every timestamp it writes; MTOOLSRC=/dev/null so no user's or host's
  // configuration changes what it writes. E2FSPROGS_FAKE_TIME: e2fsprogs' clock.
  argv.insert(argv.begin(), {"env", "SOURCE_DATE_EPOCH=" + std::to_string(epoch), "E2FSPROGS_FAKE_TIME=" + std::to_string(epoch), "MTOOLSRC=/dev/null",
                             "MKE2FS_CONFIG=/dev/null", "TZ=UTC", "LC_ALL=C"});
  return argv;
}

/// gpuenv's mke2fs.conf: the features of Debian 12's ext4 (e2fsprogs 1.47.0's mke2fs.conf), stated here so the
/// build host's own configuration does not change the bytes.
constexpr const char* k_mke2fs_conf = R"([defaults]
	base_features = sparse_super,large_file,filetype,resize_inode,dir_index,ext_attr
	default_mntopts = acl,user_xattr
	enable_periodic_fsck = 0
	blocksize = 4096
	inode_size = 256
	inode_ratio = 16384

[fs_types]
	ext4 = {
		features = has_journal,extent,huge_file,flex_bg,metadata_csum,64bit,dir_nlink,extra_isize
	}
)";

/// A path as debugfs reads it: absolute and in double quotes, which it cannot escape.
Result<std::string> debugfs_path(const std::string& rel) {
  for (char c : rel)
    if (c == '"' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return path_error(rel, "holds a double quote or a control character, which debugfs cannot be given");
  return "\"/" + rel + "\"";
}

/// debugfs exits 0 whatever its commands did: any line on stderr but its banner is a failure.
Status run_debugfs(CommandRunner& runner, const std::vector<std::string>& argv) {
  GPUENV_TRY(r, runner.run(argv, {}, k_tool_timeout));
  std::string complaints;
  std::size_t start = 0;
  while (start < r.err.size()) {
    std::size_t end = r.err.find('\n', start);
    if (end == std::string::npos) end = r.err.size();
    const std::string_view line(r.err.data() + start, end - start);
    if (!line.empty() && line.rfind("debugfs ", 0) != 0) complaints += std::string(complaints.empty() ? "" : "; ") + std::string(line);
    start = end + 1;
  }
  if (r.exit_code != 0 || !complaints.empty()) {
    r.err = complaints;
    return tool_error("disk.ext4", argv, r, "e2fsprogs' debugfs sets owners and times; this is a bug in the disk plan");
  }
  return ok_status();
}

}  // namespace

Status make_fat(const FatRequest& rq, CommandRunner& runner) {
  if (rq.size % k_align_bytes != 0 || rq.size < (33u << 20))
    return make_error(ErrorKind::spec, "disk.fat", "an EFI system partition of " + std::to_string(rq.size) + " bytes: FAT32 needs at least 33 MiB, in whole MiB",
                      "vm.esp_size", "give a size of 64 MiB or more");
  std::set<std::string> dirs;
  for (const auto& f : rq.files) {
    GPUENV_CHECK(check_fat_dest(f.dest));
    for (fs::path p = fs::path(f.dest).parent_path(); !p.empty(); p = p.parent_path()) dirs.insert(p.string());
  }
  std::error_code ec;
  fs::remove(rq.out, ec);
  char volume[9];
  std::snprintf(volume, sizeof volume, "%08x", rq.volume_id);
  GPUENV_CHECK(run_tool(runner,
                        with_epoch(rq.epoch, {"mkfs.fat", "-C", "--invariant", "-i", volume, "-n", rq.label, "-F", "32", "-S", "512", rq.out,
                                              std::to_string(rq.size / 1024)}),
                        "disk.fat", "dosfstools' mkfs.fat makes the EFI system partition"));
  for (const auto& d : dirs)  // a set: parents sort before their children
    GPUENV_CHECK(run_tool(runner, with_epoch(rq.epoch, {"mmd", "-i", rq.out, "::/" + d}), "disk.fat", "mtools' mmd makes the partition's directories"));
  std::vector<FatFile> files = rq.files;
  std::sort(files.begin(), files.end(), [](const FatFile& a, const FatFile& b) { return a.dest < b.dest; });
  for (const auto& f : files)
    GPUENV_CHECK(run_tool(runner, with_epoch(rq.epoch, {"mcopy", "-o", "-i", rq.out, f.source, "::/" + f.dest}), "disk.fat",
                          "mtools' mcopy copies the boot files in; a full partition needs a larger vm.esp_size"));
  return ok_status();
}

Status make_ext4(const Ext4Request& rq, CommandRunner& runner) {
  if (rq.size % k_align_bytes != 0 || rq.size < (8u << 20))
    return make_error(ErrorKind::spec, "disk.ext4", "a root file system of " + std::to_string(rq.size) + " bytes: at least 8 MiB, in whole MiB", "vm.disk_size",
                      "give a larger disk size");
  std::string script;
  for (const auto& o : rq.owners) {
    GPUENV_TRY(p, debugfs_path(o.path));
    script += "sif " + p + " uid " + std::to_string(o.uid) + "\n";
    script += "sif " + p + " gid " + std::to_string(o.gid) + "\n";
    if (o.mode) {
      // sif's mode is the whole i_mode: keep the file type the tree gave, replace the permission bits.
      std::error_code ec;
      const auto st = fs::symlink_status(fs::path(rq.root) / o.path, ec);
      if (ec) return make_error(ErrorKind::internal, "disk.ext4", "'" + o.path + "' is not in the root tree: " + ec.message(), rq.root, "this is a bug in the disk plan");
      std::uint32_t type = 0100000;
      switch (st.type()) {
        case fs::file_type::directory: type = 0040000; break;
        case fs::file_type::symlink: type = 0120000; break;
        default: break;
      }
      char mode[16];
      std::snprintf(mode, sizeof mode, "0%o", type | (*o.mode & 07777));
      script += "sif " + p + " mode " + mode + "\n";
    }
  }
  // Times: every inode the tree gave, the root and lost+found (mkfs.ext4 makes it).
  std::vector<std::string> all = {"", "lost+found"};
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(rq.root, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    all.push_back(fs::relative(it->path(), rq.root).string());
  if (ec) return make_error(ErrorKind::environment, "disk.ext4", "cannot read the root tree: " + ec.message(), rq.root, "check the build directory");
  std::sort(all.begin(), all.end());
  const std::string at = "@" + std::to_string(rq.epoch);
  for (const auto& rel : all) {
    GPUENV_TRY(p, debugfs_path(rel));
    for (const char* field : {"atime", "ctime", "mtime", "crtime"}) script += std::string("sif ") + p + " " + field + " " + at + "\n";
  }

  const std::string conf = rq.out + ".mke2fs.conf", commands = rq.out + ".debugfs";
  GPUENV_CHECK(write_file_atomic(conf, k_mke2fs_conf, 0644, Durability::scratch));
  GPUENV_CHECK(write_file_atomic(commands, script, 0644, Durability::scratch));
  fs::remove(rq.out, ec);
  std::vector<std::string> mkfs = with_epoch(rq.epoch, {"mkfs.ext4", "-q", "-F", "-t", "ext4", "-d", rq.root, "-U", rq.uuid.str(), "-L", rq.label, "-E",
                                                        "hash_seed=" + rq.uuid.str() + ",root_owner=0:0,lazy_itable_init=0,lazy_journal_init=0,nodiscard", rq.out,
                                                        std::to_string(rq.size / 1024) + "k"});
  for (auto& a : mkfs)
    if (a == "MKE2FS_CONFIG=/dev/null") a = "MKE2FS_CONFIG=" + conf;
  Status made = run_tool(runner, mkfs, "disk.ext4", "e2fsprogs' mkfs.ext4 -d makes the root; 'Could not allocate block' means vm.disk_size is too small");
  if (made) made = run_debugfs(runner, with_epoch(rq.epoch, {"debugfs", "-w", "-f", commands, rq.out}));
  fs::remove(conf, ec);
  fs::remove(commands, ec);
  if (!made) fs::remove(rq.out, ec);
  return made;
}

}  // namespace gpuenv::images::disk
