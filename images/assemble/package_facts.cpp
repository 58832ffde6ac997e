#include "images/assemble/package_facts.hpp"

#include <cctype>
#include <functional>
#include <map>
#include <vector>

#include "base/archive/safe_extract.hpp"
#include "base/text.hpp"
#include "packages/apt/closure.hpp"
#include "packages/apt/deb822.hpp"
#include "packages/apt/package_index.hpp"
#include "packages/wheels/markers.hpp"
#include "packages/wheels/metadata.hpp"

namespace gpuenv::images::assembly {
namespace {

constexpr std::size_t k_max_status_bytes = 64u << 20;
constexpr std::size_t k_max_metadata_bytes = 4u << 20;

/// The relation's package name without its architecture qualifier.
std::string bare_name(const packages::Relation& r) { return r.name.substr(0, r.name.find(':')); }

std::set<std::string> read_deb_depends(const std::string& root, const resolver::Platform& platform, PackageFacts& out) {
  const auto status = read_file_beneath(root, "var/lib/dpkg/status", k_max_status_bytes);
  if (!status) return {};
  const std::string text = packages::installed_packages_text(*status);
  auto stanzas = packages::parse_deb822(text, "/var/lib/dpkg/status");
  if (!stanzas) return {};
  // Installed names, and who provides each virtual name.
  std::set<std::string> installed;
  std::map<std::string, std::string> provider;
  for (const auto& st : *stanzas) installed.insert(std::string(st.get("Package")));
  const packages::RelationContext context{std::string(platform.debian_arch()), {}};
  for (const auto& st : *stanzas) {
    auto provides = packages::parse_relations(st.get("Provides"), "/var/lib/dpkg/status", context);
    if (!provides) continue;
    for (const auto& group : *provides)
      for (const auto& r : group) provider.emplace(bare_name(r), std::string(st.get("Package")));  // the first provider in status order
  }
  for (const auto& st : *stanzas) {
    const std::string name(st.get("Package"));
    for (const char* field : {"Pre-Depends", "Depends"}) {
      auto groups = packages::parse_relations(st.get(field), "/var/lib/dpkg/status", context);
      if (!groups) continue;
      for (const auto& group : *groups)
        for (const auto& r : group) {
          // The first alternative that is installed (or provided) is the one that satisfies the group.
          std::string target = bare_name(r);
          if (!installed.count(target)) {
            const auto p = provider.find(target);
            if (p == provider.end()) continue;
            target = p->second;
          }
          if (target != name) out.deb_depends.insert({name, target});
          break;
        }
    }
  }
  return installed;
}

/// Debian's copyright format 1.0 short names (section "License specification") and SPDX identifiers written as such,
/// lower-cased, with their SPDX identifier (spdx.org/licenses). Unversioned names (GPL, Artistic), public-domain and
/// names of no SPDX licence are not here.
const std::map<std::string, std::string, std::less<>>& dep5_to_spdx() {
  static const std::map<std::string, std::string, std::less<>> table = {
      {"apache-1.0", "Apache-1.0"}, {"apache-1.1", "Apache-1.1"}, {"apache-2.0", "Apache-2.0"}, {"artistic-2.0", "Artistic-2.0"},
      {"bsd-2-clause", "BSD-2-Clause"}, {"bsd-3-clause", "BSD-3-Clause"}, {"bsd-4-clause", "BSD-4-Clause"}, {"bsl-1.0", "BSL-1.0"},
      {"cc0-1.0", "CC0-1.0"}, {"cc-by-3.0", "CC-BY-3.0"}, {"cc-by-4.0", "CC-BY-4.0"}, {"cc-by-sa-3.0", "CC-BY-SA-3.0"},
      {"cc-by-sa-4.0", "CC-BY-SA-4.0"}, {"expat", "MIT"}, {"mit", "MIT"}, {"isc", "ISC"}, {"zlib", "Zlib"}, {"python-2.0", "Python-2.0"},
      {"mpl-1.1", "MPL-1.1"}, {"mpl-2.0", "MPL-2.0"},
      {"gpl-1", "GPL-1.0-only"}, {"gpl-1+", "GPL-1.0-or-later"}, {"gpl-2", "GPL-2.0-only"}, {"gpl-2+", "GPL-2.0-or-later"},
      {"gpl-3", "GPL-3.0-only"}, {"gpl-3+", "GPL-3.0-or-later"}, {"lgpl-2", "LGPL-2.0-only"}, {"lgpl-2+", "LGPL-2.0-or-later"},
      {"lgpl-2.1", "LGPL-2.1-only"}, {"lgpl-2.1+", "LGPL-2.1-or-later"}, {"lgpl-3", "LGPL-3.0-only"}, {"lgpl-3+", "LGPL-3.0-or-later"},
      {"gfdl-1.2", "GFDL-1.2-only"}, {"gfdl-1.2+", "GFDL-1.2-or-later"}, {"gfdl-1.3", "GFDL-1.3-only"}, {"gfdl-1.3+", "GFDL-1.3-or-later"},
      {"gpl-2.0-only", "GPL-2.0-only"}, {"gpl-2.0-or-later", "GPL-2.0-or-later"}, {"gpl-3.0-only", "GPL-3.0-only"},
      {"gpl-3.0-or-later", "GPL-3.0-or-later"}, {"lgpl-2.1-only", "LGPL-2.1-only"}, {"lgpl-2.1-or-later", "LGPL-2.1-or-later"},
      {"lgpl-3.0-only", "LGPL-3.0-only"}, {"lgpl-3.0-or-later", "LGPL-3.0-or-later"}};
  return table;
}

/// One paragraph's licence synopsis ("GPL-2+ or Artistic-2.0") as an SPDX expression; "" when a name is not in the
/// table, or "and" and "or" are mixed (the format gives them no precedence), or a name carries an exception.
std::string synopsis_expression(std::string_view synopsis) {
  const std::string lowered = text::lowered(synopsis);
  const std::vector<std::string_view> words = text::split_blanks(lowered);
  if (words.empty() || words.size() % 2 == 0) return "";
  std::string op, out;
  for (std::size_t i = 0; i < words.size(); ++i) {
    if (i % 2 == 1) {
      if ((words[i] != "or" && words[i] != "and") || (!op.empty() && op != words[i])) return "";
      op = words[i];
      continue;
    }
    const auto id = dep5_to_spdx().find(words[i]);
    if (id == dep5_to_spdx().end()) return "";
    out += (out.empty() ? "" : op == "or" ? " OR " : " AND ") + id->second;
  }
  return op == "or" ? "(" + out + ")" : out;
}

/// PEP 639's License-Expression when it looks like an SPDX expression (ids, '+', parentheses, AND, OR, WITH).
std::string licence_expression(const packages::CoreMetadata& m) {
  for (const auto& f : m.fields) {
    if (f.name != "License-Expression") continue;
    const std::string& v = f.value;
    if (v.empty() || v.size() > 300) return "";
    for (char c : v)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '+' || c == '(' || c == ')' || c == ' ' || c == ':')) return "";
    return v;
  }
  return "";
}

void read_wheel_facts(const std::string& root, const std::map<std::string, std::string>& wheel_metadata, const resolver::Platform& platform,
                      const std::string& python, PackageFacts& out) {
  const packages::Environment env = packages::cpython_linux_environment(platform.machine(), python);
  for (const auto& [name, path] : wheel_metadata) {
    const auto text = read_file_beneath(root, path, k_max_metadata_bytes);
    if (!text) continue;
    auto m = packages::parse_core_metadata(*text, path);
    if (!m) continue;
    if (std::string licence = licence_expression(*m); !licence.empty()) out.wheel_licences[name] = std::move(licence);
    for (const auto& r : m->requires_dist) {
      if (r.marker) {
        auto holds = r.marker->evaluate(env);
        if (!holds || !*holds) continue;  // an extra's, or another platform's
      }
      const std::string target = packages::canonicalize_name(r.name);
      if (target != name && wheel_metadata.count(target)) out.wheel_depends.insert({name, target});
    }
  }
}

void read_deb_licences(const std::string& root, const std::set<std::string>& installed, PackageFacts& out) {
  for (const auto& name : installed) {
    const auto text = read_file_beneath(root, "usr/share/doc/" + name + "/copyright", 1u << 20);
    if (!text) continue;
    if (std::string licence = dep5_licence(*text); !licence.empty()) out.deb_licences[name] = std::move(licence);
  }
}

}  // namespace

std::string dep5_licence(std::string_view text) {
  auto paragraphs = packages::parse_deb822(text, "copyright");
  if (!paragraphs || paragraphs->empty()) return "";
  const std::string_view format = paragraphs->front().get("Format");
  if (format.find("copyright-format/1.0") == std::string_view::npos && format.find("dep5") == std::string_view::npos) return "";
  std::set<std::string> licences;
  for (std::size_t i = 0; i < paragraphs->size(); ++i) {
    const auto& p = (*paragraphs)[i];
    if (i > 0 && p.get("Files").empty()) continue;  // a stand-alone License paragraph: a text, named elsewhere
    const std::string_view value = p.get("License");
    if (value.empty()) {
      if (i == 0) continue;  // the header need not name one
      return "";
    }
    const std::string expression = synopsis_expression(value.substr(0, value.find('\n')));
    if (expression.empty()) return "";
    licences.insert(expression);
  }
  std::string out;
  for (const auto& l : licences) out += (out.empty() ? "" : " AND ") + l;
  // One licence alone, or only ANDs, needs no parentheses.
  if (licences.size() == 1 && out.front() == '(') out = out.substr(1, out.size() - 2);
  return out;
}

PackageFacts read_package_facts(const std::string& root, const std::map<std::string, std::string>& wheel_metadata, const resolver::Platform& platform,
                                const std::string& python) {
  PackageFacts out;
  read_deb_licences(root, read_deb_depends(root, platform, out), out);
  if (!python.empty()) read_wheel_facts(root, wheel_metadata, platform, python, out);
  return out;
}

}  // namespace gpuenv::images::assembly
