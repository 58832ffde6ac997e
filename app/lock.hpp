#pragma once
// Locking a spec: resolve, then pin every package (apt closure and wheels, verified against their indexes), and
// render the lock; write it where the request says.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "app/resolve.hpp"
#include "app/services.hpp"
#include "resolver/lockfile.hpp"

namespace gpuenv::app {

struct LockRequest {
  ResolveRequest resolve;
  std::string host_root = "/";  ///< where /etc/apt (keyrings, sources) and /etc/pip.conf are read
  bool offline = false;         ///< use only the cache
  std::string output;           ///< where the lock is written (atomically) when satisfied; "" to write nothing
};

struct MadeLock {
  std::unique_ptr<PreparedResolution> prepared;
  /// False when no combination fits: then only `prepared` is set (prepared->resolution says why).
  [[nodiscard]] bool satisfied() const { return prepared && prepared->resolution.ok; }
  std::string text;      ///< the lock's bytes
  resolver::Lock lock;   ///< the lock as a value, which `text` renders (resolver::render_lock)
  std::vector<std::string> wheel_requirements;
  std::uint64_t debs = 0, wheels = 0, bytes = 0;
};

/// Resolves and pins. Errors: those of resolve, of the sources, and of pinning (`apt.*`, `wheel.*`, ...).
Result<MadeLock> lock(const LockRequest& request, Services& services);

}  // namespace gpuenv::app
