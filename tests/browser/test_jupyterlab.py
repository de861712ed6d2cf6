"""JupyterLab in a real browser (issue 11, SPEC 9): what a person sees of s2o results in a notebook.

A throwaway JupyterLab (``tests/support/lab_harness.py``: 127.0.0.1, a free port, a token, every
Jupyter folder in the test's temp dir, this checkout's kernel as ``s2o-browser``) serves a notebook of
five cells; Debian's headless Chromium, driven by Playwright for Python, opens it, waits for the
kernel, runs all cells from the Run menu and reads the page:

1. ``1 + 1`` shows as the plain text ``2``: a ``text/plain`` rendering, and no JSON tree viewer
   (``.jp-RenderedJSON``, the DOM of JupyterLab's ``application/json`` renderer) anywhere;
2. rows (a list of dicts with the same keys) show as an html ``<table>`` of their keys and values;
3. ``%dataflow`` shows its listing as text and its diagram as the kernel's SVG (JupyterLab's SVG
   renderer: the bundle holds no Mermaid source, docs/design.md ``%dataflow``). The notebook is then
   saved (Ctrl+S): the saved ``image/svg+xml`` is the kernel's, byte for byte; and the kernel's SVG,
   shown alone in the browser as an image, draws at its own size (``build/artefacts/dataflow-svg.png``);
4. ``list(range(3000))`` shows its first 1,000 items, then ``...``, as IPython does (issue 31);
5. ``%trace`` after a small agent shows its trace as nested ``<details>``, collapsed: the run's line only;
   a click opens it and shows the ``var`` span's line, a click on that shows what its expression gave
   (issue 33);
6. an agent definition failing two calls deep shows the error: its ename (``runtime``), the source line
   with a caret under it, and the calls that led to it, outermost first (issue 31).

A second test runs a cell past 2 s, sees its progress line while it runs, then a ``%dataflow`` cell,
saves the notebook from JupyterLab (Ctrl+S) and runs ``pytest --nbval`` on the saved file: what
JupyterLab keeps of the cleared progress line (``data: {}``) must not fail a headless rerun, which
shows no progress, nor may what it keeps of a ``%dataflow`` result (docs/testing.md, "Things to
know").

The screenshot lands in ``build/artefacts/jupyterlab.png`` (kept by CI as an artefact), also when the
test fails. Nothing started for the test outlives it: every process carries the run's marker, and a
sweep after tear-down fails the test when one is still alive (after killing it).

Chromium is never downloaded (no ``playwright install``): the test uses the system's ``chromium``
(``scripts/install-system-deps.sh`` installs Debian's) and FAILS, never skips, when it is missing.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import sys
import time
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest
from kernel_harness import kernel_env
from lab_harness import KERNEL_NAME, MARKER, LabServer, command_lines, running_lab, sweep
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Page, ViewportSize, sync_playwright

from s2o_kernel.engine import Engine, Session, bare_settings

ROOT = Path(__file__).resolve().parents[2]
#: Where CI collects artefacts; ``build/`` is git-ignored.
ARTEFACTS = ROOT / "build" / "artefacts"
SCREENSHOT = ARTEFACTS / "jupyterlab.png"
#: Chromium's switches: headless, no sandbox (CI runs as root), and nothing that calls out.
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
#: The page's size in CSS pixels, and so the screenshot's.
VIEWPORT: ViewportSize = {"width": 1280, "height": 800}
#: Milliseconds any one wait on the page may take (the first kernel start on a busy machine is slow).
PAGE_TIMEOUT = 90_000
NOTEBOOK = "browser-test.ipynb"
CELLS = [
    "1 + 1",
    "[{'item': 'tea', 'price': 3}, {'item': 'cake', 'price': 5}]",
    '%dataflow {"var": {"x": "\u2020conv.userInput || \u2020agent.default", "agent.seen": "{ x }"}}',
    "list(range(3000))",  # elided at 1,000 items, as IPython does (issue 31)
    '{"functions": {"main": {"commands": [{"var": {"x": "{ 6 * 7 }"}}, {"return": "{ x }"}]}}}',
    "%trace",  # the run's trace: nested <details>, collapsed (issue 33)
    # last: Run All Cells stops at an error; this one two calls deep (issue 31: the way back to it)
    '{"functions": {"main": {"commands": [{"call": {"function": "a"}}]}, '
    '"a": {"commands": [{"call": {"function": "b"}}]}, "b": {"commands": [{"return": "{ 7 // 0 }"}]}}}',
]
#: True in the page once every code cell shows an execution count (``[N]:``, not ``[*]:`` or ``[ ]:``).
ALL_CELLS_RAN = """(count) => {
    const prompts = [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputPrompt')];
    return prompts.length === count && prompts.every((p) => /^\\[\\d+\\]:$/.test(p.textContent.trim()));
}"""


#: The notebook of the progress test: a cell that runs past 2 s, then a quick one.
PROGRESS_NOTEBOOK = "progress-test.ipynb"
PROGRESS_CELLS = ["await slow_answer(3.5)", "1 + 1", CELLS[2]]  # the last: %dataflow
#: The expression of the error cell (the source line its error shows, with a caret).
FAILING = "7 // 0"
#: Seconds to wait for JupyterLab's save to reach the disk.
SAVE_TIMEOUT = 30.0


def _notebook(sources: list[str] = CELLS) -> dict[str, object]:
    """The nbformat 4.5 notebook of ``sources`` (default ``CELLS``) on the ``s2o-browser`` kernel, never run."""
    cells = [
        {"cell_type": "code", "execution_count": None, "id": f"cell-{i}", "metadata": {}, "outputs": [],
         "source": source}
        for i, source in enumerate(sources)
    ]
    return {
        "cells": cells,
        "metadata": {"kernelspec": {"name": KERNEL_NAME, "display_name": KERNEL_NAME, "language": "s2o"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def _chromium() -> str:
    """The system's Chromium; fails the test (never skips it) when there is none."""
    found = shutil.which("chromium")
    if found is None:
        pytest.fail("Chromium is missing: run `bash scripts/install-system-deps.sh` (installs Debian's chromium)")
    return found


@pytest.fixture
def run_id(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The run's marker, in this process's environment so Playwright's driver and the browser carry it
    too; after the test (server and browser closed), no process carrying it may be alive."""
    run = uuid.uuid4().hex
    monkeypatch.setenv(MARKER, run)
    yield run
    leftovers = sweep(run)
    assert leftovers == [], f"processes outlived the browser test (now killed): {leftovers}"


@contextmanager
def _browser_page(executable: str, profile: Path) -> Iterator[Page]:
    """A page of headless ``executable`` with the fresh profile folder ``profile``; the browser and
    Playwright's driver are closed on exit."""
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile),
            executable_path=executable,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport=VIEWPORT,
        )
        try:
            context.set_default_timeout(PAGE_TIMEOUT)
            yield context.pages[0] if context.pages else context.new_page()
        finally:
            context.close()


def _log_in(page: Page, lab: LabServer) -> None:
    """Log in on the server's login page with the token, as a person pastes it; the token never
    appears in an address (so in no error message or log either)."""
    page.goto(lab.url("login"))
    page.get_by_label("Password or token:").fill(lab.token)
    page.get_by_role("button", name="Log in", exact=True).click()
    page.wait_for_url(lambda url: "/login" not in url)


def _run_all_cells(page: Page, lab: LabServer, notebook: str = NOTEBOOK, count: int = len(CELLS),
                   while_running: str | None = None) -> None:
    """Open ``notebook`` (of ``count`` code cells) in a reset workspace, wait for the kernel to be idle,
    Run ▸ Run All Cells, wait for the text ``while_running`` (when given) in an output, and wait until
    every cell has run and the kernel is idle again."""
    page.goto(lab.url(f"lab/tree/{notebook}?reset"))
    idle = page.locator(".jp-NotebookPanel-toolbar .jp-Notebook-ExecutionIndicator[data-status='idle']")
    idle.wait_for()
    page.get_by_text(f"{KERNEL_NAME} | Idle").wait_for()  # the status bar: this kernel, started and idle
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
    if while_running is not None:
        page.locator(".jp-OutputArea-output", has_text=while_running).first.wait_for()
    page.wait_for_function(ALL_CELLS_RAN, arg=count)
    idle.wait_for()
    page.mouse.move(VIEWPORT["width"] // 2, VIEWPORT["height"] - 60)  # empty notebook space: no hover in the picture


def _dialogs(page: Page) -> str:
    """The text of any open JupyterLab dialog (for a failure message)."""
    return " | ".join(page.locator(".jp-Dialog").all_inner_texts()) or "(no dialog)"


@pytest.mark.timeout(300)
def test_jupyterlab_shows_text_a_table_and_the_error(run_id: str, tmp_path: Path) -> None:
    executable = _chromium()
    SCREENSHOT.unlink(missing_ok=True)
    with running_lab(tmp_path / "lab", run_id) as lab, _browser_page(executable, tmp_path / "profile") as page:
        (lab.root / NOTEBOOK).write_text(json.dumps(_notebook()), encoding="utf-8")
        try:
            _log_in(page, lab)
            _run_all_cells(page, lab)
        except Exception as error:
            raise AssertionError(f"{error}\ndialogs: {_dialogs(page)}\nserver log:\n{lab.log_tail()}") from error
        finally:
            ARTEFACTS.mkdir(parents=True, exist_ok=True)
            with suppress(PlaywrightError):  # a page that cannot be pictured must not hide the first error
                page.screenshot(path=str(SCREENSHOT))
        assert SCREENSHOT.stat().st_size > 0
        # The kernel is this checkout's, started by the server with the run's marker (so the sweep
        # would see it if it outlived the server).
        assert any(" -m s2o_kernel " in line for line in command_lines(run_id)), command_lines(run_id)
        _check_page(page)
        page.keyboard.press("Control+s")
        saved = _saved(lab.root / NOTEBOOK, len(CELLS))
        _check_saved_svg(page, saved)


def _check_saved_svg(page: Page, saved: dict[str, object]) -> None:
    """What JupyterLab saved of the ``%dataflow`` result, and the kernel's SVG drawn by the browser.

    JupyterLab saves the kernel's SVG as it came (its SVG renderer changes nothing in the output), so a
    headless rerun compares equal. The kernel's SVG, alone in the page as an ``<img>`` (as nbconvert's
    HTML shows it), draws at its own width and height; pictured in ``build/artefacts/dataflow-svg.png``.
    """
    [result] = [o for o in saved["cells"][2]["outputs"] if o["output_type"] == "execute_result"]  # type: ignore[index]
    fragment = json.loads(CELLS[2].removeprefix("%dataflow "))
    ours = Session(Engine(bare_settings({}))).dataflow(fragment).svg()
    assert "".join(result["data"]["image/svg+xml"]) == ours
    assert set(result["data"]) == {"image/svg+xml", "text/plain"}, result["data"].keys()
    root = ET.fromstring(ours)
    size = [int(root.get("width", "")), int(root.get("height", ""))]
    source = "data:image/svg+xml;base64," + base64.b64encode(ours.encode()).decode()
    page.set_content(f'<body style="margin:0;background:#202020"><img id="flow" src="{source}"></body>')
    image = page.locator("#flow")
    image.evaluate("(img) => img.decode()")  # rejects when the browser cannot draw it
    assert image.evaluate("(img) => [img.naturalWidth, img.naturalHeight]") == size
    page.screenshot(path=str(ARTEFACTS / "dataflow-svg.png"))


def _check_page(page: Page) -> None:
    """The assertions on what the page shows after every cell ran."""
    assert page.locator(".jp-NotebookPanel-toolbar .jp-KernelName").inner_text() == KERNEL_NAME

    cells = page.locator(".jp-Notebook .jp-CodeCell")
    assert cells.count() == len(CELLS)
    outputs = [cells.nth(i).locator(".jp-OutputArea-output") for i in range(len(CELLS))]
    assert [o.count() for o in outputs] == [1, 1, 2, 1, 1, 1, 1]

    # No JSON tree viewer anywhere: results are text/plain (and html for rows) unless %display json.
    assert page.locator(".jp-Notebook .jp-RenderedJSON").count() == 0

    # (1) 1 + 1: an execute_result rendered as plain text "2".
    expression = cells.nth(0).locator(".jp-OutputArea-executeResult .jp-OutputArea-output")
    assert expression.get_attribute("data-mime-type") == "text/plain"
    assert expression.inner_text().strip() == "2"

    # (2) rows: an html table, header the keys, one row each.
    table = cells.nth(1).locator(".jp-OutputArea-executeResult .jp-RenderedHTMLCommon table")
    assert table.count() == 1
    assert table.locator("thead th").all_inner_texts() == ["item", "price"]
    body = table.locator("tbody tr")
    assert [body.nth(i).locator("td").all_inner_texts() for i in range(body.count())] == [
        ["tea", "3"], ["cake", "5"],
    ]

    # (3) %dataflow: the listing as text, then the diagram, drawn by JupyterLab's SVG renderer.
    listing, diagram = outputs[2].nth(0), outputs[2].nth(1)
    assert listing.get_attribute("data-mime-type") == "text/plain"
    assert listing.inner_text().startswith("reads:  agent.default, conv.userInput, local.x")
    assert diagram.get_attribute("data-mime-type") == "image/svg+xml"
    assert "jp-RenderedSVG" in (diagram.get_attribute("class") or "").split()
    diagram.locator("img").wait_for()  # JupyterLab shows an SVG as an image

    # (4) a long result: its first 1,000 items, then "...", as IPython shows it.
    long = cells.nth(3).locator(".jp-OutputArea-executeResult .jp-OutputArea-output")
    assert long.get_attribute("data-mime-type") == "text/plain"
    shown = long.inner_text().strip().splitlines()
    assert shown[0] == "[0," and shown[-2:] == [" 999,", " ...]"] and len(shown) == 1001, shown[-3:]

    # (5) %trace: nested <details>, collapsed; each click opens one level and shows what it holds.
    _check_trace(cells.nth(5).locator(".jp-OutputArea-executeResult .jp-RenderedHTMLCommon"))

    # (6) the error: ename and message, the source line, a caret under it, the calls that led to it,
    # outermost first; no engine frames.
    error = outputs[6]
    assert error.get_attribute("data-mime-type") == "application/vnd.jupyter.stderr"
    lines = error.inner_text().splitlines()
    assert lines[0] == "runtime: ZeroDivisionError: integer division or modulo by zero", lines
    source = next(i for i, line in enumerate(lines) if line.strip() == FAILING)
    assert re.fullmatch(r" *\^+ *", lines[source + 1]), lines
    chain = lines.index("  called from (outermost first):")
    assert lines[chain + 1:chain + 3] == ["    functions.main.commands[0].call (a)",
                                          "    functions.a.commands[0].call (b)"], lines
    assert "Traceback" not in error.inner_text() and "s2o_kernel" not in error.inner_text()


def _check_trace(shown: object) -> None:
    """The ``%trace`` output (a locator of its html): the run's ``<details>`` closed, so its spans do not show;
    a click on its summary opens it, a click on the ``var`` span's opens that and shows its field."""
    run = shown.locator("details").first  # type: ignore[attr-defined]
    run.scroll_into_view_if_needed()  # JupyterLab renders the cells in view only (innerText is empty elsewhere)
    assert run.evaluate("(d) => d.open") is False
    assert run.locator("xpath=./summary").inner_text() == "run (agent) · ok"
    var = run.locator("details", has_text="var · functions.main.commands[0].var").first
    assert not var.is_visible()
    run.locator("xpath=./summary").click()
    assert run.evaluate("(d) => d.open") is True
    var.wait_for(state="visible")
    assert var.locator("xpath=./summary").inner_text() == "var · functions.main.commands[0].var · ok"
    field = var.locator("xpath=./div/div", has_text="x = 42")
    assert not field.is_visible()
    var.locator("xpath=./summary").click()
    field.wait_for(state="visible")
    assert field.inner_text() == "x = 42"


def _saved(path: Path, count: int) -> dict[str, object]:
    """The notebook at ``path`` once JupyterLab has saved it with every one of its ``count`` code cells
    run (an execution count each); fails after ``SAVE_TIMEOUT`` seconds."""
    deadline = time.monotonic() + SAVE_TIMEOUT
    while time.monotonic() < deadline:
        with suppress(ValueError):  # written half-way
            notebook = json.loads(path.read_text(encoding="utf-8"))
            counts = [c.get("execution_count") for c in notebook["cells"] if c["cell_type"] == "code"]
            if len(counts) == count and all(isinstance(n, int) for n in counts):
                return notebook  # type: ignore[no-any-return]
        time.sleep(0.2)
    raise AssertionError(f"JupyterLab did not save {path.name} within {SAVE_TIMEOUT} s")


@pytest.mark.timeout(300)
def test_a_notebook_saved_from_jupyterlab_after_a_long_run_passes_nbval(run_id: str, tmp_path: Path) -> None:
    """The progress line of a cell past 2 s shows in JupyterLab while it runs and is gone when it ends;
    JupyterLab saves it as an empty bundle, and nbval, rerunning the saved notebook headless (no
    progress), finds nothing to compare there; a ``%dataflow`` result is saved as the kernel sent it:
    the notebook passes as saved."""
    executable = _chromium()
    base = tmp_path / "lab"
    with running_lab(base, run_id) as lab, _browser_page(executable, tmp_path / "profile") as page:
        path = lab.root / PROGRESS_NOTEBOOK
        path.write_text(json.dumps(_notebook(PROGRESS_CELLS)), encoding="utf-8")
        try:
            _log_in(page, lab)
            _run_all_cells(page, lab, PROGRESS_NOTEBOOK, len(PROGRESS_CELLS), while_running="running for")
            cells = page.locator(".jp-Notebook .jp-CodeCell")
            result = cells.nth(0).locator(".jp-OutputArea-executeResult .jp-OutputArea-output")
            assert result.inner_text().strip() == "'done'"
            assert "running for" not in cells.nth(0).locator(".jp-OutputArea").inner_text()  # cleared
            page.keyboard.press("Control+s")
            saved = _saved(path, len(PROGRESS_CELLS))
        except Exception as error:
            raise AssertionError(f"{error}\ndialogs: {_dialogs(page)}\nserver log:\n{lab.log_tail()}") from error
    outputs = saved["cells"][0]["outputs"]  # type: ignore[index]
    assert [o["output_type"] for o in outputs] == ["display_data", "execute_result"], outputs
    assert outputs[0]["data"] == {}, outputs  # the cleared progress line, as JupyterLab keeps it
    # install_spec (lab_harness._folders) put the kernelspec in base/prefix/share/jupyter.
    env = kernel_env({"JUPYTER_PATH": str(base / "prefix" / "share" / "jupyter"),
                      "JUPYTER_CONFIG_DIR": str(base / "config"), "JUPYTER_RUNTIME_DIR": str(base / "runtime")})
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider", "--color=no", "--nbval",
         "--nbval-kernel-name", KERNEL_NAME, "-o", "addopts=", "--rootdir", str(path.parent), path.name],
        cwd=path.parent, env=env, capture_output=True, text=True, timeout=150,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{len(PROGRESS_CELLS)} passed" in proc.stdout, proc.stdout
