#pragma once
// The replay adapter of the GpuBackend port: answers from a recorded inventory plus a scenario (measured values and
// injected faults) written in YAML (schema gpuenv-replay-v1, docs/replay.md). It lets pipelines and tests run the
// same judgement code as the real adapter without a GPU. It never invents a value: a method the file records
// nothing for fails with "replay file has no <method> for GPU N".
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/error.hpp"
#include "validate/backend.hpp"
#include "validate/replay/recording.hpp"

namespace gpuenv::validate {

/// The schema string every replay file carries.
inline constexpr std::string_view k_replay_schema = "gpuenv-replay-v1";

/// Reads the file a scenario `extends`; fails with an Error naming the path.
using ReplayFileReader = std::function<Result<std::string>(const std::filesystem::path&)>;

/// Reads a replay file from disk (at most 4 MiB); fails when it is missing, unreadable or too large.
Result<std::string> read_replay_file(const std::filesystem::path& path);

/// Builds a replay backend from YAML text; `origin` names the text in errors and is the base for relative
/// `extends` paths, which are read from disk. Fails on malformed YAML, unknown keys, wrong types or values, a
/// missing extended file or an `extends` cycle, with the file, line and what to fix.
Result<std::unique_ptr<GpuBackend>> load_replay_backend(std::string_view yaml_text, std::string_view origin);

/// As above, with `read_file` reading the extended files (tests pass an in-memory map).
Result<std::unique_ptr<GpuBackend>> load_replay_backend(std::string_view yaml_text, std::string_view origin,
                                                        const ReplayFileReader& read_file);

/// The typed recording a replay backend answers from, read as load_replay_backend reads it (same errors).
Result<ReplayRecording> parse_replay_recording(std::string_view yaml_text, std::string_view origin,
                                               const ReplayFileReader& read_file = read_replay_file);

/// Reads `path` and builds a replay backend from it; fails as read_replay_file and load_replay_backend do.
Result<std::unique_ptr<GpuBackend>> load_replay_backend_file(const std::filesystem::path& path);

}  // namespace gpuenv::validate
