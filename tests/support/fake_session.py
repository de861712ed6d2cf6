"""A stand-in for the engine session, shared by the kernel's unit and contract tests.

``FakeSession`` implements the kernel's ``SessionLike`` contract (s2o_kernel/kernel/contract.py) with
canned behaviour, so the cell runner, rendering and magics are tested without an engine; ``API`` is
the stand-in for the engine's pure functions.
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from s2o_kernel.engine import Access, Dataflow, RunResult, S2OError, Validation

SECRET = "s3cr3t-value"


class Opaque:
    def __repr__(self) -> str:
        return "<Opaque>"


class BadRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


def fake_fragment_kind(obj: Any) -> str | None:
    commands = {"var", "if", "for", "output", "log", "fail", "return", "interrupt", "stop"}
    if isinstance(obj, dict) and obj and set(obj) <= commands:
        return "command"
    if isinstance(obj, list) and obj and all(fake_fragment_kind(o) for o in obj):
        return "commands"
    if isinstance(obj, dict) and "commands" in obj:
        return "function"
    if isinstance(obj, dict) and "functions" in obj:
        return "agent"
    return None


def fake_as_json(value: Any) -> Any:
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):
        return None


API = SimpleNamespace(fragment_kind=fake_fragment_kind, as_json=fake_as_json)


class FakeSession:
    def __init__(self) -> None:
        self._settings = {
            "allowlist": "len\nmath\n",
            "rules": {"operators": {"**": "bounded_pow"}, "max_comprehension_depth": 4,
                      "max_for_clauses": 3},
            "limits": {"time": 30.0, "loop_iterations": 10000},
            "sys": {"inputs": {}},
            "const": {},
            "secrets": {"KEY": SECRET},
        }  # fmt: skip
        self.locals: dict[str, Any] = {}
        self.agent_vars: dict[str, Any] = {}
        self.conv_vars: dict[str, Any] = {}
        self.patches: list[dict[str, Any]] = []
        self.evaluated: list[str] = []
        self.interrupt_next = False

    # evaluation
    def evaluate(self, expr: str) -> Any:
        self.evaluated.append(expr)
        if self.interrupt_next:
            self.interrupt_next = False
            raise KeyboardInterrupt
        if "__" in expr:
            col = expr.index("__")
            raise S2OError("underscore", "names starting with '_' are not allowed",
                            line=1, col=col, source=expr, stage="validate")  # fmt: skip
        if expr.strip() == "secret":
            return SECRET
        if expr.strip() == "opaque":
            return Opaque()
        if expr.strip() == "badrepr":
            return BadRepr()
        if expr.strip() == "crash":
            raise TypeError("internal bug")
        try:
            return eval(expr, {"__builtins__": {}, "len": len}, dict(self.locals))
        except SyntaxError as exc:
            raise S2OError("syntax", exc.msg, line=exc.lineno, col=(exc.offset or 1) - 1,
                            source=expr, stage="validate") from None  # fmt: skip
        except NameError as exc:
            raise S2OError("unknown-name", str(exc), source=expr) from None

    def evaluate_dynamic(self, text: str) -> Any:
        self.evaluated.append(("dynamic", text))
        if len(text) >= 2 and text[0] == "{" and text[-1] == "}":
            inner = text[1:-1].strip()
            try:
                compile(inner, "<e>", "eval")
            except SyntaxError:
                inner = text
            return self.evaluate(inner)
        return text

    def run_fragment(self, fragment: Any, *, on_output: Any = None, inputs: Any = None,
                     function: Any = None, on_print: Any = None) -> RunResult:  # fmt: skip
        run = RunResult()
        obj = fragment
        self.on_output_given = on_output is not None
        self.run_args = {"fragment": obj, "inputs": inputs, "function": function}
        if isinstance(obj, dict) and "functions" in obj:
            obj = obj["functions"][function or "main"]["commands"]
        items = obj if isinstance(obj, list) else [obj]
        for item in items:
            for name, arg in item.items():
                if name == "var":
                    for k, v in arg.items():
                        value = self.evaluate_dynamic(v) if isinstance(v, str) else v
                        scope, _, short = k.rpartition(".")
                        {"agent": self.agent_vars, "conv": self.conv_vars}.get(scope, self.locals)[
                            short] = value  # fmt: skip
                elif name == "output":  # like the engine: a sink alone gets the parts, else they are kept
                    if on_output is not None:
                        on_output(arg)
                    else:
                        run.outputs.append(arg)
                elif name == "log":
                    run.logs.append(arg)
                elif name == "return":
                    run.value = arg
                elif name == "fail":
                    run.code = "failCommand"
                    run.error = S2OError("failCommand", arg, path="fail")
                    return run
                elif name == "interrupt":
                    raise KeyboardInterrupt
                elif name == "stop":  # like the engine: a stopped run keeps no parts
                    return RunResult(code="stopped", error=S2OError("stopped", "the run was interrupted"))
        return run

    def validate(self, expr: str) -> Any:
        errors = []
        if "__" in expr:
            errors.append(S2OError("underscore", "no underscores", line=1,
                                    col=expr.index("__"), source=expr))  # fmt: skip
        if "lambda" in expr:
            errors.append(S2OError("lambda", "no lambda", line=1,
                                    col=expr.index("lambda"), source=expr))  # fmt: skip
        return Validation(
            errors=errors,
            allowlist_names={"len"} if "len" in expr else set(),
            local_names={"x"} if "x" in expr else set(),
            secrets={"KEY"} if "secret" in expr else set(),
        )

    def dataflow(self, fragment: Any) -> Dataflow:
        self.run_args = {"fragment": fragment}
        return Dataflow([Access("read", "conv.a", "var", "var.x", "reference")])

    # settings
    def update_settings(self, patch: dict[str, Any]) -> list[str]:
        if "limits" in patch and "nope" in patch["limits"]:
            raise S2OError("settings", "unknown key limits.nope", stage="load")
        self.patches.append(patch)
        for key, value in patch.items():
            if isinstance(value, dict):  # like the engine: objects merge key by key
                self._settings.setdefault(key, {}).update(value)
            else:
                self._settings[key] = value
        # Like the engine: the new engine's warnings, the allowlist's included.
        return ["time.sleep blocks the event loop"] if "time.sleep" in self._settings["allowlist"] else []

    def settings_dict(self) -> dict[str, Any]:
        return json.loads(json.dumps(self._settings))

    def set_vars(self, *, locals: dict[str, Any] | None = None, agent: dict[str, Any] | None = None,
                 conv: dict[str, Any] | None = None) -> None:  # fmt: skip
        self.locals.update(locals or {})
        self.agent_vars.update(agent or {})
        self.conv_vars.update(conv or {})

    def reset(self) -> None:
        self.locals.clear()
        self.agent_vars.clear()
        self.conv_vars.clear()

    # completion and help
    def completion_names(self) -> dict[str, str]:
        return {"len": "function", "math": "module", "agent": "namespace", "sys": "namespace",
                "price": "variable", "priority": "variable", "_hidden": "variable"}  # fmt: skip

    def member_names(self, dotted: str) -> list[str]:
        return {"math": ["sqrt", "pi", "_private"], "agent": ["visits", "name"]}.get(dotted, [])

    def describe(self, dotted: str) -> str | None:
        return {"len": "len(obj, /)\nReturn the number of items.", "math.sqrt": "sqrt(x)"}.get(
            dotted
        )

    def redact(self, text: str) -> str:
        return text.replace(SECRET, "***")
