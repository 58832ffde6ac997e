#include "app/status.hpp"

#include "base/time.hpp"
#include "base/duration.hpp"
#include "base/file_io.hpp"
#include "base/safe_text.hpp"
#include "images/plan/image_config.hpp"
#include "marks/from_report.hpp"
#include "marks/statement.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>

namespace gpuenv::app {
namespace {

constexpr std::size_t k_max_status_bytes = 8u << 20;  // a report of 8 GPUs at long is about 100 KiB
constexpr std::int64_t k_max_preflight_ms = 7LL * 86400 * 1000;
constexpr std::int64_t k_clock_skew_s = 300;  // machines of one fleet agree on the time to within minutes

const nlohmann::json* member(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  const auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

std::string text(const nlohmann::json* j) { return j && j->is_string() ? j->get<std::string>() : std::string(); }

NodeStatus unusable(NodeStatus s, std::string state, std::string reason) {
  s.state = std::move(state);
  s.exit_code = k_exit_environment;
  s.reason = std::move(reason);
  return s;
}

}  // namespace

Result<NodeStatus> node_status(const StatusRequest& rq, const Services& services) {
  std::optional<std::int64_t> max_age;
  if (!rq.max_age.empty()) {
    if (const auto d = parse_duration(rq.max_age, "--max-age")) max_age = d->count();
    if (!max_age || *max_age <= 0)
      return make_error(ErrorKind::usage, "status.max_age", "--max-age '" + rq.max_age + "' is not a duration", "--max-age", "write 30m, 24h, 7d");
  }
  NodeStatus s;
  s.status_file = rq.status_file;
  auto bytes = read_file_limited(rq.status_file, k_max_status_bytes);
  if (!bytes) {
    const bool missing = bytes.error().id == "io.not_found";
    return unusable(std::move(s), missing ? "missing" : "unreadable",
                    (missing ? "no status file: the pre-flight has not run since boot (" : "the status file cannot be read (") + bytes.error().message + ")");
  }
  const auto j = nlohmann::json::parse(*bytes, nullptr, false);
  const nlohmann::json* code = member(j, "exit_code");
  const nlohmann::json* checks = member(j, "checks");
  if (j.is_discarded() || text(member(j, "schema")) != "gpuenv-validation-v1" || !code || !code->is_number_integer() || !checks || !checks->is_array())
    return unusable(std::move(s), "unreadable", "the status file is not a gpuenv pre-flight status (gpuenv-validation-v1 with exit_code)");
  // An exit code is 0 to 255: read whole, never cut to an int (1099511627776 once read as 0, healthy).
  const bool code_in_range = code->is_number_unsigned() ? code->get<std::uint64_t>() <= 255 : code->get<std::int64_t>() >= 0 && code->get<std::int64_t>() <= 255;
  if (!code_in_range) return unusable(std::move(s), "unreadable", "the status file's exit_code " + code->dump() + " is not an exit code (0 to 255)");
  s.verified_at = text(member(j, "started_at"));
  s.level = text(member(j, "level"));
  s.backend = text(member(j, "backend"));
  if (const nlohmann::json* driver = member(j, "driver")) {
    s.driver = text(member(*driver, "version"));
    s.cc_state = text(member(*driver, "cc_state"));
  }
  if (const nlohmann::json* gpus = member(j, "gpus"); gpus && gpus->is_array())
    for (const auto& g : *gpus) {
      const std::string name = text(member(g, "name"));
      if (!name.empty() && std::find(s.gpu_models.begin(), s.gpu_models.end(), name) == s.gpu_models.end()) s.gpu_models.push_back(name);
    }
  if (const auto started = parse_rfc3339_utc(s.verified_at)) {
    const nlohmann::json* duration = member(j, "duration_ms");
    // A pre-flight takes minutes; a duration that is negative or longer than a week is not one gpuenv wrote.
    std::int64_t ms = 0;
    if (duration && duration->is_number_integer()) {
      const bool in_range = duration->is_number_unsigned() ? duration->get<std::uint64_t>() <= k_max_preflight_ms
                                                           : duration->get<std::int64_t>() >= 0 && duration->get<std::int64_t>() <= k_max_preflight_ms;
      if (!in_range) return unusable(std::move(s), "unreadable", "the status file's duration_ms " + duration->dump() + " is not the length of a pre-flight (0 to 7 days)");
      ms = duration->get<std::int64_t>();
    }
    s.age_s = now_seconds(services) - (*started + ms / 1000);
  }
  // A verdict from the future is no fresher than one without a date: after a clock step at boot (or in a forged
  // file) it would otherwise stay fresh for decades. A few minutes of skew between machines are allowed.
  if (max_age && s.age_s && *s.age_s < -k_clock_skew_s)
    return unusable(std::move(s), "stale",
                    "the status file says the pre-flight finished " + std::to_string(-*s.age_s) + " s from now: the clock stepped, or the file is not this boot's; run the pre-flight again");
  if (max_age && (!s.age_s || *s.age_s > *max_age))
    return unusable(std::move(s), "stale",
                    s.age_s ? "the pre-flight finished " + std::to_string(*s.age_s) + " s ago, more than --max-age " + rq.max_age
                            : "the status file does not say when the pre-flight ran");
  for (const auto& c : *checks) {
    if (text(member(c, "status")) != "fail") continue;
    const nlohmann::json* results = member(c, "results");
    bool named = false;
    if (results && results->is_array())
      for (const auto& r : *results) {
        if (text(member(r, "status")) != "fail") continue;
        const nlohmann::json* gpu = member(r, "gpu");
        s.failed.push_back({text(member(c, "key")), gpu && gpu->is_number_integer() ? gpu->get<int>() : -1, text(member(r, "code")), text(member(r, "message"))});
        named = true;
      }
    if (!named) s.failed.push_back({text(member(c, "key")), -1, "", ""});
  }
  const std::int64_t exit = code->get<std::int64_t>();
  if (exit == k_exit_ok) {
    s.state = "healthy";
    s.exit_code = k_exit_ok;
    s.reason = "the pre-flight passed";
  } else if (exit == k_exit_validation_failed) {
    s.state = "failed";
    s.exit_code = k_exit_validation_failed;
    s.reason = s.failed.empty() ? std::string("the pre-flight failed") : s.failed.front().check + ": " + s.failed.front().message;
  } else {
    s = unusable(std::move(s), "could_not_run", "the pre-flight could not run: " + text(member(j, "could_not_run_reason")));
  }
  return s;
}

namespace {

/// A Kubernetes label value: [A-Za-z0-9._-], at most 63 characters, beginning and ending alphanumeric; "" stays "".
std::string label_value(const std::string& v) {
  std::string out;
  for (char c : v) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-') ? c : '_';
  if (out.size() > 63) out.resize(63);
  while (!out.empty() && !std::isalnum(static_cast<unsigned char>(out.back()))) out.pop_back();
  while (!out.empty() && !std::isalnum(static_cast<unsigned char>(out.front()))) out.erase(out.begin());
  return out;
}

}  // namespace

std::string node_features(const NodeStatus& s, std::int64_t now, std::int64_t ttl_s) {
  std::string out = "# gpuenv status (docs/fleet.md); written by gpuenv status --node-features\n";
  out += "# +expiry-time=" + format_rfc3339_utc(now + ttl_s) + "\n";
  out += "gpuenv.dev/status=" + label_value(s.state) + "\n";
  if (!s.level.empty()) out += "gpuenv.dev/level=" + label_value(s.level) + "\n";
  if (!s.driver.empty()) out += "gpuenv.dev/driver=" + label_value(s.driver) + "\n";
  if (!s.cc_state.empty()) out += "gpuenv.dev/cc=" + label_value(s.cc_state) + "\n";
  if (s.state == "failed" && !s.failed.empty()) out += "gpuenv.dev/failed-check=" + label_value(s.failed.front().check) + "\n";
  return out;
}

std::string drain_reason(const NodeStatus& s) {
  if (s.state == "healthy") return "";
  std::string out = "gpuenv: ";
  if (s.state == "failed" && !s.failed.empty()) {
    const FailedCheck& f = s.failed.front();
    out += (f.check.empty() ? std::string("preflight") : f.check) + ": " + (f.gpu >= 0 ? "GPU " + std::to_string(f.gpu) + ": " : std::string()) +
           (f.message.empty() ? std::string("failed") : f.message);
    if (s.failed.size() > 1) out += " (and " + std::to_string(s.failed.size() - 1) + " more)";
  } else {
    out += s.state + ": " + s.reason;
  }
  // One line for Slurm's Reason= and a terminal: no control character, no bidirectional override (a status file's
  // text is the pre-flight's, and anyone who can write the file chooses it), at most 256 bytes.
  return safe_text(out, 253);
}

std::vector<std::string> taint_args(const NodeStatus& s) {
  const std::string startup_off = std::string(k_startup_taint) + ":NoSchedule-";
  if (s.state == "healthy") return {startup_off, std::string(k_unhealthy_taint) + ":NoSchedule-"};
  if (s.state == "failed") {
    const std::string check = s.failed.empty() ? std::string("preflight") : label_value(s.failed.front().check);
    return {startup_off, std::string(k_unhealthy_taint) + "=" + (check.empty() ? std::string("preflight") : check) + ":NoSchedule"};
  }
  return {};
}

}  // namespace gpuenv::app
