#pragma once
// The judgement shared by the checks, as pure functions: sample statistics, references and the fail fraction,
// the node-outlier rule, DCGM's PCIe replay rate, and the driver version rules. No backend, no clock, no I/O, so
// the replay backend and the real one are judged by exactly this code, and it is unit-tested on its own.
//
// Throughput rule (issue 5): the median of at least k_min_samples samples, each verified, is compared with the
// GPU model's reference; below fail_fraction x reference is FAIL `bandwidth_low` / `tflops_low`. The reference is
// the model's listed known-good figure, else one derived from the hardware by the table's rules (host-device copies
// from the PCIe link, GEMM from the datasheet's dense peak, NVLink from the active links; thresholds.hpp
// DerivedRules). Where neither exists the outcome is MEASURED with code `no_threshold` and a message saying why it
// was not judged: the measurement ran and its data was verified (so it is not a SKIP), but no performance threshold
// was checked, so it is never a PASS.
// Node rule: among GPUs of the same model, any median below (1 - node_tolerance) x their mean is FAIL
// `node_outlier` (only with >= 2 such GPUs).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "validate/backend.hpp"
#include "validate/check.hpp"
#include "validate/thresholds.hpp"

namespace gpuenv::validate {

/// Fewest samples a throughput measurement is judged on (issue 5: median of at least 3).
inline constexpr std::size_t k_min_samples = 3;

/// A number with `decimals` decimals.
std::string fixed(double value, int decimals);

/// A measured figure for a message: one decimal from 1 up, three significant digits below (0.00123), so a slow but
/// nonzero measurement never reads as 0.0.
std::string measured(double value);

/// Median, minimum and maximum of a sample set.
struct SampleStats {
  double median = 0, min = 0, max = 0;
  std::size_t count = 0;
};

/// Statistics of `values` (the median of an even count is the mean of the middle two); nullopt when empty.
std::optional<SampleStats> sample_stats(std::vector<double> values);

/// Why `samples` cannot be judged, or nullopt when they can: fewer than k_min_samples, data not verified after each
/// sample, or a value that is not a positive finite number (a measurement of zero moved no verified data).
std::optional<std::string> samples_problem(const Samples& samples);

/// What produced a result, for messages: "cublasLt from /usr/lib/libcublasLt.so.12", "gpuenv"; `otherwise` when
/// the engine is not named. With `passed_over`, why the preferred libraries were not used is added in brackets:
/// "gpuenv [passed over: libcublasLt.so.13: cublasLtCreate failed with ...]".
std::string engine_text(const std::string& engine, const std::string& library, const std::string& otherwise = {},
                        const std::string& passed_over = {});

/// The reference rule for one metric on one GPU model.
struct ReferenceRule {
  std::optional<Reference> reference;  ///< empty: no reference for this model and metric
  double fail_fraction = 0.75;         ///< the model's override, else the table's default
  std::string model;                   ///< the table's model name; empty when the table does not know the GPU
  std::string why_none;                ///< with no reference: why, for the message ("no PCIe link was reported")
};

/// Looks up `metric` for the GPU with `pci_device_id` in `table` (null = no table loaded: no reference, default
/// fail fraction).
ReferenceRule find_reference(const ThresholdTable* table, std::uint32_t pci_device_id, std::string_view metric);

/// h2d_bandwidth / d2h_bandwidth: the model's listed reference, else fraction x the payload rate per direction of
/// `link` at its maximum generation and width (NVML's "maximum possible with this device and system"), from the
/// table's host_device rule and PCIe generations. None with confidential computing on (`cc_state` "on": copies go
/// through encrypted bounce buffers, and no sourced figure for that path is known), without a link reading, or for
/// a generation the table has no rate for.
ReferenceRule host_device_reference(const ThresholdTable* table, std::uint32_t pci_device_id, std::string_view metric,
                                    const std::optional<PcieLink>& link, std::string_view cc_state);

/// gemm_tflops.<type>: the model's listed reference, else the gemm rule's fraction x the model's dense peak.
ReferenceRule gemm_reference(const ThresholdTable* table, std::uint32_t pci_device_id, std::string_view metric);

/// p2p_bandwidth / nccl_allreduce: the model's listed reference, else the nvlink rule's fraction x `links` active
/// links x the model's per-link rate per direction. Only through NVSwitch (`nvswitch`), where every link reaches
/// every peer; with direct NVLink the links per peer are not known, and with no active link the copies go over PCIe,
/// so there is no derived reference then.
ReferenceRule nvlink_reference(const ThresholdTable* table, std::uint32_t pci_device_id, std::string_view metric,
                               int links, bool nvswitch);

/// Memory slices of a GPU with MIG on: A100, H100 and H200 divide their memory into eight, and each MIG profile holds
/// k of them ("Fraction of Memory" 1/8 ... 8/8 in the profile tables of NVIDIA's MIG user guide,
/// https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html).
inline constexpr int k_mig_memory_slices = 8;
/// The source of k_mig_memory_slices, for reference sources.
inline constexpr const char* k_mig_memory_slices_source =
    "NVIDIA Multi-Instance GPU User Guide, Supported MIG Profiles "
    "(https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html): 'Fraction of Memory' "
    "of each A100/H100/H200 profile in eighths (1g.10gb 1/8, 2g.20gb 2/8, 3g.40gb 4/8, 4g.40gb 4/8, 7g.80gb 8/8)";

/// The memory slices (of k_mig_memory_slices) an instance holds: its memory over the whole GPU's, in eighths,
/// rounded (an instance reports a little less than its slices, 9.75 of 10 GiB); 0 when either size is unknown.
int mig_memory_slices(const MigDevice& device);

/// `rule` (for the whole GPU model) scaled to a MIG instance's share: hbm_bandwidth by its memory slices of 8,
/// gemm_tflops.* by its SMs over the model's whole-GPU sm_count; the reference's basis says so with the source
/// ("1/8 of H100 SXM5 80GB hbm_bandwidth 2540.0 GB/s: 1 of 8 memory slices"). Without what the scale needs (no
/// memory sizes, no SM count for the instance or the model) or for another metric the reference is removed and
/// why_none says why, so the figure is MEASURED rather than judged against the whole GPU.
/// `gi_compute_instances`: the compute instances of the device's GPU instance measured at the same time (each
/// reports the whole GPU instance's memory and shares its bandwidth); for hbm_bandwidth the share is divided by
/// it when above 1 ("4/8 ... shared by 3 compute instances of GI 2"). GEMM's SM scale already is the CI's own.
ReferenceRule mig_scaled_rule(ReferenceRule rule, const ThresholdTable* table, std::uint32_t pci_device_id,
                              const MigDevice& device, std::string_view metric, int gi_compute_instances = 1);
/// nccl_allreduce across nodes: the rdma_nic rule's fraction x SHARE_GBS, the node's usable RDMA link rate in GB/s
/// (multinode::node_nic_gbs: the fastest min(GPUs, active ports) ports), described by BASIS ("2 x 400 Gb/sec (4X NDR)
/// active (...), 2 used by 2 GPU(s)"). The line itself is the acceptance line (fail fraction 1.0). None without a
/// table, without the rule, or with no active port (SHARE_GBS 0): the figure is then MEASURED.
ReferenceRule nic_reference(const ThresholdTable* table, double share_gbs, const std::string& basis);

/// The metric-name suffix for a unit: "GB/s" -> "gbs", "TFLOPS" -> "tflops", else the unit's letters and digits
/// lowercased ("value" when none).
std::string unit_suffix(std::string_view unit);

/// The code for a value below its reference: `tflops_low` for TFLOPS, else `bandwidth_low`.
const char* low_code(std::string_view unit);

/// The judgement of one metric on one GPU.
struct MetricJudgement {
  CheckStatus status = CheckStatus::pass;
  std::string code;              ///< "" | unverified | bandwidth_low | tflops_low | no_threshold (MEASURED) | internal
  std::string message;           ///< "median 4012.5 GB/s (min ..., max ..., 5 samples); 95% of the reference ..."
  std::optional<double> median;  ///< empty when the samples were not trusted (then left out of the node rule)
  std::string unit;              ///< the samples' unit
  std::vector<Metric> metrics;   ///< prefix + median_<u>, min_<u>, max_<u>, samples, reference_<u>, fraction_of_reference
};

/// Judges one metric's samples against `rule`. `metric` is the thresholds key ("hbm_bandwidth",
/// "gemm_tflops.bf16"); `prefix` is put before every metric name ("bf16." -> "bf16.median_tflops"). A unit that
/// differs from the reference's is FAIL `internal` (the adapter broke the port's contract).
MetricJudgement judge_samples(std::string_view metric, const Samples& samples, const ReferenceRule& rule,
                              std::string_view prefix = {});

/// A value caught by the node rule.
struct Outlier {
  std::size_t index = 0;  ///< position in the input
  double value = 0;
  double mean = 0;   ///< mean of all values
  double floor = 0;  ///< (1 - tolerance) x mean
};

/// The values below (1 - tolerance) x the mean of all `values`; none with fewer than 2 values.
std::vector<Outlier> node_outliers(const std::vector<double>& values, double tolerance);

/// DCGM's expected PCIe replays per minute for a link: a bit error rate of 1e-12 at the generation's line rate
/// (2.5, 5, 8, 16, 32, 64 GT/s per lane) times 60 s, times the width, rounded up; generations above 6 count as 6
/// (NVIDIA/DCGM modules/health/DcgmHealthWatch.cpp, GetExpectedPcieReplayRate). 0 for an unknown link.
int expected_pcie_replays_per_minute(int gen, int width);

/// "12.4" for cuDriverGetVersion()'s 12040; empty for 0 or less.
std::string cuda_version_text(int cuda_driver_version);

/// A judgement without metrics.
struct Verdict {
  CheckStatus status = CheckStatus::pass;
  std::string code;
  std::string message;
};

/// The host driver against the lock's floor: PASS when driver >= floor, FAIL `driver_too_old` below it, WARN
/// `driver_version_unknown` when the driver's version cannot be read, FAIL `lock_invalid` when the floor cannot.
Verdict judge_driver_floor(std::string_view driver_version, std::string_view floor);

/// The driver's CUDA version (cuDriverGetVersion) against the image's CUDA: PASS when driver >= image (compared
/// as major.minor); below it WARN `forward_compat_used` when the image has forward compatibility
/// (`forward_compat` true), else FAIL `driver_cuda_too_old` (false or unknown: gpuenv cannot show it is present).
/// WARN `driver_version_unknown` when the driver reports no CUDA version; FAIL `lock_invalid` for a bad image CUDA.
Verdict judge_driver_cuda(int cuda_driver_version, std::string_view image_cuda, std::optional<bool> forward_compat);

}  // namespace gpuenv::validate
