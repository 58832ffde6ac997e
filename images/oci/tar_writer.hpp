#pragma once
// A deterministic tar stream for image layers: the bytes depend only on the entries given, never on the
// machine, the clock, the umask or the user. POSIX ustar headers with numeric owners and empty owner names,
// one fixed mtime for every entry, no atime or ctime; a pax extended header ('x') only where ustar cannot hold
// a value (a path or link target longer than ustar's fields, a size of 8 GiB or more), carrying just that key.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "base/error.hpp"

namespace gpuenv::images {

/// Receives the stream's bytes in order; an error stops the writer.
using ByteSink = std::function<Status(const char* data, std::size_t size)>;

struct TarEntry {
  enum class Type { file, directory, symlink, hardlink };
  std::string path;         ///< relative, no leading "/" or "./"; directories without the trailing "/"
  Type type = Type::file;
  std::uint32_t mode = 0644;  ///< permission bits (07777)
  std::uint32_t uid = 0, gid = 0;
  std::uint64_t size = 0;   ///< files only
  std::string link_target;  ///< symlinks: as written; hard links: the earlier entry's path
};

class TarWriter {
 public:
  /// `mtime` (seconds since 1970) goes into every header.
  TarWriter(ByteSink sink, std::int64_t mtime);

  /// Writes one header; a file's `size` bytes must follow through write_data().
  Status add(const TarEntry& entry);
  /// Content of the current file, in pieces; fails when more than its declared size is written.
  Status write_data(const char* data, std::size_t size);
  /// Counts `size` bytes of the current file's content without passing them to the sink: the stream's length
  /// is known from the entries alone (a zstd frame states it up front). The sink then sees headers and padding only.
  Status skip_data(std::uint64_t size);
  /// Pads the current file, writes the end-of-archive blocks. Fails if the last file is short.
  Status finish();

  [[nodiscard]] std::uint64_t bytes_written() const { return m_written; }

 private:
  Status emit(const char* data, std::size_t size);
  Status close_entry();
  Status header(std::string_view name, char type, const TarEntry& entry, std::uint64_t size, std::string_view link);

  ByteSink m_sink;
  std::int64_t m_mtime;
  std::uint64_t m_remaining = 0;  // bytes of the current file still expected
  std::uint64_t m_pad = 0;        // padding after it
  std::uint64_t m_written = 0;
  bool m_finished = false;
};

}  // namespace gpuenv::images
