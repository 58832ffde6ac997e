#pragma once
// What an image holds and how it was made, signed (docs/build.md "Attestations", docs/mark.md): `build --attest
// sbom,provenance` makes the image's CycloneDX SBOM and SLSA provenance statements, signs them with the marks' key
// (DSSE) and appends them to the image's attestation image beside its marks (the tag sha256-<hex>.att, as cosign
// attest does); `verify --sbom/--provenance` says whether such a statement exists, is signed by a given key and
// names the image; `inspect` lists them (app/marks.hpp list_marks).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "app/services.hpp"
#include "base/digest.hpp"
#include "base/error.hpp"
#include "marks/in_toto.hpp"
#include "marks/keys.hpp"
#include "resolver/lockfile.hpp"

namespace gpuenv::app {

enum class StatementKind { sbom, provenance };
/// "sbom" | "provenance".
std::string_view to_string(StatementKind kind);
/// The in-toto predicate type of KIND (marks/in_toto.hpp).
std::string_view predicate_type_of(StatementKind kind);
/// "sbom,provenance" (either, or both, once each) as kinds. Error `build.attest` (usage) naming what is unknown.
Result<std::vector<StatementKind>> parse_statement_kinds(const std::string& text);

/// One image a build attests: its manifest, its platform and the CycloneDX SBOM written beside its layout.
struct AttestedImage {
  Digest manifest;
  resolver::Platform platform;
  std::string cyclonedx;  ///< the CycloneDX text (images::cyclonedx_json)
};

/// What the build was, for the provenance.
struct BuildFacts {
  const resolver::Lock* lock = nullptr;
  std::string lock_text;
  std::string format, compression, tag;
  std::string subject_name;  ///< the name the statements give the image ("registry/ml/torch", else the spec's name)
  std::int64_t source_date_epoch = 0;
  std::int64_t started = 0;   ///< when the build began
};

/// A statement stored.
struct StoredStatement {
  StatementKind kind = StatementKind::sbom;
  Digest image;
  std::string record;  ///< the envelope's digest; "" when the same statement, signed by the same key, was there
  std::string where;   ///< the store's attestation image
  bool already_there = false;  ///< the same statement (signed by the same key) was stored before: nothing added
};

/// Makes the statements of KINDS for each image, signs them with KEY and appends them in every store of STORES
/// (what open_mark_store takes: the layout or archive written, docker://REF pushed), each once: a statement already
/// there with the same bytes under the same key is not added again (a rebuild's SBOM; its provenance, whose times
/// differ, is added as cosign attest adds). Errors: the stores', and
/// `sbom.bad_spdx` for a CycloneDX text that cannot be read.
Result<std::vector<StoredStatement>> attest_build(const std::vector<StatementKind>& kinds, const std::vector<AttestedImage>& images,
                                                  const BuildFacts& facts, const marks::Key& key, const std::vector<std::string>& stores,
                                                  bool plain_http, Services& services);

struct VerifyStatementsRequest {
  std::string image;                 ///< as open_mark_store takes it
  std::vector<std::string> keys;     ///< public key files; at least one
  std::vector<StatementKind> kinds;  ///< each must have a statement that counts
  bool plain_http = false;
};

/// One statement record of the image, judged.
struct JudgedStatement {
  StatementKind kind = StatementKind::sbom;
  std::string digest;                ///< the record's (its layer's)
  bool counts = false;
  std::vector<std::string> reasons;  ///< why it does not count; empty when it does
  int key = -1;                      ///< the index of the key that verified it
  std::string summary;               ///< what it says, in a line ("CycloneDX 1.6, 812 components")
};

struct StatementVerification {
  Digest image;
  std::string where;
  std::vector<StatementKind> wanted;
  std::vector<JudgedStatement> records;  ///< every record of a wanted kind, oldest first
  /// Every wanted kind has a record that counts.
  [[nodiscard]] bool ok() const;
};

/// Judges IMAGE's SBOM and provenance records: a record counts when one of the keys signed it (over its own bytes),
/// it is an in-toto Statement v1 of the kind's predicate type, its subject is the image's manifest, and its
/// predicate is that kind's document (an SBOM whose image component is this image; a provenance with its build
/// type and builder). Errors: the keys unreadable (`key.*`), the image or its records unreachable.
Result<StatementVerification> verify_statements(const VerifyStatementsRequest& request, Services& services);

/// A line saying what an SBOM or provenance statement holds, for inspect and verify ("" for another predicate).
std::string statement_summary(const marks::InTotoStatement& statement);

}  // namespace gpuenv::app
