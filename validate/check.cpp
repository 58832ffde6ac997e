#include "validate/check.hpp"

namespace gpuenv::validate {

const char* to_string(CheckStatus status) {
  switch (status) {
    case CheckStatus::pass: return "pass";
    case CheckStatus::warn: return "warn";
    case CheckStatus::fail: return "fail";
    case CheckStatus::skip: return "skip";
    case CheckStatus::measured: return "measured";
  }
  return "skip";
}

CheckStatus worse(CheckStatus a, CheckStatus b) {
  // skip is the identity: it only survives when nothing else ran, so a skipped check never reads as passed and
  // never hides a failure.
  auto rank = [](CheckStatus s) {
    switch (s) {
      case CheckStatus::skip: return 0;
      case CheckStatus::pass: return 1;
      case CheckStatus::measured: return 2;
      case CheckStatus::warn: return 3;
      case CheckStatus::fail: return 4;
    }
    return 0;
  };
  return rank(b) > rank(a) ? b : a;
}

const char* to_string(Level level) {
  switch (level) {
    case Level::quick: return "quick";
    case Level::standard: return "standard";
    case Level::long_: return "long";
  }
  return "standard";
}

std::optional<Level> parse_level(const std::string& text) {
  if (text == "quick") return Level::quick;
  if (text == "standard") return Level::standard;
  if (text == "long") return Level::long_;
  return std::nullopt;
}

bool is_gpu_environment_variable(const std::string& name) {
  static const char* const prefixes[] = {"CUDA_", "NCCL_", "LD_", "CUBLAS", "CUDNN_", "PYTORCH_", "TF_", "XLA_", "NVIDIA_"};
  for (const char* p : prefixes)
    if (name.rfind(p, 0) == 0) return true;
  return name == "NSIGHT_CUDA_DEBUGGER" || name == "COMPUTE_PROFILE" || name == "OPENCL_PROFILE";
}

std::string mig_label(const MigDevice& device) {
  return "MIG " + (device.profile.empty() ? std::string("?") : device.profile) + " (GI " +
         std::to_string(device.gpu_instance_id) + ", CI " + std::to_string(device.compute_instance_id) + ")";
}

std::string unit_label(const GpuOutcome& outcome) {
  if (outcome.gpu < 0) return "host";
  std::string out = "GPU " + std::to_string(outcome.gpu);
  if (outcome.mig) out += " / " + mig_label(*outcome.mig);
  return out;
}

}  // namespace gpuenv::validate
