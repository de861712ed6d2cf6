"""The ``scripted`` adapter (SPEC 7.1): offline and deterministic, for teaching and tests.

The profile's ``script`` is a list of turns, each ``{"text": …}`` or ``{"call": FUNCTION, "args": {…}}``
(or both), optionally with ``input_tokens`` / ``output_tokens``. How the script advances: the turn
played is the one at index *n* modulo the script's length, where *n* is the number of assistant
messages already in the conversation (the messages the call carries, which the conversation keeps
across cells). So a script ``[call, text]`` answers every ``llm`` command with a tool call and then
a text, again and again; ``%reset`` (which clears the conversation) starts it over. The script wraps
instead of failing at its end, so a notebook cell can be run again. An empty script echoes the last
user message (``You said: …``).

Tokens not given are counted from the text (one per four characters, rounded up): input tokens from
the text of every message sent (contents and tool calls' arguments as JSON), output tokens from the
turn's text and its call (name and arguments as JSON). With ``stream`` the text goes to the sink a
word at a time (each word with the spaces after it).
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..profiles import LlmProfile
from .base import Turn, TurnRequest, count_tokens

_WORDS = re.compile(r"\s*\S+\s*|\s+")


def _message_text(messages: list[dict[str, Any]]) -> str:
    parts: list[str] = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, str):
            parts.append(content)
        for call in m.get("tool_calls") or []:
            parts.append(call["name"] + json.dumps(call["arguments"], sort_keys=True))
    return "".join(parts)


async def turn(profile: LlmProfile, request: TurnRequest) -> Turn:
    """Play the script's next turn for the conversation in ``request.messages`` (see the module doc)."""
    messages = request.messages
    calls: list[dict[str, Any]] = []
    given_in: int | None = None
    given_out: int | None = None
    if not profile.script:
        last = next((m.get("content") or "" for m in reversed(messages) if m["role"] == "user"), "")
        step_text = f"You said: {last}"
    else:
        n = sum(1 for m in messages if m["role"] == "assistant")
        step = profile.script[n % len(profile.script)]
        step_text = step.text or ""
        if step.call is not None:
            calls.append({"id": f"call_{n}", "name": step.call, "arguments": dict(step.args)})
        given_in, given_out = step.input_tokens, step.output_tokens
    if request.stream is not None:
        for word in _WORDS.findall(step_text):
            request.stream({"type": "text", "text": word, "stream": "llm"})
    out_text = step_text + "".join(c["name"] + json.dumps(c["arguments"], sort_keys=True) for c in calls)
    return Turn(
        text=step_text,
        tool_calls=calls,
        input_tokens=given_in if given_in is not None else count_tokens(_message_text(messages)),
        output_tokens=given_out if given_out is not None else count_tokens(out_text),
    )
