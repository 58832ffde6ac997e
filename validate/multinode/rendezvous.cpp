// The TCP rendezvous and orchestration of a multi-node all-reduce (rendezvous.hpp).
#include "validate/multinode/rendezvous.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <thread>
#include <utility>

#include "base/safe_text.hpp"
#include "base/unique_fd.hpp"

namespace gpuenv::validate::multinode {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t k_max_pending = 64;                        // hellos rank 0 reads at once
constexpr std::chrono::milliseconds k_hello_time{10000};         // for an accepted connection to say hello
constexpr std::chrono::milliseconds k_watch_every{20};           // between looks at the channel while measuring

Error rendezvous_error(const char* id, const std::string& message, const std::string& where, const std::string& hint) {
  return make_error(ErrorKind::environment, id, message, where, hint);
}

std::string rank_name_host(const NodeConfig& c, int rank) {
  return rank >= 0 && static_cast<std::size_t>(rank) < c.hosts.size() && !c.hosts[rank].empty() ? c.hosts[rank]
                                                                                                 : std::string("unknown host");
}

std::string rank_name(const NodeConfig& c, int rank) {
  return "rank " + std::to_string(rank) + " (" + rank_name_host(c, rank) + ")";
}

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 1000000));
}

// One TCP connection with what was read but not yet decoded.
struct Channel {
  UniqueFd fd;
  std::string from;    // "rank 1 (node02)" or "a connection from 10.0.0.2"
  std::string inbox;
  bool eof = false;
};

// Reads what the socket has now (without blocking); sets eof when the peer closed or reset it.
Status pump(Channel& ch) {
  char buffer[65536];
  while (!ch.eof && ch.inbox.size() <= k_frame_header + k_max_payload) {
    const ssize_t n = ::recv(ch.fd.get(), buffer, sizeof buffer, MSG_DONTWAIT);
    if (n > 0) {
      ch.inbox.append(buffer, static_cast<std::size_t>(n));
    } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      ch.eof = true;
    } else if (errno != EINTR) {
      break;
    }
  }
  return ok_status();
}

// The next whole message already received, if any.
Result<std::optional<Message>> take(Channel& ch) {
  GPUENV_TRY(decoded, decode_message(ch.inbox, ch.from));
  if (!decoded) return std::optional<Message>{};
  ch.inbox.erase(0, decoded->used);
  return std::optional<Message>(std::move(decoded->message));
}

// Waits for the next message until DEADLINE; an empty answer means the peer closed the connection.
Result<std::optional<Message>> read_message(Channel& ch, Clock::time_point deadline, const std::string& doing) {
  for (;;) {
    GPUENV_TRY(got, take(ch));
    if (got) return got;
    if (ch.eof) return std::optional<Message>{};
    pollfd p{ch.fd.get(), POLLIN, 0};
    const int left = remaining_ms(deadline);
    if (left == 0)
      return rendezvous_error("multinode.timeout", ch.from + " sent nothing in time while " + doing, ch.from,
                              "the peer may be stuck or the network may drop packets; check the peer's node");
    if (::poll(&p, 1, std::min(left, 200)) < 0 && errno != EINTR)
      return io_error({"multinode.timeout", "check the network"}, "poll", ch.from);
    GPUENV_CHECK(pump(ch));
  }
}

Status write_message(Channel& ch, MessageType type, const nlohmann::json& body, Clock::time_point deadline) {
  GPUENV_TRY(bytes, encode_message(type, body));
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(ch.fd.get(), bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return rendezvous_error("multinode.peer_lost", "the connection to " + ch.from + " broke: " + std::strerror(errno),
                              ch.from, "the peer's gpuenv ended: read its output and its node's logs");
    pollfd p{ch.fd.get(), POLLOUT, 0};
    if (remaining_ms(deadline) == 0)
      return rendezvous_error("multinode.timeout", ch.from + " took nothing in time", ch.from,
                              "the peer may be stuck; check its node");
    (void)::poll(&p, 1, std::min(remaining_ms(deadline), 200));
  }
  return ok_status();
}

// ---- connecting ----------------------------------------------------------------------------------------------

Result<UniqueFd> listen_on(int port) {
  UniqueFd fd(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  bool v6 = fd.get() >= 0;
  if (!v6) fd = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  const std::string where = "port " + std::to_string(port);
  const IoArea area{"multinode.connect", "choose another --rendezvous-port, or end the program that holds this one"};
  if (fd.get() < 0) return io_error(area, "socket", where);
  const int one = 1, zero = 0;
  (void)::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int rc = -1;
  if (v6) {
    (void)::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);  // IPv4 peers too
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_any;
    a.sin6_port = htons(static_cast<std::uint16_t>(port));
    rc = ::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a);
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    rc = ::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a);
  }
  if (rc != 0) return io_error(area, "listening for the other ranks (bind)", where);
  if (::listen(fd.get(), 128) != 0) return io_error(area, "listen", where);
  return fd;
}

// One non-blocking connect to any address of host:port, bounded by DEADLINE; an empty fd when it failed.
UniqueFd try_connect(const std::string& host, int port, Clock::time_point deadline, std::string& why) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0) {
    why = std::string("cannot resolve it: ") + ::gai_strerror(rc);
    return UniqueFd{};
  }
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> list(found, ::freeaddrinfo);
  for (addrinfo* a = found; a; a = a->ai_next) {
    UniqueFd fd(::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (fd.get() < 0) continue;
    if (::connect(fd.get(), a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
      why = std::strerror(errno);
      continue;
    }
    pollfd p{fd.get(), POLLOUT, 0};
    if (::poll(&p, 1, std::min(remaining_ms(deadline), 2000)) <= 0) {
      why = "the connection was not accepted in time";
      continue;
    }
    int err = 0;
    socklen_t len = sizeof err;
    (void)::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      why = std::strerror(err);
      continue;
    }
    const int one = 1;
    (void)::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
  }
  return UniqueFd{};
}

Result<Channel> connect_until(const NodeConfig& c, Clock::time_point deadline) {
  const std::string& host = c.hosts.front();
  std::string why = "nothing tried";
  while (true) {
    UniqueFd fd = try_connect(host, c.port, deadline, why);
    if (fd.get() >= 0) return Channel{std::move(fd), rank_name(c, 0), {}, false};
    if (remaining_ms(deadline) == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(200, remaining_ms(deadline))));
  }
  return rendezvous_error("multinode.connect",
                          "rank " + std::to_string(c.rank) + " could not reach " + rank_name(c, 0) + " at port " +
                              std::to_string(c.port) + " within " + std::to_string(c.rendezvous_timeout.count()) +
                              " ms (last: " + why + ")",
                          host, "start rank 0 (srun starts every rank at once), and check that the port is open between the nodes");
}

// ---- messages ----------------------------------------------------------------------------------------------

nlohmann::json report_json(const RankReport& r) {
  nlohmann::json j = {{"rank", r.rank}, {"host", r.host}, {"gpus", r.gpus}, {"error_id", r.error_id},
                      {"error_message", r.error_message}, {"nic_note", r.nics.note}};
  if (r.samples) {
    j["values"] = r.samples->values;
    j["data_verified"] = r.samples->data_verified;
    j["library"] = r.samples->library;
  }
  auto ports = nlohmann::json::array();
  for (const NicPort& p : r.nics.ports)
    ports.push_back({{"device", p.device}, {"port", p.port}, {"gbps", p.gbps}, {"rate", p.rate},
                     {"active", p.active}, {"link_layer", p.link_layer}});
  j["nics"] = ports;
  return j;
}

std::string text_of(const nlohmann::json& body, const char* name, std::size_t max) {
  const auto it = body.find(name);
  return it != body.end() && it->is_string() ? safe_text(it->get_ref<const std::string&>(), max) : std::string();
}

// A rank's result as rank 0 reads it: every field checked, every text made safe, at most 64 samples and 64 ports.
Result<RankReport> parse_report(const nlohmann::json& body, int rank, const NodeConfig& c) {
  const std::string from = rank_name(c, rank);
  auto bad = [&](const std::string& what) {
    return make_error(ErrorKind::environment, "multinode.protocol", from + " sent a result gpuenv cannot read: " + what,
                      from, "every rank must run the same gpuenv release");
  };
  RankReport r;
  r.rank = rank;
  r.host = c.hosts.size() > static_cast<std::size_t>(rank) ? c.hosts[rank] : text_of(body, "host", 255);
  const auto gpus = body.find("gpus");
  if (gpus == body.end() || !gpus->is_number_integer()) return bad("no 'gpus'");
  r.gpus = static_cast<int>(std::clamp<std::int64_t>(gpus->get<std::int64_t>(), 0, 64));
  r.error_id = text_of(body, "error_id", 64);
  r.error_message = text_of(body, "error_message", 2000);
  if (const auto v = body.find("values"); v != body.end()) {
    if (!v->is_array() || v->size() > 64) return bad("'values' is not a list of at most 64 numbers");
    Samples s;
    s.unit = "GB/s";
    s.engine = "nccl";
    for (const auto& x : *v) {
      if (!x.is_number() || !(x.get<double>() >= 0) || x.get<double>() > 1e6) return bad("a sample is not a figure");
      s.values.push_back(x.get<double>());
    }
    const auto dv = body.find("data_verified");
    s.data_verified = dv != body.end() && dv->is_boolean() && dv->get<bool>();
    s.library = text_of(body, "library", 255);
    r.samples = std::move(s);
  }
  if (!r.samples && r.error_id.empty()) return bad("it holds neither a measurement nor an error");
  r.nics.note = text_of(body, "nic_note", 500);
  const auto ports = body.find("nics");
  if (ports != body.end() && ports->is_array()) {
    for (const auto& p : *ports) {
      if (r.nics.ports.size() >= 64 || !p.is_object()) break;
      NicPort port{text_of(p, "device", 64), text_of(p, "port", 16), 0, text_of(p, "rate", 80), false,
                   text_of(p, "link_layer", 32)};
      if (const auto g = p.find("gbps"); g != p.end() && g->is_number()) port.gbps = std::clamp(g->get<double>(), 0.0, 1e5);
      if (const auto a = p.find("active"); a != p.end() && a->is_boolean()) port.active = a->get<bool>();
      r.nics.ports.push_back(std::move(port));
    }
  }
  return r;
}

Error error_from(const nlohmann::json& body, const std::string& from) {
  std::string id = text_of(body, "id", 64);
  if (id.rfind("multinode.", 0) != 0) id = "multinode.peer_lost";
  return rendezvous_error(id.c_str(), from + " ended the run: " + text_of(body, "reason", 2000), from,
                          "read the message: it names the rank that is missing or failed, and that rank's node");
}

// ---- rank 0 ----------------------------------------------------------------------------------------------------

struct Pending {
  Channel ch;
  Clock::time_point since;
};

// Why rank 0 turns HELLO away, or "" when it fits.
std::string misfit(const NodeConfig& c, int gpus, const Hello& h, const std::map<int, Channel>& ranks) {
  if (h.token != c.token) return "its run token differs from rank 0's (another job or step on the same port?)";
  if (h.world != c.world)
    return "it counts " + std::to_string(h.world) + " ranks, rank 0 counts " + std::to_string(c.world);
  if (h.rank == 0) return "it says it is rank 0 too";
  if (ranks.count(h.rank)) return "rank " + std::to_string(h.rank) + " already said hello";
  if (h.samples != c.samples || h.level != c.level)
    return "it runs level " + (h.level.empty() ? std::string("?") : h.level) + " (" + std::to_string(h.samples) +
           " samples), rank 0 runs level " + (c.level.empty() ? std::string("?") : c.level) + " (" +
           std::to_string(c.samples) + " samples): start every rank with the same --level";
  if (h.gpus != gpus)
    return "it drives " + std::to_string(h.gpus) + " GPUs, rank 0 drives " + std::to_string(gpus) +
           " (every node must select as many)";
  return {};
}

// Reads the hellos that arrived on pending connections; a fitting one moves to RANKS, a bad one is refused.
void read_hellos(const NodeConfig& c, int gpus, std::vector<Pending>& pending, std::map<int, Channel>& ranks,
                 std::vector<std::string>& refused) {
  for (auto it = pending.begin(); it != pending.end();) {
    Channel& ch = it->ch;
    (void)pump(ch);
    auto got = take(ch);
    std::string why;
    if (!got) {
      why = got.error().message;
    } else if (*got && (*got)->type != MessageType::hello) {
      why = ch.from + " spoke before saying hello";
    } else if (*got) {
      auto hello = parse_hello((*got)->body, ch.from);
      if (!hello) {
        why = hello.error().message;
      } else if (std::string m = misfit(c, gpus, *hello, ranks); !m.empty()) {
        why = "refused the hello of rank " + std::to_string(hello->rank) + " from " + ch.from + ": " + m;
        (void)write_message(ch, MessageType::refused, {{"reason", m}}, Clock::now() + std::chrono::seconds(2));
      } else {
        ch.from = rank_name(c, hello->rank);
        ranks.emplace(hello->rank, std::move(ch));
        it = pending.erase(it);
        continue;
      }
    } else if (ch.eof) {
      why = ch.from + " closed the connection without a hello";
    } else if (Clock::now() - it->since > k_hello_time) {
      why = ch.from + " said no hello within " + std::to_string(k_hello_time.count()) + " ms";
    } else {
      ++it;
      continue;
    }
    if (refused.size() < 16) refused.push_back(why);
    it = pending.erase(it);
  }
}

void accept_all(int listener, std::vector<Pending>& pending) {
  for (;;) {
    sockaddr_storage peer{};
    socklen_t len = sizeof peer;
    UniqueFd fd(::accept4(listener, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (fd.get() < 0) return;
    if (pending.size() >= k_max_pending) continue;  // closed: a flood cannot grow the list
    char host[NI_MAXHOST] = "?";
    (void)::getnameinfo(reinterpret_cast<sockaddr*>(&peer), len, host, sizeof host, nullptr, 0, NI_NUMERICHOST);
    const int one = 1;
    (void)::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    pending.push_back({Channel{std::move(fd), "a connection from " + safe_text(host, 64), {}, false}, Clock::now()});
  }
}

void abort_all(std::map<int, Channel>& ranks, const Error& why) {
  const auto deadline = Clock::now() + std::chrono::seconds(2);
  for (auto& entry : ranks)
    (void)write_message(entry.second, MessageType::abort, {{"id", why.id}, {"reason", why.message}}, deadline);
}

// Waits for every other rank's hello until the rendezvous deadline.
Result<std::map<int, Channel>> gather_hellos(const NodeConfig& c, int gpus) {
  GPUENV_TRY(listener, listen_on(c.port));
  const auto deadline = Clock::now() + c.rendezvous_timeout;
  std::map<int, Channel> ranks;
  std::vector<Pending> pending;
  std::vector<std::string> refused;
  while (static_cast<int>(ranks.size()) < c.world - 1 && remaining_ms(deadline) > 0) {
    std::vector<pollfd> fds{{listener.get(), POLLIN, 0}};
    for (const Pending& p : pending) fds.push_back({p.ch.fd.get(), POLLIN, 0});
    (void)::poll(fds.data(), fds.size(), std::min(remaining_ms(deadline), 200));
    accept_all(listener.get(), pending);
    read_hellos(c, gpus, pending, ranks, refused);
  }
  if (static_cast<int>(ranks.size()) == c.world - 1) return ranks;
  std::string missing;
  for (int r = 1; r < c.world; ++r)
    if (!ranks.count(r)) missing += (missing.empty() ? "" : ", ") + rank_name(c, r);
  std::string message = "rank 0 waited " + std::to_string(c.rendezvous_timeout.count()) + " ms and these ranks never said hello: " + missing;
  for (const std::string& r : refused) message += "; " + r;
  Error e = rendezvous_error("multinode.peer_missing", message, missing,
                             "start gpuenv on every node of the job (srun -N<nodes> --ntasks-per-node=1), check that "
                             "they reach rank 0's port, and that every rank runs with the same run token");
  abort_all(ranks, e);
  return e;
}

// Looks at every rank without a result: stores results, fails on an abort, a failed rank or a closed channel.
Status watch_ranks(const NodeConfig& c, std::map<int, Channel>& ranks, std::map<int, RankReport>& results) {
  for (auto& [rank, ch] : ranks) {
    if (results.count(rank)) continue;
    (void)pump(ch);
    GPUENV_TRY(got, take(ch));
    if (got) {
      if (got->type == MessageType::abort) return error_from(got->body, ch.from);
      if (got->type != MessageType::result) continue;
      GPUENV_TRY(report, parse_report(got->body, rank, c));
      const std::string failed = report.error_id.empty() ? std::string() : report.error_message;
      results[rank] = std::move(report);
      if (!failed.empty())
        return rendezvous_error("multinode.peer_failed", ch.from + " failed: " + failed, ch.from,
                                "read that rank's own report for the details");
      continue;
    }
    if (ch.eof)
      return rendezvous_error("multinode.peer_lost",
                              ch.from + " closed its connection before sending its result: its gpuenv died or was killed",
                              ch.from, "look at that node: its gpuenv's output, dmesg (out of memory, Xid errors) and the Slurm step's log");
  }
  return ok_status();
}

// After the measurement failed: when a peer's channel says why within a short grace (it died, it failed, rank 0
// aborted), that is the error, naming the rank, with the measurement's own error after it; else the measurement's.
// An error the watch gave (multinode.*) is returned as it is.
Error blame_peer(const std::function<Status()>& look, Error own) {
  if (own.id.rfind("multinode.", 0) == 0) return own;  // the watch itself ended it: that error names the peer already
  const auto until = Clock::now() + std::chrono::milliseconds(2000);
  while (Clock::now() < until) {
    if (auto s = look(); !s) {
      Error e = s.error();
      e.message += "; this rank's all-reduce failed meanwhile: " + own.message;
      return e;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return own;
}

// A measurement that came back empty (no NCCL loaded on this rank) as the error it is, so no rank ever reports
// neither a figure nor an error.
Result<Samples> measured_or_error(Result<std::optional<Samples>> measured) {
  if (!measured) return std::move(measured).error();
  if (!*measured)
    return make_error(ErrorKind::environment, "nccl.missing", "no NCCL library loads on this rank", "libnccl",
                      "install NCCL (libnccl2) on every node, or run with --image");
  return std::move(**measured);
}

Watch rate_limited(std::function<Status()> look) {
  auto last = std::make_shared<Clock::time_point>();
  return [look = std::move(look), last]() -> Status {
    const auto now = Clock::now();
    if (now - *last < k_watch_every) return ok_status();
    *last = now;
    return look();
  };
}

Result<MultiNodeResult> run_root(const NodeConfig& c, int gpus, const NicSummary& nics, const NcclRanks& nccl) {
  GPUENV_TRY(ranks, gather_hellos(c, gpus));
  auto id = nccl.unique_id();
  if (!id) {
    abort_all(ranks, id.error());
    return std::move(id).error();
  }
  const auto start_deadline = Clock::now() + std::chrono::seconds(10);
  for (auto& entry : ranks) {
    if (auto s = write_message(entry.second, MessageType::start,
                                {{"id", id_to_hex(*id)}, {"bytes", c.buffer_bytes}}, start_deadline); !s) {
      abort_all(ranks, s.error());
      return std::move(s).error();
    }
  }
  std::map<int, RankReport> results;
  const Watch watch = rate_limited([&c, &ranks, &results] { return watch_ranks(c, ranks, results); });
  auto own = measured_or_error(nccl.measure(*id, 0, c.world * gpus, c.buffer_bytes, watch));
  if (!own) {
    Error e = blame_peer([&c, &ranks, &results] { return watch_ranks(c, ranks, results); }, std::move(own).error());
    abort_all(ranks, e);
    return e;
  }
  const auto deadline = Clock::now() + c.result_timeout;
  while (static_cast<int>(results.size()) < c.world - 1) {
    if (auto s = watch_ranks(c, ranks, results); !s) return std::move(s).error();
    if (remaining_ms(deadline) == 0) {
      std::string late;
      for (int r = 1; r < c.world; ++r)
        if (!results.count(r)) late += (late.empty() ? "" : ", ") + rank_name(c, r);
      return rendezvous_error("multinode.timeout", "no result from " + late + " within " +
                                  std::to_string(c.result_timeout.count()) + " ms of rank 0's", late,
                              "those ranks may be stuck in NCCL: check their nodes and the fabric (ibstat)");
    }
    std::vector<pollfd> fds;
    for (const auto& entry : ranks) fds.push_back({entry.second.fd.get(), POLLIN, 0});
    (void)::poll(fds.data(), fds.size(), std::min(remaining_ms(deadline), 200));
  }
  MultiNodeResult out{0, c.world, {}};
  out.ranks.push_back({0, c.hosts.front(), gpus, std::move(*own), {}, {}, nics});
  for (auto& entry : results) out.ranks.push_back(std::move(entry.second));
  return out;
}

// ---- the other ranks -------------------------------------------------------------------------------------------

struct Start {
  UniqueId id{};
  std::uint64_t bytes = 0;
};

Result<Start> await_start(const NodeConfig& c, Channel& ch, int gpus) {
  const auto deadline = Clock::now() + c.rendezvous_timeout;
  GPUENV_CHECK(write_message(ch, MessageType::hello, hello_json({k_protocol_version, c.rank, c.world, c.token, c.local_host, gpus, c.samples, c.level}),
                             deadline));
  // Rank 0 answers once every rank arrived, or when its own deadline passed: allow it its whole wait and more.
  GPUENV_TRY(got, read_message(ch, deadline + c.rendezvous_timeout, "waiting for rank 0 to start the run"));
  if (!got)
    return rendezvous_error("multinode.peer_lost", ch.from + " closed the connection before starting the run", ch.from,
                            "read rank 0's output: it says why it ended");
  if (got->type == MessageType::refused)
    return rendezvous_error("multinode.refused", ch.from + " refused rank " + std::to_string(c.rank) + ": " +
                                text_of(got->body, "reason", 500), ch.from,
                            "start every rank of one run with the same --run-token, world size and GPU count");
  if (got->type == MessageType::abort) return error_from(got->body, ch.from);
  if (got->type != MessageType::start)
    return rendezvous_error("multinode.protocol", ch.from + " sent another message than the start", ch.from,
                            "every rank must run the same gpuenv release");
  const auto it = got->body.find("id");
  GPUENV_TRY(id, id_from_hex(it == got->body.end() ? nlohmann::json() : *it, ch.from));
  const auto bytes = got->body.find("bytes");
  if (bytes == got->body.end() || !bytes->is_number_unsigned() || bytes->get<std::uint64_t>() > (64ull << 30))
    return rendezvous_error("multinode.protocol", ch.from + " sent no buffer size up to 64 GiB", ch.from,
                            "every rank must run the same gpuenv release");
  return Start{id, bytes->get<std::uint64_t>()};
}

Status watch_root(Channel& ch) {
  (void)pump(ch);
  GPUENV_TRY(got, take(ch));
  if (got && got->type == MessageType::abort) return error_from(got->body, ch.from);
  if (ch.eof)
    return rendezvous_error("multinode.peer_lost", ch.from + " closed its connection during the all-reduce: its gpuenv died or was killed",
                            ch.from, "look at rank 0's node: its gpuenv's output, dmesg and the Slurm step's log");
  return ok_status();
}

Result<MultiNodeResult> run_peer(const NodeConfig& c, int gpus, const NicSummary& nics, const NcclRanks& nccl) {
  GPUENV_TRY(ch, connect_until(c, Clock::now() + c.rendezvous_timeout));
  GPUENV_TRY(start, await_start(c, ch, gpus));
  Channel* channel = &ch;
  const Watch watch = rate_limited([channel] { return watch_root(*channel); });
  auto own = measured_or_error(nccl.measure(start.id, c.rank * gpus, c.world * gpus, start.bytes, watch));
  // Named as rank 0 and the errors name it (--peers or the Slurm node list); the hello carries its own name too.
  RankReport mine{c.rank, rank_name_host(c, c.rank), gpus, std::nullopt, {}, {}, nics};
  if (!own) {
    Error e = blame_peer([channel] { return watch_root(*channel); }, std::move(own).error());
    mine.error_id = e.id;
    mine.error_message = e.message;
    (void)write_message(ch, MessageType::result, report_json(mine), Clock::now() + std::chrono::seconds(2));
    return e;
  }
  mine.samples = std::move(*own);
  const auto sent = write_message(ch, MessageType::result, report_json(mine), Clock::now() + std::chrono::seconds(10));
  if (!sent) return sent.error();
  return MultiNodeResult{c.rank, c.world, {std::move(mine)}};
}

}  // namespace

Result<MultiNodeResult> run_rank(const NodeConfig& config, int gpus, const NicSummary& nics, const NcclRanks& nccl) {
  auto bad = [](const std::string& m) {
    return make_error(ErrorKind::usage, "validate.bad_request", m, "multi-node", "check --rank, --peers and the Slurm variables");
  };
  if (config.world < 1 || config.rank < 0 || config.rank >= config.world)
    return bad("rank " + std::to_string(config.rank) + " is not one of " + std::to_string(config.world) + " ranks");
  if (config.hosts.empty() || config.hosts.front().empty()) return bad("rank 0's host is not known");
  if (config.port < 1 || config.port > 65535) return bad("the rendezvous port " + std::to_string(config.port) + " is not a port");
  if (gpus < 1) return bad("a rank needs at least one GPU");
  if (config.samples < 1 || config.samples > 1000) return bad(std::to_string(config.samples) + " samples is not 1..1000");
  if (!nccl.unique_id || !nccl.measure) return bad("no NCCL measurement was wired");
  try {
    return config.rank == 0 ? run_root(config, gpus, nics, nccl) : run_peer(config, gpus, nics, nccl);
  } catch (const std::exception& e) {
    return make_error(ErrorKind::environment, "multinode.protocol", std::string("the rendezvous failed on the host: ") + e.what(),
                      "multi-node", "the machine may be short of memory");
  }
}

}  // namespace gpuenv::validate::multinode
