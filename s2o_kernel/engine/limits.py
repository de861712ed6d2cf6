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

:func:`unwatched_calls` decides which expressions need no watchdog at all: those whose only calls are
C methods of exact ``str``, ``int``, ``float`` or ``bool`` values (``name.upper()``), which run no
bytecode for the watchdog's exception to land in (``docs/performance.md``, "Method calls").
"""

from __future__ import annotations

import ast
import ctypes
import threading
import time

#: How often the watchdog checks deadlines, in seconds.
TICK = 0.02


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
    """One deadline: the thread it is for, when, whether it fired, and its key in :attr:`Watchdog.armed`."""

    __slots__ = ("deadline", "fired", "key", "kind", "thread_id")

    def __init__(self, thread_id: int, deadline: float) -> None:
        self.thread_id = thread_id
        self.deadline = deadline
        self.fired = False
        self.kind: type[BaseException] = RunTimeout
        self.key = id(self)


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

#: Nodes after which an expression is never unwatched: they loop, await or define code.
_WATCHED_NODES = (ast.Await, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp,
                  ast.Yield, ast.YieldFrom, ast.NamedExpr)


def unwatched_calls(tree: ast.AST) -> tuple[tuple[str, frozenset[type]], ...] | None:
    """What must hold at run time for the compiled (rewritten, unguarded) ``tree`` to need no watchdog:
    ``(name, exact types)`` pairs, one per name a call reads, or ``None`` when no test could do.

    ``tree`` qualifies when it has at least one call, and every call is ``name.method(args)`` with
    ``method`` in :data:`UNWATCHED_METHODS` for some type (``name`` may also be such a call of a method of
    :data:`STR_RESULTS`, itself qualifying: ``name.strip().lower()``), no ``*``/``**``, and every argument a
    constant (``str``, ``int``, ``float``, ``bool``, ``None``) or a name; no comprehension, ``await``,
    lambda or walrus, and no hidden name (a helper the rules' rewrites put in: a bounded operator, the
    f-string test, a sized method, a guard). The pairs then ask each receiver to be exactly of a type
    the method is listed for, and each argument name exactly ``str``, ``int``, ``float`` or ``bool``.
    The rest of the expression (operators, subscripts, comparisons) is what an expression with no call
    already runs unwatched (``Engine.simple``)."""
    needs: dict[str, frozenset[type]] = {}
    calls = 0
    for node in ast.walk(tree):
        if isinstance(node, _WATCHED_NODES) or (isinstance(node, ast.Name) and node.id.startswith("_")):
            return None
        if isinstance(node, ast.Call):
            if not _call_needs(node, needs):
                return None
            calls += 1
    if not calls or not all(needs.values()):
        return None
    return tuple(needs.items())


def _call_needs(node: ast.Call, needs: dict[str, frozenset[type]]) -> bool:
    """Add to ``needs`` what the call ``node`` asks of the names it reads (:func:`unwatched_calls`);
    ``False`` when it cannot qualify."""
    func = node.func
    if not isinstance(func, ast.Attribute):
        return False
    kinds = _RECEIVERS.get(func.attr)
    if kinds is None or any(kw.arg is None for kw in node.keywords):
        return False
    receiver = func.value
    while isinstance(receiver, ast.Call):  # a chain: each link's result is a str if its receiver is one
        link = receiver.func
        if str not in kinds or not (isinstance(link, ast.Attribute) and link.attr in STR_RESULTS):
            return False
        kinds, receiver = frozenset({str}), link.value  # the link's own call is checked by the walk too
    if not isinstance(receiver, ast.Name):
        return False
    needs[receiver.id] = needs.get(receiver.id, kinds) & kinds
    for arg in [*node.args, *(kw.value for kw in node.keywords)]:
        if isinstance(arg, ast.Name):
            needs[arg.id] = needs.get(arg.id, ARGUMENT_TYPES) & ARGUMENT_TYPES
        elif not (isinstance(arg, ast.Constant) and type(arg.value) in _CONSTANT_TYPES):
            return False
    return True
