#include "packages/wheels/wheel_resolver.hpp"

#include "base/digest.hpp"

#include <filesystem>

#include "base/cache/fetch_into_cache.hpp"
#include "packages/wheels/remote_metadata.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <openssl/evp.h>

#include <algorithm>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#include "packages/wheels/metadata.hpp"
#include "packages/wheels/pep440.hpp"
#include "packages/wheels/simple_index.hpp"
#include "base/text.hpp"

namespace gpuenv::packages {
namespace {

constexpr std::size_t k_max_metadata_bytes = 16u << 20;
constexpr std::size_t k_max_notes = 5;
constexpr std::size_t k_max_listed_versions = 8;
constexpr const char* k_json_type = "application/vnd.pypi.simple.v1+json";

const char* const k_hint_conflict = "relax one of the conflicting requirements, or pin versions that agree with each other";
const char* const k_hint_not_found =
    "check the project name, and that the index list includes the index serving it (gpuenv takes each project "
    "only from the first index that has it)";
const char* const k_hint_sdist_only =
    "gpuenv installs wheels only and does not build source distributions: pick a version that ships wheels for "
    "this target, or build the wheel yourself and serve it from your own index";
const char* const k_hint_no_match = "choose a version that has a wheel for this Python and platform, or change the target";
const char* const k_hint_hash_not_listed =
    "the index serves other files than the project file was made from: find out why the bytes differ, then make the file again against this "
    "index (uv lock, pip-compile --generate-hashes)";

// ---------------------------------------------------------------------------------------------------------------
// Small helpers


bool ends_with_ci(std::string_view s, std::string_view suffix) {
  if (s.size() < suffix.size()) return false;
  for (std::size_t i = 0; i < suffix.size(); ++i) {
    char c = s[s.size() - suffix.size() + i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != suffix[i]) return false;
  }
  return true;
}


std::vector<int> merge_levels(std::vector<int> a, const std::vector<int>& b) {
  a.insert(a.end(), b.begin(), b.end());
  std::sort(a.begin(), a.end());
  a.erase(std::unique(a.begin(), a.end()), a.end());
  return a;
}

/// The version of a source distribution of `project` from its file name, if it parses.
std::optional<Pep440Version> sdist_version(std::string_view filename, const std::string& project) {
  static constexpr std::string_view k_exts[] = {".tar.gz", ".tar.bz2", ".tar.xz", ".tgz", ".tbz", ".txz", ".tar", ".zip"};
  std::string_view stem = filename;
  for (auto ext : k_exts) {
    if (ends_with_ci(stem, ext)) {
      stem.remove_suffix(ext.size());
      break;
    }
  }
  for (std::size_t dash = stem.find('-'); dash != std::string_view::npos; dash = stem.find('-', dash + 1)) {
    if (canonicalize_name(stem.substr(0, dash)) != project) continue;
    auto v = Pep440Version::parse(stem.substr(dash + 1));
    if (v) return *v;
  }
  return std::nullopt;
}

/// "name[extra]spec" as written, for messages.
std::string requirement_text(const Requirement& r) {
  std::string out = r.name;
  if (!r.extras.empty()) out += "[" + join(r.extras, ",") + "]";
  out += r.specifier_text;
  return out;
}

/// str(packaging.requirements.Requirement): name, sorted extras, normalized specifier, "; marker".
std::string requirement_str(const Requirement& r) {
  std::string out = r.name;
  if (!r.extras.empty()) {
    auto extras = r.extras;
    std::sort(extras.begin(), extras.end());
    out += "[" + join(extras, ",") + "]";
  }
  out += r.specifier.str();
  if (r.marker) out += "; " + r.marker->str();
  return out;
}

/// True when the set pins one version with == (not a wildcard) or ===, which lets a yanked file be used (PEP 592).
bool pins_exactly(const Pep440SpecifierSet& set) {
  return std::any_of(set.specifiers().begin(), set.specifiers().end(), [](const Pep440Specifier& s) {
    if (s.op() == SpecOp::arbitrary) return true;
    const auto& text = s.version_text();
    return s.op() == SpecOp::equal && !(text.size() >= 2 && text.compare(text.size() - 2, 2, ".*") == 0);
  });
}

using ArchivePtr = std::unique_ptr<archive, decltype(&archive_read_free)>;

/// The text of `<project>-<version>.dist-info/METADATA` inside the wheel held in `bytes`, or (when `file` is
/// not empty) in the wheel file at that path, read in a stream.
Result<std::string> wheel_metadata(std::string_view bytes, const std::string& project, const std::string& url,
                                   const std::string& file = {}) {
  ArchivePtr a(archive_read_new(), &archive_read_free);
  if (!a) return make_error(ErrorKind::environment, "wheel.bad_wheel", "cannot allocate an archive reader", url);
  archive_read_support_format_zip(a.get());
  auto corrupt = [&](const std::string& what) {
    const char* msg = archive_error_string(a.get());
    return make_error(ErrorKind::environment, "wheel.bad_wheel", what + ": " + (msg ? msg : "unknown error"), url,
                      "the wheel is not a readable zip archive; check the index or its mirror");
  };
  const int opened = file.empty() ? archive_read_open_memory(a.get(), bytes.data(), bytes.size())
                                  : archive_read_open_filename(a.get(), file.c_str(), 1 << 16);
  if (opened != ARCHIVE_OK) return corrupt("cannot open the wheel");
  archive_entry* entry = nullptr;
  while (true) {
    const int r = archive_read_next_header(a.get(), &entry);
    if (r == ARCHIVE_EOF) break;
    if (r < ARCHIVE_WARN) return corrupt("cannot read the wheel");
    const char* raw = archive_entry_pathname(entry);
    if (raw == nullptr) continue;
    const std::string_view path(raw);
    const auto slash = path.find('/');
    if (slash == std::string_view::npos || path.substr(slash + 1) != "METADATA") continue;
    const std::string_view dir = path.substr(0, slash);
    if (!ends_with_ci(dir, ".dist-info")) continue;
    const auto dash = dir.find('-');
    if (dash == std::string_view::npos || canonicalize_name(dir.substr(0, dash)) != project) continue;
    std::string text;
    char buf[16384];
    la_ssize_t n = 0;
    while ((n = archive_read_data(a.get(), buf, sizeof buf)) > 0) {
      text.append(buf, static_cast<std::size_t>(n));
      if (text.size() > k_max_metadata_bytes) {
        return make_error(ErrorKind::environment, "wheel.bad_wheel",
                          std::string(path) + " is larger than " + std::to_string(k_max_metadata_bytes) + " bytes", url,
                          "the wheel looks malformed; check the index");
      }
    }
    if (n < 0) return corrupt("cannot read " + std::string(path));
    return text;
  }
  return make_error(ErrorKind::environment, "wheel.bad_wheel", "the wheel has no " + project + "-*.dist-info/METADATA", url,
                    "the wheel is malformed; report it to the project");
}

// ---------------------------------------------------------------------------------------------------------------
// Candidates

/// A wheel that the target can install, and how well it fits.
struct WheelChoice {
  IndexFile file;
  std::size_t rank = 0;
  WheelName name;
};

/// True when `a` is preferred over `b`: better tag, then higher build tag (pip's order), then file name.
bool better(const WheelChoice& a, const WheelChoice& b) {
  if (a.rank != b.rank) return a.rank < b.rank;
  if (a.name.has_build != b.name.has_build) return a.name.has_build;
  const auto& an = a.name.build_number;
  const auto& bn = b.name.build_number;
  if (an.size() != bn.size()) return an.size() > bn.size();
  if (an != bn) return an > bn;
  if (a.name.build_suffix != b.name.build_suffix) return a.name.build_suffix > b.name.build_suffix;
  return a.file.filename < b.file.filename;
}

/// Everything the index offers for one version, and why its files may not be usable.
struct VersionEntry {
  Pep440Version version;
  std::optional<WheelChoice> wheel;         ///< best compatible wheel that is not yanked
  std::optional<WheelChoice> yanked_wheel;  ///< best compatible wheel among the yanked ones
  bool has_sdist = false;
  bool has_wheel_file = false;   ///< any wheel at all, compatible or not
  bool tag_mismatch = false;     ///< a wheel whose tags the target does not support
  std::string python_excluded;   ///< Requires-Python of a compatible wheel that excludes the target
  bool hash_excluded = false;    ///< a compatible wheel whose sha256 is none the project file lists
  bool constraint_excluded = false;  ///< outside the constraints files' range
};

/// A project's page on the first index that has it.
struct ProjectPage {
  bool found = false;
  std::string index;
  std::string page_url;
  std::vector<VersionEntry> versions;  ///< newest first
};

// ---------------------------------------------------------------------------------------------------------------
// Search state

/// A requirement on a project and who made it.
struct Constraint {
  Requirement req;
  std::string text;          ///< as written, for messages
  std::string requirer;      ///< "the spec", "torch 2.5.1", "torch 2.5.1 (extra 'cuda')"
  std::vector<int> origins;  ///< decision levels this constraint exists because of (sorted, unique)
};

struct ProjectState {
  std::vector<Constraint> constraints;
  std::map<std::string, std::vector<int>> extras;  ///< requested extra -> origins of the request that added it
  std::set<std::string> active_extras;             ///< extras whose dependencies are in the state
  std::optional<std::size_t> chosen;               ///< index into ProjectPage::versions
  bool chosen_yanked = false;
  int level = -1;                                  ///< decision level of the choice
};

using State = std::map<std::string, ProjectState>;

/// Why something failed, as it will be told to the user.
struct Note {
  std::string id;
  std::string message;
  friend bool operator==(const Note&, const Note&) = default;
};

/// A dead end: the decision levels that together cause it, and its explanation.
struct Conflict {
  std::vector<int> levels;
  Note note;
};

struct Decision {
  State before;
  std::string project;
  std::vector<std::size_t> candidates;
  std::size_t next = 0;
  std::set<int> conflict_levels;
  std::vector<Note> notes;
};

void add_notes(std::vector<Note>& to, const std::vector<Note>& from) {
  for (const auto& n : from) {
    if (to.size() >= k_max_notes) return;
    if (std::find(to.begin(), to.end(), n) == to.end()) to.push_back(n);
  }
}

using Step = Result<std::optional<Conflict>>;

class Resolver {
 public:
  Resolver(Fetcher& fetcher, const WheelResolveRequest& request)
      : m_fetcher(fetcher), m_request(request), m_supported(supported_tags(request.platform)) {}

  Result<WheelResolution> run();

 private:
  Result<const ProjectPage*> page(const std::string& name);
  Result<const CoreMetadata*> metadata(const std::string& name, const VersionEntry& entry, const WheelChoice& wheel);
  std::vector<std::size_t> matching(const ProjectPage& page, const std::vector<Constraint>& constraints) const;
  Result<std::optional<Pep440SpecifierSet>> constraint_of(const std::string& name) const;
  Step choose(State& state, const std::string& name, std::size_t index, int level);
  Step add_constraint(State& state, Constraint c);
  Step activate_extra(State& state, const std::string& name, const std::string& extra, const std::vector<int>& origins);
  Result<std::vector<const Requirement*>> applied(const CoreMetadata& md, const std::string& extra) const;
  Conflict explain_empty(const std::string& name, const ProjectPage& page, const std::vector<Constraint>& constraints) const;
  Note explain_single(const std::string& name, const ProjectPage& page, const Constraint& c) const;
  std::string usable_versions(const ProjectPage& page) const;
  std::string target_text() const;
  Error failure(std::vector<Note> notes) const;
  Result<WheelResolution> finish(const State& state);

  /// The undecided project to decide next, and the indexes of its candidate versions.
  struct Pick {
    std::string name;
    std::vector<std::size_t> candidates;
  };
  void set_python();
  Status add_requirements(State& state);
  Result<WheelResolution> search(State& state);
  Result<std::optional<Pick>> pick(const State& state);
  void jump_back(std::vector<Decision>& stack, const Conflict& conflict, const std::vector<Note>& notes);
  Result<bool> try_candidates(State& state, Decision& d, int level, std::size_t& steps);
  Conflict exhausted(const Decision& d, int level);

  static const WheelChoice& chosen_wheel(const ProjectPage& page, const ProjectState& ps) {
    const auto& entry = page.versions[*ps.chosen];
    return ps.chosen_yanked ? *entry.yanked_wheel : *entry.wheel;
  }
  static std::string label(const std::string& name, const VersionEntry& entry) { return name + " " + entry.version.str(); }

  Fetcher& m_fetcher;
  const WheelResolveRequest& m_request;
  std::vector<std::string> m_supported;
  Pep440Version m_python;
  std::map<std::string, ProjectPage> m_pages;
  std::map<std::string, CoreMetadata> m_metadata;      // by wheel URL
  std::map<std::string, std::uint64_t> m_sizes;        // by wheel URL, for wheels downloaded for their metadata
  std::vector<std::string> m_decisions;
};

Result<const ProjectPage*> Resolver::page(const std::string& name) {
  if (auto it = m_pages.find(name); it != m_pages.end()) return &it->second;
  ProjectPage result;
  std::vector<IndexFile> files;
  const auto pinned_index = m_request.project_indexes.find(name);
  const std::vector<std::string> indexes =
      pinned_index == m_request.project_indexes.end() ? m_request.indexes : std::vector<std::string>{pinned_index->second};
  for (const auto& index : indexes) {
    const std::string url = project_page_url(index, name);
    // PEP 691: ask for JSON (it carries sizes and upload times), accept HTML.
    auto body = m_fetcher.get(url, "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01");
    if (!body) {
      if (body.error().id == "fetch.not_found") {
        m_decisions.push_back("index: " + name + " is not on " + index);
        continue;
      }
      Error e = std::move(body).error();
      e.while_("fetching the project page of " + name + " from " + index);
      return e;
    }
    const auto start = body->find_first_not_of(" \t\r\n");
    const bool json = start != std::string::npos && (*body)[start] == '{';
    auto parsed = parse_simple_page(*body, json ? k_json_type : "text/html", url);
    if (!parsed) {
      Error e = std::move(parsed).error();
      e.while_("reading the project page of " + name + " from " + url);
      return e;
    }
    // Only http(s) links (and file links from a file: index) survive parsing, so every URL fetched below (a
    // wheel, its metadata file, its ranges) obeys that rule; the others are only logged.
    files = std::move(parsed->files);
    for (const auto& note : parsed->skipped) m_decisions.push_back("index: skipped " + note);
    result.found = true;
    result.index = index;
    result.page_url = url;
    m_decisions.push_back("index: " + name + " from " + index + " (" + std::to_string(files.size()) + " files)");
    break;
  }

  std::map<Pep440Version, VersionEntry, std::greater<>> by_version;
  for (auto& f : files) {
    if (is_sdist_filename(f.filename)) {
      if (auto v = sdist_version(f.filename, name)) {
        auto& entry = by_version[*v];
        entry.version = *v;
        entry.has_sdist = true;
      }
      continue;
    }
    if (!ends_with_ci(f.filename, ".whl")) continue;
    auto wheel = parse_wheel_filename(f.filename);
    if (!wheel || wheel->name != name) continue;
    auto& entry = by_version[wheel->version];
    entry.version = wheel->version;
    entry.has_wheel_file = true;
    const auto rank = tag_rank(*wheel, m_supported);
    if (!rank) {
      entry.tag_mismatch = true;
      continue;
    }
    if (!f.requires_python.empty()) {
      auto rp = Pep440SpecifierSet::parse(f.requires_python);
      // pip ignores a Requires-Python it cannot parse; so does gpuenv.
      if (rp && !rp->contains(m_python, true)) {
        entry.python_excluded = f.requires_python;
        continue;
      }
    }
    if (auto allowed = m_request.allowed_hashes.find(name); allowed != m_request.allowed_hashes.end() &&
                                                           std::find(allowed->second.begin(), allowed->second.end(), f.sha256) == allowed->second.end()) {
      entry.hash_excluded = true;
      continue;
    }
    WheelChoice choice{std::move(f), *rank, std::move(*wheel)};
    auto& slot = choice.file.yanked ? entry.yanked_wheel : entry.wheel;
    if (!slot || better(choice, *slot)) slot = std::move(choice);
  }
  GPUENV_TRY(limit, constraint_of(name));
  for (auto& [version, entry] : by_version) {
    if (limit && !limit->contains(version, true)) {
      entry.constraint_excluded = true;
      entry.wheel.reset();
      entry.yanked_wheel.reset();
    }
    result.versions.push_back(std::move(entry));
  }
  return &m_pages.emplace(name, std::move(result)).first->second;
}

/// The constraints files' range for NAME (version_constraints), if any.
Result<std::optional<Pep440SpecifierSet>> Resolver::constraint_of(const std::string& name) const {
  auto c = m_request.version_constraints.find(name);
  if (c == m_request.version_constraints.end()) return std::optional<Pep440SpecifierSet>();
  auto parsed = Pep440SpecifierSet::parse(c->second);
  if (!parsed) {
    Error e = std::move(parsed).error();
    e.while_("reading the constraint on " + name);
    return e;
  }
  return std::optional<Pep440SpecifierSet>(std::move(*parsed));
}

Result<const CoreMetadata*> Resolver::metadata(const std::string& name, const VersionEntry& entry, const WheelChoice& wheel) {
  const IndexFile& file = wheel.file;
  if (auto it = m_metadata.find(file.url); it != m_metadata.end()) return &it->second;
  std::string text;
  std::string where;
  if (file.has_metadata) {
    where = metadata_url(file);
    auto body = m_fetcher.get(where);
    if (!body) {
      Error e = std::move(body).error();
      e.while_("fetching the core metadata of " + file.filename);
      return e;
    }
    if (!file.metadata_sha256.empty() && Digest::of(*body) != file.metadata_sha256) {
      return make_error(ErrorKind::environment, "wheel.hash_mismatch",
                        "the metadata file of " + file.filename + " has sha256 " + sha256_hex(*body) +
                            ", the index says " + file.metadata_sha256.hex(),
                        where, "the index or a proxy serves altered files; do not use it until this is explained");
    }
    text = std::move(*body);
  } else if (auto probe = m_fetcher.get(metadata_url(file)); probe) {
    // Indexes that backfilled PEP 658 files do not always advertise them (large wheels on the main index);
    // the file is tried before downloading the whole wheel. Its content is still checked against the
    // wheel's name and version below, and the wheel itself is pinned by the index's sha256.
    where = metadata_url(file);
    m_decisions.push_back("metadata: " + file.filename + " advertises no metadata file; read the unadvertised " + where);
    text = std::move(*probe);
  } else if (probe.error().id != "fetch.not_found") {
    Error e = std::move(probe).error();
    e.while_("fetching the core metadata of " + file.filename);
    return e;
  } else if (auto ranged = file.size ? remote_wheel_metadata(m_fetcher, file.url, *file.size, name)
                                      : Result<std::string>(make_error(ErrorKind::environment, "wheel.remote_zip", "size unknown", file.url));
             ranged) {
    // Range requests for the zip's directory and the METADATA member only, instead of the whole wheel.
    where = file.url + " (METADATA, by range requests)";
    m_decisions.push_back("metadata: " + file.filename + " has no metadata file; read METADATA with range requests");
    text = std::move(*ranged);
  } else if (m_request.cache) {
    // The wheel is needed to build the image anyway: download it into the cache (verified by the index's
    // sha256 as it arrives) and read METADATA from the file, without holding the wheel in memory.
    where = file.url;
    m_decisions.push_back("metadata: " + file.filename + " has no PEP 658 metadata file; reading it from the cached wheel");
    auto blobs = fetch_into_cache(m_fetcher, *m_request.cache, {CacheRequest{file.url, file.sha256, file.size}});
    if (!blobs[0]) {
      Error e = std::move(blobs[0]).error();
      e.while_("fetching " + file.filename + " to read its metadata");
      return e;
    }
    std::error_code ec;
    m_sizes[file.url] = std::filesystem::file_size(blobs[0]->path, ec);
    auto extracted = wheel_metadata({}, name, file.url, blobs[0]->path);
    if (!extracted) return std::move(extracted).error();
    text = std::move(*extracted);
    where += " (METADATA)";
  } else {
    where = file.url;
    m_decisions.push_back("metadata: " + file.filename + " has no PEP 658 metadata file; reading it from the wheel");
    auto body = m_fetcher.get(file.url);
    if (!body) {
      Error e = std::move(body).error();
      e.while_("fetching " + file.filename + " to read its metadata");
      return e;
    }
    if (Digest::of(*body) != file.sha256) {
      return make_error(ErrorKind::environment, "wheel.hash_mismatch",
                        file.filename + " has sha256 " + sha256_hex(*body) + ", the index says " + file.sha256.hex(), where,
                        "the index or a proxy serves altered files; do not use it until this is explained");
    }
    m_sizes[file.url] = body->size();
    auto extracted = wheel_metadata(*body, name, file.url);
    if (!extracted) return std::move(extracted).error();
    text = std::move(*extracted);
    where += " (METADATA)";
  }
  auto md = parse_core_metadata(text, where);
  if (!md) {
    Error e = std::move(md).error();
    e.while_("reading the core metadata of " + file.filename);
    return e;
  }
  if (canonicalize_name(md->name) != name || !(md->version == entry.version)) {
    return make_error(ErrorKind::environment, "wheel.metadata_mismatch",
                      "the metadata of " + file.filename + " names " + md->name + " " + md->version_text +
                          ", not " + name + " " + entry.version.str(),
                      where, "the index serves inconsistent files; report it to the index operator");
  }
  return &m_metadata.emplace(file.url, std::move(*md)).first->second;
}

std::vector<std::size_t> Resolver::matching(const ProjectPage& page, const std::vector<Constraint>& constraints) const {
  bool pinned = false;
  bool named_pre = m_request.allow_prereleases;
  for (const auto& c : constraints) {
    pinned = pinned || pins_exactly(c.req.specifier);
    named_pre = named_pre || c.req.specifier.prereleases().value_or(false);
  }
  auto pass = [&](bool pre) {
    std::vector<std::size_t> out;
    for (std::size_t i = 0; i < page.versions.size(); ++i) {
      const auto& entry = page.versions[i];
      if (!entry.wheel && !(pinned && entry.yanked_wheel)) continue;
      const bool ok = std::all_of(constraints.begin(), constraints.end(),
                                  [&](const Constraint& c) { return c.req.specifier.contains(entry.version, pre); });
      if (ok) out.push_back(i);
    }
    return out;
  };
  auto out = pass(named_pre);
  // As packaging's SpecifierSet.filter (and so pip): when only pre-releases match, they are taken.
  if (out.empty() && !named_pre) out = pass(true);
  return out;
}

Result<std::vector<const Requirement*>> Resolver::applied(const CoreMetadata& md, const std::string& extra) const {
  std::vector<const Requirement*> out;
  Environment env = m_request.environment;
  for (const auto& r : md.requires_dist) {
    bool with_extra = true;
    bool without = true;
    if (r.marker) {
      env.extra = extra;
      auto a = r.marker->evaluate(env);
      if (!a) return std::move(a).error();
      with_extra = *a;
      if (!extra.empty()) {
        env.extra.clear();
        auto b = r.marker->evaluate(env);
        if (!b) return std::move(b).error();
        without = *b;
      }
    }
    // For an extra, only what the extra adds; the base dependencies are added once, with the version.
    if (with_extra && (extra.empty() || !without)) out.push_back(&r);
  }
  return out;
}

Step Resolver::choose(State& state, const std::string& name, std::size_t index, int level) {
  auto pg = page(name);
  if (!pg) return std::move(pg).error();
  const ProjectPage& pp = **pg;
  ProjectState& ps = state[name];
  const VersionEntry& entry = pp.versions[index];
  ps.chosen = index;
  ps.chosen_yanked = !entry.wheel.has_value();
  ps.level = level;
  const WheelChoice& wheel = chosen_wheel(pp, ps);
  m_decisions.push_back("try " + label(name, entry) + " (" + wheel.file.filename + (ps.chosen_yanked ? ", yanked" : "") + ")");
  if (wheel.file.sha256.empty()) {
    return make_error(ErrorKind::environment, "wheel.no_hash",
                      "the index gives no sha256 for " + wheel.file.filename + ", so gpuenv cannot verify it", wheel.file.url,
                      "use an index that publishes sha256 hashes (PEP 691 \"hashes\" or PEP 503 #sha256= fragments)");
  }
  auto md = metadata(name, entry, wheel);
  if (!md) return std::move(md).error();
  if (!(*md)->requires_python.empty() && !(*md)->requires_python.contains(m_python, true)) {
    return std::optional<Conflict>(Conflict{
        {level},
        Note{"wheel.no_match", label(name, entry) + " requires Python " + (*md)->requires_python_text +
                                   " (its metadata says), the target has " + m_python.str()}});
  }
  auto deps = applied(**md, "");
  if (!deps) {
    Error e = std::move(deps).error();
    e.while_("evaluating the markers of " + label(name, entry));
    return e;
  }
  for (const Requirement* r : *deps) {
    auto step = add_constraint(state, Constraint{*r, requirement_text(*r), label(name, entry), {level}});
    if (!step || *step) return step;
  }
  std::vector<std::pair<std::string, std::vector<int>>> extras(ps.extras.begin(), ps.extras.end());
  for (const auto& [extra, origins] : extras) {
    auto step = activate_extra(state, name, extra, merge_levels(origins, {level}));
    if (!step || *step) return step;
  }
  return std::optional<Conflict>();
}

Step Resolver::activate_extra(State& state, const std::string& name, const std::string& extra, const std::vector<int>& origins) {
  ProjectState& ps = state[name];
  if (!ps.active_extras.insert(extra).second) return std::optional<Conflict>();
  auto pg = page(name);
  if (!pg) return std::move(pg).error();
  const ProjectPage& pp = **pg;
  const VersionEntry& entry = pp.versions[*ps.chosen];
  auto md = metadata(name, entry, chosen_wheel(pp, ps));
  if (!md) return std::move(md).error();
  const auto& provided = (*md)->provides_extra;
  if (std::none_of(provided.begin(), provided.end(), [&](const std::string& p) { return canonicalize_name(p) == extra; })) {
    m_decisions.push_back("note: " + label(name, entry) + " has no extra '" + extra + "'");
  }
  auto deps = applied(**md, extra);
  if (!deps) {
    Error e = std::move(deps).error();
    e.while_("evaluating the markers of " + label(name, entry) + " for extra '" + extra + "'");
    return e;
  }
  for (const Requirement* r : *deps) {
    auto step = add_constraint(state, Constraint{*r, requirement_text(*r), label(name, entry) + " (extra '" + extra + "')", origins});
    if (!step || *step) return step;
  }
  return std::optional<Conflict>();
}

Step Resolver::add_constraint(State& state, Constraint c) {
  if (!c.req.url.empty()) {
    return make_error(ErrorKind::environment, "wheel.direct_url",
                      c.requirer + " requires " + c.req.name + " from the URL " + c.req.url, {},
                      "gpuenv takes projects from indexes only; serve that wheel from an index you control");
  }
  const std::string name = canonicalize_name(c.req.name);
  ProjectState& ps = state[name];
  std::vector<std::string> new_extras;
  for (const auto& e : c.req.extras) {
    const std::string extra = canonicalize_name(e);
    if (ps.extras.emplace(extra, c.origins).second) new_extras.push_back(extra);
  }
  ps.constraints.push_back(c);
  if (!ps.chosen) return std::optional<Conflict>();

  auto pg = page(name);
  if (!pg) return std::move(pg).error();
  const ProjectPage& pp = **pg;
  const VersionEntry& entry = pp.versions[*ps.chosen];
  if (!c.req.specifier.contains(entry.version, true)) {
    if (matching(pp, ps.constraints).empty()) return std::optional<Conflict>(explain_empty(name, pp, ps.constraints));
    return std::optional<Conflict>(Conflict{
        merge_levels(c.origins, {ps.level}),
        Note{"wheel.conflict", c.requirer + " requires " + c.text + ", but " + label(name, entry) + " was chosen before"}});
  }
  for (const auto& extra : new_extras) {
    auto step = activate_extra(state, name, extra, merge_levels(c.origins, {ps.level}));
    if (!step || *step) return step;
  }
  return std::optional<Conflict>();
}

std::string Resolver::target_text() const {
  const auto& p = m_request.platform;
  return p.implementation + std::to_string(p.python_major) + std::to_string(p.python_minor) + " on glibc " +
         std::to_string(p.glibc_major) + "." + std::to_string(p.glibc_minor) + " " + p.arch;
}

std::string Resolver::usable_versions(const ProjectPage& page) const {
  std::vector<std::string> out;
  for (const auto& entry : page.versions) {
    if (!entry.wheel) continue;
    if (out.size() == k_max_listed_versions) {
      out.push_back("...");
      break;
    }
    out.push_back(entry.version.str());
  }
  return out.empty() ? "none" : join(out, ", ");
}

Note Resolver::explain_single(const std::string& name, const ProjectPage& page, const Constraint& c) const {
  const std::string asked = c.text + " (required by " + c.requirer + ")";
  std::vector<const VersionEntry*> in_range;
  for (const auto& entry : page.versions) {
    if (c.req.specifier.contains(entry.version, true)) in_range.push_back(&entry);
  }
  if (in_range.empty()) {
    std::vector<std::string> all;
    for (const auto& entry : page.versions) {
      if (all.size() == k_max_listed_versions) {
        all.push_back("...");
        break;
      }
      all.push_back(entry.version.str());
    }
    return {"wheel.no_match", "no release of " + name + " matches " + asked + "; " + page.index + " has " +
                                  (all.empty() ? std::string("no files for it") : join(all, ", "))};
  }
  if (std::none_of(in_range.begin(), in_range.end(), [](const VersionEntry* e) { return e->has_wheel_file; })) {
    std::vector<std::string> versions;
    for (const auto* e : in_range) versions.push_back(e->version.str());
    return {"wheel.sdist_only", name + " offers only source distributions for " + asked + ": " + join(versions, ", ") +
                                    "; gpuenv installs wheels and does not build sdists"};
  }
  const bool pinned = pins_exactly(c.req.specifier);
  const bool pre_ok = m_request.allow_prereleases || c.req.specifier.prereleases().value_or(false);
  std::vector<std::string> reasons;
  for (const auto* e : in_range) {
    if (reasons.size() == k_max_listed_versions) break;
    std::string why;
    if (e->wheel || (pinned && e->yanked_wheel)) {
      if (e->version.is_prerelease() && !pre_ok) why = "a pre-release (allow pre-releases or name one in the specifier)";
      else continue;
    } else if (e->yanked_wheel) {
      why = "yanked (pin it with == to use it anyway)";
    } else if (!e->python_excluded.empty()) {
      why = "requires Python " + e->python_excluded + ", the target has " + m_python.str();
    } else if (e->constraint_excluded) {
      why = "outside the constraint " + m_request.version_constraints.at(name) + " of " +
            (m_request.hashes_origin.empty() ? std::string("the project file") : m_request.hashes_origin);
    } else if (e->hash_excluded) {
      why = "no wheel for " + target_text() + " whose sha256 is one " + (m_request.hashes_origin.empty() ? std::string("the project file") : m_request.hashes_origin) +
            " lists for it (the index serves other bytes than the file was made from)";
    } else if (e->tag_mismatch) {
      why = "no wheel for " + target_text();
    } else {
      why = "source distribution only";
    }
    reasons.push_back(e->version.str() + ": " + why);
  }
  // Every version the requirement allows lost its wheels to the project file's hashes: the file and the index disagree.
  const bool by_hash = std::all_of(in_range.begin(), in_range.end(), [](const VersionEntry* e) { return e->hash_excluded && !e->wheel && !e->yanked_wheel; });
  return {by_hash ? "wheel.hash_not_listed" : "wheel.no_match", "no version of " + name + " in " + asked + " has a wheel gpuenv can use: " + join(reasons, "; ")};
}

Conflict Resolver::explain_empty(const std::string& name, const ProjectPage& page, const std::vector<Constraint>& constraints) const {
  if (!page.found) {
    // Any one requirement makes the project necessary: blame the one that goes back least far.
    const Constraint* best = &constraints.front();
    for (const auto& c : constraints) {
      const int m = c.origins.empty() ? -1 : c.origins.back();
      const int b = best->origins.empty() ? -1 : best->origins.back();
      if (m < b) best = &c;
    }
    return {best->origins,
            {"wheel.not_found", "project " + name + " (required by " + best->requirer + ") is on none of the indexes searched: " +
                                    join(m_request.indexes, ", ")}};
  }
  // Shrink to a minimal set of requirements that no usable version satisfies, dropping the ones from the most
  // recent decisions first, so the search can jump back as far as possible.
  std::vector<std::size_t> order(constraints.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto depth = [&](std::size_t i) { return constraints[i].origins.empty() ? -1 : constraints[i].origins.back(); };
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return depth(a) > depth(b); });
  std::vector<bool> keep(constraints.size(), true);
  for (std::size_t i : order) {
    keep[i] = false;
    std::vector<Constraint> rest;
    for (std::size_t j = 0; j < constraints.size(); ++j) {
      if (keep[j]) rest.push_back(constraints[j]);
    }
    if (rest.empty() || !matching(page, rest).empty()) keep[i] = true;
  }
  std::vector<const Constraint*> core;
  std::vector<int> levels;
  for (std::size_t j = 0; j < constraints.size(); ++j) {
    if (!keep[j]) continue;
    core.push_back(&constraints[j]);
    levels = merge_levels(levels, constraints[j].origins);
  }
  if (core.size() == 1) return {levels, explain_single(name, page, *core.front())};

  // Dependencies first, then what the spec itself asks, the last one after "but".
  std::stable_partition(core.begin(), core.end(), [](const Constraint* c) { return !c->origins.empty(); });
  std::vector<std::string> phrases;
  for (const auto* c : core) {
    phrases.push_back(c->origins.empty() ? "the spec asks " + c->text : c->requirer + " requires " + c->text);
  }
  const std::string last = phrases.back();
  phrases.pop_back();
  return {levels, {"wheel.conflict", join(phrases, ", ") + ", but " + last + "; no version of " + name +
                                         " satisfies all of them (" + name + " has " + usable_versions(page) +
                                         " for this target)"}};
}

Error Resolver::failure(std::vector<Note> notes) const {
  if (notes.empty()) notes.push_back({"wheel.conflict", "no combination of versions satisfies the requirements"});
  // The first note that is more than "this version was unusable" names the error.
  auto lead = std::find_if(notes.begin(), notes.end(), [](const Note& n) { return n.id != "wheel.no_match" && n.id != "wheel.hash_not_listed"; });
  if (lead != notes.end()) std::rotate(notes.begin(), lead, lead + 1);
  std::vector<std::string> messages;
  for (const auto& n : notes) messages.push_back(n.message);
  const std::string& id = notes.front().id;
  const char* hint = id == "wheel.not_found"    ? k_hint_not_found
                     : id == "wheel.sdist_only" ? k_hint_sdist_only
                     : id == "wheel.no_match"   ? k_hint_no_match
                     : id == "wheel.hash_not_listed" ? k_hint_hash_not_listed
                                                : k_hint_conflict;
  return make_error(ErrorKind::unsatisfiable, id, join(messages, "; also: "), {}, hint);
}

Result<WheelResolution> Resolver::finish(const State& state) {
  WheelResolution out;
  for (const auto& [name, ps] : state) {
    if (!ps.chosen) continue;
    const ProjectPage& pp = m_pages.at(name);
    const VersionEntry& entry = pp.versions[*ps.chosen];
    const WheelChoice& wheel = chosen_wheel(pp, ps);
    PinnedWheel pin;
    pin.name = name;
    pin.version = entry.version.str();
    pin.filename = wheel.file.filename;
    pin.url = wheel.file.url;
    pin.sha256 = wheel.file.sha256;
    pin.index = pp.index;
    if (wheel.file.size) pin.size = *wheel.file.size;
    else if (auto it = m_sizes.find(wheel.file.url); it != m_sizes.end()) pin.size = it->second;
    const CoreMetadata& md = m_metadata.at(wheel.file.url);
    std::vector<std::string> extras{""};
    extras.insert(extras.end(), ps.active_extras.begin(), ps.active_extras.end());
    for (const auto& extra : extras) {
      auto deps = applied(md, extra);
      if (!deps) return std::move(deps).error();
      for (const Requirement* r : *deps) pin.requires_dist.push_back(requirement_str(*r));
    }
    out.wheels.push_back(std::move(pin));
  }
  out.decisions = std::move(m_decisions);
  return out;
}

Result<WheelResolution> Resolver::run() {
  if (m_request.indexes.empty()) {
    return make_error(ErrorKind::spec, "wheel.no_index", "no package index is configured", {},
                      "give at least one simple-index URL");
  }
  set_python();
  State state;
  if (auto st = add_requirements(state); !st) return std::move(st).error();
  return search(state);
}

/// The target's Python version, for the Requires-Python checks: from the marker environment, else from the
/// platform's major.minor.
void Resolver::set_python() {
  const auto& env = m_request.environment;
  const std::string fallback = std::to_string(m_request.platform.python_major) + "." + std::to_string(m_request.platform.python_minor);
  auto v = Pep440Version::parse(!env.python_full_version.empty() ? env.python_full_version
                                : !env.python_version.empty()    ? env.python_version
                                                                 : fallback);
  if (!v) v = Pep440Version::parse(fallback);
  if (v) m_python = *v;
}

/// Adds the spec's requirements whose markers hold for the target to `state`; fails on a requirement that
/// does not parse, names a URL, or has a marker that cannot be evaluated.
Status Resolver::add_requirements(State& state) {
  for (std::size_t i = 0; i < m_request.requirements.size(); ++i) {
    const std::string& text = m_request.requirements[i];
    const std::string requirer = i < m_request.requirement_origins.size() ? m_request.requirement_origins[i] : std::string("the spec");
    auto req = parse_requirement(text);
    if (!req) {
      Error e = std::move(req).error();
      e.kind = ErrorKind::spec;
      e.while_("reading the requirement '" + text + "'");
      return e;
    }
    if (!req->url.empty()) {
      return make_error(ErrorKind::spec, "wheel.requirement", "'" + text + "' names a URL, not versions from an index", {},
                        "gpuenv takes projects from indexes only; serve that wheel from an index you control");
    }
    if (req->marker) {
      Environment env = m_request.environment;
      env.extra.clear();
      auto applies = req->marker->evaluate(env);
      if (!applies) {
        Error e = std::move(applies).error();
        e.while_("evaluating the marker of '" + text + "'");
        return e;
      }
      if (!*applies) {
        m_decisions.push_back("skip '" + text + "': its marker is false for the target");
        continue;
      }
    }
    auto step = add_constraint(state, Constraint{*req, requirement_text(*req), requirer, {}});
    if (!step) return std::move(step).error();
  }
  return ok_status();
}

/// The backtracking search from `state`: decides one project at a time and, on a dead end, jumps back to the
/// latest decision that took part in it.
Result<WheelResolution> Resolver::search(State& state) {
  std::vector<Decision> stack;
  std::size_t steps = 0;
  std::optional<Conflict> conflict;  // levels to jump back to; its note joins the notes below
  std::vector<Note> conflict_notes;
  while (true) {
    if (!conflict) {
      auto next = pick(state);
      if (!next) return std::move(next).error();
      if (!*next) return finish(state);
      Pick& p = **next;
      if (p.candidates.empty()) {
        conflict = explain_empty(p.name, m_pages.at(p.name), state.at(p.name).constraints);
        conflict_notes = {conflict->note};
        m_decisions.push_back("dead end: " + conflict->note.message);
      } else {
        stack.push_back(Decision{state, p.name, std::move(p.candidates), 0, {}, {}});
      }
    }
    if (conflict) {
      if (conflict->levels.empty()) return failure(conflict_notes);
      jump_back(stack, *conflict, conflict_notes);
      conflict.reset();
      conflict_notes.clear();
    }
    // Try the remaining candidates of the top decision.
    Decision& d = stack.back();
    const int level = static_cast<int>(stack.size()) - 1;
    auto placed = try_candidates(state, d, level, steps);
    if (!placed) return std::move(placed).error();
    if (*placed) continue;
    conflict = exhausted(d, level);
    conflict_notes = std::move(d.notes);
    stack.pop_back();
  }
}

/// Picks the undecided project with the fewest candidates (a dead end shows at once), then by name; fails
/// when a project page cannot be fetched.
Result<std::optional<Resolver::Pick>> Resolver::pick(const State& state) {
  std::optional<Pick> out;
  for (const auto& [name, ps] : state) {
    if (ps.chosen || ps.constraints.empty()) continue;
    if (m_request.require_hashes && m_request.allowed_hashes.count(name) == 0) {
      const std::string origin = m_request.hashes_origin.empty() ? std::string("the project file") : m_request.hashes_origin;
      return make_error(ErrorKind::spec, "wheel.hash_required",
                        name + " (required by " + ps.constraints.front().requirer + ") is not in " + origin + ", which pins every package with its hashes",
                        origin, "lock the project again so that it lists " + name + " (uv lock, pip-compile --generate-hashes), or add it with its hashes");
    }
    auto pg = page(name);
    if (!pg) return std::move(pg).error();
    auto candidates = matching(**pg, ps.constraints);
    if (!out || candidates.size() < out->candidates.size()) out = Pick{name, std::move(candidates)};
  }
  return out;
}

/// Jumps back to the most recent decision that took part in `conflict` (the ones after it cannot help) and
/// hands it the conflict's other levels and its `notes`.
void Resolver::jump_back(std::vector<Decision>& stack, const Conflict& conflict, const std::vector<Note>& notes) {
  const int target = conflict.levels.back();
  while (static_cast<int>(stack.size()) > target + 1) stack.pop_back();
  Decision& back = stack.back();
  for (int l : conflict.levels) {
    if (l != target) back.conflict_levels.insert(l);
  }
  add_notes(back.notes, notes);
  m_decisions.push_back("back to " + back.project + " (decision " + std::to_string(target) + ")");
}

/// Tries the remaining candidates of `d`, the decision at `level`, from its state before; true when one is
/// placed in `state`, false when all failed. Fails past the step limit or on a fetch error.
Result<bool> Resolver::try_candidates(State& state, Decision& d, int level, std::size_t& steps) {
  while (d.next < d.candidates.size()) {
    if (++steps > m_request.max_steps) {
      return make_error(ErrorKind::unsatisfiable, "wheel.too_complex",
                        "gave up after trying " + std::to_string(m_request.max_steps) + " candidate versions", {},
                        "pin some versions (the large frameworks first) so the search has fewer choices");
    }
    state = d.before;
    auto step = choose(state, d.project, d.candidates[d.next++], level);
    if (!step) return std::move(step).error();
    if (!*step) return true;
    const Conflict& c = **step;
    m_decisions.push_back("reject: " + c.note.message);
    for (int l : c.levels) {
      if (l != level) d.conflict_levels.insert(l);
    }
    add_notes(d.notes, {c.note});
  }
  return false;
}

/// The conflict of a decision whose every candidate failed: what made each one fail plus what limited the
/// candidates.
Conflict Resolver::exhausted(const Decision& d, int level) {
  std::vector<int> levels(d.conflict_levels.begin(), d.conflict_levels.end());
  for (const auto& c : d.before.at(d.project).constraints) levels = merge_levels(levels, c.origins);
  m_decisions.push_back("exhausted " + d.project + " (decision " + std::to_string(level) + ")");
  return Conflict{levels, {}};
}

}  // namespace

Result<WheelResolution> resolve_wheels(Fetcher& fetcher, const WheelResolveRequest& request) {
  try {
    return Resolver(fetcher, request).run();
  } catch (const std::exception& e) {  // allocation failure; nothing else here throws
    return make_error(ErrorKind::internal, "wheel.internal", std::string("wheel resolution failed: ") + e.what());
  }
}

}  // namespace gpuenv::packages
