#include "images/rootfs/package_trees.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/archive/safe_extract.hpp"
#include "base/digest.hpp"
#include "base/file_io.hpp"
#include "base/json_field.hpp"
#include "base/safe_text.hpp"
#include "base/unique_fd.hpp"

namespace gpuenv::images {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr IoArea k_tree_io{"build.io", "check free disk space and permissions of the cache"};

Error bad_record(const std::string& where, const std::string& what) {
  return make_error(ErrorKind::environment, "build.bad_tree", "the stored record of an unpacked package is damaged: " + what, where,
                    "remove that directory of the cache; the next build unpacks the package again");
}

/// The names in a directory, sorted (the order of a tree's walk does not depend on the file system).
Result<std::vector<std::string>> names_in(int dir_fd, const std::string& where) {
  UniqueFd dup(::dup(dir_fd));
  DIR* d = dup.get() < 0 ? nullptr : ::fdopendir(dup.get());
  if (!d) return io_error(k_tree_io, "cannot list", where);
  (void)dup.release();
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

/// Removes what stands at `name` unless it is a directory; false when a directory stands there.
Result<bool> clear_for_non_directory(int dir_fd, const std::string& name, const std::string& where) {
  struct stat st {};
  if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return true;
    return io_error(k_tree_io, "cannot inspect", where);
  }
  if (S_ISDIR(st.st_mode)) return false;
  if (::unlinkat(dir_fd, name.c_str(), 0) != 0) return io_error(k_tree_io, "cannot replace", where);
  return true;
}

struct Linker {
  const PackageTree& tree;
  const std::string& root;
  const std::string& origin;
  LinkedFiles& linked;
  int root_fd;
  bool whiteouts = false;
  std::uint64_t files = 0, bytes = 0;

  /// Removes NAME (a whole directory too) from the root's directory DST, never following a symlink in it.
  Status remove_below(int dst, const std::string& name, const std::string& where) {
    std::error_code ec;
    fs::remove_all(fs::path("/proc/self/fd") / std::to_string(dst) / name, ec);
    if (ec) return io_error(k_tree_io, "cannot apply a whiteout to", where, ec.value());
    return ok_status();
  }

  /// The layer's whiteouts in the tree's directory SRC (names), applied to the root's DST; counts the markers.
  Status apply_whiteouts(int src, int dst, const std::string& rel, const std::vector<std::string>& names) {
    for (const auto& name : names) {
      if (name.rfind(".wh.", 0) != 0) continue;
      struct stat st {};
      if (::fstatat(src, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) {
        ++files;
        bytes += static_cast<std::uint64_t>(st.st_size);
      }
      if (name == ".wh..wh..opq") {
        GPUENV_TRY(below, names_in(dst, root + "/" + rel));
        for (const auto& n : below) GPUENV_CHECK(remove_below(dst, n, root + "/" + rel + "/" + n));
      } else if (name.size() > 4) {
        GPUENV_CHECK(remove_below(dst, name.substr(4), root + "/" + rel + "/" + name.substr(4)));
      }
    }
    return ok_status();
  }

  Error conflict(const std::string& rel) const {
    return make_error(ErrorKind::environment, "build.conflict", "a directory stands where " + origin + " puts the file '" + rel + "'", root,
                      "two packages of the lock disagree about this path; drop one of them from the spec");
  }

  /// Links the contents of the tree's directory `rel` (open as `src`) into the root's directory `rel`.
  Status link_directory(int src, const std::string& rel) {
    GPUENV_TRY(dst, open_directory_beneath(root_fd, rel, origin));
    GPUENV_TRY(names, names_in(src, tree.root + "/" + rel));
    if (whiteouts) GPUENV_CHECK(apply_whiteouts(src, dst.get(), rel, names));
    for (const auto& name : names) {
      if (whiteouts && name.rfind(".wh.", 0) == 0) continue;
      const std::string child = rel.empty() ? name : rel + "/" + name;
      struct stat st {};
      if (::fstatat(src, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return io_error(k_tree_io, "cannot inspect", tree.root + "/" + child);
      if (S_ISDIR(st.st_mode)) {
        if (::mkdirat(dst.get(), name.c_str(), 0755) != 0 && errno != EEXIST) return io_error(k_tree_io, "cannot create directory", root + "/" + child);
        GPUENV_TRY(made, open_directory_beneath(root_fd, child, origin));  // a symlink standing there is followed beneath the root only
        ::fchmod(made.get(), st.st_mode & 07777);
        UniqueFd sub(::openat(src, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (sub.get() < 0) return io_error(k_tree_io, "cannot open", tree.root + "/" + child);
        GPUENV_CHECK(link_directory(sub.get(), child));
        continue;
      }
      GPUENV_TRY(clear, clear_for_non_directory(dst.get(), name, root + "/" + child));
      if (!clear) return conflict(child);
      if (S_ISLNK(st.st_mode)) {
        std::string target(static_cast<std::size_t>(st.st_size) + 1, '\0');
        const ssize_t n = ::readlinkat(src, name.c_str(), target.data(), target.size());
        if (n < 0 || static_cast<std::size_t>(n) >= target.size()) return io_error(k_tree_io, "cannot read the link", tree.root + "/" + child);
        target.resize(static_cast<std::size_t>(n));
        if (::symlinkat(target.c_str(), dst.get(), name.c_str()) != 0) return io_error(k_tree_io, "cannot create the link", root + "/" + child);
      } else if (S_ISREG(st.st_mode)) {
        if (::linkat(src, name.c_str(), dst.get(), name.c_str(), 0) != 0) return io_error(k_tree_io, "cannot link", root + "/" + child);
        linked[{st.st_dev, st.st_ino}] = tree.key + "/" + child;
        ++files;
        bytes += static_cast<std::uint64_t>(st.st_size);
      } else {
        return make_error(ErrorKind::environment, "build.bad_tree", "an unpacked package holds a special file", tree.root + "/" + child,
                          "remove that directory of the cache; the next build unpacks the package again");
      }
    }
    return ok_status();
  }
};

json entry_json(const ExtractedEntry& e) {
  return json::array({e.path, static_cast<int>(e.type), e.mode, e.uid, e.gid, e.size, e.link_target});
}

ExtractedEntry entry_of(const json& j) {
  ExtractedEntry e;
  e.path = j.at(0).get<std::string>();
  const int type = j.at(1).get<int>();
  if (type < 0 || type > static_cast<int>(ExtractedEntry::Type::fifo)) throw std::out_of_range("entry type");
  e.type = static_cast<ExtractedEntry::Type>(type);
  e.mode = j.at(2).get<std::uint32_t>();
  e.uid = j.at(3).get<std::uint32_t>();
  e.gid = j.at(4).get<std::uint32_t>();
  e.size = j.at(5).get<std::uint64_t>();
  e.link_target = j.at(6).get<std::string>();
  return e;
}

Result<PackageTree> read_tree(const std::string& dir, const std::string& key) {
  auto text = read_file_limited(dir + "/record.json", std::size_t{256} << 20);
  if (!text) return std::move(text).error();
  GPUENV_TRY(record, parse_tree_record(*text, dir + "/record.json"));
  return PackageTree{key, dir + "/root", std::move(record)};
}

}  // namespace

std::string render_tree_record(const TreeRecord& r) {
  json entries = json::array();
  for (const auto& e : r.deb.entries) entries.push_back(entry_json(e));
  const json deb = {{"name", r.deb.name},         {"version", r.deb.version}, {"architecture", r.deb.architecture}, {"multi_arch", r.deb.multi_arch},
                    {"control", r.deb.control},   {"md5sums", r.deb.md5sums}, {"conffiles", r.deb.conffiles},       {"entries", entries}};
  return json{{"format", k_package_tree_format}, {"deb", deb}, {"files", r.files}, {"regular_files", r.regular_files}, {"regular_bytes", r.regular_bytes}}.dump();
}

Result<TreeRecord> parse_tree_record(const std::string& text, const std::string& where) {
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return bad_record(where, "not a JSON object");
  if (string_field(j, "format") != k_package_tree_format) return bad_record(where, "made by another gpuenv (format " + safe_text(string_field(j, "format", "?"), 80) + ")");
  try {
    TreeRecord r;
    const json& deb = j.at("deb");
    r.deb.name = deb.at("name").get<std::string>();
    r.deb.version = deb.at("version").get<std::string>();
    r.deb.architecture = deb.at("architecture").get<std::string>();
    r.deb.multi_arch = deb.at("multi_arch").get<std::string>();
    r.deb.control = deb.at("control").get<std::string>();
    r.deb.md5sums = deb.at("md5sums").get<std::string>();
    r.deb.conffiles = deb.at("conffiles").get<std::vector<std::string>>();
    for (const auto& e : deb.at("entries")) r.deb.entries.push_back(entry_of(e));
    r.files = j.at("files").get<std::vector<std::string>>();
    r.regular_files = j.at("regular_files").get<std::uint64_t>();
    r.regular_bytes = j.at("regular_bytes").get<std::uint64_t>();
    return r;
  } catch (const std::exception& e) {
    return bad_record(where, e.what());
  }
}

Result<PackageTree> PackageTreeStore::get(const std::string& inputs, const std::function<Result<TreeRecord>(const std::string& root)>& install) {
  const std::string key = sha256_hex(std::string(k_package_tree_format) + "\n" + inputs);
  const std::string dir = m_dir + "/" + key;
  std::error_code ec;
  if (fs::exists(dir + "/record.json", ec)) {
    if (auto tree = read_tree(dir, key)) {
      (void)::utimensat(AT_FDCWD, (dir + "/record.json").c_str(), nullptr, 0);  // its last use, for `gpuenv cache prune`
      return tree;
    }
    fs::remove_all(dir, ec);  // damaged: unpacked again below
  }
  const std::string staged = m_staging + "/tree-" + key;
  fs::remove_all(staged, ec);
  const StagedDirectory staging(staged);  // gone whatever happens below
  fs::create_directories(staged + "/root", ec);
  if (!ec) fs::create_directories(m_dir, ec);  // the first failure is the one reported
  if (ec) return io_error(k_tree_io, "cannot create the package tree directory", staged, ec.value());
  GPUENV_TRY(record, install(staged + "/root"));
  for (const auto& e : fs::recursive_directory_iterator(staged + "/root", ec)) {
    if (!e.is_symlink(ec) && e.is_regular_file(ec)) {
      ++record.regular_files;
      record.regular_bytes += e.file_size(ec);
    }
  }
  if (ec) return io_error(k_tree_io, "cannot read the unpacked package", staged, ec.value());
  if (auto st = write_file_atomic(staged + "/record.json", render_tree_record(record), 0644, Durability::scratch); !st) return std::move(st).error();
  // Synced: the files' data reaches the disk before the tree is named, so a power cut never leaves a named, empty
  // tree that later builds would link from. Another build that committed the same tree first keeps its own.
  GPUENV_CHECK(commit_directory(staged, dir, Durability::synced, k_tree_io, "cannot commit the package tree"));
  return read_tree(dir, key);
}

Status link_tree(const PackageTree& tree, const std::string& root, const std::string& origin, LinkedFiles& linked, bool whiteouts) {
  UniqueFd root_fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (root_fd.get() < 0) return io_error(k_tree_io, "cannot open the image tree", root);
  UniqueFd src(::open(tree.root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (src.get() < 0) return io_error(k_tree_io, "cannot open the unpacked package", tree.root);
  Linker l{tree, root, origin, linked, root_fd.get(), whiteouts};
  GPUENV_CHECK(l.link_directory(src.get(), ""));
  if (l.files != tree.record.regular_files || l.bytes != tree.record.regular_bytes)
    return make_error(ErrorKind::environment, "build.bad_tree",
                      "the unpacked " + origin + " in the cache holds " + std::to_string(l.files) + " files of " + std::to_string(l.bytes) + " bytes, not the " +
                          std::to_string(tree.record.regular_files) + " files of " + std::to_string(tree.record.regular_bytes) + " bytes it was unpacked with",
                      fs::path(tree.root).parent_path().string(), "something changed the cache; remove that directory and build again");
  return ok_status();
}

}  // namespace gpuenv::images
