#include "base/net/http_headers.hpp"

#include <cctype>
#include <exception>
#include <limits>

#include "base/text.hpp"

namespace gpuenv {
namespace {

std::string_view trim_space(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

std::optional<HeaderLine> parse_header_line(std::string_view line) {
  if (is_status_line(line)) return std::nullopt;
  const auto colon = line.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  return HeaderLine{text::lowered(trim_space(line.substr(0, colon))), std::string(trim_space(line.substr(colon + 1)))};
}

std::optional<long> parse_retry_after(std::string_view value) {
  // RFC 9110 10.2.3: delay-seconds is 1*DIGIT. Anything else (an HTTP date, a sign, garbage) is normal backoff; a
  // number too long for a long is as good as forever and saturates.
  value = trim_space(value);
  if (value.empty() || value.size() > 64) return std::nullopt;
  long seconds = 0;
  for (const char c : value) {
    if (c < '0' || c > '9') return std::nullopt;
    seconds = seconds > (std::numeric_limits<long>::max() - 9) / 10 ? std::numeric_limits<long>::max() : seconds * 10 + (c - '0');
  }
  return seconds;
}

}  // namespace gpuenv
