#include "base/duration.hpp"

#include <charconv>

namespace gpuenv {

Result<std::chrono::seconds> parse_duration(std::string_view text, const std::string& where) {
  auto bad = [&](const std::string& why) {
    return make_error(ErrorKind::usage, "config.bad_duration", "'" + std::string(text) + "' is not a duration" + why, where,
                      "write a whole number with a unit: 90s, 10m, 2h, 30d, 2w (seconds without one)");
  };
  long long n = 0;
  const char* end = text.data() + text.size();
  const auto [p, ec] = std::from_chars(text.data(), end, n);
  if (ec == std::errc::result_out_of_range) return bad(": it is longer than ten years");
  if (ec != std::errc() || p == text.data() || n < 0) return bad("");
  const std::string_view unit(p, static_cast<std::size_t>(end - p));
  long long scale = 0;
  if (unit.empty() || unit == "s") scale = 1;
  else if (unit == "m" || unit == "min") scale = 60;
  else if (unit == "h") scale = 3600;
  else if (unit == "d") scale = 86400;
  else if (unit == "w") scale = 7 * 86400;
  else return bad("");
  if (n > k_max_duration.count() / scale) return bad(": it is longer than ten years");
  return std::chrono::seconds(n * scale);
}

}  // namespace gpuenv
