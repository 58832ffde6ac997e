// libFuzzer target: the dpkg database writer's inputs (images/rootfs): what a .deb's control member says
// (read_deb_control: the control stanza, md5sums, conffiles) and write_dpkg_database writing status, .list,
// .md5sums and .conffiles from it into a root beneath the scratch directory.
//
// Input: control text, NUL, md5sums text, NUL, conffiles text; the entries are the conffiles (as files) and the
// paths of the md5sums lines, so the .list file has something to list.
#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "fuzz/fuzz_support.hpp"
#include "images/rootfs/deb_rootfs.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace gpuenv;
  static const fuzzing::ScratchDir scratch;
  const auto parts = fuzzing::split(fuzzing::as_text(data, size), '\0', 3);
  DebContents contents;
  contents.control = std::string(parts[0]);
  if (parts.size() > 1) contents.md5sums = std::string(parts[1]);
  if (parts.size() > 2) contents.conffiles = std::string(parts[2]);
  for (std::string_view line : fuzzing::split(contents.md5sums, '\n', 64)) {
    const auto sp = line.find("  ");
    if (sp == std::string_view::npos) continue;
    auto path = normalize_member_path(line.substr(sp + 2));
    if (path && *path) contents.entries.push_back(ExtractedEntry{**path, ExtractedEntry::Type::file, 0644, 0, 0, 0, {}});
  }
  auto deb = images::read_deb_control(std::move(contents), "fuzz.deb");
  if (!deb) return 0;
  for (const auto& c : deb->conffiles)
    if (c.empty() || c[0] != '/' || c.find("/../") != std::string::npos) std::abort();
  const std::string root = scratch.make_dir("root");
  (void)images::write_dpkg_database(root, {*deb});
  scratch.reset();
  return 0;
}
