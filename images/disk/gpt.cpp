#include "images/disk/gpt.hpp"

#include <zlib.h>

#include <cstring>

#include "base/digest.hpp"

namespace gpuenv::images::disk {
namespace {

constexpr std::uint32_t k_entries = 128;
constexpr std::uint32_t k_entry_size = 128;
constexpr std::uint64_t k_entry_lbas = k_entries * k_entry_size / k_sector;  // 32
constexpr std::size_t k_max_name = 36;                                       // UTF-16 code units

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void put16(std::string& b, std::size_t at, std::uint16_t v) {
  for (int i = 0; i < 2; ++i) b[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
void put32(std::string& b, std::size_t at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
void put64(std::string& b, std::size_t at, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) b[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
void put_guid(std::string& b, std::size_t at, const Guid& g) {
  const auto d = g.to_disk();
  std::memcpy(&b[at], d.data(), d.size());
}

std::uint32_t crc(std::string_view bytes) {
  return static_cast<std::uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size())));
}

/// The 128 entries, 16 KiB.
std::string entries(const GptLayout& layout) {
  std::string e(k_entries * k_entry_size, '\0');
  for (std::size_t i = 0; i < layout.partitions.size(); ++i) {
    const Partition& p = layout.partitions[i];
    const std::size_t at = i * k_entry_size;
    put_guid(e, at, p.type);
    put_guid(e, at + 16, p.unique);
    put64(e, at + 32, p.first_lba);
    put64(e, at + 40, p.last_lba);
    for (std::size_t c = 0; c < p.name.size(); ++c) put16(e, at + 56 + 2 * c, static_cast<std::uint8_t>(p.name[c]));
  }
  return e;
}

/// One header sector: at MY_LBA, the other copy at ALTERNATE, its entries at ENTRIES_LBA.
std::string header(const GptLayout& layout, std::uint64_t my_lba, std::uint64_t alternate, std::uint64_t entries_lba, std::uint32_t entries_crc) {
  std::string h(k_sector, '\0');
  std::memcpy(&h[0], "EFI PART", 8);
  put32(h, 8, 0x00010000);  // revision 1.0
  put32(h, 12, 92);         // header size
  put64(h, 24, my_lba);
  put64(h, 32, alternate);
  put64(h, 40, 2 + k_entry_lbas);                      // first usable LBA: 34
  put64(h, 48, layout.total_lbas - 2 - k_entry_lbas);  // last usable: before the backup entries
  put_guid(h, 56, layout.disk);
  put64(h, 72, entries_lba);
  put32(h, 80, k_entries);
  put32(h, 84, k_entry_size);
  put32(h, 88, entries_crc);
  put32(h, 16, crc(std::string_view(h).substr(0, 92)));  // over the 92 bytes, with this field zero
  return h;
}

}  // namespace

std::optional<Guid> Guid::parse(std::string_view text) {
  if (text.size() != 36) return std::nullopt;
  Guid g;
  std::size_t n = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (text[i] != '-') return std::nullopt;
      continue;
    }
    const int hi = hex_value(text[i]);
    const int lo = i + 1 < text.size() ? hex_value(text[i + 1]) : -1;
    if (hi < 0 || lo < 0) return std::nullopt;
    g.bytes[n++] = static_cast<std::uint8_t>(hi * 16 + lo);
    ++i;
  }
  return n == 16 ? std::optional<Guid>(g) : std::nullopt;
}

std::string Guid::str() const {
  const std::string hex = to_hex(bytes.data(), bytes.size());
  return hex.substr(0, 8) + "-" + hex.substr(8, 4) + "-" + hex.substr(12, 4) + "-" + hex.substr(16, 4) + "-" + hex.substr(20);
}

std::array<std::uint8_t, 16> Guid::to_disk() const {
  std::array<std::uint8_t, 16> d = bytes;
  std::swap(d[0], d[3]);
  std::swap(d[1], d[2]);
  std::swap(d[4], d[5]);
  std::swap(d[6], d[7]);
  return d;
}

Guid guid_from_seed(std::string_view seed) {
  const auto raw = from_hex(sha256_hex(seed));
  Guid g;
  std::memcpy(g.bytes.data(), raw->data(), g.bytes.size());
  g.bytes[6] = static_cast<std::uint8_t>((g.bytes[6] & 0x0f) | 0x40);  // version 4
  g.bytes[8] = static_cast<std::uint8_t>((g.bytes[8] & 0x3f) | 0x80);  // RFC 4122 variant
  return g;
}

Result<GptLayout> plan_gpt(const Guid& disk, const std::vector<PartitionRequest>& partitions) {
  auto bad = [](const std::string& what) {
    return make_error(ErrorKind::internal, "disk.partition", what, "the disk's partition table", "this is a bug in the disk plan");
  };
  if (partitions.empty() || partitions.size() > k_entries) return bad("a GPT holds 1 to 128 partitions, not " + std::to_string(partitions.size()));
  GptLayout layout;
  layout.disk = disk;
  const std::uint64_t align = k_align_bytes / k_sector;
  std::uint64_t next = align;
  for (const PartitionRequest& r : partitions) {
    if (r.size == 0) return bad("partition '" + r.name + "' is empty");
    if (r.name.size() > k_max_name) return bad("partition name '" + r.name + "' is longer than 36 characters");
    for (char c : r.name)
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) return bad("partition name '" + r.name + "' is not printable ASCII");
    const std::uint64_t lbas = (r.size + k_align_bytes - 1) / k_align_bytes * align;
    layout.partitions.push_back({r.type, r.unique, r.name, next, next + lbas - 1});
    next += lbas;
  }
  layout.total_lbas = next + align;  // the last MiB holds the backup table (33 LBAs) and keeps the size whole MiB
  return layout;
}

GptBytes gpt_bytes(const GptLayout& layout) {
  const std::string e = entries(layout);
  const std::uint32_t entries_crc = crc(e);
  const std::uint64_t last = layout.total_lbas - 1;

  std::string mbr(k_sector, '\0');
  // One partition of type 0xEE over the whole disk (or 2 TiB, the most an MBR can say): UEFI 2.10 table 5.4.
  mbr[446 + 1] = 0x00;
  mbr[446 + 2] = 0x02;
  mbr[446 + 3] = 0x00;
  mbr[446 + 4] = static_cast<char>(0xEE);
  mbr[446 + 5] = mbr[446 + 6] = mbr[446 + 7] = static_cast<char>(0xFF);
  put32(mbr, 446 + 8, 1);
  put32(mbr, 446 + 12, static_cast<std::uint32_t>(std::min<std::uint64_t>(last, 0xFFFFFFFFu)));
  mbr[510] = 0x55;
  mbr[511] = static_cast<char>(0xAA);

  GptBytes out;
  out.head = mbr + header(layout, 1, last, 2, entries_crc) + e;
  out.tail = e + header(layout, last, 1, last - k_entry_lbas, entries_crc);
  return out;
}

namespace {

std::uint64_t get64(std::string_view b, std::size_t at) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  return v;
}
std::uint32_t get32(std::string_view b, std::size_t at) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  return v;
}

Guid guid_at(std::string_view b, std::size_t at) {
  Guid g;
  std::memcpy(g.bytes.data(), b.data() + at, 16);
  const auto d = g.to_disk();  // the swap is its own inverse
  g.bytes = d;
  return g;
}

}  // namespace

Result<GptLayout> read_gpt(std::string_view head, std::uint64_t disk_size) {
  auto bad = [](const std::string& what) {
    return make_error(ErrorKind::environment, "disk.gpt", what, "the disk's partition table", "the file is not a disk gpuenv can read (a GPT with 512-byte sectors)");
  };
  if (head.size() < (2 + k_entry_lbas) * k_sector || disk_size < (2 + 2 * k_entry_lbas + 1) * k_sector) return bad("the disk is too small for a GPT");
  const std::string_view h = head.substr(k_sector, k_sector);
  if (h.substr(0, 8) != "EFI PART") return bad("no GPT signature ('EFI PART') in LBA 1");
  if (get32(h, 8) != 0x00010000 || get32(h, 12) != 92) return bad("a GPT header of another revision or size");
  std::string copy(h.substr(0, 92));
  std::memset(&copy[16], 0, 4);
  if (crc(copy) != get32(h, 16)) return bad("the GPT header's CRC-32 does not match");
  if (get64(h, 24) != 1 || get64(h, 72) != 2 || get32(h, 80) != k_entries || get32(h, 84) != k_entry_size)
    return bad("a GPT header that places its entries elsewhere than LBA 2, or not 128 entries of 128 bytes");
  const std::string_view e = head.substr(2 * k_sector, k_entries * k_entry_size);
  if (crc(e) != get32(h, 88)) return bad("the GPT entries' CRC-32 does not match");
  GptLayout out;
  out.disk = guid_at(h, 56);
  out.total_lbas = disk_size / k_sector;
  if (get64(h, 32) != out.total_lbas - 1) return bad("the GPT header says the disk ends elsewhere (LBA " + std::to_string(get64(h, 32)) + ")");
  for (std::uint32_t i = 0; i < k_entries; ++i) {
    const std::size_t at = i * k_entry_size;
    const Guid type = guid_at(e, at);
    if (type == Guid{}) continue;
    Partition p{type, guid_at(e, at + 16), "", get64(e, at + 32), get64(e, at + 40)};
    if (p.first_lba < 2 + k_entry_lbas || p.last_lba < p.first_lba || p.last_lba >= out.total_lbas - 1 - k_entry_lbas)
      return bad("partition " + std::to_string(i + 1) + " lies outside the disk's usable sectors");
    for (std::size_t c = 0; c < k_max_name; ++c) {
      const unsigned lo = static_cast<unsigned char>(e[at + 56 + 2 * c]), hi = static_cast<unsigned char>(e[at + 57 + 2 * c]);
      if (lo == 0 && hi == 0) break;
      p.name += (hi == 0 && lo >= 0x20 && lo < 0x7f) ? static_cast<char>(lo) : '?';
    }
    out.partitions.push_back(std::move(p));
  }
  return out;
}

static_assert(std::string_view(k_type_root_x86_64) == resolver::k_platform_facts[0].gpt_root_type);
static_assert(std::string_view(k_type_root_arm64) == resolver::k_platform_facts[1].gpt_root_type);

Guid root_partition_type(const resolver::Platform& platform) { return *Guid::parse(platform.facts().gpt_root_type); }

std::optional<resolver::Platform> root_partition_platform(const Guid& type) {
  for (const auto p : {resolver::Platform::amd64(), resolver::Platform::arm64()})
    if (type == root_partition_type(p)) return p;
  return std::nullopt;
}

std::string partition_type_name(const Guid& type) {
  if (type.str() == k_type_esp) return "EFI system partition";
  if (const auto p = root_partition_platform(type)) return std::string(p->facts().gpt_root_name);
  if (type.str() == "0fc63daf-8483-4772-8e79-3d69d8477de4") return "Linux filesystem";
  return type.str();
}

}  // namespace gpuenv::images::disk
