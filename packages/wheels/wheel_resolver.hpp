#pragma once
// Pinning Python wheels without pip: requirements in, one wheel per project out (URL, sha256, size), chosen by a
// deterministic backtracking search over the projects' simple-index pages and core metadata.
//
// Index strategy ("first index", as uv's default, against dependency confusion): indexes are asked in the
// order given, and the first index whose project page exists (anything but a 404/410) is the only one used for
// that project, even when a later index has newer or more versions. A failure other than "not found" stops the
// resolution rather than falling through to the next index, so an unreachable private index can never let a
// public project of the same name in.
//
// Links on a project page are followed only over http and https (file links only from a file: index); others
// are dropped by parse_simple_page and logged in the decisions, so no URL from an index reaches another scheme.
//
// Candidates are wheels only: gpuenv never builds source distributions. A version is a candidate when one of
// its wheels supports the target's tags (the best tag_rank wins, then the higher build tag, then the file
// name), its Requires-Python admits the target interpreter, it is not yanked (unless the project is pinned with
// == or ===), and it passes the pre-release rule of pip (excluded unless allowed, named by a specifier, or the
// only versions that match). Dependencies come from the PEP 658 metadata file when the index offers one,
// otherwise from the wheel's own .dist-info/METADATA (the whole wheel is then fetched into memory).
//
// The search picks the undecided project with the fewest candidates (then by name), tries its versions newest
// first, and on a conflict jumps back to the most recent decision that contributed to it (conflict-directed
// backjumping), so the same inputs always give the same pins.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/cache/blob_store.hpp"
#include "base/net/fetcher.hpp"
#include "packages/wheels/markers.hpp"
#include "packages/wheels/wheel_tags.hpp"
#include "base/error.hpp"

namespace gpuenv::packages {

/// What to resolve and for which interpreter and platform.
struct WheelResolveRequest {
  std::vector<std::string> requirements;  ///< PEP 508 strings, e.g. "torch==2.5.1", "numpy<2.2"
  /// The one index a project comes from, by canonical name (a lock's registry for it, [tool.uv.sources]): only that
  /// index is asked for it, as uv pins a package to its index. Projects not named here use `indexes`.
  std::map<std::string, std::string> project_indexes;
  /// Who asks for each requirement, index for index ("requirements.txt:3"); missing entries read "the spec".
  std::vector<std::string> requirement_origins;
  std::vector<std::string> indexes;       ///< simple-index URLs in priority order; the first that has a project wins
  Environment environment;                ///< marker values of the target (extra is ignored: set per requirement)
  TargetPlatform platform;                ///< the tags the target supports
  bool allow_prereleases = false;         ///< pip's --pre
  std::size_t max_steps = 20000;          ///< candidate versions tried before giving up ("wheel.too_complex")
  /// The sha256 hashes a project file lists, by canonical project name: a file whose sha256 (as the index gives it)
  /// is not among its project's is never chosen, as pip's and uv's hash checking filter candidates.
  std::map<std::string, std::vector<Digest>> allowed_hashes;
  /// pip's hash-checking mode (a project file with hashes, or a lock): every project chosen, dependencies included,
  /// must have an entry in allowed_hashes; one without fails with `wheel.hash_required`.
  bool require_hashes = false;
  /// Constraints (pip's -c files), by canonical project name: versions outside them are never candidates; they add
  /// no project. PEP 440 specifier text ("<2,>=1.26").
  std::map<std::string, std::string> version_constraints;
  /// Where allowed_hashes and version_constraints come from ("requirements.txt"), for messages.
  std::string hashes_origin;
  /// When set, a wheel whose index offers no metadata file is downloaded into this cache (it is needed for
  /// the build anyway) and read from there; without it the wheel is fetched into memory (size-limited).
  BlobStore* cache = nullptr;
};

/// One pinned wheel.
struct PinnedWheel {
  std::string name;      ///< PEP 503 canonical project name
  std::string version;   ///< normalized PEP 440 version
  std::string filename;  ///< the wheel's file name
  std::string url;       ///< absolute, without fragment
  Digest sha256;
  std::string index;     ///< the index URL (as given in the request) the project came from
  std::uint64_t size = 0;  ///< bytes; 0 when the index does not say and the wheel was not downloaded
  std::vector<std::string> requires_dist;  ///< the Requires-Dist entries that applied (markers true), as packaging prints them
};

/// The pins, and a log of what the search decided and why (for --verbose output and debugging).
struct WheelResolution {
  std::vector<PinnedWheel> wheels;  ///< sorted by name
  std::vector<std::string> decisions;
};

/// Resolves `request.requirements` to one wheel per project, fetching each project page once and core metadata
/// once per version tried. Fails with ErrorKind::unsatisfiable: `wheel.conflict` (the conflicting requirements
/// and who required them), `wheel.not_found` (a project on none of the indexes, which are named),
/// `wheel.sdist_only` (only source distributions in the needed range), `wheel.no_match` (no usable wheel in the
/// range, with the reason per version) and `wheel.too_complex` (max_steps exceeded); with ErrorKind::spec
/// `wheel.requirement` for an unparsable or direct-URL requirement and `wheel.no_index` without indexes; with
/// ErrorKind::environment `wheel.no_hash` (a chosen wheel the index gives no sha256 for), `wheel.hash_mismatch`
/// (a metadata file or wheel whose bytes differ from the index's sha256), `wheel.bad_wheel` (no METADATA in a
/// wheel), `wheel.metadata_mismatch` (metadata naming another project or version), `wheel.direct_url` (a
/// dependency given as `name @ url`), and the fetcher's and
/// parsers' errors (fetch.*, simple.*, metadata.*, pep508.*) with the URL in their context.
Result<WheelResolution> resolve_wheels(Fetcher& fetcher, const WheelResolveRequest& request);

}  // namespace gpuenv::packages
