#pragma once
// Resolving a spec: the catalog loaded, the spec read and checked, the GPUs and driver gathered (flags, the spec,
// the host) and the solver asked. The first half of `resolve`, `lock` and `build`.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/base_image.hpp"
#include "app/catalog.hpp"
#include "app/services.hpp"
#include "packages/wheels/project_file.hpp"
#include "resolver/lockfile.hpp"
#include "resolver/solver.hpp"
#include "resolver/spec.hpp"

namespace gpuenv::app {

struct ResolveRequest {
  std::string spec_path;
  std::optional<std::string> driver;  ///< --driver
  std::vector<std::string> gpus;      ///< --gpu, models or architectures
  std::string catalog_dir;            ///< "" for the embedded catalog
  bool offline = false;               ///< a base image comes from the cache only
  std::string lock_path;              ///< `resolve --lock`: a lock without packages is written here when satisfied
  /// The spec's bytes when the caller has read spec_path already (app::build tells a spec from a lock by them), so
  /// that the file is read once; unset: read from spec_path.
  std::optional<std::string> spec_text;
  /// `lock --from FILE --extra E --group G`: the project file to read instead of the spec's packages.python_project,
  /// its path as given (relative to the working directory). With no spec_path, the spec is the smallest one (a name),
  /// and the project, the flags and the host say the rest.
  std::optional<resolver::PythonProjectRequest> project;
};

/// A spec read, checked and resolved. Held by pointer (resolver::ResolveRequest points into it).
struct PreparedResolution {
  LoadedCatalog catalog;
  std::string spec_text;
  resolver::Spec spec;
  resolver::Resolution resolution;  ///< resolution.ok == false: no combination fits (the workflow still succeeds)
  std::optional<BaseImage> base;    ///< when the spec names a base image
  /// The project file (packages.python_project or --from), read; its frameworks are in spec.frameworks.
  std::optional<packages::ProjectFile> project;
  resolver::ResolveRequest request; ///< what was resolved (request.spec points at spec)
};

/// Loads the catalog, reads and parses the spec, gathers GPUs and driver (flags, spec, host) and resolves.
Result<std::unique_ptr<PreparedResolution>> resolve(const ResolveRequest& request, Services& services);

/// "gpuenv 0.1.0": the generator recorded in locks, images and SBOMs.
std::string generator();

/// The digests that tie a lock to its inputs (spec, catalog, generator, pinned base image).
resolver::LockInputs lock_inputs(const PreparedResolution& prepared);

/// Host facts with the GPUENV_DRIVER / GPUENV_GPUS overrides of services.env applied.
Result<resolver::HostFacts> host_facts(const Services& services, const resolver::Catalog& catalog);

/// `gpuenv detect`: this host's driver and GPUs, named with the catalog (CATALOG_DIR, "" for the embedded one).
struct Detected {
  LoadedCatalog catalog;
  resolver::HostFacts facts;  ///< "no driver" is a valid answer
};
Result<Detected> detect(const std::string& catalog_dir, const Services& services);

/// `gpuenv matrix`: every valid combination of FRAMEWORK ("" for all) the catalog knows.
Result<std::vector<resolver::MatrixRow>> matrix(const std::string& catalog_dir, const std::string& framework);

}  // namespace gpuenv::app
