#include "images/assemble/provenance.hpp"

#include <nlohmann/json.hpp>

#include "base/digest.hpp"
#include "base/time.hpp"

namespace gpuenv::images {
namespace {

using ojson = nlohmann::ordered_json;

/// A resource descriptor naming a sha256 (SLSA's ResourceDescriptor: digest as a map of algorithm to hex).
ojson sha256_of(const std::string& hex) { return {{"sha256", hex}}; }

ojson resolved_dependencies(const resolver::Lock& lock) {
  ojson out = ojson::array();
  if (!lock.base_image.empty()) {
    // "docker://host/repo:tag@sha256:<hex>" or "oci:PATH@sha256:<hex>": pinned by its manifest digest.
    const auto at = lock.base_image.rfind("@sha256:");
    ojson base = {{"uri", lock.base_image}, {"name", "base-image"}};
    if (at != std::string::npos && is_sha256_hex(lock.base_image.substr(at + 8))) base["digest"] = sha256_of(lock.base_image.substr(at + 8));
    out.push_back(std::move(base));
  }
  for (const auto& p : lock.packages) {
    ojson annotations = {{"kind", std::string(resolver::to_string(p.kind))}, {"version", p.version}};
    if (!p.architecture.empty()) annotations["architecture"] = p.architecture;
    if (lock.platforms.size() > 1) annotations["platform"] = p.platform.str();
    out.push_back({{"uri", p.url}, {"digest", sha256_of(p.sha256.hex())}, {"name", p.name}, {"annotations", std::move(annotations)}});
  }
  return out;
}

}  // namespace

std::string provenance_predicate(const resolver::Lock& lock, const ProvenanceInputs& in) {
  ojson external = ojson::object();
  ojson spec = {{"name", lock.spec_name}};
  if (is_sha256_hex(lock.spec_sha256)) spec["digest"] = sha256_of(lock.spec_sha256);
  external["spec"] = std::move(spec);
  external["lock"] = {{"name", "gpuenv.lock"}, {"digest", sha256_of(in.lock_sha256)}, {"mediaType", "application/vnd.gpuenv.lock.v1+yaml"}};
  if (!lock.project_file.empty()) {
    ojson project = {{"name", lock.project_file}, {"format", lock.project_format}};
    if (is_sha256_hex(lock.project_sha256)) project["digest"] = sha256_of(lock.project_sha256);
    external["project"] = std::move(project);
  }
  external["platform"] = in.platform;
  external["format"] = in.format;
  external["compression"] = in.compression;
  if (!in.tag.empty()) external["tag"] = in.tag;
  ojson internal = {{"sourceDateEpoch", in.source_date_epoch}};
  if (is_sha256_hex(lock.catalog_sha256)) internal["catalog"] = {{"digest", sha256_of(lock.catalog_sha256)}};
  const ojson predicate = {
      {"buildDefinition",
       {{"buildType", k_slsa_build_type}, {"externalParameters", std::move(external)}, {"internalParameters", std::move(internal)},
        {"resolvedDependencies", resolved_dependencies(lock)}}},
      {"runDetails",
       {{"builder", {{"id", k_slsa_builder_id}, {"version", {{"gpuenv", in.builder_version}}}}},
        {"metadata", {{"startedOn", format_rfc3339_utc(in.started)}, {"finishedOn", format_rfc3339_utc(in.finished)}}}}}};
  return predicate.dump();
}

}  // namespace gpuenv::images
