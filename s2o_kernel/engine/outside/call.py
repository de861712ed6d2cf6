"""The shape of one outside call and of whatever serves it (SPEC 7.1).

:class:`OutsideCall` is plain JSON-ready data, so the same call crosses the worker's pipe unchanged
(:meth:`OutsideCall.to_json` / :meth:`OutsideCall.from_json`). :class:`Outside` is what a session
holds to serve calls; it is a protocol so that the in-process gateway and the worker's forwarder are
interchangeable.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..errors import S2OError
from ..run.scopes import Secret, SecretText, placed

#: Kinds of outside call, one per SPEC 7 command that needs the outside world.
KINDS = frozenset({"api", "db", "llm", "ask"})

#: HTTP methods an ``api`` command may use.
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")

#: Codes of a failed outside call: unhandled, they end the run with result code ``callFailed`` (SPEC 7.1).
CALL_FAILED_CODES = frozenset({"unknown-profile", "api-status", "api-failed", "api-timeout", "api-too-large",
                               "db-failed", "db-read-only", "db-too-large", "llm-failed", "llm-too-large",
                               "replay-miss", "replay-exhausted", "cassette-secret", "cassette", "replay-mode"})

#: One ``ask`` input as the fragment declared it, evaluated: ``{"name", "type", "label", "options",
#: "default"}`` (SPEC 7.1; types ``text``, ``number``, ``bool``, ``password``, ``chooseOne``,
#: ``chooseMany``).
Question = dict[str, Any]

#: Asks a person: given the message and the questions, returns the answers (input name → value), or
#: ``None`` when nobody can answer (no stdin: nbclient, nbval, papermill). Set by the kernel per cell.
AnswerFn = Callable[[str, list[Question]], "dict[str, Any] | None"]

#: Receives a streamed output part (``{"type": "text", "text": …}``) while a call runs (``llm`` with
#: ``streamOutput``).
StreamFn = Callable[[dict[str, Any]], None]


#: What the door that served a call tells the run's trace about it (SPEC 14), beside its result: the caller
#: sets a fresh dict here before the call, in the task that awaits it, and the door may set ``replayed``
#: (``True`` when a cassette answered, SPEC 13) and ``recorded`` (the seconds the call took when it was
#: recorded). A door of your own need not know of it: the trace then says nothing of replay.
RECEIPT: ContextVar[dict[str, Any] | None] = ContextVar("s2o_receipt", default=None)


def note_replayed(duration: Any) -> None:
    """The call being served was answered by a cassette whose entry took ``duration`` seconds (a finite,
    non-negative number, or anything else for unknown): noted on the caller's :data:`RECEIPT`, if any."""
    receipt = RECEIPT.get()
    if receipt is not None:
        receipt["replayed"] = True
        if type(duration) in (int, float) and math.isfinite(duration) and duration >= 0:
            receipt["recorded"] = float(duration)


@dataclass(frozen=True, slots=True)
class OutsideCall:
    """One call out of a run.

    Attributes:
        kind: one of :data:`KINDS`.
        profile: the profile's name under ``profiles.<kind>`` (``None`` for ``ask``, which has none).
        fields: the command's evaluated fields as JSON (strings, numbers, booleans, ``None``, lists
            and string-keyed dicts), never containing a profile's credentials. For ``llm`` it is one
            model turn: ``{"messages": [...], "tools": [...], "stream": bool, "model_fields": {...}}``
            (the ``llm`` command runs the tool loop in the run and calls out once per model turn).
        path: the JSON path of the command in the fragment (``"commands[2].api"``), for errors.
        timeout: seconds the call may take at most (the smaller of the command's or profile's timeout
            and what is left of the run's time limit), > 0.
        secrets_used: names of secrets the run's own fields read (for masking; informational).
    """

    kind: str
    profile: str | None
    fields: dict[str, Any]
    path: str
    timeout: float
    secrets_used: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        """The call as a JSON object (what the worker sends to its parent)."""
        return {"kind": self.kind, "profile": self.profile, "fields": self.fields, "path": self.path,
                "timeout": self.timeout, "secrets_used": list(self.secrets_used)}

    @classmethod
    def from_json(cls, data: Any) -> OutsideCall:
        """The call from :meth:`to_json`'s shape. Raises ``ValueError`` when ``data`` is not that shape
        (the caller turns it into a coded ``worker-protocol`` error): it never trusts the sender."""
        if not isinstance(data, dict):
            raise ValueError("an outside call is an object")
        kind, profile, fields, path = (data.get(k) for k in ("kind", "profile", "fields", "path"))
        timeout: Any = data.get("timeout")
        if kind not in KINDS:
            raise ValueError("unknown outside call kind")
        if profile is not None and type(profile) is not str:
            raise ValueError("an outside call's profile is a name")
        if type(fields) is not dict or type(path) is not str:
            raise ValueError("an outside call has fields (an object) and a path")
        if type(timeout) not in (int, float) or not 0 < timeout < float("inf"):
            raise ValueError("an outside call's timeout is a positive number")
        used = data.get("secrets_used", [])
        if type(used) is not list or any(type(u) is not str for u in used):
            raise ValueError("secrets_used is a list of names")
        return cls(kind, profile, fields, path, float(timeout), tuple(used))


#: Kinds of call whose fields may carry secrets (SPEC 7.1): an ``api`` call's server is the profile's,
#: which the operator trusts with them; an ``ask`` shows them as ``***``. A ``db`` call's SQL or an ``llm``
#: call's input is the run's own text, which could hand a secret back transformed (``hex(:s)``, "spell it
#: backwards"), where masking cannot see it.
SECRET_KINDS = frozenset({"api", "ask"})


def json_fields(fields: dict[str, Any], path: str, kind: str) -> dict[str, Any]:
    """A command's evaluated ``fields`` as JSON for an :class:`OutsideCall` of ``kind``: tuples become lists,
    secret text becomes its text with each secret as its placeholder (:func:`~..run.scopes.placed`), in-process as in
    the worker; only the gateway resolves them.
    Raises ``S2OError`` ``not-allowed`` naming the field for a secret in a call whose kind is not in
    :data:`SECRET_KINDS`, ``not-json`` (``commands[0].api.body[2]``) for anything else that is not JSON."""
    def convert(value: Any, at: str, depth: int) -> Any:
        if depth > 200:
            raise S2OError("too-deep", f"{at} nests too deeply to be sent", path=path)
        if type(value) in (Secret, SecretText):
            if kind not in SECRET_KINDS:
                raise S2OError("not-allowed", f"a secret cannot go to a {kind} call: its {kind} could hand it "
                               "back as text the run reads (secrets go to api calls)", path=at)
            return placed(value)
        if value is None or type(value) in (str, int, bool):
            return value
        if type(value) is float and math.isfinite(value):
            return value
        if type(value) in (list, tuple):
            return [convert(v, f"{at}[{i}]", depth + 1) for i, v in enumerate(value)]
        if type(value) is dict and all(type(k) is str for k in value):
            return {k: convert(v, f"{at}.{k}", depth + 1) for k, v in value.items()}
        raise S2OError("not-json", f"{at} is a {type(value).__name__}; an outside call takes JSON values",
                       path=at)

    return {name: convert(value, f"{path}.{name}", 0) for name, value in fields.items()}


@runtime_checkable
class Outside(Protocol):
    """Serves a session's outside calls.

    ``call`` runs on the session's event loop; it returns the call's result as JSON (SPEC 7.1: an
    ``api`` call's decoded body, a ``db`` call's list of row dicts, an ``llm`` turn's
    ``{"text", "tool_calls", "input_tokens", "output_tokens", "cost"}``, an ``ask``'s answers) with
    every secret value masked as ``***``. It raises ``S2OError`` with the call's own code
    (``api-status``, ``api-failed``, ``api-timeout``, ``api-too-large``, ``db-failed``, ``row-limit``,
    ``llm-failed``, ``llm-too-large``, ``too-deep``, ``unknown-profile``, …) and ``path`` set to the call's
    path; for ``ask`` with nobody to answer it
    raises code ``ask`` with the questions in ``details``. ``on_stream`` receives streamed output
    parts while the call runs.

    ``close`` releases pooled clients and engines (``%reset``, shutdown); the next call opens them anew.
    """

    async def call(self, request: OutsideCall, on_stream: StreamFn | None = None) -> Any:
        """Make one outside call (see the class doc)."""
        ...

    def close(self) -> None:
        """Release pooled connections (see the class doc)."""
        ...
