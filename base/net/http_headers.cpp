#include "base/net/http_headers.hpp"

#include <cctype>
#include <exception>

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
  try {
    return std::stol(std::string(value));
  } catch (const std::exception&) {
    return std::nullopt;  // an HTTP date (or garbage)
  }
}

}  // namespace gpuenv
