// Host facts from the CUDA driver API. cuInit can hang on a broken driver, so the whole probe runs in a
// child process that reports over a pipe and is killed when it overruns its deadline.
#include <dlfcn.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include "validate/host_probe.hpp"

namespace gpuenv::validate {
namespace {

using CUresult = int;
using CUdevice = int;
/// The `detect.libcuda` errors of starting the probe process (no hint: the library's path is where).
constexpr IoArea k_probe_io{"detect.libcuda", ""};
constexpr int k_attr_cc_major = 75;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int k_attr_cc_minor = 76;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
constexpr int k_attr_pci_device = 34; // CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID (slot on the bus, not the product id)

// Runs in the child: writes "key value" lines to fd. Exit status 3 = library absent.
[[noreturn]] void child_main(int fd, const std::string& library) {
  void* h = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) _exit(3);
  auto init = reinterpret_cast<CUresult (*)(unsigned)>(dlsym(h, "cuInit"));
  auto version = reinterpret_cast<CUresult (*)(int*)>(dlsym(h, "cuDriverGetVersion"));
  auto count = reinterpret_cast<CUresult (*)(int*)>(dlsym(h, "cuDeviceGetCount"));
  auto get = reinterpret_cast<CUresult (*)(CUdevice*, int)>(dlsym(h, "cuDeviceGet"));
  auto name = reinterpret_cast<CUresult (*)(char*, int, CUdevice)>(dlsym(h, "cuDeviceGetName"));
  auto attr = reinterpret_cast<CUresult (*)(int*, int, CUdevice)>(dlsym(h, "cuDeviceGetAttribute"));
  auto mem = reinterpret_cast<CUresult (*)(std::size_t*, CUdevice)>(dlsym(h, "cuDeviceTotalMem_v2"));
  std::ostringstream out;
  if (!init || !version) {
    out << "error missing-symbols\n";
  } else if (CUresult rc = init(0); rc != 0) {
    out << "error cuInit " << rc << "\n";
  } else {
    int v = 0;
    if (version(&v) == 0) out << "cuda " << v << "\n";
    int n = 0;
    if (count && count(&n) == 0) {
      for (int i = 0; i < n; ++i) {
        CUdevice d = 0;
        if (!get || get(&d, i) != 0) continue;
        char text[256] = {};
        int major = 0, minor = 0;
        std::size_t bytes = 0;
        if (name) name(text, sizeof text - 1, d);
        if (attr) {
          attr(&major, k_attr_cc_major, d);
          attr(&minor, k_attr_cc_minor, d);
        }
        if (mem) mem(&bytes, d);
        out << "gpu " << i << " " << major * 10 + minor << " " << bytes << " " << text << "\n";
      }
    }
  }
  const std::string s = out.str();
  std::size_t done = 0;
  while (done < s.size()) {
    const ssize_t w = write(fd, s.data() + done, s.size() - done);
    if (w <= 0) break;
    done += static_cast<std::size_t>(w);
  }
  _exit(0);
}

class CudaDriverProbe final : public HostProbe {
 public:
  CudaDriverProbe(std::chrono::milliseconds timeout, std::string library) : m_timeout(timeout), m_library(std::move(library)) {}
  [[nodiscard]] std::string name() const override { return "libcuda"; }

  Result<std::optional<resolver::HostFacts>> probe() override {
    int fds[2];
    if (pipe(fds) != 0) return io_error(k_probe_io, "pipe failed", m_library);
    const pid_t pid = fork();
    if (pid < 0) {
      const int err = errno;  // before close() can change it
      close(fds[0]);
      close(fds[1]);
      return io_error(k_probe_io, "fork failed", m_library, err);
    }
    if (pid == 0) {
      close(fds[0]);
      child_main(fds[1], m_library);
    }
    close(fds[1]);
    std::string text;
    const auto deadline = std::chrono::steady_clock::now() + m_timeout;
    bool timed_out = false;
    while (true) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
      if (left <= 0) {
        timed_out = true;
        break;
      }
      pollfd p{fds[0], POLLIN, 0};
      const int r = poll(&p, 1, static_cast<int>(left));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        timed_out = r == 0;
        break;
      }
      char buf[4096];
      const ssize_t got = read(fds[0], buf, sizeof buf);
      if (got <= 0) break;
      text.append(buf, static_cast<std::size_t>(got));
    }
    close(fds[0]);
    if (timed_out) kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (timed_out) {
      return make_error(ErrorKind::environment, "detect.cuinit_timeout",
                        "cuInit did not return within " + std::to_string(m_timeout.count()) + " ms; the driver may be hung", m_library,
                        "check dmesg for Xid errors and nvidia-smi; a GPU reset or reboot may be needed");
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 3) return std::optional<resolver::HostFacts>{};
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return env_error("the libcuda probe process crashed");
    return parse(text);
  }

 private:
  Result<std::optional<resolver::HostFacts>> env_error(std::string message) const {
    return make_error(ErrorKind::environment, "detect.libcuda", std::move(message), m_library, "");
  }

  Result<std::optional<resolver::HostFacts>> parse(const std::string& text) const {
    resolver::HostFacts f;
    f.source = "libcuda";
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream words(line);
      std::string key;
      words >> key;
      if (key == "error") {
        return make_error(ErrorKind::environment, "detect.cuinit", "the CUDA driver failed: " + line.substr(6), m_library,
                          "check that the NVIDIA kernel module is loaded and /dev/nvidia* exist");
      }
      if (key == "cuda") {
        int v = 0;
        words >> v;
        f.driver_cuda = resolver::Version::of({static_cast<std::uint32_t>(v / 1000), static_cast<std::uint32_t>(v % 1000 / 10)});
      } else if (key == "gpu") {
        resolver::HostGpu g;
        words >> g.index >> g.sm >> g.memory_bytes;
        std::getline(words >> std::ws, g.name);
        f.gpus.push_back(std::move(g));
      }
    }
    f.notes.push_back("libcuda: the driver version itself is not exposed by the CUDA driver API");
    return std::optional<resolver::HostFacts>(std::move(f));
  }

  std::chrono::milliseconds m_timeout;
  std::string m_library;
};

}  // namespace

std::unique_ptr<HostProbe> make_cuda_driver_probe(std::chrono::milliseconds timeout, std::string library) {
  return std::make_unique<CudaDriverProbe>(timeout, std::move(library));
}

}  // namespace gpuenv::validate
