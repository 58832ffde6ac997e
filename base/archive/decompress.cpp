#include "base/archive/decompress.hpp"

#include <archive.h>
#include <archive_entry.h>

#include <memory>

namespace gpuenv {

Result<std::string> decompress(std::string_view bytes, const std::string& origin, std::uint64_t max_bytes) {
  std::unique_ptr<archive, decltype(&archive_read_free)> a(archive_read_new(), &archive_read_free);
  archive_read_support_filter_all(a.get());
  archive_read_support_format_raw(a.get());
  archive_read_support_format_empty(a.get());  // a compressed empty file: an empty index (Debian's bookworm-updates contrib)
  auto corrupt = [&](const std::string& what) {
    return make_error(ErrorKind::environment, "archive.corrupt", what + ": " + (archive_error_string(a.get()) ? archive_error_string(a.get()) : "unknown error"),
                      origin, "the file is damaged or truncated; fetch it again");
  };
  if (archive_read_open_memory(a.get(), bytes.data(), bytes.size()) != ARCHIVE_OK) return corrupt("cannot open");
  archive_entry* e = nullptr;
  if (const int r = archive_read_next_header(a.get(), &e); r != ARCHIVE_OK) {
    if (bytes.empty() || r == ARCHIVE_EOF) return std::string();
    return corrupt("cannot read");
  }
  std::string out;
  out.reserve(std::min<std::uint64_t>(bytes.size() * 8, max_bytes));
  char buf[1 << 16];
  while (true) {
    const la_ssize_t n = archive_read_data(a.get(), buf, sizeof buf);
    if (n < 0) return corrupt("cannot decompress");
    if (n == 0) break;
    if (out.size() + static_cast<std::size_t>(n) > max_bytes)
      return make_error(ErrorKind::environment, "archive.limit", "decompresses past " + std::to_string(max_bytes) + " bytes", origin,
                        "the file is larger than gpuenv allows (a decompression bomb?)");
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

}  // namespace gpuenv
