#include "validate/adapters/mig_child.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

namespace gpuenv::validate {
namespace mig_wire {

// The requests a forwarding session sends.
enum class Op : std::uint8_t { open = 1, compute = 2, memtest = 3, consistency = 4, hbm = 5, copy = 6, tflops = 7, notes = 8 };

constexpr std::uint64_t k_max_frame = 64ULL << 20U;  // far above any answer (digests, samples, messages)

class Writer {
 public:
  void u8(std::uint8_t v) { m_bytes.push_back(static_cast<char>(v)); }
  void u64(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) m_bytes.push_back(static_cast<char>((v >> (8 * i)) & 0xffU));
  }
  void f64(double v) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof bits);
    u64(bits);
  }
  void str(const std::string& s) {
    u64(s.size());
    m_bytes += s;
  }
  void strings(const std::vector<std::string>& list) {
    u64(list.size());
    for (const auto& s : list) str(s);
  }
  [[nodiscard]] const std::string& bytes() const { return m_bytes; }

 private:
  std::string m_bytes;
};

// Reads what a Writer wrote; a short or malformed message leaves ok() false and zero values.
class Reader {
 public:
  explicit Reader(const std::string& bytes) : m_bytes(bytes) {}
  std::uint8_t u8() {
    if (!need(1)) return 0;
    return static_cast<std::uint8_t>(m_bytes[m_at++]);
  }
  std::uint64_t u64() {
    if (!need(8)) return 0;
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(static_cast<unsigned char>(m_bytes[m_at++])) << (8 * i);
    return v;
  }
  double f64() {
    const std::uint64_t bits = u64();
    double v = 0;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  }
  std::string str() {
    const std::uint64_t n = u64();
    if (!need(n)) return {};
    std::string s = m_bytes.substr(m_at, n);
    m_at += n;
    return s;
  }
  std::vector<std::string> strings() {
    std::vector<std::string> out;
    const std::uint64_t n = u64();
    for (std::uint64_t i = 0; i < n && m_ok; ++i) out.push_back(str());
    return out;
  }
  [[nodiscard]] bool ok() const { return m_ok; }

 private:
  bool need(std::uint64_t n) {
    if (!m_ok || n > m_bytes.size() - m_at) m_ok = false;
    return m_ok;
  }
  const std::string& m_bytes;
  std::size_t m_at = 0;
  bool m_ok = true;
};

bool write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

bool read_all(int fd, char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::read(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

bool send_frame(int fd, const std::string& bytes) {
  Writer length;
  length.u64(bytes.size());
  return write_all(fd, length.bytes().data(), 8) && write_all(fd, bytes.data(), bytes.size());
}

std::optional<std::string> receive_frame(int fd) {
  std::string length(8, '\0');
  if (!read_all(fd, length.data(), 8)) return std::nullopt;
  Reader r(length);
  const std::uint64_t n = r.u64();
  if (n > k_max_frame) return std::nullopt;
  std::string bytes(n, '\0');
  if (n > 0 && !read_all(fd, bytes.data(), n)) return std::nullopt;
  return bytes;
}

void put_error(Writer& w, const Error& e) {
  w.u8(1);
  w.u8(static_cast<std::uint8_t>(e.kind));
  w.str(e.id);
  w.str(e.message);
  w.str(e.where);
  w.str(e.hint);
}

Error get_error(Reader& r) {
  const auto kind = static_cast<ErrorKind>(std::min<std::uint8_t>(r.u8(), static_cast<std::uint8_t>(ErrorKind::internal)));
  std::string id = r.str(), message = r.str(), where = r.str(), hint = r.str();
  return make_error(kind, id, message, where, hint);
}

void put_samples(Writer& w, const Samples& s) {
  w.u64(s.values.size());
  for (double v : s.values) w.f64(v);
  w.str(s.unit);
  w.str(s.engine);
  w.u8(s.data_verified ? 1 : 0);
  w.str(s.library);
  w.str(s.passed_over);
}

Samples get_samples(Reader& r) {
  Samples s;
  const std::uint64_t n = r.u64();
  for (std::uint64_t i = 0; i < n && r.ok() && i < (1U << 20U); ++i) s.values.push_back(r.f64());
  s.unit = r.str();
  s.engine = r.str();
  s.data_verified = r.u8() == 1;
  s.library = r.str();
  s.passed_over = r.str();
  return s;
}

void put_memtest(Writer& w, const MemtestResult& m) {
  w.u64(m.bytes_tested);
  w.u64(m.errors);
  w.u64(m.first_error_offset);
  w.u64(m.expected);
  w.u64(m.actual);
  w.strings(m.patterns);
  w.u8(m.truncated_by_deadline ? 1 : 0);
}

MemtestResult get_memtest(Reader& r) {
  MemtestResult m;
  m.bytes_tested = r.u64();
  m.errors = r.u64();
  m.first_error_offset = r.u64();
  m.expected = r.u64();
  m.actual = r.u64();
  m.patterns = r.strings();
  m.truncated_by_deadline = r.u8() == 1;
  return m;
}

void put_consistency(Writer& w, const ConsistencyResult& c) {
  w.u64(c.result_digests.size());
  for (std::uint64_t d : c.result_digests) w.u64(d);
  w.u64(c.reference_digest);
  w.u8(c.has_reference ? 1 : 0);
  w.str(c.engine);
  w.str(c.library);
  w.str(c.passed_over);
}

ConsistencyResult get_consistency(Reader& r) {
  ConsistencyResult c;
  const std::uint64_t n = r.u64();
  for (std::uint64_t i = 0; i < n && r.ok() && i < (1U << 20U); ++i) c.result_digests.push_back(r.u64());
  c.reference_digest = r.u64();
  c.has_reference = r.u8() == 1;
  c.engine = r.str();
  c.library = r.str();
  c.passed_over = r.str();
  return c;
}

// The child's answer to one request, from `session` (opened by an `open` request).
std::string answer(Reader& in, std::unique_ptr<GpuSession>& session, const ChildSessionFactory& open_in_child) {
  Writer w;
  const auto op = static_cast<Op>(in.u8());
  if (op == Op::open) {
    if (!session) {
      auto opened = open_in_child();
      if (!opened) {
        put_error(w, opened.error());
        return w.bytes();
      }
      session = std::move(*opened);
    }
    w.u8(0);
    return w.bytes();
  }
  if (!session) {
    put_error(w, make_error(ErrorKind::internal, "validate.mig_child", "a MIG child was asked for work before its session opened", "", ""));
    return w.bytes();
  }
  auto reply = [&w](auto result, auto put) {
    if (!result) {
      put_error(w, result.error());
    } else {
      w.u8(0);
      put(*result);
    }
  };
  switch (op) {
    case Op::compute: reply(session->compute_mismatches(), [&w](std::uint64_t v) { w.u64(v); }); break;
    case Op::memtest: {
      MemtestRequest request;
      request.fraction_of_free = in.f64();
      request.deadline_ms = static_cast<int>(in.u64());
      request.seed = in.u64();
      reply(session->memtest(request), [&w](const MemtestResult& m) { put_memtest(w, m); });
      break;
    }
    case Op::consistency:
      reply(session->gemm_consistency(static_cast<int>(in.u64())), [&w](const ConsistencyResult& c) { put_consistency(w, c); });
      break;
    case Op::hbm: reply(session->hbm_bandwidth(static_cast<int>(in.u64())), [&w](const Samples& s) { put_samples(w, s); }); break;
    case Op::copy: {
      const bool to_device = in.u8() == 1;
      reply(session->copy_bandwidth(to_device, static_cast<int>(in.u64())), [&w](const Samples& s) { put_samples(w, s); });
      break;
    }
    case Op::tflops: {
      const std::string dtype = in.str();
      reply(session->gemm_tflops(dtype, static_cast<int>(in.u64())), [&w](const std::optional<Samples>& s) {
        w.u8(s ? 1 : 0);
        if (s) put_samples(w, *s);
      });
      break;
    }
    case Op::notes:
      w.u8(0);
      w.str(session->gemm_library_notes());
      break;
    default:
      put_error(w, make_error(ErrorKind::internal, "validate.mig_child", "a MIG child got an unknown request", "", ""));
  }
  return w.bytes();
}

// The parent's ends of the children's sockets: a new child closes them, so that each child sees the end of its own
// socket when the parent closes it or exits (fork runs while the process has one thread, so no lock is needed).
std::vector<int>& parent_ends() {
  static std::vector<int> fds;
  return fds;
}
std::mutex& parent_ends_mutex() {
  static std::mutex m;
  return m;
}

// The child: serves requests until the parent closes the socket, then ends without running the parent's exit work.
[[noreturn]] void serve(int fd, const std::string& uuid, const ChildSessionFactory& open_in_child) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // a child busy in a hung GPU call does not outlive gpuenv
  for (int other : parent_ends()) ::close(other);
  ::setenv("CUDA_VISIBLE_DEVICES", uuid.c_str(), 1);  // before this process's first cuInit
  std::unique_ptr<GpuSession> session;
  try {
    while (auto request = receive_frame(fd)) {
      Reader in(*request);
      if (!send_frame(fd, answer(in, session, open_in_child))) break;
    }
  } catch (...) {
    // Nothing may leave the child; the parent sees the socket close and reports the child gone.
  }
  session.reset();
  ::_exit(0);
}

// A GpuSession whose calls the child answers; health is read here (per GPU, through NVML).
class ForwardingSession final : public GpuSession {
 public:
  ForwardingSession(std::shared_ptr<MigChild> child, std::function<Result<GpuHealth>()> health_reader)
      : m_child(std::move(child)), m_health(std::move(health_reader)) {}

  Result<std::uint64_t> compute_mismatches() override {
    Writer w;
    w.u8(static_cast<std::uint8_t>(Op::compute));
    return ask<std::uint64_t>(w, [](Reader& r) { return r.u64(); });
  }
  Result<MemtestResult> memtest(const MemtestRequest& request) override {
    Writer w;
    w.u8(static_cast<std::uint8_t>(Op::memtest));
    w.f64(request.fraction_of_free);
    w.u64(static_cast<std::uint64_t>(std::max(request.deadline_ms, 0)));
    w.u64(request.seed);
    return ask<MemtestResult>(w, get_memtest);
  }
  Result<ConsistencyResult> gemm_consistency(int repetitions) override {
    Writer w;
    w.u8(static_cast<std::uint8_t>(Op::consistency));
    w.u64(static_cast<std::uint64_t>(std::max(repetitions, 0)));
    return ask<ConsistencyResult>(w, get_consistency);
  }
  Result<Samples> hbm_bandwidth(int samples) override {
    Writer w;
    w.u8(static_cast<std::uint8_t>(Op::hbm));
    w.u64(static_cast<std::uint64_t>(std::max(samples, 0)));
    return ask<Samples>(w, get_samples);
  }
  Result<Samples> copy_bandwidth(bool to_device, int samples) override {
    Writer w;
    w.u8(static_cast<std::uint8_t>(Op::copy));
    w.u8(to_device ? 1 : 0);
    w.u64(static_cast<std::uint64_t>(std::max(samples, 0)));
    return ask<Samples>(w, get_samples);
  }
  Result<std::optional<Samples>> gemm_tflops(const std::string& dtype, int samples) override {
    Writer w;
    w.u8(static_cast<std::uint8_t>(Op::tflops));
    w.str(dtype);
    w.u64(static_cast<std::uint64_t>(std::max(samples, 0)));
    return ask<std::optional<Samples>>(w, [](Reader& r) {
      return r.u8() == 1 ? std::optional<Samples>(get_samples(r)) : std::optional<Samples>();
    });
  }
  Result<GpuHealth> health() override {
    if (!m_health) return GpuHealth{};
    return m_health();
  }
  std::string gemm_library_notes() override {
    Writer w;
    w.u8(static_cast<std::uint8_t>(Op::notes));
    auto notes = ask<std::string>(w, [](Reader& r) { return r.str(); });
    return notes ? *notes : std::string();
  }

 private:
  template <class T, class Get>
  Result<T> ask(const Writer& request, Get get) {
    auto bytes = m_child->call(request.bytes());
    if (!bytes) return std::move(bytes).error();
    Reader r(*bytes);
    if (r.u8() != 0) return get_error(r);
    T value = get(r);
    if (!r.ok()) {
      return make_error(ErrorKind::internal, "validate.mig_child", "the process serving MIG device " + m_child->uuid() + " answered a malformed message",
                        m_child->uuid(), "report this as a gpuenv bug");
    }
    return value;
  }

  std::shared_ptr<MigChild> m_child;
  std::function<Result<GpuHealth>()> m_health;
};

}  // namespace mig_wire

Result<std::shared_ptr<MigChild>> MigChild::start(const std::string& uuid, ChildSessionFactory open_in_child) {
  int fds[2] = {-1, -1};
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return make_error(ErrorKind::environment, "validate.mig_child", std::string("socketpair failed: ") + std::strerror(errno), uuid,
                      "the process may be out of file descriptors");
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return make_error(ErrorKind::environment, "validate.mig_child", std::string("fork failed: ") + std::strerror(err), uuid,
                      "the host may be out of processes or memory");
  }
  if (pid == 0) {
    ::close(fds[0]);
    mig_wire::serve(fds[1], uuid, open_in_child);
  }
  ::close(fds[1]);
  {
    std::lock_guard lock(mig_wire::parent_ends_mutex());
    mig_wire::parent_ends().push_back(fds[0]);
  }
  return std::shared_ptr<MigChild>(new MigChild(uuid, fds[0], pid));
}

MigChild::~MigChild() {
  {
    std::lock_guard lock(mig_wire::parent_ends_mutex());
    auto& ends = mig_wire::parent_ends();
    ends.erase(std::remove(ends.begin(), ends.end(), m_fd), ends.end());
  }
  if (m_fd >= 0) ::close(m_fd);  // an idle child reads the end of its socket and leaves
  if (m_pid > 0) {
    // A child still in a GPU call (a hung instance) is killed, and waited for only up to the bound: one stuck
    // uninterruptibly in the driver would otherwise hold gpuenv at exit.
    ::kill(m_pid, SIGKILL);
    (void)reap_child_within(m_pid, k_mig_child_reap_bound);
  }
}

bool reap_child_within(int pid, std::chrono::milliseconds bound) {
  const auto until = std::chrono::steady_clock::now() + bound;
  for (;;) {
    const pid_t got = ::waitpid(pid, nullptr, WNOHANG);
    if (got == pid) return true;
    if (got < 0 && errno != EINTR) return false;  // not (or no longer) our child
    if (std::chrono::steady_clock::now() >= until) return false;
    ::usleep(10000);
  }
}

Result<std::string> MigChild::call(const std::string& request) {
  std::lock_guard lock(m_mutex);
  if (!m_broken && mig_wire::send_frame(m_fd, request)) {
    if (auto answer = mig_wire::receive_frame(m_fd)) return *answer;
  }
  m_broken = true;
  return make_error(ErrorKind::environment, "validate.mig_child",
                    "the process serving MIG device " + m_uuid + " ended or stopped answering", m_uuid,
                    "look for Xid errors in the kernel log (dmesg); check the instance alone with CUDA_VISIBLE_DEVICES=" + m_uuid);
}

Result<std::unique_ptr<GpuSession>> MigChild::open(std::function<Result<GpuHealth>()> health_reader) {
  mig_wire::Writer w;
  w.u8(static_cast<std::uint8_t>(mig_wire::Op::open));
  auto bytes = call(w.bytes());
  if (!bytes) return std::move(bytes).error();
  mig_wire::Reader r(*bytes);
  if (r.u8() != 0) return mig_wire::get_error(r);
  return std::unique_ptr<GpuSession>(std::make_unique<mig_wire::ForwardingSession>(shared_from_this(), std::move(health_reader)));
}

}  // namespace gpuenv::validate
