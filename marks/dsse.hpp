#pragma once
// DSSE envelopes (secure-systems-lab/dsse v1.0.2) as in-toto and cosign read them: payloadType
// "application/vnd.in-toto+json", payload and sig in standard base64 with padding, an ASN.1 DER ECDSA P-256 /
// SHA-256 signature over the pre-authentication encoding, keyid "" (a non-empty keyid breaks sigstore-go's
// bundle verification). Verification is on the payload bytes handed back, never on a re-parse of them.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/base64.hpp"
#include "base/error.hpp"
#include "marks/keys.hpp"

namespace gpuenv::marks {

inline constexpr std::string_view k_in_toto_payload_type = "application/vnd.in-toto+json";

/// PAE(type, body) = "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body, lengths in ASCII decimal.
std::string pre_authentication_encoding(std::string_view payload_type, std::string_view payload);

/// Standard base64 with padding; standard or URL-safe when read (DSSE verifiers must take either): base/base64.hpp.
using gpuenv::base64_decode;
using gpuenv::base64_encode;

/// The envelope JSON of PAYLOAD signed with KEY: {"payload","payloadType","signatures":[{"keyid":"","sig"}]}.
/// Error `mark.sign` when KEY cannot sign.
Result<std::string> sign_envelope(std::string_view payload, std::string_view payload_type, const Key& key);

/// What an envelope holds, read back.
struct Envelope {
  std::string payload_type;
  std::string payload;  ///< decoded
  std::vector<std::string> signatures;  ///< decoded DER signatures
};
/// Reads envelope JSON (at most 4 MiB). Error `mark.bad_envelope` (ErrorKind::environment) naming what is wrong.
Result<Envelope> parse_envelope(std::string_view json_text, const std::string& where);

/// The index in KEYS of the first key one of the envelope's signatures verifies under, over the PAE of its own
/// payload type and payload; -1 when none does.
int verifying_key(const Envelope& envelope, const std::vector<const Key*>& keys);

}  // namespace gpuenv::marks
