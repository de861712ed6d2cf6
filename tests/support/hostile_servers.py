"""Hostile servers on 127.0.0.1 for the kernel-process tests (issue 30): an HTTP API and an OpenAI-compatible
chat-completions server, each serving a table of hostile answers. Real servers (``http.server`` in threads, a
port the OS chooses), run by the test's process, while the calls are made and measured in another
(``call_meter.py``), so that what the servers hold never counts as the kernel's.

:class:`HostileServer` answers ``/<name>`` (any method) with ``routes[name](handler)``; with ``by_model=True``
it answers ``POST …/chat/completions`` with ``routes[model]`` of the request's ``model``. The answers are built
with :func:`whole` (a body with its length), :func:`chunked` (pieces sent with chunked framing, optionally
slowly) and :func:`sse` (chat-completion chunks as server-sent events). Every answer stops by itself: a flood
after :data:`FLOOD_MOST` bytes or :data:`FLOOD_SECONDS` seconds, or when the client hangs up.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: A flood stops after this many bytes, ...
FLOOD_MOST = 400 << 20
#: ... or after this many seconds, whichever comes first.
FLOOD_SECONDS = 30.0

Responder = Callable[["_Handler"], None]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def send_response(self, code: int, message: str | None = None) -> None:
        """The status line, and ``Connection: close``: the server closes every connection after one answer, so a
        client must not keep it for the next call (else it may reuse one the server has just closed, and a row
        fails with "Server disconnected without sending a response" for no reason of its own)."""
        super().send_response(code, message)
        self.send_header("Connection", "close")

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.body = self.rfile.read(length) if length else b""
        if self.server.by_model:
            try:
                name = json.loads(self.body).get("model", "")
            except ValueError:
                name = ""
        else:
            name = self.path.strip("/").split("/")[0].split("?")[0]
        route = self.server.routes.get(name)
        if route is None:
            whole(404, "application/json", b'{"error": "no such route"}')(self)
            return
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client hung up: the flood ends
            route(self)
        self.close_connection = True

    do_GET = do_POST = do_PUT = _serve


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    routes: dict[str, Responder]
    by_model: bool

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Quiet: clients hang up on purpose."""


class HostileServer:
    """The server, started on a free port of 127.0.0.1: :attr:`url` is its base URL (``/v1`` added for a
    model server)."""

    def __init__(self, routes: dict[str, Responder], *, by_model: bool = False) -> None:
        self.httpd = _Server(("127.0.0.1", 0), _Handler)
        self.httpd.routes = routes
        self.httpd.by_model = by_model
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}" + ("/v1" if by_model else "")
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


def whole(status: int, ctype: str, body: bytes, headers: dict[str, str] | None = None) -> Responder:
    """An answer of ``status`` whose body is ``body`` with its ``Content-Length`` (unless ``headers`` names one)."""
    def respond(h: _Handler) -> None:
        h.send_response(status)
        h.send_header("Content-Type", ctype)
        sent = {k.lower() for k in (headers or {})}
        for name, value in (headers or {}).items():
            h.send_header(name, value)
        if "content-length" not in sent:
            h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)
    return respond


def chunked(ctype: str, pieces: Callable[[], Iterable[bytes]], *, status: int = 200, delay: float = 0.0,
            headers: dict[str, str] | None = None) -> Responder:
    """An answer whose body is the pieces ``pieces()`` gives, each sent as one chunk, ``delay`` seconds apart;
    stops after :data:`FLOOD_MOST` bytes or :data:`FLOOD_SECONDS` seconds."""
    def respond(h: _Handler) -> None:
        h.send_response(status)
        h.send_header("Content-Type", ctype)
        for name, value in (headers or {}).items():
            h.send_header(name, value)
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        h.wfile.flush()
        sent, until = 0, time.monotonic() + FLOOD_SECONDS
        for piece in pieces():
            if sent > FLOOD_MOST or time.monotonic() > until:
                break
            h.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            h.wfile.flush()
            sent += len(piece)
            if delay:
                time.sleep(delay)
        h.wfile.write(b"0\r\n\r\n")
    return respond


def forever(piece: bytes) -> Callable[[], Iterator[bytes]]:
    """Pieces: ``piece`` again and again (the flood's own bounds stop it)."""
    def pieces() -> Iterator[bytes]:
        while True:
            yield piece
    return pieces


def once(*pieces: bytes) -> Callable[[], Iterator[bytes]]:
    """Pieces: these, once."""
    return lambda: iter(pieces)


def gzip_bomb(size: int) -> bytes:
    """A gzip stream of ``size`` zero bytes (about a two-hundredth of that, compressed)."""
    packer = zlib.compressobj(1, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    block = bytes(1 << 20)
    out = [packer.compress(block) for _ in range(size >> 20)]
    out.append(packer.flush())
    return b"".join(out)


# -- chat completions ---------------------------------------------------------------------------------------

def event(data: Any) -> bytes:
    """One server-sent event whose data is ``data`` as JSON (or as it is, when it is bytes)."""
    text = data if isinstance(data, bytes) else json.dumps(data).encode()
    return b"data: " + text + b"\n\n"


def delta(content: str | None = None, calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A chat-completion chunk with one choice whose delta holds ``content`` and ``calls``."""
    part: dict[str, Any] = {}
    if content is not None:
        part["content"] = content
    if calls is not None:
        part["tool_calls"] = calls
    return {"id": "chatcmpl-hostile", "object": "chat.completion.chunk", "created": 0, "model": "hostile",
            "choices": [{"index": 0, "delta": part, "finish_reason": None}]}


def sse(pieces: Callable[[], Iterable[bytes]], *, delay: float = 0.0, ctype: str = "text/event-stream",
        headers: dict[str, str] | None = None) -> Responder:
    """A streamed chat completion: ``pieces()`` are sent as they are (events made with :func:`event`)."""
    return chunked(ctype, pieces, delay=delay, headers=headers)


def batched(events: Iterable[bytes], size: int = 1 << 16) -> Iterator[bytes]:
    """``events`` joined into pieces of about ``size`` bytes (many events a network write, as a fast server
    sends them)."""
    held: list[bytes] = []
    count = 0
    for item in events:
        held.append(item)
        count += len(item)
        if count >= size:
            yield b"".join(held)
            held, count = [], 0
    if held:
        yield b"".join(held)
