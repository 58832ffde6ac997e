#include "validate/metrics.hpp"

#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <vector>

namespace gpuenv::validate {
namespace {

/// A label value escaped as the text format wants (backslash, double quote, newline).
std::string escaped(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

/// [a-zA-Z0-9_] only, as metric names allow.
std::string name_part(const std::string& v) {
  std::string out;
  for (char c : v) out += (std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(static_cast<unsigned char>(c))) : '_');
  return out;
}

std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

bool ends_with(const std::string& s, const std::string& tail) { return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0; }

struct Unit {
  const char* unit;
  const char* suffix;   ///< the base unit's name suffix
  double factor;        ///< to the base unit
  const char* strip;    ///< what the figure's own name ends with for that unit ("_gbs")
};
constexpr Unit k_units[] = {
    {"GB/s", "_bytes_per_second", 1e9, "_gbs"}, {"TFLOPS", "_flops_per_second", 1e12, "_tflops"}, {"C", "_celsius", 1, "_c"},
    {"W", "_watts", 1, "_w"}, {"ms", "_seconds", 1e-3, "_ms"}, {"s", "_seconds", 1, ""}, {"B", "_bytes", 1, ""}, {"ratio", "_ratio", 1, ""},
};

struct Series {
  std::string labels;  ///< {gpu="0",dtype="bf16"}
  double value = 0;
};
struct Family {
  std::string help;
  std::vector<Series> series;
};

}  // namespace

std::string report_metrics(const Report& report, std::int64_t started_at) {
  std::map<std::string, Family> families;
  const std::string run = "level=\"" + escaped(to_string(report.level)) + "\",backend=\"" + escaped(report.backend) + "\"";
  families["gpuenv_validation_timestamp_seconds"] = {"When the last validation started (seconds since the epoch).", {{"{" + run + "}", static_cast<double>(started_at)}}};
  families["gpuenv_validation_duration_seconds"] = {"How long the last validation took.", {{"{" + run + "}", static_cast<double>(report.duration_ms) / 1000.0}}};
  families["gpuenv_validation_exit_code"] = {"The last validation's exit code: 0 passed, 1 failed, 4 could not run.", {{"{" + run + "}", static_cast<double>(exit_code(report))}}};
  Family& status = families["gpuenv_check_status"];
  status.help = "Each check's outcome per GPU (gpu=\"host\" for a host-wide outcome) as a state set: 1 for its status.";
  for (const auto& check : report.checks) {
    for (const auto& r : check.results) {
      const std::string gpu = r.gpu < 0 ? "host" : std::to_string(r.gpu);
      for (const CheckStatus s : {CheckStatus::pass, CheckStatus::measured, CheckStatus::warn, CheckStatus::fail, CheckStatus::skip})
        status.series.push_back({"{check=\"" + escaped(check.key) + "\",gpu=\"" + gpu + "\",status=\"" + to_string(s) + "\"}", r.status == s ? 1.0 : 0.0});
      for (const auto& m : r.metrics) {
        // "bf16.median_tflops" -> dtype bf16; "to_gpu3.median_gbs" -> peer 3.
        std::string figure = m.name, extra;
        if (const auto dot = figure.find('.'); dot != std::string::npos) {
          const std::string prefix = figure.substr(0, dot);
          figure = figure.substr(dot + 1);
          extra = prefix.rfind("to_gpu", 0) == 0 ? ",peer=\"" + escaped(prefix.substr(6)) + "\"" : ",dtype=\"" + escaped(prefix) + "\"";
        }
        double value = m.value;
        std::string suffix;
        for (const Unit& u : k_units) {
          if (m.unit != u.unit) continue;
          if (*u.strip && ends_with(figure, u.strip)) figure.resize(figure.size() - std::string(u.strip).size());
          if (m.unit == "TFLOPS" && figure.rfind("tflops_", 0) == 0) figure = figure.substr(7);  // tflops_first -> first
          value *= u.factor;
          // A figure already named by its unit ("seconds", "bytes_tested", "tflops_ratio") keeps its name.
          const std::string word = std::string(u.suffix).substr(std::string(u.suffix).rfind('_') + 1);
          if (("_" + figure + "_").find("_" + word + "_") == std::string::npos) suffix = u.suffix;
          break;
        }
        // Every figure is a gauge (a reading of this run); `_total` belongs to counters.
        if (suffix.empty() && ends_with(figure, "_total")) figure.resize(figure.size() - 6);
        const std::string name = "gpuenv_" + name_part(check.key) + "_" + name_part(figure) + suffix;
        Family& f = families[name];
        if (f.help.empty()) f.help = "Figure " + m.name + " of check " + check.key + " (" + (m.unit.empty() ? std::string("no unit") : "measured in " + m.unit) + ").";
        f.series.push_back({"{gpu=\"" + gpu + "\"" + extra + "}", value});
      }
    }
  }
  std::string out;
  for (const auto& [name, f] : families) {
    std::set<std::string> seen;  // one sample per label set (a figure reported twice keeps its first)
    out += "# HELP " + name + " " + f.help + "\n# TYPE " + name + " gauge\n";
    for (const auto& s : f.series)
      if (seen.insert(s.labels).second) out += name + s.labels + " " + number(s.value) + "\n";
  }
  return out;
}

}  // namespace gpuenv::validate
