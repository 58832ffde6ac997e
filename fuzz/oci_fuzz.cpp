// libFuzzer target: the OCI readers (images/oci): descriptors (parse_descriptor, the one reader of an index's or
// manifest's entries), an image manifest with its config (summary_from_manifest), and whole images as
// read_image_summary reads them from disk: an OCI layout directory whose index.json is the input, or an image
// archive (OCI or docker-archive tar) that is the input; and the build cache's document (parse_cache_document, which
// must render back to bytes it reads again as the same document). Files are written only beneath the scratch
// directory.
//
// Input: the first byte picks the reader; for summary_from_manifest the rest is the manifest JSON, a NUL, the
// config JSON.
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "fuzz/fuzz_support.hpp"
#include "images/oci/image_reader.hpp"
#include "images/oci/layout.hpp"
#include "images/registry/build_cache.hpp"

namespace {

using namespace gpuenv;
using nlohmann::json;

void write_file(const std::string& path, std::string_view bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0 || ::write(fd, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) std::abort();
  ::close(fd);
}

/// Registry references are refused: an image is read from the scratch directory only.
images::RegistryAccess no_registry() { return {}; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const fuzzing::ScratchDir scratch;
  if (size == 0) return 0;
  const std::string_view text = fuzzing::as_text(data, size).substr(1);
  switch (data[0] % 5) {
    case 0: {
      const json j = json::parse(text, nullptr, false);
      auto d = images::parse_descriptor(j, "fuzz");
      if (d && !is_sha256_digest(d->digest.str())) std::abort();
      break;
    }
    case 1: {
      const auto parts = fuzzing::split(text, '\0', 2);
      const json manifest = json::parse(parts[0], nullptr, false);
      const json config = json::parse(parts.size() > 1 ? parts[1] : std::string_view("{}"), nullptr, false);
      (void)images::summary_from_manifest(manifest, config, "fuzz", "sha256:" + std::string(64, '0'));
      break;
    }
    case 2: {
      const std::string dir = scratch.make_dir("layout");
      write_file(dir + "/oci-layout", R"({"imageLayoutVersion":"1.0.0"})");
      write_file(dir + "/index.json", text);
      (void)images::read_image_summary(dir, no_registry());
      break;
    }
    case 4: {
      auto doc = images::parse_cache_document(text, "fuzz");
      if (doc) {
        const std::string rendered = images::render_cache_document(*doc);
        auto again = images::parse_cache_document(rendered, "fuzz");
        if (!again || images::render_cache_document(*again) != rendered) std::abort();
      }
      break;
    }
    default: {
      const std::string file = scratch.path() + "/image.tar";
      write_file(file, text);
      (void)images::read_image_summary(file, no_registry());
      break;
    }
  }
  scratch.reset();
  return 0;
}
