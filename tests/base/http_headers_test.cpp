// Response header lines as the libcurl adapters read them (base/net/http_headers.hpp).
#include "base/net/http_headers.hpp"

#include <gtest/gtest.h>

#include <limits>

namespace {

using gpuenv::parse_header_line;
using gpuenv::parse_retry_after;

TEST(HttpHeaders, NameIsLowerCasedAndBothSidesTrimmed) {
  const auto h = parse_header_line("WWW-Authenticate:  Bearer realm=\"https://auth.example/token\"\r\n");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->name, "www-authenticate");
  EXPECT_EQ(h->value, "Bearer realm=\"https://auth.example/token\"");
}

TEST(HttpHeaders, OnlyTheFirstColonSplits) {
  const auto h = parse_header_line("Location: http://127.0.0.1:5000/v2/a/blobs/uploads/1?x=y:z\r\n");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->name, "location");
  EXPECT_EQ(h->value, "http://127.0.0.1:5000/v2/a/blobs/uploads/1?x=y:z");
}

TEST(HttpHeaders, StatusLinesBlankLinesAndLinesWithoutColonAreNoHeaders) {
  EXPECT_FALSE(parse_header_line("HTTP/1.1 401 Unauthorized\r\n"));
  EXPECT_FALSE(parse_header_line("HTTP/2 200\r\n"));
  EXPECT_FALSE(parse_header_line("\r\n"));
  EXPECT_FALSE(parse_header_line("no colon here\r\n"));
  const auto empty = parse_header_line("X-Empty:\r\n");
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->name, "x-empty");
  EXPECT_EQ(empty->value, "");
}

TEST(HttpHeaders, RetryAfterInSecondsOnly) {
  EXPECT_EQ(parse_retry_after("120"), 120);
  EXPECT_EQ(parse_retry_after("0"), 0);
  EXPECT_EQ(parse_retry_after(" 7\r\n"), 7);  // blanks around it are not part of it
  EXPECT_EQ(parse_retry_after("-5"), std::nullopt);  // RFC 9110: 1*DIGIT, no sign
  EXPECT_EQ(parse_retry_after("10abc"), std::nullopt);
  EXPECT_EQ(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), std::nullopt);
  EXPECT_EQ(parse_retry_after(""), std::nullopt);
  EXPECT_EQ(parse_retry_after("99999999999999999999999999"), std::numeric_limits<long>::max());  // as good as forever
}

}  // namespace
