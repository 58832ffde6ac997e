#pragma once
// The RDMA NICs of a node as sysfs describes them (/sys/class/infiniband/<device>/ports/<n>/{rate,state,link_layer},
// the kernel's ABI: Documentation/ABI/stable/sysfs-class-infiniband; `rate` is written by rate_show in
// drivers/infiniband/core/sysfs.c as "%d%s Gb/sec (%dX%s)", `state` as "%d: %s"), and the node's usable share of their
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

/// The node's usable RDMA link rate, GB/s: the rates (Gb/s) of the fastest min(GPUS, active ports) active ports,
/// summed, in bytes (/8). nccl-tests' bus bandwidth across nodes is the whole node's NIC rate (NCCL runs a ring per
/// NIC; NCCL's maintainers give "24GB/s ... per 200G NIC", NVIDIA/nccl-tests#119, so a node of 8 GPUs and 8 x 200G
/// NICs shows ~190 GB/s), and a GPU drives at most one NIC: 8 GPUs and 8 x 400G give 400 GB/s, 1 GPU and 8 x 400G
/// 50 GB/s. 0 when no port is active or GPUS < 1. The check applies the thresholds' rdma_nic fraction to it.
double node_nic_gbs(const NicSummary& nics, int gpus);

/// The ports that are not active ("mlx5_3/1, mlx5_7/1"), "" when all are.
std::string inactive_ports(const NicSummary& nics);

/// How many ports are active.
int active_ports(const NicSummary& nics);

/// "2 x 400 Gb/sec (4X NDR) active (mlx5_0/1, mlx5_1/1)", or the note when there are none.
std::string describe_nics(const NicSummary& nics);

}  // namespace gpuenv::validate::multinode
