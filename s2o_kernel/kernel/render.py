"""Turn engine values and errors into Jupyter content: mime bundles and error triples (SPEC 9).

Nothing here talks to ZMQ or imports Jupyter; the functions take plain values and return plain
dicts, so they are unit-tested directly.

Errors are the engine's own types: an :class:`~s2o_kernel.engine.S2OError` (the kernel raises
them too, e.g. ``S2OError("magic", ...)``) shows as ``code: message`` followed by its position, its
``details`` one a line and its notes (``add_note``); an :class:`~s2o_kernel.engine.ErrorGroup`
lists each of its errors. Any other exception is ``unexpected`` with no Python frames.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from s2o_kernel.engine import ErrorGroup, S2OError

Redactor = Callable[[str], str]

#: evalue of every interrupt (ename ``stopped``), the engine's own text, however
#: the interrupt lands: in the engine, in the worker, in the kernel, or by
#: the worker being killed when it did not answer.
INTERRUPTED = "the run was interrupted; the session keeps its variables"


@dataclass
class ErrorInfo:
    """The three error fields of an IOPub ``error`` message and an error reply."""

    ename: str
    evalue: str
    traceback: list[str] = field(default_factory=list)

    def content(self) -> dict[str, Any]:
        """``{"ename", "evalue", "traceback"}`` for an ``error`` message or an error reply."""
        return {"ename": self.ename, "evalue": self.evalue, "traceback": list(self.traceback)}


def _identity(text: str) -> str:
    return text


def _safe_str(value: Any) -> str:
    try:
        return str(value)
    except Exception:  # an exception whose __str__ fails
        return f"<{type(value).__name__}>"


def caret_line(text: str, col: int) -> str:
    """Spaces (tabs kept as tabs) up to ``col`` (0-based, characters) followed by ``^``."""
    col = max(0, min(col, len(text)))
    pad = "".join("\t" if ch == "\t" else " " for ch in text[:col])
    return pad + "^"


def _location_lines(err: S2OError) -> list[str]:
    """``at PATH``, then the offending line of ``source`` and a caret under ``col`` (SPEC 9, 11)."""
    lines: list[str] = []
    if err.path:
        lines.append(f"  at {err.path}")
    line = err.line
    if err.source and line is not None and line >= 1:
        src_lines = err.source.splitlines() or [""]
        if line <= len(src_lines):
            text = src_lines[line - 1]
            lines.append(f"    {text}")
            if err.col is not None and err.col >= 0:
                lines.append("    " + caret_line(text, err.col))
    return lines


def _detail_lines(err: S2OError) -> list[str]:
    """One line per failing allowlist line (``details["lines"]``) or settings problem.

    The engine's message already joins them with ``;``; listed one a line they
    are easier to read in a notebook.
    """
    details = err.details or {}
    out: list[str] = []
    per_line = details.get("lines")
    if isinstance(per_line, dict):
        out.extend(f"  {entry}: {msg}" for entry, msg in per_line.items())
    problems = details.get("problems")
    if isinstance(problems, list) and len(problems) > 1:
        out.extend(f"  {p}" for p in problems)
    restarted = details.get("restarted")
    if isinstance(restarted, str):
        out.append(f"  ({restarted})")
    return out


def notes_of(exc: BaseException) -> list[str]:
    """The lines added with ``add_note`` (PEP 678: the attribute exists once a note is added)."""
    return [str(note) for note in getattr(exc, "__notes__", ())]


def coded_traceback(err: S2OError) -> list[str]:
    """The traceback lines of an ``S2OError`` (SPEC 9): no Python frames.

    ``code: message``; then, for an :class:`ErrorGroup` of several errors, one numbered block per
    error (``[1] code: message`` and its position), otherwise the position and details; then the
    notes.
    """
    lines = [f"{err.code}: {err.message}"]
    errors = err.errors if isinstance(err, ErrorGroup) else [err]
    if len(errors) == 1:
        lines.extend(_location_lines(errors[0]))
        lines.extend(_detail_lines(errors[0]))
    else:
        for i, sub in enumerate(errors, 1):
            lines.append(f"[{i}] {sub.code}: {sub.message}")
            lines.extend(_location_lines(sub))
            lines.extend(_detail_lines(sub))
    lines.extend(notes_of(err))
    return lines


def error_info(exc: BaseException, redact: Redactor | None = None) -> ErrorInfo:
    """Map any exception to the Jupyter error triple, every text passed through ``redact``.

    * ``S2OError`` → ename = code, evalue = message, traceback per SPEC 9;
    * ``KeyboardInterrupt`` → ``stopped`` / :data:`INTERRUPTED`;
    * an ``S2OError`` with code ``stopped`` always has :data:`INTERRUPTED` as its evalue
      (nbval compares it); a different engine message (the worker was
      restarted) follows in the traceback;
    * anything else → ``unexpected`` / ``"TypeName: message"``, no frames.
    """
    red = redact or _identity
    if isinstance(exc, KeyboardInterrupt):
        info = ErrorInfo("stopped", INTERRUPTED, [f"stopped: {INTERRUPTED}"])
    elif isinstance(exc, S2OError) and exc.code == "stopped":
        lines = coded_traceback(exc)
        lines[0] = f"stopped: {INTERRUPTED}"
        if exc.message != INTERRUPTED:
            lines.insert(1, f"  ({exc.message})")
        info = ErrorInfo("stopped", INTERRUPTED, lines)
    elif isinstance(exc, S2OError):
        info = ErrorInfo(exc.code, exc.message, coded_traceback(exc))
    else:
        text = _safe_str(exc)
        evalue = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
        info = ErrorInfo("unexpected", evalue, [f"unexpected: {evalue}"])
    return ErrorInfo(
        _safe_redact(red, info.ename),
        _safe_redact(red, info.evalue),
        [_safe_redact(red, line) for line in info.traceback],
    )


def _safe_redact(redact: Redactor, text: str) -> str:
    try:
        out = redact(text)
    except Exception:
        return text
    return out if isinstance(out, str) else text


def safe_repr(value: Any) -> str:
    """``repr(value)``, or a placeholder when repr itself fails."""
    try:
        text = repr(value)
    except Exception as exc:  # e.g. an int too large to convert to text
        return f"<{type(value).__name__} object: repr failed with {type(exc).__name__}>"
    if not isinstance(text, str):  # pragma: no cover - defensive
        return f"<{type(value).__name__} object>"
    return text


def redact_json(value: Any, redact: Redactor) -> Any:
    """Apply ``redact`` to every string (keys included) inside a JSON value."""
    if isinstance(value, str):
        return _safe_redact(redact, value)
    if isinstance(value, list):
        return [redact_json(v, redact) for v in value]
    if isinstance(value, dict):
        return {_safe_redact(redact, str(k)): redact_json(v, redact) for k, v in value.items()}
    return value


def value_bundle(
    value: Any,
    *,
    as_json: Callable[[Any], Any] | None = None,
    redact: Redactor | None = None,
) -> dict[str, Any]:
    """Mime bundle of a result: ``text/plain`` repr and, for JSON values, ``application/json``."""
    red = redact or _identity
    data: dict[str, Any] = {"text/plain": _safe_redact(red, safe_repr(value))}
    if as_json is not None:
        try:
            js = as_json(value)
        except Exception:
            js = None
        if js is not None:
            data["application/json"] = redact_json(js, red)
    return data


def json_text(value: Any) -> str:
    """Deterministic pretty JSON text (sorted keys) for magics that show settings."""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=repr)


def json_bundle(value: Any, redact: Redactor | None = None) -> dict[str, Any]:
    """Bundle for a JSON document shown by a magic (settings, variables)."""
    red = redact or _identity
    return {
        "text/plain": _safe_redact(red, json_text(value)),
        "application/json": redact_json(json.loads(json_text(value)), red),
    }


def output_part_bundle(part: Any, redact: Redactor | None = None) -> dict[str, Any]:
    """Mime bundle of one ``output`` part of a run: text, html or image."""
    red = redact or _identity
    if not isinstance(part, dict):
        return {"text/plain": _safe_redact(red, safe_repr(part))}
    kind = part.get("type")
    data: dict[str, Any] = {}
    if kind == "html":
        data["text/html"] = _safe_redact(red, str(part.get("html", part.get("data", ""))))
        if isinstance(part.get("text"), str):
            data["text/plain"] = _safe_redact(red, part["text"])
    elif kind == "image":
        mime = part.get("mime") or "image/png"
        raw = part.get("data", b"")
        if isinstance(raw, (bytes, bytearray, memoryview)):
            payload = base64.b64encode(bytes(raw)).decode("ascii")
        else:
            payload = str(raw)
        if mime == "image/svg+xml" and isinstance(raw, (bytes, bytearray)):
            payload = bytes(raw).decode("utf-8", "replace")
        data[str(mime)] = payload
        alt = part.get("alt", part.get("text"))
        data["text/plain"] = _safe_redact(red, str(alt)) if alt else f"<{mime} image>"
    elif kind == "text":
        data["text/plain"] = _safe_redact(red, str(part.get("text", "")))
    else:
        text = part.get("text")
        if isinstance(text, str):
            data["text/plain"] = _safe_redact(red, text)
        else:
            data["text/plain"] = _safe_redact(red, safe_repr(part))
    return data
