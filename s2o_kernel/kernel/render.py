"""Turn engine values and errors into Jupyter content: mime bundles and error triples (SPEC 9).

Nothing here talks to ZMQ or imports Jupyter; the functions take plain values and return plain
dicts, so they are unit-tested directly.

A result (:func:`value_bundle`) is ``text/plain``: its repr laid out as IPython lays it out
(:mod:`.pretty`); rows (a list of objects with the same keys) also carry a ``text/html`` table;
``application/json`` only when asked (``%display json``).

Errors are the engine's own types: an :class:`~s2o_kernel.engine.S2OError` (the kernel raises
them too, e.g. ``S2OError("magic", ...)``) shows as ``code: message`` followed by its position, its
``details`` one a line and its notes (``add_note``); an :class:`~s2o_kernel.engine.ErrorGroup`
lists each of its errors. Any other exception is ``unexpected`` with no Python frames.

What reaches the front end is what SPEC 9 allows: an ``output`` part's html is sanitised with nh3
(the Ammonia sanitiser: no script, no event handlers, no ``javascript:`` links) and gets a
``text/plain`` fallback; an image is ``image/png`` or ``image/jpeg`` with a ``text/plain`` fallback,
and nothing else (the engine refuses other types at validation; a part of another type that gets
here anyway shows as text). Text is never dropped: a lone surrogate (``\udc80``, which UTF-8 cannot
carry, so Jupyter's JSON would replace it with U+FFFD) is shown escaped by :func:`escape_surrogates`.
"""

from __future__ import annotations

import base64
import binascii
import html
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from s2o_kernel.engine import WRITTEN_LIMIT, ErrorGroup, RemoteValue, S2OError, shown_text, too_large_text, written_size
from s2o_kernel.kernel.pretty import pretty_text, rows_table, without_addresses

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


#: A UTF-16 surrogate code point: alone in a ``str`` it cannot be written as UTF-8.
_SURROGATE = re.compile("[\ud800-\udfff]")


def escape_text(text: str) -> str:
    """``text`` with every surrogate code point written as its escape (``'\\udc80'``), so no text is
    lost on the way to the front end (Jupyter's messages are UTF-8 JSON)."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


#: C0 and C1 control characters but tab, newline and carriage return: a terminal (``jupyter console``) acts
#: on them (ESC and the 8-bit CSI start sequences that clear the screen, set its title or write the clipboard).
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def escape_controls(text: str) -> str:
    """``text`` with every control character but tab, newline and carriage return written as its escape
    (``'\\x1b'``), so text a run makes a terminal show is shown, never run."""
    if _CONTROL.search(text) is None:
        return text
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def terminal_text(msg_type: str, content: dict[str, Any]) -> dict[str, Any]:
    """``content`` of an IOPub message of ``msg_type`` with :func:`escape_controls` applied to what a
    terminal front end prints: a stream's text and a bundle's ``text/plain`` (errors: :func:`error_info`)."""
    if msg_type == "stream" and isinstance(content.get("text"), str):
        return {**content, "text": escape_controls(content["text"])}
    data = content.get("data")
    if isinstance(data, dict) and isinstance(data.get("text/plain"), str):
        return {**content, "data": {**data, "text/plain": escape_controls(data["text/plain"])}}
    return content


def escape_surrogates(value: Any) -> Any:
    """``value`` (message content: dicts, lists, strings, numbers) with :func:`escape_text` applied to
    every string, keys included; containers are copied only when something changed (``value`` itself
    when nothing did, the common case, found without copying anything)."""
    return value if _clean(value) else _escaped(value)


def _clean(value: Any) -> bool:
    """No string in ``value`` holds a surrogate (a walk without allocation: every cell's outputs pass here)."""
    if isinstance(value, str):
        return value.isascii() or _SURROGATE.search(value) is None
    if isinstance(value, list):
        for item in value:
            if not _clean(item):
                return False
    elif isinstance(value, dict):
        for key, item in value.items():
            if not (_clean(key) and _clean(item)):
                return False
    return True


def _escaped(value: Any) -> Any:
    if isinstance(value, str):
        return escape_text(value)
    if isinstance(value, list):
        items = [_escaped(v) for v in value]
        return items if any(a is not b for a, b in zip(items, value, strict=True)) else value
    if isinstance(value, dict):
        pairs = [(_escaped(k), _escaped(v)) for k, v in value.items()]
        changed = any(k2 is not k or v2 is not v for (k2, v2), (k, v) in zip(pairs, value.items(), strict=True))
        return dict(pairs) if changed else value
    return value


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
            lines.append(f"    {escape_text(text)}")
            if err.col is not None and err.col >= 0:
                col = max(0, min(err.col, len(text)))
                before = escape_text(text[:col])  # the caret stays under the same character once escaped
                lines.append("    " + caret_line(before, len(before)))
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
    out.extend(_chain_lines(details.get("calls"), details.get("frames")))
    return out


def _chain_lines(calls: Any, frames: Any) -> list[str]:
    """The way back to an error (SPEC 9): the calls that led to it, outermost first (``details["calls"]``),
    then the frames of the user's own code an allowlisted function ran when it raised (``details["frames"]``),
    as Python's traceback shows them. Entries of any other shape are left out."""
    out: list[str] = []
    steps = [c for c in calls if isinstance(c, str)] if isinstance(calls, list) else []
    if steps:
        out.append("  called from (outermost first):")
        out.extend(f"    {step}" for step in steps)
    shown = [f for f in frames if isinstance(f, dict)] if isinstance(frames, list) else []
    lines: list[str] = []
    for frame in shown:
        file, line, function, text = (frame.get(k) for k in ("file", "line", "function", "text"))
        if isinstance(file, str) and type(line) is int and isinstance(function, str):
            lines.append(f'    File "{file}", line {line}, in {function}')
            if isinstance(text, str) and text:
                lines.append(f"      {text}")
    if lines:
        out.append("  in your code (most recent call last):")
        out.extend(lines)
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

    Lone surrogates and control characters in any of the texts are escaped (:func:`escape_text`,
    :func:`escape_controls`); the evalue and the traceback's first line have memory addresses taken out
    (:func:`~s2o_kernel.kernel.pretty.without_addresses`).
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
    # A message quoting a value's default repr (``ValueError: <function f at 0x…> is not in list``)
    # shows no address, so a stored error compares equal on every run; the source lines are left alone.
    evalue = without_addresses(info.evalue)
    traceback = [without_addresses(line) if i == 0 else line for i, line in enumerate(info.traceback)]
    return ErrorInfo(
        escape_controls(escape_text(_safe_redact(red, info.ename))),
        escape_controls(escape_text(_safe_redact(red, evalue))),
        [escape_controls(escape_text(_safe_redact(red, line))) for line in traceback],
    )


def _safe_redact(redact: Redactor, text: str) -> str:
    try:
        out = redact(text)
    except Exception:
        return text
    return out if isinstance(out, str) else text


def safe_repr(value: Any) -> str:
    """``repr(value)``, or a placeholder when repr itself fails or would never end (``written_size``)."""
    if written_size(value) > WRITTEN_LIMIT:
        return too_large_text(value)
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
    with_json: bool = False,
) -> dict[str, Any]:
    """Mime bundle of a result (SPEC 9).

    * ``text/plain``: ``repr(value)`` with secrets redacted and memory addresses taken out
      (:func:`~s2o_kernel.kernel.pretty.without_addresses`), pretty-printed as IPython prints it
      (:func:`~s2o_kernel.kernel.pretty.pretty_text`: one line when it fits in 79 characters,
      otherwise one item a line);
    * ``text/html``: when the value's JSON form (``as_json``) is rows, a list of objects with the
      same keys, a table of them (:func:`~s2o_kernel.kernel.pretty.rows_table`);
    * ``application/json``: the JSON form, only when ``with_json`` (``%display json``) and the value
      is JSON.

    A list, tuple, set or dict of more than ``SHOWN_ITEMS`` (1,000) items shows its first 1,000 and
    ``...``, at any depth, as IPython does (``engine.shown_text``, written where the value is: a value of
    the contained worker comes with that text).

    Never raises: a repr that fails shows a placeholder, an ``as_json`` that fails counts as "not JSON";
    a value of more than ``WRITTEN_LIMIT`` items written out (``written_size``) shows only a placeholder.
    """
    red = redact or _identity
    # past WRITTEN_LIMIT, a placeholder (its repr would not end: a list holding itself twice, 60 deep),
    # and not JSON (``as_json`` says so), so no table either
    text = value.shown if type(value) is RemoteValue and value.shown is not None else shown_text(value)
    data: dict[str, Any] = {"text/plain": pretty_text(without_addresses(_safe_redact(red, text)))}
    js = None
    if as_json is not None:
        try:
            js = as_json(value)
        except Exception:
            js = None
    table = rows_table(js, lambda text: _safe_redact(red, text))
    if table is not None:
        data["text/html"] = table
    if with_json and js is not None:
        data["application/json"] = redact_json(js, red)
    return data


def json_text(value: Any) -> str:
    """Deterministic pretty JSON text (sorted keys) for magics that show settings."""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=repr)


def json_bundle(value: Any, redact: Redactor | None = None) -> dict[str, Any]:
    """Bundle for a JSON document shown by a magic (settings): its pretty JSON text and, for
    ``%display json``, ``application/json`` (the runner drops it in the ``plain`` mode)."""
    red = redact or _identity
    return {
        "text/plain": _safe_redact(red, json_text(value)),
        "application/json": redact_json(json.loads(json_text(value)), red),
    }


#: The image types an ``output`` part may show as (SPEC 9).
IMAGE_TYPES = ("image/png", "image/jpeg")
#: Elements around which the text fallback of html starts a new line.
_BLOCKS = frozenset({"address", "article", "aside", "blockquote", "br", "dd", "details", "div", "dl", "dt",
                     "figcaption", "figure", "footer", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li",
                     "ol", "p", "pre", "section", "summary", "table", "tr", "ul"})


#: A tag as nh3 (html5ever's serialiser) writes it: attribute values in double quotes, which may hold ``>``.
_TAG = re.compile(r'<(/?)([A-Za-z][A-Za-z0-9]*)(?:[^">]|"[^"]*")*>')


def sanitise_html(text: str) -> str:
    """``text`` as html that SPEC 9 lets a notebook show: nh3's (Ammonia's) default policy, which keeps
    formatting, tables, images and links, and drops script, style, event handlers, forms, frames and
    ``javascript:`` URLs. Lone surrogates (nh3 takes UTF-8 only) and control characters are escaped first. nh3 is
    imported on the
    first html output (about 1.4 MiB the kernel holds only when a notebook shows html)."""
    import nh3

    return nh3.clean(escape_controls(escape_text(text)))


def html_text(clean: str) -> str:
    """The ``text/plain`` fallback of html that :func:`sanitise_html` wrote: its text (entities
    decoded), a line break around each block element and at ``<br>``, a space after each table
    cell, blank lines collapsed. Only for sanitised html, whose tags are well formed and which
    holds no script, style or comment."""

    def tag(found: re.Match[str]) -> str:
        name = found.group(2).lower()
        if name in _BLOCKS:
            return "\n"
        return " " if found.group(1) and name in ("td", "th") else ""

    lines = [line.strip() for line in html.unescape(_TAG.sub(tag, clean)).splitlines()]
    return "\n".join(line for line in lines if line)


def _image_bundle(part: dict[str, Any], red: Redactor) -> dict[str, Any]:
    """An image part: its base64 data under ``image/png`` or ``image/jpeg`` and a ``text/plain`` line;
    another type, or data that is not base64, shows as the ``text/plain`` line alone."""
    mime = part.get("mime") or IMAGE_TYPES[0]
    raw = part.get("data", b"")
    if isinstance(raw, (bytes, bytearray, memoryview)):
        payload = base64.b64encode(bytes(raw)).decode("ascii")
    else:
        payload = str(raw)
    if mime not in IMAGE_TYPES:
        return {"text/plain": f"<an image of type {escape_text(safe_repr(mime))[:80]}, not shown: "
                              f"images are {' or '.join(IMAGE_TYPES)}>"}
    try:
        base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        return {"text/plain": f"<an {mime} image whose data is not base64, not shown>"}
    alt = part.get("alt", part.get("text"))
    return {mime: payload, "text/plain": escape_text(_safe_redact(red, str(alt))) if alt else f"<{mime} image>"}


def output_part_bundle(part: Any, redact: Redactor | None = None) -> dict[str, Any]:
    """Mime bundle of one ``output`` part of a run (SPEC 9): ``text/plain`` always; html sanitised
    (:func:`sanitise_html`) under ``text/html`` with its text as the fallback; an image as
    ``image/png`` or ``image/jpeg`` (:func:`_image_bundle`). Secrets are redacted and lone surrogates
    escaped in every text."""
    red = redact or _identity
    if not isinstance(part, dict):
        return {"text/plain": escape_text(_safe_redact(red, safe_repr(part)))}
    kind = part.get("type")
    if kind == "image":
        return _image_bundle(part, red)
    if kind == "html":
        clean = sanitise_html(_safe_redact(red, str(part.get("html", part.get("data", "")))))
        text = part.get("text")
        fallback = _safe_redact(red, text) if isinstance(text, str) else html_text(clean)
        return {"text/html": clean, "text/plain": escape_text(fallback)}
    text = part.get("text")
    if kind == "text" or isinstance(text, str):
        return {"text/plain": escape_text(_safe_redact(red, str(text if text is not None else "")))}
    return {"text/plain": escape_text(_safe_redact(red, safe_repr(part)))}
