#include "resolver/spec.hpp"

#include <gtest/gtest.h>

using gpuenv::ErrorKind;
using gpuenv::resolver::Confidential;
using gpuenv::resolver::parse_spec;

namespace {

gpuenv::Error error_of(const std::string& yaml) {
  auto r = parse_spec(yaml, "spec.yaml");
  EXPECT_FALSE(r.ok()) << yaml;
  if (r.ok()) return {};
  EXPECT_EQ(r.error().kind, ErrorKind::spec);
  return r.error();
}

TEST(SpecParser, ReadsEveryField) {
  auto r = parse_spec(R"(schema: gpuenv-spec-v1
name: my-image
base: ubuntu:22.04
python: "3.10"
cuda: ">=12.1,<13"
cudnn: "9"
frameworks:
  jax: "0.4.*"
  torch: 2.5.1
gpu:
  models: [H100, "RTX 4090"]
  driver: "550.54.15"
  confidential: allowed
packages:
  apt: [curl, libgomp1=12.2.0-14]
  pip: ["numpy<2"]
image: {format: oci-archive, tag: "reg/x:1"}
validate:
  level: long
  thresholds: {hbm_bandwidth: 0.8}
)", "spec.yaml");
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->name, "my-image");
  EXPECT_EQ(r->base(), "ubuntu:22.04");
  EXPECT_TRUE(r->python_given && r->cuda_given && r->cudnn_given);
  ASSERT_EQ(r->frameworks.size(), 2u);
  EXPECT_EQ(r->frameworks[0].name, "torch");  // canonical order, not file order
  EXPECT_EQ(r->frameworks[1].name, "jax");
  EXPECT_EQ(r->gpu.models.size(), 2u);
  EXPECT_EQ(r->gpu.confidential, Confidential::allowed);
  EXPECT_EQ(r->gpu.driver->lower_bound()->str(), "550.54.15");
  EXPECT_EQ(r->apt_packages.size(), 2u);
  EXPECT_EQ(r->image_format, gpuenv::resolver::ImageFormat::oci_archive);
  EXPECT_EQ(to_string(r->image_format), "oci-archive");
  EXPECT_EQ(r->validate_level, "long");
  EXPECT_DOUBLE_EQ(r->validate_thresholds.at("hbm_bandwidth"), 0.8);
}

TEST(SpecParser, ReadsTheDataReadThresholdAsBytesPerSecond) {
  const std::string head = "schema: gpuenv-spec-v1\nname: x\nbase: debian:12\n";
  auto r = parse_spec(head + "validate: {data_read_min: 5GB/s}\n", "spec.yaml");
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  ASSERT_TRUE(r->validate_data_read_min.has_value());
  EXPECT_DOUBLE_EQ(*r->validate_data_read_min, 5e9);
  auto gib = parse_spec(head + "validate:\n  level: quick\n  data_read_min: 1.5GiB/s\n", "spec.yaml");
  ASSERT_TRUE(gib.ok()) << gib.error().to_string();
  EXPECT_DOUBLE_EQ(*gib->validate_data_read_min, 1.5 * 1073741824.0);
  auto none = parse_spec(head, "spec.yaml");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->validate_data_read_min.has_value());
  for (const char* bad : {"5", "5Gb/s", "0GB/s", "-1GB/s", "fast", "[5GB/s]"}) {
    const auto e = error_of(head + "validate: {data_read_min: " + bad + "}\n");
    EXPECT_NE(e.where.find("spec.yaml:4"), std::string::npos) << bad << ": " << e.to_string();
    EXPECT_FALSE(e.hint.empty()) << bad;
  }
  EXPECT_NE(error_of(head + "validate: {data_read_min: 8Gb/s}\n").message.find("bits"), std::string::npos);
}

TEST(SpecParser, DefaultsForAMinimalSpec) {
  auto r = parse_spec("name: x\n", "s.yaml");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->base(), "debian:12");
  EXPECT_EQ(r->gpu.confidential, Confidential::off);
  EXPECT_TRUE(r->frameworks.empty());
}

TEST(SpecParser, ABaseMappingNamesTheDistroAndTheVariant) {
  auto slim = parse_spec("base: {distro: 'ubuntu:24.04', variant: slim}\n", "s.yaml");
  ASSERT_TRUE(slim.ok()) << slim.error().to_string();
  EXPECT_EQ(slim->base(), "ubuntu:24.04");
  EXPECT_EQ(slim->base_variant, "slim");
  auto plain = parse_spec("base: {distro: debian:12}\n", "s.yaml");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->base_variant, "required");
  EXPECT_EQ(parse_spec("base: debian:11\n", "s.yaml")->base_variant, "required");
  const auto bad = error_of("name: x\nbase: {distro: debian:12, variant: skinny}\n");
  EXPECT_EQ(bad.id, "spec.bad_base");
  EXPECT_EQ(bad.where, "spec.yaml:2:36");
  EXPECT_NE(bad.message.find("required, slim"), std::string::npos) << bad.message;
  EXPECT_EQ(error_of("base: {variant: slim}\n").id, "spec.bad_base");
  EXPECT_EQ(error_of("base: {distro: 'docker://r.example/x:1', variant: slim}\n").id, "spec.bad_base");
  EXPECT_EQ(error_of("base: {distro: debian}\n").id, "spec.bad_base");
  EXPECT_EQ(error_of("base: {distro: debian:12, flavour: slim}\n").id, "spec.unknown_key");
}

TEST(SpecParser, ArchsAcceptSeveralSpellings) {
  auto r = parse_spec("gpu:\n  archs: [sm_90, sm_90a, '8.6', sm_120f, 75]\n", "s.yaml");
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->gpu.archs, (std::vector<int>{90, 90, 86, 120, 75}));
}

TEST(SpecParser, RejectsUnknownTopLevelKeyWithSuggestion) {
  auto e = error_of("name: x\nframeworx:\n  torch: 2.5\n");
  EXPECT_EQ(e.id, "spec.unknown_key");
  EXPECT_EQ(e.where, "spec.yaml:2:1");
  EXPECT_NE(e.hint.find("did you mean 'frameworks'"), std::string::npos) << e.hint;
}

TEST(SpecParser, RejectsUnknownFrameworkWithSuggestion) {
  auto e = error_of("frameworks:\n  pytorch: 2.5\n");
  EXPECT_EQ(e.where, "spec.yaml:2:3");
  EXPECT_NE(e.hint.find("'torch'"), std::string::npos);
}

TEST(SpecParser, RejectsWrongTypes) {
  EXPECT_EQ(error_of("frameworks: [torch]\n").id, "spec.wrong_type");
  EXPECT_EQ(error_of("gpu:\n  models: {a: b}\n").where, "spec.yaml:2:11");
  EXPECT_EQ(error_of("cuda: [12]\n").id, "spec.wrong_type");
  EXPECT_EQ(error_of("validate:\n  thresholds: {hbm: fast}\n").id, "spec.wrong_type");
  EXPECT_EQ(error_of("- a\n- b\n").id, "spec.wrong_type");
}

TEST(SpecParser, RejectsBadVersionSyntaxAtItsPosition) {
  auto e = error_of("name: x\ncuda: \">=12.x\"\n");
  EXPECT_EQ(e.where, "spec.yaml:2:7");
  EXPECT_NE(e.message.find("'cuda'"), std::string::npos);
}

TEST(SpecParser, RejectsContradictoryFields) {
  EXPECT_EQ(error_of("cuda: \">=13,<12\"\n").id, "spec.contradictory");
  EXPECT_EQ(error_of("gpu:\n  models: [H100]\n  archs: [sm_90]\n").id, "spec.contradictory");
  EXPECT_EQ(error_of("gpu:\n  driver: \"<560\"\n").id, "spec.driver_unbounded");
}

TEST(SpecParser, RejectsDuplicateKeys) {
  auto e = error_of("name: a\ncuda: \"12\"\nname: b\n");
  EXPECT_EQ(e.id, "spec.duplicate_key");
  EXPECT_EQ(e.where, "spec.yaml:3:1");
  EXPECT_EQ(error_of("gpu:\n  driver: \"550\"\n  driver: \"535\"\n").id, "spec.duplicate_key");
}

TEST(SpecParser, RejectsBadEnumsAndNames) {
  EXPECT_NE(error_of("image: {format: oci-dri}\n").hint.find("oci-dir"), std::string::npos);
  EXPECT_EQ(error_of("gpu: {confidential: maybe}\n").id, "spec.bad_enum");
  EXPECT_EQ(error_of("validate: {level: quik}\n").id, "spec.bad_enum");
  EXPECT_EQ(error_of("name: My Image\n").id, "spec.bad_name");
  EXPECT_EQ(error_of("base: debian\n").id, "spec.bad_base");
  EXPECT_EQ(error_of("packages: {apt: [\"Bad Name\"]}\n").id, "spec.bad_package");
  EXPECT_EQ(error_of("schema: gpuenv-spec-v9\n").id, "spec.schema");
  EXPECT_EQ(error_of("gpu: {archs: [hopper]}\n").id, "spec.bad_arch");
}

TEST(SpecParser, RejectsYamlSyntaxErrorsWithPosition) {
  auto e = error_of("name: x\ngpu:\n  models: [H100\n");
  EXPECT_EQ(e.id, "spec.yaml_syntax");
  EXPECT_EQ(e.where.rfind("spec.yaml:", 0), 0u);
}

TEST(SpecParser, RejectsEmptyAndCommentOnlyInput) {
  EXPECT_EQ(error_of("").id, "spec.empty");
  EXPECT_EQ(error_of("   \n\n").id, "spec.empty");
  EXPECT_EQ(error_of("# just a comment\n").id, "spec.empty");
}

TEST(SpecParser, RejectsBinaryAndNonUtf8) {
  EXPECT_EQ(error_of(std::string("name: x\0y\n", 10)).id, "yaml.binary");
  EXPECT_EQ(error_of("name: caf\xe9\n").id, "yaml.not_utf8");
  EXPECT_EQ(error_of("name: \xc0\xaf\n").id, "yaml.not_utf8");  // overlong
  EXPECT_TRUE(parse_spec("name: x # caf\xc3\xa9\n", "s.yaml").ok());
}

TEST(SpecParser, RejectsDeepNestingBeforeParsing) {
  std::string flow = "name: " + std::string(10000, '[') + std::string(10000, ']') + "\n";
  EXPECT_EQ(error_of(flow).id, "yaml.too_deep");
  std::string block;
  for (int i = 0; i < 10000; ++i) block += "- ";
  block += "x\n";
  EXPECT_EQ(error_of(block).id, "yaml.too_deep");
  std::string indented;
  for (int i = 0; i < 200; ++i) indented += std::string(static_cast<std::size_t>(i), ' ') + "k" + std::to_string(i) + ":\n";
  EXPECT_EQ(error_of(indented).id, "yaml.too_deep");
}

TEST(SpecParser, AliasBombIsRefusedWithoutExpanding) {
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  char prev = 'a';
  for (char c = 'b'; c <= 'z'; ++c, ++prev) {
    bomb += std::string(1, c) + ": &" + c + " [";
    for (int i = 0; i < 10; ++i) bomb += std::string(i ? ", " : "") + "*" + prev;
    bomb += "]\n";
  }
  bomb += "packages:\n  pip: *z\n";
  auto e = error_of(bomb);
  EXPECT_EQ(e.id, "spec.unknown_key");  // 'a' is not a spec key: refused before anything is walked
  auto e2 = error_of("x: &x [a, b]\npackages: {pip: [*x, *x]}\n");
  EXPECT_EQ(e2.id, "spec.unknown_key");
  auto e3 = error_of("packages:\n  apt: &p [curl]\n  pip: [*p, *p]\n");
  EXPECT_EQ(e3.id, "spec.wrong_type");
}

TEST(SpecParser, RejectsOversizedInput) {
  std::string big = "name: x\n# " + std::string(gpuenv::resolver::k_spec_max_bytes, 'a') + "\n";
  EXPECT_EQ(error_of(big).id, "yaml.too_large");
}

TEST(SpecParser, DidYouMeanIgnoresFarWords) {
  EXPECT_EQ(gpuenv::resolver::did_you_mean("frameworx", {"frameworks", "gpu"}), "frameworks");
  EXPECT_FALSE(gpuenv::resolver::did_you_mean("zzzzzz", {"frameworks", "gpu"}).has_value());
}

TEST(SpecParser, AVmDiskHasAVmSectionAndARawOrQcow2Format) {
  auto plain = parse_spec("name: c\n", "spec.yaml");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->vm);
  // A format alone gives the defaults; a section alone gives raw.
  auto fmt = parse_spec("image: {format: qcow2}\n", "spec.yaml");
  ASSERT_TRUE(fmt.ok()) << fmt.error().to_string();
  ASSERT_TRUE(fmt->vm);
  EXPECT_EQ(fmt->vm->kernel, "") << "the platform's cloud kernel, once the platform is chosen (app::resolve)";
  EXPECT_EQ(fmt->vm->disk_size, 0u);
  EXPECT_FALSE(fmt->vm->cloud_init);
  auto sec = parse_spec("vm: {kernel: linux-image-amd64, disk_size: 8G, cloud_init: true, cmdline: 'quiet'}\n", "spec.yaml");
  ASSERT_TRUE(sec.ok()) << sec.error().to_string();
  EXPECT_EQ(sec->image_format, gpuenv::resolver::ImageFormat::raw);
  EXPECT_EQ(sec->vm->kernel, "linux-image-amd64");
  EXPECT_EQ(sec->vm->disk_size, std::uint64_t{8} << 30);
  EXPECT_TRUE(sec->vm->cloud_init);
  EXPECT_EQ(sec->vm->cmdline, "quiet");
  EXPECT_EQ(parse_spec("vm: {disk_size: 512MiB}\n", "spec.yaml")->vm->disk_size, 512u << 20);

  EXPECT_EQ(error_of("image: {format: oci-dir}\nvm: {disk_size: 8G}\n").id, "spec.contradictory");
  EXPECT_EQ(error_of("base: docker://registry.example/debian:12\nimage: {format: raw}\n").id, "spec.contradictory");
  for (const char* size : {"8", "lots", "8X", "1.5G", "32M", "17T", "-1G"}) EXPECT_EQ(error_of(std::string("vm: {disk_size: '") + size + "'}\n").id, "spec.bad_size") << size;
  EXPECT_EQ(error_of("vm: {kernel: 'Linux Image'}\n").id, "spec.bad_package");
  EXPECT_EQ(error_of("vm: {cloud_init: sometimes}\n").id, "spec.wrong_type");
  const auto typo = error_of("vm: {kernal: linux-image-amd64}\n");
  EXPECT_NE(typo.hint.find("kernel"), std::string::npos) << typo.hint;
  EXPECT_NE(error_of("image: {format: qcow}\n").hint.find("qcow2"), std::string::npos);
}

// vm.kernel's default follows the platform: Debian's cloud kernel of its architecture; a named kernel stays.
TEST(SpecParser, AVmDisksDefaultKernelIsTheCloudKernelOfItsPlatform) {
  auto arm = parse_spec("image: {format: qcow2, platforms: [linux/arm64]}\n", "spec.yaml");
  ASSERT_TRUE(arm.ok()) << arm.error().to_string();
  EXPECT_EQ(arm->vm->kernel, "linux-image-cloud-arm64");
  auto amd = parse_spec("image: {format: raw, platforms: [linux/amd64]}\n", "spec.yaml");
  ASSERT_TRUE(amd.ok()) << amd.error().to_string();
  EXPECT_EQ(amd->vm->kernel, "linux-image-cloud-amd64");
  auto named = parse_spec("image: {format: raw, platforms: [linux/arm64]}\nvm: {kernel: linux-image-arm64}\n", "spec.yaml");
  ASSERT_TRUE(named.ok()) << named.error().to_string();
  EXPECT_EQ(named->vm->kernel, "linux-image-arm64");
  EXPECT_EQ(gpuenv::resolver::default_vm_kernel(gpuenv::resolver::Platform::arm64()), "linux-image-cloud-arm64");
  EXPECT_EQ(gpuenv::resolver::default_vm_kernel(gpuenv::resolver::Platform()), "linux-image-cloud-amd64");
}

// Issue 33, case 16: a command line with YAML escapes (\v \f \N \L) locked into a lock build refused as not UTF-8,
// and a NUL or 100 KB were taken silently (the kernel keeps 2,048 bytes). The spec now refuses what no lock carries.
TEST(SpecParser, AVmCommandLineIsOneLineOfPrintableAsciiThatFitsTheKernelsLimit) {
  for (const char* escaped : {"\\v", "\\f", "\\N", "\\L", "\\0", "\\e"}) {
    const auto e = error_of(std::string("vm: {cmdline: \"quiet") + escaped + "x\"}\n");
    EXPECT_EQ(e.id, "spec.unsafe_text") << escaped;
    EXPECT_EQ(e.where, "spec.yaml:1:15") << escaped;
  }
  EXPECT_EQ(error_of("vm: {cmdline: \"caf\u00e9\"}\n").id, "spec.bad_value") << "not ASCII";
  EXPECT_EQ(error_of("vm: {cmdline: '" + std::string(1025, 'a') + "'}\n").id, "spec.bad_value");
  EXPECT_NE(error_of("vm: {cmdline: '" + std::string(100000, 'a') + "'}\n").message.find("at most 1024"), std::string::npos);
  auto fits = parse_spec("vm: {cmdline: '" + std::string(1024, 'a') + "'}\n", "spec.yaml");
  ASSERT_TRUE(fits.ok()) << fits.error().to_string();
  // Any text of a spec, not only the command line: a name with a right-to-left override or an escape.
  EXPECT_EQ(error_of("name: \"x\\u202ey\"\n").id, "spec.unsafe_text");
  EXPECT_EQ(error_of("packages: {apt: [\"curl\\x1b[2J\"]}\n").id, "spec.unsafe_text");
}

TEST(SpecParser, AVmDriverIsDistroOrAPinnedPackageSet) {
  auto distro = parse_spec("vm: {driver: distro}\n", "spec.yaml");
  ASSERT_TRUE(distro.ok()) << distro.error().to_string();
  ASSERT_TRUE(distro->vm->driver);
  EXPECT_EQ(distro->vm->driver->request, "distro");
  EXPECT_EQ(distro->vm->driver->module, "nvidia-kernel-dkms");
  EXPECT_EQ(distro->vm->driver->packages, gpuenv::resolver::k_distro_driver_packages);
  EXPECT_TRUE(distro->vm->driver->version.empty());  // the lock finds it
  EXPECT_FALSE(parse_spec("vm: {kernel: linux-image-cloud-amd64}\n", "spec.yaml")->vm->driver);
  auto pinned = parse_spec("vm:\n  driver:\n    module: nvidia-tesla-535-kernel-dkms=535.261.03-1\n    packages: [firmware-nvidia-gsp, libnvidia-tesla-535-ml1]\n",
                           "spec.yaml");
  ASSERT_TRUE(pinned.ok()) << pinned.error().to_string();
  EXPECT_EQ(pinned->vm->driver->request, "packages");
  EXPECT_EQ(pinned->vm->driver->module, "nvidia-tesla-535-kernel-dkms=535.261.03-1");
  EXPECT_EQ(pinned->vm->driver->packages, (std::vector<std::string>{"firmware-nvidia-gsp", "libnvidia-tesla-535-ml1"}));

  EXPECT_EQ(error_of("vm: {driver: nvidia}\n").id, "spec.bad_value");
  EXPECT_EQ(error_of("vm: {driver: {packages: [libnvidia-ml1]}}\n").id, "spec.missing");
  EXPECT_EQ(error_of("vm: {driver: {module: 'NVIDIA driver'}}\n").id, "spec.bad_package");
  EXPECT_EQ(error_of("vm: {driver: {module: nvidia-kernel-dkms, packages: ['../x']}}\n").id, "spec.bad_package");
  EXPECT_NE(error_of("vm: {driver: {modul: nvidia-kernel-dkms}}\n").hint.find("module"), std::string::npos);
  // The image's driver is the one it carries: a fleet driver beside it contradicts it.
  const auto both = error_of("gpu: {models: [H100], driver: '550'}\nvm: {driver: distro}\n");
  EXPECT_EQ(both.id, "spec.contradictory");
  EXPECT_NE(both.message.find("vm.driver"), std::string::npos);
}

TEST(SpecParser, CudaAsAMappingChoosesComponents) {
  auto s = gpuenv::resolver::parse_spec("cuda: {version: '12.9', components: [cudart, cufft, cudart]}\n", "t.yaml");
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  EXPECT_TRUE(s->cuda_given);
  EXPECT_TRUE(s->cuda.matches(*gpuenv::resolver::Version::parse("12.9.1")));
  EXPECT_EQ(s->cuda_components, (std::vector<std::string>{"cudart", "cufft"}));
  auto only = gpuenv::resolver::parse_spec("cuda: {components: [nvcc]}\n", "t.yaml");
  ASSERT_TRUE(only.ok());
  EXPECT_FALSE(only->cuda_given);
  const auto bad = error_of("cuda: {components: [cudnn]}\n");
  EXPECT_EQ(bad.id, "spec.bad_enum");
  EXPECT_NE(bad.hint.find("top-level 'cudnn'"), std::string::npos) << bad.hint;
  EXPECT_EQ(error_of("cuda: {components: [cublass]}\n").hint.rfind("did you mean 'cublas'?", 0), 0u);
  EXPECT_EQ(error_of("cuda: {components: []}\n").id, "spec.empty_list");
  EXPECT_EQ(error_of("cuda: {versoin: '12'}\n").id, "spec.unknown_key");
}

}  // namespace
