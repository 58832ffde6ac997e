// In-process costs: loading the embedded catalog, resolving each example spec, enumerating the matrix.
// Run with bench/run.sh (which also times whole `gpuenv resolve` processes with hyperfine).
#include <benchmark/benchmark.h>

#include <fstream>
#include <sstream>

#include "app/catalog.hpp"
#include "resolver/solver.hpp"

namespace {

using namespace gpuenv;

const app::LoadedCatalog& loaded() {
  static const app::LoadedCatalog c = *app::load_catalog_from("");
  return c;
}

resolver::Spec example(const std::string& name) {
  std::ifstream in(std::string(GPUENV_SOURCE_DIR) + "/recipes/examples/" + name);
  std::stringstream s;
  s << in.rdbuf();
  return *resolver::parse_spec(s.str(), name);
}

void BM_LoadEmbeddedCatalog(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(app::load_catalog_from(""));
}
BENCHMARK(BM_LoadEmbeddedCatalog)->Unit(benchmark::kMillisecond);

void BM_Resolve(benchmark::State& state, const std::string& name) {
  const auto& c = loaded().catalog;
  const resolver::Spec spec = example(name);
  resolver::ResolveRequest req;
  req.spec = &spec;
  req.gpus = *resolver::gpu_targets(c, spec.gpu.models, spec.gpu.archs, name);
  req.driver = spec.gpu.driver;
  for (auto _ : state) benchmark::DoNotOptimize(resolver::resolve(c, req));
}
BENCHMARK_CAPTURE(BM_Resolve, torch_h100, std::string("torch-h100.yaml"))->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Resolve, tensorflow_a100, std::string("tensorflow-a100.yaml"))->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Resolve, jax_h200, std::string("jax-h200.yaml"))->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Resolve, cuda_l4, std::string("cuda-l4.yaml"))->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Resolve, confidential_h100, std::string("confidential-h100.yaml"))->Unit(benchmark::kMicrosecond);

void BM_ParseSpec(benchmark::State& state) {
  std::ifstream in(std::string(GPUENV_SOURCE_DIR) + "/recipes/examples/torch-h100.yaml");
  std::stringstream s;
  s << in.rdbuf();
  const std::string text = s.str();
  for (auto _ : state) benchmark::DoNotOptimize(resolver::parse_spec(text, "torch-h100.yaml"));
}
BENCHMARK(BM_ParseSpec)->Unit(benchmark::kMicrosecond);

void BM_MatrixAll(benchmark::State& state) {
  const auto& c = loaded().catalog;
  for (auto _ : state) benchmark::DoNotOptimize(resolver::matrix(c, ""));
}
BENCHMARK(BM_MatrixAll)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
