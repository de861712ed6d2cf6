"""Cell reading (SPEC 9): comment stripping and classification.

Every cell first loses its ``#`` comment lines (a line whose stripped text
starts with ``#``: nbval markers such as ``# NBVAL_RAISES_EXCEPTION`` and
ordinary comments), in every kind of cell. What remains is, in order of
precedence:

* empty → nothing to do;
* ``%%name ...`` (cell magic, body = the following lines) or ``%name ...``
  (line magic, argument = the rest of the cell, so a JSON argument may span
  lines);
* ``name?`` / ``?name`` → help on a name (IPython's ``?``), shown in the pager; ``%magic?`` (or
  ``%%magic?``, ``??``) alone → that magic's help, as ``%help magic``;
* ``exit``, ``quit``, ``exit()`` or ``quit()`` → end the console, as in IPython (the runner
  evaluates it instead when a local variable has that name);
* JSON: a string literal → a dynamic string; a fragment (command object, list
  of commands, function object, agent definition) → a fragment run;
* a cell wrapped whole in braces ``{ ... }`` → the dynamic-string form: the
  whole cell text is handed to the engine as a dynamic string (``{ x * 2 }``
  means ``x * 2``; ``{"a": 1}`` means the dict);
* otherwise one expression.

A trailing ``;`` on any of the last three (``x * 2;``, ``{"var": {"x": 1}};``) hides the result, as in
IPython: the cell runs as without it and shows no ``execute_result`` (``Cell.quiet``; an agent's
expression has no ``;``, so this is the kernel's convention, like ``%``).

Comment stripping is line-based, and knows string literals: a line that
begins inside a triple-quoted string (three single or three double quotes, as
Python and TOML write them) is text of the string and stays, whatever it starts with.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from s2o_kernel.bounds import MAX_DUPLICATES
from s2o_kernel.engine import S2OError

# Kinds of cell.
EMPTY = "empty"
LINE_MAGIC = "line_magic"
CELL_MAGIC = "cell_magic"
HELP = "help"
DYNAMIC = "dynamic"
FRAGMENT = "fragment"
EXPRESSION = "expression"
EXIT = "exit"

#: Cells that end ``jupyter console`` (IPython's ``exit`` and ``quit``), and the name each reads.
EXIT_WORDS = {"exit": "exit", "quit": "quit", "exit()": "exit", "quit()": "quit"}

_MAGIC_RE = re.compile(r"^(%%?)([^\s]*)[ \t]*(.*)$")
_MAGIC_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
_HELP_RE = re.compile(
    r"^(?:\?{1,2}\s*(?P<pre>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)"
    r"|(?P<post>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\s*\?{1,2})$"
)

#: Text that was most likely meant as JSON: an object or list whose first
#: member is a string, object or list (``{"var": ...``, ``[{"if": ...``).
_MEANT_AS_JSON = re.compile(r'^[\[{]\s*["\[{]')

FragmentKind = Callable[[Any], "str | None"]


def is_comment_line(line: str) -> bool:
    """True for a line whose stripped text starts with ``#``."""
    return line.lstrip().startswith("#")


def strip_comments(code: str) -> str:
    """Drop every ``#`` comment line; other lines, and every line that begins inside a string literal
    (:func:`lines_in_strings`), are kept exactly. Lines end at ``\\n`` only: a JSON or Python string may hold
    U+2028, U+0085 or a form feed, which ``str.splitlines`` would break at."""
    lines = code.split("\n")
    kept = lines_in_strings(lines)
    return "\n".join(line for number, line in enumerate(lines)
                     if number in kept or not is_comment_line(line))


def lines_in_strings(lines: list[str]) -> set[int]:
    """The numbers (from 0) of the ``lines`` that begin inside a string literal: a triple-quoted one (three
    single or three double quotes) opened outside any string or comment and not closed on an earlier line,
    or a one-quoted one whose line ended with a backslash (backslash escapes skipped). A ``#`` comment ends
    with its line."""
    inside: str | None = None  # the quotes that close the string the scan is in
    found: set[int] = set()
    for number, line in enumerate(lines):
        if inside is not None:
            found.add(number)
        i, end = 0, len(line)
        while i < end:
            char = line[i]
            if inside is not None:  # in a string: look for its closing quotes
                if char == "\\":
                    i += 2
                elif line.startswith(inside, i):
                    i += len(inside)
                    inside = None
                else:
                    i += 1
            elif char == "#":  # a comment: the rest of the line
                break
            elif char in "'\"":
                inside = char * 3 if line.startswith(char * 3, i) else char
                i += len(inside)
            else:
                i += 1
        if inside is not None and len(inside) == 1 and not line.rstrip("\r").endswith("\\"):
            inside = None  # a one-quoted string ends with its line unless a backslash continues it
    return found


@dataclass(frozen=True)
class Cell:
    """A classified cell.

    ``text`` is the cell after comment stripping and outer white-space
    stripping. For magics: ``magic`` is the name (may be invalid, checked by
    the magic registry), ``arg`` the text after the name (for a line magic the
    rest of the cell, for a cell magic the rest of the first line), ``body``
    the following lines without comments and ``raw_body`` the following lines
    exactly as written (comments included). For fragments ``data`` is the
    parsed JSON. ``json_error`` keeps why a JSON-looking cell was not JSON
    (to hint at it if the expression reading fails too). ``quiet``: a
    value cell written with a trailing ``;`` (not in ``text``), whose result is
    not shown. ``duplicate_keys``: keys of a fragment that appear twice in one
    of its objects (the last one counts).
    """

    kind: str
    text: str
    magic: str | None = None
    arg: str = ""
    body: str = ""
    raw_body: str = ""
    data: Any = None
    json_error: str | None = None
    quiet: bool = False
    duplicate_keys: tuple[str, ...] = ()


def _raw_body_after_magic_line(code: str) -> str:
    """The lines after the first non-comment line, exactly as written."""
    lines = code.split("\n")
    for i, line in enumerate(lines):
        if line.strip() and not is_comment_line(line):
            return "\n".join(lines[i + 1 :])
    return ""


def looks_like_json(text: str, *, python: bool = False) -> bool:
    """True when ``text`` starts like a JSON object, list or string (``python``: or a Python string, ``'``)."""
    return text[:1] in (("{", "[", '"', "'") if python else ("{", "[", '"'))


def json_problem(text: str) -> str | None:
    """Why ``text`` is not JSON (``message (line L, column C)``, or ``not-JSON token`` text); ``None`` when it is."""
    try:
        load_json(text)
    except json.JSONDecodeError as exc:
        return json_error_text(exc)
    except (NotJSON, ValueError, RecursionError) as exc:
        return str(exc) or type(exc).__name__
    return None


def json_error_text(exc: json.JSONDecodeError) -> str:
    """``message (line L, column C)`` of a JSON error, both 1-based."""
    return f"{exc.msg} (line {exc.lineno}, column {exc.colno})"


def _magic_cell(text: str, code: str) -> Cell:
    """A cell starting with ``%``: a cell magic (``%%``) or a line magic."""
    first, _, rest = text.partition("\n")
    m = _MAGIC_RE.match(first.strip())
    assert m is not None  # the pattern matches any single line
    percent, name, arg = m.groups()
    if name.endswith("?") and not arg.strip() and not rest.strip():  # %limits? / %%allowlist??: its help
        return Cell(LINE_MAGIC, text, magic="help", arg=name.rstrip("?"))
    if percent == "%%":
        return Cell(CELL_MAGIC, text, magic=name, arg=arg.strip(), body=rest,
                    raw_body=_raw_body_after_magic_line(code))  # fmt: skip
    full_arg = (arg + ("\n" + rest if rest else "")).strip()
    return Cell(LINE_MAGIC, text, magic=name, arg=full_arg)


class NotJSON(ValueError):
    """A token Python's ``json`` reads but JSON has not: ``NaN``, ``Infinity``, ``-Infinity``."""


def _not_json(token: str) -> Any:
    raise NotJSON(f"{token} is not JSON")


def load_json(text: str, duplicates: list[str] | None = None) -> Any:
    """``json.loads`` of a cell or a magic's argument, refusing what JSON has not (:class:`NotJSON`): a fragment
    is JSON (SPEC 7), and an agent definition tested here must load elsewhere too. A key that appears twice in
    one object keeps its last value, as every JSON reader does; given a list, ``duplicates`` gets each such key
    (at most :data:`MAX_DUPLICATES`), so the kernel can say so."""
    if duplicates is None:
        return json.loads(text, parse_constant=_not_json)

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        made = dict(items)
        if len(made) < len(items):
            seen: set[str] = set()
            for key, _ in items:
                if key in seen and key not in duplicates and len(duplicates) < MAX_DUPLICATES:
                    duplicates.append(key)
                seen.add(key)
        return made

    return json.loads(text, parse_constant=_not_json, object_pairs_hook=pairs)


def _json_cell(text: str, fragment_kind: FragmentKind | None) -> Cell | str | None:
    """JSON-looking text: a dynamic-string or fragment cell; else why it is not JSON (or ``None``).

    The reason is kept only for text most likely meant as JSON (``{"var": ...``).
    """
    duplicates: list[str] = []
    try:
        data = load_json(text, duplicates)
    except json.JSONDecodeError as exc:
        return json_error_text(exc) if _MEANT_AS_JSON.match(text) else None
    except NotJSON as exc:
        return str(exc) if _MEANT_AS_JSON.match(text) else None
    except RecursionError:  # past Python's stack: not a parse error, a depth (a fragment may nest 200 levels)
        return "it nests too deeply to read (JSON nests at most 200 levels in a fragment)"
    except ValueError:
        return "not valid JSON" if _MEANT_AS_JSON.match(text) else None
    if isinstance(data, str):
        return Cell(DYNAMIC, data, data=data)
    kind = None
    if fragment_kind is not None:
        try:
            kind = fragment_kind(data)
        except Exception:  # an engine that cannot judge it: an expression
            kind = None
    if kind is None:
        return None
    return Cell(FRAGMENT, text, data=data, arg=str(kind), duplicate_keys=tuple(duplicates))


def classify(code: str, fragment_kind: FragmentKind | None = None) -> Cell:
    """Classify one cell (see the module docstring for the precedence); never raises."""
    text = strip_comments(code).strip()
    if not text:
        return Cell(EMPTY, "")
    if text.startswith("%"):
        return _magic_cell(text, code)
    if text in EXIT_WORDS:
        return Cell(EXIT, text, arg=EXIT_WORDS[text])
    m = _HELP_RE.match(text)
    if m:
        return Cell(HELP, text, arg=m.group("pre") or m.group("post"))
    if text.endswith(";") and text[:-1].strip():  # IPython's quiet cell: run it, show no result
        return dataclasses.replace(_value_cell(text[:-1].rstrip(), fragment_kind), quiet=True)
    return _value_cell(text, fragment_kind)


def _value_cell(text: str, fragment_kind: FragmentKind | None) -> Cell:
    """A cell that gives a value: JSON (a dynamic string or a fragment), the ``{ … }`` form, an expression."""
    json_error: str | None = None
    if looks_like_json(text):
        found = _json_cell(text, fragment_kind)
        if isinstance(found, Cell):
            return found
        json_error = found
    if text.startswith("{") and text.endswith("}"):
        return Cell(DYNAMIC, text, json_error=json_error)
    return Cell(EXPRESSION, text, json_error=json_error)


def valid_magic_name(name: str | None) -> bool:
    """True for a name a magic may have: a letter, then letters, digits, ``_`` and ``-``."""
    return bool(name) and bool(_MAGIC_NAME_RE.match(name or ""))


def parse_json_argument(text: str, what: str, *, quote: bool = True) -> Any:
    """``json.loads`` with a coded ``syntax`` error (1-based line, 0-based col).

    The error shows the offending line of ``text`` under a caret only when ``quote`` is true:
    a file a magic was given may be any file, and one that is not JSON is not quoted (SPEC 9.1).
    ``json``'s own messages (``Expecting value``, ``Extra data``, …) quote nothing.
    """
    try:
        return load_json(text)
    except json.JSONDecodeError as exc:
        raise S2OError(
            "syntax",
            f"{what} is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
            line=exc.lineno,
            col=max(exc.colno - 1, 0),
            source=text if quote else None,
            stage="validate",
        ) from None
    except RecursionError:
        raise S2OError("too-deep", f"{what} nests too deeply to read (SPEC 12)", stage="validate") from None
    except NotJSON as exc:  # our own message: it quotes only the token
        raise S2OError("syntax", f"{what} is not valid JSON: {exc}", stage="validate") from None
    except ValueError as exc:
        raise S2OError(
            "syntax", f"{what} is not valid JSON: {type(exc).__name__}", stage="validate"
        ) from None
