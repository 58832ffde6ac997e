#include "packages/pin_image.hpp"

#include <algorithm>
#include <cctype>

#include "packages/cuda_content.hpp"
#include "base/text.hpp"

namespace gpuenv::packages {
namespace {

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (std::size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
  return s;
}

/// The target's tags and marker values: the resolution's Python, the distribution's glibc, the platform's machine.
void set_wheel_target(WheelResolveRequest& w, const resolver::Resolution& res, const resolver::Distro& distro, const resolver::Platform& platform) {
  const auto& py = *res.python;
  w.platform.python_major = static_cast<int>(py.major());
  w.platform.python_minor = static_cast<int>(py.minor());
  if (distro.glibc) {
    w.platform.glibc_major = static_cast<int>(distro.glibc->major());
    w.platform.glibc_minor = static_cast<int>(distro.glibc->minor());
  }
  w.platform.arch = std::string(platform.machine());
  w.environment = cpython_linux_environment(platform.machine(), py.truncated(2).str());  // x.y: the patch level reads as 0
}

/// The project file's requirements for W's target, with their hashes and constraints (pip's hash-checking mode
/// when the file has hashes or is a lock), and, with PROJECT_INDEXES (the spec names no pip sources of its own),
/// the index the file names for each package.
Status add_project(const ProjectFile& project, bool project_indexes, WheelResolveRequest& w) {
  GPUENV_TRY(reqs, project_requirements(project, w.environment));
  w.hashes_origin = project.path;
  w.require_hashes = project.hashes_required;
  for (const auto& r : reqs) {
    w.requirements.push_back(r.requirement);
    w.requirement_origins.resize(w.requirements.size() - 1, "the spec");
    w.requirement_origins.push_back(r.where);
    if (project_indexes && !r.index.empty()) w.project_indexes[r.name] = r.index;
    if (!r.hashes.empty()) {
      auto& allowed = w.allowed_hashes[r.name];
      for (const auto& h : r.hashes)
        if (std::find(allowed.begin(), allowed.end(), h) == allowed.end()) allowed.push_back(h);
    }
  }
  for (const auto& c : project.constraints) {
    if (c.marker) {
      Environment e = w.environment;
      auto applies = c.marker->evaluate(e);
      if (!applies || !*applies) continue;
    }
    auto parsed = parse_requirement(c.requirement);
    if (!parsed) continue;  // read_project_file parsed it once already
    auto& limit = w.version_constraints[c.name];
    if (!parsed->specifier_text.empty()) limit += (limit.empty() ? "" : ",") + parsed->specifier.str();
    if (!c.hashes.empty()) {
      auto& allowed = w.allowed_hashes[c.name];
      allowed.insert(allowed.end(), c.hashes.begin(), c.hashes.end());
    }
  }
  return ok_status();
}

PinnedPackage pinned_wheel(const PinnedWheel& p) {
  PinnedPackage pin;
  pin.name = p.name;
  pin.version = p.version;
  pin.kind = PackageKind::wheel;
  pin.url = p.url;
  pin.size = p.size;
  pin.sha256 = p.sha256;
  pin.source = p.index;
  pin.architecture = p.filename.size() > 4 ? p.filename.substr(p.filename.rfind('-') + 1, p.filename.size() - 4 - p.filename.rfind('-') - 1) : "";
  return pin;
}

}  // namespace

std::vector<std::string> framework_requirements(const resolver::Resolution& r) {
  std::vector<std::string> out;
  for (const auto& f : r.frameworks) {
    if (f.name == "torch") {
      out.push_back("torch==" + f.version.str() + (f.is_default ? "" : "+" + f.variant));
    } else if (f.name == "tensorflow") {
      // tensorflow[and-cuda] (2.14 and later) brings NVIDIA's CUDA wheels; earlier releases expect CUDA from the system.
      const bool and_cuda = f.version >= *resolver::Version::parse("2.14");
      out.push_back(std::string("tensorflow") + (and_cuda ? "[and-cuda]" : "") + "==" + f.version.str());
    } else if (f.name == "jax") {
      out.push_back("jax[" + f.variant + "]==" + f.version.str());
    } else if (f.name == "vllm" || f.name == "sglang") {
      // Serving frameworks on the Python package index: one CUDA build a release, which pins its torch (also listed).
      out.push_back(f.name + "==" + f.version.str());
    }
  }
  return out;
}

std::vector<std::string> wheel_indexes(const PipIndexConfig& pip, const resolver::Resolution& r) {
  std::vector<std::string> out;
  auto add = [&](const std::string& u) {
    if (!u.empty() && std::find(out.begin(), out.end(), u) == out.end()) out.push_back(u);
  };
  for (const auto& e : pip.extra_index_urls)
    if (e.url.find("{variant}") != std::string::npos)
      for (const auto& f : r.frameworks)
        if (!f.is_default) add(replace_all(e.url, "{variant}", f.variant));
  add(pip.index_url.url);
  for (const auto& e : pip.extra_index_urls)
    if (e.url.find("{variant}") == std::string::npos) add(e.url);
  return out;
}

std::vector<std::string> vm_packages(const resolver::VmRequest& vm) {
  std::vector<std::string> out = {vm.kernel};
  out.insert(out.end(), k_vm_packages.begin(), k_vm_packages.end());
  if (vm.cloud_init) {
    out.push_back("cloud-init");
    out.push_back("openssh-server");  // the SSH keys cloud-init installs are for an SSH server
  }
  out.insert(out.end(), k_vm_gpuenv_runtime.begin(), k_vm_gpuenv_runtime.end());
  if (vm.driver) out.insert(out.end(), vm.driver->packages.begin(), vm.driver->packages.end());
  return out;
}

Result<AptUniverse> open_apt_universe(const PinImageRequest& req, AptFetchContext& apt) {
  AptUniverseRequest u;
  u.sources = req.sources->apt;
  u.codename = req.distro->codename;
  u.preferences_text = req.sources->apt_preferences;
  if (!req.sources->apt_preferences_origin.empty()) u.preferences_origin = req.sources->apt_preferences_origin;
  return open_apt_universe(u, apt);
}

std::string upstream_version(const std::string& v) {
  std::string out = v;
  if (const auto colon = out.find(':'); colon != std::string::npos) out = out.substr(colon + 1);
  if (const auto dash = out.rfind('-'); dash != std::string::npos) out = out.substr(0, dash);
  return out;
}

Result<DriverSource> find_driver_source(const PinImageRequest& req, const AptUniverse& universe) {
  const resolver::VmDriver& d = *req.spec->vm->driver;
  AptPinRequest a;
  a.required_set = false;
  a.alone = {d.module};
  GPUENV_TRY(pinned, pin_apt(universe, a));
  DriverSource out{pinned.alone.front(), {}};
  const std::string upstream = upstream_version(out.module.version);
  auto v = resolver::Version::parse(upstream);
  if (!v || v->parts().size() < 2 || v->major() < 100)
    return make_error(ErrorKind::spec, "vm.driver_version", "vm.driver.module " + out.module.name + " " + out.module.version + " carries no NVIDIA driver version",
                      req.spec->where("vm"), "name the NVIDIA kernel module's DKMS source package, e.g. nvidia-kernel-dkms or nvidia-tesla-535-kernel-dkms");
  out.driver = *v;
  return out;
}

Result<PinnedKernel> pinned_kernel(const std::vector<PinnedPackage>& packages) {
  std::vector<PinnedKernel> found;
  const std::string prefix = "linux-image-";
  for (const auto& p : packages)
    if (p.name.rfind(prefix, 0) == 0 && p.name.size() > prefix.size() && std::isdigit(static_cast<unsigned char>(p.name[prefix.size()])))
      found.push_back({p.name.substr(prefix.size()), p.version});
  if (found.size() != 1)
    return make_error(ErrorKind::spec, "vm.kernel", found.empty() ? "the pinned packages hold no kernel (linux-image-<version>)" : "the pinned packages hold several kernels",
                      "vm.kernel", "name one kernel package in vm.kernel, e.g. linux-image-cloud-amd64");
  return found.front();
}

Result<std::vector<PinnedPackage>> pin_driver_build(const PinnedKernel& kernel, const PinnedPackage& module, const AptUniverse& universe) {
  AptPinRequest a;
  a.required_set = true;
  a.packages = {"linux-headers-" + kernel.abi + "=" + kernel.version, "make", "libc6-dev"};
  a.alone = {module.name + "=" + module.version};
  auto pinned = pin_apt(universe, a);
  if (!pinned) {
    Error e = std::move(pinned).error();
    e.while_("pinning the driver build's packages (the kernel's headers, the compiler)");
    return e;
  }
  std::vector<PinnedPackage> out = std::move(pinned->packages);
  out.push_back(std::move(pinned->alone.front()));
  std::sort(out.begin(), out.end(), [](const PinnedPackage& x, const PinnedPackage& y) { return x.name < y.name; });
  return out;
}

Result<ImagePins> pin_image(const PinImageRequest& req, const AptUniverse& universe, AptFetchContext& apt) {
  const resolver::Spec& spec = *req.spec;
  const resolver::Resolution& res = *req.resolution;
  ImagePins out;

  AptPinRequest a;
  const bool wants_python = res.python && (!res.frameworks.empty() || !spec.pip_packages.empty() || spec.python_given || req.project);
  if (wants_python) a.packages.push_back("python3");
  for (const auto& p : spec.apt_packages) a.packages.push_back(p);
  if (spec.vm)
    for (const auto& p : vm_packages(*spec.vm)) a.packages.push_back(p);
  const bool slim = spec.base_variant == "slim";
  a.required_set = !slim;
  if (slim) a.left_out = k_slim_left_out;
  a.installed_status = req.base_dpkg_status;
  // CUDA and cuDNN that no framework brings: NVIDIA's apt repository when one is configured, else its wheels.
  const auto cuda = cuda_content(spec, res);
  bool cuda_from_apt = false;
  std::vector<std::string> cuda_looked_for;
  a.more_packages = [&](const PackageIndex& index, std::vector<std::string>& decisions) {
    std::vector<std::string> more;
    if (slim) {
      std::vector<std::string> core = k_slim_core;
      if (wants_python) core.insert(core.end(), k_slim_python_core.begin(), k_slim_python_core.end());
      for (const auto& name : core) {
        if (!index.versions(name).empty()) more.push_back(name);
        else decisions.push_back("slim base: " + name + " is not in the configured apt repositories; the image has none");
      }
    }
    if (cuda) {
      auto chosen = cuda_apt_packages(index, *cuda, decisions, cuda_looked_for);
      cuda_from_apt = chosen.has_value();
      if (chosen) more.insert(more.end(), chosen->begin(), chosen->end());
    }
    return more;
  };
  auto debs = pin_apt(universe, a);
  if (!debs) return std::move(debs).error();
  out.packages = std::move(debs->packages);
  out.decisions = std::move(debs->decisions);

  std::vector<std::string> cuda_wheels;
  if (cuda && !cuda_from_apt) {
    cuda_wheels = cuda_wheel_requirements(*cuda);
    if (!res.python) {
      return make_error(ErrorKind::unsatisfiable, "lock.no_cuda_source",
                        "CUDA " + cuda->cuda.str() + " is not in the configured apt repositories (looked for " + join(cuda_looked_for, ", ") +
                            ") and NVIDIA's CUDA wheels need a Python version, which the resolution has none of",
                        "sources", "configure NVIDIA's CUDA apt repository in the spec's sources.apt, or set python");
    }
  }
  if (wants_python || !cuda_wheels.empty()) {
    WheelResolveRequest w;
    w.indexes = wheel_indexes(req.sources->pip, res);
    if (w.indexes.empty()) {
      return make_error(ErrorKind::usage, "wheel.no_index", "no Python package index is configured", "sources",
                        "set sources.pip.index_url in the spec or configure pip (PIP_INDEX_URL, pip.conf)");
    }
    set_wheel_target(w, res, *req.distro, req.platform);
    w.requirements = framework_requirements(res);
    if (req.project) {
      // A framework the project pins comes as the project says (its extras, its hashes), not as gpuenv would ask.
      std::erase_if(w.requirements, [&](const std::string& r) {
        return project_pin(*req.project, canonicalize_name(r.substr(0, r.find_first_of("[=")))).has_value();
      });
    }
    for (const auto& r : cuda_wheels) w.requirements.push_back(r);
    for (const auto& p : spec.pip_packages) w.requirements.push_back(p);
    if (req.project) GPUENV_CHECK(add_project(*req.project, !spec.sources.pip_given, w));
    out.requirements = w.requirements;
    if (!w.requirements.empty()) {
      w.cache = apt.cache;
      auto wheels = resolve_wheels(*apt.fetcher, w);
      if (!wheels && !cuda_wheels.empty() && wheels.error().kind == ErrorKind::unsatisfiable) {
        Error e = std::move(wheels).error();
        std::string apt_part = cuda_looked_for.empty() ? "no apt repository was asked" : "not in the configured apt repositories (looked for " + join(cuda_looked_for, ", ") + ")";
        e.message = "CUDA " + cuda->cuda.str() + (cuda->cudnn ? " with cuDNN " + cuda->cudnn->str() : "") + " is " + apt_part +
                    ", and the wheels " + join(cuda_wheels, ", ") + " could not be resolved on " + join(w.indexes, ", ") + ": " + e.message;
        e.hint = "configure NVIDIA's CUDA apt repository (sources.apt) or an index that serves NVIDIA's wheels, or ask for a CUDA release they have";
        return e;
      }
      if (!wheels) return std::move(wheels).error();
      for (const auto& d : wheels->decisions) out.decisions.push_back(d);
      for (const auto& p : wheels->wheels) out.packages.push_back(pinned_wheel(p));
    }
  }
  for (auto& p : out.packages) p.platform = req.platform;
  return out;
}

}  // namespace gpuenv::packages
