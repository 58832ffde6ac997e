// The package store (images/rootfs/package_trees): one tree per package's inputs, committed whole, and hard-
// linked into a root with the rules of unpacking over it.
#include "images/rootfs/package_trees.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "fakes/temp_dir.hpp"
#include "fakes/files.hpp"

namespace {

namespace fs = std::filesystem;
using namespace gpuenv;
using namespace gpuenv::images;


using gpuenv::testing::read_all;

void put(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

struct Store {
  gpuenv::testing::TempDir tmp{"gpuenv-trees"};
  fs::path store = tmp.path() / "trees";
  fs::path staging = tmp.path() / "work";
  fs::path root = tmp.path() / "root";
  PackageTreeStore trees{store.string(), staging.string()};
  LinkedFiles linked;
  int installs = 0;

  Store() {
    fs::create_directories(staging);
    fs::create_directories(root);
  }

  /// A tree whose installer writes `files` (path -> content; a content starting with "->" makes a symlink).
  Result<PackageTree> tree(const std::string& inputs, const std::map<std::string, std::string>& files) {
    return trees.get(inputs, [&](const std::string& r) -> Result<TreeRecord> {
      ++installs;
      TreeRecord rec;
      for (const auto& [path, content] : files) {
        fs::create_directories((fs::path(r) / path).parent_path());
        if (content.rfind("->", 0) == 0) fs::create_symlink(content.substr(2), fs::path(r) / path);
        else put(fs::path(r) / path, content);
        rec.files.push_back(path);
      }
      return rec;
    });
  }
};

TEST(PackageTrees, ATreeIsUnpackedOnceAndItsRecordComesBack) {
  Store s;
  auto a = s.tree("wheel\nabc", {{"usr/lib/a.py", "a"}});
  ASSERT_TRUE(a) << a.error().message;
  auto again = s.tree("wheel\nabc", {{"usr/lib/a.py", "a"}});
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(s.installs, 1);
  EXPECT_EQ(again->key, a->key);
  EXPECT_EQ(again->record.files, std::vector<std::string>{"usr/lib/a.py"});
  EXPECT_EQ(read_all(fs::path(again->root) / "usr/lib/a.py"), "a");
  auto other = s.tree("wheel\nabd", {{"usr/lib/a.py", "b"}});
  ASSERT_TRUE(other);
  EXPECT_NE(other->key, a->key);
  EXPECT_EQ(s.installs, 2);
  EXPECT_TRUE(fs::is_empty(s.staging)) << "staged trees are renamed into the store";
}

TEST(PackageTrees, AFailedInstallLeavesNoTreeAndADamagedRecordIsUnpackedAgain) {
  Store s;
  auto bad = s.trees.get("deb\nx", [](const std::string& r) -> Result<TreeRecord> {
    put(fs::path(r) / "half", "written");
    return make_error(ErrorKind::environment, "archive.corrupt", "truncated", "x.deb", "");
  });
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().id, "archive.corrupt");
  EXPECT_TRUE(!fs::exists(s.store) || fs::is_empty(s.store));
  EXPECT_TRUE(fs::is_empty(s.staging));

  auto t = s.tree("deb\ny", {{"etc/y", "1"}});
  ASSERT_TRUE(t);
  std::ofstream(fs::path(t->root).parent_path() / "record.json") << "{\"format\": \"gpuenv-package-tree-v0\"}";
  auto again = s.tree("deb\ny", {{"etc/y", "1"}});
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(s.installs, 2);
}

TEST(PackageTrees, TheRecordRoundTripsAndAForeignOneIsNamed) {
  TreeRecord r;
  r.deb.name = "libfoo1";
  r.deb.version = "1.0-1";
  r.deb.architecture = "amd64";
  r.deb.control = "Package: libfoo1\n";
  r.deb.md5sums = "d41d8cd98f00b204e9800998ecf8427e  usr/lib/x\n";
  r.deb.conffiles = {"/etc/foo.conf"};
  r.deb.entries.push_back({"usr/lib/x", ExtractedEntry::Type::file, 0644, 0, 0, 3, ""});
  r.deb.entries.push_back({"usr/lib/y", ExtractedEntry::Type::symlink, 0777, 0, 0, 0, "x"});
  auto back = parse_tree_record(render_tree_record(r), "record.json");
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->deb.name, "libfoo1");
  EXPECT_EQ(back->deb.conffiles, r.deb.conffiles);
  ASSERT_EQ(back->deb.entries.size(), 2u);
  EXPECT_EQ(back->deb.entries[1].link_target, "x");
  EXPECT_EQ(back->deb.entries[1].type, ExtractedEntry::Type::symlink);
  for (const std::string bad : {"[]", "{\"format\": \"gpuenv-package-tree-v1\"}", "{\"format\": \"gpuenv-package-tree-v1\", \"deb\": {}, \"files\": []}", "not json"}) {
    auto e = parse_tree_record(bad, "record.json");
    ASSERT_FALSE(e) << bad;
    EXPECT_EQ(e.error().id, "build.bad_tree");
  }
}

TEST(PackageTrees, LinkingReplacesEarlierFilesSharesInodesAndNamesEachFile) {
  Store s;
  auto a = s.tree("a", {{"usr/bin/tool", "old"}, {"usr/lib/liba.so", "A"}, {"usr/lib/libl.so", "->liba.so"}});
  auto b = s.tree("b", {{"usr/bin/tool", "new"}});
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(link_tree(*a, s.root.string(), "a", s.linked));
  ASSERT_TRUE(link_tree(*b, s.root.string(), "b", s.linked));
  EXPECT_EQ(read_all(s.root / "usr/bin/tool"), "new");
  EXPECT_EQ(fs::read_symlink(s.root / "usr/lib/libl.so"), "liba.so");
  struct stat in_root {}, in_store {};
  ASSERT_EQ(::stat((s.root / "usr/lib/liba.so").c_str(), &in_root), 0);
  ASSERT_EQ(::stat((fs::path(a->root) / "usr/lib/liba.so").c_str(), &in_store), 0);
  EXPECT_EQ(in_root.st_ino, in_store.st_ino);
  EXPECT_EQ(s.linked.at({in_root.st_dev, in_root.st_ino}), a->key + "/usr/lib/liba.so");
  // Replacing a linked file never writes into the store's copy.
  EXPECT_EQ(read_all(fs::path(a->root) / "usr/bin/tool"), "old");
}

TEST(PackageTrees, ADirectoryWhereAFileGoesIsAConflictAndALinkOutOfTheRootIsRefused) {
  Store s;
  auto dir = s.tree("d", {{"opt/x/inner", "1"}});
  auto file = s.tree("f", {{"opt/x", "a file"}});
  ASSERT_TRUE(dir && file);
  ASSERT_TRUE(link_tree(*dir, s.root.string(), "d.deb", s.linked));
  auto st = link_tree(*file, s.root.string(), "f.deb", s.linked);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().id, "build.conflict");
  EXPECT_NE(st.error().message.find("f.deb"), std::string::npos) << st.error().message;

  const fs::path outside = s.tmp.path() / "outside";
  fs::create_directories(outside);
  auto escape = s.tree("e", {{"var/log", "->" + outside.string()}});
  auto into = s.tree("i", {{"var/log/x", "escaped?"}});
  ASSERT_TRUE(escape && into);
  ASSERT_TRUE(link_tree(*escape, s.root.string(), "e.deb", s.linked));
  auto out = link_tree(*into, s.root.string(), "i.deb", s.linked);
  ASSERT_FALSE(out);
  EXPECT_EQ(out.error().id, "archive.unsafe");
  EXPECT_TRUE(fs::is_empty(outside));
}

TEST(PackageTrees, ADirectoryLinkBeneathTheRootIsFollowedAsUnpackingFollowsIt) {
  Store s;
  auto link = s.tree("l", {{"usr/lib/real/keep", "k"}, {"usr/lib/alias", "->real"}});
  auto into = s.tree("i", {{"usr/lib/alias/new", "n"}});
  ASSERT_TRUE(link && into);
  ASSERT_TRUE(link_tree(*link, s.root.string(), "l", s.linked));
  ASSERT_TRUE(link_tree(*into, s.root.string(), "i", s.linked));
  EXPECT_TRUE(fs::is_symlink(s.root / "usr/lib/alias"));
  EXPECT_EQ(read_all(s.root / "usr/lib/real/new"), "n");
}

}  // namespace
