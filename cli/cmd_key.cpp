#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <ostream>

#include "cli/commands.hpp"
#include "marks/keys.hpp"

namespace gpuenv::cli {
namespace {

struct KeyOptions {
  std::string dir = ".";
  bool force = false;
  bool json = false;
};

int cmd_key_generate(const KeyOptions& o, Context& ctx) {
  auto files = marks::generate_key_pair(o.dir, o.force);
  if (!files) return report_error(files.error(), o.json, ctx);
  if (o.json) {
    const nlohmann::ordered_json j{{"schema", "gpuenv-key-v1"}, {"private_key", files->private_key}, {"public_key", files->public_key},
                                   {"fingerprint", "sha256:" + files->fingerprint}};
    *ctx.out << j.dump(2) << "\n";
  } else {
    *ctx.out << "wrote " << files->private_key << " (private, mode 0600: keep it secret) and " << files->public_key << "\n"
             << "fingerprint sha256:" << files->fingerprint << "\n";
  }
  return k_exit_ok;
}

}  // namespace

Command add_key_command(CLI::App& app, const GlobalOptions& /*global*/) {
  auto o = std::make_shared<KeyOptions>();
  auto* sub = app.add_subcommand("key", "Make the signing key of validation marks (ECDSA P-256, as cosign's)");
  sub->require_subcommand(1);
  auto* gen = sub->add_subcommand("generate", "Write gpuenv.key (PKCS#8 PEM, mode 0600) and gpuenv.pub (PKIX PEM) into a directory");
  gen->add_option("-o,--output", o->dir, "Directory to write them into (default: the current one)");
  gen->add_flag("--force", o->force, "Replace a key pair that is already there");
  gen->add_flag("--json", o->json, "Print a gpuenv-key-v1 JSON document");
  return {sub, [o](Context& ctx) { return cmd_key_generate(*o, ctx); }};
}

}  // namespace gpuenv::cli
