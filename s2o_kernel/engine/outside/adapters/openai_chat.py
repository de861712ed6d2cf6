"""The ``openai`` adapter (SPEC 7.1): any OpenAI-compatible chat-completions server, streamed, with tool calls.

It speaks the chat-completions protocol itself over httpx, the project's HTTP client, so that every byte of a
reply is read under the profile's bounds (SPEC 7.1, 12): the ``openai`` library reads a stream with no bound on
an event, a line or the whole, parses each event whole, and makes its requests with an HTTP client of its own,
which the adapter cannot bound.

A turn is ``POST {url}/chat/completions`` with ``Authorization: Bearer KEY`` (the profile's ``key``; ``unused``
when it has none), the profile's ``model`` and ``max_tokens``, the messages and tools in the chat-completions
shape, ``stream: true`` and ``stream_options.include_usage``, so streamed and whole replies take one code path:
the reply's server-sent events (``data: CHUNK`` lines, ``data: [DONE]`` at the end) give text deltas, joined
(and handed to the stream sink as they arrive when the command asked for ``streamOutput``), tool-call deltas,
joined by their index, and the token counts of the final usage chunk. A server that answers one JSON completion
instead of a stream is read the same way (its message is one delta). A server that sends no usage is counted by
SPEC 7.1's rule (one token per four characters of the text sent and received), so the spend never stays at zero.

Bounds (the profile's ``max_response_bytes``, *B*; :mod:`..bounded`):

* the reply's text and its tool calls' names and arguments together: at most *B* bytes (UTF-8), kept as lists of
  pieces joined once at the end (:class:`Pieces`; never ``str +=``, which is quadratic);
* an event (its data lines together) or a JSON reply: at most *B* bytes, its JSON parsed within the item budget
  and the depth bound; the memory of the text and JSON held at once: at most twice *B*;
* at most :data:`~s2o_kernel.bounds.MAX_TOOL_CALLS` tool calls a turn.

Past them ``llm-too-large``. The client is made per turn and closed after it; the run's time limit bounds the turn
through ``timeout`` (the gateway's own timeout covers a server that drips). Environment variables of the ``openai``
library (``OPENAI_API_KEY``, ``OPENAI_BASE_URL``) are never read: the profile says everything. Failures are
``llm-failed``: a status outside 2xx (with the server's message), a connection failure, a timeout, and an answer
that breaks the protocol (a chunk of the wrong shape, tool arguments that are not a JSON object).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

from ....bounds import JOIN_EVERY, MAX_TEXT, MAX_TOOL_CALLS
from ...errors import S2OError
from ..bounded import ACCEPT_ENCODING, Budget, NotJson, decoded_chunks, loads, read_body, text_memory, width
from ..profiles import LlmProfile
from .base import Turn, TurnRequest, count_tokens, failed

#: ``base_url`` when the profile names no ``url``.
DEFAULT_URL = "https://api.openai.com/v1"
CODE = "llm-too-large"


def wire_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation in the chat-completions request shape (tool calls' arguments as JSON text)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        msg: dict[str, Any] = {"role": m["role"], "content": m.get("content")}
        if m["role"] == "tool":
            msg["tool_call_id"] = m["tool_call_id"]
            msg["content"] = m.get("content") or ""
        if m.get("tool_calls"):
            msg["tool_calls"] = [{"id": c["id"], "type": "function",
                                  "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])}}
                                 for c in m["tool_calls"]]
        out.append(msg)
    return out


def wire_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The offered functions in the chat-completions ``tools`` shape."""
    return [{"type": "function", "function": {"name": t["name"], "description": t.get("description", ""),
                                              "parameters": t["parameters"]}} for t in tools]


class Pieces:
    """Text that arrives in pieces (a reply's text, one tool call's name or arguments), counted against a turn's
    :class:`Reply` as it comes: its bytes against ``max_response_bytes``, its memory against the turn's budget.
    Every :data:`JOIN_EVERY` pieces are joined into one block (a piece of one character still costs an object of
    about 50 bytes), and the blocks once at the end (:meth:`text`), so no text is copied more than twice."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.blocks: list[str] = []
        self.parts: list[str] = []
        self.chars = 0
        self.widest = 1
        self.memory = 0

    def add(self, piece: str) -> None:
        """Append ``piece``; ``llm-too-large`` when the turn's text passes its bytes or its memory."""
        self.reply.count(piece)
        size = width(piece)
        self.reply.budget.take(len(piece) * size, "the model's reply")
        self.memory += len(piece) * size
        self.parts.append(piece)
        self.chars += len(piece)
        self.widest = max(self.widest, size)
        if len(self.parts) >= JOIN_EVERY:
            self.blocks.append("".join(self.parts))
            self.parts = []

    def text(self) -> str:
        """The whole text: joined once its memory (its characters at the widest one's size) is charged; the
        pieces' own is given back, as the joined text takes their place."""
        self.reply.budget.take(self.chars * self.widest, "the model's reply")
        whole = "".join([*self.blocks, *self.parts])
        self.blocks, self.parts = [whole], []
        self.reply.budget.give(self.memory)
        self.memory = self.chars * self.widest
        return whole


class Reply:
    """What one turn has read so far: the text, the tool calls by index, the usage, and the bytes of text and
    tool calls counted against the profile's ``max_response_bytes`` (``budget``)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.budget = Budget(limit, CODE, f"max_response_bytes = {limit}")
        self.size = 0
        self.text = Pieces(self)
        self.calls: dict[int, dict[str, Any]] = {}
        self.usage: dict[str, int | None] | None = None

    def count(self, piece: str) -> None:
        """Count ``piece``'s UTF-8 bytes; ``llm-too-large`` past the limit."""
        self.size += len(piece) if piece.isascii() else len(piece.encode("utf-8", "surrogatepass"))
        if self.size > self.limit:
            raise S2OError(CODE, f"the model's reply (its text and tool calls together) is larger than "
                           f"max_response_bytes = {self.limit} bytes; it was not read further")

    def call(self, index: Any) -> dict[str, Any]:
        """The tool call being streamed at ``index`` (made on first use)."""
        if type(index) is not int or not 0 <= index < MAX_TOOL_CALLS:
            if type(index) is int and index >= MAX_TOOL_CALLS:
                raise S2OError(CODE, f"the model asked for more than {MAX_TOOL_CALLS} tool calls in one turn")
            raise _broke(f"a tool call's index is {str(index)[:40]!r}")
        if index not in self.calls:
            self.calls[index] = {"id": "", "name": Pieces(self), "arguments": Pieces(self)}
        return self.calls[index]


def _broke(what: str) -> S2OError:
    return failed(f"the model server's answer broke the protocol: {what}")


def _take(reply: Reply, delta: Any, request: TurnRequest) -> None:
    """Add one delta (``{"content", "tool_calls"}``; a whole reply's message is one) to ``reply``."""
    if delta is None:
        return
    if type(delta) is not dict:
        raise _broke("a delta is not an object")
    content = delta.get("content")
    if content is not None and type(content) is not str:
        raise _broke("a delta's content is not text")
    if content:
        reply.text.add(content)
        if request.stream is not None:
            request.stream({"type": "text", "text": content, "stream": "llm"})
    calls = delta.get("tool_calls") or []
    if type(calls) is not list:
        raise _broke("a delta's tool_calls is not a list")
    for position, tc in enumerate(calls):
        if type(tc) is not dict:
            raise _broke("a tool call is not an object")
        slot = reply.call(tc.get("index", position))
        if tc.get("id") is not None:
            if type(tc["id"]) is not str:
                raise _broke("a tool call's id is not text")
            reply.count(tc["id"])
            slot["id"] = tc["id"]
        function = tc.get("function")
        if function is None:
            continue
        if type(function) is not dict:
            raise _broke("a tool call's function is not an object")
        for part in ("name", "arguments"):
            piece = function.get(part)
            if piece is not None and type(piece) is not str:
                raise _broke(f"a tool call's {part} is not text")
            if piece:
                slot[part].add(piece)


def _chunk(reply: Reply, chunk: Any, request: TurnRequest) -> None:
    """Add one streamed chunk (``{"choices": [{"delta"}], "usage"}``) to ``reply``."""
    if type(chunk) is not dict:
        raise _broke("a chunk is not an object")
    error = chunk.get("error")
    if error is not None:
        message = error.get("message") if type(error) is dict else error
        raise failed(f"the model server reported an error: {str(message)[:MAX_TEXT]}")
    if type(chunk.get("usage")) is dict:  # its token counts only: the rest of the chunk is dropped with it
        reply.usage = {key: _tokens(chunk["usage"], key) for key in ("prompt_tokens", "completion_tokens")}
    choices = chunk.get("choices") or []
    if type(choices) is not list:
        raise _broke("a chunk's choices is not a list")
    for choice in choices:
        if type(choice) is not dict:
            raise _broke("a choice is not an object")
        _take(reply, choice.get("delta", choice.get("message")), request)


#: The end of a line of a server-sent event stream.
_LINE_END = re.compile(rb"\r\n|\r|\n")


async def _lines(chunks: AsyncIterator[bytes], limit: int) -> AsyncIterator[bytearray]:
    """The lines of a byte stream (ending ``\\n``, ``\\r\\n`` or ``\\r``), each at most ``limit`` bytes
    (``llm-too-large`` past it, before it is whole). Each line is a new ``bytearray`` the caller may keep."""
    held = bytearray()
    after_cr = False
    async for chunk in chunks:
        start = 1 if after_cr and chunk.startswith(b"\n") else 0  # a "\r\n" split between two chunks
        for end in _LINE_END.finditer(chunk, start):
            if len(held) + end.start() - start > limit:
                raise _too_long_event(limit)
            held += memoryview(chunk)[start:end.start()]
            line, held = held, bytearray()
            yield line
            start = end.end()
        after_cr = chunk.endswith(b"\r")
        if len(held) + len(chunk) - start > limit:
            raise _too_long_event(limit)
        held += memoryview(chunk)[start:]
    if held:
        yield held


def _too_long_event(limit: int) -> S2OError:
    return S2OError(CODE, f"an event of the model server's stream is larger than max_response_bytes = {limit} "
                    "bytes; it was not read further")


async def _events(lines: AsyncIterator[bytearray], limit: int) -> AsyncIterator[bytearray]:
    """The data of each server-sent event (its ``data:`` lines joined by newlines), at most ``limit`` bytes. An
    event of one data line is that line, its ``data:`` cut off in place (no copy)."""
    data: bytearray | None = None
    async for line in lines:
        if not line:
            if data is not None:
                yield data
                data = None
            continue
        if not line.startswith(b"data:"):
            continue  # a comment (":"), an event name, an id, a retry: nothing a chunk needs
        del line[:6 if line.startswith(b"data: ") else 5]
        if data is None:
            data = line
            continue
        if len(data) + len(line) + 1 > limit:
            raise _too_long_event(limit)
        data += b"\n"
        data += line
    if data is not None:
        yield data


def _decoded(raw: bytearray, reply: Reply, what: str) -> Any:
    """The JSON of an event's data or a whole reply (``raw``, emptied once decoded), within ``reply``'s budget,
    which gets back what its text and JSON took once it is parsed (the caller handles the value and drops it;
    what it keeps of it is charged as :class:`Pieces`); ``llm-failed`` when it is not JSON."""
    memory = text_memory(raw, "utf-8")
    reply.budget.take(memory, what)
    text = raw.decode("utf-8", "replace")
    raw.clear()
    before = reply.budget.left
    try:
        value = loads(text, reply.budget, what)
    except NotJson:
        raise _broke(f"{what} is not JSON") from None
    reply.budget.give(memory + before - reply.budget.left)
    return value


async def _read(response: Any, reply: Reply, request: TurnRequest) -> None:
    """Read a 2xx reply into ``reply``: server-sent events, or one JSON completion."""
    kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind == "application/json":
        whole = await read_body(response, reply.limit, "llm")
        _chunk(reply, _decoded(whole, reply, "the model server's answer"), request)
        return
    chunks = decoded_chunks(response.aiter_raw(), response.headers.get("content-encoding", ""), "llm")
    async for data in _events(_lines(chunks, reply.limit), reply.limit):
        if data.strip() == b"[DONE]":
            break
        _chunk(reply, _decoded(data, reply, "an event of the model server's stream"), request)


def _status_message(raw: bytearray, limit: int) -> str:
    """The server's message in an error reply: its ``error.message`` when it is JSON, else its text (short)."""
    reply = Reply(limit)
    try:
        value = _decoded(raw, reply, "the model server's error")
    except S2OError:
        return "(its answer could not be read)"
    error = value.get("error") if type(value) is dict else None
    message = error.get("message") if type(error) is dict else error if type(error) is str else None
    return str(message if message is not None else value)[:MAX_TEXT]


def _tool_calls(reply: Reply) -> list[dict[str, Any]]:
    calls = []
    for index in sorted(reply.calls):
        c = reply.calls[index]
        name = c["name"].text()
        text = c["arguments"].text() or "{}"
        try:
            args = loads(text, reply.budget, f"the arguments of the model's call of {name[:40]!r}")
        except NotJson:
            raise failed(f"the model called {name!r} with arguments that are not JSON") from None
        if type(args) is not dict:
            raise failed(f"the model called {name!r} with arguments that are not a JSON object")
        calls.append({"id": c["id"] or f"call_{index}", "name": name, "arguments": args})
    return calls


def _body(profile: LlmProfile, request: TurnRequest) -> dict[str, Any]:
    """The request's JSON body."""
    body: dict[str, Any] = {"model": profile.model, "messages": wire_messages(request.messages), "stream": True,
                            "stream_options": {"include_usage": True}}
    if request.tools:
        body["tools"] = wire_tools(request.tools)
    if profile.max_tokens is not None:
        body["max_tokens"] = profile.max_tokens
    return body


_TLS: list[Any] = []


def _tls() -> Any:
    """The TLS context of every turn's client, made once (it reads the system's certificates: 0.3 s)."""
    if not _TLS:
        import httpx

        _TLS.append(httpx.create_ssl_context())
    return _TLS[0]


def _tokens(usage: dict[str, Any] | None, key: str) -> int | None:
    """The token count ``usage[key]`` when it is a count, else ``None``."""
    value = usage.get(key) if usage is not None else None
    return value if type(value) is int and value >= 0 else None


async def turn(profile: LlmProfile, request: TurnRequest) -> Turn:
    """One streamed chat-completions turn (see the module doc); ``llm-failed`` on any failure, ``llm-too-large``
    past the profile's ``max_response_bytes``."""
    import httpx

    url = (request.url or DEFAULT_URL).rstrip("/") + "/chat/completions"
    headers = {"Authorization": f"Bearer {request.key or 'unused'}", "Accept": "text/event-stream",
               "Accept-Encoding": ACCEPT_ENCODING}
    reply = Reply(profile.max_response_bytes)
    try:
        async with httpx.AsyncClient(timeout=request.timeout, follow_redirects=False, verify=_tls()) as client, \
                client.stream("POST", url, json=_body(profile, request), headers=headers) as response:
            if not 200 <= response.status_code <= 299:
                raw = await read_body(response, profile.max_response_bytes, "llm")
                raise failed(f"the model server answered with status {response.status_code}: "
                             f"{_status_message(raw, profile.max_response_bytes)}")
            await _read(response, reply, request)
    except httpx.TimeoutException:
        raise failed(f"the model server did not answer within {request.timeout:g} s") from None
    except (httpx.HTTPError, httpx.InvalidURL, OSError) as exc:
        raise failed(f"could not reach the model server: {type(exc).__name__}: {exc}") from None
    text = reply.text.text()
    calls = _tool_calls(reply)
    given_in, given_out = _tokens(reply.usage, "prompt_tokens"), _tokens(reply.usage, "completion_tokens")
    if reply.usage is not None:
        return Turn(text, calls, given_in or 0, given_out or 0)
    sent = json.dumps(wire_messages(request.messages))
    return Turn(text, calls, count_tokens(sent), count_tokens(text + json.dumps(calls)))
