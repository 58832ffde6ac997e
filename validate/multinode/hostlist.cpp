// Slurm hostlist expansion (hostlist.hpp). Slurm's own reader lives in src/common/hostlist.c; this one is written from
// the documented syntax (slurm.conf(5), "NodeName" and hostlist expressions) and refuses what it does not know.
#include "validate/multinode/hostlist.hpp"

#include <cctype>
#include <cstdint>

#include "base/safe_text.hpp"

namespace gpuenv::validate::multinode {
namespace {

Error hostlist_error(std::string_view list, const std::string& what) {
  return make_error(ErrorKind::usage, "multinode.hostlist",
                    "the host list '" + safe_text(list, 200) + "' cannot be read: " + what, "SLURM_JOB_NODELIST",
                    "give the ranks' hosts with --peers HOST:PORT,... or run under srun, which sets the node list");
}

bool host_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_';
}

// Splits at commas that are not inside brackets.
Result<std::vector<std::string_view>> split_entries(std::string_view list) {
  std::vector<std::string_view> out;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= list.size(); ++i) {
    const char c = i < list.size() ? list[i] : ',';
    if (c == '[') {
      if (++depth > 1) return hostlist_error(list, "a '[' inside brackets at byte " + std::to_string(i));
    } else if (c == ']') {
      if (--depth < 0) return hostlist_error(list, "a ']' without '[' at byte " + std::to_string(i));
    } else if (c == ',' && depth == 0) {
      if (i == start) return hostlist_error(list, "an empty entry at byte " + std::to_string(i));
      out.push_back(list.substr(start, i - start));
      start = i + 1;
    }
  }
  if (depth != 0) return hostlist_error(list, "a '[' is never closed");
  return out;
}

struct Bound {
  std::uint64_t value = 0;
  std::size_t width = 0;
};

Result<Bound> number(std::string_view list, std::string_view text) {
  if (text.empty() || text.size() > 9) return hostlist_error(list, "'" + safe_text(text, 40) + "' is not a range bound");
  Bound b{0, text.size()};
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c)))
      return hostlist_error(list, "'" + safe_text(text, 40) + "' is not a range bound");
    b.value = b.value * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return b;
}

std::string padded(std::uint64_t value, std::size_t width) {
  std::string digits = std::to_string(value);
  if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
  return digits;
}

// The names one bracket group "01-03,7" stands for, as strings.
Result<std::vector<std::string>> expand_group(std::string_view list, std::string_view group) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= group.size(); ++i) {
    if (i < group.size() && group[i] != ',') continue;
    const std::string_view part = group.substr(start, i - start);
    start = i + 1;
    const std::size_t dash = part.find('-');
    GPUENV_TRY(low, number(list, part.substr(0, dash)));
    Bound high = low;
    if (dash != std::string_view::npos) {
      GPUENV_TRY(h, number(list, part.substr(dash + 1)));
      high = h;
    }
    if (high.value < low.value) return hostlist_error(list, "the range '" + safe_text(part, 40) + "' runs backwards");
    if (high.value - low.value >= k_max_hosts)
      return hostlist_error(list, "the range '" + safe_text(part, 40) + "' names more than " +
                                      std::to_string(k_max_hosts) + " hosts");
    for (std::uint64_t v = low.value; v <= high.value; ++v) out.push_back(padded(v, low.width));
    if (out.size() > k_max_hosts) return hostlist_error(list, "more than " + std::to_string(k_max_hosts) + " hosts");
  }
  return out;
}

// Appends the names of one entry ("rack1-n[01-04]-ib[0-1]") to `out`.
Status expand_entry(std::string_view list, std::string_view entry, std::vector<std::string>& out) {
  std::vector<std::string> names = {""};
  std::size_t i = 0;
  while (i < entry.size()) {
    if (entry[i] != '[') {
      const std::size_t open = entry.find('[', i);
      const std::string_view literal = entry.substr(i, open == std::string_view::npos ? std::string_view::npos : open - i);
      for (char c : literal) {
        if (!host_char(c)) return hostlist_error(list, "'" + safe_text(std::string(1, c)) + "' cannot be part of a host name");
      }
      for (auto& n : names) n += literal;
      i += literal.size();
      continue;
    }
    const std::size_t close = entry.find(']', i);  // split_entries saw it balanced
    GPUENV_TRY(group, expand_group(list, entry.substr(i + 1, close - i - 1)));
    if (names.size() * group.size() + out.size() > k_max_hosts)
      return hostlist_error(list, "more than " + std::to_string(k_max_hosts) + " hosts");
    std::vector<std::string> next;
    for (const auto& n : names)
      for (const auto& g : group) next.push_back(n + g);
    names = std::move(next);
    i = close + 1;
  }
  for (auto& n : names) {
    if (n.size() > k_max_host_bytes) return hostlist_error(list, "a host name is longer than 255 bytes");
    out.push_back(std::move(n));
  }
  return ok_status();
}

}  // namespace

Result<std::vector<std::string>> expand_hostlist(std::string_view list) {
  if (list.size() > k_max_hostlist_bytes) return hostlist_error(list.substr(0, 64), "it is longer than 64 KiB");
  if (list.empty()) return hostlist_error(list, "it is empty");
  GPUENV_TRY(entries, split_entries(list));
  std::vector<std::string> out;
  for (std::string_view e : entries) GPUENV_CHECK(expand_entry(list, e, out));
  if (out.size() > k_max_hosts) return hostlist_error(list, "more than " + std::to_string(k_max_hosts) + " hosts");
  return out;
}

}  // namespace gpuenv::validate::multinode
