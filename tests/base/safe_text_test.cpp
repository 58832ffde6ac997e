// Untrusted text made safe to print (base/safe_text.hpp), and the YAML readers that refuse what no lock, label or
// terminal should carry (issue 33, cases 7, 8 and 16).
#include "base/safe_text.hpp"

#include <gtest/gtest.h>

#include <string>

#include "base/error.hpp"
#include "base/yaml_reader.hpp"

namespace {

using gpuenv::safe_lines;
using gpuenv::safe_text;

TEST(SafeText, EscapesWhatATerminalActsOnAndKeepsWhatItShows) {
  // A window title, a cleared screen and a forged line (a mark's gpu.product in the review).
  EXPECT_EQ(safe_text("NVIDIA\x1b]0;pwned\x07\x1b[2J\nverified: 1 of 1"), "NVIDIA\\x1b]0;pwned\\x07\\x1b[2J\\nverified: 1 of 1");
  EXPECT_EQ(safe_text("a\tb\rc\x7f"), "a\\tb\\rc\\x7f");
  EXPECT_EQ(safe_text("csi \xc2\x9b" "2J"), "csi \\u{009b}2J") << "C1 CSI";
  EXPECT_EQ(safe_text("drain \xe2\x80\xae" "evil"), "drain \\u{202e}evil") << "right-to-left override";
  for (const char* bidi : {"\xd8\x9c", "\xe2\x80\x8e", "\xe2\x80\x8f", "\xe2\x80\xaa", "\xe2\x80\xab", "\xe2\x80\xac", "\xe2\x80\xad", "\xe2\x81\xa6", "\xe2\x81\xa7",
                           "\xe2\x81\xa8", "\xe2\x81\xa9", "\xe2\x80\xa8", "\xe2\x80\xa9"})
    EXPECT_EQ(safe_text(bidi).substr(0, 3), "\\u{") << safe_text(bidi);
  EXPECT_EQ(safe_text("bad \xff\xfe utf8 \xc0\xaf \xed\xa0\x80"), "bad \\xff\\xfe utf8 \\xc0\\xaf \\xed\\xa0\\x80") << "invalid, overlong, surrogate";
  // Ordinary text of any script, and backslashes, stay as they are.
  EXPECT_EQ(safe_text("NVIDIA H100 80GB HBM3 — caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac C:\\x"), "NVIDIA H100 80GB HBM3 — caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac C:\\x");
  EXPECT_TRUE(gpuenv::is_safe_text("plain caf\xc3\xa9"));
  EXPECT_FALSE(gpuenv::is_safe_text("two\nlines"));
  EXPECT_TRUE(gpuenv::is_safe_text("two\nlines\tok", "\n\t"));
  EXPECT_FALSE(gpuenv::is_safe_text("\x1b", "\n\t"));
}

TEST(SafeText, CutsAtACharacterBoundaryAndLinesKeepTheirBreaks) {
  EXPECT_EQ(safe_text("abcdef", 4), "abcd...");
  EXPECT_EQ(safe_text("ab\xc3\xa9" "d", 3), "ab...") << "never half a character";
  EXPECT_EQ(safe_text("a\x1b" "b", 3), "a...") << "never half an escape";
  EXPECT_EQ(safe_lines("one\ntwo\x1b[2J\rthree"), "one\ntwo\\x1b[2J\\rthree");
  // Every error reaches the terminal through Error::to_string: a registry's or a file's text in it is made safe.
  const gpuenv::Error e = gpuenv::make_error(gpuenv::ErrorKind::environment, "x.y", "the registry said \x1b]0;t\x07", "a\nb", "retry\x1b[2J");
  EXPECT_EQ(e.to_string(), "error: a\\nb: the registry said \\x1b]0;t\\x07 [x.y]\n  hint: retry\\x1b[2J");
}

TEST(SafeText, YamlReadersRefuseEscapesThatDecodeToControlsAnywhereInTheDocument) {
  // YAML writes controls as escapes the byte checks cannot see: \v \f \0 \e, \N (U+0085), \L (U+2028), \P, and
  // U+202E spelled \u202e; in a value, a key or a list item.
  for (const char* doc : {"cmdline: \"a\\vb\"", "cmdline: \"a\\fb\"", "cmdline: \"a\\0b\"", "cmdline: \"\\e[2J\"", "cmdline: \"a\\Nb\"", "cmdline: \"a\\Lb\"",
                          "cmdline: \"a\\Pb\"", "name: \"x\\u202ey\"", "\"k\\u001b\": 1", "list: [ok, \"\\x07\"]", "deep: {a: {b: [\"\\x9b\"]}}",
                          "[x, \"\\e[2J\"]: v", "a: &t \"\\e\"\nb: *t\n"}) {  // a key that is a list starts where its mapping does
    auto r = gpuenv::load_yaml(doc, "d.yaml", gpuenv::ErrorKind::spec, "spec.yaml_syntax", "");
    ASSERT_FALSE(r.ok()) << doc;
    EXPECT_EQ(r.error().id, "spec.unsafe_text") << doc;
    EXPECT_EQ(r.error().where.rfind("d.yaml:1:", 0), 0u) << r.error().where;
    EXPECT_TRUE(gpuenv::is_safe_text(r.error().message)) << "the message shows the text escaped: " << r.error().message;
  }
  // Line breaks and tabs are text; so is any script.
  for (const char* doc : {"note: |\n  two\n  lines\n", "t: \"a\\tb\"", "name: caf\xc3\xa9", "a: &x [1, 2]\nb: *x\n"})
    EXPECT_TRUE(gpuenv::load_yaml(doc, "d.yaml", gpuenv::ErrorKind::spec, "spec.yaml_syntax", "").ok()) << doc;
}

}  // namespace
