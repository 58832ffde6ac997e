#pragma once
// From a validation report (gpuenv-validation-v1 JSON, as `gpuenv validate --json` prints it) to the predicate of
// a mark, and the rules of when a report may be turned into one. Pure: the caller reads the bytes and the clock.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/digest.hpp"
#include "base/error.hpp"
#include "marks/statement.hpp"

namespace gpuenv::marks {

/// What a report says, as a mark needs it.
struct ReportFacts {
  MarkPredicate predicate;   ///< every field but verifier_version and not_after (time_verified: the report's started_at)
  int exit_code = 0;         ///< the report's exit_code: 0 passed (warnings and measured figures allowed)
  std::string status;        ///< the report's status word ("pass", "warn", "fail", "could_not_run", ...)
  std::string image;         ///< the image it validated, as given; empty when none
  std::optional<Digest> image_digest;  ///< that image's manifest digest
};

/// Reads a report. report_sha256 is the sha256 of BYTES as given. Errors (ErrorKind::usage, `mark.bad_report`, at
/// WHERE): not JSON, another schema, a missing or mistyped field, GPUs of more than one model (mark them one
/// model at a time with --gpus), a started_at that is not RFC 3339 UTC.
Result<ReportFacts> read_report(std::string_view bytes, const std::string& where);

/// How marking may go.
struct MarkRules {
  bool allow_replay = false;          ///< a report of the replay backend may be marked (the record says so)
  std::int64_t valid_for_s = 30 * 86400;  ///< notAfter = timeVerified + this
  std::string verifier_version;       ///< gpuenv's version
};

/// The predicate of a mark of IMAGE from FACTS, or why not (ErrorKind::usage, at WHERE): `mark.not_passed` (the
/// report's exit code is not 0), `mark.replay` (made by the replay backend, without allow_replay), `mark.no_image`
/// (the report validated no image), `mark.other_image` (it validated another digest).
Result<MarkPredicate> predicate_for(const ReportFacts& facts, const Digest& image, const MarkRules& rules, const std::string& where);

}  // namespace gpuenv::marks
