#include "packages/apt/closure.hpp"

#include <algorithm>
#include <optional>
#include <span>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace gpuenv::packages {
namespace {

// Relation fields of one package, parsed once.
struct ParsedRelations {
  std::vector<OrGroup> critical;  // Pre-Depends, then Depends
  std::vector<Relation> conflicts;
  std::vector<Relation> breaks;
};

// Why a package could not be installed; `conflict` picks the error id.
struct Failure {
  bool conflict = false;
  std::string message;
};

// apt's pkgCache::State::VerPriority: smaller is more important; a missing field stays 0, an unknown word is extra.
int priority_rank(std::string_view priority) {
  if (priority.empty()) return 0;
  std::string p(priority);
  for (char& c : p)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  if (p == "required") return 1;
  if (p == "important") return 2;
  if (p == "standard") return 3;
  if (p == "optional") return 4;
  return 5;
}

std::string describe(const BinaryPackage& p) { return std::string(p.name) + " " + p.version.str(); }

// "2.0, 1.0": the versions of a name, newest first.
std::string version_list(std::span<const BinaryPackage* const> versions) {
  std::string s;
  for (const BinaryPackage* p : versions) s += (s.empty() ? "" : ", ") + p->version.str();
  return s;
}

std::string chain_text(const std::vector<const BinaryPackage*>& chain) {
  std::string s;
  for (const BinaryPackage* p : chain) {
    if (!s.empty()) s += " -> ";
    s += std::string(p->name);
  }
  return s;
}

// A possible solution of a dependency group and how it was found.
struct Solution {
  const BinaryPackage* package = nullptr;
  std::size_t alternative = 0;  // index in the group
  bool provider = false;        // found through Provides
};

class Closure {
 public:
  Closure(const PackageIndex& index, const ClosureRequest& request)
      : m_index(index), m_request(request), m_context{request.native_arch, {}} {}

  Result<ClosureResult> run() {
    std::vector<const BinaryPackage*> tops;
    for (const std::string& spec : m_request.packages) {
      if (const BinaryPackage* i = installed(spec.substr(0, spec.find('=')))) {
        m_decisions.push_back(spec + ": already installed in the base (" + describe(*i) + ")");
        continue;
      }
      auto p = resolve_request(spec);
      if (!p) return std::move(p).error();
      if (std::find(tops.begin(), tops.end(), *p) == tops.end()) tops.push_back(*p);
    }
    if (m_request.required_set) {
      for (std::string_view name : m_index.names()) {
        const BinaryPackage* c = candidate(name);
        if (c == nullptr || !arch_ok_plain(*c)) continue;
        if (!c->essential && priority_rank(c->priority) != 1) continue;
        if (installed(name) != nullptr) continue;
        if (std::find_if(tops.begin(), tops.end(), [&](const BinaryPackage* t) { return t->name == name; }) ==
            tops.end())
          tops.push_back(c);
      }
    }
    // Like apt-get install: every requested package is marked first, then each one's dependencies are resolved.
    for (const BinaryPackage* p : tops) {
      if (selected(p->name) != nullptr) continue;
      if (parsed(p) == nullptr) return std::move(*m_fatal);
      if (auto f = conflict_with_selected(*p, {})) {
        if (m_fatal) return std::move(*m_fatal);
        return to_error(*f);
      }
      select(p);
    }
    for (const BinaryPackage* p : tops) {
      std::vector<const BinaryPackage*> chain{p};
      auto f = resolve_dependencies(p, chain);
      if (m_fatal) return std::move(*m_fatal);
      if (f) return to_error(*f);
    }
    if (auto st = final_check(); !st) return std::move(st).error();

    ClosureResult out;
    for (const BinaryPackage* p : m_order) out.packages.push_back(p);
    std::sort(out.packages.begin(), out.packages.end(),
              [](const BinaryPackage* a, const BinaryPackage* b) { return a->name < b->name; });
    out.decisions = std::move(m_decisions);
    return out;
  }

 private:
  Error to_error(const Failure& f) const {
    if (f.conflict)
      return make_error(ErrorKind::unsatisfiable, "apt.conflict", f.message, {},
                        "these packages cannot be installed together; drop one of the requested packages or pin "
                        "versions (name=version) that agree");
    return make_error(ErrorKind::unsatisfiable, "apt.unsatisfiable", f.message, {},
                      "add the repository (suite or component) that provides it, or pin a version of the "
                      "requesting package (name=version) whose dependencies the repositories satisfy");
  }

  Result<const BinaryPackage*> resolve_request(const std::string& spec) {
    const std::size_t eq = spec.find('=');
    const std::string name = spec.substr(0, eq);
    const auto versions = m_index.versions(name);
    if (eq != std::string::npos) {
      auto wanted = DebianVersion::parse(std::string_view(spec).substr(eq + 1));
      if (!wanted)
        return make_error(ErrorKind::unsatisfiable, "apt.unknown_package",
                          "request '" + spec + "' names a bad version: " + wanted.error().message, {},
                          "write requests as name or name=version");
      for (const BinaryPackage* p : versions) {
        if (p->version == *wanted) {
          m_override[p->name] = p;
          return p;
        }
      }
      std::string known;
      for (const BinaryPackage* p : versions) known += (known.empty() ? "" : ", ") + p->version.str();
      return make_error(ErrorKind::unsatisfiable, "apt.unknown_package",
                        "no repository has version " + wanted->str() + " of '" + name + "'" +
                            (known.empty() ? std::string() : " (it has " + known + ")"),
                        {}, "request a version the repositories have, or add the repository that has this one");
    }
    if (!versions.empty()) {
      if (const BinaryPackage* c = candidate(name)) return c;
      return make_error(ErrorKind::unsatisfiable, "apt.no_candidate",
                        "'" + name + "' has no installation candidate: every version (" + version_list(versions) +
                            ") has a pin priority of 0 or below",
                        {}, "change the apt preferences that pin it, or request a version explicitly (name=version)");
    }
    std::vector<const BinaryPackage*> providers;
    for (const Provision& pv : m_index.provisions(name)) {
      if (candidate(pv.package->name) != pv.package) continue;
      if (std::find(providers.begin(), providers.end(), pv.package) == providers.end()) providers.push_back(pv.package);
    }
    if (providers.size() == 1) {
      m_decisions.push_back("request '" + name + "' names a virtual package; using its only provider " +
                            describe(*providers.front()));
      return providers.front();
    }
    if (providers.empty())
      return make_error(ErrorKind::unsatisfiable, "apt.unknown_package",
                        "no repository has a package called '" + name + "'", {},
                        "check the spelling, or add the repository (suite or component) that has it");
    std::string list;
    for (const BinaryPackage* p : providers) list += (list.empty() ? "" : ", ") + std::string(p->name);
    return make_error(ErrorKind::unsatisfiable, "apt.virtual_package",
                      "'" + name + "' is a virtual package provided by " + list, {},
                      "request one of the providers explicitly, as apt-get requires");
  }

  const BinaryPackage* candidate(std::string_view name) const {
    if (const auto it = m_override.find(name); it != m_override.end()) return it->second;
    return m_index.candidate(name);
  }

  const BinaryPackage* selected(std::string_view name) const {
    const auto it = m_selected.find(name);
    return it == m_selected.end() ? nullptr : it->second;
  }

  void select(const BinaryPackage* p) {
    m_selected[p->name] = p;
    m_order.push_back(p);
  }

  void unselect(const BinaryPackage* p) {
    m_selected.erase(p->name);
    m_order.erase(std::remove(m_order.begin(), m_order.end(), p), m_order.end());
  }

  const ParsedRelations* parsed(const BinaryPackage* p) {
    if (const auto it = m_parsed.find(p); it != m_parsed.end()) return &it->second;
    const std::string where = m_index.where(*p);
    ParsedRelations r;
    for (std::string_view field : {p->pre_depends, p->depends}) {
      if (field.empty()) continue;
      auto groups = parse_relations(field, where, m_context);
      if (!groups) {
        m_fatal = std::move(groups).error();
        return nullptr;
      }
      for (OrGroup& g : *groups) r.critical.push_back(std::move(g));
    }
    for (auto [field, out] : {std::pair{p->conflicts, &r.conflicts}, std::pair{p->breaks, &r.breaks}}) {
      if (field.empty()) continue;
      auto groups = parse_relations(field, where, m_context);
      if (!groups) {
        m_fatal = std::move(groups).error();
        return nullptr;
      }
      for (OrGroup& g : *groups)
        for (Relation& rel : g) out->push_back(std::move(rel));
    }
    return &m_parsed.emplace(p, std::move(r)).first->second;
  }

  bool is_native(const BinaryPackage& p) const {
    return p.architecture == m_request.native_arch || p.architecture == "all";
  }
  bool arch_ok_plain(const BinaryPackage& p) const { return is_native(p) || p.multi_arch == "foreign"; }

  bool arch_ok(const Relation& r, const BinaryPackage& p, bool provided) const {
    const std::string& q = r.arch_qualifier;
    if (q.empty()) return arch_ok_plain(p);
    if (q == "any") return provided || p.multi_arch == "allowed";
    if (q == "native") return is_native(p);
    return p.architecture == q || (q == m_request.native_arch && p.architecture == "all");
  }

  bool matches(const Relation& r, const BinaryPackage& p) const {
    return p.name == r.name && arch_ok(r, p, false) && (!r.version || satisfies(p.version, r.op, *r.version));
  }

  bool matches(const Relation& r, const Provision& pv) const {
    if (!arch_ok(r, *pv.package, true)) return false;
    if (!r.version) return true;
    return pv.version && satisfies(*pv.version, r.op, *r.version);
  }

  // The selected package that satisfies some alternative of `g`, or nullptr.
  // An installed package satisfies it too (a base image's).
  const BinaryPackage* satisfier_selected(const OrGroup& g) const {
    for (const Relation& r : g) {
      if (const BinaryPackage* s = selected(r.name); s != nullptr && matches(r, *s)) return s;
      for (const Provision& pv : m_index.provisions(r.name))
        if (selected(pv.package->name) == pv.package && matches(r, pv)) return pv.package;
    }
    if (m_request.installed != nullptr) {
      for (const Relation& r : g) {
        for (const BinaryPackage* s : m_request.installed->versions(r.name))
          if (matches(r, *s)) return s;
        for (const Provision& pv : m_request.installed->provisions(r.name))
          if (matches(r, pv)) return pv.package;
      }
    }
    return nullptr;
  }

  // The left-out package (its candidate) that meets some alternative of `g`, or nullptr; only when nothing
  // selected or installed meets it.
  const BinaryPackage* left_out_satisfier(const OrGroup& g) const {
    for (const Relation& r : g) {
      for (const std::string& name : m_request.left_out) {
        const BinaryPackage* c = candidate(name);
        if (c == nullptr || selected(name) != nullptr) continue;  // requested: installed, so it must meet it itself
        if (matches(r, *c)) return c;
        for (const Provision& pv : m_index.provisions(r.name))
          if (pv.package == c && matches(r, pv)) return c;
      }
    }
    return nullptr;
  }

  // The installed package of that name, or nullptr.
  const BinaryPackage* installed(std::string_view name) const {
    if (m_request.installed == nullptr) return nullptr;
    auto v = m_request.installed->versions(name);
    return v.empty() ? nullptr : v.front();
  }

  // apt's DepCVer: some alternative is met by a candidate version (directly or through its Provides).
  bool satisfiable_by_candidates(const OrGroup& g) const {
    for (const Relation& r : g) {
      if (const BinaryPackage* c = candidate(r.name); c != nullptr && matches(r, *c)) return true;
      for (const Provision& pv : m_index.provisions(r.name))
        if (candidate(pv.package->name) == pv.package && matches(r, pv)) return true;
    }
    return false;
  }

  // apt's getAllPossibleSolutions for a positive dependency, with CompareProviders inside each alternative.
  std::vector<Solution> solutions(const OrGroup& g) const {
    std::vector<Solution> out;
    auto listed = [&](const BinaryPackage* p) {
      return std::any_of(out.begin(), out.end(), [&](const Solution& s) { return s.package == p; });
    };
    for (std::size_t i = 0; i < g.size(); ++i) {
      const Relation& r = g[i];
      if (const BinaryPackage* c = candidate(r.name); c != nullptr && matches(r, *c) && !listed(c))
        out.push_back(Solution{c, i, false});
      std::vector<const BinaryPackage*> providers;
      for (const Provision& pv : m_index.provisions(r.name)) {
        const BinaryPackage* p = pv.package;
        if (p->name == r.name || candidate(p->name) != p || !matches(r, pv) || listed(p)) continue;
        if (std::find(providers.begin(), providers.end(), p) == providers.end()) providers.push_back(p);
      }
      std::sort(providers.begin(), providers.end(), [](const BinaryPackage* a, const BinaryPackage* b) {
        if (a->essential != b->essential) return a->essential;
        const int pa = priority_rank(a->priority);
        const int pb = priority_rank(b->priority);
        if (pa != pb) return pa < pb;
        return a->name < b->name;
      });
      for (const BinaryPackage* p : providers) out.push_back(Solution{p, i, true});
    }
    return out;
  }

  // Why no alternative of `g` (a dependency of `p`) has any possible solution.
  std::string describe_unsatisfiable(const BinaryPackage& p, const OrGroup& g,
                                     const std::vector<const BinaryPackage*>& chain) const {
    std::vector<std::string> reasons;
    bool nothing_at_all = true;
    for (const Relation& r : g) {
      const BinaryPackage* c = candidate(r.name);
      const auto provisions = m_index.provisions(r.name);
      if (c == nullptr && provisions.empty()) {
        const auto versions = m_index.versions(r.name);
        reasons.push_back(versions.empty() ? "no repository has '" + r.name + "'"
                                           : "'" + r.name + "' has no installation candidate (its versions " +
                                                 version_list(versions) + " have pin priorities of 0 or below)");
        continue;
      }
      nothing_at_all = false;
      if (c != nullptr && !matches(r, *c)) {
        if (!arch_ok(r, *c, false))
          reasons.push_back("the candidate " + describe(*c) + " (Architecture: " + std::string(c->architecture) +
                            ", Multi-Arch: " + (c->multi_arch.empty() ? "no" : std::string(c->multi_arch)) +
                            ") does not match '" + to_string(r) + "'");
        else
          reasons.push_back("the candidate " + describe(*c) + " does not satisfy '" + to_string(r) + "'");
      }
      if (!provisions.empty()) {
        std::string names;
        for (const Provision& pv : provisions) {
          names += (names.empty() ? "" : ", ") + std::string(pv.package->name);
          if (pv.version) names += " (= " + pv.version->str() + ")";
        }
        reasons.push_back("'" + r.name + "' is provided only by " + names + ", which do not satisfy '" + to_string(r) +
                          "' at their candidate versions");
      }
    }
    std::string msg = std::string(p.name) + " depends on " + to_string(g);
    if (nothing_at_all) {
      msg += ", which no repository provides";
    } else {
      msg += ", which cannot be satisfied: ";
      for (std::size_t i = 0; i < reasons.size(); ++i) msg += (i ? "; " : "") + reasons[i];
    }
    if (!chain.empty()) msg += " (needed by " + chain_text(chain) + ")";
    return msg;
  }

  // Conflicts and Breaks between `p` and the selected packages, in either direction.
  std::optional<Failure> conflict_with_selected(const BinaryPackage& p,
                                                const std::vector<const BinaryPackage*>& chain) {
    const ParsedRelations* mine = parsed(&p);
    if (mine == nullptr) return Failure{false, m_fatal->message};
    auto hits = [&](const Relation& r, const BinaryPackage& owner, const BinaryPackage& other) {
      if (other.name == owner.name) return false;
      if (other.name == r.name && (!r.version || satisfies(other.version, r.op, *r.version))) return true;
      for (const Provision& pv : m_index.provisions(r.name)) {
        if (pv.package != &other) continue;
        if (!r.version || (pv.version && satisfies(*pv.version, r.op, *r.version))) return true;
      }
      return false;
    };
    auto report = [&](const BinaryPackage& owner, const char* field, const Relation& r, const BinaryPackage& other,
                      bool other_is_new) {
      std::string msg =
          describe(owner) + " " + field + ": " + to_string(r) + ", so it cannot be installed with " + describe(other);
      msg += other_is_new ? " (" + describe(other) + " is wanted" : " (" + describe(owner) + " is wanted";
      msg += chain.empty() ? std::string(")") : " by " + chain_text(chain) + ")";
      return Failure{true, std::move(msg)};
    };
    for (const BinaryPackage* s : m_order) {
      for (const Relation& r : mine->conflicts)
        if (hits(r, p, *s)) return report(p, "Conflicts", r, *s, false);
      for (const Relation& r : mine->breaks)
        if (hits(r, p, *s)) return report(p, "Breaks", r, *s, false);
      const ParsedRelations* theirs = parsed(s);
      if (theirs == nullptr) return Failure{false, m_fatal->message};
      for (const Relation& r : theirs->conflicts)
        if (hits(r, *s, p)) return report(*s, "Conflicts", r, p, true);
      for (const Relation& r : theirs->breaks)
        if (hits(r, *s, p)) return report(*s, "Breaks", r, p, true);
    }
    return std::nullopt;
  }

  // apt's MarkInstall for an automatically installed package.
  std::optional<Failure> install(const BinaryPackage* p, std::vector<const BinaryPackage*>& chain) {
    if (selected(p->name) != nullptr) return std::nullopt;  // already marked: apt returns true
    const ParsedRelations* rel = parsed(p);
    if (rel == nullptr) return Failure{false, m_fatal->message};
    for (const OrGroup& g : rel->critical)
      if (satisfier_selected(g) == nullptr && left_out_satisfier(g) == nullptr && !satisfiable_by_candidates(g))
        return Failure{false, describe_unsatisfiable(*p, g, chain)};
    if (auto f = conflict_with_selected(*p, chain)) return f;
    select(p);
    chain.push_back(p);
    auto f = resolve_dependencies(p, chain);
    chain.pop_back();
    if (f) unselect(p);  // as apt's MarkInstall_DiscardInstall: what it pulled in stays selected
    return f;
  }

  std::optional<Failure> resolve_dependencies(const BinaryPackage* p, std::vector<const BinaryPackage*>& chain) {
    const ParsedRelations* rel = parsed(p);
    if (rel == nullptr) return Failure{false, m_fatal->message};
    std::vector<const OrGroup*> to_install;
    for (const OrGroup& g : rel->critical) {
      if (const BinaryPackage* s = satisfier_selected(g)) {
        note_satisfied(*p, g, *s);
        continue;
      }
      if (const BinaryPackage* s = left_out_satisfier(g)) {
        m_decisions.push_back(describe(*p) + ": '" + to_string(g) + "' is left out (" + describe(*s) +
                              " serves maintainer scripts, which gpuenv does not run)");
        continue;
      }
      to_install.push_back(&g);
    }
    for (const OrGroup* g : to_install) {
      if (const BinaryPackage* s = satisfier_selected(*g)) {
        note_satisfied(*p, *g, *s);
        continue;
      }
      const std::vector<Solution> sols = solutions(*g);
      if (sols.empty()) {
        std::vector<const BinaryPackage*> before(chain.begin(), chain.end() - 1);
        return Failure{false, describe_unsatisfiable(*p, *g, before)};
      }
      std::vector<std::pair<const Solution*, Failure>> failed;
      const Solution* chosen = nullptr;
      for (const Solution& s : sols) {
        auto f = install(s.package, chain);
        if (m_fatal) return f;
        if (!f) {
          chosen = &s;
          break;
        }
        failed.emplace_back(&s, std::move(*f));
      }
      if (chosen == nullptr) {
        if (failed.size() == 1) return std::move(failed.front().second);
        std::string msg =
            std::string(p->name) + " depends on " + to_string(*g) + ", and no possible solution can be installed: ";
        for (std::size_t i = 0; i < failed.size(); ++i)
          msg += (i ? "; " : "") + std::string(failed[i].first->package->name) + ": " + failed[i].second.message;
        return Failure{failed.front().second.conflict, std::move(msg)};
      }
      note_choice(*p, *g, sols, *chosen, failed);
    }
    return std::nullopt;
  }

  void note_satisfied(const BinaryPackage& p, const OrGroup& g, const BinaryPackage& s) {
    const bool real_first = g.front().name == s.name;
    if (g.size() == 1 && real_first) return;
    const bool real = std::any_of(g.begin(), g.end(), [&](const Relation& r) { return r.name == s.name; });
    m_decisions.push_back(describe(p) + ": '" + to_string(g) + "' is satisfied by " + describe(s) +
                          (real ? "" : " (a provider)") + ", already selected" +
                          (real_first ? ""
                                      : "; apt installs nothing more for a group one of whose alternatives "
                                        "is already satisfied"));
  }

  void note_choice(const BinaryPackage& p, const OrGroup& g, const std::vector<Solution>& sols, const Solution& chosen,
                   const std::vector<std::pair<const Solution*, Failure>>& failed) {
    if (g.size() == 1 && !chosen.provider && sols.size() == 1) return;
    std::string why;
    if (chosen.provider) {
      why = "provides virtual package '" + g[chosen.alternative].name + "'";
      std::string order;
      for (const Solution& s : sols) {
        if (s.alternative != chosen.alternative || !s.provider) continue;
        order += (order.empty() ? "" : ", ") + std::string(s.package->name) + " (" +
                 (s.package->essential ? "Essential, " : "") +
                 "Priority: " + (s.package->priority.empty() ? "none" : std::string(s.package->priority)) + ")";
      }
      why += "; providers in apt's order (Essential, then Priority, then name): " + order;
    } else {
      why = chosen.alternative == 0
                ? "first alternative"
                : "alternative " + std::to_string(chosen.alternative + 1) + " of " + std::to_string(g.size());
      std::string others;
      for (const Solution& s : sols)
        if (s.alternative == chosen.alternative && s.provider)
          others += (others.empty() ? "" : ", ") + std::string(s.package->name);
      if (!others.empty()) why += "; the real package, which apt prefers to its providers " + others;
    }
    if (!failed.empty()) {
      why += "; tried first:";
      for (const auto& [s, f] : failed) why += " " + describe(*s->package) + " cannot be installed (" + f.message + ")";
    } else if (chosen.alternative > 0) {
      why += "; no earlier alternative has an installable candidate";
    }
    m_decisions.push_back(describe(p) + ": '" + to_string(g) + "' -> " + describe(*chosen.package) + " (" + why + ")");
  }

  Status final_check() {
    std::vector<const BinaryPackage*> sorted = m_order;
    std::sort(sorted.begin(), sorted.end(),
              [](const BinaryPackage* a, const BinaryPackage* b) { return a->name < b->name; });
    for (const BinaryPackage* p : sorted) {
      const ParsedRelations* rel = parsed(p);
      if (rel == nullptr) return std::move(*m_fatal);
      for (const OrGroup& g : rel->critical) {
        if (satisfier_selected(g) != nullptr || left_out_satisfier(g) != nullptr) continue;
        std::string why;
        for (const Relation& r : g)
          if (const BinaryPackage* s = selected(r.name))
            why += (why.empty() ? "" : ", ") + describe(*s) + " is selected";
        return make_error(ErrorKind::unsatisfiable, "apt.unsatisfiable",
                          std::string(p->name) + " depends on " + to_string(g) +
                              ", which the selected packages do not satisfy" +
                              (why.empty() ? std::string() : " (" + why + ")"),
                          {}, "drop or change the version pin (name=version) that forces the older package");
      }
    }
    for (const BinaryPackage* p : sorted) {
      unselect(p);
      auto f = conflict_with_selected(*p, {});
      select(p);
      if (m_fatal) return std::move(*m_fatal);
      if (f) return to_error(*f);
    }
    return ok_status();
  }

  const PackageIndex& m_index;
  const ClosureRequest& m_request;
  RelationContext m_context;
  std::unordered_map<std::string_view, const BinaryPackage*> m_selected;
  std::vector<const BinaryPackage*> m_order;  // selection order, for deterministic scans
  std::unordered_map<std::string_view, const BinaryPackage*> m_override;
  std::unordered_map<const BinaryPackage*, ParsedRelations> m_parsed;
  std::optional<Error> m_fatal;
  std::vector<std::string> m_decisions;
};

}  // namespace

std::string installed_packages_text(std::string_view status) {
  std::string out;
  std::size_t pos = 0;
  while (pos < status.size()) {
    std::size_t end = status.find("\n\n", pos);
    if (end == std::string_view::npos) end = status.size();
    const std::string_view stanza = status.substr(pos, end - pos);
    pos = end + 2;
    bool installed = false;
    std::size_t line = 0;
    while (line < stanza.size()) {
      std::size_t eol = stanza.find('\n', line);
      if (eol == std::string_view::npos) eol = stanza.size();
      std::string_view l = stanza.substr(line, eol - line);
      if (l.substr(0, 7) == "Status:") {
        l.remove_prefix(7);
        while (!l.empty() && (l.front() == ' ' || l.front() == '\t')) l.remove_prefix(1);
        while (!l.empty() && (l.back() == ' ' || l.back() == '\r')) l.remove_suffix(1);
        installed = l == "install ok installed" || l == "hold ok installed";
      }
      line = eol + 1;
    }
    if (installed) {
      out.append(stanza);
      out += "\n\n";
    }
  }
  return out;
}

Result<ClosureResult> dependency_closure(const PackageIndex& index, const ClosureRequest& request) {
  try {
    return Closure(index, request).run();
  } catch (const std::exception& e) {
    return make_error(ErrorKind::internal, "apt.closure_failed",
                      std::string("computing the dependency closure failed: ") + e.what(), {},
                      "this is a bug in gpuenv; please report it");
  }
}

}  // namespace gpuenv::packages
