#pragma once
// The RDMA NICs of a node as sysfs describes them (/sys/class/infiniband/<device>/ports/<n>/{rate,state,link_layer},
// the kernel's ABI: Documentation/ABI/stable/sysfs-class-infiniband; `rate` is written by rate_show in
// drivers/infiniband/core/sysfs.c as "%d%s Gb/sec (%dX%s)", `state` as "%d: %s"), and each NCCL rank's share of their
// rate, which the thresholds' rdma_nic rule turns into a bus-bandwidth reference (docs/validate.md "More than one
// node"). NVML has no query for a NIC's link rate (its device queries cover GPUs, their PCIe and NVLink), so sysfs is
// the source.
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"

namespace gpuenv::validate::multinode {

/// One port of an RDMA device.
struct NicPort {
  std::string device;      ///< "mlx5_0"
  std::string port;        ///< "1"
  double gbps = 0;         ///< link rate, Gb/s (1e9 bits), from `rate`
  std::string rate;        ///< `rate` as read ("400 Gb/sec (4X NDR)")
  bool active = false;     ///< `state` is "4: ACTIVE"
  std::string link_layer;  ///< "InfiniBand" or "Ethernet" (RoCE)
};

/// The ports of a node, and what was read.
struct NicSummary {
  std::vector<NicPort> ports;  ///< sorted by device and port
  std::string note;            ///< why none were read ("no /sys/class/infiniband"), else ""
};

/// The rate in Gb/s of a sysfs `rate` text: "400 Gb/sec (4X NDR)", "100 Gb/sec (2X HDR)", "2.5 Gb/sec (1X SDR)".
/// Fails with `multinode.nic_rate` when the text does not start with a positive number and " Gb/sec".
Result<double> parse_nic_rate(std::string_view text);

/// Reads SYSFS_ROOT/class/infiniband/*/ports/*/ (SYSFS_ROOT is "/sys" on a host, a fixture tree in tests). Bounded:
/// at most 64 devices of 8 ports, each file read up to 256 bytes. Ports whose rate cannot be read are left out, with
/// the reason in the note. Never fails: a node without RDMA devices has no ports.
NicSummary read_nics(const std::string& sysfs_root);

/// One NCCL rank's share of its node's RDMA link rate, GB/s: the active ports' total rate (Gb/s) over
/// max(GPUS, active ports), in bytes (/8); a node with more ports than GPUs gives each rank one port's rate (a GPU
/// reaches its nearest NIC). 0 when no port is active. The check applies the thresholds' rdma_nic fraction to it.
double nic_share_gbs(const NicSummary& nics, int gpus);

/// "2 x 400 Gb/sec (4X NDR) active (mlx5_0/1, mlx5_1/1)", or the note when there are none.
std::string describe_nics(const NicSummary& nics);

}  // namespace gpuenv::validate::multinode
