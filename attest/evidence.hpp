#pragma once
// NVIDIA GPU confidential-computing evidence, parsed (docs/attestation.md): the attestation report that
// nvmlDeviceGetConfComputeGpuAttestationReport returns, an SPDM 1.1 GET_MEASUREMENTS request (37 bytes) followed
// by the MEASUREMENTS response (measurement blocks, the responder's nonce, NVIDIA's opaque data, the signature),
// and the evidence JSON NVIDIA's tools write. Pure and strict: every length is checked against the bytes there
// are, and bytes after the signature are an error (a report with one stray byte must not verify at a shifted
// position). Nothing here verifies anything: it says what the bytes claim.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"

namespace gpuenv::attest {

/// The SPDM request: what the caller asked for.
struct SpdmRequest {
  std::uint8_t version = 0;      ///< 0x11 (SPDM 1.1)
  std::uint8_t code = 0;         ///< 0xE0 GET_MEASUREMENTS
  std::uint8_t param1 = 0;       ///< bit 0: signature requested
  std::uint8_t param2 = 0;       ///< 0xFF: all measurements
  std::string nonce;             ///< 32 bytes: the caller's nonce, what a verifier compares
  std::uint8_t slot = 0;
};

/// One DMTF measurement block.
struct MeasurementBlock {
  std::uint8_t index = 0;        ///< 1-based; RIM index i is block i+1
  std::uint8_t spec = 0;         ///< 1 = DMTF
  std::uint8_t value_type = 0;   ///< 0x01 immutable ROM hash ... 0x81.. raw bit streams
  std::string value;             ///< raw bytes (48 for the SHA-384 digests of GSP reports; other sizes occur)
};

/// NVIDIA's opaque data field ids (a GPU's; an NVSwitch uses some ids differently).
enum OpaqueType : std::uint16_t {
  k_driver_version = 3,
  k_gpu_info = 4,
  k_vbios_version = 6,
  k_nvdec0_status = 11,
  k_msrscnt = 12,
  k_chip_sku = 15,
  k_project = 17,
  k_project_sku = 18,
  k_fwid = 20,
  k_protected_pcie_status = 21,
  k_opaque_data_version = 34,
  k_chip_info = 35,
  k_feature_flag = 36,
};

struct OpaqueField {
  std::uint16_t type = 0;
  std::uint16_t value_type = 0;  ///< the versioned format's value-type word; 0 in the legacy format
  std::string value;
};

/// The opaque data: the legacy TLV list, or the versioned format ("NVDAOD" header) of drivers from CUDA 13.5.
struct OpaqueData {
  bool versioned = false;
  std::uint16_t profile = 0;
  std::uint8_t major = 0, minor = 0, patch = 0;  ///< versioned: the header's version
  std::vector<OpaqueField> fields;              ///< in order; unknown types kept by their id
  /// The first field of TYPE, or nullptr.
  [[nodiscard]] const OpaqueField* find(std::uint16_t type) const;
};

/// A parsed report.
struct Report {
  std::string bytes;               ///< the whole report as given
  SpdmRequest request;
  std::uint8_t response_version = 0, response_code = 0, response_param1 = 0, response_param2 = 0;
  std::vector<MeasurementBlock> blocks;
  std::string responder_nonce;     ///< 32 bytes, the GPU's own (not what a verifier compares)
  OpaqueData opaque;
  std::string signature;           ///< 96 bytes, ECDSA P-384 r||s; empty when none was requested
  std::size_t signed_length = 0;   ///< the bytes the signature covers: everything before it

  /// "550.90.07" (field 3, NUL-terminated ASCII); empty when absent.
  [[nodiscard]] std::string driver_version() const;
  /// "96.00.9F.00.01": a GPU's 8-byte field 6 formatted as NVIDIA's tools do, or an NVSwitch's ASCII; empty when absent.
  [[nodiscard]] std::string vbios_version() const;
  /// Field 20, 48 bytes; absent in reports of older drivers.
  [[nodiscard]] std::optional<std::string> fwid() const;
  /// Field 11: 0xAA NVDEC0 enabled, 0x55 disabled.
  [[nodiscard]] std::optional<std::uint8_t> nvdec0_status() const;
  /// The opaque data's version: the versioned header's major, else field 34 (u16), else std::nullopt.
  [[nodiscard]] std::optional<unsigned> opaque_version() const;
  /// An ASCII field (15, 17, 18, 35 ...) without its NUL padding; empty when absent.
  [[nodiscard]] std::string text_field(std::uint16_t type) const;
};

/// Parses report BYTES. Errors (ErrorKind::environment, `attest.bad_report`, WHERE and the byte offset in the
/// message): too short, another SPDM version or code, a block or opaque entry longer than what is left, a block
/// count or record length that disagrees with the blocks, an opaque profile other than 0, a versioned major above
/// 2; `attest.trailing` when bytes follow the signature (how many).
Result<Report> parse_report(std::string_view bytes, const std::string& where);

/// A report file's bytes: raw (as NVML returns them) or hex text (whitespace and a leading 0x allowed), as
/// NVIDIA's samples store them. Error `attest.bad_report` for text that is neither.
Result<std::string> report_bytes(std::string_view file, const std::string& where);

/// One GPU's (or switch's) entry of an evidence JSON.
struct EvidenceItem {
  std::string nonce;         ///< 32 bytes: the item's own, else the document's
  std::string report;        ///< decoded report bytes
  std::string cert_chain;    ///< decoded PEM text (the chain, leaf first)
};
/// The evidence JSON of NVIDIA's tools: {"nonce": hex, "arch": "HOPPER", "evidence_list": [{"evidence": base64
/// report, "certificate": base64 PEM chain}]}, or (the PPCIe verifier's) a list of such entries each with its own
/// "nonce" and "arch".
struct Evidence {
  std::string nonce;         ///< 32 bytes: the document's, or the first entry's
  std::string arch;
  std::vector<EvidenceItem> items;
};
/// Reads evidence JSON (at most 16 MiB). Error `attest.bad_evidence` naming the field.
Result<Evidence> parse_evidence_json(std::string_view text, const std::string& where);

/// Lower-case hex of BYTES.
std::string to_hex(std::string_view bytes);

}  // namespace gpuenv::attest
