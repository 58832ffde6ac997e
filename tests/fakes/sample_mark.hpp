#pragma once
// A mark's predicate as the marks tests start from: a passing standard run on one H200 node, on a real GPU.
#include "marks/statement.hpp"

namespace gpuenv::testing {

inline marks::MarkPredicate sample_predicate() {
  marks::MarkPredicate p;
  p.passed = true;
  p.level = "standard";
  p.checks = {{"gemm.bf16", "pass", {{"tflops", 712.5}}}, {"hbm.bandwidth", "warn", {{"gbps", 3900}}}, {"cc.attestation", "skip", {}}};
  p.gpu_product = "NVIDIA-H200";
  p.gpu_pci_device_id = "0x233510de";
  p.gpu_count = 8;
  p.driver_version = "580.65.06";
  p.cuda_driver_version = "13.0";
  p.cc_mode = "off";
  p.lock_sha256 = std::string(64, 'a');
  p.report_sha256 = std::string(64, 'b');
  p.verifier_version = "0.1.0";
  p.backend = "nvml+cuda";
  p.time_verified = 1796126400;  // 2026-12-01T12:00:00Z
  p.not_after = 1798718400;      // 2026-12-31T12:00:00Z
  return p;
}

}  // namespace gpuenv::testing
