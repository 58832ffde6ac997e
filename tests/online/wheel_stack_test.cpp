// Online (ctest label `online`, off in CI): the most downloaded binary wheels of the scientific stack, each in
// an image of its own built from the host's Debian mirror and Python index. Each image must build (the
// missing-library check passes), import its package under `gpuenv run`, and, for every ELF file in it, the
// build's loader model must find exactly what the image's own dynamic linker finds inside `gpuenv run`.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "fakes/shell.hpp"
#include "fakes/temp_dir.hpp"
#include "images/elf/loader_model.hpp"
#include "images/rootfs/ld_cache.hpp"

namespace {

namespace fs = std::filesystem;
using gpuenv::testing::capture;

struct Wheel {
  const char* requirement;
  const char* import_name;
  const char* more_pip = "";  ///< what its optional modules need, as a user adds it after the build names it
  const char* apt = "";
};

class WheelStack : public ::testing::TestWithParam<Wheel> {};

TEST_P(WheelStack, BuildsImportsAndAgreesWithTheDynamicLinker) {
  if (!std::getenv("GPUENV_ONLINE")) GTEST_SKIP() << "online test: set GPUENV_ONLINE=1";
  const Wheel w = GetParam();
  gpuenv::testing::TempDir dir("gpuenv-stack");
  const char* shared_cache = std::getenv("GPUENV_CACHE_DIR");
  const std::string cache = shared_cache ? shared_cache : (dir.path() / "cache").string();
  const std::string env = "GPUENV_CACHE_DIR=" + cache + " ";
  const std::string gpuenv = env + GPUENV_BINARY;
  const fs::path spec = dir.path() / "spec.yaml";
  std::ofstream(spec) << "name: stack\nbase: debian:12\npython: '3.11'\npackages:\n  pip: ['" << w.requirement << "'" << (*w.more_pip ? ", '" + std::string(w.more_pip) + "'" : "")
                       << "]\n" << (*w.apt ? "  apt: [" + std::string(w.apt) + "]\n" : "");
  int rc = 0;
  std::string out = capture(gpuenv + " lock " + spec.string() + " -o " + (dir.path() / "gpuenv.lock").string() + " 2>&1", &rc);
  ASSERT_EQ(rc, 0) << out;
  out = capture(gpuenv + " build " + (dir.path() / "gpuenv.lock").string() + " -o " + (dir.path() / "image").string() + " 2>&1", &rc);
  ASSERT_EQ(rc, 0) << out;
  const std::string digest = out.substr(out.rfind("sha256:") + 7, 64);
  const std::string image = (dir.path() / "image").string();
  out = capture(gpuenv + " run " + image + " --no-gpu -- python3.11 -c 'import " + std::string(w.import_name) + "' 2>&1", &rc);
  ASSERT_EQ(rc, 0) << "import " << w.import_name << ": " << out;

  // Every ELF file of the unpacked image, traced by its own ld.so inside the sandbox.
  const fs::path root = fs::path(cache) / "rootfs" / digest;
  ASSERT_TRUE(fs::is_directory(root)) << root;
  std::vector<std::string> objects;
  for (auto it = fs::recursive_directory_iterator(root, fs::directory_options::skip_permission_denied); it != fs::recursive_directory_iterator(); ++it) {
    if (it->is_symlink() || !it->is_regular_file()) continue;
    std::ifstream in(it->path(), std::ios::binary);
    char magic[4] = {};
    in.read(magic, 4);
    if (std::string(magic, 4) == "\x7f" "ELF") objects.push_back("/" + fs::relative(it->path(), root).string());
  }
  ASSERT_GT(objects.size(), 10u);
  const fs::path probe = dir.path() / "probe";
  fs::create_directories(probe);
  {
    std::ofstream list(probe / "list");
    for (const auto& o : objects) list << o << "\n";
    std::ofstream(probe / "trace.sh") << "while read -r f; do echo \"== $f\"; LD_TRACE_LOADED_OBJECTS=1 /lib64/ld-linux-x86-64.so.2 \"$f\" 2>&1; done < /tmp/probe/list\n";
  }
  const std::string traced = capture(gpuenv + " run " + image + " --no-gpu --bind " + probe.string() + ":/tmp/probe -- /bin/sh /tmp/probe/trace.sh 2>&1");
  std::map<std::string, std::map<std::string, std::string>> real;
  {
    std::istringstream in(traced);
    std::string line, current, name, path;
    while (std::getline(in, line)) {
      if (line.rfind("== ", 0) == 0) {
        current = line.substr(3);
        real[current];
      } else if (!current.empty() && gpuenv::testing::parse_trace_line(line, name, path)) {
        real[current][name] = path;
      }
    }
  }
  ASSERT_EQ(real.size(), objects.size()) << traced.substr(0, 2000);
  gpuenv::images::LdCacheOptions lo;
  auto scanned = gpuenv::images::scan_ld_cache(root.string(), lo);
  ASSERT_TRUE(scanned.ok()) << scanned.error().to_string();
  std::vector<std::pair<std::string, std::string>> cached;
  for (const auto& e : scanned->entries) cached.emplace_back(e.key, e.path);
  gpuenv::images::LoaderModel model(root.string(), cached, {"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib", "/usr/lib"});
  std::size_t disagreements = 0;
  for (const auto& o : objects) {
    std::map<std::string, std::string> got;
    for (const auto& l : model.list(o)) got[l.name] = l.path;
    if (got != real[o] && ++disagreements <= 5) {
      std::string diff;
      for (const auto& [k, v] : got)
        if (!real[o].count(k) || real[o][k] != v) diff += "\n  model: " + k + " => " + (v.empty() ? "not found" : v);
      for (const auto& [k, v] : real[o])
        if (!got.count(k) || got[k] != v) diff += "\n  ld.so: " + k + " => " + (v.empty() ? "not found" : v);
      ADD_FAILURE() << o << ": the model and ld.so disagree" << diff;
    }
  }
  EXPECT_EQ(disagreements, 0u) << "of " << objects.size() << " ELF files";
  if (disagreements == 0) std::printf("%s: %zu ELF files, all as ld.so finds them\n", w.requirement, objects.size());
}

INSTANTIATE_TEST_SUITE_P(
    Online, WheelStack,
    ::testing::Values(Wheel{"numpy<2.2", "numpy"}, Wheel{"scipy<1.15", "scipy.linalg"}, Wheel{"pandas", "pandas"},
                      Wheel{"scikit-learn", "sklearn"}, Wheel{"pillow", "PIL.Image"}, Wheel{"pyarrow", "pyarrow"},
                      Wheel{"opencv-python-headless", "cv2"}, Wheel{"matplotlib", "matplotlib.pyplot"}, Wheel{"h5py", "h5py"},
                      Wheel{"lxml", "lxml.etree"}, Wheel{"psutil", "psutil"}, Wheel{"pyyaml", "yaml"}, Wheel{"grpcio", "grpc"},
                      Wheel{"shapely", "shapely"}, Wheel{"numba", "numba", "tbb", "libgomp1"}, Wheel{"scikit-image", "skimage"},
                      Wheel{"statsmodels", "statsmodels.api"}, Wheel{"tokenizers", "tokenizers"}, Wheel{"orjson", "orjson"},
                      Wheel{"cryptography", "cryptography.hazmat.bindings._rust"}, Wheel{"regex", "regex"}, Wheel{"pydantic", "pydantic"}),
    [](const ::testing::TestParamInfo<Wheel>& i) {
      std::string n = i.param.import_name;
      for (char& c : n)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      return n;
    });

}  // namespace
