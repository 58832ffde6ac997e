#pragma once
// Untrusted text made safe to print (docs/security.md, "Text from outside"): package names, record fields, registry
// answers, status files and evidence reach terminals, logs, Slurm comments and Kubernetes events only through these.
// What is escaped: C0 controls and DEL (ESC above all: window titles, cleared screens), C1 controls (U+0080 to
// U+009F, which some terminals act on as CSI), the bidirectional controls (U+061C, U+200E, U+200F, U+202A to
// U+202E, U+2066 to U+2069: text that reads in another order than it is stored), the line and paragraph
// separators U+2028 and U+2029, and bytes that are not UTF-8. Each becomes a visible escape (\n, \t, \x1b,
// \u{202e}), so that what was there can still be read. A backslash stays as it is: a spelled-out escape is only
// text, and doubling every backslash would garble paths and messages that carry one.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace gpuenv {

/// TEXT as one printable line: every character above escaped, line breaks too. MAX_BYTES (0: no limit) cuts the
/// result at a character boundary and ends it with "..." (the escapes count).
std::string safe_text(std::string_view text, std::size_t max_bytes = 0);

/// TEXT with its line breaks ('\n') kept and everything else safe_text escapes escaped (a '\r' too: it would
/// overwrite the line it ends); for messages of several lines, each of which is then safe.
std::string safe_lines(std::string_view text);

/// True when nothing in TEXT needs an escape but the ASCII controls in ALLOWED ("\n\t": text of several lines).
bool is_safe_text(std::string_view text, std::string_view allowed = {});

/// The length of the UTF-8 sequence at S[I] (1 to 4) and, when CODE_POINT is given, its code point; 0 when the
/// bytes there are not UTF-8 (a stray continuation byte, overlong, a surrogate, above U+10FFFF, cut short).
std::size_t utf8_sequence(std::string_view s, std::size_t i, std::uint32_t* code_point = nullptr);

}  // namespace gpuenv
