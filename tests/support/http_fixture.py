"""A real HTTP server on 127.0.0.1 for the api tests (issue 9): stdlib ``http.server`` in a thread,
its port chosen by the OS.

Routes (any method):

* ``/json`` → 200, ``application/json`` ``{"method", "path", "query", "body"}`` (the body as text);
* ``/text`` → 200, ``text/plain`` ``hello, world``;
* ``/whoami`` → 200, JSON ``{"auth": <the Authorization header it received>}`` (to check masking);
* ``/status/<N>`` → status N, JSON ``{"error": "status N", "auth": <Authorization>}``;
* ``/slow`` → waits 3 s, then 200;
* ``/big/<N>`` → N bytes of ``x`` with a Content-Length; ``/chunked/<N>`` → the same, chunked, no length.

:attr:`HttpServer.requests` records ``(method, path, headers)`` of every request received.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def _send(self, status: int, body: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, data: Any) -> None:
        self._send(status, json.dumps(data).encode(), "application/json")

    def _serve(self) -> None:
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode("utf-8", errors="replace") if length else ""
        self.server.requests.append((self.command, url.path, dict(self.headers.items()), body))
        parts = url.path.strip("/").split("/")
        auth = self.headers.get("Authorization")
        if parts[0] == "json":
            self._json(200, {"method": self.command, "path": url.path, "query": dict(parse_qsl(url.query)),
                             "body": body, "ctype": self.headers.get("Content-Type")})
        elif parts[0] == "b64auth":  # a server that reflects a credential encoded (base64), past masking
            self._json(200, {"seen": base64.b64encode((auth or "").encode()).decode()})
        elif parts[0] == "text":
            self._send(200, b"hello, world", "text/plain; charset=utf-8")
        elif parts[0] == "whoami":
            self._json(200, {"auth": auth})
        elif parts[0] == "status":
            self._json(int(parts[1]), {"error": f"status {parts[1]}", "auth": auth})
        elif parts[0] == "slow":
            time.sleep(3)
            self._send(200, b"late", "text/plain")
        elif parts[0] == "big":
            self._send(200, b"x" * int(parts[1]), "text/plain")
        elif parts[0] == "chunked":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            left = int(parts[1])
            while left:
                n = min(left, 512)
                self.wfile.write(f"{n:x}\r\n".encode() + b"x" * n + b"\r\n")
                left -= n
            self.wfile.write(b"0\r\n\r\n")
        else:
            self._json(404, {"error": "no such route"})

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    requests: list[tuple[str, str, dict[str, str], str]]

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Quiet: a client that gave up (a timeout test) closes the connection before the answer."""


class HttpServer:
    """The server, started on a free port of 127.0.0.1; :attr:`url` is its base URL."""

    def __init__(self) -> None:
        self.httpd = _Server(("127.0.0.1", 0), _Handler)
        self.httpd.requests = []
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def requests(self) -> list[tuple[str, str, dict[str, str], str]]:
        """Every request received: ``(method, path, headers, body)``."""
        return self.httpd.requests

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)
