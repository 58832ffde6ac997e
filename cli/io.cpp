#include "cli/io.hpp"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace gpuenv::cli {
namespace {

Error io_error(const std::string& path, const std::string& what) {
  return make_error(ErrorKind::environment, "io.error", what + ": " + std::strerror(errno), path,
                    "check the path, its permissions and free disk space");
}

}  // namespace

Result<std::string> read_file_limited(const std::string& path, std::size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      return make_error(ErrorKind::usage, "io.not_found", "no such file", path, "check the path (relative paths start in the current directory)");
    }
    return io_error(path, "cannot open");
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    ::close(fd);
    return io_error(path, "cannot stat");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error(ErrorKind::usage, "io.not_a_file", "not a regular file", path, "give the path of a YAML file");
  }
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return make_error(ErrorKind::spec, "yaml.too_large",
                      "file is " + std::to_string(st.st_size) + " bytes; the limit is " + std::to_string(max_bytes), path,
                      "is this the right file? a spec is a few hundred bytes");
  }
  std::string text;
  char buf[65536];
  while (true) {
    const ssize_t got = ::read(fd, buf, sizeof buf);
    if (got < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      return io_error(path, "cannot read");
    }
    if (got == 0) break;
    text.append(buf, static_cast<std::size_t>(got));
    if (text.size() > max_bytes) {  // the file grew while being read
      ::close(fd);
      return make_error(ErrorKind::spec, "yaml.too_large", "file is larger than " + std::to_string(max_bytes) + " bytes", path, "");
    }
  }
  ::close(fd);
  return text;
}

Status write_file_atomic(const std::string& path, const std::string& text) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string tmp = (dir / ("." + target.filename().string() + ".tmp." + std::to_string(::getpid()))).string();
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return io_error(path, "cannot create a temporary file in " + dir.string());
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t w = ::write(fd, text.data() + done, text.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      Error e = io_error(path, "cannot write");
      ::close(fd);
      ::unlink(tmp.c_str());
      return e;
    }
    done += static_cast<std::size_t>(w);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    Error e = io_error(path, "cannot flush");
    ::unlink(tmp.c_str());
    return e;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Error e = io_error(path, "cannot rename the temporary file into place");
    ::unlink(tmp.c_str());
    return e;
  }
  if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return ok_status();
}

std::string sha256_hex(std::string_view bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(bytes.data(), bytes.size(), md, &len, EVP_sha256(), nullptr);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) {
    out += hex[md[i] >> 4];
    out += hex[md[i] & 15];
  }
  return out;
}

std::string catalog_digest(const std::vector<resolver::CatalogFile>& files) {
  std::string input;
  for (const auto& f : files) {
    input += std::filesystem::path(f.path).filename().string();
    input += '\0';
    input += f.text;
    input += '\0';
  }
  return sha256_hex(input);
}

}  // namespace gpuenv::cli
