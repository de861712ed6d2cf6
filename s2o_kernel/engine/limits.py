"""Run-time limits enforced from outside the evaluating code (SPEC 6).

An ``asyncio`` timeout cannot stop pure-Python work that never yields (a
comprehension over an endless generator, ``sum(endless())``). The
:class:`Watchdog` is one daemon thread per process that raises an exception
*inside* the evaluating thread when its deadline passes, using CPython's
``PyThreadState_SetAsyncExc``: the exception arrives at the next bytecode
boundary, so the run stops within the limit plus the watchdog's tick
(:data:`TICK`, 20 ms) and the session keeps its variables.

What this cannot stop is a single C-level call that never returns to
bytecode (``max(itertools.count())``): that is the containment worker's job
(SPEC 12).

Both exceptions derive from ``BaseException`` so host code's ``except
Exception`` cannot swallow them.

:func:`unwatched` decides which expressions need no watchdog at all: those that run no bytecode for the
watchdog's exception to land in, once the names they operate on hold exact ``str``, ``int``, ``float`` or
``bool`` values (``a + b``, ``name.upper()``; ``docs/performance.md``, "Method calls"). Any other
expression, even one with no call, runs under the time limit: operators, subscripts and attribute reads
run the operands' own dunders, Python code for many values of the standard library.
"""

from __future__ import annotations

import ast
import ctypes
import threading
import time
from typing import Any

from .rewrites import operator_helper_name

#: How often the watchdog checks deadlines, in seconds.
TICK = 0.02
#: Seconds between two sendings of a fired exception that the thread has not taken yet (see :class:`Armed`).
REFIRE = 0.1


class RunTimeout(BaseException):
    """Raised inside an evaluation whose time limit passed (becomes code ``timedOut``)."""


class RunInterrupt(BaseException):
    """Raised inside an evaluation that was asked to stop (becomes code ``stopped``)."""


_set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
_set_async_exc.argtypes = (ctypes.c_ulong, ctypes.py_object)
_set_async_exc.restype = ctypes.c_int


def _raise_in_thread(thread_id: int, exc_type: type[BaseException] | None) -> None:
    if exc_type is None:
        _set_async_exc(ctypes.c_ulong(thread_id), ctypes.py_object())  # clears a pending one
    else:
        _set_async_exc(ctypes.c_ulong(thread_id), ctypes.py_object(exc_type))


class Armed:
    """One deadline: the thread it is for, when, whether it fired, and its key in :attr:`Watchdog.armed`.

    ``refire``: once fired, the exception is sent again every :data:`REFIRE` seconds until the thread
    settles the deadline (:meth:`Watchdog.settle`). One sending can be lost: it arrives at whatever Python
    code the thread runs next, and that may be a finalizer or an unraisable hook, where an exception is
    printed and dropped (an un-awaited coroutine's warning, ``warnings._warn_unawaited_coroutine``, runs in
    the thread that frees it). On for a session's evaluations in the calling thread, whose code between
    the exception's arrival and the settle is the engine's own ``finally`` (microseconds); off for a run on
    the event loop, where a second exception could land in the loop's own code while the run unwinds,
    until the run is given up (:meth:`Watchdog.abandon`).
    """

    __slots__ = ("deadline", "fired", "key", "kind", "refire", "settled", "thread_id")

    def __init__(self, thread_id: int, deadline: float, *, refire: bool = False) -> None:
        self.thread_id = thread_id
        self.deadline = deadline
        self.fired = False
        self.kind: type[BaseException] = RunTimeout
        self.key = id(self)
        self.refire = refire
        self.settled = False  # set by Watchdog.settle (read by abandon; a reused entry never resets it)


class Watchdog:
    """Raises :class:`RunTimeout` in a thread whose deadline passed; one per process.

    :meth:`arm` returns a token (the armed entry itself) to hand to :meth:`disarm` in a
    ``finally``; see ``Execution._eval_limited`` for the pattern that is safe against the exception
    arriving at any point.

    Ownership of a token is decided by one atomic ``dict.pop`` on :attr:`armed`: whoever pops it
    (the evaluating thread, or the watchdog when it fires) owns it. The watchdog pops, marks
    ``fired`` and sends the exception while holding its firing lock; so an evaluating thread whose
    pop finds nothing calls :meth:`settle`, which takes that lock (waiting out a firing in
    progress) and then clears the exception if it was not delivered yet. No exception ever lands
    outside the armed region, and waiting is never needed on the normal path.

    The hot path (``Execution``) reuses one :class:`Armed` per session and inlines the protocol, so
    a run of a cached expression pays three attribute stores and two dict operations, no call:
    ``thread_id``, ``deadline``, ``fired = False``, ``armed[entry.key] = entry``; at the end
    ``if armed.pop(entry.key, None) is None: WATCHDOG.settle(entry)``.
    """

    def __init__(self) -> None:
        #: armed entries by key: present = armed and owned by no one yet (see the class doc)
        self.armed: dict[int, Armed] = {}
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._fire_lock = threading.Lock()
        #: key -> (when, entry): interrupts asked for with :meth:`interrupt_soon`, fired by the watchdog's
        #: thread on that very entry only (a key is an ``id``, reused once its entry is freed)
        self.interrupting: dict[int, tuple[float, Armed]] = {}
        #: key -> (when, entry, thread): fired entries that are sent their exception again at ``when`` until
        #: settled (``Armed.refire``); ``thread``, when given, must still be alive (an abandoned run's)
        self.refiring: dict[int, tuple[float, Armed, threading.Thread | None]] = {}

    def arm(self, seconds: float, thread_id: int | None = None) -> Armed:
        """Start a deadline ``seconds`` from now for ``thread_id`` (default: this thread); returns a token."""
        entry = Armed(thread_id or threading.get_ident(), time.monotonic() + seconds)
        self.armed[entry.key] = entry
        if self._thread is None:
            self.start()
        return entry

    def start(self) -> None:
        """Start the watchdog's thread (idempotent); :meth:`arm` does it, the inlined hot path cannot."""
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="s2o-watchdog", daemon=True)
                self._thread.start()

    def disarm(self, token: Armed) -> bool:
        """End the deadline; returns whether it fired. Idempotent."""
        self.interrupting.pop(token.key, None)
        if self.armed.pop(token.key, None) is not None:
            return False
        return self.settle(token)

    def settle(self, token: Armed) -> bool:
        """After a pop of ``token`` found nothing: wait until a firing in progress has sent its exception,
        clear it if it has not been delivered yet, and return whether it fired. Idempotent."""
        with self._fire_lock:
            fired = token.fired
            token.settled = True
            if self.refiring.get(token.key, (0.0, None))[1] is token:
                del self.refiring[token.key]  # under the lock: no sending after this
        if fired:
            _raise_in_thread(token.thread_id, None)  # clear it if it was not delivered yet
        return fired

    def _fire(self, key: int, kind: type[BaseException], only: Armed | None = None) -> None:
        with self._fire_lock:
            if only is not None and self.armed.get(key) is not only:
                return  # that deadline ended; the key may be another's now (ids of freed entries are reused)
            entry = self.armed.pop(key, None)
            if entry is None:
                return
            entry.kind = kind
            entry.fired = True
            _raise_in_thread(entry.thread_id, kind)
            if entry.refire:
                self.refiring[key] = (time.monotonic() + REFIRE, entry, None)

    def abandon(self, token: Armed, thread: threading.Thread) -> None:
        """Give up on the run of ``token`` in ``thread`` (a retired event loop's): fire it now with
        :class:`RunInterrupt` if it has not fired, and send its exception again every :data:`REFIRE` seconds
        until it is settled or ``thread`` has ended, so an expression that never awaits and whose exception
        was dropped does not run on for good. Its loop is retired: an exception landing in the loop's own
        code there harms no run."""
        self.interrupting.pop(token.key, None)
        self._fire(token.key, RunInterrupt, only=token)
        with self._fire_lock:
            if token.fired and not token.settled:
                self.refiring[token.key] = (time.monotonic() + REFIRE, token, thread)

    def _refire(self, now: float) -> None:
        for key, (when, entry, thread) in list(self.refiring.items()):
            if when > now:
                continue
            with self._fire_lock:
                if self.refiring.get(key, (0.0, None))[1] is not entry:
                    continue  # settled meanwhile
                if thread is not None and not thread.is_alive():
                    del self.refiring[key]  # its thread ended (and its id may be another thread's soon)
                    continue
                self.refiring[key] = (now + REFIRE, entry, thread)
                _raise_in_thread(entry.thread_id, entry.kind)

    def interrupt(self, token: Armed) -> None:
        """Fire ``token`` now with :class:`RunInterrupt` (used when the user interrupts)."""
        self._fire(token.key, RunInterrupt)

    def interrupt_soon(self, token: Armed, delay: float) -> None:
        """Fire ``token`` with :class:`RunInterrupt` ``delay`` seconds from now (at the watchdog's next
        tick after it) unless it is disarmed first. A run on an event loop is cancelled first (it
        ends at its next ``await``, and its end disarms it); this exception is only for a run that
        does not reach one, so it never lands in the event loop's own code of a run that did."""
        if self.interrupting.get(token.key, (0.0, None))[1] is not token:  # asked again: the first time stands
            self.interrupting[token.key] = (time.monotonic() + delay, token)
        if self._thread is None:
            self.start()

    def withdraw(self, token: Armed) -> None:
        """Forget an interrupt asked for ``token`` with :meth:`interrupt_soon` that has not fired yet."""
        asked = self.interrupting.get(token.key)
        if asked is not None and asked[1] is token:
            self.interrupting.pop(token.key, None)

    def _loop(self) -> None:
        while True:
            time.sleep(TICK)
            self.tick(time.monotonic())

    def tick(self, now: float) -> None:
        """Fire every deadline passed at ``now`` (``time.monotonic()`` seconds) and every interrupt asked for
        by then; the watchdog's thread calls it every :data:`TICK` seconds."""
        for key, entry in list(self.armed.items()):
            if entry.deadline <= now:
                self._fire(key, RunTimeout)
        for key, (when, asked) in list(self.interrupting.items()):
            if when <= now:
                self.interrupting.pop(key, None)
                self._fire(key, RunInterrupt, only=asked)  # nothing when that run has ended and disarmed it
        if self.refiring:
            self._refire(now)


#: The process-wide watchdog.
WATCHDOG = Watchdog()


#: Methods that run no bytecode, by the exact receiver type they are safe for: C methods whose
#: arguments (``str``, ``int``, ``float``, ``bool``, ``None``) are read by C code alone, that call no
#: codec, iterate nothing given and look nothing up, and whose output is at most linear in their
#: inputs. Not here: the sized methods (``zfill``, ``center``…: rewritten to a bounded helper anyway),
#: ``replace``, ``join``, ``translate``, ``encode``, ``format``/``format_map`` (refused by the rules),
#: ``maketrans``, ``to_bytes``/``from_bytes``, and every method of a container (``list.sort``,
#: ``list.index``, ``dict.get`` compare or hash the items, which may run Python code).
UNWATCHED_METHODS: dict[type, frozenset[str]] = {
    str: frozenset({
        "capitalize", "casefold", "count", "endswith", "find", "index", "isalnum", "isalpha", "isascii",
        "isdecimal", "isdigit", "isidentifier", "islower", "isnumeric", "isprintable", "isspace", "istitle",
        "isupper", "lower", "lstrip", "partition", "removeprefix", "removesuffix", "rfind", "rindex",
        "rpartition", "rsplit", "rstrip", "split", "splitlines", "startswith", "strip", "swapcase", "title",
        "upper"}),
    int: frozenset({"bit_length", "bit_count", "as_integer_ratio", "conjugate"}),
    bool: frozenset({"bit_length", "bit_count", "as_integer_ratio", "conjugate"}),
    float: frozenset({"is_integer", "as_integer_ratio", "conjugate", "hex"}),
}

#: Method name → the exact receiver types it runs no bytecode on.
_RECEIVERS: dict[str, frozenset[type]] = {}
for _kind, _names in UNWATCHED_METHODS.items():
    for _name in _names:
        _RECEIVERS[_name] = _RECEIVERS.get(_name, frozenset()) | {_kind}

#: Methods of :data:`UNWATCHED_METHODS` whose result is an exact ``str`` when the receiver is one, so
#: their call may be the receiver of another (``name.strip().lower()``).
STR_RESULTS = frozenset({"capitalize", "casefold", "lower", "lstrip", "removeprefix", "removesuffix", "rstrip",
                         "strip", "swapcase", "title", "upper"})

#: Exact types a name given as an argument must have; constants may also be ``None``.
ARGUMENT_TYPES = frozenset({str, int, float, bool})
_CONSTANT_TYPES = ARGUMENT_TYPES | {type(None)}
#: Exact types a name must have where its value is operated on (an operand, iterated, hashed, formatted,
#: tested for truth, its attribute read): their dunders are C and read nothing given but exact builtins.
#: Not ``None``: a name the allowlist gives is not in the globals the test reads, which say ``None`` for it.
OPERAND_TYPES = ARGUMENT_TYPES
#: Exact types a name must have where it is only subscripted and the item is not operated on
#: (``row['name']``, ``xs[0]``): the lookup hashes and compares the given key, an exact scalar, in C (a
#: stored key's own ``__eq__`` runs only on a hash collision, once per colliding key the dict was built with).
SUBSCRIBED_TYPES = OPERAND_TYPES | {list, tuple, dict}

#: Exact types a name must have as an operand of ``%`` (the engine's ``bounded_mod``): on a ``str`` it checks
#: the %-format's widths by a Python loop over the text (seconds for a long one), which only the watchdog stops.
MOD_OPERAND_TYPES = frozenset({int, float, bool})
#: The hidden name of the ``%`` operator's helper.
MOD_HELPER = operator_helper_name("%")
#: Most operations (operators, calls, comparisons, subscripts, truth tests) an expression run without the
#: watchdog may hold: each may be one C call over a long value, and a chain of them (``s.count('x') == 0 and
#: …``, ``s + s + …``) would otherwise run as many as the definition length allows, past the time limit.
MAX_UNWATCHED_OPERATIONS = 32

#: Pairs of ``(name, exact types)``: what :func:`unwatched` asks of the names an expression reads.
Needs = tuple[tuple[str, frozenset[type]], ...]


def unwatched(tree: ast.AST, helpers: frozenset[str] = frozenset()) -> Needs | None:
    """What must hold at run time for the compiled (rewritten) ``tree`` to run no bytecode the watchdog could
    stop, so it needs no watchdog: ``()`` when nothing in it dispatches to any value's methods (names,
    constants, lists and tuples of them), else ``(name, exact types)`` pairs, one per name whose value it
    operates on, or ``None`` when no test of names could do (then the time limit is armed).

    A name whose value is operated on (an operand of an operator or comparison, tested for truth, iterated
    by ``*``, hashed in a set or as a dict key, formatted, its attribute read) must be exactly ``str``,
    ``int``, ``float`` or ``bool`` (:data:`OPERAND_TYPES`): then every operation runs C code over exact
    builtin values, and so does every operation on what those give (a value *carried* to the result, an
    ``if``'s branch or a list item, is not operated on). A name only subscripted for an item that is not
    operated on may also be an exact ``list``, ``tuple`` or ``dict`` (:data:`SUBSCRIBED_TYPES`). A call
    must be ``name.method(args)`` with ``method`` in :data:`UNWATCHED_METHODS` for the receiver's type
    (``name`` may also be such a call of a method of :data:`STR_RESULTS`: ``name.strip().lower()``), no
    ``*``/``**``, every argument a constant (``str``, ``int``, ``float``, ``bool``, ``None``) or a name of
    :data:`ARGUMENT_TYPES`; or a call of one of ``helpers``, hidden names the engine binds to its own
    bounded helpers (bounded operators, the f-string's helper and test), with operated-on arguments (``%``'s:
    names of exact numbers or number constants, :data:`MOD_OPERAND_TYPES`). Any other hidden name, call,
    comprehension, ``await``, lambda or walrus, or more than :data:`MAX_UNWATCHED_OPERATIONS` operations:
    ``None``.

    Before, the rest of an expression (operators, subscripts, comparisons) was taken to run no Python
    code; it runs the operands' dunders, Python code for values of standard-library classes
    (``Counter.__add__``, ``IPv4Network.__iter__``) and for ``agent.x`` (a copy)."""
    walk = _Walk(helpers)
    if (not walk.value(getattr(tree, "body", tree), False) or not all(walk.needs.values())
            or walk.operations > MAX_UNWATCHED_OPERATIONS):
        return None
    return tuple(walk.needs.items())


#: Nodes whose every operand is operated on, by the fields that hold them.
_OPERATED: dict[type, tuple[str, ...]] = {
    ast.BinOp: ("left", "right"), ast.UnaryOp: ("operand",), ast.Compare: ("left", "comparators"),
    ast.Attribute: ("value",), ast.Starred: ("value",), ast.Set: ("elts",), ast.Slice: ("lower", "upper", "step"),
    ast.JoinedStr: ("values",), ast.FormattedValue: ("value", "format_spec"),
}
#: Every type a listed method is listed for.
_RECEIVERS_ANY = frozenset(UNWATCHED_METHODS)


def _hidden(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id.startswith("_")


class _Walk:
    """One run of :func:`unwatched`: what it asks of names so far (``needs``), and the helpers it allows."""

    def __init__(self, helpers: frozenset[str]) -> None:
        self.needs: dict[str, frozenset[type]] = {}
        self.helpers = helpers
        #: Operations seen so far (see :data:`MAX_UNWATCHED_OPERATIONS`).
        self.operations = 0
        self.kinds: dict[type, Any] = {
            ast.Constant: lambda node, used: True,
            ast.Name: self.name, ast.List: self.display, ast.Tuple: self.display, ast.Dict: self.dict,
            ast.IfExp: self.if_exp, ast.BoolOp: self.bool_op, ast.Subscript: self.subscript,
            ast.Call: lambda node, used: self.call(node, _RECEIVERS_ANY),
        }

    def need(self, name: str, kinds: frozenset[type]) -> None:
        self.needs[name] = self.needs.get(name, kinds) & kinds

    def value(self, node: ast.AST, used: bool) -> bool:
        """Whether ``node`` qualifies; ``used``: its value is operated on (then it must be made of exact
        builtin values, and every name it operates on is tested)."""
        if not isinstance(node, (ast.Constant, ast.Name, ast.List, ast.Tuple)):
            self.operations += len(node.ops) if isinstance(node, ast.Compare) else (
                len(node.values) - 1 if isinstance(node, ast.BoolOp) else 1)
        kind = self.kinds.get(type(node))
        if kind is not None:
            return bool(kind(node, used))
        fields = _OPERATED.get(type(node))
        if fields is None:  # a comprehension, await, lambda, walrus, or a node kind not listed: armed
            return False
        return all(self.value(n, True) for n in _children(node, fields))

    def name(self, node: ast.Name, used: bool) -> bool:
        if node.id.startswith("_"):
            return node.id in self.helpers
        if used:
            self.need(node.id, OPERAND_TYPES)
        return True

    def display(self, node: ast.List | ast.Tuple, used: bool) -> bool:  # items carried, or operated on with it
        return all(self.value(e, used) for e in node.elts)

    def dict(self, node: ast.Dict, used: bool) -> bool:  # keys are hashed; a ``**`` mapping is read
        return all(self.value(v, True) if k is None else self.value(k, True) and self.value(v, used)
                   for k, v in zip(node.keys, node.values, strict=True))

    def if_exp(self, node: ast.IfExp, used: bool) -> bool:
        return self.value(node.test, True) and self.value(node.body, used) and self.value(node.orelse, used)

    def bool_op(self, node: ast.BoolOp, used: bool) -> bool:  # the last operand is carried, not tested
        return all(self.value(n, True) for n in node.values[:-1]) and self.value(node.values[-1], used)

    def subscript(self, node: ast.Subscript, used: bool) -> bool:
        if isinstance(node.value, ast.Name) and not _hidden(node.value) and not used:
            self.need(node.value.id, SUBSCRIBED_TYPES)
        elif not self.value(node.value, True):
            return False
        return self.value(node.slice, True)

    def call(self, node: ast.Call, within: frozenset[type]) -> bool:
        """Whether the call ``node`` qualifies, its receiver being of one of ``within``."""
        func = node.func
        if isinstance(func, ast.Name):  # a hidden helper of the engine's own, on operated-on values
            if func.id == MOD_HELPER:  # numbers only: names of them, or number constants
                return func.id in self.helpers and not node.keywords and all(self.number(a) for a in node.args)
            return (func.id in self.helpers and not node.keywords
                    and all(not isinstance(a, ast.Starred) and self.value(a, True) for a in node.args))
        if not isinstance(func, ast.Attribute) or any(kw.arg is None for kw in node.keywords):
            return False
        kinds = _RECEIVERS.get(func.attr, frozenset()) & within
        return bool(kinds) and self.receiver(func.value, kinds) and self.arguments(node)

    def number(self, node: ast.AST) -> bool:
        """Whether ``node`` is a number constant or a name (then asked to hold an exact number)."""
        if isinstance(node, ast.Constant):
            return type(node.value) in MOD_OPERAND_TYPES
        if isinstance(node, ast.Name) and not _hidden(node):
            self.need(node.id, MOD_OPERAND_TYPES)
            return True
        return False

    def receiver(self, node: ast.AST, kinds: frozenset[type]) -> bool:
        if isinstance(node, ast.Call):  # a chain: the link's result is a str if its receiver is one
            self.operations += 1
            link = node.func
            return (str in kinds and isinstance(link, ast.Attribute) and link.attr in STR_RESULTS
                    and self.call(node, frozenset({str})))
        if isinstance(node, ast.Name) and not _hidden(node):
            self.need(node.id, kinds)
            return True
        return False

    def arguments(self, node: ast.Call) -> bool:
        for arg in [*node.args, *(kw.value for kw in node.keywords)]:
            if isinstance(arg, ast.Name) and not _hidden(arg):
                self.need(arg.id, ARGUMENT_TYPES)
            elif not (isinstance(arg, ast.Constant) and type(arg.value) in _CONSTANT_TYPES):
                return False
        return True


def _children(node: ast.AST, fields: tuple[str, ...]) -> list[ast.AST]:
    out: list[ast.AST] = []
    for name in fields:
        value = getattr(node, name)
        if isinstance(value, list):
            out.extend(value)
        elif value is not None:
            out.append(value)
    return out
