#pragma once
// Small text helpers shared by every layer (header only, no dependencies beyond the standard library).
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
