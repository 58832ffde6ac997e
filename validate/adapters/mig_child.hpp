#pragma once
// A CUDA session on one MIG device, served by a child process of its own. CUDA enumerates one MIG device per
// process, the one CUDA_VISIBLE_DEVICES names when CUDA initialises (NVIDIA MIG user guide, "CUDA Device
// Enumeration", https://docs.nvidia.com/datacenter/tesla/mig-user-guide/mig-device-names.html), so one gpuenv run
// reaches every instance by forking one child per instance before any thread starts (GpuBackend::prepare), setting
// CUDA_VISIBLE_DEVICES in the child only, and forwarding each GpuSession call over a socket pair. Health is not
// forwarded: NVML keeps it per GPU, and the parent reads it. The child ends when the parent closes its socket, and
// is killed when the MigChild is destroyed (reaped if it ends within k_mig_child_reap_bound, else left to init).
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "base/error.hpp"
#include "validate/backend.hpp"

namespace gpuenv::validate {

/// Makes the session inside the child (after CUDA_VISIBLE_DEVICES is set there).
using ChildSessionFactory = std::function<Result<std::unique_ptr<GpuSession>>()>;

/// How long ~MigChild waits for its killed child to end. A child stuck uninterruptibly in the driver (a context
/// torn down after an Xid) cannot end at once even on SIGKILL; gpuenv does not wait for it past this bound: it
/// ends when the driver lets it, and once gpuenv has exited, init reaps it.
inline constexpr std::chrono::milliseconds k_mig_child_reap_bound{2000};

/// Reaps child `pid` if it ends within `bound`, polling waitpid(WNOHANG); false when it has not ended by then (or
/// is not a child of this process). Never blocks longer than `bound` plus one poll interval (10 ms).
bool reap_child_within(int pid, std::chrono::milliseconds bound);

/// One child process serving one MIG device's session.
class MigChild : public std::enable_shared_from_this<MigChild> {
 public:
  /// Forks the child for MIG device `uuid`. Call only while this process has a single thread (fork). Fails with
  /// `validate.mig_child` when no socket pair or process can be made.
  static Result<std::shared_ptr<MigChild>> start(const std::string& uuid, ChildSessionFactory open_in_child);
  /// Closes the socket, sends the child SIGKILL and reaps it within k_mig_child_reap_bound (see there).
  ~MigChild();
  MigChild(const MigChild&) = delete;
  MigChild& operator=(const MigChild&) = delete;

  /// Asks the child to open its session (once; later calls reuse it) and returns a session forwarding to it, whose
  /// health() calls `health_reader` here. Errors: the child's own (cuInit, context), or `validate.mig_child` when
  /// the child is gone.
  Result<std::unique_ptr<GpuSession>> open(std::function<Result<GpuHealth>()> health_reader);

  /// One request and its answer (internal to the forwarding session): serialised bytes both ways.
  Result<std::string> call(const std::string& request);

  [[nodiscard]] const std::string& uuid() const { return m_uuid; }

 private:
  MigChild(std::string uuid, int fd, int pid) : m_uuid(std::move(uuid)), m_fd(fd), m_pid(pid) {}
  std::string m_uuid;
  int m_fd = -1;
  int m_pid = -1;
  std::mutex m_mutex;  // one request at a time on the socket
  bool m_broken = false;
};

}  // namespace gpuenv::validate
