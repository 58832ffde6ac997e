#pragma once
// The whole judgement of one GPU's (or NVSwitch's) evidence (docs/attestation.md): the device claims, both RIMs
// (from files or a RimStore) with their own claims, the golden measurements, and revocation; then a policy that
// turns the claims into pass or fail. Pure but for the RimStore it is given.
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "attest/evidence.hpp"
#include "attest/ocsp.hpp"
#include "attest/rim.hpp"
#include "attest/verify.hpp"
#include "base/error.hpp"

namespace gpuenv::attest {

/// Where the RIMs of a device come from: files given by the user win; else the store (may be null: then the RIMs
/// are not checked, and the claims say so).
struct RimInputs {
  std::optional<std::string> driver_xml, vbios_xml;  ///< given RIM files' text
  std::string driver_where, vbios_where;             ///< their paths, for errors
  RimStore* store = nullptr;
};

/// Revocation: checked only with a transport (`--ocsp`); otherwise every revocation claim is not checked.
struct RevocationInputs {
  OcspTransport* transport = nullptr;
  OcspOptions options;
};

/// One device's evidence judged.
struct DeviceAppraisal {
  DeviceKind kind = DeviceKind::unknown;
  std::string leaf_subject;
  std::string driver_version, vbios_version;
  std::string driver_rim_id, vbios_rim_id;
  std::string nonce_hex;                  ///< what the report answers (request bytes 4..35)
  std::vector<Claim> claims;              ///< signature, chain, fwid, nonce, cert_validity, driver_rim.*, vbios_rim.*, measurements, revocation, ...
  std::vector<IndexResult> measurements;  ///< each active golden measurement
  [[nodiscard]] const Claim* find(std::string_view name) const;
};

/// Judges REPORT with its CHAIN. NONCE: what the caller sent (std::nullopt: the nonce claim fails, as a report
/// that answers no known nonce proves nothing fresh). KIND: from the evidence's "arch", else DeviceKind::unknown
/// to read it from the leaf. NOW for certificate validity. Errors only for input that cannot be judged at all:
/// a chain without a certificate, a given RIM file that is not a RIM (`attest.bad_rim`).
Result<DeviceAppraisal> appraise_device(const Report& report, std::string_view chain, const std::optional<std::string>& nonce, DeviceKind kind,
                                        RimInputs& rims, std::int64_t now, const RevocationInputs& revocation = {});

/// What a policy asks of one claim.
enum class Requirement { required, if_checked, ignored };
std::string_view to_string(Requirement r);

/// The relying party's rules: per claim (a name or a prefix before '.': "driver_rim" covers "driver_rim.chain"),
/// and the measurement indices whose mismatch is tolerated.
struct Policy {
  std::map<std::string, Requirement> claims;
  std::set<unsigned> allow_mismatch;
  bool allow_certificate_hold = false;  ///< OCSP `revoked` for reason certificateHold counts as not revoked
  std::string source = "default";  ///< "default" or the policy file
  /// The requirement of claim NAME: its own entry, else its prefix's, else required.
  [[nodiscard]] Requirement requirement(std::string_view name) const;
};
/// The default policy (docs/attestation.md): every claim required except fwid, revocation and the CC settings,
/// which must pass when they were checked.
Policy default_policy();
/// A policy file (YAML, at most 64 KiB): `version: 1`, `claims: {NAME: required|if_checked|ignored}` over the
/// defaults, `allow_mismatch: [INDEX...]`, `allow_certificate_hold: true|false`. Errors `policy.*` (ErrorKind::spec) at the offending line.
Result<Policy> parse_policy(std::string_view yaml, const std::string& path);

/// The verdict on one device.
struct Verdict {
  bool pass = false;
  std::vector<std::string> reasons;  ///< every claim that fails the policy: "measurements: VBIOS index 9 differs..."
};
Verdict judge(const DeviceAppraisal& device, const Policy& policy);

/// {"kind", "device", "driver", "vbios", "driver_rim_id", "vbios_rim_id", "nonce", "verdict", "reasons",
///  "claims": [{"name", "status", "detail", "requirement"}], "measurements": [{"index", "source", "status", "detail"}]}
nlohmann::json to_json(const DeviceAppraisal& device, const Verdict& verdict, const Policy& policy);

}  // namespace gpuenv::attest
