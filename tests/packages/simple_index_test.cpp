#include "packages/wheels/simple_index.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using gpuenv::packages::html_unescape;
using gpuenv::packages::IndexFile;
using gpuenv::packages::link_allowed;
using gpuenv::packages::metadata_url;
using gpuenv::packages::parse_simple_page;
using gpuenv::packages::project_page_url;
using gpuenv::packages::resolve_url;
using gpuenv::packages::SimplePage;

namespace {

constexpr const char* k_page = "https://example.com/simple/example-pkg/";
constexpr const char* k_json_type = "application/vnd.pypi.simple.v1+json";
const std::string k_sha_a(64, 'a');
const std::string k_sha_b(64, 'b');

// Shaped like a PEP 691 answer from a public index, with its hosts replaced.
const std::string k_json_page = R"({
  "meta": {"_last-serial": 20596163, "api-version": "1.1"},
  "name": "example-pkg",
  "files": [
    {"filename": "example_pkg-1.0-py3-none-any.whl",
     "url": "https://files.example.com/packages/ab/cd/example_pkg-1.0-py3-none-any.whl",
     "hashes": {"sha256": ")" + std::string(64, 'A') + R"("},
     "requires-python": ">=3.7", "yanked": false,
     "core-metadata": {"sha256": ")" + k_sha_b + R"("},
     "data-dist-info-metadata": {"sha256": ")" + k_sha_b + R"("},
     "size": 62574, "upload-time": "2023-05-22T15:12:44.175Z"},
    {"filename": "example-pkg-1.0.tar.gz",
     "url": "../../packages/ef/01/example-pkg-1.0.tar.gz#sha256=)" + k_sha_a + R"(",
     "hashes": {}, "requires-python": null, "yanked": "broken build",
     "dist-info-metadata": true, "size": 110794},
    {"filename": "example_pkg-0.9-py3-none-any.whl",
     "url": "https://files.example.com/packages/example_pkg-0.9-py3-none-any.whl",
     "hashes": {"md5": "00"}, "yanked": true, "core-metadata": false, "dist-info-metadata": true}
  ],
  "versions": ["0.9", "1.0"]
})";

std::vector<IndexFile> parse_ok(const std::string& body, const char* type, const std::string& url = k_page) {
  auto page = parse_simple_page(body, type, url);
  EXPECT_TRUE(page.ok()) << (page.ok() ? "" : page.error().to_string());
  if (!page.ok()) return {};
  EXPECT_EQ(page->skipped, std::vector<std::string>{});
  return page->files;
}

std::string error_id(const std::string& body, const char* type) {
  auto files = parse_simple_page(body, type, k_page);
  return files.ok() ? "ok" : files.error().id;
}

TEST(SimpleJson, ReadsEveryFieldOfPep691) {
  const auto files = parse_ok(k_json_page, k_json_type);
  ASSERT_EQ(files.size(), 3U);
  const IndexFile& wheel = files[0];
  EXPECT_EQ(wheel.filename, "example_pkg-1.0-py3-none-any.whl");
  EXPECT_EQ(wheel.url, "https://files.example.com/packages/ab/cd/example_pkg-1.0-py3-none-any.whl");
  EXPECT_EQ(wheel.sha256.hex(), k_sha_a);  // lowercased
  EXPECT_EQ(wheel.requires_python, ">=3.7");
  EXPECT_FALSE(wheel.yanked.has_value());
  EXPECT_TRUE(wheel.has_metadata);
  EXPECT_EQ(wheel.metadata_sha256.hex(), k_sha_b);
  ASSERT_TRUE(wheel.size.has_value());
  EXPECT_EQ(*wheel.size, 62574U);
  EXPECT_EQ(wheel.upload_time, "2023-05-22T15:12:44.175Z");
  EXPECT_EQ(metadata_url(wheel), wheel.url + ".metadata");
}

TEST(SimpleJson, ResolvesRelativeUrlsAndTakesTheHashFromTheFragment) {
  const auto files = parse_ok(k_json_page, k_json_type);
  ASSERT_EQ(files.size(), 3U);
  EXPECT_EQ(files[1].url, "https://example.com/packages/ef/01/example-pkg-1.0.tar.gz");
  EXPECT_EQ(files[1].sha256.hex(), k_sha_a);
  EXPECT_EQ(files[1].requires_python, "");
  ASSERT_TRUE(files[1].size.has_value());
  EXPECT_EQ(*files[1].size, 110794U);
}

TEST(SimpleJson, ReadsYankedAsBooleanOrReason) {
  const auto files = parse_ok(k_json_page, k_json_type);
  ASSERT_EQ(files.size(), 3U);
  ASSERT_TRUE(files[1].yanked.has_value());
  EXPECT_EQ(*files[1].yanked, "broken build");
  ASSERT_TRUE(files[2].yanked.has_value());
  EXPECT_EQ(*files[2].yanked, "");
}

TEST(SimpleJson, PrefersCoreMetadataOverTheOldName) {
  const auto files = parse_ok(k_json_page, k_json_type);
  ASSERT_EQ(files.size(), 3U);
  EXPECT_TRUE(files[1].has_metadata);  // only dist-info-metadata: true
  EXPECT_EQ(files[1].metadata_sha256.hex(), "");
  EXPECT_FALSE(files[2].has_metadata);  // core-metadata: false wins over dist-info-metadata: true
  EXPECT_EQ(files[2].sha256.hex(), "");       // only an md5 is given
}

TEST(SimpleJson, TurnsMalformedPagesIntoErrors) {
  EXPECT_EQ(error_id("{\"files\": [", k_json_type), "simple.json");
  EXPECT_EQ(error_id("[]", k_json_type), "simple.json");
  EXPECT_EQ(error_id("{\"meta\": {\"api-version\": \"1.0\"}}", k_json_type), "simple.json");
  EXPECT_EQ(error_id(R"({"files": [{"filename": "a.whl"}]})", k_json_type), "simple.json");
  EXPECT_EQ(error_id(R"({"files": [{"filename": "a.whl", "url": "a.whl", "size": -1}]})", k_json_type),
            "simple.json");
  EXPECT_EQ(error_id(R"({"files": [{"filename": "a.whl", "url": "a.whl", "yanked": 1}]})", k_json_type),
            "simple.json");
  EXPECT_EQ(error_id(R"({"files": [{"filename": "a.whl", "url": "a.whl", "hashes": {"sha256": "xyz"}}]})",
                     k_json_type),
            "simple.bad_hash");
  EXPECT_EQ(error_id(R"({"files": [{"filename": "../a.whl", "url": "a.whl"}]})", k_json_type),
            "simple.bad_filename");
  EXPECT_EQ(error_id(R"({"meta": {"api-version": "2.0"}, "files": []})", k_json_type), "simple.api_version");
  EXPECT_EQ(error_id("{}", "application/vnd.pypi.simple.v2+json"), "simple.api_version");

  auto bad = parse_simple_page(R"({"files": [{"filename": "a.whl", "url": 3}]})", k_json_type, k_page);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("files[0].url"), std::string::npos);
  EXPECT_EQ(bad.error().where, k_page);
  EXPECT_FALSE(bad.error().hint.empty());
}

// Shaped like a PEP 503 page from a public index, with its hosts replaced.
const std::string k_html_page =
    "<!DOCTYPE html>\n<html>\n  <head>\n    <meta name=\"pypi:repository-version\" content=\"1.1\">\n"
    "    <title>Links for example-pkg</title>\n  </head>\n  <body>\n    <h1>Links for example-pkg</h1>\n"
    "    <a href=\"https://files.example.com/packages/ab/example_pkg-1.0-py3-none-any.whl#sha256=" +
    k_sha_a +
    "\" data-requires-python=\"&gt;=3.7\" data-dist-info-metadata=\"sha256=" + k_sha_b +
    "\" data-core-metadata=\"sha256=" + k_sha_b +
    "\">example_pkg-1.0-py3-none-any.whl</a><br />\n"
    "    <a href=\"../../packages/ef/example-pkg-0.9.tar.gz#sha256=" + k_sha_b +
    "\" data-requires-python=\"&gt;=3.6, !=3.0.*\" data-yanked=\"bad &quot;release&quot;\">"
    "example-pkg-0.9.tar.gz</a><br />\n"
    "    <a href=\"example_pkg-0.8-py2.py3-none-any.whl\" data-yanked>example_pkg-0.8-py2.py3-none-any.whl</a>\n"
    "  </body>\n</html>\n<!--SERIAL 20596163-->\n";

TEST(SimpleHtml, ReadsAnchorsAndTheirDataAttributes) {
  const auto files = parse_ok(k_html_page, "text/html; charset=utf-8");
  ASSERT_EQ(files.size(), 3U);
  EXPECT_EQ(files[0].filename, "example_pkg-1.0-py3-none-any.whl");
  EXPECT_EQ(files[0].url, "https://files.example.com/packages/ab/example_pkg-1.0-py3-none-any.whl");
  EXPECT_EQ(files[0].sha256.hex(), k_sha_a);
  EXPECT_EQ(files[0].requires_python, ">=3.7");
  EXPECT_TRUE(files[0].has_metadata);
  EXPECT_EQ(files[0].metadata_sha256.hex(), k_sha_b);
  EXPECT_FALSE(files[0].yanked.has_value());
  EXPECT_FALSE(files[0].size.has_value());

  EXPECT_EQ(files[1].url, "https://example.com/packages/ef/example-pkg-0.9.tar.gz");
  EXPECT_EQ(files[1].requires_python, ">=3.6, !=3.0.*");
  ASSERT_TRUE(files[1].yanked.has_value());
  EXPECT_EQ(*files[1].yanked, "bad \"release\"");
  EXPECT_FALSE(files[1].has_metadata);

  EXPECT_EQ(files[2].url, "https://example.com/simple/example-pkg/example_pkg-0.8-py2.py3-none-any.whl");
  EXPECT_EQ(files[2].sha256.hex(), "");
  ASSERT_TRUE(files[2].yanked.has_value());
  EXPECT_EQ(*files[2].yanked, "");
}

TEST(SimpleHtml, ToleratesSloppyMarkup) {
  const std::string page =
      "<HTML><BODY>\n"
      "<!-- <a href=\"commented-1.0-py3-none-any.whl\">x</a> -->\n"
      "<script>var s = '<a href=\"scripted-1.0-py3-none-any.whl\">';</script>\n"
      "<A HREF=unquoted-1.0-py3-none-any.whl DATA-REQUIRES-PYTHON=&gt;=3.8>one</A>\n"
      "<a\n   href = 'single-1.0-py3-none-any.whl'\n   data-dist-info-metadata='true'>two</a>\n"
      "<a href=\"amp-1.0-py3-none-any.whl?a=1&amp;b=2&c=3\" data-requires-python=\"&lt;4&#44;&#x3e;=3\">3</a>\n"
      "<a name=\"no-href\">anchor without href</a><a href=\"\">empty</a>\n"
      "<a href=\"dup-1.0-py3-none-any.whl\" href=\"ignored.whl\"/>\n";
  const auto files = parse_ok(page, "text/html", "http://127.0.0.1:8080/simple/pkg/");
  ASSERT_EQ(files.size(), 4U);
  EXPECT_EQ(files[0].filename, "unquoted-1.0-py3-none-any.whl");
  EXPECT_EQ(files[0].requires_python, ">=3.8");
  EXPECT_EQ(files[1].filename, "single-1.0-py3-none-any.whl");
  EXPECT_TRUE(files[1].has_metadata);
  EXPECT_EQ(files[1].metadata_sha256.hex(), "");
  EXPECT_EQ(files[2].url, "http://127.0.0.1:8080/simple/pkg/amp-1.0-py3-none-any.whl?a=1&b=2&c=3");
  EXPECT_EQ(files[2].filename, "amp-1.0-py3-none-any.whl");
  EXPECT_EQ(files[2].requires_python, "<4,>=3");
  EXPECT_EQ(files[3].filename, "dup-1.0-py3-none-any.whl");
}

TEST(SimpleHtml, HonoursBaseHrefAndSkipsDirectoryLinks) {
  const std::string page =
      "<html><head><base href=\"/mirror/files/\"></head><body>\n"
      "<a href=\"../\">../</a>\n<a href=\"./\">./</a>\n<a href=\"sub/\">sub/</a>\n"
      "<a href=\"pkg-1.0-py3-none-any.whl\">pkg-1.0-py3-none-any.whl</a>\n</body></html>";
  const auto files = parse_ok(page, "text/html", "https://example.com/simple/pkg/");
  ASSERT_EQ(files.size(), 1U);
  EXPECT_EQ(files[0].url, "https://example.com/mirror/files/pkg-1.0-py3-none-any.whl");
}

TEST(SimpleHtml, RequotesUrlPathsAsPipDoes) {
  const std::string page =
      "<a href=\"/whl/cu118/torch-2.0.0+cu118-cp311-cp311-linux_x86_64.whl#sha256=" + k_sha_a + "\">t</a>\n"
      "<a href=\"files/my%20pkg-1.0.tar.gz\">s</a><a href=\"files/other pkg-1.0.tar.gz\">u</a>\n"
      "<a href=\"files/caf\xC3\xA9-1.0.tar.gz\">u</a><a href=\"files/a%2fb.tar.gz\">slash</a>\n";
  auto parsed = parse_simple_page(page, "text/html", "https://example.com/whl/cu118/torch/");
  ASSERT_FALSE(parsed.ok());  // "a%2fb" decodes to a name with a slash
  EXPECT_EQ(parsed.error().id, "simple.bad_filename");
  const auto files = parse_ok(page.substr(0, page.find("<a href=\"files/a%2f")), "text/html",
                              "https://example.com/whl/cu118/torch/");
  ASSERT_EQ(files.size(), 4U);
  EXPECT_EQ(files[0].url, "https://example.com/whl/cu118/torch-2.0.0%2Bcu118-cp311-cp311-linux_x86_64.whl");
  EXPECT_EQ(files[0].filename, "torch-2.0.0+cu118-cp311-cp311-linux_x86_64.whl");
  EXPECT_EQ(files[1].url, "https://example.com/whl/cu118/torch/files/my%20pkg-1.0.tar.gz");
  EXPECT_EQ(files[1].filename, "my pkg-1.0.tar.gz");
  EXPECT_EQ(files[2].url, files[1].url.substr(0, files[1].url.find("my")) + "other%20pkg-1.0.tar.gz");
  EXPECT_EQ(files[3].url, "https://example.com/whl/cu118/torch/files/caf%C3%A9-1.0.tar.gz");
}

TEST(SimpleHtml, RejectsBadHashes) {
  EXPECT_EQ(error_id("<a href=\"a-1.0.tar.gz#sha256=123\">a</a>", "text/html"), "simple.bad_hash");
  EXPECT_EQ(error_id("<a href=\"a-1.0.tar.gz\" data-core-metadata=\"sha256=zz\">a</a>", "text/html"),
            "simple.bad_hash");
  // Other hash names are not checked, as pip only verifies what it can.
  EXPECT_EQ(error_id("<a href=\"a-1.0.tar.gz#md5=123\">a</a>", "text/html"), "ok");
}

TEST(SimplePage, PicksTheFormatFromTheContentType) {
  EXPECT_EQ(parse_ok(k_json_page, "application/vnd.pypi.simple.latest+json").size(), 3U);
  EXPECT_EQ(parse_ok(k_json_page, "").size(), 3U);  // sniffed
  EXPECT_EQ(parse_ok(k_html_page, "").size(), 3U);
  EXPECT_EQ(parse_ok(k_html_page, "Application/Vnd.Pypi.Simple.V1+HTML").size(), 3U);
  EXPECT_EQ(error_id(k_html_page, "application/octet-stream"), "simple.content_type");
  EXPECT_EQ(error_id(k_html_page, k_json_type), "simple.json");
}

SimplePage parse_page(const std::string& body, const char* type, const std::string& url) {
  auto page = parse_simple_page(body, type, url);
  EXPECT_TRUE(page.ok()) << (page.ok() ? "" : page.error().to_string());
  return page.ok() ? *page : SimplePage{};
}

std::vector<std::string> urls(const SimplePage& page) {
  std::vector<std::string> out;
  for (const auto& f : page.files) out.push_back(f.url);
  return out;
}

TEST(SimpleHtml, DropsLinksWhoseSchemeIsNotHttpWithANote) {
  const std::string page =
      "<a href=\"file:///etc/passwd\">passwd-1.0.tar.gz</a>\n"
      "<a href=\"FILE:///srv/x-1.0-py3-none-any.whl#sha256=zz\">x</a>\n"  // a bad hash on a dropped link is no error
      "<a href=\"ftp://example.com/pkg-1.0.tar.gz\">ftp</a>\n"
      "<a href=\"javascript:alert(1)\">js</a><a href=\"data:text/plain,hi\">data</a>\n"
      "<a href=\"HTTP://example.com/pkg-1.1-py3-none-any.whl\" data-core-metadata=\"true\">http</a>\n"
      "<a href=\"//mirror.example.com/pkg-1.2-py3-none-any.whl\">same scheme as the page</a>\n"
      "<a href=\"pkg-1.3-py3-none-any.whl\">relative</a>\n";
  const auto parsed = parse_page(page, "text/html", k_page);
  EXPECT_EQ(urls(parsed), (std::vector<std::string>{"http://example.com/pkg-1.1-py3-none-any.whl",
                                                    "https://mirror.example.com/pkg-1.2-py3-none-any.whl",
                                                    "https://example.com/simple/example-pkg/pkg-1.3-py3-none-any.whl"}));
  EXPECT_EQ(metadata_url(parsed.files[0]), "http://example.com/pkg-1.1-py3-none-any.whl.metadata");
  ASSERT_EQ(parsed.skipped.size(), 5U);
  EXPECT_NE(parsed.skipped[0].find("file:///etc/passwd"), std::string::npos) << parsed.skipped[0];
  EXPECT_NE(parsed.skipped[2].find("ftp://example.com/pkg-1.0.tar.gz"), std::string::npos) << parsed.skipped[2];
  EXPECT_NE(parsed.skipped[2].find("not followed"), std::string::npos) << parsed.skipped[2];

  // A <base href> cannot move the links of a web page onto the local disk either.
  const auto based = parse_page("<base href=\"file:///srv/\"><a href=\"a-1.0-py3-none-any.whl\">a</a>", "text/html", k_page);
  EXPECT_TRUE(based.files.empty());
  ASSERT_EQ(based.skipped.size(), 1U);
  EXPECT_NE(based.skipped[0].find("file:///srv/a-1.0-py3-none-any.whl"), std::string::npos) << based.skipped[0];
}

TEST(SimpleJson, DropsFilesWhoseUrlSchemeIsNotHttpWithANote) {
  const std::string page = R"({"meta": {"api-version": "1.1"}, "name": "example-pkg", "files": [
    {"filename": "a-1.0-py3-none-any.whl", "url": "file:///etc/passwd", "hashes": {"sha256": ")" + k_sha_a + R"("},
     "core-metadata": true},
    {"filename": "b-1.0-py3-none-any.whl", "url": "ftp://example.com/b-1.0-py3-none-any.whl", "hashes": {}},
    {"filename": "c-1.0-py3-none-any.whl", "url": "c-1.0-py3-none-any.whl", "hashes": {}, "core-metadata": true}]})";
  const auto parsed = parse_page(page, k_json_type, k_page);
  EXPECT_EQ(urls(parsed), (std::vector<std::string>{"https://example.com/simple/example-pkg/c-1.0-py3-none-any.whl"}));
  ASSERT_EQ(parsed.skipped.size(), 2U);
  EXPECT_NE(parsed.skipped[0].find("files[0] (a-1.0-py3-none-any.whl)"), std::string::npos) << parsed.skipped[0];
  EXPECT_NE(parsed.skipped[1].find("ftp://example.com/"), std::string::npos) << parsed.skipped[1];
}

TEST(SimplePage, KeepsFileLinksOnlyOnAFileIndex) {
  const std::string page = "<a href=\"a-1.0-py3-none-any.whl\">a</a><a href=\"file:///mnt/b-1.0-py3-none-any.whl\">b</a>"
                           "<a href=\"https://example.com/c-1.0-py3-none-any.whl\">c</a><a href=\"ftp://example.com/d.whl\">d</a>";
  const auto local = parse_page(page, "text/html", "file:///srv/simple/pkg/");
  EXPECT_EQ(urls(local), (std::vector<std::string>{"file:///srv/simple/pkg/a-1.0-py3-none-any.whl",
                                                   "file:///mnt/b-1.0-py3-none-any.whl",
                                                   "https://example.com/c-1.0-py3-none-any.whl"}));
  EXPECT_EQ(local.skipped.size(), 1U);  // ftp stays out even there
  const auto web = parse_page(page, "text/html", "http://127.0.0.1:8080/simple/pkg/");
  EXPECT_EQ(urls(web), (std::vector<std::string>{"http://127.0.0.1:8080/simple/pkg/a-1.0-py3-none-any.whl",
                                                 "https://example.com/c-1.0-py3-none-any.whl"}));
  EXPECT_EQ(web.skipped.size(), 2U);
  // A page read from something without a scheme gives links without one: none is followed.
  const auto bare = parse_page(page, "text/html", "/srv/simple/pkg/");
  EXPECT_EQ(urls(bare), (std::vector<std::string>{"https://example.com/c-1.0-py3-none-any.whl"}));
}

TEST(LinkAllowed, AllowsHttpEverywhereAndFileOnlyFromFile) {
  EXPECT_TRUE(link_allowed("https://example.com/a.whl", "https://example.com/simple/a/"));
  EXPECT_TRUE(link_allowed("HTTP://example.com/a.whl", "https://example.com/simple/a/"));
  EXPECT_TRUE(link_allowed("http://127.0.0.1/a.whl", "file:///srv/simple/a/"));
  EXPECT_TRUE(link_allowed("file:///srv/a.whl", "File:///srv/simple/a/"));
  EXPECT_FALSE(link_allowed("file:///srv/a.whl", "https://example.com/simple/a/"));
  EXPECT_FALSE(link_allowed("file:///srv/a.whl", "/srv/simple/a/"));
  EXPECT_FALSE(link_allowed("ftp://example.com/a.whl", "file:///srv/simple/a/"));
  EXPECT_FALSE(link_allowed("httpx://example.com/a.whl", "https://example.com/simple/a/"));
  EXPECT_FALSE(link_allowed("/a.whl", "https://example.com/simple/a/"));  // unresolved
  EXPECT_FALSE(link_allowed("", "https://example.com/simple/a/"));
}

TEST(ProjectPageUrl, NormalizesTheNameAndEndsWithASlash) {
  EXPECT_EQ(project_page_url("https://example.com/simple", "Foo_Bar.baz"), "https://example.com/simple/foo-bar-baz/");
  EXPECT_EQ(project_page_url("https://example.com/simple/", "NumPy"), "https://example.com/simple/numpy/");
}

TEST(ResolveUrl, FollowsRfc3986) {
  const char* base = "http://a/b/c/d;p?q";
  // The normal and abnormal examples of RFC 3986 section 5.4.
  EXPECT_EQ(resolve_url(base, "g:h"), "g:h");
  EXPECT_EQ(resolve_url(base, "g"), "http://a/b/c/g");
  EXPECT_EQ(resolve_url(base, "./g"), "http://a/b/c/g");
  EXPECT_EQ(resolve_url(base, "g/"), "http://a/b/c/g/");
  EXPECT_EQ(resolve_url(base, "/g"), "http://a/g");
  EXPECT_EQ(resolve_url(base, "//g"), "http://g");
  EXPECT_EQ(resolve_url(base, "?y"), "http://a/b/c/d;p?y");
  EXPECT_EQ(resolve_url(base, "g?y"), "http://a/b/c/g?y");
  EXPECT_EQ(resolve_url(base, "#s"), "http://a/b/c/d;p?q#s");
  EXPECT_EQ(resolve_url(base, ""), "http://a/b/c/d;p?q");
  EXPECT_EQ(resolve_url(base, "."), "http://a/b/c/");
  EXPECT_EQ(resolve_url(base, ".."), "http://a/b/");
  EXPECT_EQ(resolve_url(base, "../g"), "http://a/b/g");
  EXPECT_EQ(resolve_url(base, "../../g"), "http://a/g");
  EXPECT_EQ(resolve_url(base, "../../../g"), "http://a/g");
  EXPECT_EQ(resolve_url(base, "/./g"), "http://a/g");
  EXPECT_EQ(resolve_url(base, "g."), "http://a/b/c/g.");
  EXPECT_EQ(resolve_url(base, "./../g"), "http://a/b/g");
  EXPECT_EQ(resolve_url(base, "g/./h"), "http://a/b/c/g/h");
  EXPECT_EQ(resolve_url(base, "g;x=1/../y"), "http://a/b/c/y");
  EXPECT_EQ(resolve_url("https://example.com", "a.whl"), "https://example.com/a.whl");
}

TEST(HtmlUnescape, DecodesReferencesButLeavesUnknownNames) {
  EXPECT_EQ(html_unescape("&gt;=3.8,&lt;4"), ">=3.8,<4");
  EXPECT_EQ(html_unescape("&#62;&#x3E;&#X3e;"), ">>>");
  EXPECT_EQ(html_unescape("&quot;a&apos;&#39;"), "\"a''");
  EXPECT_EQ(html_unescape("a&b&unknown;&amp"), "a&b&unknown;&");
  EXPECT_EQ(html_unescape("?a=1&copy=2&lt=3"), "?a=1&copy=2&lt=3");
  EXPECT_EQ(html_unescape("&#233;&#0;"), "\xC3\xA9\xEF\xBF\xBD");
}

}  // namespace
