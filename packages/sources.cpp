#include "packages/sources.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>

namespace gpuenv::packages {
namespace {

std::string pos(const std::string& path, const resolver::SourcePos& p) {
  return p.line ? path + ":" + std::to_string(p.line) + ":" + std::to_string(p.column) : path;
}

}  // namespace

AptSource to_apt_source(const resolver::AptSourceRequest& r, const std::string& where) {
  AptSource s;
  s.uri = r.uri;
  s.suite = r.suite;
  s.components = r.components;
  s.architectures = r.architectures;
  if (!r.signed_by.empty()) s.signed_by = {r.signed_by};
  s.trusted = r.trusted;
  s.where = where;
  return s;
}

Result<SourceSet> discover_sources(const SourceInputs& in) {
  SourceSet out;
  // apt
  if (in.spec && in.spec->apt_given) {
    for (const auto& a : in.spec->apt) out.apt.push_back(to_apt_source(a, pos(in.spec_path, a.pos)));
    out.apt_origin = "spec " + in.spec_path;
  } else if (in.user_config && in.user_config->apt_given) {
    for (const auto& a : in.user_config->apt) out.apt.push_back(to_apt_source(a, pos(in.user_config_path, a.pos)));
    out.apt_origin = "user config " + in.user_config_path;
  } else {
    auto host = discover_apt_sources(in.host_root);
    if (!host) return std::move(host).error();
    out.apt = std::move(*host);
    out.apt_origin = "host " + (in.host_root == "/" ? std::string() : in.host_root) + "/etc/apt";
    if (out.apt.empty()) out.notes.push_back("no apt sources on the host; name them in the spec's sources.apt");
    // apt reads preferences, then preferences.d/ files whose names are [A-Za-z0-9_.-] with no extension or
    // ".pref", in name order.
    const std::string etc = (in.host_root == "/" ? std::string() : in.host_root) + "/etc/apt";
    std::vector<std::string> files;
    std::error_code ec;
    if (std::filesystem::is_regular_file(etc + "/preferences", ec)) files.push_back(etc + "/preferences");
    std::vector<std::string> parts;
    for (const auto& e : std::filesystem::directory_iterator(etc + "/preferences.d", ec)) {
      const std::string n = e.path().filename().string();
      const bool name_ok = !n.empty() && std::all_of(n.begin(), n.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-'; });
      const auto dot = n.rfind('.');
      if (name_ok && (dot == std::string::npos || n.substr(dot) == ".pref") && e.is_regular_file(ec)) parts.push_back(e.path().string());
    }
    std::sort(parts.begin(), parts.end());
    files.insert(files.end(), parts.begin(), parts.end());
    for (const auto& f : files) {
      std::ifstream pin(f, std::ios::binary);
      std::string text((std::istreambuf_iterator<char>(pin)), {});
      if (!out.apt_preferences.empty()) out.apt_preferences += "\n\n";
      out.apt_preferences += text;
      out.apt_preferences_origin += (out.apt_preferences_origin.empty() ? "" : " + ") + f;
    }
  }
  // pip
  auto from_request = [&](const resolver::SourcesRequest& r, const std::string& where) {
    out.pip.index_url = {r.pip_index_url, where};
    for (const auto& u : r.pip_extra_index_urls) out.pip.extra_index_urls.push_back({u, where});
  };
  if (in.spec && in.spec->pip_given) {
    from_request(*in.spec, pos(in.spec_path, in.spec->pip_pos));
    out.pip_origin = "spec " + in.spec_path;
  } else if (in.user_config && in.user_config->pip_given) {
    from_request(*in.user_config, pos(in.user_config_path, in.user_config->pip_pos));
    out.pip_origin = "user config " + in.user_config_path;
  } else {
    auto pip = discover_pip_indexes(in.env, in.home, in.host_root == "/" ? std::string() : in.host_root);
    if (!pip) return std::move(pip).error();
    out.pip = std::move(*pip);
    out.pip_origin = "host pip configuration";
  }
  if (out.pip.index_url.url.empty() && in.runner) {
    // pip's own default, asked from the pip that is installed (gpuenv writes no index host down).
    auto r = in.runner->run({"python3", "-c", "from pip._internal.models.index import PyPI; print(PyPI.simple_url)"}, {},
                            std::chrono::seconds(20));
    if (r && r->exit_code == 0 && !r->out.empty()) {
      std::string url = r->out;
      while (!url.empty() && (url.back() == '\n' || url.back() == '\r')) url.pop_back();
      out.pip.index_url = {url, "default of the local pip (python3 -m pip)"};
    } else {
      out.notes.push_back("pip has no index configured and the local pip could not be asked for its default; set sources.pip.index_url");
    }
  }
  return out;
}

}  // namespace gpuenv::packages
