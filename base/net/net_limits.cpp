#include "base/net/net_limits.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>

namespace gpuenv {

NetworkBudget::Active::Active(NetworkBudget* budget) : m_budget(budget) {
  if (m_budget) m_budget->enter();
}

NetworkBudget::Active::~Active() {
  if (m_budget) m_budget->leave();
}

void NetworkBudget::enter() {
  std::lock_guard lock(m_mu);
  if (m_active++ == 0) m_since = Clock::now();
}

void NetworkBudget::leave() {
  std::lock_guard lock(m_mu);
  if (--m_active == 0) m_spent += Clock::now() - m_since;
}

NetworkBudget::Clock::duration NetworkBudget::remaining() const {
  std::lock_guard lock(m_mu);
  Clock::duration spent = m_spent;
  if (m_active > 0) spent += Clock::now() - m_since;
  return std::max<Clock::duration>(Clock::duration::zero(), Clock::duration(m_limit) - spent);
}

std::string deadline_hint(const RequestDeadline& deadline, const std::string& server) {
  return deadline.from_budget ? "the network is too slow for this command's budget; raise GPUENV_NETWORK_BUDGET or use a closer " + server
                              : "the server sends too slowly; raise GPUENV_REQUEST_TIMEOUT, use a closer " + server + " or try again later";
}

RequestDeadline request_deadline(const NetLimits& limits, NetworkBudget::Clock::time_point started, std::optional<std::uint64_t> size) {
  auto own = std::chrono::duration_cast<std::chrono::seconds>(limits.request_deadline);
  if (size && limits.deadline_bytes_per_s > 0) own += std::chrono::seconds(*size / limits.deadline_bytes_per_s);
  RequestDeadline d{started + own, false, "its deadline of " + describe_wait(own) + " (GPUENV_REQUEST_TIMEOUT" +
                                              (size ? ", plus 1 s per MiB of its size" : std::string()) + ")"};
  if (limits.budget) {
    const auto now = NetworkBudget::Clock::now();
    const auto budget_end = now + limits.budget->remaining();
    if (budget_end < d.at) {
      d.at = budget_end;
      d.from_budget = true;
      d.what = "the command's network budget of " + describe_wait(limits.budget->limit()) + " (GPUENV_NETWORK_BUDGET)";
    }
  }
  return d;
}

std::chrono::seconds retry_after_wait(const NetLimits& limits, long asked_s, bool* capped) {
  const long cap = static_cast<long>(limits.retry_after_cap.count());
  const long wait = std::clamp<long>(asked_s, 0, cap);
  if (capped) *capped = asked_s > cap;
  return std::chrono::seconds(wait);
}

std::string describe_wait(std::chrono::milliseconds wait) {
  const long long ms = wait.count();
  char buf[32];
  const long long secs = ms / 1000;
  if (ms < 10000 && ms % 1000 != 0) std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(ms) / 1000.0);
  else if (secs < 600 || secs % 60 != 0) std::snprintf(buf, sizeof buf, "%lld s", secs);
  else if ((secs / 60) % 60 != 0) std::snprintf(buf, sizeof buf, "%lld min", secs / 60);
  else std::snprintf(buf, sizeof buf, "%lld h", secs / 3600);
  return buf;
}

namespace {

Status read_duration(const std::map<std::string, std::string>& env, const char* name, std::chrono::seconds* out, bool positive) {
  const auto it = env.find(name);
  if (it == env.end()) return ok_status();
  auto d = parse_duration(it->second, std::string("environment variable ") + name);
  if (!d) return d.error();
  if (positive && d->count() == 0) {
    return make_error(ErrorKind::usage, "config.bad_duration", "0 leaves no time at all", std::string("environment variable ") + name,
                      "give a duration above zero, or unset the variable for the default");
  }
  *out = *d;
  return ok_status();
}

}  // namespace

Result<NetLimits> net_limits_from_env(const std::map<std::string, std::string>& env) {
  NetLimits l;
  std::chrono::seconds budget{7200}, connect{15};
  if (Status s = read_duration(env, "GPUENV_NETWORK_BUDGET", &budget, true); !s) return s.error();
  if (Status s = read_duration(env, "GPUENV_REQUEST_TIMEOUT", &l.request_deadline, true); !s) return s.error();
  if (Status s = read_duration(env, "GPUENV_CONNECT_TIMEOUT", &connect, true); !s) return s.error();
  if (Status s = read_duration(env, "GPUENV_RATE_WINDOW", &l.rate_window, true); !s) return s.error();
  if (Status s = read_duration(env, "GPUENV_RETRY_AFTER_CAP", &l.retry_after_cap, false); !s) return s.error();
  l.connect_timeout = connect;
  if (const auto it = env.find("GPUENV_MIN_RATE"); it != env.end()) {
    std::uint64_t rate = 0;
    const std::string& v = it->second;
    const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), rate);
    if (ec != std::errc() || p != v.data() + v.size() || v.empty()) {
      return make_error(ErrorKind::usage, "config.bad_number", "'" + v + "' is not a number of bytes per second", "environment variable GPUENV_MIN_RATE",
                        "give a whole number such as 1024, or 0 to turn the rate rule off");
    }
    l.min_rate = rate;
  }
  l.budget = std::make_shared<NetworkBudget>(budget);
  return l;
}

}  // namespace gpuenv
