// validate --multi-node: the rank's place from Slurm or from the flags (multi_node.hpp).
#include "cli/multi_node.hpp"

#include <charconv>

#include "base/duration.hpp"
#include "base/safe_text.hpp"
#include "validate/multinode/hostlist.hpp"

namespace gpuenv::cli {
namespace {

constexpr int k_default_port = 29517;

Error usage(const std::string& message, const std::string& where, const std::string& hint) {
  return make_error(ErrorKind::usage, "validate.multi_node", message, where, hint);
}

std::optional<long long> number(const std::string& text) {
  long long v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

Result<std::uint64_t> buffer_bytes(const std::string& text) {
  static const std::pair<const char*, std::uint64_t> k_units[] = {{"GiB", 1ull << 30}, {"MiB", 1ull << 20}};
  for (const auto& [suffix, scale] : k_units) {
    const std::string s(suffix);
    if (text.size() > s.size() && text.compare(text.size() - s.size(), s.size(), s) == 0) {
      const auto n = number(text.substr(0, text.size() - s.size()));
      if (n && *n > 0 && static_cast<std::uint64_t>(*n) * scale >= (16ull << 20) &&
          static_cast<std::uint64_t>(*n) * scale <= (64ull << 30))
        return static_cast<std::uint64_t>(*n) * scale;
    }
  }
  return usage("--nccl-buffer '" + safe_text(text, 40) + "' is not a size from 16MiB to 64GiB", "--nccl-buffer",
               "write 256MiB or 1GiB");
}

// --peers: hosts by rank; only the first entry (rank 0, the one that listens) may carry a port.
Status apply_peers(const MultiNodeOptions& o, validate::multinode::NodeConfig& c) {
  std::string rest = o.peers;
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    std::string entry = rest.substr(0, comma);
    rest = comma == std::string::npos ? std::string() : rest.substr(comma + 1);
    const auto colon = entry.rfind(':');
    if (colon != std::string::npos && entry.find(']') == std::string::npos && entry.find(':') == colon) {
      const auto port = number(entry.substr(colon + 1));
      if (!c.hosts.empty())
        return usage("--peers gives a port on '" + safe_text(entry, 80) + "': only rank 0 listens", "--peers",
                     "give the rendezvous port on the first entry only (rank 0's), or with --rendezvous-port");
      if (!port || *port < 1 || *port > 65535)
        return usage("--peers: '" + safe_text(entry, 80) + "' has no valid port", "--peers", "write HOST:PORT");
      c.port = static_cast<int>(*port);
      entry = entry.substr(0, colon);
    }
    if (entry.empty() || entry.size() > 255 || !is_safe_text(entry))
      return usage("--peers has an empty or unprintable host", "--peers", "write HOST[:PORT],HOST,...");
    c.hosts.push_back(entry);
    if (c.hosts.size() > validate::multinode::k_max_hosts) return usage("--peers names too many hosts", "--peers", "");
  }
  if (o.rank < 0 || o.rank >= static_cast<int>(c.hosts.size()))
    return usage("--rank " + std::to_string(o.rank) + " is not one of the " + std::to_string(c.hosts.size()) +
                     " ranks --peers names",
                 "--rank", "give this process's rank, 0 for the first host of --peers");
  c.rank = o.rank;
  c.world = static_cast<int>(c.hosts.size());
  c.token = o.run_token.empty() ? "peers:" + o.peers : o.run_token;
  return ok_status();
}

Status apply_slurm(const MultiNodeOptions& o, const std::map<std::string, std::string>& env,
                   validate::multinode::NodeConfig& c) {
  auto get = [&env](const char* name) {
    const auto it = env.find(name);
    return it == env.end() ? std::string() : it->second;
  };
  const std::string list = !get("SLURM_STEP_NODELIST").empty() ? get("SLURM_STEP_NODELIST") : get("SLURM_JOB_NODELIST");
  const auto rank = number(get("SLURM_PROCID"));
  const auto tasks = number(get("SLURM_NTASKS"));
  if (list.empty() || !rank || !tasks)
    return usage("--multi-node needs --peers and --rank, or Slurm's SLURM_PROCID, SLURM_NTASKS and "
                 "SLURM_STEP_NODELIST (or SLURM_JOB_NODELIST)",
                 "--multi-node", "run it under srun -N<nodes> --ntasks-per-node=1, or give --peers HOST,... --rank N");
  GPUENV_TRY(hosts, validate::multinode::expand_hostlist(list));
  if (*tasks != static_cast<long long>(hosts.size()))
    return usage("SLURM_NTASKS is " + std::to_string(*tasks) + " but the node list has " + std::to_string(hosts.size()) +
                     " hosts: --multi-node runs one task per node, which drives all of its GPUs",
                 "SLURM_NTASKS", "run srun with --ntasks-per-node=1");
  if (*rank < 0 || *rank >= *tasks)
    return usage("SLURM_PROCID " + std::to_string(*rank) + " is not one of " + std::to_string(*tasks) + " tasks",
                 "SLURM_PROCID", "run it under srun");
  c.hosts = std::move(hosts);
  c.rank = static_cast<int>(*rank);
  c.world = static_cast<int>(*tasks);
  c.token = !o.run_token.empty() ? o.run_token
                                 : "slurm-" + get("SLURM_JOB_ID") + "." + get("SLURM_STEP_ID");
  return ok_status();
}

}  // namespace

Result<validate::multinode::NodeConfig> multi_node_config(const MultiNodeOptions& o,
                                                         const std::map<std::string, std::string>& env,
                                                         const std::string& local_host) {
  validate::multinode::NodeConfig c;
  c.port = k_default_port;
  if (!o.peers.empty()) {
    GPUENV_CHECK(apply_peers(o, c));
  } else {
    if (o.rank >= 0) return usage("--rank needs --peers", "--rank", "under Slurm the rank comes from SLURM_PROCID");
    GPUENV_CHECK(apply_slurm(o, env, c));
  }
  if (o.port != 0) {
    if (o.port < 1 || o.port > 65535)
      return usage("--rendezvous-port " + std::to_string(o.port) + " is not a port", "--rendezvous-port", "");
    c.port = o.port;
  }
  const auto timeout = parse_duration(o.timeout, "--rendezvous-timeout");
  if (!timeout || timeout->count() < 1 || timeout->count() > 3600)
    return usage("--rendezvous-timeout '" + safe_text(o.timeout, 40) + "' is not a duration from 1s to 1h",
                 "--rendezvous-timeout", "write 120s or 5m");
  c.rendezvous_timeout = std::chrono::milliseconds(timeout->count() * 1000);
  c.result_timeout = c.rendezvous_timeout;
  GPUENV_TRY(bytes, buffer_bytes(o.buffer));
  c.buffer_bytes = bytes;
  c.local_host = local_host.empty() ? c.hosts[static_cast<std::size_t>(c.rank)] : local_host;
  return c;
}

}  // namespace gpuenv::cli
