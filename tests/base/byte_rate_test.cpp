#include "base/byte_rate.hpp"

#include <gtest/gtest.h>

using gpuenv::format_byte_rate;
using gpuenv::parse_byte_rate;

TEST(ByteRate, DecimalAndBinaryUnits) {
  EXPECT_DOUBLE_EQ(*parse_byte_rate("5GB/s", "x"), 5e9);
  EXPECT_DOUBLE_EQ(*parse_byte_rate("5 GB/s", "x"), 5e9);
  EXPECT_DOUBLE_EQ(*parse_byte_rate("800MB/s", "x"), 8e8);
  EXPECT_DOUBLE_EQ(*parse_byte_rate("1.5GiB/s", "x"), 1.5 * 1073741824.0);
  EXPECT_DOUBLE_EQ(*parse_byte_rate("512MiB/s", "x"), 512.0 * 1048576.0);
  EXPECT_DOUBLE_EQ(*parse_byte_rate("100kB/s", "x"), 1e5);
  EXPECT_DOUBLE_EQ(*parse_byte_rate("100KB/s", "x"), 1e5);
  EXPECT_DOUBLE_EQ(*parse_byte_rate("2KiB/s", "x"), 2048.0);
  EXPECT_DOUBLE_EQ(*parse_byte_rate("1TB/s", "x"), 1e12);
  EXPECT_DOUBLE_EQ(*parse_byte_rate("1000B/s", "x"), 1000.0);
}

TEST(ByteRate, NonsenseIsRefusedSayingWhy) {
  for (const char* bad : {"", "GB/s", "5", "5GB", "5 gigabytes", "5Gb/s", "5Gbit/s", "40Gbps", "0GB/s", "-5GB/s", "nanGB/s",
                          "infGB/s", "5e9B/s", "5GB/h", "2000TB/s", "5  GB/s", " 5GB/s", "5GB/s "}) {
    auto r = parse_byte_rate(bad, "--data-min");
    ASSERT_FALSE(r.ok()) << "'" << bad << "' was taken as " << r.value();
    EXPECT_EQ(r.error().id, "config.bad_rate") << bad;
    EXPECT_EQ(r.error().kind, gpuenv::ErrorKind::usage);
    EXPECT_EQ(r.error().where, "--data-min");
    EXPECT_FALSE(r.error().hint.empty());
  }
  EXPECT_NE(parse_byte_rate("5Gb/s", "x").error().message.find("bits"), std::string::npos);
  EXPECT_NE(parse_byte_rate("5", "x").error().message.find("no unit"), std::string::npos);
}

TEST(ByteRate, FormatsWithThreeSignificantDigits) {
  EXPECT_EQ(format_byte_rate(5e9), "5.00 GB/s");
  EXPECT_EQ(format_byte_rate(2147483648.0), "2.15 GB/s");
  EXPECT_EQ(format_byte_rate(456e6), "456 MB/s");
  EXPECT_EQ(format_byte_rate(12e3), "12.0 kB/s");
  EXPECT_EQ(format_byte_rate(0), "0.00 B/s");
}
