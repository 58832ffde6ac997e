#pragma once
// Starts tests/fakes/fault_server.py on 127.0.0.1 for the duration of a test and stops it after.
#include <sys/prctl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace gpuenv::testing {

class LoopbackServer {
 public:
  /// Serves `dir`; port() is 0 when the server could not start. `default_query` (fault_server.py's QUERY) applies
  /// its faults to every request without a query of its own.
  explicit LoopbackServer(const std::string& dir, const std::string& default_query = {}) {
    int fds[2];
    if (pipe(fds) != 0) return;
    m_pid = fork();
    if (m_pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // a test that dies must not leave the server holding ctest's pipes
      dup2(fds[1], 1);
      close(fds[0]);
      const std::string script = std::string(GPUENV_SOURCE_DIR) + "/tests/fakes/fault_server.py";
      execlp("python3", "python3", script.c_str(), dir.c_str(), default_query.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    close(fds[1]);
    char buf[32] = {};
    std::size_t got = 0;
    while (got < sizeof buf - 1) {
      const ssize_t r = read(fds[0], buf + got, 1);
      if (r <= 0 || buf[got] == '\n') break;
      ++got;
    }
    close(fds[0]);
    m_port = std::atoi(buf);
  }
  ~LoopbackServer() {
    if (m_pid > 0) {
      kill(m_pid, SIGKILL);
      waitpid(m_pid, nullptr, 0);
    }
  }
  LoopbackServer(const LoopbackServer&) = delete;
  LoopbackServer& operator=(const LoopbackServer&) = delete;
  [[nodiscard]] int port() const { return m_port; }
  [[nodiscard]] std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(m_port) + "/" + path; }

 private:
  pid_t m_pid = -1;
  int m_port = 0;
};

}  // namespace gpuenv::testing
