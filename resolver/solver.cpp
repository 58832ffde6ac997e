#include "resolver/solver.hpp"
#include "base/text.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <set>

namespace gpuenv::resolver {
namespace {

struct Pick {
  const FrameworkRequest* request = nullptr;
  const FrameworkRelease* release = nullptr;
  const FrameworkVariant* variant = nullptr;
  const FrameworkRelease* pinned_by = nullptr;  ///< the release (vLLM, SGLang) whose torch pin brought this torch in
};

struct Candidate {
  std::vector<Pick> picks;
  const CudaToolkit* toolkit = nullptr;  ///< null when the spec asks for no CUDA (Spec::wants_cuda)
  std::optional<Version> cudnn;
  const CudnnFacts* cudnn_facts = nullptr;  // recorded or inferred facts of cudnn's build for the toolkit's major
  bool cudnn_from_framework = false;
  std::optional<Version> python;
  std::vector<Violation> violations;
  std::vector<FloorPart> floor;
  Version driver_min;
  bool forward_compat = false;
  const CompatPackage* compat = nullptr;
  std::vector<std::uint32_t> score;  // versions flattened to 6 components each: lexicographic order
  std::vector<std::string> notes;
};


std::string label(const Pick& p) { return p.release->framework + " " + p.release->version.str() + "+" + p.variant->name; }

std::string labels(const Candidate& c) {
  std::vector<std::string> parts;
  for (const auto& p : c.picks) parts.push_back(label(p));
  if (parts.empty()) parts.push_back(c.toolkit ? "CUDA " + c.toolkit->version.str() : std::string("an image without CUDA"));
  return join(parts, " with ");
}

std::string cuda_xy(const Version& v) { return v.truncated(2).str(); }

// Compares the first n components (padding with zeros), without allocating.
int compare_prefix(const Version& a, const Version& b, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    if (a.part(i) != b.part(i)) return a.part(i) < b.part(i) ? -1 : 1;
  }
  return 0;
}

void push_version(std::vector<std::uint32_t>& score, const Version& v) {
  for (std::size_t i = 0; i < 6; ++i) score.push_back(v.part(i));
}
void push_parts(std::vector<std::uint32_t>& score, std::initializer_list<std::uint32_t> parts) {
  std::size_t n = 0;
  for (auto p : parts) score.push_back(p), ++n;
  for (; n < 6; ++n) score.push_back(0);
}

// What a driver runs without help: "CUDA <= 12.2", from the newest toolkit whose driver it meets.
std::string native_cuda_of(const Catalog& catalog, const Version& driver) {
  const CudaToolkit* t = catalog.newest_native(driver);
  return t ? "CUDA <= " + cuda_xy(t->version) : "no CUDA release in the catalog";
}

bool variant_cuda_matches(const FrameworkRelease& r, const FrameworkVariant& v, const Version& toolkit) {
  if (r.framework == "jax") return toolkit.major() == v.cuda.major() && compare_prefix(toolkit, v.cuda, 2) >= 0;
  return compare_prefix(toolkit, v.cuda, 2) == 0;
}

bool covered_by_sass(const std::vector<int>& sm, int gpu) {
  return std::any_of(sm.begin(), sm.end(), [&](int s) { return sass_runs_on(s, gpu); });
}

// Newest PTX in `ptx` that the GPU can JIT, or 0.
int usable_ptx(const std::vector<int>& ptx, int gpu) {
  int best = 0;
  for (int p : ptx)
    if (ptx_runs_on(p, gpu)) best = std::max(best, p);
  return best;
}

std::string arch_list(const std::vector<int>& sm) {
  std::vector<std::string> parts;
  for (int s : sm) parts.push_back(arch_name(s));
  return join(parts, ", ");
}

class Solver {
 public:
  Solver(const Catalog& catalog, const ResolveRequest& request, const Distro& distro, const std::vector<Platform>& platforms)
      : m_catalog(catalog), m_req(request), m_spec(*request.spec), m_distro(distro),
        m_arm64(std::find(platforms.begin(), platforms.end(), Platform::arm64()) != platforms.end()) {
    if (request.driver) m_driver = request.driver->lower_bound();
  }

  Resolution run() {
    enumerate();
    Resolution out;
    out.base = m_spec.base();
    out.driver = m_driver;
    out.driver_origin = m_req.driver_origin;
    out.gpu_origin = m_req.gpu_origin;
    for (const auto& g : m_req.gpus) {
      out.gpu_models.push_back(g.name);
      if (std::find(out.archs.begin(), out.archs.end(), g.sm) == out.archs.end()) out.archs.push_back(g.sm);
    }
    std::sort(out.archs.begin(), out.archs.end());
    if (m_req.gpus.empty())
      out.notes.push_back("no GPU was given or detected: GPU architectures were not checked");
    if (!m_driver && !(m_spec.vm && m_spec.vm->driver))  // a VM image's own driver is found by the lock (app/lock.cpp)
      out.notes.push_back("no driver was given or detected: driver.min is what the fleet's driver must meet");

    // First pass without messages (the common, satisfiable case stays cheap); then the winner, or every
    // candidate when nothing fits, is evaluated again with its explanations.
    const Candidate* best = nullptr;
    for (const auto& c : m_candidates)
      if (c.violations.empty() && (!best || c.score > best->score)) best = &c;
    m_explain = true;
    if (best) {
      Candidate winner = *best;
      winner.violations.clear();
      winner.floor.clear();
      winner.notes.clear();
      winner.score.clear();
      winner.driver_min = Version{};
      winner.forward_compat = false;
      winner.compat = nullptr;
      evaluate(winner);
      fill(out, winner);
      out.ok = true;
      return out;
    }
    m_candidates.clear();
    enumerate();
    explain(out);
    return out;
  }

 private:
  void enumerate() {
    std::vector<Pick> picks;
    enumerate_picks(0, picks);
  }

  void enumerate_picks(std::size_t i, std::vector<Pick>& picks) {
    if (i == m_spec.frameworks.size()) {
      if (!m_spec.wants_cuda()) {  // no framework, cuda or cudnn: one candidate, without CUDA
        add(picks, nullptr, std::nullopt, false, {});
        return;
      }
      for (const auto& t : m_catalog.toolkits) {
        bool fits = true;
        for (const auto& p : picks) fits = fits && variant_cuda_matches(*p.release, *p.variant, t.version);
        if (fits) add_for_toolkit(picks, t);
      }
      return;
    }
    const auto& req = m_spec.frameworks[i];
    auto it = m_catalog.frameworks.find(req.name);
    if (it == m_catalog.frameworks.end()) return;
    for (const auto& release : it->second) {
      for (const auto& variant : release.variants) {
        if (m_req.default_variants_only && release.framework == "torch" && variant.name != release.default_variant) continue;
        if (!req.variant.empty() && variant.name != req.variant) continue;
        // Frameworks in one image share one CUDA major.
        bool same_major = true;
        for (const auto& p : picks) same_major = same_major && p.variant->cuda.major() == variant.cuda.major();
        if (!same_major) continue;
        picks.push_back(Pick{&req, &release, &variant});
        // A framework that pins torch brings that torch, unless the spec (or another framework) already has one.
        const bool needs_torch = release.torch && std::none_of(picks.begin(), picks.end(), [](const Pick& p) { return p.release->framework == "torch"; });
        std::optional<Pick> torch = needs_torch ? pinned_torch(picks.back()) : std::nullopt;
        if (needs_torch && !torch) {
          picks.pop_back();
          continue;
        }
        if (torch) picks.push_back(*torch);
        enumerate_picks(i + 1, picks);
        if (torch) picks.pop_back();
        picks.pop_back();
      }
    }
  }

  /// The torch pick P's release pins: that torch release's variant of P's variant name. None when the catalog lacks it
  /// (check_catalog refuses such a catalog) or when only the index's default variants may be used and it is not one.
  std::optional<Pick> pinned_torch(const Pick& p) const {
    const auto it = m_catalog.frameworks.find("torch");
    if (it == m_catalog.frameworks.end()) return std::nullopt;
    for (const auto& t : it->second) {
      if (t.version != *p.release->torch) continue;
      const FrameworkVariant* v = t.variant(p.variant->name);
      if (!v || (m_req.default_variants_only && v->name != t.default_variant)) return std::nullopt;
      return Pick{&m_any_torch, &t, v, p.release};
    }
    return std::nullopt;
  }

  void add_for_toolkit(const std::vector<Pick>& picks, const CudaToolkit& t) {
    // cuDNN: fixed by the frameworks when they bundle or require one; chosen from the catalog when the spec
    // asks for cuDNN without a framework; otherwise none.
    std::optional<Version> fixed;
    std::vector<Violation> pre;
    for (const auto& p : picks) {
      if (!p.variant->cudnn) continue;
      Version want = *p.variant->cudnn;
      if (p.release->framework == "jax") {
        // JAX states a minimum; the newest recorded release of that major at or above it is installed.
        const CudnnRelease* newest = nullptr;
        for (const auto& r : m_catalog.cudnn)
          if (r.version.major() == want.major() && r.version >= want && has_build(r, t)) newest = &r;
        if (newest) want = newest->version;
      }
      if (fixed && !(fixed->has_prefix(want) || want.has_prefix(*fixed) ||
                     (p.release->framework == "jax" && *fixed >= *p.variant->cudnn && fixed->major() == want.major()))) {
        pre.push_back({Rule::cudnn_conflict, label(p) + " needs cuDNN " + p.variant->cudnn->str() +
                                                   ", another framework fixes cuDNN " + fixed->str()});
      }
      if (!fixed || p.release->framework == "torch") fixed = want;  // torch's bundled cuDNN wins
    }
    if (fixed) {
      add(picks, &t, fixed, true, pre);
    } else if (m_spec.cudnn_given) {
      for (const auto& r : m_catalog.cudnn) add(picks, &t, r.version, false, pre);
    } else {
      add(picks, &t, std::nullopt, false, pre);
    }
  }

  static bool has_build(const CudnnRelease& r, const CudaToolkit& t) {
    return std::any_of(r.builds.begin(), r.builds.end(),
                       [&](const CudnnBuild& b) { return b.cuda_major == static_cast<int>(t.version.major()); });
  }

  void add(const std::vector<Pick>& picks, const CudaToolkit* t, std::optional<Version> cudnn, bool from_fw,
           const std::vector<Violation>& pre) {
    Candidate c;
    c.picks = picks;
    c.toolkit = t;
    c.cudnn = t ? cudnn : std::nullopt;
    c.cudnn_from_framework = from_fw;
    c.violations = pre;
    if (c.cudnn) c.cudnn_facts = &facts_of(*c.cudnn, static_cast<int>(t->version.major()));
    evaluate(c);
    m_candidates.push_back(std::move(c));
  }

  const CudnnFacts& facts_of(const Version& v, int cuda_major) {
    for (const auto& [key, f] : m_cudnn_facts)
      if (key.second == cuda_major && key.first == v) return *f;
    m_cudnn_facts.emplace_back(std::make_pair(v, cuda_major), std::make_unique<CudnnFacts>(m_catalog.cudnn_facts(v, cuda_major)));
    return *m_cudnn_facts.back().second;
  }

  template <class F>
  void violate(Candidate& c, Rule rule, F&& message) const {
    c.violations.push_back({rule, m_explain ? message() : std::string()});
  }
  template <class F>
  void floor_part(Candidate& c, const Version& driver, F&& why, Rule rule) const {
    c.floor.push_back({driver, m_explain ? why() : std::string(), rule == Rule::driver, rule});
  }
  template <class F>
  void note(Candidate& c, F&& text) const {
    if (m_explain) c.notes.push_back(text());
  }

  void evaluate(Candidate& c) {
    const CudaToolkit* t = c.toolkit;  // null: no CUDA, so no CUDA, cuDNN or PTX rule applies
    const CudnnFacts* cf = c.cudnn && t ? c.cudnn_facts : nullptr;
    if (cf && !cf->recorded) {
      note(c, [&] {
        std::string n = "cuDNN " + c.cudnn->str() + " has no support matrix in the catalog; ";
        if (cf->below && cf->above)
          n += "its facts were taken where the recorded neighbours cuDNN " + cf->below->str() + " and " + cf->above->str() + " agree";
        else
          n += "no recorded release of cuDNN " + std::to_string(c.cudnn->major()) + " lies on both sides of it, so nothing was inferred";
        if (!cf->unknown.empty()) {
          n += "; not known, so not checked: " + join(cf->unknown, ", ");
          if (c.cudnn_from_framework) n += " (the framework's own recorded facts decide)";
        }
        return n;
      });
    }
    // Spec constraints.
    for (const auto& p : c.picks) {
      if (!p.request->version.matches(p.release->version))
        violate(c, Rule::framework_version, [&] { return std::string("the spec asks for " + p.release->framework + " '" +
                                                              p.request->version.str() + "'; " + label(p) + " does not match"); });
    }
    if (t && m_spec.cuda_given && !m_spec.cuda.matches(t->version)) {
      std::string what = c.picks.empty() ? "CUDA " + t->version.str() : labels(c) + " is built for CUDA " + cuda_xy(t->version);
      violate(c, Rule::cuda_constraint, [&] { return std::string("the spec asks for CUDA '" + m_spec.cuda.str() + "'; " + what + " does not match"); });
    }
    if (m_spec.cudnn_given && (!c.cudnn || !m_spec.cudnn.matches(*c.cudnn))) {
      std::string what = c.cudnn ? "cuDNN " + c.cudnn->str() : "no cuDNN";
      if (c.cudnn_from_framework) what = labels(c) + " comes with " + what;
      violate(c, Rule::cudnn_constraint, [&] { return std::string("the spec asks for cuDNN '" + m_spec.cudnn.str() + "'; " + what + " does not match"); });
    }
    choose_python(c);
    // glibc of the base against the framework's wheels.
    for (const auto& p : c.picks) {
      if (p.release->glibc_min && m_distro.glibc && *m_distro.glibc < *p.release->glibc_min)
        violate(c, Rule::glibc, [&] { return std::string(p.release->framework + " " + p.release->version.str() + " wheels need glibc >= " +
                                                 p.release->glibc_min->str() + "; " + m_spec.base() + " has " + m_distro.glibc->str()); });
    }
    check_aarch64(c);
    check_pins(c);
    // cuDNN build for this CUDA.
    if (cf && cf->has_build == false) {
      violate(c, Rule::cudnn_cuda, [&] { return std::string("cuDNN " + c.cudnn->str() + " has no build for CUDA " + std::to_string(t->version.major())); });
    } else if (cf && !c.cudnn_from_framework &&
               ((cf->cuda_min && compare_prefix(t->version, *cf->cuda_min, 2) < 0) || (cf->cuda_max && compare_prefix(t->version, *cf->cuda_max, 2) > 0))) {
      violate(c, Rule::cudnn_cuda, [&] { return std::string("cuDNN " + c.cudnn->str() + " supports CUDA " + (cf->cuda_min ? cf->cuda_min->str() : "?") + " to " +
                                                    (cf->cuda_max ? cf->cuda_max->str() : "?") + ", not " + cuda_xy(t->version)); });
    }
    // Architectures.
    const CudaMajor* major = t ? m_catalog.major(static_cast<int>(t->version.major())) : nullptr;
    Version ptx_floor;
    std::string ptx_why;
    for (const auto& g : m_req.gpus) {
      if (t && !covered_by_sass(t->sm, g.sm)) {
        violate(c, Rule::arch_cuda, [&] { return std::string("CUDA " + cuda_xy(t->version) + " supports " + arch_range(t->sm) + "; " + g.name +
                                                     " is " + arch_name(g.sm)); });
      }
      if (cf && cf->sm && !covered_by_sass(*cf->sm, g.sm)) {
        violate(c, Rule::arch_cudnn, [&] { return std::string("cuDNN " + c.cudnn->str() + " for CUDA " + std::to_string(t->version.major()) +
                                                      " supports " + arch_range(*cf->sm) + "; " + g.name + " is " + arch_name(g.sm)); });
      }
      for (const auto& p : c.picks) {
        framework_arch(c, g, p, p.variant->sm, p.variant->ptx, false, ptx_floor, ptx_why);
        if (m_arm64 && p.release->cuda_on_aarch64(p.variant->name) == true && !from_variant_index(p))
          framework_arch(c, g, p, p.variant->aarch64_sm, p.variant->aarch64_ptx, true, ptx_floor, ptx_why);
      }
    }
    // Driver floor.
    if (major) floor_part(c, major->minor_compat_driver_min, [&] { return std::string("CUDA " + std::to_string(major->major) + ".x runtime, with minor-version compatibility"); }, Rule::driver);
    if (cf && cf->driver_min) floor_part(c, *cf->driver_min, [&] { return std::string("cuDNN " + c.cudnn->str() + " for CUDA " + std::to_string(t->version.major())); }, Rule::driver);
    for (const auto& p : c.picks)
      if (p.variant->driver_min) floor_part(c, *p.variant->driver_min, [&] { return std::string(label(p) + " states this minimum"); }, Rule::driver);
    if (!ptx_floor.empty()) floor_part(c, ptx_floor, [&] { return std::string(ptx_why); }, Rule::driver);
    for (const auto& g : m_req.gpus) {
      if (g.model && g.model->driver_min) floor_part(c, *g.model->driver_min, [&] { return std::string(g.name + " is supported from this driver"); }, Rule::gpu_driver);
    }
    if (m_spec.gpu.confidential == Confidential::required) {
      for (const auto& g : m_req.gpus) {
        if (!g.model) {
          violate(c, Rule::confidential, [&] { return std::string("confidential computing is required, but " + g.name +
                                                          " is given by architecture only, so its support cannot be checked"); });
        } else if (!g.model->confidential) {
          violate(c, Rule::confidential, [&] { return std::string("confidential computing is required, but " + g.name + " does not support it"); });
        } else if (g.model->confidential_driver_min) {
          floor_part(c, *g.model->confidential_driver_min, [&] { return std::string("confidential computing on " + g.name); }, Rule::confidential);
        }
      }
      if (m_req.gpus.empty())
        violate(c, Rule::confidential, [&] { return std::string("confidential computing is required, but no GPU model is given to check it against"); });
    }
    for (const auto& f : c.floor) c.driver_min = std::max(c.driver_min, f.driver);
    if (m_driver) check_driver(c);
    // Preference score, compared lexicographically (docs/resolver.md).
    c.score.reserve(6 * (4 + 2 * c.picks.size()));
    push_parts(c.score, {c.forward_compat ? 0u : 1u});
    for (const auto& p : c.picks) push_version(c.score, p.release->version);
    for (const auto& p : c.picks) {
      const bool is_default = p.variant->name == p.release->default_variant;
      push_parts(c.score, {is_default ? 1u : 0u, p.variant->cuda.major(), p.variant->cuda.minor()});
    }
    push_version(c.score, t ? t->version : Version{});
    push_version(c.score, c.cudnn ? *c.cudnn : Version{});
    push_version(c.score, c.python ? *c.python : Version{});
  }

  /// Whether GPU G runs pick P's build with machine code SM and PTX (the variant's recorded build, or with AARCH64 its
  /// Linux aarch64 build); JIT of PTX raises PTX_FLOOR. A build whose architectures are not recorded is not checked.
  void framework_arch(Candidate& c, const GpuTarget& g, const Pick& p, const std::vector<int>& sm, const std::vector<int>& ptx_list, bool aarch64,
                      Version& ptx_floor, std::string& ptx_why) const {
    if (sm.empty() && ptx_list.empty()) return;
    if (covered_by_sass(sm, g.sm)) return;
    auto build = [&] { return label(p) + (aarch64 ? "'s Linux aarch64 build" : ""); };
    const int ptx = usable_ptx(ptx_list, g.sm);
    if (ptx == 0) {
      violate(c, Rule::arch_framework, [&] { return std::string(build() + " has machine code for " + arch_list(sm) +
                                                        (ptx_list.empty() ? " and no PTX" : " and PTX for " + arch_list(ptx_list)) +
                                                        "; it cannot run on " + g.name + " (" + arch_name(g.sm) + ")" +
                                                        (aarch64 ? " in the linux/arm64 image" : "")); });
      return;
    }
    // PTX JIT needs a driver at least as new as the toolkit that emitted the PTX.
    Version need;
    for (const auto* tk : m_catalog.toolkits_of(p.variant->cuda)) need = std::max(need, tk->driver_min);
    if (need > ptx_floor) {
      ptx_floor = need;
      if (m_explain) ptx_why = build() + " has no machine code for " + g.name + " (" + arch_name(g.sm) + "); JIT of its compute_" +
                std::to_string(ptx) + " PTX needs the CUDA " + cuda_xy(p.variant->cuda) + " driver";
    }
  }

  /// A framework that pins torch (vLLM, SGLang) runs on that torch only: the image's torch (the spec's, or the one another
  /// framework pins) must be the release and variant it pins. A release that pins a package the Python package index
  /// serves no wheel of cannot be installed from there.
  void check_pins(Candidate& c) const {
    const Pick* torch = nullptr;
    for (const auto& p : c.picks)
      if (p.release->framework == "torch") torch = &p;
    for (const auto& p : c.picks) {
      const FrameworkRelease& r = *p.release;
      for (const auto& pin : r.pins_without_wheel)
        violate(c, Rule::pin_without_wheel, [&] { return r.framework + " " + r.version.str() + " pins " + pin +
                                                         ", of which the Python package index serves no wheel: it cannot be installed from there"; });
      if (!r.torch || !torch || torch->pinned_by == &r) continue;
      if (torch->release->version == *r.torch && torch->variant->name == p.variant->name) continue;
      violate(c, Rule::framework_pin, [&] { return pin_conflict(p, *torch); });
    }
  }

  /// Why TORCH is not the torch P pins: "vllm 0.34.0 pins torch==2.14.0 (its wheels' Requires-Dist); the spec asks for torch '2.9'".
  static std::string pin_conflict(const Pick& p, const Pick& torch) {
    const FrameworkRelease& r = *p.release;
    const std::string pins = r.framework + " " + r.version.str() + " pins torch==" + r.torch->str() + " (its wheels' Requires-Dist)";
    if (torch.release->version == *r.torch)
      return label(p) + " is built against torch " + r.torch->str() + "+" + p.variant->name + "; the image's torch would be " + label(torch);
    if (torch.pinned_by)
      return pins + "; " + torch.pinned_by->framework + " " + torch.pinned_by->version.str() + " pins torch==" + torch.release->version.str() +
             ", and one image holds one torch";
    return pins + "; the spec asks for torch '" + torch.request->version.str() + "'";
  }

  /// torch's variants other than its default come from torch's own wheel index (app/lock.cpp), which the catalog's
  /// aarch64 facts do not describe.
  static bool from_variant_index(const Pick& p) { return p.release->framework == "torch" && p.variant->name != p.release->default_variant; }

  /// Rule 9 (docs/resolver.md): with linux/arm64 among the image's platforms, each framework's Linux aarch64 wheels on the
  /// Python package index must be a CUDA build of the chosen variant. Facts the catalog does not record are not the
  /// ground of a refusal: the resolution's notes say what was not checked.
  void check_aarch64(Candidate& c) const {
    if (!m_arm64 || !c.toolkit) return;  // no CUDA asked for: a CPU-only image is what the spec wants
    for (const auto& p : c.picks) {
      const FrameworkRelease& r = *p.release;
      if (from_variant_index(p)) {
        note(c, [&] { return label(p) + " comes from torch's own wheel index, whose Linux aarch64 wheels the catalog does not record: "
                             "the linux/arm64 image was not checked for them"; });
        continue;
      }
      const std::optional<bool> cuda = r.cuda_on_aarch64(p.variant->name);
      if (!cuda) {
        note(c, [&] { return r.framework + " " + r.version.str() + ": the catalog does not record whether its Linux aarch64 wheels on the "
                             "Python package index carry CUDA; the linux/arm64 image was not checked for it"; });
      } else if (!*cuda) {
        violate(c, Rule::platform_framework, [&] { return aarch64_refusal(r, *p.variant); });
      } else if (p.variant->aarch64_sm.empty() && p.variant->aarch64_ptx.empty() && !m_req.gpus.empty()) {
        note(c, [&] { return label(p) + ": the catalog does not record the architectures of its Linux aarch64 build; the GPUs were checked "
                             "against its recorded build only"; });
      }
    }
  }

  /// "torch 2.10.0's Linux aarch64 wheels on the Python package index are CPU-only ...; the first later torch release ... is 2.11.0".
  std::string aarch64_refusal(const FrameworkRelease& r, const FrameworkVariant& v) const {
    const std::string id = r.framework + " " + r.version.str();
    std::string msg = r.aarch64_cuda->empty()
                          ? id + "'s Linux aarch64 wheels on the Python package index are CPU-only, so the linux/arm64 image would have no CUDA"
                          : id + "+" + v.name + " has no CUDA build for Linux aarch64 on the Python package index (there: " + join(*r.aarch64_cuda, ", ") + ")";
    const FrameworkRelease* next = nullptr;
    for (const auto& other : m_catalog.frameworks.at(r.framework))
      if (other.version > r.version && other.aarch64_cuda && !other.aarch64_cuda->empty() && (!next || other.version < next->version)) next = &other;
    if (next) return msg + "; the first later " + r.framework + " release with CUDA on aarch64 there is " + next->version.str();
    return msg + "; no later " + r.framework + " release in the catalog has CUDA on aarch64 there";
  }

  static std::string arch_range(const std::vector<int>& sm) {
    if (sm.empty()) return "no architectures";
    return arch_name(sm.front()) + " to " + arch_name(sm.back());
  }

  void choose_python(Candidate& c) {
    std::vector<Version> allowed;
    for (const auto& py : m_distro.python) {
      bool ok = true;
      for (const auto& p : c.picks)
        ok = ok && compare_prefix(py, p.release->python_min, 2) >= 0 && compare_prefix(py, p.release->python_max, 2) <= 0;
      if (ok) allowed.push_back(py);
    }
    std::sort(allowed.begin(), allowed.end());
    if (allowed.empty()) {
      std::vector<std::string> ranges;
      for (const auto& p : c.picks)
        ranges.push_back(p.release->framework + " " + p.release->version.str() + " supports Python " + p.release->python_min.str() +
                         " to " + p.release->python_max.str());
      std::vector<std::string> have;
      for (const auto& py : m_distro.python) have.push_back(py.str());
      violate(c, Rule::python_framework, [&] { return std::string(join(ranges, "; ") + "; " + m_spec.base() + " provides Python " + join(have, ", ")); });
      return;
    }
    for (auto it = allowed.rbegin(); it != allowed.rend(); ++it) {
      if (!m_spec.python_given || m_spec.python.matches(*it)) {
        c.python = *it;
        return;
      }
    }
    c.python = allowed.back();
    std::vector<std::string> have;
    for (const auto& py : allowed) have.push_back(py.str());
    std::string who = c.picks.empty() ? m_spec.base() : labels(c) + " on " + m_spec.base();
    violate(c, Rule::python_constraint, [&] { return std::string("the spec asks for Python '" + m_spec.python.str() + "'; " + who +
                                                         " can use Python " + join(have, ", ")); });
  }

  void check_driver(Candidate& c) {
    const Version& d = *m_driver;
    bool unmet_any = false, liftable = true;
    for (const auto& f : c.floor) {
      if (!(f.driver > d)) continue;
      unmet_any = true;
      if (!f.compat_can_lift) {
        liftable = false;
        violate(c, f.rule_if_unmet, [&] {
          const std::string who = f.rule_if_unmet == Rule::confidential ? f.why : f.why.substr(0, f.why.find(" is supported"));
          const bool packaged = m_req.driver_origin.rfind("vm.driver", 0) == 0;  // a VM image's own driver: say which package
          return who + " needs driver >= " + f.driver.str() + "; the driver is " + d.str() + (packaged ? ", from " + m_req.driver_origin : "");
        });
      }
    }
    if (!unmet_any) return;
    std::string why_not;
    const CompatPackage* pkg = compat_for(c, m_explain ? &why_not : nullptr);
    if (liftable && pkg) {
      c.forward_compat = true;
      c.compat = pkg;
      return;
    }
    for (const auto& f : c.floor) {
      if (!(f.driver > d) || !f.compat_can_lift) continue;
      violate(c, Rule::driver, [&] {
        std::string msg = labels(c) + " needs driver >= " + f.driver.str() + " (" + f.why + "); driver " + d.str() + " runs " +
                          native_cuda_of(m_catalog, d);
        if (!why_not.empty()) msg += "; forward compatibility does not apply: " + why_not;
        return msg;
      });
    }
  }

  const CompatPackage* compat_for(const Candidate& c, std::string* why_not_out) const {
    std::string ignored;
    std::string& why_not = why_not_out ? *why_not_out : ignored;
    if (m_req.gpus.empty()) {
      why_not = "no GPU model is known, so data-center support cannot be checked";
      return nullptr;
    }
    for (const auto& g : m_req.gpus) {
      if (!g.model) {
        why_not = g.name + " is given by architecture only";
        return nullptr;
      }
      if (m_catalog.compat_datacenter_only && !g.model->datacenter) {
        why_not = g.name + " is not a data-center GPU";
        return nullptr;
      }
    }
    if (!c.toolkit) {
      why_not = "the image has no CUDA";
      return nullptr;
    }
    const std::string branch = std::to_string(m_driver->major());
    const Version xy = c.toolkit->version.truncated(2);
    for (const auto& p : m_catalog.compat) {
      if (p.cuda < xy || p.cuda.major() != xy.major()) continue;
      if (std::find(p.driver_branches.begin(), p.driver_branches.end(), branch) != p.driver_branches.end()) return &p;
    }
    why_not = "no cuda-compat package for CUDA " + xy.str() + " supports the R" + branch + " driver branch";
    return nullptr;
  }

  void fill(Resolution& out, const Candidate& c) const {
    if (c.toolkit) out.cuda = c.toolkit->version;
    out.cudnn = c.cudnn;
    out.python = c.python;
    out.driver_min = c.driver_min;
    out.driver_floor = c.floor;
    std::stable_sort(out.driver_floor.begin(), out.driver_floor.end(), [](const FloorPart& a, const FloorPart& b) { return a.driver > b.driver; });
    out.forward_compat = c.forward_compat;
    if (c.toolkit) {
      out.cuda_native_driver = c.toolkit->driver_min;
      if (m_driver) out.driver_mode = c.forward_compat ? "forward_compat" : (*m_driver >= c.toolkit->driver_min ? "native" : "minor_version_compat");
    } else {
      out.notes.push_back(std::string("the spec asks for no CUDA (no framework, cuda or cudnn): the image gets none, and the driver floor is ") +
                          (out.driver_floor.empty() ? "none" : "only what its GPUs need"));
    }
    if (c.compat) {
      out.compat_package = c.compat->cuda;
      out.notes.push_back("driver " + m_driver->str() + " is below " + c.driver_min.str() + "; the image needs cuda-compat " +
                          c.compat->cuda.str() + " (forward compatibility) on the data-center GPUs");
    }
    for (const auto& p : c.picks) {
      out.frameworks.push_back(ChosenFramework{p.release->framework, p.release->version, p.variant->name, p.variant->cuda,
                                               p.variant->cudnn, p.variant->name == p.release->default_variant, p.variant->sm, p.variant->ptx,
                                               p.pinned_by ? p.pinned_by->framework + " " + p.pinned_by->version.str() : std::string()});
      if (p.pinned_by)
        out.notes.push_back(label(p) + " is the torch " + p.pinned_by->framework + " " + p.pinned_by->version.str() +
                            " pins (torch==" + p.release->version.str() + " in its wheels' Requires-Dist); torch's rules apply to it as well");
      if (p.variant->sm.empty() && p.variant->ptx.empty())
        out.notes.push_back(label(p) + ": the catalog does not record its compiled architectures; they were not checked");
    }
    if (!c.cudnn_from_framework && c.cudnn) {
      for (auto& f : out.frameworks) if (!f.cudnn) f.cudnn = c.cudnn;
    }
    for (const auto& n : c.notes) out.notes.push_back(n);
  }

  static bool subset_of(const Candidate& c, std::initializer_list<Rule> rules) {
    return !c.violations.empty() && std::all_of(c.violations.begin(), c.violations.end(), [&](const Violation& v) {
      return std::find(rules.begin(), rules.end(), v.rule) != rules.end();
    });
  }

  const Candidate* best_where(std::initializer_list<Rule> rules) const {
    const Candidate* best = nullptr;
    for (const auto& c : m_candidates)
      if (subset_of(c, rules) && (!best || c.score > best->score)) best = &c;
    return best;
  }

  static bool breaks_spec(const Candidate& c) {
    return std::any_of(c.violations.begin(), c.violations.end(), [](const Violation& v) {
      return v.rule == Rule::framework_version || v.rule == Rule::cuda_constraint || v.rule == Rule::cudnn_constraint ||
             v.rule == Rule::python_constraint;
    });
  }

  void explain(Resolution& out) const {
    std::vector<const Candidate*> requested;
    for (const auto& c : m_candidates)
      if (!breaks_spec(c)) requested.push_back(&c);
    std::set<std::string> seen;
    const std::vector<Violation> pins = pin_conflicts();  // said once, for the spec's versions, not per combination
    auto add = [&](const Violation& v) {
      if (!pins.empty() && v.rule == Rule::framework_pin) return;
      if (out.conflicts.size() < 8 && seen.insert(v.message).second) out.conflicts.push_back(v);
    };
    for (const auto& v : pins)
      if (seen.insert(v.message).second) out.conflicts.push_back(v);
    if (m_candidates.empty()) {
      add({Rule::framework_version, "the catalog has no combination for this spec"});
    } else if (requested.empty()) {
      // The spec's own constraints cannot hold together: name the ones that no release meets.
      for (const auto& req : m_spec.frameworks) {
        const auto& releases = m_catalog.frameworks.at(req.name);
        const bool any = std::any_of(releases.begin(), releases.end(), [&](const FrameworkRelease& r) { return req.version.matches(r.version); });
        if (!any)
          add({Rule::framework_version, "no " + req.name + " release in the catalog matches '" + req.version.str() + "' (known: " +
                                            releases.front().version.str() + " to " + releases.back().version.str() + ")"});
      }
      if (out.conflicts.empty()) {
        std::size_t fewest = SIZE_MAX;
        for (const auto& c : m_candidates) fewest = std::min(fewest, spec_violations(c));
        for (const auto& c : m_candidates)
          if (spec_violations(c) == fewest)
            for (const auto& v : c.violations)
              if (v.rule != Rule::framework_version || m_spec.frameworks.size() > 1) add(v);
      }
    } else {
      // Explain why the combinations the spec asks for fail, starting with the one it would prefer.
      std::vector<const Candidate*> sorted = requested;
      std::sort(sorted.begin(), sorted.end(), [](const Candidate* a, const Candidate* b) {
        if (a->violations.size() != b->violations.size()) return a->violations.size() < b->violations.size();
        return a->score > b->score;
      });
      aggregate_driver(out, requested);
      const std::size_t fewest = sorted.front()->violations.size();
      for (const auto* c : sorted) {
        if (c->violations.size() != fewest) break;
        for (const auto& v : c->violations) add(v);
      }
      if (requested.size() > 1 && out.conflicts.size() < 8)
        out.conflicts.push_back({out.conflicts.front().rule, std::to_string(requested.size()) +
                                                                  " combinations match the spec's versions; none satisfies every rule"});
    }
    suggest(out);
  }

  /// Torch pins the spec's own versions rule out, said before anything else: "vllm '0.34' pins torch 2.14.0; the spec
  /// asks for torch '2.9'", or two frameworks whose allowed releases pin no torch in common.
  std::vector<Violation> pin_conflicts() const {
    std::vector<Violation> out;
    const FrameworkRequest* torch = nullptr;
    for (const auto& req : m_spec.frameworks)
      if (req.name == "torch") torch = &req;
    std::vector<std::pair<const FrameworkRequest*, std::vector<Version>>> pinned;
    for (const auto& req : m_spec.frameworks) {
      const std::vector<Version> pins = torch_pins(req);
      if (pins.empty()) continue;
      const auto allowed = [&](const std::vector<Version>& vs, const Constraint& want) {
        return std::any_of(vs.begin(), vs.end(), [&](const Version& v) { return want.matches(v); });
      };
      if (torch && !allowed(pins, torch->version))
        out.push_back({Rule::framework_pin, req.name + " '" + req.version.str() + "' pins torch " + version_list(pins) +
                                                "; the spec asks for torch '" + torch->version.str() + "'"});
      for (const auto& other : pinned) {
        const bool common = std::any_of(pins.begin(), pins.end(), [&](const Version& v) {
          return std::find(other.second.begin(), other.second.end(), v) != other.second.end();
        });
        if (!common)
          out.push_back({Rule::framework_pin, other.first->name + " '" + other.first->version.str() + "' pins torch " + version_list(other.second) +
                                                  "; " + req.name + " '" + req.version.str() + "' pins torch " + version_list(pins) +
                                                  "; one image holds one torch"});
      }
      pinned.emplace_back(&req, pins);
    }
    return out;
  }

  /// The torch releases pinned by the releases of REQ's framework that REQ allows (sorted, each once).
  std::vector<Version> torch_pins(const FrameworkRequest& req) const {
    std::vector<Version> out;
    const auto it = m_catalog.frameworks.find(req.name);
    if (it == m_catalog.frameworks.end()) return out;
    for (const auto& r : it->second)
      if (r.torch && req.version.matches(r.version) && std::find(out.begin(), out.end(), *r.torch) == out.end()) out.push_back(*r.torch);
    std::sort(out.begin(), out.end());
    return out;
  }

  static std::string version_list(const std::vector<Version>& vs) {
    std::vector<std::string> parts;
    for (const auto& v : vs) parts.push_back(v.str());
    return join(parts, " or ");
  }

  static std::size_t spec_violations(const Candidate& c) {
    return static_cast<std::size_t>(std::count_if(c.violations.begin(), c.violations.end(), [](const Violation& v) {
      return v.rule == Rule::framework_version || v.rule == Rule::cuda_constraint || v.rule == Rule::cudnn_constraint ||
             v.rule == Rule::python_constraint;
    }));
  }

  // "torch 2.11.0 needs CUDA >= 12.6; driver 515.105.01 supports CUDA <= 11.7" when every variant of the preferred
  // framework release fails on the driver alone.
  void aggregate_driver(Resolution& out, const std::vector<const Candidate*>& requested) const {
    if (!m_driver || m_spec.frameworks.empty()) return;
    const Candidate* top = nullptr;
    for (const auto* c : requested)
      if (!top || c->picks.front().release->version > top->picks.front().release->version) top = c;
    const FrameworkRelease* release = top->picks.front().release;
    Version lowest_floor;
    Version lowest_cuda;
    bool first = true;
    for (const auto* c : requested) {
      if (c->picks.front().release != release) continue;
      const bool driver_only = std::all_of(c->violations.begin(), c->violations.end(), [](const Violation& v) { return v.rule == Rule::driver; });
      if (!driver_only) return;
      if (first || c->driver_min < lowest_floor) lowest_floor = c->driver_min;
      if (first || c->picks.front().variant->cuda < lowest_cuda) lowest_cuda = c->picks.front().variant->cuda;
      first = false;
    }
    if (first) return;
    out.conflicts.push_back({Rule::driver, release->framework + " " + release->version.str() + " needs CUDA >= " + cuda_xy(lowest_cuda) +
                                               " and so a driver >= " + lowest_floor.str() + "; driver " + m_driver->str() + " supports " +
                                               native_cuda_of(m_catalog, *m_driver)});
  }

  void suggest(Resolution& out) const {
    if (const Candidate* c = best_where({Rule::framework_version, Rule::cuda_constraint, Rule::cudnn_constraint})) {
      std::string where = m_driver ? "this driver" : "these rules";
      if (!m_req.gpus.empty()) where += " and GPU";
      const std::string cuda = c->toolkit ? "CUDA " + c->toolkit->version.str() : std::string("no CUDA");
      out.suggestions.push_back(labels(*c) + " (" + cuda + (c->cudnn ? ", cuDNN " + c->cudnn->str() : "") + ") works with " + where);
    }
    if (m_driver) {
      // The smallest driver upgrade that makes a combination the spec asks for work.
      const Candidate* lowest = nullptr;
      for (const auto& c : m_candidates)
        if (subset_of(c, {Rule::driver, Rule::gpu_driver}) &&
            (!lowest || c.driver_min < lowest->driver_min || (c.driver_min == lowest->driver_min && c.score > lowest->score)))
          lowest = &c;
      if (lowest && m_spec.vm && m_spec.vm->driver)
        out.suggestions.push_back("name a driver package of version >= " + lowest->driver_min.str() + " in vm.driver.module (and its packages) for " +
                                  labels(*lowest));
      else if (lowest)
        out.suggestions.push_back("upgrade the driver to >= " + lowest->driver_min.str() + " for " + labels(*lowest));
    }
    if (const Candidate* c = best_where({Rule::python_constraint}); c && c->python) {
      out.suggestions.push_back("ask for Python " + c->python->str() + " (" + labels(*c) + ")");
    }
    if (const Candidate* c = best_where({Rule::confidential}); c && m_spec.gpu.confidential == Confidential::required) {
      out.suggestions.push_back("set gpu.confidential to 'allowed' (" + labels(*c) + " works without confidential computing)");
    }
  }

  const Catalog& m_catalog;
  const ResolveRequest& m_req;
  const Spec& m_spec;
  const Distro& m_distro;
  bool m_arm64 = false;  ///< linux/arm64 is among the image's platforms
  std::optional<Version> m_driver;
  std::vector<std::pair<std::pair<Version, int>, std::unique_ptr<CudnnFacts>>> m_cudnn_facts;  // stable addresses
  std::vector<Candidate> m_candidates;
  bool m_explain = false;
  const FrameworkRequest m_any_torch{"torch", Constraint{}, {}, {}, {}};  ///< the request of a torch a framework pins
};

}  // namespace

bool sass_runs_on(int built, int gpu) { return built / 10 == gpu / 10 && built % 10 <= gpu % 10; }
bool ptx_runs_on(int ptx, int gpu) { return ptx <= gpu; }

std::string_view rule_name(Rule rule) {
  switch (rule) {
    case Rule::framework_version: return "framework_version";
    case Rule::cuda_constraint: return "cuda_constraint";
    case Rule::cudnn_constraint: return "cudnn_constraint";
    case Rule::python_constraint: return "python_constraint";
    case Rule::python_framework: return "python_framework";
    case Rule::arch_cuda: return "arch_cuda";
    case Rule::arch_cudnn: return "arch_cudnn";
    case Rule::arch_framework: return "arch_framework";
    case Rule::cudnn_cuda: return "cudnn_cuda";
    case Rule::driver: return "driver";
    case Rule::gpu_driver: return "gpu_driver";
    case Rule::confidential: return "confidential";
    case Rule::glibc: return "glibc";
    case Rule::cudnn_conflict: return "cudnn_conflict";
    case Rule::platform_framework: return "platform_framework";
    case Rule::framework_pin: return "framework_pin";
    case Rule::pin_without_wheel: return "pin_without_wheel";
  }
  return "unknown";
}

Result<std::vector<GpuTarget>> gpu_targets(const Catalog& catalog, const std::vector<std::string>& models,
                                           const std::vector<int>& archs, const std::string& where) {
  std::vector<GpuTarget> out;
  for (const auto& name : models) {
    const GpuModel* m = catalog.gpu(name);
    if (!m) {
      std::vector<std::string> names;
      for (const auto& g : catalog.gpus) names.push_back(g.name);
      std::string hint = "known models: " + join(names, ", ") + "; or give gpu.archs (sm_90) for other GPUs";
      if (auto guess = did_you_mean(name, names)) hint = "did you mean '" + *guess + "'? " + hint;
      return make_error(ErrorKind::spec, "spec.unknown_gpu", "unknown GPU model '" + name + "'", where, hint);
    }
    out.push_back(GpuTarget{m->name, m->sm, m});
  }
  for (int sm : archs) out.push_back(GpuTarget{arch_name(sm), sm, nullptr});
  return out;
}

std::vector<Platform> image_platforms(const Spec& spec, const std::vector<GpuTarget>& gpus, const Platform& native, std::string& origin) {
  if (!spec.platforms.empty()) {
    origin = "spec";
    return spec.platforms;
  }
  std::vector<Platform> out;
  bool other = gpus.empty();
  for (const auto& g : gpus) {
    const auto host = g.model != nullptr ? platform_of_debian_arch(g.model->host_arch) : std::nullopt;
    if (!host) other = true;
    else if (std::find(out.begin(), out.end(), *host) == out.end()) out.push_back(*host);
  }
  origin = out.empty() ? "host" : "gpu";
  if (other && std::find(out.begin(), out.end(), native) == out.end()) out.push_back(native);
  std::sort(out.begin(), out.end());
  return out;
}

Result<Resolution> resolve(const Catalog& catalog, const ResolveRequest& request) {
  const Spec& spec = *request.spec;
  const Distro* distro = catalog.distro(spec.base_distro, spec.base_release);
  if (!distro) {
    std::vector<std::string> known;
    for (const auto& d : catalog.distros) known.push_back(d.name + ":" + d.release);
    return make_error(ErrorKind::spec, "spec.unknown_base", "base '" + spec.base() + "' is not in the catalog", spec.where("base"),
                      "use one of " + join(known, ", "));
  }
  // A minor series' facts apply to its patch releases unless the catalog records a difference: a request
  // for a patch release the catalog lacks (tensorflow 2.16.2 next to a recorded 2.16.1) gets the facts of the
  // nearest recorded release of its series, and says so. The lock then finds whether the index serves it.
  std::optional<Catalog> widened;
  std::vector<std::string> notes;
  for (const auto& req : spec.frameworks) {
    auto it = catalog.frameworks.find(req.name);
    if (it == catalog.frameworks.end()) continue;
    const auto& releases = it->second;
    if (std::any_of(releases.begin(), releases.end(), [&](const FrameworkRelease& r) { return req.version.matches(r.version); })) continue;
    // Each release of a framework that pins torch pins its own (sglang 0.5.21 and 0.5.22 pin different ones): no
    // neighbour's facts are taken for a release the catalog lacks.
    if (std::any_of(releases.begin(), releases.end(), [](const FrameworkRelease& r) { return r.torch.has_value(); })) continue;
    const auto want = req.version.lower_bound();
    if (!want || want->parts().size() < 3 || !req.version.matches(*want)) continue;
    const FrameworkRelease* near = nullptr;
    for (const auto& r : releases) {
      if (compare_prefix(r.version, *want, 2) != 0) continue;
      if (!near || (r.version < *want && (near->version > *want || near->version < r.version))) near = &r;
    }
    if (!near) continue;
    if (!widened) widened = catalog;
    auto& list = widened->frameworks[req.name];
    FrameworkRelease copy = *near;
    copy.version = *want;
    // Which wheels the index serves for aarch64 changes from one patch release to the next (jax 0.4.38 has no
    // aarch64 plugin where 0.4.34 and 0.5.0 have one): not taken from the neighbour.
    copy.aarch64_cuda.reset();
    for (auto& v : copy.variants) v.aarch64_sm.clear(), v.aarch64_ptx.clear();
    list.push_back(std::move(copy));
    std::sort(list.begin(), list.end(), [](const FrameworkRelease& a, const FrameworkRelease& b) { return a.version < b.version; });
    notes.push_back(req.name + " " + want->str() + " is not in the catalog; the facts recorded for " + req.name + " " + near->version.str() +
                    " (the same " + want->truncated(2).str() + " series) were applied to it");
  }
  // The platforms first: the solver's rules depend on them (rule 9), and image_platforms alone decides them.
  std::string platform_origin;
  std::vector<Platform> platforms = image_platforms(spec, request.gpus, request.host_platform.value_or(native_platform()), platform_origin);
  Solver solver(widened ? *widened : catalog, request, *distro, platforms);
  Resolution out = solver.run();
  out.platforms = std::move(platforms);
  out.platform_origin = std::move(platform_origin);
  if (out.ok) out.notes.insert(out.notes.end(), notes.begin(), notes.end());
  return out;
}

namespace {

/// A row of a framework that pins torch: the torch it pins, that torch's cuDNN, and the Python both support.
void apply_pinned_torch(const Catalog& catalog, const FrameworkRelease& rel, const FrameworkVariant& v, MatrixRow& r) {
  r.pins_without_wheel = rel.pins_without_wheel;
  if (!rel.torch) return;
  r.torch = rel.torch;
  const auto it = catalog.frameworks.find("torch");
  if (it == catalog.frameworks.end()) return;
  for (const auto& t : it->second) {
    const FrameworkVariant* tv = t.version == *rel.torch ? t.variant(v.name) : nullptr;
    if (!tv) continue;
    r.cudnn = tv->cudnn;
    r.python_min = std::max(r.python_min, t.python_min);
    r.python_max = std::min(r.python_max, t.python_max);
  }
}

}  // namespace

Result<std::vector<MatrixRow>> matrix(const Catalog& catalog, std::string_view framework) {
  std::vector<MatrixRow> rows;
  const bool all = framework.empty();
  if (!all && framework != "cuda" && !catalog.frameworks.count(std::string(framework))) {
    return make_error(ErrorKind::usage, "cli.unknown_framework", "unknown framework '" + std::string(framework) + "'", {},
                      "use torch, tensorflow, jax, vllm, sglang or cuda");
  }
  if (all || framework == "cuda") {
    for (const auto& t : catalog.toolkits) {
      MatrixRow r;
      r.framework = "cuda";
      r.version = t.version;
      r.cuda = t.version;
      r.driver_native = t.driver_min;
      const CudaMajor* m = catalog.major(static_cast<int>(t.version.major()));
      r.driver_min = m ? m->minor_compat_driver_min : t.driver_min;
      r.sm = t.sm;
      rows.push_back(std::move(r));
    }
  }
  for (const auto& [name, releases] : catalog.frameworks) {
    if (!all && name != framework) continue;
    for (const auto& rel : releases) {
      for (const auto& v : rel.variants) {
        const auto tks = catalog.toolkits_of(v.cuda);
        if (tks.empty()) continue;  // not valid: no such CUDA toolkit
        MatrixRow r;
        r.framework = name;
        r.version = rel.version;
        r.variant = v.name;
        r.cuda = v.cuda;
        r.cudnn = v.cudnn;
        r.python_min = rel.python_min;
        r.python_max = rel.python_max;
        r.is_default = v.name == rel.default_variant;
        r.sm = v.sm;
        r.ptx = v.ptx;
        apply_pinned_torch(catalog, rel, v, r);
        for (const auto* t : tks) r.driver_native = std::max(r.driver_native, t->driver_min);
        const CudaMajor* m = catalog.major(static_cast<int>(v.cuda.major()));
        r.driver_min = m ? m->minor_compat_driver_min : r.driver_native;
        if (v.cudnn) {
          const CudnnFacts f = catalog.cudnn_facts(*v.cudnn, static_cast<int>(v.cuda.major()));
          if (f.driver_min) r.driver_min = std::max(r.driver_min, *f.driver_min);
        }
        if (v.driver_min) r.driver_min = std::max(r.driver_min, *v.driver_min);
        rows.push_back(std::move(r));
      }
    }
  }
  return rows;
}

}  // namespace gpuenv::resolver
