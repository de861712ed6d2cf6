"""Conformance runner: ``python -m s2o_kernel.conformance [--show] FILE...`` (SPEC 11).

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
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .engine import Engine, S2OError, Session, as_json, make_settings
from .engine.scopes import SecretText

#: Key of an outcome holding the text of a secret result, for comparison only: --show omits it.
_REVEALED = "_revealed"

_SETTING_KEYS = ("allowlist", "rules", "limits", "sys", "const", "secrets", "allow_unsafe_entries")


def load_cases(path: str | Path) -> list[dict[str, Any]]:
    """The cases of one ``.jsonl`` file, each with ``_dir`` set to the file's folder.

    Raises ``ValueError`` naming the line of a line that is not a JSON object.
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
            if not isinstance(case, dict):
                raise ValueError(f"{path}:{number}: a case must be a JSON object")
            case["_dir"] = folder
            cases.append(case)
    return cases


def _settings_data(case: dict[str, Any]) -> dict[str, Any]:
    data = {k: case[k] for k in _SETTING_KEYS if k in case}
    data.setdefault("allowlist", "")
    return data


def run_case(case: dict[str, Any]) -> dict[str, Any]:
    """Run one case; returns the ``--show`` outcome object (SPEC 11)."""
    cid = case.get("id")
    if case.get("helpers") and case["_dir"] not in sys.path:
        sys.path.insert(0, case["_dir"])
    try:
        settings = make_settings(_settings_data(case))
        if case.get("allowlist_only"):
            try:
                engine = Engine(settings)
            except S2OError as exc:
                if exc.code in ("allowlist", "refused-entry"):
                    lines = (exc.details or {}).get("lines", {})
                    return {"id": cid, "outcome": "allowlist", "errors": dict(lines), "warnings": []}
                raise
            return {"id": cid, "outcome": "allowlist", "errors": {}, "warnings": list(engine.warnings)}
        session = Session(Engine(settings), locals=case.get("locals"), agent=case.get("agent"),
                          conv=case.get("conv"))
        if "fragment" in case:
            return _run_fragment_case(cid, session, case)
        if "expr" in case:
            value = session.evaluate(case["expr"])
        elif "dynamic" in case:
            value = session.evaluate_dynamic(case["dynamic"])
        else:
            raise S2OError("settings", "a case needs one of expr, dynamic or allowlist_only", stage="load")
    except S2OError as exc:
        return {"id": cid, "outcome": "error", "code": exc.code, "stage": exc.stage, "message": exc.message,
                "line": exc.line, "col": exc.col, "path": exc.path}
    out = {"id": cid, "outcome": "value", "value": as_json(value), "repr": _safe_repr(value)}
    if type(value) is SecretText:  # compared by judge(), never printed by --show
        out[_REVEALED] = as_json(value, reveal_secrets=True)
    return out


def _run_fragment_case(cid: Any, session: Session, case: dict[str, Any]) -> dict[str, Any]:
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
    if "fragment" in case:
        return _judge_run(expect, got)
    if "value" in expect:
        if got["outcome"] != "value":
            return f"expected value {json.dumps(expect['value'])}, got {_describe(got)}"
        value = got.get(_REVEALED, got["value"])
        if (value is None and expect["value"] is not None) or not _same_json(value, expect["value"]):
            return f"expected value {json.dumps(expect['value'])}, got {_describe(got)}"
        return None
    if "repr" in expect:
        if got["outcome"] != "value" or got["repr"] != expect["repr"]:
            return f"expected repr {expect['repr']}, got {_describe(got)}"
        return None
    if "error" in expect:
        if got["outcome"] != "error" or got["code"] != expect["error"]:
            return f"expected error {expect['error']}, got {_describe(got)}"
        for key in ("stage", "line", "col"):
            if key in expect and got.get(key) != expect[key]:
                return f"expected {key} {expect[key]!r}, got {got.get(key)!r} ({_describe(got)})"
        if "message_contains" in expect and expect["message_contains"] not in got["message"]:
            return f"expected message containing {expect['message_contains']!r}, got {got['message']!r}"
        return None
    if "allowlist_errors" in expect:
        if got["outcome"] != "allowlist" or got["errors"] != expect["allowlist_errors"]:
            return f"expected allowlist errors {json.dumps(expect['allowlist_errors'])}, got {_describe(got)}"
        return None
    return f"the case has no known expectation: {json.dumps(expect)}"


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
        want = expect["error"]
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
    elif got["error"] is not None and "code" not in expect:
        return f"unexpected error {got['error']['code']}: {got['error']['message']}"
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
    parser.add_argument("files", nargs="+", help="case files (.jsonl)")
    args = parser.parse_args(argv)
    passed = failed = 0
    for file in args.files:
        try:
            cases = load_cases(file)
        except (OSError, ValueError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        for case in cases:
            got = run_case(case)
            if args.show:
                print(json.dumps({k: v for k, v in got.items() if k != _REVEALED}, default=repr))
                continue
            why = judge(case, got)
            if why is None:
                passed += 1
                print(f"PASS {case.get('id')}")
            else:
                failed += 1
                print(f"FAIL {case.get('id')}: {why}")
    if not args.show:
        print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # e.g. --show piped into head
        sys.stderr.close()
        sys.exit(1)
