#include "packages/wheels/wheel_install.hpp"

#include "base/file_io.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <system_error>
#include <utility>

#include "base/archive/safe_extract.hpp"
#include "packages/wheels/markers.hpp"
#include "packages/wheels/pep440.hpp"

#include "base/unique_fd.hpp"

namespace gpuenv::packages {
namespace {

namespace fs = std::filesystem;

constexpr std::uint32_t k_file_mode = 0644;
constexpr std::uint32_t k_exec_mode = 0755;
constexpr std::size_t k_max_metadata_bytes = 1u << 20;   // WHEEL, entry_points.txt
constexpr std::size_t k_max_record_bytes = 64u << 20;    // RECORD of a wheel with a few hundred thousand files
constexpr std::size_t k_max_issues_shown = 5;

Error bad_wheel(const std::string& where, const std::string& message, const std::string& hint = {}) {
  return make_error(ErrorKind::environment, "wheel.bad_wheel", message, where,
                    hint.empty() ? "the wheel is malformed; rebuild it or download another build of the project" : hint);
}
Error record_mismatch(const std::string& where, const std::string& message) {
  return make_error(ErrorKind::environment, "wheel.record_mismatch", message, where,
                    "the wheel's contents do not match its RECORD: it is damaged or was altered after it was built; "
                    "download it again or rebuild it. If the published wheel is so (the lock's sha256 still holds) and only "
                    "hashes or sizes differ, `gpuenv build --allow-record-mismatch NAME==VERSION` installs it (docs/build.md)");
}
constexpr IoArea k_wheel_io{"wheel.io", "check free disk space and permissions of the image directory and its parent"};
Error target_error(const std::string& where, const std::string& message) {
  return make_error(ErrorKind::environment, "wheel.target", message, where,
                    "the image already holds something else at that path; remove it or choose another install scheme");
}

using Fd = UniqueFd;

/// Removes the staging directory whatever happens.
class StagingDir {
 public:
  explicit StagingDir(std::string path) : m_path(std::move(path)) {}
  ~StagingDir() {
    std::error_code ec;
    fs::remove_all(m_path, ec);
  }
  StagingDir(const StagingDir&) = delete;
  StagingDir& operator=(const StagingDir&) = delete;
  [[nodiscard]] const std::string& path() const { return m_path; }

 private:
  std::string m_path;
};

using MdCtx = std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)>;

std::string b64url_nopad(const unsigned char* data, std::size_t n) {
  static constexpr char k_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 3 <= n; i += 3) {
    const std::uint32_t v = (std::uint32_t{data[i]} << 16) | (std::uint32_t{data[i + 1]} << 8) | data[i + 2];
    out += k_alphabet[(v >> 18) & 63];
    out += k_alphabet[(v >> 12) & 63];
    out += k_alphabet[(v >> 6) & 63];
    out += k_alphabet[v & 63];
  }
  if (n - i == 1) {
    const std::uint32_t v = std::uint32_t{data[i]} << 16;
    out += k_alphabet[(v >> 18) & 63];
    out += k_alphabet[(v >> 12) & 63];
  } else if (n - i == 2) {
    const std::uint32_t v = (std::uint32_t{data[i]} << 16) | (std::uint32_t{data[i + 1]} << 8);
    out += k_alphabet[(v >> 18) & 63];
    out += k_alphabet[(v >> 12) & 63];
    out += k_alphabet[(v >> 6) & 63];
  }
  return out;
}

/// The hash algorithms RECORD may use (the spec forbids md5 and sha1).
const EVP_MD* record_digest(std::string_view algo) {
  if (algo == "sha256") return EVP_sha256();
  if (algo == "sha384") return EVP_sha384();
  if (algo == "sha512") return EVP_sha512();
  return nullptr;
}

/// The digests of one file: in RECORD's algorithm, and sha256 for the new RECORD.
struct FileDigest {
  std::string record_b64;
  std::string sha256_b64;
  std::uint64_t size = 0;
};

Result<FileDigest> digest_file(const std::string& path, const EVP_MD* record_md) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (fd.get() < 0) return io_error(k_wheel_io, "cannot open '" + path + "'", path);
  MdCtx sha(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  MdCtx other(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  const bool separate = record_md != EVP_sha256();
  if (!sha || !other || EVP_DigestInit_ex(sha.get(), EVP_sha256(), nullptr) != 1 ||
      (separate && EVP_DigestInit_ex(other.get(), record_md, nullptr) != 1)) {
    return make_error(ErrorKind::internal, "wheel.crypto", "OpenSSL could not start a digest", path, "");
  }
  FileDigest out;
  char buf[1 << 16];
  while (true) {
    const ssize_t r = ::read(fd.get(), buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return io_error(k_wheel_io, "cannot read '" + path + "'", path);
    if (r == 0) break;
    out.size += static_cast<std::uint64_t>(r);
    EVP_DigestUpdate(sha.get(), buf, static_cast<std::size_t>(r));
    if (separate) EVP_DigestUpdate(other.get(), buf, static_cast<std::size_t>(r));
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  EVP_DigestFinal_ex(sha.get(), md, &n);
  out.sha256_b64 = b64url_nopad(md, n);
  if (separate) {
    EVP_DigestFinal_ex(other.get(), md, &n);
    out.record_b64 = b64url_nopad(md, n);
  } else {
    out.record_b64 = out.sha256_b64;
  }
  return out;
}

Result<std::string> read_small_file(const std::string& path, std::size_t max) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (fd.get() < 0) return io_error(k_wheel_io, "cannot open '" + path + "'", path);
  std::string out;
  char buf[1 << 16];
  while (true) {
    const ssize_t r = ::read(fd.get(), buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return io_error(k_wheel_io, "cannot read '" + path + "'", path);
    if (r == 0) break;
    out.append(buf, static_cast<std::size_t>(r));
    if (out.size() > max) {
      return bad_wheel(path, "'" + fs::path(path).filename().string() + "' is larger than " + std::to_string(max) + " bytes");
    }
  }
  return out;
}

Status write_file(const std::string& path, std::string_view content, std::uint32_t mode) {
  Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (fd.get() < 0) return io_error(k_wheel_io, "cannot create '" + path + "'", path);
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t w = ::write(fd.get(), content.data() + done, content.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return io_error(k_wheel_io, "cannot write '" + path + "'", path);
    done += static_cast<std::size_t>(w);
  }
  if (::fchmod(fd.get(), mode) != 0) return io_error(k_wheel_io, "cannot set the mode of '" + path + "'", path);
  return ok_status();
}

std::string_view trim_wheel_field(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r' || s.front() == '\n')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Python's \w on str matches non-ASCII letters too; every byte of a multi-byte UTF-8 sequence stands for one.
bool is_wheel_word(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || static_cast<unsigned char>(c) >= 0x80;
}

/// RFC 822 headers of WHEEL, keys lowercased; the first occurrence wins as with email.message.Message.get.
std::map<std::string, std::string> parse_headers(std::string_view text) {
  std::map<std::string, std::string> out;
  std::string last_key;
  std::size_t pos = 0;
  while (pos < text.size()) {
    auto nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) break;  // end of the header block
    if (line.front() == ' ' || line.front() == '\t') {
      if (!last_key.empty() && out.count(last_key)) out[last_key] += " " + std::string(trim_wheel_field(line));
      continue;
    }
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    last_key = lower(trim_wheel_field(line.substr(0, colon)));
    out.emplace(last_key, std::string(trim_wheel_field(line.substr(colon + 1))));
  }
  return out;
}

std::string first_component(const std::string& path) { return path.substr(0, path.find('/')); }

std::pair<std::string, std::string> split_parent(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return {"", path};
  return {path.substr(0, slash), path.substr(slash + 1)};
}

std::string join(const std::string& dir, const std::string& rest) { return dir.empty() ? rest : dir + "/" + rest; }

/// `path` relative to the directory `base`, both normalized and relative to the same root ("../../../bin/x").
std::string relative_to(const std::string& path, const std::string& base) {
  auto split = [](const std::string& p) {
    std::vector<std::string> parts;
    std::size_t pos = 0;
    while (!p.empty() && pos <= p.size()) {
      const auto slash = p.find('/', pos);
      parts.push_back(p.substr(pos, slash == std::string::npos ? std::string::npos : slash - pos));
      if (slash == std::string::npos) break;
      pos = slash + 1;
    }
    return parts;
  };
  const auto p = split(path);
  const auto b = split(base);
  std::size_t common = 0;
  while (common < p.size() && common < b.size() && p[common] == b[common]) ++common;
  std::string out;
  for (std::size_t i = common; i < b.size(); ++i) out += "../";
  for (std::size_t i = common; i < p.size(); ++i) {
    out += p[i];
    if (i + 1 < p.size()) out += '/';
  }
  return out;
}

bool same_version(const std::string& a, const std::string& b) {
  auto va = Pep440Version::parse(a);
  auto vb = Pep440Version::parse(b);
  if (va && vb) return *va == *vb;
  return a == b;
}

Result<std::string> scheme_dir(const std::string& value, const char* key) {
  auto norm = normalize_member_path(value);
  if (!norm) {
    return make_error(ErrorKind::usage, "wheel.bad_scheme", std::string("install scheme '") + key + "' is '" + value + "', which leaves the image root",
                      "", "give scheme directories relative to the image root without '..'");
  }
  return norm->value_or(std::string());
}

/// Directories beneath an open root, resolved with openat2 so that no symlink leads out of the image.
class BeneathRoot {
 public:
  BeneathRoot(int root_fd, std::string root) : m_root_fd(root_fd), m_root(std::move(root)) {}

  /// Opens the directory `rel`; with `create`, missing components are made (0755); without, a missing component
  /// yields an Fd of -1. A non-directory or an escaping symlink on the way is a `wheel.target` error.
  Result<Fd> open_dir(const std::string& rel, bool create, const std::string& for_file) {
    if (rel.empty()) return Fd(::dup(m_root_fd));
    std::size_t pos = 0;
    Fd current(::dup(m_root_fd));
    while (true) {
      const auto slash = rel.find('/', pos);
      const std::string prefix = rel.substr(0, slash);
      const std::string name = rel.substr(pos, slash == std::string::npos ? std::string::npos : slash - pos);
      open_how how{};
      how.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;
      how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
      long fd = syscall(SYS_openat2, m_root_fd, prefix.c_str(), &how, sizeof how);
      if (fd < 0 && errno == ENOENT) {
        if (!create) return Fd(-1);
        if (::mkdirat(current.get(), name.c_str(), k_exec_mode) != 0 && errno != EEXIST) return io_error(k_wheel_io, "cannot create directory '" + m_root + "/" + prefix + "'", m_root + "/" + prefix);
        ::fchmodat(current.get(), name.c_str(), k_exec_mode, 0);  // the umask must not decide the image's modes
        fd = syscall(SYS_openat2, m_root_fd, prefix.c_str(), &how, sizeof how);
      }
      if (fd < 0) {
        if (errno == EXDEV || errno == ELOOP) {
          return target_error(m_root, "'" + prefix + "' is a symlink leading outside the image; cannot install '" + for_file + "'");
        }
        if (errno == ENOTDIR) return target_error(m_root, "'" + prefix + "' is not a directory; cannot install '" + for_file + "'");
        if (errno == ENOSYS) {
          return make_error(ErrorKind::environment, "wheel.kernel", "the kernel lacks openat2 (Linux >= 5.6 needed)", m_root, "");
        }
        return io_error(k_wheel_io, "cannot open directory '" + m_root + "/" + prefix + "'", m_root + "/" + prefix);
      }
      current = Fd(static_cast<int>(fd));
      if (slash == std::string::npos) return current;
      pos = slash + 1;
    }
  }

 private:
  int m_root_fd;
  std::string m_root;
};

/// Copies a staged file into `dir_fd` under `name` by way of a temporary name (the cross-device fallback).
Status copy_into(const std::string& src, int dir_fd, const std::string& name, std::uint32_t mode, const std::string& shown) {
  Fd in(::open(src.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (in.get() < 0) return io_error(k_wheel_io, "cannot open '" + src + "'", src);
  auto out = AtomicFile::create_in(dir_fd, name, static_cast<mode_t>(mode), Durability::scratch);
  if (!out) return io_error(k_wheel_io, "cannot create '" + shown + "'", shown);
  char buf[1 << 16];
  while (true) {
    const ssize_t r = ::read(in.get(), buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return io_error(k_wheel_io, "cannot read '" + src + "'", src);
    if (r == 0) break;
    if (!out->write(std::string_view(buf, static_cast<std::size_t>(r)))) return io_error(k_wheel_io, "cannot write '" + shown + "'", shown);
  }
  if (!out->commit()) return io_error(k_wheel_io, "cannot move into place '" + shown + "'", shown);
  return ok_status();
}

/// One file the installation writes.
struct Planned {
  std::string dest;     ///< relative to the image root
  std::string src;      ///< path inside the unpacked wheel; empty for generated files
  std::string content;  ///< generated files only
  bool fix_shebang = false;
  std::uint32_t mode = k_file_mode;
};

bool is_entry_point_wrapper(const std::string& dest, const std::set<std::string>& script_names) {
  // pip skips setuptools' own wrappers for an entry point EP: EP, EP.exe, EP-script.py and EP.pya.
  std::string name = split_parent(dest).second;
  const std::string low = lower(name);
  if (ends_with(low, ".exe") || ends_with(low, ".pya")) name.resize(name.size() - 4);
  else if (ends_with(low, "-script.py")) name.resize(name.size() - 10);
  return script_names.count(name) > 0;
}

}  // namespace

Result<bool> parse_wheel_file(std::string_view text, const std::string& where) {
  const auto headers = parse_headers(text);
  const auto wv = headers.find("wheel-version");
  if (wv == headers.end() || wv->second.empty()) return bad_wheel(where, "WHEEL has no Wheel-Version");
  const std::string major = wv->second.substr(0, wv->second.find('.'));
  if (major != "1") {
    return bad_wheel(where, "Wheel-Version " + wv->second + " is not supported (only 1.x)",
                     "the wheel uses a newer format than gpuenv understands; use a wheel built for Wheel-Version 1");
  }
  const auto purelib_header = headers.find("root-is-purelib");
  return purelib_header != headers.end() && lower(purelib_header->second) == "true";
}

Result<WheelFilename> split_wheel_filename(std::string_view filename) {
  const auto slash = filename.rfind('/');
  const std::string_view base = slash == std::string_view::npos ? filename : filename.substr(slash + 1);
  const std::string shown(base);
  if (!ends_with(base, ".whl")) return bad_wheel(shown, "'" + shown + "' is not a wheel file name (no .whl suffix)");
  const std::string_view stem = base.substr(0, base.size() - 4);
  std::vector<std::string> parts;
  std::size_t pos = 0;
  while (true) {
    const auto dash = stem.find('-', pos);
    parts.emplace_back(stem.substr(pos, dash == std::string_view::npos ? std::string_view::npos : dash - pos));
    if (dash == std::string_view::npos) break;
    pos = dash + 1;
  }
  const bool has_build = parts.size() == 6;
  if ((parts.size() != 5 && !has_build) || std::any_of(parts.begin(), parts.end(), [](const std::string& p) { return p.empty(); }) ||
      (has_build && !(parts[2][0] >= '0' && parts[2][0] <= '9'))) {
    return bad_wheel(shown, "'" + shown + "' is not a wheel file name of the form NAME-VERSION(-BUILD)?-PYTHON-ABI-PLATFORM.whl",
                     "keep the file name the wheel was published under; installers read the name and version from it");
  }
  WheelFilename out;
  out.name = parts[0];
  out.version = parts[1];
  if (has_build) out.build = parts[2];
  out.python_tag = parts[parts.size() - 3];
  out.abi_tag = parts[parts.size() - 2];
  out.platform_tag = parts[parts.size() - 1];
  return out;
}

Result<std::vector<RecordRow>> parse_record(std::string_view text, const std::string& origin) {
  std::vector<RecordRow> rows;
  std::size_t pos = 0;
  int line = 1;
  while (pos < text.size()) {
    const int row_line = line;
    std::vector<std::string> fields(1);
    bool quoted_field = false;
    while (pos < text.size()) {
      const char c = text[pos];
      if (c == '"' && fields.back().empty() && !quoted_field) {
        // A quoted field: up to the closing quote, "" standing for one quote; newlines may appear inside.
        quoted_field = true;
        ++pos;
        bool closed = false;
        while (pos < text.size()) {
          if (text[pos] == '"') {
            if (pos + 1 < text.size() && text[pos + 1] == '"') {
              fields.back() += '"';
              pos += 2;
              continue;
            }
            ++pos;
            closed = true;
            break;
          }
          if (text[pos] == '\n') ++line;
          fields.back() += text[pos++];
        }
        if (!closed) return bad_wheel(origin + ":" + std::to_string(row_line), "RECORD has an unterminated quoted field");
        continue;
      }
      if (c == ',') {
        fields.emplace_back();
        quoted_field = false;
        ++pos;
        continue;
      }
      if (c == '\r' && pos + 1 < text.size() && text[pos + 1] == '\n') {
        ++pos;
        continue;
      }
      if (c == '\n') {
        ++pos;
        ++line;
        break;
      }
      fields.back() += c;
      ++pos;
    }
    if (fields.size() == 1 && fields[0].empty() && !quoted_field) continue;  // blank line
    if (fields.size() != 3) {
      return bad_wheel(origin + ":" + std::to_string(row_line),
                       "RECORD row has " + std::to_string(fields.size()) + " fields, expected 3 (path,hash,size)");
    }
    rows.push_back({std::move(fields[0]), std::move(fields[1]), std::move(fields[2])});
  }
  return rows;
}

std::string format_record(const std::vector<RecordRow>& rows) {
  auto field = [](const std::string& f) {
    if (f.find_first_of(",\"\r\n") == std::string::npos) return f;
    std::string out = "\"";
    for (char c : f) {
      if (c == '"') out += '"';
      out += c;
    }
    return out + "\"";
  };
  std::string out;
  for (const auto& r : rows) out += field(r.path) + "," + field(r.hash) + "," + field(r.size) + "\n";
  return out;
}

std::string record_hash(std::string_view bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  EVP_Digest(bytes.data(), bytes.size(), md, &n, EVP_sha256(), nullptr);
  return "sha256=" + b64url_nopad(md, n);
}

Result<std::vector<ScriptEntryPoint>> parse_script_entry_points(std::string_view text, const std::string& origin) {
  std::vector<ScriptEntryPoint> out;
  std::set<std::string> seen;
  std::string section;
  std::size_t pos = 0;
  int line_no = 0;
  while (pos < text.size()) {
    auto nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    const std::string_view line = trim_wheel_field(text.substr(pos, nl - pos));
    pos = nl + 1;
    ++line_no;
    const std::string where = origin + ":" + std::to_string(line_no);
    if (line.empty() || line.front() == '#' || line.front() == ';') continue;
    if (line.front() == '[') {
      if (line.back() != ']') return bad_wheel(where, "entry_points.txt has a malformed section header '" + std::string(line) + "'");
      section = std::string(trim_wheel_field(line.substr(1, line.size() - 2)));
      continue;
    }
    if (section != "console_scripts" && section != "gui_scripts") continue;
    const auto eq = line.find('=');
    if (eq == std::string_view::npos) return bad_wheel(where, "entry point '" + std::string(line) + "' has no '='");
    ScriptEntryPoint ep;
    ep.gui = section == "gui_scripts";
    ep.name = std::string(trim_wheel_field(line.substr(0, eq)));
    const bool name_ok = !ep.name.empty() && ep.name != "." && ep.name != ".." &&
                         std::all_of(ep.name.begin(), ep.name.end(), [](char c) { return is_wheel_word(c) || c == '-' || c == '.' || c == '+'; });
    if (!name_ok) {
      return bad_wheel(where, "script name '" + ep.name + "' is not a plain file name (letters, digits, '_', '.', '+', '-')");
    }
    std::string_view value = trim_wheel_field(line.substr(eq + 1));
    // Extras ("[extra1,extra2]") do not change the wrapper.
    if (const auto bracket = value.find('['); bracket != std::string_view::npos) {
      if (value.back() != ']') return bad_wheel(where, "entry point '" + std::string(line) + "' has malformed extras");
      value = trim_wheel_field(value.substr(0, bracket));
    }
    const auto colon = value.find(':');
    if (colon == std::string_view::npos) {
      return bad_wheel(where, "entry point '" + ep.name + "' names '" + std::string(value) + "' without a callable (module:function)",
                       "pip refuses such entry points too; the project's packaging metadata is broken");
    }
    ep.module = std::string(trim_wheel_field(value.substr(0, colon)));
    ep.attr = std::string(trim_wheel_field(value.substr(colon + 1)));
    auto dotted_ok = [](const std::string& s) {
      if (s.empty() || s.front() == '.' || s.back() == '.' || s.find("..") != std::string::npos) return false;
      return std::all_of(s.begin(), s.end(), [](char c) { return is_wheel_word(c) || c == '.'; });
    };
    if (!dotted_ok(ep.module) || !dotted_ok(ep.attr)) {
      return bad_wheel(where, "entry point '" + ep.name + "' has a malformed object reference '" + std::string(value) + "'");
    }
    if (!seen.insert(ep.name).second) return bad_wheel(where, "script '" + ep.name + "' is defined twice in entry_points.txt");
    out.push_back(std::move(ep));
  }
  return out;
}

std::string script_shebang(const std::string& interpreter) {
  // distlib: enquote when there is a space, then the simple form unless a space is present or it runs past
  // 127 bytes (Linux's historical shebang limit), in which case /bin/sh re-executes the interpreter.
  const bool space = interpreter.find(' ') != std::string::npos;
  const std::string exe = space ? "\"" + interpreter + "\"" : interpreter;
  if (!space && exe.size() + 3 <= 127) return "#!" + exe + "\n";
  return "#!/bin/sh\n'''exec' " + exe + " \"$0\" \"$@\"\n' '''";
}

std::string script_wrapper(const ScriptEntryPoint& entry, const std::string& interpreter) {
  const std::string import_name = entry.attr.substr(0, entry.attr.find('.'));
  return script_shebang(interpreter) +
         "# -*- coding: utf-8 -*-\n"
         "import re\n"
         "import sys\n"
         "from " + entry.module + " import " + import_name + "\n"
         "if __name__ == '__main__':\n"
         "    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n"
         "    sys.exit(" + entry.attr + "())\n";
}

namespace {

/// Scheme key ("purelib", "platlib", "scripts", "headers", "data") -> directory relative to the image root.
using SchemeDirs = std::map<std::string, std::string>;
/// Path inside the unpacked wheel -> its archived mode.
using ArchivedFiles = std::map<std::string, std::uint32_t>;
/// Path inside the unpacked wheel -> its digests, taken while checking RECORD.
using Digests = std::map<std::string, FileDigest>;

/// The caller's scheme directories, checked before anything touches the disk; fails on one that leaves the
/// image root or on an interpreter that is not an absolute path.
Result<SchemeDirs> check_scheme(const InstallScheme& scheme) {
  SchemeDirs dirs;
  for (const auto& [key, value] : std::initializer_list<std::pair<const char*, const std::string*>>{
           {"purelib", &scheme.purelib}, {"platlib", &scheme.platlib}, {"scripts", &scheme.scripts},
           {"headers", &scheme.headers}, {"data", &scheme.data}}) {
    auto d = scheme_dir(*value, key);
    if (!d) return std::move(d).error();
    dirs[key] = std::move(*d);
  }
  if (scheme.interpreter.empty() || scheme.interpreter.front() != '/' ||
      scheme.interpreter.find_first_of(std::string("\n\r\0", 3)) != std::string::npos) {
    return make_error(ErrorKind::usage, "wheel.bad_scheme", "script interpreter '" + scheme.interpreter + "' is not an absolute path", "",
                      "give the interpreter's absolute path inside the image, e.g. /usr/bin/python3");
  }
  return dirs;
}

/// The image directory, absolute and normalized, and open.
struct ImageRoot {
  fs::path path;
  Fd fd;
};

Result<ImageRoot> open_image_root(const std::string& image_root) {
  std::error_code abs_ec;
  fs::path root_path = fs::absolute(image_root, abs_ec).lexically_normal();
  if (abs_ec || image_root.empty()) return make_error(ErrorKind::usage, "wheel.bad_scheme", "image root '" + image_root + "' is not a usable path", "", "");
  if (!root_path.has_filename() && root_path.has_parent_path() && root_path != root_path.root_path()) root_path = root_path.parent_path();
  Fd root_fd(::open(root_path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (root_fd.get() < 0) return io_error(k_wheel_io, "cannot open the image directory '" + image_root + "'", image_root);
  return ImageRoot{std::move(root_path), std::move(root_fd)};
}

/// Makes the staging directory next to the image, so that the final moves are renames on one file system.
Result<std::string> make_staging_dir(const fs::path& root_path) {
  fs::path parent = root_path.parent_path();
  if (parent.empty()) parent = ".";
  std::string tmpl = (parent / ".gpuenv-wheel-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) return io_error(k_wheel_io, "cannot create a staging directory in '" + parent.string() + "'", parent.string());
  return tmpl;
}

/// The archived files and their modes; fails on anything but regular files and directories (the wheel format
/// has no symlinks, hard links or devices) and on a member archived twice.
Result<ArchivedFiles> regular_files(const std::vector<ExtractedEntry>& entries, const std::string& origin) {
  ArchivedFiles files;
  for (const auto& e : entries) {
    if (e.type == ExtractedEntry::Type::directory) continue;
    if (e.type != ExtractedEntry::Type::file) return bad_wheel(origin, "member '" + e.path + "' is not a regular file (symlink or link)");
    if (!files.emplace(e.path, e.mode).second) return bad_wheel(origin, "member '" + e.path + "' appears twice in the archive");
  }
  return files;
}

/// The wheel's .dist-info directory and the project and version it names.
struct DistInfo {
  std::string dir;       ///< NAME-VERSION.dist-info
  std::string name;
  std::string version;
  std::string data_dir;  ///< NAME-VERSION.data, or the one .data directory the wheel has
};

/// The .data directory `found` (at most one), which must belong to `dist`; pip takes any, gpuenv wants one of
/// the same project and version.
Status check_data_dir(const std::set<std::string>& found, DistInfo& dist, const std::string& origin) {
  if (found.size() > 1) return bad_wheel(origin, "the wheel has several .data directories ('" + *found.begin() + "', ...)");
  if (found.size() == 1) {
    const std::string& d = *found.begin();
    const std::string d_stem = d.substr(0, d.size() - std::string_view(".data").size());
    const auto d_dash = d_stem.find('-');
    if (d_dash == std::string::npos || canonicalize_name(d_stem.substr(0, d_dash)) != canonicalize_name(dist.name) ||
        !same_version(d_stem.substr(d_dash + 1), dist.version)) {
      return bad_wheel(origin, "'" + d + "' does not belong to '" + dist.dir + "'");
    }
    dist.data_dir = d;
  }
  return ok_status();
}

/// The one .dist-info directory (and .data directory) of the wheel, checked against its file name.
Result<DistInfo> find_dist_info(const ArchivedFiles& files, const WheelFilename& fname, const std::string& origin) {
  std::set<std::string> dist_infos, data_dirs;
  for (const auto& [path, mode] : files) {
    if (path.find('/') == std::string::npos) continue;
    const std::string top = first_component(path);
    if (ends_with(top, ".dist-info")) dist_infos.insert(top);
    if (ends_with(top, ".data")) data_dirs.insert(top);
  }
  if (dist_infos.size() != 1) {
    std::string found;
    for (const auto& d : dist_infos) found += (found.empty() ? "" : ", ") + d;
    return bad_wheel(origin, dist_infos.empty() ? std::string("the wheel has no .dist-info directory")
                                                : "the wheel has several .dist-info directories: " + found);
  }
  const std::string dist_info = *dist_infos.begin();
  const std::string stem = dist_info.substr(0, dist_info.size() - std::string_view(".dist-info").size());
  const auto dash = stem.find('-');
  if (dash == std::string::npos) return bad_wheel(origin, "'" + dist_info + "' is not named NAME-VERSION.dist-info");
  DistInfo dist{dist_info, stem.substr(0, dash), stem.substr(dash + 1), stem + ".data"};
  if (canonicalize_name(dist.name) != canonicalize_name(fname.name) || !same_version(dist.version, fname.version)) {
    return bad_wheel(origin, "'" + dist_info + "' does not belong to the wheel's file name (" + fname.name + " " + fname.version + ")",
                     "the file was renamed or the wheel was built wrongly; installers refuse it");
  }
  if (auto st = check_data_dir(data_dirs, dist, origin); !st) return std::move(st).error();
  return dist;
}

/// Reads WHEEL: whether the root goes to purelib; fails unless it is there with Wheel-Version 1.x.
Result<bool> root_is_purelib(const ArchivedFiles& files, const std::string& unpacked, const std::string& dist_info,
                             const std::string& origin) {
  const std::string wheel_path = dist_info + "/WHEEL";
  if (!files.count(wheel_path)) return bad_wheel(origin, "the wheel has no " + wheel_path);
  auto wheel_text = read_small_file(unpacked + "/" + wheel_path, k_max_metadata_bytes);
  if (!wheel_text) return std::move(wheel_text).error();
  return parse_wheel_file(*wheel_text, origin + " (" + wheel_path + ")");
}

/// RECORD's file rows by normalized path (directory rows are ignored, as pip does); fails on a path that
/// leaves the root and on a path listed twice.
Result<std::map<std::string, RecordRow>> listed_files(std::string_view record_text, const std::string& record_origin) {
  auto rows = parse_record(record_text, record_origin);
  if (!rows) return std::move(rows).error();
  std::map<std::string, RecordRow> listed;
  for (const auto& row : *rows) {
    if (!row.path.empty() && row.path.back() == '/') continue;
    auto norm = normalize_member_path(row.path);
    if (!norm || !*norm) return bad_wheel(record_origin, "RECORD lists the path '" + row.path + "', which is absolute, empty or has '..'");
    if (!listed.emplace(**norm, row).second) return bad_wheel(record_origin, "RECORD lists '" + **norm + "' twice");
  }
  return listed;
}

/// "N problems: a; b; ..." with the first few of `issues`.
std::string issues_message(const std::vector<std::string>& issues) {
  std::string message = std::to_string(issues.size()) + (issues.size() == 1 ? " problem: " : " problems: ");
  for (std::size_t i = 0; i < issues.size() && i < k_max_issues_shown; ++i) message += (i ? "; " : "") + issues[i];
  if (issues.size() > k_max_issues_shown) message += "; ...";
  return message;
}

/// Digests every archived file but the `unhashed` ones and compares it with its RECORD row; every listed file
/// must be archived. Mismatches are collected into one `wheel.record_mismatch`; an unsupported hash algorithm
/// or a read failure stops at once. With ACCEPTED, a hash or size that differs is not an issue: its path goes there.
Result<Digests> verify_record(const ArchivedFiles& files, const std::map<std::string, RecordRow>& listed,
                              const std::set<std::string>& unhashed, const std::string& unpacked, const std::string& record_origin,
                              std::vector<std::string>* accepted) {
  std::vector<std::string> issues;
  Digests digests;
  for (const auto& [path, mode] : files) {
    const auto it = listed.find(path);
    if (unhashed.count(path)) continue;
    if (it == listed.end()) {
      issues.push_back("'" + path + "' is in the archive but not in RECORD");
      continue;
    }
    const RecordRow& row = it->second;
    const auto eq = row.hash.find('=');
    if (row.hash.empty() || eq == std::string::npos) {
      issues.push_back("'" + path + "' has no hash in RECORD");
      continue;
    }
    const std::string algo = row.hash.substr(0, eq);
    const EVP_MD* md = record_digest(algo);
    if (!md) return bad_wheel(record_origin, "RECORD uses the hash algorithm '" + algo + "' for '" + path + "' (sha256, sha384 or sha512 expected)");
    auto d = digest_file(unpacked + "/" + path, md);
    if (!d) return std::move(d).error();
    std::string expected = row.hash.substr(eq + 1);
    while (!expected.empty() && expected.back() == '=') expected.pop_back();
    if (accepted && (expected != d->record_b64 || (!row.size.empty() && row.size != std::to_string(d->size)))) {
      accepted->push_back(path);
    } else if (expected != d->record_b64) {
      issues.push_back("'" + path + "' has " + algo + "=" + d->record_b64 + " but RECORD says " + row.hash);
    } else if (!row.size.empty() && row.size != std::to_string(d->size)) {
      issues.push_back("'" + path + "' is " + std::to_string(d->size) + " bytes but RECORD says " + row.size);
    }
    digests.emplace(path, std::move(*d));
  }
  for (const auto& [path, row] : listed) {
    if (!files.count(path)) issues.push_back("'" + path + "' is listed in RECORD but missing from the archive");
  }
  if (!issues.empty()) return record_mismatch(record_origin, issues_message(issues));
  return digests;
}

/// Reads RECORD at `record_path` and checks the archive against it (see verify_record).
Result<Digests> check_record(const ArchivedFiles& files, const std::string& unpacked, const std::string& record_path,
                             const std::set<std::string>& unhashed, const std::string& origin, std::vector<std::string>* accepted) {
  if (!files.count(record_path)) return bad_wheel(origin, "the wheel has no " + record_path);
  auto record_text = read_small_file(unpacked + "/" + record_path, k_max_record_bytes);
  if (!record_text) return std::move(record_text).error();
  const std::string record_origin = origin + " (" + record_path + ")";
  auto listed = listed_files(*record_text, record_origin);
  if (!listed) return std::move(listed).error();
  return verify_record(files, *listed, unhashed, unpacked, record_origin, accepted);
}

/// The scripts of entry_points.txt, which decide the wrappers and which shipped scripts they replace; none
/// when the wheel has no such file.
Result<std::vector<ScriptEntryPoint>> read_entry_points(const ArchivedFiles& files, const std::string& unpacked,
                                                        const std::string& dist_info, const std::string& origin) {
  std::vector<ScriptEntryPoint> scripts;
  if (const std::string ep_path = dist_info + "/entry_points.txt"; files.count(ep_path)) {
    auto text = read_small_file(unpacked + "/" + ep_path, k_max_metadata_bytes);
    if (!text) return std::move(text).error();
    auto parsed = parse_script_entry_points(*text, origin + " (" + ep_path + ")");
    if (!parsed) return std::move(parsed).error();
    scripts = std::move(*parsed);
  }
  return scripts;
}

/// Where the archived file `path` goes; nullopt for a shipped script that a generated wrapper replaces. Fails
/// on a file directly in the .data directory or under an unknown scheme key.
Result<std::optional<Planned>> plan_member(const std::string& path, std::uint32_t mode, const SchemeDirs& dirs,
                                           const std::string& data_dir, const std::string& lib_dir,
                                           const std::set<std::string>& script_names, const std::string& origin) {
  Planned p;
  p.src = path;
  p.mode = (mode & 0111) ? k_exec_mode : k_file_mode;
  if (first_component(path) != data_dir) {
    p.dest = join(lib_dir, path);
    return std::optional<Planned>(std::move(p));
  }
  const std::string rest = path.substr(data_dir.size() + 1);
  const auto slash = rest.find('/');
  if (slash == std::string::npos) {
    return bad_wheel(origin, "'" + path + "' lies directly in " + data_dir + "/; files there belong in a scheme subdirectory");
  }
  const std::string key = rest.substr(0, slash);
  const auto dir = dirs.find(key);
  if (dir == dirs.end()) {
    return bad_wheel(origin, "'" + path + "' uses the unknown scheme key '" + key + "' (data, headers, platlib, purelib, scripts)");
  }
  p.dest = join(dir->second, rest.substr(slash + 1));
  if (key == "scripts") {
    if (is_entry_point_wrapper(p.dest, script_names)) return std::optional<Planned>();
    p.fix_shebang = true;
    p.mode = k_exec_mode;
  }
  return std::optional<Planned>(std::move(p));
}

/// Every file the installation writes, apart from the new RECORD: the archived files but the `unhashed` ones
/// (RECORD is rewritten; signatures of the old RECORD would be stale), the script wrappers, INSTALLER and,
/// when `requested`, REQUESTED.
Result<std::vector<Planned>> plan_files(const ArchivedFiles& files, const std::set<std::string>& unhashed, const SchemeDirs& dirs,
                                        const DistInfo& dist, const std::string& lib_dir, const std::vector<ScriptEntryPoint>& scripts,
                                        const std::string& interpreter, bool requested, const std::string& origin) {
  std::set<std::string> script_names;
  for (const auto& s : scripts) script_names.insert(s.name);
  std::vector<Planned> plan;
  const std::string installer_path = join(lib_dir, dist.dir + "/INSTALLER");
  const std::string requested_path = join(lib_dir, dist.dir + "/REQUESTED");
  for (const auto& [path, mode] : files) {
    if (unhashed.count(path)) continue;
    auto p = plan_member(path, mode, dirs, dist.data_dir, lib_dir, script_names, origin);
    if (!p) return std::move(p).error();
    if (!*p) continue;
    // INSTALLER and REQUESTED are ours to write.
    if ((*p)->dest == installer_path || (*p)->dest == requested_path) continue;
    plan.push_back(std::move(**p));
  }
  for (const auto& s : scripts) {
    Planned p;
    p.dest = join(dirs.at("scripts"), s.name);
    p.content = script_wrapper(s, interpreter);
    p.mode = k_exec_mode;
    plan.push_back(std::move(p));
  }
  plan.push_back(Planned{installer_path, "", "gpuenv\n", false, k_file_mode});
  if (requested) plan.push_back(Planned{requested_path, "", "", false, k_file_mode});
  return plan;
}

/// Fails when two planned files, or one and the new RECORD, install to the same path.
Status check_destinations(const std::vector<Planned>& plan, const std::string& new_record, const std::string& origin) {
  std::map<std::string, std::string> owner;  // dest -> what installs it
  for (const auto& p : plan) {
    const std::string what = p.src.empty() ? "a generated file" : "'" + p.src + "'";
    auto [it, fresh] = owner.emplace(p.dest, what);
    if (!fresh || p.dest == new_record) {
      return bad_wheel(origin, "both " + it->second + " and " + (fresh ? std::string("the new RECORD") : what) + " install to '" + p.dest + "'");
    }
  }
  return ok_status();
}

/// The bytes to write for `p`: its generated content, or a script whose "#!python" shebang now names the
/// interpreter; nullopt when the unpacked file is moved as it is.
Result<std::optional<std::string>> staged_content(const Planned& p, const std::string& unpacked, const std::string& interpreter) {
  if (p.src.empty()) return std::optional<std::string>(p.content);
  if (!p.fix_shebang) return std::optional<std::string>();
  auto text = read_small_file(unpacked + "/" + p.src, k_max_record_bytes);
  if (!text) return std::move(text).error();
  // pip's fix_script: a first line starting with "#!python" becomes "#!<interpreter>" and a newline.
  if (text->rfind("#!python", 0) != 0) return std::optional<std::string>();
  const auto nl = text->find('\n');
  return std::optional<std::string>("#!" + interpreter + "\n" + (nl == std::string::npos ? std::string() : text->substr(nl + 1)));
}

/// Lays the planned files out in the staging tree `tree`; returns their rows for the new RECORD.
Result<std::vector<RecordRow>> stage_files(const std::vector<Planned>& plan, const std::string& tree, const std::string& unpacked,
                                           const std::string& lib_dir, const Digests& digests, const std::string& interpreter) {
  std::vector<RecordRow> record_rows;
  for (const auto& p : plan) {
    const std::string staged = tree + "/" + p.dest;
    std::error_code ec;
    fs::create_directories(fs::path(staged).parent_path(), ec);
    if (ec) {
      errno = ec.value();
      return io_error(k_wheel_io, "cannot create the directory for '" + staged + "'", staged);
    }
    auto content = staged_content(p, unpacked, interpreter);
    if (!content) return std::move(content).error();
    RecordRow row;
    row.path = relative_to(p.dest, lib_dir);
    if (*content) {
      if (auto st = write_file(staged, **content, p.mode); !st) return std::move(st).error();
      row.hash = record_hash(**content);
      row.size = std::to_string((*content)->size());
    } else {
      const std::string src = unpacked + "/" + p.src;
      if (::rename(src.c_str(), staged.c_str()) != 0) return io_error(k_wheel_io, "cannot stage '" + staged + "'", staged);
      if (::chmod(staged.c_str(), p.mode) != 0) return io_error(k_wheel_io, "cannot set the mode of '" + staged + "'", staged);
      const FileDigest& d = digests.at(p.src);
      row.hash = "sha256=" + d.sha256_b64;
      row.size = std::to_string(d.size);
    }
    record_rows.push_back(std::move(row));
  }
  return record_rows;
}

/// Writes the new RECORD into the staging tree: `rows` and a row for itself, sorted by path.
Status stage_record(std::vector<RecordRow>& rows, const std::string& tree, const std::string& new_record, const std::string& lib_dir) {
  rows.push_back(RecordRow{relative_to(new_record, lib_dir), "", ""});
  std::sort(rows.begin(), rows.end(), [](const RecordRow& a, const RecordRow& b) { return a.path < b.path; });
  const std::string staged = tree + "/" + new_record;
  std::error_code ec;
  fs::create_directories(fs::path(staged).parent_path(), ec);
  return write_file(staged, format_record(rows), k_file_mode);
}

/// Checks the whole image first, so that a conflict stops the installation before anything moves: fails on a
/// directory where a file goes, or on a path leading out of the image.
Status check_targets(BeneathRoot& beneath, const std::vector<Planned>& plan, const std::string& root) {
  for (const auto& p : plan) {
    const auto [dir, name] = split_parent(p.dest);
    auto d = beneath.open_dir(dir, false, p.dest);
    if (!d) return std::move(d).error();
    if (d->get() < 0) continue;
    struct stat st {};
    if (::fstatat(d->get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
      return target_error(root, "a directory stands where '" + p.dest + "' goes");
    }
  }
  return ok_status();
}

/// Moves the staged files into the image (copying across file systems); returns their paths in plan order.
Result<std::vector<std::string>> move_into_image(BeneathRoot& beneath, const std::vector<Planned>& plan, const std::string& tree,
                                                 const std::string& root) {
  std::vector<std::string> moved;
  for (const auto& p : plan) {
    const auto [dir, name] = split_parent(p.dest);
    auto d = beneath.open_dir(dir, true, p.dest);
    if (!d) return std::move(d).error();
    const std::string staged = tree + "/" + p.dest;
    if (::renameat(AT_FDCWD, staged.c_str(), d->get(), name.c_str()) != 0) {
      if (errno != EXDEV) return io_error(k_wheel_io, "cannot move into place '" + root + "/" + p.dest + "'", root + "/" + p.dest);
      if (auto st = copy_into(staged, d->get(), name, p.mode, root + "/" + p.dest); !st) return std::move(st).error();
    }
    moved.push_back(p.dest);
  }
  return moved;
}

/// install_wheel without its last-resort catch.
Result<InstalledWheel> install_unguarded(std::string_view wheel_bytes, const std::string& wheel_filename, const std::string& image_root,
                                         const InstallScheme& scheme, const WheelInstallOptions& options) {
  auto fname = split_wheel_filename(wheel_filename);
  if (!fname) return std::move(fname).error();
  const std::string& origin = wheel_filename;
  auto dirs = check_scheme(scheme);
  if (!dirs) return std::move(dirs).error();
  auto root = open_image_root(image_root);
  if (!root) return std::move(root).error();

  auto staging_path = make_staging_dir(root->path);
  if (!staging_path) return std::move(staging_path).error();
  const StagingDir staging(std::move(*staging_path));
  const std::string unpacked = staging.path() + "/wheel";
  const std::string tree = staging.path() + "/tree";
  if (::mkdir(unpacked.c_str(), 0700) != 0 || ::mkdir(tree.c_str(), 0700) != 0) return io_error(k_wheel_io, "cannot populate '" + staging.path() + "'", staging.path());

  auto entries = extract_archive(wheel_bytes, origin, unpacked, ExtractOptions{});
  if (!entries) return std::move(std::move(entries).error().while_("unpacking wheel " + origin));
  auto files = regular_files(*entries, origin);
  if (!files) return std::move(files).error();
  auto dist = find_dist_info(*files, *fname, origin);
  if (!dist) return std::move(dist).error();
  auto purelib = root_is_purelib(*files, unpacked, dist->dir, origin);
  if (!purelib) return std::move(purelib).error();
  const std::string lib_dir = dirs->at(*purelib ? "purelib" : "platlib");

  // RECORD: every archived file listed with a matching hash and size, every listed file archived.
  const std::string record_path = dist->dir + "/RECORD";
  const std::set<std::string> unhashed = {record_path, record_path + ".jws", record_path + ".p7s"};
  std::vector<std::string> accepted;
  auto digests = check_record(*files, unpacked, record_path, unhashed, origin, options.accept_record_mismatch ? &accepted : nullptr);
  if (!digests) return std::move(digests).error();
  auto scripts = read_entry_points(*files, unpacked, dist->dir, origin);
  if (!scripts) return std::move(scripts).error();

  auto plan = plan_files(*files, unhashed, *dirs, *dist, lib_dir, *scripts, scheme.interpreter, options.requested, origin);
  if (!plan) return std::move(plan).error();
  const std::string new_record = join(lib_dir, record_path);
  if (auto st = check_destinations(*plan, new_record, origin); !st) return std::move(st).error();
  auto record_rows = stage_files(*plan, tree, unpacked, lib_dir, *digests, scheme.interpreter);
  if (!record_rows) return std::move(record_rows).error();
  if (auto st = stage_record(*record_rows, tree, new_record, lib_dir); !st) return std::move(st).error();
  plan->push_back(Planned{new_record, "", "", false, k_file_mode});
  std::sort(plan->begin(), plan->end(), [](const Planned& a, const Planned& b) { return a.dest < b.dest; });

  const std::string root_shown = root->path.string();
  BeneathRoot beneath(root->fd.get(), root_shown);
  if (auto st = check_targets(beneath, *plan, root_shown); !st) return std::move(st).error();
  auto moved = move_into_image(beneath, *plan, tree, root_shown);
  if (!moved) return std::move(moved).error();
  InstalledWheel out;
  out.name = dist->name;
  out.version = dist->version;
  out.dist_info = join(lib_dir, dist->dir);
  out.files = std::move(*moved);
  std::sort(accepted.begin(), accepted.end());
  out.record_mismatches = std::move(accepted);
  return out;
}

}  // namespace

Result<InstalledWheel> install_wheel(std::string_view wheel_bytes, const std::string& wheel_filename, const std::string& image_root,
                                     const InstallScheme& scheme, const WheelInstallOptions& options) {
  try {
    return install_unguarded(wheel_bytes, wheel_filename, image_root, scheme, options);
  } catch (const std::exception& e) {
    return make_error(ErrorKind::internal, "wheel.internal", std::string("unexpected failure: ") + e.what(), wheel_filename,
                      "this is a bug in gpuenv; please report it");
  }
}

}  // namespace gpuenv::packages
