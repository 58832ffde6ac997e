#pragma once
// Unpacking archives (tar in any compression libarchive reads, .deb data members) into a root directory
// without ever writing outside it: no absolute paths, no "..", no write through a symlink, hard links only
// to entries inside the tree, no device nodes unless allowed, limits on sizes and compression ratio.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"
#include "base/unique_fd.hpp"

namespace gpuenv {

struct ExtractOptions {
  std::uint64_t max_total_bytes = 32ull << 30;   ///< sum of regular-file sizes
  std::uint64_t max_entry_bytes = 16ull << 30;
  std::uint64_t max_entries = 2'000'000;
  double max_ratio = 400.0;                      ///< unpacked bytes / archive bytes (checked past 64 MiB)
  bool allow_devices = false;                    ///< character/block devices and FIFOs
  /// Paths (normalized, relative, no leading "./") for which this returns false are skipped (docs, man pages).
  std::function<bool(std::string_view path)> keep;
};

/// What one extracted entry was, for package manifests (dpkg status, RECORD).
struct ExtractedEntry {
  enum class Type { file, directory, symlink, hardlink, device, fifo };
  std::string path;  ///< normalized, relative to the root
  Type type = Type::file;
  std::uint32_t mode = 0;
  std::uint32_t uid = 0, gid = 0;  ///< numeric owner as the archive records it (files are written as the caller)
  std::uint64_t size = 0;
  std::string link_target;
};

/// Extracts an archive held in memory (`origin` names it in errors) into `root`, which must exist.
/// A refused entry stops the extraction with ErrorKind::environment, id "archive.unsafe" or
/// "archive.limit"; what was written before stays inside `root` (callers extract into a fresh directory).
Result<std::vector<ExtractedEntry>> extract_archive(std::string_view bytes, const std::string& origin, const std::string& root,
                                                    const ExtractOptions& options);

/// Members of an ar archive (.deb): name and the byte range of its data within `bytes`.
struct ArMember {
  std::string name;
  std::string_view data;
};
/// Parses a Unix ar archive (the .deb container); errors name the offset of the bad header.
Result<std::vector<ArMember>> parse_ar(std::string_view bytes, const std::string& origin);

/// Extracts the data.tar.* member of a .deb (extra members such as _gpgbuilder are tolerated), and returns
/// the control.tar.* member's `control` file text alongside the entries.
struct DebContents {
  std::string control;
  std::string md5sums;    ///< the control member `md5sums`, if shipped
  std::string conffiles;  ///< the control member `conffiles`, if shipped
  std::vector<ExtractedEntry> entries;
};
Result<DebContents> extract_deb(std::string_view bytes, const std::string& origin, const std::string& root, const ExtractOptions& options);

/// Opens (creating what is missing, 0755) the directory REL beneath ROOT_FD, as the extractor does for its own
/// entries: symlinks on the way are followed only while they stay beneath the root (openat2 RESOLVE_BENEATH);
/// one leading outside, or a component that is not a directory, is `archive.unsafe`. ORIGIN names the input.
Result<UniqueFd> open_directory_beneath(int root_fd, const std::string& rel, const std::string& origin);
/// Opens the existing regular file REL beneath ROOT_FD for reading under the same rule; an invalid fd (errno set)
/// when it is missing, not a regular file, or reached only by leaving the root.
UniqueFd open_file_beneath(int root_fd, const std::string& rel);
/// Writes the file REL beneath the directory ROOT whole or not at all (a temporary name, then a rename), its
/// directories made under open_directory_beneath's rule: an existing REL that is a symlink is replaced, never
/// followed, and no directory on the way leads out. For the files gpuenv adds to an image tree after packages
/// were unpacked into it (the lock, the SBOM, loader configuration, passwd). Errors: `archive.unsafe`
/// (ORIGIN names the input), `archive.io`.
Status write_file_beneath(const std::string& root, const std::string& rel, std::string_view bytes, unsigned mode, const std::string& origin);
/// The regular file REL beneath ROOT under the same rule, at most MAX_BYTES; std::nullopt when it is missing,
/// not a regular file, larger, or reached only by leaving the root.
std::optional<std::string> read_file_beneath(const std::string& root, const std::string& rel, std::size_t max_bytes);

/// Normalizes an archive member path: strips "./" and trailing "/", refuses absolute paths, "..", empty
/// components and NUL; returns std::nullopt for the archive root itself ("./").
Result<std::optional<std::string>> normalize_member_path(std::string_view path);

}  // namespace gpuenv
