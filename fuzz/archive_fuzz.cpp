// libFuzzer target: archive extraction and decompression (base/archive) on untrusted bytes. The first byte picks
// extract_archive (a tar in any compression), extract_deb (an ar .deb with its control and data members) or
// decompress; extraction goes into a fresh directory beneath a mkdtemp scratch directory, emptied after each
// input, and every entry reported must lie beneath it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "base/archive/decompress.hpp"
#include "base/archive/safe_extract.hpp"
#include "fuzz/fuzz_support.hpp"

namespace {

using namespace gpuenv;

/// Small limits: a bomb is refused after a few MiB instead of filling the disk.
ExtractOptions limits() {
  ExtractOptions o;
  o.max_total_bytes = 16u << 20;
  o.max_entry_bytes = 8u << 20;
  o.max_entries = 20000;
  return o;
}

void check_entries(const std::vector<ExtractedEntry>& entries) {
  for (const auto& e : entries) {
    // What the extractor reports is normalized: relative, no "..", no empty component.
    auto normal = normalize_member_path(e.path);
    if (!normal || !*normal || **normal != e.path) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const fuzzing::ScratchDir scratch;
  if (size == 0) return 0;
  const std::string_view bytes = fuzzing::as_text(data, size).substr(1);
  switch (data[0] % 3) {
    case 0: {
      const std::string root = scratch.make_dir("root");
      auto entries = extract_archive(bytes, "fuzz.tar", root, limits());
      if (entries) check_entries(*entries);
      break;
    }
    case 1: {
      const std::string root = scratch.make_dir("root");
      auto deb = extract_deb(bytes, "fuzz.deb", root, limits());
      if (deb) check_entries(deb->entries);
      break;
    }
    default: {
      auto out = decompress(bytes, "fuzz.xz", 16u << 20);
      if (out && out->size() > (16u << 20)) std::abort();
      break;
    }
  }
  scratch.reset();
  return 0;
}
