#pragma once
// NVIDIA's reference integrity manifests (RIMs; docs/attestation.md): the signed SWID XML documents that hold the
// golden measurements of a driver or a VBIOS. Read strictly with libxml2 (no DTD, no entities, no network), the
// enveloped XML signature checked with OpenSSL (C14N 1.1, ECDSA P-384 / SHA-384, SHA-384 digest) and its signer
// chain to NVIDIA's RIM root pinned by fingerprint; then every active golden measurement compared with a report.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attest/evidence.hpp"
#include "attest/verify.hpp"
#include "base/error.hpp"

namespace gpuenv::attest {

/// SHA-256 of the DER bytes of "NVIDIA CoRIM signing Root CA" (serial 45DAE3A00E5037BDDF875375ECB5E270, valid
/// 2023-03-16 to 2053-03-08), the root every RIM signer chain ends in. Source: NVIDIA/nvtrust
/// guest_tools/gpu_verifiers/local_gpu_verifier/src/verifier/certs/verifier_RIM_root.pem at 028173093d43 (the
/// same certificate is RIM_ROOT_CERT in NVIDIA/attestation-sdk); ../shared/research/cc_attestation_report.md
/// sections 0 and 3.4.
inline constexpr std::string_view k_rim_root_sha256 = "12977b5115acb0381179279fffeb5a8c4d264971ebb32298023a465fa41df5d1";

/// One golden measurement.
struct RimMeasurement {
  unsigned index = 0;                 ///< RIM index; the report's block index + 1 ... block i+1 holds index i
  bool active = false;
  std::string name;
  std::size_t size = 0;               ///< bytes each value has
  std::vector<std::string> values;    ///< raw bytes of Hash0..HashN-1; any one matches
};

/// A RIM's content.
struct Rim {
  std::string tag_id;
  std::string product;                ///< "GH100"
  std::string version;                ///< colloquialVersion: "595.71.05", "96.00.9F.00.04"
  std::string manufacturer_id;        ///< FirmwareManufacturerId ("5703")
  std::vector<RimMeasurement> measurements;
  std::string signer;                 ///< the signing certificate's subject
  std::vector<std::string> chain_der; ///< the signer chain as the signature carries it (DER, leaf first)
};

/// A RIM read and judged.
struct CheckedRim {
  Rim rim;
  /// "<prefix>.signature" (digest and signature), "<prefix>.chain" (to the pinned RIM root),
  /// "<prefix>.cert_validity" (the signer chain at NOW).
  std::vector<Claim> claims;
};

/// Reads XML (at most 4 MiB) and checks its signature, chain and validity at NOW; claim names start with PREFIX
/// ("driver_rim", "vbios_rim"). Error `attest.bad_rim` (ErrorKind::spec, WHERE, what is wrong) when it is not
/// a well-formed SWID RIM: not XML, a DTD, another root element, no Payload, a Resource with a bad index or
/// hash, no signature or several. A signature that does not verify is a failed claim, not an error.
Result<CheckedRim> check_rim(std::string_view xml, const std::string& where, const std::string& prefix, std::int64_t now);

/// A RIM service answer ({"id", "rim": base64 XML, "sha256": hex of the XML, ...}): the XML, after checking its
/// sha256 and that its id is ID. Error `attest.bad_rim` naming the field.
Result<std::string> rim_from_service_json(std::string_view json, const std::string& id, const std::string& where);

/// The kind of device a report comes from, read from the leaf certificate's subject.
enum class DeviceKind { hopper, blackwell, nvswitch, unknown };
DeviceKind device_kind_of(std::string_view leaf_subject);
/// The kind an evidence JSON's unsigned "arch" names (HOPPER, BLACKWELL, LS10 or NVSWITCH, any case); unknown for
/// anything else. Only ever a cross-check of device_kind_of: appraise_device refuses one that contradicts the leaf.
DeviceKind device_kind_of_arch(std::string_view arch);
std::string_view to_string(DeviceKind kind);

/// The RIM ids NVIDIA's RIM service files a report's manifests under: NV_GPU_DRIVER_GH100_<driver>,
/// NV_GPU_CC_DRIVER_<chip info or GB100>_<driver>, NV_GPU_VBIOS_<project>_<project sku>_<chip sku>_<vbios without
/// dots>, NV_SWITCH_BIOS_5612_0002_890_<bios without dots, lower case>. Empty when the report lacks a field they
/// need or the device has no such RIM (an NVSwitch has no driver RIM).
std::string driver_rim_id(const Report& report, DeviceKind kind);
std::string vbios_rim_id(const Report& report, DeviceKind kind);

/// Whether ID can be a RIM id (letters, digits, '_', '.', '-'; at most 128): what may become a file name or a URL.
bool is_rim_id(std::string_view id);

/// One golden measurement compared.
struct IndexResult {
  unsigned index = 0;
  std::string source;                 ///< "driver" or "vbios"
  ClaimStatus status = ClaimStatus::not_checked;
  std::string detail;
};
/// The comparison: the "measurements" claim and each active index.
struct MeasurementResult {
  Claim claim;
  std::vector<IndexResult> indices;
};
/// Compares every active measurement of DRIVER and VBIOS (either may be null: its indices are not compared and
/// the claim says so) with REPORT: RIM index i against block i+1, any listed value matching; index 35 is skipped
/// when NVDEC0 is disabled (0x55); the driver's and the VBIOS's active indices must not overlap.
MeasurementResult compare_measurements(const Report& report, const Rim* driver, const Rim* vbios);

/// Where RIMs come from (the port): a directory (offline) or NVIDIA's RIM service through gpuenv's fetcher.
class RimStore {
 public:
  virtual ~RimStore() = default;
  /// The XML of RIM ID. Error `attest.rim_not_found` (environment) when the store has none, other ids when it
  /// could not be read.
  virtual Result<std::string> get(const std::string& id) = 0;
  /// "directory /srv/rims", "https://rims.example/v1/rim/"
  [[nodiscard]] virtual std::string describe() const = 0;
};
/// DIR/<id>.xml, else DIR/<id>.json (a saved RIM service answer, sha256 checked), else DIR/<id>.swidtag.
std::unique_ptr<RimStore> make_directory_rim_store(std::string dir);

}  // namespace gpuenv::attest
