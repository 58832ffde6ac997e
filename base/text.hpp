#pragma once
// Small text helpers shared by every layer (header only, no dependencies beyond the standard library).
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace gpuenv {

/// The items with `separator` between them: join({"a", "b"}, ", ") is "a, b"; no items give "".
inline std::string join(const std::vector<std::string>& items, std::string_view separator) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += separator;
    out += items[i];
  }
  return out;
}

}  // namespace gpuenv

// ASCII helpers for the formats gpuenv reads (deb822, HTTP headers, wheel metadata).
namespace gpuenv::text {

inline bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }
inline char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

/// `s` in ASCII lower case.
inline std::string lowered(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = lower(c);
  return out;
}

/// Case-insensitive ASCII equality (field names in control files).
inline bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i])) return false;
  return true;
}

/// `s` without leading and trailing blanks and line breaks.
inline std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace gpuenv::text
