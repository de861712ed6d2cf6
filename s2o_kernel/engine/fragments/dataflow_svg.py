"""The data flow of a fragment drawn as SVG (SPEC 8, 9.1): the drawing behind :meth:`Dataflow.svg`.

Laid out like :meth:`Dataflow.graph <s2o_kernel.engine.fragments.dataflow.Dataflow.graph>`: a legend line,
then one block per command in document order, stacked top to bottom. In a block the paths the command
reads are rounded boxes on the left, the command a square box in the middle, the paths it writes rounded
boxes on the right; arrows go read → command → written. A read by an expression is a dashed arrow; an
``outputPath``'s alternatives carry the label ``on success`` / ``on failure``. The columns are shared by
every block, so the commands line up.

The structure is part of the contract (the tests read it): each block is a ``<g class="block">`` holding
one ``<g class="read">`` (``class="read expression"`` for a read by an expression) per path read, one
``<g class="command">`` and one ``<g class="write">`` per path written. A read or write group holds its
arrow (a ``<path>`` and a ``<polygon>`` head), its box (``<rect>``) and the path's ``<text>``; a write of an
alternative also a ``<text class="when">``. The legend is the ``<text class="legend">``.

Sizes come from character counts in a monospace font (:data:`CHAR` pixels a column, East Asian wide
characters two columns), so nothing measures fonts and nothing is imported. Integer coordinates only:
the same blocks give the same bytes.

Safety (the SVG is shown by a browser): every label first goes through the caller's ``label`` callable
(the kernel passes its redactor, so a secret value is masked before anything else touches it), then
characters XML 1.0 does not allow become U+FFFD, then ``&``, ``<``, ``>`` and ``"`` become entities and
characters outside ASCII numeric references, so the document is ASCII (as the text graph is). It has no
script, no event handler, no ``<foreignObject>``, no link and no reference at all (not even ``url(#id)``:
arrow heads are drawn, not markers, so two diagrams in one page cannot clash). It draws its own white
background and gives every fill and stroke explicitly, so it reads the same in a light or a dark theme.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

#: A block of the diagram: the command's label, its reads as ``(path, by an expression)`` and its writes
#: as ``(path, when)``, each once per way, in document order.
Block = tuple[str, list[tuple[str, bool]], list[tuple[str, str]]]
#: What every label passes through before it is escaped (the kernel's redactor; identity by default).
Label = Callable[[str], str]

#: The legend line above the blocks.
LEGEND = "paths read \u2192 [command] \u2192 paths written (dashed: read by an expression)"
FONT, CHAR = 13, 8  # px: the labels' font size, and a column of it (a monospace advance is about 0.6 em)
SMALL, SMALL_CHAR = 11, 7  # px: the legend's and the alternatives' labels
PAD, BOX, PITCH = 10, 24, 32  # px: text inside a box, a box's height, one row of boxes
MARGIN, GAP, LEGEND_ROW = 16, 20, 28  # px: around the drawing, between blocks, the legend's row
STUB, FAN, HEAD = 12, 48, 7  # px: a straight run off a box, the curve that fans out, an arrow head

_FONTS = "ui-monospace, Menlo, Consolas, 'DejaVu Sans Mono', 'Liberation Mono', monospace"
_INK, _ARROW, _BACKGROUND, _FRAME = "#1f2328", "#57606a", "#ffffff", "#d0d7de"
#: Fill and stroke of a box by its kind.
_BOXES = {"read": ("#ddf4ff", "#0969da"), "command": ("#fff8c5", "#9a6700"), "write": ("#dafbe1", "#1a7f37")}
_WHEN_INK = {"on success": "#1a7f37", "on failure": "#cf222e"}
#: What XML 1.0 does not allow in text (control characters, lone surrogates, U+FFFE and U+FFFF).
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def draw(blocks: list[Block], label: Label) -> str:
    """The SVG document of ``blocks`` (see the module doc); ``label`` is applied to every label."""
    read_w = max((_box_width(label(p)) for _, reads, _ in blocks for p, _ in reads), default=0)
    command_w = max(_box_width(label(c)) for c, _, _ in blocks)
    write_w = max((_box_width(label(p)) for _, _, writes in blocks for p, _ in writes), default=0)
    when_w = max((_columns(label(w)) * SMALL_CHAR for _, _, writes in blocks for _, w in writes if w), default=0)
    command_x = MARGIN + (read_w + 2 * STUB + FAN if read_w else 0)
    write_x = command_x + command_w + STUB + FAN + max(when_w + 2 * STUB, STUB) + HEAD
    legend = _text(MARGIN, MARGIN + SMALL, label(LEGEND), size=SMALL, css="legend")
    width = max(write_x + write_w if write_w else command_x + command_w,
                MARGIN + _columns(label(LEGEND)) * SMALL_CHAR) + MARGIN
    parts, top = [legend], MARGIN + LEGEND_ROW
    for command, reads, writes in blocks:
        rows = max(len(reads), len(writes), 1)
        mid = top + (rows - 1) * PITCH // 2 + BOX // 2
        parts.append('<g class="block">')
        for i, (path, dashed) in enumerate(reads):
            y = top + (rows - len(reads)) * PITCH // 2 + i * PITCH + BOX // 2
            text = label(path)
            right = MARGIN + _box_width(text)
            arrow = _arrow(right, y, MARGIN + read_w + STUB, command_x, mid, dashed=dashed)
            parts.append(f'<g class="read{" expression" if dashed else ""}">{arrow}'
                         f'{_box("read", MARGIN, y - BOX // 2, _box_width(text), text)}</g>')
        parts.append(f'<g class="command">{_box("command", command_x, mid - BOX // 2, command_w, label(command))}'
                     '</g>')
        for i, (path, when) in enumerate(writes):
            y = top + (rows - len(writes)) * PITCH // 2 + i * PITCH + BOX // 2
            text = label(path)
            arrow = _arrow(command_x + command_w, mid, command_x + command_w + STUB, write_x, y, dashed=False)
            note = _text(write_x - HEAD - STUB // 2, y - 5, label(when), size=SMALL, css="when", anchor="end",
                         ink=_WHEN_INK.get(when, _ARROW)) if when else ""
            parts.append(f'<g class="write">{arrow}{note}{_box("write", write_x, y - BOX // 2, _box_width(text), text)}'
                         '</g>')
        parts.append("</g>")
        top += (rows - 1) * PITCH + BOX + GAP
    return _document(width, top - GAP + MARGIN, parts)


def message(text: str, label: Label) -> str:
    """A small SVG document that says ``text`` (after ``label``): the drawing of a fragment with no path."""
    shown = label(text)
    return _document(2 * MARGIN + _columns(shown) * CHAR, 2 * MARGIN + BOX,
                     [_text(MARGIN, MARGIN + BOX // 2 + 4, shown, css="message")])


def escape(text: str) -> str:
    """``text`` safe as XML character data and inside a ``"``-quoted attribute (see the module doc), in
    ASCII: other characters as numeric references (``&#8594;``)."""
    text = _NOT_XML.sub("\ufffd", text)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    return text.encode("ascii", "xmlcharrefreplace").decode("ascii")


def _document(width: int, height: int, parts: list[str]) -> str:
    return "\n".join([
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="{_FONTS}" font-size="{FONT}" '
        'xml:space="preserve" role="img" aria-label="data flow">',
        f'<rect class="background" x="0" y="0" width="{width}" height="{height}" fill="{_BACKGROUND}" '
        f'stroke="{_FRAME}"/>',
        *parts,
        "</svg>",
    ])


def _columns(text: str) -> int:
    """How many monospace columns ``text`` takes: East Asian wide and full-width characters two, combining
    marks none, others one."""
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1
               for c in text)


def _box_width(text: str) -> int:
    return _columns(text) * CHAR + 2 * PAD


def _box(kind: str, x: int, y: int, width: int, text: str) -> str:
    """A box of ``kind`` (rounded for a path, square for a command) with ``text`` in it."""
    fill, stroke = _BOXES[kind]
    rounded = 4 if kind == "command" else BOX // 2
    at = x + width // 2 if kind == "command" else x + PAD
    return (f'<rect x="{x}" y="{y}" width="{width}" height="{BOX}" rx="{rounded}" fill="{fill}" stroke="{stroke}"/>'
            + _text(at, y + BOX // 2 + 4, text, anchor="middle" if kind == "command" else "start"))


def _text(x: int, y: int, text: str, *, size: int = FONT, css: str = "", anchor: str = "start",
          ink: str = _INK) -> str:
    """A ``<text>`` of ``text`` (already through ``label``; escaped here) with its baseline at ``y``."""
    attrs = (f' class="{css}"' if css else "") + (f' font-size="{size}"' if size != FONT else "") \
        + (f' text-anchor="{anchor}"' if anchor != "start" else "")
    return f'<text x="{x}" y="{y}"{attrs} fill="{ink}">{escape(text)}</text>'


def _arrow(x0: int, y0: int, fan_x: int, x1: int, y1: int, *, dashed: bool) -> str:
    """An arrow from ``(x0, y0)`` straight to ``fan_x``, a curve over :data:`FAN` pixels to the row ``y1``,
    then straight to its head, which touches ``(x1, y1)``."""
    half = fan_x + FAN // 2
    dash = ' stroke-dasharray="5 4"' if dashed else ""
    return (f'<path d="M{x0},{y0} H{fan_x} C{half},{y0} {half},{y1} {fan_x + FAN},{y1} H{x1 - HEAD}" '
            f'fill="none" stroke="{_ARROW}" stroke-width="1.5"{dash}/>'
            f'<polygon points="{x1},{y1} {x1 - HEAD},{y1 - 4} {x1 - HEAD},{y1 + 4}" fill="{_ARROW}"/>')
