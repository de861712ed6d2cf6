"""A fake OpenAI-compatible chat-completions server on 127.0.0.1, for the ``openai`` adapter's tests.

A real HTTP server (``http.server`` in a thread, port chosen by the OS) that answers
``POST /v1/chat/completions`` with the next reply the test queued, streamed as server-sent events
(``data: {chunk}`` lines and ``data: [DONE]``) when the request asks for ``stream``, else one JSON
body. Each reply is a dict: ``{"text": …}`` (streamed a word at a time), ``{"calls": [(name, args),
…]}`` (tool calls, their arguments streamed in two pieces), optional ``"usage": (prompt, completion)``
(omitted: no usage chunk), or ``{"status": 500, "body": …}`` for an error. Every request is recorded
(``requests``: headers and JSON body), so a test can check what the server received.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_WORDS = re.compile(r"\S+\s*|\s+")


def _chunk(delta: dict[str, Any], finish: str | None = None, usage: Any = None) -> dict[str, Any]:
    return {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": "fake",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}] if delta is not None else [],
            "usage": usage}


def _chunks(reply: dict[str, Any]) -> list[dict[str, Any]]:
    out = [_chunk({"role": "assistant", "content": ""})]
    for word in _WORDS.findall(reply.get("text", "")):
        out.append(_chunk({"content": word}))
    for i, (name, args) in enumerate(reply.get("calls", [])):
        text = json.dumps(args)
        half = len(text) // 2
        out.append(_chunk({"tool_calls": [{"index": i, "id": f"call_{i}", "type": "function",
                                           "function": {"name": name, "arguments": text[:half]}}]}))
        out.append(_chunk({"tool_calls": [{"index": i, "function": {"arguments": text[half:]}}]}))
    out.append(_chunk({}, "tool_calls" if reply.get("calls") else "stop"))
    if "usage" in reply:
        p, c = reply["usage"]
        out.append(_chunk(None, usage={"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}))
    return out


class FakeLLM:
    """The server: ``url`` (``http://127.0.0.1:PORT/v1``), ``replies`` to queue, ``requests`` received."""

    def __init__(self) -> None:
        self.replies: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
                fake.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                reply = fake.replies.pop(0) if fake.replies else {"text": "(no reply queued)"}
                if "status" in reply:
                    self._send(reply["status"], "application/json",
                               json.dumps({"error": {"message": reply.get("body", "failed"), "type": "server_error"}}))
                    return
                if not body.get("stream"):
                    message: dict[str, Any] = {"role": "assistant", "content": reply.get("text")}
                    self._send(200, "application/json", json.dumps({
                        "id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": "fake",
                        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}))
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for chunk in _chunks(reply):
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

            def _send(self, status: int, kind: str, text: str) -> None:
                data = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The base URL an ``openai`` profile names."""
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> FakeLLM:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)
