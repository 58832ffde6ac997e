#include "images/disk/filesystems.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
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
  if (why.size() > 600) why = why.substr(0, 600) + " ...";
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
  // configuration changes what it writes. E2FSPROGS_FAKE_TIME: e2fsprogs' clock, for the times it writes itself
  // (the superblock's creation, write and check times, the reserved inodes'). e2fsprogs reads a fake time of 0 as
  // none and takes the wall clock, so an epoch of 0 (no SOURCE_DATE_EPOCH) gives it 1, 1970-01-01T00:00:01Z; the
  // tree's own inodes still get the epoch itself from debugfs.
  argv.insert(argv.begin(), {"env", "SOURCE_DATE_EPOCH=" + std::to_string(epoch), "E2FSPROGS_FAKE_TIME=" + std::to_string(std::max<std::int64_t>(epoch, 1)), "MTOOLSRC=/dev/null",
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

namespace {

/// Every path of the tree, relative ("" the root itself), with whether it is a directory (not following symlinks);
/// lost+found, which mkfs.ext4 adds, too.
Result<std::vector<std::pair<std::string, fs::file_type>>> tree_paths(const std::string& root) {
  std::vector<std::pair<std::string, fs::file_type>> all = {{"", fs::file_type::directory}, {"lost+found", fs::file_type::directory}};
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    all.emplace_back(it->path().lexically_relative(root).string(), it->symlink_status(ec).type());
  if (ec) return make_error(ErrorKind::environment, "disk.ext4", "cannot read the root tree: " + ec.message(), root, "check the build directory");
  std::sort(all.begin(), all.end());
  return all;
}

/// Each path's inode number in IMAGE, read with debugfs `ls -p` of every directory: debugfs follows a symlink
/// named by path (to its target, or to nothing: /dev/null), so inodes are addressed by number instead. The
/// directories are listed k_dirs_per_listing at a time, so that one listing stays far below what the runner keeps
/// of a child's output (k_max_child_output) however large the root.
Result<std::map<std::string, std::string>> inode_numbers(const std::string& image, const std::vector<std::pair<std::string, fs::file_type>>& paths,
                                                         CommandRunner& runner) {
  constexpr std::size_t k_dirs_per_listing = 2048;
  std::vector<std::string> scripts(1);
  std::size_t in_script = 0;
  for (const auto& [rel, type] : paths) {
    if (type != fs::file_type::directory) continue;
    GPUENV_TRY(p, debugfs_path(rel));
    if (in_script == k_dirs_per_listing) {
      scripts.emplace_back();
      in_script = 0;
    }
    scripts.back() += "ls -p " + p + "\n";
    ++in_script;
  }
  const std::string commands = image + ".ls";
  std::string text;
  for (const std::string& script : scripts) {
    GPUENV_CHECK(write_file_atomic(commands, script, 0644, Durability::scratch));
    auto r = runner.run({"debugfs", "-f", commands, image}, {}, k_tool_timeout);
    std::error_code ec;
    fs::remove(commands, ec);
    if (!r) return r.error();
    if (r->exit_code != 0) return tool_error("disk.ext4", {"debugfs", image}, *r, "e2fsprogs' debugfs lists the new file system");
    text += r->out;
    if (!text.empty() && text.back() != '\n') text += '\n';
  }
  std::map<std::string, std::string> out = {{"", "<2>"}};
  std::string dir;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    if (line.rfind("debugfs: ls -p \"/", 0) == 0 && line.size() >= 18) {
      dir = line.substr(17, line.size() - 18);  // between "/ and the closing quote
      continue;
    }
    // /<ino>/<mode>/<uid>/<gid>/<name>/<size>/
    if (line.size() < 2 || line[0] != '/') continue;
    const std::size_t ino_end = line.find('/', 1);
    std::size_t field = ino_end;
    for (int i = 0; i < 3 && field != std::string::npos; ++i) field = line.find('/', field + 1);
    if (ino_end == std::string::npos || field == std::string::npos) continue;
    const std::size_t name_end = line.find('/', field + 1);
    if (name_end == std::string::npos) continue;
    const std::string name = line.substr(field + 1, name_end - field - 1);
    if (name == "." || name == ".." || name.empty()) continue;
    out[dir.empty() ? name : dir + "/" + name] = "<" + line.substr(1, ino_end - 1) + ">";
  }
  return out;
}

/// debugfs commands giving every inode its owner, mode (the permission bits, the type kept) and times, by number.
Result<std::string> fixup_script(const Ext4Request& rq, const std::vector<std::pair<std::string, fs::file_type>>& paths,
                                 const std::map<std::string, std::string>& inodes) {
  auto inode = [&](const std::string& rel) -> Result<std::string> {
    const auto it = inodes.find(rel);
    if (it == inodes.end())
      return make_error(ErrorKind::internal, "disk.ext4", "'" + rel + "' is not in the new file system", rq.root, "this is a bug in the disk plan");
    return it->second;
  };
  const std::map<std::string, fs::file_type> types(paths.begin(), paths.end());
  std::string script;
  for (const auto& o : rq.owners) {
    GPUENV_TRY(ino, inode(o.path));
    script += "sif " + ino + " uid " + std::to_string(o.uid) + "\n";
    script += "sif " + ino + " gid " + std::to_string(o.gid) + "\n";
    if (!o.mode) continue;
    const auto t = types.find(o.path);
    if (t == types.end()) return make_error(ErrorKind::internal, "disk.ext4", "'" + o.path + "' is not in the root tree", rq.root, "this is a bug in the disk plan");
    const std::uint32_t type = t->second == fs::file_type::directory ? 0040000 : t->second == fs::file_type::symlink ? 0120000 : 0100000;
    char mode[16];
    std::snprintf(mode, sizeof mode, "0%o", type | (*o.mode & 07777));
    script += "sif " + ino + " mode " + mode + "\n";
  }
  // Times: every inode the tree gave, the root and lost+found.
  const std::string at = "@" + std::to_string(rq.epoch);
  for (const auto& [rel, type] : paths) {
    GPUENV_TRY(ino, inode(rel));
    for (const char* field : {"atime", "ctime", "mtime", "crtime"}) script += std::string("sif ") + ino + " " + field + " " + at + "\n";
  }
  return script;
}

}  // namespace

Status make_ext4(const Ext4Request& rq, CommandRunner& runner) {
  if (rq.size % k_align_bytes != 0 || rq.size < (8u << 20))
    return make_error(ErrorKind::spec, "disk.ext4", "a root file system of " + std::to_string(rq.size) + " bytes: at least 8 MiB, in whole MiB", "vm.disk_size",
                      "give a larger disk size");
  for (const auto& o : rq.owners) GPUENV_CHECK(debugfs_path(o.path));
  GPUENV_TRY(paths, tree_paths(rq.root));
  for (const auto& [rel, type] : paths) GPUENV_CHECK(debugfs_path(rel));

  std::error_code ec;
  const std::string conf = rq.out + ".mke2fs.conf", commands = rq.out + ".debugfs";
  GPUENV_CHECK(write_file_atomic(conf, k_mke2fs_conf, 0644, Durability::scratch));
  fs::remove(rq.out, ec);
  std::vector<std::string> mkfs = with_epoch(rq.epoch, {"mkfs.ext4", "-q", "-F", "-t", "ext4", "-d", rq.root, "-U", rq.uuid.str(), "-L", rq.label, "-E",
                                                        "hash_seed=" + rq.uuid.str() + ",root_owner=0:0,lazy_itable_init=0,lazy_journal_init=0,nodiscard", rq.out,
                                                        std::to_string(rq.size / 1024) + "k"});
  for (auto& a : mkfs)
    if (a == "MKE2FS_CONFIG=/dev/null") a = "MKE2FS_CONFIG=" + conf;
  auto fail = [&](Error e) -> Status {
    fs::remove(conf, ec);
    fs::remove(commands, ec);
    fs::remove(rq.out, ec);
    return e;
  };
  if (auto made = run_tool(runner, mkfs, "disk.ext4", "e2fsprogs' mkfs.ext4 -d makes the root; 'Could not allocate block' means vm.disk_size is too small"); !made)
    return fail(made.error());
  auto inodes = inode_numbers(rq.out, paths, runner);
  if (!inodes) return fail(inodes.error());
  auto script = fixup_script(rq, paths, *inodes);
  if (!script) return fail(script.error());
  // In pieces of at most k_script_piece bytes: debugfs echoes every command, and a root of some hundred thousand
  // files would echo more than the runner keeps of a child's output (k_max_child_output) in one run.
  constexpr std::size_t k_script_piece = std::size_t{8} << 20;
  for (std::size_t start = 0; start < script->size();) {
    std::size_t end = std::min(script->size(), start + k_script_piece);
    if (const std::size_t nl = script->rfind('\n', end - 1); end < script->size() && nl != std::string::npos && nl >= start) end = nl + 1;
    if (auto st = write_file_atomic(commands, script->substr(start, end - start), 0644, Durability::scratch); !st) return fail(st.error());
    if (auto st = run_debugfs(runner, with_epoch(rq.epoch, {"debugfs", "-w", "-f", commands, rq.out})); !st) return fail(st.error());
    start = end;
  }
  fs::remove(conf, ec);
  fs::remove(commands, ec);
  return ok_status();
}

}  // namespace gpuenv::images::disk
