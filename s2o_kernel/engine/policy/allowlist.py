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

from ..errors import S2OError
from . import stdlib_audit as audit
from .denylist import is_metaclass
from .granted import host_module, refused_part
from .guards import GUARDED_REPLACEMENTS
from .wrappers import wrap_generator_function

#: Entries granted with a warning: they block the shared event loop (SPEC 3.1).
BLOCKING_ENTRIES: dict[str, str] = {
    "time.sleep": "blocks the shared event loop; use an async sleep",
    "select.select": "blocks the shared event loop",
}


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
        if type(name) is str and name.startswith("_"):
            # Python's own machinery probes dunders (inspect, copy, pickle) and expects AttributeError;
            # expressions cannot name these (the underscore rule), so nothing is given away
            raise AttributeError(name)
        raise S2OError("not-allowed", f"'{self.__path}.{name}' is not in the allowlist")

    def __setattr__(self, name: str, value: Any) -> None:
        raise S2OError("not-allowed", f"'{self.__path}' is read-only")

    def __delattr__(self, name: str) -> None:
        raise S2OError("not-allowed", f"'{self.__path}' is read-only")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        granted = ", ".join(f"{self.__path}.{n}" for n in sorted(namespace_members(self))) or "nothing"
        raise S2OError("not-allowed", f"'{self.__path}' itself is not in the allowlist (granted: {granted})")

    def __repr__(self) -> str:
        return f"<granted {self.__kind} {self.__path}>"

    def __dir__(self) -> list[str]:
        return sorted(namespace_members(self))


#: The namespace's own bookkeeping, held in its instance dictionary beside the members.
_OWN = frozenset({"_Namespace__path", "_Namespace__kind"})


def namespace_members(ns: Namespace) -> dict[str, Any]:
    """The granted members of a namespace, name → object (for completion, ``name?`` and the
    ``not-allowed`` message of calling it); never the namespace's own path and kind."""
    return {k: v for k, v in vars(ns).items() if k not in _OWN}


def namespace_path(ns: Namespace) -> str:
    """The dotted path a namespace stands for (``"urllib.parse"``)."""
    path: str = object.__getattribute__(ns, "_Namespace__path")
    return path


@dataclass(frozen=True)
class Located:
    """Where an entry's object was found.

    Attributes:
        kind: ``"module"``, ``"builtin"`` or ``"member"``.
        obj: the object.
        module: the dotted module the entry starts in (``"urllib.parse"``),
            ``None`` for builtins.
        rest: the names after the module (``["date", "today"]`` for
            ``datetime.date.today``).
        owner: the module object (``None`` for builtins).
    """

    kind: str
    obj: Any
    module: str | None = None
    rest: tuple[str, ...] = ()
    owner: types.ModuleType | None = None


def locate(path: str) -> Located:
    """Find the object an entry names, and the module it starts in.

    Raises ``LookupError`` when it cannot be imported.
    """
    parts = path.split(".")
    if any(not p.isidentifier() for p in parts):
        raise LookupError(path)
    if (parts[0] in vars(builtins) and not parts[0].startswith("_")) or parts[0] == "__import__":
        obj: Any = vars(builtins)[parts[0]]
        for p in parts[1:]:
            try:
                obj = getattr(obj, p)
            except AttributeError:
                raise LookupError(path) from None
        return Located("builtin" if len(parts) == 1 else "member", obj, rest=tuple(parts[1:]))
    for i in range(len(parts), 0, -1):
        modname = ".".join(parts[:i])
        try:
            module = importlib.import_module(modname)
        except ImportError:
            continue
        except Exception:  # a module failing at import time
            raise LookupError(path) from None
        obj = module
        for p in parts[i:]:
            try:
                obj = getattr(obj, p)
            except AttributeError:
                raise LookupError(path) from None
        rest = tuple(parts[i:])
        if isinstance(obj, types.ModuleType):
            # the module itself, or a module reached as an attribute (audited under its own name)
            name = getattr(obj, "__name__", None)
            return Located("module", obj, str.__str__(name) if isinstance(name, str) else path, (), obj)
        return Located("member", obj, modname, rest, module)
    raise LookupError(path)


def resolve(path: str) -> tuple[str, Any]:
    """Find the object an entry names; returns ``(kind, object)``.

    ``kind`` is ``"module"``, ``"builtin"`` or ``"member"``. Raises
    ``LookupError`` when it cannot be imported.
    """
    found = locate(path)
    return found.kind, found.obj


@dataclass
class Allowlist:
    """A loaded allowlist.

    Attributes:
        names: name → granted object (real functions and classes, or
            :class:`Namespace` views of modules and partly granted types).
        warnings: one message per entry granted with a warning.
        text: the allowlist text it was loaded from.
        host: the names bound to something of host code (an entry of a module outside the standard
            library and this project): the engine guards what is reached through them (SPEC 12).
    """

    names: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    text: str = ""
    host: set[str] = field(default_factory=set)

    def grants(self, dotted: str) -> bool:
        """Whether ``dotted`` (``"json"``, ``"math.sqrt"``) is granted (``sys.exists('allowlist', …)``)."""
        obj = self.lookup(dotted)
        return obj is not None

    def lookup(self, dotted: str) -> Any:
        """The granted object at ``dotted``, or ``None`` (never raises).

        ``dotted`` is read as an exact ``str`` copy, so a ``str`` subclass
        cannot steer the lookup with its own ``split`` or ``startswith``.
        """
        if not isinstance(dotted, str):
            return None
        parts = str.__str__(dotted).split(".")
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
        return obj is not None and type(obj) is not Namespace and _inspect.iscoroutinefunction(obj)


def _own_members(module: types.ModuleType, left_out: dict[str, str], unsafe_ok: bool) -> dict[str, Any]:
    """Public non-module members of one of your own modules, without refused objects (SPEC 12)."""
    members = {}
    for name, obj in audit.public_members(module).items():
        why = None if unsafe_ok else value_refusal(name, obj)
        if why is not None:
            left_out[name] = why
            continue
        members[name] = grant(obj)
    return members


def module_members(found: Located, left_out: dict[str, str], unsafe_ok: bool) -> dict[str, Any]:
    """What a whole-module (or star) entry grants: name → object; refused members go to ``left_out``.

    A standard-library module is granted from the audited table (own and
    read-only copies, mutators left out); with ``unsafe_ok`` every public
    member is granted as it is. Your own modules are granted as written,
    without refused objects.
    """
    module = found.owner
    assert module is not None and found.module is not None
    if audit.is_stdlib(found.module):
        if unsafe_ok or found.module not in audit.STDLIB:
            return {name: grant(obj) for name, obj in audit.public_members(module).items()}
        granted, refused = audit.stdlib_members(found.module, module)
        left_out.update(refused)
        return {name: grant(obj) for name, obj in granted.items()}
    return _own_members(module, left_out, unsafe_ok)


def grant(obj: Any) -> Any:
    """The object an entry grants: a guarded stand-in where one exists, generator functions wrapped."""
    replacement = GUARDED_REPLACEMENTS.get(id(obj))
    if replacement is not None:
        return replacement
    if _inspect.isgeneratorfunction(obj) or _inspect.isasyncgenfunction(obj):
        return wrap_generator_function(obj)
    return obj


def entry_refusal(path: str, found: Located) -> str | None:
    """Why the entry ``path`` is refused when the allowlist loads, or ``None`` (SPEC 12).

    Builtins: :data:`stdlib_audit.REFUSED_BUILTINS` (a member of a refused
    builtin is refused with it). Standard library: the audited table (an
    unlisted module is "not audited"). Other packages: second evaluators
    (:data:`stdlib_audit.REFUSED_OTHER`) and refused objects found in them
    (:func:`stdlib_audit.object_refusal`). A metaclass is refused wherever it
    comes from.
    """
    if path in audit.REFUSED_OTHER:
        return audit.REFUSED_OTHER[path]
    if found.module is None:
        top = path.split(".")[0]
        why = audit.REFUSED_BUILTINS.get(path) or audit.REFUSED_BUILTINS.get(top)
    elif audit.is_stdlib(found.module):
        why = (audit.member_refusal(found.module, found.rest[0]) if found.rest
               else audit.module_refusal(found.module))
    elif found.kind == "module":
        why = None
    else:
        why = value_refusal(path, found.obj)
    if why is None and is_metaclass(found.obj):
        why = audit.CLASSES
    return why


def value_refusal(path: str, value: Any) -> str | None:
    """Why the value of your own code granted as ``path`` is refused, or ``None`` (SPEC 4, 12): it, or
    anything it holds at any depth (a ``dict``, list, set, their subclasses, a mapping proxy, an iterator
    over them: :func:`.granted.refused_part`), is refused by class, and the reason says where
    (``"it holds a refused value at mymodule.bag['m']: a module …"``)."""
    found = refused_part(value)
    if found is None:
        return None
    where, why = found
    return why if not where else f"it holds a refused value at {path}{where}: {why}"


def _from_host(found: Located) -> bool:
    """Whether an entry found at ``found`` is host code's: its module is neither standard library nor ours."""
    return found.module is not None and host_module(found.module)


def granted_object(found: Located) -> Any:
    """The object a single (non-module) entry grants: own or read-only copies for the standard library."""
    if found.module is not None and len(found.rest) == 1 and found.module in audit.STDLIB:
        assert found.owner is not None
        return grant(audit.stdlib_member(found.module, found.owner, found.rest[0], found.obj))
    return grant(found.obj)


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
    failures are entries refused by SPEC 12 (:func:`entry_refusal`).
    ``text`` is read as an exact ``str`` copy.
    """
    text = str.__str__(text)
    out = Allowlist(text=text)
    failures: dict[str, str] = {}
    refused: dict[str, str] = {}
    for raw in text.splitlines():
        written = raw.strip()
        if not written or written.startswith("#"):
            continue
        parsed = _parse_line(raw)
        if isinstance(parsed, str):
            failures[written] = parsed
            continue
        path, _alias, star = parsed
        try:
            found = locate(path)
        except LookupError:
            failures[written] = "Could not be imported."
            continue
        why = entry_refusal(path, found)
        if why is not None:
            if not allow_unsafe_entries:
                refused[written] = f"'{path}' is refused: {why}. Set allow_unsafe_entries = true to accept it."
                continue
            out.warnings.append(f"{path}: accepted although unsafe ({why})")
        if path in BLOCKING_ENTRIES:
            out.warnings.append(f"{path}: {BLOCKING_ENTRIES[path]}")
        if star and found.kind != "module":
            failures[written] = "Only a module can be star-imported."
            continue
        _apply_entry(out, parsed, found, allow_unsafe_entries)
    if failures or refused:
        lines = {**refused, **failures}
        ordered = {w: lines[w] for w in (r.strip() for r in text.splitlines()) if w in lines}
        code = "allowlist" if failures else "refused-entry"
        summary = "; ".join(f"{line}: {msg}" for line, msg in ordered.items())
        raise S2OError(code, f"the allowlist did not load: {summary}", stage="load", details={"lines": ordered})
    return out


def _apply_entry(out: Allowlist, parsed: tuple[str, str | None, bool], found: Located, unsafe_ok: bool) -> None:
    """Bind one loaded entry (``(path, alias, star)``) into ``out.names``, its warnings into ``out.warnings``."""
    path, alias, star = parsed
    if found.kind != "module":
        value = granted_object(found)
    else:
        left_out: dict[str, str] = {}
        members = module_members(found, left_out, unsafe_ok)
        if left_out:
            what = f"{path}.*: left out" if star else f"{path}: granted without"
            out.warnings.append(f"{what} {', '.join(sorted(left_out))} (refused entries)")
        if star:
            out.names.update(members)
            if _from_host(found):
                out.host.update(members)
            return
        value = Namespace(path, members)
        for bname, reason in BLOCKING_ENTRIES.items():
            mod, _, member = bname.rpartition(".")
            if mod == path and member in members:
                out.warnings.append(f"{path}: {bname} {reason}")
    name = alias if alias is not None else path.split(".")[0]
    if _from_host(found):
        out.host.add(name)
    if alias is not None:
        out.names[alias] = value
    else:
        _merge_path(out.names, path.split("."), value)


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
