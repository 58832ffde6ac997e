#pragma once
// An owned file descriptor, closed when it goes out of scope.
#include <unistd.h>

#include <utility>

namespace gpuenv {

class UniqueFd {
 public:
  explicit UniqueFd(int fd = -1) : m_fd(fd) {}
  ~UniqueFd() {
    if (m_fd >= 0) ::close(m_fd);
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  UniqueFd(UniqueFd&& o) noexcept : m_fd(std::exchange(o.m_fd, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    std::swap(m_fd, o.m_fd);
    return *this;
  }
  [[nodiscard]] int get() const { return m_fd; }
  /// Gives up ownership: the caller closes the descriptor.
  [[nodiscard]] int release() { return std::exchange(m_fd, -1); }

 private:
  int m_fd;
};

}  // namespace gpuenv
