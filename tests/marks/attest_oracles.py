#!/usr/bin/env python3
"""Independent checks of what `gpuenv build --attest sbom,provenance` writes (issue 39), by readers gpuenv does not
share any code with, all from the test venv (scripts/test.sh installs them; no network at run time):

  cyclonedx-schema  DIR/sbom.cdx.json and the SBOM statement's predicate against CycloneDX's published 1.6 JSON
                    schema (the copy bundled in cyclonedx-python-lib, strict: no unknown field), 0 errors; the two are
                    the same JSON value; bom-refs unique and every dependency names one; the image is the metadata
                    component with the image's digest and depends on every package it holds (or its base image does).
  spdx              DIR/sbom.spdx.json parsed and validated by spdx-tools (validate_full_spdx_document), 0 messages.
  packages          the same packages (name, version, sha256, purl type/namespace/name/version, download URL),
                    licences (SPDX licenseDeclared, CycloneDX licenses) and dependency edges between packages (SPDX
                    DEPENDS_ON, CycloneDX dependencies) in CycloneDX and SPDX; with --lock, the lock's packages are
                    exactly those with a sha256, same URLs.
  statements        each statement read by in-toto-attestation (Statement v1; the provenance predicate as its SLSA
                    provenance v1 message, which refuses unknown fields and non-RFC 3339 times), then field by field:
                    _type, subject digest == the image's manifest digest in DIR/index.json, predicateType, the SBOM
                    predicate == sbom.cdx.json; provenance: buildType, externalParameters.lock digest == sha256 of the
                    lock's bytes (--lock), resolvedDependencies == the lock's packages (uri and sha256), builder id
                    and version, startedOn <= finishedOn.
  signatures        every envelope of the image's attestation image (the manifest tagged sha256-<hex>.att in
                    index.json; blobs checked against their digests) verified with securesystemslib's DSSE, with
                    `cryptography` over a PAE built here and with the openssl CLI, each against PUBKEY; a key made
                    here must be refused by all three (the checks can fail).
  same-as           (--same-as DIR2) sbom.cdx.json and sbom.spdx.json byte-identical, the SBOM statements' payloads
                    byte-identical, the provenance payloads equal once runDetails.metadata.startedOn and finishedOn
                    are removed.

Usage: attest_oracles.py LAYOUT PUBKEY [--lock LOCK] [--same-as LAYOUT2] [--platform linux/ARCH]
(--platform: of a multi-platform image, that platform's manifest and its sbom.linux-ARCH.{spdx,cdx}.json)
Run it with the test venv's python. Prints one line per check (PASS/FAIL), then the failures; exit 0 when all
pass, 1 when one fails, 77 (SKIP) when the venv lacks a reader, 2 on usage errors.
"""
import argparse
import base64
import copy
import datetime
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ENVELOPE_MEDIA_TYPE = "application/vnd.dsse.envelope.v1+json"
IN_TOTO_PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
CDX_PREDICATE = "https://cyclonedx.org/bom"
SLSA_PREDICATE = "https://slsa.dev/provenance/v1"
REF_NAME = "org.opencontainers.image.ref.name"
# RFC 3339 section 5.6 date-time (what SLSA v1 requires of startedOn/finishedOn: "Timestamp" in in-toto's field types).
RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")
HEX64 = re.compile(r"^[0-9a-f]{64}$")

try:
    import yaml
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator
    from google.protobuf import json_format
    from in_toto_attestation.predicates.provenance.v1 import provenance_pb2
    from in_toto_attestation.v1 import statement_pb2
    from in_toto_attestation.v1.statement import Statement
    from packageurl import PackageURL
    from securesystemslib.dsse import Envelope as SslibEnvelope
    from securesystemslib.signer import SSlibKey
    from spdx_tools.spdx.parser.parse_anything import parse_file as spdx_parse_file
    from spdx_tools.spdx.validation.document_validator import validate_full_spdx_document
except ImportError as e:  # the venv is older than these checks, or not the test venv
    print(f"SKIP: {sys.executable} lacks {e.name} (scripts/test.sh installs the readers into build-test-venv)")
    sys.exit(77)


def safe(text, limit=300):
    """Untrusted text made printable and short for a terminal or a log."""
    s = "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))
    return s if len(s) <= limit else s[:limit] + "..."


class Failed(Exception):
    """One finding of a check; a check collects them and goes on where it can."""


class Checks:
    def __init__(self):
        self.rows = []  # (name, ok, summary)
        self.failures = []  # (name, message)

    def run(self, name, fn, *args):
        """Runs FN(*ARGS) -> (summary, [problems]); an exception is a problem too."""
        try:
            summary, problems = fn(*args)
        except Failed as e:
            summary, problems = "stopped", [str(e)]
        except Exception as e:  # a reader raising on malformed input is a finding, not a crash of the oracle
            summary, problems = "stopped", [f"{type(e).__name__}: {e}"]
        self.rows.append((name, not problems, summary))
        for p in problems:
            self.failures.append((name, p))
        return not problems

    def finish(self):
        for name, ok, summary in self.rows:
            n = sum(1 for f in self.failures if f[0] == name)
            print(f"PASS {name}: {safe(summary, 200)}" if ok else f"FAIL {name}: {n} problem{'s' if n > 1 else ''}, listed below")
        if self.failures:
            print(f"{len(self.failures)} failures:")
            for name, msg in self.failures:
                print(f"  - {name}: {safe(msg, 600)}")
            return 1
        return 0


# --- the layout ---------------------------------------------------------------------------------------------------

class Layout:
    """An OCI layout directory read as a registry would serve it: index.json's entries, blobs checked by digest.
    PLATFORM ("linux/arm64"): of a multi-platform image, that platform's manifest and SBOM files."""

    def __init__(self, path, platform=None):
        self.path = path
        self.platform = platform
        tag = "linux-" + platform.split("/")[1] if platform else ""
        self.spdx_name = f"sbom.{tag}.spdx.json" if platform else "sbom.spdx.json"
        self.cdx_name = f"sbom.{tag}.cdx.json" if platform else "sbom.cdx.json"
        index_path = os.path.join(path, "index.json")
        if not os.path.isfile(index_path):
            raise Failed(f"{path} has no index.json (not an OCI layout)")
        with open(index_path, "rb") as f:
            self.index = json.loads(f.read())
        self.entries = self.index.get("manifests")
        if not isinstance(self.entries, list):
            raise Failed(f"{index_path} has no manifests list")

    def blob(self, digest):
        algo, _, hexpart = str(digest).partition(":")
        if algo != "sha256" or not HEX64.match(hexpart):
            raise Failed(f"descriptor digest {digest!r} is not sha256:<64 hex>")
        path = os.path.join(self.path, "blobs", "sha256", hexpart)
        if not os.path.isfile(path):
            raise Failed(f"blob {digest} is missing from {self.path}")
        with open(path, "rb") as f:
            data = f.read()
        if hashlib.sha256(data).hexdigest() != hexpart:
            raise Failed(f"blob {digest} does not hold the bytes its digest names")
        return data

    def image_digest(self):
        """The one entry of index.json that is not a record store (an attestation tag sha256-<hex>.att, a
        signature tag .sig, or a referrers fallback tag sha256-<hex>): the image the records are about."""
        images = []
        for e in self.entries:
            name = (e.get("annotations") or {}).get(REF_NAME, "")
            if re.match(r"^sha256-[0-9a-f]{64}(\.att|\.sig|\.sbom)?$", name):
                continue
            images.append(e)
        if len(images) != 1:
            raise Failed(f"index.json names {len(images)} images besides record tags, expected 1: "
                         + ", ".join(safe((e.get('annotations') or {}).get(REF_NAME, e.get('digest'))) for e in images))
        digest = images[0].get("digest", "")
        if not re.match(r"^sha256:[0-9a-f]{64}$", digest):
            raise Failed(f"the image entry's digest {safe(digest)} is not sha256:<64 hex>")
        top = json.loads(self.blob(digest))  # present and intact
        if top.get("mediaType") == "application/vnd.oci.image.index.v1+json" or "manifests" in top:
            if not self.platform:
                raise Failed("the image is multi-platform (an image index): give --platform linux/ARCH")
            want = self.platform.split("/")
            found = [m for m in top.get("manifests", [])
                     if [(m.get("platform") or {}).get(k, "") for k in ("os", "architecture", "variant")][:len(want)] == want]
            if len(found) != 1:
                raise Failed(f"the image index names {len(found)} manifests for {safe(self.platform)}, expected 1")
            digest = found[0].get("digest", "")
            self.blob(digest)
        elif self.platform:
            raise Failed(f"--platform {safe(self.platform)} given, but the image is one manifest, not an index")
        return digest.split(":", 1)[1]

    def attestation_layers(self, image_hex):
        """The layers (descriptor, envelope bytes) of the attestation image of IMAGE_HEX, as cosign stores it."""
        tag = f"sha256-{image_hex}.att"
        named = [e for e in self.entries if (e.get("annotations") or {}).get(REF_NAME) == tag]
        if len(named) != 1:
            raise Failed(f"index.json has {len(named)} entries tagged {tag}, expected 1 (the attestation image)")
        manifest = json.loads(self.blob(named[0]["digest"]))
        layers = manifest.get("layers")
        if not isinstance(layers, list) or not layers:
            raise Failed(f"the attestation manifest {named[0]['digest']} has no layers")
        config = json.loads(self.blob(manifest["config"]["digest"]))
        diff_ids = (config.get("rootfs") or {}).get("diff_ids")
        if diff_ids != [l.get("digest") for l in layers]:
            raise Failed("the attestation config's rootfs.diff_ids are not its layers' digests (cosign writes them so)")
        out = []
        for l in layers:
            out.append((l, self.blob(l["digest"])))
        return out

    def read(self, name):
        path = os.path.join(self.path, name)
        if not os.path.isfile(path):
            raise Failed(f"{path} is missing")
        with open(path, "rb") as f:
            return f.read()


def decode_b64(text, what):
    """Standard or URL-safe base64 (DSSE readers must take either)."""
    try:
        t = str(text)
        return base64.b64decode(t + "=" * (-len(t) % 4), altchars=b"-_" if ("-" in t or "_" in t) else None, validate=True)
    except Exception as e:
        raise Failed(f"{what} is not base64: {e}")


def pae(payload_type, payload):
    """DSSE v1 pre-authentication encoding (secure-systems-lab/dsse, protocol.md), built here on purpose."""
    t = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


class Records:
    """The statements of the image's attestation image, by predicate type: [(layer, envelope dict, payload bytes)]."""

    def __init__(self, layout):
        self.layout = layout
        self.image_hex = layout.image_digest()
        self.by_type = {}
        self.all = []
        for layer, blob in layout.attestation_layers(self.image_hex):
            if layer.get("mediaType") != ENVELOPE_MEDIA_TYPE:
                raise Failed(f"attestation layer {layer.get('digest')} has media type {safe(layer.get('mediaType'))}, not {ENVELOPE_MEDIA_TYPE}")
            env = json.loads(blob)
            payload = decode_b64(env.get("payload", ""), f"layer {layer['digest']}'s payload")
            ann = layer.get("annotations") or {}
            rec = (layer, env, payload)
            self.all.append(rec)
            self.by_type.setdefault(ann.get("predicateType", ""), []).append(rec)

    def one(self, predicate_type):
        recs = self.by_type.get(predicate_type, [])
        if not recs:
            raise Failed(f"the attestation image of sha256:{self.image_hex} has no layer annotated predicateType {predicate_type}")
        return recs[-1]  # records are appended: the newest is the last


# --- the checks ---------------------------------------------------------------------------------------------------

_cdx_validator = []


def cdx_validate(text, what):
    if not _cdx_validator:  # compiling the schema costs more than validating a document: once a process
        _cdx_validator.append(JsonStrictValidator(SchemaVersion.V1_6))
    errors = _cdx_validator[0].validate_str(text, all_errors=True)
    out = []
    for e in errors or []:
        path = "/".join(str(p) for p in getattr(e.data, "absolute_path", []))
        out.append(f"{what}: CycloneDX 1.6 schema: at /{path}: {getattr(e.data, 'message', e)}")
    return out


def cdx_semantics(bom, image_hex, what):
    """What the schema cannot say: unique bom-refs, dependencies naming components, the image component."""
    problems = []
    comps = bom.get("components") or []
    refs = [c.get("bom-ref") for c in comps]
    meta = (bom.get("metadata") or {}).get("component") or {}
    all_refs = refs + [meta.get("bom-ref")]
    if len(set(all_refs)) != len(all_refs) or None in all_refs:
        problems.append(f"{what}: bom-refs missing or not unique")
    if bom.get("specVersion") != "1.6" or bom.get("bomFormat") != "CycloneDX":
        problems.append(f"{what}: bomFormat/specVersion are {safe(bom.get('bomFormat'))}/{safe(bom.get('specVersion'))}, not CycloneDX/1.6")
    if not re.match(r"^urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", str(bom.get("serialNumber", ""))):
        problems.append(f"{what}: serialNumber {safe(bom.get('serialNumber'))} is not a lowercase urn:uuid")
    if meta.get("type") != "container":
        problems.append(f"{what}: metadata.component is type {safe(meta.get('type'))}, not container")
    if meta.get("version") != f"sha256:{image_hex}":
        problems.append(f"{what}: metadata.component.version is {safe(meta.get('version'))}, not the image's digest sha256:{image_hex}")
    if {"alg": "SHA-256", "content": image_hex} not in (meta.get("hashes") or []):
        problems.append(f"{what}: metadata.component.hashes lacks SHA-256 {image_hex}")
    try:
        p = PackageURL.from_string(meta.get("purl", ""))
        if p.type != "oci" or p.version != f"sha256:{image_hex}":
            problems.append(f"{what}: the image's purl {safe(meta.get('purl'))} is not pkg:oci/NAME@sha256%3A<image digest>")
    except ValueError as e:
        problems.append(f"{what}: the image's purl {safe(meta.get('purl'))} does not parse: {e}")
    known = set(all_refs)
    depends = {}
    for d in bom.get("dependencies") or []:
        if d.get("ref") not in known:
            problems.append(f"{what}: dependency ref {safe(d.get('ref'))} names no component")
        for t in d.get("dependsOn") or []:
            if t not in known:
                problems.append(f"{what}: {safe(d.get('ref'))} depends on {safe(t)}, which names no component")
        depends[d.get("ref")] = set(d.get("dependsOn") or [])
    # the image holds every package directly (SPDX's CONTAINS), or through a base image it depends on (DESCENDANT_OF
    # and the base image's CONTAINS); edges between packages (DEPENDS_ON) do not count
    types = {c.get("bom-ref"): c.get("type") for c in comps}
    held = set(depends.get(meta.get("bom-ref"), ()))
    for r in list(held):
        if types.get(r) == "container":
            held |= depends.get(r, set())
    missed = [c.get("name") for c in comps if c.get("bom-ref") not in held]
    if missed:
        problems.append(f"{what}: neither the image component nor its base image depends on {len(missed)} components: {safe(', '.join(map(str, missed[:5])))}")
    return problems


def check_cyclonedx(layout, records):
    problems = []
    text = layout.read(layout.cdx_name).decode("utf-8")
    file_bom = json.loads(text)
    problems += cdx_validate(text, layout.cdx_name)
    problems += cdx_semantics(file_bom, records.image_hex, layout.cdx_name)
    _, _, payload = records.one(CDX_PREDICATE)
    predicate = json.loads(payload).get("predicate")
    if predicate is None:
        problems.append("the SBOM statement has no predicate")
    else:
        problems += cdx_validate(json.dumps(predicate), "the SBOM statement's predicate")
        if predicate != file_bom:
            problems.append(f"the SBOM statement's predicate is not the same JSON value as {layout.cdx_name}")
    n = len(file_bom.get("components") or [])
    return f"{layout.cdx_name} and the statement's predicate: CycloneDX 1.6 (strict schema), {n} components, 0 errors", problems


def check_spdx(layout):
    path = os.path.join(layout.path, layout.spdx_name)
    if not os.path.isfile(path):
        raise Failed(f"{path} is missing")
    doc = spdx_parse_file(path)  # raises SPDXParsingError, naming each problem, on what it cannot read
    messages = validate_full_spdx_document(doc, "SPDX-2.3")
    problems = [f"{layout.spdx_name}: {m.validation_message} ({m.context.spdx_id or m.context.element_type})" for m in messages]
    return f"{layout.spdx_name}: spdx-tools read {len(doc.packages)} packages, {len(messages)} validation messages", problems


def purl_key(text):
    """purl without qualifiers and subpath: (type, namespace, name, version); SPDX's and CycloneDX's qualifiers differ."""
    if not text:
        return None
    p = PackageURL.from_string(text)
    return (p.type, p.namespace, p.name, p.version)


def spdx_packages(doc_json):
    out = []
    for p in doc_json.get("packages", []):
        if p.get("SPDXID") == "SPDXRef-Image":
            continue
        sha = [c["checksumValue"] for c in p.get("checksums", []) if c.get("algorithm") == "SHA256"]
        purls = [r["referenceLocator"] for r in p.get("externalRefs", []) if r.get("referenceType") == "purl"]
        out.append({"name": p.get("name"), "version": p.get("versionInfo", ""), "sha256": sha[0] if sha else None,
                    "purl": purl_key(purls[0]) if purls else None, "url": p.get("downloadLocation"),
                    "container": p.get("primaryPackagePurpose") == "CONTAINER"})
    return out


def cdx_packages(bom):
    out = []
    for c in bom.get("components") or []:
        sha = [h["content"] for h in c.get("hashes") or [] if h.get("alg") == "SHA-256"]
        urls = [r["url"] for r in c.get("externalReferences") or [] if r.get("type") == "distribution"]
        out.append({"name": c.get("name"), "version": c.get("version", ""), "sha256": sha[0] if sha else None,
                    "purl": purl_key(c.get("purl")), "url": urls[0] if urls else "NOASSERTION", "container": c.get("type") == "container"})
    return out


def package_key(p):
    # a base image's component: named differently by the two formats (a reference vs a repository), one digest
    if p["container"]:
        return ("container", p["sha256"])
    return (p["name"], p["version"], p["sha256"], p["purl"])


def read_lock(path):
    with open(path, "rb") as f:
        data = f.read()
    lock = yaml.safe_load(data)
    if not isinstance(lock, dict) or not isinstance(lock.get("packages"), list):
        raise Failed(f"{path} is not a gpuenv lock with a packages list")
    return data, lock


def lock_groups(lock, platform=None):
    """The lock's image packages, one list per platform (a lock of several platforms names each package's): PLATFORM's
    when given and named, else each in turn."""
    groups = {}
    for p in lock["packages"]:
        groups.setdefault(p.get("platform", ""), []).append(p)
    if platform in groups:
        return [groups[platform]]
    return list(groups.values()) or [[]]


def spdx_licences(doc):
    """(name, version, licence) of each package whose licenseDeclared says something."""
    return [(p.get("name"), p.get("versionInfo", ""), p["licenseDeclared"]) for p in doc.get("packages", [])
            if p.get("SPDXID") != "SPDXRef-Image" and p.get("licenseDeclared") not in (None, "NOASSERTION", "NONE")]


def cdx_licences(bom):
    out = []
    for c in bom.get("components") or []:
        names = []
        for entry in c.get("licenses") or []:
            lic = entry.get("license") or {}
            names.append(entry.get("expression") or lic.get("id") or lic.get("name"))
        if names:
            out.append((c.get("name"), c.get("version", ""), " AND ".join(sorted(map(str, names)))))
    return out


def spdx_edges(doc):
    """(from, to) as (name, version) pairs: the DEPENDS_ON relationships between packages."""
    ids = {p.get("SPDXID"): (p.get("name"), p.get("versionInfo", "")) for p in doc.get("packages", []) if p.get("SPDXID") != "SPDXRef-Image"}
    return [(ids.get(r.get("spdxElementId")), ids.get(r.get("relatedSpdxElement"))) for r in doc.get("relationships", [])
            if r.get("relationshipType") == "DEPENDS_ON"]


def cdx_edges(bom):
    """The same from CycloneDX: dependencies between components, leaving out what the image and a base image
    contain (SPDX's CONTAINS and DESCENDANT_OF)."""
    refs = {c.get("bom-ref"): c for c in bom.get("components") or []}
    out = []
    for d in bom.get("dependencies") or []:
        src = refs.get(d.get("ref"))
        if src is None or src.get("type") == "container":
            continue
        for t in d.get("dependsOn") or []:
            dst = refs.get(t)
            out.append(((src.get("name"), src.get("version", "")), (dst.get("name"), dst.get("version", "")) if dst else t))
    return out


def diff(a, b, label_a, label_b):
    sa, sb = sorted(map(repr, a)), sorted(map(repr, b))
    only_a = sorted(set(sa) - set(sb))
    only_b = sorted(set(sb) - set(sa))
    msg = []
    if only_a:
        msg.append(f"only in {label_a} ({len(only_a)}): {'; '.join(only_a[:4])}")
    if only_b:
        msg.append(f"only in {label_b} ({len(only_b)}): {'; '.join(only_b[:4])}")
    if not msg and sa != sb:
        msg.append(f"{label_a} and {label_b} hold the same packages a different number of times")
    return " / ".join(msg)


def check_packages(layout, lock_path):
    problems = []
    spdx_doc, bom = json.loads(layout.read(layout.spdx_name)), json.loads(layout.read(layout.cdx_name))
    spdx, cdx = spdx_packages(spdx_doc), cdx_packages(bom)
    d = diff([package_key(p) for p in spdx], [package_key(p) for p in cdx], "SPDX", "CycloneDX")
    if d:
        problems.append("SPDX and CycloneDX list different packages (name, version, sha256, purl): " + d)
    d = diff([(p["name"], p["url"]) for p in spdx if not p["container"]], [(p["name"], p["url"]) for p in cdx if not p["container"]],
             "SPDX downloadLocation", "CycloneDX distribution")
    if d:
        problems.append("the download URLs differ: " + d)
    licences = (spdx_licences(spdx_doc), cdx_licences(bom))
    d = diff(licences[0], licences[1], "SPDX licenseDeclared", "CycloneDX licenses")
    if d:
        problems.append("the licences differ: " + d)
    edges = (spdx_edges(spdx_doc), cdx_edges(bom))
    d = diff(edges[0], edges[1], "SPDX DEPENDS_ON", "CycloneDX dependencies")
    if d:
        problems.append("the dependency edges between packages differ: " + d)
    summary = f"{len(spdx)} packages, {len(licences[0])} licences, {len(edges[0])} dependency edges: the same in SPDX and CycloneDX"
    if lock_path:
        _, lock = read_lock(lock_path)
        hashed = [(p["name"], p["version"], p["sha256"], p["url"]) for p in cdx if p["sha256"] and not p["container"]]
        options = [[(str(p["name"]), str(p["version"]), str(p["sha256"]), str(p["url"])) for p in g] for g in lock_groups(lock, layout.platform)]
        diffs = [diff(o, hashed, "the lock", "CycloneDX") for o in options]
        if all(diffs):
            problems.append("the lock's packages are not CycloneDX's packages with a sha256: " + min(diffs, key=len))
        summary += f", and the lock's {len(hashed)}"
    return summary, problems


def read_statement(payload, what):
    """The statement as in-toto-attestation reads it (unknown fields refused), and as plain JSON."""
    pb = json_format.Parse(payload, statement_pb2.Statement())
    Statement.copy_from_pb(pb).validate()
    return json.loads(payload)


def statement_basics(st, predicate_type, image_hex, what):
    problems = []
    if st.get("_type") != STATEMENT_TYPE:
        problems.append(f"{what}: _type is {safe(st.get('_type'))}, not {STATEMENT_TYPE}")
    if st.get("predicateType") != predicate_type:
        problems.append(f"{what}: predicateType is {safe(st.get('predicateType'))}, not {predicate_type}")
    subjects = st.get("subject") or []
    if [s.get("digest") for s in subjects] != [{"sha256": image_hex}]:
        problems.append(f"{what}: the subject is {safe(json.dumps(subjects))}, not the one image sha256:{image_hex} that index.json names")
    return problems


def rfc3339(value, what, problems):
    if not isinstance(value, str) or not RFC3339.match(value):
        problems.append(f"{what} is {safe(value)}, not an RFC 3339 date-time")
        return None
    return datetime.datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))


def check_statements(layout, records, lock_path):
    problems = []
    layer, _, payload = records.one(CDX_PREDICATE)
    st = read_statement(payload, "the SBOM statement")
    problems += statement_basics(st, CDX_PREDICATE, records.image_hex, "the SBOM statement")
    layer, _, payload = records.one(SLSA_PREDICATE)
    st = read_statement(payload, "the provenance statement")
    problems += statement_basics(st, SLSA_PREDICATE, records.image_hex, "the provenance statement")
    pred = st.get("predicate") or {}
    json_format.ParseDict(pred, provenance_pb2.Provenance())  # SLSA v1's fields only; Timestamps must parse
    bd, rd = pred.get("buildDefinition") or {}, pred.get("runDetails") or {}
    if not re.match(r"^[a-z][a-z0-9+.-]*:", str(bd.get("buildType", ""))):
        problems.append(f"provenance: buildDefinition.buildType {safe(bd.get('buildType'))} is not a URI (SLSA v1: required)")
    ext = bd.get("externalParameters")
    if not isinstance(ext, dict) or not ext:
        problems.append("provenance: buildDefinition.externalParameters is missing or empty (SLSA v1: required)")
        ext = {}
    for name in ("spec", "lock"):
        dg = ((ext.get(name) or {}).get("digest") or {}).get("sha256", "")
        if not HEX64.match(str(dg)):
            problems.append(f"provenance: externalParameters.{name}.digest.sha256 is {safe(dg)}, not 64 hex digits")
    builder = rd.get("builder") or {}
    if not re.match(r"^[a-z][a-z0-9+.-]*:", str(builder.get("id", ""))):
        problems.append(f"provenance: runDetails.builder.id {safe(builder.get('id'))} is not a URI (SLSA v1: required)")
    if not (builder.get("version") or {}).get("gpuenv"):
        problems.append("provenance: runDetails.builder.version has no gpuenv version")
    meta = rd.get("metadata") or {}
    t0 = rfc3339(meta.get("startedOn"), "provenance: runDetails.metadata.startedOn", problems)
    t1 = rfc3339(meta.get("finishedOn"), "provenance: runDetails.metadata.finishedOn", problems)
    if t0 and t1 and t0 > t1:
        problems.append(f"provenance: startedOn {meta['startedOn']} is after finishedOn {meta['finishedOn']}")
    deps = bd.get("resolvedDependencies") or []
    for i, d in enumerate(deps):
        if not (d.get("uri") or d.get("digest") or d.get("content")):
            problems.append(f"provenance: resolvedDependencies[{i}] has none of uri, digest, content (in-toto ResourceDescriptor)")
    summary = f"SBOM and provenance statements read by in-toto-attestation; {len(deps)} resolvedDependencies"
    if lock_path:
        data, lock = read_lock(lock_path)
        want = hashlib.sha256(data).hexdigest()
        got = ((ext.get("lock") or {}).get("digest") or {}).get("sha256")
        if got != want:
            problems.append(f"provenance: externalParameters.lock.digest.sha256 is {safe(got)}, the lock's bytes hash to {want}")
        have = [(d.get("uri"), (d.get("digest") or {}).get("sha256")) for d in deps]
        if lock.get("base_image"):  # pinned by digest (the lock's reader insists): one entry of that digest
            base_hex = str(lock["base_image"]).rsplit("@sha256:", 1)[-1]
            if sum(1 for h in have if h[1] == base_hex) != 1:
                problems.append(f"provenance: not one resolvedDependencies entry for the base image {safe(lock['base_image'])}")
            have = [h for h in have if h[1] != base_hex]
        options = [[(str(p["url"]), str(p["sha256"])) for p in g] for g in lock_groups(lock)]
        diffs = [diff(o, have, "the lock", "resolvedDependencies") for o in options]
        if all(diffs):
            problems.append("provenance: resolvedDependencies (uri, sha256) are not the lock's packages: " + min(diffs, key=len))
        summary += ", the lock's packages and digest"
    return summary, problems


def check_signatures(records, pubkey_path):
    problems = []
    with open(pubkey_path) as f:
        pem = f.read()
    public = serialization.load_pem_public_key(pem.encode())
    if not isinstance(public, ec.EllipticCurvePublicKey) or public.curve.name != "secp256r1":
        raise Failed(f"{pubkey_path} is not an ECDSA P-256 public key")
    stranger = ec.generate_private_key(ec.SECP256R1())
    stranger_pem = stranger.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    openssl = shutil.which("openssl")
    tmp = tempfile.mkdtemp(prefix="gpuenv-oracle-")
    try:
        with open(os.path.join(tmp, "right.pub"), "w") as f:
            f.write(pem)
        with open(os.path.join(tmp, "stranger.pub"), "w") as f:
            f.write(stranger_pem)
        wanted = {CDX_PREDICATE, SLSA_PREDICATE}
        checked = 0
        for layer, env, payload in records.all:
            ptype = (layer.get("annotations") or {}).get("predicateType")
            if ptype not in wanted:
                continue  # marks and others: their own keys, their own tests
            checked += 1
            what = f"the {ptype} envelope ({layer['digest'][:19]})"
            if (layer.get("annotations") or {}).get("dev.cosignproject.cosign/signature") != "":
                problems.append(f"{what}: the layer lacks cosign's empty dev.cosignproject.cosign/signature annotation")
            if json.loads(payload).get("predicateType") != ptype:
                problems.append(f"{what}: the layer's predicateType annotation is not the statement's")
            if env.get("payloadType") != IN_TOTO_PAYLOAD_TYPE:
                problems.append(f"{what}: payloadType {safe(env.get('payloadType'))}, not {IN_TOTO_PAYLOAD_TYPE}")
            sigs = env.get("signatures") or []
            if len(sigs) != 1 or sigs[0].get("keyid", None) != "":
                problems.append(f"{what}: expected one signature with keyid \"\" (cosign's form), found {safe(json.dumps(sigs))}")
            problems += verify_three_ways(env, payload, pem, stranger_pem, public, stranger.public_key(), openssl, tmp, what)
        if checked < 2:
            problems.append(f"only {checked} SBOM/provenance envelopes in the attestation image, expected at least 2")
    finally:
        shutil.rmtree(tmp, True)
    tools = "securesystemslib, cryptography" + (", openssl" if openssl else " (no openssl CLI on PATH)")
    return f"{checked} envelopes verified against the key by {tools}; a stranger's key refused by each", problems


def verify_three_ways(env, payload, pem, stranger_pem, public, stranger_public, openssl, tmp, what):
    problems = []

    def sslib(key_pem):
        key = SSlibKey("", "ecdsa", "ecdsa-sha2-nistp256", {"public": key_pem})
        try:
            SslibEnvelope.from_dict(copy.deepcopy(env)).verify([key], 1)
            return True
        except Exception:
            return False

    if not sslib(pem):
        problems.append(f"{what}: securesystemslib's DSSE verification refuses it under the given key")
    if sslib(stranger_pem):
        problems.append(f"{what}: securesystemslib verifies it under a stranger's key")
    message = pae(str(env.get("payloadType", "")), payload)
    for sig_entry in (env.get("signatures") or [])[:1]:
        sig = decode_b64(sig_entry.get("sig", ""), f"{what}'s signature")

        def crypto(key):
            try:
                key.verify(sig, message, ec.ECDSA(hashes.SHA256()))
                return True
            except InvalidSignature:
                return False

        if not crypto(public):
            problems.append(f"{what}: cryptography (OpenSSL) refuses the DER signature over the PAE under the given key")
        if crypto(stranger_public):
            problems.append(f"{what}: cryptography verifies it under a stranger's key")
        if openssl:
            with open(os.path.join(tmp, "pae.bin"), "wb") as f:
                f.write(message)
            with open(os.path.join(tmp, "sig.der"), "wb") as f:
                f.write(sig)

            def cli(pub):
                p = subprocess.run([openssl, "dgst", "-sha256", "-verify", os.path.join(tmp, pub), "-signature", os.path.join(tmp, "sig.der"),
                                    os.path.join(tmp, "pae.bin")], capture_output=True, text=True, timeout=60)
                return p.returncode == 0 and p.stdout.strip() == "Verified OK"

            if not cli("right.pub"):
                problems.append(f"{what}: openssl dgst -verify refuses it under the given key")
            if cli("stranger.pub"):
                problems.append(f"{what}: openssl verifies it under a stranger's key")
    return problems


def without_times(payload):
    st = json.loads(payload)
    meta = ((st.get("predicate") or {}).get("runDetails") or {}).get("metadata")
    if isinstance(meta, dict):
        meta.pop("startedOn", None)
        meta.pop("finishedOn", None)
    return st


def check_same_as(layout, records, other_path):
    problems = []
    other = Layout(other_path, layout.platform)
    other_records = Records(other)
    if other_records.image_hex != records.image_hex:
        problems.append(f"the images differ: sha256:{records.image_hex} and sha256:{other_records.image_hex}")
    for name in (layout.cdx_name, layout.spdx_name):
        if layout.read(name) != other.read(name):
            problems.append(f"{name} differs between the two layouts")
    if records.one(CDX_PREDICATE)[2] != other_records.one(CDX_PREDICATE)[2]:
        problems.append("the SBOM statements' payloads differ")
    a, b = records.one(SLSA_PREDICATE)[2], other_records.one(SLSA_PREDICATE)[2]
    if without_times(a) != without_times(b):
        keys = sorted(k for k in set(flatten(without_times(a))) ^ set(flatten(without_times(b))))
        problems.append("the provenance statements differ in more than startedOn/finishedOn: " + ", ".join(safe(k, 80) for k in keys[:6]))
    return f"the same documents as {other_path} (provenance apart from its two times)", problems


def flatten(value, prefix=""):
    """(path=value) strings of a JSON value, to name where two differ."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from flatten(v, f"{prefix}/{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from flatten(v, f"{prefix}/{i}")
    else:
        yield f"{prefix}={json.dumps(value)}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("layout")
    ap.add_argument("pubkey")
    ap.add_argument("--lock", help="the lock the image was built from")
    ap.add_argument("--same-as", help="a second layout built from the same lock")
    ap.add_argument("--platform", help="of a multi-platform image: the platform to judge (linux/amd64, linux/arm64)")
    args = ap.parse_args(argv)
    checks = Checks()
    try:
        layout = Layout(args.layout, args.platform)
        records = Records(layout)
    except (Failed, ValueError, KeyError, TypeError) as e:  # nothing to judge beyond this
        checks.run("layout", lambda: ("stopped", [f"{args.layout}: {e}"]))
        return checks.finish()
    checks.run("cyclonedx-schema", check_cyclonedx, layout, records)
    checks.run("spdx", check_spdx, layout)
    checks.run("packages", check_packages, layout, args.lock)
    checks.run("statements", check_statements, layout, records, args.lock)
    checks.run("signatures", check_signatures, records, args.pubkey)
    if args.same_as:
        checks.run("same-as", check_same_as, layout, records, args.same_as)
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
