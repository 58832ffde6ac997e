#include "images/assemble/sbom.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <map>
#include <set>

#include "images/plan/image_config.hpp"
#include "packages/apt/closure.hpp"
#include "packages/apt/deb822.hpp"
#include "packages/wheels/markers.hpp"
#include "base/time.hpp"

namespace gpuenv::images::assembly {
namespace {

using nlohmann::json;

std::string purl_escape(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '.' || c == '-' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

std::string spdx_id(std::string_view kind, std::string_view name) {
  std::string out = "SPDXRef-Package-" + std::string(kind) + "-";
  for (char c : name) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-') ? c : '-';
  return out;
}

/// The SBOM being built: its packages, relationships, and the SPDX ids taken.
struct SbomDocument {
  json packages = json::array();
  json relationships = json::array();
  std::set<std::string> ids;
  std::map<std::string, std::string> deb_ids, wheel_ids;  ///< package name (a wheel's canonical) -> SPDX id

  std::string unique_id(std::string_view kind, std::string_view name) {
    std::string id = spdx_id(kind, name);
    for (int n = 2; !ids.insert(id).second; ++n) id = spdx_id(kind, name) + "-" + std::to_string(n);
    return id;
  }
  void relate(const std::string& from, const std::string& type, const std::string& to) {
    relationships.push_back({{"spdxElementId", from}, {"relationshipType", type}, {"relatedSpdxElement", to}});
  }
};

json package_entry(const std::string& id, const std::string& name, const std::string& version, const std::string& location, const std::string& purl) {
  return {{"SPDXID", id},
          {"name", name},
          {"versionInfo", version},
          {"downloadLocation", location},
          {"filesAnalyzed", false},
          {"supplier", "NOASSERTION"},
          {"licenseConcluded", "NOASSERTION"},
          {"licenseDeclared", "NOASSERTION"},
          {"copyrightText", "NOASSERTION"},
          {"externalRefs", json::array({{{"referenceCategory", "PACKAGE-MANAGER"}, {"referenceType", "purl"}, {"referenceLocator", purl}}})}};
}

void add_locked_packages(SbomDocument& doc, const resolver::Lock& lock, const SbomInputs& in) {
  const std::string& distro = in.distro;
  for (const auto& p : lock.packages) {
    const std::string id = doc.unique_id(resolver::to_string(p.kind), p.name);
    const bool deb = p.kind == resolver::PackageKind::deb;
    const std::string canonical = packages::canonicalize_name(p.name);
    const std::string purl = deb ? "pkg:deb/" + distro + "/" + purl_escape(p.name) + "@" + purl_escape(p.version) + "?arch=" + purl_escape(p.architecture)
                                 : "pkg:pypi/" + purl_escape(canonical) + "@" + purl_escape(p.version);
    json entry = package_entry(id, p.name, p.version, p.url, purl);
    entry["checksums"] = json::array({{{"algorithm", "SHA256"}, {"checksumValue", p.sha256.hex()}}});
    const auto& licences = deb ? in.facts.deb_licences : in.facts.wheel_licences;
    if (const auto l = licences.find(deb ? p.name : canonical); l != licences.end()) entry["licenseDeclared"] = l->second;
    (deb ? doc.deb_ids : doc.wheel_ids).emplace(deb ? p.name : canonical, id);
    doc.packages.push_back(std::move(entry));
    doc.relate("SPDXRef-Image", "CONTAINS", id);
  }
}

/// The base image and what its dpkg status says it holds (their download location is not known).
void add_base_image(SbomDocument& doc, const resolver::Lock& lock, const SbomInputs& in) {
  doc.packages.push_back({{"SPDXID", "SPDXRef-BaseImage"},
                          {"name", lock.base_image},
                          {"downloadLocation", "NOASSERTION"},
                          {"filesAnalyzed", false},
                          {"primaryPackagePurpose", "CONTAINER"},
                          {"checksums", json::array({{{"algorithm", "SHA256"}, {"checksumValue", in.base_digest.substr(in.base_digest.find(':') + 1)}}})}});
  doc.relate("SPDXRef-Image", "DESCENDANT_OF", "SPDXRef-BaseImage");
  std::set<std::string> locked;
  for (const auto& p : lock.packages)
    if (p.kind == resolver::PackageKind::deb) locked.insert(p.name);
  for (const auto& b : in.base) {
    if (locked.count(b.name)) continue;  // replaced by the lock's version
    const std::string id = doc.unique_id("base-deb", b.name);
    const std::string purl = "pkg:deb/" + in.distro + "/" + purl_escape(b.name) + "@" + purl_escape(b.version) +
                             (b.architecture.empty() ? "" : "?arch=" + purl_escape(b.architecture));
    json entry = package_entry(id, b.name, b.version, "NOASSERTION", purl);
    if (const auto l = in.facts.deb_licences.find(b.name); l != in.facts.deb_licences.end()) entry["licenseDeclared"] = l->second;
    doc.packages.push_back(std::move(entry));
    doc.deb_ids.emplace(b.name, id);
    doc.relate("SPDXRef-BaseImage", "CONTAINS", id);
  }
}

/// DEPENDS_ON between the document's packages, as the finished tree says (both ends listed, in name order).
void add_dependencies(SbomDocument& doc, const PackageFacts& facts) {
  const auto relate_all = [&doc](const std::set<std::pair<std::string, std::string>>& edges, const std::map<std::string, std::string>& ids) {
    for (const auto& edge : edges) {
      const auto from = ids.find(edge.first), to = ids.find(edge.second);
      if (from != ids.end() && to != ids.end()) doc.relate(from->second, "DEPENDS_ON", to->second);
    }
  };
  relate_all(facts.deb_depends, doc.deb_ids);
  relate_all(facts.wheel_depends, doc.wheel_ids);
}

}  // namespace

std::vector<BasePackage> base_packages(std::string_view status) {
  std::vector<BasePackage> out;
  const std::string text = packages::installed_packages_text(status);
  auto stanzas = packages::parse_deb822(text, "/var/lib/dpkg/status");
  if (!stanzas) return out;
  for (const auto& st : *stanzas)
    out.push_back({std::string(st.get("Package")), std::string(st.get("Version")), std::string(st.get("Architecture"))});
  return out;
}

std::string sbom_json(const resolver::Lock& lock, const SbomInputs& in) {
  json doc;
  doc["spdxVersion"] = "SPDX-2.3";
  doc["dataLicense"] = "CC0-1.0";
  doc["SPDXID"] = "SPDXRef-DOCUMENT";
  doc["name"] = lock.spec_name;
  doc["documentNamespace"] = "https://spdx.org/spdxdocs/gpuenv-" + purl_escape(lock.spec_name) + "-" + in.lock_sha256;
  std::string tool = in.generator;
  std::replace(tool.begin(), tool.end(), ' ', '-');
  doc["creationInfo"] = {{"created", format_rfc3339_utc(in.source_date_epoch)}, {"creators", json::array({"Tool: " + tool})}};
  SbomDocument body;
  body.packages.push_back({{"SPDXID", "SPDXRef-Image"}, {"name", lock.spec_name}, {"downloadLocation", "NOASSERTION"}, {"filesAnalyzed", false},
                           {"primaryPackagePurpose", "CONTAINER"}});
  body.relate("SPDXRef-DOCUMENT", "DESCRIBES", "SPDXRef-Image");
  add_locked_packages(body, lock, in);
  if (!in.base_digest.empty()) add_base_image(body, lock, in);
  add_dependencies(body, in.facts);
  doc["packages"] = body.packages;
  doc["relationships"] = body.relationships;
  return doc.dump(1) + "\n";
}

}  // namespace gpuenv::images::assembly
