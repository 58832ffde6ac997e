#pragma once
// Confidential-computing attestation (docs/attestation.md):
// - `gpuenv attest verify`: evidence read from files, every device judged (attest::appraise_device);
// - `gpuenv attest`: evidence from this machine's GPUs (the GpuBackend port, NVML or a replay) for a fresh nonce,
//   judged the same way with NVML's own versions and CC settings as further claims, and with --set-ready the GPUs'
//   ready state set after every GPU passed (the one write gpuenv makes to a GPU);
// - the verifier the cc_attestation check of `validate` uses (attest_function).
// RIMs come from files, a directory or the RIM service the user configures (through gpuenv's fetcher and cache).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/services.hpp"
#include "attest/appraise.hpp"
#include "base/error.hpp"
#include "validate/backend.hpp"
#include "validate/check.hpp"

namespace gpuenv::app {

/// Where RIMs come from, which policy judges, and whether revocation is checked: shared by every attest path.
struct AttestOptions {
  std::string rim_dir;                    ///< RIMs as <id>.xml or <id>.json
  std::string rim_service;                ///< the RIM service's base URL ("" : GPUENV_RIM_SERVICE_URL, else none)
  bool offline = false;                   ///< the service answers from the cache only
  std::string policy_path;                ///< "" : the default policy
  bool ocsp = false;                      ///< check revocation by OCSP (the network)
  std::string ocsp_url;                   ///< the responder ("" : each certificate's own)
};

/// What AttestOptions open, kept alive while devices are judged.
class AttestSetup {
 public:
  /// Errors: `attest.usage` (--ocsp with --offline, --ocsp-url without --ocsp), the policy file's.
  static Result<std::unique_ptr<AttestSetup>> open(const AttestOptions& options, Services& services);
  virtual ~AttestSetup() = default;
  [[nodiscard]] virtual const attest::Policy& policy() const = 0;
  [[nodiscard]] virtual const attest::RevocationInputs& revocation() const = 0;
  /// The RIM stores in the order they are asked; null when none is configured.
  [[nodiscard]] virtual attest::RimStore* store() = 0;
  [[nodiscard]] virtual std::vector<std::string> rim_sources() const = 0;
};

struct AttestedDevice {
  attest::DeviceAppraisal appraisal;
  attest::Verdict verdict;
};

struct AttestResult {
  std::vector<AttestedDevice> devices;
  attest::Policy policy;
  std::int64_t at = 0;
  std::string nonce_source;               ///< "caller", "evidence file", "fresh" (gpuenv attest), "recorded" (a replay)
  std::vector<std::string> rim_sources;   ///< what was consulted, in order ("directory /srv/rims", "the RIM service URL")
  std::string backend;                    ///< gpuenv attest: "nvml+cuda" or "replay"
  bool ready_set = false;                 ///< gpuenv attest --set-ready: the ready state was set
  [[nodiscard]] bool pass() const;
};

struct AttestVerifyRequest {
  std::string evidence_path;              ///< NVIDIA's evidence JSON; or the three below
  std::string report_path, chain_path;    ///< a report (raw or hex) and its PEM chain
  std::string nonce_hex;                  ///< the caller's nonce (64 hex digits); with --evidence, overrides the file's
  std::string driver_rim, vbios_rim;      ///< RIM files that win over the stores (for one device)
  std::string at;                         ///< the time certificates are judged at: RFC 3339, a date, or "" for now
  AttestOptions options;
};

/// Errors: usage (`attest.usage`: neither or both of --evidence and --report, a missing --cert-chain or
/// --nonce, a bad nonce or time), the inputs' (`attest.bad_report`, `attest.bad_evidence`, `attest.bad_chain`,
/// `attest.bad_rim`, `policy.*`, `io.*`: exit 2).
Result<AttestResult> attest_verify(const AttestVerifyRequest& rq, Services& services);

struct AttestRequest {
  std::string backend;                    ///< "replay:FILE"; empty = GPUENV_BACKEND, else the real GPUs
  std::string gpus;                       ///< "0,1"; empty = all
  bool set_ready = false;                 ///< set the CC ready state after every GPU passed
  AttestOptions options;
};

/// `gpuenv attest`. Errors: `attest.no_cc` (environment: the driver reports CC off, or a GPU gives no evidence),
/// the backend's, those of AttestOptions; a failed verdict is a value (the ready state is then left alone).
Result<AttestResult> attest_gpus(const AttestRequest& rq, Services& services);

/// One GPU's live evidence judged: the device and RIM claims, plus NVML's driver and VBIOS versions against the
/// report's (driver_nvml, vbios_nvml), the CC environment (cc_environment: production) and mode (dev_tools: off).
Result<AttestedDevice> judge_live_evidence(const validate::CcEvidence& evidence, const std::string& nonce, const validate::DriverState& driver,
                                           AttestSetup& setup, std::int64_t now);

/// The verifier of validate's cc_attestation check over SETUP, judging at the services' clock (both must outlive it).
validate::AttestFunction attest_function(AttestSetup& setup, const Services& services);

/// The RIM service as a RimStore: GET BASE/v1/rim/<id> through FETCHER, the answer's sha256 checked.
std::unique_ptr<attest::RimStore> make_service_rim_store(Fetcher& fetcher, std::string base_url);

}  // namespace gpuenv::app
