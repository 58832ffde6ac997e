#include "packages/apt/debian_version.hpp"

#include <cstring>

namespace gpuenv::packages {
namespace {

constexpr std::uint64_t k_max_epoch = 2147483647;  // dpkg stores the epoch in an int

bool is_blank(char c) { return c == ' ' || c == '\t'; }
// ASCII-only classes, like dpkg's c_isdigit/c_isalpha: the locale must not change the order.
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

Error version_syntax_error(std::string_view text, std::string_view why) {
  return make_error(ErrorKind::spec, "debian_version.syntax",
                    "bad Debian version '" + std::string(text) + "': " + std::string(why), {},
                    "write Debian versions as [epoch:]upstream[-revision], e.g. 2.36-9+deb12u4 or 1:1.2.13");
}

// dpkg's order() weight of one character; 0 stands for "end of string" and for digits, which the
// caller never passes here while both sides are in a digit run.
int order(char c) {
  if (is_digit(c)) return 0;
  if (is_alpha(c)) return static_cast<unsigned char>(c);
  if (c == '~') return -1;
  // dpkg reads the byte as a plain char, which is signed on amd64: bytes >= 0x80 weigh less than '~'+256.
  if (c != '\0') return static_cast<signed char>(c) + 256;
  return 0;
}

// dpkg's verrevcmp() over string_views (the end of a view reads as '\0').
int verrevcmp(std::string_view a, std::string_view b) {
  std::size_t i = 0;
  std::size_t j = 0;
  auto at = [](std::string_view s, std::size_t k) { return k < s.size() ? s[k] : '\0'; };
  while (i < a.size() || j < b.size()) {
    int first_diff = 0;
    while ((i < a.size() && !is_digit(a[i])) || (j < b.size() && !is_digit(b[j]))) {
      const int ac = order(at(a, i));
      const int bc = order(at(b, j));
      if (ac != bc) return ac - bc;
      ++i;
      ++j;
    }
    while (i < a.size() && a[i] == '0') ++i;
    while (j < b.size() && b[j] == '0') ++j;
    while (i < a.size() && j < b.size() && is_digit(a[i]) && is_digit(b[j])) {
      if (first_diff == 0) first_diff = a[i] - b[j];
      ++i;
      ++j;
    }
    if (i < a.size() && is_digit(a[i])) return 1;
    if (j < b.size() && is_digit(b[j])) return -1;
    if (first_diff != 0) return first_diff;
  }
  return 0;
}

int sign(int x) { return (x > 0) - (x < 0); }

}  // namespace

Result<DebianVersion> DebianVersion::parse(std::string_view text) {
  std::string_view s = text;
  while (!s.empty() && is_blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_blank(s.back())) s.remove_suffix(1);
  if (s.empty()) return version_syntax_error(text, "version string is empty");
  for (char c : s)
    if (is_blank(c)) return version_syntax_error(text, "version string has embedded spaces");

  DebianVersion v;
  std::string_view rest = s;
  if (const std::size_t colon = s.find(':'); colon != std::string_view::npos) {
    // As strtol(): an optional sign, then decimal digits that must run up to the first colon.
    std::size_t k = 0;
    bool negative = false;
    if (k < s.size() && (s[k] == '+' || s[k] == '-')) negative = s[k++] == '-';
    const std::size_t digits_start = k;
    std::uint64_t epoch = 0;
    bool too_big = false;
    while (k < s.size() && is_digit(s[k])) {
      epoch = epoch * 10 + static_cast<std::uint64_t>(s[k] - '0');
      if (epoch > k_max_epoch) too_big = true;
      if (too_big) epoch = k_max_epoch + 1;  // keep it from wrapping
      ++k;
    }
    if (k == digits_start) return version_syntax_error(text, "epoch in version is empty");
    if (k != colon) return version_syntax_error(text, "epoch in version is not number");
    if (negative && epoch != 0) return version_syntax_error(text, "epoch in version is negative");
    if (too_big) return version_syntax_error(text, "epoch in version is too big");
    if (colon + 1 == s.size()) return version_syntax_error(text, "nothing after colon in version number");
    v.m_epoch = static_cast<std::uint32_t>(epoch);
    rest = s.substr(colon + 1);
  }
  std::string_view upstream = rest;
  if (const std::size_t hyphen = rest.rfind('-'); hyphen != std::string_view::npos) {
    if (hyphen + 1 == rest.size()) return version_syntax_error(text, "revision number is empty");
    v.m_revision = std::string(rest.substr(hyphen + 1));
    upstream = rest.substr(0, hyphen);
  }
  if (upstream.empty()) return version_syntax_error(text, "version number is empty");
  v.m_upstream = std::string(upstream);
  v.m_text = std::string(s);
  return v;
}

std::optional<std::string> DebianVersion::policy_warning() const {
  if (m_upstream.empty()) return std::nullopt;  // default-constructed
  if (!is_digit(m_upstream.front())) return "version number does not start with digit";
  for (char c : m_upstream)
    if (!is_digit(c) && !is_alpha(c) && std::strchr(".-+~:", c) == nullptr)
      return "invalid character '" + std::string(1, c) + "' in version number";
  for (char c : m_revision)
    if (!is_digit(c) && !is_alpha(c) && std::strchr(".+~", c) == nullptr)
      return "invalid character '" + std::string(1, c) + "' in revision number";
  return std::nullopt;
}

int compare_debian_versions(const DebianVersion& a, const DebianVersion& b) {
  if (a.epoch() != b.epoch()) return a.epoch() > b.epoch() ? 1 : -1;
  if (const int rc = verrevcmp(a.upstream(), b.upstream()); rc != 0) return sign(rc);
  return sign(verrevcmp(a.revision(), b.revision()));
}

std::weak_ordering operator<=>(const DebianVersion& a, const DebianVersion& b) {
  const int rc = compare_debian_versions(a, b);
  if (rc < 0) return std::weak_ordering::less;
  if (rc > 0) return std::weak_ordering::greater;
  return std::weak_ordering::equivalent;
}

bool operator==(const DebianVersion& a, const DebianVersion& b) { return compare_debian_versions(a, b) == 0; }

bool satisfies(const DebianVersion& v, std::string_view op, const DebianVersion& ref) {
  const int rc = compare_debian_versions(v, ref);
  if (op == "<<") return rc < 0;
  if (op == "<=" || op == "<") return rc <= 0;
  if (op == "=") return rc == 0;
  if (op == ">=" || op == ">") return rc >= 0;
  if (op == ">>") return rc > 0;
  return false;
}

}  // namespace gpuenv::packages
