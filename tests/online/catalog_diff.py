#!/usr/bin/env python3
"""Online check (ctest label `online`): compare the framework facts of the compatibility catalog
(recipes/catalog/{torch,tensorflow,jax,vllm,sglang}.yaml) with what the package indexes serve.

Usage: catalog_diff.py [PROJECT_ROOT]

The Python package index is the one pip uses on this host (PIP_INDEX_URL, the pip configuration, else pip's own
default obtained at run time); it is never written here. It is read through the PEP 691 JSON simple API (PEP 503
HTML is accepted too). The PyTorch variant indexes are checked only when GPUENV_TORCH_INDEX is set to a URL
template containing `{variant}` (for example a mirror of the per-CUDA wheel indexes).

Compared, per framework:
  - every catalog release is served by the index (a release the index lacks is a wrong fact);
  - every final minor series X.Y on the index, at or above the catalog's oldest series, has a catalog record.
    A patch release X.Y.Z the catalog lacks while it records another X.Y release is covered by the series rule
    (a minor series' facts apply to its patch releases unless the catalog records a difference): listed, not
    failed. Pre-releases (a, b, rc, dev) are ignored;
  - per catalog release, the CPython versions of its Linux x86_64 wheels against the catalog's python min..max
    (torch: torch; tensorflow: tensorflow; jax: jaxlib and the jax-cudaNN-plugin of each variant);
  - jax: each variant `cudaNN` is served as jax-cudaNN-plugin at the release's version, and no plugin the catalog
    does not list is served;
  - torch (with GPUENV_TORCH_INDEX): the `+cuXXX` local versions each variant index serves against the catalog's
    variants; the default variant is the plain index's wheel and need not be on its variant index;
  - Linux aarch64 (`aarch64_cuda`, docs/catalog.md): every release records it; torch: the Requires-Dist of one of the
    release's Linux aarch64 wheels (its PEP 658 metadata file) names CUDA wheels that apply on aarch64 (no
    `platform_machine == "x86_64"` marker) exactly when the catalog lists a variant; jax: each variant's
    jax-cudaNN-plugin has a Linux aarch64 wheel exactly when the catalog lists the variant. TensorFlow's aarch64
    wheels tell a CUDA build only inside the wheel (build_info.py), so only that the release records it is checked.
    Metadata is a proxy for what the wheel holds: the catalog's records were read from the wheels themselves.
  - frameworks that pin torch (vllm, sglang): no series rule (each release pins its own torch): an index release newer
    than the catalog's newest is a difference, one between recorded releases is listed; the CPython range of an abi3
    wheel is its tag's onwards within its Requires-Python; the Requires-Dist of one Linux x86_64 and one Linux aarch64
    wheel pin the catalog's `torch` and every entry of `pins`; an aarch64 wheel is served exactly when `aarch64_cuda`
    lists a variant; each pin has a wheel on the index (Linux x86_64, and aarch64 when recorded) exactly when
    `pins_without_wheel` does not list it.

A difference is acknowledged by a bullet "- `KEY` reason" under the heading
"## Known differences from the package indexes" in docs/catalog.md.

Exit status: 0 no unacknowledged difference, 1 unacknowledged differences (or an incomplete comparison),
2 bad setup (catalog unreadable, bad GPUENV_TORCH_INDEX), 77 no package index reachable (skip).
"""

import base64
import concurrent.futures
import configparser
import gzip
import html.parser
import io
import json
import os
import re
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
import zlib
from pathlib import Path

try:
    import yaml
except ImportError:  # pragma: no cover - PyYAML is a test dependency
    print("catalog_diff: SKIP: PyYAML is not installed (python3 -m pip install pyyaml)")
    sys.exit(77)

SKIP = 77
TIMEOUT_S = 30
ATTEMPTS = 3
ACK_HEADING = "## Known differences from the package indexes"
FRAMEWORKS = ("torch", "tensorflow", "jax", "vllm", "sglang")
PINNING = ("vllm", "sglang")  # frameworks whose releases pin torch (docs/catalog.md, "Frameworks that pin torch")
ACCEPT = ("application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.1, "
          "text/html;q=0.01")


# ----------------------------------------------------------------------------------------------------------------
# versions and wheel tags

_VERSION_RE = re.compile(
    r"^\s*v?(?:(\d+)!)?(\d+(?:\.\d+)*)"
    r"(?:[-_.]?(a|alpha|b|beta|rc|c|pre|preview)[-_.]?(\d*))?"
    r"(?:(?:-(\d+))|(?:[-_.]?(post|rev|r)[-_.]?(\d*)))?"
    r"(?:[-_.]?(dev)[-_.]?(\d*))?"
    r"(?:\+([a-z0-9]+(?:[-_.][a-z0-9]+)*))?\s*$", re.IGNORECASE)


class Version:
    """The parts of a PEP 440 version this check needs."""

    def __init__(self, text):
        m = _VERSION_RE.match(text)
        if not m:
            raise ValueError(text)
        self.text = text
        self.release = tuple(int(p) for p in m.group(2).split("."))
        self.pre = m.group(3) is not None or m.group(9) is not None
        post = m.group(5) or (m.group(7) if m.group(6) else None)
        if m.group(6) and not m.group(7):
            post = "0"
        self.post = int(post) if post is not None else None
        self.local = (m.group(10) or "").lower().replace("-", ".").replace("_", ".")
        rel = list(self.release)
        while len(rel) > 1 and rel[-1] == 0:
            rel.pop()
        self.key = (tuple(rel), -1 if self.post is None else self.post)  # no epochs in these projects

    @property
    def public(self):
        s = ".".join(str(p) for p in self.release)
        return s if self.post is None else f"{s}.post{self.post}"

    @property
    def series(self):
        r = self.release + (0,)
        return (r[0], r[1])

    def sort_key(self):
        return (self.release + (0,) * (4 - len(self.release)), -1 if self.post is None else self.post)


def parse_version(text):
    try:
        return Version(text)
    except ValueError:
        return None


def series_text(series):
    return f"{series[0]}.{series[1]}"


def py_tag(version):
    """(3, 10) -> 'cp310'."""
    return f"cp{version[0]}{version[1]}"


def parse_py(text):
    """'3.10' -> (3, 10)."""
    parts = str(text).split(".")
    return (int(parts[0]), int(parts[1]))


def requires_python_bounds(text):
    """(oldest, newest) CPython minor a Requires-Python allows, each None when unbounded: '>=3.11,<3.15' -> ((3, 11), (3, 14))."""
    lo = hi = None
    for clause in (text or "").split(","):
        m = re.match(r"^\s*(>=|>|<=|<|==|~=)\s*(\d+)\.(\d+)", clause)
        if not m:
            continue
        op, v = m.group(1), (int(m.group(2)), int(m.group(3)))
        if op in (">=", "~=", "=="):
            lo = v if lo is None else max(lo, v)
        if op == ">":
            lo = (v[0], v[1] + 1) if lo is None else max(lo, (v[0], v[1] + 1))
        if op in ("<=", "=="):
            hi = v if hi is None else min(hi, v)
        if op == "<":
            below = (v[0], v[1] - 1) if v[1] > 0 else (v[0] - 1, 20)
            hi = below if hi is None else min(hi, below)
    return lo, hi


def py_range(lo, hi):
    out = []
    for major in range(lo[0], hi[0] + 1):
        first = lo[1] if major == lo[0] else 0
        last = hi[1] if major == hi[0] else 20
        out.extend((major, minor) for minor in range(first, last + 1))
    return out


def _dist_norm(name):
    return re.sub(r"[-_.]+", "_", name).lower()


def parse_filename(filename, project):
    """Returns (Version, wheel tags or None for an sdist) or None when the file is not a distribution of the
    project. Wheel tags are a list of (python, abi, platform) triples."""
    name = _dist_norm(project)
    if filename.endswith(".whl"):
        parts = filename[:-4].split("-")
        if len(parts) not in (5, 6) or _dist_norm(parts[0]) != name:
            return None
        version = parse_version(urllib.parse.unquote(parts[1]))
        if version is None:
            return None
        pys, abis, plats = parts[-3].split("."), parts[-2].split("."), parts[-1].split(".")
        return version, [(p, a, pl) for p in pys for a in abis for pl in plats]
    for ext in (".tar.gz", ".zip", ".tar.bz2", ".tgz", ".tar"):
        if filename.endswith(ext):
            stem = filename[: -len(ext)]
            lead = len(project) + 1
            if _dist_norm(stem[: lead - 1]) != name or stem[lead - 1: lead] != "-":
                return None
            version = parse_version(urllib.parse.unquote(stem[lead:]))
            return (version, None) if version else None
    return None


def is_linux_x86_64(platform):
    return platform.endswith("_x86_64") and (platform.startswith("manylinux") or platform == "linux_x86_64")


def is_linux_aarch64(platform):
    return platform.endswith("_aarch64") and (platform.startswith("manylinux") or platform == "linux_aarch64")


_CP_RE = re.compile(r"^cp(\d)(\d+)$")


class Release:
    """What an index serves for one public version of a project."""

    def __init__(self, version):
        self.version = version
        self.files = 0
        self.yanked = 0
        self.linux_x86_64 = False
        self.py = set()          # (3, 10): CPython versions with a GIL Linux x86_64 wheel
        self.py_ft = set()       # free-threaded (cp313t) Linux x86_64 wheels
        self.abi3_from = None    # oldest CPython an abi3 Linux x86_64 wheel supports
        self.any_py = False      # a Linux x86_64 wheel for any Python 3 (py3-none)
        self.locals = set()      # local version labels (torch variant indexes: cu126)
        self.aarch64 = []        # (url, has PEP 658 metadata) of each Linux aarch64 wheel that is not yanked
        self.x86_64 = []         # the same for Linux x86_64 wheels
        self.any_wheel = False   # a wheel for any platform (py3-none-any) that is not yanked
        self.requires_python = ""  # Requires-Python of its wheels, as the index gives it (PEP 691/503)

    def add(self, tags, yanked, local, url=None, metadata=False, requires_python=""):
        self.files += 1
        self.yanked += 1 if yanked else 0
        if local:
            self.locals.add(local)
        if not tags:
            return
        if requires_python and not yanked:
            self.requires_python = requires_python
        if not yanked and any(plat == "any" for _, _, plat in tags):
            self.any_wheel = True
        if not yanked and any(is_linux_aarch64(plat) for _, _, plat in tags):
            self.aarch64.append((url, metadata))
        if not yanked and any(is_linux_x86_64(plat) for _, _, plat in tags):
            self.x86_64.append((url, metadata))
        for py, abi, plat in tags:
            if not is_linux_x86_64(plat):
                continue
            self.linux_x86_64 = True
            m = _CP_RE.match(py)
            if m:
                v = (int(m.group(1)), int(m.group(2)))
                if abi == "abi3":
                    self.abi3_from = v if self.abi3_from is None else min(self.abi3_from, v)
                elif abi.endswith("t") and abi.startswith("cp"):
                    self.py_ft.add(v)
                else:
                    self.py.add(v)
            elif py.startswith("py3") and abi == "none":
                self.any_py = True

    def python_versions(self, newest):
        versions = set(self.py)
        if self.abi3_from is not None:
            # An abi3 wheel takes every CPython from its tag on, within its Requires-Python (vLLM: cp38-abi3, >=3.11,<3.15).
            lo, hi = requires_python_bounds(self.requires_python)
            first = max(self.abi3_from, lo) if lo else self.abi3_from
            last = hi if hi else max(newest, first)
            versions.update(py_range(first, last) if first <= last else [])
        return versions


class Project:
    def __init__(self, name, url):
        self.name = name
        self.url = url
        self.found = True        # False: the index answered 404 for the project
        self.by_public = {}      # Version.key (public part) -> Release
        self.by_local = {}       # (Version.key, local) -> Release
        self.pre = {}            # version text -> Release of a pre-release (an exact pin may name one: cuda-tile 1.6.0rc5)

    def add_file(self, filename, yanked, url=None, metadata=False, requires_python=""):
        parsed = parse_filename(filename, self.name)
        if parsed is None:
            return
        version, tags = parsed
        if version.pre:
            self.pre.setdefault(version.text, Release(version)).add(tags, yanked, version.local, url, metadata, requires_python)
            return
        rel = self.by_public.setdefault(version.key, Release(version))
        rel.add(tags, yanked, version.local, url, metadata, requires_python)
        if version.local:
            self.by_local.setdefault((version.key, version.local), Release(version)).add(tags, yanked, version.local)

    def get(self, version):
        return self.by_public.get(version.key)

    def newest_py(self):
        newest = (3, 0)
        for rel in self.by_public.values():
            for v in rel.py | rel.py_ft:
                newest = max(newest, v)
        return newest


# ----------------------------------------------------------------------------------------------------------------
# pip configuration: index URL, CA bundle, proxy, trusted hosts

def pip_config():
    """Values pip would use, as {'index-url': ..., 'cert': ..., 'proxy': ..., 'trusted-host': ...}."""
    values = {}
    sections = {}
    try:
        out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                             timeout=60, env=dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1"))
        if out.returncode == 0:
            for line in out.stdout.splitlines():
                m = re.match(r"^([^.=]*)\.([A-Za-z0-9_-]+)=(.*)$", line.strip())
                if not m:
                    continue
                value = m.group(3).strip()
                if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                    value = value[1:-1]
                sections.setdefault(m.group(1), {})[m.group(2)] = value
        else:
            sections = None
    except (OSError, subprocess.SubprocessError):
        sections = None
    if sections is None:  # no pip: read the configuration files pip reads, lowest precedence first
        sections = {}
        home = Path.home()
        files = [Path("/etc/xdg/pip/pip.conf"), Path("/etc/pip.conf"), home / ".pip/pip.conf",
                 Path(os.environ.get("XDG_CONFIG_HOME", home / ".config")) / "pip/pip.conf"]
        if os.environ.get("VIRTUAL_ENV"):
            files.append(Path(os.environ["VIRTUAL_ENV"]) / "pip.conf")
        if os.environ.get("PIP_CONFIG_FILE"):
            files.append(Path(os.environ["PIP_CONFIG_FILE"]))
        for path in files:
            parser = configparser.RawConfigParser()
            try:
                parser.read(path)
            except (configparser.Error, OSError):
                continue
            for section in parser.sections():
                for key, value in parser.items(section):
                    sections.setdefault(section, {})[key] = value.strip()
    for section in ("global", "download", "install", ":env:"):  # later wins, as for `pip install`
        values.update(sections.get(section, {}))
    for key in ("index-url", "cert", "proxy", "trusted-host"):
        env = os.environ.get("PIP_" + key.upper().replace("-", "_"))
        if env:
            values[key] = env
    return values


def pip_default_index():
    try:
        out = subprocess.run([sys.executable, "-c",
                              "from pip._internal.models.index import PyPI; print(PyPI.simple_url)"],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    url = out.stdout.strip()
    return url if out.returncode == 0 and url else None


def redact(url):
    parts = urllib.parse.urlsplit(url)
    if parts.username or parts.password:
        netloc = "***@" + parts.hostname + (f":{parts.port}" if parts.port else "")
        return urllib.parse.urlunsplit(parts._replace(netloc=netloc))
    return url


# ----------------------------------------------------------------------------------------------------------------
# HTTP

class FetchError(Exception):
    pass


class _Anchors(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.files = []

    def handle_starttag(self, tag, attrs):
        if tag != "a":
            return
        attrs = dict(attrs)
        href = attrs.get("href") or ""
        name = urllib.parse.unquote(urllib.parse.urlsplit(href).path.rsplit("/", 1)[-1])
        if name:
            metadata = any(k in attrs for k in ("data-core-metadata", "data-dist-info-metadata"))
            self.files.append((name, "data-yanked" in attrs, href.split("#", 1)[0], metadata,
                               attrs.get("data-requires-python") or ""))


class Client:
    def __init__(self, config):
        cafile = (config.get("cert") or os.environ.get("SSL_CERT_FILE")
                  or ("/etc/ssl/certs/ca-certificates.crt" if os.path.exists("/etc/ssl/certs/ca-certificates.crt")
                      else None))
        self.cafile = cafile
        self.context = ssl.create_default_context(cafile=cafile) if cafile else ssl.create_default_context()
        self.insecure = ssl._create_unverified_context()  # only for pip's trusted-host entries
        self.trusted = set((config.get("trusted-host") or "").split())
        proxy = config.get("proxy")
        self.proxies = {"http": proxy, "https": proxy} if proxy else None

    def _open(self, url, extra_headers=None):
        parts = urllib.parse.urlsplit(url)
        headers = {"Accept": ACCEPT, "Accept-Encoding": "gzip, deflate", "User-Agent": "gpuenv-catalog-diff"}
        headers.update(extra_headers or {})
        if parts.username or parts.password:
            cred = f"{urllib.parse.unquote(parts.username or '')}:{urllib.parse.unquote(parts.password or '')}"
            headers["Authorization"] = "Basic " + base64.b64encode(cred.encode()).decode()
            host = parts.hostname + (f":{parts.port}" if parts.port else "")
            url = urllib.parse.urlunsplit(parts._replace(netloc=host))
        trusted = parts.hostname in self.trusted or (parts.port and f"{parts.hostname}:{parts.port}" in self.trusted)
        handlers = [urllib.request.HTTPSHandler(context=self.insecure if trusted else self.context)]
        if self.proxies:
            handlers.append(urllib.request.ProxyHandler(self.proxies))
        opener = urllib.request.build_opener(*handlers)
        return opener.open(urllib.request.Request(url, headers=headers), timeout=TIMEOUT_S)

    def get(self, url):
        """(body bytes, content type, final url), or None for 404/410. Raises FetchError."""
        last = None
        for attempt in range(ATTEMPTS):
            if attempt:
                time.sleep(2 * attempt)
            try:
                with self._open(url) as resp:
                    body = resp.read()
                    encoding = (resp.headers.get("Content-Encoding") or "").lower()
                    if encoding == "gzip":
                        body = gzip.decompress(body)
                    elif encoding == "deflate":
                        body = zlib.decompress(body)
                    return body, resp.headers.get("Content-Type", ""), resp.geturl()
            except urllib.error.HTTPError as e:
                if e.code in (404, 410):
                    return None
                last = f"HTTP {e.code} {e.reason}"
                if e.code < 500 and e.code != 429:
                    break
            except (urllib.error.URLError, OSError, ValueError, EOFError, zlib.error) as e:
                reason = getattr(e, "reason", e)
                last = f"{type(reason).__name__}: {reason}"
        raise FetchError(f"{redact(url)}: {last}")

    def project(self, base, name):
        url = base.rstrip("/") + "/" + name + "/"
        got = self.get(url)
        project = Project(name, url)
        if got is None:
            project.found = False
            return project
        body, ctype, final = got
        if "json" in ctype.lower():
            try:
                data = json.loads(body)
                files = [(f["filename"], bool(f.get("yanked")), f.get("url", ""),
                          bool(f.get("core-metadata") or f.get("data-dist-info-metadata") or f.get("dist-info-metadata")),
                          f.get("requires-python") or "")
                         for f in data["files"]]
            except (ValueError, KeyError, TypeError) as e:
                raise FetchError(f"{redact(url)}: unreadable JSON simple page ({e})")
        else:
            parser = _Anchors()
            parser.feed(body.decode("utf-8", "replace"))
            files = parser.files
        for filename, yanked, href, metadata, requires_python in files:
            project.add_file(filename, yanked, urllib.parse.urljoin(final, href) if href else None, metadata, requires_python)
        return project

    def get_range(self, url, first, last=None):
        """(bytes, total size) of bytes FIRST..LAST of URL (FIRST < 0: the last -FIRST bytes). Raises FetchError,
        also when the server answers without honouring the range."""
        spec = f"bytes={first}" if first < 0 else f"bytes={first}-{'' if last is None else last}"
        last_error = None
        for attempt in range(ATTEMPTS):
            if attempt:
                time.sleep(2 * attempt)
            try:
                with self._open(url, {"Range": spec, "Accept-Encoding": "identity"}) as resp:
                    total = re.match(r"bytes \d+-\d+/(\d+)", resp.headers.get("Content-Range") or "")
                    if resp.status != 206 or not total:
                        raise FetchError(f"{redact(url)}: the server does not answer range requests")
                    return resp.read(), int(total.group(1))
            except urllib.error.HTTPError as e:
                last_error = f"HTTP {e.code} {e.reason}"
                if e.code < 500 and e.code != 429:
                    break
            except (urllib.error.URLError, OSError, ValueError) as e:
                last_error = f"{type(e).__name__}: {e}"
        raise FetchError(f"{redact(url)}: {last_error}")

    def requires_dist(self, wheel_url, has_metadata):
        """The Requires-Dist lines of a wheel: its PEP 658 metadata file, else its *.dist-info/METADATA read through
        range requests (the zip's central directory and that one member, not the whole wheel)."""
        if has_metadata:
            got = self.get(wheel_url + ".metadata")
            text = got[0].decode("utf-8", "replace") if got else ""
        else:
            tail, size = self.get_range(wheel_url, -(1 << 16))
            with zipfile.ZipFile(_RangeReader(self, wheel_url, size, tail)) as wheel:
                names = [n for n in wheel.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
                if not names:
                    raise FetchError(f"{redact(wheel_url)}: no *.dist-info/METADATA in the wheel")
                text = wheel.read(names[0]).decode("utf-8", "replace")
        return [line.split(":", 1)[1].strip() for line in text.splitlines() if line.lower().startswith("requires-dist:")]


class _RangeReader(io.RawIOBase):
    """A seekable read-only file over range requests, its last bytes (TAIL) already fetched."""

    def __init__(self, client, url, size, tail):
        super().__init__()
        self.client, self.url, self.size, self.pos = client, url, size, 0
        self.tail_start, self.tail = size - len(tail), tail

    def seekable(self):
        return True

    def readable(self):
        return True

    def tell(self):
        return self.pos

    def seek(self, offset, whence=io.SEEK_SET):
        self.pos = offset if whence == io.SEEK_SET else (self.pos + offset if whence == io.SEEK_CUR else self.size + offset)
        return self.pos

    def read(self, n=-1):
        end = self.size if n is None or n < 0 else min(self.size, self.pos + n)
        if end <= self.pos:
            return b""
        if self.pos >= self.tail_start:
            data = self.tail[self.pos - self.tail_start: end - self.tail_start]
        else:
            data, _ = self.client.get_range(self.url, self.pos, end - 1)
        self.pos += len(data)
        return data

    def readinto(self, buffer):
        data = self.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)


# ----------------------------------------------------------------------------------------------------------------
# catalog and acknowledgements

def load_catalog(root, framework):
    path = root / "recipes" / "catalog" / f"{framework}.yaml"
    data = yaml.safe_load(path.read_text())
    releases = []
    for rec in data.get("releases") or []:
        version = Version(str(rec["version"]))
        releases.append({
            "version": version,
            "text": str(rec["version"]),
            "py_min": parse_py(rec["python"]["min"]),
            "py_max": parse_py(rec["python"]["max"]),
            "default": str(rec.get("default_variant", "")),
            "variants": [str(v["name"]) for v in rec.get("variants") or []],
            "aarch64": None if rec.get("aarch64_cuda") is None else [str(n) for n in rec["aarch64_cuda"]],
            "torch": None if rec.get("torch") is None else str(rec["torch"]),
            "pins": [str(p) for p in rec.get("pins") or []],
            "pins_without_wheel": [str(p) for p in rec.get("pins_without_wheel") or []],
        })
    return releases


def load_acks(root):
    """{key: reason} from the acknowledgement section of docs/catalog.md, and whether the section exists."""
    path = root / "docs" / "catalog.md"
    acks = {}
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return acks, False
    inside = found = False
    for line in lines:
        if line.rstrip() == ACK_HEADING:
            inside = found = True
            continue
        if inside and re.match(r"^#{1,2} ", line):
            inside = False
        if inside:
            m = re.match(r"^- `([^`]+)`(.*)$", line)
            if m:
                acks[m.group(1).strip()] = m.group(2).strip().lstrip(":-\u2014\u2013 ").strip()
    return acks, found


# ----------------------------------------------------------------------------------------------------------------
# comparison

class Report:
    def __init__(self, framework):
        self.framework = framework
        self.info = []           # lines printed before the differences
        self.diffs = []          # (key, detail)
        self.covered = []        # index versions covered by the series rule
        self.older = []          # index versions below the catalog's oldest release
        self.unrecorded = []     # index versions between recorded releases of a framework that pins torch
        self.matched = 0
        self.checked_kinds = set()

    def diff(self, key, detail):
        self.diffs.append((key, detail))


def compact(versions):
    """['2.1.3', '2.1.4', '2.2.1'] -> '2.1: 2.1.3 2.1.4; 2.2: 2.2.1'."""
    groups = {}
    for v in sorted(versions, key=lambda v: v.sort_key()):
        groups.setdefault(v.series, []).append(v.public)
    return "; ".join(f"{series_text(s)}: {' '.join(vs)}" for s, vs in groups.items())


def check_python(report, label, rel, release, newest):
    """Compares the CPython versions of the Linux x86_64 wheels of `release` with the catalog range."""
    claimed = set(py_range(rel["py_min"], rel["py_max"]))
    if release.any_py and not release.py and release.abi3_from is None:
        report.info.append(f"{label}: version-independent wheel (py3-none), Python range not comparable")
        return
    served = release.python_versions(newest)
    for v in sorted(claimed - served):
        report.diff(f"{label} python {py_tag(v)} no-wheel",
                    f"catalog python {rel['py_min'][0]}.{rel['py_min'][1]}..{rel['py_max'][0]}.{rel['py_max'][1]} "
                    f"claims {v[0]}.{v[1]}; no CPython {v[0]}.{v[1]} Linux x86_64 wheel on the index")
    for v in sorted(served - claimed):
        report.diff(f"{label} python {py_tag(v)} outside-range",
                    f"a CPython {v[0]}.{v[1]} Linux x86_64 wheel is served; catalog python is "
                    f"{rel['py_min'][0]}.{rel['py_min'][1]}..{rel['py_max'][0]}.{rel['py_max'][1]}")
    for v in sorted(release.py_ft - claimed - served):
        report.diff(f"{label} python {py_tag(v)}t outside-range",
                    f"a free-threaded CPython {v[0]}.{v[1]} Linux x86_64 wheel is served; catalog python is "
                    f"{rel['py_min'][0]}.{rel['py_min'][1]}..{rel['py_max'][0]}.{rel['py_max'][1]}")


def describe_py(release, newest):
    vs = sorted(release.python_versions(newest))
    text = f"{py_tag(vs[0])}..{py_tag(vs[-1])}" if vs else "none"
    if release.py_ft:
        text += " (+free-threaded " + " ".join(py_tag(v) + "t" for v in sorted(release.py_ft)) + ")"
    return text


def cuda_on_aarch64(requires):
    """Whether Requires-Dist lines name CUDA wheels (nvidia-*, cuda-toolkit) that pip installs on Linux aarch64."""
    for req in requires:
        name, _, marker = req.partition(";")
        name = _dist_norm(re.split(r"[\s\[(<>=!~]", name.strip(), 1)[0])
        if not (name.startswith("nvidia_") or name == "cuda_toolkit"):
            continue
        m = marker.replace("'", '"')
        if "extra ==" in m or re.search(r'platform_machine\s*==\s*"x86_64"', m):
            continue
        return True
    return False


def compare_aarch64(framework, catalog, projects, report, requires_dist):
    """The catalog's `aarch64_cuda` against what the index serves for Linux aarch64 (see the module's docstring)."""
    report.checked_kinds.add("aarch64")
    main = projects[framework]
    for rel in catalog:
        v = rel["version"]
        label = f"{framework} {v.public}"
        if rel["aarch64"] is None:
            report.diff(f"{label} aarch64 not-recorded", f"catalog release {rel['text']} has no aarch64_cuda")
            continue
        if framework in PINNING:
            continue  # compare_pins: its aarch64 wheel and the torch it pins there
        if framework == "jax":
            for name in rel["variants"]:
                plugin = projects.get(f"jax-{name}-plugin")
                prel = plugin.get(v) if plugin else None
                served, listed = bool(prel and prel.aarch64), name in rel["aarch64"]
                if listed and not served:
                    report.diff(f"{label} variant {name} aarch64 not-served",
                                f"aarch64_cuda lists {name}; the index serves no jax-{name}-plugin {rel['text']} Linux aarch64 wheel")
                elif served and not listed:
                    report.diff(f"{label} variant {name} aarch64 not-in-catalog",
                                f"the index serves jax-{name}-plugin {rel['text']} for Linux aarch64; aarch64_cuda does not list {name}")
        elif framework == "torch":
            release = main.get(v)
            wheels = [w for w in (release.aarch64 if release else []) if w[0]]
            if not wheels:
                if rel["aarch64"]:
                    report.diff(f"{label} aarch64 not-served", f"aarch64_cuda lists {', '.join(rel['aarch64'])}; the index "
                                f"serves no Linux aarch64 wheel of torch {rel['text']}")
                else:
                    report.info.append(f"{label}: the index serves no Linux aarch64 wheel")
                continue
            try:
                requires = requires_dist(*wheels[0])
            except (FetchError, zipfile.BadZipFile) as e:
                report.diff(f"{label} aarch64 unreadable", str(e))
                continue
            cuda = cuda_on_aarch64(requires or [])
            if cuda and not rel["aarch64"]:
                report.diff(f"{label} aarch64 cuda", "a Linux aarch64 wheel's Requires-Dist names CUDA wheels for aarch64; "
                            "aarch64_cuda is [] (CPU-only)")
            elif rel["aarch64"] and not cuda:
                report.diff(f"{label} aarch64 cpu-only", f"aarch64_cuda lists {', '.join(rel['aarch64'])}; a Linux aarch64 "
                            "wheel's Requires-Dist names no CUDA wheel for aarch64")
    if framework == "tensorflow":
        report.info.append("aarch64: recorded for every release; whether a wheel is a CUDA build shows only inside it "
                           "(build_info.py), so the values are not compared")


def pin_parts(pin):
    """'flashinfer-python==0.7.3' -> ('flashinfer_python', '0.7.3')."""
    name, _, version = pin.partition("==")
    return _dist_norm(name.strip()), version.strip()


def exact_pins(requires, machine):
    """{name: version} of the Requires-Dist lines `name[extras]==version` that pip applies on Linux MACHINE (no extra,
    no platform_machine marker that leaves MACHINE out)."""
    out = {}
    for req in requires:
        spec, _, marker = req.partition(";")
        m = marker.replace("'", '"')
        if "extra ==" in m:
            continue
        named = re.findall(r'platform_machine\s*==\s*"([^"]+)"', m)
        if (named and machine not in named) or re.search(r'platform_machine\s*!=\s*"%s"' % machine, m):
            continue
        pin = re.match(r"^\s*([A-Za-z0-9._-]+)\s*(?:\[[^\]]*\])?\s*\(?\s*==\s*([^\s,;)]+)\s*\)?\s*$", spec)
        if pin:
            out[_dist_norm(pin.group(1))] = pin.group(2)
    return out


def pin_project_names(catalogs):
    """The projects the pins of the frameworks that pin torch name, as written in the catalog (fetched by main)."""
    return sorted({pin.partition("==")[0] for fw in PINNING for rel in catalogs.get(fw, []) for pin in rel["pins"]})


def wheel_served(project, version, machines):
    """Whether PROJECT serves a wheel of VERSION (final or pre-release) for each Linux machine of MACHINES."""
    want = parse_version(version)
    if project is None or want is None:
        return False
    rel = project.get(want) if not want.pre else project.pre.get(want.text)
    if rel is None:
        return False
    return all(rel.any_wheel or (rel.x86_64 if m == "x86_64" else rel.aarch64) for m in machines)


def compare_pins(framework, catalog, projects, report, requires_dist):
    """A framework that pins torch: the Requires-Dist of its Linux x86_64 and aarch64 wheels pin the catalog's torch and
    `pins`; it serves an aarch64 wheel exactly when aarch64_cuda lists a variant; each pin has a wheel on the index
    (for every machine the release is served for) exactly when pins_without_wheel does not list it."""
    report.checked_kinds.update({"pin", "aarch64"})
    main = projects[framework]
    for rel in catalog:
        label = f"{framework} {rel['version'].public}"
        release = main.get(rel["version"])
        if release is None:
            continue  # compare(): not-served
        machines = ["x86_64"] + (["aarch64"] if rel["aarch64"] else [])
        for machine, wheels in (("x86_64", release.x86_64), ("aarch64", release.aarch64)):
            wheels = [w for w in wheels if w[0]]
            if machine == "aarch64" and bool(wheels) != bool(rel["aarch64"]):
                report.diff(f"{label} aarch64 " + ("not-served" if rel["aarch64"] else "not-in-catalog"),
                            f"aarch64_cuda is {rel['aarch64'] or '[]'}; the index serves "
                            f"{'a' if wheels else 'no'} Linux aarch64 wheel of {framework} {rel['text']}")
            if not wheels:
                continue
            try:
                pins = exact_pins(requires_dist(*wheels[0]) or [], machine)
            except (FetchError, zipfile.BadZipFile) as e:
                report.diff(f"{label} {machine} unreadable", str(e))
                continue
            if pins.get("torch") != rel["torch"]:
                report.diff(f"{label} {machine} torch pin", f"a Linux {machine} wheel's Requires-Dist pins torch=={pins.get('torch') or '(none)'}; "
                            f"the catalog records torch {rel['torch']}")
            for pin in rel["pins"]:
                name, version = pin_parts(pin)
                if pins.get(name) != version:
                    report.diff(f"{label} {machine} pin {pin} not-in-metadata",
                                f"a Linux {machine} wheel's Requires-Dist pins {name}=={pins.get(name) or '(nothing)'}")
        for pin in rel["pins"]:
            name, version = pin_parts(pin)
            project = projects.get("pin:" + name)
            if project is None:
                report.diff(f"{label} pin {pin} unreadable", f"the index's page of {name} could not be fetched")
                continue
            served, listed = wheel_served(project, version, machines), pin in rel["pins_without_wheel"]
            if not served and not listed:
                report.diff(f"{label} pin {pin} no-wheel", f"the index serves no wheel of {pin} for Linux {' and '.join(machines)}; "
                            "pins_without_wheel does not list it")
            elif served and listed:
                report.diff(f"{label} pin {pin} wheel-served", f"pins_without_wheel lists {pin}; the index now serves a wheel of it "
                            f"for Linux {' and '.join(machines)}")


def compare(framework, catalog, projects, report, torch_variants):
    main = projects[framework]
    report.checked_kinds.update({"release", "series", "python"})
    cat_keys = {rel["version"].key: rel for rel in catalog}
    cat_series = {rel["version"].series for rel in catalog}
    oldest = min(rel["version"].sort_key() for rel in catalog)
    oldest_series = min(cat_series)
    if not main.found:
        report.info.append(f"the index has no project `{framework}`")
    index_versions = sorted((r.version for r in main.by_public.values()), key=lambda v: v.sort_key())
    cat_sorted = sorted((r["version"] for r in catalog), key=lambda v: v.sort_key())
    report.info.append(
        f"catalog: {len(catalog)} releases in {len(cat_series)} minor series ({cat_sorted[0].public} .. "
        f"{cat_sorted[-1].public}); index: {len(index_versions)} final releases"
        + (f" ({index_versions[0].public} .. {index_versions[-1].public})" if index_versions else ""))

    # index -> catalog: series rule
    missing_series = {}
    newest_cat = max(rel["version"].sort_key() for rel in catalog)
    for v in index_versions:
        if v.key in cat_keys:
            report.matched += 1
        elif framework in PINNING:
            # Each release pins its own torch, so no series rule: a release newer than the newest recorded one is a
            # difference; one between recorded releases is not recorded (the resolver refuses it, naming the known ones).
            if v.sort_key() < oldest:
                report.older.append(v)
            elif v.sort_key() > newest_cat:
                report.diff(f"{framework} release {v.public} missing",
                            f"the index serves {framework} {v.public}, newer than the catalog's newest release")
            else:
                report.unrecorded.append(v)
        elif v.series in cat_series:
            if v.sort_key() < oldest:
                report.older.append(v)
            else:
                report.covered.append(v)
        elif v.series < oldest_series:
            report.older.append(v)
        else:
            missing_series.setdefault(v.series, []).append(v.public)
    for series, versions in sorted(missing_series.items()):
        report.diff(f"{framework} series {series_text(series)} missing",
                    f"the index serves {', '.join(versions)}; the catalog has no {series_text(series)} release")

    # catalog -> index
    newest = main.newest_py()
    plugin_projects = {}
    if framework == "jax":
        for name in sorted({n for rel in catalog for n in rel["variants"]}):
            if re.fullmatch(r"cuda\d+", name):
                plugin_projects[name] = projects.get(f"jax-{name}-plugin")
        report.checked_kinds.add("variant")
    for rel in catalog:
        v = rel["version"]
        label = f"{framework} {v.public}"
        release = main.get(v)
        if release is None:
            report.diff(f"{label} not-served", f"catalog release {rel['text']}: the index serves no {framework} "
                        f"{rel['text']} file")
            continue
        if release.yanked and release.yanked == release.files:
            report.info.append(f"{label}: every file is yanked on the index")
        if framework == "jax":
            jaxlib = projects["jaxlib"].get(v)
            if jaxlib is None or not jaxlib.linux_x86_64:
                report.diff(f"{label} jaxlib not-served",
                            f"the index serves no jaxlib {rel['text']} Linux x86_64 wheel")
            else:
                check_python(report, label, rel, jaxlib, projects["jaxlib"].newest_py())
            for name, plugin in plugin_projects.items():
                prel = plugin.get(v) if plugin else None
                served = prel is not None and prel.linux_x86_64
                listed = name in rel["variants"]
                if listed and not served:
                    report.diff(f"{label} variant {name} not-served",
                                f"catalog variant {name}: the index serves no jax-{name}-plugin {rel['text']} "
                                f"Linux x86_64 wheel")
                elif served and not listed:
                    report.diff(f"{label} variant {name} not-in-catalog",
                                f"the index serves jax-{name}-plugin {rel['text']} (Linux x86_64); the catalog "
                                f"lists variants {', '.join(rel['variants']) or 'none'}")
                elif served:
                    check_python(report, f"{label} variant {name}", rel, prel, plugin.newest_py())
        else:
            if not release.linux_x86_64:
                report.diff(f"{label} linux-x86_64 not-served",
                            f"the index serves {framework} {rel['text']} but no Linux x86_64 wheel of it")
                continue
            check_python(report, label, rel, release, newest)

    if framework == "torch" and torch_variants is not None:
        report.checked_kinds.add("variant")
        names = sorted({n for rel in catalog for n in rel["variants"]}, key=lambda n: (len(n), n))
        for rel in catalog:
            v = rel["version"]
            label = f"torch {v.public}"
            for name in names:
                vindex = torch_variants.get(name)
                prel = vindex.by_local.get((v.key, name)) if vindex else None
                served = prel is not None and prel.linux_x86_64
                listed = name in rel["variants"]
                if name == rel["default"]:
                    continue  # the plain index's wheel; checked above
                if listed and not served:
                    report.diff(f"{label} variant {name} not-served",
                                f"catalog variant {name}: its variant index serves no torch {v.public}+{name} "
                                f"Linux x86_64 wheel")
                elif served and not listed:
                    report.diff(f"{label} variant {name} not-in-catalog",
                                f"its variant index serves torch {v.public}+{name} (Linux x86_64); the catalog "
                                f"lists variants {', '.join(rel['variants'])}")

    # per-release summary of what the index serves (for reading the differences)
    lines = []  # consecutive releases with the same summary share a line
    for rel in catalog:
        if framework == "jax":
            src = projects["jaxlib"].get(rel["version"])
            src_newest = projects["jaxlib"].newest_py()
        else:
            src, src_newest = main.get(rel["version"]), newest
        served = describe_py(src, src_newest) if src is not None and src.linux_x86_64 else "-"
        summary = (f"catalog {rel['py_min'][0]}.{rel['py_min'][1]}..{rel['py_max'][0]}.{rel['py_max'][1]}, "
                   f"index {served}")
        if lines and lines[-1][1] == summary:
            lines[-1][0].append(rel["version"].public)
        else:
            lines.append(([rel["version"].public], summary))
    report.release_lines = [f"{' '.join(vs)}: {summary}" for vs, summary in lines]


# ----------------------------------------------------------------------------------------------------------------

def main():
    root = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else Path(__file__).resolve().parents[2]
    try:
        catalogs = {fw: load_catalog(root, fw) for fw in FRAMEWORKS}
    except (OSError, yaml.YAMLError, KeyError, TypeError, ValueError) as e:
        print(f"catalog_diff: cannot read the catalog under {root}/recipes/catalog: {e}")
        return 2
    acks, ack_section = load_acks(root)

    config = pip_config()
    index = config.get("index-url")
    origin = ("PIP_INDEX_URL" if os.environ.get("PIP_INDEX_URL") else "pip configuration") if index else None
    if not index:
        index = pip_default_index()
        origin = "pip's default"
    if not index:
        print("catalog_diff: SKIP: no package index configured (PIP_INDEX_URL, pip configuration) and pip is not "
              "available to tell its default index")
        return SKIP
    template = os.environ.get("GPUENV_TORCH_INDEX", "").strip()
    if template and "{variant}" not in template:
        print(f"catalog_diff: GPUENV_TORCH_INDEX must contain {{variant}}: {redact(template)}")
        return 2

    client = Client(config)
    names = ["torch", "tensorflow", "jax", "jaxlib", "vllm", "sglang"]
    pin_names = pin_project_names(catalogs)
    names += sorted({f"jax-{n}-plugin" for rel in catalogs["jax"] for n in rel["variants"]
                     if re.fullmatch(r"cuda\d+", n)})
    torch_variant_names = sorted({n for rel in catalogs["torch"] for n in rel["variants"]}, key=lambda n: (len(n), n))

    started = time.monotonic()
    projects, errors = {}, []
    torch_variants = {} if template else None
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        jobs = {pool.submit(client.project, index, n): ("index", n) for n in names}
        for n in pin_names:
            jobs[pool.submit(client.project, index, n)] = ("pin", n)
        if template:
            for n in torch_variant_names:
                jobs[pool.submit(client.project, template.replace("{variant}", n), "torch")] = ("variant", n)
        for job in concurrent.futures.as_completed(jobs):
            kind, n = jobs[job]
            try:
                result = job.result()
            except FetchError as e:
                errors.append((kind, n, str(e)))
                continue
            if kind == "index":
                projects[n] = result
            elif kind == "pin":
                projects["pin:" + _dist_norm(n)] = result
            else:
                torch_variants[n] = result
    elapsed = time.monotonic() - started

    print(f"package index: {redact(index)} ({origin}); CA bundle: {client.cafile or 'system default'}")
    index_errors = [e for e in errors if e[0] in ("index", "pin")]
    if index_errors and not projects:
        print("catalog_diff: SKIP: the package index is not reachable:")
        for _, n, msg in sorted(index_errors):
            print(f"  {n}: {msg}")
        return SKIP
    incomplete = False
    for kind, n, msg in sorted(errors):
        where = "package index" if kind in ("index", "pin") else f"torch variant index {n}"
        print(f"ERROR: {where}: {msg}")
        incomplete = True
    print(f"fetched {len(projects)} projects from the package index"
          + (f" and {len(torch_variants)} torch variant indexes" if torch_variants is not None else "")
          + f" in {elapsed:.1f} s")
    if torch_variants is not None:
        absent = [n for n, p in torch_variants.items() if not p.found]
        print(f"torch variant indexes: {redact(template)} ({', '.join(torch_variant_names)})"
              + (f"; no torch project on: {', '.join(sorted(absent))}" if absent else ""))
    else:
        print("torch variant indexes: not checked (set GPUENV_TORCH_INDEX=.../{variant})")
    print("acknowledged differences: " + (f"{len(acks)} in docs/catalog.md \"{ACK_HEADING[3:]}\"" if ack_section
                                          else f"none (docs/catalog.md has no \"{ACK_HEADING}\" section)"))

    reports = []
    for fw in FRAMEWORKS:
        report = Report(fw)
        needed = [fw] + (["jaxlib"] + [n for n in names if n.startswith("jax-")] if fw == "jax" else [])
        if any(n not in projects for n in needed):
            report.info.append("not compared: " + ", ".join(n for n in needed if n not in projects)
                               + " could not be fetched")
            report.release_lines = []
            reports.append(report)
            continue
        tv = torch_variants if fw == "torch" and torch_variants is not None and \
            all(n in torch_variants for n in torch_variant_names) else None
        if fw == "torch" and torch_variants is not None and tv is None:
            report.info.append("torch variants: not compared (a variant index could not be fetched)")
        compare(fw, catalogs[fw], projects, report, tv)
        compare_aarch64(fw, catalogs[fw], projects, report, client.requires_dist)
        if fw in PINNING:
            compare_pins(fw, catalogs[fw], projects, report, client.requires_dist)
        reports.append(report)

    unacked, seen = [], set()
    for report in reports:
        print()
        print(f"== {report.framework} ==")
        for line in report.info:
            print(f"  {line}")
        if report.release_lines:
            print("  python per catalog release (catalog range, CPython of the index's Linux x86_64 "
                  + ("jaxlib " if report.framework == "jax" else "") + "wheels):")
            for line in report.release_lines:
                print(f"    {line}")
        if report.framework == "tensorflow":
            print("  variants: build configurations, not separate index projects (not compared)")
        print(f"  index releases recorded in the catalog: {report.matched}")
        print(f"  covered by the series rule ({len(report.covered)}): {compact(report.covered) or '-'}")
        if report.unrecorded:
            print(f"  between recorded releases, not recorded (the resolver refuses them) ({len(report.unrecorded)}): "
                  f"{' '.join(v.public for v in sorted(report.unrecorded, key=lambda v: v.sort_key()))}")
        if report.older:
            older = sorted(report.older, key=lambda v: v.sort_key())
            print(f"  older than the catalog's oldest release, not compared ({len(older)}): "
                  f"{older[0].public} .. {older[-1].public}")
        fails = [(k, d) for k, d in report.diffs if k not in acks]
        oks = [(k, d) for k, d in report.diffs if k in acks]
        print(f"  differences: {len(report.diffs)} ({len(fails)} unacknowledged, {len(oks)} acknowledged)")
        for key, detail in report.diffs:
            seen.add(key)
            if key in acks:
                print(f"    ok    `{key}`: {detail}\n          acknowledged: {acks[key] or '(no reason given)'}")
            else:
                print(f"    FAIL  `{key}`: {detail}")
                unacked.append(key)

    stale = []
    checked = {r.framework: r.checked_kinds for r in reports}
    for key in acks:
        parts = key.split()
        fw = parts[0] if parts else ""
        kind = "series" if len(parts) > 1 and parts[1] == "series" else \
            ("pin" if "pin" in parts else
             "aarch64" if "aarch64" in parts else
             ("variant" if "variant" in parts and "python" not in parts else
              ("python" if "python" in parts else "release")))
        if key not in seen and kind in checked.get(fw, set()):
            stale.append(key)
    print()
    if stale:
        print(f"acknowledged in docs/catalog.md but not found now ({len(stale)}; remove them?):")
        for key in stale:
            print(f"  - `{key}`")
    empty = [k for k in acks if not acks[k]]
    if empty:
        print("acknowledged without a reason: " + ", ".join(f"`{k}`" for k in empty))
    total = sum(len(r.diffs) for r in reports)
    print(f"summary: {total} difference{'' if total == 1 else 's'}, {len(unacked)} unacknowledged, "
          f"{sum(len(r.covered) for r in reports)} index releases covered by the series rule"
          + ("; comparison incomplete (fetch errors above)" if incomplete else ""))
    if unacked:
        print(f"unacknowledged differences, to fix in the catalog or to add with a reason under "
              f"\"{ACK_HEADING}\" in docs/catalog.md:")
        for key in unacked:
            print(f"- `{key}`")
    return 1 if unacked or incomplete else 0


if __name__ == "__main__":
    sys.exit(main())
