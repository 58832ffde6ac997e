#pragma once
// What an image holds and how it was made (docs/build.md "Attestations"): in-toto Statements v1 of any predicate
// (the CycloneDX SBOM, the SLSA provenance), written with one subject, the image manifest, and read back strictly
// (the four fields, a sha256 subject, a JSON object as the predicate). The validation mark has its own, stricter
// reader (statement.hpp); both sign and store alike (dsse.hpp, att_image.hpp).
#include <string>
#include <string_view>
#include <vector>

#include "base/digest.hpp"
#include "base/error.hpp"

namespace gpuenv::marks {

/// The predicate types gpuenv writes besides its mark: cosign's name for a CycloneDX BOM (`cosign attest --type
/// cyclonedx`) and SLSA provenance v1 (slsa.dev/spec/v1.0/provenance).
inline constexpr std::string_view k_cyclonedx_predicate_type = "https://cyclonedx.org/bom";
inline constexpr std::string_view k_slsa_predicate_type = "https://slsa.dev/provenance/v1";

/// One subject of a statement: a name and a sha256 (other digests of a subject are not read).
struct InTotoSubject {
  std::string name;
  Digest digest;
};

/// A statement read back: its subjects (those with a sha256), its predicate type and the predicate's JSON text.
struct InTotoStatement {
  std::vector<InTotoSubject> subjects;
  std::string predicate_type;
  std::string predicate;  ///< compact JSON of the predicate object
  [[nodiscard]] bool names(const Digest& image) const;
};

/// The statement's bytes: compact JSON, keys in in-toto's order (_type, subject, predicateType, predicate), the
/// predicate's own key order kept. Error `attest.bad_predicate` (ErrorKind::internal) when PREDICATE_JSON is not a
/// JSON object.
Result<std::string> render_in_toto(const std::string& subject_name, const Digest& subject, std::string_view predicate_type,
                                   std::string_view predicate_json);

/// Reads a statement of any predicate type. Errors (ErrorKind::environment, `attest.bad_statement`, at WHERE): not
/// a JSON object, a field outside the four, another _type, no predicateType, no subject with a sha256, a predicate
/// that is not an object.
Result<InTotoStatement> parse_in_toto(std::string_view json_text, const std::string& where);

}  // namespace gpuenv::marks
