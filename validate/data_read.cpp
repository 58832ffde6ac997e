#include "validate/data_read.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>

#include "base/safe_text.hpp"

namespace gpuenv::validate {
namespace data_read_detail {

using SteadyClock = std::chrono::steady_clock;
constexpr std::uint64_t k_mib = 1024ull * 1024;
// Left for removing gpuenv's directory once reading stops, before the runner's watchdog would give up.
constexpr std::chrono::milliseconds k_cleanup_reserve{1500};
// Each 4 KiB of a file gpuenv writes starts with its index (plus this), so every block differs: no file system
// may compress or deduplicate the file into less than its size, and a block read back from the wrong place shows.
constexpr std::uint64_t k_stamp_base = 0x67707565'6e760000ull;

struct AlignedFree {
  void operator()(std::byte* p) const { std::free(p); }
};
using AlignedBuffer = std::unique_ptr<std::byte, AlignedFree>;

AlignedBuffer aligned_buffer(std::size_t size) {
  return AlignedBuffer(static_cast<std::byte*>(std::aligned_alloc(k_data_alignment, size)));
}

// Random bytes (xorshift64*), so the file does not compress.
void fill_random(std::byte* p, std::size_t size) {
  std::uint64_t x = 0x9e3779b97f4a7c15ull;
  for (std::size_t i = 0; i + 8 <= size; i += 8) {
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    const std::uint64_t v = x * 0x2545f4914f6cdd1dull;
    std::memcpy(p + i, &v, 8);
  }
}

void stamp(std::byte* p, std::size_t size, std::uint64_t offset) {
  for (std::size_t i = 0; i + k_data_alignment <= size; i += k_data_alignment) {
    const std::uint64_t v = k_stamp_base + (offset + i) / k_data_alignment;
    std::memcpy(p + i, &v, 8);
  }
}

// Whether the stamps of the blocks that start within [offset, offset + size) are right.
bool stamps_match(const std::byte* p, std::size_t size, std::uint64_t offset) {
  std::uint64_t block = (offset + k_data_alignment - 1) / k_data_alignment * k_data_alignment;
  for (; block + 8 <= offset + size; block += k_data_alignment) {
    std::uint64_t v = 0;
    std::memcpy(&v, p + (block - offset), 8);
    if (v != k_stamp_base + block / k_data_alignment) return false;
  }
  return true;
}

std::string gib(std::uint64_t bytes) {
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(2);
  s << static_cast<double>(bytes) / static_cast<double>(1024 * k_mib) << " GiB";
  return s.str();
}

Error data_failure(const char* id, std::string message, const std::string& where) {
  return make_error(ErrorKind::environment, id, std::move(message), where, "");
}

// Reads FILE from start to end or until READ_END; VERIFY checks the stamps of a file gpuenv wrote.
Status read_timed(DataFiles& files, const std::string& file, std::uint64_t size, std::size_t block,
                  SteadyClock::time_point read_end, bool verify, DataReadFigures& out) {
  GPUENV_TRY(reader, files.open_read(file));
  AlignedBuffer buffer = aligned_buffer(block);
  if (!buffer) return data_failure(k_data_io, "no memory for an aligned read buffer", file);
  out.file = file;
  out.bytes_to_read = size;
  out.direct = reader->direct();
  const auto start = files.now();
  auto last = start;
  for (;;) {
    if (last >= read_end) {
      out.read_stopped = true;
      break;
    }
    GPUENV_TRY(n, reader->read(buffer.get(), block));
    last = files.now();
    if (n == 0) break;
    if (verify && !stamps_match(buffer.get(), n, out.bytes_read))
      return data_failure("data.mismatch",
                          "the file gpuenv wrote read back other bytes at offset " + std::to_string(out.bytes_read) +
                              " than were written there",
                          file);
    out.bytes_read += n;
  }
  if (out.direct && !reader->direct()) {
    out.direct = false;
    out.fell_back = true;
  }
  out.seconds = std::chrono::duration<double>(last - start).count();
  return ok_status();
}

// Writes up to SIZE bytes of stamped random data to a new FILE, stopping at WRITE_END; returns the bytes written.
Result<std::uint64_t> write_own_file(DataFiles& files, const std::string& file, std::uint64_t size, std::size_t block,
                                     SteadyClock::time_point write_end, DataReadFigures& out) {
  GPUENV_TRY(writer, files.create(file));
  AlignedBuffer buffer = aligned_buffer(block);
  if (!buffer) return data_failure(k_data_io, "no memory for an aligned write buffer", file);
  fill_random(buffer.get(), block);
  std::uint64_t written = 0;
  while (written < size) {
    if (files.now() >= write_end) {
      out.write_stopped = true;
      break;
    }
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(block, size - written));
    stamp(buffer.get(), n, written);
    GPUENV_CHECK(writer->write(buffer.get(), n));
    written += n;
  }
  GPUENV_CHECK(writer->finish());
  return written;
}

std::string seconds_text(SteadyClock::duration d) {
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(1);
  s << std::max(0.0, std::chrono::duration<double>(d).count()) << " s";
  return s.str();
}

// The error of a measurement the check's deadline leaves no time for: LEFT remained, RESERVED had to stay after WHAT.
Error no_time(const std::string& what, SteadyClock::duration left, SteadyClock::duration reserved,
              const std::string& reserved_for, const std::string& where) {
  return data_failure(k_data_no_time,
                      "no time left to " + what + ": " + seconds_text(left) + " of the check's deadline remained, not more than the " +
                          seconds_text(reserved) + " kept for " + reserved_for + "; nothing was measured",
                      where);
}

// Makes gpuenv's directory in DIR so that a directory under the final name always holds its owner file: made as
// DIR/.gpuenv-data-new-XXXXXX (mkdtemp), the owner file written and synced there, then renamed to
// DIR/.gpuenv-data-read-XXXXXX. A run killed before the rename leaves a .gpuenv-data-new-* directory, which later
// runs remove once it is k_data_stale_age old (remove_stale_data_directories). Returns the final path.
Result<std::string> make_own_directory(DataFiles& files, const std::string& dir) {
  GPUENV_TRY(fresh, files.make_directory(dir, k_data_new_prefix));
  const std::string name = fresh.substr(fresh.rfind('/') + 1);
  const std::string prefix = k_data_new_prefix;
  Status done = name.compare(0, prefix.size(), prefix) == 0
                    ? files.write_small(fresh + "/" + k_data_owner_file, data_owner_text(files.self()))
                    : Status(data_failure(k_data_io, "the directory made for data_read is not named " + prefix + "*", fresh));
  const std::string final_name = std::string(k_data_dir_prefix) + name.substr(std::min(prefix.size(), name.size()));
  if (done) done = files.rename_directory(dir, name, final_name);
  if (done) return dir + "/" + final_name;
  Error e = std::move(done).error();
  if (Status removed = files.remove_directory(fresh); !removed)
    e.message += "; and gpuenv could not remove its directory " + fresh + ": " + removed.error().message;
  return e;
}

// The directory mode: a directory of gpuenv's own in DIR, its file written, read back; the directory is removed
// whatever happens (a failure to remove it is added to the error, or to the notes).
Status measure_own_file(DataFiles& files, const std::string& dir, const DataPathInfo& info, const DataReadPlan& plan,
                        SteadyClock::time_point deadline, DataReadFigures& out) {
  if (info.read_only)
    return data_failure(k_data_read_only, "the file system of " + dir + " is mounted read-only, so gpuenv cannot write its test file there", dir);
  const std::uint64_t size = std::min(plan.file_cap, info.free_bytes / 10 / plan.block * plan.block);
  if (size < plan.min_file)
    return data_failure(k_data_no_space,
                        "only " + gib(info.free_bytes) + " free in " + dir + "; data_read writes at most a tenth of the free space and needs " +
                            gib(plan.min_file) + " or more",
                        dir);
  // Writing ends early enough to leave the read time and the removal; none of it left: say so, making nothing.
  const SteadyClock::duration reserved = k_cleanup_reserve + plan.read_time;
  const std::string reserved_for = "reading the file back (" + seconds_text(plan.read_time) + ") and removing its directory (" +
                                   seconds_text(k_cleanup_reserve) + ")";
  if (deadline - reserved <= files.now())
    return no_time("write data_read's test file in " + dir, deadline - files.now(), reserved, reserved_for, dir);
  GPUENV_TRY(own, make_own_directory(files, dir));
  out.own_file = true;
  Status done = ok_status();
  if (deadline - reserved <= files.now()) {
    done = no_time("write data_read's test file in " + own, deadline - files.now(), reserved, reserved_for, own);
  } else {
    const auto write_end = std::min(files.now() + plan.write_time, deadline - reserved);
    auto written = write_own_file(files, own + "/" + k_data_file, size, plan.block, write_end, out);
    if (!written) {
      done = std::move(written).error();
    } else if (*written == 0) {
      done = data_failure(k_data_io, "gpuenv could not write any of its test file within the write time", own);
    } else {
      const auto read_end = std::min(files.now() + plan.read_time, deadline - k_cleanup_reserve);
      done = read_timed(files, own + "/" + k_data_file, *written, plan.block, read_end, true, out);
    }
  }
  if (Status removed = files.remove_directory(own); !removed) {
    const std::string why = "gpuenv could not remove its directory " + own + ": " + removed.error().message;
    if (!done) {
      Error e = std::move(done).error();
      e.message += "; and " + why;
      return e;
    }
    out.notes.push_back(why + " (remove it by hand)");
  }
  return done;
}

// Why a directory of gpuenv's found in a data directory is removed, or empty to keep it (KEPT says why).
std::string stale_reason(const DataEntry& e, bool fresh_name, const std::optional<DataOwner>& owner, bool owner_gone,
                         std::string& kept) {
  const auto minutes = std::chrono::duration_cast<std::chrono::minutes>(e.age).count();
  const bool old = e.age >= k_data_stale_age;
  if (owner && owner_gone) return "left by a run that is gone (pid " + std::to_string(owner->pid) + ")";
  if (old && !owner) return "left without a readable owner file by a run killed while making it (unchanged for " + std::to_string(minutes) + " min)";
  if (old && fresh_name) return "left by a run killed before it renamed it (unchanged for " + std::to_string(minutes) + " min)";
  if (!owner)
    kept = "no owner file gpuenv can read in it yet (removed once unchanged for " + std::to_string(k_data_stale_age.count()) + " min)";
  else
    kept = "its run (pid " + std::to_string(owner->pid) + " on " + safe_text(owner->host, 64) + ") may still be going";
  return {};
}

}  // namespace data_read_detail

DataReadPlan data_read_plan(Level level) {
  using std::chrono::milliseconds;
  constexpr std::uint64_t mib = data_read_detail::k_mib;
  constexpr std::size_t block = 8 * mib;
  switch (level) {
    case Level::quick: return {256 * mib, 16 * mib, milliseconds(4000), milliseconds(3000), block};
    case Level::standard: return {2048 * mib, 64 * mib, milliseconds(20000), milliseconds(10000), block};
    case Level::long_: return {8192 * mib, 64 * mib, milliseconds(60000), milliseconds(30000), block};
  }
  return {256 * mib, 16 * mib, milliseconds(4000), milliseconds(3000), block};
}

std::string data_owner_text(const DataOwner& owner) {
  return "gpuenv-data-read-owner-v1\nhost=" + owner.host + "\nboot_id=" + owner.boot_id + "\npid_namespace=" +
         owner.pid_namespace + "\npid=" + std::to_string(owner.pid) + "\n";
}

std::optional<DataOwner> parse_data_owner(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line) || line != "gpuenv-data-read-owner-v1") return std::nullopt;
  DataOwner o;
  bool has_pid = false;
  while (std::getline(in, line)) {
    const auto eq = line.find('=');
    if (eq == std::string::npos) return std::nullopt;
    const std::string key = line.substr(0, eq), value = line.substr(eq + 1);
    if (key == "host") o.host = value;
    else if (key == "boot_id") o.boot_id = value;
    else if (key == "pid_namespace") o.pid_namespace = value;
    else if (key == "pid") {
      char* end = nullptr;
      o.pid = std::strtol(value.c_str(), &end, 10);
      has_pid = !value.empty() && end != nullptr && *end == '\0' && o.pid > 0;
    }
  }
  if (!has_pid || o.boot_id.empty()) return std::nullopt;
  return o;
}

bool data_owner_gone(const DataOwner& dir_owner, const DataOwner& self, bool pid_alive) {
  if (self.boot_id.empty()) return false;  // nothing to compare with: keep
  if (dir_owner.boot_id != self.boot_id) return !self.host.empty() && dir_owner.host == self.host;
  return dir_owner.pid_namespace == self.pid_namespace && !pid_alive;
}

std::vector<std::string> remove_stale_data_directories(DataFiles& files, const std::string& dir) {
  std::vector<std::string> notes;
  auto entries = files.list(dir);
  if (!entries) return notes;  // the measurement itself says what is wrong with DIR
  const DataOwner self = files.self();
  const std::string prefix = k_data_dir_prefix, new_prefix = k_data_new_prefix;
  for (const auto& e : *entries) {
    const bool fresh_name = e.name.compare(0, new_prefix.size(), new_prefix) == 0;
    if (!e.directory || !e.mine || (!fresh_name && e.name.compare(0, prefix.size(), prefix) != 0)) continue;
    const std::string path = dir + "/" + e.name;
    auto text = files.read_small(path + "/" + k_data_owner_file, 4096);
    const std::optional<DataOwner> owner = text ? parse_data_owner(*text) : std::nullopt;
    const bool gone = owner && data_owner_gone(*owner, self, files.alive(owner->pid));
    std::string kept;
    const std::string reason = data_read_detail::stale_reason(e, fresh_name, owner, gone, kept);
    if (reason.empty()) {
      notes.push_back("kept " + safe_text(path, 512) + ": " + kept);
    } else if (Status removed = files.remove_directory(path); removed) {
      notes.push_back("removed " + safe_text(path, 512) + ", " + reason);
    } else {
      notes.push_back("could not remove " + safe_text(path, 512) + ", " + reason + ": " + removed.error().message);
    }
  }
  return notes;
}

Result<DataReadFigures> measure_data_read(DataFiles& files, const std::string& path, Level level,
                                          std::chrono::steady_clock::time_point deadline) {
  using namespace data_read_detail;
  const DataReadPlan plan = data_read_plan(level);
  GPUENV_TRY(info, files.inspect(path));
  DataReadFigures out;
  switch (info.kind) {
    case DataPathKind::missing: return data_failure(k_data_missing, "the data path " + path + " does not exist", path);
    case DataPathKind::other:
      return data_failure("data.unsupported", "the data path " + path + " is neither a directory nor a regular file", path);
    case DataPathKind::regular_file: {
      if (deadline - k_cleanup_reserve <= files.now())
        return no_time("read " + path, deadline - files.now(), k_cleanup_reserve, "the end of the check", path);
      const auto read_end = std::min(files.now() + plan.read_time, deadline - k_cleanup_reserve);
      GPUENV_CHECK(read_timed(files, path, info.size, plan.block, read_end, false, out));
      return out;
    }
    case DataPathKind::directory: break;
  }
  out.notes = remove_stale_data_directories(files, path);
  GPUENV_CHECK(measure_own_file(files, path, info, plan, deadline, out));
  return out;
}

}  // namespace gpuenv::validate
