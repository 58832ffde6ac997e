// libFuzzer target: the readers of validation marks on untrusted bytes (the first byte picks the reader):
// DSSE envelopes, in-toto statements (the mark's, and any predicate's: SBOMs, provenance), base64, PEM keys,
// validation reports (what `gpuenv mark` reads) and attestation manifests.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "base/duration.hpp"
#include "marks/att_image.hpp"
#include "marks/dsse.hpp"
#include "marks/from_report.hpp"
#include "marks/in_toto.hpp"
#include "marks/keys.hpp"
#include "marks/statement.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  using namespace gpuenv::marks;
  switch (data[0] % 8) {
    case 0: {
      auto e = parse_envelope(text, "fuzz");
      if (e) (void)verifying_key(*e, {});
      break;
    }
    case 1: (void)parse_statement(text, "fuzz"); break;
    case 2: (void)base64_decode(text); break;
    case 3: (void)parse_public_key(text, "fuzz"); break;
    case 4: (void)parse_private_key(text, "fuzz"); break;
    case 5: {
      auto facts = read_report(text, "fuzz");
      if (facts && facts->image_digest) (void)predicate_for(*facts, *facts->image_digest, {true, 86400, "fuzz"}, "fuzz");
      (void)gpuenv::parse_duration(text, "fuzz");
      break;
    }
    case 6: (void)parse_att_manifest(text, "", "fuzz"); break;
    default: {
      auto s = parse_in_toto(text, "fuzz");
      if (s) (void)s->names(gpuenv::Digest::of("fuzz"));
      break;
    }
  }
  return 0;
}
