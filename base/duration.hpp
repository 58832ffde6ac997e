#pragma once
// Durations as people write them on a command line or in the environment: "90", "90s", "10m", "2h", "30d", "2w".
#include <chrono>
#include <string>
#include <string_view>

#include "base/error.hpp"

namespace gpuenv {

/// The longest duration gpuenv takes (ten years): a record valid for longer, or a network budget of more, is a
/// typing mistake, and times past it would leave the years an RFC 3339 date can hold.
inline constexpr std::chrono::seconds k_max_duration{10LL * 366 * 24 * 3600};

/// A whole number with an optional unit: s (the default), m or min, h, d, w; at most k_max_duration. Errors:
/// "config.bad_duration" (ErrorKind::usage) at WHERE.
Result<std::chrono::seconds> parse_duration(std::string_view text, const std::string& where);

}  // namespace gpuenv
