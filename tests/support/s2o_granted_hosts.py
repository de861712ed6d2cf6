"""Host values granted whole through the allowlist: containers of refused values (issue 30, SPEC 12).

Granted in ``tests/security/test_granted_containers.py`` as ``s2o_granted_hosts.<name> as granted``: each
``<kind>_of_<value>`` below is one container kind (:data:`KINDS`) holding one refused value
(:data:`REFUSED`), built at import; ``shared`` is a host object whose attributes hold containers and
iterators of refused values; ``late`` is a granted ``dict`` of plain data that host code fills later.
Nothing here is called by the tests themselves, except :func:`holders` to name the rows.
"""

from __future__ import annotations

import collections
import os
import os.path
import subprocess
import types
from collections.abc import Callable, Iterator
from typing import Any

#: The issue's own payload: a host module's plain dict holding ``os`` and ``exec``.
bag = {"m": os, "e": exec}

#: Values an expression may never reach, by the name the rows use.
REFUSED: dict[str, Any] = {
    "os": os,
    "exec": exec,
    "eval": eval,
    "open": open,
    "a-module": os.path,
    "os.system": os.system,
    "subprocess.Popen": subprocess.Popen,
}


class LyingDict(dict):  # type: ignore[type-arg]
    """A ``dict`` subclass whose own ``keys``, ``values``, ``items`` and iteration say it holds nothing."""

    def keys(self) -> Any:
        return iter(())

    def values(self) -> Any:
        return iter(())

    def items(self) -> Any:
        return iter(())

    def __iter__(self) -> Iterator[Any]:
        return iter(())


#: Container kinds, each a way to hold one value.
KINDS: dict[str, Callable[[Any], Any]] = {
    "dict": lambda v: {"v": v},
    "dict-key": lambda v: {v: 1},
    "list": lambda v: [1, "x", v],
    "tuple": lambda v: ("x", v),
    "set": lambda v: {v},
    "frozenset": lambda v: frozenset({v}),
    "nested": lambda v: [{"k": ("x", [v])}],
    "dict-subclass": lambda v: LyingDict(v=v),
    "mapping-proxy": lambda v: types.MappingProxyType({"v": v}),
    "deque": lambda v: collections.deque([v]),
    "ordered-dict": lambda v: collections.OrderedDict(v=v),
    "iterator": lambda v: iter([1, v]),
}


def holders() -> dict[str, str]:
    """``{attribute name: "<kind> of <value>"}`` for every container of a refused value this module holds."""
    return {f"{kind.replace('-', '_')}_of_{name.replace('-', '_').replace('.', '_')}": f"{kind} of {name}"
            for kind in KINDS for name in REFUSED}


for _kind, _make in KINDS.items():
    for _name, _value in REFUSED.items():
        globals()[f"{_kind.replace('-', '_')}_of_{_name.replace('-', '_').replace('.', '_')}"] = _make(_value)

#: Plain data granted whole: reads fine.
plain = {"a": [1, 2], "b": "x", "c": {"d": [1.5, None]}}
colors = ("red", "green")


def hand_os() -> Any:
    """A host function the allowlist does not name, which returns a module."""
    return os


def double(x: Any) -> Any:
    """A host function the allowlist does not name, harmless."""
    return x * 2


#: Host functions granted inside a container (SPEC 12: your own code is granted as written; what it
#: returns is checked).
functions = {"hand_os": hand_os, "double": double}

#: A granted dict of plain data that host code fills after the allowlist loaded (a plugin registry).
late: dict[str, Any] = {}


def fill_late() -> None:
    """Host code putting ``os`` and ``exec`` into :data:`late` (as a plugin registering itself would)."""
    late.update(m=os, e=exec)


def _generate() -> Iterator[Any]:
    yield os
    yield exec


class _Keys:
    """A host mapping whose keys are refused values (``{**shared.mapping}`` builds a dict of them in C)."""

    def keys(self) -> list[Any]:
        return [exec, os]

    def __getitem__(self, key: Any) -> Any:
        return 1


class Shared:
    """A granted host object whose attributes hold containers and iterators of refused values."""

    def __init__(self) -> None:
        self.d = {"m": os, "e": exec}
        self.items = [exec]
        self.it = iter([exec, os])
        self.its = [iter([exec])]
        self.gen = _generate()
        self.sl = slice(exec, None)
        self.proxy = types.MappingProxyType({"e": exec})
        self.lying = LyingDict(e=exec)
        self.mapping = _Keys()
        self.plain = {"a": [1, 2]}


shared = Shared()

#: Plain text of host code: granting it alone leaves the engine unguarded.
HOST_NAME = "granted-hosts"
