#include "images/assemble/cyclonedx.hpp"

#include <map>
#include <set>

#include <nlohmann/json.hpp>
#include <openssl/evp.h>

#include <array>
#include <cstdio>

#include "base/json_field.hpp"

namespace gpuenv::images {
namespace {

using ojson = nlohmann::ordered_json;
using nlohmann::json;

Error bad_spdx(const std::string& what, const std::string& where) {
  return make_error(ErrorKind::environment, "sbom.bad_spdx", what, where, "build the image again: the SPDX document beside it is not the one gpuenv wrote");
}

/// The purl the SPDX package names (its PACKAGE-MANAGER purl reference), "" for none.
std::string purl_of(const json& package) {
  for (const auto& ref : field_of_type(package, "externalRefs", json::value_t::array))
    if (string_field(ref, "referenceType") == "purl") return string_field(ref, "referenceLocator");
  return "";
}

/// A .deb's purl with the distribution qualifier (purl-spec's deb type: `distro`), when it has none.
std::string with_distro(std::string purl, const std::string& distro) {
  if (distro.empty() || purl.rfind("pkg:deb/", 0) != 0 || purl.find("distro=") != std::string::npos) return purl;
  return purl + (purl.find('?') == std::string::npos ? "?" : "&") + "distro=" + distro;
}

/// The SPDX package as a component: name, version, purl, sha256, where it was downloaded from, licence.
ojson component_of(const json& p, const std::string& ref, const std::string& purl) {
  ojson c = {{"type", string_field(p, "primaryPackagePurpose") == "CONTAINER" ? "container" : "library"}, {"bom-ref", ref}, {"name", string_field(p, "name")}};
  if (const std::string v = string_field(p, "versionInfo"); !v.empty()) c["version"] = v;
  ojson hashes = ojson::array();
  for (const auto& sum : field_of_type(p, "checksums", json::value_t::array))
    if (string_field(sum, "algorithm") == "SHA256" && is_sha256_hex(string_field(sum, "checksumValue")))
      hashes.push_back({{"alg", "SHA-256"}, {"content", string_field(sum, "checksumValue")}});
  if (!hashes.empty()) c["hashes"] = std::move(hashes);
  if (const std::string l = string_field(p, "licenseDeclared"); !l.empty() && l != "NOASSERTION" && l != "NONE")
    c["licenses"] = ojson::array({{{"expression", l}}});
  if (!purl.empty()) c["purl"] = purl;
  if (const std::string at = string_field(p, "downloadLocation"); !at.empty() && at != "NOASSERTION" && at != "NONE")
    c["externalReferences"] = ojson::array({{{"type", "distribution"}, {"url", at}}});
  return c;
}

/// A bom-ref no other component has: the purl, else the SPDX id.
std::string unique_ref(std::set<std::string>& taken, const std::string& purl, const std::string& spdx_id) {
  std::string ref = purl.empty() ? spdx_id : purl;
  for (int n = 2; !taken.insert(ref).second; ++n) ref = (purl.empty() ? spdx_id : purl) + "#" + std::to_string(n);
  return ref;
}

ojson image_component(const json& doc, const CycloneDxImage& image) {
  std::string name = string_field(doc, "name", "image");
  std::string purl_name;
  for (char ch : name) purl_name += (ch >= 'A' && ch <= 'Z') ? static_cast<char>(ch - 'A' + 'a') : ch;
  std::string purl = "pkg:oci/" + purl_name + "@sha256%3A" + image.manifest.hex();
  if (!image.architecture.empty()) purl += "?arch=" + image.architecture;
  return {{"type", "container"},
          {"bom-ref", "image"},
          {"name", name},
          {"version", image.manifest.str()},
          {"hashes", ojson::array({{{"alg", "SHA-256"}, {"content", image.manifest.hex()}}})},
          {"purl", purl}};
}

/// RFC 4122's name-based UUID, version 5 (SHA-1), of NAME in the URL namespace (RFC 4122 appendix C): the same
/// name, the same UUID, by definition. "" when OpenSSL cannot hash (it always can).
std::string uuid_v5(std::string_view name) {
  static constexpr std::array<unsigned char, 16> k_url_namespace = {0x6b, 0xa7, 0xb8, 0x11, 0x9d, 0xad, 0x11, 0xd1,
                                                                    0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8};
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  const bool hashed = ctx != nullptr && EVP_DigestInit_ex(ctx, EVP_sha1(), nullptr) == 1 &&
                      EVP_DigestUpdate(ctx, k_url_namespace.data(), k_url_namespace.size()) == 1 && EVP_DigestUpdate(ctx, name.data(), name.size()) == 1 &&
                      EVP_DigestFinal_ex(ctx, digest.data(), &length) == 1 && length >= 16;
  EVP_MD_CTX_free(ctx);
  if (!hashed) return "";
  digest[6] = static_cast<unsigned char>((digest[6] & 0x0f) | 0x50);  // version 5
  digest[8] = static_cast<unsigned char>((digest[8] & 0x3f) | 0x80);  // RFC 4122 variant
  std::string out;
  for (std::size_t i = 0; i < 16; ++i) {
    char hex[3];
    std::snprintf(hex, sizeof hex, "%02x", digest[i]);
    out += hex;
    if (i == 3 || i == 5 || i == 7 || i == 9) out += '-';
  }
  return out;
}

}  // namespace

std::string cyclonedx_file_name(std::string_view spdx_file_name) {
  std::string name(spdx_file_name);
  const std::string suffix = ".spdx.json";
  if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) name.resize(name.size() - suffix.size());
  return name + ".cdx.json";
}

Result<std::string> cyclonedx_json(std::string_view spdx_text, const CycloneDxImage& image, const std::string& where) {
  const json doc = json::parse(spdx_text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return bad_spdx("the SPDX document is not a JSON object", where);
  if (string_field(doc, "spdxVersion") != "SPDX-2.3") return bad_spdx("not an SPDX 2.3 document", where);
  const auto it = doc.find("packages");
  if (it == doc.end() || !it->is_array()) return bad_spdx("the SPDX document has no packages list", where);
  // Each SPDX package but the image itself becomes a component, in the document's order.
  std::map<std::string, std::string> ref_of;  // SPDX id -> bom-ref
  std::set<std::string> taken{"image"};
  ojson components = ojson::array();
  for (const auto& p : *it) {
    const std::string id = string_field(p, "SPDXID"), name = string_field(p, "name");
    if (id.empty() || name.empty()) return bad_spdx("a package of the SPDX document has no SPDXID or name", where);
    if (id == "SPDXRef-Image") continue;
    const std::string purl = with_distro(purl_of(p), image.distro);
    const std::string ref = unique_ref(taken, purl, id);
    ref_of[id] = ref;
    components.push_back(component_of(p, ref, purl));
  }
  ref_of["SPDXRef-Image"] = "image";
  // The image holds each package (CONTAINS) and descends from its base image (DESCENDANT_OF), which holds its own;
  // a package needs another (DEPENDS_ON: dpkg's status, a wheel's Requires-Dist). A package with no edge in the SPDX
  // document is left out of the graph: its dependencies are unknown, not none (CycloneDX 1.6, dependencies).
  std::map<std::string, std::vector<std::string>> depends;
  std::vector<std::string> order;
  for (const auto& r : field_of_type(doc, "relationships", json::value_t::array)) {
    const std::string type = string_field(r, "relationshipType");
    if (type != "CONTAINS" && type != "DESCENDANT_OF" && type != "DEPENDS_ON") continue;
    const auto from = ref_of.find(string_field(r, "spdxElementId"));
    const auto to = ref_of.find(string_field(r, "relatedSpdxElement"));
    if (from == ref_of.end() || to == ref_of.end()) continue;
    if (!depends.count(from->second)) order.push_back(from->second);
    depends[from->second].push_back(to->second);
  }
  ojson dependencies = ojson::array();
  for (const auto& from : order) dependencies.push_back({{"ref", from}, {"dependsOn", depends[from]}});
  const std::string created = string_field(field_of_type(doc, "creationInfo", json::value_t::object), "created");
  ojson metadata = ojson::object();
  if (!created.empty()) metadata["timestamp"] = created;
  metadata["tools"] = {{"components", ojson::array({{{"type", "application"}, {"name", "gpuenv"}, {"version", image.generator_version}}})}};
  metadata["component"] = image_component(doc, image);
  // CycloneDX asks for a serial number unique to each BOM; a reproducible one is unique to each image and SBOM.
  const std::string serial = uuid_v5("https://gpuenv.dev/sbom/cyclonedx/" + image.manifest.str() + "/" + sha256_hex(spdx_text));
  const ojson bom = {{"$schema", "http://cyclonedx.org/schema/bom-1.6.schema.json"},
                     {"bomFormat", "CycloneDX"},
                     {"specVersion", "1.6"},
                     {"serialNumber", "urn:uuid:" + serial},
                     {"version", 1},
                     {"metadata", std::move(metadata)},
                     {"components", std::move(components)},
                     {"dependencies", std::move(dependencies)}};
  return bom.dump(1) + "\n";
}

}  // namespace gpuenv::images
