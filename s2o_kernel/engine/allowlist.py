"""The allowlist: the complete set of names an expression may use (SPEC 4, 12).

The allowlist is text, one entry a line (``#`` starts a comment). Entries:

=====================  ==========================  ============================
form                   entry                       used as
=====================  ==========================  ============================
builtin                ``len``                     ``len(items)``
builtin type           ``str``                     ``str(5)``, ``str.join(...)``
one method of a type   ``str.join``                ``str.join('-', parts)``
one name of a module   ``math.sqrt``               ``math.sqrt(16)``
whole module           ``math``                    ``math.sqrt(16)``
star                   ``math.*``                  ``sqrt(16)``
rename                 ``math.sqrt as sqrt``       ``sqrt(16)``
=====================  ==========================  ============================

:func:`load_allowlist` turns the text into a mapping name → object, all or
nothing. A granted module (or a partly granted type) is a read-only
:class:`Namespace` that exposes only its granted members and raises
``not-allowed`` for anything else, at every hop, so an imported module is
never handed out. Entries that are dangerous in themselves are refused
(code ``refused-entry``) unless ``allow_unsafe_entries`` is set.
"""

from __future__ import annotations

import builtins
import importlib
import inspect as _inspect
import types
from dataclasses import dataclass, field
from typing import Any

from .errors import S2OError
from .guards import GUARDED_REPLACEMENTS, wrap_generator_function

#: Entries refused when the allowlist loads (SPEC 12), with the reason.
REFUSED_ENTRIES: dict[str, str] = {
    "eval": "evaluates a string as code",
    "exec": "runs a string as code",
    "compile": "turns a string into code",
    "open": "reads and writes files",
    "__import__": "imports any module",
    "globals": "returns a module namespace",
    "locals": "returns a namespace",
    "vars": "returns an object's namespace, including hidden members",
    "dir": "lists hidden members by name",
    "type": "returns types, whose hierarchy leads to every class; builds classes with three arguments",
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
    "typing": "typing.get_type_hints evaluates strings as code",
    "inspect": "returns frames, closures and members by name",
    "types": "builds functions, code objects and tracebacks",
    "gc": "reaches every object of the process",
    "importlib": "imports any module",
    "asyncio": "gives tasks, event loops and subprocesses; grant single functions such as asyncio.sleep",
    "asyncio.current_task": "returns the running task, whose coroutine leads to frames",
    "asyncio.all_tasks": "returns running tasks, whose coroutines lead to frames",
    "asyncio.get_event_loop": "returns the event loop (subprocesses, executors)",
    "asyncio.get_running_loop": "returns the event loop (subprocesses, executors)",
    "asyncio.new_event_loop": "creates event loops outside the runtime",
    "asyncio.create_subprocess_exec": "starts processes",
    "asyncio.create_subprocess_shell": "starts processes",
    "asyncio.to_thread": "runs code outside the event loop and limits",
    "asyncio.run": "runs a new event loop",
    "sys": "the interpreter itself (modules, frames, exit)",
    "os": "files, processes and the environment",
    "posix": "files, processes and the environment",
    "builtins": "the real builtins",
    "subprocess": "starts processes",
    "ctypes": "reads and writes process memory",
    "pickle": "unpickling runs code",
    "marshal": "loads code objects",
    "shelve": "unpickling runs code",
    "code": "an interactive interpreter",
    "codeop": "compiles code",
    "pdb": "a debugger",
    "bdb": "a debugger",
    "threading": "runs code outside the runtime and limits",
    "multiprocessing": "starts processes",
    "signal": "changes signal handlers",
    "socket": "opens network connections",
    "shutil": "copies and removes files",
    "pathlib": "reads and writes files",
    "tempfile": "creates files",
    "io": "opens files",
    "weakref": "reaches objects behind the runtime's back",
    "copyreg": "changes how objects are pickled",
    "runpy": "runs modules",
    "traceback": "traceback records expose frames, host source and locals",
    "tracemalloc": "process internals",
    "faulthandler": "process internals",
    "site": "interpreter set-up",
    "string.Formatter": "field traversal reads any attribute from a format string",
    "string": "string.Formatter reads any attribute from a format string; grant single names such as string.ascii_letters",
    "functools.update_wrapper": "copies any attribute, including a module's namespace, by name",
    "functools.wraps": "copies any attribute by name",
    "operator.attrgetter": "reads attributes by a name built at run time",
    "operator.methodcaller": "calls methods by a name built at run time",
    "operator.call": "calls any value",
    "dataclasses.make_dataclass": "string annotations are evaluated as code by typing helpers",
    "logging.currentframe": "returns frames",
    "pandas.eval": "a second evaluator behind a string",
    "numexpr.evaluate": "a second evaluator behind a string",
}

#: Entries granted with a warning: they block the shared event loop (SPEC 3.1).
BLOCKING_ENTRIES: dict[str, str] = {
    "time.sleep": "blocks the shared event loop; use an async sleep",
    "select.select": "blocks the shared event loop",
}


def _dangerous_objects() -> dict[int, str]:
    """Objects of refused entries by id, to leave them out of whole-module grants."""
    found: dict[int, str] = {}
    for entry in REFUSED_ENTRIES:
        obj = _try_resolve(entry)
        if obj is not None and not isinstance(obj, types.ModuleType):
            found[id(obj)] = entry
    import operator
    found[id(operator.itemgetter)] = "operator.itemgetter"
    return found


def _try_resolve(entry: str) -> Any:
    try:
        return resolve(entry)[1]
    except LookupError:
        return None


class Namespace:
    """A read-only view of a granted module or type (SPEC 4).

    Only granted members are attributes; reading any other public name
    raises ``S2OError("not-allowed", "'json.codecs' is not in the
    allowlist")``; setting or deleting raises ``not-allowed`` too. Members are
    held in the instance dictionary so a granted lookup costs what a normal
    attribute read costs.
    """

    def __init__(self, path: str, members: dict[str, Any], kind: str = "module") -> None:
        object.__setattr__(self, "_Namespace__path", path)
        object.__setattr__(self, "_Namespace__kind", kind)
        self.__dict__.update(members)

    def __getattr__(self, name: str) -> Any:
        raise S2OError("not-allowed", f"'{self.__path}.{name}' is not in the allowlist")

    def __setattr__(self, name: str, value: Any) -> None:
        raise S2OError("not-allowed", f"'{self.__path}' is read-only")

    def __delattr__(self, name: str) -> None:
        raise S2OError("not-allowed", f"'{self.__path}' is read-only")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        granted = ", ".join(f"{self.__path}.{n}" for n in sorted(self.__dict__)) or "nothing"
        raise S2OError("not-allowed", f"'{self.__path}' itself is not in the allowlist (granted: {granted})")

    def __repr__(self) -> str:
        return f"<granted {self.__kind} {self.__path}>"

    def __dir__(self) -> list[str]:
        return sorted(self.__dict__)


def namespace_members(ns: Namespace) -> dict[str, Any]:
    """The granted members of a namespace (for completion and ``sys.exists``)."""
    return dict(vars(ns))


def namespace_path(ns: Namespace) -> str:
    """The dotted path a namespace stands for (``"urllib.parse"``)."""
    return object.__getattribute__(ns, "_Namespace__path")


def resolve(path: str) -> tuple[str, Any]:
    """Find the object an entry names; returns ``(kind, object)``.

    ``kind`` is ``"module"``, ``"builtin"`` or ``"member"``. Raises
    ``LookupError`` when it cannot be imported.
    """
    parts = path.split(".")
    if any(not p.isidentifier() for p in parts):
        raise LookupError(path)
    if parts[0] in vars(builtins) and not parts[0].startswith("_") or parts[0] == "__import__":
        obj: Any = vars(builtins)[parts[0]]
        for p in parts[1:]:
            try:
                obj = getattr(obj, p)
            except AttributeError:
                raise LookupError(path) from None
        return ("builtin" if len(parts) == 1 else "member"), obj
    for i in range(len(parts), 0, -1):
        modname = ".".join(parts[:i])
        try:
            obj = importlib.import_module(modname)
        except ImportError:
            continue
        except Exception:  # a module failing at import time
            raise LookupError(path) from None
        if i == len(parts):
            return "module", obj
        for p in parts[i:]:
            try:
                obj = getattr(obj, p)
            except AttributeError:
                raise LookupError(path) from None
        if isinstance(obj, types.ModuleType):
            # a submodule reached as an attribute but not importable by name
            return "module", obj
        return "member", obj
    raise LookupError(path)


@dataclass
class Allowlist:
    """A loaded allowlist.

    Attributes:
        names: name → granted object (real functions and classes, or
            :class:`Namespace` views of modules and partly granted types).
        warnings: one message per entry granted with a warning.
        text: the allowlist text it was loaded from.
    """

    names: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    text: str = ""

    def grants(self, dotted: str) -> bool:
        """Whether ``dotted`` (``"json"``, ``"math.sqrt"``) is granted (``sys.exists('allowlist', …)``)."""
        obj = self.lookup(dotted)
        return obj is not None

    def lookup(self, dotted: str) -> Any:
        """The granted object at ``dotted``, or ``None`` (never raises)."""
        parts = dotted.split(".")
        if parts[0] not in self.names or any(p.startswith("_") for p in parts):
            return None
        obj = self.names[parts[0]]
        for p in parts[1:]:
            if isinstance(obj, Namespace):
                obj = vars(obj).get(p)
                if obj is None:
                    return None
            else:
                try:
                    obj = _inspect.getattr_static(obj, p)
                except AttributeError:
                    return None
        return obj

    def is_async(self, dotted: str) -> bool:
        """Whether ``dotted`` is a granted async function (for ``not-awaited``)."""
        obj = self.lookup(dotted)
        return obj is not None and _inspect.iscoroutinefunction(obj)


def _module_members(module: types.ModuleType, path: str, dangerous: dict[int, str],
                    left_out: list[str], unsafe_ok: bool) -> dict[str, Any]:
    """Public non-module members of ``module``, without refused ones."""
    public = getattr(module, "__all__", None)
    names = [n for n in (public if public is not None else vars(module)) if not n.startswith("_")]
    members = {}
    for name in names:
        try:
            obj = getattr(module, name)
        except AttributeError:
            continue
        if isinstance(obj, types.ModuleType):
            continue
        full = f"{path}.{name}"
        if not unsafe_ok and (full in REFUSED_ENTRIES or id(obj) in dangerous):
            left_out.append(name)
            continue
        members[name] = grant(obj)
    return members


def grant(obj: Any) -> Any:
    """The object an entry grants: a guarded stand-in where one exists, generator functions wrapped."""
    replacement = GUARDED_REPLACEMENTS.get(id(obj))
    if replacement is not None:
        return replacement
    if _inspect.isgeneratorfunction(obj) or _inspect.isasyncgenfunction(obj):
        return wrap_generator_function(obj)
    return obj


def _refusal(entry: str, kind: str, obj: Any, dangerous: dict[int, str]) -> str | None:
    if entry in REFUSED_ENTRIES:
        return REFUSED_ENTRIES[entry]
    top = entry.split(".")[0]
    if kind != "builtin" and top in REFUSED_ENTRIES and top not in ("asyncio", "string"):
        return REFUSED_ENTRIES[top]
    if kind == "module" and top in ("asyncio",):
        return REFUSED_ENTRIES["asyncio"]
    if not isinstance(obj, types.ModuleType) and id(obj) in dangerous:
        return REFUSED_ENTRIES.get(dangerous[id(obj)], "dangerous")
    return None


def _parse_line(raw: str) -> tuple[str, str | None, bool] | str:
    """``(path, alias, star)`` for one entry, or an error message."""
    text = raw.split("#", 1)[0].strip()
    alias = None
    if " as " in f" {text} ":
        head, _, tail = text.partition(" as ")
        text, alias = head.strip(), tail.strip()
        if text.endswith(".*"):
            return "A star import cannot be renamed with 'as'."
        if not alias.isidentifier():
            return f"'{alias}' is not a valid name."
        if alias.startswith("_"):
            return "Names starting with '_' cannot be granted."
    star = text.endswith(".*")
    if star:
        text = text[:-2]
    if not text or any(not p.isidentifier() for p in text.split(".")):
        return "Could not be imported."
    if any(p.startswith("_") for p in text.split(".")) and text != "__import__":
        return "Names starting with '_' cannot be granted."
    return text, alias, star


def load_allowlist(text: str, *, allow_unsafe_entries: bool = False) -> Allowlist:
    """Load allowlist ``text`` all or nothing (SPEC 4, 10, 12).

    Returns an :class:`Allowlist`. Raises ``S2OError`` with stage ``load``:
    code ``allowlist`` when any line fails (``details["lines"]`` maps each
    failing line, as written, to its message, e.g. ``"nosuchmodule"`` →
    ``"Could not be imported."``), or ``refused-entry`` when the only
    failures are entries refused by SPEC 12.
    """
    out = Allowlist(text=text)
    failures: dict[str, str] = {}
    refused: dict[str, str] = {}
    dangerous = _dangerous_objects()
    for raw in text.splitlines():
        written = raw.strip()
        if not written or written.startswith("#"):
            continue
        parsed = _parse_line(raw)
        if isinstance(parsed, str):
            failures[written] = parsed
            continue
        path, alias, star = parsed
        try:
            kind, obj = resolve(path)
        except LookupError:
            failures[written] = "Could not be imported."
            continue
        why = _refusal(path, kind, obj, dangerous)
        if why is not None:
            if not allow_unsafe_entries:
                refused[written] = f"'{path}' is refused: {why}. Set allow_unsafe_entries = true to accept it."
                continue
            out.warnings.append(f"{path}: accepted although unsafe ({why})")
        if path in BLOCKING_ENTRIES:
            out.warnings.append(f"{path}: {BLOCKING_ENTRIES[path]}")
        if star:
            if kind != "module":
                failures[written] = "Only a module can be star-imported."
                continue
            left_out: list[str] = []
            for name, member in _module_members(obj, path, dangerous, left_out, allow_unsafe_entries).items():
                out.names[name] = member
            if left_out:
                out.warnings.append(f"{path}.*: left out {', '.join(sorted(left_out))} (refused entries)")
            continue
        value = grant(obj)
        if kind == "module":
            left_out = []
            value = Namespace(path, _module_members(obj, path, dangerous, left_out, allow_unsafe_entries))
            if left_out:
                out.warnings.append(f"{path}: granted without {', '.join(sorted(left_out))} (refused entries)")
            for bname, reason in BLOCKING_ENTRIES.items():
                mod, _, member = bname.rpartition(".")
                if mod == path and member in vars(value):
                    out.warnings.append(f"{path}: {bname} {reason}")
        if alias is not None:
            out.names[alias] = value
        else:
            _merge_path(out.names, path.split("."), value)
    if failures or refused:
        lines = {**refused, **failures}
        ordered = {w: lines[w] for w in (r.strip() for r in text.splitlines()) if w in lines}
        code = "allowlist" if failures else "refused-entry"
        summary = "; ".join(f"{line}: {msg}" for line, msg in ordered.items())
        raise S2OError(code, f"the allowlist did not load: {summary}", stage="load", details={"lines": ordered})
    return out


def _merge_path(names: dict[str, Any], parts: list[str], value: Any) -> None:
    """Bind ``value`` at dotted ``parts``; intermediate levels become namespaces."""
    head = parts[0]
    if len(parts) == 1:
        current = names.get(head)
        if isinstance(current, Namespace) and isinstance(value, Namespace):
            merged = {**vars(current), **vars(value)}
            names[head] = Namespace(namespace_path(value), merged)
        else:
            names[head] = value
        return
    current = names.get(head)
    if current is not None and not isinstance(current, Namespace):
        if not isinstance(current, type):
            return  # the whole object is granted already
        # a type granted whole: keep it
        return
    members = dict(vars(current)) if isinstance(current, Namespace) else {}
    _merge_path_into(members, parts[1:], value, head)
    kind = "type" if isinstance(vars(builtins).get(head), type) else "module"
    path = namespace_path(current) if isinstance(current, Namespace) else head
    names[head] = Namespace(path, members, kind)


def _merge_path_into(members: dict[str, Any], parts: list[str], value: Any, prefix: str) -> None:
    head = parts[0]
    path = f"{prefix}.{head}"
    if len(parts) == 1:
        current = members.get(head)
        if isinstance(current, Namespace) and isinstance(value, Namespace):
            members[head] = Namespace(path, {**vars(current), **vars(value)})
        else:
            members[head] = value
        return
    current = members.get(head)
    if current is not None and not isinstance(current, Namespace):
        return
    sub = dict(vars(current)) if isinstance(current, Namespace) else {}
    _merge_path_into(sub, parts[1:], value, path)
    members[head] = Namespace(path, sub)
