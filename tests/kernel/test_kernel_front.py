"""The front end through a real kernel (issue 8): output caps and the kernel's memory, sanitised html,
image types, lone surrogates, and magics that never quote a file that is not valid input (SPEC 9, 12).

Each test drives a real s2o kernel process (``tests/support/kernel_harness.py``): contained (the default)
and, where the kernel's own memory is measured, in-process too.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from containment import status_kib
from kernel_harness import MODES, execute, result_data, running_kernel, shell_reply

from s2o_kernel import engine
from s2o_kernel.engine import Engine, S2OError, Session, default_settings
from s2o_kernel.kernel import render
from s2o_kernel.kernel.magics import files
from s2o_kernel.kernel.runner import CellRunner

pytestmark = pytest.mark.timeout(300)

#: The first line of a file that must never show in a notebook.
SECRET_LINE = "root:$6$hunter2-hash:19000:0:99999:7:::"


@pytest.fixture(scope="module", params=list(MODES))
def kernel(request: pytest.FixtureRequest, kernels_dir: Path, kernel_cwd: Path) -> Iterator[tuple[Any, Any]]:
    """``(manager, client)`` of a kernel of each kind."""
    with running_kernel(kernels_dir, kernel_cwd, env={"S2O_KERNEL_ISOLATED": MODES[request.param]}) as (km, kc):
        yield km, kc


@pytest.fixture
def kc(kernel: tuple[Any, Any]) -> Iterator[Any]:
    """The client, with the embedded default limits back after each test."""
    _km, client = kernel
    yield client
    reply, _ = execute(client, '%limits {"output_part_bytes": 1048576, "output_parts": 1000, '
                               '"output_bytes": 16777216, "time": 30}')
    assert reply["status"] == "ok", reply


def ok(reply: dict[str, Any]) -> None:
    assert reply["status"] == "ok", reply


def displays(outputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m["content"]["data"] for m in outputs if m["msg_type"] == "display_data"]


def loop(n: int, text: str) -> str:
    """A fragment cell that outputs the text part ``text`` (an expression) ``n`` times."""
    return json.dumps({"for": {"item": "i", "in": f"{{ range({n}) }}", "commands": [{"output": f"{{ {text} }}"}]}})


def run_counting(kc: Any, code: str, timeout: float = 240) -> tuple[dict[str, Any], int, int, list[str]]:
    """Run ``code`` keeping nothing of its output parts: ``(reply, parts, characters, error enames)``.

    The progress display of a long run (``display_data`` with a ``display_id``) is not a part."""
    msg_id = kc.execute(code)
    parts = chars = 0
    errors: list[str] = []
    deadline = time.monotonic() + timeout
    while True:
        msg = kc.get_iopub_msg(timeout=max(deadline - time.monotonic(), 0.1))
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind = msg["msg_type"]
        if kind == "display_data" and "display_id" not in msg["content"].get("transient", {}):
            parts += 1
            chars += len(msg["content"]["data"].get("text/plain", ""))
        elif kind == "error":
            errors.append(msg["content"]["ename"])
        elif kind == "status" and msg["content"]["execution_state"] == "idle":
            break
    return shell_reply(kc, msg_id, timeout)["content"], parts, chars, errors


# -- output caps and the kernel's memory (SPEC 12) ------------------------------------------------


def test_many_large_parts_keep_the_kernel_process_flat(kernel: tuple[Any, Any], kc: Any) -> None:
    """Issue 8: 600 parts of 1 MB took the kernel process from 60 MB to 650 MB, and the worker died
    serialising a reply that carried every part again. Parts now stream and nothing keeps them."""
    km, _ = kernel
    pid = km.provisioner.process.pid
    ok(execute(kc, '%limits {"output_bytes": 1073741824}')[0])
    ok(execute(kc, "1 + 1")[0])
    before = status_kib(pid, "VmRSS")
    reply, parts, chars, errors = run_counting(kc, loop(300, "'x' * 1000000"))
    after = status_kib(pid, "VmRSS")
    assert (reply["status"], parts, chars, errors) == ("ok", 300, 300_000_000, [])
    assert before is not None and after is not None
    # 300 MB went through the kernel process; keeping them (as before) grows it by about that much.
    assert (after - before) * 1024 < 48 << 20, (before, after)
    assert result_data(execute(kc, "2 + 3")[1])["text/plain"] == "5"


@pytest.mark.parametrize(("limits", "cell", "shown", "named"), [
    ({"output_part_bytes": 1000}, loop(3, "'x' * 1001"), 0, "limits.output_part_bytes = 1000"),
    ({"output_parts": 5}, loop(9, "'x'"), 5, "limits.output_parts = 5"),
    ({"output_bytes": 3000}, loop(9, "'x' * 900"), 3, "limits.output_bytes = 3000"),
], ids=["part-bytes", "parts", "total-bytes"])
def test_a_run_past_each_cap_ends_with_output_limit(kc: Any, limits: dict[str, int], cell: str, shown: int,
                                                    named: str) -> None:
    ok(execute(kc, f"%limits {json.dumps(limits)}")[0])
    # onError does not handle a limit: the run ends
    handled = json.dumps({**json.loads(cell), "onError": [{"output": "handled"}]})
    reply, outputs = execute(kc, handled)
    assert (reply["status"], reply["ename"]) == ("error", "output-limit"), reply
    assert named in reply["evalue"]
    assert len(displays(outputs)) == shown and {"text/plain": "handled"} not in displays(outputs)
    assert result_data(execute(kc, "1 + 1")[1])["text/plain"] == "2"


def test_the_default_caps(kc: Any) -> None:
    """SPEC 12's defaults: 1 MiB per part, 1,000 parts and 16 MiB per run."""
    reply, parts, _, errors = run_counting(kc, loop(1, "'x' * 1048577"))
    assert (reply.get("ename"), parts, errors) == ("output-limit", 0, ["output-limit"])
    reply, parts, _, _ = run_counting(kc, loop(1, "'x' * 1048576"))
    assert (reply["status"], parts) == ("ok", 1)
    reply, parts, _, _ = run_counting(kc, loop(1001, "'x'"))
    assert (reply.get("ename"), parts) == ("output-limit", 1000)
    reply, parts, chars, _ = run_counting(kc, loop(17, "'x' * 1000000"))
    assert (reply.get("ename"), parts, chars) == ("output-limit", 16, 16_000_000)
    assert "limits.output_bytes = 16777216" in reply["evalue"]
    assert result_data(execute(kc, "1 + 1")[1])["text/plain"] == "2"


@pytest.mark.parametrize("kernel", ["contained"], indirect=True)
def test_printed_text_counts_against_the_output_bytes(kc: Any) -> None:
    """Red team: a comprehension of prints streamed 1.8 GB of ``stdout`` to the front end within the time
    limit. A contained kernel stops the run at ``limits.output_bytes``. (An in-process kernel, for
    debugging only, streams printed text through ipykernel uncapped, as docs/configuration.md says.)"""
    ok(execute(kc, '%limits {"output_bytes": 2000000}')[0])
    msg_id = kc.execute("len([print('x' * 100000) for i in range(200)])")
    printed = 0
    while True:
        msg = kc.get_iopub_msg(timeout=60)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "stream":
            printed += len(msg["content"]["text"])
        elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
    reply = shell_reply(kc, msg_id, 60)["content"]
    assert (reply["status"], reply["ename"]) == ("error", "output-limit"), reply
    assert "limits.output_bytes = 2000000" in reply["evalue"] and printed <= 2_000_000
    assert result_data(execute(kc, "1 + 1")[1])["text/plain"] == "2"


# -- html, images and surrogates (SPEC 9) -----------------------------------------------------------


def test_html_is_sanitised_with_a_text_fallback(kc: Any) -> None:
    html = ('<p>Total: <b onclick="steal()">9.5</b></p><script>alert(1)</script><img src=x onerror="steal()">'
            '<a href="javascript:steal()">link</a><iframe src="https://example.org"></iframe>')
    reply, outputs = execute(kc, json.dumps({"output": {"html": html}}))
    ok(reply)
    [data] = displays(outputs)
    assert set(data) == {"text/html", "text/plain"}
    shown = data["text/html"].lower()
    for bad in ("<script", "alert", "onclick", "onerror", "javascript:", "<iframe", "steal"):
        assert bad not in shown, (bad, data["text/html"])
    assert "<b>9.5</b>" in data["text/html"]
    assert data["text/plain"] == "Total: 9.5\nlink"


@pytest.mark.parametrize("mime", ["text/html", "image/svg+xml", "application/javascript", "image/gif", 5])
def test_an_image_of_another_type_is_refused_at_validation(kc: Any, mime: Any) -> None:
    reply, outputs = execute(kc, json.dumps([{"output": "first"}, {"output": {"image": "aGk=", "mime": mime}}]))
    assert (reply["status"], reply["ename"]) == ("error", "fragment"), reply
    assert "  at [1].output.mime" in reply["traceback"]
    assert displays(outputs) == []  # refused before anything ran


def test_images_are_png_or_jpeg_with_a_text_fallback(kc: Any) -> None:
    reply, outputs = execute(kc, json.dumps([{"output": {"image": "iVBORw0KGgo="}},
                                             {"output": {"image": "/9j/4AAQ", "mime": "image/jpeg"}}]))
    ok(reply)
    assert displays(outputs) == [{"image/png": "iVBORw0KGgo=", "text/plain": "<image/png image>"},
                                 {"image/jpeg": "/9j/4AAQ", "text/plain": "<image/jpeg image>"}]


#: Terminal control sequences a run could send a console: clear the screen, set the window title, write
#: the clipboard (OSC 52), a C1 CSI (8-bit), a NUL and a DEL.
TERMINAL = "\x1b[2J\x1b]0;owned\x07\x1b]52;c;cm0gLXJmIH4=\x07\x9b31m\x00\x7f"


def _texts(value: Any) -> Iterator[str]:
    """Every string in a message's content (keys too)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _texts(key)
            yield from _texts(item)
    elif isinstance(value, list):
        for item in value:
            yield from _texts(item)


def test_terminal_control_sequences_are_shown_escaped(request: pytest.FixtureRequest, kc: Any) -> None:
    """Red team 3: an output part, a log line, printed text or a fail message reached ``jupyter console``
    with its escape sequences, which the terminal ran (clear the screen, set its title, write the
    clipboard). Control characters but tab, newline and carriage return are shown as ``\\xNN`` (an
    in-process kernel's printed text goes to its own ``stdout`` as it is)."""
    contained = request.node.callspec.params["kernel"] == "contained"
    printing = [{"var": {"p": "{ print('p\\x1b[2J\\tq') }"}}] if contained else []
    code = json.dumps([{"output": f"a{TERMINAL}b"}, {"output": {"html": f"<b>{TERMINAL}</b>"}},
                       {"log": f"l{TERMINAL}"}, *printing, {"fail": f"f{TERMINAL}"}])
    reply, outputs = execute(kc, code)
    assert (reply["status"], reply["ename"]) == ("error", "failCommand"), reply
    shown = "".join(_texts([reply, [m["content"] for m in outputs]]))
    for char in "\x1b\x07\x9b\x00\x7f":
        assert char not in shown, repr(char)
    assert "a\\x1b[2J\\x1b]0;owned\\x07" in displays(outputs)[0]["text/plain"]
    streams = "".join(m["content"]["text"] for m in outputs if m["msg_type"] == "stream")
    assert "l\\x1b[2J" in streams and ("p\\x1b[2J\tq" in streams or not contained)
    assert "f\\x1b[2J" in reply["evalue"]


def test_a_lone_surrogate_is_shown_escaped_never_dropped(kc: Any) -> None:
    # a result: its repr was escaped already, its JSON form lost the character
    data = result_data(execute(kc, '"a\\udc80b"')[1])
    assert data == {"text/plain": "'a\\udc80b'"}
    ok(execute(kc, "%display json")[0])
    try:
        data = result_data(execute(kc, '["a\\udc80b"]')[1])
    finally:
        ok(execute(kc, "%display plain")[0])
    assert data == {"text/plain": "['a\\udc80b']", "application/json": ["a\\udc80b"]}
    # an output part, html and printed in a log line
    cell = json.dumps([{"output": "x\udc80y"}, {"output": {"html": "<i>\udc80</i>"}}, {"log": "l\udc80g"}])
    reply, outputs = execute(kc, cell)
    ok(reply)
    assert [d["text/plain"] for d in displays(outputs)] == ["x\\udc80y", "\\udc80"]
    assert displays(outputs)[1]["text/html"] == "<i>\\udc80</i>"
    assert any(m["content"].get("text") == "l\\udc80g\n" for m in outputs if m["msg_type"] == "stream")
    # an error's source line, with the caret still under the character (the JSON cell is ASCII: a
    # surrogate in the cell's own text would be replaced by the client before the kernel sees it)
    reply, _ = execute(kc, json.dumps({"output": "{ 'x\udc80y' }"}))
    assert reply["ename"] == "non-ascii"
    assert reply["traceback"][1:4] == ["  at output.text", "    'x\\udc80y'", "      ^"]


# -- magics never quote a file that is not valid input (SPEC 9.1) -----------------------------------


@pytest.fixture
def secret_files(kernel_cwd: Path) -> Path:
    (kernel_cwd / "shadow").write_text(f"{SECRET_LINE}\nbin:*:19000:0:99999:7:::\n")
    (kernel_cwd / "release.toml").write_text(f'NAME = "{SECRET_LINE}"\nVERSION_ID = "24.04"\n')
    (kernel_cwd / "quoted.toml").write_text("[hunter2]\n[hunter2]\n")  # tomllib's message quotes the key
    return kernel_cwd


def _no_secret(reply: dict[str, Any]) -> None:
    text = json.dumps(reply)
    assert "hunter2" not in text and "root:" not in text, reply


@pytest.mark.parametrize(("magic", "ename", "where"), [
    ("%run shadow", "syntax", "(line 1, column 1)"),
    ("%state load shadow", "syntax", "(line 1, column 1)"),
    ("%config shadow", "settings", "(line 1, column 5)"),
    ("%config release.toml", "settings", "2 of its 2 top-level keys are not settings"),
    ("%config quoted.toml", "settings", "(line 2, column 9)"),
], ids=["run", "state-load", "config-not-toml", "config-not-settings", "config-toml-error"])
def test_a_file_that_is_not_valid_input_is_not_quoted(kc: Any, secret_files: Path, magic: str, ename: str,
                                                      where: str) -> None:
    reply, outputs = execute(kc, magic)
    assert (reply["status"], reply["ename"]) == ("error", ename), reply
    assert where in reply["evalue"]
    _no_secret(reply)
    for message in outputs:
        _no_secret(message["content"])
    assert json.loads(result_data(execute(kc, "%limits")[1])["text/plain"])["time"] == 30


def test_state_save_writes_strict_json(kc: Any, kernel_cwd: Path) -> None:
    # NaN and infinities never get into agent or conversation variables (they are not JSON), so
    # everything that is set can be saved as strict JSON; a lone surrogate is saved escaped
    (kernel_cwd / "nan.json").unlink(missing_ok=True)
    reply = execute(kc, '{"var": {"agent.fine": 1, "agent.ratio": "{ [1.5, float(\'nan\')] }"}}')[0]
    assert (reply["status"], reply["ename"]) == ("error", "not-json"), reply
    assert "agent.ratio[1]" in reply["evalue"]
    reply = execute(kc, '{"var": {"agent.ratio": "{ float(\'inf\') }"}}')[0]
    assert (reply["status"], reply["ename"]) == ("error", "not-json"), reply
    ok(execute(kc, '{"var": {"agent.ratio": 0.5, "conv.text": "a\\udc80"}}')[0])
    ok(execute(kc, "%state save nan.json")[0])
    text = (kernel_cwd / "nan.json").read_text(encoding="utf-8")
    assert "NaN" not in text and "Infinity" not in text
    saved = json.loads(text)
    assert saved["agent"] == {"ratio": 0.5} and saved["conv"]["text"] == "a\udc80"
    ok(execute(kc, "%reset")[0])


@pytest.mark.parametrize(("state", "ename"), [
    ({"agent": {"ok": 1, "None": 2}}, "fragment"),
    ({"agent": {"ok": 1, "if": 2}}, "fragment"),
    ({"agent": {"ok": 1}, "conv": {"x[0]": 2}}, "fragment"),
    ({"agent": {"ok": 1, " ok": 2}}, "fragment"),
    ({"agent": {"ok": 1, "a.b": 2}}, "fragment"),
    ({"conv": {"ok": 1, "_p": 2}}, "underscore"),
], ids=["None", "keyword", "item", "space", "dotted", "underscore"])
def test_state_load_refuses_the_whole_file_for_one_bad_name(kc: Any, kernel_cwd: Path, state: dict[str, Any],
                                                             ename: str) -> None:
    ok(execute(kc, "%reset")[0])
    (kernel_cwd / "state.json").write_text(json.dumps(state))
    reply, _ = execute(kc, "%state load state.json")
    assert (reply["status"], reply["ename"]) == ("error", ename), reply
    assert "Nothing was loaded from state.json." in reply["traceback"]
    for scope in ("agent", "conv"):
        assert execute(kc, f"{scope}.ok")[0]["ename"] == "not-set"


def test_state_load_refuses_a_file_with_a_token_json_has_not(kc: Any, kernel_cwd: Path) -> None:
    """``NaN`` (what ``json.dumps`` writes for a float NaN) is not JSON: the file is refused as it is read,
    with the token named, and nothing is loaded."""
    ok(execute(kc, "%reset")[0])
    (kernel_cwd / "state.json").write_text(json.dumps({"agent": {"ok": 1, "ratio": float("nan")}}))
    reply, _ = execute(kc, "%state load state.json")
    assert (reply["status"], reply["ename"]) == ("error", "syntax"), reply
    assert "NaN is not JSON" in reply["evalue"]
    assert execute(kc, "agent.ok")[0]["ename"] == "not-set"


# -- units: rendering and files -----------------------------------------------------------------------


@pytest.mark.parametrize("payload", [
    "<script>steal()</script>", "<img src=x onerror=steal()>", "<a href='javascript:steal()'>x</a>",
    "<svg><script>steal()</script></svg>", "<iframe srcdoc='<script>steal()</script>'></iframe>",
    "<style>body{background:url(javascript:steal())}</style>", "<b style='x:expression(steal())'>b</b>",
    "<math><mi xlink:href='javascript:steal()'>m</mi></math>", "<form action='javascript:steal()'><input></form>",
    "<object data='javascript:steal()'></object>", "<base href='javascript:steal()//'>", "<x onclick=steal()>x</x>",
])
def test_sanitised_html_holds_no_script(payload: str) -> None:
    data = render.output_part_bundle({"type": "html", "html": f"<p>ok</p>{payload}"})
    assert "steal" not in data["text/html"] and "<p>ok</p>" in data["text/html"]
    assert "steal" not in data["text/plain"] and data["text/plain"].startswith("ok")


def test_the_text_of_html_keeps_its_blocks_cells_and_entities() -> None:
    def text(html: str) -> str:
        return render.html_text(render.sanitise_html(html))

    assert text("<h1>Cart</h1><ul><li>a &amp; b &lt;c&gt;</li><li>c</li></ul>x<br>y") == "Cart\na & b <c>\nc\nx\ny"
    assert text("<table><tr><td>1</td><td>2</td></tr><tr><th>3</th></tr></table>") == "1 2\n3"
    assert text('<a href="https://x.org/?a>b" title="q>r">link</a> and <b>bold</b>') == "link and bold"
    assert text("") == ""


def test_an_image_of_another_type_or_not_base64_is_shown_as_text_only() -> None:
    # a worker under an attacker's control could send one: the kernel refuses it too
    for part in ({"type": "image", "data": "PHN2Zz4=", "mime": "image/svg+xml"},
                 {"type": "image", "data": "aGk=", "mime": "text/html"},
                 {"type": "image", "data": "<script>", "mime": "image/png"}):
        assert list(render.output_part_bundle(part)) == ["text/plain"]


def test_escape_text_writes_every_surrogate_and_keeps_everything_else() -> None:
    assert render.escape_text("plain é 😀") == "plain é 😀"
    assert render.escape_text("a\udc80b\ud83d") == "a\\udc80b\\ud83d"
    content = {"data": {"text/plain": "x\udc80", "application/json": ["\ud800", 1, {"k\udfff": None}]}}
    assert render.escape_surrogates(content) == {
        "data": {"text/plain": "x\\udc80", "application/json": ["\\ud800", 1, {"k\\udfff": None}]}}
    same = {"a": ["b", 1]}
    assert render.escape_surrogates(same) is same


def test_magic_files_are_read_up_to_a_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(files, "MAX_MAGIC_FILE", 10)
    (tmp_path / "big.json").write_text("[" + "1," * 20 + "1]")
    with pytest.raises(S2OError) as exc:
        files.read_json("big.json")
    assert exc.value.code == "magic" and "larger than" in exc.value.message


def test_a_silent_cell_keeps_no_output() -> None:
    session = Session(Engine(default_settings()))
    runner = CellRunner(session, engine)
    out = runner.run(loop(3, "str(i)"), silent=True)
    assert out.ok and out.outputs == [] and out.published == 0
    out = runner.run(loop(3, "str(i)"))
    assert [c["data"]["text/plain"] for _, c in out.outputs] == ["0", "1", "2"]
