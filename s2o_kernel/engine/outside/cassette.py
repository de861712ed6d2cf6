"""Record and replay of outside calls (SPEC 13): the cassette, its entries, matching and misses.

A :class:`Cassette` is a JSON file ``{"format": 1, "entries": [ENTRY, ...]}``, where each entry is ::

    {"kind": "api", "profile": "crm", "request": {...}, "outcome": {"result": ...},
     "chunks": [...], "duration": 0.0123}

* ``request`` is the call's canonical form (:func:`canonical`): the fields as the command wrote them,
  each secret as ``<secret NAME>`` (never its value, nor a URL, key or header of the profile), and for
  ``llm`` the profile's ``model``;
* ``outcome`` is ``{"result": JSON}`` (as the gateway hands it on: masked) or ``{"error": {"code",
  "message", "details"}}`` for a coded failure (``api-status`` with its status and body, ``db-failed``,
  ``row-limit``, a failure mid-stream), which replays as the same error;
* ``chunks`` (``llm`` with ``stream``) are the streamed parts in order, replayed through the same sink;
* ``duration`` (seconds) is information only and never matched.

The file is written with keys in the order the call gave them (so a replayed result shows as the live one
did), one level of indentation per nesting and no timestamps, so two recordings of the same behaviour are
the same bytes, and a change reads well in a diff. Before every
write the text is scanned for every secret the session knows (:meth:`Cassette.write`: plain, URL-,
JSON- and base64-encoded); a hit refuses the write with ``cassette-secret``.

Matching (:meth:`Cassette.take`): an entry of the same kind and profile whose request is equal (JSON
objects compared by key); equal requests are answered in the order they were recorded, each once.
In ``replay`` a call that matches nothing is ``replay-miss`` (naming the cassette, the kind and profile,
the closest entry and the fields that differ) and one whose every match was used is
``replay-exhausted``; in ``record`` such a call is made and appended; ``rewrite`` starts from no entries
and records every call, keeping an old entry's ``duration`` where the new one is otherwise equal, so a
re-recording with no change of behaviour leaves the file as it was.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import json
import os
import re
import stat
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ...bounds import CASSETTE_BYTES, MAX_JSON_DEPTH, MIN_BASE64_CORE, QUOTE, REPLAY_DIFFERENCES
from ..codes import CODES
from ..errors import S2OError
from ..run.scopes import PLACEHOLDER_END, PLACEHOLDER_START, placeholder
from .bounded import Budget, NotJson, loads
from .call import StreamFn
from .secrets import profile_secret_reads

FORMAT = 1
MODES = ("off", "replay", "record", "rewrite")

#: ``S2O_REPLAY``: the mode (``replay``, ``record``, ``rewrite``, ``off``), over the settings and ``%replay``.
ENV = "S2O_REPLAY"

_PLACED = re.compile(re.escape(PLACEHOLDER_START) + r"(?:ask\.\d+\.)?([A-Za-z_][A-Za-z0-9_.]*)"
                     + re.escape(PLACEHOLDER_END))


def cassette_for(notebook: str | os.PathLike[str]) -> Path:
    """The default cassette of a notebook: beside it, its name with ``.cassette.json``
    (``orders.ipynb`` → ``orders.cassette.json``; SPEC 13)."""
    path = Path(notebook)
    return path.with_name(path.stem + ".cassette.json")


_SHOWN_SECRET = re.compile(r"<secret ([A-Za-z_][A-Za-z0-9_]*)>")


def read_bytes(path: str | os.PathLike[str]) -> bytes | None:
    """The bytes of the cassette file at ``path`` (at most :data:`~s2o_kernel.bounds.CASSETTE_BYTES` + 1),
    ``None`` when there is none. Opened without blocking and refused unless it is a regular file (a FIFO, a
    device or a directory would hold the caller with no bound): ``S2OError`` ``cassette``, never its text."""
    name = Path(path).name
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise S2OError("cassette", f"the cassette {name} cannot be read: {exc.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise S2OError("cassette", f"the cassette {name} is not a regular file")
    with os.fdopen(fd, "rb") as f:
        try:
            return f.read(CASSETTE_BYTES + 1)
        except OSError as exc:
            raise S2OError("cassette", f"the cassette {name} cannot be read: {exc.strerror}") from None


def stand_ins(mode: str, cassette: str | None, secrets: dict[str, str],
              profiles: Callable[[], dict[str, Any]]) -> dict[str, str]:
    """Secrets a session replaying ``cassette`` needs but was not given, each standing for itself (its
    placeholder, :func:`~..run.scopes.placeholder`): the names the cassette's requests show as
    ``<secret NAME>`` and those the profiles read (``profiles()``, SPEC-10-shaped, asked for only when
    replaying, so building settings otherwise costs nothing more). Replay makes no call, so a recorded
    agent runs with no keys (SPEC 13); a call that does go out with a stand-in is ``missing-secret`` at the
    gateway. Empty unless :func:`effective_mode` is ``replay`` and the file exists."""
    try:
        if effective_mode(mode) != "replay" or not cassette:
            return {}
        data = read_bytes(cassette)
    except S2OError:
        return {}  # no cassette to replay: the names stay missing, and say so where they are used
    text = (data or b"")[:CASSETTE_BYTES].decode("utf-8", "replace")
    reads = [name for kind, named in profiles().items() if isinstance(named, dict)
             for profile in named.values() if isinstance(profile, dict)
             for name in profile_secret_reads(kind, profile)]
    names = {*_SHOWN_SECRET.findall(text), *reads}
    return {name: placeholder(name) for name in sorted(names) if name not in secrets}


def effective_mode(mode: str, environ: dict[str, str] | os._Environ[str] | None = None) -> str:
    """The mode a session runs in: ``S2O_REPLAY`` when set, else ``mode`` (settings or ``%replay``).
    Raises ``S2OError`` ``replay-mode`` for a mode that is not one of :data:`MODES`, and under ``CI=true`` for
    ``record`` or ``rewrite`` that ``S2O_REPLAY`` did not ask for (CI replays only, SPEC 13)."""
    env = os.environ if environ is None else environ
    chosen = env.get(ENV) or mode
    if chosen not in MODES:
        raise S2OError("replay-mode", f"the replay mode is one of {', '.join(MODES)}, not {chosen!r}")
    if chosen in ("record", "rewrite") and env.get("CI", "").lower() == "true" and not env.get(ENV):
        raise S2OError("replay-mode", f"under CI=true calls are only replayed: {chosen} makes real calls "
                       f"(set {ENV}={chosen} to allow it)")
    return chosen


def _show_secrets(value: Any) -> Any:
    """``value`` (JSON) with each secret placeholder as ``<secret NAME>`` (a password answer's by its input)."""
    if isinstance(value, str):
        return _PLACED.sub(lambda m: f"<secret {m.group(1)}>", value) if PLACEHOLDER_START in value else value
    if isinstance(value, list):
        return [_show_secrets(v) for v in value]
    if isinstance(value, dict):
        return {_show_secrets(k): _show_secrets(v) for k, v in value.items()}
    return value


def canonical(kind: str, fields: dict[str, Any], model: str | None = None) -> dict[str, Any]:
    """The request of a call as a cassette holds and matches it (see the module doc): the command's
    ``fields`` as written (before the gateway puts secrets in), each secret as ``<secret NAME>``; for
    ``llm`` the profile's ``model`` too."""
    request: dict[str, Any] = _show_secrets(fields)
    if kind == "llm" and model is not None:
        request = {**request, "model": model}
    return request


def _differences(a: Any, b: Any, at: str, out: list[str]) -> None:
    """The paths (``body.qty``, ``messages[2].content``) where JSON ``a`` and ``b`` differ, into ``out``."""
    if len(out) >= REPLAY_DIFFERENCES:
        return
    if type(a) is dict and type(b) is dict:
        for key in sorted(set(a) | set(b)):
            _differences(a.get(key, _ABSENT), b.get(key, _ABSENT), f"{at}.{key}" if at else key, out)
    elif type(a) is list and type(b) is list and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _differences(x, y, f"{at}[{i}]", out)
    elif a != b or type(a) is not type(b):
        out.append(at or "the request")


_ABSENT = object()


def _cut(text: str) -> str:
    """``text`` cut to :data:`~s2o_kernel.bounds.QUOTE` characters: a message quotes a bounded part of a file."""
    return text if len(text) <= QUOTE else text[:QUOTE] + "…"


def differences(a: Any, b: Any) -> list[str]:
    """The paths where requests ``a`` and ``b`` differ, at most :data:`~s2o_kernel.bounds.REPLAY_DIFFERENCES`."""
    out: list[str] = []
    _differences(a, b, "", out)
    return out


def encodings(text: str) -> set[str]:
    """``text`` and the forms it is written in when encoded: percent- (URL), JSON- and base64-encoded; for
    base64 (standard and URL-safe alphabets), the characters that encode the text alone at each byte
    alignment, so it is found wherever it sits in a longer encoded text (``Bearer sk-…`` as a whole). What
    :meth:`Cassette.write` scans for; a text too short to leave :data:`MIN_BASE64_CORE` such characters is
    scanned for plain, URL- and JSON-encoded only."""
    from urllib.parse import quote, quote_plus

    raw = text.encode("utf-8", "surrogatepass")
    forms = {text, quote(text, safe=""), quote_plus(text), json.dumps(text)[1:-1]}
    for shift in range(3):  # base64 of the text at each of the 3 byte alignments it may sit at in a longer text:
        for encode in (base64.b64encode, base64.urlsafe_b64encode):  # the characters that depend on it alone
            encoded = encode(b"\0" * shift + raw).decode().rstrip("=")
            core = encoded[(4 * shift + 2) // 3:len(encoded) - (2 if shift or len(raw) % 3 else 0)]
            if len(core) >= MIN_BASE64_CORE:
                forms.add(core)
    return forms - {""}


#: The kinds a cassette records (SPEC 13).
KINDS = ("api", "db", "llm", "ask", "mcp")


def _error_problem(outcome: Any) -> str:
    """What makes a recorded outcome's ``error`` not one, or ``""`` (an outcome without one)."""
    if type(outcome) is not dict or "error" not in outcome:
        return ""
    error = outcome["error"]
    if type(error) is dict and type(error.get("code")) is str and error["code"] in CODES \
            and type(error.get("message", "")) is str and isinstance(error.get("details"), (dict, type(None))):
        return ""
    return "its error is not {code (a registered code), message, details (an object or null)}"


def _entry_problem(entry: Any) -> str:
    """What makes ``entry`` not an entry (see the module doc), or ``""``: its shape only; a replayed result is
    checked as a live one where it is used (``Gateway._replayed``)."""
    if type(entry) is not dict:
        return "not an object"
    outcome = entry.get("outcome")
    chunks = entry.get("chunks", [])
    checks = (
        (entry.get("kind") in KINDS, f"its kind is not one of {', '.join(KINDS)}"),
        (entry.get("profile") is None or type(entry.get("profile")) is str, "its profile is not text"),
        (type(entry.get("request")) is dict, "its request is not an object"),
        (type(outcome) is dict and len(outcome) == 1 and bool({"result", "error"} & set(outcome)),
         'its outcome is not {"result": ...} or {"error": {...}}'),
        (type(chunks) is list and all(type(c) is dict and c.get("type") == "text" and type(c.get("text")) is str
                                      for c in chunks), 'its chunks are not a list of {"type": "text", "text": ...}'),
        (entry.get("duration") is None or type(entry.get("duration")) in (int, float), "its duration is not a number"),
    )
    for ok, problem in checks:
        if not ok:
            return problem
    return _error_problem(outcome)


def _is_count(value: Any) -> bool:
    return type(value) is int and value >= 0


def _llm_problem(result: Any) -> str:
    """What makes ``result`` not a live ``llm`` turn, or ``""``."""
    calls = result.get("tool_calls") if type(result) is dict else None
    if type(result) is not dict or type(result.get("text")) is not str or type(calls) is not list or not all(
            type(c) is dict and type(c.get("id")) is str and type(c.get("name")) is str
            and type(c.get("arguments")) is dict for c in calls):
        return "not a model turn ({text, tool_calls: [{id, name, arguments}], ...})"
    if not (_is_count(result.get("input_tokens")) and _is_count(result.get("output_tokens"))):
        return "its token counts are not whole numbers of 0 or more"
    if type(result.get("cost")) not in (int, float) or not 0 <= result["cost"] < float("inf"):
        return "its cost is not a finite number of dollars of 0 or more"
    return ""


def _db_problem(result: Any) -> str:
    ok = type(result) is dict or (type(result) is list and all(type(r) is dict for r in result))
    return "" if ok else "not rows (a list of objects) or a write's count"


def _ask_problem(result: Any) -> str:
    return "" if type(result) is dict else "not answers by name"


#: Per kind, what makes a recorded result unlike a live call's (``api``: any JSON).
_SHAPES = {"llm": _llm_problem, "db": _db_problem, "ask": _ask_problem}


def check_replayed(kind: str, result: Any) -> None:
    """Raise ``cassette`` unless ``result`` has the shape a live call of ``kind`` gives (an ``llm`` turn:
    ``text``, ``tool_calls`` of ``{id, name, arguments}``, token counts and a finite, non-negative ``cost``;
    ``db``: rows or a write's count; ``ask``: answers by name): a hand-edited cassette changes no limit."""
    shape = _SHAPES.get(kind)
    problem = shape(result) if shape is not None else ""
    if problem:
        raise S2OError("cassette", f"the recorded {kind} outcome is {problem}")


class Cassette:
    """The entries of one cassette file and what a session's calls used of them (see the module doc).

    ``Cassette(path, mode)`` reads ``path`` when it exists (``rewrite`` keeps the old entries only to reuse
    their durations); raises ``S2OError`` ``cassette`` when it is not a cassette (not JSON, another
    format, larger than :data:`~s2o_kernel.bounds.CASSETTE_BYTES`). ``mode`` is ``replay``, ``record`` or
    ``rewrite``.
    """

    def __init__(self, path: str | os.PathLike[str], mode: str) -> None:
        self.path = Path(path)
        self.mode = mode
        old = self._read()
        self.entries: list[dict[str, Any]] = [] if mode == "rewrite" else old
        self._old = old if mode == "rewrite" else []
        self.used: set[int] = set()

    def _read(self) -> list[dict[str, Any]]:
        data = read_bytes(self.path)
        if data is None:
            return []
        name = self.path.name
        if len(data) > CASSETTE_BYTES:
            raise S2OError("cassette", f"the cassette {name} is larger than {CASSETTE_BYTES:,} bytes")
        try:
            doc = loads(data.decode("utf-8"), Budget(CASSETTE_BYTES, "cassette", "the cassette's size"), name)
        except (UnicodeDecodeError, NotJson):
            raise S2OError("cassette", f"the cassette {name} is not JSON (UTF-8, finite numbers)") from None
        except S2OError as exc:  # too-deep, or too large decoded: said without quoting the file
            why = f"it nests deeper than {MAX_JSON_DEPTH} levels" if exc.code == "too-deep" else \
                "it would take too much memory decoded"
            raise S2OError("cassette", f"the cassette {name} cannot be held: {why}") from None
        entries = doc.get("entries") if type(doc) is dict else None
        if type(doc) is not dict or doc.get("format") != FORMAT or type(entries) is not list:
            raise S2OError("cassette", f"the cassette {name} is not a cassette of format {FORMAT} "
                           '({"format": 1, "entries": [{"kind", "profile", "request", "outcome"}, ...]})')
        for i, entry in enumerate(entries):
            problem = _entry_problem(entry)
            if problem:
                raise S2OError("cassette", f"entry {i} of the cassette {name} is not an entry: {problem}")
        return entries

    # -- matching ----------------------------------------------------------------------------------
    def take(self, kind: str, profile: str | None, request: dict[str, Any]) -> dict[str, Any] | None:
        """The first unused entry answering this call, marked used; ``None`` when there is none and the mode
        records. In ``replay``, raises ``replay-exhausted`` (every match used) or ``replay-miss`` (none)."""
        matches = [i for i, e in enumerate(self.entries)
                   if e["kind"] == kind and e.get("profile") == profile and e.get("request") == request]
        for i in matches:
            if i not in self.used:
                self.used.add(i)
                return self.entries[i]
        if self.mode != "replay":
            return None
        where = f"{kind} call" + (f" on profile {profile!r}" if profile is not None else "")
        if matches:
            raise S2OError("replay-exhausted", f"the cassette {self.path.name} holds {len(matches)} answer(s) to "
                           f"this {where}, and every one was used (equal requests are answered in recorded "
                           "order, each once)", details={"cassette": str(self.path), "entries": matches})
        raise self._miss(kind, profile, request, where)

    def _miss(self, kind: str, profile: str | None, request: dict[str, Any], where: str) -> S2OError:
        same_kind = [(i, e) for i, e in enumerate(self.entries) if e["kind"] == kind]
        if not same_kind:
            return S2OError("replay-miss", f"the cassette {self.path.name} holds no {kind} call to answer this "
                            f"{where} (record it: %replay record)",
                            details={"cassette": str(self.path), "kind": kind, "profile": profile})
        scored = [(len(differences(request, e.get("request"))) + (e.get("profile") != profile), i, e)
                  for i, e in same_kind]
        _, index, closest = min(scored, key=lambda t: (t[0], t[1]))
        differ = [_cut(d) for d in differences(request, closest.get("request"))]
        if closest.get("profile") != profile:
            differ = ["profile", *differ]
        return S2OError("replay-miss", f"the cassette {self.path.name} holds no answer to this {where}; the "
                        f"closest is entry {index} ({closest['kind']} on {_cut(repr(closest.get('profile')))}), "
                        f"which differs in {', '.join(differ)}",
                        details={"cassette": str(self.path), "kind": kind, "profile": profile,
                                 "closest": index, "differs": differ})

    # -- recording ---------------------------------------------------------------------------------
    def add(self, entry: dict[str, Any], secrets: Iterable[str]) -> None:
        """Append ``entry`` (used) and write the file; raises ``cassette-secret`` (and keeps neither) when
        the file would hold one of ``secrets`` (:meth:`write`). In ``rewrite`` an entry equal to the old one at
        its place but for its ``duration`` keeps the old duration."""
        index = len(self.entries)
        if index < len(self._old) and _same_but_duration(self._old[index], entry):
            entry = {**entry, "duration": self._old[index].get("duration")}
        self.entries.append(entry)
        try:
            self.write(secrets)
        except BaseException:
            self.entries.pop()
            raise
        self.used.add(index)

    def text(self) -> str:
        """The file's text: keys in the order the calls gave them (a replayed result shows as the live one
        did), one value per line, a newline at the end; ASCII with ``\\u`` escapes when a text holds a lone
        surrogate, which UTF-8 cannot carry. Raises ``cassette`` for a value JSON cannot hold (``NaN``)."""
        doc = {"format": FORMAT, "entries": self.entries}
        try:
            text = json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=False) + "\n"
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = json.dumps(doc, indent=1, allow_nan=False) + "\n"
        except (ValueError, TypeError, RecursionError) as exc:
            raise S2OError("cassette", f"the cassette {self.path.name} cannot hold this call's outcome "
                           f"({type(exc).__name__}); nothing was written") from None
        return text

    def write(self, secrets: Iterable[str]) -> None:
        """Write the file (atomically: a new file renamed over the old) after scanning its text for each of
        ``secrets`` in every form :func:`encodings` gives; a hit raises ``cassette-secret`` naming the entry
        and nothing is written."""
        text = self.text()
        for secret in secrets:
            if not secret or secret == "***":
                continue
            for form in encodings(secret):
                if form in text:
                    where = next((i for i, e in enumerate(self.entries)
                                  if form in json.dumps(e, ensure_ascii=False)), None)
                    raise S2OError("cassette-secret", f"the cassette {self.path.name} would hold a secret value "
                                   f"(in entry {where}); nothing was written. A secret goes into a request "
                                   "only through sys.secret, and a server that echoes one encoded cannot be "
                                   "recorded", details={"entry": where})
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, temp = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
        except OSError as exc:
            raise S2OError("cassette", f"the cassette {self.path.name} cannot be written: {exc.strerror}") from None
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(temp, self.path)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            if isinstance(exc, OSError):
                raise S2OError("cassette", f"the cassette {self.path.name} cannot be written: {exc.strerror}") \
                    from None
            raise


def _same_but_duration(old: dict[str, Any], new: dict[str, Any]) -> bool:
    return {k: v for k, v in old.items() if k != "duration"} == {k: v for k, v in new.items() if k != "duration"}


class Take:
    """One call's visit to a cassette (see the module doc): the entry that answers it (:attr:`entry`), or what
    the call gave, kept once it ends (:meth:`keep`).

    ``Take(cassette, kind, profile, request)``: ``request`` is :func:`canonical`'s; raises what
    :meth:`Cassette.take` raises (``replay-miss``, ``replay-exhausted``)."""

    def __init__(self, cassette: Cassette, kind: str, profile: str | None, request: dict[str, Any]) -> None:
        self.cassette, self.kind, self.profile, self.request = cassette, kind, profile, request
        self.entry = cassette.take(kind, profile, request)
        self.chunks: list[Any] = []
        self.started = time.monotonic()

    def sink(self, on_stream: StreamFn | None) -> StreamFn | None:
        """``on_stream``, also keeping each streamed part for the entry (``None`` stays ``None``)."""
        if on_stream is None:
            return None
        stream = on_stream

        def keeping(part: dict[str, Any]) -> None:
            self.chunks.append(part)
            stream(part)
        return keeping

    def replay(self, on_stream: StreamFn | None, path: str | None) -> Any:
        """The recorded outcome: its chunks through ``on_stream`` in order, then the result, or the recorded
        error raised again (its code, message and details; ``path`` the call's)."""
        assert self.entry is not None
        if on_stream is not None:
            for part in self.entry.get("chunks") or ():
                on_stream(dict(part))
        outcome = self.entry["outcome"]
        error = outcome.get("error")
        if error is not None:  # its shape was checked when the file was read (_entry_problem)
            raise S2OError(error["code"], error.get("message", ""), path=path, stage="run",
                           details=copy.deepcopy(error.get("details")))
        return copy.deepcopy(outcome["result"])  # what the run makes of it never changes the entry

    def keep(self, secrets: Iterable[str], *, result: Any = None, error: S2OError | None = None) -> None:
        """Append what the call gave to the cassette (see :meth:`Cassette.add`); raises ``cassette-secret``."""
        outcome = {"error": {"code": error.code, "message": error.message, "details": error.details}} \
            if error is not None else {"result": result}
        entry: dict[str, Any] = {"kind": self.kind, "profile": self.profile, "request": self.request,
                                 "outcome": _show_secrets(outcome),
                                 "duration": round(time.monotonic() - self.started, 4)}
        if self.chunks:
            entry["chunks"] = self.chunks
        self.cassette.add(entry, secrets)
