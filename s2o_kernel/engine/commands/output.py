"""``output``: a text, html or image part added to the run's output (SPEC 7, 9, 12).

A string is short for ``{"text": …}``. An image part is base64 text with a ``mime`` type:
``image/png`` (the default) or ``image/jpeg``, the only image types SPEC 9 allows; any other
``mime``, or a ``mime`` beside a text or html part, is refused at validation (code ``fragment``,
path ``….mime``). A text or html value that is not a string shows as its ``repr``, or ``str`` for
html; text made with a secret (an f-string's ``SecretText``) as its text with the secret as ``***``.
Parts are dicts of text fields::

    {"type": "text", "text": TEXT}
    {"type": "html", "html": TEXT}                 sanitised by the kernel, not here (SPEC 9)
    {"type": "image", "data": BASE64, "mime": "image/png" | "image/jpeg"}

Parts reach the output sink as they are produced, each first charged to the run's
:class:`~..budget.OutputBudget` (SPEC 12; a part over a cap ends the run with ``output-limit``).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import Any

from ...bounds import QUOTE, WRITTEN_LIMIT
from ..errors import S2OError
from ..fragments.tree import Command, join
from ..policy.values import runtime_error
from ..policy.written import too_large_text, written_size
from ..run.scopes import masked_text
from .protocols import Interpreter, Parser
from .spec import CommandSpec, FieldsModel

PARTS = ("text", "html", "image")
#: The MIME types an image part may have (SPEC 9); the first is the default.
IMAGE_TYPES = ("image/png", "image/jpeg")


class OutputFields(FieldsModel):
    """``output``'s fields: exactly one of ``text``, ``html``, ``image``; ``mime`` for images only."""

    text: Any = None
    html: Any = None
    image: Any = None
    mime: Any = None


def _check_mime(p: Parser, cmd: Command, m: OutputFields, part: str) -> bool:
    """``mime`` is absent, or given with an image part as one of :data:`IMAGE_TYPES` (SPEC 9)."""
    if m.mime is None:
        return True
    path = join(cmd.path, "mime")
    if part != "image":
        p.error("fragment", "mime goes with an image part only", path)
        return False
    if type(m.mime) is not str or m.mime not in IMAGE_TYPES:
        shown = repr(m.mime)
        shown = shown if len(shown) <= QUOTE else shown[:QUOTE] + "…"
        p.error("fragment", f"mime must be {' or '.join(IMAGE_TYPES)}, got {shown}", path)
        return False
    return True


def parse(p: Parser, cmd: Command, fields: Any, known: set[str], in_loop: bool) -> Command | None:
    """Check that exactly one part is given, its value, and an image's ``mime``."""
    if isinstance(fields, str):
        fields = {"text": fields}
        cmd.fields = fields
    m = p.model(OutputFields, fields, cmd.path)
    if m is None:
        return None
    given = [k for k in PARTS if getattr(m, k) is not None]
    if len(given) != 1:
        p.error("fragment", "output takes exactly one part: text, html or image", cmd.path)
        return None
    if not _check_mime(p, cmd, m, given[0]):
        return None
    p.value(getattr(m, given[0]), join(cmd.path, given[0]), known)
    cmd.model = m
    return cmd


async def run(it: Interpreter, cmd: Command) -> None:
    """Evaluate the part and emit it."""
    kind, raw = _content(cmd.model)
    it.emit(_part(cmd, kind, await it.value(raw, f"{cmd.path}.{kind}")))


def run_sync(it: Interpreter, cmd: Command) -> None:
    """:func:`run` for a sync ``output``."""
    kind, raw = _content(cmd.model)
    it.emit(_part(cmd, kind, it.value_sync(raw, f"{cmd.path}.{kind}")))


def _content(m: OutputFields) -> tuple[str, Any]:
    """Which part the (checked) fields give (``text``, ``html`` or ``image``) and its raw value."""
    if m.text is not None:
        return "text", m.text
    return ("html", m.html) if m.html is not None else ("image", m.image)


def _part(cmd: Command, kind: str, value: Any) -> dict[str, Any]:
    """The output part of ``kind`` whose evaluated content is ``value`` (see the module doc)."""
    path = f"{cmd.path}.{kind}"
    masked = masked_text(value)  # text made with a secret shows as text, the secret as ***
    if masked is not None and kind in ("text", "html"):
        return {"type": kind, kind: masked}
    if written_size(value) > WRITTEN_LIMIT:  # its text would never end (written.py)
        if kind == "image":
            raise S2OError("runtime", "ValueError: an image part must be base64 text", path=path)
        return {"type": kind, kind: too_large_text(value)}
    if kind == "text":
        return {"type": "text", "text": value if isinstance(value, str) else _text(repr, value, path)}
    if kind == "html":
        return {"type": "html", "html": value if isinstance(value, str) else _text(str, value, path)}
    data = _text(str, value, path)
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise S2OError("runtime", "ValueError: an image part must be base64 text", path=path) from None
    return {"type": "image", "data": data, "mime": cmd.model.mime or IMAGE_TYPES[0]}


def _text(convert: Callable[[Any], str], value: Any, path: str) -> str:
    """``convert(value)`` (``repr`` or ``str``); a failure (an int too large to print, a value nested too
    deeply, a failing ``__repr__``) is a ``runtime`` error at ``path``, never a crash."""
    try:
        text = convert(value)
    except Exception as exc:
        raise runtime_error(exc, path) from None
    if type(text) is not str:
        raise S2OError("runtime", f"TypeError: the part is not text (got {type(text).__name__})", path=path)
    return text


OUTPUT = CommandSpec("output", parse, run, fields=OutputFields, run_sync=run_sync)
