#include "resolver/catalog.hpp"
#include "resolver/catalog_codec.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "fakes/catalog_fixture.hpp"

using gpuenv::resolver::Catalog;
using gpuenv::resolver::CatalogFile;
using gpuenv::resolver::check_catalog;
using gpuenv::resolver::gpu_products;
using gpuenv::resolver::GpuModel;
using gpuenv::resolver::GpuProducts;
using gpuenv::resolver::load_catalog;

namespace {

TEST(Catalog, EmbeddedCatalogIsInternallyConsistent) {
  const auto problems = gpuenv::resolver::check_catalog(gpuenv::testing::catalog());
  std::string all;
  for (const auto& p : problems) all += p + "\n";
  EXPECT_TRUE(problems.empty()) << all;
}

TEST(Catalog, EmbeddedCatalogCoversWhatTheIssueAsksFor) {
  const auto& c = gpuenv::testing::catalog();
  ASSERT_FALSE(c.toolkits.empty());
  EXPECT_EQ(c.toolkits.front().version.major(), 11u);
  EXPECT_GE(c.toolkits.back().version.major(), 13u);
  for (int major : {11, 12, 13}) EXPECT_NE(c.major(major), nullptr) << major;
  for (const char* fw : {"torch", "tensorflow", "jax", "vllm", "sglang"}) {
    ASSERT_TRUE(c.frameworks.count(fw)) << fw;
    EXPECT_FALSE(c.frameworks.at(fw).empty()) << fw;
  }
  for (const char* gpu : {"H100", "H200", "A100", "L4", "T4", "V100", "B200", "RTX 4090", "RTX 5090"})
    EXPECT_NE(c.gpu(gpu), nullptr) << gpu;
  EXPECT_FALSE(c.cudnn.empty());
  EXPECT_FALSE(c.compat.empty());
  EXPECT_NE(c.distro("debian", "12"), nullptr);
  EXPECT_NE(c.distro("ubuntu", "jammy"), nullptr);
}

TEST(Catalog, EverySourceHasAnAddress) {
  const auto& c = gpuenv::testing::catalog();
  auto check = [](const auto& items, const char* what) {
    for (const auto& item : items)
      for (const auto& s : item.sources) EXPECT_TRUE(!s.url.empty() || (!s.repo.empty() && !s.path.empty())) << what;
  };
  check(c.toolkits, "cuda");
  check(c.cudnn, "cudnn");
  check(c.gpus, "gpus");
  for (const auto& [name, releases] : c.frameworks) check(releases, name.c_str());
}

TEST(Catalog, FindsGpusByNvmlNameAndPciId) {
  const auto& c = gpuenv::testing::catalog();
  ASSERT_NE(c.gpu("NVIDIA H100 80GB HBM3"), nullptr);
  EXPECT_EQ(c.gpu("NVIDIA H100 80GB HBM3")->name, "H100");
  EXPECT_EQ(c.gpu("nvidia geforce rtx 4090")->name, "RTX 4090");
  EXPECT_EQ(c.gpu("rtx4090")->name, "RTX 4090");
  EXPECT_EQ(c.gpu_by_pci_id("0x2330")->name, "H100");
  EXPECT_EQ(c.gpu("H1000"), nullptr);
}

TEST(Catalog, NewestNativeCudaOfADriver) {
  const auto& c = gpuenv::testing::catalog();
  const auto* t = c.newest_native(*gpuenv::resolver::Version::parse("515.105.01"));
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->version.truncated(2).str(), "11.7");
  EXPECT_EQ(c.newest_native(*gpuenv::resolver::Version::parse("400")), nullptr);
}

TEST(CatalogLoader, ReportsMissingFieldWithPosition) {
  const std::string text = "schema: gpuenv-catalog-v1\nkind: cuda\nmajors:\n  - major: 12\n    sources: [{url: u}]\ntoolkits: []\n";
  auto r = load_catalog({CatalogFile{"recipes/catalog/cuda.yaml", text}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("minor_compat_driver_min"), std::string::npos);
  EXPECT_EQ(r.error().where, "recipes/catalog/cuda.yaml:4:5");
}

TEST(CatalogLoader, RejectsUnknownKindSchemaAndSourcelessRecords) {
  EXPECT_FALSE(load_catalog({CatalogFile{"x.yaml", "schema: gpuenv-catalog-v1\nkind: nope\n"}}).ok());
  EXPECT_FALSE(load_catalog({CatalogFile{"x.yaml", "schema: v0\nkind: cuda\n"}}).ok());
  auto r = load_catalog({CatalogFile{"x.yaml", "schema: gpuenv-catalog-v1\nkind: gpus\ngpus:\n  - {name: X, sm: 90, sources: []}\n"}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("sources"), std::string::npos);
}

TEST(CatalogLoader, ReportsWrongTypesAsAnInternalErrorAtTheValue) {
  const std::string head = "schema: gpuenv-catalog-v1\nkind: gpus\ngpus:\n  - {name: X, sources: [{url: u}], ";
  for (const auto& [tail, where] : std::vector<std::pair<std::string, std::string>>{
           {"sm: [90]}\n", "x.yaml:4:40"},
           {"sm: 90, datacenter: maybe}\n", "x.yaml:4:56"},
           {"sm: 90, aliases: [[a]]}\n", "x.yaml:4:54"},
           {"sm: 90, driver_min: {a: 1}}\n", "x.yaml:4:56"}}) {
    auto r = load_catalog({CatalogFile{"x.yaml", head + tail}});
    ASSERT_FALSE(r.ok()) << tail;
    EXPECT_EQ(r.error().id, "catalog.invalid") << tail;
    EXPECT_EQ(r.error().kind, gpuenv::ErrorKind::internal) << tail;
    EXPECT_EQ(r.error().where, where) << tail << r.error().to_string();
    EXPECT_NE(r.error().hint.find("docs/catalog.md"), std::string::npos) << tail;
  }
}

TEST(CatalogCheck, FindsUnsortedListsAndDanglingReferences) {
  const std::string cuda = R"(schema: gpuenv-catalog-v1
kind: cuda
majors: [{major: 12, minor_compat_driver_min: "525.60.13", sources: [{url: u}]}]
toolkits:
  - {version: "12.4.0", driver_min: "550.54.14", sm: [90, 80], sources: [{url: u}]}
  - {version: "12.1.0", driver_min: "530.30.02", sm: [80, 90], sources: [{url: u}]}
)";
  const std::string torch = R"(schema: gpuenv-catalog-v1
kind: framework
framework: torch
releases:
  - version: "2.5.1"
    python: {min: "3.9", max: "3.13"}
    default_variant: cu999
    variants: [{name: cu118, cuda: "11.8"}]
    sources: [{url: u}]
)";
  auto c = load_catalog({CatalogFile{"cuda.yaml", cuda}, CatalogFile{"torch.yaml", torch}});
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  const auto problems = gpuenv::resolver::check_catalog(*c);
  std::string all;
  for (const auto& p : problems) all += p + "\n";
  EXPECT_NE(all.find("cuda toolkits: not sorted"), std::string::npos) << all;
  EXPECT_NE(all.find("sm list empty or unsorted"), std::string::npos) << all;
  EXPECT_NE(all.find("default_variant 'cu999'"), std::string::npos) << all;
  EXPECT_NE(all.find("CUDA 11.8 is not in cuda.yaml"), std::string::npos) << all;
}

}  // namespace

namespace {

TEST(CatalogCodec, RoundTripsAndRejectsDamage) {
  const auto& c = gpuenv::testing::catalog();
  const std::string bin = gpuenv::resolver::encode_catalog(c);
  auto back = gpuenv::resolver::decode_catalog(bin);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(*back == c);
  EXPECT_FALSE(gpuenv::resolver::decode_catalog("").ok());
  EXPECT_FALSE(gpuenv::resolver::decode_catalog("nope\n").ok());
  EXPECT_FALSE(gpuenv::resolver::decode_catalog(bin.substr(0, bin.size() / 2)).ok() &&
               gpuenv::resolver::decode_catalog(bin.substr(0, bin.size() / 2)).value() == c);
  std::string damaged = bin;
  damaged.replace(damaged.find("\nTK\t") + 4, 2, "xx");
  EXPECT_FALSE(gpuenv::resolver::decode_catalog(damaged).ok());
}

}  // namespace

// Issue 32, item 3: the one mapping from the names users type to NVML's product names, for every model of the real
// catalog: each NVML name (current or former) stands for itself; the model's name stands for all its products (so
// a model of several is refused by verify with the candidates); an alias stands for the products whose names hold
// the words it adds, or all of them.
TEST(GpuProducts, EveryModelsNamesMapToItsNvmlProducts) {
  const Catalog& c = gpuenv::testing::catalog();
  ASSERT_EQ(c.gpus.size(), 22u);
  for (const GpuModel& m : c.gpus) {
    SCOPED_TRACE(m.name);
    ASSERT_FALSE(m.nvml_names.empty());
    const GpuProducts by_name = gpu_products(c, m.name);
    EXPECT_EQ(by_name.model, &m);
    EXPECT_EQ(by_name.products, m.nvml_names);
    for (const auto* list : {&m.nvml_names, &m.former_nvml_names})
      for (const auto& n : *list) {
        const GpuProducts exact = gpu_products(c, n);
        EXPECT_EQ(exact.model, &m) << n;
        EXPECT_EQ(exact.products, std::vector<std::string>{n}) << n;
        // The node label's spelling (spaces as dashes) is the same name.
        std::string label = n;
        std::replace(label.begin(), label.end(), ' ', '-');
        EXPECT_EQ(gpu_products(c, label).products, std::vector<std::string>{n}) << label;
      }
    for (const auto& a : m.aliases) {
      const GpuProducts alias = gpu_products(c, a);
      EXPECT_EQ(alias.model, &m) << a;
      ASSERT_FALSE(alias.products.empty()) << a;
      for (const auto& p : alias.products)
        EXPECT_TRUE(std::count(m.nvml_names.begin(), m.nvml_names.end(), p) + std::count(m.former_nvml_names.begin(), m.former_nvml_names.end(), p) > 0)
            << a << " -> " << p;
    }
  }
  auto products = [&](const std::string& name) { return gpu_products(c, name).products; };
  using V = std::vector<std::string>;
  // The spec's H100 is four products; NVML's bare "NVIDIA H100" is one of them, not the model.
  EXPECT_EQ(products("H100"), (V{"NVIDIA H100 NVL", "NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA H100"}));
  EXPECT_EQ(products("NVIDIA H100"), V{"NVIDIA H100"});
  EXPECT_EQ(products("h100 pcie"), V{"NVIDIA H100 PCIe"});
  EXPECT_EQ(products("H100 NVL"), V{"NVIDIA H100 NVL"});
  EXPECT_EQ(products("H100 SXM5").size(), 4u);  // no NVML name says SXM5
  EXPECT_EQ(products("NVIDIA-H100-80GB-HBM3"), V{"NVIDIA H100 80GB HBM3"});
  EXPECT_EQ(products("H200 NVL"), V{"NVIDIA H200 NVL"});
  EXPECT_EQ(products("RTX PRO 6000 Blackwell Max-Q"), V{"NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition"});
  EXPECT_EQ(products("L4"), V{"NVIDIA L4"});
  EXPECT_EQ(products("T4"), V{"Tesla T4"});
  EXPECT_EQ(products("RTX 4090"), V{"NVIDIA GeForce RTX 4090"});
  // One product with names that changed between drivers: every spelling of it counts.
  const GpuProducts gb200 = gpu_products(c, "GB200");
  EXPECT_EQ(gb200.products, V{"NVIDIA GB200"});
  EXPECT_EQ(gb200.spellings, (V{"HGX GB200", "NVIDIA HGX GB200"}));
  EXPECT_EQ(gpu_products(c, "GH200 120GB").spellings, V{"NVIDIA GH200 120GB"});
  // The DGX Spark's GPU: its system's name is an alias of the one product.
  EXPECT_EQ(products("GB10"), V{"NVIDIA GB10"});
  EXPECT_EQ(products("DGX Spark"), V{"NVIDIA GB10"});
  // A name the catalog does not know stands for itself (a newer GPU is still compared exactly).
  const GpuProducts unknown = gpu_products(c, "NVIDIA Z9000");
  EXPECT_EQ(unknown.model, nullptr);
  EXPECT_EQ(unknown.products, V{"NVIDIA Z9000"});
}

TEST(CatalogCheck, EveryModelHasNvmlNamesThatNameNoOtherModel) {
  Catalog c = gpuenv::testing::catalog();
  EXPECT_TRUE(check_catalog(c).empty());
  c.gpus[0].nvml_names.clear();
  c.gpus[1].nvml_names.push_back(c.gpus[2].nvml_names.front());
  const auto problems = check_catalog(c);
  const std::string all = [&] {
    std::string s;
    for (const auto& p : problems) s += p + "\n";
    return s;
  }();
  EXPECT_NE(all.find("gpu " + c.gpus[0].name + ": no nvml_names"), std::string::npos) << all;
  EXPECT_NE(all.find("' listed twice"), std::string::npos) << all;
}
