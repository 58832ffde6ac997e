// The data check: data_read, the sequential read rate of the path training data lives on (`--data PATH`), through
// the DataFiles port (validate/data_read.hpp measures). It reads no GPU, so it runs on a host without one.
#include "base/byte_rate.hpp"
#include "validate/checks/check_support.hpp"
#include "validate/checks/judge.hpp"
#include "validate/data_read.hpp"

namespace gpuenv::validate::checks {
namespace data_check_detail {

// The write and read limits of data_read_plan, plus the time to make and remove gpuenv's directory.
constexpr Budget k_quick{10000, 0};
constexpr Budget k_standard{35000, 0};
constexpr Budget k_long{95000, 0};
// Below this a read is over too soon for its rate to say much.
constexpr std::uint64_t k_small_read = 64ull * 1024 * 1024;

const char* code_of(const std::string& id) {
  if (id == k_data_read_only) return "data_read_only";
  if (id == k_data_no_space) return "data_no_space";
  if (id == k_data_missing || id == k_data_denied || id == "data.unsupported") return "data_path_unusable";
  if (id == "data.mismatch") return "data_mismatch";
  if (id == k_data_no_time) return "data_read_no_time";
  return "data_io_error";
}

std::string how_read(const DataReadFigures& f) {
  std::string s = f.own_file ? "a file gpuenv wrote, removed since" : "the file, read only";
  if (f.direct) s += ", O_DIRECT";
  else if (f.fell_back) s += ", O_DIRECT refused part-way, then buffered with the file's cached pages dropped";
  else s += ", buffered with the file's cached pages dropped (the file system refuses O_DIRECT)";
  return s;
}

std::string mib_text(std::uint64_t bytes) { return measured(static_cast<double>(bytes) / (1024.0 * 1024.0)) + " MiB"; }

}  // namespace data_check_detail
}  // namespace gpuenv::validate::checks

namespace gpuenv::validate {

GpuOutcome judge_data_read(const DataReadFigures& f, std::optional<double> min) {
  using namespace checks::data_check_detail;
  using checks::outcome;
  if (f.bytes_read == 0)
    return outcome(-1, CheckStatus::fail, "read nothing from " + f.file + (f.bytes_to_read == 0 ? " (it is empty)" : ""),
                   "data_path_unusable");
  const double rate = f.rate();
  std::string message = "read " + mib_text(f.bytes_read) + " of " + f.file + " (" + how_read(f) + ") in " +
                        measured(f.seconds) + " s: " + format_byte_rate(rate);
  if (f.read_stopped)
    message += "; stopped at the read time limit after " + mib_text(f.bytes_read) + " of " + mib_text(f.bytes_to_read) + ", judged on what was read";
  if (f.write_stopped) message += "; writing stopped at its time limit, so the file is smaller than planned";
  if (!f.read_stopped && f.bytes_read < k_small_read)
    message += "; a read this small says little about the rate (give a file of 1 GiB or more)";
  for (const auto& n : f.notes) message += "; " + n;
  std::vector<Metric> metrics{{"read_gbs", rate / 1e9, "GB/s"},
                              {"bytes_read", static_cast<double>(f.bytes_read), "B"},
                              {"seconds", f.seconds, "s"}};
  if (!min) {
    GpuOutcome out = outcome(-1, CheckStatus::measured, message + "; no threshold given, so not judged", "data_read_unjudged");
    out.metrics = std::move(metrics);
    return out;
  }
  metrics.push_back({"threshold_gbs", *min / 1e9, "GB/s"});
  const bool pass = rate >= *min;
  GpuOutcome out = outcome(-1, pass ? CheckStatus::pass : CheckStatus::fail,
                           message + (pass ? ", at least " : ", below ") + format_byte_rate(*min) + " required",
                           pass ? "" : "data_read_slow");
  out.metrics = std::move(metrics);
  return out;
}

}  // namespace gpuenv::validate

namespace gpuenv::validate::checks {
namespace data_check_detail {

class DataRead final : public SpecCheck {
 public:
  DataRead()
      : SpecCheck({"data_read", "data",
                   "Sequential read rate of the data path (--data): O_DIRECT, or buffered with the file's cache dropped",
                   k_quick, k_standard, k_long}) {}
  [[nodiscard]] bool uses_gpu() const override { return false; }
  [[nodiscard]] bool needs_nvidia() const override { return false; }
  [[nodiscard]] std::optional<std::string> not_applicable(const CheckContext& context) const override {
    if (context.inputs.data_path.empty()) return std::string("no data path given (--data DIR or --data FILE)");
    if (!context.inputs.data_files) return std::string("no file-system adapter was wired for data_read");
    return std::nullopt;
  }
  std::vector<GpuOutcome> run(CheckContext& context) override {
    const std::shared_ptr<DataFiles> files = context.inputs.data_files;
    auto figures = measure_data_read(*files, context.inputs.data_path, context.inputs.level, context.deadline);
    if (!figures) {
      const Error& e = figures.error();
      // No time left measured nothing: not a fault of the storage, and not a pass either.
      const CheckStatus status = e.id == k_data_no_time ? CheckStatus::warn : CheckStatus::fail;
      return {outcome(-1, status, e.message + (e.where.empty() || e.message.find(e.where) != std::string::npos ? "" : " (" + e.where + ")"),
                      code_of(e.id))};
    }
    return {judge_data_read(*figures, context.inputs.data_read_min)};
  }
};

}  // namespace data_check_detail

std::vector<std::unique_ptr<Check>> data_checks() {
  std::vector<std::unique_ptr<Check>> out;
  out.push_back(std::make_unique<data_check_detail::DataRead>());
  return out;
}

}  // namespace gpuenv::validate::checks
