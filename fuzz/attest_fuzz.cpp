// libFuzzer target: the readers of GPU attestation evidence on untrusted bytes (the first byte picks the reader):
// the report (raw), a report file (raw or hex text), the evidence JSON, a DICE TcbInfo extension and a DER
// certificate (its FWID), a RIM (XML parsed, signature and chain checked, content compared with a made-up report),
// a RIM service answer and a policy file; the evidence JSON also through the whole appraisal of each device.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "attest/evidence.hpp"
#include "attest/appraise.hpp"
#include "attest/rim.hpp"
#include "attest/verify.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  using namespace gpuenv::attest;
  auto use = [](const Report& r) {
    (void)r.driver_version();
    (void)r.vbios_version();
    (void)r.fwid();
    (void)r.nvdec0_status();
    (void)r.opaque_version();
    (void)r.text_field(k_chip_info);
  };
  switch (data[0] % 8) {
    case 0:
      if (auto r = parse_report(bytes, "fuzz")) use(*r);
      break;
    case 1:
      if (auto b = report_bytes(bytes, "fuzz"))
        if (auto r = parse_report(*b, "fuzz")) use(*r);
      break;
    case 2:  // the evidence JSON through the whole appraisal, its unsigned "arch" as the cross-check it is
      if (auto e = parse_evidence_json(bytes, "fuzz"))
        for (const auto& item : e->items)
          if (auto r = parse_report(item.report, "fuzz")) {
            use(*r);
            RimInputs rims;
            if (auto a = appraise_device(*r, item.cert_chain, item.nonce, device_kind_of_arch(e->arch), rims, 1796169600)) (void)judge(*a, default_policy());
          }
      break;
    case 3: (void)dice_tcb_info_fwid(bytes); break;
    case 4: (void)leaf_fwid(bytes); break;
    case 5:
      if (auto rim = check_rim(bytes, "fuzz", "rim", 0)) {
        Report empty;
        (void)compare_measurements(empty, &rim->rim, nullptr);
      }
      break;
    case 6: (void)rim_from_service_json(bytes, "NV_GPU_DRIVER_GH100_1.0", "fuzz"); break;
    case 7:
      if (auto p = parse_policy(bytes, "fuzz")) (void)p->requirement("driver_rim.chain");
      break;
    default:
      if (auto e = parse_evidence_json(bytes, "fuzz"))
        for (const auto& item : e->items)
          if (auto r = parse_report(item.report, "fuzz")) use(*r);
      break;
  }
  return 0;
}
