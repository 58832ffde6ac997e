#pragma once
// Slurm's hostlist syntax ("node[01-02,05],login1"), as SLURM_JOB_NODELIST and SLURM_STEP_NODELIST carry it, expanded
// into host names in order. Bounded: a list expands to at most k_max_hosts names of at most k_max_host_bytes each, and
// a hostile or malformed list is refused with what was wrong and where.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"

namespace gpuenv::validate::multinode {

constexpr std::size_t k_max_hosts = 4096;       ///< more names than any job gpuenv validates at once
constexpr std::size_t k_max_host_bytes = 255;   ///< a DNS name's limit
constexpr std::size_t k_max_hostlist_bytes = 65536;

/// Expands LIST: comma-separated entries, each a prefix, any number of bracketed range groups ("[01-03,7]", ranges
/// keep the zero padding of their lower bound, as Slurm does) and a suffix. Fails with `multinode.hostlist` (kind
/// usage) on an empty entry, an unbalanced or nested bracket, a bound that is not a number, a range that runs
/// backwards, a name that is not a host name (letters, digits, '-', '.', '_'), or more than k_max_hosts names.
Result<std::vector<std::string>> expand_hostlist(std::string_view list);

}  // namespace gpuenv::validate::multinode
