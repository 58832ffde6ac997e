#pragma once
// Reading HTTP response header lines as libcurl hands them to a header callback ("Name: value\r\n"): the one
// reader of the registry client's and the fetcher's headers, callable without a transfer (tests, fuzzing).
#include <optional>
#include <string>
#include <string_view>

namespace gpuenv {

/// One response header: the name lower-cased, name and value without surrounding white space.
struct HeaderLine {
  std::string name;
  std::string value;
};

/// The header in LINE; nullopt for a status line ("HTTP/1.1 200 OK"), the blank line ending the block and any
/// line without a colon.
std::optional<HeaderLine> parse_header_line(std::string_view line);

/// Whether LINE starts a new response (a status line: after a redirect or a 100 Continue).
inline bool is_status_line(std::string_view line) { return line.rfind("HTTP/", 0) == 0; }

/// A Retry-After value in seconds as std::stol reads it (leading digits, optional sign); nullopt for an HTTP
/// date, an empty value or a number out of range: the caller's normal backoff applies then.
std::optional<long> parse_retry_after(std::string_view value);

}  // namespace gpuenv
