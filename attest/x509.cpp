#include "attest/x509.hpp"

#include "base/digest.hpp"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/pem.h>
#include <openssl/x509_vfy.h>

#include <ctime>

namespace gpuenv::attest::x509 {
namespace {

using BioPtr = std::unique_ptr<BIO, Free<BIO, BIO_free_all>>;
using MdCtxPtr = std::unique_ptr<EVP_MD_CTX, Free<EVP_MD_CTX, EVP_MD_CTX_free>>;
using SigPtr = std::unique_ptr<ECDSA_SIG, Free<ECDSA_SIG, ECDSA_SIG_free>>;
using StoreCtxPtr = std::unique_ptr<X509_STORE_CTX, Free<X509_STORE_CTX, X509_STORE_CTX_free>>;

}  // namespace

std::vector<X509Ptr> read_pem_chain(std::string_view pem) {
  std::vector<X509Ptr> out;
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) return out;
  while (X509* c = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) out.emplace_back(c);
  return out;
}

X509Ptr read_der(std::string_view der) {
  const auto* p = reinterpret_cast<const unsigned char*>(der.data());
  X509Ptr c(d2i_X509(nullptr, &p, static_cast<long>(der.size())));
  if (c && p != reinterpret_cast<const unsigned char*>(der.data()) + der.size()) return nullptr;  // bytes after it
  return c;
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

bool signature_verifies(EVP_PKEY* key, std::string_view signed_bytes, std::string_view raw) {
  if (raw.size() != 96 || !key) return false;
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

Claim chain_claim(std::string claim_name, const std::vector<X509Ptr>& certs, const ChainRule& rule) {
  Claim c{std::move(claim_name), ClaimStatus::fail, ""};
  const bool length_ok = rule.length ? certs.size() == rule.length : certs.size() >= 2 && certs.size() <= 8;
  if (!length_ok) {
    c.detail = "the chain has " + std::to_string(certs.size()) + " certificates; " +
               (rule.length ? "it must have " + std::to_string(rule.length) : std::string("it must have 2 to 8"));
    return c;
  }
  X509* root = certs.back().get();
  const std::string fingerprint = gpuenv::sha256_hex(der_of(root));
  if (fingerprint != rule.pinned_sha256) {
    c.detail = "the chain ends in " + subject_of(root) + " (sha256 " + fingerprint + "), not " + std::string(rule.root_name);
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
  c.detail = std::to_string(certs.size()) + " certificates to " + std::string(rule.root_name) + " (sha256 " + fingerprint.substr(0, 16) + "...)";
  return c;
}

Claim validity_claim(std::string claim_name, const std::vector<X509Ptr>& certs, std::int64_t now) {
  Claim c{std::move(claim_name), ClaimStatus::pass, "every certificate is within its validity times"};
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

}  // namespace gpuenv::attest::x509
