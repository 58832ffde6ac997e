// Wheel installation: a good wheel lands where pip puts it, with pip's wrappers and a fresh RECORD; every
// malformed or tampered wheel is refused and leaves nothing in the image or beside it. Wheels are built in
// memory with libarchive's zip writer; one test compares the result with `pip install` when pip is present.
#include "packages/wheels/wheel_install.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

namespace {

namespace fs = std::filesystem;
using namespace gpuenv;
using namespace gpuenv::packages;

struct Member {
  std::string path;
  std::string data;
  unsigned mode = 0644;
  char kind = 'f';  // f file, l symlink (data is the target)
};

std::string zip(const std::vector<Member>& members) {
  archive* a = archive_write_new();
  archive_write_set_format_zip(a);
  std::vector<char> buf(8u << 20);
  std::size_t used = 0;
  archive_write_open_memory(a, buf.data(), buf.size(), &used);
  for (const auto& m : members) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, m.path.c_str());
    archive_entry_set_perm(e, m.mode);
    if (m.kind == 'l') {
      archive_entry_set_filetype(e, AE_IFLNK);
      archive_entry_set_symlink(e, m.data.c_str());
    } else {
      archive_entry_set_filetype(e, AE_IFREG);
      archive_entry_set_size(e, static_cast<la_int64_t>(m.data.size()));
    }
    archive_write_header(a, e);
    if (m.kind == 'f') archive_write_data(a, m.data.data(), m.data.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
  return std::string(buf.data(), used);
}

std::string record_for(const std::vector<Member>& members, const std::string& dist_info) {
  std::vector<RecordRow> rows;
  for (const auto& m : members) rows.push_back({m.path, record_hash(m.data), std::to_string(m.data.size())});
  rows.push_back({dist_info + "/RECORD", "", ""});
  return format_record(rows);
}

const std::string k_dist_info = "demo_pkg-1.0.dist-info";
const std::string k_wheel_name = "demo_pkg-1.0-py3-none-any.whl";

std::string wheel_file(bool purelib, const std::string& version = "1.0") {
  return "Wheel-Version: " + version + "\nGenerator: test\nRoot-Is-Purelib: " + (purelib ? "true" : "false") + "\nTag: py3-none-any\n";
}

// A pure wheel with a package, a console and a gui entry point, a data script, a header and a data file.
std::vector<Member> good_members() {
  return {
      {"demo/__init__.py", "def main():\n    return 0\n"},
      {"demo/sub.py", "class main:\n    @staticmethod\n    def run():\n        return 0\n"},
      {"demo_pkg-1.0.data/scripts/tool", "#!python\nprint('hi')\n", 0755},
      {"demo_pkg-1.0.data/scripts/plain.sh", "#!/bin/sh\necho plain\n", 0755},
      {"demo_pkg-1.0.data/headers/demo.h", "int demo;\n"},
      {"demo_pkg-1.0.data/data/share/demo/x.txt", "x\n"},
      {k_dist_info + "/METADATA", "Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0\n"},
      {k_dist_info + "/WHEEL", wheel_file(true)},
      {k_dist_info + "/entry_points.txt", "[console_scripts]\ndemo = demo:main\n\n[gui_scripts]\ndemo-gui = demo.sub:main.run [gui]\n"},
  };
}

std::string build_wheel(const std::vector<Member>& members, const std::string& dist_info = k_dist_info) {
  auto all = members;
  all.push_back({dist_info + "/RECORD", record_for(members, dist_info)});
  return zip(all);
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

unsigned mode_of(const fs::path& p) {
  struct stat st {};
  ::lstat(p.c_str(), &st);
  return st.st_mode & 07777;
}

InstallScheme debian_scheme() {
  InstallScheme s;
  s.purelib = "usr/local/lib/python3.11/dist-packages";
  s.platlib = "usr/local/lib/python3.11/dist-packages";
  s.scripts = "usr/local/bin";
  s.headers = "usr/local/include/python3.11/demo-pkg";
  s.data = "usr/local";
  s.interpreter = "/usr/bin/python3";
  return s;
}

class WheelInstall : public ::testing::Test {
 protected:
  void SetUp() override {
    base = fs::temp_directory_path() / ("gpuenv-whl-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(base);
    root = base / "root";
    fs::create_directories(root);
  }
  void TearDown() override { fs::remove_all(base); }

  // The installation must fail with `id` and leave the image empty and no staging directory beside it.
  void expect_refused(const std::string& bytes, const std::string& id, const std::string& filename = k_wheel_name,
                      const std::string& message_part = {}) {
    auto r = install_wheel(bytes, filename, root.string(), debian_scheme());
    ASSERT_FALSE(r.ok()) << "installed a bad wheel";
    EXPECT_EQ(r.error().id, id) << r.error().to_string();
    EXPECT_NE(r.error().message.find(message_part), std::string::npos) << r.error().to_string();
    EXPECT_TRUE(fs::is_empty(root)) << "the refused wheel left files in the image";
    for (const auto& e : fs::directory_iterator(base)) EXPECT_EQ(e.path(), root) << "left behind: " << e.path();
  }
  fs::path base, root;
};

TEST_F(WheelInstall, PureWheelSpreadsToTheScheme) {
  WheelInstallOptions o;
  o.requested = true;
  auto r = install_wheel(build_wheel(good_members()), k_wheel_name, root.string(), debian_scheme(), o);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->name, "demo_pkg");
  EXPECT_EQ(r->version, "1.0");
  const std::string site = "usr/local/lib/python3.11/dist-packages";
  EXPECT_EQ(r->dist_info, site + "/" + k_dist_info);
  const std::vector<std::string> expected = {
      "usr/local/bin/demo",
      "usr/local/bin/demo-gui",
      "usr/local/bin/plain.sh",
      "usr/local/bin/tool",
      "usr/local/include/python3.11/demo-pkg/demo.h",
      site + "/demo/__init__.py",
      site + "/demo/sub.py",
      site + "/" + k_dist_info + "/INSTALLER",
      site + "/" + k_dist_info + "/METADATA",
      site + "/" + k_dist_info + "/RECORD",
      site + "/" + k_dist_info + "/REQUESTED",
      site + "/" + k_dist_info + "/WHEEL",
      site + "/" + k_dist_info + "/entry_points.txt",
      "usr/local/share/demo/x.txt",
  };
  EXPECT_EQ(r->files, expected);
  std::set<std::string> on_disk;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (!e.is_directory()) on_disk.insert(e.path().lexically_relative(root).string());
  }
  EXPECT_EQ(on_disk, std::set<std::string>(expected.begin(), expected.end()));

  EXPECT_EQ(slurp(root / "usr/local/bin/tool"), "#!/usr/bin/python3\nprint('hi')\n");
  EXPECT_EQ(slurp(root / "usr/local/bin/plain.sh"), "#!/bin/sh\necho plain\n");
  EXPECT_EQ(slurp(root / "usr/local/bin/demo-gui"),
            "#!/usr/bin/python3\n# -*- coding: utf-8 -*-\nimport re\nimport sys\nfrom demo.sub import main\n"
            "if __name__ == '__main__':\n    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n"
            "    sys.exit(main.run())\n");
  EXPECT_EQ(slurp(root / site / k_dist_info / "INSTALLER"), "gpuenv\n");
  EXPECT_EQ(slurp(root / site / k_dist_info / "REQUESTED"), "");
  EXPECT_EQ(mode_of(root / "usr/local/bin/demo"), 0755u);
  EXPECT_EQ(mode_of(root / "usr/local/bin/tool"), 0755u);
  EXPECT_EQ(mode_of(root / site / "demo/__init__.py"), 0644u);
  EXPECT_EQ(mode_of(root / site / k_dist_info / "RECORD"), 0644u);
  EXPECT_EQ(mode_of(root / "usr/local/share/demo"), 0755u);

  // RECORD: sorted, relative to site-packages, hashes of what was installed, RECORD itself unhashed.
  const std::string record = slurp(root / site / k_dist_info / "RECORD");
  auto rows = parse_record(record, "RECORD");
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), expected.size());
  std::map<std::string, RecordRow> by_path;
  for (const auto& row : *rows) by_path[row.path] = row;
  ASSERT_TRUE(by_path.count("../../../bin/tool"));
  EXPECT_EQ(by_path["../../../bin/tool"].hash, record_hash("#!/usr/bin/python3\nprint('hi')\n"));
  EXPECT_EQ(by_path["../../../include/python3.11/demo-pkg/demo.h"].size, "10");
  EXPECT_EQ(by_path["demo/__init__.py"].hash, record_hash("def main():\n    return 0\n"));
  EXPECT_EQ(by_path[k_dist_info + "/RECORD"].hash, "");
  EXPECT_EQ(by_path[k_dist_info + "/RECORD"].size, "");
  EXPECT_EQ(by_path[k_dist_info + "/REQUESTED"].hash, record_hash(""));
  for (std::size_t i = 1; i < rows->size(); ++i) EXPECT_LT((*rows)[i - 1].path, (*rows)[i].path);
  EXPECT_FALSE(fs::exists(root / site / "demo/__pycache__"));
}

TEST_F(WheelInstall, RequestedIsWrittenOnlyWhenAsked) {
  auto r = install_wheel(build_wheel(good_members()), k_wheel_name, root.string(), debian_scheme());
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_FALSE(fs::exists(root / "usr/local/lib/python3.11/dist-packages" / k_dist_info / "REQUESTED"));
}

TEST_F(WheelInstall, OutputIsDeterministic) {
  const std::string bytes = build_wheel(good_members());
  ASSERT_TRUE(install_wheel(bytes, k_wheel_name, root.string(), debian_scheme()).ok());
  const fs::path other = base / "other";
  fs::create_directories(other);
  ASSERT_TRUE(install_wheel(bytes, k_wheel_name, other.string(), debian_scheme()).ok());
  const fs::path rec = fs::path("usr/local/lib/python3.11/dist-packages") / k_dist_info / "RECORD";
  EXPECT_EQ(slurp(root / rec), slurp(other / rec));
}

TEST_F(WheelInstall, PlatlibWheelGoesToPlatlib) {
  const std::string di = "fast_ext-2.0.dist-info";
  std::vector<Member> members = {
      {"fast_ext/_core.cpython-311-x86_64-linux-gnu.so", std::string("\x7f" "ELF\0\0", 6), 0755},
      {"fast_ext-2.0.data/purelib/fast_ext_pure.py", "x = 1\n"},
      {di + "/METADATA", "Metadata-Version: 2.1\nName: fast-ext\nVersion: 2.0\n"},
      {di + "/WHEEL", wheel_file(false)},
  };
  InstallScheme s = debian_scheme();
  s.purelib = "usr/lib/python3/dist-packages";
  s.platlib = "usr/lib/python3/platlib";
  auto r = install_wheel(build_wheel(members, di), "fast_ext-2.0-cp311-cp311-manylinux_2_17_x86_64.whl", root.string(), s);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(mode_of(root / "usr/lib/python3/platlib/fast_ext/_core.cpython-311-x86_64-linux-gnu.so"), 0755u);
  EXPECT_TRUE(fs::exists(root / "usr/lib/python3/dist-packages/fast_ext_pure.py"));
  EXPECT_TRUE(fs::exists(root / "usr/lib/python3/platlib" / di / "RECORD"));
  const std::string record = slurp(root / "usr/lib/python3/platlib" / di / "RECORD");
  EXPECT_NE(record.find("../dist-packages/fast_ext_pure.py,"), std::string::npos) << record;
}

TEST_F(WheelInstall, ReplacesFilesOfAnEarlierInstall) {
  const std::string bytes = build_wheel(good_members());
  ASSERT_TRUE(install_wheel(bytes, k_wheel_name, root.string(), debian_scheme()).ok());
  auto again = install_wheel(bytes, k_wheel_name, root.string(), debian_scheme());
  ASSERT_TRUE(again.ok()) << again.error().to_string();
}

TEST_F(WheelInstall, FollowsSymlinksInsideTheImage) {
  // Debian's merged /usr layout: an image where usr/local/bin points at a sibling directory.
  fs::create_directories(root / "usr/local/realbin");
  fs::create_directory_symlink("realbin", root / "usr/local/bin");
  auto r = install_wheel(build_wheel(good_members()), k_wheel_name, root.string(), debian_scheme());
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_TRUE(fs::exists(root / "usr/local/realbin/demo"));
}

TEST_F(WheelInstall, RefusesHashMismatch) {
  auto members = good_members();
  auto all = members;
  all.push_back({k_dist_info + "/RECORD", record_for(members, k_dist_info)});
  all[0].data = "def main():\n    return 1\n";  // same size, other bytes
  expect_refused(zip(all), "wheel.record_mismatch", k_wheel_name, "'demo/__init__.py' has sha256=");
}

TEST_F(WheelInstall, AcceptsARecordsWrongHashesOnlyWhenAskedAndWritesTheRealOnes) {
  // PyNvVideoCodec 2.0.4's published wheels: RECORD written before two libraries were last changed.
  auto members = good_members();
  auto all = members;
  all.push_back({k_dist_info + "/RECORD", record_for(members, k_dist_info)});
  all[0].data = "def main():\n    return 1\n";  // same size, other bytes
  const std::string bytes = zip(all);
  WheelInstallOptions options;
  options.accept_record_mismatch = true;
  auto r = install_wheel(bytes, k_wheel_name, root.string(), debian_scheme(), options);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->record_mismatches, std::vector<std::string>{"demo/__init__.py"});
  const std::string installed = slurp(root / "usr/local/lib/python3.11/dist-packages" / k_dist_info / "RECORD");
  EXPECT_NE(installed.find("demo/__init__.py," + record_hash(all[0].data)), std::string::npos) << installed;
  // A file RECORD does not list is refused all the same.
  fs::remove_all(root);
  fs::create_directories(root);
  all.push_back({"demo/sneaky.py", "import os\n"});
  auto sneaky = install_wheel(zip(all), k_wheel_name, root.string(), debian_scheme(), options);
  ASSERT_FALSE(sneaky.ok());
  EXPECT_EQ(sneaky.error().id, "wheel.record_mismatch");
  EXPECT_NE(sneaky.error().message.find("'demo/sneaky.py' is in the archive but not in RECORD"), std::string::npos);
}

TEST_F(WheelInstall, RefusesSizeMismatch) {
  auto members = good_members();
  std::vector<RecordRow> rows;
  for (const auto& m : members) rows.push_back({m.path, record_hash(m.data), std::to_string(m.data.size() + (m.path == "demo/sub.py"))});
  rows.push_back({k_dist_info + "/RECORD", "", ""});
  auto all = members;
  all.push_back({k_dist_info + "/RECORD", format_record(rows)});
  expect_refused(zip(all), "wheel.record_mismatch", k_wheel_name, "'demo/sub.py' is");
}

TEST_F(WheelInstall, RefusesFileMissingFromRecord) {
  auto members = good_members();
  auto all = members;
  all.push_back({k_dist_info + "/RECORD", record_for(members, k_dist_info)});
  all.push_back({"demo/sneaky.py", "import os\n"});
  expect_refused(zip(all), "wheel.record_mismatch", k_wheel_name, "'demo/sneaky.py' is in the archive but not in RECORD");
}

TEST_F(WheelInstall, RefusesRecordEntryMissingFromArchive) {
  auto members = good_members();
  auto all = members;
  all.push_back({k_dist_info + "/RECORD", record_for(members, k_dist_info)});
  all.erase(all.begin() + 1);  // demo/sub.py
  expect_refused(zip(all), "wheel.record_mismatch", k_wheel_name, "'demo/sub.py' is listed in RECORD but missing");
}

TEST_F(WheelInstall, RefusesFileWithoutHash) {
  auto members = good_members();
  std::vector<RecordRow> rows;
  for (const auto& m : members) rows.push_back({m.path, m.path == "demo/sub.py" ? "" : record_hash(m.data), ""});
  rows.push_back({k_dist_info + "/RECORD", "", ""});
  auto all = members;
  all.push_back({k_dist_info + "/RECORD", format_record(rows)});
  expect_refused(zip(all), "wheel.record_mismatch", k_wheel_name, "'demo/sub.py' has no hash");
}

TEST_F(WheelInstall, RefusesWeakHashAlgorithms) {
  auto members = good_members();
  std::vector<RecordRow> rows;
  for (const auto& m : members) rows.push_back({m.path, "md5=XUFAKrxLKna5cZ2REBfFkg", ""});
  rows.push_back({k_dist_info + "/RECORD", "", ""});
  auto all = members;
  all.push_back({k_dist_info + "/RECORD", format_record(rows)});
  expect_refused(zip(all), "wheel.bad_wheel", k_wheel_name, "'md5'");
}

TEST_F(WheelInstall, RefusesWheelWithoutRecord) { expect_refused(zip(good_members()), "wheel.bad_wheel", k_wheel_name, "RECORD"); }

TEST_F(WheelInstall, RefusesDistInfoNameMismatch) {
  expect_refused(build_wheel(good_members()), "wheel.bad_wheel", "other_pkg-1.0-py3-none-any.whl", "does not belong");
  expect_refused(build_wheel(good_members()), "wheel.bad_wheel", "demo_pkg-1.1-py3-none-any.whl", "does not belong");
}

TEST_F(WheelInstall, AcceptsNameSpellingsThatNormalizeAlike) {
  auto r = install_wheel(build_wheel(good_members()), "Demo.Pkg-1.0.0-py3-none-any.whl", root.string(), debian_scheme());
  ASSERT_TRUE(r.ok()) << r.error().to_string();
}

TEST_F(WheelInstall, RefusesPathTraversal) {
  auto members = good_members();
  members.push_back({"../escape.py", "x\n"});
  expect_refused(build_wheel(members), "archive.unsafe");
  EXPECT_FALSE(fs::exists(base.parent_path() / "escape.py"));
  auto absolute = good_members();
  absolute.push_back({(base / "abs.py").string(), "x\n"});
  expect_refused(build_wheel(absolute), "archive.unsafe");
}

TEST_F(WheelInstall, RefusesSymlinks) {
  auto members = good_members();
  auto all = members;
  all.push_back({k_dist_info + "/RECORD", record_for(members, k_dist_info)});
  all.push_back({"demo/link", "/etc/passwd", 0777, 'l'});
  expect_refused(zip(all), "wheel.bad_wheel", k_wheel_name, "not a regular file");
}

TEST_F(WheelInstall, RefusesWheelVersion2) {
  auto members = good_members();
  members[7].data = wheel_file(true, "2.0");
  expect_refused(build_wheel(members), "wheel.bad_wheel", k_wheel_name, "Wheel-Version 2.0");
}

TEST_F(WheelInstall, AcceptsNewerMinorWheelVersion) {
  auto members = good_members();
  members[7].data = wheel_file(true, "1.9");
  ASSERT_TRUE(install_wheel(build_wheel(members), k_wheel_name, root.string(), debian_scheme()).ok());
}

TEST_F(WheelInstall, RefusesUnknownDataSchemeKey) {
  auto members = good_members();
  members.push_back({"demo_pkg-1.0.data/etc/x.conf", "x\n"});
  expect_refused(build_wheel(members), "wheel.bad_wheel", k_wheel_name, "unknown scheme key 'etc'");
}

TEST_F(WheelInstall, RefusesTwoDistInfoDirectories) {
  auto members = good_members();
  members.push_back({"other-1.0.dist-info/METADATA", "x\n"});
  expect_refused(build_wheel(members), "wheel.bad_wheel", k_wheel_name, "several .dist-info");
}

TEST_F(WheelInstall, RefusesADataDirectoryOfAnotherProject) {
  auto members = good_members();
  members.push_back({"other-1.0.data/data/x", "x\n"});
  expect_refused(build_wheel(members), "wheel.bad_wheel", k_wheel_name, "several .data");
  auto alone = good_members();
  for (auto& m : alone) {
    if (m.path.starts_with("demo_pkg-1.0.data/")) m.path.replace(0, 12, "other-2.0");
  }
  expect_refused(build_wheel(alone), "wheel.bad_wheel", k_wheel_name, "does not belong");
}

TEST_F(WheelInstall, RefusesTwoFilesForOnePath) {
  auto members = good_members();
  members.push_back({"demo_pkg-1.0.data/purelib/demo/__init__.py", "y\n"});
  expect_refused(build_wheel(members), "wheel.bad_wheel", k_wheel_name, "install to");
}

TEST_F(WheelInstall, RefusesBadEntryPoint) {
  auto members = good_members();
  members[8].data = "[console_scripts]\n../../etc/evil = demo:main\n";
  expect_refused(build_wheel(members), "wheel.bad_wheel", k_wheel_name, "not a plain file name");
}

TEST_F(WheelInstall, RefusesBadFilename) { expect_refused(build_wheel(good_members()), "wheel.bad_wheel", "demo_pkg-1.0.zip"); }

TEST_F(WheelInstall, ConflictInTheImageMovesNothing) {
  fs::create_directories(root / "usr/local/bin/demo");  // a directory where the wrapper goes
  auto r = install_wheel(build_wheel(good_members()), k_wheel_name, root.string(), debian_scheme());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "wheel.target") << r.error().to_string();
  EXPECT_FALSE(fs::exists(root / "usr/local/lib"));
  EXPECT_TRUE(fs::is_empty(root / "usr/local/bin/demo"));
}

TEST_F(WheelInstall, RefusesASymlinkInTheImageThatLeavesIt) {
  const fs::path outside = base / "outside";
  fs::create_directories(outside);
  fs::create_directories(root / "usr");
  fs::create_directory_symlink(outside, root / "usr/local");
  auto r = install_wheel(build_wheel(good_members()), k_wheel_name, root.string(), debian_scheme());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "wheel.target") << r.error().to_string();
  EXPECT_TRUE(fs::is_empty(outside));
}

TEST(WheelFilename, ParsesNameVersionBuildAndTags) {
  auto f = split_wheel_filename("/cache/torch-2.5.1-1-cp311-cp311-manylinux_2_28_x86_64.whl");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->name, "torch");
  EXPECT_EQ(f->version, "2.5.1");
  EXPECT_EQ(f->build, "1");
  EXPECT_EQ(f->platform_tag, "manylinux_2_28_x86_64");
  EXPECT_FALSE(split_wheel_filename("torch-2.5.1.whl").ok());
  EXPECT_FALSE(split_wheel_filename("torch-2.5.1-x-cp311-cp311-any.whl").ok());  // build tags start with a digit
}

TEST(Record, ParsesQuotedFieldsAndCrlf) {
  auto rows = parse_record("a.py,sha256=x,1\r\n\"we,ird\"\"q\".py,sha256=y,2\r\n\r\nd/RECORD,,\n", "RECORD");
  ASSERT_TRUE(rows.ok()) << rows.error().to_string();
  ASSERT_EQ(rows->size(), 3u);
  EXPECT_EQ((*rows)[1].path, "we,ird\"q.py");
  EXPECT_EQ((*rows)[2].hash, "");
  EXPECT_EQ(format_record(*rows), "a.py,sha256=x,1\n\"we,ird\"\"q.py\",sha256=y,2\nd/RECORD,,\n");
}

TEST(Record, RefusesRowsWithoutThreeFields) {
  auto rows = parse_record("a.py,sha256=x,1\nb.py,sha256=y\n", "RECORD");
  ASSERT_FALSE(rows.ok());
  EXPECT_EQ(rows.error().where, "RECORD:2");
  EXPECT_FALSE(parse_record("\"open,x,1\n", "RECORD").ok());
}

TEST(Record, HashIsUrlsafeBase64WithoutPadding) {
  EXPECT_EQ(record_hash(""), "sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU");
  EXPECT_EQ(record_hash("pip\n"), "sha256=zuuue4knoyJ-UwPPXg8fezS7VCrXJQrAP7zeNuwvFQg");
}

TEST(EntryPoints, ReadsOnlyScriptSections) {
  auto eps = parse_script_entry_points(
      "# comment\n[console_scripts]\nfoo = pkg.cli:main\nbar=pkg:obj.attr [extra1, extra2]\n[other]\nx = y:z\n[gui_scripts]\nw = pkg.gui:run\n",
      "entry_points.txt");
  ASSERT_TRUE(eps.ok()) << eps.error().to_string();
  ASSERT_EQ(eps->size(), 3u);
  EXPECT_EQ((*eps)[1].name, "bar");
  EXPECT_EQ((*eps)[1].module, "pkg");
  EXPECT_EQ((*eps)[1].attr, "obj.attr");
  EXPECT_TRUE((*eps)[2].gui);
}

TEST(EntryPoints, RefusesCallablelessAndDuplicateEntries) {
  EXPECT_FALSE(parse_script_entry_points("[console_scripts]\nfoo = pkg.cli\n", "e").ok());
  EXPECT_FALSE(parse_script_entry_points("[console_scripts]\nfoo = a:b\n[gui_scripts]\nfoo = c:d\n", "e").ok());
  EXPECT_FALSE(parse_script_entry_points("[console_scripts]\n.. = a:b\n", "e").ok());
  EXPECT_FALSE(parse_script_entry_points("[console_scripts]\nfoo = a:b;import os\n", "e").ok());
}

TEST(ScriptShebang, UsesShTrampolineForSpacesAndLongPaths) {
  EXPECT_EQ(script_shebang("/usr/bin/python3"), "#!/usr/bin/python3\n");
  EXPECT_EQ(script_shebang("/opt/my py/bin/python"), "#!/bin/sh\n'''exec' \"/opt/my py/bin/python\" \"$0\" \"$@\"\n' '''");
  EXPECT_EQ(script_shebang("/" + std::string(130, 'p')).rfind("#!/bin/sh\n", 0), 0u);
}

// The oracle: pip installs the same wheel with --root/--prefix; the trees agree but for the differences
// documented below.
TEST_F(WheelInstall, AgreesWithPip) {
  if (std::system("python3 -m pip --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "python3 -m pip is not available";
  const fs::path whl = base / k_wheel_name;
  std::ofstream(whl, std::ios::binary) << build_wheel(good_members());
  const fs::path pip_root = base / "pip";
  const std::string cmd = "python3 -m pip install --no-deps --no-compile --no-index --disable-pip-version-check "
                          "--no-warn-script-location -q --root " + pip_root.string() + " --prefix /usr/local " + whl.string() +
                          " >" + (base / "pip.log").string() + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << slurp(base / "pip.log");

  // pip's scheme depends on the interpreter (site-packages vs dist-packages): read it off pip's tree.
  std::set<std::string> pip_files;
  std::string site, headers;
  for (const auto& e : fs::recursive_directory_iterator(pip_root)) {
    if (e.is_directory()) continue;
    const std::string rel = e.path().lexically_relative(pip_root).string();
    pip_files.insert(rel);
    if (e.path().filename() == "METADATA") site = e.path().parent_path().parent_path().lexically_relative(pip_root).string();
    if (e.path().filename() == "demo.h") headers = e.path().parent_path().lexically_relative(pip_root).string();
  }
  ASSERT_FALSE(site.empty());
  InstallScheme s = debian_scheme();
  s.purelib = s.platlib = site;
  s.headers = headers;
  WheelInstallOptions o;
  o.requested = true;  // pip marks a project named on its command line as requested
  auto r = install_wheel(slurp(whl), k_wheel_name, root.string(), s, o);
  ASSERT_TRUE(r.ok()) << r.error().to_string();

  // Accepted difference 1: pip writes direct_url.json (PEP 610) for an install from a local file; gpuenv installs
  // from its own cache and records no URL.
  const std::string direct_url = site + "/" + k_dist_info + "/direct_url.json";
  EXPECT_TRUE(pip_files.erase(direct_url));
  EXPECT_EQ(std::set<std::string>(r->files.begin(), r->files.end()), pip_files);

  auto without_first_line = [](const std::string& text) { return text.substr(text.find('\n') + 1); };
  for (const auto& f : pip_files) {
    const std::string mine = slurp(root / f), theirs = slurp(pip_root / f);
    if (f.ends_with("/INSTALLER")) {
      EXPECT_EQ(mine, "gpuenv\n");  // Accepted difference 2: the installer's name.
      EXPECT_EQ(theirs, "pip\n");
    } else if (f.ends_with("/RECORD")) {
      continue;  // compared below
    } else if (f.starts_with("usr/local/bin/") && mine != theirs) {
      // Accepted difference 3: rewritten and generated shebangs name the image's interpreter, not the host's.
      EXPECT_EQ(mine.substr(0, mine.find('\n')), "#!/usr/bin/python3") << f;
      EXPECT_EQ(without_first_line(mine), without_first_line(theirs)) << f;
    } else {
      EXPECT_EQ(mine, theirs) << f;
    }
    EXPECT_EQ((mode_of(root / f) & 0111) != 0, (mode_of(pip_root / f) & 0111) != 0) << f;
  }

  // RECORD lists the same paths; rows of files installed unchanged are identical. Accepted difference 4: pip
  // ends RECORD lines with CRLF (csv's default), gpuenv with LF as pypa/installer does.
  const std::string rec = site + "/" + k_dist_info + "/RECORD";
  auto mine = parse_record(slurp(root / rec), "mine");
  auto theirs = parse_record(slurp(pip_root / rec), "pip");
  ASSERT_TRUE(mine.ok() && theirs.ok());
  std::map<std::string, RecordRow> pip_rows;
  for (const auto& row : *theirs) {
    if (!row.path.ends_with("direct_url.json")) pip_rows[row.path] = row;
  }
  ASSERT_EQ(mine->size(), pip_rows.size());
  for (const auto& row : *mine) {
    ASSERT_TRUE(pip_rows.count(row.path)) << row.path;
    const bool rewritten = row.path.find("/bin/") != std::string::npos || row.path.ends_with("/INSTALLER");
    if (!rewritten) {
      EXPECT_EQ(row.hash, pip_rows[row.path].hash) << row.path;
      EXPECT_EQ(row.size, pip_rows[row.path].size) << row.path;
    }
  }
}

}  // namespace

namespace {

TEST(WheelFile, RootIsPurelibFromTheFirstHeaderOfAVersion1Wheel) {
  auto pure = gpuenv::packages::parse_wheel_file("Wheel-Version: 1.0\nGenerator: x\nRoot-Is-Purelib: True\nRoot-Is-Purelib: false\n", "WHEEL");
  ASSERT_TRUE(pure) << pure.error().message;
  EXPECT_TRUE(*pure);
  auto plat = gpuenv::packages::parse_wheel_file("Wheel-Version: 1.9\r\nRoot-Is-Purelib: false\r\n", "WHEEL");
  ASSERT_TRUE(plat) << plat.error().message;
  EXPECT_FALSE(*plat);
  // Headers end at the first blank line, as email.message reads them.
  auto after_blank = gpuenv::packages::parse_wheel_file("Wheel-Version: 1.0\n\nRoot-Is-Purelib: true\n", "WHEEL");
  ASSERT_TRUE(after_blank);
  EXPECT_FALSE(*after_blank);
}

TEST(WheelFile, RefusesAMissingOrNewerWheelVersion) {
  for (const char* text : {"Root-Is-Purelib: true\n", "Wheel-Version:\n", "Wheel-Version: 2.0\n", "\nWheel-Version: 1.0\n"}) {
    auto r = gpuenv::packages::parse_wheel_file(text, "a-1.0.dist-info/WHEEL");
    ASSERT_FALSE(r) << text;
    EXPECT_EQ(r.error().id, "wheel.bad_wheel") << text;
    EXPECT_NE(r.error().where.find("a-1.0.dist-info/WHEEL"), std::string::npos) << text;
  }
}

}  // namespace
