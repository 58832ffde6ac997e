#include "validate/checks/check_support.hpp"

#include <algorithm>
#include <cstdio>
#include <exception>

#include "validate/error_codes.hpp"

namespace gpuenv::validate::checks {

const std::optional<Budget>& SpecCheck::budget(Level level) const {
  switch (level) {
    case Level::quick: return m_spec.quick;
    case Level::standard: return m_spec.standard;
    case Level::long_: return m_spec.long_;
  }
  return m_spec.standard;
}

std::chrono::milliseconds SpecCheck::deadline(Level level, std::size_t gpu_count) const {
  std::optional<Budget> chosen = budget(level);
  if (!chosen) {
    // Asked for outside its level (the runner lists it as SKIP): the largest budget is a safe bound.
    for (Level l : {Level::long_, Level::standard, Level::quick}) {
      if (budget(l)) {
        chosen = budget(l);
        break;
      }
    }
  }
  if (!chosen) return std::chrono::milliseconds(0);
  const auto eighths = static_cast<long long>(budget_eighths(gpu_count));
  return std::chrono::milliseconds(chosen->fixed_ms + chosen->per_unit_ms * eighths / 8);
}

GpuOutcome outcome(int gpu, CheckStatus status, std::string message, std::string_view code) {
  GpuOutcome out;
  out.gpu = gpu;
  out.status = status;
  out.message = std::move(message);
  out.code = std::string(code);
  if (!code.empty()) {
    if (const ErrorCode* entry = find_error_code(code)) out.hint = entry->hint;
  }
  return out;
}

GpuOutcome skipped(int gpu, std::string reason, std::string hint) {
  GpuOutcome out;
  out.gpu = gpu;
  out.status = CheckStatus::skip;
  out.message = std::move(reason);
  out.hint = std::move(hint);
  return out;
}

GpuOutcome failed(int gpu, std::string_view what, const Error& error, std::string_view code) {
  std::string message = std::string(what) + ": " + error.message;
  if (!error.id.empty()) message += " [" + error.id + "]";
  return outcome(gpu, CheckStatus::fail, std::move(message), code);
}

GpuOutcome out_of_time(int gpu) {
  return outcome(gpu, CheckStatus::fail, "not checked: the check's deadline passed before this GPU's turn", "hang");
}

std::string gpu_label(const GpuInfo& gpu) {
  std::string out = "GPU " + std::to_string(gpu.index);
  if (gpu.mig) return out + " / " + mig_label(*gpu.mig);
  if (!gpu.name.empty()) out += " (" + gpu.name + ")";
  return out;
}

Result<std::unique_ptr<GpuSession>> open_session(GpuBackend& backend, const GpuInfo& gpu) {
  if (gpu.mig) return backend.open_mig(*gpu.mig);
  return backend.open(gpu.index);
}

GpuOutcome open_failed(const GpuInfo& gpu, const Error& error) {
  if (gpu.mig && error.id == "validate.mig_not_visible")
    return skipped(gpu.index, gpu_label(gpu) + ": " + error.message, error.hint);
  return failed(gpu.index, "creating a context on " + gpu_label(gpu), error, "context_failed");
}

namespace gi_share_detail {
bool same_gpu_instance(const GpuInfo& a, const GpuInfo& b) {
  return a.mig && b.mig && a.index == b.index && a.mig->gpu_instance_id == b.mig->gpu_instance_id;
}
}  // namespace gi_share_detail

int gpu_instance_sharers(const CheckContext& context, const GpuInfo& gpu) {
  if (!gpu.mig) return 1;
  const auto n = std::count_if(context.gpus.begin(), context.gpus.end(),
                               [&gpu](const GpuInfo& other) { return gi_share_detail::same_gpu_instance(other, gpu); });
  return std::max(static_cast<int>(n), 1);
}

const GpuInfo& gpu_instance_first(const CheckContext& context, const GpuInfo& gpu) {
  if (!gpu.mig) return gpu;
  for (const GpuInfo& other : context.gpus)
    if (gi_share_detail::same_gpu_instance(other, gpu)) return other;
  return gpu;
}

std::string pci_id_text(std::uint32_t pci_device_id) {
  char buffer[16];
  std::snprintf(buffer, sizeof buffer, "0x%04x", pci_device_id);
  return buffer;
}

bool past_deadline(const CheckContext& context) { return std::chrono::steady_clock::now() > context.deadline; }

std::optional<std::string> needs_driver_and_gpus(const CheckContext& context) {
  if (!context.driver.loaded) return std::string("no NVIDIA driver is loaded");
  if (context.gpus.empty()) return std::string("no GPU selected");
  return std::nullopt;
}

void fold_health(GpuHealth& folded, const GpuHealth& next) {
  const GpuHealth before = folded;
  folded = next;
  if (before.pcie_link && next.pcie_link) {
    const PcieLink& a = *before.pcie_link;
    const PcieLink& b = *next.pcie_link;
    PcieLink best = b;
    best.current_gen = std::max(a.current_gen, b.current_gen);
    best.current_width = std::max(a.current_width, b.current_width);
    folded.pcie_link = best;
  } else if (before.pcie_link) {
    folded.pcie_link = before.pcie_link;
  }
  if (before.clock_event_reasons || next.clock_event_reasons)
    folded.clock_event_reasons = before.clock_event_reasons.value_or(0) | next.clock_event_reasons.value_or(0);
  if (before.temperature_c && (!next.temperature_c || *before.temperature_c > *next.temperature_c))
    folded.temperature_c = before.temperature_c;
  if (before.power_w && (!next.power_w || *before.power_w > *next.power_w)) folded.power_w = before.power_w;
  // Counters are cumulative: the latest reading is the one that counts; keep an earlier one only when it is absent.
  if (!next.pcie_replays) folded.pcie_replays = before.pcie_replays;
  if (!next.slowdown_temperature_c) folded.slowdown_temperature_c = before.slowdown_temperature_c;
  if (!next.power_limit_w) folded.power_limit_w = before.power_limit_w;
}

HealthMonitor::HealthMonitor(GpuSession& session, std::chrono::milliseconds period,
                             std::chrono::steady_clock::time_point deadline)
    : m_session(session), m_period(std::max(period, std::chrono::milliseconds(1))), m_deadline(deadline) {
  read_once();  // the first reading before the load starts: a load shorter than the period still has two
  try {
    m_thread = std::thread([this] {
      std::unique_lock lock(m_mutex);
      while (!m_stop) {
        if (m_wake.wait_for(lock, m_period, [this] { return m_stop; })) break;
        if (std::chrono::steady_clock::now() > m_deadline) break;
        lock.unlock();
        read_once();
        lock.lock();
      }
    });
  } catch (const std::exception&) {
    // No thread: the first and the last reading still make a result.
  }
}

HealthMonitor::~HealthMonitor() {
  {
    std::lock_guard lock(m_mutex);
    m_stop = true;
  }
  m_wake.notify_all();
  if (m_thread.joinable()) m_thread.join();
}

void HealthMonitor::read_once() {
  Result<GpuHealth> h = [&]() -> Result<GpuHealth> {
    try {
      return m_session.health();
    } catch (const std::exception& e) {
      return make_error(ErrorKind::internal, "validate.health_reader", std::string("reading health threw: ") + e.what());
    }
  }();
  std::lock_guard lock(m_mutex);
  if (!h) {
    m_last_error = h.error();
    return;
  }
  if (m_readings == 0) {
    m_folded = std::move(*h);
  } else {
    fold_health(m_folded, *h);
  }
  ++m_readings;
}

Result<GpuHealth> HealthMonitor::finish() {
  {
    std::lock_guard lock(m_mutex);
    m_stop = true;
  }
  m_wake.notify_all();
  if (m_thread.joinable()) m_thread.join();
  read_once();
  std::lock_guard lock(m_mutex);
  if (m_readings == 0) {
    if (m_last_error) return *m_last_error;
    return make_error(ErrorKind::internal, "validate.health_reader", "no health reading was taken");
  }
  return m_folded;
}

int HealthMonitor::readings() const {
  std::lock_guard lock(m_mutex);
  return m_readings;
}

namespace {

// Under load within a degree margin of the slowdown temperature: WARN (the next hot day throttles it).
constexpr int k_temperature_margin_c = 5;

std::string reason_names(std::uint64_t reasons, std::uint64_t mask) {
  std::string out;
  const std::pair<std::uint64_t, const char*> k_names[] = {
      {k_clock_event_sw_power_cap, "software power cap"},
      {k_clock_event_hw_slowdown, "hardware slowdown"},
      {k_clock_event_sw_thermal, "software thermal slowdown"},
      {k_clock_event_hw_thermal, "hardware thermal slowdown"},
      {k_clock_event_hw_power_brake, "hardware power brake"},
  };
  for (const auto& [bit, name] : k_names) {
    if ((reasons & mask & bit) == 0) continue;
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

}  // namespace

GpuOutcome judge_clock_events(int gpu, std::uint64_t reasons, const std::string& load) {
  constexpr std::uint64_t k_hardware = k_clock_event_hw_slowdown | k_clock_event_hw_thermal | k_clock_event_hw_power_brake;
  GpuOutcome out;
  if ((reasons & k_hardware) != 0)
    out = outcome(gpu, CheckStatus::fail, reason_names(reasons, k_hardware) + " under " + load, "clock_throttled");
  else if ((reasons & k_clock_event_sw_thermal) != 0)
    out = outcome(gpu, CheckStatus::warn, "software thermal slowdown under " + load, "clock_throttled");
  else if ((reasons & k_clock_event_sw_power_cap) != 0)
    out = outcome(gpu, CheckStatus::pass, "clocks held at the power limit under " + load + " (normal at full load)");
  else
    out = outcome(gpu, CheckStatus::pass, "no clock slowdown under " + load);
  out.metrics = {{"clock_event_reasons", static_cast<double>(reasons), "bitmask"}};
  return out;
}

GpuOutcome judge_temperature(int gpu, const GpuHealth& h, const std::string& load) {
  const int t = h.temperature_c.value_or(0);
  std::vector<Metric> metrics{{"temperature_c", static_cast<double>(t), "C"}};
  std::string power;
  if (h.power_w) {
    metrics.push_back({"power_w", *h.power_w, "W"});
    power = ", " + fixed(*h.power_w, 0) + " W";
    if (h.power_limit_w) {
      metrics.push_back({"power_limit_w", *h.power_limit_w, "W"});
      power += " of " + fixed(*h.power_limit_w, 0) + " W";
    }
  }
  const std::string reading_text = std::to_string(t) + " C" + power + " under " + load;
  GpuOutcome out;
  if (!h.slowdown_temperature_c) {
    out = outcome(gpu, CheckStatus::measured, reading_text + "; not judged: the GPU reports no slowdown threshold");
  } else {
    const int slowdown = *h.slowdown_temperature_c;
    metrics.push_back({"slowdown_temperature_c", static_cast<double>(slowdown), "C"});
    metrics.push_back({"margin_c", static_cast<double>(slowdown - t), "C"});
    const std::string versus = reading_text + ", slowdown at " + std::to_string(slowdown) + " C";
    if (t >= slowdown)
      out = outcome(gpu, CheckStatus::fail, versus + ": at or above it", "temperature_high");
    else if (t >= slowdown - k_temperature_margin_c)
      out = outcome(gpu, CheckStatus::warn, versus + ": within " + std::to_string(k_temperature_margin_c) + " C of it",
                    "temperature_high");
    else
      out = outcome(gpu, CheckStatus::pass, versus);
  }
  out.metrics = std::move(metrics);
  return out;
}

int samples_at(Level level) {
  switch (level) {
    case Level::quick: return 3;
    case Level::standard: return 5;
    case Level::long_: return 10;
  }
  return 5;
}

}  // namespace gpuenv::validate::checks
