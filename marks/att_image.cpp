#include "marks/att_image.hpp"

#include <nlohmann/json.hpp>

namespace gpuenv::marks {
namespace {

using ojson = nlohmann::ordered_json;

std::string render_config(const std::vector<images::Descriptor>& layers) {
  ojson diff_ids = ojson::array();
  ojson history = ojson::array();
  for (const auto& l : layers) {
    diff_ids.push_back(l.digest.str());
    history.push_back({{"created", "0001-01-01T00:00:00Z"}});
  }
  // cosign's (go-containerregistry's empty image with the records appended): no platform, the zero time.
  const ojson config = {{"architecture", ""},
                        {"created", "0001-01-01T00:00:00Z"},
                        {"history", history},
                        {"os", ""},
                        {"rootfs", {{"type", "layers"}, {"diff_ids", diff_ids}}},
                        {"config", ojson::object()}};
  return config.dump();
}

ojson descriptor(const images::Descriptor& d) {
  ojson j = {{"mediaType", d.media_type}, {"size", d.size}, {"digest", d.digest.str()}};
  if (!d.annotations.empty()) {
    ojson a = ojson::object();
    for (const auto& [k, v] : d.annotations) a[k] = v;
    j["annotations"] = a;
  }
  return j;
}

}  // namespace

std::string attestation_tag(const Digest& image) { return "sha256-" + image.hex() + ".att"; }

AttImage append_record(const std::optional<AttImage>& existing, std::string_view envelope, std::string_view predicate_type) {
  AttImage out;
  if (existing) out.layers = existing->layers;
  images::Descriptor layer;
  layer.media_type = std::string(k_envelope_media_type);
  layer.digest = Digest::of(envelope);
  layer.size = envelope.size();
  layer.annotations = {{"dev.cosignproject.cosign/signature", ""}, {"predicateType", std::string(predicate_type)}};
  bool present = false;
  for (const auto& l : out.layers) present = present || l.digest == layer.digest;
  if (!present) out.layers.push_back(std::move(layer));
  out.config = render_config(out.layers);
  ojson layers = ojson::array();
  for (const auto& l : out.layers) layers.push_back(descriptor(l));
  const ojson manifest = {{"schemaVersion", 2},
                          {"mediaType", images::media_type::k_manifest},
                          {"config", {{"mediaType", images::media_type::k_config}, {"size", out.config.size()}, {"digest", Digest::of(out.config).str()}}},
                          {"layers", layers}};
  out.manifest = manifest.dump();
  return out;
}

Result<AttImage> parse_att_manifest(std::string_view manifest, std::string_view config, const std::string& where) {
  const nlohmann::json j = nlohmann::json::parse(manifest, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("layers") || !j["layers"].is_array())
    return make_error(ErrorKind::environment, "mark.bad_att", "the attestation manifest is not an image manifest with layers", where,
                      "the tag holds something other than cosign's attestations; look at it with skopeo inspect");
  AttImage out;
  out.manifest = std::string(manifest);
  out.config = std::string(config);
  const images::DescriptorErrors errors{ErrorKind::environment, "mark.bad_att", "the attestation manifest is damaged"};
  for (const auto& l : j["layers"]) {
    GPUENV_TRY(d, images::parse_descriptor(l, where, errors));
    out.layers.push_back(std::move(d));
  }
  return out;
}

}  // namespace gpuenv::marks
