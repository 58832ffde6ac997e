// cdi_spec: the CDI specs that hand NVIDIA GPUs to containers (podman, Docker's CDI support, containerd and CRI-O)
// still describe this host. After a driver upgrade a spec keeps naming libcuda.so.<old version>, and containers fail
// to start (NVIDIA/nvidia-container-toolkit#856, containers/podman#26233); after a MIG change it names MIG devices
// and /dev/nvidia-caps nodes that are gone (NVIDIA/nvidia-container-toolkit#1828). Specs are only read, never
// written; the directories and the root the host paths are looked up under come from CheckInputs::cdi.
#include <chrono>
#include <string>
#include <vector>

#include "base/safe_text.hpp"
#include "base/text.hpp"
#include "validate/cdi_host.hpp"
#include "validate/cdi_spec.hpp"
#include "validate/checks/check_support.hpp"

namespace gpuenv::validate::checks {
namespace cdi_check_detail {

// A host's spec directories hold a handful of files; more than this are not read (and the check says so).
constexpr std::size_t k_max_spec_files = 256;
// What one file, and all files together, may hold (CdiLimits: gpuenv's 4 MiB for YAML inputs).
constexpr std::size_t k_max_file_bytes = CdiLimits{}.max_file_bytes;
constexpr std::size_t k_max_total_bytes = 8u << 20;
// The reading speed a file's size is weighed against before it is parsed (below the slowest rate measured on a
// loaded machine: 1.6 MB/s for a spec of 1 MiB).
constexpr std::size_t k_bytes_per_ms = 1000;
// Listing, reading and parsing a few specs and looking up some hundred paths takes milliseconds; hostile
// directories (many files at the size limit) are cut short at three quarters of the deadline and reported as not
// judged. Quick, the boot pre-flight, has 100 ms to spare within its 15 s.
constexpr Budget k_cdi_quick{100, 0};
constexpr Budget k_cdi_budget{300, 0};
// A message names at most this many files' problems, then counts the rest.
constexpr std::size_t k_max_listed = 3;

std::string shown(const std::string& text) { return safe_text(text, 300); }

/// One spec file judged.
struct FileVerdict {
  CheckStatus status = CheckStatus::pass;
  std::string code;
  std::string message;
  std::string hint;  ///< what to run for this file; empty: the catalog's
  bool nvidia = false;
  bool ignored = false;  ///< a spec of another kind
};

/// What to run to regenerate FILE: nvidia-ctk (cmd/nvidia-ctk/README.md, "Generate CDI specifications"), and for
/// the file nvidia-cdi-refresh.service writes (/var/run/cdi/nvidia.yaml: deployments/systemd/
/// nvidia-cdi-refresh.service; the unit ships from toolkit 1.18.0, https://docs.nvidia.com/datacenter/cloud-native/
/// container-toolkit/1.20.1/cdi-support.html, "Automatic CDI Specification Generation"), that unit.
std::string regenerate_hint(const std::string& found, const std::string& kind, const std::string& root) {
  // Under --cdi-root the command runs on the host itself: the file's path there.
  std::string file = found;
  const std::string prefix = root.size() > 1 && root.back() == '/' ? root.substr(0, root.size() - 1) : root;
  if (prefix.size() > 1 && file.size() > prefix.size() && file.compare(0, prefix.size(), prefix) == 0 && file[prefix.size()] == '/')
    file = file.substr(prefix.size());
  std::string hint = "regenerate the spec: `nvidia-ctk cdi generate";
  if (kind == "management.nvidia.com/gpu") hint += " --mode=management --vendor=management.nvidia.com";
  hint += " --output=" + shown(file) + "`";
  if (file == "/var/run/cdi/nvidia.yaml" || file == "/run/cdi/nvidia.yaml")
    hint += ", or `systemctl restart nvidia-cdi-refresh.service` (NVIDIA container toolkit 1.18.0 and later)";
  return hint + "; then rerun gpuenv validate --check cdi_spec";
}

/// "mount /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15 (device 0)".
std::string path_label(const CdiPath& p) {
  return std::string(to_string(p.role)) + " " + shown(p.host_path) + " (" + (p.device.empty() ? std::string("spec-wide edits") : "device " + shown(p.device)) + ")";
}

/// What the files are judged against: the host's tree, the loaded driver's version, and when the work must end.
struct Judging {
  const HostRoot& root;
  const std::string& driver;  ///< DriverState::version; empty: unknown
  std::chrono::steady_clock::time_point deadline;
};

/// The paths of a valid NVIDIA spec against the host: the first problem, with how many paths have one.
FileVerdict judge_paths(const CdiSpecFile& file, const CdiSpec& spec, const Judging& j) {
  const HostRoot& root = j.root;
  const std::string& driver = j.driver;
  FileVerdict v;
  v.nvidia = true;
  std::size_t missing = 0, mismatched = 0, unchecked = 0, versioned = 0, looked_up = 0;
  std::string first, first_code, unchecked_why;
  for (const auto& p : spec.paths) {
    if (looked_up % 64 == 0 && std::chrono::steady_clock::now() > j.deadline) break;
    ++looked_up;
    std::string why;
    const HostPathState state = root.probe(p.host_path, why);
    const auto version = driver_version_in_path(p.host_path);
    if (version) ++versioned;
    if (version && !driver.empty() && *version != driver) {
      ++mismatched;
      if (first.empty()) {
        first = path_label(p) + " is for driver " + shown(*version) + ", but driver " + shown(driver) + " is loaded" +
                (state == HostPathState::missing ? " (and the file is missing)" : "");
        first_code = "cdi_driver_mismatch";
      }
    } else if (state == HostPathState::missing) {
      ++missing;
      if (first.empty()) {
        first = path_label(p) + " does not exist";
        first_code = is_mig_name(p.device) || is_mig_path(p.host_path) ? "cdi_mig_stale" : "cdi_stale";
      }
    } else if (state == HostPathState::not_checked) {
      ++unchecked;
      if (unchecked_why.empty()) unchecked_why = shown(p.host_path) + ": " + why;
    }
  }
  const std::string head = shown(file.path) + " (" + shown(spec.kind) + ", cdiVersion " + shown(spec.version) + ", " +
                           std::to_string(spec.devices.size()) + " device(s))";
  const std::string cut = looked_up < spec.paths.size() ? "; only " + std::to_string(looked_up) + " of " + std::to_string(spec.paths.size()) +
                                                              " host paths were looked up in the time the check has"
                                                        : std::string();
  if (!first.empty()) {
    const std::size_t more = missing + mismatched - 1;
    v.status = CheckStatus::fail;
    v.code = first_code;
    v.message = head + ": " + first + (more > 0 ? "; " + std::to_string(more) + " more stale path(s)" : "") + cut;
    v.hint = regenerate_hint(file.path, spec.kind, root.root());
    return v;
  }
  std::string note = driver.empty() && versioned > 0 ? "; the driver's version is unknown, so " + std::to_string(versioned) +
                                                           " driver file version(s) were not compared"
                                                     : (versioned > 0 ? ", " + std::to_string(versioned) + " at driver " + shown(driver) : "");
  if (unchecked > 0 || !cut.empty()) {
    v.status = CheckStatus::warn;
    v.code = "cdi_unreadable";
    v.message = head + ": " + (unchecked > 0 ? std::to_string(unchecked) + " of " + std::to_string(spec.paths.size()) +
                                                   " host path(s) could not be looked up (" + unchecked_why + ")"
                                             : std::string("no stale path so far")) +
                cut + note;
    return v;
  }
  v.message = head + ": all " + std::to_string(spec.paths.size()) + " host paths exist" + note;
  return v;
}

FileVerdict judge_file(const CdiSpecFile& file, const Judging& j) {
  FileVerdict v;
  const std::string name = shown(file.path) + (file.symlink ? " (a symlink)" : "");
  if (!file.text) {
    v.status = file.permission_denied ? CheckStatus::warn : CheckStatus::fail;
    v.code = "cdi_unreadable";
    v.message = name + (file.permission_denied ? " was not judged: " : ": ") + file.problem;
    return v;
  }
  const CdiParse parsed = parse_cdi_spec(*file.text, file.path, file.format);
  if (!parsed.kind.empty() && !is_nvidia_gpu_kind(parsed.kind)) {
    v.ignored = true;
    return v;
  }
  v.nvidia = !parsed.kind.empty();
  if (!parsed.spec) {
    v.status = CheckStatus::fail;
    v.code = "cdi_malformed";
    v.message = name + " is not a CDI spec gpuenv can read: " + parsed.problem;
    v.hint = parsed.kind.empty() ? std::string{} : regenerate_hint(file.path, parsed.kind, j.root.root());
    return v;
  }
  return judge_paths(file, *parsed.spec, j);
}

/// Where the check looked, for messages: "/etc/cdi, /var/run/cdi (absent: /etc/cdi)".
std::string looked_in(const CdiDirectoryScan& scan, const CdiSearch& search) {
  std::vector<std::string> dirs;
  for (const auto& d : search.dirs) dirs.push_back(shown(d));
  std::string out = join(dirs, ", ");
  if (!scan.absent.empty()) {
    std::vector<std::string> absent;
    for (const auto& d : scan.absent) absent.push_back(shown(d));
    out += " (absent: " + join(absent, ", ") + ")";
  }
  if (search.host_root != "/") out += "; host paths looked up beneath " + shown(search.host_root);
  for (const auto& n : search.notes) out += "; " + shown(n);
  return out;
}

/// The verdicts of the files folded into the check's one outcome.
GpuOutcome fold(const std::vector<FileVerdict>& verdicts, std::size_t ignored, const std::string& where) {
  CheckStatus status = CheckStatus::skip;
  std::size_t judged = 0;
  for (const auto& v : verdicts) {
    if (v.ignored) continue;
    ++judged;
    status = worse(status, v.status);
  }
  const FileVerdict* lead = nullptr;  // the first file with the verdict's status gives the code and the hint
  for (const auto& v : verdicts)
    if (!v.ignored && v.status == status && lead == nullptr) lead = &v;
  const std::string others = ignored > 0 ? "; " + std::to_string(ignored) + " spec(s) of other kinds left alone" : "";
  if (judged == 0) {
    return skipped(-1, "no CDI spec for nvidia.com/gpu in " + where + others,
                   "nothing to judge: containers get the GPUs through the NVIDIA runtime hook, if at all; to use CDI, run "
                   "`nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml`");
  }
  std::vector<std::string> parts;
  std::size_t listed = 0, unlisted = 0;
  for (const auto& v : verdicts) {
    if (v.ignored || (status != CheckStatus::pass && v.status == CheckStatus::pass)) continue;
    if (listed < k_max_listed) {
      parts.push_back(v.message);
      ++listed;
    } else {
      ++unlisted;
    }
  }
  std::string message = join(parts, "; ") + (unlisted > 0 ? "; and " + std::to_string(unlisted) + " more" : "") + others;
  GpuOutcome o = outcome(-1, status, message, status == CheckStatus::pass ? std::string_view{} : std::string_view(lead->code));
  if (!lead->hint.empty() && status != CheckStatus::pass) o.hint = lead->hint;
  return o;
}

class CdiSpecCheck final : public SpecCheck {
 public:
  CdiSpecCheck()
      : SpecCheck({"cdi_spec", "software",
                   "Every CDI spec for nvidia.com/gpu (/etc/cdi, /var/run/cdi, the container toolkit's spec-dirs) names "
                   "device nodes, libraries and hooks that exist, at the loaded driver's version",
                   k_cdi_quick, k_cdi_budget, k_cdi_budget}) {}
  [[nodiscard]] bool uses_gpu() const override { return false; }
  [[nodiscard]] std::optional<std::string> not_applicable(const CheckContext& context) const override {
    if (context.inputs.cdi.dirs.empty()) return std::string("no CDI spec directories were given to look in");
    // A replay answers for a recorded machine: this host's specs are not judged against its driver unless asked.
    if (context.backend.name() == "replay" && !context.inputs.cdi.named)
      return std::string("the replay backend stands for a recorded machine, not this host's CDI specs (give --cdi-dir to judge a directory)");
    return std::nullopt;
  }
  std::vector<GpuOutcome> run(CheckContext& context) override {
    const CdiSearch& search = context.inputs.cdi;
    auto root = HostRoot::open(search.host_root);
    if (!root) return {failed(-1, "the host root of the CDI specs", root.error(), "cdi_unreadable")};
    // Three quarters of the deadline for the work: the rest is left for the answer, so hostile directories end in
    // a verdict rather than a hang.
    const auto soft_deadline = std::chrono::steady_clock::now() + (context.deadline - std::chrono::steady_clock::now()) * 3 / 4;
    const CdiDirectoryScan scan = scan_cdi_directories(search.dirs, k_max_spec_files);
    std::vector<FileVerdict> verdicts;
    auto not_read = [&](std::string message) {
      FileVerdict v;
      v.status = CheckStatus::warn;
      v.code = "cdi_unreadable";
      v.message = std::move(message);
      verdicts.push_back(std::move(v));
    };
    auto too_slow = [&](const CdiSpecFile& file) {
      not_read(shown(file.path) + " was not judged: its " + std::to_string(file.text->size() >> 10) +
               " KiB cannot be read in the time the check has left (gpuenv allows for 1 MB/s)");
    };
    std::size_t ignored = 0, not_judged = 0, bytes = 0;
    const Judging judging{*root, context.driver.version, soft_deadline};
    for (CdiSpecFile file : scan.files) {
      const auto now = std::chrono::steady_clock::now();
      if (now > soft_deadline || bytes >= k_max_total_bytes) {
        ++not_judged;
        continue;
      }
      read_cdi_spec_file(file, k_max_file_bytes);
      // yaml-cpp reads a spec at 2 to 6 MB/s here (bench: a 19 KiB spec of 8 GPUs with MIG in 3 ms, 1 MiB in
      // 650 ms): a file that could not be read in the time left is not started, since a parse cannot be stopped.
      const auto left_ms = std::chrono::duration_cast<std::chrono::milliseconds>(soft_deadline - now).count();
      if (file.text && file.text->size() > static_cast<std::size_t>(std::max<long long>(left_ms, 0)) * k_bytes_per_ms) {
        too_slow(file);
        continue;
      }
      if (file.text) bytes += file.text->size();
      FileVerdict v = judge_file(file, judging);
      ignored += v.ignored;
      verdicts.push_back(std::move(v));
    }
    for (const auto& d : scan.unlisted) not_read("the spec directory " + shown(d) + " could not be listed");
    if (scan.left_out > 0)
      not_read(std::to_string(scan.left_out) + " spec file(s) past the first " + std::to_string(k_max_spec_files) + " were not read");
    if (not_judged > 0)
      not_read(std::to_string(not_judged) + " spec file(s) were not judged in the time the check has (or past the " +
               std::to_string(k_max_total_bytes >> 20) + " MiB it reads in all)");
    return {fold(verdicts, ignored, looked_in(scan, search))};
  }
};

}  // namespace cdi_check_detail

std::unique_ptr<Check> cdi_spec_check() { return std::make_unique<cdi_check_detail::CdiSpecCheck>(); }

}  // namespace gpuenv::validate::checks
