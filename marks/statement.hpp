#pragma once
// The validation mark's statement: an in-toto Statement v1 (`_type`, `subject`, `predicateType`, `predicate`,
// nothing else at top level, as cosign's protojson reader demands) whose subject is the image manifest's sha256
// and whose predicate is gpuenv's validation result (docs/mark.md has the schema, version 1).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/digest.hpp"
#include "base/error.hpp"

namespace gpuenv::marks {

inline constexpr std::string_view k_statement_type = "https://in-toto.io/Statement/v1";
/// gpuenv's predicate type, version 1: verifiers (cosign --type, Kyverno, policy-controller) match it exactly.
inline constexpr std::string_view k_predicate_type = "https://gpuenv.dev/attestation/validation/v1";
inline constexpr std::string_view k_report_media_type = "application/vnd.gpuenv.validation.v1+json";

/// One check of the validation, as the record keeps it.
struct MarkCheck {
  std::string id;       ///< "gemm.bf16"
  std::string status;   ///< the report's status word ("pass", "warn", "fail", "skip", ...)
  std::map<std::string, double> metrics;  ///< the key figures ("tflops": 712.4)
  bool operator==(const MarkCheck&) const = default;
};

/// What a mark says about an image.
struct MarkPredicate {
  bool passed = false;           ///< "result": "PASSED" | "FAILED"
  std::string level;             ///< quick | standard | long
  std::vector<MarkCheck> checks;
  std::string gpu_product;       ///< as the nvidia.com/gpu.product node label spells it ("NVIDIA-H200")
  std::string gpu_pci_device_id; ///< "0x233510de"
  int gpu_count = 0;
  std::string driver_version;    ///< "580.65.06"
  std::string cuda_driver_version;  ///< "13.0"
  std::string cc_mode;           ///< off | on | devtools
  std::string lock_sha256;       ///< hex
  std::string report_sha256;     ///< hex of the full gpuenv-validation-v1 report
  std::string verifier_version;  ///< "0.1.0"
  std::string backend;           ///< nvml+cuda | replay
  std::int64_t time_verified = 0;  ///< seconds since the epoch (RFC 3339 in the JSON)
  std::int64_t not_after = 0;
  bool operator==(const MarkPredicate&) const = default;
};

/// A statement read back.
struct MarkStatement {
  std::string subject_name;  ///< the image's name as marked ("registry.example/ml/torch")
  Digest subject;            ///< the image manifest's digest
  MarkPredicate predicate;
};

/// The statement's bytes (compact JSON, fixed key order): what the envelope signs.
std::string render_statement(const std::string& subject_name, const Digest& manifest, const MarkPredicate& predicate);

/// Reads a statement. Errors (ErrorKind::environment, `mark.bad_statement`, at WHERE): not JSON, another
/// _type or predicateType, fields outside the four at top level, no sha256 subject, a predicate field of the
/// wrong type or a time that is not RFC 3339 UTC.
Result<MarkStatement> parse_statement(std::string_view json_text, const std::string& where);


}  // namespace gpuenv::marks
