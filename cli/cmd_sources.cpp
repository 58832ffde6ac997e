#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <ostream>

#include "app/sources.hpp"
#include "cli/commands.hpp"
#include "base/text.hpp"
#include "packages/sources.hpp"

namespace gpuenv::cli {

int cmd_sources(const SourcesOptions& o, Context& ctx) {
  auto set = app::sources({o.spec_path, o.host_root}, ctx);
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

Command add_sources_command(CLI::App& app, const GlobalOptions& g) {
  auto o = std::make_shared<SourcesOptions>();
  auto* sub = app.add_subcommand("sources", "Show where packages come from (apt repositories, pip indexes) and why");
  sub->add_option("spec", o->spec_path, "A spec whose sources: section wins over configuration");
  sub->add_option("--host-root", o->host_root, "Read apt and pip configuration under this directory instead of /")
      ->check(CLI::ExistingDirectory);
  sub->add_flag("--json", o->json, "Print a gpuenv-sources-v1 JSON document");
  return {sub, [o, &g](Context& ctx) {
    (void)g;
    return cmd_sources(*o, ctx);
  }};
}

}  // namespace gpuenv::cli
