"""Magics (SPEC 9.1): ``%name ...`` line magics and ``%%name`` cell magics.

A line magic's argument is the rest of the cell after its name (so a JSON
argument may span lines); a cell magic's argument is the rest of its first
line and its body the following lines. Magics that take an argument accept
both forms (``%rules {...}`` and ``%%rules`` with the JSON as the body); the
allowlist is the exception: ``%allowlist`` shows it, ``%%allowlist``
replaces it with the body.

Errors are coded like the engine's: ``magic`` for an unknown magic or a wrong
use, ``syntax`` for an argument that is not valid JSON; errors raised by the
engine (``settings``, ``allowlist``, …) pass through unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from s2o_kernel.kernel.cells import CELL_MAGIC, Cell, parse_json_argument, valid_magic_name
from s2o_kernel.kernel.render import CellError, CellErrorGroup, json_bundle, safe_repr

if TYPE_CHECKING:  # pragma: no cover
    from s2o_kernel.kernel.runner import CellRunner

Handler = Callable[["CellRunner", str, str, str], None]
"""``handler(ctx, arg, body, raw_body)``; ``body`` is ``""`` for the line form."""


@dataclass(frozen=True)
class Magic:
    name: str
    summary: str
    usage: str
    line: Handler | None
    cell: Handler | None


def _combined(arg: str, body: str) -> str:
    return "\n".join(p for p in (arg.strip(), body.strip()) if p).strip()


def _no_argument(name: str, arg: str, body: str) -> None:
    if arg.strip() or body.strip():
        raise CellError("magic", f"%{name} takes no argument.")


# -- handlers ------------------------------------------------------------------


def _allowlist_show(ctx: CellRunner, arg: str, body: str, raw_body: str) -> None:
    if arg.strip():
        raise CellError(
            "magic",
            "%allowlist takes no argument: it shows the allowlist. To replace it, "
            "start a cell with %%allowlist and put one entry a line below it.",
        )
    session = ctx.require_session()
    text = session.settings.allowlist
    text = "" if text is None else str(text)
    if not text.strip():
        text = "# (the allowlist is empty)"
    ctx.emit_result({"text/plain": ctx.redact(text.rstrip("\n"))})


def _allowlist_replace(ctx: CellRunner, arg: str, body: str, raw_body: str) -> None:
    if arg.strip():
        raise CellError(
            "magic",
            "%%allowlist takes no argument on its first line; put the entries below it, "
            "one a line.",
        )
    session = ctx.require_session()
    warnings = [str(w) for w in session.update_settings({"allowlist": raw_body}) or []]
    ctx.emit_warnings(warnings)
    ctx.known_warnings = set(warnings)


def _update(ctx: CellRunner, session: Any, patch: dict[str, Any]) -> None:
    """Apply a non-allowlist settings patch; show only warnings it newly causes.

    ``update_settings`` returns every warning of the new engine, including the
    allowlist's, which were already shown when the allowlist was loaded.
    """
    warnings = [str(w) for w in session.update_settings(patch) or []]
    ctx.emit_warnings([w for w in warnings if w not in ctx.known_warnings])
    ctx.known_warnings = set(warnings)


def _parse_object(ctx: CellRunner, name: str, text: str, example: str) -> dict[str, Any]:
    obj = parse_json_argument(text, f"The argument of %{name}")
    if not isinstance(obj, dict):
        raise CellError(
            "magic", f"%{name} expects a JSON object, for example: %{name} {example}"
        )
    return obj


def _section(name: str, example: str) -> Handler:
    def handler(ctx: CellRunner, arg: str, body: str, raw_body: str) -> None:
        session = ctx.require_session()
        text = _combined(arg, body)
        if not text:
            current = session.settings_dict().get(name, {})
            ctx.emit_result(json_bundle(current, ctx.redact))
            return
        obj = _parse_object(ctx, name, text, example)
        _update(ctx, session, {name: obj})

    return handler


def _sys(ctx: CellRunner, arg: str, body: str, raw_body: str) -> None:
    session = ctx.require_session()
    text = _combined(arg, body)
    if not text:
        sd = session.settings_dict()
        shown = dict(sd.get("sys") or {})
        shown["const"] = sd.get("const") or {}
        ctx.emit_result(json_bundle(shown, ctx.redact))
        return
    obj = _parse_object(ctx, "sys", text, '{"inputs": {"query": "hi"}, "const": {"rate": 2}}')
    patch: dict[str, Any] = {}
    if "const" in obj:
        patch["const"] = obj.pop("const")
    if obj:
        patch["sys"] = obj
    _update(ctx, session, patch)


def _scope_lines(title: str, values: Any) -> list[str]:
    lines = [f"{title}:"]
    items = list(dict(values or {}).items())
    if not items:
        lines.append("  (none)")
    for key, value in items:
        lines.append(f"  {key} = {safe_repr(value)}")
    return lines


def _vars(ctx: CellRunner, arg: str, body: str, raw_body: str) -> None:
    _no_argument("vars", arg, body)
    session = ctx.require_session()
    scopes = (
        ("locals", session.locals),
        ("agent", session.agent_vars),
        ("conv", session.conv_vars),
    )
    text_lines: list[str] = []
    for title, values in scopes:
        text_lines.extend(_scope_lines(title, values))
    data: dict[str, Any] = {"text/plain": ctx.redact("\n".join(text_lines))}
    as_json: dict[str, Any] = {}
    for title, values in scopes:
        js = ctx.as_json(dict(values or {}))
        if js is None:
            as_json = {}
            break
        as_json[title] = js
    if as_json:
        data["application/json"] = json_bundle(as_json, ctx.redact)["application/json"]
    ctx.emit_result(data)


def _reset(ctx: CellRunner, arg: str, body: str, raw_body: str) -> None:
    _no_argument("reset", arg, body)
    ctx.require_session().reset()


def _names(values: Any) -> list[str]:
    try:
        return sorted(str(v) for v in (values or ()))
    except Exception:  # pragma: no cover - defensive
        return []


def _validate(ctx: CellRunner, arg: str, body: str, raw_body: str) -> None:
    expr = _combined(arg, body)
    if not expr:
        raise CellError("magic", "%validate needs an expression, for example: %validate len(items)")
    session = ctx.require_session()
    result = session.validate(expr)
    errors = list(getattr(result, "errors", None) or [])
    if not getattr(result, "ok", not errors):
        if not errors:
            raise CellError("unexpected", "Validation failed without reporting an error.")
        raise CellErrorGroup(errors)
    names = {
        "allowlist_names": _names(getattr(result, "allowlist_names", ())),
        "local_names": _names(getattr(result, "local_names", ())),
        "secrets": _names(getattr(result, "secrets", ())),
    }

    def fmt(values: list[str]) -> str:
        return ", ".join(values) if values else "(none)"

    text = "\n".join(
        [
            "ok: the expression passes validation",
            f"allowlist names: {fmt(names['allowlist_names'])}",
            f"local names: {fmt(names['local_names'])}",
            f"secrets: {fmt(names['secrets'])}",
        ]
    )
    ctx.emit_result(
        {"text/plain": ctx.redact(text), "application/json": {"ok": True, **names}}
    )


def _expr(ctx: CellRunner, arg: str, body: str, raw_body: str) -> None:
    text = _combined(arg, body)
    if not text:
        raise CellError("magic", "%%expr needs an expression in the cell body.")
    ctx.show_value(ctx.require_session().evaluate(text))


def _fragment(ctx: CellRunner, arg: str, body: str, raw_body: str) -> None:
    text = _combined(arg, body)
    if not text:
        raise CellError("magic", "%%fragment needs a JSON fragment in the cell body.")
    obj = parse_json_argument(text, "The %%fragment body")
    if ctx.fragment_kind(obj) is None:
        raise CellError(
            "fragment",
            "The %%fragment body is JSON but not a fragment: expected a command object, "
            "a list of command objects, a function object or an agent definition.",
            stage="validate",
        )
    ctx.show_run(ctx.run_fragment(obj))


def _lsmagic(ctx: CellRunner, arg: str, body: str, raw_body: str) -> None:
    _no_argument("lsmagic", arg, body)
    ctx.emit_result({"text/plain": lsmagic_text()})


def _help(ctx: CellRunner, arg: str, body: str, raw_body: str) -> None:
    name = _combined(arg, body).lstrip("%").strip()
    if not name:
        ctx.emit_result({"text/plain": GENERAL_HELP})
        return
    magic = MAGICS.get(name)
    if magic is None:
        raise CellError("magic", f"No magic named %{name}. {_known_hint()}")
    ctx.emit_result({"text/plain": magic_help(magic)})


# -- registry ----------------------------------------------------------------

MAGICS: dict[str, Magic] = {
    m.name: m
    for m in (
        Magic(
            "allowlist",
            "show (%allowlist) or replace (%%allowlist) the allowlist",
            "%allowlist            show the current allowlist\n"
            "%%allowlist           replace it with the cell body, one entry a line:\n"
            "len\nmath.sqrt\njson\n"
            "Loading is all-or-nothing: when a line fails nothing changes and every\n"
            "failing line is reported with its own message.",
            _allowlist_show,
            _allowlist_replace,
        ),
        Magic(
            "rules",
            "show or set compile rules (operators, comprehension limits)",
            '%rules                                   show the rules as JSON\n'
            '%rules {"operators": {"<<": "off"}}      merge settings into the rules\n'
            '%rules {"max_comprehension_depth": 2, "max_for_clauses": 2}',
            _section("rules", '{"operators": {"<<": "off"}}'),
            _section("rules", '{"operators": {"<<": "off"}}'),
        ),
        Magic(
            "limits",
            "show or set the run limits (time, loop iterations, ...)",
            '%limits                                  show the limits as JSON\n'
            '%limits {"time": 5, "loop_iterations": 1000}\n'
            "Keys: time, loop_iterations, db_rows, llm_cost, definition_length, memory.",
            _section("limits", '{"time": 5}'),
            _section("limits", '{"time": 5}'),
        ),
        Magic(
            "sys",
            "show or set sys.inputs, optional sys members and const",
            '%sys                                     show sys values and const as JSON\n'
            '%sys {"inputs": {"query": "hello"}}      set sys.inputs\n'
            '%sys {"userEmail": "a@example.com"}      enable an optional member\n'
            '%sys {"const": {"rate": 2}}              set the constants',
            _sys,
            _sys,
        ),
        Magic(
            "vars",
            "show local, agent and conversation variables",
            "%vars",
            _vars,
            None,
        ),
        Magic(
            "reset",
            "clear the session's variables (configuration stays)",
            "%reset",
            _reset,
            None,
        ),
        Magic(
            "validate",
            "validate an expression without running it; show the names it uses",
            "%validate EXPR        e.g. %validate price * quantity",
            _validate,
            _validate,
        ),
        Magic(
            "expr",
            "read the cell as an expression, whatever it looks like",
            '%%expr\n{"a": 1}              the Python dict, not a dynamic string',
            _expr,
            _expr,
        ),
        Magic(
            "fragment",
            "read the cell as a JSON fragment",
            '%%fragment\n{"var": {"x": 1}}',
            _fragment,
            _fragment,
        ),
        Magic("lsmagic", "list the magics", "%lsmagic", _lsmagic, None),
        Magic("help", "general help, or help on one magic", "%help [NAME]", _help, _help),
    )
}


def line_magic_names() -> list[str]:
    return sorted(n for n, m in MAGICS.items() if m.line is not None)


def cell_magic_names() -> list[str]:
    return sorted(n for n, m in MAGICS.items() if m.cell is not None)


def _known_hint() -> str:
    return "Known magics: " + ", ".join(f"%{n}" for n in sorted(MAGICS)) + " (%lsmagic lists them)."


def lsmagic_text() -> str:
    width = max(len(n) for n in MAGICS) + 4
    lines = ["Line magics:"]
    for name in line_magic_names():
        lines.append(f"  %{name:<{width}}{MAGICS[name].summary}")
    lines.append("Cell magics:")
    for name in cell_magic_names():
        lines.append(f"  %%{name:<{width - 1}}{MAGICS[name].summary}")
    lines.append("%help NAME explains one magic.")
    return "\n".join(lines)


def magic_help(magic: Magic) -> str:
    forms = []
    if magic.line is not None:
        forms.append(f"%{magic.name}")
    if magic.cell is not None:
        forms.append(f"%%{magic.name}")
    return f"{' / '.join(forms)}: {magic.summary}\n\n{magic.usage}"


GENERAL_HELP = """\
s2o kernel: Search2o agent expressions and fragments.

Each cell is one of:
  price * quantity        an expression: one Python expression, allowlisted names only
  "Hello {name}"          a JSON string: a dynamic string, shown as the value it becomes
  { price * quantity }    a cell wrapped in braces: the dynamic-string form of its body
  {"var": {"x": 1}}       a JSON fragment: commands, a function or an agent definition
  %name / %%name          a magic (%lsmagic lists them, %help NAME explains one)
  name?                   help on a granted name or a variable

Lines starting with # are comments in every kind of cell, so nbval markers
such as # NBVAL_RAISES_EXCEPTION work. Errors show their code as the name
(e.g. underscore, unknown-name, timedOut). Interrupt stops a running cell and
keeps the session's variables."""


def run_magic(ctx: CellRunner, cell: Cell) -> None:
    """Dispatch a classified magic cell."""
    name = cell.magic or ""
    is_cell = cell.kind == CELL_MAGIC
    prefix = "%%" if is_cell else "%"
    if not valid_magic_name(name):
        raise CellError(
            "magic", f"{prefix}{name} is not a magic name. {_known_hint()}", stage="validate"
        )
    magic = MAGICS.get(name)
    if magic is None:
        raise CellError("magic", f"Unknown magic {prefix}{name}. {_known_hint()}", stage="validate")
    if is_cell:
        if magic.cell is None:
            raise CellError(
                "magic", f"%%{name} is not a cell magic; use %{name} on a line of its own."
            )
        magic.cell(ctx, cell.arg, cell.body, cell.raw_body)
    else:
        assert magic.line is not None
        magic.line(ctx, cell.arg, "", "")
