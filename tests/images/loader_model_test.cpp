// The loader model against the real dynamic linker: a tree shaped like an image with wheels that vendor their
// libraries (auditwheel's `<pkg>.libs/` with hashed sonames, RPATH and RUNPATH with $ORIGIN, a library that
// needs a sibling but has no path of its own, the ld.so.cache, links), built from real libraries compiled
// here. For every ELF file, what the model finds must be exactly what `ld.so --list` finds inside the tree
// (run under bubblewrap with the tree as its root).
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "fakes/shell.hpp"
#include "fakes/temp_dir.hpp"
#include "images/elf/loader_model.hpp"
#include "images/rootfs/ld_cache.hpp"

namespace {

namespace fs = std::filesystem;
using gpuenv::images::LoaderModel;
using gpuenv::testing::capture;

bool sh(const std::string& cmd) { return std::system(cmd.c_str()) == 0; }

class LoaderModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!sh("command -v bwrap >/dev/null && command -v cc >/dev/null")) GTEST_SKIP() << "needs bubblewrap and a C compiler";
    if (!fs::exists("/lib64/ld-linux-x86-64.so.2") || !fs::exists("/lib/x86_64-linux-gnu/libc.so.6"))
      GTEST_SKIP() << "needs an x86_64 glibc host";
    if (!sh("bwrap --ro-bind / / true 2>/dev/null")) GTEST_SKIP() << "bubblewrap cannot make a sandbox here";
    root = dir.path() / "root";
    const fs::path tri = root / "lib/x86_64-linux-gnu";
    fs::create_directories(tri);
    fs::create_directories(root / "lib64");
    fs::create_directories(root / "usr/lib/x86_64-linux-gnu");
    fs::copy_file("/lib64/ld-linux-x86-64.so.2", root / "lib64/ld-linux-x86-64.so.2");
    for (const char* lib : {"libc.so.6", "libm.so.6"}) fs::copy_file(fs::path("/lib/x86_64-linux-gnu") / lib, tri / lib);
    site = root / "usr/local/lib/python3.11/dist-packages";
    libs = site / "pkg.libs";
    fs::create_directories(libs);
    fs::create_directories(site / "pkg");
    fs::create_directories(root / "opt/vendor/lib");
    fs::create_directories(root / "etc/ld.so.conf.d");
    fs::create_directories(root / "usr/bin");
    std::ofstream(root / "etc/ld.so.conf") << "include /etc/ld.so.conf.d/*.conf\n";
    std::ofstream(root / "etc/ld.so.conf.d/vendor.conf") << "/opt/vendor/lib\n";
    std::ofstream(dir.path() / "f.c") << "int f(void) { return 1; }\n";
    std::ofstream(dir.path() / "main.c") << "int main(void) { return 0; }\n";

    const std::string rl = " -Wl,-rpath-link," + libs.string() + " -Wl,-rpath-link," + (root / "opt/vendor/lib").string() + " ";
    auto so = [&](const fs::path& out, const std::string& soname, const std::string& flags) {
      return sh("cc -shared -fPIC -o " + out.string() + " " + (dir.path() / "f.c").string() + " -Wl,--no-as-needed -Wl,-soname," + soname + rl + flags +
                " -Wl,--allow-shlib-undefined 2>&1");
    };
    const std::string rpath = "-Wl,--disable-new-dtags -Wl,-rpath,";
    const std::string runpath = "-Wl,--enable-new-dtags -Wl,-rpath,";
    bool ok = true;
    // scipy.libs' shape: libgfortran needs libquadmath with no path of its own; the libraries that load it have $ORIGIN.
    ok = ok && so(libs / "libquad-96973f99.so.0.0.0", "libquad-96973f99.so.0.0.0", "-lm");
    ok = ok && so(libs / "libgfort-040039e1.so.5.0.0", "libgfort-040039e1.so.5.0.0", (libs / "libquad-96973f99.so.0.0.0").string());
    ok = ok && so(libs / "libblas-c128ec02.so", "libblas-c128ec02.so", rpath + "'$ORIGIN' " + (libs / "libgfort-040039e1.so.5.0.0").string());
    ok = ok && so(site / "pkg/_mod.cpython-311-x86_64-linux-gnu.so", "_mod.so", rpath + "'$ORIGIN/../pkg.libs' " + (libs / "libblas-c128ec02.so").string());
    // The same chain under RUNPATH: not inherited, so the sibling without a path is not found.
    ok = ok && so(libs / "libquad2-aaaa1111.so.0", "libquad2-aaaa1111.so.0", "");
    ok = ok && so(libs / "libgfort2-bbbb2222.so.5", "libgfort2-bbbb2222.so.5", (libs / "libquad2-aaaa1111.so.0").string());
    ok = ok && so(site / "pkg/_run.cpython-311-x86_64-linux-gnu.so", "_run.so", runpath + "'$ORIGIN/../pkg.libs' " + (libs / "libgfort2-bbbb2222.so.5").string());
    // RPATH written as ${ORIGIN} with a trailing slash (ld.so drops it), through a link to the library.
    ok = ok && sh("ln -s libquad-96973f99.so.0.0.0 " + (libs / "libq.so").string());
    ok = ok && so(site / "pkg/_link.cpython-311-x86_64-linux-gnu.so", "_link.so", rpath + "'${ORIGIN}/../pkg.libs/' " + (libs / "libq.so").string());
    // A library found only through the ld.so.cache, and a program that needs it and one library that no one ships.
    ok = ok && so(root / "opt/vendor/lib/libvendor.so.1", "libvendor.so.1", "");
    ok = ok && so(dir.path() / "libmissing.so.3", "libmissing.so.3", "");
    ok = ok && sh("cc -o " + (root / "usr/bin/prog").string() + " " + (dir.path() / "main.c").string() + rl + " -Wl,--no-as-needed " +
                  (root / "opt/vendor/lib/libvendor.so.1").string() + " " + (dir.path() / "libmissing.so.3").string());
    // A library that nothing needs, whose own RUNPATH points at a directory that does not exist.
    ok = ok && so(site / "pkg/_lost.cpython-311-x86_64-linux-gnu.so", "_lost.so", runpath + "'$ORIGIN/nowhere' " + (root / "opt/vendor/lib/libvendor.so.1").string());
    // A plugin that nothing needs (loaded with dlopen, if at all), needing a library the tree lacks.
    ok = ok && so(dir.path() / "libplugdep.so.1", "libplugdep.so.1", "");
    ok = ok && so(libs / "plugin_transport.so.3", "plugin_transport.so.3", (dir.path() / "libplugdep.so.1").string());
    ASSERT_TRUE(ok) << "could not compile the test tree";
    gpuenv::images::LdCacheOptions lo;
    auto cache = gpuenv::images::write_ld_cache(root.string(), lo);
    ASSERT_TRUE(cache.ok()) << cache.error().to_string();
    for (const auto& e : cache->entries) cached.emplace_back(e.key, e.path);
    for (const auto& e : fs::recursive_directory_iterator(root)) {
      if (!e.is_regular_file() || e.is_symlink()) continue;
      std::ifstream in(e.path(), std::ios::binary);
      char magic[4] = {};
      in.read(magic, 4);
      if (std::string(magic, 4) == "\x7f" "ELF") objects.push_back("/" + fs::relative(e.path(), root).string());
    }
  }

  LoaderModel model() const { return LoaderModel(root.string(), cached, {"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib", "/usr/lib"}); }

  gpuenv::testing::TempDir dir{"gpuenv-loader"};
  fs::path root, site, libs;
  std::vector<std::pair<std::string, std::string>> cached;
  std::vector<std::string> objects;
};

TEST_F(LoaderModelTest, FindsExactlyWhatTheDynamicLinkerFinds) {
  LoaderModel m = model();
  ASSERT_GE(objects.size(), 12u);
  for (const auto& abs : objects) {
    const std::string real = capture("bwrap --setenv LD_TRACE_LOADED_OBJECTS 1 --ro-bind " + root.string() + " / /lib64/ld-linux-x86-64.so.2 " + abs + " 2>&1");
    const auto want = gpuenv::testing::parse_trace(real);
    std::map<std::string, std::string> got;
    for (const auto& l : m.list(abs)) got[l.name] = l.path;
    EXPECT_EQ(got, want) << abs << "\nld.so --list said:\n" << real;
  }
}

TEST_F(LoaderModelTest, JudgesALibraryInTheTreesOfTheObjectsThatLoadIt) {
  LoaderModel m = model();
  // ld.so --list on the vendored libgfortran alone does not find its sibling (it has no RPATH) ...
  const auto alone = m.list("/usr/local/lib/python3.11/dist-packages/pkg.libs/libgfort-040039e1.so.5.0.0");
  ASSERT_FALSE(alone.empty());
  EXPECT_EQ(alone.front().name, "libquad-96973f99.so.0.0.0");
  EXPECT_EQ(alone.front().path, "");
  // ... but it is only ever loaded by the module, whose RPATH it inherits: the image is fine there.
  const auto result = m.unresolved(objects, [](const std::string&) { return false; });
  const auto& missing = result.required;
  EXPECT_EQ(missing.count("libquad-96973f99.so.0.0.0"), 0u);
  // RUNPATH is not inherited: that one is really missing; so is the library nobody ships.
  ASSERT_EQ(missing.count("libquad2-aaaa1111.so.0"), 1u);
  EXPECT_EQ(missing.at("libquad2-aaaa1111.so.0").front(), "/usr/local/lib/python3.11/dist-packages/pkg.libs/libgfort2-bbbb2222.so.5");
  ASSERT_EQ(missing.count("libmissing.so.3"), 1u);
  EXPECT_EQ(missing.at("libmissing.so.3").front(), "/usr/bin/prog");
  // The module that nothing needs is a root: its own RUNPATH leads nowhere, but the cache has what it needs.
  EXPECT_EQ(missing.size(), 2u);
  // Accepted names are not reported.
  EXPECT_EQ(m.unresolved(objects, [](const std::string& n) { return n == "libmissing.so.3"; }).required.count("libmissing.so.3"), 0u);
  // A library nothing needs that is not a Python module is a plugin: what it lacks is reported, not required.
  ASSERT_EQ(result.optional.count("libplugdep.so.1"), 1u);
  EXPECT_EQ(result.optional.at("libplugdep.so.1").front(), "/usr/local/lib/python3.11/dist-packages/pkg.libs/plugin_transport.so.3");
}

}  // namespace
