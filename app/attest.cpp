#include "app/attest.hpp"

#include "base/cache/caching_fetcher.hpp"
#include "base/file_io.hpp"
#include "base/net/http_client.hpp"
#include "base/yaml_guard.hpp"
#include "marks/statement.hpp"

#include <algorithm>

namespace gpuenv::app {
namespace {

constexpr std::size_t k_max_evidence_bytes = 16u << 20;
constexpr std::size_t k_max_rim_file_bytes = 4u << 20;

Error usage(const std::string& what, const std::string& hint) { return make_error(ErrorKind::usage, "attest.usage", what, "", hint); }

Result<std::string> unhex_nonce(const std::string& hex) {
  std::string h = hex.rfind("0x", 0) == 0 ? hex.substr(2) : hex;
  if (h.size() != 64 || h.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
    return usage("--nonce must be 64 hex digits (32 bytes), found '" + hex + "'", "give the nonce the evidence was requested with");
  std::string out;
  for (std::size_t i = 0; i < 64; i += 2) out.push_back(static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16)));
  return out;
}

Result<std::int64_t> judgement_time(const std::string& at, const Services& services) {
  if (at.empty()) return now_seconds(services);
  std::string text = at;
  if (text.size() == 10) text += "T00:00:00Z";  // a date
  if (auto t = marks::parse_rfc3339_utc(text)) return *t;
  return usage("--at must be a UTC time (2024-01-01T00:00:00Z) or a date (2024-01-01), found '" + at + "'",
               "--at judges certificate validity at another time, e.g. when archived evidence was made");
}

class ServiceRimStore final : public attest::RimStore {
 public:
  ServiceRimStore(Fetcher& fetcher, std::string base) : fetcher_(fetcher), base_(std::move(base)) {
    while (!base_.empty() && base_.back() == '/') base_.pop_back();
  }
  Result<std::string> get(const std::string& id) override {
    if (!attest::is_rim_id(id))
      return make_error(ErrorKind::spec, "attest.bad_rim_id", "'" + id + "' is not a RIM id", base_, "RIM ids are letters, digits, '_', '.' and '-'");
    const std::string url = base_ + "/v1/rim/" + id;
    auto body = fetcher_.get(url, "application/json");
    if (!body) {
      if (body.error().id == "fetch.not_found")
        return make_error(ErrorKind::environment, "attest.rim_not_found", "the RIM service has no " + id + " (404)", url,
                          "NVIDIA publishes RIMs some time after a driver or VBIOS ships; pin a driver whose RIMs exist, or put the RIM in --rim-dir");
      return std::move(body).error();
    }
    return attest::rim_from_service_json(*body, id, url);
  }
  [[nodiscard]] std::string describe() const override { return "the RIM service " + base_; }

 private:
  Fetcher& fetcher_;
  std::string base_;
};

/// The first store that has a RIM answers; "not found" goes on to the next, any other error stops.
class FirstRimStore final : public attest::RimStore {
 public:
  explicit FirstRimStore(std::vector<std::unique_ptr<attest::RimStore>> stores) : stores_(std::move(stores)) {}
  Result<std::string> get(const std::string& id) override {
    std::string misses;
    for (auto& s : stores_) {
      auto got = s->get(id);
      if (got || got.error().id != "attest.rim_not_found") return got;
      misses += (misses.empty() ? "" : "; ") + got.error().message;
    }
    return make_error(ErrorKind::environment, "attest.rim_not_found", misses, describe(), "");
  }
  [[nodiscard]] std::string describe() const override {
    std::string d;
    for (const auto& s : stores_) d += (d.empty() ? "" : ", then ") + s->describe();
    return d;
  }

 private:
  std::vector<std::unique_ptr<attest::RimStore>> stores_;
};

struct Item {
  std::string report, chain, where;
  std::optional<std::string> nonce;
  attest::DeviceKind kind = attest::DeviceKind::unknown;
};

attest::DeviceKind kind_of_arch(std::string arch) {
  std::transform(arch.begin(), arch.end(), arch.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  if (arch == "HOPPER") return attest::DeviceKind::hopper;
  if (arch == "BLACKWELL") return attest::DeviceKind::blackwell;
  if (arch == "LS10" || arch == "NVSWITCH") return attest::DeviceKind::nvswitch;
  return attest::DeviceKind::unknown;
}

Result<std::vector<Item>> read_items(const AttestVerifyRequest& rq, const std::optional<std::string>& caller_nonce, AttestVerifyResult& out) {
  std::vector<Item> items;
  if (!rq.evidence_path.empty()) {
    GPUENV_TRY(text, read_file_limited(rq.evidence_path, k_max_evidence_bytes));
    GPUENV_TRY(evidence, attest::parse_evidence_json(text, rq.evidence_path));
    out.nonce_source = caller_nonce ? "caller" : "evidence file";
    for (std::size_t i = 0; i < evidence.items.size(); ++i) {
      auto& e = evidence.items[i];
      items.push_back({std::move(e.report), std::move(e.cert_chain), rq.evidence_path + ": evidence_list[" + std::to_string(i) + "]",
                       caller_nonce ? caller_nonce : std::optional<std::string>(e.nonce), kind_of_arch(evidence.arch)});
    }
    return items;
  }
  GPUENV_TRY(report_file, read_file_limited(rq.report_path, k_max_evidence_bytes));
  GPUENV_TRY(report, attest::report_bytes(report_file, rq.report_path));
  GPUENV_TRY(chain, read_file_limited(rq.chain_path, 1u << 20));
  out.nonce_source = "caller";
  items.push_back({std::move(report), std::move(chain), rq.report_path, caller_nonce, attest::DeviceKind::unknown});
  return items;
}

}  // namespace

bool AttestVerifyResult::pass() const {
  return !devices.empty() && std::all_of(devices.begin(), devices.end(), [](const AttestedDevice& d) { return d.verdict.pass; });
}

std::unique_ptr<attest::RimStore> make_service_rim_store(Fetcher& fetcher, std::string base_url) {
  return std::make_unique<ServiceRimStore>(fetcher, std::move(base_url));
}

Result<AttestVerifyResult> attest_verify(const AttestVerifyRequest& rq, Services& services) {
  const bool by_evidence = !rq.evidence_path.empty(), by_report = !rq.report_path.empty();
  if (by_evidence == by_report) return usage("give --evidence FILE, or --report FILE with --cert-chain FILE and --nonce HEX", "see gpuenv attest verify --help");
  if (by_report && (rq.chain_path.empty() || rq.nonce_hex.empty()))
    return usage("--report needs --cert-chain and --nonce", "the chain is what nvmlDeviceGetConfComputeGpuCertificate returned; the nonce is the one you sent");
  AttestVerifyResult out;
  std::optional<std::string> caller_nonce;
  if (!rq.nonce_hex.empty()) {
    GPUENV_TRY(n, unhex_nonce(rq.nonce_hex));
    caller_nonce = std::move(n);
  }
  GPUENV_TRY(at, judgement_time(rq.at, services));
  out.at = at;
  out.policy = attest::default_policy();
  if (!rq.policy_path.empty()) {
    GPUENV_TRY(text, read_yaml_file(rq.policy_path, 64 * 1024));
    GPUENV_TRY(policy, attest::parse_policy(text, rq.policy_path));
    out.policy = std::move(policy);
  }
  attest::RimInputs rims;
  if (!rq.driver_rim.empty()) {
    GPUENV_TRY(x, read_file_limited(rq.driver_rim, k_max_rim_file_bytes));
    rims.driver_xml = std::move(x);
    rims.driver_where = rq.driver_rim;
  }
  if (!rq.vbios_rim.empty()) {
    GPUENV_TRY(x, read_file_limited(rq.vbios_rim, k_max_rim_file_bytes));
    rims.vbios_xml = std::move(x);
    rims.vbios_where = rq.vbios_rim;
  }
  GPUENV_TRY(items, read_items(rq, caller_nonce, out));
  if (items.size() > 1 && (rims.driver_xml || rims.vbios_xml))
    return usage("--driver-rim and --vbios-rim name one device's RIMs, but the evidence holds " + std::to_string(items.size()) + " devices",
                 "put the RIMs in a directory and give --rim-dir");

  std::vector<std::unique_ptr<attest::RimStore>> stores;
  if (!rq.rim_dir.empty()) stores.push_back(attest::make_directory_rim_store(rq.rim_dir));
  const std::string service = !rq.rim_service.empty() ? rq.rim_service : env_or(services, "GPUENV_RIM_SERVICE_URL");
  std::unique_ptr<Fetcher> network, fetcher;
  std::unique_ptr<BlobStore> blobs;
  if (!service.empty()) {
    network = rq.offline ? make_offline_fetcher() : (services.make_fetcher ? services.make_fetcher(services.net) : nullptr);
    if (!network) return make_error(ErrorKind::internal, "cli.no_adapters", "no fetcher configured", "", "");
    const std::string cache = cache_root(services);
    GPUENV_TRY(store, open_blob_store(services, cache));
    blobs = std::move(store);
    fetcher = make_caching_fetcher(*network, *blobs, cache);  // RIMs answer from the cache offline
    stores.push_back(make_service_rim_store(*fetcher, service));
  }
  attest::RevocationInputs revocation;
  std::unique_ptr<HttpClient> http;
  std::unique_ptr<attest::OcspTransport> ocsp;
  if (rq.ocsp) {
    if (rq.offline) return usage("--ocsp asks the network and --offline forbids it", "drop one of them");
    HttpOptions options;
    options.limits = services.net;
    http = make_curl_http_client(options);
    ocsp = attest::make_http_ocsp_transport(*http);
    revocation.transport = ocsp.get();
    revocation.options.url = rq.ocsp_url;
    revocation.options.allow_certificate_hold = out.policy.allow_certificate_hold;
  } else if (!rq.ocsp_url.empty()) {
    return usage("--ocsp-url without --ocsp", "add --ocsp to check revocation");
  }
  for (const auto& s : stores) out.rim_sources.push_back(s->describe());
  FirstRimStore store(std::move(stores));
  rims.store = out.rim_sources.empty() ? nullptr : &store;

  for (const auto& item : items) {
    GPUENV_TRY(report, attest::parse_report(item.report, item.where));
    GPUENV_TRY(appraisal, attest::appraise_device(report, item.chain, item.nonce, item.kind, rims, at, revocation));
    attest::Verdict verdict = attest::judge(appraisal, out.policy);
    out.devices.push_back({std::move(appraisal), std::move(verdict)});
  }
  return out;
}

}  // namespace gpuenv::app
