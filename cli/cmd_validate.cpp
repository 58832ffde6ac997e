// gpuenv validate, gpuenv checks, gpuenv preflight: one app:: call each (app/validate), and the report rendered.
// The judgement is validate/'s.
#include <iomanip>
#include <nlohmann/json.hpp>
#include <ostream>

#include "app/validate.hpp"
#include "cli/commands.hpp"
#include "validate/check.hpp"
#include "validate/report.hpp"

namespace gpuenv::cli {

int cmd_validate(const ValidateOptions& o, Context& ctx) {
  auto done = app::validate({o.level, o.gpus, o.lock, o.image, o.checks, o.junit, o.backend, o.thresholds, o.mig}, ctx);
  if (!done) return report_error(done.error(), o.json, ctx);
  ctx.exit_now = done->hung;  // an abandoned check thread may still be inside the driver: main() exits at once
  if (o.json) *ctx.out << validate::report_json(done->report).dump(2) << "\n";
  else *ctx.out << validate::report_text(done->report, ctx.stdout_is_tty);
  return validate::exit_code(done->report);
}

int cmd_preflight(const PreflightOptions& o, Context& ctx) {
  auto done = app::preflight({o.status_file, o.backend, o.lock}, ctx);
  if (!done) return report_error(done.error(), o.json, ctx);
  ctx.exit_now = done->hung;
  if (o.json) *ctx.out << done->status.dump(2) << "\n";
  else *ctx.out << validate::report_text(done->report, ctx.stdout_is_tty) << "wrote " << o.status_file << "\n";
  return done->exit_code;
}

int cmd_checks(const ChecksOptions& o, Context& ctx) {
  const auto checks = validate::all_checks();
  const validate::Level levels[] = {validate::Level::quick, validate::Level::standard, validate::Level::long_};
  if (o.json) {
    auto list = nlohmann::ordered_json::array();
    for (const auto& c : checks) {
      nlohmann::ordered_json j = {{"key", c->key()}, {"category", c->category()}, {"description", c->description()}, {"uses_gpu", c->uses_gpu()}};
      auto at = nlohmann::ordered_json::array();
      auto deadlines = nlohmann::ordered_json::object();
      for (auto l : levels) {
        if (!c->runs_at(l)) continue;
        at.push_back(validate::to_string(l));
        deadlines[validate::to_string(l)] = c->deadline(l, 1).count();
      }
      j["levels"] = at;
      j["deadline_ms_one_gpu"] = deadlines;
      list.push_back(j);
    }
    *ctx.out << nlohmann::ordered_json{{"schema", "gpuenv-checks-v1"}, {"checks", list}}.dump(2) << "\n";
    return k_exit_ok;
  }
  std::size_t width = 0;
  for (const auto& c : checks) width = std::max(width, c->key().size());
  for (const auto& c : checks) {
    std::string at;
    for (auto l : levels)
      if (c->runs_at(l)) at += std::string(at.empty() ? "" : ",") + validate::to_string(l);
    *ctx.out << std::left << std::setw(static_cast<int>(width) + 2) << c->key() << std::setw(12) << c->category() << std::setw(23) << at << c->description() << "\n";
  }
  return k_exit_ok;
}

}  // namespace gpuenv::cli
