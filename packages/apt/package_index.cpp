#include "packages/apt/package_index.hpp"

#include <algorithm>
#include <charconv>
#include <utility>

#include "packages/apt/deb822.hpp"

#include "base/text.hpp"

namespace gpuenv::packages {
namespace {

using text::iequals;
using text::is_space;
using text::lower;
using text::trim;

// Characters that end a package name or qualifier in a relation.
bool ends_name(char c) {
  return is_space(c) || c == '(' || c == ')' || c == '[' || c == ']' || c == '<' || c == '>' || c == '|' || c == ',' ||
         c == ':';
}

const char* const k_relation_hint =
    "relations are written 'name[:arch] [(op version)] [| alternative]', groups separated by commas, op one of "
    "<< <= = >= >>; the repository's Packages file or the control file is malformed";

Error relation_error(std::string_view origin, std::string_view field, std::string message) {
  constexpr std::size_t k_max_shown = 80;
  std::string shown(field.substr(0, k_max_shown));
  if (field.size() > k_max_shown) shown += "...";
  for (char& c : shown)
    if (c == '\n') c = ' ';
  return make_error(ErrorKind::environment, "apt.relation_syntax", std::move(message) + " in '" + shown + "'",
                    std::string(origin), k_relation_hint);
}

// One alternative as views into the field; what the public Relation is built from.
struct RawRelation {
  std::string_view name;
  std::string_view qualifier;
  std::string_view op;
  std::string_view version;
  bool keep = true;  // false when its restrictions are false for the context
};

// The relation scanner. With a null context restrictions are parsed and ignored.
class RelationScanner {
 public:
  RelationScanner(std::string_view field, std::string_view origin, const RelationContext* context)
      : m_field(field), m_origin(origin), m_context(context) {}

  // Calls on_group(std::vector<RawRelation>&) for every group that keeps at least one alternative.
  template <class OnGroup>
  Status run(OnGroup&& on_group) {
    std::vector<RawRelation> group;
    skip_space();
    if (m_pos == m_field.size()) return ok_status();
    while (true) {
      group.clear();
      while (true) {
        RawRelation r;
        if (auto st = alternative(r); !st) return st;
        if (r.keep) group.push_back(r);
        skip_space();
        if (m_pos < m_field.size() && m_field[m_pos] == '|') {
          ++m_pos;
          continue;
        }
        break;
      }
      if (!group.empty()) on_group(group);
      if (m_pos == m_field.size()) return ok_status();
      if (m_field[m_pos] != ',')
        return relation_error(m_origin, m_field,
                              "unexpected '" + std::string(1, m_field[m_pos]) + "' after an alternative");
      ++m_pos;
      skip_space();
      if (m_pos == m_field.size()) return ok_status();  // a trailing comma
    }
  }

 private:
  void skip_space() {
    while (m_pos < m_field.size() && is_space(m_field[m_pos])) ++m_pos;
  }

  std::string_view word() {
    const std::size_t start = m_pos;
    while (m_pos < m_field.size() && !ends_name(m_field[m_pos])) ++m_pos;
    return m_field.substr(start, m_pos - start);
  }

  Status alternative(RawRelation& r) {
    skip_space();
    r.name = word();
    if (r.name.empty()) {
      if (m_pos == m_field.size()) return relation_error(m_origin, m_field, "missing package name at the end");
      return relation_error(m_origin, m_field, "missing package name before '" + std::string(1, m_field[m_pos]) + "'");
    }
    if (m_pos < m_field.size() && m_field[m_pos] == ':') {
      ++m_pos;
      r.qualifier = word();
      if (r.qualifier.empty())
        return relation_error(m_origin, m_field, "missing architecture after '" + std::string(r.name) + ":'");
    }
    skip_space();
    if (m_pos < m_field.size() && m_field[m_pos] == '(') {
      if (auto st = version_constraint(r); !st) return st;
      skip_space();
    }
    if (m_pos < m_field.size() && m_field[m_pos] == '[') {
      if (auto st = arch_list(r); !st) return st;
      skip_space();
    }
    bool any_profile_list = false;
    bool profiles_true = false;
    while (m_pos < m_field.size() && m_field[m_pos] == '<') {
      bool list_true = true;
      if (auto st = profile_list(list_true); !st) return st;
      any_profile_list = true;
      profiles_true = profiles_true || list_true;
      skip_space();
    }
    if (m_context != nullptr && any_profile_list && !profiles_true) r.keep = false;
    return ok_status();
  }

  Status version_constraint(RawRelation& r) {
    ++m_pos;  // '('
    skip_space();
    const std::size_t op_start = m_pos;
    while (m_pos < m_field.size() && (m_field[m_pos] == '<' || m_field[m_pos] == '>' || m_field[m_pos] == '=')) ++m_pos;
    std::string_view op = m_field.substr(op_start, m_pos - op_start);
    if (op == "<") op = "<=";
    if (op == ">") op = ">=";
    if (op != "<<" && op != "<=" && op != "=" && op != ">=" && op != ">>")
      return relation_error(m_origin, m_field,
                            op.empty()
                                ? "missing operator in the version constraint of '" + std::string(r.name) + "'"
                                : "unknown operator '" + std::string(op) + "' for '" + std::string(r.name) + "'");
    const std::size_t close = m_field.find(')', m_pos);
    if (close == std::string_view::npos)
      return relation_error(m_origin, m_field, "unclosed '(' after '" + std::string(r.name) + "'");
    const std::string_view version = trim(m_field.substr(m_pos, close - m_pos));
    if (version.empty())
      return relation_error(m_origin, m_field,
                            "missing version after '" + std::string(op) + "' for '" + std::string(r.name) + "'");
    r.op = op;
    r.version = version;
    m_pos = close + 1;
    return ok_status();
  }

  Status arch_list(RawRelation& r) {
    ++m_pos;  // '['
    const std::size_t close = m_field.find(']', m_pos);
    if (close == std::string_view::npos)
      return relation_error(m_origin, m_field, "unclosed '[' after '" + std::string(r.name) + "'");
    const std::string_view list = m_field.substr(m_pos, close - m_pos);
    m_pos = close + 1;
    bool any_plain = false;
    bool any_negated = false;
    bool plain_match = false;
    bool negated_match = false;
    std::size_t i = 0;
    while (i < list.size()) {
      while (i < list.size() && is_space(list[i])) ++i;
      const std::size_t start = i;
      while (i < list.size() && !is_space(list[i])) ++i;
      std::string_view arch = list.substr(start, i - start);
      if (arch.empty()) break;
      const bool negated = arch.front() == '!';
      if (negated) arch.remove_prefix(1);
      if (arch.empty()) return relation_error(m_origin, m_field, "empty architecture after '!'");
      const bool match = m_context != nullptr && arch_matches(arch, m_context->host_arch);
      (negated ? any_negated : any_plain) = true;
      (negated ? negated_match : plain_match) = (negated ? negated_match : plain_match) || match;
    }
    if (!any_plain && !any_negated) return relation_error(m_origin, m_field, "empty architecture list");
    if (any_plain && any_negated)
      return relation_error(m_origin, m_field,
                            "architecture list of '" + std::string(r.name) + "' mixes negated and plain architectures");
    if (m_context != nullptr) r.keep = r.keep && (any_plain ? plain_match : !negated_match);
    return ok_status();
  }

  Status profile_list(bool& list_true) {
    ++m_pos;  // '<'
    const std::size_t close = m_field.find('>', m_pos);
    if (close == std::string_view::npos) return relation_error(m_origin, m_field, "unclosed '<' in build profiles");
    const std::string_view list = m_field.substr(m_pos, close - m_pos);
    m_pos = close + 1;
    bool any = false;
    std::size_t i = 0;
    while (i < list.size()) {
      while (i < list.size() && is_space(list[i])) ++i;
      const std::size_t start = i;
      while (i < list.size() && !is_space(list[i])) ++i;
      std::string_view term = list.substr(start, i - start);
      if (term.empty()) break;
      any = true;
      const bool negated = term.front() == '!';
      if (negated) term.remove_prefix(1);
      if (term.empty()) return relation_error(m_origin, m_field, "empty build profile after '!'");
      bool active = false;
      if (m_context != nullptr)
        for (const std::string& p : m_context->profiles) active = active || p == term;
      list_true = list_true && (negated ? !active : active);
    }
    if (!any) return relation_error(m_origin, m_field, "empty build profile list");
    return ok_status();
  }

  std::string_view m_field;
  std::string_view m_origin;
  const RelationContext* m_context;
  std::size_t m_pos = 0;
};

Result<std::vector<OrGroup>> parse_with(std::string_view field, std::string_view origin,
                                        const RelationContext* context) {
  std::vector<OrGroup> out;
  std::optional<Error> bad_version;
  RelationScanner scanner(field, origin, context);
  auto st = scanner.run([&](const std::vector<RawRelation>& raw) {
    OrGroup group;
    group.reserve(raw.size());
    for (const RawRelation& r : raw) {
      Relation rel{std::string(r.name), std::string(r.qualifier), std::string(r.op), std::nullopt};
      if (!r.version.empty()) {
        auto v = DebianVersion::parse(r.version);
        if (!v) {
          if (!bad_version)
            bad_version = relation_error(
                origin, field, "bad version in the relation on '" + std::string(r.name) + "': " + v.error().message);
        } else {
          rel.version = std::move(*v);
        }
      }
      group.push_back(std::move(rel));
    }
    out.push_back(std::move(group));
  });
  if (!st) return std::move(st).error();
  if (bad_version) return std::move(*bad_version);
  return out;
}

// Splits a Debian architecture into (os, cpu): "amd64" -> (linux, amd64), "kfreebsd-amd64" -> (kfreebsd, amd64).
std::pair<std::string_view, std::string_view> arch_tuple(std::string_view arch) {
  const std::size_t dash = arch.rfind('-');
  if (dash == std::string_view::npos) return {"linux", arch};
  return {arch.substr(0, dash), arch.substr(dash + 1)};
}

Error field_error(std::string id, std::string message, std::string where) {
  return make_error(ErrorKind::environment, std::move(id), std::move(message), std::move(where),
                    "the repository's Packages file is malformed or truncated; refresh it or report it to the "
                    "repository's maintainers");
}

Result<std::uint64_t> parse_number(std::string_view text, std::string_view field, const std::string& where) {
  std::uint64_t n = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc{} || ptr != text.data() + text.size())
    return field_error("apt.packages_bad_field",
                       std::string(field) + " '" + std::string(text) + "' is not a non-negative whole number", where);
  return n;
}

// The fields add() keeps; everything else is skipped.
enum class Key {
  other,
  package,
  version,
  architecture,
  multi_arch,
  priority,
  source,
  filename,
  sha256,
  essential,
  size,
  installed_size,
  depends,
  pre_depends,
  provides,
  conflicts,
  breaks,
  replaces
};

Key classify(std::string_view name) {
  struct Known {
    std::string_view name;
    Key key;
  };
  static constexpr Known k_known[] = {
      {"Package", Key::package},
      {"Version", Key::version},
      {"Architecture", Key::architecture},
      {"Multi-Arch", Key::multi_arch},
      {"Priority", Key::priority},
      {"Source", Key::source},
      {"Filename", Key::filename},
      {"SHA256", Key::sha256},
      {"Essential", Key::essential},
      {"Size", Key::size},
      {"Installed-Size", Key::installed_size},
      {"Depends", Key::depends},
      {"Pre-Depends", Key::pre_depends},
      {"Provides", Key::provides},
      {"Conflicts", Key::conflicts},
      {"Breaks", Key::breaks},
      {"Replaces", Key::replaces},
  };
  for (const Known& k : k_known)
    if (iequals(k.name, name)) return k.key;
  return Key::other;
}

// Newest first, then repository order, then file order.
bool newer_first(const BinaryPackage* a, const BinaryPackage* b) {
  const int rc = compare_debian_versions(a->version, b->version);
  if (rc != 0) return rc > 0;
  if (a->repository != b->repository) return a->repository < b->repository;
  return a->line < b->line;
}

// apt keeps one version for identical stanzas of a package in several repositories (same version, and the
// fields of its version hash: Installed-Size, Depends, Pre-Depends, Conflicts, Breaks, Replaces).
bool same_version(const BinaryPackage& a, const BinaryPackage& b) {
  return a.version.str() == b.version.str() && a.architecture == b.architecture &&
         a.installed_size == b.installed_size && a.depends == b.depends && a.pre_depends == b.pre_depends &&
         a.conflicts == b.conflicts && a.breaks == b.breaks && a.replaces == b.replaces;
}

ReleaseInfo release_info(const RepositoryRef& r) {
  ReleaseInfo info;
  info.archive = r.archive;
  info.codename = r.codename;
  info.version = r.version;
  info.origin = r.origin;
  info.label = r.label;
  info.component = r.component;
  info.architecture = r.architecture;
  info.site = uri_site(r.uri);
  info.not_automatic = r.not_automatic;
  info.but_automatic_upgrades = r.but_automatic_upgrades;
  return info;
}


/// A Provides entry of a package being added, before the package has its place in the index.
struct Provided {
  std::size_t package;  // index into the packages being added
  std::string_view name;
  std::optional<DebianVersion> version;
};

/// The fields of a stanza that are checked or converted before they go into a BinaryPackage.
struct RawFields {
  std::string_view version;
  bool has_version = false;
  bool has_arch = false;
  std::string_view size;
  std::string_view installed_size;
};

/// Stores the field `key` with `value` in `p`, or in `raw` when it still needs checking.
void read_field(Key key, std::string_view value, BinaryPackage& p, RawFields& raw) {
  switch (key) {
    case Key::package:
      p.name = value;
      break;
    case Key::version:
      raw.version = value;
      raw.has_version = true;
      break;
    case Key::architecture:
      p.architecture = value;
      raw.has_arch = true;
      break;
    case Key::multi_arch:
      p.multi_arch = value;
      break;
    case Key::priority:
      p.priority = value;
      break;
    case Key::source:
      p.source = value;
      break;
    case Key::filename:
      p.filename = value;
      break;
    case Key::sha256:
      p.sha256 = value;
      break;
    case Key::essential:
      p.essential = iequals(value, "yes");
      break;
    case Key::size:
      raw.size = value;
      break;
    case Key::installed_size:
      raw.installed_size = value;
      break;
    case Key::depends:
      p.depends = value;
      break;
    case Key::pre_depends:
      p.pre_depends = value;
      break;
    case Key::provides:
      p.provides = value;
      break;
    case Key::conflicts:
      p.conflicts = value;
      break;
    case Key::breaks:
      p.breaks = value;
      break;
    case Key::replaces:
      p.replaces = value;
      break;
    case Key::other:
      break;
  }
}

/// Parses the Provides of `p`, the package numbered `package` among those being added, into `provided`; fails
/// on alternatives, on an operator other than '=' and on a bad provided version.
Status parse_provides(const BinaryPackage& p, std::size_t package, const std::string& origin, std::vector<Provided>& provided) {
  std::optional<Error> bad;
  RelationScanner scanner(p.provides, origin, nullptr);
  auto st = scanner.run([&](const std::vector<RawRelation>& group) {
    if (bad) return;
    if (group.size() != 1) {
      bad = relation_error(origin, p.provides, "alternatives ('|') are not allowed in Provides");
      return;
    }
    const RawRelation& r = group.front();
    Provided pr{package, r.name, std::nullopt};
    if (!r.op.empty()) {
      if (r.op != "=") {
        bad = relation_error(
            origin, p.provides,
            "Provides of '" + std::string(r.name) + "' uses '" + std::string(r.op) + "'; only '=' is allowed");
        return;
      }
      auto pv = DebianVersion::parse(r.version);
      if (!pv) {
        bad = relation_error(origin, p.provides,
                             "bad provided version of '" + std::string(r.name) + "': " + pv.error().message);
        return;
      }
      pr.version = std::move(*pv);
    }
    provided.push_back(std::move(pr));
  });
  if (!st) return std::move(st).error();
  if (bad) return std::move(*bad);
  return ok_status();
}

/// The package of `stanza` (of the repository numbered `repo_index`, read from `where`), or nullopt when its
/// architecture is not one of `architectures`. Fails on a missing Package, Version or Architecture field and
/// on a bad Version, Size, Installed-Size or Provides. Its Provides go into `provided` as package `package`.
Result<std::optional<BinaryPackage>> parse_package(const Stanza& stanza, std::size_t repo_index, const std::string& where,
                                                   const std::vector<std::string>& architectures, std::size_t package,
                                                   std::vector<Provided>& provided) {
  BinaryPackage p;
  p.repository = repo_index;
  p.line = stanza.line();
  auto at = [&] { return where + ":" + std::to_string(p.line); };  // built only when needed
  RawFields raw;
  for (const Field& f : stanza.fields()) read_field(classify(f.name), f.value, p, raw);
  if (p.name.empty() || !raw.has_version || !raw.has_arch) {
    const char* missing = p.name.empty() ? "Package" : !raw.has_version ? "Version" : "Architecture";
    return field_error("apt.packages_missing_field",
                       std::string("stanza") + (p.name.empty() ? "" : " of '" + std::string(p.name) + "'") +
                           " has no " + missing + " field",
                       at());
  }
  if (std::find(architectures.begin(), architectures.end(), p.architecture) == architectures.end()) {
    return std::optional<BinaryPackage>();
  }
  auto v = DebianVersion::parse(raw.version);
  if (!v)
    return field_error("apt.packages_bad_field",
                       "package '" + std::string(p.name) + "' has a bad Version: " + v.error().message, at());
  p.version = std::move(*v);
  if (!raw.size.empty()) {
    auto n = parse_number(raw.size, "Size", at());
    if (!n) return std::move(n).error();
    p.size = *n;
  }
  if (!raw.installed_size.empty()) {
    auto n = parse_number(raw.installed_size, "Installed-Size", at());
    if (!n) return std::move(n).error();
    p.installed_size = *n;
  }
  if (!p.provides.empty()) {
    if (auto st = parse_provides(p, package, at(), provided); !st) return std::move(st).error();
  }
  return std::optional<BinaryPackage>(std::move(p));
}

/// Sorts `names` and drops the repeated ones.
void sort_unique(std::vector<std::string_view>& names) {
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
}

/// Sorts the provisions of one virtual name by providing package name, then newest first.
void sort_provisions(std::vector<Provision>& provisions) {
  std::stable_sort(provisions.begin(), provisions.end(), [](const Provision& a, const Provision& b) {
    if (a.package->name != b.package->name) return a.package->name < b.package->name;
    return newer_first(a.package, b.package);
  });
}

}  // namespace

Result<std::vector<OrGroup>> parse_relations(std::string_view field, std::string_view origin) {
  return parse_with(field, origin, nullptr);
}

Result<std::vector<OrGroup>> parse_relations(std::string_view field, std::string_view origin,
                                             const RelationContext& context) {
  return parse_with(field, origin, &context);
}

bool arch_matches(std::string_view pattern, std::string_view arch) {
  if (pattern == arch || pattern == "any") return true;
  const auto [os, cpu] = arch_tuple(arch);
  const std::size_t dash = pattern.rfind('-');
  if (dash == std::string_view::npos) return false;
  const std::string_view p_os = pattern.substr(0, dash);
  const std::string_view p_cpu = pattern.substr(dash + 1);
  return (p_os == "any" || p_os == os) && (p_cpu == "any" || p_cpu == cpu);
}

std::string to_string(const Relation& relation) {
  std::string s = relation.name;
  if (!relation.arch_qualifier.empty()) s += ":" + relation.arch_qualifier;
  if (relation.version) s += " (" + relation.op + " " + relation.version->str() + ")";
  return s;
}

std::string to_string(const OrGroup& group) {
  std::string s;
  for (const Relation& r : group) {
    if (!s.empty()) s += " | ";
    s += to_string(r);
  }
  return s;
}

Status PackageIndex::add(std::string packages_text, RepositoryRef repo, const std::vector<std::string>& architectures) {
  auto text = std::make_unique<const std::string>(std::move(packages_text));
  auto stanzas = parse_deb822(*text, repo.where);
  if (!stanzas) return std::move(stanzas).error();
  const std::size_t repo_index = m_repositories.size();
  std::vector<BinaryPackage> added;
  added.reserve(stanzas->size());
  std::vector<Provided> provided;
  for (const Stanza& stanza : *stanzas) {
    auto p = parse_package(stanza, repo_index, repo.where, architectures, added.size(), provided);
    if (!p) return std::move(p).error();
    if (*p) added.push_back(std::move(**p));
  }

  // Everything parsed: commit.
  m_texts.push_back(std::move(text));
  m_repositories.push_back(std::move(repo));
  update_repository(repo_index);
  const std::size_t first = m_packages.size();
  for (BinaryPackage& p : added) m_packages.push_back(std::move(p));
  m_names.reserve(m_names.size() + added.size() + provided.size() / 2);
  std::vector<std::string_view> touched_versions;
  std::vector<std::string_view> touched_providers;
  std::vector<NameEntry*> touched_entries;  // references into an unordered_map survive rehashing
  const std::uint64_t generation = ++m_generation;
  for (std::size_t i = first; i < m_packages.size(); ++i) {
    NameEntry& e = m_names[m_packages[i].name];
    if (!e.versions.empty()) touched_versions.push_back(m_packages[i].name);
    e.versions.push_back(&m_packages[i]);
    if (e.generation != generation) {
      e.generation = generation;
      touched_entries.push_back(&e);
    }
  }
  for (Provided& pr : provided) {
    NameEntry& e = m_names[pr.name];
    e.provisions.push_back(Provision{&m_packages[first + pr.package], std::move(pr.version)});
    touched_providers.push_back(pr.name);
  }
  sort_unique(touched_versions);
  sort_unique(touched_providers);
  for (std::string_view name : touched_versions) {
    auto& versions = m_names[name].versions;
    std::stable_sort(versions.begin(), versions.end(), newer_first);
  }
  for (std::string_view name : touched_providers) {
    NameEntry& e = m_names[name];
    sort_provisions(e.provisions);
    e.providers.clear();
    for (const Provision& pv : e.provisions) e.providers.push_back(pv.package);
  }
  for (NameEntry* e : touched_entries) update_candidate(*e);
  return ok_status();
}

std::span<const BinaryPackage* const> PackageIndex::versions(std::string_view name) const {
  const auto it = m_names.find(name);
  if (it == m_names.end()) return {};
  return it->second.versions;
}

std::span<const BinaryPackage* const> PackageIndex::providers(std::string_view virtual_name) const {
  const auto it = m_names.find(virtual_name);
  if (it == m_names.end()) return {};
  return it->second.providers;
}

std::span<const Provision> PackageIndex::provisions(std::string_view virtual_name) const {
  const auto it = m_names.find(virtual_name);
  if (it == m_names.end()) return {};
  return it->second.provisions;
}

const BinaryPackage* PackageIndex::candidate(std::string_view name) const {
  const auto it = m_names.find(name);
  return it == m_names.end() ? nullptr : it->second.candidate;
}

int PackageIndex::priority(const BinaryPackage& package) const {
  const auto v = versions(package.name);
  const auto it = std::find(v.begin(), v.end(), &package);
  if (it == v.end()) return 0;
  return version_priority(v, static_cast<std::size_t>(it - v.begin()), nullptr);
}

void PackageIndex::set_preferences(AptPreferences preferences, std::string native_arch) {
  m_preferences = std::move(preferences);
  m_native_arch = std::move(native_arch);
  for (std::size_t r = 0; r < m_repositories.size(); ++r) update_repository(r);
  for (auto& [name, entry] : m_names)
    if (!entry.versions.empty()) update_candidate(entry);
}

void PackageIndex::update_repository(std::size_t repo) {
  m_releases.resize(m_repositories.size());
  m_file_priorities.resize(m_repositories.size());
  m_releases[repo] = release_info(m_repositories[repo]);
  m_file_priorities[repo] = m_preferences.file_priority(m_releases[repo]);
}

int PackageIndex::version_priority(std::span<const BinaryPackage* const> versions, std::size_t i,
                                   const BinaryPackage** instance) const {
  const BinaryPackage& p = *versions[i];
  // Identical instances sit among the versions that compare equal to p (sorted together).
  std::size_t lo = i;
  while (lo > 0 && compare_debian_versions(versions[lo - 1]->version, p.version) == 0) --lo;
  std::size_t hi = i + 1;
  while (hi < versions.size() && compare_debian_versions(versions[hi]->version, p.version) == 0) ++hi;

  int best_file = 0;
  const BinaryPackage* best = nullptr;
  if (hi - lo == 1 && !m_preferences.has_specific()) {
    best = &p;
    best_file = m_file_priorities[p.repository];
    if (instance != nullptr) *instance = best;
    return best_file;
  }
  std::vector<const ReleaseInfo*> releases;
  std::vector<int> files;
  for (std::size_t k = lo; k < hi; ++k) {
    const BinaryPackage& q = *versions[k];
    if (k != i && !same_version(q, p)) continue;
    releases.push_back(&m_releases[q.repository]);
    files.push_back(m_file_priorities[q.repository]);
    if (best == nullptr || files.back() > best_file) {
      best = &q;
      best_file = files.back();
    }
  }
  if (instance != nullptr) *instance = best;
  if (!m_preferences.has_specific()) return best_file;
  const PinVersion v{p.name, p.version.str(), p.architecture, p.source, releases};
  return m_preferences.priority(v, files, m_native_arch);
}

void PackageIndex::update_candidate(NameEntry& entry) const {
  // apt's GetCandidateVer: newest first, a version replaces the candidate only with a strictly higher priority,
  // and nothing at or below 0 is ever the candidate.
  entry.candidate = nullptr;
  int best = 0;
  for (std::size_t i = 0; i < entry.versions.size(); ++i) {
    const BinaryPackage* instance = nullptr;
    const int priority = version_priority(entry.versions, i, &instance);
    if (priority > best) {
      best = priority;
      entry.candidate = instance;
    }
  }
}

std::vector<std::string_view> PackageIndex::names() const {
  std::vector<std::string_view> out;
  for (const auto& [name, entry] : m_names)
    if (!entry.versions.empty()) out.push_back(name);
  std::sort(out.begin(), out.end());
  return out;
}

std::string PackageIndex::where(const BinaryPackage& package) const {
  std::string out = package.repository < m_repositories.size() ? m_repositories[package.repository].where : "";
  return out + ":" + std::to_string(package.line);
}

}  // namespace gpuenv::packages
