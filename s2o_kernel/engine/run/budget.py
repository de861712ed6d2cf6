"""What one run may still output (SPEC 9, 12): :class:`OutputBudget`, and the size of a part or a text.

Every output part (:mod:`.commands.output`) is first charged to the run's :class:`OutputBudget`:
``limits.output_part_bytes`` per part, ``limits.output_parts`` parts and ``limits.output_bytes`` bytes per
run; a part over a cap is not emitted and the run stops with ``output-limit``, which ``onError`` does not
handle. A part's size is :func:`part_bytes`: the UTF-8 bytes of its content (text, html, or the image's
base64 text). Other text a run makes the front end show counts against ``limits.output_bytes`` too
(:meth:`OutputBudget.charge_text`): ``log`` lines, printed text in the worker and its parent (a comprehension
of ``print`` calls could otherwise send gigabytes to the front end). The interpreter charges
the parts it emits; the worker's parent charges those it receives, to check a worker it does not trust.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import S2OError
from ..settings import Limits

#: Fields of a part that describe it rather than hold its content (not counted by :func:`part_bytes`).
_DESCRIPTIVE = frozenset({"type", "mime"})


def _text_bytes(text: str) -> int:
    """UTF-8 bytes of ``text`` (a lone surrogate counts as the three bytes it would take)."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def part_bytes(part: dict[str, Any]) -> int:
    """The size of an output part in bytes: UTF-8 bytes of its exact-``str`` content fields
    (every field but ``type`` and ``mime``; fields of any other type count nothing)."""
    return sum(_text_bytes(v) for k, v in part.items() if k not in _DESCRIPTIVE and type(v) is str)


def _size(n: int) -> str:
    """``n`` bytes as a short human size: ``1 MiB``, ``2.5 MiB``, ``900 bytes``."""
    if n >= 1 << 20:
        return f"{n / (1 << 20):.3g} MiB"
    if n >= 1 << 10:
        return f"{n / (1 << 10):.3g} KiB"
    return f"{n} bytes"


@dataclass
class OutputBudget:
    """What one run may still output (SPEC 12): the caps and what was used so far.

    ``part_bytes``, ``parts`` and ``total_bytes`` are ``limits.output_part_bytes``,
    ``limits.output_parts`` and ``limits.output_bytes``; ``count`` and ``used`` are the parts and
    bytes charged so far. The engine charges each part before emitting it; the worker's parent
    charges the parts it receives, to check a worker it does not trust.
    """

    part_bytes: int
    parts: int
    total_bytes: int
    count: int = 0
    used: int = 0

    @classmethod
    def of(cls, limits: Limits) -> OutputBudget:
        """The budget of a run under ``limits``."""
        return cls(limits.output_part_bytes, limits.output_parts, limits.output_bytes)

    def charge(self, part: dict[str, Any]) -> None:
        """Count ``part`` against the caps; raises ``S2OError("output-limit")`` naming the cap and its
        value when it would pass one (nothing is counted then)."""
        size = part_bytes(part)
        if size > self.part_bytes:
            raise S2OError("output-limit", f"an output part of {_size(size)} is over the limit of "
                           f"{_size(self.part_bytes)} per part (limits.output_part_bytes = {self.part_bytes})")
        if self.count >= self.parts:
            raise S2OError("output-limit", f"the run's output passed the limit of {self.parts} parts "
                           f"(limits.output_parts = {self.parts})")
        if self.used + size > self.total_bytes:
            raise S2OError("output-limit", f"the run's output passed the limit of {_size(self.total_bytes)} "
                           f"in all (limits.output_bytes = {self.total_bytes})")
        self.count += 1
        self.used += size

    def charge_text(self, text: str, what: str) -> None:
        """Count ``text`` (``what`` it is, e.g. ``"log lines"``: printed text and log lines are not parts)
        against ``limits.output_bytes`` only; raises ``output-limit`` when it would pass it."""
        size = _text_bytes(text)
        if self.used + size > self.total_bytes:
            raise text_limit_error(self.total_bytes, what)
        self.used += size


def text_limit_error(total_bytes: int, what: str) -> S2OError:
    """``output-limit`` for ``what`` (text a run shows outside its parts) passing ``limits.output_bytes``."""
    return S2OError("output-limit", f"the run's output ({what} included) passed the limit of {_size(total_bytes)} "
                    f"in all (limits.output_bytes = {total_bytes})")


def text_bytes(text: str) -> int:
    """UTF-8 bytes of ``text`` as the caps count them (a lone surrogate as three)."""
    return _text_bytes(text)
