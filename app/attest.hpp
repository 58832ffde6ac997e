#pragma once
// `gpuenv attest verify` (docs/attestation.md): confidential-computing evidence read from files, every device
// judged (attest::appraise_device) with RIMs from files, a directory or the RIM service the user configures
// (fetched through gpuenv's fetcher and cache), and the policy's verdict.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/services.hpp"
#include "attest/appraise.hpp"
#include "base/error.hpp"

namespace gpuenv::app {

struct AttestVerifyRequest {
  std::string evidence_path;              ///< NVIDIA's evidence JSON; or the three below
  std::string report_path, chain_path;    ///< a report (raw or hex) and its PEM chain
  std::string nonce_hex;                  ///< the caller's nonce (64 hex digits); with --evidence, overrides the file's
  std::string rim_dir;                    ///< RIMs as <id>.xml or <id>.json
  std::string driver_rim, vbios_rim;      ///< RIM files that win over the stores (for one device)
  std::string rim_service;                ///< the RIM service's base URL ("" : GPUENV_RIM_SERVICE_URL, else none)
  bool offline = false;                   ///< the service answers from the cache only
  std::string at;                         ///< the time certificates are judged at: RFC 3339, a date, or "" for now
  std::string policy_path;                ///< "" : the default policy
  bool ocsp = false;                      ///< check revocation by OCSP (the network)
  std::string ocsp_url;                   ///< the responder ("" : each certificate's own)
};

struct AttestedDevice {
  attest::DeviceAppraisal appraisal;
  attest::Verdict verdict;
};

struct AttestVerifyResult {
  std::vector<AttestedDevice> devices;
  attest::Policy policy;
  std::int64_t at = 0;
  std::string nonce_source;               ///< "caller" (--nonce) or "evidence file" (the file's own nonce)
  std::vector<std::string> rim_sources;   ///< what was consulted, in order ("directory /srv/rims", "service URL")
  [[nodiscard]] bool pass() const;
};

/// Errors: usage (`attest.usage`: neither or both of --evidence and --report, a missing --cert-chain or
/// --nonce, a bad nonce or time), the inputs' (`attest.bad_report`, `attest.bad_evidence`, `attest.bad_chain`,
/// `attest.bad_rim`, `policy.*`, `io.*`: exit 2).
Result<AttestVerifyResult> attest_verify(const AttestVerifyRequest& rq, Services& services);

/// The RIM service as a RimStore: GET BASE/v1/rim/<id> through FETCHER, the answer's sha256 checked.
std::unique_ptr<attest::RimStore> make_service_rim_store(Fetcher& fetcher, std::string base_url);

}  // namespace gpuenv::app
