#include "base/time.hpp"

#include <algorithm>
#include <ctime>

namespace gpuenv {

std::string format_rfc3339_utc(std::int64_t epoch) {
  // Every time gpuenv writes is bounded where it is made (durations at ten years); the clamp keeps a bug from ever
  // writing "1985481891-01-00".
  constexpr std::int64_t k_last = 253402300799;  // 9999-12-31T23:59:59Z
  const std::time_t t = static_cast<std::time_t>(std::clamp<std::int64_t>(epoch, 0, k_last));
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::optional<std::int64_t> parse_rfc3339_utc(std::string_view text) {
  if (text.size() != 20 || text[4] != '-' || text[7] != '-' || text[10] != 'T' || text[13] != ':' || text[16] != ':' || text[19] != 'Z') return std::nullopt;
  for (std::size_t i : {0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18})
    if (text[i] < '0' || text[i] > '9') return std::nullopt;
  auto num = [&](std::size_t at, std::size_t n) {
    int v = 0;
    for (std::size_t i = 0; i < n; ++i) v = v * 10 + (text[at + i] - '0');
    return v;
  };
  std::tm tm{};
  tm.tm_year = num(0, 4) - 1900;
  tm.tm_mon = num(5, 2) - 1;
  tm.tm_mday = num(8, 2);
  tm.tm_hour = num(11, 2);
  tm.tm_min = num(14, 2);
  tm.tm_sec = num(17, 2);
  if (tm.tm_mon > 11 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 60) return std::nullopt;
  const std::time_t t = timegm(&tm);
  if (format_rfc3339_utc(t) != text) return std::nullopt;  // 31 February and the like
  return static_cast<std::int64_t>(t);
}

}  // namespace gpuenv
