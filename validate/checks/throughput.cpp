// Throughput checks: HBM, host-to-device and device-to-host bandwidth, GEMM TFLOPS per type, peer-to-peer
// bandwidth and NCCL all-reduce. The adapter times them as nvbandwidth does and verifies the data after each sample;
// the checks judge the samples with judge.hpp: median of >= 3 verified samples against fail_fraction x the GPU
// model's reference, listed or derived from the hardware (MEASURED with code no_threshold when there is none), then
// the node rule among GPUs of the same model. Device-local measurements (HBM bandwidth, GEMM TFLOPS) run on every GPU at once, as a node works
// under load; the copies that share the host's links (host-to-device, device-to-host, peer-to-peer) are measured
// one after another so that one GPU's traffic does not lower another's figure.
#include <algorithm>
#include <functional>
#include <map>

#include "validate/checks/check_support.hpp"
#include "validate/checks/judge.hpp"
#include "validate/multinode/nic.hpp"

namespace gpuenv::validate::checks {
namespace {

// Calls visit(i) for each GPU index: all at once (parallel) or one after another. `visit` must not throw: a
// standard exception from it (an allocation failure) would end the process on a thread, so callers keep to
// Result-returning calls.
template <class Visit>
void visit_indices(std::size_t n, bool parallel, Visit&& visit) {
  if (parallel) {
    run_concurrently(n, visit);
  } else {
    for (std::size_t i = 0; i < n; ++i) visit(i);
  }
}

// Budgets per GPU: warm-up plus samples (3, 5 or 10) of a measurement that takes well under a second each.
constexpr Budget k_bw_quick{300, 1200};
constexpr Budget k_bw_standard{500, 3000};
constexpr Budget k_bw_long{500, 5000};
// Four GEMM types; fp64 on GPUs with little fp64 throughput (L4: ~0.5 TFLOPS) dominates.
constexpr Budget k_gemm_standard{500, 20000};
constexpr Budget k_gemm_long{500, 40000};

const std::vector<std::string>& gemm_dtypes() {
  static const std::vector<std::string> k_dtypes = {"bf16", "fp16", "tf32", "fp64"};
  return k_dtypes;
}

double node_tolerance(const CheckContext& context) {
  return context.inputs.thresholds ? context.inputs.thresholds->node_tolerance : ThresholdTable{}.node_tolerance;
}

// One judged measurement, with what the node rule needs to know about it.
struct Part {
  std::string label;        // "" for a check with one metric per GPU, "bf16", "to GPU 3"
  std::string prefix;       // metric-name prefix: "", "bf16.", "to_gpu3."
  std::uint32_t pci = 0;    // the model the node rule groups by
  std::string group;        // node-rule group within the model: the dtype, or "" when there is one metric
  MetricJudgement judgement;
};

MetricJudgement error_judgement(std::string_view what, const Error& error) {
  MetricJudgement j;
  j.status = CheckStatus::fail;
  j.code = "backend_error";
  j.message = std::string(what) + ": " + error.message + (error.id.empty() ? std::string() : " [" + error.id + "]");
  return j;
}

// The node rule: within each (model, group), medians below (1 - tolerance) x their mean fail with node_outlier.
void apply_node_rule(std::vector<Part*>& parts, double tolerance) {
  std::map<std::pair<std::uint32_t, std::string>, std::vector<Part*>> groups;
  for (Part* p : parts) {
    if (p->judgement.median) groups[{p->pci, p->group}].push_back(p);
  }
  for (auto& [key, members] : groups) {
    if (members.size() < 2) continue;
    std::vector<double> medians;
    for (Part* p : members) medians.push_back(*p->judgement.median);
    const auto outliers = node_outliers(medians, tolerance);
    double mean = 0;
    for (double m : medians) mean += m;
    mean /= static_cast<double>(medians.size());
    for (Part* p : members) {
      const std::string& unit = p->judgement.unit;
      p->judgement.metrics.push_back({p->prefix + "node_mean_" + unit_suffix(unit), mean, unit});
    }
    for (const auto& o : outliers) {
      MetricJudgement& j = members[o.index]->judgement;
      j.message += "; below the node rule: " + fixed(o.value, 1) + " < " + fixed(o.floor, 1) + " (" +
                   fixed((1.0 - tolerance) * 100, 0) + "% of the mean " + fixed(o.mean, 1) + " of " +
                   std::to_string(members.size()) + " such GPUs)";
      if (j.status != CheckStatus::fail) {
        j.status = CheckStatus::fail;
        j.code = "node_outlier";
      }
    }
  }
}

// One outcome from a GPU's parts: the worst status (MEASURED when a part was not judged and none failed or warned),
// the code of the first part with that status, the parts' messages, all metrics, and notes (unsupported types, ...).
GpuOutcome combine(int gpu, const std::vector<Part>& parts, const std::vector<std::string>& notes,
                   const std::string& none_reason) {
  std::string note_text;
  for (const auto& n : notes) note_text += (note_text.empty() ? "" : "; ") + n;
  if (parts.empty()) return skipped(gpu, none_reason + (note_text.empty() ? "" : ": " + note_text));
  CheckStatus status = CheckStatus::skip;
  for (const auto& p : parts) status = worse(status, p.judgement.status);
  std::string code;
  for (const auto& p : parts) {
    if (p.judgement.status == status && !p.judgement.code.empty()) {
      code = p.judgement.code;
      break;
    }
  }
  std::string message;
  for (const auto& p : parts) {
    if (!message.empty()) message += "; ";
    message += p.label.empty() ? p.judgement.message : p.label + ": " + p.judgement.message;
  }
  if (!note_text.empty()) message += "; " + note_text;
  GpuOutcome out = outcome(gpu, status, message, code);
  for (const auto& p : parts)
    out.metrics.insert(out.metrics.end(), p.judgement.metrics.begin(), p.judgement.metrics.end());
  return out;
}

// The reference rule of a per-GPU metric: the listed reference (hbm), or one derived from the GPU's link (h2d, d2h).
// It also names the node-rule group the GPU's figure is compared within ("" = all GPUs of the model).
using RuleFor = std::function<ReferenceRule(CheckContext&, const GpuInfo&, const std::string& metric, std::string& group)>;

// The listed reference (hbm); for a MIG device scaled to its share, and compared by the node rule only with
// instances of the same profile. Compute instances of one GPU instance are measured at once (visit_indices,
// parallel) and share its memory bandwidth, so each one's share is divided among the ones in this run.
ReferenceRule listed_rule(CheckContext& context, const GpuInfo& gpu, const std::string& metric, std::string& group) {
  ReferenceRule rule = find_reference(context.inputs.thresholds, gpu.pci_device_id, metric);
  if (!gpu.mig) return rule;
  group = "mig " + gpu.mig->profile;
  return mig_scaled_rule(std::move(rule), context.inputs.thresholds, gpu.pci_device_id, *gpu.mig, metric,
                         gpu_instance_sharers(context, gpu));
}

ReferenceRule host_device_rule(CheckContext& context, const GpuInfo& gpu, const std::string& metric,
                               std::string& group) {
  // The link's maximum generation and width do not change under load; a GPU that cannot report them is MEASURED.
  // The node rule compares GPUs on the same kind of link only: a GPU in a x8 slot is not an outlier among x16 ones.
  auto health = context.backend.health(gpu.index);
  const std::optional<PcieLink> link = health ? health->pcie_link : std::nullopt;
  if (link) group = "Gen" + std::to_string(link->max_gen) + " x" + std::to_string(link->max_width);
  return host_device_reference(context.inputs.thresholds, gpu.pci_device_id, metric, link, context.driver.cc_state);
}

// A per-GPU measurement through a session, judged against one metric key (hbm, h2d, d2h).
class SessionMetricCheck final : public SpecCheck {
 public:
  using Measure = std::function<Result<Samples>(GpuSession&, int samples)>;
  SessionMetricCheck(CheckSpec spec, std::string metric, Measure measure, RuleFor rule, MigScope scope)
      : SpecCheck(std::move(spec)), m_metric(std::move(metric)), m_measure(std::move(measure)), m_rule(std::move(rule)),
        m_scope(scope) {}
  [[nodiscard]] MigScope mig_scope() const override { return m_scope; }
  [[nodiscard]] std::optional<std::string> not_applicable(const CheckContext& c) const override {
    return needs_driver_and_gpus(c);
  }
  std::vector<GpuOutcome> run(CheckContext& context) override {
    const int samples = samples_at(context.inputs.level);
    std::vector<std::optional<GpuOutcome>> early(context.gpus.size());
    std::vector<std::vector<Part>> parts(context.gpus.size());
    auto measure_one = [&](std::size_t i) {
      const GpuInfo& gpu = context.gpus[i];
      if (past_deadline(context)) {
        early[i] = out_of_time(gpu.index);
        return;
      }
      auto session = open_session(context.backend, gpu);
      if (!session) {
        early[i] = open_failed(gpu, session.error());
        return;
      }
      auto measured = m_measure(**session, samples);
      Part part;
      part.pci = gpu.pci_device_id;
      const ReferenceRule rule = m_rule(context, gpu, m_metric, part.group);
      part.judgement = measured ? judge_samples(m_metric, *measured, rule)
                                : error_judgement("measuring " + m_metric, measured.error());
      parts[i].push_back(std::move(part));
    };
    visit_indices(context.gpus.size(), parallel(), measure_one);
    std::vector<Part*> all;
    for (auto& list : parts)
      for (auto& p : list) all.push_back(&p);
    apply_node_rule(all, node_tolerance(context));
    std::vector<GpuOutcome> out;
    for (std::size_t i = 0; i < context.gpus.size(); ++i) {
      out.push_back(early[i] ? *early[i] : combine(context.gpus[i].index, parts[i], {}, "not measured"));
      out.back().mig = context.gpus[i].mig;
    }
    return out;
  }

 private:
  std::string m_metric;
  Measure m_measure;
  RuleFor m_rule;
  MigScope m_scope;
};

class GemmTflops final : public SpecCheck {
 public:
  GemmTflops()
      : SpecCheck({"gemm_tflops", "throughput",
                   "Dense GEMM throughput for bf16, fp16, tf32 and fp64 (a type the GPU lacks is noted, not failed)",
                   std::nullopt, k_gemm_standard, k_gemm_long, /*parallel=*/true}) {}
  [[nodiscard]] MigScope mig_scope() const override { return MigScope::instance; }
  [[nodiscard]] std::optional<std::string> not_applicable(const CheckContext& c) const override {
    return needs_driver_and_gpus(c);
  }
  std::vector<GpuOutcome> run(CheckContext& context) override {
    const int samples = samples_at(context.inputs.level);
    const std::size_t n = context.gpus.size();
    std::vector<std::optional<GpuOutcome>> early(n);
    std::vector<std::vector<Part>> parts(n);
    std::vector<std::vector<std::string>> notes(n);
    auto measure_one = [&](std::size_t i) {
      const GpuInfo& gpu = context.gpus[i];
      if (past_deadline(context)) {
        early[i] = out_of_time(gpu.index);
        return;
      }
      auto session = open_session(context.backend, gpu);
      if (!session) {
        early[i] = open_failed(gpu, session.error());
        return;
      }
      std::vector<std::string> unsupported;
      for (const auto& dtype : gemm_dtypes()) {
        const std::string metric = "gemm_tflops." + dtype;
        auto measured = (*session)->gemm_tflops(dtype, samples);
        if (measured && !measured->has_value()) {
          unsupported.push_back(dtype);
          continue;
        }
        Part part;
        part.label = dtype;
        part.prefix = dtype + ".";
        part.pci = gpu.pci_device_id;
        part.group = gpu.mig ? dtype + " mig " + gpu.mig->profile : dtype;
        ReferenceRule rule = gemm_reference(context.inputs.thresholds, gpu.pci_device_id, metric);
        if (gpu.mig) rule = mig_scaled_rule(std::move(rule), context.inputs.thresholds, gpu.pci_device_id, *gpu.mig, metric);
        part.judgement = measured ? judge_samples(metric, **measured, rule, part.prefix)
                                  : error_judgement("measuring " + metric, measured.error());
        parts[i].push_back(std::move(part));
      }
      if (!unsupported.empty()) {
        std::string list;
        for (const auto& d : unsupported) list += (list.empty() ? "" : ", ") + d;
        // A GEMM library that could not start (an image's cuBLAS too new for the driver) also leaves types
        // unmeasured: say so rather than blame the GPU.
        const std::string libraries = (*session)->gemm_library_notes();
        notes[i].push_back(libraries.empty() ? "not supported by this GPU: " + list
                                             : "not measured: " + list + " (GEMM libraries: " + libraries + ")");
      }
    };
    visit_indices(n, parallel(), measure_one);
    std::vector<Part*> all;
    for (auto& list : parts)
      for (auto& p : list) all.push_back(&p);
    apply_node_rule(all, node_tolerance(context));
    std::vector<GpuOutcome> out;
    for (std::size_t i = 0; i < n; ++i) {
      out.push_back(early[i] ? *early[i]
                             : combine(context.gpus[i].index, parts[i], notes[i], "no GEMM type could be measured"));
      out.back().mig = context.gpus[i].mig;
    }
    return out;
  }
};

class P2pBandwidth final : public SpecCheck {
 public:
  P2pBandwidth()
      : SpecCheck({"p2p_bandwidth", "throughput",
                   "Peer-to-peer copy bandwidth between every ordered pair of GPUs; NVLink links are reported",
                   std::nullopt, Budget{500, 2000}, Budget{500, 4000}}) {}
  [[nodiscard]] MigScope mig_scope() const override { return MigScope::whole_gpu; }
  [[nodiscard]] std::optional<std::string> not_applicable(const CheckContext& c) const override {
    if (auto reason = needs_driver_and_gpus(c)) return reason;
    if (c.gpus.size() < 2) return std::string("needs two or more GPUs; " + std::to_string(c.gpus.size()) + " selected");
    return std::nullopt;
  }
  std::vector<GpuOutcome> run(CheckContext& context) override {
    const int samples = samples_at(context.inputs.level);
    const std::size_t n = context.gpus.size();
    std::vector<std::optional<GpuOutcome>> early(n);
    std::vector<std::vector<Part>> parts(n);
    std::vector<std::vector<std::string>> notes(n);
    for (std::size_t i = 0; i < n; ++i) {
      const GpuInfo& src = context.gpus[i];
      if (past_deadline(context)) {
        early[i] = out_of_time(src.index);
        continue;
      }
      std::string no_peer;
      for (const auto& dst : context.gpus) {
        if (dst.index == src.index) continue;
        auto measured = context.backend.p2p_bandwidth(src.index, dst.index, samples);
        if (measured && !measured->has_value()) {
          no_peer += (no_peer.empty() ? "" : ", ") + std::to_string(dst.index);
          continue;
        }
        Part part;
        part.label = "to GPU " + std::to_string(dst.index);
        part.prefix = "to_gpu" + std::to_string(dst.index) + ".";
        part.pci = src.pci_device_id;
        part.judgement =
            measured ? judge_samples("p2p_bandwidth", **measured,
                                     nvlink_reference(context.inputs.thresholds, src.pci_device_id, "p2p_bandwidth",
                                                      src.nvlink_links_active, context.driver.nvswitch_present),
                                     part.prefix)
                     : error_judgement("measuring p2p_bandwidth to GPU " + std::to_string(dst.index), measured.error());
        parts[i].push_back(std::move(part));
      }
      if (!no_peer.empty()) notes[i].push_back("no peer access to GPU(s) " + no_peer);
    }
    std::vector<Part*> all;
    for (auto& list : parts)
      for (auto& p : list) all.push_back(&p);
    apply_node_rule(all, node_tolerance(context));
    std::vector<GpuOutcome> out;
    for (std::size_t i = 0; i < n; ++i) {
      const GpuInfo& src = context.gpus[i];
      GpuOutcome o = early[i] ? *early[i] : combine(src.index, parts[i], notes[i], "peer access is not possible");
      o.metrics.push_back({"nvlink_links_active", static_cast<double>(src.nvlink_links_active), "count"});
      out.push_back(std::move(o));
    }
    return out;
  }

 protected:
  // One measurement per ordered pair.
  [[nodiscard]] std::size_t budget_eighths(std::size_t gpu_count) const override {
    return 8 * (gpu_count < 2 ? 1 : gpu_count * (gpu_count - 1));
  }
};

class NcclAllreduce final : public SpecCheck {
 public:
  NcclAllreduce()
      : SpecCheck({"nccl_allreduce", "throughput", "NCCL all-reduce bus bandwidth across the selected GPUs",
                   std::nullopt, Budget{10000, 1000}, Budget{20000, 2000}}) {}
  [[nodiscard]] MigScope mig_scope() const override { return MigScope::whole_gpu; }
  [[nodiscard]] std::optional<std::string> not_applicable(const CheckContext& c) const override {
    if (auto reason = needs_driver_and_gpus(c)) return reason;
    // Across nodes one GPU per node is enough: the all-reduce then crosses the network.
    if (c.gpus.size() < 2 && !c.inputs.multi_node)
      return std::string("needs two or more GPUs; " + std::to_string(c.gpus.size()) + " selected");
    return std::nullopt;
  }
  std::vector<GpuOutcome> run(CheckContext& context) override {
    if (context.inputs.multi_node) return {run_multi_node(context)};
    std::vector<int> indices;
    bool one_model = true;
    int links = context.gpus.front().nvlink_links_active;  // bus bandwidth is bound by the GPU with fewest links
    for (const auto& g : context.gpus) {
      indices.push_back(g.index);
      one_model = one_model && g.pci_device_id == context.gpus.front().pci_device_id;
      links = std::min(links, g.nvlink_links_active);
    }
    auto measured = context.backend.nccl_allreduce(indices, samples_at(context.inputs.level));
    if (!measured) return {failed(-1, "running the NCCL all-reduce", measured.error())};
    if (!measured->has_value())
      return {skipped(-1, "NCCL is not present (libnccl could not be loaded)",
                      "install NCCL in the image, or run with --image so the image's NCCL is used")};
    // With mixed models there is no one reference that applies: reported, not judged.
    // Bus bandwidth is comparable with the per-GPU link bandwidth (NVIDIA/nccl-tests doc/PERFORMANCE.md).
    ReferenceRule rule = one_model ? nvlink_reference(context.inputs.thresholds, context.gpus.front().pci_device_id,
                                                      "nccl_allreduce", links, context.driver.nvswitch_present)
                                   : ReferenceRule{std::nullopt, 0.75, "a node of mixed GPU models", {}};
    MetricJudgement j = judge_samples("nccl_allreduce", **measured, rule);
    GpuOutcome out = outcome(-1, j.status, std::to_string(indices.size()) + " GPUs: " + j.message, j.code);
    out.metrics = std::move(j.metrics);
    return {out};
  }

 private:
  // --multi-node: this rank's part of the all-reduce across nodes (CheckInputs::multi_node); rank 0 judges every
  // rank's bus bandwidth against that rank's NICs, the others their own.
  static GpuOutcome run_multi_node(CheckContext& context) {
    std::vector<std::string> bus_ids;
    for (const auto& g : context.gpus) bus_ids.push_back(g.pci_bus_id);
    auto result = context.inputs.multi_node(bus_ids, samples_at(context.inputs.level));
    if (!result) {
      const Error& e = result.error();
      if (e.id == "nccl.missing")
        return skipped(-1, "NCCL is not present (libnccl could not be loaded): " + e.message,
                       "install NCCL on every node, or run with --image so the image's NCCL is used");
      return failed(-1, "running the NCCL all-reduce across nodes", e, multi_node_code(e.id));
    }
    return judge_multi_node(context, *result);
  }

  static const char* multi_node_code(const std::string& id) {
    if (id == "multinode.peer_missing") return "peer_missing";
    if (id == "multinode.peer_lost" || id == "multinode.peer_failed" || id == "multinode.timeout") return "peer_lost";
    if (id.rfind("multinode.", 0) == 0) return "rendezvous_failed";
    return "backend_error";
  }

  static GpuOutcome judge_multi_node(const CheckContext& context, const multinode::MultiNodeResult& result) {
    CheckStatus worst = CheckStatus::skip;
    std::string code, message;
    std::vector<Metric> metrics;
    auto worsen = [&worst, &code](CheckStatus status, const std::string& status_code) {
      const CheckStatus before = worst;
      worst = worse(worst, status);
      if (worst != before) code = status_code;
    };
    for (const multinode::RankReport& r : result.ranks) {
      const std::string who = "rank " + std::to_string(r.rank) + " (" + r.host + ")";
      if (!r.samples) {  // never a pass: a rank that measured nothing was not judged
        message += (message.empty() ? "" : "; ") + who + ": no measurement" +
                   (r.error_message.empty() ? std::string() : " (" + r.error_message + ")");
        worsen(CheckStatus::fail, r.error_id.empty() ? "rendezvous_failed" : multi_node_code(r.error_id));
        continue;
      }
      const double node_gbs = multinode::node_nic_gbs(r.nics, r.gpus);
      const int active = multinode::active_ports(r.nics);
      const std::string basis =
          multinode::describe_nics(r.nics) +
          (node_gbs > 0 ? ", the fastest " + std::to_string(std::min(active, r.gpus)) + " used by " +
                              std::to_string(r.gpus) + " GPU(s)"
                        : "");
      const ReferenceRule rule = nic_reference(context.inputs.thresholds, node_gbs, basis);
      MetricJudgement j = judge_samples("nccl_allreduce", *r.samples, rule, "rank" + std::to_string(r.rank) + ".");
      message += (message.empty() ? "" : "; ") + who + ": " + j.message;
      worsen(j.status, j.code);
      // A port that is down leaves GPUs without a NIC of their own: the node's fabric is short (half of it when one
      // of two ports is down), whatever the figure says.
      if (const std::string down = multinode::inactive_ports(r.nics); !down.empty() && active < r.gpus) {
        message += "; " + who + ": RDMA port(s) not active: " + down + " (" + std::to_string(active) +
                   " active for " + std::to_string(r.gpus) + " GPU(s))";
        worsen(CheckStatus::warn, "rdma_port_down");
      }
      for (auto& m : j.metrics) metrics.push_back(std::move(m));
    }
    const std::string scope = std::to_string(result.world) + " nodes x " + std::to_string(context.gpus.size()) +
                              " GPU(s), this is rank " + std::to_string(result.rank) +
                              (result.rank == 0 ? " (every rank's result)" : " (its own result; rank 0 reports all)");
    GpuOutcome out = outcome(-1, worst, scope + ": " + message, code);
    if (code == "rdma_port_down")
      out.hint = "bring the named RDMA ports up (`ibstat`, cables, the switch port, the subnet manager): each GPU "
                 "drives one NIC, so a port that is down slows the node's all-reduce";
    if (code == "no_threshold")
      out.hint = "the figure is reported, not judged: a node without an active RDMA port (InfiniBand or RoCE, see "
                 "`ibstat`) has no link rate to judge it by, and the thresholds' rdma_nic rule gives the fraction";
    out.metrics = std::move(metrics);
    out.metrics.push_back({"nodes", static_cast<double>(result.world), "count"});
    return out;
  }
};

}  // namespace

std::vector<std::unique_ptr<Check>> throughput_checks() {
  std::vector<std::unique_ptr<Check>> out;
  out.push_back(std::make_unique<SessionMetricCheck>(
      CheckSpec{"hbm_bandwidth", "throughput", "Device memory bandwidth (STREAM copy, bytes read plus written)",
                k_bw_quick, k_bw_standard, k_bw_long, /*parallel=*/true},
      "hbm_bandwidth", [](GpuSession& s, int samples) { return s.hbm_bandwidth(samples); }, listed_rule,
      MigScope::instance));
  out.push_back(std::make_unique<SessionMetricCheck>(
      CheckSpec{"h2d_bandwidth", "throughput", "Host-to-device copy-engine bandwidth from pinned memory on the GPU's NUMA node",
                std::nullopt, k_bw_standard, k_bw_long},
      "h2d_bandwidth", [](GpuSession& s, int samples) { return s.copy_bandwidth(true, samples); }, host_device_rule,
      MigScope::whole_gpu));
  out.push_back(std::make_unique<SessionMetricCheck>(
      CheckSpec{"d2h_bandwidth", "throughput", "Device-to-host copy-engine bandwidth to pinned memory on the GPU's NUMA node",
                std::nullopt, k_bw_standard, k_bw_long},
      "d2h_bandwidth", [](GpuSession& s, int samples) { return s.copy_bandwidth(false, samples); }, host_device_rule,
      MigScope::whole_gpu));
  out.push_back(std::make_unique<GemmTflops>());
  out.push_back(std::make_unique<P2pBandwidth>());
  out.push_back(std::make_unique<NcclAllreduce>());
  return out;
}

}  // namespace gpuenv::validate::checks
