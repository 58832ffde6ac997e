#include "images/elf/elf.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

namespace gpuenv::images {
namespace {

constexpr std::uint32_t k_pt_dynamic = 2, k_pt_interp = 3, k_pt_load = 1;
constexpr std::uint64_t k_dt_null = 0, k_dt_needed = 1, k_dt_strtab = 5, k_dt_strsz = 10, k_dt_soname = 14,
                        k_dt_rpath = 15, k_dt_runpath = 29;
constexpr std::size_t k_max_program_headers = 4096;
constexpr std::uint64_t k_max_dynamic_bytes = 1u << 20;
constexpr std::uint64_t k_max_string_table = 64u << 20;
constexpr std::size_t k_max_path = 4096;

/// Fixed-width integers in the file's byte order.
class Decoder {
 public:
  explicit Decoder(bool little) : m_little(little) {}
  [[nodiscard]] std::uint64_t get(const char* p, int width) const {
    std::uint64_t v = 0;
    for (int i = 0; i < width; ++i) {
      const auto byte = static_cast<std::uint64_t>(static_cast<unsigned char>(p[m_little ? i : width - 1 - i]));
      v |= byte << (8 * i);
    }
    return v;
  }

 private:
  bool m_little;
};

struct Segment {
  std::uint32_t type;
  std::uint64_t offset, vaddr, filesz;
};

Error malformed(std::string_view origin, const std::string& what) {
  return make_error(ErrorKind::environment, "elf.malformed", "malformed ELF file: " + what, std::string(origin),
                    "the file is truncated or damaged; reinstall the package it came from");
}

}  // namespace

bool is_elf_magic(std::string_view first_bytes) { return first_bytes.size() >= 4 && first_bytes.substr(0, 4) == "\x7f" "ELF"; }

Result<ElfInfo> parse_elf(const ElfReadAt& read_at, std::uint64_t file_size, std::string_view origin) {
  char ident[16];
  if (file_size < 4 || !read_at(0, 4, ident) || !is_elf_magic(std::string_view(ident, 4)))
    return make_error(ErrorKind::environment, "elf.not_elf", "not an ELF file", std::string(origin), "");
  if (file_size < sizeof ident || !read_at(0, sizeof ident, ident)) return malformed(origin, "truncated ELF identification");
  ElfInfo info;
  if (ident[4] != 1 && ident[4] != 2) return malformed(origin, "unknown class " + std::to_string(ident[4]));
  if (ident[5] != 1 && ident[5] != 2) return malformed(origin, "unknown byte order " + std::to_string(ident[5]));
  info.bits = ident[4] == 1 ? 32 : 64;
  info.little_endian = ident[5] == 1;
  const Decoder d(info.little_endian);
  const bool wide = info.bits == 64;
  const int word = wide ? 8 : 4;
  char header[64];
  const std::size_t header_size = wide ? 64 : 52;
  if (file_size < header_size || !read_at(0, header_size, header)) return malformed(origin, "truncated ELF header");
  info.type = static_cast<std::uint16_t>(d.get(header + 16, 2));
  info.machine = static_cast<std::uint16_t>(d.get(header + 18, 2));
  const std::uint64_t phoff = d.get(header + (wide ? 32 : 28), word);
  info.flags = static_cast<std::uint32_t>(d.get(header + (wide ? 48 : 36), 4));
  const std::uint64_t phentsize = d.get(header + (wide ? 54 : 42), 2);
  const std::uint64_t phnum = d.get(header + (wide ? 56 : 44), 2);
  const std::uint64_t min_entry = wide ? 56 : 32;
  if (phnum == 0) return info;  // a relocatable object or a file without segments
  if (phentsize < min_entry || phnum > k_max_program_headers) return malformed(origin, "bad program header table size");
  if (phoff > file_size || phentsize * phnum > file_size - phoff) return malformed(origin, "program header table past the end of the file");
  std::string table(phentsize * phnum, '\0');
  if (!read_at(phoff, table.size(), table.data())) return malformed(origin, "cannot read the program header table");
  std::vector<Segment> loads;
  std::optional<Segment> dynamic;
  for (std::uint64_t i = 0; i < phnum; ++i) {
    const char* p = table.data() + i * phentsize;
    Segment s{};
    s.type = static_cast<std::uint32_t>(d.get(p, 4));
    if (wide) {
      s.offset = d.get(p + 8, 8);
      s.vaddr = d.get(p + 16, 8);
      s.filesz = d.get(p + 32, 8);
    } else {
      s.offset = d.get(p + 4, 4);
      s.vaddr = d.get(p + 8, 4);
      s.filesz = d.get(p + 16, 4);
    }
    if (s.type != k_pt_load && s.type != k_pt_dynamic && s.type != k_pt_interp) continue;
    if (s.offset > file_size || s.filesz > file_size - s.offset) return malformed(origin, "a segment lies past the end of the file");
    if (s.type == k_pt_load) loads.push_back(s);
    if (s.type == k_pt_dynamic) dynamic = s;
    if (s.type == k_pt_interp) {
      if (s.filesz == 0 || s.filesz > k_max_path) return malformed(origin, "bad interpreter path size");
      std::string path(s.filesz, '\0');
      if (!read_at(s.offset, path.size(), path.data())) return malformed(origin, "cannot read the interpreter path");
      info.interpreter = path.substr(0, path.find('\0'));
    }
  }
  if (!dynamic) return info;
  info.has_dynamic = true;
  if (dynamic->filesz > k_max_dynamic_bytes) return malformed(origin, "dynamic segment too large");
  std::string dyn(dynamic->filesz, '\0');
  if (!read_at(dynamic->offset, dyn.size(), dyn.data())) return malformed(origin, "cannot read the dynamic segment");
  const std::size_t entry = 2 * static_cast<std::size_t>(word);
  std::uint64_t strtab_vaddr = 0, strsz = 0;
  bool have_strtab = false;
  struct Ref {
    std::uint64_t tag, offset;
  };
  std::vector<Ref> refs;
  for (std::size_t off = 0; off + entry <= dyn.size(); off += entry) {
    const std::uint64_t tag = d.get(dyn.data() + off, word);
    const std::uint64_t val = d.get(dyn.data() + off + word, word);
    if (tag == k_dt_null) break;
    if (tag == k_dt_strtab) {
      strtab_vaddr = val;
      have_strtab = true;
    } else if (tag == k_dt_strsz) {
      strsz = val;
    } else if (tag == k_dt_needed || tag == k_dt_soname || tag == k_dt_rpath || tag == k_dt_runpath) {
      refs.push_back({tag, val});
    }
  }
  if (refs.empty()) return info;
  if (!have_strtab || strsz == 0) return malformed(origin, "dynamic section names strings but has no string table");
  if (strsz > k_max_string_table) return malformed(origin, "dynamic string table too large");
  // DT_STRTAB is an address: find the loaded segment that holds it to get its place in the file.
  std::optional<std::uint64_t> strtab_offset;
  for (const auto& s : loads)
    if (strtab_vaddr >= s.vaddr && strtab_vaddr - s.vaddr < s.filesz) {
      strtab_offset = s.offset + (strtab_vaddr - s.vaddr);
      break;
    }
  if (!strtab_offset) return malformed(origin, "the dynamic string table is not in any loaded segment");
  if (*strtab_offset > file_size || strsz > file_size - *strtab_offset) return malformed(origin, "dynamic string table past the end of the file");
  std::string strings(strsz, '\0');
  if (!read_at(*strtab_offset, strings.size(), strings.data())) return malformed(origin, "cannot read the dynamic string table");
  for (const auto& r : refs) {
    if (r.offset >= strings.size()) return malformed(origin, "a dynamic entry points outside the string table");
    const std::size_t end = strings.find('\0', r.offset);
    if (end == std::string::npos) return malformed(origin, "an unterminated dynamic string");
    std::string value = strings.substr(r.offset, end - r.offset);
    switch (r.tag) {
      case k_dt_needed: info.needed.push_back(std::move(value)); break;
      case k_dt_soname: info.soname = std::move(value); break;
      case k_dt_rpath: info.rpath = std::move(value); break;
      default: info.runpath = std::move(value); break;
    }
  }
  return info;
}

Result<ElfInfo> parse_elf(std::string_view bytes, std::string_view origin) {
  return parse_elf(
      [&](std::uint64_t offset, std::size_t length, char* out) {
        if (offset > bytes.size() || length > bytes.size() - offset) return false;
        std::memcpy(out, bytes.data() + offset, length);
        return true;
      },
      bytes.size(), origin);
}

/// The `elf.io` error of a file that cannot be read (no hint: the path says it all).
constexpr IoArea k_elf_io{"elf.io", ""};

Result<ElfInfo> parse_elf_fd(int fd, std::string_view origin) {
  const off_t size = ::lseek(fd, 0, SEEK_END);
  if (size < 0)
    return io_error(k_elf_io, "cannot read", std::string(origin));
  return parse_elf(
      [fd](std::uint64_t offset, std::size_t length, char* out) {
        std::size_t done = 0;
        while (done < length) {
          const ssize_t r = ::pread(fd, out + done, length - done, static_cast<off_t>(offset + done));
          if (r < 0 && errno == EINTR) continue;
          if (r <= 0) return false;
          done += static_cast<std::size_t>(r);
        }
        return true;
      },
      static_cast<std::uint64_t>(size), origin);
}

std::uint32_t ld_cache_flags(const ElfInfo& elf) {
  // glibc's sysdeps/generic/ldconfig.h: FLAG_ELF_LIBC6 = 0x0003 plus FLAG_*_LIB64 and friends.
  constexpr std::uint32_t libc6 = 0x0003;
  constexpr std::uint16_t em_386 = 3, em_ppc64 = 21, em_s390 = 22, em_arm = 40, em_x86_64 = 62, em_aarch64 = 183, em_riscv = 243;
  switch (elf.machine) {
    case em_x86_64: return libc6 | (elf.bits == 64 ? 0x0300u : 0x0800u);
    case em_386: {
      // glibc's generic reader: FLAG_ELF, raised to FLAG_ELF_LIBC6 when the library is or needs libc.so.6 or
      // libm.so.6 (so the 32-bit ld-linux.so.2 itself stays FLAG_ELF).
      if (elf.bits != 32) return 0;
      auto known = [](const std::string& n) { return n == "libc.so.6" || n == "libm.so.6"; };
      const bool glibc = known(elf.soname) || std::any_of(elf.needed.begin(), elf.needed.end(), known);
      return glibc ? libc6 : 0x0001u;
    }
    case em_aarch64: return elf.bits == 64 ? libc6 | 0x0a00u : 0;
    case em_ppc64: return elf.bits == 64 ? libc6 | 0x0500u : 0;
    case em_s390: return elf.bits == 64 ? libc6 | 0x0400u : libc6;
    case em_arm: return elf.bits == 32 ? libc6 | ((elf.flags & 0x400u) != 0 ? 0x0900u : 0x0b00u) : 0;
    case em_riscv:
      if (elf.bits != 64) return 0;
      switch (elf.flags & 0x6u) {
        case 0x0: return libc6 | 0x0f00u;  // soft float
        case 0x4: return libc6 | 0x1000u;  // double float
        default: return 0;
      }
    default: return 0;
  }
}

}  // namespace gpuenv::images
