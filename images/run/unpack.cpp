#include "images/run/unpack.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <nlohmann/json.hpp>

#include "base/archive/safe_extract.hpp"
#include "base/digest.hpp"
#include "base/file_io.hpp"
#include "base/json_field.hpp"
#include "images/oci/layout.hpp"
#include "images/rootfs/package_trees.hpp"
#include "base/unique_fd.hpp"

namespace gpuenv::images {
namespace {

/// The `run.io` errors of placing an unpacked root (no hint: the message says it all).
constexpr IoArea k_unpack_io{"run.io", ""};
/// The `run.io` error of making the unpack cache private to its owner.
constexpr IoArea k_private_io{"run.io", "check that you own the cache directory (GPUENV_CACHE_DIR)"};

namespace fs = std::filesystem;
using nlohmann::json;

Error bad_image(const std::string& what, const std::string& where) {
  return make_error(ErrorKind::environment, "run.bad_image", what, where, "rebuild the image with `gpuenv build`");
}
/// The `run.bad_image` errors of a layer that cannot be opened or mapped.
constexpr IoArea k_layer_io{"run.bad_image", "rebuild the image with `gpuenv build`"};

/// blobs/sha256/<hex> of LAYOUT: a Digest's hex is always 64 hex digits, so the path stays inside the layout.
std::string blob(const std::string& layout, const Digest& digest) { return layout + "/blobs/sha256/" + digest.hex(); }

/// Extracts the layer LAYER (blobs/sha256/<hex> at PATH) into ROOT once its bytes are the ones its descriptor
/// names (size and sha256, checked before anything is extracted); whiteout markers are extracted as files.
Result<std::vector<ExtractedEntry>> extract_verified(const std::string& path, const Descriptor& layer, const std::string& root) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  struct stat st {};
  if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0) return io_error(k_layer_io, "cannot open a layer", path);
  if (!S_ISREG(st.st_mode)) return bad_image("a layer blob is not a regular file", path);
  if (static_cast<std::uint64_t>(st.st_size) != layer.size) {
    return bad_image("the layer is " + std::to_string(st.st_size) + " bytes; its descriptor says " + std::to_string(layer.size), path);
  }
  if (st.st_size == 0) {
    if (layer.digest != Digest::of("")) return bad_image("the layer does not hold the bytes its digest " + layer.digest.str() + " names", path);
    return std::vector<ExtractedEntry>{};
  }
  void* p = ::mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (p == MAP_FAILED) return io_error(k_layer_io, "cannot map a layer", path);
  const std::string_view bytes(static_cast<const char*>(p), static_cast<std::size_t>(st.st_size));
  if (Digest::of(bytes) != layer.digest) {
    ::munmap(p, bytes.size());
    return bad_image("the layer does not hold the bytes its digest " + layer.digest.str() + " names", path);
  }
  ExtractOptions options;
  auto entries = extract_archive(bytes, path, root, options);
  ::munmap(p, bytes.size());
  return entries;
}

/// Extracts the layer into ROOT over the layers below, with its whiteouts applied.
Status extract_layer(const std::string& path, const Descriptor& layer, const std::string& root, std::vector<ExtractedEntry>* out) {
  auto entries = extract_verified(path, layer, root);
  if (!entries) return std::move(entries).error();
  // Whiteouts: ".wh.NAME" removes NAME from the layers below; ".wh..wh..opq" makes its directory opaque: what the
  // layers below put there goes, and only this layer's entries stay. The markers themselves go too.
  std::error_code ec;
  std::set<std::string> here;  // this layer's paths and their ancestors
  for (const auto& e : *entries) {
    for (fs::path anc(e.path); !anc.empty() && anc != anc.root_path(); anc = anc.parent_path()) {
      if (!here.insert(anc.string()).second) break;
    }
  }
  std::function<void(const fs::path&)> keep_only_this_layer = [&](const fs::path& rel_dir) {
    for (const auto& child : fs::directory_iterator(fs::path(root) / rel_dir, ec)) {
      const fs::path rel = rel_dir / child.path().filename();
      if (!here.count(rel.string())) fs::remove_all(child.path(), ec);
      else if (child.is_directory(ec) && !child.is_symlink(ec)) keep_only_this_layer(rel);
    }
  };
  for (const auto& e : *entries) {
    const fs::path rel(e.path);
    const std::string name = rel.filename().string();
    if (name.rfind(".wh.", 0) != 0) {
      if (out) out->push_back(e);
      continue;
    }
    const fs::path dir = fs::path(root) / rel.parent_path();
    if (name == ".wh..wh..opq") keep_only_this_layer(rel.parent_path());
    else fs::remove_all(dir / name.substr(4), ec);
    fs::remove(dir / name, ec);
  }
  return ok_status();
}

}  // namespace

Status extract_image_layers(const std::string& layout_dir, const LayoutImage& image, const std::string& root, std::vector<ExtractedEntry>* entries) {
  for (const auto& layer : image.layers) {
    if (layer.media_type.find("tar") == std::string::npos)
      return bad_image("layer media type '" + layer.media_type + "' is not tar, tar+gzip or tar+zstd", blob(layout_dir, layer.digest));
    if (auto st = extract_layer(blob(layout_dir, layer.digest), layer, root, entries); !st) return st;
  }
  return ok_status();
}

namespace {

/// The image's layers, each unpacked once into CACHE_DIR/layers/<digest> (shared by every image that has it),
/// hard-linked into ROOT in order with their whiteouts applied.
Status link_image_layers(const std::string& layout_dir, const LayoutImage& image, const std::string& cache_dir, const std::string& root) {
  const std::string staging = cache_dir + "/.tmp-layers-" + std::to_string(::getpid());
  std::error_code ec;
  fs::create_directories(staging, ec);
  PackageTreeStore layers(cache_dir + "/layers", staging);
  LinkedFiles linked;
  Status st = ok_status();
  for (const auto& layer : image.layers) {
    const std::string path = blob(layout_dir, layer.digest);
    if (layer.media_type.find("tar") == std::string::npos) {
      st = bad_image("layer media type '" + layer.media_type + "' is not tar, tar+gzip or tar+zstd", path);
      break;
    }
    auto tree = layers.get("layer\n" + layer.digest.str(), [&](const std::string& dir) -> Result<TreeRecord> {
      GPUENV_CHECK(extract_verified(path, layer, dir));  // the tree itself is the record: linking reads it
      return TreeRecord{};
    });
    if (!tree) {
      st = std::move(tree).error();
      break;
    }
    if (st = link_tree(*tree, root, "layer " + layer.digest.str(), linked, true); !st) break;
  }
  fs::remove_all(staging, ec);
  return st;
}

}  // namespace

Result<UnpackedImage> unpack_image(const std::string& layout_dir, const std::string& ref, const std::string& cache_dir, const resolver::Platform& platform) {
  auto image = read_layout_image(layout_dir, ref, {}, platform);
  if (!image) return std::move(image).error();
  UnpackedImage out;
  out.manifest_digest = image->manifest_digest;
  {
    const std::string os = image->config.value("os", ""), arch = image->config.value("architecture", ""), variant = image->config.value("variant", "");
    const auto named = resolver::platform_of(os, arch, variant);
    if (!named)
      return make_error(ErrorKind::usage, "run.bad_image", "the image is for " + os + "/" + arch + (variant.empty() ? "" : "/" + variant) + ", which gpuenv does not run",
                        layout_dir, "run an image for " + resolver::known_platforms());
    out.platform = *named;
  }
  const json c = field_of_type(image->config, "config", json::value_t::object);
  auto strings = [&](const char* key, std::vector<std::string>& into) {
    if (!c.is_object() || !c.contains(key) || !c[key].is_array()) return;
    for (const auto& e : c[key])
      if (e.is_string()) into.push_back(e.get<std::string>());
  };
  strings("Env", out.env);
  strings("Entrypoint", out.command);
  strings("Cmd", out.command);
  if (c.is_object() && c.contains("WorkingDir") && c["WorkingDir"].is_string() && !c["WorkingDir"].get<std::string>().empty()) out.working_dir = c["WorkingDir"];

  const std::string hex = digest_hex(out.manifest_digest);
  out.rootfs = cache_dir + "/" + hex;
  std::error_code ec;
  // Unpacked roots hold the images' setuid files: only their owner may reach them, as container runtimes keep
  // their snapshots (the directory is tightened when an older gpuenv made it 0755).
  fs::create_directories(cache_dir, ec);
  if (::chmod(cache_dir.c_str(), 0700) != 0) {
    return io_error(k_private_io, "cannot make the unpacked images private", cache_dir);
  }
  if (fs::is_directory(out.rootfs, ec)) {
    out.reused = true;
    return out;
  }
  const std::string tmp = cache_dir + "/.tmp-" + hex + "-" + std::to_string(::getpid());
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec) return make_error(ErrorKind::environment, "run.io", "cannot create " + tmp + ": " + ec.message(), tmp, "check free disk space");
  if (auto st = link_image_layers(layout_dir, *image, cache_dir, tmp); !st) {
    fs::remove_all(tmp, ec);
    return st.error();
  }
  fs::permissions(tmp, fs::perms(0755), ec);
  // Mount points the sandbox needs, for images whose base does not ship them (base-files does).
  for (const char* d : {"dev", "proc", "tmp", "run", "var/tmp"}) {
    if (fs::symlink_status(fs::path(tmp) / d, ec).type() == fs::file_type::not_found) {
      fs::create_directories(fs::path(tmp) / d, ec);
      fs::permissions(fs::path(tmp) / d, fs::perms(std::string(d).find("tmp") != std::string::npos ? 01777 : 0755), ec);
    }
  }
  // Synced: a later run reuses an unpacked root by its name alone, so its files reach the disk before it is named.
  // Another run that unpacked the same image first keeps its own.
  GPUENV_CHECK(commit_directory(tmp, out.rootfs, Durability::synced, k_unpack_io, "cannot place the unpacked image"));
  return out;
}

Result<std::pair<std::string, std::string>> parse_bind(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return make_error(ErrorKind::usage, "run.bad_bind", "--bind '" + text + "': " + why, "", "write --bind HOST_PATH:/PATH/IN/IMAGE");
  };
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) return bad("not HOST:DEST");
  const std::string host = text.substr(0, colon), dest = text.substr(colon + 1);
  std::error_code ec;
  const fs::path abs_host = fs::absolute(host, ec);
  if (ec || !fs::exists(abs_host, ec)) return bad("the host path does not exist");
  if (dest[0] != '/') return bad("the destination must be an absolute path inside the image");
  for (const auto& part : fs::path(dest))
    if (part == "..") return bad("the destination must not contain '..'");
  const std::string norm = fs::path(dest).lexically_normal().string();
  if (norm == "/") return bad("the image's root cannot be replaced");
  for (const char* reserved : {"/proc", "/dev", "/run/gpuenv"})
    if (norm == reserved || norm.rfind(std::string(reserved) + "/", 0) == 0) return bad(std::string(reserved) + " is the sandbox's own");
  return std::make_pair(abs_host.lexically_normal().string(), norm);
}

std::vector<std::string> bwrap_arguments(const SandboxRequest& r) {
  std::vector<std::string> a = {"--ro-bind", r.rootfs, "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/run", "--tmpfs",
                                "/var/tmp", "--unshare-pid", "--unshare-ipc", "--die-with-parent", "--clearenv"};
  for (const auto& d : r.devices) {
    a.insert(a.end(), {"--dev-bind", d, d});
  }
  for (const auto& [host, name] : r.driver_libraries) {
    a.insert(a.end(), {"--ro-bind", host, "/run/gpuenv/driver/" + name});
  }
  for (const auto& [host, dest] : r.binds) a.insert(a.end(), {"--ro-bind", host, dest});
  bool ld_set = false;
  for (const auto& e : r.env) {
    const auto eq = e.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    std::string key = e.substr(0, eq), value = e.substr(eq + 1);
    if (key == "LD_LIBRARY_PATH" && !r.driver_libraries.empty()) {
      value = "/run/gpuenv/driver" + (value.empty() ? "" : ":" + value);
      ld_set = true;
    }
    a.insert(a.end(), {"--setenv", key, value});
  }
  if (!ld_set && !r.driver_libraries.empty()) a.insert(a.end(), {"--setenv", "LD_LIBRARY_PATH", "/run/gpuenv/driver"});
  if (!r.emulator.empty()) a.insert(a.end(), {"--ro-bind", r.emulator, k_emulator_path});
  a.insert(a.end(), {"--chdir", r.working_dir.empty() ? "/" : r.working_dir, "--"});
  if (!r.emulator.empty()) a.push_back(k_emulator_path);
  a.insert(a.end(), r.command.begin(), r.command.end());
  return a;
}

}  // namespace gpuenv::images
