#include "images/oci/image_reader.hpp"

#include <archive.h>
#include <archive_entry.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "base/text.hpp"
#include "base/digest.hpp"
#include "base/file_io.hpp"
#include "images/oci/layout_image.hpp"

namespace gpuenv::images {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* k_forms =
    "give an OCI layout directory (DIR, DIR:REF, oci:DIR[:REF]), an image archive (FILE, oci-archive:FILE, docker-archive:FILE) "
    "or a registry reference (docker://host[:port]/repo[:tag|@sha256:...])";

Error bad(const std::string& what, const std::string& where) { return make_error(ErrorKind::usage, "inspect.bad_image", what, where, k_forms); }

Error damaged(const std::string& what, const std::string& where) {
  return make_error(ErrorKind::environment, "inspect.damaged_image", what, where, "the image is incomplete or damaged; copy, pull or build it again");
}

/// The string at `key` of an object, or `fallback` when absent or not a string.
std::string str(const json& j, const char* key, const std::string& fallback = "") {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : fallback;
}

/// The array at `key` of an object, or an empty array.
json array_at(const json& j, const char* key) { return j.is_object() && j.contains(key) && j[key].is_array() ? j[key] : json::array(); }

/// Manifests and configs are read whole; larger ones are not documents gpuenv reads.
constexpr std::size_t k_max_document_bytes = std::size_t{16} << 20;

Result<json> parse_object(const std::string& text, const std::string& what, const std::string& where) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return bad(what + " is not a JSON object", where);
  return j;
}

/// The packages of a dev.gpuenv.packages annotation ([[name, version, kind, bytes], ...]); malformed entries are skipped.
std::vector<LayerPackage> annotated_packages(const std::string& text) {
  std::vector<LayerPackage> out;
  const json held = json::parse(text, nullptr, false);
  if (!held.is_array()) return out;
  for (const auto& p : held)
    if (p.is_array() && p.size() == 4 && p[0].is_string() && p[1].is_string() && p[2].is_string() && p[3].is_number_unsigned())
      out.push_back({p[0].get<std::string>(), p[1].get<std::string>(), p[2].get<std::string>(), p[3].get<std::uint64_t>()});
  return out;
}

/// Reads the blob with a digest (checked to be sha256:<hex> and to match the bytes read).
using BlobReader = std::function<Result<std::string>(const std::string& digest)>;

/// The manifest `digest` through `read_blob`, parsed.
Result<json> read_manifest(const BlobReader& read_blob, const std::string& digest, const std::string& where) {
  GPUENV_TRY(text, read_blob(digest));
  return parse_object(text, "the manifest " + digest, where);
}

/// The image manifest named in an OCI index by `ref`, following a nested index to this machine's platform's entry, and its config.
Result<ImageSummary> from_oci_index(const json& index, const std::string& ref, const BlobReader& read_blob, const std::string& where,
                                    const std::string& index_where) {
  std::string names;
  const json* chosen = choose_index_entry(index, ref, names);
  if (chosen == nullptr) {
    const std::size_t count = array_at(index, "manifests").size();
    if (count == 0) return bad("the index names no image", index_where);
    return bad(ref.empty() ? "the index holds " + std::to_string(count) + " images (" + names + "); name one as IMAGE:REF"
                           : "no image named '" + ref + "' (the index names: " + names + ")",
               index_where);
  }
  std::string digest = str(*chosen, "digest");
  GPUENV_TRY(manifest, read_manifest(read_blob, digest, where));
  std::vector<std::string> seen;
  if (manifest.contains("manifests")) {
    const json* inner = platform_entry(manifest, resolver::native_platform(), seen);
    if (inner == nullptr) return bad("the image index " + digest + " has no " + resolver::native_platform().str() + " image (it has: " + join(seen, ", ") + ")", where);
    digest = str(*inner, "digest");
    GPUENV_TRY(inner_manifest, read_manifest(read_blob, digest, where));
    manifest = std::move(inner_manifest);
  }
  const std::string config_digest = manifest.contains("config") ? str(manifest["config"], "digest") : "";
  GPUENV_TRY(config_text, read_blob(config_digest));
  GPUENV_TRY(config, parse_object(config_text, "the config " + config_digest, where));
  GPUENV_TRY(summary, summary_from_manifest(manifest, config, where, digest));
  summary.index_platforms = std::move(seen);
  return summary;
}

/// A layout through the one layout reader (every document verified), with inspect's errors.
Result<ImageSummary> load_layout(const std::string& dir, const std::string& ref, const std::string& where) {
  LayoutErrors errors;
  errors.no_image = "inspect.bad_image";
  errors.not_image_kind = ErrorKind::usage;
  errors.not_image = "inspect.bad_image";
  errors.not_image_hint = k_forms;
  errors.damaged = "inspect.damaged_image";
  errors.damaged_hint = "the image is incomplete or damaged; copy, pull or build it again";
  GPUENV_TRY(image, read_layout_image(dir, ref, errors, resolver::native_platform()));
  GPUENV_TRY(summary, summary_from_manifest(image.manifest, image.config, where, image.manifest_digest));
  summary.index_platforms = std::move(image.index_platforms);
  return summary;
}

// ---- archives ----

/// What one pass over a tar file found: every regular member's size, and the text of the members asked for.
struct TarScan {
  std::map<std::string, std::uint64_t> sizes;
  std::map<std::string, std::string> contents;
};

using ArchiveHandle = std::unique_ptr<archive, decltype(&archive_read_free)>;

std::string la_error(archive* a) {
  const char* e = archive_error_string(a);
  return e ? e : "unreadable";
}

/// Member names as written ("./index.json" and "index.json" alike).
std::string member_name(const char* raw) {
  std::string n = raw ? raw : "";
  while (n.rfind("./", 0) == 0) n.erase(0, 2);
  return n;
}

/// Opens `path` for reading as tar (any compression).
Result<ArchiveHandle> open_tar(const std::string& path, const std::string& where) {
  ArchiveHandle a(archive_read_new(), &archive_read_free);
  archive_read_support_filter_all(a.get());
  archive_read_support_format_tar(a.get());
  if (!std::ifstream(path, std::ios::binary)) {
    return make_error(ErrorKind::environment, "inspect.io", "cannot open " + path, where, "check the path and its permissions");
  }
  // The file opens, so a failure here is libarchive's format detection: not a tar (in any compression).
  if (archive_read_open_filename(a.get(), path.c_str(), 1 << 16) != ARCHIVE_OK) {
    const std::string why = la_error(a.get());
    if (why.find("runcated") != std::string::npos) return damaged("the archive breaks off (" + why + ")", where);
    return bad("the file is not a tar archive (" + why + ")", where);
  }
  return a;
}

/// The data of the current member, `size` bytes (at most 16 MiB: a manifest or config).
Result<std::string> read_member(archive* a, const std::string& name, std::uint64_t size, const std::string& where) {
  if (size > (std::uint64_t{16} << 20)) return bad(name + " is " + std::to_string(size) + " bytes, too large for an image manifest or config", where);
  std::string text(static_cast<std::size_t>(size), '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const la_ssize_t n = archive_read_data(a, text.data() + got, text.size() - got);
    if (n < 0) return damaged("cannot read " + name + " (" + la_error(a) + ")", where);
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (got < text.size()) return damaged(name + " breaks off after " + std::to_string(got) + " of its " + std::to_string(size) + " bytes", where);
  return text;
}

/// Reads the tar file at `path` once, skipping the data of members not in `wanted` (no layer is extracted).
/// A file libarchive cannot read as tar is `inspect.bad_image` (usage); one that breaks off is `inspect.damaged_image`.
Result<TarScan> scan_tar(const std::string& path, const std::set<std::string>& wanted, const std::string& where) {
  std::error_code ec;
  const std::uint64_t file_size = fs::file_size(path, ec);
  if (ec) return make_error(ErrorKind::environment, "inspect.io", "cannot read " + path + ": " + ec.message(), where, "check the path and its permissions");
  GPUENV_TRY(a, open_tar(path, where));
  TarScan scan;
  std::uint64_t entries = 0;
  while (true) {
    archive_entry* e = nullptr;
    const int r = archive_read_next_header(a.get(), &e);
    if (r == ARCHIVE_EOF) break;
    if (r < ARCHIVE_WARN) {
      const std::string why = la_error(a.get());
      if (entries == 0 && why.find("runcated") == std::string::npos) return bad("the file is not a tar archive (" + why + ")", where);
      return damaged("the archive breaks off after " + std::to_string(entries) + " members (" + why + ")", where);
    }
    ++entries;
    if (archive_entry_filetype(e) != AE_IFREG) continue;
    const std::string name = member_name(archive_entry_pathname(e));
    const auto size = static_cast<std::uint64_t>(archive_entry_size(e));
    scan.sizes[name] = size;
    if (!wanted.count(name)) continue;
    GPUENV_TRY(text, read_member(a.get(), name, size, where));
    scan.contents[name] = std::move(text);
  }
  if (entries == 0) return bad("the file is an empty tar archive", where);
  // Skipping seeks over member data, so a file that ends inside a member reads as ending early: compare.
  if (archive_filter_count(a.get()) <= 1 && static_cast<std::uint64_t>(archive_filter_bytes(a.get(), -1)) > file_size) {
    return damaged("the archive is " + std::to_string(file_size) + " bytes but its members need " + std::to_string(archive_filter_bytes(a.get(), -1)), where);
  }
  return scan;
}

enum class ArchiveKind { detect, oci, docker };

/// The kind of archive `top` is, checked against the one asked for (`detect`: either).
Result<ArchiveKind> archive_kind(const TarScan& top, ArchiveKind kind, const std::string& path, const std::string& where) {
  const bool has_oci = top.sizes.count("oci-layout") && top.sizes.count("index.json");
  const bool has_docker = top.sizes.count("manifest.json") > 0;
  const bool has_blobs = top.sizes.count("oci-layout") || top.sizes.count("index.json") ||
                         std::any_of(top.sizes.begin(), top.sizes.end(), [](const auto& m) { return m.first.rfind("blobs/", 0) == 0; });
  if (kind == ArchiveKind::detect) {
    if (!has_oci && !has_docker) {
      if (has_blobs) return damaged("the archive holds image blobs but neither index.json with oci-layout nor manifest.json", where);
      return bad("the file is a tar archive but not an image: it has neither oci-layout and index.json (an OCI archive) nor manifest.json (a docker archive)", where);
    }
    return has_oci ? ArchiveKind::oci : ArchiveKind::docker;
  }
  if (kind == ArchiveKind::oci && !has_oci) {
    if (has_docker) return bad("the file is not an OCI archive (it has no oci-layout and index.json); it is a docker archive: use docker-archive:" + path, where);
    if (has_blobs) return damaged("the archive holds image blobs but lacks oci-layout or index.json", where);
    return bad("the file is not an OCI archive (it has no oci-layout and index.json)", where);
  }
  if (kind == ArchiveKind::docker && !has_docker) {
    if (has_oci) return bad("the file is not a docker archive (it has no manifest.json); it is an OCI archive: use oci-archive:" + path, where);
    if (has_blobs) return damaged("the archive holds image blobs but lacks manifest.json", where);
    return bad("the file is not a docker archive (it has no manifest.json)", where);
  }
  return kind;
}

/// The entry of docker's manifest.json tagged `ref` (empty: the only one).
Result<json> docker_entry(const std::string& manifest_text, const std::string& ref, const std::string& mwhere) {
  const json entries = json::parse(manifest_text, nullptr, false);
  if (entries.is_discarded() || !entries.is_array() || entries.empty()) return bad("manifest.json is not a non-empty JSON array", mwhere);
  json entry;
  std::string tags;
  for (const auto& e : entries) {
    for (const auto& t : array_at(e, "RepoTags"))
      if (t.is_string()) {
        tags += (tags.empty() ? "" : ", ") + t.get<std::string>();
        if (!ref.empty() && t == ref && entry.is_null()) entry = e;
      }
  }
  if (ref.empty() && entries.size() == 1) entry = entries[0];
  if (entry.is_null()) {
    return bad(ref.empty() ? "manifest.json holds " + std::to_string(entries.size()) + " images (" + tags + "); name one as docker-archive:FILE:NAME:TAG"
                           : "no image tagged '" + ref + "' (manifest.json names: " + tags + ")",
               mwhere);
  }
  return entry;
}

/// An OCI-style manifest for a docker manifest.json entry: layer sizes are the member sizes, layer digests from
/// blobs/sha256/<hex> names or the config's diff_ids (uncompressed layer.tar members).
Result<json> docker_manifest(const TarScan& top, const json& entry, const json& config, const std::string& config_text, const std::string& path,
                             const std::string& where) {
  const json rootfs = config.contains("rootfs") && config["rootfs"].is_object() ? config["rootfs"] : json::object();
  const json diff_ids = array_at(rootfs, "diff_ids");
  json manifest = {{"config", {{"digest", "sha256:" + gpuenv::sha256_hex(config_text)}}}, {"layers", json::array()}};
  for (const auto& l : entry["Layers"]) {
    const std::string member = l.is_string() ? member_name(l.get<std::string>().c_str()) : "";
    if (!top.sizes.count(member)) return damaged(path + " lacks layer '" + member + "', which manifest.json names", where);
    std::string digest;
    if (const auto named = member.rfind("blobs/sha256/", 0) == 0 ? Digest::from_hex(member.substr(13)) : std::nullopt) digest = named->str();
    else if (manifest["layers"].size() < diff_ids.size() && diff_ids[manifest["layers"].size()].is_string()) digest = diff_ids[manifest["layers"].size()];
    manifest["layers"].push_back({{"digest", digest}, {"size", top.sizes.at(member)}});
  }
  return manifest;
}

/// Whether the OCI manifest `oci` has the config and layers of `manifest` (a docker archive's).
bool same_image(const json& oci, const json& manifest) {
  if (oci.is_discarded() || !oci.is_object() || !oci.contains("layers") || !oci["layers"].is_array() || oci["layers"].size() != manifest["layers"].size())
    return false;
  if (!oci.contains("config") || str(oci["config"], "digest") != manifest["config"]["digest"]) return false;
  for (std::size_t i = 0; i < oci["layers"].size(); ++i)
    if (str(oci["layers"][i], "digest") != manifest["layers"][i]["digest"]) return false;
  return true;
}

/// Docker's image id (the config digest) names the image, unless an OCI manifest in the archive has these layers:
/// then its digest names it and its layer annotations (names, packages) are copied into `manifest`.
std::string adopt_oci_manifest(const TarScan& top, const BlobReader& read_blob, const std::string& path, json& manifest) {
  std::string digest = manifest["config"]["digest"];
  if (!(top.sizes.count("oci-layout") && top.sizes.count("index.json"))) return digest;
  auto index = parse_object(top.contents.count("index.json") ? top.contents.at("index.json") : "", "index.json", path + ": index.json");
  const json manifests = index ? array_at(*index, "manifests") : json::array();
  for (const auto& m : manifests) {
    auto text = read_blob(str(m, "digest"));
    if (!text) continue;
    const json oci = json::parse(*text, nullptr, false);
    if (!same_image(oci, manifest)) continue;
    for (std::size_t i = 0; i < oci["layers"].size(); ++i)
      if (oci["layers"][i].contains("annotations")) manifest["layers"][i]["annotations"] = oci["layers"][i]["annotations"];
    return str(m, "digest");
  }
  return digest;
}

/// A docker-archive: manifest.json's entry `ref` mapped to the model; names and packages come from an OCI
/// manifest in the same archive whose layers are the same (Docker 25+, gpuenv).
Result<ImageSummary> load_docker_archive(const TarScan& top, const std::string& path, const std::string& ref, const BlobReader& read_blob,
                                         const std::string& where) {
  const std::string mwhere = path + ": manifest.json";
  GPUENV_TRY(entry, docker_entry(top.contents.count("manifest.json") ? top.contents.at("manifest.json") : "", ref, mwhere));
  const std::string config_member = member_name(str(entry, "Config").c_str());
  if (config_member.empty() || !entry.contains("Layers") || !entry["Layers"].is_array()) return bad("the manifest.json entry lacks Config or Layers", mwhere);
  if (!top.sizes.count(config_member)) return damaged(path + " lacks " + config_member + ", which manifest.json names as the config", where);
  GPUENV_TRY(config_scan, scan_tar(path, {config_member}, where));
  const std::string config_text = config_scan.contents[config_member];
  GPUENV_TRY(config, parse_object(config_text, config_member, path + ": " + config_member));
  GPUENV_TRY(manifest, docker_manifest(top, entry, config, config_text, path, where));
  const std::string digest = adopt_oci_manifest(top, read_blob, path, manifest);
  return summary_from_manifest(manifest, config, where, digest);
}

/// An oci-archive or docker-archive tar file. `ref` names the image: an index ref name (OCI) or a RepoTags
/// entry (docker).
Result<ImageSummary> load_archive(const std::string& path, const std::string& ref, ArchiveKind asked, const std::string& where) {
  GPUENV_TRY(top, scan_tar(path, {"oci-layout", "index.json", "manifest.json"}, where));
  GPUENV_TRY(kind, archive_kind(top, asked, path, where));
  const BlobReader read_blob = [&](const std::string& digest) -> Result<std::string> {
    const auto d = Digest::parse(digest);
    if (!d) return bad("unsupported or malformed digest '" + digest + "'", path);
    const std::string member = "blobs/sha256/" + d->hex();
    if (!top.sizes.count(member)) return damaged("the archive lacks blob " + digest, where);
    GPUENV_TRY(scan, scan_tar(path, {member}, where));
    std::string bytes = std::move(scan.contents[member]);
    if (Digest::of(bytes) != *d) return damaged("blob " + digest + " does not hold the bytes its digest names", where);
    return bytes;
  };
  if (kind == ArchiveKind::docker) return load_docker_archive(top, path, ref, read_blob, where);
  GPUENV_TRY(index, parse_object(top.contents["index.json"], "index.json", path + ": index.json"));
  return from_oci_index(index, ref, read_blob, where, path + ": index.json");
}

}  // namespace

Result<ImageSummary> summary_from_manifest(const json& manifest, const json& config, const std::string& where, const std::string& digest) {
  if (!manifest.contains("layers") || !manifest["layers"].is_array()) return bad("the image manifest has no layers list", where);
  ImageSummary img;
  img.where = where;
  img.digest = digest;
  img.created = str(config, "created");
  img.architecture = str(config, "architecture");
  const json c = config.contains("config") && config["config"].is_object() ? config["config"] : json::object();
  if (c.contains("Labels") && c["Labels"].is_object())
    for (const auto& [k, v] : c["Labels"].items())
      if (v.is_string()) img.labels[k] = v.get<std::string>();
  img.env = array_at(c, "Env");
  for (const auto& l : manifest["layers"]) {
    LayerSummary layer;
    layer.digest = str(l, "digest");
    layer.size = l.is_object() && l.contains("size") && l["size"].is_number_unsigned() ? l["size"].get<std::uint64_t>() : 0;
    const json a = l.is_object() && l.contains("annotations") && l["annotations"].is_object() ? l["annotations"] : json::object();
    layer.name = str(a, "dev.gpuenv.layer", "layer " + std::to_string(img.layers.size() + 1));
    layer.packages = annotated_packages(str(a, "dev.gpuenv.packages", "[]"));
    img.layers.push_back(std::move(layer));
  }
  return img;
}

std::pair<std::string, std::string> split_image_ref(const std::string& argument) {
  std::error_code ec;
  if (fs::exists(argument, ec)) return {argument, ""};
  for (auto colon = argument.find(':'); colon != std::string::npos; colon = argument.find(':', colon + 1)) {
    const std::string path = argument.substr(0, colon), ref = argument.substr(colon + 1);
    if (path.empty()) continue;
    if (fs::is_regular_file(path, ec) || (fs::is_directory(path, ec) && ref.find('/') == std::string::npos)) return {path, ref};
  }
  return {argument, ""};
}

Result<ImageSummary> summary_from_documents(const std::string& manifest, const std::string& config, const std::string& where, const std::string& digest) {
  GPUENV_TRY(m, parse_object(manifest, "the manifest", where));
  GPUENV_TRY(c, parse_object(config, "the config", where));
  return summary_from_manifest(m, c, where, digest);
}

Result<ImageSummary> read_image_summary(const std::string& arg, const RegistryAccess& registry) {
  std::error_code ec;
  const auto has_prefix = [&](const char* p) { return !fs::exists(arg, ec) && arg.rfind(p, 0) == 0; };
  if (has_prefix("docker://")) {
    if (!registry.read)
      return make_error(ErrorKind::usage, "inspect.no_registry", "registry images cannot be read here", arg, "give a layout directory or an archive");
    return registry.read(arg.substr(9), arg);
  }
  ArchiveKind kind = ArchiveKind::detect;
  std::string rest = arg;
  bool want_dir = false;
  if (has_prefix("oci-archive:")) {
    kind = ArchiveKind::oci;
    rest = arg.substr(12);
  } else if (has_prefix("docker-archive:")) {
    kind = ArchiveKind::docker;
    rest = arg.substr(15);
  } else if (has_prefix("oci:")) {
    want_dir = true;
    rest = arg.substr(arg.rfind("oci://", 0) == 0 ? 6 : 4);
  }
  const auto [path, ref] = split_image_ref(rest);
  if (fs::is_directory(path, ec)) {
    if (kind != ArchiveKind::detect) return bad(path + " is a directory, not an archive file", arg);
    return load_layout(path, ref, arg);
  }
  if (fs::is_regular_file(path, ec)) {
    if (want_dir) return bad(path + " is a file, not an OCI layout directory; for an archive write oci-archive:" + path, arg);
    return load_archive(path, ref, kind, arg);
  }
  if (fs::exists(path, ec)) return bad(path + " is neither a directory nor a regular file", arg);
  return bad("no such file or directory: " + path, arg);
}

std::vector<LayerChange> diff_images(const ImageSummary& a, const ImageSummary& b) {
  std::map<std::string, const LayerSummary*> before, after;
  for (const auto& l : a.layers) before[l.name] = &l;
  for (const auto& l : b.layers) after[l.name] = &l;
  std::vector<std::string> names;
  for (const auto& l : a.layers) names.push_back(l.name);
  for (const auto& l : b.layers)
    if (!before.count(l.name)) names.push_back(l.name);
  std::vector<LayerChange> out;
  for (const auto& name : names) {
    const LayerSummary* x = before.count(name) ? before[name] : nullptr;
    const LayerSummary* y = after.count(name) ? after[name] : nullptr;
    LayerChange d;
    d.layer = name;
    d.status = !x ? "added" : !y ? "removed" : x->digest == y->digest ? "unchanged" : "changed";
    d.size_before = x ? x->size : 0;
    d.size_after = y ? y->size : 0;
    std::map<std::string, const LayerPackage*> pa, pb;
    if (x)
      for (const auto& p : x->packages) pa[p.kind + ":" + p.name] = &p;
    if (y)
      for (const auto& p : y->packages) pb[p.kind + ":" + p.name] = &p;
    for (const auto& [k, p] : pa) {
      auto it = pb.find(k);
      if (it == pb.end()) d.packages.push_back({p->name, p->kind, p->version, std::nullopt});
      else if (it->second->version != p->version) d.packages.push_back({p->name, p->kind, p->version, it->second->version});
    }
    for (const auto& [k, p] : pb)
      if (!pa.count(k)) d.packages.push_back({p->name, p->kind, std::nullopt, p->version});
    out.push_back(std::move(d));
  }
  return out;
}

Result<std::map<std::string, std::string>> read_archive_members(const std::string& path, const std::set<std::string>& names, const std::string& where) {
  GPUENV_TRY(scan, scan_tar(path, names, where));
  return std::move(scan.contents);
}

}  // namespace gpuenv::images
