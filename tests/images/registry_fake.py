#!/usr/bin/env python3
"""A small in-memory OCI registry with a bearer-token service, for registry client tests.

Usage: registry_fake.py MODE [USER:PASSWORD]  -> prints the port on the first line of stdout, serves until killed.
MODE:
  plain    no authentication
  bearer   /v2/ needs "Authorization: Bearer <token>"; a 401 carries a Bearer challenge naming /token on this
           server. /token hands out tokens ("token" for push scopes, "access_token" otherwise) and, when
           USER:PASSWORD is given, only to a request with those basic credentials.
  alter    like plain, but GET of a blob flips one byte of it
  short    like plain, but GET of a blob serves only its first half (with a matching Content-Length)
  stall    like plain, but GET of a blob sends its first half, then nothing for 60 s
  endless  like plain, but GET of a blob sends it without a Content-Length and then zeros, for ever
  misreport like plain, but the answers to a blob PUT, a mount and a manifest PUT name another digest than the
           one stored in Docker-Content-Digest
Blobs belong to the repositories they were uploaded to or mounted into (from= must hold the blob). Manifests are
kept with the Content-Type they were PUT with. GET /log lists "METHOD PATH" of every request.
"""
import base64, hashlib, itertools, json, re, sys, threading, time
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler

mode = sys.argv[1]
need_creds = sys.argv[2] if len(sys.argv) > 2 else None
blobs, manifests, uploads, tokens = {}, {}, {}, set()
held = set()  # (repository, digest) of every blob a repository holds
log = []
ids = itertools.count(1)  # upload and token ids, never reused
lock = threading.Lock()
port = 0

BLOB = re.compile(r"^/v2/(.+)/blobs/(sha256:[0-9a-f]{64})$")
UPLOAD_START = re.compile(r"^/v2/(.+)/blobs/uploads/$")
UPLOAD = re.compile(r"^/v2/(.+)/blobs/uploads/([0-9a-z]+)$")
MANIFEST = re.compile(r"^/v2/(.+)/manifests/([^/]+)$")


def reported(digest):
    """The digest an answer names: DIGEST, or in misreport mode another one."""
    if mode != "misreport":
        return digest
    return digest[:-1] + ("0" if digest[-1] != "0" else "1")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, code, body=b"", headers=None, head=False):
        self.send_response(code)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def misbehave(self, b):
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        if mode == "stall":
            self.send_header("Content-Length", str(len(b)))
        self.send_header("Connection", "close")
        self.end_headers()
        try:
            if mode == "stall":
                self.wfile.write(b[: len(b) // 2])
                self.wfile.flush()
                time.sleep(60)
            else:
                self.wfile.write(b)
                while True:
                    self.wfile.write(b"\0" * 65536)
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True

    def error(self, code, err, msg):
        body = json.dumps({"errors": [{"code": err, "message": msg}]}).encode()
        self.reply(code, body, {"Content-Type": "application/json"}, head=self.command == "HEAD")

    def body(self):
        n = int(self.headers.get("Content-Length", "0") or 0)
        return self.rfile.read(n) if n else b""

    def authorized(self, path, query):
        if mode != "bearer":
            return True
        auth = self.headers.get("Authorization", "")
        if auth.startswith("Bearer ") and auth[7:] in tokens:
            return True
        m = re.match(r"^/v2/(.+)/(blobs|manifests)/", path)
        repo = m.group(1) if m else ""
        action = "pull" if self.command in ("GET", "HEAD") else "pull,push"
        challenge = f'Bearer realm="http://127.0.0.1:{port}/token",service="fake-registry"'
        if repo:
            challenge += f',scope="repository:{repo}:{action}"'
        body = json.dumps({"errors": [{"code": "UNAUTHORIZED", "message": "authentication required"}]}).encode()
        self.reply(401, body, {"Content-Type": "application/json", "WWW-Authenticate": challenge}, head=self.command == "HEAD")
        return False

    def token(self, query):
        if need_creds:
            want = "Basic " + base64.b64encode(need_creds.encode()).decode()
            if self.headers.get("Authorization", "") != want:
                return self.error(401, "UNAUTHORIZED", "bad credentials")
        scopes = [v for k, v in query if k == "scope"]
        with lock:
            tok = f"tok-{next(ids)}"
            tokens.add(tok)
        key = "token" if any("push" in s for s in scopes) else "access_token"
        self.reply(200, json.dumps({key: tok, "scopes": scopes}).encode(), {"Content-Type": "application/json"})

    def handle_any(self):
        path, _, qs = self.path.partition("?")
        query = [tuple(p.split("=", 1)) if "=" in p else (p, "") for p in qs.split("&") if p]
        from urllib.parse import unquote
        query = [(k, unquote(v)) for k, v in query]
        q = dict(query)
        data = self.body()
        with lock:
            log.append(f"{self.command} {path}")
        if path == "/log":
            return self.reply(200, "\n".join(log).encode())
        if path == "/token":
            return self.token(query)
        if not self.authorized(path, q):
            return
        if path == "/v2/" or path == "/v2":
            return self.reply(200, b"{}")
        m = BLOB.match(path)
        if m and self.command in ("GET", "HEAD"):
            digest = m.group(2)
            if (m.group(1), digest) not in held:
                return self.error(404, "BLOB_UNKNOWN", "blob unknown to registry")
            b = blobs[digest]
            if self.command == "GET" and mode == "alter":
                b = bytes([b[0] ^ 0xFF]) + b[1:]
            if self.command == "GET" and mode == "short":
                b = b[: len(b) // 2]
            if self.command == "GET" and mode in ("stall", "endless"):
                return self.misbehave(b)
            return self.reply(200, b, {"Docker-Content-Digest": digest, "Content-Type": "application/octet-stream"}, head=self.command == "HEAD")
        m = UPLOAD_START.match(path)
        if m and self.command == "POST":
            repo = m.group(1)
            if "mount" in q and (q.get("from"), q["mount"]) in held:
                with lock:
                    held.add((repo, q["mount"]))
                return self.reply(201, b"", {"Docker-Content-Digest": reported(q["mount"]), "Location": f"/v2/{repo}/blobs/{q['mount']}"})
            with lock:
                uid = f"u{next(ids)}"
                uploads[uid] = bytearray()
            return self.reply(202, b"", {"Location": f"/v2/{repo}/blobs/uploads/{uid}", "Range": "0-0"})
        m = UPLOAD.match(path)
        if m and m.group(2) in uploads:
            repo, uid = m.group(1), m.group(2)
            buf = uploads[uid]
            if self.command == "PATCH":
                buf += data
                return self.reply(202, b"", {"Location": f"/v2/{repo}/blobs/uploads/{uid}", "Range": f"0-{len(buf) - 1}"})
            if self.command == "PUT":
                buf += data
                with lock:
                    uploads.pop(uid, None)
                digest = "sha256:" + hashlib.sha256(buf).hexdigest()
                if digest != q.get("digest"):
                    return self.error(400, "DIGEST_INVALID", "provided digest did not match uploaded content")
                with lock:
                    blobs[digest] = bytes(buf)
                    held.add((repo, digest))
                return self.reply(201, b"", {"Docker-Content-Digest": reported(digest), "Location": f"/v2/{repo}/blobs/{digest}"})
        m = MANIFEST.match(path)
        if m:
            repo, ref = m.group(1), m.group(2)
            if self.command == "PUT":
                digest = "sha256:" + hashlib.sha256(data).hexdigest()
                ct = self.headers.get("Content-Type", "")
                manifests[(repo, ref)] = (data, ct)
                manifests[(repo, digest)] = (data, ct)
                return self.reply(201, b"", {"Docker-Content-Digest": reported(digest), "Location": f"/v2/{repo}/manifests/{digest}"})
            if self.command in ("GET", "HEAD"):
                if (repo, ref) not in manifests:
                    return self.error(404, "MANIFEST_UNKNOWN", "manifest unknown")
                data, ct = manifests[(repo, ref)]
                digest = "sha256:" + hashlib.sha256(data).hexdigest()
                return self.reply(200, data, {"Content-Type": ct, "Docker-Content-Digest": digest}, head=self.command == "HEAD")
        return self.error(404, "NAME_UNKNOWN", "no route " + self.command + " " + path)

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = handle_any


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
port = server.server_address[1]
print(port, flush=True)
server.serve_forever()
