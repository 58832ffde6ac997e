#pragma once
// The real docker-registry on 127.0.0.1 for the duration of a test: plain HTTP, htpasswd basic auth (a bcrypt
// entry), TLS with an openssl-made test CA, or TLS and basic auth together. Skips, saying why, where
// docker-registry, openssl or a bcrypt maker is missing. Also the small process and file helpers it needs.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace gpuenv::testing {

/// A fresh directory under the system temporary directory, removed with everything in it when this goes out of scope.
/// (Not fakes/temp_dir.hpp's TempDir: one test binary links both, and one name with two definitions is an ODR
/// violation that AddressSanitizer saw as a leak.)
class RegistryTempDir {
 public:
  RegistryTempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "gpuenv-registry-XXXXXX").string();
    m_path = ::mkdtemp(tmpl.data()) ? tmpl : std::string();
  }
  ~RegistryTempDir() {
    std::error_code ec;
    if (!m_path.empty()) std::filesystem::remove_all(m_path, ec);
  }
  RegistryTempDir(const RegistryTempDir&) = delete;
  RegistryTempDir& operator=(const RegistryTempDir&) = delete;
  /// The directory; empty when it could not be made.
  [[nodiscard]] const std::string& path() const { return m_path; }
  /// The path of `name` inside the directory.
  [[nodiscard]] std::string operator/(const std::string& name) const { return m_path + "/" + name; }

 private:
  std::string m_path;
};

/// Writes `text` to `path`, replacing it; failures show up when the file is read.
inline void write_file(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

/// The bytes of `path`; empty when it cannot be read.
inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// Runs a shell command; its stdout, or nullopt when it cannot start or exits non-zero.
inline std::optional<std::string> run(const std::string& cmd) {
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return std::nullopt;
  std::string out;
  char buf[4096];
  while (const std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  if (::pclose(p) != 0) return std::nullopt;
  return out;
}

/// True when `tool` is on PATH.
inline bool have(const std::string& tool) { return run("command -v " + tool + " >/dev/null 2>&1").has_value(); }

/// A TCP port on 127.0.0.1 that was free a moment ago; 0 when none could be found.
inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

/// True when something accepts connections on 127.0.0.1:`port`.
inline bool port_open(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

/// A child process killed when this goes out of scope (or when the test process dies).
class Child {
 public:
  Child() = default;
  ~Child() { stop(); }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  /// Starts argv with stdout (when `out_pipe`) readable by the caller, stderr to `log`; a failed start leaves nothing running.
  void start(const std::vector<std::string>& argv, const std::string& log, int* out_pipe = nullptr) {
    int fds[2] = {-1, -1};
    if (out_pipe && ::pipe(fds) != 0) return;
    m_pid = ::fork();
    if (m_pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // a test that dies must not leave the server holding ctest's pipes
      const int lfd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (lfd >= 0) ::dup2(lfd, 2);
      if (out_pipe) {
        ::dup2(fds[1], 1);
        ::close(fds[0]);
      } else if (lfd >= 0) {
        ::dup2(lfd, 1);
      }
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execvp(args[0], args.data());
      ::_exit(127);
    }
    if (out_pipe) {
      ::close(fds[1]);
      *out_pipe = fds[0];
    }
  }
  /// Kills and reaps the child; nothing when none runs.
  void stop() {
    if (m_pid > 0) {
      ::kill(m_pid, SIGKILL);
      ::waitpid(m_pid, nullptr, 0);
      m_pid = -1;
    }
  }

 private:
  pid_t m_pid = -1;
};

/// The real docker-registry on 127.0.0.1 with storage in a temporary directory.
class DockerRegistry {
 public:
  /// plain: HTTP, anonymous. basic: HTTP with htpasswd. tls: HTTPS with a test CA. tls_basic: HTTPS and htpasswd.
  enum class Setup { plain, basic, tls, tls_basic };
  static constexpr const char* k_user = "tester";
  static constexpr const char* k_password = "s3cret-Pa55";

  /// Starts the registry; skip_reason() says why when it could not (a tool missing, or the registry did not come up).
  explicit DockerRegistry(Setup setup) {
    if (!have("docker-registry")) {
      m_skip = "docker-registry is not installed";
      return;
    }
    m_port = free_port();
    std::string yaml = "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: " +
                       m_dir / "storage" + "\nhttp:\n  addr: 127.0.0.1:" + std::to_string(m_port) + "\n";
    if (setup == Setup::tls || setup == Setup::tls_basic) {
      const std::string d = m_dir.path();
      const std::string cmd = "cd " + d +
                              " && (openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj /CN=gpuenv-test-ca"
                              " -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign"
                              " && openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=127.0.0.1"
                              " && printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\nbasicConstraints=CA:FALSE\\n' > ext.cnf"
                              " && openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 2 -extfile ext.cnf"
                              " && mkdir certs && cp ca.crt certs/) >/dev/null 2>&1";
      if (!run(cmd)) {
        m_skip = "openssl could not make the test CA";
        return;
      }
      yaml += "  tls:\n    certificate: " + d + "/server.crt\n    key: " + d + "/server.key\n";
    }
    if (setup == Setup::basic || setup == Setup::tls_basic) {
      // docker-registry wants bcrypt; Python's crypt module (glibc/libxcrypt) makes $2b$ hashes. Cost 4 (16 rounds):
      // the registry checks the hash on every request.
      const auto hash = run(std::string("python3 -W ignore -c 'import crypt,sys; print(crypt.crypt(sys.argv[1], crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=16)))' ") +
                            k_password + " 2>/dev/null");
      if (!hash || hash->rfind("$2", 0) != 0) {
        m_skip = "no way to make a bcrypt htpasswd entry here (python3 crypt with blowfish is missing)";
        return;
      }
      write_file(m_dir / "htpasswd", std::string(k_user) + ":" + *hash);
      yaml += "auth:\n  htpasswd:\n    realm: gpuenv-test\n    path: " + m_dir / "htpasswd" + "\n";
    }
    write_file(m_dir / "config.yml", yaml);
    m_child.start({"docker-registry", "serve", m_dir / "config.yml"}, m_dir / "registry.log");
    for (int i = 0; i < 200 && !port_open(m_port); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(25));
    if (!port_open(m_port)) m_skip = "docker-registry did not start: " + read_file(m_dir / "registry.log");
  }

  /// Empty when the registry is running on host().
  [[nodiscard]] const std::string& skip_reason() const { return m_skip; }
  /// "127.0.0.1:PORT", the registry part of an image reference.
  [[nodiscard]] std::string host() const { return "127.0.0.1:" + std::to_string(m_port); }
  /// The test CA's certificate (PEM); only with Setup::tls or Setup::tls_basic.
  [[nodiscard]] std::string ca() const { return m_dir / "ca.crt"; }
  /// The registry's configuration file (for `docker-registry garbage-collect`).
  [[nodiscard]] std::string config() const { return m_dir / "config.yml"; }
  /// A directory holding only the CA certificate, as skopeo's --cert-dir wants.
  [[nodiscard]] std::string cert_dir() const { return m_dir / "certs"; }

 private:
  RegistryTempDir m_dir;
  Child m_child;
  int m_port = 0;
  std::string m_skip;
};

}  // namespace gpuenv::testing
