#pragma once
// Fields of untrusted JSON (manifests, indexes, statements, registry answers) read without throwing:
// nlohmann::json's value(KEY, DEFAULT) throws type_error when KEY holds another type than DEFAULT's, and operator[]
// on a value that is not an object throws too; a hostile document must give a clear error, never an internal one.
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace gpuenv {

/// The string at KEY of J; FALLBACK when J is not an object, has no KEY, or KEY holds something other than a string.
inline std::string string_field(const nlohmann::json& j, std::string_view key, std::string_view fallback = "") {
  if (!j.is_object()) return std::string(fallback);
  const auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return std::string(fallback);
  return it->get<std::string>();
}

/// The value at KEY of J when it is of TYPE (an object, an array); otherwise an empty one of TYPE.
inline nlohmann::json field_of_type(const nlohmann::json& j, std::string_view key, nlohmann::json::value_t type) {
  if (j.is_object())
    if (const auto it = j.find(key); it != j.end() && it->type() == type) return *it;
  return nlohmann::json(type);
}

}  // namespace gpuenv
