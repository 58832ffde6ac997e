#!/usr/bin/env python3
"""Writes the seed corpus of the libFuzzer targets (fuzz/corpus/<target>/), deterministically.

Seeds are small inputs made here (or cut from the repository's own fixtures) that reach deep into each parser; a
fuzzer starts from them instead of from nothing. The first byte of a seed picks the reader in targets that
multiplex (see each fuzz/<target>.cpp). Run it after changing a target's input format: fuzz/make_corpus.py.
Seeds that only the build can make (the compiled catalog, an ELF of this machine) are made by scripts/fuzz.sh.
"""
import gzip
import hashlib
import io
import json
import lzma
import os
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "fuzz", "corpus")


def write(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def fixture(path, limit=None):
    with open(os.path.join(ROOT, path), "rb") as f:
        data = f.read()
    return data if limit is None else data[:limit]


def tar_bytes(members, compress=None):
    """A deterministic ustar archive of (name, bytes or None for a directory, mode) members."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as t:
        for name, data, mode in members:
            info = tarfile.TarInfo(name)
            info.mtime = 0
            info.mode = mode
            info.uname = info.gname = "root"
            if data is None:
                info.type = tarfile.DIRTYPE
                t.addfile(info)
            elif isinstance(data, tuple):  # ("symlink", target)
                info.type = tarfile.SYMTYPE
                info.linkname = data[1]
                t.addfile(info)
            else:
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
    raw = buf.getvalue()
    if compress == "gz":
        return gzip.compress(raw, mtime=0)
    if compress == "xz":
        return lzma.compress(raw)
    return raw


def ar_bytes(members):
    out = b"!<arch>\n"
    for name, data in members:
        header = f"{name:<16}{0:<12}{0:<6}{0:<6}{'100644':<8}{len(data):<10}`\n".encode()
        out += header + data + (b"\n" if len(data) % 2 else b"")
    return out


CONTROL = "Package: hello\nVersion: 2.10-3\nArchitecture: amd64\nMulti-Arch: foreign\nMaintainer: A <a@example.org>\n" \
          "Depends: libc6 (>= 2.34)\nDescription: example package\n greets\n"


def deb_bytes():
    control = tar_bytes([("./", None, 0o755), ("./control", CONTROL.encode(), 0o644),
                         ("./md5sums", b"d41d8cd98f00b204e9800998ecf8427e  usr/bin/hello\n", 0o644),
                         ("./conffiles", b"/etc/hello.conf\n", 0o644)], "gz")
    data = tar_bytes([("./", None, 0o755), ("./etc/", None, 0o755), ("./etc/hello.conf", b"greeting=hi\n", 0o644),
                      ("./usr/", None, 0o755), ("./usr/bin/", None, 0o755), ("./usr/bin/hello", b"#!/bin/sh\necho hi\n", 0o755),
                      ("./usr/bin/hi", ("symlink", "hello"), 0o777)], "xz")
    return ar_bytes([("debian-binary", b"2.0\n"), ("control.tar.gz", control), ("data.tar.xz", data)])


def zip_bytes(members):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data, method in members:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = method
            z.writestr(info, data)
    return buf.getvalue()


def sha(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def answer(status_index, headers, body):
    """One scripted registry answer for registry_fuzz: status byte, header lines, blank line, body."""
    if isinstance(body, str):
        body = body.encode()
    return bytes([status_index]) + "".join(h + "\r\n" for h in headers).encode() + b"\r\n" + body


def image_documents():
    config = json.dumps({"architecture": "amd64", "os": "linux",
                         "config": {"Env": ["PATH=/usr/bin", "CUDA_VERSION=12.4.1"], "Labels": {"org.example.gpu": "h200"}},
                         "rootfs": {"type": "layers", "diff_ids": [sha(b"layer")]},
                         "history": [{"created_by": "gpuenv"}]}, sort_keys=True).encode()
    layer = tar_bytes([("usr/", None, 0o755), ("usr/bin/tool", b"x", 0o755)], "gz")
    manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                           "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": sha(config), "size": len(config)},
                           "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": sha(layer),
                                       "size": len(layer)}]}, sort_keys=True).encode()
    index = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                        "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": sha(manifest),
                                       "size": len(manifest), "platform": {"os": "linux", "architecture": "amd64"},
                                       "annotations": {"org.opencontainers.image.ref.name": "1.0"}}]}, sort_keys=True).encode()
    return config, layer, manifest, index


def main():
    # spec/ holds example specs kept by hand; regression-* files are inputs that once crashed a target (each has a
    # test in tests/); everything else is this script's and is written again.
    for d in os.listdir(OUT) if os.path.isdir(OUT) else []:
        if d == "spec":
            continue
        for f in os.listdir(os.path.join(OUT, d)):
            if not f.startswith("regression-"):
                os.remove(os.path.join(OUT, d, f))

    write("constraint", "range", ">=12.1,<13")
    write("constraint", "exact", "==2.5.1")
    write("constraint", "driver", ">=525.60.13")

    write("config", "user", b"\x00" + b"sources:\n  apt:\n    - uri: https://mirror.example/debian\n      suite: bookworm\n"
                                    b"      components: [main]\n  pip:\n    index_url: https://index.example/simple\n")
    write("config", "catalog_gpus", b"\x01" + fixture("tests/data/mini_catalog/gpus.yaml"))
    write("config", "catalog_cuda", b"\x01" + fixture("tests/data/mini_catalog/cuda.yaml") + b"\x00" +
          fixture("tests/data/mini_catalog/cuda_compat.yaml"))
    write("config", "catalog_torch", b"\x01" + fixture("tests/data/mini_catalog/torch.yaml"))

    tree = [("./", None, 0o755), ("./etc/", None, 0o755), ("./etc/a.conf", b"a=1\n", 0o644), ("./usr/lib/", None, 0o755),
            ("./usr/lib/libx.so.1", b"\x7fELF", 0o644), ("./usr/lib/libx.so", ("symlink", "libx.so.1"), 0o777)]
    write("archive", "tar", b"\x00" + tar_bytes(tree))
    write("archive", "tar_gz", b"\x00" + tar_bytes(tree, "gz"))
    write("archive", "tar_xz", b"\x00" + tar_bytes(tree, "xz"))
    write("archive", "deb", b"\x01" + deb_bytes())
    write("archive", "gz", b"\x02" + gzip.compress(b"Package: a\nVersion: 1\n\n" * 4, mtime=0))
    write("archive", "xz", b"\x02" + lzma.compress(b"Package: a\nVersion: 1\n\n" * 4))

    write("http", "challenge", "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\n"
          "WWW-Authenticate: Bearer realm=\"https://auth.example/token\",service=\"registry.example\","
          "scope=\"repository:team/image:pull,push\"\r\nRetry-After: 3\r\n\r\n")
    write("http", "upload", "HTTP/1.1 202 Accepted\r\nLocation: /v2/team/image/blobs/uploads/abc?_state=x\r\n"
          "Range: 0-1023\r\nDocker-Content-Digest: sha256:" + "0" * 64 + "\r\nRetry-After: Wed, 21 Oct 2015 07:28:00 GMT\r\n")

    write("apt", "packages", b"\x00" + fixture("tests/data/apt_closure_packages.txt", 3000))
    write("apt", "release", b"\x01" + b"Origin: Debian\nSuite: stable\nCodename: bookworm\nArchitectures: amd64 arm64\n"
                                     b"Components: main\nSHA256:\n " + b"0" * 64 + b" 1234 main/binary-amd64/Packages.xz\n")
    write("apt", "list", b"\x02" + b"deb [arch=amd64 signed-by=/k.gpg] http://mirror.example/debian bookworm main\n")
    write("apt", "sources", b"\x03" + b"Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\n"
                                     b"Components: main contrib\nSigned-By: /usr/share/keyrings/k.gpg\n")
    write("apt", "relations", b"\x04" + b"libc6 (>= 2.34), libgcc-s1 | libgcc1, python3:any (<< 3.12) [amd64] <!nocheck>")
    write("apt", "versions", b"\x05" + b"1:2.10-3+deb12u1~bpo1.2.10-3")
    write("apt", "ar", b"\x06" + deb_bytes())

    write("wheel", "json", b"\x00" + b'{"meta":{"api-version":"1.1"},"files":[{"filename":"a-1.0-py3-none-any.whl","url":"a.whl",'
                                     b'"hashes":{"sha256":"' + b"0" * 64 + b'"},"requires-python":">=3.8","core-metadata":true}]}')
    write("wheel", "html", b"\x01" + b'<html><body><a href="a-1.0-py3-none-any.whl#sha256=' + b"0" * 64 +
          b'" data-requires-python="&gt;=3.8">a-1.0-py3-none-any.whl</a></body></html>')
    write("wheel", "metadata", b"\x02" + b'Metadata-Version: 2.1\nName: a\nVersion: 1.0\nRequires-Python: >=3.8\n'
                                         b'Requires-Dist: b>=1; python_version>"3"\nProvides-Extra: cuda\n'
                                         b'Requires-Dist: c[x]==2.*; extra == "cuda"\n')
    write("wheel", "requirement", b"\x03" + b'torch[cuda]>=2.1,!=2.2.0; platform_machine == "x86_64" and python_version >= "3.9"')
    write("wheel", "filename", b"\x04" + b"torch-2.5.1+cu124-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl")
    write("wheel", "pip_conf", b"\x05" + b"[global]\nindex-url = https://index.example/simple\nextra-index-url =\n"
                                         b"    https://index.example/whl/cu124\n[install]\ntrusted-host = index.example\n")
    write("wheel", "record", b"\x06" + b'a/__init__.py,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\n'
                                       b'"a/odd,name.py",sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\n'
                                       b'a-1.0.dist-info/RECORD,,\r\n')
    write("wheel", "wheel_file", b"\x07" + b"Wheel-Version: 1.0\nGenerator: bdist_wheel (0.41.2)\nRoot-Is-Purelib: true\n"
                                           b"Tag: py3-none-any\n")
    write("wheel", "entry_points", b"\x08" + b"[console_scripts]\ntool = a.cli:main.run [extra]\n"
                                             b"[gui_scripts]\nview = a.gui:start\n[other]\nx = y:z\n")
    write("wheel", "split", b"\x09" + b"a_b-1.0-1build-py3-none-any.whl")
    metadata = b"Metadata-Version: 2.1\nName: a\nVersion: 1.0\n"
    write("wheel", "remote_zip", b"\x0a" + zip_bytes([("a/__init__.py", b"", zipfile.ZIP_STORED),
                                                      ("a-1.0.dist-info/METADATA", metadata, zipfile.ZIP_DEFLATED),
                                                      ("a-1.0.dist-info/RECORD", b"", zipfile.ZIP_STORED)]))
    write("wheel", "remote_zip64", b"\x0a" + fixture("tests/data/zip64_demo-1.0-py3-none-any.whl"))
    write("wheel", "pep440", b"\x0b" + b"1.0.post1>=1.0,<2!0,~=1.0")

    write("dpkg", "hello", CONTROL.encode() + b"\x00d41d8cd98f00b204e9800998ecf8427e  usr/bin/hello\n"
                                              b"d41d8cd98f00b204e9800998ecf8427e  etc/hello.conf\n"
                                              b"\x00/etc/hello.conf\nremove-on-upgrade /etc/old.conf\n")
    write("dpkg", "minimal", "Package: a\nVersion: 1\n")

    write("image", "lock", b"\x01" + ('schema: "gpuenv-lock-v1"\ngenerator: "gpuenv"\nspec: {name: "a", sha256: "x"}\n'
                                      'base: "debian:12"\ncuda: null\ncudnn: null\npython: "3.11"\ndriver: {min: "525.60.13"}\n'
                                      'packages:\n  - {name: "a", version: "1", kind: "deb", architecture: "all", size: 1, '
                                      'sha256: "' + "0" * 64 + '", url: "http://mirror.example/a.deb", source: "s"}\n').encode())
    write("image", "pref", b"\x02" + b"Package: *\nPin: release a=stable, o=Debian\nPin-Priority: 990\n\n"
                                     b"Package: /^lib/ src:foo\nPin: version 1.2*\nPin-Priority: -1\n")
    write("image", "ref", b"\x03" + b"127.0.0.1:5000/team/image:1.0@sha256:" + b"0" * 64)
    write("image", "challenge", b"\x04" + b'Bearer realm="https://auth.example/token",service="registry.example",'
                                          b'scope="repository:a/b:pull,push"')
    write("image", "config", b"\x05" + b'{"auths":{"https://registry.example.com/v1/":{"auth":"dTpw"}}}')
    spdx = {"spdxVersion": "SPDX-2.3", "SPDXID": "SPDXRef-DOCUMENT", "name": "torch",
            "creationInfo": {"created": "2023-11-14T22:13:20Z"},
            "packages": [{"SPDXID": "SPDXRef-Image", "name": "torch", "primaryPackagePurpose": "CONTAINER"},
                         {"SPDXID": "SPDXRef-Package-deb-libc6", "name": "libc6", "versionInfo": "2.36-9",
                          "downloadLocation": "http://mirror.example/libc6.deb", "licenseDeclared": "NOASSERTION",
                          "checksums": [{"algorithm": "SHA256", "checksumValue": "0" * 64}],
                          "externalRefs": [{"referenceType": "purl", "referenceLocator": "pkg:deb/debian/libc6@2.36-9?arch=amd64"}]},
                         {"SPDXID": "SPDXRef-Package-wheel-torch", "name": "torch", "versionInfo": "2.5.1",
                          "licenseDeclared": "BSD-3-Clause"}],
            "relationships": [{"spdxElementId": "SPDXRef-Image", "relationshipType": "CONTAINS", "relatedSpdxElement": "SPDXRef-Package-deb-libc6"},
                              {"spdxElementId": "SPDXRef-Package-wheel-torch", "relationshipType": "DEPENDS_ON",
                               "relatedSpdxElement": "SPDXRef-Package-deb-libc6"}]}
    write("image", "spdx", b"\x06" + json.dumps(spdx).encode())

    config, layer, manifest, index = image_documents()
    write("oci", "descriptor", b"\x00" + json.dumps(json.loads(index)["manifests"][0]).encode())
    write("oci", "manifest_config", b"\x01" + manifest + b"\x00" + config)
    write("oci", "layout_index", b"\x02" + index)
    oci_archive = tar_bytes([("oci-layout", b'{"imageLayoutVersion":"1.0.0"}', 0o644), ("index.json", index, 0o644),
                             ("blobs/", None, 0o755), ("blobs/sha256/", None, 0o755),
                             ("blobs/sha256/" + sha(manifest)[7:], manifest, 0o644),
                             ("blobs/sha256/" + sha(config)[7:], config, 0o644),
                             ("blobs/sha256/" + sha(layer)[7:], layer, 0o644)])
    write("oci", "oci_archive", b"\x03" + oci_archive)
    layer_d = {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": sha(layer), "size": len(layer)}
    cache_doc = {"schema": "gpuenv.build-cache/v1", "generator": "gpuenv 0.1.0",
                 "images": [{"key": "a" * 64, "platform": "linux/amd64",
                             "manifest": {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": sha(manifest), "size": len(manifest)},
                             "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": sha(config), "size": len(config)},
                             "sbom": {"mediaType": "application/spdx+json", "digest": sha(b"{}"), "size": 2}, "layers": [layer_d]}],
                 "layers": [{"key": "b" * 64, "platform": "linux/arm64", "name": "base", "blob": layer_d,
                             "diff_id": sha(b"tar"), "files": sha(b"files")}]}
    write("oci", "build_cache", b"\x04" + json.dumps(cache_doc, sort_keys=True, separators=(",", ":")).encode())
    docker_manifest = json.dumps([{"Config": "config.json", "RepoTags": ["team/image:1.0"], "Layers": ["layer.tar"]}]).encode()
    write("oci", "docker_archive", b"\x03" + tar_bytes([("manifest.json", docker_manifest, 0o644), ("config.json", config, 0o644),
                                                        ("layer.tar", tar_bytes([("a", b"x", 0o644)]), 0o644)]))

    challenge = answer(6, ['Www-Authenticate: Bearer realm="https://auth.example/token",service="registry.example",'
                           'scope="repository:team/image:pull"'], '{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}')
    token = answer(0, ["Content-Type: application/json"], '{"token":"abc","expires_in":300}')
    manifest_answer = answer(0, ["Content-Type: application/vnd.oci.image.manifest.v1+json", "Docker-Content-Digest: " + sha(manifest)], manifest)
    index_answer = answer(0, ["Content-Type: application/vnd.oci.image.index.v1+json"], index)
    config_answer = answer(0, ["Content-Type: application/octet-stream"], config)
    layer_answer = answer(0, [], layer)
    write("registry", "fetch_with_token", b"\x00" + b"\x00".join([challenge, token, manifest_answer, config_answer]))
    write("registry", "fetch_index", b"\x00" + b"\x00".join([index_answer, manifest_answer, config_answer]))
    write("registry", "pull", b"\x01" + b"\x00".join([manifest_answer, config_answer, answer(0, [], layer)]))
    write("registry", "pull_token", b"\x01" + b"\x00".join([challenge, answer(0, [], '{"access_token":"t"}'), manifest_answer,
                                                            config_answer, layer_answer]))
    write("registry", "error", b"\x00" + answer(8, ["Content-Type: application/json"],
                                              '{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown","detail":{}}]}'))
    write("registry", "blob_exists", b"\x02" + answer(0, ["Content-Length: 10"], ""))

    # push: registry_fuzz's source layout (a config, a 100-byte layer, the manifest naming them), uploaded in 40-byte chunks.
    push_config = b'{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}'
    push_layer = b"x" * 100

    def descriptor(media_type, data):
        return '{"digest":"%s","mediaType":"%s","size":%d}' % (sha(data), media_type, len(data))
    push_manifest = ('{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":' +
                     descriptor("application/vnd.oci.image.config.v1+json", push_config) + ',"layers":[' +
                     descriptor("application/vnd.oci.image.layer.v1.tar", push_layer) + "]}").encode()
    confirmed = answer(2, ["Docker-Content-Digest: " + sha(push_manifest)], "")
    write("registry", "push_present", b"\x03" + b"\x00".join([answer(0, [], ""), answer(0, [], ""), confirmed]))

    def upload(data):
        steps = [answer(8, [], ""), answer(3, ["Location: /v2/team/image/blobs/uploads/u1?_state=a"], "")]
        for end in range(40, len(data) + 40, 40):
            steps.append(answer(3, ["Range: 0-%d" % (min(end, len(data)) - 1), "Location: /v2/team/image/blobs/uploads/u1?_state=b"], ""))
        steps.append(answer(2, ["Docker-Content-Digest: " + sha(data)], ""))
        return steps
    write("registry", "push_upload", b"\x03" + b"\x00".join(upload(push_config) + upload(push_layer) + [confirmed]))
    write("registry", "push_upload_layer_first", b"\x03" + b"\x00".join(upload(push_layer) + upload(push_config) + [confirmed]))

    write("validate", "thresholds", b"\x00" + fixture("recipes/gpus/thresholds.yaml"))
    write("validate", "replay_h200", b"\x01" + fixture("tests/data/validate/h200x1.yaml"))
    write("validate", "replay_l4", b"\x01" + fixture("tests/data/validate/l4x1.yaml"))
    write("validate", "replay_mig_mixed", b"\x01" + fixture("tests/data/validate/h100_mig_mixed.yaml"))
    lib = {"loaded": True, "error": None}
    report = {"schema": "gpuenv-image-probe-v1", "python": "3.11.2", "error": None, "devices": ["/dev/nvidia0", "/dev/nvidiactl"],
              "libraries": {"error": None, "timed_out": False,
                            "driver": dict(lib, path="/run/gpuenv/driver/libcuda.so.1", version=12060, version_text="12.6"),
                            "cudart": dict(lib, path="/usr/lib/libcudart.so.12", version=12040, version_text="12.4",
                                           device_count=1, device_error=None),
                            "cublas": dict(lib, path="/usr/lib/libcublas.so.12", version_text="12.4.5"),
                            "cudnn": dict(lib, path="/usr/lib/libcudnn.so.9", version=90100, version_text="9.1.0")},
              "frameworks": {"torch": {"module": "torch", "imported": True, "error": None, "timed_out": False,
                                       "version": "2.5.1+cu124", "cuda": "12.4", "cudnn": "9.1.0", "gpu_visible": True,
                                       "device_count": 1, "device_name": "NVIDIA H200",
                                       "matmul": {"max_abs_err": 3.8e-6, "max_abs_ref": 31.2, "error": None},
                                       "conv": {"max_abs_err": 1.9e-6, "max_abs_ref": 14.7, "error": None, "cudnn_enabled": True}}}}
    write("validate", "probe_good", b"\x02" + b"probe starting\n" + json.dumps(report, sort_keys=True).encode() + b"\n")
    broken = json.loads(json.dumps(report))
    broken["libraries"]["cudart"].update(device_count=0, device_error="no CUDA-capable device is detected", device_error_code=100)
    broken["frameworks"]["torch"].update(gpu_visible=False, matmul={"error": "CUDA error"})
    write("validate", "probe_no_gpu", b"\x05" + json.dumps(broken, sort_keys=True).encode())

    # cdi: specs of the shape nvidia-ctk writes (YAML with a MIG device, JSON), the toolkit's config.toml
    lib = "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15"
    cdi_yaml = ("---\ncdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n"
                "- name: \"0\"\n  containerEdits:\n    deviceNodes:\n    - path: /dev/nvidia0\n"
                "- name: \"0:1\"\n  containerEdits:\n    deviceNodes:\n    - path: /dev/nvidia-caps/nvidia-cap21\n"
                "      hostPath: /dev/nvidia-caps/nvidia-cap21\n"
                "containerEdits:\n  env:\n  - NVIDIA_VISIBLE_DEVICES=void\n  deviceNodes:\n  - path: /dev/nvidiactl\n"
                "  hooks:\n  - hookName: createContainer\n    path: /usr/bin/nvidia-cdi-hook\n    args: [nvidia-cdi-hook, update-ldcache]\n"
                "  mounts:\n  - hostPath: " + lib + "\n    containerPath: " + lib + "\n    options: [ro, nosuid, nodev, bind]\n"
                "  - hostPath: /lib/firmware/nvidia/550.54.15/gsp_ga10x.bin\n    containerPath: /lib/firmware/nvidia/550.54.15/gsp_ga10x.bin\n")
    write("cdi", "spec_yaml", b"\x00" + cdi_yaml.encode())
    cdi_json = {"cdiVersion": "0.8.0", "kind": "nvidia.com/gpu",
                "devices": [{"name": "GPU-8f6e1d2c-0000-4000-8000-000000000000",
                             "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia0", "hostPath": "/dev/nvidia0"}]}}],
                "containerEdits": {"mounts": [{"hostPath": lib, "containerPath": lib, "options": ["ro"]}],
                                   "hooks": [{"hookName": "createContainer", "path": "/usr/bin/nvidia-cdi-hook"}]}}
    write("cdi", "spec_json", b"\x01" + json.dumps(cdi_json, sort_keys=True).encode())
    write("cdi", "toolkit_config", b"\x02" + b"[nvidia-container-runtime]\nmode = \"auto\"\n\n[nvidia-container-runtime.modes.cdi]\n"
          b"default-kind = \"nvidia.com/gpu\"\nspec-dirs = [\"/etc/cdi\", # static\n  '/var/run/cdi',\n]\n")

    # marks: an envelope around a statement (its signature is not valid: the readers, not the verifier, are fuzzed)
    import base64
    statement = {"_type": "https://in-toto.io/Statement/v1",
                 "subject": [{"name": "registry.example/ml/torch", "digest": {"sha256": "c" * 64}}],
                 "predicateType": "https://gpuenv.dev/attestation/validation/v1",
                 "predicate": {"result": "PASSED", "level": "standard", "gpu": {"product": "NVIDIA-H200", "count": 1},
                               "driver": {"version": "580.65.06"}, "cc": {"mode": "off"}, "backend": "nvml+cuda",
                               "checks": [{"id": "gemm.bf16", "status": "pass", "metrics": {"tflops": 712.5}}],
                               "timeVerified": "2026-12-01T12:00:00Z", "notAfter": "2026-12-31T12:00:00Z"}}
    body = json.dumps(statement, sort_keys=True).encode()
    envelope = {"payload": base64.b64encode(body).decode(), "payloadType": "application/vnd.in-toto+json",
                "signatures": [{"keyid": "", "sig": base64.b64encode(b"0" * 70).decode()}]}
    write("mark", "envelope", b"\x00" + json.dumps(envelope, sort_keys=True).encode())
    write("mark", "statement", b"\x01" + body)
    write("mark", "base64", b"\x02" + base64.urlsafe_b64encode(body[:40]))
    write("mark", "public_pem", b"\x03-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----\n")
    report = {"schema": "gpuenv-validation-v1", "status": "pass", "backend": "nvml+cuda", "level": "quick",
              "started_at": "2026-12-01T12:00:00Z", "exit_code": 0,
              "driver": {"version": "580.65.06", "cuda_driver_version": 13000, "cc_state": "off"},
              "gpus": [{"index": 0, "name": "NVIDIA H200", "pci_device_id": "0x2335"}],
              "image": {"ref": "out/x", "digest": "sha256:" + "c" * 64}, "lock": {"sha256": "a" * 64},
              "checks": [{"key": "gemm_bf16", "status": "pass",
                          "results": [{"gpu": 0, "metrics": [{"name": "tflops", "value": 712.5, "unit": "TFLOPS"}]}]}]}
    write("mark", "report", b"\x05" + json.dumps(report).encode())
    att = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
           "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": "sha256:" + "a" * 64, "size": 2},
           "layers": [{"mediaType": "application/vnd.dsse.envelope.v1+json", "digest": "sha256:" + "b" * 64, "size": 700,
                       "annotations": {"dev.cosignproject.cosign/signature": "",
                                       "predicateType": "https://gpuenv.dev/attestation/validation/v1"}}]}
    write("mark", "att_manifest", b"\x06" + json.dumps(att).encode())
    provenance = {"_type": "https://in-toto.io/Statement/v1",
                  "subject": [{"name": "registry.example/ml/torch", "digest": {"sha256": "c" * 64}}],
                  "predicateType": "https://slsa.dev/provenance/v1",
                  "predicate": {"buildDefinition": {"buildType": "https://gpuenv.dev/build/image/v1",
                                                    "externalParameters": {"lock": {"digest": {"sha256": "a" * 64}}},
                                                    "resolvedDependencies": [{"uri": "http://mirror.example/a.deb",
                                                                              "digest": {"sha256": "0" * 64}}]},
                                "runDetails": {"builder": {"id": "https://gpuenv.dev/builder/gpuenv-cli/v1"}}}}
    write("mark", "in_toto", b"\x07" + json.dumps(provenance).encode())

    # attest: a made-up attestation report shaped as NVIDIA's (SPDM 1.1 GET_MEASUREMENTS request and MEASUREMENTS
    # response; two 48-byte blocks, opaque data, a 96-byte signature of filler): the structure, not real evidence
    # (the published evidence stays in ../shared/cc_vectors).
    import struct
    def report(opaque):
        request = bytes([0x11, 0xE0, 0x01, 0xFF]) + bytes(range(32)) + b"\x00"
        blocks = b"".join(struct.pack("<BBHBH", i, 1, 51, 1, 48) + bytes([i]) * 48 for i in (1, 2))
        response = bytes([0x11, 0x60, 0, 0, 2]) + struct.pack("<I", len(blocks))[:3] + blocks + b"n" * 32
        return request + response + struct.pack("<H", len(opaque)) + opaque + b"s" * 96
    legacy = struct.pack("<HH", 3, 10) + b"550.90.07\x00" + struct.pack("<HH", 6, 8) + bytes([0, 0x9F, 0, 0x96, 1, 0, 0, 0]) \
        + struct.pack("<HH", 11, 1) + b"\x55" + struct.pack("<HH", 20, 48) + b"f" * 48 + struct.pack("<HHH", 34, 2, 1)[:6]
    versioned = b"NVDAOD" + struct.pack("<HBBBB", 0, 2, 0, 0, 0) + struct.pack("<HHH", 3, 0, 7) + b"620.12\x00" \
        + struct.pack("<HHH", 37, 0x87, 4) + b"\x01\x00\x00\x00"
    write("attest", "report_legacy", b"\x00" + report(legacy))
    write("attest", "report_versioned", b"\x00" + report(versioned))
    write("attest", "report_hex", b"\x01" + report(legacy).hex().encode())
    evidence = {"nonce": bytes(range(32)).hex(), "arch": "HOPPER",
                "evidence_list": [{"evidence": base64.b64encode(report(legacy)).decode(),
                                   "certificate": base64.b64encode(b"-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n").decode()}]}
    write("attest", "evidence_json", b"\x02" + json.dumps(evidence).encode())
    def der(tag, content):
        n = len(content)
        return bytes([tag]) + (bytes([n]) if n < 128 else bytes([0x81, n])) + content
    sha384 = der(0x06, bytes([0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x02]))
    tcb_info = der(0x30, der(0x80, b"NVIDIA") + der(0xA6, der(0x30, sha384 + der(0x04, b"f" * 48))))
    write("attest", "dice_tcb_info", b"\x03" + tcb_info)
    # A RIM shaped as NVIDIA's SWID documents (Meta, Payload of measurements, an enveloped ds:Signature of filler):
    # the structure only, never a real manifest.
    rim = ('<SoftwareIdentity xmlns="http://standards.iso.org/iso/19770/-2/2015/schema.xsd" xmlns:h="http://www.w3.org/2001/04/xmlenc#sha384"'
           ' name="GH100" tagId="t" version="1.0"><Meta colloquialVersion="550.90.07" product="GH100"/><Payload>'
           '<Resource type="Measurement" index="0" active="True" alternatives="2" h:Hash0="' + "00" * 48 + '" h:Hash1="' + "11" * 48 +
           '" name="m0" size="48"/><Resource type="Measurement" index="1" active="False" alternatives="1" h:Hash0="' + "22" * 48 +
           '" name="m1" size="48"/></Payload><ds:Signature xmlns:ds="http://www.w3.org/2000/09/xmldsig#"><ds:SignedInfo>'
           '<ds:CanonicalizationMethod Algorithm="http://www.w3.org/2006/12/xml-c14n11"/>'
           '<ds:SignatureMethod Algorithm="http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha384"/><ds:Reference URI=""><ds:Transforms>'
           '<ds:Transform Algorithm="http://www.w3.org/2000/09/xmldsig#enveloped-signature"/>'
           '<ds:Transform Algorithm="http://www.w3.org/2006/12/xml-c14n11"/></ds:Transforms>'
           '<ds:DigestMethod Algorithm="http://www.w3.org/2001/04/xmldsig-more#sha384"/><ds:DigestValue>' + base64.b64encode(b"d" * 48).decode() +
           '</ds:DigestValue></ds:Reference></ds:SignedInfo><ds:SignatureValue>' + base64.b64encode(b"s" * 96).decode() +
           '</ds:SignatureValue><ds:KeyInfo><ds:X509Data><ds:X509Certificate>MIIB</ds:X509Certificate></ds:X509Data></ds:KeyInfo>'
           '</ds:Signature></SoftwareIdentity>')
    write("attest", "rim", b"\x05" + rim.encode())
    import hashlib
    write("attest", "rim_service", b"\x06" + json.dumps({"id": "NV_GPU_DRIVER_GH100_1.0", "rim": base64.b64encode(rim.encode()).decode(),
                                                        "sha256": hashlib.sha256(rim.encode()).hexdigest(), "rim_format": "TCG"}).encode())
    write("attest", "policy", b"\x07" + b"version: 1\nclaims:\n  fwid: required\n  driver_rim: ignored\nallow_mismatch: [7, 9]\n")

    disk()
    project()


def disk():
    """disk_fuzz: the disk's size (8 bytes, little-endian), then a valid GPT's first 34 sectors (an ESP and a root),
    with its CRCs, so that the fuzzer starts past the checksum checks."""
    import struct
    import uuid
    import zlib
    total = 68 * 2048  # 68 MiB in sectors
    def guid(text):
        return uuid.UUID(text).bytes_le
    entries = bytearray(128 * 128)
    parts = [("c12a7328-f81f-11d2-ba4b-00a0c93ec93b", "11111111-2222-4333-8444-555555555555", 2048, 2048 + 32 * 2048 - 1, "esp"),
             ("4f68bce3-e8cd-4db1-96e7-fbcaf984b709", "66666666-7777-4888-9999-aaaaaaaaaaaa", 34 * 2048, 67 * 2048 - 1, "root")]
    for i, (t, u, first, last, name) in enumerate(parts):
        struct.pack_into("<16s16sQQQ72s", entries, i * 128, guid(t), guid(u), first, last, 0, name.encode("utf-16-le"))
    header = bytearray(512)
    struct.pack_into("<8sIIIIQQQQ16sQIII", header, 0, b"EFI PART", 0x10000, 92, 0, 0, 1, total - 1, 34, total - 34,
                     guid("0a0b0c0d-1111-4222-8333-444455556666"), 2, 128, 128, zlib.crc32(bytes(entries)))
    struct.pack_into("<I", header, 16, zlib.crc32(bytes(header[:92])))
    mbr = bytearray(512)
    mbr[446:462] = bytes([0, 0, 2, 0, 0xEE, 0xFF, 0xFF, 0xFF]) + struct.pack("<II", 1, total - 1)
    mbr[510:512] = b"\x55\xaa"
    write("disk", "gpt", struct.pack("<Q", total * 512) + bytes(mbr) + bytes(header) + bytes(entries))
    # A qcow2 version 3 header (QEMU's docs/interop/qcow2.txt): magic, version, no backing file, 64 KiB clusters,
    # a 64 MiB disk, no encryption, its tables, no features, refcount order 4, a 104-byte header.
    write("disk", "qcow2_header", struct.pack(">4sIQIIQIIQQIIQQQQII", b"QFI\xfb", 3, 0, 0, 16, 64 << 20, 0, 1, 0x30000, 0x10000, 1, 0, 0,
                                             0, 0, 0, 4, 104))
    write("disk", "qcow2_map", b'[{ "start": 0, "length": 65536, "depth": 0, "present": true, "zero": false, "data": true, "compressed": true},\n'
                               b'{ "start": 65536, "length": 67043328, "depth": 0, "present": false, "zero": true, "data": false}]\n')


def project():
    """fuzz/project_fuzz.cpp: the first byte picks the format (0 requirements, 1 pylock.toml, 2 uv.lock, 3 pyproject.toml,
    4 environment.yml; the high bit selects the extra "cuda" and the group "dev")."""
    h = "sha256:" + "3ad2a3decf9aaba3d29c8f537ac4b243e36bef957511b4766cb0057d32b0be85"
    write("project", "requirements", b"\x00" + ("--index-url https://idx.invalid/simple\n--extra-index-url https://x.invalid/simple\n"
                                                 "torch==2.5.1+cu124 ; sys_platform == 'linux' \\\n    --hash=" + h + "\n"
                                                 "numpy==2.1.3 ; python_version >= '3.10' --hash=" + h + "  # comment\n").encode())
    write("project", "requirements-ranges", b"\x00requests[socks]>=2.31,<3\ntomli ; python_version < '3.11'\n-c constraints.txt\n")
    write("project", "pylock", b"\x81" + ('lock-version = "1.0"\ncreated-by = "uv"\nrequires-python = ">=3.10"\nextras = ["cuda"]\n'
                                          'dependency-groups = ["dev"]\ndefault-groups = []\n\n[[packages]]\nname = "numpy"\nversion = "2.1.3"\n'
                                          'marker = "\'cuda\' in extras"\nindex = "https://idx.invalid/simple"\n'
                                          'wheels = [{ url = "https://f.invalid/numpy-2.1.3-cp312-cp312-manylinux_2_17_x86_64.whl", '
                                          'hashes = { sha256 = "' + h[7:] + '" } }]\n').encode())
    write("project", "uv-lock", b"\x82" + ('version = 1\nrevision = 2\nrequires-python = ">=3.10"\n\n[[package]]\nname = "demo"\n'
                                          'version = "0.1.0"\nsource = { editable = "." }\ndependencies = [{ name = "numpy", marker = "platform_machine == \'x86_64\'" }]\n\n'
                                          '[package.optional-dependencies]\ncuda = [{ name = "pyyaml" }]\n\n'
                                          '[[package]]\nname = "numpy"\nversion = "2.1.3"\nsource = { registry = "https://idx.invalid/simple" }\n'
                                          'wheels = [{ url = "https://f.invalid/numpy-2.1.3-cp312-cp312-manylinux_2_17_x86_64.whl", hash = "' + h + '", size = 1 }]\n\n'
                                          '[[package]]\nname = "pyyaml"\nversion = "6.0.2"\nsource = { registry = "https://idx.invalid/simple" }\n'
                                          'wheels = [{ url = "https://f.invalid/PyYAML-6.0.2-cp312-cp312-manylinux_2_17_x86_64.whl", hash = "' + h + '", size = 1 }]\n').encode())
    write("project", "pyproject", b"\x83" + ('[project]\nname = "demo"\nversion = "0.1"\nrequires-python = ">=3.10"\n'
                                            'dependencies = ["numpy>=1.26", "torch==2.5.1 ; sys_platform == \'linux\'"]\n\n'
                                            '[project.optional-dependencies]\ncuda = ["demo[serve]", "cupy-cuda12x"]\nserve = ["fastapi"]\n\n'
                                            '[dependency-groups]\ndev = ["pytest", { include-group = "lint" }]\nlint = ["ruff"]\n\n'
                                            '[[tool.uv.index]]\nurl = "https://idx.invalid/simple"\ndefault = true\n').encode())
    write("project", "environment", b"\x04name: demo\nchannels: [conda-forge]\ndependencies:\n  - python=3.11\n  - pip\n  - pip:\n"
                                     b"    - numpy==2.1.3\n    - --extra-index-url https://x.invalid/simple\n")


if __name__ == "__main__":
    main()
