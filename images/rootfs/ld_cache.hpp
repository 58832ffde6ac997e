#pragma once
// The dynamic linker's cache (/etc/ld.so.cache) of an image, written without running ldconfig.
//
// libc-bin's trigger runs `ldconfig` after packages are unpacked; gpuenv runs no maintainer scripts, so it
// reproduces the result: without the cache, ld.so finds nothing in the directories /etc/ld.so.conf.d names
// (CUDA's /usr/local/cuda-X/lib64, for example). The rules follow glibc 2.36's ldconfig, checked against it
// (`ldconfig -r ROOT` then `ldconfig -p`):
// - Directories: those /etc/ld.so.conf names, in order, following `include` globs (relative patterns are
//   relative to the including file's directory; matches in byte order), then the system directories
//   /lib/<triplet>, /usr/lib/<triplet>, /lib, /usr/lib. A directory reached twice (by a symlink, as /lib
//   and /usr/lib in a merged-/usr root) is scanned once, under the first name. `hwcap` lines are ignored.
// - Every path is resolved inside the image (an absolute symlink means the image's root, as in a chroot).
// - In each directory, regular files and symlinks to regular files whose names start with "lib" or "ld-"
//   and contain ".so" are read; files that are not ELF shared objects of a known ABI are skipped. The key is
//   the library's SONAME (the file name when it has none). A symlink keeps its own name as key when that is
//   its target's SONAME or a development link ("libz.so" for "libz.so.1"); otherwise it counts as the file it
//   points to. Of several files with one key in a directory, a real file beats a link, then the greater name.
// - The value is DIRECTORY/KEY. Entries are sorted as ld.so's binary search needs (glibc's _dl_cache_libcmp,
//   descending), the greater ABI flags first among equal keys, then in directory order.
// - Only the platform's own libraries are listed (LdCacheOptions::platform); others are skipped with a note.
// - glibc-hwcaps subdirectories are not scanned (no Debian or NVIDIA package ships them today).
// The file is the "glibc-ld.so.cache1.1" format with a generator extension, the same bytes for the same tree.
#include <cstdint>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "resolver/platform.hpp"

namespace gpuenv::images {

struct LdCacheOptions {
  /// The image's platform: its triplet names the system directories, and only its libraries are listed (an amd64
  /// cache also keeps i386 ones), as that platform's ldconfig does: an x86-64 ldconfig skips the AArch64 libraries
  /// of a multiarch root (checked against glibc 2.36's on Debian 12 with libc6:arm64 installed).
  resolver::Platform platform = resolver::native_platform();
  bool little_endian = true;                            ///< the image's byte order
  std::string generator = "gpuenv";                     ///< recorded in the cache's generator extension
};

struct LdCacheEntry {
  std::string key;   ///< what DT_NEEDED names: the SONAME
  std::string path;  ///< absolute path inside the image
  std::uint32_t flags = 0;  ///< ABI flags (FLAG_ELF_LIBC6 | FLAG_X8664_LIB64 = 0x0303, ...)
};

struct LdCache {
  std::vector<std::string> directories;  ///< scanned, in order
  std::vector<LdCacheEntry> entries;     ///< in cache order
  std::vector<std::string> notes;        ///< skipped files and directories, one line each
};

/// glibc's _dl_cache_libcmp: digits compare as numbers; <0, 0 or >0.
int ld_cache_compare(std::string_view a, std::string_view b);

/// Scans the image under `root` (rules above). Errors (ErrorKind::environment): `ldcache.conf` for an
/// unreadable or too deeply nested configuration, `ldcache.io` when `root` cannot be opened.
Result<LdCache> scan_ld_cache(const std::string& root, const LdCacheOptions& options);

/// The cache file's bytes.
std::string render_ld_cache(const LdCache& cache, const LdCacheOptions& options);

/// Scans and writes `root`/etc/ld.so.cache atomically (temporary file, fsync, rename), resolving etc/ inside
/// the image. Errors as scan_ld_cache, and `ldcache.io` when it cannot be written.
Result<LdCache> write_ld_cache(const std::string& root, const LdCacheOptions& options);

}  // namespace gpuenv::images
