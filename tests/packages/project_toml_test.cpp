#include "packages/wheels/project_toml.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>


using gpuenv::Result;
using gpuenv::packages::canonicalize_name;
using gpuenv::packages::Environment;
using gpuenv::packages::lock_graph_requirements;
using gpuenv::packages::parse_pylock;
using gpuenv::packages::parse_pyproject;
using gpuenv::packages::parse_uv_lock;
using gpuenv::packages::ProjectFile;
using gpuenv::packages::ProjectLimits;
using gpuenv::packages::ProjectRequirement;
using gpuenv::packages::ProjectSelection;

// Named, not anonymous: the unity build puts other test files' helpers beside these.
namespace project_toml_test {

std::string project_data(const std::string& relative) {
  std::ifstream in(std::string(GPUENV_SOURCE_DIR) + "/tests/data/projects/" + relative, std::ios::binary);
  EXPECT_TRUE(in.good()) << relative;
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// CPython on Linux, as the image would report it.
Environment linux_env(const std::string& python, const std::string& machine) { return gpuenv::packages::cpython_linux_environment(machine, python); }

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, sep)) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

std::string trimmed(const std::string& s) {
  const auto b = s.find_first_not_of(' ');
  const auto e = s.find_last_not_of(' ');
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

Result<ProjectFile> parse_named(const std::string& name, const std::string& text, const ProjectSelection& selection = {},
                          const ProjectLimits& limits = {}) {
  if (name.ends_with("uv.lock")) return parse_uv_lock(text, name, selection, limits);
  if (name.ends_with("pyproject.toml")) return parse_pyproject(text, name, selection, limits);
  return parse_pylock(text, name, selection, limits);
}

std::string names_of(const std::vector<ProjectRequirement>& requirements, bool with_version) {
  std::vector<std::string> out;
  for (const ProjectRequirement& r : requirements) out.push_back(with_version ? r.requirement : r.name);
  std::sort(out.begin(), out.end());
  std::string joined;
  for (const std::string& s : out) joined += (joined.empty() ? "" : " ") + s;
  return joined;
}

// pyproject.toml: the names whose markers hold (uv pip compile --no-deps gives the same names, resolved).
std::vector<ProjectRequirement> applying(const ProjectFile& file, const Environment& env) {
  std::vector<ProjectRequirement> out;
  for (const ProjectRequirement& r : file.requirements) {
    auto holds = r.marker ? r.marker->evaluate(env) : Result<bool>(true);
    EXPECT_TRUE(holds.ok()) << r.requirement;
    if (holds.ok() && *holds) out.push_back(r);
  }
  return out;
}

std::string error_id(const Result<ProjectFile>& r) { return r.ok() ? "ok" : r.error().id; }

// Each line of expected.txt: what uv itself installs for a file, a selection and an environment (generate.py).
TEST(ProjectToml, AgreesWithUvOnEverySelectionAndEnvironment) {
  int checked = 0;
  for (const std::string& line : split(project_data("expected.txt"), '\n')) {
    if (line.starts_with("#")) continue;
    std::vector<std::string> f = split(line, '|');
    ASSERT_GE(f.size(), 5u) << line;
    for (std::string& field : f) field = trimmed(field);
    SCOPED_TRACE(line);
    ProjectSelection selection;
    if (f[1] != "-") selection.extras = split(f[1], ',');
    if (f[2] != "-") selection.groups = split(f[2], ',');
    const std::string expected = f.size() > 5 ? f[5] : "";
    auto file = parse_named(f[0], project_data(f[0]), selection);
    ASSERT_TRUE(file.ok()) << file.error().to_string();
    const Environment env = linux_env(f[3], f[4]);
    if (f[0].ends_with("pyproject.toml")) {
      std::string names;
      for (const std::string& pin : split(expected, ' ')) names += (names.empty() ? "" : " ") + pin.substr(0, pin.find("=="));
      EXPECT_EQ(names_of(applying(*file, env), false), names);
    } else {
      auto chosen = lock_graph_requirements(*file, env);
      ASSERT_TRUE(chosen.ok()) << chosen.error().to_string();
      EXPECT_EQ(names_of(*chosen, true), expected);
    }
    ++checked;
  }
  EXPECT_EQ(checked, 63);
}

TEST(UvLock, ReadsPackagesWheelsHashesAndRoots) {
  auto file = parse_uv_lock(project_data("demo/uv.lock"), "demo/uv.lock", {}, {});
  ASSERT_TRUE(file.ok()) << file.error().to_string();
  EXPECT_TRUE(file->hashes_required);
  EXPECT_EQ(file->requires_python, ">=3.9");
  EXPECT_EQ(file->index_url, "http://127.0.0.1:1/simple");
  EXPECT_TRUE(file->extra_index_urls.empty());
  EXPECT_EQ(file->extras, (std::vector<std::string>{"all", "cli", "yaml"}));
  EXPECT_EQ(file->groups, (std::vector<std::string>{"dev", "lint", "test"}));
  const auto six = std::find_if(file->requirements.begin(), file->requirements.end(),
                                [](const ProjectRequirement& r) { return r.name == "six"; });
  ASSERT_NE(six, file->requirements.end());
  EXPECT_EQ(six->requirement, "six==1.17.0");
  ASSERT_EQ(six->wheels.size(), 1u);
  EXPECT_EQ(six->wheels.begin()->first, "six-1.17.0-py2.py3-none-any.whl");
  EXPECT_EQ(six->wheels.begin()->second.hex(), "4721f391ed90541fddacab5acf947aa0d3dc7d27b2e1e8eda2be8970586c3274");
  EXPECT_EQ(six->hashes.size(), 1u);
  EXPECT_EQ(six->index, "http://127.0.0.1:1/simple");
  EXPECT_TRUE(six->where.starts_with("demo/uv.lock:")) << six->where;
  // The root's own dependencies: two forks of httpx and of idna, each edge with its version.
  EXPECT_EQ(file->roots.size(), 8u);
  std::set<std::string> httpx;
  for (const auto& edge : file->roots) {
    if (edge.name == "httpx") httpx.insert(edge.version + "[" + (edge.extras.empty() ? "" : edge.extras[0]) + "]");
  }
  EXPECT_EQ(httpx, (std::set<std::string>{"0.28.1[socks]", "0.29.0[socks]"}));
}

TEST(UvLock, ConflictMarkersSeeTheSelectedExtras) {
  auto file = parse_uv_lock(project_data("conflicting/uv.lock"), "uv.lock", ProjectSelection{{"old"}, {}}, {});
  ASSERT_TRUE(file.ok()) << file.error().to_string();
  EXPECT_EQ(file->marker_extras, (std::vector<std::string>{"extra-11-conflicting-old"}));
}

TEST(UvLock, RefusesAnUnknownExtraOrGroupNamingTheDefinedOnes) {
  auto extra = parse_uv_lock(project_data("demo/uv.lock"), "uv.lock", ProjectSelection{{"gpu"}, {}}, {});
  ASSERT_EQ(error_id(extra), "project.unknown_extra");
  EXPECT_NE(extra.error().message.find("all, cli, yaml"), std::string::npos) << extra.error().message;
  auto group = parse_uv_lock(project_data("demo/uv.lock"), "uv.lock", ProjectSelection{{}, {"docs"}}, {});
  ASSERT_EQ(error_id(group), "project.unknown_extra");
  EXPECT_NE(group.error().message.find("dev, lint, test"), std::string::npos) << group.error().message;
}

TEST(UvLock, RefusesAPythonOutsideRequiresPython) {
  auto file = parse_uv_lock(project_data("demo/uv.lock"), "uv.lock", {}, {});
  ASSERT_TRUE(file.ok());
  auto chosen = lock_graph_requirements(*file, linux_env("3.8", "x86_64"));
  ASSERT_FALSE(chosen.ok());
  EXPECT_EQ(chosen.error().id, "project.python");
}

const char* k_uv_head = R"(version = 1
revision = 3
requires-python = ">=3.10"

[[package]]
name = "app"
version = "0.1.0"
source = { virtual = "." }
dependencies = [{ name = "dep" }]
)";

std::string uv_dep(const std::string& source, const std::string& files) {
  return std::string(k_uv_head) + "\n[[package]]\nname = \"dep\"\nversion = \"1.0\"\nsource = " + source + "\n" + files + "\n";
}

const char* k_wheel = R"(wheels = [{ url = "http://127.0.0.1:1/packages/dep-1.0-py3-none-any.whl", hash = "sha256:%s" }])";
const std::string k_hex(64, 'a');

std::string wheel_with(const std::string& hash) {
  std::string w = k_wheel;
  return w.replace(w.find("sha256:%s"), 9, hash);
}

Result<std::vector<ProjectRequirement>> uv_walk(const std::string& text) {
  auto file = parse_uv_lock(text, "uv.lock", {}, {});
  if (!file.ok()) return std::move(file).error();
  return lock_graph_requirements(*file, linux_env("3.11", "x86_64"));
}

TEST(UvLock, TakesARegistryPackageWithHashedWheels) {
  auto chosen = uv_walk(uv_dep(R"({ registry = "http://127.0.0.1:1/simple" })", wheel_with("sha256:" + k_hex)));
  ASSERT_TRUE(chosen.ok()) << chosen.error().to_string();
  ASSERT_EQ(chosen->size(), 1u);
  EXPECT_EQ((*chosen)[0].requirement, "dep==1.0");
  // A local version's '+' escaped in the URL, as indexes write it: the file name has it back.
  std::string text = uv_dep(R"({ registry = "http://127.0.0.1:1/simple" })", wheel_with("sha256:" + k_hex));
  text.replace(text.find("dep-1.0-py3"), 11, "dep-1.0%2Bcu124-py3");
  text.replace(text.find("version = \"1.0\"\nsource"), 15, "version = \"1.0+cu124\"");
  auto local = uv_walk(text);
  ASSERT_TRUE(local.ok()) << local.error().to_string();
  EXPECT_EQ((*local)[0].requirement, "dep==1.0+cu124");
  EXPECT_EQ((*local)[0].wheels.begin()->first, "dep-1.0+cu124-py3-none-any.whl");
}

TEST(UvLock, RefusesHashesThatAreNotSha256OrNot64HexDigits) {
  for (const std::string& hash : {"md5:" + std::string(32, 'a'), "sha256:" + std::string(63, 'a'),
                                  "sha256:" + std::string(64, 'g'), "sha512:" + std::string(128, 'a'), k_hex}) {
    auto chosen = uv_walk(uv_dep(R"({ registry = "http://127.0.0.1:1/simple" })", wheel_with(hash)));
    ASSERT_FALSE(chosen.ok()) << hash;
    EXPECT_EQ(chosen.error().id, "project.hash") << hash;
    EXPECT_NE(chosen.error().message.find("'dep'"), std::string::npos) << chosen.error().message;
  }
}

TEST(UvLock, RefusesGitPathAndUrlSourcesWhenReached) {
  for (const char* source : {R"({ git = "https://example.com/dep.git?rev=1#abc" })", R"({ path = "../dep" })",
                             R"({ directory = "vendor/dep" })", R"({ url = "https://example.com/dep-1.0.tar.gz" })",
                             R"({ editable = "packages/dep" })"}) {
    auto chosen = uv_walk(uv_dep(source, ""));
    ASSERT_FALSE(chosen.ok()) << source;
    EXPECT_EQ(chosen.error().id, "project.url_requirement") << source;
    EXPECT_NE(chosen.error().hint.find("indexes only"), std::string::npos);
  }
  // Not reached (a Windows-only edge): no refusal.
  std::string text = uv_dep(R"({ git = "https://example.com/dep.git" })", "");
  text.replace(text.find(R"({ name = "dep" })"), 16, R"({ name = "dep", marker = "sys_platform == 'win32'" })");
  auto chosen = uv_walk(text);
  ASSERT_TRUE(chosen.ok()) << chosen.error().to_string();
  EXPECT_TRUE(chosen->empty());
}

TEST(UvLock, RefusesAPackageLockedAsAnSdistOnly) {
  auto chosen = uv_walk(uv_dep(R"({ registry = "http://127.0.0.1:1/simple" })",
                               "sdist = { url = \"http://127.0.0.1:1/dep-1.0.tar.gz\", hash = \"sha256:" + k_hex + "\" }"));
  ASSERT_FALSE(chosen.ok());
  EXPECT_EQ(chosen.error().id, "project.sdist_only");
}

TEST(UvLock, RefusesWrongTypesNamingTheKeyAndLine) {
  struct Case {
    std::string text;
    std::string key;
  };
  const std::string registry = R"({ registry = "http://127.0.0.1:1/simple" })";
  for (const Case& c : {Case{"version = \"1\"\n", "version"},
                        Case{uv_dep(registry, "wheels = \"none\""), "'wheels'"},
                        Case{uv_dep("\"pypi\"", ""), "'source'"},
                        Case{std::string(k_uv_head) + "[package.optional-dependencies]\nx = 3\n", "'x'"},
                        Case{uv_dep(registry, wheel_with("sha256:" + k_hex)) + "dependencies = [\"six\"]\n", "a string"}}) {
    auto file = parse_uv_lock(c.text, "uv.lock", {}, {});
    ASSERT_FALSE(file.ok()) << c.text;
    EXPECT_EQ(file.error().id, "project.syntax") << c.text;
    EXPECT_NE(file.error().message.find(c.key), std::string::npos) << file.error().message;
    EXPECT_TRUE(file.error().where.starts_with("uv.lock")) << file.error().where;
  }
}

TEST(UvLock, RefusesAnEdgeToAPackageTheLockDoesNotHold) {
  auto file = parse_uv_lock(k_uv_head, "uv.lock", {}, {});
  ASSERT_EQ(error_id(file), "project.syntax");
  EXPECT_NE(file.error().message.find("'dep'"), std::string::npos);
}

TEST(Pylock, SkipsTheProjectItselfAndReadsWheels) {
  auto file = parse_pylock(project_data("demo/pylock.toml"), "pylock.toml", {}, {});
  ASSERT_TRUE(file.ok()) << file.error().to_string();
  EXPECT_TRUE(file->hashes_required);
  EXPECT_EQ(file->index_url, "http://127.0.0.1:1/simple");
  auto chosen = lock_graph_requirements(*file, linux_env("3.11", "x86_64"));
  ASSERT_TRUE(chosen.ok()) << chosen.error().to_string();
  for (const ProjectRequirement& r : *chosen) {
    EXPECT_NE(r.name, "demo-proj");
    EXPECT_FALSE(r.wheels.empty()) << r.name;
    EXPECT_FALSE(r.marker.has_value());
  }
}

TEST(Pylock, RefusesAnEnvironmentTheLockIsNotFor) {
  auto file = parse_pylock(project_data("pep751/pylock.toml"), "pylock.toml", {}, {});
  ASSERT_TRUE(file.ok()) << file.error().to_string();
  Environment mac = linux_env("3.11", "arm64");
  mac.sys_platform = "darwin";
  auto chosen = lock_graph_requirements(*file, mac);
  ASSERT_FALSE(chosen.ok());
  EXPECT_EQ(chosen.error().id, "project.environment");
  auto old = lock_graph_requirements(*file, linux_env("3.9", "x86_64"));
  ASSERT_FALSE(old.ok());
  EXPECT_EQ(old.error().id, "project.python");
}

TEST(Pylock, RefusesExtrasAndGroupsItDoesNotDefine) {
  EXPECT_EQ(error_id(parse_pylock(project_data("pep751/pylock.toml"), "pylock.toml", ProjectSelection{{"gpu"}, {}}, {})),
            "project.unknown_extra");
  EXPECT_EQ(error_id(parse_pylock(project_data("pep751/pylock.toml"), "pylock.toml", ProjectSelection{{}, {"docs"}}, {})),
            "project.unknown_extra");
}

const char* k_pylock_head = "lock-version = \"1.0\"\ncreated-by = \"test\"\n\n[[packages]]\nname = \"dep\"\nversion = \"1.0\"\n";

Result<std::vector<ProjectRequirement>> pylock_walk(const std::string& text) {
  auto file = parse_pylock(text, "pylock.toml", {}, {});
  if (!file.ok()) return std::move(file).error();
  return lock_graph_requirements(*file, linux_env("3.11", "x86_64"));
}

TEST(Pylock, RefusesVcsDirectoryArchivePathWheelsAndSdistOnly) {
  const std::string hashes = "hashes = { sha256 = \"" + k_hex + "\" }";
  struct Case {
    std::string body;
    std::string id;
  };
  for (const Case& c : {Case{"vcs = { type = \"git\", url = \"https://example.com/dep.git\", commit-id = \"abc\" }\n", "project.url_requirement"},
                        Case{"directory = { path = \"../dep\" }\n", "project.url_requirement"},
                        Case{"archive = { url = \"https://example.com/dep.zip\", " + hashes + " }\n", "project.url_requirement"},
                        Case{"wheels = [{ path = \"dist/dep-1.0-py3-none-any.whl\", " + hashes + " }]\n", "project.url_requirement"},
                        Case{"sdist = { url = \"http://127.0.0.1:1/dep-1.0.tar.gz\", " + hashes + " }\n", "project.sdist_only"},
                        Case{"wheels = [{ url = \"http://127.0.0.1:1/dep-1.0-py3-none-any.whl\", hashes = { md5 = \"" + std::string(32, 'a') + "\" } }]\n", "project.hash"},
                        Case{"wheels = [{ url = \"http://127.0.0.1:1/dep-1.0-py3-none-any.whl\", hashes = { sha256 = \"abc\" } }]\n", "project.hash"},
                        Case{"wheels = [{ url = \"http://127.0.0.1:1/dep-1.0-py3-none-any.whl\" }]\n", "project.hash"},
                        Case{"wheels = [{ url = \"http://127.0.0.1:1/dep-1.0.tar.gz\", " + hashes + " }]\n", "project.syntax"},
                        Case{"marker = 3\n", "project.syntax"},
                        Case{"marker = \"python_version >=\"\n", "project.syntax"}}) {
    auto chosen = pylock_walk(k_pylock_head + c.body);
    ASSERT_FALSE(chosen.ok()) << c.body;
    EXPECT_EQ(chosen.error().id, c.id) << c.body << chosen.error().to_string();
  }
}

TEST(Pylock, RefusesTwoVersionsOfOneNameThatBothApply) {
  const std::string wheel = "wheels = [{ url = \"http://127.0.0.1:1/dep-1.0-py3-none-any.whl\", hashes = { sha256 = \"" + k_hex + "\" } }]\n";
  auto chosen = pylock_walk(k_pylock_head + wheel + "\n[[packages]]\nname = \"Dep\"\nversion = \"2.0\"\n" + wheel);
  ASSERT_FALSE(chosen.ok());
  EXPECT_EQ(chosen.error().id, "project.ambiguous");
}

TEST(Pylock, RefusesAnotherMajorLockVersion) {
  auto file = parse_pylock("lock-version = \"2.0\"\npackages = []\n", "pylock.toml", {}, {});
  EXPECT_EQ(error_id(file), "project.syntax");
}

Result<ProjectFile> pyproject(const std::string& text, const ProjectSelection& selection = {}, const ProjectLimits& limits = {}) {
  return parse_pyproject(text, "pyproject.toml", selection, limits);
}

TEST(Pyproject, ReadsDependenciesWithTheirLinesAndMarkers) {
  auto file = parse_pyproject(project_data("demo/pyproject.toml"), "demo/pyproject.toml", {}, {});
  ASSERT_TRUE(file.ok()) << file.error().to_string();
  EXPECT_FALSE(file->hashes_required);
  EXPECT_EQ(file->requires_python, ">=3.9");
  ASSERT_EQ(file->requirements.size(), 7u);
  EXPECT_EQ(file->requirements[0].name, "httpx");
  EXPECT_EQ(file->requirements[0].requirement, "httpx[socks]>=0.27");
  EXPECT_EQ(file->requirements[0].where, "demo/pyproject.toml:6");
  ASSERT_TRUE(file->requirements[1].marker.has_value());
  EXPECT_EQ(file->requirements[1].marker->str(), R"(python_version < "3.11")");
  // toml++ keeps a table's keys sorted.
  EXPECT_EQ(file->extras, (std::vector<std::string>{"all", "cli", "yaml"}));
  EXPECT_EQ(file->groups, (std::vector<std::string>{"dev", "lint", "test"}));
}

TEST(Pyproject, ExpandsSelfReferencingExtrasWithTheirMarkers) {
  auto file = pyproject(R"([project]
name = "My.Proj"
dependencies = []
[project.optional-dependencies]
a = ["six"]
b = ["my_proj[a] ; platform_machine == 'aarch64'"]
)", ProjectSelection{{"B"}, {}});
  ASSERT_TRUE(file.ok()) << file.error().to_string();
  ASSERT_EQ(file->requirements.size(), 1u);
  EXPECT_EQ(file->requirements[0].requirement, "six");
  ASSERT_TRUE(file->requirements[0].marker.has_value());
  EXPECT_EQ(file->requirements[0].marker->str(), R"(platform_machine == "aarch64")");
  EXPECT_FALSE(*file->requirements[0].marker->evaluate(linux_env("3.11", "x86_64")));
}

TEST(Pyproject, FollowsIncludeGroupAndUvDevDependencies) {
  auto file = pyproject(R"([dependency-groups]
Test = ["pytest", {include-group = "lint"}]
lint = ["ruff"]
[tool.uv]
dev-dependencies = ["ipython"]
)", ProjectSelection{{}, {"test", "dev"}});
  ASSERT_TRUE(file.ok()) << file.error().to_string();
  EXPECT_EQ(names_of(file->requirements, false), "ipython pytest ruff");
}

TEST(Pyproject, RefusesIncludeGroupLoops) {
  auto file = pyproject(R"([dependency-groups]
a = [{include-group = "b"}]
b = ["six", {include-group = "A"}]
)", ProjectSelection{{}, {"a"}});
  ASSERT_EQ(error_id(file), "project.include_loop");
  EXPECT_NE(file.error().message.find("a -> b -> a"), std::string::npos) << file.error().message;
}

TEST(Pyproject, RefusesUnknownExtrasAndGroups) {
  const char* text = "[project]\nname = \"p\"\n[project.optional-dependencies]\ncuda = []\n";
  auto extra = pyproject(text, ProjectSelection{{"gpu"}, {}});
  ASSERT_EQ(error_id(extra), "project.unknown_extra");
  EXPECT_NE(extra.error().message.find("cuda"), std::string::npos);
  EXPECT_EQ(error_id(pyproject(text, ProjectSelection{{}, {"dev"}})), "project.unknown_extra");
  auto include = pyproject("[dependency-groups]\na = [{include-group = \"nope\"}]\n", ProjectSelection{{}, {"a"}});
  EXPECT_EQ(error_id(include), "project.syntax");
}

TEST(Pyproject, RefusesUrlAndPathRequirementsAndUvSourcesThatAreNotIndexes) {
  EXPECT_EQ(error_id(pyproject("[project]\nname = \"p\"\ndependencies = [\"dep @ file:///tmp/dep-1.0-py3-none-any.whl\"]\n")),
            "project.url_requirement");
  EXPECT_EQ(error_id(pyproject("[project]\nname = \"p\"\ndependencies = [\"dep @ https://example.com/dep.whl\"]\n")),
            "project.url_requirement");
  EXPECT_EQ(error_id(pyproject("[project]\nname = \"p\"\ndependencies = [\"dep\"]\n[tool.uv.sources]\n"
                               "dep = { git = \"https://example.com/dep.git\" }\n")),
            "project.url_requirement");
  EXPECT_EQ(error_id(pyproject("[project]\nname = \"p\"\ndependencies = [\"dep\"]\n[tool.uv.sources]\n"
                               "dep = { workspace = true }\n")),
            "project.url_requirement");
}

TEST(Pyproject, TakesUvIndexesAndTheIndexASourceNames) {
  auto file = pyproject(R"([project]
name = "p"
dependencies = ["torch", "numpy"]
[[tool.uv.index]]
name = "pytorch"
url = "http://127.0.0.1:1/whl/cu124"
explicit = true
[[tool.uv.index]]
name = "mirror"
url = "http://127.0.0.1:1/simple"
default = true
[[tool.uv.index]]
url = "http://127.0.0.1:1/extra"
[tool.uv.sources]
torch = [{ index = "pytorch", marker = "sys_platform == 'linux'" }]
)");
  ASSERT_TRUE(file.ok()) << file.error().to_string();
  EXPECT_EQ(file->index_url, "http://127.0.0.1:1/simple");
  EXPECT_EQ(file->extra_index_urls, (std::vector<std::string>{"http://127.0.0.1:1/extra"}));
  ASSERT_EQ(file->requirements.size(), 2u);
  EXPECT_EQ(file->requirements[0].index, "http://127.0.0.1:1/whl/cu124");
  ASSERT_TRUE(file->requirements[0].marker.has_value());
  EXPECT_EQ(file->requirements[0].marker->str(), R"(sys_platform == "linux")");
  EXPECT_EQ(file->requirements[1].index, "");
}

TEST(Pyproject, RefusesDynamicDependencies) {
  auto file = pyproject("[project]\nname = \"p\"\ndynamic = [\"dependencies\"]\n");
  ASSERT_EQ(error_id(file), "project.dynamic");
  EXPECT_NE(file.error().hint.find("build backend"), std::string::npos);
  EXPECT_TRUE(pyproject("[project]\nname = \"p\"\ndynamic = [\"version\"]\n").ok());
}

TEST(Pyproject, RefusesWrongTypesNamingTheKeyAndLine) {
  struct Case {
    std::string text;
    std::string key;
  };
  for (const Case& c : {Case{"[project]\nname = 3\n", "'name'"},
                        Case{"[project]\nname = \"p\"\ndependencies = \"six\"\n", "dependencies"},
                        Case{"[project]\nname = \"p\"\ndependencies = [3]\n", "dependencies"},
                        Case{"project = 1\n", "'project'"},
                        Case{"[project]\nname = \"p\"\n[project.optional-dependencies]\nx = {}\n", "'x'"},
                        Case{"[[tool.uv.index]]\nurl = 1\n", "'url'"}}) {
    auto file = pyproject(c.text);
    ASSERT_EQ(error_id(file), "project.syntax") << c.text;
    EXPECT_NE(file.error().message.find(c.key), std::string::npos) << file.error().message;
    EXPECT_TRUE(file.error().where.starts_with("pyproject.toml:")) << file.error().where;
  }
}

TEST(ProjectToml, ReportsTomlSyntaxErrorsWithLineAndColumn) {
  auto file = pyproject("[project]\nname = \"p\"\ndependencies = [\"six\",\n");
  ASSERT_EQ(error_id(file), "project.syntax");
  EXPECT_TRUE(file.error().where.starts_with("pyproject.toml:")) << file.error().where;
  EXPECT_NE(file.error().where.find(':', 15), std::string::npos) << file.error().where;
  EXPECT_EQ(error_id(pyproject("a = \"\xff\"\n")), "project.syntax");
}

TEST(ProjectToml, RefusesDeeplyNestedValuesAndKeys) {
  EXPECT_EQ(error_id(pyproject("a = " + std::string(100000, '[') + std::string(100000, ']') + "\n")), "project.syntax");
  EXPECT_EQ(error_id(pyproject("a = " + std::string(5000, '{') + "\n")), "project.syntax");
  std::string dotted = "[a";
  for (int i = 0; i < 100000; ++i) dotted += ".a";
  EXPECT_EQ(error_id(pyproject(dotted + "]\n")), "project.syntax");
  std::string key = "x";
  for (int i = 0; i < 100000; ++i) key += ".x";
  EXPECT_EQ(error_id(pyproject(key + " = 1\n")), "project.syntax");
  // Dots inside strings are not keys.
  EXPECT_TRUE(pyproject("[project]\nname = \"" + std::string(1000, '.') + "\"\n").ok());
}

TEST(ProjectToml, HonoursTheRequirementsLimit) {
  std::string deps = "[project]\nname = \"p\"\ndependencies = [";
  for (int i = 0; i < 200; ++i) deps += "\"p" + std::to_string(i) + "\",";
  deps += "]\n";
  ProjectLimits limits;
  limits.max_requirements = 100;
  EXPECT_EQ(error_id(pyproject(deps, {}, limits)), "project.too_many");
  EXPECT_TRUE(pyproject(deps).ok());
  std::string packages = "lock-version = \"1.0\"\n";
  for (int i = 0; i < 200; ++i) packages += "[[packages]]\nname = \"p" + std::to_string(i) + "\"\nversion = \"1\"\n";
  EXPECT_EQ(error_id(parse_pylock(packages, "pylock.toml", {}, limits)), "project.too_many");
}

}  // namespace project_toml_test

// Inputs toml++ 3.3 itself mishandles (found by fuzz/project_fuzz.cpp: an assertion on "[%x]", __builtin_unreachable on
// some non-ASCII characters where it looks for whitespace) are refused as TOML before toml++ reads them, and what is
// valid TOML with non-ASCII text in strings and comments still reads.
namespace toml_guards {

gpuenv::Result<gpuenv::packages::ProjectFile> pyproject_of(const std::string& text) {
  return gpuenv::packages::parse_pyproject(text, "pyproject.toml", {}, {});
}

TEST(ProjectTomlGuards, NonAsciiOutsideStringsControlCharactersAndBadHeadersAreSyntaxErrors) {
  for (const std::string text : {std::string("[project]\nname = \"x\"\nver\xcd\x89sion = \"1\"\n"), std::string("[%roject]\nname = \"x\"\n"),
                                 std::string("[\0project]\n", 11), std::string("[project]\nname = \"x\x01\"\n"),
                                 std::string("[project]\nname = \"x\" \xe3\x80\x80\n"), std::string("[project]\nv = 3d95'511\xc7\x83\n")}) {
    auto f = pyproject_of(text);
    ASSERT_FALSE(f.ok()) << text;
    EXPECT_EQ(f.error().id, "project.syntax") << text;
  }
}

TEST(ProjectTomlGuards, NonAsciiInStringsAndCommentsStillReads) {
  auto f = pyproject_of("# d\xc3\xa9j\xc3\xa0 vu\n[project]\nname = \"d\xc3\xa9mo\"\ndescription = '''caf\xc3\xa9 ''''\n"
                        "readme = \"\"\"a \\\"q\\\" \xe2\x80\x94 \\\n  \xc3\xa9t\xc3\xa9 \"\"\"\"\nlicense = 'na\xc3\xafve'\ndependencies = [\"numpy>=1.26\"]  # \xe2\x9c\x93\n");
  ASSERT_TRUE(f.ok()) << f.error().to_string();
  ASSERT_EQ(f->requirements.size(), 1u);
  EXPECT_EQ(f->requirements[0].name, "numpy");
}

}  // namespace toml_guards
