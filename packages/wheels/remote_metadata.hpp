#pragma once
// Reading a wheel's METADATA without downloading the wheel: HTTP Range requests for the zip's end record,
// its central directory and the one member, as pip's "lazy wheel" and uv do. Used when an index offers no
// PEP 658 metadata file for a (possibly 900 MB) wheel. ZIP64 archives are read too: the ZIP64 end record
// (found through its locator, fetched separately when it is not in the tail) gives the directory's place, size
// and entry count, and a directory entry's ZIP64 extra field its sizes and local header offset.
#include <cstdint>
#include <string>

#include "base/net/fetcher.hpp"

namespace gpuenv::packages {

/// The text of `<project>-*.dist-info/METADATA` in the remote wheel of `size` bytes at `url`. Fails with
/// "fetch.no_ranges" when the server ignores ranges (and the fetcher's other errors), "wheel.remote_zip" when
/// the zip cannot be read this way: a malformed or inconsistent end record, ZIP64 record or extra field, a
/// central directory over 64 MiB, METADATA over 16 MiB or not stored/deflated, a server answering with another
/// length than asked (a wrong `size`), or no such member; callers then fetch the whole wheel. Values from the
/// file are checked against `size` and each other before any request, so at most 64 MiB is ever asked for.
Result<std::string> remote_wheel_metadata(Fetcher& fetcher, const std::string& url, std::uint64_t size, const std::string& project);

}  // namespace gpuenv::packages
