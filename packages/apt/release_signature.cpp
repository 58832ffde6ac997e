#include "packages/apt/release_signature.hpp"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <iterator>
#include <fstream>
#include <sstream>

namespace gpuenv::packages {
namespace {

namespace fs = std::filesystem;

constexpr std::chrono::seconds k_gpgv_timeout{60};

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool write_all(const std::string& path, std::string_view data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  return static_cast<bool>(out);
}

std::string unique_name(const std::string& dir, const std::string& stem) {
  static std::atomic<unsigned> n{0};
  return dir + "/" + stem + "." + std::to_string(::getpid()) + "." + std::to_string(n++);
}

/// Keyring files for gpgv: binary ones as they are, armored ones de-armored into work_dir.
Result<std::vector<std::string>> prepare_keyrings(const std::vector<std::string>& keyrings, const std::string& origin,
                                                  const std::string& work_dir, std::vector<std::string>& temporaries) {
  if (keyrings.empty()) {
    return make_error(ErrorKind::usage, "apt.no_keyring", "no keyring to verify the repository with", origin,
                      "give the source a signed-by keyring, or mark it trusted: true if it is not signed");
  }
  std::vector<std::string> out;
  for (const auto& k : keyrings) {
    std::error_code ec;
    if (!fs::is_regular_file(k, ec)) {
      return make_error(ErrorKind::usage, "apt.no_keyring", "keyring '" + k + "' does not exist", origin,
                        "install the repository's keyring package or fix signed-by");
    }
    const std::string text = read_all(k);
    if (text.find("-----BEGIN PGP PUBLIC KEY BLOCK-----") == std::string::npos) {
      out.push_back(k);
      continue;
    }
    auto binary = dearmor(text, k);
    if (!binary) return std::move(binary).error();
    const std::string path = unique_name(work_dir, "keyring") + ".gpg";
    if (!write_all(path, *binary)) return make_error(ErrorKind::environment, "apt.io", "cannot write " + path, origin, "");
    temporaries.push_back(path);
    out.push_back(path);
  }
  return out;
}

Result<VerifiedRelease> run_gpgv(CommandRunner& runner, const std::vector<std::string>& files, const std::vector<std::string>& keyrings,
                                 const std::string& origin, const std::string& work_dir, const std::string& output,
                                 std::vector<std::string>& temporaries) {
  auto rings = prepare_keyrings(keyrings, origin, work_dir, temporaries);
  if (!rings) return std::move(rings).error();
  std::vector<std::string> argv = {"gpgv", "--status-fd", "1"};
  for (const auto& k : *rings) {
    argv.push_back("--keyring");
    argv.push_back(k);
  }
  if (!output.empty()) {
    argv.push_back("--output");
    argv.push_back(output);
  }
  argv.insert(argv.end(), files.begin(), files.end());
  auto r = runner.run(argv, {}, k_gpgv_timeout);
  if (!r) return std::move(r).error();
  std::istringstream status(r->out);
  std::string line, fingerprint, problem;
  bool valid = false;
  while (std::getline(status, line)) {
    if (line.rfind("[GNUPG:] ", 0) != 0) continue;
    std::istringstream words(line.substr(9));
    std::string keyword;
    words >> keyword;
    if (keyword == "VALIDSIG") {
      std::vector<std::string> f{std::istream_iterator<std::string>(words), {}};
      // VALIDSIG <fpr> <date> <timestamp> <expire> <version> <reserved> <pubkey-algo> <hash-algo> ...
      if (f.size() > 7 && (f[7] == "1" || f[7] == "2")) {
        problem = "the signature uses the weak MD5/SHA-1 digest";
      } else {
        valid = true;
        fingerprint = f.empty() ? "" : f[0];
      }
    } else if (keyword == "BADSIG") {
      problem = "BAD signature: the file was altered after signing";
    } else if (keyword == "EXPKEYSIG" || keyword == "REVKEYSIG" || keyword == "EXPSIG") {
      problem = "the signing key or signature is expired or revoked (" + keyword + ")";
    } else if (keyword == "NO_PUBKEY" && !valid && problem.empty()) {
      problem = "signed by a key that is not in the source's keyring";
    } else if (keyword == "NODATA" && problem.empty()) {
      problem = "no signature found";
    }
  }
  if (!valid || !problem.empty() || r->exit_code != 0) {
    const bool unsigned_file = problem == "no signature found";
    if (problem.empty()) problem = "gpgv rejected the signature: " + r->err.substr(0, 300);
    return make_error(ErrorKind::environment, unsigned_file ? "apt.unsigned" : "apt.bad_signature", problem, origin,
                      unsigned_file ? "the repository is not signed; mark the source trusted: true only if you trust its transport"
                                    : "check signed-by names the repository's current key; never use a repository whose signature is bad");
  }
  VerifiedRelease v;
  v.fingerprint = fingerprint;
  return v;
}

void cleanup(const std::vector<std::string>& files) {
  for (const auto& f : files) ::unlink(f.c_str());
}

}  // namespace

Result<std::string> dearmor(std::string_view armored, const std::string& origin) {
  const auto begin = armored.find("-----BEGIN PGP");
  if (begin == std::string_view::npos) return make_error(ErrorKind::environment, "apt.bad_key", "not an ASCII-armored key", origin, "");
  const auto header_end = armored.find("\n\n", begin);
  const auto header_end_crlf = armored.find("\r\n\r\n", begin);
  std::size_t body = header_end != std::string_view::npos ? header_end + 2 : header_end_crlf != std::string_view::npos ? header_end_crlf + 4 : std::string_view::npos;
  if (body == std::string_view::npos) return make_error(ErrorKind::environment, "apt.bad_key", "armored key without a body", origin, "");
  const auto end = armored.find("-----END PGP", body);
  if (end == std::string_view::npos) return make_error(ErrorKind::environment, "apt.bad_key", "armored key without an END line", origin, "");
  static const std::string k_alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::uint32_t acc = 0;
  int bits = 0;
  std::istringstream lines{std::string(armored.substr(body, end - body))};
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty() && line[0] == '=') break;  // CRC-24 line
    for (char c : line) {
      if (c == '=') break;
      const auto v = k_alphabet.find(c);
      if (v == std::string::npos) return make_error(ErrorKind::environment, "apt.bad_key", "bad base64 in armored key", origin, "");
      acc = (acc << 6) | static_cast<std::uint32_t>(v);
      bits += 6;
      if (bits >= 8) {
        bits -= 8;
        out += static_cast<char>((acc >> bits) & 0xFF);
      }
    }
  }
  if (out.empty()) return make_error(ErrorKind::environment, "apt.bad_key", "empty armored key", origin, "");
  return out;
}

Result<VerifiedRelease> verify_inrelease(CommandRunner& runner, std::string_view inrelease, const std::vector<std::string>& keyrings,
                                         const std::string& origin, const std::string& work_dir) {
  if (inrelease.find("-----BEGIN PGP SIGNED MESSAGE-----") == std::string_view::npos) {
    return make_error(ErrorKind::environment, "apt.unsigned", "InRelease is not a clear-signed message", origin,
                      "the mirror may serve an error page or an unsigned file; try another mirror");
  }
  std::vector<std::string> temporaries;
  const std::string in = unique_name(work_dir, "InRelease");
  const std::string out = unique_name(work_dir, "Release");
  temporaries.push_back(in);
  temporaries.push_back(out);
  if (!write_all(in, inrelease)) return make_error(ErrorKind::environment, "apt.io", "cannot write " + in, origin, "");
  auto v = run_gpgv(runner, {in}, keyrings, origin, work_dir, out, temporaries);
  if (v) v->text = read_all(out);
  cleanup(temporaries);
  return v;
}

Result<VerifiedRelease> verify_detached_release(CommandRunner& runner, std::string_view release, std::string_view signature,
                                                const std::vector<std::string>& keyrings, const std::string& origin,
                                                const std::string& work_dir) {
  std::vector<std::string> temporaries;
  const std::string rel = unique_name(work_dir, "Release");
  const std::string sig = rel + ".gpg";
  temporaries.push_back(rel);
  temporaries.push_back(sig);
  if (!write_all(rel, release) || !write_all(sig, signature)) return make_error(ErrorKind::environment, "apt.io", "cannot write " + rel, origin, "");
  auto v = run_gpgv(runner, {sig, rel}, keyrings, origin, work_dir, "", temporaries);
  if (v) v->text = std::string(release);
  cleanup(temporaries);
  return v;
}

}  // namespace gpuenv::packages
