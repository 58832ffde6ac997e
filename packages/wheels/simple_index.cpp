#include "packages/wheels/simple_index.hpp"

#include <algorithm>
#include <array>
#include <exception>
#include <utility>

#include <nlohmann/json.hpp>

#include "packages/wheels/markers.hpp"

#include "base/text.hpp"

namespace gpuenv::packages {
namespace {

constexpr std::string_view k_page_hint =
    "check that the index URL points at a PEP 503/691 simple repository; the page itself may be damaged";

char si_to_lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }
bool si_is_digit(char c) { return c >= '0' && c <= '9'; }
bool si_is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool si_is_alnum(char c) { return si_is_digit(c) || si_is_alpha(c); }
bool si_is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }
int hex_value(char c) {
  if (si_is_digit(c)) return c - '0';
  const char l = si_to_lower(c);
  return (l >= 'a' && l <= 'f') ? l - 'a' + 10 : -1;
}

std::string si_lower(std::string_view s) { return text::lowered(s); }

std::string_view si_trim(std::string_view s) {
  while (!s.empty() && si_is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && si_is_space(s.back())) s.remove_suffix(1);
  return s;
}

bool si_starts_with_ci(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && si_lower(s.substr(0, prefix.size())) == prefix;
}

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// ---- URLs -------------------------------------------------------------------------------------------------

struct UrlParts {
  std::optional<std::string> scheme;
  std::optional<std::string> authority;
  std::string path;
  std::optional<std::string> query;
  std::optional<std::string> fragment;
};

UrlParts split_url(std::string_view s) {
  UrlParts out;
  if (const auto hash = s.find('#'); hash != std::string_view::npos) {
    out.fragment = std::string(s.substr(hash + 1));
    s = s.substr(0, hash);
  }
  if (const auto q = s.find('?'); q != std::string_view::npos) {
    out.query = std::string(s.substr(q + 1));
    s = s.substr(0, q);
  }
  if (!s.empty() && si_is_alpha(s[0])) {
    std::size_t i = 1;
    while (i < s.size() && (si_is_alnum(s[i]) || s[i] == '+' || s[i] == '-' || s[i] == '.')) ++i;
    if (i < s.size() && s[i] == ':') {
      out.scheme = si_lower(s.substr(0, i));
      s = s.substr(i + 1);
    }
  }
  if (s.substr(0, 2) == "//") {
    s.remove_prefix(2);
    const auto slash = s.find('/');
    out.authority = std::string(s.substr(0, slash));
    s = slash == std::string_view::npos ? std::string_view{} : s.substr(slash);
  }
  out.path = std::string(s);
  return out;
}

// RFC 3986 section 5.2.4.
std::string remove_dot_segments(std::string_view in) {
  std::string out;
  while (!in.empty()) {
    if (in.substr(0, 3) == "../") {
      in.remove_prefix(3);
    } else if (in.substr(0, 2) == "./") {
      in.remove_prefix(2);
    } else if (in.substr(0, 3) == "/./") {
      in.remove_prefix(2);
    } else if (in == "/.") {
      in = "/";
    } else if (in.substr(0, 4) == "/../" || in == "/..") {
      in = in.size() == 3 ? std::string_view("/") : in.substr(3);
      const auto last = out.rfind('/');
      out.erase(last == std::string::npos ? 0 : last);
    } else if (in == "." || in == "..") {
      in = {};
    } else {
      const auto next = in.find('/', 1);
      out += in.substr(0, next);
      in = next == std::string_view::npos ? std::string_view{} : in.substr(next);
    }
  }
  return out;
}

std::string join_url(const UrlParts& u) {
  std::string out;
  if (u.scheme) out += *u.scheme + ":";
  if (u.authority) out += "//" + *u.authority;
  out += u.path;
  if (u.query) out += "?" + *u.query;
  if (u.fragment) out += "#" + *u.fragment;
  return out;
}

std::string percent_decode(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex_value(s[i + 1]) >= 0 && hex_value(s[i + 2]) >= 0) {
      out += static_cast<char>(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// urllib.parse.quote(unquote(part)) with safe="/": only letters, digits, "_.-~" and "/" stay as they are.
std::string requote(std::string_view part) {
  static constexpr std::string_view k_hex = "0123456789ABCDEF";
  std::string out;
  for (char c : percent_decode(part)) {
    if (si_is_alnum(c) || c == '_' || c == '.' || c == '-' || c == '~' || c == '/') {
      out += c;
    } else {
      const auto b = static_cast<unsigned char>(c);
      out += '%';
      out += k_hex[b >> 4];
      out += k_hex[b & 0xF];
    }
  }
  return out;
}

// pip's _clean_url_path: '@' and "%2F" are kept as separators (so VCS revisions survive), every other piece is
// unquoted and quoted again, so "+" becomes "%2B" and a space "%20" whatever the page wrote. urlparse keeps the
// ";parameters" of the last segment out of the path, so they are left alone too.
std::string clean_path(std::string_view path) {
  std::string_view params;
  const auto last_slash = path.rfind('/');
  const auto semicolon = path.find(';', last_slash == std::string_view::npos ? 0 : last_slash);
  if (semicolon != std::string_view::npos) {
    params = path.substr(semicolon);
    path = path.substr(0, semicolon);
  }
  std::string out;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= path.size(); ++i) {
    std::size_t sep_len = 0;
    if (i < path.size() && path[i] == '@') sep_len = 1;
    if (i + 3 <= path.size() && path[i] == '%' && path[i + 1] == '2' && si_to_lower(path[i + 2]) == 'f') sep_len = 3;
    if (i == path.size() || sep_len > 0) {
      out += requote(path.substr(start, i - start));
      if (sep_len == 1) out += '@';
      if (sep_len == 3) out += "%2F";
      start = i + sep_len;
      i += sep_len == 0 ? 0 : sep_len - 1;
    }
  }
  return out + std::string(params);
}

// ---- records ----------------------------------------------------------------------------------------------

/// A link read from a page: where it leads, the sha256 in its fragment, and whether gpuenv may follow it.
struct Link {
  std::string url;
  Digest sha256;
  bool allowed = true;
};

class PageReader {
 public:
  explicit PageReader(const std::string& page_url) : m_page(page_url) {}

  Error error(std::string id, std::string message, std::string hint = std::string(k_page_hint)) const {
    return make_error(ErrorKind::environment, std::move(id), std::move(message), m_page, std::move(hint));
  }

  Result<Digest> sha256(std::string_view value, const std::string& what) const {
    auto digest = Digest::from_hex(si_lower(si_trim(value)));
    if (!digest) {
      return error("simple.bad_hash", "the sha256 of " + what + " is '" + std::string(value) +
                                          "', not 64 hexadecimal digits");
    }
    return std::move(*digest);
  }

  Status check_filename(const std::string& filename) const {
    if (filename.empty() || filename == "." || filename == ".." ||
        filename.find_first_of(std::string("/\\\0", 3)) != std::string::npos) {
      return error("simple.bad_filename", "the page lists a file named '" + filename +
                                              "', which is empty or contains a path separator or NUL");
    }
    return ok_status();
  }

  // Resolves a link, re-quotes its path as pip does and splits off the fragment (and a sha256= in it). A link
  // link_allowed() refuses comes back with allowed == false and nothing else read from it.
  Result<Link> link(std::string_view href, const std::string& base, const std::string& what) const {
    const std::string resolved = resolve_url(base, si_trim(href));
    if (!link_allowed(resolved, m_page)) return Link{resolved.substr(0, resolved.find('#')), {}, false};
    UrlParts url = split_url(resolved);
    Digest hash;
    if (url.fragment) {
      std::string_view frag = *url.fragment;
      while (!frag.empty()) {
        const auto amp = frag.find('&');
        const std::string_view item = frag.substr(0, amp);
        if (item.substr(0, 7) == "sha256=") {
          auto hex = sha256(item.substr(7), what);
          if (!hex.ok()) return std::move(hex).error();
          hash = *hex;
        }
        frag = amp == std::string_view::npos ? std::string_view{} : frag.substr(amp + 1);
      }
      url.fragment.reset();
    }
    url.path = clean_path(url.path);
    return Link{join_url(url), hash, true};
  }

  // The note for a link that is left out.
  static std::string skipped(const std::string& what, const Link& link) {
    return what + ": " + link.url + " is not followed (only http and https links are, and file links from a " +
           "file: index)";
  }

  const std::string& page() const { return m_page; }

 private:
  const std::string& m_page;
};

// The last segment of the URL's path, percent-decoded, as pip's Link.filename.
std::string url_filename(const std::string& url) {
  const UrlParts parts = split_url(url);
  const std::string_view path = parts.path;
  const auto slash = path.rfind('/');
  return percent_decode(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

// ---- JSON (PEP 691) ---------------------------------------------------------------------------------------

Result<SimplePage> parse_json_page(std::string_view body, const PageReader& reader) {
  using nlohmann::json;
  const json doc = json::parse(body.begin(), body.end());
  if (!doc.is_object()) return reader.error("simple.json", "the JSON project page is not an object");
  if (const auto meta = doc.find("meta"); meta != doc.end() && meta->is_object()) {
    if (const auto api = meta->find("api-version"); api != meta->end()) {
      if (!api->is_string()) return reader.error("simple.json", "meta.api-version is not a string");
      const std::string version = api->get<std::string>();
      if (version.substr(0, version.find('.')) != "1") {
        return reader.error("simple.api_version", "the index speaks version " + version +
                                                      " of the simple repository API; gpuenv reads version 1",
                            "use an index that serves API version 1 (PEP 691), or its HTML pages");
      }
    }
  }
  const auto files = doc.find("files");
  if (files == doc.end() || !files->is_array()) {
    return reader.error("simple.json", "the JSON project page has no \"files\" array");
  }
  SimplePage out;
  std::size_t index = 0;
  for (const json& entry : *files) {
    const std::string what = "files[" + std::to_string(index++) + "]";
    auto wrong = [&](const std::string& field, const std::string& expected) {
      return reader.error("simple.json", what + "." + field + " should be " + expected);
    };
    if (!entry.is_object()) return reader.error("simple.json", what + " is not an object");
    const auto filename = entry.find("filename");
    const auto url = entry.find("url");
    if (filename == entry.end() || !filename->is_string()) return wrong("filename", "a string");
    if (url == entry.end() || !url->is_string()) return wrong("url", "a string");
    IndexFile file;
    file.filename = filename->get<std::string>();
    const std::string named = what + " (" + file.filename + ")";
    if (auto st = reader.check_filename(file.filename); !st.ok()) return std::move(st).error();
    auto link = reader.link(url->get<std::string>(), reader.page(), named);
    if (!link.ok()) return std::move(link).error();
    if (!link->allowed) {
      out.skipped.push_back(reader.skipped(named, *link));
      continue;
    }
    file.url = link->url;
    file.sha256 = link->sha256;
    if (const auto hashes = entry.find("hashes"); hashes != entry.end()) {
      if (!hashes->is_object()) return wrong("hashes", "an object");
      if (const auto sha = hashes->find("sha256"); sha != hashes->end()) {
        if (!sha->is_string()) return wrong("hashes.sha256", "a string");
        auto hex = reader.sha256(sha->get<std::string>(), named);
        if (!hex.ok()) return std::move(hex).error();
        file.sha256 = *hex;
      }
    }
    if (const auto rp = entry.find("requires-python"); rp != entry.end() && !rp->is_null()) {
      if (!rp->is_string()) return wrong("requires-python", "a string or null");
      file.requires_python = rp->get<std::string>();
    }
    if (const auto yanked = entry.find("yanked"); yanked != entry.end() && !yanked->is_null()) {
      if (yanked->is_boolean()) {
        if (yanked->get<bool>()) file.yanked = std::string();
      } else if (yanked->is_string()) {
        file.yanked = yanked->get<std::string>();
      } else {
        return wrong("yanked", "a boolean or a string");
      }
    }
    // PEP 714 renamed dist-info-metadata to core-metadata; the new name wins when both are present.
    auto metadata = entry.find("core-metadata");
    std::string metadata_key = "core-metadata";
    if (metadata == entry.end() || metadata->is_null()) {
      metadata = entry.find("dist-info-metadata");
      metadata_key = "dist-info-metadata";
    }
    if (metadata != entry.end() && !metadata->is_null()) {
      if (metadata->is_boolean()) {
        file.has_metadata = metadata->get<bool>();
      } else if (metadata->is_object()) {
        file.has_metadata = true;
        if (const auto sha = metadata->find("sha256"); sha != metadata->end()) {
          if (!sha->is_string()) return wrong(metadata_key + ".sha256", "a string");
          auto hex = reader.sha256(sha->get<std::string>(), "the metadata of " + named);
          if (!hex.ok()) return std::move(hex).error();
          file.metadata_sha256 = *hex;
        }
      } else {
        return wrong(metadata_key, "a boolean or an object of hashes");
      }
    }
    if (const auto size = entry.find("size"); size != entry.end() && !size->is_null()) {
      if (!size->is_number_unsigned()) return wrong("size", "a non-negative integer");
      file.size = size->get<std::uint64_t>();
    }
    if (const auto uploaded = entry.find("upload-time"); uploaded != entry.end() && !uploaded->is_null()) {
      if (!uploaded->is_string()) return wrong("upload-time", "a string");
      file.upload_time = uploaded->get<std::string>();
    }
    out.files.push_back(std::move(file));
  }
  return out;
}

// ---- HTML (PEP 503) ---------------------------------------------------------------------------------------

struct HtmlTag {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attrs;  // first occurrence of each name, as HTML keeps

  [[nodiscard]] const std::string* attr(std::string_view key) const {
    for (const auto& [k, v] : attrs) {
      if (k == key) return &v;
    }
    return nullptr;
  }
};

// A tolerant tokenizer that finds start tags and their attributes the way an HTML5 parser would for the
// well-formed and the sloppy pages indexes serve: any case, any quoting, comments and script bodies skipped.
class HtmlScanner {
 public:
  explicit HtmlScanner(std::string_view html) : m_s(html) {}

  std::vector<HtmlTag> start_tags() {
    std::vector<HtmlTag> out;
    while (m_pos < m_s.size()) {
      const auto lt = m_s.find('<', m_pos);
      if (lt == std::string_view::npos) break;
      m_pos = lt + 1;
      const std::string_view rest = m_s.substr(m_pos);
      if (rest.substr(0, 3) == "!--") {
        const auto end = m_s.find("-->", m_pos + 3);
        m_pos = end == std::string_view::npos ? m_s.size() : end + 3;
      } else if (!rest.empty() && (rest[0] == '!' || rest[0] == '?' || rest[0] == '/')) {
        const auto end = m_s.find('>', m_pos);
        m_pos = end == std::string_view::npos ? m_s.size() : end + 1;
      } else if (!rest.empty() && si_is_alpha(rest[0])) {
        HtmlTag tag = read_tag();
        if (tag.name == "script" || tag.name == "style" || tag.name == "textarea" || tag.name == "title") {
          skip_raw_text(tag.name);
        }
        out.push_back(std::move(tag));
      }
    }
    return out;
  }

 private:
  bool at_end() const { return m_pos >= m_s.size(); }
  char peek() const { return m_s[m_pos]; }

  HtmlTag read_tag() {
    HtmlTag tag;
    while (!at_end() && !si_is_space(peek()) && peek() != '/' && peek() != '>') tag.name += si_to_lower(m_s[m_pos++]);
    for (;;) {
      while (!at_end() && (si_is_space(peek()) || peek() == '/')) ++m_pos;
      if (at_end()) break;
      if (peek() == '>') {
        ++m_pos;
        break;
      }
      std::string name;
      do {
        name += si_to_lower(m_s[m_pos++]);
      } while (!at_end() && !si_is_space(peek()) && peek() != '/' && peek() != '>' && peek() != '=');
      while (!at_end() && si_is_space(peek())) ++m_pos;
      std::string value;
      if (!at_end() && peek() == '=') {
        ++m_pos;
        while (!at_end() && si_is_space(peek())) ++m_pos;
        if (!at_end() && (peek() == '"' || peek() == '\'')) {
          const char quote = m_s[m_pos++];
          const auto end = m_s.find(quote, m_pos);
          const std::size_t len = end == std::string_view::npos ? std::string_view::npos : end - m_pos;
          value = html_unescape(m_s.substr(m_pos, len));
          m_pos = end == std::string_view::npos ? m_s.size() : end + 1;
        } else {
          const std::size_t start = m_pos;
          while (!at_end() && !si_is_space(peek()) && peek() != '>') ++m_pos;
          value = html_unescape(m_s.substr(start, m_pos - start));
        }
      }
      if (tag.attr(name) == nullptr) tag.attrs.emplace_back(std::move(name), std::move(value));
    }
    return tag;
  }

  void skip_raw_text(const std::string& name) {
    const std::string close = "</" + name;
    while (m_pos < m_s.size()) {
      const auto lt = m_s.find("</", m_pos);
      if (lt == std::string_view::npos) {
        m_pos = m_s.size();
        return;
      }
      m_pos = lt + 2;
      if (si_starts_with_ci(m_s.substr(lt), close)) {
        const auto gt = m_s.find('>', lt);
        m_pos = gt == std::string_view::npos ? m_s.size() : gt + 1;
        return;
      }
    }
  }

  std::string_view m_s;
  std::size_t m_pos = 0;
};

Result<SimplePage> parse_html_page(std::string_view body, const PageReader& reader) {
  const std::vector<HtmlTag> tags = HtmlScanner(body).start_tags();
  // Like pip, the first <base href> decides the base of every link, wherever it stands.
  std::string base = reader.page();
  for (const auto& tag : tags) {
    if (tag.name != "base") continue;
    if (const auto* href = tag.attr("href"); href != nullptr && !si_trim(*href).empty()) {
      base = resolve_url(reader.page(), si_trim(*href));
      break;
    }
  }
  SimplePage out;
  for (const auto& tag : tags) {
    if (tag.name != "a") continue;
    const auto* href = tag.attr("href");
    if (href == nullptr || si_trim(*href).empty()) continue;
    const std::string what = "the link to '" + std::string(si_trim(*href)) + "'";
    auto link = reader.link(*href, base, what);
    if (!link.ok()) return std::move(link).error();
    if (!link->allowed) {
      out.skipped.push_back(reader.skipped(what, *link));
      continue;
    }
    IndexFile file;
    file.url = link->url;
    file.sha256 = link->sha256;
    // Directory listings (a local index served by nginx or http.server) link to "../" and subdirectories;
    // a link whose path ends in '/' names no file.
    const std::string path = split_url(file.url).path;
    if (path.empty() || path.back() == '/') continue;
    file.filename = url_filename(file.url);
    if (auto st = reader.check_filename(file.filename); !st.ok()) return std::move(st).error();
    if (const auto* rp = tag.attr("data-requires-python")) file.requires_python = std::string(si_trim(*rp));
    if (const auto* yanked = tag.attr("data-yanked")) file.yanked = *yanked;
    const std::string* metadata = tag.attr("data-core-metadata");
    if (metadata == nullptr) metadata = tag.attr("data-dist-info-metadata");
    if (metadata != nullptr) {
      const std::string value(si_trim(*metadata));
      // pip's reading: "true", or "<hash name>=<value>"; anything else still announces a file without a hash.
      file.has_metadata = si_lower(value) != "false";
      const auto eq = value.find('=');
      if (eq != std::string::npos && si_lower(value.substr(0, eq)) == "sha256") {
        auto hex = reader.sha256(std::string_view(value).substr(eq + 1), "the metadata of " + file.filename);
        if (!hex.ok()) return std::move(hex).error();
        file.metadata_sha256 = *hex;
      }
    }
    out.files.push_back(std::move(file));
  }
  return out;
}

enum class PageFormat { json, html, unknown };

}  // namespace

std::string resolve_url(std::string_view base, std::string_view reference) {
  const UrlParts b = split_url(base);
  const UrlParts r = split_url(reference);
  UrlParts t;
  if (r.scheme) {
    t.scheme = r.scheme;
    t.authority = r.authority;
    t.path = remove_dot_segments(r.path);
    t.query = r.query;
  } else {
    if (r.authority) {
      t.authority = r.authority;
      t.path = remove_dot_segments(r.path);
      t.query = r.query;
    } else {
      if (r.path.empty()) {
        t.path = b.path;
        t.query = r.query ? r.query : b.query;
      } else {
        if (r.path.front() == '/') {
          t.path = remove_dot_segments(r.path);
        } else if (b.authority && b.path.empty()) {
          t.path = remove_dot_segments("/" + r.path);
        } else {
          const auto slash = b.path.rfind('/');
          const std::string dir = slash == std::string::npos ? std::string() : b.path.substr(0, slash + 1);
          const std::string merged = dir + r.path;
          t.path = remove_dot_segments(merged);
        }
        t.query = r.query;
      }
      t.authority = b.authority;
    }
    t.scheme = b.scheme;
  }
  t.fragment = r.fragment;
  return join_url(t);
}

std::string html_unescape(std::string_view text) {
  struct Named {
    std::string_view name;
    std::uint32_t code;
    bool legacy;  // recognised without ';' too
  };
  static constexpr std::array<Named, 6> k_named = {Named{"amp", '&', true}, Named{"lt", '<', true},
                                                   Named{"gt", '>', true},  Named{"quot", '"', true},
                                                   Named{"apos", '\'', false}, Named{"nbsp", 0xA0, false}};
  std::string out;
  std::size_t i = 0;
  while (i < text.size()) {
    if (text[i] != '&') {
      out += text[i++];
      continue;
    }
    const std::string_view rest = text.substr(i + 1);
    if (!rest.empty() && rest[0] == '#') {
      const bool hex = rest.size() > 1 && (rest[1] == 'x' || rest[1] == 'X');
      std::size_t j = hex ? 2 : 1;
      std::uint32_t cp = 0;
      const std::size_t digits_start = j;
      while (j < rest.size() && (hex ? hex_value(rest[j]) >= 0 : si_is_digit(rest[j]))) {
        cp = std::min<std::uint32_t>(cp * (hex ? 16 : 10) + static_cast<std::uint32_t>(hex_value(rest[j])), 0x110000);
        ++j;
      }
      if (j > digits_start) {
        append_utf8(out, cp);
        if (j < rest.size() && rest[j] == ';') ++j;
        i += 1 + j;
        continue;
      }
    } else {
      bool matched = false;
      for (const auto& named : k_named) {
        if (rest.substr(0, named.name.size()) != named.name) continue;
        const std::string_view after = rest.substr(named.name.size());
        std::size_t used = 0;
        if (!after.empty() && after[0] == ';') {
          used = named.name.size() + 1;
        } else if (named.legacy && (after.empty() || (!si_is_alnum(after[0]) && after[0] != '='))) {
          used = named.name.size();
        } else {
          continue;
        }
        append_utf8(out, named.code);
        i += 1 + used;
        matched = true;
        break;
      }
      if (matched) continue;
    }
    out += text[i++];
  }
  return out;
}

Result<SimplePage> parse_simple_page(std::string_view body, std::string_view content_type,
                                                 const std::string& page_url) {
  const PageReader reader(page_url);
  const std::string type = si_lower(si_trim(content_type.substr(0, content_type.find(';'))));
  PageFormat format = PageFormat::unknown;
  if (type.empty()) {
    const std::string_view start = si_trim(body);
    format = !start.empty() && start.front() == '{' ? PageFormat::json : PageFormat::html;
  } else if (type == "application/vnd.pypi.simple.v1+json" || type == "application/vnd.pypi.simple.latest+json" ||
             type == "application/json") {
    format = PageFormat::json;
  } else if (type == "text/html" || type == "application/vnd.pypi.simple.v1+html" ||
             type == "application/vnd.pypi.simple.latest+html" || type == "application/xhtml+xml") {
    format = PageFormat::html;
  } else if (si_starts_with_ci(type, "application/vnd.pypi.simple.v")) {
    return reader.error("simple.api_version", "the index answered with " + type +
                                                  ", a version of the simple repository API gpuenv does not read",
                        "use an index that serves API version 1 (PEP 691), or its HTML pages");
  }
  if (format == PageFormat::unknown) {
    return reader.error("simple.content_type",
                        "the project page has content type '" + std::string(content_type) +
                            "', neither HTML nor PEP 691 JSON",
                        "check that the index URL points at a simple repository (it usually ends in /simple)");
  }
  try {
    return format == PageFormat::json ? parse_json_page(body, reader) : parse_html_page(body, reader);
  } catch (const nlohmann::json::exception& e) {
    return reader.error("simple.json", std::string("the JSON project page is malformed: ") + e.what());
  } catch (const std::exception& e) {
    return reader.error("simple.page", std::string("cannot read the project page: ") + e.what());
  }
}

std::string project_page_url(const std::string& index_url, std::string_view project) {
  std::string out = index_url;
  while (!out.empty() && out.back() == '/') out.pop_back();
  return out + "/" + requote(canonicalize_name(project)) + "/";
}

bool link_allowed(std::string_view url, std::string_view page_url) {
  const std::optional<std::string> scheme = split_url(url).scheme;
  if (!scheme) return false;
  if (*scheme == "http" || *scheme == "https") return true;
  return *scheme == "file" && split_url(page_url).scheme == std::optional<std::string>("file");
}

std::string metadata_url(const IndexFile& file) { return file.url + ".metadata"; }

}  // namespace gpuenv::packages
