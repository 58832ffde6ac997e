// libFuzzer target: HTTP response headers as the registry client and the fetcher read them (base/net
// parse_header_line, parse_retry_after) and WWW-Authenticate challenges (images/registry parse_auth_challenge).
// The input is a header block, one line per '\n' as curl's header callback gets them.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "base/net/http_headers.hpp"
#include "fuzz/fuzz_support.hpp"
#include "images/registry/registry_client.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace gpuenv;
  for (std::string_view line : fuzzing::split(fuzzing::as_text(data, size), '\n', 256)) {
    auto header = parse_header_line(line);
    if (!header) continue;
    for (char c : header->name)
      if (c >= 'A' && c <= 'Z') std::abort();  // names are lower-cased
    if (header->name == "retry-after") (void)parse_retry_after(header->value);
    if (header->name == "www-authenticate") {
      auto challenge = images::parse_auth_challenge(header->value);
      if (challenge)
        for (const auto& [name, value] : challenge->params)
          for (char c : name)
            if (c >= 'A' && c <= 'Z') std::abort();
    }
  }
  return 0;
}
