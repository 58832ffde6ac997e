#include <nlohmann/json.hpp>
#include <ostream>

#include "cli/commands.hpp"
#include "base/digest.hpp"
#include "base/text.hpp"
#include "base/file_io.hpp"
#include "base/yaml_guard.hpp"
#include "packages/sources.hpp"

namespace gpuenv::cli {

std::string user_config_path(const Context& ctx) {
  if (auto p = env_or(ctx, "GPUENV_CONFIG"); !p.empty()) return p;
  if (auto x = env_or(ctx, "XDG_CONFIG_HOME"); !x.empty()) return x + "/gpuenv/config.yaml";
  return env_or(ctx, "HOME") + "/.config/gpuenv/config.yaml";
}

Result<std::optional<resolver::SourcesRequest>> load_user_config_for(const Context& ctx) {
  const std::string path = user_config_path(ctx);
  auto text = read_yaml_file(path, resolver::k_spec_max_bytes);
  if (!text) {
    if (text.error().id == "io.not_found") return std::optional<resolver::SourcesRequest>{};
    return std::move(text).error();
  }
  auto parsed = resolver::parse_user_config(*text, path);
  if (!parsed) return std::move(parsed).error();
  return std::optional<resolver::SourcesRequest>(std::move(*parsed));
}

Result<packages::SourceSet> gather_sources(const Context& ctx, const resolver::SourcesRequest* spec_sources, const std::string& spec_path,
                                         const std::string& host_root, gpuenv::CommandRunner* runner) {
  auto config = load_user_config_for(ctx);
  if (!config) return std::move(config).error();
  packages::SourceInputs in;
  in.spec = spec_sources;
  in.spec_path = spec_path;
  in.user_config = *config ? &**config : nullptr;
  in.user_config_path = user_config_path(ctx);
  in.host_root = host_root;
  in.env = ctx.env;
  in.home = env_or(ctx, "HOME");
  in.runner = runner;
  return packages::discover_sources(in);
}

int cmd_sources(const SourcesOptions& o, Context& ctx) {
  std::optional<resolver::Spec> spec;
  if (!o.spec_path.empty()) {
    auto text = read_yaml_file(o.spec_path, resolver::k_spec_max_bytes);
    if (!text) return report_error(text.error(), o.json, ctx);
    auto parsed = resolver::parse_spec(*text, o.spec_path);
    if (!parsed) return report_error(parsed.error(), o.json, ctx);
    spec = std::move(*parsed);
  }
  auto runner = ctx.make_runner ? ctx.make_runner() : nullptr;
  auto set = gather_sources(ctx, spec ? &spec->sources : nullptr, o.spec_path, o.host_root, runner.get());
  if (!set) return report_error(set.error(), o.json, ctx);
  if (o.json) {
    nlohmann::ordered_json j;
    j["schema"] = "gpuenv-sources-v1";
    auto apt = nlohmann::ordered_json::array();
    for (const auto& s : set->apt) {
      apt.push_back({{"type", std::string(packages::to_string(s.type))},
                     {"used", s.is_used()},
                     {"uri", s.uri},
                     {"suite", s.suite},
                     {"flat", s.is_flat()},
                     {"components", s.components},
                     {"architectures", s.architectures},
                     {"signed_by", s.signed_by},
                     {"inline_key", !s.signed_by_key.empty()},
                     {"trusted", s.trusted ? nlohmann::ordered_json(*s.trusted) : nlohmann::ordered_json(nullptr)},
                     {"where", s.where}});
    }
    j["apt"] = {{"origin", set->apt_origin}, {"sources", apt}};
    auto extra = nlohmann::ordered_json::array();
    for (const auto& e : set->pip.extra_index_urls) extra.push_back({{"url", e.url}, {"where", e.origin}});
    j["pip"] = {{"origin", set->pip_origin},
                {"index_url", {{"url", set->pip.index_url.url}, {"where", set->pip.index_url.origin}}},
                {"extra_index_urls", extra},
                {"files_read", set->pip.files_read}};
    j["notes"] = set->notes;
    *ctx.out << j.dump(2) << "\n";
    return k_exit_ok;
  }
  *ctx.out << "apt (from " << set->apt_origin << "):\n";
  for (const auto& s : set->apt) {
    *ctx.out << "  " << (s.is_used() ? "" : "skipped: ") << packages::to_string(s.type) << " " << s.uri << " " << s.suite;
    if (!s.components.empty()) *ctx.out << " " << join(s.components, " ");
    if (!s.signed_by.empty()) *ctx.out << "  signed-by " << join(s.signed_by, " ");
    if (!s.signed_by_key.empty()) *ctx.out << "  signed-by (inline key)";
    if (s.trusted && *s.trusted) *ctx.out << "  trusted";
    *ctx.out << "  (" << s.where << ")\n";
  }
  *ctx.out << "pip (from " << set->pip_origin << "):\n";
  if (!set->pip.index_url.url.empty()) *ctx.out << "  index-url " << set->pip.index_url.url << "  (" << set->pip.index_url.origin << ")\n";
  for (const auto& e : set->pip.extra_index_urls) *ctx.out << "  extra-index-url " << e.url << "  (" << e.origin << ")\n";
  for (const auto& n : set->notes) *ctx.out << "note: " << n << "\n";
  return k_exit_ok;
}

}  // namespace gpuenv::cli
