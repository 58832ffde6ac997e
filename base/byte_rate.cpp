#include "base/byte_rate.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <utility>

namespace gpuenv {
namespace byte_rate_detail {

struct UnitScale {
  std::string_view unit;
  double scale;
};

constexpr UnitScale k_units[] = {
    {"B/s", 1.0},           {"kB/s", 1e3},         {"KB/s", 1e3},         {"MB/s", 1e6},
    {"GB/s", 1e9},          {"TB/s", 1e12},        {"KiB/s", 1024.0},     {"MiB/s", 1048576.0},
    {"GiB/s", 1073741824.0}, {"TiB/s", 1099511627776.0},
};

bool names_bits(std::string_view unit) {
  if (unit.find("bit") != std::string_view::npos || unit.find("bps") != std::string_view::npos) return true;
  // "Gb/s", "Mb/s": a lower-case b after the prefix.
  const auto slash = unit.find('/');
  return slash != std::string_view::npos && slash > 0 && unit[slash - 1] == 'b';
}

}  // namespace byte_rate_detail

Result<double> parse_byte_rate(std::string_view text, const std::string& where) {
  using byte_rate_detail::k_units;
  auto bad = [&](const std::string& why) {
    return make_error(ErrorKind::usage, "config.bad_rate", "'" + std::string(text) + "' is not a read rate" + why, where,
                      "write a positive number with a unit per second: 5GB/s, 800MB/s, 2GiB/s (GB = 10^9 bytes, "
                      "GiB = 2^30 bytes)");
  };
  double value = 0;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  const auto [p, ec] = std::from_chars(begin, end, value, std::chars_format::fixed);
  if (ec != std::errc() || p == begin) return bad(": it does not start with a number");
  std::string_view unit(p, static_cast<std::size_t>(end - p));
  if (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  if (unit.empty()) return bad(": it has no unit (bytes per second? write 5GB/s)");
  if (byte_rate_detail::names_bits(unit)) return bad(": it counts bits; give bytes per second (8 Gb/s = 1 GB/s)");
  double scale = 0;
  for (const auto& u : k_units)
    if (unit == u.unit) scale = u.scale;
  if (scale == 0) return bad(": unknown unit '" + std::string(unit) + "'");
  if (!std::isfinite(value) || value <= 0) return bad(": it must be more than zero");
  const double bytes = value * scale;
  if (!std::isfinite(bytes) || bytes > k_max_byte_rate) return bad(": it is more than 1 PB/s");
  return bytes;
}

std::string format_byte_rate(double bytes_per_second) {
  static constexpr std::pair<double, const char*> k_steps[] = {{1e12, "TB/s"}, {1e9, "GB/s"}, {1e6, "MB/s"}, {1e3, "kB/s"}};
  double v = bytes_per_second;
  const char* unit = "B/s";
  for (const auto& [scale, name] : k_steps) {
    if (bytes_per_second >= scale) {
      v = bytes_per_second / scale;
      unit = name;
      break;
    }
  }
  char buf[48];
  const int decimals = v >= 100 ? 0 : v >= 10 ? 1 : 2;
  std::snprintf(buf, sizeof buf, "%.*f %s", decimals, v, unit);
  return buf;
}

}  // namespace gpuenv
