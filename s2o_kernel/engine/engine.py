"""The settings-compiled :class:`Engine`: a loaded allowlist, the compile rules and a compile cache (SPEC 3, 4, 10).

An :class:`Engine` loads the allowlist and compile rules of one :class:`~.settings.Settings` and keeps
a cache of compiled expressions keyed by source text, so an expression is parsed, checked and compiled
once and then run with a plain ``eval`` of its code object against a session's one globals dict, or,
from its second run in a session, as a function of the same expression (:mod:`.functions`; see
:mod:`.execution` and ``docs/performance.md``). An engine holds no variables: sessions
(:mod:`.session`) share it.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import types
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from . import functions, reach, rewrites, rules, stores, unwatched
from .allowlist import Allowlist, load_allowlist
from .bounded import BOUNDED_OPERATORS, sized_attribute
from .errors import ErrorGroup, S2OError
from .guards import format_string, guard_kwargs, guarded_call, guarded_import
from .kept import guarded_store
from .limits import memory_limit_text, time_limit_text
from .parsing import not_text, quiet
from .settings import Settings

if TYPE_CHECKING:
    from .codecache import CodeCache, Recorder

#: File name given to compiled expressions (how run-time errors find their position).
FILENAME = "<s2o>"

#: Entries kept in a compile cache (one per compile fingerprint) before it is cleared.
CACHE_SIZE = 4096

#: Narrowed tested functions an expression keeps (one per combination of its names' types).
NARROWED = 4

#: Compile fingerprints whose caches the process keeps; the oldest is dropped past this many.
SHARED_FINGERPRINTS = 16

#: The process-wide compile caches: compile fingerprint → (source, command fields) → result. Engines
#: with equal fingerprints (equal compile-relevant settings: a session reset, a settings change undone,
#: a second session on the same configuration) share one, so they start hot. On disk only through a
#: signed :class:`.codecache.CodeCache`, written by a process that ran the rules itself.
_SHARED: dict[tuple[Any, ...], dict[tuple[str, frozenset[str] | None], Compiled | rules.Checked]] = {}

_ALLOW_TOP_LEVEL_AWAIT = 0x2000  # ast.PyCF_ALLOW_TOP_LEVEL_AWAIT

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


@dataclass
class Compiled:
    """A checked, rewritten and compiled expression (cached per engine)."""

    source: str
    code: types.CodeType
    local_names: frozenset[str]
    name_positions: dict[str, tuple[int, int]]
    may_run_long: bool
    may_hold_objects: bool
    is_coroutine_code: bool
    top_call: bool

    simple: bool = False  # nothing in it dispatches to a value's methods: one eval, no limit bookkeeping
    #: Code that runs no bytecode when these ``(name, exact types)`` hold (:func:`.unwatched.plan`; ``()``:
    #: whatever the names hold, then it is ``simple``): ``Execution.evaluate`` then runs its tested function
    #: without the watchdog. ``None``: always under the time limit.
    unwatched: tuple[tuple[str, frozenset[type]], ...] | None = None
    #: Where the whole-expression call starts (line, col), for ``top_call``: an error raised while it
    #: is awaited for you has no frame of the expression to take a position from. ``None`` otherwise.
    call_at: tuple[int, int] | None = None
    #: The code of its plain and (when ``unwatched`` asks anything) tested function (:mod:`.functions`),
    #: made on first use by :meth:`Engine.functions_of`; ``()`` when it has none (it awaits).
    functions: tuple[types.CodeType, types.CodeType | None] | tuple[()] | None = None
    #: The tested function narrowed to the exact types of its names (in ``unwatched``'s order) and items it
    #: was made for (:meth:`Engine.narrowed_of`); ``None`` where it could not be made. At most :data:`NARROWED`.
    narrowed: dict[tuple[type | None, ...], types.CodeType | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.simple = self.unwatched == () and not (self.may_run_long or self.may_hold_objects
                                                    or self.is_coroutine_code)


def _narrowing(found: unwatched.Plan, compiled: Compiled, observed: tuple[type | None, ...]) -> tuple[
        type | None, ...] | None:
    """``observed`` as :func:`.functions.tested_code` takes it for the plan ``found`` of ``compiled``'s function
    tree: ``None`` unless ``found`` asks of the names ``compiled.unwatched`` names and every name's type is one
    it allows; an item's type it does not allow is read as ``None`` (the item keeps its wider test)."""
    count = len(found.needs)
    if (not found.needs or [name for name, _ in found.needs] != [name for name, _ in compiled.unwatched or ()]
            or len(observed) != count + len(found.tests)
            or not all(kind in kinds for kind, (_, kinds) in zip(observed, found.needs, strict=False))):
        return None
    return observed[:count] + tuple(kind if kind in kinds else None
                                    for kind, (_, kinds) in zip(observed[count:], found.tests, strict=True))


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
    standard library and this project) or ``guard=True`` is given (a session holding a host
    object as a local asks for it); off with ``allow_unsafe_entries``, where only the worker's OS
    confinement stands (SPEC 12).

    ``code_cache``: a :class:`.codecache.CodeCache` whose records of this engine's fingerprint are loaded
    now and to which every expression it compiles is written (a notebook reopened is hot), or the
    worker's :class:`.codecache.Recorder`; kept by its twins and by a session's settings changes.
    """

    def __init__(self, settings: Settings | None = None, *, guard: bool = False,
                 code_cache: CodeCache | Recorder | None = None) -> None:
        self.settings = settings if settings is not None else Settings()
        self.code_cache = code_cache
        unsafe_ok = self.settings.allow_unsafe_entries
        self.allowlist: Allowlist = load_allowlist(self.settings.allowlist, allow_unsafe_entries=unsafe_ok)
        #: The allowlist grants a host object (from outside the standard library and this project).
        self.host_entries = any(reach.is_host_object(o) for o in self.allowlist.names.values())
        self.guarded = not unsafe_ok and (guard or self.host_entries)
        self.warnings: list[str] = list(self.allowlist.warnings)
        self.builtins = self._make_builtins()
        #: Hidden names bound to the engine's own helpers that :func:`.unwatched.plan` plans for: the f-string's
        #: test and helper, and each operator rewritten to a bounded operator with a numeric fast path
        #: (:data:`.rewrites.NUMERIC_SAFE`; not one rewritten to an allowlist function: any code).
        self.unwatched_helpers = frozenset(
            {rewrites.FSTRING_HELPER, rewrites.TYPE_HELPER, rewrites.PLAIN_TEXT}
            | {helper for helper, setting in ((rewrites.operator_helper_name(symbol), setting)
                                              for symbol, setting in self.settings.rules.operators.items())
               if setting in rewrites.NUMERIC_SAFE and self.builtins.get(helper) is BOUNDED_OPERATORS.get(setting)})
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
            while len(_SHARED) >= SHARED_FINGERPRINTS:
                del _SHARED[next(iter(_SHARED))]
        _SHARED[self.fingerprint] = shared  # most recently used last
        self._cache = shared
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
        (what each name is bound to), and whether code is guarded. Code compiled under other rules or
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
        return (tuple(parts), self.settings.allowlist, self.settings.allow_unsafe_entries, self.guarded)

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
        table.update(functions.HIDDEN)
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
        self._cache[key] = hit

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
        unwatched = self._unwatched(checked)
        try:
            code = compile(checked.tree, FILENAME, "eval", flags=_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
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
            may_hold_objects=checked.may_hold_objects or checked.is_async,
            is_coroutine_code=bool(code.co_flags & inspect.CO_COROUTINE),
            top_call=checked.top_call,
            call_at=checked.call_at if checked.top_call else None,
            unwatched=unwatched,
        )

    def _checked(self, source: str, command_fields: frozenset[str] | None, *, function: bool = False) -> rules.Checked:
        """:meth:`check` of ``source``, its tree guarded when this engine is (:func:`.reach.guard_tree`).
        ``function``: for an expression function, where a global is read cheaply: every bounded ``*`` and
        ``%`` gets the numeric fast path comprehensions get (:func:`.rewrites.operator_rewrite`)."""
        if function:
            checked = rules.check_expression(source, dataclasses.replace(self.rule_context, numeric_everywhere=True))
        else:
            checked = self.check(source, command_fields=command_fields)
        if checked.errors:
            return checked
        if checked.tree is None:  # pragma: no cover - a tree without errors is always there
            raise S2OError("unexpected", "the compile rules returned no tree", stage="validate", source=source)
        if self.guarded:
            reach.guard_tree(checked.tree)
        return checked

    def _unwatched(self, checked: rules.Checked) -> unwatched.Needs | None:
        """What :func:`.unwatched.plan` asks of the names of ``checked``; ``None`` for an expression that
        awaits, and for every call of a guarded engine."""
        if checked.is_async:
            return None
        needs = unwatched.needs(checked.tree, self.unwatched_helpers) if checked.tree is not None else None
        return None if self.guarded and needs else needs

    def functions_of(self, compiled: Compiled) -> tuple[types.CodeType, types.CodeType | None] | None:
        """The code of the plain and of the tested function of ``compiled`` (a plain expression this engine, or
        one of the same compile fingerprint, compiled; :mod:`.functions`), made once from the source checked
        again (a compiled expression keeps no tree) and kept on it; ``None`` for one that awaits or does not
        compile so, and ``None`` in place of a tested function it has none of. Raises nothing."""
        codes = compiled.functions
        if codes is None:
            codes = ()
            tree = None if compiled.is_coroutine_code else self._function_tree(compiled.source)
            if tree is not None:
                try:
                    with quiet():  # compiler warnings never show (as for the expression itself)
                        plain = functions.plain_code(tree, FILENAME)
                        found = unwatched.plan(tree, self.unwatched_helpers) if compiled.unwatched else None
                        tested = functions.tested_code(tree, found, None, FILENAME) if found and found.needs else None
                    codes = (plain, tested)
                except (SyntaxError, ValueError, RecursionError, MemoryError):
                    codes = ()
            compiled.functions = codes
        return codes or None

    def narrowed_of(self, compiled: Compiled, observed: tuple[type | None, ...]) -> types.CodeType | None:
        """The code of the tested function of ``compiled`` narrowed to ``observed`` (the exact types its names
        hold, in ``compiled.unwatched``'s order, then its items' types, any other than its plan allows for an
        item read as ``None``: :func:`.functions.tested_code`),
        made once per ``observed`` (at most :data:`NARROWED`) and kept on it; ``None`` when ``observed`` is not
        all types its plan allows, or past :data:`NARROWED`. Raises nothing."""
        if type(observed) is not tuple or not all(
                kind is None or any(kind is exact for exact in rewrites.EXACT_ORDER) for kind in observed):
            return None  # by identity first: the key is hashed next (a metaclass's __hash__ would run)
        if observed in compiled.narrowed or len(compiled.narrowed) >= NARROWED:
            return compiled.narrowed.get(observed)
        code = None
        tree = self._function_tree(compiled.source)
        found = unwatched.plan(tree, self.unwatched_helpers) if tree is not None else None
        kinds = _narrowing(found, compiled, observed) if tree is not None and found is not None else None
        if tree is not None and found is not None and kinds is not None:
            try:
                with quiet():
                    code = functions.tested_code(tree, found, kinds, FILENAME)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                code = None
        compiled.narrowed[observed] = code
        return code

    def _function_tree(self, source: str) -> ast.Expression | None:
        """``source`` checked again for an expression function (:meth:`_checked`, ``function=True``); ``None``
        when it has errors or awaits."""
        with quiet():
            checked = self._checked(source, None, function=True)
        if checked.errors or checked.tree is None or checked.is_async:
            return None
        return checked.tree
