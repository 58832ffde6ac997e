#include "validate/replay/recorder.hpp"

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <tuple>

#include "validate/checks/check_support.hpp"

namespace gpuenv::validate {

/// What the recording backend has kept. Every member is guarded by `mutex`; calls into the wrapped backend run
/// without it, so a hung call never blocks the others or the recording.
struct RecorderState {
  std::mutex mutex;
  std::optional<DriverState> driver;
  std::optional<std::vector<GpuInfo>> gpus;
  std::map<int, GpuHealth> idle, under_load;
  std::map<int, std::vector<MigDevice>> mig;
  std::map<std::pair<int, std::string>, ReplayMeasurements> measurements;
  std::map<std::pair<int, int>, std::optional<Samples>> p2p;
  std::optional<std::optional<Samples>> nccl;
  std::map<std::pair<int, std::string>, ReplayFault> faults;  // (gpu or -1, method): the first error
  std::set<std::pair<int, std::string>> answered;             // (gpu or -1, method): a value was kept
  std::map<std::pair<int, std::string>, int> in_flight;       // (gpu or -1, method): calls not returned yet
};

namespace {

using Key = std::pair<int, std::string>;

/// One call of METHOD on GPU (-1: host-wide) counted in flight while it runs, then its answer passed to KEEP (a
/// value, under the state's lock, unless an error was kept first) or kept as an error fault (unless a value was).
template <class T, class Call, class Keep>
Result<T> observe(RecorderState& s, int gpu, const std::string& method, Call call, Keep keep) {
  const Key key{gpu, method};
  {
    std::lock_guard lock(s.mutex);
    ++s.in_flight[key];
  }
  Result<T> r = call();
  std::lock_guard lock(s.mutex);
  --s.in_flight[key];
  if (r) {
    if (!s.faults.count(key) && keep(*r)) s.answered.insert(key);
  } else if (!s.answered.count(key) && !s.faults.count(key)) {
    s.faults[key] = ReplayFault{false, r.error().id, r.error().message, {}};
  }
  return r;
}

/// VALUE into SLOT unless an earlier answer is there; true (the call answered).
template <class T>
bool keep_first(std::optional<T>& slot, const T& value) {
  if (!slot) slot = value;
  return true;
}

class RecordingSession final : public GpuSession {
 public:
  RecordingSession(std::shared_ptr<RecorderState> state, std::unique_ptr<GpuSession> inner, int gpu, std::string mig)
      : m_state(std::move(state)), m_inner(std::move(inner)), m_gpu(gpu), m_mig(std::move(mig)) {}

  Result<std::uint64_t> compute_mismatches() override {
    return observe<std::uint64_t>(*m_state, m_gpu, "compute_mismatches", [&] { return m_inner->compute_mismatches(); },
                                  [&](std::uint64_t v) { return keep_first(mine().compute_mismatches, v); });
  }
  Result<MemtestResult> memtest(const MemtestRequest& request) override {
    return observe<MemtestResult>(*m_state, m_gpu, "memtest", [&] { return m_inner->memtest(request); },
                                  [&](const MemtestResult& v) { return keep_first(mine().memtest, v); });
  }
  Result<ConsistencyResult> gemm_consistency(int repetitions) override {
    return observe<ConsistencyResult>(*m_state, m_gpu, "gemm_consistency", [&] { return m_inner->gemm_consistency(repetitions); },
                                      [&](const ConsistencyResult& v) { return keep_first(mine().gemm_consistency, v); });
  }
  Result<Samples> hbm_bandwidth(int samples) override {
    return observe<Samples>(*m_state, m_gpu, "hbm_bandwidth", [&] { return m_inner->hbm_bandwidth(samples); },
                            [&](const Samples& v) { return keep_first(mine().hbm_bandwidth, v); });
  }
  Result<Samples> copy_bandwidth(bool to_device, int samples) override {
    return observe<Samples>(*m_state, m_gpu, to_device ? "h2d_bandwidth" : "d2h_bandwidth",
                            [&] { return m_inner->copy_bandwidth(to_device, samples); },
                            [&](const Samples& v) { return keep_first(to_device ? mine().h2d_bandwidth : mine().d2h_bandwidth, v); });
  }
  Result<std::optional<Samples>> gemm_tflops(const std::string& dtype, int samples) override {
    return observe<std::optional<Samples>>(*m_state, m_gpu, "gemm_tflops", [&] { return m_inner->gemm_tflops(dtype, samples); },
                                           [&](const std::optional<Samples>& v) {
                                             ReplayMeasurements& m = mine();
                                             m.has_gemm_tflops = true;
                                             m.gemm_tflops.emplace(dtype, v);  // the first answer per type
                                             return true;
                                           });
  }
  // Every reading under load folded as the checks fold them: a replay answers each read with this one.
  Result<GpuHealth> health() override {
    return observe<GpuHealth>(*m_state, m_gpu, "health_under_load", [&] { return m_inner->health(); }, [&](const GpuHealth& v) {
      auto [it, fresh] = m_state->under_load.emplace(m_gpu, v);
      if (!fresh) checks::fold_health(it->second, v);
      return true;
    });
  }
  std::string gemm_library_notes() override { return m_inner->gemm_library_notes(); }

 private:
  ReplayMeasurements& mine() { return m_state->measurements[{m_gpu, m_mig}]; }  // under the state's lock

  std::shared_ptr<RecorderState> m_state;
  std::unique_ptr<GpuSession> m_inner;
  int m_gpu;
  std::string m_mig;  // the MIG device's uuid; empty for the whole GPU
};

class RecordingBackend final : public GpuBackend {
 public:
  RecordingBackend(std::unique_ptr<GpuBackend> inner, std::shared_ptr<RecorderState> state)
      : m_inner(std::move(inner)), m_state(std::move(state)) {}

  [[nodiscard]] std::string name() const override { return m_inner->name(); }
  gpuenv::Status prepare() override { return m_inner->prepare(); }
  gpuenv::Status set_cc_gpus_ready() override { return m_inner->set_cc_gpus_ready(); }

  Result<DriverState> driver() override {
    return observe<DriverState>(*m_state, -1, "driver", [&] { return m_inner->driver(); },
                                [&](const DriverState& v) { return keep_first(m_state->driver, v); });
  }
  Result<std::vector<GpuInfo>> gpus() override {
    return observe<std::vector<GpuInfo>>(*m_state, -1, "gpus", [&] { return m_inner->gpus(); },
                                         [&](const std::vector<GpuInfo>& v) { return keep_first(m_state->gpus, v); });
  }
  Result<GpuHealth> health(int gpu) override {
    return observe<GpuHealth>(*m_state, gpu, "health", [&] { return m_inner->health(gpu); },
                              [&](const GpuHealth& v) {
                                m_state->idle.emplace(gpu, v);  // the first reading
                                return true;
                              });
  }
  Result<std::unique_ptr<GpuSession>> open(int gpu) override {
    auto session = observe<std::unique_ptr<GpuSession>>(*m_state, gpu, "open", [&] { return m_inner->open(gpu); },
                                                        [](const std::unique_ptr<GpuSession>&) { return true; });
    if (!session) return session;
    return std::unique_ptr<GpuSession>(std::make_unique<RecordingSession>(m_state, std::move(*session), gpu, std::string()));
  }
  Result<std::vector<MigDevice>> mig_devices(int gpu) override {
    auto devices = m_inner->mig_devices(gpu);
    if (devices && !devices->empty()) {
      std::lock_guard lock(m_state->mutex);
      m_state->mig.emplace(gpu, *devices);
    }
    return devices;
  }
  // Not observed as `open`: an instance CUDA cannot reach in this process is normal (the checks SKIP and say how
  // to reach it), not a fault of its GPU.
  Result<std::unique_ptr<GpuSession>> open_mig(const MigDevice& device) override {
    auto session = m_inner->open_mig(device);
    if (!session) return session;
    return std::unique_ptr<GpuSession>(std::make_unique<RecordingSession>(m_state, std::move(*session), device.parent, device.uuid));
  }
  Result<std::optional<Samples>> p2p_bandwidth(int src, int dst, int samples) override {
    return observe<std::optional<Samples>>(*m_state, src, "p2p_bandwidth", [&] { return m_inner->p2p_bandwidth(src, dst, samples); },
                                           [&](const std::optional<Samples>& v) {
                                             m_state->p2p.emplace(std::make_pair(src, dst), v);
                                             return true;
                                           });
  }
  Result<std::optional<Samples>> nccl_allreduce(const std::vector<int>& gpus, int samples) override {
    return observe<std::optional<Samples>>(*m_state, -1, "nccl_allreduce", [&] { return m_inner->nccl_allreduce(gpus, samples); },
                                           [&](const std::optional<Samples>& v) { return keep_first(m_state->nccl, v); });
  }
  // Evidence is kept with the nonce it was asked for (a replay serves it for any nonce and says so).
  Result<std::optional<CcEvidence>> cc_evidence(int gpu, const std::string& nonce) override {
    return observe<std::optional<CcEvidence>>(*m_state, gpu, "cc_evidence", [&] { return m_inner->cc_evidence(gpu, nonce); },
                                              [&](const std::optional<CcEvidence>& v) {
                                                if (!v) return false;  // none offered: a replay has no way to say so
                                                ReplayMeasurements& m = m_state->measurements[{gpu, std::string()}];
                                                if (!m.cc_evidence) m.cc_evidence = *v;
                                                return true;
                                              });
  }

 private:
  std::unique_ptr<GpuBackend> m_inner;
  std::shared_ptr<RecorderState> m_state;
};

const ReplayMethod* method_info(const std::string& name) {
  for (const ReplayMethod& m : k_replay_methods)
    if (m.name == name) return &m;
  return nullptr;
}

}  // namespace

Result<ReplayRecording> BackendRecorder::recording() const {
  RecorderState& s = *m_state;
  std::lock_guard lock(s.mutex);
  if (!s.driver) {
    return make_error(ErrorKind::environment, "validate.record_empty", "nothing to record: the driver was never read",
                      s.faults.count({-1, "driver"}) ? s.faults.at({-1, "driver"}).message : std::string(),
                      "a recording starts from the driver's state and the GPUs; see why the driver could not be read");
  }
  ReplayRecording r;
  r.driver = *s.driver;
  if (s.gpus) {
    for (const GpuInfo& info : *s.gpus) {
      ReplayGpu g;
      g.info = info;
      if (auto it = s.idle.find(info.index); it != s.idle.end()) g.health = it->second;
      if (auto it = s.under_load.find(info.index); it != s.under_load.end()) g.health_under_load = it->second;
      if (auto it = s.mig.find(info.index); it != s.mig.end()) g.mig = it->second;
      r.gpus.push_back(std::move(g));
    }
  }
  const int n = static_cast<int>(r.gpus.size());
  auto listed = [&](int gpu) { return gpu < 0 || gpu < n; };
  for (const auto& [key, m] : s.measurements)
    if (listed(key.first)) r.measurements.emplace(key, m);
  for (const auto& [pair, samples] : s.p2p)
    if (listed(pair.first) && listed(pair.second)) r.p2p.emplace(pair, samples);
  r.has_p2p = !r.p2p.empty();
  r.has_nccl = s.nccl.has_value();
  if (s.nccl) r.nccl = *s.nccl;
  for (const auto& [key, fault] : s.faults)
    if (listed(key.first)) r.faults.emplace(key, fault);
  for (const auto& [key, count] : s.in_flight) {
    const ReplayMethod* info = method_info(key.second);
    if (count <= 0 || !listed(key.first) || info == nullptr || !info->may_hang) continue;
    if (!s.answered.count(key) && !r.faults.count(key)) r.faults[key] = ReplayFault{true, {}, {}, {}};
  }
  return r;
}

std::pair<std::unique_ptr<GpuBackend>, BackendRecorder> record_backend(std::unique_ptr<GpuBackend> inner) {
  auto state = std::make_shared<RecorderState>();
  return {std::make_unique<RecordingBackend>(std::move(inner), state), BackendRecorder(state)};
}

}  // namespace gpuenv::validate
