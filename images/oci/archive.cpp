#include "images/oci/archive.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include <archive.h>
#include <archive_entry.h>

#include <memory>

#include "images/oci/tar_writer.hpp"
#include "base/file_io.hpp"
#include "base/unique_fd.hpp"

namespace gpuenv::images {
namespace {

constexpr IoArea k_archive_io{"oci.io", "check free disk space and permissions"};

Result<std::string> read_small(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorKind::environment, "oci.bad_index", "cannot read", path, "rebuild the image");
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

Status write_image_archive(const OciLayout& layout, const Descriptor& manifest, ArchiveFormat format, const std::string& repo_tag,
                           const std::string& output) {
  const std::string manifest_path = layout.blob_path(manifest.digest);
  auto text = read_small(manifest_path);
  if (!text) return std::move(text).error();
  const auto doc = nlohmann::json::parse(*text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("config") || !doc.contains("layers") || !doc["layers"].is_array())
    return make_error(ErrorKind::environment, "oci.bad_index", "the manifest is not an image manifest", manifest_path, "rebuild the image");
  std::set<Digest> blobs = {manifest.digest};
  GPUENV_TRY(config, parse_descriptor(doc["config"], manifest_path));
  blobs.insert(config.digest);
  std::vector<Digest> layers;
  for (const auto& l : doc["layers"]) {
    GPUENV_TRY(layer, parse_descriptor(l, manifest_path));
    layers.push_back(layer.digest);
    blobs.insert(layer.digest);
  }
  auto index = read_small(layout.dir() + "/index.json");
  if (!index) return std::move(index).error();

  GPUENV_TRY(out, AtomicFile::create(output));  // nothing is left behind unless it is committed
  TarWriter tar(
      [&](const char* d, std::size_t n) -> Status { return out.write(std::string_view(d, n)); },
      0);
  auto add_bytes = [&](const std::string& name, const std::string& bytes) -> Status {
    if (auto st = tar.add({name, TarEntry::Type::file, 0644, 0, 0, bytes.size(), ""}); !st) return st;
    return tar.write_data(bytes.data(), bytes.size());
  };
  auto add_file = [&](const std::string& name, const std::string& path) -> Status {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    struct stat st {};
    if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0) return io_error(k_archive_io, "cannot read", path);
    if (auto s = tar.add({name, TarEntry::Type::file, 0644, 0, 0, static_cast<std::uint64_t>(st.st_size), ""}); !s) return s;
    std::vector<char> buf(1 << 20);
    std::uint64_t left = static_cast<std::uint64_t>(st.st_size);
    while (left > 0) {
      const ssize_t r = ::read(fd.get(), buf.data(), std::min<std::uint64_t>(left, buf.size()));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return io_error(k_archive_io, "blob changed while it was being archived", path);
      if (auto s = tar.write_data(buf.data(), static_cast<std::size_t>(r)); !s) return s;
      left -= static_cast<std::uint64_t>(r);
    }
    return ok_status();
  };
  // Entries in byte order: blobs/, blobs/sha256/, blobs/sha256/<hex>..., index.json, manifest.json, oci-layout.
  if (auto st = tar.add({"blobs", TarEntry::Type::directory, 0755, 0, 0, 0, ""}); !st) return st;
  if (auto st = tar.add({"blobs/sha256", TarEntry::Type::directory, 0755, 0, 0, 0, ""}); !st) return st;
  for (const auto& b : blobs)
    if (auto st = add_file("blobs/sha256/" + b.hex(), layout.blob_path(b)); !st) return st;
  if (auto st = add_bytes("index.json", *index); !st) return st;
  if (format == ArchiveFormat::docker) {
    nlohmann::json entry = {{"Config", "blobs/sha256/" + config.digest.hex()}, {"RepoTags", nlohmann::json::array()}, {"Layers", nlohmann::json::array()}};
    if (!repo_tag.empty()) entry["RepoTags"].push_back(repo_tag);
    for (const auto& l : layers) entry["Layers"].push_back("blobs/sha256/" + l.hex());
    if (auto st = add_bytes("manifest.json", nlohmann::json::array({entry}).dump()); !st) return st;
  }
  if (auto st = add_bytes("oci-layout", "{\"imageLayoutVersion\":\"1.0.0\"}"); !st) return st;
  if (auto st = tar.finish(); !st) return st;
  return out.commit();
}

Status rewrite_archive(const std::string& path, const std::string& index, const std::map<Digest, std::string>& blobs) {
  using Handle = std::unique_ptr<archive, decltype(&archive_read_free)>;
  Handle in(archive_read_new(), &archive_read_free);
  archive_read_support_filter_all(in.get());
  archive_read_support_format_tar(in.get());
  auto bad = [&](const std::string& what) {
    const char* e = archive_error_string(in.get());
    return make_error(ErrorKind::environment, "oci.bad_archive", what + " (" + (e ? e : "unreadable") + ")", path, "the archive is damaged; write it again");
  };
  if (archive_read_open_filename(in.get(), path.c_str(), 1 << 16) != ARCHIVE_OK) return bad("cannot read the archive");
  GPUENV_TRY(out, AtomicFile::create(path));  // the old archive stays whole until the new one is committed
  TarWriter tar([&](const char* d, std::size_t n) -> Status { return out.write(std::string_view(d, n)); }, 0);
  std::set<std::string> present;
  std::vector<char> buf(1 << 20);
  while (true) {
    archive_entry* e = nullptr;
    const int r = archive_read_next_header(in.get(), &e);
    if (r == ARCHIVE_EOF) break;
    if (r < ARCHIVE_WARN) return bad("cannot read a member");
    std::string name = archive_entry_pathname(e) ? archive_entry_pathname(e) : "";
    while (name.rfind("./", 0) == 0) name.erase(0, 2);
    while (!name.empty() && name.back() == '/') name.pop_back();
    if (name.empty() || name == "index.json") continue;
    TarEntry t;
    t.path = name;
    t.mode = archive_entry_perm(e) & 07777;
    const auto type = archive_entry_filetype(e);
    if (type == AE_IFDIR) {
      t.type = TarEntry::Type::directory;
    } else if (type == AE_IFREG) {
      t.size = static_cast<std::uint64_t>(archive_entry_size(e));
    } else {
      continue;  // an image archive holds files and directories only
    }
    present.insert(name);
    GPUENV_CHECK(tar.add(t));
    if (t.type != TarEntry::Type::file) continue;
    std::uint64_t copied = 0;
    while (true) {
      const la_ssize_t n = archive_read_data(in.get(), buf.data(), buf.size());
      if (n < 0) return bad("cannot read " + name);
      if (n == 0) break;
      GPUENV_CHECK(tar.write_data(buf.data(), static_cast<std::size_t>(n)));
      copied += static_cast<std::uint64_t>(n);
    }
    if (copied != t.size) return bad(name + " breaks off");
  }
  for (const auto& [digest, bytes] : blobs) {
    const std::string name = "blobs/sha256/" + digest.hex();
    if (present.count(name)) continue;
    GPUENV_CHECK(tar.add({name, TarEntry::Type::file, 0644, 0, 0, bytes.size(), ""}));
    GPUENV_CHECK(tar.write_data(bytes.data(), bytes.size()));
  }
  GPUENV_CHECK(tar.add({"index.json", TarEntry::Type::file, 0644, 0, 0, index.size(), ""}));
  GPUENV_CHECK(tar.write_data(index.data(), index.size()));
  GPUENV_CHECK(tar.finish());
  return out.commit();
}

}  // namespace gpuenv::images
