"""Scopes an expression can read (SPEC 5): ``agent``, ``conv``, ``const``, ``sys``, ``command``, ``exc``.

Each namespace is a small read-only proxy. Reading a variable that was never
set raises ``S2OError("not-set")``. Agent and conversation variables hold
JSON only (:func:`check_json`); a read returns a copy, so the only way to
change them is the ``var`` command. ``sys.secret['NAME']`` gives an opaque
:class:`Secret`: it formats into f-strings (``f'Bearer {…}'``) but has no
methods, comparisons or length, and its ``repr`` never shows the value.
"""

from __future__ import annotations

import keyword
import math
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any

from ...bounds import JSON_INT_BITS, MAX_JSON_DEPTH, PLACE_KEY, WRITTEN_LIMIT
from ..errors import S2OError
from ..language import rules
from ..policy.written import written_size

#: Scalar JSON types, exact (float is checked to be finite on its own).
_EXACT_SCALARS = frozenset({str, int, bool, type(None)})


def check_json(value: Any, where: str, holder: str = "agent and conversation variables") -> None:
    """Raise ``S2OError("not-json")`` unless ``value`` is JSON (SPEC 5); ``holder`` names what holds JSON only
    in the message (``const`` for the settings' constants).

    JSON here is str, int, finite float, bool, None, and lists and dicts with
    string keys of those, nested at most :data:`MAX_JSON_DEPTH` levels
    (``too-deep`` past that, SPEC 12), judged by exact type (a subclass is not
    JSON: its methods could lie). NaN and infinities are not JSON either, so
    anything set can be saved (``%state save``), and neither is a value past
    :data:`~.written.WRITTEN_LIMIT` items written out (a list held twice counts
    twice). The message names the offending type and where it sits (``agent.cart[2]``).
    """
    # Where an item sits is kept as a trail (its holder's trail, its index or key) and written out only for
    # the message: one text per item made a value of a long key over a long list ({key: [0] * n}, a key of
    # n characters) take n * n bytes (n = 60,000: 3.5 GB for a value of 0.5 MB).
    stack: list[tuple[Any, Trail, int]] = [(value, None, 0)]
    left = WRITTEN_LIMIT  # a list held twice is walked twice: x = [x, x] sixty times over is 2**60 items
    while stack:
        v, trail, depth = stack.pop()
        left -= 1
        if left < 0:
            raise S2OError("not-json", f"{where} is too large to write out (over {WRITTEN_LIMIT:,} items, a list or "
                           "object held more than once counted each time); its JSON would never end")
        t = type(v)
        if t is int and v.bit_length() > JSON_INT_BITS:
            raise S2OError("not-json", f"{place(where, trail)} is an integer of over 4,000 digits; JSON numbers "
                           "are written out, and this one would not be")
        if t is float:
            if math.isfinite(v):
                continue
            raise S2OError("not-json", f"{place(where, trail)} is {v!r}; JSON numbers are finite")
        if t in _EXACT_SCALARS:
            continue
        if t is not list and t is not dict:
            raise S2OError("not-json", f"{place(where, trail)} is a {t.__name__}; {holder} hold JSON only")
        if depth >= MAX_JSON_DEPTH:
            raise S2OError("too-deep", f"{where} nests deeper than {MAX_JSON_DEPTH} levels; {holder} hold JSON "
                           "nested at most that deep")
        if t is list:
            stack.extend((item, (trail, i), depth + 1) for i, item in enumerate(v))
            continue
        for k, item in v.items():
            if not isinstance(k, str):
                raise S2OError("not-json", f"{place(where, trail)} has a key of type {type(k).__name__}; JSON keys "
                               "are strings")
            stack.append((item, (trail, k), depth + 1))


#: Where a JSON item sits below the value checked: ``None`` for the value itself, else its holder's trail
#: and its index (``int``) or key (``str``).
Trail = tuple[Any, int | str] | None


def place(where: str, trail: Trail) -> str:
    """``where`` followed by the indexes and keys of ``trail`` (``agent.cart[2]['name']``), each key cut to
    :data:`PLACE_KEY` characters."""
    steps: list[str] = []
    while trail is not None:
        trail, step = trail
        if type(step) is int:
            steps.append(f"[{step}]")
        else:
            text = repr(step)
            steps.append(f"[{text if len(text) <= PLACE_KEY else text[:PLACE_KEY] + '…'}]")
    return where + "".join(reversed(steps))


def copy_json(value: Any) -> Any:
    """A deep copy of a JSON value (lists and dicts copied, scalars shared)."""
    if isinstance(value, list):
        return [copy_json(v) for v in value]
    if isinstance(value, dict):
        return {k: copy_json(v) for k, v in value.items()}
    return value


def as_json(value: Any, *, reveal_secrets: bool = False) -> Any:
    """``value`` as JSON (tuples become lists), or ``None`` when it is not JSON.

    Dict keys must be strings; floats must be finite. Secrets are not JSON,
    unless ``reveal_secrets`` (the conformance runner's comparisons) asks for
    the text of :class:`SecretText` values. Used by the kernel for
    ``application/json`` and by the conformance runner. A value of more than ``WRITTEN_LIMIT`` items
    written out (:func:`~.written.written_size`) is not JSON.
    """
    if reveal_secrets and type(value) is SecretText:
        return reveal(value)
    if isinstance(value, (list, tuple, dict)) and written_size(value) > WRITTEN_LIMIT:
        return None  # its JSON would not end (a list holding itself twice, 60 deep): not JSON here
    return _to_json(value, 0)


class _NotJSON(Exception):
    pass


class RemoteValue:
    """A value that lives in a worker process (:mod:`.worker`): its ``repr`` and JSON form.

    ``repr()`` gives the worker's text; :func:`as_json` gives ``json`` (``None``
    when the value is not JSON); ``shown`` is the text a result shows when it is not ``text``
    (:func:`~..policy.written.shown_text`: a long container cut as IPython cuts it), else ``None``.
    """

    __slots__ = ("json", "shown", "text")

    def __init__(self, text: str, json: Any, shown: str | None = None) -> None:
        self.text = text
        self.json = json
        self.shown = shown

    def __repr__(self) -> str:
        return self.text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RemoteValue) and (self.text, self.json) == (other.text, other.json)

    __hash__ = None  # type: ignore[assignment]


def _to_json_inner(value: Any, depth: int) -> Any:
    if depth > 200:
        raise _NotJSON
    if type(value) is RemoteValue:
        if value.json is None:
            raise _NotJSON
        return value.json
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        if value.bit_length() > JSON_INT_BITS:  # past CPython's 4300-digit text conversion limit
            raise _NotJSON
        return int(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise _NotJSON
        return value
    if isinstance(value, (list, tuple)):
        return [_to_json_inner(v, depth + 1) for v in value]
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise _NotJSON
            out[k] = _to_json_inner(v, depth + 1)
        return out
    raise _NotJSON


def _to_json(value: Any, depth: int) -> Any:
    try:
        return _to_json_inner(value, depth)
    except _NotJSON:
        return None


class VarScope:
    """``agent``, ``conv`` or ``const``: read-only attribute view of a dict of JSON values."""

    __slots__ = ("_label", "_vars")

    def __init__(self, variables: dict[str, Any], label: str) -> None:
        object.__setattr__(self, "_vars", variables)
        object.__setattr__(self, "_label", label)

    def __getattr__(self, name: str) -> Any:
        try:
            value = self._vars[name]
        except KeyError:
            raise S2OError("not-set", f"{self._label}.{name} has not been set; "
                           f"ask first with sys.exists('{self._label}', '{name}')") from None
        if isinstance(value, (list, dict)):
            return copy_json(value)
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        raise S2OError("not-allowed", f"{self._label} variables are set with the var command")

    def __repr__(self) -> str:
        return f"<{self._label} variables: {', '.join(sorted(self._vars)) or 'none'}>"


class CommandScope(VarScope):
    """``command``: fields the current command has already set (SPEC 5)."""

    __slots__ = ()


_NO_TEXT = ("a secret can only be used inside an f-string, whose result stays secret "
            "(for example f'Bearer {sys.secret[\"TOKEN\"]}')")


def _refuse_arithmetic(self: object, *other: object) -> Any:
    """What a secret answers to ``+``, ``*``, ``%`` and ordering: ``not-allowed``, saying how to use it."""
    raise S2OError("not-allowed", _NO_TEXT)


class Secret:
    """An opaque secret value (SPEC 5, 12).

    The only thing an expression can do with it is put it in an f-string
    (``f'Bearer {sys.secret["K"]}'``), which gives a :class:`SecretText`.
    ``str()``, ``format()``, ``%``, comparison, length, indexing and methods
    all fail, so no expression can test or copy its characters; its ``repr``
    names the secret without showing it.
    """

    __slots__ = ("_name", "_value")
    _name: str
    _value: str

    def __init__(self, name: str, value: str) -> None:
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_value", value)

    def __format__(self, spec: str) -> str:
        raise S2OError("not-allowed", _NO_TEXT)

    def __str__(self) -> str:
        raise S2OError("not-allowed", _NO_TEXT)

    def __repr__(self) -> str:
        return f"<secret {self._name}>"

    def __eq__(self, other: object) -> bool:
        raise S2OError("not-allowed", "secrets cannot be compared")

    __add__ = __radd__ = __mul__ = __rmul__ = __mod__ = __rmod__ = _refuse_arithmetic
    __lt__ = __le__ = __gt__ = __ge__ = _refuse_arithmetic

    __hash__ = None  # type: ignore[assignment]

    def __setattr__(self, name: str, value: Any) -> None:
        raise S2OError("not-allowed", "secrets are read-only")

    def __reduce__(self) -> tuple[Any, ...]:  # never pickled or copied with its value
        raise S2OError("not-allowed", "secrets cannot be copied")


class SecretText:
    """Text that contains a secret: the result of an f-string that formatted one (SPEC 5, 12).

    It is as opaque as a :class:`Secret` (no methods, comparison, length,
    indexing, ``str()`` or JSON) and can be formatted into further f-strings,
    which stay secret. Its ``repr`` shows the text with each secret replaced
    by ``***``. Sinks (the conformance runner) read the text with :func:`reveal`;
    an outside call's fields get it with each secret as its placeholder
    (:func:`placed`), which only the gateway resolves.
    """

    __slots__ = ("_masked", "_placed", "_text")
    _masked: str
    _placed: str
    _text: str

    def __init__(self, text: str, masked: str, placed: str | None = None) -> None:
        object.__setattr__(self, "_text", text)
        object.__setattr__(self, "_masked", masked)
        object.__setattr__(self, "_placed", text if placed is None else placed)

    __format__ = Secret.__format__
    __str__ = Secret.__str__
    __eq__ = Secret.__eq__
    __add__ = __radd__ = __mul__ = __rmul__ = __mod__ = __rmod__ = _refuse_arithmetic
    __lt__ = __le__ = __gt__ = __ge__ = _refuse_arithmetic
    __hash__ = None  # type: ignore[assignment]
    __setattr__ = Secret.__setattr__
    __reduce__ = Secret.__reduce__

    def __repr__(self) -> str:
        return repr(self._masked)


def reveal(value: Any) -> Any:
    """The real text of a :class:`Secret` or :class:`SecretText`; other values unchanged (for sinks only)."""
    if type(value) is Secret:
        return object.__getattribute__(value, "_value")
    if type(value) is SecretText:
        return object.__getattribute__(value, "_text")
    return value


#: The text that stands for secret NAME in an outside call's fields (wrapped in INVISIBLE SEPARATOR characters,
#: U+2063, which ordinary text does not hold); the gateway puts the value back (``outside.secrets.unplace``).
PLACEHOLDER_START, PLACEHOLDER_END = "\u2063s2o-secret:", "\u2063"


def placeholder(name: str) -> str:
    """The placeholder of secret ``name`` (see :data:`PLACEHOLDER_START`)."""
    return f"{PLACEHOLDER_START}{name}{PLACEHOLDER_END}"


def placed(value: Any) -> Any:
    """What an outside call's fields hold for a :class:`Secret` or :class:`SecretText`: its text with each
    secret as its placeholder, in-process as in the worker (whose secrets are placeholders already), so a
    request is the same wherever it was made and holds no secret (SPEC 7.1, 13); other values unchanged."""
    if type(value) is Secret:
        text = object.__getattribute__(value, "_value")
        return text if text.startswith(PLACEHOLDER_START) else placeholder(object.__getattribute__(value, "_name"))
    if type(value) is SecretText:
        return object.__getattribute__(value, "_placed")
    return value


def masked_text(value: Any) -> str | None:
    """What a text display shows of a :class:`SecretText`: its text with each secret as ``***`` (its
    ``repr`` without the quotes); ``None`` for any other value. For sinks that show text (``output``)."""
    if type(value) is SecretText:
        return str(object.__getattribute__(value, "_masked"))
    return None


class SecretStore:
    """``sys.secret``: reachable only as ``sys.secret['LITERAL']`` (validated)."""

    __slots__ = ("_values",)
    _values: dict[str, str]

    def __init__(self, values: Mapping[str, str]) -> None:
        object.__setattr__(self, "_values", dict(values))

    def __getitem__(self, name: str) -> Secret:
        try:
            return Secret(name, self._values[name])
        except (KeyError, TypeError):
            raise S2OError("missing-secret", f"no secret named {name!r} is available") from None

    def __repr__(self) -> str:
        return "<secrets>"


#: Scopes ``sys.exists`` accepts.
EXISTS_SCOPES = ("local", "agent", "conv", "const", "allowlist")


class SysScope:
    """``sys``: read-only runtime values (SPEC 5).

    Members: ``inputs`` (a copy of the inputs object), ``query``
    (``inputs['query']`` or ``''``), ``secret`` (the :class:`SecretStore`),
    ``exists(scope, name)``, and the optional members that the configuration
    enables.
    """

    __slots__ = ("_exists", "_inputs", "_optional", "_secrets")
    _exists: Callable[[str, str], bool]
    _inputs: dict[str, Any]
    _optional: dict[str, Any]
    _secrets: SecretStore

    def __init__(self, inputs: dict[str, Any], optional: dict[str, Any], secrets: Mapping[str, str],
                 exists: Callable[[str, str], bool]) -> None:
        object.__setattr__(self, "_inputs", inputs)
        object.__setattr__(self, "_optional", optional)
        object.__setattr__(self, "_secrets", SecretStore(secrets))
        object.__setattr__(self, "_exists", exists)

    @property
    def inputs(self) -> dict[str, Any]:
        return dict(copy_json(self._inputs))

    @property
    def query(self) -> Any:
        return copy_json(self._inputs.get("query", ""))

    @property
    def secret(self) -> SecretStore:
        return self._secrets

    def exists(self, scope: str, name: str) -> bool:
        """Whether ``name`` is set in ``scope`` (``local``, ``agent``, ``conv``, ``const``, ``allowlist``)."""
        if scope not in EXISTS_SCOPES:
            raise S2OError("runtime", f"ValueError: sys.exists scope must be one of {', '.join(EXISTS_SCOPES)}; "
                           f"got {scope!r}")
        if not isinstance(name, str):
            raise S2OError("runtime", "TypeError: sys.exists name must be a string")
        return self._exists(scope, name)

    def __getattr__(self, name: str) -> Any:
        if name in self._optional:
            return copy_json(self._optional[name])
        raise S2OError("sys-member", f"sys.{name} does not exist in this configuration")

    def __setattr__(self, name: str, value: Any) -> None:
        raise S2OError("not-allowed", "sys is read-only")

    def __repr__(self) -> str:
        return "<sys>"


def add_inputs(scope: SysScope, values: dict[str, Any]) -> None:
    """Add ``values`` to what ``scope.inputs`` reads: an ``ask`` command's answers (SPEC 7.1), each JSON or
    a :class:`Secret` (a ``password`` answer). Raises ``S2OError`` ``not-json`` for anything else."""
    plain = {k: v for k, v in values.items() if type(v) is not Secret}
    check_json(plain, "sys.inputs")
    inputs: dict[str, Any] = object.__getattribute__(scope, "_inputs")  # read-only to expressions only
    inputs.update(copy_json(plain))
    inputs.update({k: v for k, v in values.items() if type(v) is Secret})


class ErrorView:
    """``exc`` inside an ``onError`` block: the error being handled (SPEC 7).

    Attributes ``code``, ``message``, ``path``, ``type`` (Python type name for
    ``runtime`` errors), ``line`` and ``col``; for ``api-status`` (SPEC 7.1) ``status``
    (the HTTP status) and ``body`` (the decoded response body), else ``None``.
    """

    __slots__ = ("body", "code", "col", "line", "message", "path", "status", "type")

    def __init__(self, error: S2OError) -> None:
        details = error.details if isinstance(error.details, dict) else {}
        self.status = details.get("status") if error.code == "api-status" else None
        self.body = copy_json(details.get("body")) if error.code == "api-status" else None
        self.code = error.code
        self.message = error.message
        self.path = error.path
        self.type = error.python_type
        self.line = error.line
        self.col = error.col

    def __repr__(self) -> str:
        return f"<error {self.code}: {self.message}>"


#: ``command`` of an expression outside ``var`` (no fields are set): one shared, read-only scope.
NO_FIELDS = CommandScope({}, "command")
#: The error the ``onError`` handler running in the current task of a fragment run handles (what ``exc``
#: reads; :meth:`~.session.Session.handling`), or ``None``.
HANDLING: ContextVar[ErrorView | None] = ContextVar("s2o_handling", default=None)


def check_target_name(name: object) -> str:
    """``name`` when it may be set as a variable; raises ``S2OError`` (``fragment``, ``underscore``) otherwise.

    The name must be an exact ``str``, an ASCII identifier that is not a Python keyword (``None``,
    ``if``: an expression could never read it), not starting with ``_`` and not a runtime namespace.
    Accepted names are remembered (up to 4096), so a loop setting its item pays one set lookup.
    """
    if type(name) is str and name in _ACCEPTED_NAMES:
        return name
    if type(name) is not str or not name.isidentifier() or not name.isascii() or keyword.iskeyword(name):
        raise S2OError("fragment", f"{name!r} is not a valid variable name", stage="validate")
    if name.startswith("_"):
        raise S2OError("underscore", f"names starting with '_' are not allowed: '{name}'", stage="validate")
    if name in rules.RESERVED_NAMES:
        raise S2OError("fragment", f"'{name}' is a runtime namespace, not a variable", stage="validate")
    if len(_ACCEPTED_NAMES) >= 4096:
        _ACCEPTED_NAMES.clear()
    _ACCEPTED_NAMES.add(name)
    return name


#: Names :func:`check_target_name` accepted (a pure function of an exact ``str``).
_ACCEPTED_NAMES: set[str] = set()
