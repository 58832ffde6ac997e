#pragma once
// The DataFiles double (validate/data_files.hpp): files in memory, a clock that moves only when a file is read or
// written, and scripted faults (short reads, an I/O error after some bytes, O_DIRECT refused part-way).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "validate/data_files.hpp"

namespace gpuenv::testing {

class FakeDataFiles final : public validate::DataFiles {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  std::map<std::string, validate::DataPathInfo> paths;  ///< what inspect says; anything else is missing
  std::map<std::string, std::string> contents;          ///< file bytes (written ones land here too)
  std::map<std::string, std::vector<validate::DataEntry>> listings;
  std::chrono::milliseconds per_call{10};  ///< the clock moves this much at each read or write call
  std::size_t short_read = 0;              ///< >0: a read returns at most this many bytes
  std::optional<std::string> read_error;   ///< an error id a read returns once read_error_after bytes were read
  std::uint64_t read_error_after = 0;
  std::optional<std::string> write_error;  ///< an error id every write returns
  std::optional<std::string> make_error;   ///< an error id make_directory returns
  std::optional<std::string> owner_error;  ///< an error id write_small returns
  std::optional<std::string> rename_error; ///< an error id rename_directory returns
  std::chrono::milliseconds per_make{0};   ///< the clock moves this much when a directory is made
  bool direct = true;                      ///< reads and writes start with O_DIRECT
  bool refuse_direct_on_read = false;      ///< the first read drops O_DIRECT (as EINVAL does in the real adapter)
  bool corrupt = false;                    ///< reads flip a byte of every block
  validate::DataOwner me{"node1", "boot-1", "pid:[1]", 100};
  std::set<long> live;

  std::vector<std::string> made, removed, created, opened_for_reading;
  /// Each rename as "PARENT/FROM -> PARENT/TO", and what FROM's owner file held at that moment (empty: none).
  std::vector<std::string> renamed, owner_at_rename;
  int next_dir = 0;
  TimePoint clock{};

  Result<validate::DataPathInfo> inspect(const std::string& path) override {
    auto it = paths.find(path);
    if (it == paths.end()) return validate::DataPathInfo{};
    return it->second;
  }

  Result<std::unique_ptr<validate::DataReadFile>> open_read(const std::string& path) override {
    opened_for_reading.push_back(path);
    if (!contents.count(path)) return gpuenv::make_error(ErrorKind::environment, validate::k_data_missing, "opening: No such file", path, "");
    return std::unique_ptr<validate::DataReadFile>(std::make_unique<Reader>(*this, contents[path]));
  }

  Result<std::string> make_directory(const std::string& parent, const std::string& prefix) override {
    if (make_error) return gpuenv::make_error(ErrorKind::environment, *make_error, "making a directory: refused", parent, "");
    clock += per_make;
    const std::string dir = parent + "/" + prefix + "fake" + std::to_string(next_dir++);
    made.push_back(dir);
    return dir;
  }

  Result<std::unique_ptr<validate::DataWriteFile>> create(const std::string& path) override {
    created.push_back(path);
    contents[path].clear();
    return std::unique_ptr<validate::DataWriteFile>(std::make_unique<Writer>(*this, contents[path]));
  }

  Status write_small(const std::string& path, const std::string& text) override {
    if (owner_error) return gpuenv::make_error(ErrorKind::environment, *owner_error, "writing: No space left on device", path, "");
    created.push_back(path);
    contents[path] = text;
    return ok_status();
  }

  Result<std::string> read_small(const std::string& path, std::size_t limit) override {
    auto it = contents.find(path);
    if (it == contents.end()) return gpuenv::make_error(ErrorKind::environment, validate::k_data_missing, "no file", path, "");
    return it->second.substr(0, limit);
  }

  Status rename_directory(const std::string& parent, const std::string& from, const std::string& to) override {
    if (rename_error) return gpuenv::make_error(ErrorKind::environment, *rename_error, "renaming: refused", parent, "");
    const std::string old_dir = parent + "/" + from, new_dir = parent + "/" + to;
    renamed.push_back(old_dir + " -> " + new_dir);
    const auto owner = contents.find(old_dir + "/owner");
    owner_at_rename.push_back(owner == contents.end() ? std::string() : owner->second);
    std::map<std::string, std::string> moved;
    for (auto it = contents.begin(); it != contents.end();) {
      if (it->first.rfind(old_dir + "/", 0) == 0) {
        moved[new_dir + it->first.substr(old_dir.size())] = std::move(it->second);
        it = contents.erase(it);
      } else {
        ++it;
      }
    }
    contents.merge(moved);
    return ok_status();
  }

  Result<std::vector<validate::DataEntry>> list(const std::string& dir) override { return listings[dir]; }

  Status remove_directory(const std::string& dir) override {
    removed.push_back(dir);
    for (auto it = contents.begin(); it != contents.end();) {
      if (it->first.rfind(dir + "/", 0) == 0) it = contents.erase(it);
      else ++it;
    }
    return ok_status();
  }

  validate::DataOwner self() override { return me; }
  bool alive(long pid) override { return live.count(pid) > 0; }
  TimePoint now() override { return clock; }

 private:
  class Reader final : public validate::DataReadFile {
   public:
    Reader(FakeDataFiles& files, const std::string& bytes) : m_files(files), m_bytes(bytes), m_direct(files.direct) {}
    [[nodiscard]] bool direct() const override { return m_direct; }
    Result<std::size_t> read(std::byte* buffer, std::size_t size) override {
      m_files.clock += m_files.per_call;
      if (m_files.refuse_direct_on_read) m_direct = false;
      if (m_files.read_error && m_at >= m_files.read_error_after)
        return gpuenv::make_error(ErrorKind::environment, *m_files.read_error, "reading: Input/output error", "fake", "");
      std::size_t n = std::min<std::size_t>(size, m_bytes.size() - m_at);
      if (m_files.short_read > 0) n = std::min(n, m_files.short_read);
      std::memcpy(buffer, m_bytes.data() + m_at, n);
      if (m_files.corrupt && n > 0) buffer[0] = static_cast<std::byte>(~static_cast<unsigned char>(buffer[0]));
      m_at += n;
      return n;
    }

   private:
    FakeDataFiles& m_files;
    const std::string& m_bytes;
    bool m_direct;
    std::size_t m_at = 0;
  };

  class Writer final : public validate::DataWriteFile {
   public:
    Writer(FakeDataFiles& files, std::string& bytes) : m_files(files), m_bytes(bytes) {}
    [[nodiscard]] bool direct() const override { return m_files.direct; }
    Status write(const std::byte* buffer, std::size_t size) override {
      m_files.clock += m_files.per_call;
      if (m_files.write_error)
        return gpuenv::make_error(ErrorKind::environment, *m_files.write_error, "writing: No space left on device", "fake", "");
      m_bytes.append(reinterpret_cast<const char*>(buffer), size);
      return ok_status();
    }
    Status finish() override { return ok_status(); }

   private:
    FakeDataFiles& m_files;
    std::string& m_bytes;
  };
};

}  // namespace gpuenv::testing
