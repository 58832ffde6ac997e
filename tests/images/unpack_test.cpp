// Unpacking an image's layers in order with OCI whiteouts: ".wh.NAME" deletes NAME from the layers below, and
// ".wh..wh..opq" makes a directory opaque (what the layers below put there goes; the layer's own entries stay).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "images/oci/layout.hpp"
#include "images/run/unpack.hpp"
#include "fakes/files.hpp"

namespace {

namespace fs = std::filesystem;
using gpuenv::images::OciLayout;

using gpuenv::testing::read_all;

class Unpack : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("gpuenv-unpack-" + std::to_string(::getpid()) + "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }

  /// A gzip layer from the files under `tree` (made by `fill`, a shell command run inside it).
  std::string layer(OciLayout& layout, const std::string& name, const std::string& fill) {
    const fs::path tree = dir / name;
    fs::create_directories(tree);
    EXPECT_EQ(std::system(("cd " + tree.string() + " && " + fill).c_str()), 0);
    const fs::path tar = dir / (name + ".tar.gz");
    EXPECT_EQ(std::system(("tar -C " + tree.string() + " --sort=name --numeric-owner -czf " + tar.string() + " .").c_str()), 0);
    auto d = layout.put_bytes(read_all(tar), "application/vnd.oci.image.layer.v1.tar+gzip");
    EXPECT_TRUE(d.ok());
    return d.ok() ? d->digest.str() : "";
  }

  fs::path dir;
};

TEST_F(Unpack, WhiteoutsAndOpaqueDirectoriesHideWhatLowerLayersPutThere) {
  auto layout = OciLayout::open((dir / "layout").string());
  ASSERT_TRUE(layout.ok());
  std::vector<std::string> layers = {
      layer(*layout, "l1", "mkdir -p etc/app/conf.d opt/keep && echo a > etc/app/a && echo b > etc/app/conf.d/b && echo old > opt/keep/x && echo gone > opt/gone"),
      layer(*layout, "l2", "mkdir -p etc/app opt && touch etc/app/.wh..wh..opq && echo new > etc/app/new && touch opt/.wh.gone"),
      layer(*layout, "l3", "mkdir -p opt/keep && echo y > opt/keep/y")};
  nlohmann::json diff_ids = nlohmann::json::array();
  nlohmann::json manifest_layers = nlohmann::json::array();
  for (const auto& d : layers) {
    diff_ids.push_back(d);  // not checked by unpacking
    manifest_layers.push_back({{"mediaType", "application/vnd.oci.image.layer.v1.tar+gzip"}, {"digest", d}, {"size", fs::file_size(layout->blob_path(*gpuenv::Digest::parse(d)))}});
  }
  const nlohmann::json config = {{"architecture", "amd64"}, {"os", "linux"}, {"rootfs", {{"type", "layers"}, {"diff_ids", diff_ids}}}, {"config", {{"Cmd", {"/bin/sh"}}}}};
  auto c = layout->put_bytes(config.dump(), "application/vnd.oci.image.config.v1+json");
  ASSERT_TRUE(c.ok());
  const nlohmann::json manifest = {{"schemaVersion", 2},
                                   {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                                   {"config", {{"mediaType", c->media_type}, {"digest", c->digest.str()}, {"size", c->size}}},
                                   {"layers", manifest_layers}};
  auto m = layout->put_bytes(manifest.dump(), "application/vnd.oci.image.manifest.v1+json");
  ASSERT_TRUE(m.ok());
  ASSERT_TRUE(layout->write_index({*m}).ok());

  auto unpacked = gpuenv::images::unpack_image((dir / "layout").string(), "", (dir / "cache").string());
  ASSERT_TRUE(unpacked.ok()) << unpacked.error().to_string();
  const fs::path root = unpacked->rootfs;
  // The opaque directory holds only the upper layer's entries.
  EXPECT_FALSE(fs::exists(root / "etc/app/a"));
  EXPECT_FALSE(fs::exists(root / "etc/app/conf.d"));
  EXPECT_EQ(read_all(root / "etc/app/new"), "new\n");
  EXPECT_FALSE(fs::exists(root / "etc/app/.wh..wh..opq"));
  // A plain whiteout deletes one name; its siblings stay, and later layers add to them.
  EXPECT_FALSE(fs::exists(root / "opt/gone"));
  EXPECT_FALSE(fs::exists(root / "opt/.wh.gone"));
  EXPECT_EQ(read_all(root / "opt/keep/x"), "old\n");
  EXPECT_EQ(read_all(root / "opt/keep/y"), "y\n");
  EXPECT_EQ(unpacked->command, (std::vector<std::string>{"/bin/sh"}));
  // Only the cache's owner reaches the unpacked roots (and so their setuid files).
  EXPECT_EQ(fs::status(dir / "cache").permissions() & fs::perms::all, fs::perms::owner_all);

  // The same layers through extract_image_layers, and by manifest digest.
  auto image = gpuenv::images::read_layout_image((dir / "layout").string(), m->digest.str());
  ASSERT_TRUE(image.ok()) << image.error().to_string();
  fs::create_directories(dir / "again");
  std::vector<gpuenv::ExtractedEntry> entries;
  ASSERT_TRUE(gpuenv::images::extract_image_layers((dir / "layout").string(), *image, (dir / "again").string(), &entries).ok());
  EXPECT_FALSE(fs::exists(dir / "again/etc/app/a"));
  for (const auto& e : entries) EXPECT_EQ(e.path.find(".wh."), std::string::npos) << e.path;
}

// Layers are unpacked once each, into the cache's layer store, and linked into every image that has them: a
// second image sharing the bottom layer shares its files (the same inode) and unpacks only its own layer.
TEST_F(Unpack, ImagesThatShareALayerShareItsUnpackedFiles) {
  auto layout = OciLayout::open((dir / "layout").string());
  ASSERT_TRUE(layout.ok());
  const std::string shared = layer(*layout, "s", "mkdir -p usr/lib && echo big > usr/lib/libbig.so && chmod 4755 usr/lib/libbig.so");
  const std::string a = layer(*layout, "a", "mkdir -p app && echo a > app/which");
  const std::string b = layer(*layout, "b", "mkdir -p app usr/lib && echo b > app/which && touch usr/lib/.wh.libbig.so");
  auto image = [&](const std::vector<std::string>& digests) {
    nlohmann::json ids = nlohmann::json::array(), ls = nlohmann::json::array();
    for (const auto& d : digests) {
      ids.push_back(d);
      ls.push_back({{"mediaType", "application/vnd.oci.image.layer.v1.tar+gzip"}, {"digest", d}, {"size", fs::file_size(layout->blob_path(*gpuenv::Digest::parse(d)))}});
    }
    auto c = layout->put_bytes(nlohmann::json({{"architecture", "amd64"}, {"os", "linux"}, {"rootfs", {{"type", "layers"}, {"diff_ids", ids}}}}).dump(),
                               "application/vnd.oci.image.config.v1+json");
    auto m = layout->put_bytes(nlohmann::json({{"schemaVersion", 2}, {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                                               {"config", {{"mediaType", c->media_type}, {"digest", c->digest.str()}, {"size", c->size}}}, {"layers", ls}})
                                   .dump(),
                               "application/vnd.oci.image.manifest.v1+json");
    return *m;
  };
  const auto first = image({shared, a}), second = image({shared, a, b});
  ASSERT_TRUE(layout->write_index({first, second}).ok());
  const std::string cache = (dir / "cache").string();
  auto one = gpuenv::images::unpack_image((dir / "layout").string(), first.digest.str(), cache);
  auto two = gpuenv::images::unpack_image((dir / "layout").string(), second.digest.str(), cache);
  ASSERT_TRUE(one.ok() && two.ok()) << (one.ok() ? two.error().to_string() : one.error().to_string());
  EXPECT_NE(one->rootfs, two->rootfs);
  EXPECT_EQ(read_all(fs::path(one->rootfs) / "app/which"), "a\n");
  EXPECT_EQ(read_all(fs::path(two->rootfs) / "app/which"), "b\n");
  EXPECT_FALSE(fs::exists(fs::path(two->rootfs) / "usr/lib/libbig.so")) << "the upper layer's whiteout";
  EXPECT_FALSE(fs::exists(fs::path(two->rootfs) / "usr/lib/.wh.libbig.so"));
  EXPECT_TRUE(fs::exists(fs::path(one->rootfs) / "usr/lib/libbig.so")) << "a whiteout in one image never touches another's files";
  EXPECT_EQ(fs::status(fs::path(one->rootfs) / "usr/lib/libbig.so").permissions() & fs::perms::set_uid, fs::perms::set_uid);
  struct stat x {}, y {};
  ASSERT_EQ(::stat((fs::path(one->rootfs) / "app").c_str(), &x), 0);
  std::size_t trees = 0;
  for (const auto& e : fs::directory_iterator(fs::path(cache) / "layers")) trees += e.is_directory() ? 1 : 0;
  EXPECT_EQ(trees, 3u) << "one tree per layer digest";
  // The shared layer's file is one inode, linked from its tree into both roots.
  std::string a_first;
  for (const auto& e : fs::recursive_directory_iterator(fs::path(cache) / "layers"))
    if (e.path().filename() == "which" && read_all(e.path()) == "a\n") a_first = e.path().string();
  ASSERT_FALSE(a_first.empty());
  ASSERT_EQ(::stat(a_first.c_str(), &x), 0);
  ASSERT_EQ(::stat((fs::path(one->rootfs) / "app/which").c_str(), &y), 0);
  EXPECT_EQ(x.st_ino, y.st_ino);
  EXPECT_EQ(fs::status(dir / "cache").permissions() & fs::perms::all, fs::perms::owner_all);
}

TEST_F(Unpack, AnUnknownRefOrLayerTypeIsAClearError) {
  auto layout = OciLayout::open((dir / "layout").string());
  ASSERT_TRUE(layout.ok());
  auto bad_layer = layout->put_bytes("x", "application/vnd.example.not-a-layer");
  ASSERT_TRUE(bad_layer.ok());
  auto c = layout->put_bytes(R"({"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}})", "application/vnd.oci.image.config.v1+json");
  ASSERT_TRUE(c.ok());
  const nlohmann::json manifest = {{"schemaVersion", 2},
                                   {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                                   {"config", {{"mediaType", c->media_type}, {"digest", c->digest.str()}, {"size", c->size}}},
                                   {"layers", {{{"mediaType", "application/vnd.example.not-a-layer"}, {"digest", bad_layer->digest.str()}, {"size", 1}}}}};
  auto m = layout->put_bytes(manifest.dump(), "application/vnd.oci.image.manifest.v1+json");
  ASSERT_TRUE(m.ok());
  ASSERT_TRUE(layout->write_index({*m}).ok());
  auto unpacked = gpuenv::images::unpack_image((dir / "layout").string(), "", (dir / "cache").string());
  ASSERT_FALSE(unpacked.ok());
  EXPECT_EQ(unpacked.error().id, "run.bad_image");
  EXPECT_FALSE(fs::exists(dir / "cache" / m->digest.hex()));  // nothing half-unpacked left in place
  auto missing = gpuenv::images::unpack_image((dir / "layout").string(), "no-such-ref", (dir / "cache").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().id, "run.no_image");
}

/// A layout whose documents name digests that are not sha256, or blobs that do not hold what their digest names.
TEST_F(Unpack, DigestsThatAreNotBlobNamesOrDoNotMatchAreRefusedBeforeAnythingIsRead) {
  const fs::path outside = dir / "outside.json";
  std::ofstream(outside) << R"({"schemaVersion":2,"config":{},"layers":[]})";
  auto with_index_entry = [&](const std::string& name, const nlohmann::json& entry) {
    const fs::path l = dir / name;
    fs::create_directories(l / "blobs/sha256");
    std::ofstream(l / "oci-layout") << R"({"imageLayoutVersion":"1.0.0"})";
    std::ofstream(l / "index.json") << nlohmann::json{{"schemaVersion", 2}, {"manifests", {entry}}}.dump();
    return l.string();
  };
  // A digest that walks out of the layout, one in upper case, another algorithm, and no digest at all.
  for (const std::string& digest : std::vector<std::string>{"sha256:../../outside.json", "sha256:" + std::string(64, 'A'), "sha512:" + std::string(128, 'a')}) {
    const std::string l = with_index_entry("hostile", {{"mediaType", "application/vnd.oci.image.manifest.v1+json"}, {"digest", digest}, {"size", 10}});
    auto r = gpuenv::images::unpack_image(l, "", (dir / "cache").string());
    ASSERT_FALSE(r.ok()) << digest;
    EXPECT_EQ(r.error().id, "run.bad_image") << digest;
    EXPECT_NE(r.error().message.find("unsupported digest"), std::string::npos) << r.error().to_string();
  }
  const std::string none = with_index_entry("no-digest", {{"mediaType", "application/vnd.oci.image.manifest.v1+json"}, {"size", 10}});
  EXPECT_EQ(gpuenv::images::unpack_image(none, "", (dir / "cache").string()).error().id, "run.bad_image");

  // A manifest blob whose bytes are not the ones its digest names.
  auto layout = OciLayout::open((dir / "tampered").string());
  ASSERT_TRUE(layout.ok());
  auto c = layout->put_bytes(R"({"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}})", "application/vnd.oci.image.config.v1+json");
  ASSERT_TRUE(c.ok());
  const nlohmann::json manifest = {{"schemaVersion", 2}, {"config", gpuenv::images::descriptor_object(*c)}, {"layers", nlohmann::json::array()}};
  auto m = layout->put_bytes(manifest.dump(), "application/vnd.oci.image.manifest.v1+json");
  ASSERT_TRUE(m.ok());
  ASSERT_TRUE(layout->write_index({*m}).ok());
  ASSERT_TRUE(gpuenv::images::read_layout_image((dir / "tampered").string(), "").ok());
  std::ofstream(layout->blob_path(m->digest), std::ios::trunc) << manifest.dump() << " ";
  auto tampered = gpuenv::images::unpack_image((dir / "tampered").string(), "", (dir / "cache").string());
  ASSERT_FALSE(tampered.ok());
  EXPECT_EQ(tampered.error().id, "run.bad_image");
  EXPECT_NE(tampered.error().message.find("does not hold the bytes"), std::string::npos) << tampered.error().to_string();
  EXPECT_FALSE(fs::exists(dir / "cache" / m->digest.hex()));
}

/// A layer blob whose bytes or size are not what its descriptor names is refused before anything is extracted.
TEST_F(Unpack, ALayerThatIsNotWhatItsDigestNamesIsRefusedAndNothingStays) {
  for (const std::string how : {"bytes", "size"}) {
    const fs::path l = dir / ("layer-" + how);
    auto layout = OciLayout::open(l.string());
    ASSERT_TRUE(layout.ok());
    const std::string good = layer(*layout, "t-" + how, "mkdir -p opt && echo fine > opt/file");
    const auto digest = *gpuenv::Digest::parse(good);
    const std::uint64_t size = fs::file_size(layout->blob_path(digest));
    const nlohmann::json config = {{"architecture", "amd64"}, {"os", "linux"}, {"rootfs", {{"type", "layers"}, {"diff_ids", {good}}}}};
    auto c = layout->put_bytes(config.dump(), "application/vnd.oci.image.config.v1+json");
    ASSERT_TRUE(c.ok());
    const nlohmann::json layer_entry = {{"mediaType", "application/vnd.oci.image.layer.v1.tar+gzip"}, {"digest", good},
                                        {"size", how == "size" ? size + 1 : size}};
    const nlohmann::json manifest = {{"schemaVersion", 2}, {"config", gpuenv::images::descriptor_object(*c)}, {"layers", {layer_entry}}};
    auto m = layout->put_bytes(manifest.dump(), "application/vnd.oci.image.manifest.v1+json");
    ASSERT_TRUE(m.ok());
    ASSERT_TRUE(layout->write_index({*m}).ok());
    if (how == "bytes") {  // same size, one byte changed: a tampered or rotted blob
      std::fstream f(layout->blob_path(digest), std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(static_cast<std::streamoff>(size / 2));
      f.put('\x5a');
    }
    auto r = gpuenv::images::unpack_image(l.string(), "", (dir / ("cache-" + how)).string());
    ASSERT_FALSE(r.ok()) << how;
    EXPECT_EQ(r.error().id, "run.bad_image") << how;
    EXPECT_NE(r.error().message.find(how == "bytes" ? "does not hold the bytes" : "its descriptor says"), std::string::npos) << r.error().to_string();
    EXPECT_FALSE(fs::exists(dir / ("cache-" + how) / m->digest.hex())) << how;
  }
}

/// An index.json that is a FIFO is refused at once instead of waiting for a writer.
TEST_F(Unpack, AFifoAsTheIndexIsRefusedWithoutWaiting) {
  const fs::path l = dir / "fifo-layout";
  fs::create_directories(l / "blobs/sha256");
  std::ofstream(l / "oci-layout") << R"({"imageLayoutVersion":"1.0.0"})";
  ASSERT_EQ(::mkfifo((l / "index.json").c_str(), 0600), 0);
  auto r = gpuenv::images::unpack_image(l.string(), "", (dir / "cache").string());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "run.bad_image");
}

}  // namespace

namespace {

// run, validate --image and base images read a layout through the same reader as inspect: an entry that is an
// index of platforms is followed to its linux/amd64 image (before, run refused it as "not an image manifest"),
// and each of its documents is verified on the way.
TEST_F(Unpack, AnIndexOfPlatformsIsFollowedToItsLinuxAmd64ImageAndEveryDocumentIsVerified) {
  auto layout = OciLayout::open((dir / "multi").string());
  ASSERT_TRUE(layout.ok());
  const std::string l = layer(*layout, "amd64", "mkdir -p etc && echo amd64 > etc/arch");
  const auto ld = *gpuenv::Digest::parse(l);
  auto c = layout->put_bytes(R"({"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]},"config":{"Cmd":["/bin/true"]}})",
                             "application/vnd.oci.image.config.v1+json");
  ASSERT_TRUE(c.ok());
  const nlohmann::json manifest = {{"schemaVersion", 2},
                                   {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                                   {"config", gpuenv::images::descriptor_object(*c)},
                                   {"layers", {{{"mediaType", "application/vnd.oci.image.layer.v1.tar+gzip"}, {"digest", l}, {"size", fs::file_size(layout->blob_path(ld))}}}}};
  auto m = layout->put_bytes(manifest.dump(), "application/vnd.oci.image.manifest.v1+json");
  ASSERT_TRUE(m.ok());
  nlohmann::json arm = gpuenv::images::descriptor_object(*m);
  arm["digest"] = "sha256:" + std::string(64, 'a');  // never read: not the platform asked for
  arm["platform"] = {{"os", "linux"}, {"architecture", "arm64"}};
  nlohmann::json amd = gpuenv::images::descriptor_object(*m);
  amd["platform"] = {{"os", "linux"}, {"architecture", "amd64"}};
  const nlohmann::json index = {{"schemaVersion", 2}, {"mediaType", "application/vnd.oci.image.index.v1+json"}, {"manifests", {arm, amd}}};
  auto idx = layout->put_bytes(index.dump(), "application/vnd.oci.image.index.v1+json");
  ASSERT_TRUE(idx.ok());
  ASSERT_TRUE(layout->write_index({*idx}).ok());

  auto unpacked = gpuenv::images::unpack_image((dir / "multi").string(), "", (dir / "cache").string());
  ASSERT_TRUE(unpacked.ok()) << unpacked.error().to_string();
  EXPECT_EQ(unpacked->manifest_digest, m->digest.str());
  EXPECT_EQ(read_all(fs::path(unpacked->rootfs) / "etc/arch"), "amd64\n");
  EXPECT_EQ(unpacked->command, (std::vector<std::string>{"/bin/true"}));

  // The config is verified like the manifest: one byte more and it is refused, with inspect's ids for inspect.
  std::ofstream(layout->blob_path(c->digest), std::ios::app) << " ";
  auto run_view = gpuenv::images::read_layout_image((dir / "multi").string(), "");
  ASSERT_FALSE(run_view.ok());
  EXPECT_EQ(run_view.error().id, "run.bad_image");
  EXPECT_NE(run_view.error().message.find("the config does not hold the bytes"), std::string::npos) << run_view.error().to_string();
  gpuenv::images::LayoutErrors inspect_errors;
  inspect_errors.damaged = "inspect.damaged_image";
  EXPECT_EQ(gpuenv::images::read_layout_image((dir / "multi").string(), "", inspect_errors).error().id, "inspect.damaged_image");
}

TEST_F(Unpack, AnIndexJsonLargerThanAnyImageNeedsIsRefusedUnread) {
  auto layout = OciLayout::open((dir / "big").string());
  ASSERT_TRUE(layout.ok());
  {
    std::ofstream f(dir / "big/index.json", std::ios::trunc);
    f << "{\"manifests\":[";
  }
  fs::resize_file(dir / "big/index.json", (std::uintmax_t{17} << 20));  // sparse: nothing to read but zeros
  auto r = gpuenv::images::read_layout_image((dir / "big").string(), "");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "run.bad_image") << r.error().to_string();
  EXPECT_EQ(r.error().where, (dir / "big/index.json").string());
}

}  // namespace
