#pragma once
// Dotted numeric versions (CUDA 12.4.1, driver 550.54.15, torch 2.5.1) and constraints over them.
#include <array>
#include <compare>
#include <span>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"

namespace gpuenv::resolver {

/// A version made of 1 to 6 numeric components. Comparison pads with zeros (12.4 == 12.4.0), as PEP 440
/// release segments do; the original spelling is kept for printing ("535.104.05").
class Version {
 public:
  Version() = default;
  /// Parses "12", "12.4", "550.54.15". Fails on empty parts, signs, letters or more than 6 components.
  static Result<Version> parse(std::string_view text);
  /// Builds from components; text is rebuilt as "a.b.c".
  static Version of(std::vector<std::uint32_t> parts);

  [[nodiscard]] std::span<const std::uint32_t> parts() const { return {m_parts.data(), m_size}; }
  [[nodiscard]] const std::string& str() const { return m_text; }
  [[nodiscard]] bool empty() const { return m_size == 0; }
  /// Component i, or 0 past the end.
  [[nodiscard]] std::uint32_t part(std::size_t i) const { return i < m_size ? m_parts[i] : 0; }
  [[nodiscard]] std::uint32_t major() const { return part(0); }
  [[nodiscard]] std::uint32_t minor() const { return part(1); }
  /// True when this version's first components equal every component of `prefix` (12.4.1 has prefix 12.4).
  [[nodiscard]] bool has_prefix(const Version& prefix) const;
  /// The first n components ("12.4.1".truncated(2) == "12.4").
  [[nodiscard]] Version truncated(std::size_t n) const;

  friend std::strong_ordering operator<=>(const Version& a, const Version& b);
  friend bool operator==(const Version& a, const Version& b) { return (a <=> b) == 0; }

 private:
  std::array<std::uint32_t, 6> m_parts{};  // unused slots are 0, so comparisons need no padding logic
  std::size_t m_size = 0;
  std::string m_text;
};

/// One comparison inside a constraint.
struct Clause {
  enum class Op { eq, ne, ge, gt, le, lt, prefix, compatible };
  Op op = Op::eq;
  Version version;
};

/// A version constraint as users write them in specs and on the command line:
///   exact or prefix `12.4` / `2.5.1` / `9` (matches 12.4.x), wildcard `12.*`, ranges `>=12.1,<13`,
///   `==2.5.1`, `!=2.4.0`, `~=2.5` (PEP 440 compatible release), alternatives `12.4 || 12.6`, and `latest` / `*`.
class Constraint {
 public:
  Constraint() = default;  ///< matches everything (`latest`)
  /// Parses a constraint; the error names the offending part and its column within `text`.
  static Result<Constraint> parse(std::string_view text);

  [[nodiscard]] bool matches(const Version& v) const;
  [[nodiscard]] bool is_any() const { return m_alternatives.empty(); }
  /// True when no version can match (e.g. `>=13,<12`); checked on bounds, so it is exact for ranges.
  [[nodiscard]] bool is_empty() const;
  /// The smallest version the constraint allows, if it has a lower bound in every alternative.
  [[nodiscard]] std::optional<Version> lower_bound() const;
  [[nodiscard]] const std::string& str() const { return m_text; }

 private:
  std::vector<std::vector<Clause>> m_alternatives;  // OR of ANDs; empty = any
  std::string m_text = "latest";
};

}  // namespace gpuenv::resolver
