"""Every session the README and the user guide show runs as shown (issue 31, items 2, 3 and 13).

A session is a fenced block (no language) whose first line is ``In [n]: ``: cells (continuation
lines ``   ...: ``), each followed by what ``jupyter console`` shows of it: printed or logged text,
``Out[n]: `` and the result's text, or the error's traceback lines. Each Markdown file's sessions run
in order in one fresh kernel (contained, the default), in ``notebooks/`` (the folder a notebook there
runs in, so ``%config examples/…`` finds its file), with a data folder of its own for the demo
database. Prompt numbers are not compared.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kernel_harness import execute, running_kernel

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[2]

#: The files with sessions, each run in its own kernel.
FILES = ("README.md", "docs/cells.md", "docs/outside-world.md")

PROMPT = re.compile(r"^In \[\d+\]: ?(.*)$")
MORE = re.compile(r"^\s+\.\.\.: ?(.*)$")
OUT = re.compile(r"Out\[\d+\]:")


def sessions(text: str) -> Iterator[tuple[str, str]]:
    """``(cell, shown)`` for each cell of each session block of ``text``, in order."""
    for block in re.findall(r"^```\n(In \[.*?)^```$", text, re.M | re.S):
        cell: list[str] | None = None
        shown: list[str] = []
        for line in block.splitlines():
            start = PROMPT.match(line)
            if start:
                if cell is not None:
                    yield "\n".join(cell), "\n".join(shown).strip("\n")
                cell, shown = [start.group(1)], []
            elif (more := MORE.match(line)) and cell is not None and not shown:
                cell.append(more.group(1))
            else:
                shown.append(line)
        if cell is not None:
            yield "\n".join(cell), "\n".join(shown).strip("\n")


def console_text(outputs: list[dict[str, Any]]) -> str:
    """What ``jupyter console`` prints of a cell's outputs (a multi-line result starts on a new line)."""
    parts = []
    for msg in outputs:
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream":
            parts.append(content["text"].rstrip("\n"))
        elif kind == "execute_result":
            text = content["data"]["text/plain"]
            parts.append("Out[_]:" + ("\n" if "\n" in text else " ") + text)
        elif kind == "display_data":
            parts.append(content["data"].get("text/plain", ""))
        elif kind == "error":
            parts.append("\n".join(content["traceback"]))
    return "\n".join(parts)


def test_the_session_parser_reads_cells_and_outputs() -> None:
    text = "```\nIn [1]: {\n   ...:   \"var\": 1\n   ...: }\n\nIn [2]: x\nOut[2]: 1\n```\n"
    assert list(sessions(text)) == [('{\n  "var": 1\n}', ""), ("x", "Out[2]: 1")]


@pytest.mark.parametrize("name", FILES)
def test_the_sessions_shown_run_as_shown(name: str, kernels_dir: Path,
                                         tmp_path_factory: pytest.TempPathFactory) -> None:
    cells = list(sessions((ROOT / name).read_text(encoding="utf-8")))
    assert cells, f"{name} shows no session"
    env = {"S2O_DATA_DIR": str(tmp_path_factory.mktemp("data"))}
    with running_kernel(kernels_dir, ROOT / "notebooks", env=env) as (_km, kc):
        for cell, shown in cells:
            _reply, outputs = execute(kc, cell, allow_stdin=False)
            assert console_text(outputs) == OUT.sub("Out[_]:", shown), cell
