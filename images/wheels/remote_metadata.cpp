#include "images/wheels/remote_metadata.hpp"

#include <archive.h>
#include <archive_entry.h>

#include <algorithm>
#include <memory>

#include "images/wheels/markers.hpp"

namespace gpuenv::images {
namespace {

constexpr std::uint64_t k_tail = 64 * 1024 + 22;  // the end record plus the longest zip comment
constexpr std::uint64_t k_max_metadata = 16u << 20;

std::uint32_t u16(std::string_view s, std::size_t at) {
  return static_cast<std::uint32_t>(static_cast<unsigned char>(s[at])) | static_cast<std::uint32_t>(static_cast<unsigned char>(s[at + 1])) << 8;
}
std::uint32_t u32(std::string_view s, std::size_t at) { return u16(s, at) | u16(s, at + 2) << 16; }

Error unreadable(const std::string& url, const std::string& why) {
  return make_error(ErrorKind::environment, "wheel.remote_zip", "cannot read the wheel's METADATA with range requests: " + why, url,
                    "gpuenv falls back to downloading the whole wheel");
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

Result<std::string> remote_wheel_metadata(Fetcher& fetcher, const std::string& url, std::uint64_t size, const std::string& project) {
  if (size < 22) return unreadable(url, "the file is too small to be a zip");
  const std::uint64_t tail_start = size > k_tail ? size - k_tail : 0;
  auto tail = fetcher.get_range(url, tail_start, size - tail_start);
  if (!tail) return std::move(tail).error();
  // End of central directory record: the last "PK\5\6".
  const auto eocd = tail->rfind(std::string_view("PK\x05\x06", 4));
  if (eocd == std::string::npos || tail->size() - eocd < 22) return unreadable(url, "no end-of-central-directory record");
  const std::uint64_t cd_size = u32(*tail, eocd + 12);
  const std::uint64_t cd_offset = u32(*tail, eocd + 16);
  if (cd_offset == 0xFFFFFFFFu || cd_size == 0xFFFFFFFFu) return unreadable(url, "ZIP64 archives are not read this way");
  if (cd_offset + cd_size > size) return unreadable(url, "the central directory lies outside the file");
  std::string cd;
  if (cd_offset >= tail_start) {
    cd = tail->substr(static_cast<std::size_t>(cd_offset - tail_start), static_cast<std::size_t>(cd_size));
  } else {
    auto got = fetcher.get_range(url, cd_offset, cd_size);
    if (!got) return std::move(got).error();
    cd = std::move(*got);
  }
  // Find <name>-<version>.dist-info/METADATA for this project.
  for (std::size_t at = 0; at + 46 <= cd.size();) {
    if (u32(cd, at) != 0x02014b50u) return unreadable(url, "bad central directory entry");
    const std::uint32_t method = u16(cd, at + 10);
    const std::uint64_t csize = u32(cd, at + 20);
    const std::uint64_t usize = u32(cd, at + 24);
    const std::size_t name_len = u16(cd, at + 28), extra_len = u16(cd, at + 30), comment_len = u16(cd, at + 32);
    const std::uint64_t local = u32(cd, at + 42);
    if (at + 46 + name_len > cd.size()) return unreadable(url, "truncated central directory");
    const std::string name = cd.substr(at + 46, name_len);
    at += 46 + name_len + extra_len + comment_len;
    const auto slash = name.find('/');
    if (slash == std::string::npos || name.substr(slash + 1) != "METADATA" || !ends_with(name.substr(0, slash), ".dist-info")) continue;
    const auto dash = name.find('-');
    if (dash == std::string::npos || dash > slash || canonicalize_name(name.substr(0, dash)) != project) continue;
    if (usize > k_max_metadata || csize > k_max_metadata) return unreadable(url, "METADATA is implausibly large");
    if (method != 0 && method != 8) return unreadable(url, "METADATA uses compression method " + std::to_string(method));
    // The local header (30 bytes, its own name and extra field), the data, and room for a data descriptor.
    const std::uint64_t want = std::min<std::uint64_t>(30 + name_len + 1024 + csize + 16, size - local);
    auto member = fetcher.get_range(url, local, want);
    if (!member) return std::move(member).error();
    if (member->size() < 30 || u32(*member, 0) != 0x04034b50u) return unreadable(url, "bad local header");
    const std::size_t data_at = 30 + u16(*member, 26) + u16(*member, 28);
    if (data_at + csize > member->size()) return unreadable(url, "local header extra field larger than expected");
    if (method == 0) return member->substr(data_at, static_cast<std::size_t>(csize));
    // Deflated: let libarchive's streaming zip reader inflate the single member from its local header.
    std::unique_ptr<archive, decltype(&archive_read_free)> a(archive_read_new(), &archive_read_free);
    archive_read_support_format_zip_streamable(a.get());
    if (archive_read_open_memory(a.get(), member->data(), member->size()) != ARCHIVE_OK) return unreadable(url, "cannot open the member");
    archive_entry* e = nullptr;
    if (archive_read_next_header(a.get(), &e) != ARCHIVE_OK) return unreadable(url, "cannot read the member header");
    std::string text;
    char buf[16384];
    la_ssize_t n = 0;
    while ((n = archive_read_data(a.get(), buf, sizeof buf)) > 0) {
      text.append(buf, static_cast<std::size_t>(n));
      if (text.size() > k_max_metadata) return unreadable(url, "METADATA is implausibly large");
    }
    if (n < 0 || text.size() != usize) return unreadable(url, "cannot inflate METADATA");
    return text;
  }
  return unreadable(url, "no " + project + "-*.dist-info/METADATA in the central directory");
}

}  // namespace gpuenv::images
