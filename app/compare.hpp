#pragma once
// `gpuenv report compare` (docs/fleet.md): validation reports of different machines side by side (GPU, driver, each
// throughput figure) and, given each machine's price, the figures per dollar-hour, sorted; what an instance choice
// weighs. Pure: reads the reports it is given.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/error.hpp"

namespace gpuenv::app {

struct CompareRequest {
  std::vector<std::string> reports;  ///< gpuenv-validation-v1 JSON files (validate --json)
  std::vector<std::string> prices;   ///< "NAME=USD_PER_HOUR"; NAME is a report's file name without .json
};

/// One figure of a machine: what its slowest GPU reached, and the machine's total over its GPUs.
struct Figure {
  double per_gpu = 0;  ///< the lowest of the GPUs' medians
  double total = 0;    ///< the sum of the GPUs' medians (the machine's capacity)
  std::string unit;    ///< GB/s or TFLOPS
  std::optional<double> per_dollar_hour;  ///< total / price
};

struct Machine {
  std::string name;          ///< the report's file name without .json
  std::string gpu;           ///< "NVIDIA H100 80GB HBM3" (or several, joined)
  std::string model;         ///< the catalog's model, the spec's spelling ("H100"; several joined; "" when unknown)
  int gpu_count = 0;
  std::string driver, backend, level, verdict;
  std::optional<double> price;  ///< USD per hour
  std::map<std::string, Figure> figures;  ///< "hbm_bandwidth", "h2d_bandwidth", "gemm_tflops.bf16", ...
};

struct Comparison {
  std::vector<Machine> machines;  ///< sorted by sort_key per dollar-hour when every machine has a price, else by total
  std::string sort_key;           ///< the figure the order follows ("gemm_tflops.bf16", else "hbm_bandwidth")
  std::vector<std::string> keys;  ///< every figure any machine has, in a fixed order
};

/// Errors: `compare.usage` (fewer than one report, a price that is not NAME=NUMBER or names no report, two reports
/// of one name), `compare.bad_report` (ErrorKind::spec: not a gpuenv-validation-v1 report), the files' `io.*`.
Result<Comparison> compare_reports(const CompareRequest& rq);

}  // namespace gpuenv::app
