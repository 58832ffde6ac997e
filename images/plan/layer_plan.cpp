#include "images/plan/layer_plan.hpp"

#include <map>
#include <set>

#include "packages/wheels/markers.hpp"

namespace gpuenv::images {
namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

/// Whether the spec's own list names the package ("numpy<2.2", "name=version", "name[extra]").
bool requested_in(const std::vector<std::string>& list, const resolver::LockedPackage& p, const std::string& name) {
  for (const auto& r : list) {
    // The name is what precedes the first operator.
    const std::string n = r.substr(0, r.find_first_of("<>=!~;[ (@"));
    if ((p.kind == resolver::PackageKind::wheel ? packages::canonicalize_name(n) : n) == name) return true;
  }
  return false;
}

bool is_cuda_deb(const std::string& name) {
  if (starts_with(name, "cuda-")) return true;
  for (std::string_view prefix : {"libcublas", "libcufft", "libcurand", "libcusolver", "libcusparse", "libnpp", "libnvjpeg", "libnccl",
                                  "libnvjitlink", "libcufile", "libnvrtc"})
    if (starts_with(name, prefix)) return true;
  return false;
}

std::size_t layer_index(const std::string& name) {
  for (std::size_t i = 0; i < k_layer_order.size(); ++i)
    if (k_layer_order[i] == name) return i;
  return k_layer_order.size() - 1;
}

/// What the planning of one layer gathers before its entries are listed.
struct LayerTally {
  std::set<std::string> parents;                 // directories something in the layer lies beneath
  std::set<std::string> packages;                // "name version"
  std::map<std::size_t, std::uint64_t> bytes;    // package index -> bytes
};

void add_parents(const std::string& path, std::set<std::string>& parents) {
  for (auto slash = path.rfind('/'); slash != std::string::npos && slash > 0; slash = path.rfind('/', slash - 1))
    parents.insert(path.substr(0, slash));
}

}  // namespace

std::string layer_of(const resolver::LockedPackage& p, const resolver::Lock& lock) {
  const std::string name = p.kind == resolver::PackageKind::wheel ? packages::canonicalize_name(p.name) : p.name;
  if (p.kind == resolver::PackageKind::deb) {
    if (starts_with(name, "libcudnn") || starts_with(name, "cudnn")) return "cudnn";
    if (is_cuda_deb(name)) return "cuda";
    return requested_in(lock.requested_apt, p, name) ? "user" : "base";
  }
  if (starts_with(name, "nvidia-cudnn")) return "cudnn";
  if (name == "cuda-toolkit") return "cuda";  // NVIDIA's metapackage: pins the component wheels, holds no libraries
  if (starts_with(name, "nvidia-")) return "cuda";
  if (requested_in(lock.requested_pip, p, name)) return "user";
  return "framework";
}

std::vector<LayerPlan> plan_layers(const std::vector<RootEntry>& root, const resolver::Lock& lock) {
  std::vector<std::size_t> package_layer;
  for (const auto& p : lock.packages) package_layer.push_back(layer_index(layer_of(p, lock)));
  constexpr std::size_t k_parent_only = k_layer_order.size();
  std::vector<LayerTally> tally(k_layer_order.size());
  std::vector<std::size_t> own_layer(root.size(), k_parent_only);
  for (std::size_t i = 0; i < root.size(); ++i) {
    const RootEntry& e = root[i];
    const bool packaged = e.package != k_no_package;
    if (!packaged && e.kind == RootEntry::Kind::directory) continue;  // only as someone's parent
    const auto package = static_cast<std::size_t>(e.package);
    own_layer[i] = packaged ? package_layer[package] : layer_index("metadata");
    LayerTally& t = tally[own_layer[i]];
    if (packaged) {
      const auto& p = lock.packages[package];
      t.packages.insert(p.name + " " + p.version);
      t.bytes[package] += e.kind == RootEntry::Kind::file ? e.size : 0;
    }
    add_parents(e.path, t.parents);
  }
  std::vector<LayerPlan> out;
  for (std::size_t l = 0; l < k_layer_order.size(); ++l) {
    LayerPlan layer;
    layer.name = std::string(k_layer_order[l]);
    for (std::size_t i = 0; i < root.size(); ++i)
      if (own_layer[i] == l || (root[i].kind == RootEntry::Kind::directory && tally[l].parents.count(root[i].path))) layer.entries.push_back(i);
    if (layer.entries.empty()) continue;
    layer.packages.assign(tally[l].packages.begin(), tally[l].packages.end());
    for (const auto& [package, bytes] : tally[l].bytes) layer.package_bytes.push_back({package, bytes});
    out.push_back(std::move(layer));
  }
  return out;
}

}  // namespace gpuenv::images
