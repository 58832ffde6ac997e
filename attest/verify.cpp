#include "attest/verify.hpp"

#include "base/digest.hpp"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include <ctime>
#include <memory>

namespace gpuenv::attest {
namespace {

template <class T, void (*F)(T*)>
struct Free {
  void operator()(T* p) const { F(p); }
};
using X509Ptr = std::unique_ptr<X509, Free<X509, X509_free>>;
using BioPtr = std::unique_ptr<BIO, Free<BIO, BIO_free_all>>;
using MdCtxPtr = std::unique_ptr<EVP_MD_CTX, Free<EVP_MD_CTX, EVP_MD_CTX_free>>;
using SigPtr = std::unique_ptr<ECDSA_SIG, Free<ECDSA_SIG, ECDSA_SIG_free>>;
using StorePtr = std::unique_ptr<X509_STORE, Free<X509_STORE, X509_STORE_free>>;
using StoreCtxPtr = std::unique_ptr<X509_STORE_CTX, Free<X509_STORE_CTX, X509_STORE_CTX_free>>;
using ObjPtr = std::unique_ptr<ASN1_OBJECT, Free<ASN1_OBJECT, ASN1_OBJECT_free>>;
struct StackFree {
  void operator()(STACK_OF(X509) * s) const { sk_X509_free(s); }  // the certificates are owned elsewhere
};

constexpr std::size_t k_fwid_size = 48;

std::vector<X509Ptr> read_pem_chain(std::string_view pem) {
  std::vector<X509Ptr> out;
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) return out;
  while (X509* c = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) out.emplace_back(c);
  return out;
}

std::string der_of(X509* c) {
  unsigned char* buf = nullptr;
  const int n = i2d_X509(c, &buf);
  if (n <= 0) return {};
  std::string out(reinterpret_cast<char*>(buf), static_cast<std::size_t>(n));
  OPENSSL_free(buf);
  return out;
}

std::string subject_of(X509* c) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  X509_NAME_print_ex(bio.get(), X509_get_subject_name(c), 0, XN_FLAG_ONELINE & ~ASN1_STRFLGS_ESC_MSB);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return n > 0 ? std::string(data, static_cast<std::size_t>(n)) : std::string();
}

/// The raw r||s signature (48 + 48 bytes) over the first SIGNED bytes, under KEY with SHA-384.
bool signature_verifies(EVP_PKEY* key, std::string_view signed_bytes, std::string_view raw) {
  if (raw.size() != 96) return false;
  SigPtr sig(ECDSA_SIG_new());
  BIGNUM* r = BN_bin2bn(reinterpret_cast<const unsigned char*>(raw.data()), 48, nullptr);
  BIGNUM* s = BN_bin2bn(reinterpret_cast<const unsigned char*>(raw.data()) + 48, 48, nullptr);
  if (!sig || !r || !s || ECDSA_SIG_set0(sig.get(), r, s) != 1) {
    BN_free(r);
    BN_free(s);
    return false;
  }
  unsigned char* der = nullptr;
  const int der_len = i2d_ECDSA_SIG(sig.get(), &der);
  if (der_len <= 0) return false;
  MdCtxPtr ctx(EVP_MD_CTX_new());
  const bool ok = ctx && EVP_DigestVerifyInit(ctx.get(), nullptr, EVP_sha384(), nullptr, key) == 1 &&
                  EVP_DigestVerify(ctx.get(), der, static_cast<std::size_t>(der_len), reinterpret_cast<const unsigned char*>(signed_bytes.data()),
                                   signed_bytes.size()) == 1;
  OPENSSL_free(der);
  return ok;
}

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

Claim chain_claim(const std::vector<X509Ptr>& certs) {
  Claim c{"chain", ClaimStatus::fail, ""};
  if (certs.size() != 5) {
    c.detail = "the chain has " + std::to_string(certs.size()) + " certificates; a GPU's has 5 (leaf, BROM, provisioner, identity, root)";
    return c;
  }
  X509* root = certs.back().get();
  const std::string fingerprint = gpuenv::sha256_hex(der_of(root));
  if (fingerprint != k_device_root_sha256) {
    c.detail = "the chain ends in " + subject_of(root) + " (sha256 " + fingerprint + "), not NVIDIA's device identity root";
    return c;
  }
  StorePtr store(X509_STORE_new());
  std::unique_ptr<STACK_OF(X509), StackFree> untrusted(sk_X509_new_null());
  for (std::size_t i = 1; i + 1 < certs.size(); ++i) sk_X509_push(untrusted.get(), certs[i].get());
  StoreCtxPtr ctx(X509_STORE_CTX_new());
  if (!store || !untrusted || !ctx || X509_STORE_add_cert(store.get(), root) != 1 ||
      X509_STORE_CTX_init(ctx.get(), store.get(), certs.front().get(), untrusted.get()) != 1) {
    c.detail = "OpenSSL could not set up the chain check";
    return c;
  }
  X509_VERIFY_PARAM_set_flags(X509_STORE_CTX_get0_param(ctx.get()), X509_V_FLAG_NO_CHECK_TIME);
  if (X509_verify_cert(ctx.get()) != 1) {
    const int err = X509_STORE_CTX_get_error(ctx.get());
    c.detail = std::string(X509_verify_cert_error_string(err)) + " at depth " + std::to_string(X509_STORE_CTX_get_error_depth(ctx.get()));
    return c;
  }
  c.status = ClaimStatus::pass;
  c.detail = "5 certificates to NVIDIA's device identity root (sha256 " + fingerprint.substr(0, 16) + "...)";
  return c;
}

Claim validity_claim(const std::vector<X509Ptr>& certs, std::int64_t now) {
  Claim c{"cert_validity", ClaimStatus::pass, "every certificate is within its validity times"};
  const auto t = static_cast<time_t>(now);
  for (std::size_t i = 0; i < certs.size(); ++i) {
    if (ASN1_TIME_cmp_time_t(X509_get0_notBefore(certs[i].get()), t) > 0) {
      c.status = ClaimStatus::fail;
      c.detail = "certificate " + std::to_string(i) + " (" + subject_of(certs[i].get()) + ") is not valid yet";
      return c;
    }
    if (ASN1_TIME_cmp_time_t(X509_get0_notAfter(certs[i].get()), t) < 0) {
      c.status = ClaimStatus::fail;
      c.detail = "certificate " + std::to_string(i) + " (" + subject_of(certs[i].get()) + ") has expired";
      return c;
    }
  }
  return c;
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

std::optional<std::string> leaf_fwid(std::string_view certificate_der) {
  const auto* p = reinterpret_cast<const unsigned char*>(certificate_der.data());
  X509Ptr c(d2i_X509(nullptr, &p, static_cast<long>(certificate_der.size())));
  if (!c) return std::nullopt;
  return fwid_of(c.get());
}

Result<DeviceClaims> verify_device(const Report& report, std::string_view cert_chain, const std::optional<std::string>& nonce, std::int64_t now) {
  const auto certs = read_pem_chain(cert_chain);
  if (certs.empty())
    return make_error(ErrorKind::environment, "attest.bad_chain", "the certificate chain holds no PEM certificate", "the evidence",
                      "give the chain nvmlDeviceGetConfComputeGpuCertificate returns (5 PEM certificates, leaf first)");
  DeviceClaims out;
  X509* leaf = certs.front().get();
  out.leaf_subject = subject_of(leaf);

  Claim sig{"signature", ClaimStatus::fail, ""};
  if (report.signature.empty()) {
    sig.detail = "the report carries no signature (the request did not ask for one)";
  } else if (signature_verifies(X509_get0_pubkey(leaf), std::string_view(report.bytes).substr(0, report.signed_length), report.signature)) {
    sig.status = ClaimStatus::pass;
    sig.detail = "ECDSA P-384 / SHA-384 over the report's first " + std::to_string(report.signed_length) + " bytes verifies under the leaf";
  } else {
    sig.detail = "the signature does not verify under the leaf certificate " + out.leaf_subject;
  }
  out.claims.push_back(std::move(sig));
  out.claims.push_back(chain_claim(certs));

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
  out.claims.push_back(validity_claim(certs, now));
  return out;
}

}  // namespace gpuenv::attest
