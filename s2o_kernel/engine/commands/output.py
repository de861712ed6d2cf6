"""``output``: a text, html or image part added to the run's output (SPEC 7, 9).

A string is short for ``{"text": …}``. An image part is base64 text with a ``mime`` type (default
``image/png``). Parts reach the output sink as they are produced.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import S2OError
from ..fragments.tree import join
from ..values import runtime_error
from .spec import CommandSpec, FieldsModel

if TYPE_CHECKING:
    from ..fragments.interpreter import Interpreter
    from ..fragments.parser import Parser
    from ..fragments.tree import Command

PARTS = ("text", "html", "image")


class OutputFields(FieldsModel):
    """``output``'s fields: exactly one of ``text``, ``html``, ``image``; ``mime`` for images."""

    text: Any = None
    html: Any = None
    image: Any = None
    mime: str = "image/png"


def parse(p: Parser, cmd: Command, fields: Any, known: set[str], in_loop: bool) -> Command | None:
    """Check that exactly one part is given, and its value."""
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
    p.value(getattr(m, given[0]), join(cmd.path, given[0]), known)
    cmd.model = m
    return cmd


async def run(it: Interpreter, cmd: Command) -> None:
    """Evaluate the part and emit it."""
    m = cmd.model
    if m.text is not None:
        text = await it.value(m.text, f"{cmd.path}.text")
        it.emit({"type": "text", "text": text if isinstance(text, str) else _text(repr, text, f"{cmd.path}.text")})
    elif m.html is not None:
        html = await it.value(m.html, f"{cmd.path}.html")
        it.emit({"type": "html", "html": html if isinstance(html, str) else _text(str, html, f"{cmd.path}.html")})
    else:
        data = _text(str, await it.value(m.image, f"{cmd.path}.image"), f"{cmd.path}.image")
        try:
            base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise S2OError("runtime", "ValueError: an image part must be base64 text",
                           path=f"{cmd.path}.image") from None
        it.emit({"type": "image", "data": data, "mime": m.mime})


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


OUTPUT = CommandSpec("output", parse, run, fields=OutputFields)
