#include "attest/ocsp.hpp"

#include "attest/x509.hpp"
#include "base/net/http_client.hpp"

#include <openssl/ocsp.h>
#include <openssl/x509v3.h>

namespace gpuenv::attest {
namespace {

using x509::Free;
using x509::StackFree;
using x509::StorePtr;
using RequestPtr = std::unique_ptr<OCSP_REQUEST, Free<OCSP_REQUEST, OCSP_REQUEST_free>>;
using ResponsePtr = std::unique_ptr<OCSP_RESPONSE, Free<OCSP_RESPONSE, OCSP_RESPONSE_free>>;
using BasicPtr = std::unique_ptr<OCSP_BASICRESP, Free<OCSP_BASICRESP, OCSP_BASICRESP_free>>;
using CertIdPtr = std::unique_ptr<OCSP_CERTID, Free<OCSP_CERTID, OCSP_CERTID_free>>;
struct StringStackFree {
  void operator()(STACK_OF(OPENSSL_STRING) * s) const { X509_email_free(s); }
};

class HttpOcspTransport final : public OcspTransport {
 public:
  explicit HttpOcspTransport(HttpClient& http) : http_(http) {}
  Result<std::string> post(const std::string& url, const std::string& der) override {
    HttpRequest rq;
    rq.method = "POST";
    rq.url = url;
    rq.headers = {{"Content-Type", "application/ocsp-request"}, {"Accept", "application/ocsp-response"}};
    rq.body = der;
    rq.max_body = 1u << 20;
    rq.retry = HttpRetry::never;
    GPUENV_TRY(response, http_.send(rq));
    if (response.status != 200)
      return make_error(ErrorKind::environment, "ocsp.http", "the responder answered HTTP " + std::to_string(response.status), url, "");
    return std::move(response.body);
  }

 private:
  HttpClient& http_;
};

/// One certificate's status: "" when good, else why not (REVOKED tells which kind).
std::string status_of(X509* cert, X509* issuer, const std::vector<x509::X509Ptr>& chain, OcspTransport& transport, const OcspOptions& options,
                      std::int64_t now, bool& revoked) {
  revoked = false;
  const std::string who = x509::subject_of(cert);
  std::string url = options.url;
  if (url.empty()) {
    std::unique_ptr<STACK_OF(OPENSSL_STRING), StringStackFree> urls(X509_get1_ocsp(cert));
    if (urls && sk_OPENSSL_STRING_num(urls.get()) > 0) url = sk_OPENSSL_STRING_value(urls.get(), 0);
  }
  if (url.empty()) return "no OCSP responder for " + who + " (give --ocsp-url)";
  CertIdPtr id(OCSP_cert_to_id(EVP_sha1(), cert, issuer));
  RequestPtr request(OCSP_REQUEST_new());
  if (!id || !request || !OCSP_request_add0_id(request.get(), OCSP_CERTID_dup(id.get()))) return "OpenSSL could not make a request";
  if (options.nonce && OCSP_request_add1_nonce(request.get(), nullptr, -1) != 1) return "OpenSSL could not add a nonce";
  unsigned char* der = nullptr;
  const int der_len = i2d_OCSP_REQUEST(request.get(), &der);
  if (der_len <= 0) return "OpenSSL could not encode a request";
  const std::string body(reinterpret_cast<char*>(der), static_cast<std::size_t>(der_len));
  OPENSSL_free(der);
  auto answer = transport.post(url, body);
  if (!answer) return "no answer from " + url + ": " + answer.error().message;
  const auto* p = reinterpret_cast<const unsigned char*>(answer->data());
  ResponsePtr response(d2i_OCSP_RESPONSE(nullptr, &p, static_cast<long>(answer->size())));
  if (!response) return url + " answered something that is not an OCSP response";
  const int rs = OCSP_response_status(response.get());
  if (rs != OCSP_RESPONSE_STATUS_SUCCESSFUL) return url + " answered " + OCSP_response_status_str(rs) + " for " + who;
  BasicPtr basic(OCSP_response_get1_basic(response.get()));
  if (!basic) return url + " answered no basic response";
  if (options.nonce && OCSP_check_nonce(request.get(), basic.get()) != 1) return url + " did not echo the request's nonce (a replayed answer?)";
  // The answer must be signed by the issuer, or by a responder certificate (in the answer) the issuer delegated to,
  // chaining to the root of the chain being checked (itself pinned by the chain claim).
  StorePtr store(X509_STORE_new());
  std::unique_ptr<STACK_OF(X509), StackFree> untrusted(sk_X509_new_null());
  for (std::size_t i = 0; i + 1 < chain.size(); ++i) sk_X509_push(untrusted.get(), chain[i].get());
  if (!store || !untrusted || X509_STORE_add_cert(store.get(), chain.back().get()) != 1) return "OpenSSL could not set up the answer's check";
  if (OCSP_basic_verify(basic.get(), untrusted.get(), store.get(), 0) != 1) return "the answer from " + url + " is not signed by " + who + "'s issuer or its responder";
  int status = -1, reason = -1;
  ASN1_GENERALIZEDTIME *revoked_at = nullptr, *this_update = nullptr, *next_update = nullptr;
  if (OCSP_resp_find_status(basic.get(), id.get(), &status, &reason, &revoked_at, &this_update, &next_update) != 1)
    return "the answer from " + url + " says nothing of " + who;
  // Valid at NOW, with 5 minutes of clock skew; an answer without nextUpdate counts for an hour (as NVIDIA's SDK).
  const auto t = static_cast<time_t>(now);
  if (ASN1_TIME_cmp_time_t(this_update, t + 300) > 0) return "the answer for " + who + " is from the future (thisUpdate)";
  if (next_update ? ASN1_TIME_cmp_time_t(next_update, t - 300) < 0 : ASN1_TIME_cmp_time_t(this_update, t - 3600) < 0)
    return "the answer for " + who + " is out of date (nextUpdate has passed)";
  if (status == V_OCSP_CERTSTATUS_GOOD) return "";
  if (status == V_OCSP_CERTSTATUS_REVOKED) {
    if (reason == OCSP_REVOKED_STATUS_CERTIFICATEHOLD && options.allow_certificate_hold) return "";
    revoked = true;
    return who + " is revoked (" + OCSP_crl_reason_str(reason) + ")";
  }
  return url + " does not know " + who + " (status unknown)";
}

}  // namespace

std::unique_ptr<OcspTransport> make_http_ocsp_transport(HttpClient& http) { return std::make_unique<HttpOcspTransport>(http); }

Claim check_revocation(std::string claim_name, const std::vector<std::string>& chain_der, std::size_t first, OcspTransport& transport,
                       const OcspOptions& options, std::int64_t now) {
  Claim c{std::move(claim_name), ClaimStatus::not_checked, ""};
  std::vector<x509::X509Ptr> chain;
  for (const auto& der : chain_der) {
    auto x = x509::read_der(der);
    if (!x) {
      c.detail = "could not check revocation: a certificate of the chain is unreadable";
      return c;
    }
    chain.push_back(std::move(x));
  }
  if (chain.size() < 2 || first + 1 >= chain.size()) {
    c.detail = "could not check revocation: the chain is too short";
    return c;
  }
  std::size_t checked = 0;
  std::string unchecked;  // the first certificate that could not be checked; a later revoked one still fails
  for (std::size_t i = first; i + 1 < chain.size(); ++i) {
    bool revoked = false;
    const std::string why = status_of(chain[i].get(), chain[i + 1].get(), chain, transport, options, now, revoked);
    if (revoked) {
      c.status = ClaimStatus::fail;
      c.detail = why;
      return c;
    }
    if (!why.empty() && unchecked.empty()) unchecked = why;
    checked += why.empty() ? 1 : 0;
  }
  if (!unchecked.empty()) {
    c.detail = "could not check revocation: " + unchecked;
    return c;
  }
  c.status = ClaimStatus::pass;
  c.detail = std::to_string(checked) + " certificate" + (checked == 1 ? "" : "s") + " good by OCSP";
  return c;
}

}  // namespace gpuenv::attest
