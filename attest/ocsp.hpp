#pragma once
// Revocation by OCSP (docs/attestation.md): for each certificate of a chain that NVIDIA's responder answers for
// (a device chain's intermediates, a RIM chain's signer and intermediates), a request with a nonce, sent through a
// port, and the answer verified with OpenSSL (signed by the issuer or a responder it delegated to, the nonce
// echoed, within its validity). Off unless asked for: without the network, revocation is "not checked", never a
// pass. "Could not check" (no answer, an error, an unknown certificate) stays apart from "revoked".
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "attest/verify.hpp"
#include "base/error.hpp"

namespace gpuenv {
class HttpClient;
}

namespace gpuenv::attest {

/// The port: POSTs a DER OCSP request to URL and returns the DER answer.
class OcspTransport {
 public:
  virtual ~OcspTransport() = default;
  virtual Result<std::string> post(const std::string& url, const std::string& request_der) = 0;
};
/// The real adapter: HTTP POST with `Content-Type: application/ocsp-request` through HTTP (not retried: a
/// request carries a fresh nonce).
std::unique_ptr<OcspTransport> make_http_ocsp_transport(HttpClient& http);

struct OcspOptions {
  std::string url;                      ///< the responder; "" : each certificate's own (its AIA OCSP URL)
  bool nonce = true;                    ///< send a nonce and require it back
  bool allow_certificate_hold = false;  ///< `revoked` with reason certificateHold counts as not revoked
};

/// CLAIM_NAME over CHAIN (PEM order, leaf first) from index FIRST to the one before the root: pass when every
/// certificate is `good`; fail when one is revoked (its subject, time and reason); not checked when an answer
/// could not be had or judged ("could not check revocation: ..."). NOW: the time answers must be valid at.
Claim check_revocation(std::string claim_name, const std::vector<std::string>& chain_der, std::size_t first, OcspTransport& transport,
                       const OcspOptions& options, std::int64_t now);

}  // namespace gpuenv::attest
