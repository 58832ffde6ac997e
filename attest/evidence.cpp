#include "attest/evidence.hpp"

#include <cctype>

#include <nlohmann/json.hpp>

#include "base/base64.hpp"
#include "base/digest.hpp"

namespace gpuenv::attest {
namespace {

constexpr std::size_t k_request_size = 37;
constexpr std::size_t k_nonce_size = 32;
constexpr std::size_t k_signature_size = 96;  // ECDSA P-384 r||s
constexpr std::string_view k_versioned_magic = "NVDAOD";

Error bad(const std::string& what, std::size_t offset, const std::string& where) {
  return make_error(ErrorKind::spec, "attest.bad_report", what + " (at byte " + std::to_string(offset) + ")", where,
                    "the evidence is damaged or is not an NVIDIA GPU attestation report; collect it again");
}

/// Reads little-endian fields from BYTES, each read checked against what is left.
class Cursor {
 public:
  Cursor(std::string_view bytes, std::size_t base, const std::string& where) : m_b(bytes), m_base(base), m_where(where) {}
  [[nodiscard]] std::size_t pos() const { return m_pos; }
  [[nodiscard]] std::size_t left() const { return m_b.size() - m_pos; }
  [[nodiscard]] std::size_t offset() const { return m_base + m_pos; }

  Result<std::string_view> take(std::size_t n, const char* what) {
    if (n > left()) return bad(std::string(what) + " needs " + std::to_string(n) + " bytes, " + std::to_string(left()) + " are left", offset(), m_where);
    const std::string_view out = m_b.substr(m_pos, n);
    m_pos += n;
    return out;
  }
  Result<std::uint32_t> le(std::size_t n, const char* what) {
    GPUENV_TRY(raw, take(n, what));
    std::uint32_t v = 0;
    for (std::size_t i = n; i-- > 0;) v = (v << 8) | static_cast<unsigned char>(raw[i]);
    return v;
  }
  Result<std::uint8_t> u8(const char* what) {
    GPUENV_TRY(v, le(1, what));
    return static_cast<std::uint8_t>(v);
  }
  Result<std::uint16_t> u16(const char* what) {
    GPUENV_TRY(v, le(2, what));
    return static_cast<std::uint16_t>(v);
  }

 private:
  std::string_view m_b;
  std::size_t m_base;
  std::size_t m_pos = 0;
  const std::string& m_where;
};

Result<std::vector<MeasurementBlock>> parse_blocks(std::string_view record, std::size_t base, unsigned count, const std::string& where) {
  Cursor c(record, base, where);
  std::vector<MeasurementBlock> out;
  while (c.left() > 0) {
    const std::size_t at = c.offset();
    MeasurementBlock b;
    GPUENV_TRY(index, c.u8("a measurement block's index"));
    GPUENV_TRY(spec, c.u8("a measurement block's specification"));
    GPUENV_TRY(size, c.u16("a measurement block's size"));
    b.index = index;
    b.spec = spec;
    if (spec != 1) return bad("measurement block " + std::to_string(index) + " is not a DMTF block (specification " + std::to_string(spec) + ")", at, where);
    GPUENV_TRY(body, c.take(size, "a measurement block"));
    Cursor v(body, at + 4, where);
    GPUENV_TRY(type, v.u8("a measurement's value type"));
    GPUENV_TRY(value_size, v.u16("a measurement's value size"));
    b.value_type = type;
    GPUENV_TRY(value, v.take(value_size, "a measurement's value"));
    if (v.left() != 0)
      return bad("measurement block " + std::to_string(index) + " says " + std::to_string(size) + " bytes but its value needs " + std::to_string(3u + value_size), at, where);
    b.value = std::string(value);
    out.push_back(std::move(b));
  }
  if (out.size() != count)
    return bad("the response says " + std::to_string(count) + " measurement blocks and its record holds " + std::to_string(out.size()), base, where);
  return out;
}

Result<OpaqueData> parse_opaque(std::string_view bytes, std::size_t base, const std::string& where) {
  OpaqueData out;
  Cursor c(bytes, base, where);
  if (bytes.substr(0, k_versioned_magic.size()) == k_versioned_magic) {
    out.versioned = true;
    GPUENV_CHECK(c.take(k_versioned_magic.size(), "the opaque data's magic"));
    GPUENV_TRY(profile, c.u16("the opaque data's profile"));
    GPUENV_TRY(major, c.u8("the opaque data's major version"));
    GPUENV_TRY(minor, c.u8("the opaque data's minor version"));
    GPUENV_TRY(patch, c.u8("the opaque data's patch version"));
    GPUENV_CHECK(c.u8("the opaque data's padding"));
    out.profile = profile;
    out.major = major;
    out.minor = minor;
    out.patch = patch;
    if (profile != 0) return bad("the opaque data's profile is " + std::to_string(profile) + "; only profile 0 is defined", base + 6, where);
    if (major > 2) return bad("the opaque data's version " + std::to_string(major) + " is newer than this gpuenv knows (2)", base + 8, where);
  }
  while (c.left() > 0) {
    OpaqueField f;
    GPUENV_TRY(type, c.u16("an opaque field's type"));
    f.type = type;
    if (out.versioned) {
      GPUENV_TRY(value_type, c.u16("an opaque field's value type"));
      f.value_type = value_type;
    }
    GPUENV_TRY(size, c.u16("an opaque field's size"));
    GPUENV_TRY(value, c.take(size, "an opaque field's value"));
    f.value = std::string(value);
    out.fields.push_back(std::move(f));
  }
  return out;
}

std::string without_nul(std::string s) {
  const auto end = s.find('\0');
  if (end != std::string::npos) s.resize(end);
  return s;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/// Hex text (whitespace ignored, an optional leading 0x) as bytes; std::nullopt for anything else.
std::optional<std::string> from_hex_text(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  if (text.substr(i, 2) == "0x" || text.substr(i, 2) == "0X") i += 2;
  std::string out;
  int high = -1;
  for (; i < text.size(); ++i) {
    if (std::isspace(static_cast<unsigned char>(text[i]))) continue;
    const int v = hex_value(text[i]);
    if (v < 0) return std::nullopt;
    if (high < 0) {
      high = v;
    } else {
      out += static_cast<char>((high << 4) | v);
      high = -1;
    }
  }
  if (high >= 0 || out.empty()) return std::nullopt;
  return out;
}

}  // namespace

const OpaqueField* OpaqueData::find(std::uint16_t type) const {
  for (const auto& f : fields)
    if (f.type == type) return &f;
  return nullptr;
}

std::string Report::text_field(std::uint16_t type) const {
  const OpaqueField* f = opaque.find(type);
  return f ? without_nul(f->value) : std::string();
}

std::string Report::driver_version() const { return text_field(k_driver_version); }

std::string Report::vbios_version() const {
  const OpaqueField* f = opaque.find(k_vbios_version);
  if (f == nullptr) return {};
  if (f->value.size() != 8) return without_nul(f->value);  // an NVSwitch writes it as text
  // NVIDIA's tools: the bytes reversed as hex h (16 digits), then h[8:16] + h[6:8] in dotted pairs, upper case.
  std::string h;
  static const char* digits = "0123456789ABCDEF";
  for (std::size_t i = 8; i-- > 0;) {
    const auto b = static_cast<unsigned char>(f->value[i]);
    h += digits[b >> 4];
    h += digits[b & 15];
  }
  const std::string t = h.substr(8, 8) + h.substr(6, 2);
  std::string out;
  for (std::size_t i = 0; i < t.size(); i += 2) out += (out.empty() ? "" : ".") + t.substr(i, 2);
  return out;
}

std::optional<std::string> Report::fwid() const {
  const OpaqueField* f = opaque.find(k_fwid);
  if (f == nullptr) return std::nullopt;
  return f->value;
}

std::optional<std::uint8_t> Report::nvdec0_status() const {
  const OpaqueField* f = opaque.find(k_nvdec0_status);
  if (f == nullptr || f->value.size() != 1) return std::nullopt;
  return static_cast<std::uint8_t>(f->value[0]);
}

std::optional<unsigned> Report::opaque_version() const {
  if (opaque.versioned) return opaque.major;
  const OpaqueField* f = opaque.find(k_opaque_data_version);
  if (f == nullptr || f->value.size() != 2) return std::nullopt;
  return static_cast<unsigned>(static_cast<unsigned char>(f->value[0]) | (static_cast<unsigned char>(f->value[1]) << 8));
}

Result<Report> parse_report(std::string_view bytes, const std::string& where) {
  Report r;
  r.bytes = std::string(bytes);
  Cursor c(bytes, 0, where);
  // The request (37 bytes): what the caller asked, with the caller's nonce.
  GPUENV_TRY(rq_version, c.u8("the request's SPDM version"));
  GPUENV_TRY(rq_code, c.u8("the request's code"));
  GPUENV_TRY(rq_param1, c.u8("the request's param1"));
  GPUENV_TRY(rq_param2, c.u8("the request's param2"));
  GPUENV_TRY(nonce, c.take(k_nonce_size, "the request's nonce"));
  GPUENV_TRY(slot, c.u8("the request's slot"));
  r.request = {rq_version, rq_code, rq_param1, rq_param2, std::string(nonce), slot};
  if (rq_version != 0x11) return bad("the request's SPDM version is " + to_hex(std::string(1, static_cast<char>(rq_version))) + ", not 11 (SPDM 1.1)", 0, where);
  if (rq_code != 0xE0) return bad("the request is not GET_MEASUREMENTS (code " + to_hex(std::string(1, static_cast<char>(rq_code))) + ")", 1, where);
  // The response.
  GPUENV_TRY(version, c.u8("the response's SPDM version"));
  GPUENV_TRY(code, c.u8("the response's code"));
  GPUENV_TRY(param1, c.u8("the response's param1"));
  GPUENV_TRY(param2, c.u8("the response's param2"));
  r.response_version = version;
  r.response_code = code;
  r.response_param1 = param1;
  r.response_param2 = param2;
  if (version != 0x11) return bad("the response's SPDM version is " + to_hex(std::string(1, static_cast<char>(version))) + ", not 11 (SPDM 1.1)", k_request_size, where);
  if (code != 0x60) return bad("the response is not MEASUREMENTS (code " + to_hex(std::string(1, static_cast<char>(code))) + ")", k_request_size + 1, where);
  GPUENV_TRY(count, c.u8("the number of measurement blocks"));
  GPUENV_TRY(record_length, c.le(3, "the measurement record's length"));
  const std::size_t record_at = c.offset();
  GPUENV_TRY(record, c.take(record_length, "the measurement record"));
  GPUENV_TRY(blocks, parse_blocks(record, record_at, count, where));
  r.blocks = std::move(blocks);
  GPUENV_TRY(responder_nonce, c.take(k_nonce_size, "the responder's nonce"));
  r.responder_nonce = std::string(responder_nonce);
  GPUENV_TRY(opaque_length, c.u16("the opaque data's length"));
  const std::size_t opaque_at = c.offset();
  GPUENV_TRY(opaque, c.take(opaque_length, "the opaque data"));
  GPUENV_TRY(parsed, parse_opaque(opaque, opaque_at, where));
  r.opaque = std::move(parsed);
  r.signed_length = c.offset();
  if (rq_param1 & 0x01) {
    GPUENV_TRY(signature, c.take(k_signature_size, "the signature"));
    r.signature = std::string(signature);
  }
  if (c.left() != 0)
    return make_error(ErrorKind::spec, "attest.trailing",
                      std::to_string(c.left()) + " byte" + (c.left() == 1 ? "" : "s") + " after the signature (the report ends at byte " + std::to_string(c.offset()) + ")",
                      where, "the evidence was stored with bytes added; a verifier must not look for the signature elsewhere: collect the report again");
  return r;
}

Result<std::string> report_bytes(std::string_view file, const std::string& where) {
  if (!file.empty() && static_cast<unsigned char>(file[0]) == 0x11) return std::string(file);  // raw: SPDM 1.1's first byte
  if (auto decoded = from_hex_text(file)) return *decoded;
  return make_error(ErrorKind::spec, "attest.bad_report", "neither a raw attestation report nor its hex text", where,
                    "give the report as NVML returns it, or as hex text");
}

Result<Evidence> parse_evidence_json(std::string_view text, const std::string& where) {
  auto fail = [&](const std::string& what) {
    return make_error(ErrorKind::spec, "attest.bad_evidence", what, where,
                      "give the evidence JSON NVIDIA's tools write: {\"nonce\", \"arch\", \"evidence_list\": [{\"evidence\", \"certificate\"}]}");
  };
  if (text.size() > (std::size_t{16} << 20)) return fail("the evidence is larger than 16 MiB");
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || (!j.is_object() && !j.is_array())) return fail("the evidence is neither a JSON object nor a list");
  auto nonce_of = [&](const nlohmann::json& o, const std::string& at) -> Result<std::string> {
    const auto n = o.find("nonce");
    if (n == o.end() || !n->is_string()) return fail(at + "\"nonce\" is missing or not a string");
    auto raw = from_hex_text(n->get<std::string>());
    if (!raw || raw->size() != k_nonce_size) return fail(at + "\"nonce\" is not 32 bytes of hex");
    return *raw;
  };
  Evidence out;
  const nlohmann::json* list = &j;
  if (j.is_object()) {
    GPUENV_TRY(nonce, nonce_of(j, ""));
    out.nonce = std::move(nonce);
    if (const auto arch = j.find("arch"); arch != j.end() && arch->is_string()) out.arch = arch->get<std::string>();
    const auto l = j.find("evidence_list");
    if (l == j.end() || !l->is_array()) return fail("\"evidence_list\" is missing or not a list");
    list = &*l;
  }
  if (list->empty()) return fail("the evidence lists no GPU");
  for (std::size_t i = 0; i < list->size(); ++i) {
    const auto& e = (*list)[i];
    const std::string at = (j.is_object() ? "evidence_list[" : "[") + std::to_string(i) + "]";
    if (!e.is_object() || !e.contains("evidence") || !e["evidence"].is_string() || !e.contains("certificate") || !e["certificate"].is_string())
      return fail(at + " lacks \"evidence\" or \"certificate\" as strings");
    EvidenceItem item;
    if (e.contains("nonce")) {
      GPUENV_TRY(nonce, nonce_of(e, at + "."));
      item.nonce = std::move(nonce);
    } else if (!out.nonce.empty()) {
      item.nonce = out.nonce;
    } else {
      return fail(at + " has no \"nonce\"");
    }
    if (out.nonce.empty()) out.nonce = item.nonce;
    if (out.arch.empty() && e.contains("arch") && e["arch"].is_string()) out.arch = e["arch"].get<std::string>();
    auto report = base64_decode(e["evidence"].get<std::string>());
    if (!report) return fail(at + ".evidence is not base64");
    auto chain = base64_decode(e["certificate"].get<std::string>());
    if (!chain) return fail(at + ".certificate is not base64");
    item.report = std::move(*report);
    item.cert_chain = std::move(*chain);
    out.items.push_back(std::move(item));
  }
  return out;
}

std::string to_hex(std::string_view bytes) { return gpuenv::to_hex(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()); }

}  // namespace gpuenv::attest
