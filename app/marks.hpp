#pragma once
// Marking images good (docs/mark.md): `gpuenv mark`, `validate --mark`, `build --validate --mark`, `gpuenv verify`
// and the records `gpuenv inspect` lists. A record is a signed statement (marks/) kept beside its image as cosign
// keeps attestations: the tag sha256-<hex>.att, in a registry or inside an OCI layout (marks/store.hpp).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/services.hpp"
#include "base/digest.hpp"
#include "base/error.hpp"
#include "images/oci/layout.hpp"
#include "marks/att_image.hpp"
#include "marks/judge.hpp"
#include "marks/statement.hpp"
#include "marks/store.hpp"

namespace gpuenv::app {

/// The store of IMAGE (marks::mark_store_place): a registry's through the services' HTTP client and the registry
/// configuration, a layout's or an archive's on disk. Errors: `mark.bad_image` (usage: no such layout or archive),
/// the registry configuration's.
Result<std::unique_ptr<marks::MarkStore>> open_mark_store(const std::string& image, bool plain_http, Services& services);

/// The signing key: PATH, else the file GPUENV_MARK_KEY names. Errors: `key.missing` (usage) when neither is
/// given, and those of marks::read_private_key.
Result<marks::Key> load_signing_key(const std::string& path, const Services& services);

/// How a record went into a store.
struct StoredRecord {
  std::size_t records = 0;      ///< the image's records now, this one included
  bool already_there = false;   ///< the same record was stored before
};

/// Appends ENVELOPE (a signed statement of PREDICATE_TYPE) to IMAGE's attestation image in STORE, once. Writers of
/// one image on this host are serialised (a lock in the cache, at most 60 s: `mark.locked`); a record another host's
/// writer replaced meanwhile is written again (3 tries: `mark.lost_race`). For marks, SBOMs and provenance alike.
Result<StoredRecord> store_record(marks::MarkStore& store, const Digest& image, const std::string& envelope, std::string_view predicate_type,
                                  Services& services);

struct MarkRequest {
  std::string image;              ///< see open_mark_store
  std::string report_path;        ///< a saved gpuenv-validation-v1 report; or:
  std::optional<std::string> report_bytes;  ///< the report of this run (validate --mark), as --json prints it
  std::string key_path;           ///< "" for GPUENV_MARK_KEY
  bool allow_replay = false;
  std::string valid_for = "30d";  ///< notAfter - timeVerified
  bool plain_http = false;
  std::string verifier_version;   ///< gpuenv's version, for the record
  bool referrers = false;         ///< also an OCI 1.1 referrer with a Sigstore bundle v0.3 (marks/referrer.hpp)
};

struct MarkResult {
  std::string where;               ///< where the record went
  Digest image;
  std::string record_digest;       ///< sha256 of the envelope (its layer)
  std::size_t records = 0;         ///< the image's records now, this one included
  bool already_there = false;      ///< the same record was stored before
  std::string referrer;            ///< with `referrers`: the referrer's digest and where it is found
  marks::MarkPredicate predicate;
};

/// Marks IMAGE good from its validation report: refuses a report that did not pass, is of the replay backend
/// (unless allow_replay) or of another image (marks::predicate_for's errors), signs the statement and appends it
/// to the image's attestation image. Writers of one image on this host are serialised (a lock in the cache, at
/// most 60 s: `mark.locked`); a record another host's writer replaced meanwhile is written again (3 tries:
/// `mark.lost_race`).
Result<MarkResult> mark(const MarkRequest& request, Services& services);

/// The public keys in FILES, in order: at least one (`key.missing`, usage), each as marks::read_public_key reads it.
Result<std::vector<marks::Key>> load_public_keys(const std::vector<std::string>& files);
/// Pointers to KEYS, as marks::verifying_key takes them (valid while KEYS lives).
std::vector<const marks::Key*> key_pointers(const std::vector<marks::Key>& keys);

struct VerifyRequest {
  std::string image;
  std::vector<std::string> keys;  ///< public key files; at least one
  std::string gpu = "auto";       ///< auto (this host) | a model ("NVIDIA H200", "NVIDIA-H200") | "" (any)
  std::string driver = "auto";    ///< auto | a version | "" (any)
  std::string cc = "auto";        ///< auto | on | off | devtools | "" (any)
  std::string level;              ///< the least level; "" for any
  std::string max_age;            ///< a duration ("7d"); "" for none
  bool allow_replay = false;
  bool plain_http = false;
  std::string catalog_dir;        ///< for the host probes of auto
  /// Where auto's answers come from: "" asks the driver (NVML); a pre-flight status file (gpuenv preflight's, such
  /// as /run/gpuenv/status.json) gives the GPU models, driver and CC mode its report recorded, without touching
  /// the GPU (a Slurm prolog's fast path, docs/slurm.md).
  std::string host_status;
};

/// One record, judged.
struct JudgedRecord {
  std::string digest;  ///< the layer's
  marks::MarkVerdict verdict;
};

struct Verification {
  Digest image;
  std::string where;
  marks::MarkWanted wanted;            ///< what was asked, auto resolved
  std::vector<JudgedRecord> records;   ///< every record seen, oldest first
  [[nodiscard]] bool ok() const;       ///< at least one record counts
};

/// Judges every record of IMAGE. Errors (exit 4 and the like): the keys unreadable (`key.*`, usage), the image
/// or its records unreachable, auto with no NVIDIA GPU here (`verify.no_host`, environment: name --gpu and
/// --driver), a bad --max-age or --level (usage).
Result<Verification> verify(const VerifyRequest& request, Services& services);

/// The records of IMAGE, each with its statement when readable (no key: nothing is judged). For `inspect`.
struct ListedRecord {
  std::string digest;
  std::string predicate_type;  ///< the layer's annotation
  std::optional<marks::MarkStatement> statement;  ///< a validation mark's
  std::string summary;         ///< an SBOM's or provenance's: what it says (app::statement_summary), signature not checked
  std::string problem;         ///< why it could not be read, when it could not
};
Result<std::vector<ListedRecord>> list_marks(const std::string& image, bool plain_http, Services& services);

}  // namespace gpuenv::app
