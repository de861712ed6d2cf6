"""The audited standard library and the refused entries, decided by class (SPEC 12).

Every allowlist entry that names Python's own builtins or standard library is
decided here, from data:

* :data:`REFUSED_BUILTINS`: builtins (and methods of builtin types) refused,
  each with its reason;
* :data:`STDLIB`: the **audited table**, standard-library module → what it is
  granted for, the members it leaves out (each with its reason), or the only
  members it grants;
* :data:`REFUSED_MODULES`: standard-library modules refused whole, with the
  reason (so the message says why, not only "not audited");
* :data:`REFUSED_OTHER`: entries of other packages that are second evaluators.

A standard-library module that :data:`STDLIB` does not list is refused with
code ``refused-entry`` ("not audited") unless ``allow_unsafe_entries``. The
reasons come from the classes of SPEC 12, one constant each (:data:`CODE`,
:data:`BY_NAME`, :data:`ATTRIBUTES`, :data:`FRAMES`, :data:`PROCESS`,
:data:`OUTLIVES`, :data:`SHARED_STATE`, :data:`CLASSES`), so an entry is
refused for what it can do, not because its name is on a list someone
remembered.

Granted modules never let a cell change state that later cells or the host
see: mutators are left out (``random.seed``, ``calendar.setfirstweekday``,
``decimal.setcontext``), module-level containers are granted as read-only
copies (``html.entities.html5`` becomes a ``mappingproxy``, a list a
``tuple``: :func:`read_only`), and ``random``'s module functions are bound to a
generator of the allowlist's own (:func:`own_random`).

:func:`object_refusal` applies the same table to objects found in your own
packages (a re-exported ``subprocess.run``, a module-level
``logging.Formatter()``, a metaclass), by identity and by home module.
"""

from __future__ import annotations

import builtins
import functools
import importlib
import sys
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .denylist import is_class, is_metaclass

# -- the classes of SPEC 12: why an entry is refused ------------------------------------------------

CODE = "evaluates text as code"
BY_NAME = "imports or resolves objects by name"
ATTRIBUTES = "walks attributes by name or through format strings"
FRAMES = "reaches frames or interpreter state"
PROCESS = "changes the process or the machine"
OUTLIVES = "starts work or registers code that outlives the run"
SHARED_STATE = "changes state that later cells or the host see"
CLASSES = "builds classes (like three-argument type), whose methods can lie to the guards"
HIDDEN_STORES = ("calls the functions it is given and, in C, stores what one returns into what another returns, "
                 "where the store guard cannot see it")
NOT_AUDITED = "is not audited"


@dataclass(frozen=True)
class Module:
    """One row of the audited table.

    Attributes:
        grants: what the module is granted for (shown in ``docs/security.md``).
        left_out: members a whole-module entry leaves out (and that cannot be
            named singly), each with its reason.
        only: when set, the only members that may be granted, each singly;
            a whole-module entry is then refused with ``whole``.
        whole: the reason a whole-module entry is refused (with ``only``).
        own_copy: builds the members that the allowlist gets its own copies of
            (called once per load), name → object.
    """

    grants: str
    left_out: Mapping[str, str] = field(default_factory=dict)
    only: frozenset[str] | None = None
    whole: str | None = None
    own_copy: Callable[[types.ModuleType], dict[str, Any]] | None = None


def own_random(module: types.ModuleType) -> dict[str, Any]:
    """``random``'s module functions bound to a new ``random.Random()`` of the allowlist's own.

    The module functions are methods of one hidden generator shared by the
    whole process; calling them through a copy leaves the host's sequence as
    it was. Returns name → bound method of the new generator.
    """
    own = module.Random()
    shared = type(module.random.__self__)
    out: dict[str, Any] = {}
    for name in module.__all__:
        member = getattr(module, name, None)
        if isinstance(getattr(member, "__self__", None), shared):
            out[name] = getattr(own, name)
    return out


#: Builtins and methods of builtin types refused, with the reason (SPEC 12).
REFUSED_BUILTINS: dict[str, str] = {
    "eval": "evaluates a string as code",
    "exec": "runs a string as code",
    "compile": "turns a string into code",
    "open": "reads and writes files",
    "__import__": "imports any module",
    "globals": "returns a module namespace",
    "locals": "returns a namespace",
    "vars": "returns an object's namespace, including hidden members",
    "dir": "lists hidden members by name",
    "type": "returns types, whose hierarchy leads to every class; " + CLASSES,
    "object": "the root of the class hierarchy",
    "super": "reaches parent implementations and hidden members",
    "setattr": "changes objects by name",
    "delattr": "changes objects by name",
    "breakpoint": "starts a debugger",
    "input": "blocks waiting for a terminal",
    "help": "starts the interactive help",
    "memoryview": "exposes the underlying object of a buffer",
    "exit": "ends the process",
    "quit": "ends the process",
    "str.format": ATTRIBUTES,
    "str.format_map": ATTRIBUTES,
}

#: Entries of other packages refused: second evaluators behind a string.
REFUSED_OTHER: dict[str, str] = {
    "pandas.eval": "a second evaluator behind a string",
    "pandas.DataFrame.eval": "a second evaluator behind a string",
    "pandas.DataFrame.query": "a second evaluator behind a string",
    "numexpr.evaluate": "a second evaluator behind a string",
}

#: Standard-library modules refused whole, with the reason.
REFUSED_MODULES: dict[str, str] = {
    # evaluate text as code
    "code": CODE, "codeop": CODE, "timeit": CODE, "cProfile": CODE, "profile": CODE, "doctest": CODE,
    "pdb": CODE, "bdb": CODE, "runpy": CODE, "trace": CODE, "pstats": CODE, "compileall": CODE,
    "py_compile": CODE, "typing": CODE + " (typing.get_type_hints evaluates annotations)",
    # import or resolve by name
    "importlib": BY_NAME, "pkgutil": BY_NAME, "pydoc": BY_NAME, "pickle": BY_NAME + " (unpickling runs code)",
    "marshal": "loads code objects", "shelve": BY_NAME + " (unpickling runs code)", "copyreg": BY_NAME,
    "zipimport": BY_NAME, "modulefinder": BY_NAME,
    "logging": BY_NAME + " (logging.config); logging.Formatter " + ATTRIBUTES,
    # reach frames or interpreter state
    "inspect": FRAMES, "gc": FRAMES, "sys": FRAMES, "traceback": FRAMES, "types": FRAMES + "; builds functions "
    "and code objects", "tracemalloc": FRAMES, "faulthandler": FRAMES, "weakref": FRAMES, "dis": FRAMES,
    "builtins": "the real builtins", "site": FRAMES, "sysconfig": FRAMES,
    # build classes
    "abc": CLASSES + " (abc.ABCMeta); ABC.register changes isinstance for the whole process",
    "enum": CLASSES + " (enum.EnumType, the functional API)",
    # change the process
    "os": PROCESS, "posix": PROCESS, "io": PROCESS, "pathlib": PROCESS, "shutil": PROCESS,
    "tempfile": PROCESS, "subprocess": PROCESS, "multiprocessing": PROCESS, "threading": PROCESS,
    "_thread": PROCESS, "signal": PROCESS, "socket": PROCESS, "ssl": PROCESS, "select": PROCESS,
    "selectors": PROCESS, "resource": PROCESS + " (resource.setrlimit lifts the memory cap)", "ctypes": PROCESS,
    "mmap": PROCESS, "fcntl": PROCESS, "pty": PROCESS, "tty": PROCESS, "termios": PROCESS, "platform": PROCESS,
    "getpass": PROCESS, "locale": PROCESS, "warnings": SHARED_STATE,
    # outlive the run
    "atexit": OUTLIVES, "concurrent": OUTLIVES, "concurrent.futures": OUTLIVES, "sched": OUTLIVES,
    "asyncio.tasks": OUTLIVES, "asyncio.events": OUTLIVES,
}

_SHARED_CONTEXT = SHARED_STATE + " (the thread's decimal context)"
_PRINTS = PROCESS + " (writes to the process's standard output)"

#: The audited table: standard-library module → what it grants and what it leaves out (SPEC 12).
STDLIB: dict[str, Module] = {
    "math": Module("pure functions of numbers and constants"),
    "cmath": Module("pure functions of complex numbers and constants"),
    "decimal": Module("decimal numbers and contexts of your own", left_out={
        "getcontext": _SHARED_CONTEXT, "setcontext": _SHARED_CONTEXT, "localcontext": _SHARED_CONTEXT,
        "DefaultContext": _SHARED_CONTEXT, "BasicContext": SHARED_STATE, "ExtendedContext": SHARED_STATE}),
    "fractions": Module("exact fractions"),
    "statistics": Module("pure statistics of numbers"),
    "random": Module("random numbers from a generator of the allowlist's own", left_out={
        "seed": SHARED_STATE, "setstate": SHARED_STATE, "getstate": SHARED_STATE}, own_copy=own_random),
    "secrets": Module("random tokens from the operating system"),
    "json": Module("JSON text to values and back"),
    "datetime": Module("dates, times and durations (immutable)"),
    "calendar": Module("calendar arithmetic and text", left_out={
        "setfirstweekday": SHARED_STATE, "prmonth": _PRINTS, "prcal": _PRINTS,
        "TextCalendar": _PRINTS + " through its pr* methods",
        "HTMLCalendar": SHARED_STATE + " (class-level lists of CSS classes)",
        "LocaleTextCalendar": PROCESS + " (switches the process's locale)",
        "LocaleHTMLCalendar": PROCESS + " (switches the process's locale)"}),
    "time": Module("clocks and time conversion", left_out={
        "tzset": PROCESS + " (the process's time zone)", "clock_settime": PROCESS + " (the system clock)",
        "clock_settime_ns": PROCESS + " (the system clock)"}),
    "re": Module("regular expressions", left_out={"purge": SHARED_STATE + " (the process's pattern cache)"}),
    "string": Module("text constants, capwords and Template", only=frozenset({
        "ascii_letters", "ascii_lowercase", "ascii_uppercase", "capwords", "digits", "hexdigits", "octdigits",
        "printable", "punctuation", "whitespace", "Template"}),
        whole="string.Formatter " + ATTRIBUTES + "; grant single names such as string.ascii_letters",
        left_out={"Formatter": ATTRIBUTES}),
    "textwrap": Module("wrapping and indenting text", left_out={
        "TextWrapper": SHARED_STATE + " (a class-level translation table)"}),
    "difflib": Module("differences between sequences"),
    "unicodedata": Module("the Unicode database"),
    "html": Module("escaping and unescaping HTML"),
    "html.entities": Module("HTML entity tables, as read-only copies"),
    "urllib.parse": Module("parsing and quoting URLs (no network)"),
    "base64": Module("base16/32/64/85 encodings"),
    "binascii": Module("binary-to-text encodings"),
    "hashlib": Module("hash functions"),
    "hmac": Module("keyed hashes"),
    "uuid": Module("UUIDs", left_out={
        "getnode": PROCESS + " (may run a program to find the hardware address)",
        "uuid1": PROCESS + " (may run a program to find the hardware address)",
        "Enum": CLASSES + " (enum's functional API)"}),
    "itertools": Module("iterator building blocks (the worker bounds endless ones by time)"),
    "functools": Module("higher-order helpers", left_out={
        "update_wrapper": ATTRIBUTES + " (copies any attribute, including a module's namespace)",
        "wraps": ATTRIBUTES, "total_ordering": SHARED_STATE + " (adds methods to a class in place)"}),
    "operator": Module("operators as functions", left_out={
        "attrgetter": ATTRIBUTES, "methodcaller": ATTRIBUTES + " (calls methods by a name built at run time)",
        "itemgetter": ATTRIBUTES + " (a getter built from run-time keys)", "call": "calls any value"}),
    "collections": Module("container types", left_out={
        "namedtuple": CLASSES + " (tuple subclasses whose fields shadow methods)"}),
    "heapq": Module("heap queues on your own lists"),
    "bisect": Module("bisection on your own lists"),
    "dataclasses": Module("reading and copying dataclass instances", left_out={
        "dataclass": SHARED_STATE + " (rewrites a class in place); " + CODE,
        "make_dataclass": CODE + " (string annotations); " + CLASSES}),
    "keyword": Module("Python's keyword lists, as read-only copies"),
    "colorsys": Module("colour-space conversions"),
    "graphlib": Module("topological sorting"),
    "ipaddress": Module("IP addresses and networks (no network)"),
    "fnmatch": Module("shell-style pattern matching of your own strings"),
    "struct": Module("packing and unpacking bytes"),
    "csv": Module("CSV parsing and writing of your own data", left_out={
        "register_dialect": SHARED_STATE, "unregister_dialect": SHARED_STATE,
        "field_size_limit": SHARED_STATE}),
    "pprint": Module("pretty-printed text", left_out={
        "pprint": _PRINTS, "pp": _PRINTS, "PrettyPrinter": _PRINTS}),
    "shlex": Module("shell quoting", only=frozenset({"quote", "join"}),
                    whole=PROCESS + " (shlex.split(None) and shlex.shlex() read the process's standard input); "
                    "grant shlex.quote and shlex.join",
                    left_out={"split": PROCESS + " (reads standard input when given None)",
                              "shlex": PROCESS + " (reads standard input when given no text)"}),
    "xml.etree.ElementTree": Module("XML parsing and building of your own text", left_out={
        "parse": PROCESS + " (opens files by name)", "iterparse": PROCESS + " (opens files by name)",
        "ElementTree": PROCESS + " (reads and writes files by name)",
        "canonicalize": PROCESS + " (reads and writes files by name)", "dump": _PRINTS,
        "register_namespace": SHARED_STATE, "TreeBuilder": HIDDEN_STORES,
        "XMLParser": HIDDEN_STORES + " (the methods of its target)"}),
    "asyncio": Module("sleeping and awaiting several calls at once", only=frozenset({"sleep", "gather", "wait_for"}),
                      whole="gives tasks, event loops and subprocesses; grant single functions such as "
                      "asyncio.sleep",
                      left_out={"current_task": FRAMES + " (the running task's coroutine)",
                                "all_tasks": FRAMES + " (running tasks' coroutines)",
                                "get_event_loop": PROCESS + " (the event loop: subprocesses, executors)",
                                "get_running_loop": PROCESS + " (the event loop: subprocesses, executors)",
                                "new_event_loop": OUTLIVES, "run": OUTLIVES, "to_thread": OUTLIVES,
                                "create_task": OUTLIVES, "ensure_future": OUTLIVES, "shield": OUTLIVES,
                                "as_completed": OUTLIVES, "run_coroutine_threadsafe": OUTLIVES,
                                "create_subprocess_exec": PROCESS, "create_subprocess_shell": PROCESS}),
}


def is_stdlib(module_path: str) -> bool:
    """Whether the dotted ``module_path`` belongs to Python's standard library."""
    return module_path.split(".")[0] in sys.stdlib_module_names


def module_refusal(module_path: str) -> str | None:
    """Why a whole-module entry for the standard-library ``module_path`` is refused, or ``None``."""
    row = STDLIB.get(module_path)
    if row is None:
        return _unlisted_reason(module_path)
    return row.whole if row.only is not None else None


def member_refusal(module_path: str, name: str) -> str | None:
    """Why the standard-library member ``module_path.name`` is refused, or ``None`` when it is granted."""
    row = STDLIB.get(module_path)
    if row is None:
        return _unlisted_reason(module_path)
    reason = row.left_out.get(name)
    if reason is None and row.only is not None and name not in row.only:
        reason = f"'{module_path}.{name}' {NOT_AUDITED}"
    return reason


def _refused_module(module_path: str) -> str | None:
    """The reason :data:`REFUSED_MODULES` gives for ``module_path`` or a package holding it."""
    parts = module_path.split(".")
    for i in range(len(parts), 0, -1):
        reason = REFUSED_MODULES.get(".".join(parts[:i]))
        if reason is not None:
            return reason
    return None


def _unlisted_reason(module_path: str) -> str:
    return _refused_module(module_path) or f"the standard-library module '{module_path}' {NOT_AUDITED}"


def read_only(value: Any) -> Any:
    """``value`` with its containers made read-only copies: dict → ``mappingproxy``, list → tuple, set → frozenset.

    Applied to module-level values of granted standard-library modules, so a
    cell cannot change a table the host (and later cells) read
    (``html.entities.html5.clear()``). Other values are returned unchanged.
    """
    if isinstance(value, dict):
        return types.MappingProxyType({k: read_only(v) for k, v in dict.items(value)})
    if isinstance(value, (list, tuple)) and type(value) in (list, tuple):
        return tuple(read_only(v) for v in value)
    if isinstance(value, (set, frozenset)):
        return frozenset(value)
    if isinstance(value, bytearray):
        return bytes(value)
    return value


def public_members(module: types.ModuleType) -> dict[str, Any]:
    """A module's public members that are not modules: ``__all__`` when it has one, else its namespace."""
    public = getattr(module, "__all__", None)
    names = public if isinstance(public, (list, tuple)) else list(vars(module))
    out: dict[str, Any] = {}
    for raw in names:
        if not isinstance(raw, str):
            continue
        name = str.__str__(raw)
        if name.startswith("_"):
            continue
        try:
            obj = getattr(module, name)
        except AttributeError:
            continue
        if not isinstance(obj, types.ModuleType):
            out[name] = obj
    return out


def stdlib_members(module_path: str, module: types.ModuleType) -> tuple[dict[str, Any], dict[str, str]]:
    """The members a whole-module entry for an audited module grants, and those it leaves out.

    Returns ``(granted, left_out)``: name → object to grant (own copies and
    read-only copies applied), and name → reason. Metaclasses are always left
    out (:data:`CLASSES`).
    """
    row = STDLIB[module_path]
    copies = row.own_copy(module) if row.own_copy is not None else {}
    granted: dict[str, Any] = {}
    left_out: dict[str, str] = {}
    for name, obj in public_members(module).items():
        reason = member_refusal(module_path, name)
        if reason is None and is_metaclass(obj):
            reason = CLASSES
        if reason is not None:
            if row.only is None or name in row.left_out:
                left_out[name] = reason
            continue
        granted[name] = copies[name] if name in copies else read_only(obj)
    return granted, left_out


def stdlib_member(module_path: str, module: types.ModuleType, name: str, obj: Any) -> Any:
    """The object to grant for the single audited member ``module_path.name`` (own or read-only copy)."""
    row = STDLIB[module_path]
    if row.own_copy is not None:
        copies = row.own_copy(module)
        if name in copies:
            return copies[name]
    return read_only(obj)


def _resolve_quietly(path: str) -> Any:
    """The object at ``path`` if its package is a builtin or already imported (never imports pandas), else None."""
    parts = path.split(".")
    obj: Any = vars(builtins).get(parts[0]) if parts[0] in vars(builtins) else sys.modules.get(parts[0])
    if obj is None:
        return None
    for p in parts[1:]:
        obj = getattr(obj, p, None)
        if obj is None:
            return None
    return obj


@functools.lru_cache(maxsize=1)
def _identities() -> tuple[dict[int, str], frozenset[int]]:
    """(refused objects by id → reason, granted objects by id) over the builtins and the audited table.

    Computed once per process (it imports every audited module). The objects
    stay alive as members of their modules, so their ids stay theirs.
    """
    refused: dict[int, str] = {}
    for entry, reason in REFUSED_BUILTINS.items():
        refused[id(_resolve_quietly(entry))] = f"'{entry}' {reason}"
    granted: set[int] = set()
    for module_path in STDLIB:
        try:
            module = importlib.import_module(module_path)
        except ImportError:  # pragma: no cover - every row is a module of this Python
            continue
        for name, obj in public_members(module).items():
            why = member_refusal(module_path, name)
            if why is not None:
                refused.setdefault(id(obj), f"'{module_path}.{name}' {why}")
            elif not is_metaclass(obj):
                granted.add(id(obj))
    return refused, frozenset(granted)


def _home(obj: Any) -> str | None:
    """The module an object comes from (its own ``__module__``, its bound owner's, or its type's)."""
    owner = obj
    if not is_class(obj) and not callable(obj):
        owner = type(obj)
    name: Any = getattr(owner, "__module__", None)
    if type(name) is not str:
        bound = getattr(owner, "__self__", None)
        if isinstance(bound, types.ModuleType):
            name = getattr(bound, "__name__", None)
        elif bound is not None:
            return _home(bound if is_class(bound) else type(bound))
        else:
            objclass = getattr(owner, "__objclass__", None)
            name = getattr(objclass, "__module__", None) if objclass is not None else None
    return name if type(name) is str else None


def object_refusal(obj: Any) -> str | None:
    """Why an object found in your own package may not be granted, or ``None`` (SPEC 12).

    An object is refused when it is a refused builtin or a member the table
    leaves out (by identity, so re-exports are caught), a metaclass, an
    instance of such a class, or when it comes from a standard-library module
    the table does not grant (``subprocess.run`` re-exported, a module-level
    ``logging.Formatter()``).
    """
    refused, granted = _identities()
    others = {id(found): f"'{entry}' is {reason}" for entry, reason in REFUSED_OTHER.items()
              if (found := _resolve_quietly(entry)) is not None}
    for candidate in (obj,) if is_class(obj) else (obj, type(obj)):
        reason = refused.get(id(candidate)) or others.get(id(candidate))
        if reason is not None:
            return reason if candidate is obj else f"an instance of a refused class: {reason}"
    if is_metaclass(obj):
        return CLASSES
    if id(obj) in granted or id(type(obj)) in granted:
        return None
    home = _home(obj)
    if home is None or home == "builtins" or not is_stdlib(home) or home in STDLIB:
        return None
    refused_home = _refused_module(home)
    if refused_home is not None:
        return f"it comes from the standard-library module '{home}', which {refused_home}"
    return f"it comes from the standard-library module '{home}', which {NOT_AUDITED}"


def markdown() -> str:
    """The audited table and the refused modules as Markdown (the part of ``docs/security.md`` generated here)."""
    rows = ["| module | granted for | left out (why) |", "|---|---|---|"]
    for module_path in sorted(STDLIB):
        row = STDLIB[module_path]
        left = "; ".join(f"`{name}` ({why})" for name, why in sorted(row.left_out.items())) or "nothing"
        if row.only is not None:
            named = ", ".join(f"`{n}`" for n in sorted(row.only))
            left = f"only {named} may be named; whole module refused ({row.whole})"
        copies = " Module functions bound to a generator of its own." if row.own_copy is not None else ""
        rows.append(f"| `{module_path}` | {row.grants}.{copies} | {left} |")
    by_reason: dict[str, list[str]] = {}
    for module_path, why in REFUSED_MODULES.items():
        by_reason.setdefault(why, []).append(module_path)
    refused = [f"* {why}: {', '.join(f'`{m}`' for m in sorted(mods))}" for why, mods in by_reason.items()]
    return "\n".join(rows) + "\n\nRefused whole, by reason:\n\n" + "\n".join(refused) + "\n"


if __name__ == "__main__":
    sys.stdout.write(markdown())
