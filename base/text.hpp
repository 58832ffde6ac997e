#pragma once
// Small text helpers shared by every layer (header only, no dependencies beyond the standard library).
#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuenv {

/// The items with `separator` between them: join({"a", "b"}, ", ") is "a, b"; no items give "".
inline std::string join(std::initializer_list<std::string_view> items, std::string_view separator) {
  std::string out;
  for (std::string_view item : items) {
    if (!out.empty()) out += separator;
    out += item;
  }
  return out;
}

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

/// The words of `s` between blanks (spaces and tabs), as views into `s`; no empty words.
inline std::vector<std::string_view> split_blanks(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    const std::size_t start = i;
    while (i < s.size() && s[i] != ' ' && s[i] != '\t') ++i;
    if (i > start) out.push_back(s.substr(start, i - start));
  }
  return out;
}

/// `s` without leading and trailing blanks and line breaks.
inline std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace gpuenv::text

namespace gpuenv {

/// Levenshtein distance between A and B, ignoring ASCII case when IGNORE_CASE; for "did you mean" hints.
inline std::size_t edit_distance(std::string_view a, std::string_view b, bool ignore_case = false) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const bool same = ignore_case ? text::lower(a[i - 1]) == text::lower(b[j - 1]) : a[i - 1] == b[j - 1];
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (same ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

/// The candidate closest to WORD by edit distance (ignoring case), if it is close enough to be a likely typo.
inline std::optional<std::string> did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  std::size_t best_d = std::max<std::size_t>(2, word.size() / 3) + 1;
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(word, c, /*ignore_case=*/true);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

}  // namespace gpuenv
