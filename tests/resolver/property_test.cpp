// Property test: an independent checker confirms that every resolution of many random specs satisfies every
// rule, written again here from docs/resolver.md rather than by calling the solver's own helpers.
#include <gtest/gtest.h>

#include <random>

#include "fakes/catalog_fixture.hpp"

namespace {

using namespace gpuenv::resolver;

bool runs_natively(int built, int gpu) { return built / 10 == gpu / 10 && built % 10 <= gpu % 10; }

bool covers(const std::vector<int>& sass, int gpu) {
  for (int s : sass)
    if (runs_natively(s, gpu)) return true;
  return false;
}

struct Checker {
  const Catalog& c;
  const Spec& spec;
  const std::vector<GpuTarget>& gpus;
  std::optional<Version> driver;

  // Returns the first broken rule, or "".
  std::string check(const Resolution& r) const {
    if (!spec.wants_cuda()) {
      // No framework, cuda or cudnn (issue 32): no CUDA is chosen, and the floor is only what the GPUs need.
      if (r.cuda || r.cudnn || !r.frameworks.empty() || r.forward_compat || r.compat_package) return "CUDA that was not asked for";
      Version hard;
      for (const auto& g : gpus) {
        if (g.model && g.model->driver_min) hard = std::max(hard, *g.model->driver_min);
        if (spec.gpu.confidential == Confidential::required) {
          if (!g.model || !g.model->confidential) return "confidential";
          if (g.model->confidential_driver_min) hard = std::max(hard, *g.model->confidential_driver_min);
        }
      }
      if (hard != r.driver_min) return "driver_min " + r.driver_min.str() + " != " + hard.str() + " without CUDA";
      if (driver && *driver < hard) return "driver below a GPU or CC floor";
      return "";
    }
    if (!r.cuda) return "no cuda";
    const CudaToolkit* tk = nullptr;
    for (const auto& t : c.toolkits)
      if (t.version == *r.cuda) tk = &t;
    if (!tk) return "cuda not in catalog";
    if (spec.cuda_given && !spec.cuda.matches(*r.cuda)) return "cuda constraint";
    if (spec.cudnn_given && (!r.cudnn || !spec.cudnn.matches(*r.cudnn))) return "cudnn constraint";
    const Distro* d = c.distro(spec.base_distro, spec.base_release);
    if (r.python) {
      bool in_base = false;
      for (const auto& p : d->python) in_base = in_base || p == *r.python;
      if (!in_base) return "python not from base";
      if (spec.python_given && !spec.python.matches(*r.python)) return "python constraint";
    }
    Version floor = c.major(static_cast<int>(r.cuda->major()))->minor_compat_driver_min;
    const bool arm64 = std::find(r.platforms.begin(), r.platforms.end(), Platform::arm64()) != r.platforms.end();
    Version hard;  // parts forward compatibility cannot lift
    // The spec's frameworks, and the torch a framework pins (vLLM, SGLang) when the spec names none.
    const auto pinned = std::count_if(r.frameworks.begin(), r.frameworks.end(), [](const ChosenFramework& f) { return !f.pinned_by.empty(); });
    if (r.frameworks.size() != spec.frameworks.size() + static_cast<std::size_t>(pinned)) return "framework count";
    for (const auto& f : r.frameworks) {
      const auto req = std::find_if(spec.frameworks.begin(), spec.frameworks.end(), [&](const FrameworkRequest& q) { return q.name == f.name; });
      if (req == spec.frameworks.end() ? f.pinned_by.empty() : !req->version.matches(f.version)) return "framework constraint";
      const FrameworkRelease* rel = nullptr;
      for (const auto& x : c.frameworks.at(f.name))
        if (x.version == f.version) rel = &x;
      if (!rel) return "framework release unknown";
      const FrameworkVariant* v = rel->variant(f.variant);
      if (!v) return "variant unknown";
      if (!rel->pins_without_wheel.empty()) return "a release that pins a package without a wheel";
      if (rel->torch) {
        const auto torch = std::find_if(r.frameworks.begin(), r.frameworks.end(), [](const ChosenFramework& t) { return t.name == "torch"; });
        if (torch == r.frameworks.end() || torch->version != *rel->torch || torch->variant != f.variant) return "torch is not the one " + f.name + " pins";
      }
      if (f.name == "jax" ? !(r.cuda->major() == v->cuda.major() && *r.cuda >= v->cuda) : !r.cuda->has_prefix(v->cuda.truncated(2)))
        return "toolkit does not match the variant";
      if (!r.python) return "python missing";
      if (r.python->truncated(2) < rel->python_min.truncated(2) || r.python->truncated(2) > rel->python_max.truncated(2))
        return "python outside framework range";
      if (v->driver_min) floor = std::max(floor, *v->driver_min);
      // Rule 9: a linux/arm64 image gets the index's aarch64 wheel, which must be a CUDA build of the variant (torch's
      // other variants come from its own wheel index, which the catalog does not describe).
      const bool from_index = f.name != "torch" || f.is_default;
      const bool aarch64_build = arm64 && from_index && rel->aarch64_cuda;
      if (aarch64_build && std::find(rel->aarch64_cuda->begin(), rel->aarch64_cuda->end(), f.variant) == rel->aarch64_cuda->end())
        return "linux/arm64 image with no CUDA build of " + f.name + " " + f.version.str() + " for aarch64";
      for (const auto& g : gpus) {
        for (const auto* lists : {&v->sm, &v->aarch64_sm}) {
          const auto& sm = *lists;
          const auto& ptx_list = lists == &v->sm ? v->ptx : v->aarch64_ptx;
          if (lists == &v->aarch64_sm && !aarch64_build) continue;
          if (sm.empty() && ptx_list.empty()) continue;
          if (covers(sm, g.sm)) continue;
          int ptx = 0;
          for (int p : ptx_list)
            if (p <= g.sm) ptx = std::max(ptx, p);
          if (!ptx) return std::string(lists == &v->sm ? "variant" : "the variant's aarch64 build") + " cannot run on " + g.name;
          for (const auto& t : c.toolkits)
            if (t.version.has_prefix(v->cuda.truncated(2))) floor = std::max(floor, t.driver_min);
        }
      }
    }
    for (const auto& g : gpus) {
      if (!covers(tk->sm, g.sm)) return "toolkit does not cover " + g.name;
      if (g.model && g.model->driver_min) hard = std::max(hard, *g.model->driver_min);
      if (spec.gpu.confidential == Confidential::required) {
        if (!g.model || !g.model->confidential) return "confidential";
        if (g.model->confidential_driver_min) hard = std::max(hard, *g.model->confidential_driver_min);
      }
    }
    if (r.cudnn) {
      const CudnnFacts f = c.cudnn_facts(*r.cudnn, static_cast<int>(r.cuda->major()));
      if (f.driver_min) floor = std::max(floor, *f.driver_min);
      if (f.sm)
        for (const auto& g : gpus)
          if (!covers(*f.sm, g.sm)) return "cudnn does not cover " + g.name;
    }
    if (std::max(floor, hard) != r.driver_min) return "driver_min " + r.driver_min.str() + " != " + std::max(floor, hard).str();
    if (driver) {
      if (*driver < hard) return "driver below a GPU or CC floor";
      if (*driver < floor) {
        if (!r.forward_compat || !r.compat_package) return "driver below floor without forward compatibility";
        for (const auto& g : gpus)
          if (!g.model || !g.model->datacenter) return "forward compatibility on a non-data-center GPU";
        bool listed = false;
        for (const auto& p : c.compat)
          if (p.cuda == *r.compat_package)
            for (const auto& b : p.driver_branches) listed = listed || b == std::to_string(driver->major());
        if (!listed) return "compat package does not list the driver branch";
        if (*r.compat_package < r.cuda->truncated(2)) return "compat package older than the toolkit";
      } else if (r.forward_compat) {
        return "forward compatibility claimed on a driver that meets the floor";
      }
    }
    return "";
  }
};

void run_property(const Catalog& c, unsigned seed, int rounds) {
  std::mt19937 rng(seed);
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  const std::vector<std::string> drivers = {"450.80.02", "470.199.02", "515.105.01", "525.60.13", "535.104.05", "535.183.01",
                                            "550.54.15", "550.90.07", "560.35.03", "570.86.16", "575.57.08", "580.65.06",
                                            "590.44.01", "610.43.02"};
  const std::vector<std::string> cuda_constraints = {"", "11.8", "12.*", ">=12.4,<13", "12.1", "13", "12.6 || 12.8"};
  const std::vector<std::string> python_constraints = {"", "3.10", "3.11", ">=3.12"};
  int ok = 0, unsat = 0;
  for (int round = 0; round < rounds; ++round) {
    std::string yaml = "name: p\n";
    const auto& d = c.distros[pick(c.distros.size())];
    yaml += "base: " + d.name + ":" + d.release + "\n";
    if (const auto& cc = cuda_constraints[pick(cuda_constraints.size())]; !cc.empty()) yaml += "cuda: '" + cc + "'\n";
    if (const auto& pc = python_constraints[pick(python_constraints.size())]; !pc.empty()) yaml += "python: '" + pc + "'\n";
    std::vector<std::string> fws;
    for (const auto& [name, releases] : c.frameworks)
      if (pick(3) == 0) fws.push_back(name + ": " + (pick(2) ? "latest" : "'" + releases[pick(releases.size())].version.truncated(2).str() + "'"));
    if (!fws.empty()) {
      yaml += "frameworks:\n";
      for (const auto& f : fws) yaml += "  " + f + "\n";
    }
    std::vector<std::string> models;
    const std::size_t n = pick(3);
    for (std::size_t i = 0; i < n; ++i) models.push_back(c.gpus[pick(c.gpus.size())].name);
    yaml += "gpu:\n  confidential: " + std::string(pick(5) == 0 ? "required" : "off") + "\n";
    if (!models.empty()) {
      yaml += "  models: [";
      for (std::size_t i = 0; i < models.size(); ++i) yaml += (i ? ", \"" : "\"") + models[i] + "\"";
      yaml += "]\n";
    }
    const bool has_driver = pick(4) != 0;
    if (has_driver) yaml += "  driver: '" + drivers[pick(drivers.size())] + "'\n";
    auto spec = parse_spec(yaml, "p.yaml");
    ASSERT_TRUE(spec.ok()) << yaml << spec.error().to_string();
    ResolveRequest req;
    req.spec = &*spec;
    req.gpus = *gpu_targets(c, spec->gpu.models, {}, "p");
    req.driver = spec->gpu.driver;
    auto r = resolve(c, req);
    ASSERT_TRUE(r.ok()) << yaml;
    if (!r->ok) {
      ++unsat;
      EXPECT_FALSE(r->conflicts.empty()) << yaml;
      continue;
    }
    ++ok;
    Checker checker{c, *spec, req.gpus, spec->gpu.driver ? spec->gpu.driver->lower_bound() : std::nullopt};
    const std::string broken = checker.check(*r);
    EXPECT_EQ(broken, "") << yaml;
  }
  // Both outcomes must occur, or the generator is not exercising the rules.
  EXPECT_GT(ok, rounds / 20);
  EXPECT_GT(unsat, rounds / 20);
}

TEST(ResolverProperty, EveryResolutionOfTheArm64CatalogSatisfiesEveryRule) { run_property(gpuenv::testing::arm64_catalog(), 11, 300); }
TEST(ResolverProperty, EveryResolutionOfTheRealCatalogSatisfiesEveryRule) { run_property(gpuenv::testing::catalog(), 20261130, 600); }

TEST(ResolverProperty, EveryResolutionOfTheMiniCatalogSatisfiesEveryRule) { run_property(gpuenv::testing::mini_catalog(), 7, 400); }

}  // namespace
