#pragma once
// Base64 (RFC 4648): the one encoder and decoder of gpuenv (registry credentials, DSSE envelopes, attestation
// evidence).
#include <optional>
#include <string>
#include <string_view>

namespace gpuenv {

/// Standard base64 with padding.
std::string base64_encode(std::string_view bytes);
/// Standard or URL-safe base64 (DSSE verifiers must take either), padding optional, canonical trailing bits;
/// std::nullopt for anything else.
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace gpuenv
