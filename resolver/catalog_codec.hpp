#pragma once
// A compact, fast-to-read encoding of a loaded Catalog. The build compiles recipes/catalog/*.yaml into it once
// (tools/catalog_compile.cpp) so that each gpuenv process reads the catalog in about a millisecond instead of
// running a YAML parser over it. decode(encode(c)) == c.
#include <string>
#include <string_view>

#include "resolver/catalog.hpp"

namespace gpuenv::resolver {

inline constexpr std::string_view k_catalog_codec_header = "gpuenv-catalog-bin-v4";

/// Encodes every fact and source of the catalog (line records, tab-separated fields, escaped text).
std::string encode_catalog(const Catalog& catalog);

/// Decodes encode_catalog()'s output; malformed input is ErrorKind::internal naming the line.
Result<Catalog> decode_catalog(std::string_view bytes);

}  // namespace gpuenv::resolver
