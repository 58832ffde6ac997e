#include "packages/wheels/metadata.hpp"

#include <algorithm>
#include <utility>

namespace gpuenv::packages {
namespace {

constexpr std::string_view k_spec_hint =
    "core metadata is 'Field: value' lines, indented continuation lines, a blank line, then the description "
    "(packaging.python.org/specifications/core-metadata); the distribution is malformed, report it upstream or "
    "pin another version";

char md_to_lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }
bool md_is_alnum(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

bool md_iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return md_to_lower(x) == md_to_lower(y); });
}

std::string_view md_trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\r\n");
  return s.substr(first, last - first + 1);
}

// RFC 5322 unfolding: the line breaks of continuation lines go, their indentation stays.
std::string unfold(std::string_view value) {
  std::string out;
  for (char c : value) {
    if (c != '\n') out += c;
  }
  return out;
}

// The field-name characters of RFC 5322 (and of Python's email feedparser): printable ASCII except ':'.
bool is_field_char(char c) { return c >= '!' && c <= '~' && c != ':'; }

// PEP 508 names: letters and digits, with '.', '_' and '-' only between them.
bool valid_project_name(std::string_view name) {
  if (name.empty() || !md_is_alnum(name.front()) || !md_is_alnum(name.back())) return false;
  return std::all_of(name.begin(), name.end(), [](char c) { return md_is_alnum(c) || c == '.' || c == '_' || c == '-'; });
}

class MetadataParser {
 public:
  MetadataParser(std::string_view text, const std::string& where) : m_text(text), m_where(where) {}

  Result<CoreMetadata> parse() {
    if (m_text.substr(0, 3) == "\xEF\xBB\xBF") m_text.remove_prefix(3);
    if (auto st = read_headers(); !st.ok()) return std::move(st).error();
    for (const auto& field : m_out.fields) {
      if (auto st = interpret(field); !st.ok()) return std::move(st).error();
    }
    if (m_out.name.empty()) return missing("Name");
    if (m_out.version_text.empty()) return missing("Version");
    if (!m_body.empty()) m_out.description = std::string(m_body);
    return std::move(m_out);
  }

 private:
  std::string at(int line) const { return m_where + ":" + std::to_string(line); }

  Error error(std::string id, int line, std::string message) const {
    return make_error(ErrorKind::environment, std::move(id), std::move(message), at(line), std::string(k_spec_hint));
  }

  Error missing(const std::string& field) const {
    return make_error(ErrorKind::environment, "metadata.missing_field",
                      "the core metadata has no " + field + " field", m_where, std::string(k_spec_hint));
  }

  Status read_headers() {
    int line_no = 0;
    std::size_t pos = 0;
    while (pos < m_text.size()) {
      const std::size_t eol = m_text.find('\n', pos);
      const std::size_t next = eol == std::string_view::npos ? m_text.size() : eol + 1;
      std::string_view line = m_text.substr(pos, (eol == std::string_view::npos ? m_text.size() : eol) - pos);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      ++line_no;
      pos = next;
      if (line.empty()) {
        m_body = m_text.substr(pos);
        return ok_status();
      }
      if (line.front() == ' ' || line.front() == '\t') {
        if (m_out.fields.empty()) {
          return error("metadata.syntax", line_no, "line " + std::to_string(line_no) +
                                                       " is an indented continuation line but no field precedes it");
        }
        m_out.fields.back().value += "\n" + std::string(line);
        continue;
      }
      const std::size_t colon = line.find(':');
      const std::string_view name = colon == std::string_view::npos ? std::string_view{} : line.substr(0, colon);
      if (name.empty() || !std::all_of(name.begin(), name.end(), is_field_char)) {
        return error("metadata.syntax", line_no,
                     "line " + std::to_string(line_no) + " '" + std::string(line.substr(0, 80)) +
                         "' is neither a 'Field: value' header nor an indented continuation line");
      }
      m_out.fields.push_back(MetadataField{std::string(name), std::string(md_trim(line.substr(colon + 1))), line_no});
    }
    return ok_status();
  }

  // Single-use fields may appear once; a second one is ambiguous, not something to guess about.
  Status once(const MetadataField& field, bool& seen) const {
    if (!seen) {
      seen = true;
      return ok_status();
    }
    return error("metadata.duplicate_field", field.line,
                 "field " + field.name + " appears a second time on line " + std::to_string(field.line));
  }

  Error invalid(const MetadataField& field, const std::string& why) const {
    return error("metadata.invalid_field", field.line,
                 field.name + " '" + unfold(field.value) + "' on line " + std::to_string(field.line) + ": " + why);
  }

  Status interpret(const MetadataField& field) {
    const std::string value = std::string(md_trim(unfold(field.value)));
    if (md_iequals(field.name, "Metadata-Version")) {
      if (auto st = once(field, m_seen_metadata_version); !st.ok()) return st;
      auto parsed = Pep440Version::parse(value);
      if (!parsed.ok()) return invalid(field, "not a version");
      if (parsed->release().front().size() > 1 || parsed->release().front() >= "3") {
        return error("metadata.unsupported_version", field.line,
                     "Metadata-Version " + value + " on line " + std::to_string(field.line) +
                         " is newer than the 2.x that gpuenv understands");
      }
      m_out.metadata_version = value;
    } else if (md_iequals(field.name, "Name")) {
      if (auto st = once(field, m_seen_name); !st.ok()) return st;
      if (!valid_project_name(value)) return invalid(field, "not a valid project name");
      m_out.name = value;
    } else if (md_iequals(field.name, "Version")) {
      if (auto st = once(field, m_seen_version); !st.ok()) return st;
      auto parsed = Pep440Version::parse(value);
      if (!parsed.ok()) return invalid(field, "not a PEP 440 version");
      m_out.version = std::move(parsed).value();
      m_out.version_text = value;
    } else if (md_iequals(field.name, "Requires-Python")) {
      if (auto st = once(field, m_seen_requires_python); !st.ok()) return st;
      auto parsed = Pep440SpecifierSet::parse(value);
      if (!parsed.ok()) return invalid(field, parsed.error().message);
      m_out.requires_python = std::move(parsed).value();
      m_out.requires_python_text = value;
    } else if (md_iequals(field.name, "Requires-Dist")) {
      auto parsed = parse_requirement(value);
      if (!parsed.ok()) return invalid(field, parsed.error().message);
      m_out.requires_dist.push_back(std::move(parsed).value());
    } else if (md_iequals(field.name, "Provides-Extra")) {
      if (value.empty()) return invalid(field, "empty extra name");
      m_out.provides_extra.push_back(value);
    } else if (md_iequals(field.name, "Description")) {
      m_out.description = field.value;
    }
    return ok_status();
  }

  std::string_view m_text;
  const std::string& m_where;
  std::string_view m_body;
  CoreMetadata m_out;
  bool m_seen_metadata_version = false;
  bool m_seen_name = false;
  bool m_seen_version = false;
  bool m_seen_requires_python = false;
};

}  // namespace

Result<CoreMetadata> parse_core_metadata(std::string_view text, const std::string& where) {
  try {
    return MetadataParser(text, where).parse();
  } catch (const std::exception& e) {  // allocation failure on absurd input
    return make_error(ErrorKind::environment, "metadata.syntax", std::string("cannot parse core metadata: ") + e.what(),
                      where);
  }
}

}  // namespace gpuenv::packages
