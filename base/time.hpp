#pragma once
// Times as gpuenv writes and reads them: RFC 3339 in UTC with whole seconds ("2026-12-01T12:00:00Z"), the one
// spelling of image labels, SBOMs, marks, reports and status files. The current time is never read here: it comes
// from the caller's clock (app::now_seconds), so that tests can fix it.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpuenv {

/// "2024-01-02T03:04:05Z" for seconds since the epoch, clamped to 1970..9999 (four-digit years only, as RFC 3339
/// has them).
std::string format_rfc3339_utc(std::int64_t epoch);

/// Seconds since the epoch for exactly that form (std::nullopt for anything else, 31 February included): the
/// inverse of format_rfc3339_utc.
std::optional<std::int64_t> parse_rfc3339_utc(std::string_view text);

}  // namespace gpuenv
