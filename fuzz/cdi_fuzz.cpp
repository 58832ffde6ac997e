// libFuzzer target: what the cdi_spec check reads of a host's CDI specs (validate/cdi_spec.hpp): a spec file as
// YAML or JSON (parse_cdi_spec, then the file-name rules on every path it names) and the NVIDIA container toolkit's
// config.toml (toolkit_spec_dirs). The first byte picks the reader: 0 YAML, 1 JSON, 2 the toolkit's config.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_support.hpp"
#include "validate/cdi_spec.hpp"

namespace {

using namespace gpuenv::validate;

void spec(std::string_view text, CdiFormat format) {
  const CdiParse parsed = parse_cdi_spec(text, "fuzz.yaml", format);
  (void)is_nvidia_gpu_kind(parsed.kind);
  if (!parsed.spec) return;
  (void)is_known_cdi_version(parsed.spec->version);
  for (const auto& device : parsed.spec->devices) (void)is_mig_name(device);
  for (const auto& p : parsed.spec->paths) {
    (void)driver_version_in_path(p.host_path);
    (void)is_mig_path(p.host_path);
    (void)to_string(p.role);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view text = gpuenv::fuzzing::as_text(data, size).substr(1);
  switch (data[0] % 3) {
    case 0: spec(text, CdiFormat::yaml); break;
    case 1: spec(text, CdiFormat::json); break;
    default: (void)toolkit_spec_dirs(text, "config.toml"); break;
  }
  return 0;
}
