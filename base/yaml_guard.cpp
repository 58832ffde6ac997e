#include "base/yaml_guard.hpp"

#include "base/safe_text.hpp"

#include <algorithm>

namespace gpuenv {
namespace {

std::string at(const std::string& path, std::size_t line, std::size_t col) {
  return path + ":" + std::to_string(line) + ":" + std::to_string(col);
}

}  // namespace

Status check_yaml_bytes(std::string_view text, const std::string& path, std::size_t max_bytes, std::size_t max_depth) {
  if (text.size() > max_bytes) {
    return make_error(ErrorKind::spec, "yaml.too_large",
                      "file is " + std::to_string(text.size()) + " bytes; the limit is " + std::to_string(max_bytes),
                      path, "is this the right file? a spec is a few hundred bytes");
  }
  std::size_t line = 1, col = 1;
  std::size_t flow_depth = 0, max_seen = 0;
  bool at_line_start = true;
  std::size_t indent = 0, indicators = 0;
  char quote = 0;
  bool comment = false;
  for (std::size_t i = 0; i < text.size();) {
    const char ch = text[i];
    if (ch == '\0') {
      return make_error(ErrorKind::spec, "yaml.binary", "file contains a NUL byte; it looks binary, not YAML",
                        at(path, line, col), "give a YAML text file");
    }
    const std::size_t len = utf8_sequence(text, i);
    if (len == 0) {
      return make_error(ErrorKind::spec, "yaml.not_utf8", "file is not valid UTF-8 (byte " + std::to_string(i) + ")",
                        at(path, line, col), "save the file as UTF-8");
    }
    if (ch == '\n') {
      ++line;
      col = 1;
      at_line_start = true;
      indent = indicators = 0;
      comment = false;
      if (quote == '\'' || quote == '"') {
        // multi-line quoted scalars are legal; keep the quote open
      }
      ++i;
      continue;
    }
    if (!comment && !quote) {
      if (at_line_start) {
        if (ch == ' ') {
          ++indent;
        } else if ((ch == '-' || ch == '?' || ch == ':') && i + 1 < text.size() &&
                   (text[i + 1] == ' ' || text[i + 1] == '\t' || text[i + 1] == '\n')) {
          ++indicators;  // "- - - x" nests a sequence per indicator on one line
        } else if (ch != '\t') {
          at_line_start = false;
        }
      }
      if (ch == '#' && (i == 0 || text[i - 1] == ' ' || text[i - 1] == '\t' || text[i - 1] == '\n')) comment = true;
      else if (ch == '[' || ch == '{') ++flow_depth;
      else if ((ch == ']' || ch == '}') && flow_depth > 0) --flow_depth;
      else if (ch == '"' || (ch == '\'' && (i == 0 || !std::isalnum(static_cast<unsigned char>(text[i - 1]))))) quote = ch;
      max_seen = std::max(max_seen, indent + indicators + flow_depth);
      if (max_seen > max_depth) {
        return make_error(ErrorKind::spec, "yaml.too_deep",
                          "nesting is deeper than " + std::to_string(max_depth) + " levels", at(path, line, col),
                          "a spec needs only a few levels; check indentation and brackets");
      }
    } else if (quote) {
      if (ch == '\\' && quote == '"') {
        i += 1 + (i + 1 < text.size() ? 1 : 0);
        col += 2;
        continue;
      }
      if (ch == quote) quote = 0;
    }
    i += len;
    ++col;
  }
  return ok_status();
}

}  // namespace gpuenv
