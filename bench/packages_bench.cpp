// apt index costs on a real Packages file: xz decompression, parsing and indexing, and the dependency closure
// of python3 with the required set. The file comes from bench/packages.sh (GPUENV_PACKAGES_XZ).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fstream>

#include "packages/apt/closure.hpp"
#include "packages/apt/package_index.hpp"
#include "base/archive/decompress.hpp"

namespace {

using namespace gpuenv;
using namespace gpuenv::packages;

const std::string& compressed() {
  static const std::string bytes = [] {
    const char* p = std::getenv("GPUENV_PACKAGES_XZ");
    std::ifstream in(p ? p : "", std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  return bytes;
}

void BM_DecompressParseIndex(benchmark::State& state) {
  if (compressed().empty()) {
    state.SkipWithError("set GPUENV_PACKAGES_XZ (bench/packages.sh does)");
    return;
  }
  std::size_t packages = 0;
  for (auto _ : state) {
    auto text = decompress(compressed(), "Packages.xz");
    PackageIndex index;
    auto st = index.add(std::move(*text), RepositoryRef{"http://mirror.example/debian/", "bookworm", "main", "Packages.xz"}, {"amd64", "all"});
    if (!st) state.SkipWithError(st.error().to_string().c_str());
    packages = index.size();
  }
  state.counters["packages"] = static_cast<double>(packages);
}
BENCHMARK(BM_DecompressParseIndex)->Unit(benchmark::kMillisecond);

void BM_DecompressOnly(benchmark::State& state) {
  if (compressed().empty()) return state.SkipWithError("set GPUENV_PACKAGES_XZ");
  for (auto _ : state) benchmark::DoNotOptimize(decompress(compressed(), "Packages.xz"));
}
BENCHMARK(BM_DecompressOnly)->Unit(benchmark::kMillisecond);

void BM_ClosurePython3WithRequiredSet(benchmark::State& state) {
  if (compressed().empty()) return state.SkipWithError("set GPUENV_PACKAGES_XZ");
  PackageIndex index;
  (void)index.add(*decompress(compressed(), "Packages.xz"), RepositoryRef{"http://mirror.example/debian/", "bookworm", "main", "x"}, {"amd64", "all"});
  std::size_t n = 0;
  for (auto _ : state) {
    auto r = dependency_closure(index, ClosureRequest{{"python3"}, true, "amd64"});
    if (!r) return state.SkipWithError(r.error().to_string().c_str());
    n = r->packages.size();
  }
  state.counters["packages"] = static_cast<double>(n);
}
BENCHMARK(BM_ClosurePython3WithRequiredSet)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
