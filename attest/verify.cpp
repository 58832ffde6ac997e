#include "attest/verify.hpp"

#include "attest/x509.hpp"

#include <openssl/objects.h>

#include <memory>

namespace gpuenv::attest {
namespace {

using x509::X509Ptr;
using ObjPtr = std::unique_ptr<ASN1_OBJECT, x509::Free<ASN1_OBJECT, ASN1_OBJECT_free>>;

constexpr std::size_t k_fwid_size = 48;

/// One DER element: its tag and content, and what follows it.
struct Der {
  unsigned char tag = 0;
  std::string_view content, rest;
};
std::optional<Der> der_next(std::string_view in) {
  if (in.size() < 2) return std::nullopt;
  Der d;
  d.tag = static_cast<unsigned char>(in[0]);
  std::size_t len = static_cast<unsigned char>(in[1]);
  std::size_t at = 2;
  if (len & 0x80) {
    const std::size_t n = len & 0x7f;
    if (n == 0 || n > 4 || in.size() < 2 + n) return std::nullopt;
    len = 0;
    for (std::size_t i = 0; i < n; ++i) len = (len << 8) | static_cast<unsigned char>(in[2 + i]);
    at = 2 + n;
  }
  if (len > in.size() - at) return std::nullopt;
  d.content = in.substr(at, len);
  d.rest = in.substr(at + len);
  return d;
}

}  // namespace

std::optional<std::string> dice_tcb_info_fwid(std::string_view value) {
  const auto outer = der_next(value);
  if (!outer || outer->tag != 0x30) return std::nullopt;
  for (std::string_view fields = outer->content; !fields.empty();) {
    const auto field = der_next(fields);
    if (!field) return std::nullopt;
    fields = field->rest;
    if (field->tag != 0xA6) continue;
    const auto fwid = der_next(field->content);
    if (!fwid || fwid->tag != 0x30) return std::nullopt;
    const auto alg = der_next(fwid->content);
    if (!alg || alg->tag != 0x06) return std::nullopt;
    const auto digest = der_next(alg->rest);
    if (!digest || digest->tag != 0x04) return std::nullopt;
    return std::string(digest->content);
  }
  return std::nullopt;
}

namespace {

std::optional<std::string> extension_value(X509* c, const char* oid) {
  ObjPtr obj(OBJ_txt2obj(oid, 1));
  if (!obj) return std::nullopt;
  const int at = X509_get_ext_by_OBJ(c, obj.get(), -1);
  if (at < 0) return std::nullopt;
  const ASN1_OCTET_STRING* data = X509_EXTENSION_get_data(X509_get_ext(c, at));
  return std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(data)), static_cast<std::size_t>(ASN1_STRING_length(data)));
}

std::optional<std::string> fwid_of(X509* leaf) {
  if (auto tcb = extension_value(leaf, "2.23.133.5.4.1")) {
    if (tcb->size() < k_fwid_size) return std::nullopt;
    return tcb->substr(tcb->size() - k_fwid_size);  // as NVIDIA's verifiers read it: the last 48 bytes
  }
  if (auto dice = extension_value(leaf, "2.23.133.5.4.1.1")) return dice_tcb_info_fwid(*dice);
  return std::nullopt;
}

}  // namespace

std::string_view to_string(ClaimStatus status) {
  switch (status) {
    case ClaimStatus::pass: return "pass";
    case ClaimStatus::fail: return "fail";
    case ClaimStatus::not_checked: return "not_checked";
  }
  return "not_checked";
}

const Claim* DeviceClaims::find(std::string_view name) const {
  for (const auto& c : claims)
    if (c.name == name) return &c;
  return nullptr;
}

std::string_view common_name(std::string_view subject) {
  const auto at = subject.rfind("CN");
  if (at == std::string_view::npos) return subject;
  std::string_view cn = subject.substr(at + 2);
  while (!cn.empty() && (cn.front() == ' ' || cn.front() == '=')) cn.remove_prefix(1);
  return cn;
}

std::optional<std::string> leaf_fwid(std::string_view certificate_der) {
  X509Ptr c = x509::read_der(certificate_der);
  if (!c) return std::nullopt;
  return fwid_of(c.get());
}

Result<DeviceClaims> verify_device(const Report& report, std::string_view cert_chain, const std::optional<std::string>& nonce, std::int64_t now) {
  const auto certs = x509::read_pem_chain(cert_chain);
  if (certs.empty())
    return make_error(ErrorKind::spec, "attest.bad_chain", "the certificate chain holds no PEM certificate", "the evidence",
                      "give the chain nvmlDeviceGetConfComputeGpuCertificate returns (5 PEM certificates, leaf first)");
  DeviceClaims out;
  X509* leaf = certs.front().get();
  out.leaf_subject = x509::subject_of(leaf);

  Claim sig{"signature", ClaimStatus::fail, ""};
  if (report.signature.empty()) {
    sig.detail = "the report carries no signature (the request did not ask for one)";
  } else if (x509::signature_verifies(X509_get0_pubkey(leaf), std::string_view(report.bytes).substr(0, report.signed_length), report.signature)) {
    sig.status = ClaimStatus::pass;
    sig.detail = "ECDSA P-384 / SHA-384 over the report's first " + std::to_string(report.signed_length) + " bytes verifies under the leaf";
  } else {
    sig.detail = "the signature does not verify under the leaf certificate " + out.leaf_subject;
  }
  out.claims.push_back(std::move(sig));
  out.claims.push_back(x509::chain_claim("chain", certs, {k_device_root_sha256, "NVIDIA's device identity root", 5}));

  Claim fwid{"fwid", ClaimStatus::not_checked, ""};
  const auto reported = report.fwid();
  const auto certified = fwid_of(leaf);
  if (!reported) {
    fwid.detail = "the report has no FWID field (drivers before 2024 write none)";
  } else if (!certified) {
    fwid.status = ClaimStatus::fail;
    fwid.detail = "the leaf certificate carries no FWID (extension 2.23.133.5.4.1 or 2.23.133.5.4.1.1)";
  } else if (*reported == *certified) {
    fwid.status = ClaimStatus::pass;
    fwid.detail = "FWID " + to_hex(*reported).substr(0, 16) + "... equals the leaf's";
  } else {
    fwid.status = ClaimStatus::fail;
    fwid.detail = "the report's FWID " + to_hex(*reported).substr(0, 16) + "... is not the leaf's " + to_hex(*certified).substr(0, 16) + "...";
  }
  out.claims.push_back(std::move(fwid));

  Claim n{"nonce", ClaimStatus::not_checked, "no nonce given"};
  if (nonce) {
    n.status = *nonce == report.request.nonce ? ClaimStatus::pass : ClaimStatus::fail;
    n.detail = n.status == ClaimStatus::pass ? "the report answers this nonce"
                                              : "the report answers nonce " + to_hex(report.request.nonce) + ", not " + to_hex(*nonce) + " (a replayed or foreign report)";
  }
  out.claims.push_back(std::move(n));
  out.claims.push_back(x509::validity_claim("cert_validity", certs, now));
  return out;
}

}  // namespace gpuenv::attest
