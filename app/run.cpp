#include "app/run.hpp"

namespace gpuenv::app {

Result<images::UnpackedImage> unpack_image_argument(const std::string& image, const Services& services) {
  return images::unpack_layout_argument(image, cache_root(services) + "/rootfs");
}

Result<int> run(const RunRequest& request, Services& services) {
  GPUENV_TRY(image, unpack_image_argument(request.image, services));
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
