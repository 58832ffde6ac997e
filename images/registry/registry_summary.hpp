#pragma once
// `gpuenv inspect docker://REF`: what a registry image holds, from its manifest and config alone (no layer is
// fetched), as the same ImageSummary images/oci/image_reader makes of layouts and archives.
#include <string>

#include "base/error.hpp"
#include "base/net/http_client.hpp"
#include "images/oci/image_reader.hpp"
#include "images/registry/registry_client.hpp"

namespace gpuenv::images {

/// REF (the argument WHERE): its manifest (linux/amd64 from an index) and config through HTTP with OPTIONS. Errors:
/// the registry client's (an HTTP failure without plain HTTP hints at --plain-http), and summary_from_documents'.
Result<ImageSummary> read_registry_summary(HttpClient& http, const RegistryOptions& options, const ImageReference& ref, const std::string& where);

}  // namespace gpuenv::images
