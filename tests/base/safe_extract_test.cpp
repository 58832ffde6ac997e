// Archive extraction: benign archives come out whole; every hostile archive of the corpus is refused and
// nothing is written outside the target directory. Archives are built in memory with libarchive's writer.
#include "base/archive/safe_extract.hpp"
#include "base/archive/decompress.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace {

namespace fs = std::filesystem;
using namespace gpuenv;

struct Entry {
  std::string path;
  char kind = 'f';  // f file, d dir, l symlink, h hardlink, c char device
  std::string data_or_target;
  unsigned mode = 0644;
};

std::string build(const std::vector<Entry>& entries, bool zip = false, bool gzip = false) {
  archive* a = archive_write_new();
  if (zip) archive_write_set_format_zip(a);
  else archive_write_set_format_pax_restricted(a);
  if (gzip) archive_write_add_filter_gzip(a);
  std::string out;
  std::vector<char> buf(16u << 20);
  std::size_t used = 0;
  archive_write_open_memory(a, buf.data(), buf.size(), &used);
  for (const auto& e : entries) {
    archive_entry* en = archive_entry_new();
    archive_entry_set_pathname(en, e.path.c_str());
    archive_entry_set_perm(en, e.mode);
    switch (e.kind) {
      case 'f': archive_entry_set_filetype(en, AE_IFREG); archive_entry_set_size(en, static_cast<la_int64_t>(e.data_or_target.size())); break;
      case 'd': archive_entry_set_filetype(en, AE_IFDIR); break;
      case 'l': archive_entry_set_filetype(en, AE_IFLNK); archive_entry_set_symlink(en, e.data_or_target.c_str()); break;
      case 'h': archive_entry_set_filetype(en, AE_IFREG); archive_entry_set_hardlink(en, e.data_or_target.c_str()); break;
      case 'c': archive_entry_set_filetype(en, AE_IFCHR); archive_entry_set_rdev(en, makedev(1, 3)); break;
    }
    archive_write_header(a, en);
    if (e.kind == 'f') archive_write_data(a, e.data_or_target.data(), e.data_or_target.size());
    archive_entry_free(en);
  }
  archive_write_close(a);
  archive_write_free(a);
  return std::string(buf.data(), used);
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class SafeExtract : public ::testing::Test {
 protected:
  void SetUp() override {
    base = fs::temp_directory_path() / ("gpuenv-x-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    root = base / "root";
    outside = base / "outside";
    fs::create_directories(root);
    fs::create_directories(outside);
  }
  void TearDown() override { fs::remove_all(base); }

  // Extraction must fail with `id` and leave `outside` (and the parent of root) untouched.
  void expect_refused(const std::string& bytes, const std::string& id, ExtractOptions o = {}) {
    auto r = extract_archive(bytes, "test.tar", root.string(), o);
    ASSERT_FALSE(r.ok()) << "extracted a hostile archive";
    EXPECT_EQ(r.error().id, id) << r.error().to_string();
    EXPECT_TRUE(fs::is_empty(outside));
    for (const auto& e : fs::directory_iterator(base)) EXPECT_TRUE(e.path() == root || e.path() == outside) << e.path();
  }
  fs::path base, root, outside;
};

// Found by archive_fuzz: a damaged gzip stream on which libarchive fails without an error message; the null message
// went into a std::string (a crash) instead of becoming archive.corrupt.
TEST_F(SafeExtract, ADamagedStreamWithoutLibarchiveMessageIsCorruptNotACrash) {
  static const unsigned char k_damaged_gzip[] = {
    0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0xed, 0xd5,
    0xcf, 0x0a, 0xc2, 0x20, 0x00, 0xc7, 0x71, 0xcf, 0x3d, 0xc5, 0x9e, 0x40,
    0xa7, 0xe9, 0x3c, 0x75, 0xac, 0x53, 0x2f, 0xb1, 0x46, 0x41, 0x10, 0x09,
    0xfb, 0x03, 0xdd, 0x7a, 0xf5, 0xa4, 0x43, 0x87, 0x11, 0x8b, 0x1d, 0x94,
    0x55, 0xdf, 0x0f, 0x88, 0x82, 0x82, 0x87, 0x1f, 0xfe, 0x94, 0x4a, 0x24,
    0x57, 0x46, 0xde, 0xb9, 0xe7, 0x1c, 0x8d, 0xe7, 0x37, 0x6b, 0xef, 0xb5,
    0x11, 0x85, 0x13, 0x19, 0x0c, 0x5d, 0x5f, 0xb7, 0xf1, 0xca, 0x36, 0x84,
    0x7e, 0xea, 0xdc, 0xa7, 0xfd, 0x2f, 0x25, 0xd5, 0xd5, 0xb1, 0x6f, 0xd4,
    0xc2, 0xb1, 0x6f, 0xd4, 0xc2, 0xf2, 0xd7, 0xa5, 0xad, 0x1c, 0xf9, 0xe7,
    0xcb, 0xbf, 0x96, 0x4d, 0xb8, 0x9e, 0x52, 0xdd, 0xef, 0x68, 0x41, 0xfa,
    0xff, 0xf5, 0xfe, 0x53, 0xf5, 0xbf, 0xf7, 0x33, 0xfa, 0xdf, 0x1a, 0xe3,
    0x45, 0x61, 0xd2, 0x55, 0x12, 0xef, 0x1f, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0xfc, 0xac, 0x07, 0x00, 0x28, 0x00, 0x00
  };
  expect_refused(std::string(reinterpret_cast<const char*>(k_damaged_gzip), sizeof k_damaged_gzip), "archive.corrupt");
}

TEST_F(SafeExtract, BenignArchiveComesOutWhole) {
  auto bytes = build({{"./usr/", 'd', "", 0755},
                      {"./usr/bin/", 'd', "", 0755},
                      {"./usr/bin/tool", 'f', "#!/bin/sh\n", 0755},
                      {"./usr/bin/alias", 'l', "tool"},
                      {"./usr/bin/hard", 'h', "./usr/bin/tool"},
                      {"./etc/x.conf", 'f', "a=1\n", 0600}});
  auto r = extract_archive(bytes, "t.tar", root.string(), {});
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->size(), 6u);
  EXPECT_EQ(fs::read_symlink(root / "usr/bin/alias"), "tool");
  EXPECT_EQ(fs::hard_link_count(root / "usr/bin/tool"), 2u);
  EXPECT_EQ(fs::status(root / "usr/bin/tool").permissions() & fs::perms::all, fs::perms(0755));
  EXPECT_EQ(fs::status(root / "etc/x.conf").permissions() & fs::perms::all, fs::perms(0600));
  std::ifstream in(root / "usr/bin/tool");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "#!/bin/sh\n");
}

TEST_F(SafeExtract, FollowsSymlinksThatStayInside) {
  // Debian's merged /usr: bin -> usr/bin; a package writing ./bin/sh lands in usr/bin/sh.
  auto bytes = build({{"usr/bin/", 'd', "", 0755}, {"bin", 'l', "usr/bin"}, {"bin/sh", 'f', "sh"}});
  ASSERT_TRUE(extract_archive(bytes, "t.tar", root.string(), {}).ok());
  EXPECT_TRUE(fs::exists(root / "usr/bin/sh"));
}

TEST_F(SafeExtract, LaterEntriesReplaceEarlierOnes) {
  auto bytes = build({{"f", 'f', "one"}, {"f", 'f', "two"}, {"g", 'l', (outside / "target").string()}, {"g", 'f', "plain"}});
  ASSERT_TRUE(extract_archive(bytes, "t.tar", root.string(), {}).ok());
  std::ifstream in(root / "f");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "two");
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(root / "g")));  // the symlink was replaced, not followed
  EXPECT_TRUE(fs::is_empty(outside));
}

TEST_F(SafeExtract, PathFilterSkipsDocs) {
  ExtractOptions o;
  o.keep = [](std::string_view p) { return p.rfind("usr/share/doc/", 0) != 0; };
  auto bytes = build({{"usr/share/doc/x/README", 'f', "doc"}, {"usr/lib/x.so", 'f', "elf"}});
  auto r = extract_archive(bytes, "t.tar", root.string(), o);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(fs::exists(root / "usr/share/doc/x/README"));
  EXPECT_TRUE(fs::exists(root / "usr/lib/x.so"));
}

// The rule for what gpuenv itself adds to an unpacked tree: through the tree's own directories only.
TEST_F(SafeExtract, WritingBeneathTheRootNeverFollowsALinkOut) {
  ASSERT_TRUE(write_file_beneath(root.string(), "usr/share/gpuenv/gpuenv.lock", "lock", 0644, "test").ok());
  EXPECT_EQ(slurp(root / "usr/share/gpuenv/gpuenv.lock"), "lock");
  // A directory on the way that links out of the tree is refused, and nothing lands outside.
  fs::create_directories(root / "etc");
  fs::create_directory_symlink(outside, root / "etc/ld.so.conf.d");
  auto r = write_file_beneath(root.string(), "etc/ld.so.conf.d/gpuenv.conf", "x", 0644, "test");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "archive.unsafe") << r.error().to_string();
  EXPECT_TRUE(fs::is_empty(outside));
  // A final name that is a link is replaced by the file, not followed.
  std::ofstream(outside / "victim") << "host";
  fs::create_symlink(outside / "victim", root / "usr/share/gpuenv/sbom.spdx.json");
  ASSERT_TRUE(write_file_beneath(root.string(), "usr/share/gpuenv/sbom.spdx.json", "sbom", 0644, "test").ok());
  EXPECT_EQ(slurp(outside / "victim"), "host");
  EXPECT_FALSE(fs::is_symlink(root / "usr/share/gpuenv/sbom.spdx.json"));
  EXPECT_EQ(slurp(root / "usr/share/gpuenv/sbom.spdx.json"), "sbom");
  // Names with .. are refused before anything is opened; reading follows the same rule.
  EXPECT_FALSE(write_file_beneath(root.string(), "../outside/x", "x", 0644, "test").ok());
  EXPECT_FALSE(fs::exists(outside / "x"));
  fs::create_symlink(outside / "victim", root / "link");
  EXPECT_FALSE(read_file_beneath(root.string(), "link", 1024).has_value());
  EXPECT_EQ(read_file_beneath(root.string(), "usr/share/gpuenv/gpuenv.lock", 1024).value_or(""), "lock");
  EXPECT_FALSE(read_file_beneath(root.string(), "usr/share/gpuenv/gpuenv.lock", 2).has_value()) << "larger than the limit";
}

TEST_F(SafeExtract, RefusesAbsolutePaths) { expect_refused(build({{(outside / "evil").string(), 'f', "x"}}), "archive.unsafe"); }
TEST_F(SafeExtract, RefusesDotDot) { expect_refused(build({{"../outside/evil", 'f', "x"}}), "archive.unsafe"); }
TEST_F(SafeExtract, RefusesDotDotInside) { expect_refused(build({{"a/../../outside/evil", 'f', "x"}}), "archive.unsafe"); }
TEST_F(SafeExtract, RefusesWritingThroughAnAbsoluteSymlink) {
  expect_refused(build({{"link", 'l', outside.string()}, {"link/evil", 'f', "x"}}), "archive.unsafe");
}
TEST_F(SafeExtract, RefusesWritingThroughARelativeSymlinkThatLeaves) {
  expect_refused(build({{"link", 'l', "../outside"}, {"link/evil", 'f', "x"}}), "archive.unsafe");
}
TEST_F(SafeExtract, RefusesADirectoryEntryOverAnEscapingSymlink) {
  expect_refused(build({{"link", 'l', "../outside"}, {"link/", 'd', ""}, {"link/evil", 'f', "x"}}), "archive.unsafe");
}
TEST_F(SafeExtract, RefusesHardLinksOutOfTheTree) {
  expect_refused(build({{"h", 'h', "/etc/passwd"}}), "archive.unsafe");
  expect_refused(build({{"h", 'h', "../outside/x"}}), "archive.unsafe");
  expect_refused(build({{"link", 'l', "/etc"}, {"h", 'h', "link/passwd"}}), "archive.unsafe");
  expect_refused(build({{"h", 'h', "never-extracted"}}), "archive.unsafe");
}
TEST_F(SafeExtract, RefusesDeviceNodes) { expect_refused(build({{"dev/null", 'c', ""}}), "archive.unsafe"); }
TEST_F(SafeExtract, RefusesOversizedEntries) {
  ExtractOptions o;
  o.max_entry_bytes = 1000;
  expect_refused(build({{"big", 'f', std::string(2000, 'a')}}), "archive.limit", o);
}
TEST_F(SafeExtract, RefusesTooManyEntries) {
  ExtractOptions o;
  o.max_entries = 10;
  std::vector<Entry> many;
  for (int i = 0; i < 20; ++i) many.push_back({"f" + std::to_string(i), 'f', "x"});
  expect_refused(build(many), "archive.limit", o);
}
TEST_F(SafeExtract, RefusesCompressionBombs) {
  ExtractOptions o;
  o.max_ratio = 50;
  expect_refused(build({{"zeros", 'f', std::string(80u << 20, '\0')}}, false, true), "archive.limit", o);
}
TEST_F(SafeExtract, RefusesTruncatedArchives) {
  auto bytes = build({{"a", 'f', std::string(100000, 'a')}, {"b", 'f', "b"}}, false, true);
  auto r = extract_archive(bytes.substr(0, bytes.size() / 2), "t.tar.gz", root.string(), {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "archive.corrupt");
  EXPECT_FALSE(extract_archive("not an archive at all", "x", root.string(), {}).ok());
}
TEST_F(SafeExtract, ZipIsCheckedTheSameWay) {
  auto ok = extract_archive(build({{"pkg/__init__.py", 'f', "x = 1\n"}}, true), "w.whl", root.string(), {});
  ASSERT_TRUE(ok.ok()) << ok.error().to_string();
  EXPECT_TRUE(fs::exists(root / "pkg/__init__.py"));
  expect_refused(build({{"../outside/evil.py", 'f', "x"}}, true), "archive.unsafe");
}

TEST(MemberPath, Normalizes) {
  EXPECT_EQ(**normalize_member_path("./usr//bin/./x"), "usr/bin/x");
  EXPECT_EQ(**normalize_member_path("usr/bin/"), "usr/bin");
  EXPECT_FALSE(normalize_member_path("./")->has_value());
  EXPECT_FALSE(normalize_member_path("/abs").ok());
  EXPECT_FALSE(normalize_member_path("a/..").ok());
}

// .deb files built by dpkg-deb; extraction agrees with `dpkg-deb -x`.
class DebExtract : public SafeExtract {};

TEST_F(DebExtract, MatchesDpkgDeb) {
  if (std::system("command -v dpkg-deb >/dev/null 2>&1") != 0) GTEST_SKIP() << "dpkg-deb is not installed";
  const fs::path pkg = base / "pkg";
  fs::create_directories(pkg / "DEBIAN");
  fs::create_directories(pkg / "usr/bin");
  fs::create_directories(pkg / "usr/share/doc/hello");
  std::ofstream(pkg / "DEBIAN/control") << "Package: hello\nVersion: 1.0-1\nArchitecture: amd64\nMaintainer: t <t@example.com>\nDescription: test\n";
  std::ofstream(pkg / "usr/bin/hello") << "#!/bin/sh\necho hello\n";
  fs::permissions(pkg / "usr/bin/hello", fs::perms(0755));
  fs::create_symlink("hello", pkg / "usr/bin/hi");
  std::ofstream(pkg / "usr/share/doc/hello/copyright") << "free\n";
  const fs::path deb = base / "hello.deb";
  ASSERT_EQ(std::system(("dpkg-deb --root-owner-group -Zxz --build " + pkg.string() + " " + deb.string() + " >/dev/null").c_str()), 0);
  ASSERT_EQ(std::system(("dpkg-deb -x " + deb.string() + " " + (base / "oracle").string()).c_str()), 0);
  std::ifstream in(deb, std::ios::binary);
  const std::string bytes(std::istreambuf_iterator<char>(in), {});
  auto r = extract_deb(bytes, "hello.deb", root.string(), {});
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_NE(r->control.find("Package: hello"), std::string::npos);
  std::vector<std::string> ours, theirs;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it)
    ours.push_back(fs::relative(it->path(), root).string() + (fs::is_symlink(it->symlink_status()) ? "@" : ""));
  for (auto it = fs::recursive_directory_iterator(base / "oracle"); it != fs::recursive_directory_iterator(); ++it)
    theirs.push_back(fs::relative(it->path(), base / "oracle").string() + (fs::is_symlink(it->symlink_status()) ? "@" : ""));
  std::sort(ours.begin(), ours.end());
  std::sort(theirs.begin(), theirs.end());
  EXPECT_EQ(ours, theirs);
  // An extra member (as NVIDIA's _gpgbuilder) is tolerated; a truncated .deb is not.
  if (std::system("command -v ar >/dev/null 2>&1") == 0) {
    std::ofstream(base / "_gpgbuilder") << "signature";
    ASSERT_EQ(std::system(("cd " + base.string() + " && ar q hello.deb _gpgbuilder 2>/dev/null").c_str()), 0);
    std::ifstream in2(deb, std::ios::binary);
    const std::string with_extra(std::istreambuf_iterator<char>(in2), {});
    fs::remove_all(root);
    fs::create_directories(root);
    EXPECT_TRUE(extract_deb(with_extra, "hello.deb", root.string(), {}).ok());
  }
  fs::remove_all(root);
  fs::create_directories(root);
  auto truncated = extract_deb(bytes.substr(0, bytes.size() - 100), "hello.deb", root.string(), {});
  ASSERT_FALSE(truncated.ok());
  EXPECT_FALSE(extract_deb("<html>404</html>", "x.deb", root.string(), {}).ok());
}

}  // namespace

// An index that is empty but compressed is an empty index, not a damaged file: Debian's bookworm-updates contrib
// Packages.xz is the xz of nothing (`printf '' | xz`), and refusing it stopped every lock that named contrib.
TEST(Decompress, AnEmptyCompressedFileIsEmpty) {
  const unsigned char empty_xz[] = {0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00, 0x00, 0x04, 0xe6, 0xd6, 0xb4, 0x46, 0x00, 0x00, 0x00, 0x00,
                                    0x1c, 0xdf, 0x44, 0x21, 0x1f, 0xb6, 0xf3, 0x7d, 0x01, 0x00, 0x00, 0x00, 0x00, 0x04, 0x59, 0x5a};
  const unsigned char empty_gzip[] = {0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x03, 0x00,
                                      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  for (std::string_view bytes : {std::string_view(reinterpret_cast<const char*>(empty_xz), sizeof empty_xz),
                                 std::string_view(reinterpret_cast<const char*>(empty_gzip), sizeof empty_gzip)}) {
    auto r = gpuenv::decompress(bytes, "Packages", 1u << 20);
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    EXPECT_EQ(*r, "");
    // Cut short, the same stream is damaged.
    auto cut = gpuenv::decompress(bytes.substr(0, bytes.size() - 6), "Packages", 1u << 20);
    ASSERT_FALSE(cut.ok());
    EXPECT_EQ(cut.error().id, "archive.corrupt");
  }
}
