#pragma once
// The device half of GPU attestation, with OpenSSL (docs/attestation.md): the report's signature under the leaf
// certificate, the certificate chain to NVIDIA's device identity root (pinned by its SHA-256 fingerprint; no
// certificate file is carried), the FWID binding between the signed report and the leaf, and the caller's nonce.
// Each is a claim: pass, fail, or not checked, with what was found. No network: revocation is another step.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attest/evidence.hpp"

namespace gpuenv::attest {

/// SHA-256 of the DER bytes of "NVIDIA Device Identity CA" (CN=NVIDIA Device Identity CA, O=NVIDIA, serial
/// 2D3670B1CA100411C1FEC0E82A065B54, valid 2021-11-05 to 9999-12-31), the root every GPU and NVSwitch device
/// chain ends in. Source: NVIDIA/nvtrust guest_tools/gpu_verifiers/local_gpu_verifier/src/verifier/certs/
/// verifier_device_root.pem at 028173093d43 (the same key is DEVICE_ROOT_CERT in NVIDIA/attestation-sdk
/// src/internal/certs.h); ../shared/research/cc_attestation_report.md section 2.2.
inline constexpr std::string_view k_device_root_sha256 = "102bf659d5419614c9d8e6aecebc80454eb26b1df6a769ac720b9a690b167b48";

enum class ClaimStatus { pass, fail, not_checked };
std::string_view to_string(ClaimStatus status);

/// One thing the verifier judged.
struct Claim {
  std::string name;     ///< "signature", "chain", "fwid", "nonce", "cert_validity"
  ClaimStatus status = ClaimStatus::not_checked;
  std::string detail;   ///< what was found ("FWID 209ce00c... equals the leaf's", "issuer not found at depth 2")
};

/// What the device evidence proves.
struct DeviceClaims {
  std::vector<Claim> claims;
  std::string leaf_subject;  ///< the leaf's subject ("CN=GH100 A01 GSP FMC LF, ...")
  [[nodiscard]] const Claim* find(std::string_view name) const;
};

/// Judges REPORT with CERT_CHAIN (PEM text, leaf first). NONCE: the 32 bytes the caller sent (std::nullopt: not
/// checked). NOW (seconds since the epoch) for the certificates' validity times, which are a claim of their own:
/// the chain itself is checked without time, as NVIDIA's SDK does. Error (`attest.bad_chain`, environment) only
/// when the PEM text holds no certificate at all; everything else is a failed claim.
Result<DeviceClaims> verify_device(const Report& report, std::string_view cert_chain, const std::optional<std::string>& nonce, std::int64_t now);

/// The common name in a subject as OpenSSL prints it ("..., CN = GH100 A01 GSP FMC LF" or "CN=..."); SUBJECT
/// itself when it names none.
std::string_view common_name(std::string_view subject);

/// The FWID a leaf certificate carries (DER bytes): Hopper and NVSwitch put it last in extension 2.23.133.5.4.1,
/// Blackwell in fwids[0] of the DICE TcbInfo extension 2.23.133.5.4.1.1; std::nullopt without either.
std::optional<std::string> leaf_fwid(std::string_view certificate_der);

/// fwids[0] of a DICE TcbInfo extension's value (DER: SEQUENCE { ..., [6] IMPLICIT SEQUENCE OF FWID, ... }, FWID =
/// SEQUENCE { hashAlg OID, digest OCTET STRING }); std::nullopt when it is not one. Bounded by the bytes given.
std::optional<std::string> dice_tcb_info_fwid(std::string_view value);

}  // namespace gpuenv::attest
