#pragma once
// Installing a wheel (PEP 427, "Binary distribution format") into an image tree without pip, the way pip and
// pypa/installer do: every archived file checked against RECORD, `NAME-VER.data/<scheme>/` spread to the
// scheme's directories, `#!python` shebangs rewritten, console/gui script wrappers generated from
// entry_points.txt, and INSTALLER plus a new RECORD written ("Recording installed projects"). No .pyc files are
// compiled. The wheel is unpacked and verified in a staging directory first, so a refused wheel leaves nothing
// in the image.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"

namespace gpuenv::packages {

/// Where the parts of a wheel go, as paths relative to the image root (a sysconfig install scheme).
struct InstallScheme {
  std::string purelib;      ///< "usr/local/lib/python3.11/dist-packages"
  std::string platlib;      ///< usually the same as purelib on Debian
  std::string scripts;      ///< "usr/local/bin"
  std::string headers;      ///< "usr/local/include/python3.11/NAME", NAME already filled in by the caller
  std::string data;         ///< "usr/local"
  std::string interpreter;  ///< absolute path inside the image used in script shebangs: "/usr/bin/python3"
};

/// Choices pip takes from its command line rather than from the wheel.
struct WheelInstallOptions {
  bool requested = false;  ///< write an empty .dist-info/REQUESTED (the user asked for this project by name)
  /// Install a wheel whose RECORD gives other hashes or sizes for some of its files (PyNvVideoCodec 2.0.4's published wheels:
  /// their RECORD's hashes for two libraries differ from the files); the installed RECORD gives the real ones and
  /// InstalledWheel::record_mismatches names them. Files missing from RECORD or from the archive are still refused.
  bool accept_record_mismatch = false;
};

/// What install_wheel put into the image.
struct InstalledWheel {
  std::string name;                ///< as spelled in the .dist-info directory ("Foo_Bar")
  std::string version;             ///< as spelled in the .dist-info directory
  std::string dist_info;           ///< the .dist-info path relative to the image root
  std::vector<std::string> files;  ///< every installed file, relative to the image root, sorted
  std::vector<std::string> record_mismatches;  ///< archive paths whose RECORD hash or size was wrong (accept_record_mismatch)
};

/// The parts of a wheel file name `{name}-{version}(-{build})?-{python}-{abi}-{platform}.whl`.
struct WheelFilename {
  std::string name;
  std::string version;
  std::string build;  ///< "" when absent
  std::string python_tag;
  std::string abi_tag;
  std::string platform_tag;
};

/// Splits a wheel file name into its raw parts (no normalization; wheel_tags.hpp parse_wheel_filename
/// normalizes and expands tags); a directory part is ignored; fails with `wheel.bad_wheel` when it lacks the
/// ".whl" suffix or does not have five or six dash-separated parts.
Result<WheelFilename> split_wheel_filename(std::string_view filename);

/// Reads a wheel's WHEEL file (RFC 822 headers; the first occurrence of a name wins): whether Root-Is-Purelib is
/// true. Fails with `wheel.bad_wheel` at `where` without a Wheel-Version or with one other than 1.x.
Result<bool> parse_wheel_file(std::string_view text, const std::string& where);

/// One row of a RECORD file.
struct RecordRow {
  std::string path;  ///< as written: relative, '/'-separated
  std::string hash;  ///< "sha256=<urlsafe base64 without padding>", or "" (RECORD itself)
  std::string size;  ///< decimal byte count, or ""
};

/// Parses RECORD text as Python's csv module reads it (commas, double-quoted fields with "" escapes, LF or CRLF
/// lines, blank lines skipped); fails with `wheel.bad_wheel` naming `origin:line` for a row that has not
/// exactly three fields or an unterminated quote.
Result<std::vector<RecordRow>> parse_record(std::string_view text, const std::string& origin);

/// Writes rows as csv.writer does with "\n" line ends, quoting fields that hold a comma, a quote or a newline.
std::string format_record(const std::vector<RecordRow>& rows);

/// The RECORD hash of `bytes`: "sha256=" and the digest in urlsafe base64 without '=' padding.
std::string record_hash(std::string_view bytes);

/// One console_scripts or gui_scripts entry point ("tool = pkg.cli:main.run [extra]").
struct ScriptEntryPoint {
  std::string name;    ///< script file name
  std::string module;  ///< "pkg.cli"
  std::string attr;    ///< "main.run"
  bool gui = false;
};

/// Reads the console_scripts and gui_scripts sections of entry_points.txt (importlib.metadata's format; other
/// sections are skipped), in file order. Fails with `wheel.bad_wheel` naming `origin:line` for a line that is not
/// `name = module:attr [extras]`, a callable without ":attr" (pip refuses those too), a script name that is not a
/// plain file name (characters outside letters, digits, "_.+-", or "." / "..") or a name given twice.
Result<std::vector<ScriptEntryPoint>> parse_script_entry_points(std::string_view text, const std::string& origin);

/// The shebang line distlib's ScriptMaker writes for `interpreter`: "#!INTERPRETER\n", or for a path with a space
/// or longer than 127 bytes in all the /bin/sh trampoline (`'''exec' "INTERPRETER" "$0" "$@"`).
std::string script_shebang(const std::string& interpreter);

/// The wrapper script pip writes for an entry point: the shebang, then import the attribute's first part from
/// the module and `sys.exit(attr())` (distlib's SCRIPT_TEMPLATE, byte for byte).
std::string script_wrapper(const ScriptEntryPoint& entry, const std::string& interpreter);

/// Installs the wheel held in `wheel_bytes` (named `wheel_filename`) beneath `image_root` according to `scheme`.
/// Fails with ErrorKind::environment: `wheel.bad_wheel` for a malformed wheel (file name, WHEEL, missing or
/// several .dist-info, name or version differing from the file name, Wheel-Version other than 1.x, symlinks,
/// unknown .data scheme keys, bad entry points, two files installing to one path), `wheel.record_mismatch` when
/// archive and RECORD disagree (a file not listed, a listed file missing, a hash or size differing unless
/// `options.accept_record_mismatch`),
/// `archive.unsafe`/`archive.limit`/`archive.corrupt` from safe extraction (absolute paths, "..", bombs),
/// `wheel.target` when the image has a directory, a non-directory or an escaping symlink where a file or a
/// directory must go, and `wheel.io` for I/O failures. Every check runs before anything is moved into the image.
Result<InstalledWheel> install_wheel(std::string_view wheel_bytes, const std::string& wheel_filename, const std::string& image_root,
                                     const InstallScheme& scheme, const WheelInstallOptions& options = {});

}  // namespace gpuenv::packages
