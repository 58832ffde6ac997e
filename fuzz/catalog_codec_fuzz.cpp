// libFuzzer target: damaged compiled catalogs must be refused, never crash.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "resolver/catalog_codec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto c = gpuenv::resolver::decode_catalog(std::string_view(reinterpret_cast<const char*>(data), size));
  if (c.ok()) (void)gpuenv::resolver::encode_catalog(*c);
  return 0;
}
