"""Reading back what a :meth:`Dataflow.svg` drawing shows, for the engine's and the kernel's tests.

The drawing's structure is documented in ``s2o_kernel/engine/fragments/dataflow_svg.py``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

#: The SVG namespace, as ElementTree spells a tag in it.
SVG = "{http://www.w3.org/2000/svg}"


def svg_blocks(svg: str) -> list[tuple[list[tuple[str, bool]], str, list[tuple[str, str]]]]:
    """What each block of a :meth:`Dataflow.svg` drawing shows, read back from the parsed XML."""
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    blocks = []
    for block in root.iter(f"{SVG}g"):
        if block.get("class") != "block":
            continue
        groups = list(block)
        assert {g.tag for g in groups} == {f"{SVG}g"}
        reads = [(box_text(g), "stroke-dasharray" in one(g, "path").attrib)
                 for g in groups if g.get("class", "").split()[0] == "read"]
        [command] = [box_text(g) for g in groups if g.get("class") == "command"]
        writes = [(box_text(g), "".join(t.text or "" for t in g.iter(f"{SVG}text") if t.get("class") == "when"))
                  for g in groups if g.get("class") == "write"]
        assert len(reads) + 1 + len(writes) == len(groups)
        blocks.append((reads, command, writes))
    return blocks


def one(group: ET.Element, tag: str) -> ET.Element:
    """The one element ``tag`` (``"rect"``, ``"path"``) inside ``group``."""
    [found] = group.iter(f"{SVG}{tag}")
    return found


def box_text(group: ET.Element) -> str:
    """The text in the box of a read, command or write group (not the label of an alternative)."""
    [text] = [t for t in group.iter(f"{SVG}text") if t.get("class") != "when"]
    return text.text or ""
