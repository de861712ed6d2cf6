"""Every payload of the adversarial corpus is contained through a real s2o kernel (SPEC 9, 12).

``test_adversarial.py`` judges the payloads on the engine (``IsolatedSession`` and
``Session``). This module sends the same payloads through the whole stack: one real
kernel process (kernelspec installed by ``kernel_harness``, driven with
jupyter_client, contained session = the kernel's default), cell by cell, the way a
notebook user would.

One kernel serves the whole module (module-scoped fixture). At its start it gets the
state that must survive every payload: ``{"var": {"agent.kept": 1, "kept_local": 2}}``.
It is restarted only when it dies or stops answering, and that counts as a failure
of the payload that did it (the new kernel gets the state again).

For each payload the settings are set with magics, the way a user would:

* ``%%allowlist`` with a body of ``# empty`` first (so a payload whose allowlist is
  refused does not run with the previous payload's allowlist), then ``%%allowlist``
  with the payload's own allowlist when it has one. A refusal at load (``ename``
  ``refused-entry`` / ``allowlist``) is a contained outcome (SPEC 12); the expression
  is then still sent, and runs with the empty allowlist.
* ``%limits`` with the SPEC 10 defaults and ``time`` = 2 s.
* ``%rules`` with SPEC 10 bare defaults: ``%rules`` merges key by key, so
  ``{"operators": {}}`` would keep the embedded default's rewrites; instead the four
  rewritten operators (``**``, ``*``, ``<<``, ``%``) are set back to ``"on"``. This
  is what the corpus assumes and what ``test_adversarial.py`` runs.
* ``%config`` of a TOML file (in a folder of its own, not the kernel's working
  directory) with the payload's ``[secrets]``.

Then the payload runs as ``%%expr`` + the expression. The kernel gets
``tests/conformance`` on its ``PYTHONPATH`` (for ``s2o_conformance_helpers``); its
worker inherits it. Its working directory is a fresh folder holding an empty
``s2o-markers/``, where the payloads aim their files.

The SPEC 12 containment check at kernel level, for each payload:

* a reply arrives within ``limits.time`` + 3 s; its status is ``ok`` with an
  ``execute_result``, or ``error`` with an ``ename`` that is a SPEC code (never
  ``unexpected`` or a Python exception name); the ``%%allowlist`` cell of the payload
  is ``ok`` or a load code;
* no text the kernel sends while the payload is handled (IOPub ``execute_result`` and
  ``display_data`` data, ``stream`` text, ``error`` ename / evalue / traceback and
  the ``execute_reply`` of every cell above and of the checks below, plus IOPub
  messages that arrive with another parent or none) contains the secret's value (or 8 characters of it), a host
  text (``host-secret-7f3a`` …), the repr of a module, frame, code object, generator,
  coroutine, async generator or traceback, or ``File "`` (a host frame); the list is
  ``containment.py``'s plus ``File "``. A marker written in the payload itself is
  the user's text echoed back and does not count (as in ``containment.py``);
* no file appears in the kernel's working directory (``s2o-markers/`` stays empty);
* no process is started: the kernel's only living descendants are contained-session
  workers, and nothing else runs in the kernel's working directory;
* the kernel is alive and still answers: ``1 + 1`` gives ``2`` and
  ``agent.kept + kept_local`` gives ``3``.

A failing test here is a containment finding for the kernel or the engine: the test
must not be weakened to pass.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from queue import Empty
from typing import Any

import containment as C
import pytest
from kernel_harness import (
    PACKAGE_ROOT,
    drain,
    install_spec,
    shell_reply,
    start_kernel,
    stop_kernel,
)

CORPUS = Path(__file__).resolve().parents[1] / "adversarial" / "corpus.jsonl"
CASES = [json.loads(line) for line in CORPUS.read_text().splitlines() if line.strip()]
CASE_IDS = [c["id"] for c in CASES]
HELPERS_DIR = Path(__file__).resolve().parents[1] / "conformance"

#: ``limits.time`` for every payload, seconds.
TIME_LIMIT = 2.0
#: A reply must arrive within the time limit plus this (SPEC 12 gives the engine 2 s; 1 s more
#: for the kernel's own round trip).
REPLY_GRACE = 3.0
#: After a late reply, how long to wait before the kernel counts as hung (and is restarted).
HUNG_AFTER = 10.0
#: Timeout for setup cells and the liveness checks.
CELL_TIMEOUT = 15.0

#: SPEC 10 limits (``limits.time`` lowered to TIME_LIMIT), set before every payload.
BASE_LIMITS = {"time": TIME_LIMIT, "loop_iterations": 10000, "db_rows": 10000, "llm_cost": 0.5,
               "definition_length": 20480, "memory": 1 << 30}
#: SPEC 10 bare rules: every operator "on". ``%rules`` merges, so the embedded default's
#: rewrites are switched back to "on" one by one.
BASE_RULES = {"operators": {"**": "on", "*": "on", "<<": "on", "%": "on"},
              "max_comprehension_depth": 4, "max_for_clauses": 3}

#: State set at the start of the module; it must survive every payload.
KEPT_FRAGMENT = {"var": {"agent.kept": 1, "kept_local": 2}}

#: Every SPEC code (SPEC 3, 6, 9 interrupt, 10), from containment.py (written from SPEC.md).
SPEC_CODES = C.VALIDATION_CODES | C.RUN_CODES | C.LOAD_CODES
#: Text that shows a host frame in a traceback, on top of containment.py's list.
FRAME_TEXT = 'File "'

#: Case fields this module knows how to set; anything else fails loudly instead of being ignored.
KNOWN_FIELDS = {"id", "expr", "class", "must", "why", "allowlist", "helpers", "secrets", "limits", "rules"}


# -- the kernel ------------------------------------------------------------------------------------


class KernelBox:
    """The module's one kernel: start, health, restart."""

    def __init__(self, kernels_dir: Path, root: Path) -> None:
        self.kernels_dir = kernels_dir
        self.cwd = root / "cwd"
        self.cwd.mkdir()
        (self.cwd / "s2o-markers").mkdir()
        self.config_dir = root / "config"
        self.config_dir.mkdir()
        self.km: Any = None
        self.kc: Any = None
        self.restarts = 0
        #: Stray processes already reported (each is blamed on the payload after which it showed).
        self.reported: set[int] = set()
        self.start()

    def start(self) -> None:
        pythonpath = os.pathsep.join([str(PACKAGE_ROOT), str(HELPERS_DIR)])
        self.km, self.kc = start_kernel(self.kernels_dir, self.cwd,
                                        env={"PYTHONPATH": pythonpath, "S2O_KERNEL_ISOLATED": ""})
        reply, _ = run_cell(self.kc, json.dumps(KEPT_FRAGMENT), CELL_TIMEOUT)
        assert reply is not None and reply["content"]["status"] == "ok", f"setting the kept state failed: {reply}"

    @property
    def pid(self) -> int:
        return self.km.provisioner.process.pid

    def alive(self) -> bool:
        try:
            return bool(self.km.is_alive())
        except Exception:
            return False

    def restart(self) -> None:
        self.restarts += 1
        with contextlib.suppress(Exception):
            self.kc.stop_channels()
        with contextlib.suppress(Exception):
            self.km.shutdown_kernel(now=True)
        self.start()

    def stop(self) -> None:
        stop_kernel(self.km, self.kc)


class Hung(Exception):
    """The kernel gave no reply (or no idle) at all: it is restarted."""


def _reply(kc: Any, msg_id: str, timeout: float, alive: Callable[[], bool] | None) -> dict[str, Any] | None:
    """The execute_reply to ``msg_id``; None after ``timeout`` or as soon as the kernel is dead."""
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        try:
            return shell_reply(kc, msg_id, min(remaining, 0.5))
        except (TimeoutError, Empty):
            if alive is not None and not alive():
                return None


def run_cell(kc: Any, code: str, timeout: float, *, hung_after: float = HUNG_AFTER,
             record: list[tuple[str, Any, list[dict[str, Any]]]] | None = None,
             alive: Callable[[], bool] | None = None,
             ) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """Send one cell; ``(execute_reply or None when none came within timeout + hung_after, IOPub msgs)``.

    The reply message gets the extra key ``"elapsed"`` (seconds from sending to the reply).
    With ``record``, the cell (code, reply, outputs) is appended to it, and so is every IOPub
    output that arrived meanwhile with another parent (or none), so that text sent outside
    the cell that caused it is checked too. With ``alive``, a dead kernel ends the wait early.
    """
    t0 = time.monotonic()
    msg_id = kc.execute(code, allow_stdin=False)
    reply = _reply(kc, msg_id, timeout + hung_after, alive)
    if reply is None:
        if record is not None:
            record.append((code, None, []))
        return None, []
    reply = dict(reply, elapsed=time.monotonic() - t0)
    own: list[dict[str, Any]] = []
    stray: list[dict[str, Any]] = []
    deadline = time.monotonic() + max(5.0, timeout)
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise Empty
            msg = kc.get_iopub_msg(timeout=remaining)
            if msg["parent_header"].get("msg_id") != msg_id:
                stray.append(msg)
            elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                break
            else:
                own.append(msg)
    except Empty:
        raise Hung(f"no idle status on IOPub after the reply to {code[:80]!r}") from None
    finally:
        if record is not None:
            record.append((code, reply, _outputs(own)))
            record.extend(("(IOPub message of another cell or none)", None, [m]) for m in _outputs(stray))
    return reply, _outputs(own)


def _outputs(msgs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in msgs if m["msg_type"] not in ("status", "execute_input")]


def drain_into(kc: Any, record: list[tuple[str, Any, list[dict[str, Any]]]], wait: float = 0.1) -> None:
    """Move whatever IOPub still holds into ``record`` (late or parent-less output)."""
    while True:
        try:
            msg = kc.get_iopub_msg(timeout=wait)
        except Empty:
            return
        record.extend(("(late IOPub message)", None, [m]) for m in _outputs([msg]))


# -- texts -----------------------------------------------------------------------------------------


def _data_texts(data: dict[str, Any]) -> list[str]:
    return [v if isinstance(v, str) else json.dumps(v) for v in (data or {}).values()]


def shown_texts(reply: dict[str, Any] | None, msgs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Every text the kernel sent for one cell: IOPub outputs and the execute_reply."""
    out: list[tuple[str, str]] = []
    for m in msgs:
        kind, content = m["msg_type"], m["content"]
        if kind in ("execute_result", "display_data", "update_display_data"):
            out += [(f"{kind} data", t) for t in _data_texts(content.get("data"))]
        elif kind == "stream":
            out.append((f"stream {content.get('name')}", str(content.get("text", ""))))
        elif kind == "error":
            out.append(("error ename", str(content.get("ename", ""))))
            out.append(("error evalue", str(content.get("evalue", ""))))
            out.append(("error traceback", "\n".join(map(str, content.get("traceback") or []))))
        else:
            out.append((kind, json.dumps(content)))
    if reply is not None:
        content = reply["content"]
        for key in ("ename", "evalue"):
            if key in content:
                out.append((f"execute_reply {key}", str(content[key])))
        if content.get("traceback"):
            out.append(("execute_reply traceback", "\n".join(map(str, content["traceback"]))))
        for key in ("payload", "user_expressions"):
            if content.get(key):
                out.append((f"execute_reply {key}", json.dumps(content[key])))
    return out


def text_problems(texts: list[tuple[str, str]], secrets: dict[str, str], source: str) -> list[str]:
    problems: list[str] = []
    for where, text in texts:
        problems += C.text_problems(text, where, secrets, source)
        if FRAME_TEXT in text and FRAME_TEXT not in source:
            i = text.index(FRAME_TEXT)
            problems.append(f"host frame {FRAME_TEXT!r} in {where}: …{text[max(0, i - 60): i + 80]!r}…")
    return problems


def describe(reply: dict[str, Any] | None, msgs: list[dict[str, Any]]) -> str:
    if reply is None:
        return "no reply"
    content = reply["content"]
    took = f" after {reply['elapsed']:.2f} s"
    if content["status"] == "error":
        return f"error {content.get('ename')!r}: {str(content.get('evalue'))[:300]!r}{took}"
    results = [m["content"]["data"].get("text/plain", "") for m in msgs if m["msg_type"] == "execute_result"]
    return f"{content['status']} {str(results[0])[:300] if results else '(no execute_result)'!r}{took}"


# -- setup cells -----------------------------------------------------------------------------------


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def secrets_file(box: KernelBox, secrets: dict[str, str]) -> Path:
    """A TOML file with ``[secrets]`` (JSON strings are TOML basic strings)."""
    path = box.config_dir / "secrets.toml"
    lines = ["[secrets]"] + [f"{_toml_key(k)} = {json.dumps(v)}" for k, v in secrets.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def setup_cells(box: KernelBox, case: dict[str, Any]) -> list[str]:
    """The magics that set the payload's settings (the allowlist comes after)."""
    limits = {**BASE_LIMITS, **(case.get("limits") or {})}
    limits["time"] = min(float(limits["time"]), TIME_LIMIT)
    rules = _merge(BASE_RULES, case.get("rules") or {})
    cells = ["%%allowlist\n# empty", f"%limits {json.dumps(limits)}", f"%rules {json.dumps(rules)}"]
    secrets = case.get("secrets") or {}
    if secrets:
        cells.append(f"%config {json.dumps(str(secrets_file(box, secrets)))}")
    return cells


def _merge(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in patch.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


# -- surroundings ----------------------------------------------------------------------------------


def process_problems(box: KernelBox) -> list[str]:
    """Processes besides the kernel's contained-session workers (SPEC 12: no process is started)."""
    kernel = box.pid
    others = {p for p in C.descendants(kernel) if not C.is_worker(p, kernel)} - box.reported
    problems = [f"a process was started under the kernel: pid {p} {C.cmdline(p)[:200]!r}"
                for p in sorted(C.wait_gone(others, timeout=1.0))]
    box.reported |= others
    workers = {p for p in C.descendants(kernel) if C.is_worker(p, kernel)}
    for entry in C.processes_in(str(box.cwd), exclude={kernel, *workers, *box.reported}):
        problems.append(f"a process runs in the kernel's working directory: {entry}")
        box.reported.add(int(entry.split()[1].rstrip(":")))
    return problems


def file_problems(box: KernelBox) -> list[str]:
    """Files in the kernel's working directory besides the empty ``s2o-markers/`` (removed once seen)."""
    files = [f for f in C.files_under(box.cwd) if f != "s2o-markers"]
    for f in sorted(files, reverse=True):  # clean up, so the next payload is judged on its own
        p = box.cwd / f
        with contextlib.suppress(OSError):
            p.rmdir() if p.is_dir() and not p.is_symlink() else p.unlink()
    return [f"files appeared in the kernel's working directory: {files}"] if files else []


# -- fixtures --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KernelBox]:
    kernels_dir = install_spec(tmp_path_factory.mktemp("prefix"))
    b = KernelBox(kernels_dir, tmp_path_factory.mktemp("kernel-adversarial"))
    try:
        yield b
    finally:
        b.stop()


# -- the test --------------------------------------------------------------------------------------


@pytest.mark.timeout(90)
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_payload_contained_through_kernel(case: dict[str, Any], box: KernelBox) -> None:
    """SPEC 12 containment of one corpus payload sent to a real kernel as a ``%%expr`` cell."""
    unknown = set(case) - KNOWN_FIELDS
    assert not unknown, f"{case['id']}: this test does not set the case fields {sorted(unknown)}"
    if not box.alive():  # a previous payload killed it after its own check (counted there)
        box.restart()
    kc = box.kc
    drain(kc)
    secrets = case.get("secrets") or {}
    problems: list[str] = []
    record: list[tuple[str, Any, list[dict[str, Any]]]] = []
    restart = False
    outcome = "no outcome"
    allowlist_outcome = "-"
    try:
        for cell in setup_cells(box, case):
            reply, msgs = run_cell(kc, cell, CELL_TIMEOUT, record=record, alive=box.alive)
            if reply is None:
                raise Hung(f"no reply to the setup cell {cell!r}")
            assert reply["content"]["status"] == "ok", \
                f"{case['id']}: setup cell {cell!r} failed: {describe(reply, msgs)}"

        allowlist = case.get("allowlist") or ""
        if allowlist.strip():
            reply, msgs = run_cell(kc, "%%allowlist\n" + allowlist, CELL_TIMEOUT, record=record, alive=box.alive)
            if reply is None:
                problems.append("no reply to the %%allowlist cell")
                raise Hung("no reply to the %%allowlist cell")
            content = reply["content"]
            allowlist_outcome = content["status"] if content["status"] == "ok" else content.get("ename")
            if content["status"] != "ok" and content.get("ename") not in C.LOAD_CODES:
                problems.append(f"the %%allowlist cell ended with ename {content.get('ename')!r}, not ok or a "
                                f"load code: {describe(reply, msgs)}")

        limit = min(float((case.get("limits") or {}).get("time", TIME_LIMIT)), TIME_LIMIT)
        reply, msgs = run_cell(kc, "%%expr\n" + case["expr"], limit + REPLY_GRACE, record=record, alive=box.alive)
        outcome = describe(reply, msgs)
        if reply is None:
            problems.append(f"no reply within {limit + REPLY_GRACE + HUNG_AFTER:g} s" +
                            ("" if box.alive() else " (the kernel died)"))
            raise Hung("no reply")
        content = reply["content"]
        if reply["elapsed"] > limit + REPLY_GRACE:
            problems.append(f"the reply took {reply['elapsed']:.2f} s, over limits.time + {REPLY_GRACE:g} s")
        if content["status"] == "ok":
            if not any(m["msg_type"] == "execute_result" for m in msgs):
                problems.append(f"status ok without an execute_result: {[m['msg_type'] for m in msgs]}")
        elif content["status"] == "error":
            if content.get("ename") not in SPEC_CODES:
                problems.append(f"ename {content.get('ename')!r} is not a SPEC code: {outcome}")
        else:
            problems.append(f"reply status {content['status']!r}: {outcome}")
    except Hung as exc:
        if not problems:
            problems.append(f"the kernel stopped answering: {exc}")
        restart = True

    problems += file_problems(box)
    if box.alive():
        problems += process_problems(box)
    else:
        problems.append("the kernel process died")
        restart = True

    if not restart:
        for code, want in (("1 + 1", "2"), ("agent.kept + kept_local", "3")):
            try:
                reply, msgs = run_cell(kc, code, CELL_TIMEOUT, hung_after=0, record=record, alive=box.alive)
            except Hung as exc:
                reply, msgs = None, []
                problems.append(f"after the payload, {code!r}: {exc}")
            if reply is None:
                problems.append(f"after the payload, the kernel does not answer {code!r} within {CELL_TIMEOUT:g} s")
                restart = True
                break
            got = [m["content"]["data"].get("text/plain") for m in msgs if m["msg_type"] == "execute_result"]
            if got != [want]:
                problems.append(f"after the payload, {code!r} gave {describe(reply, msgs)} (expected {want})")

    # Every text the kernel sent during this payload's cells, whatever cell it was attached to.
    if not restart:
        drain_into(kc, record)
    source = case["expr"] + "\n" + (case.get("allowlist") or "")
    for label, reply, msgs in record:
        for p in text_problems(shown_texts(reply, msgs), secrets, source):
            problems.append(f"in the output of {label[:60]!r}: {p}")

    if restart:
        box.restart()
    print(f"{case['id']:<9} {case['class']:<7} allowlist: {allowlist_outcome:<13} {outcome}")
    assert not problems, (f"{case['id']} ({case['class']}) not contained through the kernel; "
                          f"outcome: {outcome}\n  " + "\n  ".join(problems))


# -- the checks themselves -------------------------------------------------------------------------


def _result_text(reply: dict[str, Any] | None, msgs: list[dict[str, Any]]) -> str | None:
    got = [m["content"]["data"].get("text/plain") for m in msgs if m["msg_type"] == "execute_result"]
    return got[0] if reply is not None and reply["content"]["status"] == "ok" and len(got) == 1 else None


def test_text_check_flags_what_it_must() -> None:
    """The text check flags a secret (whole or 8 characters of it), host texts, reprs and host frames."""
    secrets = {"OPENAI_KEY": "sk-test-secret-0042"}
    for text in ("key sk-test-secret-0042", "…secret-0042", "host-secret-7f3a", "<frame at 0x1>",
                 "<generator object rows at 0x1>", 'File "/x/y.py", line 3, in f'):
        assert text_problems([("t", text)], secrets, "1 + 1"), text
    assert not text_problems([("t", "'Bearer ***'")], secrets, "1 + 1")


@pytest.mark.timeout(90)
def test_the_kernel_runs_payloads_as_configured(box: KernelBox) -> None:
    """The payloads above really ran with the settings they were given, and a written file is seen.

    Guards against a vacuous pass: the settings magics took effect, the secret is set, the
    helpers module imports in the worker, the worker's working directory is the kernel's, an
    (unsafe, deliberately granted) ``open`` cannot write there (the worker is confined by the OS),
    and ``file_problems`` notices a file written there.
    """
    if not box.alive():
        box.restart()
    kc = box.kc
    drain(kc)
    case = {"id": "self-check", "secrets": {"OPENAI_KEY": "sk-test-secret-0042"}}
    for cell in setup_cells(box, case):
        reply, msgs = run_cell(kc, cell, CELL_TIMEOUT)
        assert reply is not None and reply["content"]["status"] == "ok", (cell, describe(reply, msgs))
    reply, msgs = run_cell(kc, "%limits", CELL_TIMEOUT)
    assert json.loads(_result_text(reply, msgs) or "{}").get("time") == TIME_LIMIT
    reply, msgs = run_cell(kc, "%rules", CELL_TIMEOUT)
    assert json.loads(_result_text(reply, msgs) or "{}").get("operators") == BASE_RULES["operators"]
    reply, msgs = run_cell(kc, "%allowlist", CELL_TIMEOUT)
    assert _result_text(reply, msgs) == "# empty"
    reply, msgs = run_cell(kc, "%%expr\n'x' * 3", CELL_TIMEOUT)  # no rewrite: plain str * int
    assert _result_text(reply, msgs) == "'xxx'"
    reply, msgs = run_cell(kc, "%%expr\nf'Bearer {sys.secret[\"OPENAI_KEY\"]}'", CELL_TIMEOUT)
    assert _result_text(reply, msgs) == "'Bearer ***'", describe(reply, msgs)
    reply, msgs = run_cell(kc, "%%allowlist\ns2o_conformance_helpers.rows as rows", CELL_TIMEOUT)
    assert reply is not None and reply["content"]["status"] == "ok", describe(reply, msgs)
    reply, msgs = run_cell(kc, "%%expr\n[r['id'] for r in rows()]", CELL_TIMEOUT)
    assert _result_text(reply, msgs) == "[0, 1, 2]", describe(reply, msgs)
    workers = [p for p in C.descendants(box.pid) if C.is_worker(p, box.pid)]
    assert workers and all(os.readlink(f"/proc/{p}/cwd") == os.path.realpath(box.cwd) for p in workers)

    unsafe = box.config_dir / "unsafe.toml"
    unsafe.write_text('allow_unsafe_entries = true\nallowlist = "open"\n')
    safe = box.config_dir / "safe.toml"
    safe.write_text('allowlist = "# empty"\nallow_unsafe_entries = false\n')
    try:
        reply, msgs = run_cell(kc, f"%config {json.dumps(str(unsafe))}", CELL_TIMEOUT)
        assert reply is not None and reply["content"]["status"] == "ok", describe(reply, msgs)
        reply, msgs = run_cell(kc, "%%expr\nopen('s2o-markers/self-check', 'w')", CELL_TIMEOUT)
        # the worker is confined by the OS (SPEC 12): even a granted open cannot write outside its scratch folder
        assert reply is not None and reply["content"].get("ename") == "runtime", describe(reply, msgs)
        assert not file_problems(box), "the confined worker wrote a file"
        (box.cwd / "s2o-markers" / "self-check").write_text("x")
        assert file_problems(box), "a file written in s2o-markers/ was not noticed"
        assert not file_problems(box), "file_problems did not clean up"
    finally:
        reply, msgs = run_cell(kc, f"%config {json.dumps(str(safe))}", CELL_TIMEOUT)
        assert reply is not None and reply["content"]["status"] == "ok", describe(reply, msgs)
        file_problems(box)
