#include "packages/wheels/remote_metadata.hpp"

#include <archive.h>
#include <archive_entry.h>

#include <algorithm>
#include <memory>
#include <string_view>

#include "packages/wheels/markers.hpp"

namespace gpuenv::packages {
namespace {

constexpr std::uint64_t k_eocd_size = 22;
constexpr std::uint64_t k_max_comment = 0xFFFF;
constexpr std::uint64_t k_zip64_locator_size = 20;
constexpr std::uint64_t k_zip64_record_size = 56;  // without the (rare) extensible data sector
// The end record, the longest zip comment, and the ZIP64 locator and record that writers put just before them,
// so one request usually holds every end record.
constexpr std::uint64_t k_tail = k_eocd_size + k_max_comment + k_zip64_locator_size + k_zip64_record_size;
constexpr std::uint64_t k_cd_entry_size = 46;
constexpr std::uint64_t k_local_header_size = 30;
constexpr std::uint64_t k_max_metadata = 16u << 20;
// A wheel with 100,000 files has a central directory of about 10 MiB; anything larger is not worth ranging.
constexpr std::uint64_t k_max_central_directory = 64u << 20;
constexpr std::uint32_t k_sig_zip64_record = 0x06064b50u;
constexpr std::uint32_t k_sig_zip64_locator = 0x07064b50u;
constexpr std::uint32_t k_sig_cd_entry = 0x02014b50u;
constexpr std::uint32_t k_sig_local = 0x04034b50u;
constexpr std::uint16_t k_zip64_extra_id = 0x0001;
constexpr std::uint32_t k_marked32 = 0xFFFFFFFFu;  // "the value is in the ZIP64 record or extra field"
constexpr std::uint32_t k_marked16 = 0xFFFFu;

std::uint32_t u16(std::string_view s, std::size_t at) {
  return static_cast<std::uint32_t>(static_cast<unsigned char>(s[at])) | static_cast<std::uint32_t>(static_cast<unsigned char>(s[at + 1])) << 8;
}
std::uint32_t u32(std::string_view s, std::size_t at) { return u16(s, at) | u16(s, at + 2) << 16; }
std::uint64_t u64(std::string_view s, std::size_t at) { return u32(s, at) | static_cast<std::uint64_t>(u32(s, at + 4)) << 32; }

Error unreadable(const std::string& url, const std::string& why) {
  return make_error(ErrorKind::environment, "wheel.remote_zip", "cannot read the wheel's METADATA with range requests: " + why, url,
                    "gpuenv falls back to downloading the whole wheel");
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string str(std::uint64_t v) { return std::to_string(v); }

/// `length` bytes at `offset`, or an error when the server answers with another length (the index's size is
/// then wrong, and offsets computed from it would point at other bytes).
Result<std::string> get_exact(Fetcher& fetcher, const std::string& url, std::uint64_t offset, std::uint64_t length,
                              const std::string& what) {
  auto got = fetcher.get_range(url, offset, length);
  if (!got) return std::move(got).error();
  if (got->size() != length) {
    return unreadable(url, "asked for the " + str(length) + " bytes of " + what + " at offset " + str(offset) + ", got " +
                               str(got->size()) + " (the index may give a wrong size)");
  }
  return got;
}

/// Where the central directory lies and how many entries it claims.
struct DirectoryLocation {
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::uint64_t entries = 0;
  std::uint64_t end = 0;  ///< where the end records start: the directory must end by here
};

/// Reads the ZIP64 end record the locator at `locator_at` (an offset in `tail`) points to.
Result<DirectoryLocation> read_zip64_end(Fetcher& fetcher, const std::string& url, std::string_view tail, std::uint64_t tail_start,
                                         std::size_t locator_at) {
  const std::uint32_t record_disk = u32(tail, locator_at + 4);
  const std::uint64_t record_at = u64(tail, locator_at + 8);
  const std::uint32_t disks = u32(tail, locator_at + 16);
  if (record_disk != 0 || disks > 1) {
    return unreadable(url, "the ZIP64 locator puts the end record on disk " + str(record_disk) + " of " + str(disks) +
                               "; archives split over several disks are not read");
  }
  const std::uint64_t locator_offset = tail_start + locator_at;
  if (record_at > locator_offset || locator_offset - record_at < k_zip64_record_size) {
    return unreadable(url, "the ZIP64 locator at offset " + str(locator_offset) + " points at offset " + str(record_at) +
                               ", which leaves no room for the ZIP64 end record before the locator");
  }
  std::string fetched;
  std::string_view record;
  if (record_at >= tail_start) {
    record = tail.substr(static_cast<std::size_t>(record_at - tail_start), k_zip64_record_size);
  } else {
    auto got = get_exact(fetcher, url, record_at, k_zip64_record_size, "the ZIP64 end record");
    if (!got) return std::move(got).error();
    fetched = std::move(*got);
    record = fetched;
  }
  if (u32(record, 0) != k_sig_zip64_record) {
    return unreadable(url, "no ZIP64 end-of-central-directory record at offset " + str(record_at) + ", where the ZIP64 locator points");
  }
  const std::uint64_t record_size = u64(record, 4);  // what follows this field
  if (record_size < k_zip64_record_size - 12 || record_size > locator_offset - record_at - 12) {
    return unreadable(url, "the ZIP64 end record at offset " + str(record_at) + " claims " + str(record_size) +
                               " bytes, which do not fit between its 56 fixed bytes and the locator at offset " + str(locator_offset));
  }
  const std::uint32_t disk = u32(record, 16);
  const std::uint32_t cd_disk = u32(record, 20);
  if (disk != 0 || cd_disk != 0) {
    return unreadable(url, "the ZIP64 end record names disk " + str(disk) + " and a central directory on disk " + str(cd_disk) +
                               "; archives split over several disks are not read");
  }
  DirectoryLocation loc;
  loc.entries = u64(record, 32);
  loc.size = u64(record, 40);
  loc.offset = u64(record, 48);
  loc.end = record_at;
  if (u64(record, 24) != loc.entries) {
    return unreadable(url, "the ZIP64 end record claims " + str(u64(record, 24)) + " entries on this disk but " + str(loc.entries) +
                               " in all");
  }
  return loc;
}

/// Finds the end of central directory record in `tail` (the last `tail.size()` bytes of the file, from
/// `tail_start`) and, for ZIP64 archives, the ZIP64 end record it leads to; checks the directory fits.
Result<DirectoryLocation> locate_directory(Fetcher& fetcher, const std::string& url, std::string_view tail, std::uint64_t tail_start) {
  // The last "PK\5\6" whose comment fits in what follows it (a comment may itself hold the signature).
  std::size_t eocd = std::string_view::npos;
  for (auto at = tail.rfind(std::string_view("PK\x05\x06", 4)); at != std::string_view::npos;
       at = at == 0 ? std::string_view::npos : tail.rfind(std::string_view("PK\x05\x06", 4), at - 1)) {
    if (tail.size() - at >= k_eocd_size && tail.size() - at - k_eocd_size >= u16(tail, at + 20)) {
      eocd = at;
      break;
    }
  }
  if (eocd == std::string_view::npos) return unreadable(url, "no end-of-central-directory record");
  DirectoryLocation loc;
  loc.entries = u16(tail, eocd + 10);
  loc.size = u32(tail, eocd + 12);
  loc.offset = u32(tail, eocd + 16);
  loc.end = tail_start + eocd;
  // A ZIP64 locator right before the end record leads to the ZIP64 end record, whose values replace these
  // (writers put 0xFFFF/0xFFFFFFFF here when a value does not fit, but some write the true small values).
  if (eocd >= k_zip64_locator_size && u32(tail, eocd - k_zip64_locator_size) == k_sig_zip64_locator) {
    auto zip64 = read_zip64_end(fetcher, url, tail, tail_start, eocd - k_zip64_locator_size);
    if (!zip64) return std::move(zip64).error();
    loc = *zip64;
  } else if (loc.size == k_marked32 || loc.offset == k_marked32) {
    return unreadable(url, "the end record marks the central directory's size or offset as ZIP64 (0xFFFFFFFF) but no ZIP64 locator precedes it");
  }
  if (loc.size > loc.end || loc.offset > loc.end - loc.size) {
    return unreadable(url, "the central directory (" + str(loc.size) + " bytes at offset " + str(loc.offset) +
                               ") lies outside the file data, which ends at offset " + str(loc.end));
  }
  if (loc.size > k_max_central_directory) {
    return unreadable(url, "the central directory is " + str(loc.size) + " bytes, more than the " + str(k_max_central_directory) +
                               " read with range requests");
  }
  if (loc.entries > loc.size / k_cd_entry_size) {
    return unreadable(url, "the end record claims " + str(loc.entries) + " entries, more than a central directory of " +
                               str(loc.size) + " bytes can hold");
  }
  return loc;
}

/// The fields of one central directory entry that are used, with the ZIP64 values applied.
struct DirectoryEntry {
  std::string name;
  std::uint32_t method = 0;
  std::uint64_t compressed = 0;
  std::uint64_t uncompressed = 0;
  std::uint64_t local_offset = 0;
  std::uint32_t disk = 0;
};

/// Replaces the entry's values marked 0xFFFFFFFF (0xFFFF for the disk) by those of the ZIP64 extended
/// information extra field in `extra`, which holds only the marked ones, in APPNOTE's order.
Status apply_zip64_extra(const std::string& url, std::string_view extra, DirectoryEntry& e) {
  const bool need_uncompressed = e.uncompressed == k_marked32;
  const bool need_compressed = e.compressed == k_marked32;
  const bool need_offset = e.local_offset == k_marked32;
  const bool need_disk = e.disk == k_marked16;
  if (!need_uncompressed && !need_compressed && !need_offset && !need_disk) return ok_status();
  for (std::size_t at = 0; extra.size() - at >= 4;) {
    const std::uint32_t id = u16(extra, at);
    const std::size_t len = u16(extra, at + 2);
    if (len > extra.size() - at - 4) {
      return unreadable(url, "the extra field of " + e.name + " is truncated (a " + str(len) + "-byte field in " + str(extra.size() - at - 4) +
                                 " remaining bytes)");
    }
    if (id != k_zip64_extra_id) {
      at += 4 + len;
      continue;
    }
    const std::string_view field = extra.substr(at + 4, len);
    std::size_t pos = 0;
    const auto take = [&](std::uint64_t& value, std::size_t width) {
      if (field.size() - pos < width) return false;
      value = width == 8 ? u64(field, pos) : u32(field, pos);
      pos += width;
      return true;
    };
    std::uint64_t disk = e.disk;
    if ((need_uncompressed && !take(e.uncompressed, 8)) || (need_compressed && !take(e.compressed, 8)) ||
        (need_offset && !take(e.local_offset, 8)) || (need_disk && !take(disk, 4))) {
      return unreadable(url, "the ZIP64 extra field of " + e.name + " is " + str(len) + " bytes, too short for the values its entry marks as ZIP64");
    }
    e.disk = static_cast<std::uint32_t>(disk);
    return ok_status();
  }
  return unreadable(url, e.name + " marks its sizes or offset as ZIP64 (0xFFFFFFFF) but has no ZIP64 extra field");
}

}  // namespace

Result<std::string> remote_wheel_metadata(Fetcher& fetcher, const std::string& url, std::uint64_t size, const std::string& project) {
  if (size < k_eocd_size) return unreadable(url, "the file is too small to be a zip");
  const std::uint64_t tail_start = size > k_tail ? size - k_tail : 0;
  auto tail = get_exact(fetcher, url, tail_start, size - tail_start, "the end of the file");
  if (!tail) return std::move(tail).error();
  auto dir = locate_directory(fetcher, url, *tail, tail_start);
  if (!dir) return std::move(dir).error();
  std::string cd;
  if (dir->offset >= tail_start) {
    cd = tail->substr(static_cast<std::size_t>(dir->offset - tail_start), static_cast<std::size_t>(dir->size));
  } else {
    auto got = get_exact(fetcher, url, dir->offset, dir->size, "the central directory");
    if (!got) return std::move(got).error();
    cd = std::move(*got);
  }
  // Find <name>-<version>.dist-info/METADATA for this project.
  for (std::size_t at = 0; at < cd.size();) {
    if (cd.size() - at < k_cd_entry_size) return unreadable(url, "truncated central directory");
    if (u32(cd, at) != k_sig_cd_entry) return unreadable(url, "bad central directory entry at offset " + str(at) + " of the directory");
    DirectoryEntry e;
    e.method = u16(cd, at + 10);
    e.compressed = u32(cd, at + 20);
    e.uncompressed = u32(cd, at + 24);
    const std::size_t name_len = u16(cd, at + 28), extra_len = u16(cd, at + 30), comment_len = u16(cd, at + 32);
    e.disk = u16(cd, at + 34);
    e.local_offset = u32(cd, at + 42);
    if (k_cd_entry_size + name_len + extra_len + comment_len > cd.size() - at) return unreadable(url, "truncated central directory");
    e.name = cd.substr(at + k_cd_entry_size, name_len);
    const std::string_view extra = std::string_view(cd).substr(at + k_cd_entry_size + name_len, extra_len);
    at += k_cd_entry_size + name_len + extra_len + comment_len;
    const std::string& name = e.name;
    const auto slash = name.find('/');
    if (slash == std::string::npos || name.substr(slash + 1) != "METADATA" || !ends_with(name.substr(0, slash), ".dist-info")) continue;
    const auto dash = name.find('-');
    if (dash == std::string::npos || dash > slash || canonicalize_name(name.substr(0, dash)) != project) continue;
    if (auto st = apply_zip64_extra(url, extra, e); !st) return std::move(st).error();
    if (e.uncompressed > k_max_metadata || e.compressed > k_max_metadata) {
      return unreadable(url, "METADATA is implausibly large (" + str(e.compressed) + " bytes compressed, " + str(e.uncompressed) + " bytes)");
    }
    if (e.method != 0 && e.method != 8) return unreadable(url, "METADATA uses compression method " + str(e.method));
    if (e.method == 0 && e.compressed != e.uncompressed) {
      return unreadable(url, "the stored METADATA has " + str(e.compressed) + " bytes of data for " + str(e.uncompressed) + " bytes of text");
    }
    // The member (local header, name, data) lies before the central directory.
    if (e.local_offset > dir->offset || dir->offset - e.local_offset < k_local_header_size + name_len + e.compressed) {
      return unreadable(url, "the local header of " + name + " at offset " + str(e.local_offset) + " (" + str(e.compressed) +
                                 " bytes of data) does not fit before the central directory at offset " + str(dir->offset));
    }
    // The local header (30 bytes, its own name and extra field), the data, and room for a ZIP64 data descriptor.
    const std::uint64_t want = std::min<std::uint64_t>(k_local_header_size + name_len + 1024 + e.compressed + 24, size - e.local_offset);
    auto member = fetcher.get_range(url, e.local_offset, want);
    if (!member) return std::move(member).error();
    if (member->size() < k_local_header_size || u32(*member, 0) != k_sig_local) return unreadable(url, "bad local header");
    const std::size_t data_at = k_local_header_size + u16(*member, 26) + u16(*member, 28);
    if (data_at > member->size() || member->size() - data_at < e.compressed) return unreadable(url, "local header extra field larger than expected");
    if (e.method == 0) return member->substr(data_at, static_cast<std::size_t>(e.compressed));
    // Deflated: let libarchive's streaming zip reader inflate the single member from its local header.
    std::unique_ptr<archive, decltype(&archive_read_free)> a(archive_read_new(), &archive_read_free);
    archive_read_support_format_zip_streamable(a.get());
    if (archive_read_open_memory(a.get(), member->data(), member->size()) != ARCHIVE_OK) return unreadable(url, "cannot open the member");
    archive_entry* entry = nullptr;
    if (archive_read_next_header(a.get(), &entry) != ARCHIVE_OK) return unreadable(url, "cannot read the member header");
    std::string text;
    char buf[16384];
    la_ssize_t n = 0;
    while ((n = archive_read_data(a.get(), buf, sizeof buf)) > 0) {
      text.append(buf, static_cast<std::size_t>(n));
      if (text.size() > k_max_metadata) return unreadable(url, "METADATA is implausibly large");
    }
    if (n < 0 || text.size() != e.uncompressed) return unreadable(url, "cannot inflate METADATA");
    return text;
  }
  return unreadable(url, "no " + project + "-*.dist-info/METADATA in the central directory");
}

}  // namespace gpuenv::packages
