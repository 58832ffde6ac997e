// gpuenv build SPEC|LOCK: one app::build call, and its result rendered.
#include <CLI/CLI.hpp>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>

#include "app/build.hpp"
#include "base/safe_text.hpp"
#include "cli/commands.hpp"
#include "cli/render.hpp"
#include "validate/report.hpp"

namespace gpuenv::cli {
namespace {

std::string human(std::uint64_t bytes) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(1);
  if (bytes >= (1ull << 30)) o << static_cast<double>(bytes) / (1ull << 30) << " GiB";
  else o << static_cast<double>(bytes) / (1ull << 20) << " MiB";
  return o.str();
}

/// NOTES made safe to print and to put in JSON (registry text may hold anything).
std::vector<std::string> safe_notes(const std::vector<std::string>& notes) {
  std::vector<std::string> out;
  for (const auto& n : notes) out.push_back(safe_text(n));
  return out;
}

Result<app::BuildRequest> build_request(const BuildOptions& o) {
  app::BuildRequest rq;
  if (!o.attest.empty()) {
    GPUENV_TRY(kinds, app::parse_statement_kinds(o.attest));
    rq.attest = std::move(kinds);
    rq.attest_key = o.key;
  }
  rq.lock = lock_request(o.lock);
  rq.lock.output.clear();  // building from a spec writes no lock file
  rq.output = o.output;
  if (!o.format.empty()) rq.format = resolver::parse_image_format(o.format);  // CLI checked the name
  rq.compression = images::parse_compression(o.compression).value_or(images::Compression::gzip);
  rq.tag = o.tag;
  rq.allow_missing = o.allow_missing;
  rq.allow_record_mismatch = o.allow_record_mismatch;
  rq.threads = o.threads;
  rq.push = o.push;
  rq.plain_http = o.plain_http;
  rq.ca_bundle = o.ca_bundle;
  rq.vm_gpuenv = o.vm_gpuenv;
  rq.cache = o.cache;
  rq.cache_key = o.cache_key;
  rq.cache_may_leave_layers = !o.validate;  // --validate runs the image from its layout: every layer must be there
  return rq;
}

/// A VM disk (docs/vm.md): `gpuenv-build-result-v1` with `vm` in place of the layers.
void print_vm(const BuildOptions& o, const app::Built& b, bool json, Context& ctx) {
  const app::VmBuilt& vm = *b.vm;
  const auto& d = vm.disk;
  if (json) {
    nlohmann::ordered_json controllers = nlohmann::ordered_json::object();
    for (const auto& c : d.initramfs.controllers) controllers[c.name] = images::disk::to_string(c.support);
    nlohmann::ordered_json parts = nlohmann::ordered_json::array();
    for (const auto& p : d.layout.partitions)
      parts.push_back({{"name", p.name}, {"type", p.type.str()}, {"uuid", p.unique.str()}, {"offset", p.offset()}, {"size", p.size()}});
    nlohmann::ordered_json j{{"schema", "gpuenv-build-result-v1"},
                             {"output", b.output},
                             {"format", resolver::to_string(b.format)},
                             {"lock_sha256", vm.lock_sha256},
                             {"size", vm.file_size},
                             {"vm",
                              {{"platform", d.platform.str()},
                               {"kernel", d.kernel.version},
                               {"initramfs", {{"size", d.initramfs_size}, {"modules", d.initramfs.modules.size()}, {"ext4", images::disk::to_string(d.initramfs.ext4)}}},
                               {"disk_controllers", controllers},
                               {"cmdline", d.cmdline},
                               {"disk_guid", d.ids.disk.str()},
                               {"root_fs_uuid", d.ids.root_fs.str()},
                               {"raw_size", d.raw_size},
                               {"raw_allocated", d.raw_allocated},
                               {"partitions", parts},
                               {"driver", vm.driver ? nlohmann::ordered_json{{"module", vm.driver->module}, {"version", vm.driver->version}, {"reused", vm.driver->reused}}
                                                    : nlohmann::ordered_json(nullptr)}}}};
    if (b.pushed)
      j["push"] = {{"reference", o.push}, {"digest", b.pushed->digest.str()}, {"container_disk", vm.container_disk},
                   {"blobs_uploaded", b.pushed->blobs_uploaded}, {"blobs_present", b.pushed->blobs_present}, {"bytes_uploaded", b.pushed->bytes_uploaded}};
    *ctx.out << j.dump(2) << "\n";
    return;
  }
  *ctx.out << "  kernel    " << d.kernel.version << " (" << d.platform.str() << "), initramfs " << human(d.initramfs_size) << " (" << d.initramfs.modules.size() << " modules)\n";
  // Each disk controller: built in, from the initramfs, or not in this kernel (and so not one this disk boots on).
  for (const auto support : {images::disk::Support::built_in, images::disk::Support::initramfs, images::disk::Support::absent}) {
    std::string names;
    for (const auto& c : d.initramfs.controllers)
      if (c.support == support) names += (names.empty() ? "" : ", ") + c.name;
    if (!names.empty())
      *ctx.out << "  disks     " << (support == images::disk::Support::built_in ? "built in: " : support == images::disk::Support::initramfs ? "from the initramfs: " : "not in this kernel: ")
               << names << "\n";
  }
  if (vm.driver)
    *ctx.out << "  driver    " << vm.driver->version << ", " << vm.driver->module << ".ko " << (vm.driver->reused ? "from the cache (built before)" : "built") << "\n";
  for (const auto& p : d.layout.partitions) *ctx.out << "  partition " << std::left << std::setw(5) << p.name << std::right << std::setw(11) << human(p.size()) << "  " << p.unique.str() << "\n";
  *ctx.out << "wrote " << b.output << " (" << resolver::to_string(b.format) << ", " << human(vm.file_size) << "; the raw disk " << human(d.raw_size) << ", "
           << human(d.raw_allocated) << " allocated)\n";
  if (b.pushed)
    *ctx.out << "pushed " << o.push << ", a KubeVirt containerDisk (/disk/ in " << vm.container_disk << ", " << b.pushed->blobs_uploaded << " blobs uploaded, "
             << b.pushed->blobs_present << " already there)\n";
}

/// VALIDATION: what --validate did (an error when the validation could not run), null without it.
void print_json(const BuildOptions& o, const app::Built& b, Context& ctx, const Result<app::ValidatedAndMarked>* validation) {
  const images::BuildResult& built = b.image;
  nlohmann::ordered_json j;
  j["schema"] = "gpuenv-build-result-v1";
  j["digest"] = built.manifest.digest.str();
  j["output"] = b.output;
  j["format"] = resolver::to_string(b.format);
  j["tag"] = b.tag;
  j["lock_sha256"] = built.lock_sha256;
  j["config"] = built.config.digest.str();
  j["unchanged"] = built.unchanged;
  auto layers = nlohmann::ordered_json::array();
  for (const auto& l : built.layers)
    layers.push_back({{"name", l.name}, {"digest", l.blob.digest.str()}, {"size", l.blob.size}, {"diff_id", l.diff_id},
                      {"uncompressed_size", l.uncompressed_size}, {"entries", l.entries}, {"reused", l.reused}, {"shared", l.shared}, {"remote", l.remote},
                      {"packages", l.packages}});
  j["layers"] = layers;
  if (!b.platforms.empty()) {
    auto platforms = nlohmann::ordered_json::array();
    for (const auto& p : b.platforms) {
      auto player = nlohmann::ordered_json::array();
      for (const auto& l : p.image.layers)
        player.push_back({{"name", l.name}, {"digest", l.blob.digest.str()}, {"size", l.blob.size}, {"diff_id", l.diff_id},
                          {"uncompressed_size", l.uncompressed_size}, {"entries", l.entries}, {"reused", l.reused}, {"packages", l.packages}});
      platforms.push_back({{"platform", p.platform.str()}, {"digest", p.image.manifest.digest.str()}, {"config", p.image.config.digest.str()},
                           {"unchanged", p.image.unchanged}, {"layers", std::move(player)}});
    }
    j["platforms"] = std::move(platforms);
  }
  j["size"] = b.size();
  j["notes"] = built.notes;
  if (b.pushed) {
    j["push"] = {{"reference", o.push}, {"digest", b.pushed->digest.str()}, {"blobs_uploaded", b.pushed->blobs_uploaded}, {"blobs_present", b.pushed->blobs_present},
                 {"blobs_mounted", b.pushed->blobs_mounted}, {"bytes_uploaded", b.pushed->bytes_uploaded}};
  }
  if (b.cache) {
    const app::BuildCacheReport& c = *b.cache;
    j["cache"] = {{"reference", c.ref},           {"read_only", c.read_only},         {"documents", c.documents},   {"refused", c.refused},
                  {"images_taken", c.images_taken}, {"layers_taken", c.layers_taken}, {"layers_remote", c.layers_remote},
                  {"images_written", c.images_written}, {"layers_written", c.layers_written}, {"written", c.written}, {"notes", safe_notes(c.notes)}};
  }
  if (!b.attested.empty()) {
    auto attested = nlohmann::ordered_json::array();
    for (const auto& a : b.attested)
      attested.push_back({{"kind", std::string(app::to_string(a.kind))}, {"predicateType", std::string(app::predicate_type_of(a.kind))}, {"image", a.image.str()},
                          {"record", a.record.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(a.record)}, {"where", safe_text(a.where)}, {"already_there", a.already_there}});
    j["attested"] = std::move(attested);
  }
  if (validation && !*validation) {
    const Error& e = validation->error();
    j["validation"] = {{"error", {{"id", e.id}, {"message", e.message}}}, {"exit_code", exit_code(e.kind)}};
  } else if (validation) {
    const app::ValidatedAndMarked& v = **validation;
    j["validation"] = nlohmann::ordered_json::parse(v.report_bytes);
    if (v.mark) {
      j["mark"] = {{"where", v.mark->where}, {"record", v.mark->record_digest}, {"records", v.mark->records}};
    } else if (v.mark_error) {
      j["mark"] = {{"error", {{"id", v.mark_error->id}, {"message", v.mark_error->message}}}};
    }
  }
  *ctx.out << j.dump(2) << "\n";
}

/// What the build cache gave and took; its notes may carry registry text, made safe.
void print_cache(const app::BuildCacheReport& c, const std::string& output, Context& ctx) {
  for (const auto& n : c.notes) *ctx.out << "cache: " << safe_text(n) << "\n";
  *ctx.out << "cache " << safe_text(c.ref) << ": " << c.documents << " signed documents";
  if (c.refused) *ctx.out << " (" << c.refused << " refused)";
  if (c.images_taken) *ctx.out << ", the whole image taken";
  else *ctx.out << ", " << c.layers_taken << " layers taken";
  if (!c.written.empty()) *ctx.out << ", wrote " << c.images_written << " images and " << c.layers_written << " layers";
  else if (c.read_only) *ctx.out << ", read only (a public key)";
  *ctx.out << "\n";
  if (c.layers_remote)
    *ctx.out << "  " << c.layers_remote << " layers stay in the registry: " << output << " lacks their blobs (pushing takes them from there; build without --push to have them)\n";
}

void print_text(const BuildOptions& o, const app::Built& b, Context& ctx) {
  const images::BuildResult& built = b.image;
  if (built.unchanged) *ctx.out << "unchanged: " << b.output << " already holds this image\n";
  auto print_layers = [&](const images::BuildResult& im) {
    for (const auto& l : im.layers) {
      *ctx.out << "  layer " << std::left << std::setw(10) << l.name << std::right << std::setw(11) << human(l.blob.size);
      if (l.shared && l.uncompressed_size == 0) *ctx.out << " (" << l.packages.size() << " packages, from the cache" << (l.remote ? ", left in the registry" : "") << ")";
      else if (!im.unchanged)
        *ctx.out << " (" << human(l.uncompressed_size) << " unpacked, " << l.packages.size() << " packages" << (l.shared ? ", from the cache" : l.reused ? ", reused" : "")
                 << (l.remote ? ", left in the registry" : "") << ")";
      *ctx.out << "\n";
    }
  };
  print_layers(built);
  for (const auto& p : b.platforms) {
    *ctx.out << p.platform.str() << " " << p.image.manifest.digest.str() << "\n";
    print_layers(p.image);
  }
  for (const auto& n : built.notes) *ctx.out << "note: " << n << "\n";
  if (b.cache) print_cache(*b.cache, b.output, ctx);
  *ctx.out << "wrote " << b.output << " (" << human(b.size()) << ")\n";
  if (b.pushed) *ctx.out << "pushed " << o.push << " (" << b.pushed->blobs_uploaded << " blobs uploaded, " << b.pushed->blobs_present << " already there)\n";
  for (const auto& a : b.attested)
    *ctx.out << "attested " << (a.kind == app::StatementKind::sbom ? "SBOM      " : "provenance") << " "
             << (a.already_there ? std::string("(the same statement was already there)") : a.record.substr(0, 19)) << " in " << safe_text(a.where) << "\n";
  *ctx.out << built.manifest.digest.str() << "\n";
}

}  // namespace

int cmd_build(const BuildOptions& o, Context& ctx) {
  const bool json = o.lock.resolve.json;
  if (o.mark && !o.validate)
    return report_error(make_error(ErrorKind::usage, "mark.no_validation", "--mark marks what --validate proved, and --validate was not given", "--mark",
                                   "gpuenv build SPEC --push REF --validate --mark --key gpuenv.key"),
                        json, ctx);
  auto request = build_request(o);
  if (!request) return report_error(request.error(), json, ctx);
  auto built = app::build(*request, ctx);
  if (!built) return report_error(built.error(), json, ctx);
  if (built->unsatisfied) return report_unsatisfied(*built->unsatisfied, json, ctx);
  if (built->vm && !o.validate) {
    print_vm(o, *built, json, ctx);
    return k_exit_ok;
  }
  if (!o.validate) {
    if (json) print_json(o, *built, ctx, nullptr);
    else print_text(o, *built, ctx);
    return k_exit_ok;
  }
  // The whole mission: the image just built, validated on this machine's GPUs and marked where it was pushed.
  if (built->format != resolver::ImageFormat::oci_dir)
    return report_error(make_error(ErrorKind::usage, "build.validate_format",
                                   "--validate runs the image from its layout directory, and this build wrote " + std::string(built->vm ? "a VM disk" : "an archive"),
                                   "--format", "build with --format oci-dir (the default) to validate"),
                        json, ctx);
  if (!json) print_text(o, *built, ctx);
  ValidateOptions v;
  v.level = o.level;
  v.image = built->output;
  v.mark = o.mark;
  v.key = o.key;
  v.valid_for = o.valid_for;
  v.plain_http = o.plain_http;
  v.referrers = o.referrers;
  if (built->pushed) v.mark_image = "docker://" + o.push;
  const auto outcome = app::validate_and_mark(validate_and_mark_request(v), ctx);
  if (outcome) ctx.exit_now = outcome->hung;
  if (json) {
    print_json(o, *built, ctx, &outcome);
  } else {
    if (!outcome) return report_error(outcome.error(), false, ctx);
    *ctx.out << validate::report_text(outcome->report, ctx.stdout_is_tty);
    if (outcome->mark) print_mark_result(*outcome->mark, false, *ctx.out);
  }
  if (!outcome) return exit_code(outcome.error().kind);
  if (outcome->mark_error) (void)report_error(*outcome->mark_error, false, ctx);
  return outcome->exit_code;
}

Command add_build_command(CLI::App& app, const GlobalOptions& g) {
  auto o = std::make_shared<BuildOptions>();
  auto* sub = app.add_subcommand("build", "Build a reproducible OCI image from a spec (resolved and pinned first) or a lock");
  sub->add_option("input", o->lock.resolve.spec_path, "Spec (gpuenv-spec-v1) or lock (gpuenv-lock-v1)")->required();
  sub->add_option("-o,--output", o->output, "OCI layout directory to write (default gpuenv-out/NAME)");
  sub->add_option("--format", o->format, "Output format: oci-dir, oci-archive or docker-archive (default: the spec's image.format, else oci-dir)")
      ->check(CLI::IsMember(resolver::k_image_formats));
  sub->add_option("--compression", o->compression, "Layer compression: gzip (default, level 6) or zstd (level 3)")
      ->check(CLI::IsMember({"gzip", "zstd"}));
  sub->add_option("--tag", o->tag, "Reference name recorded in the layout (default: the spec's image.tag)");
  sub->add_option("--allow-missing-lib", o->allow_missing, "A shared library the DT_NEEDED check may find absent; repeatable");
  sub->add_option("--allow-record-mismatch", o->allow_record_mismatch,
                  "A wheel NAME==VERSION of the lock to install although its RECORD gives other hashes or sizes for its files; repeatable");
  sub->add_option("--push", o->push, "Push the image to this registry reference (host[:port]/repo[:tag])");
  sub->add_flag("--plain-http", o->plain_http, "Talk to the registry over plain HTTP (a loopback or test registry)");
  sub->add_option("--cache", o->cache, "A build cache shared through a registry (host/repo:tag; default: GPUENV_BUILD_CACHE): take the layers it holds, add what was built");
  sub->add_option("--cache-key", o->cache_key, "The cache's key: private to read and write, public to read only (default: the file GPUENV_BUILD_CACHE_KEY names)");
  sub->add_option("--ca-bundle", o->ca_bundle, "Extra CA certificate file for the registry's TLS")->check(CLI::ExistingFile);
  sub->add_option("--vm-gpuenv", o->vm_gpuenv, "A VM disk's /usr/bin/gpuenv: a gpuenv built for the disk's platform (default: this one)")
      ->check(CLI::ExistingFile);
  sub->add_flag("--validate", o->validate, "Validate the built image on this machine's GPUs (gpuenv validate --image)");
  sub->add_option("--level", o->level, "The level of --validate: quick, standard (default) or long")->check(CLI::IsMember({"quick", "standard", "long"}));
  sub->add_flag("--mark", o->mark, "With --validate: mark the image good when it passed, in the registry of --push (else in the layout)");
  sub->add_option("--key", o->key, "The private key of --mark and --attest (gpuenv key generate); default: the file GPUENV_MARK_KEY names");
  sub->add_option("--valid-for", o->valid_for, "How long the mark stays valid: 30d, 12h, ... (default 30d)");
  sub->add_flag("--referrers", o->referrers, "Also store the mark as an OCI 1.1 referrer holding a Sigstore bundle v0.3");
  sub->add_option("--attest", o->attest,
                  "Sign the image's CycloneDX SBOM and/or SLSA provenance with --key and store them beside it (and in the registry of --push): sbom, provenance or sbom,provenance");
  sub->add_option("--threads", o->threads, "Compression threads (default: all cores)")->check(CLI::NonNegativeNumber);
  sub->add_option("--driver", o->lock.resolve.driver, "The fleet's driver version (with a spec)");
  sub->add_option("--gpu", o->lock.resolve.gpus, "GPU model or architecture; repeatable (with a spec)");
  sub->add_option("--host-root", o->lock.host_root, "Read apt and pip configuration under this directory instead of /")
      ->check(CLI::ExistingDirectory);
  sub->add_flag("--json", o->lock.resolve.json, "Print a gpuenv-build-result-v1 JSON document");
  sub->add_flag("--offline", o->lock.offline, "Use only what the cache holds; download nothing");
  return {sub, [o, &g](Context& ctx) {
    (void)g;
    o->lock.resolve.catalog_dir = g.catalog_dir;
    o->lock.resolve.offline = o->lock.offline;
    return cmd_build(*o, ctx);
  }};
}

}  // namespace gpuenv::cli
