#pragma once
// The referrers tag schema's fallback index (distribution-spec 1.1, "Pushing Manifests with Subject"): for a
// registry without the referrers API, clients keep the list of a subject's referrers themselves, as an OCI index
// tagged `sha256-<subject hex>` (referrers_fallback_tag). The one writer of that index, for the marks' stores
// (marks/store) and the build cache (build_cache).
#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "base/digest.hpp"
#include "base/error.hpp"
#include "images/registry/registry_client.hpp"

namespace gpuenv::images {

/// Keep every referrer (referrers_index_with, add_to_fallback_index).
inline constexpr std::size_t k_every_referrer = std::numeric_limits<std::size_t>::max();

/// Newest first: a later org.opencontainers.image.created (RFC 3339 text), then the smaller digest. The one order
/// of referrers, for keeping the newest and for reading them.
bool referrer_is_newer(const std::string& created_a, const std::string& digest_a, const std::string& created_b, const std::string& digest_b);

/// EXISTING (an index's bytes; std::nullopt, or anything that is not an index, for none) with the referrer MANIFEST
/// (its bytes) listed: its media type, digest and size, with its artifactType and annotations copied, as the spec
/// asks. One entry per digest: EXISTING is returned as it is when it lists MANIFEST already. At most MAX_OF_TYPE
/// referrers of MANIFEST's artifactType are kept, the oldest (referrer_is_newer) dropped first, never MANIFEST.
std::string referrers_index_with(const std::optional<std::string>& existing, std::string_view manifest, std::size_t max_of_type = k_every_referrer);

/// Whether E, met while reading one referrer's manifest or blob, is that referrer's own fault (gone, altered,
/// malformed, too large) rather than the registry's (unreachable, refused credentials, failing).
bool is_referrer_fault(const Error& e);

/// Adds the referrer MANIFEST (its bytes, already put in REF's repository) to SUBJECT's fallback index there. A
/// registry has no compare-and-swap on tags, so concurrent writers could replace each other's index: the index is
/// read, extended (referrers_index_with), written and read back, then read once more after a pause of twice that
/// round trip (a writer that read it before our write may still write its own), and written again whenever MANIFEST
/// is missing, at most 8 times. A registry that refuses an index naming a deleted manifest (docker-registry 2.8:
/// MANIFEST_BLOB_UNKNOWN) gets it without the deleted entries. Returns the index PUTs made (0: it was listed already).
/// Error `registry.referrer_lost` when the index never keeps MANIFEST; the registry's.
Result<int> add_to_fallback_index(RegistryClient& client, const ImageReference& ref, const Digest& subject, std::string_view manifest,
                                  std::size_t max_of_type = k_every_referrer);

/// What put_referrer did.
struct PutReferrer {
  Digest manifest;             ///< the referrer's digest, as the registry confirmed it
  bool referrers_api = false;  ///< the registry keeps the list (else the fallback index does)
  int index_writes = 0;        ///< fallback index PUTs (add_to_fallback_index)
};

/// PUTs the referrer MANIFEST (its bytes; its blobs already put) into REF's repository under its digest, and makes
/// SUBJECT's list of referrers name it: the registry's own when it answers the referrers API (the OCI-Subject
/// header, else GET /referrers), else the fallback index (add_to_fallback_index, MAX_OF_TYPE). Errors as those.
Result<PutReferrer> put_referrer(RegistryClient& client, const ImageReference& ref, const Digest& subject, const std::string& manifest,
                                 std::size_t max_of_type = k_every_referrer);

}  // namespace gpuenv::images
