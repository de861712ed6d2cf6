"""Reading a magic's argument as words: :func:`split_words` (``shlex``) and :class:`MagicArgumentParser` (``argparse``).

Words are split as in a POSIX shell (quotes group words, so a file name may hold spaces), with one
addition for JSON: a word that starts with ``{`` or ``[``, alone or right after ``--option=``, is
one JSON value read by the JSON decoder, so ``%run a.json --inputs {"q": "a b"}`` needs no shell
quoting and the value may span lines. A value that is not valid JSON takes the rest of the text;
the option's type then reports where it is wrong (code ``syntax``).

The parser never exits or prints: every problem is ``S2OError("magic")`` whose message ends with
the usage line argparse generates (SPEC 9.1).
"""

from __future__ import annotations

import argparse
import io
import json
import re
import shlex
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from s2o_kernel.engine import S2OError
from s2o_kernel.kernel.cells import parse_json_argument

__all__ = ["MagicArgumentParser", "Once", "json_object", "split_words"]

_OPTION_WITH_VALUE = re.compile(r"--[A-Za-z][A-Za-z0-9_-]*=")
_DECODER = json.JSONDecoder()


def _json_end(text: str, start: int) -> int:
    """Where the JSON value starting at ``start`` ends; the end of ``text`` when it is not valid JSON."""
    try:
        return _DECODER.raw_decode(text, start)[1]
    except (ValueError, RecursionError):
        return len(text)


def _shell_word(text: str, start: int) -> tuple[str, int]:
    """The shell word starting at ``start`` (quotes removed) and the position after it.

    Raises ``ValueError`` (from ``shlex``) for an unclosed quotation or a trailing backslash.
    """
    stream = io.StringIO(text[start:])
    lexer = shlex.shlex(stream, posix=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    word = lexer.get_token()
    return word or "", start + stream.tell()


def split_words(text: str) -> list[str]:
    """The words of a magic's argument (see the module docstring); ``ValueError`` for a bad quotation."""
    words: list[str] = []
    pos = 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            return words
        option = _OPTION_WITH_VALUE.match(text, pos)
        value_at = option.end() if option else pos
        if text[value_at : value_at + 1] in ("{", "["):
            end = _json_end(text, value_at)
            words.append(text[pos:end])
        else:
            word, end = _shell_word(text, pos)
            words.append(word)
        pos = end


class MagicArgumentParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` for one magic: ``prog`` is ``%name``; errors are coded, never an exit.

    No ``-h`` option (``%help NAME`` explains a magic) and no abbreviated options.
    """

    def __init__(self, magic: str, **kwargs: Any) -> None:
        super().__init__(prog=f"%{magic}", add_help=False, allow_abbrev=False, **kwargs)

    def error(self, message: str) -> NoReturn:
        """Raise ``S2OError("magic")``: ``%name: message; usage: ...``."""
        raise S2OError("magic", f"{self.prog}: {message}; {self.format_usage().strip()}")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        """Raise ``S2OError("magic")`` instead of ending the process."""
        self.error((message or "").strip() or f"cannot read the arguments (status {status})")

    def parse_words(self, text: str) -> argparse.Namespace:
        """Split ``text`` into words and parse them; every word must be used."""
        try:
            words = split_words(text)
        except ValueError as exc:  # shlex: "No closing quotation", "No escaped character"
            reason = str(exc)
            self.error(reason[:1].lower() + reason[1:])
        namespace, extra = self.parse_known_args(words)
        if extra:
            self.error(f"unexpected argument {extra[0]!r}")
        return namespace


class Once(argparse.Action):
    """Store an option's value, refusing the option when it is given twice."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        """Set ``namespace.<dest>``; ``parser.error`` when it is already set."""
        if getattr(namespace, self.dest) is not None:
            parser.error(f"{option_string} is given twice")
        setattr(namespace, self.dest, values)


def json_object(what: str, example: str) -> Callable[[str], dict[str, Any]]:
    """An argparse ``type`` reading one JSON object.

    Text that is not JSON raises ``S2OError("syntax")`` with its line and column (``what`` names
    it in the message); JSON that is not an object raises ``argparse.ArgumentTypeError`` (the
    parser makes it a ``magic`` error), citing ``example``.
    """

    def parse(text: str) -> dict[str, Any]:
        value = parse_json_argument(text, what)
        if not isinstance(value, dict):
            raise argparse.ArgumentTypeError(f"must be a JSON object, for example {example}")
        return value

    return parse
