#pragma once
// Recording a backend's answers as a replay file (`gpuenv validate --record FILE`, docs/replay.md "Recording a
// machine"): a GpuBackend that passes every call on to another (the real NVML and CUDA adapter, usually) and keeps
// what came back, so that the run's inventory, health readings and measurements can be replayed later with the
// same judgement code, without the GPU.
//
// What is kept: the first answer of each call (a value or an error) per GPU, MIG device and method, except the
// health read under load, where every reading is folded as the checks fold them (the best link, the union of clock
// event reasons, the peak temperature and power), so that a replay judges what the run judged. An error becomes an
// error fault with its id and message; a call still running when the recording is taken becomes a hang fault. A
// MIG device that could not be opened is left out (the checks say why when it is replayed). Calls that were not
// made are not in the recording: replaying a check that needs them fails as unrecorded, never on a made-up value.
#include <memory>
#include <utility>

#include "validate/backend.hpp"
#include "validate/replay/recording.hpp"

namespace gpuenv::validate {

struct RecorderState;

/// The handle that reads what a recording backend has kept; it stays valid after the backend is gone.
class BackendRecorder {
 public:
  explicit BackendRecorder(std::shared_ptr<RecorderState> state) : m_state(std::move(state)) {}
  /// What was answered so far, as a recording; calls in flight without an answer become hang faults. Fails with
  /// `validate.record_empty` when the driver was never read (nothing to replay from).
  [[nodiscard]] Result<ReplayRecording> recording() const;

 private:
  std::shared_ptr<RecorderState> m_state;
};

/// INNER wrapped so that every answer is kept; the backend's name is INNER's (a report says what measured it).
std::pair<std::unique_ptr<GpuBackend>, BackendRecorder> record_backend(std::unique_ptr<GpuBackend> inner);

}  // namespace gpuenv::validate
