#include "resolver/version.hpp"

#include <algorithm>
#include <charconv>

namespace gpuenv::resolver {
namespace {

constexpr std::size_t k_max_parts = 6;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

Error version_error(std::string_view text, std::string why) {
  return make_error(ErrorKind::spec, "version.syntax", "bad version '" + std::string(text) + "': " + why, {},
                    "write versions as dotted numbers, e.g. 12.4 or 550.54.15");
}

// Bounds of a clause set, for emptiness and lower_bound(): [lo, hi) or [lo, hi].
struct Bounds {
  std::optional<Version> lo;
  bool lo_inclusive = true;
  std::optional<Version> hi;
  bool hi_inclusive = false;
};

Version bump_last(const Version& v) {
  std::vector<std::uint32_t> parts(v.parts().begin(), v.parts().end());
  parts.back() += 1;
  return Version::of(parts);
}

void tighten_lo(Bounds& b, const Version& v, bool inclusive) {
  if (!b.lo || v > *b.lo || (v == *b.lo && !inclusive)) {
    b.lo = v;
    b.lo_inclusive = inclusive;
  }
}
void tighten_hi(Bounds& b, const Version& v, bool inclusive) {
  if (!b.hi || v < *b.hi || (v == *b.hi && !inclusive)) {
    b.hi = v;
    b.hi_inclusive = inclusive;
  }
}

Bounds bounds_of(const std::vector<Clause>& clauses) {
  Bounds b;
  for (const auto& c : clauses) {
    switch (c.op) {
      case Clause::Op::eq: tighten_lo(b, c.version, true); tighten_hi(b, c.version, true); break;
      case Clause::Op::ge: tighten_lo(b, c.version, true); break;
      case Clause::Op::gt: tighten_lo(b, c.version, false); break;
      case Clause::Op::le: tighten_hi(b, c.version, true); break;
      case Clause::Op::lt: tighten_hi(b, c.version, false); break;
      case Clause::Op::prefix: tighten_lo(b, c.version, true); tighten_hi(b, bump_last(c.version), false); break;
      case Clause::Op::compatible: {
        tighten_lo(b, c.version, true);
        tighten_hi(b, bump_last(c.version.truncated(c.version.parts().size() - 1)), false);
        break;
      }
      case Clause::Op::ne: break;
    }
  }
  return b;
}

bool bounds_empty(const Bounds& b) {
  if (!b.lo || !b.hi) return false;
  if (*b.lo > *b.hi) return true;
  if (*b.lo == *b.hi) return !(b.lo_inclusive && b.hi_inclusive);
  return false;
}

}  // namespace

Result<Version> Version::parse(std::string_view text) {
  Version v;
  if (text.empty()) return version_error(text, "it is empty");
  std::size_t pos = 0;
  while (true) {
    std::size_t end = text.find('.', pos);
    std::string_view part = text.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos);
    if (part.empty()) return version_error(text, "empty component at column " + std::to_string(pos + 1));
    if (part.size() > 9) return version_error(text, "component '" + std::string(part) + "' is too long");
    std::uint32_t n = 0;
    auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), n);
    if (ec != std::errc() || ptr != part.data() + part.size()) {
      return version_error(text, "'" + std::string(part) + "' is not a number");
    }
    if (v.m_size == k_max_parts) return version_error(text, "more than 6 components");
    v.m_parts[v.m_size++] = n;
    if (end == std::string_view::npos) break;
    pos = end + 1;
  }
  v.m_text = std::string(text);
  return v;
}

Version Version::of(std::vector<std::uint32_t> parts) {
  Version v;
  for (std::size_t i = 0; i < parts.size() && i < k_max_parts; ++i) {
    v.m_parts[v.m_size++] = parts[i];
    if (i) v.m_text += '.';
    v.m_text += std::to_string(parts[i]);
  }
  return v;
}

bool Version::has_prefix(const Version& prefix) const {
  // Unused slots are 0: 12.4 has prefix 12.4.0 (padding) but not 12.4.1.
  for (std::size_t i = 0; i < prefix.m_size; ++i)
    if (m_parts[i] != prefix.m_parts[i]) return false;
  return true;
}

Version Version::truncated(std::size_t n) const {
  std::vector<std::uint32_t> p(n, 0);
  for (std::size_t i = 0; i < n && i < m_size; ++i) p[i] = m_parts[i];
  return of(std::move(p));
}

std::strong_ordering operator<=>(const Version& a, const Version& b) { return a.m_parts <=> b.m_parts; }

Result<Constraint> Constraint::parse(std::string_view text_in) {
  const std::string_view text = trim(text_in);
  Constraint c;
  if (text.empty() || text == "latest" || text == "*" || text == "any") return c;
  c.m_text = std::string(text);
  auto fail = [&](std::size_t col, const std::string& why) -> Error {
    return make_error(ErrorKind::spec, "version.constraint_syntax",
                      "bad version constraint '" + std::string(text) + "' at column " + std::to_string(col + 1) + ": " + why,
                      {}, "use 12.4, 12.*, >=12.1,<13, ==2.5.1, ~=2.5 or latest");
  };
  std::size_t alt_start = 0;
  while (alt_start <= text.size()) {
    std::size_t alt_end = text.find("||", alt_start);
    std::string_view alt = text.substr(alt_start, alt_end == std::string_view::npos ? std::string_view::npos : alt_end - alt_start);
    std::vector<Clause> clauses;
    std::size_t clause_start = 0;
    while (clause_start <= alt.size()) {
      std::size_t clause_end = alt.find(',', clause_start);
      std::string_view raw = alt.substr(clause_start, clause_end == std::string_view::npos ? std::string_view::npos : clause_end - clause_start);
      const std::size_t col = alt_start + clause_start + (raw.size() - trim(raw).size() > 0 ? raw.find_first_not_of(" \t") : 0);
      std::string_view s = trim(raw);
      if (s.empty()) return fail(col, "empty clause");
      Clause cl;
      auto take = [&](std::string_view op, Clause::Op value) {
        if (s.substr(0, op.size()) == op) {
          cl.op = value;
          s = trim(s.substr(op.size()));
          return true;
        }
        return false;
      };
      bool had_op = take(">=", Clause::Op::ge) || take("<=", Clause::Op::le) || take("==", Clause::Op::eq) ||
                    take("!=", Clause::Op::ne) || take("~=", Clause::Op::compatible) || take(">", Clause::Op::gt) ||
                    take("<", Clause::Op::lt) || take("=", Clause::Op::eq);
      bool wildcard = false;
      if (s.size() >= 2 && s.substr(s.size() - 2) == ".*") {
        wildcard = true;
        s.remove_suffix(2);
      }
      if (s.empty()) return fail(col, "a version is missing");
      auto v = Version::parse(s);
      if (!v) return fail(col, v.error().message.substr(v.error().message.find(':') + 2));
      cl.version = std::move(*v);
      if (wildcard && had_op && cl.op == Clause::Op::ne) return fail(col, "'!=' with a wildcard is not supported; use a range");
      if (wildcard && had_op && cl.op != Clause::Op::eq) return fail(col, "'.*' only goes with ==");
      if (!had_op || wildcard) cl.op = Clause::Op::prefix;  // bare 12.4, 12.* and ==12.* all mean 12.4.x
      if (cl.op == Clause::Op::compatible && cl.version.parts().size() < 2)
        return fail(col, "'~=' needs at least two components (~=2.5)");
      clauses.push_back(std::move(cl));
      if (clause_end == std::string_view::npos) break;
      clause_start = clause_end + 1;
    }
    c.m_alternatives.push_back(std::move(clauses));
    if (alt_end == std::string_view::npos) break;
    alt_start = alt_end + 2;
  }
  return c;
}

bool Constraint::matches(const Version& v) const {
  if (m_alternatives.empty()) return true;
  for (const auto& alt : m_alternatives) {
    bool all = true;
    for (const auto& c : alt) {
      bool ok = false;
      switch (c.op) {
        case Clause::Op::eq: ok = v == c.version; break;
        case Clause::Op::ne: ok = v != c.version; break;
        case Clause::Op::ge: ok = v >= c.version; break;
        case Clause::Op::gt: ok = v > c.version; break;
        case Clause::Op::le: ok = v <= c.version; break;
        case Clause::Op::lt: ok = v < c.version; break;
        case Clause::Op::prefix: ok = v.has_prefix(c.version); break;
        case Clause::Op::compatible:
          ok = v >= c.version && v.has_prefix(c.version.truncated(c.version.parts().size() - 1));
          break;
      }
      if (!ok) {
        all = false;
        break;
      }
    }
    if (all) return true;
  }
  return false;
}

bool Constraint::is_empty() const {
  if (m_alternatives.empty()) return false;
  for (const auto& alt : m_alternatives)
    if (!bounds_empty(bounds_of(alt))) return false;
  return true;
}

std::optional<Version> Constraint::lower_bound() const {
  if (m_alternatives.empty()) return std::nullopt;
  std::optional<Version> lowest;
  for (const auto& alt : m_alternatives) {
    Bounds b = bounds_of(alt);
    if (!b.lo) return std::nullopt;
    if (!lowest || *b.lo < *lowest) lowest = b.lo;
  }
  return lowest;
}

}  // namespace gpuenv::resolver
