// Installing .debs built by dpkg-deb into a root without dpkg; dpkg-query reads the database gpuenv writes.
#include "images/rootfs/deb_rootfs.hpp"

#include <gtest/gtest.h>

#include <tuple>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include "fakes/files.hpp"

namespace {

namespace fs = std::filesystem;
using namespace gpuenv;
using namespace gpuenv::images;

std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  while (std::size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  pclose(p);
  return out;
}

using gpuenv::testing::read_all;

class DebRootfs : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("command -v dpkg-deb >/dev/null && command -v dpkg-query >/dev/null") != 0) GTEST_SKIP() << "dpkg-deb/dpkg-query missing";
    dir = fs::temp_directory_path() / ("gpuenv-rootfs-" + std::to_string(::getpid()) + "-" +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    root = dir / "root";
    fs::create_directories(root);
    build("hello", "1.0-1", "", {{"usr/bin/hello", "#!/bin/sh\n"}, {"usr/share/doc/hello/copyright", "free"},
                                 {"usr/share/doc/hello/README", "docs"}, {"usr/share/man/man1/hello.1", "man"},
                                 {"etc/hello.conf", "greeting=hi\n"}},
          {{"conffiles", "/etc/hello.conf\n"}, {"md5sums", "0123456789abcdef0123456789abcdef  usr/bin/hello\n"}});
    build("base-passwd", "3.6.1", "", {{"usr/share/base-passwd/passwd.master", "root:*:0:0:root:/root:/bin/sh\n"},
                                       {"usr/share/base-passwd/group.master", "root:*:0:\n"}});
    build("libfoo1", "2.0-1", "Multi-Arch: same\n", {{"usr/lib/x86_64-linux-gnu/libfoo.so.1", "elf"}});
  }
  void TearDown() override { fs::remove_all(dir); }

  void build(const std::string& name, const std::string& version, const std::string& extra,
             const std::vector<std::pair<std::string, std::string>>& files,
             const std::vector<std::pair<std::string, std::string>>& control_files = {}) {
    const fs::path pkg = dir / "build" / name;
    fs::create_directories(pkg / "DEBIAN");
    std::ofstream(pkg / "DEBIAN/control") << "Package: " << name << "\nVersion: " << version << "\nArchitecture: amd64\n"
                                          << extra << "Maintainer: t <t@example.com>\nDescription: test\n";
    for (const auto& [path, content] : control_files) std::ofstream(pkg / "DEBIAN" / path) << content;
    for (const auto& [path, content] : files) {
      fs::create_directories((pkg / path).parent_path());
      std::ofstream(pkg / path) << content;
    }
    const fs::path deb = dir / (name + ".deb");
    ASSERT_EQ(std::system(("dpkg-deb --root-owner-group --build " + pkg.string() + " " + deb.string() + " >/dev/null").c_str()), 0);
    debs.push_back(read_all(deb));
  }

  std::vector<InstalledDeb> install_all() {
    ExtractOptions o;
    o.keep = keep_in_minimal_image;
    std::vector<InstalledDeb> out;
    for (std::size_t i = 0; i < debs.size(); ++i) {
      auto d = install_deb(debs[i], "pkg" + std::to_string(i), root.string(), o);
      EXPECT_TRUE(d.ok()) << d.error().to_string();
      if (d) out.push_back(std::move(*d));
    }
    return out;
  }

  fs::path dir, root;
  std::vector<std::string> debs;
};

TEST_F(DebRootfs, DpkgQueryReadsTheDatabase) {
  auto installed = install_all();
  ASSERT_EQ(installed.size(), 3u);
  ASSERT_TRUE(write_dpkg_database(root.string(), installed).ok());
  const std::string admin = (root / "var/lib/dpkg").string();
  EXPECT_EQ(run("dpkg-query --admindir=" + admin + " -W -f='${Package} ${Version} ${db:Status-Abbrev}\\n'"),
            "base-passwd 3.6.1 ii \nhello 1.0-1 ii \nlibfoo1 2.0-1 ii \n");
  const std::string files = run("dpkg-query --admindir=" + admin + " -L hello");
  EXPECT_NE(files.find("/usr/bin/hello"), std::string::npos) << files;
  EXPECT_NE(run("dpkg-query --admindir=" + admin + " -S /usr/lib/x86_64-linux-gnu/libfoo.so.1").find("libfoo1"), std::string::npos);
  // dpkg records the md5 of each installed conffile: md5("greeting=hi\n")
  EXPECT_EQ(run("dpkg-query --admindir=" + admin + " -W -f='${Conffiles}' hello"), " /etc/hello.conf " + run("printf 'greeting=hi\\n' | md5sum | cut -d' ' -f1 | tr -d '\\n'"));
  EXPECT_TRUE(fs::exists(root / "var/lib/dpkg/info/hello.md5sums"));
  EXPECT_TRUE(fs::exists(root / "var/lib/dpkg/info/hello.conffiles"));
}

TEST_F(DebRootfs, MinimalImagesLeaveDocsOutButKeepCopyright) {
  install_all();
  EXPECT_TRUE(fs::exists(root / "usr/bin/hello"));
  EXPECT_TRUE(fs::exists(root / "usr/share/doc/hello/copyright"));
  EXPECT_FALSE(fs::exists(root / "usr/share/doc/hello/README"));
  EXPECT_FALSE(fs::exists(root / "usr/share/man/man1/hello.1"));
  EXPECT_TRUE(keep_in_minimal_image("usr/share/docs-are-not-docs"));
  EXPECT_FALSE(keep_in_minimal_image("usr/share/locale/de/LC_MESSAGES/x.mo"));
}

TEST_F(DebRootfs, BasePasswdEffects) {
  install_all();
  ASSERT_TRUE(apply_base_passwd(root.string()).ok());
  EXPECT_EQ(read_all(root / "etc/passwd"), "root:*:0:0:root:/root:/bin/sh\n");
  EXPECT_EQ(read_all(root / "etc/group"), "root:*:0:\n");
  std::ofstream(root / "etc/passwd") << "custom\n";
  ASSERT_TRUE(apply_base_passwd(root.string()).ok());
  EXPECT_EQ(read_all(root / "etc/passwd"), "custom\n");  // an existing file is kept, as the preinst does
}

// Before: the masters were read and etc/ written by plain paths, following links out of the tree: a package whose
// passwd.master linked to a host file had that file copied into the image, and an etc/ linking to a host
// directory got passwd written there.
TEST_F(DebRootfs, BasePasswdNeitherReadsNorWritesThroughLinksOutOfTheTree) {
  fs::create_directories(dir / "host/etc");
  std::ofstream(dir / "host/shadow") << "root:$6$secret:19000:0:99999:7:::\n";
  fs::create_directories(root / "usr/share/base-passwd");
  fs::create_symlink(dir / "host/shadow", root / "usr/share/base-passwd/passwd.master");
  ASSERT_TRUE(apply_base_passwd(root.string()).ok());
  EXPECT_FALSE(fs::exists(fs::symlink_status(root / "etc/passwd"))) << "a host file was copied into the image";

  std::ofstream(root / "usr/share/base-passwd/group.master") << "root:*:0:\n";
  fs::create_directory_symlink(dir / "host/etc", root / "etc");
  auto r = apply_base_passwd(root.string());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "archive.unsafe") << r.error().to_string();
  EXPECT_TRUE(fs::is_empty(dir / "host/etc")) << "written into a host directory";
}

TEST_F(DebRootfs, DatabaseIsDeterministic) {
  auto installed = install_all();
  ASSERT_TRUE(write_dpkg_database(root.string(), installed).ok());
  const std::string first = read_all(root / "var/lib/dpkg/status");
  std::reverse(installed.begin(), installed.end());
  ASSERT_TRUE(write_dpkg_database(root.string(), installed).ok());
  EXPECT_EQ(read_all(root / "var/lib/dpkg/status"), first);
  EXPECT_EQ(first.find("Package: base-passwd\nStatus: install ok installed\n"), 0u);
}

TEST_F(DebRootfs, DamagedPackageIsRefused) {
  auto r = install_deb(debs[0].substr(0, debs[0].size() / 2), "half.deb", root.string(), {});
  ASSERT_FALSE(r.ok());
}

/// A .deb built without dpkg-deb's checks, so its control file can say what a hostile package would.
std::string raw_deb(const fs::path& dir, const std::string& tag, const std::string& control,
                    const std::vector<std::pair<std::string, std::string>>& control_files, const std::string& fill = "") {
  const fs::path pkg = dir / "raw" / tag;
  fs::create_directories(pkg / "DEBIAN");
  std::ofstream(pkg / "DEBIAN/control") << control;
  for (const auto& [path, content] : control_files) std::ofstream(pkg / "DEBIAN" / path) << content;
  if (!fill.empty()) EXPECT_EQ(std::system(("cd " + pkg.string() + " && " + fill).c_str()), 0);
  const fs::path deb = dir / (tag + ".deb");
  EXPECT_EQ(std::system(("dpkg-deb --nocheck --root-owner-group --build " + pkg.string() + " " + deb.string() + " >/dev/null 2>&1").c_str()), 0);
  return read_all(deb);
}

TEST_F(DebRootfs, NamesAndConffilesFromAPackageNeverBecomePathsOutsideTheRoot) {
  const std::string tail = "Version: 1\nArchitecture: amd64\nMaintainer: t <t@example.com>\nDescription: t\n";
  for (const auto& [tag, control, conffiles] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"name", "Package: ../../x\n" + tail, ""},
           {"arch", "Package: ok\nVersion: 1\nArchitecture: ../x\nMaintainer: t <t@example.com>\nDescription: t\n", ""},
           {"conffile", "Package: ok\n" + tail, "/etc/../../../etc/passwd\n"},
       }) {
    auto r = install_deb(raw_deb(dir, tag, control, conffiles.empty() ? std::vector<std::pair<std::string, std::string>>{}
                                                                      : std::vector<std::pair<std::string, std::string>>{{"conffiles", conffiles}}),
                         tag + ".deb", root.string(), {});
    ASSERT_FALSE(r.ok()) << tag;
    EXPECT_EQ(r.error().id, "rootfs.bad_control") << tag << ": " << r.error().to_string();
  }
}

TEST_F(DebRootfs, ADpkgDirectoryThatLeadsOutOfTheRootIsNeverWrittenThrough) {
  const fs::path outside = dir / "host-dir";
  fs::create_directories(outside);
  const std::string tail = "Version: 1\nArchitecture: amd64\nMaintainer: t <t@example.com>\nDescription: t\n";
  auto evil = install_deb(raw_deb(dir, "evil", "Package: evil\n" + tail, {}, "mkdir -p var/lib/dpkg && ln -s " + outside.string() + " var/lib/dpkg/info"),
                          "evil.deb", root.string(), {});
  ASSERT_TRUE(evil.ok()) << evil.error().to_string();  // a symlink inside the tree is a valid entry
  auto installed = install_all();
  installed.push_back(std::move(*evil));
  auto st = write_dpkg_database(root.string(), installed);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().id, "archive.unsafe") << st.error().to_string();
  EXPECT_TRUE(fs::is_empty(outside)) << "the dpkg database was written on the host";
}

}  // namespace

namespace {

using namespace gpuenv;
using namespace gpuenv::images;

DebContents control_only(std::string control, std::string conffiles = {}) {
  DebContents c;
  c.control = std::move(control);
  c.conffiles = std::move(conffiles);
  return c;
}

// read_deb_control is what install_deb records of an extracted package (and what the dpkg database is written from).
TEST(DebControl, OneStanzaGivesNameVersionArchitectureAndPlainConffiles) {
  auto d = read_deb_control(control_only("Package: libfoo1\nVersion: 1.2-3\nArchitecture: amd64\nMulti-Arch: same\n",
                                         "/etc/foo.conf\nremove-on-upgrade /etc/old.conf\nnot/absolute\n\n"),
                            "libfoo1.deb");
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(d->name, "libfoo1");
  EXPECT_EQ(d->version, "1.2-3");
  EXPECT_EQ(d->architecture, "amd64");
  EXPECT_EQ(d->multi_arch, "same");
  EXPECT_EQ(d->conffiles, (std::vector<std::string>{"/etc/foo.conf", "/etc/old.conf"}));
}

TEST(DebControl, RefusesNamesOutsidePolicyTwoStanzasAndConffilesThatLeave) {
  for (const char* control : {"Package: ../../x\nVersion: 1\n", "Package: a\n\nPackage: b\nVersion: 1\n", "Version: 1\n",
                              "Package: ab\nVersion: 1\nArchitecture: ../amd64\n"}) {
    auto d = read_deb_control(control_only(control), "x.deb");
    ASSERT_FALSE(d) << control;
    EXPECT_EQ(d.error().id, "rootfs.bad_control") << control;
  }
  auto d = read_deb_control(control_only("Package: ab\nVersion: 1\n", "/etc/../../home/x\n"), "x.deb");
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().id, "rootfs.bad_control");
}

}  // namespace
