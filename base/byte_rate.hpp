#pragma once
// Byte rates as people write them in a spec or on a command line: "5GB/s", "500 MB/s", "1.5GiB/s".
#include <string>
#include <string_view>

#include "base/error.hpp"

namespace gpuenv {

/// The highest rate gpuenv takes (1 PB/s): more is a typing mistake, not a storage system.
inline constexpr double k_max_byte_rate = 1e15;

/// A positive number, an optional space and a unit per second, as bytes per second: decimal units B, kB (or KB),
/// MB, GB, TB (powers of 1000, as storage vendors and fio's "MB/s" with kb_base=1000 count) and binary units KiB,
/// MiB, GiB, TiB (powers of 1024). Refused: no unit or no "/s" (a size is not a rate), bits ("Gb/s", "Gbit/s":
/// a link's rate, not a file system's), zero, negative, NaN or infinite numbers, and more than k_max_byte_rate.
/// Errors: "config.bad_rate" (ErrorKind::usage) at WHERE.
Result<double> parse_byte_rate(std::string_view text, const std::string& where);

/// "1.23 GB/s", "456 MB/s", "12.0 kB/s": decimal units, three significant digits.
std::string format_byte_rate(double bytes_per_second);

}  // namespace gpuenv
