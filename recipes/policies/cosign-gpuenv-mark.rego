# A policy for `cosign verify-attestation --key gpuenv.pub --insecure-ignore-tlog \
#   --type https://gpuenv.dev/attestation/validation/v1 --policy recipes/policies/cosign-gpuenv-mark.rego IMAGE@sha256:...`
# cosign hands the whole in-toto statement as input and asks for data.signature.allow (docs/mark.md).
package signature

import future.keywords.in

default allow = false

allow {
  input.predicateType == "https://gpuenv.dev/attestation/validation/v1"
  input.predicate.result == "PASSED"
  input.predicate.level in {"standard", "long"}
  input.predicate.backend == "nvml+cuda"
  time.parse_rfc3339_ns(input.predicate.notAfter) > time.now_ns()
}
