"""The settings-compiled :class:`Engine`: a loaded allowlist, the compile rules and a compile cache (SPEC 3, 4, 10).

An :class:`Engine` loads the allowlist and compile rules of one :class:`~.settings.Settings` and keeps
a cache of compiled expressions keyed by source text, so an expression is parsed, checked, rewritten and
compiled once, into the function form of :mod:`.compiled`, and then run by :mod:`.execution` against a
session's globals dict. An engine holds no variables: sessions (:mod:`.session`) share it.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ...bounds import CACHE_SIZE, SHARED_FINGERPRINTS
from ..errors import ErrorGroup, S2OError
from ..language import rewrites, rules
from ..language.compiled import Compiled, function_code, is_coroutine
from ..language.parsing import not_text, quiet
from ..policy import reach, stores
from ..policy.allowlist import Allowlist, load_allowlist
from ..policy.bounded import BOUNDED_OPERATORS, sized_attribute
from ..policy.guards import format_string, guard_kwargs, guarded_call, guarded_import
from ..policy.kept import guarded_store
from ..policy.parts import PLAIN_TYPES
from ..settings import Settings
from .codestore import CodeStore
from .limits import memory_limit_text, time_limit_text

#: The process-wide compile caches: compile fingerprint → (source, command fields) → result. Engines
#: with equal fingerprints (equal compile-relevant settings: a session reset, a settings change undone,
#: a second session on the same configuration) share one, so they start hot. On disk only through a
#: signed :class:`.codecache.CodeCache`, written by a process that ran the rules itself.
_SHARED: dict[tuple[Any, ...], dict[tuple[str, frozenset[str] | None], Compiled | rules.Checked]] = {}
#: Per compile fingerprint, the keys of its compile cache that a code store loaded (:meth:`Engine.stored`) and
#: that no :meth:`Engine.compile` of an engine with a store has asked for since: the first such ask is a use,
#: told to the store (:meth:`.codestore.CodeStore.used`: the on-disk cache keeps what is used, the worker's
#: recorder reports it to its parent). A forked worker inherits its parent's.
_STORED: dict[tuple[Any, ...], set[tuple[str, frozenset[str] | None]]] = {}

@dataclass
class Validation:
    """What :meth:`Engine.validate` found (SPEC 3).

    Attributes:
        errors: every refusal, each an :class:`S2OError` with stage ``validate``.
        allowlist_names: allowlist names the expression uses.
        local_names: names that must come from locals.
        secrets: secret names read with ``sys.secret['NAME']``.
    """

    errors: list[S2OError] = field(default_factory=list)
    allowlist_names: set[str] = field(default_factory=set)
    local_names: set[str] = field(default_factory=set)
    secrets: set[str] = field(default_factory=set)

    @property
    def ok(self) -> bool:
        """True when the expression passed every rule."""
        return not self.errors


def _validation_of(checked: rules.Checked) -> Validation:
    return Validation(list(checked.errors), set(checked.allowlist_names), set(checked.local_names),
                      set(checked.secrets))


def _two_argument(fn: Any) -> bool:
    if not callable(fn):
        return False
    try:
        inspect.signature(fn).bind(1, 2)
    except TypeError:
        return False
    except ValueError:  # no signature available: accept
        return True
    return True


class Engine:
    """Settings made ready to run: the loaded allowlist, the compile rules and a compile cache.

    ``Engine(settings)`` raises ``S2OError`` with stage ``load`` when the
    allowlist fails (codes ``allowlist``, ``refused-entry``) or an operator
    rewrite names a function that is neither a two-argument allowlist name nor
    one of the engine's bounded operators (code ``settings``). ``warnings``
    lists what loaded with a warning.

    ``guarded`` says whether compiled code checks every value it reaches at run time
    (:mod:`.reach`): on when the allowlist grants a host object (an entry from outside the
    standard library and this project, anything but plain text and numbers, or a value holding a
    host object) or ``guard=True`` is given (a session holding a host object as a local asks for
    it); off with ``allow_unsafe_entries``, where only the worker's OS confinement stands (SPEC 12).
    Guarded code reads the granted names of :attr:`read_through_reach` through the guard and checks
    every result.

    ``code_cache``: a :class:`~.codestore.CodeStore`: a :class:`.codecache.CodeCache` whose records of this
    engine's fingerprint are loaded now and to which every expression it compiles is written (a notebook
    reopened is hot), or the worker's :class:`.codecache.Recorder`; kept by its twins and by a session's
    settings changes.
    """

    def __init__(self, settings: Settings | None = None, *, guard: bool = False,
                 code_cache: CodeStore | None = None) -> None:
        self.settings = settings if settings is not None else Settings()
        self.code_cache = code_cache
        unsafe_ok = self.settings.allow_unsafe_entries
        self.allowlist: Allowlist = load_allowlist(self.settings.allowlist, allow_unsafe_entries=unsafe_ok)
        names = self.allowlist.names
        #: The allowlist grants a host object (from outside the standard library and this project): anything
        #: but plain text and numbers of host code (a container of it may change after loading), or a value
        #: that is or holds a host object.
        self.host_entries = any((name in self.allowlist.host and type(value) not in PLAIN_TYPES)
                                or reach.is_host_object(value) for name, value in names.items())
        self.guarded = not unsafe_ok and (guard or self.host_entries)
        #: Allowlist names whose values guarded code reads through the reach guard (containers, iterators,
        #: instances: :func:`.reach.read_through_reach`).
        self.read_through_reach = frozenset(name for name, value in names.items() if reach.read_through_reach(value))
        self.warnings: list[str] = list(self.allowlist.warnings)
        self.builtins = self._make_builtins()
        limits = self.settings.limits
        rules_cfg = self.settings.rules
        self.rule_context = rules.RuleContext(
            allowlist_names=frozenset(self.allowlist.names),
            is_async_name=self.allowlist.is_async,
            locals=None,
            sys_members=frozenset({"inputs", "query", "secret", "exists", *self.settings.sys.enabled()}),
            secrets=frozenset(self.settings.secrets),
            operators=dict(rules_cfg.operators),
            max_comprehension_depth=rules_cfg.max_comprehension_depth,
            max_for_clauses=rules_cfg.max_for_clauses,
            definition_length=limits.definition_length,
            keeps_nothing=frozenset(name for name, granted in self.allowlist.names.items()
                                    if any(granted is kept for kept in stores.KEEPS_NOTHING)),
        )
        #: Limit (a ``limits`` field) → the name errors give it: ``limits.time``, or ``bounds.time`` on a
        #: twin made by :meth:`bounded`.
        self.limit_names: dict[str, str] = {"time": "limits.time", "llm_cost": "limits.llm_cost"}
        self._guarded_twin: Engine | None = None
        #: everything compilation depends on (see :meth:`compile_fingerprint`)
        self.fingerprint = self.compile_fingerprint()
        shared = _SHARED.pop(self.fingerprint, None)
        if shared is None:
            shared = {}
            _STORED[self.fingerprint] = set()
            while len(_SHARED) >= SHARED_FINGERPRINTS:
                oldest = next(iter(_SHARED))
                del _SHARED[oldest]
                _STORED.pop(oldest, None)
        _SHARED[self.fingerprint] = shared  # most recently used last
        self._cache = shared
        self._stored = _STORED.setdefault(self.fingerprint, set())
        #: source -> Compiled for plain expressions (no command fields): the hot path's lookup
        self.compiled: dict[str, Compiled] = {}
        #: (source, locals, command fields) -> a check that passed (:meth:`check_remembered`)
        self._checks: dict[tuple[str, frozenset[str], frozenset[str]], rules.Checked] = {}
        if code_cache is not None:
            code_cache.load(self)

    def compile_fingerprint(self) -> tuple[Any, ...]:
        """Everything a compiled expression depends on, as a hashable key of the process-wide cache.

        Every field of the :class:`~.rules.RuleContext` (allowlist names, sys members, secret names,
        operator rewrites, comprehension limits, ``definition_length``…; its async-name test stands
        for the allowlist text it was loaded from), the allowlist text and ``allow_unsafe_entries``
        (what each name is bound to), whether code is guarded and which granted names it reads through the
        guard (a module's value may change kind between processes). Code compiled under other rules or
        another allowlist is never served (SPEC 3, 12; tested in ``tests/security``).
        """
        parts: list[Any] = []
        for f in dataclasses.fields(self.rule_context):
            value = getattr(self.rule_context, f.name)
            if callable(value):
                value = "<from the allowlist>"
            elif isinstance(value, dict):
                value = tuple(sorted(value.items()))
            parts.append((f.name, value))
        return (tuple(parts), self.settings.allowlist, self.settings.allow_unsafe_entries, self.guarded,
                tuple(sorted(self.read_through_reach)))

    def with_guard(self) -> Engine:
        """This engine, or a twin with the same settings whose code guards every value it reaches."""
        if self.guarded or self.settings.allow_unsafe_entries:
            return self
        twin = self._guarded_twin
        if twin is None:
            twin = self._guarded_twin = Engine(self.settings, guard=True, code_cache=self.code_cache)
            twin.limit_names = dict(self.limit_names)
        return twin

    def bounded(self, limits: dict[str, tuple[str, float]]) -> Engine:
        """A twin of this engine sharing its allowlist, builtins and compile cache, whose settings' limits
        are replaced: ``limits`` maps a ``limits`` field (``time``, ``llm_cost``) to ``(name, value)``, the
        name being what errors call it (an agent definition's ``bounds.time``, SPEC 7.1)."""
        twin = Engine.__new__(Engine)
        new_limits = self.settings.limits.model_copy(update={k: v for k, (_, v) in limits.items()})
        twin.__dict__.update(self.__dict__, settings=self.settings.model_copy(update={"limits": new_limits}),
                             limit_names={**self.limit_names, **{k: name for k, (name, _) in limits.items()}},
                             _guarded_twin=None)
        return twin

    def time_limit_text(self) -> str:
        """The ``timedOut`` message: ``the run took longer than the time limit (limits.time = 30 s)``."""
        return time_limit_text(self.limit_names["time"], self.settings.limits.time)

    #: True in the containment worker, whose address space is capped at ``limits.memory`` (SPEC 12), so a
    #: ``MemoryError`` there is that cap; set by the worker for its process.
    memory_capped: ClassVar[bool] = False

    def out_of_memory_text(self) -> str:
        """The ``memory-limit`` message: it names ``limits.memory`` where that is the cap (:attr:`memory_capped`);
        in-process the machine ran out, which no setting bounds."""
        if self.memory_capped:
            return memory_limit_text(self.settings.limits.memory)
        return "the evaluation ran out of memory"

    def _make_builtins(self) -> dict[str, Any]:
        table: dict[str, Any] = dict(self.allowlist.names)
        if self.guarded:
            table.update(reach.HELPERS)
        table["__import__"] = guarded_import
        table[rewrites.FSTRING_HELPER] = format_string
        table[rewrites.TYPE_HELPER] = type
        table.update({name: kind for kind, name in rewrites.EXACT_NAMES.items()})
        table[rewrites.PLAIN_TEXT] = rewrites.PLAIN_TEXT_TYPES
        table[rewrites.KWARGS_GUARD] = guard_kwargs
        table[rewrites.SIZED_HELPER] = sized_attribute
        table[rewrites.CALL_GUARD] = guarded_call
        table[rewrites.STORE_GUARD] = guarded_store
        for symbol, setting in self.settings.rules.operators.items():
            if setting in ("on", "off"):
                continue
            target = self.allowlist.names.get(setting)
            if target is None:
                target = BOUNDED_OPERATORS.get(setting)
            if target is None or not _two_argument(target):
                raise S2OError(
                    "settings",
                    f"rules.operators['{symbol}'] = '{setting}': a rewrite must name an allowlist function "
                    f"taking two values or one of {', '.join(sorted(BOUNDED_OPERATORS))}",
                    path=f"rules.operators.{symbol}", stage="load")
            table[rewrites.operator_helper_name(symbol)] = target
        return table

    # -- validation and compilation ---------------------------------------
    def check(self, source: str, *, locals: Iterable[str] | None = None,
              command_fields: Iterable[str] | None = None) -> rules.Checked:
        """Run the compile rules on ``source`` (no caching); see :func:`rules.check_expression`."""
        ctx = self.rule_context
        if locals is not None or command_fields is not None:
            ctx = rules.RuleContext(**{
                **ctx.__dict__,
                "locals": frozenset(locals) if locals is not None else None,
                "command_fields": frozenset(command_fields) if command_fields is not None else None,
            })
        return rules.check_expression(source, ctx)

    def check_remembered(self, source: str, *, locals: Iterable[str], command_fields: Iterable[str]) -> rules.Checked:
        """:meth:`check` for the fragment parser, remembering what passed (without its tree; read only).

        A fragment is checked whole before every run; a loop or an agent run again checks the same
        expressions with the same names known. A refusal is never remembered (its errors get paths).
        """
        key = (source, frozenset(locals), frozenset(command_fields))
        hit = self._checks.get(key)
        if hit is not None:
            return hit
        checked = self.check(source, locals=key[1], command_fields=key[2])
        if not checked.errors:
            checked.tree = None
            if len(self._checks) >= CACHE_SIZE:
                self._checks.clear()
            self._checks[key] = checked
        return checked

    def validate(self, source: str, *, locals: Iterable[str] | None = None) -> Validation:
        """Check ``source`` without running it (SPEC 3).

        ``locals`` are the names of locals set earlier; when ``None``, every
        name that is not reserved or granted counts as a local. Never raises
        for bad input: problems are in ``Validation.errors``.
        """
        return _validation_of(self.check(source, locals=locals))

    def compile(self, source: str, *, command_fields: Iterable[str] | None = None) -> Compiled:
        """Check and compile ``source`` once; later calls return the cached result.

        Raises :class:`S2OError` (an :class:`ErrorGroup` when there are
        several problems) with stage ``validate``.
        """
        if type(source) is not str:  # before it is hashed as a key
            raise not_text(source)
        key = (source, frozenset(command_fields) if command_fields is not None else None)
        hit = self._cache.get(key)
        if hit is None:
            hit = self.compile_uncached(source, key[1])
            self.cached(key, hit)
            if self.code_cache is not None and isinstance(hit, Compiled):
                self.code_cache.write(self, [(key[1], hit)])
        elif key in self._stored and self.code_cache is not None and isinstance(hit, Compiled):
            self._stored.discard(key)  # the first use in this process of what the store loaded
            self.code_cache.used(self, [(key[1], hit)])
        if key[1] is None and isinstance(hit, Compiled) and source not in self.compiled:
            if len(self.compiled) >= CACHE_SIZE:
                self.compiled.clear()
            self.compiled[source] = hit
        if isinstance(hit, rules.Checked):
            errors = hit.errors
            raise (errors[0] if len(errors) == 1 else ErrorGroup(errors))
        return hit

    def cached(self, key: tuple[str, frozenset[str] | None], hit: Compiled | rules.Checked) -> None:
        """Keep ``hit`` as the result of :meth:`compile` for ``key`` (source, command fields or ``None``)
        in the process-wide cache of this engine's fingerprint (:mod:`.codecache` loads records so)."""
        if len(self._cache) >= CACHE_SIZE:
            self._cache.clear()
            self._stored.clear()
        self._cache[key] = hit

    def stored(self, key: tuple[str, frozenset[str] | None], hit: Compiled) -> None:
        """:meth:`cached` for a record a code store loaded: its first use by :meth:`compile` is told to the
        store (:meth:`.codestore.CodeStore.used`), so the store knows what is used (least recently used first
        out, :mod:`.codecache`)."""
        self.cached(key, hit)
        self._stored.add(key)

    def cached_compiled(self, source: str, command_fields: frozenset[str] | None) -> Compiled | None:
        """The :class:`.Compiled` :meth:`compile` has for ``source`` with ``command_fields``, or ``None`` (none,
        or a refusal); compiles nothing, tells no store of a use."""
        hit = self._cache.get((source, command_fields))
        return hit if isinstance(hit, Compiled) else None

    def has_compiled(self, source: str, command_fields: frozenset[str] | None) -> bool:
        """Whether :meth:`compile` has a result for ``source`` with ``command_fields`` without compiling."""
        return (source, command_fields) in self._cache

    def compile_uncached(self, source: str, command_fields: frozenset[str] | None) -> Compiled | rules.Checked:
        """:meth:`compile` without the cache: the result (a refusal as its ``Checked``), neither kept nor written."""
        with quiet():  # one warnings context for the parse and the compile: compiler warnings never show
            return self._compile_quietly(source, command_fields)

    def _compile_quietly(self, source: str, command_fields: frozenset[str] | None) -> Compiled | rules.Checked:
        checked = self._checked(source, command_fields)
        if checked.errors or checked.tree is None:
            return checked
        try:
            code = function_code(checked.tree, awaits=checked.is_async)
        except SyntaxError as exc:
            checked.errors.append(S2OError("syntax", str(exc.msg), line=exc.lineno,
                                           col=(exc.offset - 1) if exc.offset else None,
                                           stage="validate", source=source))
            return checked
        except ValueError as exc:
            checked.errors.append(S2OError("syntax", str(exc), stage="validate", source=source))
            return checked
        except (RecursionError, MemoryError):
            checked.errors.append(S2OError("too-deep", "the expression is too deeply nested to compile",
                                           stage="validate", source=source))
            return checked
        return Compiled(
            source=source,
            code=code,
            local_names=frozenset(checked.local_names),
            name_positions=checked.name_positions,
            may_run_long=checked.may_run_long or checked.is_async,
            may_hold_objects=checked.may_hold_objects or checked.is_async or self.guarded,
            is_coroutine_code=is_coroutine(code),
            top_call=checked.top_call,
            call_at=checked.call_at if checked.top_call else None,
        )

    def _checked(self, source: str, command_fields: frozenset[str] | None) -> rules.Checked:
        """:meth:`check` of ``source``, its tree guarded when this engine is (:func:`.reach.guard_tree`)."""
        checked = self.check(source, command_fields=command_fields)
        if checked.errors:
            return checked
        if checked.tree is None:  # pragma: no cover - a tree without errors is always there
            raise S2OError("unexpected", "the compile rules returned no tree", stage="validate", source=source)
        if self.guarded:
            reach.guard_tree(checked.tree, self.read_through_reach)
        return checked
