// gpuenv inspect IMAGE [--diff OTHER] [--json]: flags into one app::inspect call (images/oci/image_reader reads
// layouts, archives and registry images alike) and the answer rendered as text or JSON: what an image holds,
// layer by layer and package by package, and what changed between two images.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>

#include "app/inspect.hpp"
#include "base/time.hpp"
#include "base/safe_text.hpp"
#include "cli/commands.hpp"
#include "cli/render.hpp"
#include "images/plan/image_config.hpp"

namespace gpuenv::cli {
namespace {

using nlohmann::ordered_json;
using images::ImageSummary;
using images::LayerChange;
using images::LayerPackage;

std::string inspect_size_text(std::uint64_t bytes) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(1);
  if (bytes >= (1ull << 30)) o << static_cast<double>(bytes) / (1ull << 30) << " GiB";
  else if (bytes >= (1ull << 20)) o << static_cast<double>(bytes) / (1ull << 20) << " MiB";
  else o << static_cast<double>(bytes) / 1024.0 << " KiB";
  return o.str();
}

ordered_json to_json(const ImageSummary& img) {
  ordered_json j;
  j["schema"] = "gpuenv-inspect-v1";
  j["image"] = img.where;
  j["digest"] = img.digest;
  j["created"] = img.created;
  j["architecture"] = img.architecture;
  if (!img.index_platforms.empty()) j["index_platforms"] = img.index_platforms;
  j["labels"] = ordered_json::object();
  for (const auto& [k, v] : img.labels) j["labels"][k] = v;
  j["env"] = img.env;
  auto layers = ordered_json::array();
  for (const auto& l : img.layers) {
    auto pk = ordered_json::array();
    for (const auto& p : l.packages) pk.push_back({{"name", p.name}, {"version", p.version}, {"kind", p.kind}, {"bytes", p.bytes}});
    layers.push_back({{"name", l.name}, {"digest", l.digest}, {"size", l.size}, {"packages", pk}});
  }
  j["layers"] = layers;
  return j;
}

/// The image, its labels, and per layer its size and its largest packages (all with `all`).
void render_text(const ImageSummary& a, bool all, std::ostream& out) {
  std::uint64_t total = 0;
  for (const auto& l : a.layers) total += l.size;
  out << safe_text(a.where) << "  " << safe_text(a.digest) << "\n  " << safe_text(a.architecture, 60) << ", created " << safe_text(a.created, 60) << ", " << inspect_size_text(total) << " in " << a.layers.size()
      << " layers\n";
  if (!a.index_platforms.empty()) {
    out << "  one of an index of platforms:";
    for (const auto& p : a.index_platforms) out << " " << safe_text(p, 60);
    out << " (this machine's is shown)\n";
  }
  for (const auto& [k, v] : a.labels) out << "  label " << safe_text(k, 200) << "=" << safe_text(v, 400) << "\n";
  for (const auto& l : a.layers) {
    std::uint64_t bytes = 0;
    for (const auto& p : l.packages) bytes += p.bytes;
    out << "  layer " << std::left << std::setw(10) << safe_text(l.name, 60) << std::right << std::setw(11) << inspect_size_text(l.size) << " compressed, " << l.packages.size()
        << " packages, " << inspect_size_text(bytes) << " installed\n";
    std::vector<LayerPackage> by_size = l.packages;
    std::sort(by_size.begin(), by_size.end(),
              [](const LayerPackage& x, const LayerPackage& y) { return x.bytes != y.bytes ? x.bytes > y.bytes : x.name < y.name; });
    const std::size_t shown = all ? by_size.size() : std::min<std::size_t>(by_size.size(), 5);
    for (std::size_t i = 0; i < shown; ++i)
      out << "      " << std::setw(11) << inspect_size_text(by_size[i].bytes) << "  " << safe_text(by_size[i].name, 200) << " " << safe_text(by_size[i].version, 100) << " (" << safe_text(by_size[i].kind, 20) << ")\n";
    if (shown < by_size.size()) out << "      ... " << by_size.size() - shown << " more (--all)\n";
  }
}

ordered_json optional_json(const std::optional<std::string>& v) { return v ? ordered_json(*v) : ordered_json(nullptr); }

ordered_json diff_to_json(const ImageSummary& a, const ImageSummary& b, const std::vector<LayerChange>& changes) {
  ordered_json diff = ordered_json::array();
  for (const auto& c : changes) {
    ordered_json d;
    d["layer"] = c.layer;
    d["status"] = c.status;
    d["size_before"] = c.size_before;
    d["size_after"] = c.size_after;
    auto packages = ordered_json::array();
    for (const auto& p : c.packages)
      packages.push_back({{"name", p.name}, {"kind", p.kind}, {"before", optional_json(p.before)}, {"after", optional_json(p.after)}});
    d["packages"] = packages;
    diff.push_back(d);
  }
  ordered_json j;
  j["schema"] = "gpuenv-inspect-diff-v1";
  j["before"] = {{"image", a.where}, {"digest", a.digest}};
  j["after"] = {{"image", b.where}, {"digest", b.digest}};
  j["layers"] = diff;
  return j;
}

void render_diff_text(const ImageSummary& a, const ImageSummary& b, const std::vector<LayerChange>& changes, std::ostream& out) {
  out << safe_text(a.digest) << " -> " << safe_text(b.digest) << "\n";
  for (const auto& d : changes) {
    out << "  layer " << std::left << std::setw(10) << safe_text(d.layer, 60) << std::right << " " << d.status;
    if (d.status == "changed") out << " (" << inspect_size_text(d.size_before) << " -> " << inspect_size_text(d.size_after) << ")";
    out << "\n";
    for (const auto& c : d.packages)
      out << "      " << safe_text(c.name, 200) << " (" << safe_text(c.kind, 20) << "): " << safe_text(c.before.value_or("added"), 100) << " -> "
          << safe_text(c.after.value_or("removed"), 100) << "\n";
  }
}

/// A VM disk (docs/vm.md): `gpuenv-inspect-disk-v1`, or its partitions and packages as text.
void render_disk(const images::disk::DiskSummary& d, bool all, bool json, std::ostream& out) {
  if (json) {
    ordered_json parts = ordered_json::array();
    for (const auto& p : d.layout.partitions)
      parts.push_back({{"name", p.name}, {"type", p.type.str()}, {"type_name", images::disk::partition_type_name(p.type)}, {"uuid", p.unique.str()},
                       {"offset", p.offset()}, {"size", p.size()}});
    ordered_json packages = ordered_json::array();
    if (d.lock)
      for (const auto& p : d.lock->packages) packages.push_back({{"name", p.name}, {"version", p.version}, {"kind", std::string(resolver::to_string(p.kind))}});
    ordered_json j{{"schema", "gpuenv-inspect-disk-v1"}, {"path", d.path},           {"format", d.format},          {"file_size", d.file_size},
                   {"allocated", d.allocated},         {"disk_size", d.disk_size}, {"disk_guid", d.layout.disk.str()},
                   {"platform", d.platform ? ordered_json(d.platform->str()) : ordered_json(nullptr)}, {"partitions", parts},
                   {"spec", d.lock ? ordered_json(d.lock->spec_name) : ordered_json(nullptr)},
                   {"vm", d.lock && d.lock->vm ? ordered_json{{"kernel", d.lock->vm->kernel}, {"disk_size", d.lock->vm->disk_size}, {"cloud_init", d.lock->vm->cloud_init},
                                                              {"cmdline", d.lock->vm->cmdline},
                                                              {"driver", d.lock->vm->driver ? ordered_json{{"module", d.lock->vm->driver->module},
                                                                                                           {"version", d.lock->vm->driver->version},
                                                                                                           {"packages", d.lock->vm->driver->packages}}
                                                                                            : ordered_json(nullptr)}}
                                               : ordered_json(nullptr)},
                   {"packages", packages},
                   {"lock_problem", d.lock_problem.empty() ? ordered_json(nullptr) : ordered_json(d.lock_problem)}};
    out << j.dump(2) << "\n";
    return;
  }
  out << safe_text(d.path) << ": " << d.format << " disk, " << inspect_size_text(d.disk_size) << " (file " << inspect_size_text(d.file_size) << ", " << inspect_size_text(d.allocated) << " allocated)\n";
  out << "  GPT " << d.layout.disk.str() << (d.platform ? ", " + d.platform->str() : std::string()) << "\n";
  for (const auto& p : d.layout.partitions)
    out << "  partition " << std::left << std::setw(5) << safe_text(p.name, 72) << std::right << std::setw(11) << inspect_size_text(p.size()) << "  " << images::disk::partition_type_name(p.type)
        << "  " << p.unique.str() << "\n";
  if (!d.lock) {
    out << "  packages: unknown (" << safe_text(d.lock_problem, 400) << ")\n";
    return;
  }
  out << "  built from " << safe_text(d.lock->spec_name) << "'s lock (" << safe_text(d.lock->base) << (d.lock->vm ? ", kernel package " + safe_text(d.lock->vm->kernel) : std::string()) << "), "
      << d.lock->packages.size() << " packages\n";
  if (d.lock->vm && d.lock->vm->driver)
    out << "  NVIDIA driver " << safe_text(d.lock->vm->driver->version) << " (" << safe_text(d.lock->vm->driver->module) << ", built for the image's kernel)\n";
  std::size_t shown = 0;
  for (const auto& p : d.lock->packages) {
    const bool kernel = p.name.rfind("linux-image-", 0) == 0;
    if (!all && !kernel && shown >= 10) continue;
    out << "    " << safe_text(p.name) << " " << safe_text(p.version) << "\n";
    if (!kernel) ++shown;
  }
  if (!all && d.lock->packages.size() > shown + 2) out << "    ... (--all lists every package)\n";
}

}  // namespace

int cmd_inspect(const InspectOptions& o, Context& ctx) {
  app::InspectRequest rq;
  rq.image = o.image;
  rq.diff = o.diff;
  rq.plain_http = o.plain_http;
  auto r = app::inspect(rq, ctx);
  if (!r) return report_error(r.error(), o.json, ctx);
  if (r->disk) {
    render_disk(*r->disk, o.all, o.json, *ctx.out);
    return k_exit_ok;
  }
  if (!r->other) {
    if (o.json) {
      ordered_json j = to_json(r->image);
      auto marks = ordered_json::array();
      for (const auto& m : r->marks) {
        ordered_json mj{{"digest", m.digest}, {"predicateType", safe_text(m.predicate_type, 200)}};
        if (!m.summary.empty()) {
          mj["summary"] = m.summary;
        } else if (m.statement) {
          const auto& p = m.statement->predicate;
          mj["subject"] = m.statement->subject.str();
          mj["result"] = p.passed ? "PASSED" : "FAILED";
          mj["level"] = p.level;
          mj["gpu"] = p.gpu_product;
          mj["gpu_count"] = p.gpu_count;
          mj["driver"] = p.driver_version;
          mj["cc"] = p.cc_mode;
          mj["backend"] = p.backend;
          mj["timeVerified"] = format_rfc3339_utc(p.time_verified);
          mj["notAfter"] = format_rfc3339_utc(p.not_after);
        } else {
          mj["problem"] = m.problem;
        }
        marks.push_back(std::move(mj));
      }
      j["marks"] = marks;
      j["marks_problem"] = r->marks_problem.empty() ? ordered_json(nullptr) : ordered_json(r->marks_problem);
      *ctx.out << j.dump(2) << "\n";
    } else {
      render_text(r->image, o.all, *ctx.out);
      if (!r->marks_problem.empty()) *ctx.out << "  marks: could not be read: " << safe_text(r->marks_problem, 400) << "\n";
      for (const auto& m : r->marks) {
        if (!m.summary.empty()) {
          *ctx.out << "  attestation " << safe_text(m.digest.substr(0, 19)) << "  " << safe_text(m.summary, 300) << " (signature not checked: gpuenv verify --sbom/--provenance)\n";
          continue;
        }
        *ctx.out << "  mark " << safe_text(m.digest.substr(0, 19)) << "  ";
        if (!m.statement) {
          *ctx.out << "unreadable: " << safe_text(m.problem, 400) << "\n";
          continue;
        }
        *ctx.out << mark_predicate_line(m.statement->predicate) << " (signature not checked: gpuenv verify)\n";
      }
    }
    return k_exit_ok;
  }
  if (o.json) *ctx.out << diff_to_json(r->image, *r->other, r->changes).dump(2) << "\n";
  else render_diff_text(r->image, *r->other, r->changes, *ctx.out);
  return k_exit_ok;
}

Command add_inspect_command(CLI::App& app, const GlobalOptions& g) {
  auto o = std::make_shared<InspectOptions>();
  auto* sub = app.add_subcommand("inspect", "Show an image's layers, packages and sizes, or what changed between two images");
  sub->add_option("image", o->image,
                 "OCI layout directory (DIR[:REF], oci:DIR[:REF]), archive (FILE, oci-archive:FILE, docker-archive:FILE) or docker://host/repo:tag")
      ->required();
  sub->add_option("--diff", o->diff, "A second image (any of IMAGE's forms): show what changed from IMAGE to it");
  sub->add_flag("--all", o->all, "List every package, not the five largest per layer");
  sub->add_flag("--json", o->json, "Print a gpuenv-inspect-v1 (or -diff-v1) JSON document");
  sub->add_flag("--plain-http", o->plain_http, "Talk to a docker:// registry over plain HTTP (a loopback or test registry)");
  return {sub, [o, &g](Context& ctx) {
    (void)g;
    return cmd_inspect(*o, ctx);
  }};
}

}  // namespace gpuenv::cli
