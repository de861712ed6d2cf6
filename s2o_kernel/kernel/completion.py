"""Completion, inspection and is_complete (pure functions; never raise).

Completion offers the dagger ``†`` of reference expressions for ``\\dagger`` (IPython's LaTeX completion),
magic names after ``%``, file names after the file magics (``%run``, ``%config``,
``%state save|load``: the kernel's working directory), members after ``name.`` and after a literal
(``'a,b'.sp``, ``[1].co``), and otherwise names (allowlist, locals, namespaces, fragment words).

Offsets are Unicode code points (protocol 5.2+); out-of-range cursor
positions are clamped. Every completion reply carries
``metadata._jupyter_types_experimental`` aligned with ``matches``.
"""

from __future__ import annotations

import ast
import codeop
import io
import json
import re
import tokenize
import warnings
from collections.abc import Callable, Iterable
from typing import Any

from s2o_kernel.bounds import MAX_COMPLETED_FILES
from s2o_kernel.engine import fragment_words
from s2o_kernel.kernel.cells import is_comment_line, looks_like_json, strip_comments
from s2o_kernel.kernel.contract import SessionLike

_IDENT_CHARS = re.compile(r"[A-Za-z0-9_.]")
#: Tokens that carry no code (what :func:`_literal_before` skips).
_LAYOUT = frozenset({tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER,
                     tokenize.COMMENT})
_CLOSERS, _OPENERS = frozenset("])}"), frozenset("[({")
_IDENT = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_MAGIC_PREFIX = re.compile(r"^(\s*)(%%?)([A-Za-z0-9_-]*)$")
#: The magic a cell's first code line starts with (``%limits {…}``, ``%%allowlist``).
_MAGIC_AT = re.compile(r"\s*(?P<token>%%?(?P<name>[A-Za-z][A-Za-z0-9_-]*))")
#: ``%help`` up to the partial name of the magic it explains (``%help lim``, ``%help %%all``).
_HELP_ARG = re.compile(r"^\s*%help\s+%{0,2}(?P<partial>[A-Za-z0-9_-]*)$")
#: The line magics that take a file, up to the file's partial path (``%run age``, ``%state load s``).
_FILE_ARG = re.compile(r"^\s*%(?:run|config|state\s+(?:save|load))\s+(?:\S+\s+)*?(?P<partial>[^\s'\"]*)$")

#: Words offered inside a JSON fragment: the command names and field names the engine accepts
#: (SPEC 7), from its command registry; commands it refuses (``api``, ``db``, ``llm``, ``ask`` need
#: outside systems) and fields no command takes (``outputPath``) are not offered.
FRAGMENT_KEYWORDS = tuple(sorted(fragment_words()))

#: The inspect_reply content when nothing applies.
NOT_FOUND: dict[str, Any] = {"status": "ok", "found": False, "data": {}, "metadata": {}}


def clamp(cursor_pos: Any, code: str) -> int:
    """``cursor_pos`` as an offset into ``code`` (code points), clamped; the end when it is not a number."""
    try:
        pos = int(cursor_pos)
    except (TypeError, ValueError):
        return len(code)
    return max(0, min(pos, len(code)))


def empty_reply(cursor_pos: int) -> dict[str, Any]:
    """A complete_reply with no matches at ``cursor_pos``."""
    return {
        "status": "ok",
        "matches": [],
        "cursor_start": cursor_pos,
        "cursor_end": cursor_pos,
        "metadata": {"_jupyter_types_experimental": []},
    }


def _reply(matches: list[tuple[str, str]], start: int, end: int) -> dict[str, Any]:
    seen: set[str] = set()
    uniq: list[tuple[str, str]] = []
    for text, kind in matches:
        if text not in seen:
            seen.add(text)
            uniq.append((text, kind))
    return {
        "status": "ok",
        "matches": [t for t, _ in uniq],
        "cursor_start": start,
        "cursor_end": end,
        "metadata": {
            "_jupyter_types_experimental": [
                {"start": start, "end": end, "text": t, "type": k, "signature": ""}
                for t, k in uniq
            ]
        },
    }


def _sorted(items: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    return sorted(items, key=lambda item: (item[0].lower(), item[0]))


def _line_prefix(code: str, pos: int) -> str:
    return code[code.rfind("\n", 0, pos) + 1 : pos]


def _is_first_code_line(code: str, pos: int) -> bool:
    before = code[: code.rfind("\n", 0, pos) + 1]
    return all(not line.strip() or is_comment_line(line) for line in before.splitlines())


def token_before(code: str, pos: int) -> tuple[str, int]:
    """The dotted identifier that ends at ``pos`` and where it starts."""
    start = pos
    while start > 0 and _IDENT_CHARS.match(code[start - 1]):
        start -= 1
    return code[start:pos], start


#: Symbols typed by their LaTeX name and Tab, as IPython completes them: ``\dagger`` is the ``†`` that starts a
#: reference expression (SPEC 8), which no keyboard has.
SYMBOLS = {"\\dagger": "\u2020"}
#: A backslash and the letters after it, up to the cursor (``\dag``).
_SYMBOL_NAME = re.compile(r"\\[A-Za-z]*$")


def _complete_symbol(code: str, pos: int) -> dict[str, Any] | None:
    r"""``\dagger`` before the cursor completes to ``†`` (the whole name is replaced), a part of it
    (``\dag``) to the name, as IPython's LaTeX completion does; anywhere in a cell, inside a JSON string
    too. Another backslash name gets no match (never a variable's); ``None`` when there is no backslash name."""
    found = _SYMBOL_NAME.search(code, 0, pos)
    if found is None or found.group() == "\\":
        return None
    name = found.group()
    if name in SYMBOLS:
        return _reply([(SYMBOLS[name], "symbol")], found.start(), pos)
    return _reply([(known, "symbol") for known in SYMBOLS if known.startswith(name)], found.start(), pos)


def complete(
    code: str,
    cursor_pos: Any,
    session: SessionLike | None,
    *,
    line_magics: Iterable[str] = (),
    cell_magics: Iterable[str] = (),
) -> dict[str, Any]:
    """The complete_reply content for ``code`` at ``cursor_pos`` (code points); never raises."""
    code = code if isinstance(code, str) else ""
    pos = clamp(len(code) if cursor_pos is None else cursor_pos, code)
    try:
        symbol = _complete_symbol(code, pos)
        if symbol is not None:
            return symbol
        magic = _complete_magic(code, pos, list(line_magics), list(cell_magics))
        if magic is not None:
            return magic
        files = _complete_file(code, pos)
        if files is not None:
            return files
        token, start = token_before(code, pos)
        if token[:1].isdigit() or session is None:
            return empty_reply(pos)
        if token.startswith("."):
            return _complete_literal_member(session, code, token, start, pos)
        if "." in token:
            return _complete_member(session, token, start, pos)
        return _complete_name(session, code, token, start, pos)
    except Exception:
        return empty_reply(pos)


def _complete_magic(code: str, pos: int, line_magics: list[str], cell_magics: list[str]) -> dict[str, Any] | None:
    """Magic names after ``%`` or ``%%`` on the cell's first code line; ``None`` elsewhere."""
    line = _line_prefix(code, pos)
    if not _is_first_code_line(code, pos):
        return None
    explained = _HELP_ARG.match(line)
    if explained:  # %help NAME explains a magic: offer the magics' names, not the session's
        partial = explained["partial"]
        hits = [(n, "magic") for n in sorted(set(line_magics) | set(cell_magics)) if n.startswith(partial)]
        return _reply(hits, pos - len(partial), pos)
    m = _MAGIC_PREFIX.match(line)
    if not m:
        return None
    _, percent, partial = m.groups()
    names = cell_magics if percent == "%%" else line_magics
    hits = [(percent + n, "magic") for n in sorted(names) if n.startswith(partial)]
    return _reply(hits, pos - len(percent) - len(partial), pos)


def _complete_file(code: str, pos: int) -> dict[str, Any] | None:
    """File and folder names for the path argument of ``%run``, ``%config`` and ``%state save|load``, relative to
    the kernel's working directory as those magics read them (folders end with ``/``; names starting with
    ``.`` only after a ``.``); ``None`` elsewhere."""
    import os

    m = _FILE_ARG.match(_line_prefix(code, pos))
    if not m or not _is_first_code_line(code, pos):
        return None
    partial = m.group("partial")
    folder, _, stem = partial.rpartition("/")
    where = os.path.expanduser(folder + "/" if folder else "") or "."
    hits: list[tuple[str, str]] = []
    try:
        with os.scandir(where) as entries:
            for entry in entries:
                if entry.name.startswith(stem) and (stem.startswith(".") or not entry.name.startswith(".")):
                    is_dir = entry.is_dir()
                    hits.append((f"{folder}/" * bool(folder) + entry.name + "/" * is_dir, "path"))
                    if len(hits) >= MAX_COMPLETED_FILES:
                        break
    except OSError:
        return empty_reply(pos)
    return _reply(_sorted(hits), pos - len(partial), pos)


def _complete_member(session: SessionLike, token: str, start: int, pos: int) -> dict[str, Any]:
    """``base.partial``: the public members of ``base`` that start with ``partial``."""
    base, _, partial = token.rpartition(".")
    if not base or base.endswith(".") or not all(_IDENT.match(p) for p in base.split(".")):
        return empty_reply(pos)
    kinds = _kinds(session)
    hits = []
    for member in session.member_names(base):
        if member.startswith("_") or not member.startswith(partial):
            continue
        full = f"{base}.{member}"
        hits.append((full, kinds.get(full, "member")))
    return _reply(_sorted(hits), start, pos)


def _complete_literal_member(session: SessionLike, code: str, token: str, start: int, pos: int) -> dict[str, Any]:
    """``'a,b'.sp``, ``[1, 2].co``: the members of the literal's type that start with the partial name (the
    engine reads the literal, never runs it: ``member_names``)."""
    partial = token[1:]
    literal = _literal_before(code, start)
    if literal is None or "." in partial or (partial and not _IDENT.match(partial)):
        return empty_reply(pos)
    hits = [(member, "member") for member in session.member_names(literal)
            if not member.startswith("_") and member.startswith(partial)]
    return _reply(_sorted(hits), start + 1, pos)


def _literal_before(code: str, end: int) -> str | None:
    """The text of the string or bracketed display that ends right before ``end``, or ``None``."""
    before = code[:end]
    tokens: list[tokenize.TokenInfo] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(before).readline):
            tokens.append(tok)
    except (tokenize.TokenError, SyntaxError):  # a bracket left open earlier in the cell: what was read counts
        pass
    tokens = [t for t in tokens if t.type not in _LAYOUT]
    if not tokens or _offset(before, tokens[-1].end) != end:
        return None
    last = tokens[-1]
    if last.type == tokenize.STRING:
        return last.string
    if last.string not in _CLOSERS:
        return None
    depth = 0
    for tok in reversed(tokens):
        if tok.type == tokenize.OP and tok.string in _CLOSERS:
            depth += 1
        elif tok.type == tokenize.OP and tok.string in _OPENERS:
            depth -= 1
            if depth == 0:
                return before[_offset(before, tok.start):end]
    return None


def _offset(text: str, at: tuple[int, int]) -> int:
    """The index in ``text`` of tokenize's ``(row, col)`` (rows from 1, columns in code points)."""
    row, col = at
    lines = text.splitlines(keepends=True)
    return sum(len(line) for line in lines[:row - 1]) + col


def _complete_name(session: SessionLike, code: str, token: str, start: int, pos: int) -> dict[str, Any]:
    """Names that start with ``token``; inside a JSON fragment, after a quote, fragment words too."""
    hits = [
        (name, kind)
        for name, kind in _kinds(session).items()
        if "." not in name and not name.startswith("_") and name.startswith(token)
    ]
    if start > 0 and code[start - 1] == '"' and looks_like_json(strip_comments(code).strip()):
        hits.extend((w, "keyword") for w in FRAGMENT_KEYWORDS if w.startswith(token))
    return _reply(_sorted(hits), start, pos)


def _kinds(session: SessionLike) -> dict[str, str]:
    try:
        return session.completion_names()
    except Exception:  # a worker that cannot answer: no names
        return {}


# -- inspect -------------------------------------------------------------------


def name_at(code: str, pos: int) -> str:
    """The dotted name under (or just before) the cursor, or ``""``.

    When the cursor sits right after ``(`` (``len(|``), the name before the
    parenthesis is used, as IPython does for call tips.
    """
    pos = clamp(pos, code)
    start = pos
    while start > 0 and _IDENT_CHARS.match(code[start - 1]):
        start -= 1
    end = pos
    while end < len(code) and _IDENT_CHARS.match(code[end]):
        end += 1
    name = code[start:end].strip(".")
    if not name:
        back = pos
        while back > 0 and code[back - 1] in " \t":
            back -= 1
        if back > 0 and code[back - 1] == "(":
            return name_at(code, back - 1)
        return ""
    if name[:1].isdigit():
        return ""
    return name


def _magic_under(code: str, pos: int) -> str | None:
    """The name of the magic that starts the cell (its first line that is not blank or a comment) when the
    cursor ``pos`` is on it (``%lim|its``, ``%%allowlist|``), else ``None``."""
    start = 0
    for line in code.split("\n"):
        if line.strip() and not is_comment_line(line):
            found = _MAGIC_AT.match(line)
            if found and start + found.start("token") <= pos <= start + found.end("token"):
                return found["name"]
            return None
        start += len(line) + 1
    return None


def inspect(code: str, cursor_pos: Any, session: SessionLike | None,
            magic_help: Callable[[str], str | None] | None = None) -> dict[str, Any]:
    """The inspect_reply content: the session's description of the name at the cursor, or, on a ``%name`` or
    ``%%name`` that starts the cell, the magic's help (``magic_help``, as ``%help NAME``); never raises.

    ``found`` is false when there is no name there or nothing is known about it.
    """
    try:
        code = code if isinstance(code, str) else ""
        pos = clamp(len(code) if cursor_pos is None else cursor_pos, code)
        magic = _magic_under(code, pos)
        text = magic_help(magic) if magic is not None and magic_help is not None else None
        if text:
            return {"status": "ok", "found": True, "data": {"text/plain": text}, "metadata": {}}
        name = name_at(code, pos)
        text = session.describe(name) if name and session is not None else None
        if not text or session is None:
            return NOT_FOUND.copy()
        return {"status": "ok", "found": True, "data": {"text/plain": session.redact(text)}, "metadata": {}}
    except Exception:  # a worker that cannot answer: nothing found
        return NOT_FOUND.copy()


# -- is_complete ---------------------------------------------------------------

_COMPILER = codeop.CommandCompiler()
_COMPILER.compiler.flags |= ast.PyCF_ALLOW_TOP_LEVEL_AWAIT


def _bracket_state(text: str) -> tuple[int, bool, bool]:
    """(open bracket depth, inside a JSON string at the end, mismatch seen)."""
    depth = 0
    in_string = False
    escape = False
    mismatch = False
    pairs = {"}": "{", "]": "["}
    stack: list[str] = []
    for ch in text:
        if in_string:
            if escape:
                escape = False
            elif ch == "\\":
                escape = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch in "{[":
            stack.append(ch)
        elif ch in "}]":
            if not stack or stack[-1] != pairs[ch]:
                mismatch = True
            else:
                stack.pop()
    depth = len(stack)
    return depth, in_string, mismatch


def _expression_status(src: str) -> dict[str, str]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compiled = _COMPILER(src, "<cell>", "eval")
    except (SyntaxError, ValueError, OverflowError, MemoryError, RecursionError):
        return {"status": "invalid"}
    if compiled is None:
        return {"status": "incomplete", "indent": ""}
    return {"status": "complete"}


def _json_status(text: str) -> dict[str, str] | None:
    """complete / incomplete for JSON-looking text; ``None`` means: not JSON.

    A string still open at the end is not unfinished JSON: a JSON string holds no raw line break,
    so no further line can close it (the console runs the cell and shows the syntax error, as
    IPython does for ``"abc``)."""
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        depth, in_string, mismatch = _bracket_state(text)
        if not mismatch and depth > 0 and not in_string:
            return {"status": "incomplete", "indent": "  " * min(depth, 8)}
        return None
    return {"status": "complete"}


def is_complete(code: str) -> dict[str, str]:
    """The is_complete_reply content; pure and fast, never raises."""
    try:
        return _is_complete(code if isinstance(code, str) else "")
    except Exception:
        return {"status": "unknown"}


_COMPLETE = {"status": "complete"}


def _incomplete_json(text: str) -> dict[str, str] | None:
    """The incomplete status of JSON-looking text that is not finished yet, else ``None``."""
    status = _json_status(text)
    return status if status is not None and status["status"] == "incomplete" else None


def _cell_magic_status(text: str, ended: bool) -> dict[str, str]:
    """``%%name`` cells, as IPython's: complete once a blank line ends the body (``ended``: the cell's last
    line is blank; a console sends the cell when Enter is pressed on a blank line), or after two blank lines
    with no body; then ``%%fragment``, ``%%expr`` and JSON bodies are checked."""
    first, _, body = text.partition("\n")
    if not ended or (not body.strip() and body.count("\n") < 1):
        return {"status": "incomplete", "indent": ""}
    body = body.strip()
    name = first[2:].split(None, 1)[0] if first[2:].strip() else ""
    if name == "fragment":
        return _json_status(body) or {"status": "invalid"}
    if name == "expr":
        return _expression_status(body)
    if name in ("rules", "limits", "sys"):
        return _incomplete_json(body) or _COMPLETE.copy()
    return _COMPLETE.copy()


def _line_magic_status(text: str) -> dict[str, str]:
    """``%name ARG``: incomplete only while a JSON argument is unfinished."""
    first, _, rest = text.partition("\n")
    parts = first.split(None, 1)
    arg = ((parts[1] if len(parts) > 1 else "") + ("\n" + rest if rest else "")).strip()
    if arg.startswith(("{", "[")):
        return _incomplete_json(arg) or _COMPLETE.copy()
    return _COMPLETE.copy()


def _is_complete(code: str) -> dict[str, str]:
    text = strip_comments(code).strip()
    if not text:
        return _COMPLETE.copy()
    if text.startswith("%%"):
        unstripped = strip_comments(code).lstrip()  # its last line kept, blank or not
        return _cell_magic_status(unstripped, "\n" in unstripped and not unstripped.rsplit("\n", 1)[1].strip())
    if text.startswith("%"):
        return _line_magic_status(text)
    if text.endswith(";") and text[:-1].strip():  # ``x;``: the cell without it, its result hidden (cells.py)
        text = text[:-1].rstrip()
    if not looks_like_json(text):
        return _expression_status(text)
    return _json_or_expression_status(text)


def _json_or_expression_status(text: str) -> dict[str, str]:
    """JSON-looking text: complete JSON, else what it is as an expression, else unfinished JSON."""
    json_status = _json_status(text)
    if json_status is not None and json_status["status"] == "complete":
        return json_status
    expr_status = _expression_status(text)
    if expr_status["status"] == "complete" or json_status is None:
        return expr_status
    return json_status
