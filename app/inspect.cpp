#include "app/inspect.hpp"

#include <filesystem>

#include "app/base_image.hpp"
#include "base/net/http_client.hpp"

namespace gpuenv::app {
namespace {

/// Registries reached with curl (GPUENV_CA_BUNDLE as an extra CA) and the environment's options.
images::RegistryAccess registry_access(bool plain_http, const Services& services) {
  images::RegistryAccess access;
  access.make_http = [&services] {
    HttpOptions ho;
    ho.limits = services.net;
    ho.ca_bundle = env_or(services, "GPUENV_CA_BUNDLE");
    return make_curl_http_client(ho);
  };
  access.options_for = [&services, plain_http](const std::string& registry) -> Result<images::RegistryOptions> {
    Status problem = ok_status();
    images::RegistryOptions ro = registry_options(services, registry, plain_http, &problem);
    if (!problem) return problem.error();
    return ro;
  };
  return access;
}

}  // namespace

Result<InspectResult> inspect(const InspectRequest& request, Services& services) {
  const images::RegistryAccess access = registry_access(request.plain_http, services);
  InspectResult out;
  GPUENV_TRY(image, images::read_image_summary(request.image, access));
  out.image = std::move(image);
  if (request.diff.empty()) {
    // The marks live beside layouts and registry images; an archive has none.
    const std::string& arg = request.image;
    const bool archive = arg.rfind("oci-archive:", 0) == 0 || arg.rfind("docker-archive:", 0) == 0 ||
                         (arg.rfind("docker://", 0) != 0 && arg.rfind("oci:", 0) != 0 && !std::filesystem::is_directory(images::split_image_ref(arg).first));
    if (!archive) {
      if (auto listed = list_marks(arg, request.plain_http, services)) out.marks = std::move(*listed);
      else out.marks_problem = listed.error().message;
    }
    return out;
  }
  GPUENV_TRY(other, images::read_image_summary(request.diff, access));
  out.changes = images::diff_images(out.image, other);
  out.other = std::move(other);
  return out;
}

}  // namespace gpuenv::app
