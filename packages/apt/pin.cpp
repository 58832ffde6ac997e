#include "packages/apt/pin.hpp"

#include <algorithm>

#include "packages/apt/closure.hpp"
#include "packages/apt/package_index.hpp"

namespace gpuenv::packages {
namespace {

// "bookworm", "bookworm-updates", "bookworm-security", "bookworm/updates" belong to bookworm; flat
// repositories (NVIDIA's CUDA repository) are per-distribution by their URL and are always used.
bool belongs_to(const AptSource& s, const std::string& codename) {
  if (s.is_flat() || codename.empty()) return true;
  return s.suite == codename || s.suite.rfind(codename + "-", 0) == 0 || s.suite.rfind(codename + "/", 0) == 0;
}

/// The lock's record of P.
Result<PinnedPackage> pinned(const PackageIndex& index, const BinaryPackage* p) {
  const RepositoryRef& r = index.repositories()[p->repository];
  PinnedPackage pin;
  pin.name = std::string(p->name);
  pin.version = p->version.str();
  pin.architecture = std::string(p->architecture);
  pin.kind = PackageKind::deb;
  pin.url = r.uri + std::string(p->filename);
  pin.size = p->size;
  auto sha256 = Digest::from_hex(p->sha256);
  pin.source = r.uri + " " + r.suite + (r.component.empty() ? "" : " " + r.component);
  if (!sha256) {
    return make_error(ErrorKind::environment, "apt.no_sha256", "package " + pin.name + " " + pin.version + " has no SHA256 in its index",
                      r.where, "gpuenv pins packages by sha256; the repository's Packages file must carry SHA256 fields");
  }
  pin.sha256 = std::move(*sha256);
  return pin;
}

/// "name" at apt's candidate, or "name=version" exactly. Errors: `apt.not_found`, with the versions there are.
Result<const BinaryPackage*> find_alone(const PackageIndex& index, const std::string& request_text) {
  const auto eq = request_text.find('=');
  const std::string name = request_text.substr(0, eq);
  const BinaryPackage* found = nullptr;
  if (eq == std::string::npos) {
    found = index.candidate(name);
  } else {
    for (const BinaryPackage* v : index.versions(name))
      if (v->version.str() == request_text.substr(eq + 1)) found = v;
  }
  if (found) return found;
  std::string have;
  for (const BinaryPackage* v : index.versions(name)) have += (have.empty() ? "" : ", ") + v->version.str();
  return make_error(ErrorKind::unsatisfiable, "apt.not_found",
                    "no package " + request_text + " in the configured apt repositories" + (have.empty() ? "" : " (they have " + have + ")"), "sources",
                    "check the name, and that the repositories include its component (Debian's NVIDIA driver is in non-free, its firmware in "
                    "non-free-firmware): see gpuenv sources");
}

}  // namespace

Result<AptUniverse> open_apt_universe(const AptUniverseRequest& request, AptFetchContext& ctx) {
  std::vector<const AptSource*> used;
  std::vector<std::string> other_suites;
  for (const auto& s : request.sources) {
    if (!s.is_used()) continue;
    if (belongs_to(s, request.codename)) used.push_back(&s);
    else other_suites.push_back(s.suite + " (" + s.where + ")");
  }
  if (used.empty()) {
    std::string have;
    for (const auto& o : other_suites) have += (have.empty() ? "" : ", ") + o;
    return make_error(ErrorKind::usage, "apt.no_sources",
                      "no apt source serves " + request.codename + (have.empty() ? "" : "; configured: " + have), "sources",
                      "name repositories for " + request.codename + " in the spec's sources.apt (see gpuenv sources)");
  }
  // Preferences are read before anything is fetched, so that a mistake in them costs no download.
  AptPreferences preferences;
  if (!request.preferences_text.empty()) {
    auto parsed = parse_apt_preferences(request.preferences_text, request.preferences_origin);
    if (!parsed) return std::move(parsed).error().while_("reading the apt preferences");
    preferences = std::move(*parsed);
  }
  AptUniverse out;
  out.m_native_arch = ctx.architectures.empty() ? "amd64" : ctx.architectures.front();
  PackageIndex& index = *out.m_index;
  index.set_preferences(std::move(preferences), out.m_native_arch);  // before add(), so each name is evaluated once
  out.m_architectures = ctx.architectures;
  out.m_architectures.push_back("all");
  for (const AptSource* s : used) {
    auto repo = fetch_repository(*s, ctx);
    if (!repo) {
      Error e = std::move(repo).error();
      e.while_("reading the repository " + s->uri + " " + s->suite + " (" + s->where + ")");
      return e;
    }
    out.m_repositories.push_back(s->uri + " " + s->suite + (repo->signed_by.empty() ? " (trusted, unsigned)" : " signed by " + repo->signed_by));
    const ReleaseFile& release = repo->release;
    for (auto& p : repo->packages) {
      RepositoryRef ref{s->uri, s->suite, p.component, p.url};
      ref.archive = release.suite;
      ref.codename = release.codename;
      ref.version = release.version;
      ref.origin = release.origin;
      ref.label = release.label;
      ref.architecture = s->is_flat() ? std::string() : p.architecture;
      ref.not_automatic = release.not_automatic;
      ref.but_automatic_upgrades = release.but_automatic_upgrades;
      if (auto st = index.add(std::move(p.text), std::move(ref), out.m_architectures); !st) return std::move(st).error();
    }
  }
  return out;
}

Result<AptPinResult> pin_apt(const AptUniverse& universe, const AptPinRequest& request) {
  const PackageIndex& index = universe.index();
  const std::vector<std::string>& archs = universe.architectures();
  AptPinResult out;
  ClosureRequest req;
  req.packages = request.packages;
  std::vector<std::string> chosen;
  if (request.more_packages)
    for (auto& name : request.more_packages(index, chosen)) req.packages.push_back(std::move(name));
  req.required_set = request.required_set;
  req.left_out = request.left_out;
  req.native_arch = universe.native_arch();
  PackageIndex installed;
  if (!request.installed_status.empty()) {
    RepositoryRef base{"base-image:", "installed", "", "the base image's /var/lib/dpkg/status"};
    if (auto st = installed.add(installed_packages_text(request.installed_status), std::move(base), archs); !st) return std::move(st).error();
    req.installed = &installed;
  }
  auto closure = dependency_closure(index, req);
  if (!closure) return std::move(closure).error();
  out.decisions = std::move(chosen);
  out.decisions.insert(out.decisions.end(), closure->decisions.begin(), closure->decisions.end());
  for (const BinaryPackage* p : closure->packages) {
    // Say why a package is not at its newest version when pin priorities decided it.
    if (const auto versions = index.versions(p->name); index.candidate(p->name) == p && versions.front() != p &&
                                                       compare_debian_versions(versions.front()->version, p->version) > 0)
      out.decisions.push_back(std::string(p->name) + " " + p->version.str() + " (pin priority " +
                              std::to_string(index.priority(*p)) + ") instead of the newer " +
                              versions.front()->version.str() + " (pin priority " +
                              std::to_string(index.priority(*versions.front())) + ")");
    GPUENV_TRY(pin, pinned(index, p));
    out.packages.push_back(std::move(pin));
  }
  for (const std::string& request_text : request.alone) {
    GPUENV_TRY(found, find_alone(index, request_text));
    GPUENV_TRY(pin, pinned(index, found));
    out.alone.push_back(std::move(pin));
  }
  std::sort(out.packages.begin(), out.packages.end(), [](const PinnedPackage& a, const PinnedPackage& b) { return a.name < b.name; });
  return out;
}

}  // namespace gpuenv::packages
