#pragma once
// The second home of a mark (`--referrers`): an OCI 1.1 referrer of the image holding a Sigstore bundle v0.3, as
// cosign v3 writes attestations, with the referrers tag schema's fallback index `sha256-<hex>` for registries
// without the referrers API (Debian's docker-registry 2.8 has none; its tag and index are images/registry/referrers.hpp's).
// Pure: the caller moves the bytes.
#include <optional>
#include <string>
#include <string_view>

#include "base/digest.hpp"
#include "base/error.hpp"
#include "images/oci/layout.hpp"
#include "marks/keys.hpp"

namespace gpuenv::marks {

inline constexpr std::string_view k_bundle_media_type = "application/vnd.dev.sigstore.bundle.v0.3+json";
inline constexpr std::string_view k_empty_media_type = "application/vnd.oci.empty.v1+json";
inline constexpr std::string_view k_empty_blob = "{}";

/// The Sigstore bundle v0.3 of a signed envelope: the envelope as `dsseEnvelope` and the public key's hint
/// (standard base64 of the sha256 of its PKIX DER bytes) as verification material. Error `mark.bad_envelope`.
Result<std::string> bundle_of(std::string_view envelope_json, const Key& key);

/// The referrer manifest: artifactType the bundle's media type, the empty config, one layer (the bundle), SUBJECT
/// the image's manifest, and cosign's annotations (content dsse-envelope, the predicate type, CREATED).
std::string referrer_manifest(std::string_view bundle, const images::Descriptor& subject, std::string_view predicate_type, const std::string& created);


}  // namespace gpuenv::marks
