"""The ``openai`` adapter (SPEC 7.1): any OpenAI-compatible chat-completions server, streamed, with tool calls.

Built on the official ``openai`` client (``AsyncOpenAI`` with the profile's ``url`` as ``base_url`` and
its ``key`` as ``api_key``; the client speaks HTTP through its own httpx). Every turn is requested
with ``stream: true`` (and ``stream_options.include_usage``), so streamed and whole replies take one
code path: text deltas are joined (and handed to the stream sink as they arrive when the command
asked for ``streamOutput``), tool-call deltas are joined by their index, and the token counts come
from the final usage chunk. A server that sends no usage is counted by SPEC 7.1's rule (one token per
four characters of the text sent and received), so the spend never stays at zero.

The client is made per turn and closed after it (no retries: ``max_retries=0``; the run's time limit
bounds the turn through ``timeout``). Environment variables of the ``openai`` library
(``OPENAI_API_KEY``, ``OPENAI_BASE_URL``) are never read: the profile says everything. Failures are
``llm-failed``: a status outside 2xx (with the server's message), a connection failure, a timeout, and
an answer that breaks the protocol (tool arguments that are not a JSON object).
"""

from __future__ import annotations

import json
from typing import Any

from ..profiles import LlmProfile
from .base import Turn, TurnRequest, count_tokens, failed

#: ``base_url`` when the profile names no ``url``.
DEFAULT_URL = "https://api.openai.com/v1"


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


def _tool_calls(pending: dict[int, dict[str, str]]) -> list[dict[str, Any]]:
    calls = []
    for index in sorted(pending):
        c = pending[index]
        try:
            args = json.loads(c["arguments"] or "{}")
        except ValueError:
            raise failed(f"the model called {c['name']!r} with arguments that are not JSON") from None
        if type(args) is not dict:
            raise failed(f"the model called {c['name']!r} with arguments that are not a JSON object")
        calls.append({"id": c["id"] or f"call_{index}", "name": c["name"], "arguments": args})
    return calls


async def _stream(client: Any, profile: LlmProfile, request: TurnRequest) -> tuple[str, dict[int, dict[str, str]],
                                                                                    Any]:
    options: dict[str, Any] = {}
    if request.tools:
        options["tools"] = wire_tools(request.tools)
    if profile.max_tokens is not None:
        options["max_tokens"] = profile.max_tokens
    stream = await client.chat.completions.create(
        model=profile.model, messages=wire_messages(request.messages), stream=True,
        stream_options={"include_usage": True}, **options)
    text: list[str] = []
    pending: dict[int, dict[str, str]] = {}
    usage = None
    async for chunk in stream:
        usage = chunk.usage or usage
        for choice in chunk.choices or []:
            delta = choice.delta
            if delta is None:
                continue
            if delta.content:
                text.append(delta.content)
                if request.stream is not None:
                    request.stream({"type": "text", "text": delta.content, "stream": "llm"})
            for tc in delta.tool_calls or []:
                slot = pending.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                slot["id"] = tc.id or slot["id"]
                if tc.function is not None:
                    slot["name"] += tc.function.name or ""
                    slot["arguments"] += tc.function.arguments or ""
    return "".join(text), pending, usage


async def turn(profile: LlmProfile, request: TurnRequest) -> Turn:
    """One streamed chat-completions turn (see the module doc); ``llm-failed`` on any failure."""
    import openai

    client = openai.AsyncOpenAI(api_key=request.key or "unused", base_url=request.url or DEFAULT_URL,
                                timeout=request.timeout, max_retries=0)
    try:
        text, pending, usage = await _stream(client, profile, request)
    except openai.APIStatusError as exc:
        raise failed(f"the model server answered with status {exc.status_code}: {exc.message}") from None
    except openai.APITimeoutError:
        raise failed(f"the model server did not answer within {request.timeout:g} s") from None
    except openai.APIConnectionError as exc:
        raise failed(f"could not reach the model server: {exc.message}") from None
    except openai.OpenAIError as exc:
        raise failed(f"the model server's answer broke the protocol: {type(exc).__name__}") from None
    finally:
        await client.close()
    calls = _tool_calls(pending)
    if usage is not None:
        return Turn(text, calls, int(usage.prompt_tokens or 0), int(usage.completion_tokens or 0))
    sent = json.dumps(wire_messages(request.messages))
    return Turn(text, calls, count_tokens(sent), count_tokens(text + json.dumps(calls)))
