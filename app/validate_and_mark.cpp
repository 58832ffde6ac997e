#include "app/validate_and_mark.hpp"

namespace gpuenv::app {

Result<ValidatedAndMarked> validate_and_mark(const ValidateAndMarkRequest& rq, Services& services) {
  if (rq.mark && rq.validate.image.empty())
    return make_error(ErrorKind::usage, "mark.no_image", "--mark marks the image validated, and no --image was given", "--mark",
                      "validate the image: gpuenv validate --image DIR --mark --key gpuenv.key");
  GPUENV_TRY(done, validate(rq.validate, services));
  ValidatedAndMarked out;
  out.hung = done.hung;
  out.report = std::move(done.report);
  out.report_bytes = validate::report_bytes(out.report);
  out.exit_code = validate::exit_code(out.report);
  out.record_error = std::move(done.record_error);
  // A recording that could not be written turns a passing exit code into its error's; it never stops a mark.
  if (out.record_error && out.exit_code == k_exit_ok && !rq.mark) out.exit_code = exit_code(out.record_error->kind);
  if (!rq.mark) return out;
  if (out.exit_code != k_exit_ok) {
    out.mark_error = make_error(ErrorKind::usage, "mark.not_passed", "not marked: the validation did not pass", rq.validate.image,
                                "only a passing validation marks an image good; fix what failed and validate again");
    return out;
  }
  MarkRequest m;
  m.image = rq.mark_image.empty() ? rq.validate.image : rq.mark_image;
  m.report_bytes = out.report_bytes;
  m.key_path = rq.key_path;
  m.valid_for = rq.valid_for;
  m.plain_http = rq.validate.plain_http;
  m.referrers = rq.referrers;
  auto marked = mark(m, services);
  if (!marked) {
    out.mark_error = marked.error();
    out.exit_code = exit_code(marked.error().kind);
  } else {
    out.mark = std::move(*marked);
    if (out.record_error) out.exit_code = exit_code(out.record_error->kind);
  }
  return out;
}

}  // namespace gpuenv::app
