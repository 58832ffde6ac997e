#include "packages/wheels/pep440.hpp"

#include <algorithm>
#include <array>
#include <set>
#include <utility>

#include "base/text.hpp"

namespace gpuenv::packages {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alnum(char c) { return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_sep(char c) { return c == '-' || c == '_' || c == '.'; }
char to_lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

using text::lowered;

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// Python's int(digits) printed back: leading zeros dropped.
std::string canonical_number(std::string_view digits) {
  while (digits.size() > 1 && digits.front() == '0') digits.remove_prefix(1);
  return digits.empty() ? std::string("0") : std::string(digits);
}

std::strong_ordering compare_number(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return a.size() <=> b.size();
  const int c = a.compare(b);
  return c < 0 ? std::strong_ordering::less : c > 0 ? std::strong_ordering::greater : std::strong_ordering::equal;
}

std::strong_ordering compare_text(const std::string& a, const std::string& b) {
  const int c = a.compare(b);
  return c < 0 ? std::strong_ordering::less : c > 0 ? std::strong_ordering::greater : std::strong_ordering::equal;
}

bool starts_with_ci(std::string_view s, std::size_t pos, std::string_view word) {
  if (s.size() - std::min(pos, s.size()) < word.size()) return false;
  for (std::size_t i = 0; i < word.size(); ++i) {
    if (to_lower(s[pos + i]) != word[i]) return false;
  }
  return true;
}

std::size_t skip_digits(std::string_view s, std::size_t pos) {
  while (pos < s.size() && is_digit(s[pos])) ++pos;
  return pos;
}

// The pieces of one match of packaging's version grammar, as the regex groups would hold them.
struct Scan {
  std::string_view epoch;
  std::vector<std::string_view> release;
  bool has_pre = false;
  std::string_view pre_letter, pre_number;
  bool has_post = false;
  std::string_view post_letter, post_number;
  bool has_dev = false;
  std::string_view dev_number;
  std::string_view local;
  bool wildcard = false;
  std::size_t end = 0;
};

struct Grammar {
  bool allow_local = true;
  bool allow_wildcard = false;
  std::size_t min_release = 1;
};

// Matches the version grammar at `pos`, taking at each step the first alternative the regex would try. Every
// element after the release segment is optional and none needs a separator that an earlier greedy choice could
// have taken, so the greedy match is also the one the anchored regex finds whenever the anchored regex matches.
std::optional<Scan> scan_version(std::string_view s, std::size_t pos, const Grammar& g) {
  Scan out;
  std::size_t p = pos;
  if (p < s.size() && (s[p] == 'v' || s[p] == 'V')) ++p;
  {
    const std::size_t q = skip_digits(s, p);
    if (q > p && q < s.size() && s[q] == '!') {
      out.epoch = s.substr(p, q - p);
      p = q + 1;
    }
  }
  std::size_t q = skip_digits(s, p);
  if (q == p) return std::nullopt;
  out.release.push_back(s.substr(p, q - p));
  p = q;
  while (p + 1 < s.size() && s[p] == '.' && is_digit(s[p + 1])) {
    q = skip_digits(s, p + 1);
    out.release.push_back(s.substr(p + 1, q - p - 1));
    p = q;
  }
  if (out.release.size() < g.min_release) return std::nullopt;
  if (g.allow_wildcard && p + 1 < s.size() && s[p] == '.' && s[p + 1] == '*') {
    out.wildcard = true;
    out.end = p + 2;
    return out;
  }
  // Pre-release: longest spelling first (no shorter spelling could be followed by the rest of a longer one).
  {
    q = p;
    if (q < s.size() && is_sep(s[q])) ++q;
    static constexpr std::array<std::string_view, 8> k_pre = {"alpha", "beta", "preview", "pre", "a", "b", "c", "rc"};
    for (std::string_view word : k_pre) {
      if (!starts_with_ci(s, q, word)) continue;
      out.has_pre = true;
      out.pre_letter = s.substr(q, word.size());
      q += word.size();
      if (q < s.size() && is_sep(s[q])) ++q;
      const std::size_t e = skip_digits(s, q);
      out.pre_number = s.substr(q, e - q);
      p = e;
      break;
    }
  }
  // Post-release: the implicit "-N" form is tried first, as in the regex.
  if (p + 1 < s.size() && s[p] == '-' && is_digit(s[p + 1])) {
    q = skip_digits(s, p + 1);
    out.has_post = true;
    out.post_number = s.substr(p + 1, q - p - 1);
    p = q;
  } else {
    q = p;
    if (q < s.size() && is_sep(s[q])) ++q;
    static constexpr std::array<std::string_view, 3> k_post = {"post", "rev", "r"};
    for (std::string_view word : k_post) {
      if (!starts_with_ci(s, q, word)) continue;
      out.has_post = true;
      out.post_letter = s.substr(q, word.size());
      q += word.size();
      if (q < s.size() && is_sep(s[q])) ++q;
      const std::size_t e = skip_digits(s, q);
      out.post_number = s.substr(q, e - q);
      p = e;
      break;
    }
  }
  {
    q = p;
    if (q < s.size() && is_sep(s[q])) ++q;
    if (starts_with_ci(s, q, "dev")) {
      q += 3;
      if (q < s.size() && is_sep(s[q])) ++q;
      const std::size_t e = skip_digits(s, q);
      out.has_dev = true;
      out.dev_number = s.substr(q, e - q);
      p = e;
    }
  }
  if (g.allow_local && p + 1 < s.size() && s[p] == '+' && is_alnum(s[p + 1])) {
    q = p + 1;
    while (q < s.size() && is_alnum(s[q])) ++q;
    while (q + 1 < s.size() && is_sep(s[q]) && is_alnum(s[q + 1])) {
      ++q;
      while (q < s.size() && is_alnum(s[q])) ++q;
    }
    out.local = s.substr(p + 1, q - p - 1);
    p = q;
  }
  out.end = p;
  return out;
}

Error syntax_error(std::string_view text, std::string why) {
  return make_error(ErrorKind::spec, "pep440.syntax", "bad PEP 440 version '" + std::string(text) + "': " + why, {},
                    "write versions as PEP 440 does, e.g. 2.5.1, 1.0rc1, 1!2.0.post1.dev3+local.7");
}

// Specifier operators in the order packaging's regex tries them.
struct OpInfo {
  std::string_view text;
  SpecOp op;
};
constexpr std::array<OpInfo, 8> k_ops = {{{"~=", SpecOp::compatible},
                                          {"==", SpecOp::equal},
                                          {"!=", SpecOp::not_equal},
                                          {"<=", SpecOp::less_equal},
                                          {">=", SpecOp::greater_equal},
                                          {"<", SpecOp::less},
                                          {">", SpecOp::greater},
                                          {"===", SpecOp::arbitrary}}};

bool preceded_by(std::string_view s, std::size_t pos, std::string_view what) {
  return pos >= what.size() && s.substr(pos - what.size(), what.size()) == what;
}

struct ClauseMatch {
  SpecOp op = SpecOp::equal;
  std::size_t op_len = 0;
  std::size_t end = 0;
};

// One attempt of the version alternatives after an operator ending at `vs`, in regex order; returns the end.
std::optional<std::size_t> match_version_branch(std::string_view s, std::size_t vs, bool anchored) {
  auto finished = [&](std::size_t end) -> std::optional<std::size_t> {
    if (!anchored) return end;
    std::size_t e = end;
    while (e < s.size() && is_space(s[e])) ++e;
    if (e == s.size()) return end;
    return std::nullopt;
  };
  std::size_t p = vs;
  while (p < s.size() && is_space(s[p])) ++p;
  if (preceded_by(s, vs, "===")) {
    std::size_t e = p;
    while (e < s.size() && !is_space(s[e]) && s[e] != ';' && s[e] != ')') ++e;
    if (auto r = finished(e)) return r;
  }
  if (preceded_by(s, vs, "==") || preceded_by(s, vs, "!=")) {
    if (auto scan = scan_version(s, p, Grammar{true, true, 1})) {
      if (auto r = finished(scan->end)) return r;
    }
  }
  if (preceded_by(s, vs, "~=")) {
    if (auto scan = scan_version(s, p, Grammar{false, false, 2})) {
      if (auto r = finished(scan->end)) return r;
    }
  }
  if (!preceded_by(s, vs, "==") && !preceded_by(s, vs, "!=") && !preceded_by(s, vs, "~=")) {
    if (auto scan = scan_version(s, p, Grammar{false, false, 1})) {
      if (auto r = finished(scan->end)) return r;
    }
  }
  return std::nullopt;
}

std::optional<ClauseMatch> match_clause(std::string_view s, std::size_t pos, bool anchored) {
  for (const OpInfo& info : k_ops) {
    if (s.substr(pos, info.text.size()) != info.text) continue;
    if (auto end = match_version_branch(s, pos + info.text.size(), anchored)) {
      return ClauseMatch{info.op, info.text.size(), *end};
    }
  }
  return std::nullopt;
}

// packaging.utils.canonicalize_version on text: normalized when it parses, unchanged otherwise.
std::string canonicalize_text(std::string_view text, bool strip_trailing_zero) {
  auto parsed = Pep440Version::parse(text);
  if (!parsed.ok()) return std::string(text);
  return parsed->canonical_str(strip_trailing_zero);
}

std::vector<std::string> split_dots(std::string_view s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t dot = s.find('.', start);
    if (dot == std::string_view::npos) {
      out.emplace_back(s.substr(start));
      return out;
    }
    out.emplace_back(s.substr(start, dot - start));
    start = dot + 1;
  }
}

bool is_all_digits(std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), is_digit); }

// specifiers._version_split: dot-split, with "1rc2" items split into "1", "rc2".
std::vector<std::string> version_split(std::string_view version) {
  std::vector<std::string> out;
  for (std::string& item : split_dots(version)) {
    const std::size_t d = skip_digits(item, 0);
    bool split = false;
    if (d > 0 && d < item.size()) {
      std::size_t letter_end = d;
      if (item[d] == 'a' || item[d] == 'b' || item[d] == 'c') {
        letter_end = d + 1;
      } else if (item.compare(d, 2, "rc") == 0) {
        letter_end = d + 2;
      }
      split = letter_end > d && letter_end < item.size() && is_all_digits(std::string_view(item).substr(letter_end));
    }
    if (split) {
      out.push_back(item.substr(0, d));
      out.push_back(item.substr(d));
    } else {
      out.push_back(std::move(item));
    }
  }
  return out;
}

bool is_not_suffix(std::string_view segment) {
  for (std::string_view prefix : {"dev", "a", "b", "rc", "post"}) {
    if (segment.starts_with(prefix)) return false;
  }
  return true;
}

// specifiers._pad_version, left half: pads the leading numeric run of `left` with "0"s to the length of right's.
std::vector<std::string> pad_left(const std::vector<std::string>& left, const std::vector<std::string>& right) {
  auto numeric_run = [](const std::vector<std::string>& v) {
    std::size_t n = 0;
    while (n < v.size() && is_all_digits(v[n])) ++n;
    return n;
  };
  const std::size_t ln = numeric_run(left);
  const std::size_t rn = numeric_run(right);
  std::vector<std::string> out(left.begin(), left.begin() + static_cast<std::ptrdiff_t>(ln));
  for (std::size_t i = ln; i < rn; ++i) out.emplace_back("0");
  out.insert(out.end(), left.begin() + static_cast<std::ptrdiff_t>(ln), left.end());
  return out;
}

// Specifier._compare_equal for "prefix.*" given without its ".*": packaging's string algorithm, kept verbatim
// because its quirks (epochs glued to the first release part) decide real answers.
bool wildcard_equal(const Pep440Version& prospective, std::string_view spec_prefix) {
  const std::string normalized_prospective = prospective.public_version().canonical_str(true);
  const std::string normalized_spec = canonicalize_text(spec_prefix, false);
  const std::vector<std::string> split_spec = version_split(normalized_spec);
  const std::vector<std::string> split_prospective = version_split(normalized_prospective);
  std::vector<std::string> padded = pad_left(split_prospective, split_spec);
  if (padded.size() > split_spec.size()) padded.resize(split_spec.size());
  return padded == split_spec;
}

std::strong_ordering compare_release(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  // Trailing zeros do not count (1.0 == 1).
  std::size_t na = a.size();
  while (na > 0 && a[na - 1] == "0") --na;
  std::size_t nb = b.size();
  while (nb > 0 && b[nb - 1] == "0") --nb;
  for (std::size_t i = 0; i < na && i < nb; ++i) {
    if (auto c = compare_number(a[i], b[i]); c != 0) return c;
  }
  return na <=> nb;
}

// Rank of a pre key: dev-only releases sort before any pre-release, releases without one after.
int pre_rank(const Pep440Version& v) {
  if (!v.pre() && !v.post() && v.dev()) return 0;
  if (!v.pre()) return 2;
  return 1;
}

}  // namespace

Result<Pep440Version> Pep440Version::parse(std::string_view text) {
  const std::string_view s = trim(text);
  if (s.empty()) return syntax_error(text, "it is empty");
  const auto scan = scan_version(s, 0, Grammar{true, false, 1});
  if (!scan) return syntax_error(text, "it does not start with a release number such as 1.0");
  if (scan->end != s.size()) {
    return syntax_error(text, "unexpected '" + std::string(s.substr(scan->end)) + "' at column " +
                                  std::to_string(scan->end + 1));
  }
  Pep440Version v;
  v.m_epoch = scan->epoch.empty() ? std::string("0") : canonical_number(scan->epoch);
  v.m_release.clear();
  for (std::string_view part : scan->release) v.m_release.push_back(canonical_number(part));
  if (scan->has_pre) {
    const std::string letter = lowered(scan->pre_letter);
    PreRelease pre;
    pre.kind = (letter == "a" || letter == "alpha") ? PreKind::a
               : (letter == "b" || letter == "beta") ? PreKind::b
                                                     : PreKind::rc;
    pre.number = canonical_number(scan->pre_number);
    v.m_pre = pre;
  }
  if (scan->has_post) v.m_post = canonical_number(scan->post_number);
  if (scan->has_dev) v.m_dev = canonical_number(scan->dev_number);
  if (!scan->local.empty()) {
    std::size_t start = 0;
    const std::string_view local = scan->local;
    for (std::size_t i = 0; i <= local.size(); ++i) {
      if (i < local.size() && !is_sep(local[i])) continue;
      const std::string_view part = local.substr(start, i - start);
      if (is_all_digits(part)) {
        v.m_local.push_back(LocalPart{true, canonical_number(part)});
      } else {
        v.m_local.push_back(LocalPart{false, lowered(part)});
      }
      start = i + 1;
    }
  }
  return v;
}

std::string Pep440Version::canonical_str(bool strip_trailing_zero) const {
  std::string out;
  if (m_epoch != "0") out += m_epoch + "!";
  std::size_t n = m_release.size();
  if (strip_trailing_zero) {
    while (n > 1 && m_release[n - 1] == "0") --n;
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (i > 0) out += '.';
    out += m_release[i];
  }
  if (m_pre) {
    out += m_pre->kind == PreKind::a ? "a" : m_pre->kind == PreKind::b ? "b" : "rc";
    out += m_pre->number;
  }
  if (m_post) out += ".post" + *m_post;
  if (m_dev) out += ".dev" + *m_dev;
  if (!m_local.empty()) out += "+" + local();
  return out;
}

std::string Pep440Version::str() const { return canonical_str(false); }

std::string Pep440Version::public_str() const { return public_version().str(); }

std::string Pep440Version::base_str() const { return base_version().str(); }

std::string Pep440Version::local() const {
  std::string out;
  for (const LocalPart& part : m_local) {
    if (!out.empty()) out += '.';
    out += part.text;
  }
  return out;
}

Pep440Version Pep440Version::public_version() const {
  Pep440Version v = *this;
  v.m_local.clear();
  return v;
}

Pep440Version Pep440Version::base_version() const {
  Pep440Version v;
  v.m_epoch = m_epoch;
  v.m_release = m_release;
  return v;
}

std::strong_ordering operator<=>(const Pep440Version& a, const Pep440Version& b) {
  if (auto c = compare_number(a.m_epoch, b.m_epoch); c != 0) return c;
  if (auto c = compare_release(a.m_release, b.m_release); c != 0) return c;
  // Pre: -inf (dev-only) < (letter, n) < +inf (no pre).
  const int ra = pre_rank(a);
  const int rb = pre_rank(b);
  if (ra != rb) return ra <=> rb;
  if (ra == 1) {
    if (a.m_pre->kind != b.m_pre->kind) return a.m_pre->kind <=> b.m_pre->kind;
    if (auto c = compare_number(a.m_pre->number, b.m_pre->number); c != 0) return c;
  }
  // Post: none sorts first.
  if (a.m_post.has_value() != b.m_post.has_value()) return a.m_post.has_value() <=> b.m_post.has_value();
  if (a.m_post) {
    if (auto c = compare_number(*a.m_post, *b.m_post); c != 0) return c;
  }
  // Dev: none sorts last.
  if (a.m_dev.has_value() != b.m_dev.has_value()) return b.m_dev.has_value() <=> a.m_dev.has_value();
  if (a.m_dev) {
    if (auto c = compare_number(*a.m_dev, *b.m_dev); c != 0) return c;
  }
  // Local: none sorts first; text parts before numeric parts; then element by element, shorter first.
  for (std::size_t i = 0; i < a.m_local.size() && i < b.m_local.size(); ++i) {
    const LocalPart& x = a.m_local[i];
    const LocalPart& y = b.m_local[i];
    if (x.numeric != y.numeric) return x.numeric <=> y.numeric;
    auto c = x.numeric ? compare_number(x.text, y.text) : compare_text(x.text, y.text);
    if (c != 0) return c;
  }
  return a.m_local.size() <=> b.m_local.size();
}

std::size_t match_specifier_prefix(std::string_view source, std::size_t pos) {
  const auto m = match_clause(source, pos, false);
  return m ? m->end - pos : 0;
}

Result<Pep440Specifier> Pep440Specifier::parse(std::string_view text) {
  const std::string_view s = trim(text);
  const auto m = match_clause(s, 0, true);
  if (!m) {
    return make_error(ErrorKind::spec, "pep440.specifier_syntax", "bad version specifier '" + std::string(text) + "'",
                      {},
                      "write an operator and a version, e.g. >=1.0, ==1.2.*, ~=2.2, !=1.5; local versions "
                      "and .* only with == and !=, ~= needs at least two release numbers");
  }
  Pep440Specifier spec;
  spec.m_op = m->op;
  spec.m_version = std::string(trim(s.substr(m->op_len)));
  std::string_view version = spec.m_version;
  if ((spec.m_op == SpecOp::equal || spec.m_op == SpecOp::not_equal) && version.ends_with(".*")) {
    spec.m_wildcard = true;
    version.remove_suffix(2);
  }
  auto parsed = Pep440Version::parse(version);
  if (parsed.ok()) {
    spec.m_parsed = std::move(parsed).value();
  } else if (spec.m_op != SpecOp::arbitrary) {
    return make_error(ErrorKind::internal, "pep440.specifier_version",
                      "specifier '" + std::string(text) + "' matched the grammar but its version does not parse",
                      {}, "report this as a gpuenv bug");
  }
  return spec;
}

std::string_view Pep440Specifier::op_str() const {
  for (const OpInfo& info : k_ops) {
    if (info.op == m_op) return info.text;
  }
  return "==";
}

std::string Pep440Specifier::str() const { return std::string(op_str()) + m_version; }

bool Pep440Specifier::prereleases() const {
  switch (m_op) {
    case SpecOp::equal:
    case SpecOp::greater_equal:
    case SpecOp::less_equal:
    case SpecOp::compatible:
    case SpecOp::arbitrary:
      return m_parsed.has_value() && m_parsed->is_prerelease();
    default:
      return false;
  }
}

bool Pep440Specifier::contains(const Pep440Version& version, std::optional<bool> prereleases) const {
  const bool allow_pre = prereleases.value_or(this->prereleases());
  if (version.is_prerelease() && !allow_pre) return false;
  switch (m_op) {
    case SpecOp::compatible: {
      std::vector<std::string> parts = version_split(m_version);
      std::size_t keep = 0;
      while (keep < parts.size() && is_not_suffix(parts[keep])) ++keep;
      std::string prefix;
      for (std::size_t i = 0; i + 1 < keep; ++i) {
        if (i > 0) prefix += '.';
        prefix += parts[i];
      }
      return version.public_version() >= *m_parsed && wildcard_equal(version, prefix);
    }
    case SpecOp::equal:
    case SpecOp::not_equal: {
      bool equal = false;
      if (m_wildcard) {
        equal = wildcard_equal(version, std::string_view(m_version).substr(0, m_version.size() - 2));
      } else if (m_parsed->has_local()) {
        equal = version == *m_parsed;
      } else {
        equal = version.public_version() == *m_parsed;
      }
      return m_op == SpecOp::equal ? equal : !equal;
    }
    case SpecOp::less_equal: return version.public_version() <= *m_parsed;
    case SpecOp::greater_equal: return version.public_version() >= *m_parsed;
    case SpecOp::less: {
      if (!(version < *m_parsed)) return false;
      // <1.0 must not admit 1.0rc1 unless the boundary itself is a pre-release.
      if (!m_parsed->is_prerelease() && version.is_prerelease() &&
          version.base_version() == m_parsed->base_version()) {
        return false;
      }
      return true;
    }
    case SpecOp::greater: {
      if (!(version > *m_parsed)) return false;
      // >1.0 must not admit 1.0.post1 (unless the boundary is a post-release) nor 1.0+local.
      const bool same_base = version.base_version() == m_parsed->base_version();
      if (!m_parsed->is_postrelease() && version.is_postrelease() && same_base) return false;
      if (version.has_local() && same_base) return false;
      return true;
    }
    case SpecOp::arbitrary: return lowered(version.str()) == lowered(m_version);
  }
  return false;
}

Result<Pep440SpecifierSet> Pep440SpecifierSet::parse(std::string_view text) {
  Pep440SpecifierSet set;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size() && text[i] != ',') continue;
    const std::string_view piece = trim(text.substr(start, i - start));
    start = i + 1;
    if (piece.empty()) continue;
    auto spec = Pep440Specifier::parse(piece);
    if (!spec.ok()) {
      Error e = std::move(spec).error();
      e.while_("parsing version specifiers '" + std::string(text) + "'");
      return e;
    }
    set.m_specs.push_back(std::move(spec).value());
  }
  return set;
}

std::string Pep440SpecifierSet::str() const {
  std::set<std::pair<std::string, std::string>> seen;
  std::vector<std::string> parts;
  for (const Pep440Specifier& s : m_specs) {
    std::string canonical = canonicalize_text(s.version_text(), s.op() != SpecOp::compatible);
    if (!seen.emplace(std::string(s.op_str()), std::move(canonical)).second) continue;
    parts.push_back(s.str());
  }
  std::sort(parts.begin(), parts.end());
  std::string out;
  for (const std::string& p : parts) {
    if (!out.empty()) out += ',';
    out += p;
  }
  return out;
}

std::optional<bool> Pep440SpecifierSet::prereleases() const {
  if (m_specs.empty()) return std::nullopt;
  return std::any_of(m_specs.begin(), m_specs.end(), [](const Pep440Specifier& s) { return s.prereleases(); });
}

bool Pep440SpecifierSet::contains(const Pep440Version& version, std::optional<bool> prereleases) const {
  if (!prereleases) prereleases = this->prereleases();
  if (!prereleases.value_or(false) && version.is_prerelease()) return false;
  return std::all_of(m_specs.begin(), m_specs.end(),
                     [&](const Pep440Specifier& s) { return s.contains(version, prereleases); });
}

}  // namespace gpuenv::packages
