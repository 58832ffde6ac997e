#include "attest/appraise.hpp"

#include "attest/x509.hpp"
#include "base/safe_text.hpp"
#include "base/yaml_guard.hpp"
#include "base/yaml_reader.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>

namespace gpuenv::attest {
namespace {

bool same_version(std::string a, std::string b) {
  auto lower = [](std::string& s) { std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); }); };
  lower(a);
  lower(b);
  return a == b;
}

/// One RIM's claims appended to OUT; the RIM itself when it can be trusted for the comparison.
Claim revocation_claim(const std::string& name, const std::vector<std::string>& chain, std::size_t first, const RevocationInputs& revocation, std::int64_t now) {
  if (!revocation.transport) return {name, ClaimStatus::not_checked, "revocation (OCSP) was not checked: it needs the network (--ocsp)"};
  return check_revocation(name, chain, first, *revocation.transport, revocation.options, now);
}

Result<std::optional<Rim>> appraise_rim(const std::string& prefix, const std::string& id, const std::string& reported_version,
                                        const std::optional<std::string>& given, const std::string& given_where, RimStore* store, std::int64_t now,
                                        const RevocationInputs& revocation, std::vector<Claim>& out) {
  const std::string label = prefix == "driver_rim" ? "driver" : "VBIOS";
  std::string xml, where;
  if (given) {
    xml = *given;
    where = given_where;
  } else if (id.empty()) {
    out.push_back({prefix + ".signature", ClaimStatus::not_checked, "the report lacks the fields a " + label + " RIM id is made of"});
    return std::optional<Rim>();
  } else if (!store) {
    out.push_back({prefix + ".signature", ClaimStatus::not_checked, "no " + label + " RIM (" + id + "): give --rim-dir, --" + (label == "driver" ? "driver" : "vbios") + "-rim or --rim-service"});
    return std::optional<Rim>();
  } else {
    auto got = store->get(id);
    if (!got) {
      // Not there, or not reachable (no network, offline and not cached): not checked. Anything else the store
      // answered is a broken RIM: failed.
      const std::string& e = got.error().id;
      const bool missing = e == "attest.rim_not_found" || e.rfind("fetch.", 0) == 0 || e == "cache.offline_miss";
      out.push_back({prefix + ".signature", missing ? ClaimStatus::not_checked : ClaimStatus::fail,
                     (missing ? "no " + label + " RIM " + id + " in " : "the " + label + " RIM " + id + " could not be read from ") + store->describe() + ": " +
                         got.error().message});
      return std::optional<Rim>();
    }
    xml = std::move(*got);
    where = store->describe() + ": " + id;
  }
  auto checked = check_rim(xml, where, prefix, now);
  if (!checked) {
    if (given) return std::move(checked).error();  // a file the user named that is no RIM: bad input
    out.push_back({prefix + ".signature", ClaimStatus::fail, "the " + label + " RIM " + id + " is malformed: " + checked.error().message});
    return std::optional<Rim>();
  }
  bool trusted = true;
  for (auto& c : checked->claims) {
    if (c.name != prefix + ".cert_validity" && c.status != ClaimStatus::pass) trusted = false;
    out.push_back(std::move(c));
  }
  Claim version{prefix + ".version", ClaimStatus::fail, ""};
  if (same_version(checked->rim.version, reported_version)) {
    version.status = ClaimStatus::pass;
    version.detail = "the RIM is for " + checked->rim.product + " " + checked->rim.version + ", what the report says";
  } else {
    version.detail = "the RIM is for " + label + " " + checked->rim.version + " but the report says " + reported_version;
    trusted = false;
  }
  out.push_back(std::move(version));
  out.push_back(revocation_claim(prefix + ".revocation", checked->rim.chain_der, 0, revocation, now));  // the signer too
  if (!trusted) return std::optional<Rim>();
  return std::optional<Rim>(std::move(checked->rim));
}

}  // namespace

const Claim* DeviceAppraisal::find(std::string_view name) const {
  for (const auto& c : claims)
    if (c.name == name) return &c;
  return nullptr;
}

Result<DeviceAppraisal> appraise_device(const Report& report, std::string_view chain, const std::optional<std::string>& nonce, DeviceKind kind,
                                        RimInputs& rims, std::int64_t now, const RevocationInputs& revocation) {
  GPUENV_TRY(device, verify_device(report, chain, nonce, now));
  DeviceAppraisal out;
  out.leaf_subject = device.leaf_subject;
  // What is checked (a driver RIM or none, which RIM ids) follows from the kind, so the kind comes from the signed
  // leaf certificate only. An unsigned "arch" beside the evidence is a cross-check: one that names another kind is
  // refused, never believed (an H100 report called "LS10" would otherwise pass without its driver RIM).
  out.kind = device_kind_of(device.leaf_subject);
  if (kind != DeviceKind::unknown && kind != out.kind)
    return make_error(ErrorKind::spec, "attest.arch_mismatch",
                      "the evidence calls this device " + std::string(to_string(kind)) + " but its signed leaf certificate (" + safe_text(device.leaf_subject, 200) +
                          ") is of " + (out.kind == DeviceKind::unknown ? std::string("no kind this gpuenv knows") : "a " + std::string(to_string(out.kind))),
                      "", "the evidence file was edited or assembled from two devices: collect it again; the device kind is taken from the certificate, never from \"arch\"");
  out.driver_version = report.driver_version();
  out.vbios_version = report.vbios_version();
  out.driver_rim_id = driver_rim_id(report, out.kind);
  out.vbios_rim_id = vbios_rim_id(report, out.kind);
  out.nonce_hex = to_hex(report.request.nonce);
  out.claims = std::move(device.claims);

  std::optional<Rim> driver, vbios;
  const bool has_driver_rim = out.kind != DeviceKind::nvswitch;  // an NVSwitch has firmware only
  if (has_driver_rim) {
    GPUENV_TRY(d, appraise_rim("driver_rim", out.driver_rim_id, out.driver_version, rims.driver_xml, rims.driver_where, rims.store, now, revocation, out.claims));
    driver = std::move(d);
  }
  GPUENV_TRY(v, appraise_rim("vbios_rim", out.vbios_rim_id, out.vbios_version, rims.vbios_xml, rims.vbios_where, rims.store, now, revocation, out.claims));
  vbios = std::move(v);

  MeasurementResult m = compare_measurements(report, driver ? &*driver : nullptr, vbios ? &*vbios : nullptr);
  if (!has_driver_rim && vbios && m.claim.status == ClaimStatus::not_checked && !m.indices.empty()) {
    m.claim.status = ClaimStatus::pass;  // the BIOS RIM is the whole of an NVSwitch's firmware
    m.claim.detail = m.claim.detail.substr(0, m.claim.detail.find(';')) + " (the BIOS RIM is all of an NVSwitch's firmware)";
  }
  if (!driver && !vbios) m.claim.detail = "no trusted RIM: the golden measurements were not compared";
  out.claims.push_back(std::move(m.claim));
  out.measurements = std::move(m.indices);
  std::vector<std::string> chain_der;
  for (const auto& c : x509::read_pem_chain(chain)) chain_der.push_back(x509::der_of(c.get()));
  out.claims.push_back(revocation_claim("revocation", chain_der, 1, revocation, now));  // NVIDIA's responder does not answer for the leaf
  return out;
}

std::string_view to_string(Requirement r) {
  switch (r) {
    case Requirement::required: return "required";
    case Requirement::if_checked: return "if_checked";
    case Requirement::ignored: return "ignored";
  }
  return "required";
}

namespace {

const std::vector<std::string>& claim_names() {
  static const std::vector<std::string> names = {
      "signature", "chain", "fwid", "nonce", "cert_validity", "measurements", "revocation", "cc_environment", "dev_tools",
      "driver_rim", "driver_rim.signature", "driver_rim.chain", "driver_rim.cert_validity", "driver_rim.version", "driver_rim.revocation",
      "vbios_rim", "vbios_rim.signature", "vbios_rim.chain", "vbios_rim.cert_validity", "vbios_rim.version", "vbios_rim.revocation"};
  return names;
}

}  // namespace

Requirement Policy::requirement(std::string_view name) const {
  if (auto it = claims.find(std::string(name)); it != claims.end()) return it->second;
  if (const auto dot = name.find('.'); dot != std::string_view::npos)
    if (auto it = claims.find(std::string(name.substr(0, dot))); it != claims.end()) return it->second;
  return Requirement::required;
}

Policy default_policy() {
  Policy p;
  for (const auto& name : claim_names()) p.claims[name] = Requirement::required;
  p.claims["fwid"] = Requirement::if_checked;            // reports of drivers before 2024 carry no FWID; the signature binds them to the leaf
  p.claims["revocation"] = Requirement::if_checked;      // offline by default; `--ocsp` checks it
  p.claims["driver_rim.revocation"] = Requirement::if_checked;
  p.claims["vbios_rim.revocation"] = Requirement::if_checked;
  p.claims["cc_environment"] = Requirement::if_checked;  // read from NVML on a live system only
  p.claims["dev_tools"] = Requirement::if_checked;
  return p;
}

Result<Policy> parse_policy(std::string_view yaml, const std::string& path) {
  GPUENV_CHECK(check_yaml_bytes(yaml, path, 64 * 1024, 16));
  const std::string hint = "see docs/attestation.md, 'Policy'";
  try {
    GPUENV_TRY(root, load_yaml(yaml, path, ErrorKind::spec, "policy.yaml_syntax", hint));
    YamlReader r(YamlDoc{path, ErrorKind::spec, "policy", hint});
    GPUENV_TRY(top, r.map(root, "policy", {"version", "claims", "allow_mismatch", "allow_certificate_hold"}));
    Policy p = default_policy();
    p.source = path;
    GPUENV_TRY(version_node, r.field(root, "version"));
    GPUENV_TRY(version, r.integer(version_node, "version"));
    if (version != 1) return r.error(version_node, "unsupported_version", "policy version " + std::to_string(version) + " is not known; this gpuenv reads version 1");
    GPUENV_TRY(claims, r.optional_field(root, "claims"));
    if (claims.IsDefined()) {
      GPUENV_TRY(entries, r.map(claims, "claims", claim_names()));
      for (const auto& [key, value] : entries) {
        GPUENV_TRY(word, r.scalar(value, "claims." + key.Scalar()));
        Requirement req{};
        if (word == "required") req = Requirement::required;
        else if (word == "if_checked") req = Requirement::if_checked;
        else if (word == "ignored") req = Requirement::ignored;
        else return r.error(value, "bad_value", "claims." + key.Scalar() + " is '" + word + "'; it must be required, if_checked or ignored");
        p.claims[key.Scalar()] = req;
        // A prefix's rule also sets its claims, so that `driver_rim: ignored` is not undone by the defaults below it.
        if (key.Scalar().find('.') == std::string::npos)
          for (auto& [name, r2] : p.claims)
            if (name.rfind(key.Scalar() + ".", 0) == 0) r2 = req;
      }
    }
    GPUENV_TRY(allow, r.optional_field(root, "allow_mismatch"));
    if (allow.IsDefined()) {
      GPUENV_TRY(list, r.list(allow, "allow_mismatch"));
      for (const auto& item : list) {
        GPUENV_TRY(index, r.integer(item, "allow_mismatch item"));
        if (index < 0 || index > 254) return r.error(item, "bad_value", "a measurement index is 0 to 254, found " + std::to_string(index));
        p.allow_mismatch.insert(static_cast<unsigned>(index));
      }
    }
    GPUENV_TRY(hold, r.optional_field(root, "allow_certificate_hold"));
    if (hold.IsDefined()) {
      GPUENV_TRY(allow_hold, r.boolean(hold, "allow_certificate_hold"));
      p.allow_certificate_hold = allow_hold;
    }
    (void)top;
    return p;
  } catch (const std::exception& e) {
    return make_error(ErrorKind::internal, "policy.unexpected", std::string("while reading the policy: ") + e.what(), path, "report this as a bug with the file attached");
  }
}

Verdict judge(const DeviceAppraisal& device, const Policy& policy) {
  Verdict v;
  for (const auto& c : device.claims) {
    const Requirement req = policy.requirement(c.name);
    if (req == Requirement::ignored || c.status == ClaimStatus::pass) continue;
    if (c.status == ClaimStatus::not_checked) {
      if (req == Requirement::required) v.reasons.push_back(c.name + ": not checked: " + c.detail);
      continue;
    }
    if (c.name == "measurements") {
      std::vector<unsigned> failing;
      for (const auto& m : device.measurements)
        if (m.status == ClaimStatus::fail) failing.push_back(m.index);
      const bool tolerated = !failing.empty() && std::all_of(failing.begin(), failing.end(), [&](unsigned i) { return policy.allow_mismatch.count(i) > 0; });
      if (tolerated) continue;
    }
    v.reasons.push_back(c.name + ": " + c.detail);
  }
  v.pass = v.reasons.empty();
  return v;
}

nlohmann::json to_json(const DeviceAppraisal& d, const Verdict& verdict, const Policy& policy) {
  nlohmann::json claims = nlohmann::json::array();
  for (const auto& c : d.claims)
    claims.push_back({{"name", c.name}, {"status", to_string(c.status)}, {"requirement", to_string(policy.requirement(c.name))}, {"detail", c.detail}});
  nlohmann::json measurements = nlohmann::json::array();
  for (const auto& m : d.measurements)
    measurements.push_back({{"index", m.index}, {"source", m.source}, {"status", to_string(m.status)}, {"detail", m.detail}});
  return {{"kind", to_string(d.kind)},
          {"device", d.leaf_subject},
          {"driver", d.driver_version},
          {"vbios", d.vbios_version},
          {"driver_rim_id", d.driver_rim_id},
          {"vbios_rim_id", d.vbios_rim_id},
          {"nonce", d.nonce_hex},
          {"verdict", verdict.pass ? "pass" : "fail"},
          {"reasons", verdict.reasons},
          {"claims", std::move(claims)},
          {"measurements", std::move(measurements)}};
}

}  // namespace gpuenv::attest
