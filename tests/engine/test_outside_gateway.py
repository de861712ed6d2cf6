"""The gateway (SPEC 7.1): one table of kinds, profile fields evaluated with the secrets, masking,
timeouts, and pools that close; the secrets file; the worker's copy of the settings."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from s2o_kernel.engine import Engine, Session, default_settings, make_settings
from s2o_kernel.engine.errors import S2OError
from s2o_kernel.engine.outside import gateway as gateway_module
from s2o_kernel.engine.outside.call import OutsideCall
from s2o_kernel.engine.outside.gateway import Gateway
from s2o_kernel.engine.outside.secrets import MASK, Masker, secret_reads, worker_settings
from s2o_kernel.engine.settings import merge

SECRET = "s3cr3t-gw-value"


def _settings(**extra: Any) -> Any:
    return make_settings(merge(default_settings().to_dict(), {
        "secrets": {"K": SECRET},
        "profiles": {"api": {"keyed": {"url": "s2o-echo:", "query": {"key": "{ f'{sys.secret[\"K\"]}' }"}},
                             "missing": {"url": "{ f'http://h/{sys.secret[\"ABSENT\"]}' }"}}},
        **extra,
    }))


def test_a_call_evaluates_the_profile_with_the_secrets_and_masks_the_result() -> None:
    gw = Gateway(_settings())
    try:
        result = gw.call_sync(OutsideCall("api", "keyed", {"method": "GET", "path": "/p"}, "api", 5.0))
        assert result == {"method": "GET", "path": "/p", "query": {"key": MASK}, "body": None}
        assert SECRET in gw.masker.texts
    finally:
        gw.close()


def test_unknown_profile_missing_secret_and_unknown_kind_are_coded_errors_at_the_commands_path() -> None:
    gw = Gateway(_settings())
    try:
        with pytest.raises(S2OError) as exc:
            gw.call_sync(OutsideCall("api", "nope", {}, "commands[1].api", 5.0))
        assert (exc.value.code, exc.value.path) == ("unknown-profile", "commands[1].api")
        with pytest.raises(S2OError) as exc:
            gw.call_sync(OutsideCall("api", "missing", {}, "api", 5.0))
        assert exc.value.code == "missing-secret" and "profiles.api.missing.url" in exc.value.message
    finally:
        gw.close()


def test_handler_failures_are_masked_and_coded(monkeypatch: pytest.MonkeyPatch) -> None:
    async def leaky(gw: Gateway, profile: Any, request: OutsideCall, on_stream: Any) -> Any:
        raise RuntimeError(f"driver said: password={SECRET}")

    async def slow(gw: Gateway, profile: Any, request: OutsideCall, on_stream: Any) -> Any:
        await asyncio.sleep(5)

    async def coded(gw: Gateway, profile: Any, request: OutsideCall, on_stream: Any) -> Any:
        raise S2OError("api-status", f"bad {SECRET}", details={"status": 500, "body": {"echo": SECRET}})

    gw = Gateway(_settings())
    try:
        for handler, code in ((leaky, "api-failed"), (coded, "api-status"), (slow, "api-timeout")):
            monkeypatch.setitem(gateway_module.HANDLERS, "api", handler)
            with pytest.raises(S2OError) as exc:
                gw.call_sync(OutsideCall("api", "keyed", {}, "api", 0.3))
            assert exc.value.code == code
            assert SECRET not in exc.value.message and SECRET not in repr(exc.value.details)
        monkeypatch.setitem(gateway_module.HANDLERS, "db", slow)
        with pytest.raises(S2OError) as exc:
            gw.call_sync(OutsideCall("db", "demo", {}, "db", 0.3))
        assert exc.value.code == "timedOut"
    finally:
        gw.close()


def test_call_from_a_sessions_loop_and_close_ends_the_thread() -> None:
    gw = Gateway(_settings())
    before = threading.active_count()

    async def from_a_loop() -> Any:
        return await gw.call(OutsideCall("api", "echo", {"path": "/a"}, "api", 5.0))

    assert asyncio.run(from_a_loop())["path"] == "/a"
    assert gw._pools
    gw.close()
    assert not gw._pools
    assert threading.active_count() < before + 1
    assert gw.call_sync(OutsideCall("api", "echo", {}, "api", 5.0))["path"] == "/"  # opens anew
    gw.close()


def test_session_replaces_its_gateway_when_profiles_or_secrets_change() -> None:
    s = Session(Engine(_settings()))
    first = s.outside
    s.update_settings({"limits": {"time": 10}})
    assert s.outside is first
    s.update_settings({"secrets": {"NEW": "x-new"}})
    assert s.outside is not first


def test_secret_reads_and_masking() -> None:
    assert secret_reads("{ f'Bearer {sys.secret[\"A\"]}{sys.secret[\"B\"]}{sys.secret[\"A\"]}' }") == ["A", "B"]
    assert secret_reads("plain {sys.secret['A']}") == [] and secret_reads("{ not python ( }") == []
    m = Masker(["abc", "abcdef"])
    assert m.value({"abcdef": ["x abc y", 1]}) == {MASK: [f"x {MASK} y", 1]}


def test_the_worker_copy_keeps_names_and_secret_reads_not_values() -> None:
    data = merge(_settings().to_dict(), {"profiles": {"db": {"pg": {"url": "postgresql://u:literal-pw@h/db"}}}})
    copy = worker_settings(data)
    assert copy["profiles"]["db"]["pg"]["url"] == MASK
    assert secret_reads(copy["profiles"]["api"]["keyed"]["query"]["key"]) == ["K"]
    assert SECRET not in repr(copy) and "literal-pw" not in repr(copy)
    assert make_settings(copy).profiles.api["keyed"].url == MASK  # still valid settings


def test_a_secrets_file_is_read_at_load_and_never_shown(tmp_path: Any) -> None:
    file = tmp_path / "secrets.toml"
    file.write_text('FROM_FILE = "file-secret-value"\nK = "overridden"\n')
    settings = make_settings({"secrets_file": str(file), "secrets": {"K": "given"}})
    assert settings.secrets == {"FROM_FILE": "file-secret-value", "K": "given"}
    assert "file-secret-value" not in repr(settings.masked_dict())
    assert worker_settings(settings.to_dict())["secrets_file"] is None
    file.write_text('BAD = 3\n"not a name" = "v"\n')
    with pytest.raises(S2OError) as exc:
        make_settings({"secrets_file": str(file)})
    assert (exc.value.code, exc.value.stage) == ("settings", "load") and "'BAD'" in exc.value.message


#: Run in a fresh interpreter: the kernel's per-cell path (``asking.install`` makes the session's door), cells
#: that call nothing outside, then an ``api`` call on the embedded echo profile.
_LAZY_IMPORTS = """
import sys
from s2o_kernel.engine import Engine, Session, default_settings
from s2o_kernel.kernel import asking
session = Session(Engine(default_settings()))
asking.install(session, lambda text, password: "yes")
assert session.evaluate("1 + 1") == 2
assert session.run_fragment({"var": {"x": "{ 2 }"}}).code == "success"
print(sorted(m for m in ("httpx", "httpcore", "s2o_kernel.engine.outside.api") if m in sys.modules))
run = session.run_fragment([{"api": {"profile": "echo", "path": "/p"}}, {"return": "{ result['path'] }"}])
print(run.value, "httpx" in sys.modules)
"""


def test_no_http_client_is_imported_until_a_call_needs_it() -> None:
    """The door the kernel makes at each cell imports no handler's module: httpx is imported at the first
    ``api`` call, so a kernel whose cells call no API never writes its pages (docs/performance.md, "Kernel")."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH")) if p)}
    env.pop("S2O_CONFIG", None)
    proc = subprocess.run([sys.executable, "-c", _LAZY_IMPORTS], capture_output=True, text=True, cwd=root,
                          env=env, timeout=60)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["[]", "/p True"]
