// gpuenv's initramfs init (docs/vm.md, "The initramfs"): PID 1 of the small initramfs gpuenv writes into a VM
// disk. It is a static program of its own, compiled with gpuenv and embedded in it (images/disk/initramfs.hpp),
// because the image's libraries are on the root it has yet to mount. In order it
//   1. mounts devtmpfs, proc and sysfs;
//   2. loads the kernel modules /etc/gpuenv/initramfs-modules lists, in that order (dependencies first, as
//      gpuenv planned them from modules.dep). A module that is not for this machine fails to load (Hyper-V's
//      vmbus off Hyper-V, Xen's block front end off Xen) and is only reported;
//   3. waits for the partition the kernel command line names, `root=PARTUUID=<guid>`, by reading the GPT of each
//      disk that appears (up to `gpuenv.rootwait=<seconds>`, 60 by default), or `root=/dev/<name>`;
//   4. mounts it (`rootfstype=`, `rootflags=`, read-only unless `rw`), moves /dev, /proc and /sys onto it, removes
//      its own files (only where / is ramfs or tmpfs), makes the root `/` and executes `init=` there with the
//      arguments it was given, or the first of the kernel's own list (/sbin/init, /etc/init, /bin/init, /bin/sh) that runs.
// It refuses to run as anything but PID 1.
// Whatever fails is said on the console with what was seen (each disk, each module that did not load), and the
// program exits: the kernel then panics, as it does when it cannot mount a root itself.
// Only the C library is used, and no allocation that can grow without bound: this runs before anything else.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

extern char** environ;

namespace {

constexpr const char* k_modules_list = "/etc/gpuenv/initramfs-modules";
constexpr const char* k_absent_list = "/etc/gpuenv/initramfs-absent";  // controllers the kernel has no driver for
constexpr unsigned k_module_init_compressed_file = 4;  // MODULE_INIT_COMPRESSED_FILE (linux/module.h)
constexpr int k_max_args = 64;

int g_kmsg = -1;
char g_failures[1024];  // the modules that did not load, for the message when no root appears
constexpr long k_ramfs_magic = 0x858458f6, k_tmpfs_magic = 0x01021994;  // linux/magic.h

/// One line on the kernel log (and so the console, at LEVEL's priority), or on stderr before /dev is mounted.
void say(int level, const char* format, ...) {
  char line[2048];
  int n = snprintf(line, sizeof line, "<%d>gpuenv-init: ", level);
  va_list args;
  va_start(args, format);
  const int body = vsnprintf(line + n, sizeof line - static_cast<size_t>(n) - 1, format, args);
  va_end(args);
  n = body < 0 ? n : n + body;
  if (n > static_cast<int>(sizeof line) - 2) n = static_cast<int>(sizeof line) - 2;
  line[n++] = '\n';
  if (g_kmsg < 0 || write(g_kmsg, line, static_cast<size_t>(n)) < 0) {
    const ssize_t ignored = write(2, line + 3, static_cast<size_t>(n - 3));
    (void)ignored;
  }
}

/// Reads at most SIZE-1 bytes of PATH into BUF, NUL-terminated; false when it cannot be read.
bool read_small(const char* path, char* buf, size_t size) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  size_t used = 0;
  while (used + 1 < size) {
    const ssize_t got = read(fd, buf + used, size - 1 - used);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    used += static_cast<size_t>(got);
  }
  close(fd);
  buf[used] = '\0';
  return true;
}

struct Options {
  char root[256] = "";
  char fstype[64] = "ext4";
  char flags[256] = "";
  char init[256] = "";  // init=; empty: the kernel's own list (/sbin/init, /etc/init, /bin/init, /bin/sh)
  bool read_only = true;
  int wait_seconds = 60;
};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n'; }

/// The kernel command line's words that concern the root (quotes as the kernel reads them: "a b" is one word);
/// what follows "--" is init's, not the kernel's.
void parse_cmdline(char* text, Options& o) {
  char* p = text;
  while (*p) {
    while (is_space(*p)) ++p;
    if (!*p) break;
    char* word = p;
    bool quoted = false;
    char* out = p;
    while (*p && (quoted || !is_space(*p))) {
      if (*p == '"') quoted = !quoted;
      else *out++ = *p;
      ++p;
    }
    if (*p) ++p;
    *out = '\0';
    if (strcmp(word, "--") == 0) break;
    auto take = [&](const char* key, char* dest, size_t size) {
      const size_t k = strlen(key);
      if (strncmp(word, key, k) != 0) return false;
      snprintf(dest, size, "%s", word + k);
      return true;
    };
    char number[16];
    if (take("root=", o.root, sizeof o.root) || take("rootfstype=", o.fstype, sizeof o.fstype) || take("rootflags=", o.flags, sizeof o.flags) ||
        take("init=", o.init, sizeof o.init))
      continue;
    if (take("gpuenv.rootwait=", number, sizeof number)) {
      const long v = strtol(number, nullptr, 10);
      if (v > 0 && v <= 3600) o.wait_seconds = static_cast<int>(v);
    } else if (strcmp(word, "ro") == 0) {
      o.read_only = true;
    } else if (strcmp(word, "rw") == 0) {
      o.read_only = false;
    }
  }
}

bool ends_with(const char* s, const char* suffix) {
  const size_t a = strlen(s), b = strlen(suffix);
  return a >= b && strcmp(s + a - b, suffix) == 0;
}

/// Loads every module the list names; says which did not load, and why.
void load_modules() {
  static char list[64 * 1024];
  if (!read_small(k_modules_list, list, sizeof list)) {
    say(3, "cannot read %s: %s", k_modules_list, strerror(errno));
    return;
  }
  int loaded = 0, failed = 0;
  char* failures = g_failures;
  const size_t failures_size = sizeof g_failures;
  failures[0] = '\0';
  for (char* line = strtok(list, "\n"); line; line = strtok(nullptr, "\n")) {
    if (!*line) continue;
    const int fd = open(line, O_RDONLY | O_CLOEXEC);
    long rc = -1;
    int why = errno;
    if (fd >= 0) {
      const bool compressed = ends_with(line, ".xz") || ends_with(line, ".zst") || ends_with(line, ".gz");
      rc = syscall(SYS_finit_module, fd, "", compressed ? k_module_init_compressed_file : 0u);
      why = errno;
      close(fd);
    }
    if (rc == 0 || why == EEXIST) {
      ++loaded;
      continue;
    }
    ++failed;
    const char* name = strrchr(line, '/');
    const size_t used = strlen(failures);
    // ENOENT from the kernel: a symbol it needs is missing, because a module it needs did not load either.
    snprintf(failures + used, failures_size - used, "%s%s (%s)", used ? ", " : "", name ? name + 1 : line,
             fd >= 0 && why == ENOENT ? "a module it needs did not load" : strerror(why));
  }
  if (failed)
    say(6, "loaded %d modules; %d not for this machine: %s", loaded, failed, failures);
  else
    say(6, "loaded %d modules", loaded);
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/// A GUID's text as the 16 bytes a GPT entry holds (the first three fields little-endian); false if malformed.
bool guid_bytes(const char* text, uint8_t out[16]) {
  uint8_t b[16];
  int n = 0;
  for (size_t i = 0; text[i]; ++i) {
    if (text[i] == '-') {
      if (i != 8 && i != 13 && i != 18 && i != 23) return false;
      continue;
    }
    const int hi = hex_value(text[i]), lo = text[i + 1] ? hex_value(text[i + 1]) : -1;
    if (hi < 0 || lo < 0 || n >= 16) return false;
    b[n++] = static_cast<uint8_t>(hi << 4 | lo);
    ++i;
  }
  if (n != 16 || strlen(text) != 36) return false;
  bool zero = true;  // the all-zero GUID is an unused GPT entry's, never a partition's
  for (int i = 0; i < 16; ++i) zero = zero && b[i] == 0;
  if (zero) return false;
  const int order[16] = {3, 2, 1, 0, 5, 4, 7, 6, 8, 9, 10, 11, 12, 13, 14, 15};
  for (int i = 0; i < 16; ++i) out[i] = b[order[i]];
  return true;
}

uint64_t le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | p[i];
  return v;
}
uint32_t le32(const uint8_t* p) { return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24; }

/// The number (1-based) of DISK's GPT partition whose unique GUID is WANT; 0 when it has none; and what it was.
int gpt_partition(const char* disk, const uint8_t want[16], char* seen, size_t seen_size) {
  char path[300];
  snprintf(path, sizeof path, "/sys/class/block/%s/queue/logical_block_size", disk);
  char text[32];
  long sector = 512;
  if (read_small(path, text, sizeof text)) sector = strtol(text, nullptr, 10);
  if (sector < 512 || sector > 4096) sector = 512;
  snprintf(path, sizeof path, "/dev/%s", disk);
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    snprintf(seen, seen_size, "%s (%s)", disk, strerror(errno));
    return 0;
  }
  uint8_t header[4096];
  int found = 0;
  if (pread(fd, header, static_cast<size_t>(sector), sector) != sector || memcmp(header, "EFI PART", 8) != 0) {
    snprintf(seen, seen_size, "%s (no GPT)", disk);
  } else {
    const uint64_t first = le64(header + 72);
    const uint32_t count = le32(header + 80), size = le32(header + 84);
    if (count == 0 || count > 1024 || size < 128 || size > 4096 || size % 8 != 0) {
      snprintf(seen, seen_size, "%s (a GPT with %u entries of %u bytes)", disk, count, size);
    } else {
      snprintf(seen, seen_size, "%s (GPT, no such partition)", disk);
      uint8_t entry[4096];
      for (uint32_t i = 0; i < count && !found; ++i) {
        const off_t at = static_cast<off_t>(first) * sector + static_cast<off_t>(i) * size;
        if (pread(fd, entry, size, at) != static_cast<ssize_t>(size)) break;
        static const uint8_t unused[16] = {0};
        if (memcmp(entry, unused, 16) != 0 && memcmp(entry + 16, want, 16) == 0) found = static_cast<int>(i) + 1;  // type GUID 0: unused
      }
    }
  }
  close(fd);
  return found;
}

/// The device name of DISK's partition NUMBER as sysfs lists it ("vda2", "nvme0n1p2"); false if not there yet.
bool partition_name(const char* disk, int number, char* out, size_t size) {
  char path[300];
  snprintf(path, sizeof path, "/sys/class/block/%s", disk);
  DIR* d = opendir(path);
  if (!d) return false;
  bool found = false;
  while (const dirent* e = readdir(d)) {
    if (strncmp(e->d_name, disk, strlen(disk)) != 0) continue;
    char file[600], text[16];
    snprintf(file, sizeof file, "/sys/class/block/%s/%s/partition", disk, e->d_name);
    if (read_small(file, text, sizeof text) && strtol(text, nullptr, 10) == number) {
      snprintf(out, size, "%s", e->d_name);
      found = true;
      break;
    }
  }
  closedir(d);
  return found;
}

/// Looks once for the root: its device path in DEVICE, or false with what each disk held in SEEN.
bool find_root(const Options& o, const uint8_t* want, char* device, size_t size, char* seen, size_t seen_size) {
  seen[0] = '\0';
  if (!want) {  // root=/dev/<name>
    snprintf(device, size, "%s", o.root);
    return access(device, F_OK) == 0;
  }
  DIR* d = opendir("/sys/class/block");
  if (!d) return false;
  bool found = false;
  while (const dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    char path[300];
    snprintf(path, sizeof path, "/sys/class/block/%s/partition", e->d_name);
    if (access(path, F_OK) == 0) continue;  // a partition: its disk is read instead
    if (strncmp(e->d_name, "loop", 4) == 0 || strncmp(e->d_name, "ram", 3) == 0) continue;
    char one[400];
    const int number = gpt_partition(e->d_name, want, one, sizeof one);
    char name[256];
    if (number > 0 && partition_name(e->d_name, number, name, sizeof name)) {
      snprintf(device, size, "/dev/%s", name);
      found = access(device, F_OK) == 0;
      if (found) break;
      snprintf(one, sizeof one, "%s (partition %d, no device node yet)", e->d_name, number);
    } else if (number > 0) {
      snprintf(one, sizeof one, "%s (partition %d, not in sysfs yet)", e->d_name, number);
    }
    const size_t used = strlen(seen);
    snprintf(seen + used, seen_size - used, "%s%s", used ? ", " : "", one);
  }
  closedir(d);
  return found;
}

/// Removes the initramfs's own files (they would stay in memory under the new root), staying on DEV.
void remove_tree(const char* path, dev_t dev) {
  DIR* d = opendir(path);
  if (!d) return;
  while (const dirent* e = readdir(d)) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    char child[512];
    snprintf(child, sizeof child, "%s/%s", strcmp(path, "/") == 0 ? "" : path, e->d_name);
    struct stat st;
    if (lstat(child, &st) != 0 || st.st_dev != dev) continue;  // a mount point (the new root, /dev, ...)
    if (S_ISDIR(st.st_mode)) {
      remove_tree(child, dev);
      rmdir(child);
    } else {
      unlink(child);
    }
  }
  closedir(d);
}

double now_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  if (getpid() != 1) {
    say(3, "runs only as the initramfs's first process (PID 1), which it is not: nothing done");
    return 2;
  }
  mkdir("/dev", 0755);
  mkdir("/proc", 0555);
  mkdir("/sys", 0555);
  mkdir("/root", 0700);
  if (mount("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755") != 0 && errno != EBUSY) say(3, "cannot mount devtmpfs on /dev: %s", strerror(errno));
  g_kmsg = open("/dev/kmsg", O_WRONLY | O_CLOEXEC);
  if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) say(3, "cannot mount /proc: %s", strerror(errno));
  if (mount("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) say(3, "cannot mount /sys: %s", strerror(errno));

  static char cmdline[4096];
  Options o;
  if (read_small("/proc/cmdline", cmdline, sizeof cmdline)) parse_cmdline(cmdline, o);
  uint8_t want[16];
  const bool by_partuuid = strncmp(o.root, "PARTUUID=", 9) == 0;
  if (by_partuuid && !guid_bytes(o.root + 9, want)) {
    say(3, "root=%s is not a partition GUID (root=PARTUUID=xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)", o.root);
    return 1;
  }
  if (!by_partuuid && strncmp(o.root, "/dev/", 5) != 0) {
    say(3, "the kernel command line names no root gpuenv-init can find (root=%s): it takes root=PARTUUID=<guid> or root=/dev/<name>", o.root);
    return 1;
  }

  load_modules();

  const double start = now_seconds();
  char device[300], seen[2048];
  bool found = false;
  while (!(found = find_root(o, by_partuuid ? want : nullptr, device, sizeof device, seen, sizeof seen)) && now_seconds() - start < o.wait_seconds) {
    const timespec pause{0, 50 * 1000 * 1000};
    nanosleep(&pause, nullptr);
  }
  if (!found) {
    char absent[256] = "";
    read_small(k_absent_list, absent, sizeof absent);
    say(2, "the root %s did not appear in %d s; disks: %s. %s%s%s%s%s (docs/vm.md)", o.root, o.wait_seconds, seen[0] ? seen : "none",
        absent[0] ? "This kernel has no driver for " : "Is the disk attached?", absent, absent[0] ? ": is the disk on one of those?" : "",
        g_failures[0] ? " Modules that did not load: " : "", g_failures);
    return 1;
  }
  say(6, "root %s is %s (found after %.1f s)", o.root, device, now_seconds() - start);
  if (mount(device, "/root", o.fstype, o.read_only ? MS_RDONLY : 0, o.flags[0] ? o.flags : nullptr) != 0) {
    say(2, "cannot mount %s (%s) as %s on /root: %s", device, o.root, o.fstype, strerror(errno));
    return 1;
  }
  static const char* const k_moved[] = {"/dev", "/proc", "/sys"};
  for (const char* m : k_moved) {
    char to[64];
    snprintf(to, sizeof to, "/root%s", m);
    if (mount(m, to, nullptr, MS_MOVE, nullptr) != 0) {
      say(4, "cannot move %s to the root (%s); it is unmounted", m, strerror(errno));
      umount2(m, MNT_DETACH);
    }
  }
  // The initramfs's own files, only where / is the initramfs (ramfs or tmpfs) and the root is another file system.
  struct stat self, target;
  struct statfs here;
  if (stat("/", &self) == 0 && stat("/root", &target) == 0 && self.st_dev != target.st_dev && statfs("/", &here) == 0 &&
      (static_cast<long>(here.f_type) == k_ramfs_magic || static_cast<long>(here.f_type) == k_tmpfs_magic))
    remove_tree("/", self.st_dev);
  if (chdir("/root") != 0 || mount(".", "/", nullptr, MS_MOVE, nullptr) != 0 || chroot(".") != 0 || chdir("/") != 0) {
    say(2, "cannot make %s the root: %s", device, strerror(errno));
    return 1;
  }
  char* args[k_max_args + 2];
  int n = 1;
  for (int i = 1; i < argc && n < k_max_args; ++i) args[n++] = argv[i];
  args[n] = nullptr;
  // init=, or the kernel's own list; each run in the new root, where its links (/sbin/init -> /lib/systemd/systemd) lead.
  static char k_defaults[][16] = {"/sbin/init", "/etc/init", "/bin/init", "/bin/sh"};
  const int candidates = o.init[0] ? 1 : 4;
  int why = 0;
  for (int i = 0; i < candidates; ++i) {
    args[0] = o.init[0] ? o.init : k_defaults[i];
    if (g_kmsg >= 0) close(g_kmsg);
    g_kmsg = -1;
    execve(args[0], args, environ);
    why = errno;
    g_kmsg = open("/dev/kmsg", O_WRONLY | O_CLOEXEC);
  }
  say(2, "cannot run %s on the root %s: %s", o.init[0] ? o.init : "/sbin/init, /etc/init, /bin/init or /bin/sh", device, strerror(why));
  return 1;
}
