#include "images/oci/tar_writer.hpp"

#include <array>
#include <cstring>

namespace gpuenv::images {
namespace {

constexpr std::size_t k_block = 512;

Error tar_error(const std::string& what, const std::string& where) {
  return make_error(ErrorKind::internal, "tar.write", what, where, "");
}

/// Writes `value` as zero-padded octal into `field` of `width` bytes (the last byte NUL); false if it overflows.
bool octal(char* field, std::size_t width, std::uint64_t value) {
  std::memset(field, '0', width - 1);
  field[width - 1] = '\0';
  for (std::size_t i = width - 1; i-- > 0;) {
    field[i] = static_cast<char>('0' + (value & 7));
    value >>= 3;
  }
  return value == 0;
}

/// A pax record "LEN key=value\n", where LEN counts the whole record including its own digits.
std::string pax_record(std::string_view key, std::string_view value) {
  const std::size_t body = 1 + key.size() + 1 + value.size() + 1;  // " key=value\n"
  std::size_t len = body + 1;
  while (std::to_string(len).size() + body != len) ++len;
  return std::to_string(len) + " " + std::string(key) + "=" + std::string(value) + "\n";
}

/// Splits a path into ustar's prefix (155) and name (100) at a '/', or returns false.
bool split_ustar(std::string_view path, std::string_view& prefix, std::string_view& name) {
  if (path.size() <= 100) {
    prefix = {};
    name = path;
    return true;
  }
  for (std::size_t slash = path.find('/'); slash != std::string_view::npos; slash = path.find('/', slash + 1)) {
    if (slash <= 155 && path.size() - slash - 1 <= 100 && path.size() - slash - 1 > 0) {
      prefix = path.substr(0, slash);
      name = path.substr(slash + 1);
      return true;
    }
  }
  return false;
}

}  // namespace

TarWriter::TarWriter(ByteSink sink, std::int64_t mtime) : m_sink(std::move(sink)), m_mtime(mtime < 0 ? 0 : mtime) {}

Status TarWriter::emit(const char* data, std::size_t size) {
  m_written += size;
  return m_sink(data, size);
}

Status TarWriter::close_entry() {
  if (m_remaining != 0) return tar_error("file content ended " + std::to_string(m_remaining) + " bytes short of its size", "");
  if (m_pad != 0) {
    static const std::array<char, k_block> zeros{};
    auto st = emit(zeros.data(), m_pad);
    m_pad = 0;
    if (!st) return st;
  }
  return ok_status();
}

Status TarWriter::header(std::string_view name_field, char type, const TarEntry& entry, std::uint64_t size, std::string_view link) {
  std::array<char, k_block> h{};
  std::string_view prefix, name;
  if (!split_ustar(name_field, prefix, name)) {
    // The caller writes a pax header first; the ustar field then carries a truncated, still unique-enough name.
    prefix = {};
    name = name_field.substr(0, 100);
  }
  if (!name.empty()) std::memcpy(h.data(), name.data(), name.size());
  octal(h.data() + 100, 8, entry.mode & 07777);
  octal(h.data() + 108, 8, entry.uid);
  octal(h.data() + 116, 8, entry.gid);
  if (!octal(h.data() + 124, 12, size)) octal(h.data() + 124, 12, 0);  // the pax header holds the real size
  octal(h.data() + 136, 12, static_cast<std::uint64_t>(m_mtime));
  std::memset(h.data() + 148, ' ', 8);
  h[156] = type;
  if (!link.empty()) std::memcpy(h.data() + 157, link.data(), std::min<std::size_t>(link.size(), 100));
  std::memcpy(h.data() + 257, "ustar", 6);
  std::memcpy(h.data() + 263, "00", 2);
  octal(h.data() + 329, 8, 0);
  octal(h.data() + 337, 8, 0);
  if (!prefix.empty()) std::memcpy(h.data() + 345, prefix.data(), prefix.size());
  unsigned sum = 0;
  for (char c : h) sum += static_cast<unsigned char>(c);
  octal(h.data() + 148, 7, sum);
  h[155] = ' ';
  return emit(h.data(), h.size());
}

Status TarWriter::add(const TarEntry& entry) {
  if (m_finished) return tar_error("entry added after finish()", entry.path);
  if (auto st = close_entry(); !st) return st;
  if (entry.path.empty() || entry.path.front() == '/') return tar_error("bad entry path '" + entry.path + "'", entry.path);
  std::string path = entry.path;
  if (entry.type == TarEntry::Type::directory) path += '/';
  const bool file = entry.type == TarEntry::Type::file;
  const std::uint64_t size = file ? entry.size : 0;
  std::string_view prefix, name;
  std::string pax;
  if (!split_ustar(path, prefix, name)) pax += pax_record("path", path);
  if (entry.link_target.size() > 100) pax += pax_record("linkpath", entry.link_target);
  if (size >= (std::uint64_t{1} << 33)) pax += pax_record("size", std::to_string(size));
  if (!pax.empty()) {
    // A fixed name for the extended header, as GNU tar's --pax-option would make deterministic.
    TarEntry x;
    x.mode = 0644;
    if (auto st = header("././@PaxHeader", 'x', x, pax.size(), ""); !st) return st;
    if (auto st = emit(pax.data(), pax.size()); !st) return st;
    if (const std::size_t rem = pax.size() % k_block; rem != 0) {
      static const std::array<char, k_block> zeros{};
      if (auto st = emit(zeros.data(), k_block - rem); !st) return st;
    }
  }
  char type = '0';
  switch (entry.type) {
    case TarEntry::Type::file: type = '0'; break;
    case TarEntry::Type::directory: type = '5'; break;
    case TarEntry::Type::symlink: type = '2'; break;
    case TarEntry::Type::hardlink: type = '1'; break;
  }
  if (auto st = header(path, type, entry, size, entry.link_target); !st) return st;
  m_remaining = size;
  m_pad = (k_block - size % k_block) % k_block;
  return ok_status();
}

Status TarWriter::write_data(const char* data, std::size_t size) {
  if (size > m_remaining) return tar_error("more file content than its declared size", "");
  m_remaining -= size;
  return emit(data, size);
}

Status TarWriter::skip_data(std::uint64_t size) {
  if (size > m_remaining) return tar_error("more file content than its declared size", "");
  m_remaining -= size;
  m_written += size;
  return ok_status();
}

Status TarWriter::finish() {
  if (m_finished) return ok_status();
  if (auto st = close_entry(); !st) return st;
  static const std::array<char, 2 * k_block> zeros{};
  m_finished = true;
  return emit(zeros.data(), zeros.size());
}

}  // namespace gpuenv::images
