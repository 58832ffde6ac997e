// libFuzzer target: any bytes as a spec file. Must never crash, hang or use unbounded memory.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "resolver/spec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto r = gpuenv::resolver::parse_spec(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.yaml");
  if (r.ok()) (void)r->where("cuda");
  return 0;
}
