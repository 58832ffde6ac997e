#include "images/plan/gpu_rules.hpp"

#include <set>

namespace gpuenv::images {
namespace {

bool has_prefix(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

Error rule_error(const std::string& id, const std::string& what, const std::string& hint) {
  return make_error(ErrorKind::environment, id, what, "", hint);
}

/// "a/b/c.so" -> {"a/b", "c.so"}; "c.so" -> {"", "c.so"}.
std::pair<std::string, std::string> split_dir(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return {"", path};
  return {path.substr(0, slash), path.substr(slash + 1)};
}

}  // namespace

bool is_driver_library(std::string_view so) {
  for (std::string_view p : {"libcuda.so", "libnvidia-", "libnvcuvid.so", "libcudadebugger.so", "libnvoptix.so", "libnvidia-ml.so", "libOpenCL.so"})
    if (has_prefix(so, p)) return true;
  return false;
}

Status check_one_cuda_source(const resolver::Lock& lock) {
  std::vector<std::string> cuda_debs, cuda_wheels;
  for (const auto& p : lock.packages) {
    const std::string layer = layer_of(p, lock);
    if (layer == "cuda" || layer == "cudnn") (p.kind == resolver::PackageKind::deb ? cuda_debs : cuda_wheels).push_back(p.name);
  }
  if (cuda_debs.empty() || cuda_wheels.empty()) return ok_status();
  return rule_error("build.cuda_twice",
                    "the lock brings CUDA libraries both as .debs (" + cuda_debs.front() + ", ...) and as wheels (" + cuda_wheels.front() + ", ...)",
                    "use one source: drop the CUDA apt packages when the framework's wheels bring CUDA, or pick a framework variant without bundled CUDA");
}

Status check_no_driver_library(const std::vector<RootEntry>& root, const resolver::Lock& lock) {
  if (lock.vm && lock.vm->driver) return ok_status();  // a VM image carries its own driver (vm.driver, docs/vm.md)
  for (const auto& e : root) {
    if (e.kind != RootEntry::Kind::file || !is_driver_library(split_dir(e.path).second) || e.path.find("/stubs/") != std::string::npos) continue;
    const std::string owner = e.package == k_no_package ? std::string("unknown") : lock.packages[static_cast<std::size_t>(e.package)].name;
    return rule_error("build.driver_in_image", "the image would contain the driver library /" + e.path,
                      "the host's driver library is mounted at run time; remove the package that ships it (" + owner + ")");
  }
  return ok_status();
}

std::vector<std::string> wheel_cuda_library_dirs(const std::vector<std::string>& wheel_files, const std::string& site_packages) {
  // NVIDIA's wheels keep their libraries in site-packages/nvidia/<part>/lib.
  std::set<std::string> dirs;
  for (const auto& f : wheel_files) {
    const auto [dir, name] = split_dir(f);
    if (has_prefix(dir, site_packages + "/nvidia/") && split_dir(dir).second == "lib" && name.find(".so") != std::string::npos) dirs.insert("/" + dir);
  }
  return {dirs.begin(), dirs.end()};
}

std::optional<RootFile> wheel_cuda_loader_config(const std::vector<std::string>& library_dirs) {
  if (library_dirs.empty()) return std::nullopt;
  RootFile conf{"etc/ld.so.conf.d/000-gpuenv-cuda-wheels.conf", "# Written by gpuenv: the CUDA libraries of NVIDIA's wheels.\n"};
  for (const auto& d : library_dirs) conf.text += d + "\n";
  return conf;
}

}  // namespace gpuenv::images
