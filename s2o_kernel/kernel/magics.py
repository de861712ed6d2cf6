"""Magics (SPEC 9.1): ``%name ...`` line magics and ``%%name`` cell magics.

A line magic's argument is the rest of the cell after its name (so a JSON
argument may span lines); a cell magic's argument is the rest of its first
line and its body the following lines. Magics that take an argument accept
both forms (``%rules {...}`` and ``%%rules`` with the JSON as the body); the
allowlist is the exception: ``%allowlist`` shows it, ``%%allowlist``
replaces it with the body.

Errors are coded like the engine's: ``magic`` for an unknown magic or a wrong
use (a file that cannot be read included), ``syntax`` for an argument or a
file that is not valid JSON (with its line and column); errors raised by the
engine (``settings``, ``allowlist``, …) pass through unchanged.

File names (``%run``, ``%config``, ``%state``) are relative to the kernel's
working directory; quote a name that contains spaces.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from s2o_kernel.kernel.cells import (
    CELL_MAGIC,
    Cell,
    parse_json_argument,
    valid_magic_name,
)
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


# -- files ---------------------------------------------------------------------


def _file_args(name: str, text: str, usage: str) -> list[str]:
    """Shell-like words of a magic's argument (quotes for names with spaces)."""
    try:
        words = shlex.split(text, posix=True)
    except ValueError as exc:
        raise CellError("magic", f"%{name}: {exc}. Usage: {usage}") from None
    return words


def _resolve(path: str) -> str:
    return os.path.join(os.getcwd(), os.path.expanduser(path))


def _cannot(verb: str, path: str, exc: BaseException) -> CellError:
    reason = getattr(exc, "strerror", None) or type(exc).__name__
    return CellError(
        "magic",
        f"cannot {verb} {path}: {reason} (the kernel's working directory is {os.getcwd()})",
    )


def _read_text(path: str) -> str:
    try:
        with open(_resolve(path), encoding="utf-8") as fh:
            return fh.read()
    except UnicodeDecodeError:
        raise CellError("magic", f"cannot read {path}: it is not UTF-8 text") from None
    except OSError as exc:
        raise _cannot("read", path, exc) from None


def _read_json(path: str) -> Any:
    """A JSON file's content; ``syntax`` (with line and column) when it is not JSON."""
    return parse_json_argument(_read_text(path), path)


# -- %run ----------------------------------------------------------------------

RUN_USAGE = "%run FILE [--inputs JSON] [--function NAME]"
_IDENTIFIER = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


def _word(text: str, pos: int) -> tuple[str, int]:
    """The word at ``pos`` (quoted with ' or " when it holds spaces) and where it ends."""
    if text[pos] in "'\"":
        quote = text[pos]
        end = text.find(quote, pos + 1)
        if end < 0:
            raise CellError("magic", f"%run: no closing quotation. Usage: {RUN_USAGE}")
        return text[pos + 1 : end], end + 1
    end = pos
    while end < len(text) and not text[end].isspace():
        end += 1
    return text[pos:end], end


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def _inputs_at(text: str, pos: int) -> tuple[Any, int]:
    """The JSON value of ``--inputs`` starting at ``pos``, and where it ends.

    The value may be quoted as in a shell (``--inputs '{"name": "Ada"}'``).
    """
    arg = text[pos:]
    if arg[:1] in ("'", '"') and arg[1:2] in ("{", "["):
        quote = arg[0]
        value, end = _inputs_at(text, pos + 1)
        if text[end:end + 1] != quote:
            raise CellError("magic", f"%run: the quoted --inputs has no closing {quote}. Usage: {RUN_USAGE}")
        return value, end + 1
    try:
        value, end = json.JSONDecoder().raw_decode(arg)
    except json.JSONDecodeError as exc:
        line = arg.count("\n", 0, exc.pos) + 1
        col = exc.pos - (arg.rfind("\n", 0, exc.pos) + 1)
        raise CellError(
            "syntax",
            f"the --inputs of %run is not valid JSON: {exc.msg} (line {line}, column {col + 1})",
            line=line,
            col=col,
            source=arg,
            stage="validate",
        ) from None
    except (ValueError, RecursionError) as exc:
        raise CellError(
            "syntax", f"the --inputs of %run is not valid JSON: {type(exc).__name__}",
            stage="validate",
        ) from None  # fmt: skip
    return value, pos + end


def parse_run_arguments(text: str) -> tuple[str, dict[str, Any] | None, str | None]:
    """``(file, inputs, function)`` of ``%run FILE [--inputs JSON] [--function NAME]``.

    ``--inputs`` takes one JSON object (it may hold spaces and span lines);
    ``--inputs=JSON`` and ``--function=NAME`` work too.
    """
    text = text.strip()
    if not text:
        raise CellError("magic", f"%run needs a file. Usage: {RUN_USAGE}")
    file, pos = _word(text, 0)
    if not file or file.startswith("--"):
        raise CellError("magic", f"%run needs the file first. Usage: {RUN_USAGE}")
    inputs: dict[str, Any] | None = None
    function: str | None = None
    seen: set[str] = set()
    while True:
        pos = _skip_space(text, pos)
        if pos >= len(text):
            break
        option, end = _word(text, pos)
        name, eq, _ = option.partition("=")
        if name not in ("--inputs", "--function"):
            raise CellError("magic", f"%run: unexpected argument {option!r}. Usage: {RUN_USAGE}")
        if name in seen:
            raise CellError("magic", f"%run: {name} is given twice. Usage: {RUN_USAGE}")
        seen.add(name)
        start = pos + len(name) + 1 if eq else _skip_space(text, end)
        if start >= len(text) or (not eq and text[start:].startswith("--")):
            raise CellError("magic", f"%run: {name} needs a value. Usage: {RUN_USAGE}")
        if name == "--inputs":
            value, pos = _inputs_at(text, start)
            if not isinstance(value, dict):
                raise CellError(
                    "magic",
                    '%run: --inputs must be a JSON object, for example --inputs {"query": "hi"}',
                )
            inputs = value
        else:
            function, pos = _word(text, start)
            if not _IDENTIFIER.match(function):
                raise CellError("magic", f"%run: {function!r} is not a function name.")
    return file, inputs, function


def _run(ctx: CellRunner, arg: str, body: str, raw_body: str) -> None:
    file, inputs, function = parse_run_arguments(_combined(arg, body))
    ctx.require_session()
    data = _read_json(file)
    kind = ctx.fragment_kind(data)
    if kind is None:
        raise CellError(
            "fragment",
            f"{file} is JSON but not a fragment: expected an agent definition "
            '({"functions": {"main": ...}}), a function object, a command object or a list '
            "of command objects.",
            stage="validate",
        )
    if function is not None and kind != "agent":
        raise CellError(
            "magic",
            f"%run: --function picks a function of an agent definition, but {file} holds "
            f"a {kind} fragment.",
        )
    ctx.show_run(ctx.run_fragment(data, inputs=inputs, function=function))


# -- %secret -------------------------------------------------------------------

_SECRET_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _no_prompt(name: str) -> CellError:
    return CellError(
        "magic",
        f"%secret cannot ask for {name}: this front end cannot prompt for input "
        "(allow_stdin is false, as in nbval, nbconvert and papermill). Give the secret "
        f"to the kernel instead: as the environment variable S2O_SECRET_{name}, or under "
        "[secrets] in s2o.toml (or the file named by S2O_CONFIG).",
    )


def _secret(ctx: CellRunner, arg: str, body: str, raw_body: str) -> None:
    words = _file_args("secret", _combined(arg, body), "%secret NAME")
    if len(words) != 1 or not _SECRET_NAME.match(words[0]):
        raise CellError(
            "magic",
            "%secret takes one name (letters, digits and _), for example: %secret API_KEY",
        )
    name = words[0]
    session = ctx.require_session()
    prompt = ctx.getpass
    if prompt is None:
        raise _no_prompt(name)
    try:
        value = prompt(f"Value of the secret {name}: ")
    except EOFError:
        raise CellError("magic", f"no value was entered; the secret {name} was not changed.") from None
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        if type(exc).__name__ == "StdinNotImplementedError":
            raise _no_prompt(name) from None
        raise
    if not isinstance(value, str) or not value:
        raise CellError("magic", f"the value is empty; the secret {name} was not changed.")
    settings = getattr(session, "settings", None)
    current = dict(getattr(settings, "secrets", None) or {})
    current[name] = value
    # The engine's merge replaces the whole ``secrets`` map: pass every secret.
    _update(ctx, session, {"secrets": current})
    ctx.emit_stream(
        "stdout",
        f"The secret {name} is set for this session (it is not stored in the notebook); "
        f"expressions read it as sys.secret['{name}'].\n",
    )


# -- %config -------------------------------------------------------------------


def _read_toml(ctx: CellRunner, path: str) -> dict[str, Any]:
    reader = getattr(ctx.api, "read_toml", None)
    if reader is None:
        from s2o_kernel.engine.settings import read_toml as reader
    return reader(_resolve(path))


def _config(ctx: CellRunner, arg: str, body: str, raw_body: str) -> None:
    words = _file_args("config", _combined(arg, body), "%config FILE")
    if len(words) != 1:
        raise CellError(
            "magic", "%config takes one TOML file, for example: %config s2o.toml"
        )
    session = ctx.require_session()
    data = _read_toml(ctx, words[0])
    if not data:
        return
    secrets = data.get("secrets")
    if isinstance(secrets, dict):
        # Secrets add to those already set (environment, %secret) instead of replacing them.
        current = dict(getattr(getattr(session, "settings", None), "secrets", None) or {})
        data = {**data, "secrets": {**current, **secrets}}
    _update(ctx, session, data)


# -- %state --------------------------------------------------------------------

STATE_USAGE = "%state save FILE  or  %state load FILE"
#: Marks a string that a fragment would read as an expression (SPEC 1, 8).
_REFERENCE_MARK = "\u2020"


def _is_dynamic(text: str) -> bool:
    try:
        from s2o_kernel.engine.dynamic import is_dynamic
    except Exception:  # pragma: no cover - an engine without the module
        return len(text) >= 2 and text[0] == "{" and text[-1] == "}"
    return bool(is_dynamic(text))


def literal_value(value: Any) -> Any:
    """A JSON value written so that a ``var`` command sets exactly that value.

    Numbers, booleans, null and plain strings are literal in a fragment. A
    string that a fragment would read as an expression (``"{...}"``, or one
    holding a reference mark) becomes the expression ``{ 'text' }`` with the
    text as an ASCII-only Python literal (the compile rules refuse other
    characters in expressions); lists and dicts are converted item by item.
    """
    if isinstance(value, str):
        if _is_dynamic(value) or _REFERENCE_MARK in value:
            return "{ " + ascii(value) + " }"
        return value
    if isinstance(value, list):
        return [literal_value(v) for v in value]
    if isinstance(value, dict):
        return {k: literal_value(v) for k, v in value.items()}
    return value


def state_fragment(state: dict[str, Any]) -> dict[str, Any] | None:
    """The ``var`` command that sets the agent and conversation variables of ``state``."""
    fields: dict[str, Any] = {}
    for scope in ("agent", "conv"):
        for name, value in (state.get(scope) or {}).items():
            fields[f"{scope}.{name}"] = literal_value(value)
    return {"var": fields} if fields else None


def _state_save(ctx: CellRunner, session: Any, path: str) -> None:
    agent = dict(session.agent_vars or {})
    conv = dict(session.conv_vars or {})
    text = json.dumps({"agent": agent, "conv": conv}, indent=2, ensure_ascii=False) + "\n"
    target = _resolve(path)
    tmp = f"{target}.tmp-{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, target)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise _cannot("write", path, exc) from None
    ctx.emit_stream(
        "stdout",
        f"Saved {len(agent)} agent and {len(conv)} conversation variables to {path}.\n",
    )


def _definition_length(session: Any) -> int | None:
    limits = getattr(getattr(session, "settings", None), "limits", None)
    value = getattr(limits, "definition_length", None)
    return value if isinstance(value, int) else None


def _state_load(ctx: CellRunner, session: Any, path: str) -> None:
    state = _read_json(path)
    if not isinstance(state, dict) or not set(state) <= {"agent", "conv"}:
        raise CellError(
            "magic",
            f'{path} is not a saved state: expected {{"agent": {{...}}, "conv": {{...}}}} '
            "(as %state save writes it).",
        )
    for scope in ("agent", "conv"):
        if not isinstance(state.get(scope, {}), dict):
            raise CellError("magic", f'{path}: "{scope}" must be a JSON object of variables.')
    fragment = state_fragment(state)
    counts = (len(state.get("agent") or {}), len(state.get("conv") or {}))
    if fragment is not None:
        # One ``var`` command: all or nothing. Its size is not the user's
        # definition, so the definition-length limit is lifted for it.
        limit = _definition_length(session)
        needed = len(json.dumps(fragment))
        raised = limit is not None and needed > limit
        if raised:
            session.update_settings({"limits": {"definition_length": needed}})
        try:
            run = session.run_fragment(fragment)
        finally:
            if raised:
                session.update_settings({"limits": {"definition_length": limit}})
        if getattr(run, "code", "success") != "success" or getattr(run, "error", None):
            from s2o_kernel.kernel.runner import run_error

            err = run_error(run)
            err.add_note(f"Nothing was loaded from {path}.")
            raise err
    ctx.emit_stream(
        "stdout",
        f"Loaded {counts[0]} agent and {counts[1]} conversation variables from {path}.\n",
    )


def _state(ctx: CellRunner, arg: str, body: str, raw_body: str) -> None:
    words = _file_args("state", _combined(arg, body), STATE_USAGE)
    if len(words) != 2 or words[0] not in ("save", "load"):
        raise CellError("magic", f"Usage: {STATE_USAGE}")
    session = ctx.require_session()
    if words[0] == "save":
        _state_save(ctx, session, words[1])
    else:
        _state_load(ctx, session, words[1])


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
        Magic(
            "run",
            "run an agent definition (or any fragment) from a JSON file as one run",
            f"{RUN_USAGE}\n"
            '%run agent.json --inputs {"query": "hi"}      main gets its arguments from the inputs\n'
            "%run agent.json --function greet               run another function of the agent\n"
            "The file is read relative to the kernel's working directory. Output parts show\n"
            "as they are produced, log lines on stderr, then the value. A run that does not\n"
            "succeed fails the cell: failCommand, timedOut or stopped, or the code of the\n"
            "error (runtime, not-json, loop-limit, ...). --inputs also sets sys.inputs for\n"
            "the run; its JSON may span lines.",
            _run,
            _run,
        ),
        Magic(
            "secret",
            "ask for a secret's value with a password prompt (never stored in the notebook)",
            "%secret NAME          e.g. %secret API_KEY, then f'Bearer {sys.secret[\"API_KEY\"]}'\n"
            "The value is asked with the front end's password prompt, kept for this\n"
            "session only, and shown as *** wherever it would appear. Front ends that cannot\n"
            "prompt (nbval, nbconvert) get an error: give secrets to the kernel as\n"
            "environment variables S2O_SECRET_<NAME> or under [secrets] in s2o.toml.",
            _secret,
            None,
        ),
        Magic(
            "config",
            "load settings from a TOML file, merged over the current settings",
            "%config FILE          e.g. %config s2o.toml\n"
            "Sections as in s2o.toml: allowlist, [rules], [limits], [sys], [const],\n"
            "[secrets], [profiles.*]. Keys given replace the current values; tables\n"
            "merge key by key (secrets add to those already set). All or nothing: when\n"
            "a setting is refused nothing changes.",
            _config,
            None,
        ),
        Magic(
            "state",
            "write / restore agent and conversation variables as a JSON file",
            "%state save FILE      write {\"agent\": {...}, \"conv\": {...}} to FILE\n"
            "%state load FILE      set the variables of FILE (others stay; all or nothing)\n"
            "Locals are not saved: they are the notebook's own cells.",
            _state,
            None,
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
keeps the session's variables.

%run FILE runs an agent definition from a file; %secret NAME asks for a
secret; %config FILE loads settings; %state save|load FILE keeps agent and
conversation variables. Cells run in a separate, supervised process, so
runaway work ends as timedOut or memory-limit and the session goes on."""


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
