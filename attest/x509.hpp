#pragma once
// OpenSSL pieces the attestation verifier shares between the device evidence and the RIMs: certificates read from
// PEM or DER, the raw r||s ECDSA P-384 signature, a chain checked to a root pinned by its SHA-256 fingerprint, and
// certificate validity as a claim of its own. Internal to attest/.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include "attest/verify.hpp"

namespace gpuenv::attest::x509 {

/// Frees an OpenSSL object with its own free function.
template <class T, void (*F)(T*)>
struct Free {
  void operator()(T* p) const { F(p); }
};
using X509Ptr = std::unique_ptr<X509, Free<X509, X509_free>>;
using StorePtr = std::unique_ptr<X509_STORE, Free<X509_STORE, X509_STORE_free>>;
/// A stack of certificates owned elsewhere: frees the stack, not them.
struct StackFree {
  void operator()(STACK_OF(X509) * s) const { sk_X509_free(s); }
};

/// Every PEM certificate in PEM, in order (the first unreadable block ends the list).
std::vector<X509Ptr> read_pem_chain(std::string_view pem);
/// One DER certificate; nullptr when the bytes are not exactly one.
X509Ptr read_der(std::string_view der);
std::string der_of(X509* certificate);
/// "CN=..., O=..." on one line.
std::string subject_of(X509* certificate);

/// Whether RAW (48-byte r then 48-byte s, big-endian) is an ECDSA signature by KEY over SIGNED with SHA-384.
bool signature_verifies(EVP_PKEY* key, std::string_view signed_bytes, std::string_view raw);

/// What a chain must be.
struct ChainRule {
  std::string_view pinned_sha256;  ///< SHA-256 of the root's DER bytes
  std::string_view root_name;      ///< "NVIDIA's device identity root"
  std::size_t length = 0;          ///< the exact number of certificates; 0: any from 2 to 8
};
/// CLAIM_NAME: CERTS (leaf first) end in the pinned root and verify from the leaf to it with X509_verify_cert,
/// without time (validity is validity_claim's).
Claim chain_claim(std::string claim_name, const std::vector<X509Ptr>& certs, const ChainRule& rule);
/// CLAIM_NAME: every certificate of CERTS is within its validity times at NOW.
Claim validity_claim(std::string claim_name, const std::vector<X509Ptr>& certs, std::int64_t now);

}  // namespace gpuenv::attest::x509
