"""Conformance runner: ``python -m s2o_kernel.conformance [--show] [--isolated] [--time-limit S] FILE...``.

SPEC 11 (the cases and the runner) and SPEC 12 (containment).


Each line of a ``.jsonl`` file is a case: one of ``expr``, ``dynamic``,
``allowlist_only`` or ``fragment`` (an extension of SPEC 11 for SPEC 7: a
fragment run as one run, with optional ``inputs`` and ``function``); optional
settings (``allowlist``: absent means empty,
``rules``, ``limits``, ``sys``, ``const``, ``secrets``), state (``locals``,
``agent``, ``conv``), ``helpers`` (put the case file's folder on
``sys.path``) and ``expect``. Every case runs in a fresh session.

Without ``--show`` it prints ``PASS id`` or ``FAIL id: expected …, got …``
per case, then ``N passed, M failed``, and exits 1 when any case failed.
With ``--show`` it judges nothing and prints one JSON object per case
describing what happened.

``--isolated`` runs every case through an :class:`~.engine.IsolatedSession` (the kernel's
containment worker, SPEC 12) instead of an in-process :class:`~.engine.Session`, using only the
public API both share. Values then come back from the worker as JSON and ``repr`` text; a result
that holds a secret comes back masked (``***``) and is compared with the expectation masked the
same way.

Cases of the adversarial corpus (SPEC 12: they carry ``class`` and ``must`` instead of ``expect``)
are judged for containment as SPEC 12 defines it (:func:`containment_problems`): the outcome is a
coded error (never ``unexpected``) or a value; the run ends within ``limits.time`` plus 2 seconds;
no secret value, host text (string globals and literals assigned in the helpers module) or repr of a
module, frame, code object, generator, coroutine or traceback shows in the value or any message
(unless the expression itself wrote it); no file appears under ``s2o-markers/`` or in the working
directory; and the session stays usable with its agent variable and local set before the payload.
``must`` is advice that SPEC may override; the test suite (``tests/test_adversarial.py``) also
checks it, processes and memory. ``dos`` payloads include C-level loops that an in-process session
cannot stop: without ``--isolated`` they are not run and are counted as skipped.
``--time-limit S`` caps ``limits.time`` of every case at ``S`` seconds (the corpus's dos payloads
otherwise each run up to the default 30 s).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from .bounds import LEAK_PARTIAL, TIME_GRACE
from .engine import Engine, IsolatedSession, RemoteValue, S2OError, Session, Settings, as_json, bare_settings
from .engine.run.scopes import SecretText

#: Key of an outcome holding the text of a secret result, for comparison only: --show omits it
#: (as every key starting with ``_``).
_REVEALED = "_revealed"
#: Key of an outcome whose value came back from the worker with its secrets masked.
_MASKED = "_masked"
#: Key of an outcome holding what the containment judge needs (elapsed seconds, state afterwards).
_CONTAINMENT = "_containment"

#: State set before an adversarial payload; it must survive the payload (SPEC 12).
KEPT_FRAGMENT = {"var": {"agent.kept": 1, "kept_local": 2}}
#: Reprs that must never show in a value or a message (SPEC 12), and signs of a host traceback.
FORBIDDEN_REPRS = ("<module", "<frame", "<code object", "<generator object", "<coroutine object",
                   "<async_generator", "<traceback", "<cell at", "Traceback (most recent call last)")
#: The module of host functions that cases grant (SPEC 11 ``helpers``).
HELPERS_FILE = "s2o_conformance_helpers.py"

_SETTING_KEYS = ("allowlist", "rules", "limits", "sys", "const", "secrets", "allow_unsafe_entries")


def load_cases(path: str | Path) -> list[dict[str, Any]]:
    """The cases of one ``.jsonl`` file, each with ``_dir`` set to the file's folder.

    Raises ``ValueError`` naming the line of a line that is not a JSON object (or nests too deeply
    for Python's JSON reader).
    """
    cases = []
    folder = str(Path(path).resolve().parent)
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                case = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{number}: not JSON: {exc}") from None
            except RecursionError:
                raise ValueError(f"{path}:{number}: nests too deeply to be read") from None
            if not isinstance(case, dict):
                raise ValueError(f"{path}:{number}: a case must be a JSON object")
            case["_dir"] = folder
            cases.append(case)
    return cases


def _settings_data(case: dict[str, Any]) -> dict[str, Any]:
    data = {k: case[k] for k in _SETTING_KEYS if k in case}
    data.setdefault("allowlist", "")
    return data


def _settings_for(case: dict[str, Any], time_limit: float | None) -> Settings:
    data = _settings_data(case)
    if time_limit is not None:
        limits = dict(data.get("limits") or {})
        limits["time"] = min(float(limits.get("time", time_limit)), time_limit)
        data["limits"] = limits
    return bare_settings(data)


def _error_outcome(cid: Any, exc: S2OError) -> dict[str, Any]:
    return {"id": cid, "outcome": "error", "code": exc.code, "stage": exc.stage, "message": exc.message,
            "line": exc.line, "col": exc.col, "path": exc.path}


def _open(case: dict[str, Any], settings: Settings, isolated: bool) -> Session | IsolatedSession:
    """A fresh session for ``case`` holding its state; raises ``S2OError`` when settings or state are refused."""
    state = {k: case.get(k) for k in ("locals", "agent", "conv")}
    if not isolated:
        return Session(Engine(settings), **state)
    session = IsolatedSession(settings)
    try:
        if any(state.values()):
            session.set_vars(**state)
    except BaseException:
        session.close()
        raise
    return session


def run_case(case: dict[str, Any], *, isolated: bool = False, time_limit: float | None = None) -> dict[str, Any]:
    """Run one case; returns the ``--show`` outcome object (SPEC 11).

    ``isolated`` runs it through an :class:`IsolatedSession` (the worker); ``time_limit`` caps
    ``limits.time`` (seconds). A corpus case (with ``class``) also records what
    :func:`containment_problems` judges, under a private key.
    """
    cid = case.get("id")
    helpers = helpers_dir(case["_dir"]) if case.get("helpers") else None
    if helpers is not None and helpers not in sys.path:
        sys.path.insert(0, helpers)  # before an IsolatedSession starts: its worker inherits sys.path
    session: Session | IsolatedSession | None = None
    try:
        settings = _settings_for(case, time_limit)
        if case.get("allowlist_only"):
            return _allowlist_outcome(cid, settings, isolated)
        session = _open(case, settings, isolated)
        if "class" in case:
            return _run_payload(cid, session, case)
        if "fragment" in case:
            return _run_fragment_case(cid, session, case)
        value = _evaluate(session, case)
    except S2OError as exc:
        return _error_outcome(cid, exc)
    finally:
        if isinstance(session, IsolatedSession):
            session.close()
    return _value_outcome(cid, value, case)


def _allowlist_outcome(cid: Any, settings: Settings, isolated: bool) -> dict[str, Any]:
    try:
        if isolated:
            session = IsolatedSession(settings)
            warnings = list(session.warnings)
            session.close()
        else:
            warnings = list(Engine(settings).warnings)
    except S2OError as exc:
        if exc.code in ("allowlist", "refused-entry"):
            lines = (exc.details or {}).get("lines", {})
            return {"id": cid, "outcome": "allowlist", "errors": dict(lines), "warnings": []}
        raise
    return {"id": cid, "outcome": "allowlist", "errors": {}, "warnings": warnings}


def _evaluate(session: Session | IsolatedSession, case: dict[str, Any]) -> Any:
    if "expr" in case:
        return session.evaluate(case["expr"])
    if "dynamic" in case:
        return session.evaluate_dynamic(case["dynamic"])
    raise S2OError("settings", "a case needs one of expr, dynamic, fragment or allowlist_only", stage="load")


def _value_outcome(cid: Any, value: Any, case: dict[str, Any]) -> dict[str, Any]:
    out = {"id": cid, "outcome": "value", "value": as_json(value), "repr": _safe_repr(value)}
    if type(value) is SecretText:  # compared by judge(), never printed by --show
        out[_REVEALED] = as_json(value, reveal_secrets=True)
    elif type(value) is RemoteValue and value.json is None and case.get("secrets"):
        out[_MASKED] = True
    return out


def _run_payload(cid: Any, session: Session | IsolatedSession, case: dict[str, Any]) -> dict[str, Any]:
    """Run an adversarial payload between setting state to keep and checking the session afterwards."""
    marks = _surroundings()
    setup = session.run_fragment(KEPT_FRAGMENT)
    if setup.code != "success":
        raise S2OError("settings", f"the state to keep could not be set: {setup.error}", stage="load")
    start = time.monotonic()
    try:
        out = _value_outcome(cid, _evaluate(session, case), case)
    except S2OError as exc:
        out = _error_outcome(cid, exc)
    after: dict[str, Any] = {"elapsed": time.monotonic() - start, "time_limit": session.settings.limits.time}
    try:
        after["two"] = _safe_repr(session.evaluate("1 + 1"))
        after["kept"] = (as_json(session.agent_vars.get("kept")), as_json(session.locals.get("kept_local")))
    except Exception as exc:
        after["unusable"] = f"{type(exc).__name__}: {exc}"
    after["new_files"] = sorted(set(_surroundings()) - set(marks))
    out[_CONTAINMENT] = after
    return out


def _surroundings() -> list[str]:
    """Entries of the working directory and of its ``s2o-markers/`` (where payloads aim their files)."""
    found = os.listdir(".")
    if os.path.isdir("s2o-markers"):
        found += [f"s2o-markers/{name}" for name in os.listdir("s2o-markers")]
    return found


def _run_fragment_case(cid: Any, session: Session | IsolatedSession, case: dict[str, Any]) -> dict[str, Any]:
    run = session.run_fragment(case["fragment"], inputs=case.get("inputs"), function=case.get("function"))
    out: dict[str, Any] = {"id": cid, "outcome": "run", "code": run.code, "value": as_json(run.value),
                           "repr": _safe_repr(run.value), "output": run.outputs, "logs": run.logs,
                           "locals": {k: as_json(v) for k, v in session.locals.items()},
                           "agent": session.agent_vars, "conv": session.conv_vars, "error": None}
    if run.error is not None:
        e = run.error
        errors = getattr(e, "errors", None) or [e]
        out["error"] = {"code": e.code, "stage": e.stage, "message": e.message, "line": e.line, "col": e.col,
                        "path": e.path, "all": [{"code": x.code, "path": x.path, "line": x.line, "col": x.col,
                                                 "message": x.message} for x in errors]}
    if type(run.value) is SecretText:
        out[_REVEALED] = as_json(run.value, reveal_secrets=True)
    return out


def helpers_dir(folder: str) -> str | None:
    """The folder of ``s2o_conformance_helpers.py`` for cases in ``folder``: beside them (SPEC 11), or, for
    the adversarial corpus (``adversarial/`` beside ``conformance/``, SPEC 12), in ``../conformance``."""
    for candidate in (Path(folder), Path(folder).parent / "conformance"):
        if (candidate / HELPERS_FILE).is_file():
            return str(candidate)
    return None


def host_texts(folder: str | None) -> list[str]:
    """Texts of host code beside the cases (SPEC 12): the string globals of ``s2o_conformance_helpers.py``
    and every string literal assigned inside it (a credential in a function's local)."""
    if folder is None:
        return []
    path = Path(folder) / HELPERS_FILE
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return []
    return [node.value.value for node in ast.walk(tree)
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str) and len(node.value.value) >= LEAK_PARTIAL]


def _shows(text: str, needle: str) -> bool:
    if len(needle) <= LEAK_PARTIAL:
        return needle in text
    return any(needle[i:i + LEAK_PARTIAL] in text for i in range(len(needle) - LEAK_PARTIAL + 1))


def containment_problems(case: dict[str, Any], got: dict[str, Any]) -> list[str]:
    """Why the outcome of an adversarial payload is not contained (SPEC 12); empty when it is."""
    problems = []
    if got["outcome"] == "error" and got["code"] == "unexpected":
        problems.append(f"not a coded outcome: {got['code']}: {got['message']}")
    problems += _text_problems(case, [got.get("message") or "", got.get("repr") or "", json.dumps(got.get("value"))])
    after = got.get(_CONTAINMENT)
    return problems + _after_problems(after) if after else problems  # no record: refused when the settings loaded


def _text_problems(case: dict[str, Any], texts: list[str]) -> list[str]:
    """Secret values, host texts and forbidden reprs that show in ``texts`` (a repr the expression wrote is its own)."""
    problems = []
    secrets = [v for v in (case.get("secrets") or {}).values() if isinstance(v, str) and v]
    for needle in [*secrets, *(host_texts(helpers_dir(case["_dir"])) if case.get("helpers") else [])]:
        if any(_shows(text, needle) for text in texts):
            problems.append(f"a secret or host text shows: {needle[:LEAK_PARTIAL]}…")
    for needle in FORBIDDEN_REPRS:
        if needle not in case.get("expr", "") and any(needle in text for text in texts):
            problems.append(f"a forbidden repr shows: {needle!r}")
    return problems


def _after_problems(after: dict[str, Any]) -> list[str]:
    """What :func:`_run_payload` recorded around the payload: time, the session afterwards, new files."""
    problems = []
    if after.get("elapsed", 0.0) > after.get("time_limit", 0.0) + TIME_GRACE:
        problems.append(f"the run took {after['elapsed']:.1f} s, over the time limit + {TIME_GRACE:g} s")
    if "unusable" in after:
        problems.append(f"the session is not usable afterwards: {after['unusable']}")
    elif after.get("two") != "2" or after.get("kept") != (1, 2):
        problems.append(f"the session lost its state or its use: 1 + 1 gave {after.get('two')}, "
                        f"agent.kept and kept_local are {after.get('kept')}")
    if after.get("new_files"):
        problems.append(f"files appeared: {after['new_files']}")
    return problems


def _safe_repr(value: Any) -> str:
    try:
        return repr(value)
    except Exception as exc:  # a repr that fails is reported, not raised
        return f"<repr failed: {type(exc).__name__}>"


def _same_json(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_json(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def judge(case: dict[str, Any], got: dict[str, Any]) -> str | None:
    """``None`` when ``got`` meets the case's ``expect``; otherwise why not."""
    expect = case.get("expect", {})
    if "class" in case and "expect" not in case:
        problems = containment_problems(case, got)
        return f"not contained ({_describe(got)}): " + "; ".join(problems) if problems else None
    if "fragment" in case:
        return _judge_run(expect, got)
    for key, judge_kind in (("value", _judge_value), ("repr", _judge_repr), ("error", _judge_error),
                            ("allowlist_errors", _judge_allowlist)):
        if key in expect:
            return judge_kind(case, expect, got)
    return f"the case has no known expectation: {json.dumps(expect)}"


def _judge_value(case: dict[str, Any], expect: dict[str, Any], got: dict[str, Any]) -> str | None:
    if got["outcome"] != "value":
        return f"expected value {json.dumps(expect['value'])}, got {_describe(got)}"
    if got.get(_MASKED):
        masked = repr(_mask(expect["value"], case))
        return None if got["repr"] == masked else f"expected (masked) {masked}, got {_describe(got)}"
    value = got.get(_REVEALED, got["value"])
    if (value is None and expect["value"] is not None) or not _same_json(value, expect["value"]):
        return f"expected value {json.dumps(expect['value'])}, got {_describe(got)}"
    return None


def _judge_repr(case: dict[str, Any], expect: dict[str, Any], got: dict[str, Any]) -> str | None:
    if got["outcome"] != "value" or got["repr"] != expect["repr"]:
        return f"expected repr {expect['repr']}, got {_describe(got)}"
    return None


def _judge_error(case: dict[str, Any], expect: dict[str, Any], got: dict[str, Any]) -> str | None:
    if got["outcome"] != "error" or got["code"] != expect["error"]:
        return f"expected error {expect['error']}, got {_describe(got)}"
    for key in ("stage", "line", "col"):
        if key in expect and got.get(key) != expect[key]:
            return f"expected {key} {expect[key]!r}, got {got.get(key)!r} ({_describe(got)})"
    if "message_contains" in expect and expect["message_contains"] not in got["message"]:
        return f"expected message containing {expect['message_contains']!r}, got {got['message']!r}"
    return None


def _judge_allowlist(case: dict[str, Any], expect: dict[str, Any], got: dict[str, Any]) -> str | None:
    if got["outcome"] != "allowlist" or got["errors"] != expect["allowlist_errors"]:
        return f"expected allowlist errors {json.dumps(expect['allowlist_errors'])}, got {_describe(got)}"
    return None


def _mask(value: Any, case: dict[str, Any]) -> Any:
    """``value`` with each of the case's secret values shown as ``***``, as a worker shows secret text."""
    if not isinstance(value, str):
        return value
    for secret in sorted((v for v in (case.get("secrets") or {}).values() if isinstance(v, str) and v),
                         key=len, reverse=True):
        value = value.replace(secret, "***")
    return value


def _judge_run(expect: dict[str, Any], got: dict[str, Any]) -> str | None:
    """Fragment cases: ``code``, ``value``, ``locals``, ``agent``, ``conv``, ``output``, ``logs``, ``error``."""
    if got["outcome"] != "run":
        return f"expected a run, got {_describe(got)}"
    if "code" in expect and got["code"] != expect["code"]:
        return f"expected code {expect['code']}, got {got['code']} (error: {got['error']})"
    for key in ("value", "locals", "agent", "conv", "output", "logs"):
        have = got.get(_REVEALED, got[key]) if key == "value" else got[key]
        if key in expect and not _same_json(have, expect[key]):
            return f"expected {key} {json.dumps(expect[key])}, got {json.dumps(got[key], default=repr)}"
    if "error" in expect:
        return _judge_run_error(expect["error"], got)
    if got["error"] is not None and "code" not in expect:
        return f"unexpected error {got['error']['code']}: {got['error']['message']}"
    return None


def _judge_run_error(want: str | dict[str, Any], got: dict[str, Any]) -> str | None:
    """A fragment case's expected ``error``: a code, or ``code``, ``path``, ``stage``, ``line``, ``col``,
    ``message_contains`` and ``all`` (every error's code and path, in order)."""
    err = got["error"]
    if err is None:
        return f"expected error {want}, got none (code {got['code']})"
    if isinstance(want, str):
        want = {"code": want}
    if want.get("code") is not None and err["code"] != want["code"]:
        return f"expected error {want['code']}, got {err['code']}: {err['message']}"
    for key in ("path", "stage", "line", "col"):
        if key in want and err.get(key) != want[key]:
            return f"expected error {key} {want[key]!r}, got {err.get(key)!r} ({err['code']}: {err['message']})"
    if "message_contains" in want and want["message_contains"] not in err["message"]:
        return f"expected message containing {want['message_contains']!r}, got {err['message']!r}"
    if "all" in want:
        got_all = [{"code": x["code"], "path": x["path"]} for x in err["all"]]
        if got_all != want["all"]:
            return f"expected errors {json.dumps(want['all'])}, got {json.dumps(got_all)}"
    return None


def _describe(got: dict[str, Any]) -> str:
    if got["outcome"] == "value":
        return f"value {got['repr']}"
    if got["outcome"] == "run":
        return f"run {got['code']}"
    if got["outcome"] == "error":
        where = f" at line {got['line']}, col {got['col']}" if got.get("line") is not None else ""
        return f"error {got['code']} ({got['stage']}){where}: {got['message']}"
    return f"allowlist errors {json.dumps(got['errors'])}"


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m s2o_kernel.conformance",
                                     description="Run s2o conformance cases (SPEC 11).")
    parser.add_argument("--show", action="store_true", help="print what happened per case, judge nothing")
    parser.add_argument("--isolated", action="store_true",
                        help="run every case through the containment worker (SPEC 12), as the kernel does")
    parser.add_argument("--time-limit", type=float, default=None, metavar="SECONDS",
                        help="cap limits.time of every case")
    parser.add_argument("files", nargs="+", help="case files (.jsonl)")
    args = parser.parse_args(argv)
    passed = failed = skipped = 0
    for file in args.files:
        try:
            cases = load_cases(file)
        except (OSError, ValueError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        for case in cases:
            if case.get("class") == "dos" and not args.isolated:
                skipped += 1
                print(f"SKIP {case.get('id')}: a dos payload runs only with --isolated")
                continue
            got = run_case(case, isolated=args.isolated, time_limit=args.time_limit)
            if args.show:
                print(json.dumps({k: v for k, v in got.items() if not k.startswith("_")}, default=repr))
                continue
            why = judge(case, got)
            if why is None:
                passed += 1
                print(f"PASS {case.get('id')}")
            else:
                failed += 1
                print(f"FAIL {case.get('id')}: {why}")
    if not args.show:
        print(f"{passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # e.g. --show piped into head
        sys.stderr.close()
        sys.exit(1)
