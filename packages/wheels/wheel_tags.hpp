#pragma once
// Wheel filenames (PEP 427, PEP 491) parsed as packaging.utils.parse_wheel_filename does, source distribution
// filenames recognised so they can be refused, and the ordered tags a target CPython on glibc Linux supports,
// as packaging.tags.sys_tags() lists them there (checked against tests/data/wheel_tags_*.txt, recorded by
// scripts/gen_wheel_tags_oracle.py). The target is described, never probed: gpuenv builds images for
// interpreters it does not run.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "packages/wheels/pep440.hpp"
#include "base/error.hpp"

namespace gpuenv::packages {

/// The parts of a wheel filename.
struct WheelName {
  std::string name;               ///< PEP 503 normalized ("Foo.Bar_baz" is "foo-bar-baz")
  Pep440Version version;          ///< parsed as packaging.version.Version
  bool has_build = false;         ///< whether the optional build tag is present
  std::string build_number;       ///< leading digits of the build tag, as a canonical decimal ("007rc" is "7")
  std::string build_suffix;       ///< the rest of the build tag ("rc")
  std::vector<std::string> tags;  ///< the expanded tag set, "interpreter-abi-platform", lowercase, sorted, unique
};

/// Parses `name-version(-build)?-pythontags-abitags-platformtags.whl` with compressed tag sets (`py2.py3`)
/// as packaging does; fails with `wheel.sdist` for a source distribution (gpuenv installs wheels only) and
/// `wheel.filename` for anything else that is not a valid wheel name (the message says which part is wrong).
/// Deliberately stricter than packaging 23.0: an empty project name or an empty tag component is refused.
Result<WheelName> parse_wheel_filename(std::string_view filename);

/// True for source distribution archives (.tar.gz and .zip as packaging knows them, and the older .tgz,
/// .tar.bz2, .tbz, .tar.xz, .txz, .tar that pip also takes for sdists); matched without regard to case.
bool is_sdist_filename(std::string_view filename);

/// The interpreter and platform of the image being built.
struct TargetPlatform {
  int python_major = 3;
  int python_minor = 11;
  std::string implementation = "cp";  ///< only "cp" gets ABI-specific tags; others get generic ones
  int glibc_major = 2;
  int glibc_minor = 36;
  std::string arch = "x86_64";  ///< as in platform tags: x86_64, aarch64, i686, ppc64le, s390x
};

/// The platform tags packaging lists for a glibc Linux with this glibc and architecture, best first:
/// manylinux_2_N down to the oldest the architecture has (2_5 on x86, 2_17 elsewhere) with the legacy aliases
/// manylinux2014/2010/1 after 2_17/2_12/2_5, then linux_<arch>. Never fails.
std::vector<std::string> linux_platform_tags(const TargetPlatform& target);

/// Every tag the target accepts, best first, in the order of packaging.tags.sys_tags() for a release build of
/// that CPython (cpython_tags then compatible_tags). Never fails.
std::vector<std::string> supported_tags(const TargetPlatform& target);

/// Position of the wheel's best tag in `supported` (lower is better); nullopt when none of its tags is
/// supported.
std::optional<std::size_t> tag_rank(const WheelName& wheel, const std::vector<std::string>& supported);

}  // namespace gpuenv::packages
