#pragma once
// A validation report as Prometheus metrics (docs/fleet.md): the node_exporter textfile collector's format (the
// Prometheus text exposition format 0.0.4), every name with the `gpuenv_` prefix and in base units.
#include <cstdint>
#include <string>

#include "validate/report.hpp"

namespace gpuenv::validate {

/// The report's metrics:
/// - gpuenv_validation_timestamp_seconds, _duration_seconds, _exit_code (labels level, backend);
/// - gpuenv_check_status{check, gpu, status}: 1 for the outcome's status, 0 for the others (a state set);
/// - every figure of every outcome as gpuenv_<check>_<figure>_<base unit>{gpu[, dtype | peer]}: GB/s as
///   _bytes_per_second, TFLOPS as _flops_per_second, C as _celsius, W as _watts, ms and s as _seconds, B as
///   _bytes, ratios as _ratio; counts, flags and claims without a unit suffix.
/// STARTED_AT (seconds since the epoch) is the report's start.
std::string report_metrics(const Report& report, std::int64_t started_at);

}  // namespace gpuenv::validate
