#pragma once
// Where marks live beside an image: cosign's attestation image, the tag `sha256-<hex>.att` in the image's
// repository (or the same manifest inside an OCI layout). An OCI image manifest with one layer per record:
// media type application/vnd.dsse.envelope.v1+json, the envelope JSON as the blob, annotations
// {"dev.cosignproject.cosign/signature": "", "predicateType": <uri>}, and a config whose rootfs.diff_ids are the
// layers' digests, as cosign writes it. Records are appended, never replaced. Pure: the caller moves the bytes.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/digest.hpp"
#include "base/error.hpp"
#include "images/oci/layout.hpp"

namespace gpuenv::marks {

inline constexpr std::string_view k_envelope_media_type = "application/vnd.dsse.envelope.v1+json";

/// "sha256-<hex>.att": the tag of an image's attestations (cosign's naming).
std::string attestation_tag(const Digest& image);

/// The attestation image: its manifest and config as bytes, and its layers.
struct AttImage {
  std::string manifest;  ///< the manifest's bytes
  std::string config;    ///< the config's bytes
  std::vector<images::Descriptor> layers;  ///< one per record, oldest first
};

/// The attestation image with one more record: EXISTING's layers (none when it is std::nullopt), then
/// ENVELOPE's. A record already there (same digest) is not added twice. The blob to store is ENVELOPE itself.
AttImage append_record(const std::optional<AttImage>& existing, std::string_view envelope, std::string_view predicate_type);

/// Reads an attestation manifest. Error `mark.bad_att` (ErrorKind::environment, at WHERE) when it is not an image
/// manifest with a layers list. A layer that is not an envelope is kept (its media type says so) for the reader
/// to name, never read as one.
Result<AttImage> parse_att_manifest(std::string_view manifest, std::string_view config, const std::string& where);

}  // namespace gpuenv::marks
