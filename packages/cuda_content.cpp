#include "packages/cuda_content.hpp"

#include <algorithm>
#include <map>

#include "base/text.hpp"

namespace gpuenv::packages {
namespace {

std::string trim(std::string_view s) {
  const auto a = s.find_first_not_of(" \t\n");
  if (a == std::string_view::npos) return "";
  const auto b = s.find_last_not_of(" \t\n");
  return std::string(s.substr(a, b - a + 1));
}

// "cuda-cudart-12-9 (>= 12.9.79), libcublas-12-9 (>= 12.9.1.4) | foo" -> name -> floor; alternatives keep
// their first choice.
std::map<std::string, std::string> floors_of(std::string_view depends) {
  std::map<std::string, std::string> out;
  std::size_t pos = 0;
  while (pos <= depends.size()) {
    auto comma = depends.find(',', pos);
    std::string_view item = depends.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    pos = comma == std::string_view::npos ? depends.size() + 1 : comma + 1;
    item = item.substr(0, item.find('|'));
    const auto paren = item.find('(');
    std::string name = trim(item.substr(0, paren));
    if (const auto colon = name.find(':'); colon != std::string::npos) name.resize(colon);
    if (name.empty() || paren == std::string_view::npos) continue;
    std::string rel = trim(item.substr(paren + 1, item.find(')') - paren - 1));
    if (rel.rfind(">=", 0) == 0) out[name] = trim(rel.substr(2));
    else if (rel.rfind("=", 0) == 0) out[name] = trim(rel.substr(1));
  }
  return out;
}

std::string apt_name(const std::string& component, const std::string& xy) {
  static const std::map<std::string, std::string> prefix = {
      {"cudart", "cuda-cudart-"},  {"cublas", "libcublas-"},       {"cufft", "libcufft-"},  {"curand", "libcurand-"},
      {"cusolver", "libcusolver-"}, {"cusparse", "libcusparse-"}, {"nvrtc", "cuda-nvrtc-"}, {"nvjitlink", "libnvjitlink-"},
      {"cupti", "cuda-cupti-"},    {"nvcc", "cuda-nvcc-"}};
  if (component == "nccl") return "libnccl2";
  return prefix.at(component) + xy;
}

bool has_prefix_component(const std::string& upstream, const std::string& prefix) {
  return upstream == prefix || upstream.rfind(prefix + ".", 0) == 0;
}

}  // namespace

std::optional<CudaContent> cuda_content(const resolver::Spec& spec, const resolver::Resolution& r) {
  if (!r.cuda) return std::nullopt;
  if (!spec.wants_cuda()) return std::nullopt;
  if (!r.frameworks.empty() && spec.cuda_components.empty()) return std::nullopt;  // the framework brings its CUDA
  CudaContent c;
  c.cuda = *r.cuda;
  c.cudnn = r.frameworks.empty() ? r.cudnn : std::nullopt;
  c.components = spec.cuda_components.empty() ? std::vector<std::string>{"cudart", "cublas"} : spec.cuda_components;
  return c;
}

std::optional<std::vector<std::string>> cuda_apt_packages(const PackageIndex& index, const CudaContent& c,
                                                          std::vector<std::string>& decisions, std::vector<std::string>& looked_for) {
  const int major = static_cast<int>(c.cuda.major());
  const std::string xy = std::to_string(major) + "-" + std::to_string(c.cuda.minor());
  const std::string meta = "cuda-libraries-" + xy;
  const BinaryPackage* release = nullptr;
  for (const BinaryPackage* p : index.versions(meta))
    if (p->version.upstream() == c.cuda.str()) {
      release = p;
      break;
    }
  if (!release) {
    looked_for.push_back(meta + " " + c.cuda.str());
    return std::nullopt;
  }
  const auto floors = floors_of(release->depends);
  std::vector<std::string> out;
  bool complete = true;
  for (const auto& comp : c.components) {
    const std::string name = apt_name(comp, xy);
    const auto versions = index.versions(name);
    const BinaryPackage* pick = nullptr;
    if (comp == "nccl") {
      // libnccl2's versions name the CUDA they are built for: 2.27.3-1+cuda12.9.
      const std::string tag = "+cuda" + c.cuda.truncated(2).str();
      for (const BinaryPackage* p : versions)
        if (p->version.str().size() >= tag.size() && p->version.str().compare(p->version.str().size() - tag.size(), tag.size(), tag) == 0) {
          pick = p;
          break;
        }
      if (pick) decisions.push_back("CUDA: " + name + " " + pick->version.str() + ", the newest NCCL built for CUDA " + c.cuda.truncated(2).str());
    } else if (auto f = floors.find(name); f != floors.end()) {
      for (const BinaryPackage* p : versions)  // newest first: the last match is the oldest at the floor's upstream
        if (p->version.upstream() == f->second || has_prefix_component(p->version.upstream(), f->second)) pick = p;
    } else if (!versions.empty()) {
      pick = versions.front();
      decisions.push_back("CUDA: " + meta + " " + release->version.str() + " does not name " + name + "; the newest, " + pick->version.str() + ", was chosen");
    }
    if (!pick) {
      looked_for.push_back(name + (floors.count(name) ? " " + floors.at(name) : std::string()));
      complete = false;
      continue;
    }
    out.push_back(name + "=" + pick->version.str());
  }
  if (c.cudnn) {
    const std::string name = c.cudnn->major() >= 9 ? "libcudnn" + std::to_string(c.cudnn->major()) + "-cuda-" + std::to_string(major)
                                                   : "libcudnn" + std::to_string(c.cudnn->major());
    const BinaryPackage* pick = nullptr;
    for (const BinaryPackage* p : index.versions(name)) {
      if (!has_prefix_component(p->version.upstream(), c.cudnn->str())) continue;
      if (c.cudnn->major() < 9 && p->version.str().find("+cuda" + std::to_string(major) + ".") == std::string::npos) continue;
      pick = p;
      break;
    }
    if (pick) out.push_back(name + "=" + pick->version.str());
    else {
      looked_for.push_back(name + " " + c.cudnn->str());
      complete = false;
    }
  }
  if (!complete) return std::nullopt;
  decisions.push_back("CUDA: " + c.cuda.str() + " from the apt repository of " + meta + " " + release->version.str() + " (" + index.where(*release) + ")");
  return out;
}

std::vector<std::string> cuda_wheel_requirements(const CudaContent& c) {
  const std::string cu = "cu" + std::to_string(c.cuda.major());
  std::vector<std::string> extras;
  bool nccl = false;
  for (const auto& comp : c.components) {
    if (comp == "nccl") nccl = true;
    else extras.push_back(comp);
  }
  std::vector<std::string> out;
  if (!extras.empty()) out.push_back("cuda-toolkit[" + join(extras, ",") + "]==" + c.cuda.str());
  if (nccl) out.push_back("nvidia-nccl-" + cu);
  if (c.cudnn) out.push_back("nvidia-cudnn-" + cu + "==" + c.cudnn->str() + ".*");
  return out;
}

}  // namespace gpuenv::packages
