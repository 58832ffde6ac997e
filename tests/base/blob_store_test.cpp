// The directory blob store against a temporary directory (its contract), and fetching through it.
#include "base/cache/blob_store.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "fakes/fake_fetcher.hpp"
#include "base/cache/fetch_into_cache.hpp"

namespace {

namespace fs = std::filesystem;
using namespace gpuenv;

const std::string k_store_hello_hex = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";  // "hello"
const Digest k_hello_sha = *Digest::from_hex(k_store_hello_hex);
Digest repeated(char c) { return *Digest::from_hex(std::string(64, c)); }
std::string slurp_store(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class BlobStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root = fs::temp_directory_path() / ("gpuenv-cache-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    store = make_dir_blob_store(root.string());
  }
  void TearDown() override { fs::remove_all(root); }
  fs::path root;
  std::unique_ptr<BlobStore> store;
};

TEST_F(BlobStoreTest, PutThenFindByDigest) {
  auto sha = store->put("hello");
  ASSERT_TRUE(sha.ok()) << sha.error().to_string();
  EXPECT_EQ(*sha, k_hello_sha);
  auto found = store->find(k_hello_sha);
  ASSERT_TRUE(found.ok() && found->has_value());
  std::ifstream in(**found);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "hello");
  EXPECT_EQ(**found, (root / "blobs/sha256/2c" / k_store_hello_hex).string());
}

TEST_F(BlobStoreTest, TheCacheIsPrivateToItsOwnerAndAnOpenOneIsTightened) {
  fs::create_directories(root);
  fs::permissions(root, fs::perms(0755));
  ASSERT_TRUE(store->put("hello").ok());
  EXPECT_EQ(fs::status(root).permissions() & fs::perms::all, fs::perms::owner_all);
}

TEST_F(BlobStoreTest, MissingIsNotAnError) {
  auto found = store->find(repeated('a'));
  ASSERT_TRUE(found.ok());
  EXPECT_FALSE(found->has_value());
  EXPECT_FALSE(Digest::from_hex("not-a-digest"));  // a malformed digest cannot reach the store
  EXPECT_FALSE(store->find(Digest()).ok());
}

TEST_F(BlobStoreTest, AdoptRefusesAFileWithTheWrongDigest) {
  auto tmp = store->temp_path();
  ASSERT_TRUE(tmp.ok());
  std::ofstream(*tmp) << "hellp";
  auto r = store->adopt(*tmp, k_hello_sha);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "cache.hash_mismatch");
  EXPECT_FALSE(fs::exists(*tmp));
  EXPECT_FALSE(store->find(k_hello_sha)->has_value());
}

TEST_F(BlobStoreTest, ListAndPrune) {
  ASSERT_TRUE(store->put("hello").ok());
  ASSERT_TRUE(store->put("world").ok());
  auto l = store->list();
  ASSERT_TRUE(l.ok());
  ASSERT_EQ(l->size(), 2u);
  EXPECT_EQ((*l)[0].bytes, 5u);
  auto kept = store->prune(std::chrono::system_clock::now() - std::chrono::hours(1));
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(*kept, 0u);  // both used just now
  auto freed = store->prune(std::chrono::system_clock::time_point::max());
  ASSERT_TRUE(freed.ok());
  EXPECT_EQ(*freed, 10u);
  EXPECT_TRUE(store->list()->empty());
}

TEST_F(BlobStoreTest, TwoProcessesStoringTheSameBlobBothSucceed) {
  std::string big(4 << 20, 'z');
  std::vector<pid_t> kids;
  for (int k = 0; k < 4; ++k) {
    const pid_t pid = fork();
    if (pid == 0) {
      auto s = make_dir_blob_store(root.string());
      for (int i = 0; i < 5; ++i)
        if (!s->put(big).ok()) _exit(1);
      _exit(0);
    }
    kids.push_back(pid);
  }
  for (pid_t p : kids) {
    int status = 0;
    waitpid(p, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  auto l = store->list();
  ASSERT_EQ(l->size(), 1u);
  EXPECT_EQ((*l)[0].bytes, big.size());
  auto sha = sha256_of_file(*store->find((*l)[0].sha256).value());
  EXPECT_EQ(*sha, (*l)[0].sha256);
  EXPECT_TRUE(fs::is_empty(root / "tmp"));
}

TEST_F(BlobStoreTest, DefaultRootFollowsXdg) {
  EXPECT_EQ(default_cache_root("/c", "/x", "/h"), "/c");
  EXPECT_EQ(default_cache_root("", "/x", "/h"), "/x/gpuenv");
  EXPECT_EQ(default_cache_root("", "", "/h"), "/h/.cache/gpuenv");
}

TEST_F(BlobStoreTest, FetchIntoCacheSkipsWhatIsCachedAndVerifiesTheRest) {
  gpuenv::testing::FakeFetcher f;
  f.files["http://x/hello"] = "hello";
  f.files["http://x/bad"] = "tampered";
  ASSERT_TRUE(store->put("hello").ok());
  auto r = fetch_into_cache(f, *store, {{"http://x/hello", k_hello_sha, 5}, {"http://x/bad", repeated('b'), std::nullopt}});
  ASSERT_TRUE(r[0].ok());
  EXPECT_TRUE(r[0]->was_cached);
  ASSERT_FALSE(r[1].ok());
  EXPECT_EQ(r[1].error().id, "fetch.hash_mismatch");
  EXPECT_EQ(f.requested, std::vector<std::string>{"http://x/bad"});
  EXPECT_TRUE(fs::is_empty(root / "tmp"));
}

// Each blob is told as soon as it is in the cache: what the cache holds before anything is fetched.
TEST_F(BlobStoreTest, FetchIntoCacheTellsOfEachBlobAsItIsThere) {
  gpuenv::testing::FakeFetcher f;
  f.files["http://x/world"] = "world";
  ASSERT_TRUE(store->put("hello").ok());
  std::vector<std::string> told;
  auto r = fetch_into_cache(f, *store, {{"http://x/world", gpuenv::Digest::of("world"), 5}, {"http://x/hello", k_hello_sha, 5}, {"http://x/gone", repeated('d'), 1}},
                            [&](std::size_t i, const gpuenv::Result<gpuenv::CachedBlob>& b) {
                              told.push_back(std::to_string(i) + (b ? (b->was_cached ? " cached" : " fetched") : " " + b.error().id) +
                                             (f.requested.empty() ? " before any request" : ""));
                              if (b) EXPECT_EQ(slurp_store(b->path), i == 0 ? "world" : "hello");
                            });
  EXPECT_EQ(told, (std::vector<std::string>{"1 cached before any request", "0 fetched", "2 fetch.not_found"}));
  ASSERT_EQ(r.size(), 3u);
  EXPECT_TRUE(r[0].ok() && r[1].ok() && !r[2].ok());
}

TEST_F(BlobStoreTest, OfflineUsesOnlyTheCache) {
  ASSERT_TRUE(store->put("hello").ok());
  auto offline = gpuenv::make_offline_fetcher();
  auto r = fetch_into_cache(*offline, *store, {{"http://x/hello", k_hello_sha, 5}, {"http://x/w", repeated('c'), 1}});
  EXPECT_TRUE(r[0].ok());
  ASSERT_FALSE(r[1].ok());
  EXPECT_EQ(r[1].error().id, "cache.offline_miss");
}

}  // namespace

#include "base/cache/caching_fetcher.hpp"

namespace {

TEST_F(BlobStoreTest, CachingFetcherReplaysDocumentsAndNotFoundOffline) {
  gpuenv::testing::FakeFetcher net;
  net.files["http://x/simple/torch/"] = "{\"files\": []}";
  auto online = make_caching_fetcher(net, *store, root.string());
  ASSERT_TRUE(online->get("http://x/simple/torch/", "application/json").ok());
  EXPECT_EQ(online->get("http://x/missing").error().id, "fetch.not_found");
  auto no_network = gpuenv::make_offline_fetcher();
  auto offline = make_caching_fetcher(*no_network, *store, root.string());
  auto again = offline->get("http://x/simple/torch/", "application/json");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, "{\"files\": []}");
  EXPECT_EQ(offline->get("http://x/missing").error().id, "fetch.not_found");            // the 404 is remembered
  EXPECT_EQ(offline->get("http://x/simple/torch/").error().id, "cache.offline_miss");    // another Accept is another document
  EXPECT_EQ(offline->get("http://x/never").error().id, "cache.offline_miss");
  EXPECT_EQ(net.requested.size(), 2u);
}

}  // namespace
