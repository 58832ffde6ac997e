// The deterministic tar writer, read back by Python's tarfile (an independent reader) and GNU tar.
#include "images/oci/tar_writer.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace {

namespace fs = std::filesystem;
using namespace gpuenv;
using namespace gpuenv::images;

std::string capture(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  ::pclose(p);
  return out;
}

std::string make_tar(std::int64_t mtime) {
  std::string out;
  TarWriter tar([&](const char* d, std::size_t n) { out.append(d, n); return gpuenv::ok_status(); }, mtime);
  const std::string long_dir(120, 'd');
  const std::string long_name = long_dir + "/" + std::string(150, 'f');
  EXPECT_TRUE(tar.add({"usr", TarEntry::Type::directory, 0755, 0, 0, 0, ""}).ok());
  EXPECT_TRUE(tar.add({"usr/bin", TarEntry::Type::directory, 0755, 0, 0, 0, ""}).ok());
  EXPECT_TRUE(tar.add({"usr/bin/tool", TarEntry::Type::file, 04755, 0, 0, 5, ""}).ok());
  EXPECT_TRUE(tar.write_data("hello", 5).ok());
  EXPECT_TRUE(tar.add({"usr/bin/tool2", TarEntry::Type::hardlink, 04755, 0, 0, 0, "usr/bin/tool"}).ok());
  EXPECT_TRUE(tar.add({"var/mail", TarEntry::Type::directory, 02775, 0, 8, 0, ""}).ok());
  EXPECT_TRUE(tar.add({"link", TarEntry::Type::symlink, 0777, 0, 0, 0, std::string(200, 't')}).ok());
  EXPECT_TRUE(tar.add({long_dir, TarEntry::Type::directory, 0755, 0, 0, 0, ""}).ok());
  EXPECT_TRUE(tar.add({long_name, TarEntry::Type::file, 0644, 1000, 1000, 3, ""}).ok());
  EXPECT_TRUE(tar.write_data("abc", 3).ok());
  EXPECT_TRUE(tar.finish().ok());
  return out;
}

TEST(TarWriter, PythonReadsEveryEntryBackAsWritten) {
  if (std::system("command -v python3 >/dev/null") != 0) GTEST_SKIP() << "python3 missing";
  const std::string bytes = make_tar(1700000000);
  EXPECT_EQ(bytes.size() % 512, 0u);
  const fs::path f = fs::temp_directory_path() / ("gpuenv-tar-" + std::to_string(::getpid()) + ".tar");
  std::ofstream(f, std::ios::binary) << bytes;
  const std::string listing = capture(
      "python3 -c \"import tarfile,sys\nfor m in tarfile.open(sys.argv[1]):\n"
      "  print(m.name[:40], m.type.decode(), oct(m.mode), m.uid, m.gid, m.mtime, m.size, (m.linkname or '')[:20], len(m.name), len(m.linkname), repr(m.uname))\" " + f.string());
  fs::remove(f);
  const std::string d(40, 'd');
  EXPECT_EQ(listing,
            "usr 5 0o755 0 0 1700000000 0  3 0 ''\n"
            "usr/bin 5 0o755 0 0 1700000000 0  7 0 ''\n"
            "usr/bin/tool 0 0o4755 0 0 1700000000 5  12 0 ''\n"
            "usr/bin/tool2 1 0o4755 0 0 1700000000 0 usr/bin/tool 13 12 ''\n"
            "var/mail 5 0o2775 0 8 1700000000 0  8 0 ''\n"
            "link 2 0o777 0 0 1700000000 0 tttttttttttttttttttt 4 200 ''\n" +
                d + " 5 0o755 0 0 1700000000 0  120 0 ''\n" + d + " 0 0o644 1000 1000 1700000000 3  271 0 ''\n");
}

TEST(TarWriter, TheSameEntriesGiveTheSameBytes) {
  EXPECT_EQ(make_tar(5), make_tar(5));
  EXPECT_NE(make_tar(5), make_tar(6));
}

TEST(TarWriter, ContentMustMatchTheDeclaredSize) {
  std::string out;
  TarWriter tar([&](const char* d, std::size_t n) { out.append(d, n); return gpuenv::ok_status(); }, 0);
  ASSERT_TRUE(tar.add({"f", TarEntry::Type::file, 0644, 0, 0, 4, ""}).ok());
  EXPECT_FALSE(tar.write_data("12345", 5).ok());
  ASSERT_TRUE(tar.write_data("12", 2).ok());
  EXPECT_FALSE(tar.finish().ok());  // two bytes short
}

TEST(TarWriter, GnuTarListsIt) {
  if (std::system("command -v tar >/dev/null") != 0) GTEST_SKIP() << "tar missing";
  const fs::path f = fs::temp_directory_path() / ("gpuenv-tar2-" + std::to_string(::getpid()) + ".tar");
  std::ofstream(f, std::ios::binary) << make_tar(0);
  const std::string listing = capture("tar -tf " + f.string() + " 2>&1");
  fs::remove(f);
  EXPECT_NE(listing.find("usr/bin/tool\n"), std::string::npos) << listing;
  EXPECT_NE(listing.find(std::string(150, 'f')), std::string::npos) << listing;
  EXPECT_EQ(listing.find("PaxHeader"), std::string::npos) << listing;
}

}  // namespace
