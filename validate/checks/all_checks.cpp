// The registry: every built-in check, in the order they run. Adding a check means adding it to its category's
// factory (software.cpp, health.cpp, kernels.cpp, throughput.cpp, image.cpp); its key is then stable forever.
//
// The image checks come last: they judge the software stack of the image (`--image`) on GPUs the checks before them
// have proven, and a GPU that hung earlier skips them. Without --image they SKIP and take no time; with it, their
// probe (one run of the image's Python, shared by the three) adds up to 90 s at standard and 180 s at long, on top
// of the level's budget below, which covers the GPU checks.
//
// Levels and deadlines (seconds on 1 GPU / on 8 GPUs; "-" = not at that level). The budgets live next to each
// check; checks_test.cpp asserts that on one GPU quick sums to <= 15 s, standard to <= 2 min, long to <= 15 min.
//
//   key                  category     quick        standard      long
//   driver_loaded        software     0.1/0.1      0.1/0.1       0.1/0.1
//   driver_meets_lock    software     0.1/0.1      0.1/0.1       0.1/0.1
//   nouveau_absent       software     0.1/0.1      0.1/0.1       0.1/0.1
//   device_nodes         software     0.1/0.1      0.1/0.1       0.1/0.1
//   persistence_mode     software     0.3/1.7      0.3/1.7       0.3/1.7
//   fabric_manager       software     0.1/0.1      0.1/0.1       0.1/0.1
//   mig_state            software     0.3/1.7      0.3/1.7       0.3/1.7
//   cc_mode              software     0.1/0.1      0.1/0.1       0.1/0.1
//   cc_attestation       software     0.7/2.8      3.3/5.4       3.3/5.4       (when CC is on or the lock requires it;
//                                                                               quick only when it requires it)
//   env_vars             software     0.1/0.1      0.1/0.1       0.1/0.1
//   cdi_spec             software     0.1/0.1      0.3/0.3       0.3/0.3       (reads and judges in 3/4 of it)
//   ecc_mode             health       0.3/1.7      0.3/1.7       0.3/1.7
//   ecc_errors           health       0.3/1.7      0.3/1.7       0.3/1.7
//   row_remap            health       0.3/1.7      0.3/1.7       0.3/1.7
//   retired_pages        health       0.3/1.7      0.3/1.7       0.3/1.7
//   pcie_link            health       -            3.5/24.5      3.5/24.5      (under an HBM copy)
//   pcie_replays         health       0.3/1.7      3.5/24.5      3.5/24.5      (quick: idle count only)
//   clock_events         health       -            10.5/80.5     30.5/240.5    (under 20 / 200 GEMM samples)
//   temperature          health       -            10.5/80.5     30.5/240.5    (under 20 / 200 GEMM samples)
//   context_create       kernels      4.5/32.5     4.5/32.5      4.5/32.5
//   compute_correctness  kernels      1.5/9.9      1.5/9.9       1.5/9.9
//   memtest              kernels      3.9/4.6      35.5/80.5     630.5/840.5   (25% 3 s, 50% 30 s, 90% 600 s; split
//                                                                               among GPUs with a floor)
//   gemm_consistency     kernels      -            10.5/80.5     60.5/480.5    (10 / 100 repetitions)
//   hbm_bandwidth        throughput   1.5/9.9      3.5/24.5      5.5/40.5      (3 / 5 / 10 samples)
//   h2d_bandwidth        throughput   -            3.5/24.5      5.5/40.5
//   d2h_bandwidth        throughput   -            3.5/24.5      5.5/40.5
//   gemm_tflops          throughput   -            20.5/160.5    40.5/320.5    (bf16, fp16, tf32, fp64)
//   p2p_bandwidth        throughput   -            -/112.5       -/224.5       (per ordered pair; >= 2 GPUs)
//   nccl_allreduce       throughput   -            -/18.0        -/36.0        (>= 2 GPUs, or one with --multi-node
//                                                                                 plus its rendezvous wait; NCCL)
//   libraries_load       image        -            100/100       190/190       (the first image check to run pays
//   framework_smoke      image        -            100/100       190/190        for the shared probe: <= 90 s at
//   cudnn_smoke          image        -            100/100       190/190        standard, 180 s at long)
//   data_read            data         10/10        35/35         95/95         (only with --data; reads no GPU, and its
//                                                                               time comes on top of the level's)
#include "validate/check.hpp"
#include "validate/checks/check_support.hpp"

namespace gpuenv::validate {

std::vector<std::unique_ptr<Check>> all_checks() {
  std::vector<std::unique_ptr<Check>> out;
  for (auto factory : {&checks::software_checks, &checks::health_checks, &checks::kernel_checks,
                       &checks::throughput_checks, &checks::image_checks, &checks::data_checks}) {
    for (auto& check : factory()) out.push_back(std::move(check));
  }
  return out;
}

}  // namespace gpuenv::validate
