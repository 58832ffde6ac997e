// libFuzzer target: what `gpuenv validate` reads (validate/): the thresholds YAML (parse_thresholds), replay
// recordings (load_replay_backend, then the backend's answers; and what validate --record would write of them
// reads back to the same recording), and the image probe's JSON report as the three
// image checks (libraries_load, framework_smoke, cudnn_smoke) judge it: the input is the probe's standard output,
// handed to the checks by a run_in_image that runs nothing. The first byte picks the reader.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fuzz/fuzz_support.hpp"
#include "tests/fakes/fake_gpu_backend.hpp"
#include "validate/check.hpp"
#include "validate/checks/check_support.hpp"
#include "validate/replay/recording.hpp"
#include "validate/replay/replay_backend.hpp"
#include "validate/thresholds.hpp"

namespace {

using namespace gpuenv;
using namespace gpuenv::validate;

/// What validate --record writes reads back to the same recording: render, read, render again, same bytes.
void replay_round_trip(std::string_view text) {
  auto recording = parse_replay_recording(text, "fuzz.yaml");
  if (!recording) return;
  const std::string once = render_replay(*recording, "fuzz");
  auto again = parse_replay_recording(once, "rendered.yaml");
  if (!again) {
    std::fprintf(stderr, "a rendered recording does not read back: %s\n%s", again.error().to_string().c_str(), once.c_str());
    std::abort();
  }
  if (render_replay(*again, "fuzz") != once) {
    std::fprintf(stderr, "a rendered recording reads back to another one:\n%s", once.c_str());
    std::abort();
  }
}

void replay(std::string_view text) {
  replay_round_trip(text);
  auto backend = load_replay_backend(text, "fuzz.yaml");
  if (!backend) return;
  GpuBackend& b = **backend;
  (void)b.driver();
  auto gpus = b.gpus();
  if (!gpus) return;
  for (const auto& g : *gpus) {
    (void)b.health(g.index);
    auto session = b.open(g.index);
    if (!session) continue;
    (void)(*session)->health();
    (void)(*session)->hbm_bandwidth(3);
    (void)(*session)->gemm_tflops("fp16", 3);
  }
}

void probe_report(std::string_view out, unsigned char flags) {
  gpuenv::testing::FakeGpuBackend backend;
  backend.driver_state.loaded = true;
  backend.driver_state.version = "560.35.03";
  backend.driver_state.cuda_driver_version = 12060;
  GpuInfo gpu;
  gpu.index = 0;
  gpu.uuid = "GPU-00000000-0000-0000-0000-000000000000";
  gpu.name = "NVIDIA H200";
  backend.inventory.push_back(gpu);
  CheckInputs inputs;
  inputs.level = (flags & 1) ? Level::long_ : Level::standard;
  inputs.lock_cuda = "12.4";
  if (flags & 2) inputs.lock_cudnn = "9.1.0";
  inputs.lock_frameworks = {{"torch", "2.5.1"}};
  if (flags & 4) inputs.lock_frameworks.emplace_back("jax", "0.4.30");
  inputs.image = "fuzz-image";
  const ImageRun run{(flags & 8) ? 1 : 0, std::string(out), {}, (flags & 16) != 0};
  inputs.run_in_image = [&run](const std::vector<std::string>&, std::chrono::milliseconds) -> Result<ImageRun> { return run; };
  auto checks = checks::image_checks();  // one probe cache per validation: a fresh one per input
  for (auto& check : checks) {
    const DriverState driver = backend.driver_state;
    CheckContext context{backend, inputs, driver, backend.inventory,
                         std::chrono::steady_clock::now() + check->deadline(inputs.level, backend.inventory.size())};
    if (check->not_applicable(context)) continue;
    (void)check->run(context);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view text = fuzzing::as_text(data, size).substr(1);
  switch (data[0] % 3) {
    case 0: (void)parse_thresholds(text, "thresholds.yaml"); break;
    case 1: replay(text); break;
    default: probe_report(text, static_cast<unsigned char>(data[0] / 3)); break;
  }
  return 0;
}
