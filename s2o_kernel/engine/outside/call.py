"""The shape of one outside call and of whatever serves it (SPEC 7.1).

:class:`OutsideCall` is plain JSON-ready data, so the same call crosses the worker's pipe unchanged
(:meth:`OutsideCall.to_json` / :meth:`OutsideCall.from_json`). :class:`Outside` is what a session
holds to serve calls; it is a protocol so that the in-process gateway and the worker's forwarder are
interchangeable.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

#: Kinds of outside call, one per SPEC 7 command that needs the outside world.
KINDS = frozenset({"api", "db", "llm", "ask"})

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


@runtime_checkable
class Outside(Protocol):
    """Serves a session's outside calls.

    ``call`` runs on the session's event loop; it returns the call's result as JSON (SPEC 7.1: an
    ``api`` call's decoded body, a ``db`` call's list of row dicts, an ``llm`` turn's
    ``{"text", "tool_calls", "input_tokens", "output_tokens", "cost"}``, an ``ask``'s answers) with
    every secret value masked as ``***``. It raises ``S2OError`` with the call's own code
    (``api-status``, ``api-failed``, ``api-timeout``, ``api-too-large``, ``db-failed``, ``row-limit``,
    ``unknown-profile``, …) and ``path`` set to the call's path; for ``ask`` with nobody to answer it
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
