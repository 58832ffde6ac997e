#include "base/safe_text.hpp"

#include <cstdint>
#include <cstdio>

namespace gpuenv {
namespace {

bool needs_escape(std::uint32_t cp) {
  return cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F) || cp == 0x061C || cp == 0x200E || cp == 0x200F || (cp >= 0x2028 && cp <= 0x202E) ||
         (cp >= 0x2066 && cp <= 0x2069);
}

std::string escape_of(std::uint32_t cp) {
  switch (cp) {
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    default: break;
  }
  char buf[16];
  if (cp < 0x80) std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(cp));
  else std::snprintf(buf, sizeof buf, "\\u{%04x}", static_cast<unsigned>(cp));
  return buf;
}

std::string escape(std::string_view s, bool keep_newlines, std::size_t max_bytes) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    std::uint32_t cp = 0;
    const std::size_t n = utf8_sequence(s, i, &cp);
    std::string piece;
    if (n == 0) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(static_cast<unsigned char>(s[i])));
      piece = buf;
    } else if (cp == '\n' && keep_newlines) {
      piece = "\n";
    } else if (needs_escape(cp)) {
      piece = escape_of(cp);
    } else {
      piece = std::string(s.substr(i, n));
    }
    if (max_bytes != 0 && out.size() + piece.size() > max_bytes) {
      out += "...";
      return out;
    }
    out += piece;
    i += n == 0 ? 1 : n;
  }
  return out;
}

}  // namespace

std::size_t utf8_sequence(std::string_view s, std::size_t i, std::uint32_t* code_point) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  std::uint32_t cp = 0;
  std::size_t n = 0;
  if (c < 0x80) {
    if (code_point) *code_point = c;
    return 1;
  }
  if (c >= 0xC2 && c <= 0xDF) n = 2, cp = c & 0x1F;
  else if (c >= 0xE0 && c <= 0xEF) n = 3, cp = c & 0x0F;
  else if (c >= 0xF0 && c <= 0xF4) n = 4, cp = c & 0x07;
  else return 0;
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(k) & 0x3F);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  if (code_point) *code_point = cp;
  return n;
}

std::string safe_text(std::string_view text, std::size_t max_bytes) { return escape(text, false, max_bytes); }

std::string safe_lines(std::string_view text) { return escape(text, true, 0); }

bool is_safe_text(std::string_view text, std::string_view allowed) {
  for (std::size_t i = 0; i < text.size();) {
    std::uint32_t cp = 0;
    const std::size_t n = utf8_sequence(text, i, &cp);
    if (n == 0 || (needs_escape(cp) && !(cp < 0x80 && allowed.find(static_cast<char>(cp)) != std::string_view::npos))) return false;
    i += n;
  }
  return true;
}

}  // namespace gpuenv
