// gpuenv inspect IMAGE [--diff OTHER] [--json]: what an image built by gpuenv holds, layer by layer and
// package by package (from the manifest's annotations and the config), and what changed between two images.
// An image is an OCI layout, an oci-archive or docker-archive tar file (read member by member, nothing
// extracted) or a registry reference (only the manifest and config are fetched); each becomes the same Image.
#include <archive.h>
#include <archive_entry.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <set>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/render.hpp"
#include "base/digest.hpp"
#include "base/net/http_client.hpp"
#include "images/registry/registry_client.hpp"

namespace gpuenv::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

struct Package {
  std::string name, version, kind;
  std::uint64_t bytes = 0;
};
struct Layer {
  std::string name, digest;
  std::uint64_t size = 0;
  std::vector<Package> packages;
};
struct Image {
  std::string where, digest, created, architecture;
  json labels, env;
  std::vector<Layer> layers;
};

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

bool valid_digest(const std::string& d) {
  return d.size() == 71 && d.rfind("sha256:", 0) == 0 &&
         std::all_of(d.begin() + 7, d.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

Result<json> parse_object(const std::string& text, const std::string& what, const std::string& where) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return bad(what + " is not a JSON object", where);
  return j;
}

/// The model from an image manifest and its config: layer names and packages from the layer annotations gpuenv
/// writes (dev.gpuenv.layer, dev.gpuenv.packages: [[name, version, kind, bytes], ...]).
Result<Image> from_manifest(const json& manifest, const json& config, const std::string& where, const std::string& digest) {
  if (!manifest.contains("layers") || !manifest["layers"].is_array()) return bad("the image manifest has no layers list", where);
  Image img;
  img.where = where;
  img.digest = digest;
  img.created = str(config, "created");
  img.architecture = str(config, "architecture");
  const json c = config.contains("config") && config["config"].is_object() ? config["config"] : json::object();
  img.labels = json::object();
  if (c.contains("Labels") && c["Labels"].is_object())
    for (const auto& [k, v] : c["Labels"].items())
      if (v.is_string()) img.labels[k] = v;
  img.env = c.contains("Env") && c["Env"].is_array() ? c["Env"] : json::array();
  for (const auto& l : manifest["layers"]) {
    Layer layer;
    layer.digest = str(l, "digest");
    layer.size = l.is_object() && l.contains("size") && l["size"].is_number_unsigned() ? l["size"].get<std::uint64_t>() : 0;
    const json a = l.is_object() && l.contains("annotations") && l["annotations"].is_object() ? l["annotations"] : json::object();
    layer.name = str(a, "dev.gpuenv.layer", "layer " + std::to_string(img.layers.size() + 1));
    const json held = json::parse(str(a, "dev.gpuenv.packages", "[]"), nullptr, false);
    if (held.is_array())
      for (const auto& p : held)
        if (p.is_array() && p.size() == 4 && p[0].is_string() && p[1].is_string() && p[2].is_string() && p[3].is_number_unsigned())
          layer.packages.push_back({p[0].get<std::string>(), p[1].get<std::string>(), p[2].get<std::string>(), p[3].get<std::uint64_t>()});
    img.layers.push_back(std::move(layer));
  }
  return img;
}

/// Reads the blob with a digest (checked to be sha256:<hex> and to match the bytes read).
using BlobReader = std::function<Result<std::string>(const std::string& digest)>;

/// The image manifest named in an OCI index by `ref` (its org.opencontainers.image.ref.name; empty: the only
/// entry), following a nested index to its linux/amd64 entry, and its config.
Result<Image> from_oci_index(const json& index, const std::string& ref, const BlobReader& read_blob, const std::string& where,
                             const std::string& index_where) {
  const json manifests = index.contains("manifests") && index["manifests"].is_array() ? index["manifests"] : json::array();
  json chosen;
  std::string names;
  for (const auto& m : manifests) {
    const std::string name = m.is_object() && m.contains("annotations") ? str(m["annotations"], "org.opencontainers.image.ref.name") : "";
    names += (names.empty() ? "" : ", ") + (name.empty() ? std::string("(unnamed)") : name);
    if (ref.empty() ? chosen.is_null() : name == ref) chosen = m;
  }
  if (manifests.empty()) return bad("the index names no image", index_where);
  if (chosen.is_null() || (ref.empty() && manifests.size() > 1)) {
    return bad(ref.empty() ? "the index holds " + std::to_string(manifests.size()) + " images (" + names + "); name one as IMAGE:REF"
                           : "no image named '" + ref + "' (the index names: " + names + ")",
               index_where);
  }
  std::string digest = str(chosen, "digest");
  auto text = read_blob(digest);
  if (!text) return std::move(text).error();
  auto manifest = parse_object(*text, "the manifest " + digest, where);
  if (!manifest) return std::move(manifest).error();
  if (manifest->contains("manifests")) {  // an index of platforms: take linux/amd64 as a pull would
    std::string inner, seen;
    if ((*manifest)["manifests"].is_array())
      for (const auto& m : (*manifest)["manifests"]) {
        const json p = m.is_object() && m.contains("platform") ? m["platform"] : json::object();
        seen += (seen.empty() ? "" : ", ") + str(p, "os", "?") + "/" + str(p, "architecture", "?");
        if (inner.empty() && str(p, "os") == "linux" && str(p, "architecture") == "amd64") inner = str(m, "digest");
      }
    if (inner.empty()) return bad("the image index " + digest + " has no linux/amd64 image (it has: " + seen + ")", where);
    digest = inner;
    text = read_blob(digest);
    if (!text) return std::move(text).error();
    manifest = parse_object(*text, "the manifest " + digest, where);
    if (!manifest) return std::move(manifest).error();
  }
  const std::string config_digest = manifest->contains("config") ? str((*manifest)["config"], "digest") : "";
  auto config_text = read_blob(config_digest);
  if (!config_text) return std::move(config_text).error();
  auto config = parse_object(*config_text, "the config " + config_digest, where);
  if (!config) return std::move(config).error();
  return from_manifest(*manifest, *config, where, digest);
}

Result<Image> load_layout(const std::string& dir, const std::string& ref, const std::string& where) {
  const fs::path index_path = fs::path(dir) / "index.json";
  std::error_code ec;
  if (!fs::is_regular_file(index_path, ec)) return bad("the directory " + dir + " is not an OCI layout (it has no index.json)", where);
  std::ifstream in(index_path, std::ios::binary);
  const std::string index_text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  auto index = parse_object(index_text, "index.json", index_path.string());
  if (!index) return std::move(index).error();
  const BlobReader read_blob = [&](const std::string& digest) -> Result<std::string> {
    if (!valid_digest(digest)) return bad("unsupported or malformed digest '" + digest + "'", dir);
    const fs::path p = fs::path(dir) / "blobs/sha256" / digest.substr(7);
    std::ifstream blob(p, std::ios::binary);
    if (!blob) return damaged("the layout lacks blob " + digest, p.string());
    std::string bytes{std::istreambuf_iterator<char>(blob), std::istreambuf_iterator<char>()};
    if ("sha256:" + gpuenv::sha256_hex(bytes) != digest) return damaged("blob " + digest + " does not hold the bytes its digest names", p.string());
    return bytes;
  };
  return from_oci_index(*index, ref, read_blob, where, index_path.string());
}

// ---- archives ----

/// What one pass over a tar file found: every regular member's size, and the text of the members asked for.
struct TarScan {
  std::map<std::string, std::uint64_t> sizes;
  std::map<std::string, std::string> contents;
};

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

/// Reads the tar file at `path` once, skipping the data of members not in `wanted` (no layer is extracted).
/// A file libarchive cannot read as tar is `inspect.bad_image` (usage); one that breaks off is `inspect.damaged_image`.
Result<TarScan> scan_tar(const std::string& path, const std::set<std::string>& wanted, const std::string& where) {
  std::error_code ec;
  const std::uint64_t file_size = fs::file_size(path, ec);
  if (ec) return make_error(ErrorKind::environment, "inspect.io", "cannot read " + path + ": " + ec.message(), where, "check the path and its permissions");
  std::unique_ptr<archive, decltype(&archive_read_free)> a(archive_read_new(), &archive_read_free);
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
    if (size > (std::uint64_t{16} << 20)) return bad(name + " is " + std::to_string(size) + " bytes, too large for an image manifest or config", where);
    std::string text(static_cast<std::size_t>(size), '\0');
    std::size_t got = 0;
    while (got < text.size()) {
      const la_ssize_t n = archive_read_data(a.get(), text.data() + got, text.size() - got);
      if (n < 0) return damaged("cannot read " + name + " (" + la_error(a.get()) + ")", where);
      if (n == 0) break;
      got += static_cast<std::size_t>(n);
    }
    if (got < text.size()) return damaged(name + " breaks off after " + std::to_string(got) + " of its " + std::to_string(size) + " bytes", where);
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

/// An oci-archive or docker-archive tar file. `ref` names the image: an index ref name (OCI) or a RepoTags
/// entry (docker). Docker's manifest.json is mapped to the same model: layer sizes are the member sizes, layer
/// digests from blobs/sha256/<hex> names or the config's diff_ids (uncompressed layer.tar members); names and
/// packages come from an OCI manifest in the same archive whose layers are the same (Docker 25+, gpuenv).
Result<Image> load_archive(const std::string& path, const std::string& ref, ArchiveKind kind, const std::string& where) {
  auto top = scan_tar(path, {"oci-layout", "index.json", "manifest.json"}, where);
  if (!top) return std::move(top).error();
  const bool has_oci = top->sizes.count("oci-layout") && top->sizes.count("index.json");
  const bool has_docker = top->sizes.count("manifest.json") > 0;
  const bool has_blobs = top->sizes.count("oci-layout") || top->sizes.count("index.json") ||
                         std::any_of(top->sizes.begin(), top->sizes.end(), [](const auto& m) { return m.first.rfind("blobs/", 0) == 0; });
  if (kind == ArchiveKind::detect) {
    if (!has_oci && !has_docker) {
      if (has_blobs) return damaged("the archive holds image blobs but neither index.json with oci-layout nor manifest.json", where);
      return bad("the file is a tar archive but not an image: it has neither oci-layout and index.json (an OCI archive) nor manifest.json (a docker archive)", where);
    }
    kind = has_oci ? ArchiveKind::oci : ArchiveKind::docker;
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
  const BlobReader read_blob = [&](const std::string& digest) -> Result<std::string> {
    if (!valid_digest(digest)) return bad("unsupported or malformed digest '" + digest + "'", path);
    const std::string member = "blobs/sha256/" + digest.substr(7);
    if (!top->sizes.count(member)) return damaged("the archive lacks blob " + digest, where);
    auto scan = scan_tar(path, {member}, where);
    if (!scan) return std::move(scan).error();
    std::string bytes = std::move(scan->contents[member]);
    if ("sha256:" + gpuenv::sha256_hex(bytes) != digest) return damaged("blob " + digest + " does not hold the bytes its digest names", where);
    return bytes;
  };
  if (kind == ArchiveKind::oci) {
    auto index = parse_object(top->contents["index.json"], "index.json", path + ": index.json");
    if (!index) return std::move(index).error();
    return from_oci_index(*index, ref, read_blob, where, path + ": index.json");
  }
  const std::string mwhere = path + ": manifest.json";
  const json entries = json::parse(top->contents["manifest.json"], nullptr, false);
  if (entries.is_discarded() || !entries.is_array() || entries.empty()) return bad("manifest.json is not a non-empty JSON array", mwhere);
  json entry;
  std::string tags;
  for (const auto& e : entries) {
    const json repo_tags = e.is_object() && e.contains("RepoTags") && e["RepoTags"].is_array() ? e["RepoTags"] : json::array();
    for (const auto& t : repo_tags)
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
  const std::string config_member = member_name(str(entry, "Config").c_str());
  if (config_member.empty() || !entry.contains("Layers") || !entry["Layers"].is_array()) return bad("the manifest.json entry lacks Config or Layers", mwhere);
  if (!top->sizes.count(config_member)) return damaged(path + " lacks " + config_member + ", which manifest.json names as the config", where);
  auto config_scan = scan_tar(path, {config_member}, where);
  if (!config_scan) return std::move(config_scan).error();
  const std::string config_text = config_scan->contents[config_member];
  auto config = parse_object(config_text, config_member, path + ": " + config_member);
  if (!config) return std::move(config).error();
  const json diff_ids = config->contains("rootfs") && (*config)["rootfs"].is_object() && (*config)["rootfs"].contains("diff_ids") &&
                                (*config)["rootfs"]["diff_ids"].is_array()
                            ? (*config)["rootfs"]["diff_ids"]
                            : json::array();
  json manifest = {{"config", {{"digest", "sha256:" + gpuenv::sha256_hex(config_text)}}}, {"layers", json::array()}};
  for (const auto& l : entry["Layers"]) {
    const std::string member = l.is_string() ? member_name(l.get<std::string>().c_str()) : "";
    if (!top->sizes.count(member)) return damaged(path + " lacks layer '" + member + "', which manifest.json names", where);
    std::string digest;
    if (member.rfind("blobs/sha256/", 0) == 0 && valid_digest("sha256:" + member.substr(13))) digest = "sha256:" + member.substr(13);
    else if (manifest["layers"].size() < diff_ids.size() && diff_ids[manifest["layers"].size()].is_string()) digest = diff_ids[manifest["layers"].size()];
    manifest["layers"].push_back({{"digest", digest}, {"size", top->sizes[member]}});
  }
  // Docker's image id (the config digest) names the image, unless an OCI manifest in the archive has these layers.
  std::string digest = manifest["config"]["digest"];
  if (has_oci) {
    auto index = parse_object(top->contents["index.json"], "index.json", path + ": index.json");
    const json manifests = index && (*index).contains("manifests") && (*index)["manifests"].is_array() ? (*index)["manifests"] : json::array();
    for (const auto& m : manifests) {
      auto text = read_blob(str(m, "digest"));
      if (!text) continue;
      const json oci = json::parse(*text, nullptr, false);
      if (oci.is_discarded() || !oci.is_object() || !oci.contains("layers") || !oci["layers"].is_array() || oci["layers"].size() != manifest["layers"].size())
        continue;
      if (!oci.contains("config") || str(oci["config"], "digest") != manifest["config"]["digest"]) continue;
      bool same = true;
      for (std::size_t i = 0; same && i < oci["layers"].size(); ++i) same = str(oci["layers"][i], "digest") == manifest["layers"][i]["digest"];
      if (!same) continue;
      for (std::size_t i = 0; i < oci["layers"].size(); ++i)
        if (oci["layers"][i].contains("annotations")) manifest["layers"][i]["annotations"] = oci["layers"][i]["annotations"];
      digest = str(m, "digest");
      break;
    }
  }
  return from_manifest(manifest, *config, where, digest);
}

// ---- registries ----

/// docker://host[:port]/repo[:tag|@digest]: the manifest (linux/amd64 from an index) and config only.
Result<Image> load_registry(const std::string& reference, bool plain_http, const std::string& where, Context& ctx) {
  auto ref = images::parse_image_reference(reference);
  if (!ref) return std::move(ref).error().while_("reading the image reference " + where);
  Status problem = ok_status();
  images::RegistryOptions ro = registry_options(ctx, ref->registry, plain_http, &problem);
  if (!problem) return problem.error();
  gpuenv::HttpOptions ho;
  ho.ca_bundle = env_or(ctx, "GPUENV_CA_BUNDLE");
  auto http = gpuenv::make_curl_http_client(ho);
  images::RegistryClient client(*http, ro);
  auto remote = client.fetch_manifest_and_config(*ref);
  if (!remote) {
    Error e = std::move(remote).error();
    e.while_("inspecting " + where);
    if (e.id.rfind("http.", 0) == 0 && !ro.plain_http) {
      e.hint += std::string(e.hint.empty() ? "" : "; ") + "for a registry that speaks plain HTTP, add --plain-http or list " + ref->registry +
                " in GPUENV_INSECURE_REGISTRIES";
    }
    return e;
  }
  auto manifest = parse_object(remote->manifest, "the manifest", where);
  if (!manifest) return std::move(manifest).error();
  auto config = parse_object(remote->config, "the config", where);
  if (!config) return std::move(config).error();
  return from_manifest(*manifest, *config, where, remote->manifest_digest);
}

/// Splits "PATH:REF" at the first colon after which PATH exists (a REF may hold colons: "name:tag" in a docker
/// archive); a directory's REF has no '/'. An existing `arg`, or one without such a split, is {arg, ""}.
std::pair<std::string, std::string> split_ref(const std::string& arg) {
  std::error_code ec;
  if (fs::exists(arg, ec)) return {arg, ""};
  for (auto colon = arg.find(':'); colon != std::string::npos; colon = arg.find(':', colon + 1)) {
    const std::string path = arg.substr(0, colon), ref = arg.substr(colon + 1);
    if (path.empty()) continue;
    if (fs::is_regular_file(path, ec) || (fs::is_directory(path, ec) && ref.find('/') == std::string::npos)) return {path, ref};
  }
  return {arg, ""};
}

Result<Image> load(const std::string& arg, bool plain_http, Context& ctx) {
  std::error_code ec;
  const auto has_prefix = [&](const char* p) { return !fs::exists(arg, ec) && arg.rfind(p, 0) == 0; };
  if (has_prefix("docker://")) return load_registry(arg.substr(9), plain_http, arg, ctx);
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
  const auto [path, ref] = split_ref(rest);
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

std::string human(std::uint64_t bytes) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(1);
  if (bytes >= (1ull << 30)) o << static_cast<double>(bytes) / (1ull << 30) << " GiB";
  else if (bytes >= (1ull << 20)) o << static_cast<double>(bytes) / (1ull << 20) << " MiB";
  else o << static_cast<double>(bytes) / 1024.0 << " KiB";
  return o.str();
}

ordered_json to_json(const Image& img) {
  ordered_json j;
  j["schema"] = "gpuenv-inspect-v1";
  j["image"] = img.where;
  j["digest"] = img.digest;
  j["created"] = img.created;
  j["architecture"] = img.architecture;
  j["labels"] = img.labels;
  j["env"] = img.env;
  auto layers = ordered_json::array();
  for (const auto& l : img.layers) {
    auto pk = ordered_json::array();
    for (const auto& p : l.packages) pk.push_back({{"name", p.name}, {"version", p.version}, {"kind", p.kind}, {"bytes", p.bytes}});
    layers.push_back({{"name", l.name}, {"digest", l.digest}, {"size", l.size}, {"packages", pk}});
  }
  j["layers"] = layers;
  return j;
}

}  // namespace

int cmd_inspect(const InspectOptions& o, Context& ctx) {
  auto a = load(o.image, o.plain_http, ctx);
  if (!a) return report_error(a.error(), o.json, ctx);
  if (o.diff.empty()) {
    if (o.json) {
      *ctx.out << to_json(*a).dump(2) << "\n";
      return k_exit_ok;
    }
    std::uint64_t total = 0;
    for (const auto& l : a->layers) total += l.size;
    *ctx.out << a->where << "  " << a->digest << "\n  " << a->architecture << ", created " << a->created << ", " << human(total) << " in " << a->layers.size()
             << " layers\n";
    for (const auto& [k, v] : a->labels.items()) *ctx.out << "  label " << k << "=" << v.get<std::string>() << "\n";
    for (const auto& l : a->layers) {
      std::uint64_t bytes = 0;
      for (const auto& p : l.packages) bytes += p.bytes;
      *ctx.out << "  layer " << std::left << std::setw(10) << l.name << std::right << std::setw(11) << human(l.size) << " compressed, "
               << l.packages.size() << " packages, " << human(bytes) << " installed\n";
      std::vector<Package> by_size = l.packages;
      std::sort(by_size.begin(), by_size.end(), [](const Package& x, const Package& y) { return x.bytes != y.bytes ? x.bytes > y.bytes : x.name < y.name; });
      const std::size_t shown = o.all ? by_size.size() : std::min<std::size_t>(by_size.size(), 5);
      for (std::size_t i = 0; i < shown; ++i)
        *ctx.out << "      " << std::setw(11) << human(by_size[i].bytes) << "  " << by_size[i].name << " " << by_size[i].version << " (" << by_size[i].kind << ")\n";
      if (shown < by_size.size()) *ctx.out << "      ... " << by_size.size() - shown << " more (--all)\n";
    }
    return k_exit_ok;
  }
  auto b = load(o.diff, o.plain_http, ctx);
  if (!b) return report_error(b.error(), o.json, ctx);
  ordered_json diff = ordered_json::array();
  std::map<std::string, const Layer*> before, after;
  for (const auto& l : a->layers) before[l.name] = &l;
  for (const auto& l : b->layers) after[l.name] = &l;
  std::vector<std::string> names;
  for (const auto& l : a->layers) names.push_back(l.name);
  for (const auto& l : b->layers)
    if (!before.count(l.name)) names.push_back(l.name);
  for (const auto& name : names) {
    const Layer* x = before.count(name) ? before[name] : nullptr;
    const Layer* y = after.count(name) ? after[name] : nullptr;
    ordered_json d;
    d["layer"] = name;
    d["status"] = !x ? "added" : !y ? "removed" : x->digest == y->digest ? "unchanged" : "changed";
    d["size_before"] = x ? x->size : 0;
    d["size_after"] = y ? y->size : 0;
    std::map<std::string, const Package*> pa, pb;
    if (x)
      for (const auto& p : x->packages) pa[p.kind + ":" + p.name] = &p;
    if (y)
      for (const auto& p : y->packages) pb[p.kind + ":" + p.name] = &p;
    auto changes = ordered_json::array();
    for (const auto& [k, p] : pa) {
      auto it = pb.find(k);
      if (it == pb.end()) changes.push_back({{"name", p->name}, {"kind", p->kind}, {"before", p->version}, {"after", nullptr}});
      else if (it->second->version != p->version) changes.push_back({{"name", p->name}, {"kind", p->kind}, {"before", p->version}, {"after", it->second->version}});
    }
    for (const auto& [k, p] : pb)
      if (!pa.count(k)) changes.push_back({{"name", p->name}, {"kind", p->kind}, {"before", nullptr}, {"after", p->version}});
    d["packages"] = changes;
    diff.push_back(d);
  }
  if (o.json) {
    ordered_json j;
    j["schema"] = "gpuenv-inspect-diff-v1";
    j["before"] = {{"image", a->where}, {"digest", a->digest}};
    j["after"] = {{"image", b->where}, {"digest", b->digest}};
    j["layers"] = diff;
    *ctx.out << j.dump(2) << "\n";
    return k_exit_ok;
  }
  *ctx.out << a->digest << " -> " << b->digest << "\n";
  for (const auto& d : diff) {
    *ctx.out << "  layer " << std::left << std::setw(10) << d["layer"].get<std::string>() << std::right << " " << d["status"].get<std::string>();
    if (d["status"] == "changed") *ctx.out << " (" << human(d["size_before"]) << " -> " << human(d["size_after"]) << ")";
    *ctx.out << "\n";
    for (const auto& c : d["packages"]) {
      *ctx.out << "      " << c["name"].get<std::string>() << " (" << c["kind"].get<std::string>() << "): " << (c["before"].is_null() ? "added" : c["before"].get<std::string>())
               << " -> " << (c["after"].is_null() ? "removed" : c["after"].get<std::string>()) << "\n";
    }
  }
  return k_exit_ok;
}

}  // namespace gpuenv::cli
