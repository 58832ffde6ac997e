#include "validate/report.hpp"

#include "base/safe_text.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>

namespace gpuenv::validate {
namespace {

constexpr const char* k_replacement = "\xEF\xBF\xBD";  // U+FFFD

// Valid UTF-8 with each bad byte replaced by U+FFFD: messages come from drivers and libraries, and both JSON and XML
// consumers reject invalid text.
std::string valid_utf8(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_sequence(s, i);
    if (n == 0) {
      out += k_replacement;
      ++i;
    } else {
      out.append(s, i, n);
      i += n;
    }
  }
  return out;
}

// Escapes for XML text (`attribute` = false) or a double-quoted attribute value. Control characters XML 1.0 forbids
// become U+FFFD; in attributes, tab and newlines are written as references so parsers keep them.
std::string xml_escape(const std::string& raw, bool attribute) {
  const std::string s = valid_utf8(raw);
  std::string out;
  out.reserve(s.size() + 16);
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      case '\t': out += attribute ? "&#9;" : "\t"; break;
      case '\n': out += attribute ? "&#10;" : "\n"; break;
      case '\r': out += "&#13;"; break;
      default:
        if (c < 0x20 || c == 0x7F) out += k_replacement;
        else out += ch;
    }
  }
  return out;
}

// One line for a terminal: what drivers, libraries and an image's probe said, made safe (base/safe_text.hpp).
std::string terminal_safe(const std::string& raw) { return safe_text(raw, 2000); }

std::string hex_device_id(std::uint32_t id) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%04x", id);
  return buf;
}

std::string cuda_version_text(int v) {
  if (v <= 0) return "unknown";
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

std::string seconds_text(std::int64_t ms, int decimals) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, static_cast<double>(ms) / 1000.0);
  return buf;
}

std::string upper(const char* s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(c - ('a' <= c && c <= 'z' ? 'a' - 'A' : 0));
  return out;
}

nlohmann::ordered_json string_or_null(const std::string& s) {
  return s.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(valid_utf8(s));
}

nlohmann::ordered_json driver_json(const DriverState& d) {
  nlohmann::ordered_json j;
  j["loaded"] = d.loaded;
  j["version"] = string_or_null(d.version);
  j["cuda_driver_version"] = d.cuda_driver_version;
  j["nouveau_loaded"] = d.nouveau_loaded;
  j["nvswitch_present"] = d.nvswitch_present;
  j["fabric_manager_running"] =
      d.fabric_manager_running ? nlohmann::ordered_json(*d.fabric_manager_running) : nlohmann::ordered_json(nullptr);
  auto missing = nlohmann::ordered_json::array();
  for (const auto& m : d.device_nodes_missing) missing.push_back(valid_utf8(m));
  j["device_nodes_missing"] = std::move(missing);
  j["cc_state"] = valid_utf8(d.cc_state);
  return j;
}

nlohmann::ordered_json gpu_json(const GpuInfo& g) {
  nlohmann::ordered_json j;
  j["index"] = g.index;
  j["name"] = valid_utf8(g.name);
  j["uuid"] = valid_utf8(g.uuid);
  j["pci_bus_id"] = valid_utf8(g.pci_bus_id);
  j["pci_device_id"] = hex_device_id(g.pci_device_id);
  j["compute_capability"] = std::to_string(g.cc_major) + "." + std::to_string(g.cc_minor);
  j["memory_total_bytes"] = g.memory_total_bytes;
  j["numa_node"] = g.numa_node;
  j["nvlink_links_active"] = g.nvlink_links_active;
  return j;
}

nlohmann::ordered_json mig_json(const MigDevice& d) {
  nlohmann::ordered_json j;
  j["uuid"] = valid_utf8(d.uuid);
  j["gpu"] = d.parent;
  j["gpu_instance_id"] = d.gpu_instance_id;
  j["compute_instance_id"] = d.compute_instance_id;
  j["profile"] = valid_utf8(d.profile);
  j["memory_bytes"] = d.memory_bytes;
  j["sm_count"] = d.sm_count;
  return j;
}

nlohmann::ordered_json outcome_json(const GpuOutcome& o) {
  nlohmann::ordered_json j;
  j["gpu"] = o.gpu < 0 ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(o.gpu);
  if (o.mig) j["mig"] = mig_json(*o.mig);
  j["status"] = to_string(o.status);
  j["message"] = valid_utf8(o.message);
  j["code"] = string_or_null(o.code);
  j["hint"] = string_or_null(o.hint);
  auto metrics = nlohmann::ordered_json::array();
  for (const auto& m : o.metrics)  // NaN and infinities dump as null
    metrics.push_back({{"name", valid_utf8(m.name)}, {"value", m.value}, {"unit", valid_utf8(m.unit)}});
  j["metrics"] = std::move(metrics);
  return j;
}

struct Counts {
  int pass = 0, warn = 0, fail = 0, skip = 0, measured = 0;
  void add(CheckStatus s) {
    switch (s) {
      case CheckStatus::pass: ++pass; break;
      case CheckStatus::warn: ++warn; break;
      case CheckStatus::fail: ++fail; break;
      case CheckStatus::skip: ++skip; break;
      case CheckStatus::measured: ++measured; break;
    }
  }
};

Counts count_checks(const Report& r) {
  Counts c;
  for (const auto& check : r.checks) c.add(check.status);
  return c;
}

// "-" for the host, "0" for a GPU, "0/GI 7" for a MIG device (with ".CI" when its CI is not 0).
std::string gpu_label(const GpuOutcome& o) {
  if (o.gpu < 0) return "-";
  std::string out = std::to_string(o.gpu);
  if (o.mig) {
    out += "/GI " + std::to_string(o.mig->gpu_instance_id);
    if (o.mig->compute_instance_id != 0) out += "." + std::to_string(o.mig->compute_instance_id);
  }
  return out;
}

// Whether the report lists several units (GPUs, or MIG devices): the grouped layout then.
bool several_units(const Report& report) { return report.gpus.size() >= 2 || report.mig_devices.size() >= 2; }

}  // namespace

CheckStatus aggregate_outcomes(const std::vector<GpuOutcome>& results) {
  CheckStatus s = CheckStatus::skip;
  for (const auto& o : results) s = worse(s, o.status);
  return s;
}

CheckStatus overall_status(const std::vector<CheckReport>& checks) {
  // Unlike worse(), a measured figure beside judged passes leaves the run a PASS: nothing judged failed, and the
  // summary counts what was only measured.
  auto rank = [](CheckStatus s) {
    switch (s) {
      case CheckStatus::skip: return 0;
      case CheckStatus::measured: return 1;
      case CheckStatus::pass: return 2;
      case CheckStatus::warn: return 3;
      case CheckStatus::fail: return 4;
    }
    return 0;
  };
  CheckStatus s = CheckStatus::skip;
  for (const auto& c : checks)
    if (rank(c.status) > rank(s)) s = c.status;
  return s;
}

std::string report_status_text(const Report& report) {
  return report.could_not_run ? std::string("could_not_run") : std::string(to_string(report.status));
}

int exit_code(const Report& report) {
  if (report.could_not_run) return k_exit_environment;
  const CheckStatus s = overall_status(report.checks);
  if (s == CheckStatus::fail) return k_exit_validation_failed;
  if (s == CheckStatus::skip) return k_exit_environment;  // nothing ran: nothing was validated
  return k_exit_ok;
}

std::string report_bytes(const Report& report) { return report_json(report).dump(2) + "\n"; }

nlohmann::ordered_json report_json(const Report& report) {
  nlohmann::ordered_json j;
  j["schema"] = report.schema;
  j["status"] = report_status_text(report);
  j["backend"] = valid_utf8(report.backend);
  j["level"] = to_string(report.level);
  j["started_at"] = valid_utf8(report.started_at);
  j["duration_ms"] = report.duration_ms;
  j["exit_code"] = exit_code(report);
  j["could_not_run"] = report.could_not_run;
  j["could_not_run_reason"] = string_or_null(report.could_not_run_reason);
  j["could_not_run_hint"] = string_or_null(report.could_not_run_hint);
  auto notes = nlohmann::ordered_json::array();
  for (const auto& n : report.notes) notes.push_back(valid_utf8(n));
  j["notes"] = std::move(notes);
  j["driver"] = driver_json(report.driver);
  auto gpus = nlohmann::ordered_json::array();
  for (const auto& g : report.gpus) gpus.push_back(gpu_json(g));
  j["gpus"] = std::move(gpus);
  if (!report.mig_devices.empty()) {
    auto mig = nlohmann::ordered_json::array();
    for (const auto& d : report.mig_devices) mig.push_back(mig_json(d));
    j["mig_devices"] = std::move(mig);
  }
  j["image"] = report.image.empty() ? nlohmann::ordered_json(nullptr)
                                    : nlohmann::ordered_json{{"ref", valid_utf8(report.image)}, {"digest", string_or_null(report.image_digest)}};
  j["lock"] = report.lock_sha256.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json{{"sha256", report.lock_sha256}};
  const Counts c = count_checks(report);
  j["summary"] = {{"pass", c.pass}, {"measured", c.measured}, {"warn", c.warn}, {"fail", c.fail}, {"skip", c.skip}};
  auto checks = nlohmann::ordered_json::array();
  for (const auto& check : report.checks) {
    nlohmann::ordered_json cj;
    cj["key"] = valid_utf8(check.key);
    cj["category"] = valid_utf8(check.category);
    cj["description"] = valid_utf8(check.description);
    cj["status"] = to_string(check.status);
    cj["duration_ms"] = check.duration_ms;
    auto results = nlohmann::ordered_json::array();
    for (const auto& o : check.results) results.push_back(outcome_json(o));
    cj["results"] = std::move(results);
    checks.push_back(std::move(cj));
  }
  j["checks"] = std::move(checks);
  return j;
}

std::string report_junit(const Report& report) {
  int tests = 0, failures = 0, skipped = 0;
  for (const auto& check : report.checks) {
    for (const auto& o : check.results) {
      ++tests;
      if (o.status == CheckStatus::fail) ++failures;
      if (o.status == CheckStatus::skip) ++skipped;
    }
  }
  const std::string time = seconds_text(report.duration_ms, 3);
  std::string x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x += "<testsuites name=\"gpuenv\" tests=\"" + std::to_string(tests) + "\" failures=\"" + std::to_string(failures) +
       "\" errors=\"0\" skipped=\"" + std::to_string(skipped) + "\" time=\"" + time + "\">\n";
  x += "  <testsuite name=\"gpuenv-validate\" tests=\"" + std::to_string(tests) + "\" failures=\"" +
       std::to_string(failures) + "\" errors=\"0\" skipped=\"" + std::to_string(skipped) + "\" time=\"" + time + "\"";
  if (!report.started_at.empty()) x += " timestamp=\"" + xml_escape(report.started_at, true) + "\"";
  x += ">\n";
  x += "    <properties>\n";
  auto property = [&](const std::string& name, const std::string& value) {
    x += "      <property name=\"" + xml_escape(name, true) + "\" value=\"" + xml_escape(value, true) + "\"/>\n";
  };
  property("backend", report.backend);
  property("level", to_string(report.level));
  property("status", report_status_text(report));
  property("driver", report.driver.loaded ? report.driver.version : std::string("not loaded"));
  if (report.could_not_run) property("could_not_run", report.could_not_run_reason);
  x += "    </properties>\n";
  for (const auto& check : report.checks) {
    // The check's time is shared evenly by its testcases so the suite's total stays right.
    const std::int64_t per_case_ms =
        check.results.empty() ? 0 : check.duration_ms / static_cast<std::int64_t>(check.results.size());
    for (const auto& o : check.results) {
      std::string name = o.gpu < 0 ? check.key : check.key + "[gpu" + std::to_string(o.gpu);
      if (o.mig) name += "/mig-gi" + std::to_string(o.mig->gpu_instance_id) + "-ci" + std::to_string(o.mig->compute_instance_id);
      if (o.gpu >= 0) name += "]";
      x += "    <testcase classname=\"gpuenv.validate." + xml_escape(check.category, true) + "\" name=\"" +
           xml_escape(name, true) + "\" time=\"" + seconds_text(per_case_ms, 3) + "\"";
      switch (o.status) {
        case CheckStatus::pass:
          x += "/>\n";
          break;
        case CheckStatus::warn:
        case CheckStatus::measured:
          x += std::string(">\n      <system-out>") + (o.status == CheckStatus::warn ? "WARN" : "MEASURED");
          if (!o.code.empty()) x += " " + xml_escape(o.code, false);
          x += ": " + xml_escape(o.message, false);
          if (!o.hint.empty()) x += "\nhint: " + xml_escape(o.hint, false);
          x += "</system-out>\n    </testcase>\n";
          break;
        case CheckStatus::fail:
          x += ">\n      <failure message=\"" + xml_escape(o.message, true) + "\" type=\"" +
               xml_escape(o.code.empty() ? std::string("fail") : o.code, true) + "\">";
          x += "code: " + xml_escape(o.code.empty() ? std::string("(none)") : o.code, false);
          if (!o.hint.empty()) x += "\nhint: " + xml_escape(o.hint, false);
          x += "</failure>\n    </testcase>\n";
          break;
        case CheckStatus::skip:
          x += ">\n      <skipped message=\"" + xml_escape(o.message, true) + "\"/>\n    </testcase>\n";
          break;
      }
    }
  }
  x += "  </testsuite>\n</testsuites>\n";
  return x;
}

namespace {

const char* status_colour(CheckStatus s) {
  switch (s) {
    case CheckStatus::pass: return "32";
    case CheckStatus::warn: return "33";
    case CheckStatus::fail: return "1;31";
    case CheckStatus::skip: return "2";
    case CheckStatus::measured: return "36";
  }
  return "0";
}

std::string pad(std::string s, std::size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

// Paints text with an ANSI colour, or leaves it plain.
struct Painter {
  bool colour = false;
  [[nodiscard]] std::string operator()(const std::string& text, const char* code) const {
    return colour ? std::string("\033[") + code + "m" + text + "\033[0m" : text;
  }
};

// The skip every GPU check gets when the run could not run (runner.cpp): listed once, not per check.
bool skipped_for_could_not_run(const Report& report, const CheckReport& check) {
  if (!report.could_not_run || check.status != CheckStatus::skip || check.results.empty()) return false;
  for (const auto& o : check.results)
    if (o.message != "could not run: " + report.could_not_run_reason) return false;
  return true;
}

std::string header_text(const Report& report, const Painter& paint) {
  std::string out = "gpuenv validate, level " + std::string(to_string(report.level)) + ", ";
  const std::string backend = terminal_safe(report.backend);
  // A replayed run must never pass for a real one, in colour or not.
  if (backend == "replay") out += paint("backend: replay (recorded answers, not a real GPU)", "1;33");
  else out += "backend: " + (backend.empty() ? std::string("unknown") : backend);
  if (!report.started_at.empty()) out += ", started " + terminal_safe(report.started_at);
  out += "\n";
  if (report.driver.loaded) {
    out += "driver: " + terminal_safe(report.driver.version) + " (CUDA " +
           cuda_version_text(report.driver.cuda_driver_version) + ")\n";
  } else {
    out += "driver: not loaded\n";
  }
  for (const auto& g : report.gpus) {
    char mem[32];
    std::snprintf(mem, sizeof mem, "%.1f GiB", static_cast<double>(g.memory_total_bytes) / (1024.0 * 1024 * 1024));
    out += "GPU " + std::to_string(g.index) + ": " + terminal_safe(g.name) + " (" + hex_device_id(g.pci_device_id) +
           ", " + terminal_safe(g.pci_bus_id) + ", " + mem + ")\n";
    for (const auto& d : report.mig_devices) {
      if (d.parent != g.index) continue;
      std::snprintf(mem, sizeof mem, "%.2f GiB", static_cast<double>(d.memory_bytes) / (1024.0 * 1024 * 1024));
      out += "  " + terminal_safe(mig_label(d)) + ": " + terminal_safe(d.uuid) + " (" + std::to_string(d.sm_count) +
             " SMs, " + mem + ")\n";
    }
  }
  if (report.could_not_run) {
    out += paint("could not run: " + terminal_safe(report.could_not_run_reason), "1;31") + "\n";
    if (!report.could_not_run_hint.empty()) out += "hint: " + terminal_safe(report.could_not_run_hint) + "\n";
  }
  for (const auto& n : report.notes) out += "note: " + terminal_safe(n) + "\n";
  return out + "\n";
}

// "[code] hint" for an outcome that is not a pass, or empty.
std::string hint_text(const GpuOutcome& o) {
  if (o.status == CheckStatus::pass || (o.code.empty() && o.hint.empty())) return {};
  std::string out;
  if (!o.code.empty()) out += "[" + terminal_safe(o.code) + "] ";
  return out + terminal_safe(o.hint);
}

// One GPU's report: one row per check and GPU, the hint under rows that are not a pass.
std::string single_gpu_rows(const Report& report, const Painter& paint) {
  std::size_t key_width = 5;  // "CHECK"
  for (const auto& c : report.checks) key_width = std::max(key_width, c.key.size());
  constexpr std::size_t k_status_width = 9;  // "MEASURED "
  std::size_t gpu_width = 5;  // "GPU" and a MIG device's "0/GI 13.1"
  for (const auto& c : report.checks)
    for (const auto& o : c.results) gpu_width = std::max(gpu_width, gpu_label(o).size() + 2);
  std::string out = pad("STATUS", k_status_width) + pad("CHECK", key_width + 2) + pad("GPU", gpu_width) + "MESSAGE\n";
  const std::string indent(k_status_width + key_width + 2 + gpu_width, ' ');
  for (const auto& check : report.checks) {
    if (skipped_for_could_not_run(report, check)) continue;
    for (const auto& o : check.results) {
      const std::string word = upper(to_string(o.status));
      out += paint(word, status_colour(o.status)) + std::string(k_status_width - word.size(), ' ');
      out += pad(terminal_safe(check.key), key_width + 2) + pad(gpu_label(o), gpu_width) + terminal_safe(o.message) + "\n";
      if (const std::string hint = hint_text(o); !hint.empty()) out += indent + hint + "\n";
    }
  }
  return out;
}

}  // namespace

std::string gpu_ranges(std::vector<int> gpus) {
  std::sort(gpus.begin(), gpus.end());
  gpus.erase(std::unique(gpus.begin(), gpus.end()), gpus.end());
  std::string out;
  for (std::size_t i = 0; i < gpus.size();) {
    std::size_t j = i;
    while (j + 1 < gpus.size() && gpus[j + 1] == gpus[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(gpus[i]);
    if (j > i) out += "-" + std::to_string(gpus[j]);
    i = j + 1;
  }
  return out;
}

namespace {

// The units of some outcomes for a status column or a detail line: GPU ranges ("0-6"), and each GPU's MIG devices
// by GPU instance ("0[GI 7-13]", "0[GI 1.0,1.1]" where a GPU instance holds several compute instances); empty for
// host-wide outcomes alone.
std::string unit_ranges(const std::vector<const GpuOutcome*>& outcomes) {
  std::vector<int> whole;
  std::map<int, std::vector<const MigDevice*>> instances;
  for (const GpuOutcome* o : outcomes) {
    if (o->gpu < 0) continue;
    if (o->mig) instances[o->gpu].push_back(&*o->mig);
    else whole.push_back(o->gpu);
  }
  std::string out = gpu_ranges(whole);
  for (const auto& [gpu, devices] : instances) {
    const bool one_ci = std::all_of(devices.begin(), devices.end(), [](const MigDevice* d) { return d->compute_instance_id == 0; });
    std::string ids;
    if (one_ci) {
      std::vector<int> gis;
      for (const MigDevice* d : devices) gis.push_back(d->gpu_instance_id);
      ids = gpu_ranges(gis);
    } else {
      for (const MigDevice* d : devices)
        ids += (ids.empty() ? "" : ",") + std::to_string(d->gpu_instance_id) + "." + std::to_string(d->compute_instance_id);
    }
    out += (out.empty() ? "" : ",") + std::to_string(gpu) + "[GI " + ids + "]";
  }
  return out;
}

// The statuses in the order a status column lists them.
constexpr CheckStatus k_column_order[] = {CheckStatus::pass, CheckStatus::measured, CheckStatus::warn,
                                          CheckStatus::fail, CheckStatus::skip};

// "PASS 0-6, FAIL 7" (plain, for widths) and its painted form; a host-wide outcome has no GPU list.
std::pair<std::string, std::string> status_column(const CheckReport& check, const Painter& paint) {
  std::string plain, painted;
  for (CheckStatus s : k_column_order) {
    std::vector<const GpuOutcome*> units;
    bool host = false;
    for (const auto& o : check.results) {
      if (o.status != s) continue;
      if (o.gpu < 0) host = true;
      else units.push_back(&o);
    }
    if (!host && units.empty()) continue;
    const std::string word = upper(to_string(s));
    const std::string list = units.empty() ? std::string() : " " + unit_ranges(units);
    plain += (plain.empty() ? "" : ", ") + word + list;
    painted += (painted.empty() ? "" : ", ") + paint(word, status_colour(s)) + list;
  }
  return {plain, painted};
}

// An outcome's message with its own "GPU 3 (NVIDIA H100 ...)" at the start written as "the GPU", so that outcomes
// that say the same thing of different GPUs read the same and are listed once.
std::string shared_message(const GpuOutcome& o) {
  if (o.mig) {
    const std::string label = unit_label(o);
    return o.message.rfind(label, 0) == 0 ? "the instance" + o.message.substr(label.size()) : o.message;
  }
  const std::string own = "GPU " + std::to_string(o.gpu) + " (";
  if (o.gpu < 0 || o.message.rfind(own, 0) != 0) return o.message;
  int depth = 0;
  for (std::size_t i = own.size() - 1; i < o.message.size(); ++i) {
    if (o.message[i] == '(') ++depth;
    if (o.message[i] == ')' && --depth == 0) return "the GPU" + o.message.substr(i + 1);
  }
  return o.message;
}

// The row's message: the one every passing outcome shares (the others get detail lines), else a pointer to the
// figures table for throughput checks, else the first passing outcome's message with its GPU. With no pass: the
// message all outcomes share, else a pointer to the detail lines.
std::string row_message(const CheckReport& check) {
  std::vector<const GpuOutcome*> passing;
  for (const auto& o : check.results)
    if (o.status == CheckStatus::pass) passing.push_back(&o);
  const bool none_pass = passing.empty();
  if (none_pass)
    for (const auto& o : check.results) passing.push_back(&o);
  bool same = true;
  for (const GpuOutcome* o : passing) same = same && shared_message(*o) == shared_message(*passing.front());
  if (same) return terminal_safe(passing.size() > 1 ? shared_message(*passing.front()) : passing.front()->message);
  if (none_pass) return "per GPU below";
  if (check.category == "throughput") return "figures per GPU in the table below";
  const GpuOutcome& first = *passing.front();
  return (first.gpu < 0 ? std::string() : terminal_safe(unit_label(first)) + ": ") + terminal_safe(first.message);
}

// Detail lines under a several-GPU row: the outcomes that are not a pass, those with the same status, message
// and hint as one line ("GPU 0-7: ..."), each with its hint below.
std::string detail_lines(const CheckReport& check, const std::string& indent, const Painter& paint) {
  struct Group {
    const GpuOutcome* first;
    std::vector<const GpuOutcome*> gpus;
  };
  std::vector<Group> groups;
  for (const auto& o : check.results) {
    if (o.status == CheckStatus::pass) continue;
    auto same = [&](const Group& g) {
      return g.first->status == o.status && shared_message(*g.first) == shared_message(o) &&
             g.first->code == o.code && g.first->hint == o.hint;
    };
    auto it = std::find_if(groups.begin(), groups.end(), same);
    if (it == groups.end()) groups.push_back({&o, {&o}});
    else it->gpus.push_back(&o);
  }
  // One group holding every outcome has the row's message already: only its hint is added. Each distinct hint is
  // written once, after the lines it belongs to.
  std::string out;
  std::vector<std::string> hints;
  for (const auto& g : groups) {
    const bool host = g.gpus.size() == 1 && g.gpus.front()->gpu < 0;
    if (!(groups.size() == 1 && g.gpus.size() == check.results.size())) {
      out += indent + paint(upper(to_string(g.first->status)), status_colour(g.first->status)) +
             (host ? std::string() : " GPU " + unit_ranges(g.gpus)) + ": " +
             terminal_safe(g.gpus.size() > 1 ? shared_message(*g.first) : g.first->message) + "\n";
    }
    const std::string hint = hint_text(*g.first);
    if (!hint.empty() && std::find(hints.begin(), hints.end(), hint) == hints.end()) hints.push_back(hint);
  }
  for (const auto& hint : hints) out += indent + "  " + hint + "\n";
  return out;
}

// Several GPUs: one row per check with the GPUs per status, details only for what is not a pass.
std::string grouped_rows(const Report& report, const Painter& paint) {
  std::size_t key_width = 5, status_width = 6;  // "CHECK", "STATUS"
  for (const auto& c : report.checks) {
    if (skipped_for_could_not_run(report, c)) continue;
    key_width = std::max(key_width, c.key.size());
    status_width = std::max(status_width, status_column(c, Painter{}).first.size());
  }
  std::string out = pad("STATUS", status_width + 2) + pad("CHECK", key_width + 2) + "MESSAGE\n";
  const std::string indent(status_width + 2, ' ');
  for (const auto& check : report.checks) {
    if (skipped_for_could_not_run(report, check) || check.results.empty()) continue;
    const auto [plain, painted] = status_column(check, paint);
    out += painted + std::string(status_width + 2 - plain.size(), ' ') + pad(terminal_safe(check.key), key_width + 2) +
           row_message(check) + "\n";
    out += detail_lines(check, indent, paint);
  }
  return out;
}


// One column of the figures table: a metric of one check's outcomes per GPU.
struct FigureColumn {
  std::string check;      // "hbm_bandwidth"
  std::string prefix;     // metric prefix: "bf16.", or "" ; "to_gpu" takes the minimum over the peers
  std::string suffix;     // "gbs", "tflops"
  std::string label;      // "HBM GB/s"
};

std::string figure_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v >= 1 || v <= 0 ? "%.1f" : "%.3g", v);
  return buf;
}

// A row of the figures table: a GPU, or one MIG device of it.
struct FigureRow {
  int gpu = 0;
  const MigDevice* mig = nullptr;
  std::string label;  // "0", "0/GI 7"
  std::string links;  // the GPU's active NVLink links; "-" for an instance
};

const GpuOutcome* outcome_of(const Report& report, const std::string& key, const FigureRow& row) {
  for (const auto& c : report.checks) {
    if (c.key != key) continue;
    for (const auto& o : c.results) {
      if (o.gpu != row.gpu) continue;
      if (row.mig == nullptr ? !o.mig : (o.mig && o.mig->uuid == row.mig->uuid)) return &o;
    }
  }
  return nullptr;
}

// The rows: each GPU, and under a GPU with MIG devices one row per device.
std::vector<FigureRow> figure_rows(const Report& report) {
  std::vector<FigureRow> rows;
  for (const auto& g : report.gpus) {
    rows.push_back({g.index, nullptr, std::to_string(g.index), std::to_string(g.nvlink_links_active)});
    for (const auto& d : report.mig_devices) {
      if (d.parent != g.index) continue;
      GpuOutcome o;
      o.gpu = d.parent;
      o.mig = d;
      rows.push_back({g.index, &d, gpu_label(o), "-"});
    }
  }
  return rows;
}

// The figure of `column` for `row` ("709.4", "55.3*" when no reference judged it), or "-" when not measured.
std::string figure_cell(const Report& report, const FigureColumn& column, const FigureRow& row) {
  const GpuOutcome* o = outcome_of(report, column.check, row);
  if (o == nullptr) return "-";
  const bool peers = column.prefix == "to_gpu";
  std::optional<double> value;
  bool judged = true;
  for (const auto& m : o->metrics) {
    const std::string median = "median_" + column.suffix;
    if (m.name.size() < median.size() || m.name.compare(m.name.size() - median.size(), median.size(), median) != 0)
      continue;
    const std::string prefix = m.name.substr(0, m.name.size() - median.size());
    if (peers ? prefix.rfind("to_gpu", 0) != 0 : prefix != column.prefix) continue;
    value = value ? std::min(*value, m.value) : m.value;
    bool has_reference = false;
    for (const auto& r : o->metrics) has_reference = has_reference || r.name == prefix + "reference_" + column.suffix;
    judged = judged && has_reference;
  }
  if (!value) return "-";
  return figure_text(*value) + (judged ? "" : "*");
}

// Several GPUs: the measured throughput figures, one row per GPU; columns only for what was measured.
std::string figures_table(const Report& report) {
  std::vector<FigureColumn> columns = {{"h2d_bandwidth", "", "gbs", "H2D GB/s"},
                                       {"d2h_bandwidth", "", "gbs", "D2H GB/s"},
                                       {"hbm_bandwidth", "", "gbs", "HBM GB/s"}};
  for (const char* dtype : {"bf16", "fp16", "tf32", "fp64"})
    columns.push_back({"gemm_tflops", std::string(dtype) + ".", "tflops", std::string(dtype) + " TFLOPS"});
  columns.push_back({"p2p_bandwidth", "to_gpu", "gbs", "P2P min GB/s"});
  const std::vector<FigureRow> rows = figure_rows(report);
  std::vector<std::vector<std::string>> cells;  // [column][row]
  std::vector<FigureColumn> shown;
  bool any_unjudged = false;
  for (const auto& column : columns) {
    std::vector<std::string> values;
    bool any = false;
    for (const auto& row : rows) {
      values.push_back(figure_cell(report, column, row));
      any = any || values.back() != "-";
      any_unjudged = any_unjudged || values.back().back() == '*';
    }
    if (!any) continue;
    shown.push_back(column);
    cells.push_back(std::move(values));
  }
  if (shown.empty()) return {};
  std::string out = std::string("\nfigures per GPU (medians") + (any_unjudged ? "; * measured, not judged" : "") + "):\n";
  std::size_t label_width = 5;
  for (const auto& row : rows) label_width = std::max(label_width, row.label.size() + 2);
  out += pad("GPU", label_width);
  for (const auto& c : shown) out += pad(c.label, c.label.size() + 2);
  out += "NVLink links\n";
  for (std::size_t r = 0; r < rows.size(); ++r) {
    out += pad(rows[r].label, label_width);
    for (std::size_t c = 0; c < shown.size(); ++c) out += pad(cells[c][r], shown[c].label.size() + 2);
    out += rows[r].links + "\n";
  }
  return out;
}

}  // namespace

std::string report_text(const Report& report, bool colour) {
  const Painter paint{colour};
  std::string out = header_text(report, paint);
  out += several_units(report) ? grouped_rows(report, paint) : single_gpu_rows(report, paint);
  int not_run = 0;
  for (const auto& check : report.checks) not_run += skipped_for_could_not_run(report, check) ? 1 : 0;
  if (not_run > 0) {
    out += paint("SKIP", status_colour(CheckStatus::skip)) + " " + std::to_string(not_run) +
           " GPU checks: could not run (" + terminal_safe(report.could_not_run_reason) + ")\n";
  }
  if (several_units(report)) out += figures_table(report);

  const Counts c = count_checks(report);
  const std::string word = report.could_not_run ? std::string("COULD NOT RUN") : upper(to_string(report.status));
  out += "\nresult: " + paint(word, report.could_not_run ? "1;31" : status_colour(report.status)) + " (" +
         std::to_string(c.pass) + " passed, " + (c.measured > 0 ? std::to_string(c.measured) + " measured, " : "") +
         std::to_string(c.warn) + " warned, " + std::to_string(c.fail) + " failed, " + std::to_string(c.skip) +
         " skipped) in " + seconds_text(report.duration_ms, 1) + " s";
  if (terminal_safe(report.backend) == "replay") out += ", from recorded answers";
  out += "\n";
  return out;
}

}  // namespace gpuenv::validate
