"""One model turn through an LLM profile (SPEC 7.1): the adapters by name, prices, the gateway's handler.

The ``llm`` command (:mod:`..commands.llm`) runs its tool loop in the run; each model turn is one
outside call of kind ``llm`` whose ``fields`` are JSON checked here (they may come from the worker,
which is not trusted):

* ``messages``: the conversation in the chat-completions shape, each ``{"role": "system" | "user" |
  "assistant" | "tool", "content": TEXT | null}``; an assistant message may carry ``tool_calls``
  (``[{"id", "name", "arguments": OBJECT}]``), a tool message its ``tool_call_id``;
* ``tools``: the functions offered, each ``{"name", "description", "parameters": JSON-SCHEMA}``;
* ``stream``: whether text chunks go to the call's stream sink as they arrive.

:func:`handle` (the gateway's ``HANDLERS["llm"]``) picks the adapter named by the profile
(:data:`ADAPTERS`: ``scripted`` and ``openai``), runs one turn and answers ``{"text", "tool_calls",
"input_tokens", "output_tokens", "cost"}``; ``cost`` is in US dollars: input tokens ×
``price_input`` / 10⁶ + output tokens × ``price_output`` / 10⁶ (:func:`price`). A model server that
refuses or fails, or an answer that breaks the protocol, is ``llm-failed``.
"""

from __future__ import annotations

from typing import Any

from ..errors import S2OError
from .adapters import openai_chat, scripted
from .adapters.base import Adapter, TurnRequest, failed
from .call import OutsideCall, StreamFn
from .profiles import LlmProfile

ROLES = frozenset({"system", "user", "assistant", "tool"})


def dollars_text(amount: float) -> str:
    """US dollars for a message: ``$0.0021``, ``$0.5``, ``$0`` (at most six decimals)."""
    return "$" + (f"{amount:.6f}".rstrip("0").rstrip(".") or "0")


def cost_limit_error(spend: float, bound: float, name: str, path: str | None) -> S2OError:
    """The ``cost-limit`` error of a run whose LLM spend (US dollars) passed ``bound``, the limit ``name``
    (``limits.llm_cost`` or ``bounds.cost``); raised by the run, and by the worker's parent, which counts
    the spend itself (SPEC 7.1)."""
    return S2OError("cost-limit", f"the run's LLM spend {dollars_text(spend)} passed the cost limit "
                    f"({name} = {dollars_text(bound)})", path=path, details={"spend": spend, "bound": bound})


def price(profile: LlmProfile, input_tokens: int, output_tokens: int) -> float:
    """The price of a turn in US dollars (the profile's prices are per million tokens, SPEC 7.1)."""
    return (input_tokens * profile.price_input + output_tokens * profile.price_output) / 1e6


def _check_message(m: Any, where: str) -> dict[str, Any]:
    if type(m) is not dict or m.get("role") not in ROLES:
        raise failed(f"{where} is not a chat message with a role")
    content = m.get("content")
    if content is not None and type(content) is not str:
        raise failed(f"{where}.content is not text")
    out: dict[str, Any] = {"role": m["role"], "content": content}
    if m["role"] == "tool":
        if type(m.get("tool_call_id")) is not str:
            raise failed(f"{where} is a tool message without its tool_call_id")
        out["tool_call_id"] = m["tool_call_id"]
    calls = m.get("tool_calls")
    if calls:
        if m["role"] != "assistant" or type(calls) is not list:
            raise failed(f"{where}.tool_calls is not a list of an assistant message")
        for i, c in enumerate(calls):
            if type(c) is not dict or type(c.get("id")) is not str or type(c.get("name")) is not str \
                    or type(c.get("arguments")) is not dict:
                raise failed(f"{where}.tool_calls[{i}] is not {{id, name, arguments}}")
        out["tool_calls"] = [{"id": c["id"], "name": c["name"], "arguments": c["arguments"]} for c in calls]
    return out


def check_fields(fields: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]], bool]:
    """``(messages, tools, stream)`` of an ``llm`` call's fields (see the module doc); ``llm-failed``
    for any other shape (the fields may come from an untrusted worker)."""
    if type(fields) is not dict:
        raise failed("an llm call's fields are an object")
    raw, tools, stream = fields.get("messages"), fields.get("tools", []), fields.get("stream", False)
    if type(raw) is not list or not raw:
        raise failed("an llm call needs a non-empty list of messages")
    messages = [_check_message(m, f"messages[{i}]") for i, m in enumerate(raw)]
    if type(tools) is not list or type(stream) is not bool:
        raise failed("an llm call's tools are a list and its stream a bool")
    for i, t in enumerate(tools):
        if type(t) is not dict or type(t.get("name")) is not str or type(t.get("parameters")) is not dict:
            raise failed(f"tools[{i}] is not {{name, description, parameters}}")
    return messages, tools, stream


#: Adapter name → adapter (SPEC 7.1: ``scripted`` offline and deterministic, ``openai`` any
#: OpenAI-compatible chat-completions server). The ``openai`` adapter imports its client at its first turn,
#: so nothing heavy loads at import.
ADAPTERS: dict[str, Adapter] = {"scripted": scripted.turn, "openai": openai_chat.turn}
#: Adapters that call no server: their profile's ``url`` and ``key`` are never evaluated (a replay's stand-in
#: secret in them is never refused, since nothing is sent).
OFFLINE_ADAPTERS = frozenset({"scripted"})


async def run_turn(profile: LlmProfile, request: TurnRequest) -> dict[str, Any]:
    """One turn through ``profile``'s adapter, as the JSON an ``llm`` call answers (see the module doc)."""
    turn = await ADAPTERS[profile.adapter](profile, request)
    return {"text": turn.text, "tool_calls": turn.tool_calls, "input_tokens": turn.input_tokens,
            "output_tokens": turn.output_tokens, "cost": price(profile, turn.input_tokens, turn.output_tokens)}


class MaskedStream:
    """A stream sink that masks sensitive texts (``masker.texts``: secrets, evaluated credentials) in
    streamed text even when one arrives split over several chunks: the text is masked, then the longest
    tail that could still begin a sensitive text is held back until the next chunk (or :meth:`flush`)."""

    def __init__(self, masker: Any, sink: StreamFn) -> None:
        self.masker, self.sink, self.pending = masker, sink, ""

    def _held(self, text: str) -> int:
        longest = 0
        for secret in self.masker.texts:
            for n in range(min(len(secret) - 1, len(text)), longest, -1):
                if text.endswith(secret[:n]):
                    longest = n
                    break
        return longest

    def __call__(self, part: dict[str, Any]) -> None:
        text = self.masker.text(self.pending + str(part.get("text", "")))
        cut = len(text) - self._held(text)
        self.pending = text[cut:]
        if cut:
            self.sink({**part, "text": text[:cut]})

    def flush(self) -> None:
        """Send what is held back (the turn is over: it began no sensitive text)."""
        if self.pending:
            self.sink({"type": "text", "text": self.pending, "stream": "llm"})
            self.pending = ""


async def handle(gateway: Any, profile: LlmProfile, request: OutsideCall, on_stream: StreamFn | None) -> Any:
    """The gateway's handler for kind ``llm`` (:data:`~.gateway.HANDLERS`): checks the fields, takes the
    profile's ``url`` and ``key`` as the gateway evaluated them (dynamic strings that may read secrets;
    the gateway masks them in whatever comes back), and runs one turn."""
    messages, tools, stream = check_fields(request.fields)
    credentials = {} if profile.adapter in OFFLINE_ADAPTERS else gateway.credentials("llm", request.profile, profile)
    url, key = credentials.get("url"), credentials.get("key")
    sink = MaskedStream(gateway.masker, on_stream) if stream and on_stream is not None else None
    turn = TurnRequest(messages, tools, sink, request.timeout,
                       url if isinstance(url, str) else None, key if isinstance(key, str) else None)
    try:
        answer = await run_turn(profile, turn)
    except S2OError as exc:
        raise exc.with_context(path=request.path) from None
    if sink is not None:
        sink.flush()
    return answer
