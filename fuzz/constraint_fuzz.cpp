// libFuzzer target: version and constraint text, and matching against a few versions.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "resolver/version.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto c = gpuenv::resolver::Constraint::parse(text);
  auto v = gpuenv::resolver::Version::parse(text);
  if (c.ok()) {
    (void)c->is_empty();
    (void)c->lower_bound();
    for (const char* s : {"0", "12.4.1", "550.54.15", "2.5"}) (void)c->matches(*gpuenv::resolver::Version::parse(s));
    if (v.ok()) (void)c->matches(*v);
  }
  return 0;
}
