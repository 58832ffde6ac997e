#include "validate/replay/replay_backend.hpp"
#include "validate/replay/recording.hpp"

#include "base/digest.hpp"

#include "base/file_io.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <condition_variable>
#include <fstream>
#include <initializer_list>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <system_error>
#include <utility>
#include <vector>

#include "resolver/version.hpp"
#include "base/text.hpp"
#include "base/yaml_guard.hpp"

namespace gpuenv::validate {
namespace {

constexpr std::size_t k_max_bytes = 4u << 20;   // a recording of 8 GPUs is ~20 KiB
constexpr std::size_t k_max_depth = 32;         // the deepest legal path is 6 levels
constexpr std::size_t k_max_nodes = 100000;     // bounds alias expansion ("billion laughs")
constexpr std::size_t k_max_extends = 8;        // inventory <- fault <- fault ... is 2 or 3 deep in practice
constexpr const char* k_doc = "docs/replay.md";

// ---------------------------------------------------------------------------------------------------------------
// A YAML document copied into a plain tree that remembers, for every value, the file and line it came from. Files
// are merged as trees (extends), so an error found after merging still names the file that holds the bad value.

struct Tree {
  enum class Kind { null, scalar, map, seq };
  Kind kind = Kind::null;
  std::string scalar;
  std::vector<Tree> children;  // entries of a map (with key set) or items of a list
  std::string key;             // the key when this is an entry of a map
  std::string key_where;       // file:line:col of the key
  std::string where;           // file:line:col of the value
  std::string path;            // "inventory.gpus[3].health": set after merging, for messages

  [[nodiscard]] const Tree* find(std::string_view k) const {
    for (const Tree& c : children) {
      if (c.key == k) return &c;
    }
    return nullptr;
  }
  Tree* find(std::string_view k) {
    for (Tree& c : children) {
      if (c.key == k) return &c;
    }
    return nullptr;
  }
  [[nodiscard]] std::string name() const { return path.empty() ? std::string("the top level") : "'" + path + "'"; }
};

// Parsing code below throws Failure; the entry points catch it, so no exception leaves this file.
struct Failure {
  Error error;
};

[[noreturn]] void fail(const std::string& where, std::string id, std::string message, std::string hint) {
  throw Failure{make_error(ErrorKind::spec, std::move(id), std::move(message), where, std::move(hint))};
}

std::string at(const std::string& file, const YAML::Mark& mark) {
  if (mark.line < 0) return file;
  return file + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

/// Whether TEXT uses a YAML alias ("*name" where a value starts), so that a message can say whether aliases or
/// the document's own size exceeded the bound.
bool uses_aliases(std::string_view text) {
  for (std::size_t at = text.find('*'); at != std::string_view::npos; at = text.find('*', at + 1)) {
    const char before = at == 0 ? '\n' : text[at - 1];
    const bool value_start = before == ' ' || before == '\t' || before == '\n' || before == '[' || before == '{' || before == ',' || before == '-';
    if (value_start && at + 1 < text.size() && (std::isalnum(static_cast<unsigned char>(text[at + 1])) || text[at + 1] == '_')) return true;
  }
  return false;
}

class Converter {
 public:
  Converter(std::string file, bool aliases) : m_file(std::move(file)), m_aliases(aliases) {}

  Tree convert(const YAML::Node& node, const std::string& fallback_where) {
    if (++m_nodes > k_max_nodes) {
      if (m_aliases) {
        fail(fallback_where, "replay.too_large",
             "the document expands to more than " + std::to_string(k_max_nodes) + " values through its YAML aliases",
             "write the recording out without YAML aliases");
      }
      fail(fallback_where, "replay.too_large",
           "the document has more than " + std::to_string(k_max_nodes) + " values; a recording of 8 GPUs has about 2,300",
           "is this a replay recording? see docs/replay.md for its shape");
    }
    Tree t;
    t.where = at(m_file, node.Mark());
    if (t.where == m_file) t.where = fallback_where;
    switch (node.Type()) {
      case YAML::NodeType::Scalar:
        t.kind = Tree::Kind::scalar;
        t.scalar = node.Scalar();
        break;
      case YAML::NodeType::Sequence:
        t.kind = Tree::Kind::seq;
        for (const auto& item : node) t.children.push_back(convert(item, t.where));
        break;
      case YAML::NodeType::Map:
        t.kind = Tree::Kind::map;
        for (const auto& kv : node) {
          const std::string key_where = at(m_file, kv.first.Mark());
          if (!kv.first.IsScalar()) {
            fail(key_where, "replay.wrong_type", "a key must be a plain word", "write key: value");
          }
          const std::string& key = kv.first.Scalar();
          if (t.find(key) != nullptr) {
            fail(key_where, "replay.duplicate_key", "key '" + key + "' appears twice in the same mapping",
                 "keep one of them");
          }
          Tree child = convert(kv.second, key_where);
          child.key = key;
          child.key_where = key_where;
          t.children.push_back(std::move(child));
        }
        break;
      default:
        t.kind = Tree::Kind::null;
        break;
    }
    return t;
  }

 private:
  std::string m_file;
  bool m_aliases = false;
  std::size_t m_nodes = 0;
};

std::string describe(const Tree& t) {
  switch (t.kind) {
    case Tree::Kind::null: return "empty";
    case Tree::Kind::scalar: return "'" + t.scalar + "'";
    case Tree::Kind::map: return "a mapping";
    case Tree::Kind::seq: return "a list";
  }
  return "?";
}

// ---------------------------------------------------------------------------------------------------------------
// Typed reading of the merged tree. Every failure names the file and line of the value and says what to write.

void check_keys(const Tree& map, std::initializer_list<std::string_view> allowed) {
  for (const Tree& c : map.children) {
    if (std::find(allowed.begin(), allowed.end(), c.key) != allowed.end()) continue;
    std::string hint;
    std::size_t best = 3;
    for (std::string_view a : allowed) {
      const std::size_t d = edit_distance(c.key, a);
      if (d < best) {
        best = d;
        hint = "did you mean '" + std::string(a) + "'? ";
      }
    }
    hint += "the keys allowed here are: " + join(allowed, ", ") + " (" + k_doc + ")";
    fail(c.key_where, "replay.unknown_key", "unknown key '" + c.key + "' in " + map.name(), hint);
  }
}

const Tree& expect_map(const Tree& t, std::initializer_list<std::string_view> allowed) {
  if (t.kind != Tree::Kind::map) {
    fail(t.where, "replay.wrong_type", t.name() + " must be a mapping, not " + describe(t),
         std::string("write key: value lines under it (") + k_doc + ")");
  }
  check_keys(t, allowed);
  return t;
}

const Tree& expect_list(const Tree& t) {
  if (t.kind != Tree::Kind::seq) {
    fail(t.where, "replay.wrong_type", t.name() + " must be a list, not " + describe(t),
         "write [a, b] or '- item' lines");
  }
  return t;
}

const Tree& required(const Tree& map, std::string_view key) {
  const Tree* c = map.find(key);
  if (c == nullptr) {
    fail(map.where, "replay.missing_field", map.name() + " has no '" + std::string(key) + "'",
         "add '" + std::string(key) + ": ...' (" + k_doc + "); replay never invents a value");
  }
  return *c;
}

bool is_unsupported(const Tree& t) { return t.kind == Tree::Kind::scalar && t.scalar == "unsupported"; }

const std::string& scalar(const Tree& t, const std::string& expected) {
  if (t.kind != Tree::Kind::scalar) {
    fail(t.where, "replay.wrong_type", t.name() + " must be " + expected + ", not " + describe(t),
         "write " + expected);
  }
  return t.scalar;
}

bool to_bool(const Tree& t) {
  const std::string& s = scalar(t, "true or false");
  if (s == "true") return true;
  if (s == "false") return false;
  fail(t.where, "replay.wrong_type", t.name() + " must be true or false, not '" + s + "'", "write true or false");
}

std::uint64_t to_u64(const Tree& t) {
  const std::string& s = scalar(t, "an unsigned integer");
  std::uint64_t v = 0;
  const bool hex = s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
  const char* first = s.data() + (hex ? 2 : 0);
  const char* last = s.data() + s.size();
  const auto [ptr, ec] = std::from_chars(first, last, v, hex ? 16 : 10);
  if (s.empty() || ec != std::errc() || ptr != last) {
    fail(t.where, "replay.wrong_type", t.name() + " must be an unsigned integer, not '" + s + "'",
         "write digits (85520809984) or hexadecimal (0x9f3c); no units, signs or separators");
  }
  return v;
}

long long to_int(const Tree& t, long long min, long long max) {
  const std::string& s = scalar(t, "an integer");
  long long v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size()) {
    fail(t.where, "replay.wrong_type", t.name() + " must be an integer, not '" + s + "'", "write decimal digits");
  }
  if (v < min || v > max) {
    fail(t.where, "replay.bad_value",
         t.name() + " is " + s + ", outside " + std::to_string(min) + ".." + std::to_string(max),
         "write a value in that range");
  }
  return v;
}

int to_small_int(const Tree& t, int min, int max) { return static_cast<int>(to_int(t, min, max)); }

double to_double(const Tree& t) {
  const std::string& s = scalar(t, "a number");
  double v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(v)) {
    fail(t.where, "replay.wrong_type", t.name() + " must be a number, not '" + s + "'",
         "write a plain number such as 2961.4, without units");
  }
  return v;
}

double to_non_negative(const Tree& t) {
  const double v = to_double(t);
  if (v < 0) fail(t.where, "replay.bad_value", t.name() + " must not be negative", "write a value >= 0");
  return v;
}

std::string to_text(const Tree& t) {
  std::string s = scalar(t, "a string");
  if (s.empty()) fail(t.where, "replay.bad_value", t.name() + " must not be empty", "write a value");
  return s;
}

std::string to_choice(const Tree& t, std::initializer_list<std::string_view> choices) {
  const std::string& s = scalar(t, "one of " + join(choices, ", "));
  if (std::find(choices.begin(), choices.end(), s) == choices.end()) {
    fail(t.where, "replay.bad_value", t.name() + " is '" + s + "'; it must be one of " + join(choices, ", "),
         "write one of " + join(choices, ", "));
  }
  return s;
}

bool all_hex(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
  });
}

// ---------------------------------------------------------------------------------------------------------------
// Files and merging.

void assign_paths(Tree& t, const std::string& path) {
  t.path = path;
  for (std::size_t i = 0; i < t.children.size(); ++i) {
    Tree& c = t.children[i];
    if (t.kind == Tree::Kind::map) {
      assign_paths(c, path.empty() ? c.key : path + "." + c.key);
    } else {
      assign_paths(c, path + "[" + std::to_string(i) + "]");
    }
  }
}

// Lists whose entries are merged by an identifying field; lists that are concatenated; every other list is replaced.
const char* merge_key_of(const std::string& path) {
  if (path == "inventory.gpus") return "index";
  if (path == "scenario.measurements") return "gpu";
  return nullptr;
}
bool concatenates(const std::string& path) { return path == "scenario.faults.hang" || path == "scenario.faults.error"; }

std::string identity(const Tree& item, const char* key, const std::string& list) {
  const Tree* id = item.kind == Tree::Kind::map ? item.find(key) : nullptr;
  if (id == nullptr || id->kind != Tree::Kind::scalar) {
    fail(item.where, "replay.missing_field", "an entry of '" + list + "' has no '" + key + "'",
         std::string("give every entry its '") + key + ": N'");
  }
  // An instance's measurements are their own entry: the GPU and the MIG device's uuid together identify it.
  const Tree* mig = list == "scenario.measurements" ? item.find("mig") : nullptr;
  if (mig != nullptr && mig->kind == Tree::Kind::scalar) return id->scalar + "/" + mig->scalar;
  return id->scalar;
}

void merge_into(Tree& base, Tree overlay, const std::string& path) {
  if (base.kind == Tree::Kind::map && overlay.kind == Tree::Kind::map) {
    base.where = overlay.where;  // a check across fields of a merged mapping points at the file that changed it last
    for (Tree& o : overlay.children) {
      Tree* b = base.find(o.key);
      const std::string child_path = path.empty() ? o.key : path + "." + o.key;
      if (b == nullptr) {
        base.children.push_back(std::move(o));
      } else {
        merge_into(*b, std::move(o), child_path);
      }
    }
    return;
  }
  if (base.kind == Tree::Kind::seq && overlay.kind == Tree::Kind::seq) {
    if (const char* key = merge_key_of(path)) {
      for (Tree& o : overlay.children) {
        const std::string id = identity(o, key, path);
        auto it = std::find_if(base.children.begin(), base.children.end(),
                               [&](const Tree& b) { return identity(b, key, path) == id; });
        if (it == base.children.end()) {
          base.children.push_back(std::move(o));
        } else {
          merge_into(*it, std::move(o), path + "[]");
        }
      }
      return;
    }
    if (concatenates(path)) {
      for (Tree& o : overlay.children) base.children.push_back(std::move(o));
      return;
    }
  }
  std::string key = std::move(base.key), key_where = std::move(base.key_where);
  base = std::move(overlay);
  if (base.key.empty()) {
    base.key = std::move(key);
    base.key_where = std::move(key_where);
  }
}

class Loader {
 public:
  explicit Loader(const ReplayFileReader& read_file) : m_read(read_file) {}

  Tree load(std::string_view text, const std::string& origin) {
    if (auto st = gpuenv::check_yaml_bytes(text, origin, k_max_bytes, k_max_depth); !st) throw Failure{st.error()};
    YAML::Node doc;
    try {
      doc = YAML::Load(std::string(text));
    } catch (const YAML::Exception& e) {
      fail(at(origin, e.mark), "replay.yaml_syntax", "YAML syntax error: " + e.msg,
           "fix the YAML syntax at that place");
    }
    Tree root = Converter(origin, uses_aliases(text)).convert(doc, origin);
    if (root.kind != Tree::Kind::map) {
      fail(root.where, "replay.schema", "not a replay file: expected a mapping starting with 'schema: " +
                                            std::string(k_replay_schema) + "', found " + describe(root),
           std::string("see ") + k_doc);
    }
    check_keys(root, {"schema", "extends", "inventory", "scenario"});
    const Tree* schema = root.find("schema");
    if (schema == nullptr) {
      fail(root.where, "replay.schema", "the file has no 'schema'",
           "add 'schema: " + std::string(k_replay_schema) + "' as its first line");
    }
    if (schema->kind != Tree::Kind::scalar || schema->scalar != k_replay_schema) {
      fail(schema->where, "replay.schema",
           "schema is " + describe(*schema) + ", not " + std::string(k_replay_schema),
           "this gpuenv reads " + std::string(k_replay_schema) + " files only");
    }
    const Tree* extends = root.find("extends");
    if (extends == nullptr) return root;

    if (extends->kind != Tree::Kind::scalar || extends->scalar.empty()) {
      fail(extends->where, "replay.wrong_type", "'extends' must be a file name, not " + describe(*extends),
           "write extends: h100x8.yaml (relative to this file)");
    }
    const std::filesystem::path base_path =
        (std::filesystem::path(origin).parent_path() / extends->scalar).lexically_normal();
    const std::string base_name = base_path.string();
    if (std::find(m_chain.begin(), m_chain.end(), base_name) != m_chain.end()) {
      std::string cycle;
      for (const auto& c : m_chain) cycle += c + " -> ";
      fail(extends->where, "replay.extends_cycle", "'extends' makes a cycle: " + cycle + base_name,
           "make the inventory file extend nothing; overlays extend it");
    }
    if (m_chain.size() > k_max_extends) {
      fail(extends->where, "replay.extends_too_deep",
           "'extends' chains more than " + std::to_string(k_max_extends) + " files",
           "extend the inventory directly instead of an overlay of an overlay of ...");
    }
    auto text_or = m_read(base_path);
    if (!text_or) {
      fail(extends->where, "replay.extends_missing",
           "cannot read '" + base_name + "', which " + origin + " extends: " + text_or.error().message,
           "the path is relative to the extending file; check the name");
    }
    m_chain.push_back(base_name);
    Tree merged = load(*text_or, base_name);
    m_chain.pop_back();
    for (auto it = root.children.begin(); it != root.children.end();) {
      it = (it->key == "extends" || it->key == "schema") ? root.children.erase(it) : it + 1;
    }
    merge_into(merged, std::move(root), "");
    return merged;
  }

  void start(const std::string& origin) {
    m_chain.assign(1, std::filesystem::path(origin).lexically_normal().string());
  }

 private:
  const ReplayFileReader& m_read;
  std::vector<std::string> m_chain;
};

// ---------------------------------------------------------------------------------------------------------------
// The recording: what the merged tree says, typed (validate/replay/recording.hpp).

using GpuRecord = ReplayGpu;
using GpuMeasurements = ReplayMeasurements;
using Fault = ReplayFault;
using Recording = ReplayRecording;

class RecordingParser {
 public:
  explicit RecordingParser(std::string origin) { m_rec.origin = std::move(origin); }

  Recording parse(const Tree& root) {
    const Tree& inventory = expect_map(required(root, "inventory"), {"driver", "gpus"});
    m_rec.driver = parse_driver(required(inventory, "driver"));
    parse_gpus(expect_list(required(inventory, "gpus")));
    if (const Tree* scenario = root.find("scenario")) {
      expect_map(*scenario, {"measurements", "p2p", "nccl_allreduce", "faults"});
      if (const Tree* m = scenario->find("measurements")) {
        for (const Tree& item : expect_list(*m).children) parse_measurements(item);
      }
      if (const Tree* p = scenario->find("p2p")) parse_p2p(*p);
      if (const Tree* n = scenario->find("nccl_allreduce")) {
        m_rec.has_nccl = true;
        if (!is_unsupported(*n)) m_rec.nccl = parse_samples(*n, "GB/s");
      }
      if (const Tree* f = scenario->find("faults")) parse_faults(*f);
    }
    return std::move(m_rec);
  }

 private:
  DriverState parse_driver(const Tree& d) {
    expect_map(d, {"loaded", "version", "cuda_driver_version", "nouveau_loaded", "nvswitch_present",
                   "fabric_manager_running", "device_nodes_missing", "cc_state", "cc_gpus_ready", "cc_environment"});
    DriverState s;
    s.loaded = to_bool(required(d, "loaded"));
    const Tree& version = required(d, "version");
    if (version.kind == Tree::Kind::null || (version.kind == Tree::Kind::scalar && version.scalar.empty())) {
      if (s.loaded) {
        fail(version.where, "replay.bad_value", "'driver.version' is empty but the driver is loaded",
             "write the version the driver reports, e.g. \"550.54.15\"");
      }
    } else {
      s.version = scalar(version, "a driver version such as \"550.54.15\"");
      if (!s.loaded) {
        fail(version.where, "replay.bad_value", "'driver.version' is " + s.version + " but the driver is not loaded",
             "write version: \"\" when loaded is false");
      }
      if (auto v = resolver::Version::parse(s.version); !v) {
        fail(version.where, "replay.bad_value", "'driver.version' '" + s.version + "' is not a version: " +
                                                    v.error().message,
             "write it as the driver reports it, e.g. \"550.54.15\"");
      }
    }
    s.cuda_driver_version = to_small_int(required(d, "cuda_driver_version"), 0, 99990);
    if (!s.loaded && s.cuda_driver_version != 0) {
      fail(required(d, "cuda_driver_version").where, "replay.bad_value",
           "'driver.cuda_driver_version' is set but the driver is not loaded", "write 0 when loaded is false");
    }
    s.nouveau_loaded = to_bool(required(d, "nouveau_loaded"));
    s.nvswitch_present = to_bool(required(d, "nvswitch_present"));
    const std::string fm = to_choice(required(d, "fabric_manager_running"), {"true", "false", "unknown"});
    if (fm != "unknown") s.fabric_manager_running = fm == "true";
    for (const Tree& node : expect_list(required(d, "device_nodes_missing")).children) {
      std::string path = to_text(node);
      if (path.rfind("/dev/nvidia", 0) != 0) {
        fail(node.where, "replay.bad_value", "'" + path + "' is not an NVIDIA device node",
             "list paths such as /dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidia0");
      }
      s.device_nodes_missing.push_back(std::move(path));
    }
    s.cc_state = to_choice(required(d, "cc_state"), {"on", "off", "devtools", "unknown"});
    if (const Tree* ready = d.find("cc_gpus_ready")) {
      if (s.cc_state == "off" || s.cc_state == "unknown") {
        fail(ready->where, "replay.bad_value", "'driver.cc_gpus_ready' is set but cc_state is " + s.cc_state,
             "leave cc_gpus_ready out unless cc_state is on or devtools");
      }
      s.cc_gpus_ready = to_bool(*ready);
    }
    if (const Tree* env = d.find("cc_environment")) s.cc_environment = to_choice(*env, {"production", "simulation", "unknown"});
    return s;
  }

  void parse_gpus(const Tree& list) {
    std::map<int, const Tree*> by_index;
    for (const Tree& g : list.children) {
      GpuRecord r = parse_gpu(g);
      const int index = r.info.index;
      if (by_index.count(index)) {
        fail(required(g, "index").where, "replay.bad_value", "two GPUs have index " + std::to_string(index),
             "give each GPU its own index, 0 to N-1 in NVML order");
      }
      by_index[index] = &g;
      m_rec.gpus.push_back(std::move(r));
    }
    std::sort(m_rec.gpus.begin(), m_rec.gpus.end(),
              [](const GpuRecord& a, const GpuRecord& b) { return a.info.index < b.info.index; });
    std::set<std::string> uuids, buses;
    for (std::size_t i = 0; i < m_rec.gpus.size(); ++i) {
      const GpuInfo& info = m_rec.gpus[i].info;
      const Tree& g = *by_index[info.index];
      if (info.index != static_cast<int>(i)) {
        fail(required(g, "index").where, "replay.bad_value",
             "GPU indices must run 0 to " + std::to_string(m_rec.gpus.size() - 1) + " without gaps; found " +
                 std::to_string(info.index),
             "number the GPUs as NVML does: 0, 1, 2, ...");
      }
      if (!uuids.insert(info.uuid).second) {
        fail(required(g, "uuid").where, "replay.bad_value", "GPU uuid " + info.uuid + " appears twice",
             "give every GPU its own uuid");
      }
      if (!buses.insert(info.pci_bus_id).second) {
        fail(required(g, "pci_bus_id").where, "replay.bad_value", "pci_bus_id " + info.pci_bus_id + " appears twice",
             "give every GPU its own PCI address");
      }
    }
    if (!m_rec.driver.loaded && !m_rec.gpus.empty()) {
      fail(list.where, "replay.bad_value", "GPUs are listed but the driver is not loaded",
           "without a driver NVML enumerates nothing: write gpus: []");
    }
  }

  GpuRecord parse_gpu(const Tree& g) {
    expect_map(g, {"index", "uuid", "name", "pci_bus_id", "pci_device_id", "compute_capability",
                   "memory_total_bytes", "numa_node", "nvlink_links_active", "health", "health_under_load",
                   "mig_devices"});
    GpuRecord r;
    GpuInfo& info = r.info;
    info.index = to_small_int(required(g, "index"), 0, 1023);
    const Tree& uuid = required(g, "uuid");
    info.uuid = to_text(uuid);
    if (!valid_uuid(info.uuid)) {
      fail(uuid.where, "replay.bad_value", "uuid '" + info.uuid + "' is not a GPU uuid",
           "write it as NVML does: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx (hexadecimal)");
    }
    info.name = to_text(required(g, "name"));
    const Tree& bus = required(g, "pci_bus_id");
    info.pci_bus_id = to_text(bus);
    if (!valid_bus_id(info.pci_bus_id)) {
      fail(bus.where, "replay.bad_value", "pci_bus_id '" + info.pci_bus_id + "' is not a PCI address",
           "write domain:bus:device.function as NVML does, e.g. \"00000000:18:00.0\"");
    }
    const Tree& dev = required(g, "pci_device_id");
    const std::string& dev_text = scalar(dev, "a PCI device id such as \"0x2330\"");
    if (dev_text.size() != 6 || dev_text[0] != '0' || (dev_text[1] != 'x' && dev_text[1] != 'X') ||
        !all_hex(std::string_view(dev_text).substr(2))) {
      fail(dev.where, "replay.bad_value", "pci_device_id '" + dev_text + "' is not a PCI device id",
           "write 0x and four hexadecimal digits, e.g. \"0x2330\" (the device id, not the vendor 0x10de)");
    }
    info.pci_device_id = static_cast<std::uint32_t>(std::stoul(dev_text.substr(2), nullptr, 16));
    const Tree& cc = required(g, "compute_capability");
    const std::string& cc_text = scalar(cc, "a compute capability such as \"9.0\"");
    const auto dot = cc_text.find('.');
    if (dot == std::string::npos || dot == 0 || dot > 2 || cc_text.size() != dot + 2 ||
        !std::all_of(cc_text.begin(), cc_text.end(), [](char c) { return c == '.' || (c >= '0' && c <= '9'); })) {
      fail(cc.where, "replay.bad_value", "compute_capability '" + cc_text + "' is not major.minor",
           "write it as \"9.0\" (quoted, so YAML keeps it text)");
    }
    info.cc_major = std::stoi(cc_text.substr(0, dot));
    info.cc_minor = cc_text[dot + 1] - '0';
    const Tree& memory = required(g, "memory_total_bytes");
    info.memory_total_bytes = to_u64(memory);
    if (info.memory_total_bytes == 0) {
      fail(memory.where, "replay.bad_value", "memory_total_bytes is 0", "write the total NVML reports, in bytes");
    }
    info.numa_node = to_small_int(required(g, "numa_node"), -1, 1023);
    info.nvlink_links_active = to_small_int(required(g, "nvlink_links_active"), 0, 64);
    if (const Tree* h = g.find("health")) r.health = parse_health(*h);
    if (const Tree* h = g.find("health_under_load")) r.health_under_load = parse_health(*h);
    if (const Tree* m = g.find("mig_devices")) r.mig = parse_mig_devices(*m, r);
    return r;
  }

  // inventory.gpus[].mig_devices: the MIG devices of a GPU with MIG on, in NVML order (docs/replay.md).
  std::vector<MigDevice> parse_mig_devices(const Tree& list, const GpuRecord& gpu) {
    std::vector<MigDevice> out;
    if (gpu.health && gpu.health->mig_enabled != std::optional<bool>(true)) {
      fail(list.where, "replay.bad_value", "GPU " + std::to_string(gpu.info.index) + " lists MIG devices but its health says MIG is not enabled",
           "write mig_enabled: true in its health, or remove mig_devices");
    }
    std::set<std::pair<int, int>> ids;
    for (const Tree& d : expect_list(list).children) {
      expect_map(d, {"uuid", "gpu_instance_id", "compute_instance_id", "profile", "memory_bytes", "sm_count",
                     "gpu_instance_slices"});
      MigDevice m;
      m.parent = gpu.info.index;
      m.index = static_cast<int>(out.size());
      const Tree& uuid = required(d, "uuid");
      m.uuid = to_text(uuid);
      if (!valid_mig_uuid(m.uuid)) {
        fail(uuid.where, "replay.bad_value", "uuid '" + m.uuid + "' is not a MIG device uuid",
             "write it as NVML does: MIG-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx (hexadecimal)");
      }
      if (!m_mig_uuids.insert(m.uuid).second) {
        fail(uuid.where, "replay.bad_value", "MIG device uuid " + m.uuid + " appears twice", "give every MIG device its own uuid");
      }
      m.gpu_instance_id = to_small_int(required(d, "gpu_instance_id"), 0, 1023);
      m.compute_instance_id = to_small_int(required(d, "compute_instance_id"), 0, 1023);
      if (!ids.insert({m.gpu_instance_id, m.compute_instance_id}).second) {
        fail(d.where, "replay.bad_value", "GPU instance " + std::to_string(m.gpu_instance_id) + ", compute instance " +
                                              std::to_string(m.compute_instance_id) + " is listed twice",
             "each MIG device has its own pair of GPU and compute instance ids");
      }
      const Tree& profile = required(d, "profile");
      m.profile = to_text(profile);
      if (!valid_mig_profile(m.profile)) {
        fail(profile.where, "replay.bad_value", "profile '" + m.profile + "' is not a MIG profile name",
             "write it as NVML names it after \"MIG \": 1g.10gb, 3g.40gb, 1c.3g.40gb, 1g.10gb+me");
      }
      const Tree& memory = required(d, "memory_bytes");
      m.memory_bytes = to_u64(memory);
      if (m.memory_bytes == 0 || m.memory_bytes > gpu.info.memory_total_bytes) {
        fail(memory.where, "replay.bad_value", "memory_bytes " + std::to_string(m.memory_bytes) + " is not within the GPU's " +
                                                   std::to_string(gpu.info.memory_total_bytes) + " bytes",
             "write the instance's memory as NVML reports it on the MIG handle, in bytes");
      }
      m.parent_memory_bytes = gpu.info.memory_total_bytes;
      m.sm_count = to_small_int(required(d, "sm_count"), 1, 1000);
      m.gpu_instance_slices = to_small_int(required(d, "gpu_instance_slices"), 1, 8);
      out.push_back(std::move(m));
    }
    return out;
  }

  static bool valid_mig_uuid(const std::string& s) {
    return s.rfind("MIG-", 0) == 0 && valid_uuid("GPU-" + s.substr(4));
  }

  // "1g.10gb", "1c.3g.40gb", "1g.10gb+me": letters, digits, '.', '+', at most 32.
  static bool valid_mig_profile(const std::string& s) {
    return !s.empty() && s.size() <= 32 && s[0] >= '0' && s[0] <= '9' && s.find("g.") != std::string::npos &&
           std::all_of(s.begin(), s.end(), [](char c) {
             return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '.' || c == '+';
           });
  }

  static bool valid_uuid(const std::string& s) {
    if (s.size() != 40 || s.rfind("GPU-", 0) != 0) return false;
    for (std::size_t i = 4; i < s.size(); ++i) {
      const bool dash = i == 12 || i == 17 || i == 22 || i == 27;
      if (dash ? s[i] != '-' : !all_hex(std::string_view(&s[i], 1))) return false;
    }
    return true;
  }

  static bool valid_bus_id(const std::string& s) {
    // domain (4 or 8 hex digits) : bus (2) : device (2) . function (0-7)
    const auto colon = s.find(':');
    if (colon != 4 && colon != 8) return false;
    const std::string_view rest = std::string_view(s).substr(colon + 1);
    return all_hex(std::string_view(s).substr(0, colon)) && rest.size() == 7 && all_hex(rest.substr(0, 2)) &&
           rest[2] == ':' && all_hex(rest.substr(3, 2)) && rest[5] == '.' && rest[6] >= '0' && rest[6] <= '7';
  }

  template <class T, class Read>
  static std::optional<T> optional_field(const Tree& map, std::string_view key, Read read) {
    const Tree& t = required(map, key);
    if (is_unsupported(t)) return std::nullopt;
    return read(t);
  }

  static GpuHealth parse_health(const Tree& h) {
    expect_map(h, {"ecc_enabled", "ecc_pending_change", "ecc_volatile_uncorrected", "ecc_volatile_corrected",
                   "ecc_aggregate_uncorrected", "row_remap", "retired_pages", "pcie_link", "pcie_replays",
                   "clock_event_reasons", "temperature_c", "slowdown_temperature_c", "power_w", "power_limit_w",
                   "persistence_mode", "mig_enabled", "mig_pending_change"});
    GpuHealth out;
    out.ecc_enabled = optional_field<bool>(h, "ecc_enabled", to_bool);
    out.ecc_pending_change = optional_field<bool>(h, "ecc_pending_change", to_bool);
    out.ecc_volatile_uncorrected = optional_field<std::uint64_t>(h, "ecc_volatile_uncorrected", to_u64);
    out.ecc_volatile_corrected = optional_field<std::uint64_t>(h, "ecc_volatile_corrected", to_u64);
    out.ecc_aggregate_uncorrected = optional_field<std::uint64_t>(h, "ecc_aggregate_uncorrected", to_u64);
    out.row_remap = optional_field<RowRemap>(h, "row_remap", [](const Tree& t) {
      expect_map(t, {"corrected_rows", "uncorrected_rows", "pending", "failure"});
      return RowRemap{to_u64(required(t, "corrected_rows")), to_u64(required(t, "uncorrected_rows")),
                      to_bool(required(t, "pending")), to_bool(required(t, "failure"))};
    });
    out.retired_pages = optional_field<RetiredPages>(h, "retired_pages", [](const Tree& t) {
      expect_map(t, {"single_bit", "double_bit", "pending"});
      return RetiredPages{to_u64(required(t, "single_bit")), to_u64(required(t, "double_bit")),
                          to_bool(required(t, "pending"))};
    });
    out.pcie_link = optional_field<PcieLink>(h, "pcie_link", [](const Tree& t) {
      expect_map(t, {"current_gen", "max_gen", "current_width", "max_width"});
      PcieLink link;
      link.current_gen = to_small_int(required(t, "current_gen"), 1, 7);
      link.max_gen = to_small_int(required(t, "max_gen"), 1, 7);
      link.current_width = pcie_width(required(t, "current_width"));
      link.max_width = pcie_width(required(t, "max_width"));
      if (link.current_gen > link.max_gen || link.current_width > link.max_width) {
        fail(t.where, "replay.bad_value", t.name() + " runs above its maximum (gen " +
                                              std::to_string(link.current_gen) + "/" + std::to_string(link.max_gen) +
                                              ", x" + std::to_string(link.current_width) + "/x" +
                                              std::to_string(link.max_width) + ")",
             "a link trains at or below its maximum; check which value is current and which maximum");
      }
      return link;
    });
    out.pcie_replays = optional_field<std::uint64_t>(h, "pcie_replays", to_u64);
    out.clock_event_reasons = optional_field<std::uint64_t>(h, "clock_event_reasons", to_u64);
    out.temperature_c =
        optional_field<int>(h, "temperature_c", [](const Tree& t) { return to_small_int(t, -40, 150); });
    out.slowdown_temperature_c =
        optional_field<int>(h, "slowdown_temperature_c", [](const Tree& t) { return to_small_int(t, 0, 150); });
    out.power_w = optional_field<double>(h, "power_w", to_non_negative);
    out.power_limit_w = optional_field<double>(h, "power_limit_w", to_non_negative);
    out.persistence_mode = optional_field<bool>(h, "persistence_mode", to_bool);
    out.mig_enabled = optional_field<bool>(h, "mig_enabled", to_bool);
    out.mig_pending_change = optional_field<bool>(h, "mig_pending_change", to_bool);
    return out;
  }

  static int pcie_width(const Tree& t) {
    const int w = to_small_int(t, 1, 32);
    if (w != 1 && w != 2 && w != 4 && w != 8 && w != 12 && w != 16 && w != 32) {
      fail(t.where, "replay.bad_value", t.name() + " is x" + std::to_string(w) + ", not a PCIe link width",
           "write 1, 2, 4, 8, 12, 16 or 32");
    }
    return w;
  }

  static Samples parse_samples(const Tree& t, const std::string& unit) {
    expect_map(t, {"values", "unit", "engine", "data_verified"});
    Samples s;
    const Tree& values = expect_list(required(t, "values"));
    if (values.children.empty()) {
      fail(values.where, "replay.bad_value", values.name() + " is empty", "record at least one sample");
    }
    for (const Tree& v : values.children) s.values.push_back(to_non_negative(v));
    const Tree& u = required(t, "unit");
    s.unit = to_text(u);
    if (s.unit != unit) {
      fail(u.where, "replay.bad_value", t.name() + " is in " + s.unit + "; it must be in " + unit,
           "convert the values to " + unit + " (1 GB/s = 1e9 bytes per second; 1 TFLOPS = 1e12 operations per second)");
    }
    s.engine = to_text(required(t, "engine"));
    s.data_verified = to_bool(required(t, "data_verified"));
    return s;
  }

  int gpu_ref(const Tree& t) {
    const int gpu = to_small_int(t, 0, 1023);
    if (gpu >= static_cast<int>(m_rec.gpus.size())) {
      fail(t.where, "replay.bad_value",
           t.name() + " is GPU " + std::to_string(gpu) + ", but the inventory lists " +
               std::to_string(m_rec.gpus.size()) + " GPU(s)",
           "refer to a GPU index from inventory.gpus");
    }
    return gpu;
  }

  void parse_measurements(const Tree& m) {
    expect_map(m, {"gpu", "mig", "compute_mismatches", "memtest", "gemm_consistency", "hbm_bandwidth", "h2d_bandwidth",
                   "d2h_bandwidth", "gemm_tflops", "cc_evidence"});
    const Tree& gpu_node = required(m, "gpu");
    const int gpu = gpu_ref(gpu_node);
    std::string mig;
    if (const Tree* mig_node = m.find("mig")) {
      mig = to_text(*mig_node);
      const auto& devices = m_rec.gpus[static_cast<std::size_t>(gpu)].mig;
      if (std::none_of(devices.begin(), devices.end(), [&](const MigDevice& d) { return d.uuid == mig; })) {
        fail(mig_node->where, "replay.bad_value", "'" + mig + "' is not a MIG device of GPU " + std::to_string(gpu),
             "name a uuid from inventory.gpus[" + std::to_string(gpu) + "].mig_devices");
      }
      for (const char* whole : {"h2d_bandwidth", "d2h_bandwidth", "cc_evidence"}) {
        if (const Tree* t = m.find(whole)) {
          fail(t->where, "replay.bad_value", std::string(whole) + " is measured on the whole GPU, not in a MIG device",
               "record it in the GPU's own entry (without mig)");
        }
      }
    }
    const std::string subject = "GPU " + std::to_string(gpu) + (mig.empty() ? std::string() : " MIG device " + mig);
    if (m_rec.measurements.count({gpu, mig})) {
      fail(gpu_node.where, "replay.bad_value", "measurements for " + subject + " are listed twice",
           "merge them into one entry");
    }
    GpuMeasurements& out = m_rec.measurements[{gpu, mig}];
    if (const Tree* t = m.find("compute_mismatches")) out.compute_mismatches = to_u64(*t);
    if (const Tree* t = m.find("memtest")) out.memtest = parse_memtest(*t);
    if (const Tree* t = m.find("gemm_consistency")) {
      expect_map(*t, {"digests", "reference", "engine"});
      ConsistencyResult c;
      const Tree& digests = expect_list(required(*t, "digests"));
      if (digests.children.empty()) {
        fail(digests.where, "replay.bad_value", digests.name() + " is empty", "record one digest per repetition");
      }
      for (const Tree& d : digests.children) c.result_digests.push_back(to_u64(d));
      if (const Tree* ref = t->find("reference")) {
        c.reference_digest = to_u64(*ref);
        c.has_reference = true;
      }
      c.engine = to_text(required(*t, "engine"));
      out.gemm_consistency = std::move(c);
    }
    if (const Tree* t = m.find("hbm_bandwidth")) out.hbm_bandwidth = parse_samples(*t, "GB/s");
    if (const Tree* t = m.find("h2d_bandwidth")) out.h2d_bandwidth = parse_samples(*t, "GB/s");
    if (const Tree* t = m.find("d2h_bandwidth")) out.d2h_bandwidth = parse_samples(*t, "GB/s");
    if (const Tree* t = m.find("cc_evidence")) out.cc_evidence = parse_cc_evidence(*t);
    if (const Tree* t = m.find("gemm_tflops")) {
      expect_map(*t, {"bf16", "fp16", "tf32", "fp64"});
      out.has_gemm_tflops = true;
      for (const Tree& d : t->children) {
        out.gemm_tflops[d.key] = is_unsupported(d) ? std::nullopt : std::optional<Samples>(parse_samples(d, "TFLOPS"));
      }
    }
  }

  /// {report: hex, cert_chain: PEM text, nonce: 64 hex digits, vbios_version: text}: evidence as NVML gave it.
  static CcEvidence parse_cc_evidence(const Tree& t) {
    expect_map(t, {"report", "cert_chain", "nonce", "vbios_version"});
    auto bytes = [](const Tree& node, std::size_t exact) {
      const std::string hex = to_text(node);
      if (!all_hex(hex) || hex.size() % 2 || (exact && hex.size() != 2 * exact))
        fail(node.where, "replay.bad_value", node.name() + " must be " + (exact ? std::to_string(2 * exact) + " " : std::string()) + "hex digits",
             "write the bytes as hex, as NVIDIA's sample reports are stored");
      return from_hex(hex).value_or(std::string());
    };
    CcEvidence e;
    e.report = bytes(required(t, "report"), 0);
    e.cert_chain = to_text(required(t, "cert_chain"));
    e.nonce = bytes(required(t, "nonce"), 32);
    if (const Tree* v = t.find("vbios_version")) e.vbios_version = to_text(*v);
    return e;
  }

  static MemtestResult parse_memtest(const Tree& t) {
    expect_map(t, {"bytes_tested", "errors", "first_error_offset", "expected", "actual", "patterns",
                   "truncated_by_deadline"});
    MemtestResult r;
    r.bytes_tested = to_u64(required(t, "bytes_tested"));
    r.errors = to_u64(required(t, "errors"));
    for (const Tree& p : expect_list(required(t, "patterns")).children) r.patterns.push_back(to_text(p));
    r.truncated_by_deadline = to_bool(required(t, "truncated_by_deadline"));
    if (r.errors > 0) {
      r.first_error_offset = to_u64(required(t, "first_error_offset"));
      r.expected = to_u64(required(t, "expected"));
      r.actual = to_u64(required(t, "actual"));
      if (r.expected == r.actual) {
        fail(required(t, "actual").where, "replay.bad_value",
             t.name() + " records an error whose expected and actual words are equal",
             "write the first bad word as it was expected and as it was read");
      }
      if (r.first_error_offset >= r.bytes_tested) {
        fail(required(t, "first_error_offset").where, "replay.bad_value",
             t.name() + ": first_error_offset lies beyond bytes_tested", "write an offset inside the tested range");
      }
    } else {
      if (const Tree* x = t.find("first_error_offset")) r.first_error_offset = to_u64(*x);
      if (const Tree* x = t.find("expected")) r.expected = to_u64(*x);
      if (const Tree* x = t.find("actual")) r.actual = to_u64(*x);
    }
    return r;
  }

  void parse_p2p(const Tree& p) {
    expect_map(p, {"unit", "engine", "data_verified", "matrix"});
    const Tree& unit = required(p, "unit");
    if (to_text(unit) != "GB/s") {
      fail(unit.where, "replay.bad_value", "'scenario.p2p.unit' is " + unit.scalar + "; it must be GB/s",
           "convert the values to GB/s (1e9 bytes per second)");
    }
    const std::string engine = to_text(required(p, "engine"));
    const bool verified = to_bool(required(p, "data_verified"));
    const Tree& matrix = expect_list(required(p, "matrix"));
    const std::size_t n = m_rec.gpus.size();
    if (matrix.children.size() != n) {
      fail(matrix.where, "replay.bad_value",
           "'scenario.p2p.matrix' has " + std::to_string(matrix.children.size()) + " rows for " + std::to_string(n) +
               " GPU(s)",
           "write one row per source GPU, one entry per destination GPU");
    }
    m_rec.has_p2p = true;
    for (std::size_t src = 0; src < n; ++src) {
      const Tree& row = expect_list(matrix.children[src]);
      if (row.children.size() != n) {
        fail(row.where, "replay.bad_value",
             row.name() + " has " + std::to_string(row.children.size()) + " entries for " + std::to_string(n) +
                 " GPU(s)",
             "write one entry per destination GPU, ~ on the diagonal and for a pair not measured");
      }
      for (std::size_t dst = 0; dst < n; ++dst) {
        const Tree& cell = row.children[dst];
        const auto key = std::make_pair(static_cast<int>(src), static_cast<int>(dst));
        if (src == dst) {
          if (cell.kind != Tree::Kind::null) {
            fail(cell.where, "replay.bad_value", cell.name() + " is a GPU to itself", "write ~ on the diagonal");
          }
          continue;
        }
        if (cell.kind == Tree::Kind::null) continue;  // not recorded: the call fails as unrecorded
        if (is_unsupported(cell)) {
          m_rec.p2p[key] = std::nullopt;
          continue;
        }
        Samples s;
        for (const Tree& v : expect_list(cell).children) s.values.push_back(to_non_negative(v));
        if (s.values.empty()) {
          fail(cell.where, "replay.bad_value", cell.name() + " is empty", "record samples, or write unsupported");
        }
        s.unit = "GB/s";
        s.engine = engine;
        s.data_verified = verified;
        m_rec.p2p[key] = std::move(s);
      }
    }
  }

  void parse_faults(const Tree& f) {
    expect_map(f, {"hang", "error"});
    for (const char* kind : {"hang", "error"}) {
      const Tree* list = f.find(kind);
      if (list == nullptr) continue;
      const bool hang = std::string_view(kind) == "hang";
      for (const Tree& item : expect_list(*list).children) {
        if (hang) {
          expect_map(item, {"gpu", "method"});
        } else {
          expect_map(item, {"gpu", "method", "message", "id"});
        }
        const Tree& method_node = required(item, "method");
        const std::string& method = scalar(method_node, "a backend method name");
        const ReplayMethod* info = nullptr;
        for (const ReplayMethod& m : k_replay_methods) {
          if (m.name == method) info = &m;
        }
        if (info == nullptr) {
          std::string all;
          for (const ReplayMethod& m : k_replay_methods) all += (all.empty() ? "" : ", ") + std::string(m.name);
          fail(method_node.where, "replay.bad_value", "unknown method '" + method + "' in " + item.name(),
               "write one of " + all);
        }
        if (hang && !info->may_hang) {
          fail(method_node.where, "replay.bad_value", "'" + method + "' cannot hang in a replay",
               "driver() and gpus() run outside the runner's watchdog; inject an error instead");
        }
        int gpu = -1;
        const Tree* gpu_node = item.find("gpu");
        if (info->per_gpu) {
          if (gpu_node == nullptr) {
            fail(item.where, "replay.missing_field", item.name() + " has no 'gpu'",
                 "'" + method + "' is per GPU: write gpu: N");
          }
          gpu = gpu_ref(*gpu_node);
        } else if (gpu_node != nullptr) {
          fail(gpu_node->where, "replay.bad_value", "'" + method + "' is host-wide; it takes no 'gpu'",
               "remove 'gpu' from this entry");
        }
        Fault fault;
        fault.hang = hang;
        fault.where = item.where;
        if (!hang) {
          fault.message = to_text(required(item, "message"));
          fault.id = item.find("id") ? to_text(*item.find("id")) : "replay.injected";
        }
        if (!m_rec.faults.emplace(std::make_pair(gpu, method), std::move(fault)).second) {
          fail(item.where, "replay.bad_value",
               "a second fault for '" + method + "'" + (gpu >= 0 ? " on GPU " + std::to_string(gpu) : ""),
               "keep one fault per method and GPU");
        }
      }
    }
  }

  Recording m_rec;
  std::set<std::string> m_mig_uuids;
};

// ---------------------------------------------------------------------------------------------------------------
// The backend. Its data is immutable once loaded; a hung call waits on a condition variable until the backend is
// destroyed. State is shared with sessions and with callers in flight, so a hung thread the runner abandoned still
// has valid memory when it wakes after the backend is gone.

struct ReplayState {
  Recording rec;
  std::mutex mutex;
  std::condition_variable cv;
  bool released = false;

  // The injected fault for (gpu, method): its Error, after blocking first for a hang; empty to answer normally.
  std::optional<Error> fault(int gpu, std::string_view method) {
    auto it = rec.faults.find(std::make_pair(gpu, std::string(method)));
    if (it == rec.faults.end()) return std::nullopt;
    const Fault& f = it->second;
    const std::string on = gpu >= 0 ? " on GPU " + std::to_string(gpu) : "";
    if (!f.hang) {
      return make_error(ErrorKind::environment, f.id, f.message + " (" + std::string(method) + on + ", injected)",
                        f.where, "injected by the replay scenario (scenario.faults.error)");
    }
    {
      std::unique_lock lock(mutex);
      cv.wait(lock, [this] { return released; });
    }
    return make_error(ErrorKind::environment, "replay.hang_released",
                      std::string(method) + on +
                          " hung as the replay scenario asks and was released when the backend closed",
                      f.where, "the runner's watchdog should have failed this check with 'hang' before this");
  }

  Error no_measurement(std::string_view method, const std::string& subject) const {
    return make_error(ErrorKind::spec, "replay.no_measurement",
                      "replay file has no " + std::string(method) + " for " + subject, rec.origin,
                      "record it in the replay file (" + std::string(k_doc) + "); replay never invents a value");
  }

  std::optional<Error> check_gpu(int gpu) const {
    if (gpu >= 0 && gpu < static_cast<int>(rec.gpus.size())) return std::nullopt;
    return make_error(ErrorKind::usage, "replay.no_gpu",
                      "GPU " + std::to_string(gpu) + " is not in the replay file, which lists " +
                          std::to_string(rec.gpus.size()) + " GPU(s)",
                      rec.origin, "choose GPUs from the recorded inventory");
  }

  const GpuMeasurements* measurements(int gpu, const std::string& mig) const {
    auto it = rec.measurements.find({gpu, mig});
    return it == rec.measurements.end() ? nullptr : &it->second;
  }
};

std::string gpu_name(int gpu) { return "GPU " + std::to_string(gpu); }

class ReplaySession final : public GpuSession {
 public:
  ReplaySession(std::shared_ptr<ReplayState> state, int gpu, std::string mig = {})
      : m_state(std::move(state)), m_gpu(gpu), m_mig(std::move(mig)) {}

  Result<std::uint64_t> compute_mismatches() override {
    if (auto e = m_state->fault(m_gpu, "compute_mismatches")) return std::move(*e);
    const auto* m = m_state->measurements(m_gpu, m_mig);
    if (m == nullptr || !m->compute_mismatches) return missing("compute_mismatches");
    return *m->compute_mismatches;
  }
  Result<MemtestResult> memtest(const MemtestRequest&) override {
    if (auto e = m_state->fault(m_gpu, "memtest")) return std::move(*e);
    const auto* m = m_state->measurements(m_gpu, m_mig);
    if (m == nullptr || !m->memtest) return missing("memtest");
    return *m->memtest;
  }
  Result<ConsistencyResult> gemm_consistency(int) override {
    if (auto e = m_state->fault(m_gpu, "gemm_consistency")) return std::move(*e);
    const auto* m = m_state->measurements(m_gpu, m_mig);
    if (m == nullptr || !m->gemm_consistency) return missing("gemm_consistency");
    return *m->gemm_consistency;
  }
  Result<Samples> hbm_bandwidth(int) override {
    if (auto e = m_state->fault(m_gpu, "hbm_bandwidth")) return std::move(*e);
    const auto* m = m_state->measurements(m_gpu, m_mig);
    if (m == nullptr || !m->hbm_bandwidth) return missing("hbm_bandwidth");
    return *m->hbm_bandwidth;
  }
  Result<Samples> copy_bandwidth(bool to_device, int) override {
    const char* method = to_device ? "h2d_bandwidth" : "d2h_bandwidth";
    if (auto e = m_state->fault(m_gpu, method)) return std::move(*e);
    const auto* m = m_state->measurements(m_gpu, m_mig);
    const std::optional<Samples>* s = m == nullptr ? nullptr : (to_device ? &m->h2d_bandwidth : &m->d2h_bandwidth);
    if (s == nullptr || !*s) return missing(method);
    return **s;
  }
  Result<std::optional<Samples>> gemm_tflops(const std::string& dtype, int) override {
    if (auto e = m_state->fault(m_gpu, "gemm_tflops")) return std::move(*e);
    const auto* m = m_state->measurements(m_gpu, m_mig);
    if (m == nullptr || !m->has_gemm_tflops) return missing("gemm_tflops");
    auto it = m->gemm_tflops.find(dtype);
    if (it == m->gemm_tflops.end()) return missing("gemm_tflops." + dtype);
    return it->second;
  }
  Result<GpuHealth> health() override {
    if (auto e = m_state->fault(m_gpu, "health_under_load")) return std::move(*e);
    const auto& h = m_state->rec.gpus[static_cast<std::size_t>(m_gpu)].health_under_load;
    if (!h) return missing("health_under_load");
    return *h;
  }

 private:
  Error missing(const std::string& method) const {
    return m_state->no_measurement(method, gpu_name(m_gpu) + (m_mig.empty() ? std::string() : " MIG device " + m_mig));
  }

  std::shared_ptr<ReplayState> m_state;
  int m_gpu;
  std::string m_mig;  // the MIG device's uuid; empty for the whole GPU
};

class ReplayBackend final : public GpuBackend {
 public:
  explicit ReplayBackend(Recording rec) : m_state(std::make_shared<ReplayState>()) { m_state->rec = std::move(rec); }
  ReplayBackend(const ReplayBackend&) = delete;
  ReplayBackend& operator=(const ReplayBackend&) = delete;
  ~ReplayBackend() override {
    {
      std::lock_guard lock(m_state->mutex);
      m_state->released = true;
    }
    m_state->cv.notify_all();
  }

  [[nodiscard]] std::string name() const override { return "replay"; }

  // Each method copies the shared state first: a hung call must not touch `this` after the backend is destroyed.
  Result<DriverState> driver() override {
    const auto state = m_state;
    if (auto e = state->fault(-1, "driver")) return std::move(*e);
    return state->rec.driver;
  }
  Result<std::vector<GpuInfo>> gpus() override {
    const auto state = m_state;
    if (auto e = state->fault(-1, "gpus")) return std::move(*e);
    std::vector<GpuInfo> out;
    for (const auto& g : state->rec.gpus) out.push_back(g.info);
    return out;
  }
  Result<GpuHealth> health(int gpu) override {
    const auto state = m_state;
    if (auto e = state->check_gpu(gpu)) return std::move(*e);
    if (auto e = state->fault(gpu, "health")) return std::move(*e);
    const auto& h = state->rec.gpus[static_cast<std::size_t>(gpu)].health;
    if (!h) return state->no_measurement("health", gpu_name(gpu));
    return *h;
  }
  /// The recorded evidence whatever NONCE is asked: its nonce is the recorded one (CcEvidence::nonce), as a replay
  /// cannot sign anew; reports say the backend was a replay.
  Result<std::optional<CcEvidence>> cc_evidence(int gpu, const std::string& /*nonce*/) override {
    const auto state = m_state;
    if (auto e = state->check_gpu(gpu)) return std::move(*e);
    if (auto e = state->fault(gpu, "cc_evidence")) return std::move(*e);
    auto it = state->rec.measurements.find({gpu, std::string()});
    if (it == state->rec.measurements.end() || !it->second.cc_evidence) return state->no_measurement("cc_evidence", gpu_name(gpu));
    return std::optional<CcEvidence>(*it->second.cc_evidence);
  }
  /// Sets nothing (recorded answers); succeeds so that `attest --set-ready` runs its whole path.
  gpuenv::Status set_cc_gpus_ready() override { return ok_status(); }
  Result<std::unique_ptr<GpuSession>> open(int gpu) override {
    const auto state = m_state;
    if (auto e = state->check_gpu(gpu)) return std::move(*e);
    if (auto e = state->fault(gpu, "open")) return std::move(*e);
    return std::unique_ptr<GpuSession>(std::make_unique<ReplaySession>(state, gpu));
  }
  Result<std::vector<MigDevice>> mig_devices(int gpu) override {
    const auto state = m_state;
    if (auto e = state->check_gpu(gpu)) return std::move(*e);
    return state->rec.gpus[static_cast<std::size_t>(gpu)].mig;
  }
  // A recorded MIG device, by its uuid; the GPU's faults on `open` apply to its instances too.
  Result<std::unique_ptr<GpuSession>> open_mig(const MigDevice& device) override {
    const auto state = m_state;
    if (auto e = state->check_gpu(device.parent)) return std::move(*e);
    const auto& devices = state->rec.gpus[static_cast<std::size_t>(device.parent)].mig;
    if (std::none_of(devices.begin(), devices.end(), [&](const MigDevice& d) { return d.uuid == device.uuid; })) {
      return make_error(ErrorKind::usage, "replay.no_mig", "MIG device " + device.uuid + " is not recorded for " + gpu_name(device.parent),
                        state->rec.origin, "choose MIG devices from inventory.gpus[].mig_devices");
    }
    if (auto e = state->fault(device.parent, "open")) return std::move(*e);
    return std::unique_ptr<GpuSession>(std::make_unique<ReplaySession>(state, device.parent, device.uuid));
  }
  Result<std::optional<Samples>> p2p_bandwidth(int src, int dst, int) override {
    const auto state = m_state;
    if (auto e = state->check_gpu(src)) return std::move(*e);
    if (auto e = state->check_gpu(dst)) return std::move(*e);
    if (src == dst) {
      return make_error(ErrorKind::internal, "replay.p2p_self", "p2p_bandwidth asked from GPU " + std::to_string(src) +
                                                                   " to itself", state->rec.origin,
                        "this is a bug in the caller: peer copies need two GPUs");
    }
    if (auto e = state->fault(src, "p2p_bandwidth")) return std::move(*e);
    auto it = state->rec.p2p.find(std::make_pair(src, dst));
    if (!state->rec.has_p2p || it == state->rec.p2p.end()) {
      return state->no_measurement("p2p_bandwidth", gpu_name(src) + " to " + gpu_name(dst));
    }
    return it->second;
  }
  Result<std::optional<Samples>> nccl_allreduce(const std::vector<int>& gpus, int) override {
    const auto state = m_state;
    for (int g : gpus) {
      if (auto e = state->check_gpu(g)) return std::move(*e);
    }
    if (auto e = state->fault(-1, "nccl_allreduce")) return std::move(*e);
    if (!state->rec.has_nccl) return state->no_measurement("nccl_allreduce", "these GPUs");
    return state->rec.nccl;
  }

 private:
  std::shared_ptr<ReplayState> m_state;
};

}  // namespace

Result<std::string> read_replay_file(const std::filesystem::path& path) {
  // Opened non-blocking and checked first: a FIFO or device is refused at once, a large file before it is read.
  auto text = read_file_limited(path.string(), k_max_bytes,
                                {ErrorKind::spec, "replay.too_large", "is this the right file? a recording of 8 GPUs is about 20 KiB"});
  if (text || text.error().id == "replay.too_large") return text;
  const Error& e = text.error();
  return make_error(e.kind == ErrorKind::usage ? ErrorKind::usage : ErrorKind::environment, "replay.file",
                    "cannot read replay file '" + path.string() + "': " + e.message, path.string(),
                    e.id == "io.not_found" ? "check the path given to --backend replay:FILE" : "give the path of a replay YAML file");
}

Result<ReplayRecording> parse_replay_recording(std::string_view yaml_text, std::string_view origin,
                                               const ReplayFileReader& read_file) {
  const std::string name(origin);
  try {
    Loader loader(read_file);
    loader.start(name);
    Tree root = loader.load(yaml_text, name);
    assign_paths(root, "");
    return RecordingParser(name).parse(root);
  } catch (Failure& f) {
    f.error.while_("loading the replay file " + name);
    return std::move(f.error);
  } catch (const std::exception& e) {
    return make_error(ErrorKind::internal, "replay.internal",
                      std::string("loading the replay file failed: ") + e.what(),
                      name, "report this as a bug with the file attached");
  }
}

Result<std::unique_ptr<GpuBackend>> load_replay_backend(std::string_view yaml_text, std::string_view origin,
                                                        const ReplayFileReader& read_file) {
  GPUENV_TRY(rec, parse_replay_recording(yaml_text, origin, read_file));
  return std::unique_ptr<GpuBackend>(std::make_unique<ReplayBackend>(std::move(rec)));
}

Result<std::unique_ptr<GpuBackend>> load_replay_backend(std::string_view yaml_text, std::string_view origin) {
  return load_replay_backend(yaml_text, origin, read_replay_file);
}

Result<std::unique_ptr<GpuBackend>> load_replay_backend_file(const std::filesystem::path& path) {
  auto text = read_replay_file(path);
  if (!text) return std::move(text).error();
  return load_replay_backend(*text, path.string(), read_replay_file);
}

}  // namespace gpuenv::validate
