#pragma once
// A Python project's own dependency file, read into what the wheel resolver takes (docs/spec.md "A project file"):
// a requirements file (pip's format: -r/-c includes, --hash, --index-url/--extra-index-url), a PEP 751
// pylock.toml, a uv.lock, a pyproject.toml (PEP 621 dependencies, optional dependencies, PEP 735 dependency groups,
// uv's tool.uv.index) or a conda environment.yml (its pip section; conda packages are refused: conda channels are
// not a source).
//
// Reading is two steps. `read_project_file` parses the file (and what it includes) strictly and within bounds into
// a ProjectFile: every requirement with its marker still attached and where it was written, every hash it lists,
// the indexes it names. `project_requirements` then chooses, for one target environment (an image platform and its
// Python), the requirements that apply: markers evaluated, the extras and groups of the selection added, a lock's
// dependency graph walked from its root. Nothing here reaches the network.
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/digest.hpp"
#include "base/error.hpp"
#include "packages/wheels/markers.hpp"

namespace gpuenv::packages {

enum class ProjectFormat { requirements, pylock, uv_lock, pyproject, conda_environment };

/// "requirements", "pylock.toml", "uv.lock", "pyproject.toml", "environment.yml".
std::string_view project_format_name(ProjectFormat format);

/// The format a file's name says: pylock.toml and pylock.*.toml (PEP 751), uv.lock, pyproject.toml,
/// environment.yml/.yaml; any other name is a requirements file.
ProjectFormat project_format_of(std::string_view path);

/// Which optional parts of a project are wanted (the spec's `python_project.extras` / `.groups`).
struct ProjectSelection {
  std::vector<std::string> extras;  ///< optional dependencies (PEP 621 `[project.optional-dependencies]`, a lock's extras)
  std::vector<std::string> groups;  ///< dependency groups (PEP 735 `[dependency-groups]`, uv's dev dependencies, pylock's)
};

/// An edge of a lock's dependency graph: NAME (canonical) with EXTRAS, when MARKER holds. VERSION (normalized)
/// names which of the lock's versions of NAME is meant when it locks several (uv's forks); empty: the only one.
struct LockEdge {
  std::string name;
  std::string version;
  std::vector<std::string> extras;
  std::optional<Marker> marker;
};

/// One requirement of the project, as the resolver takes it.
struct ProjectRequirement {
  std::string name;         ///< PEP 503 canonical name
  std::string requirement;  ///< PEP 508 text without its marker: "numpy==1.26.4", "torch[opt]>=2.5"
  std::optional<Marker> marker;  ///< when it applies; absent: always
  std::string where;        ///< "path:line" (or "path: package NAME" for TOML) for messages
  /// Hashes the file lists for this project's files (sha256 only; other algorithms are refused when read). Empty:
  /// the file lists none. A wheel whose sha256 is not among them is never chosen.
  std::vector<Digest> hashes;
  /// A lock's own record of the version's files (uv.lock, pylock.toml): wheel file name -> sha256. Empty otherwise.
  std::map<std::string, Digest> wheels;
  /// A lock's graph (uv.lock): what this package depends on, and what each of its extras adds. Empty otherwise.
  std::vector<LockEdge> dependencies;
  std::map<std::string, std::vector<LockEdge>> optional_dependencies;
  /// The index a lock took the package from (uv.lock's registry, pylock's `index`), or the index pyproject's
  /// [tool.uv.sources] names for it. Empty: any configured index.
  std::string index;
  /// A uv.lock package that does not come from an index: its source as written ("git = https://...",
  /// "path = ../x", "editable = .", "virtual = ."). The root and virtual members are walked through, never
  /// returned; any other is refused when reached (`project.url_requirement`). Empty for index packages.
  std::string direct_source;
};

struct ProjectFile {
  ProjectFormat format = ProjectFormat::requirements;
  std::string path;  ///< as given, for messages
  std::vector<ProjectRequirement> requirements;  ///< in file order (includes expanded in place)
  std::vector<ProjectRequirement> constraints;   ///< `-c` files: limit versions, add nothing
  /// Indexes the file names (requirements' --index-url / --extra-index-url, uv's [[tool.uv.index]], a lock's
  /// registries): index_url replaces the configured index, extra_index_urls come after it. Empty: the configured ones.
  std::string index_url;
  std::vector<std::string> extra_index_urls;
  /// pip's hash-checking mode: some requirement carries --hash (requirements), or the file is a lock. Every wheel
  /// the image gets, dependencies included, must then be one the file lists with a matching hash.
  bool hashes_required = false;
  /// sha256 of the bytes of the file and of every file it includes, in the order read (the lock's `project.sha256`).
  Digest sha256;
  /// The names of extras and groups the file defines (for "unknown extra" messages).
  std::vector<std::string> extras, groups;
  /// A lock with a graph (uv.lock): the project's own dependencies, its selected extras' and groups', from which
  /// project_requirements walks `requirements` (one per locked package and version). Empty otherwise.
  std::vector<LockEdge> roots;
  /// The Python versions the project supports (`requires-python`), "" when the file does not say.
  std::string requires_python;
  /// pylock.toml's `environments`: the lock holds only where one of them does. Empty: everywhere.
  std::vector<Marker> environments;
  /// What the selection makes of the lock's markers (lock_graph_requirements puts them in the Environment):
  /// pylock.toml's `extras` and `dependency_groups` (PEP 751); for uv.lock, marker_extras holds the values its
  /// conflict markers give `extra` ("extra-9-demo-proj-cpu", "group-9-demo-proj-dev").
  std::vector<std::string> marker_extras, marker_groups;
};

/// Bounds on what is read: a file over max_bytes, an include chain deeper than max_depth or more than max_files
/// files, or more than max_requirements requirements is refused.
struct ProjectLimits {
  std::size_t max_bytes = 8u << 20;
  int max_depth = 16;
  int max_files = 256;
  std::size_t max_requirements = 20000;
};

/// Reads PATH (the format from project_format_of) and, for a requirements file, what it includes. Includes (-r, -c)
/// must stay inside PROJECT_DIR (default: PATH's directory), symbolic links resolved. Fails with ErrorKind::spec:
/// `project.read` (missing, unreadable, too large, not UTF-8), `project.syntax` (path:line and what was expected),
/// `project.include_loop`, `project.include_outside`, `project.too_many`, `project.hash` (not sha256, or a digest of
/// the wrong length), `project.url_requirement` (a requirement given as a URL or a local path: gpuenv takes wheels
/// from indexes only), `project.editable` (-e), `project.option` (a pip option gpuenv does not honour, such as
/// --find-links or --trusted-host), `project.conda` (conda packages in environment.yml), `project.unknown_extra`.
Result<ProjectFile> read_project_file(const std::string& path, const ProjectSelection& selection, const ProjectLimits& limits = {},
                                      const std::string& project_dir = {});

/// Parses the bytes of a project file of FORMAT (no includes are followed: a requirements file's -r/-c lines fail
/// with `project.include`); PATH is used in messages. The fuzz target's entry.
Result<ProjectFile> parse_project_text(std::string_view text, ProjectFormat format, const std::string& path, const ProjectSelection& selection,
                                       const ProjectLimits& limits = {});

/// The requirements of FILE that apply to ENV: markers evaluated (an unevaluable marker fails with `project.marker`),
/// the selection's extras and groups included; for a lock, the packages reachable from the project under ENV.
Result<std::vector<ProjectRequirement>> project_requirements(const ProjectFile& file, const Environment& env);

/// The exact version FILE pins NAME (canonical) to with `==` (local label kept: "2.5.1+cu118") for some Linux
/// environment, or std::nullopt when it does not pin it exactly. Used to take a framework from the project.
std::optional<std::string> project_pin(const ProjectFile& file, std::string_view name);

}  // namespace gpuenv::packages
