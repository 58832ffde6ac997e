#include "app/statements.hpp"

#include <nlohmann/json.hpp>

#include "app/marks.hpp"
#include "base/json_field.hpp"
#include "base/safe_text.hpp"
#include "images/assemble/provenance.hpp"
#include "marks/att_image.hpp"
#include "marks/dsse.hpp"
#include "marks/referrer.hpp"
#include "base/time.hpp"

namespace gpuenv::app {
namespace {

using nlohmann::json;

/// A record larger than this is not one gpuenv wrote (a torch image's SBOM is a few hundred KiB).
constexpr std::uint64_t k_max_statement_bytes = 16u << 20;

/// The statement of KIND about IMAGE: its predicate and the in-toto statement around it.
Result<std::string> statement_of(StatementKind kind, const AttestedImage& image, const BuildFacts& facts, std::int64_t finished) {
  std::string predicate;
  if (kind == StatementKind::sbom) {
    // The CycloneDX text as written beside the layout: render_in_toto compacts it (and refuses what is not an object).
    predicate = image.cyclonedx;
  } else {
    images::ProvenanceInputs in;
    in.lock_sha256 = sha256_hex(facts.lock_text);
    in.platform = image.platform.str();
    in.format = facts.format;
    in.compression = facts.compression;
    in.tag = facts.tag;
    in.source_date_epoch = facts.source_date_epoch;
    in.builder_version = GPUENV_VERSION;
    in.started = facts.started;
    in.finished = finished;
    const resolver::Lock lock = facts.lock->platforms.size() > 1 ? resolver::lock_for_platform(*facts.lock, image.platform) : *facts.lock;
    predicate = images::provenance_predicate(lock, in);
  }
  return marks::render_in_toto(facts.subject_name, image.manifest.digest, predicate_type_of(kind), predicate);
}

/// Why an SBOM or provenance predicate is not the document of its kind about IMAGE ("" when it is).
std::string predicate_problem(StatementKind kind, const std::string& predicate, const Digest& image) {
  const json p = json::parse(predicate, nullptr, false);
  if (kind == StatementKind::sbom) {
    if (string_field(p, "bomFormat") != "CycloneDX" || string_field(p, "specVersion").empty()) return "its predicate is not a CycloneDX document";
    const json component = field_of_type(field_of_type(p, "metadata", json::value_t::object), "component", json::value_t::object);
    const std::string version = string_field(component, "version");
    if (version != image.str()) return "the SBOM describes " + safe_text(version.empty() ? "no image" : version, 80) + ", not this image";
    return "";
  }
  const json definition = field_of_type(p, "buildDefinition", json::value_t::object);
  const json builder = field_of_type(field_of_type(p, "runDetails", json::value_t::object), "builder", json::value_t::object);
  if (string_field(definition, "buildType").empty() || string_field(builder, "id").empty())
    return "its predicate is not SLSA provenance v1 (no buildDefinition.buildType or runDetails.builder.id)";
  return "";
}

/// The kind whose predicate type is TYPE; false for another.
bool kind_of(std::string_view type, StatementKind& kind) {
  for (const auto k : {StatementKind::sbom, StatementKind::provenance})
    if (predicate_type_of(k) == type) {
      kind = k;
      return true;
    }
  return false;
}

/// One envelope judged: signed by a key, a statement of a wanted kind, about IMAGE.
void judge_statement(const std::string& bytes, const std::vector<const marks::Key*>& keys, const Digest& image, const std::string& where,
                     JudgedStatement& j) {
  auto envelope = marks::parse_envelope(bytes, where);
  if (!envelope) {
    j.reasons.push_back("its envelope cannot be read: " + envelope.error().message);
    return;
  }
  j.key = marks::verifying_key(*envelope, keys);
  if (j.key < 0) j.reasons.push_back("signed by none of the given keys (or its bytes were changed after signing)");
  if (envelope->payload_type != marks::k_in_toto_payload_type) j.reasons.push_back("its payload is a " + safe_text(envelope->payload_type, 80) + ", not an in-toto statement");
  auto statement = marks::parse_in_toto(envelope->payload, where);
  if (!statement) {
    j.reasons.push_back(statement.error().message);
    return;
  }
  j.summary = statement_summary(*statement);
  if (statement->predicate_type != predicate_type_of(j.kind))
    j.reasons.push_back("its signed predicate type is " + safe_text(statement->predicate_type, 120) + ", not " + std::string(predicate_type_of(j.kind)));
  if (!statement->names(image)) {
    std::string named;
    for (const auto& s : statement->subjects) named += (named.empty() ? "" : ", ") + s.digest.str();
    j.reasons.push_back("it names another image (" + named + "), not " + image.str());
  }
  if (const std::string problem = predicate_problem(j.kind, statement->predicate, image); !problem.empty()) j.reasons.push_back(problem);
}

/// Whether IMAGE's attestation image in STORE already holds a record of TYPE with the same signed PAYLOAD under
/// KEY (a rebuild of the same lock: the SBOM statement is the same bytes, its signature is not). Records of other
/// signers, or that cannot be read, are not this one.
Result<bool> already_signed(marks::MarkStore& store, const Digest& image, std::string_view type, const std::string& payload, const marks::Key& key) {
  GPUENV_TRY(att, store.read_att(image));
  if (!att) return false;
  for (const auto& layer : att->layers) {
    const auto t = layer.annotations.find("predicateType");
    if (t == layer.annotations.end() || t->second != type || layer.media_type != marks::k_envelope_media_type) continue;
    auto bytes = store.read_record(layer, k_max_statement_bytes);
    if (!bytes) continue;
    auto envelope = marks::parse_envelope(*bytes, store.where(image));
    if (envelope && envelope->payload == payload && marks::verifying_key(*envelope, {&key}) == 0) return true;
  }
  return false;
}

}  // namespace

std::string_view to_string(StatementKind kind) { return kind == StatementKind::sbom ? "sbom" : "provenance"; }

std::string_view predicate_type_of(StatementKind kind) {
  return kind == StatementKind::sbom ? marks::k_cyclonedx_predicate_type : marks::k_slsa_predicate_type;
}

Result<std::vector<StatementKind>> parse_statement_kinds(const std::string& text) {
  std::vector<StatementKind> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto comma = text.find(',', start);
    const std::string word = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    StatementKind kind = StatementKind::sbom;
    if (word == "sbom") kind = StatementKind::sbom;
    else if (word == "provenance") kind = StatementKind::provenance;
    else
      return make_error(ErrorKind::usage, "build.attest", "--attest '" + safe_text(text, 80) + "': '" + safe_text(word, 40) + "' is not sbom or provenance", "--attest",
                        "write --attest sbom,provenance (or one of them)");
    bool seen = false;
    for (const auto k : out) seen = seen || k == kind;
    if (!seen) out.push_back(kind);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string statement_summary(const marks::InTotoStatement& s) {
  const json p = json::parse(s.predicate, nullptr, false);
  if (s.predicate_type == marks::k_cyclonedx_predicate_type) {
    const std::size_t components = field_of_type(p, "components", json::value_t::array).size();
    return "SBOM: CycloneDX " + safe_text(string_field(p, "specVersion", "?"), 20) + ", " + std::to_string(components) + " components";
  }
  if (s.predicate_type == marks::k_slsa_predicate_type) {
    const json definition = field_of_type(p, "buildDefinition", json::value_t::object);
    const json details = field_of_type(p, "runDetails", json::value_t::object);
    const json version = field_of_type(field_of_type(details, "builder", json::value_t::object), "version", json::value_t::object);
    const std::string finished = string_field(field_of_type(details, "metadata", json::value_t::object), "finishedOn", "?");
    return "provenance: SLSA v1, built by gpuenv " + safe_text(string_field(version, "gpuenv", "?"), 40) + " at " + safe_text(finished, 40) + ", " +
           std::to_string(field_of_type(definition, "resolvedDependencies", json::value_t::array).size()) + " resolved dependencies";
  }
  return "";
}

Result<std::vector<StoredStatement>> attest_build(const std::vector<StatementKind>& kinds, const std::vector<AttestedImage>& images,
                                                  const BuildFacts& facts, const marks::Key& key, const AttestStores& stores, Services& services) {
  const std::int64_t finished = now_seconds(services);
  struct Signed {
    StatementKind kind;
    const AttestedImage* image;
    std::string statement, envelope;
  };
  std::vector<Signed> signed_statements;
  for (const auto& image : images)
    for (const auto kind : kinds) {
      GPUENV_TRY(statement, statement_of(kind, image, facts, finished));
      GPUENV_TRY(envelope, marks::sign_envelope(statement, marks::k_in_toto_payload_type, key));
      signed_statements.push_back({kind, &image, std::move(statement), std::move(envelope)});
    }
  std::vector<StoredStatement> out;
  for (const auto& place : stores.places) {
    GPUENV_TRY(store, open_mark_store(place, stores.plain_http, services));
    for (const auto& s : signed_statements) {
      const Digest& image = s.image->manifest.digest;
      // A rebuild of the same lock makes the same SBOM statement: it is stored once. Its provenance differs (the
      // build's own times) and is appended, as cosign attest appends.
      GPUENV_TRY(there, already_signed(*store, image, predicate_type_of(s.kind), s.statement, key));
      if (there) {
        out.push_back({s.kind, image, std::string(), store->where(image), true, ""});
        continue;
      }
      GPUENV_TRY(stored, store_record(*store, image, s.envelope, predicate_type_of(s.kind), services));
      out.push_back({s.kind, image, Digest::of(s.envelope).str(), store->where(image), stored.already_there, ""});
      if (stores.referrers) {
        GPUENV_TRY(bundle, marks::bundle_of(s.envelope, key));
        const std::string manifest = marks::referrer_manifest(bundle, s.image->manifest, predicate_type_of(s.kind), format_rfc3339_utc(finished));
        GPUENV_TRY(where, store->write_referrer(image, manifest, bundle));
        out.back().referrer = Digest::of(manifest).str() + " in " + where;
      }
    }
  }
  return out;
}

bool StatementVerification::ok() const {
  for (const auto kind : wanted) {
    bool counted = false;
    for (const auto& r : records) counted = counted || (r.kind == kind && r.counts);
    if (!counted) return false;
  }
  return true;
}

Result<StatementVerification> verify_statements(const VerifyStatementsRequest& r, Services& services) {
  GPUENV_TRY(keys, load_public_keys(r.keys));
  const std::vector<const marks::Key*> key_ptrs = key_pointers(keys);
  StatementVerification out;
  out.wanted = r.kinds;
  GPUENV_TRY(store, open_mark_store(r.image, r.plain_http, services));
  GPUENV_TRY(subject, store->image_descriptor());
  out.image = subject.digest;
  out.where = store->where(out.image);
  GPUENV_TRY(att, store->read_att(out.image));
  if (!att) return out;
  for (const auto& layer : att->layers) {
    // The layer's annotation says which kind a record claims to be; only the signed predicate type can make it count.
    const auto type = layer.annotations.find("predicateType");
    JudgedStatement j;
    if (type == layer.annotations.end() || !kind_of(type->second, j.kind)) continue;
    bool wanted = false;
    for (const auto k : r.kinds) wanted = wanted || k == j.kind;
    if (!wanted) continue;
    j.digest = layer.digest.str();
    if (layer.media_type != marks::k_envelope_media_type) {
      j.reasons.push_back("its layer is a " + safe_text(layer.media_type.empty() ? std::string("(no media type)") : layer.media_type, 120) + ", not a DSSE envelope");
    } else if (auto bytes = store->read_record(layer, k_max_statement_bytes); !bytes) {
      j.reasons.push_back("it could not be read: " + bytes.error().message);
    } else {
      judge_statement(*bytes, key_ptrs, out.image, out.where, j);
    }
    j.counts = j.reasons.empty();
    out.records.push_back(std::move(j));
  }
  return out;
}

}  // namespace gpuenv::app
