#pragma once
// Project pages of the Python "simple" repository API: PEP 691 JSON and PEP 503 HTML (with the attributes of
// PEP 592 yanking, PEP 658/714 metadata files and data-requires-python), read as pip reads them: links resolved
// against the page (or its <base href>), URL paths re-quoted as pip's _ensure_quoted_url does, the sha256 taken
// from the hashes or the #sha256= fragment. Pure text in, records out: fetching is the caller's business.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/digest.hpp"
#include "base/error.hpp"

namespace gpuenv::packages {

/// One distribution file listed on a project page.
struct IndexFile {
  std::string filename;                ///< the file's name (JSON "filename"; HTML: last segment of the URL path)
  std::string url;                     ///< absolute, without fragment; http(s), or file from a file: page
  Digest sha256;                       ///< empty when the index gives none
  std::string requires_python;         ///< as given (entities decoded), "" when absent
  std::optional<std::string> yanked;   ///< the reason ("" when none is given) when the file is yanked
  bool has_metadata = false;           ///< whether a PEP 658 metadata file is served at metadata_url()
  Digest metadata_sha256;              ///< sha256 of that metadata file, empty when not given
  std::optional<std::uint64_t> size;   ///< bytes, JSON pages only
  std::string upload_time;             ///< ISO 8601 as given, JSON pages only, "" when absent
};

/// A parsed project page: the files it lists, and the links it had that gpuenv will not follow.
struct SimplePage {
  std::vector<IndexFile> files;
  /// One line per dropped link: what it was and why ("files[2] (a.whl): ftp://... is not an http(s) URL").
  /// Only http and https links are kept, and file links when the page itself came from a file: URL (a local
  /// index); anything else (file: from a web index, ftp:, data:, a link without a scheme) is never fetched.
  std::vector<std::string> skipped;
};

/// Parses a project page. `content_type` picks the format (PEP 691 JSON for
/// application/vnd.pypi.simple.v1+json, .latest+json and application/json; HTML for text/html and
/// application/vnd.pypi.simple.v1+html; sniffed from the body when empty); `page_url` is the URL the page came
/// from, against which relative links resolve. Fails with `simple.content_type` for any other type,
/// `simple.api_version` for a major API version other than 1, `simple.json` for malformed JSON or fields of the
/// wrong type (the file's index named), `simple.bad_hash` for a sha256 that is not 64 hex digits and
/// `simple.bad_filename` for a file name with a path separator or NUL, and `simple.page` when memory runs out.
/// HTML is read leniently, as browsers do. Links with a scheme link_allowed() refuses are not errors: they are
/// left out of `files` and noted in `skipped`.
Result<SimplePage> parse_simple_page(std::string_view body, std::string_view content_type,
                                                 const std::string& page_url);

/// The project page of `project` under `index_url`: the index URL with one trailing slash, the PEP 503
/// normalized name, and a trailing slash ("https://example.com/simple" + "Foo_Bar" is
/// "https://example.com/simple/foo-bar/"). Never fails.
std::string project_page_url(const std::string& index_url, std::string_view project);

/// Whether gpuenv may fetch `url`, a link read from the page at `page_url`: its scheme is http or https, or file
/// when the page's scheme is file too (a local index may point into the local disk, a web index may not).
/// Schemes compare case-insensitively. Never fails.
bool link_allowed(std::string_view url, std::string_view page_url);

/// Where the PEP 658 metadata file of `file` is served: its URL with ".metadata" appended, so it has the
/// file's (allowed) scheme. Never fails; only meaningful when file.has_metadata.
std::string metadata_url(const IndexFile& file);

/// Resolves `reference` against the absolute URL `base` (RFC 3986 section 5.2, dot segments removed). Never
/// fails; a reference with a scheme is returned with its dot segments removed.
std::string resolve_url(std::string_view base, std::string_view reference);

/// Decodes HTML character references: numeric ones, and the named ones amp, lt, gt, quot, apos and nbsp
/// (amp, lt, gt and quot also without ';' when no letter, digit or '=' follows, as HTML does in attributes).
/// Unknown names are left as written. Never fails.
std::string html_unescape(std::string_view text);

}  // namespace gpuenv::packages
