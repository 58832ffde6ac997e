// gpuenv inspect IMAGE [--diff OTHER] [--json]: what an image built by gpuenv holds, layer by layer and
// package by package (from the manifest's annotations and the config), and what changed between two images.
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/render.hpp"

namespace gpuenv::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

struct Package {
  std::string name, version, kind;
  std::uint64_t bytes = 0;
};
struct Layer {
  std::string name, digest;
  std::uint64_t size = 0;
  std::vector<Package> packages;
};
struct Image {
  std::string where, digest, created, architecture;
  json labels, env;
  std::vector<Layer> layers;
};

Error bad(const std::string& what, const std::string& where) {
  return make_error(ErrorKind::usage, "inspect.bad_image", what, where, "give an OCI layout directory written by `gpuenv build` (DIR or DIR:REF)");
}

Result<json> read_json(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return bad("cannot read " + p.filename().string(), p.string());
  json j = json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object", p.string());
  return j;
}

Result<Image> load(const std::string& arg) {
  std::string dir = arg, ref;
  if (!fs::is_directory(dir)) {
    const auto colon = arg.rfind(':');
    if (colon == std::string::npos || !fs::is_directory(arg.substr(0, colon))) return bad("no OCI layout directory here", arg);
    dir = arg.substr(0, colon);
    ref = arg.substr(colon + 1);
  }
  auto index = read_json(fs::path(dir) / "index.json");
  if (!index) return std::move(index).error();
  const json manifests = index->value("manifests", json::array());
  json chosen;
  for (const auto& m : manifests) {
    const std::string name = m.is_object() && m.contains("annotations") ? m["annotations"].value("org.opencontainers.image.ref.name", "") : "";
    if (ref.empty() ? chosen.is_null() : name == ref) chosen = m;
  }
  if (chosen.is_null() || (ref.empty() && manifests.size() > 1)) return bad(ref.empty() ? "the layout holds several images; name one as DIR:REF" : "no image named '" + ref + "'", dir);
  Image img;
  img.where = arg;
  img.digest = chosen.value("digest", "");
  const auto blob = [&](const std::string& d) { return fs::path(dir) / "blobs/sha256" / (d.size() > 7 ? d.substr(7) : d); };
  auto manifest = read_json(blob(img.digest));
  if (!manifest) return std::move(manifest).error();
  auto config = read_json(blob((*manifest)["config"].value("digest", "")));
  if (!config) return std::move(config).error();
  img.created = config->value("created", "");
  img.architecture = config->value("architecture", "");
  const json c = config->value("config", json::object());
  img.labels = c.value("Labels", json::object());
  img.env = c.value("Env", json::array());
  for (const auto& l : manifest->value("layers", json::array())) {
    Layer layer;
    layer.digest = l.value("digest", "");
    layer.size = l.value("size", std::uint64_t{0});
    const json a = l.value("annotations", json::object());
    layer.name = a.value("dev.gpuenv.layer", "layer " + std::to_string(img.layers.size() + 1));
    const json held = json::parse(a.value("dev.gpuenv.packages", "[]"), nullptr, false);
    if (held.is_array())
      for (const auto& p : held)
        if (p.is_array() && p.size() == 4) layer.packages.push_back({p[0].get<std::string>(), p[1].get<std::string>(), p[2].get<std::string>(), p[3].get<std::uint64_t>()});
    img.layers.push_back(std::move(layer));
  }
  return img;
}

std::string human(std::uint64_t bytes) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(1);
  if (bytes >= (1ull << 30)) o << static_cast<double>(bytes) / (1ull << 30) << " GiB";
  else if (bytes >= (1ull << 20)) o << static_cast<double>(bytes) / (1ull << 20) << " MiB";
  else o << static_cast<double>(bytes) / 1024.0 << " KiB";
  return o.str();
}

ordered_json to_json(const Image& img) {
  ordered_json j;
  j["schema"] = "gpuenv-inspect-v1";
  j["image"] = img.where;
  j["digest"] = img.digest;
  j["created"] = img.created;
  j["architecture"] = img.architecture;
  j["labels"] = img.labels;
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

}  // namespace

int cmd_inspect(const InspectOptions& o, Context& ctx) {
  auto a = load(o.image);
  if (!a) return report_error(a.error(), o.json, ctx);
  if (o.diff.empty()) {
    if (o.json) {
      *ctx.out << to_json(*a).dump(2) << "\n";
      return k_exit_ok;
    }
    std::uint64_t total = 0;
    for (const auto& l : a->layers) total += l.size;
    *ctx.out << a->where << "  " << a->digest << "\n  " << a->architecture << ", created " << a->created << ", " << human(total) << " in " << a->layers.size()
             << " layers\n";
    for (const auto& [k, v] : a->labels.items()) *ctx.out << "  label " << k << "=" << v.get<std::string>() << "\n";
    for (const auto& l : a->layers) {
      std::uint64_t bytes = 0;
      for (const auto& p : l.packages) bytes += p.bytes;
      *ctx.out << "  layer " << std::left << std::setw(10) << l.name << std::right << std::setw(11) << human(l.size) << " compressed, "
               << l.packages.size() << " packages, " << human(bytes) << " installed\n";
      std::vector<Package> by_size = l.packages;
      std::sort(by_size.begin(), by_size.end(), [](const Package& x, const Package& y) { return x.bytes != y.bytes ? x.bytes > y.bytes : x.name < y.name; });
      const std::size_t shown = o.all ? by_size.size() : std::min<std::size_t>(by_size.size(), 5);
      for (std::size_t i = 0; i < shown; ++i)
        *ctx.out << "      " << std::setw(11) << human(by_size[i].bytes) << "  " << by_size[i].name << " " << by_size[i].version << " (" << by_size[i].kind << ")\n";
      if (shown < by_size.size()) *ctx.out << "      ... " << by_size.size() - shown << " more (--all)\n";
    }
    return k_exit_ok;
  }
  auto b = load(o.diff);
  if (!b) return report_error(b.error(), o.json, ctx);
  ordered_json diff = ordered_json::array();
  std::map<std::string, const Layer*> before, after;
  for (const auto& l : a->layers) before[l.name] = &l;
  for (const auto& l : b->layers) after[l.name] = &l;
  std::vector<std::string> names;
  for (const auto& l : a->layers) names.push_back(l.name);
  for (const auto& l : b->layers)
    if (!before.count(l.name)) names.push_back(l.name);
  for (const auto& name : names) {
    const Layer* x = before.count(name) ? before[name] : nullptr;
    const Layer* y = after.count(name) ? after[name] : nullptr;
    ordered_json d;
    d["layer"] = name;
    d["status"] = !x ? "added" : !y ? "removed" : x->digest == y->digest ? "unchanged" : "changed";
    d["size_before"] = x ? x->size : 0;
    d["size_after"] = y ? y->size : 0;
    std::map<std::string, const Package*> pa, pb;
    if (x)
      for (const auto& p : x->packages) pa[p.kind + ":" + p.name] = &p;
    if (y)
      for (const auto& p : y->packages) pb[p.kind + ":" + p.name] = &p;
    auto changes = ordered_json::array();
    for (const auto& [k, p] : pa) {
      auto it = pb.find(k);
      if (it == pb.end()) changes.push_back({{"name", p->name}, {"kind", p->kind}, {"before", p->version}, {"after", nullptr}});
      else if (it->second->version != p->version) changes.push_back({{"name", p->name}, {"kind", p->kind}, {"before", p->version}, {"after", it->second->version}});
    }
    for (const auto& [k, p] : pb)
      if (!pa.count(k)) changes.push_back({{"name", p->name}, {"kind", p->kind}, {"before", nullptr}, {"after", p->version}});
    d["packages"] = changes;
    diff.push_back(d);
  }
  if (o.json) {
    ordered_json j;
    j["schema"] = "gpuenv-inspect-diff-v1";
    j["before"] = {{"image", a->where}, {"digest", a->digest}};
    j["after"] = {{"image", b->where}, {"digest", b->digest}};
    j["layers"] = diff;
    *ctx.out << j.dump(2) << "\n";
    return k_exit_ok;
  }
  *ctx.out << a->digest << " -> " << b->digest << "\n";
  for (const auto& d : diff) {
    *ctx.out << "  layer " << std::left << std::setw(10) << d["layer"].get<std::string>() << std::right << " " << d["status"].get<std::string>();
    if (d["status"] == "changed") *ctx.out << " (" << human(d["size_before"]) << " -> " << human(d["size_after"]) << ")";
    *ctx.out << "\n";
    for (const auto& c : d["packages"]) {
      *ctx.out << "      " << c["name"].get<std::string>() << " (" << c["kind"].get<std::string>() << "): " << (c["before"].is_null() ? "added" : c["before"].get<std::string>())
               << " -> " << (c["after"].is_null() ? "removed" : c["after"].get<std::string>()) << "\n";
    }
  }
  return k_exit_ok;
}

}  // namespace gpuenv::cli
