#pragma once
// A programmable GpuBackend for tests: the inventory, readings and measurements are public fields a test sets.
// A method answers from its field; an `error_*` field set makes it fail; `hang_in` makes the named session method
// block until the backend is destroyed (the runner's watchdog must catch it).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "validate/backend.hpp"

namespace gpuenv::testing {

class FakeGpuBackend final : public validate::GpuBackend {
 public:
  validate::DriverState driver_state;
  std::vector<validate::GpuInfo> inventory;
  std::map<int, validate::GpuHealth> healths;        ///< idle readings
  std::map<int, validate::GpuHealth> load_healths;   ///< readings from a session (under load); falls back to healths
  /// Readings a session returns one after another (the last repeats); wins over load_healths.
  std::map<int, std::vector<validate::GpuHealth>> load_health_sequences;
  /// The load methods (hbm_bandwidth, copy_bandwidth, gemm_tflops) return only after the session's health() was
  /// called this many times (or 5 s passed): readings are then known to be taken while the load "runs".
  int load_waits_for_health_reads = 0;
  std::map<int, std::uint64_t> compute_mismatch_counts;
  std::map<int, validate::MemtestResult> memtests;
  std::map<int, validate::ConsistencyResult> gemm_consistencies;
  std::map<int, validate::Samples> hbm;
  std::map<int, validate::Samples> h2d, d2h;
  std::map<std::pair<int, std::string>, validate::Samples> gemm;  ///< (gpu, dtype)
  std::map<std::pair<int, int>, validate::Samples> p2p;
  std::optional<validate::Samples> nccl;
  std::set<int> open_fails;            ///< open(gpu) returns an error
  std::set<std::string> hang_in;       ///< session methods that block: "memtest", "hbm_bandwidth", ...
  std::set<int> hang_only_on;          ///< when not empty, hang_in applies to these GPUs only
  /// gemm_tflops answers per GPU, one per call on a session (the last repeats); wins over `gemm` for bf16.
  std::map<int, std::vector<validate::Samples>> gemm_bf16_sequence;
  /// gemm_tflops fails on a session's Nth call (counted from 1) on a GPU with the error.
  std::map<int, std::pair<int, Error>> gemm_fails_at_call;
  std::map<int, std::string> gemm_library_notes;  ///< what a session's gemm_library_notes() says, per GPU
  std::string backend_name = "fake";
  std::optional<Error> prepare_error;  ///< prepare() fails with it
  int prepare_calls = 0;
  std::thread::id prepare_thread;      ///< the thread prepare() last ran on
  std::atomic<int> opens_before_prepare{0};  ///< open() calls made while prepare() had not run

  ~FakeGpuBackend() override {
    {
      std::lock_guard lock(m_mutex);
      m_released = true;
    }
    m_cv.notify_all();
    // Hung calls run on threads the runner abandoned; give them a moment to leave before the fields go away.
    while (m_blocked.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  [[nodiscard]] std::string name() const override { return backend_name; }
  Result<validate::DriverState> driver() override { return driver_state; }
  gpuenv::Status prepare() override {
    ++prepare_calls;
    prepare_thread = std::this_thread::get_id();
    if (prepare_error) return *prepare_error;
    return ok_status();
  }
  Result<std::vector<validate::GpuInfo>> gpus() override { return inventory; }
  Result<validate::GpuHealth> health(int gpu) override {
    auto it = healths.find(gpu);
    return it == healths.end() ? validate::GpuHealth{} : it->second;
  }
  Result<std::unique_ptr<validate::GpuSession>> open(int gpu) override;
  Result<std::optional<validate::Samples>> p2p_bandwidth(int src, int dst, int) override {
    auto it = p2p.find({src, dst});
    if (it == p2p.end()) return std::optional<validate::Samples>{};
    return std::optional<validate::Samples>{it->second};
  }
  Result<std::optional<validate::Samples>> nccl_allreduce(const std::vector<int>&, int) override { return nccl; }

  /// Blocks the calling thread while `method` is listed in hang_in, until the backend is destroyed; then
  /// returns true, and the caller must return without touching the backend again.
  bool maybe_hang(const std::string& method, int gpu = -1) {
    if (!hang_in.count(method)) return false;
    if (!hang_only_on.empty() && !hang_only_on.count(gpu)) return false;
    ++m_blocked;
    {
      std::unique_lock lock(m_mutex);
      m_cv.wait(lock, [&] { return m_released; });
    }
    --m_blocked;
    return true;
  }

 private:
  std::mutex m_mutex;
  std::condition_variable m_cv;
  bool m_released = false;
  std::atomic<int> m_blocked{0};
};

class FakeGpuSession final : public validate::GpuSession {
 public:
  FakeGpuSession(FakeGpuBackend& backend, int gpu) : m_backend(backend), m_gpu(gpu) {}

  Result<std::uint64_t> compute_mismatches() override {
    if (m_backend.maybe_hang("compute_mismatches", m_gpu)) return hung();
    auto it = m_backend.compute_mismatch_counts.find(m_gpu);
    return it == m_backend.compute_mismatch_counts.end() ? std::uint64_t{0} : it->second;
  }
  Result<validate::MemtestResult> memtest(const validate::MemtestRequest&) override {
    if (m_backend.maybe_hang("memtest", m_gpu)) return hung();
    return find_or_error(m_backend.memtests, "memtest");
  }
  Result<validate::ConsistencyResult> gemm_consistency(int) override {
    if (m_backend.maybe_hang("gemm_consistency", m_gpu)) return hung();
    return find_or_error(m_backend.gemm_consistencies, "gemm_consistency");
  }
  Result<validate::Samples> hbm_bandwidth(int) override {
    if (m_backend.maybe_hang("hbm_bandwidth", m_gpu)) return hung();
    wait_for_health_reads();
    return find_or_error(m_backend.hbm, "hbm_bandwidth");
  }
  Result<validate::Samples> copy_bandwidth(bool to_device, int) override {
    if (m_backend.maybe_hang(to_device ? "h2d_bandwidth" : "d2h_bandwidth", m_gpu)) return hung();
    wait_for_health_reads();
    return find_or_error(to_device ? m_backend.h2d : m_backend.d2h, to_device ? "h2d_bandwidth" : "d2h_bandwidth");
  }
  Result<std::optional<validate::Samples>> gemm_tflops(const std::string& dtype, int) override {
    if (m_backend.maybe_hang("gemm_tflops", m_gpu)) return hung();
    wait_for_health_reads();
    const int call = ++m_gemm_calls;
    if (auto f = m_backend.gemm_fails_at_call.find(m_gpu); f != m_backend.gemm_fails_at_call.end() && f->second.first == call)
      return f->second.second;
    if (auto seq = m_backend.gemm_bf16_sequence.find(m_gpu);
        dtype == "bf16" && seq != m_backend.gemm_bf16_sequence.end() && !seq->second.empty()) {
      const auto& list = seq->second;
      return std::optional<validate::Samples>{list[std::min<std::size_t>(static_cast<std::size_t>(call - 1), list.size() - 1)]};
    }
    auto it = m_backend.gemm.find({m_gpu, dtype});
    if (it == m_backend.gemm.end()) return std::optional<validate::Samples>{};
    return std::optional<validate::Samples>{it->second};
  }
  std::string gemm_library_notes() override {
    auto it = m_backend.gemm_library_notes.find(m_gpu);
    return it == m_backend.gemm_library_notes.end() ? std::string() : it->second;
  }
  Result<validate::GpuHealth> health() override {
    const int call = m_health_calls++;
    if (auto seq = m_backend.load_health_sequences.find(m_gpu);
        seq != m_backend.load_health_sequences.end() && !seq->second.empty()) {
      const auto& readings = seq->second;
      return readings[std::min<std::size_t>(static_cast<std::size_t>(call), readings.size() - 1)];
    }
    auto it = m_backend.load_healths.find(m_gpu);
    if (it != m_backend.load_healths.end()) return it->second;
    return m_backend.health(m_gpu);
  }

 private:
  static Error hung() {
    return make_error(ErrorKind::environment, "fake.released", "the fake backend was destroyed while this call hung", "fake", "");
  }
  template <class T>
  Result<T> find_or_error(const std::map<int, T>& values, const char* what) {
    auto it = values.find(m_gpu);
    if (it == values.end())
      return make_error(ErrorKind::environment, "fake.unset", std::string("fake backend has no ") + what + " for GPU " +
                                                         std::to_string(m_gpu), "fake", "set it in the test");
    return it->second;
  }
  void wait_for_health_reads() {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (m_health_calls.load() < m_backend.load_waits_for_health_reads && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  FakeGpuBackend& m_backend;
  int m_gpu;
  std::atomic<int> m_health_calls{0};
  int m_gemm_calls = 0;
};

inline Result<std::unique_ptr<validate::GpuSession>> FakeGpuBackend::open(int gpu) {
  if (prepare_calls == 0) ++opens_before_prepare;
  if (open_fails.count(gpu))
    return make_error(ErrorKind::environment, "cuda.context", "cuCtxCreate failed on GPU " + std::to_string(gpu) + " (fake)",
                      "fake", "set by the test");
  return std::unique_ptr<validate::GpuSession>(std::make_unique<FakeGpuSession>(*this, gpu));
}

}  // namespace gpuenv::testing
