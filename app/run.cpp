#include "app/run.hpp"

#include <filesystem>

#include "app/base_image.hpp"

namespace gpuenv::app {

namespace {

/// DIR or DIR:REF names a directory that exists (or oci:DIR[:REF]); anything else that parses as a reference with
/// a registry host is an image in a registry.
bool names_a_layout(const std::string& image) {
  std::error_code ec;
  if (image.rfind("oci:", 0) == 0) return true;
  if (std::filesystem::exists(image, ec)) return true;
  const auto colon = image.rfind(':');
  return colon != std::string::npos && std::filesystem::is_directory(image.substr(0, colon), ec);
}

}  // namespace

Result<images::UnpackedImage> unpack_image_argument(const std::string& image, Services& services, bool plain_http) {
  const bool registry = image.rfind("docker://", 0) == 0 || (!names_a_layout(image) && images::parse_image_reference(image).ok());
  if (!registry) return images::unpack_layout_argument(image.rfind("oci:", 0) == 0 ? image.substr(4) : image, cache_root(services) + "/rootfs");
  BaseImage pulled;
  GPUENV_CHECK(fetch_registry_image(image, /*offline=*/false, services, RegistryImageUse{"run", "the image", plain_http}, pulled));
  auto unpacked = images::unpack_image(pulled.layout_dir, pulled.manifest_digest, cache_root(services) + "/rootfs");
  if (!unpacked) return std::move(unpacked).error().while_("unpacking " + pulled.pinned);
  return unpacked;
}

Result<int> run(const RunRequest& request, Services& services) {
  GPUENV_TRY(image, unpack_image_argument(request.image, services, request.plain_http));
  images::SandboxRequest rq = images::image_sandbox(image, request.command, request.gpu);
  if (rq.command.empty()) {
    return make_error(ErrorKind::usage, "run.no_command", "no command given and the image has none", request.image, "add -- COMMAND ARGS...");
  }
  for (const auto& b : request.binds) {
    GPUENV_TRY(bind, images::parse_bind_into(b, rq.rootfs));
    rq.binds.push_back(std::move(bind));
  }
  return images::run_sandbox_interactive(rq);
}

}  // namespace gpuenv::app
