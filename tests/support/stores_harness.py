"""What the store guard's red-team tests share (tests/security/test_store_guard_table.py): a session with some
variables, an expression run that accepts a value or a coded error, and the invariant every one asserts —
no variable is left holding what a session may not keep (SPEC 12)."""

from __future__ import annotations

import collections
import functools
import gc
from typing import Any

import pytest

from s2o_kernel.engine import Engine, S2OError, Session, bare_settings, default_settings
from s2o_kernel.engine.policy.reach import check_kept
from s2o_kernel.engine.policy.values import check_value
from s2o_kernel.engine.policy.wrappers import GuardedCallable

#: The type of a ``functools.lru_cache`` wrapper, whose C cache the values check cannot see into.
_LRU = type(functools.lru_cache(None)(len))


def make_session(allowlist: str | None, state: dict[str, Any]) -> Session:
    """A session on ``allowlist`` (the embedded default when ``None``) with the variables ``state`` set by a
    ``var``."""
    s = Session(Engine(default_settings() if allowlist is None else bare_settings({"allowlist": allowlist})))
    run = s.run_fragment({"var": state})
    assert run.error is None, run.error
    return s


def evaluate_any(s: Session, source: str) -> None:
    """Evaluate ``source``: a value or a coded error are both fine; an internal error is not."""
    try:
        s.evaluate(source)
    except S2OError as err:
        assert err.code, err


def hidden_parts(value: Any) -> list[Any]:
    """What the ``GuardedCallable`` values inside ``value`` wrap, and what the caches of the
    ``functools.lru_cache`` wrappers inside it hold: C state the values check does not open."""
    out: list[Any] = []
    stack, seen = [value], set()
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        if type(v) is GuardedCallable:
            out.append(object.__getattribute__(v, "_fn"))
        elif type(v) is _LRU:
            out.extend(r for r in gc.get_referents(v) if type(r) is dict and "__wrapped__" not in r)
        elif type(v) in (list, tuple, set, frozenset, collections.deque):
            stack.extend(v)
        elif type(v) is dict:
            stack.extend(v.values())
    return out


def assert_clean(s: Session, names: Any) -> None:
    """Every variable named reads back as a value a session may keep (:func:`.reach.check_kept`), wrapped
    callables and caches opened: nothing a later hot read would show that a ``var`` could never have set."""
    for name in names:
        held = s.evaluate(name)
        try:
            check_kept(held, f"the variable '{name}'")
            for part in hidden_parts(held):
                check_kept(part, f"a value hidden in the variable '{name}'")
        except S2OError as err:
            pytest.fail(f"{name} holds a refused value after the run: {held!r} ({err.message})")


def assert_read_clean(s: Session, read: str) -> None:
    """A hot read is refused, or gives a value the values check accepts."""
    try:
        value = s.evaluate(read)
    except S2OError as err:
        assert err.code, err
        return
    try:
        check_value(value, read)
    except S2OError as err:
        pytest.fail(f"the hot read {read} gave a refused value: {value!r} ({err.message})")
