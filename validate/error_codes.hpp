#pragma once
// The catalog of validation error codes: stable snake_case strings a WARN or FAIL outcome carries, each with a
// one-line summary and a hint saying what to do next. The catalog is append-only: a code is never renamed or
// removed, because reports, dashboards and runbooks match on it (docs: docs/validate.md, "Error codes").
#include <string_view>
#include <vector>

namespace gpuenv::validate {

/// One catalog entry. All three strings are static and never empty.
struct ErrorCode {
  const char* code;     ///< "row_remap_pending"
  const char* summary;  ///< what the code means, one line
  const char* hint;     ///< what to do next (drain the node, reseat, update the driver, reboot, ...)
};

/// The entry for `code`, or null when the catalog has no such code.
const ErrorCode* find_error_code(std::string_view code);

/// Every code, in catalog order (grouped by category: run, software, health, kernels, throughput, image, data).
const std::vector<ErrorCode>& error_codes();

}  // namespace gpuenv::validate
