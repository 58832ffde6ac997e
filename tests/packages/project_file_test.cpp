// packages/wheels/project_file: requirements files (pip's format) and conda environment files read into requirements,
// their hashes and indexes; includes followed within the project directory; hostile files refused with what and where.
#include "packages/wheels/project_file.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace gpuenv::packages {
namespace {

namespace fs = std::filesystem;

class ProjectDir : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuenv-project-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir = tmpl;
  }
  void TearDown() override { fs::remove_all(dir); }
  std::string write(const std::string& name, const std::string& text) {
    const fs::path p = dir / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
  fs::path dir;
};

Environment linux_env(const std::string& machine, const std::string& python) { return cpython_linux_environment(machine, python); }

Result<ProjectFile> parse(const std::string& text, ProjectFormat format = ProjectFormat::requirements) {
  return parse_project_text(text, format, "requirements.txt", {});
}

const std::string k_hash_a = "sha256:3ad2a3decf9aaba3d29c8f537ac4b243e36bef957511b4766cb0057d32b0be85";
const std::string k_hash_b = "sha256:0ffe8360326f7d48f0b6e5e1fcf18a0ad7ed90d0b4d1a5c24d9a3b0a6c1b8f11";

TEST(ProjectFormat, TheFileNameSaysTheFormat) {
  EXPECT_EQ(project_format_of("a/b/uv.lock"), ProjectFormat::uv_lock);
  EXPECT_EQ(project_format_of("pyproject.toml"), ProjectFormat::pyproject);
  EXPECT_EQ(project_format_of("pylock.toml"), ProjectFormat::pylock);
  EXPECT_EQ(project_format_of("x/pylock.dev.toml"), ProjectFormat::pylock);
  EXPECT_EQ(project_format_of("environment.yml"), ProjectFormat::conda_environment);
  EXPECT_EQ(project_format_of("requirements-dev.txt"), ProjectFormat::requirements);
  EXPECT_EQ(project_format_of("reqs.in"), ProjectFormat::requirements);
}

TEST(RequirementsFile, KeepsPinsMarkersHashesAndIndexes) {
  auto f = parse("# a comment\n--index-url https://idx.example/simple\n--extra-index-url https://extra.example/simple\n"
                 "numpy==2.1.3 ; python_version >= \"3.10\" \\\n    --hash=" + k_hash_a + " \\\n    --hash " + k_hash_b + "\n"
                 "PyYAML==6.0.2 --hash=" + k_hash_b + "  # trailing comment\n");
  ASSERT_TRUE(f) << f.error().to_string();
  EXPECT_EQ(f->index_url, "https://idx.example/simple");
  EXPECT_EQ(f->extra_index_urls, std::vector<std::string>{"https://extra.example/simple"});
  EXPECT_TRUE(f->hashes_required);
  ASSERT_EQ(f->requirements.size(), 2u);
  EXPECT_EQ(f->requirements[0].name, "numpy");
  EXPECT_EQ(f->requirements[0].requirement, "numpy==2.1.3");
  ASSERT_TRUE(f->requirements[0].marker);
  EXPECT_EQ(f->requirements[0].hashes.size(), 2u);
  EXPECT_EQ(f->requirements[0].where, "requirements.txt:4");
  EXPECT_EQ(f->requirements[1].name, "pyyaml");
  EXPECT_EQ(f->requirements[1].where, "requirements.txt:7");
}

TEST(RequirementsFile, MarkersAreEvaluatedForTheTarget) {
  auto f = parse("tomli==2.0.1 ; python_version < \"3.11\"\npywin32==306 ; sys_platform == \"win32\"\n"
                 "nvidia-nccl-cu12 ; platform_machine == \"x86_64\"\nrequests[socks]>=2.31\n");
  ASSERT_TRUE(f) << f.error().to_string();
  auto x86 = project_requirements(*f, linux_env("x86_64", "3.10"));
  ASSERT_TRUE(x86);
  std::vector<std::string> names;
  for (const auto& r : *x86) names.push_back(r.requirement);
  EXPECT_EQ(names, (std::vector<std::string>{"tomli==2.0.1", "nvidia-nccl-cu12", "requests[socks]>=2.31"}));
  auto arm = project_requirements(*f, linux_env("aarch64", "3.12"));
  ASSERT_TRUE(arm);
  ASSERT_EQ(arm->size(), 1u);
  EXPECT_EQ((*arm)[0].requirement, "requests[socks]>=2.31");
}

TEST(RequirementsFile, ProjectPinIsAnExactPinForSomeLinux) {
  auto f = parse("torch==2.5.1+cu118 ; sys_platform == \"linux\"\njax==0.4.30 ; sys_platform == \"darwin\"\ntensorflow>=2.16\n");
  ASSERT_TRUE(f) << f.error().to_string();
  EXPECT_EQ(project_pin(*f, "torch"), "2.5.1+cu118");
  EXPECT_FALSE(project_pin(*f, "jax"));         // never on Linux
  EXPECT_FALSE(project_pin(*f, "tensorflow"));  // a range is resolved, not a pin
}

TEST(RequirementsFile, HashModeNeedsEveryRequirementPinnedWithHashes) {
  auto unpinned = parse("numpy>=2 --hash=" + k_hash_a + "\n");
  ASSERT_FALSE(unpinned);
  EXPECT_EQ(unpinned.error().id, "project.hash_unpinned");
  auto missing = parse("numpy==2.1.3 --hash=" + k_hash_a + "\npyyaml==6.0.2\n");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().id, "project.hash_missing");
  EXPECT_EQ(missing.error().where, "requirements.txt:2");
  auto required = parse("--require-hashes\npyyaml==6.0.2\n");
  ASSERT_FALSE(required);
  EXPECT_EQ(required.error().id, "project.hash_missing");
}

TEST(RequirementsFile, HostileLinesAreRefusedWithWhereAndWhat) {
  struct Case {
    std::string text, id, where;
  };
  const std::vector<Case> cases = {
      {"numpy==1 --hash=sha256:abc\n", "project.hash", "requirements.txt:1"},
      {"numpy==1 --hash=md5:0123456789abcdef0123456789abcdef\n", "project.hash", "requirements.txt:1"},
      {"\n\nfile:///etc/passwd\n", "project.url_requirement", "requirements.txt:3"},
      {"./wheels/foo-1.0-py3-none-any.whl\n", "project.url_requirement", "requirements.txt:1"},
      {"foo @ file:///tmp/foo-1.0-py3-none-any.whl\n", "project.url_requirement", "requirements.txt:1"},
      {"git+https://example.invalid/x.git#egg=x\n", "project.url_requirement", "requirements.txt:1"},
      {"-e .\n", "project.editable", "requirements.txt:1"},
      {"--find-links /opt/wheels\nfoo\n", "project.option", "requirements.txt:1"},
      {"--trusted-host evil.example\n", "project.option", "requirements.txt:1"},
      {"foo==${VERSION}\n", "project.variable", "requirements.txt:1"},
      {"--index-url ftp://x/simple\n", "project.index", "requirements.txt:1"},
      {"numpy[cuda\n", "project.syntax", "requirements.txt:1"},
      {"-r other.txt\n", "project.include", "requirements.txt:1"},
      {"numpy==1 --install-option=--prefix=/\n", "project.option", "requirements.txt:1"},
  };
  for (const auto& c : cases) {
    auto f = parse(c.text);
    ASSERT_FALSE(f) << c.text;
    EXPECT_EQ(f.error().id, c.id) << c.text << " -> " << f.error().to_string();
    EXPECT_EQ(f.error().where, c.where) << c.text;
    EXPECT_FALSE(f.error().hint.empty()) << c.text;
  }
}

TEST(RequirementsFile, TooLargeIsRefusedBeforeParsing) {
  ProjectLimits limits;
  limits.max_bytes = 1024;
  auto f = parse_project_text(std::string(4096, 'a'), ProjectFormat::requirements, "big.txt", {}, limits);
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().id, "project.read");
}

TEST(RequirementsFile, ExtrasAndGroupsAreNotAPartOfIt) {
  auto f = parse_project_text("numpy\n", ProjectFormat::requirements, "requirements.txt", ProjectSelection{{"cuda"}, {}});
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().id, "project.unknown_extra");
}

TEST_F(ProjectDir, IncludesAreFollowedInPlaceAndConstraintsKeptApart) {
  write("base.txt", "pyyaml==6.0.2\n");
  write("sub/more.txt", "-r ../base.txt\nattrs==24.2.0\n");
  write("constraints.txt", "numpy<2\n");
  const auto top = write("requirements.txt", "requests==2.32.3\n-r sub/more.txt\n-c constraints.txt\n");
  auto f = read_project_file(top, {});
  ASSERT_TRUE(f) << f.error().to_string();
  std::vector<std::string> names;
  for (const auto& r : f->requirements) names.push_back(r.name);
  EXPECT_EQ(names, (std::vector<std::string>{"requests", "pyyaml", "attrs"}));
  ASSERT_EQ(f->constraints.size(), 1u);
  EXPECT_EQ(f->constraints[0].requirement, "numpy<2");
}

TEST_F(ProjectDir, AnIncludeLoopIsRefusedNamingTheChain) {
  write("a.txt", "-r b.txt\n");
  write("b.txt", "-r a.txt\n");
  auto f = read_project_file((dir / "a.txt").string(), {});
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().id, "project.include_loop");
  EXPECT_NE(f.error().message.find("a.txt -> b.txt -> a.txt"), std::string::npos) << f.error().message;
  write("self.txt", "-r self.txt\n");
  auto self = read_project_file((dir / "self.txt").string(), {});
  ASSERT_FALSE(self);
  EXPECT_EQ(self.error().id, "project.include_loop");
}

TEST_F(ProjectDir, AnIncludeOutsideTheProjectIsRefused) {
  write("inner/requirements.txt", "-r ../outside.txt\n");
  write("outside.txt", "numpy\n");
  auto f = read_project_file((dir / "inner/requirements.txt").string(), {});
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().id, "project.include_outside");
  write("abs.txt", "-r /etc/passwd\n");
  auto abs = read_project_file((dir / "abs.txt").string(), {});
  ASSERT_FALSE(abs);
  EXPECT_EQ(abs.error().id, "project.include_outside");
  fs::create_symlink("/etc", dir / "etc");
  write("link.txt", "-r etc/passwd\n");
  auto link = read_project_file((dir / "link.txt").string(), {});
  ASSERT_FALSE(link);
  EXPECT_EQ(link.error().id, "project.include_outside");
}

TEST_F(ProjectDir, AHugeFileIsRefusedWithoutReadingIt) {
  const auto p = (dir / "huge.txt").string();
  {
    std::ofstream o(p, std::ios::binary);
    o.seekp((100u << 20) - 1);
    o.put('\n');
  }
  auto f = read_project_file(p, {});
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().id, "project.read");
  EXPECT_EQ(f.error().kind, ErrorKind::spec);
}

TEST_F(ProjectDir, AMissingFileSaysWhichPath) {
  auto f = read_project_file((dir / "nope.txt").string(), {});
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().id, "project.read");
}

TEST(CondaEnvironment, ThePipSectionIsReadAndCondaPackagesRefused) {
  auto ok = parse_project_text("name: demo\nchannels: [conda-forge]\ndependencies:\n  - python=3.11\n  - pip\n  - pip:\n    - numpy==2.1.3\n    - --extra-index-url https://extra.example/simple\n",
                               ProjectFormat::conda_environment, "environment.yml", {});
  ASSERT_TRUE(ok) << ok.error().to_string();
  ASSERT_EQ(ok->requirements.size(), 1u);
  EXPECT_EQ(ok->requirements[0].requirement, "numpy==2.1.3");
  EXPECT_EQ(ok->requirements[0].where, "environment.yml:7:7");
  EXPECT_EQ(ok->extra_index_urls.size(), 1u);
  auto conda = parse_project_text("dependencies:\n  - python=3.11\n  - numpy=1.26\n  - conda-forge::cudatoolkit=11.8\n  - pip:\n    - pyyaml\n",
                                  ProjectFormat::conda_environment, "environment.yml", {});
  ASSERT_FALSE(conda);
  EXPECT_EQ(conda.error().id, "project.conda");
  EXPECT_NE(conda.error().message.find("numpy=1.26, conda-forge::cudatoolkit=11.8"), std::string::npos) << conda.error().message;
  EXPECT_NE(conda.error().hint.find("conda channels are not a source"), std::string::npos);
  auto bad = parse_project_text("dependencies: 3\n", ProjectFormat::conda_environment, "environment.yml", {});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().id, "project.syntax");
}

}  // namespace
}  // namespace gpuenv::packages
