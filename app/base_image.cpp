// Base images (`base: docker://REF` or `oci:PATH[:REF]`): fetched into a layout in the cache, unpacked once per
// digest, and read for the facts resolving and pinning need: the distribution (/etc/os-release) and what is
// installed (/var/lib/dpkg/status).
#include <filesystem>
#include <fstream>
#include <sstream>

#include "app/base_image.hpp"

#include "base/digest.hpp"
#include "base/net/http_client.hpp"
#include "images/registry/registry_client.hpp"
#include "images/run/unpack.hpp"

namespace gpuenv::app {
namespace {

namespace fs = std::filesystem;

Error base_error(const std::string& id, const std::string& what, const std::string& where, const std::string& hint) {
  return make_error(ErrorKind::environment, id, what, where, hint);
}

std::string read_small(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::string out(std::istreambuf_iterator<char>(in), {});
  return out;
}

/// /etc/os-release inside `rootfs`, following a symlink only inside the tree (it is usually ../usr/lib/os-release).
std::string os_release_text(const std::string& rootfs) {
  std::error_code ec;
  const fs::path etc = fs::path(rootfs) / "etc/os-release";
  if (fs::symlink_status(etc, ec).type() == fs::file_type::regular) return read_small(etc);
  const fs::path lib = fs::path(rootfs) / "usr/lib/os-release";
  if (fs::symlink_status(lib, ec).type() == fs::file_type::regular) return read_small(lib);
  return {};
}

std::string os_release_value(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + "=", 0) != 0) continue;
    std::string v = line.substr(key.size() + 1);
    if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front()) v = v.substr(1, v.size() - 2);
    return v;
  }
  return {};
}

}  // namespace

images::RegistryOptions registry_options(const Services& services, const std::string& registry, bool plain_http, Status* problem) {
  images::RegistryOptions ro;
  ro.plain_http = plain_http;
  // Like Docker's insecure-registries: hosts listed in GPUENV_INSECURE_REGISTRIES are spoken to over plain HTTP.
  std::istringstream list(env_or(services, "GPUENV_INSECURE_REGISTRIES"));
  for (std::string host; std::getline(list, host, ',');)
    if (host == registry) ro.plain_http = true;
  const std::string user = env_or(services, "GPUENV_REGISTRY_USER"), password = env_or(services, "GPUENV_REGISTRY_PASSWORD");
  if (!user.empty()) {
    ro.credentials = images::RegistryCredentials{user, password};
  } else if (const std::string home = env_or(services, "HOME"); !home.empty() || !env_or(services, "DOCKER_CONFIG").empty()) {
    const std::string config = env_or(services, "DOCKER_CONFIG").empty() ? home + "/.docker/config.json" : env_or(services, "DOCKER_CONFIG") + "/config.json";
    auto creds = images::load_docker_config_credentials(config, registry);
    if (!creds) {
      if (problem) *problem = creds.error();
    } else {
      ro.credentials = *creds;
    }
  }
  return ro;
}

Status fetch_registry_image(const std::string& reference, bool offline, Services& services, const RegistryImageUse& use, BaseImage& out) {
  std::error_code ec;
  const std::string cache = cache_root(services);
  auto ref = images::parse_image_reference(reference.rfind("docker://", 0) == 0 ? reference.substr(9) : reference);
  if (!ref) {
    Error e = std::move(ref).error();
    e.while_("reading the reference of " + use.what);
    return e;
  }
  out.layout_dir = cache + "/base-images/" + sha256_hex(ref->registry + "/" + ref->repository).substr(0, 16);
  fs::create_directories(out.layout_dir, ec);
  // A reference pinned by digest that the cache holds needs no network.
  const bool have = !ref->digest.empty() && fs::exists(out.layout_dir + "/blobs/sha256/" + ref->digest.substr(7), ec) &&
                    images::read_layout_image(out.layout_dir, ref->digest).ok();
  if (have) {
    out.manifest_digest = ref->digest;
  } else if (offline) {
    auto cached = images::read_layout_image(out.layout_dir, ref->digest.empty() ? ref->tag : ref->digest);
    if (!cached) {
      return base_error(use.id_prefix + ".offline", use.what + " " + reference + " is not in the cache", out.layout_dir, "run once without --offline to pull it");
    }
    out.manifest_digest = cached->manifest_digest;
  } else {
    Status problem = ok_status();
    images::RegistryOptions ro = registry_options(services, ref->registry, use.plain_http, &problem);
    if (!problem) return problem.error();
    GPUENV_TRY(http, open_http_client(services));
    images::RegistryClient client(*http, ro);
    services.step("pulling " + use.what + " " + ref->to_string());
    auto pulled = client.pull(*ref, out.layout_dir, images::PullOptions{use.platform});
    if (!pulled) {
      Error e = std::move(pulled).error();
      e.while_("pulling " + use.what + " " + ref->to_string());
      return e;
    }
    out.manifest_digest = pulled->manifest.digest.str();
    // A digest names the manifest, or the index it was chosen from (a multi-platform image pinned by its index).
    if (!ref->digest.empty() && ref->digest != out.manifest_digest && ref->digest != pulled->index_digest.str()) {
      return base_error(use.id_prefix + ".digest_mismatch", "the registry answered " + out.manifest_digest + " for " + reference, reference,
                        "check the reference; a digest names exactly one image");
    }
  }
  images::ImageReference pinned = *ref;
  pinned.digest = out.manifest_digest;
  out.pinned = "docker://" + pinned.to_string();
  return ok_status();
}

namespace {

/// oci:PATH[:REF][@sha256:...]: a layout on this machine.
Status locate_layout_image(const std::string& reference, BaseImage& out) {
  std::error_code ec;
  std::string ref_in_layout;
  std::string rest = reference.substr(reference.rfind("oci://", 0) == 0 ? 6 : 4);
  std::string want;
  if (auto at = rest.find("@sha256:"); at != std::string::npos) {
    want = rest.substr(at + 1);
    rest = rest.substr(0, at);
  }
  // oci:PATH:REF, where REF has no '/'.
  if (auto colon = rest.rfind(':'); colon != std::string::npos && rest.find('/', colon) == std::string::npos && !fs::is_directory(rest, ec)) {
    if (want.empty()) ref_in_layout = rest.substr(colon + 1);
    rest = rest.substr(0, colon);
  }
  out.layout_dir = fs::absolute(rest, ec).lexically_normal().string();
  if (!fs::is_regular_file(out.layout_dir + "/index.json", ec)) {
    return base_error("base.not_found", "the base image layout " + out.layout_dir + " has no index.json", reference,
                      "build or copy an OCI layout there (gpuenv build -o DIR, skopeo copy ... oci:DIR:REF)");
  }
  GPUENV_TRY(image, images::read_layout_image(out.layout_dir, want.empty() ? ref_in_layout : want));
  out.manifest_digest = image.manifest_digest;
  out.pinned = "oci:" + out.layout_dir + (ref_in_layout.empty() ? "" : ":" + ref_in_layout) + "@" + out.manifest_digest;
  return ok_status();
}

/// Unpacks the image (once per digest) and reads its distribution and dpkg database.
Status read_base_facts(const std::string& reference, const std::string& cache, BaseImage& out) {
  auto unpacked = images::unpack_image(out.layout_dir, out.manifest_digest, cache + "/rootfs");
  if (!unpacked) {
    Error e = std::move(unpacked).error();
    e.while_("unpacking the base image " + out.pinned);
    return e;
  }
  out.rootfs = unpacked->rootfs;
  const std::string release = os_release_text(out.rootfs);
  out.distro = os_release_value(release, "ID");
  out.release = os_release_value(release, "VERSION_ID");
  if (out.distro.empty() || out.release.empty()) {
    return base_error("base.unknown_distribution",
                      "the base image " + out.pinned + " does not say which distribution and release it is (ID and VERSION_ID in /etc/os-release)", reference,
                      "use a Debian or Ubuntu release image as the base, or base: debian:12 to build the root from packages");
  }
  out.dpkg_status = read_small(fs::path(out.rootfs) / "var/lib/dpkg/status");
  return ok_status();
}

}  // namespace

Result<BaseImage> prepare_base_image(const std::string& reference, bool offline, Services& services) {
  BaseImage out;
  const std::string cache = cache_root(services);
  if (reference.rfind("docker://", 0) == 0) {
    GPUENV_CHECK(fetch_registry_image(reference, offline, services, RegistryImageUse{"base", "the base image", false, resolver::Platform()}, out));
  } else if (reference.rfind("oci:", 0) == 0) {
    GPUENV_CHECK(locate_layout_image(reference, out));
  } else {
    return make_error(ErrorKind::usage, "base.bad_reference", "base image '" + reference + "' is neither docker://REF nor oci:PATH", reference,
                      "write docker://registry.example.com/repo:tag or oci:/path/to/layout[:ref]");
  }
  GPUENV_CHECK(read_base_facts(reference, cache, out));
  return out;
}

}  // namespace gpuenv::app
