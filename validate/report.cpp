#include "validate/report.hpp"

#include <algorithm>
#include <cstdio>
#include <map>

namespace gpuenv::validate {
namespace {

constexpr const char* k_replacement = "\xEF\xBF\xBD";  // U+FFFD

// Length of the valid UTF-8 sequence starting at s[i], or 0 when the bytes there are not one (stray continuation,
// overlong form, surrogate, beyond U+10FFFF, truncated).
std::size_t utf8_sequence_length(const std::string& s, std::size_t i) {
  auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  return n;
}

// Valid UTF-8 with each bad byte replaced by U+FFFD: messages come from drivers and libraries, and both JSON and XML
// consumers reject invalid text.
std::string valid_utf8(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_sequence_length(s, i);
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

// One line for a terminal: valid UTF-8, and no control characters that could move the cursor or recolour it.
std::string terminal_safe(const std::string& raw) {
  std::string out = valid_utf8(raw);
  for (char& ch : out) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7F) ch = ' ';
  }
  return out;
}

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

nlohmann::ordered_json outcome_json(const GpuOutcome& o) {
  nlohmann::ordered_json j;
  j["gpu"] = o.gpu < 0 ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(o.gpu);
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
  int pass = 0, warn = 0, fail = 0, skip = 0;
  void add(CheckStatus s) {
    switch (s) {
      case CheckStatus::pass: ++pass; break;
      case CheckStatus::warn: ++warn; break;
      case CheckStatus::fail: ++fail; break;
      case CheckStatus::skip: ++skip; break;
    }
  }
};

Counts count_checks(const Report& r) {
  Counts c;
  for (const auto& check : r.checks) c.add(check.status);
  return c;
}

std::string gpu_label(int gpu) { return gpu < 0 ? std::string("-") : std::to_string(gpu); }

}  // namespace

CheckStatus aggregate_outcomes(const std::vector<GpuOutcome>& results) {
  CheckStatus s = CheckStatus::skip;
  for (const auto& o : results) s = worse(s, o.status);
  return s;
}

CheckStatus overall_status(const std::vector<CheckReport>& checks) {
  CheckStatus s = CheckStatus::skip;
  for (const auto& c : checks) s = worse(s, c.status);
  return s;
}

int exit_code(const Report& report) {
  if (report.could_not_run) return k_exit_environment;
  const CheckStatus s = overall_status(report.checks);
  if (s == CheckStatus::fail) return k_exit_validation_failed;
  if (s == CheckStatus::skip) return k_exit_environment;  // nothing ran: nothing was validated
  return k_exit_ok;
}

nlohmann::ordered_json report_json(const Report& report) {
  nlohmann::ordered_json j;
  j["schema"] = report.schema;
  j["status"] = to_string(report.status);
  j["backend"] = valid_utf8(report.backend);
  j["level"] = to_string(report.level);
  j["started_at"] = valid_utf8(report.started_at);
  j["duration_ms"] = report.duration_ms;
  j["exit_code"] = exit_code(report);
  j["could_not_run"] = report.could_not_run;
  j["could_not_run_reason"] = string_or_null(report.could_not_run_reason);
  auto notes = nlohmann::ordered_json::array();
  for (const auto& n : report.notes) notes.push_back(valid_utf8(n));
  j["notes"] = std::move(notes);
  j["driver"] = driver_json(report.driver);
  auto gpus = nlohmann::ordered_json::array();
  for (const auto& g : report.gpus) gpus.push_back(gpu_json(g));
  j["gpus"] = std::move(gpus);
  const Counts c = count_checks(report);
  j["summary"] = {{"pass", c.pass}, {"warn", c.warn}, {"fail", c.fail}, {"skip", c.skip}};
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
  property("status", to_string(report.status));
  property("driver", report.driver.loaded ? report.driver.version : std::string("not loaded"));
  if (report.could_not_run) property("could_not_run", report.could_not_run_reason);
  x += "    </properties>\n";
  for (const auto& check : report.checks) {
    // The check's time is shared evenly by its testcases so the suite's total stays right.
    const std::int64_t per_case_ms =
        check.results.empty() ? 0 : check.duration_ms / static_cast<std::int64_t>(check.results.size());
    for (const auto& o : check.results) {
      const std::string name = o.gpu < 0 ? check.key : check.key + "[gpu" + std::to_string(o.gpu) + "]";
      x += "    <testcase classname=\"gpuenv.validate." + xml_escape(check.category, true) + "\" name=\"" +
           xml_escape(name, true) + "\" time=\"" + seconds_text(per_case_ms, 3) + "\"";
      switch (o.status) {
        case CheckStatus::pass:
          x += "/>\n";
          break;
        case CheckStatus::warn:
          x += ">\n      <system-out>WARN";
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

std::string report_text(const Report& report, bool colour) {
  auto paint = [&](const std::string& text, const char* code) {
    return colour ? std::string("\033[") + code + "m" + text + "\033[0m" : text;
  };
  auto status_code = [](CheckStatus s) {
    switch (s) {
      case CheckStatus::pass: return "32";
      case CheckStatus::warn: return "33";
      case CheckStatus::fail: return "1;31";
      case CheckStatus::skip: return "2";
    }
    return "0";
  };

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
  }
  if (report.could_not_run)
    out += paint("could not run: " + terminal_safe(report.could_not_run_reason), "1;31") + "\n";
  for (const auto& n : report.notes) out += "note: " + terminal_safe(n) + "\n";
  out += "\n";

  std::size_t key_width = 5;  // "CHECK"
  for (const auto& c : report.checks) key_width = std::max(key_width, c.key.size());
  auto pad = [](std::string s, std::size_t width) {
    if (s.size() < width) s.append(width - s.size(), ' ');
    return s;
  };
  out += pad("STATUS", 7) + pad("CHECK", key_width + 2) + pad("GPU", 5) + "MESSAGE\n";
  const std::string indent(7 + key_width + 2 + 5, ' ');
  for (const auto& check : report.checks) {
    for (const auto& o : check.results) {
      const std::string word = upper(to_string(o.status));
      out += paint(word, status_code(o.status)) + std::string(7 - word.size(), ' ');
      out += pad(terminal_safe(check.key), key_width + 2) + pad(gpu_label(o.gpu), 5) + terminal_safe(o.message);
      out += "\n";
      if (o.status != CheckStatus::pass && (!o.code.empty() || !o.hint.empty())) {
        out += indent;
        if (!o.code.empty()) out += "[" + terminal_safe(o.code) + "] ";
        out += terminal_safe(o.hint) + "\n";
      }
    }
  }

  const Counts c = count_checks(report);
  out += "\nresult: " + paint(upper(to_string(report.status)), status_code(report.status)) + " (" +
         std::to_string(c.pass) + " passed, " + std::to_string(c.warn) + " warned, " + std::to_string(c.fail) +
         " failed, " + std::to_string(c.skip) + " skipped) in " + seconds_text(report.duration_ms, 1) + " s";
  if (backend == "replay") out += ", from recorded answers";
  out += "\n";
  return out;
}

}  // namespace gpuenv::validate
