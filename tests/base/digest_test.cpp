// The Digest value type: only valid sha256 digests can be made, in either spelling, and both spellings agree.
#include "base/digest.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace {

using gpuenv::Digest;

const std::string k_hello_hex = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";  // sha256("hello")

TEST(Digest, HashingAndBothSpellingsGiveTheSameValue) {
  const Digest d = Digest::of("hello");
  EXPECT_EQ(d.hex(), k_hello_hex);
  EXPECT_EQ(d.str(), "sha256:" + k_hello_hex);
  EXPECT_EQ(Digest::parse("sha256:" + k_hello_hex), d);
  EXPECT_EQ(Digest::from_hex(k_hello_hex), d);
  gpuenv::Sha256 incremental;
  incremental.update("hel", 3);
  incremental.update("lo", 2);
  EXPECT_EQ(incremental.finish_digest(), d);
}

TEST(Digest, AnythingButSha256AndSixtyFourLowerCaseHexDigitsIsRefused) {
  for (const std::string& bad : std::vector<std::string>{std::string(), "sha256:", "sha256:" + k_hello_hex.substr(1), "sha256:" + k_hello_hex + "0",
                                "SHA256:" + k_hello_hex, "sha512:" + k_hello_hex, "sha256:../../../etc/passwd" + std::string(38, 'a'),
                                "sha256:" + std::string(63, 'a') + "/", "sha256:" + std::string(64, 'A'), k_hello_hex}) {
    EXPECT_FALSE(Digest::parse(bad)) << bad;
  }
  for (const std::string& bad : std::vector<std::string>{std::string(), k_hello_hex.substr(1), std::string(64, 'g'), std::string(64, 'A'), "../" + std::string(61, 'a'),
                                "sha256:" + k_hello_hex}) {
    EXPECT_FALSE(Digest::from_hex(bad)) << bad;
  }
}

TEST(Digest, TheEmptyDigestIsNoDigestAndOrdersFirst) {
  const Digest none;
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(none.str(), "");
  EXPECT_EQ(none.hex(), "");
  EXPECT_NE(none, Digest::of(""));
  const std::set<Digest> ordered = {Digest::of("b"), none, Digest::of("a")};
  EXPECT_TRUE(ordered.begin()->empty());
  EXPECT_EQ(Digest::of("a") < Digest::of("b"), Digest::of("a").hex() < Digest::of("b").hex());  // ordered as their hex
}

}  // namespace
