// The image's CycloneDX SBOM (images/assemble/cyclonedx.hpp), made from its SPDX document, and its SLSA provenance
// predicate (images/assemble/provenance.hpp): every package with the same name, version, sha256 and download
// location as the SPDX document, the purls with their qualifiers, the edges the lock knows, the image as the
// metadata component, the same bytes for the same inputs; every locked package a resolved dependency. The published
// schemas and independent readers check the same documents of real builds (tests/marks/attest_oracles.py, the
// online smoke).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "fakes/temp_dir.hpp"
#include "images/assemble/cyclonedx.hpp"
#include "images/assemble/package_facts.hpp"
#include "images/assemble/provenance.hpp"
#include "images/assemble/sbom.hpp"

namespace {

using nlohmann::json;
using gpuenv::Digest;
namespace images = gpuenv::images;
namespace resolver = gpuenv::resolver;

resolver::LockedPackage package(const std::string& name, const std::string& version, resolver::PackageKind kind, const std::string& arch) {
  resolver::LockedPackage p;
  p.name = name;
  p.version = version;
  p.kind = kind;
  p.architecture = arch;
  p.url = "http://mirror.test/pool/" + name + "_" + version + ".pkg";
  p.sha256 = Digest::of(name + version);
  p.size = 1000;
  return p;
}

resolver::Lock small_lock() {
  resolver::Lock lock;
  lock.spec_name = "Torch-H100";
  lock.spec_sha256 = std::string(64, 'a');
  lock.catalog_sha256 = std::string(64, 'c');
  lock.base = "debian:12";
  lock.packages = {package("libc6", "2.36-9+deb12u9", resolver::PackageKind::deb, "amd64"),
                   package("tzdata", "2024a-0+deb12u1", resolver::PackageKind::deb, "all"),
                   package("Safe_Tensors", "0.4.5", resolver::PackageKind::wheel, "")};
  return lock;
}

std::string spdx_of(const resolver::Lock& lock, const std::string& base_digest = "",
                    const std::vector<images::assembly::BasePackage>& base = {}) {
  images::assembly::SbomInputs in;
  in.lock_sha256 = std::string(64, 'b');
  in.source_date_epoch = 1700000000;
  in.generator = "gpuenv 9.9.9";
  in.distro = "debian";
  in.base_digest = base_digest;
  in.base = base;
  return images::assembly::sbom_json(lock, in);
}

const Digest k_image = Digest::of("the image manifest");

images::CycloneDxImage image_facts() { return {k_image, "amd64", "debian-12", "9.9.9"}; }

json cyclonedx(const std::string& spdx) {
  auto text = images::cyclonedx_json(spdx, image_facts(), "sbom.spdx.json");
  EXPECT_TRUE(text.ok()) << (text.ok() ? "" : text.error().to_string());
  return text.ok() ? json::parse(*text) : json();
}

const json* component(const json& bom, const std::string& name) {
  for (const auto& c : bom["components"])
    if (c["name"] == name) return &c;
  return nullptr;
}

TEST(CycloneDx, EveryPackageOfTheSpdxDocumentIsAComponentWithItsVersionPurlHashAndLocation) {
  const resolver::Lock lock = small_lock();
  const json bom = cyclonedx(spdx_of(lock));
  EXPECT_EQ(bom["bomFormat"], "CycloneDX");
  EXPECT_EQ(bom["specVersion"], "1.6");
  EXPECT_EQ(bom["version"], 1);
  ASSERT_EQ(bom["components"].size(), lock.packages.size());
  for (const auto& p : lock.packages) {
    const json* c = component(bom, p.name);
    ASSERT_NE(c, nullptr) << p.name;
    EXPECT_EQ((*c)["version"], p.version);
    EXPECT_EQ((*c)["type"], "library");
    EXPECT_EQ((*c)["hashes"][0]["alg"], "SHA-256");
    EXPECT_EQ((*c)["hashes"][0]["content"], p.sha256.hex());
    EXPECT_EQ((*c)["externalReferences"][0]["type"], "distribution");
    EXPECT_EQ((*c)["externalReferences"][0]["url"], p.url);
    EXPECT_FALSE(c->contains("licenses")) << "the SPDX document asserts no licence, so neither does the BOM";
  }
  // purl-spec: a .deb with its architecture and distribution, a wheel by its normalised name, '+' escaped.
  EXPECT_EQ((*component(bom, "libc6"))["purl"], "pkg:deb/debian/libc6@2.36-9%2Bdeb12u9?arch=amd64&distro=debian-12");
  EXPECT_EQ((*component(bom, "tzdata"))["purl"], "pkg:deb/debian/tzdata@2024a-0%2Bdeb12u1?arch=all&distro=debian-12");
  EXPECT_EQ((*component(bom, "Safe_Tensors"))["purl"], "pkg:pypi/safe-tensors@0.4.5");
}

TEST(CycloneDx, TheImageIsTheMetadataComponentAndHoldsEveryPackage) {
  const json bom = cyclonedx(spdx_of(small_lock()));
  const json& image = bom["metadata"]["component"];
  EXPECT_EQ(image["type"], "container");
  EXPECT_EQ(image["version"], k_image.str());
  EXPECT_EQ(image["hashes"][0]["content"], k_image.hex());
  EXPECT_EQ(image["purl"], "pkg:oci/torch-h100@sha256%3A" + k_image.hex() + "?arch=amd64");
  EXPECT_EQ(bom["metadata"]["timestamp"], "2023-11-14T22:13:20Z") << "SOURCE_DATE_EPOCH, as the SPDX document's";
  EXPECT_EQ(bom["metadata"]["tools"]["components"][0]["name"], "gpuenv");
  ASSERT_EQ(bom["dependencies"].size(), 1u) << "the lock knows no package's own dependencies: only the image's edges";
  EXPECT_EQ(bom["dependencies"][0]["ref"], image["bom-ref"]);
  std::set<std::string> refs;
  for (const auto& c : bom["components"]) refs.insert(c["bom-ref"].get<std::string>());
  EXPECT_EQ(refs.size(), bom["components"].size()) << "bom-refs are unique";
  std::set<std::string> held(bom["dependencies"][0]["dependsOn"].begin(), bom["dependencies"][0]["dependsOn"].end());
  EXPECT_EQ(held, refs);
}

TEST(CycloneDx, ABaseImageIsAContainerComponentHoldingItsOwnPackages) {
  const std::string base_digest = Digest::of("base").str();
  resolver::Lock lock = small_lock();
  lock.base_image = "docker://registry.test/base:1@" + base_digest;
  const json bom = cyclonedx(spdx_of(lock, base_digest, {{"bash", "5.2.15-2+b7", "amd64"}, {"libc6", "2.36-9", "amd64"}}));
  const json* base = component(bom, lock.base_image);
  ASSERT_NE(base, nullptr);
  EXPECT_EQ((*base)["type"], "container");
  EXPECT_EQ((*base)["hashes"][0]["content"], Digest::of("base").hex());
  ASSERT_NE(component(bom, "bash"), nullptr);
  // The base's libc6 is replaced by the lock's: listed once, at the lock's version.
  int libc = 0;
  for (const auto& c : bom["components"]) libc += c["name"] == "libc6" ? 1 : 0;
  EXPECT_EQ(libc, 1);
  ASSERT_EQ(bom["dependencies"].size(), 2u);
  EXPECT_EQ(bom["dependencies"][1]["ref"], (*base)["bom-ref"]);
  EXPECT_EQ(bom["dependencies"][1]["dependsOn"], json::array({(*component(bom, "bash"))["bom-ref"]}));
}

TEST(CycloneDx, TheSameInputsGiveTheSameBytesAndAnotherImageAnotherSerial) {
  const std::string spdx = spdx_of(small_lock());
  const auto a = images::cyclonedx_json(spdx, image_facts(), "x");
  const auto b = images::cyclonedx_json(spdx, image_facts(), "x");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
  images::CycloneDxImage other = image_facts();
  other.manifest = Digest::of("another image");
  const auto c = images::cyclonedx_json(spdx, other, "x");
  ASSERT_TRUE(c.ok());
  EXPECT_NE(json::parse(*a)["serialNumber"], json::parse(*c)["serialNumber"]);
  EXPECT_TRUE(json::parse(*a)["serialNumber"].get<std::string>().rfind("urn:uuid:", 0) == 0);
}

TEST(CycloneDx, TheSerialNumberIsTheNameBasedUuidOfTheImageAndItsSpdxDocument) {
  // Python's uuid.uuid5(uuid.NAMESPACE_URL, "https://gpuenv.dev/sbom/cyclonedx/<image digest>/<sha256 of the SPDX text>").
  const std::string spdx = R"({"spdxVersion":"SPDX-2.3","name":"x","packages":[]})";
  const auto bom = images::cyclonedx_json(spdx, image_facts(), "x");
  ASSERT_TRUE(bom.ok());
  EXPECT_EQ(json::parse(*bom)["serialNumber"], "urn:uuid:c8ebc08b-e6b9-5b07-ba87-5397c7ec8170");
}

TEST(CycloneDx, AnSpdxTextGpuenvDidNotWriteIsRefusedByName) {
  for (const std::string bad : {"", "[]", "{\"spdxVersion\":\"SPDX-2.2\",\"packages\":[]}", "{\"spdxVersion\":\"SPDX-2.3\"}",
                                "{\"spdxVersion\":\"SPDX-2.3\",\"packages\":[{\"name\":\"x\"}]}", "{\"spdxVersion\":\"SPDX-2.3\",\"packages\":[7]}"}) {
    const auto r = images::cyclonedx_json(bad, image_facts(), "dir/sbom.spdx.json");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().id, "sbom.bad_spdx");
    EXPECT_EQ(r.error().where, "dir/sbom.spdx.json");
  }
}

TEST(CycloneDx, TheFileSitsBesideItsSpdxFile) {
  EXPECT_EQ(images::cyclonedx_file_name("sbom.spdx.json"), "sbom.cdx.json");
  EXPECT_EQ(images::cyclonedx_file_name("sbom.linux-arm64.spdx.json"), "sbom.linux-arm64.cdx.json");
}

void write_under(const std::filesystem::path& root, const std::string& rel, const std::string& text) {
  std::filesystem::create_directories((root / rel).parent_path());
  std::ofstream(root / rel, std::ios::binary) << text;
}

TEST(PackageFacts, DpkgStatusAndWheelMetadataGiveTheEdgesAndTheWheelsSpdxLicence) {
  gpuenv::testing::TempDir tree("gpuenv-facts");
  write_under(tree.path(), "var/lib/dpkg/status",
              "Package: libc6\nStatus: install ok installed\nArchitecture: amd64\nVersion: 2.36-9\nDepends: libgcc-s1\n\n"
              "Package: libgcc-s1\nStatus: install ok installed\nArchitecture: amd64\nVersion: 12.2.0-14\nDepends: gcc-12-base (= 12.2.0-14), libc6 (>= 2.35)\n\n"
              "Package: gcc-12-base\nStatus: install ok installed\nArchitecture: amd64\nVersion: 12.2.0-14\n\n"
              "Package: mawk\nStatus: install ok installed\nArchitecture: amd64\nVersion: 1.3.4\nProvides: awk\n\n"
              "Package: base-files\nStatus: install ok installed\nArchitecture: amd64\nVersion: 12.4\nPre-Depends: awk | gawk\n"
              "Depends: missing-package | libc6:any\n\n"
              "Package: removed\nStatus: deinstall ok config-files\nArchitecture: amd64\nVersion: 1\nDepends: libc6\n\n");
  write_under(tree.path(), "usr/share/doc/libgcc-s1/copyright",
              "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\nFiles: *\nCopyright: FSF\nLicense: GPL-3+\n");
  write_under(tree.path(), "usr/share/doc/libc6/copyright", "This is the Debian prepackaged version of the GNU C Library.\n");
  write_under(tree.path(), "usr/local/lib/python3.11/dist-packages/torch-2.5.1.dist-info/METADATA",
              "Metadata-Version: 2.4\nName: torch\nVersion: 2.5.1\nLicense-Expression: BSD-3-Clause AND (MIT OR Apache-2.0)\n"
              "Requires-Dist: filelock\nRequires-Dist: nvidia-nccl-cu12 ; platform_system == \"Linux\" and platform_machine == \"x86_64\"\n"
              "Requires-Dist: pywin32 ; sys_platform == \"win32\"\nRequires-Dist: opt-einsum>=3.3 ; extra == \"opt-einsum\"\n"
              "Requires-Dist: not-installed\n\nbody\n");
  write_under(tree.path(), "usr/local/lib/python3.11/dist-packages/filelock-3.16.1.dist-info/METADATA",
              "Metadata-Version: 2.1\nName: filelock\nVersion: 3.16.1\nLicense: The Unlicense\n");
  write_under(tree.path(), "usr/local/lib/python3.11/dist-packages/nv-3.dist-info/METADATA",
              "Metadata-Version: 2.4\nName: nvidia-nccl-cu12\nVersion: 3\nLicense-Expression: LicenseRef-NVIDIA; rm -rf /\n");
  const std::map<std::string, std::string> wheels = {
      {"torch", "usr/local/lib/python3.11/dist-packages/torch-2.5.1.dist-info/METADATA"},
      {"filelock", "usr/local/lib/python3.11/dist-packages/filelock-3.16.1.dist-info/METADATA"},
      {"nvidia-nccl-cu12", "usr/local/lib/python3.11/dist-packages/nv-3.dist-info/METADATA"},
      {"pywin32", "usr/local/lib/python3.11/dist-packages/pywin32-1.dist-info/METADATA"},
      {"opt-einsum", "usr/local/lib/python3.11/dist-packages/opt_einsum-3.dist-info/METADATA"}};
  const auto facts = images::assembly::read_package_facts(tree.path().string(), wheels, resolver::Platform::amd64(), "3.11");
  const std::set<std::pair<std::string, std::string>> debs = {{"libc6", "libgcc-s1"}, {"libgcc-s1", "gcc-12-base"}, {"libgcc-s1", "libc6"},
                                                              {"base-files", "mawk"}, {"base-files", "libc6"}};
  EXPECT_EQ(facts.deb_depends, debs) << "the first installed alternative, a provider for a virtual name; a removed package has no edges";
  const std::set<std::pair<std::string, std::string>> wheel_edges = {{"torch", "filelock"}, {"torch", "nvidia-nccl-cu12"}};
  EXPECT_EQ(facts.wheel_depends, wheel_edges) << "markers for this platform hold, an extra's and Windows' do not, an absent one is no edge";
  const std::map<std::string, std::string> licences = {{"torch", "BSD-3-Clause AND (MIT OR Apache-2.0)"}};
  EXPECT_EQ(facts.wheel_licences, licences) << "License-Expression only, and only when it reads as an SPDX expression";
  const std::map<std::string, std::string> deb_licences = {{"libgcc-s1", "GPL-3.0-or-later"}};
  EXPECT_EQ(facts.deb_licences, deb_licences) << "a machine-readable copyright file only";
  // On arm64 the x86_64-only dependency is no edge.
  EXPECT_EQ(images::assembly::read_package_facts(tree.path().string(), wheels, resolver::Platform::arm64(), "3.11").wheel_depends.size(), 1u);
  // The facts reach both SBOMs: DEPENDS_ON in SPDX, dependsOn and the licence in CycloneDX.
  resolver::Lock lock = small_lock();
  lock.packages = {package("libc6", "2.36-9", resolver::PackageKind::deb, "amd64"), package("libgcc-s1", "12.2.0-14", resolver::PackageKind::deb, "amd64"),
                   package("torch", "2.5.1", resolver::PackageKind::wheel, ""), package("filelock", "3.16.1", resolver::PackageKind::wheel, "")};
  images::assembly::SbomInputs in;
  in.lock_sha256 = std::string(64, 'b');
  in.generator = "gpuenv 9.9.9";
  in.distro = "debian";
  in.facts = facts;
  const json spdx = json::parse(images::assembly::sbom_json(lock, in));
  int depends_on = 0;
  for (const auto& r : spdx["relationships"]) depends_on += r["relationshipType"] == "DEPENDS_ON" ? 1 : 0;
  EXPECT_EQ(depends_on, 3) << "libc6->libgcc-s1, libgcc-s1->libc6, torch->filelock: edges to packages not in the document are left out";
  const json bom = cyclonedx(spdx.dump());
  EXPECT_EQ((*component(bom, "torch"))["licenses"][0]["expression"], "BSD-3-Clause AND (MIT OR Apache-2.0)");
  EXPECT_EQ((*component(bom, "libgcc-s1"))["licenses"][0]["expression"], "GPL-3.0-or-later");
  EXPECT_FALSE(component(bom, "libc6")->contains("licenses"));
  bool torch_needs_filelock = false;
  for (const auto& d : bom["dependencies"])
    if (d["ref"] == (*component(bom, "torch"))["bom-ref"]) torch_needs_filelock = d["dependsOn"] == json::array({(*component(bom, "filelock"))["bom-ref"]});
  EXPECT_TRUE(torch_needs_filelock) << bom["dependencies"].dump();
}

TEST(PackageFacts, AMachineReadableCopyrightFileGivesItsLicencesAsOneSpdxExpression) {
  const std::string header = "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\nUpstream-Name: x\n\n";
  EXPECT_EQ(images::assembly::dep5_licence(header + "Files: *\nCopyright: 2020 A\nLicense: GPL-2+\n\n"
                                                    "Files: lib/*\nCopyright: 2021 B\nLicense: Expat\n\n"
                                                    "Files: doc/*\nCopyright: 2021 B\nLicense: GPL-2+\n\n"
                                                    "License: GPL-2+\n This program is free software;\n .\n more text\n"),
            "GPL-2.0-or-later AND MIT")
      << "each licence once, sorted, joined by AND; the stand-alone License paragraph is a text, not a licence";
  EXPECT_EQ(images::assembly::dep5_licence(header + "Files: *\nCopyright: x\nLicense: LGPL-3+ or GPL-2+\n"), "LGPL-3.0-or-later OR GPL-2.0-or-later");
  EXPECT_EQ(images::assembly::dep5_licence(header + "Files: *\nCopyright: x\nLicense: BSD-3-Clause\n\nFiles: a\nCopyright: y\nLicense: Apache-2.0 or MIT\n"),
            "(Apache-2.0 OR MIT) AND BSD-3-Clause");
  // Nothing guessed: a licence outside the table, an exception, mixed and/or, a file not in the format.
  EXPECT_EQ(images::assembly::dep5_licence(header + "Files: *\nCopyright: x\nLicense: GPL-2+\n\nFiles: y\nCopyright: x\nLicense: public-domain\n"), "");
  EXPECT_EQ(images::assembly::dep5_licence(header + "Files: *\nCopyright: x\nLicense: GPL-2+ with OpenSSL exception\n"), "");
  EXPECT_EQ(images::assembly::dep5_licence(header + "Files: *\nCopyright: x\nLicense: GPL-1+ or Artistic\n"), "");
  EXPECT_EQ(images::assembly::dep5_licence(header + "Files: *\nCopyright: x\nLicense: MIT and GPL-2 or BSD-2-clause\n"), "");
  EXPECT_EQ(images::assembly::dep5_licence(header + "Files: *\nCopyright: x\n"), "") << "a Files paragraph without a licence";
  EXPECT_EQ(images::assembly::dep5_licence("This is the Debian prepackaged version of the GNU C Library.\n\n  LGPL-2.1\n"), "");
  EXPECT_EQ(images::assembly::dep5_licence(""), "");
}

images::ProvenanceInputs provenance_inputs() {
  images::ProvenanceInputs in;
  in.lock_sha256 = std::string(64, 'b');
  in.platform = "linux/amd64";
  in.format = "oci-dir";
  in.compression = "gzip";
  in.tag = "2.5";
  in.source_date_epoch = 1700000000;
  in.builder_version = "9.9.9";
  in.started = 1765000000;
  in.finished = 1765000060;
  return in;
}

TEST(Provenance, EveryLockedPackageIsAResolvedDependencyAndTheLockAndSpecAreExternalParameters) {
  resolver::Lock lock = small_lock();
  lock.base_image = "docker://registry.test/base:1@" + Digest::of("base").str();
  const json p = json::parse(images::provenance_predicate(lock, provenance_inputs()));
  const json& def = p["buildDefinition"];
  EXPECT_EQ(def["buildType"], images::k_slsa_build_type);
  EXPECT_EQ(def["externalParameters"]["lock"]["digest"]["sha256"], std::string(64, 'b'));
  EXPECT_EQ(def["externalParameters"]["spec"]["digest"]["sha256"], std::string(64, 'a'));
  EXPECT_EQ(def["externalParameters"]["spec"]["name"], "Torch-H100");
  EXPECT_EQ(def["externalParameters"]["platform"], "linux/amd64");
  EXPECT_EQ(def["internalParameters"]["sourceDateEpoch"], 1700000000);
  EXPECT_EQ(def["internalParameters"]["catalog"]["digest"]["sha256"], std::string(64, 'c'));
  const json& deps = def["resolvedDependencies"];
  ASSERT_EQ(deps.size(), lock.packages.size() + 1);
  EXPECT_EQ(deps[0]["uri"], lock.base_image);
  EXPECT_EQ(deps[0]["digest"]["sha256"], Digest::of("base").hex());
  for (std::size_t i = 0; i < lock.packages.size(); ++i) {
    EXPECT_EQ(deps[i + 1]["uri"], lock.packages[i].url);
    EXPECT_EQ(deps[i + 1]["digest"]["sha256"], lock.packages[i].sha256.hex());
    EXPECT_EQ(deps[i + 1]["name"], lock.packages[i].name);
    EXPECT_EQ(deps[i + 1]["annotations"]["version"], lock.packages[i].version);
  }
  EXPECT_EQ(p["runDetails"]["builder"]["id"], images::k_slsa_builder_id);
  EXPECT_EQ(p["runDetails"]["builder"]["version"]["gpuenv"], "9.9.9");
  EXPECT_EQ(p["runDetails"]["metadata"]["startedOn"], "2025-12-06T05:46:40Z");
  EXPECT_EQ(p["runDetails"]["metadata"]["finishedOn"], "2025-12-06T05:47:40Z");
}

TEST(Provenance, OnlyTheBuildsOwnTimesDifferBetweenTwoBuildsOfOneLock) {
  const resolver::Lock lock = small_lock();
  images::ProvenanceInputs later = provenance_inputs();
  later.started += 86400;
  later.finished += 90000;
  json a = json::parse(images::provenance_predicate(lock, provenance_inputs()));
  json b = json::parse(images::provenance_predicate(lock, later));
  EXPECT_NE(a, b);
  a["runDetails"].erase("metadata");
  b["runDetails"].erase("metadata");
  EXPECT_EQ(a, b);
  EXPECT_EQ(images::provenance_predicate(lock, provenance_inputs()), images::provenance_predicate(lock, provenance_inputs()));
}

TEST(Provenance, ASpecDigestThatIsNotASha256IsLeftOutRatherThanWrittenAsOne) {
  resolver::Lock lock = small_lock();
  lock.spec_sha256 = "spec-digest";  // a hand-written lock's
  const json p = json::parse(images::provenance_predicate(lock, provenance_inputs()));
  EXPECT_FALSE(p["buildDefinition"]["externalParameters"]["spec"].contains("digest"));
  EXPECT_EQ(p["buildDefinition"]["externalParameters"]["spec"]["name"], "Torch-H100");
}

}  // namespace
