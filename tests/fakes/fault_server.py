#!/usr/bin/env python3
"""A loopback HTTP server for fetcher tests that serves files from a directory and injects faults.

Usage: fault_server.py DIR [QUERY] -> prints the port on the first line of stdout, then serves until killed.
QUERY (e.g. "fault=status=503&retry_after=100000") applies to every request that has no query of its own, for
clients whose URLs the test does not choose (a registry client).
GET /PATH?fault=KIND&times=N serves DIR/PATH, with the fault applied to the first N requests of that URL:
  status=CODE   answer CODE (e.g. 503, 429 with Retry-After: 1, 404); retry_after=S sends Retry-After: S
  hang          send the headers, then nothing for 30 s (a stall after the headers)
  trickle       send the body at rate=B bytes a second (default 16), in ten pieces a second
  drop          send headers and half the body, then close the connection
  truncate      like drop, but announce the full Content-Length (a truncated body)
  stall         send half the body, then stop sending for 30 s
  alter         flip one byte of the body
  slow          send the body in small pieces with pauses
Range requests (bytes=N-) are honoured unless noranges=1. /log returns the requests seen, one per line.
A directory is answered with its index.json when the Accept header asks for JSON, else its index.html.
"""
import os, sys, threading, time, urllib.parse
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler

root = sys.argv[1]
default_query = sys.argv[2] if len(sys.argv) > 2 else ""
counts = {}
log = []
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        q = dict(urllib.parse.parse_qsl(url.query or default_query))
        with lock:
            log.append(f"{self.path} range={self.headers.get('Range', '')}")
            n = counts.get(self.path, 0)
            counts[self.path] = n + 1
        if url.path == "/log":
            body = "\n".join(log).encode()
            return self.send(200, body)
        fault = q.get("fault", "")
        active = fault and n < int(q.get("times", "1"))
        if active and fault.startswith("status="):
            code = int(fault.split("=")[1])
            self.send_response(code)
            if "retry_after" in q:
                self.send_header("Retry-After", q["retry_after"])
            elif code == 429:
                self.send_header("Retry-After", "1")
            self.send_header("Content-Length", "5")
            self.end_headers()
            self.wfile.write(b"error")
            return
        path = os.path.join(root, url.path.lstrip("/"))
        if os.path.isdir(path):  # a simple-index project page: index.json (PEP 691) or index.html
            accept = self.headers.get("Accept", "")
            json_page = os.path.join(path, "index.json")
            path = json_page if "json" in accept and os.path.isfile(json_page) else os.path.join(path, "index.html")
        if not os.path.isfile(path):
            return self.send(404, b"not found")
        data = open(path, "rb").read()
        start, end, ranged = 0, len(data) - 1, False
        rng = self.headers.get("Range", "")
        if rng.startswith("bytes=") and q.get("noranges") != "1":
            first, _, last = rng[6:].partition("-")
            start, ranged = int(first), True
            if last:
                end = min(int(last), len(data) - 1)
            if start >= len(data):
                return self.send(416, b"")
        body = data[start:end + 1]
        self.send_response(206 if ranged else 200)
        if ranged:
            self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        half = len(body) // 2
        if active and fault in ("drop", "truncate"):
            self.wfile.write(body[:half])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)
            return
        if active and fault == "hang":
            self.wfile.flush()
            time.sleep(30)
            return
        if active and fault == "trickle":
            piece = max(1, int(q.get("rate", "16")) // 10)
            for i in range(0, len(body), piece):
                self.wfile.write(body[i:i + piece])
                self.wfile.flush()
                time.sleep(0.1)
            return
        if active and fault == "stall":
            self.wfile.write(body[:half])
            self.wfile.flush()
            time.sleep(30)
            return
        if active and fault == "alter" and body:
            body = bytes([body[0] ^ 0xFF]) + body[1:]
        if active and fault == "slow":
            for i in range(0, len(body), 1024):
                self.wfile.write(body[i:i + 1024])
                self.wfile.flush()
                time.sleep(0.001)
            return
        self.wfile.write(body)

    def send(self, code, body):
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass  # clients that give up on a faulty answer are expected here


server = Server(("127.0.0.1", 0), Handler)
server.daemon_threads = True
print(server.server_address[1], flush=True)
server.serve_forever()
