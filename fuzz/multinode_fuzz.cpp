// libFuzzer target: what `validate --multi-node` reads from outside (validate/multinode/): Slurm host lists
// (SLURM_STEP_NODELIST), the rendezvous frames a peer or a stranger sends (decoded one after another as rank 0 does,
// each hello and start read), and sysfs `rate` texts. The first byte picks the reader.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "validate/multinode/hostlist.hpp"
#include "validate/multinode/nic.hpp"
#include "validate/multinode/wire.hpp"

namespace {

namespace mn = gpuenv::validate::multinode;

void frames(std::string_view bytes) {
  while (!bytes.empty()) {
    auto decoded = mn::decode_message(bytes, "fuzz");
    if (!decoded || !*decoded) return;
    const mn::Message& m = (*decoded)->message;
    if (m.type == mn::MessageType::hello) (void)mn::parse_hello(m.body, "fuzz");
    if (const auto id = m.body.find("id"); id != m.body.end()) (void)mn::id_from_hex(*id, "fuzz");
    bytes.remove_prefix((*decoded)->used);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0: (void)mn::expand_hostlist(rest); break;
    case 1: frames(rest); break;
    default: (void)mn::parse_nic_rate(rest); break;
  }
  return 0;
}
