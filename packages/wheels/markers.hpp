#pragma once
// PEP 508 dependency specifiers ("name[extra] >=1.0 ; python_version >= '3.8'") and environment markers,
// parsed with the grammar of packaging's hand-written parser (packaging._parser/_tokenizer) and evaluated as
// packaging.markers.Marker.evaluate does.
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "packages/wheels/pep440.hpp"
#include "base/error.hpp"

namespace gpuenv::packages {

/// The values marker variables take on a target interpreter and platform (packaging's default_environment()
/// plus `extra`). The caller fills them for the image being built, not for the machine gpuenv runs on.
struct Environment {
  std::string python_version;                  ///< "3.11"
  std::string python_full_version;             ///< "3.11.4"
  std::string os_name;                         ///< "posix"
  std::string sys_platform;                    ///< "linux"
  std::string platform_machine;                ///< "x86_64"
  std::string platform_system;                 ///< "Linux"
  std::string platform_release;                ///< "6.5.0-1025-azure"
  std::string platform_version;                ///< "#26~22.04.1-Ubuntu SMP ..."
  std::string implementation_name;             ///< "cpython"
  std::string implementation_version;          ///< "3.11.4"
  std::string platform_python_implementation;  ///< "CPython"
  std::string extra;                           ///< the extra being resolved, "" for none
  /// When not empty, `extra` holds all of these at once: `extra == "x"` is true when x is one of them and
  /// `extra != "x"` when x is none of them (uv.lock's conflict markers, "extra-9-demo-proj-cpu"); `extra` itself is
  /// then not used.
  std::vector<std::string> active_extras;
  std::vector<std::string> extras;             ///< PEP 751's `extras` marker variable: a set, for `in` / `not in`
  std::vector<std::string> dependency_groups;  ///< PEP 751's `dependency_groups`: a set, for `in` / `not in`
};

/// One side of a marker comparison: an environment variable (normalized: `os.name` is `os_name`,
/// `python_implementation` is `platform_python_implementation`) or a quoted literal.
struct MarkerOperand {
  bool is_variable = false;
  std::string text;
};

/// A marker expression tree: a comparison, or a list of children joined by "and"/"or" (the top level and every
/// parenthesised group). "and" binds tighter than "or", as in packaging.
struct MarkerNode {
  bool is_list = false;
  MarkerOperand lhs;                ///< comparison only
  std::string op;                   ///< comparison only: ==, !=, <, <=, >, >=, ~=, ===, in, "not in"
  MarkerOperand rhs;                ///< comparison only
  std::vector<MarkerNode> children;  ///< list only
  std::vector<std::string> joins;   ///< list only: "and"/"or" between children[i] and children[i+1]
};

/// A parsed environment marker such as `python_version >= "3.8" and platform_system == "Linux"`.
class Marker {
 public:
  /// Parses a marker expression; fails with `pep508.syntax` naming the column and what was expected, on a
  /// comparison of two literals, on backslashes inside strings (PEP 508 has no escapes) and on trailing text.
  static Result<Marker> parse(std::string_view text);
  /// Builds a marker from a parsed tree (parse_requirement uses it); normalizes the first comparison's extra
  /// name as packaging does.
  explicit Marker(MarkerNode root);

  /// Evaluates against `env`. Comparisons use PEP 440 when `op + rhs` is a valid specifier and the left side a
  /// valid version (pre-releases allowed), string comparison otherwise; `extra` values are compared after PEP 503
  /// name normalization. The sets `extras` and `dependency_groups` (PEP 751) take only `"name" in extras` and
  /// `not in`, names normalized. Fails with `pep508.undefined_comparison` for ~= or === on non-versions and for
  /// any other comparison with a set.
  [[nodiscard]] Result<bool> evaluate(const Environment& env) const;
  /// Normalized text, as str(Marker(...)): single spaces, double-quoted literals, parentheses around groups of
  /// two or more comparisons.
  [[nodiscard]] std::string str() const;
  [[nodiscard]] const MarkerNode& root() const { return m_root; }

 private:
  MarkerNode m_root;
};

/// A PEP 508 dependency specifier.
struct Requirement {
  std::string name;                 ///< as written ("Foo.Bar"); compare with canonicalize_name()
  std::vector<std::string> extras;  ///< as written, in order
  std::string specifier_text;       ///< the clauses as written, e.g. ">=1.0,<2" ("" when none)
  Pep440SpecifierSet specifier;     ///< parsed specifier_text
  std::string url;                  ///< for `name @ url`, else ""
  std::optional<Marker> marker;     ///< the part after ';', if any
};

/// Parses `name[extra1,extra2] (>=1.0) ; marker` or `name @ url ; marker` with packaging's grammar; fails with
/// `pep508.syntax` (column and expectation in the message) or `pep508.url` (URL without scheme or host).
Result<Requirement> parse_requirement(std::string_view text);

/// The marker values of CPython PYTHON ("3.11": python_full_version "3.11.0") on Linux MACHINE ("x86_64"), as an
/// image's interpreter reports them (platform_release and platform_version left empty: an image has no kernel).
Environment cpython_linux_environment(std::string_view machine, std::string_view python);

/// The value of the marker variable `name` ("python_version", "os_name", ...) in `env`, or nullopt if unknown.
std::optional<std::string> marker_variable(const Environment& env, std::string_view name);

/// PEP 503 normalized project or extra name: runs of '-', '_', '.' become '-', letters lowercase ("Foo_Bar" is
/// "foo-bar").
std::string canonicalize_name(std::string_view name);

}  // namespace gpuenv::packages
