// Named real-world scenarios against the real catalog: what a fleet operator would ask, and what must come out.
#include <gtest/gtest.h>

#include "fakes/catalog_fixture.hpp"

namespace {

using gpuenv::resolver::Rule;
using gpuenv::resolver::Version;

struct Scenario {
  const char* name;
  const char* yaml;
  bool ok;
  // Expectations; empty = not checked.
  const char* framework_version_prefix = "";  // e.g. "2.5.1"
  const char* variant = "";                    // e.g. "cu124"
  const char* cuda_prefix = "";                // e.g. "12.4"
  const char* min_variant_cuda = "";           // the framework variant's CUDA is at least this
  const char* driver_min_at_least = "";
  const char* python = "";
  int forward_compat = -1;                     // -1 unchecked, 0/1
  const char* conflict_text = "";              // substring of a conflict or suggestion
  std::vector<Rule> rules = {};                // every one must appear among the conflicts
};

void PrintTo(const Scenario& s, std::ostream* os) { *os << s.name; }

std::string all_text(const gpuenv::resolver::Resolution& r) { return gpuenv::testing::conflicts_text(r); }

const std::vector<Scenario>& scenarios() {
  static const std::vector<Scenario> s = {
      {"torch_2_5_1_on_h100_with_driver_535", "frameworks: {torch: '2.5.1'}\ngpu: {models: [H100], driver: '535.183.01'}\n", true,
       "2.5.1", "cu124", "12.4", "", "525.60.13", "3.11", 0},
      {"rtx_5090_needs_a_blackwell_variant", "frameworks: {torch: latest}\ngpu: {models: [RTX 5090], driver: '570.86.16'}\n", true, "", "",
       "", "12.8", "570.86.16"},
      {"rtx_5090_on_r560_is_impossible", "frameworks: {torch: latest}\ngpu: {models: [RTX 5090], driver: '560.35.03'}\n", false, "", "", "",
       "", "", "", -1, "RTX 5090 needs driver >= 570.86.16", {Rule::gpu_driver}},
      {"rtx_5090_with_torch_2_5_has_no_kernels", "frameworks: {torch: '2.5.1'}\ngpu: {models: [RTX 5090], driver: '575.57.08'}\n", false,
       "", "", "", "", "", "", -1, "RTX 5090 is sm_120", {Rule::arch_cuda}},
      {"cuda_13_on_v100_is_impossible", "cuda: '13'\ngpu: {models: [V100], driver: '580.65.06'}\n", false, "", "", "", "", "", "", -1,
       "V100 is sm_70", {Rule::arch_cuda}},
      {"tensorflow_2_15_with_python_3_12_is_impossible", "base: ubuntu:24.04\nframeworks: {tensorflow: '2.15'}\ngpu: {models: [A100]}\n",
       false, "", "", "", "", "", "", -1, "tensorflow 2.15.0 supports Python 3.9 to 3.11", {Rule::python_framework}},
      {"jax_cuda13_plugin_on_driver_550_is_impossible", "cuda: '13'\nframeworks: {jax: latest}\ngpu: {models: [H100], driver: '550.54.15'}\n",
       false, "", "", "", "", "", "", -1, "forward compatibility does not apply", {Rule::driver}},
      {"torch_2_11_on_driver_515_explains_and_suggests", "frameworks: {torch: '2.11'}\ngpu: {models: [A100], driver: '515.105.01'}\n", false,
       "", "", "", "", "", "", -1, "torch 2.11.0 needs CUDA >= 12.6 and so a driver >= 525.60.13; driver 515.105.01 supports CUDA <= 11.7"},
      {"torch_2_11_on_driver_515_suggests_an_older_torch", "frameworks: {torch: '2.11'}\ngpu: {models: [A100], driver: '515.105.01'}\n",
       false, "", "", "", "", "", "", -1, "suggest: torch 2.7.1+cu118"},
      {"torch_2_11_on_driver_515_suggests_the_smallest_upgrade", "frameworks: {torch: '2.11'}\ngpu: {models: [A100], driver: '515.105.01'}\n",
       false, "", "", "", "", "", "", -1, "upgrade the driver to >= 525.60.13 for torch 2.11.0"},
      {"torch_latest_on_driver_515_falls_back_to_cuda_11", "frameworks: {torch: latest}\ngpu: {models: [A100], driver: '515.105.01'}\n", true,
       "2.7.1", "cu118", "11.8", "", "", "", 0},
      {"torch_latest_on_h100_r535_uses_minor_version_compat", "frameworks: {torch: latest}\ngpu: {models: [H100], driver: '535.183.01'}\n",
       true, "", "", "12", "12.6", "525.60.13", "", 0},
      {"torch_latest_on_h100_r580", "frameworks: {torch: latest}\ngpu: {models: [H100], driver: '580.95.05'}\n", true, "2.15.0", "cu132",
       "13.2", "", "580", "3.11", 0},  // cuDNN 9.26.0's own floor is not recorded: only CUDA 13's
      {"torch_2_15_on_python_3_11_base", "frameworks: {torch: '2.15'}\ngpu: {models: [H100], driver: '595.58.03'}\n", true, "2.15.0",
       "cu132", "13.2", "", "", "3.11"},
      {"torch_2_15_on_r580_needs_no_ptx", "frameworks: {torch: '2.15'}\ngpu: {models: [H100], driver: '580.65.06'}\n", true, "2.15.0", "cu132",
       "", "", "580", "", 0},
      {"cuda_13_on_r535_data_center_uses_forward_compat", "cuda: '13.0'\ngpu: {models: [H100], driver: '535.183.01'}\n", true, "", "", "13.0",
       "", "", "", 1},
      {"cuda_13_on_r535_consumer_gpu_is_impossible", "cuda: '13.0'\ngpu: {models: [RTX 4090], driver: '535.183.01'}\n", false, "", "", "", "",
       "", "", -1, "RTX 4090 is not a data-center GPU", {Rule::driver}},
      {"confidential_on_a100_is_impossible", "frameworks: {torch: latest}\ngpu: {models: [A100], confidential: required}\n", false, "", "",
       "", "", "", "", -1, "A100 does not support it", {Rule::confidential}},
      {"confidential_on_h100_needs_r550", "frameworks: {torch: latest}\ngpu: {models: [H100], driver: '535.183.01', confidential: required}\n",
       false, "", "", "", "", "", "", -1, "confidential computing on H100 needs driver >= 550.54.15", {Rule::confidential}},
      {"confidential_on_h100_with_r550", "frameworks: {torch: latest}\ngpu: {models: [H100], driver: '550.54.15', confidential: required}\n",
       true, "", "", "", "", "550.54.15"},
      {"confidential_allowed_does_not_raise_the_floor", "frameworks: {torch: '2.5.1'}\ngpu: {models: [H100], confidential: allowed}\n", true,
       "2.5.1", "cu124", "", "", "525.60.13"},
      {"confidential_by_arch_only_cannot_be_checked", "gpu: {archs: [sm_90], confidential: required}\n", false, "", "", "", "", "", "", -1,
       "by architecture only", {Rule::confidential}},
      {"plain_cuda_12_on_l4", "cuda: '12.*'\ngpu: {models: [L4], driver: '550.54.15'}\n", true, "", "", "12.9"},
      {"plain_cuda_13_on_t4", "cuda: '13'\ngpu: {models: [T4], driver: '580.65.06'}\n", true, "", "", "13"},
      {"plain_cuda_11_on_a100_r470", "cuda: '11.8'\ngpu: {models: [A100], driver: '470.199.02'}\n", true, "", "", "11.8", "", "450.80.02", "",
       0},
      {"h200_on_r535_is_too_old_for_the_gpu", "frameworks: {torch: latest}\ngpu: {models: [H200], driver: '535.183.01'}\n", false, "", "", "",
       "", "", "", -1, "H200 needs driver >= 550.90.07", {Rule::gpu_driver}},
      {"b200_with_torch_latest", "frameworks: {torch: latest}\ngpu: {models: [B200], driver: '580.65.06'}\n", true, "", "", "", "12.8",
       "570.86.15"},
      {"b200_with_torch_2_5_is_impossible", "frameworks: {torch: '2.5'}\ngpu: {models: [B200], driver: '580.65.06'}\n", false, "", "", "", "",
       "", "", -1, "B200 is sm_100"},
      {"b300_runs_sm_100_code", "frameworks: {torch: '2.9.1'}\ngpu: {models: [B300], driver: '580.82.07'}\n", true, "2.9.1"},
      {"v100_torch_latest_keeps_volta", "frameworks: {torch: latest}\ngpu: {models: [V100], driver: '580.65.06'}\n", true, "", "cu126", "12.6"},
      {"rtx_4090_runs_sm_86_code_of_torch_2_0", "frameworks: {torch: '2.0.1'}\ngpu: {models: [RTX 4090], driver: '525.60.13'}\n", true, "2.0.1",
       "cu117"},
      {"mixed_a100_and_l4_fleet_tensorflow", "base: ubuntu:22.04\nframeworks: {tensorflow: latest}\ngpu: {models: [A100, L4], driver: '550.54.15'}\n",
       true, "", "cuda12", "", "", "525.78.01", "3.10"},
      {"tensorflow_2_10_is_cuda_11", "base: ubuntu:22.04\nframeworks: {tensorflow: '2.10'}\ngpu: {models: [T4], driver: '470.199.02'}\n", true,
       "2.10.0", "cuda11", "11.2"},
      {"tensorflow_2_17_on_rtx_5090_is_impossible", "frameworks: {tensorflow: '2.17'}\ngpu: {models: [RTX 5090], driver: '575.57.08'}\n",
       false, "", "", "", "", "", "", -1, "RTX 5090 is sm_120", {Rule::arch_cuda}},
      {"jax_on_debian_11_is_limited_to_python_3_9", "base: debian:11\nframeworks: {jax: latest}\ngpu: {models: [A100], driver: '550.54.15'}\n",
       true, "0.4.30", "cuda12", "", "", "", "3.9"},
      {"jax_cuda12_on_t4", "cuda: '12.*'\nframeworks: {jax: latest}\ngpu: {models: [T4], driver: '550.54.15'}\n", true, "", "cuda12"},
      {"jax_cuda13_on_v100_is_impossible", "cuda: '13'\nframeworks: {jax: latest}\ngpu: {models: [V100], driver: '580.65.06'}\n", false, "",
       "", "", "", "", "", -1, "V100 is sm_70", {Rule::arch_cuda}},
      {"python_3_13_on_debian_12_is_impossible", "python: '3.13'\nframeworks: {torch: latest}\ngpu: {models: [H100]}\n", false, "", "", "", "",
       "", "", -1, "debian:12 can use Python 3.11", {Rule::python_constraint}},
      {"torch_on_ubuntu_26_04_needs_python_3_14_support", "base: ubuntu:26.04\nframeworks: {torch: latest}\ngpu: {models: [H100], driver: '580.65.06'}\n",
       true, "", "", "", "", "", "3.14"},
      {"torch_with_cudnn_8_picks_an_older_release", "cudnn: '8'\nframeworks: {torch: latest}\ngpu: {models: [A100], driver: '535.183.01'}\n",
       true, "2.3.1", "cu121"},
      {"torch_with_cuda_11_8_picks_newest_cu118", "cuda: '11.8'\nframeworks: {torch: latest}\ngpu: {models: [A100], driver: '535.183.01'}\n",
       true, "2.7.1", "cu118"},
      {"driver_range_uses_its_lowest_driver", "frameworks: {torch: latest}\ngpu: {models: [H100], driver: '>=550.54.15,<560'}\n", true, "", "",
       "12"},
      {"unknown_torch_version_is_named", "frameworks: {torch: '3.0'}\n", false, "", "", "", "", "", "", -1,
       "no torch release in the catalog matches '3.0'"},
      {"torch_and_jax_share_one_cuda_major", "frameworks: {torch: '2.9.1', jax: latest}\ngpu: {models: [H100], driver: '550.54.15'}\n", true,
       "2.9.1", "", "12"},
      {"rtx_pro_6000_server_confidential", "frameworks: {torch: latest}\ngpu: {models: [RTX PRO 6000 Blackwell Server], driver: '580.65.06', confidential: required}\n",
       true, "", "", "", "12.8"},
      {"no_gpu_no_driver_resolves_and_says_so", "frameworks: {torch: '2.5.1'}\n", true, "2.5.1", "cu124"},
  };
  return s;
}

class RealWorld : public ::testing::TestWithParam<Scenario> {};

TEST_P(RealWorld, Resolves) {
  const Scenario& s = GetParam();
  const auto r = gpuenv::testing::resolve_yaml(std::string("name: scenario\n") + s.yaml);
  const std::string text = all_text(r);
  ASSERT_EQ(r.ok, s.ok) << text;
  if (s.ok) {
    if (*s.framework_version_prefix) {
      ASSERT_FALSE(r.frameworks.empty());
      EXPECT_TRUE(r.frameworks[0].version.has_prefix(*Version::parse(s.framework_version_prefix))) << r.frameworks[0].version.str();
    }
    if (*s.variant) {
      ASSERT_FALSE(r.frameworks.empty());
      EXPECT_EQ(r.frameworks[0].variant, s.variant);
    }
    if (*s.cuda_prefix) EXPECT_TRUE(r.cuda->has_prefix(*Version::parse(s.cuda_prefix))) << r.cuda->str();
    if (*s.min_variant_cuda) {
      ASSERT_FALSE(r.frameworks.empty());
      EXPECT_GE(r.frameworks[0].cuda, *Version::parse(s.min_variant_cuda)) << r.frameworks[0].variant;
    }
    if (*s.driver_min_at_least) EXPECT_GE(r.driver_min, *Version::parse(s.driver_min_at_least)) << r.driver_min.str();
    if (*s.python) EXPECT_EQ(r.python->str(), s.python);
    if (s.forward_compat >= 0) EXPECT_EQ(r.forward_compat, s.forward_compat == 1);
  }
  if (*s.conflict_text) EXPECT_NE(text.find(s.conflict_text), std::string::npos) << text;
  for (Rule rule : s.rules) {
    bool found = false;
    for (const auto& c : r.conflicts) found = found || c.rule == rule;
    EXPECT_TRUE(found) << "missing rule " << gpuenv::resolver::rule_name(rule) << "\n" << text;
  }
}

INSTANTIATE_TEST_SUITE_P(Scenarios, RealWorld, ::testing::ValuesIn(scenarios()),
                         [](const ::testing::TestParamInfo<Scenario>& i) { return std::string(i.param.name); });

TEST(RealWorldCount, AtLeastFortyScenarios) { EXPECT_GE(scenarios().size(), 40u); }

}  // namespace

namespace {

TEST(MultiFramework, TorchAndTensorflowDisagreeOnCudnn) {
  // TensorFlow 2.18 is tested with cuDNN 9.3; torch 2.9 bundles 9.10.2: one image cannot hold both.
  const auto r = gpuenv::testing::resolve_yaml(
      "name: x\nbase: ubuntu:22.04\nframeworks: {torch: '2.9.1', tensorflow: '2.18'}\ngpu: {models: [H100], driver: '550.54.15'}\n");
  ASSERT_FALSE(r.ok);
  bool found = false;
  for (const auto& c : r.conflicts) found = found || c.rule == Rule::cudnn_conflict;
  EXPECT_TRUE(found) << gpuenv::testing::conflicts_text(r);
}

}  // namespace
