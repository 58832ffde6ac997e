#include "cli/progress.hpp"

#include <cstdio>

namespace gpuenv::cli {
namespace {

std::string mib(std::uint64_t b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(b) / (1024.0 * 1024.0));
  return buf;
}

}  // namespace

std::string ProgressLine::format(const gpuenv::FetchProgress& p, double elapsed) {
  const double rate = elapsed > 0 ? static_cast<double>(p.bytes_done) / elapsed : 0;
  std::string line = "  " + std::to_string(p.files_done) + "/" + std::to_string(p.files_total) + " files  " + mib(p.bytes_done);
  if (p.bytes_total) line += "/" + mib(p.bytes_total);
  char buf[64];
  std::snprintf(buf, sizeof buf, " MiB  %.1f MiB/s", rate / (1024.0 * 1024.0));
  line += buf;
  if (p.bytes_total > p.bytes_done && rate > 0) {
    const auto eta = static_cast<long>(static_cast<double>(p.bytes_total - p.bytes_done) / rate);
    std::snprintf(buf, sizeof buf, "  ETA %ldm%02lds", eta / 60, eta % 60);
    line += buf;
  }
  return line;
}

void ProgressLine::update(const gpuenv::FetchProgress& p) {
  const auto now = std::chrono::steady_clock::now();
  const bool finished = p.files_total && p.files_done == p.files_total;
  if (!finished && now - m_last < std::chrono::milliseconds(100)) return;
  m_last = now;
  const double elapsed = std::chrono::duration<double>(now - m_start).count();
  m_out << "\r\033[K" << format(p, elapsed) << (finished ? "\n" : "") << std::flush;
  m_drawn = !finished;
}

}  // namespace gpuenv::cli
