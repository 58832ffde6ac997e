#pragma once
// The TOML project files (packages/wheels/project_file.hpp): pyproject.toml, uv.lock and PEP 751 pylock.toml,
// parsed with toml++ into a ProjectFile. Internal to packages/wheels/project_file.cpp, which dispatches on the
// format and bounds the input's size before these are called.
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"
#include "packages/wheels/project_file.hpp"

namespace gpuenv::packages {

/// PEP 621 `[project] dependencies`, the selection's `[project.optional-dependencies]` (self-references such as
/// "proj[cuda]" expanded) and PEP 735 `[dependency-groups]` (with `{include-group = ...}`); uv's
/// `[[tool.uv.index]]` (the `default = true` one replaces the index, the others come after it). Ranges are kept:
/// the resolver resolves them; [tool.uv.sources] `index` entries set a requirement's `index` (with their markers),
/// git/path/url/workspace ones are refused (`project.url_requirement`). `dynamic = ["dependencies"]` is refused
/// (`project.dynamic`: gpuenv runs no build backend). `hashes_required` stays false.
Result<ProjectFile> parse_pyproject(std::string_view text, const std::string& path, const ProjectSelection& selection, const ProjectLimits& limits);

/// uv.lock (version 1, any revision): `[[package]]` with name, version, source (registry URL; a git, path,
/// directory, url or editable source other than the project's own root is kept in `direct_source` and refused by
/// lock_graph_requirements when reached), wheels (url, hash, size),
/// dependencies, optional-dependencies and dev-dependencies; the root is the package whose source is
/// `{ editable = "." }` or `{ virtual = "." }`. `requirements` holds one `name==version` per locked package (with
/// its wheels and their hashes, the root included), `roots` the root's dependencies plus the selection's extras and
/// groups, `marker_extras` the selection as uv's conflict markers name it.
/// `hashes_required` is true.
Result<ProjectFile> parse_uv_lock(std::string_view text, const std::string& path, const ProjectSelection& selection, const ProjectLimits& limits);

/// PEP 751 pylock.toml (lock-version 1.x): `[[packages]]` with name, version, marker, index, wheels (url or path,
/// hashes); vcs, directory, archive, path-only wheels and sdist-only packages are kept and refused by
/// lock_graph_requirements when they apply (a `directory` of "." is the project itself: skipped). The `extras`,
/// `dependency-groups` and `default-groups` of the file decide, with the selection (no groups selected: the
/// default ones), the value of the markers' `extras` and `dependency_groups`. `requirements` holds one `name==version` per package
/// with its marker. `hashes_required` is true.
Result<ProjectFile> parse_pylock(std::string_view text, const std::string& path, const ProjectSelection& selection, const ProjectLimits& limits);

/// Whether ENV's Python (python_full_version, else python_version) is one FILE.requires_python admits; fails with
/// `project.python` otherwise. Nothing to check when either is empty.
Status check_requires_python(const ProjectFile& file, const Environment& env);

/// The packages of a lock (uv.lock, pylock.toml) that apply to ENV, as requirements with their markers evaluated
/// (and removed): uv.lock's reachable from FILE.roots (extras followed, the versions of an edge told apart),
/// pylock's whose marker holds. The selection's marker values come from FILE (marker_extras, marker_groups).
/// Fails with `project.python` (ENV's Python outside requires-python), `project.environment` (none of pylock's
/// environments holds), `project.marker` (a marker that cannot be evaluated), `project.url_requirement` (a reached
/// package from git, a path or a URL), `project.sdist_only` (a reached package without wheels) and
/// `project.ambiguous` (two versions of one name both apply).
Result<std::vector<ProjectRequirement>> lock_graph_requirements(const ProjectFile& file, const Environment& env);

}  // namespace gpuenv::packages
