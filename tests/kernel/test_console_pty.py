"""``jupyter console --kernel s2o`` in a real pseudo-terminal (pexpect), as a person meets it (issue 11).

The full prompt_toolkit console (not ``--simple-prompt``): a fragment typed over two lines (the
kernel's ``is_complete`` says the first is incomplete, so the console asks for more), an expression
and its ``Out``, tab completion of a local name, and ``exit`` ending the console process. A second
console on the same history file finds the first one's cells with the up-arrow.

What the terminal shows is read with its escape sequences removed; the kernelspec is the one the
module's fixture installed (``JUPYTER_PATH``), and Jupyter's config, runtime and history files go
to temporary folders.
"""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import pexpect
import pytest
from kernel_harness import kernel_env

from s2o_kernel.kernel.history import HISTORY_ENV

pytestmark = pytest.mark.timeout(240)

#: CSI and other escape sequences, and carriage returns: what a terminal draws but a reader skips.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[()][0-9A-B]|\x1b[=>]|\r")
UP = "\x1b[A"


class Terminal:
    """A console in a pseudo-terminal; :meth:`expect` searches the text shown since the last match."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        jupyter = str(Path(sys.executable).with_name("jupyter"))
        self.child = pexpect.spawn(jupyter, ["console", "--kernel", "s2o-test"], env=env, cwd=str(cwd),
                                   encoding="utf-8", dimensions=(40, 120), timeout=60)
        self.text = ""
        self.pos = 0

    def expect(self, pattern: str, timeout: float = 60) -> re.Match[str]:
        rx = re.compile(pattern)
        end = time.monotonic() + timeout
        while True:
            found = rx.search(self.text, self.pos)
            if found:
                self.pos = found.end()
                return found
            if time.monotonic() > end:
                raise AssertionError(f"{pattern!r} not shown; the terminal shows: {self.text[self.pos:]!r}")
            try:
                self.text += _ESCAPES.sub("", self.child.read_nonblocking(4096, timeout=0.2))
            except pexpect.TIMEOUT:
                continue

    def send(self, keys: str) -> None:
        self.child.send(keys)

    def ended(self, timeout: float = 60) -> int | None:
        """Wait for the console process to end; its exit status."""
        self.child.expect(pexpect.EOF, timeout=timeout)
        self.text += _ESCAPES.sub("", self.child.before or "")
        self.child.close()
        return self.child.exitstatus

    def kill(self) -> None:
        if self.child.isalive():
            self.child.terminate(force=True)


@pytest.fixture
def console_env(kernels_dir: Path, tmp_path: Path) -> dict[str, str]:
    env = kernel_env({
        "JUPYTER_PATH": str(kernels_dir.parent),
        "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "IPYTHONDIR": str(tmp_path / "ipython"),
        HISTORY_ENV: str(tmp_path / "history.sqlite"),
        "TERM": "xterm",
    })
    return env


def _console(env: dict[str, str], cwd: Path) -> Any:
    term = Terminal(env, cwd)
    term.expect(r"s2o 0\.\d+\.\d+: Search2o agent expressions")
    term.expect(r"In \[1\]: ")
    return term


def test_console_in_a_pseudo_terminal(console_env: dict[str, str], tmp_path: Path) -> None:
    term = _console(console_env, tmp_path)
    try:
        # A fragment over two lines: Enter after an open bracket asks for more, with a continuation prompt.
        term.send('[{"var": {"price": 4}},\r')
        term.expect(r"\.\.\.: ")
        term.send('{"var": {"quantity": 3}}]\r')
        term.expect(r"In \[2\]: ")
        # An expression and its Out.
        term.send("price * quantity\r")
        term.expect(r"Out\[2\]: 12\n")
        term.expect(r"In \[3\]: ")
        # Tab completes a local name.
        term.send("quan\t")
        term.expect(r"quantity")
        term.send("\r")
        term.expect(r"Out\[3\]: 3\n")
        term.expect(r"In \[4\]: ")
        # exit ends the console, which shuts its kernel down.
        term.send("exit\r")
        assert term.ended() == 0
        assert "Shutting down kernel" in term.text
    finally:
        term.kill()
    # A new console finds the earlier cells with the up-arrow (the history file of the first).
    term = _console(console_env, tmp_path)
    try:
        term.send(UP + UP)  # exit, then quantity
        term.expect(r"In \[1\]: quantity")
        term.send("\r")
        term.expect(r"unknown-name: 'quantity' is not")  # a new kernel: the cell came back, not the variable
        term.expect(r"In \[2\]: ")
        term.send("quit()\r")
        assert term.ended() == 0
    finally:
        term.kill()
    assert not os.listdir(tmp_path / "runtime") or all(
        not name.startswith("kernel-") for name in os.listdir(tmp_path / "runtime"))


def test_progress_shows_again_after_an_answered_ask(console_env: dict[str, str], tmp_path: Path) -> None:
    """A long run that asks: its progress line before the prompt, and after the answer a new line with
    the time of the moment (not a report made while the person was typing, read only after the answer)."""
    term = _console(console_env, tmp_path)
    try:
        term.send('[{"var": {"a": "{ await slow_answer(2.8) }"}}, {"ask": {"inputs": [{"name": "who"}]}}, '
                  '{"var": {"b": "{ await slow_answer(3) }"}}]\r')
        term.expect(r"running for \d+\.\d s \(time limit 30 s\)\n")
        term.expect(r"who: ")
        time.sleep(3)  # the person takes their time
        term.send("Ada\r")
        term.expect(r"Ada\n")
        after = term.expect(r"running for (\d+\.\d) s \(time limit 30 s\)\n")
        assert float(after.group(1)) >= 2.8 + 3, after.group(0)  # the run's time now, the wait included
        term.expect(r"In \[2\]: ")
        term.send("b\r")  # the run went on to its end
        term.expect(r"Out\[2\]: 'done'\n")
    finally:
        term.kill()


def test_dataflow_prints_a_text_graph_not_svg(console_env: dict[str, str], tmp_path: Path) -> None:
    """``%dataflow`` in a terminal: the listing, then ``Out`` with the graph drawn in text (the notebook's
    SVG stays in the bundle, which the console does not print)."""
    term = _console(console_env, tmp_path)
    try:
        term.send('%dataflow {"var": {"x": "\u2020conv.userInput || \u2020agent.default", "agent.seen": "{ x }"}}\r')
        term.expect(r"reads:  agent\.default, conv\.userInput, local\.x\n")
        term.expect(r"Out\[1\]: \ndata flow: paths read --> \[command\] --> paths written \(\.\.\+ read by an "
                    r"expression\)\n\n")
        term.expect(re.escape("conv.userInput --+--> [var] --+--> local.x\n"
                              "agent.default  --+            +--> agent.seen\n"
                              "local.x        ..+\n"))
        term.expect(r"In \[2\]: ")
        assert "<svg" not in term.text
    finally:
        term.kill()


def test_streamed_text_ends_its_line_before_the_result(console_env: dict[str, str], tmp_path: Path) -> None:
    """A model's streamed answer, or printed text, that does not end with a newline: the console shows
    ``Out[N]:`` on a line of its own, not after the text (issue 31: ``… on its way.Out[5]: …``)."""
    term = _console(console_env, tmp_path)
    try:
        term.send('[{"llm": {"profile": "scripted", "input": "Hello", "streamOutput": true}}, '
                  '{"return": "{ result }"}]\r')
        term.expect(r"You said: Hello\nOut\[1\]: 'You said: Hello'\n", timeout=20)
        term.expect(r"In \[2\]: ")
        term.send("[print('on its way.', end=''), 7][1]\r")
        term.expect(r"\non its way\.\nOut\[2\]: 7\n", timeout=20)
        term.expect(r"In \[3\]: ")
        term.send("[print('a line'), 8][1]\r")  # text that ends its line: no blank line before Out
        term.expect(r"\na line\nOut\[3\]: 8\n", timeout=20)
    finally:
        term.kill()
