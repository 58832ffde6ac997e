// The rendezvous protocol's frames and messages (wire.hpp).
#include "validate/multinode/wire.hpp"

#include <cstring>
#include <exception>

#include "base/safe_text.hpp"

namespace gpuenv::validate::multinode {
namespace {

constexpr char k_magic[4] = {'G', 'E', 'M', 'N'};

Error protocol_error(const std::string& from, const std::string& what) {
  return make_error(ErrorKind::environment, "multinode.protocol", from + " sent a message gpuenv cannot accept: " + what,
                    from,
                    "every rank must run the same gpuenv release, and the rendezvous port must be gpuenv's alone: "
                    "check --peers/--rendezvous-port and that no other program answers there");
}

Result<int> int_field(const nlohmann::json& body, const char* name, int low, int high, const std::string& from) {
  const auto it = body.find(name);
  if (it == body.end() || !it->is_number_integer())
    return protocol_error(from, std::string("the hello has no integer '") + name + "'");
  const auto v = it->get<std::int64_t>();
  if (v < low || v > high)
    return protocol_error(from, std::string("the hello's '") + name + "' is " + std::to_string(v) + ", outside " +
                                    std::to_string(low) + ".." + std::to_string(high));
  return static_cast<int>(v);
}

Result<std::string> text_field(const nlohmann::json& body, const char* name, std::size_t max, const std::string& from) {
  const auto it = body.find(name);
  if (it == body.end() || !it->is_string())
    return protocol_error(from, std::string("the hello has no text '") + name + "'");
  const auto& s = it->get_ref<const std::string&>();
  if (s.size() > max) return protocol_error(from, std::string("the hello's '") + name + "' is too long");
  return s;
}

}  // namespace

Result<std::string> encode_message(MessageType type, const nlohmann::json& body) {
  const std::string payload = body.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
  if (payload.size() > k_max_payload)
    return protocol_error("this rank", "a message of " + std::to_string(payload.size()) + " bytes is over the limit");
  std::string out(k_magic, 4);
  out.push_back(static_cast<char>(k_protocol_version));
  out.push_back(static_cast<char>(type));
  out.push_back('\0');
  out.push_back('\0');
  const auto n = static_cast<std::uint32_t>(payload.size());
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((n >> shift) & 0xff));
  return out + payload;
}

Result<std::optional<Decoded>> decode_message(std::string_view bytes, const std::string& from) {
  const std::size_t seen = std::min<std::size_t>(bytes.size(), 4);
  if (std::memcmp(bytes.data(), k_magic, seen) != 0)
    return protocol_error(from, "it does not start with gpuenv's rendezvous magic (another program on this port?)");
  if (bytes.size() < k_frame_header) return std::optional<Decoded>{};
  const auto version = static_cast<std::uint8_t>(bytes[4]);
  if (version != k_protocol_version)
    return protocol_error(from, "protocol version " + std::to_string(version) + ", this gpuenv speaks " +
                                    std::to_string(k_protocol_version));
  const auto type = static_cast<std::uint8_t>(bytes[5]);
  if (type < 1 || type > 5) return protocol_error(from, "unknown message type " + std::to_string(type));
  if (bytes[6] != '\0' || bytes[7] != '\0') return protocol_error(from, "reserved header bytes are not zero");
  std::uint32_t n = 0;
  for (int i = 8; i < 12; ++i) n = (n << 8) | static_cast<std::uint8_t>(bytes[static_cast<std::size_t>(i)]);
  if (n > k_max_payload)
    return protocol_error(from, "a payload of " + std::to_string(n) + " bytes (the limit is " +
                                    std::to_string(k_max_payload) + ")");
  if (bytes.size() < k_frame_header + n) return std::optional<Decoded>{};
  Decoded d;
  d.message.type = static_cast<MessageType>(type);
  try {
    d.message.body = nlohmann::json::parse(bytes.substr(k_frame_header, n));
  } catch (const std::exception&) {
    return protocol_error(from, "the payload is not JSON");
  }
  if (!d.message.body.is_object()) return protocol_error(from, "the payload is not a JSON object");
  d.used = k_frame_header + n;
  return std::optional<Decoded>(std::move(d));
}

nlohmann::json hello_json(const Hello& hello) {
  return {{"protocol", hello.protocol}, {"rank", hello.rank}, {"world", hello.world},
          {"token", hello.token},       {"host", hello.host}, {"gpus", hello.gpus},
          {"samples", hello.samples},   {"level", hello.level}};
}

Result<Hello> parse_hello(const nlohmann::json& body, const std::string& from) {
  Hello h;
  GPUENV_TRY(protocol, int_field(body, "protocol", 0, 255, from));
  if (protocol != k_protocol_version)
    return protocol_error(from, "protocol " + std::to_string(protocol) + ", this gpuenv speaks " +
                                    std::to_string(k_protocol_version));
  GPUENV_TRY(world, int_field(body, "world", 1, 4096, from));
  GPUENV_TRY(rank, int_field(body, "rank", 0, world - 1, from));
  GPUENV_TRY(gpus, int_field(body, "gpus", 1, 64, from));
  GPUENV_TRY(token, text_field(body, "token", 256, from));
  GPUENV_TRY(host, text_field(body, "host", 255, from));
  GPUENV_TRY(samples, int_field(body, "samples", 1, 1000, from));
  GPUENV_TRY(level, text_field(body, "level", 16, from));
  h.samples = samples;
  h.level = safe_text(level, 16);
  h.protocol = protocol;
  h.world = world;
  h.rank = rank;
  h.gpus = gpus;
  h.token = std::move(token);
  h.host = safe_text(host, 255);
  return h;
}

std::string id_to_hex(const std::array<std::uint8_t, k_unique_id_bytes>& id) {
  static const char* k_digits = "0123456789abcdef";
  std::string out;
  for (std::uint8_t b : id) {
    out.push_back(k_digits[b >> 4]);
    out.push_back(k_digits[b & 15]);
  }
  return out;
}

Result<std::array<std::uint8_t, k_unique_id_bytes>> id_from_hex(const nlohmann::json& value, const std::string& from) {
  if (!value.is_string() || value.get_ref<const std::string&>().size() != 2 * k_unique_id_bytes)
    return protocol_error(from, "the NCCL unique id is not 256 hex digits");
  const auto& s = value.get_ref<const std::string&>();
  std::array<std::uint8_t, k_unique_id_bytes> id{};
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  for (std::size_t i = 0; i < k_unique_id_bytes; ++i) {
    const int hi = digit(s[2 * i]), lo = digit(s[2 * i + 1]);
    if (hi < 0 || lo < 0) return protocol_error(from, "the NCCL unique id is not 256 hex digits");
    id[i] = static_cast<std::uint8_t>(hi * 16 + lo);
  }
  return id;
}

}  // namespace gpuenv::validate::multinode
