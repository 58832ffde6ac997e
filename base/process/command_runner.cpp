#include "base/process/command_runner.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gpuenv {
namespace {

constexpr IoArea k_pipe_io{"process.pipe", ""};
constexpr IoArea k_fork_io{"process.fork", ""};
constexpr IoArea k_exec_io{"process.not_found", "install the program (see scripts/deps.sh)"};

class ProcessRunner final : public CommandRunner {
 public:
  explicit ProcessRunner(std::size_t max_output) : m_max_output(max_output) {}
  Result<CommandResult> run(const std::vector<std::string>& argv, std::string_view input, std::chrono::milliseconds timeout) override {
    if (argv.empty()) return make_error(ErrorKind::internal, "process.empty", "no command given", {}, "");
    int in[2], out[2], err[2], exec_err[2];
    if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC) || pipe2(exec_err, O_CLOEXEC)) {
      return io_error(k_pipe_io, "pipe failed", argv[0]);
    }
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) return io_error(k_fork_io, "fork failed", argv[0]);
    if (pid == 0) {
      setpgid(0, 0);
      // A child outlives no gpuenv: killed with it (a qemu-img blocked on a FIFO stayed after SIGKILL of gpuenv).
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
      dup2(in[0], 0);
      dup2(out[1], 1);
      dup2(err[1], 2);
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execvp(args[0], args.data());
      const int e = errno;
      (void)!write(exec_err[1], &e, sizeof e);
      _exit(127);
    }
    setpgid(pid, pid);
    close(in[0]);
    close(out[1]);
    close(err[1]);
    close(exec_err[1]);
    int exec_errno = 0;
    const bool exec_failed = read(exec_err[0], &exec_errno, sizeof exec_errno) == sizeof exec_errno;
    close(exec_err[0]);
    CommandResult r;
    std::size_t written = 0;
    int in_fd = in[1];
    if (input.empty()) {
      close(in_fd);
      in_fd = -1;
    } else {
      fcntl(in_fd, F_SETFL, O_NONBLOCK);
    }
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    bool timed_out = false, too_much = false;
    const char* too_much_stream = "";
    int open_fds = 2;
    while (open_fds > 0 || in_fd >= 0) {
      pollfd fds[3];
      int n = 0;
      if (out[0] >= 0) fds[n++] = {out[0], POLLIN, 0};
      if (err[0] >= 0) fds[n++] = {err[0], POLLIN, 0};
      if (in_fd >= 0) fds[n++] = {in_fd, POLLOUT, 0};
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
      if (left <= 0) {
        timed_out = true;
        break;
      }
      const int rc = poll(fds, static_cast<nfds_t>(n), static_cast<int>(left));
      if (rc < 0 && errno == EINTR) continue;
      for (int i = 0; i < n; ++i) {
        if (!fds[i].revents) continue;
        if (fds[i].fd == in_fd) {
          const ssize_t w = write(in_fd, input.data() + written, input.size() - written);
          if (w > 0) written += static_cast<std::size_t>(w);
          if (w < 0 && errno != EAGAIN) written = input.size();  // the child closed stdin
          if (written >= input.size()) {
            close(in_fd);
            in_fd = -1;
          }
          continue;
        }
        char buf[65536];
        const ssize_t got = read(fds[i].fd, buf, sizeof buf);
        std::string& sink = fds[i].fd == out[0] ? r.out : r.err;
        if (got > 0) {
          if (sink.size() + static_cast<std::size_t>(got) > m_max_output) {
            too_much = true;  // stopped at once: its output is never kept whole, and waiting for its end may take forever
            too_much_stream = fds[i].fd == out[0] ? "standard output" : "standard error";
            break;
          }
          sink.append(buf, static_cast<std::size_t>(got));
        } else {
          close(fds[i].fd);
          (fds[i].fd == out[0] ? out[0] : err[0]) = -1;
          --open_fds;
        }
      }
      if (too_much) break;
    }
    if (in_fd >= 0) close(in_fd);
    if (out[0] >= 0) close(out[0]);
    if (err[0] >= 0) close(err[0]);
    if (timed_out || too_much) kill(-pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (exec_failed) {
      return io_error(k_exec_io, "cannot run '" + argv[0] + "'", argv[0], exec_errno);
    }
    if (timed_out) {
      return make_error(ErrorKind::environment, "process.timeout", "'" + argv[0] + "' did not finish within " + std::to_string(timeout.count()) + " ms",
                        argv[0], "");
    }
    if (too_much) {
      return make_error(ErrorKind::environment, "process.output_limit",
                        "'" + argv[0] + "' wrote more than " + std::to_string(m_max_output >> 20) + " MiB to its " + too_much_stream + "; gpuenv stopped it",
                        argv[0], "its input is larger than anything gpuenv reads from it: check what it was given");
    }
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return r;
  }

 private:
  std::size_t m_max_output;
};

}  // namespace

std::unique_ptr<CommandRunner> make_process_runner(std::size_t max_output) { return std::make_unique<ProcessRunner>(max_output); }

}  // namespace gpuenv
