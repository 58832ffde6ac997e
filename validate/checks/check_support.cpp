#include "validate/checks/check_support.hpp"

#include <cstdio>

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
  const auto units = static_cast<long long>(budget_units(gpu_count));
  return std::chrono::milliseconds(chosen->fixed_ms + chosen->per_unit_ms * units);
}

GpuOutcome outcome(int gpu, Status status, std::string message, std::string_view code) {
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
  out.status = Status::skip;
  out.message = std::move(reason);
  out.hint = std::move(hint);
  return out;
}

GpuOutcome failed(int gpu, std::string_view what, const Error& error, std::string_view code) {
  std::string message = std::string(what) + ": " + error.message;
  if (!error.id.empty()) message += " [" + error.id + "]";
  return outcome(gpu, Status::fail, std::move(message), code);
}

GpuOutcome out_of_time(int gpu) {
  return outcome(gpu, Status::fail, "not checked: the check's deadline passed before this GPU's turn", "hang");
}

std::string gpu_label(const GpuInfo& gpu) {
  std::string out = "GPU " + std::to_string(gpu.index);
  if (!gpu.name.empty()) out += " (" + gpu.name + ")";
  return out;
}

std::string pci_id_text(std::uint32_t pci_device_id) {
  char buffer[16];
  std::snprintf(buffer, sizeof buffer, "0x%04x", pci_device_id);
  return buffer;
}

std::string fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

bool past_deadline(const CheckContext& context) { return std::chrono::steady_clock::now() > context.deadline; }

std::optional<std::string> needs_driver_and_gpus(const CheckContext& context) {
  if (!context.driver.loaded) return std::string("no NVIDIA driver is loaded");
  if (context.gpus.empty()) return std::string("no GPU selected");
  return std::nullopt;
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
