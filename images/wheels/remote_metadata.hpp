#pragma once
// Reading a wheel's METADATA without downloading the wheel: HTTP Range requests for the zip's end record,
// its central directory and the one member, as pip's "lazy wheel" and uv do. Used when an index offers no
// PEP 658 metadata file for a (possibly 900 MB) wheel.
#include <cstdint>
#include <string>

#include "images/fetch/fetcher.hpp"

namespace gpuenv::images {

/// The text of `<project>-*.dist-info/METADATA` in the remote wheel of `size` bytes at `url`. Fails with
/// "fetch.no_ranges" when the server ignores ranges, "wheel.remote_zip" when the zip cannot be read this way
/// (ZIP64, an unusual layout); callers then fetch the whole wheel.
Result<std::string> remote_wheel_metadata(Fetcher& fetcher, const std::string& url, std::uint64_t size, const std::string& project);

}  // namespace gpuenv::images
