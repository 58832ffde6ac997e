#include "app/attest.hpp"

#include "validate/runner.hpp"

#include "base/time.hpp"
#include "base/cache/caching_fetcher.hpp"
#include "base/digest.hpp"
#include "base/file_io.hpp"
#include "base/net/http_client.hpp"
#include "base/yaml_guard.hpp"
#include "marks/statement.hpp"

#include <openssl/rand.h>

#include <algorithm>
#include <cctype>
#include <ctime>

namespace gpuenv::app {
namespace {

constexpr std::size_t k_max_evidence_bytes = 16u << 20;
constexpr std::size_t k_max_rim_file_bytes = 4u << 20;

Error usage(const std::string& what, const std::string& hint) { return make_error(ErrorKind::usage, "attest.usage", what, "", hint); }

Result<std::string> unhex_nonce(const std::string& hex) {
  auto bytes = from_hex(hex.rfind("0x", 0) == 0 ? std::string_view(hex).substr(2) : std::string_view(hex));
  if (!bytes || bytes->size() != 32)
    return usage("--nonce must be 64 hex digits (32 bytes), found '" + hex + "'", "give the nonce the evidence was requested with");
  return std::move(*bytes);
}

Result<std::int64_t> judgement_time(const std::string& at, const Services& services) {
  if (at.empty()) return now_seconds(services);
  std::string text = at;
  if (text.size() == 10) text += "T00:00:00Z";  // a date
  if (auto t = parse_rfc3339_utc(text)) return *t;
  return usage("--at must be a UTC time (2024-01-01T00:00:00Z) or a date (2024-01-01), found '" + at + "'",
               "--at judges certificate validity at another time, e.g. when archived evidence was made");
}

bool strings_equal_nocase(const std::string& a, const std::string& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](unsigned char x, unsigned char y) { return std::tolower(x) == std::tolower(y); });
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

Result<std::vector<Item>> read_items(const AttestVerifyRequest& rq, const std::optional<std::string>& caller_nonce, AttestResult& out) {
  std::vector<Item> items;
  if (!rq.evidence_path.empty()) {
    GPUENV_TRY(text, read_file_limited(rq.evidence_path, k_max_evidence_bytes));
    GPUENV_TRY(evidence, attest::parse_evidence_json(text, rq.evidence_path));
    out.nonce_source = caller_nonce ? "caller" : "evidence file";
    for (std::size_t i = 0; i < evidence.items.size(); ++i) {
      auto& e = evidence.items[i];
      items.push_back({std::move(e.report), std::move(e.cert_chain), rq.evidence_path + ": evidence_list[" + std::to_string(i) + "]",
                       caller_nonce ? caller_nonce : std::optional<std::string>(e.nonce), attest::device_kind_of_arch(evidence.arch)});
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

bool AttestResult::pass() const {
  return !devices.empty() && std::all_of(devices.begin(), devices.end(), [](const AttestedDevice& d) { return d.verdict.pass; });
}

std::unique_ptr<attest::RimStore> make_service_rim_store(Fetcher& fetcher, std::string base_url) {
  return std::make_unique<ServiceRimStore>(fetcher, std::move(base_url));
}

namespace {

class Setup final : public AttestSetup {
 public:
  [[nodiscard]] const attest::Policy& policy() const override { return policy_; }
  [[nodiscard]] const attest::RevocationInputs& revocation() const override { return revocation_; }
  attest::RimStore* store() override { return store_.get(); }
  [[nodiscard]] std::vector<std::string> rim_sources() const override { return sources_; }

  attest::Policy policy_ = attest::default_policy();
  attest::RevocationInputs revocation_;
  std::unique_ptr<HttpClient> http_;
  std::unique_ptr<attest::OcspTransport> ocsp_;
  std::unique_ptr<Fetcher> network_, fetcher_;
  std::unique_ptr<BlobStore> blobs_;
  std::unique_ptr<attest::RimStore> store_;
  std::vector<std::string> sources_;
};

}  // namespace

Result<std::unique_ptr<AttestSetup>> AttestSetup::open(const AttestOptions& o, Services& services) {
  auto setup = std::make_unique<Setup>();
  if (!o.policy_path.empty()) {
    GPUENV_TRY(text, read_yaml_file(o.policy_path, 64 * 1024));
    GPUENV_TRY(policy, attest::parse_policy(text, o.policy_path));
    setup->policy_ = std::move(policy);
  }
  if (o.ocsp) {
    if (o.offline) return usage("--ocsp asks the network and --offline forbids it", "drop one of them");
    if (!services.make_http_client) return make_error(ErrorKind::internal, "cli.no_adapters", "no HTTP client configured", {}, "");
    HttpOptions options;
    options.limits = services.net;
    setup->http_ = services.make_http_client(options);
    setup->ocsp_ = attest::make_http_ocsp_transport(*setup->http_);
    setup->revocation_.transport = setup->ocsp_.get();
    setup->revocation_.options.url = o.ocsp_url;
    setup->revocation_.options.allow_certificate_hold = setup->policy_.allow_certificate_hold;
  } else if (!o.ocsp_url.empty()) {
    return usage("--ocsp-url without --ocsp", "add --ocsp to check revocation");
  }
  std::vector<std::unique_ptr<attest::RimStore>> stores;
  if (!o.rim_dir.empty()) stores.push_back(attest::make_directory_rim_store(o.rim_dir));
  const std::string service = !o.rim_service.empty() ? o.rim_service : env_or(services, "GPUENV_RIM_SERVICE_URL");
  if (!service.empty()) {
    GPUENV_TRY(network, open_fetcher(services, o.offline));
    setup->network_ = std::move(network);
    if (!setup->network_) return make_error(ErrorKind::internal, "cli.no_adapters", "no fetcher configured", "", "");
    const std::string cache = cache_root(services);
    GPUENV_TRY(blobs, open_blob_store(services, cache));
    setup->blobs_ = std::move(blobs);
    setup->fetcher_ = make_caching_fetcher(*setup->network_, *setup->blobs_, cache);  // RIMs answer from the cache offline
    stores.push_back(make_service_rim_store(*setup->fetcher_, service));
  }
  for (const auto& s : stores) setup->sources_.push_back(s->describe());
  if (!stores.empty()) setup->store_ = std::make_unique<FirstRimStore>(std::move(stores));
  return std::unique_ptr<AttestSetup>(std::move(setup));
}

Result<AttestResult> attest_verify(const AttestVerifyRequest& rq, Services& services) {
  const bool by_evidence = !rq.evidence_path.empty(), by_report = !rq.report_path.empty();
  if (by_evidence == by_report) return usage("give --evidence FILE, or --report FILE with --cert-chain FILE and --nonce HEX", "see gpuenv attest verify --help");
  if (by_report && (rq.chain_path.empty() || rq.nonce_hex.empty()))
    return usage("--report needs --cert-chain and --nonce", "the chain is what nvmlDeviceGetConfComputeGpuCertificate returned; the nonce is the one you sent");
  AttestResult out;
  std::optional<std::string> caller_nonce;
  if (!rq.nonce_hex.empty()) {
    GPUENV_TRY(n, unhex_nonce(rq.nonce_hex));
    caller_nonce = std::move(n);
  }
  GPUENV_TRY(at, judgement_time(rq.at, services));
  out.at = at;
  GPUENV_TRY(setup, AttestSetup::open(rq.options, services));
  out.policy = setup->policy();
  out.rim_sources = setup->rim_sources();
  attest::RimInputs rims;
  rims.store = setup->store();
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
  for (const auto& item : items) {
    GPUENV_TRY(report, attest::parse_report(item.report, item.where));
    auto appraised = attest::appraise_device(report, item.chain, item.nonce, item.kind, rims, at, setup->revocation());
    if (!appraised) {
      Error e = std::move(appraised).error();
      if (e.where.empty()) e.where = item.where;
      return e;
    }
    attest::DeviceAppraisal appraisal = std::move(*appraised);
    attest::Verdict verdict = attest::judge(appraisal, out.policy);
    out.devices.push_back({std::move(appraisal), std::move(verdict)});
  }
  return out;
}

Result<AttestedDevice> judge_live_evidence(const validate::CcEvidence& evidence, const std::string& nonce, const validate::DriverState& driver,
                                           AttestSetup& setup, std::int64_t now) {
  GPUENV_TRY(report, attest::parse_report(evidence.report, "the attestation report NVML returned"));
  attest::RimInputs rims;
  rims.store = setup.store();
  GPUENV_TRY(appraisal, attest::appraise_device(report, evidence.cert_chain, nonce, attest::DeviceKind::unknown, rims, now, setup.revocation()));
  auto versions = [](const std::string& name, const std::string& reported, const std::string& nvml, const char* what) {
    attest::Claim c{name, attest::ClaimStatus::not_checked, ""};
    if (nvml.empty() || reported.empty()) {
      c.detail = std::string("NVML or the report does not tell the ") + what;
    } else if (strings_equal_nocase(reported, nvml)) {
      c.status = attest::ClaimStatus::pass;
      c.detail = std::string("the report's ") + what + " " + reported + " is NVML's";
    } else {
      c.status = attest::ClaimStatus::fail;
      c.detail = std::string("the report says ") + what + " " + reported + " but NVML says " + nvml + " (evidence of another GPU or boot?)";
    }
    return c;
  };
  appraisal.claims.push_back(versions("driver_nvml", appraisal.driver_version, driver.version, "driver"));
  if (appraisal.kind != attest::DeviceKind::nvswitch)
    appraisal.claims.push_back(versions("vbios_nvml", appraisal.vbios_version, evidence.vbios_version, "VBIOS"));
  attest::Claim env{"cc_environment", attest::ClaimStatus::not_checked, "the driver does not report the CC environment"};
  if (driver.cc_environment != "unknown") {
    env.status = driver.cc_environment == "production" ? attest::ClaimStatus::pass : attest::ClaimStatus::fail;
    env.detail = "the CC environment is " + driver.cc_environment;
  }
  appraisal.claims.push_back(std::move(env));
  attest::Claim dev{"dev_tools", attest::ClaimStatus::not_checked, "the driver does not report the CC mode"};
  if (driver.cc_state != "unknown") {
    dev.status = driver.cc_state == "devtools" ? attest::ClaimStatus::fail : attest::ClaimStatus::pass;
    dev.detail = driver.cc_state == "devtools" ? "dev-tools mode is on: GPU memory is readable for debugging, no confidentiality"
                                                : "dev-tools mode is off (CC " + driver.cc_state + ")";
  }
  appraisal.claims.push_back(std::move(dev));
  attest::Verdict verdict = attest::judge(appraisal, setup.policy());
  return AttestedDevice{std::move(appraisal), std::move(verdict)};
}

validate::AttestFunction attest_function(AttestSetup& setup, const Services& services) {
  return [&setup, &services](const validate::CcEvidence& evidence, const std::string& nonce, const validate::DriverState& driver) -> Result<validate::AttestationVerdict> {
    const std::int64_t now = now_seconds(services);  // the injected clock
    GPUENV_TRY(device, judge_live_evidence(evidence, nonce, driver, setup, now));
    validate::AttestationVerdict v;
    v.pass = device.verdict.pass;
    v.reasons = device.verdict.reasons;
    for (const auto& c : device.appraisal.claims) v.claims.push_back({c.name, std::string(attest::to_string(c.status)), c.detail});
    return v;
  };
}

Result<AttestResult> attest_gpus(const AttestRequest& rq, Services& services) {
  GPUENV_TRY(setup, AttestSetup::open(rq.options, services));
  GPUENV_TRY(backend, open_gpu_backend(rq.backend, services, std::nullopt));
  std::vector<int> wanted;
  if (!rq.gpus.empty()) {
    GPUENV_TRY(list, validate::parse_gpu_list(rq.gpus));
    wanted = std::move(list);
  }
  GPUENV_TRY(driver, backend->driver());
  if (!driver.loaded) return make_error(ErrorKind::environment, "attest.no_driver", "no NVIDIA driver is loaded", "", "attest on the machine whose GPUs run the work");
  if (driver.cc_state == "off")
    return make_error(ErrorKind::environment, "attest.no_cc", "confidential computing is off: the GPUs give no attestation evidence", backend->name(),
                      "turn CC on (nvidia_gpu_tools.py --set-cc-mode on, with the node out of service), or use gpuenv attest verify on saved evidence");
  GPUENV_TRY(gpus, backend->gpus());
  AttestResult out;
  out.policy = setup->policy();
  out.rim_sources = setup->rim_sources();
  out.backend = backend->name();
  out.at = now_seconds(services);
  const bool replay = backend->name() == "replay";
  out.nonce_source = replay ? "recorded" : "fresh";
  std::string nonce(32, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(nonce.data()), 32) != 1)
    return make_error(ErrorKind::environment, "attest.random", "OpenSSL could not make a random nonce", "", "");
  for (const auto& gpu : gpus) {
    if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), gpu.index) == wanted.end()) continue;
    GPUENV_TRY(evidence, backend->cc_evidence(gpu.index, nonce));
    if (!evidence)
      return make_error(ErrorKind::environment, "attest.no_cc", "GPU " + std::to_string(gpu.index) + " (" + gpu.name + ") gives no attestation evidence",
                        backend->name(), "this GPU or driver has no confidential-computing attestation (Hopper or later, CC on, driver R535 or later)");
    // A replay serves recorded evidence, which answers its recorded nonce.
    GPUENV_TRY(device, judge_live_evidence(*evidence, replay ? evidence->nonce : nonce, driver, *setup, out.at));
    out.devices.push_back(std::move(device));
  }
  if (out.devices.empty()) return make_error(ErrorKind::usage, "attest.no_gpu", "no GPU to attest", rq.gpus, "list the GPUs with gpuenv detect");
  if (rq.set_ready && out.pass()) {
    GPUENV_CHECK(backend->set_cc_gpus_ready());
    out.ready_set = true;
  }
  return out;
}

}  // namespace gpuenv::app
