"""Bounded decoding of what comes from outside (SPEC 7.1, 12): the process that makes outside calls is a boundary.

What a server sends, and what the worker asks for, is hostile input for the kernel's process, which has no memory
cap and whose threads wait for each call. Everything here costs time linear in the bytes a call may read and
memory in proportion to them, and is refused with a coded error *before* it is built when it would not fit:

* **Content encodings** (:func:`decoded_chunks`): a body is read raw and inflated here, ``gzip`` and ``deflate``
  only, a step of at most :data:`~s2o_kernel.bounds.DECODE_STEP` bytes at a time (httpx inflates each network
  chunk whole: 64 KiB of ``gzip`` made 64 MiB at once); any other encoding is refused.
* **Charsets** (:data:`CHARSETS`, :func:`decode_text`): text is decoded only from SPEC 7.1's charsets, UTF-8,
  ASCII, Latin-1, UTF-16 and UTF-32 (by their IANA names and usual aliases), each a linear codec written in C.
  Any other declared charset (``punycode``, whose decoder is quadratic Python; ``utf-7``, ``idna``, ...) is
  read as UTF-8 with replacement, as is a body that declares none.
* **A budget per call** (:class:`Budget`): the bytes the call may read (``limit``, its ``max_response_bytes``)
  and the memory what it decodes may take, :data:`~s2o_kernel.bounds.DECODED_FACTOR` × ``limit``, charged before
  anything is built. Decoded text is charged the memory its characters take (1, 2 or 4 bytes each, as CPython
  stores them: a body of ASCII with one emoji takes 4 bytes a character); JSON is charged
  :data:`~s2o_kernel.bounds.JSON_ITEM_MEMORY` bytes per item and its characters (:func:`json_memory`), counted
  in the text before it is parsed (``[[],[],…]`` takes 21 bytes of memory per byte of text once parsed).
* **JSON** (:func:`loads`): parsed by the C parser once the budget allows it; deeper than
  :data:`~s2o_kernel.bounds.MAX_JSON_DEPTH` levels is ``too-deep`` naming the JSON path of the first container
  past the bound, never a ``RecursionError``. ``NaN``, ``Infinity`` and numbers past a float's range are not JSON.
* **Values** (:func:`check_value`): a value already in memory (a call's fields, which the worker sent) is walked
  iteratively before it is copied, its items charged against the budget and its depth bounded the same way.

Errors: the budget's own code (``api-too-large``, ``llm-too-large``, ``db-too-large``) for what would not fit,
``too-deep`` for what nests too deeply; :func:`loads` raises :class:`NotJson` (a ``ValueError``) for text that
is not JSON, which the caller keeps as text.
"""

from __future__ import annotations

import codecs
import json
import math
import re
import zlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

from ...bounds import DECODE_STEP, DECODED_FACTOR, JSON_ITEM_MEMORY, MAX_JSON_DEPTH, MAX_TEXT, PLACE_KEY
from ..errors import S2OError

#: SPEC 7.1's charsets: a declared ``charset`` (lower case, quotes stripped) → the Python codec that decodes it.
#: The one table of charsets a response's text is decoded from; any other is read as UTF-8 (:func:`codec_of`).
CHARSETS: dict[str, str] = {
    "utf-8": "utf-8", "utf8": "utf-8",
    "us-ascii": "ascii", "ascii": "ascii", "ansi_x3.4-1968": "ascii", "iso646-us": "ascii", "csascii": "ascii",
    "iso-8859-1": "latin-1", "iso8859-1": "latin-1", "iso_8859-1": "latin-1", "latin1": "latin-1",
    "latin-1": "latin-1", "l1": "latin-1", "cp819": "latin-1", "ibm819": "latin-1", "csisolatin1": "latin-1",
    "utf-16": "utf-16", "utf-16le": "utf-16-le", "utf-16be": "utf-16-be",
    "utf-32": "utf-32", "utf-32le": "utf-32-le", "utf-32be": "utf-32-be",
}

#: Content encodings a body may come in, → the ``wbits`` of the zlib stream that inflates it.
_ENCODINGS = {"gzip": zlib.MAX_WBITS | 16, "x-gzip": zlib.MAX_WBITS | 16, "deflate": zlib.MAX_WBITS}
#: What a request asks for in ``Accept-Encoding``: the encodings :func:`decoded_chunks` inflates.
ACCEPT_ENCODING = "gzip, deflate"


class NotJson(ValueError):
    """The text is not JSON (or not finite JSON): the caller keeps it as text."""


class Budget:
    """What one call may decode (SPEC 7.1, 12).

    ``Budget(limit, code, setting)``: ``limit`` is the bytes the call may read, ``code`` the error past the budget
    (``api-too-large``), ``setting`` how a message names the limit (``max_response_bytes = 10485760``). ``left``
    is the memory, in bytes, that what it decodes may still take: :data:`DECODED_FACTOR` × ``limit`` at first.
    """

    def __init__(self, limit: int, code: str, setting: str) -> None:
        self.limit = limit
        self.code = code
        self.setting = setting
        self.left = DECODED_FACTOR * limit

    def take(self, memory: int, what: str) -> None:
        """Charge ``memory`` bytes for ``what`` (``the response's JSON``); raises the budget's code, with nothing
        charged, when less is left."""
        if memory > self.left:
            raise S2OError(self.code, f"{what} would take about {memory} bytes of memory decoded, past what a "
                           f"call may hold decoded ({DECODED_FACTOR} × {self.setting}, {self.left} bytes of it "
                           "left); it was not decoded")
        self.left -= memory

    def give(self, memory: int) -> None:
        """Give back ``memory`` bytes taken for something that is gone (a streamed event once it is handled)."""
        self.left += memory

    def too_large(self, message: str) -> S2OError:
        """The budget's error with ``message``."""
        return S2OError(self.code, message)


# -- bytes: content encodings -----------------------------------------------------------------------------------

async def decoded_chunks(raw: AsyncIterator[bytes], encoding: str, kind: str) -> AsyncIterator[bytes]:
    """The body whose raw chunks are ``raw``, inflated as ``encoding`` (a ``Content-Encoding`` header) says:
    ``gzip`` or ``deflate`` (a zlib stream, or a raw deflate one), at most :data:`DECODE_STEP` bytes a step, so
    no step holds more however much a chunk inflates to; no encoding (or ``identity``) passes the chunks as they
    are. Any other encoding, more than one, or a stream that does not inflate is ``<kind>-failed`` (``kind``:
    ``api``, ``llm``)."""
    names = [name.strip().lower() for name in encoding.split(",") if name.strip().lower() not in ("", "identity")]
    if not names:
        async for chunk in raw:
            yield chunk
        return
    if len(names) > 1 or names[0] not in _ENCODINGS:
        raise S2OError(f"{kind}-failed", f"the response is encoded as {encoding.strip()[:PLACE_KEY]!r}, which is "
                       f"not read (the request accepts {ACCEPT_ENCODING})")
    wbits = _ENCODINGS[names[0]]
    inflate = zlib.decompressobj(wbits)
    started = False
    try:
        async for chunk in raw:
            if not started and wbits == zlib.MAX_WBITS and chunk:
                started = True  # "deflate" is a zlib stream, though some servers send raw deflate
                if chunk[0] & 0x0F != 8:
                    inflate = zlib.decompressobj(-zlib.MAX_WBITS)
            data = chunk
            while data:
                out = inflate.decompress(data, DECODE_STEP)
                data = inflate.unconsumed_tail
                if out:
                    yield out
        out = inflate.flush()
        if out:
            yield out
    except zlib.error as exc:
        raise S2OError(f"{kind}-failed", f"the response's {names[0]} body does not inflate: {exc}") from None


async def read_body(response: Any, limit: int, kind: str) -> bytearray:
    """The body of a streamed httpx ``response``, inflated (:func:`decoded_chunks`), as it arrives:
    ``<kind>-too-large`` (``kind``: ``api``, ``llm``) once it passes ``limit`` bytes (its ``max_response_bytes``),
    or at once when its ``Content-Length`` says so."""
    length = response.headers.get("content-length", "").strip()
    if length.isdigit() and (len(length) > 18 or int(length) > limit):
        raise S2OError(f"{kind}-too-large", f"the response is {length[:24]} bytes, over max_response_bytes = {limit}")
    body = bytearray()
    async for chunk in decoded_chunks(response.aiter_raw(), response.headers.get("content-encoding", ""), kind):
        if len(body) + len(chunk) > limit:
            raise S2OError(f"{kind}-too-large", f"the response is larger than max_response_bytes = {limit} bytes; "
                           "it was not read further")
        body += chunk
    return body


# -- text: charsets -----------------------------------------------------------------------------------------------

def codec_of(content_type: str) -> str:
    """The codec of a ``Content-Type``'s ``charset`` in :data:`CHARSETS`; ``utf-8`` for any other or none."""
    for param in content_type.split(";")[1:]:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            return CHARSETS.get(value.strip().strip("\"'").strip().lower(), "utf-8")
    return "utf-8"


#: A byte that starts a 4-byte UTF-8 sequence: a character outside the Basic Multilingual Plane.
_ASTRAL_LEAD = re.compile(rb"[\xf0-\xf4]")
#: A character outside the Basic Multilingual Plane.
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")
#: A JSON escape of a surrogate: half of a character outside the Basic Multilingual Plane.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abAB]")


def text_memory(raw: bytes | bytearray, codec: str) -> int:
    """Bytes of memory the text ``raw`` decodes to with ``codec`` (a value of :data:`CHARSETS`) takes, at most:
    its characters times the widest one's size (1, 2 or 4 bytes, as CPython stores a text). Bounded from the bytes
    for every codec but UTF-8 holding 4-byte sequences, which is measured by decoding it a step at a time."""
    size = len(raw)
    if codec == "latin-1" or (codec in ("utf-8", "ascii") and raw.isascii()):
        return size
    if codec == "utf-8" and _ASTRAL_LEAD.search(raw) is not None:
        return _measured(raw)
    if codec.startswith("utf-32"):
        return size + 4  # a character per 4 bytes, 4 bytes each; a cut end is one replacement character
    return 2 * size + 4  # UTF-8 and ASCII with replacements: 2 bytes a character; UTF-16: 4 for 2 bytes


def _measured(raw: bytes | bytearray) -> int:
    """:func:`text_memory` of UTF-8 ``raw``, measured: decoded :data:`DECODE_STEP` bytes at a time."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    chars, widest = 0, 1
    view = memoryview(raw)
    try:
        for start in range(0, len(raw), DECODE_STEP):
            piece = decoder.decode(bytes(view[start:start + DECODE_STEP]), final=start + DECODE_STEP >= len(raw))
            chars += len(piece)
            widest = max(widest, width(piece))
    finally:
        view.release()
    return chars * widest


def width(text: str) -> int:
    """Bytes CPython stores each character of ``text`` in: 1 (Latin-1), 2, or 4 (a character outside the Basic
    Multilingual Plane), at most (a text of Latin-1 characters past ASCII counts 2)."""
    if text.isascii():
        return 1
    return 4 if _ASTRAL.search(text) is not None else 2


def decode_text(raw: bytes | bytearray, content_type: str, budget: Budget, what: str) -> str:
    """The text of ``raw``, decoded with the codec its ``content_type`` declares (:func:`codec_of`), invalid bytes
    replaced; its memory (:func:`text_memory`) is charged to ``budget`` first (its code past it, ``what`` naming
    the text in the message)."""
    codec = codec_of(content_type)
    budget.take(text_memory(raw, codec), f"{what}'s text")
    return raw.decode(codec, "replace")


# -- JSON ---------------------------------------------------------------------------------------------------------

def json_memory(text: str, enough: int) -> int:
    """Bytes of memory ``json.loads(text)`` would take, at most: :data:`JSON_ITEM_MEMORY` per item (a list, an
    object, a key or a value: one more than the commas, colons and opening brackets outside strings) plus its
    characters at the widest size they may decode to (a ``\\ud83d`` escape makes its text 4 bytes a character).

    Counted in C over the whole text first; only when that count, which includes the characters inside strings,
    is past ``enough`` are the strings left out (their quotes found one by one, as many as there are strings,
    never more than ``enough`` / :data:`JSON_ITEM_MEMORY` of them: each string is an item, and a text of more
    is over ``enough`` whatever else it holds)."""
    chars = len(text) * _json_width(text)
    items = 1 + text.count(",") + text.count(":") + text.count("[") + text.count("{")
    if items * JSON_ITEM_MEMORY + chars <= enough:
        return items * JSON_ITEM_MEMORY + chars
    strings = (text.count('"') - text.count('\\"')) // 2  # at least this many strings: each has two quotes
    if strings * JSON_ITEM_MEMORY + chars > enough:
        return strings * JSON_ITEM_MEMORY + chars
    return _items_outside_strings(text) * JSON_ITEM_MEMORY + chars


def _json_width(text: str) -> int:
    """The widest size, in bytes, a character of the strings parsed from the JSON ``text`` may take."""
    escaped = 1
    if "\\u" in text:
        escaped = 4 if _SURROGATE_ESCAPE.search(text) is not None else 2
    return max(width(text), escaped)


def _items_outside_strings(text: str) -> int:
    """One more than the commas, colons and opening brackets of ``text`` outside its strings."""
    plain = text.replace("\\\\", "").replace('\\"', "")  # escapes that hide a quote or a backslash, gone
    items, at, end = 1, 0, len(plain)
    while at < end:
        opening = plain.find('"', at)
        stop = end if opening < 0 else opening
        items += sum(plain.count(mark, at, stop) for mark in ",:[{")
        closing = plain.find('"', stop + 1) if opening >= 0 else -1
        at = end if closing < 0 else closing + 1
    return items


def _not_json_constant(name: str) -> Any:
    raise NotJson(f"{name} is not JSON")


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise NotJson(f"{text[:PLACE_KEY]} is past a float's range")
    return number


def loads(text: str, budget: Budget, what: str) -> Any:
    """The JSON value of ``text``, parsed once ``budget`` takes its memory (:func:`json_memory`). Raises the
    budget's code when it would not fit, ``too-deep`` (at the JSON path of the first container past
    :data:`MAX_JSON_DEPTH`) when it nests deeper, :class:`NotJson` when ``text`` is not finite JSON; ``what``
    names the text in messages (``the response``)."""
    budget.take(json_memory(text, budget.left), f"{what}'s JSON")
    try:
        value = json.loads(text, parse_constant=_not_json_constant, parse_float=_finite)
    except RecursionError:  # deeper than the C parser goes: the path is found in the text
        raise too_deep(what, _deep_path_in_text(text)) from None
    except NotJson:
        raise
    except ValueError as exc:
        raise NotJson(str(exc)) from None
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH:
        _walk(value, None, what, "")
    return value


def too_deep(what: str, steps: list[int | str], where: str = "") -> S2OError:
    """``too-deep`` for ``what`` at the JSON path ``where`` + ``steps`` (``details["json_path"]``; the message
    shows it cut to :data:`MAX_TEXT` characters)."""
    path = json_path(where, steps)
    shown = path if len(path) <= MAX_TEXT else path[:MAX_TEXT // 2] + "…" + path[-MAX_TEXT // 2:]
    return S2OError("too-deep", f"{what} nests deeper than {MAX_JSON_DEPTH} levels of lists and objects, at {shown}",
                    details={"json_path": path})


def json_path(where: str, steps: list[int | str]) -> str:
    """``where`` followed by ``[i]`` for each index and ``.key`` for each key (cut to :data:`PLACE_KEY`
    characters); ``$`` stands for the top when ``where`` is empty."""
    parts = [where or "$"]
    for step in steps:
        parts.append(f"[{step}]" if type(step) is int else f".{str(step)[:PLACE_KEY]}")
    return "".join(parts)


#: The next character of a JSON text that changes its structure or starts a string.
_STRUCTURE = re.compile(r'[\[\]{},"]')
#: The inside of a string, up to its closing quote (or the end): linear, nothing to backtrack into.
_STRING_BODY = re.compile(r'(?:[^"\\]++|\\.?)*+', re.S)


def _deep_path_in_text(text: str) -> list[int | str]:
    """The path to the first container of the JSON ``text`` nested :data:`MAX_JSON_DEPTH` levels deep, read from
    the text's brackets, commas and strings up to it (each index, or the key last read in an object)."""
    levels: list[list[Any]] = []  # per open container: [is a list, index or key]
    at = 0
    while (found := _STRUCTURE.search(text, at)) is not None:
        mark, at = found.group(), found.end()
        if mark == '"':
            inside = _STRING_BODY.match(text, at)
            end = inside.end() if inside is not None else at
            if levels and not levels[-1][0]:
                levels[-1][1] = _key(text[at:min(end, at + 6 * PLACE_KEY)])
            at = end + 1
        elif mark in "[{":
            if len(levels) >= MAX_JSON_DEPTH:
                return [step for _, step in levels]
            levels.append([mark == "[", 0 if mark == "[" else ""])
        elif mark in "]}":
            if levels:
                levels.pop()
        elif levels and levels[-1][0]:
            levels[-1][1] += 1
    return [step for _, step in levels]


def _key(raw: str) -> str:
    """A key's text as written between its quotes (its first characters), its escapes decoded when they can be."""
    try:
        return str(json.loads(f'"{raw}"'))
    except ValueError:
        return raw


def check_value(value: Any, budget: Budget | None, what: str, where: str) -> None:
    """Check a JSON value already in memory (a call's fields) before anything copies it: its items are charged
    to ``budget`` (:data:`JSON_ITEM_MEMORY` each, keys included; the budget's code past it; ``None``: not
    counted) and a container nested deeper than :data:`MAX_JSON_DEPTH` levels is ``too-deep`` at ``where`` + its
    path. Iterative; walks at most the items the budget allows."""
    items = _walk(value, budget, what, where)
    if budget is not None:
        budget.take(items * JSON_ITEM_MEMORY, what)


def _walk(value: Any, budget: Budget | None, what: str, where: str) -> int:
    """The items of ``value`` (exact lists and dicts nest; each key counts), counted a level at a time (each
    container's items when it is reached, its nested containers gathered for the next level), so the walk costs a
    comprehension per container and no path per item. Raises the budget's code past the items ``budget`` has room
    for (``None``: no bound), before the containers of that level are gathered, and ``too-deep`` when a container
    sits :data:`MAX_JSON_DEPTH` levels deep (its path found then, :func:`_deep_path`)."""
    if type(value) is not list and type(value) is not dict:
        return 1
    most = None if budget is None else budget.left // JSON_ITEM_MEMORY
    level: list[Any] = [value]
    items, depth = 1, 0
    while level:
        if depth >= MAX_JSON_DEPTH:
            raise too_deep(what, _deep_path(value), where)
        below: list[Any] = []
        for container in level:
            children = container if type(container) is list else container.values()
            items += len(container) if type(container) is list else 2 * len(container)
            if budget is not None and most is not None and items > most:
                raise budget.too_large(f"{what}: more than {most} JSON items, past what a call may hold decoded "
                                       f"({DECODED_FACTOR} × {budget.setting}, {JSON_ITEM_MEMORY} bytes an item)")
            below += [child for child in children if type(child) is list or type(child) is dict]
        level, depth = below, depth + 1
    return items


def _children(value: Any) -> Iterator[tuple[int | str, Any]]:
    return enumerate(value) if type(value) is list else iter(value.items())


def _deep_path(value: Any) -> list[int | str]:
    """The path to the first container of ``value`` (depth first) nested :data:`MAX_JSON_DEPTH` levels deep
    (``[]`` when there is none), walked with a stack of iterators: memory in the depth, not the size."""
    stack = [_children(value)]
    steps: list[int | str] = []
    while stack:
        step = next(stack[-1], None)
        if step is None:
            stack.pop()
            if steps:
                steps.pop()
            continue
        key, child = step
        if type(child) is list or type(child) is dict:
            if len(stack) >= MAX_JSON_DEPTH:
                return [*steps, key]
            stack.append(_children(child))
            steps.append(key)
    return []
