#include "validate/adapters/image_libraries.hpp"

#include <algorithm>
#include <charconv>
#include <deque>
#include <filesystem>
#include <optional>
#include <set>
#include <system_error>

namespace gpuenv::validate {
namespace {

namespace fs = std::filesystem;

constexpr int k_max_link_hops = 40;  // as the kernel's limit on symbolic links in one lookup

// Resolves `relative` inside `root` as a chroot would: every component that is a symbolic link is followed, an
// absolute target starts again at `root`, and ".." stops at `root`. Empty when a link cannot be read or there are
// too many links.
std::optional<fs::path> resolve_in_root(const fs::path& root, const fs::path& relative) {
  std::deque<std::string> rest;
  for (const auto& part : relative) rest.push_back(part.string());
  std::vector<std::string> done;
  int hops = 0;
  while (!rest.empty()) {
    const std::string part = rest.front();
    rest.pop_front();
    if (part.empty() || part == "." || part == "/") continue;
    if (part == "..") {
      if (!done.empty()) done.pop_back();
      continue;
    }
    fs::path here = root;
    for (const auto& d : done) here /= d;
    here /= part;
    std::error_code ec;
    const auto status = fs::symlink_status(here, ec);
    if (!ec && fs::is_symlink(status)) {
      if (++hops > k_max_link_hops) return std::nullopt;
      const fs::path target = fs::read_symlink(here, ec);
      if (ec) return std::nullopt;
      if (target.is_absolute()) done.clear();
      std::vector<std::string> parts;
      for (const auto& t : target) parts.push_back(t.string());
      rest.insert(rest.begin(), parts.begin(), parts.end());
      continue;
    }
    done.push_back(part);
  }
  fs::path out = root;
  for (const auto& d : done) out /= d;
  return out;
}

// The major version of "libcublasLt.so.12" for prefix "libcublasLt.so."; empty for any other name.
std::optional<int> soname_major(const std::string& name, const std::string& prefix) {
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  const char* first = name.data() + prefix.size();
  const char* last = name.data() + name.size();
  int major = 0;
  const auto [ptr, ec] = std::from_chars(first, last, major);
  if (ec != std::errc() || ptr != last || major <= 0) return std::nullopt;
  return major;
}

// Directories (relative to the root) where images keep CUDA's libraries, in the order they are preferred.
std::vector<fs::path> library_directories(const fs::path& root) {
  std::vector<fs::path> out;
  std::error_code ec;
  // pip wheels (nvidia-cublas-cuXX): what the frameworks in the image load.
  for (const char* lib : {"usr/local/lib", "usr/lib", "opt/conda/lib"}) {
    auto resolved = resolve_in_root(root, lib);
    if (!resolved) continue;
    std::vector<std::string> pythons;
    for (fs::directory_iterator it(*resolved, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (name.rfind("python3", 0) == 0) pythons.push_back(name);
    }
    std::sort(pythons.rbegin(), pythons.rend());
    for (const auto& python : pythons)
      for (const char* packages : {"dist-packages", "site-packages"})
        for (const char* wheel : {"nvidia/cublas/lib", "nvidia/nccl/lib"})
          out.push_back(fs::path(lib) / python / packages / wheel);
  }
  // The CUDA toolkit: /usr/local/cuda first, then versioned installs, newest name first.
  out.emplace_back("usr/local/cuda/lib64");
  std::vector<std::string> cudas;
  if (auto local = resolve_in_root(root, "usr/local")) {
    for (fs::directory_iterator it(*local, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (name.rfind("cuda-", 0) == 0) cudas.push_back(name);
    }
  }
  std::sort(cudas.rbegin(), cudas.rend());
  for (const auto& cuda : cudas) out.push_back(fs::path("usr/local") / cuda / "lib64");
  for (const char* target : {"x86_64-linux", "sbsa-linux", "aarch64-linux"})
    out.push_back(fs::path("usr/local/cuda/targets") / target / "lib");
  // The distribution's packages (Debian and Ubuntu multiarch, then others).
  for (const char* dir : {"usr/lib/x86_64-linux-gnu", "usr/lib/aarch64-linux-gnu", "usr/lib64", "usr/lib"})
    out.emplace_back(dir);
  return out;
}

struct Found {
  int major = 0;
  std::size_t order = 0;  // search order, to keep it within a major version
  std::string path;
};

}  // namespace

ImageLibraries find_image_libraries(const std::string& rootfs) {
  ImageLibraries out;
  if (rootfs.empty()) return out;
  std::error_code ec;
  const fs::path root = fs::absolute(fs::path(rootfs), ec);
  if (ec) return out;
  std::vector<Found> lt, blas, nccl;
  std::set<std::string> seen;
  std::size_t order = 0;
  for (const auto& dir : library_directories(root)) {
    auto resolved_dir = resolve_in_root(root, dir);
    if (!resolved_dir) continue;
    for (fs::directory_iterator it(*resolved_dir, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      std::vector<Found>* into = nullptr;
      std::optional<int> major;
      if ((major = soname_major(name, "libcublasLt.so."))) {
        into = &lt;
      } else if ((major = soname_major(name, "libcublas.so."))) {
        into = &blas;
      } else if ((major = soname_major(name, "libnccl.so."))) {
        into = &nccl;
      } else {
        continue;
      }
      // Resolve the file itself inside the root: its own path relative to the root, links followed.
      const fs::path relative = fs::relative(*resolved_dir / name, root, ec);
      if (ec) {
        ec.clear();
        continue;
      }
      auto file = resolve_in_root(root, relative);
      std::error_code fe;
      if (!file || !fs::is_regular_file(*file, fe)) continue;
      const std::string path = file->lexically_normal().string();
      if (!seen.insert(path).second) continue;
      into->push_back(Found{*major, order++, path});
    }
    ec.clear();
  }
  auto sorted_paths = [](std::vector<Found>& found) {
    std::stable_sort(found.begin(), found.end(), [](const Found& a, const Found& b) {
      return a.major != b.major ? a.major > b.major : a.order < b.order;
    });
    std::vector<std::string> paths;
    for (const auto& f : found) paths.push_back(f.path);
    return paths;
  };
  out.cublaslt = sorted_paths(lt);
  out.cublas = sorted_paths(blas);
  out.nccl = sorted_paths(nccl);
  return out;
}

}  // namespace gpuenv::validate
