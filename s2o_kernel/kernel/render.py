"""Turn engine values and errors into Jupyter content: mime bundles and error triples.

Nothing here talks to ZMQ or imports Jupyter; the functions take plain values
and return plain dicts, so they are unit-tested directly.

Errors are duck-typed: anything with string attributes ``code`` and
``message`` is a coded error (the engine's ``S2OError`` and the kernel's own
:class:`CellError`); an object that also has a list ``errors`` is a group.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any, Callable

from s2o_kernel.engine.errors import S2OError

Redactor = Callable[[str], str]

#: evalue of every interrupt (ename ``stopped``), the engine's own text, however
#: the interrupt lands: in the engine, in the worker, in the kernel, or by
#: the worker being killed when it did not answer.
INTERRUPTED = "the run was interrupted; the session keeps its variables"


class CellError(S2OError):
    """A coded error raised by the kernel itself (magics, cell syntax): the engine's ``S2OError``.

    ``notes`` are extra traceback lines.
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        line: int | None = None,
        col: int | None = None,
        path: str | None = None,
        source: str | None = None,
        stage: str = "run",
        details: dict[str, Any] | None = None,
        notes: list[str] | None = None,
    ) -> None:
        super().__init__(code, message, line=line, col=col, path=path, stage=stage, source=source,
                         details=details)
        for note in notes or []:
            self.add_note(note)


class CellErrorGroup(CellError):
    """Several coded errors reported together (e.g. ``%validate``)."""

    def __init__(self, errors: list[Any], message: str | None = None) -> None:
        first = errors[0]
        extra = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        super().__init__(
            str(first.code),
            message if message is not None else f"{first.message}{extra}",
            line=getattr(first, "line", None),
            col=getattr(first, "col", None),
            path=getattr(first, "path", None),
            source=getattr(first, "source", None),
        )
        self.errors = list(errors)


@dataclass
class ErrorInfo:
    """The three error fields of an IOPub ``error`` message and an error reply."""

    ename: str
    evalue: str
    traceback: list[str] = field(default_factory=list)

    def content(self) -> dict[str, Any]:
        return {"ename": self.ename, "evalue": self.evalue, "traceback": list(self.traceback)}


def _identity(text: str) -> str:
    return text


def is_coded(exc: BaseException) -> bool:
    """True for an engine ``S2OError`` or a :class:`CellError` (duck-typed)."""
    return isinstance(getattr(exc, "code", None), str) and isinstance(
        getattr(exc, "message", None), str
    )


def _safe_str(value: Any) -> str:
    try:
        return str(value)
    except Exception:  # pragma: no cover - defensive
        return f"<{type(value).__name__}>"


def caret_line(text: str, col: int) -> str:
    """Spaces (tabs kept as tabs) up to ``col`` followed by ``^``."""
    col = max(0, min(col, len(text)))
    pad = "".join("\t" if ch == "\t" else " " for ch in text[:col])
    return pad + "^"


def _location_lines(err: Any) -> list[str]:
    lines: list[str] = []
    path = getattr(err, "path", None)
    if path:
        lines.append(f"  at {path}")
    source = getattr(err, "source", None)
    line = getattr(err, "line", None)
    if isinstance(source, str) and source and isinstance(line, int) and line >= 1:
        src_lines = source.splitlines() or [""]
        if line <= len(src_lines):
            text = src_lines[line - 1]
            lines.append(f"    {text}")
            col = getattr(err, "col", None)
            if isinstance(col, int) and col >= 0:
                lines.append("    " + caret_line(text, col))
    return lines


def _detail_lines(err: Any) -> list[str]:
    """One line per failing allowlist line (``details["lines"]``) or settings problem.

    The engine's message already joins them with ``;``; listed one a line they
    are easier to read in a notebook.
    """
    details = getattr(err, "details", None)
    out: list[str] = []
    if isinstance(details, dict):
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


def _block(err: Any) -> list[str]:
    return [f"{err.code}: {err.message}", *_location_lines(err), *_detail_lines(err)]


def coded_traceback(err: Any) -> list[str]:
    """The traceback lines of a coded error (SPEC 9): no Python frames."""
    lines = [f"{err.code}: {err.message}"]
    errors = getattr(err, "errors", None)
    if isinstance(errors, list) and errors and not (len(errors) == 1 and errors[0] is err):
        if len(errors) == 1:
            lines.extend(_location_lines(errors[0]))
            lines.extend(_detail_lines(errors[0]))
        else:
            for i, sub in enumerate(errors, 1):
                if is_coded(sub):
                    block = _block(sub)
                else:  # pragma: no cover - defensive
                    block = [f"{type(sub).__name__}: {_safe_str(sub)}"]
                lines.append(f"[{i}] {block[0]}")
                lines.extend(block[1:])
    else:
        lines.extend(_location_lines(err))
        lines.extend(_detail_lines(err))
    notes = getattr(err, "__notes__", None)
    if isinstance(notes, list):
        lines.extend(str(n) for n in notes)
    return lines


def error_info(exc: BaseException, redact: Redactor | None = None) -> ErrorInfo:
    """Map any exception to the Jupyter error triple.

    * coded error → ename = code, evalue = message, traceback per SPEC 9;
    * ``KeyboardInterrupt`` → ``stopped`` / :data:`INTERRUPTED`;
    * a coded ``stopped`` error always has :data:`INTERRUPTED` as its evalue
      (nbval compares it); a different engine message (the worker was
      restarted) follows in the traceback;
    * anything else → ``unexpected`` / ``"TypeName: message"``, no frames.
    """
    red = redact or _identity
    if isinstance(exc, KeyboardInterrupt):
        info = ErrorInfo("stopped", INTERRUPTED, [f"stopped: {INTERRUPTED}"])
    elif is_coded(exc) and str(exc.code) == "stopped":  # type: ignore[attr-defined]
        lines = coded_traceback(exc)
        message = str(exc.message)  # type: ignore[attr-defined]
        lines[0] = f"stopped: {INTERRUPTED}"
        if message != INTERRUPTED:
            lines.insert(1, f"  ({message})")
        info = ErrorInfo("stopped", INTERRUPTED, lines)
    elif is_coded(exc):
        info = ErrorInfo(str(exc.code), str(exc.message), coded_traceback(exc))  # type: ignore[attr-defined]
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
