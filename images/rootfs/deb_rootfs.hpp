#pragma once
// Installing .deb files into a root directory without dpkg and without running maintainer scripts, then
// reproducing the effects of those scripts that a runtime image needs: the dpkg database (so scanners such
// as Trivy and Syft see the packages) and base-passwd's /etc/passwd and /etc/group.
#include <string>
#include <string_view>
#include <vector>

#include "base/archive/safe_extract.hpp"

namespace gpuenv::images {

struct InstalledDeb {
  std::string name, version, architecture, multi_arch;
  std::string control;  ///< the control file as shipped
  std::string md5sums;  ///< the md5sums member as shipped (scanners read it)
  std::vector<std::string> conffiles;  ///< absolute paths of configuration files
  std::vector<ExtractedEntry> entries;
};

/// The path filter of minimal images: documentation, man and info pages, translations and lintian
/// overrides are left out (copyright files stay, as licences must travel with binaries).
bool keep_in_minimal_image(std::string_view path);

/// Unpacks one .deb into `root` (ErrorKind::environment on a damaged or hostile package).
Result<InstalledDeb> install_deb(std::string_view deb_bytes, const std::string& origin, const std::string& root, const ExtractOptions& options);

/// What install_deb records of an extracted package (its control, md5sums and conffiles members, and its entries):
/// the one stanza of the control file with a Package and Version following Debian policy's grammar, and the
/// conffiles as plain absolute paths. Error: `rootfs.bad_control` (ErrorKind::environment) and deb822's own.
Result<InstalledDeb> read_deb_control(DebContents contents, const std::string& origin);

/// Writes var/lib/dpkg/status (stanzas sorted by package, "Status: install ok installed", with the md5 of each
/// installed conffile as dpkg records it) and var/lib/dpkg/info/<package>.{list,md5sums,conffiles} for every
/// package, atomically and deterministically.
Status write_dpkg_database(const std::string& root, const std::vector<InstalledDeb>& packages);

/// What base-passwd's preinst does on a fresh system: /etc/passwd and /etc/group from its master files when
/// they do not exist yet. Does nothing when base-passwd is not installed.
Status apply_base_passwd(const std::string& root);

}  // namespace gpuenv::images
