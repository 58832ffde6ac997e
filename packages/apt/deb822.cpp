#include "packages/apt/deb822.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <tuple>

#include "base/text.hpp"

namespace gpuenv::packages {
namespace {

using text::iequals;
using text::is_space;
using text::lower;
using text::trim;

std::string at(std::string_view origin, std::uint32_t line) {
  return std::string(origin) + ":" + std::to_string(line);
}

Error syntax_error(std::string_view origin, std::uint32_t line, std::string message) {
  return make_error(ErrorKind::environment, "deb822.syntax", std::move(message), at(origin, line),
                    "the file is not in deb822 format (Name: value lines, continuation lines starting with a "
                    "space, stanzas separated by blank lines); fix or remove it");
}

std::string quoted_line(const char* begin, const char* end) {
  constexpr std::size_t k_max_shown = 60;
  std::string s(begin, std::min<std::size_t>(static_cast<std::size_t>(end - begin), k_max_shown));
  if (static_cast<std::size_t>(end - begin) > k_max_shown) s += "...";
  return "'" + s + "'";
}

// A yes/no field of a Release file, read as apt's StringToBool reads it; anything else is "no".
bool release_flag(std::string_view value) {
  value = trim(value);
  for (std::string_view yes : {"yes", "true", "with", "on", "enable", "1"})
    if (iequals(value, yes)) return true;
  return false;
}

}  // namespace

// Builds stanzas; a class only so that it may fill Stanza's private members.
class Deb822Parser {
 public:
  Deb822Parser(std::string_view text, std::string_view origin) : m_text(text), m_origin(origin) {}

  Result<std::vector<Stanza>> run() {
    const char* p = m_text.data();
    const char* const end = p + m_text.size();
    if (m_text.substr(0, 3) == "\xEF\xBB\xBF") p += 3;  // a UTF-8 byte order mark some editors add
    std::uint32_t line_no = 0;
    while (p < end) {
      ++line_no;
      const void* found = std::memchr(p, '\n', static_cast<std::size_t>(end - p));
      const char* const le = found ? static_cast<const char*>(found) : end;
      const char* const next = found ? le + 1 : end;
      const char* first = p;  // first non-blank character of the line
      while (first < le && is_space(*first)) ++first;
      if (first == le) {
        finish_stanza();
      } else if (*p == '#') {
        if (m_open != k_none) m_comment_since_open = true;
      } else if (*p == ' ' || *p == '\t') {
        if (m_open == k_none) return syntax_error(m_origin, line_no, "continuation line " + quoted_line(p, le) + " has no field to continue");
        const char* te = le;
        while (te > first && is_space(te[-1])) --te;
        continue_field(p, first, te);
      } else {
        if (auto st = start_field(p, le, line_no); !st) return std::move(st).error();
      }
      p = next;
    }
    finish_stanza();
    return std::move(m_out);
  }

 private:
  static constexpr std::size_t k_none = static_cast<std::size_t>(-1);

  Status start_field(const char* p, const char* le, std::uint32_t line_no) {
    const void* colon_found = std::memchr(p, ':', static_cast<std::size_t>(le - p));
    if (colon_found == nullptr)
      return syntax_error(m_origin, line_no, "line " + quoted_line(p, le) + " is neither 'Name: value', a continuation nor a comment");
    const char* colon = static_cast<const char*>(colon_found);
    const std::string_view name(p, static_cast<std::size_t>(colon - p));
    if (name.empty()) return syntax_error(m_origin, line_no, "field without a name in " + quoted_line(p, le));
    for (char c : name) {
      const auto u = static_cast<unsigned char>(c);
      if (u <= 32 || u >= 127)
        return syntax_error(m_origin, line_no, "field name '" + std::string(name) + "' contains a space or a control or non-ASCII character");
    }
    if (name.front() == '-') return syntax_error(m_origin, line_no, "field name '" + std::string(name) + "' starts with '-'");
    const char* vb = colon + 1;
    while (vb < le && is_space(*vb)) ++vb;
    const char* ve = le;
    while (ve > vb && is_space(ve[-1])) --ve;

    if (m_cur.m_fields.empty()) {
      m_cur.m_line = line_no;
      m_cur.m_fields.reserve(m_reserve);
    }
    for (const Field& f : m_cur.m_fields) {
      if (iequals(f.name, name)) {
        return make_error(ErrorKind::environment, "deb822.duplicate_field",
                          "field '" + std::string(name) + "' appears twice in the stanza starting at line " +
                              std::to_string(m_cur.m_line) + " (first at line " + std::to_string(f.line) + ")",
                          at(m_origin, line_no), "a field may appear once per stanza; remove one of them");
      }
    }
    m_cur.m_fields.push_back(Field{name, std::string_view(vb, static_cast<std::size_t>(ve - vb)), line_no});
    m_open = m_cur.m_fields.size() - 1;
    m_comment_since_open = false;
    m_joined.reset();
    return ok_status();
  }

  // p: line start, first: first non-blank, te: end of the line without trailing blanks.
  void continue_field(const char* p, const char* first, const char* te) {
    Field& f = m_cur.m_fields[m_open];
    if (!m_joined && !m_comment_since_open) {
      // Contiguous in the input: widen the view.
      const char* vb = f.value.empty() ? first : f.value.data();
      f.value = std::string_view(vb, static_cast<std::size_t>(te - vb));
      return;
    }
    if (!m_joined) {
      m_joined = std::make_shared<std::string>(f.value);
      m_cur.m_owned.push_back(m_joined);
    }
    if (m_joined->empty()) {
      m_joined->assign(first, te);
    } else {
      m_joined->push_back('\n');
      m_joined->append(p, te);
    }
    f.value = *m_joined;
  }

  void finish_stanza() {
    m_open = k_none;
    m_comment_since_open = false;
    m_joined.reset();
    if (m_cur.m_fields.empty()) return;
    m_reserve = m_cur.m_fields.size();
    m_out.push_back(std::move(m_cur));
    m_cur = Stanza{};
  }

  std::string_view m_text;
  std::string_view m_origin;
  std::vector<Stanza> m_out;
  Stanza m_cur;
  std::size_t m_open = k_none;  // index of the field continuation lines extend
  bool m_comment_since_open = false;
  std::shared_ptr<std::string> m_joined;  // the open field's value once it had to be copied
  std::size_t m_reserve = 8;
};

const Field* Stanza::field(std::string_view name) const {
  for (const Field& f : m_fields)
    if (iequals(f.name, name)) return &f;
  return nullptr;
}

std::optional<std::string_view> Stanza::find(std::string_view name) const {
  if (const Field* f = field(name)) return f->value;
  return std::nullopt;
}

std::string_view Stanza::get(std::string_view name) const {
  const Field* f = field(name);
  return f ? f->value : std::string_view{};
}

Result<std::vector<Stanza>> parse_deb822(std::string_view text, std::string_view origin) {
  return Deb822Parser(text, origin).run();
}

std::vector<std::string_view> value_lines(std::string_view value) {
  std::vector<std::string_view> out;
  while (!value.empty()) {
    const std::size_t nl = value.find('\n');
    const std::string_view line = trim(value.substr(0, nl));
    if (!line.empty()) out.push_back(line);
    if (nl == std::string_view::npos) break;
    value.remove_prefix(nl + 1);
  }
  return out;
}

std::vector<std::string_view> value_words(std::string_view value) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < value.size()) {
    while (i < value.size() && is_space(value[i])) ++i;
    const std::size_t start = i;
    while (i < value.size() && !is_space(value[i])) ++i;
    if (i > start) out.push_back(value.substr(start, i - start));
  }
  return out;
}

Result<std::string> clearsigned_body(std::string_view text, std::string_view origin) {
  constexpr std::string_view k_begin = "-----BEGIN PGP SIGNED MESSAGE-----";
  constexpr std::string_view k_signature = "-----BEGIN PGP SIGNATURE-----";
  constexpr std::string_view k_end = "-----END PGP SIGNATURE-----";
  auto fail = [&](std::uint32_t line, const std::string& why) -> Error {
    return make_error(ErrorKind::environment, "release.bad_clearsign", "malformed clear-signed message: " + why,
                      at(origin, line), "the InRelease file is damaged or truncated; fetch it again");
  };
  std::string_view rest = text;
  std::uint32_t line_no = 0;
  auto next_line = [&]() -> std::optional<std::string_view> {
    if (rest.empty()) return std::nullopt;
    const std::size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    ++line_no;
    return line;
  };
  auto first = next_line();
  if (!first || trim(*first) != k_begin) return std::string(text);
  // Armor headers ("Hash: SHA512") up to the first empty line.
  while (true) {
    auto line = next_line();
    if (!line) return fail(line_no, "no empty line after the armor headers");
    if (trim(*line).empty()) break;
  }
  std::string body;
  body.reserve(rest.size());
  while (true) {
    auto line = next_line();
    if (!line) return fail(line_no, "no '" + std::string(k_signature) + "' line");
    if (*line == k_signature) break;
    if (line->substr(0, 2) == "- ") line->remove_prefix(2);  // dash-escaping (RFC 4880, 7.1)
    body.append(*line);
    body.push_back('\n');
  }
  bool ended = false;
  while (auto line = next_line())
    if (*line == k_end) {
      ended = true;
      break;
    }
  if (!ended) return fail(line_no, "no '" + std::string(k_end) + "' line");
  return body;
}

const ReleaseEntry* ReleaseFile::find(std::string_view path) const {
  for (const ReleaseEntry& e : sha256)
    if (e.path == path) return &e;
  return nullptr;
}

std::optional<std::int64_t> parse_release_date(std::string_view text) {
  std::vector<std::string_view> w = value_words(text);
  if (!w.empty() && w.front().back() == ',') w.erase(w.begin());  // weekday, not checked
  if (w.size() != 5) return std::nullopt;
  auto number = [](std::string_view s, std::size_t min_digits, std::size_t max_digits) -> std::optional<int> {
    if (s.size() < min_digits || s.size() > max_digits) return std::nullopt;
    int n = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
    return n;
  };
  constexpr std::array<std::string_view, 12> k_months = {"jan", "feb", "mar", "apr", "may", "jun",
                                                         "jul", "aug", "sep", "oct", "nov", "dec"};
  const auto day = number(w[0], 1, 2);
  int month = 0;
  for (std::size_t i = 0; i < k_months.size(); ++i)
    if (iequals(w[1], k_months[i])) month = static_cast<int>(i) + 1;
  const auto year = number(w[2], 4, 4);
  if (!day || month == 0 || !year || *day < 1 || *day > 31) return std::nullopt;
  // HH:MM[:SS]
  const std::string_view t = w[3];
  if (t.size() != 5 && t.size() != 8) return std::nullopt;
  if (t[2] != ':' || (t.size() == 8 && t[5] != ':')) return std::nullopt;
  const auto hh = number(t.substr(0, 2), 2, 2);
  const auto mm = number(t.substr(3, 2), 2, 2);
  const auto ss = t.size() == 8 ? number(t.substr(6, 2), 2, 2) : std::optional<int>(0);
  if (!hh || !mm || !ss || *hh > 23 || *mm > 59 || *ss > 60) return std::nullopt;
  // Zone.
  const std::string_view z = w[4];
  int offset = 0;
  if (iequals(z, "UTC") || iequals(z, "GMT") || z == "Z") {
    offset = 0;
  } else if (z.size() == 5 && (z[0] == '+' || z[0] == '-')) {
    const auto oh = number(z.substr(1, 2), 2, 2);
    const auto om = number(z.substr(3, 2), 2, 2);
    if (!oh || !om || *om > 59) return std::nullopt;
    offset = (*oh * 3600 + *om * 60) * (z[0] == '-' ? -1 : 1);
  } else {
    return std::nullopt;
  }
  // Days since 1970-01-01 of a civil date (the usual era-based algorithm).
  const int y = *year - (month <= 2 ? 1 : 0);
  const int era = y / 400;
  const int yoe = y - era * 400;
  const int mp = (month + 9) % 12;
  const int doy = (153 * mp + 2) / 5 + *day - 1;
  const int doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  const std::int64_t days = static_cast<std::int64_t>(era) * 146097 + doe - 719468;
  return days * 86400 + *hh * 3600 + *mm * 60 + *ss - offset;
}

Result<ReleaseFile> parse_release(std::string_view text, std::string_view origin) {
  auto body = clearsigned_body(text, origin);
  if (!body) return std::move(body).error();
  auto stanzas = parse_deb822(*body, origin);
  if (!stanzas) return std::move(stanzas).error().while_("reading the Release file " + std::string(origin));
  auto fail = [&](std::string id, std::uint32_t line, std::string message) -> Error {
    return make_error(ErrorKind::environment, std::move(id), std::move(message), at(origin, line),
                      "the Release file is damaged or not from an apt repository; check the source's URI and suite");
  };
  if (stanzas->size() != 1)
    return fail("release.syntax", stanzas->empty() ? 1 : (*stanzas)[1].line(),
                "a Release file holds one stanza, this one holds " + std::to_string(stanzas->size()));
  const Stanza& s = stanzas->front();
  ReleaseFile r;
  r.origin = std::string(s.get("Origin"));
  r.label = std::string(s.get("Label"));
  r.suite = std::string(s.get("Suite"));
  r.codename = std::string(s.get("Codename"));
  r.version = std::string(s.get("Version"));
  r.date = std::string(s.get("Date"));
  r.valid_until = std::string(s.get("Valid-Until"));
  for (auto [name, text_out, unix_out] :
       {std::tuple{"Date", &r.date, &r.date_unix}, std::tuple{"Valid-Until", &r.valid_until, &r.valid_until_unix}}) {
    if (text_out->empty()) continue;
    *unix_out = parse_release_date(*text_out);
    if (!*unix_out)
      return fail("release.bad_date", s.field(name)->line,
                  std::string(name) + " '" + *text_out + "' is not a date like 'Sat, 09 Nov 2024 10:05:58 UTC'");
  }
  for (std::string_view a : value_words(s.get("Architectures"))) r.architectures.emplace_back(a);
  for (std::string_view c : value_words(s.get("Components"))) r.components.emplace_back(c);
  r.acquire_by_hash = iequals(trim(s.get("Acquire-By-Hash")), "yes");
  r.not_automatic = release_flag(s.get("NotAutomatic"));
  r.but_automatic_upgrades = release_flag(s.get("ButAutomaticUpgrades"));

  const Field* sums = s.field("SHA256");
  if (sums == nullptr || trim(sums->value).empty())
    return make_error(ErrorKind::environment, "release.missing_sha256", "the Release file has no SHA256 list",
                      at(origin, s.line()),
                      "gpuenv verifies index files by SHA-256 only; use a repository whose Release file lists SHA256 sums");
  // Line of each entry: the value is a view into `body` here (Release files have no comments to join around).
  std::uint32_t line = sums->line;
  const char* const body_begin = body->data();
  if (sums->value.data() >= body_begin && sums->value.data() <= body_begin + body->size())
    line += static_cast<std::uint32_t>(std::count(sums->name.data(), sums->value.data(), '\n'));
  std::string_view rest = sums->value;
  for (; !rest.empty(); ++line) {
    const std::size_t nl = rest.find('\n');
    const std::string_view entry = trim(rest.substr(0, nl));
    rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
    if (entry.empty()) continue;
    const auto w = value_words(entry);
    if (w.size() != 3)
      return fail("release.bad_entry", line, "SHA256 entry '" + std::string(entry) + "' is not 'hash size path'");
    if (w[0].size() != 64)
      return fail("release.bad_entry", line, "SHA256 entry '" + std::string(entry) + "' has a hash of " +
                                                 std::to_string(w[0].size()) + " characters instead of 64");
    ReleaseEntry e;
    std::string hex;
    for (char c : w[0]) hex.push_back(lower(c));
    auto digest = Digest::from_hex(hex);
    if (!digest) return fail("release.bad_entry", line, "SHA256 entry '" + std::string(entry) + "' has a hash that is not hex");
    e.sha256 = std::move(*digest);
    auto [ptr, ec] = std::from_chars(w[1].data(), w[1].data() + w[1].size(), e.size);
    if (ec != std::errc() || ptr != w[1].data() + w[1].size())
      return fail("release.bad_entry", line, "SHA256 entry '" + std::string(entry) + "' has a size that is not a number");
    e.path = std::string(w[2]);
    r.sha256.push_back(std::move(e));
  }
  return r;
}

}  // namespace gpuenv::packages
