#include "app/compare.hpp"

#include "app/catalog.hpp"
#include "base/file_io.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

namespace gpuenv::app {
namespace {

// The throughput figures compared, in order, with the median metric each check reports.
struct Source {
  const char* key;
  const char* check;
  const char* metric;
};
constexpr Source k_sources[] = {
    {"gemm_tflops.bf16", "gemm_tflops", "bf16.median_tflops"}, {"gemm_tflops.fp16", "gemm_tflops", "fp16.median_tflops"},
    {"gemm_tflops.tf32", "gemm_tflops", "tf32.median_tflops"}, {"gemm_tflops.fp64", "gemm_tflops", "fp64.median_tflops"},
    {"hbm_bandwidth", "hbm_bandwidth", "median_gbs"},          {"h2d_bandwidth", "h2d_bandwidth", "median_gbs"},
    {"d2h_bandwidth", "d2h_bandwidth", "median_gbs"},          {"nccl_allreduce", "nccl_allreduce", "median_gbs"},
};

Error compare_usage(const std::string& what, const std::string& hint) { return make_error(ErrorKind::usage, "compare.usage", what, "", hint); }

std::string text(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

Result<Machine> read_machine(const std::string& path, const resolver::Catalog& catalog) {
  GPUENV_TRY(bytes, read_file_limited(path, 32u << 20));
  const auto j = nlohmann::json::parse(bytes, nullptr, false);
  auto bad = [&](const std::string& what) {
    return make_error(ErrorKind::spec, "compare.bad_report", what, path, "give reports written by gpuenv validate --json (gpuenv-validation-v1)");
  };
  if (j.is_discarded() || !j.is_object() || text(j, "schema") != "gpuenv-validation-v1") return bad("not a gpuenv-validation-v1 report");
  const auto gpus = j.find("gpus");
  const auto checks = j.find("checks");
  if (gpus == j.end() || !gpus->is_array() || checks == j.end() || !checks->is_array()) return bad("the report has no gpus or checks list");
  Machine m;
  m.name = std::filesystem::path(path).stem().string();
  m.gpu_count = static_cast<int>(gpus->size());
  std::set<std::string> models;
  for (const auto& g : *gpus)
    if (g.is_object()) models.insert(text(g, "name"));
  for (const auto& name : models) m.gpu += (m.gpu.empty() ? "" : " + ") + name;
  // The names a spec uses for them: the one mapping verify uses (resolver::gpu_products), read the other way.
  std::set<std::string> spec_names;
  for (const auto& name : models)
    if (const auto* model = resolver::gpu_products(catalog, name).model) spec_names.insert(model->name);
  if (spec_names.size() == models.size())
    for (const auto& name : spec_names) m.model += (m.model.empty() ? "" : " + ") + name;
  if (const auto d = j.find("driver"); d != j.end() && d->is_object()) m.driver = text(*d, "version");
  m.backend = text(j, "backend");
  m.level = text(j, "level");
  m.verdict = text(j, "status");
  for (const Source& s : k_sources) {
    for (const auto& c : *checks) {
      if (!c.is_object() || text(c, "key") != s.check) continue;
      const auto results = c.find("results");
      if (results == c.end() || !results->is_array()) continue;
      Figure f;
      bool any = false;
      for (const auto& r : *results) {
        const auto metrics = r.is_object() ? r.find("metrics") : r.end();
        if (!r.is_object() || metrics == r.end() || !metrics->is_array()) continue;
        for (const auto& x : *metrics) {
          if (!x.is_object() || text(x, "name") != s.metric) continue;
          const auto v = x.find("value");
          if (v == x.end() || !v->is_number() || !std::isfinite(v->get<double>())) continue;
          const double value = v->get<double>();
          f.per_gpu = any ? std::min(f.per_gpu, value) : value;
          f.total += value;
          f.unit = text(x, "unit");
          any = true;
        }
      }
      // The all-reduce is one figure for the whole machine: its bus bandwidth, not a sum.
      if (any && std::string(s.key) == "nccl_allreduce") f.total = f.per_gpu;
      if (any) m.figures[s.key] = f;
    }
  }
  return m;
}

}  // namespace

Result<Comparison> compare_reports(const CompareRequest& rq) {
  if (rq.reports.empty()) return compare_usage("give at least one report", "gpuenv report compare h100.json h200.json --price h100=98.32");
  GPUENV_TRY(loaded, load_catalog_from(""));
  Comparison out;
  std::set<std::string> names;
  for (const auto& path : rq.reports) {
    GPUENV_TRY(m, read_machine(path, loaded.catalog));
    if (!names.insert(m.name).second) return compare_usage("two reports are named " + m.name, "give each machine's report its own file name: it names the machine");
    out.machines.push_back(std::move(m));
  }
  for (const auto& price : rq.prices) {
    const auto eq = price.find('=');
    double usd = 0;
    std::size_t used = 0;
    const std::string name = eq == std::string::npos ? price : price.substr(0, eq);
    try {
      usd = std::stod(price.substr(eq == std::string::npos ? price.size() : eq + 1), &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (eq == std::string::npos || used == 0 || used != price.size() - eq - 1 || !(usd > 0) || !std::isfinite(usd))
      return compare_usage("--price '" + price + "' is not NAME=USD_PER_HOUR", "write --price h100x8=98.32 (NAME is a report's file name without .json)");
    auto it = std::find_if(out.machines.begin(), out.machines.end(), [&](const Machine& m) { return m.name == name; });
    if (it == out.machines.end()) return compare_usage("--price names " + name + ", which is no report's name", "NAME is a report's file name without .json");
    it->price = usd;
  }
  for (auto& m : out.machines)
    if (m.price)
      for (auto& [key, f] : m.figures) f.per_dollar_hour = f.total / *m.price;
  for (const Source& s : k_sources)
    if (std::any_of(out.machines.begin(), out.machines.end(), [&](const Machine& m) { return m.figures.count(s.key) > 0; })) out.keys.push_back(s.key);
  out.sort_key = std::find(out.keys.begin(), out.keys.end(), "gemm_tflops.bf16") != out.keys.end() ? "gemm_tflops.bf16" : (out.keys.empty() ? "" : out.keys.front());
  const bool priced = std::all_of(out.machines.begin(), out.machines.end(), [](const Machine& m) { return m.price.has_value(); });
  auto value = [&](const Machine& m) {
    const auto it = m.figures.find(out.sort_key);
    if (it == m.figures.end()) return -1.0;
    return priced ? it->second.per_dollar_hour.value_or(-1) : it->second.total;
  };
  std::stable_sort(out.machines.begin(), out.machines.end(), [&](const Machine& a, const Machine& b) { return value(a) > value(b); });
  return out;
}

}  // namespace gpuenv::app
