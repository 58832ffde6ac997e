#include "images/assemble/package_facts.hpp"

#include <cctype>
#include <map>

#include "base/archive/safe_extract.hpp"
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

void read_deb_depends(const std::string& root, const resolver::Platform& platform, PackageFacts& out) {
  const auto status = read_file_beneath(root, "var/lib/dpkg/status", k_max_status_bytes);
  if (!status) return;
  const std::string text = packages::installed_packages_text(*status);
  auto stanzas = packages::parse_deb822(text, "/var/lib/dpkg/status");
  if (!stanzas) return;
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

}  // namespace

PackageFacts read_package_facts(const std::string& root, const std::map<std::string, std::string>& wheel_metadata, const resolver::Platform& platform,
                                const std::string& python) {
  PackageFacts out;
  read_deb_depends(root, platform, out);
  if (!python.empty()) read_wheel_facts(root, wheel_metadata, platform, python, out);
  return out;
}

}  // namespace gpuenv::images::assembly
