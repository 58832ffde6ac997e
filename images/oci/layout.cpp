#include "images/oci/layout.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "base/digest.hpp"
#include "base/file_io.hpp"
#include "base/json_field.hpp"

namespace gpuenv::images {
namespace {

constexpr IoArea k_layout_io{"oci.io", "check free disk space and permissions"};

namespace fs = std::filesystem;

std::atomic<unsigned> g_temp_counter{0};

}  // namespace

nlohmann::json descriptor_object(const Descriptor& d) {
  nlohmann::json j = {{"mediaType", d.media_type}, {"digest", d.digest.str()}, {"size", d.size}};
  if (!d.annotations.empty()) j["annotations"] = d.annotations;
  return j;
}

std::string descriptor_json(const Descriptor& d) { return descriptor_object(d).dump(); }

namespace {

std::string string_at(const nlohmann::json& j, const char* key, const std::string& fallback = "") {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : fallback;
}

}  // namespace

bool is_attachment_tag(std::string_view name) {
  if (name.size() < 7 + 64 || name.substr(0, 7) != "sha256-") return false;
  for (const char c : name.substr(7, 64))
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  const std::string_view suffix = name.substr(7 + 64);
  return suffix.empty() || suffix == ".att" || suffix == ".sig" || suffix == ".sbom";
}

const nlohmann::json* choose_index_entry(const nlohmann::json& index, const std::string& ref, std::string& names) {
  names.clear();
  if (!index.is_object() || !index.contains("manifests") || !index["manifests"].is_array()) return nullptr;
  const auto& manifests = index["manifests"];
  const nlohmann::json* chosen = nullptr;
  std::size_t images = 0;
  for (const auto& m : manifests) {
    const std::string name = m.is_object() && m.contains("annotations") ? string_at(m["annotations"], "org.opencontainers.image.ref.name") : "";
    if (ref.empty() && is_attachment_tag(name)) continue;
    ++images;
    names += (names.empty() ? "" : ", ") + (name.empty() ? std::string("(unnamed)") : name);
    const bool by_digest = ref.rfind("sha256:", 0) == 0 && string_at(m, "digest") == ref;
    if (chosen == nullptr && (ref.empty() || name == ref || by_digest)) chosen = &m;
  }
  return ref.empty() && images > 1 ? nullptr : chosen;
}

const nlohmann::json* platform_entry(const nlohmann::json& platforms, const resolver::Platform& platform, std::vector<std::string>& seen) {
  seen.clear();
  if (!platforms.is_object() || !platforms.contains("manifests") || !platforms["manifests"].is_array()) return nullptr;
  const nlohmann::json* inner = nullptr;
  for (const auto& m : platforms["manifests"]) {
    const nlohmann::json p = m.is_object() && m.contains("platform") && m["platform"].is_object() ? m["platform"] : nlohmann::json::object();
    const std::string os = string_at(p, "os", "?"), arch = string_at(p, "architecture", "?"), variant = string_at(p, "variant", "");
    seen.push_back(os + "/" + arch + (variant.empty() ? "" : "/" + variant));
    if (inner == nullptr && resolver::platform_of(os, arch, variant) == platform) inner = &m;
  }
  return inner;
}

Result<Descriptor> parse_descriptor(const nlohmann::json& j, const std::string& where, const DescriptorErrors& errors) {
  if (!j.is_object() || !j.contains("digest") || !j["digest"].is_string() || !j.contains("size") || !j["size"].is_number_unsigned()) {
    return make_error(errors.kind, errors.id, "a descriptor lacks a digest or size: " + j.dump(), where, errors.hint);
  }
  const std::string text = j["digest"].get<std::string>();
  auto digest = Digest::parse(text);
  if (!digest) {
    return make_error(errors.kind, errors.id, "unsupported digest '" + text + "'",
                      where, "gpuenv handles sha256 digests only (sha256: and 64 lower-case hex digits); " + errors.hint);
  }
  Descriptor d;
  d.digest = std::move(*digest);
  d.size = j["size"].get<std::uint64_t>();
  if (j.contains("mediaType") && j["mediaType"].is_string()) d.media_type = j["mediaType"].get<std::string>();
  if (j.contains("annotations") && j["annotations"].is_object()) {
    for (const auto& [k, v] : j["annotations"].items())
      if (v.is_string()) d.annotations[k] = v.get<std::string>();
  }
  return d;
}

Result<OciLayout> OciLayout::open(const std::string& dir) {
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    if (!fs::is_directory(dir, ec)) {
      return make_error(ErrorKind::usage, "oci.not_layout", "exists and is not a directory", dir, "choose another output path with -o");
    }
    // A layout, or what an interrupted first write of one leaves (only gpuenv's own names), may be written to.
    bool ours = fs::exists(fs::path(dir) / "oci-layout", ec);
    if (!ours) {
      ours = true;
      for (const auto& e : fs::directory_iterator(dir, ec)) {
        const std::string n = e.path().filename().string();
        // AtomicFile's temporaries are ".NAME.tmp.*" (older gpuenv wrote "NAME.gpuenv-tmp").
        const bool temporary = n.rfind(".oci-layout.tmp.", 0) == 0 || n.rfind(".sbom.spdx.json.tmp.", 0) == 0 || n.rfind(".sbom.cdx.json.tmp.", 0) == 0 ||
                               n == ".oci-layout.gpuenv-tmp" ||
                               n == "sbom.spdx.json.gpuenv-tmp";
        if (n != "blobs" && n != "sbom.spdx.json" && n != "sbom.cdx.json" && !temporary) ours = false;
      }
    }
    if (!ours) {
      return make_error(ErrorKind::usage, "oci.not_layout", "directory is not empty and is not an OCI image layout", dir,
                        "choose a new or empty output directory with -o; gpuenv does not write into other directories");
    }
  }
  fs::create_directories(dir, ec);
  if (ec) {
    errno = ec.value();
    return io_error(k_layout_io, "cannot create the layout", dir);
  }
  OciLayout layout(dir);
  // The marker first, so that a directory holding anything of ours is recognisably a layout.
  if (!fs::exists(fs::path(dir) / "oci-layout", ec)) {
    if (auto st = write_file_atomic(dir + "/oci-layout", "{\"imageLayoutVersion\":\"1.0.0\"}"); !st) return std::move(st).error();
  }
  fs::create_directories(fs::path(dir) / "blobs" / "sha256", ec);
  if (ec) {
    errno = ec.value();
    return io_error(k_layout_io, "cannot create the layout", dir);
  }
  return layout;
}

std::string OciLayout::temp_path(const std::string& hint) const {
  return m_dir + "/blobs/.tmp-" + std::to_string(::getpid()) + "-" + std::to_string(g_temp_counter++) + "-" + hint;
}

std::string OciLayout::blob_path(const Digest& digest) const { return m_dir + "/blobs/sha256/" + digest.hex(); }

bool OciLayout::has_blob(const Digest& digest) const {
  struct stat st {};
  return !digest.empty() && ::stat(blob_path(digest).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

Result<Descriptor> OciLayout::put_bytes(const std::string& bytes, const std::string& media_type) {
  Descriptor d{media_type, Digest::of(bytes), bytes.size(), {}};
  if (has_blob(d.digest)) return d;
  if (auto st = write_file_atomic(blob_path(d.digest), bytes); !st) return std::move(st).error();
  return d;
}

Result<Descriptor> OciLayout::adopt_file(const std::string& path, const Digest& digest, std::uint64_t size, const std::string& media_type) {
  Descriptor d{media_type, digest, size, {}};
  if (digest.empty()) return make_error(ErrorKind::internal, "oci.io", "a blob without a digest", path, "");
  if (::rename(path.c_str(), blob_path(digest).c_str()) != 0) return io_error(k_layout_io, "cannot store blob", blob_path(digest));
  return d;
}

Status OciLayout::write_index(const std::vector<Descriptor>& manifests) {
  nlohmann::json index = {{"schemaVersion", 2}, {"mediaType", media_type::k_index}, {"manifests", nlohmann::json::array()}};
  for (const auto& m : manifests) index["manifests"].push_back(descriptor_object(m));
  return write_file_atomic(m_dir + "/index.json", index.dump());
}

Result<std::uint64_t> OciLayout::collect_garbage() {
  std::ifstream in(m_dir + "/index.json", std::ios::binary);
  if (!in) return std::uint64_t{0};
  std::set<std::string> live;
  std::vector<std::pair<std::string, bool>> todo;  // digest, and whether it is a manifest or index to read
  try {
    const auto index = nlohmann::json::parse(in);
    for (const auto& m : index.at("manifests")) todo.emplace_back(m.at("digest").get<std::string>(), true);
    while (!todo.empty()) {
      const auto [digest, read] = todo.back();
      todo.pop_back();
      const auto parsed = Digest::parse(digest);
      if (!parsed || !live.insert(parsed->hex()).second || !read) continue;
      std::ifstream blob(blob_path(*parsed), std::ios::binary);
      if (!blob) continue;
      const auto doc = nlohmann::json::parse(blob, nullptr, false);
      if (doc.is_discarded() || !doc.is_object()) continue;
      if (doc.contains("config") && doc["config"].is_object()) todo.emplace_back(string_field(doc["config"], "digest"), false);
      if (doc.contains("layers") && doc["layers"].is_array())
        for (const auto& l : doc["layers"]) todo.emplace_back(string_field(l, "digest"), false);
      if (doc.contains("manifests") && doc["manifests"].is_array())
        for (const auto& l : doc["manifests"]) todo.emplace_back(string_field(l, "digest"), true);
    }
  } catch (const std::exception& e) {
    return make_error(ErrorKind::environment, "oci.bad_index", std::string("cannot read index.json: ") + e.what(), m_dir, "");
  }
  std::uint64_t freed = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(m_dir + "/blobs/sha256", ec)) {
    if (live.count(e.path().filename().string())) continue;
    freed += e.file_size(ec);
    fs::remove(e.path(), ec);
  }
  for (const auto& e : fs::directory_iterator(m_dir + "/blobs", ec))
    if (e.path().filename().string().rfind(".tmp-", 0) == 0) fs::remove(e.path(), ec);
  return freed;
}

}  // namespace gpuenv::images
