#pragma once
// The one error type of gpuenv and the Result<T> every fallible function returns.
#include <cassert>
#include <cerrno>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace gpuenv {

/// Broad class of an error; it decides the process exit code (see exit_code()).
enum class ErrorKind {
  usage,          ///< bad command line: exit 2
  spec,           ///< malformed or contradictory spec: exit 2
  unsatisfiable,  ///< no combination satisfies every rule: exit 3
  environment,    ///< host, network or I/O problem: exit 4
  internal,       ///< a bug or a broken catalog: exit 5
};

/// Documented process exit codes (docs/cli.md).
enum ExitCode : int {
  k_exit_ok = 0,
  k_exit_validation_failed = 1,
  k_exit_usage = 2,
  k_exit_unsatisfiable = 3,
  k_exit_environment = 4,
  k_exit_internal = 5,
};

/// A failure: a stable id (`spec.unknown_key`), what happened with the values involved, where it happened
/// (`spec.yaml:12:3`), what to do next, and the trail of what gpuenv was doing.
struct Error {
  ErrorKind kind = ErrorKind::internal;
  std::string id;
  std::string message;
  std::string where;
  std::string hint;
  std::vector<std::string> context;

  /// Adds "while ..." context, innermost first.
  Error& while_(std::string what) {
    context.push_back(std::move(what));
    return *this;
  }
  /// One-line-per-part rendering for terminals: "where: message", hint, context.
  [[nodiscard]] std::string to_string() const;
};

/// Exit code for an error kind.
int exit_code(ErrorKind kind);

/// Builds an error; `where` and `hint` may be empty.
inline Error make_error(ErrorKind kind, std::string id, std::string message, std::string where = {},
                        std::string hint = {}) {
  return Error{kind, std::move(id), std::move(message), std::move(where), std::move(hint), {}};
}

/// What the I/O errors of one area share: their id ("build.io") and hint. Each area names its own constant.
struct IoArea {
  const char* id;
  const char* hint;
};

/// The error of a failed system call in AREA: kind environment, AREA's id and hint, message "WHAT: strerror(ERR)"
/// and WHERE; ERR is errno unless given.
Error io_error(const IoArea& area, const std::string& what, const std::string& where, int err = errno);

/// Either a value or an Error. Never throws on construction; value() on an error is a bug (asserted).
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : m_v(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Result(Error error) : m_v(std::in_place_index<1>, std::move(error)) {}  // NOLINT

  [[nodiscard]] bool ok() const { return m_v.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { assert(ok()); return std::get<0>(m_v); }
  const T& value() const& { assert(ok()); return std::get<0>(m_v); }
  T&& value() && { assert(ok()); return std::get<0>(std::move(m_v)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Error& error() const& { assert(!ok()); return std::get<1>(m_v); }
  Error&& error() && { assert(!ok()); return std::get<1>(std::move(m_v)); }

 private:
  std::variant<T, Error> m_v;
};

/// Result of a function that returns nothing on success.
struct Unit {};
using Status = Result<Unit>;
inline Status ok_status() { return Unit{}; }

}  // namespace gpuenv

/// Declares `auto VAR` from the value of a Result expression, or returns its error from the enclosing function
/// (which returns a Status or a Result of any type). `GPUENV_TRY(text, read_file_limited(path, limit));`
#define GPUENV_TRY(var, expr)                      \
  auto var##_r = (expr);                           \
  if (!var##_r) return std::move(var##_r).error(); \
  auto var = std::move(*var##_r)

/// Returns the error of a Status (or Result) expression from the enclosing function; otherwise goes on.
/// `GPUENV_CHECK(file.write(bytes));`
#define GPUENV_CHECK(expr)                                                   \
  do {                                                                       \
    auto&& gpuenv_check_result_ = (expr);                                    \
    if (!gpuenv_check_result_) return std::move(gpuenv_check_result_).error(); \
  } while (0)
