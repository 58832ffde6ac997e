#include "validate/checks/judge.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace {

using gpuenv::validate::find_reference;
using gpuenv::validate::judge_samples;
using gpuenv::validate::Metric;
using gpuenv::validate::MetricJudgement;
using gpuenv::validate::ReferenceRule;
using gpuenv::validate::Samples;
using gpuenv::validate::CheckStatus;
using gpuenv::validate::ThresholdTable;

Samples gbs(std::vector<double> values, bool verified = true) {
  Samples s;
  s.values = std::move(values);
  s.unit = "GB/s";
  s.engine = "gpuenv";
  s.data_verified = verified;
  return s;
}

ThresholdTable table() {
  ThresholdTable t;
  gpuenv::validate::GpuThresholds h100;
  h100.model = "H100 SXM5 80GB";
  h100.pci_device_ids = {0x2330};
  h100.references["hbm_bandwidth"] = {3000, "GB/s", "test"};
  h100.references["gemm_tflops.bf16"] = {700, "TFLOPS", "test"};
  t.gpus.push_back(h100);
  gpuenv::validate::GpuThresholds strict;
  strict.model = "Strict GPU";
  strict.pci_device_ids = {0x1234};
  strict.references["hbm_bandwidth"] = {1000, "GB/s", "test"};
  strict.fail_fraction = 0.9;
  t.gpus.push_back(strict);
  return t;
}

const Metric* metric(const MetricJudgement& j, const std::string& name) {
  for (const auto& m : j.metrics)
    if (m.name == name) return &m;
  return nullptr;
}

TEST(SampleStats, MedianOfOddCountIsTheMiddleValue) {
  auto s = gpuenv::validate::sample_stats({5, 1, 3});
  ASSERT_TRUE(s);
  EXPECT_DOUBLE_EQ(s->median, 3);
  EXPECT_DOUBLE_EQ(s->min, 1);
  EXPECT_DOUBLE_EQ(s->max, 5);
  EXPECT_EQ(s->count, 3u);
}

TEST(SampleStats, MedianOfEvenCountIsTheMeanOfTheMiddleTwo) {
  auto s = gpuenv::validate::sample_stats({4, 1, 3, 10});
  ASSERT_TRUE(s);
  EXPECT_DOUBLE_EQ(s->median, 3.5);
}

TEST(SampleStats, EmptyHasNoStatistics) { EXPECT_FALSE(gpuenv::validate::sample_stats({})); }

TEST(SamplesProblem, NeedsThreeVerifiedPositiveSamples) {
  EXPECT_FALSE(gpuenv::validate::samples_problem(gbs({1, 2, 3})));
  EXPECT_TRUE(gpuenv::validate::samples_problem(gbs({1, 2})));
  EXPECT_TRUE(gpuenv::validate::samples_problem(gbs({1, 2, 3}, false)));
  EXPECT_TRUE(gpuenv::validate::samples_problem(gbs({1, 0, 3})));
  EXPECT_TRUE(gpuenv::validate::samples_problem(gbs({1, -2, 3})));
  EXPECT_TRUE(gpuenv::validate::samples_problem(gbs({1, std::numeric_limits<double>::quiet_NaN(), 3})));
  EXPECT_TRUE(gpuenv::validate::samples_problem(gbs({1, std::numeric_limits<double>::infinity(), 3})));
}

TEST(FindReference, NoTableMeansNoReferenceAndTheDefaultFraction) {
  ReferenceRule r = find_reference(nullptr, 0x2330, "hbm_bandwidth");
  EXPECT_FALSE(r.reference);
  EXPECT_DOUBLE_EQ(r.fail_fraction, 0.75);
  EXPECT_TRUE(r.model.empty());
}

TEST(FindReference, FindsTheModelByPciIdAndTheMetricByKey) {
  const ThresholdTable t = table();
  ReferenceRule r = find_reference(&t, 0x2330, "hbm_bandwidth");
  ASSERT_TRUE(r.reference);
  EXPECT_DOUBLE_EQ(r.reference->value, 3000);
  EXPECT_EQ(r.model, "H100 SXM5 80GB");
  EXPECT_FALSE(find_reference(&t, 0x2330, "h2d_bandwidth").reference);
  EXPECT_EQ(find_reference(&t, 0x2330, "h2d_bandwidth").model, "H100 SXM5 80GB");
  EXPECT_FALSE(find_reference(&t, 0x27b8, "hbm_bandwidth").reference);
}

TEST(FindReference, ModelOverridesTheTablesFailFraction) {
  const ThresholdTable t = table();
  EXPECT_DOUBLE_EQ(find_reference(&t, 0x1234, "hbm_bandwidth").fail_fraction, 0.9);
  EXPECT_DOUBLE_EQ(find_reference(&t, 0x2330, "hbm_bandwidth").fail_fraction, 0.75);
}

TEST(JudgeSamples, PassesAtOrAboveTheFailFractionAndReportsTheMetrics) {
  const ThresholdTable t = table();
  auto j = judge_samples("hbm_bandwidth", gbs({2900, 2950, 3010, 2990, 2970}), find_reference(&t, 0x2330, "hbm_bandwidth"));
  EXPECT_EQ(j.status, CheckStatus::pass);
  EXPECT_TRUE(j.code.empty());
  ASSERT_TRUE(j.median);
  EXPECT_DOUBLE_EQ(*j.median, 2970);
  ASSERT_TRUE(metric(j, "median_gbs"));
  EXPECT_DOUBLE_EQ(metric(j, "median_gbs")->value, 2970);
  EXPECT_EQ(metric(j, "median_gbs")->unit, "GB/s");
  EXPECT_DOUBLE_EQ(metric(j, "min_gbs")->value, 2900);
  EXPECT_DOUBLE_EQ(metric(j, "max_gbs")->value, 3010);
  EXPECT_DOUBLE_EQ(metric(j, "reference_gbs")->value, 3000);
  EXPECT_DOUBLE_EQ(metric(j, "fraction_of_reference")->value, 0.99);
  EXPECT_DOUBLE_EQ(metric(j, "samples")->value, 5);
  EXPECT_NE(j.message.find("99% of the reference"), std::string::npos) << j.message;
}

TEST(JudgeSamples, JudgesTheMedianNotTheBestOrWorstSample) {
  const ThresholdTable t = table();
  // One fast outlier must not rescue a slow GPU, one slow sample must not fail a good one.
  EXPECT_EQ(judge_samples("hbm_bandwidth", gbs({1000, 1100, 3000}), find_reference(&t, 0x2330, "hbm_bandwidth")).status,
            CheckStatus::fail);
  EXPECT_EQ(judge_samples("hbm_bandwidth", gbs({100, 2900, 3000}), find_reference(&t, 0x2330, "hbm_bandwidth")).status,
            CheckStatus::pass);
}

TEST(JudgeSamples, BelowTheFailFractionFailsWithBandwidthLow) {
  const ThresholdTable t = table();
  auto j = judge_samples("hbm_bandwidth", gbs({2000, 2100, 2200}), find_reference(&t, 0x2330, "hbm_bandwidth"));
  EXPECT_EQ(j.status, CheckStatus::fail);
  EXPECT_EQ(j.code, "bandwidth_low");
  EXPECT_NE(j.message.find("below the fail fraction of 75%"), std::string::npos) << j.message;
}

TEST(JudgeSamples, ExactlyAtTheFailFractionPasses) {
  const ThresholdTable t = table();
  EXPECT_EQ(judge_samples("hbm_bandwidth", gbs({2250, 2250, 2250}), find_reference(&t, 0x2330, "hbm_bandwidth")).status,
            CheckStatus::pass);
}

TEST(JudgeSamples, LowTflopsFailsWithTflopsLowAndPrefixedMetrics) {
  const ThresholdTable t = table();
  Samples s{{300, 310, 320}, "TFLOPS", "cublasLt", true};
  auto j = judge_samples("gemm_tflops.bf16", s, find_reference(&t, 0x2330, "gemm_tflops.bf16"), "bf16.");
  EXPECT_EQ(j.status, CheckStatus::fail);
  EXPECT_EQ(j.code, "tflops_low");
  EXPECT_TRUE(metric(j, "bf16.median_tflops"));
  EXPECT_TRUE(metric(j, "bf16.reference_tflops"));
}

TEST(JudgeSamples, WithoutAReferenceIsMeasuredAndSaysNotJudged) {
  const ThresholdTable t = table();
  auto j = judge_samples("hbm_bandwidth", gbs({250, 260, 270}), find_reference(&t, 0x27b8, "hbm_bandwidth"));
  EXPECT_EQ(j.status, CheckStatus::measured);
  EXPECT_EQ(j.code, "no_threshold");
  EXPECT_NE(j.message.find("not judged"), std::string::npos) << j.message;
  EXPECT_TRUE(metric(j, "median_gbs"));
  EXPECT_FALSE(metric(j, "reference_gbs"));
  EXPECT_FALSE(metric(j, "fraction_of_reference"));
}

TEST(JudgeSamples, UntrustedSamplesFailUnverifiedAndHaveNoMedian) {
  const ThresholdTable t = table();
  auto two = judge_samples("hbm_bandwidth", gbs({3000, 3000}), find_reference(&t, 0x2330, "hbm_bandwidth"));
  EXPECT_EQ(two.status, CheckStatus::fail);
  EXPECT_EQ(two.code, "unverified");
  EXPECT_FALSE(two.median);
  auto unchecked = judge_samples("hbm_bandwidth", gbs({3000, 3000, 3000}, false), find_reference(&t, 0x2330, "hbm_bandwidth"));
  EXPECT_EQ(unchecked.code, "unverified");
  // Never judged on zeros, even without a reference.
  auto zeros = judge_samples("hbm_bandwidth", gbs({0, 0, 0}), ReferenceRule{});
  EXPECT_EQ(zeros.status, CheckStatus::fail);
  EXPECT_EQ(zeros.code, "unverified");
}

TEST(JudgeSamples, UnitThatDiffersFromTheReferenceIsAnInternalFailure) {
  const ThresholdTable t = table();
  Samples s{{3, 3, 3}, "TB/s", "gpuenv", true};
  auto j = judge_samples("hbm_bandwidth", s, find_reference(&t, 0x2330, "hbm_bandwidth"));
  EXPECT_EQ(j.status, CheckStatus::fail);
  EXPECT_EQ(j.code, "internal");
}

TEST(NodeOutliers, NeedTwoValues) { EXPECT_TRUE(gpuenv::validate::node_outliers({100}, 0.1).empty()); }

TEST(NodeOutliers, FlagValuesBelowToleranceTimesTheMean) {
  // Mean of 8 values: 7 x 3000 + 2400 = 23400 / 8 = 2925; floor 2632.5.
  std::vector<double> v(8, 3000);
  v[5] = 2400;
  auto o = gpuenv::validate::node_outliers(v, 0.10);
  ASSERT_EQ(o.size(), 1u);
  EXPECT_EQ(o[0].index, 5u);
  EXPECT_DOUBLE_EQ(o[0].mean, 2925);
  EXPECT_DOUBLE_EQ(o[0].floor, 2632.5);
}

TEST(NodeOutliers, EqualValuesHaveNoOutlier) {
  EXPECT_TRUE(gpuenv::validate::node_outliers({3000, 3000, 3000}, 0.10).empty());
  EXPECT_TRUE(gpuenv::validate::node_outliers({3000, 2800}, 0.10).empty());
}

TEST(PcieReplayRate, FollowsDcgmsPerLaneTable) {
  using gpuenv::validate::expected_pcie_replays_per_minute;
  EXPECT_EQ(expected_pcie_replays_per_minute(5, 16), 31);  // ceil(1.92 x 16)
  EXPECT_EQ(expected_pcie_replays_per_minute(4, 16), 16);  // ceil(0.96 x 16)
  EXPECT_EQ(expected_pcie_replays_per_minute(3, 16), 8);   // ceil(0.48 x 16)
  EXPECT_EQ(expected_pcie_replays_per_minute(1, 1), 1);    // ceil(0.15)
  EXPECT_EQ(expected_pcie_replays_per_minute(7, 16), expected_pcie_replays_per_minute(6, 16));
  EXPECT_EQ(expected_pcie_replays_per_minute(0, 16), 0);
}

TEST(CudaVersionText, SplitsTheDriverApiNumber) {
  EXPECT_EQ(gpuenv::validate::cuda_version_text(12040), "12.4");
  EXPECT_EQ(gpuenv::validate::cuda_version_text(11080), "11.8");
  EXPECT_EQ(gpuenv::validate::cuda_version_text(12100), "12.10");
  EXPECT_EQ(gpuenv::validate::cuda_version_text(0), "");
}

TEST(DriverFloor, ComparesNumerically) {
  using gpuenv::validate::judge_driver_floor;
  EXPECT_EQ(judge_driver_floor("550.54.15", "525.60.13").status, CheckStatus::pass);
  EXPECT_EQ(judge_driver_floor("535.104.05", "535.54.03").status, CheckStatus::pass);
  auto old = judge_driver_floor("470.182.03", "525.60.13");
  EXPECT_EQ(old.status, CheckStatus::fail);
  EXPECT_EQ(old.code, "driver_too_old");
  EXPECT_NE(old.message.find("470.182.03"), std::string::npos);
  EXPECT_NE(old.message.find("525.60.13"), std::string::npos);
}

TEST(DriverFloor, UnreadableVersionsAreNamed) {
  using gpuenv::validate::judge_driver_floor;
  EXPECT_EQ(judge_driver_floor("", "525.60.13").code, "driver_version_unknown");
  EXPECT_EQ(judge_driver_floor("garbage", "525.60.13").status, CheckStatus::warn);
  EXPECT_EQ(judge_driver_floor("550.54.15", "5x5").code, "lock_invalid");
}

TEST(DriverCuda, DriverAtOrAboveTheImagesCudaPasses) {
  using gpuenv::validate::judge_driver_cuda;
  EXPECT_EQ(judge_driver_cuda(12040, "12.4", std::nullopt).status, CheckStatus::pass);
  EXPECT_EQ(judge_driver_cuda(12040, "12.4.1", std::nullopt).status, CheckStatus::pass);
  EXPECT_EQ(judge_driver_cuda(12060, "12.4", std::nullopt).status, CheckStatus::pass);
  EXPECT_EQ(judge_driver_cuda(12000, "11.8", std::nullopt).status, CheckStatus::pass);
}

TEST(DriverCuda, OlderDriverFailsUnlessForwardCompatibilityIsPresent) {
  using gpuenv::validate::judge_driver_cuda;
  auto unknown = judge_driver_cuda(12020, "12.4", std::nullopt);
  EXPECT_EQ(unknown.status, CheckStatus::fail);
  EXPECT_EQ(unknown.code, "driver_cuda_too_old");
  EXPECT_EQ(judge_driver_cuda(12020, "12.4", false).code, "driver_cuda_too_old");
  auto compat = judge_driver_cuda(12020, "12.4", true);
  EXPECT_EQ(compat.status, CheckStatus::warn);
  EXPECT_EQ(compat.code, "forward_compat_used");
}

TEST(DriverCuda, UnknownDriverCudaWarnsAndBadLockFails) {
  using gpuenv::validate::judge_driver_cuda;
  EXPECT_EQ(judge_driver_cuda(0, "12.4", std::nullopt).code, "driver_version_unknown");
  EXPECT_EQ(judge_driver_cuda(12040, "twelve", std::nullopt).code, "lock_invalid");
}

TEST(UnitSuffix, NamesMetricsByUnit) {
  EXPECT_EQ(gpuenv::validate::unit_suffix("GB/s"), "gbs");
  EXPECT_EQ(gpuenv::validate::unit_suffix("TFLOPS"), "tflops");
  EXPECT_EQ(gpuenv::validate::unit_suffix("ms"), "ms");
  EXPECT_EQ(gpuenv::validate::unit_suffix(""), "value");
  EXPECT_STREQ(gpuenv::validate::low_code("TFLOPS"), "tflops_low");
  EXPECT_STREQ(gpuenv::validate::low_code("GB/s"), "bandwidth_low");
}

// Derived references (issue 14).

ThresholdTable derived_table() {
  ThresholdTable t = table();
  t.derived.host_device = gpuenv::validate::SourcedFraction{0.8, "rule"};
  t.derived.pcie = {{4, 16, "128b/130b", 128.0 / 130.0, "pci-sig"}, {5, 32, "128b/130b", 128.0 / 130.0, "pci-sig"}};
  t.derived.gemm = gpuenv::validate::SourcedFraction{0.6, "rule"};
  t.derived.nvlink = gpuenv::validate::SourcedFraction{0.8, "rule"};
  t.gpus[0].dense_peaks["gemm_tflops.tf32"] = {494.5, "TFLOPS", "datasheet"};
  t.gpus[0].dense_peaks["gemm_tflops.bf16"] = {989.5, "TFLOPS", "datasheet"};
  t.gpus[0].nvlink_link = gpuenv::validate::Reference{25, "GB/s", "nvlink page"};
  return t;
}

gpuenv::validate::PcieLink link(int gen, int width) { return {gen, gen, width, width}; }

TEST(DerivedReference, HostDeviceFollowsTheLinksGenerationAndWidth) {
  using gpuenv::validate::host_device_reference;
  const ThresholdTable t = derived_table();
  auto x16 = host_device_reference(&t, 0x2330, "h2d_bandwidth", link(5, 16), "off");
  ASSERT_TRUE(x16.reference);
  EXPECT_DOUBLE_EQ(x16.reference->value, 0.8 * 32 * 16 * 128.0 / 130.0 / 8);  // 50.4 GB/s
  EXPECT_NE(x16.reference->basis.find("PCIe Gen5 x16"), std::string::npos) << x16.reference->basis;
  EXPECT_NE(x16.reference->source.find("pci-sig"), std::string::npos) << x16.reference->source;
  auto x8 = host_device_reference(&t, 0x2330, "h2d_bandwidth", link(5, 8), "off");
  ASSERT_TRUE(x8.reference);
  EXPECT_DOUBLE_EQ(x8.reference->value, x16.reference->value / 2);
  auto gen4 = host_device_reference(&t, 0x27b8, "d2h_bandwidth", link(4, 16), "off");  // a model the table lacks
  ASSERT_TRUE(gen4.reference) << "the rule depends on the link, not on the model";
  EXPECT_DOUBLE_EQ(gen4.reference->value, x16.reference->value / 2);
  // The slot, not the idle link: a Gen5 GPU idling at Gen1 still gets the Gen5 reference.
  auto idle = host_device_reference(&t, 0x2330, "h2d_bandwidth", gpuenv::validate::PcieLink{1, 5, 16, 16}, "off");
  EXPECT_DOUBLE_EQ(idle.reference->value, x16.reference->value);
}

TEST(DerivedReference, WithConfidentialComputingHostCopiesAreJudgedByTheCcFigureNeverTheModelsOwn) {
  using gpuenv::validate::host_device_reference;
  ThresholdTable t = derived_table();
  gpuenv::validate::GpuThresholds h100;
  h100.model = "H100 SXM";
  h100.pci_device_ids = {0x9999};  // a model of its own
  h100.references["h2d_bandwidth"] = {50.0, "GB/s", "a non-CC measurement", ""};
  t.gpus.push_back(h100);
  EXPECT_DOUBLE_EQ(host_device_reference(&t, 0x9999, "h2d_bandwidth", link(5, 16), "off").reference->value, 50.0);
  auto none = host_device_reference(&t, 0x9999, "h2d_bandwidth", link(5, 16), "on");
  EXPECT_FALSE(none.reference) << "the model's own figure is a non-CC one";
  t.derived.host_device_confidential = gpuenv::validate::Reference{4.0, "GB/s", "a CC measurement", ""};
  for (const char* state : {"on", "devtools"}) {
    auto cc = host_device_reference(&t, 0x9999, "d2h_bandwidth", link(5, 16), state);
    ASSERT_TRUE(cc.reference) << state;
    EXPECT_DOUBLE_EQ(cc.reference->value, 4.0);
    EXPECT_EQ(cc.reference->source, "a CC measurement");
    EXPECT_NE(cc.reference->basis.find("bounce buffers"), std::string::npos);
  }
}

TEST(DerivedReference, HostDeviceHasNoneWithConfidentialComputingOrAnUnknownLink) {
  using gpuenv::validate::host_device_reference;
  const ThresholdTable t = derived_table();
  auto cc = host_device_reference(&t, 0x2330, "h2d_bandwidth", link(5, 16), "on");
  EXPECT_FALSE(cc.reference);
  EXPECT_NE(cc.why_none.find("bounce buffers"), std::string::npos) << cc.why_none;
  auto gen6 = host_device_reference(&t, 0x2330, "h2d_bandwidth", link(6, 16), "off");
  EXPECT_FALSE(gen6.reference);
  EXPECT_NE(gen6.why_none.find("Gen6"), std::string::npos) << gen6.why_none;
  auto none = host_device_reference(&t, 0x2330, "h2d_bandwidth", std::nullopt, "off");
  EXPECT_FALSE(none.reference);
  const auto j = judge_samples("h2d_bandwidth", gbs({30, 31, 32}), cc);
  EXPECT_EQ(j.status, CheckStatus::measured);
  EXPECT_NE(j.message.find("not judged: confidential computing is on"), std::string::npos) << j.message;
  ThresholdTable listed = derived_table();
  listed.gpus[0].references["h2d_bandwidth"] = {40, "GB/s", "measured"};
  EXPECT_DOUBLE_EQ(host_device_reference(&listed, 0x2330, "h2d_bandwidth", link(5, 16), "off").reference->value, 40)
      << "a listed reference wins over the derived one";
}

TEST(DerivedReference, GemmIsTheStatedFractionOfTheDensePeak) {
  using gpuenv::validate::gemm_reference;
  const ThresholdTable t = derived_table();
  auto tf32 = gemm_reference(&t, 0x2330, "gemm_tflops.tf32");
  ASSERT_TRUE(tf32.reference);
  EXPECT_DOUBLE_EQ(tf32.reference->value, 0.6 * 494.5);
  EXPECT_DOUBLE_EQ(gemm_reference(&t, 0x2330, "gemm_tflops.bf16").reference->value, 700)
      << "the listed bf16 reference wins";
  auto fp64 = gemm_reference(&t, 0x2330, "gemm_tflops.fp64");
  EXPECT_FALSE(fp64.reference);
  EXPECT_NE(fp64.why_none.find("no sourced dense peak"), std::string::npos) << fp64.why_none;
  const auto j = judge_samples("gemm_tflops.tf32", Samples{{370, 372, 374}, "TFLOPS", "cublasLt", true}, tf32, "tf32.");
  EXPECT_EQ(j.status, CheckStatus::pass);
  EXPECT_NE(j.message.find("0.60 x dense peak 494.5 TFLOPS"), std::string::npos) << j.message;
  const auto slow = judge_samples("gemm_tflops.tf32", Samples{{200, 201, 202}, "TFLOPS", "cublasLt", true}, tf32);
  EXPECT_EQ(slow.status, CheckStatus::fail) << "below 0.75 x 0.6 x 494.5 = 222.5";
}

TEST(DerivedReference, NvlinkOnlyThroughNvswitch) {
  using gpuenv::validate::nvlink_reference;
  const ThresholdTable t = derived_table();
  auto sw = nvlink_reference(&t, 0x2330, "p2p_bandwidth", 18, true);
  ASSERT_TRUE(sw.reference);
  EXPECT_DOUBLE_EQ(sw.reference->value, 0.8 * 18 * 25);
  EXPECT_DOUBLE_EQ(nvlink_reference(&t, 0x2330, "nccl_allreduce", 12, true).reference->value, 0.8 * 12 * 25);
  EXPECT_FALSE(nvlink_reference(&t, 0x2330, "p2p_bandwidth", 18, false).reference);
  EXPECT_FALSE(nvlink_reference(&t, 0x2330, "p2p_bandwidth", 0, true).reference);
  EXPECT_FALSE(nvlink_reference(&t, 0x1234, "p2p_bandwidth", 18, true).reference) << "no link rate for the model";
}

}  // namespace

TEST(MeasuredFigure, KeepsOneDecimalFromOneUpAndThreeDigitsBelow) {
  EXPECT_EQ(gpuenv::validate::measured(4205.04), "4205.0");
  EXPECT_EQ(gpuenv::validate::measured(1.0), "1.0");
  EXPECT_EQ(gpuenv::validate::measured(0.0), "0.0");
  EXPECT_EQ(gpuenv::validate::measured(0.00123456), "0.00123") << "a slow GEMM on a small GPU is not 0.0 TFLOPS";
  EXPECT_EQ(gpuenv::validate::measured(0.5), "0.5");
}

namespace {

gpuenv::validate::MigDevice h100_instance(const std::string& profile, std::uint64_t memory_mib, int sms) {
  gpuenv::validate::MigDevice d;
  d.uuid = "MIG-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";
  d.profile = profile;
  d.memory_bytes = memory_mib << 20U;
  d.parent_memory_bytes = 81559ULL << 20U;  // an H100 SXM5 80GB as NVML reports it
  d.sm_count = sms;
  return d;
}

ThresholdTable table_with_sms() {
  ThresholdTable t = table();
  t.gpus.front().sm_count = gpuenv::validate::Reference{132, "SMs", "H100 datasheet: 132 SMs", ""};
  return t;
}

}  // namespace

TEST(MigScaling, MemorySlicesAreTheInstancesEighthsOfTheGpusMemory) {
  using gpuenv::validate::mig_memory_slices;
  EXPECT_EQ(mig_memory_slices(h100_instance("1g.10gb", 9984, 16)), 1);
  EXPECT_EQ(mig_memory_slices(h100_instance("2g.20gb", 20224, 32)), 2);
  EXPECT_EQ(mig_memory_slices(h100_instance("3g.40gb", 40704, 60)), 4);
  EXPECT_EQ(mig_memory_slices(h100_instance("4g.40gb", 40704, 64)), 4);
  EXPECT_EQ(mig_memory_slices(h100_instance("7g.80gb", 80896, 132)), 8);
  auto unknown = h100_instance("1g.10gb", 9984, 16);
  unknown.parent_memory_bytes = 0;
  EXPECT_EQ(mig_memory_slices(unknown), 0);
}

TEST(MigScaling, AHealthySliceFailsTheWholeGpuReferenceButPassesItsScaledOne) {
  const ThresholdTable t = table_with_sms();
  const auto slice = h100_instance("1g.10gb", 9984, 16);
  const auto healthy = gbs({372.0, 371.2, 373.5});  // about 1/8 of a healthy H100's HBM bandwidth
  const auto whole = find_reference(&t, 0x2330, "hbm_bandwidth");
  EXPECT_EQ(judge_samples("hbm_bandwidth", healthy, whole).status, CheckStatus::fail)
      << "why scaling is needed: 372 GB/s is 12% of the whole GPU's 3000";
  const ReferenceRule scaled = gpuenv::validate::mig_scaled_rule(whole, &t, 0x2330, slice, "hbm_bandwidth");
  ASSERT_TRUE(scaled.reference);
  EXPECT_DOUBLE_EQ(scaled.reference->value, 375.0);
  EXPECT_NE(scaled.reference->basis.find("1/8 of H100 SXM5 80GB hbm_bandwidth 3000.0 GB/s: 1 of 8 memory slices"),
            std::string::npos)
      << scaled.reference->basis;
  EXPECT_NE(scaled.reference->source.find("mig-user-guide"), std::string::npos) << scaled.reference->source;
  const auto pass = judge_samples("hbm_bandwidth", healthy, scaled);
  EXPECT_EQ(pass.status, CheckStatus::pass) << pass.message;
  EXPECT_NE(pass.message.find("1 of 8 memory slices"), std::string::npos) << pass.message;
  const auto degraded = judge_samples("hbm_bandwidth", gbs({201.0, 200.2, 199.5}), scaled);
  EXPECT_EQ(degraded.status, CheckStatus::fail) << degraded.message;
  EXPECT_EQ(degraded.code, "bandwidth_low");
}

TEST(MigScaling, GemmReferencesScaleBySmsAndNeedTheModelsSmCount) {
  const ThresholdTable t = table_with_sms();
  const auto slice = h100_instance("1g.10gb", 9984, 16);
  const ReferenceRule scaled =
      gpuenv::validate::mig_scaled_rule(find_reference(&t, 0x2330, "gemm_tflops.bf16"), &t, 0x2330, slice, "gemm_tflops.bf16");
  ASSERT_TRUE(scaled.reference);
  EXPECT_DOUBLE_EQ(scaled.reference->value, 700.0 * 16 / 132);
  EXPECT_NE(scaled.reference->basis.find("16 of the GPU's 132 SMs"), std::string::npos) << scaled.reference->basis;
  Samples healthy = gbs({86.0, 85.7, 86.3});
  healthy.unit = "TFLOPS";
  EXPECT_EQ(judge_samples("gemm_tflops.bf16", healthy, scaled).status, CheckStatus::pass);
  Samples degraded = healthy;
  degraded.values = {50.1, 49.8, 50.3};
  EXPECT_EQ(judge_samples("gemm_tflops.bf16", degraded, scaled).status, CheckStatus::fail);

  const ThresholdTable no_sms = table();
  const ReferenceRule unscaled = gpuenv::validate::mig_scaled_rule(find_reference(&no_sms, 0x2330, "gemm_tflops.bf16"),
                                                                   &no_sms, 0x2330, slice, "gemm_tflops.bf16");
  EXPECT_FALSE(unscaled.reference) << "never judged against the whole GPU";
  EXPECT_NE(unscaled.why_none.find("no sm_count"), std::string::npos) << unscaled.why_none;
  EXPECT_EQ(judge_samples("gemm_tflops.bf16", healthy, unscaled).status, CheckStatus::measured);
  const ReferenceRule other = gpuenv::validate::mig_scaled_rule(find_reference(&t, 0x2330, "hbm_bandwidth"), &t, 0x2330,
                                                                slice, "h2d_bandwidth");
  EXPECT_FALSE(other.reference);
}
