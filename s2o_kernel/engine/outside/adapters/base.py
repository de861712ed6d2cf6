"""The LLM adapter interface (SPEC 7.1): what an adapter is given for one model turn and what it answers.

Each adapter module of this package (:mod:`.scripted`, :mod:`.openai_chat`) has ``turn(profile, request)``,
an :data:`Adapter`; :data:`..llm.ADAPTERS` maps a profile's ``adapter`` to it, and :mod:`..llm` checks the
call's fields and prices the turn. This module imports no adapter and nothing of :mod:`..llm`.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ...errors import S2OError
from ..call import StreamFn
from ..profiles import LlmProfile

#: One tool call a model asked for: ``{"id": TEXT, "name": TEXT, "arguments": OBJECT}``.
ToolCall = dict[str, Any]


@dataclass
class Turn:
    """What one model turn gave: ``text`` (may be empty), ``tool_calls`` and the tokens counted."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True)
class TurnRequest:
    """One turn to make: the checked ``messages`` and ``tools``, ``stream`` (a sink for text chunks, or
    ``None``), ``timeout`` in seconds, and the profile's evaluated ``url`` and ``key`` (``None`` when unset;
    the key is a secret: never put it in a message)."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    stream: StreamFn | None
    timeout: float
    url: str | None = None
    key: str | None = None


#: An adapter: makes one turn for a profile. Raises ``S2OError`` ``llm-failed``.
Adapter = Callable[[LlmProfile, TurnRequest], Awaitable[Turn]]


def count_tokens(text: str) -> int:
    """Tokens of ``text`` by SPEC 7.1's rule for the scripted adapter: one per four characters, rounded up."""
    return math.ceil(len(text) / 4)


def failed(message: str, path: str | None = None) -> S2OError:
    """An ``llm-failed`` error."""
    return S2OError("llm-failed", message, path=path)
