#include "images/disk/container_disk.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "base/time.hpp"
#include "base/digest.hpp"
#include "base/unique_fd.hpp"
#include "images/oci/tar_writer.hpp"
#include "images/plan/image_config.hpp"

namespace gpuenv::images::disk {
namespace {

constexpr IoArea k_container_disk_io{"disk.io", "check the output directory's space and permissions"};

/// The layer: disk/ and disk/NAME, written to TMP; its sha256 and size.
Result<std::pair<Digest, std::uint64_t>> write_layer(const ContainerDiskRequest& rq, const std::string& tmp) {
  UniqueFd in(::open(rq.disk.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st {};
  if (in.get() < 0 || ::fstat(in.get(), &st) != 0) return io_error(k_container_disk_io, "cannot read the disk", rq.disk);
  UniqueFd out(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (out.get() < 0) return io_error(k_container_disk_io, "cannot write the layer", tmp);
  Sha256 sha;
  std::uint64_t size = 0;
  TarWriter tar(
      [&](const char* data, std::size_t n) -> Status {
        sha.update(data, n);
        size += n;
        while (n > 0) {
          const ssize_t w = ::write(out.get(), data, n);
          if (w < 0 && errno == EINTR) continue;
          if (w <= 0) return io_error(k_container_disk_io, "cannot write the layer", tmp);
          data += w;
          n -= static_cast<std::size_t>(w);
        }
        return ok_status();
      },
      rq.epoch);
  GPUENV_CHECK(tar.add({"disk", TarEntry::Type::directory, 0555, k_kubevirt_qemu_id, k_kubevirt_qemu_id, 0, ""}));
  GPUENV_CHECK(tar.add({"disk/" + rq.file_name, TarEntry::Type::file, 0440, k_kubevirt_qemu_id, k_kubevirt_qemu_id, static_cast<std::uint64_t>(st.st_size), ""}));
  std::string buf(1u << 20, '\0');
  for (std::uint64_t left = static_cast<std::uint64_t>(st.st_size); left > 0;) {
    const ssize_t r = ::read(in.get(), buf.data(), std::min<std::uint64_t>(left, buf.size()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return io_error(k_container_disk_io, "the disk changed while it was being packed", rq.disk);
    GPUENV_CHECK(tar.write_data(buf.data(), static_cast<std::size_t>(r)));
    left -= static_cast<std::uint64_t>(r);
  }
  GPUENV_CHECK(tar.finish());
  if (::fsync(out.get()) != 0) return io_error(k_container_disk_io, "cannot flush the layer", tmp);
  return std::make_pair(sha.finish_digest(), size);
}

}  // namespace

Result<Descriptor> write_container_disk(const ContainerDiskRequest& rq) {
  if (rq.file_name.empty() || rq.file_name.find('/') != std::string::npos || rq.file_name == "." || rq.file_name == "..")
    return make_error(ErrorKind::internal, "disk.path", "'" + rq.file_name + "' is not a plain file name", rq.file_name, "this is a bug in the caller");
  GPUENV_TRY(layout, OciLayout::open(rq.layout_dir));
  const std::string tmp = layout.temp_path("containerdisk-layer");
  auto layer = write_layer(rq, tmp);
  if (!layer) {
    ::unlink(tmp.c_str());
    return layer.error();
  }
  GPUENV_TRY(layer_d, layout.adopt_file(tmp, layer->first, layer->second, k_layer_tar));
  nlohmann::ordered_json labels = nlohmann::ordered_json::object();
  for (const auto& [k, v] : rq.labels) labels[k] = v;
  nlohmann::ordered_json config = {{"created", format_rfc3339_utc(rq.epoch)}, {"architecture", std::string(rq.platform.oci_architecture())}};
  // The platform of the node that runs the VM: KubeVirt's launcher pulls the image for its own (an arm64 disk boots
  // on an arm64 node). amd64 has no variant, and its config stays as it was before platforms.
  if (!rq.platform.oci_variant().empty()) config["variant"] = std::string(rq.platform.oci_variant());
  config["os"] = "linux";
  config["config"] = {{"Labels", labels}};
  config["rootfs"] = {{"type", "layers"}, {"diff_ids", {layer_d.digest.str()}}};
  config["history"] = {{{"created", format_rfc3339_utc(rq.epoch)}, {"created_by", "gpuenv: a VM disk as a KubeVirt containerDisk (/disk/" + rq.file_name + ")"}}};
  GPUENV_TRY(config_d, layout.put_bytes(config.dump(), media_type::k_config));
  const nlohmann::ordered_json manifest = {
      {"schemaVersion", 2},
      {"mediaType", media_type::k_manifest},
      {"config", {{"mediaType", media_type::k_config}, {"digest", config_d.digest.str()}, {"size", config_d.size}}},
      {"layers", {{{"mediaType", k_layer_tar}, {"digest", layer_d.digest.str()}, {"size", layer_d.size}}}}};
  GPUENV_TRY(manifest_d, layout.put_bytes(manifest.dump(), media_type::k_manifest));
  Descriptor entry = manifest_d;
  if (!rq.tag.empty()) entry.annotations["org.opencontainers.image.ref.name"] = rq.tag;
  GPUENV_CHECK(layout.write_index({entry}));
  (void)layout.collect_garbage();
  return manifest_d;
}

}  // namespace gpuenv::images::disk
