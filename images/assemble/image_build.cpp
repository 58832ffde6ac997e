#include "images/assemble/image_build.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include "packages/apt/closure.hpp"
#include "packages/apt/deb822.hpp"
#include "base/cache/cached_fetch.hpp"
#include "base/digest.hpp"
#include "images/elf/elf.hpp"
#include "images/elf/loader_model.hpp"
#include "images/oci/parallel_gzip.hpp"
#include "images/oci/parallel_zstd.hpp"
#include "images/oci/tar_writer.hpp"
#include "images/run/unpack.hpp"
#include "images/rootfs/deb_rootfs.hpp"
#include "images/rootfs/ld_cache.hpp"
#include "base/unique_fd.hpp"
#include "packages/wheels/markers.hpp"
#include "packages/wheels/wheel_install.hpp"

namespace gpuenv::images {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::vector<std::string> k_layer_order = {"base", "cuda", "cudnn", "framework", "user", "metadata"};

Error build_error(const std::string& id, const std::string& what, const std::string& where, const std::string& hint) {
  return make_error(ErrorKind::environment, id, what, where, hint);
}

Error io_error(const std::string& what, const std::string& where) {
  return make_error(ErrorKind::environment, "build.io", what + ": " + std::strerror(errno), where, "check free disk space and permissions");
}

/// A read-only mapping of a cached blob (wheels run to hundreds of megabytes).
class Mapped {
 public:
  static Result<Mapped> open(const std::string& path) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    struct stat st {};
    if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0) return io_error("cannot open", path);
    Mapped m;
    m.m_size = static_cast<std::size_t>(st.st_size);
    if (m.m_size == 0) return m;
    void* p = ::mmap(nullptr, m.m_size, PROT_READ, MAP_PRIVATE, fd.get(), 0);
    if (p == MAP_FAILED) return io_error("cannot map", path);
    m.m_data = static_cast<const char*>(p);
    return m;
  }
  Mapped() = default;
  Mapped(Mapped&& o) noexcept : m_data(std::exchange(o.m_data, nullptr)), m_size(std::exchange(o.m_size, 0)) {}
  Mapped& operator=(Mapped&&) = delete;
  Mapped(const Mapped&) = delete;
  ~Mapped() {
    if (m_data) ::munmap(const_cast<char*>(m_data), m_size);
  }
  [[nodiscard]] std::string_view bytes() const { return {m_data ? m_data : "", m_size}; }

 private:
  const char* m_data = nullptr;
  std::size_t m_size = 0;
};

std::string rfc3339(std::int64_t epoch) {
  const std::time_t t = static_cast<std::time_t>(epoch);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

std::string triplet_of(const std::string& arch) {
  static const std::map<std::string, std::string> k = {{"amd64", "x86_64-linux-gnu"}, {"arm64", "aarch64-linux-gnu"},
                                                       {"ppc64el", "powerpc64le-linux-gnu"}, {"s390x", "s390x-linux-gnu"}};
  auto it = k.find(arch);
  return it == k.end() ? arch + "-linux-gnu" : it->second;
}

std::string oci_arch(const std::string& arch) {
  if (arch == "ppc64el") return "ppc64le";
  return arch;
}

/// What installed a path, and the owner and mode a .deb recorded for it.
struct Owner {
  int package = -1;  // index into the lock's packages; -1: written by gpuenv
  bool recorded = false;
  std::uint32_t mode = 0, uid = 0, gid = 0;
};

/// One path of the finished tree.
struct Node {
  std::string path;  // relative, no leading '/'
  TarEntry::Type type = TarEntry::Type::file;
  std::uint32_t st_mode = 0;
  std::uint64_t size = 0;
  dev_t dev = 0;
  ino_t ino = 0;
  nlink_t nlink = 1;
  std::int64_t ctime_ns = 0;
  std::string link;
};

/// A base image's file as unpacked: a later node with the same inode and change time was not touched.
struct BaseMark {
  ino_t ino = 0;
  std::int64_t ctime_ns = 0;
};

/// Walks the tree; device nodes, FIFOs and sockets are refused unless `skip_special` (a base image's, which
/// stay in its own layers).
Status walk(int dir_fd, const std::string& prefix, std::vector<Node>& out, bool skip_special = false) {
  const int dup_fd = ::dup(dir_fd);
  DIR* d = dup_fd >= 0 ? ::fdopendir(dup_fd) : nullptr;
  if (d == nullptr) {
    if (dup_fd >= 0) ::close(dup_fd);
    return io_error("cannot list", prefix.empty() ? "/" : prefix);
  }
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  for (const auto& n : names) {
    struct stat st {};
    if (::fstatat(dir_fd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return io_error("cannot stat", prefix + n);
    Node node;
    node.path = prefix + n;
    node.st_mode = st.st_mode;
    node.dev = st.st_dev;
    node.ino = st.st_ino;
    node.nlink = st.st_nlink;
    node.ctime_ns = static_cast<std::int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
    if (S_ISDIR(st.st_mode)) {
      node.type = TarEntry::Type::directory;
      out.push_back(node);
      UniqueFd sub(::openat(dir_fd, n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (sub.get() < 0) return io_error("cannot open", node.path);
      if (auto s = walk(sub.get(), node.path + "/", out, skip_special); !s) return s;
    } else if (S_ISLNK(st.st_mode)) {
      node.type = TarEntry::Type::symlink;
      std::string target(static_cast<std::size_t>(st.st_size) + 1, '\0');
      const ssize_t r = ::readlinkat(dir_fd, n.c_str(), target.data(), target.size());
      if (r < 0) return io_error("cannot read link", node.path);
      target.resize(static_cast<std::size_t>(r));
      node.link = target;
      out.push_back(node);
    } else if (S_ISREG(st.st_mode)) {
      node.type = TarEntry::Type::file;
      node.size = static_cast<std::uint64_t>(st.st_size);
      out.push_back(node);
    } else if (!skip_special) {
      return build_error("build.special_file", "the image tree holds a device, FIFO or socket, which gpuenv does not put into layers", node.path,
                         "report the package that installed it");
    }
  }
  return ok_status();
}

std::string purl_escape(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '.' || c == '-' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

std::string spdx_id(std::string_view kind, std::string_view name) {
  std::string out = "SPDXRef-Package-" + std::string(kind) + "-";
  for (char c : name) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-') ? c : '-';
  return out;
}

/// A package a base image brings, from its dpkg status.
struct BasePackage {
  std::string name, version, architecture;
};

/// The installed packages of a dpkg status text (stanzas that do not parse are not listed).
std::vector<BasePackage> base_packages(std::string_view status) {
  std::vector<BasePackage> out;
  const std::string text = packages::installed_packages_text(status);
  auto stanzas = packages::parse_deb822(text, "/var/lib/dpkg/status");
  if (!stanzas) return out;
  for (const auto& st : *stanzas)
    out.push_back({std::string(st.get("Package")), std::string(st.get("Version")), std::string(st.get("Architecture"))});
  return out;
}

std::string sbom_json(const resolver::Lock& lock, const std::string& lock_sha, std::int64_t epoch, const std::string& generator,
                      const std::string& distro, const std::string& base_digest = {}, const std::vector<BasePackage>& base = {}) {
  json doc;
  doc["spdxVersion"] = "SPDX-2.3";
  doc["dataLicense"] = "CC0-1.0";
  doc["SPDXID"] = "SPDXRef-DOCUMENT";
  doc["name"] = lock.spec_name;
  doc["documentNamespace"] = "https://spdx.org/spdxdocs/gpuenv-" + purl_escape(lock.spec_name) + "-" + lock_sha;
  std::string tool = generator;
  std::replace(tool.begin(), tool.end(), ' ', '-');
  doc["creationInfo"] = {{"created", rfc3339(epoch)}, {"creators", json::array({"Tool: " + tool})}};
  json packages = json::array();
  json relationships = json::array();
  packages.push_back({{"SPDXID", "SPDXRef-Image"}, {"name", lock.spec_name}, {"downloadLocation", "NOASSERTION"}, {"filesAnalyzed", false},
                      {"primaryPackagePurpose", "CONTAINER"}});
  relationships.push_back({{"spdxElementId", "SPDXRef-DOCUMENT"}, {"relationshipType", "DESCRIBES"}, {"relatedSpdxElement", "SPDXRef-Image"}});
  std::set<std::string> ids;
  for (const auto& p : lock.packages) {
    std::string id = spdx_id(p.kind, p.name);
    for (int n = 2; !ids.insert(id).second; ++n) id = spdx_id(p.kind, p.name) + "-" + std::to_string(n);
    const std::string purl = p.kind == "deb" ? "pkg:deb/" + distro + "/" + purl_escape(p.name) + "@" + purl_escape(p.version) + "?arch=" + purl_escape(p.architecture)
                                             : "pkg:pypi/" + purl_escape(packages::canonicalize_name(p.name)) + "@" + purl_escape(p.version);
    packages.push_back({{"SPDXID", id},
                        {"name", p.name},
                        {"versionInfo", p.version},
                        {"downloadLocation", p.url},
                        {"filesAnalyzed", false},
                        {"supplier", "NOASSERTION"},
                        {"licenseConcluded", "NOASSERTION"},
                        {"licenseDeclared", "NOASSERTION"},
                        {"copyrightText", "NOASSERTION"},
                        {"checksums", json::array({{{"algorithm", "SHA256"}, {"checksumValue", p.sha256}}})},
                        {"externalRefs", json::array({{{"referenceCategory", "PACKAGE-MANAGER"}, {"referenceType", "purl"}, {"referenceLocator", purl}}})}});
    relationships.push_back({{"spdxElementId", "SPDXRef-Image"}, {"relationshipType", "CONTAINS"}, {"relatedSpdxElement", id}});
  }
  if (!base_digest.empty()) {
    // The base image and what its dpkg status says it holds (their download location is not known).
    packages.push_back({{"SPDXID", "SPDXRef-BaseImage"},
                        {"name", lock.base_image},
                        {"downloadLocation", "NOASSERTION"},
                        {"filesAnalyzed", false},
                        {"primaryPackagePurpose", "CONTAINER"},
                        {"checksums", json::array({{{"algorithm", "SHA256"}, {"checksumValue", base_digest.substr(base_digest.find(':') + 1)}}})}});
    relationships.push_back({{"spdxElementId", "SPDXRef-Image"}, {"relationshipType", "DESCENDANT_OF"}, {"relatedSpdxElement", "SPDXRef-BaseImage"}});
    std::set<std::string> locked;
    for (const auto& p : lock.packages)
      if (p.kind == "deb") locked.insert(p.name);
    for (const auto& b : base) {
      if (locked.count(b.name)) continue;  // replaced by the lock's version
      std::string id = spdx_id("base-deb", b.name);
      for (int n = 2; !ids.insert(id).second; ++n) id = spdx_id("base-deb", b.name) + "-" + std::to_string(n);
      packages.push_back({{"SPDXID", id},
                          {"name", b.name},
                          {"versionInfo", b.version},
                          {"downloadLocation", "NOASSERTION"},
                          {"filesAnalyzed", false},
                          {"supplier", "NOASSERTION"},
                          {"licenseConcluded", "NOASSERTION"},
                          {"licenseDeclared", "NOASSERTION"},
                          {"copyrightText", "NOASSERTION"},
                          {"externalRefs", json::array({{{"referenceCategory", "PACKAGE-MANAGER"},
                                                         {"referenceType", "purl"},
                                                         {"referenceLocator", "pkg:deb/" + distro + "/" + purl_escape(b.name) + "@" + purl_escape(b.version) +
                                                                                  (b.architecture.empty() ? "" : "?arch=" + purl_escape(b.architecture))}}})}});
      relationships.push_back({{"spdxElementId", "SPDXRef-BaseImage"}, {"relationshipType", "CONTAINS"}, {"relatedSpdxElement", id}});
    }
  }
  doc["packages"] = packages;
  doc["relationships"] = relationships;
  return doc.dump(1) + "\n";
}

Status write_file(const std::string& path, const std::string& bytes) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  const std::string tmp = path + ".gpuenv-tmp";
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (fd.get() < 0) return io_error("cannot create", path);
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return io_error("cannot write", path);
    done += static_cast<std::size_t>(w);
  }
  if (::fchmod(fd.get(), 0644) != 0 || ::fsync(fd.get()) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) return io_error("cannot write", path);
  return ok_status();
}

/// The library search a dynamic linker would do for one DT_NEEDED entry, answered from the image tree.
/// A layer's tar stream, from the tree's nodes that belong to it.
class LayerStream {
 public:
  LayerStream(const std::string& root, const std::vector<const Node*>& nodes, const std::unordered_map<std::string, Owner>& owners, std::int64_t mtime)
      : m_root(root), m_nodes(nodes), m_owners(owners), m_mtime(mtime) {}

  /// Writes the whole tar to `sink`; returns the number of entries.
  Result<std::uint64_t> write(const ByteSink& sink) const {
    TarWriter tar(sink, m_mtime);
    std::map<std::pair<dev_t, ino_t>, std::string> first_path;
    std::vector<char> buf(1 << 20);
    std::uint64_t entries = 0;
    for (const Node* n : m_nodes) {
      TarEntry e;
      e.path = n->path;
      e.type = n->type;
      auto it = m_owners.find(n->path);
      if (it != m_owners.end() && it->second.recorded) {
        e.mode = it->second.mode & 07777;
        e.uid = it->second.uid;
        e.gid = it->second.gid;
      } else {
        e.mode = n->type == TarEntry::Type::directory ? 0755 : n->type == TarEntry::Type::symlink ? 0777 : ((n->st_mode & 0111) ? 0755 : 0644);
      }
      if (n->type == TarEntry::Type::symlink) e.link_target = n->link;
      if (n->type == TarEntry::Type::file && n->nlink > 1) {
        auto [at, inserted] = first_path.try_emplace({n->dev, n->ino}, n->path);
        if (!inserted) {
          e.type = TarEntry::Type::hardlink;
          e.link_target = at->second;
        }
      }
      if (e.type == TarEntry::Type::file) e.size = n->size;
      if (auto st = tar.add(e); !st) return std::move(st).error();
      ++entries;
      if (e.type != TarEntry::Type::file) continue;
      UniqueFd fd(::open((m_root + "/" + n->path).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
      if (fd.get() < 0) return io_error("cannot read", n->path);
      std::uint64_t left = n->size;
      while (left > 0) {
        const ssize_t r = ::read(fd.get(), buf.data(), std::min<std::uint64_t>(left, buf.size()));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return io_error("file changed while it was being packed", n->path);
        if (auto st = tar.write_data(buf.data(), static_cast<std::size_t>(r)); !st) return std::move(st).error();
        left -= static_cast<std::uint64_t>(r);
      }
    }
    if (auto st = tar.finish(); !st) return std::move(st).error();
    return entries;
  }

 private:
  const std::string& m_root;
  const std::vector<const Node*>& m_nodes;
  const std::unordered_map<std::string, Owner>& m_owners;
  std::int64_t m_mtime;
};

/// The manifest already in the layout for this build key, if every blob it names is present.
std::optional<BuildResult> previous_build(OciLayout& layout, const std::string& key) {
  std::ifstream in(layout.dir() + "/index.json", std::ios::binary);
  if (!in) return std::nullopt;
  const json index = json::parse(in, nullptr, false);
  if (index.is_discarded() || !index.contains("manifests") || !index["manifests"].is_array()) return std::nullopt;
  for (const auto& m : index["manifests"]) {
    const std::string digest = m.value("digest", "");
    if (digest.size() != 71 || !layout.has_blob(digest.substr(7))) continue;
    std::ifstream mf(layout.blob_path(digest.substr(7)), std::ios::binary);
    const json manifest = json::parse(mf, nullptr, false);
    if (manifest.is_discarded() || !manifest.is_object()) continue;
    if (!manifest.contains("annotations") || manifest["annotations"].value("dev.gpuenv.build.key", "") != key) continue;
    BuildResult r;
    r.unchanged = true;
    r.manifest = Descriptor{m.value("mediaType", ""), digest, m.value("size", std::uint64_t{0}), {}};
    const auto& c = manifest["config"];
    r.config = Descriptor{c.value("mediaType", ""), c.value("digest", ""), c.value("size", std::uint64_t{0}), {}};
    if (r.config.digest.size() != 71 || !layout.has_blob(r.config.digest.substr(7))) continue;
    std::ifstream cf(layout.blob_path(r.config.digest.substr(7)), std::ios::binary);
    const json config = json::parse(cf, nullptr, false);
    if (config.is_discarded()) continue;
    bool complete = true;
    std::size_t i = 0;
    for (const auto& l : manifest.value("layers", json::array())) {
      BuiltLayer bl;
      bl.blob = Descriptor{l.value("mediaType", ""), l.value("digest", ""), l.value("size", std::uint64_t{0}), {}};
      if (l.contains("annotations")) bl.name = l["annotations"].value("dev.gpuenv.layer", "");
      const auto& ids = config["rootfs"]["diff_ids"];
      if (i < ids.size()) bl.diff_id = ids[i].get<std::string>();
      bl.reused = true;
      if (bl.blob.digest.size() != 71 || !layout.has_blob(bl.blob.digest.substr(7))) complete = false;
      r.layers.push_back(bl);
      ++i;
    }
    if (complete) return r;
  }
  return std::nullopt;
}

}  // namespace

bool is_driver_library(std::string_view so) {
  for (std::string_view p : {"libcuda.so", "libnvidia-", "libnvcuvid.so", "libcudadebugger.so", "libnvoptix.so", "libnvidia-ml.so", "libOpenCL.so"})
    if (starts_with(so, p)) return true;
  return false;
}

std::string layer_of(const resolver::LockedPackage& p, const resolver::Lock& lock) {
  const std::string name = p.kind == "wheel" ? packages::canonicalize_name(p.name) : p.name;
  auto requested = [&](const std::vector<std::string>& list) {
    for (const auto& r : list) {
      // "numpy<2.2", "name=version", "name[extra]": the name is what precedes the first operator.
      const auto end = r.find_first_of("<>=!~;[ (@");
      const std::string n = r.substr(0, end);
      if ((p.kind == "wheel" ? packages::canonicalize_name(n) : n) == name) return true;
    }
    return false;
  };
  if (p.kind == "deb") {
    if (starts_with(name, "libcudnn") || starts_with(name, "cudnn")) return "cudnn";
    if (starts_with(name, "cuda-") || starts_with(name, "libcublas") || starts_with(name, "libcufft") || starts_with(name, "libcurand") ||
        starts_with(name, "libcusolver") || starts_with(name, "libcusparse") || starts_with(name, "libnpp") || starts_with(name, "libnvjpeg") ||
        starts_with(name, "libnccl") || starts_with(name, "libnvjitlink") || starts_with(name, "libcufile") || starts_with(name, "libnvrtc"))
      return "cuda";
    return requested(lock.requested_apt) ? "user" : "base";
  }
  if (starts_with(name, "nvidia-cudnn")) return "cudnn";
  if (name == "cuda-toolkit") return "cuda";  // NVIDIA's metapackage: pins the component wheels, holds no libraries
  if (starts_with(name, "nvidia-")) return "cuda";
  if (requested(lock.requested_pip)) return "user";
  return "framework";
}

Result<BuildResult> build_image(const BuildRequest& rq) {
  const resolver::Lock& lock = *rq.lock;
  auto step = [&](const std::string& s) {
    if (rq.on_step) rq.on_step(s);
  };
  const std::string lock_sha = sha256_hex(rq.lock_text);
  // Everything the image's bytes depend on; the tag is not among them (it lives in index.json only).
  const std::string build_key = sha256_hex(rq.lock_text + '\0' + rq.generator + '\0' + std::to_string(rq.source_date_epoch) + '\0' + rq.architecture +
                                           '\0' + std::to_string(rq.gzip_level) + '\0' + (rq.compression == "gzip" ? std::string() : rq.compression + std::to_string(rq.zstd_level) + '\0') + [&] {
                                             std::string s;
                                             for (const auto& a : rq.allow_missing) s += a + ",";
                                             return s;
                                           }());
  auto layout = OciLayout::open(rq.output_dir);
  if (!layout) return std::move(layout).error();
  if (auto prev = previous_build(*layout, build_key)) {
    prev->lock_sha256 = lock_sha;
    Descriptor entry = prev->manifest;
    if (!rq.tag.empty()) entry.annotations["org.opencontainers.image.ref.name"] = rq.tag;
    if (auto st = layout->write_index({entry}); !st) return std::move(st).error();  // the tag may have changed
    return *prev;
  }

  // 1. Packages, from the cache (fetched and verified first when missing).
  std::vector<CacheRequest> wanted;
  for (const auto& p : lock.packages) wanted.push_back({p.url, p.sha256, p.size});
  step("fetching " + std::to_string(wanted.size()) + " packages");
  auto blobs = fetch_into_cache(rq.fetcher, *rq.cache, wanted);
  for (std::size_t i = 0; i < blobs.size(); ++i) {
    if (!blobs[i]) {
      Error e = blobs[i].error();
      e.while_("getting " + lock.packages[i].name + " " + lock.packages[i].version);
      return e;
    }
  }

  // 2. GPU rule: one source of CUDA libraries.
  std::vector<std::string> cuda_debs, cuda_wheels;
  for (const auto& p : lock.packages) {
    const std::string layer = layer_of(p, lock);
    if (layer == "cuda" || layer == "cudnn") (p.kind == "deb" ? cuda_debs : cuda_wheels).push_back(p.name);
  }
  if (!cuda_debs.empty() && !cuda_wheels.empty()) {
    return build_error("build.cuda_twice", "the lock brings CUDA libraries both as .debs (" + cuda_debs.front() + ", ...) and as wheels (" + cuda_wheels.front() + ", ...)",
                       "", "use one source: drop the CUDA apt packages when the framework's wheels bring CUDA, or pick a framework variant without bundled CUDA");
  }

  // 3. The root filesystem.
  const std::string root = rq.work_dir + "/rootfs";
  std::error_code ec;
  fs::remove_all(root, ec);
  fs::create_directories(root, ec);
  if (ec) return io_error("cannot create the root filesystem directory", root);
  // 3a. A base image's layers, as the bottom of the tree; what they hold is remembered so that only what the
  //     build adds or changes goes into gpuenv's layers.
  std::optional<LayoutImage> base_image;
  std::unordered_map<std::string, BaseMark> base_marks;
  std::unordered_map<std::string, Owner> base_owners;
  std::vector<BasePackage> base_debs;
  if (!rq.base_layout_dir.empty()) {
    step("unpacking the base image");
    auto image = read_layout_image(rq.base_layout_dir, rq.base_manifest_digest);
    if (!image) return std::move(image).error();
    std::vector<ExtractedEntry> base_entries;
    if (auto st = extract_image_layers(rq.base_layout_dir, *image, root, &base_entries); !st) {
      Error e = st.error();
      e.while_("unpacking the base image " + rq.base_manifest_digest);
      return e;
    }
    std::vector<Node> base_nodes;
    UniqueFd root_fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (root_fd.get() < 0) return io_error("cannot open", root);
    if (auto st = walk(root_fd.get(), "", base_nodes, true); !st) return std::move(st).error();
    for (const auto& n : base_nodes) base_marks[n.path] = BaseMark{n.ino, n.ctime_ns};
    // Mode and owner as the base's layers give them (the tree itself belongs to whoever runs the build).
    for (const auto& e : base_entries) base_owners[e.path] = Owner{-1, true, e.mode, e.uid, e.gid};
    base_image = std::move(*image);
    std::ifstream status_in(root + "/var/lib/dpkg/status", std::ios::binary);
    base_debs = base_packages(std::string(std::istreambuf_iterator<char>(status_in), {}));
  }
  auto from_base_unchanged = [&](const Node& n) {
    auto it = base_marks.find(n.path);
    return it != base_marks.end() && it->second.ino == n.ino && it->second.ctime_ns == n.ctime_ns;
  };

  std::unordered_map<std::string, Owner> owners = std::move(base_owners);
  std::vector<InstalledDeb> debs;
  ExtractOptions xo;
  xo.keep = [](std::string_view p) { return keep_in_minimal_image(p); };
  std::size_t n_debs = 0, n_wheels = 0;
  for (const auto& p : lock.packages) (p.kind == "deb" ? n_debs : n_wheels)++;
  step("unpacking " + std::to_string(n_debs) + " .debs");
  for (std::size_t i = 0; i < lock.packages.size(); ++i) {
    const auto& p = lock.packages[i];
    if (p.kind != "deb") continue;
    auto m = Mapped::open(blobs[i]->path);
    if (!m) return std::move(m).error();
    auto installed = install_deb(m->bytes(), p.name + "_" + p.version + ".deb", root, xo);
    if (!installed) return std::move(installed).error();
    for (const auto& e : installed->entries) {
      Owner o;
      o.package = static_cast<int>(i);
      o.recorded = true;
      o.mode = e.mode;
      o.uid = e.uid;
      o.gid = e.gid;
      owners[e.path] = o;
    }
    debs.push_back(std::move(*installed));
  }
  if (!debs.empty()) {
    if (auto st = write_dpkg_database(root, debs); !st) return std::move(st).error();
    if (auto st = apply_base_passwd(root); !st) return std::move(st).error();
  }
  debs.clear();
  std::vector<std::string> wheel_lib_dirs;
  if (n_wheels > 0) {
    if (lock.python.empty()) {
      return build_error("build.no_python", "the lock has wheels but no Python version", "", "re-create the lock from a spec that sets python");
    }
    const std::string py = "python" + lock.python;
    packages::InstallScheme scheme;
    scheme.purelib = "usr/local/lib/" + py + "/dist-packages";
    scheme.platlib = scheme.purelib;
    scheme.scripts = "usr/local/bin";
    scheme.data = "usr/local";
    scheme.interpreter = "/usr/bin/" + py;
    step("installing " + std::to_string(n_wheels) + " wheels");
    std::set<std::string> lib_dirs;
    for (std::size_t i = 0; i < lock.packages.size(); ++i) {
      const auto& p = lock.packages[i];
      if (p.kind != "wheel") continue;
      auto m = Mapped::open(blobs[i]->path);
      if (!m) return std::move(m).error();
      const std::string filename = p.url.substr(p.url.rfind('/') + 1);
      packages::InstallScheme s = scheme;
      s.headers = "usr/local/include/" + py + "/" + p.name;
      packages::WheelInstallOptions wo;
      wo.requested = layer_of(p, lock) == "user";
      auto installed = packages::install_wheel(m->bytes(), filename.substr(0, filename.find_first_of("?#")), root, s, wo);
      if (!installed) {
        Error e = std::move(installed).error();
        e.while_("installing " + p.name + " " + p.version);
        return e;
      }
      for (const auto& f : installed->files) {
        owners[f] = Owner{static_cast<int>(i), false, 0, 0, 0};
        // NVIDIA's wheels keep their libraries in site-packages/nvidia/<part>/lib.
        const fs::path fp(f);
        const std::string name = fp.filename().string();
        if (starts_with(fp.parent_path().string(), scheme.purelib + "/nvidia/") && fp.parent_path().filename() == "lib" &&
            name.find(".so") != std::string::npos)
          lib_dirs.insert("/" + fp.parent_path().string());
      }
    }
    wheel_lib_dirs.assign(lib_dirs.begin(), lib_dirs.end());
  }

  // 4. Loader configuration and the dynamic linker's cache.
  if (!wheel_lib_dirs.empty()) {
    std::string conf = "# Written by gpuenv: the CUDA libraries of NVIDIA's wheels.\n";
    for (const auto& d : wheel_lib_dirs) conf += d + "\n";
    if (auto st = write_file(root + "/etc/ld.so.conf.d/000-gpuenv-cuda-wheels.conf", conf); !st) return std::move(st).error();
  }
  LdCacheOptions lo;
  lo.multiarch_triplet = triplet_of(rq.architecture);
  lo.generator = "gpuenv";
  LdCache ld;
  if (fs::exists(root + "/etc", ec) || !lock.packages.empty()) {
    auto cache = write_ld_cache(root, lo);
    if (!cache) return std::move(cache).error();
    ld = std::move(*cache);
  }

  // 5. gpuenv's own files: the lock and the SBOM.
  const std::string distro = lock.base.substr(0, lock.base.find(':'));
  const std::string sbom = sbom_json(lock, lock_sha, rq.source_date_epoch, rq.generator, distro, base_image ? base_image->manifest_digest : std::string(), base_debs);
  if (auto st = write_file(root + "/usr/share/gpuenv/gpuenv.lock", rq.lock_text); !st) return std::move(st).error();
  if (auto st = write_file(root + "/usr/share/gpuenv/sbom.spdx.json", sbom); !st) return std::move(st).error();

  // 6. The finished tree: driver libraries and DT_NEEDED.
  step("checking the image tree");
  std::vector<Node> nodes;
  {
    UniqueFd root_fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (root_fd.get() < 0) return io_error("cannot open", root);
    if (auto st = walk(root_fd.get(), "", nodes, base_image.has_value()); !st) return std::move(st).error();
  }
  // A base image's untouched files stay in its own layers and are not checked: its maker answers for them.
  if (base_image) nodes.erase(std::remove_if(nodes.begin(), nodes.end(), from_base_unchanged), nodes.end());
  std::vector<std::pair<std::string, std::string>> cached;
  for (const auto& e : ld.entries) cached.emplace_back(e.key, e.path);
  const std::string& tri = lo.multiarch_triplet;
  LoaderModel loader(root, std::move(cached), {"/lib/" + tri, "/usr/lib/" + tri, "/lib", "/usr/lib"});
  std::vector<std::string> objects;
  for (const auto& n : nodes) {
    if (n.type != TarEntry::Type::file) continue;
    const std::string base = fs::path(n.path).filename().string();
    if (is_driver_library(base) && n.path.find("/stubs/") == std::string::npos) {
      return build_error("build.driver_in_image", "the image would contain the driver library /" + n.path, "",
                         "the host's driver library is mounted at run time; remove the package that ships it (" +
                             (owners.count(n.path) && owners[n.path].package >= 0 ? lock.packages[static_cast<std::size_t>(owners[n.path].package)].name : std::string("unknown")) + ")");
    }
    if ((n.st_mode & 0111) == 0 && base.find(".so") == std::string::npos) continue;  // neither executable nor a library
    objects.push_back("/" + n.path);
  }
  const auto loadable = loader.unresolved(objects, [&](const std::string& name) {
    return is_driver_library(name) || std::find(rq.allow_missing.begin(), rq.allow_missing.end(), name) != rq.allow_missing.end();
  });
  const auto& unresolved = loadable.required;
  std::vector<std::string> plugin_notes;
  for (const auto& [lib, users] : loadable.optional)
    plugin_notes.push_back("optional plugin" + std::string(users.size() > 1 ? "s " : " ") + users.front() +
                           (users.size() > 1 ? " and " + std::to_string(users.size() - 1) + " more" : "") + " cannot load here: " + lib +
                           " is not in the image (a program that dlopens it falls back or fails then; add the package that provides " + lib +
                           " if the fleet uses it)");
  if (!unresolved.empty()) {
    std::string what;
    std::size_t shown = 0;
    for (const auto& [lib, users] : unresolved) {
      if (shown++ == 5) {
        what += "; and " + std::to_string(unresolved.size() - 5) + " more";
        break;
      }
      what += (what.empty() ? "" : "; ") + lib + " (needed by " + users.front() + (users.size() > 1 ? " and " + std::to_string(users.size() - 1) + " more" : "") + ")";
    }
    return build_error("build.unresolved_library", "shared libraries needed inside the image are missing: " + what, "",
                       "add the package that provides them (spec packages.apt or packages.pip), or accept a library that is "
                       "loaded only optionally with --allow-missing-lib NAME");
  }

  // 7. Layers.
  std::map<std::string, std::vector<const Node*>> by_layer;
  std::map<std::string, std::set<std::string>> layer_packages;
  std::map<std::string, std::map<int, std::uint64_t>> package_bytes;  // layer -> package -> bytes of its files
  {
    std::map<std::string, std::set<std::string>> dirs_needed;  // layer -> ancestor directories
    std::map<std::string, std::string> node_layer;
    for (const auto& n : nodes) {
      auto it = owners.find(n.path);
      std::string layer = "metadata";
      if (it != owners.end() && it->second.package >= 0) {
        const auto& p = lock.packages[static_cast<std::size_t>(it->second.package)];
        layer = layer_of(p, lock);
        layer_packages[layer].insert(p.name + " " + p.version);
        package_bytes[layer][it->second.package] += n.type == TarEntry::Type::file ? n.size : 0;
      }
      if (n.type == TarEntry::Type::directory && (it == owners.end() || it->second.package < 0)) continue;  // only as someone's parent
      node_layer[n.path] = layer;
      for (auto slash = n.path.rfind('/'); slash != std::string::npos && slash > 0; slash = n.path.rfind('/', slash - 1))
        dirs_needed[layer].insert(n.path.substr(0, slash));
    }
    for (const auto& n : nodes) {
      for (const auto& layer : k_layer_order) {
        auto nl = node_layer.find(n.path);
        const bool own = nl != node_layer.end() && nl->second == layer;
        if (own || (n.type == TarEntry::Type::directory && dirs_needed[layer].count(n.path))) by_layer[layer].push_back(&n);
      }
    }
  }
  BuildResult result;
  result.lock_sha256 = lock_sha;
  result.notes = std::move(plugin_notes);
  json diff_ids = json::array();
  json history = json::array();
  json manifest_layers = json::array();
  json base_config = json::object();
  if (base_image) {
    // The base image's layers, as they are (their blobs copied into this layout), then gpuenv's.
    step("copying the base image's layers");
    const json base_manifest = json::parse(base_image->manifest_text, nullptr, false);
    base_config = json::parse(base_image->config_text, nullptr, false);
    if (!base_config.is_object() || !base_config.contains("rootfs") || !base_config["rootfs"].is_object() ||
        !base_config["rootfs"].contains("diff_ids") || !base_config["rootfs"]["diff_ids"].is_array() ||
        base_config["rootfs"]["diff_ids"].size() != base_manifest["layers"].size())
      return build_error("build.bad_base", "the base image's config does not list one diff_id per layer", rq.base_manifest_digest,
                         "use another base image, or rebuild it");
    std::size_t i = 0;
    for (const auto& l : base_manifest["layers"]) {
      const std::string digest = l.value("digest", "");
      std::string type = l.value("mediaType", "");
      // Docker's layer types hold the same bytes as OCI's.
      if (type == "application/vnd.docker.image.rootfs.diff.tar.gzip") type = media_type::k_layer_gzip;
      else if (type == "application/vnd.docker.image.rootfs.diff.tar") type = "application/vnd.oci.image.layer.v1.tar";
      const std::uint64_t size = l.value("size", std::uint64_t{0});
      if (digest.size() != 71 || digest.rfind("sha256:", 0) != 0) return build_error("build.bad_base", "a base layer has no sha256 digest", rq.base_manifest_digest, "use another base image");
      if (!layout->has_blob(digest.substr(7))) {
        const std::string tmp = layout->temp_path("base-layer");
        std::error_code cec;
        fs::copy_file(rq.base_layout_dir + "/blobs/sha256/" + digest.substr(7), tmp, fs::copy_options::overwrite_existing, cec);
        UniqueFd fd(::open(tmp.c_str(), O_RDONLY | O_CLOEXEC));
        if (cec || fd.get() < 0 || ::fsync(fd.get()) != 0) {
          ::unlink(tmp.c_str());
          return io_error("cannot copy a base layer", tmp);
        }
        if (auto d = layout->adopt_file(tmp, digest.substr(7), size, type); !d) return std::move(d).error();
      }
      BuiltLayer bl;
      bl.name = "base-image";
      bl.blob = Descriptor{type, digest, size, {}};
      bl.diff_id = base_config["rootfs"]["diff_ids"][i++].get<std::string>();
      bl.reused = true;
      diff_ids.push_back(bl.diff_id);
      json layer = {{"mediaType", type}, {"digest", digest}, {"size", size}};
      layer["annotations"] = {{"dev.gpuenv.layer", "base-image"}};
      manifest_layers.push_back(layer);
      result.layers.push_back(std::move(bl));
    }
    if (base_config.contains("history") && base_config["history"].is_array()) history = base_config["history"];
  }
  for (const auto& name : k_layer_order) {
    auto it = by_layer.find(name);
    if (it == by_layer.end() || it->second.empty()) continue;
    step("writing layer " + name);
    LayerStream stream(root, it->second, owners, rq.source_date_epoch);
    // Pass 1: the uncompressed digest, to reuse a blob compressed by an earlier build.
    Sha256 diff;
    std::uint64_t raw_size = 0;
    auto entries = stream.write([&](const char* d, std::size_t n) {
      diff.update(d, n);
      raw_size += n;
      return ok_status();
    });
    if (!entries) return std::move(entries).error();
    BuiltLayer bl;
    bl.name = name;
    bl.diff_id = "sha256:" + diff.finish();
    bl.uncompressed_size = raw_size;
    bl.entries = *entries;
    bl.packages.assign(layer_packages[name].begin(), layer_packages[name].end());
    const bool zstd = rq.compression == "zstd";
    ZstdOptions zo;
    zo.level = rq.zstd_level;
    zo.threads = rq.threads;
    zo.content_size = raw_size;
    const char* layer_type = zstd ? media_type::k_layer_zstd : media_type::k_layer_gzip;
    const std::string compressor = zstd ? zstd_implementation(zo) : "gzip " + std::to_string(rq.gzip_level) + " " + deflate_implementation();
    const std::string memo = rq.layer_memo_dir.empty() ? std::string() : rq.layer_memo_dir + "/" + bl.diff_id.substr(7) + "-" + sha256_hex(compressor).substr(0, 16);
    if (!memo.empty()) {
      std::ifstream in(memo);
      std::string digest;
      std::uint64_t size = 0;
      if (in >> digest >> size && digest.size() == 71 && layout->has_blob(digest.substr(7))) {
        bl.blob = Descriptor{layer_type, digest, size, {}};
        bl.reused = true;
      }
    }
    if (!bl.reused) {
      // Pass 2: tar, gzip, digest, into a temporary blob.
      const std::string tmp = layout->temp_path("layer-" + name);
      UniqueFd out(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
      if (out.get() < 0) return io_error("cannot create", tmp);
      Sha256 digest;
      std::uint64_t zsize = 0;
      GzipOptions go;
      go.level = rq.gzip_level;
      go.threads = rq.threads;
      auto sink = [&](const char* d, std::size_t n) -> Status {
        digest.update(d, n);
        zsize += n;
        std::size_t done = 0;
        while (done < n) {
          const ssize_t w = ::write(out.get(), d + done, n - done);
          if (w < 0 && errno == EINTR) continue;
          if (w < 0) return io_error("cannot write a layer", tmp);
          done += static_cast<std::size_t>(w);
        }
        return ok_status();
      };
      std::optional<ParallelGzip> gz;
      std::optional<ParallelZstd> zs;
      if (zstd) zs.emplace(sink, zo);
      else gz.emplace(sink, go);
      Sha256 check;
      auto again = stream.write([&](const char* d, std::size_t n) {
        check.update(d, n);
        return zstd ? zs->write(d, n) : gz->write(d, n);
      });
      if (!again) {
        ::unlink(tmp.c_str());
        return std::move(again).error();
      }
      Status fin = ok_status();
      if (zstd) {
        if (auto f = zs->finish(); !f) fin = std::move(f).error();
      } else {
        if (auto f = gz->finish(); !f) fin = std::move(f).error();
      }
      if (!fin) {
        ::unlink(tmp.c_str());
        return std::move(fin).error();
      }
      if ("sha256:" + check.finish() != bl.diff_id) {
        ::unlink(tmp.c_str());
        return build_error("build.unstable_tree", "layer " + name + " changed between two reads", root, "make sure nothing else writes into the build directory");
      }
      if (::fsync(out.get()) != 0) {
        ::unlink(tmp.c_str());
        return io_error("cannot write a layer", tmp);
      }
      auto d = layout->adopt_file(tmp, digest.finish(), zsize, layer_type);
      if (!d) return std::move(d).error();
      bl.blob = *d;
      if (!memo.empty()) (void)write_file(memo, bl.blob.digest + " " + std::to_string(bl.blob.size) + "\n");
    }
    diff_ids.push_back(bl.diff_id);
    history.push_back({{"created", rfc3339(rq.source_date_epoch)},
                       {"created_by", "gpuenv build: " + name + " layer (" + std::to_string(bl.packages.size()) + " packages)"}});
    json layer = {{"mediaType", bl.blob.media_type}, {"digest", bl.blob.digest}, {"size", bl.blob.size}};
    // What the layer holds, for `gpuenv inspect`: [name, version, kind, bytes] per package.
    json held = json::array();
    for (const auto& [index, bytes] : package_bytes[name]) {
      const auto& p = lock.packages[static_cast<std::size_t>(index)];
      held.push_back(json::array({p.name, p.version, p.kind, bytes}));
    }
    layer["annotations"] = {{"dev.gpuenv.layer", name}, {"dev.gpuenv.packages", held.dump()}};
    manifest_layers.push_back(layer);
    result.layers.push_back(std::move(bl));
  }
  if (result.layers.size() > 127) return build_error("build.too_many_layers", "more than 127 layers", "", "");

  // 8. Config, manifest, index.
  json labels = {{"org.opencontainers.image.title", lock.spec_name},
                 {"org.opencontainers.image.created", rfc3339(rq.source_date_epoch)},
                 {"dev.gpuenv.lock.sha256", lock_sha},
                 {"dev.gpuenv.driver.min", lock.driver_min}};
  std::string archs;
  for (const auto& a : lock.archs) archs += (archs.empty() ? "" : ",") + a;
  if (!archs.empty()) labels["dev.gpuenv.cuda.archs"] = archs;
  if (!lock.cuda.empty()) labels["dev.gpuenv.cuda.version"] = lock.cuda;
  if (!lock.cudnn.empty()) labels["dev.gpuenv.cudnn.version"] = lock.cudnn;
  if (!lock.python.empty()) labels["dev.gpuenv.python.version"] = lock.python;
  for (const auto& f : lock.frameworks) labels["dev.gpuenv.framework." + f.name] = f.version + (f.variant.empty() ? "" : "+" + f.variant);
  json env = json::array({"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "NVIDIA_VISIBLE_DEVICES=all",
                          "NVIDIA_DRIVER_CAPABILITIES=compute,utility"});
  if (!lock.cuda.empty()) {
    const auto second_dot = lock.cuda.find('.', lock.cuda.find('.') + 1);
    env.push_back("NVIDIA_REQUIRE_CUDA=cuda>=" + lock.cuda.substr(0, second_dot));
  }
  if (base_image) {
    // The base's own variables and labels stay unless gpuenv sets the same name.
    const json bc = base_config.value("config", json::object());
    std::set<std::string> ours;
    for (const auto& e : env) ours.insert(e.get<std::string>().substr(0, e.get<std::string>().find('=')));
    json merged = json::array();
    if (bc.is_object() && bc.contains("Env") && bc["Env"].is_array())
      for (const auto& e : bc["Env"])
        if (e.is_string() && !ours.count(e.get<std::string>().substr(0, e.get<std::string>().find('=')))) merged.push_back(e);
    for (const auto& e : env) merged.push_back(e);
    env = merged;
    if (bc.is_object() && bc.contains("Labels") && bc["Labels"].is_object())
      for (const auto& [k, v] : bc["Labels"].items())
        if (!labels.contains(k) && v.is_string()) labels[k] = v;
    labels["org.opencontainers.image.base.digest"] = rq.base_manifest_digest;
    labels["dev.gpuenv.base.image"] = lock.base_image;
  }
  json config = {{"created", rfc3339(rq.source_date_epoch)},
                 {"architecture", oci_arch(rq.architecture)},
                 {"os", "linux"},
                 {"config", {{"Env", env}, {"Labels", labels}, {"Cmd", json::array({lock.python.empty() ? "/bin/sh" : "/usr/bin/python" + lock.python})}}},
                 {"rootfs", {{"type", "layers"}, {"diff_ids", diff_ids}}},
                 {"history", history}};
  auto config_d = layout->put_bytes(config.dump(), media_type::k_config);
  if (!config_d) return std::move(config_d).error();
  result.config = *config_d;
  json manifest = {{"schemaVersion", 2},
                   {"mediaType", media_type::k_manifest},
                   {"config", {{"mediaType", config_d->media_type}, {"digest", config_d->digest}, {"size", config_d->size}}},
                   {"layers", manifest_layers},
                   {"annotations", {{"org.opencontainers.image.created", rfc3339(rq.source_date_epoch)}, {"dev.gpuenv.build.key", build_key}}}};
  auto manifest_d = layout->put_bytes(manifest.dump(), media_type::k_manifest);
  if (!manifest_d) return std::move(manifest_d).error();
  result.manifest = *manifest_d;
  Descriptor entry = *manifest_d;
  if (!rq.tag.empty()) entry.annotations["org.opencontainers.image.ref.name"] = rq.tag;
  if (auto st = write_file(layout->dir() + "/sbom.spdx.json", sbom); !st) return std::move(st).error();
  if (auto st = layout->write_index({entry}); !st) return std::move(st).error();
  (void)layout->collect_garbage();
  return result;
}

}  // namespace gpuenv::images
