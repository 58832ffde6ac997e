#include "attest/rim.hpp"

#include "attest/x509.hpp"
#include "base/base64.hpp"
#include "base/digest.hpp"
#include "base/file_io.hpp"

#include <libxml/c14n.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xmlerror.h>
#include <nlohmann/json.hpp>
#include <openssl/evp.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <mutex>
#include <set>

namespace gpuenv::attest {
namespace {

constexpr std::size_t k_max_rim_bytes = 4u << 20;
constexpr const char* k_swid_ns = "http://standards.iso.org/iso/19770/-2/2015/schema.xsd";
constexpr const char* k_dsig_ns = "http://www.w3.org/2000/09/xmldsig#";
constexpr const char* k_c14n11 = "http://www.w3.org/2006/12/xml-c14n11";
constexpr const char* k_ecdsa_sha384 = "http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha384";
constexpr const char* k_enveloped = "http://www.w3.org/2000/09/xmldsig#enveloped-signature";
constexpr const char* k_sha384_more = "http://www.w3.org/2001/04/xmldsig-more#sha384";
constexpr const char* k_sha384_enc = "http://www.w3.org/2001/04/xmlenc#sha384";

const xmlChar* xml_chars(const char* s) { return reinterpret_cast<const xmlChar*>(s); }

struct DocFree {
  void operator()(xmlDoc* d) const { xmlFreeDoc(d); }
};
using DocPtr = std::unique_ptr<xmlDoc, DocFree>;
struct CtxtFree {
  void operator()(xmlParserCtxt* c) const { xmlFreeParserCtxt(c); }
};

Error bad_rim(const std::string& what, const std::string& where) {
  return make_error(ErrorKind::spec, "attest.bad_rim", what, where,
                    "give the driver or VBIOS RIM as NVIDIA's RIM service serves it (SWID XML with an XML signature)");
}

bool is_element(const xmlNode* n, const char* ns, const char* name) {
  return n && n->type == XML_ELEMENT_NODE && n->ns && n->ns->href && xmlStrEqual(n->ns->href, xml_chars(ns)) && xmlStrEqual(n->name, xml_chars(name));
}

std::vector<xmlNode*> children(xmlNode* parent, const char* ns, const char* name) {
  std::vector<xmlNode*> out;
  for (xmlNode* c = parent ? parent->children : nullptr; c; c = c->next)
    if (is_element(c, ns, name)) out.push_back(c);
  return out;
}

xmlNode* only_child(xmlNode* parent, const char* ns, const char* name) {
  auto all = children(parent, ns, name);
  return all.size() == 1 ? all.front() : nullptr;
}

/// An attribute by local name, in no namespace or any (the RIMs put TCG fields in their own namespaces).
std::optional<std::string> attribute(const xmlNode* n, const char* name) {
  for (const xmlAttr* a = n->properties; a; a = a->next) {
    if (!xmlStrEqual(a->name, xml_chars(name))) continue;
    xmlChar* v = xmlNodeListGetString(n->doc, a->children, 1);
    std::string out = v ? reinterpret_cast<const char*>(v) : "";
    xmlFree(v);
    return out;
  }
  return std::nullopt;
}

std::string text_of(const xmlNode* n) {
  xmlChar* v = xmlNodeGetContent(n);
  std::string out = v ? reinterpret_cast<const char*>(v) : "";
  xmlFree(v);
  return out;
}

std::optional<std::string> base64_text(const xmlNode* n) {
  std::string t = text_of(n);
  t.erase(std::remove_if(t.begin(), t.end(), [](char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }), t.end());
  return base64_decode(t);
}

Result<DocPtr> parse_xml(std::string_view xml, const std::string& where) {
  if (xml.size() > k_max_rim_bytes) return bad_rim("the RIM is " + std::to_string(xml.size()) + " bytes; at most 4 MiB is read", where);
  static std::once_flag init;
  std::call_once(init, [] { xmlInitParser(); });
  std::unique_ptr<xmlParserCtxt, CtxtFree> ctxt(xmlNewParserCtxt());
  if (!ctxt) return make_error(ErrorKind::internal, "attest.xml", "libxml2 could not make a parser", where, "");
  // No entity substitution, no DTD loading, no network: a RIM is plain data.
  DocPtr doc(xmlCtxtReadMemory(ctxt.get(), xml.data(), static_cast<int>(xml.size()), nullptr, nullptr,
                               XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING));
  if (!doc) {
    const xmlError* e = xmlCtxtGetLastError(ctxt.get());
    std::string msg = e && e->message ? e->message : "not well-formed";
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
    return bad_rim("not well-formed XML: " + msg + (e ? " (line " + std::to_string(e->line) + ")" : std::string()), where);
  }
  if (doc->intSubset || doc->extSubset) return bad_rim("the RIM has a document type declaration; a RIM has none", where);
  return doc;
}

/// Canonical XML 1.1 (no comments) of the nodes VISIBLE says.
struct Visible {
  const xmlNode* inside = nullptr;   ///< only this subtree (SignedInfo) ...
  const xmlNode* outside = nullptr;  ///< ... or everything but this subtree (the enveloped signature)
};
bool within(const xmlNode* n, const xmlNode* top) {
  for (; n; n = n->parent)
    if (n == top) return true;
  return false;
}
int is_visible(void* user, xmlNodePtr node, xmlNodePtr parent) {
  const auto* v = static_cast<const Visible*>(user);
  const xmlNode* n = (node && node->type == XML_NAMESPACE_DECL) ? parent : node;
  if (n && n->type == XML_ATTRIBUTE_NODE) n = n->parent;
  if (v->inside) return within(n, v->inside) ? 1 : 0;
  return within(n, v->outside) ? 0 : 1;
}
std::optional<std::string> canonical(xmlDoc* doc, const Visible& visible) {
  xmlOutputBufferPtr buf = xmlAllocOutputBuffer(nullptr);
  if (!buf) return std::nullopt;
  const int rc = xmlC14NExecute(doc, is_visible, const_cast<Visible*>(&visible), XML_C14N_1_1, nullptr, 0, buf);
  std::optional<std::string> out;
  if (rc >= 0 && xmlOutputBufferGetContent(buf))
    out = std::string(reinterpret_cast<const char*>(xmlOutputBufferGetContent(buf)), xmlOutputBufferGetSize(buf));
  xmlOutputBufferClose(buf);
  return out;
}

std::string sha384(std::string_view bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(bytes.data(), bytes.size(), md, &n, EVP_sha384(), nullptr);
  return std::string(reinterpret_cast<char*>(md), n);
}

/// The parts of ds:Signature a verifier uses, after checking that it names exactly the algorithms NVIDIA signs with.
struct SignatureParts {
  xmlNode* signature = nullptr;
  xmlNode* signed_info = nullptr;
  std::string digest, value;
  std::vector<std::string> certificates;  ///< DER, in document order (leaf first)
};

Result<SignatureParts> signature_parts(xmlNode* root, const std::string& where) {
  SignatureParts p;
  std::size_t count = 0;
  std::vector<xmlNode*> stack{root};
  while (!stack.empty()) {  // every ds:Signature in the document: exactly one, a child of the root
    xmlNode* n = stack.back();
    stack.pop_back();
    for (xmlNode* c = n->children; c; c = c->next)
      if (c->type == XML_ELEMENT_NODE) {
        if (is_element(c, k_dsig_ns, "Signature")) {
          ++count;
          p.signature = c;
        }
        stack.push_back(c);
      }
  }
  if (count != 1 || p.signature->parent != root)
    return bad_rim(count == 0 ? "the RIM has no XML signature" : "the RIM must hold exactly one XML signature, a child of SoftwareIdentity", where);
  p.signed_info = only_child(p.signature, k_dsig_ns, "SignedInfo");
  if (!p.signed_info) return bad_rim("ds:Signature has no single SignedInfo", where);
  auto algorithm = [&](xmlNode* parent, const char* name) -> std::string {
    xmlNode* n = only_child(parent, k_dsig_ns, name);
    return n ? attribute(n, "Algorithm").value_or("") : "";
  };
  const std::string c14n = algorithm(p.signed_info, "CanonicalizationMethod");
  const std::string method = algorithm(p.signed_info, "SignatureMethod");
  if (c14n != k_c14n11) return bad_rim("SignedInfo is canonicalised by '" + c14n + "'; NVIDIA's RIMs use " + k_c14n11, where);
  if (method != k_ecdsa_sha384) return bad_rim("the signature method is '" + method + "'; NVIDIA's RIMs use " + k_ecdsa_sha384, where);
  const auto refs = children(p.signed_info, k_dsig_ns, "Reference");
  if (refs.size() != 1 || attribute(refs[0], "URI").value_or("?") != "")
    return bad_rim("SignedInfo must hold one Reference to the whole document (URI=\"\")", where);
  std::vector<std::string> transforms;
  if (xmlNode* ts = only_child(refs[0], k_dsig_ns, "Transforms"))
    for (xmlNode* t : children(ts, k_dsig_ns, "Transform")) transforms.push_back(attribute(t, "Algorithm").value_or(""));
  if (transforms.empty() || transforms[0] != k_enveloped || transforms.size() > 2 || (transforms.size() == 2 && transforms[1] != k_c14n11))
    return bad_rim("the Reference's transforms must be the enveloped signature, then C14N 1.1", where);
  const std::string digest_method = algorithm(refs[0], "DigestMethod");
  if (digest_method != k_sha384_more && digest_method != k_sha384_enc)
    return bad_rim("the digest method is '" + digest_method + "'; NVIDIA's RIMs use SHA-384", where);
  xmlNode* digest = only_child(refs[0], k_dsig_ns, "DigestValue");
  auto digest_bytes = digest ? base64_text(digest) : std::nullopt;
  xmlNode* value = only_child(p.signature, k_dsig_ns, "SignatureValue");
  auto value_bytes = value ? base64_text(value) : std::nullopt;
  if (!digest_bytes || !value_bytes) return bad_rim("the DigestValue or SignatureValue is missing or not base64", where);
  p.digest = std::move(*digest_bytes);
  p.value = std::move(*value_bytes);
  xmlNode* key_info = only_child(p.signature, k_dsig_ns, "KeyInfo");
  for (xmlNode* data : children(key_info, k_dsig_ns, "X509Data"))
    for (xmlNode* cert : children(data, k_dsig_ns, "X509Certificate")) {
      auto der = base64_text(cert);
      if (!der) return bad_rim("an X509Certificate is not base64", where);
      p.certificates.push_back(std::move(*der));
    }
  if (p.certificates.empty()) return bad_rim("the signature's KeyInfo carries no X509Certificate", where);
  return p;
}

Result<RimMeasurement> read_resource(xmlNode* r, const std::string& where) {
  RimMeasurement m;
  const auto index = attribute(r, "index"), active = attribute(r, "active"), size = attribute(r, "size");
  auto number = [](const std::optional<std::string>& s, unsigned long max) -> std::optional<unsigned long> {
    if (!s || s->empty() || s->size() > 6 || s->find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    const unsigned long v = std::stoul(*s);
    return v <= max ? std::optional<unsigned long>(v) : std::nullopt;
  };
  const auto i = number(index, 254), n = number(size, 4096);
  if (!i || !n || !active || (*active != "True" && *active != "False"))
    return bad_rim("a Resource has a bad index, size or active attribute (index '" + index.value_or("") + "')", where);
  m.index = static_cast<unsigned>(*i);
  m.size = *n;
  m.active = *active == "True";
  m.name = attribute(r, "name").value_or("");
  for (unsigned k = 0;; ++k) {
    const auto h = attribute(r, ("Hash" + std::to_string(k)).c_str());
    if (!h) break;
    auto bytes = from_hex(*h);
    if (!bytes || bytes->size() != m.size)
      return bad_rim("Hash" + std::to_string(k) + " of index " + std::to_string(m.index) + " is not " + std::to_string(m.size) + " bytes of hex", where);
    m.values.push_back(std::move(*bytes));
  }
  if (m.values.empty()) return bad_rim("index " + std::to_string(m.index) + " lists no Hash0", where);
  if (const auto alternatives = number(attribute(r, "alternatives"), 64); alternatives && *alternatives != m.values.size())
    return bad_rim("index " + std::to_string(m.index) + " says " + std::to_string(*alternatives) + " alternatives but lists " + std::to_string(m.values.size()), where);
  return m;
}

Result<Rim> read_content(xmlNode* root, const std::string& where) {
  Rim rim;
  rim.tag_id = attribute(root, "tagId").value_or("");
  xmlNode* meta = only_child(root, k_swid_ns, "Meta");
  xmlNode* payload = only_child(root, k_swid_ns, "Payload");
  if (!meta || !payload) return bad_rim("SoftwareIdentity must hold one Meta and one Payload", where);
  rim.version = attribute(meta, "colloquialVersion").value_or("");
  rim.product = attribute(meta, "product").value_or("");
  rim.manufacturer_id = attribute(meta, "FirmwareManufacturerId").value_or("");
  if (rim.version.empty()) return bad_rim("Meta has no colloquialVersion", where);
  std::set<unsigned> seen;
  for (xmlNode* r : children(payload, k_swid_ns, "Resource")) {
    if (attribute(r, "type").value_or("") != "Measurement") continue;
    GPUENV_TRY(m, read_resource(r, where));
    if (!seen.insert(m.index).second) return bad_rim("index " + std::to_string(m.index) + " is listed twice", where);
    rim.measurements.push_back(std::move(m));
  }
  if (rim.measurements.empty()) return bad_rim("the Payload lists no measurement", where);
  return rim;
}

}  // namespace

Result<CheckedRim> check_rim(std::string_view xml, const std::string& where, const std::string& prefix, std::int64_t now) {
  GPUENV_TRY(doc, parse_xml(xml, where));
  xmlNode* root = xmlDocGetRootElement(doc.get());
  if (!is_element(root, k_swid_ns, "SoftwareIdentity")) return bad_rim("the root element is not a SWID SoftwareIdentity", where);
  GPUENV_TRY(parts, signature_parts(root, where));
  CheckedRim out;
  GPUENV_TRY(rim, read_content(root, where));
  out.rim = std::move(rim);

  std::vector<x509::X509Ptr> certs;
  for (const auto& der : parts.certificates) {
    auto c = x509::read_der(der);
    if (!c) return bad_rim("an X509Certificate is not one DER certificate", where);
    certs.push_back(std::move(c));
  }
  out.rim.signer = x509::subject_of(certs.front().get());
  out.rim.chain_der = parts.certificates;

  Claim sig{prefix + ".signature", ClaimStatus::fail, ""};
  const auto document = canonical(doc.get(), Visible{nullptr, parts.signature});
  const auto signed_info = canonical(doc.get(), Visible{parts.signed_info, nullptr});
  if (!document || !signed_info) {
    sig.detail = "libxml2 could not canonicalise the document";
  } else if (sha384(*document) != parts.digest) {
    sig.detail = "the document's SHA-384 is not the signed DigestValue: the RIM was changed after it was signed";
  } else if (!x509::signature_verifies(X509_get0_pubkey(certs.front().get()), *signed_info, parts.value)) {
    sig.detail = "the SignatureValue does not verify under the signer " + out.rim.signer;
  } else {
    sig.status = ClaimStatus::pass;
    sig.detail = "digest and ECDSA P-384 signature verify under " + out.rim.signer;
  }
  out.claims.push_back(std::move(sig));
  out.claims.push_back(x509::chain_claim(prefix + ".chain", certs, {k_rim_root_sha256, "NVIDIA's RIM root", 0}));
  out.claims.push_back(x509::validity_claim(prefix + ".cert_validity", certs, now));
  return out;
}

Result<std::string> rim_from_service_json(std::string_view text, const std::string& id, const std::string& where) {
  auto bad = [&](const std::string& what) {
    return make_error(ErrorKind::spec, "attest.bad_rim", what, where, "the RIM service answers {\"id\", \"rim\" (base64 XML), \"sha256\"}");
  };
  if (text.size() > 2 * k_max_rim_bytes) return bad("the answer is larger than 8 MiB");
  const auto doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return bad("not a JSON object");
  auto field = [&](const char* name) -> std::optional<std::string> {
    const auto it = doc.find(name);
    if (it == doc.end() || !it->is_string()) return std::nullopt;
    return it->get<std::string>();
  };
  const auto got_id = field("id"), rim = field("rim"), sha = field("sha256");
  if (!got_id || !rim || !sha) return bad("the fields id, rim and sha256 must be strings");
  if (*got_id != id) return bad("the answer is for RIM '" + *got_id + "', not '" + id + "'");
  auto xml = base64_decode(*rim);
  if (!xml) return bad("the field rim is not base64");
  std::string want = *sha;
  std::transform(want.begin(), want.end(), want.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (sha256_hex(*xml) != want) return bad("the RIM's SHA-256 is " + sha256_hex(*xml) + ", not the sha256 field's " + want);
  return std::move(*xml);
}

DeviceKind device_kind_of(std::string_view subject) {
  const std::string_view cn = common_name(subject);
  if (cn.substr(0, 2) == "GH") return DeviceKind::hopper;
  if (cn.substr(0, 2) == "GB") return DeviceKind::blackwell;
  if (cn.substr(0, 2) == "LS") return DeviceKind::nvswitch;
  return DeviceKind::unknown;
}

DeviceKind device_kind_of_arch(std::string_view arch) {
  std::string upper(arch);
  for (char& c : upper) c = (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
  if (upper == "HOPPER") return DeviceKind::hopper;
  if (upper == "BLACKWELL") return DeviceKind::blackwell;
  if (upper == "LS10" || upper == "NVSWITCH") return DeviceKind::nvswitch;
  return DeviceKind::unknown;
}

std::string_view to_string(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::hopper: return "HOPPER";
    case DeviceKind::blackwell: return "BLACKWELL";
    case DeviceKind::nvswitch: return "LS10";
    case DeviceKind::unknown: return "unknown";
  }
  return "unknown";
}

bool is_rim_id(std::string_view id) {
  return !id.empty() && id.size() <= 128 && id.front() != '.' &&
         id.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") == std::string_view::npos;
}

std::string driver_rim_id(const Report& report, DeviceKind kind) {
  const std::string driver = report.driver_version();
  if (driver.empty()) return {};
  std::string id;
  if (kind == DeviceKind::hopper) id = "NV_GPU_DRIVER_GH100_" + driver;
  if (kind == DeviceKind::blackwell) {
    const std::string chip = report.text_field(k_chip_info);
    id = "NV_GPU_CC_DRIVER_" + (chip.empty() ? std::string("GB100") : chip) + "_" + driver;
  }
  return is_rim_id(id) ? id : std::string();
}

std::string vbios_rim_id(const Report& report, DeviceKind kind) {
  std::string vbios = report.vbios_version();
  vbios.erase(std::remove(vbios.begin(), vbios.end(), '.'), vbios.end());
  if (vbios.empty()) return {};
  std::string id;
  if (kind == DeviceKind::nvswitch) {
    std::transform(vbios.begin(), vbios.end(), vbios.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    id = "NV_SWITCH_BIOS_5612_0002_890_" + vbios;
  } else if (kind != DeviceKind::unknown) {
    const std::string project = report.text_field(k_project), sku = report.text_field(k_project_sku), chip = report.text_field(k_chip_sku);
    if (project.empty() || sku.empty() || chip.empty()) return {};
    id = "NV_GPU_VBIOS_" + project + "_" + sku + "_" + chip + "_" + vbios;
  }
  return is_rim_id(id) ? id : std::string();
}

MeasurementResult compare_measurements(const Report& report, const Rim* driver, const Rim* vbios) {
  MeasurementResult out;
  out.claim.name = "measurements";
  std::map<unsigned, const MeasurementBlock*> blocks;
  for (const auto& b : report.blocks) blocks[b.index] = &b;
  std::map<unsigned, std::string> owner;
  std::vector<std::string> conflicts;
  const auto nvdec = report.nvdec0_status();
  std::vector<unsigned> failed_driver, failed_vbios;
  for (const auto& [rim, source] : {std::pair{driver, "driver"}, std::pair{vbios, "vbios"}}) {
    if (!rim) continue;
    for (const auto& m : rim->measurements) {
      if (!m.active) continue;
      if (!owner.emplace(m.index, source).second) conflicts.push_back(std::to_string(m.index));
      IndexResult r{m.index, source, ClaimStatus::fail, ""};
      const auto it = blocks.find(m.index + 1);
      if (m.index == 35 && nvdec == 0x55) {
        r.status = ClaimStatus::not_checked;
        r.detail = "NVDEC0 is disabled (0x55): index 35 is not compared";
      } else if (m.index == 35 && nvdec && *nvdec != 0xAA) {
        r.detail = "NVDEC0 status " + std::to_string(*nvdec) + " is neither enabled (0xAA) nor disabled (0x55)";
      } else if (it == blocks.end()) {
        r.detail = "the report has no measurement block " + std::to_string(m.index + 1);
      } else if (std::find(m.values.begin(), m.values.end(), it->second->value) != m.values.end()) {
        r.status = ClaimStatus::pass;
        r.detail = "matches";
      } else {
        r.detail = "the report's " + to_hex(it->second->value).substr(0, 16) + "... is none of the RIM's " + std::to_string(m.values.size()) + " values (" +
                   to_hex(m.values.front()).substr(0, 16) + "...)";
      }
      if (r.status == ClaimStatus::fail) (std::string_view(source) == "driver" ? failed_driver : failed_vbios).push_back(m.index);
      out.indices.push_back(std::move(r));
    }
  }
  std::sort(out.indices.begin(), out.indices.end(), [](const IndexResult& a, const IndexResult& b) { return a.index < b.index; });
  auto list = [](const std::vector<unsigned>& v) {
    std::string s;
    for (unsigned i : v) s += (s.empty() ? "" : ", ") + std::to_string(i);
    return s;
  };
  if (!driver && !vbios) {
    out.claim.status = ClaimStatus::not_checked;
    out.claim.detail = "no RIM: the golden measurements were not compared";
  } else if (!conflicts.empty()) {
    out.claim.status = ClaimStatus::fail;
    out.claim.detail = "the driver and VBIOS RIMs both claim index " + conflicts.front() + " (NVIDIA's RIMs never overlap)";
  } else if (!failed_driver.empty() || !failed_vbios.empty()) {
    out.claim.status = ClaimStatus::fail;
    std::string d;
    if (!failed_vbios.empty())
      d += "VBIOS index " + list(failed_vbios) + " differs: reset the GPU (or stop and start the VM), and check that the VBIOS RIM is the current issue for this version";
    if (!failed_driver.empty())
      d += std::string(d.empty() ? "" : "; ") + "driver index " + list(failed_driver) +
           " differs: reboot the host (a driver measurement stays stale after CC mode is toggled until the host reboots), and check that the driver RIM is the one for this driver";
    out.claim.detail = d;
  } else {
    out.claim.status = (driver && vbios) ? ClaimStatus::pass : ClaimStatus::fail;
    std::size_t compared = 0, skipped = 0;
    for (const auto& r : out.indices) (r.status == ClaimStatus::pass ? compared : skipped) += 1;
    out.claim.detail = std::to_string(compared) + " active measurements match";
    if (skipped) out.claim.detail += ", " + std::to_string(skipped) + " not compared (NVDEC0 disabled)";
    if (!driver || !vbios) {
      // Half a comparison proves half the firmware: it is not a pass. A device without a driver RIM (an NVSwitch)
      // is judged by its caller, who passes the VBIOS RIM as the whole.
      out.claim.status = ClaimStatus::not_checked;
      out.claim.detail += std::string("; the ") + (driver ? "VBIOS" : "driver") + " RIM was not available";
    }
  }
  return out;
}

namespace {

class DirectoryRimStore final : public RimStore {
 public:
  explicit DirectoryRimStore(std::string dir) : dir_(std::move(dir)) {}
  Result<std::string> get(const std::string& id) override {
    if (!is_rim_id(id))
      return make_error(ErrorKind::spec, "attest.bad_rim_id", "'" + id + "' is not a RIM id", dir_, "RIM ids are letters, digits, '_', '.' and '-'");
    for (const char* ext : {".xml", ".json", ".swidtag"}) {
      const std::string path = dir_ + "/" + id + ext;
      auto text = read_file_limited(path, 2 * k_max_rim_bytes);
      if (!text) {
        if (text.error().id == "io.not_found") continue;
        return std::move(text).error();
      }
      if (std::string_view(ext) == ".json") return rim_from_service_json(*text, id, path);
      return std::move(*text);
    }
    return make_error(ErrorKind::environment, "attest.rim_not_found", "no RIM " + id + " in " + dir_, dir_,
                      "put " + id + ".xml (or the RIM service's " + id + ".json) there, or let gpuenv fetch it with --rim-service URL");
  }
  [[nodiscard]] std::string describe() const override { return "directory " + dir_; }

 private:
  std::string dir_;
};

}  // namespace

std::unique_ptr<RimStore> make_directory_rim_store(std::string dir) { return std::make_unique<DirectoryRimStore>(std::move(dir)); }

}  // namespace gpuenv::attest
