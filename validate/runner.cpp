#include "validate/runner.hpp"

#include "base/text.hpp"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

namespace gpuenv::validate {
namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr const char* k_hang_hint =
    "the GPU or its driver stopped responding: look for Xid errors in the kernel log (dmesg) and keep the node out "
    "of service until the GPU has been reset or the node rebooted";
constexpr const char* k_internal_hint = "this is a bug in gpuenv: report it with the JSON report (--json) attached";

// Everything a check's worker thread touches, owned jointly by the runner and the thread, so that a thread the
// watchdog abandoned never reads the runner's stack and keeps its Check alive for as long as it runs.
struct Job {
  std::shared_ptr<Check> check;
  GpuBackend* backend = nullptr;
  CheckInputs inputs;
  DriverState driver;
  std::vector<GpuInfo> gpus;
  SteadyClock::time_point deadline;

  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
  std::vector<GpuOutcome> outcomes;
  std::vector<GpuOutcome> partial;    // per-GPU outcomes told before run() returned (CheckContext::partial)
  std::optional<std::string> thrown;  // what() of what the check threw
};

void work(const std::shared_ptr<Job>& job) {
  try {
    std::vector<GpuOutcome> outcomes;
    std::optional<std::string> thrown;
    try {
      // The callback may run on the check's own threads; they end before run() returns, or, if the watchdog gave
      // up, while this thread still holds `job`.
      Job* raw = job.get();
      CheckContext context{*job->backend, job->inputs, job->driver, job->gpus, job->deadline,
                           [raw](const GpuOutcome& o) {
                             std::lock_guard lock(raw->mutex);
                             raw->partial.push_back(o);
                           }};
      outcomes = job->check->run(context);
    } catch (const std::exception& e) {
      thrown = std::string(e.what());
    } catch (...) {
      thrown = std::string("an exception that is not a std::exception");
    }
    {
      std::lock_guard lock(job->mutex);
      job->outcomes = std::move(outcomes);
      job->thrown = std::move(thrown);
      job->done = true;
    }
    job->finished.notify_all();
  } catch (...) {
    // Nothing may escape a thread (std::terminate). Left undone, the job reads as a hang: still a bounded FAIL.
  }
}

// The same outcome for each GPU of a GPU check, or one host-wide outcome.
std::vector<GpuOutcome> outcomes_for(const std::vector<GpuInfo>& gpus, bool per_gpu, CheckStatus status,
                                     const std::string& message, const std::string& code, const std::string& hint) {
  std::vector<GpuOutcome> out;
  if (per_gpu && !gpus.empty()) {
    for (const auto& g : gpus) out.push_back(GpuOutcome{g.index, status, message, code, hint, {}, g.mig});
  } else {
    out.push_back(GpuOutcome{-1, status, message, code, hint, {}, std::nullopt});
  }
  return out;
}

std::string levels_of(const Check& check) {
  std::vector<std::string> levels;
  for (Level l : {Level::quick, Level::standard, Level::long_})
    if (check.runs_at(l)) levels.emplace_back(to_string(l));
  return levels.empty() ? std::string("none") : join(levels, ", ");
}

struct Planned {
  std::shared_ptr<Check> check;
  bool in_level = true;  // false: asked for by exact key but not part of the level
};

struct Outcome {
  std::vector<GpuOutcome> results;
  bool hung = false;
  std::vector<int> hung_gpus;  // the GPUs without an outcome when the deadline passed
};

// Runs one check on a worker thread and waits for it until its deadline.
Outcome run_guarded(const std::shared_ptr<Job>& job, std::chrono::milliseconds limit, bool per_gpu) {
  std::thread worker;
  try {
    worker = std::thread([job] { work(job); });
  } catch (const std::exception& e) {
    return {outcomes_for(job->gpus, per_gpu, CheckStatus::fail, "could not start the check's thread: " + std::string(e.what()),
                         k_code_internal, k_internal_hint),
            false, {}};
  }
  bool done = false;
  {
    std::unique_lock lock(job->mutex);
    done = job->finished.wait_until(lock, job->deadline, [&] { return job->done; });
  }
  if (!done) {
    // Abandoned on purpose: the thread holds `job` (and through it the check) until it returns, if ever.
    worker.detach();
    const std::string message =
        "did not finish within its deadline of " + std::to_string(limit.count()) + " ms; abandoned (GPU hung?)";
    std::vector<GpuOutcome> told;
    {
      std::lock_guard lock(job->mutex);
      told = job->partial;
    }
    Outcome out;
    out.hung = true;
    if (!per_gpu || job->gpus.empty()) {
      out.results = outcomes_for(job->gpus, per_gpu, CheckStatus::fail, message, k_code_hang, k_hang_hint);
      return out;
    }
    for (const auto& g : job->gpus) {
      // A GPU, or one MIG device of it, by its UUID.
      auto it = std::find_if(told.begin(), told.end(), [&](const GpuOutcome& o) {
        return o.gpu == g.index && (o.mig ? o.mig->uuid : std::string()) == (g.mig ? g.mig->uuid : std::string());
      });
      if (it != told.end()) {
        out.results.push_back(*it);
      } else {
        out.results.push_back(GpuOutcome{g.index, CheckStatus::fail, message, k_code_hang, k_hang_hint, {}, g.mig});
        out.hung_gpus.push_back(g.index);
      }
    }
    return out;
  }
  worker.join();
  std::lock_guard lock(job->mutex);
  if (job->thrown)
    return {outcomes_for(job->gpus, per_gpu, CheckStatus::fail, "the check threw: " + *job->thrown, k_code_internal,
                         k_internal_hint),
            false, {}};
  if (job->outcomes.empty()) {
    if (job->gpus.empty()) return {outcomes_for(job->gpus, false, CheckStatus::skip, "no GPU to check", "", ""), false, {}};
    return {outcomes_for(job->gpus, per_gpu, CheckStatus::fail, "the check returned no outcome", k_code_internal,
                         k_internal_hint),
            false, {}};
  }
  return {std::move(job->outcomes), false, {}};
}

using Clock = std::function<SteadyClock::time_point()>;

std::vector<std::shared_ptr<Check>> share_checks(std::vector<std::unique_ptr<Check>> owned_checks) {
  std::vector<std::shared_ptr<Check>> checks;
  checks.reserve(owned_checks.size());
  for (auto& c : owned_checks)
    if (c) checks.emplace_back(std::move(c));
  return checks;
}

// Every --check entry must select something, whatever the level: a typo must not read as "nothing to check".
gpuenv::Status check_filter(const std::vector<std::shared_ptr<Check>>& checks, const std::vector<std::string>& filter) {
  for (const auto& entry : filter) {
    const bool known = !entry.empty() && std::any_of(checks.begin(), checks.end(), [&](const auto& c) {
      return filter_matches(*c, entry);
    });
    if (known) continue;
    std::vector<std::string> keys, categories;
    for (const auto& c : checks) {
      keys.push_back(c->key());
      if (std::find(categories.begin(), categories.end(), c->category()) == categories.end())
        categories.push_back(c->category());
    }
    return make_error(ErrorKind::usage, "validate.unknown_check",
                      "no check matches --check '" + entry + "'; known checks: " + join(keys, ", ") +
                          "; categories: " + join(categories, ", "),
                      "--check", "give a check key, a key prefix such as gemm_, or a category; `gpuenv checks` lists them");
  }
  return ok_status();
}

// Reads the driver state into the report and returns the GPU inventory; what cannot be read becomes a note.
std::vector<GpuInfo> read_machine(GpuBackend& backend, Report& report) {
  if (auto d = backend.driver(); d.ok()) {
    report.driver = std::move(d.value());
  } else {
    report.notes.push_back("driver state: " + d.error().message);
  }
  std::vector<GpuInfo> all_gpus;
  if (auto g = backend.gpus(); g.ok()) {
    all_gpus = std::move(g.value());
  } else {
    report.notes.push_back("GPU inventory: " + g.error().message);
  }
  return all_gpus;
}

// Marks the report could_not_run when there is no driver or no GPU; returns the hint the GPU checks skip with.
std::string mark_could_not_run(Report& report, const std::vector<GpuInfo>& all_gpus) {
  std::string could_not_run_hint;
  if (!report.driver.loaded) {
    report.could_not_run = true;
    report.could_not_run_reason = "no NVIDIA driver loaded";
    could_not_run_hint = "install or load the NVIDIA driver (nvidia-smi must work), then run gpuenv validate again";
  } else if (all_gpus.empty()) {
    report.could_not_run = true;
    report.could_not_run_reason = "no NVIDIA GPU found";
    could_not_run_hint =
        "check that the GPUs are visible here (nvidia-smi -L; in a container, the runtime must pass them in)";
  }
  return could_not_run_hint;
}

// The GPUs asked for (empty = all), in index order; an index the machine lacks is a usage error.
Result<std::vector<GpuInfo>> select_gpus(const std::vector<GpuInfo>& all_gpus, const std::vector<int>& asked) {
  if (asked.empty()) return all_gpus;
  std::vector<GpuInfo> selected;
  std::set<int> wanted(asked.begin(), asked.end());
  for (int index : wanted) {
    auto it = std::find_if(all_gpus.begin(), all_gpus.end(), [&](const GpuInfo& g) { return g.index == index; });
    if (it == all_gpus.end()) {
      std::vector<std::string> have;
      for (const auto& g : all_gpus) have.push_back(std::to_string(g.index));
      return make_error(ErrorKind::usage, "validate.unknown_gpu",
                        "GPU " + std::to_string(index) + " does not exist; this machine has GPU " + join(have, ", "),
                        "--gpus", "give indices as nvidia-smi numbers them, e.g. --gpus 0,1");
    }
    selected.push_back(*it);
  }
  return selected;
}

// The MIG devices of each selected GPU (read only: gpuenv never changes a MIG layout), in GPU order. A GPU whose
// devices cannot be read is checked as a whole, with a note.
std::map<int, std::vector<MigDevice>> read_mig_devices(GpuBackend& backend, const std::vector<GpuInfo>& selected,
                                                      Report& report) {
  std::map<int, std::vector<MigDevice>> out;
  for (const auto& g : selected) {
    auto devices = backend.mig_devices(g.index);
    if (!devices) {
      report.notes.push_back("MIG devices of GPU " + std::to_string(g.index) + ": " + devices.error().message);
      continue;
    }
    if (devices->empty()) continue;
    for (auto& d : *devices) {
      d.parent = g.index;
      if (d.parent_memory_bytes == 0) d.parent_memory_bytes = g.memory_total_bytes;
      report.mig_devices.push_back(d);
    }
    out.emplace(g.index, std::move(*devices));
  }
  return out;
}

// One entry per MIG device of a GPU with instances (the GPU's entry with `mig` set and the instance's memory),
// the GPU itself otherwise.
std::vector<GpuInfo> instance_units(const std::vector<GpuInfo>& gpus, const std::map<int, std::vector<MigDevice>>& mig) {
  std::vector<GpuInfo> out;
  for (const auto& g : gpus) {
    auto it = mig.find(g.index);
    if (it == mig.end()) {
      out.push_back(g);
      continue;
    }
    for (const auto& d : it->second) {
      GpuInfo unit = g;
      unit.mig = d;
      if (d.memory_bytes > 0) unit.memory_total_bytes = d.memory_bytes;
      out.push_back(std::move(unit));
    }
  }
  return out;
}

// The checks to list, in order: those of the level the filter selects, plus those it names by key outside the level.
std::vector<Planned> plan_checks(const std::vector<std::shared_ptr<Check>>& checks, Level level,
                                 const std::vector<std::string>& filter) {
  std::vector<Planned> plan;
  for (const auto& c : checks) {
    const bool in_level = c->runs_at(level);
    if (filter.empty()) {
      if (in_level) plan.push_back({c, true});
      continue;
    }
    const bool selected_by_filter =
        std::any_of(filter.begin(), filter.end(), [&](const std::string& e) { return filter_matches(*c, e); });
    if (!selected_by_filter) continue;
    const bool named = std::find(filter.begin(), filter.end(), c->key()) != filter.end();
    if (in_level || named) plan.push_back({c, in_level});
  }
  return plan;
}

// Must run before any worker thread exists: the real adapter forks its cuInit probe here (fork is only safe while
// this process has one thread). A failure is a note; the GPU checks report it again when they open a session.
void prepare_backend(GpuBackend& backend, const std::vector<Planned>& plan, Report& report) {
  const bool gpu_work = std::any_of(plan.begin(), plan.end(), [](const Planned& p) { return p.in_level && uses_gpu(*p.check); });
  if (gpu_work && !report.could_not_run) {
    if (gpuenv::Status prepared = backend.prepare(); !prepared) report.notes.push_back("CUDA driver: " + prepared.error().message);
  }
}

// The check's deadline for `gpus` GPUs, scaled, and never under 1 ms.
std::chrono::milliseconds deadline_of(const Check& check, Level level, std::size_t gpus, double scale) {
  const auto scaled =
      std::chrono::duration_cast<std::chrono::milliseconds>(check.deadline(level, gpus) * std::max(scale, 1e-3));
  return std::max(scaled, std::chrono::milliseconds(1));
}

// Runs the planned checks one at a time on the calling thread, appending each to the report and telling progress.
// Remembers the GPUs a check hung on, so that later GPU checks skip them instead of waiting on a hung driver.
class CheckSequence {
 public:
  CheckSequence(GpuBackend& backend, const CheckInputs& inputs, const RunOptions& options, const Clock& now,
                Report& report, std::vector<GpuInfo> selected, std::map<int, std::vector<MigDevice>> mig,
                std::string could_not_run_hint, int total)
      : m_backend(backend), m_inputs(inputs), m_options(options), m_now(now), m_report(report),
        m_selected(std::move(selected)), m_mig(std::move(mig)), m_could_not_run_hint(std::move(could_not_run_hint)),
        m_total(total) {
    m_job_inputs = inputs;
    m_job_inputs.gpus.clear();
    for (const auto& g : m_selected) m_job_inputs.gpus.push_back(g.index);
  }

  /// Runs one planned check and appends its entry to the report.
  void run(const Planned& item) {
    const auto start = m_now();
    const Check& check = *item.check;
    const bool per_gpu = uses_gpu(check);
    CheckReport entry;
    entry.key = check.key();
    entry.category = check.category();
    entry.description = check.description();
    entry.results = results_of(item, per_gpu, entry.key);
    entry.status = aggregate_outcomes(entry.results);
    entry.duration_ms = std::chrono::duration_cast<std::chrono::milliseconds>(m_now() - start).count();
    m_report.checks.push_back(std::move(entry));
    ++m_done;
    tell_progress();
  }

 private:
  std::vector<GpuOutcome> results_of(const Planned& item, bool per_gpu, const std::string& key) {
    if (!item.in_level) {
      return outcomes_for(m_selected, per_gpu, CheckStatus::skip,
                          "not part of level " + std::string(to_string(m_inputs.level)) + " (runs at: " +
                              levels_of(*item.check) + ")",
                          "", "choose a level that includes it with --level");
    }
    if (m_report.could_not_run && per_gpu) {
      return outcomes_for(m_selected, per_gpu, CheckStatus::skip, "could not run: " + m_report.could_not_run_reason, "",
                          m_could_not_run_hint);
    }
    return run_on_usable_gpus(item, per_gpu, key);
  }

  // Skips the GPUs an earlier check hung on and runs the check on the rest; results in GPU order.
  std::vector<GpuOutcome> run_on_usable_gpus(const Planned& item, bool per_gpu, const std::string& key) {
    std::vector<GpuInfo> usable;
    std::vector<GpuOutcome> hung_skips;
    for (const auto& g : m_selected) {
      if (per_gpu && m_hung.count(g.index)) {
        hung_skips.push_back(GpuOutcome{g.index, CheckStatus::skip, "GPU hung in " + m_hung_in[g.index], "",
                                        "fix the hang reported by " + m_hung_in[g.index] + " first", {}, std::nullopt});
      } else {
        usable.push_back(g);
      }
    }
    // MIG: per instance, or not on GPUs with instances. Instances share their GPU's time (they run at once, each
    // on its share), so the deadline counts the GPUs, not the instances.
    const std::size_t deadline_units = usable.size();
    if (per_gpu && !m_mig.empty()) usable = mig_units(*item.check, usable, hung_skips);
    std::vector<GpuOutcome> results;
    if (!(per_gpu && usable.empty() && !hung_skips.empty()))
      results = run_job(item, per_gpu, key, usable, deadline_units);
    results.insert(results.end(), hung_skips.begin(), hung_skips.end());
    std::stable_sort(results.begin(), results.end(),
                     [](const GpuOutcome& a, const GpuOutcome& b) { return a.gpu < b.gpu; });
    return results;
  }

  // The units a check runs on where GPUs have MIG instances (Check::mig_scope): the instances in place of their GPU,
  // the GPUs as they are, or only the GPUs without instances (the others get a SKIP in `skips`).
  std::vector<GpuInfo> mig_units(const Check& check, const std::vector<GpuInfo>& usable, std::vector<GpuOutcome>& skips) {
    switch (check.mig_scope()) {
      case MigScope::physical: return usable;
      case MigScope::instance: return instance_units(usable, m_mig);
      case MigScope::whole_gpu: break;
    }
    std::vector<GpuInfo> out;
    for (const auto& g : usable) {
      auto it = m_mig.find(g.index);
      if (it == m_mig.end()) {
        out.push_back(g);
        continue;
      }
      skips.push_back(GpuOutcome{g.index, CheckStatus::skip,
                                 "MIG is on with " + std::to_string(it->second.size()) +
                                     " instance(s): this check needs the whole GPU, which CUDA cannot open while MIG "
                                     "is on",
                                 "", "run it on a GPU with MIG off (gpuenv never changes the MIG mode)", {}, std::nullopt});
    }
    return out;
  }

  // Asks the check whether it applies, then runs it under the watchdog on `usable`; the deadline is that for
  // `deadline_units` GPUs.
  std::vector<GpuOutcome> run_job(const Planned& item, bool per_gpu, const std::string& key,
                                  const std::vector<GpuInfo>& usable, std::size_t deadline_units) {
    const Check& check = *item.check;
    auto job = std::make_shared<Job>();
    job->check = item.check;
    job->backend = &m_backend;
    job->inputs = m_job_inputs;
    job->driver = m_report.driver;
    job->gpus = usable;
    std::optional<std::string> reason;
    try {
      CheckContext probe{m_backend, job->inputs, job->driver, job->gpus, SteadyClock::now()};
      reason = check.not_applicable(probe);
    } catch (const std::exception& e) {
      return outcomes_for(usable, per_gpu, CheckStatus::fail, "the applicability test threw: " + std::string(e.what()),
                          k_code_internal, k_internal_hint);
    } catch (...) {
      return outcomes_for(usable, per_gpu, CheckStatus::fail, "the applicability test threw", k_code_internal,
                          k_internal_hint);
    }
    if (reason) return outcomes_for(usable, per_gpu, CheckStatus::skip, *reason, "", "");
    auto limit = deadline_of(check, m_inputs.level, deadline_units, m_options.deadline_scale);
    if (auto extra = m_options.extra_deadline.find(check.key()); extra != m_options.extra_deadline.end())
      limit += extra->second;
    job->deadline = SteadyClock::now() + limit;
    Outcome outcome = run_guarded(job, limit, per_gpu);
    if (outcome.hung && per_gpu) {
      for (int index : outcome.hung_gpus) {
        m_hung.insert(index);
        m_hung_in.emplace(index, key);
      }
    }
    return std::move(outcome.results);
  }

  void tell_progress() {
    if (!m_options.progress) return;
    try {
      m_options.progress(m_report.checks.back().key, m_report.checks.back().status, m_done, m_total);
    } catch (...) {
      // Progress display is best effort; it must not cost the report.
    }
  }

  GpuBackend& m_backend;
  const CheckInputs& m_inputs;
  const RunOptions& m_options;
  const Clock& m_now;
  Report& m_report;
  const std::vector<GpuInfo> m_selected;
  const std::map<int, std::vector<MigDevice>> m_mig;  // GPU -> its MIG devices (GPUs with instances only)
  const std::string m_could_not_run_hint;
  const int m_total;
  CheckInputs m_job_inputs;  // inputs with the selected GPUs spelt out, copied into each job
  std::set<int> m_hung;                  // GPUs a check hung on
  std::map<int, std::string> m_hung_in;  // GPU -> the check that hung there
  int m_done = 0;
};

Result<Report> run_unguarded(GpuBackend& backend, const CheckInputs& inputs,
                             std::vector<std::unique_ptr<Check>> owned_checks, const RunOptions& options) {
  const Clock now = options.clock ? options.clock : Clock([] { return SteadyClock::now(); });
  const auto run_start = now();
  const std::vector<std::shared_ptr<Check>> checks = share_checks(std::move(owned_checks));
  GPUENV_CHECK(check_filter(checks, options.filter));

  Report report;
  report.backend = backend.name();
  report.level = inputs.level;
  report.started_at = options.started_at;
  const std::vector<GpuInfo> all_gpus = read_machine(backend, report);
  const std::vector<Planned> plan = plan_checks(checks, inputs.level, options.filter);
  std::string could_not_run_hint;
  if (std::any_of(plan.begin(), plan.end(), [](const Planned& p) { return p.in_level && p.check->needs_nvidia(); })) {
    could_not_run_hint = mark_could_not_run(report, all_gpus);
  } else if (!report.driver.loaded || all_gpus.empty()) {
    report.notes.push_back("no NVIDIA driver or GPU here; the checks run need none");
  }
  report.could_not_run_hint = could_not_run_hint;
  std::vector<GpuInfo> selected;
  if (!report.could_not_run && report.driver.loaded && !all_gpus.empty()) {
    GPUENV_TRY(chosen, select_gpus(all_gpus, inputs.gpus));
    selected = std::move(chosen);
  }
  report.gpus = selected;
  std::map<int, std::vector<MigDevice>> mig = read_mig_devices(backend, selected, report);

  prepare_backend(backend, plan, report);

  CheckSequence sequence(backend, inputs, options, now, report, std::move(selected), std::move(mig),
                         std::move(could_not_run_hint), static_cast<int>(plan.size()));
  for (const auto& item : plan) sequence.run(item);

  report.status = overall_status(report.checks);
  report.duration_ms = std::chrono::duration_cast<std::chrono::milliseconds>(now() - run_start).count();
  return report;
}

}  // namespace

bool uses_gpu(const Check& check) { return check.uses_gpu(); }

bool filter_matches(const Check& check, const std::string& entry) {
  if (entry.empty()) return false;
  const std::string key = check.key();
  return entry == check.category() || key.compare(0, entry.size(), entry) == 0;
}

Result<Report> run_validation(GpuBackend& backend, const CheckInputs& inputs, std::vector<std::unique_ptr<Check>> checks,
                              const RunOptions& options) {
  try {
    return run_unguarded(backend, inputs, std::move(checks), options);
  } catch (const std::exception& e) {
    return make_error(ErrorKind::internal, "validate.runner", std::string("validation run failed: ") + e.what(), {},
                      k_internal_hint);
  }
}

Result<std::vector<int>> parse_gpu_list(const std::string& text) {
  std::vector<int> out;
  std::istringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    try {
      std::size_t used = 0;
      const int v = std::stoi(item, &used);
      if (used != item.size() || v < 0) throw std::invalid_argument("x");
      out.push_back(v);
    } catch (const std::exception&) {
      return make_error(ErrorKind::usage, "validate.gpus", "'" + item + "' in --gpus '" + text + "' is not a GPU index", "--gpus",
                        "give indices as nvidia-smi numbers them, separated by commas: --gpus 0,1");
    }
  }
  return out;
}

}  // namespace gpuenv::validate
