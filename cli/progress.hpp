#pragma once
// Download progress on a terminal: files, bytes, rate and ETA on one line, redrawn at most 10 times a second.
#include <chrono>
#include <ostream>

#include "base/net/fetcher.hpp"

namespace gpuenv::cli {

class ProgressLine {
 public:
  explicit ProgressLine(std::ostream& out) : m_out(out), m_start(std::chrono::steady_clock::now()) {}
  /// Redraws the line (throttled); a finished run ends the line.
  void update(const gpuenv::FetchProgress& p);
  /// The text of the line for a progress state `elapsed` seconds after the start (for tests).
  static std::string format(const gpuenv::FetchProgress& p, double elapsed_seconds);

 private:
  std::ostream& m_out;
  std::chrono::steady_clock::time_point m_start, m_last{};
  bool m_drawn = false;
};

}  // namespace gpuenv::cli
