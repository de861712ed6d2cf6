"""jupyter_kernel_test conformance for the s2o kernel.

The kernel is installed from the current interpreter into a temporary prefix
(``python -m s2o_kernel install --prefix``) and started with a settings file
(``S2O_CONFIG``) whose allowlist grants ``print``, so ``code_hello_world``
exercises the stdout routing of ``set_parent``. ``log`` lines are the stderr
sample and ``output`` parts the display_data samples.

Every ``KernelTests`` attribute that applies is filled. The two features the
kernel deliberately does not have is tested as such instead of being
skipped: ``clear_output`` (never sent; nbval ignores it), see
``test_clear_output``.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import jupyter_kernel_test
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from kernel_harness import install_spec, kernel_env

from s2o_kernel.kernel.history import HISTORY_ENV

pytestmark = pytest.mark.timeout(120)

NAME = "s2o-jkt"

ALLOWLIST = """\
len
sum
print
math
s2o_kernel.examples.countdown as countdown
"""

SETTINGS = f'allowlist = """\n{ALLOWLIST}"""\n'


class _Fixture:
    """Installs the spec and writes the settings file once per test class."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="s2o-jkt-"))
        self.kernels = install_spec(self.root / "prefix", NAME)
        self.cwd = self.root / "cwd"
        self.cwd.mkdir()
        self.settings = self.root / "s2o.toml"
        self.settings.write_text(SETTINGS)

    def start(self) -> KernelManager:
        km = KernelManager(
            kernel_name=NAME, kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(self.kernels)])
        )
        # A history file of its own: the history tests search every session of the file.
        env = kernel_env({"S2O_CONFIG": str(self.settings), HISTORY_ENV: str(self.root / "history.sqlite")})
        km.start_kernel(env=env, cwd=str(self.cwd))
        return km

    def cleanup(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


class S2OKernelTests(jupyter_kernel_test.KernelTests):
    kernel_name = NAME
    language_name = "s2o"
    file_extension = ".s2o"

    code_hello_world = "print('hello, world')"
    code_stderr = '{"log": "a trace line"}'

    completion_samples = [
        {"text": "math.sq", "matches": {"math.sqrt"}},
        {"text": "%lsm", "matches": {"%lsmagic"}},
        {"text": "%%fr", "matches": {"%%fragment"}},
        {"text": "coun", "matches": {"countdown"}},
    ]

    complete_code_samples = [
        "1 + 2",
        '{"var": {"x": 1}}',
        '"Hello {name}"',
        "{ 6 * 7 }",
        "# NBVAL_SKIP\nlen([1])",
        "%vars",
        "%%allowlist\nlen\n",  # a blank line ends a cell magic's body, as in IPython
    ]
    incomplete_code_samples = [
        "len(",
        '{"var": {"x": 1}',
        '[{"var":\n',
        "%%allowlist",
        "%%allowlist\nlen",
        '%limits {"time":',
    ]
    invalid_code_samples = ["1 +", "x = 1", '{"var" 1}', "a; b"]

    code_page_something = "len?"
    code_generate_error = "x.__class__"

    code_execute_result = [
        {"code": "1 + 2", "result": "3"},
        {"code": "[1, 2]", "result": "[1, 2]"},
        {"code": '"Hello {name}"', "result": "'Hello {name}'"},
        {"code": "{ 6 * 7 }", "result": "42"},
        {"code": "sum(countdown(3))", "result": "6"},
        {"code": "%lsmagic", "mime": "text/plain"},
    ]
    code_history_pattern = "1 + *"
    supported_history_operations = ("tail", "range", "search")

    code_inspect_sample = "math.sqrt"

    code_display_data = [
        {"code": '{"output": "hello"}', "mime": "text/plain"},
        {"code": '[{"output": {"html": "<b>hi</b>"}}, {"log": "done"}]', "mime": "text/html"},
        {"code": '{"output": {"image": "iVBORw0KGgo="}}', "mime": "image/png"},
    ]

    _fixture: _Fixture

    @classmethod
    def setUpClass(cls) -> None:
        cls._fixture = _Fixture()
        cls.km = cls._fixture.start()
        cls.kc = cls.km.client()
        cls.kc.start_channels()
        cls.kc.wait_for_ready(timeout=60)

    @classmethod
    def tearDownClass(cls) -> None:
        super().tearDownClass()
        cls._fixture.cleanup()

    def test_clear_output(self) -> None:
        """The kernel never sends clear_output / update_display_data (nbval ignores them)."""
        self.flush_channels()
        for code in ("1 + 2", '{"var": {"y": 1}}', "%vars", "x.__class__", "len?"):
            _, outputs = self.execute_helper(code, stop_on_error=False)
            kinds = {m["msg_type"] for m in outputs}
            self.assertFalse(kinds & {"clear_output", "update_display_data"}, (code, kinds))

    def test_execute_stdout_parent(self) -> None:
        """print output is a stream whose parent is the cell's request."""
        self.flush_channels()
        msg_id = self.kc.execute(self.code_hello_world)
        reply = self.kc.get_shell_msg(timeout=15)
        self.assertEqual(reply["parent_header"]["msg_id"], msg_id)
        seen: list[dict[str, Any]] = []
        while True:
            msg = self.kc.get_iopub_msg(timeout=5)
            if msg["msg_type"] == "stream":
                seen.append(msg)
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle" \
                    and msg["parent_header"].get("msg_id") == msg_id:  # fmt: skip
                break
        self.assertTrue(seen)
        self.assertTrue(all(m["parent_header"].get("msg_id") == msg_id for m in seen))


class S2OIopubWelcomeTests(jupyter_kernel_test.IopubWelcomeTests):
    kernel_name = NAME
    support_iopub_welcome = True
    _fixture: _Fixture

    @classmethod
    def setUpClass(cls) -> None:
        cls._fixture = _Fixture()
        cls.km = cls._fixture.start()
        cls.kc = cls.km.client()

    @classmethod
    def tearDownClass(cls) -> None:
        super().tearDownClass()
        cls._fixture.cleanup()
