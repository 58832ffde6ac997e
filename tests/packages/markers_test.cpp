#include "packages/wheels/markers.hpp"

#include <gtest/gtest.h>

using gpuenv::packages::canonicalize_name;
using gpuenv::packages::Environment;
using gpuenv::packages::Marker;
using gpuenv::packages::parse_requirement;

namespace {

// CPython 3.11 on x86_64 Linux, as packaging's default_environment() would report it.
Environment linux_311() {
  Environment env;
  env.python_version = "3.11";
  env.python_full_version = "3.11.4";
  env.os_name = "posix";
  env.sys_platform = "linux";
  env.platform_machine = "x86_64";
  env.platform_system = "Linux";
  env.platform_release = "6.5.0-1025-azure";
  env.platform_version = "#1 SMP";
  env.implementation_name = "cpython";
  env.implementation_version = "3.11.4";
  env.platform_python_implementation = "CPython";
  return env;
}

bool eval(const char* marker, const Environment& env = linux_311()) {
  auto m = Marker::parse(marker);
  EXPECT_TRUE(m.ok()) << marker << ": " << (m.ok() ? "" : m.error().message);
  if (!m.ok()) return false;
  auto r = m->evaluate(env);
  EXPECT_TRUE(r.ok()) << marker << ": " << (r.ok() ? "" : r.error().message);
  return r.ok() && *r;
}

std::string normalized(const char* marker) {
  auto m = Marker::parse(marker);
  return m.ok() ? m->str() : "error: " + m.error().message;
}

// Expected answers below were taken from packaging 23.0 with the same environment.
TEST(Marker, ComparesPythonVersionsAsPep440) {
  EXPECT_TRUE(eval(R"(python_version >= "3.8" and platform_system == "Linux")"));
  EXPECT_FALSE(eval(R"(python_version < "3.10")"));
  EXPECT_TRUE(eval(R"(python_version > "3.9")"));  // as strings "3.11" > "3.9" would be false
  EXPECT_TRUE(eval("python_version == '3.11.*'"));
  EXPECT_TRUE(eval(R"(python_full_version >= "3.11.4rc1")"));
  EXPECT_FALSE(eval(R"(python_version > "3.11")"));
  EXPECT_TRUE(eval(R"(python_full_version > "3.11")"));
  EXPECT_TRUE(eval("python_version <= '3.11.0'"));
  EXPECT_TRUE(eval(R"(python_version~="3.8")"));
  EXPECT_TRUE(eval(R"(implementation_version >= "3.11.4.dev0")"));
}

TEST(Marker, FallsBackToStringComparisonWhenASideIsNoVersion) {
  EXPECT_TRUE(eval(R"(platform_release >= "5.0")"));  // "6.5.0-1025-azure" is no PEP 440 version
  EXPECT_FALSE(eval(R"(platform_release == "6.5")"));
  EXPECT_TRUE(eval(R"(os_name == "posix")"));
  EXPECT_TRUE(eval(R"("linux" in sys_platform)"));
  EXPECT_FALSE(eval(R"("x86" not in platform_machine)"));
  auto m = Marker::parse(R"(platform_release ~= "5.0")");
  ASSERT_TRUE(m.ok());
  auto r = m->evaluate(linux_311());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "pep508.undefined_comparison");
}

TEST(Marker, AndBindsTighterThanOrAndParenthesesGroup) {
  EXPECT_TRUE(eval(R"(os_name == "nt" or sys_platform == "linux" and platform_machine == "x86_64")"));
  EXPECT_FALSE(eval(R"((os_name == "nt" or sys_platform == "linux") and platform_machine == "aarch64")"));
  EXPECT_TRUE(eval("os_name=='posix'and(extra=='x'or python_version>='3')"));
  EXPECT_TRUE(eval("((os_name=='posix'))"));
}

TEST(Marker, AcceptsDottedAndLegacyVariableNames) {
  EXPECT_TRUE(eval(R"(sys.platform == "linux")"));
  EXPECT_TRUE(eval(R"(python_implementation == "CPython")"));
  EXPECT_TRUE(eval(R"(platform.machine == "x86_64")"));
  EXPECT_EQ(normalized(R"(sys.platform == "linux")"), R"(sys_platform == "linux")");
}

TEST(Marker, NormalizesExtraNamesOnBothSides) {
  Environment env = linux_311();
  EXPECT_FALSE(eval(R"(extra == "Foo_Bar")", env));
  env.extra = "foo-bar";
  EXPECT_TRUE(eval(R"(extra == "Foo_Bar")", env));
  env.extra = "FOO..bar";
  EXPECT_TRUE(eval(R"(extra == "foo-bar")", env));
  EXPECT_EQ(normalized(R"(extra == "Foo_Bar")"), R"(extra == "foo-bar")");
}

TEST(Marker, PrintsNormalizedText) {
  EXPECT_EQ(normalized("os_name=='posix'and(extra=='x'or python_version>='3')"),
            R"(os_name == "posix" and (extra == "x" or python_version >= "3"))");
  EXPECT_EQ(normalized("((os_name=='posix'))"), R"(os_name == "posix")");
  EXPECT_EQ(normalized("'linux' not   in sys_platform"), R"("linux" not in sys_platform)");
  // A parenthesised single comparison loses its parentheses; only the first comparison's extra is normalized.
  EXPECT_EQ(normalized("(os_name == 'a') and extra == 'X_y'"), R"(os_name == "a" and extra == "X_y")");
}

TEST(Marker, EvaluatesPep751ExtrasAndDependencyGroupsAsSets) {
  Environment env = linux_311();
  env.extras = {"CLI", "gpu_cuda"};
  env.dependency_groups = {"dev"};
  EXPECT_TRUE(eval(R"('cli' in extras)", env));
  EXPECT_TRUE(eval(R"('gpu.cuda' in extras and 'dev' in dependency_groups)", env));
  EXPECT_TRUE(eval(R"('docs' not in extras)", env));
  EXPECT_FALSE(eval(R"('docs' in extras or 'test' in dependency_groups)", env));
  EXPECT_TRUE(eval(R"('dev' in dependency_groups and python_version >= "3.11")", env));
  // Empty sets: nothing is in them.
  EXPECT_FALSE(eval(R"('cli' in extras)"));
  EXPECT_TRUE(eval(R"('cli' not in extras)"));
  // `extras` is not `extra`: the word boundary keeps them apart.
  EXPECT_EQ(normalized("'a' in extras"), R"("a" in extras)");
  EXPECT_EQ(normalized("extra == 'a'"), R"(extra == "a")");
}

TEST(Marker, RefusesOtherComparisonsWithASet) {
  for (const char* marker : {R"(extras == "cli")", R"("cli" == extras)", R"(extras in "cli")",
                             R"(dependency_groups >= "dev")"}) {
    auto m = Marker::parse(marker);
    ASSERT_TRUE(m.ok()) << marker;
    auto r = m->evaluate(linux_311());
    ASSERT_FALSE(r.ok()) << marker;
    EXPECT_EQ(r.error().id, "pep508.undefined_comparison") << marker;
  }
}

TEST(Marker, ActiveExtrasGiveExtraSeveralValuesAtOnce) {
  // uv.lock's conflict markers: `extra` holds every selected extra and group, encoded.
  Environment env = linux_311();
  env.active_extras = {"extra-11-conflicting-new", "group-3-grp-dev"};
  EXPECT_TRUE(eval("extra == 'extra-11-conflicting-new'", env));
  EXPECT_TRUE(eval("extra == 'group-3-grp-dev'", env));
  EXPECT_FALSE(eval("extra == 'extra-11-conflicting-old'", env));
  EXPECT_TRUE(eval("extra != 'extra-11-conflicting-old'", env));
  EXPECT_TRUE(eval("extra == 'extra-11-conflicting-new' or extra != 'extra-11-conflicting-old'", env));
  // Without active extras, `extra` keeps its one value.
  env.active_extras.clear();
  EXPECT_TRUE(eval("extra != 'extra-11-conflicting-old'", env));
  EXPECT_FALSE(eval("extra == 'extra-11-conflicting-new'", env));
}

TEST(Marker, RejectsMalformedExpressions) {
  for (const char* bad : {"os_name", R"(os_name = "a")", R"(os_name == "a" and)", R"((os_name == "a")",
                          R"(os_name == "a" garbage)", R"("a" == "b")", R"(os_name == "a\\b")", R"(os_name == "a)",
                          R"(os_name notin "a")", R"(unknown_var == "a")", ""}) {
    auto m = Marker::parse(bad);
    EXPECT_FALSE(m.ok()) << bad;
    if (!m.ok()) {
      EXPECT_EQ(m.error().id, "pep508.syntax") << bad;
    }
  }
}

TEST(Requirement, SplitsNameExtrasSpecifierAndMarker) {
  auto r = parse_requirement(R"(Name.Foo[ a , b ] (>=1.0,<2) ; python_version >= "3.8")");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->name, "Name.Foo");
  EXPECT_EQ(r->extras, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r->specifier.str(), "<2,>=1.0");
  EXPECT_TRUE(r->url.empty());
  ASSERT_TRUE(r->marker);
  EXPECT_EQ(r->marker->str(), R"(python_version >= "3.8")");
}

TEST(Requirement, AcceptsEachSpecifierSpelling) {
  struct Case {
    const char* text;
    const char* spec;
  };
  for (const Case& c : {Case{"name", ""}, Case{"name>=1.0 ,  !=1.5.*", "!=1.5.*,>=1.0"}, Case{"name[]", ""},
                        Case{"name===1.0,<2", "<2,===1.0"}, Case{"name ~= 1.0", "~=1.0"},
                        Case{R"(name>=1.0;os_name=="posix")", ">=1.0"}, Case{"name==1.0.*", "==1.0.*"}}) {
    auto r = parse_requirement(c.text);
    ASSERT_TRUE(r.ok()) << c.text << ": " << r.error().message;
    EXPECT_EQ(r->name, "name");
    EXPECT_EQ(r->specifier.str(), c.spec) << c.text;
  }
}

TEST(Requirement, ParsesDirectUrlsWithMarkers) {
  auto r = parse_requirement(R"(name @ https://example.com/x.whl ; os_name=="posix")");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->url, "https://example.com/x.whl");
  ASSERT_TRUE(r->marker);
  EXPECT_EQ(r->marker->str(), R"(os_name == "posix")");
  auto file = parse_requirement("name @ file:///tmp/x.whl");
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->url, "file:///tmp/x.whl");
  // Without whitespace the ';' belongs to the URL, as in packaging.
  auto glued = parse_requirement(R"(name @ https://example.com/x;os_name=="a")");
  ASSERT_TRUE(glued.ok());
  EXPECT_EQ(glued->url, R"(https://example.com/x;os_name=="a")");
  EXPECT_FALSE(glued->marker);
}

TEST(Requirement, ReportsWhatWasExpectedAndWhere) {
  struct Case {
    const char* text;
    const char* expected;
    const char* id;
  };
  for (const Case& c : {Case{"name[a b]", "Expected comma between extra names", "pep508.syntax"},
                        Case{"name>=1.0 foo", "Expected end or semicolon (after version specifier)", "pep508.syntax"},
                        Case{"(name)", "Expected package name", "pep508.syntax"},
                        Case{"name[a,]", "Expected extra name after comma", "pep508.syntax"},
                        Case{"name==1.0 ; os_name", "Expected marker operator", "pep508.syntax"},
                        Case{"name @ example.com/x", "no scheme", "pep508.url"},
                        Case{"name @ https:///x", "no host", "pep508.url"},
                        Case{"name @ file:/x", "file://", "pep508.url"},
                        Case{"name (>=1.0", "RIGHT_PARENTHESIS", "pep508.syntax"}}) {
    auto r = parse_requirement(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.error().id, c.id) << c.text;
    EXPECT_NE(r.error().message.find(c.expected), std::string::npos) << c.text << ": " << r.error().message;
  }
  auto r = parse_requirement("name>=1.0 foo");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("column 11"), std::string::npos) << r.error().message;
}

TEST(CanonicalizeName, FollowsPep503) {
  EXPECT_EQ(canonicalize_name("Foo_Bar"), "foo-bar");
  EXPECT_EQ(canonicalize_name("foo.-_bar"), "foo-bar");
  EXPECT_EQ(canonicalize_name("torch"), "torch");
}

}  // namespace

namespace {

// A requirements file is untrusted: nesting is bounded (fuzz/project_fuzz.cpp overflowed the stack with thousands of
// parentheses), and markers as deep as real ones still parse.
TEST(Marker, NestingIsBounded) {
  auto nest = [](int n) { return std::string(static_cast<std::size_t>(n), '(') + "os_name == \"posix\"" + std::string(static_cast<std::size_t>(n), ')'); };
  EXPECT_TRUE(Marker::parse(nest(8)).ok());
  auto deep = Marker::parse(nest(5000));
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.error().id, "pep508.syntax");
  EXPECT_NE(deep.error().message.find("nested parentheses"), std::string::npos) << deep.error().message;
  EXPECT_FALSE(parse_requirement("demo ; " + nest(5000)).ok());
}

}  // namespace
