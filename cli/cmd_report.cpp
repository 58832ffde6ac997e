// gpuenv report compare: validation reports of several machines side by side and per dollar-hour (app/compare,
// docs/fleet.md), as a table or gpuenv-compare-v1 JSON.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <ostream>

#include "app/compare.hpp"
#include "base/safe_text.hpp"
#include "cli/commands.hpp"

namespace gpuenv::cli {
namespace {

struct CompareOptions {
  app::CompareRequest rq;
  bool json = false;
};

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string pad(const std::string& s, std::size_t width) { return s.size() >= width ? s + " " : s + std::string(width - s.size(), ' '); }

int cmd_compare(const CompareOptions& o, Context& ctx) {
  auto c = app::compare_reports(o.rq);
  if (!c) return report_error(c.error(), o.json, ctx);
  if (o.json) {
    nlohmann::ordered_json machines = nlohmann::ordered_json::array();
    for (const auto& m : c->machines) {
      nlohmann::ordered_json figures = nlohmann::ordered_json::object();
      for (const auto& [key, f] : m.figures) {
        figures[key] = {{"unit", f.unit}, {"per_gpu", f.per_gpu}, {"total", f.total},
                        {"per_dollar_hour", f.per_dollar_hour ? nlohmann::ordered_json(*f.per_dollar_hour) : nlohmann::ordered_json(nullptr)}};
      }
      machines.push_back({{"name", m.name}, {"gpu", m.gpu}, {"model", m.model.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(m.model)},
                          {"gpu_count", m.gpu_count}, {"driver", m.driver}, {"backend", m.backend},
                          {"level", m.level}, {"verdict", m.verdict},
                          {"usd_per_hour", m.price ? nlohmann::ordered_json(*m.price) : nlohmann::ordered_json(nullptr)}, {"figures", std::move(figures)}});
    }
    *ctx.out << nlohmann::ordered_json{{"schema", "gpuenv-compare-v1"}, {"sort_key", c->sort_key}, {"machines", std::move(machines)}}.dump(2) << "\n";
    return k_exit_ok;
  }
  auto& out = *ctx.out;
  const std::size_t w = 18;
  out << pad("machine", 14) << pad("GPUs", 30) << pad("driver", 12) << pad("$/h", 8);
  for (const auto& k : c->keys) out << pad(safe_text(k, 40), w);
  out << "\n";
  for (const auto& m : c->machines) {
    // Each report's own text (its file names the machine; its fields the GPU and driver): made safe to print.
    out << pad(safe_text(m.name, 60), 14) << pad(std::to_string(m.gpu_count) + "x " + safe_text(m.gpu, 80), 30) << pad(safe_text(m.driver, 40), 12) << pad(m.price ? fixed(*m.price, 2) : "-", 8);
    for (const auto& k : c->keys) {
      const auto it = m.figures.find(k);
      out << pad(it == m.figures.end() ? "-" : fixed(it->second.total, 1) + " " + safe_text(it->second.unit, 20), w);
    }
    out << "\n";
  }
  bool priced = false;
  for (const auto& m : c->machines) priced = priced || m.price.has_value();
  if (priced) {
    out << "\nper dollar-hour (machine totals / price; TFLOPS or GB/s per USD/h):\n" << pad("machine", 14);
    for (const auto& k : c->keys) out << pad(safe_text(k, 40), w);
    out << "\n";
    for (const auto& m : c->machines) {
      out << pad(safe_text(m.name, 60), 14);
      for (const auto& k : c->keys) {
        const auto it = m.figures.find(k);
        out << pad(it == m.figures.end() || !it->second.per_dollar_hour ? "-" : fixed(*it->second.per_dollar_hour, 2), w);
      }
      out << "\n";
    }
  }
  out << "sorted by " << c->sort_key << (priced ? " per dollar-hour" : " (machine total)") << "; totals sum the GPUs' medians, the all-reduce is the machine's own\n";
  return k_exit_ok;
}

}  // namespace

Command add_report_command(CLI::App& app, const GlobalOptions& /*global*/) {
  auto* sub = app.add_subcommand("report", "Work with saved validation reports");
  sub->require_subcommand(1);
  auto o = std::make_shared<CompareOptions>();
  auto* compare = sub->add_subcommand("compare", "Validation reports of several machines side by side, and per dollar-hour with --price");
  compare->add_option("reports", o->rq.reports, "gpuenv-validation-v1 reports (validate --json); each file's name without .json names its machine")->required();
  compare->add_option("--price", o->rq.prices, "NAME=USD_PER_HOUR: a machine's price; repeatable")->allow_extra_args(false);
  compare->add_flag("--json", o->json, "Print a gpuenv-compare-v1 JSON document");
  return {sub, [o](Context& ctx) { return cmd_compare(*o, ctx); }};
}

}  // namespace gpuenv::cli
