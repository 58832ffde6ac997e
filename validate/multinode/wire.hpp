#pragma once
// The rendezvous protocol of `validate --multi-node` (docs/validate.md "More than one node"): framed JSON messages
// between rank 0 and each other rank over one TCP connection. A frame is "GEMN", a version byte, a type byte, two
// zero bytes, a big-endian 32-bit payload length (at most k_max_payload) and the payload, a JSON object. The decoder is
// pure and bounded: it never reads past what it was given, refuses a wrong magic, version or type, an oversize length
// and a payload that is not a JSON object, so a stray or hostile peer is turned away with the reason.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.hpp"

namespace gpuenv::validate::multinode {

constexpr std::uint8_t k_protocol_version = 1;
constexpr std::size_t k_frame_header = 12;
constexpr std::size_t k_max_payload = 64 * 1024;  ///< a result of 64 samples and its notes fits many times over
constexpr std::size_t k_unique_id_bytes = 128;    ///< NCCL_UNIQUE_ID_BYTES (nccl.h)

enum class MessageType : std::uint8_t {
  hello = 1,    ///< rank > 0 to rank 0: protocol, rank, world size, run token, host, local GPUs
  start = 2,    ///< rank 0 to the others: the NCCL unique id; the all-reduce may begin
  refused = 3,  ///< rank 0 to a rank it turns away, with the reason
  result = 4,   ///< rank > 0 to rank 0: its measurement or its error, and its NICs
  abort = 5,    ///< either way: the run is over early, with the reason (a missing or dead peer)
};

/// One decoded message.
struct Message {
  MessageType type = MessageType::hello;
  nlohmann::json body;  ///< always an object
};

/// The frame for TYPE and BODY (an object). Fails with `multinode.protocol` when the payload would exceed
/// k_max_payload.
Result<std::string> encode_message(MessageType type, const nlohmann::json& body);

/// Decodes one frame from the front of BYTES: empty while BYTES holds less than a whole frame (read more),
/// the message and the bytes it used otherwise. Fails with `multinode.protocol` on a wrong magic, version, type or
/// reserved bytes, a length over k_max_payload, or a payload that is not a JSON object; FROM names the sender.
struct Decoded {
  Message message;
  std::size_t used = 0;
};
Result<std::optional<Decoded>> decode_message(std::string_view bytes, const std::string& from);

/// What a rank says in its hello.
struct Hello {
  int protocol = k_protocol_version;
  int rank = 0;
  int world = 0;
  std::string token;
  std::string host;
  int gpus = 0;  ///< GPUs this rank drives
  int samples = 1;    ///< samples this rank measures (its level's); every rank must take rank 0's
  std::string level;  ///< the level those samples come from ("standard"), to name it when they differ
};
nlohmann::json hello_json(const Hello& hello);
/// Reads a hello; `multinode.protocol` names the field that is missing, of the wrong type or out of range.
Result<Hello> parse_hello(const nlohmann::json& body, const std::string& from);

/// The 128-byte NCCL unique id as 256 lowercase hex digits, and back (`multinode.protocol` when it is not that).
std::string id_to_hex(const std::array<std::uint8_t, k_unique_id_bytes>& id);
Result<std::array<std::uint8_t, k_unique_id_bytes>> id_from_hex(const nlohmann::json& value, const std::string& from);

}  // namespace gpuenv::validate::multinode
