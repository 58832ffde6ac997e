// Fetches the URLs given on the command line into OUTDIR with gpuenv's libcurl fetcher (for bench/fetch.sh).
// Usage: fetch_bench [--parallel N] OUTDIR URL...
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "base/net/curl_fetcher.hpp"

int main(int argc, char** argv) {
  gpuenv::FetchOptions o;
  int i = 1;
  if (argc > 2 && std::strcmp(argv[1], "--parallel") == 0) {
    o.parallel = std::atoi(argv[2]);
    i = 3;
  }
  if (argc - i < 2) {
    std::cerr << "usage: fetch_bench [--parallel N] OUTDIR URL...\n";
    return 2;
  }
  const std::string out = argv[i++];
  std::vector<gpuenv::FetchRequest> reqs;
  for (int k = 0; i < argc; ++i, ++k) reqs.push_back({argv[i], out + "/" + std::to_string(k), std::nullopt, std::nullopt});
  auto f = gpuenv::make_curl_fetcher(o);
  int failed = 0;
  for (auto& r : f->fetch_all(reqs))
    if (!r) {
      std::cerr << r.error().to_string() << "\n";
      ++failed;
    }
  return failed ? 1 : 0;
}
