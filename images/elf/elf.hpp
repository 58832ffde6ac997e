#pragma once
// Reading what the dynamic linker needs from an ELF file: class, byte order, machine, type, the interpreter,
// and the dynamic section's SONAME, NEEDED, RPATH and RUNPATH. Only the ELF header, the program headers, the
// dynamic segment and its string table are read (never the whole file: CUDA libraries run to hundreds of
// megabytes), and every offset and size is checked against the file before it is used.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"

namespace gpuenv::images {

struct ElfInfo {
  int bits = 64;                 ///< 32 or 64
  bool little_endian = true;
  std::uint16_t type = 0;        ///< e_type: 2 executable, 3 shared object (or position-independent executable)
  std::uint16_t machine = 0;     ///< e_machine: 62 x86-64, 183 AArch64, 3 i386, ...
  std::uint32_t flags = 0;       ///< e_flags (the ARM and RISC-V float ABI)
  bool has_dynamic = false;      ///< a PT_DYNAMIC segment is present (dynamically linked)
  std::string interpreter;       ///< PT_INTERP, e.g. "/lib64/ld-linux-x86-64.so.2"; empty when none
  std::string soname;            ///< DT_SONAME; empty when none
  std::vector<std::string> needed;  ///< DT_NEEDED, in order
  std::string rpath, runpath;    ///< DT_RPATH, DT_RUNPATH; empty when none
};

/// Reads `length` bytes at `offset` into `out`; false when the range is not inside the file.
using ElfReadAt = std::function<bool(std::uint64_t offset, std::size_t length, char* out)>;

/// True when the first bytes are the ELF magic (\x7fELF).
bool is_elf_magic(std::string_view first_bytes);

/// Parses through `read_at` (file of `file_size` bytes). Errors (ErrorKind::environment): `elf.not_elf` when the
/// magic is missing, `elf.malformed` for a truncated or inconsistent header, program header table, dynamic
/// segment or string table (naming which and `origin`).
Result<ElfInfo> parse_elf(const ElfReadAt& read_at, std::uint64_t file_size, std::string_view origin);

/// Parses an ELF image held in memory.
Result<ElfInfo> parse_elf(std::string_view bytes, std::string_view origin);

/// Parses an open file with pread (the descriptor's offset is not moved).
Result<ElfInfo> parse_elf_fd(int fd, std::string_view origin);

/// The glibc ld.so.cache flags for a library of this class and machine (FLAG_ELF_LIBC6 plus the
/// architecture bits ld.so checks, as glibc 2.36's ldconfig assigns them; checked against it for x86-64 and
/// i386), or 0 when the dynamic linker's cache has no entry type for it.
std::uint32_t ld_cache_flags(const ElfInfo& elf);

}  // namespace gpuenv::images
