#pragma once
// `gpuenv validate --image I --mark` and `gpuenv build --validate --mark`: validate, then mark the image good when
// the validation passed (docs/mark.md). The canonical report bytes a mark's report digest names are made here,
// once, and handed to the renderer, so that what --json prints is what the mark names.
#include <optional>
#include <string>

#include "app/marks.hpp"
#include "app/services.hpp"
#include "app/validate.hpp"
#include "base/error.hpp"
#include "validate/report.hpp"

namespace gpuenv::app {

struct ValidateAndMarkRequest {
  ValidateRequest validate;
  bool mark = false;              ///< mark validate.image (or mark_image) good when the validation passed
  std::string mark_image;         ///< where the mark goes: "" for validate.image itself (build --push: the pushed image)
  std::string key_path;           ///< the signing key ("" for GPUENV_MARK_KEY)
  std::string valid_for = "30d";  ///< the mark's validity
  bool referrers = false;         ///< the mark also as an OCI 1.1 referrer
};

struct ValidatedAndMarked {
  validate::Report report;
  std::string report_bytes;             ///< validate::report_bytes(report): what --json prints, what a mark's digest names
  int exit_code = 0;                    ///< the report's (validate::exit_code), or the mark error's
  bool hung = false;                    ///< Validation::hung: the process must exit once the report is out
  std::optional<MarkResult> mark;       ///< when the image was marked
  std::optional<Error> mark_error;      ///< when a mark was asked and marking failed or was refused (`mark.not_passed`)
  std::optional<Error> record_error;    ///< Validation::record_error; its exit code when the validation passed
};

/// Validates, then marks when asked and the validation passed. Errors: `mark.no_image` (usage: a mark without an
/// image), and validate's (the validation could not run); a failed validation or a refused mark is a value.
Result<ValidatedAndMarked> validate_and_mark(const ValidateAndMarkRequest& request, Services& services);

}  // namespace gpuenv::app
