#include "images/registry/registry_summary.hpp"

namespace gpuenv::images {

Result<ImageSummary> read_registry_summary(HttpClient& http, const RegistryOptions& options, const ImageReference& ref, const std::string& where) {
  RegistryClient client(http, options);
  auto remote = client.fetch_manifest_and_config(ref);
  if (!remote) {
    Error e = std::move(remote).error();
    e.while_("inspecting " + where);
    if (e.id.rfind("http.", 0) == 0 && !options.plain_http) {
      e.hint += std::string(e.hint.empty() ? "" : "; ") + "for a registry that speaks plain HTTP, add --plain-http or list " + ref.registry +
                " in GPUENV_INSECURE_REGISTRIES";
    }
    return e;
  }
  return summary_from_documents(remote->manifest, remote->config, where, remote->manifest_digest.str());
}

}  // namespace gpuenv::images
