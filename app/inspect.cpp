#include "app/inspect.hpp"

#include "app/base_image.hpp"
#include "base/cache/work_dir.hpp"
#include "base/net/http_client.hpp"
#include "images/registry/registry_summary.hpp"

namespace gpuenv::app {
namespace {

/// Registries read through the services' HTTP client (GPUENV_CA_BUNDLE as an extra CA) with the environment's options.
images::RegistryAccess registry_access(bool plain_http, const Services& services) {
  images::RegistryAccess access;
  access.read = [&services, plain_http](const std::string& reference, const std::string& where) -> Result<images::ImageSummary> {
    auto ref = images::parse_image_reference(reference);
    if (!ref) return std::move(ref).error().while_("reading the image reference " + where);
    Status problem = ok_status();
    images::RegistryOptions ro = registry_options(services, ref->registry, plain_http, &problem);
    if (!problem) return problem.error();
    GPUENV_TRY(http, open_http_client(services));
    return images::read_registry_summary(*http, ro, *ref, where);
  };
  return access;
}

}  // namespace

Result<InspectResult> inspect(const InspectRequest& request, Services& services) {
  if (images::disk::looks_like_disk(request.image)) {
    if (!request.diff.empty())
      return make_error(ErrorKind::usage, "inspect.disk_diff", "--diff compares OCI images, and " + request.image + " is a VM disk", "--diff",
                        "inspect each disk on its own");
    auto runner = services.make_runner ? services.make_runner() : nullptr;
    if (!runner) return make_error(ErrorKind::internal, "cli.no_adapters", "no process runner configured", {}, "");
    const std::string cache = cache_root(services);
    GPUENV_TRY(work_dir, WorkDir::create(cache));
    GPUENV_TRY(disk, images::disk::read_disk(request.image, work_dir->path(), *runner));
    InspectResult out;
    out.disk = std::move(disk);
    return out;
  }
  const images::RegistryAccess access = registry_access(request.plain_http, services);
  InspectResult out;
  GPUENV_TRY(image, images::read_image_summary(request.image, access));
  out.image = std::move(image);
  if (request.diff.empty()) {
    // The marks beside the image (docs/mark.md). An archive without an OCI index (an old docker archive) cannot
    // have any: that is no problem worth a line.
    if (auto listed = list_marks(request.image, request.plain_http, services)) out.marks = std::move(*listed);
    else if (listed.error().id != "mark.bad_image") out.marks_problem = listed.error().message;
    return out;
  }
  GPUENV_TRY(other, images::read_image_summary(request.diff, access));
  out.changes = images::diff_images(out.image, other);
  out.other = std::move(other);
  return out;
}

}  // namespace gpuenv::app
