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

Result<images::UnpackedImage> unpack_image_argument(const std::string& image, Services& services, bool plain_http, const resolver::Platform& platform) {
  const bool registry = image.rfind("docker://", 0) == 0 || (!names_a_layout(image) && images::parse_image_reference(image).ok());
  if (!registry) return images::unpack_layout_argument(image.rfind("oci:", 0) == 0 ? image.substr(4) : image, cache_root(services) + "/rootfs", platform);
  BaseImage pulled;
  GPUENV_CHECK(fetch_registry_image(image, /*offline=*/false, services, RegistryImageUse{"run", "the image", plain_http, platform}, pulled));
  auto unpacked = images::unpack_image(pulled.layout_dir, pulled.manifest_digest, cache_root(services) + "/rootfs", platform);
  if (!unpacked) return std::move(unpacked).error().while_("unpacking " + pulled.pinned);
  return unpacked;
}

namespace {

/// Runs RQ's command through the static user-mode emulator of IMAGE's platform (binfmt_misc is not needed, and
/// not used: a program the command starts is not emulated), and says so.
Status emulate(const images::UnpackedImage& image, const RunRequest& request, const std::string& path, images::SandboxRequest& rq, std::vector<std::string>& notes) {
  GPUENV_TRY(emulator, images::find_emulator(image.platform, request.emulator, path));
  if (!images::have_bwrap())
    return make_error(ErrorKind::environment, "run.no_sandbox", "an emulated image runs in bubblewrap, and bubblewrap is not installed", "",
                      "install bubblewrap (Debian: apt-get install bubblewrap)");
  const auto program = images::program_in_image(image.rootfs, rq.env, rq.command.front());
  if (!program)
    return make_error(ErrorKind::usage, "run.no_program", "'" + rq.command.front() + "' is not on the image's PATH", request.image,
                      "name the program by its path in the image (e.g. /usr/bin/python3)");
  rq.command.front() = *program;
  rq.emulator = emulator;
  notes.push_back("running the " + image.platform.str() + " image on this " + resolver::native_platform().str() + " host through " + emulator +
                  " (user-mode emulation: much slower than native; programs the command starts are not emulated)");
  return ok_status();
}

}  // namespace

Result<RunPlan> plan_run(const RunRequest& request, Services& services) {
  const resolver::Platform native = resolver::native_platform();
  GPUENV_TRY(image, unpack_image_argument(request.image, services, request.plain_http, request.platform.value_or(native)));
  images::SandboxRequest rq = images::image_sandbox(image, request.command, request.gpu);
  if (rq.command.empty()) {
    return make_error(ErrorKind::usage, "run.no_command", "no command given and the image has none", request.image, "add -- COMMAND ARGS...");
  }
  RunPlan plan;
  if (image.platform != native) GPUENV_CHECK(emulate(image, request, env_or(services, "PATH"), rq, plan.notes));
  for (const auto& b : request.binds) {
    GPUENV_TRY(bind, images::parse_bind_into(b, rq.rootfs));
    rq.binds.push_back(std::move(bind));
  }
  plan.sandbox = std::move(rq);
  return plan;
}

Result<int> run(const RunRequest& request, Services& services) {
  GPUENV_TRY(plan, plan_run(request, services));
  return images::run_sandbox_interactive(plan.sandbox);
}

}  // namespace gpuenv::app
