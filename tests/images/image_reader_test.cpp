// Reading an image's summary (layers, packages, labels) from a small OCI layout written here, choosing an image
// by ref, refusing damaged blobs, and comparing two images layer by layer.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "fakes/temp_dir.hpp"
#include "images/oci/image_reader.hpp"
#include "images/oci/layout.hpp"

namespace {

namespace fs = std::filesystem;
using gpuenv::images::Descriptor;
using gpuenv::images::ImageSummary;
using gpuenv::images::OciLayout;
using gpuenv::images::RegistryAccess;
using nlohmann::json;
namespace media_type = gpuenv::images::media_type;

struct LayerSpec {
  std::string name;  // "" for a layer without gpuenv's annotations
  std::string bytes;
  json packages = json::array();  // [[name, version, kind, bytes], ...]
};

/// An image in the layout at `dir` (added to `index`), named `ref`.
Descriptor add_image(OciLayout& layout, const std::vector<LayerSpec>& layers, const std::string& ref, std::vector<Descriptor>& index) {
  json manifest_layers = json::array();
  for (const auto& l : layers) {
    const Descriptor d = *layout.put_bytes(l.bytes, media_type::k_layer_gzip);
    json entry = {{"mediaType", d.media_type}, {"digest", d.digest.str()}, {"size", d.size}};
    if (!l.name.empty()) entry["annotations"] = {{"dev.gpuenv.layer", l.name}, {"dev.gpuenv.packages", l.packages.dump()}};
    manifest_layers.push_back(entry);
  }
  const json config = {{"created", "2024-01-02T03:04:05Z"},
                       {"architecture", "amd64"},
                       {"os", "linux"},
                       {"config", {{"Env", {"PATH=/usr/bin"}}, {"Labels", {{"b.label", "2"}, {"a.label", "1"}, {"not.a.string", 3}}}}}};
  const Descriptor cfg = *layout.put_bytes(config.dump(), media_type::k_config);
  const json manifest = {{"schemaVersion", 2},
                         {"mediaType", media_type::k_manifest},
                         {"config", {{"mediaType", cfg.media_type}, {"digest", cfg.digest.str()}, {"size", cfg.size}}},
                         {"layers", manifest_layers}};
  Descriptor m = *layout.put_bytes(manifest.dump(), media_type::k_manifest);
  m.annotations["org.opencontainers.image.ref.name"] = ref;
  index.push_back(m);
  return m;
}

class ImageReader : public ::testing::Test {
 protected:
  void SetUp() override {
    auto layout = OciLayout::open(layout_dir());
    ASSERT_TRUE(layout.ok());
    std::vector<Descriptor> index;
    first = add_image(*layout,
                      {{"base", "base bytes", json::array({json::array({"libc6", "2.36-9", "deb", 1000}), json::array({"zlib1g", "1.2", "deb", 50})})},
                       {"", "plain layer"}},
                      "1.0", index);
    second = add_image(*layout,
                       {{"base", "other base bytes", json::array({json::array({"libc6", "2.36-10", "deb", 1000}), json::array({"torch", "2.5", "wheel", 9})})},
                        {"user", "user bytes", json::array({json::array({"bad"}), json::array({"tool", "1", "deb", 5})})}},
                       "2.0", index);
    ASSERT_TRUE(layout->write_index(index).ok());
  }
  std::string layout_dir() const { return (m_dir.path() / "layout").string(); }

  gpuenv::testing::TempDir m_dir{"gpuenv-image-reader"};
  Descriptor first, second;
};

TEST_F(ImageReader, ALayoutImageGivesLayersPackagesAndStringLabels) {
  auto img = gpuenv::images::read_image_summary(layout_dir() + ":1.0", RegistryAccess{});
  ASSERT_TRUE(img.ok()) << img.error().to_string();
  EXPECT_EQ(img->where, layout_dir() + ":1.0");
  EXPECT_EQ(img->digest, first.digest.str());
  EXPECT_EQ(img->created, "2024-01-02T03:04:05Z");
  EXPECT_EQ(img->architecture, "amd64");
  EXPECT_EQ(img->labels, (std::map<std::string, std::string>{{"a.label", "1"}, {"b.label", "2"}}));
  EXPECT_EQ(img->env, json::array({"PATH=/usr/bin"}));
  ASSERT_EQ(img->layers.size(), 2u);
  EXPECT_EQ(img->layers[0].name, "base");
  EXPECT_EQ(img->layers[0].size, std::string("base bytes").size());
  ASSERT_EQ(img->layers[0].packages.size(), 2u);
  EXPECT_EQ(img->layers[0].packages[0].name, "libc6");
  EXPECT_EQ(img->layers[0].packages[0].bytes, 1000u);
  EXPECT_EQ(img->layers[1].name, "layer 2");  // no annotations: named by position
  EXPECT_TRUE(img->layers[1].packages.empty());
}

TEST_F(ImageReader, AnIndexOfSeveralImagesNeedsARefThatItNames) {
  auto several = gpuenv::images::read_image_summary(layout_dir(), RegistryAccess{});
  ASSERT_FALSE(several.ok());
  EXPECT_EQ(several.error().id, "inspect.bad_image");
  EXPECT_NE(several.error().message.find("1.0, 2.0"), std::string::npos) << several.error().message;
  auto unknown = gpuenv::images::read_image_summary("oci:" + layout_dir() + ":3.0", RegistryAccess{});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().id, "inspect.bad_image");
  auto named = gpuenv::images::read_image_summary("oci:" + layout_dir() + ":2.0", RegistryAccess{});
  ASSERT_TRUE(named.ok()) << named.error().to_string();
  EXPECT_EQ(named->digest, second.digest.str());
  ASSERT_EQ(named->layers[1].packages.size(), 1u);  // the malformed entry is skipped
}

TEST_F(ImageReader, ABlobThatDoesNotMatchItsDigestIsDamage) {
  std::ofstream(fs::path(layout_dir()) / "blobs/sha256" / first.digest.hex(), std::ios::binary | std::ios::trunc) << "{}";
  auto img = gpuenv::images::read_image_summary(layout_dir() + ":1.0", RegistryAccess{});
  ASSERT_FALSE(img.ok());
  EXPECT_EQ(img.error().id, "inspect.damaged_image");
  EXPECT_EQ(img.error().kind, gpuenv::ErrorKind::environment);
}

TEST_F(ImageReader, WhatIsNotAnImageIsAUsageError) {
  auto missing = gpuenv::images::read_image_summary((m_dir.path() / "nothing").string(), RegistryAccess{});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().id, "inspect.bad_image");
  EXPECT_EQ(missing.error().kind, gpuenv::ErrorKind::usage);
  auto registry = gpuenv::images::read_image_summary("docker://localhost:5000/demo:1.0", RegistryAccess{});
  ASSERT_FALSE(registry.ok());
  EXPECT_EQ(registry.error().kind, gpuenv::ErrorKind::usage);
}

TEST_F(ImageReader, SplitRefKeepsColonsOfTheRefAndExistingPaths) {
  EXPECT_EQ(gpuenv::images::split_image_ref(layout_dir() + ":1.0"), std::make_pair(layout_dir(), std::string("1.0")));
  EXPECT_EQ(gpuenv::images::split_image_ref(layout_dir()), std::make_pair(layout_dir(), std::string()));
  EXPECT_EQ(gpuenv::images::split_image_ref(layout_dir() + ":a/b"), std::make_pair(layout_dir() + ":a/b", std::string()));
}

TEST_F(ImageReader, DiffListsLayersByNameWithPackageChanges) {
  auto a = gpuenv::images::read_image_summary(layout_dir() + ":1.0", RegistryAccess{});
  auto b = gpuenv::images::read_image_summary(layout_dir() + ":2.0", RegistryAccess{});
  ASSERT_TRUE(a.ok() && b.ok());
  const auto changes = gpuenv::images::diff_images(*a, *b);
  ASSERT_EQ(changes.size(), 3u);
  EXPECT_EQ(changes[0].layer, "base");
  EXPECT_EQ(changes[0].status, "changed");
  ASSERT_EQ(changes[0].packages.size(), 3u);  // libc6 changed, zlib1g removed, then torch added
  EXPECT_EQ(changes[0].packages[0].name, "libc6");
  EXPECT_EQ(changes[0].packages[0].before, "2.36-9");
  EXPECT_EQ(changes[0].packages[0].after, "2.36-10");
  EXPECT_EQ(changes[0].packages[1].name, "zlib1g");
  EXPECT_FALSE(changes[0].packages[1].after.has_value());
  EXPECT_EQ(changes[0].packages[2].name, "torch");
  EXPECT_FALSE(changes[0].packages[2].before.has_value());
  EXPECT_EQ(changes[1].layer, "layer 2");
  EXPECT_EQ(changes[1].status, "removed");
  EXPECT_EQ(changes[1].size_after, 0u);
  EXPECT_EQ(changes[2].layer, "user");
  EXPECT_EQ(changes[2].status, "added");
  EXPECT_EQ(changes[2].size_before, 0u);
}

}  // namespace
