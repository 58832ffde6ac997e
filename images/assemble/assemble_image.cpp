#include "images/assemble/assemble_image.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "base/time.hpp"
#include "base/cache/fetch_into_cache.hpp"
#include "base/archive/safe_extract.hpp"
#include "base/digest.hpp"
#include "base/file_io.hpp"
#include "base/json_field.hpp"
#include "base/safe_text.hpp"
#include "base/text.hpp"
#include "images/assemble/layer_writer.hpp"
#include "images/rootfs/package_trees.hpp"
#include "images/assemble/root_tree.hpp"
#include "images/assemble/cyclonedx.hpp"
#include "images/assemble/sbom.hpp"
#include "images/elf/loader_model.hpp"
#include "images/plan/gpu_rules.hpp"
#include "images/plan/image_config.hpp"
#include "images/plan/layer_plan.hpp"
#include "images/rootfs/deb_rootfs.hpp"
#include "images/rootfs/ld_cache.hpp"
#include "images/run/unpack.hpp"
#include "packages/wheels/markers.hpp"
#include "packages/wheels/wheel_install.hpp"

namespace gpuenv::images {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using assembly::build_error;
using assembly::k_build_io;
using assembly::Node;
using assembly::Owner;

/// A base image's file as unpacked: a later node with the same inode and change time was not touched.
struct BaseMark {
  ino_t ino = 0;
  std::int64_t ctime_ns = 0;
};

/// A base image under the build: what it is and what it left in the tree.
struct BaseImage {
  LayoutImage image;
  std::unordered_map<std::string, BaseMark> marks;  // path -> as unpacked
  std::vector<assembly::BasePackage> debs;          // what its dpkg status lists
};

ImageParameters image_parameters(const BuildRequest& rq) {
  return {rq.generator, rq.source_date_epoch, std::string(rq.platform.debian_arch()), rq.gzip_level, rq.compression, rq.zstd_level, rq.allow_missing};
}

/// The lock's packages as they reach the cache. A thread downloads what the cache lacks while the root is
/// assembled in lock order, and a package that must be unpacked waits only for its own file. Destroyed, it
/// waits for the downloads still running (they land in the cache, for the next build).
class PackageArrivals {
 public:
  void start(Fetcher& fetcher, BlobStore& store, std::vector<CacheRequest> wanted) {
    m_slots.assign(wanted.size(), std::nullopt);
    m_thread = std::jthread([this, &fetcher, &store, wanted = std::move(wanted)] {
      (void)fetch_into_cache(fetcher, store, wanted, [this](std::size_t i, const Result<CachedBlob>& blob) {
        {
          std::lock_guard lock(m_mu);
          m_slots[i] = blob;
        }
        m_cv.notify_all();
      });
    });
  }

  /// Package i's file in the cache, once it is there.
  Result<CachedBlob> wait(std::size_t i) {
    std::unique_lock lock(m_mu);
    m_cv.wait(lock, [&] { return m_slots[i].has_value(); });
    return *m_slots[i];
  }

  /// Waits for every download.
  void join() {
    if (m_thread.joinable()) m_thread.join();
  }

 private:
  std::mutex m_mu;
  std::condition_variable m_cv;
  std::vector<std::optional<Result<CachedBlob>>> m_slots;
  std::jthread m_thread;  // last: joined before the slots go
};

/// What one assembly carries from step to step.
struct Assembly {
  Assembly(const BuildRequest& request, std::optional<OciLayout> out)
      : rq(request), lock(*request.lock), out_layout(std::move(out)), lock_sha256(sha256_hex(request.lock_text)),
        reuse_key(images::reuse_key(request.lock_text, image_parameters(request))) {}

  const BuildRequest& rq;
  const resolver::Lock& lock;
  std::optional<OciLayout> out_layout;  // none when only the root is assembled (assemble_root)
  std::string lock_sha256;
  std::string reuse_key;
  std::string root;                        // the root filesystem being assembled
  PackageArrivals arrivals;               // per lock package: its file in the cache, as it arrives
  assembly::Owners owners;
  std::optional<BaseImage> base;
  std::string site_packages;               // relative to the root; "" without wheels
  std::vector<std::string> wheel_files;    // every file the wheels installed, relative to the root
  LdCache ld;
  PackageTreeStore trees{rq.package_tree_dir, rq.work_dir};
  LinkedFiles linked;            // files linked from it: their content identity
  std::string sbom;
  std::vector<Node> nodes;                 // the finished tree, less a base image's untouched files
  std::vector<RootEntry> entries;          // the same, as the plan sees them
  std::vector<std::string> notes;

  void step(const std::string& s) const {
    if (rq.on_step) rq.on_step(s);
  }
  OciLayout& layout() { return *out_layout; }
};

/// The layers of the image with their config and manifest entries, bottom to top.
struct ImageLayers {
  std::vector<BuiltLayer> layers;
  json diff_ids = json::array();
  json history = json::array();
  json manifest_layers = json::array();
  json base_config = json::object();
};

std::size_t count_kind(const resolver::Lock& lock, resolver::PackageKind kind) {
  return static_cast<std::size_t>(std::count_if(lock.packages.begin(), lock.packages.end(), [&](const auto& p) { return p.kind == kind; }));
}

/// Writes index.json naming MANIFEST (as TAG). Attachments already there for this very manifest (its marks:
/// "sha256-<hex>.att") stay; those of other manifests go, and the layout's garbage collection then drops their blobs.
Status write_index(OciLayout& layout, Descriptor manifest, const std::string& tag) {
  if (!tag.empty()) manifest.annotations["org.opencontainers.image.ref.name"] = tag;
  std::vector<Descriptor> entries = {manifest};
  std::ifstream in(layout.dir() + "/index.json", std::ios::binary);
  const json old = in ? json::parse(in, nullptr, false) : json();
  if (old.is_object() && old.contains("manifests") && old["manifests"].is_array())
    for (const auto& m : old["manifests"]) {
      auto d = parse_descriptor(m, "index.json");
      if (!d) continue;
      const auto name = d->annotations.find("org.opencontainers.image.ref.name");
      if (name != d->annotations.end() && is_attachment_tag(name->second) && name->second.compare(7, 64, manifest.digest.hex()) == 0)
        entries.push_back(*d);
    }
  return layout.write_index(entries);
}

// ---- Reuse -------------------------------------------------------------------------------------------------

/// The layers a finished manifest names, with their diff_ids; none when a blob is missing.
std::optional<std::vector<BuiltLayer>> previous_layers(OciLayout& layout, const json& manifest, const json& config) {
  std::vector<BuiltLayer> out;
  bool complete = true;
  std::size_t i = 0;
  for (const auto& l : field_of_type(manifest, "layers", json::value_t::array)) {
    BuiltLayer bl;
    auto blob = parse_descriptor(l, layout.dir());
    if (!blob) return std::nullopt;
    bl.blob = Descriptor{blob->media_type, blob->digest, blob->size, {}};
    if (l.contains("annotations")) bl.name = l["annotations"].value("dev.gpuenv.layer", "");
    const auto& ids = config["rootfs"]["diff_ids"];
    if (i < ids.size()) bl.diff_id = ids[i].get<std::string>();
    bl.reused = true;
    if (!layout.has_blob(bl.blob.digest)) complete = false;
    out.push_back(bl);
    ++i;
  }
  if (!complete) return std::nullopt;
  return out;
}

/// The image an index entry names, when its manifest carries `key` and every blob is present.
std::optional<BuildResult> previous_image(OciLayout& layout, const json& entry, const std::string& key) {
  auto listed = parse_descriptor(entry, layout.dir());
  if (!listed || !layout.has_blob(listed->digest)) return std::nullopt;
  std::ifstream mf(layout.blob_path(listed->digest), std::ios::binary);
  const json manifest = json::parse(mf, nullptr, false);
  if (manifest.is_discarded() || !manifest.is_object()) return std::nullopt;
  if (!manifest.contains("annotations") || manifest["annotations"].value("dev.gpuenv.build.key", "") != key) return std::nullopt;
  BuildResult r;
  r.unchanged = true;
  r.manifest = Descriptor{listed->media_type, listed->digest, listed->size, {}};
  auto config_d = parse_descriptor(manifest.contains("config") ? manifest["config"] : json(), layout.dir());
  if (!config_d || !layout.has_blob(config_d->digest)) return std::nullopt;
  r.config = Descriptor{config_d->media_type, config_d->digest, config_d->size, {}};
  std::ifstream cf(layout.blob_path(r.config.digest), std::ios::binary);
  const json config = json::parse(cf, nullptr, false);
  if (config.is_discarded()) return std::nullopt;
  auto layers = previous_layers(layout, manifest, config);
  if (!layers) return std::nullopt;
  r.layers = std::move(*layers);
  return r;
}

/// The manifest already in the layout for this reuse key, if every blob it names is present.
std::optional<BuildResult> previous_build(OciLayout& layout, const std::string& key) {
  std::ifstream in(layout.dir() + "/index.json", std::ios::binary);
  if (!in) return std::nullopt;
  const json index = json::parse(in, nullptr, false);
  if (index.is_discarded() || !index.contains("manifests") || !index["manifests"].is_array()) return std::nullopt;
  for (const auto& m : index["manifests"]) {
    if (auto r = previous_image(layout, m, key)) return r;
    // A multi-platform build's index: its platforms' manifests.
    auto listed = parse_descriptor(m, layout.dir());
    if (!listed || listed->media_type != media_type::k_index || !layout.has_blob(listed->digest)) continue;
    std::ifstream nested_in(layout.blob_path(listed->digest), std::ios::binary);
    const json nested = json::parse(nested_in, nullptr, false);
    if (nested.is_discarded() || !nested.contains("manifests") || !nested["manifests"].is_array()) continue;
    for (const auto& inner : nested["manifests"])
      if (auto r = previous_image(layout, inner, key)) return r;
  }
  return std::nullopt;
}

// ---- The shared cache --------------------------------------------------------------------------------------

assembly::LayerCompression layer_compression(const BuildRequest& rq) {
  assembly::LayerCompression c;
  c.zstd = rq.compression == Compression::zstd;
  c.gzip_level = rq.gzip_level;
  c.zstd_level = rq.zstd_level;
  c.threads = rq.threads;
  c.memo_dir = rq.layer_memo_dir;
  return c;
}

/// The SBOM's file beside the layout: sbom.spdx.json, or one per platform of a multi-platform build.
std::string sbom_file_name(const BuildRequest& rq) { return rq.write_index ? "sbom.spdx.json" : "sbom." + rq.platform.file_tag() + ".spdx.json"; }

/// The CycloneDX SBOM beside the layout (sbom.cdx.json, or sbom.<platform>.cdx.json), made from the SPDX one
/// (SPDX) and the image's manifest digest, which only the finished image knows.
Status write_cyclonedx(const BuildRequest& rq, const std::string& layout_dir, const Digest& manifest, std::string_view spdx) {
  const std::string base = rq.lock->base;  // "debian:12" -> the purl qualifier distro=debian-12
  std::string distro = base;
  std::replace(distro.begin(), distro.end(), ':', '-');
  const CycloneDxImage image{manifest, std::string(rq.platform.oci_architecture()), distro, rq.generator.substr(rq.generator.rfind(' ') + 1)};
  GPUENV_TRY(text, cyclonedx_json(spdx, image, layout_dir + "/" + sbom_file_name(rq)));
  return assembly::write_file(layout_dir + "/" + cyclonedx_file_name(sbom_file_name(rq)), text);
}

/// The identity under which the shared cache knows this image: the reuse key and the compressor's implementation.
std::string image_identity(const Assembly& a) { return "image\n" + a.reuse_key + "\n" + assembly::compressor_identity(layer_compression(a.rq)); }

/// Why the shared cache's image is not this build's image, or "" when it is: its manifest must carry this build's
/// key and name the entry's config and layers, and its config this platform and one diff_id per layer.
std::string shared_image_mismatch(const Assembly& a, const SharedCache::Image& found, const json& manifest, const json& config) {
  if (!manifest.is_object() || string_field(manifest, "mediaType") != media_type::k_manifest) return "its manifest is not an OCI image manifest";
  if (string_field(field_of_type(manifest, "annotations", json::value_t::object), "dev.gpuenv.build.key") != a.reuse_key) return "its manifest was built from another lock or with other options";
  auto config_d = parse_descriptor(manifest.contains("config") ? manifest["config"] : json(), "the cache's manifest");
  if (!config_d || config_d->digest != found.entry.config.digest || config_d->size != found.entry.config.size) return "its manifest names another config";
  const json layers = field_of_type(manifest, "layers", json::value_t::array);
  if (layers.size() != found.entry.layers.size()) return "its manifest names other layers";
  for (std::size_t i = 0; i < layers.size(); ++i) {
    auto d = parse_descriptor(layers[i], "the cache's manifest");
    const Descriptor& want = found.entry.layers[i];
    if (!d || d->digest != want.digest || d->size != want.size || d->media_type != want.media_type) return "its manifest names other layers";
  }
  if (!config.is_object()) return "its config is not JSON";
  const auto platform = resolver::platform_of(string_field(config, "os"), string_field(config, "architecture"), string_field(config, "variant"));
  if (!platform || *platform != a.rq.platform) return "its config is for another platform";
  const json ids = field_of_type(field_of_type(config, "rootfs", json::value_t::object), "diff_ids", json::value_t::array);
  if (ids.size() != layers.size() || !std::all_of(ids.begin(), ids.end(), [](const json& id) { return id.is_string() && Digest::parse(id.get<std::string>()); }))
    return "its config's diff_ids do not match its layers";
  return {};
}

/// The "name version" of each package a layer entry's dev.gpuenv.packages annotation lists.
std::vector<std::string> annotated_packages(const json& layer) {
  std::vector<std::string> out;
  if (!layer.contains("annotations") || !layer["annotations"].is_object()) return out;
  const json held = json::parse(string_field(layer["annotations"], "dev.gpuenv.packages", "[]"), nullptr, false);
  if (!held.is_array()) return out;
  for (const auto& p : held)
    if (p.is_array() && p.size() >= 2 && p[0].is_string() && p[1].is_string())
      out.push_back(safe_text(p[0].get<std::string>() + " " + p[1].get<std::string>(), 200));  // a registry's text, printed later
  return out;
}

/// The image of this build's identity from the shared cache, checked, written into the layout without a package
/// fetched or a layer compressed: its manifest, config and SBOM, and each layer downloaded or left in the registry.
std::optional<BuildResult> take_shared_image(Assembly& a) {
  SharedCache* sc = a.rq.shared_cache;
  if (!sc) return std::nullopt;
  const std::string identity = image_identity(a);
  auto found = sc->find_image(identity, a.rq.platform);
  if (!found) return std::nullopt;
  const json manifest = json::parse(found->manifest, nullptr, false);
  const json config = json::parse(found->config, nullptr, false);
  if (const std::string why = shared_image_mismatch(a, *found, manifest, config); !why.empty()) {
    sc->note("refused the cache's image " + found->entry.manifest.digest.str() + " for this lock: " + why + "; building it");
    return std::nullopt;
  }
  BuildResult r;
  r.shared = true;
  r.lock_sha256 = a.lock_sha256;
  const json& layers = manifest["layers"];
  for (std::size_t i = 0; i < layers.size(); ++i) {
    BuiltLayer bl;
    const Descriptor& d = found->entry.layers[i];
    bl.blob = Descriptor{d.media_type, d.digest, d.size, {}};
    bl.diff_id = config["rootfs"]["diff_ids"][i].get<std::string>();  // checked by shared_image_mismatch
    bl.name = string_field(field_of_type(layers[i], "annotations", json::value_t::object), "dev.gpuenv.layer");
    bl.packages = annotated_packages(layers[i]);
    bl.reused = bl.shared = true;
    if (!a.layout().has_blob(d.digest)) {
      auto remote = sc->take_blob(d, a.layout());
      if (!remote) {
        sc->note("could not take layer " + d.digest.str() + " of the cache's image (" + remote.error().message + "); building the image");
        return std::nullopt;
      }
      bl.remote = *remote;
    }
    r.layers.push_back(std::move(bl));
  }
  auto config_d = a.layout().put_bytes(found->config, media_type::k_config);
  auto manifest_d = a.layout().put_bytes(found->manifest, media_type::k_manifest);
  if (!config_d || !manifest_d || manifest_d->digest != found->entry.manifest.digest) {
    sc->note("could not write the cache's image into " + a.layout().dir() + "; building it");
    return std::nullopt;
  }
  r.config = *config_d;
  r.manifest = *manifest_d;
  if (auto st = assembly::write_file(a.layout().dir() + "/" + sbom_file_name(a.rq), found->sbom); !st) {
    sc->note("could not write the cache's SBOM (" + st.error().message + "); building the image");
    return std::nullopt;
  }
  if (auto st = write_cyclonedx(a.rq, a.layout().dir(), r.manifest.digest, found->sbom); !st) {
    sc->note("could not write the CycloneDX SBOM of the cache's image (" + st.error().message + "); building the image");
    return std::nullopt;
  }
  if (a.rq.write_index) {
    if (auto st = write_index(a.layout(), r.manifest, a.rq.tag); !st) {
      sc->note("could not write index.json (" + st.error().message + "); building the image");
      return std::nullopt;
    }
    (void)a.layout().collect_garbage();
  }
  return r;
}

/// Tells the shared cache what this build made (or found in its layout), with the image's SBOM.
void tell_shared_cache(Assembly& a, const BuildResult& built, std::string sbom) {
  if (!a.rq.shared_cache) return;
  CachedImage entry;
  entry.platform = a.rq.platform;
  entry.manifest = Descriptor{built.manifest.media_type, built.manifest.digest, built.manifest.size, {}};
  entry.config = Descriptor{built.config.media_type, built.config.digest, built.config.size, {}};
  for (const auto& l : built.layers) entry.layers.push_back(Descriptor{l.blob.media_type, l.blob.digest, l.blob.size, {}});
  a.rq.shared_cache->made_image(image_identity(a), std::move(entry), std::move(sbom));
}

// ---- The root filesystem -----------------------------------------------------------------------------------

/// Starts the downloads; the packages are unpacked as they arrive (PackageArrivals).
Status fetch_packages(Assembly& a) {
  std::vector<CacheRequest> wanted;
  for (const auto& p : a.lock.packages) wanted.push_back({p.url, p.sha256, p.size});
  a.step("fetching " + std::to_string(wanted.size()) + " packages");
  a.arrivals.start(*a.rq.fetcher, *a.rq.cache, std::move(wanted));
  return ok_status();
}

/// Package i's file in the cache, waiting for it; a failed download names the package.
Result<std::string> package_file(Assembly& a, std::size_t i) {
  auto blob = a.arrivals.wait(i);
  if (!blob) {
    Error e = std::move(blob).error();
    e.while_("getting " + a.lock.packages[i].name + " " + a.lock.packages[i].version);
    return e;
  }
  return blob->path;
}

/// Every package is in the cache, also those whose unpacked tree the store already held: a build from a lock
/// fails the same way whatever the store holds.
Status await_packages(Assembly& a) {
  a.arrivals.join();
  for (std::size_t i = 0; i < a.lock.packages.size(); ++i) GPUENV_CHECK(package_file(a, i));
  return ok_status();
}

Status check_cuda_source(Assembly& a) { return check_one_cuda_source(a.lock); }

Status create_root(Assembly& a) {
  a.root = a.rq.work_dir + "/rootfs";
  std::error_code ec;
  fs::remove_all(a.root, ec);
  fs::create_directories(a.root, ec);
  if (ec) return io_error(k_build_io, "cannot create the root filesystem directory", a.root, ec.value());
  return ok_status();
}

/// A base image's layers, as the bottom of the tree; what they hold is remembered so that only what the build
/// adds or changes goes into gpuenv's layers.
Status unpack_base_image(Assembly& a) {
  if (a.rq.base_layout_dir.empty()) return ok_status();
  a.step("unpacking the base image");
  auto image = read_layout_image(a.rq.base_layout_dir, a.rq.base_manifest_digest);
  if (!image) return std::move(image).error();
  std::vector<ExtractedEntry> entries;
  if (auto st = extract_image_layers(a.rq.base_layout_dir, *image, a.root, &entries); !st) {
    Error e = st.error();
    e.while_("unpacking the base image " + a.rq.base_manifest_digest);
    return e;
  }
  auto nodes = assembly::walk_tree(a.root, true);
  if (!nodes) return std::move(nodes).error();
  BaseImage base;
  for (const auto& n : *nodes) base.marks[n.path] = BaseMark{n.ino, n.ctime_ns};
  // Mode and owner as the base's layers give them (the tree itself belongs to whoever runs the build).
  for (const auto& e : entries) a.owners[e.path] = Owner{k_no_package, true, e.mode, e.uid, e.gid};
  base.image = std::move(*image);
  // Beneath the root: a base whose dpkg status is a link to a host file gets nothing of the host read.
  base.debs = assembly::base_packages(read_file_beneath(a.root, "var/lib/dpkg/status", std::size_t{64} << 20).value_or(""));
  a.base = std::move(base);
  return ok_status();
}

/// One .deb: unpacked into the root, or (with the package store) taken from its tree there and linked.
Result<InstalledDeb> install_one_deb(Assembly& a, std::size_t i, const ExtractOptions& xo) {
  const auto& p = a.lock.packages[i];
  const std::string origin = p.name + "_" + p.version + ".deb";
  auto unpack = [&](const std::string& root) -> Result<InstalledDeb> {
    GPUENV_TRY(file, package_file(a, i));
    auto m = assembly::Mapped::open(file);
    if (!m) return std::move(m).error();
    return install_deb(m->bytes(), origin, root, xo);
  };
  auto tree = a.trees.get("deb\n" + p.sha256.hex(), [&](const std::string& root) -> Result<TreeRecord> {
    GPUENV_TRY(deb, unpack(root));
    return TreeRecord{std::move(deb), {}};
  });
  if (!tree) return std::move(tree).error();
  GPUENV_CHECK(link_tree(*tree, a.root, origin, a.linked));
  return std::move(tree->record.deb);
}

/// The .debs in lock order, then the dpkg database and base-passwd's files.
Status install_debs(Assembly& a) {
  ExtractOptions xo;
  xo.keep = [](std::string_view p) { return keep_in_minimal_image(p); };
  a.step("unpacking " + std::to_string(count_kind(a.lock, resolver::PackageKind::deb)) + " .debs");
  std::vector<InstalledDeb> debs;
  for (std::size_t i = 0; i < a.lock.packages.size(); ++i) {
    if (a.lock.packages[i].kind != resolver::PackageKind::deb) continue;
    auto installed = install_one_deb(a, i, xo);
    if (!installed) return std::move(installed).error();
    for (const auto& e : installed->entries) a.owners[e.path] = Owner{static_cast<int>(i), true, e.mode, e.uid, e.gid};
    debs.push_back(std::move(*installed));
  }
  if (debs.empty()) return ok_status();
  if (auto st = write_dpkg_database(a.root, debs); !st) return std::move(st).error();
  return apply_base_passwd(a.root);
}

Status install_one_wheel(Assembly& a, std::size_t i, const packages::InstallScheme& scheme, const std::string& python) {
  const auto& p = a.lock.packages[i];
  const std::string url_name = p.url.substr(p.url.rfind('/') + 1);
  const std::string filename = url_name.substr(0, url_name.find_first_of("?#"));
  packages::InstallScheme s = scheme;
  s.headers = "usr/local/include/" + python + "/" + p.name;
  packages::WheelInstallOptions wo;
  wo.requested = layer_of(p, a.lock) == "user";
  wo.accept_record_mismatch = std::any_of(a.rq.allow_record_mismatch.begin(), a.rq.allow_record_mismatch.end(), [&](const std::string& w) {
    const auto eq = w.find("==");
    return eq != std::string::npos && packages::canonicalize_name(w.substr(0, eq)) == packages::canonicalize_name(p.name) && w.substr(eq + 2) == p.version;
  });
  std::vector<std::string> mismatches;
  auto unpack = [&](const std::string& root) -> Result<packages::InstalledWheel> {
    GPUENV_TRY(file, package_file(a, i));
    auto m = assembly::Mapped::open(file);
    if (!m) return std::move(m).error();
    auto installed = packages::install_wheel(m->bytes(), filename, root, s, wo);
    if (!installed) {
      Error e = std::move(installed).error();
      e.while_("installing " + p.name + " " + p.version);
      return e;
    }
    mismatches = installed->record_mismatches;
    return installed;
  };
  // Everything the installed files depend on: the wheel, its file name, the scheme and REQUESTED.
  const std::string inputs = "wheel\n" + p.sha256.hex() + "\n" + filename + "\n" + s.purelib + "\n" + s.platlib + "\n" + s.scripts + "\n" + s.headers +
                             "\n" + s.data + "\n" + s.interpreter + "\n" + (wo.requested ? "requested" : "dependency");
  auto tree = a.trees.get(inputs, [&](const std::string& root) -> Result<TreeRecord> {
    GPUENV_TRY(installed, unpack(root));
    return TreeRecord{{}, std::move(installed.files)};
  });
  if (!tree) return std::move(tree).error();
  if (wo.accept_record_mismatch)
    a.notes.push_back(p.name + " " + p.version + " installed with --allow-record-mismatch" +
                      (mismatches.empty() ? std::string(" (its files were taken from an earlier install in the cache)")
                                          : ": its RECORD gives other hashes or sizes for " + join(mismatches, ", ")));
  GPUENV_CHECK(link_tree(*tree, a.root, filename, a.linked));
  for (const auto& f : tree->record.files) {
    a.owners[f] = Owner{static_cast<int>(i), false, 0, 0, 0};
    a.wheel_files.push_back(f);
  }
  return ok_status();
}

/// The wheels, for the image's Python (/usr/local, as Debian's pip would).
Status install_wheels(Assembly& a) {
  const std::size_t n_wheels = count_kind(a.lock, resolver::PackageKind::wheel);
  if (n_wheels == 0) return ok_status();
  if (a.lock.python.empty())
    return build_error("build.no_python", "the lock has wheels but no Python version", "", "re-create the lock from a spec that sets python");
  const std::string py = "python" + a.lock.python;
  packages::InstallScheme scheme;
  scheme.purelib = "usr/local/lib/" + py + "/dist-packages";
  scheme.platlib = scheme.purelib;
  scheme.scripts = "usr/local/bin";
  scheme.data = "usr/local";
  scheme.interpreter = "/usr/bin/" + py;
  a.site_packages = scheme.purelib;
  a.step("installing " + std::to_string(n_wheels) + " wheels");
  for (std::size_t i = 0; i < a.lock.packages.size(); ++i)
    if (a.lock.packages[i].kind == resolver::PackageKind::wheel)
      if (auto st = install_one_wheel(a, i, scheme, py); !st) return st;
  return ok_status();
}

/// The plan's ld.so.conf.d entry for the wheels' CUDA libraries, then the dynamic linker's cache.
Status configure_loader(Assembly& a) {
  if (auto conf = wheel_cuda_loader_config(wheel_cuda_library_dirs(a.wheel_files, a.site_packages)))
    if (auto st = write_file_beneath(a.root, conf->path, conf->text, 0644, "the image tree " + a.root); !st) return st;
  LdCacheOptions lo;
  lo.platform = a.rq.platform;
  lo.generator = "gpuenv";
  std::error_code ec;
  if (!fs::exists(a.root + "/etc", ec) && a.lock.packages.empty()) return ok_status();
  auto cache = write_ld_cache(a.root, lo);
  if (!cache) return std::move(cache).error();
  a.ld = std::move(*cache);
  return ok_status();
}

/// gpuenv's own files: the lock and the SBOM.
Status write_gpuenv_files(Assembly& a) {
  assembly::SbomInputs in;
  in.lock_sha256 = a.lock_sha256;
  in.source_date_epoch = a.rq.source_date_epoch;
  in.generator = a.rq.generator;
  in.distro = a.lock.base.substr(0, a.lock.base.find(':'));
  if (a.base) {
    in.base_digest = a.base->image.manifest_digest;
    in.base = a.base->debs;
  }
  // Each wheel's installed METADATA, by the lock's name for it (the owners map is unordered; this map is not).
  std::map<std::string, std::string> wheel_metadata;
  const std::string metadata_suffix = ".dist-info/METADATA";
  for (const auto& [path, owner] : a.owners)
    if (owner.package >= 0 && static_cast<std::size_t>(owner.package) < a.lock.packages.size() && path.size() > metadata_suffix.size() &&
        path.compare(path.size() - metadata_suffix.size(), metadata_suffix.size(), metadata_suffix) == 0 &&
        a.lock.packages[static_cast<std::size_t>(owner.package)].kind == resolver::PackageKind::wheel)
      wheel_metadata[packages::canonicalize_name(a.lock.packages[static_cast<std::size_t>(owner.package)].name)] = path;
  in.facts = assembly::read_package_facts(a.root, wheel_metadata, a.rq.platform, a.lock.python);
  a.sbom = assembly::sbom_json(a.lock, in);
  // Beneath the root: a package that made usr/share/gpuenv a link to a host directory gets no file written there.
  if (auto st = write_file_beneath(a.root, "usr/share/gpuenv/gpuenv.lock", a.rq.lock_text, 0644, "the image tree " + a.root); !st) return st;
  return write_file_beneath(a.root, "usr/share/gpuenv/sbom.spdx.json", a.sbom, 0644, "the image tree " + a.root);
}

// ---- Checks on the finished tree ---------------------------------------------------------------------------

/// The finished tree. A base image's untouched files stay in its own layers and are not checked: its maker
/// answers for them.
Status read_finished_tree(Assembly& a) {
  a.step("checking the image tree");
  auto nodes = assembly::walk_tree(a.root, a.base.has_value());
  if (!nodes) return std::move(nodes).error();
  a.nodes = std::move(*nodes);
  if (a.base) {
    const auto& marks = a.base->marks;
    auto untouched = [&](const Node& n) {
      auto it = marks.find(n.path);
      return it != marks.end() && it->second.ino == n.ino && it->second.ctime_ns == n.ctime_ns;
    };
    a.nodes.erase(std::remove_if(a.nodes.begin(), a.nodes.end(), untouched), a.nodes.end());
  }
  a.entries = assembly::root_entries(a.nodes, a.owners);
  return ok_status();
}

Status check_driver_libraries(Assembly& a) { return check_no_driver_library(a.entries, a.lock); }

/// "libfoo.so.1 (needed by /usr/bin/x and 2 more); ..." for at most five libraries.
std::string describe_missing(const std::map<std::string, std::vector<std::string>>& missing) {
  std::string what;
  std::size_t shown = 0;
  for (const auto& [lib, users] : missing) {
    if (shown++ == 5) {
      what += "; and " + std::to_string(missing.size() - 5) + " more";
      break;
    }
    what += (what.empty() ? "" : "; ") + lib + " (needed by " + users.front() + (users.size() > 1 ? " and " + std::to_string(users.size() - 1) + " more" : "") + ")";
  }
  return what;
}

std::string optional_plugin_note(const std::string& lib, const std::vector<std::string>& users) {
  return "optional plugin" + std::string(users.size() > 1 ? "s " : " ") + users.front() +
         (users.size() > 1 ? " and " + std::to_string(users.size() - 1) + " more" : "") + " cannot load here: " + lib +
         " is not in the image (a program that dlopens it falls back or fails then; add the package that provides " + lib + " if the fleet uses it)";
}

/// Every ELF file's DT_NEEDED must resolve inside the image, as ld.so would search (driver libraries and
/// --allow-missing-lib names excepted); optional plugins that cannot load become notes.
Status check_needed_libraries(Assembly& a) {
  std::vector<std::pair<std::string, std::string>> cached;
  for (const auto& e : a.ld.entries) cached.emplace_back(e.key, e.path);
  const std::string tri(a.rq.platform.triplet());
  LoaderModel loader(a.root, std::move(cached), {"/lib/" + tri, "/usr/lib/" + tri, "/lib", "/usr/lib"});
  std::vector<std::string> objects;
  for (const auto& n : a.nodes) {
    if (n.type != TarEntry::Type::file) continue;
    if ((n.st_mode & 0111) == 0 && fs::path(n.path).filename().string().find(".so") == std::string::npos) continue;  // neither executable nor a library
    objects.push_back("/" + n.path);
  }
  const auto& allowed = a.rq.allow_missing;
  const auto loadable = loader.unresolved(
      objects, [&](const std::string& name) { return is_driver_library(name) || std::find(allowed.begin(), allowed.end(), name) != allowed.end(); });
  for (const auto& [lib, users] : loadable.optional) a.notes.push_back(optional_plugin_note(lib, users));
  if (loadable.required.empty()) return ok_status();
  return build_error("build.unresolved_library", "shared libraries needed inside the image are missing: " + describe_missing(loadable.required), "",
                     "add the package that provides them (spec packages.apt or packages.pip), or accept a library that is "
                     "loaded only optionally with --allow-missing-lib NAME");
}

// ---- Layers and the image's documents ----------------------------------------------------------------------

/// The base image's layers, as they are (their blobs copied into this layout), below gpuenv's.
Status add_base_layers(Assembly& a, ImageLayers& out) {
  a.step("copying the base image's layers");
  out.base_config = a.base->image.config;
  auto layers = assembly::copy_base_layers(a.layout(), a.rq.base_layout_dir, a.rq.base_manifest_digest, a.base->image.manifest, out.base_config);
  if (!layers) return std::move(layers).error();
  for (auto& bl : *layers) {
    out.diff_ids.push_back(bl.diff_id);
    json layer = {{"mediaType", bl.blob.media_type}, {"digest", bl.blob.digest.str()}, {"size", bl.blob.size}};
    layer["annotations"] = {{"dev.gpuenv.layer", "base-image"}};
    out.manifest_layers.push_back(layer);
    out.layers.push_back(std::move(bl));
  }
  if (out.base_config.contains("history") && out.base_config["history"].is_array()) out.history = out.base_config["history"];
  return ok_status();
}

/// The manifest's entry for one of gpuenv's layers; what it holds is annotated for `gpuenv inspect`:
/// [name, version, kind, bytes] per package.
json gpuenv_layer_entry(const BuiltLayer& bl, const LayerPlan& plan, const resolver::Lock& lock) {
  json layer = {{"mediaType", bl.blob.media_type}, {"digest", bl.blob.digest.str()}, {"size", bl.blob.size}};
  json held = json::array();
  for (const auto& pb : plan.package_bytes) {
    const auto& p = lock.packages[pb.package];
    held.push_back(json::array({p.name, p.version, std::string(resolver::to_string(p.kind)), pb.bytes}));
  }
  layer["annotations"] = {{"dev.gpuenv.layer", plan.name}, {"dev.gpuenv.packages", held.dump()}};
  return layer;
}

/// The layer from the shared cache for IDENTITY, when its entry's file list is this layer's and its blob can be had.
std::optional<BuiltLayer> shared_layer(Assembly& a, const assembly::LayerStream& stream, const std::string& name, const std::string& identity,
                                       const Digest& files) {
  SharedCache* sc = a.rq.shared_cache;
  auto found = sc->find_layer(identity, a.rq.platform);
  if (!found) return std::nullopt;
  const char* type = a.rq.compression == Compression::zstd ? media_type::k_layer_zstd : media_type::k_layer_gzip;
  if (found->files != files || found->blob.media_type != type) {
    sc->note("refused the cache's " + name + " layer " + found->blob.digest.str() + ": its entry names another " +
             (found->blob.media_type != type ? "compression" : "file list") + " than this build's " + name + " layer; writing it");
    return std::nullopt;
  }
  auto size = stream.size();
  if (!size) return std::nullopt;
  auto remote = a.layout().has_blob(found->blob.digest) ? Result<bool>(false) : sc->take_blob(found->blob, a.layout());
  if (!remote) {
    sc->note("could not take the cache's " + name + " layer (" + remote.error().message + "); writing it");
    return std::nullopt;
  }
  BuiltLayer bl;
  bl.name = name;
  bl.blob = Descriptor{found->blob.media_type, found->blob.digest, found->blob.size, {}};
  bl.diff_id = found->diff_id.str();
  bl.uncompressed_size = *size;
  bl.entries = stream.entry_count();
  bl.reused = true;
  bl.shared = true;
  bl.remote = *remote;
  return bl;
}

Status add_gpuenv_layers(Assembly& a, const std::vector<LayerPlan>& plan, ImageLayers& out) {
  const assembly::LayerCompression c = layer_compression(a.rq);
  const assembly::ContentId content_id = [&](const Node& n) {
    auto it = a.linked.find({n.dev, n.ino});
    return it == a.linked.end() ? std::string() : it->second;
  };
  for (const auto& layer : plan) {
    a.step("writing layer " + layer.name);
    std::vector<const Node*> nodes;
    for (std::size_t i : layer.entries) nodes.push_back(&a.nodes[i]);
    assembly::LayerStream stream(a.root, std::move(nodes), a.owners, a.rq.source_date_epoch);
    auto key = stream.key(content_id);
    if (!key) return std::move(key).error();
    const std::string identity = "layer\n" + *key + "\n" + assembly::compressor_identity(c);
    assembly::OtherSource other;
    std::optional<Digest> files;  // the layer's file list, for the shared cache only
    if (a.rq.shared_cache) {
      files = stream.files_digest();
      other = [&] { return shared_layer(a, stream, layer.name, identity, *files); };
    }
    auto bl = assembly::write_layer(a.layout(), stream, layer.name, c, a.root, *key, other);
    if (!bl) return std::move(bl).error();
    if (files && !bl->shared)
      if (auto diff_id = Digest::parse(bl->diff_id))
        a.rq.shared_cache->made_layer(identity, CachedLayer{{}, a.rq.platform, layer.name, Descriptor{bl->blob.media_type, bl->blob.digest, bl->blob.size, {}}, *diff_id, *files});
    bl->packages = layer.packages;
    out.diff_ids.push_back(bl->diff_id);
    out.history.push_back({{"created", format_rfc3339_utc(a.rq.source_date_epoch)},
                           {"created_by", "gpuenv build: " + layer.name + " layer (" + std::to_string(bl->packages.size()) + " packages)"}});
    out.manifest_layers.push_back(gpuenv_layer_entry(*bl, layer, a.lock));
    out.layers.push_back(std::move(*bl));
  }
  if (out.layers.size() > 127) return build_error("build.too_many_layers", "more than 127 layers", "", "");
  return ok_status();
}

/// What the base image's config brings into the image's (its string variables and labels).
BaseImageConfig base_image_config(const json& base_config, const std::string& manifest_digest) {
  BaseImageConfig out;
  out.manifest_digest = manifest_digest;
  const json bc = field_of_type(base_config, "config", json::value_t::object);
  if (!bc.is_object()) return out;
  if (bc.contains("Env") && bc["Env"].is_array())
    for (const auto& e : bc["Env"])
      if (e.is_string()) out.env.push_back(e.get<std::string>());
  if (bc.contains("Labels") && bc["Labels"].is_object())
    for (const auto& [k, v] : bc["Labels"].items())
      if (v.is_string()) out.labels[k] = v.get<std::string>();
  return out;
}

/// The config, the manifest, the SBOM beside the layout and index.json, last.
Result<BuildResult> write_image_documents(Assembly& a, ImageLayers layers) {
  const std::string created = format_rfc3339_utc(a.rq.source_date_epoch);
  std::optional<BaseImageConfig> base;
  if (a.base) base = base_image_config(layers.base_config, a.rq.base_manifest_digest);
  const ImageConfigPlan plan = plan_image_config(a.lock, a.lock_sha256, a.rq.source_date_epoch, base ? &*base : nullptr);
  json settings = {{"Env", plan.env}, {"Labels", plan.labels}};
  if (!plan.cmd.empty()) settings["Cmd"] = plan.cmd;  // a slim base without Python names none
  json config = {{"created", created},
                 {"architecture", std::string(a.rq.platform.oci_architecture())},
                 {"os", std::string(a.rq.platform.os())},
                 {"config", std::move(settings)},
                 {"rootfs", {{"type", "layers"}, {"diff_ids", layers.diff_ids}}},
                 {"history", layers.history}};
  if (!a.rq.platform.oci_variant().empty()) config["variant"] = std::string(a.rq.platform.oci_variant());
  auto config_d = a.layout().put_bytes(config.dump(), media_type::k_config);
  if (!config_d) return std::move(config_d).error();
  const json manifest = {{"schemaVersion", 2},
                         {"mediaType", media_type::k_manifest},
                         {"config", {{"mediaType", config_d->media_type}, {"digest", config_d->digest.str()}, {"size", config_d->size}}},
                         {"layers", layers.manifest_layers},
                         {"annotations", {{"org.opencontainers.image.created", created}, {"dev.gpuenv.build.key", a.reuse_key}}}};
  auto manifest_d = a.layout().put_bytes(manifest.dump(), media_type::k_manifest);
  if (!manifest_d) return std::move(manifest_d).error();
  if (auto st = assembly::write_file(a.layout().dir() + "/" + sbom_file_name(a.rq), a.sbom); !st) return std::move(st).error();
  if (auto st = write_cyclonedx(a.rq, a.layout().dir(), manifest_d->digest, a.sbom); !st) return std::move(st).error();
  if (a.rq.write_index) {
    if (auto st = write_index(a.layout(), *manifest_d, a.rq.tag); !st) return std::move(st).error();
    (void)a.layout().collect_garbage();
  }
  BuildResult result;
  result.manifest = *manifest_d;
  result.config = *config_d;
  result.layers = std::move(layers.layers);
  result.lock_sha256 = a.lock_sha256;
  result.notes = std::move(a.notes);
  return result;
}

/// The caller's own files (a VM's units and gpuenv itself), before the checks so that they are checked too.
Status add_files(Assembly& a) {
  if (!a.rq.add_files) return ok_status();
  a.step("adding the image's own files");
  return a.rq.add_files(a.root);
}

/// The steps up to the finished, checked tree, in order.
using Step = Status (*)(Assembly&);
constexpr Step k_tree_steps[] = {check_cuda_source, fetch_packages,  create_root,        unpack_base_image, install_debs,           install_wheels,       await_packages,
                                 configure_loader,  write_gpuenv_files, add_files,        read_finished_tree, check_driver_libraries, check_needed_libraries};

}  // namespace

Result<BuiltRoot> assemble_root(const BuildRequest& rq) {
  if (rq.package_tree_dir.empty() || rq.work_dir.empty())
    return make_error(ErrorKind::internal, "build.no_store", "a build needs a package store and a work directory", "", "");
  if (!rq.base_layout_dir.empty())
    return make_error(ErrorKind::internal, "build.no_store", "a root alone is assembled from packages, not from a base image", "", "");
  Assembly a(rq, std::nullopt);
  for (Step step : k_tree_steps)
    if (auto st = step(a); !st) return std::move(st).error();
  BuiltRoot out;
  out.root = a.root;
  out.sbom = a.sbom;
  out.notes = a.notes;
  // The owners and modes a layer's tar would carry (LayerStream::entry_of): recorded ones, else root's and a mode
  // from the kind of entry, never the build host's umask.
  out.owners.push_back({"", 0, 0, 0755});
  for (const Node& n : a.nodes) {
    const auto it = a.owners.find(n.path);
    disk::InodeOwner o{n.path, 0, 0, std::nullopt};
    if (it != a.owners.end() && it->second.recorded) {
      o.uid = it->second.uid;
      o.gid = it->second.gid;
      o.mode = it->second.mode & 07777;
    } else {
      o.mode = n.type == TarEntry::Type::directory ? 0755 : n.type == TarEntry::Type::symlink ? 0777 : ((n.st_mode & 0111) ? 0755 : 0644);
    }
    out.owners.push_back(std::move(o));
  }
  return out;
}

Result<Descriptor> write_platform_index(const std::string& layout_dir, const std::vector<PlatformImage>& images, const std::string& tag) {
  GPUENV_TRY(layout, OciLayout::open(layout_dir));
  json manifests = json::array();
  for (const auto& im : images) {
    json platform = {{"architecture", std::string(im.platform.oci_architecture())}, {"os", std::string(im.platform.os())}};
    if (!im.platform.oci_variant().empty()) platform["variant"] = std::string(im.platform.oci_variant());
    manifests.push_back({{"mediaType", im.manifest.media_type}, {"digest", im.manifest.digest.str()}, {"size", im.manifest.size}, {"platform", std::move(platform)}});
  }
  const json index = {{"schemaVersion", 2}, {"mediaType", media_type::k_index}, {"manifests", std::move(manifests)}};
  GPUENV_TRY(index_d, layout.put_bytes(index.dump(), media_type::k_index));
  GPUENV_CHECK(write_index(layout, index_d, tag));
  (void)layout.collect_garbage();
  return index_d;
}

Result<BuildResult> assemble_image(const BuildRequest& rq) {
  auto layout = OciLayout::open(rq.output_dir);
  if (!layout) return std::move(layout).error();
  if (rq.package_tree_dir.empty() || rq.work_dir.empty())
    return make_error(ErrorKind::internal, "build.no_store", "a build needs a package store and a work directory", "", "");
  Assembly a(rq, std::move(*layout));
  if (auto prev = previous_build(a.layout(), a.reuse_key)) {
    prev->lock_sha256 = a.lock_sha256;
    if (rq.write_index)
      if (auto st = write_index(a.layout(), prev->manifest, rq.tag); !st) return std::move(st).error();  // the tag may have changed
    // A layout an older gpuenv wrote has no CycloneDX SBOM beside it yet: made from its SPDX one.
    std::error_code cdx_ec;
    if (!fs::exists(a.layout().dir() + "/" + cyclonedx_file_name(sbom_file_name(rq)), cdx_ec)) {
      GPUENV_TRY(spdx, read_file_limited(a.layout().dir() + "/" + sbom_file_name(rq), 256u << 20));
      GPUENV_CHECK(write_cyclonedx(rq, a.layout().dir(), prev->manifest.digest, spdx));
    }
    // An image built before, without the shared cache or for another one: the cache learns of it too.
    if (rq.shared_cache)
      if (auto sbom = read_file_limited(a.layout().dir() + "/" + sbom_file_name(rq), 256u << 20)) tell_shared_cache(a, *prev, std::move(*sbom));
    return *prev;
  }
  if (auto shared = take_shared_image(a)) return *shared;
  for (Step step : k_tree_steps)
    if (auto st = step(a); !st) return std::move(st).error();
  ImageLayers layers;
  if (a.base)
    if (auto st = add_base_layers(a, layers); !st) return std::move(st).error();
  if (auto st = add_gpuenv_layers(a, plan_layers(a.entries, a.lock), layers); !st) return std::move(st).error();
  auto built = write_image_documents(a, std::move(layers));
  if (built) tell_shared_cache(a, *built, a.sbom);
  return built;
}

}  // namespace gpuenv::images

namespace gpuenv::images {
namespace {

namespace fs = std::filesystem;

bool used_since(const fs::path& p, std::chrono::system_clock::time_point cutoff) {
  struct stat st {};
  if (cutoff == std::chrono::system_clock::time_point::max() || ::stat(p.c_str(), &st) != 0) return false;
  const auto when = std::chrono::system_clock::time_point(std::chrono::seconds(st.st_mtim.tv_sec) + std::chrono::nanoseconds(st.st_mtim.tv_nsec));
  return when >= cutoff;
}

/// Counts the trees, kept layers and memo entries that `selected` picks (given its path and whether an image
/// layout still links it), removing them when `remove`.
BuildCacheUse walk_build_cache(const std::string& trees, const std::string& memo, const std::function<bool(const fs::path&, bool linked)>& selected,
                               bool remove) {
  BuildCacheUse out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(trees, ec)) {
    const fs::path record = e.path() / "record.json";
    if (!fs::exists(record, ec) || !selected(record, false)) continue;  // staged or being removed, or kept
    auto text = read_file_limited(record.string(), std::size_t{256} << 20);
    auto parsed = text ? parse_tree_record(*text, record.string()) : Result<TreeRecord>(text.error());
    if (remove && !remove_tree_renamed(e.path().string())) continue;  // no build takes a half-removed tree for a whole one
    ++out.package_trees;
    out.package_tree_bytes += parsed ? parsed->regular_bytes : 0;
  }
  for (const auto& e : fs::directory_iterator(fs::path(memo) / "blobs", ec)) {
    struct stat st {};
    if (::lstat(e.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode) || !selected(e.path(), st.st_nlink > 1)) continue;
    if (remove && ::unlink(e.path().c_str()) != 0) continue;
    ++out.layers;
    out.layer_bytes += static_cast<std::uint64_t>(st.st_size);
  }
  if (remove)
    for (const auto& e : fs::directory_iterator(memo, ec))
      if (e.is_regular_file(ec) && selected(e.path(), false)) fs::remove(e.path(), ec);
  return out;
}

}  // namespace

BuildCacheUse build_cache_use(const std::string& package_tree_dir, const std::string& layer_memo_dir) {
  return walk_build_cache(package_tree_dir, layer_memo_dir, [](const fs::path&, bool) { return true; }, false);
}

BuildCacheUse prune_build_cache(const std::string& package_tree_dir, const std::string& layer_memo_dir, std::chrono::system_clock::time_point cutoff) {
  const bool all = cutoff == std::chrono::system_clock::time_point::max();
  return walk_build_cache(
      package_tree_dir, layer_memo_dir, [&](const fs::path& p, bool linked) { return !used_since(p, cutoff) && (all || !linked); }, true);
}

}  // namespace gpuenv::images
